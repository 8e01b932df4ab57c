//! Snapshots: every CLI compaction is recorded; log, show, restore, replay.

use std::path::PathBuf;
use std::process::Output;

use serde_json::Value;

use crate::support::{compact_example, run, text};

fn abridge(args: &[&str]) -> Output {
    run(args, None)
}

/// Compacts the coding-agent example to `target` tokens, recording into `store`.
fn compact_into(store: &str, target: &str) -> Output {
    let o = abridge(&[
        "compact",
        "examples/coding-agent.openai.json",
        "--target-tokens",
        target,
        "--keep-last",
        "2",
        "--store",
        store,
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    o
}

#[test]
fn compactions_are_recorded_and_can_be_listed_shown_restored_and_replayed() {
    let dir = std::env::temp_dir().join(format!("abridge-snap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let db = dir.join("s.sqlite");
    let db = db.to_str().unwrap();
    let compact = |target: &str| compact_into(db, target);
    let first = compact("700");
    assert!(text(&first.stderr).contains("snapshot 1 stored"));
    compact("1000");
    let log = abridge(&["log", "--store", db, "--json"]);
    let entries: Vec<Value> = text(&log.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[0]["id"], 2, "newest first");
    assert_eq!(entries[1]["summarizer"], "offline");
    assert_eq!(entries[1]["tokens_before"], 1560);
    // The readable view by default, with the store repeated in its hint.
    let human = text(&abridge(&["show", "1", "--store", db]).stdout);
    assert!(human.contains("tokens    1,560 → "), "{human}");
    assert!(human.contains("briefing\n  ## "), "{human}");
    assert!(
        human.contains(&format!("abridge restore 1 --store {db}")),
        "{human}"
    );
    let table = text(&abridge(&["log", "--store", db]).stdout);
    assert!(table.starts_with("   ID  RECORDED (UTC)"), "{table}");
    assert!(table.contains("briefing by offline"), "{table}");
    let show: Value =
        serde_json::from_slice(&abridge(&["show", "1", "--store", db, "--json"]).stdout).unwrap();
    assert!(show["briefing"].as_str().unwrap().starts_with("## "));
    assert_eq!(show["attempts"][0]["summarizer"], "offline");
    assert_eq!(show["target"], 700);
    let restored: Value =
        serde_json::from_slice(&abridge(&["restore", "1", "--store", db]).stdout).unwrap();
    let original: Value = serde_json::from_str(
        &std::fs::read_to_string(
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../examples/coding-agent.openai.json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(restored, original);
    // Replay with a summarizer that cannot be reached: both briefings and the failed attempt are shown.
    let replay = abridge(&[
        "replay",
        "1",
        "--store",
        db,
        "--summarizer",
        "openai:m",
        "--base-url",
        "http://127.0.0.1:1/v1",
        "--timeout",
        "3",
        "--json",
    ]);
    assert!(replay.status.success(), "{}", text(&replay.stderr));
    let r: Value = serde_json::from_slice(&replay.stdout).unwrap();
    assert_eq!(r["stored"]["briefing"], show["briefing"]);
    assert_eq!(
        r["replayed"]["briefing"], show["briefing"],
        "the offline fact sheet is deterministic"
    );
    assert_eq!(r["replayed"]["attempts"][0]["summarizer"], "openai:m");
    let failed = &r["replayed"]["attempts"][0]["outcome"];
    assert_eq!(failed["status"], "failed");
    assert_eq!(failed["error"]["kind"], "transport");
    let table = abridge(&["replay", "1", "--store", db]);
    assert!(
        text(&table.stdout).contains("stored: offline"),
        "{}",
        text(&table.stdout)
    );
    assert_eq!(
        abridge(&["show", "9", "--store", db]).status.code(),
        Some(2)
    );
    // Pruning by age removes nothing young; a zero-day limit keeps forever.
    let p = abridge(&["prune", "--store", db, "--max-age-days", "1"]);
    assert!(p.status.success(), "{}", text(&p.stderr));
    assert!(
        text(&p.stdout).contains("removed 0 snapshot(s) and 0 session(s), 2 snapshot(s) left"),
        "{}",
        text(&p.stdout)
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_store_that_cannot_be_opened_never_costs_the_history() {
    let dir = std::env::temp_dir().join(format!("abridge-badsnap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // The store's folder would have to be inside a regular file.
    let blocker = dir.join("file");
    std::fs::write(&blocker, b"not a folder").unwrap();
    let db = blocker.join("s.sqlite");
    let o = compact_example(&["--store", db.to_str().unwrap(), "--compact-json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("snapshots and recall off"),
        "{}",
        text(&o.stderr)
    );
    let body: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(body["messages"].as_array().unwrap().len() > 3);
    // Nothing keeps the originals: no handle or tool promises one.
    assert!(!text(&o.stdout).contains("abr_"), "{}", text(&o.stdout));
    assert!(!text(&o.stdout).contains("abridge_recall"));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn without_a_store_a_compaction_offers_no_recall_and_with_one_it_does() {
    let o = compact_example(&["--no-store", "--compact-json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(!text(&o.stdout).contains("abr_"), "{}", text(&o.stdout));
    assert!(!text(&o.stdout).contains("abridge_recall"));
    let dir = std::env::temp_dir().join(format!("abridge-recallsnap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let db = dir.join("s.sqlite");
    let o = compact_example(&["--store", db.to_str().unwrap(), "--compact-json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("abr_"), "{}", text(&o.stdout));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_postgres_store_records_lists_shows_restores_and_prunes() {
    let pg = match abridge_testkit::Postgres::start() {
        Ok(pg) => pg,
        Err(why) => {
            eprintln!("skipped: {why} (.ci/run installs Debian's postgresql)");
            return;
        }
    };
    let url = pg.url.as_str();
    for target in ["600", "400"] {
        let o = compact_into(url, target);
        assert!(text(&o.stderr).contains("snapshot"), "{}", text(&o.stderr));
    }
    let log = abridge(&["log", "--json", "--store", url]);
    assert!(log.status.success(), "{}", text(&log.stderr));
    let entries: Vec<Value> = text(&log.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[0]["source"], "examples/coding-agent.openai.json");
    let id = entries[0]["id"].to_string();
    let show = abridge(&["show", &id, "--json", "--store", url]);
    let shown: Value = serde_json::from_str(&text(&show.stdout)).unwrap();
    assert_eq!(shown["tokens_after"], entries[0]["tokens_after"]);
    let restore = abridge(&["restore", &id, "--store", url]);
    let before: Value = serde_json::from_str(&text(&restore.stdout)).unwrap();
    let original: Value = serde_json::from_slice(
        &std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../examples/coding-agent.openai.json"
        ))
        .unwrap(),
    )
    .unwrap();
    assert_eq!(
        before["messages"], original["messages"],
        "restore gives the history back"
    );
    let prune = abridge(&[
        "prune",
        "--max-mb",
        "0",
        "--max-age-days",
        "0",
        "--store",
        url,
    ]);
    assert!(
        text(&prune.stdout).contains("removed 0 snapshot(s) and 0 session(s), 2 snapshot(s) left"),
        "{}",
        text(&prune.stdout)
    );
}

#[test]
fn recall_prints_what_a_handle_names_from_the_store() {
    let dir = std::env::temp_dir().join(format!("abridge-recall-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let db = dir.join("s.sqlite");
    let db = db.to_str().unwrap();
    let out = compact_into(db, "1000");
    let body = text(&out.stdout);
    let handle = body
        .match_indices("abr_")
        .map(|(at, _)| &body[at..at + 14])
        .find(|h| h[4..].bytes().all(|b| b.is_ascii_alphanumeric()))
        .expect("a handle in the compacted body")
        .to_owned();
    let recalled = abridge(&["recall", &handle, "--store", db]);
    assert!(recalled.status.success(), "{}", text(&recalled.stderr));
    let printed = text(&recalled.stdout);
    assert!(printed.starts_with(&format!("[{handle} · ")), "{printed}");
    let original = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/coding-agent.openai.json"),
    )
    .unwrap();
    // The body of the original is a string of the example, as it was.
    let content: String = printed.lines().skip(1).collect::<Vec<_>>().join("\n");
    let quoted = serde_json::to_string(&content).unwrap();
    assert!(original.contains(quoted.trim_matches('"')), "{printed}");
    let unknown = abridge(&["recall", "abr_zzzzzzzzzz", "--store", db]);
    assert_eq!(unknown.status.code(), Some(1));
    assert!(text(&unknown.stdout).contains("no original is kept"));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_stored_compaction_exports_as_a_playground_bundle() {
    let dir = std::env::temp_dir().join(format!("abridge-bundle-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let db = dir.join("s.sqlite");
    let db = db.to_str().unwrap();
    compact_into(db, "700");
    let show: Value =
        serde_json::from_slice(&abridge(&["show", "1", "--store", db, "--json"]).stdout).unwrap();
    let out = dir.join("bundles");
    let o = abridge(&[
        "replay",
        "1",
        "--store",
        db,
        "--bundle",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let b = out.join("compression-1");
    let read = |name: &str| std::fs::read_to_string(b.join(name)).unwrap();
    // The built-in prompt, and the user message the summarizer is sent:
    // the serialized history in it, with stagewise's markers.
    assert_eq!(read("system-prompt.md"), abridge_llm::DEFAULT_PROMPT);
    let user = read("user-message.md");
    let history = read("compact-history.xml");
    assert!(!history.is_empty() && user.contains(&history));
    assert!(
        history.contains("<assistant>") && history.contains("[read: "),
        "{history}"
    );
    // What the stored compaction wrote, to diff against.
    assert_eq!(read("actual-output.md"), show["briefing"].as_str().unwrap());
    let meta: Value = serde_json::from_str(&read("metadata.json")).unwrap();
    assert_eq!(meta["id"], 1);
    assert_eq!(meta["actual_output_includes_previous_tag"], false);
    assert_eq!(meta["user_message_chars"], user.chars().count());
    assert!(text(&o.stdout).contains("compression-1: system-prompt.md, user-message.md"));
    std::fs::remove_dir_all(&dir).ok();
}
