//! Anthropic Messages: a response's `content` blocks, `tool_use` among
//! them; a stream of `message_start`, content blocks, `message_delta` and
//! `message_stop`. Thinking leads an assistant turn and goes back with its
//! signature unchanged.

use abridge::model::{ContentForm, Message, Part, Role, ToolResult, Usage, Wire};
use abridge::recall::Answer;
use axum::body::Bytes;
use serde_json::{Map, Value, json};

use super::api::{Api, Round, sse};
use super::{Call, Ours, add_usage};

pub(super) struct Messages;

/// The text blocks of the rounds before the last.
#[derive(Default)]
pub(super) struct Said(Vec<String>);

impl Api for Messages {
    const WIRE: Wire = Wire::Anthropic;
    type Earlier = Said;
    type Stream = MessagesStream;

    fn usage(report: &Value) -> Usage {
        Usage::from_anthropic(report)
    }

    fn calls(response: &Value, tool: &Ours) -> Vec<Call> {
        blocks(response)
            .iter()
            .filter(|b| is_recall(b, tool))
            .map(|b| Call {
                id: b["id"].as_str().unwrap_or_default().to_owned(),
                name: b["name"].as_str().unwrap_or_default().to_owned(),
                arguments: b["input"].clone(),
            })
            .collect()
    }

    fn take(earlier: &mut Said, response: &Value, tool: &Ours) -> Value {
        let content: Vec<Value> = blocks(response)
            .iter()
            .filter(|b| b["type"] != "tool_use" || tool.owns_value(&b["name"]))
            .cloned()
            .collect();
        earlier.0.extend(
            content
                .iter()
                .filter(|b| b["type"] == "text")
                .filter_map(|b| b["text"].as_str().map(str::to_owned)),
        );
        json!({"role": "assistant", "content": content})
    }

    fn merge(earlier: Said, mut v: Value, tool: &Ours, note: &str) -> Value {
        let all = blocks(&v);
        let mut content: Vec<Value> = all
            .iter()
            .filter(|b| !is_recall(b, tool))
            .cloned()
            .collect();
        let dropped = content.len() < all.len();
        // Thinking leads an assistant turn: earlier text goes after it.
        let at = content
            .iter()
            .take_while(|b| matches!(b["type"].as_str(), Some("thinking" | "redacted_thinking")))
            .count();
        for (i, t) in earlier.0.into_iter().enumerate() {
            content.insert(at + i, json!({"type": "text", "text": t}));
        }
        if content.is_empty() {
            content.push(json!({"type": "text", "text": note}));
        }
        if dropped && !content.iter().any(|b| b["type"] == "tool_use") {
            v["stop_reason"] = json!("end_turn");
        }
        v["content"] = Value::Array(content);
        v
    }

    fn results(answers: &[(String, Answer)]) -> Vec<Message> {
        let results = answers
            .iter()
            .map(|(id, a)| {
                Part::ToolResult(Box::new(ToolResult {
                    call_id: id.clone(),
                    parts: a.pieces.iter().map(|p| p.to_part()).collect(),
                    form: ContentForm::Blocks,
                    is_error: a.is_error.then_some(true),
                    extra: Default::default(),
                }))
            })
            .collect();
        vec![Message {
            role: Role::User,
            parts: results,
            form: ContentForm::Blocks,
            ..Message::default()
        }]
    }

    fn stream(tool: &Ours) -> MessagesStream {
        MessagesStream::new(tool)
    }
}

fn blocks(v: &Value) -> &[Value] {
    v["content"].as_array().map_or(&[], Vec::as_slice)
}

fn is_recall(block: &Value, tool: &Ours) -> bool {
    block["type"] == "tool_use" && tool.owns_value(&block["name"])
}

/// A content block of the stream.
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

impl Block {
    /// Applies a delta to what the block holds so far.
    fn grow(&mut self, delta: &Value) {
        if !self.json.is_object() {
            return;
        }
        let append = |field: &str, j: &mut Value, more: &Value| {
            if let Some(more) = more.as_str() {
                let now = j[field].as_str().unwrap_or_default().to_owned();
                j[field] = json!(now + more);
            }
        };
        match delta["type"].as_str().unwrap_or_default() {
            "text_delta" => append("text", &mut self.json, &delta["text"]),
            "thinking_delta" => append("thinking", &mut self.json, &delta["thinking"]),
            "signature_delta" => self.json["signature"] = delta["signature"].clone(),
            "input_json_delta" => self
                .partial
                .push_str(delta["partial_json"].as_str().unwrap_or_default()),
            "citations_delta" => {
                let mut list = self.json["citations"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                list.push(delta["citation"].clone());
                self.json["citations"] = Value::Array(list);
            }
            _ => {}
        }
    }

    fn input(&self) -> Value {
        match self.partial.trim() {
            "" => self.json.get("input").cloned().unwrap_or_else(|| json!({})),
            p => serde_json::from_str(p).unwrap_or_else(|_| json!({})),
        }
    }
}

/// The client's Messages stream.
pub(super) struct MessagesStream {
    tool: Ours,
    round: usize,
    /// Index of the next block the client sees.
    next: usize,
    blocks: Vec<(u64, Block)>,
    usage: Map<String, Value>,
    delta: Option<Value>,
    /// The upstream sent an `error` event: the stream ends there.
    failed: bool,
}

impl MessagesStream {
    fn new(tool: &Ours) -> Self {
        MessagesStream {
            tool: tool.clone(),
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

    fn block_start(&mut self, v: Value) -> Vec<Bytes> {
        let cb = v["content_block"].clone();
        let tool_use = cb["type"] == "tool_use";
        let recall = tool_use && self.tool.owns_value(&cb["name"]);
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
        let index = v["index"].as_u64();
        let out = match shown {
            Some(n) => vec![Self::shown(n, v)],
            None => {
                if !recall {
                    block.held.push(v);
                }
                Vec::new()
            }
        };
        if let Some(i) = index {
            self.blocks.push((i, block));
        }
        out
    }
}

impl Round for MessagesStream {
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
            "content_block_start" => self.block_start(v),
            "content_block_delta" | "content_block_stop" => {
                let Some(b) = self.block(&v) else {
                    return vec![sse(name, &v)];
                };
                b.grow(&v["delta"]);
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
                name: b.json["name"].as_str().unwrap_or_default().to_owned(),
                arguments: b.input(),
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
                    j["input"] = b.input();
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

#[cfg(test)]
mod tests {
    use abridge::recall::Piece;

    use super::*;
    use crate::recall::tests::data;

    fn events(machine: &mut dyn Round, sse: &[(&str, Value)]) -> Vec<Value> {
        sse.iter()
            .flat_map(|(name, v)| machine.event(Some(name), &v.to_string()))
            .map(|b| data(&b))
            .collect()
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
    fn an_anthropic_turn_that_recalls_continues_as_one_message() {
        let mut m = Messages::stream(&Ours::recall_only("abridge_recall"));
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
    fn answers_continue_as_one_user_turn_of_tool_results() {
        let mut body = json!({"model": "m", "messages": [{"role": "user", "content": "go"}]});
        let answer = |pieces: Vec<Piece>, is_error: bool| Answer {
            handle: None,
            pieces,
            is_error,
            page: 1,
            pages: 1,
            bytes: 0,
        };
        let found = answer(
            vec![
                Piece::Text {
                    text: "header".into(),
                },
                Piece::Image {
                    url: "data:image/png;base64,AAAA".into(),
                },
                Piece::Image {
                    url: "https://example.com/a.png".into(),
                },
            ],
            false,
        );
        let unknown = answer(
            vec![Piece::Text {
                text: "unknown handle".into(),
            }],
            true,
        );
        let turn = json!({"role": "assistant", "content": []});
        let answers = [("t1".to_owned(), found), ("t2".to_owned(), unknown)];
        Messages::continue_with(&mut body, turn, &answers).unwrap();
        let results = &body["messages"][2];
        assert_eq!(results["role"], "user");
        assert_eq!(
            results["content"][0],
            json!({"type": "tool_result", "tool_use_id": "t1", "content": [
                {"type": "text", "text": "header"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
                {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}},
            ]})
        );
        assert_eq!(results["content"][1]["is_error"], true);
        assert_eq!(
            results["content"][1]["content"][0]["text"],
            "unknown handle"
        );
    }
}
