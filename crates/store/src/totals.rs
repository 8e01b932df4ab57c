//! What a proxy's requests add up to, per day, tenant and model: tokens the
//! clients sent and tokens forwarded, the providers' reports, and dollars
//! with abridge and (estimated) without it. Each request row adds to its
//! day's line as it is written, so the sums outlive the request log's
//! trimming.

use rusqlite::params;
use serde::{Deserialize, Serialize};

use crate::{RequestRecord, Result, Store};

/// One day's, tenant's and model's sums (or a coarser group's).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Totals {
    /// `YYYY-MM-DD` (UTC), or empty when summed over days.
    pub day: String,
    /// The tenant's hashed id, or empty when summed over tenants.
    pub tenant: String,
    /// The model, or empty when summed over models.
    pub model: String,
    /// Requests forwarded.
    pub requests: u64,
    /// Of those, sent rewritten.
    pub compacted: u64,
    /// Tokens the clients sent, in the provider's units.
    pub client_tokens: u64,
    /// Tokens forwarded, in the provider's units.
    pub forwarded_tokens: u64,
    /// The providers' reports: prompt tokens neither read from nor written
    /// to their caches, output, cache reads, cache writes.
    pub input_tokens: u64,
    /// Output tokens reported.
    pub output_tokens: u64,
    /// Prompt tokens read from the providers' caches.
    pub cache_read_tokens: u64,
    /// Prompt tokens written to the providers' caches.
    pub cache_write_tokens: u64,
    /// Dollars for what was forwarded (priced requests).
    pub cost: f64,
    /// Requests priced both ways (with and without abridge).
    pub compared: u64,
    /// Dollars of those with abridge.
    pub cost_compared: f64,
    /// Dollars of those without it (estimated).
    pub cost_without: f64,
    /// Requests over their model's window as the client sent them: not
    /// answerable without abridge, counted, never priced as a saving.
    pub over_window: u64,
}

impl Totals {
    /// Dollars saved on the requests priced both ways.
    pub fn saved(&self) -> f64 {
        self.cost_without - self.cost_compared
    }

    /// Tokens the clients sent that were not forwarded.
    pub fn tokens_saved(&self) -> u64 {
        self.client_tokens.saturating_sub(self.forwarded_tokens)
    }
}

/// How sums are grouped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupBy {
    /// A line per day (all tenants and models).
    Day,
    /// A line per tenant.
    Tenant,
    /// A line per model.
    Model,
    /// A line per day, tenant and model.
    All,
}

impl GroupBy {
    /// The columns a query groups by, and the ones it leaves empty.
    pub(crate) fn columns(self) -> [&'static str; 3] {
        match self {
            GroupBy::Day => ["day", "''", "''"],
            GroupBy::Tenant => ["''", "tenant", "''"],
            GroupBy::Model => ["''", "''", "model"],
            GroupBy::All => ["day", "tenant", "model"],
        }
    }
}

impl Totals {
    /// Adds the sums of `other` (its keys left aside).
    pub fn merge(&mut self, other: &Totals) {
        self.requests += other.requests;
        self.compacted += other.compacted;
        self.client_tokens += other.client_tokens;
        self.forwarded_tokens += other.forwarded_tokens;
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
        self.cost += other.cost;
        self.compared += other.compared;
        self.cost_compared += other.cost_compared;
        self.cost_without += other.cost_without;
        self.over_window += other.over_window;
    }

    /// Adds request `r`.
    pub fn add(&mut self, r: &RequestRecord) {
        let a = &r.account;
        let n = |v: Option<u64>| v.unwrap_or(0);
        self.requests += 1;
        self.compacted += u64::from(r.compacted);
        self.client_tokens += a.client_tokens.get();
        self.forwarded_tokens += r.forwarded().get();
        self.input_tokens += n(a.input_tokens);
        self.output_tokens += n(a.output_tokens);
        self.cache_read_tokens += n(a.cache_read_tokens);
        self.cache_write_tokens += n(a.cache_write_tokens);
        self.cost += a.cost.unwrap_or(0.0);
        if let Some((with, without)) = a.cost.zip(a.cost_without).filter(|_| !a.over_window) {
            self.compared += 1;
            self.cost_compared += with;
            self.cost_without += without;
        }
        self.over_window += u64::from(a.over_window);
    }

    /// The sums as SQL values, in [`SUMS`] order.
    pub(crate) fn values(&self) -> ([i64; 10], [f64; 3]) {
        let i = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        (
            [
                i(self.requests),
                i(self.compacted),
                i(self.client_tokens),
                i(self.forwarded_tokens),
                i(self.input_tokens),
                i(self.output_tokens),
                i(self.cache_read_tokens),
                i(self.cache_write_tokens),
                i(self.compared),
                i(self.over_window),
            ],
            [self.cost, self.cost_compared, self.cost_without],
        )
    }
}

/// The upsert that adds a line's sums (SQLite placeholders `?N`, or
/// PostgreSQL's `$N`; `day` the SQL of today's date), in [`SUMS`] order
/// after tenant and model.
pub(crate) fn upsert(table: &str, day: &str, placeholder: char) -> String {
    let cols: Vec<&str> = INT_SUMS.iter().chain(&FLOAT_SUMS).copied().collect();
    let values: Vec<String> = (1..=cols.len() + 2)
        .map(|k| format!("{placeholder}{k}"))
        .collect();
    let set: Vec<String> = cols
        .iter()
        .map(|c| format!("{c} = {table}.{c} + excluded.{c}"))
        .collect();
    format!(
        "INSERT INTO {table} (day, tenant, model, {}) VALUES ({day}, {})
         ON CONFLICT (day, tenant, model) DO UPDATE SET {}",
        cols.join(", "),
        values.join(", "),
        set.join(", ")
    )
}

/// The integer sums' columns, in [`Totals::values`]' order.
pub(crate) const INT_SUMS: [&str; 10] = [
    "requests",
    "compacted",
    "client_tokens",
    "forwarded_tokens",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "compared",
    "over_window",
];

/// The dollar sums' columns, in [`Totals::values`]' order.
pub(crate) const FLOAT_SUMS: [&str; 3] = ["cost", "cost_compared", "cost_without"];

/// Adds request `r` to its day's, tenant's and model's line on `conn`.
pub(crate) fn add_on(conn: &rusqlite::Connection, r: &RequestRecord) -> rusqlite::Result<()> {
    let mut line = Totals::default();
    line.add(r);
    let (ints, floats) = line.values();
    let mut stmt = conn.prepare_cached(&upsert("totals", "strftime('%Y-%m-%d', 'now')", '?'))?;
    let model = r.model.as_deref().unwrap_or("");
    let mut values: Vec<&dyn rusqlite::ToSql> = vec![&r.account.tenant, &model];
    values.extend(ints.iter().map(|v| v as &dyn rusqlite::ToSql));
    values.extend(floats.iter().map(|v| v as &dyn rusqlite::ToSql));
    stmt.execute(values.as_slice())?;
    Ok(())
}

/// The SQL that reads the sums grouped `by`, newest day first, at most
/// `limit` (the first placeholder) lines; `cast` wraps each sum (a
/// database that sums integers as another type casts them back).
pub(crate) fn select(table: &str, by: GroupBy, placeholder: &str, cast: [&str; 2]) -> String {
    let [d, t, m] = by.columns();
    let sums: Vec<String> = INT_SUMS
        .iter()
        .map(|c| format!("sum({c}){}", cast[0]))
        .chain(FLOAT_SUMS.iter().map(|c| format!("sum({c}){}", cast[1])))
        .collect();
    format!(
        "SELECT {d}, {t}, {m}, {} FROM {table} GROUP BY 1, 2, 3 ORDER BY 1 DESC, 2, 3 LIMIT {placeholder}",
        sums.join(", ")
    )
}

/// A line read back: the three keys, then [`INT_SUMS`], then [`FLOAT_SUMS`].
pub(crate) fn line(keys: [String; 3], ints: [u64; 10], floats: [f64; 3]) -> Totals {
    let [day, tenant, model] = keys;
    Totals {
        day,
        tenant,
        model,
        requests: ints[0],
        compacted: ints[1],
        client_tokens: ints[2],
        forwarded_tokens: ints[3],
        input_tokens: ints[4],
        output_tokens: ints[5],
        cache_read_tokens: ints[6],
        cache_write_tokens: ints[7],
        compared: ints[8],
        over_window: ints[9],
        cost: floats[0],
        cost_compared: floats[1],
        cost_without: floats[2],
    }
}

impl Store {
    /// The sums grouped `by`, the newest day first (at most `limit` lines).
    pub(crate) fn select_totals(&self, by: GroupBy, limit: usize) -> Result<Vec<Totals>> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare(&select("totals", by, "?1", ["", ""]))
            .map_err(|e| self.sql(e))?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = stmt
            .query_map(params![limit], |r| {
                let keys = [r.get(0)?, r.get(1)?, r.get(2)?];
                let mut ints = [0u64; 10];
                for (k, v) in ints.iter_mut().enumerate() {
                    *v = r.get::<_, i64>(3 + k)?.max(0) as u64;
                }
                let floats = [r.get(13)?, r.get(14)?, r.get(15)?];
                Ok(line(keys, ints, floats))
            })
            .map_err(|e| self.sql(e))?;
        rows.collect::<rusqlite::Result<_>>()
            .map_err(|e| self.sql(e))
    }
}
