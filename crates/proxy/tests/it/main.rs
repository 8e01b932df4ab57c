//! The proxy against a fake provider on 127.0.0.1, with agent loops that
//! talk to it the way the OpenAI and Anthropic SDKs and Codex do.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod agent;
mod connections;
mod failures;
mod faults;
mod gemini;
mod loops;
mod memory;
mod models;
mod persist;
mod recall;
mod replicas;
mod responses;
mod routes;
mod savings;
mod support;
mod tenants;
mod traces;

/// The config of most tests: compaction above 6,000 tokens.
pub(crate) const CONFIG: &str =
    "[trigger]\nmax_tokens = 6000\n[budget]\nmin_iterations = 2\nclear_at_least = 500\n";
