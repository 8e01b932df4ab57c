//! Connections, played as a careless or hostile client would: connections
//! that send nothing, half a head or half a body, past the limit, while
//! normal requests must still be answered promptly; and the timeouts that
//! close them.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use abridge_proxy::ProxyConfig;
use abridge_testkit::{Mock, Reply};

use crate::support::{raw_request, serve_config};

fn config(upstream: &str, max: usize, header: f64, body: f64) -> ProxyConfig {
    let mut c = ProxyConfig::default();
    c.serve.openai_upstream = format!("{upstream}/v1");
    c.serve.anthropic_upstream = upstream.to_owned();
    c.serve.gemini_upstream = String::new();
    c.serve.max_connections = max;
    c.serve.header_timeout_secs = header;
    c.serve.body_timeout_secs = body;
    c
}

fn connect(proxy: &str) -> TcpStream {
    let s = TcpStream::connect(proxy.trim_start_matches("http://")).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

/// Files this process has open (Linux), to see how many connections the
/// server kept.
fn open_files() -> Option<usize> {
    std::fs::read_dir("/proc/self/fd").ok().map(|d| d.count())
}

/// A whole request on a new connection: its status and how long it took.
fn timed_get(proxy: &str, path: &str) -> (u16, Duration) {
    let start = Instant::now();
    let (status, _) = raw_request(proxy, "127.0.0.1", "GET", path, &[]);
    (status, start.elapsed())
}

/// Reads until the server closes the connection; how long that took.
fn closed_within(mut s: TcpStream, limit: Duration) -> Option<(Duration, String)> {
    let start = Instant::now();
    s.set_read_timeout(Some(limit)).unwrap();
    let mut out = Vec::new();
    match s.read_to_end(&mut out) {
        Ok(_) => Some((start.elapsed(), String::from_utf8_lossy(&out).into_owned())),
        Err(_) => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_and_slow_connections_past_the_limit_starve_no_request() {
    let upstream = Mock::serve(|_| Some(Reply::Http(200, "{}".into(), Vec::new())));
    // Timeouts far away: only making room can answer the newcomers.
    let (proxy, stop, done) = serve_config(config(&upstream.url, 32, 60.0, 60.0), None).await;
    let proxy2 = proxy.clone();
    let report = tokio::task::spawn_blocking(move || {
        let proxy = proxy2;
        let before = open_files();
        let mut held = Vec::new();
        for _ in 0..100 {
            held.push(connect(&proxy)); // sends nothing
        }
        for _ in 0..50 {
            let mut s = connect(&proxy);
            s.write_all(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Ty")
                .unwrap();
            held.push(s);
        }
        for _ in 0..50 {
            let mut s = connect(&proxy);
            s.write_all(
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"messages\":",
            )
            .unwrap();
            held.push(s);
        }
        // Let the bodies count as stalled.
        std::thread::sleep(Duration::from_millis(1300));
        // This process holds both ends: the clients' 200, and at most 32
        // of the server's (plus a few of its own).
        if let (Some(before), Some(now)) = (before, open_files()) {
            assert!(now - before <= 200 + 32 + 8, "{} files opened", now - before);
        }
        let answers: Vec<(u16, Duration)> =
            (0..10).map(|_| timed_get(&proxy, "/healthz")).collect();
        drop(held);
        answers
    })
    .await
    .unwrap();
    for (status, took) in report {
        assert_eq!(status, 200);
        assert!(took < Duration::from_secs(1), "a request waited {took:?}");
    }
    let _ = stop.send(());
    let _ = done.await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_idle_and_slow_body_connections_time_out() {
    let upstream = Mock::serve(|_| Some(Reply::Http(200, "{}".into(), Vec::new())));
    let (proxy, stop, done) = serve_config(config(&upstream.url, 64, 1.0, 1.0), None).await;
    let proxy2 = proxy.clone();
    tokio::task::spawn_blocking(move || {
        let proxy = proxy2;
        // Nothing sent: closed after the header timeout.
        let (took, _) = closed_within(connect(&proxy), Duration::from_secs(5)).expect("closed");
        assert!(took < Duration::from_secs(3), "{took:?}");
        // Half a head: the same.
        let mut s = connect(&proxy);
        s.write_all(b"GET /healthz HTTP/1.1\r\nHo").unwrap();
        assert!(closed_within(s, Duration::from_secs(5)).is_some());
        // A kept-alive connection idle after its request: the same.
        let mut s = connect(&proxy);
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
        let (took, text) = closed_within(s, Duration::from_secs(5)).expect("closed");
        assert!(text.starts_with("HTTP/1.1 200"), "{text}");
        assert!(took < Duration::from_secs(3), "{took:?}");
        // Half a body: 408, naming the limit.
        let mut s = connect(&proxy);
        s.write_all(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 500\r\n\r\n{")
            .unwrap();
        let (_, text) = closed_within(s, Duration::from_secs(5)).expect("answered");
        assert!(text.starts_with("HTTP/1.1 408"), "{text}");
        assert!(text.contains("body_timeout_secs"), "{text}");
    })
    .await
    .unwrap();
    assert!(upstream.requests().is_empty());
    let _ = stop.send(());
    let _ = done.await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_every_connection_is_at_work_a_new_one_hears_why() {
    // An upstream that hangs: the two requests stay at work.
    let upstream = Mock::serve(|_| Some(Reply::Hang(Duration::from_secs(5))));
    let (proxy, stop, done) = serve_config(config(&upstream.url, 2, 60.0, 60.0), None).await;
    let proxy2 = proxy.clone();
    tokio::task::spawn_blocking(move || {
        let proxy = proxy2;
        let mut busy = Vec::new();
        for _ in 0..2 {
            let mut s = connect(&proxy);
            s.write_all(b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                .unwrap();
            busy.push(s);
        }
        std::thread::sleep(Duration::from_millis(300));
        let mut s = connect(&proxy);
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            .unwrap();
        let (_, text) = closed_within(s, Duration::from_secs(5)).expect("answered");
        assert!(text.starts_with("HTTP/1.1 503"), "{text}");
        assert!(text.contains("max_connections"), "{text}");
        drop(busy);
    })
    .await
    .unwrap();
    let _ = stop.send(());
    let _ = done.await;
}
