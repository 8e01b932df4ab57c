//! A Responses API history (Codex's shape: reasoning with encrypted content,
//! shell calls, long outputs) compacts like the other formats: valid,
//! within the target, reasoning and the carried items byte-identical.

use abridge::model::{Format, decode_value, encode, validate};
use abridge::{Compactor, Config};
use serde_json::{Value, json};

fn codex_history(turns: usize) -> Value {
    let mut input = vec![
        json!({"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "sandbox: workspace-write"}]}),
        json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Make the tests in src/ pass"}]}),
    ];
    for i in 0..turns {
        input.push(json!({"type": "reasoning", "summary": [{"type": "summary_text", "text": format!("**Step {i}**")}],
                          "content": null, "encrypted_content": format!("gAAAA{}{i}==", "e".repeat(200))}));
        input.push(json!({"type": "function_call", "name": "shell",
                          "arguments": json!({"command": ["bash", "-lc", format!("cat src/mod_{i}.rs")]}).to_string(),
                          "call_id": format!("call_{i}")}));
        let output: String = (0..300)
            .map(|k| format!("line {k} of src/mod_{i}.rs\n"))
            .collect();
        input.push(json!({"type": "function_call_output", "call_id": format!("call_{i}"), "output": output}));
    }
    json!({"model": "gpt-5-codex", "instructions": "You are Codex.", "input": input,
           "tools": [{"type": "function", "name": "shell", "parameters": {"type": "object"}}],
           "store": false, "stream": true, "include": ["reasoning.encrypted_content"]})
}

#[test]
fn a_codex_history_compacts_valid_within_target_with_reasoning_intact() {
    let body = codex_history(30);
    let conv = decode_value(body.clone(), Format::Responses)
        .unwrap()
        .remove(0);
    let mut cfg = Config::default();
    cfg.budget.target_tokens = Some(20_000);
    let outcome = Compactor::new(cfg).unwrap().compact(&conv).unwrap();
    let report = &outcome.report;
    assert!(report.compacted);
    assert!(
        report.tokens_before.get() > 60_000,
        "{}",
        report.tokens_before
    );
    assert!(
        report.tokens_after.get() <= 20_000,
        "{}",
        report.tokens_after
    );
    let out = outcome.conversation.into_owned();
    assert_eq!(validate(&out), vec![]);

    let sent = encode(&out).unwrap();
    assert_eq!(sent["instructions"], "You are Codex.");
    assert_eq!(sent["include"], body["include"]);
    let before = body["input"].as_array().unwrap();
    let after = sent["input"].as_array().unwrap();
    // The head is carried as it was.
    assert_eq!(after[..2], before[..2]);
    // Every reasoning item sent is one of the originals, byte for byte, and
    // is followed by its own turn's call.
    for (i, item) in after.iter().enumerate() {
        if item["type"] == "reasoning" {
            assert!(before.contains(item), "{item}");
            let step = item["summary"][0]["text"]
                .as_str()
                .unwrap()
                .trim_matches('*')
                .replace("Step ", "");
            assert_eq!(after[i + 1]["call_id"], format!("call_{step}"));
        }
    }
    // The newest turn is kept whole.
    assert_eq!(after[after.len() - 3..], before[before.len() - 3..]);
}
