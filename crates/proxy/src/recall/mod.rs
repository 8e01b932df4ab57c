//! The recall tool, answered by the proxy itself. Once a session's history
//! is compacted (its placeholders and briefing name originals by handle),
//! the requests the proxy forwards declare the tool; a response that calls
//! it is answered from the session's engine (memory, then the store), the
//! model's turn and the answers are appended to the request, and the
//! upstream call goes on — at most `[recall] max_rounds` times per client
//! request. The client gets one response in which the tool never appears:
//! the text of every round, its own tool calls, the usage summed.
//!
//! A response that calls the recall tool beside the client's tools is
//! answered and continued without the client's calls: the model asked to
//! read something first and re-issues what it still needs after reading
//! it (the client never sees calls it did not run). When the rounds run
//! out, the last response goes to the client without its recall calls.

mod items;
mod stream;
mod whole;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use abridge::Engine;
use abridge::model::{Conversation, Family, Wire};
use abridge::recall::{Answer, Piece, RecallScope, RecallTool};
use axum::body::Bytes;
use axum::http::{HeaderMap, Method};
use serde_json::{Value, json};

use crate::forward::{Target, Upstream};
use crate::metrics::Metrics;

pub(crate) use stream::streamed;
pub(crate) use whole::whole;

/// What a request needs to answer the recall tool in its response.
#[derive(Debug)]
pub(crate) struct Recalling {
    /// The session's engine: where originals are found.
    pub(crate) engine: Arc<Engine>,
    /// Whose originals it may answer with: its session's tenant's.
    pub(crate) scope: RecallScope,
    /// The tool's name.
    pub(crate) tool: String,
    /// Most rounds answered for one client request.
    pub(crate) max_rounds: usize,
    pub(crate) api: Api,
    /// The body sent upstream, continued round by round.
    pub(crate) body: Value,
    /// Calls answered for this request (for its request log row).
    pub(crate) answered: Arc<AtomicU32>,
}

/// The APIs the proxy answers the recall tool on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Api {
    /// OpenAI Chat Completions.
    Chat,
    /// Anthropic Messages.
    Messages,
    /// The OpenAI Responses API.
    Responses,
}

impl Api {
    /// The API a request of `wire` speaks, if the proxy answers on it.
    pub(crate) fn of(wire: Wire) -> Option<Api> {
        match wire {
            Wire::OpenAi => Some(Api::Chat),
            Wire::Anthropic => Some(Api::Messages),
            Wire::Responses => Some(Api::Responses),
            Wire::AiSdk => None,
        }
    }

    fn family(self) -> Family {
        match self {
            Api::Messages => Family::Anthropic,
            Api::Chat | Api::Responses => Family::OpenAi,
        }
    }
}

/// How to send a continued request: where the first one went.
#[derive(Debug, Clone)]
pub(crate) struct Resend {
    pub(crate) upstream: Upstream,
    pub(crate) method: Method,
    pub(crate) target: Target,
    pub(crate) headers: HeaderMap,
}

impl Resend {
    async fn send(&self, body: &Value) -> reqwest::Result<reqwest::Response> {
        let bytes = Bytes::from(serde_json::to_vec(body).unwrap_or_default());
        self.upstream
            .send(
                self.method.clone(),
                &self.target,
                &self.headers,
                bytes,
                true,
            )
            .await
    }
}

/// A call of the recall tool in a model's response.
#[derive(Debug, Clone)]
pub(crate) struct Call {
    pub(crate) id: String,
    pub(crate) arguments: Value,
}

/// Declares the recall tool in a history about to be sent, when it has
/// tools of its own (an agent) and its wire is one the proxy answers on;
/// true when it did. The declaration goes last, so the client's tools keep
/// their place.
pub(crate) fn declare(conv: &mut Conversation, wire: Wire, tool: &RecallTool) -> bool {
    if Api::of(wire).is_none() {
        return false;
    }
    let Some(tools) = conv.tools.as_mut().filter(|t| !t.is_empty()) else {
        return false;
    };
    if tools.iter().any(|t| t.name() == Some(tool.name.as_str())) {
        // The client has a tool of that name: it is the client's.
        return false;
    }
    tools.push(tool.to_tool());
    true
}

impl Recalling {
    /// Answers the calls (off the async runtime: the store may be read).
    async fn answer(&self, calls: Vec<Call>, metrics: &Metrics) -> Vec<(String, Answer)> {
        let (engine, scope) = (self.engine.clone(), self.scope.clone());
        let answered = tokio::task::spawn_blocking(move || {
            calls
                .into_iter()
                .map(|c| (c.id, engine.recall_in(&c.arguments, Some(&scope))))
                .collect::<Vec<_>>()
        })
        .await
        .unwrap_or_default();
        for (_, a) in &answered {
            metrics.recall(!a.is_error, a.bytes);
        }
        self.answered
            .fetch_add(answered.len() as u32, Ordering::Relaxed);
        answered
    }

    /// Appends the model's turn (an assistant message; the Responses API's
    /// output items) and the answers to its calls to the body.
    fn continue_with(&mut self, turn: Value, answers: &[(String, Answer)]) {
        let added: Vec<Value> = match self.api {
            Api::Responses => return items::continue_input(&mut self.body, turn, answers),
            Api::Chat => answers
                .iter()
                .map(|(id, a)| json!({"role": "tool", "tool_call_id": id, "content": chat_text(a)}))
                .collect(),
            Api::Messages => {
                let results: Vec<Value> = answers
                    .iter()
                    .map(|(id, a)| {
                        let mut r = json!({"type": "tool_result", "tool_use_id": id,
                            "content": anthropic_content(a)});
                        if a.is_error {
                            r["is_error"] = Value::Bool(true);
                        }
                        r
                    })
                    .collect();
                vec![json!({"role": "user", "content": results})]
            }
        };
        if let Some(messages) = self.body.get_mut("messages").and_then(Value::as_array_mut) {
            messages.push(turn);
            messages.extend(added);
        }
    }
}

/// An answer as a Chat Completions tool message's text (its images cannot
/// go there: said in their place).
fn chat_text(a: &Answer) -> String {
    let texts: Vec<&str> = a
        .pieces
        .iter()
        .map(|p| match p {
            Piece::Text { text } => text.as_str(),
            Piece::Image { .. } => {
                "[an image: Chat Completions tool results carry text only, so it is not shown here]"
            }
        })
        .collect();
    texts.join("\n")
}

/// An answer as Anthropic `tool_result` content blocks.
fn anthropic_content(a: &Answer) -> Vec<Value> {
    a.pieces
        .iter()
        .map(|p| match p {
            Piece::Text { text } => json!({"type": "text", "text": text}),
            Piece::Image { url } => match url
                .strip_prefix("data:")
                .and_then(|rest| rest.split_once(";base64,"))
            {
                Some((media_type, data)) => json!({"type": "image",
                    "source": {"type": "base64", "media_type": media_type, "data": data}}),
                None => json!({"type": "image", "source": {"type": "url", "url": url}}),
            },
        })
        .collect()
}

/// Adds every number of `more` to the same field of `sum` (usage objects).
fn add_usage(sum: &mut serde_json::Map<String, Value>, more: &Value) {
    let Some(more) = more.as_object() else { return };
    for (k, v) in more {
        match (sum.get_mut(k), v) {
            (Some(Value::Number(a)), Value::Number(b)) => {
                if let (Some(x), Some(y)) = (a.as_u64(), b.as_u64()) {
                    *a = (x + y).into();
                }
            }
            (Some(Value::Object(_)), Value::Object(_)) => {
                if let Some(Value::Object(inner)) = sum.get_mut(k) {
                    add_usage(inner, v);
                }
            }
            (None, _) => {
                sum.insert(k.clone(), v.clone());
            }
            _ => {}
        }
    }
}

/// What a client gets when the model asked to recall more often than
/// `[recall] max_rounds` allows, and said nothing else.
fn exhausted_note(rounds: usize) -> String {
    format!(
        "[abridge: the model asked to recall originals more than {rounds} times for one request; \
         its last recall was not answered]"
    )
}
