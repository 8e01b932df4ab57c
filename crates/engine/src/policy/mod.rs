//! The clipping policies. Each rewrites only the *old region* of a history —
//! after the head (system prompt and task) and before the kept tail — skips
//! pinned messages, leaves tool-call/result pairing intact, and is
//! idempotent: applying it to its own output changes nothing.

mod drop;
mod external;
mod feedback;
mod tool_args;
mod tool_results;

use std::ops::Range;

use abridge_model::Message;

use crate::config::{PolicyConfig, PolicyKind};

/// Applies one policy to `messages[region]`; returns how many items it changed.
///
/// `region` must start at the end of the head and end at the start of the
/// kept tail (an iteration boundary). Policies that remove messages
/// (`collapse_feedback`, `drop_iterations`) leave the tail in place: callers
/// track the tail by its length from the end.
pub(crate) fn apply(
    kind: PolicyKind,
    messages: &mut Vec<Message>,
    region: Range<usize>,
    cfg: &PolicyConfig,
) -> usize {
    if region.is_empty() {
        return 0;
    }
    match kind {
        PolicyKind::ClipExternal => external::apply(messages, region, cfg),
        PolicyKind::CollapseFeedback => feedback::apply(messages, region, cfg),
        PolicyKind::ClipToolResults => tool_results::apply(messages, region, cfg),
        PolicyKind::ClipToolArgs => tool_args::apply(messages, region, cfg),
        PolicyKind::DropIterations => drop::apply(messages, region),
        // Needs the original history and a summarizer: see `summarize_step`.
        PolicyKind::Summarize => 0,
    }
}
