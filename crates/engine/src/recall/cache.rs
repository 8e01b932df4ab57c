//! Originals in memory: where an engine without a store keeps them, and
//! where any engine finds the ones it made itself without a database
//! round trip. Bounded by bytes; the least recently kept go first.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use super::handle::Handle;
use super::original::Original;

/// A bounded map of handles to originals, shared (`Arc`) by the engines
/// that should answer for each other (a proxy's request and background
/// engines).
#[derive(Debug)]
pub struct OriginalCache {
    max_bytes: usize,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    by_handle: HashMap<Handle, (Arc<Original>, u64)>,
    /// Handles by when they were last kept, oldest first.
    order: BTreeMap<u64, Handle>,
    next: u64,
    bytes: usize,
}

impl OriginalCache {
    /// A cache of `[recall] memory_megabytes`.
    pub fn of(config: &crate::config::RecallConfig) -> Self {
        Self::new((config.memory_megabytes as usize).saturating_mul(1_000_000))
    }

    /// A cache holding at most `max_bytes` of content (an original larger
    /// than that is not kept).
    pub fn new(max_bytes: usize) -> Self {
        OriginalCache {
            max_bytes,
            inner: Mutex::new(Inner::default()),
        }
    }

    /// Keeps `original` (again: it becomes the newest).
    pub fn put(&self, original: Arc<Original>) {
        let size = original.bytes();
        if size > self.max_bytes {
            return;
        }
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let seq = g.next;
        g.next += 1;
        let handle = original.handle.clone();
        if let Some((old, at)) = g.by_handle.remove(&handle) {
            g.order.remove(&at);
            g.bytes -= old.bytes();
        }
        g.by_handle.insert(handle.clone(), (original, seq));
        g.order.insert(seq, handle);
        g.bytes += size;
        while g.bytes > self.max_bytes {
            let Some((_, oldest)) = g.order.pop_first() else {
                break;
            };
            if let Some((o, _)) = g.by_handle.remove(&oldest) {
                g.bytes -= o.bytes();
            }
        }
    }

    /// The original with this handle, if kept.
    pub fn get(&self, handle: &Handle) -> Option<Arc<Original>> {
        let g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        g.by_handle.get(handle).map(|(o, _)| Arc::clone(o))
    }

    /// How many originals and bytes it holds.
    pub fn size(&self) -> (usize, usize) {
        let g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        (g.by_handle.len(), g.bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::super::original::{OriginalKind, Piece};
    use super::*;

    fn text(s: &str) -> Arc<Original> {
        Arc::new(Original::new(
            OriginalKind::ToolResult,
            "t".into(),
            vec![Piece::Text { text: s.into() }],
        ))
    }

    #[test]
    fn keeps_within_its_bytes_and_drops_the_least_recently_kept() {
        let cache = OriginalCache::new(10);
        let (a, b, c) = (text("aaaa"), text("bbbb"), text("cccc"));
        cache.put(a.clone());
        cache.put(b.clone());
        cache.put(a.clone()); // a is now newer than b
        cache.put(c.clone());
        assert!(cache.get(&a.handle).is_some());
        assert!(cache.get(&b.handle).is_none());
        assert!(cache.get(&c.handle).is_some());
        assert_eq!(cache.size(), (2, 8));
        cache.put(text("x".repeat(11).as_str()));
        assert_eq!(
            cache.size(),
            (2, 8),
            "an original over the bound is not kept"
        );
    }
}
