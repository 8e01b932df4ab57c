//! Agent-facing pieces (mycoder's design: the agent decides when to
//! compact): a status note the agent reads about its own context, and a
//! `compact_history` tool it calls to compact its own history. `[agent]`
//! in the config says which a front end offers; the proxy adds the note and
//! answers the tool itself, the packages hand both to in-process agents.

use abridge_model::{
    Arguments, ContentForm, Conversation, Extra, Family, FunctionTool, Message, Part, Role, Tool,
    ToolResult,
};
use abridge_tokens::Price;
use abridge_tokens::{Calibrated, Counted};
use serde::Serialize;
use serde_json::{Value, json};

use crate::boundary::iterations_covering;
use crate::compactor::Compactor;
use crate::error::Error;
use crate::report::Outcome;

/// The tool's default name (`agent.tool`).
pub const TOOL_NAME: &str = "compact_history";

/// Messages kept verbatim when the call names none (mycoder's default).
pub const DEFAULT_KEPT_MESSAGES: usize = 10;

/// Most messages a call may keep (mycoder's bound).
pub const MAX_KEPT_MESSAGES: usize = 50;

/// What a status note says: the context's tokens of the window, what the
/// session has cost so far and what sending this context costs, and when
/// the compact tool is offered, when to call it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Status<'a> {
    /// Tokens of the history, as the provider counts them.
    pub tokens: Calibrated,
    /// The model's window, when known.
    pub window: Option<Calibrated>,
    /// The model's prices, when known.
    pub price: Option<Price>,
    /// Dollars the session's requests have cost so far, when known.
    pub spent: Option<f64>,
    /// The compact tool's name, when it is offered.
    pub tool: Option<&'a str>,
    /// The fraction of the window from which the note suggests the tool.
    pub hint_at: f64,
}

impl Status<'_> {
    /// The note's text, in mycoder's lines.
    pub fn text(&self) -> String {
        let mut lines = vec!["--- STATUS UPDATE ---".to_owned()];
        lines.push(match self.window {
            Some(w) => format!(
                "Token Usage: {}/{} ({}%)",
                self.tokens,
                w,
                (self.fraction().unwrap_or(0.0) * 100.0).round()
            ),
            None => format!("Token Usage: {} (window unknown)", self.tokens),
        });
        if let Some(spent) = self.spent {
            lines.push(format!("Cost So Far: ${spent:.4}"));
        }
        if let Some(p) = self.price {
            lines.push(format!(
                "Sending this context costs about ${:.4}, ${:.4} while its prefix stays cached.",
                p.prompt_cost(Calibrated::ZERO, self.tokens),
                p.prompt_cost(self.tokens, self.tokens)
            ));
        }
        if let Some(tool) = self.tool {
            let pct = (self.hint_at * 100.0).round();
            let high = self.fraction().is_some_and(|f| f >= self.hint_at);
            lines.push(match high {
                true => format!(
                    "Token usage is high (>{pct}%): call the '{tool}' tool to condense older messages (recent ones stay verbatim)."
                ),
                false => format!(
                    "If token usage is high (>{pct}%), consider using the '{tool}' tool to reduce context size."
                ),
            });
        }
        lines.push("--- END STATUS ---".to_owned());
        lines.join("\n")
    }

    fn fraction(&self) -> Option<f64> {
        self.window
            .map(|w| self.tokens.get() as f64 / w.get().max(1) as f64)
    }

    /// The note as a user message of its own.
    pub fn message(&self) -> Message {
        Message::text(Role::User, self.text())
    }
}

/// A user message telling the agent how full its context is; see [`Status`].
pub fn status_message(
    tokens: Calibrated,
    window: Option<Calibrated>,
    price: Option<Price>,
    hint_at: f64,
) -> Message {
    Status {
        tokens,
        window,
        price,
        spent: None,
        tool: Some(TOOL_NAME),
        hint_at,
    }
    .message()
}

/// Puts a status note at the end of a history about to be sent, where
/// every API takes it: after Chat tool messages and Responses items as a
/// user message of its own; in the last user message, after its tool
/// results, on the APIs whose tool results are user content (Anthropic,
/// Gemini), so turns still alternate. Nothing is added after the model's
/// own last turn (a prefill); false then.
pub fn add_status(conv: &mut Conversation, text: String) -> bool {
    let family = conv.family;
    let Some(last) = conv.messages.last_mut() else {
        return false;
    };
    match (family, &last.role) {
        (_, Role::Assistant) => false,
        (Family::OpenAi, _) => {
            conv.messages.push(Message::text(Role::User, text));
            true
        }
        (Family::Anthropic | Family::Gemini, Role::User) => {
            if last.form == ContentForm::Text {
                // A string of text becomes blocks of text; nothing else changes.
                last.form = ContentForm::Blocks;
            }
            last.parts.push(Part::text(text));
            true
        }
        (Family::Anthropic | Family::Gemini, _) => {
            conv.messages.push(Message::text(Role::User, text));
            true
        }
    }
}

impl Compactor {
    /// The status note for `conv`: its tokens as the provider counts them
    /// (calibrated against reported usage), the model's window and prices,
    /// the tool and threshold of `[agent]`, and `spent` so far when known.
    pub fn status_message(&mut self, conv: &Conversation, spent: Option<f64>) -> Message {
        let tokens = self.count(conv);
        self.status(tokens, spent).message()
    }

    /// [`Compactor::status_message`]'s status for a history of `tokens`
    /// (as counted).
    pub fn status(&self, tokens: Counted, spent: Option<f64>) -> Status<'_> {
        let limits = *self.limits();
        let agent = &self.config().agent;
        Status {
            tokens: self.calibrated(tokens),
            window: limits.window,
            price: limits.price,
            spent,
            tool: agent.compact_tool.then_some(agent.tool.as_str()),
            hint_at: agent.hint_at,
        }
    }
}

/// What a compaction the agent asked for came to: what the tool answers,
/// and the history's tokens before and after.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Answered {
    /// The tool's answer.
    pub text: String,
    /// The compaction failed (the answer says why).
    pub is_error: bool,
    /// The history was rewritten.
    pub compacted: bool,
    /// Its tokens before.
    pub tokens_before: Counted,
    /// Its tokens after.
    pub tokens_after: Counted,
}

/// The tool's parameters (mycoder's), as a JSON Schema.
pub fn parameters() -> Value {
    json!({
        "type": "object",
        "properties": {
            "preserve_recent_messages": {
                "type": "integer", "minimum": 1, "maximum": MAX_KEPT_MESSAGES,
                "description": "Number of recent messages to preserve unchanged (default 10)."
            },
            "custom_prompt": {
                "type": "string",
                "description": "Optional: what the summary of the older messages should concentrate on."
            }
        }
    })
}

/// What the tool's declaration tells the model.
pub const DESCRIPTION: &str = "Compacts the message history by summarizing older messages to reduce token usage. \
The most recent messages stay verbatim; identifiers, files, decisions and the task list are kept.";

/// The tool declaration under its default name; see [`tool_named`].
pub fn compact_history_tool(family: Family) -> Tool {
    tool_named(family, TOOL_NAME)
}

/// The tool declaration in the given API's shape, ready for
/// `Conversation::tools`.
pub fn tool_named(family: Family, name: &str) -> Tool {
    let mut extra = Extra::new();
    if family == Family::OpenAi {
        extra.insert("type".into(), json!("function"));
    }
    Tool::Function(FunctionTool {
        name: name.to_owned(),
        description: Some(DESCRIPTION.to_owned()),
        parameters: Some(parameters()),
        extra,
        function_extra: Extra::new(),
    })
}

/// How much of the history a call keeps verbatim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// The last this many messages (mycoder's `preserveRecentMessages`),
    /// widened to whole iterations so every call keeps its result.
    Messages(usize),
    /// The last this many iterations (`preserve_recent`, abridge's first
    /// form of the tool, still read).
    Iterations(usize),
}

/// What the agent asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactRequest {
    /// What stays verbatim.
    pub keep: Keep,
    /// What the briefing concentrates on (`custom_prompt`, or `focus`).
    pub focus: Option<String>,
}

impl CompactRequest {
    /// The iterations of `messages` (the history before the call) that
    /// the request keeps: those its last kept messages reach into.
    pub fn keep_iterations(&self, messages: &[Message]) -> usize {
        match self.keep {
            Keep::Iterations(n) => n,
            Keep::Messages(n) => iterations_covering(messages, n),
        }
    }
}

/// Reads a compact call's arguments (mycoder's, or the first form's;
/// defaults for what is missing, numbers clamped to their bounds).
pub fn parse_arguments(args: &Arguments) -> CompactRequest {
    let v = args.to_value();
    let number = |key: &str| v.get(key).and_then(Value::as_u64);
    let text = |key: &str| {
        v.get(key)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(str::to_owned)
    };
    let keep = match (
        number("preserve_recent_messages"),
        number("preserve_recent"),
    ) {
        (Some(n), _) => Keep::Messages(n.clamp(1, MAX_KEPT_MESSAGES as u64) as usize),
        (None, Some(n)) => Keep::Iterations(n.clamp(1, 1_000) as usize),
        (None, None) => Keep::Messages(DEFAULT_KEPT_MESSAGES),
    };
    CompactRequest {
        keep,
        focus: text("custom_prompt").or_else(|| text("focus")),
    }
}

/// What the tool answers, for the outcome of the compaction it asked for
/// (`kept`: the iterations kept verbatim): the text, and whether it failed.
pub fn answer(outcome: &Result<Outcome<'_>, Error>, kept: usize) -> (String, bool) {
    match outcome {
        Ok(o) if o.report.compacted => (
            format!(
                "History compacted: {} → {} tokens. A briefing replaces the older messages; the last {kept} iteration(s) are unchanged.",
                o.report.tokens_before, o.report.tokens_after
            ),
            false,
        ),
        Ok(_) => ("Nothing to compact yet. No changes made.".to_owned(), false),
        Err(Error::CannotShrink { .. }) => (
            format!(
                "Not enough messages to compact: the history has no more than {kept} iteration(s). No changes made."
            ),
            false,
        ),
        Err(e) => (format!("Could not compact: {e}"), true),
    }
}

/// The tool's result for call `call_id`, as `family` carries it.
pub fn result(family: Family, call_id: String, text: String, is_error: bool) -> ToolResult {
    ToolResult {
        call_id,
        parts: vec![Part::text(text)],
        form: ContentForm::Text,
        is_error: (is_error && family == Family::Anthropic).then_some(true),
        extra: Extra::new(),
    }
}

/// Handles a compact call (under `[agent] tool`) found in the last
/// assistant message: compacts the history before it and answers the call
/// with a tool result that says what happened. When nothing can be
/// compacted, the history is returned as it was, with a result that says
/// why.
pub fn handle_compact_history(
    compactor: &mut Compactor,
    conv: &Conversation,
) -> Option<Conversation> {
    let last = conv
        .messages
        .iter()
        .rposition(|m| m.role == Role::Assistant)?;
    let name = compactor.config().agent.tool.clone();
    let call = conv.messages[last].tool_calls().find(|c| c.name == name)?;
    let call_id = call.id.clone();
    let req = parse_arguments(&call.arguments);
    let kept = req.keep_iterations(&conv.messages[..last]);
    // The call's own iteration stays too: it is the one being answered.
    let outcome = compactor.compact_on_request(conv, kept + 1, req.focus);
    let (text, is_error) = answer(&outcome, kept);
    let mut out = match outcome {
        Ok(o) if o.report.compacted => o.conversation.into_owned(),
        _ => conv.clone(),
    };
    let result = result(out.family, call_id, text, is_error);
    out.messages
        .extend(out.family.result_messages(vec![result]));
    Some(out)
}
