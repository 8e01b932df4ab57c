//! What abridge keeps: snapshots of compactions (for `abridge log`, `show`,
//! `restore`, `replay` and the dashboard), the proxy's sessions (each
//! thread's state, so a restarted proxy or another replica goes on) and its
//! request log. One [`SnapshotStore`] trait for snapshots and one
//! [`SessionStore`] for the proxy, implemented by the embedded SQLite
//! [`Store`] and, with the `postgres` feature, `PgStore` for replicas.
//!
//! Every compaction recorded keeps the history before it (as its wire
//! body), the originals its placeholders and briefing name by handle (for
//! the recall tool; each goes with the newest snapshot that named it), the
//! body after, the config, the full report (every summarizer
//! attempt with its error and latency, the policies, the events, the
//! briefing's index, the calibration), the briefing, and the token figures
//! in abridge's count and in the provider's units. Stored values reload as
//! the engine's types. The schema is versioned: a store written by an
//! earlier release is migrated when it is opened.
//!
//! ```
//! use abridge::{Compactor, Config, SnapshotId, model::decode};
//! use abridge_store::{SnapshotStore, Store};
//!
//! let mut config = Config::default();
//! config.budget.target_tokens = Some(600);
//! config.budget.min_iterations = 1;
//! let mut compactor = Compactor::new(config)?;
//! compactor.set_store(Box::new(Store::in_memory()?));
//! let bytes = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/coding-agent.openai.json"))?;
//! let conv = decode(&bytes)?.remove(0);
//! let out = compactor.compact(&conv)?;
//! assert_eq!(out.report.snapshot, Some(SnapshotId(1)));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod migrate;
mod parts;
#[cfg(feature = "postgres")]
mod postgres;
mod requests;
mod row;
mod session;
mod sqlite;
mod totals;

use abridge::model::{Conversation, Family, decode_value};
use abridge::tokens::{Calibrated, Counted};
use abridge::{Calibration, Config, Report, SnapshotId, SnapshotSink, StoreConfig};
use serde::{Deserialize, Serialize};
use serde_json::Value;

#[cfg(feature = "postgres")]
pub use postgres::PgStore;
pub use requests::{Accounting, RequestRecord, RequestStats};
pub use session::{SessionRecord, SessionStore, Write, Written};
pub use sqlite::Store;
pub use totals::{GroupBy, Totals};

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong with the store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The database could not be opened, read or written.
    // The cause is printed here and not chained as a source: SQLite's
    // errors repeat their message down the chain.
    #[error("snapshot store {path}: {cause}")]
    Sqlite {
        /// Database file.
        path: String,
        /// SQLite's error.
        cause: rusqlite::Error,
    },
    /// Its folder could not be created.
    #[error("snapshot store {path}: {cause}")]
    Io {
        /// The folder.
        path: String,
        /// The error.
        cause: std::io::Error,
    },
    /// A stored field is not what was written.
    #[error("snapshot {id}: {what}")]
    Corrupt {
        /// Snapshot id.
        id: SnapshotId,
        /// What is wrong.
        what: String,
    },
    /// The store was written by a newer release.
    #[error(
        "snapshot store {path}: schema version {found} is newer than this release knows ({known})"
    )]
    TooNew {
        /// Database file.
        path: String,
        /// Its schema version.
        found: i64,
        /// The newest this release knows.
        known: i64,
    },
    /// A value could not be serialized for storage.
    #[error("snapshot store: cannot serialize {what}: {message}")]
    Serialize {
        /// What.
        what: &'static str,
        /// serde's message.
        message: String,
    },
    /// The PostgreSQL store failed.
    #[error("{at}: {message}")]
    Postgres {
        /// Server and database (never the credentials).
        at: String,
        /// What went wrong.
        message: String,
    },
    /// A stored session is not what was written.
    #[error("session {id}: {what}")]
    CorruptSession {
        /// Session id.
        id: String,
        /// What is wrong.
        what: String,
    },
    /// No snapshot has that id.
    #[error("no snapshot with id {0}")]
    NotFound(SnapshotId),
    /// A stored original is not what was written.
    #[error("original {handle}: {what}")]
    CorruptOriginal {
        /// Its handle.
        handle: String,
        /// What is wrong.
        what: String,
    },
}

impl Error {
    /// True when the same write may land later: the database was busy,
    /// locked, read-only, full, unreachable or gone for a while; false when
    /// the data itself is at fault (retrying cannot help).
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Sqlite { cause, .. } => !matches!(
                cause,
                rusqlite::Error::ToSqlConversionFailure(_)
                    | rusqlite::Error::FromSqlConversionFailure(..)
                    | rusqlite::Error::InvalidParameterName(_)
                    | rusqlite::Error::InvalidColumnType(..)
                    | rusqlite::Error::SqlInputError { .. }
            ),
            Error::Io { .. } | Error::Postgres { .. } => true,
            _ => false,
        }
    }
}

/// One line of `abridge log`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// Snapshot id.
    pub id: SnapshotId,
    /// When it was recorded (UTC, RFC 3339).
    pub created_at: String,
    /// Where the history came from (a file name), if known.
    pub source: Option<String>,
    /// Model of the conversation.
    pub model: Option<String>,
    /// Wire family of the stored bodies.
    pub family: Family,
    /// Tokens before compaction, as abridge counted them.
    pub tokens_before: Counted,
    /// Tokens after.
    pub tokens_after: Counted,
    /// Tokens before, in the provider's units (through the conversation's
    /// calibration when it ran).
    pub provider_tokens_before: Calibrated,
    /// Tokens after, in the provider's units.
    pub provider_tokens_after: Calibrated,
    /// The summarizer whose briefing was used, if any.
    pub summarizer: Option<String>,
    /// Iterations the compaction dropped (none when it only clipped or
    /// summarized).
    pub dropped_iterations: usize,
}

impl Entry {
    /// The token columns of a row: counts, and the same in the provider's
    /// units when the row has them (rows written before they were stored
    /// hold the counts only, taken through the identity calibration).
    pub(crate) fn counted(
        before: i64,
        after: i64,
        provider_before: Option<i64>,
        provider_after: Option<i64>,
    ) -> Entry {
        let (before, after) = (
            Counted::new(row::count(before)),
            Counted::new(row::count(after)),
        );
        let identity = Calibration::default();
        Entry {
            id: SnapshotId(0),
            created_at: String::new(),
            source: None,
            model: None,
            family: Family::OpenAi,
            tokens_before: before,
            tokens_after: after,
            provider_tokens_before: provider_before.map_or_else(
                || identity.apply(before),
                |t| Calibrated::new(row::count(t)),
            ),
            provider_tokens_after: provider_after
                .map_or_else(|| identity.apply(after), |t| Calibrated::new(row::count(t))),
            summarizer: None,
            dropped_iterations: 0,
        }
    }
}

/// A whole snapshot.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Snapshot {
    /// Summary fields.
    #[serde(flatten)]
    pub entry: Entry,
    /// The briefing text (without its wrapper), if one was made.
    pub briefing: Option<String>,
    /// The full compaction report (attempts, policies, events).
    pub report: Report,
    /// The config it ran with.
    pub config: Config,
    /// The request body before compaction.
    pub before: Value,
    /// The request body after compaction.
    pub after: Value,
}

impl Snapshot {
    /// The history before compaction, decoded.
    pub fn history(&self) -> Result<Conversation> {
        self.decode(&self.before, "history before")
    }

    /// The history after compaction (what was sent), decoded.
    pub fn compacted(&self) -> Result<Conversation> {
        self.decode(&self.after, "history after")
    }

    fn decode(&self, body: &Value, what: &str) -> Result<Conversation> {
        let format = stored_format(self.entry.family, body);
        let mut convs = decode_value(body.clone(), format).map_err(|e| Error::Corrupt {
            id: self.entry.id,
            what: format!("stored {what} does not decode: {e}"),
        })?;
        Ok(convs.remove(0))
    }
}

/// The format of a stored body of `family`: the one it shows (a Responses
/// body or AI SDK messages are of the OpenAI family), else the family's
/// request body.
pub(crate) fn stored_format(family: Family, body: &Value) -> abridge::model::Format {
    match abridge::model::detect(body) {
        Ok(format) if format.family() == family => format,
        _ => abridge::model::Conversation::new(family).format,
    }
}

/// What a prune removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Pruned {
    /// Snapshots removed.
    pub removed: usize,
    /// Snapshots left.
    pub kept: usize,
    /// Proxy sessions removed (the least recently saved first: one that
    /// comes back compacts afresh).
    pub sessions: usize,
    /// Bytes the store occupies now.
    pub bytes: u64,
}

/// Reading and writing snapshots: what every front end uses, whatever the
/// database behind it.
pub trait SnapshotStore: SnapshotSink {
    /// The newest snapshots first, at most `limit`.
    fn list(&self, limit: usize) -> Result<Vec<Entry>>;
    /// One snapshot.
    fn get(&self, id: SnapshotId) -> Result<Snapshot>;
    /// Removes what is past `retention`: snapshots and proxy sessions older
    /// than its age, then, while the store occupies more than its size, the
    /// oldest snapshots and least recently saved sessions together, down
    /// to a sixteenth under it; the newest snapshot always stays.
    fn prune(&mut self, retention: &StoreConfig) -> Result<Pruned>;
    /// A session's logged requests, oldest first (the newest `limit`);
    /// none for a store without a request log.
    fn requests(&self, source: &str, limit: usize) -> Result<Vec<RequestRecord>> {
        let _ = (source, limit);
        Ok(Vec::new())
    }
    /// Every session's request count and last request.
    fn request_stats(&self) -> Result<std::collections::HashMap<String, RequestStats>> {
        Ok(std::collections::HashMap::new())
    }
    /// What the proxy's requests add up to, grouped `by`, the newest day
    /// first (at most `limit` lines); none for a store without a log.
    fn totals(&self, by: GroupBy, limit: usize) -> Result<Vec<Totals>> {
        let _ = (by, limit);
        Ok(Vec::new())
    }
}
