//! What sessions hold in memory between requests stays within `[serve]
//! session_memory_megabytes`: past it, the least recently used sessions
//! drop their last body and their next request is decoded whole.

use abridge_proxy::ProxyConfig;
use abridge_testkit::{Mock, openai_ok, openai_ok_reporting};
use serde_json::{Value, json};

use crate::support::{client, file_content, metric, metrics_text, serve_config};

/// Exchanges in a session's first request: about 0.47 MB held, so two
/// sessions fit a 1 MB budget and three do not.
const TURNS: usize = 180;

/// A history of `turns` ~1.7 KB exchanges, different per session.
fn history(session: &str, turns: usize) -> Vec<Value> {
    let mut m = vec![json!({"role": "system", "content": format!("Session {session}.")})];
    for t in 0..turns {
        m.push(json!({"role": "user", "content": file_content(t)}));
        m.push(json!({"role": "assistant", "content": format!("noted {t}")}));
    }
    m
}

async fn send(proxy: &str, key: &str, messages: &[Value]) {
    let r = client()
        .post(format!("{proxy}/v1/chat/completions"))
        .bearer_auth(key)
        .json(&json!({"model": "local-model", "messages": messages}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}

/// (decoded whole, decoded from what was added, bytes held).
async fn counts(proxy: &str) -> (f64, f64, f64) {
    let m = metrics_text(proxy).await;
    (
        metric(&m, r#"abridge_decoded_total{part="whole"}"#),
        metric(&m, r#"abridge_decoded_total{part="added"}"#),
        metric(&m, "abridge_session_memory_bytes"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_past_the_memory_budget_drop_the_oldest_bodies_and_keep_working() {
    let upstream = Mock::serve(|_| Some(openai_ok("ok")));
    let mut config = ProxyConfig::from_toml("[trigger]\nmax_tokens = 10000000\n").unwrap();
    config.serve.openai_upstream = format!("{}/v1", upstream.url);
    config.serve.session_memory_megabytes = 1;
    let budget = (1 << 20) as f64;
    let (proxy, stop, done) = serve_config(config, None).await;

    // Session a: its next request decodes only what it added.
    let mut a = history("a", TURNS);
    send(&proxy, "sk-a", &a).await;
    a.extend(history("a", TURNS + 1).split_off(1 + 2 * TURNS));
    send(&proxy, "sk-a", &a).await;
    let (whole, added, held) = counts(&proxy).await;
    assert_eq!((whole, added), (1.0, 1.0));
    assert!(held > 0.4 * budget && held <= 0.5 * budget, "{held}");

    // Two more such sessions: together over 1 MB, so a (the oldest) drops its body.
    for key in ["sk-b", "sk-c"] {
        send(&proxy, key, &history(key, TURNS)).await;
        let (_, _, held) = counts(&proxy).await;
        assert!(
            held <= budget,
            "{held} bytes held over a budget of {budget}"
        );
    }
    a.extend(history("a", TURNS + 2).split_off(3 + 2 * TURNS));
    send(&proxy, "sk-a", &a).await;
    let (whole, added, held) = counts(&proxy).await;
    assert_eq!(
        (whole, added),
        (4.0, 1.0),
        "a's next request is decoded whole"
    );
    assert!(held <= budget);

    // c, among the most recent, still takes the fast path.
    let mut c = history("sk-c", TURNS);
    c.extend(history("sk-c", TURNS + 1).split_off(1 + 2 * TURNS));
    send(&proxy, "sk-c", &c).await;
    let (_, added, _) = counts(&proxy).await;
    assert_eq!(added, 2.0);
    let _ = stop.send(());
    let _ = done.await;
}

/// Bodies compacted at once stay within `[serve] max_preparing_megabytes`:
/// past it requests wait their turn (and all are served), a body larger
/// than the whole budget is compacted alone, and the room is given back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_past_the_preparing_budget_wait_their_turn_and_all_are_compacted() {
    let upstream = Mock::serve(|_| Some(openai_ok("ok")));
    let mut config = ProxyConfig::from_toml("[trigger]\nmax_tokens = 20000\n").unwrap();
    config.serve.openai_upstream = format!("{}/v1", upstream.url);
    config.serve.max_preparing_megabytes = 1;
    let (proxy, stop, done) = serve_config(config, None).await;

    // Six sessions of about 0.47 MB at once: two fit the budget together.
    let sent: Vec<_> = (0..6)
        .map(|s| {
            let (proxy, key) = (proxy.clone(), format!("sk-{s}"));
            tokio::spawn(async move { send(&proxy, &key, &history(&key, TURNS)).await })
        })
        .collect();
    for s in sent {
        s.await.unwrap();
    }
    // One of about 1.2 MB: larger than the budget, compacted alone.
    send(&proxy, "sk-big", &history("sk-big", 350)).await;

    let seen = upstream.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 7);
    for s in &seen {
        let n = s.body["messages"].as_array().map_or(0, Vec::len);
        assert!(n < 2 * TURNS, "a history of {n} messages went out whole");
    }
    let m = metrics_text(&proxy).await;
    assert_eq!(metric(&m, "abridge_preparing_bytes"), 0.0, "{m}");
    assert_eq!(metric(&m, "abridge_busy_total"), 0.0);
    let _ = stop.send(());
    let _ = done.await;
}

/// A session that compacted holds only what its carried compaction does
/// not cover: its next requests still decode only what they add, and what
/// goes upstream is what a proxy that holds nothing between requests
/// sends (it decodes every request whole, and its sessions leave memory
/// for its store after each).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compacted_session_holds_only_what_its_compaction_does_not_cover() {
    let upstream = Mock::serve(|_| Some(openai_ok("ok")));
    let config = |memory| {
        let mut c = ProxyConfig::from_toml("[trigger]\nmax_tokens = 20000\n").unwrap();
        c.serve.openai_upstream = format!("{}/v1", upstream.url);
        c.serve.session_memory_megabytes = memory;
        c
    };
    let store = abridge_store::Store::in_memory().unwrap();
    let (kept, stop_kept, done_kept) = serve_config(config(64), None).await;
    let (whole, stop_whole, done_whole) = serve_config(config(0), Some(Box::new(store))).await;
    let mut a = history("a", TURNS);
    let mut compactions = 0.0;
    for turns in TURNS..TURNS + 40 {
        let grown = history("a", turns + 1);
        if turns > TURNS {
            a.extend_from_slice(&grown[a.len()..]);
        }
        send(&kept, "sk-a", &a).await;
        send(&whole, "sk-a", &a).await;
        let seen = upstream.seen.lock().unwrap().clone();
        let (x, y) = (&seen[seen.len() - 2], &seen[seen.len() - 1]);
        assert_eq!(x.body, y.body, "request of {turns} turns");
        compactions = metric(&metrics_text(&kept).await, "abridge_compactions_total{");
        let body: usize = a.iter().map(|m| m.to_string().len()).sum();
        // What was added since the last compaction (under the 20,000-token
        // trigger), not the whole history.
        let (_, _, held) = counts(&kept).await;
        assert!(
            held < body as f64 / 4.0,
            "{held} bytes held of a {body}-byte history"
        );
    }
    assert!(compactions >= 2.0, "{compactions} compactions");
    let (whole_kept, added_kept, _) = counts(&kept).await;
    assert_eq!((whole_kept, added_kept), (1.0, 39.0));
    let (whole_whole, added_whole, _) = counts(&whole).await;
    assert_eq!((whole_whole, added_whole), (40.0, 0.0));
    for (stop, done) in [(stop_kept, done_kept), (stop_whole, done_whole)] {
        let _ = stop.send(());
        let _ = done.await;
    }
}

/// After a restart, a session whose stored compaction still applies holds
/// only what that compaction does not cover, from its first request on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_session_holds_only_what_its_stored_compaction_does_not_cover() {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("abridge-proxy-held-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("store.sqlite");
    let _ = std::fs::remove_file(&path);
    let upstream = Mock::serve(|_| Some(openai_ok("ok")));
    let start = || {
        let mut c = ProxyConfig::from_toml("[trigger]\nmax_tokens = 20000\n").unwrap();
        c.serve.openai_upstream = format!("{}/v1", upstream.url);
        let store = abridge_store::Store::open(&path).unwrap();
        serve_config(c, Some(Box::new(store)))
    };
    let (proxy, stop, done) = start().await;
    let mut a = history("a", TURNS);
    send(&proxy, "sk-a", &a).await;
    assert_eq!(
        metric(&metrics_text(&proxy).await, "abridge_compactions_total{"),
        1.0
    );
    let _ = stop.send(());
    let _ = done.await;

    // Three turns later, on a new proxy: decoded whole, the stored
    // compaction applies (up to before the newest messages), nothing is
    // compacted, and little is held.
    let (proxy, stop, done) = start().await;
    a.extend_from_slice(&history("a", TURNS + 3)[a.len()..]);
    send(&proxy, "sk-a", &a).await;
    let m = metrics_text(&proxy).await;
    assert_eq!(metric(&m, "abridge_compactions_total{"), 0.0, "{m}");
    let body: usize = a.iter().map(|m| m.to_string().len()).sum();
    let (whole, _, held) = counts(&proxy).await;
    assert_eq!(whole, 1.0);
    // The newest messages, and the carried compaction itself (under the
    // 20,000-token trigger's target).
    assert!(held < body as f64 / 8.0, "{held} bytes held of {body}");
    // And the turn after goes on from it.
    a.extend_from_slice(&history("a", TURNS + 4)[a.len()..]);
    send(&proxy, "sk-a", &a).await;
    assert_eq!(counts(&proxy).await.1, 1.0, "decoded from what it added");
    let _ = stop.send(());
    let _ = done.await;
    std::fs::remove_dir_all(&dir).ok();
}

/// A session without a request for `[serve] session_idle_seconds` leaves
/// memory, saved to the store; its next request goes on from the stored
/// compaction and sends what a proxy that kept the session in memory sends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_session_leaves_memory_and_goes_on_from_the_store() {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("abridge-proxy-idle-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut sent = Vec::new();
    for idle in [0.3, 0.0] {
        let path = dir.join(format!("store-{idle}.sqlite"));
        let _ = std::fs::remove_file(&path);
        let upstream = Mock::serve(|_| Some(openai_ok("ok")));
        let mut c = ProxyConfig::from_toml("[trigger]\nmax_tokens = 20000\n").unwrap();
        c.serve.openai_upstream = format!("{}/v1", upstream.url);
        c.serve.session_idle_seconds = idle;
        let store = abridge_store::Store::open(&path).unwrap();
        let (proxy, stop, done) = serve_config(c, Some(Box::new(store))).await;
        let mut a = history("a", TURNS);
        send(&proxy, "sk-a", &a).await;
        tokio::time::sleep(std::time::Duration::from_millis(1200)).await;
        let m = metrics_text(&proxy).await;
        let left = idle > 0.0;
        assert_eq!(
            metric(&m, "abridge_active_sessions"),
            if left { 0.0 } else { 1.0 },
            "{m}"
        );
        let held = metric(&m, "abridge_session_memory_bytes");
        assert_eq!(held == 0.0, left, "{held} bytes held");
        for turns in [TURNS + 3, TURNS + 4] {
            a.extend_from_slice(&history("a", turns)[a.len()..]);
            send(&proxy, "sk-a", &a).await;
        }
        let m = metrics_text(&proxy).await;
        assert_eq!(metric(&m, "abridge_compactions_total{"), 1.0, "{m}");
        let (whole, added, _) = counts(&proxy).await;
        assert_eq!((whole, added), if left { (2.0, 1.0) } else { (1.0, 2.0) });
        sent.push(
            upstream
                .requests()
                .into_iter()
                .map(|r| r.body)
                .collect::<Vec<_>>(),
        );
        let _ = stop.send(());
        let _ = done.await;
    }
    assert_eq!(sent[0].len(), 3);
    assert!(
        sent[0] == sent[1],
        "what went upstream differs once the session left memory"
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// The briefing the LLM of the background tests writes.
const BRIEFING: &str = "## Task\nRead every module of the crate.\n\n## Progress\nModules read so far are listed in the files.";

/// A proxy whose briefings `llm`, serving `model`, prepares in the
/// background, before a provider that takes 6,000 tokens at most.
async fn with_llm(llm: &Mock, model: &str) -> crate::support::Setup {
    let toml = format!(
        "{}[[summarizers]]\nkind = \"openai\"\nmodel = \"{model}\"\nbase_url = \"{}/v1\"\ntimeout_secs = 5\n",
        crate::CONFIG,
        llm.url
    );
    let options = abridge_testkit::ProviderOptions {
        max_tokens: Some(6000),
        ..abridge_testkit::ProviderOptions::default()
    };
    crate::support::start(&toml, options, None).await
}

/// A session whose briefings an LLM prepares in the background holds only
/// what its carried compaction does not cover too: the preparation starts
/// from the thread's state and what the history holds, and is adopted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_with_background_briefings_holds_only_what_is_not_carried() {
    use crate::support::{LoopLog, OpenAiAgent};
    let llm = Mock::serve(move |_| Some(openai_ok(BRIEFING)));
    let setup = with_llm(&llm, "m").await;
    let mut agent = OpenAiAgent::new(false);
    let mut log = LoopLog::default();
    for _ in 0..60 {
        log.note(&agent.step(&setup.proxy, &[]).await);
    }
    let report = setup.provider.report();
    assert!(
        report
            .requests
            .iter()
            .all(|r| r.violations.is_empty() && !r.over_limit)
    );
    assert!(log.compacted > 0);
    assert!(!llm.requests().is_empty(), "briefings were prepared");
    let (whole, added, held) = counts(&setup.proxy).await;
    assert_eq!((whole, added), (1.0, 59.0));
    let body: usize = agent.messages.iter().map(|m| m.to_string().len()).sum();
    assert!(held < body as f64 / 4.0, "{held} bytes held of {body}");
    setup.stop().await;
}

/// A compaction prepared in the background is this turn's when the turn
/// takes it: the client is told (`x-abridge-compacted`), and it is counted
/// in `abridge_compactions_total` like an inline one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_compaction_taken_is_signalled_and_counted() {
    use crate::support::OpenAiAgent;
    // Each briefing costs what its provider reports.
    let llm = Mock::serve(move |_| Some(openai_ok_reporting(BRIEFING, 2_000, 0, 150)));
    let setup = with_llm(&llm, "gpt-4o-mini").await;
    let mut agent = OpenAiAgent::new(false);
    let mut told = Vec::new();
    for _ in 0..60 {
        let h = agent.step(&setup.proxy, &[]).await;
        told.push(h.contains_key("x-abridge-compacted"));
    }
    assert!(!llm.requests().is_empty(), "briefings were prepared");
    let requests = setup.provider.report().requests;
    assert_eq!(requests.len(), told.len());
    // A request whose history names an original the one before did not is
    // newly compacted, inline or from the background: its client is told.
    // (A carried compaction names the same originals again.)
    for (i, pair) in requests.windows(2).enumerate() {
        let new = pair[1].handles.iter().any(|h| !pair[0].handles.contains(h));
        assert!(
            !new || told[i + 1],
            "request {} was compacted untold",
            i + 1
        );
    }
    let metrics = metrics_text(&setup.proxy).await;
    let counted = metric(&metrics, "abridge_compactions_total");
    let told = told.iter().filter(|t| **t).count();
    assert!(told > 0);
    assert_eq!(counted as usize, told, "{metrics}");
    // What the briefings cost, each once: those taken and those discarded
    // as stale, at most every one the LLM wrote.
    let input = metric(&metrics, "abridge_summarizer_input_tokens_total");
    let output = metric(&metrics, "abridge_summarizer_output_tokens_total");
    let briefings = input / 2_000.0;
    assert!(briefings >= 1.0 && briefings.fract() == 0.0, "{metrics}");
    assert!(briefings as usize <= llm.requests().len(), "{metrics}");
    assert_eq!(output, briefings * 150.0, "{metrics}");
    let price = abridge::tokens::Registry::new()
        .lookup("gpt-4o-mini")
        .and_then(|m| m.price)
        .unwrap();
    let each = price.cost(&abridge::model::Usage {
        input_tokens: 2_000,
        output_tokens: 150,
        ..Default::default()
    });
    let cost = metric(&metrics, "abridge_summarizer_cost_dollars_total");
    assert!(
        (cost - briefings * each).abs() < 1e-9,
        "{cost} for {briefings}"
    );
    setup.stop().await;
}
