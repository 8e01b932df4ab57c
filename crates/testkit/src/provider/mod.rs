//! A fake LLM provider on 127.0.0.1 that plays the OpenAI Chat Completions
//! and Responses APIs and Anthropic Messages — tool-calling replies, SSE
//! streams with usage, and failures on request — and checks every request it receives:
//! valid for its API, under a token limit, and whether it kept the
//! previous request's messages as its prefix.

use std::collections::HashMap;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use abridge_model::Family;
use abridge_tokens::TokenizerKind;

use crate::reply::{Api, Event, RECALL_TOOL, Reply};

mod check;

use crate::script::ShellScript;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Response, StatusCode, header};
use axum::routing::{get, post};
pub(crate) use check::handles_in;
pub use check::{RequestCheck, body_hash};
use check::{check, declares, reasoning_payload};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// How the provider behaves.
#[derive(Debug, Clone)]
pub struct ProviderOptions {
    /// Requests above this many tokens are recorded as over the limit.
    pub max_tokens: Option<u64>,
    /// Requests above this many tokens are refused as too long (400).
    pub window: Option<u64>,
    /// Tokenizer used for counting.
    pub tokenizer: TokenizerKind,
    /// Pause between two streamed events.
    pub chunk_delay: Duration,
    /// Decode, validate and count every request (off for benchmarks, which
    /// measure the proxy, not the checks).
    pub check: bool,
    /// Play a scripted model that drives the client's shell tool (for real
    /// agent clients); otherwise every reply calls the first declared tool.
    pub script: Option<ShellScript>,
    /// How the model calls the recall tool a proxy declares when a request
    /// says nothing (`x-fake-recall`).
    pub recall: Option<RecallMode>,
}

/// How the fake model calls the recall tool a proxy declared, with the
/// first handle it reads (`x-fake-recall`, or the `--recall` flag).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecallMode {
    /// Instead of its tool call, once per client request.
    Alone,
    /// Beside its tool call, once per client request.
    Beside,
    /// With a handle nobody kept, once per client request.
    Unknown,
    /// On every request, even right after an answer.
    Always,
}

impl std::str::FromStr for RecallMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "alone" => Ok(RecallMode::Alone),
            "beside" => Ok(RecallMode::Beside),
            "unknown" => Ok(RecallMode::Unknown),
            "always" => Ok(RecallMode::Always),
            other => Err(format!(
                "unknown recall mode {other:?} (alone, beside, unknown, always)"
            )),
        }
    }
}

impl Default for ProviderOptions {
    fn default() -> Self {
        ProviderOptions {
            max_tokens: None,
            window: None,
            tokenizer: TokenizerKind::O200kBase,
            chunk_delay: Duration::from_millis(2),
            check: true,
            script: None,
            recall: None,
        }
    }
}

/// Everything seen so far (`GET /_report`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProviderReport {
    /// Every conversation request, in order.
    pub requests: Vec<RequestCheck>,
}

#[derive(Default)]
struct Seen {
    report: ProviderReport,
    /// Per session (first user message), the previous request's messages.
    last: HashMap<String, Vec<String>>,
    /// Per session, the scripted model's steps so far.
    steps: HashMap<String, usize>,
    /// The reasoning payloads issued (summary and encrypted content).
    reasoning: std::collections::HashSet<String>,
}

struct Shared {
    options: ProviderOptions,
    seen: Mutex<Seen>,
}

/// A running fake provider.
#[derive(Debug)]
pub struct Provider {
    /// `http://127.0.0.1:PORT`: OpenAI clients use `{url}/v1`, Anthropic clients `{url}`.
    pub url: String,
    shared: Arc<SharedHandle>,
}

struct SharedHandle(Arc<Shared>);

impl std::fmt::Debug for SharedHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Provider")
    }
}

impl Provider {
    /// Starts on a free port on the current tokio runtime.
    pub async fn start(options: ProviderOptions) -> Provider {
        Self::bind("127.0.0.1:0", options).await
    }

    /// Starts on `addr`.
    pub async fn bind(addr: &str, options: ProviderOptions) -> Provider {
        let shared = Arc::new(Shared {
            options,
            seen: Mutex::default(),
        });
        let app = Router::new()
            .route(Api::Chat.path(), post(chat))
            .route(Api::Responses.path(), post(responses))
            .route(Api::Messages.path(), post(messages))
            .route(Api::Gemini.path(), post(gemini))
            .route("/_report", get(report))
            .route(
                "/v1/models",
                get(|| async {
                    r#"{"object":"list","data":[{"id":"fake-model","object":"model"}]}"#
                }),
            )
            .layer(axum::extract::DefaultBodyLimit::disable())
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Provider {
            url,
            shared: Arc::new(SharedHandle(shared)),
        }
    }

    /// What it saw so far.
    pub fn report(&self) -> ProviderReport {
        self.shared.0.seen.lock().unwrap().report.clone()
    }
}

async fn report(State(s): State<Arc<Shared>>) -> Response<Body> {
    let report = s.seen.lock().unwrap().report.clone();
    plain(200, &serde_json::to_string(&report).unwrap())
}

async fn chat(State(s): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response<Body> {
    answer(&s, Api::Chat, &headers, &body).await
}

async fn responses(
    State(s): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response<Body> {
    answer(&s, Api::Responses, &headers, &body).await
}

async fn messages(State(s): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response<Body> {
    answer(&s, Api::Messages, &headers, &body).await
}

/// `POST /v1beta/models/{model}:{method}`: `generateContent`, or
/// `streamGenerateContent` (server-sent events with `alt=sse`, else one
/// JSON array sent in pieces).
async fn gemini(
    State(s): State<Arc<Shared>>,
    axum::extract::Path(action): axum::extract::Path<String>,
    axum::extract::RawQuery(query): axum::extract::RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response<Body> {
    let stream = match action.split_once(':').map(|(_, m)| m) {
        Some("generateContent") => false,
        Some("streamGenerateContent") => true,
        _ => {
            return plain(
                404,
                &error_body(Family::Gemini, "NOT_FOUND", "no such method"),
            );
        }
    };
    let sse = query.is_some_and(|q| q.split('&').any(|p| p == "alt=sse"));
    let how = GeminiCall {
        path: format!("/v1beta/models/{action}"),
        stream,
        sse,
    };
    answer_as(&s, Api::Gemini, Some(how), &headers, &body).await
}

/// What a Gemini request's URL says: its path (the model in it), whether
/// it streams, and how.
struct GeminiCall {
    path: String,
    stream: bool,
    sse: bool,
}

async fn answer(s: &Shared, api: Api, headers: &HeaderMap, body: &[u8]) -> Response<Body> {
    answer_as(s, api, None, headers, body).await
}

async fn answer_as(
    s: &Shared,
    api: Api,
    gemini: Option<GeminiCall>,
    headers: &HeaderMap,
    body: &[u8],
) -> Response<Body> {
    let family = match api {
        Api::Chat | Api::Responses => Family::OpenAi,
        Api::Messages => Family::Anthropic,
        Api::Gemini => Family::Gemini,
    };
    let fail = header_str(headers, "x-fake-fail").unwrap_or("");
    match fail {
        "500" => return plain(500, &error_body(family, "api_error", "internal error")),
        "429" => return plain(429, &error_body(family, "rate_limit_error", "slow down")),
        "garbage" => return plain(200, "this is not json {{"),
        "hang" => tokio::time::sleep(Duration::from_secs(30)).await,
        _ => {}
    }
    if !s.options.check {
        return plain(200, &Reply::quick(api).to_string());
    }
    let Ok(request) = serde_json::from_slice::<Value>(body) else {
        return plain(
            400,
            &error_body(family, "invalid_request_error", "body is not JSON"),
        );
    };
    let (mut check, key) = check(s, api, headers, &request, body);
    if let Some(g) = &gemini {
        check.path = g.path.clone();
        check.stream = g.stream;
    }
    let tokens = check.tokens;
    let stream = check.stream;
    s.seen.lock().unwrap().report.requests.push(check);
    if s.options.window.is_some_and(|w| tokens > w) {
        let msg = match family {
            Family::OpenAi => {
                "This model's maximum context length is exceeded (context_length_exceeded)"
            }
            Family::Anthropic => "prompt is too long",
            Family::Gemini => "The input token count exceeds the maximum number of tokens allowed",
        };
        return plain(400, &error_body(family, "invalid_request_error", msg));
    }
    let reply = reply_to(s, api, headers, &request, body, key);
    let body = reply.body(api, tokens);
    remember_reasoning(s, api, &reply, &body);
    if !stream {
        return plain(200, &body.to_string());
    }
    if gemini.as_ref().is_some_and(|g| !g.sse) {
        // A stream without `alt=sse`: one JSON array, sent in pieces.
        let chunks: Vec<String> = reply
            .events(api, tokens, true)
            .into_iter()
            .map(|(_, data)| data)
            .collect();
        return plain(200, &format!("[{}]", chunks.join(",\r\n")));
    }
    let usage = request.pointer("/stream_options/include_usage") == Some(&Value::Bool(true));
    let events = reply.events(api, tokens, usage);
    let drop_mid = fail == "drop-stream";
    sse(events, s.options.chunk_delay, drop_mid)
}

/// A header's value, when it is text.
fn header_str<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// What the model does this turn: its scripted (or default) step, or a call
/// of the recall or the compact tool first when it is told to make one.
fn reply_to(
    s: &Shared,
    api: Api,
    headers: &HeaderMap,
    request: &Value,
    body: &[u8],
    key: String,
) -> Reply {
    let turn = s.seen.lock().unwrap().report.requests.len();
    let recall_mode = header_str(headers, "x-fake-recall")
        .and_then(|v| v.parse::<RecallMode>().ok())
        .or(s.options.recall);
    let just_answered = s
        .seen
        .lock()
        .unwrap()
        .report
        .requests
        .last()
        .is_some_and(|c| !c.recalled.is_empty());
    let recall = recall_mode
        .filter(|m| declares(request, RECALL_TOOL) && (*m == RecallMode::Always || !just_answered))
        .and_then(|m| match m {
            RecallMode::Unknown => Some("abr_zzzzzzzzzz".to_owned()),
            // A model told which handle to try (an attacker's).
            _ => header_str(headers, "x-fake-recall-handle")
                .map(str::to_owned)
                .or_else(|| first_handle(body)),
        });
    // A model told of a compact tool calls it when a status note says the
    // context is full, instead of its own call.
    let compact = header_str(headers, "x-fake-compact")
        .filter(|name| declares(request, name))
        .filter(|_| recall.is_none())
        .filter(|_| String::from_utf8_lossy(body).contains("Token usage is high"));
    // A scripted step the model recalls or compacts before (its call left
    // for later) is taken again on the next request.
    let postponed =
        (recall.is_some() && recall_mode != Some(RecallMode::Beside)) || compact.is_some();
    let mut reply = match s.options.script {
        Some(script) => Reply::scripted(request, turn, script, || {
            let mut seen = s.seen.lock().unwrap();
            let step = seen.steps.entry(key).or_default();
            *step += usize::from(!postponed);
            *step - usize::from(!postponed)
        }),
        None => Reply::for_request(request, turn),
    };
    reply.reasoning = api == Api::Responses
        && request
            .get("include")
            .and_then(Value::as_array)
            .is_some_and(|i| i.iter().any(|v| v == "reasoning.encrypted_content"));
    // A scripted model's final answer is not held up by a recall.
    let answers = s.options.script.is_some() && reply.call.is_none();
    if let Some(h) = recall.filter(|_| !answers) {
        // A model told to search names what it looks for instead of a handle.
        reply.recall = Some(match header_str(headers, "x-fake-recall-query") {
            Some(q) => json!({"query": q}),
            None => json!({"handle": h}),
        });
        if postponed {
            reply.call = None;
        }
    }
    if let Some(name) = compact.filter(|_| !answers) {
        let kept = header_str(headers, "x-fake-compact-keep")
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(4);
        reply.compact = Some((name.to_owned(), json!({"preserve_recent_messages": kept})));
        reply.call = None;
    }
    reply
}

/// Keeps what the model issued that a client must send back unchanged
/// (Responses' encrypted reasoning, Gemini's thought signatures), so later
/// requests can be checked for it.
fn remember_reasoning(s: &Shared, api: Api, reply: &Reply, body: &Value) {
    if reply.reasoning {
        let issued = body["output"].as_array().into_iter().flatten();
        let reasoning = issued
            .filter(|i| i["type"] == "reasoning")
            .map(reasoning_payload);
        s.seen.lock().unwrap().reasoning.extend(reasoning);
    }
    if api == Api::Gemini && !reply.calls().is_empty() {
        let signature = crate::reply::thought_signature(reply.turn);
        s.seen.lock().unwrap().reasoning.insert(signature);
    }
}

/// The first recall handle written in a body (`abr_` and 6 to 16 of
/// `[0-9a-z]`) that names one original rather than a whole replaced
/// region, as a model looking for a file would pick it; else the first.
fn first_handle(body: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(body);
    let handles = handles_in(body);
    let region = |at: usize| {
        // The line it is on, in the body's JSON text (lines escaped as `\n`).
        let start = text[..at].rfind("\\n").map_or(0, |i| i + 2);
        let line = &text[start..at];
        line.contains("replaced message") || line == "(recall "
    };
    let first = handles.first().map(|(_, h)| h.clone());
    handles
        .into_iter()
        .find(|(at, _)| !region(*at))
        .map(|(_, h)| h)
        .or(first)
}

fn error_body(family: Family, kind: &str, message: &str) -> String {
    match family {
        Family::OpenAi => json!({"error": {"message": message, "type": kind, "code": kind}}),
        Family::Anthropic => json!({"type": "error", "error": {"type": kind, "message": message}}),
        Family::Gemini => {
            json!({"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}})
        }
    }
    .to_string()
}

pub(crate) fn plain(status: u16, body: &str) -> Response<Body> {
    let mut r = Response::new(Body::from(body.to_owned()));
    *r.status_mut() = StatusCode::from_u16(status).unwrap();
    r.headers_mut()
        .insert(header::CONTENT_TYPE, "application/json".parse().unwrap());
    r
}

pub(crate) fn sse(events: Vec<Event>, delay: Duration, drop_mid: bool) -> Response<Body> {
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(4);
    tokio::spawn(async move {
        let total = events.len();
        for (i, (name, data)) in events.into_iter().enumerate() {
            if drop_mid && i == total / 2 {
                let _ = tx
                    .send(Err(std::io::Error::other("connection dropped")))
                    .await;
                return;
            }
            let text = match name {
                Some(n) => format!("event: {n}\ndata: {data}\n\n"),
                None => format!("data: {data}\n\n"),
            };
            if tx.send(Ok(Bytes::from(text))).await.is_err() {
                return;
            }
            tokio::time::sleep(delay).await;
        }
    });
    let stream =
        futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|c| (c, rx)) });
    let mut r = Response::new(Body::from_stream(stream));
    r.headers_mut()
        .insert(header::CONTENT_TYPE, "text/event-stream".parse().unwrap());
    r.headers_mut()
        .insert(header::CACHE_CONTROL, "no-cache".parse().unwrap());
    r
}
