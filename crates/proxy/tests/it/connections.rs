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

/// Connections the server at `port` holds open (Linux): sockets whose
/// local port is the server's, listener and closed ones aside. Counted
/// from the kernel's table rather than this process's open files, which
/// the tests running beside this one change.
fn server_connections(port: u16) -> Option<usize> {
    let mut n = 0;
    for table in ["/proc/self/net/tcp", "/proc/self/net/tcp6"] {
        let text = std::fs::read_to_string(table).ok()?;
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            let local_port = f.get(1).and_then(|a| a.rsplit(':').next());
            let held = f.get(9).is_some_and(|inode| *inode != "0");
            let listening = f.get(3) == Some(&"0A");
            if local_port.and_then(|p| u16::from_str_radix(p, 16).ok()) == Some(port)
                && held
                && !listening
            {
                n += 1;
            }
        }
    }
    Some(n)
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
        // Let the bodies count as stalled, and the connections refused
        // while every kept one was at work (a loaded machine parses the
        // slow bodies' heads before the last connections arrive) be let go:
        // a refusal holds its socket up to 2 s to be read.
        std::thread::sleep(Duration::from_millis(2500));
        // Of the 200 connections, the server keeps at most 32.
        let port = proxy.rsplit(':').next().and_then(|p| p.parse().ok()).unwrap();
        if let Some(kept) = server_connections(port) {
            assert!(kept <= 32, "the server holds {kept} connections");
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

/// Sends a POST head for a body of `len` bytes (chunked when `None`) and
/// `part` of it, leaving the rest unsent (a whole body for `/v1/files`).
fn half_a_body(proxy: &str, len: Option<usize>, part: &[u8]) -> TcpStream {
    let mut s = connect(proxy);
    let path = match len {
        Some(n) if n == part.len() => "/v1/files",
        _ => "/v1/chat/completions",
    };
    let length = match len {
        Some(n) => format!("Content-Length: {n}\r\n"),
        None => "Transfer-Encoding: chunked\r\n".to_owned(),
    };
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: application/json\r\n{length}\r\n"
    );
    s.write_all(head.as_bytes()).unwrap();
    match len {
        Some(_) => s.write_all(part).unwrap(),
        None => s
            .write_all(format!("{:x}\r\n", part.len()).as_bytes())
            .and_then(|()| s.write_all(part))
            .and_then(|()| s.write_all(b"\r\n"))
            .unwrap(),
    }
    s
}

/// The receiving budget once every body is done: `busy` requests refused
/// for want of room, and nothing held.
async fn assert_receiving(proxy: &str, busy: f64) {
    let m = crate::support::metrics_text(proxy).await;
    let metric = |name| crate::support::metric(&m, name);
    assert_eq!(metric("abridge_receiving_busy_total"), busy, "{m}");
    assert_eq!(metric("abridge_receiving_bytes"), 0.0, "{m}");
}

/// What `s` received before it was closed or reset (empty then); panics
/// when it is still open after `limit`.
fn ended(mut s: TcpStream, limit: Duration) -> String {
    s.set_read_timeout(Some(limit)).unwrap();
    let mut out = Vec::new();
    if let Err(e) = s.read_to_end(&mut out) {
        let open = matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        );
        assert!(!open, "still open after {limit:?}");
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A body that stopped coming (a byte now and then is a stall) gives its
/// room to one that arrives while the budget is full: its connection is
/// closed unanswered, and the new body is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_body_gives_its_room_to_one_that_arrives() {
    let upstream = Mock::serve(|_| Some(Reply::Http(200, "{}".into(), Vec::new())));
    // The body timeout far away: only closing the stalled body makes room.
    let mut c = config(&upstream.url, 64, 60.0, 30.0);
    c.serve.max_receiving_megabytes = 1;
    let (proxy, stop, done) = serve_config(c, None).await;
    let proxy2 = proxy.clone();
    tokio::task::spawn_blocking(move || {
        let proxy = proxy2;
        // 900 KB of an announced 1,000 KB, then a byte now and then: a
        // trickle is a stall.
        let mut staller = half_a_body(&proxy, Some(1000 * 1024), &vec![b' '; 900 * 1024]);
        staller.flush().unwrap();
        let mut trickle = staller.try_clone().unwrap();
        std::thread::spawn(move || {
            while trickle.write_all(b" ").is_ok() {
                std::thread::sleep(Duration::from_millis(200));
            }
        });
        std::thread::sleep(Duration::from_millis(1300));
        // 300 KB does not fit beside it: the stalled one gives way.
        let start = Instant::now();
        let body = format!("{{\"pad\":\"{}\"}}", "x".repeat(300 * 1024));
        let arriving = half_a_body(&proxy, Some(body.len()), body.as_bytes());
        let (_, text) = closed_within(arriving, Duration::from_secs(5)).expect("answered");
        assert!(text.starts_with("HTTP/1.1 200"), "{text}");
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "{:?}",
            start.elapsed()
        );
        // Closed without an answer.
        let text = ended(staller, Duration::from_secs(3));
        assert!(text.is_empty(), "{text}");
    })
    .await
    .unwrap();
    assert_receiving(&proxy, 0.0).await;
    let _ = stop.send(());
    let _ = done.await;
}

/// Bodies held at once stay within `[serve] max_receiving_megabytes`, from
/// their first byte until forwarded: one that says its length waits for
/// room before it is read (503 once the body timeout passes), a chunked one
/// that would go past it is refused at once, and room given back serves
/// the next.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_held_at_once_stay_within_the_receiving_budget() {
    // The large body's upstream answers late: its room is held meanwhile.
    let upstream = Mock::serve(|seen| match seen.path.ends_with("/files") {
        true => Some(Reply::Hang(Duration::from_secs(5))),
        false => Some(Reply::Http(200, "{}".into(), Vec::new())),
    });
    // Another provider's upstream, free while the first one hangs.
    let quick = Mock::serve(|_| Some(Reply::Http(200, "{}".into(), Vec::new())));
    let mut c = config(&upstream.url, 64, 60.0, 3.0);
    c.serve.anthropic_upstream = quick.url.clone();
    c.serve.max_receiving_megabytes = 1;
    let (proxy, stop, done) = serve_config(c, None).await;
    let proxy2 = proxy.clone();
    tokio::task::spawn_blocking(move || {
        let proxy = proxy2;
        // 0.9 MB, sent whole, forwarded to the late upstream.
        let body = format!("{{\"pad\":\"{}\"}}", "x".repeat(900 * 1024));
        let mut holder = half_a_body(&proxy, Some(body.len()), body.as_bytes());
        holder.flush().unwrap();
        std::thread::sleep(Duration::from_millis(300));
        // 8 MB announced and nothing sent: it holds no room, so a small
        // request is served at once beside it.
        let idle = half_a_body(&proxy, Some(8 << 20), b"");
        let start = Instant::now();
        let (status, _) = raw_request(&proxy, "127.0.0.1", "POST", "/v1/messages", &[]);
        assert_eq!(status, 200);
        assert!(
            start.elapsed() < Duration::from_secs(1),
            "{:?}",
            start.elapsed()
        );
        // Bytes past what is left wait a moment for room, then 503 naming
        // the budget: a body that says its length, and one that does not.
        for len in [Some(300 * 1024), None] {
            let part = vec![b' '; 300 * 1024];
            let (took, text) =
                closed_within(half_a_body(&proxy, len, &part), Duration::from_secs(5))
                    .expect("answered");
            assert!(text.starts_with("HTTP/1.1 503"), "{text}");
            assert!(text.contains("max_receiving_megabytes"), "{text}");
            assert!(text.to_lowercase().contains("retry-after: 1"), "{text}");
            assert!(
                took >= Duration::from_millis(800),
                "no wait for room: {took:?}"
            );
        }
        // The idle one ends: closed for the room it held, stalled, or at
        // the body timeout.
        let text = ended(idle, Duration::from_secs(5));
        assert!(
            text.is_empty() || text.starts_with("HTTP/1.1 408"),
            "{text}"
        );
        // Once the large one is answered, its room serves the next.
        let (_, text) = closed_within(holder, Duration::from_secs(10)).expect("answered");
        assert!(text.starts_with("HTTP/1.1 50"), "{text}");
        let (status, _) = raw_request(&proxy, "127.0.0.1", "POST", "/v1/models", &[]);
        assert_eq!(status, 200);
    })
    .await
    .unwrap();
    assert_receiving(&proxy, 2.0).await;
    let _ = stop.send(());
    let _ = done.await;
}
