//! Reading the provider's usage report from a response on its way through,
//! without holding back a byte of it.
//!
//! Streams are Server-Sent Events, read by the proxy's one reader; only
//! an event whose data mentions `usage` is parsed (Chat Completions' final
//! `include_usage` chunk; the Responses API's `response.completed`;
//! Anthropic's `message_start` and `message_delta`). A plain JSON body is
//! parsed once it is complete. What a session's responses reported is
//! kept for its next request ([`LastUsage`]).

use std::sync::atomic::{AtomicU64, Ordering};

use abridge::model::{Family, Usage};
use abridge::tokens::Reported;
use serde_json::Value;

use crate::sse::SseReader;

/// Largest plain body read for its usage (larger ones pass unread).
const MAX_BODY: usize = 8 << 20;
/// Largest event kept while waiting for its end.
const MAX_EVENT: usize = 4 << 20;

/// Watches one response.
#[derive(Debug)]
pub(crate) struct UsageTap {
    family: Family,
    /// The stream's events, when the response is one.
    events: Option<SseReader>,
    buf: Vec<u8>,
    overflow: bool,
    usage: Option<Usage>,
    model: Option<String>,
}

/// What a response said of itself: its usage, and the model that answered.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Replied {
    pub(crate) usage: Option<Usage>,
    /// The model named in the response (`model`, Gemini's `modelVersion`).
    pub(crate) model: Option<String>,
}

impl UsageTap {
    /// A tap for a response of `family`; `stream` when it is an event stream.
    pub(crate) fn new(family: Family, stream: bool) -> Self {
        UsageTap {
            family,
            events: stream.then(|| SseReader::with_limit(MAX_EVENT)),
            buf: Vec::new(),
            overflow: false,
            usage: None,
            model: None,
        }
    }

    /// Looks at the next chunk.
    pub(crate) fn feed(&mut self, chunk: &[u8]) {
        if let Some(events) = self.events.as_mut() {
            for e in events.feed(chunk) {
                self.event(&e.data);
            }
        } else if self.buf.len() + chunk.len() > MAX_BODY {
            self.overflow = true;
            self.buf = Vec::new();
        } else if !self.overflow {
            self.buf.extend_from_slice(chunk);
        }
    }

    /// Looks at one event's data (for a caller that reads the stream's
    /// events itself).
    pub(crate) fn event(&mut self, data: &str) {
        // `"usage"`, or Gemini's `"usageMetadata"`.
        if !data.contains("\"usage") {
            return;
        }
        let Ok(v) = serde_json::from_str::<Value>(data) else {
            return;
        };
        if let Some(u) = report_in(&v) {
            self.merge(u);
            self.model = model_in(&v).or(self.model.take());
        }
    }

    /// The usage reported and the model named, once the response is complete.
    pub(crate) fn finish(mut self) -> Replied {
        if let Some(events) = self.events.take() {
            if let Some(e) = events.finish() {
                self.event(&e.data);
            }
        } else if !self.overflow {
            let body = std::mem::take(&mut self.buf);
            if let Ok(v) = serde_json::from_slice::<Value>(&body)
                && let Some(u) = report_in(&v)
            {
                self.merge(u);
                self.model = model_in(&v);
            }
        }
        Replied {
            usage: self.usage,
            model: self.model,
        }
    }

    /// Anthropic reports input at `message_start` and output (sometimes
    /// input again) at `message_delta`: later non-zero figures win.
    fn merge(&mut self, v: &Value) {
        let next = match self.family {
            Family::OpenAi => Usage::from_openai(v),
            Family::Anthropic => Usage::from_anthropic(v),
            Family::Gemini => Usage::from_gemini(v),
        };
        let u = self.usage.get_or_insert(next);
        let keep = |old: u64, new: u64| if new > 0 { new } else { old };
        u.input_tokens = keep(u.input_tokens, next.input_tokens);
        u.output_tokens = keep(u.output_tokens, next.output_tokens);
        u.cache_read_tokens = keep(u.cache_read_tokens, next.cache_read_tokens);
        u.cache_write_tokens = keep(u.cache_write_tokens, next.cache_write_tokens);
    }
}

/// The usage report in a response or one event of its stream: `usage`
/// (OpenAI's; Anthropic's, also inside `message_start`; the Responses
/// API's inside `response`) or Gemini's `usageMetadata`, of the last chunk
/// of a Gemini stream sent as one JSON array.
fn report_in(v: &Value) -> Option<&Value> {
    let v = match v {
        Value::Array(chunks) => chunks.last()?,
        other => other,
    };
    v.get("usage")
        .or_else(|| v.pointer("/message/usage"))
        .or_else(|| v.pointer("/response/usage"))
        .or_else(|| v.get("usageMetadata"))
        .filter(|u| !u.is_null())
}

/// The model a response or one event of its stream names: `model`
/// (OpenAI's; Anthropic's inside `message_start`; the Responses API's
/// inside `response`) or Gemini's `modelVersion`.
pub(crate) fn model_in(v: &Value) -> Option<String> {
    let v = match v {
        Value::Array(chunks) => chunks.last()?,
        other => other,
    };
    v.get("model")
        .or_else(|| v.pointer("/message/model"))
        .or_else(|| v.pointer("/response/model"))
        .or_else(|| v.get("modelVersion"))
        .and_then(Value::as_str)
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anthropic_stream_usage_is_read_across_chunk_boundaries() {
        let body = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":1200,\"cache_read_input_tokens\":800,\"output_tokens\":1}}}\n\nevent: content_block_delta\ndata: {\"type\":\"content_block_delta\"}\n\nevent: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":42}}\n\n";
        for split in [1, 7, 50, 133, body.len()] {
            let mut tap = UsageTap::new(Family::Anthropic, true);
            for chunk in body.as_bytes().chunks(split) {
                tap.feed(chunk);
            }
            let u = tap.finish().usage.expect("usage");
            assert_eq!(
                (u.prompt_tokens(), u.output_tokens),
                (2000, 42),
                "split {split}"
            );
        }
    }

    #[test]
    fn openai_stream_and_plain_bodies() {
        let mut tap = UsageTap::new(Family::OpenAi, true);
        tap.feed(b"data: {\"choices\":[],\"usage\":null}\r\n\r\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":300,\"completion_tokens\":5}}\r\n\r\ndata: [DONE]\r\n");
        assert_eq!(tap.finish().usage.map(|u| u.prompt_tokens()), Some(300));
        let mut tap = UsageTap::new(Family::OpenAi, false);
        tap.feed(br#"{"choices":[],"usage":{"prompt_tokens":77,"#);
        tap.feed(br#""completion_tokens":1}}"#);
        assert_eq!(tap.finish().usage.map(|u| u.prompt_tokens()), Some(77));
        let tap = UsageTap::new(Family::OpenAi, false);
        assert_eq!(tap.finish(), Replied::default());
    }

    #[test]
    fn the_answering_model_is_read_where_each_api_names_it() {
        let model = |family, stream, text: &str| {
            let mut tap = UsageTap::new(family, stream);
            tap.feed(text.as_bytes());
            tap.finish().model
        };
        let chat =
            r#"data: {"model":"gpt-4o-2024-08-06","choices":[],"usage":{"prompt_tokens":3}}"#;
        assert_eq!(
            model(Family::OpenAi, true, &format!("{chat}\n\n")).as_deref(),
            Some("gpt-4o-2024-08-06")
        );
        let responses = r#"data: {"type":"response.completed","response":{"model":"gpt-5","usage":{"input_tokens":3}}}"#;
        assert_eq!(
            model(Family::OpenAi, true, &format!("{responses}\n\n")).as_deref(),
            Some("gpt-5")
        );
        let start = r#"data: {"type":"message_start","message":{"model":"claude-sonnet-4-5","usage":{"input_tokens":9}}}"#;
        let delta = r#"data: {"type":"message_delta","usage":{"output_tokens":4}}"#;
        assert_eq!(
            model(Family::Anthropic, true, &format!("{start}\n\n{delta}\n\n")).as_deref(),
            Some("claude-sonnet-4-5")
        );
        let gemini = r#"[{"candidates":[]},{"modelVersion":"gemini-2.5-pro","usageMetadata":{"promptTokenCount":5}}]"#;
        assert_eq!(
            model(Family::Gemini, false, gemini).as_deref(),
            Some("gemini-2.5-pro")
        );
    }

    #[test]
    fn responses_stream_usage_comes_with_response_completed() {
        let mut tap = UsageTap::new(Family::OpenAi, true);
        tap.feed(b"event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r\",\"usage\":null}}\n\n");
        tap.feed(b"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"the \\\"usage\\\" word\"}\n\n");
        tap.feed(b"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\",\"usage\":{\"input_tokens\":5000,\"input_tokens_details\":{\"cached_tokens\":4096},\"output_tokens\":12}}}\n\n");
        let u = tap.finish().usage.expect("usage");
        assert_eq!(
            (u.prompt_tokens(), u.cache_read_tokens, u.output_tokens),
            (5000, 4096, 12)
        );
        let mut tap = UsageTap::new(Family::OpenAi, false);
        tap.feed(
            br#"{"id":"r","object":"response","usage":{"input_tokens":321,"output_tokens":4}}"#,
        );
        assert_eq!(tap.finish().usage.map(|u| u.prompt_tokens()), Some(321));
    }

    #[test]
    fn gemini_usage_is_read_from_events_and_from_a_json_array() {
        let chunk = |prompt: u64, out: u64| {
            format!(
                "data: {{\"candidates\":[],\"usageMetadata\":{{\"promptTokenCount\":{prompt},\"cachedContentTokenCount\":100,\"candidatesTokenCount\":{out},\"thoughtsTokenCount\":7}}}}\r\n\r\n"
            )
        };
        let mut tap = UsageTap::new(Family::Gemini, true);
        tap.feed(chunk(900, 3).as_bytes());
        tap.feed(chunk(900, 12).as_bytes());
        let u = tap.finish().usage.expect("usage");
        assert_eq!(
            (u.prompt_tokens(), u.cache_read_tokens, u.output_tokens),
            (900, 100, 19)
        );
        let mut tap = UsageTap::new(Family::Gemini, false);
        tap.feed(br#"[{"candidates":[],"usageMetadata":{"promptTokenCount":50}},"#);
        tap.feed(br#"{"candidates":[],"usageMetadata":{"promptTokenCount":50,"candidatesTokenCount":4}}]"#);
        let u = tap.finish().usage.expect("usage");
        assert_eq!((u.prompt_tokens(), u.output_tokens), (50, 4));
    }
}

/// What a session's responses report on their way back, read by its next
/// requests: the provider-reported prompt tokens of the last, and what
/// they have cost so far (in millionths of a dollar; 0 when no price is
/// known).
#[derive(Debug, Default)]
pub(crate) struct LastUsage {
    prompt: AtomicU64,
    spent_micros: AtomicU64,
}

impl LastUsage {
    /// Records a report.
    pub(crate) fn set(&self, tokens: Reported) {
        self.prompt.store(tokens.get(), Ordering::Relaxed);
    }

    /// Takes the report, if one came since the last take.
    pub(crate) fn take(&self) -> Option<Reported> {
        Some(self.prompt.swap(0, Ordering::Relaxed))
            .filter(|t| *t > 0)
            .map(Reported::new)
    }

    /// Adds a response's cost in dollars.
    pub(crate) fn spend(&self, dollars: f64) {
        if dollars.is_finite() && dollars > 0.0 {
            let micros = (dollars * 1e6).round() as u64;
            self.spent_micros.fetch_add(micros, Ordering::Relaxed);
        }
    }

    /// Dollars spent so far, when any cost was known.
    pub(crate) fn spent(&self) -> Option<f64> {
        let micros = self.spent_micros.load(Ordering::Relaxed);
        (micros > 0).then(|| micros as f64 / 1e6)
    }
}
