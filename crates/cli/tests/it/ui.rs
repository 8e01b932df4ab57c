//! `abridge ui` over a store the CLI filled, and the dashboard `abridge
//! serve` mounts at /ui, fetched over plain HTTP.

use crate::support::{Server, compact_example, run, text};

/// A store the CLI filled, in a directory of its own that goes when it
/// does (with SQLite's `-wal` and `-shm` beside it): declared before the
/// server that reads it, it outlives it.
struct FilledStore(std::path::PathBuf);

impl FilledStore {
    fn new(name: &str) -> FilledStore {
        let dir =
            std::env::temp_dir().join(format!("abridge-ui-cli-{}-{name}", std::process::id()));
        std::fs::remove_dir_all(&dir).ok();
        std::fs::create_dir_all(&dir).unwrap();
        let store = FilledStore(dir);
        let o = compact_example(&["--store", &store.path()]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        store
    }

    fn path(&self) -> String {
        self.0.join("abridge.sqlite").display().to_string()
    }
}

impl Drop for FilledStore {
    fn drop(&mut self) {
        std::fs::remove_dir_all(&self.0).ok();
    }
}

#[test]
fn abridge_ui_shows_what_the_cli_recorded_under_the_names_it_is_given() {
    let store = FilledStore::new("ui");
    let ui = Server::start(&[
        "ui",
        "--store",
        &store.path(),
        "--listen",
        "127.0.0.1:0",
        "--allowed-host",
        "dash.internal",
    ]);
    let (status, html) = ui.get("/ui");
    assert_eq!(status, 200);
    assert!(html.contains("examples/coding-agent.openai.json"), "{html}");
    let (status, html) = ui.get("/ui/compactions/1");
    assert_eq!(status, 200);
    assert!(html.contains("id=\"briefing\""));
    // Its own names only: a page that points another name at it reads nothing.
    assert_eq!(ui.get_as("dash.internal:8788", "/ui").0, 200);
    assert_eq!(ui.get_as("127.0.0.1", "/ui").0, 200);
    let (status, body) = ui.get_as("attacker.example", "/ui/compactions/1/original.json");
    assert_eq!(status, 421, "{body}");
    assert!(body.contains("allowed_hosts"), "{body}");
}

#[test]
fn beyond_loopback_the_dashboard_needs_a_token() {
    let o = run(
        &[
            "ui",
            "--store",
            "/nonexistent/x.sqlite",
            "--listen",
            "0.0.0.0:0",
        ],
        None,
    );
    assert!(!o.status.success());
    assert!(
        text(&o.stderr).contains("ABRIDGE_UI_TOKEN"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn abridge_serve_mounts_the_dashboard() {
    let store = FilledStore::new("serve");
    let proxy = Server::start(&[
        "serve",
        "--store",
        &store.path(),
        "--listen",
        "127.0.0.1:0",
        "--openai-upstream",
        "http://127.0.0.1:9/v1",
    ]);
    assert_eq!(proxy.get("/healthz").0, 200);
    let (status, html) = proxy.get("/ui");
    assert_eq!(status, 200);
    assert!(html.contains("examples/coding-agent.openai.json"));
    assert_eq!(proxy.get("/ui/style.css").0, 200);
    // A page of another site that pointed its name at 127.0.0.1 reads nothing.
    let original = "/ui/compactions/1/original.json";
    assert_eq!(proxy.get(original).0, 200);
    for path in [original, "/ui", "/metrics"] {
        let (status, body) = proxy.get_as("attacker.example", path);
        assert_eq!(status, 421, "{path}: {body}");
    }
}

#[test]
fn abridge_serve_beyond_loopback_needs_a_dashboard_token() {
    let o = run(
        &[
            "serve",
            "--store",
            "/nonexistent/x.sqlite",
            "--listen",
            "0.0.0.0:0",
        ],
        None,
    );
    assert!(!o.status.success());
    let err = text(&o.stderr);
    assert!(
        err.contains("ABRIDGE_UI_TOKEN") && err.contains("--no-store"),
        "{err}"
    );
}
