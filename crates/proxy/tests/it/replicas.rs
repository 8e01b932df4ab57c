//! Two replicas on one PostgreSQL serve one session's requests in turn and
//! send the upstream the same prefixes; a replica restarted mid-session
//! resumes it.

use abridge::StoreConfig;
use abridge_store::{PgStore, SnapshotStore};
use abridge_testkit::{Postgres, Provider, ProviderOptions};

use crate::CONFIG;
use crate::support::{LoopLog, OpenAiAgent, proxy_for};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_on_postgres_send_the_same_prefixes() {
    let pg = match tokio::task::spawn_blocking(Postgres::start).await.unwrap() {
        Ok(pg) => pg,
        Err(why) => {
            eprintln!("skipped: {why} (.ci/run installs Debian's postgresql)");
            return;
        }
    };
    let provider = Provider::start(ProviderOptions {
        max_tokens: Some(6000),
        ..ProviderOptions::default()
    })
    .await;
    let store = || async { Some(Box::new(PgStore::connect(&pg.url).await.unwrap()) as Box<_>) };
    let a = proxy_for(&provider.url, CONFIG, store().await).await;
    let b = proxy_for(&provider.url, CONFIG, store().await).await;
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
    let b = proxy_for(&provider.url, CONFIG, store().await).await;
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
