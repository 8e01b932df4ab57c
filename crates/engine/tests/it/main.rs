//! Integration tests of the abridge engine.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

mod agent;
mod background;
mod briefing_shape;
mod continuity;
mod corpus;
mod fuzz;
mod policies;
mod props;
mod responses;
mod session;
mod summary;
mod support;
