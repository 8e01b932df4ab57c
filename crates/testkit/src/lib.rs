//! Test support shared by abridge's crates: [`Mock`], a real HTTP server on
//! 127.0.0.1 that answers with scripted replies and records every request,
//! and [`Provider`], a fake OpenAI (Chat Completions, Responses) and
//! Anthropic API (tool calls, SSE, usage,
//! failures) that checks every request it receives and can play a scripted
//! model that drives a real client's shell tool ([`ShellScript`]).
//!
//! ```
//! use abridge_testkit::{Mock, openai_ok};
//!
//! let mock = Mock::start(vec![openai_ok("hello")]);
//! assert!(mock.url.starts_with("http://127.0.0.1:"));
//! assert!(mock.requests().is_empty());
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)] // test support may panic on failure

mod mock;
mod postgres;
mod provider;
mod reply;
mod responses;
mod script;
pub mod soak;

pub use mock::{Mock, Reply, Seen, anthropic_ok, openai_ok, openai_ok_reporting};
pub use postgres::{Held, Postgres};
pub use provider::{
    Provider, ProviderOptions, ProviderReport, RecallMode, RequestCheck, body_hash,
};
pub use script::{DONE, ShellScript, output_bytes};
