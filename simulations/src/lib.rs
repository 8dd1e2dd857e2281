//! # Fleetweft's model checker
//!
//! `model`'s controller and agents wrapped in a `stateright` model with a
//! faulty environment ([`fleet`]), the rules as properties
//! ([`properties`]), liveness under weak fairness ([`liveness`], told as
//! lassos by [`lasso`]), named mutants that must be caught ([`mutants`]), and the
//! runner behind the `fleetweft-check` binary ([`run`]), and "explore from
//! here": a real controller state projected onto the checker's world
//! ([`projection`], [`explore`]).
// Production functions stay within 70 lines (clippy.toml, issue #22 item 6);
// tests may run longer.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

pub mod config;
pub mod diagram;
pub mod durable_log;
pub mod explore;
pub mod fleet;
pub mod gallery;
pub mod lasso;
pub mod leads_to;
pub mod liveness;
pub mod mutants;
pub mod projection;
pub mod properties;
pub mod run;
pub mod symmetry;
pub mod verdict;
pub mod world;
pub mod yardstick;

pub use config::{CheckConfig, Fault, Faults, LivenessCheck};
pub use fleet::{Action, FleetModel};
pub use mutants::Mutant;
pub use run::{run, Report, RunOptions, Status};
pub use world::World;
