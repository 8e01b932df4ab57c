//! An agent's history kept by abridge, with per-message counts, so that a
//! turn costs the new messages rather than the whole history.

use std::borrow::Cow;
use std::time::Duration;

use abridge_model::{Arguments, Conversation, Format, Message, continues_turn};
use abridge_tokens::{Counted, Reported};

use crate::agent::{self, Answered};
use crate::compactor::Compactor;
use crate::error::{Error, Result};
use crate::input::Input;
use crate::report::{Outcome, Report};

/// A conversation that grows turn by turn and compacts itself.
///
/// ```
/// use abridge::{Compactor, Config, History, model::{Conversation, Family, Message, Role}, tokens::Counted};
///
/// let config = Config::from_toml("[trigger]\nmax_tokens = 2000\n[budget]\nclear_at_least = 200")?;
/// let mut history = History::new(Compactor::new(config)?, Conversation::new(Family::OpenAi));
/// history.push(Message::text(Role::User, "Summarise the logs."));
/// for i in 0..60 {
///     history.push(Message::text(Role::Assistant, format!("Reading part {i}.")));
///     history.push(Message::text(Role::User, format!("[validation] part {i}: {}", "log line ".repeat(20))));
///     let turn = history.turn(None)?;
///     assert!(turn.tokens <= Counted::new(2000));
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct History {
    compactor: Compactor,
    conv: Conversation,
    tokens: Vec<Counted>,
    tools: Counted,
    total: Counted,
    /// Messages of the history the last turn returned.
    sent: usize,
    /// Turns taken (the status note's cadence).
    turns: u64,
}

/// What one turn did: the one result type of a turn, for the library and
/// (as JSON: `{tokens, compacted, report, duration_us}`) for the packages.
#[derive(Debug, Clone)]
pub struct TurnReport {
    /// Tokens of the history after the turn.
    pub tokens: Counted,
    /// The compaction report, when a trigger fired.
    pub report: Option<Report>,
    /// Engine time spent in this turn.
    pub duration: Duration,
}

impl TurnReport {
    /// True when the history was rewritten this turn.
    pub fn compacted(&self) -> bool {
        self.report.as_ref().is_some_and(|r| r.compacted)
    }
}

impl serde::Serialize for TurnReport {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut out = s.serialize_struct("TurnReport", 4)?;
        out.serialize_field("tokens", &self.tokens)?;
        out.serialize_field("compacted", &self.compacted())?;
        out.serialize_field("report", &self.report)?;
        out.serialize_field("duration_us", &(self.duration.as_micros() as u64))?;
        out.end()
    }
}

impl History {
    /// Starts from an existing conversation (counted once).
    pub fn new(mut compactor: Compactor, conv: Conversation) -> Self {
        let tokens = compactor.message_tokens(&conv.messages);
        let tools = compactor.count(&conv.clone_envelope());
        History {
            total: tokens.iter().copied().sum::<Counted>() + tools,
            compactor,
            conv,
            tokens,
            tools,
            sent: 0,
            turns: 0,
        }
    }

    /// Appends a message; only this message is tokenized. Returns its tokens.
    /// A Responses item of the model's side right after another continues
    /// its turn (one iteration for the step cadence, kept together).
    pub fn push(&mut self, mut m: Message) -> Counted {
        if self.conv.format == Format::Responses {
            m.meta.continues_turn = continues_turn(self.conv.messages.last(), &m);
        }
        let t = self.compactor.message_tokens(std::slice::from_ref(&m))[0];
        self.total += t;
        self.tokens.push(t);
        self.conv.messages.push(m);
        t
    }

    /// The history to send now.
    pub fn conversation(&self) -> &Conversation {
        &self.conv
    }

    /// Tokens of the history now.
    pub fn tokens(&self) -> Counted {
        self.total
    }

    /// Tokens of each message of the history now (tool declarations aside).
    pub fn message_tokens(&self) -> &[Counted] {
        &self.tokens
    }

    /// The compactor (its engine answers the recall tool).
    pub fn compactor(&self) -> &Compactor {
        &self.compactor
    }

    /// The compactor, e.g. to subscribe to events.
    pub fn compactor_mut(&mut self) -> &mut Compactor {
        &mut self.compactor
    }

    /// Evaluates the turn: a history-size event, and a compaction when a
    /// trigger fires. Without a compaction this costs the messages pushed
    /// since the last turn. A compaction that cannot reach its target but
    /// reached a smaller valid history leaves that history (a proxy sends
    /// the same), its report saying the target it missed.
    pub fn turn(&mut self, usage: Option<Reported>) -> Result<TurnReport> {
        if let Some(u) = usage {
            self.compactor.thread_mut().reported(u);
        }
        self.turns += 1;
        let input = Input::evaluate(&self.conv).extending(self.sent);
        let outcome = match self.compactor.turn(input) {
            Ok(o) => o,
            // Over the target even at its floor: the floor is the history
            // now, as a proxy sends it, and its report says what it missed.
            Err(Error::CannotShrink {
                smallest: Some(floor),
                report: Some(report),
                ..
            }) => Outcome {
                conversation: Cow::Owned(*floor),
                report: *report,
            },
            Err(e) => {
                // The history stays as it is, and is what gets sent.
                self.sent = self.conv.messages.len();
                return Err(e);
            }
        };
        let report = outcome.report;
        let duration = Duration::from_micros(report.duration_us);
        if let Cow::Owned(conv) = outcome.conversation {
            self.tokens = self.compactor.message_tokens(&conv.messages);
            self.total = self.tokens.iter().copied().sum::<Counted>() + self.tools;
            self.conv = conv;
        }
        self.sent = self.conv.messages.len();
        Ok(TurnReport {
            tokens: self.total,
            report: report.reason.is_some().then_some(report),
            duration,
        })
    }

    /// The status note for the agent when `[agent] status_every` says one
    /// is due at this turn (every that many turns), with `spent` dollars
    /// so far when the caller knows them.
    pub fn status_due(&self, spent: Option<f64>) -> Option<String> {
        let every = self.compactor.config().agent.status_every as u64;
        if every == 0 || self.turns == 0 || self.turns % every != 0 {
            return None;
        }
        Some(self.compactor.status(self.total, spent).text())
    }

    /// Compacts as a call of the compact tool asked (its arguments): the
    /// history before its last kept messages becomes a briefing, whatever
    /// the triggers say. The history then holds the result; the call and
    /// its answer are the caller's to push after it.
    pub fn compact_requested(&mut self, arguments: &Arguments) -> Answered {
        let req = agent::parse_arguments(arguments);
        let kept = req.keep_iterations(&self.conv.messages);
        let outcome = self
            .compactor
            .compact_on_request(&self.conv, kept, req.focus);
        let (text, is_error) = agent::answer(&outcome, kept);
        let mut answered = Answered {
            text,
            is_error,
            compacted: false,
            tokens_before: self.total,
            tokens_after: self.total,
        };
        if let Ok(o) = outcome
            && o.report.compacted
            && let Cow::Owned(conv) = o.conversation
        {
            self.tokens = self.compactor.message_tokens(&conv.messages);
            self.total = self.tokens.iter().copied().sum::<Counted>() + self.tools;
            self.conv = conv;
            self.sent = self.conv.messages.len();
            answered.compacted = true;
            answered.tokens_after = self.total;
        }
        answered
    }
}
