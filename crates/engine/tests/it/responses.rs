//! A Responses API history (Codex's shape: reasoning with encrypted content,
//! shell calls, long outputs) compacts like the other formats: valid,
//! within the target, reasoning and the carried items byte-identical.

use abridge::model::{Format, decode_value, encode, validate};
use abridge::{Compactor, Config, PolicyKind};
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

/// Codex as the pinned client sends it: commands through `exec_command`
/// (exit on the output's third line), edits through the free-form
/// `apply_patch` custom tool.
fn codex_patching(rounds: usize) -> Value {
    let mut input = vec![
        json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Make the parser tests pass"}]}),
    ];
    for i in 0..rounds {
        let log: String = (0..80)
            .map(|k| format!("test parse_{i}::case_{k} ... FAILED\n"))
            .collect();
        input.push(json!({"type": "function_call", "name": "exec_command",
            "arguments": json!({"cmd": format!("cargo test parse_{i}")}).to_string(),
            "call_id": format!("run_{i}")}));
        input.push(json!({"type": "function_call_output", "call_id": format!("run_{i}"),
            "output": format!("Chunk ID: c{i}\nWall time: 0.8 seconds\nProcess exited with code 101\nOriginal token count: 900\nOutput:\n{log}")}));
        input.push(json!({"type": "custom_tool_call", "name": "apply_patch", "call_id": format!("patch_{i}"),
            "input": format!("*** Begin Patch\n*** Update File: src/parse_{i}.rs\n@@\n-    todo!()\n+    Ok(())\n\
                              *** Update File: src/lexer.rs\n@@\n-    // step {i}\n+    // done {i}\n*** End Patch\n")}));
        input.push(
            json!({"type": "custom_tool_call_output", "call_id": format!("patch_{i}"),
            "output": format!("Success. Updated the following files:\nM src/parse_{i}.rs\n")}),
        );
    }
    json!({"model": "gpt-5-codex", "instructions": "You are Codex.", "input": input,
           "tools": [{"type": "function", "name": "exec_command", "parameters": {"type": "object"}},
                     {"type": "custom", "name": "apply_patch"}]})
}

#[test]
fn a_codex_briefing_names_every_file_it_patched_and_its_commands_failures() {
    let conv = decode_value(codex_patching(12), Format::Responses)
        .unwrap()
        .remove(0);
    let mut cfg = Config::default();
    cfg.budget.target_tokens = Some(4_000);
    cfg.policies.pipeline = vec![PolicyKind::Summarize];
    let out = Compactor::new(cfg).unwrap().compact(&conv).unwrap();
    let briefing = out
        .report
        .briefing_text(&out.conversation, "compacted-history")
        .expect("the old rounds were briefed");
    let files = briefing
        .split("## ")
        .find(|s| s.starts_with("Files"))
        .unwrap_or_else(|| panic!("no Files section:\n{briefing}"));
    for i in [0, 5] {
        assert!(
            files.contains(&format!("src/parse_{i}.rs")) && files.contains("edited"),
            "{briefing}"
        );
    }
    // A patch of two files is an edit of each: the second file too.
    assert!(files.contains("src/lexer.rs"), "{briefing}");
    // A run that exited 101 is not recorded as done.
    assert!(
        briefing.contains("`cargo test parse_0`") && briefing.contains("exit 101"),
        "{briefing}"
    );
    assert!(
        !briefing.contains("`cargo test parse_0` → ok"),
        "{briefing}"
    );
}
