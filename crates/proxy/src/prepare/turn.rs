//! The turn: the session's thread run on the request's history, the body
//! encoded (with the recall tool when it is on), and the overflow retry.

use std::borrow::Cow;
use std::sync::Arc;

use abridge::Input;
use abridge::model::{Conversation, Wire, encode};
use abridge::tokens::{Calibrated, Counted};
use abridge_store::RequestRecord;
use axum::body::Bytes;
use axum::http::Uri;

use crate::cache::cap_breakpoints;
use crate::metrics::Passthrough;
use crate::prepared::{Prepared, Turn};
use crate::recall::{self, Ours, Recalling};
use crate::session::{SessionState, Shared};

use super::continuation::Continued;
use super::offer::Offer;
use super::{Context, decode_whole};

impl Context<'_> {
    /// One turn of a session, on a history that goes on from its last as
    /// `continued` says.
    pub(super) fn turn(
        &self,
        session: &Shared,
        state: &mut SessionState,
        conv: &Conversation,
        continued: &Continued,
    ) -> Prepared {
        state.used = std::time::Instant::now();
        self.follow_model(state, conv);
        if let Some(u) = state.usage.take() {
            state.thread.reported(u);
        }
        let background = self.take_background(state, conv, continued);
        let s = &mut *state;
        let input = continued.input(conv).cancelled_by(self.cancel);
        let turned = s.thread.turn(&s.engine, input);
        if let Err(abridge::Error::Cancelled) = turned {
            // Stopped part-way: nothing changed, nothing to account.
            return self.abandoned();
        }
        let Outgoing {
            out,
            report,
            warning,
            sent,
        } = self.outgoing(s, turned, background, conv, continued);
        if let Some(p) = s.preparer.as_mut() {
            // A history that leaves messages out is prepared from the
            // thread's state, whose carried compaction covers them.
            let from =
                (continued.left_out.len > 0).then(|| (&continued.left_out, s.thread.state()));
            p.poll_after(conv, from, s.thread.calibrated(sent));
        }
        self.account(s, report.as_ref());
        if self.cancel.is_cancelled() {
            // The turn finished (accounted and saved: a carried compaction
            // serves the client's retry), but nobody waits for the body.
            return self.abandoned();
        }
        let rewritten = out.is_some();
        // The note tells the agent what the model is sent.
        let shown = match sent == Counted::ZERO {
            true => s.thread.client_tokens(),
            false => sent,
        };
        let offer = Offer::of(s, s.thread.calibrated(shown));
        let (body, recall) = match out {
            Some(c) => self.encode_recalling(s, c, &offer, true),
            // What the agent is offered goes in the history as sent.
            None if offer.any() && continued.left_out.len == 0 => {
                self.encode_recalling(s, conv.clone(), &offer, false)
            }
            None => (None, None),
        };
        if !rewritten && warning.is_none() {
            self.metrics.passthrough(Passthrough::Unchanged);
        }
        let tokens = state.thread.calibrated(sent);
        let (basis, request) = record(state, tokens, rewritten, report.as_ref());
        Prepared::Turn(Box::new(Turn {
            body,
            session: session.clone(),
            id: state.id.clone(),
            usage: state.usage.clone(),
            report,
            warning,
            tokens,
            request,
            recall,
            basis,
        }))
    }

    /// A compaction prepared in the background, taken now: this turn's
    /// compaction, counted, signalled and logged as one. Discarded ones are
    /// charged.
    fn take_background(
        &self,
        state: &mut SessionState,
        conv: &Conversation,
        continued: &Continued,
    ) -> Option<abridge::Report> {
        let mut background = None;
        if let Some(p) = state.preparer.as_mut() {
            if let Some(prepared) = p.take_prepared_after(conv, &continued.left_out) {
                state.thread.adopt(prepared.carryover);
                background = Some(prepared.report);
            }
            for a in p.take_discarded() {
                self.charge(state, &a);
            }
        }
        background
    }

    /// What goes out after the engine's turn, what it reported, why, and
    /// its tokens: the compacted history; the floor when even that is over
    /// the target; the carried compaction when compacting failed.
    fn outgoing(
        &self,
        s: &SessionState,
        turned: abridge::Result<abridge::Outcome<'_>>,
        background: Option<abridge::Report>,
        conv: &Conversation,
        continued: &Continued,
    ) -> Outgoing {
        match turned {
            Ok(o) => {
                let sent = o.report.tokens_after;
                // Sending the background's compaction is this turn's.
                let report = match background {
                    Some(b) if !o.report.compacted && matches!(o.conversation, Cow::Owned(_)) => b,
                    _ => o.report,
                };
                let out = match o.conversation {
                    Cow::Owned(c) => Some(c),
                    Cow::Borrowed(_) => None,
                };
                Outgoing {
                    out,
                    report: Some(report),
                    warning: None,
                    sent,
                }
            }
            Err(abridge::Error::CannotShrink {
                smallest: Some(floor),
                floor: tokens,
                target,
                report,
                ..
            }) => {
                // Over the target even at its floor: the floor goes, not the
                // whole, accounted like any compaction (its snapshot, the
                // summarizers it paid, the rungs it took).
                self.metrics.over_target();
                let why = format!(
                    "over the target ({target}) even at its floor ({tokens} tokens): sent at its floor"
                );
                Outgoing {
                    out: Some(*floor),
                    report: report.map(|r| *r),
                    warning: Some(why),
                    sent: tokens,
                }
            }
            Err(e) => Outgoing {
                out: s
                    .thread
                    .carryover()
                    .and_then(|c| c.apply_after(&continued.left_out, conv)),
                report: None,
                warning: Some(format!("compaction failed: {e}")),
                sent: Counted::ZERO,
            },
        }
    }

    /// The history to send (`rewritten`: compacted, or carrying a
    /// compaction), with the recall tool declared when it is rewritten and
    /// the session's engine keeps originals, what `offer` gives the agent,
    /// and what answering the proxy's tools needs.
    pub(super) fn encode_recalling(
        &self,
        s: &SessionState,
        mut conv: Conversation,
        offer: &Offer,
        rewritten: bool,
    ) -> (Option<Bytes>, Option<Recalling>) {
        let recall = match rewritten {
            true => s.engine.recall_tool(),
            false => None,
        }
        .filter(|t| recall::declare(&mut conv, s.wire, t));
        let family = conv.family;
        let compact = offer.compact.clone().filter(|name| {
            recall::declare_tool(&mut conv, s.wire, name, || {
                abridge::agent::tool_named(family, name)
            })
        });
        if let Some(text) = &offer.status {
            abridge::agent::add_status(&mut conv, text.clone());
        }
        let Some((bytes, value)) = self.encoded(conv) else {
            return (None, None);
        };
        let tool = Ours {
            recall: recall.map(|t| t.name),
            compact,
        };
        let api = recall::on(s.wire).filter(|_| tool.any());
        let recalling = api.map(|api| Recalling {
            engine: s.engine.clone(),
            scope: s.recall_scope(),
            searchable: s.thread.state().handles.as_slice().into(),
            tool,
            compact: None,
            sent_len: value[s.wire.history_key()].as_array().map_or(0, Vec::len),
            max_rounds: s.engine.config().recall.max_rounds,
            api,
            body: value,
            answered: Arc::default(),
        });
        (Some(bytes), recalling)
    }

    /// Compacts a session's history harder after the upstream refused
    /// `tokens` as too long; the body to retry with.
    /// The body `bytes` (sent as `tokens`, which the upstream refused as too
    /// long) compacted harder, for one retry. It is decoded again rather
    /// than kept decoded while the upstream answers: a decoded history
    /// takes many times its body, and a turn waits on the upstream long.
    pub(crate) fn shrink(
        &self,
        session: &Shared,
        (wire, uri, bytes): (Wire, &Uri, &Bytes),
        tokens: Calibrated,
    ) -> Option<Bytes> {
        let conv = decode_whole(wire, uri, bytes).ok()?;
        let mut guard = session.blocking_lock();
        let s = &mut *guard;
        let target = tokens.scaled(self.config.serve.overflow_ratio);
        let input = Input::compact_to(&conv, target.max(Calibrated::new(1)))
            .resent()
            .cancelled_by(self.cancel);
        match s.thread.turn(&s.engine, input) {
            Ok(o) => {
                let c = o.conversation.into_owned();
                self.metrics.retry();
                self.save(s);
                self.encode(c)
            }
            Err(abridge::Error::CannotShrink {
                smallest: Some(floor),
                ..
            }) => {
                // Its floor is the smallest valid body: worth the one retry.
                self.metrics.retry();
                self.metrics.over_target();
                self.encode(*floor)
            }
            Err(e) => {
                tracing::warn!(session = %s.id, error = %e, "cannot compact harder after an overflow");
                None
            }
        }
    }

    pub(super) fn encode(&self, conv: Conversation) -> Option<Bytes> {
        self.encoded(conv).map(|(bytes, _)| bytes)
    }

    /// The body of a history to send, and its JSON (to continue it by).
    pub(super) fn encoded(&self, mut conv: Conversation) -> Option<(Bytes, serde_json::Value)> {
        cap_breakpoints(&mut conv);
        let encoded = encode(&conv).map_err(|e| e.to_string()).and_then(|v| {
            let bytes = serde_json::to_vec(&v).map_err(|e| e.to_string())?;
            Ok((Bytes::from(bytes), v))
        });
        match encoded {
            Ok(e) => Some(e),
            Err(e) => {
                tracing::warn!(error = %e, "cannot encode the compacted history; sending it as sent");
                None
            }
        }
    }
}

/// What a turn sends: the history when it was rewritten (or carries a
/// compaction), the engine's report, why it is not what was planned, and
/// its tokens.
struct Outgoing {
    out: Option<Conversation>,
    report: Option<abridge::Report>,
    warning: Option<String>,
    sent: Counted,
}

/// The request's row for the log and the basis its savings are priced on.
fn record(
    state: &mut SessionState,
    tokens: Calibrated,
    rewritten: bool,
    report: Option<&abridge::Report>,
) -> (crate::account::Basis, RequestRecord) {
    let limits = state.engine.limits();
    let client = state.thread.calibrated(state.thread.client_tokens());
    let basis = crate::account::Basis {
        price: limits.price,
        cached_before: std::mem::replace(&mut state.last_client, client),
        window: limits.window,
    };
    let request = RequestRecord {
        source: state.id.0.clone(),
        at: String::new(),
        model: state.engine.config().model.clone(),
        tokens,
        usage: None,
        compacted: rewritten,
        snapshot: report.and_then(|r| r.snapshot),
        trigger: limits.trigger_tokens,
        target: limits.target,
        recalls: 0,
        account: abridge_store::Accounting {
            tenant: state.tenant.id.as_str().to_owned(),
            client_tokens: client,
            over_window: basis.over_window(client),
            ..Default::default()
        },
    };
    (basis, request)
}
