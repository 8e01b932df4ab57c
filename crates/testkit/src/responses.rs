//! The fake provider's answers on the OpenAI Responses API: output items
//! (an encrypted reasoning item when asked for, a message, function calls:
//! the recall tool's first when it is asked for), as a whole `response`
//! object or as its event stream.

use serde_json::{Value, json};

use crate::reply::{Event, Reply, halves};

impl Reply {
    /// The output items, complete.
    fn output_items(&self) -> Vec<Value> {
        let n = self.turn;
        let mut items = Vec::new();
        if self.reasoning {
            items.push(json!({"id": format!("rs_{n}"), "type": "reasoning",
                "summary": [{"type": "summary_text", "text": format!("Planning step {n}.")}],
                "encrypted_content": format!("gAAAAB{}", "x".repeat(64 + n % 7))}));
        }
        items.push(
            json!({"id": format!("msg_{n}"), "type": "message", "role": "assistant",
            "status": "completed", "content": [{"type": "output_text", "text": self.text,
            "annotations": [], "logprobs": []}]}),
        );
        for (id, name, args) in self.calls() {
            items.push(json!({"id": format!("fc_{id}"), "type": "function_call",
                "status": "completed", "call_id": format!("call_{id}"), "name": name,
                "arguments": args.to_string()}));
        }
        items
    }

    /// A `response` object with `status` and `output`; usage when complete.
    fn response_object(&self, status: &str, output: Vec<Value>, tokens: u64) -> Value {
        let usage = (status == "completed").then(|| {
            json!({"input_tokens": tokens, "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": 20, "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": tokens + 20})
        });
        json!({"id": format!("resp_{}", self.turn), "object": "response", "created_at": 0,
            "status": status, "error": null, "incomplete_details": null, "instructions": null,
            "model": self.model, "output": output, "parallel_tool_calls": true,
            "tool_choice": "auto", "tools": [], "store": false, "metadata": {},
            "usage": usage})
    }

    /// The whole response (`stream` off).
    pub(crate) fn response(&self, tokens: u64) -> Value {
        self.response_object("completed", self.output_items(), tokens)
    }

    /// The event stream: each item added, its content or arguments in two
    /// deltas, the item done, then `response.completed` with the usage.
    pub(crate) fn response_events(&self, tokens: u64) -> Vec<Event> {
        let mut out: Vec<(&'static str, Value)> = vec![
            (
                "response.created",
                json!({"response": self.response_object("in_progress", vec![], 0)}),
            ),
            (
                "response.in_progress",
                json!({"response": self.response_object("in_progress", vec![], 0)}),
            ),
        ];
        let items = self.output_items();
        for (i, item) in items.iter().enumerate() {
            let id = item["id"].clone();
            let mut added = item.clone();
            match item["type"].as_str() {
                Some("message") => {
                    added["status"] = json!("in_progress");
                    added["content"] = json!([]);
                    out.push((
                        "response.output_item.added",
                        json!({"output_index": i, "item": added}),
                    ));
                    let part = json!({"type": "output_text", "text": "", "annotations": []});
                    out.push((
                        "response.content_part.added",
                        json!({"item_id": id, "output_index": i,
                        "content_index": 0, "part": part}),
                    ));
                    let (a, b) = halves(&self.text);
                    for delta in [a, b] {
                        out.push((
                            "response.output_text.delta",
                            json!({"item_id": id,
                            "output_index": i, "content_index": 0, "delta": delta, "logprobs": []}),
                        ));
                    }
                    out.push((
                        "response.output_text.done",
                        json!({"item_id": id, "output_index": i,
                        "content_index": 0, "text": self.text, "logprobs": []}),
                    ));
                    out.push((
                        "response.content_part.done",
                        json!({"item_id": id, "output_index": i,
                        "content_index": 0, "part": item["content"][0]}),
                    ));
                }
                Some("function_call") => {
                    added["status"] = json!("in_progress");
                    added["arguments"] = json!("");
                    out.push((
                        "response.output_item.added",
                        json!({"output_index": i, "item": added}),
                    ));
                    let args = item["arguments"].as_str().unwrap_or_default();
                    let (a, b) = halves(args);
                    for delta in [a, b] {
                        out.push((
                            "response.function_call_arguments.delta",
                            json!({"item_id": id,
                            "output_index": i, "delta": delta}),
                        ));
                    }
                    out.push((
                        "response.function_call_arguments.done",
                        json!({"item_id": id,
                        "output_index": i, "name": item["name"], "arguments": args}),
                    ));
                }
                _ => {
                    added["summary"] = json!([]);
                    out.push((
                        "response.output_item.added",
                        json!({"output_index": i, "item": added}),
                    ));
                }
            }
            out.push((
                "response.output_item.done",
                json!({"output_index": i, "item": item}),
            ));
        }
        out.push((
            "response.completed",
            json!({"response": self.response_object("completed", items, tokens)}),
        ));
        out.into_iter()
            .enumerate()
            .map(|(seq, (name, mut data))| {
                data["type"] = json!(name);
                data["sequence_number"] = json!(seq);
                (Some(name), data.to_string())
            })
            .collect()
    }
}
