//! `abridge savings` over a SQLite and a PostgreSQL store: the request
//! rows a proxy wrote, summed per day, tenant and model.

use abridge::tokens::{Calibrated, Reported};
use abridge_store::{Accounting, RequestRecord, SessionStore};
use serde_json::Value;

use crate::support::{run, text};

fn request(tenant: &str, model: &str, client: u64, sent: u64, over: bool) -> RequestRecord {
    RequestRecord {
        source: format!("{tenant}-session"),
        at: String::new(),
        model: Some(model.into()),
        tokens: Calibrated::new(sent - 10),
        usage: Some(Reported::new(sent)),
        compacted: client > sent,
        snapshot: None,
        trigger: None,
        target: None,
        recalls: 0,
        account: Accounting {
            tenant: tenant.into(),
            client_tokens: Calibrated::new(client),
            input_tokens: Some(sent),
            output_tokens: Some(50),
            cache_read_tokens: Some(0),
            cache_write_tokens: Some(0),
            cost: Some(sent as f64 / 1e6),
            cost_without: (!over).then_some(client as f64 / 1e6),
            over_window: over,
        },
    }
}

fn write(store: &mut dyn SessionStore) {
    for r in [
        request("aaaa", "gpt-5", 10_000, 4_000, false),
        request("aaaa", "gpt-5", 12_000, 4_500, false),
        request("aaaa", "claude-sonnet-5", 3_000, 3_000, false),
        request("bbbb", "gpt-5", 900_000, 5_000, true),
    ] {
        store.record_request(&r).unwrap();
    }
}

fn lines(store: &str, by: &str) -> Vec<Value> {
    let o = run(&["savings", "--by", by, "--json", "--store", store], None);
    assert!(o.status.success(), "{}", text(&o.stderr));
    text(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn check(store: &str) {
    let tenants = lines(store, "tenant");
    assert_eq!(tenants.len(), 2, "{tenants:?}");
    let a = &tenants[0];
    assert_eq!(a["tenant"], "aaaa");
    assert_eq!(a["requests"], 3);
    assert_eq!(a["compacted"], 2);
    assert_eq!(a["client_tokens"], 25_000);
    assert_eq!(a["forwarded_tokens"], 11_500, "the provider's reports");
    assert_eq!(a["compared"], 3);
    let saved = a["cost_without"].as_f64().unwrap() - a["cost_compared"].as_f64().unwrap();
    assert!((saved - 0.0135).abs() < 1e-9, "{a}");
    let b = &tenants[1];
    assert_eq!(
        (b["over_window"].as_u64(), b["compared"].as_u64()),
        (Some(1), Some(0))
    );
    assert_eq!(b["cost_without"], 0.0, "over the window: never a saving");
    let models = lines(store, "model");
    let gpt = models.iter().find(|m| m["model"] == "gpt-5").unwrap();
    assert_eq!(gpt["requests"], 3);
    let days = lines(store, "day");
    assert_eq!(days.len(), 1);
    assert_eq!(days[0]["output_tokens"], 200);
    let table = run(&["savings", "--by", "all", "--store", store], None);
    let shown = text(&table.stdout);
    assert!(
        shown.contains("aaaa gpt-5") && shown.contains("total (lines shown)"),
        "{shown}"
    );
}

#[test]
fn savings_sums_a_sqlite_stores_requests_per_tenant_model_and_day() {
    let dir = std::env::temp_dir().join(format!("abridge-savings-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("s.sqlite");
    let _ = std::fs::remove_file(&path);
    let mut store = abridge_store::Store::open(&path).unwrap();
    write(&mut store);
    drop(store);
    check(path.to_str().unwrap());
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn savings_sums_a_postgres_stores_requests_too() {
    let pg = match abridge_testkit::Postgres::start() {
        Ok(pg) => pg,
        Err(why) => {
            eprintln!("skipped: {why} (.ci/run installs Debian's postgresql)");
            return;
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let mut store = rt
        .block_on(abridge_store::PgStore::connect(&pg.url))
        .unwrap();
    write(&mut store);
    drop(store);
    check(&pg.url);
}
