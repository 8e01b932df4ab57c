//! A session that switches models is held to each request's own model:
//! a history that fits the larger window goes whole, the same history sent
//! for a smaller model is compacted under that model's trigger, and back on
//! the larger model a history over the smaller one's trigger goes on
//! uncompacted. On every API, with real model names and their registry
//! windows (the trigger a small fraction of each, to keep histories short).

use serde_json::{Value, json};

use crate::support::{client, file_content, start};

/// Triggers at 5% of the window: gpt-4.1 at 52,378 tokens, gpt-4o at
/// 6,400; Claude's 1M-window models at 50,000, its 200k ones at 10,000.
const CONFIG: &str =
    "[trigger]\nwindow_fraction = 0.05\n[budget]\nmin_iterations = 2\nclear_at_least = 500\n";

#[derive(Debug, Clone, Copy)]
enum Api {
    Chat,
    Responses,
    Messages,
    Gemini,
}

impl Api {
    /// The larger and the smaller model, and the smaller one's trigger.
    fn models(self) -> (&'static str, &'static str, u64) {
        match self {
            Api::Chat | Api::Responses => ("gpt-4.1", "gpt-4o", 6_400),
            Api::Messages => ("claude-sonnet-4-6", "claude-sonnet-4-5", 10_000),
            // No built-in Gemini model has a small window: the test names one.
            Api::Gemini => ("gemini-2.5-pro", "gemini-small", 6_400),
        }
    }

    fn path(self, model: &str) -> String {
        match self {
            Api::Chat => "/v1/chat/completions".into(),
            Api::Responses => "/v1/responses".into(),
            Api::Messages => "/v1/messages".into(),
            Api::Gemini => format!("/v1beta/models/{model}:generateContent"),
        }
    }

    /// A request of `turns` file reads, each call answered.
    fn body(self, model: &str, turns: usize) -> Value {
        let task = "Read every module of the crate and report on each.";
        let system = "You are a careful coding agent. Read files one by one.";
        let id = |k: usize| format!("call_{k}");
        let args = |k: usize| json!({"path": format!("src/mod_{k}.rs")});
        let schema = json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]});
        match self {
            Api::Chat => {
                let mut messages = vec![
                    json!({"role": "system", "content": system}),
                    json!({"role": "user", "content": task}),
                ];
                for k in 0..turns {
                    messages.push(json!({"role": "assistant", "content": null, "tool_calls": [
                        {"id": id(k), "type": "function", "function": {"name": "read_file", "arguments": args(k).to_string()}}]}));
                    messages.push(
                        json!({"role": "tool", "tool_call_id": id(k), "content": file_content(k)}),
                    );
                }
                json!({"model": model, "messages": messages, "tools": [{"type": "function",
                    "function": {"name": "read_file", "description": "Read a file", "parameters": schema}}]})
            }
            Api::Responses => {
                let mut input = vec![json!({"role": "user", "content": task})];
                for k in 0..turns {
                    input.push(json!({"type": "function_call", "call_id": id(k), "name": "read_file", "arguments": args(k).to_string()}));
                    input.push(json!({"type": "function_call_output", "call_id": id(k), "output": file_content(k)}));
                }
                json!({"model": model, "instructions": system, "input": input, "tools": [{"type": "function",
                    "name": "read_file", "description": "Read a file", "parameters": schema}]})
            }
            Api::Messages => {
                let mut messages = vec![json!({"role": "user", "content": task})];
                for k in 0..turns {
                    messages.push(json!({"role": "assistant", "content": [
                        {"type": "tool_use", "id": format!("toolu_{k}"), "name": "read_file", "input": args(k)}]}));
                    messages.push(json!({"role": "user", "content": [
                        {"type": "tool_result", "tool_use_id": format!("toolu_{k}"), "content": file_content(k)}]}));
                }
                json!({"model": model, "max_tokens": 1024, "system": system, "messages": messages,
                    "tools": [{"name": "read_file", "description": "Read a file", "input_schema": schema}]})
            }
            Api::Gemini => {
                let mut contents = vec![json!({"role": "user", "parts": [{"text": task}]})];
                for k in 0..turns {
                    contents.push(json!({"role": "model", "parts": [{"functionCall": {"id": id(k), "name": "read_file", "args": args(k)}}]}));
                    contents.push(json!({"role": "user", "parts": [{"functionResponse": {"id": id(k), "name": "read_file",
                        "response": {"output": file_content(k)}}}]}));
                }
                json!({"contents": contents, "systemInstruction": {"parts": [{"text": system}]},
                    "tools": [{"functionDeclarations": [{"name": "read_file", "description": "Read a file",
                        "parametersJsonSchema": schema}]}]})
            }
        }
    }
}

/// What one request did: whether the proxy compacted it, and the tokens
/// the provider received.
async fn send(
    proxy: &str,
    provider: &abridge_testkit::Provider,
    api: Api,
    model: &str,
    turns: usize,
    session: &str,
) -> (bool, u64) {
    let seen = provider.report().requests.len();
    let resp = client()
        .post(format!("{proxy}{}", api.path(model)))
        .header("x-abridge-session", session)
        .header("x-api-key", "key-a")
        .header("authorization", "Bearer key-a")
        .header("x-goog-api-key", "key-a")
        .json(&api.body(model, turns))
        .send()
        .await
        .unwrap();
    let compacted = resp.headers().contains_key("x-abridge-compacted");
    assert_eq!(
        resp.status(),
        200,
        "{api:?} {model}: {:?}",
        resp.text().await
    );
    let report = provider.report();
    let sent = &report.requests[seen..];
    assert_eq!(sent.len(), 1, "{api:?} {model}: one upstream request");
    assert!(
        sent[0].violations.is_empty(),
        "{api:?} {model}: {:?}",
        sent[0].violations
    );
    (compacted, sent[0].tokens)
}

/// From the larger window to the smaller: the history that went whole is
/// compacted under the smaller model's trigger; back to the larger, a
/// history over that trigger goes on uncompacted (the carried compaction
/// still goes first, byte for byte).
#[tokio::test]
async fn a_session_that_switches_models_is_held_to_each_requests_model() {
    let config =
        format!("{CONFIG}[models.gemini-small]\ncontext_window = 128000\nmax_output = 8192\n");
    let setup = start(&config, Default::default(), None).await;
    let (proxy, provider) = (&setup.proxy, &setup.provider);
    for api in [Api::Chat, Api::Responses, Api::Messages, Api::Gemini] {
        let (big, small, trigger) = api.models();
        let session = format!("switch-{api:?}");
        // About 600 tokens a turn: 24 turns are over every small trigger.
        let (compacted, whole) = send(proxy, provider, api, big, 24, &session).await;
        assert!(
            !compacted && whole > 2 * trigger,
            "{api:?}: {big} sends {whole} whole"
        );
        let (compacted, tokens) = send(proxy, provider, api, small, 25, &session).await;
        assert!(compacted, "{api:?}: {small} over its trigger is compacted");
        assert!(
            tokens <= trigger,
            "{api:?}: {small} was sent {tokens} tokens, over its trigger {trigger}"
        );
        // Back on the larger model: more than the smaller trigger goes on.
        let mut last = tokens;
        for turns in 26..40 {
            let (compacted, tokens) = send(proxy, provider, api, big, turns, &session).await;
            assert!(
                !compacted,
                "{api:?}: {big} at {tokens} tokens is under its trigger"
            );
            last = tokens;
        }
        assert!(
            last > trigger,
            "{api:?}: {big} kept {last} tokens, no more than {small} allows"
        );
    }
    setup.stop().await;
}

/// From the smaller window to the larger and back: each request is
/// compacted only by its own model's trigger.
#[tokio::test]
async fn a_session_that_moves_to_a_smaller_model_again_is_compacted_again() {
    let config =
        format!("{CONFIG}[models.gemini-small]\ncontext_window = 128000\nmax_output = 8192\n");
    let setup = start(&config, Default::default(), None).await;
    let (proxy, provider) = (&setup.proxy, &setup.provider);
    for api in [Api::Chat, Api::Responses, Api::Messages, Api::Gemini] {
        let (big, small, trigger) = api.models();
        let session = format!("back-{api:?}");
        let mut compactions = 0;
        for turns in 4..24 {
            let (compacted, tokens) = send(proxy, provider, api, small, turns, &session).await;
            compactions += usize::from(compacted);
            assert!(
                tokens <= trigger,
                "{api:?}: {small} sent {tokens} over {trigger}"
            );
        }
        assert!(compactions > 0, "{api:?}: {small} never compacted");
        let (compacted, grown) = send(proxy, provider, api, big, 40, &session).await;
        assert!(
            !compacted && grown > trigger,
            "{api:?}: {big} takes {grown} tokens as they are"
        );
        let (compacted, tokens) = send(proxy, provider, api, small, 41, &session).await;
        assert!(
            compacted && tokens <= trigger,
            "{api:?}: back on {small}, {tokens} tokens (compacted: {compacted})"
        );
    }
    setup.stop().await;
}
