//! Token counting for abridge.
//!
//! - [`TokenizerKind`]: exact `o200k_base` / `cl100k_base` counts (the BPE
//!   tables are compiled in: nothing is downloaded at run time) and a
//!   documented estimator for models with no public tokenizer.
//! - [`TokenCounter`]: per-message counts by kind of content, cached by
//!   content hash so that a history that grew by one message costs one
//!   message to recount.
//! - [`Registry`]: context window, output limit and tokenizer of common
//!   models, with overrides.
//! - [`units`]: [`Counted`], [`Calibrated`] and [`Reported`] token figures,
//!   each its own type.
//!
//! ```
//! use abridge_model::{Message, Role};
//! use abridge_tokens::{Registry, TokenCounter, TokenizerKind};
//!
//! assert_eq!(TokenizerKind::O200kBase.count("hello world"), 2);
//! let kind = Registry::new().tokenizer_for(Some("gpt-4o-2024-08-06"));
//! let mut counter = TokenCounter::new(kind);
//! let m = Message::text(Role::User, "hello world");
//! assert_eq!(counter.count_message(&m).text, 2);
//! counter.count_message(&m); // second time: from the cache
//! assert_eq!(counter.cache_stats(), (1, 1));
//! ```

pub mod calibrate;
mod counter;
mod image;
mod merge;
mod pretokenize;
mod registry;
mod tables;
mod tokenizer;
pub mod units;

pub use counter::{TokenCounter, TokenCounts, content_hash};
pub use image::IMAGE_TOKENS;
pub use registry::{ModelInfo, PRICES_AS_OF, Price, Registry, Resolved};
pub use tokenizer::{TokenizerKind, UnknownTokenizer, estimate};
pub use units::{Calibrated, Counted, Reported};
