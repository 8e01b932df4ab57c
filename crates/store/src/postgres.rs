//! The shared store: PostgreSQL, for several proxy replicas behind one load
//! balancer. Sessions and snapshots live in `abridge_sessions` and
//! `abridge_snapshots`, created on first connect.
//!
//! Its [`SessionStore`] methods block the calling thread on the runtime
//! given at connect time: call them from a blocking thread (as the proxy
//! does, from `spawn_blocking`), never from an async task.

use std::collections::HashMap;

use abridge::model::Family;
use abridge::recall::{self, StoredOriginal};
use abridge::tokens::{Calibrated, Reported};
use abridge::{SnapshotData, SnapshotError, SnapshotId, SnapshotSink, StoreConfig};
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio::runtime::Handle;
use tokio_postgres::{GenericClient, NoTls};

use crate::requests::KEPT_REQUESTS;
use crate::row::{BODIES_IN_PARTS, OriginalRow, SIDES, SnapshotRow, parse};
use crate::session::{
    SessionRecord, SessionStore, StoredParts, Write, Written, record_from, stored_parts,
};
use crate::{Entry, Error, Pruned, RequestRecord, RequestStats, Result, Snapshot, SnapshotStore};

const SCHEMA: &str = "
SELECT pg_advisory_xact_lock(7400912);
CREATE TABLE IF NOT EXISTS abridge_sessions (
    id                 TEXT PRIMARY KEY,
    family             TEXT NOT NULL CHECK (family IN ('openai', 'anthropic', 'gemini')),
    model              TEXT,
    source_len         BIGINT,
    source_fingerprint BIGINT,
    tokens             BIGINT,
    body               TEXT,
    calibration        TEXT NOT NULL,
    version            BIGINT NOT NULL DEFAULT 0,
    updated_at         TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS abridge_snapshots (
    id                 BIGSERIAL PRIMARY KEY,
    created_at         TIMESTAMPTZ NOT NULL DEFAULT now(),
    source             TEXT,
    model              TEXT,
    family             TEXT NOT NULL,
    tokens_before      BIGINT NOT NULL,
    tokens_after       BIGINT NOT NULL,
    target             BIGINT,
    summarizer         TEXT,
    briefing           TEXT,
    attempts           TEXT NOT NULL,
    report             TEXT NOT NULL,
    config             TEXT NOT NULL,
    before_body        TEXT NOT NULL,
    after_body         TEXT NOT NULL,
    dropped_iterations BIGINT NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS abridge_requests (
    id             BIGSERIAL PRIMARY KEY,
    source         TEXT NOT NULL,
    at             TIMESTAMPTZ NOT NULL DEFAULT now(),
    model          TEXT,
    tokens         BIGINT NOT NULL,
    usage          BIGINT,
    compacted      BOOLEAN NOT NULL,
    snapshot       BIGINT,
    trigger_tokens BIGINT,
    target         BIGINT
);
CREATE INDEX IF NOT EXISTS abridge_requests_by_source ON abridge_requests (source, id);
ALTER TABLE abridge_snapshots ADD COLUMN IF NOT EXISTS provider_tokens_before BIGINT;
ALTER TABLE abridge_snapshots ADD COLUMN IF NOT EXISTS provider_tokens_after BIGINT;
CREATE TABLE IF NOT EXISTS abridge_originals (
    handle   TEXT PRIMARY KEY,
    snapshot BIGINT NOT NULL,
    kind     TEXT NOT NULL,
    label    TEXT NOT NULL,
    body     TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS abridge_originals_by_snapshot ON abridge_originals (snapshot);
ALTER TABLE abridge_requests ADD COLUMN IF NOT EXISTS recalls BIGINT NOT NULL DEFAULT 0;
ALTER TABLE abridge_requests ADD COLUMN IF NOT EXISTS tenant TEXT;
ALTER TABLE abridge_requests ADD COLUMN IF NOT EXISTS client_tokens BIGINT;
ALTER TABLE abridge_requests ADD COLUMN IF NOT EXISTS input_tokens BIGINT;
ALTER TABLE abridge_requests ADD COLUMN IF NOT EXISTS output_tokens BIGINT;
ALTER TABLE abridge_requests ADD COLUMN IF NOT EXISTS cache_read_tokens BIGINT;
ALTER TABLE abridge_requests ADD COLUMN IF NOT EXISTS cache_write_tokens BIGINT;
ALTER TABLE abridge_requests ADD COLUMN IF NOT EXISTS cost DOUBLE PRECISION;
ALTER TABLE abridge_requests ADD COLUMN IF NOT EXISTS cost_without DOUBLE PRECISION;
ALTER TABLE abridge_requests ADD COLUMN IF NOT EXISTS over_window BOOLEAN NOT NULL DEFAULT false;
CREATE TABLE IF NOT EXISTS abridge_totals (
    day                TEXT NOT NULL,
    tenant             TEXT NOT NULL,
    model              TEXT NOT NULL,
    requests           BIGINT NOT NULL DEFAULT 0,
    compacted          BIGINT NOT NULL DEFAULT 0,
    client_tokens      BIGINT NOT NULL DEFAULT 0,
    forwarded_tokens   BIGINT NOT NULL DEFAULT 0,
    input_tokens       BIGINT NOT NULL DEFAULT 0,
    output_tokens      BIGINT NOT NULL DEFAULT 0,
    cache_read_tokens  BIGINT NOT NULL DEFAULT 0,
    cache_write_tokens BIGINT NOT NULL DEFAULT 0,
    cost               DOUBLE PRECISION NOT NULL DEFAULT 0,
    compared           BIGINT NOT NULL DEFAULT 0,
    cost_compared      DOUBLE PRECISION NOT NULL DEFAULT 0,
    cost_without       DOUBLE PRECISION NOT NULL DEFAULT 0,
    over_window        BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (day, tenant, model)
);
ALTER TABLE abridge_snapshots ADD COLUMN IF NOT EXISTS bodies SMALLINT NOT NULL DEFAULT 0;
ALTER TABLE abridge_snapshots ADD COLUMN IF NOT EXISTS history_key TEXT;
CREATE TABLE IF NOT EXISTS abridge_parts (
    source TEXT NOT NULL,
    hash   BYTEA NOT NULL,
    body   TEXT NOT NULL,
    PRIMARY KEY (source, hash)
);
CREATE TABLE IF NOT EXISTS abridge_snapshot_parts (
    snapshot BIGINT NOT NULL,
    side     SMALLINT NOT NULL,
    position INTEGER NOT NULL,
    hash     BYTEA NOT NULL,
    PRIMARY KEY (snapshot, side, position)
);
CREATE INDEX IF NOT EXISTS abridge_snapshot_parts_by_hash ON abridge_snapshot_parts (hash);
CREATE TABLE IF NOT EXISTS abridge_settings (
    name  TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
DO $$ BEGIN
    -- Sessions of a store created before Gemini: widen their families.
    IF EXISTS (SELECT 1 FROM pg_constraint WHERE conname = 'abridge_sessions_family_check'
               AND pg_get_constraintdef(oid) NOT LIKE '%gemini%') THEN
        ALTER TABLE abridge_sessions DROP CONSTRAINT abridge_sessions_family_check;
        ALTER TABLE abridge_sessions ADD CONSTRAINT abridge_sessions_family_check
            CHECK (family IN ('openai', 'anthropic', 'gemini'));
    END IF;
END $$;";

/// Sessions and snapshots in PostgreSQL. A clone shares the pool.
#[derive(Clone)]
pub struct PgStore {
    pool: Pool,
    handle: Handle,
    shown: String,
    source: Option<String>,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("at", &self.shown)
            .finish_non_exhaustive()
    }
}

fn pg(shown: &str, e: impl std::fmt::Display) -> Error {
    Error::Postgres {
        at: shown.to_owned(),
        message: e.to_string(),
    }
}

impl PgStore {
    /// Connects to `url` (`postgres://user@host:port/db`) and creates the
    /// tables if missing. The password, if the URL has one, is never shown.
    pub async fn connect(url: &str) -> Result<PgStore> {
        let config: tokio_postgres::Config = url.parse().map_err(|e| pg("the URL", e))?;
        let shown = describe(&config);
        let manager = Manager::from_config(
            config,
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(8)
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .build()
            .map_err(|e| pg(&shown, e))?;
        let mut client = pool.get().await.map_err(|e| pg(&shown, e))?;
        let tx = client.transaction().await.map_err(|e| pg(&shown, e))?;
        tx.batch_execute(SCHEMA).await.map_err(|e| pg(&shown, e))?;
        tx.commit().await.map_err(|e| pg(&shown, e))?;
        drop(client);
        Ok(PgStore {
            pool,
            handle: Handle::current(),
            shown,
            source: None,
        })
    }

    /// Names the source recorded with snapshots taken through
    /// [`SnapshotSink`] (the proxy names each session instead).
    pub fn with_source(mut self, source: impl Into<String>) -> Self {
        self.source = Some(source.into());
        self
    }

    fn insert(&self, source: Option<&str>, s: &SnapshotData<'_>) -> Result<SnapshotId> {
        let r = SnapshotRow::of(s)?;
        self.run(async {
            let mut client = self.client().await?;
            let tx = client.transaction().await.map_err(|e| pg(&self.shown, e))?;
            let id = write_snapshot(&tx, source, &r)
                .await
                .map_err(|e| pg(&self.shown, e))?;
            tx.commit().await.map_err(|e| pg(&self.shown, e))?;
            Ok(id)
        })
    }

    /// The original a handle names, if kept.
    pub fn original(&self, handle: &recall::Handle) -> Result<Option<StoredOriginal>> {
        let row = self.run(async {
            self.client()
                .await?
                .query_opt(
                    "SELECT o.handle, o.kind, o.label, o.body, s.source FROM abridge_originals o
                     LEFT JOIN abridge_snapshots s ON s.id = o.snapshot WHERE o.handle = $1",
                    &[&handle.as_str()],
                )
                .await
                .map_err(|e| pg(&self.shown, e))
        })?;
        row.map(|r| {
            OriginalRow {
                handle: r.get(0),
                kind: r.get(1),
                label: r.get(2),
                body: r.get(3),
            }
            .into_stored(r.get(4))
        })
        .transpose()
    }

    fn run<T>(&self, f: impl std::future::Future<Output = Result<T>>) -> Result<T> {
        self.handle.block_on(f)
    }

    async fn client(&self) -> Result<deadpool_postgres::Object> {
        self.pool.get().await.map_err(|e| pg(&self.shown, e))
    }
}

/// Writes snapshot `r` of `source` in transaction `tx`: its row, its
/// bodies' parts once per source, and its originals, each in one statement.
async fn write_snapshot(
    tx: &tokio_postgres::Transaction<'_>,
    source: Option<&str>,
    r: &SnapshotRow,
) -> std::result::Result<SnapshotId, tokio_postgres::Error> {
    let row = tx
        .query_one(
            "INSERT INTO abridge_snapshots (source, model, family, tokens_before,
                tokens_after, target, summarizer, briefing, attempts, report, config,
                before_body, after_body, dropped_iterations, provider_tokens_before,
                provider_tokens_after, bodies, history_key)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, '', '', $12, $13, $14, $15, $16)
             RETURNING id",
            &[
                &source,
                &r.model,
                &r.family,
                &r.tokens_before,
                &r.tokens_after,
                &r.target,
                &r.summarizer,
                &r.briefing,
                &r.attempts,
                &r.report,
                &r.config,
                &r.dropped_iterations,
                &r.provider_tokens_before,
                &r.provider_tokens_after,
                &(BODIES_IN_PARTS as i16),
                &r.history_key(),
            ],
        )
        .await?;
    let id: i64 = row.get(0);
    let distinct = r.distinct_parts();
    let hashes: Vec<&[u8]> = distinct.iter().map(|(h, _)| &h[..]).collect();
    let texts: Vec<&str> = distinct.iter().map(|(_, t)| *t).collect();
    tx.execute(
        "INSERT INTO abridge_parts (source, hash, body)
         SELECT $1, h, b FROM UNNEST($2::bytea[], $3::text[]) AS p(h, b)
         ON CONFLICT DO NOTHING",
        &[&source.unwrap_or_default(), &hashes, &texts],
    )
    .await?;
    let (mut sides, mut positions, mut listed) = (Vec::new(), Vec::new(), Vec::new());
    for (side, at, hash) in r.listing() {
        sides.push(side as i16);
        positions.push(at as i32);
        listed.push(&hash[..]);
    }
    tx.execute(
        "INSERT INTO abridge_snapshot_parts (snapshot, side, position, hash)
         SELECT $1, s, p, h FROM UNNEST($2::smallint[], $3::int[], $4::bytea[]) AS l(s, p, h)",
        &[&id, &sides, &positions, &listed],
    )
    .await?;
    // An original named again goes with the newest snapshot naming it; all
    // of them in one statement (one round trip).
    if !r.originals.is_empty() {
        let column =
            |f: fn(&OriginalRow) -> &str| -> Vec<&str> { r.originals.iter().map(f).collect() };
        tx.execute(
            "INSERT INTO abridge_originals (handle, snapshot, kind, label, body)
             SELECT h, $2, k, l, b FROM UNNEST($1::text[], $3::text[], $4::text[], $5::text[])
                AS o(h, k, l, b)
             ON CONFLICT (handle) DO UPDATE SET snapshot = EXCLUDED.snapshot,
                label = EXCLUDED.label",
            &[
                &column(|o| &o.handle),
                &id,
                &column(|o| &o.kind),
                &column(|o| &o.label),
                &column(|o| &o.body),
            ],
        )
        .await?;
    }
    Ok(SnapshotId(id))
}

/// Stores (or replaces) session `id` as `p`; its new version.
async fn save_on(
    client: &impl GenericClient,
    id: &str,
    p: &StoredParts,
) -> std::result::Result<i64, tokio_postgres::Error> {
    let row = client
        .query_one(
            "INSERT INTO abridge_sessions (id, family, model, source_len,
                source_fingerprint, tokens, body, calibration, version, updated_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 1, now())
             ON CONFLICT (id) DO UPDATE SET family = $2, model = $3, source_len = $4,
                source_fingerprint = $5, tokens = $6, body = $7, calibration = $8,
                version = abridge_sessions.version + 1, updated_at = now()
             RETURNING version",
            &[
                &id,
                &p.family,
                &p.model,
                &p.len,
                &p.fingerprint,
                &p.tokens,
                &p.body,
                &p.state,
            ],
        )
        .await?;
    Ok(row.get(0))
}

/// Appends request rows to the log in one statement; past every thousandth
/// id, trims the log to [`KEPT_REQUESTS`].
async fn insert_requests(
    client: &impl GenericClient,
    rows: &[&RequestRecord],
) -> std::result::Result<(), tokio_postgres::Error> {
    if rows.is_empty() {
        return Ok(());
    }
    let int = |v: Option<u64>| v.map(|v| i64::try_from(v).unwrap_or(i64::MAX));
    let col = |f: &dyn Fn(&RequestRecord) -> Option<i64>| -> Vec<Option<i64>> {
        rows.iter().map(|r| f(r)).collect()
    };
    let sources: Vec<&str> = rows.iter().map(|r| r.source.as_str()).collect();
    let models: Vec<Option<&str>> = rows.iter().map(|r| r.model.as_deref()).collect();
    let compacted: Vec<bool> = rows.iter().map(|r| r.compacted).collect();
    let tenants: Vec<&str> = rows.iter().map(|r| r.account.tenant.as_str()).collect();
    let float = |f: &dyn Fn(&RequestRecord) -> Option<f64>| -> Vec<Option<f64>> {
        rows.iter().map(|r| f(r)).collect()
    };
    let over: Vec<bool> = rows.iter().map(|r| r.account.over_window).collect();
    let row = client
        .query_one(
            "WITH added AS (
                 INSERT INTO abridge_requests (source, model, tokens, usage, compacted, snapshot,
                     trigger_tokens, target, recalls, tenant, client_tokens, input_tokens,
                     output_tokens, cache_read_tokens, cache_write_tokens, cost, cost_without,
                     over_window)
                 SELECT * FROM UNNEST($1::text[], $2::text[], $3::bigint[], $4::bigint[],
                     $5::boolean[], $6::bigint[], $7::bigint[], $8::bigint[], $9::bigint[],
                     $10::text[], $11::bigint[], $12::bigint[], $13::bigint[], $14::bigint[],
                     $15::bigint[], $16::float8[], $17::float8[], $18::boolean[])
                 RETURNING id)
             SELECT coalesce(min(id), 0), coalesce(max(id), 0) FROM added",
            &[
                &sources,
                &models,
                &col(&|r| int(Some(r.tokens.get()))),
                &col(&|r| int(r.usage.map(Reported::get))),
                &compacted,
                &col(&|r| r.snapshot.map(|s| s.0)),
                &col(&|r| int(r.trigger.map(Calibrated::get))),
                &col(&|r| int(r.target.map(Calibrated::get))),
                &col(&|r| Some(i64::from(r.recalls))),
                &tenants,
                &col(&|r| int(Some(r.account.client_tokens.get()))),
                &col(&|r| int(r.account.input_tokens)),
                &col(&|r| int(r.account.output_tokens)),
                &col(&|r| int(r.account.cache_read_tokens)),
                &col(&|r| int(r.account.cache_write_tokens)),
                &float(&|r| r.account.cost),
                &float(&|r| r.account.cost_without),
                &over,
            ],
        )
        .await?;
    add_totals(client, rows).await?;
    let (first, last): (i64, i64) = (row.get(0), row.get(1));
    if first / 1000 != last / 1000 || first % 1000 == 0 {
        client
            .execute(
                "DELETE FROM abridge_requests WHERE id <= $1",
                &[&(last - KEPT_REQUESTS)],
            )
            .await?;
    }
    Ok(())
}

/// Adds `rows` to their day's, tenant's and model's totals: one statement
/// per tenant and model of the batch.
async fn add_totals(
    client: &impl GenericClient,
    rows: &[&RequestRecord],
) -> std::result::Result<(), tokio_postgres::Error> {
    let mut lines: std::collections::BTreeMap<(&str, &str), crate::Totals> =
        std::collections::BTreeMap::new();
    for r in rows {
        let model = r.model.as_deref().unwrap_or("");
        lines
            .entry((r.account.tenant.as_str(), model))
            .or_default()
            .add(r);
    }
    let sql = crate::totals::upsert(
        "abridge_totals",
        "to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD')",
        '$',
    );
    for ((tenant, model), line) in lines {
        let (ints, floats) = line.values();
        let mut values: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = vec![&tenant, &model];
        values.extend(
            ints.iter()
                .map(|v| v as &(dyn tokio_postgres::types::ToSql + Sync)),
        );
        values.extend(
            floats
                .iter()
                .map(|v| v as &(dyn tokio_postgres::types::ToSql + Sync)),
        );
        client.execute(&sql, &values).await?;
    }
    Ok(())
}

/// `host:port/db` of a config, without user or password.
fn describe(c: &tokio_postgres::Config) -> String {
    let host = match c.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
        #[cfg(unix)]
        Some(tokio_postgres::config::Host::Unix(p)) => p.display().to_string(),
        None => "localhost".into(),
    };
    let port = c.get_ports().first().copied().unwrap_or(5432);
    format!("postgres {host}:{port}/{}", c.get_dbname().unwrap_or(""))
}

impl SessionStore for PgStore {
    fn record_snapshot(&mut self, source: &str, s: &SnapshotData<'_>) -> Result<SnapshotId> {
        self.insert(Some(source), s)
    }

    fn record_request(&mut self, r: &RequestRecord) -> Result<()> {
        self.run(async {
            let client = self.client().await?;
            insert_requests(&**client, &[r])
                .await
                .map_err(|e| pg(&self.shown, e))
        })
    }

    fn load_session(&self, id: &str) -> Result<Option<SessionRecord>> {
        let parts = self.run(async {
            let row = self
                .client()
                .await?
                .query_opt(
                    "SELECT family, model, source_len, source_fingerprint, tokens, body,
                        calibration, version FROM abridge_sessions WHERE id = $1",
                    &[&id],
                )
                .await
                .map_err(|e| pg(&self.shown, e))?;
            Ok(row.map(|r| StoredParts {
                family: r.get(0),
                model: r.get(1),
                len: r.get(2),
                fingerprint: r.get(3),
                tokens: r.get(4),
                body: r.get(5),
                state: r.get(6),
                version: r.get(7),
            }))
        })?;
        parts.map(|p| record_from(id, p)).transpose()
    }

    fn save_session(&mut self, record: &SessionRecord) -> Result<i64> {
        let p = stored_parts(record)?;
        self.run(async {
            let client = self.client().await?;
            save_on(&**client, &record.id, &p)
                .await
                .map_err(|e| pg(&self.shown, e))
        })
    }

    fn write_all(&mut self, writes: &[Write<'_>]) -> Result<Vec<Written>> {
        // Encoded before the transaction, which holds a connection.
        let mut snapshots = Vec::new();
        let mut sessions = Vec::new();
        let mut requests = Vec::new();
        for (i, w) in writes.iter().enumerate() {
            match w {
                Write::Snapshot(source, data) => {
                    snapshots.push((i, *source, SnapshotRow::of(data)?));
                }
                Write::Session(record) => sessions.push((i, &record.id, stored_parts(record)?)),
                Write::Request(r) => requests.push(*r),
            }
        }
        let mut out = vec![Written::Request; writes.len()];
        self.run(async {
            let mut client = self.client().await?;
            let tx = client.transaction().await.map_err(|e| pg(&self.shown, e))?;
            for (i, source, row) in &snapshots {
                let id = write_snapshot(&tx, Some(source), row)
                    .await
                    .map_err(|e| pg(&self.shown, e))?;
                out[*i] = Written::Snapshot(id);
            }
            for (i, id, parts) in &sessions {
                let v = save_on(&*tx, id, parts)
                    .await
                    .map_err(|e| pg(&self.shown, e))?;
                out[*i] = Written::Session(v);
            }
            insert_requests(&*tx, &requests)
                .await
                .map_err(|e| pg(&self.shown, e))?;
            tx.commit().await.map_err(|e| pg(&self.shown, e))
        })?;
        Ok(out)
    }

    fn session_version(&self, id: &str) -> Result<Option<i64>> {
        self.run(async {
            let row = self
                .client()
                .await?
                .query_opt("SELECT version FROM abridge_sessions WHERE id = $1", &[&id])
                .await
                .map_err(|e| pg(&self.shown, e))?;
            Ok(row.map(|r| r.get(0)))
        })
    }

    fn shared(&self) -> bool {
        true
    }

    fn reader(&self) -> Option<Box<dyn SessionStore>> {
        Some(Box::new(self.clone()))
    }

    fn load_original(&self, handle: &recall::Handle) -> Result<Option<StoredOriginal>> {
        self.original(handle)
    }

    fn setting_or(&mut self, name: &str, fresh: &str) -> Result<String> {
        self.run(async {
            let client = self.client().await?;
            client
                .execute(
                    "INSERT INTO abridge_settings (name, value) VALUES ($1, $2)
                     ON CONFLICT (name) DO NOTHING",
                    &[&name, &fresh],
                )
                .await
                .map_err(|e| pg(&self.shown, e))?;
            let row = client
                .query_one(
                    "SELECT value FROM abridge_settings WHERE name = $1",
                    &[&name],
                )
                .await
                .map_err(|e| pg(&self.shown, e))?;
            Ok(row.get(0))
        })
    }
}

impl SnapshotSink for PgStore {
    fn record(&self, s: &SnapshotData<'_>) -> Result<SnapshotId, SnapshotError> {
        self.insert(self.source.as_deref(), s)
            .map_err(SnapshotError::new)
    }

    fn recall(&self, handle: &recall::Handle) -> Result<Option<StoredOriginal>, SnapshotError> {
        self.original(handle).map_err(SnapshotError::new)
    }
}

const ENTRY_COLUMNS: &str = "id, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'), \
     source, model, family, tokens_before, tokens_after, summarizer, dropped_iterations, \
     provider_tokens_before, provider_tokens_after";

/// Columns in [`ENTRY_COLUMNS`]: what a query selects after them starts here.
const ENTRY_WIDTH: usize = 11;

/// The [`Entry`] in the first columns of a row ([`ENTRY_COLUMNS`]).
fn entry(shown: &str, r: &tokio_postgres::Row) -> Result<Entry> {
    let family: String = r.get(4);
    Ok(Entry {
        id: SnapshotId(r.get(0)),
        created_at: r.get(1),
        source: r.get(2),
        model: r.get(3),
        family: family.parse::<Family>().map_err(|e| pg(shown, e))?,
        summarizer: r.get(7),
        dropped_iterations: r.get::<_, i64>(8).max(0) as usize,
        ..Entry::counted(r.get(5), r.get(6), r.get(9), r.get(10))
    })
}

const REQUEST_COLUMNS: &str = "source, to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'), \
     model, tokens, usage, compacted, snapshot, trigger_tokens, target, recalls, tenant, \
     client_tokens, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost, \
     cost_without, over_window";

/// Columns in [`REQUEST_COLUMNS`]: what a query selects after them starts here.
const REQUEST_WIDTH: usize = 19;

fn request(r: &tokio_postgres::Row) -> RequestRecord {
    let n = |i| r.get::<_, Option<i64>>(i).map(|v| v.max(0) as u64);
    RequestRecord {
        source: r.get(0),
        at: r.get(1),
        model: r.get(2),
        tokens: Calibrated::new(n(3).unwrap_or(0)),
        usage: n(4).map(Reported::new),
        compacted: r.get(5),
        snapshot: r.get::<_, Option<i64>>(6).map(SnapshotId),
        trigger: n(7).map(Calibrated::new),
        target: n(8).map(Calibrated::new),
        recalls: u32::try_from(n(9).unwrap_or(0)).unwrap_or(u32::MAX),
        account: crate::Accounting {
            tenant: r.get::<_, Option<String>>(10).unwrap_or_default(),
            client_tokens: Calibrated::new(n(11).unwrap_or(0)),
            input_tokens: n(12),
            output_tokens: n(13),
            cache_read_tokens: n(14),
            cache_write_tokens: n(15),
            cost: r.get(16),
            cost_without: r.get(17),
            over_window: r.get(18),
        },
    }
}

impl SnapshotStore for PgStore {
    fn requests(&self, source: &str, limit: usize) -> Result<Vec<RequestRecord>> {
        let sql = format!(
            "SELECT {REQUEST_COLUMNS} FROM (SELECT * FROM abridge_requests WHERE source = $1 ORDER BY id DESC LIMIT $2) r ORDER BY id"
        );
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self.run(async {
            self.client()
                .await?
                .query(&sql, &[&source, &limit])
                .await
                .map_err(|e| pg(&self.shown, e))
        })?;
        Ok(rows.iter().map(request).collect())
    }

    fn request_stats(&self) -> Result<HashMap<String, RequestStats>> {
        let sql = format!(
            "SELECT {REQUEST_COLUMNS}, c.n FROM abridge_requests r JOIN
               (SELECT max(id) AS last, count(*) AS n FROM abridge_requests GROUP BY source) c ON r.id = c.last"
        );
        let rows = self.run(async {
            self.client()
                .await?
                .query(&sql, &[])
                .await
                .map_err(|e| pg(&self.shown, e))
        })?;
        Ok(rows
            .iter()
            .map(|r| {
                let last = request(r);
                let n: i64 = r.get(REQUEST_WIDTH);
                (
                    last.source.clone(),
                    RequestStats {
                        requests: n.max(0) as u64,
                        last,
                    },
                )
            })
            .collect())
    }

    fn totals(&self, by: crate::GroupBy, limit: usize) -> Result<Vec<crate::Totals>> {
        // PostgreSQL sums integers as `numeric`: back to the columns' types.
        let sql = crate::totals::select("abridge_totals", by, "$1", ["::bigint", "::float8"]);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self.run(async {
            self.client()
                .await?
                .query(&sql, &[&limit])
                .await
                .map_err(|e| pg(&self.shown, e))
        })?;
        Ok(rows
            .iter()
            .map(|r| {
                let ints: [u64; 10] = std::array::from_fn(|k| r.get::<_, i64>(3 + k).max(0) as u64);
                let floats = [r.get(13), r.get(14), r.get(15)];
                crate::totals::line([r.get(0), r.get(1), r.get(2)], ints, floats)
            })
            .collect())
    }

    fn list(&self, limit: usize) -> Result<Vec<Entry>> {
        let sql =
            format!("SELECT {ENTRY_COLUMNS} FROM abridge_snapshots ORDER BY id DESC LIMIT $1");
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self.run(async {
            self.client()
                .await?
                .query(&sql, &[&limit])
                .await
                .map_err(|e| pg(&self.shown, e))
        })?;
        rows.iter().map(|r| entry(&self.shown, r)).collect()
    }

    fn get(&self, id: SnapshotId) -> Result<Snapshot> {
        let sql = format!(
            "SELECT {ENTRY_COLUMNS}, briefing, report, config, before_body, after_body, bodies,
                history_key FROM abridge_snapshots WHERE id = $1"
        );
        let row = self
            .run(async {
                self.client()
                    .await?
                    .query_opt(&sql, &[&id.0])
                    .await
                    .map_err(|e| pg(&self.shown, e))
            })?
            .ok_or(Error::NotFound(id))?;
        let text = |i: usize| row.get::<_, String>(i);
        let entry = entry(&self.shown, &row)?;
        let [before, after] = match i64::from(row.get::<_, i16>(ENTRY_WIDTH + 5)) {
            BODIES_IN_PARTS => {
                self.bodies(id, entry.source.as_deref(), row.get(ENTRY_WIDTH + 6))?
            }
            _ => [
                parse(id, SIDES[0], &text(ENTRY_WIDTH + 3))?,
                parse(id, SIDES[1], &text(ENTRY_WIDTH + 4))?,
            ],
        };
        Ok(Snapshot {
            entry,
            briefing: row.get(ENTRY_WIDTH),
            report: parse(id, "report", &text(ENTRY_WIDTH + 1))?,
            config: parse(id, "config", &text(ENTRY_WIDTH + 2))?,
            before,
            after,
        })
    }

    fn prune(&mut self, retention: &StoreConfig) -> Result<Pruned> {
        self.run(async {
            let mut client = self.client().await?;
            let tx = client.transaction().await.map_err(|e| pg(&self.shown, e))?;
            let (removed, sessions) = prune_rows(&tx, retention)
                .await
                .map_err(|e| pg(&self.shown, e))?;
            let kept: i64 = tx
                .query_one("SELECT count(*) FROM abridge_snapshots", &[])
                .await
                .map_err(|e| pg(&self.shown, e))?
                .get(0);
            let bytes = stored_bytes(&tx).await.map_err(|e| pg(&self.shown, e))?;
            tx.commit().await.map_err(|e| pg(&self.shown, e))?;
            Ok(Pruned {
                removed,
                kept: kept.max(0) as usize,
                sessions,
                bytes: bytes.max(0) as u64,
            })
        })
    }
}

impl PgStore {
    /// Snapshot `id`'s two bodies, from their parts.
    fn bodies(
        &self,
        id: SnapshotId,
        source: Option<&str>,
        key: Option<String>,
    ) -> Result<[serde_json::Value; 2]> {
        let rows = self.run(async {
            self.client()
                .await?
                .query(
                    "SELECT sp.side, p.body FROM abridge_snapshot_parts sp
                     LEFT JOIN abridge_parts p ON p.source = $2 AND p.hash = sp.hash
                     WHERE sp.snapshot = $1 ORDER BY sp.side, sp.position",
                    &[&id.0, &source.unwrap_or_default()],
                )
                .await
                .map_err(|e| pg(&self.shown, e))
        })?;
        let mut sides: [Vec<String>; 2] = Default::default();
        for r in rows {
            let side: i16 = r.get(0);
            let text: Option<String> = r.get(1);
            let text = text.ok_or_else(|| Error::Corrupt {
                id,
                what: "a part of its bodies is missing".into(),
            })?;
            if let Some(s) = sides.get_mut(side as usize) {
                s.push(text);
            }
        }
        let join = |what: &str, parts: &[String]| {
            crate::parts::join(key.as_deref(), parts).map_err(|e| Error::Corrupt {
                id,
                what: format!("stored {what} does not parse: {e}"),
            })
        };
        Ok([join(SIDES[0], &sides[0])?, join(SIDES[1], &sides[1])?])
    }
}

/// Bytes of what the store keeps: snapshots' rows' text, their bodies'
/// parts and their originals, and sessions' carried bodies and states
/// (PostgreSQL's own sizes include dead rows that only a vacuum gives
/// back, so what a prune removes would not show).
async fn stored_bytes(
    tx: &tokio_postgres::Transaction<'_>,
) -> std::result::Result<i64, tokio_postgres::Error> {
    let row = tx
        .query_one(
            "SELECT (SELECT coalesce(sum(octet_length(report) + octet_length(config)
                        + octet_length(attempts) + octet_length(before_body)
                        + octet_length(after_body) + coalesce(octet_length(briefing), 0)), 0)
                     FROM abridge_snapshots)
                  + (SELECT coalesce(sum(octet_length(body)), 0) FROM abridge_parts)
                  + (SELECT coalesce(sum(octet_length(body)), 0) FROM abridge_originals)
                  + (SELECT coalesce(sum(coalesce(octet_length(body), 0)
                        + octet_length(calibration)), 0) FROM abridge_sessions)",
            &[],
        )
        .await?;
    Ok(row.get::<_, Option<i64>>(0).unwrap_or(0))
}

/// Removes what is past `retention` (by age; then, while what the store
/// keeps is over its size, the oldest snapshots and least recently saved
/// sessions, a sixteenth of each at a time), the newest snapshot always
/// kept; then the originals and parts only they held. How many snapshots
/// and sessions went.
async fn prune_rows(
    tx: &tokio_postgres::Transaction<'_>,
    retention: &StoreConfig,
) -> std::result::Result<(usize, usize), tokio_postgres::Error> {
    let newest: i64 = tx
        .query_one("SELECT coalesce(max(id), 0) FROM abridge_snapshots", &[])
        .await?
        .get(0);
    let (mut removed, mut sessions) = (0, 0);
    if retention.max_age_days > 0 {
        let days = retention.max_age_days as i32;
        removed += tx
            .execute(
                "DELETE FROM abridge_snapshots WHERE id < $1
                 AND created_at < now() - make_interval(days => $2)",
                &[&newest, &days],
            )
            .await? as usize;
        sessions += tx
            .execute(
                "DELETE FROM abridge_sessions WHERE updated_at < now() - make_interval(days => $1)",
                &[&days],
            )
            .await? as usize;
    }
    if retention.max_megabytes > 0 {
        // A sixteenth under the limit, so that the next writes do not
        // prune again at once.
        let max = (retention.max_megabytes * 1_000_000) as i64;
        let under = max - max / 16;
        while stored_bytes(tx).await? > under {
            let gone = tx
                .execute(
                    "DELETE FROM abridge_snapshots WHERE id IN (
                         SELECT id FROM abridge_snapshots WHERE id < $1 ORDER BY id
                         LIMIT greatest(1, (SELECT count(*) FROM abridge_snapshots) / 16))",
                    &[&newest],
                )
                .await? as usize;
            let stale = tx
                .execute(
                    "DELETE FROM abridge_sessions WHERE id IN (
                         SELECT id FROM abridge_sessions ORDER BY updated_at
                         LIMIT greatest(1, (SELECT count(*) FROM abridge_sessions) / 16))",
                    &[],
                )
                .await? as usize;
            if gone + stale == 0 {
                break;
            }
            removed += gone;
            sessions += stale;
            forget_unlisted(tx).await?;
        }
    }
    if removed > 0 {
        forget_unlisted(tx).await?;
    }
    Ok((removed, sessions))
}

/// Drops what no snapshot lists any more: listings, originals, parts.
async fn forget_unlisted(
    tx: &tokio_postgres::Transaction<'_>,
) -> std::result::Result<(), tokio_postgres::Error> {
    tx.batch_execute(
        "DELETE FROM abridge_snapshot_parts sp WHERE NOT EXISTS
             (SELECT 1 FROM abridge_snapshots s WHERE s.id = sp.snapshot);
         DELETE FROM abridge_originals o WHERE NOT EXISTS
             (SELECT 1 FROM abridge_snapshots s WHERE s.id = o.snapshot);
         DELETE FROM abridge_parts p WHERE NOT EXISTS
             (SELECT 1 FROM abridge_snapshot_parts sp JOIN abridge_snapshots s ON s.id = sp.snapshot
              WHERE sp.hash = p.hash AND coalesce(s.source, '') = p.source);",
    )
    .await
}
