//! A session's next request recognised by its bytes: only the messages it
//! added (and those it rewrote) are decoded; where it goes on from.

use std::sync::Arc;

use abridge::model::{Conversation, Wire, decode_wire_messages, fingerprint, validate};
use abridge::{Input, PrefixKey, Thread};
use xxhash_rust::xxh3::Xxh3;

use crate::metrics::Decoded;
use crate::native::is_compaction_block;
use crate::prepared::Prepared;
use crate::raw::{messages_from, same_post};
use crate::session::{RawState, SessionState, Shared, tail_of};
use crate::tenant::TenantId;

use super::Context;

impl Context<'_> {
    /// The next request of a session whose history it extends, recognised
    /// by its bytes: only the messages it added (and the newest ones it
    /// rewrote, when it moved a cache marker) are decoded.
    pub(super) fn continued(
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
    pub(super) fn take_added(
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
    pub(super) fn keep_raw(&self, state: &mut SessionState, mut raw: Option<RawState>) {
        if let (Some(raw), Some(carry)) = (raw.as_mut(), state.thread.carryover()) {
            raw.leave_out(carry.source().len);
        }
        let (held, over) = self.sessions.keep_raw(state, raw);
        self.metrics.session_memory(held);
        if over {
            self.sessions.over_budget.notify_one();
        }
    }
}

/// How a request's history goes on from its session's last one.
pub(super) struct Continued {
    /// Its first messages are the last history's (0: none known).
    pub(super) unchanged: usize,
    /// The messages it leaves out, which the carried compaction covers.
    pub(super) left_out: PrefixKey,
}

impl Continued {
    /// A history decoded whole, with nothing known of it.
    pub(super) fn whole() -> Continued {
        Continued {
            unchanged: 0,
            left_out: PrefixKey::EMPTY,
        }
    }

    /// The turn's input for `conv`.
    pub(super) fn input<'a>(&self, conv: &'a Conversation) -> Input<'a> {
        let input = Input::evaluate(conv).resent().after(self.left_out);
        match self.unchanged {
            0 => input,
            n => input.extending(n),
        }
    }

    /// Whether `thread` can take `history` and it is valid: whole, as it
    /// is; with messages left out, as it goes out (the carried compaction
    /// followed by what it holds after its source).
    pub(super) fn valid(&self, thread: &Thread, history: &Conversation) -> bool {
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
pub(super) enum Resume {
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
pub(super) fn resume_point(
    state: &SessionState,
    (wire, path): (Wire, &str),
    bytes: &[u8],
) -> Option<Resume> {
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
