//! The store's writer thread: runs jobs in order, and a write that fails
//! for a reason that can pass (a lock, a read-only or full disk, a deleted
//! file, a database that went away) is tried again with backoff until it
//! lands — jobs behind it wait in the bounded queue, and what overflows it
//! is counted as dropped. Before each write the store reconnects when its
//! database is gone (an embedded file deleted or replaced).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use abridge::SnapshotData;
use abridge_store::SessionStore;

use super::health::Health;
use super::job::Job;

/// First wait before a write is tried again; it doubles up to [`BACKOFF_MAX`].
const BACKOFF: Duration = Duration::from_millis(50);
const BACKOFF_MAX: Duration = Duration::from_secs(2);

/// What the writer restores in a database it reconnected to.
pub(crate) struct Restore {
    /// Settings (the server secret) to write into a fresh database.
    pub(crate) settings: Vec<(String, String)>,
}

/// Runs jobs in order until the proxy is gone.
pub(crate) fn work(
    mut store: Box<dyn SessionStore>,
    queue: Receiver<Job>,
    busy_since: Arc<AtomicU64>,
    health: Arc<Health>,
    restore: Restore,
    epoch: Instant,
) {
    let mut w = Writer {
        health: &health,
        restore: &restore,
        epoch,
    };
    for job in queue {
        let now = epoch.elapsed().as_millis() as u64;
        busy_since.store(now.max(1), Ordering::Relaxed);
        match job {
            Job::Snapshot(s, reply) => {
                let data = SnapshotData {
                    before: &s.before,
                    after: &s.after,
                    config: &s.config,
                    report: &s.report,
                    thread: Some(&s.source),
                    originals: &s.originals,
                };
                let recorded = w.write(&mut store, "a snapshot", |st| {
                    st.record_snapshot(&s.source, &data)
                });
                let _ = reply.try_send(recorded);
            }
            Job::Save(record, version, reply) => {
                let saved = w.write(&mut store, "a session", |st| st.save_session(&record));
                if let Ok(v) = &saved {
                    version.store(*v, Ordering::Relaxed);
                }
                let _ = reply.try_send(saved.map(|_| ()));
            }
            Job::Read(read) => read.answer(store.as_ref()),
            Job::Request(request) => {
                let _ = w.write(&mut store, "a request log row", |st| {
                    st.record_request(&request)
                });
            }
            Job::Flush(done) => {
                let _ = done.try_send(());
            }
        }
        health.queued.fetch_sub(1, Ordering::AcqRel);
        busy_since.store(0, Ordering::Relaxed);
    }
}

struct Writer<'a> {
    health: &'a Health,
    restore: &'a Restore,
    epoch: Instant,
}

impl Writer<'_> {
    /// Runs `f` until it lands, or fails for a reason retrying cannot mend.
    fn write<T>(
        &mut self,
        store: &mut Box<dyn SessionStore>,
        what: &str,
        mut f: impl FnMut(&mut dyn SessionStore) -> abridge_store::Result<T>,
    ) -> abridge_store::Result<T> {
        let mut wait = BACKOFF;
        let mut tries = 0u32;
        loop {
            self.reconnect(store.as_mut());
            match f(store.as_mut()) {
                Ok(v) => {
                    self.health.landed();
                    return Ok(v);
                }
                Err(e) if e.is_transient() => {
                    if tries == 0 {
                        tracing::warn!(error = %e, "cannot store {what}; trying again until it lands");
                    }
                    self.health.failed(self.epoch, &e);
                    tries += 1;
                    std::thread::sleep(wait);
                    wait = (wait * 2).min(BACKOFF_MAX);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot store {what}");
                    return Err(e);
                }
            }
        }
    }

    /// Reconnects when the database is gone, and writes the settings back
    /// into a fresh one.
    fn reconnect(&self, store: &mut dyn SessionStore) {
        match store.reconnect_if_gone() {
            Ok(false) => {}
            Ok(true) => {
                tracing::warn!("the store's file was deleted or replaced: opened it again");
                for (name, value) in &self.restore.settings {
                    if let Err(e) = store.setting_or(name, value) {
                        tracing::warn!(error = %e, setting = %name, "cannot restore a setting");
                    }
                }
            }
            Err(e) => {
                self.health.failed(self.epoch, &e);
            }
        }
    }
}
