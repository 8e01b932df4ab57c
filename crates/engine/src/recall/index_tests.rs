//! Tests of `index.rs`.

use super::*;
use abridge_model::{Arguments, ContentForm, Role, ToolCall, ToolResult};

fn exchange(id: &str, name: &str, args: &str, result: &str) -> [Message; 2] {
    let call = Message {
        role: Role::Assistant,
        parts: vec![Part::ToolCall(Box::new(ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: Arguments::Json(args.into()),
            extra: Default::default(),
            function_extra: Default::default(),
        }))],
        ..Default::default()
    };
    let res = Message {
        role: Role::Tool,
        parts: vec![Part::ToolResult(Box::new(ToolResult {
            call_id: id.into(),
            parts: vec![Part::text(result)],
            form: ContentForm::Text,
            is_error: None,
            extra: Default::default(),
        }))],
        ..Default::default()
    };
    [call, res]
}

/// What the agent referred to in `messages`, as the engine takes it.
fn referred(messages: &[Message]) -> Vec<String> {
    abridge_summarize::facts::extract(messages, &Default::default()).referred
}

fn inputs<'a>(replaced: &'a [Message], recent: &'a str, budget: usize) -> IndexInputs<'a> {
    IndexInputs {
        replaced,
        previous: None,
        recent,
        tool: Some("abridge_recall"),
        briefing: "",
        referred: &[],
        error_prefixes: &[],
        budget,
        tokenizer: TokenizerKind::O200kBase,
        key: None,
    }
}

#[test]
fn lists_results_newest_and_mentioned_first_within_the_budget() {
    let mut msgs = Vec::new();
    msgs.extend(exchange(
        "1",
        "Read",
        r#"{"file_path":"src/a.rs"}"#,
        "fn a() {}",
    ));
    msgs.extend(exchange(
        "2",
        "Bash",
        r#"{"command":"cargo test"}"#,
        "exit code 1\nfailed",
    ));
    msgs.extend(exchange(
        "3",
        "Read",
        r#"{"file_path":"src/b.rs"}"#,
        "fn b() {}",
    ));
    msgs.extend(exchange(
        "4",
        "Read",
        r#"{"file_path":"src/a.rs"}"#,
        "fn a2() {}",
    ));
    let referred = referred(&msgs);
    let idx = build(&IndexInputs {
        referred: &referred,
        ..inputs(&msgs, "now edit src/b.rs", 1_000)
    });
    // The names the region used that the kept history does not hold.
    assert!(
        idx.text.contains("\n  names there: `src/a.rs`\n"),
        "{}",
        idx.text
    );
    let lines: Vec<&str> = idx.text.lines().filter(|l| !l.starts_with(NAMES)).collect();
    assert!(lines[0].starts_with(HEADING));
    assert!(lines[1].starts_with("- the 8 replaced messages"));
    assert!(
        lines[2].starts_with("- Read src/b.rs · 1 line · 9 B · abr_"),
        "{lines:?}"
    );
    assert!(
        lines[3].starts_with("- Read src/a.rs"),
        "newest read of a.rs only"
    );
    assert!(
        lines[4]
            .starts_with("- Bash: cargo test · 2 lines · 18 B · failed (exit 1): failed · abr_"),
        "{lines:?}"
    );
    assert_eq!(lines.len(), 5);
    assert_eq!(idx.originals.len(), 5, "four results and the region");
    // Every handle listed names one of the originals.
    let kept: HashSet<_> = idx.originals.iter().map(|o| o.handle.clone()).collect();
    assert!(Handle::find_all(&idx.text).all(|h| kept.contains(&h)));

    let small = build(&inputs(&msgs, "now edit src/b.rs", 40));
    assert!(small.text.lines().count() < 5);
    assert!(small.text.contains("replaced messages"));
}

#[test]
fn names_skip_what_the_briefing_holds_and_show_paths_under_its_root() {
    let msgs: Vec<Message> = exchange(
        "1",
        "Read",
        r#"{"file_path":"/w/app/lib/a.ex"}"#,
        "defmodule A do end",
    )
    .into_iter()
    .chain(exchange(
        "2",
        "Bash",
        r#"{"command":"mix test test/a_test.exs"}"#,
        "ok",
    ))
    .collect();
    let briefing = "Paths below are relative to `/w/app`.\n\n## Files\n- read · lib/a.ex";
    let referred = referred(&msgs);
    let idx = build(&IndexInputs {
        briefing,
        referred: &referred,
        ..inputs(&msgs, "", 1_000)
    });
    let names = idx.text.lines().find(|l| l.starts_with(NAMES)).unwrap();
    assert!(names.contains("`test/a_test.exs`"), "{names}");
    assert!(!names.contains("a.ex"), "the briefing names it: {names}");
}

#[test]
fn without_the_tool_the_index_is_a_list_for_a_reader() {
    let msgs: Vec<Message> = exchange(
        "1",
        "Bash",
        r#"{"command":"cargo test"}"#,
        "exit code 101\nerror: boom",
    )
    .into_iter()
    .chain(exchange(
        "2",
        "Read",
        r#"{"file_path":"src/a.rs"}"#,
        "fn a() {}",
    ))
    .collect();
    let msgs: Vec<Message> = msgs
        .into_iter()
        .chain(exchange(
            "3",
            "Bash",
            r#"{"command":"make"}"#,
            "built\nexit code: 0",
        ))
        .collect();
    let idx = build(&IndexInputs {
        tool: None,
        ..inputs(&msgs, "", 1_000)
    });
    // A command says how it exited.
    assert!(
        idx.text.contains("- Bash: make · exit 0, 2 lines · 18 B\n"),
        "{}",
        idx.text
    );
    assert!(idx.text.starts_with(LISTED), "{}", idx.text);
    assert!(
        idx.text.contains("- Read src/a.rs · 1 line · 9 B\n"),
        "{}",
        idx.text
    );
    assert!(
        idx.text
            .contains("cargo test · 2 lines · 25 B · failed (exit 101)"),
        "{}",
        idx.text
    );
    for word in ["recall", "abridge", "abr_", "call"] {
        assert!(
            !idx.text.to_lowercase().contains(word),
            "{word}: {}",
            idx.text
        );
    }
    assert!(idx.originals.is_empty());
    // The briefing and its list split as the tool's index does.
    let briefing = format!("## Task\nfix it\n\n{}", idx.text);
    assert_eq!(split(&briefing).0, "## Task\nfix it");
}

/// The index of a second region, after a briefing that ended with `first`.
fn chained(first: &Index) -> Index {
    let briefing = format!("## Task\nfix it\n\n{}", first.text);
    let (text, section) = split(&briefing);
    assert_eq!(text, "## Task\nfix it");
    let second: Vec<Message> =
        exchange("2", "Read", r#"{"file_path":"src/c.rs"}"#, "fn c() {}").into();
    build(&IndexInputs {
        previous: section,
        ..inputs(&second, "", 1_000)
    })
}

#[test]
fn a_briefing_too_small_for_a_list_names_everything_in_one_line() {
    let mut msgs = Vec::new();
    msgs.extend(exchange(
        "1",
        "Read",
        r#"{"file_path":"src/a.rs"}"#,
        "fn a() {}",
    ));
    let idx = build(&inputs(&msgs, "", 5));
    assert_eq!(
        idx.text.trim(),
        format!("(recall {})", idx.originals.last().unwrap().handle)
    );
    let (label, handle) = compact_line(idx.text.trim()).expect(&idx.text);
    assert_eq!(label, EARLIER_REGION);
    // As an earlier release wrote it, it reads the same.
    let old = format!("(the 2 replaced messages: recall {handle})");
    assert_eq!(
        compact_line(&old),
        Some(("the 2 replaced messages", handle.clone()))
    );
    assert!(idx.originals.iter().any(|o| o.handle == handle));
    // Chained, the one line comes back as the list's region line, and
    // the new region's original holds it too.
    let two = chained(&idx);
    assert!(two.text.contains(handle.as_str()), "{}", two.text);
    let region = two
        .originals
        .iter()
        .find(|o| o.kind == super::super::OriginalKind::Region)
        .unwrap();
    assert!(
        matches!(&region.pieces[0], super::super::Piece::Text { text } if text.contains(handle.as_str()))
    );
}

#[test]
fn a_chained_index_keeps_the_earlier_lines_after_the_new_ones() {
    let first: Vec<Message> =
        exchange("1", "Read", r#"{"file_path":"src/a.rs"}"#, "fn a() {}").into();
    let one = build(&inputs(&first, "", 1_000));
    let two = chained(&one);
    let lines: Vec<&str> = two.text.lines().filter(|l| !l.starts_with(NAMES)).collect();
    assert!(lines[2].starts_with("- Read src/c.rs"), "{lines:?}");
    assert!(lines.iter().any(|l| l.starts_with("- Read src/a.rs")));
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.starts_with("- the 2 replaced messages"))
            .count(),
        2,
        "the earlier region's line is carried: {lines:?}"
    );
    assert_eq!(Handle::find_all(&two.text).count(), 4);
}
