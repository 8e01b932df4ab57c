//! OpenHands V1 conversations (event folders) read as chat conversations,
//! their condensations as boundaries with the view the agent kept.

use abridge_model::{Conversation, Format, Part, Role, Rule, decode_value, validate};
use serde_json::{Value, json};

use crate::common::corpus_dir;

fn action(id: &str, response: &str, call: &str, command: &str, thought: &str) -> Value {
    json!({
        "kind": "ActionEvent", "id": id, "source": "agent", "llm_response_id": response,
        "thought": [{"type": "text", "text": thought}],
        "action": {"kind": "ExecuteBashAction", "command": command},
        "tool_name": "execute_bash", "tool_call_id": call,
        "tool_call": {"id": call, "type": "function", "index": 0,
            "function": {"name": "execute_bash", "arguments": json!({"command": command}).to_string()}},
    })
}

fn observation(id: &str, call: &str, output: &str, exit: i64) -> Value {
    json!({
        "kind": "ObservationEvent", "id": id, "source": "environment", "tool_name": "execute_bash",
        "tool_call_id": call, "action_id": "x",
        "observation": {"kind": "ExecuteBashObservation", "output": output, "command": "c",
            "metadata": {"exit_code": exit, "suffix": format!("\n[The command completed with exit code {exit}.]")}},
    })
}

fn events() -> Vec<Value> {
    let mut e = vec![
        json!({"kind": "SystemPromptEvent", "id": "s", "source": "agent",
            "system_prompt": {"type": "text", "text": "You are OpenHands."},
            "tools": [{"type": "function", "function": {"name": "execute_bash", "description": "Run.", "parameters": {"type": "object"}}}]}),
        json!({"kind": "MessageEvent", "id": "u", "source": "user",
            "llm_message": {"role": "user", "content": [{"type": "text", "text": "Fix the bug in src/app.py."}]}}),
    ];
    // Two calls of one response, then one each.
    e.push(action("a1", "r1", "c1", "ls", "Looking around."));
    e.push(action("a2", "r1", "c2", "cat README", ""));
    e.push(observation("o1", "c1", "src", 0));
    e.push(observation("o2", "c2", "readme", 0));
    e.push(action("a3", "r2", "c3", "pytest", "Testing."));
    e.push(observation("o3", "c3", "1 failed", 1));
    e.push(action("a4", "r3", "c4", "grep bug src", "Searching."));
    e.push(observation("o4", "c4", "src/app.py:3: bug", 0));
    e.push(
        json!({"kind": "Condensation", "id": "k", "source": "environment",
        "forgotten_event_ids": ["a1", "a2", "o1", "o2", "a3", "o3"],
        "summary": "Listed the repo; pytest fails in src/app.py.", "summary_offset": 2}),
    );
    e.push(action(
        "a5",
        "r4",
        "c5",
        "sed -i s/bug/fix/ src/app.py",
        "Fixing.",
    ));
    e
}

#[test]
fn events_become_messages_and_a_condensation_a_boundary_with_its_view() {
    let conv = decode_value(Value::Array(events()), Format::OpenHands)
        .unwrap()
        .remove(0);
    assert_eq!(conv.format, Format::OpenHands);
    let roles: Vec<Role> = conv.messages.iter().map(|m| m.role.clone()).collect();
    use Role::*;
    assert_eq!(
        roles,
        [
            System, User, Assistant, Tool, Tool, Assistant, Tool, Assistant, Tool, User, Assistant
        ]
    );
    // One response's two actions are one message, the thought first.
    let first = &conv.messages[2];
    assert_eq!(first.tool_calls().count(), 2);
    assert_eq!(first.text_content(), "Looking around.");
    // A failed command is an error result, with the agent's exit note.
    let failed = conv.messages[6].tool_results().next().unwrap();
    assert_eq!(failed.is_error, Some(true));
    assert!(
        failed
            .text()
            .ends_with("[The command completed with exit code 1.]")
    );
    assert_eq!(conv.tools.as_ref().map(Vec::len), Some(1));
    // The condensation: its summary in place, and what the agent then saw.
    let b = &conv.boundaries[0];
    assert_eq!(b.index, 9);
    assert!(conv.messages[9].meta.compact_summary);
    assert_eq!(b.view, [0, 1, 9, 7, 8]);
    // The last call has no observation: the log ends mid-step.
    let v = validate(&conv);
    assert_eq!(v.len(), 1, "{v:?}");
    assert_eq!(v[0].rule, Rule::PendingFinalCall);
}

#[test]
fn a_command_with_no_output_reads_as_its_exit_note() {
    let mut e = events();
    e.truncate(2);
    e.push(action("a1", "r1", "c1", "grep -n missing src", "Looking."));
    e.push(observation("o1", "c1", "", 1));
    let conv = decode_value(Value::Array(e), Format::OpenHands)
        .unwrap()
        .remove(0);
    let r = conv.messages[3].tool_results().next().unwrap();
    // What the agent's model read: the note, not the observation's JSON.
    assert_eq!(r.text(), "\n[The command completed with exit code 1.]");
    assert_eq!(r.is_error, Some(true));
}

#[test]
fn a_call_whose_observation_never_came_is_answered_as_interrupted() {
    let mut e = events();
    e.truncate(10);
    e.remove(7); // o3: pytest's observation
    let conv = decode_value(Value::Array(e), Format::OpenHands)
        .unwrap()
        .remove(0);
    assert!(validate(&conv).is_empty(), "{:?}", validate(&conv));
    let answered = conv.messages[6].tool_results().next().unwrap();
    assert_eq!(answered.call_id, "c3");
    assert_eq!(answered.is_error, Some(true));
}

/// An events folder read as the CLI reads it: its files in name order.
fn read_folder(dir: &std::path::Path) -> Conversation {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    let events: Vec<Value> = files
        .iter()
        .map(|f| serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap())
        .collect();
    decode_value(Value::Array(events), Format::OpenHands)
        .unwrap()
        .remove(0)
}

#[test]
fn every_corpus_conversation_reads_validly_with_its_condensations() {
    let Some(corpus) = corpus_dir() else {
        return;
    };
    let root = corpus.join("openhands-v1_swebench");
    if !root.is_dir() {
        eprintln!("skipping: {} absent", root.display());
        return;
    }
    let (mut conversations, mut condensations) = (0, 0);
    for dir in std::fs::read_dir(&root).unwrap().flatten() {
        let events = dir.path().join("event_service/events");
        if !events.is_dir() {
            continue;
        }
        let conv = read_folder(&events);
        let at = dir.path().display().to_string();
        conversations += 1;
        // Valid but for a run that stopped mid-step.
        let v = validate(&conv);
        assert!(
            v.iter().all(|v| v.rule == Rule::PendingFinalCall),
            "{at}: {v:?}"
        );
        let logged = std::fs::read_dir(&events)
            .unwrap()
            .flatten()
            .filter(|f| {
                std::fs::read_to_string(f.path())
                    .unwrap()
                    .contains("\"kind\": \"Condensation\"")
            })
            .count();
        assert_eq!(conv.boundaries.len(), logged, "{at}");
        condensations += logged;
        for b in &conv.boundaries {
            assert!(conv.messages[b.index].meta.compact_summary, "{at}");
            assert!(b.view.contains(&b.index), "{at}");
            // What the agent saw after it is a conversation the API takes.
            let kept = Conversation {
                messages: b.view.iter().map(|&i| conv.messages[i].clone()).collect(),
                ..conv.clone_envelope()
            };
            assert_eq!(kept.messages[0].role, Role::System, "{at}");
            let v = validate(&kept);
            assert!(v.is_empty(), "{at}: view after {}: {v:?}", b.index);
            assert!(kept.messages.len() < b.index, "{at}: it forgot something");
        }
        // Every call's arguments were read.
        assert!(
            conv.messages
                .iter()
                .flat_map(|m| &m.parts)
                .all(|p| !matches!(p, Part::ToolCall(c) if c.arguments.to_value().is_null()))
        );
    }
    assert_eq!((conversations, condensations), (22, 38));
}
