//! The floor ladder: what a compaction does when the plan's own steps
//! cannot reach the target with the preferred verbatim tail.
//!
//! A tail of `budget.min_iterations` is a preference, not a law. Before
//! giving up, the compaction degrades one rung at a time, each as far as
//! the target needs and each reported ([`Degradation`]):
//!
//! 1. **Fewer iterations**: the tail shrinks below its floor, down to the
//!    newest iteration; the plan's steps (clip, summarize, drop) run again
//!    over the longer old region.
//! 2. **Kept iterations clipped**: results and arguments of the kept
//!    messages before the newest iteration become placeholders, whatever
//!    the configured pipeline (pinned messages stay).
//! 3. **Above the target**: when a trigger is known and the history is
//!    under it, it stays there rather than lose the newest results (the
//!    next turn compacts again).
//! 4. **Newest results cut to fit**: the newest iteration's own results,
//!    oldest first and the newest last, are cut to what still fits (their
//!    beginning and end kept) or become placeholders, with room held for
//!    what the steps make of the old region; what they leave of it comes
//!    back to the results cut (the refill takes them like any clipped
//!    result).
//!
//! The last rung's cut also serves the steps before the ladder, so that
//! the same rule holds at every budget: when the newest iteration is the
//! whole tail and leaves a briefing less than the room that rung holds
//! for it, its results are cut to hold that room, or as much of it as
//! they hold, as the rung does ([`Rewriter::make_room_for_briefing`]),
//! rather than the old region briefed in a few dozen tokens, or dropped
//! without a briefing.
//!
//! What is left — system prompt, task, tool definitions and the newest
//! message's own words — is the irreducible floor. When even that is over
//! the target, the error carries the smallest valid history, so a proxy
//! can send it rather than the whole.

use abridge_model::{Conversation, Message, Part, ToolResult, head_len, iterations};
use std::borrow::Borrow;

use abridge_tokens::Counted;

use super::{MIN_BRIEFING, Rewriter, Work};
use crate::config::PolicyConfig;
use crate::event::{Degradation, Event, Rung};
use crate::placeholder::{cut_header, is_cut_result, result};
use crate::plan::Plan;
use crate::policy::{self, Policy};
use crate::recall::{Handle, Original};

/// Shortest a cut result keeps, in characters, before it becomes a placeholder.
const MIN_CUT_CHARS: usize = 400;

/// Tokens left for what the steps make of the old region (a briefing or
/// an omission note) when the newest results are cut to fit.
pub(super) const RESERVE: Counted = Counted::new(256);

impl Rewriter<'_> {
    /// Climbs down the ladder until `target` is reached — or, rather than
    /// cut the newest results, the plan's ceiling (the trigger) when there
    /// is one; false when even the floor is over both.
    pub(super) fn degrade(
        &mut self,
        conv: &Conversation,
        plan: &Plan,
        work: &mut Work,
        target: Counted,
    ) -> bool {
        while work.tail_n > 1 {
            work.tail_n -= 1;
            let verbatim = work.tail_n;
            let reached = self.run_steps_to(conv, plan, work, target);
            self.degraded(work, Rung::FewerIterations, verbatim);
            if reached {
                return true;
            }
        }
        let newest = newest_start(&work.messages);
        let region = head_len(&work.messages).min(newest)..newest;
        let forced = PolicyConfig {
            keep_results_of: Vec::new(),
            min_result_chars: 0,
            min_args_chars: 0,
            ..self.engine.config.policies.clone()
        };
        let mut items = 0;
        for p in [Policy::ClipToolResults, Policy::ClipToolArgs] {
            let found = Some(self.engine.found(&mut work.originals, conv, self.key));
            items += policy::apply(p, &mut work.messages, region.clone(), &forced, found);
        }
        if items > 0 {
            self.recount(work);
            self.degraded(work, Rung::KeptIterationsClipped, items);
            if work.total <= target {
                return true;
            }
        }
        // The newest results are what the model asked for last: under the
        // trigger, the history stays above the target rather than lose them.
        let limit = plan.ceiling.unwrap_or(target).max(target);
        if limit > target && (work.total <= limit || self.run_steps_to(conv, plan, work, limit)) {
            self.degraded(work, Rung::AboveTarget, 0);
            return true;
        }
        // Cut the newest results until what the steps cannot touch fits
        // with room for what they make of the rest; then let them run.
        let kept_limit = limit.saturating_sub(RESERVE);
        let mut cut = self.cut_newest_results(work, newest, |c, w| {
            c.kept_tokens(w).saturating_sub(kept_limit)
        });
        if cut > 0 {
            self.recount(work);
            if work.total > limit && self.run_steps_to(conv, plan, work, limit) {
                self.degraded(work, Rung::NewestResultsCut, cut);
                return true;
            }
        }
        cut += self.cut_newest_results(work, newest, |_, w| w.total.saturating_sub(limit));
        if cut > 0 {
            self.degraded(work, Rung::NewestResultsCut, cut);
        }
        work.total <= limit
    }

    /// Cuts the newest iteration's results so that head, tail and tools
    /// leave `target` the room the last rung holds for a briefing, or as
    /// much of it as they hold, as that rung does at a smaller target: the
    /// same rule at every budget. Nothing is cut when even all they hold
    /// would leave a briefing less than its least room beside the
    /// `briefing` room there is. Each cut is reported.
    pub(super) fn make_room_for_briefing(
        &mut self,
        work: &mut Work,
        target: Counted,
        briefing: Counted,
    ) {
        let newest = newest_start(&work.messages);
        let cuttable: Counted = (newest..work.messages.len())
            .filter(|&i| cuttable(&work.messages[i]))
            .map(|i| work.counts[i])
            .sum();
        if briefing + cuttable < MIN_BRIEFING {
            return;
        }
        let kept_limit = target.saturating_sub(RESERVE);
        let cut = self.cut_newest_results(work, newest, |c, w| {
            c.kept_tokens(w).saturating_sub(kept_limit)
        });
        if cut > 0 {
            self.recount(work);
            self.degraded(work, Rung::NewestResultsCut, cut);
        }
    }

    /// Cuts the results from `newest` on, oldest first, while `excess`
    /// says the history is over; how many it changed. Each cut names its
    /// original (for the refill alone, without recall).
    fn cut_newest_results(
        &mut self,
        work: &mut Work,
        newest: usize,
        excess: impl Fn(&mut Rewriter<'_>, &Work) -> Counted,
    ) -> usize {
        let mut changed = 0;
        for i in newest..work.messages.len() {
            for j in 0..work.messages[i].parts.len() {
                if work.messages[i].meta.pinned {
                    continue;
                }
                let Part::ToolResult(r) = &work.messages[i].parts[j] else {
                    continue;
                };
                let text = r.text().into_owned();
                if !can_cut(r, &text) {
                    continue;
                }
                // Measured only where there is something to cut.
                let over = excess(self, work);
                if over == Counted::ZERO {
                    return changed;
                }
                let tokens = self.counter.count_text(&text);
                let call = work.messages[..i]
                    .iter()
                    .rev()
                    .flat_map(|m| m.tool_calls())
                    .find(|c| c.id == r.call_id);
                let o = Original::tool_result(r, call).scoped(self.key);
                let handle = Some(o.handle.clone());
                work.originals.push(o);
                let Part::ToolResult(r) = &mut work.messages[i].make_mut().parts[j] else {
                    continue;
                };
                cut_to_fit(r, &text, tokens, over, handle.as_ref());
                changed += 1;
                work.total = self.recount_region(work, i..i + 1, work.messages.len());
            }
        }
        changed
    }

    pub(super) fn degraded(&mut self, work: &mut Work, rung: Rung, count: usize) {
        let d = Degradation {
            rung,
            count,
            tokens_after: work.total,
        };
        self.engine.emit(&Event::Degraded(d));
        work.degraded.push(d);
    }
}

/// Index of the newest iteration's assistant message (the end when there
/// is none).
fn newest_start<M: Borrow<Message>>(messages: &[M]) -> usize {
    iterations(messages)
        .last()
        .map_or(messages.len(), |it| it.start)
}

/// Whether `m` holds a result the last rung could cut.
fn cuttable(m: &Message) -> bool {
    !m.meta.pinned
        && m.parts.iter().any(|p| match p {
            Part::ToolResult(r) => can_cut(r, &r.text()),
            _ => false,
        })
}

/// A result worth cutting: not short, not cut before (or holding more
/// than text, such as an image).
fn can_cut(r: &ToolResult, text: &str) -> bool {
    let has_other = r.parts.iter().any(|p| p.as_text().is_none());
    has_other || (text.len() > MIN_CUT_CHARS && !is_cut_result(text))
}

/// Cuts one result, whose `text` is `tokens` long, so that it loses about
/// `excess` of them: its beginning and end are kept under a note of what
/// was cut; when too little would be left, it becomes the placeholder.
fn cut_to_fit(
    r: &mut ToolResult,
    text: &str,
    tokens: Counted,
    excess: Counted,
    handle: Option<&Handle>,
) {
    // Characters per token of this text; a margin so one cut is enough.
    let per_token = text.len() as f64 / tokens.get().max(1) as f64;
    let drop_chars = ((excess.get() as f64 + 64.0) * per_token.max(1.0)) as usize;
    let keep = text.len().saturating_sub(drop_chars);
    let replacement = if keep < MIN_CUT_CHARS {
        result(handle)
    } else {
        let kept = abridge_model::text::clip(text, keep, keep / 2);
        format!("{}\n{kept}", cut_header(keep, text.len(), handle))
    };
    r.replace_with_text(replacement);
}
