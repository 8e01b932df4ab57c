//! The Responses API's stream, round after round: `response.created`
//! once, output items numbered on across rounds, `response.completed` once
//! at the end with every shown item and the usage summed; each event
//! renumbered (`sequence_number`) as the client sees it.
//!
//! Messages pass at once. A function call is held until the round ends
//! (a round that recalls continues without the client's calls), and so is
//! a reasoning item until what follows it is known: it is shown just
//! before the next shown item, or with the client's calls at the end.

use axum::body::Bytes;
use serde_json::{Map, Value, json};

use super::super::api::{Round, sse};
use super::super::{Call, Ours, add_usage};
use super::{is_call, is_reasoning, is_recall, kept, recall_calls};

/// An output item of the round, as its events built it.
struct Item {
    /// Its `output_index` upstream.
    upstream: u64,
    /// The item as last seen (added, then done).
    json: Value,
    /// Its `output_index` for the client, once shown.
    shown: Option<usize>,
    /// Its events while it is held.
    held: Vec<Value>,
}

/// The client's Responses stream.
pub(crate) struct ResponsesStream {
    tool: Ours,
    round: usize,
    /// The next `sequence_number` the client sees.
    seq: u64,
    /// The client's next `output_index`.
    next: usize,
    items: Vec<Item>,
    /// The items shown, complete, by the client's index (the final response's `output`).
    output: Vec<(usize, Value)>,
    usage: Map<String, Value>,
    /// The round's last event (`response.completed` or `.incomplete`).
    end: Option<Value>,
    /// The upstream failed (`response.failed`, `error`): the stream ends there.
    failed: bool,
}

impl ResponsesStream {
    pub(super) fn new(tool: &Ours) -> Self {
        ResponsesStream {
            tool: tool.clone(),
            round: 0,
            seq: 0,
            next: 0,
            items: Vec::new(),
            output: Vec::new(),
            usage: Map::new(),
            end: None,
            failed: false,
        }
    }

    /// An event as the client gets it, numbered in its stream.
    fn out(&mut self, mut v: Value) -> Bytes {
        if let Some(m) = v.as_object_mut() {
            m.insert("sequence_number".into(), json!(self.seq));
        }
        self.seq += 1;
        let name = v["type"].as_str().unwrap_or("message").to_owned();
        sse(Some(&name), &v)
    }

    /// An item's event at the client's index `n`.
    fn at(&mut self, n: usize, mut v: Value) -> Bytes {
        if let Some(m) = v.as_object_mut() {
            m.insert("output_index".into(), json!(n));
        }
        if v["type"] == "response.output_item.done" {
            self.output.push((n, v["item"].clone()));
        }
        self.out(v)
    }

    /// Shows the held item at `k`: a new index, its events so far.
    fn show(&mut self, k: usize) -> Vec<Bytes> {
        let n = self.next;
        self.next += 1;
        self.items[k].shown = Some(n);
        let held = std::mem::take(&mut self.items[k].held);
        held.into_iter().map(|e| self.at(n, e)).collect()
    }

    /// Shows the reasoning items held since the last held call: they lead
    /// the item about to be shown.
    fn release_reasoning(&mut self) -> Vec<Bytes> {
        let from = self
            .items
            .iter()
            .rposition(|i| i.shown.is_none() && !is_reasoning(&i.json))
            .map_or(0, |p| p + 1);
        let mut out = Vec::new();
        for k in from..self.items.len() {
            if self.items[k].shown.is_none() {
                out.extend(self.show(k));
            }
        }
        out
    }

    /// A message item saying `note`, as the events of a stream.
    fn note_events(&mut self, note: &str) -> Vec<Bytes> {
        let n = self.next;
        self.next += 1;
        let done = super::note(note);
        let mut added = done.clone();
        added["status"] = json!("in_progress");
        added["content"] = json!([]);
        let part = json!({"type": "output_text", "text": "", "annotations": []});
        [
            json!({"type": "response.output_item.added", "item": added}),
            json!({"type": "response.content_part.added", "content_index": 0, "part": part}),
            json!({"type": "response.output_text.delta", "content_index": 0, "delta": note}),
            json!({"type": "response.output_text.done", "content_index": 0, "text": note}),
            json!({"type": "response.content_part.done", "content_index": 0,
                "part": done["content"][0]}),
            json!({"type": "response.output_item.done", "item": done}),
        ]
        .into_iter()
        .map(|e| self.at(n, e))
        .collect()
    }
}

impl Round for ResponsesStream {
    fn event(&mut self, name: Option<&str>, data: &str) -> Vec<Bytes> {
        let Ok(v) = serde_json::from_str::<Value>(data) else {
            return vec![sse(name, &data)];
        };
        let kind = v["type"].as_str().or(name).unwrap_or_default().to_owned();
        match kind.as_str() {
            "response.created" | "response.in_progress" | "response.queued" => match self.round {
                0 => vec![self.out(v)],
                _ => Vec::new(),
            },
            "response.completed" | "response.incomplete" => {
                add_usage(&mut self.usage, &v["response"]["usage"]);
                self.end = Some(v);
                Vec::new()
            }
            "response.failed" | "error" => {
                self.failed = true;
                vec![self.out(v)]
            }
            "response.output_item.added" => {
                let json = v["item"].clone();
                let upstream = v["output_index"].as_u64().unwrap_or(u64::MAX);
                let held = is_call(&json) || is_reasoning(&json);
                let mut out = match held {
                    true => Vec::new(),
                    false => self.release_reasoning(),
                };
                self.items.push(Item {
                    upstream,
                    json,
                    shown: None,
                    held: vec![v],
                });
                if !held {
                    out.extend(self.show(self.items.len() - 1));
                }
                out
            }
            _ => {
                let index = v["output_index"].as_u64();
                let Some(k) = index.and_then(|i| self.items.iter().position(|it| it.upstream == i))
                else {
                    return vec![self.out(v)];
                };
                if kind == "response.output_item.done" {
                    self.items[k].json = v["item"].clone();
                }
                match self.items[k].shown {
                    Some(n) => vec![self.at(n, v)],
                    None => {
                        self.items[k].held.push(v);
                        Vec::new()
                    }
                }
            }
        }
    }

    fn recall_calls(&self) -> Vec<Call> {
        let completed = self
            .end
            .as_ref()
            .is_some_and(|e| e["type"] == "response.completed");
        if self.failed || !completed {
            return Vec::new();
        }
        recall_calls(self.items.iter().map(|i| &i.json), &self.tool)
    }

    fn turn(&self) -> Value {
        let keep = kept(self.items.iter().map(|i| &i.json), |i| {
            !is_call(i) || is_recall(i, &self.tool)
        });
        let turn = self.items.iter().zip(keep).filter(|(_, k)| *k);
        Value::Array(turn.map(|(i, _)| i.json.clone()).collect())
    }

    fn next_round(&mut self) {
        self.round += 1;
        self.items.clear();
        self.end = None;
    }

    fn finish(&mut self, note: &str) -> Vec<Bytes> {
        if self.failed {
            return Vec::new();
        }
        // The client's own calls, with the reasoning that led them (what
        // was shown already is not shown again).
        let own = kept(self.items.iter().map(|i| &i.json), |i| {
            is_call(i) && !is_recall(i, &self.tool)
        });
        let mut out = Vec::new();
        for (k, own) in own.into_iter().enumerate() {
            if own && self.items[k].shown.is_none() {
                out.extend(self.show(k));
            }
        }
        if self.next == 0 && self.round > 0 {
            out.extend(self.note_events(note));
        }
        let Some(mut end) = self.end.take() else {
            // The upstream's stream ended before its response did: so does this one.
            return out;
        };
        self.output.sort_by_key(|(n, _)| *n);
        let shown: Vec<Value> = self.output.iter().map(|(_, item)| item.clone()).collect();
        end["response"]["output"] = Value::Array(shown);
        if self.round > 0 {
            end["response"]["usage"] = Value::Object(self.usage.clone());
        }
        out.push(self.out(end));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::recall::tests::data;

    /// A round's events: each item added then done, then `response.completed`.
    fn round(m: &mut ResponsesStream, items: &[Value], input_tokens: u64) -> Vec<Value> {
        let mut events =
            vec![json!({"type": "response.created", "response": {"id": "resp", "output": []}})];
        for (i, item) in items.iter().enumerate() {
            events.push(
                json!({"type": "response.output_item.added", "output_index": i, "item": item}),
            );
            if item["type"] == "message" {
                events.push(
                    json!({"type": "response.output_text.delta", "output_index": i,
                    "content_index": 0, "delta": "Hi"}),
                );
            }
            events.push(
                json!({"type": "response.output_item.done", "output_index": i, "item": item}),
            );
        }
        events.push(json!({"type": "response.completed", "response": {"id": "resp", "output": items,
            "usage": {"input_tokens": input_tokens, "output_tokens": 10, "total_tokens": input_tokens + 10}}}));
        events
            .iter()
            .enumerate()
            .flat_map(|(seq, e)| {
                let mut e = e.clone();
                e["sequence_number"] = json!(seq);
                m.event(e["type"].as_str(), &e.to_string())
            })
            .map(|b| data(&b))
            .collect()
    }

    #[test]
    fn a_responses_turn_that_recalls_continues_as_one_response() {
        let mut m = ResponsesStream::new(&Ours::recall_only("abridge_recall"));
        let rs1 =
            json!({"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "e1"});
        let recall = json!({"type": "function_call", "id": "fc_r", "call_id": "call_r",
            "name": "abridge_recall", "arguments": "{\"handle\":\"abr_0123456789\"}"});
        let own1 = json!({"type": "function_call", "id": "fc_1", "call_id": "call_1",
            "name": "read", "arguments": "{}"});
        let mut out = round(&mut m, &[rs1.clone(), recall.clone(), own1], 100);
        // Only the start went out: the reasoning led calls, which are held.
        assert_eq!(out.len(), 1, "{out:?}");
        let calls = m.recall_calls();
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].id, "call_r");
        assert_eq!(
            m.turn(),
            json!([rs1, recall]),
            "the client's call is not continued"
        );
        m.next_round();

        let rs2 =
            json!({"type": "reasoning", "id": "rs_2", "summary": [], "encrypted_content": "e2"});
        let msg = json!({"type": "message", "id": "msg_2", "role": "assistant",
            "content": [{"type": "output_text", "text": "Hi"}]});
        let rs3 =
            json!({"type": "reasoning", "id": "rs_3", "summary": [], "encrypted_content": "e3"});
        let own2 = json!({"type": "function_call", "id": "fc_2", "call_id": "call_2",
            "name": "read", "arguments": "{}"});
        out.extend(round(
            &mut m,
            &[rs2.clone(), msg.clone(), rs3.clone(), own2.clone()],
            900,
        ));
        assert!(m.recall_calls().is_empty());
        out.extend(m.finish("").iter().map(data));

        // One start, one end; every event numbered in order.
        let kinds: Vec<&str> = out.iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(
            kinds.iter().filter(|k| **k == "response.created").count(),
            1
        );
        assert_eq!(kinds.last(), Some(&"response.completed"));
        let seqs: Vec<u64> = out
            .iter()
            .map(|e| e["sequence_number"].as_u64().unwrap())
            .collect();
        assert_eq!(seqs, (0..out.len() as u64).collect::<Vec<_>>());
        // Items numbered 0.. in the order shown: the second round's reasoning
        // before its message, its last reasoning with the client's call.
        let done: Vec<(u64, Value)> = out
            .iter()
            .filter(|e| e["type"] == "response.output_item.done")
            .map(|e| (e["output_index"].as_u64().unwrap(), e["item"].clone()))
            .collect();
        assert_eq!(
            done,
            [
                (0, rs2.clone()),
                (1, msg.clone()),
                (2, rs3.clone()),
                (3, own2.clone())
            ]
        );
        assert!(!out.iter().any(|e| e.to_string().contains("abridge_recall")));
        let end = &out.last().unwrap()["response"];
        assert_eq!(end["output"], json!([rs2, msg, rs3, own2]));
        assert_eq!(end["usage"]["input_tokens"], 1000);
        assert_eq!(end["usage"]["output_tokens"], 20);
    }

    #[test]
    fn exhausted_rounds_end_with_a_note_and_a_failure_ends_the_stream() {
        let mut m = ResponsesStream::new(&Ours::recall_only("abridge_recall"));
        let recall = json!({"type": "function_call", "id": "fc_r", "call_id": "call_r",
            "name": "abridge_recall", "arguments": "{}"});
        round(&mut m, std::slice::from_ref(&recall), 10);
        m.next_round();
        round(&mut m, &[recall], 10);
        let end: Vec<Value> = m.finish("[note]").iter().map(data).collect();
        let last = end.last().unwrap();
        assert_eq!(
            last["response"]["output"][0]["content"][0]["text"],
            "[note]"
        );

        let mut failing = ResponsesStream::new(&Ours::recall_only("abridge_recall"));
        let out = failing.event(
            None,
            &json!({"type": "response.failed", "response": {}}).to_string(),
        );
        assert_eq!(out.len(), 1);
        assert!(failing.recall_calls().is_empty());
        assert!(failing.finish("").is_empty());
    }
}
