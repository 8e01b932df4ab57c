//! Store faults: the SQLite file locked by another process, deleted, or
//! made immutable while an agent runs. Requests are answered throughout,
//! `/readyz` says the store is degraded, and once the fault clears every
//! session and snapshot made during it is in the store.

use std::path::{Path, PathBuf};
use std::time::Duration;

use abridge_store::{SessionStore, SnapshotStore, Store};
use abridge_testkit::{Provider, ProviderOptions};

use crate::CONFIG;
use crate::support::{LoopLog, OpenAiAgent, client, proxy_for};

fn store_path(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("abridge-faults-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("store.sqlite")
}

async fn status(proxy: &str, path: &str) -> (u16, String) {
    let r = client().get(format!("{proxy}{path}")).send().await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

/// `/readyz` once it says the store is degraded (within 20 s), or its last answer.
async fn degraded(proxy: &str) -> (u16, String) {
    let mut last = (0, String::new());
    for _ in 0..100 {
        last = status(proxy, "/readyz").await;
        if last.0 == 503 && last.1.starts_with("degraded") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    last
}

/// A provider and a proxy on the SQLite store at `path`.
async fn proxy_on(
    path: &Path,
) -> (
    Provider,
    String,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let provider = Provider::start(ProviderOptions::default()).await;
    let store = Store::open(path).unwrap();
    let (proxy, stop, done) = proxy_for(&provider.url, CONFIG, Some(Box::new(store))).await;
    (provider, proxy, stop, done)
}

/// Stops the proxy (it flushes its queue) and checks that the store at
/// `path` holds every snapshot `log` saw made, and its session.
async fn stop_and_check(
    stop: tokio::sync::oneshot::Sender<()>,
    done: tokio::task::JoinHandle<()>,
    path: &Path,
    log: &LoopLog,
    what: &str,
) {
    let _ = stop.send(());
    done.await.unwrap();
    assert!(path.exists(), "{what}: no store file");
    let store = Store::open(path).unwrap();
    let snapshots = store.list(10_000).unwrap().len();
    assert_eq!(snapshots, log.compacted, "{what}: a snapshot is missing");
    let session = log.sessions.first().expect("a session");
    assert!(
        store.load_session(session).unwrap().is_some(),
        "{what}: the session is missing"
    );
}

/// Steps `agent` `turns` times through `proxy`, each answered in time.
async fn steps(agent: &mut OpenAiAgent, proxy: &str, turns: usize, log: &mut LoopLog) {
    for _ in 0..turns {
        let answered = tokio::time::timeout(Duration::from_secs(5), agent.step(proxy, &[])).await;
        log.note(&answered.expect("a request waited on the store"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_locked_store_loses_nothing() {
    let path = store_path("locked");
    let (_provider, proxy, stop, done) = proxy_on(&path).await;
    // Another process takes the write lock and holds it past SQLite's own
    // wait (5 s).
    let locker = rusqlite::Connection::open(&path).unwrap();
    locker.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let mut agent = OpenAiAgent::new(false);
    let mut log = LoopLog::default();
    steps(&mut agent, &proxy, 16, &mut log).await;
    // A write fails once SQLite's own wait is over: then the store is degraded.
    let (code, text) = degraded(&proxy).await;
    assert_eq!(code, 503, "{text}");
    assert!(text.contains("degraded"), "{text}");
    let (code, _) = status(&proxy, "/healthz").await;
    assert_eq!(code, 200, "alive while degraded");
    steps(&mut agent, &proxy, 4, &mut log).await;
    locker.execute_batch("COMMIT").unwrap();
    drop(locker);
    assert!(log.compacted > 0, "compactions to store");
    stop_and_check(stop, done, &path, &log, "during the lock").await;
    std::fs::remove_dir_all(path.parent().unwrap()).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_store_file_is_made_again() {
    let path = store_path("deleted");
    let (_provider, proxy, stop, done) = proxy_on(&path).await;
    let mut agent = OpenAiAgent::new(false);
    let mut before = LoopLog::default();
    steps(&mut agent, &proxy, 10, &mut before).await;
    // Let the queued writes land, then take the file away.
    tokio::time::sleep(Duration::from_millis(500)).await;
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    let mut after = LoopLog::default();
    steps(&mut agent, &proxy, 14, &mut after).await;
    assert!(after.compacted > 0, "compactions after the deletion");
    stop_and_check(stop, done, &path, &after, "after the deletion").await;
    // The server secret went into the new file: handles outlive a restart.
    let conn = rusqlite::Connection::open(&path).unwrap();
    let secrets: i64 = conn
        .query_row(
            "SELECT count(*) FROM settings WHERE name = 'server_secret'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(secrets, 1);
    std::fs::remove_dir_all(path.parent().unwrap()).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_immutable_store_file_loses_nothing() {
    let path = store_path("immutable");
    let (_provider, proxy, stop, done) = proxy_on(&path).await;
    // The file and its write-ahead log, where SQLite writes first.
    let wal = format!("{}-wal", path.display());
    let chattr = |flag: &str| {
        std::process::Command::new("chattr")
            .args([flag, path.to_str().unwrap(), &wal])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !chattr("+i") {
        eprintln!(
            "skipped: chattr +i does not work here (needs root and a file system that has it)"
        );
        let _ = stop.send(());
        return;
    }
    let mut agent = OpenAiAgent::new(false);
    let mut log = LoopLog::default();
    steps(&mut agent, &proxy, 16, &mut log).await;
    let (code, text) = degraded(&proxy).await;
    assert!(chattr("-i"));
    assert_eq!(code, 503, "{text}");
    steps(&mut agent, &proxy, 4, &mut log).await;
    assert!(log.compacted > 0);
    stop_and_check(stop, done, &path, &log, "while immutable").await;
    std::fs::remove_dir_all(path.parent().unwrap()).ok();
}
