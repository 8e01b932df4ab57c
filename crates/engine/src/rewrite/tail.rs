//! A tail grown back after the first briefing, when what the target
//! leaves holds more of the recent history verbatim.

use abridge_model::{Conversation, iterations};
use abridge_tokens::Counted;

use super::{Rewriter, Room, Work};
use crate::boundary::old_region;
use crate::plan::Plan;
use crate::summarize_step::{Briefed, Earlier};

impl Rewriter<'_> {
    /// With an instant summarizer, writes the briefing again over a shorter
    /// region when what the first one left of the target holds the
    /// iterations before the tail verbatim: a small briefing leaves more
    /// of the recent history as it was. The longer tail is kept only if
    /// the whole still fits; fewer extra iterations are tried otherwise.
    pub(super) fn grow_tail(
        &mut self,
        conv: &Conversation,
        plan: &Plan,
        work: &mut Work,
        target: Counted,
        first: &Briefed,
        summarizer: usize,
    ) -> Option<Briefed> {
        let left = target.checked_sub(self.total_of(&first.messages, work.tools))?;
        let (mut extra, _) = tail_growth(work, left);
        let tail_n = work.tail_n;
        while extra > 0 {
            work.tail_n = tail_n + extra;
            let mut attempts = Vec::new();
            // The working set keeps what it had; the tail grows into the rest.
            let room = Room {
                working: first.working,
                ..Room::default()
            };
            let longer = self.brief(
                conv,
                plan,
                work,
                target,
                Some(summarizer),
                room,
                &mut attempts,
            );
            if let Some(b) = longer
                && self.total_of(&b.messages, work.tools) <= target
            {
                // The attempt that counts is the one whose briefing is used.
                work.attempts.pop();
                work.attempts.append(&mut attempts);
                return Some(b);
            }
            extra /= 2;
        }
        work.tail_n = tail_n;
        None
    }

    /// Messages from the end that a tail grown after the first briefing
    /// could reach at most: what [`grow_tail`](Self::grow_tail) adds fits
    /// in what the target leaves beside what the briefing cannot shrink
    /// (the head without an earlier briefing, the tail, the tools). The
    /// region's facts keep a copy of their extraction there.
    pub(super) fn grown_tail_reach(&mut self, work: &Work, target: Counted) -> usize {
        let start = old_region(&work.messages, work.tail_n).start;
        let earlier = Earlier::find(&work.messages, start, &self.engine.facts.wrapper);
        let kept = self
            .kept_tokens(work)
            .saturating_sub(earlier.tokens(&work.counts));
        let (_, from) = tail_growth(work, target.saturating_sub(kept));
        work.messages.len() - from
    }
}

/// How many iterations before the tail, newest first, fit in `left`
/// tokens (none from the head), and the first message of the oldest.
pub(super) fn tail_growth(work: &Work, mut left: Counted) -> (usize, usize) {
    let region = old_region(&work.messages, work.tail_n);
    let (mut extra, mut from) = (0, region.end);
    for it in iterations(&work.messages).iter().rev().skip(work.tail_n) {
        let cost: Counted = work.counts[it.range()].iter().sum();
        if it.start < region.start || cost > left {
            break;
        }
        left = left.saturating_sub(cost);
        extra += 1;
        from = it.start;
    }
    (extra, from)
}
