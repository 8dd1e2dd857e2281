//! Fleetweft runtime: the pieces that touch disk, clocks and threads around
//! the pure `model` crate: the controller's durable event log ([`log`]), the
//! controller loop around it ([`controller`]) and read-only inspection of a
//! log ([`inspect`], behind `fleetweft log verify|show`).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod cli_ops;
pub mod controller;
pub mod daemon;
pub mod demo;
pub mod demo_ha;
pub mod inspect;
pub mod log_copy;
pub mod policy_text;
pub mod ports;
pub mod watch;
/// The durable event log lives in its own crate (`eventlog`), shared with
/// the agent's journal; re-exported here so `runtime::log` keeps its name.
pub use eventlog as log;
pub mod proof;
/// The typed API client lives in `api`.
pub use api::client;
pub mod quickstart;
