//! The recall tool answered by the proxy: after a compaction the model
//! recalls an original by the handle it read, the proxy answers it from
//! what it kept and continues the upstream call, and the client sees one
//! response without the tool, streamed or not, Chat Completions,
//! Anthropic, the Responses API or Gemini.

use std::collections::BTreeSet;

use abridge_testkit::{ProviderOptions, ProviderReport};

use crate::CONFIG;
use crate::gemini::gemini_loop;
use crate::responses::responses_loop;
use crate::support::{
    LoopLog, anthropic_loop, file_content, metric, metrics_text, openai_loop, start,
};

const TURNS: usize = 14;

#[derive(Clone, Copy, Debug)]
pub(crate) enum Api {
    Chat,
    Anthropic,
    Responses,
    Gemini,
}

pub(crate) const APIS: [Api; 4] = [Api::Chat, Api::Anthropic, Api::Responses, Api::Gemini];

async fn run(api: Api, stream: bool, mode: &str, toml: &str) -> (ProviderReport, String) {
    let setup = start(toml, ProviderOptions::default(), None).await;
    let headers = [("x-fake-recall", mode)];
    let log = agent_loop(api, &setup.proxy, TURNS, stream, &headers).await;
    assert!(log.compacted > 0, "{api:?}: the loop should have compacted");
    let metrics = metrics_text(&setup.proxy).await;
    (setup.provider.report(), metrics)
}

/// `turns` steps of the agent loop of `api`, streamed or not.
pub(crate) async fn agent_loop(
    api: Api,
    proxy: &str,
    turns: usize,
    stream: bool,
    headers: &[(&str, &str)],
) -> LoopLog {
    match api {
        Api::Chat => openai_loop(proxy, turns, stream, headers).await,
        Api::Anthropic => anthropic_loop(proxy, turns, stream, headers).await,
        Api::Responses => responses_loop(proxy, turns, stream, headers).await,
        Api::Gemini => {
            let how = if stream { "sse" } else { "whole" };
            gemini_loop(proxy, turns, how, headers).await
        }
    }
}

/// Requests the proxy continued (their last message answers the recall
/// tool), and the client's own.
fn split(
    report: &ProviderReport,
) -> (
    Vec<&abridge_testkit::RequestCheck>,
    Vec<&abridge_testkit::RequestCheck>,
) {
    report.requests.iter().partition(|r| !r.recalled.is_empty())
}

fn assert_valid_and_untraced(report: &ProviderReport, what: &str) {
    for (i, r) in report.requests.iter().enumerate() {
        assert!(
            r.violations.is_empty(),
            "{what}: request {i}: {:?}",
            r.violations
        );
        // Encrypted reasoning (the Responses API) goes back as it came,
        // in the client's requests and in the proxy's continuations.
        assert_eq!(r.altered_reasoning, 0, "{what}: request {i}");
    }
    let (continued, own) = split(report);
    assert!(!continued.is_empty(), "{what}: no recall was answered");
    // The client never saw the tool: nothing it sent holds a call of it.
    assert!(
        own.iter().all(|r| r.recall_calls == 0),
        "{what}: a client request holds a recall call"
    );
    // Declared from the first compacted request on, and only with handles to use.
    assert!(continued.iter().all(|r| r.recall_declared));
    // A continued request extends the client's request before it.
    assert!(
        continued.iter().all(|r| r.prefix_kept == Some(true)),
        "{what}: a continued request rewrote the client's history"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recalled_original_reaches_the_model_and_never_the_client() {
    for api in APIS {
        for stream in [false, true] {
            let what = format!("{api:?}, stream {stream}");
            let (report, metrics) = run(api, stream, "alone", CONFIG).await;
            assert_valid_and_untraced(&report, &what);
            // The original bytes came back: a whole file the agent read,
            // which the compacted history only names by its handle.
            let (continued, _) = split(&report);
            for r in &continued {
                let text = &r.recalled[0];
                assert!(
                    (0..TURNS).any(|k| text.contains(&file_content(k))),
                    "{what}: the recall answer holds no original: {text:.300}"
                );
            }
            assert!(
                metric(&metrics, "abridge_recalls_total{outcome=\"found\"}") >= 1.0,
                "{metrics}"
            );
            assert!(metric(&metrics, "abridge_recall_bytes_total") > 1000.0);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recall_beside_the_clients_own_call_is_answered_first() {
    for api in APIS {
        for stream in [false, true] {
            let what = format!("{api:?}, stream {stream}, beside");
            let (report, _) = run(api, stream, "beside", CONFIG).await;
            assert_valid_and_untraced(&report, &what);
            // The loop went on: the model re-issued its own call after
            // reading, and the client ran it.
            let (_, own) = split(&report);
            assert_eq!(own.len(), TURNS, "{what}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_handles_and_a_model_that_keeps_recalling_are_bounded() {
    let (report, metrics) = run(Api::Anthropic, true, "unknown", CONFIG).await;
    assert_valid_and_untraced(&report, "unknown handle");
    let (continued, _) = split(&report);
    assert!(
        continued
            .iter()
            .all(|r| r.recalled[0].contains("no original is kept"))
    );
    assert!(metric(&metrics, "abridge_recalls_total{outcome=\"missing\"}") >= 1.0);

    let toml = format!("{CONFIG}[recall]\nmax_rounds = 2\n");
    for api in APIS {
        for stream in [false, true] {
            let what = format!("{api:?}, stream {stream}, always");
            let (report, metrics) = run(api, stream, "always", &toml).await;
            assert_valid_and_untraced(&report, &what);
            // Two rounds per client request at most, then the response
            // goes to the client without its recall calls.
            let (continued, own) = split(&report);
            let recalling = own.iter().filter(|r| r.recall_declared).count();
            assert!(continued.len() <= 2 * recalling, "{what}");
            assert!(
                metric(&metrics, "abridge_recall_rounds_exhausted_total") >= 1.0,
                "{what}: {metrics}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_request_log_counts_the_recalls_for_the_dashboard() {
    use abridge_store::{SnapshotStore, Store};
    let dir = std::env::temp_dir().join(format!("abridge-proxy-recall-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("store.sqlite");
    let _ = std::fs::remove_file(&path);
    let store = Store::open(&path).unwrap();
    let setup = start(CONFIG, ProviderOptions::default(), Some(Box::new(store))).await;
    let log = anthropic_loop(&setup.proxy, TURNS, true, &[("x-fake-recall", "alone")]).await;
    let session = log.sessions[0].clone();
    let report = setup.provider.report();
    setup.stop().await;
    let (continued, _) = split(&report);
    let store = Store::open(&path).unwrap();
    let requests = store.requests(&session, 100).unwrap();
    assert_eq!(requests.len(), TURNS);
    let recalls: u32 = requests.iter().map(|r| r.recalls).sum();
    assert_eq!(
        recalls as usize,
        continued.len(),
        "one answered call per continued request"
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// An agent that acts through its text (a bash block in its reply, the
/// output in the next user message), with no tools, or with tools it never
/// calls: what reached the upstream, each body as text.
async fn text_agent(tools: bool) -> Vec<String> {
    use abridge_testkit::{Mock, openai_ok};
    let upstream = Mock::serve(|_| Some(openai_ok("```bash\ncat src/lib.rs\n```")));
    let (proxy, stop, done) = crate::support::proxy_for(&upstream.url, CONFIG, None).await;
    let mut messages = vec![
        serde_json::json!({"role": "system", "content": "Act by writing one bash block per reply."}),
        serde_json::json!({"role": "user", "content": "Find why step_3 overflows."}),
    ];
    for turn in 0..20 {
        let mut body = serde_json::json!({"model": "gpt-4o", "messages": messages});
        if tools {
            body["tools"] = serde_json::json!([{"type": "function", "function": {
                "name": "read_file", "parameters": crate::support::read_file_tool()}}]);
        }
        let r = crate::support::client()
            .post(format!("{proxy}/v1/chat/completions"))
            .bearer_auth("sk-text")
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        messages.push(
            serde_json::json!({"role": "assistant", "content": "```bash\ncat src/lib.rs\n```"}),
        );
        messages.push(serde_json::json!({"role": "user", "content": file_content(turn)}));
    }
    let _ = stop.send(());
    let _ = done.await;
    upstream
        .requests()
        .iter()
        .map(|s| s.body.to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_without_tools_is_never_pointed_at_the_recall_tool() {
    let sent = text_agent(false).await;
    assert!(
        sent.iter().any(|b| b.contains("<compacted-history>")),
        "the loop should have been briefed"
    );
    for (i, body) in sent.iter().enumerate() {
        for word in ["abridge_recall", "recall abr_", "abr_", "Recallable"] {
            assert!(!body.contains(word), "request {i} mentions {word:?}");
        }
    }

    // The same agent with a tool declared is offered recall: the check above
    // would see it.
    let with_tools = text_agent(true).await;
    assert!(
        with_tools.iter().any(|b| b.contains("<compacted-history>")
            && b.contains("Recallable originals (abridge_recall)")),
        "with tools, the briefing's index names the recall tool"
    );
}

/// A model that does not know which handle holds a name searches for it:
/// the proxy answers with the line of the clipped original that holds it,
/// under that original's handle, on every API, streamed or not. Another
/// key's model searching its own session for the same name (its histories
/// are the same words) is answered from its own originals only: no handle
/// of the first key's in anything it gets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_search_finds_a_name_from_a_clipped_result_within_its_own_tenant() {
    // A line only the second turn's file read holds.
    let name = "step_1_17";
    for api in APIS {
        for stream in [false, true] {
            let what = format!("{api:?}, stream {stream}, search");
            let setup = start(CONFIG, ProviderOptions::default(), None).await;
            let mut answers = Vec::new();
            for key in ["key-a", "key-b"] {
                let seen = setup.provider.report().requests.len();
                let headers = [
                    ("x-fake-recall", "alone"),
                    ("x-fake-recall-query", name),
                    ("authorization", key),
                    ("x-api-key", key),
                    ("x-goog-api-key", key),
                ];
                let log = match api {
                    Api::Chat => openai_loop(&setup.proxy, TURNS, stream, &headers).await,
                    Api::Anthropic => anthropic_loop(&setup.proxy, TURNS, stream, &headers).await,
                    Api::Responses => responses_loop(&setup.proxy, TURNS, stream, &headers).await,
                    Api::Gemini => {
                        let how = if stream { "sse" } else { "whole" };
                        gemini_loop(&setup.proxy, TURNS, how, &headers).await
                    }
                };
                assert!(log.compacted > 0, "{what}");
                let report = setup.provider.report();
                let got: Vec<String> = report.requests[seen..]
                    .iter()
                    .flat_map(|r| r.recalled.iter().cloned())
                    .collect();
                assert!(!got.is_empty(), "{what}: {key}'s model never searched");
                answers.push(got);
            }
            let report = setup.stop().await.report();
            assert_valid_and_untraced(&report, &what);
            let line = "fn step_1_17(x: u32) -> u32 { x * 17 + 1 } // line 17".to_owned();
            let handles = |texts: &[String]| -> BTreeSet<String> {
                texts
                    .iter()
                    .flat_map(|t| t.split(|c: char| !c.is_ascii_alphanumeric() && c != '_'))
                    .filter(|w| w.starts_with("abr_"))
                    .map(str::to_owned)
                    .collect()
            };
            for (key, got) in ["key-a", "key-b"].iter().zip(&answers) {
                let found: Vec<&String> = got.iter().filter(|a| a.contains(&line)).collect();
                assert!(
                    !found.is_empty(),
                    "{what}: {key} did not get the line back: {got:?}"
                );
                assert!(
                    found
                        .iter()
                        .all(|a| a.contains(&format!("search for \"{name}\"")))
                );
            }
            let (a, b) = (handles(&answers[0]), handles(&answers[1]));
            assert!(!a.is_empty() && !b.is_empty());
            assert!(
                a.is_disjoint(&b),
                "{what}: one key's search named the other's handles"
            );
        }
    }
}
