//! A history that an agent loop grows message by message.

use abridge::agent::{self, Answered};
use abridge::recall::{Answer, RecallTool};
use abridge::tokens::{Counted, Reported};
use abridge::{Event, TurnReport};
use abridge_model::{Arguments, Conversation, decode_wire_messages};
use serde::Serialize;
use serde_json::{Value, json};

use crate::Wire;
use crate::error::Result;
use crate::options::Options;
use crate::shape::{Decoded, Shape};

/// What one turn of a [`Session`] did, and the status note due for the
/// agent on it, if any (add it to what the model is sent this once).
#[derive(Debug, Clone, Serialize)]
pub struct Turn {
    /// The engine's report of the turn.
    #[serde(flatten)]
    pub report: TurnReport,
    /// The status note, when `[agent] status_every` says one is due.
    pub status: Option<String>,
}

/// An agent's history kept by abridge: push what the loop adds, call
/// [`turn`](Session::turn) before each model call, send
/// [`messages`](Session::messages). Each push counts only the new message.
pub struct Session {
    inner: abridge::History,
    wire: Wire,
    shape: Shape,
}

impl Session {
    /// Starts from a body or list of messages (`None`: an empty list of
    /// `options.format`, OpenAI by default).
    pub fn new(initial: Option<Value>, options: &Options) -> Result<Self> {
        let input = match initial {
            Some(v) => Decoded::read(v, options.format)?,
            None => Decoded::read(Value::Array(Vec::new()), options.format)?,
        };
        let wire = input.wire();
        let compactor = options.compactor(&input.conversation)?;
        Ok(Session {
            inner: abridge::History::new(compactor, input.conversation),
            wire,
            shape: input.shape,
        })
    }

    /// Appends a message, or an array of messages, in the session's format.
    /// Returns the tokens they added.
    pub fn push(&mut self, messages: Value) -> Result<Counted> {
        let items = match messages {
            Value::Array(items) => items,
            one => vec![one],
        };
        let first = self.inner.conversation().messages.len();
        let decoded = decode_wire_messages(self.wire, items, first)?;
        Ok(decoded.into_iter().map(|m| self.inner.push(m)).sum())
    }

    /// Evaluates the triggers (with the provider-reported prompt tokens of
    /// the last call, when known) and compacts when one fires; says when a
    /// status note for the agent is due (`[agent] status_every`).
    pub fn turn(&mut self, usage: Option<Reported>) -> Result<Turn> {
        let report = self.inner.turn(usage)?;
        Ok(Turn {
            status: self.inner.status_due(None),
            report,
        })
    }

    /// The compact tool's declaration (`{name, description, parameters}`)
    /// when `[agent] compact_tool` is on: give it to the model beside the
    /// agent's tools, and answer its calls with
    /// [`compact_history`](Session::compact_history).
    pub fn compact_tool(&self) -> Option<Value> {
        let agent = &self.inner.compactor().config().agent;
        agent.compact_tool.then(|| {
            json!({"name": agent.tool, "description": agent::DESCRIPTION,
                "parameters": agent::parameters()})
        })
    }

    /// Answers a call of the compact tool, given its arguments
    /// (`{"preserve_recent_messages": 10, "custom_prompt": "…"}`): the
    /// history before the kept messages becomes a briefing now; the next
    /// [`messages`](Session::messages) is the compacted history. Push the
    /// call and this answer after it, as for any tool.
    pub fn compact_history(&mut self, arguments: &Value) -> Answered {
        self.inner
            .compact_requested(&Arguments::Value(arguments.clone()))
    }

    /// The history to send now, in the shape the session started with.
    pub fn messages(&self) -> Result<Value> {
        self.shape.write(self.inner.conversation())
    }

    /// The history as the engine holds it.
    pub fn conversation(&self) -> &Conversation {
        self.inner.conversation()
    }

    /// Tokens of the history now.
    pub fn tokens(&self) -> Counted {
        self.inner.tokens()
    }

    /// The recall tool's declaration (name, description, JSON Schema), when
    /// `[recall]` is on: give it to the model beside the agent's tools, and
    /// answer its calls with [`recall`](Session::recall).
    pub fn recall_tool(&self) -> Option<RecallTool> {
        self.inner.compactor().engine().recall_tool()
    }

    /// Answers a call of the recall tool, given its arguments
    /// (`{"handle": "abr_…", "page": 2}`: the original the handle names; or
    /// `{"query": "a name"}`: the lines of this session's originals that
    /// hold it, under their handles).
    pub fn recall(&self, arguments: &Value) -> Answer {
        let compactor = self.inner.compactor();
        compactor
            .thread()
            .recall(compactor.engine(), arguments, None)
    }

    /// Calls `f` with every engine event (sizes, triggers, compactions).
    pub fn on_event(&mut self, f: impl FnMut(&Event) + Send + 'static) {
        self.inner.compactor_mut().subscribe(f);
    }
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("wire", &self.wire)
            .field("messages", &self.inner.conversation().messages.len())
            .field("tokens", &self.inner.tokens())
            .finish()
    }
}
