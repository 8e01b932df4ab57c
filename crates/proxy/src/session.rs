//! Sessions: who a request belongs to, and what is remembered per session.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use abridge::background::Preparer;
use abridge::model::{Conversation, Role, Wire, fingerprint};
use abridge::recall::RecallScope;
use abridge::{Engine, PrefixKey, Thread};
use abridge_store::SessionRecord;
use axum::http::HeaderMap;
use lru::LruCache;
use sha2::{Digest, Sha256};
use xxhash_rust::xxh3::Xxh3;

use crate::held::{self, Held};
use crate::raw::{Shape, prefix_hashes, shape};
use crate::store::Saved;
use crate::tenant::{Tenant, TenantId};
use crate::usage::LastUsage;

/// Header a client may send to name its session.
pub(crate) const SESSION_HEADER: &str = "x-abridge-session";

/// A session id: a hex digest of the tenant's id and the session's name or
/// stable start. It never contains a credential; two tenants never share
/// one, whatever name their clients give their sessions.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct SessionId(pub String);

impl std::fmt::Display for SessionId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl SessionId {
    /// The id of a request of `tenant`: named by [`SESSION_HEADER`] when
    /// present, otherwise by the start of the conversation (system prompt,
    /// tools and first user message) and its `prompt_cache_key`, if any
    /// (Codex sends its thread's id there: two threads that start alike
    /// stay apart); always under the tenant's id, so that two tenants
    /// never share a session whatever they name it.
    pub(crate) fn of(tenant: &TenantId, headers: &HeaderMap, conv: &Conversation) -> SessionId {
        let mut h = Sha256::new();
        h.update(b"abridge-session\0");
        h.update(Wire::of(conv.format).as_str());
        h.update(b"\0tenant\0");
        h.update(tenant.as_str().as_bytes());
        match headers.get(SESSION_HEADER) {
            Some(name) => {
                h.update(b"\0named\0");
                h.update(name.as_bytes());
            }
            None => {
                h.update(b"\0start\0");
                let first_user = conv
                    .messages
                    .iter()
                    .position(|m| m.role == Role::User)
                    .map_or(conv.messages.len(), |i| i + 1);
                h.update(fingerprint(&conv.messages[..first_user]).to_le_bytes());
                for tool in conv.tools.iter().flatten() {
                    h.update(tool.name().unwrap_or("").as_bytes());
                    h.update(b"\0");
                }
                if let Some(key) = conv.extra.get("prompt_cache_key").and_then(|k| k.as_str()) {
                    h.update(b"\0cache key\0");
                    h.update(key.as_bytes());
                }
            }
        }
        let digest = h.finalize();
        SessionId(digest[..16].iter().map(|b| format!("{b:02x}")).collect())
    }
}

/// What the proxy keeps for one session.
pub(crate) struct SessionState {
    /// Its id.
    pub(crate) id: SessionId,
    /// Whose it is: only its tenant's requests continue it, and its
    /// handles are derived with its tenant's key.
    pub(crate) tenant: Tenant,
    /// Wire format of its requests.
    pub(crate) wire: Wire,
    /// The request path's engine, shared with the sessions of its model
    /// (deterministic policies and the offline briefing: it never waits on
    /// the network).
    pub(crate) engine: Arc<Engine>,
    /// The conversation's state: calibration, the compaction carried from
    /// request to request, cadence, token cache.
    pub(crate) thread: Thread,
    /// Briefings by the configured summarizers, prepared in the background.
    pub(crate) preparer: Option<Preparer>,
    /// Usage reported by the last response.
    pub(crate) usage: Arc<LastUsage>,
    /// The stored version this state matches (0: never stored), set by the
    /// store's thread when a save is written.
    pub(crate) version: Arc<AtomicI64>,
    /// The last body's shape and its decoded history, to recognise the next.
    pub(crate) raw: Option<RawState>,
    /// When a request last took a turn of it.
    pub(crate) used: std::time::Instant,
    /// It left memory while a request waited for it: that request opens
    /// the session again instead (see [`Sessions::spill_idle`]).
    pub(crate) spilled: bool,
    /// Tokens of its last request as the client sent it (what the
    /// provider would have cached of the next, sent whole).
    pub(crate) last_client: abridge::tokens::Calibrated,
}

/// What is kept of a session's last body to take its next one in parts.
#[derive(Debug)]
pub(crate) struct RawState {
    /// Where its history array sat.
    pub(crate) shape: Shape,
    /// Hash of its bytes before `shape.prefix_end`.
    pub(crate) hash: u64,
    /// Hashes of its bytes before each of `shape.starts`.
    pub(crate) anchors: Vec<u64>,
    /// The last [`TAIL_BYTES`] of the bytes before `shape.prefix_end`.
    pub(crate) tail: Vec<u8>,
    /// The last [`TAIL_BYTES`] before the first of `shape.starts`.
    pub(crate) anchor_tail: Vec<u8>,
    /// Its bytes from the array's close to its end.
    pub(crate) post: Vec<u8>,
    /// The path it came by: a body that goes on from it must come by the
    /// same (Gemini names the model in the path, not in the body).
    pub(crate) path: Box<str>,
    /// The history it held, decoded, but for what is left out.
    pub(crate) held: HeldHistory,
    /// Bytes it holds, estimated ([`held::cost`]).
    pub(crate) cost: usize,
}

/// A session's last history as the proxy keeps it: decoded, without the
/// messages its carried compaction covers (once there is one), which are
/// never read again while it applies.
#[derive(Debug, Clone)]
pub(crate) struct HeldHistory {
    /// The messages after those left out, in the history's envelope.
    pub(crate) history: Arc<Conversation>,
    /// The messages left out: how many, and their key.
    pub(crate) left_out: PrefixKey,
    /// Messages before the body's history array (a system prompt carried
    /// outside it): wire index 0 is message `offset`.
    pub(crate) offset: usize,
    /// Where the first held message starts in the body (0: all are held).
    pub(crate) from_byte: usize,
}

impl HeldHistory {
    /// A whole decoded history.
    pub(crate) fn whole(history: Arc<Conversation>) -> HeldHistory {
        HeldHistory {
            offset: history.wire_offset(),
            history,
            left_out: PrefixKey::EMPTY,
            from_byte: 0,
        }
    }

    /// The held index of the message at `wire` index, if it is held.
    pub(crate) fn index(&self, wire: usize) -> Option<usize> {
        (self.offset + wire).checked_sub(self.left_out.len)
    }

    /// Messages in the whole history, those left out included.
    pub(crate) fn len(&self) -> usize {
        self.left_out.len + self.history.messages.len()
    }
}

impl RawState {
    /// The state of `body` of `wire`, sent to `path`, which decoded whole
    /// to `history`.
    pub(crate) fn of(
        body: &[u8],
        path: &str,
        wire: Wire,
        history: Arc<Conversation>,
    ) -> Option<RawState> {
        Some(RawState::new(
            body,
            path,
            shape(body, wire.history_key())?,
            HeldHistory::whole(history),
        ))
    }

    /// The state of `body`, sent to `path`, whose shape is known.
    pub(crate) fn new(body: &[u8], path: &str, shape: Shape, held: HeldHistory) -> RawState {
        let (anchors, hash) = prefix_hashes(body, &shape);
        RawState {
            hash,
            anchors,
            tail: tail_of(body, shape.prefix_end).to_vec(),
            anchor_tail: shape
                .starts
                .first()
                .map_or_else(Vec::new, |&s| tail_of(body, s).to_vec()),
            post: body[shape.post.clone()].to_vec(),
            path: path.into(),
            cost: held::cost(
                body.len().saturating_sub(held.from_byte),
                held.history.messages.len(),
            ),
            shape,
            held,
        }
    }

    /// Stops holding the messages that a carried compaction covers (its
    /// source's first `covered`), up to the newest [`ANCHORS`](crate::raw::ANCHORS)
    /// at most: a client that moves its cache marker sends those again,
    /// rewritten, and they are compared with what was held.
    pub(crate) fn leave_out(&mut self, covered: usize) {
        // The history array's close runs to the body's end.
        let body_len = self.shape.post.end;
        let held = &mut self.held;
        let Some(&anchor_byte) = self.shape.starts.first() else {
            return;
        };
        let anchor = held.offset + self.shape.index_of(0);
        let upto = covered.min(anchor);
        let Some(n) = upto.checked_sub(held.left_out.len).filter(|n| *n > 0) else {
            return;
        };
        let total = held.history.messages.len();
        // Where the first message still held starts: known at an anchor;
        // elsewhere (a compaction carried from before a restart, which ends
        // before the newest messages) estimated by the share of messages
        // left out, for the memory estimate only.
        let from_byte = match upto == anchor {
            true => anchor_byte,
            false => held.from_byte + body_len.saturating_sub(held.from_byte) * n / total.max(1),
        };
        let history = Arc::make_mut(&mut held.history);
        held.left_out = held.left_out.extend(&history.messages[..n]);
        history.messages.drain(..n);
        history.messages.shrink_to_fit();
        held.from_byte = from_byte;
        self.cost = held::cost(body_len.saturating_sub(from_byte), history.messages.len());
    }
}

/// The bytes of `body` just before `end`.
pub(crate) fn tail_of(body: &[u8], end: usize) -> &[u8] {
    &body[end.saturating_sub(TAIL_BYTES)..end]
}

/// Leading bytes of a body in its [`quick_key`]: few enough that a
/// session's first, short body shares them with its next ones.
const QUICK_BYTES: usize = 64;

/// Most recent sessions remembered per [`quick_key`] (sessions of one
/// agent and key share their first bytes).
const QUICK_SESSIONS: usize = 64;

/// Bytes before the end of the last message kept to tell sessions apart
/// before hashing a whole prefix.
pub(crate) const TAIL_BYTES: usize = 256;

/// A cheap key of a request, to find the sessions whose history it may
/// continue without decoding it: its tenant, its session header and its
/// first bytes (in memory only; never stored or shown).
pub(crate) fn quick_key(tenant: &TenantId, headers: &HeaderMap, body: &[u8]) -> u64 {
    let mut h = Xxh3::new();
    h.update(tenant.as_str().as_bytes());
    if let Some(v) = headers.get(SESSION_HEADER) {
        h.update(b"\0session\0");
        h.update(v.as_bytes());
    }
    h.update(&body[..body.len().min(QUICK_BYTES)]);
    h.digest()
}

impl std::fmt::Debug for SessionState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionState")
            .field("id", &self.id)
            .field("wire", &self.wire)
            .finish_non_exhaustive()
    }
}

impl SessionState {
    /// A new session's state, its thread named by its id.
    pub(crate) fn new(
        id: SessionId,
        tenant: Tenant,
        wire: Wire,
        engine: Arc<Engine>,
    ) -> SessionState {
        let mut thread = Thread::new(&engine);
        thread.set_name(id.0.clone());
        thread.set_handle_key(tenant.key.clone());
        SessionState {
            id,
            tenant,
            wire,
            engine,
            thread,
            preparer: None,
            usage: Arc::default(),
            version: Arc::default(),
            raw: None,
            used: std::time::Instant::now(),
            spilled: false,
            last_client: abridge::tokens::Calibrated::ZERO,
        }
    }

    /// Takes over a stored record (from a restart, or another replica).
    pub(crate) fn adopt(&mut self, record: SessionRecord) {
        self.thread = Thread::resume(&self.engine, record.thread);
        self.thread.set_name(self.id.0.clone());
        self.thread.set_handle_key(self.tenant.key.clone());
        self.version.store(record.version, Ordering::Relaxed);
    }

    /// About how many bytes it holds: its last body, decoded, and its
    /// thread (carried compaction, briefing, count cache).
    pub(crate) fn memory(&self) -> usize {
        self.raw.as_ref().map_or(0, |r| r.cost) + self.thread.memory()
    }

    /// The stored version this state matches.
    pub(crate) fn version(&self) -> i64 {
        self.version.load(Ordering::Relaxed)
    }

    /// Who may read the originals its compactions kept.
    pub(crate) fn recall_scope(&self) -> RecallScope {
        RecallScope {
            key: self.tenant.key.clone(),
            session: self.id.0.clone(),
        }
    }

    /// What is stored of it.
    pub(crate) fn record(&self) -> SessionRecord {
        SessionRecord {
            id: self.id.0.clone(),
            wire: self.wire,
            model: self.engine.config().model.clone(),
            thread: self.thread.state().clone(),
            version: self.version(),
        }
    }
}

/// A shared session.
pub(crate) type Shared = Arc<tokio::sync::Mutex<SessionState>>;

/// Sessions in memory, least recently used evicted first.
#[derive(Debug)]
pub(crate) struct Sessions {
    map: Mutex<LruCache<SessionId, Shared>>,
    /// Sessions by the [`quick_key`] of their last request, newest first.
    quick: Mutex<std::collections::HashMap<u64, std::collections::VecDeque<SessionId>>>,
    /// Sessions whose history the provider's own compaction took over.
    handed_over: Mutex<std::collections::HashSet<SessionId>>,
    /// What they hold (last bodies and threads), within the budget. Locked
    /// before `map` when both are.
    held: Mutex<Held<SessionId>>,
    /// Told when what they hold is over the budget after their last bodies
    /// went: the sweeper then lets whole sessions go.
    pub(crate) over_budget: tokio::sync::Notify,
    capacity: usize,
}

impl Sessions {
    /// Room for `capacity` sessions, whose last bodies hold at most
    /// `held_bytes` together.
    pub(crate) fn new(capacity: usize, held_bytes: usize) -> Self {
        let cap = std::num::NonZeroUsize::new(capacity).unwrap_or(std::num::NonZeroUsize::MIN);
        Sessions {
            map: Mutex::new(LruCache::new(cap)),
            quick: Mutex::default(),
            handed_over: Mutex::default(),
            held: Mutex::new(Held::new(held_bytes)),
            over_budget: tokio::sync::Notify::new(),
            capacity: cap.get(),
        }
    }

    /// Keeps `raw` as the last body of `state`'s session when it fits the
    /// budget, and counts what the session holds (its body and its
    /// thread); past the budget, first drops the last bodies of the least
    /// recently used sessions that are not busy with a request. What all
    /// sessions then hold, and whether it is still over the budget (the
    /// sweeper then lets whole sessions go: [`Sessions::spill_over_budget`]).
    pub(crate) fn keep_raw(
        &self,
        state: &mut SessionState,
        raw: Option<RawState>,
    ) -> (usize, bool) {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        let cost = raw.as_ref().map_or(0, |r| r.cost);
        state.raw = raw.filter(|_| held.fits(cost));
        held.set(&state.id, state.memory());
        if held.excess() == 0 {
            return (held.total(), false);
        }
        let oldest_first: Vec<(SessionId, Shared)> = self
            .lock()
            .iter()
            .rev()
            .filter(|(id, _)| **id != state.id && held.holds(id))
            .map(|(id, s)| (id.clone(), s.clone()))
            .collect();
        for (id, session) in oldest_first {
            if held.excess() == 0 {
                break;
            }
            if let Ok(mut other) = session.try_lock()
                && other.raw.is_some()
            {
                other.raw = None;
                held.set(&id, other.memory());
            }
        }
        (held.total(), held.excess() > 0)
    }

    /// Lets go of whole sessions, least recently used first, while what
    /// sessions hold is over the budget: each once `save` wrote or queued
    /// it (one the store refused stays), never one busy with a request.
    /// How many left, and what those in memory then hold.
    pub(crate) fn spill_over_budget(
        &self,
        save: impl FnMut(&SessionState) -> Saved,
    ) -> (usize, usize) {
        let over = || self.held.lock().unwrap_or_else(|p| p.into_inner()).excess() > 0;
        self.spill(|_| if over() { Some(true) } else { None }, save)
    }

    /// Lets go of the sessions, least recently used first, that `wanted`
    /// says (`Some(true)`: this one; `Some(false)`: not this one; `None`:
    /// no more), each once `save` wrote or queued it; never one busy with
    /// a request, nor one the store refused. How many left, and what those
    /// in memory then hold.
    fn spill(
        &self,
        mut wanted: impl FnMut(&SessionState) -> Option<bool>,
        mut save: impl FnMut(&SessionState) -> Saved,
    ) -> (usize, usize) {
        let oldest_first: Vec<(SessionId, Shared)> = self
            .lock()
            .iter()
            .rev()
            .map(|(id, s)| (id.clone(), s.clone()))
            .collect();
        let mut gone = 0;
        for (id, session) in oldest_first {
            let Ok(mut state) = session.try_lock() else {
                continue;
            };
            match wanted(&state) {
                None => break,
                Some(false) => continue,
                Some(true) => {}
            }
            if save(&state) == Saved::Failed {
                continue;
            }
            self.let_go(&id, &mut state);
            gone += 1;
        }
        (gone, self.held_total())
    }

    /// What the sessions in memory hold together.
    fn held_total(&self) -> usize {
        self.held.lock().unwrap_or_else(|p| p.into_inner()).total()
    }

    /// Takes a session (locked as `state`) out of memory: a request that
    /// found it before waits for its lock, then sees it spilled.
    fn let_go(&self, id: &SessionId, state: &mut SessionState) {
        state.spilled = true;
        state.raw = None;
        self.lock().pop(id);
        self.held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .set(id, 0);
    }

    /// The sessions whose last request had this quick key, newest first.
    pub(crate) fn by_quick(&self, key: u64) -> Vec<Shared> {
        let ids: Vec<SessionId> = self
            .quick
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
            .map(|q| q.iter().cloned().collect())
            .unwrap_or_default();
        ids.iter().filter_map(|id| self.get(id)).collect()
    }

    /// Remembers the quick key of a session's request.
    pub(crate) fn set_quick(&self, key: u64, id: SessionId) {
        let mut quick = self.quick.lock().unwrap_or_else(|p| p.into_inner());
        if quick.len() >= 4 * self.capacity {
            // Keys of evicted sessions pile up: start afresh (the next
            // request of each session takes the full decode once).
            quick.clear();
        }
        let ids = quick.entry(key).or_default();
        ids.retain(|i| *i != id);
        ids.push_front(id);
        ids.truncate(QUICK_SESSIONS);
    }

    /// True the first time a session is handed over to the provider's
    /// compaction (bounded like the quick keys: forgetting means saying it again).
    pub(crate) fn first_handover(&self, id: &SessionId) -> bool {
        let mut set = self.handed_over.lock().unwrap_or_else(|p| p.into_inner());
        if set.len() >= 4 * self.capacity {
            set.clear();
        }
        set.insert(id.clone())
    }

    /// The session, if in memory.
    pub(crate) fn get(&self, id: &SessionId) -> Option<Shared> {
        self.lock().get(id).cloned()
    }

    /// Keeps `state`, or the one another request put there first.
    pub(crate) fn insert(&self, state: SessionState) -> Shared {
        let mut map = self.lock();
        if let Some(existing) = map.get(&state.id) {
            return existing.clone();
        }
        let id = state.id.clone();
        let shared = Arc::new(tokio::sync::Mutex::new(state));
        let evicted = map.push(id, shared.clone());
        drop(map);
        if let Some((gone, _)) = evicted {
            // Its last body leaves memory with it (once nothing uses it).
            let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
            held.set(&gone, 0);
        }
        shared
    }

    /// Lets go of the sessions no request used for `idle`, least recently
    /// used first, once `save` wrote or queued each (a queued save is read
    /// back until it is written, and never dropped); those busy with a
    /// request stay, and so does one the store refused (spilled, its next
    /// request would start afresh). How many left, and the bytes the last
    /// bodies of those in memory then hold.
    pub(crate) fn spill_idle(
        &self,
        idle: std::time::Duration,
        save: impl FnMut(&SessionState) -> Saved,
    ) -> (usize, usize) {
        self.spill(|s| Some(s.used.elapsed() >= idle), save)
    }

    /// Lets go of every session not busy with a request, each once `save`
    /// wrote or queued it: at shutdown, so that what a session learned
    /// since its last compaction (its calibration, its turns) outlives the
    /// proxy. How many left.
    pub(crate) fn spill_all(&self, save: impl FnMut(&SessionState) -> Saved) -> usize {
        self.spill(|_| Some(true), save).0
    }

    /// Sessions in memory.
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LruCache<SessionId, Shared>> {
        // A panic elsewhere never leaves the map half-updated: every
        // operation on it is one LruCache call.
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
#[path = "session_tests.rs"]
mod tests;
