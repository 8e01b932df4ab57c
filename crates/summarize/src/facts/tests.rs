//! Tests of the fact extractor.

use super::*;

/// Reading many messages at once, shared between threads that meet
/// a call in one share and its result in the next, gives the facts
/// one thread gives.
#[test]
fn a_run_read_on_many_threads_has_the_facts_of_one() {
    use crate::testing::exchange;
    use serde_json::json;
    let mut messages = vec![Message::text(
        Role::User,
        "Fix `parse_expr` in src/parse.rs.",
    )];
    for i in 0..3000 {
        let mut said = Message::text(
            Role::Assistant,
            format!("Now `check_{}` in src/mod_{}.rs. Then on.", i % 97, i % 41),
        );
        said.form = abridge_model::ContentForm::Text;
        messages.push(said);
        let (name, args, out) = match i % 4 {
            0 => (
                "Read",
                json!({"file_path": format!("src/mod_{}.rs", i % 41)}),
                format!("fn check_{i}() {{}}\n").repeat(8),
            ),
            1 => (
                "Bash",
                json!({"command": format!("cargo test t{}", i % 13)}),
                format!("error: t{i} failed\nexit code 1\n").repeat(4),
            ),
            2 => (
                "Edit",
                json!({"file_path": "src/parse.rs", "old_string": "a", "new_string": format!("fn check_{i}() {{}}")}),
                "The file has been updated.".repeat(6),
            ),
            _ => (
                "Grep",
                json!({"pattern": format!("check_{i}")}),
                format!("src/mod_{i}.rs:1: check_{i}\n").repeat(6),
            ),
        };
        messages.extend(exchange(&format!("c{i}"), name, args, &out));
    }
    let cfg = FactConfig::default();
    let facts = |threads| {
        let mut e = Extraction::default();
        e.feed_on(&messages, &cfg, threads);
        e.finish()
    };
    let one = facts(1);
    assert!(one.commands.len() >= 13 && one.files.len() > 1, "{one:?}");
    assert_eq!(facts(3), one);
}

#[test]
fn an_error_keeps_its_first_lines_and_its_verdict() {
    let mut out = vec![
        "Pre-commit validation failed:".to_owned(),
        "[DIALYZER]".into(),
    ];
    out.push(format!("[{}]", ":dep, ".repeat(200)));
    out.extend((0..30).map(|i| format!("progress {i}")));
    out.push("lib/a.ex:58:13:pattern_match".into());
    out.push("The pattern can never match the type.".into());
    let e = error_excerpt(&out.join("\n"));
    assert!(
        e.starts_with("Pre-commit validation failed:\n[DIALYZER]\n… (21 lines)"),
        "{e}"
    );
    assert!(e.ends_with("lib/a.ex:58:13:pattern_match\nThe pattern can never match the type."));
    assert!(!e.contains(":dep"), "{e}");
    assert_eq!(error_excerpt("one\ntwo"), "one\ntwo");
}

#[test]
fn a_file_lists_its_names_that_the_agents_changes_defined_or_called() {
    use crate::testing::exchange;
    use serde_json::json;
    let read = "     1\u{2192}defmodule App.Hooks do\n     2\u{2192}  def commit(c) do\n     \
                3\u{2192}    enqueue(c)\n     4\u{2192}  end\n     5\u{2192}  defp enqueue(c), do: c\n     \
                6\u{2192}  defp unrelated, do: :ok\n";
    let messages = [
        exchange("r", "Read", json!({"file_path": "lib/hooks.ex"}), read),
        exchange(
            "e",
            "Edit",
            json!({
                "file_path": "lib/hooks.ex",
                "old_string": "    enqueue(c)",
                "new_string": "    with_span(\"x\", fn -> enqueue(c) end)\n  <div class=\"btn\">",
            }),
            "The file has been updated.",
        ),
    ]
    .concat();
    let f = extract(&messages, &FactConfig::default());
    let file = &f.files[0];
    assert_eq!(file.symbols, ["enqueue"]);
    assert_eq!(
        file.defined,
        ["App.Hooks", "commit", "enqueue", "unrelated"]
    );
}

/// An agent whose only tool is a shell reads, edits and writes files
/// through it: those files are the briefing's files like any editor's.
#[test]
fn a_shell_agents_files_are_read_from_its_commands() {
    use crate::testing::exchange;
    use serde_json::json;
    let bash = |cmd: &str| json!({ "command": cmd });
    let messages = [
        exchange(
            "a",
            "bash",
            bash("cd /testbed && sed -n '1,40p' astropy/io/ascii/qdp.py"),
            "def line_type(line):\n    _command_re = r\"READ [TS]ERR\"",
        ),
        exchange(
            "b",
            "bash",
            bash("sed -i 's/READ/(?i)READ/' astropy/io/ascii/qdp.py"),
            "",
        ),
        exchange(
            "c",
            "bash",
            bash("cat <<'EOF' > /testbed/repro.py\nfrom astropy.table import Table\nEOF"),
            "",
        ),
        exchange(
            "d",
            "bash",
            bash("cat missing.py && python /testbed/repro.py"),
            "cat: missing.py: No such file or directory\nexit code 1",
        ),
    ]
    .concat();
    let f = extract(&messages, &FactConfig::default());
    let files: Vec<(&str, usize, usize, usize)> = f
        .files
        .iter()
        .map(|x| (x.path.as_str(), x.read, x.edited, x.written))
        .collect();
    assert_eq!(
        files,
        [
            ("astropy/io/ascii/qdp.py", 1, 1, 0),
            ("/testbed/repro.py", 0, 0, 1)
        ],
        "{f:?}"
    );
    assert!(
        f.files[0].defined.contains(&"line_type".to_owned()),
        "{f:?}"
    );
}

#[test]
fn an_earlier_briefing_under_the_configured_wrapper_is_not_a_user_message() {
    let cfg = FactConfig {
        wrapper: "ctx".into(),
        ..FactConfig::default()
    };
    let messages = [
        Message::text(Role::User, "<ctx>\n## Task\nold briefing\n</ctx>"),
        Message::text(
            Role::User,
            "<compacted-history>\nnot ours\n</compacted-history>",
        ),
    ];
    let f = extract(&messages, &cfg);
    assert_eq!(f.user_messages.len(), 1, "{:?}", f.user_messages);
    assert!(f.user_messages[0].contains("not ours"));
    // What the harness injected is not the user's words either.
    let mut skill = Message::text(Role::User, "Base directory for this skill: /skills/x");
    skill.meta.injected = true;
    let f = extract(&[skill], &cfg);
    assert!(f.user_messages.is_empty() && f.decisions.is_empty());
}
