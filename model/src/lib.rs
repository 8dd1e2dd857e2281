//! # Fleetweft's rules, written once
//!
//! A pure, deterministic core in the style of quinn-proto: inputs in, events
//! and effects out. No IO, no clock, no randomness, no threads. Time enters
//! as [`controller::Input::Timeout`]; the runtime owns the clock.
//!
//! - [`controller`]: `step(&state, input) -> events`, `apply(&mut state,
//!   &event)`, `effects(&state, &event)`. The runtime appends a step's events
//!   durably, applies them, and only then performs their effects (S7).
//! - [`agent`]: the node agent's core, same shape; its state is its journal.
//! - [`recovery`]: the agent's fixed retry/resume/stop table (SPEC §5, S14),
//!   called from `agent::agent_step`.
//! - [`identity`]: when replacements of a node's connection are an
//!   identity conflict (two agents with one certificate).
//! - [`chunks`]: a release fetched in content chunks (issue #23): the set
//!   of chunks verified and what a re-verification from disk read, which
//!   the table decides on (resume the fetch from verified chunks).
//! - [`words`]: the one wording of every enum above an operator reads
//!   (the API, the CLI, the event text, the invariants' messages).
//!
//! The rules S1–S11 of SPEC §2 are decided here and nowhere else; the crate
//! `invariants` checks them, the crate `simulations` explores them.
// Production functions stay within 70 lines (clippy.toml, issue #22 item 6);
// tests may run longer.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

pub mod agent;
pub mod chunks;
pub mod config;
pub mod controller;
pub mod evidence;
pub mod identity;
pub mod ids;
pub mod msg;
pub mod plan;
pub mod platform;
pub mod recovery;
pub mod words;

pub use evidence::{ArtifactRead, ProbeVerdict, RouteObservation};
pub use ids::{Digest, Generation, NodeId, OpId, RolloutId};
pub use msg::{Decision, ReportKind, StageRefusal, ToAgent, ToController};
pub use plan::Plan;
