//! Structural validation against each provider's rules for tool pairing and roles.
//!
//! OpenAI: every `tool_calls` entry is answered by exactly one `tool` message,
//! and those come right after the assistant message, before anything else.
//! Anthropic: every `tool_use` is answered by a `tool_result` block in the
//! very next message, which is a user message whose content starts with the
//! results; messages are `user`, `assistant` and `system` (the API takes
//! system messages inside `messages`, as Claude Code sends them), but not
//! between a tool call and its results.
//! Both: call ids are unique and no result answers a call that is not open.

use std::collections::HashSet;
use std::fmt;

use serde_json::Value;

use crate::conversation::{Conversation, Family};
use crate::message::{Message, Part, Role};

/// A rule a conversation breaks.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Rule {
    /// The role is not accepted by the API in this position.
    RoleNotAllowed(String),
    /// A tool call has no result where the API requires one.
    UnansweredCall,
    /// The last assistant message's calls have no results: the log ended
    /// mid-step. Sending it as is would be rejected; an agent log may end so.
    PendingFinalCall,
    /// A result that answers no open call.
    OrphanResult,
    /// A call answered more than once.
    DuplicateResult,
    /// Two calls share an id.
    DuplicateCallId,
    /// A `tool_result` block after other content in its message (Anthropic).
    ResultNotFirst,
    /// A part in a message whose role cannot carry it (e.g. a tool call from the user).
    MisplacedPart,
    /// A message with no content, which the API rejects (Anthropic).
    EmptyContent,
    /// A reasoning item not followed by an item of the model's turn
    /// (Responses: "provided without its required following item").
    ReasoningNotFollowed,
    /// A model turn with function calls right after another model turn
    /// (Gemini: "function call turn comes immediately after a user turn or
    /// after a function response turn"; a first turn may call, as Gemini
    /// CLI's side requests do).
    CallNotAfterUser,
}

impl Rule {
    /// Stable kebab-case code, used in JSON output.
    pub fn code(&self) -> &'static str {
        match self {
            Rule::RoleNotAllowed(_) => "role-not-allowed",
            Rule::UnansweredCall => "unanswered-call",
            Rule::PendingFinalCall => "pending-final-call",
            Rule::OrphanResult => "orphan-result",
            Rule::DuplicateResult => "duplicate-result",
            Rule::DuplicateCallId => "duplicate-call-id",
            Rule::ResultNotFirst => "result-not-first",
            Rule::MisplacedPart => "misplaced-part",
            Rule::EmptyContent => "empty-content",
            Rule::ReasoningNotFollowed => "reasoning-not-followed",
            Rule::CallNotAfterUser => "call-not-after-user",
        }
    }
}

/// One broken rule, where it is broken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Index of the offending message in [`Conversation::messages`].
    pub index: usize,
    /// Its index in the wire body's `messages` array (differs from `index`
    /// for Anthropic bodies, whose system prompt is not in `messages`).
    pub wire_index: usize,
    /// The tool call id concerned, if any.
    pub id: Option<String>,
    /// The rule.
    pub rule: Rule,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "messages[{}]: ", self.wire_index)?;
        let id = self.id.as_deref().unwrap_or("?");
        match &self.rule {
            Rule::RoleNotAllowed(r) => write!(f, "role \"{r}\" is not allowed here"),
            Rule::UnansweredCall => {
                write!(f, "tool call {id} has no result where the API needs it")
            }
            Rule::PendingFinalCall => write!(
                f,
                "final tool call {id} has no result (the log ends mid-step)"
            ),
            Rule::OrphanResult => write!(f, "result for {id} answers no open tool call"),
            Rule::DuplicateResult => write!(f, "tool call {id} is answered more than once"),
            Rule::DuplicateCallId => write!(f, "tool call id {id} is used twice"),
            Rule::ResultNotFirst => write!(f, "tool_result for {id} comes after other content"),
            Rule::MisplacedPart => write!(f, "content part not allowed for this role"),
            Rule::EmptyContent => write!(f, "message has no content"),
            Rule::ReasoningNotFollowed => write!(
                f,
                "reasoning item {id} was provided without its required following item"
            ),
            Rule::CallNotAfterUser => write!(
                f,
                "a function call turn must come right after a user turn or a function response"
            ),
        }?;
        Ok(())
    }
}

/// Serialized as `{"index", "id", "rule", "message"}`, `index` being the
/// position in the wire body's `messages` array.
impl serde::Serialize for Violation {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("Violation", 4)?;
        st.serialize_field("index", &self.wire_index)?;
        st.serialize_field("id", &self.id)?;
        st.serialize_field("rule", self.rule.code())?;
        st.serialize_field("message", &self.to_string())?;
        st.end()
    }
}

/// Checks a conversation against the rules of its wire family.
pub fn validate(conv: &Conversation) -> Vec<Violation> {
    if conv.format == crate::conversation::Format::Responses {
        return validate_responses(&conv.messages, conv.wire_offset());
    }
    match conv.family {
        Family::OpenAi => validate_openai(&conv.messages),
        Family::Anthropic => validate_anthropic(&conv.messages),
        Family::Gemini => validate_gemini(&conv.messages),
    }
}

#[derive(Default)]
struct Pairing {
    /// Anthropic wants ids unique across the conversation; OpenAI only among
    /// the calls of one step (recorded runs reuse ids across steps).
    ids_unique_globally: bool,
    out: Vec<Violation>,
    /// Messages before the wire `messages` array (Anthropic system prompt).
    offset: usize,
    seen_calls: HashSet<String>,
    answered: HashSet<String>,
    /// Open calls and the index of the message that made them.
    pending: Vec<String>,
    pending_at: usize,
}

impl Pairing {
    fn push(&mut self, index: usize, id: Option<&str>, rule: Rule) {
        self.out.push(Violation {
            index,
            wire_index: index.saturating_sub(self.offset),
            id: id.map(str::to_owned),
            rule,
        });
    }

    fn open(&mut self, index: usize, m: &Message) {
        self.close_unanswered();
        self.pending_at = index;
        if !self.ids_unique_globally {
            self.seen_calls.clear();
        }
        for c in m.tool_calls() {
            if !self.seen_calls.insert(c.id.clone()) {
                self.push(index, Some(&c.id), Rule::DuplicateCallId);
            }
            self.pending.push(c.id.clone());
        }
    }

    fn answer(&mut self, index: usize, id: &str) {
        if let Some(pos) = self.pending.iter().position(|p| p == id) {
            self.pending.remove(pos);
            self.answered.insert(id.to_owned());
        } else if self.answered.contains(id) {
            self.push(index, Some(id), Rule::DuplicateResult);
        } else {
            self.push(index, Some(id), Rule::OrphanResult);
        }
    }

    fn close_unanswered(&mut self) {
        let at = self.pending_at;
        for id in std::mem::take(&mut self.pending) {
            self.push(at, Some(&id), Rule::UnansweredCall);
        }
    }

    fn finish(mut self) -> Vec<Violation> {
        let at = self.pending_at;
        for id in std::mem::take(&mut self.pending) {
            self.push(at, Some(&id), Rule::PendingFinalCall);
        }
        self.out.sort_by_key(|v| v.index);
        self.out
    }
}

fn validate_openai(messages: &[Message]) -> Vec<Violation> {
    let mut p = Pairing::default();
    let mut legacy_open: Option<usize> = None;
    for (i, m) in messages.iter().enumerate() {
        match &m.role {
            Role::Assistant => {
                if let Some(at) = legacy_open.take() {
                    p.push(at, None, Rule::UnansweredCall);
                }
                p.open(i, m);
                if m.extra.get("function_call").is_some_and(Value::is_object) {
                    legacy_open = Some(i);
                }
                if m.has_tool_results() {
                    p.push(i, None, Rule::MisplacedPart);
                }
            }
            Role::Tool => {
                for r in m.tool_results() {
                    p.answer(i, &r.call_id);
                }
            }
            Role::Function => {
                if legacy_open.take().is_none() {
                    p.push(i, None, Rule::OrphanResult);
                }
            }
            other => {
                p.close_unanswered();
                if let Some(at) = legacy_open.take() {
                    p.push(at, None, Rule::UnansweredCall);
                }
                if let Role::Other(r) = other {
                    p.push(i, None, Rule::RoleNotAllowed(r.clone()));
                }
                if m.has_tool_calls() || m.has_tool_results() {
                    p.push(i, None, Rule::MisplacedPart);
                }
            }
        }
    }
    if let Some(at) = legacy_open {
        p.push(at, None, Rule::PendingFinalCall);
    }
    p.finish()
}

fn validate_anthropic(messages: &[Message]) -> Vec<Violation> {
    let lead = crate::conversation::wire_offset(Family::Anthropic, messages);
    let mut p = Pairing {
        ids_unique_globally: true,
        offset: lead,
        ..Pairing::default()
    };
    let last = messages.len().saturating_sub(1);
    for (i, m) in messages.iter().enumerate().skip(lead) {
        let empty = m
            .parts
            .iter()
            .all(|p| matches!(p, Part::Text(t) if t.text.is_empty()));
        if empty && i != last {
            p.push(i, None, Rule::EmptyContent);
        }
        match &m.role {
            Role::Assistant => {
                p.open(i, m);
                if m.has_tool_results() {
                    p.push(i, None, Rule::MisplacedPart);
                }
            }
            Role::User => {
                let mut leading = true;
                for part in &m.parts {
                    match part {
                        Part::ToolResult(r) => {
                            if leading {
                                p.answer(i, &r.call_id);
                            } else {
                                p.push(i, Some(&r.call_id), Rule::ResultNotFirst);
                            }
                        }
                        Part::ToolCall(_) => p.push(i, None, Rule::MisplacedPart),
                        _ => leading = false,
                    }
                }
                p.close_unanswered();
            }
            Role::System => {
                p.close_unanswered();
                if m.has_tool_calls() || m.has_tool_results() {
                    p.push(i, None, Rule::MisplacedPart);
                }
            }
            other => {
                p.close_unanswered();
                p.push(i, None, Rule::RoleNotAllowed(other.as_str().to_owned()));
            }
        }
    }
    p.finish()
}

/// Gemini answers a model turn's function calls in the turn right after
/// it (the user's, or a `function` turn), one response per call, in any
/// order and beside other parts; ids need only be unique within a turn
/// (the API pairs by name and place where they are left out). A turn
/// needs at least one part.
fn validate_gemini(messages: &[Message]) -> Vec<Violation> {
    let lead = crate::conversation::wire_offset(Family::Gemini, messages);
    let mut p = Pairing {
        ids_unique_globally: false,
        offset: lead,
        ..Pairing::default()
    };
    for (i, m) in messages.iter().enumerate().skip(lead) {
        if m.parts.is_empty() {
            p.push(i, None, Rule::EmptyContent);
        }
        match &m.role {
            Role::Assistant => {
                // Gemini CLI's side requests open with a model turn that
                // calls: only a call turn right after another model turn
                // is refused.
                let after_model = i > lead && messages[i - 1].role == Role::Assistant;
                if m.has_tool_calls() && after_model {
                    p.push(i, None, Rule::CallNotAfterUser);
                }
                p.open(i, m);
                if m.has_tool_results() {
                    p.push(i, None, Rule::MisplacedPart);
                }
            }
            Role::User | Role::Function => {
                for part in &m.parts {
                    match part {
                        Part::ToolResult(r) => p.answer(i, &r.call_id),
                        Part::ToolCall(_) => p.push(i, None, Rule::MisplacedPart),
                        _ => {}
                    }
                }
                p.close_unanswered();
            }
            other => {
                p.close_unanswered();
                p.push(i, None, Rule::RoleNotAllowed(other.as_str().to_owned()));
            }
        }
    }
    p.finish()
}

/// The Responses API pairs calls and outputs by `call_id` across the whole
/// input: every function (or custom tool) call needs an output after it,
/// every output a call before it. A call abridge keeps verbatim (a local
/// shell or computer call) may be answered by a function call output; it is
/// not required to be, and its own kind of output is not checked: abridge
/// moves such items only with their whole turn.
fn is_reasoning(item: &Value) -> bool {
    item.get("type").and_then(Value::as_str) == Some("reasoning")
}

fn validate_responses(messages: &[Message], offset: usize) -> Vec<Violation> {
    let mut p = Pairing {
        offset,
        ..Pairing::default()
    };
    let mut open: Vec<(usize, &str)> = Vec::new();
    let mut verbatim: Vec<&str> = Vec::new();
    for (i, m) in messages.iter().enumerate().skip(offset) {
        for part in &m.parts {
            match part {
                Part::ToolCall(c) => {
                    if open.iter().any(|(_, o)| *o == c.id) {
                        p.push(i, Some(&c.id), Rule::DuplicateCallId);
                    }
                    open.push((i, &c.id));
                }
                Part::ToolResult(r) => match open.iter().position(|(_, o)| *o == r.call_id) {
                    Some(pos) => {
                        open.remove(pos);
                    }
                    None if verbatim.contains(&r.call_id.as_str()) => {}
                    None => p.push(i, Some(&r.call_id), Rule::OrphanResult),
                },
                Part::Opaque(v) if is_reasoning(v) => {
                    let followed = messages
                        .get(i + 1)
                        .is_some_and(|next| next.role == Role::Assistant);
                    if !followed {
                        let id = v.get("id").and_then(Value::as_str);
                        p.push(i, id, Rule::ReasoningNotFollowed);
                    }
                }
                Part::Opaque(v) => {
                    let is_call = v
                        .get("type")
                        .and_then(Value::as_str)
                        .is_some_and(|t| t.ends_with("_call"));
                    if let (true, Some(id)) = (is_call, v.get("call_id").and_then(Value::as_str)) {
                        verbatim.push(id);
                    }
                }
                _ => {}
            }
        }
    }
    for (at, id) in open {
        p.push(at, Some(id), Rule::UnansweredCall);
    }
    p.finish()
}
