//! AI SDK `ModelMessage[]` ⇄ the OpenAI family: both keep tool results in
//! tool messages, so the conversion is a matter of fields — `toolName` on
//! results, one result per OpenAI tool message, JSON arguments as text,
//! `providerOptions` (which OpenAI has no place for) dropped.

use std::collections::HashMap;

use serde_json::Value;

use super::Warnings;
use crate::conversation::{Conversation, Family, Format};
use crate::error::Result;
use crate::message::{Arguments, ContentForm, Message, Part, Role, TextPart};

/// Fields of AI SDK parts and messages that OpenAI has no place for.
const AI_SDK_ONLY: [&str; 3] = ["providerOptions", "toolName", "output"];

/// AI SDK messages as an OpenAI request's messages.
pub(super) fn to_openai(conv: &Conversation, w: &mut Warnings) -> Result<Conversation> {
    let mut out = conv.clone_envelope();
    out.format = Format::Chat;
    out.family = Family::OpenAi;
    out.messages.reserve(conv.messages.len());
    for m in &conv.messages {
        let mut m = m.clone();
        strip(&mut m.extra, "message", w);
        for p in &mut m.parts {
            if let Some(extra) = p.extra_mut() {
                strip(extra, "part", w);
            }
            if let Part::ToolCall(c) = p {
                if let Arguments::Value(v) = &c.arguments {
                    c.arguments = Arguments::Json(v.to_string());
                }
                c.extra
                    .insert("type".into(), Value::String("function".into()));
            }
        }
        if m.role == Role::Assistant {
            // OpenAI's usual shapes: text as a string beside the calls, null without text.
            let mut content = m.parts.iter().filter(|p| !matches!(p, Part::ToolCall(_)));
            m.form = match (content.next(), content.next()) {
                (None, _) if m.has_tool_calls() => ContentForm::Null,
                (Some(Part::Text(t)), None) if t.extra.is_empty() => ContentForm::Text,
                _ => m.form,
            };
        }
        if m.role == Role::Tool && m.parts.len() > 1 {
            // OpenAI: one result per tool message.
            for p in std::mem::take(&mut m.parts) {
                out.messages.push(Message {
                    parts: vec![p],
                    ..m.clone()
                });
            }
        } else {
            out.messages.push(m);
        }
    }
    Ok(out)
}

/// Removes the AI SDK's own fields, reporting what else OpenAI cannot carry.
fn strip(extra: &mut crate::message::Extra, what: &str, w: &mut Warnings) {
    if extra.shift_remove("providerOptions").is_some() {
        w.add(format!(
            "dropped {what} providerOptions (OpenAI has no place for them)"
        ));
    }
    for k in AI_SDK_ONLY {
        extra.remove(k);
    }
}

/// An OpenAI-family conversation as AI SDK messages: results named after
/// their calls, one system string, provider-specific fields dropped (and
/// listed). The envelope (model, tools, sampling fields) is not part of
/// `ModelMessage[]` and is dropped too.
pub(super) fn from_openai(mut conv: Conversation, w: &mut Warnings) -> Conversation {
    conv.format = Format::AiSdk;
    if conv.tools.is_some() || !conv.extra.is_empty() {
        w.add("AI SDK messages carry no request fields (model, tools, sampling): dropped");
    }
    let mut names: HashMap<String, String> = HashMap::new();
    for m in &mut conv.messages {
        w.drop_extra("message", &m.extra);
        m.extra.clear();
        match m.role {
            Role::System => {
                let text = m.text_content();
                m.parts = vec![Part::text(text)];
                m.form = ContentForm::Text;
            }
            Role::Assistant if m.parts.iter().any(|p| !matches!(p, Part::Text(_))) => {
                m.form = ContentForm::Blocks;
            }
            Role::Tool => m.form = ContentForm::Blocks,
            _ => {}
        }
        for p in &mut m.parts {
            match p {
                Part::ToolCall(c) => {
                    names.insert(c.id.clone(), c.name.clone());
                    c.extra.clear();
                    c.function_extra.clear();
                }
                Part::ToolResult(r) => {
                    w.drop_extra("tool result", &r.extra);
                    r.extra.clear();
                    let name = names.get(&r.call_id).cloned().unwrap_or_default();
                    r.extra.insert("toolName".into(), Value::String(name));
                    for q in &mut r.parts {
                        if let Part::Text(TextPart { extra, .. }) = q {
                            extra.clear();
                        }
                    }
                }
                Part::Text(t) => {
                    w.drop_extra("text part", &t.extra);
                    t.extra.clear();
                }
                _ => {}
            }
        }
    }
    conv.tools = None;
    conv.extra.clear();
    conv.key_order.clear();
    conv
}
