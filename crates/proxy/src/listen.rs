//! Connections, bounded: the proxy's own accept loop. A connection has
//! `header_timeout` to send a request's head (on a kept-alive connection
//! too, so an idle one closes after it), a request `body_timeout` for its
//! body; at most `max_connections` are open, and when one more arrives the
//! oldest connection doing nothing (no request, or a body stalled for a
//! second) makes room; when every one is at work, the newcomer gets 503.
//! A body stalled for a second also gives up its connection when another
//! body needs the receiving room it holds ([`Readers`]).

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::http::Response;
use axum::middleware::Next;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, watch};
use tower::ServiceExt;

/// How long a body may stall before its connection counts as idle.
const STALLED: Duration = Duration::from_secs(1);

/// Longest a refused connection is kept to tell it why.
const REFUSAL: Duration = Duration::from_secs(2);

/// The limits a listener enforces.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub(crate) header_timeout: Duration,
    pub(crate) max_connections: usize,
}

/// One open connection, as the table and its requests see it.
#[derive(Debug, Default)]
pub(crate) struct Connection {
    /// Requests in flight (a response counts until its body is sent).
    in_flight: AtomicUsize,
    /// When its request's body last made progress (started, or bytes
    /// came; ms since the table's epoch, plus one; 0: not reading one).
    progress_at: AtomicU64,
    close: Notify,
}

impl Connection {
    /// When its body last made progress, if that was [`STALLED`] or more
    /// before `now`.
    fn stalled(&self, now: u64) -> Option<u64> {
        let at = self.progress_at.load(Ordering::Acquire);
        (at != 0 && now.saturating_sub(at) >= STALLED.as_millis() as u64).then_some(at)
    }
}

/// Milliseconds since the first call, plus one (0 means "not set").
fn now_ms() -> u64 {
    static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_millis() as u64 + 1
}

/// The open connections, oldest first.
struct Table {
    next: AtomicU64,
    open: Mutex<BTreeMap<u64, Arc<Connection>>>,
}

impl Table {
    /// Makes room for one more: closes the oldest connection doing nothing.
    /// False when every connection is at work.
    fn make_room(&self, max: usize) -> bool {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        if open.len() < max {
            return true;
        }
        let now = now_ms();
        let idle = open
            .iter()
            .find(|(_, c)| c.in_flight.load(Ordering::Acquire) == 0);
        let victim = idle.or_else(|| open.iter().find(|(_, c)| c.stalled(now).is_some()));
        let Some(id) = victim.map(|(id, _)| *id) else {
            return false;
        };
        // Out of the table now: it no longer counts, and is not picked again.
        if let Some(c) = open.remove(&id) {
            c.close.notify_one();
        }
        true
    }
}

/// Serves `router` on `listener` until `shutdown` resolves, then lets
/// in-flight requests finish.
pub(crate) async fn serve(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let table = Arc::new(Table {
        next: AtomicU64::new(0),
        open: Mutex::new(BTreeMap::new()),
    });
    let router = router.layer(axum::middleware::from_fn(track));
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors, or a connection that left
                    // before it was accepted: wait a little, go on.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        if !table.make_room(limits.max_connections) {
            tokio::spawn(refuse(stream, limits.max_connections));
            continue;
        }
        let id = table.next.fetch_add(1, Ordering::Relaxed);
        let conn = Arc::new(Connection::default());
        table
            .open
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, conn.clone());
        let (table, router, stop) = (table.clone(), router.clone(), stop_rx.clone());
        tokio::spawn(async move {
            run(stream, router, conn, limits, stop).await;
            table
                .open
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&id);
        });
    }
    let _ = stop_tx.send(true);
    // Every connection task holds a receiver: when they are gone, all ended.
    drop(stop_rx);
    stop_tx.closed().await;
    Ok(())
}

/// Serves one connection until it ends, is told to close, or the server stops.
async fn run(
    stream: TcpStream,
    router: Router,
    conn: Arc<Connection>,
    limits: Limits,
    mut stop: watch::Receiver<bool>,
) {
    let for_requests = conn.clone();
    let service = router.map_request(move |mut r: Request<hyper::body::Incoming>| {
        r.extensions_mut().insert(for_requests.clone());
        r.map(Body::new)
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .keep_alive(true);
    let served = builder.serve_connection(TokioIo::new(stream), TowerToHyperService::new(service));
    let mut served = std::pin::pin!(served);
    let mut stopping = false;
    loop {
        tokio::select! {
            _ = served.as_mut() => return,
            () = conn.close.notified() => return,
            changed = stop.changed(), if !stopping => {
                stopping = true;
                if changed.is_ok() {
                    served.as_mut().graceful_shutdown();
                }
            }
        }
    }
}

/// Answers a connection over the limit with 503 and closes it.
async fn refuse(stream: TcpStream, max: usize) {
    let body = format!(
        "{{\"error\":{{\"type\":\"abridge_proxy_error\",\"message\":\"the proxy has {max} connections at work ([serve] max_connections); retry shortly\"}}}}"
    );
    let text = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\nretry-after: 1\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut stream = stream;
    let _ = tokio::time::timeout(REFUSAL, async {
        if stream.write_all(text.as_bytes()).await.is_err() {
            return;
        }
        let _ = stream.shutdown().await;
        // Read what the client sent: closing with it unread would reset
        // the connection before the client reads the answer.
        let mut sink = [0u8; 4096];
        while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
    })
    .await;
}

/// Counts a request as in flight on its connection until its response's
/// body is sent or dropped.
async fn track(request: Request, next: Next) -> Response<Body> {
    let Some(conn) = request.extensions().get::<Arc<Connection>>().cloned() else {
        return next.run(request).await;
    };
    conn.in_flight.fetch_add(1, Ordering::AcqRel);
    let guard = InFlight(conn);
    let response = next.run(request).await;
    response.map(|body| {
        Body::new(Guarded {
            inner: body,
            _guard: guard,
        })
    })
}

/// The connections reading a request body now. When a body finds no
/// receiving room, the one whose body has been stalled longest (a second
/// at least) is closed and its room given back: room goes to bodies that
/// arrive, not to clients that announce one and stop sending.
#[derive(Default)]
pub(crate) struct Readers(Mutex<Vec<Arc<Connection>>>);

impl Readers {
    /// Closes the connection whose body has been stalled longest, if one
    /// has been for [`STALLED`] and is not `me`.
    fn close_stalled(&self, me: Option<&Arc<Connection>>) {
        let mut readers = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let now = now_ms();
        let victim = readers
            .iter()
            .enumerate()
            .filter(|(_, c)| me.is_none_or(|me| !Arc::ptr_eq(c, me)))
            .filter_map(|(i, c)| Some((i, c.stalled(now)?)))
            .min_by_key(|(_, at)| *at);
        if let Some((i, _)) = victim {
            readers.swap_remove(i).close.notify_one();
        }
    }

    fn remove(&self, conn: &Arc<Connection>) {
        let mut readers = self.0.lock().unwrap_or_else(|p| p.into_inner());
        readers.retain(|c| !Arc::ptr_eq(c, conn));
    }
}

/// Marks the body of a request as being read on its connection (a stalled
/// read lets the connection be closed to make room), until dropped.
pub(crate) struct ReadingBody<'a> {
    conn: Option<Arc<Connection>>,
    readers: &'a Readers,
}

impl<'a> ReadingBody<'a> {
    /// Starts, for a request served by [`serve`] (its connection in its
    /// extensions).
    pub(crate) fn start(extensions: &axum::http::Extensions, readers: &'a Readers) -> Self {
        let conn = extensions.get::<Arc<Connection>>().cloned();
        if let Some(c) = &conn {
            c.progress_at.store(now_ms(), Ordering::Release);
        }
        ReadingBody { conn, readers }
    }

    /// It holds receiving room now: closed when it stalls and another
    /// body needs that room.
    pub(crate) fn holds_room(&self) {
        if let Some(c) = &self.conn {
            let mut readers = self.readers.0.lock().unwrap_or_else(|p| p.into_inner());
            readers.push(c.clone());
        }
    }

    /// Bytes came, or it waits for room through no fault of its client:
    /// the body is not stalled.
    pub(crate) fn progressed(&self) {
        if let Some(c) = &self.conn {
            c.progress_at.store(now_ms(), Ordering::Release);
        }
    }

    /// Closes another body's connection that stalled (see [`Readers`]).
    pub(crate) fn close_stalled(&self) {
        self.readers.close_stalled(self.conn.as_ref());
    }
}

impl Drop for ReadingBody<'_> {
    fn drop(&mut self) {
        if let Some(c) = &self.conn {
            c.progress_at.store(0, Ordering::Release);
            self.readers.remove(c);
        }
    }
}

struct InFlight(Arc<Connection>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A response body that holds its request's place until it is done.
struct Guarded {
    inner: Body,
    _guard: InFlight,
}

impl http_body::Body for Guarded {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}
