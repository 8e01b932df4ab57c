//! Where pre-compaction histories are recorded. The engine holds no
//! database: a store (such as `abridge-store`'s SQLite one) implements
//! [`SnapshotSink`] and is handed to the compactor.

use abridge_model::Conversation;

use crate::config::Config;
use crate::report::Report;

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
}

/// Records a snapshot of every compaction.
pub trait SnapshotSink: Send {
    /// Stores the snapshot and returns its id, or says why it could not.
    fn record(&mut self, snapshot: &SnapshotData<'_>) -> Result<String, String>;
}
