//! The OpenAI Responses API: a response's `output` items, function calls
//! among them; a stream of numbered events (`stream`); a continued request
//! appends the model's items and a `function_call_output` per answer to
//! its `input`.
//!
//! A reasoning item belongs to the items after it: it is shown (or passed
//! back) only with a later item that is, since the API refuses a reasoning
//! item given without what followed it.

use abridge::model::{ContentForm, Message, Part, Role, ToolResult, Usage, Wire};
use abridge::recall::{Answer, Piece};
use serde_json::{Value, json};

use super::api::{Api, text_calls};
use super::{Call, Ours};

mod stream;

pub(super) use stream::ResponsesStream;

pub(super) struct Responses;

/// The items of the rounds before the last that the client is shown.
#[derive(Default)]
pub(super) struct Shown(Vec<Value>);

impl Api for Responses {
    const WIRE: Wire = Wire::Responses;
    type Earlier = Shown;
    type Stream = ResponsesStream;

    fn usage(report: &Value) -> Usage {
        Usage::from_openai(report)
    }

    fn calls(response: &Value, tool: &Ours) -> Vec<Call> {
        recall_calls(output_of(response), tool)
    }

    fn take(earlier: &mut Shown, response: &Value, tool: &Ours) -> Value {
        let output = output_of(response);
        earlier.0.extend(select(output, |i| !is_call(i)));
        Value::Array(select(output, |i| !is_call(i) || is_recall(i, tool)))
    }

    fn merge(earlier: Shown, mut v: Value, tool: &Ours, note: &str) -> Value {
        let output = match v.get_mut("output").map(Value::take) {
            Some(Value::Array(output)) => output,
            _ => Vec::new(),
        };
        let had_output = !output.is_empty();
        let keep = kept(output.iter(), |i| !is_recall(i, tool));
        let mut shown = earlier.0;
        shown.extend(
            output
                .into_iter()
                .zip(keep)
                .filter_map(|(i, k)| k.then_some(i)),
        );
        if shown.is_empty() && had_output {
            shown.push(self::note(note));
        }
        v["output"] = Value::Array(shown);
        v
    }

    fn results(answers: &[(String, Answer)]) -> Vec<Message> {
        answers
            .iter()
            .map(|(id, a)| {
                // Text alone goes as a string; with images, as input parts.
                let text_only = a.pieces.iter().all(|p| matches!(p, Piece::Text { .. }));
                let (parts, form) = match text_only {
                    true => (vec![Part::text(a.text())], ContentForm::Text),
                    false => (
                        a.pieces.iter().map(Piece::to_part).collect(),
                        ContentForm::Blocks,
                    ),
                };
                Message {
                    role: Role::Tool,
                    parts: vec![Part::ToolResult(Box::new(ToolResult {
                        call_id: id.clone(),
                        parts,
                        form,
                        is_error: None,
                        extra: Default::default(),
                    }))],
                    form: ContentForm::Absent,
                    ..Message::default()
                }
            })
            .collect()
    }

    /// The model's turn (its output items, the client's calls left out)
    /// and a `function_call_output` per answer go after the body's `input`.
    /// With `store: false` nothing was kept upstream, so the items go
    /// without their ids, and a reasoning item that carries no
    /// `encrypted_content` (a reference to stored state) does not go at all.
    fn continue_with(
        body: &mut Value,
        turn: Value,
        answers: &[(String, Answer)],
    ) -> abridge::model::Result<()> {
        let results = abridge::model::encode_wire_messages(Self::WIRE, &Self::results(answers), 0)?;
        let stateless = body.get("store") == Some(&Value::Bool(false));
        let Some(input) = body.get_mut("input") else {
            return Ok(());
        };
        if let Value::String(text) = input {
            *input = json!([{"role": "user", "content": text.clone()}]);
        }
        let Some(input) = input.as_array_mut() else {
            return Ok(());
        };
        let items = match turn {
            Value::Array(items) => items,
            _ => Vec::new(),
        };
        for mut item in items {
            if stateless {
                if is_reasoning(&item) && item.get("encrypted_content").is_none_or(Value::is_null) {
                    continue;
                }
                if let Some(m) = item.as_object_mut() {
                    m.remove("id");
                }
            }
            input.push(item);
        }
        input.extend(results);
        Ok(())
    }

    fn stream(tool: &Ours) -> ResponsesStream {
        ResponsesStream::new(tool)
    }
}

/// A response's output items.
fn output_of(v: &Value) -> &[Value] {
    v["output"].as_array().map_or(&[], Vec::as_slice)
}

/// Whether an output item is a function call.
fn is_call(item: &Value) -> bool {
    item["type"] == "function_call"
}

/// Whether an output item is a call of the recall tool.
fn is_recall(item: &Value, tool: &Ours) -> bool {
    is_call(item) && tool.owns_value(&item["name"])
}

/// Whether an output item is reasoning.
fn is_reasoning(item: &Value) -> bool {
    item["type"] == "reasoning"
}

/// The calls of the recall tool among a round's output items.
fn recall_calls<'a>(items: impl IntoIterator<Item = &'a Value>, tool: &Ours) -> Vec<Call> {
    let text = |v: &'a Value| -> &'a str { v.as_str().unwrap_or_default() };
    let calls = items
        .into_iter()
        .filter(|i| is_call(i))
        .map(|i| (text(&i["call_id"]), text(&i["name"]), text(&i["arguments"])));
    text_calls(calls, tool)
}

/// Which items to keep: those `keep` keeps, and each reasoning item that
/// some later kept item follows (one pass, from the newest).
fn kept<'a>(
    items: impl DoubleEndedIterator<Item = &'a Value> + ExactSizeIterator,
    keep: impl Fn(&Value) -> bool,
) -> Vec<bool> {
    let mut out = vec![false; items.len()];
    let mut later = false;
    for (k, item) in items.enumerate().rev() {
        out[k] = match is_reasoning(item) {
            true => later,
            false => keep(item),
        };
        later |= out[k];
    }
    out
}

/// The items [`kept`] keeps.
fn select(items: &[Value], keep: impl Fn(&Value) -> bool) -> Vec<Value> {
    items
        .iter()
        .zip(kept(items.iter(), keep))
        .filter(|(_, k)| *k)
        .map(|(item, _)| item.clone())
        .collect()
}

/// An assistant message item saying `text` (for a response the proxy left
/// with nothing to say). It has no id: no server stored it.
fn note(text: &str) -> Value {
    json!({"type": "message", "role": "assistant", "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}]})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: &str, id: &str) -> Value {
        json!({"type": "function_call", "id": format!("fc_{id}"), "call_id": id, "name": name,
            "arguments": "{\"handle\":\"abr_0123456789\"}"})
    }

    fn reasoning(id: &str) -> Value {
        json!({"type": "reasoning", "id": id, "summary": [], "encrypted_content": "gAAA"})
    }

    #[test]
    fn reasoning_goes_only_with_an_item_after_it() {
        let msg = json!({"type": "message", "id": "msg_1", "content": []});
        let items = [
            reasoning("rs_1"),
            msg.clone(),
            reasoning("rs_2"),
            call("abridge_recall", "c1"),
        ];
        let shown = select(&items, |i| !is_call(i));
        assert_eq!(shown, [reasoning("rs_1"), msg.clone()]);
        let all = select(&items, |_| true);
        assert_eq!(all.len(), 4);
        let calls = recall_calls(&items, &Ours::recall_only("abridge_recall"));
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].id, "c1");
        assert_eq!(calls[0].arguments["handle"], "abr_0123456789");
    }

    #[test]
    fn a_stateless_continuation_drops_ids_and_bare_reasoning() {
        let mut body = json!({"store": false, "input": "Read the file."});
        let bare = json!({"type": "reasoning", "id": "rs_0", "summary": []});
        let turn = json!([bare, reasoning("rs_1"), call("abridge_recall", "c1")]);
        let answer = Answer {
            handle: None,
            pieces: vec![Piece::Text {
                text: "the original".into(),
            }],
            is_error: false,
            page: 1,
            pages: 1,
            bytes: 12,
        };
        Responses::continue_with(&mut body, turn, &[("c1".into(), answer)]).unwrap();
        let input = body["input"].as_array().unwrap();
        assert_eq!(input.len(), 4, "{input:?}");
        assert_eq!(input[0]["content"], "Read the file.");
        assert_eq!(input[1]["type"], "reasoning");
        assert!(input[1].get("id").is_none() && input[2].get("id").is_none());
        assert_eq!(input[3]["call_id"], "c1");
        assert_eq!(input[3]["output"], "the original");

        let mut stored = json!({"input": []});
        Responses::continue_with(&mut stored, json!([reasoning("rs_1")]), &[]).unwrap();
        assert_eq!(
            stored["input"][0]["id"], "rs_1",
            "a stored response keeps its ids"
        );
    }
}
