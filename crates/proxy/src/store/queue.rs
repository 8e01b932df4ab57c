//! What waits for the store's writer, shared by the request threads that
//! add to it and the writer that takes it all at once, a batch at a time.
//!
//! Each kind waits its own way, so that a burst of one never pushes out
//! another:
//! - a session's saves are coalesced: only its newest state waits (one per
//!   session at most), and a save is never dropped;
//! - request log rows wait in order, up to [`MAX_REQUESTS`];
//! - snapshots (each two whole histories) wait up to [`MAX_SNAPSHOT_BYTES`]
//!   of estimated size. What gives way when the store cannot keep up, in
//!   this order: the oldest waiting snapshot first, then the oldest request
//!   row; never a session's state.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::AtomicI64;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use abridge::SnapshotId;
use abridge_store::{RequestRecord, SessionRecord};

use super::job::{OwnedSnapshot, Read, Reply};
pub(crate) use crate::metrics::Dropped as GaveWay;

/// Request log rows waiting at most (about 200 bytes each).
pub(crate) const MAX_REQUESTS: usize = 65_536;

/// Estimated bytes of snapshots waiting at most.
pub(crate) const MAX_SNAPSHOT_BYTES: usize = 256 << 20;

/// A session's newest state, waiting.
pub(super) struct PendingSave {
    pub(super) record: SessionRecord,
    /// Takes the stored version once written.
    pub(super) version: Arc<AtomicI64>,
    /// Everyone waiting to hear it was written.
    pub(super) replies: Vec<Reply<()>>,
}

/// A snapshot, waiting, with who waits for its id.
pub(super) struct PendingSnapshot {
    pub(super) snapshot: Box<OwnedSnapshot>,
    pub(super) bytes: usize,
    pub(super) reply: Reply<SnapshotId>,
}

/// Everything the writer takes at once.
#[derive(Default)]
pub(super) struct Batch {
    pub(super) snapshots: Vec<PendingSnapshot>,
    pub(super) saves: Vec<(String, PendingSave)>,
    pub(super) requests: Vec<RequestRecord>,
    pub(super) reads: Vec<Read>,
    pub(super) flushes: Vec<std::sync::mpsc::SyncSender<()>>,
}

#[derive(Default)]
struct Waiting {
    saves: HashMap<String, PendingSave>,
    snapshots: VecDeque<PendingSnapshot>,
    snapshot_bytes: usize,
    requests: VecDeque<RequestRecord>,
    reads: Vec<Read>,
    flushes: Vec<std::sync::mpsc::SyncSender<()>>,
    /// The proxy is gone: the writer ends once the rest is written.
    closed: bool,
}

impl Waiting {
    fn is_empty(&self) -> bool {
        self.saves.is_empty()
            && self.snapshots.is_empty()
            && self.requests.is_empty()
            && self.reads.is_empty()
            && self.flushes.is_empty()
    }
}

/// The queue.
#[derive(Default)]
pub(super) struct Queue {
    waiting: Mutex<Waiting>,
    ready: Condvar,
}

impl Queue {
    fn lock(&self) -> MutexGuard<'_, Waiting> {
        // Every change to it is whole before the lock is let go.
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues a session's state in place of any waiting one.
    pub(super) fn save(&self, record: SessionRecord, version: Arc<AtomicI64>, reply: Reply<()>) {
        let mut w = self.lock();
        match w.saves.get_mut(&record.id) {
            Some(p) => {
                p.record = record;
                p.version = version;
                p.replies.push(reply);
            }
            None => {
                let id = record.id.clone();
                let save = PendingSave {
                    record,
                    version,
                    replies: vec![reply],
                };
                w.saves.insert(id, save);
            }
        }
        drop(w);
        self.ready.notify_one();
    }

    /// The waiting state of session `id`, if a save of it waits.
    pub(super) fn waiting_save(&self, id: &str) -> Option<SessionRecord> {
        self.lock().saves.get(id).map(|p| p.record.clone())
    }

    /// Queues a request row; the oldest gives way past [`MAX_REQUESTS`].
    pub(super) fn request(&self, row: RequestRecord) -> Option<GaveWay> {
        let mut w = self.lock();
        let gave = (w.requests.len() >= MAX_REQUESTS).then(|| {
            w.requests.pop_front();
            GaveWay::Request
        });
        w.requests.push_back(row);
        drop(w);
        self.ready.notify_one();
        gave
    }

    /// Queues a snapshot; the oldest give way past [`MAX_SNAPSHOT_BYTES`]
    /// (their waiters hear so). How many gave way.
    pub(super) fn snapshot(&self, s: PendingSnapshot) -> usize {
        let mut w = self.lock();
        w.snapshot_bytes += s.bytes;
        w.snapshots.push_back(s);
        let mut gone = 0;
        while w.snapshot_bytes > MAX_SNAPSHOT_BYTES && w.snapshots.len() > 1 {
            let Some(old) = w.snapshots.pop_front() else {
                break;
            };
            w.snapshot_bytes -= old.bytes;
            let _ = old.reply.try_send(Err(abridge_store::Error::Serialize {
                what: "snapshot",
                message: "dropped: the store could not keep up".into(),
            }));
            gone += 1;
        }
        drop(w);
        self.ready.notify_one();
        gone
    }

    /// Queues a read (for a store without threads of its own for reads).
    pub(super) fn read(&self, read: Read) {
        self.lock().reads.push(read);
        self.ready.notify_one();
    }

    /// Queues a flush, answered once everything queued before it is written.
    pub(super) fn flush(&self, done: std::sync::mpsc::SyncSender<()>) {
        self.lock().flushes.push(done);
        self.ready.notify_one();
    }

    /// Ends the writer once the rest is written.
    pub(super) fn close(&self) {
        self.lock().closed = true;
        self.ready.notify_all();
    }

    /// Jobs waiting: writes, reads and flushes.
    pub(super) fn len(&self) -> usize {
        let w = self.lock();
        w.saves.len() + w.snapshots.len() + w.requests.len() + w.reads.len() + w.flushes.len()
    }

    /// Waits until something is queued (or `every` passes), then takes it
    /// all: at most `max_snapshots` snapshots, the rest whole. `None` once
    /// closed and empty.
    pub(super) fn take(&self, max_snapshots: usize, every: Duration) -> Option<Batch> {
        let mut w = self.lock();
        while w.is_empty() {
            if w.closed {
                return None;
            }
            w = self
                .ready
                .wait_timeout(w, every)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        let n = w.snapshots.len().min(max_snapshots);
        let snapshots: Vec<PendingSnapshot> = w.snapshots.drain(..n).collect();
        w.snapshot_bytes -= snapshots.iter().map(|s| s.bytes).sum::<usize>();
        Some(Batch {
            snapshots,
            saves: w.saves.drain().collect(),
            requests: w.requests.drain(..).collect(),
            reads: std::mem::take(&mut w.reads),
            flushes: std::mem::take(&mut w.flushes),
        })
    }
}
