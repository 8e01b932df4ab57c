//! How the store is doing: whether writes land, and what waits for it.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How the store is doing, for `/healthz` and `/readyz`.
#[derive(Debug, Default)]
pub(crate) struct Health {
    /// Jobs queued and not yet done.
    pub(crate) queued: AtomicUsize,
    /// Snapshots among them (each holds two whole histories).
    pub(crate) snapshots: AtomicUsize,
    /// When writes started failing (ms since the worker's epoch, plus one;
    /// 0: they land).
    failing_since: AtomicU64,
    last_error: Mutex<String>,
}

impl Health {
    /// `None` while writes land; else how long they have failed and why.
    pub(crate) fn degraded(&self, epoch: Instant) -> Option<(Duration, String)> {
        let since = self.failing_since.load(Ordering::Acquire);
        if since == 0 {
            return None;
        }
        let now = epoch.elapsed().as_millis() as u64 + 1;
        let error = self
            .last_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        Some((Duration::from_millis(now.saturating_sub(since)), error))
    }

    pub(super) fn failed(&self, epoch: Instant, error: &abridge_store::Error) {
        let now = epoch.elapsed().as_millis() as u64 + 1;
        let _ = self
            .failing_since
            .compare_exchange(0, now, Ordering::AcqRel, Ordering::Acquire);
        *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) = error.to_string();
    }

    /// A place for one more queued snapshot, or `None` at [`QUEUED_SNAPSHOTS`].
    pub(crate) fn snapshot_slot(self: &Arc<Self>) -> Option<SnapshotSlot> {
        if self.snapshots.fetch_add(1, Ordering::AcqRel) >= QUEUED_SNAPSHOTS {
            self.snapshots.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        Some(SnapshotSlot(self.clone()))
    }

    pub(super) fn landed(&self) {
        if self.failing_since.swap(0, Ordering::AcqRel) != 0 {
            tracing::info!("the store takes writes again");
        }
    }
}

/// Most snapshots waiting for the store at once: while it does not take
/// writes, what waits is bounded by memory, not only by count (a snapshot
/// holds two whole histories); past it, snapshots are dropped and counted.
pub(crate) const QUEUED_SNAPSHOTS: usize = 64;

/// A queued snapshot's place, given back when it is written or dropped.
pub(crate) struct SnapshotSlot(Arc<Health>);

impl Drop for SnapshotSlot {
    fn drop(&mut self) {
        self.0.snapshots.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshots_waiting_for_the_store_are_bounded() {
        let health = Arc::new(Health::default());
        let mut held: Vec<SnapshotSlot> = (0..QUEUED_SNAPSHOTS)
            .map(|_| health.snapshot_slot().expect("a place"))
            .collect();
        assert!(health.snapshot_slot().is_none(), "one more than the bound");
        held.pop();
        assert!(
            health.snapshot_slot().is_some(),
            "a written one frees its place"
        );
        drop(held);
        assert_eq!(health.snapshots.load(Ordering::Acquire), 0);
    }
}
