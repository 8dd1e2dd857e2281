//! The test kit (issue #22 item 5): what the tests of `model`,
//! `invariants`, `api` and the runtime used to write each for itself.
//!
//! - [`feed`]: step an input, then apply its events; the one way a test
//!   drives a controller state ([`feed::feed_with`] takes hooks for the
//!   tests that check or collect something per event).
//! - [`fixtures`]: the staged-rollout set-ups the tests repeat (nodes that
//!   said hello serving v1, a v2 rollout over them, a canary that
//!   switches), as inputs or as a state.
//! - [`files`]: a directory tree read whole, for byte-for-byte checks.
//! - [`fleet`]: a controller and model agents wired by hand, with no
//!   network between them: the in-process fleet of `model/tests/flows.rs`
//!   and of the runtime tests on a real log (any [`fleet::Core`]).
//!
//! A separate crate, not a feature of `model`: a feature that only
//! dev-dependencies turn on gives `model` (and every crate above it) one
//! build for `cargo test` and another for `cargo build --bins`.

#![forbid(unsafe_code)]

pub mod feed;
pub mod files;
pub mod fixtures;
pub mod fleet;

pub use feed::{accept, accept_into, accept_with_effects, feed, feed_into, feed_with};
