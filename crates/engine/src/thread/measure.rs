//! What a turn's input is measured as: the tokens of the history (only
//! what was added since the last turn when it says so), and what the
//! thread remembers of it.

use abridge_model::{Message, Role, iterations};
use abridge_tokens::Counted;

use super::{Measured, Seen, Thread};
use crate::carryover::Carryover;
use crate::engine::Engine;
use crate::input::Input;
use crate::report::Outcome;

impl Thread {
    /// What the input adds to what the thread knows: the history as it goes
    /// out (a carried prefix applied), its tokens and iterations, counting
    /// only what the last turn did not.
    pub(super) fn measure(&mut self, engine: &Engine, input: &Input<'_>) -> Measured {
        let history = input.history;
        // What the history leaves out ([`Thread::takes`] checked it is covered).
        let left = input.left_out.len;
        let seen = self.last.take().filter(|s| s.extended_by(input));
        let carry = match input.resent {
            true => self
                .state
                .carryover
                .take()
                .filter(|c| seen.is_some() || c.applies_after(&input.left_out, history)),
            false => None,
        };
        let extends = seen.is_some();
        let (view, tokens, iterations, client) = match (&carry, seen) {
            (carry, Some(seen)) => {
                let added = &history.messages[seen.len - left..];
                let view = carry.as_ref().map(|c| c.apply_unchecked(history, left));
                let its = seen.iterations + opened(seen.iterations, added);
                let more = self.sum_of(added);
                (view, seen.tokens + more, its, seen.client + more)
            }
            (Some(c), None) => {
                let added = &history.messages[c.source().len - left..];
                let view = c.apply_unchecked(history, left);
                let its = iterations(&view.messages).len();
                let more = self.sum_of(added);
                let source = self.state.carried_source.unwrap_or(c.tokens());
                (Some(view), c.tokens() + more, its, source + more)
            }
            (None, None) => {
                let its = iterations(&history.messages).len();
                let tokens = self.sum_of(&history.messages);
                (None, tokens, its, tokens)
            }
        };
        let tools = match seen {
            Some(s) => s.tools,
            None => self.tool_tokens(history),
        };
        let recall_tool = engine.recall_tool_tokens(history.tools.as_deref());
        let declared = match view {
            Some(_) => recall_tool,
            None => Counted::ZERO,
        };
        Measured {
            carry,
            view,
            tokens,
            client,
            iterations,
            tools,
            recall_tool,
            declared,
            extends,
        }
    }

    /// Remembers what a turn sent: for the next usage report, the next
    /// turn that extends it, and (a resent log's compaction) the carryover.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn remember(
        &mut self,
        input: &Input<'_>,
        outcome: &Outcome<'_>,
        carry: Option<Carryover>,
        its: usize,
        tools: Counted,
        beside: Counted,
        client: Counted,
    ) {
        let report = &outcome.report;
        let sent = &outcome.conversation.messages;
        let tokens = report.tokens_after.saturating_sub(beside);
        self.state.last_sent = Some(report.tokens_after);
        if report.compacted {
            // What was replaced is not counted again.
            self.counter.keep_only(sent);
        }
        self.state.carryover = match (input.resent, report.compacted) {
            (true, true) => {
                self.state.carried_source = Some(client);
                Some(Carryover::from_parts(
                    input.left_out.extend(&input.history.messages),
                    sent.clone(),
                    tokens,
                ))
            }
            _ => carry,
        };
        self.last = Some(Seen {
            len: match input.resent {
                true => input.left_out.len + input.history.messages.len(),
                false => sent.len(),
            },
            tokens,
            iterations: match report.compacted {
                true => iterations(sent).len(),
                false => its,
            },
            tools,
            client,
        });
    }
}

impl Seen {
    /// Whether `input` goes on from this turn's history, as its caller says
    /// ([`Input::extending`]) and its length allows.
    pub(super) fn extended_by(&self, input: &Input<'_>) -> bool {
        let left = input.left_out.len;
        input.extending == Some(self.len)
            && (left..=left + input.history.messages.len()).contains(&self.len)
    }
}

/// Iterations that `added` opens after `before` of them (as
/// [`iterations`] counts them: an assistant message opens one unless it
/// continues the turn before it).
pub(super) fn opened(before: usize, added: &[Message]) -> usize {
    let mut n = before;
    for m in added {
        if m.role == Role::Assistant && (!m.meta.continues_turn || n == 0) {
            n += 1;
        }
    }
    n - before
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opened_counts_iterations_as_iterations_does() {
        let a = |continues| {
            let mut m = Message::text(Role::Assistant, "a");
            m.meta.continues_turn = continues;
            m
        };
        let u = Message::text(Role::User, "u");
        let all = vec![u.clone(), a(true), a(true), u.clone(), a(false), a(true), u];
        for cut in 0..=all.len() {
            let before = iterations(&all[..cut]).len();
            assert_eq!(
                before + opened(before, &all[cut..]),
                iterations(&all).len(),
                "cut at {cut}"
            );
        }
    }
}
