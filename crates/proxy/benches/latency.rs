//! Latency the proxy adds over talking to the upstream directly: the same
//! client sends the same bodies to the fake provider directly, through
//! abridge (in this process), and through any other proxy named by
//! `PEER_URL` (an OpenAI-compatible base URL ending in `/v1`, e.g. LiteLLM;
//! `benches/proxy_vs_litellm.sh` starts one, with `UPSTREAM_URL` naming the
//! fake provider both use). Loopback only, bounded.
//!
//! Targets beside those: abridge compacting while it exports traces to a
//! receiver that is down (what tracing costs a request when it cannot
//! deliver).
//!
//! Workloads: a session's repeated requests (each adds two messages) with a
//! 375 KB and a 2 MB history, one at a time and 32 sessions at once; the
//! same 375 KB session on the Messages API with its cache marker moved to
//! the newest message every turn, as Claude Code sends it, on the
//! Responses API as input items and on the Gemini API as contents; and the
//! first request of new sessions with a 375 KB history.
//!
//! `cargo bench -p abridge-proxy --bench latency`
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use abridge_proxy::{Proxy, ProxyConfig};
use abridge_testkit::{Provider, ProviderOptions};
use serde_json::{Value, json};

/// Compacts the histories (the upstream then gets less than direct).
const CONFIG: &str = "[trigger]\nmax_tokens = 60000\n[budget]\nmin_iterations = 2\n";
/// Never compacts: every byte goes upstream, as direct; what is added is
/// decoding, counting and the session.
const UNDER: &str = "[trigger]\nmax_tokens = 100000000\n";

/// A history of about `bytes` bytes: tool calls reading source files.
fn history(bytes: usize, seed: usize) -> Vec<Value> {
    let mut m = vec![
        json!({"role": "system", "content": "You are a coding agent."}),
        json!({"role": "user", "content": format!("Session {seed}: read the code base and report.")}),
    ];
    let mut size = 0;
    let mut i = 0;
    while size < bytes {
        let content: String = (0..60)
            .map(|k| format!("fn item_{seed}_{i}_{k}(v: &[u8]) -> usize {{ v.iter().filter(|b| **b == {k}).count() + {i} }}\n"))
            .collect();
        size += content.len() + 200;
        m.push(json!({"role": "assistant", "content": null, "tool_calls": [{"id": format!("c{i}"), "type": "function",
            "function": {"name": "read_file", "arguments": format!("{{\"path\":\"src/m{i}.rs\"}}")}}]}));
        m.push(json!({"role": "tool", "tool_call_id": format!("c{i}"), "content": content}));
        i += 1;
    }
    m
}

/// Which API a workload speaks.
#[derive(Clone, Copy, PartialEq)]
enum Api {
    /// Chat Completions, the history as is.
    Chat,
    /// Messages, the history in Anthropic's shape with a cache marker on
    /// the newest message (moved there every turn, as Claude Code does).
    Messages,
    /// Responses, the history as input items after `instructions`.
    Responses,
    /// Gemini `generateContent`, the history as contents after
    /// `systemInstruction`.
    Gemini,
}

fn body(messages: &[Value], api: Api) -> Vec<u8> {
    let body = match api {
        Api::Chat => json!({"model": "fake-model", "messages": messages}),
        Api::Messages => json!({"model": "fake-model", "max_tokens": 1024,
            "system": messages[0]["content"], "messages": anthropic(&messages[1..])}),
        Api::Responses => json!({"model": "fake-model", "instructions": messages[0]["content"],
            "input": items(&messages[1..]), "store": false}),
        Api::Gemini => json!({"systemInstruction": {"parts": [{"text": messages[0]["content"]}]},
            "contents": contents(&messages[1..])}),
    };
    serde_json::to_vec(&body).unwrap()
}

/// Chat Completions messages as Responses input items.
fn items(messages: &[Value]) -> Vec<Value> {
    messages
        .iter()
        .map(|m| match m["role"].as_str() {
            Some("tool") => json!({"type": "function_call_output", "call_id": m["tool_call_id"],
                "output": m["content"]}),
            Some("assistant") if m.get("tool_calls").is_some() => {
                let c = &m["tool_calls"][0];
                json!({"type": "function_call", "call_id": c["id"], "name": c["function"]["name"],
                    "arguments": c["function"]["arguments"]})
            }
            _ => json!({"type": "message", "role": m["role"], "content": m["content"]}),
        })
        .collect()
}

/// Chat Completions messages as Gemini contents (calls without ids, as
/// the API sends them).
fn contents(messages: &[Value]) -> Vec<Value> {
    messages
        .iter()
        .map(|m| match m["role"].as_str() {
            Some("tool") => json!({"role": "user", "parts": [{"functionResponse": {
                "name": "read_file", "response": {"output": m["content"]}}}]}),
            Some("assistant") if m.get("tool_calls").is_some() => {
                json!({"role": "model", "parts": [{"functionCall": {"name": "read_file",
                    "args": {"path": "src/m.rs"}}}]})
            }
            Some("assistant") => json!({"role": "model", "parts": [{"text": m["content"]}]}),
            _ => json!({"role": "user", "parts": [{"text": m["content"]}]}),
        })
        .collect()
}

/// Chat Completions messages as Anthropic ones, the newest marked for caching.
fn anthropic(messages: &[Value]) -> Vec<Value> {
    let mut out: Vec<Value> = messages
        .iter()
        .map(|m| match m["role"].as_str() {
            Some("tool") => json!({"role": "user", "content": [{"type": "tool_result",
                "tool_use_id": m["tool_call_id"], "content": m["content"]}]}),
            Some("assistant") if m.get("tool_calls").is_some() => {
                let c = &m["tool_calls"][0];
                json!({"role": "assistant", "content": [{"type": "tool_use", "id": c["id"],
                    "name": c["function"]["name"], "input": {"path": "src/m.rs"}}]})
            }
            _ => json!({"role": m["role"], "content": m["content"]}),
        })
        .collect();
    if let Some(last) = out.last_mut() {
        let content = last["content"].clone();
        let mut blocks = match content {
            Value::Array(b) => b,
            text => vec![json!({"type": "text", "text": text})],
        };
        if let Some(b) = blocks.last_mut() {
            b["cache_control"] = json!({"type": "ephemeral"});
        }
        last["content"] = Value::Array(blocks);
    }
    out
}

async fn send(client: &reqwest::Client, base: &str, b: Vec<u8>, api: Api) -> Duration {
    // Gemini's paths start at the host's root and name the model.
    let url = match api {
        Api::Chat => format!("{base}/chat/completions"),
        Api::Messages => format!("{base}/messages"),
        Api::Responses => format!("{base}/responses"),
        Api::Gemini => format!(
            "{}/v1beta/models/fake-model:generateContent",
            base.trim_end_matches("/v1")
        ),
    };
    let t = Instant::now();
    let r = client
        .post(url)
        .header("content-type", "application/json")
        .header("anthropic-version", "2023-06-01")
        .body(b)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    r.bytes().await.unwrap();
    t.elapsed()
}

/// One session's repeated requests: the history grows by two messages each time.
async fn session(
    client: reqwest::Client,
    base: String,
    mut messages: Vec<Value>,
    n: usize,
    api: Api,
) -> Vec<Duration> {
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        out.push(send(&client, &base, body(&messages, api), api).await);
        messages.push(json!({"role": "assistant", "content": format!("Noted {i}.")}));
        messages.push(json!({"role": "user", "content": format!("Go on ({i}).")}));
    }
    out
}

#[derive(Clone, Copy, Default)]
struct Row {
    p50: f64,
    p99: f64,
}

impl Row {
    fn of(mut v: Vec<Duration>) -> Row {
        v.sort();
        let at = |p: f64| v[((v.len() as f64 - 1.0) * p).round() as usize].as_secs_f64() * 1000.0;
        Row {
            p50: at(0.5),
            p99: at(0.99),
        }
    }
}

struct Case {
    name: &'static str,
    api: Api,
    bytes: usize,
    concurrent: usize,
    requests: usize,
    warm: usize,
}

async fn workload(client: &reqwest::Client, base: &str, c: &Case, salt: usize) -> Row {
    let tasks: Vec<_> = (0..c.concurrent)
        .map(|s| {
            tokio::spawn(session(
                client.clone(),
                base.to_owned(),
                history(c.bytes, salt + s),
                c.requests,
                c.api,
            ))
        })
        .collect();
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap().into_iter().skip(c.warm));
    }
    Row::of(all)
}

async fn first_requests(
    client: &reqwest::Client,
    base: &str,
    bytes: usize,
    sessions: usize,
    salt: usize,
) -> Row {
    let mut all = Vec::new();
    for s in 0..sessions {
        let b = body(&history(bytes, salt + s), Api::Chat);
        all.push(send(client, base, b, Api::Chat).await);
    }
    Row::of(all)
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(run());
}

async fn run() {
    // The upstream: `UPSTREAM_URL` (a fake provider the peer uses too), or one in this process.
    let given = std::env::var("UPSTREAM_URL").ok();
    let options = ProviderOptions {
        check: false,
        ..ProviderOptions::default()
    };
    let local = match given {
        Some(_) => None,
        None => Some(Provider::start(options).await),
    };
    let upstream = given
        .or_else(|| local.as_ref().map(|p| p.url.clone()))
        .unwrap();
    let mut targets = vec![
        ("direct".to_owned(), format!("{upstream}/v1")),
        (
            "abridge, compacting".to_owned(),
            abridge(&upstream, CONFIG).await,
        ),
        (
            "abridge, under its trigger".to_owned(),
            abridge(&upstream, UNDER).await,
        ),
        (
            "abridge, compacting, tracing to a stopped receiver".to_owned(),
            abridge(&upstream, &format!("{CONFIG}{}", stopped_receiver())).await,
        ),
    ];
    if let Ok(peer) = std::env::var("PEER_URL") {
        targets.push((
            std::env::var("PEER_NAME").unwrap_or_else(|_| "peer".into()),
            peer,
        ));
    }
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(64)
        .build()
        .unwrap();
    println!(
        "{:<84} {:>9} {:>9} {:>10} {:>10}",
        "workload / target", "p50 ms", "p99 ms", "added p50", "added p99"
    );
    let cases = [
        Case {
            name: "375 KB session, one at a time",
            api: Api::Chat,
            bytes: 375_000,
            concurrent: 1,
            requests: 60,
            warm: 10,
        },
        Case {
            name: "375 KB Messages session (marker moved each turn), one at a time",
            api: Api::Messages,
            bytes: 375_000,
            concurrent: 1,
            requests: 60,
            warm: 10,
        },
        Case {
            name: "375 KB Responses session, one at a time",
            api: Api::Responses,
            bytes: 375_000,
            concurrent: 1,
            requests: 60,
            warm: 10,
        },
        Case {
            name: "375 KB Gemini session, one at a time",
            api: Api::Gemini,
            bytes: 375_000,
            concurrent: 1,
            requests: 60,
            warm: 10,
        },
        Case {
            name: "375 KB session, 32 concurrent",
            api: Api::Chat,
            bytes: 375_000,
            concurrent: 32,
            requests: 12,
            warm: 2,
        },
        Case {
            name: "2 MB session, one at a time",
            api: Api::Chat,
            bytes: 2_000_000,
            concurrent: 1,
            requests: 30,
            warm: 5,
        },
        Case {
            name: "2 MB session, 32 concurrent",
            api: Api::Chat,
            bytes: 2_000_000,
            concurrent: 32,
            requests: 6,
            warm: 1,
        },
    ];
    // `BENCH_ONLY=2 MB` runs the workloads whose name contains it.
    let only = std::env::var("BENCH_ONLY").unwrap_or_default();
    for (i, case) in cases
        .iter()
        .enumerate()
        .filter(|(_, c)| c.name.contains(&only))
    {
        let mut direct = Row::default();
        for (j, (t, base)) in targets.iter().enumerate() {
            // A peer named by PEER_URL speaks Chat Completions only.
            if case.api != Api::Chat && j >= 4 {
                continue;
            }
            let row = workload(&client, base, case, 10_000 * (i + 1) + 1_000 * j).await;
            if t == "direct" {
                direct = row;
            }
            print_row(case.name, t, row, direct);
        }
    }
    let mut direct = Row::default();
    for (j, (t, base)) in targets.iter().enumerate() {
        let row = first_requests(&client, base, 375_000, 20, 90_000 + 100 * j).await;
        if t == "direct" {
            direct = row;
        }
        print_row("375 KB, first request of a session", t, row, direct);
    }
}

/// A `[telemetry]` section exporting to a port nothing listens on.
fn stopped_receiver() -> String {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    format!("[telemetry]\nendpoint = \"http://127.0.0.1:{port}/v1/traces\"\n")
}

/// An abridge proxy in this process; its base URL.
async fn abridge(upstream: &str, toml: &str) -> String {
    let mut config = ProxyConfig::from_toml(toml).unwrap();
    config.serve.openai_upstream = format!("{upstream}/v1");
    config.serve.anthropic_upstream = upstream.to_owned();
    config.serve.gemini_upstream = upstream.to_owned();
    let proxy = Proxy::new(config, None).unwrap();
    // As `abridge serve` does before it says it is listening.
    proxy.warm_up().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    tokio::spawn(proxy.serve(listener, std::future::pending()));
    url
}

fn print_row(name: &str, target: &str, row: Row, direct: Row) {
    let added = |a: f64, b: f64| {
        if target == "direct" {
            "-".to_owned()
        } else {
            format!("{:+.2}", a - b)
        }
    };
    println!(
        "{:<84} {:>9.2} {:>9.2} {:>10} {:>10}",
        format!("{name} / {target}"),
        row.p50,
        row.p99,
        added(row.p50, direct.p50),
        added(row.p99, direct.p99)
    );
}
