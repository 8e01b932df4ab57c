//! Conversion between the OpenAI and Anthropic wire families, to and from
//! the Responses API and the AI SDK through Chat Completions, and to and
//! from Gemini through Anthropic.
//!
//! Structure is translated (tool messages ⇄ `tool_result` blocks, top-level
//! `system` ⇄ system messages, tool declarations, `tool_choice`, stop
//! sequences). What has no counterpart but can be left out without changing
//! what the model is asked (cache hints, unsigned reasoning, sampling knobs
//! of one provider) is dropped and listed in [`Converted::warnings`]. What
//! cannot be carried without changing the conversation (custom tool calls,
//! arguments that are not JSON, a system message in mid-conversation, server
//! tools, documents or audio) is an [`Error::Unrepresentable`].
//!
//! One module per concern: [`messages`], tool declarations ([`tools`]) and
//! the request envelope ([`envelope`]).

mod ai_sdk;
mod envelope;
mod gemini;
mod messages;
mod responses;
mod tools;

use crate::conversation::{Conversation, Family, Format, Wire};
use crate::error::{Error, Result};
use crate::message::{Extra, Part, TextPart};

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
    if conv.format == Format::Responses {
        return convert_to(conv, Wire::from(to));
    }
    if conv.family == to {
        return Ok(Converted {
            conversation: conv.clone(),
            warnings: Vec::new(),
        });
    }
    // Gemini goes through Anthropic, its nearest kin.
    if conv.family == Family::Gemini {
        let mut w = Warnings::default();
        let anthropic = gemini::to_anthropic(conv, &mut w)?;
        let mut converted = convert(&anthropic, to)?;
        for warning in converted.warnings.drain(..) {
            w.add(warning);
        }
        converted.warnings = w.0;
        return Ok(converted);
    }
    if to == Family::Gemini {
        let anthropic = convert(conv, Family::Anthropic)?;
        let mut w = Warnings(anthropic.warnings);
        let conversation = gemini::from_anthropic(&anthropic.conversation, &mut w)?;
        return Ok(Converted {
            conversation,
            warnings: w.0,
        });
    }
    let mut w = Warnings::default();
    let mut out = Conversation::new(to);
    out.model = conv.model.clone();
    out.boundaries = conv.boundaries.clone();
    out.label = conv.label.clone();
    out.key_order = conv.key_order.clone();
    out.messages = messages::convert(&conv.messages, to, &mut w)?;
    out.tools = tools::convert(conv.tools.as_deref(), to, &mut w)?;
    out.extra = envelope::convert(&conv.extra, to, &mut w);
    Ok(Converted {
        conversation: out,
        warnings: w.0,
    })
}

/// Converts a conversation to a wire format: a request body of either
/// family, or AI SDK messages (which keep only the messages).
///
/// ```
/// use abridge_model::{Wire, convert_to, decode, encode};
///
/// let body = br#"{"model": "gpt-4o", "messages": [
///   {"role": "user", "content": "List the files"},
///   {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
///     "function": {"name": "ls", "arguments": "{}"}}]},
///   {"role": "tool", "tool_call_id": "c1", "content": "README.md"}]}"#;
/// let conv = decode(body)?.remove(0);
/// let ai = convert_to(&conv, Wire::AiSdk)?.conversation;
/// let messages = encode(&ai)?;
/// assert_eq!(messages[2]["content"][0]["toolName"], "ls");
/// assert_eq!(messages[2]["content"][0]["output"]["value"], "README.md");
/// let back = convert_to(&ai, Wire::Chat)?.conversation;
/// assert_eq!(encode(&back)?["messages"], encode(&conv)?["messages"]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn convert_to(conv: &Conversation, to: Wire) -> Result<Converted> {
    let mut w = Warnings::default();
    let chat;
    let conv = match (conv.format == Format::Responses, to == Wire::Responses) {
        (true, true) => {
            return Ok(Converted {
                conversation: conv.clone(),
                warnings: Vec::new(),
            });
        }
        // To the Responses API through Chat Completions, its nearest kin.
        (false, true) => {
            let mut converted = convert_to(conv, Wire::Chat)?;
            converted.conversation = responses::from_openai(converted.conversation, &mut w)?;
            converted.warnings.append(&mut w.0);
            return Ok(converted);
        }
        (true, false) => {
            chat = responses::to_openai(conv, &mut w)?;
            &chat
        }
        (false, false) => conv,
    };
    let openai;
    let source = if conv.format == Format::AiSdk {
        if to == Wire::AiSdk {
            return convert(conv, conv.family);
        }
        openai = ai_sdk::to_openai(conv, &mut w)?;
        &openai
    } else {
        conv
    };
    let mut converted = convert(source, to.family())?;
    if to == Wire::AiSdk {
        converted.conversation = ai_sdk::from_openai(converted.conversation, &mut w);
    }
    for warning in converted.warnings.drain(..) {
        w.add(warning);
    }
    converted.warnings = w.0;
    Ok(converted)
}

/// What a conversion dropped, one line per kind.
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

    fn dropped_fields(&mut self, dropped: &[&str]) {
        if !dropped.is_empty() {
            self.add(format!("dropped request fields: {}", dropped.join(", ")));
        }
    }
}

/// The target family's name as errors print it.
fn target_name(family: Family) -> &'static str {
    match family {
        Family::OpenAi => "OpenAI",
        Family::Anthropic => "Anthropic",
        Family::Gemini => "Gemini",
    }
}

fn unrepresentable(index: usize, to: Family, reason: impl Into<String>) -> Error {
    Error::Unrepresentable {
        index,
        target: target_name(to),
        reason: reason.into(),
    }
}

/// A text part without provider-specific fields (reported as dropped).
fn plain_text(t: &TextPart, what: &str, w: &mut Warnings) -> Part {
    w.drop_extra(what, &t.extra);
    Part::text(t.text.clone())
}
