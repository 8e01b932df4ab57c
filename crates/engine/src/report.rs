//! What an evaluation reports: why it ran, what it did, what it returned.

use std::borrow::Cow;

use abridge_model::Conversation;
use serde::Serialize;

use crate::event::{Event, PolicyRun};
use crate::summarize_step::Attempt;

/// Why a compaction ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// Asked for directly ([`Compactor::compact`]).
    Forced,
    /// History tokens above `trigger.max_tokens`.
    Tokens,
    /// History tokens above the window fraction.
    Window,
    /// Provider-reported usage above `trigger.usage_tokens`.
    Usage,
    /// `trigger.every_iterations` iterations since the last compaction.
    Cadence,
}

impl Reason {
    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Forced => "forced",
            Reason::Tokens => "tokens",
            Reason::Window => "window",
            Reason::Usage => "usage",
            Reason::Cadence => "cadence",
        }
    }
}

/// What an evaluation did, for callers and the CLI's `--report`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// Why compaction ran; `None` when no trigger fired.
    pub reason: Option<Reason>,
    /// True when the returned history differs from the input.
    pub compacted: bool,
    /// Tokens before (messages and tool declarations).
    pub tokens_before: u64,
    /// Tokens after.
    pub tokens_after: u64,
    /// Messages before.
    pub messages_before: usize,
    /// Messages after.
    pub messages_after: usize,
    /// Iterations kept verbatim at the end.
    pub tail_iterations: usize,
    /// The target compaction aimed for.
    pub target: Option<u64>,
    /// Policies that changed something.
    pub policies: Vec<PolicyRun>,
    /// The summarizer whose briefing was used, if one was.
    pub summarizer: Option<String>,
    /// Every summarizer attempt, in cascade order, with errors and latencies.
    pub attempts: Vec<Attempt>,
    /// Id of the stored pre-compaction snapshot, when a store is set.
    pub snapshot: Option<String>,
    /// Events emitted during the evaluation.
    pub events: Vec<Event>,
    /// Wall time in microseconds.
    pub duration_us: u64,
}

/// The result of an evaluation: the history to send, and the report.
#[derive(Debug)]
pub struct Outcome<'a> {
    /// The (possibly unchanged, then borrowed) history.
    pub conversation: Cow<'a, Conversation>,
    /// What happened.
    pub report: Report,
}
