//! A rewrite's end: the history checked, its report and its snapshot.

use std::borrow::Cow;

use std::collections::HashSet;

use abridge_model::{Arguments, Conversation, Part, iterations, validate};
use abridge_summarize::wrapper::unwrap;
use abridge_tokens::Counted;

use super::{Rewriter, Work, written_briefing};
use crate::error::{Error, Result};
use crate::evaluation::Eval;
use crate::event::{Event, iteration_id};
use crate::placeholder;
use crate::plan::Plan;
use crate::recall::{Handle, Original};
use crate::report::{Outcome, Report};
use crate::slot::{self, Slot};
use crate::snapshot::SnapshotData;

impl Rewriter<'_> {
    pub(super) fn finish<'a>(
        &mut self,
        conv: &'a Conversation,
        plan: &Plan,
        mut work: Work,
        mut eval: Eval,
    ) -> Result<Outcome<'a>> {
        self.cancel.check()?;
        self.unname(&mut work);
        let originals = self
            .engine
            .keep_originals(std::mem::take(&mut work.originals));
        let after = Conversation {
            messages: slot::owned(std::mem::take(&mut work.messages)),
            ..conv.clone_envelope()
        };
        guard(conv, &after)?;
        eval.events
            .extend(work.degraded.iter().map(|d| Event::Degraded(*d)));
        let summary_length = written_briefing(work.briefing.as_ref(), &after.messages)
            .map(|i| &after.messages[i])
            .filter(|_| work.summarizer.is_some())
            .and_then(|m| {
                unwrap(&self.engine.facts.wrapper, &m.text_content()).map(|t| t.chars().count())
            });
        let event = Event::HistoryCompacted {
            reason: plan.reason,
            policies: work.runs.clone(),
            messages_before: conv.messages.len(),
            messages_after: after.messages.len(),
            tokens_before: eval.tokens,
            tokens_after: work.total,
            tokens_saved: eval.tokens.saturating_sub(work.total),
            target: plan.target,
            summarizer: work.summarizer.clone(),
            duration_us: eval.start.elapsed().as_micros() as u64,
            iteration: iterations(&conv.messages).len(),
            iteration_id: iteration_id(&conv.messages),
            summary_length,
        };
        self.engine.emit(&event);
        eval.events.push(event);
        let events = std::mem::take(&mut eval.events);
        let mut report = report_of(conv, &after, plan, plan.target, work, &eval, events);
        report.handles = originals.iter().map(|o| o.handle.clone()).collect();
        self.cancel.check()?;
        self.snapshot(conv, &after, &originals, &mut report);
        Ok(Outcome {
            report,
            conversation: Cow::Owned(after),
        })
    }

    /// Without recall, takes the handles this compaction's placeholders
    /// name out of the messages it wrote, and its originals with them (kept
    /// for the refill and the briefing's quoted lines alone).
    pub(super) fn unname(&mut self, work: &mut Work) {
        if work.named || work.originals.is_empty() {
            return;
        }
        self.strip_handles(work);
        work.originals.clear();
        work.briefing = work.briefing.take().map(|(at, _)| (at, 0..0));
    }

    /// About the tokens [`Self::strip_handles`] would free: one handle's
    /// note for each time the messages this compaction wrote name one of
    /// its originals.
    pub(super) fn handle_notes(&mut self, work: &Work) -> Counted {
        let Some(first) = work.originals.first() else {
            return Counted::ZERO;
        };
        let named: HashSet<&Handle> = work.originals.iter().map(|o| &o.handle).collect();
        let mut times = 0;
        let mut count = |text: &str| {
            times += Handle::find_all(text).filter(|h| named.contains(h)).count() as u64;
        };
        for slot in &work.messages {
            let Slot::Changed(m) = slot else {
                continue;
            };
            for p in &m.parts {
                match p {
                    Part::Text(t) => count(&t.text),
                    Part::ToolResult(r) => count(&r.text()),
                    Part::ToolCall(c) => count(&c.arguments.to_json_text()),
                    _ => {}
                }
            }
        }
        let note = self
            .counter
            .count_text(&format!("; recall {}", first.handle));
        Counted::new(note.get() * times)
    }

    /// Takes the handles of the compaction's originals out of the messages
    /// it wrote, counting the messages it changes again.
    pub(super) fn strip_handles(&mut self, work: &mut Work) {
        let named: HashSet<&Handle> = work.originals.iter().map(|o| &o.handle).collect();
        for (i, slot) in work.messages.iter_mut().enumerate() {
            let Slot::Changed(m) = slot else {
                continue;
            };
            let mut changed = false;
            for p in &mut m.parts {
                changed |= unname_part(p, &named);
            }
            if changed {
                let now = self.counter.count_message(m).total();
                work.total = work.total.saturating_sub(work.counts[i]) + now;
                work.counts[i] = now;
            }
        }
    }

    /// Records the snapshot; a failure becomes an event, not an error.
    pub(super) fn snapshot(
        &mut self,
        before: &Conversation,
        after: &Conversation,
        originals: &[std::sync::Arc<Original>],
        report: &mut Report,
    ) {
        let engine = self.engine;
        let recorded = engine.with_store(|store| {
            store.record(&SnapshotData {
                before,
                after,
                config: &engine.config,
                report,
                thread: self.name,
                originals,
            })
        });
        match recorded {
            None => {}
            Some(Ok(id)) => report.snapshot = Some(id),
            Some(Err(error)) => {
                let e = Event::SnapshotFailed {
                    error: error.to_string(),
                };
                engine.emit(&e);
                report.events.push(e);
            }
        }
    }
}

/// The report of a rewrite of `conv` that sends `after`.
pub(super) fn report_of(
    conv: &Conversation,
    after: &Conversation,
    plan: &Plan,
    target: Option<Counted>,
    work: Work,
    eval: &Eval,
    events: Vec<Event>,
) -> Report {
    Report {
        reason: Some(plan.reason),
        compacted: true,
        tokens_before: eval.tokens,
        tokens_after: work.total,
        messages_before: conv.messages.len(),
        messages_after: after.messages.len(),
        tail_iterations: work.tail_n.min(iterations(&after.messages).len()),
        target,
        policies: work.runs,
        summarizer: work.summarizer,
        attempts: work.attempts,
        snapshot: None,
        events,
        duration_us: eval.start.elapsed().as_micros() as u64,
        degraded: work.degraded,
        // The briefing this compaction wrote: not another summary the head
        // holds (an agent's own, from before a resume).
        briefing: written_briefing(work.briefing.as_ref(), &after.messages),
        calibration: eval.calibration,
        sheet: work.sheet,
        handles: Vec::new(),
    }
}

/// Refuses a rewrite that breaks a rule the input did not already break.
pub(super) fn guard(before: &Conversation, after: &Conversation) -> Result<()> {
    let known: Vec<_> = validate(before)
        .into_iter()
        .map(|v| (v.rule.code(), v.id))
        .collect();
    let new: Vec<_> = validate(after)
        .into_iter()
        .filter(|v| !known.contains(&(v.rule.code(), v.id.clone())))
        .collect();
    if new.is_empty() {
        Ok(())
    } else {
        Err(Error::Invalid(new))
    }
}

/// Takes the handles of `named` out of a part's text, its result's texts
/// or its call's arguments; whether it changed.
fn unname_part(p: &mut Part, named: &HashSet<&Handle>) -> bool {
    let in_place = |s: &mut String| match placeholder::unnamed(s, named) {
        Some(t) => {
            *s = t;
            true
        }
        None => false,
    };
    match p {
        Part::Text(t) => in_place(&mut t.text),
        Part::ToolResult(r) => r
            .parts
            .iter_mut()
            .fold(false, |changed, q| unname_part(q, named) | changed),
        Part::ToolCall(c) => match &mut c.arguments {
            Arguments::Json(s) | Arguments::Custom(s) => in_place(s),
            Arguments::Value(v) => unname_value(v, named),
        },
        _ => false,
    }
}

/// [`unname_part`] over the strings of a JSON value.
fn unname_value(v: &mut serde_json::Value, named: &HashSet<&Handle>) -> bool {
    match v {
        serde_json::Value::String(s) => match placeholder::unnamed(s, named) {
            Some(t) => {
                *s = t;
                true
            }
            None => false,
        },
        serde_json::Value::Array(a) => a
            .iter_mut()
            .fold(false, |changed, x| unname_value(x, named) | changed),
        serde_json::Value::Object(o) => o
            .values_mut()
            .fold(false, |changed, x| unname_value(x, named) | changed),
        _ => false,
    }
}
