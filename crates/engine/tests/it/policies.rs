//! What each policy does, on small hand-made histories.

use std::borrow::Cow;

use abridge::model::{Conversation, Family, Message, Part, Role, decode, validate};
use abridge::{Compactor, Config, PolicyKind};
use serde_json::json;

fn example(name: &str) -> Conversation {
    let path = format!("{}/../../examples/{name}", env!("CARGO_MANIFEST_DIR"));
    decode(&std::fs::read(path).unwrap()).unwrap().remove(0)
}

fn only(kind: PolicyKind, keep: usize) -> Config {
    let mut c = Config::default();
    c.policies.pipeline = vec![kind];
    c.budget.min_iterations = keep;
    c.budget.kept_cap = 0;
    c
}

/// The compacted history (the test fails on an error).
fn compacted(cfg: &Config, conv: &Conversation) -> Conversation {
    Compactor::new(cfg.clone())
        .unwrap()
        .compact(conv)
        .unwrap()
        .conversation
        .into_owned()
}

/// Compacting again with the same config changes nothing.
fn is_stable(cfg: &Config, conv: &Conversation) -> bool {
    !Compactor::new(cfg.clone())
        .unwrap()
        .compact(conv)
        .unwrap()
        .report
        .compacted
}

/// Texts of the messages that contain `needle`.
fn texts_with(conv: &Conversation, needle: &str) -> Vec<String> {
    conv.messages
        .iter()
        .map(|m| m.text_content().into_owned())
        .filter(|t| t.contains(needle))
        .collect()
}

fn texts(conv: &Conversation) -> String {
    let body = abridge::model::encode(conv).unwrap();
    body.to_string()
}

#[test]
fn clip_external_keeps_the_newest_snapshot_and_image() {
    let conv = example("web-agent.anthropic.json");
    let out = Compactor::new(only(PolicyKind::ClipExternal, 1))
        .unwrap()
        .compact(&conv)
        .unwrap();
    let after = out.conversation.into_owned();
    let s = texts(&after);
    // Two older snapshots clipped, the newest (the flight page, with the screenshot) kept.
    assert_eq!(
        s.matches("> [clipped for brevity; recall abr_").count(),
        2,
        "{s}"
    );
    assert!(s.contains("Fare: EUR 221 (Light)"));
    assert!(s.contains("iVBORw0KGgo"));
    assert!(s.contains("<EXTERNAL-CONTENT source=\\\"https://example-air.test/search\\\">"));
    assert!(validate(&after).is_empty());
    assert_eq!(
        out.report.policies[0].policy,
        abridge::PolicyKind::ClipExternal
    );
    assert!(out.report.policies[0].tokens_saved.get() > 500);
}

#[test]
fn clip_tool_results_keeps_the_first_line_of_errors_and_excluded_tools() {
    let conv = example("coding-agent.openai.json");
    let mut cfg = only(PolicyKind::ClipToolResults, 2);
    cfg.policies.min_result_chars = 10;
    cfg.policies.keep_results_of = vec!["read_file".into()];
    let after = compacted(&cfg, &conv);
    let s = texts(&after);
    assert!(
        s.contains("[tool result clipped for brevity; it failed: exit status 101; recall abr_"),
        "{s}"
    );
    assert!(s.contains("[tool result clipped for brevity; recall abr_"));
    assert!(
        s.contains("pub fn format_date"),
        "read_file results are excluded"
    );
    assert!(
        s.contains("14 passed; 0 failed"),
        "the last iterations stay"
    );
    assert!(validate(&after).is_empty());
}

#[test]
fn clip_tool_args_keeps_name_id_and_short_arguments() {
    let body = json!({"model": "gpt-4o", "messages": [
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
            "function": {"name": "write_file", "arguments": json!({"path": "src/lib.rs", "content": "fn main() {}\n".repeat(20)}).to_string()}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "ok"},
        {"role": "assistant", "content": "done"}
    ]});
    let conv = decode(body.to_string().as_bytes()).unwrap().remove(0);
    let mut cfg = only(PolicyKind::ClipToolArgs, 1);
    cfg.policies.min_args_chars = 40;
    let after = compacted(&cfg, &conv);
    let out = abridge::model::encode(&after).unwrap();
    let call = &out["messages"][1]["tool_calls"][0];
    assert_eq!(call["id"], "call_1");
    assert_eq!(call["function"]["name"], "write_file");
    let args: serde_json::Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args["path"], "src/lib.rs");
    let note = args["_abridged"].as_str().unwrap();
    assert!(
        note.starts_with("1 long argument clipped for brevity; recall abr_"),
        "{note}"
    );
    assert!(validate(&after).is_empty());
    assert!(is_stable(&cfg, &after));
}

fn feedback_run() -> Conversation {
    let mut c = Conversation::new(Family::OpenAi);
    c.messages.push(Message::text(Role::System, "sys"));
    c.messages.push(Message::text(Role::User, "task"));
    let fb = [
        "[validation] Task validation failed: no SKU",
        "[feedback] Step error: timeout",
        "[validation] Task validation failed: wrong price",
        "[validation] Task validation failed: empty table",
        "[feedback] Step error: selector",
    ];
    for (i, f) in fb.iter().enumerate() {
        c.messages
            .push(Message::text(Role::Assistant, format!("attempt {i}")));
        c.messages.push(Message::text(Role::User, *f));
    }
    c.messages
        .push(Message::text(Role::Assistant, "final attempt"));
    c
}

#[test]
fn collapse_feedback_leaves_one_line_and_the_newest_of_each_kind() {
    let conv = feedback_run();
    let out = Compactor::new(only(PolicyKind::CollapseFeedback, 1))
        .unwrap()
        .compact(&conv)
        .unwrap();
    let after = out.conversation.into_owned();
    let user: Vec<String> = after
        .messages
        .iter()
        .filter(|m| m.role == Role::User)
        .map(|m| m.text_content().into_owned())
        .collect();
    assert_eq!(
        user,
        [
            "task",
            "[3 earlier feedback messages clipped: 2 validation rejections, 1 step error]",
            "[validation] Task validation failed: empty table",
            "[feedback] Step error: selector",
        ]
    );
    assert_eq!(out.report.policies[0].items, 3);
    // Again: nothing left to collapse.
    assert!(is_stable(&only(PolicyKind::CollapseFeedback, 1), &after));
}

#[test]
fn drop_iterations_chains_its_count() {
    let mut conv = feedback_run();
    let mut cfg = only(PolicyKind::DropIterations, 2);
    cfg.budget.target_tokens = Some(1);
    // Cannot reach 1 token: the error names what cannot shrink.
    let err = Compactor::new(cfg.clone())
        .unwrap()
        .compact(&conv)
        .unwrap_err();
    assert!(err.to_string().starts_with("cannot shrink below"), "{err}");
    cfg.budget.target_tokens = Some(60);
    let first = compacted(&cfg, &conv);
    // Only as many of the oldest iterations as the target needs are dropped.
    let count = |t: &str| -> usize {
        t.trim_start_matches('[')
            .split(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let first_note = first.messages[2].text_content();
    assert!(
        first_note.contains("earlier iterations omitted; recall abr_"),
        "{first_note}"
    );
    let dropped = count(&first_note);
    assert!((1..5).contains(&dropped), "{first_note}");
    // The run goes on; the next drop adds to the count instead of nesting.
    conv = first.clone();
    for i in 0..4 {
        conv.messages
            .push(Message::text(Role::User, format!("more {i}")));
        conv.messages
            .push(Message::text(Role::Assistant, format!("step {i}")));
    }
    cfg.budget.target_tokens = Some(45);
    let second = compacted(&cfg, &conv);
    let notes: Vec<String> = texts_with(&second, "omitted");
    assert_eq!(notes.len(), 1, "{notes:?}");
    let n: usize = notes[0]
        .trim_start_matches('[')
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(n > 4, "{notes:?}");
    assert!(validate(&second).is_empty());
}

#[test]
fn unchanged_history_is_borrowed() {
    let conv = example("coding-agent.openai.json");
    let mut cfg = Config::default();
    cfg.budget.target_tokens = Some(1_000_000);
    let out = Compactor::new(cfg).unwrap().compact(&conv).unwrap();
    assert!(matches!(out.conversation, Cow::Borrowed(_)));
    assert!(!out.report.compacted);
}

#[test]
fn pinned_by_marker_is_never_touched() {
    let mut conv = feedback_run();
    conv.messages[3] = Message::text(Role::User, "[validation] Task validation failed: KEEP-ME");
    let mut cfg = only(PolicyKind::CollapseFeedback, 1);
    cfg.pin.markers = vec!["KEEP-ME".into()];
    let after = compacted(&cfg, &conv);
    assert!(
        after
            .messages
            .iter()
            .any(|m| m.text_content().ends_with("KEEP-ME"))
    );
    assert!(matches!(after.messages[3].parts[0], Part::Text(_)));
}

#[test]
fn collapse_feedback_chains_across_compactions() {
    let conv = feedback_run();
    let cfg = only(PolicyKind::CollapseFeedback, 1);
    let mut after = compacted(&cfg, &conv);
    after.messages.push(Message::text(
        Role::User,
        "[validation] Task validation failed: again",
    ));
    after
        .messages
        .push(Message::text(Role::Assistant, "another attempt"));
    after
        .messages
        .push(Message::text(Role::User, "[feedback] Step error: again"));
    after
        .messages
        .push(Message::text(Role::Assistant, "last attempt"));
    let second = compacted(&cfg, &after);
    let notes: Vec<String> = texts_with(&second, "earlier feedback");
    assert_eq!(
        notes,
        ["[5 earlier feedback messages clipped: 3 validation rejections, 2 step errors]"]
    );
    assert!(validate(&second).is_empty());
}

#[test]
fn the_example_config_parses_to_the_defaults() {
    let text = std::fs::read_to_string(format!(
        "{}/../../abridge.example.toml",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    // It sets no model: the conversation's own stays in force.
    assert_eq!(Config::from_toml(&text).unwrap(), Config::default());
    // The commented [[summarizers]] example parses once uncommented.
    let example: String = text
        .lines()
        .skip_while(|l| !l.starts_with("# [[summarizers]]"))
        .take_while(|l| l.starts_with("# "))
        .map(|l| format!("{}\n", &l[2..]))
        .collect();
    let with = Config::from_toml(&example).unwrap();
    assert_eq!(with.summarizers.len(), 1);
    assert_eq!(with.summarizers[0].name(), "openai:gpt-4o-mini");
    assert_eq!(
        with.summarizers[0].api_key_env.as_deref(),
        Some("OPENAI_API_KEY")
    );
    let err = Config::from_toml("[budget]\ntarget_ratio = 1.5").unwrap_err();
    assert!(err.to_string().contains("target_ratio"), "{err}");
    let err = Config::from_toml("[budget]\ntypo = 1").unwrap_err();
    assert!(err.to_string().contains("typo"), "{err}");
}

/// `iterations` rounds of one call writing a long file and a reply
/// carrying `result` (OpenAI form).
fn writes(iterations: usize, result: impl Fn(usize) -> String) -> Conversation {
    let mut messages = vec![json!({"role": "user", "content": "Write the modules."})];
    for i in 0..iterations {
        let id = format!("call_{i}");
        let content = format!("pub fn item_{i}() -> usize {{ {i} }}\n").repeat(20);
        let args = json!({"path": format!("src/m{i}.rs"), "content": content});
        messages.push(json!({"role": "assistant", "content": null, "tool_calls": [{"id": id,
            "type": "function", "function": {"name": "write_file", "arguments": args.to_string()}}]}));
        messages.push(json!({"role": "tool", "tool_call_id": id, "content": result(i)}));
    }
    messages.push(json!({"role": "assistant", "content": "done"}));
    let body = json!({"model": "gpt-4o", "messages": messages});
    decode(body.to_string().as_bytes()).unwrap().remove(0)
}

/// Indices of the calls whose arguments were clipped.
fn clipped_calls(conv: &Conversation) -> Vec<usize> {
    let calls = conv.messages.iter().flat_map(|m| m.tool_calls());
    calls
        .enumerate()
        .filter(|(_, c)| c.arguments.to_json_text().contains("_abridged"))
        .map(|(i, _)| i)
        .collect()
}

/// A policy runs over the old region in steps of a quarter of it; the
/// step that reaches the target is narrowed to the iterations it needs,
/// so a target a little under the history clips a call or two, not ten,
/// and a lower target clips the same calls and more.
#[test]
fn clipping_stops_at_the_call_that_reaches_the_target() {
    let conv = writes(40, |_| "ok".to_owned());
    let cfg = only(PolicyKind::ClipToolArgs, 1);
    let run = |target: Option<u64>| {
        let mut cfg = cfg.clone();
        cfg.budget.target_tokens = target;
        Compactor::new(cfg).unwrap().compact(&conv).unwrap()
    };
    let all = run(None);
    let (before, after_all) = (
        all.report.tokens_before.get(),
        all.report.tokens_after.get(),
    );
    assert_eq!(clipped_calls(&all.conversation).len(), 40);
    let per_call = (before - after_all) / 40;
    let mut last = Vec::new();
    for k in 1..12 {
        let target = before - per_call * k / 2;
        let out = run(Some(target));
        let clipped = clipped_calls(&out.conversation);
        let after = out.report.tokens_after.get();
        assert!(after <= target, "{after} > {target}");
        // No more than the target needs: the oldest calls, one short of it
        // without the last of them.
        assert_eq!(clipped, (0..clipped.len()).collect::<Vec<_>>());
        assert!(
            after + per_call * 3 / 2 > target,
            "{} calls for {target}",
            clipped.len()
        );
        assert!(clipped.len() >= last.len(), "a lower target clipped fewer");
        last = clipped;
        assert!(validate(&out.conversation).is_empty());
    }
}

/// The default pipeline clips old tool arguments before old results: the
/// agent's own writes are named in the note that replaces them, where a
/// read's names are only in the read, so results stay while arguments
/// are enough.
#[test]
fn the_default_pipeline_clips_arguments_before_results() {
    let read = |i: usize| format!("line {i}: let value_{i} = compute_{i}();\n").repeat(20);
    let conv = writes(40, read);
    let mut cfg = Config::default();
    cfg.budget.min_iterations = 1;
    cfg.budget.kept_cap = 0;
    let before = Compactor::new(cfg.clone()).unwrap().compact(&conv).unwrap();
    let before = before.report.tokens_before.get();
    cfg.budget.target_tokens = Some(before * 9 / 10);
    let out = compacted(&cfg, &conv);
    assert!(!clipped_calls(&out).is_empty());
    assert!(
        texts_with(&out, "tool result clipped").is_empty(),
        "a result was clipped while arguments could reach the target"
    );
    assert!(validate(&out).is_empty());
}
