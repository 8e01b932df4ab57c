//! One policy over the old region, oldest first, in steps, so that no more
//! is cleared than the target needs. A step is a share of the old
//! iterations, so the one that reaches the target can clear far more than
//! it needed: a lower target then clears tool arguments a higher one keeps,
//! and gives the room they left to an excerpt of something else. A policy
//! that rewrites messages where they are has that step narrowed to the
//! fewest iterations that still reach the target, so what a target clears
//! only grows as the target falls.

use std::ops::Range;

use abridge_model::{Conversation, iterations};
use abridge_tokens::Counted;

use super::{Rewriter, Work};
use crate::boundary::old_region;
use crate::policy::{self, Policy};
use crate::slot::Slot;

/// One policy's run over the old region: which, and over how many old
/// iterations.
#[derive(Clone, Copy)]
struct Pass {
    policy: Policy,
    old: usize,
}

/// What a step may change, as it was before the step: put back for each
/// narrower try.
struct Saved<'a> {
    range: Range<usize>,
    messages: Vec<Slot<'a>>,
    counts: Vec<Counted>,
    originals: usize,
}

impl<'a> Saved<'a> {
    fn of(work: &Work<'a>, range: Range<usize>) -> Self {
        Saved {
            messages: work.messages[range.clone()].to_vec(),
            counts: work.counts[range.clone()].to_vec(),
            originals: work.originals.len(),
            range,
        }
    }

    fn restore(&self, work: &mut Work<'a>) {
        work.messages
            .splice(self.range.clone(), self.messages.iter().cloned());
        work.counts
            .splice(self.range.clone(), self.counts.iter().copied());
        work.originals.truncate(self.originals);
    }
}

impl Rewriter<'_> {
    /// Runs one policy oldest-first in steps; true once the target is
    /// reached. The region is named by how many iterations it leaves at
    /// the end, which stays true when a step removes messages.
    pub(super) fn clip(
        &mut self,
        p: Policy,
        conv: &Conversation,
        target: Option<Counted>,
        work: &mut Work,
    ) -> bool {
        let old = iterations(&work.messages).len().saturating_sub(work.tail_n);
        let pass = Pass { policy: p, old };
        let steps = p.steps();
        let mut done = 0;
        for step in 1..=steps {
            if self.cancel.is_cancelled() {
                return true;
            }
            let upto = old * step / steps;
            let narrowable = target.filter(|_| p.in_place() && upto - done > 1);
            let saved = narrowable.map(|_| Saved::of(work, self.between(work, old, done, upto)));
            let mut outcome = self.clip_upto(pass, conv, upto, work);
            if let (Some(t), Some(saved)) = (target, saved)
                && outcome.1 <= t
                && let Some(fewer) = self.narrow(pass, conv, t, done..upto, &saved, work)
            {
                outcome = fewer;
            }
            let (items, now) = outcome;
            if items > 0 {
                work.record(p.kind(), items, now);
            }
            if target.is_some_and(|t| work.total <= t) {
                return true;
            }
            done = upto;
        }
        false
    }

    /// Applies the pass's policy to its oldest `upto` iterations; how many
    /// items it changed and the tokens after it (counts recounted, the
    /// total left to [`Work::record`]).
    fn clip_upto(
        &mut self,
        pass: Pass,
        conv: &Conversation,
        upto: usize,
        work: &mut Work,
    ) -> (usize, Counted) {
        let Pass { policy: p, old } = pass;
        let region = old_region(&work.messages, work.tail_n + old - upto);
        let found = Some(self.engine.found(&mut work.originals, conv, self.key));
        let before = work.messages.len();
        let cfg = &self.engine.config.policies;
        let items = policy::apply(p, &mut work.messages, region.clone(), cfg, found);
        match items {
            0 => (0, work.total),
            _ => (items, self.recount_region(work, region, before)),
        }
    }

    /// The messages of the old iterations after the oldest `done` up to
    /// the oldest `upto`.
    fn between(&self, work: &Work, old: usize, done: usize, upto: usize) -> Range<usize> {
        let end = |n: usize| old_region(&work.messages, work.tail_n + old - n).end;
        end(done)..end(upto)
    }

    /// The fewest iterations of `steps` whose clipping still reaches
    /// `target`, found by halving, when fewer than all of them do: the
    /// work is left clipped up to them, and their items and tokens
    /// returned. `saved` is the work before any of `steps`; without an
    /// answer the work is as clipping all of them left it.
    fn narrow<'a>(
        &mut self,
        pass: Pass,
        conv: &Conversation,
        target: Counted,
        steps: Range<usize>,
        saved: &Saved<'a>,
        work: &mut Work<'a>,
    ) -> Option<(usize, Counted)> {
        let (mut short, mut enough) = (steps.start, steps.end);
        let mut best = None;
        let mut at_best = true;
        while enough - short > 1 {
            let mid = short + (enough - short) / 2;
            saved.restore(work);
            let tried = self.clip_upto(pass, conv, mid, work);
            at_best = tried.1 <= target;
            if at_best {
                (enough, best) = (mid, Some(tried));
            } else {
                short = mid;
            }
        }
        if !at_best {
            saved.restore(work);
            let again = self.clip_upto(pass, conv, enough, work);
            // All of `steps` again: the outcome the caller has.
            return (enough < steps.end).then_some(again);
        }
        best
    }
}
