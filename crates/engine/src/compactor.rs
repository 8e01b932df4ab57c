//! The compactor: decides when to compact and rewrites the history.

use std::borrow::Cow;
use std::time::Instant;

use abridge_model::{Conversation, Iteration, Message, head_len, iterations, validate};
use abridge_summarize::{FactConfig, Offline, Summarizer};
use abridge_tokens::{Registry, TokenCounter};

use crate::boundary::tail_iterations;
use crate::config::{Config, PolicyKind};
use crate::error::{Error, Result};
use crate::event::{Event, PolicyRun};
use crate::limits::Limits;
use crate::policy;
use crate::report::{Outcome, Reason, Report};
use crate::snapshot::{SnapshotData, SnapshotSink};
use crate::summarize_step::{self, Attempt, Step};

type Sink = Box<dyn FnMut(&Event) + Send>;

/// Each policy advances over the old region in this many steps, oldest first.
const STEPS: usize = 4;

/// Compacts conversations according to a [`Config`].
///
/// Keep one per conversation: it caches token counts per message and
/// remembers when it last compacted (for `trigger.every_iterations`).
pub struct Compactor {
    config: Config,
    limits: Limits,
    counter: TokenCounter,
    sinks: Vec<Sink>,
    summarizers: Vec<Box<dyn Summarizer>>,
    store: Option<Box<dyn SnapshotSink>>,
    focus: Option<String>,
    compacted_at_iteration: usize,
}

impl std::fmt::Debug for Compactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compactor")
            .field("config", &self.config)
            .field("limits", &self.limits)
            .field("sinks", &self.sinks.len())
            .field(
                "summarizers",
                &self
                    .summarizers
                    .iter()
                    .map(|s| s.name())
                    .collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl Compactor {
    /// A compactor with the built-in model registry plus the config's `[models]`.
    pub fn new(config: Config) -> Result<Self> {
        Self::with_registry(config, Registry::new())
    }

    /// A compactor with the given registry (the config's `[models]` are added to it).
    pub fn with_registry(config: Config, mut registry: Registry) -> Result<Self> {
        config.check()?;
        registry.extend(config.models.clone());
        let limits = Limits::new(&config, &registry);
        let mut c = Compactor {
            counter: TokenCounter::new(limits.tokenizer),
            config,
            limits,
            sinks: Vec::new(),
            summarizers: Vec::new(),
            store: None,
            focus: None,
            compacted_at_iteration: 0,
        };
        c.set_summarizers(Vec::new());
        Ok(c)
    }

    /// Sets the summarizer cascade, tried in order. The offline fact sheet
    /// is appended as the last resort unless `summary.offline = false`, so
    /// a compaction that needs a briefing always gets one.
    pub fn set_summarizers(&mut self, mut cascade: Vec<Box<dyn Summarizer>>) {
        if self.config.summary.offline {
            cascade.push(Box::new(Offline {
                facts: FactConfig {
                    todo_tools: self.config.summary.todo_tools.clone(),
                    error_prefixes: self.config.policies.error_prefixes.clone(),
                },
            }));
        }
        self.summarizers = cascade;
    }

    /// The config.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Window, thresholds and budgets derived from the config and registry.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Records a snapshot of every compaction from now on (off by default).
    /// A store that fails makes a `snapshot_failed` event; the compaction
    /// still returns its result and the caller's history is untouched.
    pub fn set_store(&mut self, store: Box<dyn SnapshotSink>) {
        self.store = Some(store);
    }

    /// What briefings should focus on (passed to every summarizer), e.g.
    /// from an agent's `compact_history` call; `None` to clear.
    pub fn set_focus(&mut self, focus: Option<String>) {
        self.focus = focus;
    }

    /// Calls `f` with every event from now on.
    pub fn subscribe(&mut self, f: impl FnMut(&Event) + Send + 'static) {
        self.sinks.push(Box::new(f));
    }

    /// Tokens of a history: messages plus tool declarations.
    pub fn count(&mut self, conv: &Conversation) -> u64 {
        self.counter.count_conversation(conv) as u64
    }

    /// Token count of each message.
    pub fn message_tokens(&mut self, messages: &[Message]) -> Vec<u64> {
        messages
            .iter()
            .map(|m| self.counter.count_message(m).total() as u64)
            .collect()
    }

    /// Evaluates one agent turn: emits a history-size event, and compacts
    /// when a trigger fires. `usage` is the provider-reported prompt tokens
    /// of the last response, when the caller has it.
    ///
    /// An unchanged history is returned borrowed, without copying. On error
    /// the caller's history is untouched and an event says why.
    pub fn on_turn<'a>(
        &mut self,
        conv: &'a Conversation,
        usage: Option<u64>,
    ) -> Result<Outcome<'a>> {
        let start = Instant::now();
        let (tokens, its, event) = self.observe(conv);
        let events = vec![event];
        let Some(reason) = self
            .limits
            .fired(tokens, its, self.compacted_at_iteration, usage)
        else {
            return Ok(self.unchanged(conv, None, tokens, events, start));
        };
        self.compact_for(conv, reason, tokens, usage, events, start)
    }

    /// Compacts for a trigger that fired; skips a compaction that would clear
    /// fewer than `clear_at_least` tokens.
    pub(crate) fn compact_for<'a>(
        &mut self,
        conv: &'a Conversation,
        reason: Reason,
        tokens: u64,
        usage: Option<u64>,
        mut events: Vec<Event>,
        start: Instant,
    ) -> Result<Outcome<'a>> {
        let target = self.limits.target_for(reason, tokens, usage);
        // The cadence counts from this evaluation, whatever it does.
        self.compacted_at_iteration = iterations(&conv.messages).len();
        let mut outcome = self.run(conv, reason, target, tokens, events, start)?;
        if outcome.report.compacted && reason != Reason::Forced {
            let saved = outcome.report.tokens_before - outcome.report.tokens_after;
            if saved < self.config.budget.clear_at_least {
                let skip = Event::CompactionSkipped {
                    reason: format!(
                        "would clear {saved} tokens, less than clear_at_least = {}",
                        self.config.budget.clear_at_least
                    ),
                };
                self.emit(&skip);
                events = std::mem::take(&mut outcome.report.events);
                events.retain(|e| !matches!(e, Event::HistoryCompacted { .. }));
                events.push(skip);
                return Ok(self.unchanged(conv, Some(reason), tokens, events, start));
            }
        }
        Ok(outcome)
    }

    /// Compacts now to the target (`budget.target_tokens`, or the derived
    /// one); without any target, clips old content without dropping
    /// iterations. A history already at or under the target is returned
    /// borrowed.
    pub fn compact<'a>(&mut self, conv: &'a Conversation) -> Result<Outcome<'a>> {
        let start = Instant::now();
        let (tokens, _, event) = self.observe(conv);
        let target = self.limits.target;
        self.run(conv, Reason::Forced, target, tokens, vec![event], start)
    }

    /// Compacts now because the agent asked (`compact_history`): everything
    /// before the last `keep_iterations` iterations becomes a briefing (or is
    /// dropped when no summarizer gives one), whatever the triggers say.
    pub fn compact_on_request<'a>(
        &mut self,
        conv: &'a Conversation,
        keep_iterations: usize,
        focus: Option<String>,
    ) -> Result<Outcome<'a>> {
        let start = Instant::now();
        let saved = (self.config.clone(), self.limits, self.focus.take());
        let (tokens, _, event) = self.observe(conv);
        self.config.policies.pipeline = vec![PolicyKind::Summarize, PolicyKind::DropIterations];
        self.config.budget.min_iterations = keep_iterations.max(1);
        self.limits.kept_budget = 0;
        self.limits.target = Some(tokens.saturating_sub(1));
        self.focus = focus;
        let result = self.run(
            conv,
            Reason::Forced,
            self.limits.target,
            tokens,
            vec![event],
            start,
        );
        (self.config, self.limits, self.focus) = saved;
        result
    }

    fn run<'a>(
        &mut self,
        conv: &'a Conversation,
        reason: Reason,
        target: Option<u64>,
        tokens: u64,
        events: Vec<Event>,
        start: Instant,
    ) -> Result<Outcome<'a>> {
        match self.rewrite(conv, reason, target, tokens, start, events) {
            Ok(o) => Ok(o),
            Err(e) => {
                self.emit(&Event::CompactionFailed {
                    error: e.to_string(),
                });
                Err(e)
            }
        }
    }

    fn rewrite<'a>(
        &mut self,
        conv: &'a Conversation,
        reason: Reason,
        target: Option<u64>,
        tokens_before: u64,
        start: Instant,
        mut events: Vec<Event>,
    ) -> Result<Outcome<'a>> {
        if target.is_some_and(|t| tokens_before <= t) {
            return Ok(self.unchanged(conv, Some(reason), tokens_before, events, start));
        }
        let tools = self.counter.count_tools(conv.tools.as_deref()) as u64;
        let mut work = conv.messages.clone();
        self.pin(&mut work);
        let floor = self.config.budget.min_iterations;
        let its = iterations(&work);
        let tokens = self.message_tokens(&work);
        let mut tail_n = tail_iterations(&its, &tokens, self.limits.kept_budget, floor);
        let mut total = tokens_before;
        let mut runs: Vec<PolicyRun> = Vec::new();
        let mut attempts: Vec<Attempt> = Vec::new();
        let mut summarizer: Option<String> = None;
        let pipeline = self.config.policies.pipeline.clone();
        'shrink: loop {
            for &kind in &pipeline {
                if kind == PolicyKind::DropIterations && target.is_none() {
                    continue;
                }
                if kind == PolicyKind::Summarize {
                    let Some(t) = target else { continue };
                    if let Some(b) = self.summarize(conv, &work, tail_n, t, tools, &mut attempts) {
                        work = b.messages;
                        let now = self.message_tokens(&work).iter().sum::<u64>() + tools;
                        record(
                            &mut runs,
                            kind,
                            b.replaced_iterations,
                            total.saturating_sub(now),
                        );
                        total = now;
                        summarizer = Some(b.summarizer);
                    }
                    if total <= t {
                        break 'shrink;
                    }
                    continue;
                }
                // Oldest first, in steps, so that no more is cleared than the
                // target needs. The region is named by how many iterations it
                // leaves at the end, which stays true when a step removes messages.
                let old = iterations(&work).len().saturating_sub(tail_n);
                for step in 1..=STEPS {
                    let keep = old - old * step / STEPS;
                    let region = old_region(&work, tail_n + keep);
                    let items = policy::apply(kind, &mut work, region, &self.config.policies);
                    if items > 0 {
                        let now = self.message_tokens(&work).iter().sum::<u64>() + tools;
                        record(&mut runs, kind, items, total.saturating_sub(now));
                        total = now;
                    }
                    if target.is_some_and(|t| total <= t) {
                        break 'shrink;
                    }
                }
            }
            let Some(target) = target else { break };
            if tail_n <= floor {
                return Err(self.cannot_shrink(&work, tail_n, target, tools));
            }
            tail_n = (tail_n / 2).max(floor);
        }
        if runs.is_empty() {
            return Ok(self.unchanged(conv, Some(reason), tokens_before, events, start));
        }
        let after = Conversation {
            messages: work,
            ..conv.clone_envelope()
        };
        guard(conv, &after)?;
        self.compacted_at_iteration = iterations(&after.messages).len();
        let report_tail = tail_n.min(iterations(&after.messages).len());
        let event = Event::HistoryCompacted {
            reason: reason.as_str().to_owned(),
            policies: runs.clone(),
            messages_before: conv.messages.len(),
            messages_after: after.messages.len(),
            tokens_before,
            tokens_after: total,
            tokens_saved: tokens_before.saturating_sub(total),
            target,
            summarizer: summarizer.clone(),
            duration_us: start.elapsed().as_micros() as u64,
        };
        self.emit(&event);
        events.push(event);
        let mut report = Report {
            reason: Some(reason),
            compacted: true,
            tokens_before,
            tokens_after: total,
            messages_before: conv.messages.len(),
            messages_after: after.messages.len(),
            tail_iterations: report_tail,
            target,
            policies: runs,
            summarizer,
            attempts,
            snapshot: None,
            events,
            duration_us: start.elapsed().as_micros() as u64,
        };
        self.snapshot(conv, &after, &mut report);
        Ok(Outcome {
            report,
            conversation: Cow::Owned(after),
        })
    }

    /// Records the snapshot; a failure becomes an event, not an error.
    fn snapshot(&mut self, before: &Conversation, after: &Conversation, report: &mut Report) {
        let Some(mut store) = self.store.take() else {
            return;
        };
        let data = SnapshotData {
            before,
            after,
            config: &self.config,
            report,
        };
        let event = match store.record(&data) {
            Ok(id) => {
                report.snapshot = Some(id);
                None
            }
            Err(error) => Some(Event::SnapshotFailed { error }),
        };
        self.store = Some(store);
        if let Some(e) = event {
            self.emit(&e);
            report.events.push(e);
        }
    }

    fn pin(&self, messages: &mut [Message]) {
        let flags = self.pinned_flags_of(messages);
        for (m, p) in messages.iter_mut().zip(flags) {
            m.meta.pinned |= p;
        }
    }

    /// Which messages the config pins (by index or marker).
    fn pinned_flags_of(&self, messages: &[Message]) -> Vec<bool> {
        let pin = &self.config.pin;
        messages
            .iter()
            .enumerate()
            .map(|(i, m)| {
                m.meta.pinned
                    || pin.indices.contains(&i)
                    || (!pin.markers.is_empty() && {
                        let text = m.text_content();
                        pin.markers.iter().any(|k| text.contains(k.as_str()))
                    })
            })
            .collect()
    }

    /// Runs the summarize step with a budget that lets head, briefing,
    /// pinned iterations and tail fit the target together.
    fn summarize(
        &mut self,
        conv: &Conversation,
        work: &[Message],
        tail_n: usize,
        target: u64,
        tools: u64,
        attempts: &mut Vec<Attempt>,
    ) -> Option<summarize_step::Briefed> {
        if self.summarizers.is_empty() {
            return None;
        }
        let region = old_region(work, tail_n);
        if region.is_empty() {
            return None;
        }
        let tokens = self.message_tokens(work);
        let kept: u64 = tokens[..region.start].iter().sum::<u64>()
            + tokens[region.end..].iter().sum::<u64>()
            + work[region.clone()]
                .iter()
                .zip(&tokens[region.clone()])
                .filter(|(m, _)| m.meta.pinned)
                .map(|(_, t)| t)
                .sum::<u64>()
            + tools;
        let room = target
            .saturating_sub(kept + 32)
            .min(self.config.summary.max_tokens);
        if room < 64 {
            return None;
        }
        let pinned = self.pinned_flags_of(&conv.messages);
        let original_tokens = self.message_tokens(&conv.messages);
        let facts = FactConfig {
            todo_tools: self.config.summary.todo_tools.clone(),
            error_prefixes: self.config.policies.error_prefixes.clone(),
        };
        let step = Step {
            original_tokens: &original_tokens,
            facts: &facts,
            focus: self.focus.as_deref(),
            original: &conv.messages,
            pinned: &pinned,
            work,
            tail_len: work.len() - region.end,
            budget: room as usize,
            wrapper: &self.config.summary.wrapper,
            tokenizer: self.limits.tokenizer,
        };
        summarize_step::run(&step, &self.summarizers, attempts)
    }

    fn cannot_shrink(&mut self, work: &[Message], tail_n: usize, target: u64, tools: u64) -> Error {
        let tokens = self.message_tokens(work);
        let head = head_len(work);
        let its = iterations(work);
        let tail_start = tail_start(work, &its, tail_n);
        let head = head.min(tail_start);
        let sum = |r: std::ops::Range<usize>| tokens[r].iter().sum::<u64>();
        let (head_t, tail_t) = (sum(0..head), sum(tail_start..work.len()));
        let pinned = sum(head..tail_start);
        Error::CannotShrink {
            floor: head_t + pinned + tail_t + tools,
            target,
            head: head_t,
            pinned,
            tail: tail_t,
            tail_iterations: tail_n.min(its.len()),
            tools,
        }
    }

    fn unchanged<'a>(
        &self,
        conv: &'a Conversation,
        reason: Option<Reason>,
        tokens: u64,
        events: Vec<Event>,
        start: Instant,
    ) -> Outcome<'a> {
        Outcome {
            report: Report {
                reason,
                compacted: false,
                tokens_before: tokens,
                tokens_after: tokens,
                messages_before: conv.messages.len(),
                messages_after: conv.messages.len(),
                tail_iterations: iterations(&conv.messages).len(),
                target: None,
                policies: Vec::new(),
                summarizer: None,
                attempts: Vec::new(),
                snapshot: None,
                events,
                duration_us: start.elapsed().as_micros() as u64,
            },
            conversation: Cow::Borrowed(conv),
        }
    }

    /// Counts the history, emits its size event, and returns both.
    fn observe(&mut self, conv: &Conversation) -> (u64, usize, Event) {
        let tokens = self.count(conv);
        let its = iterations(&conv.messages).len();
        let event = self.size_event(tokens, conv.messages.len(), its);
        self.emit(&event);
        (tokens, its, event)
    }

    /// The `history_size` event for these figures.
    pub(crate) fn size_event(&self, tokens: u64, messages: usize, iterations: usize) -> Event {
        Event::HistorySize {
            tokens,
            messages,
            iterations,
            window_fraction: self
                .limits
                .window
                .map(|w| (tokens as f64 / w as f64 * 10_000.0).round() / 10_000.0),
        }
    }

    pub(crate) fn emit(&mut self, e: &Event) {
        for s in &mut self.sinks {
            s(e);
        }
    }

    pub(crate) fn compacted_at(&self) -> usize {
        self.compacted_at_iteration
    }
}

/// `[head end, tail start)`: what policies may rewrite, given the tail size.
fn old_region(messages: &[Message], tail_n: usize) -> std::ops::Range<usize> {
    let tail = tail_start(messages, &iterations(messages), tail_n);
    head_len(messages).min(tail)..tail
}

/// Index where the last `tail_n` iterations start (the end when there are none).
fn tail_start(messages: &[Message], its: &[Iteration], tail_n: usize) -> usize {
    its.len()
        .checked_sub(tail_n)
        .and_then(|k| its.get(k))
        .map_or(messages.len(), |i| i.start)
}

fn record(runs: &mut Vec<PolicyRun>, kind: PolicyKind, items: usize, saved: u64) {
    match runs.iter_mut().find(|r| r.policy == kind.as_str()) {
        Some(r) => {
            r.items += items;
            r.tokens_saved += saved;
        }
        None => runs.push(PolicyRun {
            policy: kind.as_str(),
            items,
            tokens_saved: saved,
        }),
    }
}

/// Refuses a rewrite that breaks a rule the input did not already break.
fn guard(before: &Conversation, after: &Conversation) -> Result<()> {
    let known: Vec<(String, Option<String>)> = validate(before)
        .into_iter()
        .map(|v| (v.rule.code().to_owned(), v.id))
        .collect();
    let new: Vec<_> = validate(after)
        .into_iter()
        .filter(|v| !known.contains(&(v.rule.code().to_owned(), v.id.clone())))
        .collect();
    if new.is_empty() {
        Ok(())
    } else {
        Err(Error::Invalid(new))
    }
}
