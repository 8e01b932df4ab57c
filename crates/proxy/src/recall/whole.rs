//! A whole (not streamed) response: read, answered while it calls the
//! recall tool, and merged into one response for the client.

use std::sync::Arc;

use abridge::model::Usage;
use axum::body::{Body, Bytes};
use axum::http::{HeaderName, HeaderValue, Response};
use serde_json::{Map, Value, json};

use super::{Api, Call, Recalling, Resend, add_usage, exhausted_note, items};
use crate::forward::{OnUsage, to_client};
use crate::metrics::Metrics;

/// Answers the recall calls of `first` (and of the responses after it)
/// and gives the client one response without them.
pub(crate) async fn whole(
    mut r: Recalling,
    first: reqwest::Response,
    resend: Resend,
    metrics: Arc<Metrics>,
    on_usage: Option<OnUsage>,
    extra: Vec<(HeaderName, HeaderValue)>,
) -> Response<Body> {
    // The first round's usage is what the sent history cost; it is
    // reported once the rounds are over, with how many calls were answered.
    let mut first_usage = None;
    let mut on_usage = on_usage;
    let mut report = |usage| {
        if let Some(done) = on_usage.take() {
            done(usage);
        }
    };
    let mut response = first;
    let mut earlier = Earlier::default();
    let mut rounds = 0;
    loop {
        let status = response.status();
        let head = response.headers().clone();
        let bytes = response.bytes().await.unwrap_or_default();
        let parsed = serde_json::from_slice::<Value>(&bytes).ok();
        if rounds == 0 {
            first_usage = parsed.as_ref().and_then(|v| usage_of(r.api, v));
        }
        let Some(v) = parsed.filter(|_| status.is_success()) else {
            report(first_usage);
            return reply(status, &head, bytes, &extra, rounds);
        };
        let calls = calls_of(r.api, &v, &r.tool);
        if calls.is_empty() && rounds == 0 {
            // Nothing to answer: the response goes as it came, byte for byte.
            report(first_usage);
            return reply(status, &head, bytes, &extra, rounds);
        }
        if calls.is_empty() || rounds == r.max_rounds {
            if !calls.is_empty() {
                metrics.recall_rounds_exhausted();
            }
            let merged = earlier.merge(r.api, v, &r.tool, rounds, &exhausted_note(rounds));
            let body = Bytes::from(merged.to_string());
            report(first_usage);
            return reply(status, &head, body, &extra, rounds);
        }
        rounds += 1;
        metrics.recall_round();
        let answers = r.answer(calls, &metrics).await;
        let turn = earlier.take(r.api, &v, &r.tool);
        r.continue_with(turn, &answers);
        response = match resend.send(&r.body).await {
            Ok(next) => next,
            Err(e) => {
                tracing::warn!(error = %e, "the upstream failed on a recall round");
                let note =
                    "[abridge: the upstream failed while the proxy answered the model's recall]";
                let body = Bytes::from(earlier.merge(r.api, v, &r.tool, rounds, note).to_string());
                report(first_usage);
                return reply(status, &head, body, &extra, rounds);
            }
        };
    }
}

/// What the client's response gathers from the rounds before the last.
#[derive(Default)]
struct Earlier {
    /// Text the model wrote (Anthropic text blocks; Chat content).
    texts: Vec<String>,
    /// Output items the client is shown (the Responses API).
    items: Vec<Value>,
    usage: Map<String, Value>,
}

impl Earlier {
    /// Keeps a round's text and usage; returns the model's turn as it
    /// continues: its text and thinking, and its recall calls only.
    fn take(&mut self, api: Api, v: &Value, tool: &str) -> Value {
        add_usage(&mut self.usage, &v["usage"]);
        match api {
            Api::Responses => {
                let output = output_of(v);
                self.items
                    .extend(items::select(output, |i| !items::is_call(i)));
                let turn =
                    items::select(output, |i| !items::is_call(i) || items::is_recall(i, tool));
                Value::Array(turn)
            }
            Api::Messages => {
                let content: Vec<Value> = blocks(v)
                    .iter()
                    .filter(|b| b["type"] != "tool_use" || b["name"] == tool)
                    .cloned()
                    .collect();
                self.texts.extend(
                    content
                        .iter()
                        .filter(|b| b["type"] == "text")
                        .filter_map(|b| b["text"].as_str().map(str::to_owned)),
                );
                json!({"role": "assistant", "content": content})
            }
            Api::Chat => {
                let mut message = v["choices"][0]["message"].clone();
                if let Some(text) = message["content"].as_str().filter(|t| !t.is_empty()) {
                    self.texts.push(text.to_owned());
                }
                let recall: Vec<Value> = tool_calls(&message)
                    .into_iter()
                    .filter(|c| c["function"]["name"] == tool)
                    .collect();
                message["tool_calls"] = Value::Array(recall);
                message
            }
        }
    }

    /// The last response with the earlier rounds' text before its own,
    /// its recall calls gone and the usage summed.
    /// `note` stands in for a response left with nothing to say.
    fn merge(mut self, api: Api, mut v: Value, tool: &str, rounds: usize, note: &str) -> Value {
        if !v.is_object() {
            return v;
        }
        add_usage(&mut self.usage, &v["usage"]);
        if rounds > 0 {
            v["usage"] = Value::Object(std::mem::take(&mut self.usage));
        }
        match api {
            Api::Responses => {
                let output = match v.get_mut("output").map(Value::take) {
                    Some(Value::Array(output)) => output,
                    _ => Vec::new(),
                };
                let had_output = !output.is_empty();
                let keep = items::kept(output.iter(), |i| !items::is_recall(i, tool));
                let mut shown = std::mem::take(&mut self.items);
                shown.extend(
                    output
                        .into_iter()
                        .zip(keep)
                        .filter_map(|(i, k)| k.then_some(i)),
                );
                if shown.is_empty() && had_output {
                    shown.push(items::note(note));
                }
                v["output"] = Value::Array(shown);
            }
            Api::Messages => {
                let mut content: Vec<Value> = blocks(&v)
                    .iter()
                    .filter(|b| !(b["type"] == "tool_use" && b["name"] == tool))
                    .cloned()
                    .collect();
                let dropped = content.len() < blocks(&v).len();
                // Thinking leads an assistant turn: earlier text goes after it.
                let at = content
                    .iter()
                    .take_while(|b| {
                        matches!(b["type"].as_str(), Some("thinking" | "redacted_thinking"))
                    })
                    .count();
                for (i, t) in self.texts.iter().enumerate() {
                    content.insert(at + i, json!({"type": "text", "text": t}));
                }
                if content.is_empty() {
                    content.push(json!({"type": "text", "text": note}));
                }
                if dropped && !content.iter().any(|b| b["type"] == "tool_use") {
                    v["stop_reason"] = json!("end_turn");
                }
                v["content"] = Value::Array(content);
            }
            Api::Chat => {
                let Some(message) = v
                    .get_mut("choices")
                    .and_then(|c| c.get_mut(0))
                    .and_then(|c| c.get_mut("message"))
                    .filter(|m| m.is_object())
                else {
                    return v;
                };
                let own: Vec<Value> = tool_calls(message)
                    .into_iter()
                    .filter(|c| c["function"]["name"] != tool)
                    .collect();
                let had = !tool_calls(message).is_empty();
                let mut text = self.texts.join("\n\n");
                if let Some(t) = message["content"].as_str().filter(|t| !t.is_empty()) {
                    if !text.is_empty() {
                        text.push_str("\n\n");
                    }
                    text.push_str(t);
                }
                if own.is_empty() && had && text.is_empty() {
                    text = note.to_owned();
                }
                if !text.is_empty() {
                    message["content"] = json!(text);
                }
                if had {
                    if own.is_empty() {
                        if let Some(m) = message.as_object_mut() {
                            m.remove("tool_calls");
                        }
                        v["choices"][0]["finish_reason"] = json!("stop");
                    } else {
                        message["tool_calls"] = Value::Array(own);
                    }
                }
            }
        }
        v
    }
}

fn blocks(v: &Value) -> Vec<Value> {
    v["content"].as_array().cloned().unwrap_or_default()
}

fn tool_calls(message: &Value) -> Vec<Value> {
    message["tool_calls"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// The recall calls in a whole response.
fn calls_of(api: Api, v: &Value, tool: &str) -> Vec<Call> {
    match api {
        Api::Responses => items::recall_calls(output_of(v), tool),
        Api::Messages => blocks(v)
            .into_iter()
            .filter(|b| b["type"] == "tool_use" && b["name"] == tool)
            .map(|b| Call {
                id: b["id"].as_str().unwrap_or_default().to_owned(),
                arguments: b["input"].clone(),
            })
            .collect(),
        Api::Chat => tool_calls(&v["choices"][0]["message"])
            .into_iter()
            .filter(|c| c["function"]["name"] == tool)
            .map(|c| Call {
                id: c["id"].as_str().unwrap_or_default().to_owned(),
                arguments: c["function"]["arguments"]
                    .as_str()
                    .and_then(|a| serde_json::from_str(a).ok())
                    .unwrap_or(Value::Null),
            })
            .collect(),
    }
}

fn usage_of(api: Api, v: &Value) -> Option<Usage> {
    let u = v.get("usage").filter(|u| u.is_object())?;
    Some(match api {
        Api::Messages => Usage::from_anthropic(u),
        Api::Chat | Api::Responses => Usage::from_openai(u),
    })
}

/// A Responses API response's output items.
fn output_of(v: &Value) -> &[Value] {
    v["output"].as_array().map_or(&[], Vec::as_slice)
}

/// The client's response: the upstream's status and headers (a new
/// length), the proxy's own headers and how many recall rounds it took.
fn reply(
    status: reqwest::StatusCode,
    head: &axum::http::HeaderMap,
    body: Bytes,
    extra: &[(HeaderName, HeaderValue)],
    rounds: usize,
) -> Response<Body> {
    let recalled = (rounds > 0).then(|| {
        (
            HeaderName::from_static("x-abridge-recalled"),
            HeaderValue::from(rounds),
        )
    });
    let extra = extra.iter().cloned().chain(recalled);
    to_client(status, head, extra, Body::from(body))
}
