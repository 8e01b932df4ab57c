//! One agent of the soak: a tenant of its own (its own key), one API, a
//! history that grows by a tool call and a result of 8–20 KB a turn, a new
//! session once its body passes the session size, every third request
//! streamed.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{Api, Load};

/// A deterministic generator (SplitMix64).
pub(super) struct Rng(u64);

impl Rng {
    pub(super) fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub(super) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

const WORDS: &[&str] = &[
    "the", "of", "and", "request", "response", "value", "config", "parse", "token", "window",
    "session", "handler", "buffer", "index", "error", "result", "module", "field", "retry",
    "store", "batch", "commit", "query", "schema", "column", "thread", "queue", "limit", "budget",
    "trace",
];

/// What one request did.
pub(super) struct Sent {
    pub(super) ok: bool,
    pub(super) latency: Duration,
    pub(super) compacted: bool,
    /// The session the proxy put it in.
    pub(super) session: Option<String>,
}

/// An agent's state.
pub(super) struct Agent {
    pub(super) tenant: usize,
    pub(super) api: Api,
    session: usize,
    turns: Vec<(String, String)>,
    bytes: usize,
    requests: usize,
    rng: Rng,
}

impl Agent {
    pub(super) fn new(tenant: usize, api: Api) -> Agent {
        Agent {
            tenant,
            api,
            session: 0,
            turns: Vec::new(),
            bytes: 0,
            requests: 0,
            rng: Rng::new(tenant as u64 * 7919 + 1),
        }
    }

    /// The tenant's key.
    pub(super) fn key(tenant: usize) -> String {
        format!("soak-key-{tenant}")
    }

    /// Text only this tenant's requests hold.
    pub(super) fn marker(tenant: usize) -> String {
        format!("soak-tenant-{tenant}-")
    }

    /// The next request's body, and whether it streams.
    pub(super) fn next_body(&mut self, load: &Load) -> (Vec<u8>, bool) {
        if self.bytes > load.session_bytes {
            self.session += 1;
            self.turns.clear();
            self.bytes = 0;
        }
        let k = self.turns.len();
        let size = 8_000 + self.rng.below(12_000) as usize;
        let result = self.result(k, size);
        self.bytes += result.len() + 200;
        self.turns
            .push((format!("src/{}/mod_{k}.rs", WORDS[k % WORDS.len()]), result));
        self.requests += 1;
        let stream = self.requests % 3 == 0;
        let body = self.body(stream);
        (serde_json::to_vec(&body).unwrap_or_default(), stream)
    }

    /// A tool result of about `size` bytes: words, identifiers and the
    /// tenant's marker.
    fn result(&mut self, k: usize, size: usize) -> String {
        let marker = Agent::marker(self.tenant);
        let mut out = format!("{marker}session-{}-turn-{k}\n", self.session);
        let mut line = 0;
        while out.len() < size {
            for _ in 0..12 {
                out.push_str(WORDS[self.rng.below(WORDS.len() as u64) as usize]);
                out.push(' ');
            }
            line += 1;
            out.push_str(&format!("id_{:x} line {line}\n", self.rng.below(1 << 24)));
        }
        out
    }

    fn body(&self, stream: bool) -> Value {
        let task = format!(
            "Task {} of {}: read every module and report on each.",
            self.session,
            Agent::marker(self.tenant)
        );
        let system = "You are a careful coding agent. Read files one by one.";
        let schema = json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]});
        let args = |path: &str| json!({"path": path}).to_string();
        let mut body = match self.api {
            Api::Chat => {
                let mut messages = vec![
                    json!({"role": "system", "content": system}),
                    json!({"role": "user", "content": task}),
                ];
                for (k, (path, result)) in self.turns.iter().enumerate() {
                    messages.push(json!({"role": "assistant", "content": null, "tool_calls": [{"id": format!("call_{k}"),
                        "type": "function", "function": {"name": "read_file", "arguments": args(path)}}]}));
                    messages.push(json!({"role": "tool", "tool_call_id": format!("call_{k}"), "content": result}));
                }
                json!({"model": "gpt-4o", "messages": messages, "tools": [{"type": "function",
                    "function": {"name": "read_file", "description": "Read a file", "parameters": schema}}]})
            }
            Api::Responses => {
                let mut input = vec![json!({"role": "user", "content": task})];
                for (k, (path, result)) in self.turns.iter().enumerate() {
                    input.push(json!({"type": "function_call", "call_id": format!("call_{k}"), "name": "read_file", "arguments": args(path)}));
                    input.push(json!({"type": "function_call_output", "call_id": format!("call_{k}"), "output": result}));
                }
                json!({"model": "gpt-4o", "instructions": system, "input": input, "store": false,
                    "tools": [{"type": "function", "name": "read_file", "description": "Read a file", "parameters": schema}]})
            }
            Api::Messages => {
                let mut messages = vec![json!({"role": "user", "content": task})];
                for (k, (path, result)) in self.turns.iter().enumerate() {
                    messages.push(json!({"role": "assistant", "content": [{"type": "tool_use", "id": format!("toolu_{k}"),
                        "name": "read_file", "input": {"path": path}}]}));
                    messages.push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": format!("toolu_{k}"),
                        "content": result}]}));
                }
                json!({"model": "claude-sonnet-4-5", "max_tokens": 4096, "system": system, "messages": messages,
                    "tools": [{"name": "read_file", "description": "Read a file", "input_schema": schema}]})
            }
            Api::Gemini => {
                let mut contents = vec![json!({"role": "user", "parts": [{"text": task}]})];
                for (k, (path, result)) in self.turns.iter().enumerate() {
                    contents.push(json!({"role": "model", "parts": [{"functionCall": {"id": format!("call_{k}"),
                        "name": "read_file", "args": {"path": path}}}]}));
                    contents.push(json!({"role": "user", "parts": [{"functionResponse": {"id": format!("call_{k}"),
                        "name": "read_file", "response": {"output": result}}}]}));
                }
                json!({"contents": contents, "systemInstruction": {"parts": [{"text": system}]},
                    "tools": [{"functionDeclarations": [{"name": "read_file", "description": "Read a file",
                        "parametersJsonSchema": schema}]}]})
            }
        };
        if stream {
            match self.api {
                Api::Chat => {
                    body["stream"] = json!(true);
                    body["stream_options"] = json!({"include_usage": true});
                }
                Api::Responses | Api::Messages => body["stream"] = json!(true),
                Api::Gemini => {}
            }
        }
        body
    }

    /// Sends one request through `proxy`.
    pub(super) async fn send(&mut self, http: &reqwest::Client, proxy: &str, load: &Load) -> Sent {
        let (body, stream) = self.next_body(load);
        let key = Agent::key(self.tenant);
        let path = match (self.api, stream) {
            (Api::Chat, _) => "/v1/chat/completions".to_owned(),
            (Api::Responses, _) => "/v1/responses".to_owned(),
            (Api::Messages, _) => "/v1/messages".to_owned(),
            (Api::Gemini, false) => "/v1beta/models/gemini-2.5-flash:generateContent".to_owned(),
            (Api::Gemini, true) => {
                "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse".to_owned()
            }
        };
        let request = http
            .post(format!("{proxy}{path}"))
            .header("content-type", "application/json")
            .header("authorization", format!("Bearer {key}"))
            .header("x-api-key", &key)
            .header("x-goog-api-key", &key)
            .body(body);
        let start = Instant::now();
        let Ok(resp) = request.send().await else {
            return Sent {
                ok: false,
                latency: start.elapsed(),
                compacted: false,
                session: None,
            };
        };
        let status = resp.status();
        let compacted = resp.headers().contains_key("x-abridge-compacted");
        let session = resp
            .headers()
            .get("x-abridge-session")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let read = resp.bytes().await.is_ok();
        Sent {
            ok: status.is_success() && read,
            latency: start.elapsed(),
            compacted,
            session,
        }
    }
}
