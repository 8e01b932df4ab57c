//! The clipping policies. Each rewrites only the *old region* of a history —
//! after the head (system prompt and task) and before the kept tail — skips
//! pinned messages, leaves tool-call/result pairing intact, and is
//! idempotent: applying it to its own output changes nothing.

mod drop;
mod external;
mod feedback;
mod lossless;
mod supersede;
mod tool_args;
mod tool_results;

use std::ops::Range;

use abridge_model::Message;

use crate::config::{PolicyConfig, PolicyKind};
use crate::recall::Found;

/// A policy that rewrites the old region in place: every pipeline step but
/// summarizing, which needs the original history and a summarizer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Policy {
    Lossless,
    SupersedeReads,
    ClipExternal,
    CollapseFeedback,
    ClipToolResults,
    ClipToolArgs,
    DropIterations,
}

/// One step of a compaction plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// A rewriting policy.
    Policy(Policy),
    /// The old region becomes one briefing (`summarize_step`).
    Summarize,
}

impl From<PolicyKind> for Step {
    fn from(kind: PolicyKind) -> Self {
        match kind {
            PolicyKind::Lossless => Step::Policy(Policy::Lossless),
            PolicyKind::SupersedeReads => Step::Policy(Policy::SupersedeReads),
            PolicyKind::ClipExternal => Step::Policy(Policy::ClipExternal),
            PolicyKind::CollapseFeedback => Step::Policy(Policy::CollapseFeedback),
            PolicyKind::ClipToolResults => Step::Policy(Policy::ClipToolResults),
            PolicyKind::ClipToolArgs => Step::Policy(Policy::ClipToolArgs),
            PolicyKind::DropIterations => Step::Policy(Policy::DropIterations),
            PolicyKind::Summarize => Step::Summarize,
        }
    }
}

impl Policy {
    /// In how many steps it advances over the old region, oldest first, so
    /// that no more is cleared than the target needs. Superseding and
    /// what loses nothing go over it at once: an older copy of a file is
    /// redundant whatever its age.
    pub(crate) fn steps(self) -> usize {
        match self {
            Policy::Lossless | Policy::SupersedeReads => 1,
            _ => 4,
        }
    }

    /// The configured kind it implements, as reports name it.
    pub(crate) fn kind(self) -> PolicyKind {
        match self {
            Policy::Lossless => PolicyKind::Lossless,
            Policy::SupersedeReads => PolicyKind::SupersedeReads,
            Policy::ClipExternal => PolicyKind::ClipExternal,
            Policy::CollapseFeedback => PolicyKind::CollapseFeedback,
            Policy::ClipToolResults => PolicyKind::ClipToolResults,
            Policy::ClipToolArgs => PolicyKind::ClipToolArgs,
            Policy::DropIterations => PolicyKind::DropIterations,
        }
    }
}

/// Applies one policy to `messages[region]`; returns how many items it
/// changed. With `found` (recall on), each placeholder names its original,
/// kept there.
///
/// `region` must start at the end of the head and end at the start of the
/// kept tail (an iteration boundary). Policies that remove messages
/// (`collapse_feedback`, `drop_iterations`) leave the tail in place: callers
/// track the tail by its length from the end.
pub(crate) fn apply(
    policy: Policy,
    messages: &mut Vec<Message>,
    region: Range<usize>,
    cfg: &PolicyConfig,
    found: Option<Found<'_>>,
) -> usize {
    if region.is_empty() {
        return 0;
    }
    match policy {
        Policy::Lossless => lossless::apply(messages, region),
        Policy::SupersedeReads => supersede::apply(messages, region, cfg, found),
        Policy::ClipExternal => external::apply(messages, region, cfg, found),
        Policy::CollapseFeedback => feedback::apply(messages, region, cfg),
        Policy::ClipToolResults => tool_results::apply(messages, region, cfg, found),
        Policy::ClipToolArgs => tool_args::apply(messages, region, cfg, found),
        Policy::DropIterations => drop::apply(messages, region, found),
    }
}
