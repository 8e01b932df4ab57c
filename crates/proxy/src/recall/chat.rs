//! OpenAI Chat Completions: a response's `choices[0].message` and its
//! `tool_calls`; a stream of chunks ending in `[DONE]`, tool calls built
//! from their deltas. Tool messages carry text only.

use abridge::model::{ContentForm, Message, Part, Role, ToolResult, Usage, Wire};
use abridge::recall::{Answer, Piece};
use axum::body::Bytes;
use serde_json::{Map, Value, json};

use super::api::{Api, Round, sse, text_calls};
use super::{Call, Ours, add_usage};

pub(super) struct Chat;

/// The text of the rounds before the last.
#[derive(Default)]
pub(super) struct Said(Vec<String>);

impl Api for Chat {
    const WIRE: Wire = Wire::Chat;
    type Earlier = Said;
    type Stream = ChatStream;

    fn usage(report: &Value) -> Usage {
        Usage::from_openai(report)
    }

    fn calls(response: &Value, tool: &Ours) -> Vec<Call> {
        let calls = tool_calls(&response["choices"][0]["message"]);
        text_calls(calls.iter().map(parts), tool)
    }

    fn take(earlier: &mut Said, response: &Value, tool: &Ours) -> Value {
        let mut message = response["choices"][0]["message"].clone();
        if let Some(text) = message["content"].as_str().filter(|t| !t.is_empty()) {
            earlier.0.push(text.to_owned());
        }
        let recall: Vec<Value> = tool_calls(&message)
            .into_iter()
            .filter(|c| tool.owns_value(&c["function"]["name"]))
            .collect();
        message["tool_calls"] = Value::Array(recall);
        message
    }

    fn merge(earlier: Said, mut v: Value, tool: &Ours, note: &str) -> Value {
        let Some(message) = v
            .get_mut("choices")
            .and_then(|c| c.get_mut(0))
            .and_then(|c| c.get_mut("message"))
            .filter(|m| m.is_object())
        else {
            return v;
        };
        let all = tool_calls(message);
        let own: Vec<Value> = all
            .iter()
            .filter(|c| !tool.owns_value(&c["function"]["name"]))
            .cloned()
            .collect();
        let mut text = earlier.0.join("\n\n");
        if let Some(t) = message["content"].as_str().filter(|t| !t.is_empty()) {
            if !text.is_empty() {
                text.push_str("\n\n");
            }
            text.push_str(t);
        }
        if own.is_empty() && !all.is_empty() && text.is_empty() {
            text = note.to_owned();
        }
        if !text.is_empty() {
            message["content"] = json!(text);
        }
        if !all.is_empty() {
            if own.is_empty() {
                if let Some(m) = message.as_object_mut() {
                    m.remove("tool_calls");
                }
                v["choices"][0]["finish_reason"] = json!("stop");
            } else {
                message["tool_calls"] = Value::Array(own);
            }
        }
        v
    }

    fn results(answers: &[(String, Answer)]) -> Vec<Message> {
        answers
            .iter()
            .map(|(id, a)| Message {
                role: Role::Tool,
                parts: vec![Part::ToolResult(Box::new(ToolResult {
                    call_id: id.clone(),
                    parts: vec![Part::text(text_only(a))],
                    form: ContentForm::Text,
                    is_error: None,
                    extra: Default::default(),
                }))],
                form: ContentForm::Absent,
                ..Message::default()
            })
            .collect()
    }

    fn stream(tool: &Ours) -> ChatStream {
        ChatStream::new(tool)
    }
}

/// An answer as a tool message's text: its images cannot go there, so
/// they are said in their place.
fn text_only(a: &Answer) -> String {
    let texts: Vec<&str> = a
        .pieces
        .iter()
        .map(|p| match p {
            Piece::Text { text } => text.as_str(),
            Piece::Image { .. } => {
                "[an image: Chat Completions tool results carry text only, so it is not shown here]"
            }
        })
        .collect();
    texts.join("\n")
}

fn tool_calls(message: &Value) -> Vec<Value> {
    message["tool_calls"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// A call's id, name and arguments text.
fn parts(c: &Value) -> (&str, &str, &str) {
    fn text(v: &Value) -> &str {
        v.as_str().unwrap_or_default()
    }
    (
        text(&c["id"]),
        text(&c["function"]["name"]),
        text(&c["function"]["arguments"]),
    )
}

/// A tool call of a stream, as its deltas built it.
#[derive(Default, Clone)]
struct StreamedCall {
    id: String,
    name: String,
    arguments: String,
}

impl StreamedCall {
    fn json(&self) -> Value {
        json!({"id": self.id, "type": "function",
            "function": {"name": self.name, "arguments": self.arguments}})
    }
}

/// The client's Chat Completions stream.
pub(super) struct ChatStream {
    tool: Ours,
    round: usize,
    /// The first chunk, whose id, model and creation time every chunk the
    /// proxy writes repeats.
    template: Option<Value>,
    text: String,
    calls: Vec<(u64, StreamedCall)>,
    finish: Option<Value>,
    usage: Map<String, Value>,
    saw_usage: bool,
    said: bool,
}

impl ChatStream {
    fn new(tool: &Ours) -> Self {
        ChatStream {
            tool: tool.clone(),
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

    /// Adds a chunk's tool-call deltas to the calls they build.
    fn grow(&mut self, deltas: &[Value]) {
        for c in deltas {
            let i = c["index"].as_u64().unwrap_or(0);
            let at = match self.calls.iter().position(|(j, _)| *j == i) {
                Some(at) => at,
                None => {
                    self.calls.push((i, StreamedCall::default()));
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
}

impl Round for ChatStream {
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
        let Some(d) = choice["delta"].as_object_mut() else {
            return Vec::new();
        };
        if let Some(Value::Array(deltas)) = d.remove("tool_calls") {
            self.grow(&deltas);
        }
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
        let calls = self
            .calls
            .iter()
            .map(|(_, c)| (c.id.as_str(), c.name.as_str(), c.arguments.as_str()));
        text_calls(calls, &self.tool)
    }

    fn turn(&self) -> Value {
        let calls: Vec<Value> = self
            .calls
            .iter()
            .filter(|(_, c)| self.tool.owns(&c.name))
            .map(|(_, c)| c.json())
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
            .filter(|(_, c)| !self.tool.owns(&c.name))
            .enumerate()
            .map(|(i, (_, c))| {
                let mut call = c.json();
                call["index"] = json!(i);
                call
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
    use crate::recall::tests::data;

    #[test]
    fn a_chat_stream_keeps_errors_and_renumbers_the_clients_calls() {
        let mut m = Chat::stream(&Ours::recall_only("abridge_recall"));
        let chunk = |delta: Value, finish: Value| json!({"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        let sent = |m: &mut ChatStream, v: Value| m.event(None, &v.to_string());
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

    #[test]
    fn an_answer_continues_as_a_tool_message_of_text() {
        let mut body = json!({"model": "m", "messages": [{"role": "user", "content": "go"}]});
        let answer = Answer {
            handle: None,
            pieces: vec![
                Piece::Text {
                    text: "[abr_0123456789 · header]".into(),
                },
                Piece::Image {
                    url: "data:image/png;base64,AAAA".into(),
                },
            ],
            is_error: false,
            page: 1,
            pages: 1,
            bytes: 4,
        };
        let turn = json!({"role": "assistant", "content": null, "tool_calls": []});
        Chat::continue_with(&mut body, turn, &[("call_1".into(), answer)]).unwrap();
        let tool = &body["messages"][2];
        assert_eq!(tool["role"], "tool");
        assert_eq!(tool["tool_call_id"], "call_1");
        let text = tool["content"].as_str().expect("a string");
        assert!(
            text.starts_with("[abr_0123456789 · header]\n[an image"),
            "{text}"
        );
    }
}
