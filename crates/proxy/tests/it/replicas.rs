//! Two replicas on one PostgreSQL serve one session's requests in turn and
//! send the upstream the same prefixes; a replica restarted mid-session
//! resumes it.

use abridge::StoreConfig;
use abridge_store::{PgStore, SnapshotStore};
use abridge_testkit::{Postgres, Provider, ProviderOptions};

use crate::CONFIG;
use crate::support::{LoopLog, OpenAiAgent, metric, metrics_text, proxy_for};

/// A PostgreSQL server and a provider that checks requests against 6,000
/// tokens; `None` (the test skips) where PostgreSQL is not installed.
async fn postgres_and_provider() -> Option<(std::sync::Arc<Postgres>, Provider)> {
    let pg = match tokio::task::spawn_blocking(Postgres::start).await.unwrap() {
        Ok(pg) => std::sync::Arc::new(pg),
        Err(why) => {
            eprintln!("skipped: {why} (.ci/run installs Debian's postgresql)");
            return None;
        }
    };
    let provider = Provider::start(ProviderOptions {
        max_tokens: Some(6000),
        ..ProviderOptions::default()
    })
    .await;
    Some((pg, provider))
}

/// A proxy in front of `provider` on the PostgreSQL store of `pg`.
async fn replica(
    pg: &Postgres,
    provider: &Provider,
) -> (
    String,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let store = PgStore::connect(&pg.url).await.unwrap();
    proxy_for(&provider.url, CONFIG, Some(Box::new(store))).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_on_postgres_send_the_same_prefixes() {
    let Some((pg, provider)) = postgres_and_provider().await else {
        return;
    };
    let a = replica(&pg, &provider).await;
    let b = replica(&pg, &provider).await;
    let mut agent = OpenAiAgent::new(false);
    let mut log = LoopLog::default();
    for turn in 0..40 {
        let proxy = if turn % 2 == 0 { &a.0 } else { &b.0 };
        log.note(&agent.step(proxy, &[]).await);
    }
    let requests = provider.report().requests;
    assert!(log.compacted > 0);
    assert!(
        requests
            .iter()
            .all(|r| r.violations.is_empty() && !r.over_limit)
    );
    let breaks = requests
        .iter()
        .filter(|r| r.prefix_kept == Some(false))
        .count();
    assert!(
        breaks <= log.compacted,
        "{breaks} prefix changes for {} compactions",
        log.compacted
    );
    assert!(
        log.sessions.iter().all(|s| *s == log.sessions[0]),
        "one session on both replicas"
    );

    // Replica B restarts mid-session; requests go on alternating.
    let _ = b.1.send(());
    b.2.await.unwrap();
    let b = replica(&pg, &provider).await;
    for turn in 0..8 {
        let before = log.compacted;
        let proxy = if turn % 2 == 0 { &b.0 } else { &a.0 };
        log.note(&agent.step(proxy, &[]).await);
        let last = provider.report().requests.last().unwrap().clone();
        assert!(last.violations.is_empty() && !last.over_limit);
        if log.compacted == before {
            assert_eq!(
                last.prefix_kept,
                Some(true),
                "turn {turn} after the restart kept the prefix"
            );
        }
    }
    for s in [a.1, b.1] {
        let _ = s.send(());
    }

    // Both replicas' compactions are in the shared store, under the session's id.
    let mut store = PgStore::connect(&pg.url).await.unwrap();
    let session = log.sessions[0].clone();
    let compactions = log.compacted;
    tokio::task::spawn_blocking(move || {
        let entries = store.list(usize::MAX).unwrap();
        assert_eq!(entries.len(), compactions, "one snapshot per compaction");
        // Both replicas logged their requests in the shared request log.
        let mut logged = Vec::new();
        for _ in 0..100 {
            logged = store.requests(&session, usize::MAX).unwrap();
            if logged.len() == 48 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert_eq!(
            logged.len(),
            48,
            "one row per request (40, then 8 after the restart)"
        );
        assert_eq!(
            logged.iter().filter(|r| r.snapshot.is_some()).count(),
            compactions
        );
        assert!(
            logged
                .iter()
                .all(|r| r.usage.is_some() && r.at.ends_with('Z')),
            "{logged:?}"
        );
        assert_eq!(store.request_stats().unwrap()[&session].requests, 48);
        assert!(
            entries
                .iter()
                .all(|e| e.source.as_deref() == Some(session.as_str()))
        );
        let newest = store.get(entries[0].id).unwrap();
        assert_eq!(newest.report.tokens_after, entries[0].tokens_after);
        assert!(newest.report.compacted && newest.history().is_ok());
        let pruned = store
            .prune(&StoreConfig {
                max_megabytes: 0,
                max_age_days: 0,
            })
            .unwrap();
        assert_eq!((pruned.removed, pruned.kept), (0, compactions));
        // A 1 MB retention keeps the newest snapshots that fit, at least one.
        let pruned = store
            .prune(&StoreConfig {
                max_megabytes: 1,
                max_age_days: 0,
            })
            .unwrap();
        assert!(pruned.bytes <= 1_000_000 || pruned.kept == 1, "{pruned:?}");
        assert_eq!(pruned.removed + pruned.kept, compactions);
        assert_eq!(
            store.list(1000).unwrap()[0].id,
            entries[0].id,
            "the newest stays"
        );
    })
    .await
    .unwrap();
}

/// Four agents' sessions on two replicas sharing PostgreSQL, whose server is
/// stopped (`SIGSTOP`, postmaster and backends) for 5 seconds mid-run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_database_stalls_no_request_and_the_sessions_are_saved_after() {
    use std::time::{Duration, Instant};

    let Some((pg, provider)) = postgres_and_provider().await else {
        return;
    };
    let replicas = [replica(&pg, &provider).await, replica(&pg, &provider).await];
    let names = ["s0", "s1", "s2", "s3"];
    let mut agents: Vec<OpenAiAgent> = names.iter().map(|_| OpenAiAgent::new(false)).collect();
    let mut logs: Vec<LoopLog> = names.iter().map(|_| LoopLog::default()).collect();
    let headers = |k: usize| {
        [
            ("x-abridge-session", names[k]),
            ("x-fake-session", names[k]),
        ]
    };

    // Before: each session alternates replicas; the slowest request is the baseline.
    let mut baseline = Duration::ZERO;
    for turn in 0..8 {
        for k in 0..agents.len() {
            let proxy = &replicas[(turn + k) % 2].0;
            let t = Instant::now();
            logs[k].note(&agents[k].step(proxy, &headers(k)).await);
            baseline = baseline.max(t.elapsed());
        }
    }

    // The database stops for 5 s; each session keeps to one replica meanwhile.
    let paused = pg.clone();
    tokio::task::spawn_blocking(move || paused.pause().unwrap())
        .await
        .unwrap();
    let stopped = Instant::now();
    let mut during = (0, Duration::ZERO);
    while stopped.elapsed() < Duration::from_secs(5) {
        for k in 0..agents.len() {
            let t = Instant::now();
            logs[k].note(&agents[k].step(&replicas[k % 2].0, &headers(k)).await);
            during = (during.0 + 1, during.1.max(t.elapsed()));
        }
    }
    let resumed = pg.clone();
    tokio::task::spawn_blocking(move || resumed.resume().unwrap())
        .await
        .unwrap();
    assert!(during.0 >= 8, "{} requests during the pause", during.0);
    assert!(
        during.1 <= baseline + Duration::from_secs(1),
        "slowest request during the pause {:?}, before it {baseline:?}",
        during.1
    );
    for k in 0..agents.len() {
        logs[k].note(&agents[k].step(&replicas[k % 2].0, &headers(k)).await);
    }
    // Stopping flushes each replica's queued writes.
    for (_, stop, done) in replicas {
        let _ = stop.send(());
        done.await.unwrap();
    }

    // Every compaction's snapshot is in the store, those made during the pause too.
    let compactions: usize = logs.iter().map(|l| l.compacted).sum();
    let check = PgStore::connect(&pg.url).await.unwrap();
    let snapshots = tokio::task::spawn_blocking(move || check.list(usize::MAX).unwrap().len())
        .await
        .unwrap();
    assert_eq!(snapshots, compactions, "one snapshot per compaction");

    // A new replica takes every session up where it was: its stored state
    // is the latest, so the next request extends the last one sent.
    let c = replica(&pg, &provider).await;
    for k in 0..agents.len() {
        let before = logs[k].compacted;
        logs[k].note(&agents[k].step(&c.0, &headers(k)).await);
        let last = provider.report().requests.last().unwrap().clone();
        assert!(last.violations.is_empty() && !last.over_limit, "{last:?}");
        if logs[k].compacted == before {
            assert_eq!(
                last.prefix_kept,
                Some(true),
                "session {k} resumed from the store"
            );
        }
    }
    let _ = c.1.send(());
    c.2.await.unwrap();
    let requests = provider.report().requests;
    assert!(
        requests
            .iter()
            .all(|r| r.violations.is_empty() && !r.over_limit)
    );
    for (k, log) in logs.iter().enumerate() {
        assert!(log.compacted > 0, "session {k} compacted");
        assert!(log.sessions.iter().all(|s| *s == log.sessions[0]));
    }
    eprintln!(
        "database stopped 5 s: {} requests answered, slowest {:?} (before: {baseline:?})",
        during.0, during.1
    );
}

/// A save stuck behind a lock another client holds on the sessions table
/// holds up no read: the replica's reads (each request's version check)
/// run on threads and pooled connections of their own, beside the stuck
/// write, and are answered; the saves queue and land once the lock goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_save_stuck_on_a_lock_holds_up_no_read() {
    use std::time::{Duration, Instant};

    let Some((pg, provider)) = postgres_and_provider().await else {
        return;
    };
    let store = Some(Box::new(PgStore::connect(&pg.url).await.unwrap()) as Box<_>);
    let (proxy, stop, done) = proxy_for(&provider.url, CONFIG, store).await;
    let names = ["s0", "s1"];
    let mut agents: Vec<OpenAiAgent> = names.iter().map(|_| OpenAiAgent::new(false)).collect();
    let mut logs: Vec<LoopLog> = names.iter().map(|_| LoopLog::default()).collect();
    let headers = |k: usize| {
        [
            ("x-abridge-session", names[k]),
            ("x-fake-session", names[k]),
        ]
    };
    // Until both sessions have compacted (and so been saved) once.
    while logs.iter().any(|l| l.compacted == 0) {
        for k in 0..agents.len() {
            logs[k].note(&agents[k].step(&proxy, &headers(k)).await);
        }
    }
    // Writes wait on the lock; plain reads do not.
    let held = {
        let pg = pg.clone();
        tokio::task::spawn_blocking(move || {
            pg.hold("LOCK TABLE abridge_sessions IN EXCLUSIVE MODE")
        })
        .await
        .unwrap()
        .unwrap()
    };
    let timeouts = |text: &str, op: &str| {
        metric(
            text,
            &format!("abridge_store_timeouts_total{{op=\"{op}\"}}"),
        )
    };
    let before = metrics_text(&proxy).await;
    let compacted = logs.iter().map(|l| l.compacted).sum::<usize>();
    let start = Instant::now();
    let mut slowest = Duration::ZERO;
    while logs.iter().map(|l| l.compacted).sum::<usize>() < compacted + 2 {
        for k in 0..agents.len() {
            let t = Instant::now();
            logs[k].note(&agents[k].step(&proxy, &headers(k)).await);
            slowest = slowest.max(t.elapsed());
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no compaction while locked"
        );
    }
    let during = metrics_text(&proxy).await;
    tokio::task::spawn_blocking(move || held.release().unwrap())
        .await
        .unwrap();
    assert!(
        timeouts(&during, "write") > timeouts(&before, "write"),
        "the saves waited on the lock"
    );
    assert_eq!(
        timeouts(&during, "read"),
        timeouts(&before, "read"),
        "no read waited on the stuck save"
    );
    assert!(
        slowest < Duration::from_secs(1),
        "slowest request {slowest:?}"
    );
    // Stopping flushes what was queued: every compaction's snapshot is stored.
    let _ = stop.send(());
    done.await.unwrap();
    let check = PgStore::connect(&pg.url).await.unwrap();
    let snapshots = tokio::task::spawn_blocking(move || check.list(usize::MAX).map(|l| l.len()))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(snapshots, logs.iter().map(|l| l.compacted).sum::<usize>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_answers_the_recall_of_an_original_another_one_kept() {
    let Some((pg, provider)) = postgres_and_provider().await else {
        return;
    };
    let a = replica(&pg, &provider).await;
    let b = replica(&pg, &provider).await;
    let mut agent = OpenAiAgent::new(false);
    let mut log = LoopLog::default();
    let recall = [("x-fake-recall", "alone")];
    for turn in 0..24 {
        let proxy = if turn % 2 == 0 { &a.0 } else { &b.0 };
        log.note(&agent.step(proxy, &recall).await);
    }
    assert!(log.compacted > 0);
    let requests = provider.report().requests;
    let answered: Vec<&String> = requests.iter().flat_map(|r| &r.recalled).collect();
    // Each replica answered (the one that did not compact has the
    // originals only in the database), and every answer found its original.
    assert!(answered.len() >= 2, "{answered:?}");
    assert!(
        answered.iter().all(|t| !t.contains("no original is kept")),
        "{answered:?}"
    );
    let found = "abridge_recalls_total{outcome=\"found\"}";
    let (ma, mb) = (metrics_text(&a.0).await, metrics_text(&b.0).await);
    assert!(metric(&ma, found) >= 1.0 && metric(&mb, found) >= 1.0);
    // And some of them only the database had.
    let from_store = "abridge_recall_store_reads_total{outcome=\"found\"}";
    assert!(
        metric(&ma, from_store) + metric(&mb, from_store) >= 1.0,
        "{ma}\n{mb}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_key_reads_no_original_on_any_replica() {
    use crate::tenants::{
        APIS, assert_kept, assert_refused, handles, key_header, recall_as, run_loop,
    };
    let Some((pg, provider)) = postgres_and_provider().await else {
        return;
    };
    let a = replica(&pg, &provider).await;
    let b = replica(&pg, &provider).await;
    for api in APIS {
        let what = format!("{api:?}, two replicas");
        let auth = key_header(api);
        let seen = provider.report().requests.len();
        let own = [(auth, "Bearer key-A"), ("x-fake-recall", "alone")];
        run_loop(api, &a.0, true, &own).await;
        let target = handles(&provider.report(), seen)
            .into_iter()
            .next()
            .expect("A's history names handles");
        // B's key, on the replica that did not make the handle (it reads
        // the shared database) and on the one that did (its memory).
        for proxy in [&b.0, &a.0] {
            let got = recall_as(api, proxy, &provider, "Bearer key-B", &target).await;
            assert_refused(&got, &target, &what);
        }
        // A's key on the other replica: found (the replicas share the secret).
        let got = recall_as(api, &b.0, &provider, "Bearer key-A", &target).await;
        assert_kept(&got, &target, &what);
    }
}

/// A store made before Gemini held only OpenAI and Anthropic sessions (a
/// CHECK on the family): connecting widens it, and a Gemini session's
/// state is saved like any other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_from_before_gemini_keeps_gemini_sessions() {
    let Some((pg, provider)) = postgres_and_provider().await else {
        return;
    };
    let old = "CREATE TABLE abridge_sessions (
        id TEXT PRIMARY KEY,
        family TEXT NOT NULL CHECK (family IN ('openai', 'anthropic')),
        model TEXT, source_len BIGINT, source_fingerprint BIGINT, tokens BIGINT, body TEXT,
        calibration TEXT NOT NULL, version BIGINT NOT NULL DEFAULT 0,
        updated_at TIMESTAMPTZ NOT NULL DEFAULT now())";
    pg.psql(old).unwrap();
    let (url, stop, done) = replica(&pg, &provider).await;
    let log = crate::gemini::gemini_loop(&url, 16, "whole", &[]).await;
    assert!(log.compacted > 0);
    let count = "SELECT count(*) FROM abridge_sessions WHERE family = 'gemini'";
    let mut saved = String::new();
    for _ in 0..100 {
        saved = pg.psql(count).unwrap();
        if saved != "0" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(saved, "1", "the Gemini session was not saved");
    let _ = stop.send(());
    let _ = done.await;
}
