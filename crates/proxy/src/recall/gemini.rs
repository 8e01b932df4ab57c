//! Gemini: a response's `candidates[0].content.parts`, `functionCall`
//! parts among them (usually without ids: a response answers its call by
//! name and place); a stream of such responses, each a piece of the turn
//! with the usage so far (`data:` events, or one JSON array). Thought
//! signatures stay on their parts: the model's turn goes back through the
//! codec, which keeps every part's fields.

use abridge::model::{
    ContentForm, Message, Part, ToolResult, Usage, Wire, decode_wire_messages, encode_wire_messages,
};
use abridge::recall::Answer;
use axum::body::Bytes;
use serde_json::{Map, Value, json};

use super::api::{Api, Round, sse};
use super::{Call, Ours, add_usage};

pub(super) struct Gemini;

/// The parts the rounds before the last showed (text and thoughts).
#[derive(Default)]
pub(super) struct Said(Vec<Value>);

impl Api for Gemini {
    const WIRE: Wire = Wire::Gemini;
    const USAGE: &'static str = "usageMetadata";
    type Earlier = Said;
    type Stream = GeminiStream;

    fn usage(report: &Value) -> Usage {
        Usage::from_gemini(report)
    }

    fn gather(chunks: Vec<Value>) -> Option<Value> {
        Some(merge_chunks(chunks))
    }

    fn calls(response: &Value, tool: &Ours) -> Vec<Call> {
        recall_calls(parts_of(response), tool)
    }

    fn take(earlier: &mut Said, response: &Value, tool: &Ours) -> Value {
        let parts = parts_of(response);
        earlier
            .0
            .extend(parts.iter().filter(|p| !is_call(p)).cloned());
        let turn: Vec<Value> = parts
            .iter()
            .filter(|p| !is_call(p) || is_recall(p, tool))
            .cloned()
            .collect();
        json!({"parts": turn, "role": "model"})
    }

    fn merge(earlier: Said, mut v: Value, tool: &Ours, note: &str) -> Value {
        let Some(content) = v
            .pointer_mut("/candidates/0/content")
            .filter(|c| c.is_object())
        else {
            return v;
        };
        let last = content["parts"].as_array().cloned().unwrap_or_default();
        let mut parts = earlier.0;
        parts.extend(last.into_iter().filter(|p| !is_recall(p, tool)));
        if parts.is_empty() {
            parts.push(json!({"text": note}));
        }
        content["parts"] = Value::Array(parts);
        v
    }

    fn results(answers: &[(String, Answer)]) -> Vec<Message> {
        let results = answers
            .iter()
            .map(|(id, a)| {
                let key = if a.is_error { "error" } else { "output" };
                let mut extra = Map::new();
                extra.insert("response".into(), json!({ key: null }));
                ToolResult {
                    call_id: id.clone(),
                    parts: vec![Part::text(a.text())],
                    form: ContentForm::Text,
                    is_error: None,
                    extra: extra.into(),
                }
            })
            .collect();
        abridge::model::Family::Gemini.result_messages(results)
    }

    /// The model's turn and a user turn of function responses go after
    /// `contents`, encoded together: a response takes its call's name and
    /// (when the call had one) its id.
    fn continue_with(
        body: &mut Value,
        turn: Value,
        answers: &[(String, Answer)],
    ) -> abridge::model::Result<()> {
        let mut turns = decode_wire_messages(Self::WIRE, vec![turn], 0)?;
        turns.extend(Self::results(answers));
        let encoded = encode_wire_messages(Self::WIRE, &turns, 0)?;
        if let Some(contents) = body.get_mut("contents").and_then(Value::as_array_mut) {
            contents.extend(encoded);
        }
        Ok(())
    }

    fn stream(tool: &Ours) -> GeminiStream {
        GeminiStream::new(tool)
    }
}

fn parts_of(response: &Value) -> &[Value] {
    response
        .pointer("/candidates/0/content/parts")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn is_call(part: &Value) -> bool {
    part.get("functionCall").is_some()
}

fn is_recall(part: &Value, tool: &Ours) -> bool {
    part.pointer("/functionCall/name")
        .and_then(Value::as_str)
        .is_some_and(|n| tool.owns(n))
}

/// The recall calls among a model turn's parts, with the ids the codec
/// gives them (their own, or made from their place): the ids its
/// continuation answers.
fn recall_calls(parts: &[Value], tool: &Ours) -> Vec<Call> {
    let turn = json!({"parts": parts, "role": "model"});
    let Ok(decoded) = decode_wire_messages(Wire::Gemini, vec![turn], 0) else {
        return Vec::new();
    };
    decoded
        .iter()
        .flat_map(|m| m.tool_calls())
        .filter(|c| tool.owns(&c.name))
        .map(|c| Call {
            id: c.id.clone(),
            name: c.name.clone(),
            arguments: c.arguments.to_value(),
        })
        .collect()
}

/// A stream sent as one JSON array, as one response: the parts in order,
/// the last chunk's finish and usage.
fn merge_chunks(chunks: Vec<Value>) -> Value {
    let parts: Vec<Value> = chunks.iter().flat_map(|c| parts_of(c).to_vec()).collect();
    let Some(mut last) = chunks.into_iter().last() else {
        return Value::Null;
    };
    if let Some(content) = last.pointer_mut("/candidates/0/content") {
        content["parts"] = Value::Array(parts);
    }
    last
}

/// The client's Gemini stream: each chunk passes at once without its
/// function calls, finish and usage; those come in a last chunk once the
/// rounds are over, with the usage summed.
pub(super) struct GeminiStream {
    tool: Ours,
    round: usize,
    /// The first chunk's other fields (`modelVersion`, `responseId`).
    template: Option<Map<String, Value>>,
    /// The round's parts as they came: the model's turn.
    parts: Vec<Value>,
    finish: Option<Value>,
    /// The round's latest usage (each chunk carries the usage so far).
    usage: Option<Value>,
    /// The usage of the rounds before.
    earlier: Map<String, Value>,
    said: bool,
    /// The upstream sent an error: the stream ends there.
    failed: bool,
}

impl GeminiStream {
    fn new(tool: &Ours) -> Self {
        GeminiStream {
            tool: tool.clone(),
            round: 0,
            template: None,
            parts: Vec::new(),
            finish: None,
            usage: None,
            earlier: Map::new(),
            said: false,
            failed: false,
        }
    }

    /// A chunk of `parts` in the stream's shape.
    fn chunk(&self, parts: Vec<Value>, finish: Option<Value>, usage: Option<Value>) -> Value {
        let mut candidate = json!({"content": {"parts": parts, "role": "model"}, "index": 0});
        if let Some(f) = finish {
            candidate["finishReason"] = f;
        }
        let mut out = Map::new();
        out.insert("candidates".into(), json!([candidate]));
        if let Some(u) = usage {
            out.insert("usageMetadata".into(), u);
        }
        for (k, v) in self.template.iter().flatten() {
            out.entry(k.clone()).or_insert_with(|| v.clone());
        }
        Value::Object(out)
    }
}

impl Round for GeminiStream {
    fn event(&mut self, name: Option<&str>, data: &str) -> Vec<Bytes> {
        let Ok(mut v) = serde_json::from_str::<Value>(data) else {
            return vec![sse(name, &data)];
        };
        if v.get("error").is_some() || !v.is_object() {
            self.failed = true;
            return vec![sse(name, &v)];
        }
        if let Some(u) = v.get("usageMetadata").filter(|u| u.is_object()) {
            self.usage = Some(u.clone());
        }
        if self.template.is_none()
            && let Some(m) = v.as_object()
        {
            let keep = |k: &String| k != "candidates" && k != "usageMetadata";
            self.template = Some(
                m.iter()
                    .filter(|(k, _)| keep(k))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            );
        }
        let Some(candidate) = v
            .pointer_mut("/candidates/0")
            .and_then(Value::as_object_mut)
        else {
            // Prompt feedback or usage alone: its usage goes at the end.
            if let Some(m) = v.as_object_mut() {
                m.remove("usageMetadata");
            }
            return match v
                .as_object()
                .is_some_and(|m| m.keys().any(|k| k != "modelVersion" && k != "responseId"))
            {
                true => vec![sse(name, &v)],
                false => Vec::new(),
            };
        };
        if let Some(f) = candidate.remove("finishReason") {
            self.finish = Some(f);
        }
        let parts = match candidate
            .get_mut("content")
            .and_then(|c| c.get_mut("parts"))
        {
            Some(Value::Array(parts)) => std::mem::take(parts),
            _ => Vec::new(),
        };
        self.parts.extend(parts.iter().cloned());
        let shown: Vec<Value> = parts.into_iter().filter(|p| !is_call(p)).collect();
        if shown.is_empty() {
            return Vec::new();
        }
        self.said |= shown.iter().any(|p| p.get("text").is_some_and(|t| t != ""));
        if let Some(c) = candidate.get_mut("content") {
            c["parts"] = Value::Array(shown);
        }
        if let Some(m) = v.as_object_mut() {
            m.remove("usageMetadata");
        }
        vec![sse(name, &v)]
    }

    fn recall_calls(&self) -> Vec<Call> {
        if self.failed {
            return Vec::new();
        }
        recall_calls(&self.parts, &self.tool)
    }

    fn turn(&self) -> Value {
        let parts: Vec<&Value> = self
            .parts
            .iter()
            .filter(|p| !is_call(p) || is_recall(p, &self.tool))
            .collect();
        json!({"parts": parts, "role": "model"})
    }

    fn next_round(&mut self) {
        self.round += 1;
        if let Some(u) = self.usage.take() {
            add_usage(&mut self.earlier, &u);
        }
        self.parts.clear();
        self.finish = None;
    }

    fn finish(&mut self, note: &str) -> Vec<Bytes> {
        if self.failed {
            return Vec::new();
        }
        let mut parts: Vec<Value> = self
            .parts
            .iter()
            .filter(|p| is_call(p) && !is_recall(p, &self.tool))
            .cloned()
            .collect();
        if parts.is_empty() && !self.said && self.round > 0 {
            parts.push(json!({"text": note}));
        }
        let usage = match (self.round, self.usage.take()) {
            (0, u) => u,
            (_, u) => {
                let mut sum = std::mem::take(&mut self.earlier);
                if let Some(u) = u {
                    add_usage(&mut sum, &u);
                }
                Some(Value::Object(sum))
            }
        };
        let finish = self.finish.take().unwrap_or_else(|| json!("STOP"));
        vec![sse(None, &self.chunk(parts, Some(finish), usage))]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recall::tests::data;

    fn chunk(parts: Value, finish: Option<&str>, prompt: u64) -> String {
        let mut c = json!({"candidates": [{"content": {"parts": parts, "role": "model"}, "index": 0}],
            "usageMetadata": {"promptTokenCount": prompt, "candidatesTokenCount": 5},
            "modelVersion": "gemini-2.5-pro", "responseId": "r"});
        if let Some(f) = finish {
            c["candidates"][0]["finishReason"] = json!(f);
        }
        c.to_string()
    }

    #[test]
    fn a_gemini_turn_that_recalls_continues_as_one_stream() {
        let mut m = Gemini::stream(&Ours::recall_only("abridge_recall"));
        let mut out: Vec<Value> = Vec::new();
        let feed = |m: &mut GeminiStream, s: String| {
            m.event(None, &s).iter().map(data).collect::<Vec<_>>()
        };
        out.extend(feed(
            &mut m,
            chunk(json!([{"text": "Need the file."}]), None, 100),
        ));
        out.extend(feed(
            &mut m,
            chunk(
                json!([
                    {"functionCall": {"name": "abridge_recall", "args": {"handle": "abr_0123456789"}},
                        "thoughtSignature": "sig-1"},
                    {"functionCall": {"name": "read", "args": {}}}
                ]),
                Some("STOP"),
                100,
            ),
        ));
        assert_eq!(out.len(), 1, "only the text went out: {out:?}");
        assert!(
            out[0]["usageMetadata"].is_null() && out[0]["candidates"][0]["finishReason"].is_null()
        );
        let calls = m.recall_calls();
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].arguments, json!({"handle": "abr_0123456789"}));
        let turn = m.turn();
        assert_eq!(
            turn["parts"].as_array().unwrap().len(),
            2,
            "the client's call is not continued"
        );
        assert_eq!(turn["parts"][1]["thoughtSignature"], "sig-1");

        // The continuation answers the call by name, without an id it never had.
        let mut body = json!({"contents": [{"parts": [{"text": "go"}], "role": "user"}]});
        let answer = Answer {
            handle: None,
            pieces: vec![abridge::recall::Piece::Text {
                text: "the original".into(),
            }],
            is_error: false,
            page: 1,
            pages: 1,
            bytes: 12,
        };
        Gemini::continue_with(&mut body, turn, &[(calls[0].id.clone(), answer)]).unwrap();
        assert_eq!(body["contents"][1]["parts"][1]["thoughtSignature"], "sig-1");
        assert_eq!(
            body["contents"][2],
            json!({"parts": [{"functionResponse": {"name": "abridge_recall",
                "response": {"output": "the original"}}}], "role": "user"})
        );

        m.next_round();
        out.extend(feed(
            &mut m,
            chunk(json!([{"text": "Read it."}]), None, 900),
        ));
        out.extend(feed(
            &mut m,
            chunk(
                json!([{"functionCall": {"name": "read", "args": {"p": 2}}}]),
                Some("STOP"),
                900,
            ),
        ));
        assert!(m.recall_calls().is_empty());
        out.extend(m.finish("").iter().map(data));
        assert!(!out.iter().any(|e| e.to_string().contains("abridge_recall")));
        let last = out.last().unwrap();
        assert_eq!(
            last["candidates"][0]["content"]["parts"][0]["functionCall"]["args"],
            json!({"p": 2})
        );
        assert_eq!(last["candidates"][0]["finishReason"], "STOP");
        assert_eq!(last["usageMetadata"]["promptTokenCount"], 1000);
        assert_eq!(last["modelVersion"], "gemini-2.5-pro");
    }
}
