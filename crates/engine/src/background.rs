//! Compactions prepared in the background, so an agent loop never waits on
//! a summarizer unless it chooses to.
//!
//! When the history passes a soft threshold, [`Preparer::poll`] starts one
//! compaction on tokio's blocking pool (one at a time per conversation) on
//! a copy of the history. At the hard threshold, [`Preparer::take`] returns
//! the prepared history plus the messages added since — but only if the
//! history still begins with exactly the messages that were compacted;
//! otherwise the preparation is discarded. A preparation is a
//! [`Carryover`], which a [`Thread`] adopts.

use std::sync::Arc;

use abridge_model::Conversation;
use abridge_tokens::Calibrated;
use tokio::sync::oneshot;

use crate::carryover::{Carryover, PrefixKey};
use crate::engine::Engine;
use crate::input::Input;
use crate::recall::HandleKey;
use crate::report::{Attempt, Report};
use crate::state::ThreadState;
use crate::thread::Thread;

/// A compaction made in the background: what a thread adopts, and the
/// report of the compaction that made it (a front end that takes it
/// counts, signals and logs it as its own turn's).
#[derive(Debug, Clone)]
pub struct Prepared {
    /// The compacted history, to carry forward.
    pub carryover: Carryover,
    /// What the compaction did.
    pub report: Report,
}

/// Most discarded preparations' attempts a preparer holds for
/// [`Preparer::take_discarded`].
pub const MAX_DISCARDED: usize = 64;

/// Prepares one compaction at a time for one conversation.
pub struct Preparer {
    engine: Arc<Engine>,
    soft_tokens: Calibrated,
    running: Option<oneshot::Receiver<Option<Prepared>>>,
    ready: Option<Prepared>,
    /// The summarizer attempts of preparations discarded as stale, until
    /// taken: what they cost is spent all the same.
    discarded: Vec<Attempt>,
    started: usize,
    /// The key handles are derived with (a shared proxy's tenant).
    key: Option<HandleKey>,
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
    /// A preparer that starts work above `soft_tokens`, compacting with
    /// `engine` (its summarizers and store) on a thread of its own.
    pub fn new(soft_tokens: Calibrated, engine: Arc<Engine>) -> Self {
        Preparer {
            engine,
            soft_tokens,
            running: None,
            ready: None,
            discarded: Vec::new(),
            started: 0,
            key: None,
        }
    }

    /// Derives the handles of the compactions it prepares with `key`, as
    /// [`Thread::set_handle_key`] does.
    pub fn with_handle_key(mut self, key: HandleKey) -> Self {
        self.key = Some(key);
        self
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
    pub fn poll(&mut self, conv: &Conversation, tokens: Calibrated) {
        self.poll_after(conv, None, tokens);
    }

    /// The same for a history that may leave out its first messages
    /// ([`Input::after`]): `from` names them and the state of the
    /// conversation's thread, whose carried compaction covers them. The
    /// preparation then starts from that state and compacts the history as
    /// it goes out (the carried compaction and what follows), as the
    /// thread's own turn would; the state is copied only when a
    /// preparation starts.
    pub fn poll_after(
        &mut self,
        conv: &Conversation,
        from: Option<(&PrefixKey, &ThreadState)>,
        tokens: Calibrated,
    ) {
        self.collect();
        if tokens <= self.soft_tokens || self.running.is_some() || self.ready.is_some() {
            return;
        }
        let (tx, rx) = oneshot::channel();
        let engine = self.engine.clone();
        let snapshot = conv.clone();
        let key = self.key.clone();
        let (left_out, state) = match from {
            Some((k, s)) => (*k, Some(s.clone())),
            None => (PrefixKey::EMPTY, None),
        };
        tokio::task::spawn_blocking(move || {
            let mut thread = match state {
                Some(s) => Thread::resume(&engine, s),
                None => Thread::new(&engine),
            };
            if let Some(key) = key {
                thread.set_handle_key(key);
            }
            let input = Input::compact(&snapshot).resent().after(left_out);
            let report = thread
                .turn(&engine, input)
                .ok()
                .map(|o| o.report)
                .filter(|r| r.compacted);
            let prepared = report.and_then(|report| {
                Some(Prepared {
                    carryover: thread.carryover()?.clone(),
                    report,
                })
            });
            let _ = tx.send(prepared);
        });
        self.running = Some(rx);
        self.started += 1;
    }

    fn collect(&mut self) {
        let Some(rx) = &mut self.running else {
            return;
        };
        match rx.try_recv() {
            Ok(result) => {
                self.running = None;
                self.ready = result;
            }
            Err(oneshot::error::TryRecvError::Empty) => {}
            Err(oneshot::error::TryRecvError::Closed) => self.running = None,
        }
    }

    /// Waits for the running preparation, when the agent chooses to.
    pub async fn wait(&mut self) {
        if let Some(rx) = self.running.take()
            && let Ok(Some(p)) = rx.await
        {
            self.ready = Some(p);
        }
    }

    /// The prepared history followed by the messages added since, if `conv`
    /// still begins with the prefix that was compacted. A stale preparation
    /// is discarded. `None` when nothing usable is ready.
    pub fn take(&mut self, conv: &Conversation) -> Option<Conversation> {
        self.take_carryover(conv)?.apply(conv)
    }

    /// The ready preparation itself, if it still applies to `conv` (a
    /// [`Thread::adopt`]s it to carry it forward).
    pub fn take_carryover(&mut self, conv: &Conversation) -> Option<Carryover> {
        self.take_carryover_after(conv, &PrefixKey::EMPTY)
    }

    /// The same for a history that leaves out its first messages, named by
    /// `left_out`.
    pub fn take_carryover_after(
        &mut self,
        conv: &Conversation,
        left_out: &PrefixKey,
    ) -> Option<Carryover> {
        self.take_prepared_after(conv, left_out)
            .map(|p| p.carryover)
    }

    /// The ready preparation with its report, if it still applies to
    /// `conv`, which leaves out the messages `left_out` names.
    pub fn take_prepared_after(
        &mut self,
        conv: &Conversation,
        left_out: &PrefixKey,
    ) -> Option<Prepared> {
        self.collect();
        let ready = self.ready.take()?;
        if ready.carryover.applies_after(left_out, conv) {
            return Some(ready);
        }
        self.discarded.extend(ready.report.attempts);
        let over = self.discarded.len().saturating_sub(MAX_DISCARDED);
        self.discarded.drain(..over);
        None
    }

    /// The summarizer attempts of the preparations discarded since the last
    /// call (the newest [`MAX_DISCARDED`] at most), to account what they
    /// cost: a taken preparation's are in its report.
    pub fn take_discarded(&mut self) -> Vec<Attempt> {
        std::mem::take(&mut self.discarded)
    }
}
