//! Server time of the dashboard's pages over a store of 1,000 compactions
//! (200 sessions of 5, each a compaction of the coding-agent example):
//! the sessions page (first page, and sorted by tokens saved) and a
//! compaction page; and the sessions page over 5,000 proxy sessions in
//! the request log (`cargo bench -p abridge-ui`).

use abridge::tokens::{Calibrated, Reported};
use std::path::PathBuf;
use std::sync::LazyLock;

use abridge::model::decode;
use abridge::{Compactor, Config, SnapshotData};
use abridge_store::{SnapshotStore, Store};
use abridge_ui::{SessionQuery, SessionSort, Ui};

fn main() {
    // Filling the store (1,000 inserts) is not part of any page's time.
    LazyLock::force(&FIXTURE);
    LazyLock::force(&MANY);
    divan::main();
}

struct Fixture {
    ui: Ui,
    last: i64,
    _dir: PathBuf,
}

static FIXTURE: LazyLock<Option<Fixture>> = LazyLock::new(|| {
    let dir = std::env::temp_dir().join(format!("abridge-ui-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).ok()?;
    let path = dir.join("store.sqlite");
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let conv = decode(&std::fs::read(root.join("examples/coding-agent.openai.json")).ok()?)
        .ok()?
        .remove(0);
    let config = Config::from_toml("[budget]\ntarget_tokens = 700\nmin_iterations = 2\n").ok()?;
    let mut compactor = Compactor::new(config.clone()).ok()?;
    let outcome = compactor.compact(&conv).ok()?;
    let mut store = Store::open(&path).ok()?;
    let data = SnapshotData {
        before: &conv,
        after: &outcome.conversation,
        config: &config,
        report: &outcome.report,
        thread: None,
        originals: &[],
    };
    let mut last = 0;
    for i in 0..1_000 {
        last = store
            .record_as(&format!("session-{:03}", i % 200), &data)
            .ok()?
            .0;
    }
    assert_eq!(store.list(usize::MAX).ok()?.len(), 1_000);
    Some(Fixture {
        ui: Ui::new(Box::new(store), None),
        last,
        _dir: dir,
    })
});

/// 5,000 proxy sessions of 4 logged requests each (no compaction).
static MANY: LazyLock<Option<(Ui, PathBuf)>> = LazyLock::new(|| {
    use abridge_store::{RequestRecord, SessionStore};
    let dir = std::env::temp_dir().join(format!("abridge-ui-bench-many-{}", std::process::id()));
    std::fs::create_dir_all(&dir).ok()?;
    let mut store = Store::open(&dir.join("store.sqlite")).ok()?;
    for i in 0..20_000u64 {
        let r = RequestRecord {
            source: format!("{:032x}", i % 5_000),
            at: String::new(),
            model: Some("gpt-4o".into()),
            tokens: Calibrated::new(1_000 + i),
            usage: Some(Reported::new(1_000 + i)),
            compacted: false,
            snapshot: None,
            trigger: Some(Calibrated::new(60_000)),
            target: Some(Calibrated::new(40_000)),
            recalls: 0,
            account: Default::default(),
        };
        store.record_request(&r).ok()?;
    }
    Some((Ui::new(Box::new(store), None), dir))
});

#[divan::bench]
fn sessions_page_5000_sessions() -> usize {
    MANY.as_ref()
        .and_then(|(ui, _)| ui.sessions_page(&SessionQuery::default()).ok())
        .map_or(0, |h| h.len())
}

#[divan::bench]
fn sessions_page() -> usize {
    FIXTURE
        .as_ref()
        .and_then(|f| f.ui.sessions_page(&SessionQuery::default()).ok())
        .map_or(0, |h| h.len())
}

#[divan::bench]
fn sessions_page_sorted_by_saving() -> usize {
    let q = SessionQuery {
        sort: SessionSort::Saved,
        ..SessionQuery::default()
    };
    FIXTURE
        .as_ref()
        .and_then(|f| f.ui.sessions_page(&q).ok())
        .map_or(0, |h| h.len())
}

#[divan::bench]
fn compaction_page() -> usize {
    FIXTURE
        .as_ref()
        .and_then(|f| f.ui.compaction_page(f.last).ok())
        .map_or(0, |h| h.len())
}
