//! abridge keeps LLM agents inside their context window.
//!
//! Hand a [`Compactor`] the conversation on every turn; it counts tokens
//! (cached per message), checks its triggers and, when one fires, rewrites
//! the old part of the history with deterministic policies — clipping old
//! page snapshots, images, tool arguments and results, collapsing stale
//! feedback, and as a last resort dropping old iterations — until the
//! history is under a target that sits below the trigger. The system prompt,
//! the task, pinned messages and the last iterations stay byte-identical,
//! every tool call keeps its result, and an unchanged history comes back
//! borrowed, without a copy.
//!
//! ```
//! use abridge::{Compactor, Config, model::decode};
//!
//! let config = Config::from_toml(r#"
//!     [budget]
//!     target_tokens = 300
//!     min_iterations = 1
//! "#)?;
//! let mut compactor = Compactor::new(config)?;
//! let bytes = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/coding-agent.openai.json"))?;
//! let conv = decode(&bytes)?.remove(0);
//! let outcome = compactor.compact(&conv)?;
//! assert!(outcome.report.compacted);
//! assert!(outcome.report.tokens_after <= abridge::tokens::Counted::new(300));
//! assert!(abridge::model::validate(&outcome.conversation).is_empty());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! A [`Compactor`] is an [`Engine`] — configuration, limits, summarizers,
//! store and subscribers, shared by every conversation — with one
//! [`Thread`], a conversation's state between turns. [`Thread::turn`] is
//! the one place that decides when and how a turn compacts; its [`Input`]
//! says what the caller knows. For a client that resends its whole history
//! (a proxy, an agent keeping its original log), a
//! [`resent`](Input::resent) turn carries the last compaction over so the
//! compacted prefix is sent byte-identical from turn to turn. For an agent
//! loop that appends messages, [`History`] keeps the history and its counts
//! so each turn costs only the new messages.

pub mod agent;
#[cfg(feature = "background")]
pub mod background;
mod boundary;
mod calibration;
mod cancel;
mod carryover;
mod compactor;
mod config;
mod engine;
mod error;
mod evaluation;
mod event;
mod history;
mod input;
mod limits;
pub mod placeholder;
mod plan;
mod policy;
pub mod preset;
pub mod recall;
mod refill;
mod region_facts;
mod report;
mod result_lines;
mod rewrite;
mod slot;
mod snapshot;
mod state;
mod summarize_step;
pub mod synth;
mod thread;
mod trigger;

pub use abridge_model as model;
pub use abridge_summarize as summarize;
pub use abridge_tokens as tokens;
pub use calibration::Calibration;
pub use cancel::{Cancel, CancelOnDrop};
pub use carryover::{Carryover, PrefixKey};
pub use compactor::Compactor;
pub use config::{
    AgentConfig, BudgetConfig, Config, FeedbackKind, PinConfig, PolicyConfig, PolicyKind,
    RecallConfig, StoreConfig, SummarizerSpec, SummaryConfig,
};
pub use engine::{Engine, EngineBuilder};
pub use error::{Error, Result};
pub use event::{Degradation, Event, PolicyRun, Rung, iteration_id};
pub use history::{History, TurnReport};
pub use input::Input;
pub use limits::Limits;
pub use report::{Attempt, AttemptOutcome, Outcome, Report, SnapshotId, briefing_in};
pub use snapshot::{SnapshotData, SnapshotError, SnapshotSink};
pub use state::ThreadState;
pub use summarize_step::KeptBriefing;
pub use thread::Thread;
pub use trigger::{Reason, TriggerConfig};

/// The book's chapters on the library and on compaction, as rustdoc: the
/// same markdown as `docs/`, so the two cannot drift, and the library
/// chapter's samples run as doctests.
pub mod book {
    #[doc = include_str!("../../../docs/src/library.md")]
    pub mod library {}
    #[doc = include_str!("../../../docs/src/compaction.md")]
    pub mod compaction {}
    #[doc = include_str!("../../../docs/src/briefings.md")]
    pub mod briefings {}
    #[doc = include_str!("../../../docs/src/configuration.md")]
    pub mod configuration {}
    #[doc = include_str!("../../../docs/src/presets.md")]
    pub mod presets {}
    #[doc = include_str!("../../../docs/src/tokens.md")]
    pub mod tokens {}
    #[doc = include_str!("../../../docs/src/snapshots.md")]
    pub mod snapshots {}
    #[doc = include_str!("../../../docs/src/architecture.md")]
    pub mod architecture {}
}

/// The README's tour: its Rust sample compiles as a doctest too.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeTour;
