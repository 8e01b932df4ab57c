//! The embedded store: one SQLite file.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use abridge::model::Family;
use abridge::recall::{Handle, StoredOriginal};
use abridge::{SnapshotData, SnapshotError, SnapshotId, SnapshotSink, StoreConfig};
use rusqlite::types::Type;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use crate::row::{OriginalRow, SnapshotRow, parse};
use crate::{Entry, Error, Pruned, Result, Snapshot, SnapshotStore, migrate};

pub(crate) mod snapshots;

/// How often retention by age runs while snapshots are recorded (size is
/// checked after every write: it costs two pragmas).
const AGE_PRUNE_EVERY: Duration = Duration::from_secs(60);

/// A snapshot store in one SQLite file.
#[derive(Debug)]
pub struct Store {
    /// Behind its own lock: one connection, used by one caller at a time
    /// (the store is shared, e.g. by every session of an engine).
    conn: Mutex<Connection>,
    path: String,
    source: Option<String>,
    retention: StoreConfig,
    /// The file it opened (device and inode), to notice it was replaced.
    file: Option<FileId>,
    /// Its path, for a file-backed store.
    file_path: Option<PathBuf>,
    /// When retention by age last ran.
    aged_at: Mutex<Option<Instant>>,
}

/// A file's identity on its file system.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileId {
    dev: u64,
    ino: u64,
}

impl FileId {
    #[cfg(unix)]
    fn of(path: &Path) -> Option<FileId> {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(path).ok().map(|m| FileId {
            dev: m.dev(),
            ino: m.ino(),
        })
    }

    #[cfg(not(unix))]
    fn of(path: &Path) -> Option<FileId> {
        // No inode: a missing file is all that can be told.
        std::fs::metadata(path)
            .ok()
            .map(|_| FileId { dev: 0, ino: 0 })
    }
}

impl Store {
    /// Opens (or creates) the store at `path`, creating its folder and
    /// migrating a store written by an earlier release.
    pub fn open(path: &Path) -> Result<Store> {
        let shown = path.display().to_string();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|cause| Error::Io {
                path: dir.display().to_string(),
                cause,
            })?;
        }
        let conn = Connection::open(path).map_err(|cause| Error::Sqlite {
            path: shown.clone(),
            cause,
        })?;
        // Another process (a proxy finishing a write, the dashboard, the
        // CLI) may hold the file for a moment: wait for it, not fail.
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(|cause| Error::Sqlite {
                path: shown.clone(),
                cause,
            })?;
        // Readers beside the writer, and a commit without a sync of its
        // own: what a crash of the process leaves is every committed write
        // (a power cut may take the last ones).
        // A page cache of 8 MB (SQLite's default is 2): a busy proxy's
        // writes walk indexes that outgrow the default, and read every page
        // again from the file.
        conn.pragma_update_and_check(None, "journal_mode", "wal", |_| Ok(()))
            .and_then(|()| conn.pragma_update(None, "synchronous", "normal"))
            .and_then(|()| conn.pragma_update(None, "cache_size", -8192))
            .map_err(|cause| Error::Sqlite {
                path: shown.clone(),
                cause,
            })?;
        let mut store = Self::init(conn, shown)?;
        store.file = FileId::of(path);
        store.file_path = Some(path.to_owned());
        Ok(store)
    }

    /// Opens the file again when it is no longer the one this store wrote
    /// to (deleted, or replaced by another file): writes to a deleted file
    /// would be lost. True when it did.
    pub fn reopen_if_moved(&mut self) -> Result<bool> {
        let Some(path) = self.file_path.clone() else {
            return Ok(false);
        };
        if self.file.is_some() && FileId::of(&path) == self.file {
            return Ok(false);
        }
        let fresh = Store::open(&path)?;
        let (source, retention) = (self.source.take(), self.retention);
        *self = fresh;
        self.source = source;
        self.retention = retention;
        Ok(true)
    }

    /// The file it keeps, unless it is in memory.
    pub(crate) fn file_path(&self) -> Option<&Path> {
        self.file_path.as_deref()
    }

    /// A store in memory (for tests and one-off runs).
    pub fn in_memory() -> Result<Store> {
        let conn = Connection::open_in_memory().map_err(|cause| Error::Sqlite {
            path: ":memory:".into(),
            cause,
        })?;
        Self::init(conn, ":memory:".into())
    }

    /// The connection, for one statement or transaction.
    pub(crate) fn conn(&self) -> MutexGuard<'_, Connection> {
        // A panic mid-statement leaves SQLite consistent: go on.
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn init(mut conn: Connection, path: String) -> Result<Store> {
        migrate::run(&mut conn, &path)?;
        Ok(Store {
            conn: Mutex::new(conn),
            path,
            source: None,
            retention: StoreConfig::default(),
            file: None,
            file_path: None,
            aged_at: Mutex::new(None),
        })
    }

    /// The default location: `abridge/snapshots.sqlite` under the user's data directory.
    pub fn default_path() -> Option<PathBuf> {
        dirs_data().map(|d| d.join("abridge").join("snapshots.sqlite"))
    }

    /// Names the source (e.g. the input file) recorded with each snapshot.
    pub fn with_source(mut self, source: impl Into<String>) -> Self {
        self.source = Some(source.into());
        self
    }

    /// Records a snapshot under another source than [`with_source`](Self::with_source)'s
    /// (a proxy's session id).
    pub fn record_as(&mut self, source: &str, snapshot: &SnapshotData<'_>) -> Result<SnapshotId> {
        self.insert(Some(source), snapshot)
    }

    /// Applies `retention` after every snapshot recorded (the default:
    /// [`StoreConfig::default`]).
    pub fn with_retention(mut self, retention: StoreConfig) -> Self {
        self.retention = retention;
        self
    }

    /// Gives the space of removed snapshots back to the file system.
    pub fn vacuum(&self) -> Result<()> {
        self.conn().execute_batch("VACUUM").map_err(|e| self.sql(e))
    }

    pub(crate) fn sql(&self, cause: rusqlite::Error) -> Error {
        Error::Sqlite {
            path: self.path.clone(),
            cause,
        }
    }

    fn insert(&self, source: Option<&str>, s: &SnapshotData<'_>) -> Result<SnapshotId> {
        let r = SnapshotRow::of(s)?;
        let mut conn = self.conn();
        let tx = conn.transaction().map_err(|e| self.sql(e))?;
        let id = snapshots::write(&tx, source, &r).map_err(|e| self.sql(e))?;
        tx.commit().map_err(|e| self.sql(e))?;
        drop(conn);
        // The snapshot is stored: a retention pass that fails now is tried
        // again after the next one, and never costs this one.
        let _ = self.prune_if_due();
        Ok(id)
    }

    /// Applies the retention when the store occupies more than it allows,
    /// or (by age) once a minute.
    pub(crate) fn prune_if_due(&self) -> Result<Option<Pruned>> {
        let retention = self.retention;
        let over = retention.max_megabytes > 0
            && snapshots::occupied(&self.conn()).map_err(|e| self.sql(e))?
                > retention.max_megabytes * 1_000_000;
        let aged = {
            let mut at = self.aged_at.lock().unwrap_or_else(|p| p.into_inner());
            let due =
                retention.max_age_days > 0 && at.is_none_or(|t| t.elapsed() >= AGE_PRUNE_EVERY);
            if due {
                *at = Some(Instant::now());
            }
            due
        };
        match over || aged {
            true => self.prune_shared(&retention).map(Some),
            false => Ok(None),
        }
    }

    fn count_and_bytes(&self) -> Result<(usize, u64)> {
        let conn = self.conn();
        let count = conn
            .query_row("SELECT count(*) FROM snapshots", [], |r| r.get::<_, i64>(0))
            .map_err(|e| self.sql(e))?;
        let bytes = snapshots::occupied(&conn).map_err(|e| self.sql(e))?;
        Ok((count.max(0) as usize, bytes))
    }
}

const ENTRY_COLUMNS: &str = "id, created_at, source, model, family, tokens_before, tokens_after, \
     summarizer, dropped_iterations, provider_tokens_before, provider_tokens_after";

/// Columns in [`ENTRY_COLUMNS`]: what a query selects after them starts here.
const ENTRY_WIDTH: usize = 11;

impl SnapshotStore for Store {
    fn prune(&mut self, retention: &StoreConfig) -> Result<Pruned> {
        self.prune_shared(retention)
    }

    fn requests(&self, source: &str, limit: usize) -> Result<Vec<crate::RequestRecord>> {
        self.select_requests(source, limit)
    }

    fn request_stats(&self) -> Result<std::collections::HashMap<String, crate::RequestStats>> {
        self.select_request_stats()
    }

    fn totals(&self, by: crate::GroupBy, limit: usize) -> Result<Vec<crate::Totals>> {
        self.select_totals(by, limit)
    }

    fn list(&self, limit: usize) -> Result<Vec<Entry>> {
        let sql = format!("SELECT {ENTRY_COLUMNS} FROM snapshots ORDER BY id DESC LIMIT ?1");
        let conn = self.conn();
        let mut stmt = conn.prepare(&sql).map_err(|e| self.sql(e))?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = stmt
            .query_map(params![limit], entry)
            .map_err(|e| self.sql(e))?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(|e| self.sql(e))
    }

    fn get(&self, id: SnapshotId) -> Result<Snapshot> {
        let sql = format!(
            "SELECT {ENTRY_COLUMNS}, briefing, report, config FROM snapshots WHERE id = ?1"
        );
        let conn = self.conn();
        let row = conn
            .query_row(&sql, params![id.0], |r| {
                Ok((
                    entry(r)?,
                    r.get::<_, Option<String>>(ENTRY_WIDTH)?,
                    [1, 2].map(|k| r.get::<_, String>(ENTRY_WIDTH + k)),
                ))
            })
            .optional()
            .map_err(|e| self.sql(e))?
            .ok_or(Error::NotFound(id))?;
        let (entry, briefing, [report, config]) = row;
        let text = |t: rusqlite::Result<String>| t.map_err(|e| self.sql(e));
        let [before, after] = snapshots::bodies(&conn, id, |e| self.sql(e))?;
        Ok(Snapshot {
            briefing,
            report: parse(id, "report", &text(report)?)?,
            config: parse(id, "config", &text(config)?)?,
            before,
            after,
            entry,
        })
    }
}

impl Store {
    /// [`SnapshotStore::prune`] through a shared reference (a recording
    /// store prunes after each snapshot).
    fn prune_shared(&self, retention: &StoreConfig) -> Result<Pruned> {
        let (removed, sessions) = self.prune_rows(retention).map_err(|e| self.sql(e))?;
        let (kept, bytes) = self.count_and_bytes()?;
        Ok(Pruned {
            removed,
            kept,
            sessions,
            bytes,
        })
    }

    /// Removes what is past `retention`; how many snapshots and sessions.
    fn prune_rows(&self, retention: &StoreConfig) -> rusqlite::Result<(usize, usize)> {
        // Reads, then deletes: take the write lock first (see `migrate::run`).
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let newest: i64 = tx.query_row("SELECT coalesce(max(id), 0) FROM snapshots", [], |r| {
            r.get(0)
        })?;
        let ids = |sql: &str, p: &[&dyn rusqlite::ToSql]| -> rusqlite::Result<Vec<(i64, String)>> {
            let mut stmt = tx.prepare(sql)?;
            let rows = stmt.query_map(p, |r| Ok((r.get(0)?, r.get(1)?)))?;
            rows.collect()
        };
        let (mut removed, mut sessions) = (0, 0);
        if retention.max_age_days > 0 {
            let days = retention.max_age_days as i64;
            let old = ids(
                "SELECT id, coalesce(source, '') FROM snapshots WHERE id < ?1 AND created_at <
                     strftime('%Y-%m-%dT%H:%M:%fZ', 'now', printf('-%d days', ?2))",
                &[&newest, &days],
            )?;
            snapshots::remove(&tx, &old)?;
            removed += old.len();
            sessions += tx.execute(
                "DELETE FROM sessions WHERE updated_at <
                     strftime('%Y-%m-%dT%H:%M:%fZ', 'now', printf('-%d days', ?1))",
                [days],
            )?;
        }
        if retention.max_megabytes > 0 {
            // The oldest snapshots and least recently saved sessions, a
            // sixteenth of each at a time, until what the file's pages in
            // use take is a sixteenth under the limit (so that the next
            // writes do not prune again at once).
            let max = retention.max_megabytes * 1_000_000;
            let under = max - max / 16;
            while snapshots::occupied(&tx)? > under {
                let count = |table: &str| -> rusqlite::Result<i64> {
                    tx.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
                };
                let oldest = ids(
                    "SELECT id, coalesce(source, '') FROM snapshots WHERE id < ?1 ORDER BY id
                     LIMIT ?2",
                    &[&newest, &(count("snapshots")? / 16).max(1)],
                )?;
                snapshots::remove(&tx, &oldest)?;
                removed += oldest.len();
                let stale = tx.execute(
                    "DELETE FROM sessions WHERE id IN
                         (SELECT id FROM sessions ORDER BY updated_at LIMIT ?1)",
                    [(count("sessions")? / 16).max(1)],
                )?;
                sessions += stale;
                if oldest.is_empty() && stale == 0 {
                    break;
                }
            }
        }
        tx.commit()?;
        Ok((removed, sessions))
    }
}

impl SnapshotSink for Store {
    fn record(&self, snapshot: &SnapshotData<'_>) -> Result<SnapshotId, SnapshotError> {
        self.insert(self.source.as_deref(), snapshot)
            .map_err(SnapshotError::new)
    }

    fn recall(&self, handle: &Handle) -> Result<Option<StoredOriginal>, SnapshotError> {
        self.original(handle).map_err(SnapshotError::new)
    }
}

impl Store {
    /// The original a handle names, if kept.
    pub fn original(&self, handle: &Handle) -> Result<Option<StoredOriginal>> {
        let row = self
            .conn()
            .query_row(
                "SELECT o.handle, o.kind, o.label, o.body, s.source FROM originals o
                 LEFT JOIN snapshots s ON s.id = o.snapshot WHERE o.handle = ?1",
                params![handle.as_str()],
                |r| {
                    Ok((
                        OriginalRow {
                            handle: r.get(0)?,
                            kind: r.get(1)?,
                            label: r.get(2)?,
                            body: r.get(3)?,
                        },
                        r.get(4)?,
                    ))
                },
            )
            .optional()
            .map_err(|e| self.sql(e))?;
        row.map(|(o, source)| o.into_stored(source)).transpose()
    }
}

/// The [`Entry`] in the first columns of a row ([`ENTRY_COLUMNS`]).
fn entry(r: &rusqlite::Row<'_>) -> rusqlite::Result<Entry> {
    let family: String = r.get(4)?;
    Ok(Entry {
        id: SnapshotId(r.get(0)?),
        created_at: r.get(1)?,
        source: r.get(2)?,
        model: r.get(3)?,
        family: family.parse::<Family>().map_err(|e| {
            rusqlite::Error::FromSqlConversionFailure(
                4,
                Type::Text,
                Box::new(std::io::Error::other(e)),
            )
        })?,
        summarizer: r.get(7)?,
        dropped_iterations: r.get::<_, i64>(8)?.max(0) as usize,
        ..Entry::counted(r.get(5)?, r.get(6)?, r.get(9)?, r.get(10)?)
    })
}

/// The user's data directory: `$XDG_DATA_HOME`, else the platform's.
fn dirs_data() -> Option<PathBuf> {
    std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(dirs::data_dir)
}
