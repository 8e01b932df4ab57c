//! The Responses API's output items as the recall rounds see them: which
//! are calls of the recall tool, what of a round the client is shown, and
//! what a continued request appends to its `input`.
//!
//! A reasoning item belongs to the items after it: it is shown (or passed
//! back) only with a later item that is, since the API refuses a reasoning
//! item given without what followed it.

use abridge::recall::{Answer, Piece};
use serde_json::{Value, json};

use super::Call;

/// Whether an output item is a function call.
pub(super) fn is_call(item: &Value) -> bool {
    item["type"] == "function_call"
}

/// Whether an output item is a call of the recall tool.
pub(super) fn is_recall(item: &Value, tool: &str) -> bool {
    is_call(item) && item["name"] == tool
}

/// Whether an output item is reasoning.
pub(super) fn is_reasoning(item: &Value) -> bool {
    item["type"] == "reasoning"
}

/// The calls of the recall tool among a round's output items.
pub(super) fn recall_calls<'a>(
    items: impl IntoIterator<Item = &'a Value>,
    tool: &str,
) -> Vec<Call> {
    items
        .into_iter()
        .filter(|i| is_recall(i, tool))
        .map(|i| Call {
            id: i["call_id"].as_str().unwrap_or_default().to_owned(),
            arguments: i["arguments"]
                .as_str()
                .and_then(|a| serde_json::from_str(a).ok())
                .unwrap_or(Value::Null),
        })
        .collect()
}

/// Which items to keep: those `keep` keeps, and each reasoning item that
/// some later kept item follows (one pass, from the newest).
pub(super) fn kept<'a>(
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
pub(super) fn select(items: &[Value], keep: impl Fn(&Value) -> bool) -> Vec<Value> {
    items
        .iter()
        .zip(kept(items.iter(), keep))
        .filter(|(_, k)| *k)
        .map(|(item, _)| item.clone())
        .collect()
}

/// An assistant message item saying `text` (for a response the proxy left
/// with nothing to say). It has no id: no server stored it.
pub(super) fn note(text: &str) -> Value {
    json!({"type": "message", "role": "assistant", "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}]})
}

/// Appends the model's turn (its output items, the client's calls left
/// out) and a `function_call_output` per answer to the body's `input`.
/// With `store: false` nothing was kept upstream, so the items go without
/// their ids, and a reasoning item that carries no `encrypted_content` (a
/// reference to stored state) does not go at all.
pub(super) fn continue_input(body: &mut Value, turn: Value, answers: &[(String, Answer)]) {
    let stateless = body.get("store") == Some(&Value::Bool(false));
    let Some(input) = body.get_mut("input") else {
        return;
    };
    if let Value::String(text) = input {
        *input = json!([{"role": "user", "content": text.clone()}]);
    }
    let Some(input) = input.as_array_mut() else {
        return;
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
    for (id, a) in answers {
        input.push(json!({"type": "function_call_output", "call_id": id, "output": output(a)}));
    }
}

/// An answer as a `function_call_output`'s `output`: its text, or input
/// content parts when it holds images.
fn output(a: &Answer) -> Value {
    if a.pieces.iter().all(|p| matches!(p, Piece::Text { .. })) {
        return json!(a.text());
    }
    let parts: Vec<Value> = a
        .pieces
        .iter()
        .map(|p| match p {
            Piece::Text { text } => json!({"type": "input_text", "text": text}),
            Piece::Image { url } => json!({"type": "input_image", "image_url": url}),
        })
        .collect();
    Value::Array(parts)
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
        let calls = recall_calls(&items, "abridge_recall");
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
        continue_input(&mut body, turn, &[("c1".into(), answer)]);
        let input = body["input"].as_array().unwrap();
        assert_eq!(input.len(), 4, "{input:?}");
        assert_eq!(input[0]["content"], "Read the file.");
        assert_eq!(input[1]["type"], "reasoning");
        assert!(input[1].get("id").is_none() && input[2].get("id").is_none());
        assert_eq!(input[3]["call_id"], "c1");
        assert_eq!(input[3]["output"], "the original");

        let mut stored = json!({"input": []});
        continue_input(&mut stored, json!([reasoning("rs_1")]), &[]);
        assert_eq!(
            stored["input"][0]["id"], "rs_1",
            "a stored response keeps its ids"
        );
    }
}
