//! What a turn does once measured: the triggers checked, a plan made
//! and run, the briefing kept for the next one, the size event.

use abridge_model::{Conversation, iterations};
use abridge_tokens::Counted;

use super::Thread;
use crate::calibration::Calibration;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::evaluation::{Eval, unchanged};
use crate::event::{Event, iteration_id};
use crate::input::Action;
use crate::plan::Plan;
use crate::recall::Handle;
use crate::report::Outcome;
use crate::rewrite::Rewriter;
use crate::summarize_step::KeptBriefing;
use crate::trigger::{Reason, TurnFacts};

impl Thread {
    /// Does what the input asks with the history as it goes out (a carried
    /// prefix applied), whose tokens and iterations `eval` holds.
    pub(super) fn act<'c>(
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
    pub(super) fn compact_for<'c>(
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
    pub(super) fn plan(
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
    pub(super) fn run<'c>(
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
    pub(super) fn keep_briefing(&mut self, outcome: &Outcome<'_>) {
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
    pub(super) fn size_event(
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
pub(super) fn named_by(engine: &Engine, conv: &Conversation) -> Vec<Handle> {
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
