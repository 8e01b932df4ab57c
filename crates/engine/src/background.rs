//! Compactions prepared in the background, so an agent loop never waits on
//! a summarizer unless it chooses to.
//!
//! When the history passes a soft threshold, [`Preparer::poll`] starts one
//! compaction on tokio's blocking pool (one at a time per conversation) on
//! a copy of the history. At the hard threshold, [`Preparer::take`] returns
//! the prepared history plus the messages added since — but only if the
//! history still begins with exactly the messages that were compacted;
//! otherwise the preparation is discarded.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

use abridge_model::Conversation;
use abridge_tokens::content_hash;
use tokio::sync::oneshot;

use crate::compactor::Compactor;

type Factory = Arc<dyn Fn() -> Compactor + Send + Sync>;

/// Identity of a history prefix: its length and a hash of its messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Prefix {
    len: usize,
    hash: u64,
}

impl Prefix {
    fn of(conv: &Conversation, len: usize) -> Option<Prefix> {
        let messages = conv.messages.get(..len)?;
        let mut h = DefaultHasher::new();
        for m in messages {
            content_hash(m).hash(&mut h);
        }
        Some(Prefix {
            len,
            hash: h.finish(),
        })
    }
}

/// Prepares one compaction at a time for one conversation.
pub struct Preparer {
    make: Factory,
    soft_tokens: u64,
    running: Option<(Prefix, oneshot::Receiver<Option<Conversation>>)>,
    ready: Option<(Prefix, Conversation)>,
    started: usize,
}

impl std::fmt::Debug for Preparer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Preparer")
            .field("soft_tokens", &self.soft_tokens)
            .field("running", &self.running.is_some())
            .field("ready", &self.ready.is_some())
            .finish_non_exhaustive()
    }
}

impl Preparer {
    /// A preparer that starts work above `soft_tokens`, building a compactor
    /// (config, summarizers, store) with `make` for each preparation.
    pub fn new(soft_tokens: u64, make: impl Fn() -> Compactor + Send + Sync + 'static) -> Self {
        Preparer {
            make: Arc::new(make),
            soft_tokens,
            running: None,
            ready: None,
            started: 0,
        }
    }

    /// How many preparations were started so far.
    pub fn started(&self) -> usize {
        self.started
    }

    /// True while a preparation runs.
    pub fn is_running(&self) -> bool {
        self.running.is_some()
    }

    /// Collects a finished preparation and, above the soft threshold with
    /// nothing running or ready, starts one. Never waits. Must be called
    /// from within a tokio runtime.
    pub fn poll(&mut self, conv: &Conversation, tokens: u64) {
        self.collect();
        if tokens <= self.soft_tokens || self.running.is_some() || self.ready.is_some() {
            return;
        }
        let Some(prefix) = Prefix::of(conv, conv.messages.len()) else {
            return;
        };
        let (tx, rx) = oneshot::channel();
        let make = self.make.clone();
        let snapshot = conv.clone();
        tokio::task::spawn_blocking(move || {
            let mut compactor = make();
            let out = compactor
                .compact(&snapshot)
                .ok()
                .filter(|o| o.report.compacted)
                .map(|o| o.conversation.into_owned());
            let _ = tx.send(out);
        });
        self.running = Some((prefix, rx));
        self.started += 1;
    }

    fn collect(&mut self) {
        let Some((prefix, rx)) = &mut self.running else {
            return;
        };
        match rx.try_recv() {
            Ok(result) => {
                let prefix = *prefix;
                self.running = None;
                self.ready = result.map(|c| (prefix, c));
            }
            Err(oneshot::error::TryRecvError::Empty) => {}
            Err(oneshot::error::TryRecvError::Closed) => self.running = None,
        }
    }

    /// Waits for the running preparation, when the agent chooses to.
    pub async fn wait(&mut self) {
        if let Some((prefix, rx)) = self.running.take() {
            if let Ok(Some(c)) = rx.await {
                self.ready = Some((prefix, c));
            }
        }
    }

    /// The prepared history followed by the messages added since, if `conv`
    /// still begins with the prefix that was compacted. A stale preparation
    /// is discarded. `None` when nothing usable is ready.
    pub fn take(&mut self, conv: &Conversation) -> Option<Conversation> {
        self.collect();
        let (prefix, mut prepared) = self.ready.take()?;
        if Prefix::of(conv, prefix.len) != Some(prefix) {
            return None;
        }
        prepared
            .messages
            .extend_from_slice(&conv.messages[prefix.len..]);
        Some(prepared)
    }
}
