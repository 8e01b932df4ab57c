//! The request log: one row per request a proxy sent upstream — what
//! abridge counted, what the provider reported, whether it went compacted —
//! for the dashboard's timelines. Capped: the oldest rows beyond
//! [`KEPT_REQUESTS`] go.

use std::collections::HashMap;

use abridge::SnapshotId;
use abridge::tokens::{Calibrated, Reported};
use rusqlite::params;
use serde::Serialize;

use crate::{Result, Store};

/// Rows the request log keeps (the newest).
pub(crate) const KEPT_REQUESTS: i64 = 200_000;

/// One request a proxy sent upstream.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RequestRecord {
    /// The session it belongs to.
    pub source: String,
    /// When it was recorded (UTC, RFC 3339; empty until stored).
    pub at: String,
    /// Its model.
    pub model: Option<String>,
    /// Tokens of what was sent, as abridge counts them, in the provider's
    /// units (calibrated).
    pub tokens: Calibrated,
    /// Prompt tokens the provider reported, when it did.
    pub usage: Option<Reported>,
    /// Sent rewritten (compacted now, or carrying an earlier compaction).
    pub compacted: bool,
    /// The compaction made for this request, if one was.
    pub snapshot: Option<SnapshotId>,
    /// The session's trigger.
    pub trigger: Option<Calibrated>,
    /// The session's target.
    pub target: Option<Calibrated>,
    /// Calls of the recall tool the proxy answered for it.
    pub recalls: u32,
}

/// A session's requests in short: how many, and the last one.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestStats {
    /// Requests recorded.
    pub requests: u64,
    /// The newest.
    pub last: RequestRecord,
}

const COLUMNS: &str =
    "source, at, model, tokens, usage, compacted, snapshot, trigger_tokens, target, recalls";

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<RequestRecord> {
    let n = |i| -> rusqlite::Result<Option<u64>> {
        Ok(r.get::<_, Option<i64>>(i)?.map(|v| v.max(0) as u64))
    };
    Ok(RequestRecord {
        source: r.get(0)?,
        at: r.get(1)?,
        model: r.get(2)?,
        tokens: Calibrated::new(n(3)?.unwrap_or(0)),
        usage: n(4)?.map(Reported::new),
        compacted: r.get(5)?,
        snapshot: r.get::<_, Option<i64>>(6)?.map(SnapshotId),
        trigger: n(7)?.map(Calibrated::new),
        target: n(8)?.map(Calibrated::new),
        recalls: u32::try_from(n(9)?.unwrap_or(0)).unwrap_or(u32::MAX),
    })
}

fn int(v: Option<u64>) -> Option<i64> {
    v.map(|v| i64::try_from(v).unwrap_or(i64::MAX))
}

impl Store {
    /// Appends a request; every thousandth row trims the log to [`KEPT_REQUESTS`].
    pub(crate) fn insert_request(&mut self, r: &RequestRecord) -> Result<()> {
        insert_on(&self.conn(), r).map_err(|e| self.sql(e))
    }

    pub(crate) fn select_requests(&self, source: &str, limit: usize) -> Result<Vec<RequestRecord>> {
        let sql = format!(
            "SELECT {COLUMNS} FROM (SELECT id, {COLUMNS} FROM requests WHERE source = ?1 ORDER BY id DESC LIMIT ?2) ORDER BY id"
        );
        let conn = self.conn();
        let mut stmt = conn.prepare(&sql).map_err(|e| self.sql(e))?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = stmt
            .query_map(params![source, limit], row)
            .map_err(|e| self.sql(e))?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(|e| self.sql(e))
    }

    /// Every session's request count and last request.
    pub(crate) fn select_request_stats(&self) -> Result<HashMap<String, RequestStats>> {
        let sql = format!(
            "SELECT {COLUMNS}, c.n FROM requests r JOIN
               (SELECT max(id) AS last, count(*) AS n FROM requests GROUP BY source) c ON r.id = c.last"
        );
        let conn = self.conn();
        let mut stmt = conn.prepare(&sql).map_err(|e| self.sql(e))?;
        let rows = stmt
            .query_map([], |r| Ok((row(r)?, r.get::<_, i64>(10)?)))
            .map_err(|e| self.sql(e))?;
        let mut out = HashMap::new();
        for pair in rows {
            let (last, n) = pair.map_err(|e| self.sql(e))?;
            out.insert(
                last.source.clone(),
                RequestStats {
                    requests: n.max(0) as u64,
                    last,
                },
            );
        }
        Ok(out)
    }
}

/// Appends request `r` to the log on `conn`; every thousandth row trims the
/// log to [`KEPT_REQUESTS`].
pub(crate) fn insert_on(conn: &rusqlite::Connection, r: &RequestRecord) -> rusqlite::Result<()> {
    let id = conn
        .prepare_cached(&format!(
            "INSERT INTO requests ({COLUMNS}) VALUES (?1, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) RETURNING id"
        ))?
        .query_row(
            params![
                r.source,
                r.model,
                int(Some(r.tokens.get())),
                int(r.usage.map(Reported::get)),
                r.compacted,
                r.snapshot.map(|s| s.0),
                int(r.trigger.map(Calibrated::get)),
                int(r.target.map(Calibrated::get)),
                r.recalls
            ],
            |row| row.get::<_, i64>(0),
        )?;
    if id % 1000 == 0 {
        conn.execute(
            "DELETE FROM requests WHERE id <= ?1",
            params![id - KEPT_REQUESTS],
        )?;
    }
    Ok(())
}
