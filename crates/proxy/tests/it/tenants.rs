//! One proxy, several keys, played as an attacker would: key B's model
//! calls the recall tool with a handle key A's compaction made (it read it
//! somewhere, or guessed one), on each API, streamed and whole, live and
//! after a restart, under the session name A uses. B must get what a
//! handle nobody kept gets, and A must still get its original.

use std::collections::BTreeSet;

use abridge_testkit::{ProviderOptions, ProviderReport};

use crate::CONFIG;
use crate::responses::responses_loop;
use crate::support::{LoopLog, anthropic_loop, file_content, openai_loop, proxy_for, start};

const TURNS: usize = 14;

#[derive(Clone, Copy, Debug)]
pub(crate) enum Api {
    Chat,
    Anthropic,
    Responses,
}

pub(crate) const APIS: [Api; 3] = [Api::Chat, Api::Anthropic, Api::Responses];

pub(crate) async fn run_loop(
    api: Api,
    proxy: &str,
    stream: bool,
    headers: &[(&str, &str)],
) -> LoopLog {
    match api {
        Api::Chat => openai_loop(proxy, TURNS, stream, headers).await,
        Api::Anthropic => anthropic_loop(proxy, TURNS, stream, headers).await,
        Api::Responses => responses_loop(proxy, TURNS, stream, headers).await,
    }
}

/// The credential header of each API, for a key.
pub(crate) fn key_header(api: Api) -> &'static str {
    match api {
        Api::Anthropic => "x-api-key",
        Api::Chat | Api::Responses => "authorization",
    }
}

/// Every handle the requests from `from` on named.
pub(crate) fn handles(report: &ProviderReport, from: usize) -> BTreeSet<String> {
    report.requests[from..]
        .iter()
        .flat_map(|r| r.handles.iter().cloned())
        .collect()
}

/// The answers to the recall calls the proxy continued with, from `from` on.
pub(crate) fn answers(report: &ProviderReport, from: usize) -> Vec<String> {
    report.requests[from..]
        .iter()
        .flat_map(|r| r.recalled.iter().cloned())
        .collect()
}

/// What the recall tool answers for a handle nobody kept.
pub(crate) fn unknown_answer(handle: &str) -> String {
    format!(
        "abridge_recall: no original is kept for {handle}: the handle is unknown or its original \
         has expired. Work from the briefing and the current state of the files instead."
    )
}

/// Checks that each answer B got is the one a never-kept handle gets.
pub(crate) fn assert_refused(answers: &[String], handle: &str, what: &str) {
    assert!(!answers.is_empty(), "{what}: B's model never recalled");
    for a in answers {
        assert_eq!(a, &unknown_answer(handle), "{what}: B read A's original");
    }
}

/// The answers a loop of `key`'s, whose model recalls `handle` before each
/// step, got through `proxy`.
pub(crate) async fn recall_as(
    api: Api,
    proxy: &str,
    provider: &abridge_testkit::Provider,
    key: &str,
    handle: &str,
) -> Vec<String> {
    let seen = provider.report().requests.len();
    let headers = [
        (key_header(api), key),
        ("x-fake-recall", "alone"),
        ("x-fake-recall-handle", handle),
    ];
    run_loop(api, proxy, false, &headers).await;
    answers(&provider.report(), seen)
}

/// Checks that the owner of `handle` still reads what it names.
pub(crate) fn assert_kept(answers: &[String], handle: &str, what: &str) {
    assert!(!answers.is_empty(), "{what}: the model never recalled");
    for answer in answers {
        assert_ne!(
            answer,
            &unknown_answer(handle),
            "{what}: the owner lost its original"
        );
        assert!(answer.len() > 200, "{what}: {answer}");
    }
}

/// Checks that A got its original back.
pub(crate) fn assert_found(answers: &[String], what: &str) {
    assert!(!answers.is_empty(), "{what}: A's model never recalled");
    assert!(
        answers
            .iter()
            .all(|a| (0..TURNS).any(|k| a.contains(&file_content(k)))),
        "{what}: A did not get its original: {answers:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_key_never_reads_an_original_live() {
    for api in APIS {
        for stream in [false, true] {
            let what = format!("{api:?}, stream {stream}");
            let setup = start(CONFIG, ProviderOptions::default(), None).await;
            let auth = key_header(api);
            // Both clients name their session alike: still two sessions.
            let a = [
                (auth, "Bearer key-A"),
                ("x-abridge-session", "team"),
                ("x-fake-recall", "alone"),
            ];
            let log_a = run_loop(api, &setup.proxy, stream, &a).await;
            let report = setup.provider.report();
            assert!(log_a.compacted > 0, "{what}");
            assert_found(&answers(&report, 0), &what);
            let stolen = handles(&report, 0);
            let target = stolen
                .iter()
                .next()
                .expect("A's history names handles")
                .clone();
            assert_eq!(
                target.len(),
                "abr_".len() + 16,
                "{what}: keyed handles are long"
            );

            let seen = report.requests.len();
            let b = [
                (auth, "Bearer key-B"),
                ("x-abridge-session", "team"),
                ("x-fake-recall", "alone"),
                ("x-fake-recall-handle", target.as_str()),
            ];
            let log_b = run_loop(api, &setup.proxy, stream, &b).await;
            let report = setup.provider.report();
            assert_refused(&answers(&report, seen), &target, &what);
            // B's compactions name its own handles, none of A's, although
            // both read the same files (its model's calls name the one it tried).
            let mut own = handles(&report, seen);
            own.remove(&target);
            assert!(
                !own.is_empty() && own.is_disjoint(&stolen),
                "{what}: B's history holds A's handles"
            );
            let (sa, sb): (BTreeSet<_>, BTreeSet<_>) = (
                log_a.sessions.into_iter().collect(),
                log_b.sessions.into_iter().collect(),
            );
            assert!(sa.is_disjoint(&sb), "{what}: one session for two keys");

            // A guessed handle of the right shape gets the same answer.
            let guess = "abr_0123456789abcdef";
            let seen = report.requests.len();
            let b = [
                (auth, "Bearer key-B"),
                ("x-fake-recall", "alone"),
                ("x-fake-recall-handle", guess),
            ];
            run_loop(api, &setup.proxy, stream, &b).await;
            assert_refused(&answers(&setup.provider.report(), seen), guess, &what);
            setup.stop().await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_key_never_reads_an_original_after_a_restart() {
    use abridge_store::Store;
    let dir = std::env::temp_dir().join(format!("abridge-tenants-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for api in APIS {
        let what = format!("{api:?}, after a restart");
        let path = dir.join(format!("{api:?}.sqlite"));
        let _ = std::fs::remove_file(&path);
        let setup = start(
            CONFIG,
            ProviderOptions::default(),
            Some(Box::new(Store::open(&path).unwrap())),
        )
        .await;
        let auth = key_header(api);
        let a = [(auth, "Bearer key-A"), ("x-fake-recall", "alone")];
        run_loop(api, &setup.proxy, true, &a).await;
        let target = handles(&setup.provider.report(), 0)
            .into_iter()
            .next()
            .expect("A's history names handles");
        let provider = setup.stop().await;

        // A new process on the same store: memory is empty, the store answers.
        let (proxy, stop, done) = proxy_for(
            &provider.url,
            CONFIG,
            Some(Box::new(Store::open(&path).unwrap())),
        )
        .await;
        let got = recall_as(api, &proxy, &provider, "Bearer key-B", &target).await;
        assert_refused(&got, &target, &what);
        // A, after the restart, still reads it: the secret was kept.
        let got = recall_as(api, &proxy, &provider, "Bearer key-A", &target).await;
        assert_kept(&got, &target, &what);
        let _ = stop.send(());
        let _ = done.await;
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_naming_the_same_session_each_get_their_own_live_and_after_a_restart() {
    use crate::support::{LoopLog, OpenAiAgent};
    use abridge_store::Store;
    let dir = std::env::temp_dir().join(format!("abridge-named-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("store.sqlite");
    let _ = std::fs::remove_file(&path);
    // B has its own key; C sends A's key in another header, which makes
    // another tenant too (the route table's headers are told apart).
    let clients = [
        ("authorization", "Bearer key-A", "a"),
        ("authorization", "Bearer key-B", "b"),
        ("api-key", "Bearer key-A", "c"),
    ];
    let headers = |(h, k, fake): (&'static str, &'static str, &'static str)| {
        [
            (h, k),
            ("x-abridge-session", "shared"),
            ("x-fake-session", fake),
        ]
    };
    let mut agents: Vec<OpenAiAgent> = clients.iter().map(|_| OpenAiAgent::new(false)).collect();
    let mut logs: Vec<LoopLog> = clients.iter().map(|_| LoopLog::default()).collect();
    let setup = start(
        CONFIG,
        ProviderOptions::default(),
        Some(Box::new(Store::open(&path).unwrap())),
    )
    .await;
    // Interleaved, as agents sharing a proxy send.
    for _ in 0..TURNS {
        for (i, c) in clients.iter().enumerate() {
            logs[i].note(&agents[i].step(&setup.proxy, &headers(*c)).await);
        }
    }
    let provider = setup.stop().await;
    let (proxy, stop, done) = proxy_for(
        &provider.url,
        CONFIG,
        Some(Box::new(Store::open(&path).unwrap())),
    )
    .await;
    for _ in 0..2 {
        for (i, c) in clients.iter().enumerate() {
            logs[i].note(&agents[i].step(&proxy, &headers(*c)).await);
        }
    }
    let _ = stop.send(());
    let _ = done.await;

    let ids: BTreeSet<&String> = logs.iter().map(|l| &l.sessions[0]).collect();
    assert_eq!(ids.len(), clients.len(), "{ids:?}");
    for (l, c) in logs.iter().zip(clients) {
        // One session each, kept across the restart.
        assert_eq!(l.sessions.len(), TURNS + 2, "{c:?}");
        assert!(
            l.sessions.iter().all(|s| s == &l.sessions[0]),
            "{c:?}: {:?}",
            l.sessions
        );
    }
    // Each went as it would alone: the same compactions, every request valid.
    assert!(logs[0].compacted > 0);
    assert!(
        logs.iter().all(|l| l.compacted == logs[0].compacted),
        "{:?}",
        logs.iter().map(|l| l.compacted).collect::<Vec<_>>()
    );
    let report = provider.report();
    assert!(report.requests.iter().all(|r| r.violations.is_empty()));
    std::fs::remove_dir_all(&dir).ok();
}
