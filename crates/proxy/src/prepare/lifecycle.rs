//! A session's life: opened (its stored state taken over), refreshed from
//! the store, following the model each request names, saved, accounted.

use std::sync::Arc;

use abridge::background::Preparer;
use abridge::model::{Conversation, Wire};
use abridge::recall::HandleKey;
use abridge::{Attempt, AttemptOutcome, Report};

use crate::engines::ModelEngines;
use crate::native::cached_content;
use crate::session::{SessionId, SessionState, Shared};
use crate::tenant::TenantId;

use super::Context;

impl Context<'_> {
    /// With replicas sharing the store: the session as the store has it
    /// now (another replica may have moved it on).
    pub(super) fn refresh_if_shared(&self, state: &mut SessionState) {
        if self.store.is_some_and(|s| s.shared()) {
            self.refresh(state);
        }
    }

    /// A session not in memory: resumed from the store, or new.
    pub(super) fn open(
        &self,
        id: SessionId,
        tenant: TenantId,
        conv: &Conversation,
    ) -> Result<Shared, String> {
        let tenant = self.secret.tenant(tenant);
        let engines = self
            .engines
            .of(&self.config.engine, conv, self.store, self.handle)?;
        let key = tenant.key.clone();
        let wire = Wire::of(conv.format);
        if let Some(name) = cached_content(conv) {
            // Said once per session: the session opens once.
            tracing::info!(session = %id, cached_content = name,
                "the session builds on content the server holds: passed through as named, \
                 its own contents compacted, the cached tokens counted through reported usage");
        }
        let mut state = SessionState::new(id, tenant, wire, engines.request.clone());
        state.preparer = self.preparer(&engines, key);
        self.refresh(&mut state);
        let shared = self.sessions.insert(state);
        self.metrics.sessions(self.sessions.len());
        Ok(shared)
    }

    /// What prepares a session's briefings in the background with `engines`.
    pub(super) fn preparer(&self, engines: &ModelEngines, key: HandleKey) -> Option<Preparer> {
        let engine = engines.background.as_ref()?;
        let trigger = engine.limits().trigger_tokens?;
        let soft = trigger.scaled(self.config.serve.soft_fraction);
        Some(Preparer::new(soft, engine.clone()).with_handle_key(key))
    }

    /// Works a session's turn on the engines of the model `conv` names:
    /// a session that switches models is held to each request's own
    /// window, trigger and target (its thread keeps a calibration per model).
    pub(super) fn follow_model(&self, state: &mut SessionState, conv: &Conversation) {
        let engines = match self
            .engines
            .of(&self.config.engine, conv, self.store, self.handle)
        {
            Ok(e) => e,
            Err(e) => {
                tracing::warn!(session = %state.id, error = %e, "cannot build the engine of the request's model; the session's goes on");
                return;
            }
        };
        if Arc::ptr_eq(&engines.request, &state.engine) {
            return;
        }
        tracing::debug!(session = %state.id, from = ?state.engine.config().model,
            to = ?engines.request.config().model, "the session's model changed");
        state.engine = engines.request.clone();
        state.preparer = self.preparer(&engines, state.tenant.key.clone());
    }

    /// Takes over the stored state of a session when it is newer than the
    /// one in memory (a restart, or another replica's compaction).
    pub(super) fn refresh(&self, state: &mut SessionState) {
        let Some(store) = self.store else {
            return;
        };
        // A store that does not answer in time leaves the state in memory as it is.
        let newer = match store.version(&state.id.0) {
            Some(Ok(v)) => v.is_some_and(|v| v != state.version()),
            Some(Err(e)) => {
                tracing::warn!(session = %state.id, error = %e, "cannot read the session's version");
                false
            }
            None => false,
        };
        if !newer {
            return;
        }
        match store.load(&state.id.0) {
            Some(Ok(Some(record))) => {
                state.adopt(record);
                tracing::debug!(session = %state.id, version = state.version(), "session loaded from the store");
            }
            Some(Ok(None)) | None => {}
            Some(Err(e)) => tracing::warn!(session = %state.id, error = %e, "cannot load session"),
        }
    }

    pub(super) fn account(&self, state: &mut SessionState, report: Option<&Report>) {
        let Some(r) = report.filter(|r| r.compacted) else {
            return;
        };
        for d in &r.degraded {
            self.metrics.degraded(d.rung);
        }
        tracing::info!(
            session = %state.id,
            reason = r.reason.map_or("continued", |r| r.as_str()),
            before = r.tokens_before.get(),
            after = r.tokens_after.get(),
            "compacted"
        );
        self.metrics
            .compaction(r.reason, r.tokens_before, r.tokens_after);
        for a in &r.attempts {
            self.metrics
                .summarizer(matches!(a.outcome, AttemptOutcome::Used { .. }));
            self.charge(state, a);
        }
        self.save(state);
    }

    /// Adds what a summarizer attempt cost, when its provider said, to the
    /// session's tenant's sums.
    pub(super) fn charge(&self, state: &SessionState, a: &Attempt) {
        if let Some(u) = &a.usage {
            let cost = state.engine.attempt_cost(a);
            let tenant = state.tenant.id.as_str();
            self.metrics
                .accounts
                .summarized(tenant, &a.summarizer, u, cost);
        }
    }

    pub(super) fn save(&self, state: &mut SessionState) {
        let Some(store) = self.store else {
            return;
        };
        store.save(state.record(), state.version.clone());
    }
}
