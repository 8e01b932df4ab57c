//! The store records every compaction, and a failing store costs nothing
//! but an event.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

use abridge::Calibration;
use abridge::model::decode;
use abridge::tokens::{Calibrated, Counted, Reported};
use abridge::{Compactor, Config, Event, SnapshotId};
use abridge_store::{SnapshotStore, Store};

fn conv() -> abridge::model::Conversation {
    let bytes = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/coding-agent.openai.json"
    ))
    .unwrap();
    decode(&bytes).unwrap().remove(0)
}

/// Compaction to `target` tokens, keeping the last two iterations.
fn config(target: u64) -> Config {
    let mut config = Config::default();
    config.budget.target_tokens = Some(target);
    config.budget.min_iterations = 2;
    config
}

fn compactor() -> Compactor {
    Compactor::new(config(700)).unwrap()
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
    assert_eq!(out.report.snapshot, Some(SnapshotId(1)));
    let store = Store::open(&path).unwrap();
    let s = store.get(SnapshotId(1)).unwrap();
    assert_eq!(s.entry.source.as_deref(), Some("coding-agent"));
    assert_eq!(s.entry.tokens_before, out.report.tokens_before);
    // The stored report reloads as the same types (its own id is assigned after it is written).
    let mut want = out.report.clone();
    want.snapshot = None;
    assert_eq!(s.report, want);
    assert_eq!(s.entry.summarizer.as_deref(), Some("offline"));
    assert!(
        s.briefing
            .as_deref()
            .unwrap()
            .contains("parses_quoted_fields")
    );
    assert_eq!(s.history().unwrap().messages, original.messages);
    assert_eq!(s.config.budget.target_tokens, Some(700));
    assert_eq!(store.list(10).unwrap().len(), 1);
    assert!(matches!(
        store.get(SnapshotId(2)),
        Err(abridge_store::Error::NotFound(SnapshotId(2)))
    ));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_gemini_compaction_is_recorded_and_restored_as_gemini() {
    use abridge::model::{Family, Wire, convert_to};
    let gemini = convert_to(&conv(), Wire::Gemini).unwrap().conversation;
    let dir = std::env::temp_dir().join(format!("abridge-gemini-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("abridge.sqlite");
    let mut c = compactor();
    c.set_store(Box::new(Store::open(&path).unwrap()));
    let out = c.compact(&gemini).unwrap();
    assert_eq!(out.report.snapshot, Some(SnapshotId(1)), "{:?}", out.report);
    let s = Store::open(&path).unwrap().get(SnapshotId(1)).unwrap();
    let history = s.history().unwrap();
    assert_eq!(history.family, Family::Gemini);
    assert_eq!(history.messages, gemini.messages);
    assert_eq!(s.compacted().unwrap().family, Family::Gemini);
    // The directory, SQLite's -wal and -shm with it, once nothing holds it.
    drop((c, s));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_store_that_fails_to_write_reports_an_event_and_keeps_the_result() {
    let dir = std::env::temp_dir().join(format!("abridge-store-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bad.sqlite");
    let store = Store::open(&path).unwrap();
    // Behind its back, the table is replaced by one of another shape: inserts fail.
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch("DROP TABLE snapshots; CREATE TABLE snapshots (x INTEGER);")
        .unwrap();
    let mut c = compactor();
    c.set_store(Box::new(store));
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

/// The store written by the previous release (`tests/fixtures/v1.sqlite`,
/// see its README) opens, lists and restores after migrating.
#[test]
fn a_store_written_by_the_previous_release_opens_lists_and_restores() {
    let fixtures = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");
    let dir = std::env::temp_dir().join(format!("abridge-store-v1-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("v1.sqlite");
    std::fs::copy(format!("{fixtures}/v1.sqlite"), &path).unwrap();
    let example = |name: &str| {
        let bytes = std::fs::read(format!("{fixtures}/../../../../examples/{name}")).unwrap();
        decode(&bytes).unwrap().remove(0)
    };
    let (openai, anthropic) = (
        example("coding-agent.openai.json"),
        example("web-agent.anthropic.json"),
    );
    for _ in 0..2 {
        // Twice: the second open finds the store already migrated.
        let store = Store::open(&path).unwrap();
        let list = store.list(10).unwrap();
        let ids: Vec<i64> = list.iter().map(|e| e.id.0).collect();
        assert_eq!(ids, [5, 4, 3, 2, 1]);
        // Snapshot 1 dropped 5 iterations (its report says so; the column is filled in).
        assert_eq!(list[4].dropped_iterations, 5);
        assert_eq!(list[3].dropped_iterations, 0);
        for e in &list {
            let s = store.get(e.id).unwrap();
            let want = if e.source.as_deref().unwrap().contains("anthropic") {
                assert_eq!(e.family, abridge::model::Family::Anthropic);
                &anthropic
            } else {
                assert_eq!(e.family, abridge::model::Family::OpenAi);
                &openai
            };
            assert_eq!(
                s.history().unwrap().messages,
                want.messages,
                "snapshot {}",
                e.id
            );
            assert_eq!(s.before, abridge::model::encode(want).unwrap());
            assert_eq!(s.report.tokens_before, e.tokens_before);
            // Rows from before provider units were stored read as counted.
            let identity = abridge::Calibration::default();
            assert_eq!(e.provider_tokens_after, identity.apply(e.tokens_after));
            assert_eq!(s.report.calibration, identity);
        }
        // Snapshot 4: the LLM attempt failed (its error kept, typed), the offline sheet was used.
        let s = store.get(SnapshotId(4)).unwrap();
        assert_eq!(s.report.attempts.len(), 2);
        assert!(matches!(
            s.report.attempts[0].error(),
            Some(abridge::summarize::SummarizeError::Transport(m)) if m.contains("127.0.0.1:9")
        ));
        assert!(s.report.attempts[1].used());
        assert_eq!(s.entry.summarizer.as_deref(), Some("offline"));
        assert!(s.briefing.is_some());
    }
    // New snapshots go on from there.
    let mut c = compactor();
    c.set_store(Box::new(Store::open(&path).unwrap()));
    let original = conv();
    let out = c.compact(&original).unwrap();
    assert_eq!(out.report.snapshot, Some(SnapshotId(6)));
    std::fs::remove_dir_all(&dir).ok();
}

/// A store whose newest snapshot was deleted before the upgrade (a user's
/// `abridge prune`, or by hand) hands out a new id, not the deleted one's:
/// request-log rows that named it must not come to name another.
#[test]
fn ids_go_on_past_deleted_snapshots_across_the_upgrade() {
    let fixtures = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");
    let dir = std::env::temp_dir().join(format!("abridge-store-seq-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("v1.sqlite");
    std::fs::copy(format!("{fixtures}/v1.sqlite"), &path).unwrap();
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute("DELETE FROM snapshots WHERE id = 5", [])
        .unwrap();
    let mut c = compactor();
    c.set_store(Box::new(Store::open(&path).unwrap()));
    let history = conv();
    let out = c.compact(&history).unwrap();
    assert_eq!(out.report.snapshot, Some(SnapshotId(6)));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_store_from_a_newer_release_is_refused_with_a_clear_error() {
    let dir = std::env::temp_dir().join(format!("abridge-store-new-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("new.sqlite");
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch("PRAGMA user_version = 99;")
        .unwrap();
    let e = Store::open(&path).unwrap_err().to_string();
    assert!(e.contains("schema version 99 is newer"), "{e}");
    std::fs::remove_dir_all(&dir).ok();
}

/// The store stays within its retention: the oldest snapshots go first,
/// by age and by size, and the newest always stays.
#[test]
fn retention_keeps_the_store_bounded() {
    use abridge::StoreConfig;
    use abridge_store::SnapshotStore;
    let dir = std::env::temp_dir().join(format!("abridge-store-ret-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("r.sqlite");
    let original = conv();
    // Each snapshot of the example holds about 20 kB.
    let small = StoreConfig {
        max_megabytes: 0,
        max_age_days: 0,
    };
    for _ in 0..6 {
        let mut c = compactor();
        c.set_store(Box::new(Store::open(&path).unwrap().with_retention(small)));
        c.compact(&original).unwrap();
    }
    let mut store = Store::open(&path).unwrap();
    assert_eq!(store.list(100).unwrap().len(), 6);
    // Two snapshots made "old".
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch("UPDATE snapshots SET created_at = '2020-01-01T00:00:00.000Z' WHERE id <= 2")
        .unwrap();
    let by_age = store
        .prune(&StoreConfig {
            max_megabytes: 0,
            max_age_days: 30,
        })
        .unwrap();
    assert_eq!((by_age.removed, by_age.kept), (2, 4));
    let each = by_age.bytes / 4;
    let by_size = store
        .prune(&StoreConfig {
            max_megabytes: 0,
            max_age_days: 0,
        })
        .unwrap();
    assert_eq!(by_size.removed, 0, "no limit, nothing removed");
    assert!(each > 5_000 && each < 250_000, "{each}");
    // Large histories (about 0.5 MB a snapshot, none sharing a message)
    // under a 1 MB limit: recorded snapshots prune as they go, the newest
    // first to stay.
    let tight = StoreConfig {
        max_megabytes: 1,
        max_age_days: 30,
    };
    for seed in 0..4 {
        let big = abridge::synth::run(abridge::synth::Spec {
            iterations: 40,
            page_lines: 150,
            seed,
            ..Default::default()
        });
        let mut cfg = Config::default();
        cfg.budget.target_tokens = Some(20_000);
        cfg.budget.min_iterations = 1;
        let mut c = Compactor::new(cfg).unwrap();
        c.set_store(Box::new(Store::open(&path).unwrap().with_retention(tight)));
        assert!(c.compact(&big).unwrap().report.snapshot.is_some());
    }
    let left = store.prune(&tight).unwrap();
    assert!(left.bytes <= 1_000_000, "{left:?}");
    let ids: Vec<i64> = store.list(100).unwrap().iter().map(|e| e.id.0).collect();
    assert_eq!(ids[0], 10, "the newest stays");
    assert!(ids.len() < 8, "{ids:?}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_session_round_trips_with_its_carryover_and_version() {
    use abridge::model::{Wire, convert_to};
    // A Responses session is stored under the OpenAI family, its carried
    // prefix as Responses input (reasoning, turns and instructions intact).
    let converted = convert_to(&conv(), Wire::Responses).unwrap().conversation;
    // As a client sends it: decoded from its body.
    let body = abridge::model::encode(&converted).unwrap();
    let responses = abridge::model::decode_value(body, abridge::model::Format::Responses)
        .unwrap()
        .remove(0);
    // A Gemini session: its own family, its contents carried as contents.
    let gemini = convert_to(&conv(), Wire::Gemini).unwrap().conversation;
    for history in [conv(), responses, gemini] {
        let wire = Wire::of(history.format);
        session_round_trip(history, wire);
    }
}

fn session_round_trip(history: abridge::model::Conversation, wire: abridge::model::Wire) {
    use abridge::{Calibration, Input, PrefixKey, ThreadState};
    use abridge_store::{SessionRecord, SessionStore};

    let mut store = Store::in_memory().unwrap();
    assert!(store.load_session("s1").unwrap().is_none());
    // A briefing, so the thread keeps one as data.
    let mut config = Config::default();
    config.policies.pipeline = vec![abridge::PolicyKind::Summarize];
    config.budget.min_iterations = 1;
    let mut compactor = Compactor::new(config).unwrap();
    let out = compactor
        .turn(Input::compact_to(&history, Calibrated::new(600)).resent())
        .unwrap()
        .conversation
        .into_owned();
    compactor.set_focus(Some("the failing test".into()));
    let mut calibration = Calibration::default();
    calibration.observe(Counted::new(1000), Reported::new(1300));
    compactor.set_calibration(calibration);
    let state: ThreadState = compactor.thread().state().clone();
    assert_eq!(
        state.carryover.as_ref().unwrap().messages(),
        &out.messages[..]
    );
    let mut record = SessionRecord {
        id: "s1".into(),
        wire,
        model: history.model.clone(),
        thread: state,
        version: 0,
    };
    assert_eq!(store.save_session(&record).unwrap(), 1);
    assert_eq!(store.save_session(&record).unwrap(), 2);
    assert_eq!(store.session_version("s1").unwrap(), Some(2));
    let loaded = store.load_session("s1").unwrap().unwrap();
    assert_eq!(loaded.version, 2);
    assert_eq!(
        (&loaded.id, loaded.wire, &loaded.model),
        (&record.id, record.wire, &record.model)
    );
    assert_eq!(
        (loaded.thread.calibration, &loaded.thread.focus),
        (record.thread.calibration, &record.thread.focus)
    );
    assert_eq!(loaded.thread.compacted_at, record.thread.compacted_at);
    assert_eq!(loaded.thread.last_sent, record.thread.last_sent);
    // The briefing kept as data still names the carried message that holds
    // it, as decoded from the stored body (a chained compaction merges it).
    let kept = loaded
        .thread
        .briefing
        .as_ref()
        .expect("an offline briefing");
    assert_eq!(Some(kept), record.thread.briefing.as_ref());
    let carried = loaded.thread.carryover.as_ref().unwrap().messages();
    assert!(
        carried
            .iter()
            .any(|m| abridge::model::fingerprint(std::slice::from_ref(m)) == kept.fingerprint),
        "{wire}"
    );
    // What is sent comes back byte for byte, its turns as they were
    // (meta that is not sent, such as a briefing's mark, is not stored).
    let (a, b) = (
        loaded.thread.carryover.as_ref().unwrap(),
        record.thread.carryover.take().unwrap(),
    );
    assert_eq!((a.source(), a.tokens()), (b.source(), b.tokens()));
    assert_eq!(
        PrefixKey::of(a.messages()),
        PrefixKey::of(b.messages()),
        "{wire}"
    );
    let sent = |messages: &[abridge::model::Message]| {
        let mut c = history.clone_envelope();
        c.messages = messages.to_vec();
        (abridge::model::encode(&c).unwrap(), c.iterations())
    };
    assert_eq!(sent(a.messages()), sent(b.messages()), "{wire}");
    // The reloaded carryover still applies to the history it came from.
    assert!(loaded.thread.carryover.unwrap().applies_to(&history));
}

#[test]
fn the_request_log_keeps_each_sessions_requests_in_order() {
    use abridge_store::{RequestRecord, SessionStore, SnapshotStore};
    let dir = std::env::temp_dir().join(format!("abridge-requests-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("store.sqlite");
    let mut store = Store::open(&path).unwrap();
    let record = |source: &str, tokens: u64, usage: Option<u64>, compacted: bool| RequestRecord {
        source: source.into(),
        at: String::new(),
        model: Some("gpt-4o".into()),
        tokens: Calibrated::new(tokens),
        usage: usage.map(Reported::new),
        compacted,
        snapshot: None,
        trigger: Some(Calibrated::new(60_000)),
        target: Some(Calibrated::new(40_000)),
        recalls: u32::from(compacted) * 3,
        account: Default::default(),
    };
    for (i, t) in [10_000, 30_000, 61_000].into_iter().enumerate() {
        store
            .record_request(&record("a", t, Some(t + 100), i == 2))
            .unwrap();
    }
    store
        .record_request(&record("b", 500, None, false))
        .unwrap();
    let store = Store::open(&path).unwrap();
    let a = store.requests("a", 100).unwrap();
    assert_eq!(
        a.iter().map(|r| r.tokens.get()).collect::<Vec<_>>(),
        [10_000, 30_000, 61_000]
    );
    assert_eq!(a[2].usage, Some(Reported::new(61_100)));
    assert!(a[2].compacted && !a[0].compacted);
    assert_eq!(
        (a[2].recalls, a[0].recalls),
        (3, 0),
        "recalls kept with the request"
    );
    assert!(a[0].at.ends_with('Z') && a[0].at <= a[2].at, "{}", a[0].at);
    assert_eq!(
        store.requests("a", 2).unwrap()[0].tokens,
        Calibrated::new(30_000),
        "the newest two, oldest first"
    );
    let stats = store.request_stats().unwrap();
    assert_eq!(stats["a"].requests, 3);
    assert_eq!(stats["a"].last.tokens, Calibrated::new(61_000));
    assert_eq!(stats["b"].last.usage, None);
    std::fs::remove_dir_all(&dir).ok();
}

/// Opening a store while another connection keeps writing to it waits for
/// the writer instead of failing with "database is locked" (a proxy writes
/// its request log off the request path while the CLI or a test opens the
/// same file). A race: before the fix, a tighter variant (no pause between
/// writes, 200 opens) failed one run in three here; this one is kept fast.
#[test]
fn opening_waits_for_a_writer_instead_of_failing() {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("abridge-store-busy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("store.sqlite");
    let _ = std::fs::remove_file(&path);
    drop(Store::open(&path).unwrap());
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (path, stop) = (path.clone(), stop.clone());
        std::thread::spawn(move || {
            let conn = rusqlite::Connection::open(&path).unwrap();
            conn.busy_timeout(std::time::Duration::from_secs(5))
                .unwrap();
            conn.execute_batch("CREATE TABLE IF NOT EXISTS load (x BLOB)")
                .unwrap();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                conn.execute_batch(
                    "BEGIN IMMEDIATE; INSERT INTO load VALUES (zeroblob(65536)); DELETE FROM load; COMMIT;",
                )
                .unwrap();
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
        })
    };
    let mut store = None;
    for _ in 0..100 {
        store = Some(Store::open(&path).unwrap());
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    writer.join().unwrap();
    let store = store.unwrap();
    assert!(store.list(10).unwrap().is_empty());
    drop(store);
    std::fs::remove_dir_all(&dir).ok();
}

/// A compaction of a calibrated conversation is listed in both units: the
/// counts as abridge made them, and the same in the provider's units.
#[test]
fn entries_carry_the_provider_units_of_a_calibrated_compaction() {
    use abridge::SnapshotSink;
    use abridge_store::SnapshotStore;
    let mut c = compactor();
    let mut calibration = Calibration::default();
    calibration.observe(Counted::new(10_000), Reported::new(13_000));
    c.set_calibration(calibration);
    let store = Store::in_memory().unwrap();
    let before = conv();
    let out = c.compact(&before).unwrap();
    let data = abridge::SnapshotData {
        before: &before,
        after: &out.conversation,
        config: c.config(),
        report: &out.report,
        thread: Some("calibrated"),
        originals: &[],
    };
    store.record(&data).unwrap();
    let e = &store.list(1).unwrap()[0];
    assert_eq!(e.tokens_after, out.report.tokens_after);
    assert_eq!(e.provider_tokens_after, calibration.apply(e.tokens_after));
    assert_eq!(e.provider_tokens_before, calibration.apply(e.tokens_before));
    assert!(e.provider_tokens_after.get() > e.tokens_after.get());
}

#[test]
fn originals_are_kept_with_their_snapshot_and_recalled_by_a_new_process() {
    use abridge::StoreConfig;
    use abridge::recall::Handle;
    let dir = std::env::temp_dir().join(format!("abridge-store-orig-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("o.sqlite");
    let mut c = compactor_with(&path);
    let history = conv();
    let out = c.compact(&history).unwrap();
    let body = abridge::model::encode(&out.conversation)
        .unwrap()
        .to_string();
    let handles: Vec<Handle> = Handle::find_all(&body).collect();
    assert!(!handles.is_empty(), "{body}");
    // Another engine, no memory of this one: the store answers.
    let fresh = compactor_with(&path);
    for h in &handles {
        let a = fresh
            .engine()
            .recall(&serde_json::json!({ "handle": h.as_str() }));
        assert!(!a.is_error, "{h}: {}", a.text());
    }
    let store = Store::open(&path).unwrap();
    let o = store.original(&handles[0]).unwrap().unwrap();
    assert_eq!(o.original.handle, handles[0]);
    // The same compaction again: the originals now go with snapshot 2, and
    // pruning snapshot 1 keeps them.
    compactor_with(&path).compact(&conv()).unwrap();
    let mut store = Store::open(&path).unwrap();
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch("UPDATE snapshots SET created_at = '2020-01-01T00:00:00.000Z' WHERE id = 1")
        .unwrap();
    let age = StoreConfig {
        max_megabytes: 0,
        max_age_days: 30,
    };
    assert_eq!(store.prune(&age).unwrap().removed, 1);
    assert!(store.original(&handles[0]).unwrap().is_some());
    // Once no snapshot names them, they go too.
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch(
            "INSERT INTO snapshots (source, family, tokens_before, tokens_after, attempts, report,
                config, before_body, after_body) SELECT source, family, 1, 1, attempts, report,
                config, '{}', '{}' FROM snapshots WHERE id = 2;
             UPDATE snapshots SET created_at = '2020-01-01T00:00:00.000Z' WHERE id = 2",
        )
        .unwrap();
    assert_eq!(store.prune(&age).unwrap().removed, 1);
    assert!(store.original(&handles[0]).unwrap().is_none());
    std::fs::remove_dir_all(&dir).ok();
}

fn compactor_with(path: &std::path::Path) -> Compactor {
    let mut c = compactor();
    c.set_store(Box::new(Store::open(path).unwrap()));
    c
}

/// Compacts `conv()` on a thread named `name` (with `key`, as a shared
/// proxy's tenant) over the store at `path`; returns the handles it wrote.
fn compact_as(
    path: &std::path::Path,
    name: &str,
    key: Option<abridge::recall::HandleKey>,
) -> Vec<abridge::recall::Handle> {
    let engine = abridge::Engine::builder(config(700))
        .store(Box::new(Store::open(path).unwrap().with_source(name)))
        .build()
        .unwrap();
    let mut thread = abridge::Thread::new(&engine);
    thread.set_name(name);
    if let Some(k) = key {
        thread.set_handle_key(k);
    }
    let history = conv();
    let out = thread
        .turn(&engine, abridge::Input::compact(&history))
        .unwrap();
    let body = abridge::model::encode(&out.conversation)
        .unwrap()
        .to_string();
    abridge::recall::Handle::find_all(&body).collect()
}

#[test]
fn a_stored_original_resolves_only_in_its_scope() {
    use abridge::recall::{HandleKey, RecallScope};
    let dir = std::env::temp_dir().join(format!("abridge-store-scope-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("s.sqlite");
    let _ = std::fs::remove_file(&path);
    let (k1, k2) = (HandleKey::new([1; 32]), HandleKey::new([2; 32]));
    let keyed = compact_as(&path, "s1", Some(k1.clone()));
    let legacy = compact_as(&path, "old", None);
    assert!(!keyed.is_empty() && !legacy.is_empty());
    assert!(keyed.iter().all(|h| h.as_str().len() == 20), "{keyed:?}");
    assert!(keyed.iter().all(|h| !legacy.contains(h)));

    // A fresh engine: nothing in memory, the store answers.
    let engine = abridge::Engine::builder(Config::default())
        .store(Box::new(Store::open(&path).unwrap()))
        .build()
        .unwrap();
    let scope = |key: &HandleKey, session: &str| RecallScope {
        key: key.clone(),
        session: session.into(),
    };
    let found =
        |h: &abridge::recall::Handle, s: Option<&RecallScope>| engine.original_in(h, s).is_some();
    for h in &keyed {
        assert!(found(h, Some(&scope(&k1, "s1"))), "{h}");
        assert!(found(h, Some(&scope(&k1, "another session of the tenant"))));
        assert!(
            !found(h, Some(&scope(&k2, "s1"))),
            "another tenant read {h}"
        );
        // In memory now (read by k1 above): still not for k2.
        assert!(!found(h, Some(&scope(&k2, "s2"))));
        assert!(found(h, None), "a library user reads its own store");
    }
    // Rows of a release before keyed handles: for the session that wrote them only.
    for h in &legacy {
        assert!(found(h, Some(&scope(&k1, "old"))), "{h}");
        assert!(
            !found(h, Some(&scope(&k1, "s1"))),
            "another session read {h}"
        );
        assert!(!found(h, Some(&scope(&k2, "s2"))));
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn the_floor_sent_over_its_target_is_recorded_with_its_originals() {
    let dir = std::env::temp_dir().join(format!("abridge-store-floor-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("s.sqlite");
    let _ = std::fs::remove_file(&path);
    let mut c = Compactor::new(config(50)).unwrap();
    c.set_store(Box::new(Store::open(&path).unwrap().with_source("floor")));
    let smallest = match c.compact(&conv()) {
        Err(abridge::Error::CannotShrink {
            smallest: Some(s), ..
        }) => s,
        other => panic!("expected the floor: {other:?}"),
    };
    let body = abridge::model::encode(&smallest).unwrap().to_string();
    let handles: Vec<abridge::recall::Handle> = abridge::recall::Handle::find_all(&body).collect();
    assert!(!handles.is_empty(), "{body}");
    let store = Store::open(&path).unwrap();
    let entries = store.list(10).unwrap();
    assert_eq!(entries.len(), 1, "the floor's send is recorded");
    let snapshot = store.get(entries[0].id).unwrap();
    assert!(snapshot.report.tokens_after > snapshot.report.target.unwrap());
    // Another process (a fresh engine on the same store) answers every handle.
    let fresh = compactor_with(&path);
    for h in &handles {
        let a = fresh
            .engine()
            .recall(&serde_json::json!({ "handle": h.as_str() }));
        assert!(!a.is_error, "{h}: {}", a.text());
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// A session compacted twenty times as it grows sends the same messages
/// twenty times: its snapshots keep each once, so they take about what one
/// history takes, and each reads back as it was. Removing the old ones
/// leaves the newest whole and gives back what only they held.
#[test]
fn twenty_snapshots_of_one_session_keep_each_message_once() {
    use abridge::StoreConfig;
    use abridge::model::encode_text;
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("abridge-store-parts-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("parts.sqlite");
    let _ = std::fs::remove_file(&path);
    let full = abridge::synth::run(abridge::synth::Spec {
        iterations: 60,
        page_lines: 60,
        ..Default::default()
    });
    let its = abridge::model::iterations(&full.messages);
    let unlimited = StoreConfig {
        max_megabytes: 0,
        max_age_days: 0,
    };
    let mut histories = Vec::new();
    let mut body_bytes = 0;
    for k in 0..20 {
        let end = its[40 + k].start;
        let history = abridge::model::Conversation {
            messages: full.messages[..end].to_vec(),
            ..full.clone_envelope()
        };
        let mut cfg = Config::default();
        cfg.budget.target_tokens = Some(8_000);
        cfg.budget.min_iterations = 1;
        let mut c = Compactor::new(cfg).unwrap();
        c.set_store(Box::new(
            Store::open(&path)
                .unwrap()
                .with_source("one-session")
                .with_retention(unlimited),
        ));
        let out = c.compact(&history).unwrap();
        assert_eq!(out.report.snapshot, Some(SnapshotId(k as i64 + 1)));
        body_bytes +=
            encode_text(&history).unwrap().len() + encode_text(&out.conversation).unwrap().len();
        histories.push(history);
    }
    // An empty store's pages (its tables and indexes) are a constant, not
    // part of the ratio.
    let empty_path = dir.join("empty.sqlite");
    let _ = std::fs::remove_file(&empty_path);
    let empty = Store::open(&empty_path)
        .unwrap()
        .prune(&unlimited)
        .unwrap()
        .bytes;
    let mut store = Store::open(&path).unwrap();
    let kept = store.prune(&unlimited).unwrap();
    let one = encode_text(histories.last().unwrap()).unwrap().len() as i64;
    let conn = rusqlite::Connection::open(&path).unwrap();
    let part_bytes: i64 = conn
        .query_row("SELECT sum(length(body)) FROM parts", [], |r| r.get(0))
        .unwrap();
    assert!(
        part_bytes < one * 3 / 2,
        "the bodies of twenty snapshots keep {part_bytes} bytes (one history: {one})"
    );
    // Reports, briefings and the originals the recall tool reads aside.
    assert!(
        (kept.bytes - empty) * 3 < body_bytes as u64,
        "the store occupies {} bytes ({empty} empty) for {body_bytes} bytes of bodies",
        kept.bytes
    );
    for (k, h) in histories.iter().enumerate() {
        let s = store.get(SnapshotId(k as i64 + 1)).unwrap();
        assert_eq!(
            s.history().unwrap().messages,
            h.messages,
            "snapshot {}",
            k + 1
        );
    }
    // All but the newest made old and removed: it still reads back whole,
    // and the parts only the others held are gone.
    let parts = |c: &rusqlite::Connection| -> i64 {
        c.query_row("SELECT count(*) FROM parts", [], |r| r.get(0))
            .unwrap()
    };
    let before = parts(&conn);
    conn.execute_batch(
        "UPDATE snapshots SET created_at = '2020-01-01T00:00:00.000Z' WHERE id < 20",
    )
    .unwrap();
    let pruned = store
        .prune(&StoreConfig {
            max_megabytes: 0,
            max_age_days: 1,
        })
        .unwrap();
    assert_eq!((pruned.removed, pruned.kept), (19, 1));
    assert!(
        parts(&conn) < before,
        "the parts only old snapshots held are gone"
    );
    let newest = store.get(SnapshotId(20)).unwrap();
    assert_eq!(newest.history().unwrap().messages, histories[19].messages);
    std::fs::remove_dir_all(&dir).ok();
}

/// Sessions count toward what the store occupies: past its size the least
/// recently saved go with the oldest snapshots (one that comes back
/// compacts afresh), and past its age they go too.
#[test]
fn the_retention_removes_the_least_recently_saved_sessions_too() {
    use abridge::StoreConfig;
    use abridge::model::{Message, Role, Wire};
    use abridge_store::{SessionRecord, SessionStore, SnapshotStore};
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("abridge-store-sessions-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("sessions.sqlite");
    let _ = std::fs::remove_file(&path);
    let mut store = Store::open(&path).unwrap();
    // Sixty sessions, each carrying about 100 kB.
    for i in 0..60 {
        let carried: Vec<Message> = (0..20)
            .map(|k| Message::text(Role::User, format!("session {i} message {k} ").repeat(250)))
            .collect();
        let thread = abridge::ThreadState {
            carryover: Some(abridge::Carryover::new(
                &carried,
                carried.clone(),
                Counted::new(1),
            )),
            ..abridge::ThreadState::default()
        };
        let record = SessionRecord {
            id: format!("s{i:02}"),
            wire: Wire::Chat,
            model: None,
            thread,
            version: 0,
        };
        store.save_session(&record).unwrap();
    }
    let sessions = |c: &rusqlite::Connection| -> Vec<String> {
        let mut stmt = c.prepare("SELECT id FROM sessions ORDER BY id").unwrap();
        stmt.query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    let conn = rusqlite::Connection::open(&path).unwrap();
    assert_eq!(sessions(&conn).len(), 60);
    // The first twenty saved long ago.
    conn.execute_batch(
        "UPDATE sessions SET updated_at = '2020-01-0' || substr(id, 3, 1) || 'T00:00:00.000Z'
         WHERE id < 's20'",
    )
    .unwrap();
    let by_age = store
        .prune(&StoreConfig {
            max_megabytes: 0,
            max_age_days: 30,
        })
        .unwrap();
    assert_eq!(by_age.sessions, 20, "{by_age:?}");
    assert_eq!(sessions(&conn).first().map(String::as_str), Some("s20"));
    // Saved one after the other: the first saved go first.
    let by_size = store
        .prune(&StoreConfig {
            max_megabytes: 2,
            max_age_days: 0,
        })
        .unwrap();
    assert!(by_size.bytes <= 2_000_000, "{by_size:?}");
    let left = sessions(&conn);
    assert_eq!(by_size.sessions, 40 - left.len());
    assert!(left.len() < 40 && !left.is_empty(), "{left:?}");
    assert_eq!(
        left.last().map(String::as_str),
        Some("s59"),
        "the last saved stays"
    );
    std::fs::remove_dir_all(&dir).ok();
}
