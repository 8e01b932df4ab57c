//! Taking a request in: its body within the size and time limits, and
//! room in the memory budgets for holding and compacting it.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, Response, StatusCode, header};
use futures_util::StreamExt as _;

use crate::budget::Reservation;
use crate::forward::proxy_error;
use crate::listen::ReadingBody;
use crate::metrics::Budgeted;
use crate::route::Provider;
use crate::shared::App;

/// The request's body, within the size and time limits, and the room it
/// holds in `[serve] max_receiving_megabytes` until the request is done.
pub(crate) async fn read_body(
    app: &App,
    provider: Provider,
    parts: &axum::http::request::Parts,
    body: Body,
) -> Result<(Bytes, Reservation), Response<Body>> {
    let limit = app.config.serve.max_body_bytes();
    let reading = ReadingBody::start(&parts.extensions, &app.readers);
    let too_large = || {
        let mb = app.config.serve.max_body_megabytes;
        proxy_error(
            provider,
            StatusCode::PAYLOAD_TOO_LARGE,
            &format!(
                "request body exceeds the proxy's limit of {mb} MB ([serve] max_body_megabytes)"
            ),
        )
    };
    let declared = parts
        .headers
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
    if declared.is_some_and(|n| n > limit) {
        return Err(too_large());
    }
    let wait = app.config.serve.body_timeout();
    let deadline = tokio::time::Instant::now() + wait;
    // Room for its first bytes, waiting in arrival order while others hold
    // the budget; more as more arrives. Room held by a body that stopped
    // arriving goes to one that arrives.
    let room = match app.receiving.reserve(0, Duration::ZERO).await {
        Some(room) => Some(room),
        None => {
            reading.close_stalled();
            app.receiving.reserve(0, wait).await
        }
    };
    let Some(mut room) = room else {
        return Err(busy(app, provider, Budgeted::Receiving));
    };
    reading.holds_room();
    let read = async {
        let mut bytes = Vec::new();
        let mut unmarked = 0;
        let mut frames = body.into_data_stream();
        while let Some(frame) = frames.next().await {
            let frame = frame.map_err(|_| Unread::Broken)?;
            let len = bytes.len() + frame.len();
            if len > limit {
                return Err(Unread::TooLarge);
            }
            unmarked += frame.len();
            if unmarked >= PROGRESS_BYTES {
                reading.progressed();
                unmarked = 0;
            }
            if !room.grow_to(len, Duration::ZERO).await {
                reading.close_stalled();
                reading.progressed();
                if !room.grow_to(len, GROW_WAIT).await {
                    return Err(Unread::NoRoom);
                }
            }
            if bytes.is_empty() {
                // Allocated once bytes come, not on the client's word.
                bytes.reserve_exact(declared.unwrap_or(0).max(len));
            }
            bytes.extend_from_slice(&frame);
        }
        Ok(Bytes::from(bytes))
    };
    let secs = app.config.serve.body_timeout_secs;
    match tokio::time::timeout_at(deadline, read).await {
        Ok(Ok(bytes)) => Ok((bytes, room)),
        Ok(Err(Unread::TooLarge)) => Err(too_large()),
        Ok(Err(Unread::NoRoom)) => Err(busy(app, provider, Budgeted::Receiving)),
        Ok(Err(Unread::Broken)) => Err(proxy_error(
            provider,
            StatusCode::BAD_REQUEST,
            "the request body could not be read",
        )),
        Err(_) => Err(proxy_error(
            provider,
            StatusCode::REQUEST_TIMEOUT,
            &format!("the request body did not arrive within {secs} s ([serve] body_timeout_secs)"),
        )),
    }
}

/// How long bytes that find no room in `[serve] max_receiving_megabytes`
/// wait in the connection for some before the body is refused (see `budget`).
const GROW_WAIT: Duration = Duration::from_secs(1);

/// Bytes that count as a body's progress: one that trickles less in a
/// second is stalled (see `listen::Readers`).
const PROGRESS_BYTES: usize = 16 * 1024;

/// Why a body was not read.
enum Unread {
    /// Over `[serve] max_body_megabytes`.
    TooLarge,
    /// No room in `[serve] max_receiving_megabytes`.
    NoRoom,
    /// The connection failed part-way.
    Broken,
}

/// Room to compact a body of `bytes` in, waiting for it up to the body
/// timeout (see `budget`).
pub(crate) async fn room_to_compact(
    app: &App,
    provider: Provider,
    bytes: usize,
) -> Option<Reservation> {
    let room = app
        .budget
        .reserve(bytes, app.config.serve.body_timeout())
        .await;
    if room.is_none() {
        tracing::warn!(
            provider = provider.as_str(),
            bytes,
            "no room to compact the request: [serve] max_preparing_megabytes is held by others"
        );
    }
    room
}

/// The answer to a request that found no room in `budget`.
pub(crate) fn busy(app: &App, provider: Provider, budget: Budgeted) -> Response<Body> {
    let (mb, key, holders) = match budget {
        Budgeted::Preparing => {
            app.budget.busy();
            let mb = app.config.serve.max_preparing_megabytes;
            (
                mb,
                "max_preparing_megabytes",
                "the requests being compacted",
            )
        }
        Budgeted::Receiving => {
            app.receiving.busy();
            let mb = app.config.serve.max_receiving_megabytes;
            (mb, "max_receiving_megabytes", "the request bodies held")
        }
    };
    let mut r = proxy_error(
        provider,
        StatusCode::SERVICE_UNAVAILABLE,
        &format!("the proxy is busy: {holders} take its {mb} MB ([serve] {key}); retry shortly"),
    );
    // The SDKs retry a 503, after this when it is given.
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    r
}
