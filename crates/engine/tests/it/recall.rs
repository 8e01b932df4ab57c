//! Nothing clipped is lost: every handle a compaction writes recalls the
//! content it replaced, the prefix is the same on every compaction, and
//! what the model recalled is not clipped again.

use abridge::model::{Arguments, Conversation, Message, Part, Role, ToolCall, ToolResult, decode};
use abridge::recall::{Handle, OriginalKind, Piece};
use abridge::{Compactor, Config};

use crate::support::message_and_tool_tokens;
use serde_json::json;

fn example(name: &str) -> Conversation {
    let path = format!("{}/../../examples/{name}", env!("CARGO_MANIFEST_DIR"));
    decode(&std::fs::read(path).unwrap()).unwrap().remove(0)
}

fn config(target: u64) -> Config {
    let mut c = Config::default();
    c.budget.target_tokens = Some(target);
    c.budget.min_iterations = 1;
    c.budget.kept_cap = 0;
    c
}

/// A compactor of `cfg` with recall off: the history it sends names no
/// handle.
fn without_recall(mut cfg: Config) -> Compactor {
    cfg.recall.enabled = false;
    Compactor::new(cfg).unwrap()
}

/// Every text the history holds: message text, arguments, results.
fn texts(conv: &Conversation) -> Vec<String> {
    let mut out = Vec::new();
    for m in &conv.messages {
        for p in &m.parts {
            match p {
                Part::Text(t) => out.push(t.text.clone()),
                Part::ToolCall(c) => out.push(c.arguments.to_json_text().into_owned()),
                Part::ToolResult(r) => out.push(r.text().into_owned()),
                Part::Image(i) => out.push(i.source.to_url()),
                _ => {}
            }
        }
    }
    out
}

fn handles(conv: &Conversation) -> Vec<Handle> {
    let mut hs: Vec<Handle> = texts(conv)
        .iter()
        .flat_map(|t| Handle::find_all(t).collect::<Vec<_>>())
        .collect();
    hs.sort();
    hs.dedup();
    hs
}

#[test]
fn every_handle_written_recalls_what_it_replaced() {
    for (file, target) in [
        ("coding-agent.openai.json", 900),
        ("web-agent.anthropic.json", 1800),
    ] {
        let conv = example(file);
        let mut c = Compactor::new(config(target)).unwrap();
        let out = c.compact(&conv).unwrap();
        let after = out.conversation.into_owned();
        let hs = handles(&after);
        assert!(hs.len() >= 2, "{file}: {hs:?}");
        let before = texts(&conv);
        for h in &hs {
            let o = c
                .engine()
                .original(h)
                .unwrap_or_else(|| panic!("{file}: {h} is not kept"));
            assert_eq!(&o.handle, h);
            match o.kind {
                OriginalKind::Region => {}
                _ => {
                    for p in &o.pieces {
                        let piece = match p {
                            Piece::Text { text } => text,
                            Piece::Image { url } => url,
                        };
                        assert!(
                            before.iter().any(|t| t.contains(piece.as_str())),
                            "{file}: {h} ({:?}) holds what the history did not",
                            o.kind
                        );
                    }
                }
            }
            let a = c.engine().recall(&json!({"handle": h.as_str()}));
            assert!(!a.is_error, "{file}: {}", a.text());
        }
        // The same history compacts to the same bytes: handles do not move.
        let again = Compactor::new(config(target))
            .unwrap()
            .compact(&conv)
            .unwrap();
        assert_eq!(again.conversation.as_ref(), &after, "{file}");
    }
}

#[test]
fn the_briefing_lists_what_it_replaced_within_its_share() {
    let conv = example("coding-agent.openai.json");
    let mut listed = Vec::new();
    for share in [0.15, 0.5] {
        let mut cfg = config(1100);
        cfg.policies.pipeline = vec![abridge::PolicyKind::Summarize];
        cfg.recall.index_share = share;
        let mut c = Compactor::new(cfg).unwrap();
        let out = c.compact(&conv).unwrap();
        let after = out.conversation.as_ref();
        let i = out.report.briefing.expect("a briefing");
        let briefing = after.messages[i].text_content();
        let (body, index) = briefing
            .split_once("## Recallable originals")
            .expect("an index");
        assert!(index.contains("replaced messages"), "{index}");
        let kind = abridge::tokens::TokenizerKind::O200kBase;
        let taken = kind.count(index) as f64 / kind.count(&briefing) as f64;
        // The region's line is always there; the items share what is left.
        let region_line = index.lines().nth(1).map_or(0, |l| kind.count(l)) as f64;
        assert!(
            taken <= share + region_line / kind.count(&briefing) as f64,
            "share {share}: the index takes {taken:.2} of the briefing\n{index}"
        );
        listed.push(index.lines().filter(|l| l.starts_with("- ")).count());
        assert!(!body.is_empty());
        for h in Handle::find_all(index) {
            assert!(c.engine().original(&h).is_some(), "{h}");
        }
    }
    // A larger share lists more of what was replaced.
    assert!(listed[1] > listed[0], "{listed:?}");
}

#[test]
fn a_recalled_original_is_not_clipped_again() {
    let mut conv = example("coding-agent.openai.json");
    // The model recalled a long original early on: a call and its result.
    let recalled = "fn main() {}\n".repeat(200);
    let at = 3;
    conv.messages.insert(
        at,
        Message {
            role: Role::Assistant,
            parts: vec![Part::ToolCall(Box::new(ToolCall {
                id: "call_r".into(),
                name: "abridge_recall".into(),
                arguments: Arguments::Json(r#"{"handle":"abr_0000000000"}"#.into()),
                extra: Default::default(),
                function_extra: Default::default(),
            }))],
            ..Default::default()
        },
    );
    conv.messages.insert(
        at + 1,
        Message {
            role: Role::Tool,
            parts: vec![Part::ToolResult(Box::new(ToolResult {
                call_id: "call_r".into(),
                parts: vec![Part::text(recalled.clone())],
                form: abridge::model::ContentForm::Text,
                is_error: None,
                extra: Default::default(),
            }))],
            ..Default::default()
        },
    );
    let mut cfg = config(1700);
    cfg.policies.pipeline = vec![abridge::PolicyKind::ClipToolResults];
    cfg.policies.min_result_chars = 10;
    let out = Compactor::new(cfg.clone()).unwrap().compact(&conv).unwrap();
    assert!(out.report.compacted);
    assert!(texts(&out.conversation).contains(&recalled));
    // With recall off, the tool is nobody's: its result is clipped as any.
    cfg.recall.enabled = false;
    let out = Compactor::new(cfg).unwrap().compact(&conv).unwrap();
    assert!(!texts(&out.conversation).contains(&recalled));
}

/// Without recall the room clipping leaves still comes back (the refill
/// finds what it gives back by the handles of this compaction alone), and
/// the history sent names no handle, not even in an excerpt's header.
#[test]
fn with_recall_off_the_room_still_comes_back_and_nothing_names_a_handle() {
    let conv = example("web-agent.anthropic.json");
    let target = 2_500;
    let mut c = without_recall(config(target));
    let out = c.compact(&conv).unwrap();
    let got = out.report.tokens_after.get();
    assert!(got <= target && got * 10 >= target * 9, "{got} of {target}");
    assert_eq!(got, c.count(&out.conversation).get(), "counted as sent");
    assert!(out.report.handles.is_empty());
    assert!(handles(&out.conversation).is_empty());
    assert!(c.engine().recall_tool().is_none());
    let body = texts(&out.conversation).join("\n");
    assert!(!body.contains("recall"), "{body}");
    assert!(body.contains("[excerpt of this block: "), "{body}");
    // What it sends is compacted: sent again, nothing changes.
    let again = Compactor::new(config(target))
        .unwrap()
        .compact(&out.conversation)
        .unwrap();
    assert!(!again.report.compacted);
}

/// Without recall the handles go from what is sent, and the room they
/// took while the steps ran is the refill's too: the history ends short of
/// the target by less than the least room worth giving back (200 tokens
/// at these targets), not by that and every clipped result's handle, at
/// every target — also where that room gives a result back whole, which
/// takes its placeholder's handle with it.
#[test]
fn with_recall_off_the_room_the_handles_took_is_given_back() {
    let mut messages = vec![json!({"role": "user", "content": "Reconcile the ledger."})];
    for i in 0..40 {
        let id = format!("call_{i}");
        let path = format!("src/ledger_{i}.rs");
        messages.push(json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": id, "type": "function", "function":
                {"name": "read_file", "arguments": json!({"path": path}).to_string()}}]}));
        let body: String = (0..12)
            .map(|l| format!("pub fn entry_{i}_{l}(amount: u64) -> Row{i}x{l} {{ todo!() }}\n"))
            .collect();
        messages.push(json!({"role": "tool", "tool_call_id": id, "content": body}));
    }
    messages.push(json!({"role": "assistant", "content": "All forty read."}));
    let body = serde_json::to_vec(&json!({ "messages": messages })).unwrap();
    let conv = decode(&body).unwrap().remove(0);
    for target in (3_000..=9_000).step_by(20) {
        let mut cfg = config(target);
        cfg.policies.pipeline = vec![abridge::PolicyKind::ClipToolResults];
        let mut c = without_recall(cfg);
        let out = c.compact(&conv).unwrap();
        let got = out.report.tokens_after.get();
        assert!(got <= target && got + 200 > target, "{got} of {target}");
        assert!(handles(&out.conversation).is_empty(), "at {target}");
    }
}

#[test]
fn the_recall_tool_is_declared_and_answers_in_pages() {
    let conv = example("coding-agent.openai.json");
    let mut cfg = config(900);
    cfg.policies.pipeline = vec![abridge::PolicyKind::Summarize];
    cfg.recall.page_chars = 1_000;
    let mut c = Compactor::new(cfg).unwrap();
    let out = c.compact(&conv).unwrap();
    let tool = c.engine().recall_tool().unwrap();
    assert_eq!(tool.name, "abridge_recall");
    let properties = tool.parameters["properties"].as_object().unwrap();
    assert!(properties.contains_key("handle") && properties.contains_key("query"));
    // The region transcript is the largest original: it comes in pages.
    let region = handles(&out.conversation)
        .into_iter()
        .find(|h| c.engine().original(h).unwrap().kind == OriginalKind::Region)
        .expect("a region original");
    let first = c.engine().recall(&json!({"handle": region.as_str()}));
    assert!(first.pages > 1, "{}", first.text());
    let last = c
        .engine()
        .recall(&json!({"handle": region.as_str(), "page": first.pages}));
    assert!(last.text().contains("this is the last page"));
    let unknown = c.engine().recall(&json!({"handle": "abr_zzzzzzzzzz"}));
    assert!(unknown.is_error);
}

/// A run that reuses a tool-call id across steps (recorded OpenAI runs
/// do): each result is kept as its own original, under its own call's
/// name, whether it is clipped or briefed.
#[test]
fn a_call_id_used_twice_keeps_both_originals() {
    let mut messages = vec![
        json!({"role": "system", "content": "You are an airline agent."}),
        json!({"role": "user", "content": "Cancel my reservations."}),
    ];
    for step in 0..6 {
        let (id, name, content) = match step {
            1 => ("call_same", "get_user", "first HAT001 ".repeat(150)),
            4 => ("call_same", "get_reservation", "second MSJ4OA ".repeat(150)),
            n => ("", "get_flight", format!("flight {n} ").repeat(150)),
        };
        let id = match id {
            "" => format!("call_{step}"),
            id => id.to_owned(),
        };
        messages.push(json!({"role": "assistant", "content": null, "tool_calls": [{"id": id,
            "type": "function", "function": {"name": name, "arguments": format!("{{\"step\":{step}}}")}}]}));
        messages.push(json!({"role": "tool", "tool_call_id": id, "content": content}));
    }
    messages.push(json!({"role": "assistant", "content": "Both reservations are found."}));
    let body = json!({"model": "gpt-4o", "messages": messages});
    let conv = decode(body.to_string().as_bytes()).unwrap().remove(0);
    for pipeline in [
        vec![abridge::PolicyKind::ClipToolResults],
        vec![abridge::PolicyKind::Summarize],
    ] {
        let mut cfg = config(700);
        cfg.policies.pipeline = pipeline.clone();
        let mut c = Compactor::new(cfg).unwrap();
        let after = c.compact(&conv).unwrap().conversation.into_owned();
        // Everything a handle leads to, following handles in originals.
        let mut todo = handles(&after);
        let mut seen = Vec::new();
        let mut reachable = String::new();
        while let Some(h) = todo.pop() {
            if seen.contains(&h) {
                continue;
            }
            seen.push(h.clone());
            let o = c.engine().original(&h).unwrap();
            reachable.push_str(&format!("{}\n", o.label));
            for p in &o.pieces {
                if let Piece::Text { text } = p {
                    todo.extend(Handle::find_all(text));
                    reachable.push_str(text);
                }
            }
        }
        for (name, id) in [("get_user", "HAT001"), ("get_reservation", "MSJ4OA")] {
            assert!(reachable.contains(id), "{pipeline:?}: {id} is lost");
            let original = seen
                .iter()
                .filter_map(|h| c.engine().original(h))
                .find(|o| {
                    o.kind == OriginalKind::ToolResult
                        && o.pieces
                            .iter()
                            .any(|p| matches!(p, Piece::Text { text } if text.contains(id)))
                });
            let o = original
                .unwrap_or_else(|| panic!("{pipeline:?}: no original of its own holds {id}"));
            assert!(
                o.label.starts_with(name),
                "{pipeline:?}: {id} under {}",
                o.label
            );
        }
    }
}

#[test]
fn stripped_reasoning_is_recalled_with_the_arguments_of_its_call() {
    let conv = abridge::synth::run(abridge::synth::Spec {
        iterations: 12,
        ..abridge::synth::Spec::default()
    });
    let said: Vec<String> = conv
        .messages
        .iter()
        .filter(|m| m.role == Role::Assistant && m.tool_calls().next().is_some())
        .filter_map(|m| m.parts.iter().find_map(Part::as_text).map(str::to_owned))
        .collect();
    assert!(said.len() > 5);
    let mut cfg = Config::from_toml("preset = \"pilo-clipping\"").unwrap();
    cfg.model = conv.model.clone();
    let mut c = Compactor::new(cfg).unwrap();
    // Pilo's target (1 token) is never met: the floor is what goes.
    let out = match c.compact(&conv) {
        Err(abridge::Error::CannotShrink {
            smallest: Some(floor),
            ..
        }) => *floor,
        other => panic!("{other:?}"),
    };
    let left: Vec<String> = texts(&out);
    let stripped: Vec<&String> = said.iter().filter(|t| !left.contains(t)).collect();
    assert!(!stripped.is_empty(), "nothing stripped");
    // Every stripped sentence comes back through a handle on its call.
    let recalled: String = handles(&out)
        .iter()
        .map(|h| c.engine().recall(&json!({"handle": h.as_str()})).text())
        .collect();
    for t in stripped {
        assert!(recalled.contains(t.as_str()), "{t} is lost");
    }
}

/// Reads of files whose names only the results hold, then an iteration a
/// long user message makes too large for the room a briefing leaves: the
/// tail cannot grow by it and nothing in it can be clipped.
fn reads_then_a_long_message() -> Conversation {
    let mut messages = vec![
        json!({"role": "system", "content": "You settle ledgers."}),
        json!({"role": "user", "content": "Find why the ledger does not balance."}),
    ];
    for i in 0..12 {
        let id = format!("call_{i}");
        let args = json!({"path": format!("src/ledger_{i}.rs")}).to_string();
        messages.push(json!({"role": "assistant", "content": "Reading on.",
            "tool_calls": [{"id": id, "type": "function",
                "function": {"name": "read_file", "arguments": args}}]}));
        let body: String = (0..40)
            .map(|j| {
                format!(
                    "pub fn settle_entry_{i}_{j}(book: &mut Book) -> Balance {{ book.close() }}\n"
                )
            })
            .collect();
        messages.push(json!({"role": "tool", "tool_call_id": id, "content": body}));
    }
    messages.push(json!({"role": "assistant", "content": "Read them all."}));
    let notes =
        "The auditors want every change to keep the books as they were at close. ".repeat(400);
    messages.push(json!({"role": "user", "content": notes}));
    messages.push(
        json!({"role": "assistant", "content": "Checking the totals.",
        "tool_calls": [{"id": "last", "type": "function",
            "function": {"name": "run", "arguments": "{\"cmd\":\"cargo test\"}"}}]}),
    );
    messages.push(json!({"role": "tool", "tool_call_id": "last", "content": "2 failed"}));
    let body = json!({"model": "gpt-4o", "messages": messages});
    decode(body.to_string().as_bytes()).unwrap().remove(0)
}

/// What the target leaves beside a complete briefing and a tail that
/// cannot grow goes to the lines of the replaced results that name the
/// most, each under a handle that recalls all of its result; with
/// `summary.result_lines` off that room stays unused.
#[test]
fn the_room_a_briefing_leaves_quotes_what_it_replaced() {
    let conv = reads_then_a_long_message();
    let target = 4_000;
    let run = |lines: bool| {
        let mut cfg = config(target);
        cfg.summary.result_lines = lines;
        let mut c = Compactor::new(cfg).unwrap();
        let out = c.compact(&conv).unwrap();
        let after = out.conversation.into_owned();
        let i = out
            .report
            .briefing
            .unwrap_or_else(|| panic!("no briefing: {:?}", out.report.policies));
        assert!(out.report.tokens_after.get() <= target);
        assert!(abridge::model::validate(&after).is_empty());
        let briefing = after.messages[i].text_content().into_owned();
        (c, out.report.tokens_after.get(), briefing)
    };
    let (_, unused_after, plain) = run(false);
    assert!(
        unused_after < target * 8 / 10,
        "{unused_after}: the fixture leaves room"
    );
    let (c, after, briefing) = run(true);
    assert!(after >= target * 9 / 10, "{after} of {target}:\n{briefing}");
    let (_, section) = briefing
        .split_once("## Lines from the replaced results")
        .expect("a section of quoted lines");
    let section = section.split("## Recallable originals").next().unwrap();
    let quoted: Vec<&str> = section
        .lines()
        .filter(|l| l.contains("settle_entry_"))
        .collect();
    assert!(quoted.len() > 10, "{section}");
    assert!(
        !plain.contains("settle_entry_"),
        "the names were only in the results"
    );
    // Every line quoted is one recall away, whole, under the handle above it.
    let mut handle = None;
    for line in section.lines() {
        if let Some(h) = Handle::find_all(line).next() {
            handle = Some(h);
            continue;
        }
        if line.contains("settle_entry_") {
            let h = handle.as_ref().expect("a handle above the lines");
            let o = c.engine().original(h).expect("kept");
            let Piece::Text { text } = &o.pieces[0] else {
                panic!("text")
            };
            assert!(text.contains(line), "{h} does not hold {line}");
        }
    }
}

/// Without recall a briefing quotes the replaced results' lines the same
/// way, each result under its label alone: the history sent names no
/// handle, and the room the index would have taken is not left unused.
#[test]
fn without_recall_a_briefing_still_quotes_what_it_replaced() {
    let conv = reads_then_a_long_message();
    let target = 4_000;
    let mut c = without_recall(config(target));
    let out = c.compact(&conv).unwrap();
    let after = out.report.tokens_after.get();
    assert!(
        after <= target && after >= target * 9 / 10,
        "{after} of {target}"
    );
    assert_eq!(after, c.count(&out.conversation).get(), "counted as sent");
    assert!(handles(&out.conversation).is_empty());
    let i = out.report.briefing.expect("a briefing");
    let briefing = out.conversation.messages[i].text_content().into_owned();
    let (_, section) = briefing
        .split_once("## Lines from the replaced results")
        .unwrap_or_else(|| panic!("a section of quoted lines:\n{briefing}"));
    assert!(!briefing.contains("## Recallable originals"));
    assert!(!briefing.contains("recall a handle"), "{briefing}");
    let headings: Vec<&str> = section.lines().filter(|l| l.starts_with('[')).collect();
    assert!(!headings.is_empty(), "{section}");
    for h in headings {
        assert!(h.ends_with(']') && !h.contains(" · "), "{h}");
    }
    let quoted = section.lines().filter(|l| l.contains("settle_entry_"));
    assert!(quoted.count() > 10, "{section}");
}

/// A long policy, lookups, and a last result too large to keep whole
/// beside the policy: the region is dropped (a briefing has no room beside
/// the newest iteration) and the newest result is cut to fit with room
/// held for what the steps make of the region.
fn a_policy_then_a_large_last_result() -> Conversation {
    let policy =
        "Before any change, list its details and obtain the user's confirmation. ".repeat(40);
    let mut messages = vec![
        json!({"role": "system", "content": policy}),
        json!({"role": "user", "content": "Move my return flight to the same day."}),
    ];
    for i in 0..6 {
        let id = format!("call_{i}");
        let args = json!({"reservation_id": format!("RES{i:03}")}).to_string();
        messages.push(json!({"role": "assistant", "content": null,
            "tool_calls": [{"id": id, "type": "function",
                "function": {"name": "get_reservation", "arguments": args}}]}));
        let flights: Vec<_> = (0..12)
            .map(|j| json!({"flight_number": format!("HAT{i}{j:02}"), "date": "2024-05-27"}))
            .collect();
        let body = json!({"reservation_id": format!("RES{i:03}"), "flights": flights});
        messages.push(json!({"role": "tool", "tool_call_id": id, "content": body.to_string()}));
    }
    messages.push(
        json!({"role": "assistant", "content": "Searching the flights of that day.",
        "tool_calls": [{"id": "last", "type": "function",
            "function": {"name": "search_flights", "arguments": "{\"date\":\"2024-05-27\"}"}}]}),
    );
    let flights: String = (0..80)
        .map(|j| {
            format!(
                "flight HAT{j:03} DEN to IAH departs {:02}:00 seats 9\n",
                j % 24
            )
        })
        .collect();
    messages.push(json!({"role": "tool", "tool_call_id": "last", "content": flights}));
    let body = json!({"model": "gpt-4o", "messages": messages});
    decode(body.to_string().as_bytes()).unwrap().remove(0)
}

/// When the floor ladder cuts the newest result to fit and the steps take
/// less of the old region than it held for them, the room left goes back
/// to that result, which stays one recall away whole.
#[test]
fn the_room_left_after_the_newest_result_was_cut_goes_back_to_it() {
    let conv = a_policy_then_a_large_last_result();
    let mut c = Compactor::new(Config::default()).unwrap();
    let (tokens, tools) = message_and_tool_tokens(&mut c, &conv);
    let n = tokens.len();
    // Head and newest iteration fit, with too little room beside them for
    // a briefing, or for the note of the region dropped.
    let target = tokens[..2].iter().sum::<u64>() + tokens[n - 2..].iter().sum::<u64>() + tools + 10;
    let mut c = Compactor::new(config(target)).unwrap();
    let out = c.compact(&conv).unwrap();
    let after = out.conversation.into_owned();
    assert!(abridge::model::validate(&after).is_empty());
    let rungs: Vec<_> = out.report.degraded.iter().map(|d| d.rung).collect();
    assert_eq!(
        rungs.last(),
        Some(&abridge::Rung::NewestResultsCut),
        "{rungs:?}"
    );
    let got = out.report.tokens_after.get();
    assert!(got <= target, "{got} > {target}");
    assert!(got * 10 >= target * 9, "{got} of {target}");
    let last = after
        .messages
        .last()
        .unwrap()
        .tool_results()
        .next()
        .unwrap()
        .text();
    let h = Handle::find_all(&last).next().expect("a handle");
    let Piece::Text { text } = &c.engine().original(&h).expect("kept").pieces[0] else {
        panic!("text")
    };
    assert!(text.contains("HAT079") && text.contains("HAT000"), "{text}");
    assert!(last.contains("HAT000") && last.contains("HAT079"), "{last}");
}

/// An old page snapshot clipped by `clip_external` gets the room the
/// target leaves back as an excerpt inside its tags, under its handle, and
/// a later compaction that needs the room puts its placeholder back under
/// the same handle.
#[test]
fn an_old_page_snapshot_gets_the_room_back_as_an_excerpt_inside_its_tags() {
    let conv = example("web-agent.anthropic.json");
    let target = 2_500;
    let mut c = Compactor::new(config(target)).unwrap();
    let out = c.compact(&conv).unwrap();
    let got = out.report.tokens_after.get();
    assert!(got <= target && got * 10 >= target * 9, "{got} of {target}");
    let after = out.conversation.into_owned();
    assert!(abridge::model::validate(&after).is_empty());
    let all = texts(&after).join("\n");
    let at = all.find("[excerpt of this block: ").expect("an excerpt");
    let opened = all[..at]
        .rfind("<EXTERNAL-CONTENT")
        .expect("inside its tags");
    assert!(
        !all[opened..at].contains("</EXTERNAL-CONTENT>"),
        "inside its tags"
    );
    let h = Handle::find_all(&all[at..]).next().expect("a handle");
    let original = c.engine().original(&h).expect("kept");
    assert_eq!(original.kind, OriginalKind::External);
    let Piece::Text { text: whole } = &original.pieces[0] else {
        panic!("text")
    };
    let shown = all[at..].split("</EXTERNAL-CONTENT>").next().unwrap();
    assert!(whole.len() > shown.len(), "an excerpt, not the whole");
    // Tighter: the excerpt goes back to the placeholder naming the same
    // original (and, with the room left, comes back from it): no original
    // is made of an excerpt.
    let mut c2 = Compactor::new(config(target * 3 / 4)).unwrap();
    let again = c2.compact(&after).unwrap().conversation.into_owned();
    let all = texts(&again).join("\n");
    assert!(all.contains(h.as_str()), "{all}");
    for h in Handle::find_all(&all) {
        let Some(o) = c2.engine().original(&h) else {
            continue;
        };
        for p in &o.pieces {
            if let Piece::Text { text } = p {
                assert!(!text.contains("[excerpt of this block: "), "{h}: {text}");
            }
        }
    }
}
