//! `fleetweft-fleetsim`: one process runs N simulated agents, each the real
//! `model::agent` core speaking the real protocol (QUIC, mutual TLS with
//! its own certificate, the real frames) to a real controller process; the
//! app is simulated (switch latency, wrong answers, silence, crashes) and
//! one embedded HTTP server answers every node's public route. It starts a
//! rollout over the whole fleet as an operator would, shows progress, and
//! reports what it cost (see `docs/performance.md`).

#![warn(missing_docs)]
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

pub mod agent;
pub mod controller;
pub mod fleet;
pub mod options;
pub mod pki;
pub mod procfs;
pub mod report;
pub mod routes;
pub mod run;
pub mod stats;
