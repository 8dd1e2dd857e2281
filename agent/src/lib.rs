//! # Fleetweft's node agent
//!
//! Drives `model::agent`'s core with real effects: a journal fsynced before
//! any action, signed-bundle verification, supervised app instances on
//! private ports, a public-route proxy that stamps the serving release, and
//! route probes.
// Production functions stay within 70 lines (clippy.toml, issue #22 item 6);
// tests may run longer.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

pub mod app_data;
pub mod cli;
pub mod config;
pub mod daemon;
pub mod dial;
pub mod driver;
pub mod isolation;
pub mod journal;
pub mod listeners;
pub mod liveness;
pub mod migration;
pub mod mirror;
pub mod probe;
pub mod proxy;
pub mod recovery;
pub mod serving;
pub mod staging;
pub mod supervisor;

/// The daemons' shared process plumbing, kept here under the names the
/// agent's callers used.
pub use daemonkit::{colour_allowed, log_colour, shutdown_signal};
