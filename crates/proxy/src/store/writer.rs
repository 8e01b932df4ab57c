//! The store's writer thread: takes everything queued at once and writes it
//! in one transaction (snapshots, then sessions' newest states, then
//! request rows), so a busy proxy pays a commit per batch, not per write.
//! A batch that fails for a reason that can pass (a lock, a read-only or
//! full disk, a deleted file, a database that went away) is tried again
//! with backoff until it lands, while what comes meanwhile waits in the
//! bounded queue; one that fails for its data is written a write at a
//! time, so that one bad write costs only itself. Before each batch the
//! store reconnects when its database is gone (an embedded file deleted
//! or replaced).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use abridge::SnapshotData;
use abridge_store::{SessionStore, Write, Written};

use super::health::Health;
use super::queue::{Batch, Queue};

/// First wait before a batch is tried again; it doubles up to [`BACKOFF_MAX`].
const BACKOFF: Duration = Duration::from_millis(50);
const BACKOFF_MAX: Duration = Duration::from_secs(2);

/// Snapshots written in one batch at most (each two whole histories).
const BATCH_SNAPSHOTS: usize = 32;

/// What the writer restores in a database it reconnected to.
pub(crate) struct Restore {
    /// Settings (the server secret) to write into a fresh database.
    pub(crate) settings: Vec<(String, String)>,
}

/// Writes batches until the queue is closed and empty.
pub(crate) fn work(
    mut store: Box<dyn SessionStore>,
    queue: Arc<Queue>,
    busy_since: Arc<AtomicU64>,
    health: Arc<Health>,
    restore: Restore,
    epoch: Instant,
) {
    let w = Writer {
        health: &health,
        restore: &restore,
        epoch,
    };
    while let Some(batch) = queue.take(BATCH_SNAPSHOTS, Duration::from_secs(1)) {
        let now = epoch.elapsed().as_millis() as u64;
        busy_since.store(now.max(1), Ordering::Relaxed);
        w.write(&mut store, batch);
        busy_since.store(0, Ordering::Relaxed);
    }
}

struct Writer<'a> {
    health: &'a Health,
    restore: &'a Restore,
    epoch: Instant,
}

impl Writer<'_> {
    /// Writes `batch` until it lands (or, failing for its data, each write
    /// alone), answers who waits, then the reads and flushes it took.
    fn write(&self, store: &mut Box<dyn SessionStore>, batch: Batch) {
        let Batch {
            snapshots,
            saves,
            requests,
            reads,
            flushes,
        } = batch;
        let data: Vec<SnapshotData<'_>> = snapshots
            .iter()
            .map(|p| {
                let s = &p.snapshot;
                SnapshotData {
                    before: &s.before,
                    after: &s.after,
                    config: &s.config,
                    report: &s.report,
                    thread: Some(&s.source),
                    originals: &s.originals,
                }
            })
            .collect();
        let writes: Vec<Write<'_>> = snapshots
            .iter()
            .zip(&data)
            .map(|(p, d)| Write::Snapshot(&p.snapshot.source, *d))
            .chain(saves.iter().map(|(_, s)| Write::Session(&s.record)))
            .chain(requests.iter().map(Write::Request))
            .collect();
        let results = match self.landed(store, &writes) {
            Ok(all) => all.into_iter().map(Ok).collect(),
            // The data is at fault: each write alone, so one costs only itself.
            Err(_) => writes
                .iter()
                .map(|w| {
                    self.landed(store, std::slice::from_ref(w))
                        .map(|mut v| v.remove(0))
                })
                .collect::<Vec<_>>(),
        };
        let mut results = results.into_iter();
        for (p, r) in snapshots.iter().zip(results.by_ref()) {
            let _ = p.reply.try_send(r.map(|w| match w {
                Written::Snapshot(id) => id,
                _ => abridge::SnapshotId(0),
            }));
        }
        for ((_, save), r) in saves.iter().zip(results.by_ref()) {
            if let Ok(Written::Session(v)) = &r {
                save.version.store(*v, Ordering::Relaxed);
            }
            for reply in &save.replies {
                let _ = reply.try_send(match &r {
                    Ok(_) => Ok(()),
                    Err(e) => Err(copy(e)),
                });
            }
        }
        for read in reads {
            read.answer(store.as_ref());
        }
        for done in flushes {
            let _ = done.try_send(());
        }
    }

    /// Runs `writes` until they land, or fail for a reason retrying cannot
    /// mend.
    fn landed(
        &self,
        store: &mut Box<dyn SessionStore>,
        writes: &[Write<'_>],
    ) -> abridge_store::Result<Vec<Written>> {
        let mut wait = BACKOFF;
        let mut tries = 0u32;
        loop {
            self.reconnect(store.as_mut());
            match store.write_all(writes) {
                Ok(v) => {
                    self.health.landed();
                    return Ok(v);
                }
                Err(e) if e.is_transient() => {
                    if tries == 0 {
                        tracing::warn!(error = %e, writes = writes.len(),
                            "cannot store a batch of writes; trying again until it lands");
                    }
                    self.health.failed(self.epoch, &e);
                    tries += 1;
                    std::thread::sleep(wait);
                    wait = (wait * 2).min(BACKOFF_MAX);
                }
                Err(e) => {
                    if writes.len() == 1 {
                        tracing::warn!(error = %e, "cannot store a write");
                    }
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

/// An error for a second waiter (the store's errors are not `Clone`).
fn copy(e: &abridge_store::Error) -> abridge_store::Error {
    abridge_store::Error::Serialize {
        what: "session",
        message: e.to_string(),
    }
}
