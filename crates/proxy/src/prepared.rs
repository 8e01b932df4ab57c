//! What preparing one conversation request came to: the request goes as
//! the client sent it, is refused, or is a turn of a session with the body
//! to send and what the response's end must do.

use std::sync::Arc;

use abridge::Report;
use abridge::tokens::Calibrated;
use abridge_store::RequestRecord;
use axum::body::Bytes;

use crate::recall::Recalling;
use crate::session::{SessionId, Shared};
use crate::usage::LastUsage;

/// The outcome of preparing one request.
#[derive(Debug)]
pub(crate) enum Prepared {
    /// It goes as the client sent it.
    AsSent(AsSent),
    /// It is refused (`[serve] strict`): why.
    Refused(String),
    /// A turn of a session.
    Turn(Box<Turn>),
}

/// Why a request goes as the client sent it.
#[derive(Debug)]
pub(crate) struct AsSent {
    /// The reason (the `x-abridge-warning` header).
    pub(crate) why: String,
    /// The session whose history the provider's own compaction keeps, when
    /// that is the reason.
    pub(crate) handover: Option<SessionId>,
}

/// A turn of a session: what goes upstream and what its response feeds.
#[derive(Debug)]
pub(crate) struct Turn {
    /// The body to send instead of the client's (`None`: the client's bytes).
    pub(crate) body: Option<Bytes>,
    /// The session.
    pub(crate) session: Shared,
    /// Its id.
    pub(crate) id: SessionId,
    /// Where the response's usage goes.
    pub(crate) usage: Arc<LastUsage>,
    /// What the engine did, when it ran to the end.
    pub(crate) report: Option<Report>,
    /// What went wrong on the way, when something did.
    pub(crate) warning: Option<String>,
    /// Tokens of what is sent, in the provider's units.
    pub(crate) tokens: Calibrated,
    /// The request log's row (its usage filled when the response ends).
    pub(crate) request: RequestRecord,
    /// The body declares the recall tool: what answering it needs.
    pub(crate) recall: Option<Recalling>,
    /// What pricing it needs beside its row.
    pub(crate) basis: crate::account::Basis,
}

impl Prepared {
    /// Goes as sent, for `why`.
    pub(crate) fn as_sent(why: impl Into<String>) -> Prepared {
        Prepared::AsSent(AsSent {
            why: why.into(),
            handover: None,
        })
    }

    /// The turn, when it is one.
    pub(crate) fn turn(&self) -> Option<&Turn> {
        match self {
            Prepared::Turn(t) => Some(t),
            _ => None,
        }
    }

    /// The body to send instead of the client's, if any.
    pub(crate) fn body(&self) -> Option<&Bytes> {
        self.turn().and_then(|t| t.body.as_ref())
    }

    /// The session the response belongs to, when the proxy knows it.
    pub(crate) fn session_id(&self) -> Option<&SessionId> {
        match self {
            Prepared::AsSent(a) => a.handover.as_ref(),
            Prepared::Refused(_) => None,
            Prepared::Turn(t) => Some(&t.id),
        }
    }

    /// Why the request went as it did, when that needs saying.
    pub(crate) fn warning(&self) -> Option<&str> {
        match self {
            Prepared::AsSent(a) => Some(&a.why),
            Prepared::Refused(why) => Some(why),
            Prepared::Turn(t) => t.warning.as_deref(),
        }
    }

    /// Takes what answering the recall tool needs, when the body declares it.
    pub(crate) fn take_recall(&mut self) -> Option<Recalling> {
        match self {
            Prepared::Turn(t) => t.recall.take(),
            _ => None,
        }
    }
}
