//! What the store's threads are asked to do: jobs for the writer, reads
//! for whichever thread answers them.

use std::sync::Arc;
use std::sync::atomic::AtomicI64;
use std::sync::mpsc::SyncSender;

use abridge::model::Conversation;
use abridge::recall::{Handle, Original, StoredOriginal};
use abridge::{Config, Report, SnapshotId};
use abridge_store::{RequestRecord, SessionRecord, SessionStore};

use super::health::SnapshotSlot;

/// A snapshot, owned, to be written on the store's thread.
pub(super) struct OwnedSnapshot {
    /// Its place among the snapshots waiting for the store.
    pub(super) _slot: SnapshotSlot,
    pub(super) source: String,
    pub(super) before: Conversation,
    pub(super) after: Conversation,
    pub(super) config: Config,
    pub(super) report: Report,
    pub(super) originals: Vec<Arc<Original>>,
}

pub(super) type Reply<T> = SyncSender<abridge_store::Result<T>>;

pub(super) enum Job {
    Snapshot(Box<OwnedSnapshot>, Reply<SnapshotId>),
    Save(Box<SessionRecord>, Arc<AtomicI64>, Reply<()>),
    Read(Read),
    Request(Box<RequestRecord>),
    /// Answered once every job queued before it is done.
    Flush(SyncSender<()>),
}

/// A read: on a reader's thread when there are any, else the writer's.
pub(super) enum Read {
    Version(String, Reply<Option<i64>>),
    Load(String, Reply<Option<SessionRecord>>),
    Original(Handle, Reply<Option<StoredOriginal>>),
}

impl Read {
    pub(super) fn answer(self, store: &dyn SessionStore) {
        match self {
            Read::Version(id, reply) => {
                let _ = reply.try_send(store.session_version(&id));
            }
            Read::Load(id, reply) => {
                let _ = reply.try_send(store.load_session(&id));
            }
            Read::Original(handle, reply) => {
                let _ = reply.try_send(store.load_original(&handle));
            }
        }
    }
}
