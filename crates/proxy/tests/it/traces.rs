//! A trace receiver that is down or stalled never holds a request up: the
//! spans it does not take are counted in `/metrics`, by why. (The spans a
//! real receiver gets are checked against Arize Phoenix in
//! `sdk-tests/python/test_traces.py`.)

use std::time::{Duration, Instant};

use abridge_proxy::ProxyConfig;
use abridge_testkit::ProviderOptions;

use crate::CONFIG;
use crate::support::{metric, metrics_text, openai_loop, start};

/// `CONFIG` exporting to `endpoint`, at most `queued` spans waiting.
fn traced(endpoint: &str, queued: usize) -> String {
    format!("{CONFIG}[telemetry]\nendpoint = \"{endpoint}\"\nmax_queued_spans = {queued}\n")
}

/// Polls `/metrics` until `prefix` sums to at least `at_least` (30 s at most).
async fn wait_for(proxy: &str, prefix: &str, at_least: f64) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = metrics_text(proxy).await;
        if metric(&text, prefix) >= at_least || Instant::now() > deadline {
            return text;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_a_closed_port_refuses_are_counted_and_every_request_answered() {
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let setup = start(
        &traced(&format!("http://{closed}/v1/traces"), 4096),
        ProviderOptions::default(),
        None,
    )
    .await;
    let steps = 12;
    let log = openai_loop(&setup.proxy, steps, false, &[]).await;
    assert!(log.compacted > 0);
    // A span per request and one per compaction: all of them fail to leave.
    let spans = (steps + log.compacted) as f64;
    let text = wait_for(
        &setup.proxy,
        "abridge_trace_spans_dropped_total{why=\"export_failed\"}",
        spans,
    )
    .await;
    assert_eq!(
        metric(
            &text,
            "abridge_trace_spans_dropped_total{why=\"export_failed\"}"
        ),
        spans,
        "{text}"
    );
    let report = setup.stop().await.report();
    assert_eq!(report.requests.len(), steps);
    // The upstream still got each request's trace context.
    assert!(report.requests.iter().all(|r| r.traceparent.is_some()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_receiver_fills_a_bounded_queue_and_the_rest_is_counted() {
    // Accepts connections and never answers.
    let stalled = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = stalled.local_addr().unwrap();
    let hold = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = stalled.accept().await {
            held.push(socket);
        }
    });
    let setup = start(
        &traced(&format!("http://{addr}/v1/traces"), 2),
        ProviderOptions::default(),
        None,
    )
    .await;
    let steps = 12;
    let log = openai_loop(&setup.proxy, steps, true, &[]).await;
    let spans = (steps + log.compacted) as f64;
    let text = wait_for(
        &setup.proxy,
        "abridge_trace_spans_dropped_total{why=\"queue_full\"}",
        spans - 2.0,
    )
    .await;
    // Two wait on the stalled export (until it times out); the rest are
    // turned away meanwhile, never held.
    let full = metric(
        &text,
        "abridge_trace_spans_dropped_total{why=\"queue_full\"}",
    );
    assert!(full >= 1.0 && full <= spans, "{full} of {spans}: {text}");
    let report = setup.stop().await.report();
    assert_eq!(report.requests.len(), steps);
    assert!(report.requests.iter().all(|r| r.violations.is_empty()));
    hold.abort();
}

#[test]
fn a_telemetry_section_with_a_bad_endpoint_is_refused_by_name() {
    let e = ProxyConfig::from_toml("[telemetry]\nendpoint = \"localhost:4318\"\n").unwrap_err();
    assert!(e.to_string().contains("[telemetry] endpoint"), "{e}");
    let e = ProxyConfig::from_toml("[telemetry]\nendpont = \"http://x\"\n").unwrap_err();
    assert!(e.to_string().contains("[telemetry]"), "{e}");
}
