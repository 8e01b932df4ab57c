//! The dashboard over a real SQLite store filled by real compactions,
//! fetched over HTTP: sessions (sorted, filtered, paged), the session
//! chart, the compaction page, the download, the token.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

use abridge::tokens::{Calibrated, Reported};
use std::path::PathBuf;

use abridge::model::decode;
use abridge::{Compactor, Config, SnapshotData};
use abridge_store::{SnapshotStore, Store};
use abridge_ui::{Ui, router};

fn example(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name)
}

/// A store with the two examples compacted (the web agent twice), and
/// `extra` more sessions holding a copy of the first snapshot.
fn filled(extra: usize) -> (tempdir::Dir, PathBuf) {
    let dir = tempdir::Dir::new();
    let path = dir.0.join("store.sqlite");
    for (name, target, times) in [
        ("web-agent.anthropic.json", 2500, 2),
        ("coding-agent.openai.json", 700, 1),
    ] {
        let conv = decode(&std::fs::read(example(name)).unwrap())
            .unwrap()
            .remove(0);
        let config = Config::from_toml(&format!(
            "[budget]\ntarget_tokens = {target}\nmin_iterations = 1\n"
        ))
        .unwrap();
        let mut compactor = Compactor::new(config).unwrap();
        compactor.set_store(Box::new(Store::open(&path).unwrap().with_source(name)));
        for _ in 0..times {
            assert!(compactor.compact(&conv).unwrap().report.compacted);
        }
    }
    let mut store = Store::open(&path).unwrap();
    let first = store.list(usize::MAX).unwrap().last().unwrap().id;
    let snap = store.get(first).unwrap();
    let before = snap.history().unwrap();
    let after = snap.compacted().unwrap();
    for i in 0..extra {
        let data = SnapshotData {
            before: &before,
            after: &after,
            config: &snap.config,
            report: &snap.report,
            thread: None,
            originals: &[],
        };
        store
            .record_as(&format!("proxy-session-{i:04}"), &data)
            .unwrap();
    }
    (dir, path)
}

mod tempdir {
    pub(crate) struct Dir(pub(crate) std::path::PathBuf);
    impl Dir {
        pub(crate) fn new() -> Self {
            static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
            let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let p = std::env::temp_dir().join(format!("abridge-ui-{}-{n}", std::process::id()));
            std::fs::create_dir_all(&p).unwrap();
            Dir(p)
        }
    }
    impl Drop for Dir {
        fn drop(&mut self) {
            std::fs::remove_dir_all(&self.0).ok();
        }
    }
}

/// Serves the dashboard on a free port; returns its base URL.
async fn serve(path: &std::path::Path, token: Option<&str>) -> String {
    let ui = Ui::new(
        Box::new(Store::open(path).unwrap()),
        token.map(str::to_owned),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router(ui)).await });
    url
}

/// An HTTP client (rustls wants its crypto provider chosen first).
fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

async fn get(url: &str) -> (u16, String) {
    let r = client().get(url).send().await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

/// No script, and nothing fetched from another origin.
fn self_contained(html: &str) {
    assert!(!html.contains("<script"), "no script");
    for attr in [
        "src=\"http",
        "href=\"http",
        "src=\"//",
        "href=\"//",
        "url(http",
    ] {
        assert!(!html.contains(attr), "{attr} in page");
    }
}

#[tokio::test]
async fn sessions_are_listed_sorted_filtered_and_paged() {
    let (_dir, path) = filled(60);
    let url = serve(&path, None).await;
    let (status, html) = get(&format!("{url}/ui")).await;
    assert_eq!(status, 200);
    self_contained(&html);
    assert!(html.contains("62 sessions"), "two examples and 60 copies");
    assert_eq!(
        html.matches("class=\"badge compacted\"").count(),
        50,
        "one page of 50"
    );
    assert!(html.contains("page 1 of 2"));
    let (_, page2) = get(&format!("{url}/ui?page=1")).await;
    assert_eq!(page2.matches("class=\"badge compacted\"").count(), 12);
    let (_, web) = get(&format!("{url}/ui?q=WEB-agent")).await;
    assert!(
        web.contains("1 sessions") && web.contains("web-agent.anthropic.json"),
        "filter is case-insensitive"
    );
    let (_, by_count) = get(&format!("{url}/ui?sort=compactions")).await;
    let first_row = by_count.split("<tbody>").nth(1).unwrap();
    assert!(
        first_row.find("web-agent").unwrap() < first_row.find("proxy-session").unwrap(),
        "two compactions first"
    );
    let (_, asc) = get(&format!("{url}/ui?sort=source&asc=true")).await;
    let body = asc.split("<tbody>").nth(1).unwrap();
    assert!(body.find("coding-agent").unwrap() < body.find("proxy-session-0000").unwrap());
}

#[tokio::test]
async fn the_session_chart_has_one_marker_per_compaction() {
    let (_dir, path) = filled(0);
    let url = serve(&path, None).await;
    let (status, html) = get(&format!("{url}/ui/session?source=web-agent.anthropic.json")).await;
    assert_eq!(status, 200);
    self_contained(&html);
    assert!(html.contains("<svg class=\"chart\" id=\"timeline\""));
    assert_eq!(html.matches("class=\"marker\"").count(), 2);
    assert!(html.contains("target 2,500"));
    let (status, _) = get(&format!("{url}/ui/session?source=nope")).await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn a_compaction_shows_its_briefing_diff_and_original() {
    let (_dir, path) = filled(0);
    let url = serve(&path, None).await;
    let store = Store::open(&path).unwrap();
    let coding = store
        .list(usize::MAX)
        .unwrap()
        .into_iter()
        .find(|e| e.source.as_deref() == Some("coding-agent.openai.json"))
        .unwrap();
    let snap = store.get(coding.id).unwrap();
    let (status, html) = get(&format!("{url}/ui/compactions/{}", coding.id)).await;
    assert_eq!(status, 200);
    self_contained(&html);
    assert!(
        html.contains("id=\"briefing\""),
        "the offline briefing is rendered"
    );
    assert!(html.contains("<h2>Policies</h2>") && html.contains("id=\"attempts\""));
    let before = html
        .split("id=\"before\"")
        .nth(1)
        .unwrap()
        .split("</ol>")
        .next()
        .unwrap();
    assert_eq!(
        before.matches("<li").count(),
        snap.before["messages"].as_array().unwrap().len()
    );
    assert!(
        before.contains("class=\"dropped\"") && before.contains("<details>"),
        "changed messages expandable"
    );
    assert!(
        html.contains("class=\"kept\""),
        "the task and the tail are kept"
    );
    let original: serde_json::Value =
        reqwest::get(format!("{url}/ui/compactions/{}/original.json", coding.id))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
    assert_eq!(
        original, snap.before,
        "the same body abridge restore prints"
    );
    assert_eq!(get(&format!("{url}/ui/compactions/999999")).await.0, 404);
}

#[tokio::test]
async fn a_token_guards_every_page_but_the_stylesheet() {
    let (_dir, path) = filled(0);
    let url = serve(&path, Some("s3cret-token")).await;
    assert_eq!(get(&format!("{url}/ui")).await.0, 401);
    assert_eq!(get(&format!("{url}/ui?token=wrong")).await.0, 401);
    assert_eq!(
        get(&format!("{url}/ui/compactions/1/original.json"))
            .await
            .0,
        401
    );
    assert_eq!(get(&format!("{url}/ui/style.css")).await.0, 200);
    let client = client();
    let r = client
        .get(format!("{url}/ui?token=s3cret-token"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let cookie = r.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"));
    let with_cookie = client
        .get(format!("{url}/ui/compactions/1"))
        .header("cookie", cookie.split(';').next().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(with_cookie.status(), 200);
    let bearer = client
        .get(format!("{url}/ui"))
        .bearer_auth("s3cret-token")
        .send()
        .await
        .unwrap();
    assert_eq!(bearer.status(), 200);
}

#[tokio::test]
async fn a_proxy_session_shows_its_requests_usage_and_compactions() {
    use abridge_store::{RequestRecord, SessionStore};
    let (_dir, path) = filled(0);
    let mut store = Store::open(&path).unwrap();
    let snap = store.get(store.list(1).unwrap()[0].id).unwrap();
    let before = snap.history().unwrap();
    let after = snap.compacted().unwrap();
    let data = SnapshotData {
        before: &before,
        after: &after,
        config: &snap.config,
        report: &snap.report,
        thread: None,
        originals: &[],
    };
    let mut compactions = 0;
    for i in 0..30u64 {
        let compacts = i % 10 == 9;
        let snapshot = compacts.then(|| store.record_as("a1b2c3", &data).unwrap());
        compactions += usize::from(compacts);
        let request = RequestRecord {
            source: "a1b2c3".into(),
            at: String::new(),
            model: Some("gpt-4o".into()),
            tokens: Calibrated::new(1_000 + (i % 10) * 500),
            usage: Some(Reported::new(1_050 + (i % 10) * 500)),
            compacted: i >= 9,
            snapshot,
            trigger: Some(Calibrated::new(6_000)),
            target: Some(Calibrated::new(3_600)),
            // The model recalled originals on two requests.
            recalls: u32::from(i == 12 || i == 20) * 2,
            account: Default::default(),
        };
        store.record_request(&request).unwrap();
    }
    let url = serve(&path, None).await;
    let (_, list) = get(&format!("{url}/ui?q=a1b2c3")).await;
    let row = list.split("<tbody>").nth(1).unwrap();
    assert!(
        row.contains("badge compacted"),
        "its last request went compacted"
    );
    assert!(row.contains(">30<"), "30 requests");
    let (_, no_requests) = get(&format!("{url}/ui?q=coding")).await;
    assert!(
        no_requests.split("<tbody>").nth(1).unwrap().contains("—"),
        "no request log for a CLI conversation"
    );
    let (status, html) = get(&format!("{url}/ui/session?source=a1b2c3")).await;
    assert_eq!(status, 200);
    self_contained(&html);
    assert!(html.contains("id=\"abridge-line\"") && html.contains("id=\"usage-line\""));
    assert_eq!(html.matches("class=\"marker\"").count(), compactions);
    assert_eq!(
        html.matches("class=\"recall\"").count(),
        2,
        "each request that recalled is marked"
    );
    assert!(html.contains("request 13: 2 originals recalled"));
    assert!(html.contains("Recalled<b"));
    assert!(html.contains("trigger 6,000") && html.contains("target 3,600"));
    assert!(
        html.contains("Estimated cost<b>$") && html.contains("Estimated saving<b>$"),
        "gpt-4o has a price"
    );
}

#[tokio::test]
async fn a_briefing_under_a_configured_wrapper_is_shown_as_the_briefing() {
    let dir = tempdir::Dir::new();
    let path = dir.0.join("store.sqlite");
    let conv = decode(&std::fs::read(example("coding-agent.openai.json")).unwrap())
        .unwrap()
        .remove(0);
    let config = Config::from_toml(
        "[budget]\ntarget_tokens = 700\nmin_iterations = 1\n[summary]\nwrapper = \"session-notes\"\n",
    )
    .unwrap();
    let mut compactor = Compactor::new(config).unwrap();
    compactor.set_store(Box::new(Store::open(&path).unwrap().with_source("notes")));
    let report = compactor.compact(&conv).unwrap().report;
    let at = report.briefing.expect("a briefing");
    let id = report.snapshot.unwrap();
    let url = serve(&path, None).await;
    let (status, html) = get(&format!("{url}/ui/compactions/{id}")).await;
    assert_eq!(status, 200);
    let after = html.split("id=\"after\"").nth(1).unwrap();
    let line = after.split("<li").nth(at + 1).unwrap();
    assert!(
        line.contains("&lt;session-notes&gt;") || line.contains("<session-notes>"),
        "{line}"
    );
    assert!(
        line.contains(" · briefing · "),
        "the briefing's line says so: {line}"
    );
    assert!(!html.contains("compacted-history"));
}
