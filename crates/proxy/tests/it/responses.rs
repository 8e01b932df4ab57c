//! The OpenAI Responses API through the proxy: a Codex-shaped loop (items
//! appended, encrypted reasoning passed back, `store: false`, streamed)
//! stays under the trigger on the fast path; requests that lean on a stored
//! history or on the provider's own compaction go as sent.

use abridge_testkit::{ProviderOptions, body_hash};
use serde_json::{Value, json};

use crate::CONFIG;
use crate::support::{
    LoopLog, Setup, client, file_content, metric, metrics_text, post_json, start,
};

fn options() -> ProviderOptions {
    ProviderOptions {
        max_tokens: Some(6000),
        ..ProviderOptions::default()
    }
}

/// An agent speaking the Responses API the way Codex does: developer
/// instructions as input items, its output items appended whole (reasoning
/// with its `encrypted_content` included), each call answered by a
/// `function_call_output`.
pub(crate) struct ResponsesAgent {
    input: Vec<Value>,
    cache_key: String,
    stream: bool,
    turn: usize,
    http: reqwest::Client,
}

impl ResponsesAgent {
    pub(crate) fn new(cache_key: &str) -> Self {
        ResponsesAgent {
            input: vec![
                json!({"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "You are a careful coding agent. Read files one by one."}]}),
                json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Read every module of the crate and report on each."}]}),
            ],
            cache_key: cache_key.to_owned(),
            stream: true,
            turn: 0,
            http: client(),
        }
    }

    fn body(&self) -> Value {
        let tools = json!([{"type": "function", "name": "read_file", "description": "Read a file",
            "strict": false, "parameters": crate::support::read_file_tool()}, {"type": "web_search"}]);
        json!({"model": "fake-model", "stream": self.stream, "input": self.input, "tools": tools,
            "tool_choice": "auto", "parallel_tool_calls": true, "reasoning": {"summary": "auto"},
            "store": false, "include": ["reasoning.encrypted_content"],
            "prompt_cache_key": self.cache_key})
    }

    /// One request through `proxy`; the response's headers.
    async fn step(&mut self, proxy: &str) -> reqwest::header::HeaderMap {
        self.step_with(proxy, &[]).await
    }

    /// One request through `proxy` with `headers`; the response's headers.
    pub(crate) async fn step_with(
        &mut self,
        proxy: &str,
        headers: &[(&str, &str)],
    ) -> reqwest::header::HeaderMap {
        let mut req = self
            .http
            .post(format!("{proxy}/v1/responses"))
            .json(&self.body());
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let resp = req.send().await.unwrap();
        let turn = self.turn;
        assert_eq!(resp.status(), 200, "turn {turn}: {:?}", resp.headers());
        let head = resp.headers().clone();
        let text = resp.text().await.unwrap();
        let items = match self.stream {
            true => items_from_sse(&text),
            false => {
                let v: Value = serde_json::from_str(&text).unwrap();
                v["output"].as_array().cloned().unwrap_or_default()
            }
        };
        assert!(!items.is_empty(), "turn {turn}: no output items");
        for item in items {
            let call = (item["type"] == "function_call").then(|| item["call_id"].clone());
            self.input.push(item);
            if let Some(id) = call {
                self.input
                    .push(json!({"type": "function_call_output", "call_id": id,
                    "output": file_content(turn)}));
            }
        }
        self.turn += 1;
        head
    }
}

/// A Responses API tool loop of `turns` requests.
pub(crate) async fn responses_loop(
    proxy: &str,
    turns: usize,
    stream: bool,
    headers: &[(&str, &str)],
) -> LoopLog {
    let mut agent = ResponsesAgent::new("thread-loop");
    agent.stream = stream;
    let mut log = LoopLog::default();
    for _ in 0..turns {
        log.note(&agent.step_with(proxy, headers).await);
    }
    log
}

/// The output items of a Responses stream, as `response.output_item.done`
/// gives them; the events' numbers and the final response checked against them.
fn items_from_sse(text: &str) -> Vec<Value> {
    let events: Vec<Value> = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .collect();
    let seqs: Vec<u64> = events
        .iter()
        .filter_map(|e| e["sequence_number"].as_u64())
        .collect();
    assert_eq!(
        seqs,
        (0..events.len() as u64).collect::<Vec<_>>(),
        "sequence numbers"
    );
    let starts = events
        .iter()
        .filter(|e| e["type"] == "response.created")
        .count();
    assert_eq!(starts, 1, "one response.created");
    let done: Vec<(u64, Value)> = events
        .iter()
        .filter(|e| e["type"] == "response.output_item.done")
        .map(|e| (e["output_index"].as_u64().unwrap(), e["item"].clone()))
        .collect();
    let indices: Vec<u64> = done.iter().map(|(i, _)| *i).collect();
    assert_eq!(
        indices,
        (0..done.len() as u64).collect::<Vec<_>>(),
        "output indices"
    );
    let items: Vec<Value> = done.into_iter().map(|(_, item)| item).collect();
    let end = events.last().unwrap();
    assert_eq!(end["type"], "response.completed");
    assert_eq!(
        end["response"]["output"],
        json!(items),
        "the final response's output"
    );
    items
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_codex_shaped_loop_stays_under_the_trigger_on_the_fast_path() {
    let setup = start(CONFIG, options(), None).await;
    let mut agent = ResponsesAgent::new("thread-1");
    let mut log = LoopLog::default();
    for _ in 0..60 {
        log.note(&agent.step(&setup.proxy).await);
    }
    let report = setup.provider.report();
    assert_eq!(report.requests.len(), 60);
    for (i, r) in report.requests.iter().enumerate() {
        assert_eq!(r.path, "/v1/responses");
        assert!(r.violations.is_empty(), "request {i}: {:?}", r.violations);
        assert!(!r.over_limit, "request {i}: {} tokens", r.tokens);
        assert_eq!(r.altered_reasoning, 0, "request {i}: reasoning edited");
    }
    assert!(report.requests.iter().any(|r| r.reasoning_items > 5));
    assert!(log.compacted > 0, "the loop should have compacted");
    let breaks = report
        .requests
        .iter()
        .filter(|r| r.prefix_kept == Some(false))
        .count();
    assert!(breaks <= log.compacted, "{breaks} prefix changes");
    // Without the proxy the history grows by ~650 tokens a turn.
    assert!(agent.input.len() > 180, "{} items", agent.input.len());
    let metrics = metrics_text(&setup.proxy).await;
    let route = r#"abridge_requests_total{route="responses",status="200"}"#;
    assert_eq!(metric(&metrics, route), 60.0, "{metrics}");
    let whole = metric(&metrics, r#"abridge_decoded_total{part="whole"}"#);
    let added = metric(&metrics, r#"abridge_decoded_total{part="added"}"#);
    assert_eq!((whole, added), (1.0, 59.0), "{metrics}");
    assert!(log.sessions.iter().all(|s| s == &log.sessions[0]));
    // The head (developer instructions, tools) went as the agent sent it.
    let heads: std::collections::HashSet<u64> =
        report.requests.iter().map(|r| r.head_hash).collect();
    assert_eq!(heads.len(), 1);
    setup.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_prompt_cache_key_keeps_threads_that_start_alike_apart() {
    let setup = start(CONFIG, options(), None).await;
    let mut a = ResponsesAgent::new("thread-a");
    let mut b = ResponsesAgent::new("thread-b");
    let (mut log_a, mut log_b) = (LoopLog::default(), LoopLog::default());
    for _ in 0..20 {
        log_a.note(&a.step(&setup.proxy).await);
        log_b.note(&b.step(&setup.proxy).await);
    }
    assert!(log_a.sessions.iter().all(|s| s == &log_a.sessions[0]));
    assert!(log_b.sessions.iter().all(|s| s == &log_b.sessions[0]));
    assert_ne!(log_a.sessions[0], log_b.sessions[0]);
    assert!(log_a.compacted > 0 && log_b.compacted > 0);
    for r in setup.provider.report().requests {
        assert!(r.violations.is_empty() && !r.over_limit, "{r:?}");
    }
    setup.stop().await;
}

async fn post(setup: &Setup, body: &Value) -> reqwest::Response {
    post_json(setup, "/v1/responses", body.to_string()).await
}

/// A history over the trigger, as a Codex-shaped agent built it.
async fn long_history(setup: &Setup) -> ResponsesAgent {
    let mut agent = ResponsesAgent::new("thread-long");
    for _ in 0..14 {
        // Straight to the provider: the history is not compacted.
        agent.step(&setup.provider.url).await;
    }
    agent
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_on_a_stored_history_goes_as_sent() {
    let setup = start(CONFIG, ProviderOptions::default(), None).await;
    let agent = long_history(&setup).await;
    // Only the new output goes with previous_response_id: the call it
    // answers is in the stored response.
    let mut body = agent.body();
    body["input"] =
        json!([{"type": "function_call_output", "call_id": "call_13", "output": "done"}]);
    body["previous_response_id"] = json!("resp_13");
    body["store"] = json!(true);
    let resp = post(&setup, &body).await;
    assert_eq!(resp.status(), 200);
    let warning = resp.headers().get("x-abridge-warning").unwrap();
    assert_eq!(
        warning,
        "history held by the provider (previous_response_id)"
    );
    let seen = setup.provider.report().requests;
    let last = seen.last().unwrap();
    assert_eq!(last.body_hash, body_hash(body.to_string().as_bytes()));
    let metrics = metrics_text(&setup.proxy).await;
    let held = metric(&metrics, r#"abridge_passthrough_total{why="server_state"}"#);
    assert_eq!(held, 1.0, "{metrics}");
    setup.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_providers_compaction_takes_the_history_over() {
    let setup = start(CONFIG, ProviderOptions::default(), None).await;
    let agent = long_history(&setup).await;
    let mut managed = agent.body();
    managed["context_management"] = json!([{"type": "compaction", "compact_threshold": 200000}]);
    let mut compacted = agent.body();
    let input = compacted["input"].as_array_mut().unwrap();
    input.insert(
        2,
        json!({"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAAcompacted"}),
    );
    for body in [managed, compacted] {
        let resp = post(&setup, &body).await;
        assert_eq!(resp.status(), 200);
        let handover = resp.headers().get("x-abridge-handover");
        assert_eq!(handover.unwrap(), "provider-compaction");
        let seen = setup.provider.report().requests;
        let last = seen.last().unwrap();
        assert!(last.tokens > 6000, "over the trigger: {}", last.tokens);
        assert_eq!(last.body_hash, body_hash(body.to_string().as_bytes()));
    }
    // The same history without either is compacted.
    let resp = post(&setup, &agent.body()).await;
    assert!(resp.headers().get("x-abridge-compacted").is_some());
    setup.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_proxy_resumes_a_responses_session_and_shows_its_snapshots() {
    use abridge_store::{SnapshotStore, Store};

    let dir = std::env::temp_dir().join(format!("abridge-responses-resume-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("store.sqlite");
    let _ = std::fs::remove_file(&path);
    let store = || Some(Box::new(Store::open(&path).unwrap()) as Box<_>);
    let provider = abridge_testkit::Provider::start(options()).await;

    let (url, stop, done) = crate::support::proxy_for(&provider.url, CONFIG, store()).await;
    let mut agent = ResponsesAgent::new("thread-resume");
    let mut log = LoopLog::default();
    for _ in 0..30 {
        log.note(&agent.step(&url).await);
    }
    assert!(log.compacted > 0);
    let _ = stop.send(());
    done.await.unwrap();

    // The carried prefix comes back from the store as Responses input.
    let (url, stop, done) = crate::support::proxy_for(&provider.url, CONFIG, store()).await;
    log.note(&agent.step(&url).await);
    let _ = stop.send(());
    done.await.unwrap();
    assert!(log.sessions.iter().all(|s| s == &log.sessions[0]));
    let resumed = provider.report().requests.last().unwrap().clone();
    assert!(
        resumed.violations.is_empty() && !resumed.over_limit,
        "{resumed:?}"
    );
    assert_eq!(resumed.altered_reasoning, 0);
    assert_eq!(
        resumed.prefix_kept,
        Some(true),
        "the first request after the restart extends the last one before it"
    );

    // Its snapshots decode as the Responses bodies they are.
    let store = Store::open(&path).unwrap();
    let entries = store.list(100).unwrap();
    assert!(!entries.is_empty());
    for e in entries {
        let snapshot = store.get(e.id).unwrap();
        let before = snapshot.history().unwrap();
        let after = snapshot.compacted().unwrap();
        assert_eq!(before.format, abridge::model::Format::Responses);
        assert!(after.messages.len() < before.messages.len() + 2);
    }
    std::fs::remove_dir_all(&dir).ok();
}
