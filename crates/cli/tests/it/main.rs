//! End-to-end tests of the `abridge` binary.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

mod apis;
mod commands;
mod docs;
mod engine;
mod presets;
mod run;
mod savings;
mod serve;
mod snapshots;
mod soak;
mod support;
mod ui;
