//! Briefings for abridge: when clipping is not enough, the history before a
//! boundary becomes one briefing.
//!
//! - [`extract`]: facts taken deterministically from the replaced messages —
//!   files read/written/edited, commands with exit status, errors (the latest
//!   verbatim), identifiers, the latest task list, user messages, decisions,
//!   the last state. Nothing is marked done unless a tool result shows it.
//! - [`Offline`]: the embedded default [`Summarizer`], a fact sheet fitted to
//!   a token budget (oldest, least important items go first) and merged with
//!   the previous briefing when compactions chain — as data ([`Sheet`]) when
//!   abridge kept it, parsed back from its text otherwise.
//! - [`wrap`] / [`unwrap`]: the `<compacted-history>` wrapper.
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
//! })?;
//! // The task stays verbatim above the briefing: it is not restated.
//! assert!(!briefing.contains("Fix the CSV date format."));
//! assert!(briefing.contains("fix src/export.rs for APP-1432"));
//! assert!(briefing.contains("not manual padding"));
//! # Ok::<(), abridge_summarize::SummarizeError>(())
//! ```

mod briefing;
mod config;
mod facts;
mod ident;
mod outcome;
mod outline;
mod progress;
mod sheet;
mod spec;
#[cfg(test)]
mod testing;
mod tools;
mod verify;
mod wrapper;

pub use briefing::{
    AsyncSummarizer, BoxFuture, Briefing, Offline, Request, SummarizeError, Summarizer, task_text,
};
pub use config::FactConfig;
pub use facts::{Facts, FileFact, extract};
pub use ident::{identifiers, mentions, prose_identifiers};
pub use outcome::{CallOutcome, DEFAULT_ERROR_PREFIXES, failure_summary, outcome};
pub use progress::CommandFact;
pub use sheet::{SectionKind, Sheet, SheetItem, SheetSection};
pub use spec::Detail;
pub use tools::{ToolKind, classify, first_string, split_arguments};
pub use verify::{Verification, verify};
pub use wrapper::{DEFAULT_WRAPPER, defuse, leaks_wrapper, unwrap, wrap};
