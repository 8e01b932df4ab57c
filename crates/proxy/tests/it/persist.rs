//! Sessions in the store: a restarted proxy resumes them.

use abridge_store::{SnapshotStore, Store};
use abridge_testkit::{Provider, ProviderOptions};

use crate::CONFIG;
use crate::support::{LoopLog, OpenAiAgent, proxy_for};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_proxy_resumes_the_session_with_the_same_prefix() {
    let dir = std::env::temp_dir().join(format!("abridge-proxy-resume-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("store.sqlite");
    let _ = std::fs::remove_file(&path);
    let provider = Provider::start(ProviderOptions {
        max_tokens: Some(6000),
        ..ProviderOptions::default()
    })
    .await;

    // At least 20 turns, up to one that compacted (so the next is not due
    // to compact), then the proxy stops; the agent goes on through a new one.
    let (url, stop, done) = proxy_for(
        &provider.url,
        CONFIG,
        Some(Box::new(Store::open(&path).unwrap())),
    )
    .await;
    let mut agent = OpenAiAgent::new(false);
    let mut first = LoopLog::default();
    for turn in 0..60 {
        let before = first.compacted;
        first.note(&agent.step(&url, &[]).await);
        if turn >= 20 && first.compacted > before {
            break;
        }
    }
    assert!(first.compacted > 0);
    let _ = stop.send(());
    done.await.unwrap();

    let (url, stop, done) = proxy_for(
        &provider.url,
        CONFIG,
        Some(Box::new(Store::open(&path).unwrap())),
    )
    .await;
    let mut second = LoopLog::default();
    second.note(&agent.step(&url, &[]).await);
    let _ = stop.send(());
    done.await.unwrap();
    assert_eq!(second.sessions, first.sessions[..1]);
    let requests = provider.report().requests;
    let resumed = requests.last().unwrap();
    assert!(resumed.violations.is_empty() && !resumed.over_limit);
    assert_eq!(
        resumed.prefix_kept,
        Some(true),
        "the first request after the restart extends the last one before it"
    );

    // A proxy without the store compacts afresh: a different prefix.
    let (url, stop, done) = proxy_for(&provider.url, CONFIG, None).await;
    agent.step(&url, &[]).await;
    let _ = stop.send(());
    done.await.unwrap();
    assert_eq!(
        provider.report().requests.last().unwrap().prefix_kept,
        Some(false)
    );

    let store = Store::open(&path).unwrap();
    let entries = store.list(100).unwrap();
    assert!(!entries.is_empty());
    assert!(
        entries
            .iter()
            .all(|e| e.source.as_deref() == Some(first.sessions[0].as_str()))
    );
    std::fs::remove_dir_all(&dir).ok();
}
