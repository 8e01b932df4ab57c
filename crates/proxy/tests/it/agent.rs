//! What the proxy offers the agent itself under mycoder's preset: a status
//! note every few requests, and the compact tool, answered by the proxy in
//! the response's rounds (the client never sees the call), its compaction
//! carried to the client's next requests — on every API, streamed or not.

use abridge_testkit::{ProviderOptions, RequestCheck};

use crate::recall::{APIS, Api, agent_loop};
use crate::support::{metric, metrics_text, start};

const TURNS: usize = 15;

/// mycoder's preset, with a note every third request, and a window small
/// enough for the note to say the context is full by the middle of the run.
const MYCODER: &str = r#"
preset = "mycoder"
[agent]
status_every = 3
tool = "compact_history"
hint_at = 0.3
[models."fake-model"]
context_window = 20000
max_output = 2000
price = { input = 2.5, output = 10.0, cache_write = 2.5, cache_read = 0.25 }
[models."gemini-2.5-pro"]
context_window = 20000
max_output = 2000
"#;

async fn run(api: Api, stream: bool) -> (Vec<RequestCheck>, String, usize) {
    let setup = start(MYCODER, ProviderOptions::default(), None).await;
    let headers = [("x-fake-compact", "compact_history")];
    let log = agent_loop(api, &setup.proxy, TURNS, stream, &headers).await;
    let metrics = metrics_text(&setup.proxy).await;
    (setup.provider.report().requests, metrics, log.compacted)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_reads_its_status_and_compacts_its_own_history() {
    for api in APIS {
        for stream in [false, true] {
            let what = format!("{api:?}, stream {stream}");
            let (requests, metrics, compacted) = run(api, stream).await;
            for (i, r) in requests.iter().enumerate() {
                assert!(
                    r.violations.is_empty(),
                    "{what}: request {i}: {:?}",
                    r.violations
                );
                assert_eq!(r.altered_reasoning, 0, "{what}: request {i}");
            }
            // The client's requests and the rounds the proxy continued.
            let (rounds, own): (Vec<&RequestCheck>, Vec<&RequestCheck>) =
                requests.iter().partition(|r| r.compact_answer.is_some());
            assert_eq!(own.len(), TURNS, "{what}");
            // Every client request declares the tool; every third has a note.
            assert!(own.iter().all(|r| r.compact_declared), "{what}");
            let noted: Vec<usize> = (0..own.len()).filter(|&i| own[i].status_note).collect();
            let due: Vec<usize> = (0..TURNS).filter(|i| (i + 1) % 3 == 0).collect();
            assert_eq!(noted, due, "{what}");
            // Tokens of the window, and (once responses reported usage at a
            // known price) what the session has cost so far.
            let notes: Vec<&str> = own.iter().filter_map(|r| r.status.as_deref()).collect();
            assert_eq!(notes.len(), due.len(), "{what}");
            for n in &notes {
                assert!(
                    n.contains("Token Usage: ") && n.contains("/20000 ("),
                    "{what}: {n}"
                );
            }
            if !matches!(api, Api::Gemini) {
                assert!(
                    notes.iter().all(|n| n.contains("Cost So Far: $")),
                    "{what}: {notes:?}"
                );
            }
            // The model called the tool; the proxy answered it, and went on.
            assert!(!rounds.is_empty(), "{what}: the agent never compacted");
            for r in &rounds {
                let answer = r.compact_answer.as_deref().unwrap();
                assert!(answer.starts_with("History compacted:"), "{what}: {answer}");
            }
            // The client never saw a call of the tool.
            assert!(own.iter().all(|r| r.compact_calls == 0), "{what}");
            // Nothing compacts by itself: before the first call, every
            // request went whole (no compaction header, growing).
            let first = requests
                .iter()
                .position(|r| r.compact_answer.is_some())
                .unwrap();
            let before = &requests[..first];
            assert!(
                before.windows(2).all(|w| w[1].tokens > w[0].tokens),
                "{what}"
            );
            // The continued round is smaller than the request that called,
            // and so is the client's next request, which carries the briefing.
            let called = requests[first - 1].tokens;
            assert!(
                requests[first].tokens < called * 3 / 4,
                "{what}: {} vs {called}",
                requests[first].tokens
            );
            let next = &requests[first + 1];
            assert!(next.compact_answer.is_none(), "{what}");
            assert!(
                next.tokens < called * 3 / 4,
                "{what}: {} vs {called}",
                next.tokens
            );
            // Counted as a compaction, not signalled on a response header
            // of a turn that did not compact (compacted = {compacted}).
            assert!(
                metric(&metrics, "abridge_compactions_total") >= 1.0,
                "{what}: {metrics}"
            );
            assert!(compacted <= rounds.len(), "{what}");
        }
    }
}

/// The note's cadence counts a session's requests across a restart: the
/// proxy saves its sessions when it stops, and the next one goes on
/// counting from what was saved.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_cadence_outlives_a_restart() {
    use abridge_store::Store;
    use abridge_testkit::Provider;

    use crate::support::{OpenAiAgent, proxy_for};

    let dir = std::env::temp_dir().join(format!("abridge-cadence-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("store.sqlite");
    let _ = std::fs::remove_file(&path);
    let provider = Provider::start(ProviderOptions::default()).await;
    let mut agent = OpenAiAgent::new(false);
    for _ in 0..2 {
        let store = Box::new(Store::open(&path).unwrap());
        let (url, stop, done) = proxy_for(&provider.url, MYCODER, Some(store)).await;
        for _ in 0..4 {
            agent.step(&url, &[]).await;
        }
        let _ = stop.send(());
        done.await.unwrap();
    }
    let noted: Vec<usize> = provider
        .report()
        .requests
        .iter()
        .enumerate()
        .filter(|(_, r)| r.status_note)
        .map(|(i, _)| i + 1)
        .collect();
    assert_eq!(
        noted,
        [3, 6],
        "every third request of the session, restart or not"
    );
    std::fs::remove_dir_all(&dir).ok();
}
