//! Every corpus transcript decodes, validates as the issue expects, and
//! survives encode → decode.

use abridge_model::{Family, Format, Rule, convert, decode, encode, fingerprint, validate};

use crate::common::corpus_files;

#[test]
fn every_corpus_file_decodes_and_validates() {
    let files = corpus_files();
    for path in &files {
        let bytes = std::fs::read(path).unwrap();
        let convs = decode(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(!convs.is_empty(), "{}", path.display());
        for (n, conv) in convs.iter().enumerate() {
            let violations = validate(conv);
            match conv.format {
                // A Claude Code checkpoint may end mid-step: its last call
                // waits for a result, as a mini-swe-agent log's does.
                Format::ClaudeCode if violations.len() == 1 => {
                    assert_eq!(
                        violations[0].rule,
                        Rule::PendingFinalCall,
                        "{}",
                        path.display()
                    );
                }
                Format::ClaudeCode | Format::TauBench | Format::Chat => assert!(
                    violations.is_empty(),
                    "{} #{n}: {:?}",
                    path.display(),
                    violations
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                ),
                Format::MiniSweAgent => {
                    assert_eq!(violations.len(), 1, "{}: {violations:?}", path.display());
                    assert_eq!(violations[0].rule, Rule::PendingFinalCall);
                    assert_eq!(violations[0].index, conv.messages.len() - 1);
                }
                other => panic!("{}: unexpected format {other:?}", path.display()),
            }
        }
    }
}

#[test]
fn corpus_formats_are_detected() {
    let mut seen = std::collections::BTreeMap::new();
    for path in corpus_files() {
        let convs = decode(&std::fs::read(&path).unwrap()).unwrap();
        *seen.entry(convs[0].format.as_str()).or_insert(0) += convs.len();
    }
    if seen.is_empty() {
        return;
    }
    // Each folder's files are read as the format its agent writes.
    let expected = |folder: &str| match folder.split('_').next().unwrap_or("") {
        "claude-code" => "claude-code",
        "mini-swe-agent" => "mini-swe-agent",
        "tau-bench" => "tau-bench",
        "openhands" => "openai",
        other => panic!("a corpus folder of an unknown agent: {other}"),
    };
    for path in corpus_files() {
        let folder = path
            .parent()
            .unwrap()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .to_string();
        let convs = decode(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(
            convs[0].format.as_str(),
            expected(&folder),
            "{}",
            path.display()
        );
    }
    assert_eq!(seen.get("mini-swe-agent"), Some(&5));
    assert_eq!(seen.get("tau-bench"), Some(&200));
}

#[test]
fn claude_code_logs_become_valid_anthropic_bodies() {
    for path in corpus_files() {
        let convs = decode(&std::fs::read(&path).unwrap()).unwrap();
        let conv = &convs[0];
        if conv.format != Format::ClaudeCode {
            continue;
        }
        // Parallel calls were merged: an assistant message holds them all.
        for m in &conv.messages {
            let ids: std::collections::HashSet<&str> =
                m.tool_calls().map(|c| c.id.as_str()).collect();
            assert_eq!(ids.len(), m.tool_calls().count(), "{}", path.display());
        }
        // One boundary per compaction the log records, each before its summary.
        let text = std::fs::read_to_string(&path).unwrap();
        let logged = text.matches("\"subtype\":\"compact_boundary\"").count();
        assert_eq!(conv.boundaries.len(), logged, "{}", path.display());
        for b in &conv.boundaries {
            let summary = conv.messages.get(b.index);
            assert!(
                summary.is_none_or(|m| m.meta.compact_summary),
                "{}: boundary at {}",
                path.display(),
                b.index
            );
        }
        // The body re-decodes as Anthropic, with the same messages, and is valid.
        let body = encode(conv).unwrap();
        let again = &decode(body.to_string().as_bytes()).unwrap()[0];
        assert_eq!(again.format, Format::Anthropic);
        assert_eq!(again.messages.len(), conv.messages.len());
        let pending = validate(conv).len();
        assert_eq!(validate(again).len(), pending);
        // And it converts to an OpenAI body just as valid.
        let openai = convert(conv, Family::OpenAi).unwrap().conversation;
        assert_eq!(validate(&openai).len(), pending, "{:?}", validate(&openai));
    }
}

#[test]
fn openai_corpus_runs_round_trip_and_convert() {
    for path in corpus_files() {
        let convs = decode(&std::fs::read(&path).unwrap()).unwrap();
        for conv in convs.iter().filter(|c| c.family == Family::OpenAi) {
            let body = encode(conv).unwrap();
            let again = &decode(body.to_string().as_bytes()).unwrap()[0];
            assert_eq!(encode(again).unwrap(), body);
            // Equal on the wire (log-only facts such as usage are not sent).
            assert_eq!(fingerprint(&again.messages), fingerprint(&conv.messages));
            let anthropic = convert(conv, Family::Anthropic).unwrap().conversation;
            let v = validate(&anthropic);
            // A mini-swe-agent log keeps its final unanswered call through conversion.
            assert!(
                v.iter().all(|v| v.rule == Rule::PendingFinalCall),
                "{}: {v:?}",
                path.display()
            );
        }
    }
}

/// What the harness injected as a user message (Claude Code's `isMeta`: a
/// skill's instructions, a local command's output) is marked so, not taken
/// for the user's words.
#[test]
fn claude_code_injected_messages_are_marked() {
    let log = [
        r#"{"type":"user","sessionId":"s","uuid":"1","message":{"role":"user","content":"Fix the build."}}"#,
        r#"{"type":"assistant","sessionId":"s","uuid":"2","message":{"id":"m1","role":"assistant","content":[{"type":"text","text":"Looking."}]}}"#,
        r#"{"type":"user","sessionId":"s","uuid":"3","isMeta":true,"message":{"role":"user","content":"Base directory for this skill: /skills/x"}}"#,
    ]
    .join("\n");
    let conv = &decode(log.as_bytes()).unwrap()[0];
    assert_eq!(conv.format, Format::ClaudeCode);
    let injected: Vec<bool> = conv.messages.iter().map(|m| m.meta.injected).collect();
    assert_eq!(injected, [false, false, true]);
}
