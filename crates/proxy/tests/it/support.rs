//! A fake provider, a proxy in front of it, and agent loops that talk to
//! the proxy the way SDKs do.

use std::sync::{Arc, Mutex};

use abridge_proxy::{Proxy, ProxyConfig};
use abridge_store::SessionStore;
use abridge_testkit::{Provider, ProviderOptions};
use serde_json::{Value, json};

pub(crate) struct Setup {
    pub(crate) provider: Provider,
    pub(crate) proxy: String,
    pub(crate) stop: Option<tokio::sync::oneshot::Sender<()>>,
    pub(crate) done: tokio::task::JoinHandle<()>,
}

impl Setup {
    /// Stops the proxy and waits for in-flight requests.
    pub(crate) async fn stop(mut self) -> Provider {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        let _ = self.done.await;
        self.provider
    }
}

/// A proxy with `toml` config in front of a provider with `options`.
pub(crate) async fn start(
    toml: &str,
    options: ProviderOptions,
    store: Option<Box<dyn SessionStore>>,
) -> Setup {
    let provider = Provider::start(options).await;
    let (proxy, stop, done) = proxy_for(&provider.url, toml, store).await;
    Setup {
        provider,
        proxy,
        stop: Some(stop),
        done,
    }
}

pub(crate) async fn proxy_for(
    upstream: &str,
    toml: &str,
    store: Option<Box<dyn SessionStore>>,
) -> (
    String,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let mut config = ProxyConfig::from_toml(toml).unwrap();
    config.serve.openai_upstream = format!("{upstream}/v1");
    config.serve.anthropic_upstream = upstream.to_owned();
    config.serve.gemini_upstream = upstream.to_owned();
    serve_config(config, store).await
}

/// A proxy with `config`, serving on a free port of 127.0.0.1.
pub(crate) async fn serve_config(
    config: ProxyConfig,
    store: Option<Box<dyn SessionStore>>,
) -> (
    String,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let proxy = Proxy::new(config, store).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let done = tokio::spawn(async move {
        proxy
            .serve(listener, async {
                let _ = rx.await;
            })
            .await
            .unwrap();
    });
    (url, tx, done)
}

/// Text of a file the agent "reads": about 600 tokens, different per turn.
pub(crate) fn file_content(turn: usize) -> String {
    (0..40)
        .map(|k| format!("fn step_{turn}_{k}(x: u32) -> u32 {{ x * {k} + {turn} }} // line {k}\n"))
        .collect()
}

pub(crate) fn read_file_tool() -> Value {
    json!({"type": "object", "properties": {"path": {"type": "string", "description": "file to read"}}, "required": ["path"]})
}

/// What a loop saw.
#[derive(Debug, Default)]
pub(crate) struct LoopLog {
    pub(crate) compacted: usize,
    pub(crate) retried: usize,
    pub(crate) sessions: Vec<String>,
    pub(crate) warnings: Vec<String>,
}

impl LoopLog {
    pub(crate) fn note(&mut self, h: &reqwest::header::HeaderMap) {
        let get = |k: &str| h.get(k).and_then(|v| v.to_str().ok()).map(str::to_owned);
        self.compacted += usize::from(get("x-abridge-compacted").is_some());
        self.retried += usize::from(get("x-abridge-retried").is_some());
        if let Some(s) = get("x-abridge-session") {
            self.sessions.push(s);
        }
        if let Some(w) = get("x-abridge-warning") {
            self.warnings.push(w);
        }
    }
}

pub(crate) fn client() -> reqwest::Client {
    abridge_llm::client_builder().build().unwrap()
}

/// Posts `body` as JSON to `path` of the proxy.
pub(crate) async fn post_json(setup: &Setup, path: &str, body: String) -> reqwest::Response {
    client()
        .post(format!("{}{path}", setup.proxy))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap()
}

/// An agent speaking Chat Completions: its history grows by a tool call
/// and its ~600-token result per turn.
pub(crate) struct OpenAiAgent {
    pub(crate) messages: Vec<Value>,
    stream: bool,
    turn: usize,
    http: reqwest::Client,
}

impl OpenAiAgent {
    pub(crate) fn new(stream: bool) -> Self {
        OpenAiAgent {
            messages: vec![
                json!({"role": "system", "content": "You are a careful coding agent. Read files one by one."}),
                json!({"role": "user", "content": "Read every module of the crate and report on each."}),
            ],
            stream,
            turn: 0,
            http: client(),
        }
    }

    /// One request through `proxy`; the response's headers.
    pub(crate) async fn step(
        &mut self,
        proxy: &str,
        headers: &[(&str, &str)],
    ) -> reqwest::header::HeaderMap {
        let tools = json!([{"type": "function", "function": {"name": "read_file", "description": "Read a file", "parameters": read_file_tool()}}]);
        let mut body = json!({"model": "fake-model", "messages": self.messages, "tools": tools, "temperature": 0.70});
        if self.stream {
            body["stream"] = json!(true);
            body["stream_options"] = json!({"include_usage": true});
        }
        let mut req = self
            .http
            .post(format!("{proxy}/v1/chat/completions"))
            .json(&body);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let resp = req.send().await.unwrap();
        let turn = self.turn;
        assert_eq!(resp.status(), 200, "turn {turn}: {:?}", resp.headers());
        let head = resp.headers().clone();
        let message = if self.stream {
            openai_from_sse(&resp.text().await.unwrap())
        } else {
            resp.json::<Value>().await.unwrap()["choices"][0]["message"].clone()
        };
        let calls = message["tool_calls"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        self.messages.push(message);
        for c in calls {
            self.messages.push(
                json!({"role": "tool", "tool_call_id": c["id"], "content": file_content(turn)}),
            );
        }
        self.turn += 1;
        head
    }
}

/// An OpenAI Chat Completions tool loop of `turns` requests.
pub(crate) async fn openai_loop(
    proxy: &str,
    turns: usize,
    stream: bool,
    headers: &[(&str, &str)],
) -> LoopLog {
    let mut agent = OpenAiAgent::new(stream);
    let mut log = LoopLog::default();
    for _ in 0..turns {
        log.note(&agent.step(proxy, headers).await);
    }
    log
}

/// The assistant message a Chat Completions stream adds up to.
pub(crate) fn openai_from_sse(text: &str) -> Value {
    let mut content = String::new();
    let mut calls: Vec<Value> = Vec::new();
    for data in text.lines().filter_map(|l| l.strip_prefix("data: ")) {
        let Ok(chunk) = serde_json::from_str::<Value>(data) else {
            continue;
        };
        let Some(delta) = chunk.pointer("/choices/0/delta") else {
            continue;
        };
        if let Some(t) = delta["content"].as_str() {
            content.push_str(t);
        }
        for tc in delta["tool_calls"].as_array().into_iter().flatten() {
            let i = tc["index"].as_u64().unwrap() as usize;
            if calls.len() <= i {
                calls.push(json!({"id": tc["id"], "type": "function", "function": {"name": tc["function"]["name"], "arguments": ""}}));
            }
            let args = calls[i]["function"]["arguments"]
                .as_str()
                .unwrap()
                .to_owned()
                + tc["function"]["arguments"].as_str().unwrap_or("");
            calls[i]["function"]["arguments"] = json!(args);
        }
    }
    let mut m = json!({"role": "assistant", "content": content});
    if !calls.is_empty() {
        m["tool_calls"] = json!(calls);
    }
    m
}

/// An Anthropic Messages tool loop, with `cache_control` where Claude Code
/// puts it (system, and the newest user turn).
pub(crate) async fn anthropic_loop(
    proxy: &str,
    turns: usize,
    stream: bool,
    headers: &[(&str, &str)],
) -> LoopLog {
    let http = client();
    let system = json!([{"type": "text", "text": "You are a careful coding agent.", "cache_control": {"type": "ephemeral"}}]);
    let tools = json!([{"name": "read_file", "description": "Read a file", "input_schema": read_file_tool()}]);
    // As Claude Code sends it: the task, then its environment as a system
    // message inside `messages`, and a clear_thinking edit that keeps all.
    let mut messages: Vec<Value> = vec![
        json!({"role": "user", "content": [{"type": "text", "text": "Read every module and report."}]}),
        json!({"role": "system", "content": "# Environment\nWorking directory: /work"}),
    ];
    let mut log = LoopLog::default();
    for turn in 0..turns {
        let mut sent = messages.clone();
        // Claude Code marks its newest message for caching, turning a
        // string into a marked block; the message before goes back unmarked.
        if let Some(content) = sent.last_mut().map(|m| &mut m["content"]) {
            if let Value::String(text) = content {
                *content = json!([{"type": "text", "text": text}]);
            }
            if let Some(b) = content.as_array_mut().and_then(|b| b.last_mut()) {
                b["cache_control"] = json!({"type": "ephemeral"});
            }
        }
        let body = json!({"model": "fake-model", "max_tokens": 1024, "system": system, "tools": tools,
            "messages": sent, "stream": stream,
            "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]}});
        let mut req = http
            .post(format!("{proxy}/v1/messages"))
            .header("anthropic-version", "2023-06-01")
            .json(&body);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status(), 200, "turn {turn}");
        log.note(resp.headers());
        let content = if stream {
            anthropic_from_sse(&resp.text().await.unwrap())
        } else {
            resp.json::<Value>().await.unwrap()["content"].clone()
        };
        let uses: Vec<Value> = content
            .as_array()
            .unwrap()
            .iter()
            .filter(|b| b["type"] == "tool_use")
            .cloned()
            .collect();
        messages.push(json!({"role": "assistant", "content": content}));
        if !uses.is_empty() {
            let results: Vec<Value> = uses
                .iter()
                .map(|u| json!({"type": "tool_result", "tool_use_id": u["id"], "content": file_content(turn)}))
                .collect();
            messages.push(json!({"role": "user", "content": results}));
        }
    }
    log
}

/// The content blocks a Messages stream adds up to.
pub(crate) fn anthropic_from_sse(text: &str) -> Value {
    let mut blocks: Vec<Value> = Vec::new();
    let mut partial: Vec<String> = Vec::new();
    for data in text.lines().filter_map(|l| l.strip_prefix("data: ")) {
        let ev: Value = serde_json::from_str(data).unwrap();
        match ev["type"].as_str().unwrap() {
            "content_block_start" => {
                blocks.push(ev["content_block"].clone());
                partial.push(String::new());
            }
            "content_block_delta" => {
                let i = ev["index"].as_u64().unwrap() as usize;
                match ev["delta"]["type"].as_str().unwrap() {
                    "text_delta" => {
                        let t = blocks[i]["text"].as_str().unwrap().to_owned()
                            + ev["delta"]["text"].as_str().unwrap();
                        blocks[i]["text"] = json!(t);
                    }
                    _ => partial[i].push_str(ev["delta"]["partial_json"].as_str().unwrap()),
                }
            }
            "content_block_stop" => {
                let i = ev["index"].as_u64().unwrap() as usize;
                if blocks[i]["type"] == "tool_use" {
                    blocks[i]["input"] = serde_json::from_str(&partial[i]).unwrap();
                }
            }
            _ => {}
        }
    }
    Value::Array(blocks)
}

/// Captured log lines of the proxy.
#[derive(Clone, Default)]
#[allow(dead_code)]
pub(crate) struct Logs(pub Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The proxy's `/metrics` text.
pub(crate) async fn metrics_text(proxy: &str) -> String {
    client()
        .get(format!("{proxy}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// The value of a metric line that starts with `prefix`.
pub(crate) fn metric(text: &str, prefix: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Sends `target` as the request target of a raw HTTP/1.1 request to
/// `proxy` (bytes as written: no client-side normalising), with `host` as
/// its `Host`, `headers` and a two-byte JSON body; its status and the
/// whole response.
pub(crate) fn raw_request(
    proxy: &str,
    host: &str,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
) -> (u16, String) {
    use std::io::{Read, Write};
    let addr = proxy.trim_start_matches("http://");
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let mut req = format!("{method} {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("Content-Length: 2\r\n\r\n{}");
    s.write_all(req.as_bytes()).unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    let status = out
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, out)
}
