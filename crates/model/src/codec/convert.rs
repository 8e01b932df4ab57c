//! Conversion between the OpenAI and Anthropic wire families.
//!
//! Structure is translated (tool messages ⇄ `tool_result` blocks, top-level
//! `system` ⇄ system messages, tool declarations, `tool_choice`, stop
//! sequences). What has no counterpart but can be left out without changing
//! what the model is asked (cache hints, unsigned reasoning, sampling knobs
//! of one provider) is dropped and listed in [`Converted::warnings`]. What
//! cannot be carried without changing the conversation (custom tool calls,
//! arguments that are not JSON, a system message in mid-conversation, server
//! tools, documents or audio) is an [`Error::Unrepresentable`].

use serde_json::{Map, Value, json};

use crate::conversation::{Conversation, Family, FunctionTool, Tool};
use crate::error::{Error, Result};
use crate::message::{
    Arguments, ContentForm, Extra, ImagePart, ImageSource, Message, Part, Role, TextPart, ToolCall,
    ToolResult,
};

/// A converted conversation and what the conversion left out.
#[derive(Debug, Clone)]
pub struct Converted {
    /// The conversation in the target family.
    pub conversation: Conversation,
    /// One line per kind of thing dropped, for the user to read.
    pub warnings: Vec<String>,
}

/// Converts a conversation to another wire family (a clone when it is already in it).
pub fn convert(conv: &Conversation, to: Family) -> Result<Converted> {
    let mut w = Warnings::default();
    let conversation = match (conv.family, to) {
        (a, b) if a == b => conv.clone(),
        (Family::OpenAi, Family::Anthropic) => to_anthropic(conv, &mut w)?,
        (Family::Anthropic, Family::OpenAi) => to_openai(conv, &mut w)?,
        _ => conv.clone(),
    };
    Ok(Converted {
        conversation,
        warnings: w.0,
    })
}

#[derive(Default)]
struct Warnings(Vec<String>);

impl Warnings {
    fn add(&mut self, msg: impl Into<String>) {
        let msg = msg.into();
        if !self.0.contains(&msg) {
            self.0.push(msg);
        }
    }

    fn drop_extra(&mut self, what: &str, extra: &Extra) {
        if !extra.is_empty() {
            let keys: Vec<&str> = extra.keys().map(String::as_str).collect();
            self.add(format!("dropped {what} fields: {}", keys.join(", ")));
        }
    }
}

fn unrepresentable(index: usize, target: &'static str, reason: impl Into<String>) -> Error {
    Error::Unrepresentable {
        index,
        target,
        reason: reason.into(),
    }
}

fn shell(conv: &Conversation, family: Family) -> Conversation {
    let mut out = Conversation::new(family);
    out.model = conv.model.clone();
    out.boundaries = conv.boundaries.clone();
    out.label = conv.label.clone();
    out
}

fn plain_text(t: &TextPart, what: &str, w: &mut Warnings) -> Part {
    w.drop_extra(what, &t.extra);
    Part::text(t.text.clone())
}

fn to_anthropic(conv: &Conversation, w: &mut Warnings) -> Result<Conversation> {
    const T: &str = "Anthropic";
    let mut out = shell(conv, Family::Anthropic);
    let mut in_head = true;
    // Anthropic wants call ids unique in the conversation; OpenAI runs may
    // reuse an id in a later step. Reused ids get a suffix, and results
    // follow the id of the call they answer.
    let mut seen = std::collections::HashSet::new();
    let mut renamed: std::collections::HashMap<String, String> = Default::default();
    for (i, m) in conv.messages.iter().enumerate() {
        let mut msg = Message {
            meta: m.meta.clone(),
            ..Message::default()
        };
        w.drop_extra("message", &m.extra);
        match &m.role {
            Role::System | Role::Developer if in_head => {
                msg.role = Role::System;
                msg.form = m.form;
                for p in &m.parts {
                    match p {
                        Part::Text(t) => msg.parts.push(plain_text(t, "system text", w)),
                        _ => return Err(unrepresentable(i, T, "non-text system content")),
                    }
                }
                out.messages.push(msg);
                continue;
            }
            Role::System | Role::Developer => {
                return Err(unrepresentable(
                    i,
                    T,
                    "a system/developer message after the conversation started",
                ));
            }
            Role::Tool => {
                in_head = false;
                let [Part::ToolResult(r)] = m.parts.as_slice() else {
                    return Err(unrepresentable(i, T, "a tool message without one result"));
                };
                let parts = user_parts(&r.parts, i, w)?;
                let call_id = renamed.get(&r.call_id).unwrap_or(&r.call_id).clone();
                let result = Part::ToolResult(ToolResult {
                    call_id,
                    parts,
                    form: r.form,
                    is_error: None,
                    extra: Extra::new(),
                });
                match out.messages.last_mut() {
                    Some(prev) if prev.role == Role::User && only_results(prev) => {
                        prev.parts.push(result);
                    }
                    _ => out.messages.push(Message {
                        role: Role::User,
                        parts: vec![result],
                        form: ContentForm::Blocks,
                        meta: m.meta.clone(),
                        ..Message::default()
                    }),
                }
                continue;
            }
            Role::User => {
                in_head = false;
                let parts = user_parts(&m.parts, i, w)?;
                // Text that follows tool results joins their user message.
                if let Some(prev) = out.messages.last_mut()
                    && prev.role == Role::User
                    && only_results(prev)
                {
                    prev.parts.extend(parts);
                    continue;
                }
                msg.role = Role::User;
                msg.parts = parts;
                msg.form = m.form;
            }
            Role::Assistant => {
                in_head = false;
                msg.role = Role::Assistant;
                msg.form = m.form;
                for p in &m.parts {
                    match p {
                        Part::Text(t) => msg.parts.push(plain_text(t, "text part", w)),
                        Part::Reasoning(_) => {
                            w.add("dropped unsigned reasoning (Anthropic needs signed thinking)")
                        }
                        Part::ToolCall(c) => {
                            let input = match &c.arguments {
                                Arguments::Json(s) => serde_json::from_str(s).map_err(|e| {
                                    unrepresentable(
                                        i,
                                        T,
                                        format!("arguments of call {} are not JSON: {e}", c.id),
                                    )
                                })?,
                                Arguments::Value(v) => v.clone(),
                                Arguments::Custom(_) => {
                                    return Err(unrepresentable(
                                        i,
                                        T,
                                        format!("custom tool call {}", c.id),
                                    ));
                                }
                            };
                            msg.form = ContentForm::Blocks;
                            let mut id = c.id.clone();
                            let mut n = 1;
                            while !seen.insert(id.clone()) {
                                n += 1;
                                id = format!("{}_{n}", c.id);
                            }
                            if id != c.id {
                                w.add("renamed tool call ids reused across steps (Anthropic wants them unique)");
                                renamed.insert(c.id.clone(), id.clone());
                            } else {
                                renamed.remove(&c.id);
                            }
                            msg.parts.push(Part::ToolCall(ToolCall {
                                id,
                                name: c.name.clone(),
                                arguments: Arguments::Value(input),
                                extra: Extra::new(),
                                function_extra: Extra::new(),
                            }));
                        }
                        _ => return Err(unrepresentable(i, T, "non-text assistant content")),
                    }
                }
                if msg.parts.is_empty() {
                    msg.form = ContentForm::Text;
                    msg.parts.push(Part::text(""));
                }
            }
            Role::Function | Role::Other(_) => {
                return Err(unrepresentable(
                    i,
                    T,
                    format!("role \"{}\"", m.role.as_str()),
                ));
            }
        }
        out.messages.push(msg);
    }
    out.tools = match &conv.tools {
        None => None,
        Some(tools) => Some(
            tools
                .iter()
                .map(|t| match t {
                    Tool::Function(f) => {
                        w.drop_extra("tool function", &f.function_extra);
                        let mut extra = f.extra.clone();
                        extra.remove("type");
                        w.drop_extra("tool", &extra);
                        Ok(Tool::Function(FunctionTool {
                            name: f.name.clone(),
                            description: f.description.clone(),
                            parameters: f.parameters.clone(),
                            extra: Extra::new(),
                            function_extra: Extra::new(),
                        }))
                    }
                    Tool::Opaque(_) => {
                        Err(unrepresentable(0, T, "a non-function tool declaration"))
                    }
                })
                .collect::<Result<Vec<_>>>()?,
        ),
    };
    let mut dropped = Vec::new();
    for (k, v) in &conv.extra {
        match (k.as_str(), v) {
            ("max_tokens" | "max_completion_tokens", _) => {
                out.extra.insert("max_tokens".into(), v.clone());
            }
            ("temperature" | "top_p" | "stream", _) => {
                out.extra.insert(k.clone(), v.clone());
            }
            ("stop", Value::String(s)) => {
                out.extra.insert("stop_sequences".into(), json!([s]));
            }
            ("stop", Value::Array(_)) => {
                out.extra.insert("stop_sequences".into(), v.clone());
            }
            ("tool_choice", _) => {
                let choice = match v {
                    Value::String(s) if s == "required" => json!({"type": "any"}),
                    Value::String(s) => json!({ "type": s }),
                    other => match other.pointer("/function/name") {
                        Some(name) => json!({"type": "tool", "name": name}),
                        None => json!({"type": "auto"}),
                    },
                };
                out.extra.insert("tool_choice".into(), choice);
            }
            ("user", Value::String(_)) => {
                out.extra.insert("metadata".into(), json!({ "user_id": v }));
            }
            _ => dropped.push(k.as_str()),
        }
    }
    if conv.extra.get("parallel_tool_calls") == Some(&Value::Bool(false)) {
        let choice = out
            .extra
            .entry("tool_choice")
            .or_insert_with(|| json!({"type": "auto"}));
        if let Value::Object(c) = choice {
            c.insert("disable_parallel_tool_use".into(), Value::Bool(true));
        }
        dropped.retain(|k| *k != "parallel_tool_calls");
    }
    if !dropped.is_empty() {
        w.add(format!("dropped request fields: {}", dropped.join(", ")));
    }
    Ok(out)
}

fn only_results(m: &Message) -> bool {
    !m.parts.is_empty() && m.parts.iter().all(|p| matches!(p, Part::ToolResult(_)))
}

/// User-side content for Anthropic: text and images.
fn user_parts(parts: &[Part], i: usize, w: &mut Warnings) -> Result<Vec<Part>> {
    parts
        .iter()
        .map(|p| match p {
            Part::Text(t) => Ok(plain_text(t, "text part", w)),
            Part::Image(img) => {
                w.drop_extra("image", &img.source_extra);
                let source = match &img.source {
                    ImageSource::Url(u) => match parse_data_url(u) {
                        Some((media_type, data)) => ImageSource::Base64 { media_type, data },
                        None => ImageSource::Url(u.clone()),
                    },
                    other => other.clone(),
                };
                Ok(Part::Image(ImagePart {
                    source,
                    source_extra: Extra::new(),
                    extra: Extra::new(),
                }))
            }
            _ => Err(unrepresentable(
                i,
                "Anthropic",
                "user content other than text and images",
            )),
        })
        .collect()
}

fn parse_data_url(url: &str) -> Option<(String, String)> {
    let rest = url.strip_prefix("data:")?;
    let (media_type, data) = rest.split_once(";base64,")?;
    Some((media_type.to_owned(), data.to_owned()))
}

fn to_openai(conv: &Conversation, w: &mut Warnings) -> Result<Conversation> {
    const T: &str = "OpenAI";
    let mut out = shell(conv, Family::OpenAi);
    for (i, m) in conv.messages.iter().enumerate() {
        w.drop_extra("message", &m.extra);
        match m.role {
            Role::System => {
                let mut parts = Vec::new();
                for p in &m.parts {
                    match p {
                        Part::Text(t) => parts.push(plain_text(t, "system block", w)),
                        _ => return Err(unrepresentable(i, T, "non-text system content")),
                    }
                }
                out.messages.push(Message {
                    role: Role::System,
                    parts,
                    form: m.form,
                    meta: m.meta.clone(),
                    ..Message::default()
                });
            }
            Role::User => {
                let mut rest = Vec::new();
                for p in &m.parts {
                    match p {
                        Part::ToolResult(r) => out.messages.push(tool_message(r, m, i, w)?),
                        Part::Text(t) => rest.push(plain_text(t, "text block", w)),
                        Part::Image(img) => {
                            w.drop_extra("image", &img.extra);
                            rest.push(Part::Image(ImagePart {
                                source: img.source.clone(),
                                source_extra: Extra::new(),
                                extra: Extra::new(),
                            }))
                        }
                        _ => {
                            return Err(unrepresentable(
                                i,
                                T,
                                "user content other than text, images and tool results",
                            ));
                        }
                    }
                }
                if !rest.is_empty() {
                    out.messages.push(Message {
                        role: Role::User,
                        parts: rest,
                        form: m.form,
                        meta: m.meta.clone(),
                        ..Message::default()
                    });
                }
            }
            Role::Assistant => {
                let mut msg = Message {
                    role: Role::Assistant,
                    form: ContentForm::Text,
                    meta: m.meta.clone(),
                    ..Message::default()
                };
                for p in &m.parts {
                    match p {
                        Part::Text(t) => msg.parts.push(plain_text(t, "text block", w)),
                        Part::Reasoning(_) => {
                            w.add("dropped thinking blocks (OpenAI has no equivalent input)")
                        }
                        Part::ToolCall(c) => {
                            let mut extra = Map::new();
                            extra.insert("type".into(), json!("function"));
                            msg.parts.push(Part::ToolCall(ToolCall {
                                id: c.id.clone(),
                                name: c.name.clone(),
                                arguments: Arguments::Json(c.arguments.to_json_text().into_owned()),
                                extra,
                                function_extra: Extra::new(),
                            }));
                        }
                        _ => {
                            return Err(unrepresentable(
                                i,
                                T,
                                "assistant content other than text, thinking and tool calls",
                            ));
                        }
                    }
                }
                let texts = msg.parts.iter().filter(|p| p.as_text().is_some()).count();
                if texts == 0 && msg.has_tool_calls() {
                    msg.form = ContentForm::Null;
                } else if texts > 1 {
                    msg.form = ContentForm::Blocks;
                }
                out.messages.push(msg);
            }
            _ => {
                return Err(unrepresentable(
                    i,
                    T,
                    format!("role \"{}\"", m.role.as_str()),
                ));
            }
        }
    }
    out.tools = match &conv.tools {
        None => None,
        Some(tools) => Some(
            tools
                .iter()
                .map(|t| match t {
                    Tool::Function(f) => {
                        let mut extra = f.extra.clone();
                        extra.remove("type");
                        w.drop_extra("tool", &extra);
                        let mut outer = Extra::new();
                        outer.insert("type".into(), json!("function"));
                        Ok(Tool::Function(FunctionTool {
                            name: f.name.clone(),
                            description: f.description.clone(),
                            parameters: f.parameters.clone(),
                            extra: outer,
                            function_extra: Extra::new(),
                        }))
                    }
                    Tool::Opaque(_) => Err(unrepresentable(
                        0,
                        T,
                        "a server or non-function tool declaration",
                    )),
                })
                .collect::<Result<Vec<_>>>()?,
        ),
    };
    let mut dropped = Vec::new();
    for (k, v) in &conv.extra {
        match k.as_str() {
            "max_tokens" | "temperature" | "top_p" | "stream" => {
                out.extra.insert(k.clone(), v.clone());
            }
            "stop_sequences" => {
                out.extra.insert("stop".into(), v.clone());
            }
            "tool_choice" => {
                let choice = match v.get("type").and_then(Value::as_str) {
                    Some("any") => json!("required"),
                    Some("tool") => {
                        json!({"type": "function", "function": {"name": v.get("name")}})
                    }
                    Some(other) => json!(other),
                    None => json!("auto"),
                };
                out.extra.insert("tool_choice".into(), choice);
                if v.get("disable_parallel_tool_use") == Some(&Value::Bool(true)) {
                    out.extra
                        .insert("parallel_tool_calls".into(), Value::Bool(false));
                }
            }
            "metadata" => match v.get("user_id") {
                Some(u) => {
                    out.extra.insert("user".into(), u.clone());
                }
                None => dropped.push(k.as_str()),
            },
            _ => dropped.push(k.as_str()),
        }
    }
    if !dropped.is_empty() {
        w.add(format!("dropped request fields: {}", dropped.join(", ")));
    }
    Ok(out)
}

fn tool_message(r: &ToolResult, m: &Message, i: usize, w: &mut Warnings) -> Result<Message> {
    let mut parts = Vec::with_capacity(r.parts.len());
    for p in &r.parts {
        match p {
            Part::Text(t) => parts.push(plain_text(t, "tool result text", w)),
            Part::Image(_) => {
                w.add("replaced images inside tool results with a text note (OpenAI tool messages hold text only)");
                parts.push(Part::text("[image omitted]"));
            }
            _ => {
                return Err(unrepresentable(
                    i,
                    "OpenAI",
                    "tool result content other than text and images",
                ));
            }
        }
    }
    let mut form = r.form;
    if r.is_error == Some(true) {
        // Keep the signal that the step failed: OpenAI has no error flag.
        parts.insert(0, Part::text("[tool error]"));
        if form != ContentForm::Blocks {
            let text = parts
                .iter()
                .filter_map(Part::as_text)
                .collect::<Vec<_>>()
                .join(" ");
            parts = vec![Part::text(text)];
            form = ContentForm::Text;
        }
    }
    w.drop_extra("tool result", &r.extra);
    Ok(Message {
        role: Role::Tool,
        parts: vec![Part::ToolResult(ToolResult {
            call_id: r.call_id.clone(),
            parts,
            form,
            is_error: None,
            extra: Extra::new(),
        })],
        form: ContentForm::Absent,
        meta: m.meta.clone(),
        ..Message::default()
    })
}
