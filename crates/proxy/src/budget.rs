//! The memory requests may take: while their bodies are held, and while
//! the proxy compacts them.
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
//! Bodies themselves are held from their first byte until forwarded, under
//! `[serve] max_receiving_megabytes`. A body's room grows with the bytes
//! that arrived, whatever length it says it has: a client that announces
//! 32 MB and sends nothing holds nothing (when the length reserved room up
//! front, eight such idle connections held the default budget for the
//! whole body timeout). Bytes that find no room wait in the connection for
//! a moment (`GROW_WAIT`), then the body is refused: waiting longer could
//! leave every connection holding half a body, none able to finish.
//!
//! Compacting is short (well under a second for the common sizes), so a
//! wait is too; a body larger than the whole budget takes all of it and is
//! handled alone.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::metrics::{Budgeted, Metrics};

/// Room is counted in kibibytes, so that any budget fits a permit count.
const UNIT: usize = 1024;

pub(crate) struct Budget {
    room: Arc<Semaphore>,
    units: u32,
    what: Budgeted,
    metrics: Arc<Metrics>,
}

/// Room held for one body; given back when dropped.
pub(crate) struct Reservation {
    permit: Option<OwnedSemaphorePermit>,
    units: u32,
    what: Budgeted,
    metrics: Arc<Metrics>,
}

impl Budget {
    /// A budget of `bytes` for `what`, its use shown in `metrics`.
    pub(crate) fn new(bytes: usize, what: Budgeted, metrics: Arc<Metrics>) -> Budget {
        let units = u32::try_from(bytes / UNIT).unwrap_or(u32::MAX).max(1);
        Budget {
            room: Arc::new(Semaphore::new(units as usize)),
            units,
            what,
            metrics,
        }
    }

    /// Reserves room for a body of `bytes` (all of the budget at most),
    /// waiting up to `wait` for it; `None` when none came.
    pub(crate) async fn reserve(&self, bytes: usize, wait: Duration) -> Option<Reservation> {
        let acquire = self
            .room
            .clone()
            .acquire_many_owned(units_for(bytes, self.units));
        let permit = match tokio::time::timeout(wait, acquire).await {
            Ok(Ok(p)) => p,
            // Timed out (the semaphore is never closed).
            _ => return None,
        };
        let r = Reservation {
            permit: Some(permit),
            units: self.units,
            what: self.what,
            metrics: self.metrics.clone(),
        };
        r.report(&self.room);
        Some(r)
    }

    /// Counts a request that found no room.
    pub(crate) fn busy(&self) {
        self.metrics.busy(self.what);
    }
}

/// Units for a body of `bytes`: all of a `budget` at most.
fn units_for(bytes: usize, budget: u32) -> u32 {
    u32::try_from(bytes.div_ceil(UNIT))
        .unwrap_or(u32::MAX)
        .clamp(1, budget)
}

impl Reservation {
    /// Grows the reservation to a body of `bytes` (all of the budget at
    /// most), waiting up to `wait` for the room; false when none came, the
    /// room already held kept.
    pub(crate) async fn grow_to(&mut self, bytes: usize, wait: Duration) -> bool {
        let Some(permit) = self.permit.as_mut() else {
            return false;
        };
        let held = u32::try_from(permit.num_permits()).unwrap_or(u32::MAX);
        let want = units_for(bytes, self.units);
        if want <= held {
            return true;
        }
        let room = permit.semaphore().clone();
        let more = match room.clone().try_acquire_many_owned(want - held) {
            Ok(more) => more,
            Err(_) => {
                match tokio::time::timeout(wait, room.clone().acquire_many_owned(want - held)).await
                {
                    Ok(Ok(more)) => more,
                    _ => return false,
                }
            }
        };
        permit.merge(more);
        self.report(&room);
        true
    }

    /// Bytes reserved now, by every request, in the metrics.
    fn report(&self, room: &Semaphore) {
        let held = (self.units as usize).saturating_sub(room.available_permits());
        self.metrics.budget_held(self.what, held * UNIT);
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
        let budget = Budget::new(4 * UNIT * UNIT, Budgeted::Preparing, metrics.clone());
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

    #[tokio::test]
    async fn a_reservation_grows_while_there_is_room_and_up_to_the_budget() {
        let metrics = Arc::new(Metrics::new());
        let budget = Budget::new(4 * UNIT * UNIT, Budgeted::Receiving, metrics.clone());
        let wait = Duration::from_millis(50);
        let mut a = budget.reserve(0, wait).await.expect("room");
        assert!(a.grow_to(2 * UNIT * UNIT, wait).await);
        assert!(metrics.render().contains("abridge_receiving_bytes 2097152"));
        let mut b = budget.reserve(UNIT * UNIT, wait).await.expect("room");
        // 3 MB held: a cannot take 2 more, and keeps what it has.
        assert!(!a.grow_to(4 * UNIT * UNIT, wait).await);
        assert!(a.grow_to(3 * UNIT * UNIT, wait).await);
        assert!(!b.grow_to(UNIT * UNIT + 1, wait).await);
        // Room given back while it waits serves it.
        let (grown, ()) = tokio::join!(a.grow_to(4 * UNIT * UNIT, Duration::from_secs(5)), async {
            tokio::time::sleep(wait).await;
            drop(b);
        });
        assert!(grown);
        // Alone, it grows to the whole budget and past it without more.
        assert!(a.grow_to(64 * UNIT * UNIT, wait).await);
        assert!(metrics.render().contains("abridge_receiving_bytes 4194304"));
        drop(a);
        assert!(metrics.render().contains("abridge_receiving_bytes 0"));
    }
}
