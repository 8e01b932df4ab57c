//! OpenAI ⇄ Anthropic conversion details.

use abridge_model::{Error, Family, convert, decode, encode, validate};
use serde_json::{Value, json};

fn conv_of(body: Value) -> abridge_model::Conversation {
    decode(body.to_string().as_bytes()).unwrap().remove(0)
}

#[test]
fn openai_to_anthropic_moves_system_tools_and_envelope() {
    let c = conv_of(json!({
    "model": "gpt-4o", "max_completion_tokens": 500, "temperature": 0.70, "stop": "END",
    "tool_choice": "required", "parallel_tool_calls": false, "frequency_penalty": 1,
    "tools": [{"type": "function", "function": {"name": "ls", "description": "list", "parameters": {"type": "object"}}}],
    "messages": [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "see"}, {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{\"p\":1}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "a.txt"},
        {"role": "user", "content": "thanks"}
    ]}));
    let out = convert(&c, Family::Anthropic).unwrap();
    let body = encode(&out.conversation).unwrap();
    assert_eq!(body["system"], json!("be brief"));
    assert_eq!(body["max_tokens"], json!(500));
    assert_eq!(body["stop_sequences"], json!(["END"]));
    assert_eq!(
        body["tool_choice"],
        json!({"type": "any", "disable_parallel_tool_use": true})
    );
    assert_eq!(
        body["tools"],
        json!([{"name": "ls", "description": "list", "input_schema": {"type": "object"}}])
    );
    assert_eq!(
        body["messages"][0]["content"][1]["source"],
        json!({"type": "base64", "media_type": "image/png", "data": "AAAA"})
    );
    assert_eq!(
        body["messages"][1]["content"],
        json!([{"type": "tool_use", "id": "c1", "name": "ls", "input": {"p": 1}}])
    );
    // The tool result and the user's text share the next user message, results first.
    assert_eq!(
        body["messages"][2]["content"],
        json!([
        {"type": "tool_result", "tool_use_id": "c1", "content": "a.txt"}, {"type": "text", "text": "thanks"}])
    );
    assert_eq!(body["messages"].as_array().unwrap().len(), 3);
    assert!(
        out.warnings.iter().any(|w| w.contains("frequency_penalty")),
        "{:?}",
        out.warnings
    );
    assert!(validate(&out.conversation).is_empty());
}

#[test]
fn anthropic_to_openai_splits_results_and_keeps_error_signal() {
    let c = conv_of(json!({
    "model": "claude-sonnet-4-5", "max_tokens": 100, "top_k": 5,
    "system": [{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral"}}],
    "messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "t", "signature": "s"},
            {"type": "tool_use", "id": "a", "name": "run", "input": {"cmd": "make"}},
            {"type": "tool_use", "id": "b", "name": "run", "input": {"cmd": "test"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": "ok"},
            {"type": "tool_result", "tool_use_id": "b", "content": "exit 1", "is_error": true},
            {"type": "text", "text": "fix it"}]}
    ]}));
    let out = convert(&c, Family::OpenAi).unwrap();
    let body = encode(&out.conversation).unwrap();
    let m = body["messages"].as_array().unwrap();
    assert_eq!(
        m[0],
        json!({"role": "system", "content": [{"type": "text", "text": "sys"}]})
    );
    assert_eq!(m[2]["content"], Value::Null);
    assert_eq!(
        m[2]["tool_calls"][0]["function"]["arguments"],
        json!("{\"cmd\":\"make\"}")
    );
    assert_eq!(
        m[3],
        json!({"role": "tool", "content": "ok", "tool_call_id": "a"})
    );
    assert_eq!(
        m[4],
        json!({"role": "tool", "content": "[tool error] exit 1", "tool_call_id": "b"})
    );
    assert_eq!(
        m[5],
        json!({"role": "user", "content": [{"type": "text", "text": "fix it"}]})
    );
    assert!(out.warnings.iter().any(|w| w.contains("thinking")));
    assert!(out.warnings.iter().any(|w| w.contains("top_k")));
    assert!(validate(&out.conversation).is_empty());
}

#[test]
fn unrepresentable_content_is_an_error_naming_the_message() {
    let c = conv_of(json!({"messages": [{"role": "user", "content": "a"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{not json"}}]}]}));
    match convert(&c, Family::Anthropic).unwrap_err() {
        Error::Unrepresentable { index, reason, .. } => {
            assert_eq!(index, 1);
            assert!(reason.contains("not JSON"), "{reason}");
        }
        other => panic!("{other}"),
    }
    let c = conv_of(json!({"messages": [{"role": "user", "content": "a"},
        {"role": "function", "name": "f", "content": "r"}]}));
    assert!(matches!(
        convert(&c, Family::Anthropic),
        Err(Error::Unrepresentable { .. })
    ));
}

#[test]
fn a_late_system_message_stays_inside_messages_both_ways() {
    let c = conv_of(json!({"messages": [{"role": "system", "content": "rules"},
        {"role": "user", "content": "a"}, {"role": "system", "content": "late"}]}));
    let out = convert(&c, Family::Anthropic).unwrap();
    let body = encode(&out.conversation).unwrap();
    assert_eq!(body["system"], json!("rules"));
    assert_eq!(
        body["messages"],
        json!([{"role": "user", "content": "a"}, {"role": "system", "content": "late"}])
    );
    assert!(validate(&out.conversation).is_empty());
    let back = convert(&out.conversation, Family::OpenAi).unwrap();
    assert_eq!(
        encode(&back.conversation).unwrap()["messages"],
        c_messages(&c)
    );
}

fn c_messages(c: &abridge_model::Conversation) -> Value {
    encode(c).unwrap()["messages"].clone()
}
