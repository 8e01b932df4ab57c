//! History continuity: an earlier compaction carried over to the same
//! history grown longer.
//!
//! An agent that keeps its full history, or a client behind a proxy, sends
//! the whole history every turn. Once a prefix of it has been compacted, the
//! next request should send *that compacted prefix again, byte for byte*,
//! plus the messages added since: the provider's prompt cache stays warm
//! and the prefix is neither recounted nor summarized again. A history that
//! no longer starts with the messages that were compacted (edited, rewound)
//! is detected by its [`PrefixKey`] and compacted afresh.
//!
//! ```
//! use abridge::{Compactor, Config, Continuity, model::decode};
//!
//! let config = Config::from_toml("[trigger]\nmax_tokens = 1200\n[budget]\nclear_at_least = 100\nmin_iterations = 1")?;
//! let mut compactor = Compactor::new(config)?;
//! let mut continuity = Continuity::new();
//! let bytes = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/coding-agent.openai.json"))?;
//! let mut history = decode(&bytes)?.remove(0);
//! let first = continuity.turn(&mut compactor, &history, None)?;
//! assert!(first.report.compacted);
//! let sent = first.conversation.into_owned();
//!
//! // The client sends its whole history again, one message longer.
//! history.messages.push(abridge::model::Message::text(abridge::model::Role::User, "Thanks."));
//! let next = continuity.turn(&mut compactor, &history, None)?;
//! assert_eq!(next.conversation.messages[..sent.messages.len()], sent.messages[..]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::borrow::Cow;

use abridge_model::{Conversation, Message, fingerprint};
use serde::{Deserialize, Serialize};

use crate::compactor::Compactor;
use crate::error::Result;
use crate::report::Outcome;

/// Identity of a history prefix: how many messages, and their fingerprint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PrefixKey {
    /// Messages in the prefix.
    pub len: usize,
    /// [`fingerprint`] of those messages.
    pub fingerprint: u64,
}

impl PrefixKey {
    /// The key of all of `messages`.
    pub fn of(messages: &[Message]) -> PrefixKey {
        PrefixKey {
            len: messages.len(),
            fingerprint: fingerprint(messages),
        }
    }

    /// True when `history` starts with exactly the messages this key names.
    pub fn matches(&self, history: &[Message]) -> bool {
        history
            .get(..self.len)
            .is_some_and(|p| fingerprint(p) == self.fingerprint)
    }
}

/// What an earlier compaction made of a history prefix.
#[derive(Debug, Clone, PartialEq)]
pub struct Carryover {
    source: PrefixKey,
    messages: Vec<Message>,
    tokens: u64,
}

impl Carryover {
    /// `source` (the history as it was sent) became `compacted`, whose
    /// messages count `tokens` (tool declarations not included).
    pub fn new(source: &[Message], compacted: Vec<Message>, tokens: u64) -> Carryover {
        Carryover::from_parts(PrefixKey::of(source), compacted, tokens)
    }

    /// A carryover from its stored parts.
    pub fn from_parts(source: PrefixKey, compacted: Vec<Message>, tokens: u64) -> Carryover {
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
    pub fn tokens(&self) -> u64 {
        self.tokens
    }

    /// True when `history` still starts with the prefix that was compacted.
    pub fn applies_to(&self, history: &Conversation) -> bool {
        self.source.matches(&history.messages)
    }

    /// The compacted prefix followed by the messages `history` added since,
    /// in `history`'s envelope; `None` when `history` diverged.
    pub fn apply(&self, history: &Conversation) -> Option<Conversation> {
        self.applies_to(history)
            .then(|| self.apply_unchecked(history))
    }

    fn apply_unchecked(&self, history: &Conversation) -> Conversation {
        let added = &history.messages[self.source.len..];
        let mut messages = Vec::with_capacity(self.messages.len() + added.len());
        messages.extend_from_slice(&self.messages);
        messages.extend_from_slice(added);
        Conversation {
            messages,
            ..history.clone_envelope()
        }
    }
}

/// One conversation's continuity across requests that resend it whole.
#[derive(Debug, Clone, Default)]
pub struct Continuity {
    carry: Option<Carryover>,
    /// The history of the last turn: its length and the tokens of the
    /// messages sent for it (carried prefix plus added messages).
    last: Option<Seen>,
}

#[derive(Debug, Clone, Copy)]
struct Seen {
    len: usize,
    tokens: u64,
}

impl Continuity {
    /// Nothing compacted yet.
    pub fn new() -> Self {
        Continuity::default()
    }

    /// Resumes from a stored carryover.
    pub fn resume(carry: Carryover) -> Self {
        Continuity {
            carry: Some(carry),
            last: None,
        }
    }

    /// The compaction carried over, if any.
    pub fn carryover(&self) -> Option<&Carryover> {
        self.carry.as_ref()
    }

    /// Evaluates a turn of a client that sent its whole `history`: the
    /// earlier compaction is applied when `history` still starts with what it
    /// compacted (only the added messages are counted), and the result goes
    /// through [`Compactor::on_turn`]'s triggers. A new compaction replaces
    /// the carryover; a diverged history drops it. On error (the history
    /// cannot shrink to the target) the carryover is kept: send
    /// [`Carryover::apply`] of the history if it still applies, which keeps
    /// the cached prefix, or the history itself.
    pub fn turn<'a>(
        &mut self,
        compactor: &mut Compactor,
        history: &'a Conversation,
        usage: Option<u64>,
    ) -> Result<Outcome<'a>> {
        self.last = None;
        let Some(carry) = self.carry.take().filter(|c| c.applies_to(history)) else {
            let tokens = compactor
                .message_tokens(&history.messages)
                .iter()
                .sum::<u64>();
            return self.evaluate(compactor, history, tokens, usage);
        };
        let added = &history.messages[carry.source.len..];
        let tokens = carry.tokens + compactor.message_tokens(added).iter().sum::<u64>();
        self.carry = Some(carry);
        self.evaluate(compactor, history, tokens, usage)
    }

    /// [`turn`](Self::turn) for a history whose first `unchanged` messages
    /// the caller knows are the last turn's whole history (it compared the
    /// bytes): nothing before them is hashed or counted again, so a turn
    /// costs what the added messages cost. Anything else takes
    /// [`turn`](Self::turn).
    pub fn turn_appended<'a>(
        &mut self,
        compactor: &mut Compactor,
        history: &'a Conversation,
        unchanged: usize,
        usage: Option<u64>,
    ) -> Result<Outcome<'a>> {
        let Some(seen) = self
            .last
            .take()
            .filter(|s| s.len == unchanged && unchanged <= history.messages.len())
        else {
            return self.turn(compactor, history, usage);
        };
        let added = &history.messages[unchanged..];
        let tokens = seen.tokens + compactor.message_tokens(added).iter().sum::<u64>();
        self.evaluate(compactor, history, tokens, usage)
    }

    /// Evaluates the history as sent (the carried prefix applied), whose
    /// messages count `tokens`.
    fn evaluate<'a>(
        &mut self,
        compactor: &mut Compactor,
        history: &'a Conversation,
        tokens: u64,
        usage: Option<u64>,
    ) -> Result<Outcome<'a>> {
        let tools = compactor.tool_tokens(history);
        let Some(carry) = &self.carry else {
            let outcome = compactor.evaluate(history, tokens + tools, usage)?;
            self.remember(history, &outcome, tools);
            return Ok(outcome);
        };
        let conv = carry.apply_unchecked(history);
        let outcome = compactor.evaluate(&conv, tokens + tools, usage)?;
        self.remember(history, &outcome, tools);
        let report = outcome.report;
        let compacted = match outcome.conversation {
            Cow::Owned(c) => Some(c),
            Cow::Borrowed(_) => None,
        };
        Ok(Outcome {
            conversation: Cow::Owned(compacted.unwrap_or(conv)),
            report,
        })
    }

    /// Compacts `history` now to `target` tokens (see
    /// [`Compactor::compact_to`]), starting from the carried-over prefix when
    /// it still applies; the result is carried over to the next turn.
    pub fn compact_to(
        &mut self,
        compactor: &mut Compactor,
        history: &Conversation,
        target: u64,
    ) -> Result<Conversation> {
        let view = match self.carry.as_ref().and_then(|c| c.apply(history)) {
            Some(v) => v,
            None => history.clone(),
        };
        let outcome = compactor.compact_to(&view, target)?;
        let tools = compactor.tool_tokens(history);
        let tokens = outcome.report.tokens_after.saturating_sub(tools);
        let compacted = outcome.conversation.into_owned();
        self.carry = Some(Carryover::new(
            &history.messages,
            compacted.messages.clone(),
            tokens,
        ));
        self.last = Some(Seen {
            len: history.messages.len(),
            tokens,
        });
        Ok(compacted)
    }

    /// Remembers what this turn sent: a compaction becomes the carryover.
    fn remember(&mut self, history: &Conversation, outcome: &Outcome<'_>, tools: u64) {
        let tokens = outcome.report.tokens_after.saturating_sub(tools);
        self.last = Some(Seen {
            len: history.messages.len(),
            tokens,
        });
        if outcome.report.compacted {
            self.carry = Some(Carryover::new(
                &history.messages,
                outcome.conversation.messages.clone(),
                tokens,
            ));
        }
    }
}
