//! Failure paths: the upstream failing, a summarizer down, a client going
//! away, bodies the proxy cannot or will not take.

use abridge_testkit::ProviderOptions;
use serde_json::{Value, json};

use crate::CONFIG;
use crate::support::{LoopLog, OpenAiAgent, client, metric, metrics_text, openai_loop, start};

async fn post(proxy: &str, headers: &[(&str, &str)], body: String) -> reqwest::Response {
    let mut req = client()
        .post(format!("{proxy}/v1/chat/completions"))
        .header("content-type", "application/json")
        .body(body);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    req.send().await.unwrap()
}

fn small() -> String {
    json!({"model": "fake-model", "messages": [{"role": "user", "content": "hi"}]}).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_errors_come_back_with_their_status_and_body() {
    let setup = start(CONFIG, ProviderOptions::default(), None).await;
    for (fail, status) in [("500", 500), ("429", 429)] {
        let r = post(&setup.proxy, &[("x-fake-fail", fail)], small()).await;
        assert_eq!(r.status().as_u16(), status);
        let v: Value = r.json().await.unwrap();
        assert!(v["error"]["message"].is_string(), "{v}");
    }
    let r = post(&setup.proxy, &[("x-fake-fail", "garbage")], small()).await;
    assert_eq!(r.status(), 200);
    assert_eq!(r.text().await.unwrap(), "this is not json {{");
    setup.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_that_hangs_times_out_with_504() {
    let toml = format!("{CONFIG}[serve]\nupstream_timeout_secs = 0.5\n");
    let setup = start(&toml, ProviderOptions::default(), None).await;
    let r = post(&setup.proxy, &[("x-fake-fail", "hang")], small()).await;
    assert_eq!(r.status(), 504);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["type"], json!("abridge_proxy_error"));
    setup.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_upstream_is_a_502() {
    let (proxy, stop, done) = crate::support::proxy_for("http://127.0.0.1:9", CONFIG, None).await;
    let r = post(&proxy, &[], small()).await;
    assert_eq!(r.status(), 502);
    let _ = stop.send(());
    done.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_summarizer_that_is_down_costs_nothing_but_its_briefing() {
    let toml = format!(
        "{CONFIG}[[summarizers]]\nkind = \"openai\"\nmodel = \"m\"\nbase_url = \"http://127.0.0.1:9/v1\"\ntimeout_secs = 1\n"
    );
    let options = ProviderOptions {
        max_tokens: Some(6000),
        ..ProviderOptions::default()
    };
    let setup = start(&toml, options, None).await;
    let log = openai_loop(&setup.proxy, 50, false, &[]).await;
    let report = setup.provider.report();
    assert!(log.compacted > 0);
    assert!(
        report
            .requests
            .iter()
            .all(|r| r.violations.is_empty() && !r.over_limit)
    );
    setup.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_leaves_mid_stream_does_not_hurt_the_next() {
    let options = ProviderOptions {
        chunk_delay: std::time::Duration::from_millis(50),
        ..ProviderOptions::default()
    };
    let setup = start(CONFIG, options, None).await;
    let body = json!({"model": "fake-model", "stream": true, "messages": [{"role": "user", "content": "hi"}]});
    let mut r = client()
        .post(format!("{}/v1/chat/completions", setup.proxy))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let first = r.chunk().await.unwrap().unwrap();
    // Events are 50 ms apart: a relay that buffered would hand over the
    // whole stream, its end included, as the first chunk.
    assert!(first.starts_with(b"data: "));
    assert!(
        !first.windows(6).any(|w| w == b"[DONE]"),
        "the first chunk arrives before the stream ends"
    );
    drop(r);
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let metrics = metrics_text(&setup.proxy).await;
    assert_eq!(
        metric(&metrics, "abridge_client_disconnects_total"),
        1.0,
        "{metrics}"
    );
    let log = openai_loop(&setup.proxy, 2, true, &[]).await;
    assert!(log.warnings.is_empty());
    // An upstream that drops mid-stream ends the client's stream with an error, not a hang.
    let r = post(
        &setup.proxy,
        &[("x-fake-fail", "drop-stream")],
        body.to_string(),
    )
    .await;
    assert!(r.text().await.is_err());
    setup.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_malformed_and_strict() {
    let toml = format!("{CONFIG}[serve]\nmax_body_megabytes = 1\n");
    let setup = start(&toml, ProviderOptions::default(), None).await;
    let big = json!({"model": "m", "messages": [{"role": "user", "content": "x".repeat(2 << 20)}]})
        .to_string();
    let r = post(&setup.proxy, &[], big).await;
    assert_eq!(r.status(), 413);
    assert!(r.text().await.unwrap().contains("max_body_megabytes"));
    // Malformed JSON goes to the provider, whose error is the authority.
    let r = post(&setup.proxy, &[], "{\"model\": ".into()).await;
    assert_eq!(r.status(), 400);
    assert!(r.headers().get("x-abridge-warning").is_some());
    assert!(r.text().await.unwrap().contains("body is not JSON"));
    // A dangling tool result: forwarded with a warning.
    let bad = json!({"model": "m", "messages": [{"role": "tool", "tool_call_id": "nope", "content": "x"}]}).to_string();
    let r = post(&setup.proxy, &[], bad.clone()).await;
    assert!(r.headers().get("x-abridge-warning").is_some());
    assert_eq!(
        setup.provider.report().requests.len(),
        1,
        "the invalid conversation reached the provider"
    );
    setup.stop().await;

    let strict = format!("{CONFIG}[serve]\nstrict = true\n");
    let setup = start(&strict, ProviderOptions::default(), None).await;
    let r = post(&setup.proxy, &[], bad).await;
    assert_eq!(r.status(), 400);
    assert!(r.text().await.unwrap().contains("abridge_proxy_error"));
    assert!(setup.provider.report().requests.is_empty());
    setup.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overflow_is_compacted_harder_and_retried_once() {
    // The provider's window is below the proxy's trigger.
    let options = ProviderOptions {
        window: Some(4000),
        ..ProviderOptions::default()
    };
    let setup = start(CONFIG, options, None).await;
    let log = openai_loop(&setup.proxy, 30, false, &[]).await;
    assert!(log.retried > 0, "{log:?}");
    let report = setup.provider.report();
    let refused = report.requests.iter().filter(|r| r.tokens > 4000).count();
    assert_eq!(refused, log.retried, "each refusal retried once");
    setup.stop().await;
}

/// A system prompt over the trigger (a small window): each request goes at
/// its floor, smaller than the agent sent and valid, with a warning, and is
/// accounted as the compaction it is (its count, the rungs it took).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_over_its_target_even_at_its_floor_goes_at_its_floor() {
    let setup = start(CONFIG, ProviderOptions::default(), None).await;
    let mut agent = OpenAiAgent::new(false);
    agent.messages[0] = json!({"role": "system", "content": "Follow the rules. ".repeat(2000)});
    let mut log = LoopLog::default();
    for _ in 0..8 {
        log.note(&agent.step(&setup.proxy, &[]).await);
    }
    let floors = log
        .warnings
        .iter()
        .filter(|w| w.contains("sent at its floor"))
        .count();
    assert!(floors >= 4, "{:?}", log.warnings);
    let seen = setup.provider.report().requests;
    let last = seen.last().unwrap();
    assert!(last.violations.is_empty(), "{:?}", last.violations);
    assert!(last.messages < agent.messages.len() - 1, "{last:?}");
    let metrics = metrics_text(&setup.proxy).await;
    assert_eq!(metric(&metrics, "abridge_over_target_total"), floors as f64);
    assert!(
        metric(&metrics, "abridge_compactions_total") >= floors as f64,
        "{metrics}"
    );
    assert!(
        metric(&metrics, "abridge_degraded_total") > 0.0,
        "{metrics}"
    );
    setup.stop().await;
}
