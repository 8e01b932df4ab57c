//! What the proxy makes of one conversation request: the session it
//! belongs to, the carried-over compaction applied, a compaction when a
//! trigger fires, and the body to send.

use std::borrow::Cow;
use std::sync::Arc;

use abridge::background::Preparer;
use abridge::model::{
    Conversation, Wire, decode_as, decode_wire_messages, encode, fingerprint, validate,
};
use abridge::recall::HandleKey;
use abridge::tokens::{Calibrated, Counted};
use abridge::{AttemptOutcome, Cancel, Input, PrefixKey, Report, Thread};
use abridge_store::RequestRecord;
use axum::body::Bytes;
use axum::http::{HeaderMap, Uri};
use tokio::sync::OwnedMutexGuard;
use xxhash_rust::xxh3::Xxh3;

use crate::cache::cap_breakpoints;
use crate::config::ProxyConfig;
use crate::engines::{Engines, ModelEngines};
use crate::metrics::{Decoded, Metrics, Passthrough};
use crate::native::{cached_content, is_compaction_block, provider_compaction, server_state};
use crate::prepared::{AsSent, Prepared, Turn};
use crate::raw::{messages_from, same_post};
use crate::recall::{self, Recalling};
use crate::session::{RawState, SessionId, SessionState, Sessions, Shared, quick_key, tail_of};
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

    /// The next request of a session whose history it extends, recognised
    /// by its bytes: only the messages it added (and the newest ones it
    /// rewrote, when it moved a cache marker) are decoded.
    fn continued(
        &self,
        quick: u64,
        tenant: &TenantId,
        (wire, path): (Wire, &str),
        bytes: &[u8],
    ) -> Option<Prepared> {
        for session in self.sessions.by_quick(quick) {
            // A session busy with another request is not this one's.
            let Ok(mut guard) = session.clone().try_lock_owned() else {
                continue;
            };
            if guard.spilled || guard.tenant.id != *tenant {
                continue;
            }
            let Some(resume) = resume_point(&guard, (wire, path), bytes) else {
                continue;
            };
            return self.take_added(&session, &mut guard, (wire, path), bytes, resume);
        }
        None
    }

    /// A turn of a session whose last body `bytes` goes on from.
    fn take_added(
        &self,
        session: &Shared,
        state: &mut SessionState,
        (wire, path): (Wire, &str),
        bytes: &[u8],
        resume: Resume,
    ) -> Option<Prepared> {
        let raw = state.raw.as_ref()?;
        let (start, index, first_is_value, kept) = match resume {
            Resume::Appended => (
                raw.shape.prefix_end,
                raw.shape.count,
                false,
                &raw.shape.starts[..],
            ),
            Resume::Rewritten(k) => (
                raw.shape.starts[k],
                raw.shape.index_of(k),
                true,
                &raw.shape.starts[..k],
            ),
        };
        let (values, shape) = messages_from(bytes, start, index, first_is_value, kept)?;
        if !same_post(&bytes[shape.post.clone()], &raw.post) {
            return None;
        }
        let decoded = decode_wire_messages(wire, values, index).ok()?;
        if decoded
            .iter()
            .flat_map(|m| &m.parts)
            .any(is_compaction_block)
        {
            // The provider's own compaction takes over: the full path says so.
            return None;
        }
        // Messages sent again must be the same ones, cache markers aside.
        let held = &raw.held;
        let at = held.index(index)?;
        let again = held.history.messages.len().checked_sub(at)?;
        if decoded.len() < again
            || fingerprint(&decoded[..again]) != fingerprint(&held.history.messages[at..])
        {
            return None;
        }
        let continued = Continued {
            unchanged: held.len(),
            left_out: held.left_out,
        };
        let mut held = state.raw.take()?.held;
        let history = Arc::make_mut(&mut held.history);
        history.messages.truncate(at);
        history.messages.extend(decoded);
        self.refresh_if_shared(state);
        if !continued.valid(&state.thread, &held.history) {
            // The full decode says what is wrong (or, when what the
            // history left out is no longer carried, takes it whole).
            return None;
        }
        self.metrics.decoded(Decoded::Added);
        let prepared = self.turn(session, state, &held.history, &continued);
        self.keep_raw(state, Some(RawState::new(bytes, path, shape, held)));
        Some(prepared)
    }

    /// Keeps a session's last body for its next request, within the
    /// budget, without what its carried compaction covers.
    fn keep_raw(&self, state: &mut SessionState, mut raw: Option<RawState>) {
        if let (Some(raw), Some(carry)) = (raw.as_mut(), state.thread.carryover()) {
            raw.leave_out(carry.source().len);
        }
        let (held, over) = self.sessions.keep_raw(state, raw);
        self.metrics.session_memory(held);
        if over {
            self.sessions.over_budget.notify_one();
        }
    }

    fn refresh_if_shared(&self, state: &mut SessionState) {
        if self.store.is_some_and(|s| s.shared()) {
            self.refresh(state);
        }
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

    /// A session not in memory: resumed from the store, or new.
    fn open(&self, id: SessionId, tenant: TenantId, conv: &Conversation) -> Result<Shared, String> {
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
    fn preparer(&self, engines: &ModelEngines, key: HandleKey) -> Option<Preparer> {
        let engine = engines.background.as_ref()?;
        let trigger = engine.limits().trigger_tokens?;
        let soft = trigger.scaled(self.config.serve.soft_fraction);
        Some(Preparer::new(soft, engine.clone()).with_handle_key(key))
    }

    /// Works a session's turn on the engines of the model `conv` names:
    /// a session that switches models is held to each request's own
    /// window, trigger and target (its thread keeps a calibration per model).
    fn follow_model(&self, state: &mut SessionState, conv: &Conversation) {
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
    fn refresh(&self, state: &mut SessionState) {
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

    /// One turn of a session, on a history that goes on from its last as
    /// `continued` says.
    fn turn(
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
        if let Some(p) = state.preparer.as_mut()
            && let Some(carry) = p.take_carryover_after(conv, &continued.left_out)
        {
            state.thread.adopt(carry);
        }
        let s = &mut *state;
        let input = continued.input(conv).cancelled_by(self.cancel);
        let turned = s.thread.turn(&s.engine, input);
        if let Err(abridge::Error::Cancelled) = turned {
            // Stopped part-way: nothing changed, nothing to account.
            return self.abandoned();
        }
        // What goes out, what the engine reported, why, and its tokens.
        let (out, report, warning, sent) = match turned {
            Ok(o) => {
                let sent = o.report.tokens_after;
                match o.conversation {
                    Cow::Owned(c) => (Some(c), Some(o.report), None, sent),
                    Cow::Borrowed(_) => (None, Some(o.report), None, sent),
                }
            }
            Err(abridge::Error::CannotShrink {
                smallest: Some(floor),
                floor: tokens,
                target,
                ..
            }) => {
                // Over the target even at its floor: the floor goes, not the whole.
                self.metrics.over_target();
                let why = format!(
                    "over the target ({target}) even at its floor ({tokens} tokens): sent at its floor"
                );
                (Some(*floor), None, Some(why), tokens)
            }
            Err(e) => {
                let carried = s
                    .thread
                    .carryover()
                    .and_then(|c| c.apply_after(&continued.left_out, conv));
                (
                    carried,
                    None,
                    Some(format!("compaction failed: {e}")),
                    Counted::ZERO,
                )
            }
        };
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
        let (body, recall) = match out {
            Some(c) => self.encode_recalling(s, c),
            None => (None, None),
        };
        if body.is_none() && warning.is_none() {
            self.metrics.passthrough(Passthrough::Unchanged);
        }
        let tokens = state.thread.calibrated(sent);
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
            compacted: body.is_some(),
            snapshot: report.as_ref().and_then(|r| r.snapshot),
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

    /// The compacted history to send, with the recall tool declared when
    /// the session's engine keeps originals, and what answering it needs.
    fn encode_recalling(
        &self,
        s: &SessionState,
        mut conv: Conversation,
    ) -> (Option<Bytes>, Option<Recalling>) {
        let tool = s
            .engine
            .recall_tool()
            .filter(|t| recall::declare(&mut conv, s.wire, t));
        let Some((bytes, value)) = self.encoded(conv) else {
            return (None, None);
        };
        let api = recall::on(s.wire);
        let recalling = tool.zip(api).map(|(tool, api)| Recalling {
            engine: s.engine.clone(),
            scope: s.recall_scope(),
            searchable: s.thread.state().handles.as_slice().into(),
            tool: tool.name,
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

    fn account(&self, state: &mut SessionState, report: Option<&Report>) {
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
        }
        self.save(state);
    }

    fn save(&self, state: &mut SessionState) {
        let Some(store) = self.store else {
            return;
        };
        store.save(state.record(), state.version.clone());
    }

    fn encode(&self, conv: Conversation) -> Option<Bytes> {
        self.encoded(conv).map(|(bytes, _)| bytes)
    }

    /// The body of a history to send, and its JSON (to continue it by).
    fn encoded(&self, mut conv: Conversation) -> Option<(Bytes, serde_json::Value)> {
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

/// How a request's history goes on from its session's last one.
struct Continued {
    /// Its first messages are the last history's (0: none known).
    unchanged: usize,
    /// The messages it leaves out, which the carried compaction covers.
    left_out: PrefixKey,
}

impl Continued {
    /// A history decoded whole, with nothing known of it.
    fn whole() -> Continued {
        Continued {
            unchanged: 0,
            left_out: PrefixKey::EMPTY,
        }
    }

    /// The turn's input for `conv`.
    fn input<'a>(&self, conv: &'a Conversation) -> Input<'a> {
        let input = Input::evaluate(conv).resent().after(self.left_out);
        match self.unchanged {
            0 => input,
            n => input.extending(n),
        }
    }

    /// Whether `thread` can take `history` and it is valid: whole, as it
    /// is; with messages left out, as it goes out (the carried compaction
    /// followed by what it holds after its source).
    fn valid(&self, thread: &Thread, history: &Conversation) -> bool {
        if self.left_out.len == 0 {
            return validate(history).is_empty();
        }
        if !thread.takes(&self.input(history)) {
            return false;
        }
        thread
            .carryover()
            .and_then(|c| c.apply_after(&self.left_out, history))
            .is_some_and(|view| validate(&view).is_empty())
    }
}

/// Where a body goes on from its session's last one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Resume {
    /// It starts with the whole last body up to the end of its last
    /// message: only added messages follow.
    Appended,
    /// It starts with the last body up to the start of its message at
    /// `starts[k]`: the messages from there were sent again, rewritten (a
    /// moved cache marker), before the added ones.
    Rewritten(usize),
}

/// How `bytes` goes on from the session's last body, if it does: checked
/// on the bytes just before the last message's end (or the first anchor)
/// first, then on hashes of the prefixes, in one pass.
fn resume_point(state: &SessionState, (wire, path): (Wire, &str), bytes: &[u8]) -> Option<Resume> {
    let raw = state
        .raw
        .as_ref()
        .filter(|r| state.wire == wire && *r.path == *path)?;
    let end = raw.shape.prefix_end;
    let appended = bytes.len() > end && tail_of(bytes, end) == &raw.tail[..];
    let first = *raw.shape.starts.first()?;
    if !appended && (bytes.len() <= first || tail_of(bytes, first) != &raw.anchor_tail[..]) {
        return None;
    }
    let mut hasher = Xxh3::new();
    let mut at = 0;
    let mut best = None;
    for (k, &start) in raw.shape.starts.iter().enumerate() {
        if bytes.len() <= start {
            break;
        }
        hasher.update(&bytes[at..start]);
        at = start;
        if hasher.digest() != raw.anchors[k] {
            break;
        }
        best = Some(k);
    }
    if appended && best == Some(raw.shape.starts.len() - 1) {
        hasher.update(&bytes[at..end]);
        if hasher.digest() == raw.hash {
            return Some(Resume::Appended);
        }
    }
    best.map(Resume::Rewritten)
}

/// The conversation of a whole body, as the client sent it.
fn decode_whole(wire: Wire, uri: &Uri, bytes: &[u8]) -> Result<Conversation, String> {
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
