//! AI SDK `ModelMessage[]`: detected, decoded and encoded back to the same
//! JSON; validated with the pairing rules; clipped results stay valid.

use abridge_model::{Format, Part, Role, Wire, decode, encode, validate};
use serde_json::{Value, json};

fn messages() -> Value {
    json!([
        {"role": "system", "content": "You are a browser agent.", "providerOptions": {"anthropic": {"cacheControl": {"type": "ephemeral"}}}},
        {"role": "user", "content": [
            {"type": "text", "text": "Book a table for two."},
            {"type": "image", "image": "iVBORw0KGgo=", "mediaType": "image/png"},
            {"type": "image", "image": "https://example.com/a.png"},
            {"type": "file", "data": "JVBERi0=", "mediaType": "application/pdf", "filename": "menu.pdf"}
        ]},
        {"role": "assistant", "content": [
            {"type": "reasoning", "text": "I should open the site.", "providerOptions": {"anthropic": {"signature": "sig=="}}},
            {"type": "text", "text": "Opening the site."},
            {"type": "tool-call", "toolCallId": "c1", "toolName": "goto", "input": {"url": "https://r.example", "wait": 0.70}},
            {"type": "tool-call", "toolCallId": "c2", "toolName": "snapshot", "input": {}, "providerExecuted": false}
        ]},
        {"role": "tool", "content": [
            {"type": "tool-result", "toolCallId": "c1", "toolName": "goto", "output": {"type": "text", "value": "loaded"}},
            {"type": "tool-result", "toolCallId": "c2", "toolName": "snapshot", "output": {"type": "json", "value": {"title": "R", "links": [1, 2.5, null]}}}
        ]},
        {"role": "assistant", "content": [
            {"type": "tool-call", "toolCallId": "c3", "toolName": "click", "input": {"ref": "e12"}},
            {"type": "tool-call", "toolCallId": "c4", "toolName": "fill", "input": {"ref": "e13", "value": "2"}},
            {"type": "tool-call", "toolCallId": "c5", "toolName": "shot", "input": {}}
        ]},
        {"role": "tool", "content": [
            {"type": "tool-result", "toolCallId": "c3", "toolName": "click", "output": {"type": "error-text", "value": "no such element"}},
            {"type": "tool-result", "toolCallId": "c4", "toolName": "fill", "output": {"type": "error-json", "value": {"code": 7}}, "providerOptions": {"x": {"y": 1}}}
        ]},
        {"role": "tool", "content": [
            {"type": "tool-result", "toolCallId": "c5", "toolName": "shot", "output": {"type": "content", "value": [
                {"type": "text", "text": "page"},
                {"type": "media", "data": "iVBORw0KGgo=", "mediaType": "image/png"}
            ]}}
        ]},
        {"role": "assistant", "content": "Done: a table for two at 19:00."}
    ])
}

#[test]
fn model_messages_are_detected_and_round_trip() {
    let v = messages();
    let bytes = serde_json::to_vec(&v).unwrap();
    let conv = decode(&bytes).unwrap().remove(0);
    assert_eq!(conv.format, Format::AiSdk);
    assert!(validate(&conv).is_empty(), "{:?}", validate(&conv));
    assert_eq!(encode(&conv).unwrap(), v);
    // What the engine reads: the calls and the results' text.
    let tool = &conv.messages[3];
    assert_eq!(tool.role, Role::Tool);
    let results: Vec<_> = tool.tool_results().collect();
    assert_eq!(results.len(), 2);
    assert_eq!(
        results[1].parts[0].as_text(),
        Some(r#"{"title":"R","links":[1,2.5,null]}"#)
    );
    assert_eq!(
        conv.messages[5].tool_results().next().unwrap().is_error,
        Some(true)
    );
}

#[test]
fn a_missing_result_breaks_the_pairing() {
    let mut v = messages();
    v.as_array_mut().unwrap()[3]["content"]
        .as_array_mut()
        .unwrap()
        .pop();
    let conv = decode(&serde_json::to_vec(&v).unwrap()).unwrap().remove(0);
    let violations = validate(&conv);
    assert_eq!(violations.len(), 1, "{violations:?}");
    assert!(
        violations[0].to_string().contains("c2"),
        "{}",
        violations[0]
    );
}

#[test]
fn a_clipped_json_result_encodes_as_text_and_an_error_keeps_its_kind() {
    let mut conv = decode(&serde_json::to_vec(&messages()).unwrap())
        .unwrap()
        .remove(0);
    for m in &mut conv.messages {
        for p in &mut m.parts {
            if let Part::ToolResult(r) = p {
                r.parts = vec![Part::text("[result clipped]")];
            }
        }
    }
    let v = encode(&conv).unwrap();
    assert_eq!(
        v[3]["content"][0]["output"],
        json!({"type": "text", "value": "[result clipped]"})
    );
    assert_eq!(
        v[3]["content"][1]["output"],
        json!({"type": "text", "value": "[result clipped]"})
    );
    assert_eq!(
        v[5]["content"][1]["output"],
        json!({"type": "error-text", "value": "[result clipped]"})
    );
    assert_eq!(
        v[5]["content"][1]["providerOptions"],
        json!({"x": {"y": 1}})
    );
    assert_eq!(v[6]["content"][0]["output"]["type"], json!("content"));
    // Still the same shape: it decodes again, valid.
    let again = decode(&serde_json::to_vec(&v).unwrap()).unwrap().remove(0);
    assert!(validate(&again).is_empty());
}

#[test]
fn a_bad_output_is_a_clear_error_naming_where() {
    let v = json!([{"role": "tool", "content": [{"type": "tool-result", "toolCallId": "c1", "toolName": "t", "output": {"type": "text", "value": 3}}]}]);
    let e = abridge_model::decode_as(&serde_json::to_vec(&v).unwrap(), Some(Format::AiSdk))
        .unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("[0].content[0]") && text.contains("output"),
        "{text}"
    );
}

#[test]
fn every_corpus_conversation_converts_to_valid_model_messages_and_back() {
    let mut converted = 0;
    for path in crate::common::corpus_files() {
        let convs = abridge_model::decode(&std::fs::read(&path).unwrap()).unwrap();
        for (n, conv) in convs.iter().enumerate() {
            let at = format!("{} #{n}", path.display());
            let decoded = crate::common::through(conv, Wire::AiSdk, &at);
            for m in encode(&decoded).unwrap().as_array().unwrap() {
                match m["role"].as_str().unwrap() {
                    "system" => assert!(m["content"].is_string(), "{at}: {m}"),
                    "tool" => {
                        for part in m["content"].as_array().unwrap() {
                            assert!(
                                !part["toolName"].as_str().unwrap().is_empty(),
                                "{at}: {part}"
                            );
                            assert!(part["output"]["value"].is_string(), "{at}: {part}");
                        }
                    }
                    _ => {}
                }
            }
            converted += 1;
        }
    }
    eprintln!("{converted} corpus conversations converted");
}
