//! The store, kept off the request path: one thread owns its writes and
//! works through a queue, so a slow or stopped database never stalls a
//! request. A pooled database (PostgreSQL) also answers reads on
//! [`READERS`] threads of their own, each with a handle on the pool, so
//! reads run beside the writes and beside each other; the embedded SQLite
//! file reads on the writer's thread.
//!
//! The request log is queued and the request goes on. A read (a session's
//! stored version, its record), a session's save and a snapshot whose id
//! goes into the report wait at most [`WAIT`]: with the database up, a
//! replica's save is in before its response goes, so the next request, on
//! any replica, reads it. Past [`WAIT`], the request goes on with the state
//! in memory and the job still runs when the database answers, in order.
//! While a write has been running longer than [`WAIT`], no write waits;
//! while every reader is stuck that long, no read is sent.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use abridge::recall::{Handle, StoredOriginal};
use abridge::{SnapshotData, SnapshotError, SnapshotId, SnapshotSink};
use abridge_store::{RequestRecord, SessionRecord, SessionStore};

use crate::metrics::{Metrics, StoreOp};

mod health;
mod job;
mod writer;

use job::{Job, OwnedSnapshot, Read, Reply};

use health::{Health, QUEUED_SNAPSHOTS};
pub(crate) use writer::Restore;

/// Longest a request waits on the store.
pub(crate) const WAIT: Duration = Duration::from_millis(250);

/// Jobs queued at most; past it, writes are dropped (and counted).
const QUEUE: usize = 4096;

/// Threads answering reads, when the store has handles for them.
pub(crate) const READERS: usize = 4;

/// What came of saving a session within [`WAIT`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Saved {
    /// Written.
    Written,
    /// The store refused it.
    Failed,
    /// Still queued behind a slow or stalled store (written when it gets
    /// there).
    Queued,
}

/// The store shared by every session, on a thread of its own.
pub(crate) type SharedStore = std::sync::Arc<StoreWorker>;

/// The proxy's handle on its store.
pub(crate) struct StoreWorker {
    jobs: SyncSender<Job>,
    /// Where reads go, when they have threads of their own.
    reads: Option<SyncSender<Read>>,
    shared: bool,
    /// When the writer's running job started (ms since `epoch`; 0: idle).
    busy_since: Arc<AtomicU64>,
    /// The same for each reader.
    readers_busy: Vec<Arc<AtomicU64>>,
    epoch: Instant,
    metrics: Arc<Metrics>,
    /// Whether the last wait ran out (said once per stall in the log).
    stalled: Mutex<bool>,
    /// Whether writes land, and how many wait.
    health: Arc<Health>,
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
        let (jobs, queue) = sync_channel(QUEUE);
        let busy_since = Arc::new(AtomicU64::new(0));
        let epoch = Instant::now();
        let shared = store.shared();
        let readers: Vec<Box<dyn SessionStore>> =
            (0..READERS).map_while(|_| store.reader()).collect();
        let (reads, readers_busy) = match readers.is_empty() {
            true => (None, Vec::new()),
            false => {
                let (tx, rx) = sync_channel(QUEUE);
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
        let h = health.clone();
        spawn("abridge-store", move || {
            writer::work(store, queue, busy, h, restore, epoch)
        });
        StoreWorker {
            jobs,
            reads,
            shared,
            busy_since,
            readers_busy,
            epoch,
            metrics,
            stalled: Mutex::new(false),
            health,
        }
    }

    /// `None` while writes land; else for how long they have failed, why,
    /// and how many jobs wait.
    pub(crate) fn degraded(&self) -> Option<(Duration, String, usize)> {
        let queued = self.health.queued.load(Ordering::Acquire);
        self.health
            .degraded(self.epoch)
            .map(|(d, why)| (d, why, queued))
    }

    /// Queues a job for the writer thread, counted until it is done.
    fn send(&self, job: Job) -> Result<(), TrySendError<Job>> {
        self.health.queued.fetch_add(1, Ordering::AcqRel);
        self.jobs.try_send(job).inspect_err(|_| {
            self.health.queued.fetch_sub(1, Ordering::AcqRel);
        })
    }

    /// True when other processes write to the same store (replicas).
    pub(crate) fn shared(&self) -> bool {
        self.shared
    }

    /// The stored version of a session; `None` when the store did not answer in time.
    pub(crate) fn version(&self, id: &str) -> Option<abridge_store::Result<Option<i64>>> {
        self.ask(|reply| Read::Version(id.to_owned(), reply))
    }

    /// A stored session; `None` when the store did not answer in time.
    pub(crate) fn load(&self, id: &str) -> Option<abridge_store::Result<Option<SessionRecord>>> {
        self.ask(|reply| Read::Load(id.to_owned(), reply))
    }

    /// A stored original; `None` when the store did not answer in time.
    pub(crate) fn original(
        &self,
        handle: &Handle,
    ) -> Option<abridge_store::Result<Option<StoredOriginal>>> {
        self.ask(|reply| Read::Original(handle.clone(), reply))
    }

    /// Saves a session, waiting at most [`WAIT`] for it to be written;
    /// `version` takes the stored version once it is.
    pub(crate) fn save(&self, record: SessionRecord, version: Arc<AtomicI64>) -> Saved {
        let job = |reply| Job::Save(Box::new(record), version, reply);
        match self.tell(job) {
            Some(Ok(())) => Saved::Written,
            // Logged where it was written.
            Some(Err(_)) => Saved::Failed,
            None => {
                tracing::debug!("a session's save is queued behind a slow store");
                Saved::Queued
            }
        }
    }

    /// Queues a request log row.
    pub(crate) fn log_request(&self, request: RequestRecord) {
        self.queue(Job::Request(Box::new(request)));
    }

    /// Waits (at most `limit`) until every queued job is done: at shutdown,
    /// so that what a stopped proxy knew is in the store.
    pub(crate) fn flush(&self, limit: Duration) -> bool {
        let (done, wait) = sync_channel(1);
        self.health.queued.fetch_add(1, Ordering::AcqRel);
        if self.jobs.send(Job::Flush(done)).is_err() {
            self.health.queued.fetch_sub(1, Ordering::AcqRel);
            return false;
        }
        wait.recv_timeout(limit).is_ok()
    }

    fn queue(&self, job: Job) {
        match self.send(job) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                self.metrics.store_dropped();
                tracing::warn!("the store's queue is full: a write was dropped");
            }
            Err(TrySendError::Disconnected(_)) => {
                self.metrics.store_dropped();
                tracing::warn!("the store's thread is gone: a write was dropped");
            }
        }
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
                None => self.send(Job::Read(read(reply))).is_ok(),
            };
        if !sent {
            self.metrics.store_timeout(StoreOp::Read);
            return None;
        }
        self.wait(&answer, StoreOp::Read)
    }

    /// Queues a write that answers, and waits for the answer at most
    /// [`WAIT`] (not at all while the writer is stuck).
    fn tell<T>(&self, job: impl FnOnce(Reply<T>) -> Job) -> Option<abridge_store::Result<T>> {
        let stuck = self.stuck(&self.busy_since);
        let (reply, answer) = sync_channel(1);
        self.queue(job(reply));
        if stuck {
            self.metrics.store_timeout(StoreOp::Write);
            return None;
        }
        self.wait(&answer, StoreOp::Write)
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

    /// Logs the start and the end of a stall, once each.
    fn note(&self, answered: bool) {
        let mut stalled = self.stalled.lock().unwrap_or_else(|p| p.into_inner());
        if *stalled == answered {
            *stalled = !answered;
            if answered {
                tracing::info!("the store answers again; queued writes are being saved");
            } else {
                tracing::warn!(
                    wait_ms = WAIT.as_millis() as u64,
                    "the store did not answer in time; going on with the sessions in memory"
                );
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
    store: Box<dyn SessionStore>,
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
        read.answer(store.as_ref());
        busy.store(0, Ordering::Relaxed);
    }
}

/// Records every session's compactions through the store's thread, each
/// under its session's id (the name of the session's thread).
pub(crate) struct SessionSink(pub(crate) Arc<StoreWorker>);

impl SnapshotSink for SessionSink {
    fn record(&self, snapshot: &SnapshotData<'_>) -> Result<SnapshotId, SnapshotError> {
        let Some(slot) = self.0.health.snapshot_slot() else {
            self.0.metrics.store_dropped();
            return Err(SnapshotError::new(Dropped));
        };
        let owned = OwnedSnapshot {
            _slot: slot,
            source: snapshot.thread.unwrap_or_default().to_owned(),
            before: snapshot.before.clone(),
            after: snapshot.after.clone(),
            config: snapshot.config.clone(),
            report: snapshot.report.clone(),
            originals: snapshot.originals.to_vec(),
        };
        let job = |reply| Job::Snapshot(Box::new(owned), reply);
        match self.0.tell(job) {
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

/// A snapshot dropped: [`QUEUED_SNAPSHOTS`] already wait for the store.
#[derive(Debug)]
struct Dropped;

impl std::fmt::Display for Dropped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{QUEUED_SNAPSHOTS} snapshots already wait for the store: this one is not recorded (abridge_store_dropped_total)"
        )
    }
}

impl std::error::Error for Dropped {}

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
