//! Request fields around the messages: limits, sampling, stop sequences,
//! `tool_choice`, the end user. Fields with no counterpart are dropped and
//! reported.

use serde_json::{Value, json};

use super::Warnings;
use crate::conversation::Family;
use crate::message::Extra;

/// The envelope fields in the target family.
pub(super) fn convert(extra: &Extra, to: Family, w: &mut Warnings) -> Extra {
    match to {
        Family::Anthropic => to_anthropic(extra, w),
        Family::OpenAi => to_openai(extra, w),
        // Gemini goes through Anthropic (`super::gemini`).
        Family::Gemini => extra.clone(),
    }
}

fn to_anthropic(extra: &Extra, w: &mut Warnings) -> Extra {
    let mut out = Extra::new();
    let mut dropped = Vec::new();
    for (k, v) in extra {
        match (k.as_str(), v) {
            ("max_tokens" | "max_completion_tokens", _) => {
                out.insert("max_tokens".into(), v.clone());
            }
            ("temperature" | "top_p" | "stream", _) => {
                out.insert(k.clone(), v.clone());
            }
            ("stop", Value::String(s)) => {
                out.insert("stop_sequences".into(), json!([s]));
            }
            ("stop", Value::Array(_)) => {
                out.insert("stop_sequences".into(), v.clone());
            }
            ("tool_choice", _) => {
                out.insert("tool_choice".into(), anthropic_tool_choice(v));
            }
            ("user", Value::String(_)) => {
                out.insert("metadata".into(), json!({ "user_id": v }));
            }
            _ => dropped.push(k.as_str()),
        }
    }
    if extra.get("parallel_tool_calls") == Some(&Value::Bool(false)) {
        let choice = out
            .entry("tool_choice")
            .or_insert_with(|| json!({"type": "auto"}));
        if let Value::Object(c) = choice {
            c.insert("disable_parallel_tool_use".into(), Value::Bool(true));
        }
        dropped.retain(|k| *k != "parallel_tool_calls");
    }
    w.dropped_fields(&dropped);
    out
}

fn anthropic_tool_choice(v: &Value) -> Value {
    match v {
        Value::String(s) if s == "required" => json!({"type": "any"}),
        Value::String(s) => json!({ "type": s }),
        other => match other.pointer("/function/name") {
            Some(name) => json!({"type": "tool", "name": name}),
            None => json!({"type": "auto"}),
        },
    }
}

fn to_openai(extra: &Extra, w: &mut Warnings) -> Extra {
    let mut out = Extra::new();
    let mut dropped = Vec::new();
    for (k, v) in extra {
        match k.as_str() {
            "max_tokens" | "temperature" | "top_p" | "stream" => {
                out.insert(k.clone(), v.clone());
            }
            "stop_sequences" => {
                out.insert("stop".into(), v.clone());
            }
            "tool_choice" => {
                out.insert("tool_choice".into(), openai_tool_choice(v));
                if v.get("disable_parallel_tool_use") == Some(&Value::Bool(true)) {
                    out.insert("parallel_tool_calls".into(), Value::Bool(false));
                }
            }
            "metadata" => match v.get("user_id") {
                Some(u) => {
                    out.insert("user".into(), u.clone());
                }
                None => dropped.push(k.as_str()),
            },
            _ => dropped.push(k.as_str()),
        }
    }
    w.dropped_fields(&dropped);
    out
}

fn openai_tool_choice(v: &Value) -> Value {
    match v.get("type").and_then(Value::as_str) {
        Some("any") => json!("required"),
        Some("tool") => json!({"type": "function", "function": {"name": v.get("name")}}),
        Some(other) => json!(other),
        None => json!("auto"),
    }
}
