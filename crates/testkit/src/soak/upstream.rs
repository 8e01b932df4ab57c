//! The soak's upstream: answers every API at once (whole or streamed, with
//! usage), and checks each request against the tenant whose key it
//! carries: no other tenant's text in it, no handle another tenant's
//! requests named; with `check`, valid for its API and its size counted.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use abridge_model::{Format, decode_as, validate};
use abridge_tokens::{TokenCounter, TokenizerKind};
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Response};
use axum::routing::post;
use serde_json::Value;

use super::agent::Agent;
use crate::provider::{handles_in, plain, sse};
use crate::reply::{Api, Reply};

/// What the upstream saw.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct UpstreamReport {
    /// Requests received.
    pub requests: u64,
    /// Requests that named another tenant's text.
    pub foreign_text: u64,
    /// Requests that named a handle another tenant's requests named.
    pub foreign_handles: u64,
    /// Requests without a key the soak gave out.
    pub unknown_key: u64,
    /// Requests not valid for their API (with `check`).
    pub invalid: u64,
    /// Requests over the bound, the trigger and 5% (with `check`).
    pub over_bound: u64,
    /// The largest request (with `check`), in `o200k_base` tokens.
    pub max_tokens: u64,
    /// The first few problems, said.
    pub problems: Vec<String>,
}

#[derive(Default)]
struct Seen {
    report: UpstreamReport,
    /// Each handle and the tenant whose request first named it.
    handles: HashMap<String, usize>,
}

struct Shared {
    check: bool,
    bound: u64,
    seen: Mutex<Seen>,
}

/// A running upstream.
pub(super) struct Upstream {
    pub(super) url: String,
    shared: Arc<Shared>,
}

impl Upstream {
    /// Starts on a free port; with `check`, requests over `bound` tokens
    /// are counted.
    pub(super) async fn start(check: bool, bound: u64) -> Upstream {
        let shared = Arc::new(Shared {
            check,
            bound,
            seen: Mutex::default(),
        });
        let app = Router::new()
            .route(Api::Chat.path(), post(chat))
            .route(Api::Responses.path(), post(responses))
            .route(Api::Messages.path(), post(messages))
            .route(Api::Gemini.path(), post(gemini))
            .layer(axum::extract::DefaultBodyLimit::disable())
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Upstream { url, shared }
    }

    pub(super) fn report(&self) -> UpstreamReport {
        self.shared.seen.lock().unwrap().report.clone()
    }
}

async fn chat(State(s): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response<Body> {
    answer(&s, Api::Chat, &headers, &body, false)
}

async fn responses(
    State(s): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response<Body> {
    answer(&s, Api::Responses, &headers, &body, false)
}

async fn messages(State(s): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response<Body> {
    answer(&s, Api::Messages, &headers, &body, false)
}

async fn gemini(
    State(s): State<Arc<Shared>>,
    axum::extract::Path(action): axum::extract::Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response<Body> {
    let stream = action.ends_with(":streamGenerateContent");
    answer(&s, Api::Gemini, &headers, &body, stream)
}

/// The tenant whose key a request carries.
fn tenant(headers: &HeaderMap) -> Option<usize> {
    let key = ["x-api-key", "x-goog-api-key"]
        .iter()
        .find_map(|h| headers.get(*h))
        .or_else(|| headers.get("authorization"))?
        .to_str()
        .ok()?;
    let key = key.strip_prefix("Bearer ").unwrap_or(key);
    key.strip_prefix("soak-key-")?.parse().ok()
}

/// The tenants whose markers a body holds.
fn markers(body: &[u8]) -> impl Iterator<Item = usize> + '_ {
    let prefix = Agent::marker(0);
    let prefix = prefix.trim_end_matches("0-").as_bytes().to_vec();
    let finder = memchr::memmem::Finder::new(&prefix).into_owned();
    let len = prefix.len();
    finder
        .find_iter(body)
        .collect::<Vec<_>>()
        .into_iter()
        .filter_map(move |at| {
            let digits: Vec<u8> = body[at + len..]
                .iter()
                .take_while(|b| b.is_ascii_digit())
                .copied()
                .collect();
            std::str::from_utf8(&digits).ok()?.parse().ok()
        })
}

fn answer(s: &Shared, api: Api, headers: &HeaderMap, body: &[u8], stream: bool) -> Response<Body> {
    let Ok(request) = serde_json::from_slice::<Value>(body) else {
        return plain(400, r#"{"error": {"message": "body is not JSON"}}"#);
    };
    let stream = stream || request.get("stream") == Some(&Value::Bool(true));
    let tokens = match s.check {
        true => check(s, api, body),
        false => body.len() as u64 / 4,
    };
    {
        let mut seen = s.seen.lock().unwrap();
        let seen = &mut *seen;
        let r = &mut seen.report;
        r.requests += 1;
        let problem = |r: &mut UpstreamReport, what: String| {
            if r.problems.len() < 10 {
                r.problems.push(what);
            }
        };
        match tenant(headers) {
            None => r.unknown_key += 1,
            Some(t) => {
                if let Some(other) = markers(body).find(|m| *m != t) {
                    r.foreign_text += 1;
                    problem(
                        r,
                        format!("tenant {t}'s request holds tenant {other}'s text"),
                    );
                }
                for (_, h) in handles_in(body) {
                    let owner = *seen.handles.entry(h.clone()).or_insert(t);
                    if owner != t {
                        r.foreign_handles += 1;
                        problem(
                            r,
                            format!("tenant {t}'s request names {h}, tenant {owner}'s"),
                        );
                    }
                }
            }
        }
    }
    let reply = Reply::for_request(&request, 1);
    if !stream {
        return plain(200, &reply.body(api, tokens).to_string());
    }
    let usage = api != Api::Chat
        || request.pointer("/stream_options/include_usage") == Some(&Value::Bool(true));
    sse(reply.events(api, tokens, usage), Duration::ZERO, false)
}

/// Checks a request as the provider would: its tokens, and whether it is
/// valid and within the bound.
fn check(s: &Shared, api: Api, body: &[u8]) -> u64 {
    let format = match api {
        Api::Chat => Format::Chat,
        Api::Responses => Format::Responses,
        Api::Messages => Format::Anthropic,
        Api::Gemini => Format::Gemini,
    };
    let (tokens, problem) = match decode_as(body, Some(format)) {
        Ok(mut convs) if convs.len() == 1 => {
            let conv = convs.remove(0);
            let tokens = TokenCounter::new(TokenizerKind::O200kBase)
                .count_conversation(&conv)
                .get();
            (tokens, validate(&conv).first().map(|v| v.to_string()))
        }
        Ok(_) => (0, Some("not one conversation".to_owned())),
        Err(e) => (0, Some(format!("does not decode: {e}"))),
    };
    let mut seen = s.seen.lock().unwrap();
    let r = &mut seen.report;
    r.max_tokens = r.max_tokens.max(tokens);
    if tokens > s.bound {
        r.over_bound += 1;
    }
    if let Some(p) = problem {
        r.invalid += 1;
        if r.problems.len() < 10 {
            r.problems.push(format!("{api:?}: {p}"));
        }
    }
    tokens
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_name_their_tenants() {
        let body = br#"{"a": "soak-tenant-3-x soak-tenant-12-y", "b": "soak-tenant-"}"#;
        assert_eq!(markers(body).collect::<Vec<_>>(), [3, 12]);
    }
}
