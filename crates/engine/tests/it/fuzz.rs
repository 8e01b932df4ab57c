//! Structure-aware fuzzing with proptest: arbitrary bytes and randomly
//! shaped JSON built from the wire vocabulary go through every entry point.
//! Nothing may panic; whatever decodes must encode, validate, convert and
//! compact to a result or a clear error, and compaction never adds a
//! violation.

use abridge::model::{Family, convert, decode, encode, validate};
use abridge::{Compactor, Config};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

const KEYS: [&str; 24] = [
    "role",
    "content",
    "type",
    "text",
    "tool_calls",
    "id",
    "function",
    "name",
    "arguments",
    "tool_call_id",
    "tool_use_id",
    "input",
    "messages",
    "system",
    "is_error",
    "source",
    "image_url",
    "url",
    "thinking",
    "signature",
    "model",
    "tools",
    "custom",
    "data",
];
const STRINGS: [&str; 16] = [
    "user",
    "assistant",
    "system",
    "tool",
    "developer",
    "function",
    "text",
    "tool_use",
    "tool_result",
    "image",
    "thinking",
    "image_url",
    "base64",
    "{\"a\":1}",
    "call_1",
    "",
];

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        prop::sample::select(&STRINGS[..]).prop_map(|s| json!(s)),
        "\\PC{0,12}".prop_map(Value::String),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(5, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(&KEYS[..]), inner), 0..6).prop_map(|kv| {
                Value::Object(
                    kv.into_iter()
                        .map(|(k, v)| (k.to_owned(), v))
                        .collect::<Map<_, _>>(),
                )
            }),
        ]
    })
}

const IDS: [&str; 3] = ["a", "b", "c"];

/// Block types of both APIs, Anthropic's server-side and reference blocks
/// among them, and one no API has.
const BLOCKS: [&str; 14] = [
    "text",
    "tool_use",
    "tool_result",
    "image",
    "image_url",
    "thinking",
    "redacted_thinking",
    "server_tool_use",
    "web_search_tool_result",
    "search_result",
    "document",
    "container_upload",
    "tool_reference",
    "other",
];

/// A content block of either API, with a random payload here and there,
/// sometimes with a cache marker.
fn block() -> impl Strategy<Value = Value> {
    (kind_block(), any::<bool>()).prop_map(|(mut b, marked)| {
        if marked {
            b["cache_control"] = json!({"type": "ephemeral"});
        }
        b
    })
}

fn kind_block() -> impl Strategy<Value = Value> {
    (prop::sample::select(&BLOCKS[..]), prop::sample::select(&IDS[..]), value(), any::<bool>())
        .prop_map(|(ty, id, payload, err)| match ty {
            "text" => json!({"type": "text", "text": format!("t {payload}")}),
            "tool_use" => json!({"type": "tool_use", "id": id, "name": "f", "input": {"q": payload}}),
            "tool_result" => json!({"type": "tool_result", "tool_use_id": id, "content": [{"type": "text", "text": payload.to_string()}], "is_error": err}),
            "image" => json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}),
            "image_url" => json!({"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}),
            "thinking" => json!({"type": "thinking", "thinking": "hm", "signature": "s"}),
            "redacted_thinking" => json!({"type": "redacted_thinking", "data": "cmVk"}),
            "server_tool_use" => json!({"type": "server_tool_use", "id": format!("srv_{id}"), "name": "web_search", "input": {"query": payload}}),
            "web_search_tool_result" => json!({"type": "web_search_tool_result", "tool_use_id": format!("srv_{id}"), "content": [{"type": "web_search_result", "url": "https://e.test", "encrypted_content": "x"}]}),
            "search_result" => json!({"type": "search_result", "source": "https://e.test", "title": "t", "content": [{"type": "text", "text": payload.to_string()}]}),
            "document" => json!({"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": payload.to_string()}, "citations": {"enabled": true}}),
            "container_upload" => json!({"type": "container_upload", "file_id": "file_1"}),
            "tool_reference" => json!({"type": "tool_reference", "tool_name": "f"}),
            _ => json!({"type": ty, "payload": payload}),
        })
}

/// A message of either API: right roles and fields, random pairing and content.
fn message() -> impl Strategy<Value = Value> {
    (
        prop::sample::select(&["user", "assistant", "tool", "system"][..]),
        prop::collection::vec(block(), 0..4),
        prop::collection::vec(prop::sample::select(&IDS[..]), 0..3),
        prop::sample::select(&IDS[..]),
        any::<bool>(),
    )
        .prop_map(|(role, blocks, calls, id, as_string)| {
            let mut m = json!({"role": role});
            m["content"] = if as_string { json!(format!("{role} says {}", blocks.len())) } else { Value::Array(blocks) };
            if role == "assistant" && !calls.is_empty() {
                m["tool_calls"] = calls
                    .iter()
                    .map(|c| json!({"id": c, "type": "function", "function": {"name": "f", "arguments": "{\"q\": 1}"}}))
                    .collect();
            }
            if role == "tool" {
                m["tool_call_id"] = json!(id);
            }
            m
        })
}

/// A body whose messages are random but shaped like messages.
fn body() -> impl Strategy<Value = Value> {
    (prop::collection::vec(message(), 0..12), any::<bool>()).prop_map(|(messages, system)| {
        let mut b = json!({"model": "gpt-4o", "messages": messages});
        if system {
            b["system"] = json!("be brief");
        }
        b
    })
}

fn exercise(bytes: &[u8]) {
    let Ok(convs) = decode(bytes) else { return };
    for conv in convs.iter().take(3) {
        let before = validate(conv);
        if let Ok(body) = encode(conv) {
            let _ = decode(body.to_string().as_bytes());
        }
        for family in [Family::OpenAi, Family::Anthropic] {
            if let Ok(c) = convert(conv, family) {
                let _ = encode(&c.conversation);
                let _ = validate(&c.conversation);
            }
        }
        let tokens = Compactor::new(Config::default()).unwrap().count(conv).get();
        for target in [None, Some((tokens / 2).max(1)), Some(20)] {
            let mut cfg = Config::default();
            cfg.budget.target_tokens = target;
            cfg.budget.min_iterations = 1;
            cfg.policies.min_result_chars = 1;
            cfg.policies.min_args_chars = 1;
            let after = match Compactor::new(cfg).unwrap().compact(conv) {
                Ok(out) => validate(&out.conversation),
                // The floor the ladder reached is what a proxy sends.
                Err(abridge::Error::CannotShrink {
                    smallest: Some(c), ..
                }) => validate(&c),
                Err(_) => continue,
            };
            for v in &after {
                assert!(
                    before.iter().any(|b| b.rule == v.rule && b.id == v.id),
                    "compaction added {v}"
                );
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        exercise(&bytes);
    }

    #[test]
    fn arbitrary_json_never_panics(v in value()) {
        exercise(v.to_string().as_bytes());
    }

    #[test]
    fn message_shaped_bodies_never_panic(b in body()) {
        exercise(b.to_string().as_bytes());
    }

    #[test]
    fn jsonl_lines_never_panic(lines in prop::collection::vec(value(), 1..5)) {
        let text: Vec<String> = lines
            .iter()
            .map(|l| {
                let mut l = l.clone();
                if let Value::Object(m) = &mut l {
                    m.insert("sessionId".into(), json!("s"));
                }
                l.to_string()
            })
            .collect();
        exercise(text.join("\n").as_bytes());
    }
}
