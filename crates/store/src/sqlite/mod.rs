//! The embedded store: one SQLite file.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use abridge::model::Family;
use abridge::recall::{Handle, StoredOriginal};
use abridge::{SnapshotData, SnapshotError, SnapshotId, SnapshotSink, StoreConfig};
use rusqlite::types::Type;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use crate::row::{OriginalRow, SIZE, SnapshotRow, parse};
use crate::{Entry, Error, Pruned, Result, Snapshot, SnapshotStore, migrate};

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
        let kept = self.source.replace(source.to_owned());
        let id = self.insert(snapshot);
        self.source = kept;
        id
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

    fn insert(&self, s: &SnapshotData<'_>) -> Result<SnapshotId> {
        let r = SnapshotRow::of(s)?;
        let originals = OriginalRow::all(s)?;
        let path = self.path.clone();
        let sql = |cause| Error::Sqlite {
            path: path.clone(),
            cause,
        };
        let mut conn = self.conn();
        let tx = conn.transaction().map_err(sql)?;
        tx.execute(
            "INSERT INTO snapshots (source, model, family, tokens_before, tokens_after, target,
                    summarizer, briefing, attempts, report, config, before_body, after_body,
                    dropped_iterations, provider_tokens_before, provider_tokens_after)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
            params![
                self.source,
                r.model,
                r.family,
                r.tokens_before,
                r.tokens_after,
                r.target,
                r.summarizer,
                r.briefing,
                r.attempts,
                r.report,
                r.config,
                r.before_body,
                r.after_body,
                r.dropped_iterations,
                r.provider_tokens_before,
                r.provider_tokens_after,
            ],
        )
        .map_err(sql)?;
        let id = SnapshotId(tx.last_insert_rowid());
        // An original named again goes with the newest snapshot naming it.
        {
            let mut insert = tx
                .prepare_cached(
                    "INSERT INTO originals (handle, snapshot, kind, label, body)
                     VALUES (?1, ?2, ?3, ?4, ?5)
                     ON CONFLICT (handle) DO UPDATE SET snapshot = excluded.snapshot,
                        label = excluded.label",
                )
                .map_err(sql)?;
            for o in &originals {
                insert
                    .execute(params![o.handle, id.0, o.kind, o.label, o.body])
                    .map_err(sql)?;
            }
        }
        tx.commit().map_err(sql)?;
        drop(conn);
        let retention = self.retention;
        // The snapshot is stored: a retention pass that fails now is tried
        // again after the next one, and never costs this one.
        let _ = self.prune_shared(&retention);
        Ok(id)
    }

    fn count_and_bytes(&self) -> Result<(usize, u64)> {
        self.conn()
            .query_row(
                &format!("SELECT count(*), coalesce(sum({SIZE}), 0) FROM snapshots"),
                [],
                |r| Ok((r.get::<_, i64>(0)? as usize, r.get::<_, i64>(1)? as u64)),
            )
            .map_err(|e| self.sql(e))
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
            "SELECT {ENTRY_COLUMNS}, briefing, report, config, before_body, after_body
             FROM snapshots WHERE id = ?1"
        );
        let row = self
            .conn()
            .query_row(&sql, params![id.0], |r| {
                Ok((
                    entry(r)?,
                    r.get::<_, Option<String>>(ENTRY_WIDTH)?,
                    [1, 2, 3, 4].map(|k| r.get::<_, String>(ENTRY_WIDTH + k)),
                ))
            })
            .optional()
            .map_err(|e| self.sql(e))?
            .ok_or(Error::NotFound(id))?;
        let (entry, briefing, [report, config, before, after]) = row;
        let text = |t: rusqlite::Result<String>| t.map_err(|e| self.sql(e));
        Ok(Snapshot {
            briefing,
            report: parse(id, "report", &text(report)?)?,
            config: parse(id, "config", &text(config)?)?,
            before: parse(id, "history before", &text(before)?)?,
            after: parse(id, "history after", &text(after)?)?,
            entry,
        })
    }
}

impl Store {
    /// [`SnapshotStore::prune`] through a shared reference (a recording
    /// store prunes after each snapshot).
    fn prune_shared(&self, retention: &StoreConfig) -> Result<Pruned> {
        let removed = self.prune_rows(retention).map_err(|e| self.sql(e))?;
        let (kept, bytes) = self.count_and_bytes()?;
        Ok(Pruned {
            removed,
            kept,
            bytes,
        })
    }

    fn prune_rows(&self, retention: &StoreConfig) -> rusqlite::Result<usize> {
        // Reads, then deletes: take the write lock first (see `migrate::run`).
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let newest: i64 = tx.query_row("SELECT coalesce(max(id), 0) FROM snapshots", [], |r| {
            r.get(0)
        })?;
        let mut removed = 0;
        if retention.max_age_days > 0 {
            removed += tx.execute(
                "DELETE FROM snapshots WHERE id < ?1 AND created_at <
                     strftime('%Y-%m-%dT%H:%M:%fZ', 'now', printf('-%d days', ?2))",
                params![newest, retention.max_age_days as i64],
            )?;
        }
        if retention.max_megabytes > 0 {
            let max = (retention.max_megabytes * 1_000_000) as i64;
            // Keep the newest rows whose running size fits; drop the rest.
            removed += tx.execute(
                &format!(
                    "DELETE FROM snapshots WHERE id < ?1 AND id IN (
                         SELECT id FROM (SELECT id, sum({SIZE}) OVER (ORDER BY id DESC) AS upto
                                         FROM snapshots) WHERE upto > ?2)"
                ),
                params![newest, max],
            )?;
        }
        if removed > 0 {
            tx.execute(
                "DELETE FROM originals WHERE snapshot NOT IN (SELECT id FROM snapshots)",
                [],
            )?;
        }
        tx.commit()?;
        Ok(removed)
    }
}

impl SnapshotSink for Store {
    fn record(&self, snapshot: &SnapshotData<'_>) -> Result<SnapshotId, SnapshotError> {
        self.insert(snapshot).map_err(SnapshotError::new)
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
