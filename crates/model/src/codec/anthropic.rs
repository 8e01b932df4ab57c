//! Anthropic Messages request bodies.

use serde_json::{Map, Value, json};

use super::util::{
    decode_content, decode_role_content, encode_content, envelope, finish_body, kind,
    name_and_description, object, start_body, take_messages, take_opt_str, take_str, text_block,
    with_extra,
};
use crate::conversation::{Conversation, Format, FunctionTool, Tool, Wire};
use crate::error::{Error, Result};
use crate::message::{
    Arguments, ContentForm, Extra, ImagePart, ImageSource, Message, Part, Reasoning, ReasoningKind,
    Role, TextPart, ToolCall, ToolResult,
};

/// Decodes a request body (an object with `messages`, optional `system`).
pub(crate) fn decode_body(v: Value) -> Result<Conversation> {
    let mut map = object(v, &|| "request body".to_owned())?;
    let key_order = map.keys().cloned().collect();
    let mut messages = Vec::new();
    if let Some(system) = map.shift_remove("system") {
        let at = || "system".to_owned();
        let (parts, form) = match system {
            Value::String(s) => (vec![Part::text(s)], ContentForm::Text),
            Value::Array(items) => {
                let mut parts = Vec::with_capacity(items.len());
                for (i, item) in items.into_iter().enumerate() {
                    parts.push(decode_block(item, &|| format!("system[{i}]"))?);
                }
                (parts, ContentForm::Blocks)
            }
            other => {
                return Err(Error::shape(
                    at(),
                    format!("a string or an array of blocks, found {}", kind(&other)),
                ));
            }
        };
        messages.push(Message {
            role: Role::System,
            parts,
            form,
            ..Message::default()
        });
    }
    let items = take_messages(&mut map)?;
    messages.reserve(items.len());
    for (i, item) in items.into_iter().enumerate() {
        messages.push(decode_message(item, &|| format!("messages[{i}]"))?);
    }
    Ok(envelope(
        Format::Anthropic,
        key_order,
        map,
        messages,
        decode_tool,
    ))
}

/// Decodes one message object (`role` and `content`) of the `messages`
/// array; a system message there stays there ([`Meta::inline_system`](crate::Meta)).
pub(crate) fn decode_message(v: Value, at: &dyn Fn() -> String) -> Result<Message> {
    let mut m = decode_role_content(v, at, &decode_block)?;
    m.meta.inline_system = m.role == Role::System;
    Ok(m)
}

/// Decodes one content block. Blocks of unknown type are kept verbatim;
/// known blocks missing a required field are an error, since pairing and
/// validation depend on them.
pub(crate) fn decode_block(v: Value, at: &dyn Fn() -> String) -> Result<Part> {
    let Value::Object(mut map) = v else {
        return Err(Error::shape(
            at(),
            format!("a content block object, found {}", kind(&v)),
        ));
    };
    let Some(ty) = map.get("type").and_then(Value::as_str).map(str::to_owned) else {
        return Err(Error::shape(at(), "a block with a string \"type\""));
    };
    let part = match ty.as_str() {
        "text" => {
            map.shift_remove("type");
            let text = take_str(&mut map, "text", at)?;
            Part::Text(TextPart {
                text,
                extra: map.into(),
            })
        }
        "image" => decode_image(map, at)?,
        "tool_use" => {
            map.shift_remove("type");
            let id = take_str(&mut map, "id", at)?;
            let name = take_str(&mut map, "name", at)?;
            let input = map.shift_remove("input").unwrap_or(Value::Null);
            Part::ToolCall(Box::new(ToolCall {
                id,
                name,
                arguments: Arguments::Value(input),
                extra: map.into(),
                function_extra: Extra::new(),
            }))
        }
        "tool_result" => decode_tool_result(map, at)?,
        "thinking" if map.get("thinking").is_some_and(Value::is_string) => {
            map.shift_remove("type");
            Part::Reasoning(Box::new(Reasoning {
                text: take_opt_str(&mut map, "thinking").unwrap_or_default(),
                signature: take_opt_str(&mut map, "signature"),
                kind: ReasoningKind::Thinking,
                extra: map.into(),
            }))
        }
        "redacted_thinking" if map.get("data").is_some_and(Value::is_string) => {
            map.shift_remove("type");
            Part::Reasoning(Box::new(Reasoning {
                text: take_opt_str(&mut map, "data").unwrap_or_default(),
                signature: None,
                kind: ReasoningKind::Redacted,
                extra: map.into(),
            }))
        }
        _ => Part::opaque(Value::Object(map)),
    };
    Ok(part)
}

/// An image block; one with a source abridge does not model is kept
/// verbatim.
fn decode_image(mut map: Map<String, Value>, at: &dyn Fn() -> String) -> Result<Part> {
    Ok(match map.get_mut("source") {
        Some(Value::Object(src)) => {
            let source = match src.get("type").and_then(Value::as_str) {
                Some("base64") => {
                    src.shift_remove("type");
                    let at_s = || format!("{}.source", at());
                    ImageSource::Base64 {
                        media_type: take_str(src, "media_type", &at_s)?,
                        data: take_str(src, "data", &at_s)?,
                    }
                }
                Some("url") if src.get("url").is_some_and(Value::is_string) => {
                    src.shift_remove("type");
                    ImageSource::Url(take_opt_str(src, "url").unwrap_or_default())
                }
                _ => return Ok(Part::opaque(Value::Object(map))),
            };
            let source_extra = std::mem::take(src);
            map.shift_remove("source");
            map.shift_remove("type");
            Part::Image(Box::new(ImagePart {
                source,
                source_extra: source_extra.into(),
                extra: map.into(),
            }))
        }
        _ => Part::opaque(Value::Object(map)),
    })
}

/// A tool result: its call's id, its content and whether it failed.
fn decode_tool_result(mut map: Map<String, Value>, at: &dyn Fn() -> String) -> Result<Part> {
    map.shift_remove("type");
    let call_id = take_str(&mut map, "tool_use_id", at)?;
    let (parts, form) = decode_content(map.shift_remove("content"), at, &decode_block)?;
    let is_error = match map.get("is_error") {
        Some(Value::Bool(b)) => {
            let b = *b;
            map.shift_remove("is_error");
            Some(b)
        }
        _ => None,
    };
    Ok(Part::ToolResult(Box::new(ToolResult {
        call_id,
        parts,
        form,
        is_error,
        extra: map.into(),
    })))
}

fn decode_tool(v: Value) -> Tool {
    let Value::Object(mut map) = v else {
        return Tool::Opaque(v);
    };
    let custom = matches!(
        map.get("type").and_then(Value::as_str),
        None | Some("custom")
    );
    if custom && map.get("name").is_some_and(Value::is_string) && map.contains_key("input_schema") {
        let name = take_opt_str(&mut map, "name").unwrap_or_default();
        let description = take_opt_str(&mut map, "description");
        let parameters = map.shift_remove("input_schema");
        return Tool::Function(FunctionTool {
            name,
            description,
            parameters,
            extra: map.into(),
            function_extra: Extra::new(),
        });
    }
    Tool::Opaque(Value::Object(map))
}

/// Encodes a conversation of the Anthropic family as a request body.
///
/// Leading system messages become the top-level `system`; a system message
/// after them (or marked [`Meta::inline_system`](crate::Meta)) stays in
/// `messages`, where the API accepts it.
pub(crate) fn encode_body(conv: &Conversation) -> Result<Value> {
    let mut map = start_body(conv);
    let lead = conv.wire_offset();
    match &conv.messages[..lead] {
        [] => {}
        [one] => {
            let parts: Vec<&Part> = one.parts.iter().collect();
            if let Some(v) = encode_content(&parts, one.form, &|p| encode_block(p, 0))? {
                map.insert("system".into(), v);
            }
        }
        many => {
            let mut blocks = Vec::new();
            for (i, m) in many.iter().enumerate() {
                for p in &m.parts {
                    blocks.push(encode_block(p, i)?);
                }
            }
            map.insert("system".into(), Value::Array(blocks));
        }
    }
    let mut messages = Vec::with_capacity(conv.messages.len() - lead);
    for (i, m) in conv.messages.iter().enumerate().skip(lead) {
        messages.push(encode_message(m, i)?);
    }
    Ok(finish_body(
        map,
        Wire::Anthropic.history_key(),
        messages,
        conv,
        encode_tool,
    ))
}

/// Encodes one message of the `messages` array.
pub(crate) fn encode_message(m: &Message, index: usize) -> Result<Value> {
    if !matches!(m.role, Role::User | Role::Assistant | Role::System) {
        return Err(Error::Unrepresentable {
            index,
            target: "Anthropic",
            reason: format!(
                "role \"{}\" is not allowed in messages (only user, assistant and system)",
                m.role.as_str()
            ),
        });
    }
    let parts: Vec<&Part> = m.parts.iter().collect();
    let mut fields = vec![("role", Value::String(m.role.as_str().into()))];
    if let Some(c) = encode_content(&parts, m.form, &|p| encode_block(p, index))? {
        fields.push(("content", c));
    }
    Ok(with_extra(fields, &m.extra))
}

/// Encodes one content block.
pub(crate) fn encode_block(p: &Part, index: usize) -> Result<Value> {
    Ok(match p {
        Part::Text(t) => text_block(t),
        Part::Image(img) => {
            let source = match &img.source {
                ImageSource::Base64 { media_type, data } => vec![
                    ("type", json!("base64")),
                    ("media_type", Value::String(media_type.clone())),
                    ("data", Value::String(data.clone())),
                ],
                ImageSource::Url(url) => {
                    vec![("type", json!("url")), ("url", Value::String(url.clone()))]
                }
            };
            let source = with_extra(source, &img.source_extra);
            with_extra(
                vec![("type", json!("image")), ("source", source)],
                &img.extra,
            )
        }
        Part::ToolCall(c) => {
            let input = match &c.arguments {
                Arguments::Value(v) => v.clone(),
                Arguments::Json(s) => {
                    serde_json::from_str(s).map_err(|e| Error::Unrepresentable {
                        index,
                        target: "Anthropic",
                        reason: format!("arguments of tool call {} are not valid JSON ({e})", c.id),
                    })?
                }
                Arguments::Custom(_) => {
                    return Err(Error::Unrepresentable {
                        index,
                        target: "Anthropic",
                        reason: format!("custom (free-form) tool call {}", c.id),
                    });
                }
            };
            with_extra(
                vec![
                    ("type", json!("tool_use")),
                    ("id", Value::String(c.id.clone())),
                    ("name", Value::String(c.name.clone())),
                    ("input", input),
                ],
                &c.extra,
            )
        }
        Part::ToolResult(r) => {
            let mut fields = vec![
                ("type", json!("tool_result")),
                ("tool_use_id", Value::String(r.call_id.clone())),
            ];
            let parts: Vec<&Part> = r.parts.iter().collect();
            if let Some(c) = encode_content(&parts, r.form, &|p| encode_block(p, index))? {
                fields.push(("content", c));
            }
            if let Some(e) = r.is_error {
                fields.push(("is_error", Value::Bool(e)));
            }
            with_extra(fields, &r.extra)
        }
        Part::Reasoning(r) => match r.kind {
            ReasoningKind::Thinking => {
                let mut fields = vec![
                    ("type", json!("thinking")),
                    ("thinking", Value::String(r.text.clone())),
                ];
                if let Some(s) = &r.signature {
                    fields.push(("signature", Value::String(s.clone())));
                }
                with_extra(fields, &r.extra)
            }
            ReasoningKind::Redacted => with_extra(
                vec![
                    ("type", json!("redacted_thinking")),
                    ("data", Value::String(r.text.clone())),
                ],
                &r.extra,
            ),
            ReasoningKind::Field | ReasoningKind::Thought => {
                return Err(Error::Unrepresentable {
                    index,
                    target: "Anthropic",
                    reason: "another API's reasoning (convert the conversation first)".into(),
                });
            }
        },
        Part::Opaque(v) => (**v).clone(),
    })
}

fn encode_tool(t: &Tool) -> Value {
    match t {
        Tool::Opaque(v) => v.clone(),
        Tool::Function(f) => {
            let mut fields = name_and_description(f);
            fields.push((
                "input_schema",
                f.parameters
                    .clone()
                    .unwrap_or_else(|| json!({"type": "object"})),
            ));
            with_extra(fields, &f.extra)
        }
    }
}
