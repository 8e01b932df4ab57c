//! Responses API input ⇄ the OpenAI Chat Completions family, the bridge
//! to every other format.
//!
//! The two share roles, content and function tools; they differ in where
//! a turn's pieces go. A Responses turn is several items (reasoning,
//! messages, one item per call) where Chat Completions has one assistant
//! message with its `tool_calls`; outputs are items where Chat has `tool`
//! messages; `instructions` is a system message. Item bookkeeping (`id`,
//! `status`) is dropped silently. Encrypted reasoning has no place in Chat
//! Completions and is dropped (listed): it is the model's private state,
//! not what it is asked. Hosted and custom tool calls and their outputs,
//! `item_reference`, compaction items and non-function tool declarations
//! cannot be carried and are an [`Error::Unrepresentable`].

use serde_json::Value;

use super::{Warnings, target_name, unrepresentable};
use crate::codec::continues_turn;
use crate::conversation::{Conversation, Family, Format, FunctionTool, Tool};
use crate::error::{Error, Result};
use crate::message::{Arguments, ContentForm, Extra, Message, Part, Role, ToolCall, ToolResult};

/// Item and part fields that are bookkeeping, dropped without a warning.
const BOOKKEEPING: [&str; 3] = ["type", "id", "status"];

/// The target name of errors in conversions to the Responses API.
const RESPONSES: &str = "the Responses API";

/// Request fields both APIs take as they are.
const SHARED_FIELDS: [&str; 10] = [
    "model",
    "stream",
    "temperature",
    "top_p",
    "parallel_tool_calls",
    "metadata",
    "user",
    "service_tier",
    "prompt_cache_key",
    "safety_identifier",
];

/// A Responses conversation as Chat Completions messages.
pub(super) fn to_openai(conv: &Conversation, w: &mut Warnings) -> Result<Conversation> {
    let mut out = conv.clone_envelope();
    out.format = Format::Chat;
    out.key_order.clear();
    out.extra = envelope(&conv.extra, "max_output_tokens", "max_completion_tokens", w);
    out.tools = tools(conv.tools.as_deref(), Family::OpenAi, w)?;
    for (i, m) in conv.messages.iter().enumerate() {
        item_to_chat(i, m, &mut out.messages, w)?;
    }
    for m in &mut out.messages {
        if m.role == Role::Assistant {
            m.form = assistant_form(m);
        }
    }
    Ok(out)
}

/// One Responses item into the Chat messages built so far.
fn item_to_chat(i: usize, m: &Message, out: &mut Vec<Message>, w: &mut Warnings) -> Result<()> {
    let unrepresentable = |what: String| unrepresentable(i, Family::OpenAi, what);
    let extends_turn =
        m.meta.continues_turn && out.last().is_some_and(|p| p.role == Role::Assistant);
    match (&m.role, m.parts.as_slice()) {
        (Role::Assistant, [Part::Opaque(item)]) if item_type(item) == Some("reasoning") => {
            w.add("dropped reasoning items (Chat Completions has no place for them)");
        }
        (_, [Part::Opaque(item)]) => {
            let kind = item_type(item).unwrap_or("untyped");
            return Err(unrepresentable(format!("a Responses \"{kind}\" item")));
        }
        (Role::Assistant, [Part::ToolCall(c)]) => {
            let Arguments::Json(_) = c.arguments else {
                return Err(unrepresentable("a custom tool call".into()));
            };
            let mut call = c.clone();
            call.extra = Extra::from_iter([("type".to_owned(), Value::from("function"))]);
            match out.last_mut().filter(|_| extends_turn) {
                Some(turn) => turn.parts.push(Part::ToolCall(call)),
                None => out.push(chat_message(Role::Assistant, vec![Part::ToolCall(call)])),
            }
        }
        (Role::Tool, [Part::ToolResult(r)]) => {
            bookkeeping_only(&m.extra, "output item", w);
            let mut result = r.clone();
            result.extra.clear();
            result.parts = content(i, &r.parts, target_name(Family::OpenAi), w)?;
            out.push(chat_message(Role::Tool, vec![Part::ToolResult(result)]));
        }
        (Role::Other(_) | Role::Function, _) => {
            return Err(unrepresentable(format!("role \"{}\"", m.role.as_str())));
        }
        _ if m.has_tool_calls() || m.has_tool_results() => {
            return Err(unrepresentable("a call or output inside a message".into()));
        }
        (role, parts) => {
            bookkeeping_only(&m.extra, "message", w);
            let parts = content(i, parts, target_name(Family::OpenAi), w)?;
            match out.last_mut().filter(|_| extends_turn) {
                Some(turn) => turn.parts.extend(parts),
                None => {
                    let mut msg = chat_message(role.clone(), parts);
                    msg.form = if m.form == ContentForm::Text {
                        ContentForm::Text
                    } else {
                        ContentForm::Blocks
                    };
                    out.push(msg);
                }
            }
        }
    }
    Ok(())
}

/// A Chat Completions conversation as Responses input items.
pub(super) fn from_openai(conv: Conversation, w: &mut Warnings) -> Result<Conversation> {
    let mut out = conv.clone_envelope();
    out.format = Format::Responses;
    out.key_order.clear();
    let mut extra = envelope(&conv.extra, "max_completion_tokens", "max_output_tokens", w);
    if let Some(v) = extra.shift_remove("max_tokens") {
        extra.entry("max_output_tokens").or_insert(v);
    }
    out.extra = extra;
    out.tools = tools(conv.tools.as_deref(), Family::OpenAi, w)?
        .map(|t| t.into_iter().map(flat_function).collect());
    for (i, m) in conv.messages.iter().enumerate() {
        let bad = |what: String| Error::Unrepresentable {
            index: i,
            target: RESPONSES,
            reason: what,
        };
        w.drop_extra("message", &m.extra);
        match &m.role {
            Role::System | Role::Developer | Role::User => {
                let mut msg = chat_message(m.role.clone(), content(i, &m.parts, RESPONSES, w)?);
                msg.form = m.form;
                if m.has_tool_calls() || m.has_tool_results() {
                    return Err(bad(
                        "a tool call or result outside an assistant or tool message".into(),
                    ));
                }
                out.messages.push(msg);
            }
            Role::Assistant => {
                if m.parts.iter().any(|p| matches!(p, Part::Reasoning(_))) {
                    w.add("dropped reasoning text (the Responses API takes back only its own encrypted reasoning items)");
                }
                let (calls, said): (Vec<&Part>, Vec<&Part>) = m
                    .parts
                    .iter()
                    .filter(|p| !matches!(p, Part::Reasoning(_)))
                    .partition(|p| matches!(p, Part::ToolCall(_)));
                let said = content(
                    i,
                    &said.into_iter().cloned().collect::<Vec<_>>(),
                    RESPONSES,
                    w,
                )?;
                if !said.is_empty() || calls.is_empty() {
                    let mut msg = chat_message(Role::Assistant, said);
                    msg.form = ContentForm::Blocks;
                    out.messages.push(msg);
                }
                for c in calls {
                    let Part::ToolCall(c) = c else { continue };
                    let arguments = match &c.arguments {
                        Arguments::Value(v) => Arguments::Json(v.to_string()),
                        other => other.clone(),
                    };
                    let call = ToolCall {
                        arguments,
                        extra: Extra::new(),
                        function_extra: Extra::new(),
                        ..(**c).clone()
                    };
                    let mut msg =
                        chat_message(Role::Assistant, vec![Part::ToolCall(Box::new(call))]);
                    msg.form = ContentForm::Absent;
                    out.messages.push(msg);
                }
            }
            Role::Tool => {
                for p in &m.parts {
                    let Part::ToolResult(r) = p else {
                        return Err(bad("tool message content that is not a result".into()));
                    };
                    let result = ToolResult {
                        parts: content(i, &r.parts, RESPONSES, w)?,
                        extra: Extra::new(),
                        ..(**r).clone()
                    };
                    let mut msg =
                        chat_message(Role::Tool, vec![Part::ToolResult(Box::new(result))]);
                    msg.form = ContentForm::Absent;
                    out.messages.push(msg);
                }
            }
            Role::Function | Role::Other(_) => {
                return Err(bad(format!("role \"{}\"", m.role.as_str())));
            }
        }
    }
    for k in 0..out.messages.len() {
        let continues =
            continues_turn(k.checked_sub(1).map(|p| &out.messages[p]), &out.messages[k]);
        out.messages[k].meta.continues_turn = continues;
    }
    Ok(out)
}

/// A message of `role` with `parts` and nothing else.
fn chat_message(role: Role, parts: Vec<Part>) -> Message {
    Message {
        role,
        parts,
        ..Message::default()
    }
}

/// Text and images without their format's part fields; anything else
/// cannot be carried.
fn content(i: usize, parts: &[Part], target: &'static str, w: &mut Warnings) -> Result<Vec<Part>> {
    let bad = |reason: String| Error::Unrepresentable {
        index: i,
        target,
        reason,
    };
    parts
        .iter()
        .map(|p| match p {
            Part::Text(t) => {
                bookkeeping_only(&t.extra, "text part", w);
                Ok(Part::text(t.text.clone()))
            }
            Part::Image(img) => {
                let mut img = img.clone();
                bookkeeping_only(&img.extra, "image part", w);
                img.extra.clear();
                img.source_extra
                    .retain(|k, v| k == "detail" && !v.is_null());
                Ok(Part::Image(img))
            }
            Part::Opaque(v) => {
                let kind = item_type(v).unwrap_or("untyped");
                Err(bad(format!("a \"{kind}\" content part")))
            }
            Part::ToolCall(_) | Part::ToolResult(_) | Part::Reasoning(_) => {
                Err(bad("a call, result or reasoning inside content".into()))
            }
        })
        .collect()
}

/// Reports the fields of `extra` that say more than bookkeeping.
fn bookkeeping_only(extra: &Extra, what: &str, w: &mut Warnings) {
    let said: Extra = extra
        .iter()
        .filter(|(k, v)| !v.is_null() && !BOOKKEEPING.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    w.drop_extra(what, &said);
}

/// An assistant message's Chat form: a string for one plain text, `null`
/// beside calls with nothing said, parts otherwise.
fn assistant_form(m: &Message) -> ContentForm {
    let mut said = m.parts.iter().filter(|p| !matches!(p, Part::ToolCall(_)));
    match (said.next(), said.next()) {
        (None, _) if m.has_tool_calls() => ContentForm::Null,
        (None, _) => ContentForm::Text,
        (Some(Part::Text(_)), None) => ContentForm::Text,
        _ => ContentForm::Blocks,
    }
}

/// The request fields of one API in the other: the shared ones as they
/// are, the output limit renamed (`from` → `to`), `tool_choice` rewritten;
/// the rest dropped and listed.
fn envelope(extra: &Extra, from: &str, to: &str, w: &mut Warnings) -> Extra {
    let mut out = Extra::new();
    let mut dropped = Vec::new();
    for (k, v) in extra {
        match k.as_str() {
            _ if v.is_null() => {}
            k2 if SHARED_FIELDS.contains(&k2) => {
                out.insert(k.clone(), v.clone());
            }
            "tool_choice" => {
                out.insert(k.clone(), tool_choice(v, to == "max_output_tokens"));
            }
            "max_tokens" if to == "max_output_tokens" => {
                out.insert(k.clone(), v.clone());
            }
            k2 if k2 == from => {
                out.insert(to.to_owned(), v.clone());
            }
            "instructions" | "input" | "messages" | "tools" => {}
            _ => dropped.push(k.as_str()),
        }
    }
    w.dropped_fields(&dropped);
    out
}

/// A named function choice in the other API's shape (`{"type": "function",
/// "name"}` for Responses, with a `function` object for Chat); the
/// `auto`/`none`/`required` strings are the same.
fn tool_choice(v: &Value, to_responses: bool) -> Value {
    let name = v.pointer("/function/name").or_else(|| v.get("name"));
    match (v, name) {
        (Value::Object(_), Some(name)) if to_responses => {
            serde_json::json!({"type": "function", "name": name})
        }
        (Value::Object(_), Some(name)) => {
            serde_json::json!({"type": "function", "function": {"name": name}})
        }
        _ => v.clone(),
    }
}

/// Function tool declarations; any other cannot be carried.
fn tools(tools: Option<&[Tool]>, to: Family, w: &mut Warnings) -> Result<Option<Vec<Tool>>> {
    let Some(tools) = tools else {
        return Ok(None);
    };
    tools
        .iter()
        .map(|t| match t {
            Tool::Function(f) => {
                let mut extra: Extra = f
                    .extra
                    .iter()
                    .chain(&f.function_extra)
                    .filter(|(k, v)| !v.is_null() && k.as_str() != "type")
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                let strict = extra.shift_remove("strict");
                w.drop_extra("tool", &extra);
                Ok(Tool::Function(FunctionTool {
                    name: f.name.clone(),
                    description: f.description.clone(),
                    parameters: f.parameters.clone(),
                    extra: Extra::from_iter([("type".to_owned(), Value::from("function"))]),
                    function_extra: strict
                        .map(|s| ("strict".to_owned(), s))
                        .into_iter()
                        .collect(),
                }))
            }
            Tool::Opaque(v) => {
                let kind = item_type(v).unwrap_or("untyped");
                Err(Error::Unrepresentable {
                    index: 0,
                    target: target_name(to),
                    reason: format!(
                        "a \"{kind}\" tool declaration (only function tools carry over)"
                    ),
                })
            }
        })
        .collect::<Result<_>>()
        .map(Some)
}

/// A Chat function declaration as a flat Responses one (`strict` beside `name`).
fn flat_function(t: Tool) -> Tool {
    match t {
        Tool::Function(mut f) => {
            f.extra.clear();
            f.extra.extend(std::mem::take(&mut f.function_extra));
            Tool::Function(f)
        }
        other => other,
    }
}

fn item_type(v: &Value) -> Option<&str> {
    v.get("type").and_then(Value::as_str)
}
