//! The clipping policies. Each rewrites only the *old region* of a history —
//! after the head (system prompt and task) and before the kept tail — skips
//! pinned messages, leaves tool-call/result pairing intact, and is
//! idempotent: applying it to its own output changes nothing.

mod drop;
mod external;
mod feedback;
pub(crate) mod kind;
mod lossless;
mod supersede;
mod tool_args;
mod tool_results;

pub(crate) use tool_args::naming_more;

use std::ops::Range;

use crate::config::PolicyConfig;
use crate::recall::Found;
use crate::slot::Slot;
use kind::PolicyKind;

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

    /// Whether it rewrites messages where they are, each on its own, and
    /// removes none: a step of it can be undone message for message and
    /// narrowed to fewer iterations.
    pub(crate) fn in_place(self) -> bool {
        matches!(
            self,
            Policy::ClipExternal | Policy::ClipToolResults | Policy::ClipToolArgs
        )
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
    messages: &mut Vec<Slot<'_>>,
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

#[cfg(test)]
mod tests {
    use abridge_model::{Message, decode, head_len, iterations};
    use serde_json::{Value, json};

    use super::*;
    use crate::slot;

    /// Rounds of a plain exchange, with now and then a long read, a long
    /// edit, a feedback message and an external block: most messages are
    /// nothing a policy changes.
    fn history() -> Vec<Message> {
        let mut messages: Vec<Value> = vec![
            json!({"role": "system", "content": "You are a coding agent."}),
            json!({"role": "user", "content": "Fix the parser."}),
        ];
        for round in 0..40 {
            let id = format!("call_{round}");
            let (call, out) = match round % 8 {
                0 => (
                    json!({"path": "src/parse.rs"}),
                    format!("fn parse_{round}() {{}}\n").repeat(40),
                ),
                3 => (
                    json!({"path": "src/parse.rs", "new_string": "x".repeat(400)}),
                    "ok".to_owned(),
                ),
                _ => (json!({"n": round}), format!("done {round}")),
            };
            messages.push(
                json!({"role": "assistant", "content": format!("Step {round}."),
                "tool_calls": [{"id": id, "type": "function",
                    "function": {"name": "read_file", "arguments": call.to_string()}}]}),
            );
            messages.push(json!({"role": "tool", "tool_call_id": id, "content": out}));
            let note = match round % 10 {
                4 => "[validation] the answer was rejected".to_owned(),
                7 => format!("<EXTERNAL-CONTENT>page {round}</EXTERNAL-CONTENT>"),
                _ => format!("Go on with step {round}."),
            };
            messages.push(json!({"role": "user", "content": note}));
        }
        let body = json!({"model": "gpt-4o", "messages": messages});
        decode(body.to_string().as_bytes())
            .unwrap()
            .remove(0)
            .messages
    }

    #[test]
    fn a_policy_copies_only_the_messages_it_changes() {
        let original = history();
        let cfg = PolicyConfig::default();
        for policy in [
            Policy::Lossless,
            Policy::SupersedeReads,
            Policy::ClipExternal,
            Policy::CollapseFeedback,
            Policy::ClipToolResults,
            Policy::ClipToolArgs,
            Policy::DropIterations,
        ] {
            let mut slots = slot::borrowed(&original);
            let its = iterations(&original);
            let region = head_len(&original)..its[its.len() - 2].start;
            let items = apply(policy, &mut slots, region, &cfg, None);
            let copies: Vec<&Message> = slots
                .iter()
                .filter(|s| matches!(s, Slot::Changed(_)))
                .map(|s| &**s)
                .collect();
            // A copy is a changed message or a placeholder, never one
            // left as it was.
            for m in &copies {
                assert!(!original.contains(m), "{policy:?} copied {m:?} unchanged");
            }
            let plain = slots.iter().filter(|s| matches!(s, Slot::Same(_))).count();
            assert!(plain > 0, "{policy:?} copied every message");
            if matches!(
                policy,
                Policy::ClipToolResults | Policy::ClipToolArgs | Policy::DropIterations
            ) {
                assert!(
                    items > 0 && !copies.is_empty(),
                    "{policy:?} changed nothing"
                );
            }
        }
    }
}
