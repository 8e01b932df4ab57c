//! The conversation model of abridge: one lossless, wire-neutral picture of an
//! agent conversation, codecs for the formats agents speak and log, and a
//! structural validator.
//!
//! - [`Conversation`], [`Message`], [`Part`]: the model. Unknown fields are
//!   kept at every level, so decode → encode gives back the same JSON value.
//! - [`decode`] / [`encode`]: OpenAI Chat Completions and Anthropic Messages
//!   request bodies, plus agent logs as inputs (Claude Code JSONL,
//!   mini-swe-agent and tau-bench trajectories), with format detection.
//! - [`convert`]: OpenAI ⇄ Anthropic; [`convert_to`] also to and from AI SDK messages.
//! - [`validate`]: tool pairing and role rules of each API.
//!
//! ```
//! use abridge_model::{decode, encode, validate, Format};
//!
//! let body = br#"{"model": "gpt-4o", "messages": [
//!   {"role": "user", "content": "List the files"},
//!   {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
//!     "function": {"name": "ls", "arguments": "{\"path\": \".\"}"}}]},
//!   {"role": "tool", "tool_call_id": "c1", "content": "README.md"}
//! ], "temperature": 0.2}"#;
//! let convs = decode(body)?;
//! let conv = &convs[0];
//! assert_eq!(conv.format, Format::Chat);
//! assert_eq!(conv.iterations().len(), 1);
//! assert!(validate(conv).is_empty());
//! let original: serde_json::Value = serde_json::from_slice(body)?;
//! assert_eq!(encode(conv)?, original);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod codec;
mod conversation;
mod error;
mod extra;
mod fingerprint;
mod message;
mod provider;
pub mod shares;
pub mod text;
mod validate;

pub use codec::{
    BodyParts, Converted, answered_with_error, continues_turn, convert, convert_to, decode,
    decode_as, decode_large_body, decode_value, decode_wire_messages, detect, encode, encode_parts,
    encode_text, encode_wire_messages, json_kind,
};
pub use conversation::{
    CompactBoundary, Conversation, Family, Format, FunctionTool, Iteration, Tool, Wire, head_len,
    iterations, wire_offset,
};
pub use error::{Error, Result};
pub use fingerprint::{chained, fingerprint};
pub use message::{
    Arguments, CACHE_CONTROL, ContentForm, Extra, ImagePart, ImageSource, Message, Meta, Part,
    Reasoning, ReasoningKind, Role, TextPart, ToolCall, ToolResult, Usage,
};
pub use provider::{Provider, ProviderFacts};
pub use validate::{Rule, Violation, validate};
