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
    /// What it cost, and what sending the client's request whole would have.
    pub account: Accounting,
}

impl RequestRecord {
    /// Prompt tokens forwarded: the provider's report when it gave one,
    /// else abridge's count.
    pub fn forwarded(&self) -> Calibrated {
        self.usage.map_or(self.tokens, Calibrated::from_reported)
    }
}

/// A request's tokens and dollars, with abridge and without it.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Accounting {
    /// Whose it is: its tenant's hashed id (never a credential).
    pub tenant: String,
    /// Tokens the client sent, in the provider's units (before any
    /// compaction; `tokens` is what went upstream).
    pub client_tokens: Calibrated,
    /// The provider's report: prompt tokens neither read from nor written
    /// to its cache, output tokens, cache reads and cache writes.
    pub input_tokens: Option<u64>,
    /// Output tokens reported.
    pub output_tokens: Option<u64>,
    /// Prompt tokens read from the provider's cache.
    pub cache_read_tokens: Option<u64>,
    /// Prompt tokens written to the provider's cache.
    pub cache_write_tokens: Option<u64>,
    /// Dollars for what was forwarded, at the registry's prices, from the
    /// provider's report (a compaction's cache write is its own request's).
    pub cost: Option<f64>,
    /// Dollars the client's request would have cost sent whole: its prompt
    /// read from the cache up to what the session's last request held, the
    /// rest written, and the same output. `None` when it is not known, or
    /// when the request would not have fit the model's window whole.
    pub cost_without: Option<f64>,
    /// The client's request was over the model's window: it would not
    /// have been answered without abridge (counted, not priced).
    pub over_window: bool,
}

/// A session's requests in short: how many, and the last one.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestStats {
    /// Requests recorded.
    pub requests: u64,
    /// The newest.
    pub last: RequestRecord,
}

const COLUMNS: &str = "source, at, model, tokens, usage, compacted, snapshot, trigger_tokens, target, recalls, \
     tenant, client_tokens, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost, \
     cost_without, over_window";

/// Columns in [`COLUMNS`]: what a query selects after them starts here.
const WIDTH: usize = 19;

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
        account: Accounting {
            tenant: r.get::<_, Option<String>>(10)?.unwrap_or_default(),
            client_tokens: Calibrated::new(n(11)?.unwrap_or(0)),
            input_tokens: n(12)?,
            output_tokens: n(13)?,
            cache_read_tokens: n(14)?,
            cache_write_tokens: n(15)?,
            cost: r.get(16)?,
            cost_without: r.get(17)?,
            over_window: r.get(18)?,
        },
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
            .query_map([], |r| Ok((row(r)?, r.get::<_, i64>(WIDTH)?)))
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

/// Appends request `r` to the log on `conn`, and adds it to its day's,
/// tenant's and model's totals; every thousandth row trims the log to
/// [`KEPT_REQUESTS`].
pub(crate) fn insert_on(conn: &rusqlite::Connection, r: &RequestRecord) -> rusqlite::Result<()> {
    let a = &r.account;
    let id = conn
        .prepare_cached(&format!(
            "INSERT INTO requests ({COLUMNS}) VALUES (?1, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), ?2, \
             ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18) RETURNING id"
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
                r.recalls,
                a.tenant,
                int(Some(a.client_tokens.get())),
                int(a.input_tokens),
                int(a.output_tokens),
                int(a.cache_read_tokens),
                int(a.cache_write_tokens),
                a.cost,
                a.cost_without,
                a.over_window,
            ],
            |row| row.get::<_, i64>(0),
        )?;
    crate::totals::add_on(conn, r)?;
    if id % 1000 == 0 {
        conn.execute(
            "DELETE FROM requests WHERE id <= ?1",
            params![id - KEPT_REQUESTS],
        )?;
    }
    Ok(())
}
