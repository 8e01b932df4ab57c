//! Integration tests of abridge-model (one binary: faster to build).
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

mod ai_sdk;
mod common;
mod convert;
mod corpus;
mod gemini;
mod openhands;
mod responses;
mod roundtrip;
mod validate;
