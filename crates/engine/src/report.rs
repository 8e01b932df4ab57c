//! What an evaluation reports: why it ran, what it did, what it returned.
//! Every type here serializes and deserializes, so a stored report reloads
//! as types.

use abridge_tokens::Counted;
use std::borrow::Cow;

use abridge_model::{Conversation, Usage};
use abridge_summarize::{Sheet, SummarizeError, Verification};
use serde::{Deserialize, Serialize};

use crate::calibration::Calibration;
use crate::event::{Degradation, Event, PolicyRun};
use crate::trigger::Reason;

/// One summarizer attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attempt {
    /// Summarizer name.
    pub summarizer: String,
    /// Wall time in milliseconds.
    pub ms: u64,
    /// Whether its briefing was used, and what verification repaired or why it failed.
    pub outcome: AttemptOutcome,
    /// What it cost, as the summarizer's provider reported it (an LLM's,
    /// whether its briefing was used or rejected).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// How a summarizer attempt ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum AttemptOutcome {
    /// Its briefing was used.
    Used {
        /// For an LLM briefing: what verification repaired.
        verification: Option<Verification>,
    },
    /// It gave no usable briefing; the cascade went on.
    Failed {
        /// Why.
        error: SummarizeError,
    },
}

impl Attempt {
    /// True when its briefing was used.
    pub fn used(&self) -> bool {
        matches!(self.outcome, AttemptOutcome::Used { .. })
    }

    /// Why it failed, when it did.
    pub fn error(&self) -> Option<&SummarizeError> {
        match &self.outcome {
            AttemptOutcome::Failed { error } => Some(error),
            AttemptOutcome::Used { .. } => None,
        }
    }

    /// What verification repaired, for a used LLM briefing.
    pub fn verification(&self) -> Option<&Verification> {
        match &self.outcome {
            AttemptOutcome::Used { verification } => verification.as_ref(),
            AttemptOutcome::Failed { .. } => None,
        }
    }
}

/// What an evaluation did, for callers and the CLI's `--report`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Why compaction ran; `None` when no trigger fired.
    pub reason: Option<Reason>,
    /// True when the returned history differs from the input.
    pub compacted: bool,
    /// Tokens before (messages and tool declarations).
    pub tokens_before: Counted,
    /// Tokens after.
    pub tokens_after: Counted,
    /// Messages before.
    pub messages_before: usize,
    /// Messages after.
    pub messages_after: usize,
    /// Iterations kept verbatim at the end.
    pub tail_iterations: usize,
    /// The target compaction aimed for.
    pub target: Option<Counted>,
    /// Policies that changed something.
    pub policies: Vec<PolicyRun>,
    /// The summarizer whose briefing was used, if one was.
    pub summarizer: Option<String>,
    /// Every summarizer attempt, in cascade order, with errors and latencies.
    pub attempts: Vec<Attempt>,
    /// Id of the stored pre-compaction snapshot, when a store is set.
    pub snapshot: Option<SnapshotId>,
    /// Events emitted during the evaluation.
    pub events: Vec<Event>,
    /// Wall time in microseconds.
    pub duration_us: u64,
    /// Rungs of the floor ladder taken, in order (empty when the preferred
    /// tail fit the target).
    #[serde(default)]
    pub degraded: Vec<Degradation>,
    /// Index of the briefing message in the returned history, when the
    /// compaction made one (reports stored before it was recorded say
    /// `None`: their briefing is found by its wrapper).
    #[serde(default)]
    pub briefing: Option<usize>,
    /// The conversation's calibration when it ran: its counts in the
    /// provider's units are `calibration.apply(tokens_after)` (reports stored
    /// before it was recorded read as the identity).
    #[serde(default)]
    pub calibration: Calibration,
    /// The briefing as data, when its summarizer keeps any (the offline
    /// sheet): what a chained compaction of this conversation merges.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sheet: Option<Sheet>,
    /// The handles of the originals this compaction kept (the recall tool
    /// answers them, and its search reads them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub handles: Vec<crate::recall::Handle>,
}

impl Report {
    /// What its summarizers reported writing briefings cost, summed over
    /// its attempts (used or not); `None` when none reported usage.
    pub fn summarizer_usage(&self) -> Option<Usage> {
        self.attempts
            .iter()
            .filter_map(|a| a.usage)
            .reduce(|a, b| Usage {
                input_tokens: a.input_tokens + b.input_tokens,
                output_tokens: a.output_tokens + b.output_tokens,
                cache_read_tokens: a.cache_read_tokens + b.cache_read_tokens,
                cache_write_tokens: a.cache_write_tokens + b.cache_write_tokens,
            })
    }

    /// The briefing's text, without its wrapper, in `after` (the history
    /// this report's compaction returned).
    pub fn briefing_text(&self, after: &Conversation, wrapper: &str) -> Option<String> {
        match self.briefing {
            Some(i) => after.messages.get(i).and_then(|m| {
                abridge_summarize::wrapper::unwrap(wrapper, &m.text_content()).map(str::to_owned)
            }),
            None => briefing_in(after, wrapper),
        }
    }
}

/// The text, without its wrapper, of the first briefing in `conv` (a
/// history no report describes: one the engine could not bring to its
/// target, or one a caller brought).
pub fn briefing_in(conv: &Conversation, wrapper: &str) -> Option<String> {
    conv.messages.iter().find_map(|m| {
        abridge_summarize::wrapper::unwrap(wrapper, &m.text_content()).map(str::to_owned)
    })
}

/// The result of an evaluation: the history to send, and the report.
#[derive(Debug)]
pub struct Outcome<'a> {
    /// The (possibly unchanged, then borrowed) history.
    pub conversation: Cow<'a, Conversation>,
    /// What happened.
    pub report: Report,
}

/// Id of a stored snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SnapshotId(pub i64);

impl std::fmt::Display for SnapshotId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::str::FromStr for SnapshotId {
    type Err = std::num::ParseIntError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        s.trim().parse().map(SnapshotId)
    }
}
