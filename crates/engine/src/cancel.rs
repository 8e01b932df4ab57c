//! Stopping a turn from outside: a proxy whose client left does not finish
//! a compaction nobody will receive.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::{Error, Result};

/// A flag a turn checks between its steps (counting, each policy step,
/// each summarizer, the snapshot). Clones share the flag. A turn that sees
/// it set stops with [`Error::Cancelled`] and leaves the caller's history,
/// and what the thread carried over, as they were.
#[derive(Debug, Clone, Default)]
pub struct Cancel(Option<Arc<AtomicBool>>);

impl Cancel {
    /// A flag not set yet.
    pub fn new() -> Cancel {
        Cancel(Some(Arc::default()))
    }

    /// A flag nothing can set (what a turn has unless told otherwise).
    pub fn never() -> Cancel {
        Cancel(None)
    }

    /// Sets the flag: turns checking it stop at their next check.
    pub fn cancel(&self) {
        if let Some(flag) = &self.0 {
            flag.store(true, Ordering::Relaxed);
        }
    }

    /// Whether the flag is set.
    pub fn is_cancelled(&self) -> bool {
        self.0.as_ref().is_some_and(|f| f.load(Ordering::Relaxed))
    }

    /// `Err(Cancelled)` once the flag is set.
    pub(crate) fn check(&self) -> Result<()> {
        match self.is_cancelled() {
            true => Err(Error::Cancelled),
            false => Ok(()),
        }
    }

    /// A guard that sets the flag when dropped unless
    /// [`disarmed`](CancelOnDrop::disarm): hold it in the future that waits
    /// for the turn, and the turn stops when that future is dropped.
    pub fn on_drop(&self) -> CancelOnDrop {
        CancelOnDrop(Some(self.clone()))
    }
}

/// Sets its [`Cancel`] when dropped, unless disarmed first.
#[derive(Debug)]
#[must_use = "the flag is set when the guard is dropped"]
pub struct CancelOnDrop(Option<Cancel>);

impl CancelOnDrop {
    /// The work finished: dropping the guard no longer sets the flag.
    pub fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(c) = self.0.take() {
            c.cancel();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dropped_guard_sets_the_flag_and_a_disarmed_one_does_not() {
        let c = Cancel::new();
        c.on_drop().disarm();
        assert!(!c.is_cancelled() && c.check().is_ok());
        drop(c.on_drop());
        assert!(c.clone().is_cancelled());
        assert!(matches!(c.check(), Err(Error::Cancelled)));
        let never = Cancel::never();
        never.cancel();
        assert!(!never.is_cancelled());
    }
}
