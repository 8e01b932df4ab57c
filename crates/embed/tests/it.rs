//! The front-end API: every shape comes back as given, compacted, valid.

use abridge_embed::{ErrorKind, Options, Session, Wire, compact, count_tokens, validate};
use serde_json::{Value, json};

fn openai_list(iterations: usize) -> Vec<Value> {
    let mut m = vec![
        json!({"role": "system", "content": "You are a web agent."}),
        json!({"role": "user", "content": "Find the cheapest flight to Lisbon on 2026-12-03."}),
    ];
    for i in 0..iterations {
        m.push(json!({"role": "assistant", "content": null, "tool_calls": [{"id": format!("c{i}"), "type": "function",
            "function": {"name": "browse", "arguments": format!("{{\"url\": \"https://fly.example/p{i}\"}}")}}]}));
        m.push(json!({"role": "tool", "tool_call_id": format!("c{i}"),
            "content": format!("<EXTERNAL-CONTENT>page {i} {}</EXTERNAL-CONTENT>", "fare row ".repeat(150))}));
    }
    m
}

fn ai_sdk_list(iterations: usize) -> Vec<Value> {
    let mut m = vec![json!({"role": "user", "content": [{"type": "text", "text": "Book it."}]})];
    for i in 0..iterations {
        m.push(json!({"role": "assistant", "content": [{"type": "tool-call", "toolCallId": format!("t{i}"),
            "toolName": "click", "input": {"ref": format!("e{i}")}}]}));
        m.push(json!({"role": "tool", "content": [{"type": "tool-result", "toolCallId": format!("t{i}"),
            "toolName": "click", "output": {"type": "text", "value": "snapshot ".repeat(200)},
            "providerOptions": {"openai": {"x": i}}}]}));
    }
    m
}

fn target(n: u64) -> Options {
    Options {
        target_tokens: Some(n),
        ..Options::default()
    }
}

#[test]
fn a_list_comes_back_a_list_and_a_body_a_body() {
    let list = openai_list(30);
    let out = compact(json!(list), &target(3_000)).unwrap();
    assert!(out.report.compacted);
    assert!(
        out.report.tokens_after.get() <= 3_000,
        "{}",
        out.report.tokens_after
    );
    let back = out.value.as_array().unwrap();
    assert_eq!(back.len(), list.len());
    assert_eq!(
        back.last(),
        list.last(),
        "the newest result is kept verbatim"
    );
    let body = json!({"model": "gpt-4o", "messages": list, "temperature": 0});
    let out = compact(body, &target(3_000)).unwrap();
    assert_eq!(out.value["model"], "gpt-4o");
    assert_eq!(out.value["temperature"], 0);
    assert!(validate(out.value, None).unwrap().is_empty());
}

#[test]
fn anthropic_bodies_and_lists_are_detected() {
    let mut messages = vec![json!({"role": "user", "content": "Fix the build."})];
    for i in 0..30 {
        messages.push(json!({"role": "assistant", "content": [{"type": "tool_use", "id": format!("u{i}"), "name": "sh", "input": {"cmd": "make"}}]}));
        messages.push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": format!("u{i}"), "content": "error: x\n".repeat(100)}]}));
    }
    let out = compact(json!(messages.clone()), &target(2_500)).unwrap();
    let back = out.value.as_array().unwrap();
    assert_eq!(back[1]["content"][0]["type"], "tool_use");
    let body = json!({"model": "claude-sonnet-4-5", "max_tokens": 1024, "system": "Be brief.", "messages": messages});
    let out = compact(body, &target(2_500)).unwrap();
    assert_eq!(out.value["system"], "Be brief.");
    assert!(out.report.tokens_after.get() <= 2_500);
}

#[test]
fn ai_sdk_messages_keep_their_shape_and_provider_options() {
    let list = ai_sdk_list(30);
    let out = compact(json!(list), &target(2_000)).unwrap();
    let back = out.value.as_array().unwrap();
    assert!(out.report.tokens_after.get() <= 2_000);
    assert_eq!(back.len(), list.len());
    assert_eq!(back[2]["content"][0]["providerOptions"]["openai"]["x"], 0);
    assert_eq!(back[2]["content"][0]["toolName"], "click");
    assert!(
        validate(out.value.clone(), Some(Wire::AiSdk))
            .unwrap()
            .is_empty()
    );
}

#[test]
fn a_session_grows_and_stays_under_its_trigger() {
    let options: Options = serde_json::from_value(json!({
        "format": "ai-sdk",
        "config": {"trigger": {"max_tokens": 4000}, "budget": {"target_tokens": 2500}},
    }))
    .unwrap();
    let mut session = Session::new(None, &options).unwrap();
    let events = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = events.clone();
    session.on_event(move |e| sink.lock().unwrap().push(serde_json::to_value(e).unwrap()));
    let list = ai_sdk_list(40);
    session.push(list[0].clone()).unwrap();
    let mut compactions = 0;
    for pair in list[1..].chunks(2) {
        assert!(session.push(json!(pair)).unwrap().get() > 0);
        let turn = session.turn(None).unwrap();
        compactions += usize::from(turn.report.compacted());
        assert!(turn.report.tokens.get() <= 4000, "{}", turn.report.tokens);
        assert!(
            validate(session.messages().unwrap(), Some(Wire::AiSdk))
                .unwrap()
                .is_empty()
        );
    }
    assert!(compactions > 0);
    let kinds: Vec<String> = events
        .lock()
        .unwrap()
        .iter()
        .map(|e| e["event"].as_str().unwrap().to_owned())
        .collect();
    assert!(kinds.iter().any(|k| k == "history_compacted"), "{kinds:?}");
}

#[test]
fn errors_name_what_and_where_and_have_a_kind() {
    let e = compact(json!({"model": "x"}), &Options::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Input);
    assert!(e.to_string().contains("messages"), "{e}");
    let bad = json!([{"role": "assistant", "content": [{"type": "tool-call", "toolName": "x", "input": {}}]}]);
    let e = compact(
        bad,
        &Options {
            format: Some(Wire::AiSdk),
            ..Options::default()
        },
    )
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Input);
    assert!(e.to_string().contains("[0]"), "{e}");
    let e = Options::from_json(r#"{"target": 3}"#).unwrap_err();
    assert!(e.to_string().contains("unknown field `target`"), "{e}");
    let e = compact(json!(openai_list(2)), &target(0)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Config);
    let e = compact(json!(openai_list(3)), &target(20)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::CannotShrink);
    let o = Options::from_json(r#"{"config": "/nonexistent/abridge.toml"}"#).unwrap();
    let e = compact(json!(openai_list(1)), &o).unwrap_err();
    assert!(e.to_string().contains("/nonexistent/abridge.toml"), "{e}");
}

#[test]
fn count_tokens_follows_the_tokenizer_option() {
    let list = json!(openai_list(5));
    let exact = count_tokens(
        list.clone(),
        &Options::from_json(r#"{"tokenizer": "o200k_base"}"#).unwrap(),
    )
    .unwrap();
    let rough = count_tokens(
        list,
        &Options::from_json(r#"{"tokenizer": "estimate"}"#).unwrap(),
    )
    .unwrap();
    assert!(
        exact.get() > 1000 && rough.get() > 1000 && exact != rough,
        "{exact} {rough}"
    );
    assert!(Options::from_json(r#"{"tokenizer": "gpt2"}"#).is_err());
}

#[test]
fn compactions_are_recorded_in_a_store_when_asked() {
    use abridge_store::{SnapshotStore, Store};
    let path =
        std::env::temp_dir().join(format!("abridge-embed-store-{}.sqlite", std::process::id()));
    std::fs::remove_file(&path).ok();
    let options: Options = serde_json::from_value(json!({
        "targetTokens": 3000, "store": path, "source": "pilo-run-7",
    }))
    .unwrap();
    let out = compact(json!(openai_list(30)), &options).unwrap();
    let entries = Store::open(&path).unwrap().list(10).unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].source.as_deref(), Some("pilo-run-7"));
    assert_eq!(out.report.snapshot, Some(entries[0].id));
    std::fs::remove_file(&path).ok();
}

/// Gemini contents as Gemini CLI sends them: a call per model turn (the
/// first signed), its response in the next user turn, no ids.
fn gemini_contents(iterations: usize) -> Vec<Value> {
    let mut c =
        vec![json!({"role": "user", "parts": [{"text": "Fix the failing test in src/date.rs."}]})];
    for i in 0..iterations {
        c.push(json!({"role": "model", "parts": [{"functionCall": {"name": "read_file",
            "args": {"path": format!("src/f{i}.rs")}}, "thoughtSignature": format!("c2ln{i:04}")}]}));
        c.push(
            json!({"role": "user", "parts": [{"functionResponse": {"name": "read_file",
            "response": {"output": format!("fn f{i}() {{}}\n").repeat(120)}}}]}),
        );
    }
    c
}

#[test]
fn gemini_bodies_and_contents_come_back_in_their_shape() {
    let contents = gemini_contents(30);
    let body = json!({"contents": contents, "systemInstruction": {"parts": [{"text": "Be brief."}]},
        "generationConfig": {"temperature": 0.2}});
    let before = count_tokens(body.clone(), &Options::default()).unwrap();
    assert!(before.get() > 12_000, "{before}");
    let out = compact(body, &target(4_000)).unwrap();
    assert!(out.report.compacted);
    assert!(out.report.tokens_after.get() <= 4_000);
    assert_eq!(
        out.value["systemInstruction"]["parts"][0]["text"],
        "Be brief."
    );
    assert_eq!(out.value["generationConfig"]["temperature"], 0.2);
    let back = out.value["contents"].as_array().unwrap();
    assert_eq!(back.last(), contents.last(), "the newest response as sent");
    // Every signature the compacted history keeps is byte-identical and on
    // the call it was on.
    for turn in back.iter().filter(|t| t["role"] == "model") {
        for part in turn["parts"].as_array().unwrap() {
            if let Some(sig) = part.get("thoughtSignature") {
                let n: usize = sig.as_str().unwrap()[4..].parse().unwrap();
                assert_eq!(part["functionCall"]["args"]["path"], format!("src/f{n}.rs"));
            }
        }
    }
    assert!(validate(out.value.clone(), None).unwrap().is_empty());
    assert_eq!(
        count_tokens(out.value, &Options::default()).unwrap(),
        out.report.tokens_after
    );
    // A bare list of contents stays a list.
    let list = compact(json!(contents), &target(4_000)).unwrap().value;
    assert_eq!(list.as_array().unwrap().len(), contents.len());
    assert!(validate(list, Some(Wire::Gemini)).unwrap().is_empty());
}

#[test]
fn a_gemini_session_grows_and_stays_under_its_trigger() {
    let options: Options = serde_json::from_value(json!({
        "format": "gemini",
        "config": {"trigger": {"max_tokens": 4000}, "budget": {"target_tokens": 2500}},
    }))
    .unwrap();
    let mut session = Session::new(None, &options).unwrap();
    let contents = gemini_contents(40);
    session.push(contents[0].clone()).unwrap();
    let mut compactions = 0;
    for pair in contents[1..].chunks(2) {
        assert!(session.push(json!(pair)).unwrap().get() > 0);
        let turn = session.turn(None).unwrap();
        compactions += usize::from(turn.report.compacted());
        assert!(turn.report.tokens.get() <= 4000, "{}", turn.report.tokens);
        let now = session.messages().unwrap();
        assert!(validate(now, Some(Wire::Gemini)).unwrap().is_empty());
    }
    assert!(compactions > 0);
}

/// What the packages pass (JSON text) reads as the tree of the same text
/// reads: large bodies go the streamed way, the rest the tree's.
#[test]
fn a_body_as_text_reads_as_its_tree() {
    use abridge_embed::Decoded;
    let large_openai = json!({"model": "gpt-4o", "temperature": 0, "messages": openai_list(800)});
    let mut anthropic = vec![json!({"role": "user", "content": "Fix the build."})];
    for i in 0..500 {
        anthropic.push(json!({"role": "assistant", "content": [{"type": "tool_use", "id": format!("u{i}"), "name": "sh", "input": {"cmd": "make"}}]}));
        anthropic.push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": format!("u{i}"), "content": "error: x\n".repeat(300)}]}));
    }
    let large_anthropic = json!({"model": "claude-sonnet-4-5", "max_tokens": 1024,
        "system": [{"type": "text", "text": "Be brief."}], "messages": anthropic});
    // No messages but a system prompt past the streamed threshold: the tree
    // reads it as OpenAI whatever its fields.
    let only_system = json!({"system": "x".repeat(1 << 21), "messages": []});
    let small = json!({"model": "gpt-4o", "messages": openai_list(3)});
    for (what, body, format) in [
        ("large OpenAI", &large_openai, None),
        (
            "large OpenAI, format given",
            &large_openai,
            Some(Wire::Chat),
        ),
        ("large Anthropic", &large_anthropic, None),
        (
            "large Anthropic, format given",
            &large_anthropic,
            Some(Wire::Anthropic),
        ),
        ("no messages, a large system", &only_system, None),
        ("small", &small, None),
        ("a list", &json!(openai_list(800)), None),
    ] {
        let text = serde_json::to_string(body).unwrap();
        assert!(
            what.starts_with("small") || text.len() > 1 << 20,
            "{what}: not large"
        );
        let by_tree = Decoded::read(body.clone(), format).unwrap();
        let by_text = Decoded::read_text(&text, format).unwrap();
        assert_eq!(by_text.shape, by_tree.shape, "{what}");
        assert_eq!(by_text.conversation, by_tree.conversation, "{what}");
        let options = Options {
            format,
            ..target(20_000)
        };
        assert_eq!(
            abridge_embed::compact_text(&text, &options).unwrap().value,
            compact(body.clone(), &options).unwrap().value,
            "{what}"
        );
    }
    // A message that is not one says where, either way.
    let mut bad = large_openai.clone();
    bad["messages"][7] = json!(42);
    let text = serde_json::to_string(&bad).unwrap();
    let e = Decoded::read_text(&text, None).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Input);
    assert!(e.to_string().contains("[7]"), "{e}");
}

#[test]
fn an_agent_reads_its_status_and_compacts_its_own_history() {
    let options: Options = serde_json::from_value(json!({
        "preset": "mycoder",
        "config": {"agent": {"status_every": 4}, "trigger": {"max_tokens": 3000}},
    }))
    .unwrap();
    let mut session = Session::new(None, &options).unwrap();
    let tool = session.compact_tool().expect("offered under mycoder");
    assert_eq!(tool["name"], "compactHistory");
    assert_eq!(
        tool["parameters"]["properties"]["preserve_recent_messages"]["maximum"],
        50
    );
    let list = openai_list(30);
    session.push(list[0].clone()).unwrap();
    let mut notes = Vec::new();
    for (i, pair) in list[1..].chunks(2).enumerate() {
        session.push(json!(pair)).unwrap();
        let turn = session.turn(None).unwrap();
        // Never by itself, whatever the trigger: the agent decides.
        assert!(!turn.report.compacted(), "turn {i}");
        if let Some(note) = turn.status {
            notes.push(i);
            assert!(
                note.starts_with("--- STATUS UPDATE ---\nToken Usage: "),
                "{note}"
            );
            assert!(note.contains("'compactHistory' tool"), "{note}");
        }
    }
    assert_eq!(
        notes,
        (0..30).filter(|i| (i + 1) % 4 == 0).collect::<Vec<_>>()
    );
    let before = session.tokens();
    let answer = session.compact_history(&json!({"preserve_recent_messages": 6}));
    assert!(answer.compacted && !answer.is_error, "{}", answer.text);
    assert!(
        answer.text.starts_with("History compacted:"),
        "{}",
        answer.text
    );
    assert_eq!(answer.tokens_before, before);
    assert!(session.tokens().get() < before.get() / 2);
    assert_eq!(answer.tokens_after, session.tokens());
    // The last six messages are as the agent wrote them, and the history is valid.
    let now = session.messages().unwrap();
    let now = now.as_array().unwrap();
    assert_eq!(now[now.len() - 6..], list[list.len() - 6..]);
    assert!(validate(json!(now), None).unwrap().is_empty());
}

/// Every wire in the model's table is a format the packages take by name:
/// a body converted to it compacts in its own shape.
#[test]
fn every_wire_in_the_table_is_taken_by_name_and_kept_in_its_shape() {
    let body = json!({"model": "gpt-4o", "messages": openai_list(12)});
    let bytes = serde_json::to_vec(&body).unwrap();
    for wire in Wire::ALL {
        let options =
            Options::from_json(&json!({"format": wire.as_str(), "target_tokens": 800}).to_string())
                .unwrap_or_else(|e| panic!("{wire}: {e}"));
        let converted = abridge_embed::convert(&bytes, wire)
            .unwrap_or_else(|e| panic!("{wire}: {e}"))
            .remove(0);
        let out = compact(converted.clone(), &options).unwrap_or_else(|e| panic!("{wire}: {e}"));
        assert!(out.report.compacted, "{wire}");
        assert_eq!(
            out.value.is_array(),
            converted.is_array(),
            "{wire}: the shape it came in"
        );
        let violations = validate(out.value, Some(wire)).unwrap();
        assert!(violations.is_empty(), "{wire}: {violations:?}");
    }
}
