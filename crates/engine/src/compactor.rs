//! The compactor: decides when to compact, plans the compaction, and keeps
//! what it needs between turns (token counts, the last compaction).

use std::time::Instant;

use abridge_model::{Conversation, Message, iterations};
use abridge_summarize::{FactConfig, Offline, Summarizer};
use abridge_tokens::{Registry, TokenCounter};

use crate::calibration::Calibration;
use crate::config::Config;
use crate::error::Result;
use crate::event::Event;
use crate::limits::Limits;
use crate::plan::Plan;
use crate::report::{Outcome, Reason, Report};
use crate::snapshot::SnapshotSink;

type Sink = Box<dyn FnMut(&Event) + Send>;

/// Compacts conversations according to a [`Config`].
///
/// Keep one per conversation: it caches token counts per message and
/// remembers when it last compacted (for `trigger.every_iterations`).
pub struct Compactor {
    pub(crate) config: Config,
    pub(crate) limits: Limits,
    pub(crate) facts: FactConfig,
    pub(crate) counter: TokenCounter,
    sinks: Vec<Sink>,
    pub(crate) summarizers: Vec<Box<dyn Summarizer>>,
    pub(crate) store: Option<Box<dyn SnapshotSink>>,
    focus: Option<String>,
    pub(crate) compacted_at_iteration: usize,
    calibration: Calibration,
    /// abridge's count of the history it last returned (the prompt the
    /// next reported usage is about).
    last_sent: Option<u64>,
}

/// An evaluation under way: the history's tokens and iterations, the events
/// so far, and when it started.
pub(crate) struct Eval {
    pub(crate) tokens: u64,
    pub(crate) iterations: usize,
    pub(crate) events: Vec<Event>,
    pub(crate) start: Instant,
}

impl std::fmt::Debug for Compactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<String> = self.summarizers.iter().map(|s| s.name()).collect();
        f.debug_struct("Compactor")
            .field("config", &self.config)
            .field("limits", &self.limits)
            .field("sinks", &self.sinks.len())
            .field("summarizers", &names)
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
            facts: config.facts(),
            config,
            limits,
            sinks: Vec::new(),
            summarizers: Vec::new(),
            store: None,
            focus: None,
            compacted_at_iteration: 0,
            calibration: Calibration::default(),
            last_sent: None,
        };
        c.set_summarizers(Vec::new());
        Ok(c)
    }

    /// Sets the summarizer cascade, tried in order. The offline fact sheet
    /// is appended as the last resort unless `summary.offline = false`, so
    /// a compaction that needs a briefing always gets one. (The config's
    /// `[[summarizers]]` are built by `abridge_llm::cascade`.)
    pub fn set_summarizers(&mut self, mut cascade: Vec<Box<dyn Summarizer>>) {
        if self.config.summary.offline {
            cascade.push(Box::new(Offline));
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

    /// The correction to the provider's count learned so far.
    pub fn calibration(&self) -> Calibration {
        self.calibration
    }

    /// Starts from a known correction (e.g. a session resumed from a store).
    pub fn set_calibration(&mut self, c: Calibration) {
        self.calibration = c;
    }

    /// abridge's count in the provider's units.
    pub fn calibrated(&self, tokens: u64) -> u64 {
        self.calibration.apply(tokens)
    }

    /// Learns from the provider-reported prompt tokens of the last
    /// response: they are about the history this compactor last returned
    /// (or, before it returned one, about roughly `now` tokens).
    pub(crate) fn learn(&mut self, usage: Option<u64>, now: u64) {
        if let Some(reported) = usage {
            self.calibration
                .observe(self.last_sent.unwrap_or(now), reported);
        }
    }

    /// Remembers what was sent, for the next [`learn`](Self::learn).
    pub(crate) fn sent(&mut self, tokens: u64) {
        self.last_sent = Some(tokens);
    }

    /// Tokens of a history: messages plus tool declarations.
    pub fn count(&mut self, conv: &Conversation) -> u64 {
        self.counter.count_conversation(conv) as u64
    }

    /// Tokens of a history's tool declarations.
    pub fn tool_tokens(&mut self, conv: &Conversation) -> u64 {
        self.counter.count_tools(conv.tools.as_deref()) as u64
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
        let tokens = self.count(conv);
        self.evaluate(conv, tokens, usage)
    }

    /// [`on_turn`](Self::on_turn) for a history whose tokens the caller
    /// already knows (a carried-over prefix plus new messages).
    pub(crate) fn evaluate<'a>(
        &mut self,
        conv: &'a Conversation,
        tokens: u64,
        usage: Option<u64>,
    ) -> Result<Outcome<'a>> {
        let start = Instant::now();
        self.learn(usage, tokens);
        let its = iterations(&conv.messages).len();
        let eval = self.observe(conv, tokens, its, start);
        let fired = self.limits.fired(
            self.calibrated(tokens),
            its,
            self.compacted_at_iteration,
            usage,
        );
        let outcome = match fired {
            Some(reason) => self.compact_for(conv, reason, eval),
            None => Ok(self.unchanged(conv, None, eval)),
        };
        // On error the caller sends the history as it is.
        self.sent(outcome.as_ref().map_or(tokens, |o| o.report.tokens_after));
        outcome
    }

    /// Compacts for a trigger that fired; skips a compaction that would clear
    /// fewer than `clear_at_least` tokens.
    pub(crate) fn compact_for<'a>(
        &mut self,
        conv: &'a Conversation,
        reason: Reason,
        eval: Eval,
    ) -> Result<Outcome<'a>> {
        let target = self
            .limits
            .target_for(reason)
            .map(|t| self.calibration.unapply(t));
        // The cadence counts from this evaluation, whatever it does.
        self.compacted_at_iteration = eval.iterations;
        let (tokens, its, start) = (eval.tokens, eval.iterations, eval.start);
        let mut plan = self.plan(reason, target);
        plan.ceiling = self
            .limits
            .trigger_tokens
            .map(|t| self.calibration.unapply(t));
        let mut outcome = self.run(conv, &plan, eval)?;
        let saved = (outcome.report.tokens_before).saturating_sub(outcome.report.tokens_after);
        let clear_at_least = self.config.budget.clear_at_least;
        if !outcome.report.compacted || reason == Reason::Forced || saved >= clear_at_least {
            return Ok(outcome);
        }
        let skip = Event::CompactionSkipped {
            reason,
            would_clear: saved,
            clear_at_least,
        };
        self.emit(&skip);
        let mut events = std::mem::take(&mut outcome.report.events);
        events.retain(|e| !matches!(e, Event::HistoryCompacted { .. }));
        events.push(skip);
        let eval = Eval {
            tokens,
            iterations: its,
            events,
            start,
        };
        Ok(self.unchanged(conv, Some(reason), eval))
    }

    /// Compacts now to the target (`budget.target_tokens`, or the derived
    /// one); without any target, clips old content without dropping
    /// iterations. A history already at or under the target is returned
    /// borrowed.
    pub fn compact<'a>(&mut self, conv: &'a Conversation) -> Result<Outcome<'a>> {
        let target = self.limits.target.map(|t| self.calibration.unapply(t));
        self.compact_with_target(conv, target)
    }

    /// Compacts now to `target` tokens (in the provider's units, as
    /// calibrated), e.g. after the provider refused the history as too long.
    pub fn compact_to<'a>(&mut self, conv: &'a Conversation, target: u64) -> Result<Outcome<'a>> {
        let target = self.calibration.unapply(target);
        self.compact_with_target(conv, Some(target))
    }

    fn compact_with_target<'a>(
        &mut self,
        conv: &'a Conversation,
        target: Option<u64>,
    ) -> Result<Outcome<'a>> {
        let eval = self.observe_now(conv);
        let plan = self.plan(Reason::Forced, target);
        let outcome = self.run(conv, &plan, eval);
        if let Ok(o) = &outcome {
            self.sent(o.report.tokens_after);
        }
        outcome
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
        let eval = self.observe_now(conv);
        let plan = Plan::on_request(eval.tokens, keep_iterations, focus);
        self.run(conv, &plan, eval)
    }

    fn plan(&self, reason: Reason, target: Option<u64>) -> Plan {
        Plan::configured(
            &self.config,
            &self.limits,
            reason,
            target,
            self.focus.clone(),
        )
    }

    /// Executes a plan; a failure becomes a `compaction_failed` event too.
    fn run<'a>(&mut self, conv: &'a Conversation, plan: &Plan, eval: Eval) -> Result<Outcome<'a>> {
        self.rewrite(conv, plan, eval).inspect_err(|e| {
            let event = Event::CompactionFailed {
                error: e.to_string(),
            };
            self.emit(&event);
        })
    }

    pub(crate) fn unchanged<'a>(
        &self,
        conv: &'a Conversation,
        reason: Option<Reason>,
        eval: Eval,
    ) -> Outcome<'a> {
        let n = conv.messages.len();
        Outcome {
            report: Report {
                reason,
                compacted: false,
                tokens_before: eval.tokens,
                tokens_after: eval.tokens,
                messages_before: n,
                messages_after: n,
                tail_iterations: iterations(&conv.messages).len(),
                target: None,
                policies: Vec::new(),
                summarizer: None,
                attempts: Vec::new(),
                snapshot: None,
                events: eval.events,
                duration_us: eval.start.elapsed().as_micros() as u64,
                degraded: Vec::new(),
            },
            conversation: std::borrow::Cow::Borrowed(conv),
        }
    }

    fn observe_now(&mut self, conv: &Conversation) -> Eval {
        let start = Instant::now();
        let tokens = self.count(conv);
        self.observe(conv, tokens, iterations(&conv.messages).len(), start)
    }

    /// Emits the history-size event and starts an evaluation with it.
    pub(crate) fn observe(
        &mut self,
        conv: &Conversation,
        tokens: u64,
        iterations: usize,
        start: Instant,
    ) -> Eval {
        let event = self.size_event(tokens, conv.messages.len(), iterations);
        self.emit(&event);
        Eval {
            tokens,
            iterations,
            events: vec![event],
            start,
        }
    }

    /// The `history_size` event for these figures.
    pub(crate) fn size_event(&self, tokens: u64, messages: usize, iterations: usize) -> Event {
        let calibrated = self.calibrated(tokens);
        Event::HistorySize {
            tokens,
            calibrated_tokens: calibrated,
            messages,
            iterations,
            window_fraction: self
                .limits
                .window
                .map(|w| (calibrated as f64 / w as f64 * 10_000.0).round() / 10_000.0),
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
