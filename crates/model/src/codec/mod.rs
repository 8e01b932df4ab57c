//! Decoding and encoding conversations, with format auto-detection.

mod ai_sdk;
mod anthropic;
mod claude_code;
mod convert;
mod gemini;
mod logs;
mod openai;
mod openhands;
mod responses;
mod streamed;
mod util;

use serde_json::Value;

pub use convert::{Converted, convert, convert_to};
pub use gemini::answered_with_error;
pub use responses::continues_turn;
pub use util::kind as json_kind;

use crate::conversation::{Conversation, Family, Format, Wire};
use crate::error::{Error, Result};

/// Decodes every conversation in `bytes`, detecting the format.
///
/// Most inputs hold one conversation; a tau-bench file holds one per run.
pub fn decode(bytes: &[u8]) -> Result<Vec<Conversation>> {
    decode_as(bytes, None)
}

/// Decodes `bytes` as the given format, or detects it when `format` is `None`.
pub fn decode_as(bytes: &[u8], format: Option<Format>) -> Result<Vec<Conversation>> {
    let text = std::str::from_utf8(bytes).map_err(|e| {
        let before = &bytes[..e.valid_up_to()];
        let line = before.iter().filter(|b| **b == b'\n').count() + 1;
        Error::Json {
            line,
            column: before.len()
                - before
                    .iter()
                    .rposition(|b| *b == b'\n')
                    .map_or(0, |p| p + 1)
                + 1,
            message: "input is not valid UTF-8".into(),
        }
    })?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if format == Some(Format::ClaudeCode) {
        return Ok(vec![claude_code::decode(text)?]);
    }
    if let Some(decoded) = streamed::decode(text, format) {
        return decoded.map(|c| vec![c]);
    }
    let value = match serde_json::from_str::<Value>(text) {
        Ok(v) => v,
        Err(e) if looks_like_jsonl(text) && format.is_none() => {
            if text.lines().take(50).any(is_claude_code_line) {
                return Ok(vec![claude_code::decode(text)?]);
            }
            return Err(Error::json(&e, 0));
        }
        Err(e) => return Err(Error::json(&e, 0)),
    };
    let format = match format {
        Some(f) => f,
        None => detect(&value)?,
    };
    decode_value(value, format)
}

/// A large request body (1 MB or more: smaller ones cost little as a tree)
/// with a `messages` array in the OpenAI or Anthropic format (`format`, or
/// detected as [`detect`] would), decoded a message at a time on every core
/// and never as one JSON tree. `None` for anything else (smaller, another
/// shape or format, JSON this path does not take apart): decode it whole,
/// which also says where it is wrong.
pub fn decode_large_body(text: &str, format: Option<Format>) -> Option<Result<Conversation>> {
    streamed::decode(text, format)
}

/// Decodes an already parsed JSON value as the given format.
pub fn decode_value(value: Value, format: Format) -> Result<Vec<Conversation>> {
    Ok(match format {
        Format::Chat => match value {
            Value::Array(items) => {
                let mut conv = Conversation::new(Family::OpenAi);
                conv.messages = openai::decode_messages(items, "")?;
                vec![conv]
            }
            other => vec![openai::decode_body(other)?],
        },
        Format::Anthropic => vec![anthropic::decode_body(value)?],
        Format::Gemini => match value {
            Value::Array(items) => {
                let mut conv = Conversation::new(Family::Gemini);
                conv.messages = gemini::decode_contents(items, 0)?;
                vec![conv]
            }
            other => vec![gemini::decode_body(other)?],
        },
        Format::Responses => match value {
            Value::Array(items) => {
                let mut conv = Conversation::new(Family::OpenAi);
                conv.format = Format::Responses;
                conv.messages = responses::decode_items(items, 0)?;
                vec![conv]
            }
            other => vec![responses::decode_body(other)?],
        },
        Format::MiniSweAgent => vec![logs::decode_mini_swe(value)?],
        Format::AiSdk => match value {
            Value::Array(items) => vec![ai_sdk::decode(items)?],
            _ => return Err(Error::shape("AI SDK messages", "an array of messages")),
        },
        Format::TauBench => match value {
            Value::Array(runs) => logs::decode_tau_bench(runs)?,
            _ => return Err(Error::shape("tau-bench file", "an array of runs")),
        },
        Format::ClaudeCode => {
            let text = value.to_string();
            vec![claude_code::decode(&text)?]
        }
        Format::OpenHands => match value {
            Value::Array(events) => vec![openhands::decode(events)?],
            _ => return Err(Error::shape("OpenHands events", "an array of events")),
        },
    })
}

/// Decodes elements of a `messages` array of a wire format (a family's
/// request body, or AI SDK messages); error locations count from `first`
/// (the index of the first of them). For a client that resends its history,
/// or an agent that appends: decode only what was added.
pub fn decode_wire_messages(
    wire: impl Into<Wire>,
    items: Vec<Value>,
    first: usize,
) -> Result<Vec<crate::message::Message>> {
    let decode_one: fn(Value, &dyn Fn() -> String) -> Result<crate::message::Message> =
        match wire.into() {
            Wire::Chat => openai::decode_message,
            Wire::Anthropic => anthropic::decode_message,
            Wire::AiSdk => ai_sdk::decode_message,
            // An item's place in its turn depends on the items before it.
            Wire::Responses => return responses::decode_items(items, first),
            Wire::Gemini => return gemini::decode_contents(items, first),
        };
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        out.push(decode_one(item, &|| format!("messages[{}]", first + i))?);
    }
    Ok(out)
}

/// Encodes messages as elements of a wire format's history (`messages`,
/// or the Responses API's `input` items): the inverse of
/// [`decode_wire_messages`], for a caller that appends to a body it holds.
/// Error locations count from `first`.
pub fn encode_wire_messages(
    wire: impl Into<Wire>,
    messages: &[crate::message::Message],
    first: usize,
) -> Result<Vec<Value>> {
    let encode_one: fn(&crate::message::Message, usize) -> Result<Value> = match wire.into() {
        Wire::Chat => openai::encode_message,
        Wire::Anthropic => anthropic::encode_message,
        Wire::AiSdk => |m, _| ai_sdk::encode_message(m),
        Wire::Responses => responses::encode_item,
        // A response is named after its call, found among the turns before.
        Wire::Gemini => return gemini::encode_contents(messages, first),
    };
    messages
        .iter()
        .enumerate()
        .map(|(i, m)| encode_one(m, first + i))
        .collect()
}

/// Encodes a conversation as a request body of its own wire family.
pub fn encode(conv: &Conversation) -> Result<Value> {
    match conv.format {
        Format::AiSdk => return ai_sdk::encode(conv),
        Format::Responses => return responses::encode_body(conv),
        _ => {}
    }
    match conv.family {
        Family::OpenAi => openai::encode_body(conv),
        Family::Anthropic => anthropic::encode_body(conv),
        Family::Gemini => gemini::encode_body(conv),
    }
}

/// Messages from which [`encode_text`] writes a history one message at a time.
const STREAMED_MESSAGES: usize = 10_000;

/// A conversation as the JSON text of its request body: [`encode`]'s value,
/// written out. A long OpenAI or Anthropic history is written a message at
/// a time, so that a million messages never become one JSON tree (which
/// takes about ten times their text).
pub fn encode_text(conv: &Conversation) -> Result<String> {
    encode_text_from(conv, STREAMED_MESSAGES)
}

fn encode_text_from(conv: &Conversation, streamed_from: usize) -> Result<String> {
    if conv.messages.len() < streamed_from {
        return Ok(encode(conv)?.to_string());
    }
    let mut items = String::new();
    let parts = encode_parts_from(conv, streamed_from, |item| {
        if !items.is_empty() {
            items.push(',');
        }
        items.push_str(&item);
    })?;
    Ok(parts.join(&items))
}

/// A body in parts ([`encode_parts`]): its envelope, and where its history goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BodyParts {
    /// The body's JSON text with its history array empty (`[]` for a body
    /// that is its history: AI SDK messages).
    pub envelope: String,
    /// The key of the history array in the envelope (`None`: the body is
    /// the array).
    pub history_key: Option<&'static str>,
}

impl BodyParts {
    /// The whole body's text, its history's items (written as
    /// comma-separated JSON) put in the envelope's history array.
    pub fn join(&self, items: &str) -> String {
        let Some(key) = self.history_key else {
            return format!("[{items}]");
        };
        let Ok(Value::Object(body)) = serde_json::from_str::<Value>(&self.envelope) else {
            return self.envelope.clone();
        };
        let mut out = String::from("{");
        for (i, (k, v)) in body.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&Value::from(k.as_str()).to_string());
            out.push(':');
            match k == key {
                true => {
                    out.push('[');
                    out.push_str(items);
                    out.push(']');
                }
                false => out.push_str(&v.to_string()),
            }
        }
        out.push('}');
        out
    }
}

/// A conversation's request body in parts: each item of its history, as
/// JSON text, handed to `item` in order, and the rest of the body (the
/// envelope) returned. A long OpenAI or Anthropic history is encoded a
/// block of messages at a time, never as one JSON tree. A store keeps the
/// items of many bodies once each; [`BodyParts::join`] puts a body back.
pub fn encode_parts(conv: &Conversation, item: impl FnMut(String)) -> Result<BodyParts> {
    encode_parts_from(conv, STREAMED_MESSAGES, item)
}

fn encode_parts_from(
    conv: &Conversation,
    streamed_from: usize,
    mut item: impl FnMut(String),
) -> Result<BodyParts> {
    // As `encode` picks its encoder.
    let wire = match (conv.format, conv.family) {
        // Items that depend on each other, or a shape of their own: whole.
        (Format::AiSdk | Format::Responses, _) | (_, Family::Gemini) => None,
        _ if conv.messages.len() < streamed_from => None,
        (_, Family::OpenAi) => Some(Wire::Chat),
        (_, Family::Anthropic) => Some(Wire::Anthropic),
    };
    let Some(wire) = wire else {
        return Ok(split_value(encode(conv)?, Wire::of(conv.format), item));
    };
    // The body without its history, the history key in its place.
    let lead = conv.wire_offset();
    let envelope = Conversation {
        messages: conv.messages[..lead].to_vec(),
        ..conv.clone_envelope()
    };
    let parts = split_value(encode(&envelope)?, wire, &mut item);
    // A block of messages at a time, never the whole history's tree.
    for start in (lead..conv.messages.len()).step_by(STREAMED_BLOCK) {
        let end = (start + STREAMED_BLOCK).min(conv.messages.len());
        for value in encode_wire_messages(wire, &conv.messages[start..end], start)? {
            item(value.to_string());
        }
    }
    Ok(parts)
}

/// An encoded body in parts: its history's items handed to `item`, the
/// rest returned.
fn split_value(body: Value, wire: Wire, mut item: impl FnMut(String)) -> BodyParts {
    match body {
        Value::Array(items) => {
            items.iter().for_each(|i| item(i.to_string()));
            BodyParts {
                envelope: "[]".into(),
                history_key: None,
            }
        }
        Value::Object(mut fields) => {
            let key = wire.history_key();
            if let Some(Value::Array(items)) = fields.get_mut(key) {
                std::mem::take(items)
                    .iter()
                    .for_each(|i| item(i.to_string()));
            }
            fields
                .entry(key)
                .or_insert_with(|| Value::Array(Vec::new()));
            BodyParts {
                envelope: Value::Object(fields).to_string(),
                history_key: Some(key),
            }
        }
        other => BodyParts {
            envelope: other.to_string(),
            history_key: None,
        },
    }
}

/// Messages [`encode_text`] turns into JSON values at once.
const STREAMED_BLOCK: usize = 1024;

/// A Gemini `contents` item: a turn of `parts` (no OpenAI or Anthropic
/// message has them).
fn is_gemini_content(v: &Value) -> bool {
    v.get("parts").is_some_and(Value::is_array) && v.get("content").is_none()
}

/// Guesses the format of a parsed JSON document.
pub fn detect(v: &Value) -> Result<Format> {
    match v {
        Value::Array(items) => {
            let first = items.first();
            if first.is_some_and(|r| r.get("traj").is_some()) {
                Ok(Format::TauBench)
            } else if openhands::looks_like(items) {
                Ok(Format::OpenHands)
            } else if items.iter().any(is_responses_item) {
                Ok(Format::Responses)
            } else if items.iter().any(is_ai_sdk_message) {
                Ok(Format::AiSdk)
            } else if items.iter().any(is_gemini_content) {
                Ok(Format::Gemini)
            } else if first.is_some_and(|m| m.get("role").is_some()) {
                Ok(Format::Chat)
            } else {
                Err(Error::UnknownFormat(
                    "a JSON array that is neither tau-bench runs nor messages".into(),
                ))
            }
        }
        Value::Object(map) => {
            if map
                .get("trajectory_format")
                .and_then(Value::as_str)
                .is_some_and(|f| f.starts_with("mini-swe-agent"))
            {
                return Ok(Format::MiniSweAgent);
            }
            if is_claude_code_value(v) {
                return Ok(Format::ClaudeCode);
            }
            if !map.contains_key("messages") && map.contains_key("input") {
                return Ok(Format::Responses);
            }
            if !map.contains_key("messages") && map.contains_key("contents") {
                return Ok(Format::Gemini);
            }
            let Some(Value::Array(messages)) = map.get("messages") else {
                return Err(Error::UnknownFormat(
                    "a JSON object without a \"messages\" array".into(),
                ));
            };
            if map.contains_key("info")
                && messages
                    .iter()
                    .any(|m| m.get("role") == Some(&"exit".into()))
            {
                return Ok(Format::MiniSweAgent);
            }
            Ok(guess_family(map.contains_key("system"), messages))
        }
        _ => Err(Error::UnknownFormat(format!(
            "a JSON {}",
            util::kind(v)
                .trim_start_matches("a ")
                .trim_start_matches("an ")
        ))),
    }
}

/// Scores wire-family hints in the messages; OpenAI wins ties.
fn guess_family(has_system: bool, messages: &[Value]) -> Format {
    let mut score = FamilyScore::new(has_system);
    messages.iter().for_each(|m| score.add(m));
    score.family()
}

/// Wire-family hints counted message by message.
struct FamilyScore {
    has_system: bool,
    anthropic: u64,
    openai: u64,
}

impl FamilyScore {
    fn new(has_system: bool) -> Self {
        FamilyScore {
            has_system,
            anthropic: if has_system { 2 } else { 0 },
            openai: 0,
        }
    }

    fn add(&mut self, m: &Value) {
        match m.get("role").and_then(Value::as_str) {
            // Anthropic bodies carry system messages inside `messages` too
            // (Claude Code), beside a top-level `system` OpenAI never has.
            Some("system") if !self.has_system => self.openai += 2,
            Some("developer" | "tool" | "function") => self.openai += 2,
            _ => {}
        }
        if m.get("tool_calls").is_some() || m.get("tool_call_id").is_some() {
            self.openai += 2;
        }
        if let Some(Value::Array(blocks)) = m.get("content") {
            for b in blocks {
                match b.get("type").and_then(Value::as_str) {
                    Some(
                        "tool_use" | "tool_result" | "thinking" | "redacted_thinking" | "image"
                        | "document" | "server_tool_use" | "search_result" | "container_upload",
                    ) => self.anthropic += 1,
                    Some("image_url" | "input_audio" | "file") => self.openai += 1,
                    _ => {}
                }
            }
        }
    }

    fn family(&self) -> Format {
        if self.anthropic > self.openai {
            Format::Anthropic
        } else {
            Format::Chat
        }
    }
}

/// An input item only the Responses API has (a call, an output, reasoning),
/// or a message whose parts are typed as only the Responses API types them.
fn is_responses_item(item: &Value) -> bool {
    let ty = |v: &Value| v.get("type").and_then(Value::as_str).map(str::to_owned);
    if ty(item).is_some_and(|t| responses::TELLTALE_ITEMS.contains(&t.as_str())) {
        return true;
    }
    item.get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(ty)
        .any(|t| {
            matches!(
                t.as_str(),
                "input_text" | "output_text" | "input_image" | "input_file"
            )
        })
}

/// A message with a part only the AI SDK writes (`tool-call`,
/// `tool-result`, `reasoning`).
fn is_ai_sdk_message(m: &Value) -> bool {
    m.get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|p| p.get("type").and_then(Value::as_str))
        .any(|t| ai_sdk::TELLTALE_PARTS.contains(&t))
}

fn looks_like_jsonl(text: &str) -> bool {
    let line = crate::text::first_line(text);
    line.trim_start().starts_with('{') && serde_json::from_str::<Value>(line).is_ok()
}

fn is_claude_code_line(line: &str) -> bool {
    serde_json::from_str::<Value>(line).is_ok_and(|v| is_claude_code_value(&v))
}

fn is_claude_code_value(v: &Value) -> bool {
    let ty = v.get("type").and_then(Value::as_str);
    ty == Some("file-history-snapshot")
        || (ty.is_some() && (v.get("sessionId").is_some() || v.get("uuid").is_some()))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Written a message at a time, a body is the text of the one tree.
    #[test]
    fn a_history_written_a_message_at_a_time_is_the_whole_bodys_text() {
        let bodies = [
            json!({"temperature": 0.2, "model": "gpt-4o", "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Read \"a.rs\"", "name": "u"},
                {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
                    "function": {"name": "read", "arguments": "{\"path\":\"a.rs\"}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "fn a() {}\n"}],
                "tools": [{"type": "function", "function": {"name": "read", "parameters": {"type": "object"}}}],
                "metadata": {"messages": []}}),
            json!({"model": "claude-sonnet-4-5", "max_tokens": 1024,
                "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
                "messages": [{"role": "user", "content": "hi"},
                    {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "ls", "input": {}}]},
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a.rs"}]}]}),
            json!({"model": "claude-sonnet-4-5", "system": "Be brief.", "messages": [{"role": "user", "content": "hi"}]}),
            json!({"model": "gpt-4o", "input": [{"role": "user", "content": "hi"}]}),
        ];
        // Longer than a block of messages, across block boundaries.
        let turns = |n: usize| -> Vec<Value> {
            (0..n)
                .map(|i| {
                    let role = ["user", "assistant"][i % 2];
                    json!({"role": role, "content": format!("m{i}")})
                })
                .collect()
        };
        let long = [
            json!({"model": "gpt-4o", "messages": turns(2 * STREAMED_BLOCK + 3)}),
            json!({"model": "claude-sonnet-4-5", "system": "s", "messages": turns(STREAMED_BLOCK + 1)}),
        ];
        for body in bodies.into_iter().chain(long) {
            let conv = decode(body.to_string().as_bytes()).unwrap().remove(0);
            let whole = encode(&conv).unwrap().to_string();
            assert_eq!(encode_text_from(&conv, 0).unwrap(), whole, "{body}");
            assert_eq!(encode_text(&conv).unwrap(), whole);
        }
    }

    /// A body's parts put back together are the body, on every wire (AI
    /// SDK messages are a bare array), whole and a block at a time; its
    /// items are its history's.
    #[test]
    fn a_body_in_parts_joins_back_to_the_body() {
        let bodies = [
            json!({"model": "gpt-4o", "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}], "temperature": 0.5}),
            json!({"model": "claude-sonnet-4-5", "system": "Be brief.", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 9}),
            json!({"model": "gpt-4o", "instructions": "s", "input": [{"role": "user", "content": "hi"}], "store": false}),
            json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}], "systemInstruction": {"parts": [{"text": "s"}]}}),
            json!([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yes"}]),
            json!({"model": "gpt-4o", "messages": []}),
        ];
        for body in bodies {
            let conv = decode(body.to_string().as_bytes()).unwrap().remove(0);
            let whole = encode(&conv).unwrap();
            for streamed_from in [0, STREAMED_MESSAGES] {
                let mut items = Vec::new();
                let parts = encode_parts_from(&conv, streamed_from, |i| items.push(i)).unwrap();
                let history = match parts.history_key {
                    Some(key) => whole[key].clone(),
                    None => whole.clone(),
                };
                let expected: Vec<String> = history
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(Value::to_string)
                    .collect();
                assert_eq!(items, expected, "{body}");
                assert_eq!(parts.join(&items.join(",")), whole.to_string(), "{body}");
            }
        }
    }
}
