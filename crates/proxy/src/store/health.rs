//! How the store is doing: whether writes land.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How the store is doing, for `/healthz` and `/readyz`.
#[derive(Debug, Default)]
pub(crate) struct Health {
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

    pub(super) fn landed(&self) {
        if self.failing_since.swap(0, Ordering::AcqRel) != 0 {
            tracing::info!("the store takes writes again");
        }
    }
}
