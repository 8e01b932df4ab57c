//! What the fake provider answers: a tool call or text, as a whole body or
//! as the stream of events each API sends.

use serde_json::{Value, json};

use crate::script::{self, ShellScript, shell_tool};

/// One server-sent event: its name (if the API names events) and data.
pub(crate) type Event = (Option<&'static str>, String);

/// The APIs the fake provider plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// OpenAI Chat Completions.
    Chat,
    /// The OpenAI Responses API.
    Responses,
    /// Anthropic Messages.
    Messages,
    /// Gemini `generateContent` and `streamGenerateContent`.
    Gemini,
}

impl Api {
    /// The request path (Gemini's names the model: its route's pattern).
    pub(crate) fn path(self) -> &'static str {
        match self {
            Api::Chat => "/v1/chat/completions",
            Api::Responses => "/v1/responses",
            Api::Messages => "/v1/messages",
            Api::Gemini => "/v1beta/models/{action}",
        }
    }

    /// The array that holds the history in a request.
    pub(crate) fn history_key(self) -> &'static str {
        match self {
            Api::Responses => "input",
            Api::Gemini => "contents",
            Api::Chat | Api::Messages => "messages",
        }
    }
}

/// The signature the fake Gemini model puts on the call of turn `n`:
/// opaque to the client, which must send it back unchanged.
pub(crate) fn thought_signature(n: usize) -> String {
    format!("c2lnbmF0dXJl{n:04}")
}

/// The assistant's answer: a call of the first declared tool, or text.
pub(crate) struct Reply {
    pub(crate) turn: usize,
    pub(crate) model: String,
    pub(crate) text: String,
    pub(crate) call: Option<(String, Value)>,
    /// Whether a Responses answer starts with an encrypted reasoning item
    /// (the client asked for `reasoning.encrypted_content`).
    pub(crate) reasoning: bool,
    /// The arguments of a call of the recall tool made before the tool
    /// call (Chat Completions and Messages).
    pub(crate) recall: Option<Value>,
    /// A call of a compact tool a proxy declared (its name and arguments),
    /// made instead of the tool call.
    pub(crate) compact: Option<(String, Value)>,
}

/// The recall tool the proxy declares.
pub(crate) const RECALL_TOOL: &str = "abridge_recall";

impl Reply {
    /// A short text answer, for benchmarks.
    pub(crate) fn quick(api: Api) -> Value {
        let reply = Reply {
            turn: 0,
            model: "fake-model".into(),
            text: "ok".into(),
            call: None,
            reasoning: false,
            recall: None,
            compact: None,
        };
        reply.body(api, 0)
    }

    pub(crate) fn for_request(request: &Value, turn: usize) -> Reply {
        let model = request
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or("fake-model")
            .to_owned();
        let tool = request
            .get("tools")
            .and_then(Value::as_array)
            .and_then(|t| t.first());
        let call = tool.map(|t| {
            let f = t
                .get("function")
                .or_else(|| t.pointer("/functionDeclarations/0"))
                .unwrap_or(t);
            let name = f
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("tool")
                .to_owned();
            let schema = f
                .get("parameters")
                .or_else(|| f.get("input_schema"))
                .or_else(|| f.get("parametersJsonSchema"));
            (name, arguments_for(schema, turn))
        });
        Reply {
            turn,
            model,
            text: format!("Step {turn}: looking at the next file."),
            call,
            reasoning: false,
            recall: None,
            compact: None,
        }
    }

    /// The scripted model's answer: the next shell command of the
    /// session, or the final answer once every step ran (and for requests
    /// without a shell tool, such as a client's side queries).
    pub(crate) fn scripted(
        request: &Value,
        turn: usize,
        script: ShellScript,
        next_step: impl FnOnce() -> usize,
    ) -> Reply {
        let model = request
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or("fake-model")
            .to_owned();
        if let Some(answer) = script::structured_answer(request) {
            return Reply {
                turn,
                model,
                text: answer.to_string(),
                call: None,
                reasoning: false,
                recall: None,
                compact: None,
            };
        }
        let call = shell_tool(request).and_then(|tool| {
            let n = next_step();
            (n < script.steps).then(|| (tool.name.clone(), script::arguments(n, &tool)))
        });
        let text = match &call {
            Some(_) => format!("Reading the next build log (request {turn})."),
            None => script::DONE.to_owned(),
        };
        Reply {
            turn,
            model,
            text,
            call,
            reasoning: false,
            recall: None,
            compact: None,
        }
    }

    pub(crate) fn body(&self, api: Api, tokens: u64) -> Value {
        let n = self.turn;
        match api {
            Api::Responses => self.response(tokens),
            Api::Gemini => self.gemini_chunk(&self.gemini_parts(), true, tokens),
            Api::Chat => {
                let mut message = json!({"role": "assistant", "content": self.text});
                let mut finish = "stop";
                let calls: Vec<Value> = self
                    .calls()
                    .into_iter()
                    .map(|(id, name, args)| {
                        json!({"id": format!("call_{id}"), "type": "function",
                        "function": {"name": name, "arguments": args.to_string()}})
                    })
                    .collect();
                if !calls.is_empty() {
                    message["tool_calls"] = Value::Array(calls);
                    finish = "tool_calls";
                }
                json!({"id": format!("chatcmpl-{n}"), "object": "chat.completion", "created": 0,
                    "model": self.model, "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                    "usage": {"prompt_tokens": tokens, "completion_tokens": 20, "total_tokens": tokens + 20}})
            }
            Api::Messages => {
                let mut content = vec![json!({"type": "text", "text": self.text})];
                let mut stop = "end_turn";
                for (id, name, args) in self.calls() {
                    content.push(json!({"type": "tool_use", "id": format!("toolu_{id}"), "name": name, "input": args}));
                    stop = "tool_use";
                }
                json!({"id": format!("msg_{n}"), "type": "message", "role": "assistant", "model": self.model,
                    "content": content, "stop_reason": stop, "stop_sequence": null,
                    "usage": {"input_tokens": tokens, "output_tokens": 20}})
            }
        }
    }

    /// Its calls: `(id suffix, tool, arguments)`, the recall call first.
    pub(crate) fn calls(&self) -> Vec<(String, String, Value)> {
        let n = self.turn;
        let mut out = Vec::new();
        if let Some(args) = &self.recall {
            out.push((format!("{n}_recall"), RECALL_TOOL.to_owned(), args.clone()));
        }
        if let Some((name, args)) = &self.compact {
            out.push((format!("{n}_compact"), name.clone(), args.clone()));
        }
        if let Some((name, args)) = &self.call {
            out.push((n.to_string(), name.clone(), args.clone()));
        }
        out
    }

    /// A Gemini answer's parts: its text, then its calls (no ids, as the
    /// API sends them), the first signed.
    fn gemini_parts(&self) -> Vec<Value> {
        let mut parts = vec![json!({"text": self.text})];
        for (i, (_, name, args)) in self.calls().into_iter().enumerate() {
            let mut part = json!({"functionCall": {"name": name, "args": args}});
            if i == 0 {
                part["thoughtSignature"] = json!(thought_signature(self.turn));
            }
            parts.push(part);
        }
        parts
    }

    /// A Gemini response, or one chunk of its stream (`last`: with the
    /// finish reason).
    fn gemini_chunk(&self, parts: &[Value], last: bool, tokens: u64) -> Value {
        let mut candidate = json!({"content": {"parts": parts, "role": "model"}, "index": 0});
        if last {
            candidate["finishReason"] = json!("STOP");
        }
        json!({"candidates": [candidate],
            "usageMetadata": {"promptTokenCount": tokens, "candidatesTokenCount": 20,
                "totalTokenCount": tokens + 20, "thoughtsTokenCount": 4},
            "modelVersion": self.model, "responseId": format!("resp-{}", self.turn)})
    }

    /// The stream: `(event name, data)` pairs.
    pub(crate) fn events(&self, api: Api, tokens: u64, usage: bool) -> Vec<Event> {
        match api {
            Api::Responses => self.response_events(tokens),
            // The text first, the calls with the finish; usage on each chunk.
            Api::Gemini => {
                let parts = self.gemini_parts();
                let (text, calls) = parts.split_at(1);
                vec![
                    (None, self.gemini_chunk(text, false, tokens).to_string()),
                    (None, self.gemini_chunk(calls, true, tokens).to_string()),
                ]
            }
            Api::Chat => self.chat_events(tokens, usage),
            Api::Messages => self.messages_events(tokens),
        }
    }

    /// Chat Completions' chunks: the role, the text, each call's name then
    /// its arguments in halves, the finish, usage when asked, `[DONE]`.
    fn chat_events(&self, tokens: u64, usage: bool) -> Vec<Event> {
        let n = self.turn;
        let chunk = |delta: Value, finish: Value| {
            (None, json!({"id": format!("chatcmpl-{n}"), "object": "chat.completion.chunk", "created": 0,
                "model": self.model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}).to_string())
        };
        let mut out = vec![chunk(
            json!({"role": "assistant", "content": ""}),
            Value::Null,
        )];
        out.push(chunk(json!({"content": self.text}), Value::Null));
        let mut finish = "stop";
        for (i, (id, name, args)) in self.calls().into_iter().enumerate() {
            let args = args.to_string();
            let (a1, a2) = halves(&args);
            out.push(chunk(
                json!({"tool_calls": [{"index": i, "id": format!("call_{id}"), "type": "function",
                "function": {"name": name, "arguments": ""}}]}),
                Value::Null,
            ));
            for part in [a1, a2] {
                out.push(chunk(
                    json!({"tool_calls": [{"index": i, "function": {"arguments": part}}]}),
                    Value::Null,
                ));
            }
            finish = "tool_calls";
        }
        out.push(chunk(json!({}), json!(finish)));
        if usage {
            out.push((None, json!({"id": format!("chatcmpl-{n}"), "object": "chat.completion.chunk", "created": 0,
                "model": self.model, "choices": [],
                "usage": {"prompt_tokens": tokens, "completion_tokens": 20, "total_tokens": tokens + 20}}).to_string()));
        }
        out.push((None, "[DONE]".into()));
        out
    }

    /// Anthropic's events: the message, its text block, each call's block
    /// with its input in halves, the stop and usage.
    fn messages_events(&self, tokens: u64) -> Vec<Event> {
        let n = self.turn;
        let ev = |name: &'static str, data: Value| (Some(name), data.to_string());
        let mut out = vec![ev(
            "message_start",
            json!({"type": "message_start", "message": {"id": format!("msg_{n}"),
            "type": "message", "role": "assistant", "model": self.model, "content": [], "stop_reason": null,
            "stop_sequence": null, "usage": {"input_tokens": tokens, "output_tokens": 1}}}),
        )];
        out.push(ev("content_block_start", json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})));
        out.push(ev("content_block_delta", json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": self.text}})));
        out.push(ev(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ));
        let mut stop = "end_turn";
        for (i, (id, name, args)) in self.calls().into_iter().enumerate() {
            let index = i + 1;
            let args = args.to_string();
            let (a1, a2) = halves(&args);
            out.push(ev("content_block_start", json!({"type": "content_block_start", "index": index,
                "content_block": {"type": "tool_use", "id": format!("toolu_{id}"), "name": name, "input": {}}})));
            for part in [a1, a2] {
                out.push(ev(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": part}}),
                ));
            }
            out.push(ev(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": index}),
            ));
            stop = "tool_use";
        }
        out.push(ev(
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
            "usage": {"output_tokens": 20}}),
        ));
        out.push(ev("message_stop", json!({"type": "message_stop"})));
        out
    }
}

/// Arguments that fit a JSON schema's properties.
fn arguments_for(schema: Option<&Value>, turn: usize) -> Value {
    let mut args = serde_json::Map::new();
    if let Some(Value::Object(props)) = schema.and_then(|s| s.get("properties")) {
        for (name, p) in props {
            let v = match p.get("type").and_then(Value::as_str) {
                Some("integer" | "number") => json!(turn),
                Some("boolean") => json!(true),
                Some("array") => json!([]),
                _ => json!(format!("src/module_{turn}.rs")),
            };
            args.insert(name.clone(), v);
        }
    }
    Value::Object(args)
}

/// A text cut in two at a character boundary.
pub(crate) fn halves(text: &str) -> (&str, &str) {
    let mut at = text.len() / 2;
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    text.split_at(at)
}
