//! Briefings: shape, chaining, and what they keep compared with Claude
//! Code's own compaction summary.

use abridge::model::{Conversation, Message, Part, Role, decode, validate};
use abridge::summarize::ident::{identifiers, mentions};
use abridge::synth::{Spec, run};
use abridge::{Compactor, Config, PolicyKind};

/// Compacts with the default pipeline, or only the given policies.
fn compact_with(
    conv: &Conversation,
    target: u64,
    pipeline: Option<Vec<PolicyKind>>,
) -> Conversation {
    let mut cfg = Config {
        model: conv.model.clone(),
        ..Config::default()
    };
    if let Some(p) = pipeline {
        cfg.policies.pipeline = p;
    }
    cfg.budget.target_tokens = Some(target);
    cfg.budget.min_iterations = 1;
    let out = Compactor::new(cfg).unwrap().compact(conv).unwrap();
    assert!(out.report.tokens_after.get() <= target);
    // The report names the briefing the compaction inserted, if any.
    let marked = out.conversation.messages.iter().position(|m| {
        m.text_content().starts_with("<compacted-history>") && m.meta.compact_summary
    });
    assert_eq!(out.report.briefing, marked);
    out.conversation.into_owned()
}

fn all_text(conv: &Conversation) -> String {
    abridge::model::encode(conv).unwrap().to_string()
}

fn briefing(conv: &Conversation) -> Option<String> {
    conv.messages
        .iter()
        .map(|m| m.text_content().into_owned())
        .find(|t| t.starts_with("<compacted-history>"))
}

#[test]
fn briefing_sits_after_the_head_and_chains_without_nesting() {
    let full = run(Spec {
        iterations: 90,
        ..Spec::default()
    });
    // The agent's first step names a product URL; it must survive three compactions.
    let first_url = identifiers(
        &full.messages[2]
            .tool_calls()
            .next()
            .unwrap()
            .arguments
            .to_json_text(),
    )
    .into_iter()
    .find(|i| i.starts_with("https://"))
    .unwrap();
    let mut history = Conversation {
        messages: full.messages[..2].to_vec(),
        ..full.clone_envelope()
    };
    let mut next = 2;
    let mut briefings = Vec::new();
    for upto in [32, 62, 92] {
        // The run grows; the agent's memory is the compacted history.
        let upto = full
            .messages
            .iter()
            .enumerate()
            .filter(|(_, m)| m.role == Role::Assistant)
            .nth(upto - 2)
            .map_or(full.messages.len(), |(i, _)| i);
        history
            .messages
            .extend_from_slice(&full.messages[next..upto]);
        next = upto;
        history = compact_with(&history, 12_000, Some(vec![PolicyKind::Summarize]));
        assert!(validate(&history).is_empty());
        let b = briefing(&history).expect("a briefing");
        assert_eq!(
            history.messages[2].text_content(),
            b,
            "right after system prompt and task"
        );
        assert_eq!(
            all_text(&history).matches("<compacted-history>").count(),
            1,
            "wrappers never nest"
        );
        // The task stays verbatim above; the briefing does not repeat it.
        assert!(!b.contains("## Task\n"), "{b}");
        assert!(!b.contains("Collect the price"), "{b}");
        assert!(
            mentions(&b, &first_url),
            "oldest identifier lost at compaction {}",
            briefings.len() + 1
        );
        assert!(abridge::tokens::TokenizerKind::O200kBase.count(&b) <= 8_100);
        briefings.push(b);
    }
    assert_ne!(briefings[0], briefings[2]);
}

#[test]
fn briefing_marks_nothing_done_without_a_successful_result() {
    let mut conv = Conversation::new(abridge::model::Family::Anthropic);
    conv.messages.push(Message::text(
        Role::User,
        "Deploy release v2.4.1 to staging.",
    ));
    let call = |id: &str, cmd: &str| {
        let mut m = Message {
            role: Role::Assistant,
            ..Message::default()
        };
        m.form = abridge::model::ContentForm::Blocks;
        m.parts
            .push(Part::ToolCall(Box::new(abridge::model::ToolCall {
                id: id.into(),
                name: "Bash".into(),
                arguments: abridge::model::Arguments::Value(serde_json::json!({"command": cmd})),
                extra: Default::default(),
                function_extra: Default::default(),
            })));
        m
    };
    let result = |id: &str, text: &str, err: bool| Message {
        role: Role::User,
        form: abridge::model::ContentForm::Blocks,
        parts: vec![Part::ToolResult(Box::new(abridge::model::ToolResult {
            call_id: id.into(),
            parts: vec![Part::text(text)],
            form: abridge::model::ContentForm::Text,
            is_error: err.then_some(true),
            extra: Default::default(),
        }))],
        ..Message::default()
    };
    conv.messages.push(call("t1", "make deploy ENV=staging"));
    conv.messages.push(result(
        "t1",
        &format!(
            "exit status 2\nerror: missing credentials for registry.example.test\n{}",
            "log\n".repeat(400)
        ),
        true,
    ));
    conv.messages.push(call("t2", "make test"));
    conv.messages.push(result(
        "t2",
        &format!("exit status 0\n{}", "ok\n".repeat(400)),
        false,
    ));
    for i in 0..3 {
        conv.messages
            .push(Message::text(Role::Assistant, format!("thinking {i}")));
        conv.messages.push(Message::text(Role::User, "continue"));
    }
    let out = compact_with(&conv, 400, Some(vec![PolicyKind::Summarize]));
    let b = briefing(&out).unwrap();
    assert!(
        b.contains("`make deploy ENV=staging` → exit status 2"),
        "{b}"
    );
    // `make test` succeeded: the briefing says so, or its step stayed after
    // it (an excerpt of its output, taking the room the briefing left).
    let kept_test = out
        .messages
        .iter()
        .flat_map(Message::tool_results)
        .any(|r| r.call_id == "t2" && r.text().contains("exit status 0"));
    assert!(b.contains("`make test` → ok") || kept_test, "{b}");
    assert!(
        b.contains("error: missing credentials for registry.example.test"),
        "{b}"
    );
    assert!(!b.to_lowercase().contains("deployed"), "{b}");
}

/// Compacting abridge's own output again: the earlier briefing is not
/// untouchable head — with every iteration in the kept tail it is
/// re-condensed alone — and a breakdown names it for what it is.
#[test]
fn a_chained_compaction_re_condenses_the_earlier_briefing() {
    let bytes = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/coding-agent.openai.json"
    ))
    .unwrap();
    let conv = decode(&bytes).unwrap().remove(0);
    let cfg = |target: u64| {
        let mut c = Config::default();
        c.budget.target_tokens = Some(target);
        c.budget.min_iterations = 2;
        c.budget.kept_cap = 0;
        c
    };
    let first = Compactor::new(cfg(700)).unwrap().compact(&conv).unwrap();
    let first = first.conversation.into_owned();
    let earlier = briefing(&first).unwrap();
    // Leave the old region empty: only the earlier briefing can shrink.
    let mut again = cfg(0);
    again.budget.min_iterations = abridge::model::iterations(&first.messages).len();
    let mut counter = Compactor::new(Config::default()).unwrap();
    let tokens = counter.count(&first).get();
    let at = first
        .messages
        .iter()
        .position(|m| m.text_content().starts_with("<compacted-history>"))
        .unwrap();
    let b = counter.message_tokens(&first.messages[at..=at])[0].get();
    // A target that leaves the briefing four fifths of its size.
    let target = tokens - b / 5;
    again.budget.target_tokens = Some(target);
    let out = Compactor::new(again.clone())
        .unwrap()
        .compact(&first)
        .unwrap();
    assert!(out.report.compacted, "{:?}", out.report);
    assert!(out.report.tokens_after.get() <= target);
    let after = out.conversation.into_owned();
    assert!(validate(&after).is_empty());
    let text = all_text(&after);
    assert_eq!(text.matches("<compacted-history>").count(), 1, "no nesting");
    let now = briefing(&after).unwrap();
    assert!(now.len() < earlier.len(), "re-condensed");
    // The task's ticket stays in the task message above, not restated.
    assert!(
        text.contains("APP-1432") && !now.contains("APP-1432"),
        "{now}"
    );
    // Far below what the head can be: the breakdown names the briefing.
    again.budget.target_tokens = Some(100);
    let e = Compactor::new(again)
        .unwrap()
        .compact(&first)
        .unwrap_err()
        .to_string();
    assert!(e.contains("earlier briefing"), "{e}");
}

/// An OpenAI history in which the agent reads `files` (absolute paths
/// under one deep directory), one call per iteration, each result long.
fn file_session(files: &[&str], task: &str) -> Conversation {
    let mut body = serde_json::json!({"model": "gpt-4o", "messages": [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": task},
    ]});
    let messages = body["messages"].as_array_mut().unwrap();
    for (i, path) in files.iter().enumerate() {
        let tool = if i % 2 == 0 { "read_file" } else { "edit_file" };
        messages.push(serde_json::json!({"role": "assistant", "content": null, "tool_calls": [{
            "id": format!("c{i}"), "type": "function",
            "function": {"name": tool, "arguments": serde_json::json!({"path": path}).to_string()}}]}));
        messages.push(
            serde_json::json!({"role": "tool", "tool_call_id": format!("c{i}"),
            "content": format!("contents of {path}\n{}", "fn body() { let x = 1; }\n".repeat(60))}),
        );
    }
    decode(body.to_string().as_bytes()).unwrap().remove(0)
}

/// A chained compaction merges the thread's own sheet as data: the files
/// the first briefing listed come back by their absolute paths, each once,
/// though its text showed them relative to their common directory (merged
/// from that text, they would be keyed by the relative path and a file
/// seen again would be listed twice).
#[test]
fn a_chained_compaction_merges_the_kept_sheet_as_data() {
    merges_the_kept_sheet(false);
}

/// The same after a resume: the head holds the agent's own summary, marked
/// as one; the sheet kept is still the briefing's, so the next compaction
/// finds it by its fingerprint and merges it as data.
#[test]
fn a_chained_compaction_merges_the_kept_sheet_beside_an_agents_summary() {
    merges_the_kept_sheet(true);
}

fn merges_the_kept_sheet(resumed: bool) {
    let root = "/home/dev/work/shop/app";
    let paths: Vec<String> = [
        "a.rs", "b.rs", "c.rs", "d.rs", "a.rs", "b.rs", "e.rs", "f.rs", "a.rs", "g.rs",
    ]
    .iter()
    .map(|f| format!("{root}/src/{f}"))
    .collect();
    let refs: Vec<&str> = paths.iter().map(String::as_str).collect();
    let mut full = file_session(&refs, "Fix the checkout.");
    full.messages[1].meta.compact_summary = resumed;
    let mut cfg = Config {
        model: Some("gpt-4o".into()),
        ..Config::default()
    };
    cfg.policies.pipeline = vec![PolicyKind::Summarize];
    cfg.budget.min_iterations = 1;
    let mut c = Compactor::new(cfg).unwrap();
    // The first cut after six iterations, then the rest, from the compacted history.
    let first = Conversation {
        messages: full.messages[..2 + 2 * 6].to_vec(),
        ..full.clone_envelope()
    };
    let target = |c: &mut Compactor, conv: &Conversation| c.count(conv).get() / 4;
    let t = abridge::tokens::Calibrated::new(target(&mut c, &first));
    let out = c.compact_to(&first, t).unwrap();
    let text = out
        .report
        .briefing_text(&out.conversation, "compacted-history")
        .unwrap();
    assert!(
        text.contains(&format!("Paths below are relative to `{root}`")),
        "{text}"
    );
    assert!(text.contains("- read · src/c.rs"), "{text}");
    let mut history = out.conversation.into_owned();
    history
        .messages
        .extend_from_slice(&full.messages[2 + 2 * 6..]);
    let t = abridge::tokens::Calibrated::new(target(&mut c, &history));
    let out = c.compact_to(&history, t).unwrap();
    let sheet = out
        .report
        .sheet
        .as_ref()
        .expect("the offline sheet as data");
    let files = sheet
        .sections
        .iter()
        .find(|s| s.kind == abridge::summarize::SectionKind::Files)
        .unwrap();
    let keys: Vec<&str> = files.items.iter().map(|i| i.key()).collect();
    assert!(
        keys.contains(&format!("{root}/src/c.rs").as_str()),
        "{keys:?}"
    );
    assert!(keys.iter().all(|k| k.starts_with(root)), "{keys:?}");
    let mut unique = keys.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), keys.len(), "{keys:?}");
    // The thread keeps it for the next compaction.
    let kept = c.thread().state().briefing.as_ref().unwrap();
    assert_eq!(&kept.sheet, sheet);
}

/// A coding session whose step before the last read a long log: too large
/// for the briefing's leftover room whole, much smaller than that room
/// once cut to an excerpt.
fn session_with_a_long_read() -> Conversation {
    let mut messages = vec![
        serde_json::json!({"role": "system", "content": "You are a coding agent."}),
        serde_json::json!({"role": "user", "content": "Find why the nightly build of svc-ledger fails."}),
    ];
    let mut step = |id: String, name: &str, args: serde_json::Value, result: String| {
        messages.push(serde_json::json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": id, "type": "function", "function": {"name": name, "arguments": args.to_string()}}]}));
        messages.push(serde_json::json!({"role": "tool", "tool_call_id": id, "content": result}));
    };
    for i in 0..12 {
        let path = format!("src/ledger/part_{i}.rs");
        step(
            format!("call_{i}"),
            "read_file",
            serde_json::json!({"path": path}),
            format!(
                "contents of {path}\n{}",
                "fn entry() -> u64 { 42 }\n".repeat(40)
            ),
        );
    }
    let log: String = (0..600)
        .map(|l| {
            format!(
                "[build {l:04}] compiling crate_{l} in job runner-{} ok\n",
                l % 7
            )
        })
        .collect();
    step(
        "call_log".into(),
        "read_log",
        serde_json::json!({"job": "nightly-7731"}),
        log,
    );
    step(
        "call_last".into(),
        "run_tests",
        serde_json::json!({"filter": "ledger"}),
        "2 passed".into(),
    );
    let body = serde_json::json!({"model": "gpt-4o", "messages": messages,
        "tools": [{"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}}]});
    decode(body.to_string().as_bytes()).unwrap().remove(0)
}

#[test]
fn the_briefing_path_fills_its_target_with_an_excerpt_of_the_step_before_the_tail() {
    let conv = session_with_a_long_read();
    let target = 4_000;
    let mut cfg = Config {
        model: conv.model.clone(),
        ..Config::default()
    };
    cfg.policies.pipeline = vec![PolicyKind::Summarize, PolicyKind::DropIterations];
    cfg.budget.target_tokens = Some(target);
    cfg.budget.min_iterations = 1;
    cfg.budget.kept_cap = 0;
    let mut c = Compactor::new(cfg).unwrap();
    let out = c.compact(&conv).unwrap();
    let after = out.report.tokens_after.get();
    assert!(after <= target, "{after}");
    // The room the briefing left goes to the log, not unused.
    assert!(after * 10 >= target * 9, "{after} of {target}");
    let conv = out.conversation.into_owned();
    assert!(validate(&conv).is_empty(), "{:?}", validate(&conv));
    let log = conv
        .messages
        .iter()
        .flat_map(|m| &m.parts)
        .find_map(|p| match p {
            Part::ToolResult(r) if r.call_id == "call_log" => Some(r.text().into_owned()),
            _ => None,
        })
        .expect("the step before the tail stays, its call answered");
    assert!(
        log.starts_with("[excerpt of a tool result of 600 lines"),
        "{log}"
    );
    assert!(
        log.contains("[build 0000]") && log.contains("[build 0599]"),
        "{log}"
    );
    // All of it is one recall away.
    let handle = abridge::recall::Handle::find_all(&log).next().unwrap();
    let whole = c
        .engine()
        .recall(&serde_json::json!({"handle": handle.as_str(), "page": 1}));
    assert!(whole.text().contains("[build 0001]"), "{}", whole.text());
}

/// Clipping alone, small targets: the room a clipped log leaves comes back
/// as an excerpt whenever it is a tenth of the target, however small.
#[test]
fn small_targets_are_filled_by_excerpts_of_what_clipping_took() {
    let conv = session_with_a_long_read();
    let base = {
        let mut cfg = Config {
            model: conv.model.clone(),
            ..Config::default()
        };
        cfg.policies.pipeline = vec![PolicyKind::ClipToolResults, PolicyKind::ClipToolArgs];
        cfg.budget.min_iterations = 1;
        cfg.budget.kept_cap = 0;
        cfg
    };
    for target in (700..2_000).step_by(50) {
        let mut cfg = base.clone();
        cfg.budget.target_tokens = Some(target);
        let out = Compactor::new(cfg).unwrap().compact(&conv).unwrap();
        let after = out.report.tokens_after.get();
        assert!(after <= target, "{after} > {target}");
        assert!(after * 10 >= target * 9, "{after} of {target}");
        assert!(validate(&out.conversation).is_empty());
    }
}

/// A long system prompt leaves a briefing no room beside the preferred
/// tail at many targets. That is not a failed briefing: the tail gets
/// shorter and the old region is briefed, rather than dropped with the
/// names it held. Only a one-iteration tail may drop.
#[test]
fn a_briefing_short_of_room_shortens_the_tail_rather_than_drop_the_region() {
    let rules: String = (0..150)
        .map(|i| format!("Rule {i}: confirm every change with the customer first.\n"))
        .collect();
    let mut messages = vec![
        serde_json::json!({"role": "system", "content": rules}),
        serde_json::json!({"role": "user", "content": "Change the flights on my reservations."}),
    ];
    for i in 0..12 {
        let id = format!("call_{i}");
        messages.push(serde_json::json!({"role": "assistant", "content": format!("Looking up RSV{i:04}."),
            "tool_calls": [{"id": id, "type": "function",
                "function": {"name": "get_reservation", "arguments": format!("{{\"id\": \"RSV{i:04}\"}}")}}]}));
        messages.push(serde_json::json!({"role": "tool", "tool_call_id": id,
            "content": format!("reservation RSV{i:04}: flight HAT{i:03} {}", "seat 12A economy; ".repeat(30))}));
    }
    let body = serde_json::json!({"model": "gpt-4o", "messages": messages});
    let conv = decode(body.to_string().as_bytes()).unwrap().remove(0);
    let mut counter = abridge::tokens::TokenCounter::new(abridge::tokens::TokenizerKind::O200kBase);
    let before = counter.count_conversation(&conv).get();
    let head = counter
        .count_messages(&conv.messages[..2])
        .iter()
        .map(|c| c.total().get())
        .sum::<u64>();
    let mut dropped_at_a_longer_tail = Vec::new();
    let mut briefed = 0;
    // From where the newest iteration beside the head fits, to where no
    // briefing is needed.
    for target in (head + 200..before * 80 / 100).step_by(25) {
        let mut cfg = Config {
            model: conv.model.clone(),
            ..Config::default()
        };
        cfg.budget.target_tokens = Some(target);
        let out = Compactor::new(cfg).unwrap().compact(&conv).unwrap();
        assert!(validate(&out.conversation).is_empty(), "{target}");
        let dropped = out
            .report
            .policies
            .iter()
            .any(|p| p.policy == PolicyKind::DropIterations);
        if dropped && out.report.tail_iterations > 1 {
            dropped_at_a_longer_tail.push((target, out.report.tail_iterations));
        }
        briefed += usize::from(briefing(&out.conversation).is_some());
    }
    assert!(
        dropped_at_a_longer_tail.is_empty(),
        "dropped with a longer tail: {dropped_at_a_longer_tail:?}"
    );
    assert!(briefed > 0, "no target briefed at all");
}

/// A run under a long system prompt: `iterations` reads, each naming its
/// own file and function, the system prompt about `system_words` words.
fn under_a_long_prompt(iterations: usize, system_words: usize) -> Conversation {
    let system = "Follow the house rules for every change you make. ".repeat(system_words / 9);
    let mut messages = vec![
        serde_json::json!({"role": "system", "content": system}),
        serde_json::json!({"role": "user", "content": "Fix the parser."}),
    ];
    for i in 0..iterations {
        let id = format!("call_{i}");
        let args = serde_json::json!({"path": format!("src/mod_{i}.rs")}).to_string();
        messages.push(serde_json::json!({"role": "assistant",
            "content": format!("Reading `src/mod_{i}.rs` for `parse_item_{i}`."),
            "tool_calls": [{"id": id, "type": "function",
                "function": {"name": "read_file", "arguments": args}}]}));
        let body = format!("fn parse_item_{i}(input: &str) -> Item{i} {{ todo!() }}\n").repeat(12);
        messages.push(serde_json::json!({"role": "tool", "tool_call_id": id, "content": body}));
    }
    let body = serde_json::json!({"model": "gpt-4o", "messages": messages});
    decode(body.to_string().as_bytes()).unwrap().remove(0)
}

/// The verbatim tail takes at most half of what the target leaves beside
/// the head (and tools), not half the target: under a system prompt that
/// takes half the target, a tail of half the target left the briefing a
/// few tokens and it left out most of what the agent read.
#[test]
fn a_long_system_prompt_does_not_squeeze_the_briefing() {
    let conv = under_a_long_prompt(40, 2_400);
    let mut cfg = Config {
        model: conv.model.clone(),
        ..Config::default()
    };
    cfg.budget.min_iterations = 1;
    let mut measure = Compactor::new(cfg.clone()).unwrap();
    let head = measure.count(&Conversation {
        messages: conv.messages[..2].to_vec(),
        ..conv.clone()
    });
    let target = head.get() * 2;
    cfg.budget.target_tokens = Some(target);
    let out = Compactor::new(cfg).unwrap().compact(&conv).unwrap();
    assert!(out.report.tokens_after.get() <= target);
    let sheet = out.report.sheet.as_ref().expect("an offline briefing");
    let omitted: usize = sheet.sections.iter().map(|s| s.omitted).sum();
    let briefing = out
        .report
        .briefing_text(&out.conversation, "compacted-history");
    let briefing = briefing.expect("a briefing");
    assert!(omitted < 10, "{omitted} items left out:\n{briefing}");
    assert!(validate(&out.conversation).is_empty());
}

/// A resumed session's head holds the agent's own summary, marked as one
/// (Claude Code's `isCompactSummary`): the report names the briefing this
/// compaction wrote, not that message, so what reads the briefing back
/// (the thread's kept sheet, eval, the dashboard) finds it.
#[test]
fn the_report_names_its_own_briefing_beside_an_agents_summary() {
    let mut conv = under_a_long_prompt(30, 90);
    conv.messages[1].meta.compact_summary = true;
    let mut cfg = Config {
        model: conv.model.clone(),
        ..Config::default()
    };
    cfg.budget.min_iterations = 1;
    cfg.budget.target_tokens = Some(1_500);
    let out = Compactor::new(cfg).unwrap().compact(&conv).unwrap();
    let written = out
        .conversation
        .messages
        .iter()
        .position(|m| m.text_content().starts_with("<compacted-history>"));
    assert!(written.is_some(), "{:?}", out.report.policies);
    assert_eq!(out.report.briefing, written);
    let text = out
        .report
        .briefing_text(&out.conversation, "compacted-history")
        .expect("the briefing's text");
    assert!(text.contains("## "), "{text}");
}
