//! Lossless round trips of OpenAI and Anthropic bodies over generated conversations.

use abridge_model::{
    Family, Wire, convert, decode, decode_wire_messages, encode, encode_wire_messages, validate,
};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

/// Text with the odd characters agents produce: quotes, escapes, emoji, RTL, NUL.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-zA-Z0-9 .,:/_-]{0,40}",
        "\\PC{0,20}",
        Just("line1\nline2\t\"quoted\" \\ back".to_owned()),
        Just("emoji 🚀 and RTL שלום and \u{0} nul".to_owned()),
    ]
}

/// Unknown fields, with numbers that must survive (0.70 stays a number equal to 0.7).
fn extra() -> impl Strategy<Value = Map<String, Value>> {
    prop::collection::btree_map(
        "x_[a-z]{1,6}",
        prop_oneof![
            Just(json!(0.70)),
            Just(json!(12345678901234u64)),
            Just(json!(null)),
            Just(json!({"nested": [1, "two", {"three": true}]})),
            text().prop_map(Value::String),
        ],
        0..2,
    )
    .prop_map(|m| m.into_iter().collect())
}

fn merge(mut v: Value, extra: Map<String, Value>) -> Value {
    if let Value::Object(m) = &mut v {
        for (k, x) in extra {
            m.insert(k, x);
        }
    }
    v
}

/// A step of an agent: assistant text and/or parallel tool calls, then results.
#[derive(Debug, Clone)]
struct Step {
    text: Option<String>,
    calls: Vec<(String, String, bool)>, // name, argument value, is_error
    user_after: Option<String>,
    image: bool,
    extra: Map<String, Value>,
    /// A system message after the step (Claude Code sends them inside `messages`).
    system_after: Option<String>,
    /// One of [`server_blocks`], by index (none past the end).
    server: usize,
}

fn step() -> impl Strategy<Value = Step> {
    (
        prop::option::of(text()),
        prop::collection::vec(("[a-z_]{1,10}", text(), any::<bool>()), 0..4),
        prop::option::of(text()),
        any::<bool>(),
        extra(),
        prop::option::of(text()),
        0..2 * server_blocks(0).len(),
    )
        .prop_map(
            |(text, calls, user_after, image, extra, system_after, server)| Step {
                text,
                calls,
                user_after,
                image,
                extra,
                system_after,
                server,
            },
        )
}

/// Anthropic blocks abridge does not model, as clients send them now:
/// server tool use and results, search results, documents with citations,
/// container uploads, redacted thinking. Each is an assistant block and a
/// user block (`null` where the kind has no user side).
fn server_blocks(n: usize) -> Vec<(Value, Value)> {
    let id = format!("srvtoolu_{n}");
    vec![
        (
            json!({"type": "server_tool_use", "id": id, "name": "web_search", "input": {"query": "q"}}),
            json!({"type": "search_result", "source": "https://example.com", "title": "t",
                   "content": [{"type": "text", "text": "found"}], "citations": {"enabled": true}}),
        ),
        (
            json!({"type": "web_search_tool_result", "tool_use_id": id,
                   "content": [{"type": "web_search_result", "url": "https://example.com", "title": "t",
                                "encrypted_content": "Zm9v", "page_age": null}]}),
            json!({"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "doc"},
                   "citations": {"enabled": true}, "title": "d"}),
        ),
        (
            json!({"type": "redacted_thinking", "data": "cmVkYWN0ZWQ="}),
            json!({"type": "container_upload", "file_id": "file_011"}),
        ),
        (
            json!({"type": "text", "text": "cited", "citations": [{"type": "char_location",
                   "cited_text": "doc", "document_index": 0, "start_char_index": 0, "end_char_index": 3}]}),
            Value::Null,
        ),
    ]
}

fn openai_body(system: &str, task: &str, steps: &[Step], env: Map<String, Value>) -> Value {
    let mut messages = vec![
        json!({"role": "system", "content": system}),
        json!({"role": "user", "content": format!("task: {task}")}),
    ];
    let mut n = 0;
    for s in steps {
        let calls: Vec<Value> = s
            .calls
            .iter()
            .map(|(name, arg, _)| {
                n += 1;
                json!({"id": format!("call_{n}"), "type": "function",
                       "function": {"name": name, "arguments": json!({"q": arg}).to_string()}})
            })
            .collect();
        let text = match (&s.text, calls.is_empty()) {
            (Some(t), _) => Value::String(format!("thought: {t}")),
            (None, true) => Value::String("done".into()),
            (None, false) => Value::Null,
        };
        let mut a = json!({"role": "assistant", "content": text});
        if !calls.is_empty() {
            a["tool_calls"] = Value::Array(calls.clone());
        }
        messages.push(merge(a, s.extra.clone()));
        for (c, (_, arg, _)) in calls.iter().zip(&s.calls) {
            messages.push(json!({"role": "tool", "tool_call_id": c["id"], "content": arg}));
        }
        if let Some(u) = &s.user_after {
            let content = if s.image {
                json!([{"type": "text", "text": format!("note: {u}")},
                       {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo=", "detail": "low"}}])
            } else {
                Value::String(format!("note: {u}"))
            };
            messages.push(json!({"role": "user", "content": content}));
        }
        if let Some(t) = &s.system_after {
            messages.push(json!({"role": "system", "content": format!("env: {t}")}));
        }
    }
    let mut body = json!({"model": "gpt-4o", "messages": messages,
        "tools": [{"type": "function", "function": {"name": "search", "parameters": {"type": "object"}, "strict": true}}]});
    for (k, v) in env {
        body[k.as_str()] = v;
    }
    body
}

fn anthropic_body(system: &str, task: &str, steps: &[Step], env: Map<String, Value>) -> Value {
    let mut messages = vec![json!({"role": "user", "content": format!("task: {task}")})];
    let mut n = 0;
    for s in steps {
        let mut blocks = vec![json!({"type": "thinking", "thinking": "hmm", "signature": "sig=="})];
        if let Some(t) = &s.text {
            blocks.push(json!({"type": "text", "text": format!("thought: {t}"), "cache_control": {"type": "ephemeral"}}));
        }
        let server = server_blocks(n).into_iter().nth(s.server);
        if let Some((a, _)) = &server {
            blocks.push(a.clone());
        }
        let mut results = Vec::new();
        for (name, arg, is_error) in &s.calls {
            n += 1;
            let id = format!("toolu_{n}");
            blocks.push(json!({"type": "tool_use", "id": id, "name": name, "input": {"q": arg}}));
            // Tool search answers with references to deferred tools.
            let found = json!({"type": "tool_reference", "tool_name": "search"});
            let mut r = json!({"type": "tool_result", "tool_use_id": id, "content": [{"type": "text", "text": arg}, found]});
            if *is_error {
                r["is_error"] = json!(true);
            }
            results.push(r);
        }
        if blocks.len() == 1 {
            blocks.push(json!({"type": "text", "text": "ok"}));
        }
        messages.push(merge(
            json!({"role": "assistant", "content": blocks}),
            s.extra.clone(),
        ));
        let mut user = results;
        if let Some(u) = &s.user_after {
            user.push(json!({"type": "text", "text": format!("note: {u}")}));
            if s.image {
                user.push(json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}));
            }
        }
        if let Some((_, u)) = server.filter(|(_, u)| !u.is_null()) {
            user.push(u);
        }
        if user.is_empty() {
            user.push(json!({"type": "text", "text": "continue"}));
        }
        messages.push(json!({"role": "user", "content": user}));
        if let Some(t) = &s.system_after {
            messages.push(json!({"role": "system", "content": [{"type": "text", "text": format!("env: {t}")}]}));
        }
    }
    let mut body = json!({"model": "claude-sonnet-4-5", "max_tokens": 1024,
        "system": [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}],
        "messages": messages,
        "tools": [{"name": "search", "input_schema": {"type": "object"}, "defer_loading": true},
                  {"type": "tool_search_tool_regex_20251119", "name": "tool_search_tool_regex"},
                  {"type": "web_search_20250305", "name": "web_search"}]});
    for (k, v) in env {
        body[k.as_str()] = v;
    }
    body
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn openai_round_trip_is_lossless(system in text(), task in text(), steps in prop::collection::vec(step(), 0..6), env in extra()) {
        let body = openai_body(&system, &task, &steps, env);
        let convs = decode(body.to_string().as_bytes()).unwrap();
        prop_assert_eq!(convs[0].family, Family::OpenAi);
        prop_assert!(validate(&convs[0]).is_empty(), "{:?}", validate(&convs[0]));
        prop_assert_eq!(encode(&convs[0]).unwrap(), body);
    }

    #[test]
    fn anthropic_round_trip_is_lossless(system in text(), task in text(), steps in prop::collection::vec(step(), 0..6), env in extra()) {
        let body = anthropic_body(&system, &task, &steps, env);
        let convs = decode(body.to_string().as_bytes()).unwrap();
        prop_assert_eq!(convs[0].family, Family::Anthropic);
        prop_assert!(validate(&convs[0]).is_empty(), "{:?}", validate(&convs[0]));
        prop_assert_eq!(encode(&convs[0]).unwrap(), body);
    }

    #[test]
    fn messages_alone_round_trip_as_a_bodys_do(system in text(), task in text(), steps in prop::collection::vec(step(), 0..6), env in extra()) {
        // What a caller appending to a body it holds encodes (the proxy's
        // recall rounds) is what the body's own codec writes.
        for (wire, body) in [
            (Wire::Chat, openai_body(&system, &task, &steps, env.clone())),
            (Wire::Anthropic, anthropic_body(&system, &task, &steps, env.clone())),
        ] {
            let items = body["messages"].as_array().unwrap().clone();
            let messages = decode_wire_messages(wire, items.clone(), 0).unwrap();
            prop_assert_eq!(encode_wire_messages(wire, &messages, 0).unwrap(), items);
        }
    }

    #[test]
    fn conversion_keeps_pairing_both_ways(system in text(), task in text(), steps in prop::collection::vec(step(), 0..6)) {
        let body = openai_body(&system, &task, &steps, Map::new());
        let conv = &decode(body.to_string().as_bytes()).unwrap()[0];
        let a = convert(conv, Family::Anthropic).unwrap().conversation;
        prop_assert!(validate(&a).is_empty(), "{:?}", validate(&a));
        let back = convert(&a, Family::OpenAi).unwrap().conversation;
        prop_assert!(validate(&back).is_empty(), "{:?}", validate(&back));
        let calls = |c: &abridge_model::Conversation| c.messages.iter().map(|m| m.tool_calls().count()).sum::<usize>();
        prop_assert_eq!(calls(conv), calls(&a));
        prop_assert_eq!(calls(conv), calls(&back));
        // And the converted body decodes as its own family again.
        let a_body = encode(&a).unwrap();
        prop_assert_eq!(decode(a_body.to_string().as_bytes()).unwrap()[0].family, Family::Anthropic);
    }
}

#[test]
fn content_forms_are_kept() {
    for body in [
        json!({"messages": [{"role": "user", "content": "plain"}]}),
        json!({"messages": [{"role": "user", "content": [{"type": "text", "text": "array"}]}]}),
        json!({"messages": [{"role": "assistant"}]}),
        json!({"messages": [{"role": "assistant", "content": null, "function_call": {"name": "f", "arguments": "{}"}},
                            {"role": "function", "name": "f", "content": "1"}]}),
        json!({"messages": [{"role": "tool", "tool_call_id": "x", "content": [{"type": "text", "text": "t"}]}]}),
        json!({"messages": [{"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": "AA", "format": "wav"}}]}]}),
        json!({"messages": [{"role": "assistant", "content": "", "reasoning_content": "think", "tool_calls": [
            {"id": "c", "type": "custom", "custom": {"name": "patch", "input": "*** Begin"}}]}]}),
        json!({"system": "s", "messages": [{"role": "user", "content": [{"type": "document", "source": {"type": "text", "data": "d"}}]},
               {"role": "assistant", "content": [{"type": "redacted_thinking", "data": "xx"}, {"type": "server_tool_use", "id": "s1", "name": "web_search", "input": {}}]}]}),
    ] {
        let conv = &decode(body.to_string().as_bytes()).unwrap()[0];
        assert_eq!(encode(conv).unwrap(), body, "{body}");
    }
}

/// Top-level keys come back in the order the body had them, wherever
/// `messages` and `tools` stood; keys a conversion adds go last.
#[test]
fn envelope_key_order_is_kept_and_added_keys_go_last() {
    let body = json!({"temperature": 0.2, "messages": [{"role": "user", "content": "hi"}],
        "model": "gpt-4o", "stream": false, "tools": []});
    let conv = decode(body.to_string().as_bytes()).unwrap().remove(0);
    let out = encode(&conv).unwrap();
    let keys: Vec<&String> = out.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        ["temperature", "messages", "model", "stream", "tools"]
    );
    let anthropic = abridge_model::convert(&conv, abridge_model::Family::Anthropic)
        .unwrap()
        .conversation;
    let out = encode(&anthropic).unwrap();
    let keys: Vec<&String> = out.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        ["temperature", "messages", "model", "stream", "tools"]
    );
}
