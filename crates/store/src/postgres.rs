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
use tokio_postgres::NoTls;

use crate::requests::KEPT_REQUESTS;
use crate::row::{OriginalRow, SIZE, SnapshotRow, parse};
use crate::session::{SessionRecord, SessionStore, StoredParts, record_from, stored_parts};
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
        let originals = OriginalRow::all(s)?;
        self.run(async {
            let mut client = self.client().await?;
            let tx = client.transaction().await.map_err(|e| pg(&self.shown, e))?;
            let row = tx
                .query_one(
                    "INSERT INTO abridge_snapshots (source, model, family, tokens_before,
                        tokens_after, target, summarizer, briefing, attempts, report, config,
                        before_body, after_body, dropped_iterations, provider_tokens_before,
                        provider_tokens_after)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)
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
                        &r.before_body,
                        &r.after_body,
                        &r.dropped_iterations,
                        &r.provider_tokens_before,
                        &r.provider_tokens_after,
                    ],
                )
                .await
                .map_err(|e| pg(&self.shown, e))?;
            let id: i64 = row.get(0);
            // An original named again goes with the newest snapshot naming
            // it; all of them in one statement (one round trip).
            if !originals.is_empty() {
                let column = |f: fn(&OriginalRow) -> &str| -> Vec<&str> {
                    originals.iter().map(f).collect()
                };
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
                .await
                .map_err(|e| pg(&self.shown, e))?;
            }
            tx.commit().await.map_err(|e| pg(&self.shown, e))?;
            Ok(SnapshotId(id))
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

    /// Runs one statement that returns nothing.
    fn execute(
        &self,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<u64> {
        self.run(async {
            self.client()
                .await?
                .execute(sql, params)
                .await
                .map_err(|e| pg(&self.shown, e))
        })
    }

    fn run<T>(&self, f: impl std::future::Future<Output = Result<T>>) -> Result<T> {
        self.handle.block_on(f)
    }

    async fn client(&self) -> Result<deadpool_postgres::Object> {
        self.pool.get().await.map_err(|e| pg(&self.shown, e))
    }
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
        let int = |v: Option<u64>| v.map(|v| i64::try_from(v).unwrap_or(i64::MAX));
        let id: i64 = self.run(async {
            let row = self
                .client()
                .await?
                .query_one(
                    "INSERT INTO abridge_requests (source, model, tokens, usage, compacted, snapshot, trigger_tokens, target, recalls)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id",
                    &[&r.source, &r.model, &int(Some(r.tokens.get())), &int(r.usage.map(Reported::get)),
                      &r.compacted, &r.snapshot.map(|s| s.0), &int(r.trigger.map(Calibrated::get)),
                      &int(r.target.map(Calibrated::get)), &i64::from(r.recalls)],
                )
                .await
                .map_err(|e| pg(&self.shown, e))?;
            Ok(row.get(0))
        })?;
        if id % 1000 == 0 {
            self.execute(
                "DELETE FROM abridge_requests WHERE id <= $1",
                &[&(id - KEPT_REQUESTS)],
            )?;
        }
        Ok(())
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
            let row = self
                .client()
                .await?
                .query_one(
                    "INSERT INTO abridge_sessions (id, family, model, source_len,
                        source_fingerprint, tokens, body, calibration, version, updated_at)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 1, now())
                     ON CONFLICT (id) DO UPDATE SET family = $2, model = $3, source_len = $4,
                        source_fingerprint = $5, tokens = $6, body = $7, calibration = $8,
                        version = abridge_sessions.version + 1, updated_at = now()
                     RETURNING version",
                    &[
                        &record.id,
                        &p.family,
                        &p.model,
                        &p.len,
                        &p.fingerprint,
                        &p.tokens,
                        &p.body,
                        &p.state,
                    ],
                )
                .await
                .map_err(|e| pg(&self.shown, e))?;
            Ok(row.get(0))
        })
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
     model, tokens, usage, compacted, snapshot, trigger_tokens, target, recalls";

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
                let n: i64 = r.get(10);
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
            "SELECT {ENTRY_COLUMNS}, briefing, report, config, before_body, after_body
             FROM abridge_snapshots WHERE id = $1"
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
        Ok(Snapshot {
            entry: entry(&self.shown, &row)?,
            briefing: row.get(ENTRY_WIDTH),
            report: parse(id, "report", &text(ENTRY_WIDTH + 1))?,
            config: parse(id, "config", &text(ENTRY_WIDTH + 2))?,
            before: parse(id, "history before", &text(ENTRY_WIDTH + 3))?,
            after: parse(id, "history after", &text(ENTRY_WIDTH + 4))?,
        })
    }

    fn prune(&mut self, retention: &StoreConfig) -> Result<Pruned> {
        let newest = "(SELECT coalesce(max(id), 0) FROM abridge_snapshots)";
        let mut removed = 0;
        if retention.max_age_days > 0 {
            let sql = format!(
                "DELETE FROM abridge_snapshots WHERE id < {newest}
                 AND created_at < now() - make_interval(days => $1)"
            );
            removed += self.execute(&sql, &[&(retention.max_age_days as i32)])?;
        }
        if retention.max_megabytes > 0 {
            let sql = format!(
                "DELETE FROM abridge_snapshots WHERE id < {newest} AND id IN (
                     SELECT id FROM (SELECT id, sum({SIZE}) OVER (ORDER BY id DESC) AS upto
                                     FROM abridge_snapshots) t WHERE upto > $1)"
            );
            removed += self.execute(&sql, &[&((retention.max_megabytes * 1_000_000) as i64)])?;
        }
        if removed > 0 {
            self.execute(
                "DELETE FROM abridge_originals o WHERE NOT EXISTS
                     (SELECT 1 FROM abridge_snapshots s WHERE s.id = o.snapshot)",
                &[],
            )?;
        }
        let row = self.run(async {
            self.client()
                .await?
                .query_one(
                    &format!(
                        "SELECT count(*), coalesce(sum({SIZE}), 0)::BIGINT FROM abridge_snapshots"
                    ),
                    &[],
                )
                .await
                .map_err(|e| pg(&self.shown, e))
        })?;
        Ok(Pruned {
            removed: removed as usize,
            kept: row.get::<_, i64>(0) as usize,
            bytes: row.get::<_, i64>(1).max(0) as u64,
        })
    }
}
