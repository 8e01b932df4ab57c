//! A tail grown back after the first briefing, when what the target
//! leaves holds more of the recent history verbatim.

use abridge_model::{Conversation, iterations};
use abridge_tokens::Counted;

use super::{Rewriter, Room, Work};
use crate::boundary::old_region;
use crate::plan::Plan;
use crate::policy::{self, Policy};
use crate::refill::min_room;
use crate::summarize_step::Briefed;

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
        let left = self.left_by(first, work, target)?;
        let (mut extra, _) = tail_growth(work, left);
        let tail_n = work.tail_n;
        while extra > 0 {
            work.tail_n = tail_n + extra;
            // The working set keeps what it had; the tail grows into the rest.
            let room = Room {
                working: first.working,
                ..Room::default()
            };
            if let Some(b) = self.brief_again(conv, plan, work, target, summarizer, room, |_| true)
            {
                return Some(b);
            }
            extra /= 2;
        }
        work.tail_n = tail_n;
        None
    }

    /// With an instant summarizer, when what the briefing leaves of the
    /// target cannot hold the next older iteration whole, takes it into
    /// the tail with its results and arguments clipped to their handles, and writes the briefing again over the region before
    /// it, given the room the first took. The room left then goes back to
    /// those results as excerpts ([`refill`](crate::refill)): a large last
    /// result is never all-or-nothing, and every cut line stays one recall
    /// away. Kept only if the whole still fits and the briefing leaves out
    /// no more than the first; the history is as it was otherwise.
    pub(super) fn grow_partial(
        &mut self,
        conv: &Conversation,
        plan: &Plan,
        work: &mut Work,
        target: Counted,
        first: &Briefed,
        summarizer: usize,
    ) -> Option<Briefed> {
        let left = self.left_by(first, work, target)?;
        let region = old_region(&work.messages, work.tail_n);
        let next = *iterations(&work.messages).iter().rev().nth(work.tail_n)?;
        if left < min_room(target) || next.start < region.start {
            return None;
        }
        // What the first briefing took (pinned messages of its region
        // included): the second is given as much, so it leaves out nothing
        // the first kept for the room the excerpt takes.
        let briefing = self
            .briefed_total(first, work)
            .saturating_sub(self.kept_tokens(work));
        let range = next.range();
        let saved = (
            work.messages[range.clone()].to_vec(),
            work.counts[range.clone()].to_vec(),
            work.originals.len(),
        );
        // Each policy's items and the tokens after it, recorded if kept.
        let mut steps = Vec::new();
        for p in [Policy::ClipToolResults, Policy::ClipToolArgs] {
            let found = self.engine.found(&mut work.originals, conv, self.key);
            let cfg = &self.engine.config.policies;
            let n = policy::apply(p, &mut work.messages, range.clone(), cfg, Some(found));
            let clipped = self.message_tokens(&work.messages[range.clone()]);
            work.counts.splice(range.clone(), clipped);
            steps.push((p, n, self.checked_total(work)));
        }
        let cost: Counted = work.counts[range.clone()].iter().sum();
        let fits = steps.iter().any(|&(_, n, _)| n > 0) && cost < left;
        let longer = fits
            .then(|| {
                work.tail_n += 1;
                let room = Room {
                    at_least: briefing,
                    working: first.working,
                };
                let no_less = |b: &Briefed| omitted(b) <= omitted(first);
                self.brief_again(conv, plan, work, target, summarizer, room, no_less)
            })
            .flatten();
        let Some(b) = longer else {
            let (messages, counts, originals) = saved;
            work.messages.splice(range.clone(), messages);
            work.counts.splice(range, counts);
            work.originals.truncate(originals);
            work.tail_n -= usize::from(fits);
            return None;
        };
        for (p, n, now) in steps.into_iter().filter(|&(_, n, _)| n > 0) {
            work.record(p.kind(), n, now);
        }
        Some(b)
    }

    /// What the first briefing's history leaves of the target, if it fits.
    fn left_by(&mut self, first: &Briefed, work: &Work, target: Counted) -> Option<Counted> {
        target.checked_sub(self.briefed_total(first, work))
    }

    /// Writes the briefing again over the region `work` now leaves, with
    /// `room`: the briefing when the whole fits the target and `keep` takes
    /// it, its attempt then counting in place of the first's.
    #[allow(clippy::too_many_arguments)]
    fn brief_again(
        &mut self,
        conv: &Conversation,
        plan: &Plan,
        work: &mut Work,
        target: Counted,
        summarizer: usize,
        room: Room,
        keep: impl Fn(&Briefed) -> bool,
    ) -> Option<Briefed> {
        let mut attempts = Vec::new();
        let b = self.brief(
            conv,
            plan,
            work,
            target,
            Some(summarizer),
            room,
            &mut attempts,
        )?;
        if !keep(&b) || self.briefed_total(&b, work) > target {
            return None;
        }
        // The attempt that counts is the one whose briefing is used.
        work.attempts.pop();
        work.attempts.append(&mut attempts);
        Some(b)
    }

    /// Messages from the end that a tail grown after the first briefing
    /// could reach at most: what [`grow_tail`](Self::grow_tail) adds fits
    /// in what the target leaves beside what the briefing cannot shrink
    /// (the head without an earlier briefing, the tail, the tools). The
    /// region's facts keep a copy of their extraction there.
    pub(super) fn grown_tail_reach(&mut self, work: &Work, target: Counted) -> usize {
        let kept = self.kept_beside_briefing(work);
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

/// Items a briefing's sheet left out for space (none without a sheet).
fn omitted(b: &Briefed) -> usize {
    b.sheet
        .iter()
        .flat_map(|s| &s.sections)
        .map(|s| s.omitted)
        .sum()
}
