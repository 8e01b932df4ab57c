//! Where pre-compaction histories are recorded. The engine holds no
//! database: a store (such as `abridge-store`'s SQLite one) implements
//! [`SnapshotSink`] and is handed to the compactor.

use abridge_model::Conversation;

use crate::config::Config;
use crate::recall::{Handle, Original, StoredOriginal};
use crate::report::{Report, SnapshotId};

/// Everything about one compaction worth keeping.
#[derive(Debug, Clone, Copy)]
pub struct SnapshotData<'a> {
    /// The history before compaction.
    pub before: &'a Conversation,
    /// The history after.
    pub after: &'a Conversation,
    /// The config it ran with.
    pub config: &'a Config,
    /// What it did (policies, summarizer attempts, tokens).
    pub report: &'a Report,
    /// The conversation's name, when its [`Thread`](crate::Thread) has one
    /// (a proxy names each session's thread by the session's id).
    pub thread: Option<&'a str>,
    /// What this compaction's placeholders and briefing name by handle
    /// (each once), for the recall tool.
    pub originals: &'a [std::sync::Arc<Original>],
}

/// Why a snapshot could not be recorded: the store's own error.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct SnapshotError(pub Box<dyn std::error::Error + Send + Sync>);

impl SnapshotError {
    /// Wraps a store's error.
    pub fn new(e: impl std::error::Error + Send + Sync + 'static) -> Self {
        SnapshotError(Box::new(e))
    }
}

/// Records a snapshot of every compaction. Shared by every thread of an
/// engine (every session of a proxy's model) at once: a store that needs a
/// lock keeps its own, around what it must not do twice at a time.
pub trait SnapshotSink: Send + Sync {
    /// Stores the snapshot and returns its id.
    fn record(&self, snapshot: &SnapshotData<'_>) -> Result<SnapshotId, SnapshotError>;

    /// The original a handle names, when this store keeps it (a store that
    /// keeps none answers `None`), with the session that kept it.
    fn recall(&self, handle: &Handle) -> Result<Option<StoredOriginal>, SnapshotError> {
        let _ = handle;
        Ok(None)
    }
}
