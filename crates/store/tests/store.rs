//! The store records every compaction, and a failing store costs nothing
//! but an event.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

use abridge::model::decode;
use abridge::{Compactor, Config, Event};
use abridge_store::Store;

fn conv() -> abridge::model::Conversation {
    let bytes = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/coding-agent.openai.json"
    ))
    .unwrap();
    decode(&bytes).unwrap().remove(0)
}

fn compactor() -> Compactor {
    let mut config = Config::default();
    config.budget.target_tokens = Some(700);
    config.budget.min_iterations = 2;
    Compactor::new(config).unwrap()
}

#[test]
fn snapshot_round_trip() {
    let dir = std::env::temp_dir().join(format!("abridge-store-{}", std::process::id()));
    let path = dir.join("nested/s.sqlite");
    let mut c = compactor();
    c.set_store(Box::new(
        Store::open(&path).unwrap().with_source("coding-agent"),
    ));
    let original = conv();
    let out = c.compact(&original).unwrap();
    assert_eq!(out.report.snapshot.as_deref(), Some("1"));
    let store = Store::open(&path).unwrap();
    let s = store.get(1).unwrap();
    assert_eq!(s.entry.source.as_deref(), Some("coding-agent"));
    assert_eq!(s.entry.tokens_before as u64, out.report.tokens_before);
    assert_eq!(s.entry.summarizer.as_deref(), Some("offline"));
    assert!(s.briefing.as_deref().unwrap().contains("APP-1432"));
    assert_eq!(s.history().unwrap().messages, original.messages);
    assert_eq!(s.config().unwrap().budget.target_tokens, Some(700));
    assert_eq!(store.list(10).unwrap().len(), 1);
    assert!(matches!(
        store.get(2),
        Err(abridge_store::Error::NotFound(2))
    ));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_store_that_fails_to_write_reports_an_event_and_keeps_the_result() {
    let dir = std::env::temp_dir().join(format!("abridge-store-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bad.sqlite");
    // A table of the same name but another shape: the store opens, inserts fail.
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch("CREATE TABLE snapshots (x INTEGER);")
        .unwrap();
    let mut c = compactor();
    c.set_store(Box::new(Store::open(&path).unwrap()));
    let original = conv();
    let out = c.compact(&original).unwrap();
    assert!(out.report.compacted);
    assert_eq!(out.report.snapshot, None);
    assert!(
        out.report
            .events
            .iter()
            .any(|e| matches!(e, Event::SnapshotFailed { error } if error.contains("bad.sqlite")))
    );
    assert!(abridge::model::validate(&out.conversation).is_empty());
    std::fs::remove_dir_all(&dir).ok();
}
