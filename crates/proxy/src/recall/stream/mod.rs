//! A streamed response: events pass to the client as they come — text and
//! thinking at once, tool calls held until the model's turn ends (a turn
//! that calls the recall tool continues without them) — and each round
//! after the first continues the same stream: its start is not repeated,
//! its blocks are numbered on, and the end carries the usage summed.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::http::{HeaderName, HeaderValue, Response};
use futures_util::StreamExt;
use serde_json::{Map, Value, json};

use super::{Api, Call, Recalling, Resend, add_usage, exhausted_note};
use crate::forward::{OnUsage, to_client};
use crate::metrics::Metrics;
use crate::usage::UsageTap;

mod responses;

use responses::Responses;

/// The client's stream: the rounds of `first` and its continuations.
pub(crate) fn streamed(
    r: Recalling,
    first: reqwest::Response,
    resend: Resend,
    metrics: Arc<Metrics>,
    on_usage: Option<OnUsage>,
    extra: Vec<(HeaderName, HeaderValue)>,
) -> Response<Body> {
    let (status, head) = (first.status(), first.headers().clone());
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(16);
    tokio::spawn(run(r, first, resend, metrics, on_usage, tx));
    let body =
        futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|c| (c, rx)) });
    to_client(status, &head, extra, Body::from_stream(body))
}

type Sender = tokio::sync::mpsc::Sender<Result<Bytes, std::io::Error>>;

async fn run(
    mut r: Recalling,
    first: reqwest::Response,
    resend: Resend,
    metrics: Arc<Metrics>,
    on_usage: Option<OnUsage>,
    tx: Sender,
) {
    // The first round's usage is what the sent history cost; it is
    // reported when the stream ends, however it ends, with how many calls
    // were answered.
    let mut usage = Report {
        done: on_usage,
        first: None,
    };
    let mut machine: Box<dyn Round> = match r.api {
        Api::Messages => Box::new(Anthropic::new(&r.tool)),
        Api::Chat => Box::new(Chat::new(&r.tool)),
        Api::Responses => Box::new(Responses::new(&r.tool)),
    };
    let mut response = first;
    let mut rounds = 0;
    loop {
        let mut tap = (rounds == 0).then(|| UsageTap::new(r.api.family(), true));
        let mut events = SseReader::default();
        let mut body = response.bytes_stream();
        while let Some(chunk) = body.next().await {
            let Ok(chunk) = chunk else {
                // The upstream went away mid-stream: so does the client's.
                let _ = tx
                    .send(Err(std::io::Error::other("upstream stream ended early")))
                    .await;
                return;
            };
            if let Some(t) = tap.as_mut() {
                t.feed(&chunk);
            }
            for (name, data) in events.feed(&chunk) {
                for out in machine.event(name.as_deref(), &data) {
                    if tx.send(Ok(out)).await.is_err() {
                        metrics.disconnect();
                        return;
                    }
                }
            }
        }
        if let Some(t) = tap {
            usage.first = t.finish();
        }
        let calls = machine.recall_calls();
        let last = calls.is_empty() || rounds == r.max_rounds;
        let next = if last {
            None
        } else {
            rounds += 1;
            metrics.recall_round();
            let answers = r.answer(calls, &metrics).await;
            r.continue_with(machine.turn(), &answers);
            match resend.send(&r.body).await {
                Ok(next) if next.status().is_success() => Some(next),
                Ok(next) => {
                    tracing::warn!(status = %next.status(), "the upstream refused a recall round");
                    None
                }
                Err(e) => {
                    tracing::warn!(error = %e, "the upstream failed on a recall round");
                    None
                }
            }
        };
        let Some(next) = next else {
            if last && !machine.recall_calls().is_empty() {
                metrics.recall_rounds_exhausted();
            }
            drop(usage);
            for out in machine.finish(&exhausted_note(rounds)) {
                if tx.send(Ok(out)).await.is_err() {
                    return;
                }
            }
            return;
        };
        machine.next_round();
        response = next;
    }
}

/// Hands the first round's usage on when dropped.
struct Report {
    done: Option<OnUsage>,
    first: Option<abridge::model::Usage>,
}

impl Drop for Report {
    fn drop(&mut self) {
        if let Some(done) = self.done.take() {
            done(self.first.take());
        }
    }
}

/// Server-sent events out of a byte stream: `(event name, data)`.
#[derive(Default)]
struct SseReader {
    buf: Vec<u8>,
}

impl SseReader {
    fn feed(&mut self, chunk: &[u8]) -> Vec<(Option<String>, String)> {
        self.buf.extend_from_slice(chunk);
        let mut out = Vec::new();
        while let Some((end, skip)) = block_end(&self.buf) {
            let block: Vec<u8> = self.buf.drain(..end + skip).take(end).collect();
            let text = String::from_utf8_lossy(&block);
            let mut name = None;
            let mut data: Vec<&str> = Vec::new();
            for line in text.lines() {
                if let Some(n) = line.strip_prefix("event:") {
                    name = Some(n.trim().to_owned());
                } else if let Some(d) = line.strip_prefix("data:") {
                    data.push(d.strip_prefix(' ').unwrap_or(d));
                }
            }
            if !data.is_empty() || name.is_some() {
                out.push((name, data.join("\n")));
            }
        }
        out
    }
}

/// Where the first event of `buf` ends (a blank line) and the length of
/// that separator.
fn block_end(buf: &[u8]) -> Option<(usize, usize)> {
    let lf = buf.windows(2).position(|w| w == b"\n\n").map(|i| (i, 2));
    let crlf = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| (i, 4));
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
        (a, b) => a.or(b),
    }
}

/// One API's stream, round after round.
pub(super) trait Round: Send {
    /// What the client gets of one upstream event.
    fn event(&mut self, name: Option<&str>, data: &str) -> Vec<Bytes>;
    /// The recall calls of the round that ended.
    fn recall_calls(&self) -> Vec<Call>;
    /// The model's turn as it continues: its text and its recall calls.
    fn turn(&self) -> Value;
    /// Starts the next round.
    fn next_round(&mut self);
    /// The end of the client's stream: the held tool calls (recall calls
    /// left out), the stop and the usage summed; `note` when nothing was said.
    fn finish(&mut self, note: &str) -> Vec<Bytes>;
}

/// One event: its name when it has one, its data (JSON, or a line that did
/// not parse, passed as it came).
pub(super) fn sse(name: Option<&str>, data: &impl std::fmt::Display) -> Bytes {
    Bytes::from(match name {
        Some(n) => format!("event: {n}\ndata: {data}\n\n"),
        None => format!("data: {data}\n\n"),
    })
}

/// A content block of an Anthropic stream.
struct Block {
    /// Its content as it grew (`content_block` with the deltas applied).
    json: Value,
    /// A tool call's input as it came.
    partial: String,
    /// Its events, while it is held.
    held: Vec<Value>,
    shown: Option<usize>,
    recall: bool,
}

/// Anthropic Messages: `message_start`, content blocks, `message_delta`,
/// `message_stop`.
struct Anthropic {
    tool: String,
    round: usize,
    /// Index of the next block the client sees.
    next: usize,
    blocks: Vec<(u64, Block)>,
    usage: Map<String, Value>,
    delta: Option<Value>,
    /// The upstream sent an `error` event: the stream ends there.
    failed: bool,
}

impl Anthropic {
    fn new(tool: &str) -> Self {
        Anthropic {
            tool: tool.to_owned(),
            round: 0,
            next: 0,
            blocks: Vec::new(),
            usage: Map::new(),
            delta: None,
            failed: false,
        }
    }

    fn block(&mut self, v: &Value) -> Option<&mut Block> {
        let i = v["index"].as_u64()?;
        self.blocks
            .iter_mut()
            .find(|(j, _)| *j == i)
            .map(|(_, b)| b)
    }

    fn shown(n: usize, mut v: Value) -> Bytes {
        if let Some(m) = v.as_object_mut() {
            m.insert("index".into(), json!(n));
        }
        let name = v["type"]
            .as_str()
            .unwrap_or("content_block_delta")
            .to_owned();
        sse(Some(&name), &v)
    }
}

impl Round for Anthropic {
    fn event(&mut self, name: Option<&str>, data: &str) -> Vec<Bytes> {
        let Ok(v) = serde_json::from_str::<Value>(data) else {
            return vec![sse(name, &data)];
        };
        match v["type"].as_str().unwrap_or_default() {
            "message_start" => {
                // Its output count is a placeholder; the delta's is the one.
                let mut start = v["message"]["usage"].clone();
                if let Some(m) = start.as_object_mut() {
                    m.remove("output_tokens");
                }
                add_usage(&mut self.usage, &start);
                if self.round == 0 {
                    return vec![sse(Some("message_start"), &v)];
                }
                Vec::new()
            }
            "content_block_start" => {
                let cb = v["content_block"].clone();
                let tool_use = cb["type"] == "tool_use";
                let recall = tool_use && cb["name"] == self.tool.as_str();
                let shown = (!tool_use).then(|| {
                    self.next += 1;
                    self.next - 1
                });
                let mut block = Block {
                    json: cb,
                    partial: String::new(),
                    held: Vec::new(),
                    shown,
                    recall,
                };
                let out = match shown {
                    Some(n) => vec![Self::shown(n, v.clone())],
                    None => {
                        if !recall {
                            block.held.push(v.clone());
                        }
                        Vec::new()
                    }
                };
                if let Some(i) = v["index"].as_u64() {
                    self.blocks.push((i, block));
                }
                out
            }
            "content_block_delta" | "content_block_stop" => {
                let Some(b) = self.block(&v) else {
                    return vec![sse(name, &v)];
                };
                grow(b, &v["delta"]);
                match (b.shown, b.recall) {
                    (Some(n), _) => vec![Self::shown(n, v)],
                    (None, false) => {
                        b.held.push(v);
                        Vec::new()
                    }
                    (None, true) => Vec::new(),
                }
            }
            "message_delta" => {
                add_usage(&mut self.usage, &v["usage"]);
                self.delta = Some(v);
                Vec::new()
            }
            "message_stop" => Vec::new(),
            "error" => {
                self.failed = true;
                vec![sse(name, &v)]
            }
            _ => vec![sse(name, &v)],
        }
    }

    fn recall_calls(&self) -> Vec<Call> {
        if self.failed {
            return Vec::new();
        }
        self.blocks
            .iter()
            .filter(|(_, b)| b.recall)
            .map(|(_, b)| Call {
                id: b.json["id"].as_str().unwrap_or_default().to_owned(),
                arguments: input_of(b),
            })
            .collect()
    }

    fn turn(&self) -> Value {
        let content: Vec<Value> = self
            .blocks
            .iter()
            .filter(|(_, b)| b.shown.is_some() || b.recall)
            .map(|(_, b)| {
                let mut j = b.json.clone();
                if b.recall {
                    j["input"] = input_of(b);
                }
                j
            })
            .collect();
        json!({"role": "assistant", "content": content})
    }

    fn next_round(&mut self) {
        self.round += 1;
        self.blocks.clear();
        self.delta = None;
    }

    fn finish(&mut self, note: &str) -> Vec<Bytes> {
        if self.failed {
            return Vec::new();
        }
        let mut out = Vec::new();
        let mut calls = 0;
        for (_, b) in &self.blocks {
            if b.held.is_empty() {
                continue;
            }
            calls += 1;
            let n = self.next;
            self.next += 1;
            out.extend(b.held.iter().cloned().map(|e| Self::shown(n, e)));
        }
        if self.next == 0 {
            let n = self.next;
            self.next += 1;
            out.push(Self::shown(n, json!({"type": "content_block_start", "content_block": {"type": "text", "text": ""}})));
            out.push(Self::shown(n, json!({"type": "content_block_delta", "delta": {"type": "text_delta", "text": note}})));
            out.push(Self::shown(n, json!({"type": "content_block_stop"})));
        }
        let mut delta = self.delta.take().unwrap_or_else(
            || json!({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null}}),
        );
        if calls == 0 && delta["delta"]["stop_reason"] == "tool_use" {
            delta["delta"]["stop_reason"] = json!("end_turn");
        }
        if self.round > 0 {
            delta["usage"] = Value::Object(self.usage.clone());
        }
        out.push(sse(Some("message_delta"), &delta));
        out.push(sse(Some("message_stop"), &json!({"type": "message_stop"})));
        out
    }
}

/// Applies a content block's delta to what it holds so far.
fn grow(b: &mut Block, delta: &Value) {
    if !b.json.is_object() {
        return;
    }
    let append = |field: &str, j: &mut Value, more: &Value| {
        if let Some(more) = more.as_str() {
            let now = j[field].as_str().unwrap_or_default().to_owned();
            j[field] = json!(now + more);
        }
    };
    match delta["type"].as_str().unwrap_or_default() {
        "text_delta" => append("text", &mut b.json, &delta["text"]),
        "thinking_delta" => append("thinking", &mut b.json, &delta["thinking"]),
        "signature_delta" => b.json["signature"] = delta["signature"].clone(),
        "input_json_delta" => b
            .partial
            .push_str(delta["partial_json"].as_str().unwrap_or_default()),
        "citations_delta" => {
            let list = b.json["citations"].as_array().cloned().unwrap_or_default();
            let mut list = list;
            list.push(delta["citation"].clone());
            b.json["citations"] = Value::Array(list);
        }
        _ => {}
    }
}

fn input_of(b: &Block) -> Value {
    match b.partial.trim() {
        "" => b.json.get("input").cloned().unwrap_or_else(|| json!({})),
        p => serde_json::from_str(p).unwrap_or_else(|_| json!({})),
    }
}

/// A tool call of a Chat Completions stream, as its deltas built it.
#[derive(Default, Clone)]
struct ChatCall {
    id: String,
    name: String,
    arguments: String,
}

/// Chat Completions: chunks, then `[DONE]`.
struct Chat {
    tool: String,
    round: usize,
    /// The first chunk, whose id, model and creation time every chunk the
    /// proxy writes repeats.
    template: Option<Value>,
    text: String,
    calls: Vec<(u64, ChatCall)>,
    finish: Option<Value>,
    usage: Map<String, Value>,
    saw_usage: bool,
    said: bool,
}

impl Chat {
    fn new(tool: &str) -> Self {
        Chat {
            tool: tool.to_owned(),
            round: 0,
            template: None,
            text: String::new(),
            calls: Vec::new(),
            finish: None,
            usage: Map::new(),
            saw_usage: false,
            said: false,
        }
    }

    fn chunk(&self, delta: Value, finish: Value) -> Value {
        let mut c = self
            .template
            .clone()
            .unwrap_or_else(|| json!({"object": "chat.completion.chunk"}));
        c["choices"] = json!([{"index": 0, "delta": delta, "finish_reason": finish}]);
        c
    }
}

impl Round for Chat {
    fn event(&mut self, _: Option<&str>, data: &str) -> Vec<Bytes> {
        if data.trim() == "[DONE]" {
            return Vec::new();
        }
        let Ok(mut v) = serde_json::from_str::<Value>(data) else {
            return vec![sse(None, &data)];
        };
        if self.template.is_none() {
            let mut t = v.clone();
            if let Some(m) = t.as_object_mut() {
                m.remove("choices");
                m.remove("usage");
            }
            self.template = Some(t);
        }
        if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
            add_usage(&mut self.usage, u);
            self.saw_usage = true;
        }
        let Some(choice) = v.get_mut("choices").and_then(|c| c.get_mut(0)) else {
            // The usage chunk goes at the end, summed; anything else (an
            // error) goes on as it came.
            if v.get("choices").is_some_and(Value::is_array)
                && v.get("usage").is_some_and(Value::is_object)
            {
                return Vec::new();
            }
            return vec![sse(None, &v)];
        };
        if !choice["finish_reason"].is_null() {
            self.finish = Some(choice["finish_reason"].take());
        }
        let delta = &mut choice["delta"];
        if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
            for c in calls {
                let i = c["index"].as_u64().unwrap_or(0);
                let at = match self.calls.iter().position(|(j, _)| *j == i) {
                    Some(at) => at,
                    None => {
                        self.calls.push((i, ChatCall::default()));
                        self.calls.len() - 1
                    }
                };
                let call = &mut self.calls[at].1;
                if let Some(id) = c["id"].as_str() {
                    call.id = id.to_owned();
                }
                if let Some(n) = c["function"]["name"].as_str() {
                    call.name.push_str(n);
                }
                if let Some(a) = c["function"]["arguments"].as_str() {
                    call.arguments.push_str(a);
                }
            }
        }
        let Some(d) = delta.as_object_mut() else {
            return Vec::new();
        };
        d.remove("tool_calls");
        if self.round > 0 {
            d.remove("role");
        }
        if let Some(t) = d.get("content").and_then(Value::as_str) {
            self.text.push_str(t);
        }
        let says = d.iter().any(|(k, v)| match k.as_str() {
            "content" => v.as_str().is_some_and(|t| !t.is_empty()) || self.round == 0,
            _ => !v.is_null(),
        });
        if !says {
            return Vec::new();
        }
        self.said |= d
            .get("content")
            .and_then(Value::as_str)
            .is_some_and(|t| !t.is_empty());
        if let Some(m) = v.as_object_mut() {
            m.remove("usage");
        }
        vec![sse(None, &v)]
    }

    fn recall_calls(&self) -> Vec<Call> {
        self.calls
            .iter()
            .filter(|(_, c)| c.name == self.tool)
            .map(|(_, c)| Call {
                id: c.id.clone(),
                arguments: serde_json::from_str(&c.arguments).unwrap_or(Value::Null),
            })
            .collect()
    }

    fn turn(&self) -> Value {
        let calls: Vec<Value> = self
            .calls
            .iter()
            .filter(|(_, c)| c.name == self.tool)
            .map(|(_, c)| {
                json!({"id": c.id, "type": "function",
                "function": {"name": c.name, "arguments": c.arguments}})
            })
            .collect();
        let content = match self.text.is_empty() {
            true => Value::Null,
            false => json!(self.text),
        };
        json!({"role": "assistant", "content": content, "tool_calls": calls})
    }

    fn next_round(&mut self) {
        self.round += 1;
        self.text.clear();
        self.calls.clear();
        self.finish = None;
    }

    fn finish(&mut self, note: &str) -> Vec<Bytes> {
        let own: Vec<Value> = self
            .calls
            .iter()
            .filter(|(_, c)| c.name != self.tool)
            .enumerate()
            .map(|(i, (_, c))| {
                json!({"index": i, "id": c.id, "type": "function",
                "function": {"name": c.name, "arguments": c.arguments}})
            })
            .collect();
        let mut out = Vec::new();
        if own.is_empty() && !self.said && self.round > 0 {
            out.push(sse(
                None,
                &self.chunk(json!({"content": note}), Value::Null),
            ));
        }
        let finish = match (own.is_empty(), self.finish.take()) {
            (false, _) => json!("tool_calls"),
            (true, Some(f)) if f != "tool_calls" => f,
            _ => json!("stop"),
        };
        if !own.is_empty() {
            out.push(sse(
                None,
                &self.chunk(json!({"tool_calls": own}), Value::Null),
            ));
        }
        out.push(sse(None, &self.chunk(json!({}), finish)));
        if self.saw_usage {
            let mut u = self.template.clone().unwrap_or_default();
            u["choices"] = json!([]);
            u["usage"] = Value::Object(self.usage.clone());
            out.push(sse(None, &u));
        }
        out.push(Bytes::from_static(b"data: [DONE]\n\n"));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(machine: &mut dyn Round, sse: &[(&str, Value)]) -> Vec<Value> {
        sse.iter()
            .flat_map(|(name, v)| machine.event(Some(name), &v.to_string()))
            .map(|b| data(&b))
            .collect()
    }

    fn data(b: &Bytes) -> Value {
        let text = String::from_utf8_lossy(b);
        let line = text.lines().find_map(|l| l.strip_prefix("data: ")).unwrap();
        serde_json::from_str(line).unwrap_or(Value::String(line.into()))
    }

    fn block(i: u64, cb: Value) -> (&'static str, Value) {
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": i, "content_block": cb}),
        )
    }

    fn delta(i: u64, d: Value) -> (&'static str, Value) {
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": i, "delta": d}),
        )
    }

    fn stop(i: u64) -> (&'static str, Value) {
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": i}),
        )
    }

    #[test]
    fn events_split_anywhere_read_the_same() {
        let text = "event: a\ndata: {\"x\":1}\n\nevent: b\r\ndata: 2\r\n\r\ndata: [DONE]\n\n";
        for cut in 0..text.len() {
            let mut r = SseReader::default();
            let mut got = r.feed(&text.as_bytes()[..cut]);
            got.extend(r.feed(&text.as_bytes()[cut..]));
            assert_eq!(
                got,
                [
                    (Some("a".into()), "{\"x\":1}".into()),
                    (Some("b".into()), "2".into()),
                    (None, "[DONE]".into())
                ],
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn an_anthropic_turn_that_recalls_continues_as_one_message() {
        let mut m = Anthropic::new("abridge_recall");
        let start = (
            "message_start",
            json!({"type": "message_start", "message": {"usage": {"input_tokens": 100, "output_tokens": 1}}}),
        );
        let mut out = events(
            &mut m,
            &[
                start.clone(),
                block(0, json!({"type": "thinking", "thinking": ""})),
                delta(
                    0,
                    json!({"type": "thinking_delta", "thinking": "Need the file."}),
                ),
                delta(0, json!({"type": "signature_delta", "signature": "sig"})),
                stop(0),
                block(
                    1,
                    json!({"type": "tool_use", "id": "t1", "name": "read", "input": {}}),
                ),
                delta(
                    1,
                    json!({"type": "input_json_delta", "partial_json": "{\"p\":1}"}),
                ),
                stop(1),
                block(
                    2,
                    json!({"type": "tool_use", "id": "r1", "name": "abridge_recall", "input": {}}),
                ),
                delta(
                    2,
                    json!({"type": "input_json_delta", "partial_json": "{\"handle\":"}),
                ),
                delta(
                    2,
                    json!({"type": "input_json_delta", "partial_json": "\"abr_0123456789\"}"}),
                ),
                stop(2),
                (
                    "message_delta",
                    json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 30}}),
                ),
                ("message_stop", json!({"type": "message_stop"})),
            ],
        );
        // Only the start and the thinking went out; the calls are held.
        assert_eq!(out.len(), 5);
        let calls = m.recall_calls();
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].arguments, json!({"handle": "abr_0123456789"}));
        let turn = m.turn();
        assert_eq!(turn["content"][0]["thinking"], "Need the file.");
        assert_eq!(turn["content"][0]["signature"], "sig");
        assert_eq!(turn["content"][1]["name"], "abridge_recall");
        assert_eq!(
            turn["content"].as_array().unwrap().len(),
            2,
            "the client's call is not continued"
        );
        m.next_round();
        out.extend(events(
            &mut m,
            &[
                ("message_start", json!({"type": "message_start", "message": {"usage": {"input_tokens": 900, "output_tokens": 1}}})),
                block(0, json!({"type": "text", "text": ""})),
                delta(0, json!({"type": "text_delta", "text": "Read it."})),
                stop(0),
                block(1, json!({"type": "tool_use", "id": "t2", "name": "read", "input": {}})),
                delta(1, json!({"type": "input_json_delta", "partial_json": "{}"})),
                stop(1),
                ("message_delta", json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 12}})),
            ],
        ));
        assert!(m.recall_calls().is_empty());
        out.extend(m.finish("").iter().map(data));
        // One start; blocks numbered 0, 1, 2 in the order sent; the
        // client's call from the last round only; usage summed.
        assert_eq!(
            out.iter().filter(|e| e["type"] == "message_start").count(),
            1
        );
        let indices: Vec<u64> = out
            .iter()
            .filter(|e| e["type"] == "content_block_start")
            .map(|e| e["index"].as_u64().unwrap())
            .collect();
        assert_eq!(indices, [0, 1, 2]);
        assert!(!out.iter().any(|e| e.to_string().contains("abridge_recall")));
        assert!(out.iter().any(|e| e["content_block"]["id"] == "t2"));
        assert!(!out.iter().any(|e| e["content_block"]["id"] == "t1"));
        let end = out.iter().find(|e| e["type"] == "message_delta").unwrap();
        assert_eq!(end["delta"]["stop_reason"], "tool_use");
        assert_eq!(end["usage"]["input_tokens"], 1000);
        assert_eq!(end["usage"]["output_tokens"], 42);
        assert_eq!(out.last().unwrap()["type"], "message_stop");
    }

    #[test]
    fn a_chat_stream_keeps_errors_and_renumbers_the_clients_calls() {
        let mut m = Chat::new("abridge_recall");
        let chunk = |delta: Value, finish: Value| json!({"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        let sent = |m: &mut Chat, v: Value| m.event(None, &v.to_string());
        assert_eq!(
            sent(
                &mut m,
                chunk(json!({"role": "assistant", "content": ""}), Value::Null)
            )
            .len(),
            1
        );
        assert!(sent(&mut m, chunk(json!({"tool_calls": [{"index": 0, "id": "r", "function": {"name": "abridge_recall", "arguments": "{\"handle\":\"abr_0123456789\"}"}}]}), Value::Null)).is_empty());
        assert!(sent(&mut m, chunk(json!({"tool_calls": [{"index": 1, "id": "k", "function": {"name": "read", "arguments": "{}"}}]}), Value::Null)).is_empty());
        assert!(sent(&mut m, chunk(json!({}), json!("tool_calls"))).is_empty());
        let error = json!({"error": {"message": "overloaded"}});
        assert_eq!(
            data(&sent(&mut m, error.clone())[0]),
            error,
            "an error chunk goes on"
        );
        assert_eq!(m.recall_calls().len(), 1);
        let out: Vec<Value> = m.finish("").iter().map(data).collect();
        let calls = &out[0]["choices"][0]["delta"]["tool_calls"];
        assert_eq!(calls.as_array().unwrap().len(), 1);
        assert_eq!(calls[0]["index"], 0);
        assert_eq!(calls[0]["function"]["name"], "read");
        assert_eq!(out[1]["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(out.last().unwrap(), &json!("[DONE]"));
    }
}
