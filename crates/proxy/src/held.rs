//! What sessions' last bodies hold in memory, within a budget.
//!
//! A session keeps its last body's decoded history so that its next
//! request decodes only what it added (the fast path), without the messages
//! its carried compaction covers (see `RawState::leave_out`). That history is
//! several times its body (a one-word message is ~200 bytes decoded), so
//! many large sessions — or one client sending huge bodies under many keys —
//! would hold gigabytes. Past `[serve] session_memory_megabytes`, the least
//! recently used sessions drop theirs: their next request is decoded whole,
//! as after a restart, and nothing else changes.

use std::collections::HashMap;
use std::hash::Hash;

use abridge::model::{Message, Part};

/// Estimated bytes a decoded history of `messages` from a `body_len`-byte
/// body holds: its text (at most the body) plus each message's structs,
/// one part and its place in the body's shape.
pub(crate) fn cost(body_len: usize, messages: usize) -> usize {
    // The message, its one part, and its start and anchor in the shape.
    const PER_MESSAGE: usize = size_of::<Message>() + size_of::<Part>() + 48;
    body_len.saturating_add(messages.saturating_mul(PER_MESSAGE))
}

/// Bytes held per session (by its id, `K`), and their total.
#[derive(Debug)]
pub(crate) struct Held<K> {
    limit: usize,
    by_session: HashMap<K, usize>,
    total: usize,
}

impl<K: Hash + Eq + Clone> Held<K> {
    /// A budget of `limit` bytes.
    pub(crate) fn new(limit: usize) -> Held<K> {
        Held {
            limit,
            by_session: HashMap::new(),
            total: 0,
        }
    }

    /// Whether `cost` bytes fit the budget at all (with nothing else held).
    pub(crate) fn fits(&self, cost: usize) -> bool {
        cost <= self.limit
    }

    /// Records that `id` now holds `cost` bytes (0: nothing).
    pub(crate) fn set(&mut self, id: &K, cost: usize) {
        let before = match cost {
            0 => self.by_session.remove(id),
            c => self.by_session.insert(id.clone(), c),
        };
        self.total = self.total - before.unwrap_or(0) + cost;
    }

    /// Bytes over the budget (0 within it).
    pub(crate) fn excess(&self) -> usize {
        self.total.saturating_sub(self.limit)
    }

    /// Whether `id` holds anything.
    pub(crate) fn holds(&self, id: &K) -> bool {
        self.by_session.contains_key(id)
    }

    /// Bytes held by every session together.
    pub(crate) fn total(&self) -> usize {
        self.total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_follow_every_change_and_the_excess_is_what_is_over() {
        let (a, b) = ("a", "b");
        let mut held = Held::new(100);
        held.set(&a, 60);
        held.set(&b, 30);
        assert_eq!((held.total(), held.excess()), (90, 0));
        held.set(&a, 80);
        assert_eq!((held.total(), held.excess()), (110, 10));
        held.set(&b, 0);
        assert!(!held.holds(&b) && held.holds(&a));
        assert_eq!(held.total(), 80);
        assert!(held.fits(100) && !held.fits(101));
        assert!(cost(1_000, 10) > 1_000 + 10 * size_of::<Message>());
    }
}
