//! The HTTP side: routes, the request path and the retry after an overflow.

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use abridge::Cancel;
use abridge::model::Wire;
use abridge::tokens::Reported;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, Response, StatusCode, header};
use axum::routing::{get, post};

use crate::forward::{OnUsage, Target, is_event_stream, proxy_error, relay};
use crate::metrics::{Budgeted, Passthrough, Route};
use crate::prepared::Prepared;
use crate::recall::{Onward, Resend};
use crate::receive::{busy, read_body, room_to_compact};
use crate::route::{self, Provider, Refused, origin_form};
use crate::session::SESSION_HEADER;
use crate::shared::App;
use crate::telemetry::Trace;

/// The proxy's routes.
pub(crate) fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/version", get(version))
        .route("/metrics", get(metrics))
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/responses", post(responses))
        .route("/v1/messages", post(messages))
        .fallback(other)
        .with_state(app)
}

/// Always 200 while the proxy answers: `ok`, or what is degraded (the
/// store not taking writes: requests are still answered from memory).
async fn healthz(State(app): State<Arc<App>>) -> Response<Body> {
    health(&app, StatusCode::OK)
}

/// 200 when warmed up and nothing is degraded, else 503 saying what.
async fn readyz(State(app): State<Arc<App>>) -> Response<Body> {
    if app.warmed.get().is_none() {
        let warming = "warming: building the tokenizer tables\n";
        return axum::response::IntoResponse::into_response((
            StatusCode::SERVICE_UNAVAILABLE,
            warming,
        ));
    }
    health(&app, StatusCode::SERVICE_UNAVAILABLE)
}

fn health(app: &App, degraded_status: StatusCode) -> Response<Body> {
    let degraded = app.store.as_ref().and_then(|s| s.degraded());
    let (status, text) = match degraded {
        None => (StatusCode::OK, "ok\n".to_owned()),
        Some((for_how_long, why, waiting)) => (
            degraded_status,
            format!(
                "degraded: the store has not taken writes for {:.1} s ({waiting} waiting, kept until it does): {why}\n",
                for_how_long.as_secs_f64()
            ),
        ),
    };
    let mut r = Response::new(Body::from(text));
    *r.status_mut() = status;
    r
}

/// `{"version": "…"}`: the release, the same as `abridge --version`
/// and the packages'.
async fn version() -> Response<Body> {
    let body = serde_json::json!({"name": "abridge", "version": env!("CARGO_PKG_VERSION")});
    let mut r = Response::new(Body::from(body.to_string()));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

async fn metrics(State(app): State<Arc<App>>) -> Response<Body> {
    app.metrics.sessions(app.sessions.len());
    let queued = app.store.as_ref().map_or(0, |s| s.queued());
    app.metrics
        .memory_and_queue(app.engines.originals().size().1, queued);
    let mut r = Response::new(Body::from(app.metrics.render()));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
    );
    r
}

async fn chat_completions(State(app): State<Arc<App>>, req: Request) -> Response<Body> {
    conversation(app, Wire::Chat, req).await
}

async fn responses(State(app): State<Arc<App>>, req: Request) -> Response<Body> {
    conversation(app, Wire::Responses, req).await
}

async fn messages(State(app): State<Arc<App>>, req: Request) -> Response<Body> {
    conversation(app, Wire::Anthropic, req).await
}

/// A Gemini conversation (`…/models/{model}:generateContent` and
/// `:streamGenerateContent`, which no fixed route can match), or any other
/// path and method: forwarded untouched to its provider's upstream (among
/// them the Responses API's `/v1/responses/compact`, the provider's own
/// compaction, whose compaction items then tell abridge to leave that
/// history alone, and the rest of the Gemini API: `countTokens`, models,
/// files, cached contents). Logged once per tenant and path, counted every
/// time.
async fn other(State(app): State<Arc<App>>, req: Request) -> Response<Body> {
    if req.method() == Method::POST && route::gemini_conversation(req.uri().path()).is_some() {
        return conversation(app, Wire::Gemini, req).await;
    }
    let (parts, body) = req.into_parts();
    let provider = route::provider_of(parts.uri.path(), &parts.headers, parts.uri.query());
    let response = match target(&app, provider, &parts.uri) {
        Err(why) => refused(&app, provider, &parts.uri, why),
        Ok(target) => match read_body(&app, provider, &parts, body).await {
            Err(r) => r,
            Ok((bytes, _held)) => {
                let tenant = app.secret.tenant_of(&parts.headers, parts.uri.query());
                app.passthroughs.note(tenant.as_str(), &parts, provider);
                app.metrics.passthrough(Passthrough::Unmodeled);
                let sent = app
                    .upstream
                    .send(parts.method, &target, &parts.headers, bytes, false)
                    .await;
                match sent {
                    Ok(r) => relay(r, None, app.metrics.clone(), Vec::new()),
                    Err(e) => upstream_failed(provider, &e),
                }
            }
        },
    };
    app.metrics
        .request(Route::OTHER, response.status().as_u16());
    response
}

/// Where a request goes.
fn target(app: &App, provider: Provider, uri: &axum::http::Uri) -> Result<Target, Refused> {
    app.upstream.target(provider, origin_form(uri)?)
}

/// The client's error saying why its request goes nowhere (logged, counted).
fn refused(app: &App, provider: Provider, uri: &axum::http::Uri, why: Refused) -> Response<Body> {
    let status = match why {
        Refused::Escape(_) => StatusCode::BAD_REQUEST,
        Refused::NoUpstream(_) => StatusCode::NOT_IMPLEMENTED,
    };
    tracing::warn!(provider = provider.as_str(), path = uri.path(), %why, "request refused");
    app.metrics.refused(provider);
    proxy_error(provider, status, &why.to_string())
}

async fn conversation(app: Arc<App>, wire: Wire, req: Request) -> Response<Body> {
    let start = Instant::now();
    let (parts, body) = req.into_parts();
    let provider = Provider::of_wire(wire);
    let response = match target(&app, provider, &parts.uri) {
        Err(why) => refused(&app, provider, &parts.uri, why),
        Ok(target) => match read_body(&app, provider, &parts, body).await {
            Err(r) => r,
            Ok((bytes, _held)) => {
                let request = Outgoing {
                    method: parts.method,
                    uri: parts.uri,
                    headers: parts.headers,
                    target,
                };
                compact_and_send(&app, wire, request, bytes, start).await
            }
        },
    };
    app.metrics
        .request(Route(Some(wire)), response.status().as_u16());
    response
}

/// Runs `work` on a blocking thread with a flag that is set if this
/// future is dropped first (the server drops a request's future when its
/// client closes the connection): the work stops at its next check instead
/// of running on for nobody.
async fn while_client_waits<T: Send + 'static>(
    work: impl FnOnce(&Cancel) -> T + Send + 'static,
) -> Result<T, tokio::task::JoinError> {
    let cancel = Cancel::new();
    let guard = cancel.on_drop();
    let done = tokio::task::spawn_blocking(move || work(&cancel)).await;
    guard.disarm();
    done
}

/// A conversation request on its way: what the client sent it with, and
/// where it goes.
struct Outgoing {
    method: Method,
    uri: axum::http::Uri,
    headers: HeaderMap,
    target: Target,
}

async fn compact_and_send(
    app: &Arc<App>,
    wire: Wire,
    request: Outgoing,
    bytes: Bytes,
    start: Instant,
) -> Response<Body> {
    let Outgoing {
        method,
        uri,
        mut headers,
        target,
    } = request;
    let provider = Provider::of_wire(wire);
    let trace = Trace::start(&app.telemetry, &headers, provider, &target.url);
    let response = send_traced(
        app,
        wire,
        (method, uri, &mut headers, target),
        bytes,
        start,
        &trace,
    )
    .await;
    trace.end_unless_handed_off(response.status().as_u16());
    response
}

async fn send_traced(
    app: &Arc<App>,
    wire: Wire,
    (method, uri, headers, target): (Method, axum::http::Uri, &mut HeaderMap, Target),
    bytes: Bytes,
    start: Instant,
    trace: &Trace,
) -> Response<Body> {
    let family = wire.family();
    let mut prepared = match prepare(app, wire, (headers, &uri, &bytes), start, trace).await {
        Ok(p) => p,
        Err(response) => return response,
    };
    // The upstream sees this request's span as its parent.
    trace.inject(headers);
    let headers = &*headers;
    let body = prepared.body().cloned().unwrap_or_else(|| bytes.clone());
    let sent = Instant::now();
    let mut upstream = match app
        .upstream
        .send(method.clone(), &target, headers, body, true)
        .await
    {
        Ok(r) => r,
        Err(e) => return upstream_failed(family, &e),
    };
    app.metrics.upstream(sent.elapsed().as_secs_f64());
    let mut extra = response_headers(&prepared);
    if is_overflow_status(upstream.status()) && app.config.serve.retry_on_overflow {
        let sent = (method.clone(), &target, headers, (&uri, &bytes));
        upstream = match retry_overflow(app, wire, sent, &mut prepared, upstream, &mut extra).await
        {
            Ok(r) => r,
            Err(response) => return response,
        };
    }
    trace.status(upstream.status().as_u16());
    let on_usage = on_usage(app, &prepared, trace);
    match prepared.take_recall() {
        Some(mut r) if upstream.status().is_success() => {
            if r.tool.compact.is_some()
                && let Some(t) = prepared.turn()
            {
                r.compact = Some(compact_fn(app, t.session.clone(), wire, (uri, bytes)));
            }
            let onward = Onward {
                resend: Resend {
                    upstream: app.upstream.clone(),
                    method,
                    target,
                    headers: headers.clone(),
                },
                metrics: app.metrics.clone(),
                trace: trace.clone(),
                on_usage,
                extra,
            };
            let stream = is_event_stream(upstream.headers());
            r.api.respond(r, upstream, onward, stream).await
        }
        _ => relay(
            upstream,
            on_usage.map(|f| (family, f)),
            app.metrics.clone(),
            extra,
        ),
    }
}

/// The request compacted off the runtime while the client waits, within
/// the room bodies being compacted may take, its time and compaction
/// traced. `Err`: the answer instead (busy, or refused by the route table).
async fn prepare(
    app: &Arc<App>,
    wire: Wire,
    (headers, uri, bytes): (&HeaderMap, &axum::http::Uri, &Bytes),
    start: Instant,
    trace: &Trace,
) -> Result<Prepared, Response<Body>> {
    let provider = Provider::of_wire(wire);
    let Some(room) = room_to_compact(app, provider, bytes.len()).await else {
        return Err(busy(app, provider, Budgeted::Preparing));
    };
    let preparing = SystemTime::now();
    let prepared = {
        let (app, headers, bytes, uri) = (app.clone(), headers.clone(), bytes.clone(), uri.clone());
        while_client_waits(move |cancel| app.context(cancel).prepare(wire, &headers, &uri, &bytes))
            .await
            .unwrap_or_else(|e| Prepared::as_sent(format!("compaction stopped: {e}")))
    };
    drop(room);
    if let Prepared::Refused(why) = &prepared {
        return Err(proxy_error(wire.family(), StatusCode::BAD_REQUEST, why));
    }
    app.metrics.added(start.elapsed().as_secs_f64());
    if let Some(t) = prepared.turn() {
        trace.model(t.request.model.as_deref());
        if let Some(r) = t.report.as_ref().filter(|r| r.compacted) {
            trace.compaction(preparing, r);
        }
    }
    Ok(prepared)
}

/// The upstream refused the request as too long: compacted harder (when
/// there is room to) and sent again, without the recall tool, marked
/// `x-abridge-retried`. `Err` is the response to give the client: the
/// upstream's own refusal when nothing smaller could be made, or the retry's
/// failure.
async fn retry_overflow(
    app: &Arc<App>,
    wire: Wire,
    (method, target, headers, (uri, bytes)): (
        Method,
        &Target,
        &HeaderMap,
        (&axum::http::Uri, &Bytes),
    ),
    prepared: &mut Prepared,
    upstream: reqwest::Response,
    extra: &mut Vec<(HeaderName, HeaderValue)>,
) -> Result<reqwest::Response, Response<Body>> {
    let family = wire.family();
    let status = upstream.status();
    let head = upstream.headers().clone();
    let text = upstream.bytes().await.unwrap_or_default();
    let retry = match prepared.turn() {
        Some(t) if is_overflow_body(&text) => {
            let (app2, s, tokens) = (app.clone(), t.session.clone(), t.tokens);
            let (uri, bytes) = (uri.clone(), bytes.clone());
            // Without room to compact again, the upstream's answer goes back.
            match room_to_compact(app, Provider::of_wire(wire), bytes.len()).await {
                Some(room) => {
                    let shrunk = while_client_waits(move |cancel| {
                        app2.context(cancel)
                            .shrink(&s, (wire, &uri, &bytes), tokens)
                    })
                    .await;
                    drop(room);
                    shrunk.ok().flatten()
                }
                None => None,
            }
        }
        _ => None,
    };
    let Some(body) = retry else {
        return Err(buffered(status, &head, text, std::mem::take(extra)));
    };
    // The retried body is compacted anew, without the recall tool.
    prepared.take_recall();
    extra.push((
        HeaderName::from_static("x-abridge-retried"),
        HeaderValue::from_static("overflow"),
    ));
    app.upstream
        .send(method, target, headers, body, true)
        .await
        .map_err(|e| upstream_failed(family, &e))
}

/// Compacts `session` when the agent calls the compact tool in a response
/// to the request `bytes`, off the runtime, while the client waits.
fn compact_fn(
    app: &Arc<App>,
    session: crate::session::Shared,
    wire: Wire,
    (uri, bytes): (axum::http::Uri, Bytes),
) -> crate::recall::CompactFn {
    let app = app.clone();
    Arc::new(move |req| {
        let (app, session) = (app.clone(), session.clone());
        let (uri, bytes) = (uri.clone(), bytes.clone());
        Box::pin(async move {
            while_client_waits(move |cancel| {
                app.context(cancel)
                    .compact_requested(&session, (wire, &uri, &bytes), req)
            })
            .await
            .unwrap_or_else(|e| crate::recall::Compacted {
                body: None,
                searchable: None,
                answer: abridge::recall::Answer::note(format!("Could not compact: {e}"), true),
            })
        })
    })
}

/// The headers that tell the client what the proxy did.
fn response_headers(p: &Prepared) -> Vec<(HeaderName, HeaderValue)> {
    let mut out = Vec::new();
    if let Some(id) = p.session_id()
        && let Ok(v) = HeaderValue::from_str(&id.0)
    {
        out.push((HeaderName::from_static(SESSION_HEADER), v));
    }
    let report = p.turn().and_then(|t| t.report.as_ref());
    if let Some(r) = report.filter(|r| r.compacted)
        && let Ok(v) = HeaderValue::from_str(&format!("{} -> {}", r.tokens_before, r.tokens_after))
    {
        out.push((HeaderName::from_static("x-abridge-compacted"), v));
    }
    if let Some(r) = report.filter(|r| !r.degraded.is_empty()) {
        let rungs: Vec<String> = r
            .degraded
            .iter()
            .map(|d| format!("{}={}", d.rung.as_str(), d.count))
            .collect();
        if let Ok(v) = HeaderValue::from_str(&rungs.join(", ")) {
            out.push((HeaderName::from_static("x-abridge-degraded"), v));
        }
    }
    if matches!(p, Prepared::AsSent(a) if a.handover.is_some()) {
        out.push((
            HeaderName::from_static("x-abridge-handover"),
            HeaderValue::from_static("provider-compaction"),
        ));
    }
    if let Some(w) = p.warning() {
        let clean: String = w
            .chars()
            .filter(|c| c.is_ascii() && !c.is_ascii_control())
            .take(300)
            .collect();
        if let Ok(v) = HeaderValue::from_str(&clean) {
            out.push((HeaderName::from_static("x-abridge-warning"), v));
        }
    }
    out
}

/// When the response ends: the provider's usage calibrates the session,
/// and the request goes to the request log (off the request path).
fn on_usage(app: &App, p: &Prepared, trace: &Trace) -> Option<OnUsage> {
    let t = p.turn()?;
    trace.hand_off();
    let trace = trace.clone();
    let slot = t.usage.clone();
    let store = app.store.clone();
    let metrics = app.metrics.clone();
    let (mut request, basis) = (t.request.clone(), t.basis);
    let recalls = t.recall.as_ref().map(|r| r.answered.clone());
    Some(Box::new(move |replied| {
        let u = replied.usage;
        if let Some(u) = &u {
            slot.set(Reported::new(u.prompt_tokens()));
        }
        trace.response_model(replied.model.as_deref());
        crate::account::settle(&mut request, u.as_ref(), &basis);
        if let Some(cost) = request.account.cost {
            slot.spend(cost);
        }
        request.recalls = recalls.map_or(0, |n| n.load(std::sync::atomic::Ordering::Relaxed));
        metrics.accounts.add(&request);
        trace.finish(u.as_ref(), Some(&request));
        if let Some(store) = store {
            store.log_request(request);
        }
    }))
}

fn upstream_failed(provider: impl Into<Provider>, e: &reqwest::Error) -> Response<Body> {
    let (status, what) = if e.is_timeout() {
        (StatusCode::GATEWAY_TIMEOUT, "upstream timed out")
    } else {
        (StatusCode::BAD_GATEWAY, "upstream unreachable")
    };
    tracing::warn!(error = %e, "{what}");
    proxy_error(provider, status, &format!("{what}: {e}"))
}

/// An upstream answer read whole (to look at it), returned as it was.
fn buffered(
    status: reqwest::StatusCode,
    headers: &HeaderMap,
    body: Bytes,
    extra: Vec<(HeaderName, HeaderValue)>,
) -> Response<Body> {
    crate::forward::to_client(status, headers, extra, Body::from(body))
}

fn is_overflow_status(s: reqwest::StatusCode) -> bool {
    s == reqwest::StatusCode::BAD_REQUEST || s == reqwest::StatusCode::PAYLOAD_TOO_LARGE
}

/// The providers' ways of saying a prompt is longer than the window.
fn is_overflow_body(body: &[u8]) -> bool {
    let text = String::from_utf8_lossy(body).to_ascii_lowercase();
    [
        "context_length_exceeded",
        "maximum context length",
        "prompt is too long",
        "context window",
        "too many tokens",
        "input is too long",
        "exceeds the maximum number of tokens",
    ]
    .iter()
    .any(|m| text.contains(m))
}
