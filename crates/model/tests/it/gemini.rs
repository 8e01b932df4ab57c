//! The Gemini API: a Gemini CLI request decodes to messages and encodes
//! back to its bytes, thought signatures stay on their parts, calls pair
//! with their responses (by id, or by name and place where the ids are
//! left out), and conversations convert to and from the other APIs.

use abridge_model::{
    Family, Format, Part, ReasoningKind, Role, Rule, Wire, convert_to, decode, decode_value,
    decode_wire_messages, detect, encode, encode_wire_messages, validate,
};
use proptest::prelude::*;
use serde_json::{Value, json};

/// A request Gemini CLI 0.61.0 sent (a shell call answered), captured
/// against a local server.
const CLI: &str = include_str!("../fixtures/gemini.cli.json");

#[test]
fn a_gemini_cli_body_encodes_back_to_the_same_bytes() {
    let original: Value = serde_json::from_str(CLI).unwrap();
    assert_eq!(detect(&original).unwrap(), Format::Gemini);
    let conv = decode(CLI.as_bytes()).unwrap().remove(0);
    assert_eq!((conv.format, conv.family), (Format::Gemini, Family::Gemini));
    assert!(validate(&conv).is_empty(), "{:?}", validate(&conv));
    assert_eq!(conv.wire_offset(), 1, "the systemInstruction leads");
    assert_eq!(conv.messages[0].role, Role::System);
    assert_eq!(conv.model, None, "the model is in the URL");
    let encoded = encode(&conv).unwrap();
    assert_eq!(
        serde_json::to_string(&encoded).unwrap(),
        serde_json::to_string(&original).unwrap()
    );
}

#[test]
fn a_call_keeps_its_signature_and_pairs_with_its_response() {
    let conv = decode(CLI.as_bytes()).unwrap().remove(0);
    let model = &conv.messages[2];
    assert_eq!(model.role, Role::Assistant);
    let Part::ToolCall(call) = &model.parts[0] else {
        panic!("a call: {:?}", model.parts[0]);
    };
    assert_eq!(call.name, "run_shell_command");
    assert_eq!(call.extra["thoughtSignature"], "c2lnLWNhbGw=");
    let results: Vec<_> = conv.messages[3].tool_results().collect();
    assert_eq!(results[0].call_id, call.id);
    assert!(results[0].text().contains("Output: hi"));
}

#[test]
fn a_grouped_declaration_declares_each_of_its_functions() {
    let conv = decode(CLI.as_bytes()).unwrap().remove(0);
    let tools = conv.tools.as_deref().unwrap();
    assert!(tools.iter().any(|t| t.declares("run_shell_command")));
    assert!(!tools.iter().any(|t| t.declares("abridge_recall")));
    assert_eq!(tools[0].name(), None, "a group has no name of its own");
}

#[test]
fn calls_without_ids_pair_by_name_and_place_and_stay_without_them() {
    let body = json!({"contents": [
        {"role": "user", "parts": [{"text": "Read both."}]},
        {"role": "model", "parts": [
            {"text": "Plan.", "thought": true, "thoughtSignature": "sig-1"},
            {"functionCall": {"name": "read", "args": {"path": "a"}}, "thoughtSignature": "sig-2"},
            {"functionCall": {"name": "read", "args": {"path": "b"}}}]},
        {"role": "user", "parts": [
            {"functionResponse": {"name": "read", "response": {"output": "A"}}},
            {"functionResponse": {"name": "read", "response": {"content": {"lines": 2}}}}]},
        {"role": "model", "parts": [{"text": "Done."}]}]});
    let conv = decode_value(body.clone(), Format::Gemini)
        .unwrap()
        .remove(0);
    assert!(validate(&conv).is_empty(), "{:?}", validate(&conv));
    let Part::Reasoning(thought) = &conv.messages[1].parts[0] else {
        panic!("a thought");
    };
    assert_eq!(thought.kind, ReasoningKind::Thought);
    assert_eq!(thought.signature.as_deref(), Some("sig-1"));
    let calls: Vec<_> = conv.messages[1]
        .tool_calls()
        .map(|c| c.id.clone())
        .collect();
    let results: Vec<_> = conv.messages[2]
        .tool_results()
        .map(|r| r.call_id.clone())
        .collect();
    assert_eq!(calls, results);
    assert_ne!(calls[0], calls[1]);
    assert_eq!(encode(&conv).unwrap(), body);
}

#[test]
fn a_missing_response_is_a_violation() {
    let body = json!({"contents": [
        {"role": "user", "parts": [{"text": "Go."}]},
        {"role": "model", "parts": [
            {"functionCall": {"id": "c1", "name": "ls", "args": {}}},
            {"functionCall": {"id": "c2", "name": "ls", "args": {}}}]},
        {"role": "user", "parts": [{"functionResponse": {"id": "c1", "name": "ls", "response": {"output": ""}}}]},
        {"role": "user", "parts": []}]});
    let conv = decode_value(body, Format::Gemini).unwrap().remove(0);
    let rules: Vec<Rule> = validate(&conv).into_iter().map(|v| v.rule).collect();
    assert_eq!(rules, [Rule::UnansweredCall, Rule::EmptyContent]);
}

#[test]
fn a_call_turn_must_follow_the_users() {
    let body = json!({"contents": [
        {"role": "user", "parts": [{"text": "Go."}]},
        {"role": "model", "parts": [{"text": "Thinking aloud."}]},
        {"role": "model", "parts": [{"functionCall": {"id": "c1", "name": "ls", "args": {}}}]},
        {"role": "user", "parts": [{"functionResponse": {"id": "c1", "name": "ls", "response": {"output": ""}}}]}]});
    let conv = decode_value(body, Format::Gemini).unwrap().remove(0);
    let rules: Vec<Rule> = validate(&conv).into_iter().map(|v| v.rule).collect();
    assert_eq!(rules, [Rule::CallNotAfterUser]);
    // A first turn may call (Gemini CLI's side requests open so).
    let first = json!({"contents": [
        {"role": "model", "parts": [{"functionCall": {"id": "c1", "name": "ls", "args": {}}}]},
        {"role": "user", "parts": [{"functionResponse": {"id": "c1", "name": "ls", "response": {"output": ""}}}]}]});
    let conv = decode_value(first, Format::Gemini).unwrap().remove(0);
    assert!(validate(&conv).is_empty(), "{:?}", validate(&conv));
}

#[test]
fn a_clipped_response_is_still_an_object() {
    let body = json!({"contents": [
        {"role": "model", "parts": [{"functionCall": {"id": "c1", "name": "ls", "args": {}}}]},
        {"role": "user", "parts": [{"functionResponse": {"id": "c1", "name": "ls", "response": {"files": [1, 2]}}}]}]});
    let mut conv = decode_value(body, Format::Gemini).unwrap().remove(0);
    let Part::ToolResult(r) = &mut conv.messages[1].parts[0] else {
        panic!("a result");
    };
    assert_eq!(r.text(), r#"{"files":[1,2]}"#);
    r.parts = vec![Part::text("[clipped: 9 bytes · abr_0123456789]")];
    let out = encode(&conv).unwrap();
    assert_eq!(
        out["contents"][1]["parts"][0]["functionResponse"]["response"],
        json!({"output": "[clipped: 9 bytes · abr_0123456789]"})
    );
}

#[test]
fn turns_alone_encode_as_the_body_does() {
    let original: Value = serde_json::from_str(CLI).unwrap();
    let contents = original["contents"].as_array().unwrap().clone();
    let tail = decode_wire_messages(Wire::Gemini, contents[1..].to_vec(), 1).unwrap();
    assert_eq!(
        encode_wire_messages(Wire::Gemini, &tail, 1).unwrap(),
        contents[1..]
    );
}

#[test]
fn gemini_converts_to_every_api_and_back_with_its_pairing() {
    let conv = decode(CLI.as_bytes()).unwrap().remove(0);
    for wire in [Wire::Chat, Wire::Anthropic, Wire::Responses, Wire::AiSdk] {
        let there = convert_to(&conv, wire).unwrap();
        assert!(validate(&there.conversation).is_empty(), "{wire:?}");
        encode(&there.conversation).unwrap();
        let back = convert_to(&there.conversation, Wire::Gemini).unwrap();
        assert_eq!(back.conversation.family, Family::Gemini);
        assert!(validate(&back.conversation).is_empty(), "{wire:?} and back");
        let body = encode(&back.conversation).unwrap();
        let response = &body["contents"][2]["parts"][0]["functionResponse"];
        assert_eq!(response["name"], "run_shell_command", "{wire:?}");
        assert!(
            response["response"]["output"]
                .as_str()
                .unwrap()
                .contains("Output: hi")
        );
        assert_eq!(
            body["contents"][1]["parts"][0]["functionCall"]["name"],
            "run_shell_command"
        );
    }
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-zA-Z0-9 .,:/_-]{0,30}",
        Just("emoji 🚀 \"quoted\" \\ back\nline".to_owned()),
    ]
}

/// A model turn and the user turn that answers it: text, thoughts with
/// signatures, calls with and without ids, responses of several shapes,
/// images and parts abridge keeps verbatim, unknown fields anywhere.
fn step() -> impl Strategy<Value = (Value, Value)> {
    (
        text(),
        prop::option::of(text()),
        prop::collection::vec((any::<bool>(), any::<bool>(), 0..3u8), 0..3),
        any::<bool>(),
    )
        .prop_map(|(said, thought, calls, extra)| {
            let mut model = Vec::new();
            if let Some(t) = thought {
                model.push(json!({"text": t, "thought": true, "thoughtSignature": "c2ln"}));
            }
            model.push(json!({"text": said}));
            let mut user = Vec::new();
            for (k, (with_id, signed, shape)) in calls.into_iter().enumerate() {
                let mut call = json!({"args": {"k": k}, "name": format!("tool{}", k % 2)});
                let mut response = json!({"name": format!("tool{}", k % 2)});
                let body = match shape {
                    0 => json!({"output": format!("out {k}")}),
                    1 => json!({"error": "failed", "code": 2}),
                    _ => json!({"rows": [k, 0.5], "x_more": null}),
                };
                response["response"] = body;
                if with_id {
                    call = json!({"id": format!("call_{k}"), "args": {"k": k}, "name": format!("tool{}", k % 2)});
                    response["id"] = json!(format!("call_{k}"));
                }
                let mut part = json!({"functionCall": call});
                if signed {
                    part["thoughtSignature"] = json!(format!("sig{k}"));
                }
                model.push(part);
                user.push(json!({"functionResponse": response}));
            }
            if extra {
                model.push(json!({"executableCode": {"language": "PYTHON", "code": "print(1)"}}));
                user.push(json!({"inlineData": {"mimeType": "image/png", "data": "iVBO"}, "x_part": 1}));
                user.push(json!({"fileData": {"mimeType": "application/pdf", "fileUri": "gs://b/f.pdf"}}));
            }
            if user.is_empty() {
                user.push(json!({"text": "go on"}));
            }
            (json!({"parts": model, "role": "model"}), json!({"parts": user, "role": "user"}))
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn gemini_round_trip_is_lossless(task in text(), steps in prop::collection::vec(step(), 0..5), system in any::<bool>()) {
        let mut contents = vec![json!({"parts": [{"text": task}], "role": "user"})];
        for (model, user) in steps {
            contents.push(model);
            contents.push(user);
        }
        let mut body = json!({"contents": contents, "generationConfig": {"temperature": 0.70}});
        if system {
            body["systemInstruction"] = json!({"parts": [{"text": "Be brief."}]});
            body["tools"] = json!([{"functionDeclarations": [{"name": "tool0"}]}, {"googleSearch": {}}]);
        }
        let conv = decode(body.to_string().as_bytes()).unwrap().remove(0);
        prop_assert_eq!(conv.family, Family::Gemini);
        prop_assert!(validate(&conv).is_empty(), "{:?}", validate(&conv));
        prop_assert_eq!(encode(&conv).unwrap(), body);
    }
}
