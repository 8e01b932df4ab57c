//! Talking to the upstream: where a request goes, which headers travel,
//! and the response streamed back chunk by chunk with its usage read on
//! the way.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use abridge::model::Family;
use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, Response, StatusCode, header};
use futures_util::Stream;

use crate::config::ServeConfig;
use crate::error::{Error, Result};
use crate::metrics::Metrics;
use crate::route::{self, Base, Provider, Refused, without_query_key};
use crate::session::SESSION_HEADER;
use crate::usage::{Replied, UsageTap};

/// Headers that belong to one connection, never forwarded (RFC 9110 §7.6.1),
/// plus `host` and `content-length`, which the client sets anew.
const HOP_BY_HOP: [&str; 10] = [
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
];

/// The upstream APIs, fixed by configuration: one base per provider (none:
/// that provider's requests are refused).
#[derive(Debug, Clone)]
pub(crate) struct Upstream {
    client: reqwest::Client,
    /// Each provider's base, in [`Provider::ALL`]'s order (`None`: off).
    bases: Vec<Option<Base>>,
}

/// Where one request goes: its provider's upstream, at this URL.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    pub(crate) provider: Provider,
    pub(crate) url: String,
}

impl Upstream {
    /// A client for the configured upstreams.
    pub(crate) fn new(serve: &ServeConfig) -> Result<Self> {
        let client = abridge_llm::client_builder()
            .connect_timeout(serve.upstream_timeout())
            .read_timeout(serve.upstream_timeout())
            .build()
            .map_err(|e| Error::Client(e.to_string()))?;
        let base = |p: Provider| {
            Base::parse(serve.upstream(p))
                .map_err(|e| Error::Config(format!("[serve] {}: {e}", p.facts().upstream_key)))
        };
        let bases = Provider::ALL.into_iter().map(base).collect::<Result<_>>()?;
        Ok(Upstream { client, bases })
    }

    /// Where a request of `provider` for `path_and_query` goes: its base,
    /// less the part of the path the base holds (OpenAI's `/v1`). Refused
    /// when the provider has no upstream or the path could leave its base;
    /// a key parameter (Gemini's `key`) goes to its provider only.
    pub(crate) fn target(
        &self,
        provider: Provider,
        path_and_query: &str,
    ) -> Result<Target, Refused> {
        let base = self.bases[provider as usize]
            .as_ref()
            .ok_or(Refused::NoUpstream(provider))?;
        let facts = provider.facts();
        // A key parameter goes to the provider that takes keys there only.
        let rest = match facts.key_param {
            Some(_) => path_and_query.into(),
            None => without_query_key(path_and_query),
        };
        let rest = match rest.strip_prefix(facts.base_path) {
            _ if facts.base_path.is_empty() => rest.into_owned(),
            Some(r) if r.is_empty() || r.starts_with(['/', '?']) => r.to_owned(),
            Some(_) => return Err(Refused::Escape("a path that only starts like /v1")),
            None => rest.into_owned(),
        };
        let url = base.join(&rest)?;
        Ok(Target { provider, url })
    }

    /// Sends a request upstream with the client's end-to-end headers, less
    /// the credentials of other providers.
    pub(crate) async fn send(
        &self,
        method: Method,
        target: &Target,
        headers: &HeaderMap,
        body: Bytes,
        plain: bool,
    ) -> reqwest::Result<reqwest::Response> {
        let mut out = forwarded_headers(headers);
        route::keep_own_credentials(target.provider, &mut out);
        if plain {
            // The usage tap reads the body: ask for it uncompressed.
            out.remove(header::ACCEPT_ENCODING);
        }
        self.client
            .request(method, &target.url)
            .headers(out)
            .body(body)
            .send()
            .await
    }
}

/// The client's headers minus hop-by-hop ones (and those a `Connection`
/// header names) and the proxy's own.
pub(crate) fn forwarded_headers(headers: &HeaderMap) -> HeaderMap {
    let named: Vec<String> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|s| s.trim().to_ascii_lowercase())
        .collect();
    let mut out = HeaderMap::with_capacity(headers.len());
    for (name, value) in headers {
        let n = name.as_str();
        if HOP_BY_HOP.contains(&n) || n == SESSION_HEADER || named.iter().any(|c| c == n) {
            continue;
        }
        out.append(name.clone(), value.clone());
    }
    out
}

/// What to do with the usage a response reported (and the model it named).
pub(crate) type OnUsage = Box<dyn FnOnce(Replied) + Send>;

/// The upstream's response as the client's, streamed as it arrives; with
/// `tap`, its usage (read as `family` reports it) goes to the callback.
pub(crate) fn relay(
    upstream: reqwest::Response,
    tap: Option<(Family, OnUsage)>,
    metrics: Arc<Metrics>,
    extra: Vec<(HeaderName, HeaderValue)>,
) -> Response<Body> {
    let status = upstream.status();
    let head = upstream.headers().clone();
    // The body goes as it came: so does its length.
    let length = head.get(header::CONTENT_LENGTH).cloned();
    let stream = is_event_stream(&head);
    let body = Tapped {
        remaining: upstream.content_length(),
        inner: Box::pin(upstream.bytes_stream()),
        tap: tap.map(|(family, f)| (UsageTap::new(family, stream), f)),
        metrics,
        ended: false,
    };
    let mut response = to_client(status, &head, extra, Body::from_stream(body));
    if let Some(len) = length {
        response.headers_mut().insert(header::CONTENT_LENGTH, len);
    }
    response
}

/// The client's response: the upstream's status and end-to-end headers
/// (not its length: that is the body's the client gets), the proxy's own
/// headers, and `body`.
pub(crate) fn to_client(
    status: reqwest::StatusCode,
    upstream: &HeaderMap,
    extra: impl IntoIterator<Item = (HeaderName, HeaderValue)>,
    body: Body,
) -> Response<Body> {
    let mut headers = forwarded_headers(upstream);
    for (k, v) in extra {
        headers.insert(k, v);
    }
    let mut response = Response::new(body);
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    response
}

pub(crate) fn is_event_stream(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"))
}

type ByteStream = Pin<Box<dyn Stream<Item = reqwest::Result<Bytes>> + Send>>;

/// A response body passed through unchanged while its usage is read.
struct Tapped {
    /// Bytes still due when the upstream said how many: the server stops
    /// polling once it has them all, so the end is seen here, not as `None`.
    remaining: Option<u64>,
    inner: ByteStream,
    tap: Option<(UsageTap, OnUsage)>,
    metrics: Arc<Metrics>,
    ended: bool,
}

impl Stream for Tapped {
    type Item = reqwest::Result<Bytes>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let next = self.inner.as_mut().poll_next(cx);
        match &next {
            Poll::Ready(Some(Ok(chunk))) => {
                if let Some((tap, _)) = &mut self.tap {
                    tap.feed(chunk);
                }
                let len = chunk.len() as u64;
                if let Some(left) = self.remaining.as_mut() {
                    *left = left.saturating_sub(len);
                    if *left == 0 {
                        self.ended = true;
                        if let Some((tap, done)) = self.tap.take() {
                            done(tap.finish());
                        }
                    }
                }
            }
            Poll::Ready(Some(Err(_))) | Poll::Ready(None) => {
                self.ended = true;
                if let Some((tap, done)) = self.tap.take() {
                    done(tap.finish());
                }
            }
            Poll::Pending => {}
        }
        next
    }
}

impl Drop for Tapped {
    fn drop(&mut self) {
        if !self.ended {
            // The client went away: the upstream connection closes with us.
            // What the stream reported before goes on (a client may stop
            // reading at the event that completes the response, after its
            // usage).
            self.metrics.disconnect();
            if let Some((tap, done)) = self.tap.take() {
                done(tap.finish());
            }
        }
    }
}

/// An error the proxy itself answers with, in the provider's error shape.
pub(crate) fn proxy_error(
    provider: impl Into<Provider>,
    status: StatusCode,
    message: &str,
) -> Response<Body> {
    let body = match provider.into() {
        Provider::Anthropic => serde_json::json!({
            "type": "error",
            "error": {"type": "abridge_proxy_error", "message": message},
        }),
        Provider::OpenAi => serde_json::json!({
            "error": {"type": "abridge_proxy_error", "message": message, "code": status.as_u16()},
        }),
        Provider::Gemini => serde_json::json!({
            "error": {"code": status.as_u16(), "message": message, "status": "ABRIDGE_PROXY_ERROR"},
        }),
    };
    let mut response = Response::new(Body::from(body.to_string()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}
