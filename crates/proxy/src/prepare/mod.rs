//! What the proxy makes of one conversation request: the session it
//! belongs to, the carried-over compaction applied, a compaction when a
//! trigger fires, and the body to send.

mod continuation;
mod lifecycle;
mod offer;
mod turn;

use std::sync::Arc;

use abridge::Cancel;
use abridge::model::{Conversation, Wire, decode_as, validate};
use axum::http::{HeaderMap, Uri};
use tokio::sync::OwnedMutexGuard;

use continuation::Continued;

use crate::config::ProxyConfig;
use crate::engines::Engines;
use crate::metrics::{Decoded, Metrics, Passthrough};
use crate::native::{provider_compaction, server_state};
use crate::prepared::{AsSent, Prepared};
use crate::session::{RawState, SessionId, SessionState, Sessions, Shared, quick_key};
use crate::store::SharedStore;
use crate::tenant::{Secret, TenantId};

/// Everything a request needs from the running proxy.
pub(crate) struct Context<'a> {
    /// Configuration.
    pub(crate) config: &'a ProxyConfig,
    /// Sessions in memory.
    pub(crate) sessions: &'a Sessions,
    /// The engines sessions share.
    pub(crate) engines: &'a Engines,
    /// The store, if any.
    pub(crate) store: Option<&'a SharedStore>,
    /// Metrics.
    pub(crate) metrics: &'a Metrics,
    /// The runtime, for background briefings.
    pub(crate) handle: &'a tokio::runtime::Handle,
    /// What tenants are derived with.
    pub(crate) secret: &'a Secret,
    /// Set once the request's client has left: its turn stops at the next
    /// check, and nothing is encoded for it.
    pub(crate) cancel: &'a Cancel,
}

impl Context<'_> {
    /// Prepares a conversation request in `wire`. Runs on a blocking thread.
    pub(crate) fn prepare(
        &self,
        wire: Wire,
        headers: &HeaderMap,
        uri: &Uri,
        bytes: &[u8],
    ) -> Prepared {
        let query = uri.query();
        let tenant = self.secret.tenant_of(headers, query);
        let quick = quick_key(&tenant, headers, bytes);
        if let Some(p) = self.continued(quick, &tenant, (wire, uri.path()), bytes) {
            return p;
        }
        self.metrics.decoded(Decoded::Whole);
        let conv = match decode_whole(wire, uri, bytes) {
            Ok(c) => c,
            Err(why) => return self.unusable(why),
        };
        if self.cancel.is_cancelled() {
            return self.abandoned();
        }
        // Before validation: calls answered here may be in the stored part.
        if let Some(field) = server_state(&conv) {
            return self.held_upstream(field);
        }
        if let Some(v) = validate(&conv).first() {
            return self.unusable(format!("conversation is not valid: {v}"));
        }
        let id = SessionId::of(&tenant, headers, &conv);
        if let Some(how) = provider_compaction(&conv) {
            return self.hand_over(id, how);
        }
        let (session, mut guard) = match self.locked(id, tenant, &conv) {
            Ok(locked) => locked,
            Err(e) => return self.unusable(e),
        };
        self.refresh_if_shared(&mut guard);
        let whole = Continued::whole();
        let prepared = self.turn(&session, &mut guard, &conv, &whole);
        let raw = RawState::of(bytes, uri.path(), wire, Arc::new(conv));
        self.keep_raw(&mut guard, raw);
        self.sessions.set_quick(quick, guard.id.clone());
        prepared
    }

    /// Session `id`, locked: the one in memory, or opened (and stored
    /// state taken over) when it is not, or when it left memory while this
    /// request waited for it.
    fn locked(
        &self,
        id: SessionId,
        tenant: TenantId,
        conv: &Conversation,
    ) -> Result<(Shared, OwnedMutexGuard<SessionState>), String> {
        if let Some(session) = self.sessions.get(&id) {
            let guard = session.clone().blocking_lock_owned();
            // Ids are derived from the tenant: another's is a collision,
            // and its state is never this request's.
            if guard.tenant.id != tenant {
                return Err(format!("session {id} belongs to another key"));
            }
            if !guard.spilled {
                return Ok((session, guard));
            }
        }
        let session = self.open(id, tenant, conv)?;
        let guard = session.clone().blocking_lock_owned();
        Ok((session, guard))
    }

    /// The provider summarizes this conversation itself: its history is
    /// the provider's to shorten, and goes as sent. Said once per session in
    /// the log, on every such request in a metric and a header.
    fn hand_over(&self, id: SessionId, how: &str) -> Prepared {
        self.metrics.passthrough(Passthrough::ProviderNative);
        if self.sessions.first_handover(&id) {
            tracing::info!(session = %id, how, "the provider's own compaction is in charge; forwarding this session's history as sent");
        }
        Prepared::AsSent(AsSent {
            why: format!("provider compaction in charge ({how})"),
            handover: Some(id),
        })
    }

    /// A Responses request that continues a history the provider stores
    /// (`field`): the body holds only what is new, and goes as sent.
    fn held_upstream(&self, field: &str) -> Prepared {
        self.metrics.passthrough(Passthrough::ServerState);
        tracing::debug!(field, "history held by the provider; forwarding as sent");
        Prepared::as_sent(format!("history held by the provider ({field})"))
    }

    /// A request whose client left before it was ready.
    fn abandoned(&self) -> Prepared {
        self.metrics.abandoned();
        tracing::debug!("the client left before its request was ready; its compaction stopped");
        Prepared::as_sent("the client left")
    }

    /// A body the proxy cannot work with: forwarded as sent, or refused.
    fn unusable(&self, why: String) -> Prepared {
        tracing::warn!(%why, "forwarding a request as sent");
        self.metrics.passthrough(Passthrough::Undecodable);
        match self.config.serve.strict {
            true => Prepared::Refused(why),
            false => Prepared::as_sent(why),
        }
    }
}

/// The conversation of a whole body, as the client sent it.
pub(super) fn decode_whole(wire: Wire, uri: &Uri, bytes: &[u8]) -> Result<Conversation, String> {
    let mut conv = match decode_as(bytes, Some(wire.format())) {
        Ok(mut convs) if convs.len() == 1 => convs.remove(0),
        Ok(_) => return Err("not one conversation".into()),
        Err(e) => return Err(format!("body does not decode: {e}")),
    };
    if conv.model.is_none() {
        // Gemini names the model in the path (it is not written back).
        conv.model = crate::route::gemini_conversation(uri.path()).map(str::to_owned);
    }
    Ok(conv)
}
