//! Tests of the LLM summarizers against a real HTTP server on 127.0.0.1
//! that plays the provider, including its failures.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

mod config;
mod providers;
mod tasks;
