//! The offline briefing's shape on both Claude Code sessions of the corpus
//! at their real cut (10 % of the tokens before it, o200k_base), checked
//! against snapshots in `tests/it/snapshots/`: headings in order, items per
//! section, and how each error and command line is built (the text itself
//! stays in the corpus). `ABRIDGE_UPDATE_SNAPSHOTS=1` rewrites them.

use std::path::PathBuf;

use abridge::model::{Conversation, decode};
use abridge::{Compactor, Config, PolicyKind};

const SESSIONS: [&str; 2] = [
    "4d5611e5-241a-462a-8d15-5122611a9569",
    "ae4a77f8-aedd-4bc1-888f-c94edc91af04",
];

/// The briefing of `session` at its recorded compaction, or `None` without
/// the corpus.
fn briefing_at_cut(session: &str) -> Option<String> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/corpus/claude-code_marot-spotter")
        .join(format!("{session}.jsonl"));
    if !path.is_file() {
        eprintln!("skipping: corpus not found at {}", path.display());
        return None;
    }
    let conv = decode(&std::fs::read(path).unwrap()).unwrap().remove(0);
    let before = Conversation {
        messages: conv.messages[..conv.boundaries[0].index].to_vec(),
        ..conv.clone_envelope()
    };
    let mut cfg = Config {
        tokenizer: Some(abridge::tokens::TokenizerKind::O200kBase),
        ..Config::default()
    };
    cfg.policies.pipeline = vec![PolicyKind::Summarize, PolicyKind::DropIterations];
    cfg.budget.min_iterations = 1;
    let tokens = Compactor::new(cfg.clone()).unwrap().count(&before).get();
    cfg.budget.target_tokens = Some(tokens / 10);
    let out = Compactor::new(cfg).unwrap().compact(&before).unwrap();
    out.conversation
        .messages
        .iter()
        .map(|m| m.text_content().into_owned())
        .find(|t| t.starts_with("<compacted-history>"))
}

/// Each section of a briefing: its heading and its lines.
fn sections(briefing: &str) -> Vec<(&str, Vec<&str>)> {
    let mut out: Vec<(&str, Vec<&str>)> = Vec::new();
    for line in briefing.lines() {
        match line.strip_prefix("## ") {
            Some(h) => out.push((h, Vec::new())),
            None if !line.trim().is_empty() => {
                if let Some((_, lines)) = out.last_mut() {
                    lines.push(line);
                }
            }
            None => {}
        }
    }
    out
}

/// An error or command line with its text abstracted: `` `CALL` ×N → outcome
/// (failed; fixed) `` — the structure the snapshot pins.
fn line_shape(line: &str) -> String {
    let body = line.trim_start_matches("- ");
    let mut shape = String::new();
    if let Some(rest) = body.strip_prefix('`') {
        shape.push_str("`CALL`");
        let after = rest.split_once('`').map_or("", |(_, a)| a);
        if let Some(n) = after.trim_start().strip_prefix('×') {
            shape.push_str(&format!(" ×{}", n.split_whitespace().next().unwrap_or("")));
        }
        let outcome = after.split_once("→ ").map_or("", |(_, o)| o);
        let kind = ["ok", "exit", "failed"]
            .into_iter()
            .find(|k| outcome.starts_with(k))
            .unwrap_or("?");
        shape.push_str(&format!(" → {kind}"));
        if after.contains("(failed: ") {
            let fixed = if after.contains("; fixed") {
                "fixed"
            } else {
                "not fixed"
            };
            shape.push_str(&format!(" (failed; {fixed})"));
        }
    } else if let Some((tool, rest)) = body.split_once(" `") {
        let cause = if rest.contains(": ") { ": cause" } else { "" };
        shape.push_str(&format!("{tool} `PATH`{cause}"));
    } else {
        shape.push('?');
    }
    shape
}

/// The shape: each heading with its line count; error and command lines
/// abstracted one by one.
fn shape(briefing: &str) -> String {
    let mut out = String::new();
    for (heading, lines) in sections(briefing) {
        let items: Vec<&&str> = lines.iter().filter(|l| !l.starts_with("- (")).collect();
        out.push_str(&format!("## {heading} — {} lines\n", items.len()));
        if heading.starts_with("Errors") || heading.starts_with("Commands") {
            for l in items {
                out.push_str(&format!("  {}\n", line_shape(l)));
            }
        }
    }
    out
}

#[test]
fn the_offline_briefing_keeps_its_shape_on_the_claude_code_sessions() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/it/snapshots");
    for session in SESSIONS {
        let Some(b) = briefing_at_cut(session) else {
            return;
        };
        let got = shape(&b);
        let path = dir.join(format!("briefing-{}.txt", &session[..8]));
        if std::env::var_os("ABRIDGE_UPDATE_SNAPSHOTS").is_some() {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, &got).unwrap();
            continue;
        }
        let want = std::fs::read_to_string(&path).unwrap_or_default();
        assert_eq!(
            got,
            want,
            "{session}: the briefing's shape changed (ABRIDGE_UPDATE_SNAPSHOTS=1 rewrites {})",
            path.display()
        );
    }
}

/// What the shape must always show, whatever the snapshot: the task's
/// details, what is done and the current state lead (the task itself stays
/// verbatim above the briefing, never restated); every error names its
/// call and what came of it; no command is listed twice.
#[test]
fn the_offline_briefing_leads_with_progress_and_lists_each_command_once() {
    let lead = [
        "Task details (output of the commands the task named)",
        "Done (as the agent's commands record it)",
        "Current state (the agent's last words)",
        "What the agent did (its own words, oldest first)",
    ];
    for (session, errors) in SESSIONS.into_iter().zip([false, true]) {
        let Some(b) = briefing_at_cut(session) else {
            return;
        };
        let sections = sections(&b);
        let headings: Vec<&str> = sections.iter().map(|(h, _)| *h).collect();
        assert_eq!(headings[..4], lead, "{session}: {headings:?}");
        assert_eq!(
            headings.contains(&"Errors and what came of them"),
            errors,
            "{headings:?}"
        );
        let lines = |prefix: &str| -> Vec<&str> {
            sections
                .iter()
                .filter(|(h, _)| h.starts_with(prefix))
                .flat_map(|(_, l)| l.iter().copied())
                .filter(|l| l.starts_with("- ") && !l.starts_with("- ("))
                .collect()
        };
        let mut seen = Vec::new();
        for line in lines("Errors").iter().chain(&lines("Commands")) {
            assert!(
                line.contains('`'),
                "{session}: an error without its call: {line}"
            );
            if let Some(cmd) = line.strip_prefix("- `").and_then(|l| l.split('`').next()) {
                assert!(!seen.contains(&cmd), "{session}: `{cmd}` listed twice");
                seen.push(cmd);
            }
        }
        for line in lines("Errors").iter().filter(|l| l.starts_with("- `")) {
            assert!(line.contains("fixed"), "{session}: {line}");
        }
        // The task's own details are quoted, so their headings stay inside.
        let details = &sections[0].1;
        assert!(details[0].starts_with("`bd show "), "{details:?}");
        assert!(
            details
                .iter()
                .skip(1)
                .all(|l| l.starts_with("> ") || l.starts_with('`') || *l == ">")
        );
    }
}
