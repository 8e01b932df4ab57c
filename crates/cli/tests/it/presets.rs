//! `--preset` as a user gives it: Pilo #441's compaction summarizes every
//! 25 iterations, and when its summarizer fails the run goes on with its
//! whole history; a preset that does not exist is named with those that do.

use serde_json::Value;

use crate::support::{run, text};

/// `abridge simulate --synthetic 60 --preset pilo-compaction` with `flags`:
/// its summary.
fn pilo(flags: &[&str]) -> Value {
    let mut args = vec![
        "simulate",
        "--synthetic",
        "60",
        "--preset",
        "pilo-compaction",
        "--json",
    ];
    args.extend(flags);
    let o = run(&args, None);
    assert!(o.status.success(), "{}", text(&o.stderr));
    serde_json::from_slice::<Value>(&o.stdout).unwrap()["summary"].clone()
}

#[test]
fn pilo_compaction_summarizes_on_its_cadence_and_skips_when_the_summarizer_fails() {
    let briefed = pilo(&["--summarizer", "offline"]);
    assert_eq!(briefed["compactions"], 2, "{briefed}");
    assert!(briefed["peak"].as_u64().unwrap() <= 40_000, "{briefed}");

    // An LLM summarizer whose server is down: nothing listens on the port.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let base = format!("http://127.0.0.1:{port}/v1");
    let skipped = pilo(&[
        "--summarizer",
        "openai:gpt-4o-mini",
        "--base-url",
        &base,
        "--timeout",
        "2",
    ]);
    // Skipped, not degraded: the whole history goes on (it fits gpt-4o's window).
    assert_eq!(skipped["compactions"], 0, "{skipped}");
    assert_eq!(skipped["peak"], skipped["peak_baseline"], "{skipped}");
}

#[test]
fn an_unknown_preset_is_refused_with_the_names_there_are() {
    for args in [
        &["simulate", "--synthetic", "3", "--preset", "pilo"][..],
        &[
            "serve",
            "--preset",
            "pilo",
            "--no-store",
            "--listen",
            "127.0.0.1:0",
        ][..],
    ] {
        let o = run(args, None);
        assert!(!o.status.success());
        let err = text(&o.stderr);
        assert!(
            err.contains("'pilo'") && err.contains("pilo-compaction") && err.contains("mycoder"),
            "{args:?}: {err}"
        );
    }
}
