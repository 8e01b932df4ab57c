//! Events the engine emits, for logs, metrics and the CLI's `--events`.

use abridge_model::{Message, Role};
use abridge_tokens::{Calibrated, Counted};
use serde::{Deserialize, Serialize};

use crate::policy::kind::PolicyKind;
use crate::recall::Handle;
use crate::trigger::Reason;

/// An id of the newest iteration of `messages`, to tie an event to the
/// agent's own records: its newest tool call's id (unique per call in every
/// API), or `message-N` (N messages) when no call was made yet.
pub fn iteration_id(messages: &[Message]) -> String {
    messages
        .iter()
        .rev()
        .filter(|m| m.role == Role::Assistant)
        .find_map(|m| m.tool_calls().last())
        .map_or_else(|| format!("message-{}", messages.len()), |c| c.id.clone())
}

/// Something the engine observed or did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Event {
    /// Emitted on every evaluation, before any rewrite.
    HistorySize {
        /// Tokens of the history (messages and tool declarations), as the
        /// configured tokenizer counts them.
        tokens: Counted,
        /// The same in the provider's units: `tokens` corrected by what
        /// reported usage taught ([`Calibration`](crate::Calibration)).
        calibrated_tokens: Calibrated,
        /// Messages in the history.
        messages: usize,
        /// Iterations in the history.
        iterations: usize,
        /// `calibrated_tokens` over the model's window, when it is known.
        window_fraction: Option<f64>,
        /// The newest iteration's id ([`iteration_id`]).
        #[serde(default)]
        iteration_id: String,
    },
    /// Emitted once per compaction that rewrote the history.
    HistoryCompacted {
        /// Why it ran.
        reason: Reason,
        /// Policies that changed something, in order.
        policies: Vec<PolicyRun>,
        /// Messages before.
        messages_before: usize,
        /// Messages after.
        messages_after: usize,
        /// Tokens before.
        tokens_before: Counted,
        /// Tokens after.
        tokens_after: Counted,
        /// `tokens_before - tokens_after`.
        tokens_saved: Counted,
        /// The target it compacted to, if any.
        target: Option<Counted>,
        /// The summarizer whose briefing was used, if one was.
        summarizer: Option<String>,
        /// Wall time of the compaction, in microseconds.
        duration_us: u64,
        /// Iterations in the history it compacted (as `history_size` counts
        /// them): the agent's iteration number when that history is the
        /// agent's whole one, as a proxy's client sends it.
        #[serde(default)]
        iteration: usize,
        /// The newest iteration's id ([`iteration_id`]).
        #[serde(default)]
        iteration_id: String,
        /// Characters of the briefing, when one was written.
        #[serde(default)]
        summary_length: Option<usize>,
    },
    /// The compaction could not reach its target with the preferred tail
    /// and took a rung of the floor ladder.
    Degraded(Degradation),
    /// The steps left room under the target, and results they clipped got
    /// their content back, whole or as excerpts (and clipped arguments,
    /// whole, or their notes named more), and results the briefing replaced were quoted in it by the
    /// lines that name the most.
    RoomGivenBack {
        /// Results, calls and notes given room.
        results: usize,
        /// Tokens they added.
        tokens: Counted,
    },
    /// A compaction was due but not applied: it would clear fewer tokens
    /// than `budget.clear_at_least`, not worth breaking the prompt cache.
    CompactionSkipped {
        /// The trigger that fired.
        reason: Reason,
        /// Tokens the compaction would have cleared, in the provider's units.
        would_clear: Calibrated,
        /// The configured minimum, in the provider's units.
        clear_at_least: Calibrated,
    },
    /// A compaction was due but every summarizer failed, and
    /// `summary.skip_on_failure` sent the history as it was.
    SummaryFailedSkipped {
        /// The trigger that fired.
        reason: Reason,
        /// Summarizer attempts made, all failed.
        attempts: usize,
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
    /// The model called the recall tool.
    Recalled {
        /// The handle asked for, when the call named one.
        handle: Option<Handle>,
        /// Whether an original was given back.
        found: bool,
        /// Bytes of original content given back.
        bytes: usize,
        /// The page given (0 when none) of how many.
        page: usize,
        /// Pages of the original.
        pages: usize,
    },
    /// The store could not be read for an original (it is then answered as
    /// unknown).
    RecallFailed {
        /// The handle.
        handle: Handle,
        /// The store's error.
        error: String,
    },
}

/// What one policy did during a compaction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyRun {
    /// The policy.
    pub policy: PolicyKind,
    /// Items it changed (blocks, results, calls, messages, iterations).
    pub items: usize,
    /// Tokens it saved.
    pub tokens_saved: Counted,
}

/// One rung of the ladder taken by a compaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rung {
    /// The verbatim tail kept fewer iterations than `budget.min_iterations`.
    FewerIterations,
    /// Results and arguments inside the kept iterations (not the newest)
    /// became placeholders.
    KeptIterationsClipped,
    /// The history was left above the target but under the trigger,
    /// rather than cut the newest results.
    AboveTarget,
    /// The newest iteration's own results were cut to fit.
    NewestResultsCut,
    /// Even the floor was over the target: the old region became a
    /// briefing anyway, at its smallest, so that the smallest history is
    /// as near the target as it can be.
    FloorBriefed,
}

impl Rung {
    /// Stable kebab-case name (headers, metrics labels).
    pub fn as_str(self) -> &'static str {
        match self {
            Rung::FewerIterations => "fewer-iterations",
            Rung::KeptIterationsClipped => "kept-iterations-clipped",
            Rung::AboveTarget => "above-target",
            Rung::NewestResultsCut => "newest-results-cut",
            Rung::FloorBriefed => "floor-briefed",
        }
    }
}

/// A rung taken, and where it left the history.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Degradation {
    /// The rung.
    pub rung: Rung,
    /// Iterations kept verbatim ([`Rung::FewerIterations`]), items
    /// changed (the clipping rungs), 0 for [`Rung::AboveTarget`].
    pub count: usize,
    /// Tokens after the rung, tool declarations included.
    pub tokens_after: Counted,
}
