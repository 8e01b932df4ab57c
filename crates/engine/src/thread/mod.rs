//! A conversation's state between turns, and the one place that decides
//! when and how a turn compacts.
//!
//! A [`Thread`] holds what one conversation learned: the calibration to the
//! provider's count, the compaction carried over to the next turn, what was
//! last sent, the cadence, a token cache and what briefings should focus
//! on. [`Thread::turn`] takes an [`Input`] that says what the caller knows
//! — a history to evaluate, one that extends the last by some messages, the
//! client's whole log resent, a forced target, an agent's request — and
//! every front end (the [`Compactor`](crate::Compactor), the
//! [`History`](crate::History), the proxy, the packages) calls it.
//!
//! ```
//! use abridge::{Config, Engine, Input, Thread, model::{decode, Message, Role}};
//!
//! let config = Config::from_toml("[trigger]\nmax_tokens = 1200\n[budget]\nclear_at_least = 100\nmin_iterations = 1")?;
//! let engine = Engine::new(config)?;
//! let mut thread = Thread::new(&engine);
//! let bytes = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/coding-agent.openai.json"))?;
//! let mut history = decode(&bytes)?.remove(0);
//! let first = thread.turn(&engine, Input::evaluate(&history).resent())?;
//! assert!(first.report.compacted);
//! let sent = first.conversation.into_owned();
//!
//! // The client sends its whole history again, one message longer: the
//! // compacted prefix goes again byte for byte.
//! let before = history.messages.len();
//! history.messages.push(Message::text(Role::User, "Thanks."));
//! let next = thread.turn(&engine, Input::evaluate(&history).resent().extending(before))?;
//! assert_eq!(next.conversation.messages[..sent.messages.len()], sent.messages[..]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod act;
mod measure;

use std::borrow::Cow;
use std::time::Instant;

use abridge_model::{Conversation, Message};
use abridge_tokens::{Calibrated, Counted, Reported, TokenCounter, TokenCounts};

use crate::calibration::Calibration;
use crate::carryover::Carryover;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::evaluation::Eval;
use crate::input::{Action, Input};
use crate::recall::HandleKey;
use crate::report::Outcome;
use crate::state::ThreadState;

/// One conversation's state between turns. Keep one per conversation, with
/// the [`Engine`] it was made for.
#[derive(Debug)]
pub struct Thread {
    state: ThreadState,
    /// The last turn, for a next one that extends it.
    last: Option<Seen>,
    /// Prompt tokens the provider reported for the last history sent,
    /// waiting for the next turn.
    reported: Option<Reported>,
    counter: TokenCounter,
    /// Its name, handed to the snapshot store.
    name: Option<String>,
    /// The key its handles are derived with (a shared proxy's tenant).
    key: Option<HandleKey>,
    /// Tokens of the last turn's history as its caller sent it.
    client: Counted,
}

/// What the last turn saw: how long the caller's history was (the history
/// returned, for a caller that sends it; the log, for one that resends its
/// own), and the tokens (tool declarations aside) and iterations of what
/// was sent for it.
#[derive(Debug, Clone, Copy)]
struct Seen {
    len: usize,
    tokens: Counted,
    iterations: usize,
    /// Tokens of the tool declarations.
    tools: Counted,
    /// Tokens of the messages as the caller sent them (what a carried
    /// compaction replaced counted as it was).
    client: Counted,
}

/// What a turn measured of its input (see [`Thread::measure`]).
struct Measured {
    /// The compaction carried over, taken out while the turn runs.
    carry: Option<Carryover>,
    /// The history as it goes out, when a carried prefix applies.
    view: Option<Conversation>,
    /// Tokens of its messages.
    tokens: Counted,
    /// Tokens of its messages as the caller sent them (with what a carried
    /// compaction replaced, counted as it was).
    client: Counted,
    iterations: usize,
    /// Tokens of its tool declarations.
    tools: Counted,
    /// Tokens of the recall tool's declaration when the caller adds it
    /// ([`EngineBuilder::declares_recall_tool`](crate::EngineBuilder::declares_recall_tool)): to every rewritten history.
    recall_tool: Counted,
    /// The same when this history goes out rewritten (a carried prefix
    /// applied), else none.
    declared: Counted,
    /// It extends what the last turn sent: the provider's count of that
    /// is a count of its prefix.
    extends: bool,
}

impl Thread {
    /// A new conversation.
    pub fn new(engine: &Engine) -> Thread {
        Thread::resume(engine, ThreadState::default())
    }

    /// A conversation resumed from its stored state.
    pub fn resume(engine: &Engine, state: ThreadState) -> Thread {
        Thread {
            state,
            last: None,
            reported: None,
            counter: engine.counter(),
            name: None,
            key: None,
            client: Counted::ZERO,
        }
    }

    /// Names the conversation (its snapshots are recorded under the name).
    pub fn set_name(&mut self, name: impl Into<String>) {
        self.name = Some(name.into());
    }

    /// Derives the handles of what its compactions replace with `key` (a
    /// shared proxy's tenant): they resolve only through a
    /// [`RecallScope`](crate::recall::RecallScope) with the same key.
    pub fn set_handle_key(&mut self, key: HandleKey) {
        self.key = Some(key);
    }

    /// Turns it has taken that checked the triggers (one per request of a
    /// proxy session), a restored thread's included.
    pub fn turns(&self) -> u64 {
        self.state.turns
    }

    /// What is kept across restarts.
    pub fn state(&self) -> &ThreadState {
        &self.state
    }

    /// Tokens of the last turn's history as its caller sent it (messages
    /// and tool declarations; what a carried compaction replaced counted
    /// as it was, not as it goes out).
    pub fn client_tokens(&self) -> Counted {
        self.client
    }

    /// The correction to the provider's count learned so far.
    pub fn calibration(&self) -> Calibration {
        self.state.calibration
    }

    /// Starts from a known correction.
    pub fn set_calibration(&mut self, c: Calibration) {
        self.state.calibration = c;
    }

    /// About how many bytes it holds in memory: the carried compaction's
    /// messages, the kept briefing's sheet and the count cache (what an
    /// owner of many threads budgets).
    pub fn memory(&self) -> usize {
        /// A message's and one part's structs beside their text.
        const PER_MESSAGE: usize = size_of::<Message>() + size_of::<abridge_model::Part>();
        let carried: usize = self.state.carryover.as_ref().map_or(0, |c| {
            c.messages()
                .iter()
                .map(|m| PER_MESSAGE + m.text_bytes())
                .sum()
        });
        let sheet: usize = self.state.briefing.as_ref().map_or(0, |b| {
            b.sheet
                .sections
                .iter()
                .flat_map(|s| &s.items)
                .map(|i| 48 + i.text.len() + i.key.as_ref().map_or(0, String::len))
                .sum()
        });
        size_of::<Thread>() + carried + sheet + self.counter.cache_bytes()
    }

    /// The compaction carried over to the next turn, if any.
    pub fn carryover(&self) -> Option<&Carryover> {
        self.state.carryover.as_ref()
    }

    /// Carries over a compaction made elsewhere (a background preparation):
    /// the next turn of a resent log that still starts with what it
    /// compacted sends it.
    pub fn adopt(&mut self, carry: Carryover) {
        // What it replaced was counted elsewhere: its own size stands in.
        self.state.carried_source = None;
        self.state.carryover = Some(carry);
        self.last = None;
    }

    /// What briefings should focus on; `None` to clear.
    pub fn set_focus(&mut self, focus: Option<String>) {
        self.state.focus = focus;
    }

    /// The provider reported `prompt_tokens` for the last history sent;
    /// the next turn learns from it (and checks `trigger.usage_tokens`).
    pub fn reported(&mut self, prompt_tokens: Reported) {
        self.reported = Some(prompt_tokens).filter(|t| *t > Reported::ZERO);
    }

    /// abridge's count in the provider's units.
    pub fn calibrated(&self, tokens: Counted) -> Calibrated {
        self.state.calibration.apply(tokens)
    }

    /// Tokens of a history: messages plus tool declarations.
    pub fn count(&mut self, conv: &Conversation) -> Counted {
        self.counter.count_conversation(conv)
    }

    /// Tokens of a history's tool declarations.
    pub fn tool_tokens(&mut self, conv: &Conversation) -> Counted {
        self.counter.count_tools(conv.tools.as_deref())
    }

    /// Token count of each message.
    pub fn message_tokens(&mut self, messages: &[Message]) -> Vec<Counted> {
        messages.iter().map(|m| self.tokens_of(m)).collect()
    }

    /// Tokens of some messages together: what is new to the cache is
    /// counted on every core when there is enough of it (a session's first
    /// request, a resent log the proxy has not seen).
    fn sum_of(&mut self, messages: &[Message]) -> Counted {
        self.counter
            .count_messages(messages)
            .iter()
            .map(TokenCounts::total)
            .sum()
    }

    fn tokens_of(&mut self, m: &Message) -> Counted {
        self.counter.count_message(m).total()
    }

    /// One turn: counts what the input adds, emits a history-size event and
    /// does what the input asks. An unchanged history is returned borrowed.
    /// On error the caller's history is untouched, an event says why, and
    /// what was carried over stays: send [`Carryover::apply`] of a resent
    /// log if it still applies (the cached prefix stays), or the history.
    pub fn turn<'a>(&mut self, engine: &Engine, input: Input<'a>) -> Result<Outcome<'a>> {
        let start = Instant::now();
        if !self.takes(&input) {
            return Err(Error::LeftOut(input.left_out.len));
        }
        input.cancel.check()?;
        // A request's turn: not a compaction forced after an overflow or
        // asked by the agent between its requests.
        if input.action == Action::Evaluate {
            self.state.turns += 1;
        }
        self.follow(engine);
        let m = self.measure(engine, &input);
        self.client = m.client + m.tools;
        if let Err(e) = input.cancel.check() {
            self.state.carryover = m.carry;
            return Err(e);
        }
        let eval = Eval {
            tokens: m.tokens + m.tools + m.declared,
            calibration: self.state.calibration,
            iterations: m.iterations,
            events: Vec::new(),
            start,
            cancel: input.cancel.clone(),
        };
        let conv = m.view.as_ref().unwrap_or(input.history);
        match self.act(engine, conv, input.action, eval, m.extends) {
            Ok(outcome) => {
                let report = outcome.report;
                let rewritten = match outcome.conversation {
                    Cow::Owned(c) => Some(c),
                    Cow::Borrowed(_) => None,
                };
                // What goes out: the rewrite, else the carried prefix
                // applied, else the caller's history, borrowed.
                let conversation = match (rewritten, m.view) {
                    (Some(c), _) => Cow::Owned(c),
                    (None, Some(v)) => Cow::Owned(v),
                    (None, None) => Cow::Borrowed(input.history),
                };
                let outcome = Outcome {
                    conversation,
                    report,
                };
                // What the report's figures hold besides the messages.
                let beside = match outcome.report.compacted {
                    true => m.tools + m.recall_tool,
                    false => m.tools + m.declared,
                };
                self.remember(
                    &input,
                    &outcome,
                    m.carry,
                    m.iterations,
                    m.tools,
                    beside,
                    m.client,
                );
                Ok(outcome)
            }
            Err(e) => {
                if input.action == Action::Evaluate {
                    // What goes: the floor when there is one (the provider's
                    // next count is of it), else the history as it is.
                    self.state.last_sent = Some(match &e {
                        Error::CannotShrink {
                            report: Some(floor),
                            ..
                        } => floor.tokens_after,
                        _ => m.tokens + m.tools + m.declared,
                    });
                }
                self.state.carryover = m.carry;
                Err(e)
            }
        }
    }

    /// Takes the model of `engine` as this turn's: when it is not the last
    /// turn's, the last one's calibration learns from its pending report and
    /// is put aside, the new model's (or a fresh one) is taken back, and a
    /// model counted with another tokenizer counts everything anew. The
    /// carried compaction, the cadence and the kept briefing stay: the turn
    /// checks them against the new model's limits.
    fn follow(&mut self, engine: &Engine) {
        /// Models whose calibrations a thread keeps besides its current one.
        const MODELS: usize = 16;
        let model = engine.config().model.as_deref();
        let state = &mut self.state;
        if state.model.as_deref() == model {
            return;
        }
        if let Some(old) = state.model.take() {
            if let (Some(reported), Some(sent)) = (self.reported.take(), state.last_sent.take()) {
                state.calibration.observe(sent, reported);
            }
            if state.calibrations.len() >= MODELS {
                state.calibrations.pop_first();
            }
            state.calibrations.insert(old, state.calibration);
            state.calibration = model
                .and_then(|m| state.calibrations.remove(m))
                .unwrap_or_default();
        }
        // Else the first turn, or a state stored before models were: its
        // calibration is taken for this model's.
        state.model = model.map(str::to_owned);
        if self.counter.kind() != engine.limits().tokenizer {
            self.counter = engine.counter();
            self.last = None;
            state.last_sent = None;
            if let Some(carry) = state.carryover.as_mut() {
                carry.recount(&mut self.counter);
            }
        }
    }

    /// Answers a call of the recall tool in this conversation: an original
    /// by its handle, or a search of every original its compactions kept
    /// (see [`Engine::recall_in`]; `scope`: a shared proxy's tenant and
    /// session).
    pub fn recall(
        &self,
        engine: &Engine,
        arguments: &serde_json::Value,
        scope: Option<&crate::recall::RecallScope>,
    ) -> crate::recall::Answer {
        engine.recall_in(arguments, scope, &self.state.handles)
    }

    /// Whether a turn can take `input`: a history that leaves out its first
    /// messages ([`Input::after`]) needs a carried compaction that covers
    /// them and goes on into what the history holds.
    pub fn takes(&self, input: &Input<'_>) -> bool {
        let left_out = &input.left_out;
        let covers = |c: &Carryover| {
            c.source().len >= left_out.len
                && (self.last.as_ref().is_some_and(|s| s.extended_by(input))
                    || c.applies_after(left_out, input.history))
        };
        left_out.len == 0 || input.resent && self.state.carryover.as_ref().is_some_and(covers)
    }
}
