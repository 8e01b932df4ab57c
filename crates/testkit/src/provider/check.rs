//! What the provider checks of every request: valid for its API, its size
//! by the provider's tokenizer, whether it kept the session's previous
//! request as its prefix, and what it says of the recall tool.

use abridge_model::{Format, Role, decode_as, validate};
use abridge_tokens::TokenCounter;
use axum::http::HeaderMap;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::Shared;
use crate::reply::{Api, RECALL_TOOL};

/// What the provider saw of one request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestCheck {
    /// Request path.
    pub path: String,
    /// Text of the first user message.
    pub first_user: String,
    /// Whether it asked for a stream.
    pub stream: bool,
    /// Tokens (messages and tools) by the provider's tokenizer.
    pub tokens: u64,
    /// Messages in the request.
    pub messages: usize,
    /// API rules it breaks (empty: valid).
    pub violations: Vec<String>,
    /// True when it is above `max_tokens`.
    pub over_limit: bool,
    /// Whether it starts with every message of the session's previous
    /// request, byte for byte but for `cache_control` markers (`None` for
    /// a session's first request).
    pub prefix_kept: Option<bool>,
    /// Header names it carried (lower case), for checks on forwarding.
    pub headers: Vec<String>,
    /// [`body_hash`] of the body as received.
    pub body_hash: u64,
    /// `cache_control` markers anywhere in the body.
    pub cache_breakpoints: usize,
    /// [`body_hash`] of the system prompt and tool declarations as
    /// received (Anthropic `system` and `tools`; OpenAI leading system
    /// messages and `tools`; the recall tool a proxy adds left out), to
    /// tell whether the client's went byte for byte.
    pub head_hash: u64,
    /// Reasoning items in the request (Responses `input`), or Gemini's
    /// thought signatures.
    #[serde(default)]
    pub reasoning_items: usize,
    /// Of those, how many carry an `encrypted_content` or `summary` (a
    /// signature) the provider never issued: edited on its way.
    #[serde(default)]
    pub altered_reasoning: usize,
    /// Whether it declares the recall tool the proxy answers.
    #[serde(default)]
    pub recall_declared: bool,
    /// The texts of the recall tool's results in its last message (a
    /// request the proxy continued after answering the tool).
    #[serde(default)]
    pub recalled: Vec<String>,
    /// Calls of the recall tool anywhere in its history.
    #[serde(default)]
    pub recall_calls: usize,
    /// It carries a status note for the agent (`--- STATUS UPDATE ---`).
    #[serde(default)]
    pub status_note: bool,
    /// The note's text, when its last message holds one.
    #[serde(default)]
    pub status: Option<String>,
    /// It declares the compact tool named by `x-fake-compact`.
    #[serde(default)]
    pub compact_declared: bool,
    /// The text of the compact tool's result its last message holds: a
    /// request the proxy continued after compacting.
    #[serde(default)]
    pub compact_answer: Option<String>,
    /// Calls of the compact tool anywhere in its history.
    #[serde(default)]
    pub compact_calls: usize,
    /// Every recall handle its body names, in order.
    #[serde(default)]
    pub handles: Vec<String>,
    /// Its W3C `traceparent`, when it came with one.
    #[serde(default)]
    pub traceparent: Option<String>,
}

/// A hash of a request body, to tell whether it arrived byte for byte.
pub fn body_hash(body: &[u8]) -> u64 {
    use std::hash::{DefaultHasher, Hasher};
    let mut h = DefaultHasher::new();
    h.write(body);
    h.finish()
}

/// A value without its `cache_control` markers: clients move them every
/// turn and the provider's cache matches content, not markers. A content of
/// one plain text block is its string (Claude Code writes its newest
/// message as a marked block and the same message as a string after).
fn unmarked(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| k.as_str() != "cache_control")
                .map(|(k, v)| {
                    let v = unmarked(v);
                    match v.as_array().map(Vec::as_slice) {
                        Some([one]) if k == "content" && is_plain_text(one) => {
                            (k.clone(), one["text"].clone())
                        }
                        _ => (k.clone(), v),
                    }
                })
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(unmarked).collect()),
        other => other.clone(),
    }
}

fn is_plain_text(block: &Value) -> bool {
    block.get("type").and_then(Value::as_str) == Some("text")
        && block.get("text").is_some_and(Value::is_string)
        && block.as_object().is_some_and(|b| b.len() == 2)
}

fn count_key(v: &Value, key: &str) -> usize {
    match v {
        Value::Object(m) => m
            .iter()
            .map(|(k, v)| usize::from(k == key) + count_key(v, key))
            .sum(),
        Value::Array(a) => a.iter().map(|v| count_key(v, key)).sum(),
        _ => 0,
    }
}

pub(super) fn check(
    s: &Shared,
    api: Api,
    headers: &HeaderMap,
    request: &Value,
    body: &[u8],
) -> (RequestCheck, String) {
    let format = match api {
        Api::Chat => Format::Chat,
        Api::Responses => Format::Responses,
        Api::Messages => Format::Anthropic,
        Api::Gemini => Format::Gemini,
    };
    let stream = request.get("stream") == Some(&Value::Bool(true));
    let compact_tool = headers
        .get("x-fake-compact")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("\u{0}");
    let d = decoded(s, body, format, compact_tool);
    let raw: Vec<String> = request
        .get(api.history_key())
        .and_then(Value::as_array)
        .map(|a| a.iter().map(|m| unmarked(m).to_string()).collect())
        .unwrap_or_default();
    let first_user = d.user.clone().unwrap_or_default();
    let key = headers
        .get("x-fake-session")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .or(d.user)
        .unwrap_or_default();
    let reasoning = reasoning_in(api, request);
    let mut seen = s.seen.lock().unwrap();
    let prefix_kept = seen
        .last
        .get(&key)
        .map(|prev| raw.len() >= prev.len() && raw[..prev.len()] == prev[..]);
    // A request the proxy continued after answering the recall tool is
    // compared with the client's request before it, and leaves it in place:
    // the client's next request goes on from its own history.
    if d.recalled.is_empty() && d.compact_answer.is_none() {
        seen.last.insert(key.clone(), raw);
    }
    let check = RequestCheck {
        path: api.path().to_owned(),
        first_user,
        stream,
        tokens: d.tokens,
        messages: d.messages,
        violations: d.violations,
        over_limit: s.options.max_tokens.is_some_and(|m| d.tokens > m),
        prefix_kept,
        headers: headers.keys().map(|k| k.as_str().to_owned()).collect(),
        body_hash: body_hash(body),
        cache_breakpoints: count_key(request, "cache_control"),
        head_hash: head_hash(request),
        reasoning_items: reasoning.len(),
        altered_reasoning: reasoning
            .iter()
            .filter(|r| !seen.reasoning.contains(*r))
            .count(),
        recall_declared: declares(request, RECALL_TOOL),
        recalled: d.recalled,
        recall_calls: d.recall_calls,
        status_note: String::from_utf8_lossy(body).contains("--- STATUS UPDATE ---"),
        compact_declared: declares(request, compact_tool),
        compact_answer: d.compact_answer,
        compact_calls: d.compact_calls,
        status: d.status,
        handles: handles_in(body).into_iter().map(|(_, h)| h).collect(),
        traceparent: headers
            .get("traceparent")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
    };
    (check, key)
}

/// What the checker read from a request's history, decoded as its API.
#[derive(Default)]
struct Decoded {
    tokens: u64,
    violations: Vec<String>,
    /// The first user message's text.
    user: Option<String>,
    messages: usize,
    recalled: Vec<String>,
    recall_calls: usize,
    compact_answer: Option<String>,
    compact_calls: usize,
    /// The status note in the last message, if there is one.
    status: Option<String>,
}

fn decoded(s: &Shared, body: &[u8], format: Format, compact_tool: &str) -> Decoded {
    let conv = match decode_as(body, Some(format)) {
        Ok(mut convs) if convs.len() == 1 => convs.remove(0),
        Ok(_) => {
            return Decoded {
                violations: vec!["not one conversation".into()],
                ..Decoded::default()
            };
        }
        Err(e) => {
            return Decoded {
                violations: vec![format!("does not decode: {e}")],
                ..Decoded::default()
            };
        }
    };
    let calls_of = |name: &str| {
        conv.messages
            .iter()
            .flat_map(|m| m.tool_calls())
            .filter(|c| c.name == name)
            .count()
    };
    Decoded {
        tokens: TokenCounter::new(s.options.tokenizer)
            .count_conversation(&conv)
            .get(),
        violations: validate(&conv).iter().map(|v| v.to_string()).collect(),
        user: conv
            .messages
            .iter()
            .find(|m| m.role == Role::User)
            .map(|m| m.text_content().into_owned()),
        messages: conv.messages.len(),
        recalled: recall_results(&conv),
        recall_calls: calls_of(RECALL_TOOL),
        compact_answer: results_of(&conv, compact_tool).into_iter().next(),
        compact_calls: calls_of(compact_tool),
        status: conv.messages.last().and_then(|m| {
            m.parts
                .iter()
                .filter_map(|p| p.as_text())
                .find(|t| t.contains("--- STATUS UPDATE ---"))
                .map(str::to_owned)
        }),
    }
}

/// What a request sends back of the model's reasoning: Responses'
/// reasoning items, Gemini's thought signatures (on whichever part).
fn reasoning_in(api: Api, request: &Value) -> Vec<String> {
    let items = request
        .get(api.history_key())
        .and_then(Value::as_array)
        .into_iter()
        .flatten();
    match api {
        Api::Gemini => items
            .flat_map(|c| c["parts"].as_array().into_iter().flatten())
            .filter_map(|p| p.get("thoughtSignature").and_then(Value::as_str))
            .map(str::to_owned)
            .collect(),
        _ => items
            .filter(|i| i.get("type").and_then(Value::as_str) == Some("reasoning"))
            .map(reasoning_payload)
            .collect(),
    }
}

/// The texts of the recall tool's results in the last message.
fn recall_results(conv: &abridge_model::Conversation) -> Vec<String> {
    results_of(conv, RECALL_TOOL)
}

/// The texts of the results of tool `name` in the last message.
fn results_of(conv: &abridge_model::Conversation, name: &str) -> Vec<String> {
    let recall_ids: Vec<&str> = conv
        .messages
        .iter()
        .flat_map(|m| m.tool_calls())
        .filter(|c| c.name == name)
        .map(|c| c.id.as_str())
        .collect();
    conv.messages
        .last()
        .into_iter()
        .flat_map(|m| m.tool_results())
        .filter(|r| recall_ids.contains(&r.call_id.as_str()))
        .map(|r| r.text().into_owned())
        .collect()
}

/// The recall handles written in a body (`abr_` and 6 to 16 of
/// `[0-9a-z]`), with where each starts.
pub(crate) fn handles_in(body: &[u8]) -> Vec<(usize, String)> {
    let text = String::from_utf8_lossy(body);
    text.match_indices("abr_")
        .filter_map(|(at, _)| {
            let tail: String = text[at + 4..]
                .chars()
                .take_while(|c| c.is_ascii_digit() || c.is_ascii_lowercase())
                .collect();
            (6..=16)
                .contains(&tail.len())
                .then(|| (at, format!("abr_{tail}")))
        })
        .collect()
}

/// Whether a request declares a tool of this name.
pub(super) fn declares(request: &Value, name: &str) -> bool {
    request["tools"].as_array().is_some_and(|tools| {
        tools.iter().any(|t| {
            let gemini = t["functionDeclarations"].as_array().into_iter().flatten();
            t["name"].as_str() == Some(name)
                || t["function"]["name"].as_str() == Some(name)
                || gemini.into_iter().any(|f| f["name"].as_str() == Some(name))
        })
    })
}

/// What must come back unchanged of a reasoning item.
pub(super) fn reasoning_payload(item: &Value) -> String {
    json!([item.get("summary"), item.get("encrypted_content")]).to_string()
}

/// [`RequestCheck::head_hash`]: the system prompt, the client's own tools
/// (the recall tool a proxy adds is left out), and Gemini's server-held
/// prefix (`cachedContent`).
fn head_hash(request: &Value) -> u64 {
    let tools: Option<Vec<&Value>> = request.get("tools").and_then(Value::as_array).map(|t| {
        t.iter()
            .filter(|t| {
                let recall_only = t["functionDeclarations"]
                    .as_array()
                    .is_some_and(|f| f.iter().all(|f| f["name"].as_str() == Some(RECALL_TOOL)));
                t["name"].as_str() != Some(RECALL_TOOL)
                    && t["function"]["name"].as_str() != Some(RECALL_TOOL)
                    && !recall_only
            })
            .collect()
    });
    let leading = request
        .get("messages")
        .or_else(|| request.get("input"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .take_while(|m| {
            matches!(
                m.get("role").and_then(Value::as_str),
                Some("system" | "developer")
            )
        })
        .cloned()
        .collect::<Vec<_>>();
    let head = json!([
        request.get("system"),
        request.get("instructions"),
        request.get("systemInstruction"),
        request.get("cachedContent"),
        tools,
        leading
    ]);
    body_hash(head.to_string().as_bytes())
}
