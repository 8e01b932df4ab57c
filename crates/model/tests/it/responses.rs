//! The OpenAI Responses API: items decode to messages one for one, encode
//! back to the same bytes, keep the model's turn in one iteration, and
//! validate as the API pairs calls and outputs.

use abridge_model::{
    Arguments, ContentForm, Format, Part, Role, Rule, Wire, decode, decode_value,
    decode_wire_messages, detect, encode, validate,
};
use serde_json::{Value, json};

const CODEX: &str = include_str!("../fixtures/responses.codex.json");

fn codex() -> abridge_model::Conversation {
    decode(CODEX.as_bytes()).unwrap().remove(0)
}

#[test]
fn a_codex_body_encodes_back_to_the_same_bytes() {
    let original: Value = serde_json::from_str(CODEX).unwrap();
    let conv = codex();
    assert_eq!(conv.format, Format::Responses);
    let encoded = encode(&conv).unwrap();
    // Same value and the same key order at every level (the serialized
    // text), so a kept prefix is byte-identical for the provider's cache.
    assert_eq!(
        serde_json::to_string(&encoded).unwrap(),
        serde_json::to_string(&original).unwrap()
    );
}

#[test]
fn items_are_messages_one_for_one_after_the_instructions() {
    let conv = codex();
    let items = serde_json::from_str::<Value>(CODEX).unwrap()["input"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(conv.wire_offset(), 1);
    assert_eq!(conv.messages.len(), items + 1);
    assert!(conv.messages[0].meta.instructions);
    assert_eq!(conv.messages[0].role, Role::System);
    assert_eq!(conv.wire_index(6), Some(5));

    let call = &conv.messages[6];
    assert_eq!(call.role, Role::Assistant);
    let Part::ToolCall(c) = &call.parts[0] else {
        panic!("{call:?}")
    };
    assert_eq!((c.id.as_str(), c.name.as_str()), ("call_A1", "shell"));
    assert!(matches!(&c.arguments, Arguments::Json(a) if a.contains("cargo test")));

    let output = &conv.messages[8];
    assert_eq!(output.role, Role::Tool);
    let Part::ToolResult(r) = &output.parts[0] else {
        panic!("{output:?}")
    };
    assert_eq!(r.call_id, "call_A1");
    assert!(r.text().contains("FAILED"));
    assert_eq!(r.form, ContentForm::Text);

    let patch = &conv.messages[11];
    assert!(
        matches!(&patch.parts[0], Part::ToolCall(c) if matches!(c.arguments, Arguments::Custom(_)))
    );
    // Reasoning is kept verbatim, encrypted content and all.
    assert!(
        matches!(&conv.messages[4].parts[0], Part::Opaque(v) if v["encrypted_content"] == "gAAAAABpZ3x0encrypted-reasoning-blob==")
    );
}

#[test]
fn the_models_turn_is_one_iteration() {
    let conv = codex();
    let its = conv.iterations();
    let starts: Vec<usize> = its.iter().map(|it| it.start).collect();
    // reasoning, text and two calls open one iteration with their outputs;
    // the next response's reasoning opens the second, and so on; a hosted
    // search and the answer after it are one turn.
    assert_eq!(starts, vec![4, 10, 13, 15]);
    assert!(conv.messages[16].meta.continues_turn);
    assert_eq!(its[0].end, 10);
    assert!(conv.messages[5].meta.continues_turn);
    assert!(conv.messages[7].meta.continues_turn);
    assert!(!conv.messages[10].meta.continues_turn);
}

#[test]
fn a_complete_history_is_valid_and_a_lost_output_is_not() {
    let conv = codex();
    assert_eq!(validate(&conv), vec![]);

    let mut lost = conv.clone();
    lost.messages.remove(8);
    let v = validate(&lost);
    assert_eq!(v.len(), 1, "{v:?}");
    assert_eq!(v[0].rule, Rule::UnansweredCall);
    assert_eq!((v[0].index, v[0].wire_index), (6, 5));
    assert_eq!(v[0].id.as_deref(), Some("call_A1"));

    let mut orphan = conv.clone();
    orphan.messages.remove(6);
    let v = validate(&orphan);
    assert_eq!(v.len(), 1, "{v:?}");
    assert_eq!(v[0].rule, Rule::OrphanResult);
    assert_eq!(v[0].id.as_deref(), Some("call_A1"));
}

#[test]
fn a_reasoning_item_needs_an_item_of_its_turn_after_it() {
    let with_next = |next: Option<Value>| {
        let mut input = vec![
            json!({"role": "user", "content": "go"}),
            json!({"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA"}),
        ];
        input.extend(next);
        let conv = decode_value(json!({"model": "gpt-5", "input": input}), Format::Responses)
            .unwrap()
            .remove(0);
        validate(&conv)
    };
    let said = json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]});
    assert_eq!(with_next(Some(said)), vec![]);
    let searched = json!({"type": "web_search_call", "id": "ws_1", "status": "completed"});
    assert_eq!(with_next(Some(searched)), vec![]);
    for next in [None, Some(json!({"role": "user", "content": "and?"}))] {
        let v = with_next(next);
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!(v[0].rule, Rule::ReasoningNotFollowed);
        assert_eq!((v[0].wire_index, v[0].id.as_deref()), (1, Some("rs_1")));
    }
}

#[test]
fn outputs_may_come_later_in_the_input_as_the_api_accepts() {
    let body = json!({"model": "gpt-5", "input": [
        {"role": "user", "content": "go"},
        {"type": "function_call", "call_id": "c1", "name": "ls", "arguments": "{}"},
        {"role": "user", "content": "(the user spoke before the output came back)"},
        {"type": "function_call_output", "call_id": "c1", "output": "a b"}
    ]});
    let conv = decode_value(body, Format::Responses).unwrap().remove(0);
    assert_eq!(validate(&conv), vec![]);
}

#[test]
fn bodies_and_item_lists_are_detected() {
    let body: Value = serde_json::from_str(CODEX).unwrap();
    assert_eq!(detect(&body).unwrap(), Format::Responses);
    assert_eq!(
        detect(&json!({"model": "gpt-5", "input": "hi"})).unwrap(),
        Format::Responses
    );
    let items = body["input"].clone();
    assert_eq!(detect(&items).unwrap(), Format::Responses);
    let convs = decode_value(items.clone(), Format::Responses).unwrap();
    assert_eq!(convs[0].messages.len(), items.as_array().unwrap().len());
    // Chat Completions messages stay Chat Completions.
    let chat =
        json!([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]);
    assert_eq!(detect(&chat).unwrap(), Format::Chat);
}

#[test]
fn appended_items_decode_as_the_whole_input_does() {
    let body: Value = serde_json::from_str(CODEX).unwrap();
    let items = body["input"].as_array().unwrap().clone();
    let whole = codex();
    let tail = decode_wire_messages(Wire::Responses, items[9..].to_vec(), 9).unwrap();
    assert_eq!(tail, whole.messages[10..].to_vec());
}

#[test]
fn a_string_input_is_one_user_message() {
    let conv = decode(br#"{"model": "gpt-5", "instructions": "Be brief.", "input": "hi"}"#)
        .unwrap()
        .remove(0);
    assert_eq!(conv.messages.len(), 2);
    assert_eq!(conv.messages[1].role, Role::User);
    assert_eq!(conv.messages[1].text_content(), "hi");
    let body = encode(&conv).unwrap();
    assert_eq!(body["instructions"], "Be brief.");
    assert_eq!(body["input"], json!([{"role": "user", "content": "hi"}]));
}

#[test]
fn a_clipped_output_and_new_messages_are_written_as_the_api_expects() {
    let mut conv = codex();
    let Part::ToolResult(r) = &mut conv.messages[14].parts[0] else {
        panic!()
    };
    r.parts = vec![Part::text("[output clipped]")];
    r.form = ContentForm::Blocks;
    conv.messages
        .push(abridge_model::Message::text(Role::User, "briefing"));
    let body = encode(&conv).unwrap();
    let items = body["input"].as_array().unwrap();
    assert_eq!(
        items[13],
        json!({"type": "function_call_output", "call_id": "call_C1",
               "output": [{"type": "input_text", "text": "[output clipped]"}]})
    );
    assert_eq!(
        items.last().unwrap(),
        &json!({"role": "user", "content": "briefing"})
    );
}

mod generated {
    //! Generated histories: every item kind, keys in any order, unknown
    //! fields anywhere: byte-identical round trips, valid, one iteration per
    //! model turn.

    use abridge_model::{Format, decode_value, encode, validate};
    use proptest::prelude::*;
    use serde_json::{Map, Value, json};

    fn text() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-zA-Z0-9 .,:/_-]{0,30}",
            "\\PC{0,12}",
            Just("line1\nline2\t\"quoted\" \\ back".to_owned()),
        ]
    }

    /// An object from fields in a generated order, with an unknown field or not.
    fn object(fields: Vec<(&'static str, Value)>) -> impl Strategy<Value = Value> {
        (Just(fields).prop_shuffle(), prop::option::of(text())).prop_map(|(fields, x)| {
            let mut m: Map<String, Value> =
                fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
            if let Some(x) = x {
                m.insert("x_unknown".into(), Value::String(x));
            }
            Value::Object(m)
        })
    }

    /// One model turn and what answers it.
    fn turn(n: usize) -> impl Strategy<Value = Vec<Value>> {
        (
            any::<bool>(),
            prop::option::of(text()),
            prop::collection::vec((any::<bool>(), text(), any::<bool>()), 0..3),
            any::<bool>(),
            prop::option::of(text()),
        )
            .prop_flat_map(move |(reasoning, said, calls, hosted, user)| {
                let mut model: Vec<BoxedStrategy<Value>> = Vec::new();
                let mut answers: Vec<BoxedStrategy<Value>> = Vec::new();
                if reasoning {
                    model.push(
                        object(vec![
                            ("type", json!("reasoning")),
                            (
                                "summary",
                                json!([{"type": "summary_text", "text": "thinking"}]),
                            ),
                            ("encrypted_content", json!(format!("gAAAA{n}=="))),
                        ])
                        .boxed(),
                    );
                }
                if let Some(t) = said.clone() {
                    model.push(
                        object(vec![
                            ("type", json!("message")),
                            ("role", json!("assistant")),
                            ("content", json!([{"type": "output_text", "text": t}])),
                        ])
                        .boxed(),
                    );
                }
                // A reasoning item is always followed by an item of its turn.
                if hosted || (said.is_none() && calls.is_empty()) {
                    model.push(
                        object(vec![
                            ("type", json!("web_search_call")),
                            ("id", json!(format!("ws_{n}"))),
                            ("status", json!("completed")),
                        ])
                        .boxed(),
                    );
                }
                for (j, (custom, out, as_parts)) in calls.into_iter().enumerate() {
                    let id = format!("call_{n}_{j}");
                    let (kind, key, input) = if custom {
                        ("custom_tool_call", "input", json!("*** Begin Patch"))
                    } else {
                        ("function_call", "arguments", json!("{\"cmd\": \"ls\"}"))
                    };
                    model.push(
                        object(vec![
                            ("type", json!(kind)),
                            ("name", json!("tool")),
                            (key, input),
                            ("call_id", json!(id.clone())),
                        ])
                        .boxed(),
                    );
                    let output = if as_parts {
                        json!([{"type": "input_text", "text": out}])
                    } else {
                        json!(out)
                    };
                    answers.push(
                        object(vec![
                            ("type", json!(format!("{kind}_output"))),
                            ("call_id", json!(id)),
                            ("output", output),
                        ])
                        .boxed(),
                    );
                }
                if let Some(u) = user {
                    answers
                        .push(object(vec![("role", json!("user")), ("content", json!(u))]).boxed());
                }
                model.extend(answers);
                model
            })
    }

    fn history() -> impl Strategy<Value = Value> {
        (1usize..6).prop_flat_map(|turns| {
            (0..turns).map(turn).collect::<Vec<_>>().prop_map(|turns| {
                let mut input = vec![json!({"role": "user", "content": "start"})];
                input.extend(turns.into_iter().flatten());
                json!({"model": "gpt-5", "instructions": "be brief", "input": input, "store": false})
            })
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        #[test]
        fn round_trips_byte_for_byte_valid_with_one_iteration_per_turn(body in history()) {
            let conv = decode_value(body.clone(), Format::Responses).unwrap().remove(0);
            let back = encode(&conv).unwrap();
            prop_assert_eq!(back.to_string(), body.to_string());
            prop_assert_eq!(validate(&conv), vec![]);
            let items = body["input"].as_array().unwrap();
            let opening = items
                .iter()
                .enumerate()
                .filter(|(i, item)| {
                    let model = |v: &Value| v.get("role").is_none_or(|r| r == "assistant")
                        && !v["type"].as_str().unwrap_or("").ends_with("_output");
                    model(item) && (*i == 0 || !model(&items[i - 1]))
                })
                .count();
            prop_assert_eq!(conv.iterations().len(), opening);
        }
    }
}

#[test]
fn what_chat_completions_cannot_carry_is_refused_naming_it() {
    use abridge_model::convert_to;
    let conv = codex();
    for to in [Wire::Chat, Wire::Anthropic, Wire::AiSdk] {
        let err = convert_to(&conv, to).unwrap_err().to_string();
        assert!(err.contains("\"custom\" tool declaration"), "{to}: {err}");
    }
    let mut no_tools = conv.clone();
    no_tools.tools = None;
    let err = convert_to(&no_tools, Wire::Chat).unwrap_err().to_string();
    assert!(err.contains("custom tool call"), "{err}");
    assert_eq!(
        convert_to(&conv, Wire::Responses).unwrap().conversation,
        conv
    );
}

/// A Responses history of the kind the Agents SDK sends: instructions,
/// reasoning, a said message and calls in one turn, outputs, an image.
fn sdk_history() -> Value {
    json!({"model": "gpt-5", "instructions": "Be brief.", "store": false,
    "max_output_tokens": 800, "include": ["reasoning.encrypted_content"],
    "tools": [{"type": "function", "name": "sh", "description": "Run a command", "strict": true,
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}],
    "tool_choice": {"type": "function", "name": "sh"},
    "input": [
        {"role": "user", "content": [{"type": "input_text", "text": "What is in /tmp?"},
            {"type": "input_image", "image_url": "https://example.com/a.png", "detail": "low"}]},
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA"},
        {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": "Looking.", "annotations": []}]},
        {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "sh", "arguments": "{\"command\":\"ls /tmp\"}"},
        {"type": "function_call", "id": "fc_2", "call_id": "c2", "name": "sh", "arguments": "{\"command\":\"df\"}"},
        {"type": "function_call_output", "call_id": "c1", "output": "a.txt b.txt"},
        {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "90% used"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Two files; the disk is nearly full."}]}
    ]})
}

#[test]
fn a_responses_history_converts_to_every_format_and_back() {
    use abridge_model::convert_to;
    let conv = decode_value(sdk_history(), Format::Responses)
        .unwrap()
        .remove(0);
    let chat = convert_to(&conv, Wire::Chat).unwrap();
    assert!(
        chat.warnings.iter().any(|w| w.contains("reasoning")),
        "{:?}",
        chat.warnings
    );
    assert!(
        chat.warnings
            .iter()
            .any(|w| w.contains("include") && w.contains("store"))
    );
    let body = encode(&chat.conversation).unwrap();
    assert_eq!(
        body["messages"][0],
        json!({"role": "system", "content": "Be brief."})
    );
    // The turn is one assistant message: what it said and both calls.
    let turn = &body["messages"][2];
    assert_eq!(turn["content"], "Looking.");
    assert_eq!(turn["tool_calls"].as_array().unwrap().len(), 2);
    assert_eq!(
        turn["tool_calls"][1]["function"]["arguments"],
        "{\"command\":\"df\"}"
    );
    assert_eq!(body["messages"][3]["role"], "tool");
    assert_eq!(body["max_completion_tokens"], 800);
    assert_eq!(
        body["tool_choice"],
        json!({"type": "function", "function": {"name": "sh"}})
    );
    assert_eq!(body["tools"][0]["function"]["strict"], true);
    assert_eq!(validate(&chat.conversation), vec![]);

    for to in [Wire::Anthropic, Wire::AiSdk] {
        let other = convert_to(&conv, to).unwrap().conversation;
        assert_eq!(validate(&other), vec![], "{to}");
        let back = convert_to(&other, Wire::Responses).unwrap().conversation;
        assert_eq!(validate(&back), vec![], "{to} and back");
        assert_eq!(
            back.iterations().len(),
            2,
            "{to} and back: the model's two turns"
        );
    }
    let back = convert_to(&chat.conversation, Wire::Responses).unwrap();
    let items = encode(&back.conversation).unwrap();
    assert_eq!(items["max_output_tokens"], 800);
    assert_eq!(
        items["tool_choice"],
        json!({"type": "function", "name": "sh"})
    );
    assert_eq!(
        items["tools"][0],
        json!({"type": "function", "name": "sh",
        "description": "Run a command", "parameters": {"type": "object",
        "properties": {"command": {"type": "string"}}}, "strict": true})
    );
    let input = items["input"].as_array().unwrap();
    let kinds: Vec<&str> = input
        .iter()
        .map(|i| i["type"].as_str().or(i["role"].as_str()).unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "system",
            "user",
            "assistant",
            "function_call",
            "function_call",
            "function_call_output",
            "function_call_output",
            "assistant"
        ]
    );
    assert_eq!(input[4]["call_id"], "c2");
    assert_eq!(
        input[1]["content"][1]["image_url"],
        "https://example.com/a.png"
    );
    assert_eq!(validate(&back.conversation), vec![]);
    assert_eq!(back.conversation.iterations().len(), 2);
}

#[test]
fn every_corpus_conversation_converts_to_responses_input_and_back() {
    let mut converted = 0;
    for path in crate::common::corpus_files() {
        let convs = decode(&std::fs::read(&path).unwrap()).unwrap();
        for (n, conv) in convs.iter().enumerate() {
            let at = format!("{} #{n}", path.display());
            let decoded = crate::common::through(conv, Wire::Responses, &at);
            assert_eq!(
                decoded.iterations().len(),
                conv.iterations().len(),
                "{at}: one iteration per model turn"
            );
            converted += 1;
        }
    }
    eprintln!("{converted} corpus conversations converted to Responses input and back");
}
