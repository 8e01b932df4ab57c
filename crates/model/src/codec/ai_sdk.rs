//! The Vercel AI SDK's `ModelMessage[]`: system, user, assistant and tool
//! messages whose parts are `text`, `image`, `file`, `reasoning`,
//! `tool-call` (with `input`) and `tool-result` (with a typed `output`).
//! `providerOptions` and any other field stay in the extras at every level.
//!
//! A tool result's output becomes parts the engine can count and clip: its
//! text (`text`, `error-text`), its JSON as text (`json`, `error-json`), or
//! its items (`content`). The output object without its `value` is kept in
//! the part's extras under `output`, so an untouched result encodes back to
//! the same JSON and a clipped one to a `text` (or `error-text`) output.

use serde_json::{Map, Value, json};

use super::util::{
    decode_role_content, encode_content, kind, object, take_str, text_block, with_extra,
};
use crate::conversation::{Conversation, Format};
use crate::error::{Error, Result};
use crate::message::{
    Arguments, ContentForm, Extra, ImagePart, ImageSource, Message, Part, Reasoning, ReasoningKind,
    Role, TextPart, ToolCall, ToolResult,
};

/// Part types only the AI SDK uses (for format detection).
pub(crate) const TELLTALE_PARTS: [&str; 3] = ["tool-call", "tool-result", "reasoning"];

/// Decodes a `ModelMessage[]`.
pub(crate) fn decode(items: Vec<Value>) -> Result<Conversation> {
    let mut conv = Conversation::new(crate::conversation::Family::OpenAi);
    conv.format = Format::AiSdk;
    conv.messages.reserve(items.len());
    for (i, item) in items.into_iter().enumerate() {
        conv.messages
            .push(decode_message(item, &|| format!("[{i}]"))?);
    }
    Ok(conv)
}

pub(crate) fn decode_message(v: Value, at: &dyn Fn() -> String) -> Result<Message> {
    decode_role_content(v, at, &decode_part)
}

fn decode_part(v: Value, at: &dyn Fn() -> String) -> Result<Part> {
    let Value::Object(mut map) = v else {
        return Ok(Part::opaque(v));
    };
    let ty = map
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let at_ty = || format!("{} ({ty})", at());
    match ty.as_str() {
        "text" if map.get("text").is_some_and(Value::is_string) => {
            map.shift_remove("type");
            let text = take_str(&mut map, "text", &at_ty)?;
            Ok(Part::Text(TextPart {
                text,
                extra: map.into(),
            }))
        }
        "reasoning" if map.get("text").is_some_and(Value::is_string) => {
            map.shift_remove("type");
            let text = take_str(&mut map, "text", &at_ty)?;
            Ok(Part::Reasoning(Box::new(Reasoning {
                text,
                signature: None,
                kind: ReasoningKind::Thinking,
                extra: map.into(),
            })))
        }
        "image" if map.get("image").is_some_and(Value::is_string) => {
            map.shift_remove("type");
            let image = take_str(&mut map, "image", &at_ty)?;
            let source = if image.starts_with("http://")
                || image.starts_with("https://")
                || image.starts_with("data:")
            {
                ImageSource::Url(image)
            } else {
                let media_type = match map.shift_remove("mediaType") {
                    Some(Value::String(m)) => m,
                    Some(other) => {
                        map.insert("mediaType".into(), other);
                        String::new()
                    }
                    None => String::new(),
                };
                ImageSource::Base64 {
                    media_type,
                    data: image,
                }
            };
            Ok(Part::Image(Box::new(ImagePart {
                source,
                source_extra: Extra::new(),
                extra: map.into(),
            })))
        }
        "tool-call" => {
            map.shift_remove("type");
            let id = take_str(&mut map, "toolCallId", &at_ty)?;
            let name = take_str(&mut map, "toolName", &at_ty)?;
            let input = map.shift_remove("input").unwrap_or(Value::Null);
            Ok(Part::ToolCall(Box::new(ToolCall {
                id,
                name,
                arguments: Arguments::Value(input),
                extra: map.into(),
                function_extra: Extra::new(),
            })))
        }
        "tool-result" => {
            map.shift_remove("type");
            let call_id = take_str(&mut map, "toolCallId", &at_ty)?;
            let output = object(map.shift_remove("output").unwrap_or(Value::Null), &|| {
                format!("{}.output", at_ty())
            })?;
            let (parts, form, is_error, kept) = decode_output(output, &at_ty)?;
            map.insert("output".into(), Value::Object(kept));
            Ok(Part::ToolResult(Box::new(ToolResult {
                call_id,
                parts,
                form,
                is_error,
                extra: map.into(),
            })))
        }
        _ => Ok(Part::opaque(Value::Object(map))),
    }
}

type Output = (Vec<Part>, ContentForm, Option<bool>, Map<String, Value>);

/// A tool result's `output`: its parts, and the object without its value.
fn decode_output(mut output: Map<String, Value>, at: &dyn Fn() -> String) -> Result<Output> {
    let ty = output
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let value = output.shift_remove("value").unwrap_or(Value::Null);
    let error = ty.starts_with("error-").then_some(true);
    let (parts, form) = match (ty.as_str(), value) {
        ("text" | "error-text", Value::String(s)) => (vec![Part::text(s)], ContentForm::Text),
        ("json" | "error-json", v) => (vec![Part::text(v.to_string())], ContentForm::Text),
        ("content", Value::Array(items)) => {
            let parts = items
                .into_iter()
                .map(|item| match item {
                    Value::Object(mut m)
                        if m.get("type").and_then(Value::as_str) == Some("text")
                            && m.get("text").is_some_and(Value::is_string) =>
                    {
                        m.shift_remove("type");
                        let text = match m.shift_remove("text") {
                            Some(Value::String(t)) => t,
                            _ => String::new(),
                        };
                        Part::Text(TextPart {
                            text,
                            extra: m.into(),
                        })
                    }
                    other => Part::opaque(other),
                })
                .collect();
            (parts, ContentForm::Blocks)
        }
        (_, other) => {
            return Err(Error::shape(
                format!("{}.output", at()),
                format!(
                    "a text, json, error-text, error-json or content output, found type \"{ty}\" with {}",
                    kind(&other)
                ),
            ));
        }
    };
    Ok((parts, form, error, output))
}

/// Encodes a conversation as a `ModelMessage[]`.
pub(crate) fn encode(conv: &Conversation) -> Result<Value> {
    conv.messages
        .iter()
        .map(encode_message)
        .collect::<Result<Vec<_>>>()
        .map(Value::Array)
}

pub(crate) fn encode_message(m: &Message) -> Result<Value> {
    let parts: Vec<&Part> = m.parts.iter().collect();
    let form = if m.role == Role::Tool {
        ContentForm::Blocks
    } else {
        m.form
    };
    let content =
        encode_content(&parts, form, &encode_part)?.unwrap_or(Value::String(String::new()));
    Ok(with_extra(
        vec![
            ("role", Value::String(m.role.as_str().to_owned())),
            ("content", content),
        ],
        &m.extra,
    ))
}

fn encode_part(p: &Part) -> Result<Value> {
    Ok(match p {
        Part::Text(t) => text_block(t),
        Part::Reasoning(r) => with_extra(
            vec![("type", json!("reasoning")), ("text", json!(r.text))],
            &r.extra,
        ),
        Part::Image(i) => {
            let mut fields = vec![("type", json!("image"))];
            match &i.source {
                ImageSource::Url(u) => fields.push(("image", json!(u))),
                ImageSource::Base64 { media_type, data } => {
                    fields.push(("image", json!(data)));
                    if !media_type.is_empty() {
                        fields.push(("mediaType", json!(media_type)));
                    }
                }
            }
            with_extra(fields, &i.extra)
        }
        Part::ToolCall(c) => {
            let input = match &c.arguments {
                Arguments::Value(v) => v.clone(),
                other => serde_json::from_str(&other.to_json_text())
                    .unwrap_or_else(|_| Value::String(other.to_json_text().into_owned())),
            };
            with_extra(
                vec![
                    ("type", json!("tool-call")),
                    ("toolCallId", json!(c.id)),
                    ("toolName", json!(c.name)),
                    ("input", input),
                ],
                &c.extra,
            )
        }
        Part::ToolResult(r) => {
            let mut extra = r.extra.clone();
            let kept = match extra.shift_remove("output") {
                Some(Value::Object(o)) => o,
                _ => Map::new(),
            };
            let output = encode_output(r, kept);
            let mut fields = vec![
                ("type", json!("tool-result")),
                ("toolCallId", json!(r.call_id)),
            ];
            fields.push(("output", output));
            with_extra(fields, &extra)
        }
        Part::Opaque(v) => (**v).clone(),
    })
}

/// The `output` of a tool result: as it came when its parts still fit its
/// type, else its text as a `text` (or `error-text`) output.
fn encode_output(r: &ToolResult, mut kept: Map<String, Value>) -> Value {
    let ty = kept
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let error = r.is_error == Some(true);
    let text = || {
        r.parts
            .iter()
            .filter_map(Part::as_text)
            .collect::<Vec<_>>()
            .join("\n")
    };
    let value = match ty.as_str() {
        "content" => Some(Value::Array(
            r.parts
                .iter()
                .map(|p| match p {
                    Part::Text(t) => text_block(t),
                    Part::Opaque(v) => (**v).clone(),
                    other => json!({"type": "text", "text": other.as_text().unwrap_or("")}),
                })
                .collect(),
        )),
        "json" | "error-json" => serde_json::from_str::<Value>(&text()).ok(),
        "text" | "error-text" => Some(Value::String(text())),
        _ => None,
    };
    let value = value.unwrap_or_else(|| {
        let ty = if error { "error-text" } else { "text" };
        kept.insert("type".into(), json!(ty));
        Value::String(text())
    });
    kept.insert("value".into(), value);
    Value::Object(kept)
}
