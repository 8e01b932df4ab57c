//! The recall tool, answered by the proxy itself. Once a session's history
//! is compacted (its placeholders and briefing name originals by handle),
//! the requests the proxy forwards declare the tool; a response that calls
//! it is answered from the session's engine (memory, then the store), the
//! model's turn and the answers are appended to the request, and the
//! upstream call goes on — at most `[recall] max_rounds` times per client
//! request. The client gets one response in which the tool never appears:
//! the text of every round, its own tool calls, the usage summed.
//!
//! The compact tool (`[agent] compact_tool`) is answered the same way: a
//! call compacts the session's history as the agent asked, the round goes
//! on with the compacted history, and the session carries that compaction
//! to the client's next requests.
//!
//! A response that calls the recall tool beside the client's tools is
//! answered and continued without the client's calls: the model asked to
//! read something first and re-issues what it still needs after reading
//! it (the client never sees calls it did not run). When the rounds run
//! out, the last response goes to the client without its recall calls.

mod api;
mod chat;
mod gemini;
mod messages;
mod responses;
mod stream;
mod whole;

use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use abridge::Engine;
use abridge::agent::{CompactRequest, parse_arguments};
use abridge::model::{Arguments, Conversation, Wire};
use abridge::recall::{Answer, Handle, RecallScope, RecallTool};
use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, Response};
use futures_util::future::BoxFuture;
use serde_json::Value;

use self::api::Api;
use self::chat::Chat;
use self::gemini::Gemini;
use self::messages::Messages;
use self::responses::Responses;
use crate::forward::{OnUsage, Target, Upstream};
use crate::metrics::Metrics;

/// The APIs the proxy answers the recall tool on, by the wire a request
/// speaks. An API is a file implementing [`Api`] and a line here.
pub(crate) fn on(wire: Wire) -> Option<&'static dyn Answering> {
    match wire {
        Wire::Chat => Some(&On::<Chat>(PhantomData)),
        Wire::Anthropic => Some(&On::<Messages>(PhantomData)),
        Wire::Responses => Some(&On::<Responses>(PhantomData)),
        Wire::Gemini => Some(&On::<Gemini>(PhantomData)),
        Wire::AiSdk => None,
    }
}

/// Answers the recall calls of one API's responses.
pub(crate) trait Answering: std::fmt::Debug + Sync {
    /// The wire the API's requests are written in.
    fn wire(&self) -> Wire;

    /// The client's response to `first` (an event stream when `stream`),
    /// its recall calls answered and continued upstream.
    fn respond(
        &self,
        r: Recalling,
        first: reqwest::Response,
        onward: Onward,
        stream: bool,
    ) -> BoxFuture<'static, Response<Body>>;
}

struct On<A>(PhantomData<fn() -> A>);

impl<A: Api> std::fmt::Debug for On<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "recall on {}", A::WIRE.as_str())
    }
}

impl<A: Api> Answering for On<A> {
    fn wire(&self) -> Wire {
        A::WIRE
    }

    fn respond(
        &self,
        r: Recalling,
        first: reqwest::Response,
        onward: Onward,
        stream: bool,
    ) -> BoxFuture<'static, Response<Body>> {
        if stream {
            let response = stream::streamed::<A>(r, first, onward);
            return Box::pin(std::future::ready(response));
        }
        Box::pin(whole::whole::<A>(r, first, onward))
    }
}

/// The tools the proxy answers itself in a request's responses.
#[derive(Debug, Clone, Default)]
pub(crate) struct Ours {
    /// The recall tool's name, when the request declares it.
    pub(crate) recall: Option<String>,
    /// The compact tool's name, when the request declares it.
    pub(crate) compact: Option<String>,
}

impl Ours {
    /// Whether a call of `name` is one the proxy answers.
    pub(crate) fn owns(&self, name: &str) -> bool {
        self.recall.as_deref() == Some(name) || self.compact.as_deref() == Some(name)
    }

    /// [`Ours::owns`] for a name as the JSON of a call holds it.
    pub(crate) fn owns_value(&self, name: &Value) -> bool {
        name.as_str().is_some_and(|n| self.owns(n))
    }

    /// The recall tool alone.
    #[cfg(test)]
    pub(crate) fn recall_only(name: &str) -> Ours {
        Ours {
            recall: Some(name.to_owned()),
            compact: None,
        }
    }

    /// Whether any tool is the proxy's.
    pub(crate) fn any(&self) -> bool {
        self.recall.is_some() || self.compact.is_some()
    }
}

/// Compacts a request's session as the agent asked, off the runtime: the
/// request's body with its history compacted (the rounds not appended), or
/// `None` with what the tool answers when nothing changed.
pub(crate) type CompactFn =
    Arc<dyn Fn(CompactRequest) -> BoxFuture<'static, Compacted> + Send + Sync>;

/// What a compaction the agent asked for came to.
#[derive(Debug)]
pub(crate) struct Compacted {
    /// The request's body anew, its history compacted, when it was.
    pub(crate) body: Option<Value>,
    /// The originals the session keeps now, when it was compacted.
    pub(crate) searchable: Option<Arc<[Handle]>>,
    /// The tool's answer.
    pub(crate) answer: Answer,
}

/// What a request needs to answer the proxy's tools in its response.
pub(crate) struct Recalling {
    /// The session's engine: where originals are found.
    pub(crate) engine: Arc<Engine>,
    /// Whose originals it may answer with: its session's tenant's.
    pub(crate) scope: RecallScope,
    /// The originals its session's compactions kept, newest last: what a
    /// search reads.
    pub(crate) searchable: Arc<[Handle]>,
    /// The tools the proxy answers.
    pub(crate) tool: Ours,
    /// Compacts the session when the agent calls the compact tool.
    pub(crate) compact: Option<CompactFn>,
    /// Messages of the body's history before the rounds' (what a
    /// compaction replaces).
    pub(crate) sent_len: usize,
    /// Most rounds answered for one client request.
    pub(crate) max_rounds: usize,
    /// The shapes of the request's API.
    pub(crate) api: &'static dyn Answering,
    /// The body sent upstream, continued round by round.
    pub(crate) body: Value,
    /// Calls answered for this request (for its request log row).
    pub(crate) answered: Arc<AtomicU32>,
}

impl std::fmt::Debug for Recalling {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recalling")
            .field("tool", &self.tool)
            .field("max_rounds", &self.max_rounds)
            .field("api", &self.api)
            .finish_non_exhaustive()
    }
}

/// Where a request's rounds go on to, and what its reply carries.
pub(crate) struct Onward {
    /// How to send the continued requests.
    pub(crate) resend: Resend,
    pub(crate) metrics: Arc<Metrics>,
    /// The request's trace: a span per round.
    pub(crate) trace: crate::telemetry::Trace,
    /// Takes the first round's usage once the rounds are over.
    pub(crate) on_usage: Option<OnUsage>,
    /// The proxy's own headers for the client.
    pub(crate) extra: Vec<(HeaderName, HeaderValue)>,
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
    pub(crate) name: String,
    pub(crate) arguments: Value,
}

/// Declares the recall tool in a history about to be sent, when it has
/// tools of its own (an agent) and its wire is one the proxy answers on;
/// true when it did. The declaration goes last, so the client's tools keep
/// their place.
pub(crate) fn declare(conv: &mut Conversation, wire: Wire, tool: &RecallTool) -> bool {
    declare_tool(conv, wire, &tool.name, || tool.to_tool())
}

/// Declares the tool `name` (built by `tool`) as [`declare`] does the
/// recall tool: in an agent's history, on a wire the proxy answers on,
/// unless the client has a tool of that name; true when it did.
pub(crate) fn declare_tool(
    conv: &mut Conversation,
    wire: Wire,
    name: &str,
    tool: impl FnOnce() -> abridge::model::Tool,
) -> bool {
    if on(wire).is_none() {
        return false;
    }
    let Some(tools) = conv.tools.as_mut().filter(|t| !t.is_empty()) else {
        return false;
    };
    if tools.iter().any(|t| t.declares(name)) {
        // The client has a tool of that name: it is the client's.
        return false;
    }
    tools.push(tool());
    true
}

impl Recalling {
    /// Answers the calls: a compact call first (the body's history is
    /// compacted before the round goes on), then the recall calls.
    async fn answer(&mut self, calls: Vec<Call>, metrics: &Metrics) -> Vec<(String, Answer)> {
        let (compact, recall): (Vec<Call>, Vec<Call>) = calls
            .into_iter()
            .partition(|c| self.tool.compact.as_deref() == Some(c.name.as_str()));
        let mut answered = Vec::new();
        for (i, c) in compact.into_iter().enumerate() {
            let answer = match (i, self.compact.clone()) {
                (0, Some(run)) => {
                    self.compacted(run(parse_arguments(&Arguments::Value(c.arguments))).await)
                }
                _ => Answer::note(
                    "Already compacted in this turn. No changes made.".into(),
                    false,
                ),
            };
            answered.push((c.id, answer));
        }
        answered.extend(self.recalled(recall, metrics).await);
        answered
    }

    /// Takes a compaction: the body goes on from its compacted history,
    /// the rounds so far after it.
    fn compacted(&mut self, c: Compacted) -> Answer {
        let key = self.api.wire().history_key();
        if let Some(mut body) = c.body {
            let rounds: Vec<Value> = self.body[key]
                .as_array()
                .map(|h| h.iter().skip(self.sent_len).cloned().collect())
                .unwrap_or_default();
            if let Some(history) = body.get_mut(key).and_then(Value::as_array_mut) {
                self.sent_len = history.len();
                history.extend(rounds);
                self.body = body;
            }
        }
        if let Some(handles) = c.searchable {
            self.searchable = handles;
        }
        c.answer
    }

    /// Answers recall calls (off the async runtime: the store may be read).
    async fn recalled(&self, calls: Vec<Call>, metrics: &Metrics) -> Vec<(String, Answer)> {
        if calls.is_empty() {
            return Vec::new();
        }
        let (engine, scope) = (self.engine.clone(), self.scope.clone());
        let searchable = self.searchable.clone();
        let answered = tokio::task::spawn_blocking(move || {
            calls
                .into_iter()
                .map(|c| {
                    let a = engine.recall_in(&c.arguments, Some(&scope), &searchable);
                    (c.id, a)
                })
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

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// The data of one event the proxy wrote, parsed when it is JSON.
    pub(crate) fn data(b: &Bytes) -> Value {
        let text = String::from_utf8_lossy(b);
        let line = text.lines().find_map(|l| l.strip_prefix("data: ")).unwrap();
        serde_json::from_str(line).unwrap_or(Value::String(line.into()))
    }
}
