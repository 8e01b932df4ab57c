//! Savings that add up: a scripted 60-step session through the proxy, and
//! the same session sent straight to a provider. What the proxy says the
//! client sent equals what the direct provider logged; what it says it
//! forwarded equals what its own provider logged; `/metrics` and the store
//! say the same per tenant and model.

use abridge_store::{GroupBy, SessionStore, SnapshotStore, Store};
use abridge_testkit::{Provider, ProviderOptions};

use crate::CONFIG;
use crate::support::{metric, metrics_text, openai_loop, start};

const PRICED: &str = "[models.fake-model]\ncontext_window = 40000\nmax_output = 4000\n\
     tokenizer = \"o200k_base\"\n\
     price = { input = 2.0, output = 8.0, cache_write = 2.0, cache_read = 0.2 }\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_60_step_session_adds_up_to_what_the_providers_logged() {
    let steps = 60;
    let direct = Provider::start(ProviderOptions::default()).await;
    let sent = openai_loop(&direct.url, steps, false, &[]).await;
    assert_eq!(sent.compacted, 0);
    let client_logged: u64 = direct.report().requests.iter().map(|r| r.tokens).sum();

    let dir = std::env::temp_dir().join(format!("abridge-proxy-savings-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("store.sqlite");
    let _ = std::fs::remove_file(&path);
    let store: Box<dyn SessionStore> = Box::new(Store::open(&path).unwrap());
    let setup = start(
        &format!("{CONFIG}{PRICED}"),
        ProviderOptions::default(),
        Some(store),
    )
    .await;
    let log = openai_loop(&setup.proxy, steps, false, &[]).await;
    assert!(log.compacted > 10, "{} compacted", log.compacted);
    let metrics = metrics_text(&setup.proxy).await;
    let report = setup.stop().await.report();
    assert_eq!(report.requests.len(), steps);
    let forwarded_logged: u64 = report.requests.iter().map(|r| r.tokens).sum();
    assert!(forwarded_logged * 3 < client_logged);

    let client = metric(&metrics, "abridge_client_tokens_total{") as u64;
    let forwarded = metric(&metrics, "abridge_forwarded_tokens_total{") as u64;
    assert_eq!(client, client_logged, "{metrics}");
    assert_eq!(forwarded, forwarded_logged, "{metrics}");
    // One line, labelled with the tenant's hash and the model.
    let line = metrics
        .lines()
        .find(|l| l.starts_with("abridge_client_tokens_total{"))
        .unwrap();
    assert!(line.contains("model=\"fake-model\""), "{line}");
    let tenant = line
        .split("tenant=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap();
    assert!(
        tenant.len() == 32 && tenant.bytes().all(|b| b.is_ascii_hexdigit()),
        "{line}"
    );
    // Priced both ways: the requests the client sent within the window.
    // Output is the same both ways; the prompts are what the logs say.
    let window = 40_000;
    let pairs: Vec<(u64, u64)> = direct
        .report()
        .requests
        .iter()
        .zip(&report.requests)
        .map(|(c, f)| (c.tokens, f.tokens))
        .collect();
    let over = pairs.iter().filter(|(c, _)| *c > window).count();
    assert!(over > 10 && over < steps, "{over} over the window");
    assert_eq!(
        metric(&metrics, "abridge_over_window_requests_total{") as usize,
        over
    );
    let price = |tokens: u64| (tokens as f64 * 2.0 + 20.0 * 8.0) / 1e6;
    let within = pairs.iter().filter(|(c, _)| *c <= window);
    let expect_with: f64 = within.clone().map(|(_, f)| price(*f)).sum();
    let expect_without: f64 = within.map(|(c, _)| price(*c)).sum();
    let with = metric(&metrics, "abridge_cost_compared_dollars_total{");
    let without = metric(&metrics, "abridge_cost_without_dollars_total{");
    assert!((with - expect_with).abs() < 1e-9, "{with} vs {expect_with}");
    assert!(
        (without - expect_without).abs() < 1e-9,
        "{without} vs {expect_without}"
    );
    let all: f64 = pairs.iter().map(|(_, f)| price(*f)).sum();
    assert!((metric(&metrics, "abridge_cost_dollars_total{") - all).abs() < 1e-9);

    let store = Store::open(&path).unwrap();
    let lines = store.totals(GroupBy::All, 10).unwrap();
    assert_eq!(lines.len(), 1, "{lines:?}");
    let t = &lines[0];
    assert_eq!(
        (t.tenant.as_str(), t.model.as_str()),
        (tenant, "fake-model")
    );
    assert_eq!(t.requests, steps as u64);
    // Sent rewritten: each compaction's request and the ones carrying it.
    assert!(t.compacted as usize > log.compacted, "{t:?}");
    assert_eq!(
        (t.client_tokens, t.forwarded_tokens),
        (client_logged, forwarded_logged)
    );
    assert_eq!(t.output_tokens, 20 * steps as u64);
    assert_eq!(t.over_window as usize, over);
    assert!((t.saved() - (without - with)).abs() < 1e-9);
    assert!(t.saved() > 0.0);
    std::fs::remove_dir_all(&dir).ok();
}
