//! The memory requests may take while the proxy compacts them.
//!
//! Decoding and compacting a body takes several times its size (about 25
//! times for a history of a million one-word messages), and each request is
//! prepared on a thread of its own: without a bound, a few clients sending
//! large bodies at once, or one hostile local client, could take all of the
//! machine's memory. So a request reserves its body's size out of
//! `[serve] max_preparing_megabytes` before it is compacted, and gives it
//! back once it is. Requests past the budget wait in arrival order; a
//! request that waits longer than the body timeout is answered 503.
//!
//! Compacting is short (well under a second for the common sizes), so a
//! wait is too; a body larger than the whole budget takes all of it and is
//! compacted alone.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::metrics::Metrics;

/// Room is counted in kibibytes, so that any budget fits a permit count.
const UNIT: usize = 1024;

pub(crate) struct Budget {
    room: Arc<Semaphore>,
    units: u32,
    metrics: Arc<Metrics>,
}

/// Room held for one body; given back when dropped.
pub(crate) struct Reservation {
    permit: Option<OwnedSemaphorePermit>,
    units: u32,
    metrics: Arc<Metrics>,
}

impl Budget {
    pub(crate) fn new(bytes: usize, metrics: Arc<Metrics>) -> Budget {
        let units = u32::try_from(bytes / UNIT).unwrap_or(u32::MAX).max(1);
        Budget {
            room: Arc::new(Semaphore::new(units as usize)),
            units,
            metrics,
        }
    }

    /// Reserves room for a body of `bytes` (all of the budget at most),
    /// waiting up to `wait` for it; `None` when none came.
    pub(crate) async fn reserve(&self, bytes: usize, wait: Duration) -> Option<Reservation> {
        let want = u32::try_from(bytes.div_ceil(UNIT))
            .unwrap_or(u32::MAX)
            .clamp(1, self.units);
        let acquire = self.room.clone().acquire_many_owned(want);
        let permit = match tokio::time::timeout(wait, acquire).await {
            Ok(Ok(p)) => p,
            // Timed out (the semaphore is never closed).
            _ => return None,
        };
        let r = Reservation {
            permit: Some(permit),
            units: self.units,
            metrics: self.metrics.clone(),
        };
        r.report(&self.room);
        Some(r)
    }
}

impl Reservation {
    /// Bytes reserved now, by every request, in the metrics.
    fn report(&self, room: &Semaphore) {
        let held = (self.units as usize).saturating_sub(room.available_permits());
        self.metrics.preparing(held * UNIT);
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if let Some(p) = self.permit.take() {
            let room = p.semaphore().clone();
            drop(p);
            self.report(&room);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn past_the_budget_a_body_waits_until_room_is_given_back() {
        let metrics = Arc::new(Metrics::new());
        let budget = Budget::new(4 * UNIT * UNIT, metrics.clone());
        let wait = Duration::from_millis(50);
        let big = budget.reserve(3 * UNIT * UNIT, wait).await.expect("room");
        assert!(metrics.render().contains("abridge_preparing_bytes 3145728"));
        assert!(budget.reserve(2 * UNIT * UNIT, wait).await.is_none());
        // What is left serves a smaller body meanwhile.
        let small = budget.reserve(UNIT * UNIT, wait).await.expect("room");
        drop(big);
        let next = budget.reserve(2 * UNIT * UNIT, wait).await.expect("room");
        // A body larger than the whole budget takes all of it, once free.
        drop((small, next));
        let whole = budget.reserve(64 * UNIT * UNIT, wait).await.expect("room");
        assert!(budget.reserve(1, wait).await.is_none());
        drop(whole);
        assert!(metrics.render().contains("abridge_preparing_bytes 0"));
    }
}
