//! Long tool loops through the proxy stay under the trigger, valid, with a
//! stable prefix between compactions.

use abridge_testkit::{ProviderOptions, body_hash};
use serde_json::json;

use crate::CONFIG;
use crate::support::{
    OpenAiAgent, Setup, anthropic_loop, client, metric, metrics_text, openai_loop, post_json, start,
};

fn options() -> ProviderOptions {
    ProviderOptions {
        max_tokens: Some(6000),
        ..ProviderOptions::default()
    }
}

/// Every request valid and under the limit; the prefix changes only when
/// the proxy compacted.
fn assert_bounded(report: &abridge_testkit::ProviderReport, compactions: usize) {
    for (i, r) in report.requests.iter().enumerate() {
        assert!(r.violations.is_empty(), "request {i}: {:?}", r.violations);
        assert!(!r.over_limit, "request {i}: {} tokens", r.tokens);
    }
    let breaks = report
        .requests
        .iter()
        .filter(|r| r.prefix_kept == Some(false))
        .count();
    assert!(compactions > 0, "the loop should have compacted");
    assert!(
        breaks <= compactions,
        "{breaks} prefix changes for {compactions} compactions"
    );
}

/// Of `requests` in one session, only the first was decoded whole.
fn assert_fast_path(metrics: &str, requests: usize) {
    let whole = metric(metrics, "abridge_decoded_total{part=\"whole\"}");
    let added = metric(metrics, "abridge_decoded_total{part=\"added\"}");
    assert_eq!((whole, added), (1.0, requests as f64 - 1.0), "{metrics}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_100_turn_openai_loop_stays_under_the_trigger() {
    let setup = start(CONFIG, options(), None).await;
    let log = openai_loop(&setup.proxy, 100, false, &[]).await;
    let metrics = metrics_text(&setup.proxy).await;
    let report = setup.provider.report();
    assert_eq!(report.requests.len(), 100);
    assert_bounded(&report, log.compacted);
    // Without the proxy the last request would be about 115k tokens
    // (`abridge stats` on the same 100 turns, o200k_base).
    assert!(report.requests.last().unwrap().tokens < 6000);
    assert_eq!(
        metric(&metrics, "abridge_compactions_total{") as usize,
        log.compacted,
        "{metrics}"
    );
    assert!(metric(&metrics, "abridge_tokens_saved_total") > 10_000.0);
    assert_eq!(
        metric(
            &metrics,
            "abridge_requests_total{route=\"chat_completions\",status=\"200\"}"
        ),
        100.0
    );
    assert_eq!(metric(&metrics, "abridge_active_sessions"), 1.0);
    // Whole (non-streamed) bodies end when their length is reached: no
    // response counts as a client that left.
    assert_eq!(
        metric(&metrics, "abridge_client_disconnects_total"),
        0.0,
        "{metrics}"
    );
    // After the first, each request was taken in parts: only its new messages decoded.
    assert_fast_path(&metrics, 100);
    assert!(
        log.sessions.iter().all(|s| s == &log.sessions[0]),
        "one session"
    );
    setup.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_openai_stream_loop_stays_under_the_trigger_and_feeds_calibration() {
    use abridge_store::{SessionStore, Store};
    let dir =
        std::env::temp_dir().join(format!("abridge-proxy-calibration-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("store.sqlite");
    let _ = std::fs::remove_file(&path);
    let store = Store::open(&path).unwrap();
    let setup = start(CONFIG, options(), Some(Box::new(store))).await;
    let log = openai_loop(&setup.proxy, 60, true, &[]).await;
    let report = setup.provider.report();
    assert!(report.requests.iter().all(|r| r.stream));
    assert_bounded(&report, log.compacted);
    setup.stop().await;
    // The usage read from the streams reached the session's calibration.
    let record = Store::open(&path)
        .unwrap()
        .load_session(&log.sessions[0])
        .unwrap()
        .unwrap();
    assert!(
        record.thread.calibration.samples() > 0,
        "{:?}",
        record.thread.calibration
    );
    // Every request is in the request log with the provider's usage (the
    // log is written off the request path: wait for the last rows).
    use abridge_store::SnapshotStore;
    let store = Store::open(&path).unwrap();
    let mut rows = Vec::new();
    for _ in 0..100 {
        rows = store.requests(&log.sessions[0], 1000).unwrap();
        if rows.len() == 60 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(rows.len(), 60);
    assert!(
        rows.iter().all(|r| r.usage.is_some_and(|u| u.get() > 0)),
        "usage from the streams"
    );
    assert_eq!(
        rows.iter().filter(|r| r.snapshot.is_some()).count(),
        log.compacted
    );
    let first = rows.iter().position(|r| r.snapshot.is_some()).unwrap();
    assert!(
        rows[first..].iter().all(|r| r.compacted),
        "sent compacted from the first compaction on"
    );
    assert!(!rows[0].compacted);
    assert!(
        rows.iter()
            .all(|r| r.trigger.is_some() && r.target.is_some())
    );
    assert_eq!(
        store.request_stats().unwrap()[&log.sessions[0]].requests,
        60
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_anthropic_stream_loop_keeps_cache_breakpoints_within_the_limit() {
    let setup = start(CONFIG, options(), None).await;
    let log = anthropic_loop(&setup.proxy, 60, true, &[]).await;
    let report = setup.provider.report();
    assert_bounded(&report, log.compacted);
    for r in &report.requests {
        assert!(
            r.cache_breakpoints >= 2 && r.cache_breakpoints <= 4,
            "{} breakpoints",
            r.cache_breakpoints
        );
    }
    // The client moved its marker every turn: each request after the
    // first was still read from where it changed, not decoded whole.
    assert_fast_path(&metrics_text(&setup.proxy).await, 60);
    setup.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_anthropic_loop_without_streaming() {
    let setup = start(CONFIG, options(), None).await;
    let log = anthropic_loop(&setup.proxy, 40, false, &[]).await;
    assert_bounded(&setup.provider.report(), log.compacted);
    setup.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_under_the_trigger_arrives_byte_for_byte() {
    let setup = start(CONFIG, options(), None).await;
    // Odd spacing and number forms that a re-serialization would change.
    let body = "{\"model\": \"fake-model\",  \"temperature\": 0.70, \"messages\": [{\"role\": \"user\", \"content\": \"hi \\u00e9\"}], \"max_tokens\": 1e2}";
    let resp = client()
        .post(format!("{}/v1/chat/completions", setup.proxy))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let report = setup.provider.report();
    assert_eq!(report.requests[0].body_hash, body_hash(body.as_bytes()));
    setup.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_routes_and_headers_are_forwarded() {
    let setup = start(CONFIG, options(), None).await;
    let resp = client()
        .get(format!("{}/v1/models", setup.proxy))
        .header("authorization", "Bearer sk-test")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let v: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(v["data"][0]["id"], json!("fake-model"));
    let health = client()
        .get(format!("{}/healthz", setup.proxy))
        .send()
        .await
        .unwrap();
    assert_eq!(health.text().await.unwrap(), "ok\n");
    let version: serde_json::Value = client()
        .get(format!("{}/version", setup.proxy))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(version["version"], json!(env!("CARGO_PKG_VERSION")));
    let log = openai_loop(
        &setup.proxy,
        1,
        false,
        &[
            ("x-abridge-session", "mine"),
            ("openai-organization", "org-1"),
            ("connection", "keep-alive, x-drop-me"),
            ("x-drop-me", "1"),
        ],
    )
    .await;
    assert_eq!(log.sessions.len(), 1);
    let seen = &setup.provider.report().requests[0].headers;
    assert!(seen.contains(&"openai-organization".to_owned()), "{seen:?}");
    assert!(!seen.contains(&"x-abridge-session".to_owned()), "{seen:?}");
    assert!(
        !seen.contains(&"x-drop-me".to_owned()),
        "hop-by-hop header named by Connection: {seen:?}"
    );
    setup.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_are_told_apart_by_credential_and_name() {
    let setup = start(CONFIG, options(), None).await;
    let a = openai_loop(&setup.proxy, 1, false, &[("authorization", "Bearer key-a")]).await;
    let b = openai_loop(&setup.proxy, 1, false, &[("authorization", "Bearer key-b")]).await;
    let a2 = openai_loop(&setup.proxy, 1, false, &[("authorization", "Bearer key-a")]).await;
    let named = openai_loop(
        &setup.proxy,
        1,
        false,
        &[
            ("authorization", "Bearer key-a"),
            ("x-abridge-session", "run-7"),
        ],
    )
    .await;
    assert_ne!(a.sessions, b.sessions);
    assert_eq!(a.sessions, a2.sessions);
    assert_ne!(a.sessions, named.sessions);
    assert!(a.sessions[0].len() == 32 && !a.sessions[0].contains("key"));
    setup.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edited_history_is_decoded_afresh_not_taken_from_the_last_request() {
    let setup = start(CONFIG, options(), None).await;
    let mut agent = OpenAiAgent::new(false);
    let mut log = crate::support::LoopLog::default();
    for _ in 0..12 {
        log.note(
            &agent
                .step(&setup.proxy, &[("x-abridge-session", "edit")])
                .await,
        );
    }
    assert!(log.compacted > 0, "a prefix is carried over");
    // The client rewrites its task, keeping its length: every byte offset
    // and the last bytes before the new messages stay the same.
    let task = agent.messages[1]["content"].as_str().unwrap().to_owned();
    let edited = task.replace("report on each.", "list the files.");
    assert_eq!(edited.len(), task.len());
    agent.messages[1]["content"] = json!(edited);
    agent
        .step(&setup.proxy, &[("x-abridge-session", "edit")])
        .await;
    let last = setup.provider.report().requests.last().unwrap().clone();
    assert_eq!(last.first_user, edited);
    assert!(last.violations.is_empty() && !last.over_limit);
    setup.stop().await;
}

/// A history far over the trigger, with Anthropic `context_management` edits.
fn edited_history(edits: serde_json::Value) -> String {
    let mut messages = vec![json!({"role": "user", "content": "Read every module."})];
    for i in 0..20 {
        messages.push(json!({"role": "assistant", "content": [{"type": "tool_use", "id": format!("t{i}"), "name": "read_file", "input": {"path": "a"}}]}));
        messages.push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": format!("t{i}"), "content": crate::support::file_content(i)}]}));
    }
    json!({"model": "fake-model", "max_tokens": 100, "messages": messages,
        "context_management": {"edits": edits}})
    .to_string()
}

async fn post_messages(setup: &Setup, body: &str) -> reqwest::Response {
    post_json(setup, "/v1/messages", body.to_owned()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_compaction_takes_the_history_over() {
    let setup = start(CONFIG, ProviderOptions::default(), None).await;
    let body = edited_history(json!([{"type": "compact_20260112"}]));
    for _ in 0..2 {
        let resp = post_messages(&setup, &body).await;
        assert_eq!(resp.status(), 200);
        assert_eq!(
            resp.headers().get("x-abridge-handover").unwrap(),
            "provider-compaction"
        );
        assert!(resp.headers().get("x-abridge-compacted").is_none());
    }
    let seen = setup.provider.report().requests;
    assert!(seen[0].tokens > 6000, "the request was over the trigger");
    assert!(
        seen.iter()
            .all(|r| r.body_hash == body_hash(body.as_bytes())),
        "forwarded as sent"
    );
    let metrics = metrics_text(&setup.proxy).await;
    let handed = metric(
        &metrics,
        r#"abridge_passthrough_total{why="provider_native"}"#,
    );
    assert_eq!(handed, 2.0, "{metrics}");
    setup.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context_editing_works_beside_abridge() {
    // Claude Code sends a clear_thinking edit that keeps everything on every
    // request; clearing tool uses is the provider's, after abridge's rewrite.
    let setup = start(CONFIG, ProviderOptions::default(), None).await;
    let edits = json!([{"type": "clear_thinking_20251015", "keep": "all"},
        {"type": "clear_tool_uses_20250919", "trigger": {"type": "input_tokens", "value": 100000}}]);
    let body = edited_history(edits.clone());
    let resp = post_messages(&setup, &body).await;
    assert_eq!(resp.status(), 200);
    assert!(resp.headers().get("x-abridge-handover").is_none());
    assert!(resp.headers().get("x-abridge-compacted").is_some());
    let seen = setup.provider.report().requests;
    assert!(seen[0].tokens <= 6000, "{} tokens", seen[0].tokens);
    assert!(seen[0].violations.is_empty(), "{:?}", seen[0].violations);
    setup.stop().await;
}
