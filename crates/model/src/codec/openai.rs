//! OpenAI Chat Completions request bodies.

use serde_json::{Value, json};

use super::util::{
    decode_content, encode_content, envelope, finish_body, name_and_description, not_content,
    object, start_body, take_messages, take_opt_str, take_str, text_block, with_extra,
};
use crate::conversation::{Conversation, Format, FunctionTool, Tool, Wire};
use crate::error::{Error, Result};
use crate::message::{
    Arguments, ContentForm, Extra, ImagePart, ImageSource, Message, Part, Reasoning, ReasoningKind,
    Role, TextPart, ToolCall, ToolResult,
};

/// Decodes a request body (an object with `messages`).
pub(crate) fn decode_body(v: Value) -> Result<Conversation> {
    let mut map = object(v, &|| "request body".to_owned())?;
    let key_order = map.keys().cloned().collect();
    let messages = decode_messages(take_messages(&mut map)?, "messages")?;
    Ok(envelope(
        Format::Chat,
        key_order,
        map,
        messages,
        decode_tool,
    ))
}

/// Decodes an array of message objects; `path` prefixes error locations.
pub(crate) fn decode_messages(items: Vec<Value>, path: &str) -> Result<Vec<Message>> {
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        let at = || format!("{path}[{i}]");
        out.push(decode_message(item, &at)?);
    }
    Ok(out)
}

/// Decodes one message object.
pub(crate) fn decode_message(v: Value, at: &dyn Fn() -> String) -> Result<Message> {
    let mut map = object(v, at)?;
    let role = Role::parse(&take_str(&mut map, "role", at)?);
    let (mut parts, mut form) = decode_content(map.shift_remove("content"), at, &decode_part)?;
    match role {
        Role::Tool => {
            let call_id = take_str(&mut map, "tool_call_id", at)?;
            parts = vec![Part::ToolResult(Box::new(ToolResult {
                call_id,
                parts,
                form,
                is_error: None,
                extra: Extra::new(),
            }))];
            form = ContentForm::Absent;
        }
        Role::Assistant => {
            if let Some(Value::String(_)) = map.get("reasoning_content")
                && let Some(text) = take_opt_str(&mut map, "reasoning_content")
            {
                parts.insert(
                    0,
                    Part::Reasoning(Box::new(Reasoning {
                        text,
                        signature: None,
                        kind: ReasoningKind::Field,
                        extra: Extra::new(),
                    })),
                );
            }
            match map.shift_remove("tool_calls") {
                Some(Value::Array(calls)) => {
                    for (j, call) in calls.into_iter().enumerate() {
                        let at_j = || format!("{}.tool_calls[{j}]", at());
                        parts.push(Part::ToolCall(Box::new(decode_tool_call(call, &at_j)?)));
                    }
                }
                Some(other) => {
                    map.insert("tool_calls".into(), other);
                }
                None => {}
            }
        }
        _ => {}
    }
    Ok(Message {
        role,
        parts,
        form,
        extra: map.into(),
        ..Message::default()
    })
}

pub(crate) fn decode_tool_call(v: Value, at: &dyn Fn() -> String) -> Result<ToolCall> {
    let mut map = object(v, at)?;
    let id = take_str(&mut map, "id", at)?;
    let (key, custom) = if map.contains_key("function") {
        ("function", false)
    } else if map.contains_key("custom") {
        ("custom", true)
    } else {
        return Err(Error::shape(at(), "a \"function\" (or \"custom\") object"));
    };
    let at_f = || format!("{}.{key}", at());
    let mut function = object(map.shift_remove(key).unwrap_or_default(), &at_f)?;
    let name = take_str(&mut function, "name", &at_f)?;
    let arguments = if custom {
        Arguments::Custom(take_str(&mut function, "input", &at_f)?)
    } else {
        match function.shift_remove("arguments") {
            Some(Value::String(s)) => Arguments::Json(s),
            Some(other) => Arguments::Value(other),
            None => return Err(Error::shape(at_f(), "an \"arguments\" field")),
        }
    };
    Ok(ToolCall {
        id,
        name,
        arguments,
        extra: map.into(),
        function_extra: function.into(),
    })
}

/// Decodes one content part; unknown or odd parts are kept verbatim.
pub(crate) fn decode_part(v: Value, _at: &dyn Fn() -> String) -> Result<Part> {
    let Value::Object(mut map) = v else {
        return Ok(Part::opaque(v));
    };
    match map.get("type").and_then(Value::as_str) {
        Some("text") if map.get("text").is_some_and(Value::is_string) => {
            map.shift_remove("type");
            let text = take_opt_str(&mut map, "text").unwrap_or_default();
            Ok(Part::Text(TextPart {
                text,
                extra: map.into(),
            }))
        }
        Some("image_url") => match map.get_mut("image_url") {
            Some(Value::Object(inner)) if inner.get("url").is_some_and(Value::is_string) => {
                let url = take_opt_str(inner, "url").unwrap_or_default();
                let source_extra = std::mem::take(inner);
                map.shift_remove("image_url");
                map.shift_remove("type");
                Ok(Part::Image(Box::new(ImagePart {
                    source: ImageSource::Url(url),
                    source_extra: source_extra.into(),
                    extra: map.into(),
                })))
            }
            _ => Ok(Part::opaque(Value::Object(map))),
        },
        _ => Ok(Part::opaque(Value::Object(map))),
    }
}

pub(crate) fn decode_tool(v: Value) -> Tool {
    let Value::Object(mut map) = v else {
        return Tool::Opaque(v);
    };
    let is_function = map.get("type").and_then(Value::as_str) == Some("function");
    match map.get_mut("function") {
        Some(Value::Object(f)) if is_function && f.get("name").is_some_and(Value::is_string) => {
            let name = take_opt_str(f, "name").unwrap_or_default();
            let description = take_opt_str(f, "description");
            let parameters = f.shift_remove("parameters");
            let function_extra = std::mem::take(f);
            map.shift_remove("function");
            Tool::Function(FunctionTool {
                name,
                description,
                parameters,
                extra: map.into(),
                function_extra: function_extra.into(),
            })
        }
        _ => Tool::Opaque(Value::Object(map)),
    }
}

/// Encodes a conversation of the OpenAI family as a request body.
pub(crate) fn encode_body(conv: &Conversation) -> Result<Value> {
    let map = start_body(conv);
    let messages = conv
        .messages
        .iter()
        .enumerate()
        .map(|(i, m)| encode_message(m, i))
        .collect::<Result<Vec<_>>>()?;
    Ok(finish_body(
        map,
        Wire::Chat.history_key(),
        messages,
        conv,
        encode_tool,
    ))
}

/// Encodes one message.
pub(crate) fn encode_message(m: &Message, index: usize) -> Result<Value> {
    let unrepresentable = |reason: &str| Error::Unrepresentable {
        index,
        target: "OpenAI",
        reason: reason.to_owned(),
    };
    let mut fields: Vec<(&str, Value)> = vec![("role", Value::String(m.role.as_str().into()))];
    if m.role == Role::Tool {
        let [Part::ToolResult(r)] = m.parts.as_slice() else {
            return Err(unrepresentable(
                "a tool message must hold exactly one tool result",
            ));
        };
        let parts: Vec<&Part> = r.parts.iter().collect();
        if let Some(content) = encode_content(&parts, r.form, &|p| encode_part(p, index))? {
            fields.push(("content", content));
        }
        fields.push(("tool_call_id", Value::String(r.call_id.clone())));
        return Ok(with_extra(fields, &m.extra));
    }
    let mut content = Vec::new();
    let mut calls = Vec::new();
    let mut reasoning = None;
    for p in &m.parts {
        match p {
            Part::ToolCall(c) => calls.push(encode_tool_call(c)),
            Part::Reasoning(r) if r.kind == ReasoningKind::Field => reasoning = Some(&r.text),
            Part::Reasoning(_) => {
                return Err(unrepresentable("Anthropic thinking blocks"));
            }
            Part::ToolResult(_) => {
                return Err(unrepresentable(
                    "tool results outside a tool message (convert the conversation first)",
                ));
            }
            other => content.push(other),
        }
    }
    if let Some(c) = encode_content(&content, m.form, &|p| encode_part(p, index))? {
        fields.push(("content", c));
    }
    if let Some(r) = reasoning {
        fields.push(("reasoning_content", Value::String(r.clone())));
    }
    if !calls.is_empty() {
        fields.push(("tool_calls", Value::Array(calls)));
    }
    Ok(with_extra(fields, &m.extra))
}

fn encode_tool_call(c: &ToolCall) -> Value {
    let (key, args) = match &c.arguments {
        Arguments::Json(s) => ("function", ("arguments", Value::String(s.clone()))),
        Arguments::Value(v) => ("function", ("arguments", v.clone())),
        Arguments::Custom(s) => ("custom", ("input", Value::String(s.clone()))),
    };
    let inner = with_extra(
        vec![("name", Value::String(c.name.clone())), args],
        &c.function_extra,
    );
    with_extra(
        vec![("id", Value::String(c.id.clone())), (key, inner)],
        &c.extra,
    )
}

fn encode_part(p: &Part, index: usize) -> Result<Value> {
    Ok(match p {
        Part::Text(t) => text_block(t),
        Part::Image(img) => {
            let url = img.source.to_url();
            let inner = with_extra(vec![("url", Value::String(url))], &img.source_extra);
            with_extra(
                vec![("type", json!("image_url")), ("image_url", inner)],
                &img.extra,
            )
        }
        Part::Opaque(v) => (**v).clone(),
        Part::ToolCall(_) | Part::ToolResult(_) | Part::Reasoning(_) => {
            return Err(not_content(index, "OpenAI"));
        }
    })
}

fn encode_tool(t: &Tool) -> Value {
    match t {
        Tool::Opaque(v) => v.clone(),
        Tool::Function(f) => {
            let mut inner = name_and_description(f);
            if let Some(p) = &f.parameters {
                inner.push(("parameters", p.clone()));
            }
            let function = with_extra(inner, &f.function_extra);
            let mut outer = f.extra.clone();
            outer
                .entry("type")
                .or_insert_with(|| Value::String("function".into()));
            with_extra(vec![("function", function)], &outer)
        }
    }
}
