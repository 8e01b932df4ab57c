//! Integration tests of abridge-tokens.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

mod counter;
mod reference;
mod tables;
