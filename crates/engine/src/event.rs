//! Events the engine emits, for logs, metrics and the CLI's `--events`.

use serde::Serialize;

/// Something the engine observed or did.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Event {
    /// Emitted on every evaluation, before any rewrite.
    HistorySize {
        /// Tokens of the history (messages and tool declarations).
        tokens: u64,
        /// Messages in the history.
        messages: usize,
        /// Iterations in the history.
        iterations: usize,
        /// `tokens` over the model's window, when the window is known.
        window_fraction: Option<f64>,
    },
    /// Emitted once per compaction that rewrote the history.
    HistoryCompacted {
        /// Why it ran: `forced`, `tokens`, `window`, `usage` or `cadence`.
        reason: String,
        /// Policies that changed something, in order.
        policies: Vec<PolicyRun>,
        /// Messages before.
        messages_before: usize,
        /// Messages after.
        messages_after: usize,
        /// Tokens before.
        tokens_before: u64,
        /// Tokens after.
        tokens_after: u64,
        /// `tokens_before - tokens_after`.
        tokens_saved: u64,
        /// The target it compacted to, if any.
        target: Option<u64>,
        /// The summarizer whose briefing was used, if one was.
        summarizer: Option<String>,
        /// Wall time of the compaction, in microseconds.
        duration_us: u64,
    },
    /// A compaction was due but not applied.
    CompactionSkipped {
        /// Why (e.g. it would clear fewer tokens than `clear_at_least`).
        reason: String,
    },
    /// A compaction failed; the history was left as it was.
    CompactionFailed {
        /// The error.
        error: String,
    },
    /// The pre-compaction snapshot could not be stored; the compaction
    /// result stands and the caller still holds the original history.
    SnapshotFailed {
        /// The store's error.
        error: String,
    },
}

/// What one policy did during a compaction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PolicyRun {
    /// Policy name (`clip_tool_results`…).
    pub policy: &'static str,
    /// Items it changed (blocks, results, calls, messages, iterations).
    pub items: usize,
    /// Tokens it saved.
    pub tokens_saved: u64,
}
