//! OpenHands V1 conversations: the SDK's events, in order.
//!
//! A conversation is a folder of `event_service/events/event-NNNNN-*.json`,
//! one event per file, its type in `kind`; the caller reads them in order
//! into one JSON array. The events become OpenAI chat messages, as the
//! agent sent them to its model:
//!
//! - `SystemPromptEvent`: the system message, and the tool declarations;
//! - `MessageEvent`: its `llm_message` (the user's task, the agent's words);
//! - `ActionEvent`: a tool call, its `thought` as the text before it; the
//!   actions of one model response (`llm_response_id`) are one assistant
//!   message;
//! - `ObservationEvent`: the call's result, as the agent's model read it
//!   (a command's output and exit note, an editor's output or error);
//! - `Condensation`: OpenHands replaced the events it names
//!   (`forgotten_event_ids`) with an LLM summary at `summary_offset` of
//!   what the agent saw. The summary goes in place as a user message marked
//!   [`Meta::compact_summary`](crate::Meta::compact_summary), and a
//!   [`CompactBoundary`] records what the agent saw right after: the
//!   messages it kept and the summary, in order.
//!
//! Anything else (other event kinds, a result whose call is not in the
//! log) is skipped; a call whose result never came is answered as
//! interrupted, as Claude Code logs are, so the conversation stays one the
//! API accepts.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::openai::{decode_tool, decode_tool_call};
use crate::conversation::{CompactBoundary, Conversation, Family, Format, Tool};
use crate::error::{Error, Result};
use crate::message::{ContentForm, Extra, Message, Meta, Part, Role, ToolResult};

/// What answers a call whose observation the log does not hold.
const INTERRUPTED: &str = "[the tool call was interrupted: no observation was logged]";

/// Decodes a conversation's events, in order.
pub(crate) fn decode(events: Vec<Value>) -> Result<Conversation> {
    let mut r = Reader::default();
    for (i, e) in events.into_iter().enumerate() {
        r.event(e, i)?;
    }
    r.close_actions();
    r.answer_missing();
    Ok(Conversation {
        format: Format::OpenHands,
        family: Family::OpenAi,
        model: None,
        tools: r.tools,
        messages: r.out,
        extra: Extra::new(),
        boundaries: r.boundaries,
        label: None,
        key_order: Vec::new(),
    })
}

/// True for a JSON array that reads as OpenHands events.
pub(crate) fn looks_like(items: &[Value]) -> bool {
    items.first().is_some_and(|e| {
        e.get("kind")
            .and_then(Value::as_str)
            .is_some_and(|k| k.ends_with("Event"))
            && e.get("source").is_some()
    })
}

#[derive(Default)]
struct Reader {
    out: Vec<Message>,
    tools: Option<Vec<Tool>>,
    boundaries: Vec<CompactBoundary>,
    /// The message each event became (by event id).
    message_of: HashMap<String, usize>,
    /// The assistant message being assembled and its model response id.
    open: Option<(String, Message)>,
    /// Message index of each call, by call id, until its result comes.
    calls: HashMap<String, usize>,
    /// What the agent sees now: the message of each event in it, in order
    /// (the actions of one response name one message).
    view: Vec<usize>,
    /// The summary in the view, if any (a later condensation replaces it).
    summary: Option<usize>,
}

impl Reader {
    fn event(&mut self, e: Value, i: usize) -> Result<()> {
        let at = || format!("events[{i}]");
        let Value::Object(mut e) = e else {
            return Err(Error::shape(at(), "an event object"));
        };
        let kind = e
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let id = e
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        match kind.as_str() {
            "ActionEvent" => return self.action(e, id, &at),
            "SystemPromptEvent" => {
                self.close_actions();
                let text = e.get("system_prompt").map(text_of).unwrap_or_default();
                if let Some(Value::Array(tools)) = e.shift_remove("tools") {
                    self.tools = Some(tools.into_iter().map(decode_tool).collect());
                }
                self.push(id, Message::text(Role::System, text));
            }
            "MessageEvent" => {
                self.close_actions();
                let Some(Value::Object(m)) = e.shift_remove("llm_message") else {
                    return Err(Error::shape(at(), "an llm_message object"));
                };
                let role = match m.get("role").and_then(Value::as_str) {
                    Some("assistant") => Role::Assistant,
                    Some("system") => Role::System,
                    _ => Role::User,
                };
                let text = m.get("content").map(text_of).unwrap_or_default();
                self.push(id, Message::text(role, text));
            }
            "ObservationEvent" => {
                self.close_actions();
                self.observation(&e, id);
            }
            "Condensation" => {
                self.close_actions();
                self.condensation(&e);
            }
            _ => {}
        }
        Ok(())
    }

    /// A tool call: joins the open assistant message when it answers the
    /// same model response.
    fn action(
        &mut self,
        mut e: Map<String, Value>,
        id: String,
        at: &dyn Fn() -> String,
    ) -> Result<()> {
        let response = e
            .get("llm_response_id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let Some(call) = e.shift_remove("tool_call") else {
            return Err(Error::shape(at(), "a tool_call"));
        };
        let mut call = decode_tool_call(call, &|| format!("{}.tool_call", at()))?;
        // Streaming's `index` is the log's, not the API's.
        call.extra.shift_remove("index");
        let thought = e.get("thought").map(text_of).unwrap_or_default();
        let same = matches!(&self.open, Some((r, _)) if !response.is_empty() && *r == response);
        if !same {
            self.close_actions();
            let m = match thought.is_empty() {
                true => Message {
                    role: Role::Assistant,
                    form: ContentForm::Null,
                    ..Message::default()
                },
                false => Message::text(Role::Assistant, thought),
            };
            self.open = Some((response, m));
        } else if let Some((_, m)) = &mut self.open
            && !thought.is_empty()
        {
            m.parts.insert(0, Part::text(thought));
        }
        // No other message goes out while one is open: this is its index.
        let index = self.out.len();
        self.calls.insert(call.id.clone(), index);
        self.message_of.insert(id, index);
        self.view.push(index);
        if let Some((_, m)) = &mut self.open {
            m.parts.push(Part::ToolCall(Box::new(call)));
        }
        Ok(())
    }

    /// The open assistant message goes out.
    fn close_actions(&mut self) {
        if let Some((_, m)) = self.open.take() {
            self.out.push(m);
        }
    }

    fn push(&mut self, id: String, m: Message) {
        let index = self.out.len();
        self.message_of.insert(id, index);
        self.view.push(index);
        self.out.push(m);
    }

    /// A call's result, as the model read it; one whose call is not in
    /// the log is left out.
    fn observation(&mut self, e: &Map<String, Value>, id: String) {
        let Some(call_id) = e.get("tool_call_id").and_then(Value::as_str) else {
            return;
        };
        if self.calls.remove(call_id).is_none() {
            return;
        }
        let (text, failed) = observed(e.get("observation").unwrap_or(&Value::Null));
        let mut m = Message::text(Role::Tool, "");
        m.parts = vec![Part::ToolResult(Box::new(ToolResult {
            call_id: call_id.to_owned(),
            parts: vec![Part::text(text)],
            form: ContentForm::Text,
            is_error: failed.then_some(true),
            extra: Extra::new(),
        }))];
        m.form = ContentForm::Absent;
        self.push(id, m);
    }

    /// What the agent saw becomes its kept messages with the summary at
    /// its offset.
    fn condensation(&mut self, e: &Map<String, Value>) {
        let forgotten: Vec<&str> = e
            .get("forgotten_event_ids")
            .and_then(Value::as_array)
            .map(|ids| ids.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut gone: Vec<usize> = forgotten
            .iter()
            .filter_map(|id| self.message_of.get(*id).copied())
            .collect();
        // An id the log does not hold is the earlier summary's own.
        if forgotten
            .iter()
            .any(|id| !self.message_of.contains_key(*id))
            && let Some(s) = self.summary
        {
            gone.push(s);
        }
        self.view.retain(|i| !gone.contains(i));
        let text = e.get("summary").map(text_of).unwrap_or_default();
        let index = self.out.len();
        let mut note = Message::text(Role::User, text);
        note.meta = Meta {
            compact_summary: true,
            ..Meta::default()
        };
        self.out.push(note);
        let offset = e
            .get("summary_offset")
            .and_then(Value::as_u64)
            .map_or(self.view.len(), |o| o as usize)
            .min(self.view.len());
        self.view.insert(offset, index);
        self.summary = Some(index);
        let mut view = self.view.clone();
        view.dedup();
        let view = matched(&self.out, view);
        self.boundaries.push(CompactBoundary {
            index,
            pre_tokens: None,
            trigger: Some("condenser".to_owned()),
            view,
        });
    }

    /// Calls no observation answered (a run cut short) get one saying so,
    /// right after their assistant message, unless it is the last.
    fn answer_missing(&mut self) {
        let mut missing: Vec<(String, usize)> = self.calls.drain().collect();
        missing.sort_by(|a, b| b.1.cmp(&a.1).then(b.0.cmp(&a.0)));
        let last = self.out.len().saturating_sub(1);
        for (call_id, at) in missing {
            if at == last {
                continue;
            }
            let mut m = Message::text(Role::Tool, "");
            m.parts = vec![Part::ToolResult(Box::new(ToolResult {
                call_id,
                parts: vec![Part::text(INTERRUPTED)],
                form: ContentForm::Text,
                is_error: Some(true),
                extra: Extra::new(),
            }))];
            m.form = ContentForm::Absent;
            self.out.insert(at + 1, m);
            for b in &mut self.boundaries {
                b.shift_after(at);
            }
        }
    }
}

/// `view` without the calls whose results it forgot and the results whose
/// calls it forgot, as OpenHands leaves them out of what its model reads
/// (a condensation can keep one side of a pair).
fn matched(out: &[Message], mut view: Vec<usize>) -> Vec<usize> {
    loop {
        let calls: Vec<&str> = view
            .iter()
            .flat_map(|&i| out[i].tool_calls())
            .map(|c| c.id.as_str())
            .collect();
        let results: Vec<&str> = view
            .iter()
            .flat_map(|&i| out[i].tool_results())
            .map(|r| r.call_id.as_str())
            .collect();
        let before = view.len();
        view.retain(|&i| {
            let m = &out[i];
            m.tool_results()
                .all(|r| calls.contains(&r.call_id.as_str()))
                && m.tool_calls().all(|c| results.contains(&c.id.as_str()))
        });
        if view.len() == before {
            return view;
        }
    }
}

/// The text of a content value: a string, a text block, or blocks.
fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(items) => items
            .iter()
            .map(text_of)
            .filter(|t| !t.is_empty())
            .collect::<Vec<_>>()
            .join("\n"),
        Value::Object(m) => m
            .get("text")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        _ => String::new(),
    }
}

/// An observation as the agent's model read it, and whether it failed.
fn observed(o: &Value) -> (String, bool) {
    let field = |k: &str| o.get(k).map(text_of).filter(|t| !t.is_empty());
    if let Some(error) = o
        .get("error")
        .and_then(Value::as_str)
        .filter(|e| !e.is_empty())
    {
        return (format!("ERROR:\n{error}"), true);
    }
    let metadata = o.get("metadata");
    let exit = metadata
        .and_then(|m| m.get("exit_code"))
        .and_then(Value::as_i64);
    // A command with no output reads as its exit note alone, as the agent
    // saw it; only an observation of no known shape is shown whole.
    let known = ["output", "content", "message"];
    let text = known
        .into_iter()
        .find_map(field)
        .or_else(|| known.iter().any(|k| o.get(k).is_some()).then(String::new))
        .unwrap_or_else(|| o.to_string());
    let suffix = metadata
        .and_then(|m| m.get("suffix"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    (format!("{text}{suffix}"), exit.is_some_and(|c| c != 0))
}
