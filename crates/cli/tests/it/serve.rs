//! `abridge serve` as a process, watched from outside: the CPU it spends on
//! a request whose client has gone.

use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::support::Server;

/// CPU time (user + system, in clock ticks: 1/100 s on Linux) the process
/// has used so far.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name, which may hold spaces: state is the
    // first, utime the 12th, stime the 13th.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// A Chat Completions body of `n` one-word messages: far over any window,
/// and seconds of work to compact in a test build.
fn tiny_messages(n: usize) -> String {
    let mut body =
        String::from(r#"{"model":"gpt-4o","messages":[{"role":"system","content":"Be terse."}"#);
    for i in 0..n {
        let role = ["user", "assistant"][i % 2];
        body.push_str(&format!(r#",{{"role":"{role}","content":"w{}"}}"#, i % 10));
    }
    body.push_str("]}");
    body
}

/// `abridge serve` keeping nothing on disk, its upstream refusing.
fn serve_in_memory() -> Server {
    Server::start(&[
        "serve",
        "--no-store",
        "--listen",
        "127.0.0.1:0",
        "--openai-upstream",
        "http://127.0.0.1:9/v1",
    ])
}

fn metric(proxy: &Server, name: &str) -> Option<u64> {
    let (_, text) = proxy.get("/metrics");
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
}

#[test]
fn a_client_that_leaves_mid_compaction_stops_it_within_a_second_of_work() {
    if !std::path::Path::new("/proc/self/stat").exists() {
        eprintln!("skipped: needs /proc to read the server's CPU time");
        return;
    }
    let proxy = serve_in_memory();
    proxy.wait_ready();
    let pid = proxy.pid();
    let body = tiny_messages(200_000);
    let idle = cpu_ticks(pid);
    let mut client = TcpStream::connect(proxy.base.trim_start_matches("http://")).unwrap();
    write!(
        client,
        "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer sk-leaving\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .unwrap();
    client.write_all(body.as_bytes()).unwrap();
    // Leave once the proxy has spent 1.5 s of CPU on the request: into a
    // compaction that takes about 5 s of CPU in a test build.
    let deadline = Instant::now() + Duration::from_secs(120);
    while cpu_ticks(pid) < idle + 150 {
        assert!(Instant::now() < deadline, "the proxy never started working");
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(client);
    let left = cpu_ticks(pid);
    // The CPU it uses from then on, counted until it has been idle for a
    // second (CPU time, not the clock: a busy test machine cannot make it
    // pass or fail).
    let mut last = left;
    let mut quiet = 0;
    while quiet < 2 {
        std::thread::sleep(Duration::from_millis(500));
        let now = cpu_ticks(pid);
        quiet = if now - last <= 2 { quiet + 1 } else { 0 };
        last = now;
        assert!(Instant::now() < deadline, "the proxy never went idle");
    }
    let after = last - left;
    assert!(
        after <= 100,
        "the proxy used {after} ticks of CPU after its client left (at most a second's worth allowed)"
    );
    assert_eq!(
        metric(&proxy, "abridge_abandoned_total"),
        Some(1),
        "the compaction was stopped, not finished"
    );
    // The server still serves.
    assert_eq!(proxy.get("/healthz").0, 200);
}

#[test]
fn abridge_serve_listens_once_its_tokenizer_tables_are_built() {
    let proxy = serve_in_memory();
    // The first answer already finds the tables built: a request that
    // came first would have paid for them.
    assert_eq!(proxy.get("/readyz"), (200, "ok\n".to_owned()));
    let (_, text) = proxy.get("/metrics");
    let warmed: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("abridge_warmup_seconds ")?.parse().ok())
        .expect("abridge_warmup_seconds");
    assert!(
        warmed > 0.0,
        "the tables were built at start-up, not by a request"
    );
}
