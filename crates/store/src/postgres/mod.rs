//! The shared store: PostgreSQL, for several proxy replicas behind one load
//! balancer. Sessions and snapshots live in `abridge_sessions` and
//! `abridge_snapshots`, created on first connect.
//!
//! Its [`SessionStore`] methods block the calling thread on the runtime
//! given at connect time: call them from a blocking thread (as the proxy
//! does, from `spawn_blocking`), never from an async task.

use abridge::recall::{self, StoredOriginal};
use abridge::{SnapshotData, SnapshotError, SnapshotId, SnapshotSink};
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio::runtime::Handle;
use tokio_postgres::NoTls;

use crate::row::{OriginalRow, SnapshotRow};
use crate::session::{
    SessionRecord, SessionStore, StoredParts, Write, Written, record_from, stored_parts,
};
use crate::{Error, RequestRecord, Result};

mod read;
mod schema;
mod write;

use schema::SCHEMA;
use write::{insert_requests, save_on, write_snapshot};

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
