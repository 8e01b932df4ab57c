//! Integration tests of abridge-model (one binary: faster to build).

mod common;
mod convert;
mod corpus;
mod roundtrip;
mod validate;
