//! SQLite snapshots of compactions, for `abridge log`, `show`, `restore`
//! and `replay`.
//!
//! Every compaction recorded here keeps the history before it (as its wire
//! body), the body after, the config, the summarizer and every attempt with
//! its error and latency, the briefing, and the token figures.
//!
//! ```
//! use abridge::{Compactor, Config, model::decode};
//! use abridge_store::Store;
//!
//! let mut config = Config::default();
//! config.budget.target_tokens = Some(600);
//! config.budget.min_iterations = 1;
//! let mut compactor = Compactor::new(config)?;
//! compactor.set_store(Box::new(Store::in_memory()?));
//! let bytes = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/coding-agent.openai.json"))?;
//! let conv = decode(&bytes)?.remove(0);
//! let out = compactor.compact(&conv)?;
//! assert_eq!(out.report.snapshot.as_deref(), Some("1"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::path::{Path, PathBuf};

use abridge::model::{Conversation, Message, decode_value, encode};
use abridge::summarize::unwrap;
use abridge::{Config, SnapshotData, SnapshotSink};
use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;
use serde_json::Value;

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong with the store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The database could not be opened, read or written.
    #[error("snapshot store {path}: {source}")]
    Sqlite {
        /// Database file.
        path: String,
        /// SQLite's error.
        source: rusqlite::Error,
    },
    /// Its folder could not be created.
    #[error("snapshot store {path}: {source}")]
    Io {
        /// The folder.
        path: String,
        /// The error.
        source: std::io::Error,
    },
    /// A stored field is not what was written.
    #[error("snapshot {id}: {what}")]
    Corrupt {
        /// Snapshot id.
        id: i64,
        /// What is wrong.
        what: String,
    },
    /// No snapshot has that id.
    #[error("no snapshot with id {0}")]
    NotFound(i64),
}

/// One line of `abridge log`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Entry {
    /// Snapshot id.
    pub id: i64,
    /// When it was recorded (UTC, RFC 3339).
    pub created_at: String,
    /// Where the history came from (a file name), if known.
    pub source: Option<String>,
    /// Model of the conversation.
    pub model: Option<String>,
    /// Tokens before compaction.
    pub tokens_before: i64,
    /// Tokens after.
    pub tokens_after: i64,
    /// The summarizer whose briefing was used, if any.
    pub summarizer: Option<String>,
}

/// A whole snapshot.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Snapshot {
    /// Summary fields.
    #[serde(flatten)]
    pub entry: Entry,
    /// The target the compaction aimed for.
    pub target: Option<i64>,
    /// The briefing text (without its wrapper), if one was made.
    pub briefing: Option<String>,
    /// Summarizer attempts with errors, latencies and verification.
    pub attempts: Value,
    /// The full compaction report.
    pub report: Value,
    /// The config it ran with.
    pub config: Value,
    /// The request body before compaction.
    pub before: Value,
    /// The request body after compaction.
    pub after: Value,
}

impl Snapshot {
    /// The history before compaction, decoded.
    pub fn history(&self) -> Result<Conversation> {
        let format = match self.report["family"].as_str() {
            Some("anthropic") => abridge::model::Format::Anthropic,
            _ => abridge::model::Format::OpenAi,
        };
        let mut convs = decode_value(self.before.clone(), format).map_err(|e| Error::Corrupt {
            id: self.entry.id,
            what: format!("stored history does not decode: {e}"),
        })?;
        Ok(convs.remove(0))
    }

    /// The config it ran with.
    pub fn config(&self) -> Result<Config> {
        serde_json::from_value(self.config.clone()).map_err(|e| Error::Corrupt {
            id: self.entry.id,
            what: format!("stored config does not parse: {e}"),
        })
    }
}

/// A snapshot store in one SQLite file.
#[derive(Debug)]
pub struct Store {
    conn: Connection,
    path: String,
    source: Option<String>,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS snapshots (
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

impl Store {
    /// Opens (or creates) the store at `path`, creating its folder.
    pub fn open(path: &Path) -> Result<Store> {
        let shown = path.display().to_string();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| Error::Io {
                path: dir.display().to_string(),
                source,
            })?;
        }
        let conn = Connection::open(path).map_err(|source| Error::Sqlite {
            path: shown.clone(),
            source,
        })?;
        Self::init(conn, shown)
    }

    /// A store in memory (for tests and one-off runs).
    pub fn in_memory() -> Result<Store> {
        let conn = Connection::open_in_memory().map_err(|source| Error::Sqlite {
            path: ":memory:".into(),
            source,
        })?;
        Self::init(conn, ":memory:".into())
    }

    fn init(conn: Connection, path: String) -> Result<Store> {
        conn.execute_batch(SCHEMA).map_err(|source| Error::Sqlite {
            path: path.clone(),
            source,
        })?;
        Ok(Store {
            conn,
            path,
            source: None,
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

    fn sql(&self, source: rusqlite::Error) -> Error {
        Error::Sqlite {
            path: self.path.clone(),
            source,
        }
    }

    /// The newest snapshots first.
    pub fn list(&self, limit: usize) -> Result<Vec<Entry>> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT id, created_at, source, model, tokens_before, tokens_after, summarizer
                 FROM snapshots ORDER BY id DESC LIMIT ?1",
            )
            .map_err(|e| self.sql(e))?;
        let rows = stmt
            .query_map(params![limit as i64], entry)
            .map_err(|e| self.sql(e))?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(|e| self.sql(e))
    }

    /// One snapshot.
    pub fn get(&self, id: i64) -> Result<Snapshot> {
        let row = self
            .conn
            .query_row(
                "SELECT id, created_at, source, model, tokens_before, tokens_after, summarizer,
                        target, briefing, attempts, report, config, before_body, after_body
                 FROM snapshots WHERE id = ?1",
                params![id],
                |r| {
                    Ok((
                        entry(r)?,
                        r.get::<_, Option<i64>>(7)?,
                        r.get::<_, Option<String>>(8)?,
                        [9, 10, 11, 12, 13].map(|i| r.get::<_, String>(i)),
                    ))
                },
            )
            .optional()
            .map_err(|e| self.sql(e))?
            .ok_or(Error::NotFound(id))?;
        let (entry, target, briefing, texts) = row;
        let mut json = Vec::with_capacity(5);
        for t in texts {
            let t = t.map_err(|e| self.sql(e))?;
            json.push(serde_json::from_str(&t).map_err(|e| Error::Corrupt {
                id,
                what: e.to_string(),
            })?);
        }
        let [attempts, report, config, before, after]: [Value; 5] =
            json.try_into().map_err(|_| Error::Corrupt {
                id,
                what: "missing fields".into(),
            })?;
        Ok(Snapshot {
            entry,
            target,
            briefing,
            attempts,
            report,
            config,
            before,
            after,
        })
    }

    fn insert(&mut self, s: &SnapshotData<'_>) -> std::result::Result<i64, String> {
        let body = |c: &Conversation| encode(c).map(|v| v.to_string()).map_err(|e| e.to_string());
        let tag = &s.config.summary.wrapper;
        let briefing = s
            .after
            .messages
            .iter()
            .map(Message::text_content)
            .find_map(|t| unwrap(tag, &t).map(str::to_owned));
        let mut report = serde_json::to_value(s.report).map_err(|e| e.to_string())?;
        report["family"] = Value::String(s.before.family.as_str().to_owned());
        self.conn
            .execute(
                "INSERT INTO snapshots (source, model, tokens_before, tokens_after, target, summarizer,
                    briefing, attempts, report, config, before_body, after_body)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
                params![
                    self.source,
                    s.before.model,
                    s.report.tokens_before as i64,
                    s.report.tokens_after as i64,
                    s.report.target.map(|t| t as i64),
                    s.report.summarizer,
                    briefing,
                    to_json(&s.report.attempts)?,
                    report.to_string(),
                    to_json(s.config)?,
                    body(s.before)?,
                    body(s.after)?,
                ],
            )
            .map_err(|e| self.sql(e).to_string())?;
        Ok(self.conn.last_insert_rowid())
    }
}

impl SnapshotSink for Store {
    fn record(&mut self, snapshot: &SnapshotData<'_>) -> std::result::Result<String, String> {
        self.insert(snapshot).map(|id| id.to_string())
    }
}

/// The [`Entry`] in the first seven columns of a row.
fn entry(r: &rusqlite::Row<'_>) -> rusqlite::Result<Entry> {
    Ok(Entry {
        id: r.get(0)?,
        created_at: r.get(1)?,
        source: r.get(2)?,
        model: r.get(3)?,
        tokens_before: r.get(4)?,
        tokens_after: r.get(5)?,
        summarizer: r.get(6)?,
    })
}

fn to_json<T: Serialize>(v: &T) -> std::result::Result<String, String> {
    serde_json::to_string(v).map_err(|e| e.to_string())
}

/// The user's data directory: `$XDG_DATA_HOME`, else the platform's.
fn dirs_data() -> Option<PathBuf> {
    std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(dirs::data_dir)
}
