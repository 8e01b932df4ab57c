//! Validator rules.
