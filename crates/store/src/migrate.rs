//! Schema versions of the SQLite store, kept in `PRAGMA user_version`.
//!
//! - 1: the first release's table (reports with a side `family` key, and
//!   attempts as `ok` + `error` text).
//! - 2: a `family` column; reports and attempts in the typed shape
//!   ([`abridge::Attempt`] with its outcome).
//! - 3: a `sessions` table (what `abridge serve` carries over per session).
//! - 4: a `requests` table (the request log behind the dashboard's timelines).
//! - 5: snapshots' token figures in the provider's units beside abridge's
//!   counts (`provider_tokens_before`, `provider_tokens_after`).
//! - 6: an `originals` table (what the recall tool answers with).
//! - 7: a `settings` table (the proxy's server secret, which its tenants
//!   and handles are derived with).
//! - 8: `gemini` among the families a snapshot or a session may have
//!   (SQLite cannot alter a CHECK: both tables are rebuilt).
//! - 9: snapshots' bodies kept by their parts, each once per source
//!   (`parts`, `snapshot_parts`; `bodies` says where a row's are, and
//!   `history_key` where its items go); rows written before keep theirs
//!   in `before_body` and `after_body`. Sessions indexed by their last
//!   save, which the retention removes the oldest of. Request rows with
//!   their tenant and accounting (the client's tokens, the provider's
//!   report, dollars with and without abridge), summed per day, tenant and
//!   model in `totals` (which the request log's trimming leaves alone).
//!
//! A store is brought to [`VERSION`] when it is opened, inside one
//! transaction: it opens as it was or as it should be, never half-migrated.

use rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior, params};
use serde_json::{Value, json};

use crate::{Error, Result};

/// The schema version this release writes.
pub(crate) const VERSION: i64 = 9;

const V1: &str = "
CREATE TABLE snapshots (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    created_at    TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    source        TEXT,
    model         TEXT,
    tokens_before INTEGER NOT NULL,
    tokens_after  INTEGER NOT NULL,
    target        INTEGER,
    summarizer    TEXT,
    briefing      TEXT,
    attempts      TEXT NOT NULL,
    report        TEXT NOT NULL,
    config        TEXT NOT NULL,
    before_body   TEXT NOT NULL,
    after_body    TEXT NOT NULL
);";

const V3_SESSIONS: &str = "
CREATE TABLE sessions (
    id                 TEXT PRIMARY KEY,
    family             TEXT NOT NULL CHECK (family IN ('openai', 'anthropic')),
    model              TEXT,
    source_len         INTEGER,
    source_fingerprint INTEGER,
    tokens             INTEGER,
    body               TEXT,
    calibration        TEXT NOT NULL,
    version            INTEGER NOT NULL DEFAULT 0,
    updated_at         TEXT NOT NULL
);";

const V4_REQUESTS: &str = "
CREATE TABLE requests (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    source         TEXT NOT NULL,
    at             TEXT NOT NULL,
    model          TEXT,
    tokens         INTEGER NOT NULL,
    usage          INTEGER,
    compacted      INTEGER NOT NULL,
    snapshot       INTEGER,
    trigger_tokens INTEGER,
    target         INTEGER
);
CREATE INDEX requests_by_source ON requests (source, id);";

const V5_PROVIDER_TOKENS: &str = "
ALTER TABLE snapshots ADD COLUMN provider_tokens_before INTEGER;
ALTER TABLE snapshots ADD COLUMN provider_tokens_after INTEGER;";

const V6_ORIGINALS: &str = "
CREATE TABLE originals (
    handle   TEXT PRIMARY KEY,
    snapshot INTEGER NOT NULL,
    kind     TEXT NOT NULL,
    label    TEXT NOT NULL,
    body     TEXT NOT NULL
);
CREATE INDEX originals_by_snapshot ON originals (snapshot);
ALTER TABLE requests ADD COLUMN recalls INTEGER NOT NULL DEFAULT 0;";

const V7_SETTINGS: &str = "
CREATE TABLE settings (
    name  TEXT PRIMARY KEY,
    value TEXT NOT NULL
);";

const V9_PARTS: &str = "
ALTER TABLE snapshots ADD COLUMN bodies INTEGER NOT NULL DEFAULT 0;
ALTER TABLE snapshots ADD COLUMN history_key TEXT;
CREATE TABLE parts (
    id     INTEGER PRIMARY KEY,
    source TEXT NOT NULL,
    hash   BLOB NOT NULL,
    body   TEXT NOT NULL
);
CREATE UNIQUE INDEX parts_by_hash ON parts (source, hash);
CREATE TABLE snapshot_parts (
    snapshot INTEGER NOT NULL,
    side     INTEGER NOT NULL,
    position INTEGER NOT NULL,
    hash     BLOB NOT NULL,
    PRIMARY KEY (snapshot, side, position)
) WITHOUT ROWID;
CREATE INDEX snapshot_parts_by_hash ON snapshot_parts (hash);
CREATE INDEX sessions_by_update ON sessions (updated_at);
ALTER TABLE requests ADD COLUMN tenant TEXT;
ALTER TABLE requests ADD COLUMN client_tokens INTEGER;
ALTER TABLE requests ADD COLUMN input_tokens INTEGER;
ALTER TABLE requests ADD COLUMN output_tokens INTEGER;
ALTER TABLE requests ADD COLUMN cache_read_tokens INTEGER;
ALTER TABLE requests ADD COLUMN cache_write_tokens INTEGER;
ALTER TABLE requests ADD COLUMN cost REAL;
ALTER TABLE requests ADD COLUMN cost_without REAL;
ALTER TABLE requests ADD COLUMN over_window INTEGER NOT NULL DEFAULT 0;
CREATE TABLE totals (
    day                TEXT NOT NULL,
    tenant             TEXT NOT NULL,
    model              TEXT NOT NULL,
    requests           INTEGER NOT NULL DEFAULT 0,
    compacted          INTEGER NOT NULL DEFAULT 0,
    client_tokens      INTEGER NOT NULL DEFAULT 0,
    forwarded_tokens   INTEGER NOT NULL DEFAULT 0,
    input_tokens       INTEGER NOT NULL DEFAULT 0,
    output_tokens      INTEGER NOT NULL DEFAULT 0,
    cache_read_tokens  INTEGER NOT NULL DEFAULT 0,
    cache_write_tokens INTEGER NOT NULL DEFAULT 0,
    cost               REAL NOT NULL DEFAULT 0,
    compared           INTEGER NOT NULL DEFAULT 0,
    cost_compared      REAL NOT NULL DEFAULT 0,
    cost_without       REAL NOT NULL DEFAULT 0,
    over_window        INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (day, tenant, model)
);";

/// Brings the store at `conn` to [`VERSION`].
pub(crate) fn run(conn: &mut Connection, path: &str) -> Result<()> {
    let sql = |cause| Error::Sqlite {
        path: path.to_owned(),
        cause,
    };
    let current = |conn: &Connection| -> rusqlite::Result<i64> {
        conn.query_row("PRAGMA user_version", [], |r| r.get(0))
    };
    // A store already at this version is only read: opening it beside a
    // writer (a proxy flushing its request log) waits for the writer.
    if current(conn).map_err(sql)? == VERSION {
        return Ok(());
    }
    // Migrating reads, then writes: take the write lock at BEGIN, where
    // SQLite waits out another writer (the busy timeout); a deferred
    // transaction would get "database is locked" at once on the upgrade.
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql)?;
    let mut version = current(&tx).map_err(sql)?;
    if version > VERSION {
        return Err(Error::TooNew {
            path: path.to_owned(),
            found: version,
            known: VERSION,
        });
    }
    if version == 0 {
        // Before versions were kept, the table was created if missing.
        let exists: bool = tx
            .query_row(
                "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'snapshots'",
                [],
                |r| r.get(0),
            )
            .map_err(sql)?;
        if !exists {
            tx.execute_batch(V1).map_err(sql)?;
        }
        version = 1;
    }
    if version == 1 {
        to_v2(&tx).map_err(sql)?;
        version = 2;
    }
    if version == 2 {
        tx.execute_batch(V3_SESSIONS).map_err(sql)?;
        version = 3;
    }
    if version == 3 {
        tx.execute_batch(V4_REQUESTS).map_err(sql)?;
        version = 4;
    }
    if version == 4 {
        tx.execute_batch(V5_PROVIDER_TOKENS).map_err(sql)?;
        version = 5;
    }
    if version == 5 {
        tx.execute_batch(V6_ORIGINALS).map_err(sql)?;
        version = 6;
    }
    if version == 6 {
        tx.execute_batch(V7_SETTINGS).map_err(sql)?;
        version = 7;
    }
    if version == 7 {
        for table in ["snapshots", "sessions"] {
            widen_families(&tx, table).map_err(sql)?;
        }
        version = 8;
    }
    if version == 8 {
        tx.execute_batch(V9_PARTS).map_err(sql)?;
    }
    tx.pragma_update(None, "user_version", VERSION)
        .map_err(sql)?;
    tx.commit().map_err(sql)
}

/// The families a row may have before version 8, and from it.
const FAMILIES_V2: &str = "('openai', 'anthropic')";
const FAMILIES_V8: &str = "('openai', 'anthropic', 'gemini')";

/// Rebuilds `table` with Gemini among its families: the same definition
/// (as SQLite keeps it, columns added by later versions included) under a
/// new name, the rows copied, the old table dropped.
fn widen_families(tx: &Transaction<'_>, table: &str) -> rusqlite::Result<()> {
    let definition: String = tx.query_row(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?1",
        [table],
        |r| r.get(0),
    )?;
    let wider = definition.replace(FAMILIES_V2, FAMILIES_V8);
    let Some(columns) = wider.find('(') else {
        return Ok(());
    };
    // An AUTOINCREMENT table's next id (past rows deleted since) goes on
    // from where it was: a new row never takes an id an old one had.
    let next: Option<i64> = tx
        .query_row(
            "SELECT seq FROM sqlite_sequence WHERE name = ?1",
            [table],
            |r| r.get(0),
        )
        .optional()?;
    let rebuilt = format!("CREATE TABLE {table}_v8 {}", &wider[columns..]);
    tx.execute_batch(&format!(
        "{rebuilt};
         INSERT INTO {table}_v8 SELECT * FROM {table};
         DROP TABLE {table};
         ALTER TABLE {table}_v8 RENAME TO {table};"
    ))?;
    if let Some(seq) = next {
        tx.execute("DELETE FROM sqlite_sequence WHERE name = ?1", [table])?;
        tx.execute(
            "INSERT INTO sqlite_sequence (name, seq) VALUES (?1, ?2)",
            params![table, seq],
        )?;
    }
    Ok(())
}

/// Adds the `family` column (from the report's side key) and rewrites
/// reports and attempts into the typed shape.
fn to_v2(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    tx.execute_batch(
        "ALTER TABLE snapshots ADD COLUMN family TEXT NOT NULL DEFAULT 'openai'
             CHECK (family IN ('openai', 'anthropic'));
         ALTER TABLE snapshots ADD COLUMN dropped_iterations INTEGER NOT NULL DEFAULT 0;",
    )?;
    let rows: Vec<(i64, String)> = {
        let mut stmt = tx.prepare("SELECT id, report FROM snapshots")?;
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<rusqlite::Result<_>>()?
    };
    for (id, text) in rows {
        // A report that does not parse is left as it was: `get` says so.
        let Ok(Value::Object(mut report)) = serde_json::from_str::<Value>(&text) else {
            continue;
        };
        let family = match report.remove("family") {
            Some(Value::String(f)) if f == "anthropic" => "anthropic",
            _ => "openai",
        };
        let attempts: Vec<Value> = match report.get("attempts") {
            Some(Value::Array(a)) => a.iter().map(attempt_v2).collect(),
            _ => Vec::new(),
        };
        report.insert("attempts".into(), Value::Array(attempts.clone()));
        if let Some(Value::Array(events)) = report.get_mut("events") {
            events.iter_mut().for_each(event_v2);
        }
        let dropped = report
            .get("policies")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|p| p.get("policy").and_then(Value::as_str) == Some("drop_iterations"))
            .filter_map(|p| p.get("items").and_then(Value::as_i64))
            .sum::<i64>();
        tx.execute(
            "UPDATE snapshots SET family = ?1, report = ?2, attempts = ?3, dropped_iterations = ?4
             WHERE id = ?5",
            params![
                family,
                Value::Object(report).to_string(),
                Value::Array(attempts).to_string(),
                dropped,
                id
            ],
        )?;
    }
    Ok(())
}

/// `{summarizer, ok, error, ms, verification}` → `{summarizer, ms, outcome}`.
fn attempt_v2(a: &Value) -> Value {
    let outcome = if a.get("ok") == Some(&Value::Bool(true)) {
        json!({"status": "used", "verification": a.get("verification").cloned().unwrap_or(Value::Null)})
    } else {
        let text = a
            .get("error")
            .and_then(Value::as_str)
            .unwrap_or("unknown error");
        json!({"status": "failed", "error": error_v2(text)})
    };
    json!({
        "summarizer": a.get("summarizer").cloned().unwrap_or(json!("?")),
        "ms": a.get("ms").cloned().unwrap_or(json!(0)),
        "outcome": outcome,
    })
}

/// A `SummarizeError` as version 1 stored it, by its display text, back
/// into its tagged form. Version 1 kept only the text, so this one
/// conversion reads it; nothing else classifies errors by their message.
fn error_v2(text: &str) -> Value {
    let tagged = |kind: &str, detail: Value| json!({"kind": kind, "detail": detail});
    for (prefix, kind) in [
        ("transport error: ", "transport"),
        ("malformed response: ", "malformed"),
        ("rejected briefing: ", "rejected"),
        ("not configured: ", "not_configured"),
    ] {
        if let Some(rest) = text.strip_prefix(prefix) {
            return tagged(kind, json!(rest));
        }
    }
    if let Some(secs) = text
        .strip_prefix("timed out after ")
        .and_then(|r| r.strip_suffix(" s"))
        .and_then(|n| n.parse::<u64>().ok())
    {
        return tagged("timeout", json!(secs));
    }
    if let Some((status, body)) = text
        .strip_prefix("HTTP ")
        .and_then(|r| r.split_once(": "))
        .and_then(|(s, b)| Some((s.parse::<u16>().ok()?, b)))
    {
        return tagged("status", json!({"status": status, "body": body}));
    }
    tagged("transport", json!(text))
}

/// `history_size` gained `calibrated_tokens`: version 1 knew no calibration,
/// so it equals `tokens`. (Version 1 stored only compactions, so no
/// `compaction_skipped` event with its old text reason is ever found.)
fn event_v2(e: &mut Value) {
    if let Some(obj) = e.as_object_mut()
        && obj.get("event").and_then(Value::as_str) == Some("history_size")
        && !obj.contains_key("calibrated_tokens")
    {
        let tokens = obj.get("tokens").cloned().unwrap_or(json!(0));
        obj.insert("calibrated_tokens".into(), tokens);
    }
}
