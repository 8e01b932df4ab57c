//! Integration tests of abridge-tokens.

mod counter;
mod reference;
