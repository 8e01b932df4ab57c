//! The store, kept off the request path: one thread owns its writes and
//! takes what is queued a batch at a time (one transaction each), so a slow
//! or stopped database never stalls a request and a busy proxy pays one
//! commit per batch. Reads run on [`READERS`] threads of their own, each
//! with its own handle on the database (PostgreSQL's pool; the SQLite file,
//! in WAL mode, read beside the writer); a store in memory reads on the
//! writer's thread.
//!
//! What waits, and what gives way when the store cannot keep up, is the
//! [`queue`]'s: a session's saves coalesce (its newest state waits, never
//! dropped, and reads of the session see it), request rows and snapshots
//! wait within bounds. A snapshot whose id goes into the report, and a
//! session's save on a store other replicas share, wait at most [`WAIT`]:
//! with the database up, a replica's save is in before its response goes,
//! so the next request, on any replica, reads it. Past [`WAIT`] the request
//! goes on and the write lands when the database answers. While a batch
//! has been running longer than [`WAIT`], no write waits; while every
//! reader is stuck that long, no read is sent.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use abridge::recall::{Handle, StoredOriginal};
use abridge::{SnapshotData, SnapshotError, SnapshotId, SnapshotSink};
use abridge_store::{RequestRecord, SessionRecord, SessionStore};

use crate::metrics::{Metrics, StoreOp};

mod health;
mod job;
mod queue;
mod writer;

use job::{OwnedSnapshot, Read, Reply};

use health::Health;
use queue::{GaveWay, PendingSnapshot, Queue};
pub(crate) use writer::Restore;

/// Longest a request waits on the store.
pub(crate) const WAIT: Duration = Duration::from_millis(250);

/// Reads queued for the reader threads at most; past it, a read is not
/// sent (the request goes on with what is in memory).
const QUEUED_READS: usize = 4096;

/// Threads answering reads, when the store has handles for them.
pub(crate) const READERS: usize = 4;

/// What came of saving a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Saved {
    /// Written.
    Written,
    /// The store refused it.
    Failed,
    /// Queued: written when the store gets there, and read back before
    /// (never dropped).
    Queued,
}

/// The store shared by every session, on a thread of its own.
pub(crate) type SharedStore = std::sync::Arc<StoreWorker>;

/// The proxy's handle on its store.
pub(crate) struct StoreWorker {
    queue: Arc<Queue>,
    /// Where reads go, when they have threads of their own.
    reads: Option<SyncSender<Read>>,
    shared: bool,
    /// When the writer's running batch started (ms since `epoch`; 0: idle).
    busy_since: Arc<AtomicU64>,
    /// The same for each reader.
    readers_busy: Vec<Arc<AtomicU64>>,
    epoch: Instant,
    metrics: Arc<Metrics>,
    /// Whether the last wait ran out, and when that was last said.
    stalled: Mutex<Stall>,
    /// What gave way since it was last said (said at most once a minute).
    gave_way: Mutex<GaveWayLog>,
    /// Whether writes land.
    health: Arc<Health>,
}

/// Waits on the store that ran out, said at most once a minute.
#[derive(Default)]
struct Stall {
    stalled: bool,
    said: Option<Instant>,
    waits: u64,
}

/// What gave way to keep the queue bounded, said at most once a minute.
#[derive(Default)]
struct GaveWayLog {
    said: Option<Instant>,
    snapshots: u64,
    requests: u64,
}

impl std::fmt::Debug for StoreWorker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreWorker")
            .field("shared", &self.shared)
            .finish_non_exhaustive()
    }
}

impl StoreWorker {
    /// Moves `store` to a thread of its own, and its readers (if it has
    /// any) to theirs.
    pub(crate) fn start(
        store: Box<dyn SessionStore>,
        metrics: Arc<Metrics>,
        restore: Restore,
    ) -> StoreWorker {
        let queue = Arc::new(Queue::default());
        let busy_since = Arc::new(AtomicU64::new(0));
        let epoch = Instant::now();
        let shared = store.shared();
        let readers: Vec<Box<dyn SessionStore>> =
            (0..READERS).map_while(|_| store.reader()).collect();
        let (reads, readers_busy) = match readers.is_empty() {
            true => (None, Vec::new()),
            false => {
                let (tx, rx) = sync_channel(QUEUED_READS);
                let rx = Arc::new(Mutex::new(rx));
                let busy: Vec<Arc<AtomicU64>> = readers
                    .iter()
                    .map(|_| Arc::new(AtomicU64::new(0)))
                    .collect();
                for (i, (reader, b)) in readers.into_iter().zip(&busy).enumerate() {
                    let (rx, b) = (rx.clone(), b.clone());
                    spawn(&format!("abridge-store-read-{i}"), move || {
                        read(reader, rx, b, epoch)
                    });
                }
                (Some(tx), busy)
            }
        };
        let (busy, health) = (busy_since.clone(), Arc::new(Health::default()));
        let (h, q) = (health.clone(), queue.clone());
        spawn("abridge-store", move || {
            writer::work(store, q, busy, h, restore, epoch)
        });
        StoreWorker {
            queue,
            reads,
            shared,
            busy_since,
            readers_busy,
            epoch,
            metrics,
            stalled: Mutex::default(),
            gave_way: Mutex::default(),
            health,
        }
    }

    /// `None` while writes land; else for how long they have failed, why,
    /// and how many jobs wait.
    pub(crate) fn degraded(&self) -> Option<(Duration, String, usize)> {
        let queued = self.queue.len();
        self.health
            .degraded(self.epoch)
            .map(|(d, why)| (d, why, queued))
    }

    /// Writes and reads waiting.
    pub(crate) fn queued(&self) -> usize {
        self.queue.len()
    }

    /// True when other processes write to the same store (replicas).
    pub(crate) fn shared(&self) -> bool {
        self.shared
    }

    /// The stored version of a session (a save still queued counts as
    /// stored); `None` when the store did not answer in time.
    pub(crate) fn version(&self, id: &str) -> Option<abridge_store::Result<Option<i64>>> {
        if let Some(r) = self.queue.waiting_save(id) {
            return Some(Ok(Some(r.version)));
        }
        self.ask(|reply| Read::Version(id.to_owned(), reply))
    }

    /// A stored session (a save still queued is read as stored); `None`
    /// when the store did not answer in time.
    pub(crate) fn load(&self, id: &str) -> Option<abridge_store::Result<Option<SessionRecord>>> {
        if let Some(r) = self.queue.waiting_save(id) {
            return Some(Ok(Some(r)));
        }
        self.ask(|reply| Read::Load(id.to_owned(), reply))
    }

    /// A stored original; `None` when the store did not answer in time.
    pub(crate) fn original(
        &self,
        handle: &Handle,
    ) -> Option<abridge_store::Result<Option<StoredOriginal>>> {
        self.ask(|reply| Read::Original(handle.clone(), reply))
    }

    /// Saves a session: its newest state replaces any still queued. On a
    /// store replicas share, waits at most [`WAIT`] for it to be written
    /// (the next request may come to another replica); `version` takes the
    /// stored version once it is.
    pub(crate) fn save(&self, record: SessionRecord, version: Arc<AtomicI64>) -> Saved {
        let (reply, answer) = sync_channel(1);
        self.queue.save(record, version, reply);
        if !self.shared || self.stuck(&self.busy_since) {
            return Saved::Queued;
        }
        match self.wait(&answer, StoreOp::Write) {
            Some(Ok(())) => Saved::Written,
            // Logged where it was written.
            Some(Err(_)) => Saved::Failed,
            None => Saved::Queued,
        }
    }

    /// Queues a request log row.
    pub(crate) fn log_request(&self, request: RequestRecord) {
        if let Some(gave) = self.queue.request(request) {
            self.gave_way(gave, 1);
        }
    }

    /// Waits (at most `limit`) until every queued write is done: at
    /// shutdown, so that what a stopped proxy knew is in the store.
    pub(crate) fn flush(&self, limit: Duration) -> bool {
        let (done, wait) = sync_channel(1);
        self.queue.flush(done);
        let flushed = wait.recv_timeout(limit).is_ok();
        self.queue.close();
        flushed
    }

    /// Counts what gave way, and says so at most once a minute.
    fn gave_way(&self, what: GaveWay, n: u64) {
        self.metrics.store_dropped(what, n);
        let mut log = self.gave_way.lock().unwrap_or_else(|p| p.into_inner());
        match what {
            GaveWay::Snapshot => log.snapshots += n,
            GaveWay::Request => log.requests += n,
        }
        if log
            .said
            .is_some_and(|t| t.elapsed() < Duration::from_secs(60))
        {
            return;
        }
        tracing::warn!(
            snapshots = log.snapshots,
            request_rows = log.requests,
            "the store cannot keep up: the oldest queued writes gave way \
             (abridge_store_dropped_total; sessions' states are never dropped)"
        );
        *log = GaveWayLog {
            said: Some(Instant::now()),
            ..GaveWayLog::default()
        };
    }

    /// Sends a read and waits for its answer at most [`WAIT`]; while every
    /// thread that could answer it is stuck, it is not sent at all.
    fn ask<T>(&self, read: impl FnOnce(Reply<T>) -> Read) -> Option<abridge_store::Result<T>> {
        let stuck = match &self.reads {
            Some(_) => self.readers_busy.iter().all(|b| self.stuck(b)),
            None => self.stuck(&self.busy_since),
        };
        let (reply, answer) = sync_channel(1);
        let sent = !stuck
            && match &self.reads {
                Some(reads) => reads.try_send(read(reply)).is_ok(),
                None => {
                    self.queue.read(read(reply));
                    true
                }
            };
        if !sent {
            self.metrics.store_timeout(StoreOp::Read);
            return None;
        }
        self.wait(&answer, StoreOp::Read)
    }

    fn wait<T>(
        &self,
        answer: &Receiver<abridge_store::Result<T>>,
        op: StoreOp,
    ) -> Option<abridge_store::Result<T>> {
        let answered = answer.recv_timeout(WAIT).ok();
        self.note(answered.is_some());
        if answered.is_none() {
            self.metrics.store_timeout(op);
        }
        answered
    }

    /// True while the thread whose job started at `busy` has run it
    /// longer than [`WAIT`].
    fn stuck(&self, busy: &AtomicU64) -> bool {
        let since = busy.load(Ordering::Relaxed);
        let now = self.epoch.elapsed().as_millis() as u64;
        since != 0 && now.saturating_sub(since) > WAIT.as_millis() as u64
    }

    /// Logs a stall's start (at most once a minute, with how many waits
    /// ran out since) and its end.
    fn note(&self, answered: bool) {
        let mut s = self.stalled.lock().unwrap_or_else(|p| p.into_inner());
        match answered {
            true if s.stalled => {
                s.stalled = false;
                tracing::debug!("the store answers again; queued writes are being saved");
            }
            true => {}
            false => {
                s.stalled = true;
                s.waits += 1;
                if s.said
                    .is_some_and(|t| t.elapsed() < Duration::from_secs(60))
                {
                    return;
                }
                tracing::warn!(
                    wait_ms = WAIT.as_millis() as u64,
                    waits = s.waits,
                    "the store did not answer in time; going on with the sessions in memory \
                     (abridge_store_timeouts_total; the writes land when it does)"
                );
                s.said = Some(Instant::now());
                s.waits = 0;
            }
        }
    }
}

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(f)
        .map_err(|e| tracing::error!(error = %e, thread = name, "cannot start a store thread"))
        .ok();
}

/// A reader's thread: answers reads, taking turns with the other readers,
/// until the proxy is gone.
fn read(
    mut store: Box<dyn SessionStore>,
    reads: Arc<Mutex<Receiver<Read>>>,
    busy: Arc<AtomicU64>,
    epoch: Instant,
) {
    loop {
        let next = reads.lock().unwrap_or_else(|p| p.into_inner()).recv();
        let Ok(read) = next else { return };
        busy.store(
            (epoch.elapsed().as_millis() as u64).max(1),
            Ordering::Relaxed,
        );
        // A file deleted or replaced is opened again, as the writer does.
        let _ = store.reconnect_if_gone();
        read.answer(store.as_ref());
        busy.store(0, Ordering::Relaxed);
    }
}

/// Records every session's compactions through the store's thread, each
/// under its session's id (the name of the session's thread).
pub(crate) struct SessionSink(pub(crate) Arc<StoreWorker>);

impl SnapshotSink for SessionSink {
    fn record(&self, snapshot: &SnapshotData<'_>) -> Result<SnapshotId, SnapshotError> {
        let owned = OwnedSnapshot {
            source: snapshot.thread.unwrap_or_default().to_owned(),
            before: snapshot.before.clone(),
            after: snapshot.after.clone(),
            config: snapshot.config.clone(),
            report: snapshot.report.clone(),
            originals: snapshot.originals.to_vec(),
        };
        let messages = owned.before.messages.iter().chain(&owned.after.messages);
        let bytes = messages.map(|m| crate::held::cost(m.text_bytes(), 1)).sum();
        let (reply, answer) = sync_channel(1);
        let pending = PendingSnapshot {
            snapshot: Box::new(owned),
            bytes,
            reply,
        };
        let w = &self.0;
        let gone = w.queue.snapshot(pending);
        if gone > 0 {
            w.gave_way(GaveWay::Snapshot, gone as u64);
        }
        if w.stuck(&w.busy_since) {
            w.metrics.store_timeout(StoreOp::Write);
            return Err(SnapshotError::new(Late));
        }
        match w.wait(&answer, StoreOp::Write) {
            Some(Ok(id)) => Ok(id),
            Some(Err(e)) => Err(SnapshotError::new(e)),
            None => Err(SnapshotError::new(Late)),
        }
    }

    fn recall(&self, handle: &Handle) -> Result<Option<StoredOriginal>, SnapshotError> {
        match self.0.original(handle) {
            Some(Ok(o)) => {
                self.0.metrics.recall_from_store(o.is_some());
                Ok(o)
            }
            Some(Err(e)) => Err(SnapshotError::new(e)),
            None => Err(SnapshotError::new(Late)),
        }
    }
}

/// A snapshot queued behind a store that did not answer in time.
#[derive(Debug)]
struct Late;

impl std::fmt::Display for Late {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the store did not answer within {} ms: the snapshot is saved when it does, without its id in this report",
            WAIT.as_millis()
        )
    }
}

impl std::error::Error for Late {}
