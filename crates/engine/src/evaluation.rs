//! An evaluation under way, from the turn's measure to its outcome.

use std::borrow::Cow;
use std::time::Instant;

use abridge_model::Conversation;
use abridge_tokens::Counted;

use crate::calibration::Calibration;
use crate::cancel::Cancel;
use crate::event::Event;
use crate::report::{Outcome, Report};
use crate::trigger::Reason;

/// An evaluation under way: the history's tokens and iterations, the events
/// so far, when it started and what stops it.
pub(crate) struct Eval {
    pub(crate) tokens: Counted,
    /// The conversation's calibration, for the report.
    pub(crate) calibration: Calibration,
    pub(crate) iterations: usize,
    pub(crate) events: Vec<Event>,
    pub(crate) start: Instant,
    pub(crate) cancel: Cancel,
}

/// The outcome of an evaluation that leaves the history as it is.
pub(crate) fn unchanged<'a>(
    conv: &'a Conversation,
    reason: Option<Reason>,
    eval: Eval,
) -> Outcome<'a> {
    let n = conv.messages.len();
    Outcome {
        report: Report {
            reason,
            compacted: false,
            tokens_before: eval.tokens,
            tokens_after: eval.tokens,
            messages_before: n,
            messages_after: n,
            tail_iterations: eval.iterations,
            target: None,
            policies: Vec::new(),
            summarizer: None,
            attempts: Vec::new(),
            snapshot: None,
            events: eval.events,
            duration_us: eval.start.elapsed().as_micros() as u64,
            degraded: Vec::new(),
            briefing: None,
            calibration: eval.calibration,
            sheet: None,
            handles: Vec::new(),
        },
        conversation: Cow::Borrowed(conv),
    }
}
