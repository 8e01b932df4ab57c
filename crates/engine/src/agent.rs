//! Agent-facing pieces: a status line the agent can read about its own
//! context, and a `compact_history` tool it can call to compact its own
//! history (the approach mycoder settled on: let the agent decide).

use abridge_model::{
    Arguments, ContentForm, Conversation, Extra, Family, FunctionTool, Message, Part, Role, Tool,
    ToolResult,
};
use abridge_tokens::Calibrated;
use abridge_tokens::Price;
use serde_json::{Value, json};

use crate::compactor::Compactor;
use crate::error::Error;

/// Name of the tool.
pub const TOOL_NAME: &str = "compact_history";

/// A user message telling the agent how full its context is: tokens used
/// of the window, the percentage, what sending it costs under the
/// provider's caching rules when prices are known (written to the cache, and
/// read from it on the next turn if the prefix stays unchanged), and a hint
/// to call `compact_history` at or above `hint_at` (a fraction of the
/// window). [`Compactor::status_message`] fills it in from the compactor.
pub fn status_message(
    tokens: Calibrated,
    window: Option<Calibrated>,
    price: Option<Price>,
    hint_at: f64,
) -> Message {
    let mut text = format!("[context status] {tokens} tokens in use");
    let fraction = window.map(|w| tokens.get() as f64 / w.get().max(1) as f64);
    if let (Some(w), Some(f)) = (window, fraction) {
        text.push_str(&format!(" of a {w}-token window ({:.1}%)", f * 100.0));
    }
    text.push('.');
    if let Some(p) = price {
        text.push_str(&format!(
            " Sending this context costs about ${:.4} uncached, ${:.4} while its prefix stays cached.",
            p.prompt_cost(Calibrated::ZERO, tokens),
            p.prompt_cost(tokens, tokens)
        ));
    }
    if fraction.is_some_and(|f| f >= hint_at) {
        text.push_str(&format!(
            " The history is getting long: call {TOOL_NAME} to condense older steps (recent ones stay verbatim)."
        ));
    }
    Message::text(Role::User, text)
}

impl Compactor {
    /// [`status_message`] for `conv`: its tokens as the provider counts them
    /// (calibrated against reported usage), the model's window and prices.
    pub fn status_message(&mut self, conv: &Conversation, hint_at: f64) -> Message {
        let tokens = self.count(conv);
        let limits = *self.limits();
        status_message(
            self.calibrated(tokens),
            limits.window,
            limits.price,
            hint_at,
        )
    }
}

fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "preserve_recent": {
                "type": "integer", "minimum": 1,
                "description": "How many of the most recent iterations to keep verbatim (default 3)."
            },
            "focus": {
                "type": "string",
                "description": "What the briefing of the older history should concentrate on."
            }
        }
    })
}

const DESCRIPTION: &str = "Condense the older part of this conversation into a briefing to free context. \
The most recent iterations stay verbatim; identifiers, files, decisions and the task list are kept.";

/// The tool declaration in the given API's shape, ready for `Conversation::tools`.
pub fn compact_history_tool(family: Family) -> Tool {
    let mut extra = Extra::new();
    if family == Family::OpenAi {
        extra.insert("type".into(), json!("function"));
    }
    Tool::Function(FunctionTool {
        name: TOOL_NAME.to_owned(),
        description: Some(DESCRIPTION.to_owned()),
        parameters: Some(schema()),
        extra,
        function_extra: Extra::new(),
    })
}

/// What the agent asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactRequest {
    /// Iterations kept verbatim.
    pub preserve_recent: usize,
    /// Focus for the briefing.
    pub focus: Option<String>,
}

/// Reads a `compact_history` call's arguments (defaults for what is missing).
pub fn parse_arguments(args: &Arguments) -> CompactRequest {
    let v = args.to_value();
    CompactRequest {
        preserve_recent: v
            .get("preserve_recent")
            .and_then(Value::as_u64)
            .map_or(3, |n| n.clamp(1, 1_000) as usize),
        focus: v
            .get("focus")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .filter(|f| !f.trim().is_empty()),
    }
}

/// Handles a `compact_history` call found in the last assistant message:
/// compacts the history before it and answers the call with a tool result
/// that says what happened. When nothing can be compacted, the history is
/// returned as it was, with a result that says why.
pub fn handle_compact_history(
    compactor: &mut Compactor,
    conv: &Conversation,
) -> Option<Conversation> {
    let last = conv
        .messages
        .iter()
        .rposition(|m| m.role == Role::Assistant)?;
    let call = conv.messages[last]
        .tool_calls()
        .find(|c| c.name == TOOL_NAME)?;
    let call_id = call.id.clone();
    let req = parse_arguments(&call.arguments);
    let (mut out, text, is_error) = match compactor.compact_on_request(
        conv,
        req.preserve_recent,
        req.focus,
    ) {
        Ok(o) if o.report.compacted => {
            let text = format!(
                "History compacted: {} → {} tokens. A briefing replaces the older steps; the last {} iteration(s) are unchanged.",
                o.report.tokens_before, o.report.tokens_after, req.preserve_recent
            );
            (o.conversation.into_owned(), text, false)
        }
        Ok(_) => (conv.clone(), "Nothing to compact yet.".to_owned(), false),
        Err(Error::CannotShrink { .. }) => (
            conv.clone(),
            format!(
                "Nothing to compact: the history has no more than {} iteration(s) before this call.",
                req.preserve_recent
            ),
            false,
        ),
        Err(e) => (conv.clone(), format!("Could not compact: {e}"), true),
    };
    let result = ToolResult {
        call_id,
        parts: vec![Part::text(text)],
        form: ContentForm::Text,
        is_error: (is_error && out.family == Family::Anthropic).then_some(true),
        extra: Extra::new(),
    };
    out.messages
        .extend(out.family.result_messages(vec![result]));
    Some(out)
}
