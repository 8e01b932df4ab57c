//! A conversation's state between turns, and the one place that decides
//! when and how a turn compacts.
//!
//! A [`Thread`] holds what one conversation learned: the calibration to the
//! provider's count, the compaction carried over to the next turn, what was
//! last sent, the cadence, a token cache and what briefings should focus
//! on. [`Thread::turn`] takes an [`Input`] that says what the caller knows
//! — a history to evaluate, one that extends the last by some messages, the
//! client's whole log resent, a forced target, an agent's request — and
//! every front end (the [`Compactor`](crate::Compactor), the
//! [`History`](crate::History), the proxy, the packages) calls it.
//!
//! ```
//! use abridge::{Config, Engine, Input, Thread, model::{decode, Message, Role}};
//!
//! let config = Config::from_toml("[trigger]\nmax_tokens = 1200\n[budget]\nclear_at_least = 100\nmin_iterations = 1")?;
//! let engine = Engine::new(config)?;
//! let mut thread = Thread::new(&engine);
//! let bytes = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/coding-agent.openai.json"))?;
//! let mut history = decode(&bytes)?.remove(0);
//! let first = thread.turn(&engine, Input::evaluate(&history).resent())?;
//! assert!(first.report.compacted);
//! let sent = first.conversation.into_owned();
//!
//! // The client sends its whole history again, one message longer: the
//! // compacted prefix goes again byte for byte.
//! let before = history.messages.len();
//! history.messages.push(Message::text(Role::User, "Thanks."));
//! let next = thread.turn(&engine, Input::evaluate(&history).resent().extending(before))?;
//! assert_eq!(next.conversation.messages[..sent.messages.len()], sent.messages[..]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::borrow::Cow;
use std::time::Instant;

use abridge_model::{Conversation, Message, Role, iterations};
use abridge_tokens::{Calibrated, Counted, Reported, TokenCounter, TokenCounts};

use crate::calibration::Calibration;
use crate::carryover::Carryover;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::event::{Event, iteration_id};
use crate::input::{Action, Input};
use crate::plan::Plan;
use crate::recall::{Handle, HandleKey};
use crate::report::Outcome;
use crate::report::{Eval, unchanged};
use crate::rewrite::Rewriter;
use crate::state::ThreadState;
use crate::summarize_step::KeptBriefing;
use crate::trigger::{Reason, TurnFacts};

/// One conversation's state between turns. Keep one per conversation, with
/// the [`Engine`] it was made for.
#[derive(Debug)]
pub struct Thread {
    state: ThreadState,
    /// The last turn, for a next one that extends it.
    last: Option<Seen>,
    /// Prompt tokens the provider reported for the last history sent,
    /// waiting for the next turn.
    reported: Option<Reported>,
    counter: TokenCounter,
    /// Its name, handed to the snapshot store.
    name: Option<String>,
    /// The key its handles are derived with (a shared proxy's tenant).
    key: Option<HandleKey>,
    /// Tokens of the last turn's history as its caller sent it.
    client: Counted,
}

/// What the last turn saw: how long the caller's history was (the history
/// returned, for a caller that sends it; the log, for one that resends its
/// own), and the tokens (tool declarations aside) and iterations of what
/// was sent for it.
#[derive(Debug, Clone, Copy)]
struct Seen {
    len: usize,
    tokens: Counted,
    iterations: usize,
    /// Tokens of the tool declarations.
    tools: Counted,
    /// Tokens of the messages as the caller sent them (what a carried
    /// compaction replaced counted as it was).
    client: Counted,
}

/// What a turn measured of its input (see [`Thread::measure`]).
struct Measured {
    /// The compaction carried over, taken out while the turn runs.
    carry: Option<Carryover>,
    /// The history as it goes out, when a carried prefix applies.
    view: Option<Conversation>,
    /// Tokens of its messages.
    tokens: Counted,
    /// Tokens of its messages as the caller sent them (with what a carried
    /// compaction replaced, counted as it was).
    client: Counted,
    iterations: usize,
    /// Tokens of its tool declarations.
    tools: Counted,
    /// Tokens of the recall tool's declaration when the caller adds it
    /// ([`EngineBuilder::declares_recall_tool`](crate::EngineBuilder::declares_recall_tool)): to every rewritten history.
    recall_tool: Counted,
    /// The same when this history goes out rewritten (a carried prefix
    /// applied), else none.
    declared: Counted,
    /// It extends what the last turn sent: the provider's count of that
    /// is a count of its prefix.
    extends: bool,
}

impl Thread {
    /// A new conversation.
    pub fn new(engine: &Engine) -> Thread {
        Thread::resume(engine, ThreadState::default())
    }

    /// A conversation resumed from its stored state.
    pub fn resume(engine: &Engine, state: ThreadState) -> Thread {
        Thread {
            state,
            last: None,
            reported: None,
            counter: engine.counter(),
            name: None,
            key: None,
            client: Counted::ZERO,
        }
    }

    /// Names the conversation (its snapshots are recorded under the name).
    pub fn set_name(&mut self, name: impl Into<String>) {
        self.name = Some(name.into());
    }

    /// Derives the handles of what its compactions replace with `key` (a
    /// shared proxy's tenant): they resolve only through a
    /// [`RecallScope`](crate::recall::RecallScope) with the same key.
    pub fn set_handle_key(&mut self, key: HandleKey) {
        self.key = Some(key);
    }

    /// What is kept across restarts.
    pub fn state(&self) -> &ThreadState {
        &self.state
    }

    /// Tokens of the last turn's history as its caller sent it (messages
    /// and tool declarations; what a carried compaction replaced counted
    /// as it was, not as it goes out).
    pub fn client_tokens(&self) -> Counted {
        self.client
    }

    /// The correction to the provider's count learned so far.
    pub fn calibration(&self) -> Calibration {
        self.state.calibration
    }

    /// Starts from a known correction.
    pub fn set_calibration(&mut self, c: Calibration) {
        self.state.calibration = c;
    }

    /// About how many bytes it holds in memory: the carried compaction's
    /// messages, the kept briefing's sheet and the count cache (what an
    /// owner of many threads budgets).
    pub fn memory(&self) -> usize {
        /// A message's and one part's structs beside their text.
        const PER_MESSAGE: usize = size_of::<Message>() + size_of::<abridge_model::Part>();
        let carried: usize = self.state.carryover.as_ref().map_or(0, |c| {
            c.messages()
                .iter()
                .map(|m| PER_MESSAGE + m.text_bytes())
                .sum()
        });
        let sheet: usize = self.state.briefing.as_ref().map_or(0, |b| {
            b.sheet
                .sections
                .iter()
                .flat_map(|s| &s.items)
                .map(|i| 48 + i.text.len() + i.key.as_ref().map_or(0, String::len))
                .sum()
        });
        size_of::<Thread>() + carried + sheet + self.counter.cache_bytes()
    }

    /// The compaction carried over to the next turn, if any.
    pub fn carryover(&self) -> Option<&Carryover> {
        self.state.carryover.as_ref()
    }

    /// Carries over a compaction made elsewhere (a background preparation):
    /// the next turn of a resent log that still starts with what it
    /// compacted sends it.
    pub fn adopt(&mut self, carry: Carryover) {
        // What it replaced was counted elsewhere: its own size stands in.
        self.state.carried_source = None;
        self.state.carryover = Some(carry);
        self.last = None;
    }

    /// What briefings should focus on; `None` to clear.
    pub fn set_focus(&mut self, focus: Option<String>) {
        self.state.focus = focus;
    }

    /// The provider reported `prompt_tokens` for the last history sent;
    /// the next turn learns from it (and checks `trigger.usage_tokens`).
    pub fn reported(&mut self, prompt_tokens: Reported) {
        self.reported = Some(prompt_tokens).filter(|t| *t > Reported::ZERO);
    }

    /// abridge's count in the provider's units.
    pub fn calibrated(&self, tokens: Counted) -> Calibrated {
        self.state.calibration.apply(tokens)
    }

    /// Tokens of a history: messages plus tool declarations.
    pub fn count(&mut self, conv: &Conversation) -> Counted {
        self.counter.count_conversation(conv)
    }

    /// Tokens of a history's tool declarations.
    pub fn tool_tokens(&mut self, conv: &Conversation) -> Counted {
        self.counter.count_tools(conv.tools.as_deref())
    }

    /// Token count of each message.
    pub fn message_tokens(&mut self, messages: &[Message]) -> Vec<Counted> {
        messages.iter().map(|m| self.tokens_of(m)).collect()
    }

    /// Tokens of some messages together: what is new to the cache is
    /// counted on every core when there is enough of it (a session's first
    /// request, a resent log the proxy has not seen).
    fn sum_of(&mut self, messages: &[Message]) -> Counted {
        self.counter
            .count_messages(messages)
            .iter()
            .map(TokenCounts::total)
            .sum()
    }

    fn tokens_of(&mut self, m: &Message) -> Counted {
        self.counter.count_message(m).total()
    }

    /// One turn: counts what the input adds, emits a history-size event and
    /// does what the input asks. An unchanged history is returned borrowed.
    /// On error the caller's history is untouched, an event says why, and
    /// what was carried over stays: send [`Carryover::apply`] of a resent
    /// log if it still applies (the cached prefix stays), or the history.
    pub fn turn<'a>(&mut self, engine: &Engine, input: Input<'a>) -> Result<Outcome<'a>> {
        let start = Instant::now();
        if !self.takes(&input) {
            return Err(Error::LeftOut(input.left_out.len));
        }
        input.cancel.check()?;
        self.follow(engine);
        let m = self.measure(engine, &input);
        self.client = m.client + m.tools;
        if let Err(e) = input.cancel.check() {
            self.state.carryover = m.carry;
            return Err(e);
        }
        let eval = Eval {
            tokens: m.tokens + m.tools + m.declared,
            calibration: self.state.calibration,
            iterations: m.iterations,
            events: Vec::new(),
            start,
            cancel: input.cancel.clone(),
        };
        let conv = m.view.as_ref().unwrap_or(input.history);
        match self.act(engine, conv, input.action, eval, m.extends) {
            Ok(outcome) => {
                let report = outcome.report;
                let rewritten = match outcome.conversation {
                    Cow::Owned(c) => Some(c),
                    Cow::Borrowed(_) => None,
                };
                // What goes out: the rewrite, else the carried prefix
                // applied, else the caller's history, borrowed.
                let conversation = match (rewritten, m.view) {
                    (Some(c), _) => Cow::Owned(c),
                    (None, Some(v)) => Cow::Owned(v),
                    (None, None) => Cow::Borrowed(input.history),
                };
                let outcome = Outcome {
                    conversation,
                    report,
                };
                // What the report's figures hold besides the messages.
                let beside = match outcome.report.compacted {
                    true => m.tools + m.recall_tool,
                    false => m.tools + m.declared,
                };
                self.remember(
                    &input,
                    &outcome,
                    m.carry,
                    m.iterations,
                    m.tools,
                    beside,
                    m.client,
                );
                Ok(outcome)
            }
            Err(e) => {
                if input.action == Action::Evaluate {
                    // The history goes as it is.
                    self.state.last_sent = Some(m.tokens + m.tools + m.declared);
                }
                self.state.carryover = m.carry;
                Err(e)
            }
        }
    }

    /// Takes the model of `engine` as this turn's: when it is not the last
    /// turn's, the last one's calibration learns from its pending report and
    /// is put aside, the new model's (or a fresh one) is taken back, and a
    /// model counted with another tokenizer counts everything anew. The
    /// carried compaction, the cadence and the kept briefing stay: the turn
    /// checks them against the new model's limits.
    fn follow(&mut self, engine: &Engine) {
        /// Models whose calibrations a thread keeps besides its current one.
        const MODELS: usize = 16;
        let model = engine.config().model.as_deref();
        let state = &mut self.state;
        if state.model.as_deref() == model {
            return;
        }
        if let Some(old) = state.model.take() {
            if let (Some(reported), Some(sent)) = (self.reported.take(), state.last_sent.take()) {
                state.calibration.observe(sent, reported);
            }
            if state.calibrations.len() >= MODELS {
                state.calibrations.pop_first();
            }
            state.calibrations.insert(old, state.calibration);
            state.calibration = model
                .and_then(|m| state.calibrations.remove(m))
                .unwrap_or_default();
        }
        // Else the first turn, or a state stored before models were: its
        // calibration is taken for this model's.
        state.model = model.map(str::to_owned);
        if self.counter.kind() != engine.limits().tokenizer {
            self.counter = engine.counter();
            self.last = None;
            state.last_sent = None;
            if let Some(carry) = state.carryover.as_mut() {
                carry.recount(&mut self.counter);
            }
        }
    }

    /// Answers a call of the recall tool in this conversation: an original
    /// by its handle, or a search of every original its compactions kept
    /// (see [`Engine::recall_in`]; `scope`: a shared proxy's tenant and
    /// session).
    pub fn recall(
        &self,
        engine: &Engine,
        arguments: &serde_json::Value,
        scope: Option<&crate::recall::RecallScope>,
    ) -> crate::recall::Answer {
        engine.recall_in(arguments, scope, &self.state.handles)
    }

    /// Whether a turn can take `input`: a history that leaves out its first
    /// messages ([`Input::after`]) needs a carried compaction that covers
    /// them and goes on into what the history holds.
    pub fn takes(&self, input: &Input<'_>) -> bool {
        let left_out = &input.left_out;
        let covers = |c: &Carryover| {
            c.source().len >= left_out.len
                && (self.last.as_ref().is_some_and(|s| s.extended_by(input))
                    || c.applies_after(left_out, input.history))
        };
        left_out.len == 0 || input.resent && self.state.carryover.as_ref().is_some_and(covers)
    }

    /// What the input adds to what the thread knows: the history as it goes
    /// out (a carried prefix applied), its tokens and iterations, counting
    /// only what the last turn did not.
    fn measure(&mut self, engine: &Engine, input: &Input<'_>) -> Measured {
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
    fn remember(
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

    /// Does what the input asks with the history as it goes out (a carried
    /// prefix applied), whose tokens and iterations `eval` holds.
    fn act<'c>(
        &mut self,
        engine: &Engine,
        conv: &'c Conversation,
        action: Action,
        mut eval: Eval,
        extends: bool,
    ) -> Result<Outcome<'c>> {
        let usage = self.reported.take();
        let last_sent = self.state.last_sent;
        if let Some(reported) = usage {
            let counted = last_sent.unwrap_or(eval.tokens);
            self.state.calibration.observe(counted, reported);
        }
        // Extending what the provider just counted, its count of that prefix
        // stands for this turn; only what was added is estimated.
        eval.calibration = match (usage, last_sent) {
            (Some(reported), Some(last)) if extends => {
                self.state.calibration.anchored(eval.tokens, last, reported)
            }
            _ => self.state.calibration,
        };
        let id = iteration_id(&conv.messages);
        let size = self.size_event(
            engine,
            eval.tokens,
            conv.messages.len(),
            eval.iterations,
            id,
        );
        engine.emit(&size);
        eval.events.push(size);
        let calibration = eval.calibration;
        let plan = match action {
            Action::Evaluate => {
                let facts = TurnFacts {
                    tokens: calibration.apply(eval.tokens),
                    iterations: eval.iterations,
                    compacted_at: self.state.compacted_at,
                    usage,
                };
                // Compacting only when the agent asks: no trigger fires.
                let fired = (!engine.config.agent.only_on_request)
                    .then(|| {
                        engine
                            .config
                            .trigger
                            .fired(engine.limits.thresholds(), &facts)
                    })
                    .flatten();
                return match fired {
                    Some(reason) => self.compact_for(engine, conv, reason, eval),
                    None => Ok(unchanged(conv, None, eval)),
                };
            }
            Action::Compact(target) => {
                let target = target
                    .or(engine.limits.target)
                    .map(|t| calibration.unapply(t));
                self.plan(engine, calibration, Reason::Forced, target)
            }
            Action::Requested { keep_iterations } => {
                Plan::on_request(eval.tokens, keep_iterations, self.state.focus.clone())
            }
        };
        self.run(engine, conv, &plan, eval)
    }

    /// Compacts for a trigger that fired; skips a compaction that would clear
    /// fewer than `clear_at_least` tokens.
    fn compact_for<'c>(
        &mut self,
        engine: &Engine,
        conv: &'c Conversation,
        reason: Reason,
        eval: Eval,
    ) -> Result<Outcome<'c>> {
        let calibration = eval.calibration;
        let target = engine
            .limits
            .target_for(reason)
            .map(|t| calibration.unapply(t));
        // The cadence counts from this evaluation, whatever it does.
        self.state.compacted_at = eval.iterations;
        let (tokens, its, start) = (eval.tokens, eval.iterations, eval.start);
        let cancel = eval.cancel.clone();
        let mut plan = self.plan(engine, calibration, reason, target);
        plan.ceiling = engine.limits.trigger_tokens.map(|t| calibration.unapply(t));
        if engine.config.budget.summarize_all {
            plan.summarize_all(&engine.config, tokens);
        }
        let mut outcome = self.run(engine, conv, &plan, eval)?;
        // Compared in the provider's units, like the trigger it is kept under.
        let saved = (outcome.report.tokens_before).saturating_sub(outcome.report.tokens_after);
        let cleared = calibration.apply(saved);
        let clear_at_least = engine.limits.clear_at_least;
        let attempts = &outcome.report.attempts;
        let summary_failed = engine.config.summary.skip_on_failure
            && !attempts.is_empty()
            && attempts.iter().all(|a| !a.used())
            && engine
                .limits
                .window
                .is_none_or(|w| calibration.apply(tokens) <= w);
        let skip = if !outcome.report.compacted || reason == Reason::Forced {
            return Ok(outcome);
        } else if summary_failed {
            Event::SummaryFailedSkipped {
                reason,
                attempts: attempts.len(),
            }
        } else if cleared >= clear_at_least {
            return Ok(outcome);
        } else {
            Event::CompactionSkipped {
                reason,
                would_clear: cleared,
                clear_at_least,
            }
        };
        engine.emit(&skip);
        let mut events = std::mem::take(&mut outcome.report.events);
        events.retain(|e| !matches!(e, Event::HistoryCompacted { .. }));
        events.push(skip);
        let eval = Eval {
            tokens,
            calibration,
            iterations: its,
            events,
            start,
            cancel,
        };
        Ok(unchanged(conv, Some(reason), eval))
    }

    /// The configured plan for `reason`, aiming at `target` (abridge's count).
    fn plan(
        &self,
        engine: &Engine,
        calibration: Calibration,
        reason: Reason,
        target: Option<Counted>,
    ) -> Plan {
        let kept_budget = calibration.unapply(engine.limits.kept_budget);
        Plan::configured(
            &engine.config,
            kept_budget,
            reason,
            target,
            self.state.focus.clone(),
        )
    }

    /// Executes a plan; a failure becomes a `compaction_failed` event too.
    fn run<'c>(
        &mut self,
        engine: &Engine,
        conv: &'c Conversation,
        plan: &Plan,
        eval: Eval,
    ) -> Result<Outcome<'c>> {
        let cancel = eval.cancel.clone();
        let mut rewriter = Rewriter {
            engine,
            counter: &mut self.counter,
            name: self.name.as_deref(),
            kept: self.state.briefing.as_ref(),
            key: self.key.as_ref(),
            cancel: &cancel,
        };
        let outcome = rewriter.rewrite(conv, plan, eval).inspect_err(|e| {
            engine.emit(&Event::CompactionFailed {
                error: e.to_string(),
            });
            // The floor a caller may send names originals too: searchable.
            if let Error::CannotShrink {
                smallest: Some(floor),
                ..
            } = e
            {
                self.state.keep_handles(&named_by(engine, floor));
            }
        })?;
        if outcome.report.compacted {
            self.state.compacted_at = iterations(&outcome.conversation.messages).len();
            self.keep_briefing(&outcome);
            self.state.keep_handles(&outcome.report.handles);
        }
        Ok(outcome)
    }

    /// Keeps a new briefing's data for the next chained compaction (a
    /// briefing without data replaces the kept one; none keeps it).
    fn keep_briefing(&mut self, outcome: &Outcome<'_>) {
        let Some(i) = outcome.report.briefing else {
            return;
        };
        let messages = &outcome.conversation.messages;
        self.state.briefing =
            outcome
                .report
                .sheet
                .clone()
                .zip(messages.get(i..=i))
                .map(|(sheet, m)| KeptBriefing {
                    fingerprint: abridge_model::fingerprint(m),
                    sheet,
                });
    }

    /// The `history_size` event for these figures.
    fn size_event(
        &self,
        engine: &Engine,
        tokens: Counted,
        messages: usize,
        its: usize,
        iteration_id: String,
    ) -> Event {
        let calibrated = self.calibrated(tokens);
        Event::HistorySize {
            tokens,
            calibrated_tokens: calibrated,
            messages,
            iterations: its,
            window_fraction: engine
                .limits
                .window
                .map(|w| (calibrated.get() as f64 / w.get() as f64 * 10_000.0).round() / 10_000.0),
            iteration_id,
        }
    }
}

/// The handles `conv` names, and those the originals they name name in
/// turn (a briefing's region holds the placeholders made before it).
fn named_by(engine: &Engine, conv: &Conversation) -> Vec<Handle> {
    let mut todo: Vec<Handle> = conv
        .messages
        .iter()
        .flat_map(|m| m.parts.iter())
        .flat_map(|p| match p {
            abridge_model::Part::ToolResult(r) => Some(r.text().into_owned()),
            p => p.as_text().map(str::to_owned),
        })
        .flat_map(|t| Handle::find_all(&t).collect::<Vec<_>>())
        .collect();
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    while let Some(h) = todo.pop() {
        if !seen.insert(h.clone()) {
            continue;
        }
        if let Some(o) = engine.original(&h) {
            for p in &o.pieces {
                if let crate::recall::Piece::Text { text } = p {
                    todo.extend(Handle::find_all(text));
                }
            }
        }
        out.push(h);
    }
    out
}

impl Seen {
    /// Whether `input` goes on from this turn's history, as its caller says
    /// ([`Input::extending`]) and its length allows.
    fn extended_by(&self, input: &Input<'_>) -> bool {
        let left = input.left_out.len;
        input.extending == Some(self.len)
            && (left..=left + input.history.messages.len()).contains(&self.len)
    }
}

/// Iterations that `added` opens after `before` of them (as
/// [`iterations`] counts them: an assistant message opens one unless it
/// continues the turn before it).
fn opened(before: usize, added: &[Message]) -> usize {
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
