//! No credential reaches the store, the logs or the metrics.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "it/support.rs"]
#[allow(dead_code)]
mod support;

use abridge_store::Store;
use abridge_testkit::{Provider, ProviderOptions};

use support::{Logs, metrics_text, openai_loop, proxy_for};

const CONFIG: &str =
    "[trigger]\nmax_tokens = 6000\n[budget]\nmin_iterations = 2\nclear_at_least = 500\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_never_reach_the_store_the_logs_or_the_metrics() {
    let logs = Logs::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter("trace")
        .with_writer(move || writer.clone())
        .finish();
    // Global: the proxy logs from runtime and blocking threads. This test
    // has its own process (its own test target) for that reason.
    tracing::subscriber::set_global_default(subscriber).unwrap();

    let dir = std::env::temp_dir().join(format!("abridge-proxy-secrets-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("store.sqlite");
    let _ = std::fs::remove_file(&path);
    let provider = Provider::start(ProviderOptions::default()).await;
    let (url, stop, done) = proxy_for(
        &provider.url,
        CONFIG,
        Some(Box::new(Store::open(&path).unwrap())),
    )
    .await;
    let secrets = [
        "sk-SECRET-authorization-1",
        "sk-ant-SECRET-x-api-key-2",
        "SECRET-api-key-3",
        "SECRET-proxy-auth-4",
        "AIza-SECRET-goog-5",
        "AIza-SECRET-query-6",
    ];
    let headers = [
        ("authorization", format!("Bearer {}", secrets[0])),
        ("x-api-key", secrets[1].to_owned()),
        ("api-key", secrets[2].to_owned()),
        ("proxy-authorization", format!("Basic {}", secrets[3])),
        ("x-goog-api-key", secrets[4].to_owned()),
    ];
    let pairs: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let log = openai_loop(&url, 30, false, &pairs).await;
    // The Gemini API, its key in the query, forwarded as sent (and refused
    // when its path tries to leave).
    for path in [
        format!("/v1beta/models/g:generateContent?key={}", secrets[5]),
        format!("/v1beta/models/%2e%2e/g?key={}", secrets[5]),
    ] {
        let r = support::client()
            .post(format!("{url}{path}"))
            .header("x-goog-api-key", secrets[4])
            .body("{}")
            .send()
            .await
            .unwrap();
        assert!(!r.text().await.unwrap().contains("SECRET"));
    }
    assert!(log.compacted > 0, "the store holds snapshots to search");
    let metrics = metrics_text(&url).await;
    let _ = stop.send(());
    done.await.unwrap();

    let seen = &provider.report().requests[0].headers;
    for h in ["authorization", "api-key"] {
        assert!(seen.contains(&h.to_owned()), "{h} passes upstream");
    }
    // Anthropic's and Gemini's keys never go to the OpenAI upstream.
    for h in ["x-api-key", "x-goog-api-key"] {
        assert!(!seen.contains(&h.to_owned()), "{h} went to OpenAI");
    }
    assert!(
        !seen.contains(&"proxy-authorization".to_owned()),
        "proxy-authorization is hop-by-hop"
    );
    let stored = std::fs::read(&path).unwrap();
    let logged = logs.0.lock().unwrap().clone();
    assert!(!logged.is_empty(), "the proxy logged something to search");
    for s in secrets {
        for (what, hay) in [
            ("store", &stored),
            ("logs", &logged),
            ("metrics", &metrics.as_bytes().to_vec()),
        ] {
            assert!(
                !hay.windows(s.len()).any(|w| w == s.as_bytes()),
                "{s} found in the {what}"
            );
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}
