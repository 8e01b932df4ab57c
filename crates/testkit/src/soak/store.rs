//! The soak's store: none, a SQLite file, or a PostgreSQL server started
//! for the run; and what it holds once the proxies stopped.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::SoakStore;
use crate::Postgres;

/// What a store holds.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct StoreCounts {
    /// Rows of `sessions`.
    pub sessions: u64,
    /// Snapshots recorded: the rows of `snapshots`, with those the
    /// retention removed (SQLite's ids never skip: its newest id).
    pub snapshots: u64,
    /// Of those, the rows left.
    pub snapshots_kept: u64,
    /// Request rows recorded (as for snapshots).
    pub requests: u64,
    /// Bytes it occupies (the SQLite file with its journal; the PostgreSQL
    /// database's size).
    pub bytes: u64,
}

pub(super) enum Backend {
    None,
    Sqlite(PathBuf),
    Postgres(Postgres),
}

impl Backend {
    /// The store, and the `abridge serve` arguments that name it.
    pub(super) fn start(store: SoakStore, dir: &Path) -> Result<(Backend, Vec<String>), String> {
        Ok(match store {
            SoakStore::None => (Backend::None, vec!["--no-store".into()]),
            SoakStore::Sqlite => {
                let path = dir.join("abridge.sqlite");
                let _ = std::fs::remove_file(&path);
                let arg = vec!["--store".into(), path.display().to_string()];
                (Backend::Sqlite(path), arg)
            }
            SoakStore::Postgres { .. } => {
                let pg = Postgres::start()?;
                let arg = vec!["--store".into(), pg.url.clone()];
                (Backend::Postgres(pg), arg)
            }
        })
    }

    /// What it holds; of `compacted` (session ids, each with when it was
    /// last compacted), how many it lacks though it kept sessions saved
    /// before, and how many the retention removed (the least recently
    /// saved first: those last compacted before the oldest it kept).
    pub(super) fn counts(
        &self,
        compacted: &BTreeMap<String, f64>,
    ) -> Result<Option<(StoreCounts, usize, usize)>, String> {
        let count = |sql: &str| -> Result<u64, String> {
            match self {
                Backend::None => Ok(0),
                Backend::Sqlite(path) => {
                    let conn = rusqlite::Connection::open(path).map_err(|e| e.to_string())?;
                    conn.query_row(sql, [], |r| r.get::<_, i64>(0))
                        .map(|n| n.max(0) as u64)
                        .map_err(|e| format!("{sql}: {e}"))
                }
                Backend::Postgres(pg) => pg.psql(sql)?.parse().map_err(|e| format!("{sql}: {e}")),
            }
        };
        let Some(ids) = self.session_ids()? else {
            return Ok(None);
        };
        let bytes = self.bytes()?;
        // SQLite's ids (AUTOINCREMENT) count every row ever written; a
        // PostgreSQL sequence may skip, so its rows are counted.
        let recorded = |table: &str| match self {
            Backend::Sqlite(_) => count(&format!("SELECT coalesce(max(id), 0) FROM {table}")),
            _ => count(&format!("SELECT count(*) FROM abridge_{table}")),
        };
        let kept = |table: &str| match self {
            Backend::Sqlite(_) => count(&format!("SELECT count(*) FROM {table}")),
            _ => count(&format!("SELECT count(*) FROM abridge_{table}")),
        };
        let counts = StoreCounts {
            sessions: ids.len() as u64,
            snapshots: recorded("snapshots")?,
            snapshots_kept: kept("snapshots")?,
            requests: recorded("requests")?,
            bytes,
        };
        let oldest = self.oldest_saved()?;
        let unstored = compacted.iter().filter(|(s, _)| !ids.contains(*s));
        // `at` is when its last compacted request was sent: its save was
        // made after, so a session the retention removed was saved before
        // the oldest one kept, and so was sent before it too. (Timed at the
        // response instead, a request slower than a slack given is taken for
        // a lost session.)
        let (retired, missing): (Vec<_>, Vec<_>) =
            unstored.partition(|(_, at)| oldest.is_some_and(|o| **at < o));
        Ok(Some((counts, missing.len(), retired.len())))
    }
    /// The ids of the sessions it holds (`None`: no store).
    fn session_ids(&self) -> Result<Option<BTreeSet<String>>, String> {
        Ok(Some(match self {
            Backend::None => return Ok(None),
            Backend::Sqlite(path) => {
                let conn = rusqlite::Connection::open(path).map_err(|e| e.to_string())?;
                let mut stmt = conn
                    .prepare("SELECT id FROM sessions")
                    .map_err(|e| e.to_string())?;
                let rows = stmt
                    .query_map([], |r| r.get::<_, String>(0))
                    .map_err(|e| e.to_string())?;
                rows.collect::<Result<_, _>>().map_err(|e| e.to_string())?
            }
            Backend::Postgres(pg) => pg
                .psql("SELECT id FROM abridge_sessions")?
                .lines()
                .map(str::to_owned)
                .collect(),
        }))
    }

    /// Its size on disk.
    fn bytes(&self) -> Result<u64, String> {
        Ok(match self {
            Backend::Sqlite(path) => ["", "-wal", "-journal"]
                .iter()
                .filter_map(|s| std::fs::metadata(format!("{}{s}", path.display())).ok())
                .map(|m| m.len())
                .sum(),
            Backend::Postgres(pg) => pg
                .psql("SELECT pg_database_size(current_database())")?
                .parse()
                .unwrap_or(0),
            Backend::None => 0,
        })
    }

    /// When the oldest session kept was last saved (seconds since the epoch).
    fn oldest_saved(&self) -> Result<Option<f64>, String> {
        Ok(match self {
            Backend::Sqlite(path) => {
                let conn = rusqlite::Connection::open(path).map_err(|e| e.to_string())?;
                conn.query_row(
                    "SELECT (julianday(min(updated_at)) - 2440587.5) * 86400.0 FROM sessions",
                    [],
                    |r| r.get(0),
                )
                .map_err(|e| e.to_string())?
            }
            Backend::Postgres(pg) => pg
                .psql("SELECT extract(epoch FROM min(updated_at)) FROM abridge_sessions")?
                .parse()
                .ok(),
            Backend::None => None,
        })
    }
}

/// Now, in seconds since the Unix epoch.
pub(super) fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}
