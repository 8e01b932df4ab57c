//! What the store's threads are given: snapshots to write, and reads for
//! whichever thread answers them.

use std::sync::Arc;
use std::sync::mpsc::SyncSender;

use abridge::model::Conversation;
use abridge::recall::{Handle, Original, StoredOriginal};
use abridge::{Config, Report};
use abridge_store::{SessionRecord, SessionStore};

/// A snapshot, owned, to be written on the store's thread.
pub(super) struct OwnedSnapshot {
    pub(super) source: String,
    pub(super) before: Conversation,
    pub(super) after: Conversation,
    pub(super) config: Config,
    pub(super) report: Report,
    pub(super) originals: Vec<Arc<Original>>,
}

pub(super) type Reply<T> = SyncSender<abridge_store::Result<T>>;

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
