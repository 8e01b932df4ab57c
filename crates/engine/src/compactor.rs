//! The compactor: an [`Engine`] and one [`Thread`] together, for a caller
//! with one conversation (the CLI, a script, an agent loop).

use std::sync::Arc;

use abridge_model::{Conversation, Message};
use abridge_summarize::Summarizer;
use abridge_tokens::{Calibrated, Counted, Registry, Reported};

use crate::calibration::Calibration;
use crate::config::Config;
use crate::engine::Engine;
use crate::error::Result;
use crate::event::Event;
use crate::input::Input;
use crate::limits::Limits;
use crate::report::Outcome;
use crate::snapshot::SnapshotSink;
use crate::thread::Thread;

/// Compacts one conversation according to a [`Config`].
///
/// Keep one per conversation: its thread caches token counts per message
/// and remembers when it last compacted (for `trigger.every_iterations`).
/// Many conversations share one [`Engine`] and keep a [`Thread`] each.
#[derive(Debug)]
pub struct Compactor {
    engine: Arc<Engine>,
    thread: Thread,
}

impl Compactor {
    /// A compactor with the built-in model registry plus the config's `[models]`.
    pub fn new(config: Config) -> Result<Self> {
        Ok(Compactor::from_engine(Arc::new(Engine::new(config)?)))
    }

    /// A compactor with the given registry (the config's `[models]` are added to it).
    pub fn with_registry(config: Config, registry: Registry) -> Result<Self> {
        let engine = Engine::builder(config).registry(registry).build()?;
        Ok(Compactor::from_engine(Arc::new(engine)))
    }

    /// A new conversation on a shared engine.
    pub fn from_engine(engine: Arc<Engine>) -> Self {
        let thread = Thread::new(&engine);
        Compactor { engine, thread }
    }

    /// The engine.
    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// The conversation's state.
    pub fn thread(&self) -> &Thread {
        &self.thread
    }

    /// The conversation's state, e.g. to resume it from a store.
    pub fn thread_mut(&mut self) -> &mut Thread {
        &mut self.thread
    }

    /// Replaces its engine's summarizer cascade (see [`EngineBuilder::summarizers`](crate::EngineBuilder::summarizers)).
    pub fn set_summarizers(&mut self, cascade: Vec<Box<dyn Summarizer>>) {
        Arc::make_mut(&mut self.engine).set_summarizers(cascade);
    }

    /// Records its compactions in `store` (see [`EngineBuilder::store`](crate::EngineBuilder::store)).
    pub fn set_store(&mut self, store: Box<dyn SnapshotSink>) {
        Arc::make_mut(&mut self.engine).set_store(store);
    }

    /// Calls `f` with every event of its engine (see [`EngineBuilder::subscribe`](crate::EngineBuilder::subscribe)).
    pub fn subscribe(&mut self, f: impl FnMut(&Event) + Send + 'static) {
        Arc::make_mut(&mut self.engine).subscribe(f);
    }

    /// The config.
    pub fn config(&self) -> &Config {
        self.engine.config()
    }

    /// Window, thresholds and budgets derived from the config and registry.
    pub fn limits(&self) -> &Limits {
        self.engine.limits()
    }

    /// What briefings should focus on (passed to every summarizer), e.g.
    /// from an agent's `compact_history` call; `None` to clear.
    pub fn set_focus(&mut self, focus: Option<String>) {
        self.thread.set_focus(focus);
    }

    /// The correction to the provider's count learned so far.
    pub fn calibration(&self) -> Calibration {
        self.thread.calibration()
    }

    /// Starts from a known correction (e.g. a session resumed from a store).
    pub fn set_calibration(&mut self, c: Calibration) {
        self.thread.set_calibration(c);
    }

    /// abridge's count in the provider's units.
    pub fn calibrated(&self, tokens: Counted) -> Calibrated {
        self.thread.calibrated(tokens)
    }

    /// Tokens of a history: messages plus tool declarations.
    pub fn count(&mut self, conv: &Conversation) -> Counted {
        self.thread.count(conv)
    }

    /// Tokens of a history's tool declarations.
    pub fn tool_tokens(&mut self, conv: &Conversation) -> Counted {
        self.thread.tool_tokens(conv)
    }

    /// Token count of each message.
    pub fn message_tokens(&mut self, messages: &[Message]) -> Vec<Counted> {
        self.thread.message_tokens(messages)
    }

    /// Runs one turn of the conversation (see [`Thread::turn`]).
    pub fn turn<'a>(&mut self, input: Input<'a>) -> Result<Outcome<'a>> {
        self.thread.turn(&self.engine, input)
    }

    /// Evaluates one agent turn: emits a history-size event, and compacts
    /// when a trigger fires. `usage` is the provider-reported prompt tokens
    /// of the last response, when the caller has it.
    ///
    /// An unchanged history is returned borrowed, without copying. On error
    /// the caller's history is untouched and an event says why.
    pub fn on_turn<'a>(
        &mut self,
        conv: &'a Conversation,
        usage: Option<Reported>,
    ) -> Result<Outcome<'a>> {
        if let Some(u) = usage {
            self.thread.reported(u);
        }
        self.turn(Input::evaluate(conv))
    }

    /// Compacts now to the target (`budget.target_tokens`, or the derived
    /// one); without any target, clips old content without dropping
    /// iterations. A history already at or under the target is returned
    /// borrowed.
    pub fn compact<'a>(&mut self, conv: &'a Conversation) -> Result<Outcome<'a>> {
        self.turn(Input::compact(conv))
    }

    /// Compacts now to `target` tokens (in the provider's units, as
    /// calibrated), e.g. after the provider refused the history as too long.
    pub fn compact_to<'a>(
        &mut self,
        conv: &'a Conversation,
        target: Calibrated,
    ) -> Result<Outcome<'a>> {
        self.turn(Input::compact_to(conv, target))
    }

    /// Compacts now because the agent asked (`compact_history`): everything
    /// before the last `keep_iterations` iterations becomes a briefing (or is
    /// dropped when no summarizer gives one), whatever the triggers say.
    pub fn compact_on_request<'a>(
        &mut self,
        conv: &'a Conversation,
        keep_iterations: usize,
        focus: Option<String>,
    ) -> Result<Outcome<'a>> {
        let kept = self.thread.state().focus.clone();
        self.thread.set_focus(focus);
        let outcome = self.turn(Input::requested(conv, keep_iterations));
        self.thread.set_focus(kept);
        outcome
    }
}
