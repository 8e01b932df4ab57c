//! A minute of steady load through `abridge serve` (this build's binary):
//! twelve tenants over Chat Completions, Messages and Responses send
//! growing histories, and afterwards the store holds everything the proxy
//! was given — a request row per request, a snapshot per compaction, every
//! session the client saw compacted — nothing was dropped, and no tenant's
//! text or handle reached another tenant's request. The long run and its
//! figures are in the book (Benchmarks); `abridge-soak` runs it.

use std::path::PathBuf;
use std::time::Duration;

use abridge_testkit::soak::{SoakOptions, SoakStore, run};

fn options(store: SoakStore) -> SoakOptions {
    let mut o = SoakOptions::new(PathBuf::from(env!("CARGO_BIN_EXE_abridge")));
    o.duration = Duration::from_secs(60);
    o.store = store;
    // Validity upstream too: the store is what this test is about, but a
    // valid, bounded request is what the proxy is for.
    o.check = true;
    o
}

fn assert_nothing_lost(store: SoakStore) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let report = runtime
        .block_on(run(&options(store), |line| eprintln!("{line}")))
        .unwrap();
    eprintln!("{}", report.table());
    assert_eq!(report.losses(), Vec::<String>::new(), "{}", report.table());
    let stored = report.store.expect("a store");
    assert!(report.requests > 100, "{}", report.table());
    assert!(report.compactions > 10.0, "{}", report.table());
    assert_eq!(stored.requests, report.requests, "a row per request");
    assert_eq!(
        stored.snapshots as f64, report.compactions,
        "a snapshot per compaction"
    );
    assert_eq!(report.upstream.over_bound, 0, "{}", report.table());
    // Passed: its logs and store are not needed (a failed run keeps them).
    report.remove_dir().unwrap();
    assert!(!report.dir.exists());
}

#[test]
fn a_minute_of_load_on_sqlite_loses_nothing_and_leaks_nothing_across_tenants() {
    assert_nothing_lost(SoakStore::Sqlite);
}

#[test]
fn a_minute_of_load_on_two_replicas_sharing_postgres_loses_nothing() {
    if abridge_testkit::Postgres::start().is_err() {
        eprintln!("skipped: PostgreSQL is not installed");
        return;
    }
    assert_nothing_lost(SoakStore::Postgres { replicas: 2 });
}
