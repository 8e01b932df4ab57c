//! Integration tests of the abridge engine.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

mod agent;
mod background;
mod briefing_shape;
mod cancel;
mod continuity;
mod corpus;
mod fuzz;
mod history;
mod models;
mod policies;
mod presets;
mod props;
mod recall;
mod rereads;
mod responses;
mod summary;
mod support;
