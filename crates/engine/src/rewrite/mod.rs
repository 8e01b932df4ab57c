//! Executing a [`Plan`]: the steps run oldest-first over the old region
//! until the history is under the target; when a round of steps is not
//! enough, the verbatim tail halves (down to its floor) and they run again;
//! below the floor, the ladder (`ladder.rs`) takes over.

mod clip;
mod finish;
mod floor;
mod ladder;
mod tail;

use std::borrow::Borrow;
use std::ops::Range;

use abridge_model::{Conversation, Family, Message, head_len, iterations, wire_offset};
use abridge_summarize::Sheet;
use abridge_tokens::{Counted, TokenCounter};

use crate::boundary::{iterations_covering, old_region, tail_iterations};
use crate::cancel::Cancel;
use crate::config::PolicyKind;
use crate::engine::Engine;
use crate::error::Result;
use crate::event::{Degradation, Event, PolicyRun};

use crate::evaluation::{Eval, unchanged};
use crate::plan::Plan;
use crate::policy::{Policy, Step};
use crate::recall::{HandleKey, Original};
use crate::region_facts::RegionFacts;
use crate::report::{Attempt, Outcome};
use crate::slot::{self, Slot};
use crate::summarize_step::KeptBriefing;
use crate::summarize_step::{self, Briefed, Earlier, Inputs};

/// What a briefing may take when even the floor is over the target.
const FLOOR_ROOM: Counted = Counted::new(1_024);

/// What a briefing's message takes beside its text.
const BRIEFING_OVERHEAD: Counted = Counted::new(32);

/// The least room a briefing is written in.
const MIN_BRIEFING: Counted = Counted::new(64);

/// What a briefing is given whatever the target leaves.
#[derive(Debug, Clone, Copy, Default)]
struct Room {
    /// Room for the briefing and its working set.
    at_least: Counted,
    /// Room for the working set.
    working: Counted,
}

/// The history being rewritten and what has been done to it.
pub(crate) struct Work<'a> {
    /// The history's own messages until a step changes them.
    messages: Vec<Slot<'a>>,
    /// Tokens of each of `messages`, kept beside them: a step recounts
    /// only what it changed, so a turn hashes the history once, not once
    /// per step (which made compaction super-linear in messages).
    counts: Vec<Counted>,
    /// Tokens of each message of the history as it came in.
    original: Vec<Counted>,
    /// Iterations kept verbatim at the end.
    tail_n: usize,
    /// Tokens now, tool declarations included.
    total: Counted,
    tools: Counted,
    runs: Vec<PolicyRun>,
    attempts: Vec<Attempt>,
    summarizer: Option<String>,
    /// The briefing as data, when its summarizer keeps any.
    sheet: Option<Sheet>,
    /// Rungs of the floor ladder taken.
    degraded: Vec<Degradation>,
    /// What the placeholders and the briefing name by handle.
    originals: Vec<Original>,
    /// Whether the history sent names them (recall is on for it); else
    /// they are kept for the refill and the briefing's quoted lines alone
    /// and go at the end ([`Rewriter::unname`]).
    named: bool,
    /// The briefing taken, if any: its message and its originals (of
    /// `originals`).
    briefing: Option<(usize, Range<usize>)>,
    /// The facts of the regions briefed, read once.
    region_facts: RegionFacts,
}

/// Where in `messages` the briefing this compaction wrote is (`briefing`,
/// as [`Work::briefing`] records it), if that message is still it.
fn written_briefing<M: Borrow<Message>>(
    briefing: Option<&(usize, Range<usize>)>,
    messages: &[M],
) -> Option<usize> {
    let (at, _) = briefing?;
    messages
        .get(*at)
        .is_some_and(|m| m.borrow().meta.compact_summary)
        .then_some(*at)
}

impl Work<'_> {
    /// Adds what a step did, given the tokens after it.
    fn record(&mut self, kind: PolicyKind, items: usize, now: Counted) {
        let saved = self.total.saturating_sub(now);
        self.total = now;
        match self.runs.iter_mut().find(|r| r.policy == kind) {
            Some(r) => {
                r.items += items;
                r.tokens_saved += saved;
            }
            None => self.runs.push(PolicyRun {
                policy: kind,
                items,
                tokens_saved: saved,
            }),
        }
    }
}

/// A plan's execution: the engine it runs with and the thread's token cache.
pub(crate) struct Rewriter<'e> {
    pub(crate) engine: &'e Engine,
    pub(crate) counter: &'e mut TokenCounter,
    /// The thread's name, for its snapshots.
    pub(crate) name: Option<&'e str>,
    /// The thread's last briefing as data.
    pub(crate) kept: Option<&'e KeptBriefing>,
    /// The key handles are derived with (a shared proxy's tenant).
    pub(crate) key: Option<&'e HandleKey>,
    /// Checked between steps: once set, the steps stop as if the target
    /// were reached and [`rewrite`](Self::rewrite) returns `Cancelled`.
    pub(crate) cancel: &'e Cancel,
}

impl Rewriter<'_> {
    pub(crate) fn rewrite<'a>(
        &mut self,
        conv: &'a Conversation,
        plan: &Plan,
        eval: Eval,
    ) -> Result<Outcome<'a>> {
        if plan.target.is_some_and(|t| eval.tokens <= t) {
            return Ok(unchanged(conv, Some(plan.reason), eval));
        }
        // A floor of messages (stagewise: max(5, N)) in whole iterations.
        let floored;
        let plan = match self.engine.config.budget.min_messages {
            0 => plan,
            n => {
                let floor = plan.floor.max(iterations_covering(&conv.messages, n));
                floored = Plan {
                    floor,
                    ..plan.clone()
                };
                &floored
            }
        };
        let mut work = self.start(conv, plan, eval.tokens);
        self.cancel.check()?;
        if let Err(e) = self.shrink(conv, plan, &mut work) {
            return Err(self.floor_sent(conv, plan, work, &eval, e));
        }
        self.cancel.check()?;
        let mut eval = eval;
        if let Some(target) = plan.target {
            self.refill(&mut work, plan, target, &mut eval.events);
        }
        if work.runs.is_empty() && work.degraded.is_empty() {
            return Ok(unchanged(conv, Some(plan.reason), eval));
        }
        self.finish(conv, plan, work, eval)
    }

    fn start<'a>(&mut self, conv: &'a Conversation, plan: &Plan, tokens: Counted) -> Work<'a> {
        let mut messages = slot::borrowed(&conv.messages);
        self.pin(conv, &mut messages);
        // Pinning changes no count: counts depend on content alone.
        let counts = self.message_tokens(&conv.messages);
        let tools = self.counter.count_tools(conv.tools.as_deref())
            + self.engine.recall_tool_tokens(conv.tools.as_deref());
        let tail_n = tail_iterations(
            &iterations(&messages),
            &counts,
            self.tail_budget(plan, &messages, &counts, tools),
            plan.floor,
        );
        Work {
            messages,
            original: counts.clone(),
            counts,
            tail_n,
            total: tokens,
            tools,
            runs: Vec::new(),
            attempts: Vec::new(),
            summarizer: None,
            sheet: None,
            degraded: Vec::new(),
            originals: Vec::new(),
            named: self.engine.recall_for(conv.tools.as_deref()).is_some(),
            briefing: None,
            region_facts: RegionFacts::default(),
        }
    }

    fn shrink(&mut self, conv: &Conversation, plan: &Plan, work: &mut Work) -> Result<()> {
        loop {
            if self.run_steps(conv, plan, work) {
                return Ok(());
            }
            let Some(target) = plan.target else {
                return Ok(());
            };
            if work.tail_n <= plan.floor {
                if plan.degrade && self.degrade(conv, plan, work, target) {
                    return Ok(());
                }
                if plan.degrade {
                    self.brief_at_floor(conv, plan, work);
                    // A briefing given the floor's room can land within the
                    // target that left the first one too little (a budget
                    // under the smallest briefing): then it is the result.
                    if work.total <= target {
                        return Ok(());
                    }
                }
                // Without recall the handles go now: what they took can be
                // all the history was over by.
                self.unname(work);
                if work.total <= target {
                    return Ok(());
                }
                return Err(self.cannot_shrink(conv, work, target));
            }
            work.tail_n = (work.tail_n / 2).max(plan.floor);
        }
    }

    /// One round of the plan's steps towards `target` instead of its own
    /// (a rung of the ladder aims at the trigger).
    fn run_steps_to(
        &mut self,
        conv: &Conversation,
        plan: &Plan,
        work: &mut Work,
        target: Counted,
    ) -> bool {
        let plan = Plan {
            target: Some(target),
            ..plan.clone()
        };
        self.run_steps(conv, &plan, work)
    }

    /// One round of the plan's steps; true once the target is reached (or
    /// the turn is cancelled).
    /// Summarizing and dropping are skipped while what they cannot touch
    /// (head, tail, tools) is over the target on its own: they could only
    /// lose the old region without reaching it, where a shorter tail lets
    /// the briefing keep it.
    fn run_steps(&mut self, conv: &Conversation, plan: &Plan, work: &mut Work) -> bool {
        plan.steps.iter().any(|&step| match step {
            _ if self.cancel.is_cancelled() => true,
            Step::Summarize | Step::Policy(Policy::DropIterations)
                if !self.kept_fits(plan.target, work, step) =>
            {
                false
            }
            // A briefing this tail leaves no room for is not a failed one:
            // a shorter tail gives it room, where dropping loses the region.
            Step::Policy(Policy::DropIterations)
                if self.briefing_wants_shorter_tail(plan, work) =>
            {
                false
            }
            Step::Summarize => {
                self.hold_briefing_room(plan, work);
                self.summarize(conv, plan, work)
            }
            Step::Policy(p) => self.clip(p, conv, plan.target, work),
        })
    }

    /// Whether the plan briefs, the tail can still shrink (below its
    /// floor too: the ladder's first rung), and this tail leaves a
    /// briefing too little room.
    fn briefing_wants_shorter_tail(&self, plan: &Plan, work: &Work) -> bool {
        let Some(target) = plan.target else {
            return false;
        };
        plan.steps.contains(&Step::Summarize)
            && !self.engine.summarizers.is_empty()
            && work.tail_n > 1
            && self.briefing_budget(work, target, Room::default()) < MIN_BRIEFING
    }

    /// When the plan briefs and the tail is the newest iteration alone,
    /// gives the briefing the room the ladder's last rung holds for it
    /// ([`make_room_for_briefing`](Self::make_room_for_briefing)) where
    /// the tail leaves it less, as far as its results can make it. The
    /// same rule at every budget: without it a budget just above the one
    /// that cuts the newest results kept them whole beside a briefing of a
    /// few dozen tokens, or dropped the region without one — and recall
    /// fell as the budget rose.
    fn hold_briefing_room(&mut self, plan: &Plan, work: &mut Work) {
        let Some(target) = plan.target else {
            return;
        };
        if work.tail_n > 1 || self.engine.summarizers.is_empty() {
            return;
        }
        let budget = self.briefing_budget(work, target, Room::default());
        if budget < ladder::RESERVE.saturating_sub(BRIEFING_OVERHEAD) {
            self.make_room_for_briefing(work, target, budget);
        }
    }

    /// Whether what `step` cannot touch fits the target: head, kept tail
    /// and tool declarations, less an earlier briefing and working set
    /// when the step is the summarize step (it condenses them with the
    /// region).
    fn kept_fits(&mut self, target: Option<Counted>, work: &Work, step: Step) -> bool {
        target.is_none_or(|t| {
            let kept = match step {
                Step::Summarize => self.kept_beside_briefing(work),
                _ => self.kept_tokens(work),
            };
            kept <= t
        })
    }

    /// Tokens a briefing cannot shrink: what the old region's steps cannot
    /// touch, less an earlier briefing and its working set (a new briefing
    /// condenses them with the region).
    fn kept_beside_briefing(&mut self, work: &Work) -> Counted {
        let start = old_region(&work.messages, work.tail_n).start;
        let earlier = Earlier::find(&work.messages, start, &self.engine.facts.wrapper);
        self.kept_tokens(work)
            .saturating_sub(earlier.tokens(&work.counts))
    }

    /// What the verbatim tail may keep above its floor: the plan's budget,
    /// and with a target at most half of what the target leaves beside the
    /// head and the tools, which no step shrinks (an earlier briefing and
    /// working set aside when the plan briefs: the new briefing condenses
    /// them). The other half is the old region's, so a long system prompt
    /// or tool list does not leave a briefing a few lines while the tail
    /// takes half of the whole target.
    fn tail_budget(
        &self,
        plan: &Plan,
        messages: &[Slot<'_>],
        counts: &[Counted],
        tools: Counted,
    ) -> Counted {
        let Some(target) = plan.target else {
            return plan.kept_budget;
        };
        let head = head_len(messages);
        let mut fixed = counts[..head].iter().sum::<Counted>() + tools;
        if plan.steps.contains(&Step::Summarize) {
            let earlier = Earlier::find(messages, head, &self.engine.facts.wrapper);
            fixed = fixed.saturating_sub(earlier.tokens(counts));
        }
        let room = target.saturating_sub(fixed).get() / 2;
        plan.kept_budget.min(Counted::new(room))
    }

    /// Tokens of what the old region's steps cannot touch: head, kept
    /// tail and tool declarations.
    fn kept_tokens(&mut self, work: &Work) -> Counted {
        let region = old_region(&work.messages, work.tail_n);
        let tokens = &work.counts;
        tokens[..region.start].iter().sum::<Counted>()
            + tokens[region.end..].iter().sum::<Counted>()
            + work.tools
    }

    /// The summarize step; true once the target is reached.
    fn summarize(&mut self, conv: &Conversation, plan: &Plan, work: &mut Work) -> bool {
        let Some(target) = plan.target else {
            return false;
        };
        let mut attempts = std::mem::take(&mut work.attempts);
        if plan.grow_tail {
            work.region_facts.keep_at_tail = Some(self.grown_tail_reach(work, target));
        }
        let briefed = self.brief(
            conv,
            plan,
            work,
            target,
            None,
            Room::default(),
            &mut attempts,
        );
        work.attempts = attempts;
        if let Some(mut b) = briefed {
            if let Some(i) = b.instant.filter(|_| plan.grow_tail) {
                if let Some(longer) = self.grow_tail(conv, plan, work, target, &b, i) {
                    b = longer;
                }
                if let Some(longer) = self.grow_partial(conv, plan, work, target, &b, i) {
                    b = longer;
                }
            }
            self.take_briefing(work, b);
        }
        work.total <= target
    }

    /// Gives the room the steps left under `target` to the notes of the
    /// calls they clipped, back to the results they clipped
    /// ([`refill`](crate::refill)), then to lines of the
    /// results the briefing replaced ([`result_lines`](crate::result_lines)),
    /// and says so in `events`.
    fn refill(&mut self, work: &mut Work, plan: &Plan, target: Counted, events: &mut Vec<Event>) {
        let given = match work.named || work.originals.is_empty() {
            true => self.give_room(work, plan, target),
            false => self.give_room_unnamed(work, plan, target),
        };
        if let Some(e) = given {
            self.engine.emit(&e);
            events.push(e);
        }
    }

    /// Without recall the handles go ([`Self::unname`]), and the tokens
    /// they took while the steps ran are the refill's too, as long as the
    /// history is within `target` once they are gone: a refill that ends
    /// over is tried again with the tokens its handles took, then given
    /// the room the steps left alone. The handles are gone when it returns.
    fn give_room_unnamed(
        &mut self,
        work: &mut Work,
        plan: &Plan,
        target: Counted,
    ) -> Option<Event> {
        let mut handles = self.handle_notes(work);
        let before = (work.messages.clone(), work.counts.clone(), work.total);
        for _ in 0..2 {
            let given = self.give_room(work, plan, target + handles);
            let refilled = work.total;
            self.strip_handles(work);
            if work.total <= target {
                return given;
            }
            // Fewer went than counted (a result given back whole takes its
            // placeholder's handle with it): try again with what went.
            handles = refilled.saturating_sub(work.total);
            (work.messages, work.counts, work.total) = before.clone();
        }
        let given = self.give_room(work, plan, target);
        self.strip_handles(work);
        given
    }

    /// [`Self::refill`] within `target`; what it gave back, if anything.
    fn give_room(&mut self, work: &mut Work, plan: &Plan, target: Counted) -> Option<Event> {
        let mut room = crate::refill::Room {
            messages: &mut work.messages,
            counts: &mut work.counts,
            total: &mut work.total,
            target,
        };
        let more_names = !self.engine.config.policies.blank_args;
        let (mut results, mut tokens) =
            crate::refill::refill(&mut room, &work.originals, self.counter, more_names);
        let (quoted, added) = self.quote_replaced(work, plan, target);
        results += quoted;
        tokens += added;
        debug_assert_eq!(work.total, self.checked_total(work));
        (results > 0).then_some(Event::RoomGivenBack { results, tokens })
    }

    /// What the target leaves after the refill, up to the briefing's most
    /// (`summary.max_tokens`), to the lines of the results the briefing
    /// replaced that name the most; the results quoted and the tokens added.
    /// A plan whose target only asks for less than before (an agent's
    /// request, `summarize_all`: no tail to grow) has no room to use: its
    /// briefing stays the summary alone.
    fn quote_replaced(
        &mut self,
        work: &mut Work,
        plan: &Plan,
        target: Counted,
    ) -> (usize, Counted) {
        let summary = &self.engine.config.summary;
        let at = written_briefing(work.briefing.as_ref(), &work.messages);
        let Some((at, (_, originals))) = at
            .zip(work.briefing.clone())
            .filter(|_| summary.result_lines && plan.grow_tail)
        else {
            return (0, Counted::ZERO);
        };
        let room = target
            .saturating_sub(work.total)
            .min(Counted::new(summary.max_tokens).saturating_sub(work.counts[at]));
        if room < crate::refill::min_room(target) {
            return (0, Counted::ZERO);
        }
        crate::result_lines::fill(
            &mut work.messages,
            (&mut work.counts, &mut work.total),
            at,
            &crate::result_lines::Quoted {
                originals: &work.originals[originals],
                wrapper: &self.engine.facts.wrapper,
                named: work.named,
            },
            room,
            self.counter,
        )
    }

    /// Puts a briefing in place of the region it replaced, and records it.
    fn take_briefing(&mut self, work: &mut Work, b: Briefed) {
        let note = b.note;
        let tail = work.messages.split_off(work.messages.len() - b.tail_len);
        let messages = b.messages.into_iter().map(Slot::from).chain(tail).collect();
        let now = self.replace_messages(work, messages);
        work.record(PolicyKind::Summarize, b.replaced_iterations, now);
        work.summarizer = Some(b.summarizer);
        work.sheet = b.sheet;
        let from = work.originals.len();
        work.originals.extend(b.originals);
        work.briefing = Some((note, from..work.originals.len()));
    }

    /// Recounts what a policy changed: it rewrote only `region` of the
    /// `before` messages there were (and the message right before it,
    /// which `drop_iterations` absorbs when it is its placeholder), and
    /// removed messages only there. Returns the tokens now.
    fn recount_region(&mut self, work: &mut Work, region: Range<usize>, before: usize) -> Counted {
        let start = region.start.saturating_sub(1);
        let end = region.end - (before - work.messages.len());
        let fresh = self.message_tokens(&work.messages[start..end]);
        work.counts.splice(start..region.end, fresh);
        self.checked_total(work)
    }

    /// Puts `messages` in place of the work's; returns the tokens now.
    fn replace_messages<'a>(&mut self, work: &mut Work<'a>, messages: Vec<Slot<'a>>) -> Counted {
        work.counts = self.message_tokens(&messages);
        work.messages = messages;
        self.checked_total(work)
    }

    /// Recounts every message after a change anywhere (the ladder's
    /// rungs); sets and returns the tokens now.
    fn recount(&mut self, work: &mut Work) -> Counted {
        work.counts = self.message_tokens(&work.messages);
        work.total = self.checked_total(work);
        work.total
    }

    /// The tokens of the work's counts; debug builds check them against
    /// a recount of every message.
    fn checked_total(&mut self, work: &Work) -> Counted {
        debug_assert_eq!(
            work.counts,
            self.message_tokens(&work.messages),
            "a step changed messages outside the region it was given"
        );
        work.counts.iter().sum::<Counted>() + work.tools
    }

    fn total_of<M: Borrow<Message>>(&mut self, messages: &[M], tools: Counted) -> Counted {
        messages
            .iter()
            .map(|m| self.counter.count_message(m.borrow()).total())
            .sum::<Counted>()
            + tools
    }

    /// Tokens of the history a briefing would make: it, the kept tail it
    /// was written beside, the tools.
    fn briefed_total(&mut self, b: &Briefed, work: &Work) -> Counted {
        let tail: Counted = work.counts[work.counts.len() - b.tail_len..].iter().sum();
        self.total_of(&b.messages, work.tools) + tail
    }

    /// Token count of each message (from the thread's cache).
    fn message_tokens<M: Borrow<Message>>(&mut self, messages: &[M]) -> Vec<Counted> {
        messages
            .iter()
            .map(|m| self.counter.count_message(m.borrow()).total())
            .collect()
    }

    /// What a briefing of the old region may take: what head, pinned
    /// iterations, kept tail and tools leave of `target` (an earlier
    /// briefing and working set are replaced, not kept), at least
    /// `room.at_least`, at most the configured most.
    fn briefing_budget(&self, work: &Work, target: Counted, room: Room) -> Counted {
        let region = old_region(&work.messages, work.tail_n);
        let earlier = Earlier::find(&work.messages, region.start, &self.engine.facts.wrapper);
        let tokens = &work.counts;
        let earlier_tokens = earlier.tokens(tokens);
        let pinned_in_region: Counted = work.messages[region.clone()]
            .iter()
            .zip(&tokens[region.clone()])
            .filter(|(m, _)| m.meta.pinned)
            .map(|(_, t)| t)
            .sum();
        let kept = tokens[..region.start].iter().sum::<Counted>()
            + tokens[region.end..].iter().sum::<Counted>()
            + pinned_in_region
            + work.tools;
        target
            .saturating_sub(kept.saturating_sub(earlier_tokens) + BRIEFING_OVERHEAD)
            .max(room.at_least)
            .min(Counted::new(self.engine.config.summary.max_tokens))
    }

    /// Runs the summarizers (or only the one at `only`) with a budget that
    /// lets head, briefing, pinned iterations and tail fit the target together.
    /// `room`: what the briefing and its working set may take at least,
    /// whatever the target leaves.
    #[allow(clippy::too_many_arguments)]
    fn brief(
        &mut self,
        conv: &Conversation,
        plan: &Plan,
        work: &mut Work,
        target: Counted,
        only: Option<usize>,
        room: Room,
        attempts: &mut Vec<Attempt>,
    ) -> Option<Briefed> {
        let region = old_region(&work.messages, work.tail_n);
        let earlier = Earlier::find(&work.messages, region.start, &self.engine.facts.wrapper);
        if self.engine.summarizers.is_empty()
            || (region.is_empty() && earlier.briefing.is_none())
            || self.cancel.is_cancelled()
        {
            return None;
        }
        let budget = self.briefing_budget(work, target, room);
        if budget < MIN_BRIEFING {
            return None;
        }
        let pinned = self.pinned_flags_of(conv.family, &conv.messages);
        // The summarizers read the tail as messages: a copy of it alone.
        let tail: Vec<Message> = work.messages[region.end..]
            .iter()
            .map(|m| Message::clone(m))
            .collect();
        let inputs = Inputs {
            original: &conv.messages,
            original_tokens: &work.original,
            pinned: &pinned,
            tail: &tail,
            budget,
            tokenizer: self.engine.limits.tokenizer,
            facts: &self.engine.facts,
            focus: plan.focus.as_deref(),
            kept: self.kept,
            recall: self
                .engine
                .config
                .recall
                .enabled
                .then_some(&self.engine.config.recall),
            tool: self
                .engine
                .recall_for(conv.tools.as_deref())
                .map(|r| r.tool.as_str()),
            error_prefixes: &self.engine.config.policies.error_prefixes,
            working_share: self.engine.config.summary.working_set_share,
            working_floor: room.working,
            key: self.key,
            cancel: self.cancel,
        };
        let summarizers = match only {
            Some(i) => &self.engine.summarizers[i..=i],
            None => &self.engine.summarizers[..],
        };
        summarize_step::run(&inputs, summarizers, attempts, &mut work.region_facts)
    }

    /// Pins what the config pins (a copy of each message it pins).
    fn pin(&self, conv: &Conversation, messages: &mut [Slot<'_>]) {
        let flags = self.pinned_flags_of(conv.family, &conv.messages);
        for (m, p) in messages.iter_mut().zip(flags) {
            if p && !m.meta.pinned {
                m.make_mut().meta.pinned = true;
            }
        }
    }

    /// Which messages the config pins (by wire index or marker).
    fn pinned_flags_of(&self, family: Family, messages: &[Message]) -> Vec<bool> {
        let pin = &self.engine.config.pin;
        let offset = wire_offset(family, messages);
        messages
            .iter()
            .enumerate()
            .map(|(i, m)| {
                m.meta.pinned
                    || i.checked_sub(offset)
                        .is_some_and(|w| pin.indices.contains(&w))
                    || (!pin.markers.is_empty() && {
                        let text = m.text_content();
                        pin.markers.iter().any(|k| text.contains(k.as_str()))
                    })
            })
            .collect()
    }
}
