//! Briefings for abridge: when clipping is not enough, the history before a
//! boundary becomes one briefing.
//!
//! - [`facts::extract`]: facts taken deterministically from the replaced messages —
//!   files read/written/edited, commands with exit status, errors (the latest
//!   verbatim), identifiers, the latest task list, user messages, decisions,
//!   the last state. Nothing is marked done unless a tool result shows it.
//! - [`Offline`]: the embedded default [`Summarizer`], a fact sheet fitted to
//!   a token budget (oldest, least important items go first) and merged with
//!   the previous briefing when compactions chain — as data ([`Sheet`]) when
//!   abridge kept it, parsed back from its text otherwise.
//! - [`wrapper::wrap`] / [`wrapper::unwrap`]: the `<compacted-history>` wrapper.
//!
//! ```
//! use abridge_model::{Message, Role};
//! use abridge_summarize::{FactConfig, Offline, Request, Summarizer};
//! use abridge_tokens::TokenizerKind;
//!
//! let region = vec![
//!     Message::text(Role::Assistant, "I will fix src/export.rs for APP-1432."),
//!     Message::text(Role::User, "Use chrono's format, not manual padding."),
//! ];
//! let briefing = Offline::default().summarize(&Request {
//!     task: "Fix the CSV date format.",
//!     region: &region,
//!     previous: None,
//!     previous_sheet: None,
//!     tail: &[],
//!     budget_tokens: 500,
//!     tokenizer: TokenizerKind::O200kBase,
//!     focus: None,
//!     facts: &FactConfig::default(),
//!     region_facts: None,
//! })?;
//! // The task stays verbatim above the briefing: it is not restated.
//! assert!(!briefing.contains("Fix the CSV date format."));
//! assert!(briefing.contains("fix src/export.rs for APP-1432"));
//! assert!(briefing.contains("not manual padding"));
//! # Ok::<(), abridge_summarize::SummarizeError>(())
//! ```

mod briefing;
mod config;
pub mod created;
pub mod facts;
pub mod ident;
pub mod outcome;
mod outline;
mod progress;
mod sheet;
mod shell;
mod spec;
pub mod tasks;
#[cfg(test)]
mod testing;
pub mod tools;
pub mod verify;
pub mod working;
pub mod wrapper;

// The interface: what a summarizer is given and gives back. Helpers other
// crates share (facts, identifiers, call outcomes, tool kinds, the check
// of a briefing, the wrapper) are reached through their modules.
pub use briefing::{
    AsyncSummarizer, BoxFuture, Briefing, Offline, Request, SummarizeError, Summarizer,
};
pub use config::FactConfig;
pub use sheet::{SectionKind, Sheet, SheetItem, SheetSection, root_of};
pub use spec::Detail;
pub use verify::Verification;
