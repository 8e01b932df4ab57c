//! Two replicas on one PostgreSQL serve one session's requests in turn and
//! send the upstream the same prefixes; a replica restarted mid-session
//! resumes it.

use abridge_store::PgStore;
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
}
