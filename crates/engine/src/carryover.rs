//! A compaction carried over to the same history grown longer.
//!
//! An agent that keeps its full history, or a client behind a proxy, sends
//! the whole history every turn. Once a prefix of it has been compacted, the
//! next request should send *that compacted prefix again, byte for byte*,
//! plus the messages added since: the provider's prompt cache stays warm
//! and the prefix is neither recounted nor summarized again. A history that
//! no longer starts with the messages that were compacted (edited, rewound)
//! is detected by its [`PrefixKey`] and compacted afresh. A
//! [`Thread`](crate::Thread) keeps the carryover; a turn whose input is
//! [`resent`](crate::Input::resent) applies it.

use abridge_model::{Conversation, Message, chained};
use abridge_tokens::{Counted, TokenCounter, TokenCounts};
use serde::{Deserialize, Serialize};

/// Identity of a history prefix: how many messages, and their chained
/// fingerprint ([`chained`] from [`PrefixKey::EMPTY`]), which a caller that
/// no longer holds a prefix can still [`extend`](PrefixKey::extend).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PrefixKey {
    /// Messages in the prefix.
    pub len: usize,
    /// The chain of those messages' fingerprints.
    pub fingerprint: u64,
}

impl PrefixKey {
    /// The key of no messages. (Keys stored by earlier builds hashed a
    /// whole prefix at once: they match nothing, and such a session's
    /// history is compacted afresh once.)
    pub const EMPTY: PrefixKey = PrefixKey {
        len: 0,
        fingerprint: 0x6162_7269_6467_6521,
    };

    /// The key of all of `messages`.
    pub fn of(messages: &[Message]) -> PrefixKey {
        PrefixKey::EMPTY.extend(messages)
    }

    /// The key of this prefix followed by `messages`.
    pub fn extend(self, messages: &[Message]) -> PrefixKey {
        PrefixKey {
            len: self.len + messages.len(),
            fingerprint: messages.iter().fold(self.fingerprint, chained),
        }
    }

    /// True when `history` starts with exactly the messages this key names.
    pub fn matches(&self, history: &[Message]) -> bool {
        history
            .get(..self.len)
            .is_some_and(|p| PrefixKey::of(p) == *self)
    }
}

/// What an earlier compaction made of a history prefix.
#[derive(Debug, Clone, PartialEq)]
pub struct Carryover {
    source: PrefixKey,
    messages: Vec<Message>,
    tokens: Counted,
}

impl Carryover {
    /// `source` (the history as it was sent) became `compacted`, whose
    /// messages count `tokens` (tool declarations not included).
    pub fn new(source: &[Message], compacted: Vec<Message>, tokens: Counted) -> Carryover {
        Carryover::from_parts(PrefixKey::of(source), compacted, tokens)
    }

    /// A carryover from its stored parts.
    pub fn from_parts(source: PrefixKey, compacted: Vec<Message>, tokens: Counted) -> Carryover {
        Carryover {
            source,
            messages: compacted,
            tokens,
        }
    }

    /// The prefix it replaces.
    pub fn source(&self) -> PrefixKey {
        self.source
    }

    /// The compacted messages that replace it.
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// Tokens of those messages.
    pub fn tokens(&self) -> Counted {
        self.tokens
    }

    /// Counts its messages again with `counter` (another tokenizer's).
    pub(crate) fn recount(&mut self, counter: &mut TokenCounter) {
        self.tokens = counter
            .count_messages(&self.messages)
            .iter()
            .map(TokenCounts::total)
            .sum();
    }

    /// True when `history` still starts with the prefix that was compacted.
    pub fn applies_to(&self, history: &Conversation) -> bool {
        self.applies_after(&PrefixKey::EMPTY, history)
    }

    /// The same for a `history` that leaves out its first messages, named
    /// by `left_out`: it holds only what follows them.
    pub fn applies_after(&self, left_out: &PrefixKey, history: &Conversation) -> bool {
        self.source
            .len
            .checked_sub(left_out.len)
            .and_then(|n| history.messages.get(..n))
            .is_some_and(|held| left_out.extend(held) == self.source)
    }

    /// The compacted prefix followed by the messages `history` added since,
    /// in `history`'s envelope; `None` when `history` diverged.
    pub fn apply(&self, history: &Conversation) -> Option<Conversation> {
        self.apply_after(&PrefixKey::EMPTY, history)
    }

    /// The same for a `history` that leaves out its first messages, named
    /// by `left_out`.
    pub fn apply_after(
        &self,
        left_out: &PrefixKey,
        history: &Conversation,
    ) -> Option<Conversation> {
        self.applies_after(left_out, history)
            .then(|| self.apply_unchecked(history, left_out.len))
    }

    /// The compacted prefix followed by what `history` (which leaves out
    /// its first `left_out` messages) holds after the source.
    pub(crate) fn apply_unchecked(&self, history: &Conversation, left_out: usize) -> Conversation {
        let added = &history.messages[self.source.len - left_out..];
        let mut messages = Vec::with_capacity(self.messages.len() + added.len());
        messages.extend_from_slice(&self.messages);
        messages.extend_from_slice(added);
        Conversation {
            messages,
            ..history.clone_envelope()
        }
    }
}
