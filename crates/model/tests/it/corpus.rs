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
                Format::ClaudeCode | Format::TauBench => assert!(
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
    assert_eq!(seen.get("claude-code"), Some(&2));
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
        // Parallel calls were merged: some assistant message holds several calls.
        assert!(conv.messages.iter().any(|m| m.tool_calls().count() > 1));
        assert_eq!(conv.boundaries.len(), 1, "{}", path.display());
        let b = &conv.boundaries[0];
        assert!(conv.messages[b.index].meta.compact_summary);
        // The body re-decodes as Anthropic, with the same messages, and is valid.
        let body = encode(conv).unwrap();
        let again = &decode(body.to_string().as_bytes()).unwrap()[0];
        assert_eq!(again.format, Format::Anthropic);
        assert_eq!(again.messages.len(), conv.messages.len());
        assert!(validate(again).is_empty());
        // And it converts to a valid OpenAI body.
        let openai = convert(conv, Family::OpenAi).unwrap().conversation;
        assert!(validate(&openai).is_empty(), "{:?}", validate(&openai));
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
