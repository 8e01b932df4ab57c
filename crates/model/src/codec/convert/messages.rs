//! Messages: roles, content parts, tool calls and their results.
//!
//! OpenAI keeps each tool result in a `tool` message; Anthropic keeps them as
//! `tool_result` blocks at the start of the next user message. System
//! messages that open a conversation become Anthropic's top-level `system`;
//! later ones stay in `messages`, where the API takes them.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, json};

use super::{Warnings, plain_text, unrepresentable};
use crate::conversation::Family;
use crate::error::Result;
use crate::message::{
    Arguments, ContentForm, Extra, ImagePart, ImageSource, Message, Part, Role, ToolCall,
    ToolResult,
};

/// The messages in the target family.
pub(super) fn convert(messages: &[Message], to: Family, w: &mut Warnings) -> Result<Vec<Message>> {
    match to {
        Family::Anthropic => {
            let mut a = ToAnthropic::default();
            for (i, m) in messages.iter().enumerate() {
                w.drop_extra("message", &m.extra);
                a.message(i, m, w)?;
            }
            Ok(a.out)
        }
        Family::OpenAi => {
            let mut out = Vec::with_capacity(messages.len());
            for (i, m) in messages.iter().enumerate() {
                w.drop_extra("message", &m.extra);
                to_openai(i, m, &mut out, w)?;
            }
            Ok(out)
        }
        // Gemini goes through Anthropic (`super::gemini`).
        Family::Gemini => Err(unrepresentable(0, to, "a conversion not through Anthropic")),
    }
}

const A: Family = Family::Anthropic;
const O: Family = Family::OpenAi;

/// Walks OpenAI messages into Anthropic ones.
#[derive(Default)]
struct ToAnthropic {
    out: Vec<Message>,
    /// True until the first non-system message.
    started: bool,
    /// Anthropic wants call ids unique in the conversation; OpenAI runs may
    /// reuse an id in a later step. Reused ids get a suffix, and results
    /// follow the id of the call they answer.
    seen: HashSet<String>,
    renamed: HashMap<String, String>,
}

impl ToAnthropic {
    fn message(&mut self, i: usize, m: &Message, w: &mut Warnings) -> Result<()> {
        match &m.role {
            Role::System | Role::Developer => self.system(i, m, w),
            Role::Tool => self.tool(i, m, w),
            Role::User => self.user(i, m, w),
            Role::Assistant => self.assistant(i, m, w),
            Role::Function | Role::Other(_) => Err(unrepresentable(
                i,
                A,
                format!("role \"{}\"", m.role.as_str()),
            )),
        }
    }

    fn system(&mut self, i: usize, m: &Message, w: &mut Warnings) -> Result<()> {
        let mut msg = like(m, Role::System, m.form);
        msg.meta.inline_system = self.started;
        for p in &m.parts {
            match p {
                Part::Text(t) => msg.parts.push(plain_text(t, "system text", w)),
                _ => return Err(unrepresentable(i, A, "non-text system content")),
            }
        }
        self.out.push(msg);
        Ok(())
    }

    fn tool(&mut self, i: usize, m: &Message, w: &mut Warnings) -> Result<()> {
        self.started = true;
        let [Part::ToolResult(r)] = m.parts.as_slice() else {
            return Err(unrepresentable(i, A, "a tool message without one result"));
        };
        let result = Part::ToolResult(Box::new(ToolResult {
            call_id: self.renamed.get(&r.call_id).unwrap_or(&r.call_id).clone(),
            parts: user_parts(&r.parts, i, w)?,
            form: r.form,
            is_error: None,
            extra: Extra::new(),
        }));
        match self.results_message() {
            Some(prev) => prev.parts.push(result),
            None => {
                let mut msg = like(m, Role::User, ContentForm::Blocks);
                msg.parts.push(result);
                self.out.push(msg);
            }
        }
        Ok(())
    }

    fn user(&mut self, i: usize, m: &Message, w: &mut Warnings) -> Result<()> {
        self.started = true;
        let parts = user_parts(&m.parts, i, w)?;
        // Text that follows tool results joins their user message.
        if let Some(prev) = self.results_message() {
            prev.parts.extend(parts);
            return Ok(());
        }
        let mut msg = like(m, Role::User, m.form);
        msg.parts = parts;
        self.out.push(msg);
        Ok(())
    }

    fn assistant(&mut self, i: usize, m: &Message, w: &mut Warnings) -> Result<()> {
        self.started = true;
        let mut msg = like(m, Role::Assistant, m.form);
        for p in &m.parts {
            match p {
                Part::Text(t) => msg.parts.push(plain_text(t, "text part", w)),
                Part::Reasoning(_) => {
                    w.add("dropped unsigned reasoning (Anthropic needs signed thinking)")
                }
                Part::ToolCall(c) => {
                    msg.form = ContentForm::Blocks;
                    msg.parts
                        .push(Part::ToolCall(Box::new(self.call(i, c, w)?)));
                }
                _ => return Err(unrepresentable(i, A, "non-text assistant content")),
            }
        }
        let said_nothing = msg
            .parts
            .iter()
            .all(|p| matches!(p, Part::Text(t) if t.text.is_empty()));
        if said_nothing {
            // Only reasoning (which Anthropic cannot take unsigned) or empty
            // text: Anthropic refuses an empty turn, and it said nothing.
            w.add("dropped an assistant message with nothing Anthropic accepts (unsigned reasoning, empty text)");
            return Ok(());
        }
        self.out.push(msg);
        Ok(())
    }

    /// A `tool_use` block: JSON input, an id unique in the conversation.
    fn call(&mut self, i: usize, c: &ToolCall, w: &mut Warnings) -> Result<ToolCall> {
        let input = match &c.arguments {
            Arguments::Json(s) => serde_json::from_str(s).map_err(|e| {
                unrepresentable(
                    i,
                    A,
                    format!("arguments of call {} are not JSON: {e}", c.id),
                )
            })?,
            Arguments::Value(v) => v.clone(),
            Arguments::Custom(_) => {
                return Err(unrepresentable(i, A, format!("custom tool call {}", c.id)));
            }
        };
        let mut id = c.id.clone();
        let mut n = 1;
        while !self.seen.insert(id.clone()) {
            n += 1;
            id = format!("{}_{n}", c.id);
        }
        if id != c.id {
            w.add("renamed tool call ids reused across steps (Anthropic wants them unique)");
            self.renamed.insert(c.id.clone(), id.clone());
        } else {
            self.renamed.remove(&c.id);
        }
        Ok(ToolCall {
            id,
            name: c.name.clone(),
            arguments: Arguments::Value(input),
            extra: Extra::new(),
            function_extra: Extra::new(),
        })
    }

    /// The last message when it is a user message of tool results only.
    fn results_message(&mut self) -> Option<&mut Message> {
        self.out.last_mut().filter(|prev| {
            prev.role == Role::User
                && !prev.parts.is_empty()
                && prev.parts.iter().all(|p| matches!(p, Part::ToolResult(_)))
        })
    }
}

/// An empty message with `m`'s meta.
fn like(m: &Message, role: Role, form: ContentForm) -> Message {
    Message {
        role,
        form,
        meta: m.meta.clone(),
        ..Message::default()
    }
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
                Ok(Part::Image(Box::new(ImagePart {
                    source,
                    source_extra: Extra::new(),
                    extra: Extra::new(),
                })))
            }
            _ => Err(unrepresentable(
                i,
                A,
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

/// One Anthropic message as OpenAI messages (tool results become `tool` messages).
fn to_openai(i: usize, m: &Message, out: &mut Vec<Message>, w: &mut Warnings) -> Result<()> {
    match m.role {
        Role::System => {
            let mut msg = like(m, Role::System, m.form);
            for p in &m.parts {
                match p {
                    Part::Text(t) => msg.parts.push(plain_text(t, "system block", w)),
                    _ => return Err(unrepresentable(i, O, "non-text system content")),
                }
            }
            out.push(msg);
        }
        Role::User => openai_user(i, m, out, w)?,
        Role::Assistant => out.push(openai_assistant(i, m, w)?),
        _ => {
            return Err(unrepresentable(
                i,
                O,
                format!("role \"{}\"", m.role.as_str()),
            ));
        }
    }
    Ok(())
}

fn openai_user(i: usize, m: &Message, out: &mut Vec<Message>, w: &mut Warnings) -> Result<()> {
    let mut rest = like(m, Role::User, m.form);
    for p in &m.parts {
        match p {
            Part::ToolResult(r) => out.push(tool_message(r, m, i, w)?),
            Part::Text(t) => rest.parts.push(plain_text(t, "text block", w)),
            Part::Image(img) => {
                w.drop_extra("image", &img.extra);
                rest.parts.push(Part::Image(Box::new(ImagePart {
                    source: img.source.clone(),
                    source_extra: Extra::new(),
                    extra: Extra::new(),
                })))
            }
            _ => {
                return Err(unrepresentable(
                    i,
                    O,
                    "user content other than text, images and tool results",
                ));
            }
        }
    }
    if !rest.parts.is_empty() {
        out.push(rest);
    }
    Ok(())
}

fn openai_assistant(i: usize, m: &Message, w: &mut Warnings) -> Result<Message> {
    let mut msg = like(m, Role::Assistant, ContentForm::Text);
    for p in &m.parts {
        match p {
            Part::Text(t) => msg.parts.push(plain_text(t, "text block", w)),
            Part::Reasoning(_) => w.add("dropped thinking blocks (OpenAI has no equivalent input)"),
            Part::ToolCall(c) => {
                let mut extra = Map::new();
                extra.insert("type".into(), json!("function"));
                msg.parts.push(Part::ToolCall(Box::new(ToolCall {
                    id: c.id.clone(),
                    name: c.name.clone(),
                    arguments: Arguments::Json(c.arguments.to_json_text().into_owned()),
                    extra: extra.into(),
                    function_extra: Extra::new(),
                })));
            }
            _ => {
                return Err(unrepresentable(
                    i,
                    O,
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
    Ok(msg)
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
                    O,
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
    let mut msg = like(m, Role::Tool, ContentForm::Absent);
    msg.parts.push(Part::ToolResult(Box::new(ToolResult {
        call_id: r.call_id.clone(),
        parts,
        form,
        is_error: None,
        extra: Extra::new(),
    })));
    Ok(msg)
}
