//! A whole (not streamed) response: read, answered while it calls the
//! recall tool, and merged into one response for the client.

use axum::body::{Body, Bytes};
use axum::http::{HeaderName, HeaderValue, Response};
use serde_json::{Map, Value};

use super::api::Api;
use super::{Onward, Ours, Recalling, add_usage, exhausted_note};
use crate::forward::to_client;
use crate::usage::{Replied, model_in};

/// Answers the recall calls of `first` (and of the responses after it)
/// and gives the client one response without them.
pub(super) async fn whole<A: Api>(
    mut r: Recalling,
    first: reqwest::Response,
    onward: Onward,
) -> Response<Body> {
    let Onward {
        resend,
        metrics,
        trace,
        on_usage,
        extra,
    } = onward;
    // The first round's usage is what the sent history cost; it is
    // reported once the rounds are over, with how many calls were answered.
    let mut first_usage = Replied::default();
    let mut response = first;
    let mut earlier = Rounds::<A>::default();
    let mut rounds = 0;
    // What the client gets: the last status and headers, and a body.
    let (status, head, body) = loop {
        let status = response.status();
        let head = response.headers().clone();
        let bytes = response.bytes().await.unwrap_or_default();
        let (parsed, array) = parse::<A>(&bytes);
        let shaped = |v: Value| match array {
            true => Value::Array(vec![v]),
            false => v,
        };
        if rounds == 0 {
            first_usage = replied::<A>(parsed.as_ref());
        }
        let Some(v) = parsed.filter(|_| status.is_success()) else {
            break (status, head, bytes);
        };
        let calls = A::calls(&v, &r.tool);
        if calls.is_empty() && rounds == 0 {
            // Nothing to answer: the response goes as it came, byte for byte.
            break (status, head, bytes);
        }
        if calls.is_empty() || rounds == r.max_rounds {
            if !calls.is_empty() {
                metrics.recall_rounds_exhausted();
            }
            let merged = shaped(earlier.merge(v, &r.tool, rounds, &exhausted_note(rounds)));
            break (status, head, Bytes::from(merged.to_string()));
        }
        rounds += 1;
        metrics.recall_round();
        let (started, n) = (std::time::SystemTime::now(), calls.len());
        let answers = r.answer(calls, &metrics).await;
        let turn = earlier.take(&v, &r.tool);
        let sent = match A::continue_with(&mut r.body, turn, &answers) {
            Ok(()) => resend.send(&r.body).await.map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        trace.recall_round(rounds, n, started);
        response = match sent {
            Ok(next) => next,
            Err(e) => {
                tracing::warn!(error = %e, "a recall round could not be sent");
                let note =
                    "[abridge: the upstream failed while the proxy answered the model's recall]";
                let merged = shaped(earlier.merge(v, &r.tool, rounds, note));
                break (status, head, Bytes::from(merged.to_string()));
            }
        };
    };
    if let Some(done) = on_usage {
        done(first_usage);
    }
    reply(status, &head, body, &extra, rounds)
}

/// A round's body as JSON. A stream sent as one JSON array (Gemini's
/// without `alt=sse`) is read as one response (`true`: to be merged back
/// into an array of one).
fn parse<A: Api>(bytes: &[u8]) -> (Option<Value>, bool) {
    match serde_json::from_slice::<Value>(bytes).ok() {
        Some(Value::Array(chunks)) => (A::gather(chunks), true),
        other => (other, false),
    }
}

/// What a response says it cost and which model answered.
fn replied<A: Api>(parsed: Option<&Value>) -> Replied {
    Replied {
        usage: parsed.and_then(|v| {
            let report = v.get(A::USAGE).filter(|u| u.is_object())?;
            Some(A::usage(report))
        }),
        model: parsed.and_then(model_in),
    }
}

/// What the client's response gathers from the rounds before the last:
/// what the API shows of them, and their usage.
struct Rounds<A: Api> {
    shown: A::Earlier,
    usage: Map<String, Value>,
}

impl<A: Api> Default for Rounds<A> {
    fn default() -> Self {
        Rounds {
            shown: A::Earlier::default(),
            usage: Map::new(),
        }
    }
}

impl<A: Api> Rounds<A> {
    /// Keeps a round's usage and what it shows; the model's turn as it
    /// continues.
    fn take(&mut self, v: &Value, tool: &Ours) -> Value {
        add_usage(&mut self.usage, &v[A::USAGE]);
        A::take(&mut self.shown, v, tool)
    }

    /// The last response merged with the rounds before it, the usage summed.
    fn merge(mut self, v: Value, tool: &Ours, rounds: usize, note: &str) -> Value {
        if !v.is_object() {
            return v;
        }
        add_usage(&mut self.usage, &v[A::USAGE]);
        let mut merged = A::merge(self.shown, v, tool, note);
        if rounds > 0 {
            merged[A::USAGE] = Value::Object(self.usage);
        }
        merged
    }
}

/// The client's response: the upstream's status and headers (a new
/// length), the proxy's own headers and how many recall rounds it took.
fn reply(
    status: reqwest::StatusCode,
    head: &axum::http::HeaderMap,
    body: Bytes,
    extra: &[(HeaderName, HeaderValue)],
    rounds: usize,
) -> Response<Body> {
    let recalled = (rounds > 0).then(|| {
        (
            HeaderName::from_static("x-abridge-recalled"),
            HeaderValue::from(rounds),
        )
    });
    let extra = extra.iter().cloned().chain(recalled);
    to_client(status, head, extra, Body::from(body))
}
