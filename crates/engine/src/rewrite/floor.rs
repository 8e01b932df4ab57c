//! Below the floor: the briefing given the floor's room, and what a
//! compaction that cannot reach its target sends and says.

use abridge_model::{Conversation, head_len, iterations};
use abridge_tokens::Counted;

use super::finish::{guard, report_of};
use super::{FLOOR_ROOM, Rewriter, Room, Work};
use crate::boundary::tail_start;
use crate::error::Error;
use crate::evaluation::Eval;
use crate::event::Rung;
use crate::plan::Plan;
use crate::policy::Step;
use crate::slot;
use crate::summarize_step::Earlier;

impl Rewriter<'_> {
    /// Even the floor (head, newest iteration, tools) is over the target:
    /// the old region still becomes a briefing, at [`FLOOR_ROOM`], when
    /// that makes the history smaller — what goes out is then as near the
    /// target as it can be, rather than the whole old region clipped.
    pub(super) fn brief_at_floor(&mut self, conv: &Conversation, plan: &Plan, work: &mut Work) {
        if !plan.steps.contains(&Step::Summarize) || self.cancel.is_cancelled() {
            return;
        }
        let mut attempts = std::mem::take(&mut work.attempts);
        let room = Room {
            at_least: FLOOR_ROOM,
            ..Room::default()
        };
        let briefed = self.brief(conv, plan, work, Counted::ZERO, None, room, &mut attempts);
        work.attempts = attempts;
        let Some(b) = briefed else {
            return;
        };
        if self.briefed_total(&b, work) >= work.total {
            return;
        }
        let replaced = b.replaced_iterations;
        self.take_briefing(work, b);
        self.degraded(work, Rung::FloorBriefed, replaced);
    }

    /// When even the floor is over the target and its smallest valid
    /// history goes instead (a proxy sends it): that history is recorded
    /// like any compaction, its originals with it, so whoever reads the
    /// store answers its handles; its report says it missed its target.
    pub(super) fn floor_sent(
        &mut self,
        conv: &Conversation,
        plan: &Plan,
        mut work: Work,
        eval: &Eval,
        mut error: Error,
    ) -> Error {
        let Error::CannotShrink {
            smallest: Some(smallest),
            target,
            report: sent,
            ..
        } = &mut error
        else {
            return error;
        };
        let originals = self
            .engine
            .keep_originals(std::mem::take(&mut work.originals));
        let mut report = report_of(conv, smallest, plan, Some(*target), work, eval, Vec::new());
        self.snapshot(conv, smallest, &originals, &mut report);
        *sent = Some(Box::new(report));
        error
    }

    /// The error when even the floor is over the target; it carries the
    /// smallest valid history the ladder reached, whose handles lead to
    /// the originals it replaced.
    pub(super) fn cannot_shrink(
        &mut self,
        conv: &Conversation,
        work: &mut Work,
        target: Counted,
    ) -> Error {
        let smallest = smallest(conv, work).map(Box::new);
        let tokens = &work.counts;
        let its = iterations(&work.messages);
        let tail_start = tail_start(&work.messages, &its, work.tail_n);
        let head = head_len(&work.messages).min(tail_start);
        let sum = |r: std::ops::Range<usize>| tokens[r].iter().sum::<Counted>();
        let (head_t, tail_t) = (sum(0..head), sum(tail_start..work.messages.len()));
        let pinned: Counted = (head..tail_start)
            .filter(|&i| work.messages[i].meta.pinned)
            .map(|i| tokens[i])
            .sum();
        let old = sum(head..tail_start).saturating_sub(pinned);
        let briefing =
            Earlier::find(&work.messages, head, &self.engine.facts.wrapper).tokens(tokens);
        Error::CannotShrink {
            floor: head_t + pinned + old + tail_t + work.tools,
            target,
            head: head_t.saturating_sub(briefing),
            briefing,
            pinned,
            old,
            tail: tail_t,
            tail_iterations: work.tail_n.min(its.len()),
            tools: work.tools,
            smallest,
            report: None,
        }
    }
}

/// The history the ladder reached, when the rewrite stays valid.
pub(super) fn smallest(conv: &Conversation, work: &Work) -> Option<Conversation> {
    let after = Conversation {
        messages: slot::owned(work.messages.clone()),
        ..conv.clone_envelope()
    };
    (after.messages != conv.messages && guard(conv, &after).is_ok()).then_some(after)
}
