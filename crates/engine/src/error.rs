//! Errors of the compaction engine.

use abridge_model::{Conversation, Violation};
use abridge_tokens::Counted;

use crate::report::Report;

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a compaction did not produce a conversation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The configuration cannot work.
    #[error("invalid config: {0}")]
    Config(String),
    /// What compaction may not touch is already over the target.
    #[error(
        "cannot shrink below {floor} tokens (target {target}): system prompt and task {head}{}, pinned {pinned}{}, last {tail_iterations} iteration(s) {tail}, tool definitions {tools}",
        briefing_note(*.briefing),
        old_note(*.old)
    )]
    CannotShrink {
        /// Smallest size compaction can reach.
        floor: Counted,
        /// The target it was asked for.
        target: Counted,
        /// Tokens of the system prompt and task (and earlier placeholders).
        head: Counted,
        /// Tokens of an earlier briefing and its working set at the head (0
        /// when there is none).
        briefing: Counted,
        /// Tokens of pinned messages outside head and tail.
        pinned: Counted,
        /// Tokens of the rest of the old region, clipped as far as the
        /// pipeline's policies go (0 when it may drop iterations).
        old: Counted,
        /// Tokens of the minimum kept tail.
        tail: Counted,
        /// Iterations in the minimum kept tail.
        tail_iterations: usize,
        /// Tokens of the tool declarations.
        tools: Counted,
        /// The smallest valid history the floor ladder reached (over the
        /// target, smaller than the input), when it changed anything: what
        /// a proxy sends rather than the whole history.
        smallest: Option<Box<Conversation>>,
        /// The report of `smallest`, recorded like any compaction's: what
        /// it did, and the target it missed.
        report: Option<Box<Report>>,
    },
    /// The rewrite would break the API's rules; the history is returned untouched
    /// by the caller. This is a bug in abridge if it ever happens.
    #[error("refusing to emit an invalid conversation: {}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Invalid(Vec<Violation>),
    /// The turn's [`Cancel`](crate::Cancel) was set (its client left): it
    /// stopped at its next check and changed nothing the caller holds.
    #[error("cancelled: the turn was stopped before it finished")]
    Cancelled,
    /// The history left out its first messages
    /// ([`Input::after`](crate::Input::after)) but no carried compaction
    /// covers them: the turn needs the whole history. Nothing changed.
    #[error(
        "the history leaves out its first {0} messages and no carried compaction covers them: send it whole"
    )]
    LeftOut(usize),
}

fn briefing_note(tokens: Counted) -> String {
    if tokens == Counted::ZERO {
        String::new()
    } else {
        format!(", earlier briefing {tokens} (as short as the budget lets it be)")
    }
}

fn old_note(tokens: Counted) -> String {
    if tokens == Counted::ZERO {
        String::new()
    } else {
        format!(", older iterations clipped as far as the pipeline goes {tokens}")
    }
}
