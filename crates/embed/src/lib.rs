//! abridge for in-process front ends: JSON messages in, JSON messages out,
//! in the shape they came (a request body, or a bare list of OpenAI,
//! Anthropic or AI SDK messages). The Python and Node packages are thin
//! layers over this crate.
//!
//! ```
//! use abridge_embed::{Counted, Options, compact};
//! use serde_json::json;
//!
//! let mut messages = vec![json!({"role": "user", "content": "Summarise every log file."})];
//! for i in 0..40 {
//!     messages.push(json!({"role": "assistant", "content": null, "tool_calls": [{"id": format!("c{i}"),
//!         "type": "function", "function": {"name": "read", "arguments": format!("{{\"file\": \"{i}.log\"}}")}}]}));
//!     messages.push(json!({"role": "tool", "tool_call_id": format!("c{i}"), "content": "GET /health 200\n".repeat(40)}));
//! }
//! let options = Options { target_tokens: Some(2_000), ..Options::default() };
//! let out = compact(json!(messages), &options)?;
//! assert!(out.report.compacted && out.report.tokens_after <= Counted::new(2_000));
//! assert_eq!(out.value.as_array().map(Vec::len), Some(messages.len())); // a list back, pairs intact
//! # Ok::<(), abridge_embed::Error>(())
//! ```

mod error;
mod options;
mod session;
mod shape;

pub use abridge::tokens::{Counted, Reported};
pub use abridge::{Event, Report};
pub use abridge_model::{Violation, Wire};

use serde::Serialize;
use serde_json::Value;

pub use abridge::TurnReport;
pub use error::{Error, ErrorKind, Result};
pub use options::{ConfigSource, Options};

/// The book's chapter on the Python and Node packages
/// (`docs/src/packages.md`), as rustdoc; its samples run in
/// `sdk-tests/python/test_docs.py` and `sdk-tests/node/docs.test.mjs`.
#[doc = include_str!("../../../docs/src/packages.md")]
pub mod book {}
pub use session::{Session, Turn};
pub use shape::{Decoded, Shape};

/// A compacted history, in the shape it was given, and what was done.
#[derive(Debug, Clone, Serialize)]
pub struct Compacted {
    /// The messages (or body) to send.
    pub value: Value,
    /// What the compaction did.
    pub report: Report,
}

/// Compacts a body or a list of messages to the target of `options`.
/// A history already under it comes back as given.
///
/// One call keeps nothing to recall from once it returns: unless a store
/// keeps the originals (or `recall` is asked for), placeholders carry no
/// handles.
pub fn compact(value: Value, options: &Options) -> Result<Compacted> {
    compact_decoded(Decoded::read(value, options.format)?, options)
}

/// [`compact`] of JSON text, as the packages pass it: a large body is
/// decoded on every core without becoming a JSON tree first
/// ([`Decoded::read_text`]).
pub fn compact_text(text: &str, options: &Options) -> Result<Compacted> {
    compact_decoded(Decoded::read_text(text, options.format)?, options)
}

fn compact_decoded(input: Decoded, options: &Options) -> Result<Compacted> {
    let mut options = options.clone();
    if options.store.is_none() {
        options.recall = Some(options.recall.unwrap_or(false));
    }
    let mut compactor = options.compactor(&input.conversation)?;
    let outcome = compactor.compact(&input.conversation)?;
    Ok(Compacted {
        value: input.shape.write(&outcome.conversation)?,
        report: outcome.report,
    })
}

/// Tokens of a body or list of messages (tool declarations included), as
/// the model of `options` (or of the body) counts them.
pub fn count_tokens(value: Value, options: &Options) -> Result<Counted> {
    count_decoded(Decoded::read(value, options.format)?, options)
}

/// [`count_tokens`] of JSON text (see [`compact_text`]).
pub fn count_tokens_text(text: &str, options: &Options) -> Result<Counted> {
    count_decoded(Decoded::read_text(text, options.format)?, options)
}

fn count_decoded(input: Decoded, options: &Options) -> Result<Counted> {
    let mut compactor = abridge::Compactor::new(options.config(&input.conversation)?)?;
    Ok(compactor.count(&input.conversation))
}

/// Every conversation of a file (request body, AI SDK messages, Claude
/// Code log, agent trajectories: detected) written as `to`.
pub fn convert(bytes: &[u8], to: Wire) -> Result<Vec<Value>> {
    abridge_model::decode(bytes)?
        .iter()
        .map(|conv| {
            let converted = abridge_model::convert_to(conv, to)?;
            Ok(abridge_model::encode(&converted.conversation)?)
        })
        .collect()
}

/// Tool pairing and role violations of a body or list of messages (empty: valid).
pub fn validate(value: Value, format: Option<Wire>) -> Result<Vec<Violation>> {
    let input = Decoded::read(value, format)?;
    Ok(abridge_model::validate(&input.conversation))
}
