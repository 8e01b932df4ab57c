//! What a turn is given: a history, how it relates to the last turn's,
//! what to do with it, and what stops it.

use abridge_model::Conversation;
use abridge_tokens::Calibrated;

use crate::cancel::Cancel;
use crate::carryover::PrefixKey;

/// What a turn is given: a history, how it relates to the last turn's, and
/// what to do with it.
#[derive(Debug, Clone)]
pub struct Input<'a> {
    pub(crate) history: &'a Conversation,
    pub(crate) resent: bool,
    pub(crate) extending: Option<usize>,
    pub(crate) left_out: PrefixKey,
    pub(crate) action: Action,
    pub(crate) cancel: Cancel,
}

/// What a turn does with its history.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Action {
    /// Check the triggers; compact when one fires.
    Evaluate,
    /// Compact now, to this target in the provider's units (or the
    /// configured one).
    Compact(Option<Calibrated>),
    /// The agent asked: brief everything before the last iterations.
    Requested { keep_iterations: usize },
}

impl<'a> Input<'a> {
    fn new(history: &'a Conversation, action: Action) -> Self {
        Input {
            history,
            resent: false,
            extending: None,
            left_out: PrefixKey::EMPTY,
            action,
            cancel: Cancel::never(),
        }
    }

    /// Check the triggers and compact when one fires. The history is what
    /// the last turn returned plus the messages added since, unless
    /// [`resent`](Self::resent) says otherwise.
    pub fn evaluate(history: &'a Conversation) -> Self {
        Input::new(history, Action::Evaluate)
    }

    /// Compact now to the configured target (`budget.target_tokens`, or the
    /// derived one); without any target, clip old content without dropping
    /// iterations.
    pub fn compact(history: &'a Conversation) -> Self {
        Input::new(history, Action::Compact(None))
    }

    /// Compact now to `target` tokens in the provider's units, e.g. after
    /// the provider refused the history as too long.
    pub fn compact_to(history: &'a Conversation, target: Calibrated) -> Self {
        Input::new(history, Action::Compact(Some(target)))
    }

    /// The agent asked (`compact_history`): everything before the last
    /// `keep_iterations` iterations becomes a briefing (or is dropped when
    /// no summarizer gives one), whatever the triggers say. The thread's
    /// focus is what the briefing concentrates on.
    pub fn requested(history: &'a Conversation, keep_iterations: usize) -> Self {
        Input::new(history, Action::Requested { keep_iterations })
    }

    /// The history is the client's own whole log, sent again on every turn
    /// (a proxy, an agent that keeps its original history): the compaction
    /// carried over applies while the log still starts with what it
    /// compacted, and a new compaction is carried over to the next turn.
    pub fn resent(mut self) -> Self {
        self.resent = true;
        self
    }

    /// The caller knows the first `unchanged` messages are the last turn's
    /// whole history, in the same envelope (it compared the bytes, or only
    /// appended messages): nothing before them, nor the tool declarations,
    /// is hashed or counted again, so the turn costs what the added
    /// messages cost. Ignored when it does not match the last turn.
    pub fn extending(mut self, unchanged: usize) -> Self {
        self.extending = Some(unchanged);
        self
    }

    /// The history leaves out its first messages, which `left_out` names,
    /// and holds only those after them: a caller that resends a log need
    /// not keep what a carried compaction already replaces. Indices
    /// ([`extending`](Self::extending)) still count from the log's start.
    /// The turn needs a carried compaction that covers what is left out
    /// ([`Thread::takes`](crate::Thread::takes)); without one it fails with
    /// [`Error::LeftOut`](crate::Error::LeftOut) and changes nothing.
    pub fn after(mut self, left_out: PrefixKey) -> Self {
        self.left_out = left_out;
        self
    }

    /// The turn stops with [`Error::Cancelled`](crate::Error::Cancelled) at
    /// its next check once `cancel` is set (e.g. the client it is for left).
    pub fn cancelled_by(mut self, cancel: &Cancel) -> Self {
        self.cancel = cancel.clone();
        self
    }
}
