//! Lossless round trips.
