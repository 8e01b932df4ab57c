//! What the proxy offers the agent itself (`[agent]`, mycoder's design): a
//! status note every few requests of a session, and the compact tool,
//! whose calls it answers in the response's rounds by compacting the
//! session as the agent asked.

use abridge::Input;
use abridge::agent::{self, CompactRequest, Status};
use abridge::model::Wire;
use abridge::recall::Answer;
use abridge::tokens::Calibrated;
use axum::body::Bytes;
use axum::http::Uri;

use crate::recall::Compacted;
use crate::session::{SessionState, Shared};

use super::{Context, decode_whole};

/// What a request's body offers the agent beside the client's own.
#[derive(Debug, Default)]
pub(super) struct Offer {
    /// A status note for the end of the history, when one is due.
    pub(super) status: Option<String>,
    /// The compact tool's name, when it is offered.
    pub(super) compact: Option<String>,
}

impl Offer {
    /// What session `s` offers on a request of `tokens` (sent): the
    /// compact tool when configured, and a note on every
    /// `status_every`-th request.
    pub(super) fn of(s: &SessionState, tokens: Calibrated) -> Offer {
        let agent = &s.engine.config().agent;
        let compact = agent.compact_tool.then(|| agent.tool.clone());
        let every = agent.status_every as u64;
        let due = every > 0 && s.thread.turns() > 0 && s.thread.turns() % every == 0;
        let status = due.then(|| {
            let limits = s.engine.limits();
            Status {
                tokens,
                window: limits.window,
                price: limits.price,
                spent: s.usage.spent(),
                tool: compact.as_deref(),
                hint_at: agent.hint_at,
            }
            .text()
        });
        Offer { status, compact }
    }

    /// Whether it changes the body.
    pub(super) fn any(&self) -> bool {
        self.status.is_some() || self.compact.is_some()
    }
}

impl Context<'_> {
    /// Compacts `session` as the agent asked in a response to the request
    /// `bytes`: its history (decoded again) before the kept messages
    /// becomes a briefing, carried to the session's next requests. The
    /// body to go on with and what the tool answers.
    pub(crate) fn compact_requested(
        &self,
        session: &Shared,
        (wire, uri, bytes): (Wire, &Uri, &Bytes),
        req: CompactRequest,
    ) -> Compacted {
        let unchanged = |text: String, is_error: bool| Compacted {
            body: None,
            searchable: None,
            answer: Answer::note(text, is_error),
        };
        let conv = match decode_whole(wire, uri, bytes) {
            Ok(c) => c,
            Err(e) => return unchanged(format!("Could not compact: {e}"), true),
        };
        let mut guard = session.blocking_lock();
        let s = &mut *guard;
        let kept = req.keep_iterations(&conv.messages);
        let focus = s.thread.state().focus.clone();
        s.thread.set_focus(req.focus);
        let input = Input::requested(&conv, kept)
            .resent()
            .cancelled_by(self.cancel);
        let outcome = s.thread.turn(&s.engine, input);
        s.thread.set_focus(focus);
        let (text, is_error) = agent::answer(&outcome, kept);
        let compacted = match outcome {
            Ok(o) if o.report.compacted => {
                self.account(s, Some(&o.report));
                o.conversation.into_owned()
            }
            _ => return unchanged(text, is_error),
        };
        // The tools stay offered; a note was this request's already.
        let offer = Offer {
            status: None,
            compact: Some(s.engine.config().agent.tool.clone()),
        };
        let (_, recalling) = self.encode_recalling(s, compacted, &offer, true);
        match recalling {
            Some(r) => Compacted {
                body: Some(r.body),
                searchable: Some(r.searchable),
                answer: Answer::note(text, false),
            },
            None => unchanged(
                "Could not compact: the compacted history did not encode. No changes made.".into(),
                true,
            ),
        }
    }
}
