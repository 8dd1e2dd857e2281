//! The fleet a run brings up ([`crate::run`]) and measures
//! ([`crate::report`]): the controller, its API, the agents' tasks, and
//! what was measured while bringing them up.

use crate::agent::{Faults, Shared};
use crate::controller::{ControllerSetup, RunningController};
use api::client::ApiClient;
use model::Digest;
use std::sync::Arc;
use tokio::task::JoinHandle;

/// How often progress is printed on stderr.
pub const PROGRESS_EVERY_MS: u64 = 1_000;
/// How often the rollout's status is asked while waiting for its end.
pub const ROLLOUT_POLL_MS: u64 = 200;

/// What is up once the fleet is connected.
pub struct Fleet {
    /// The operator API.
    pub api: ApiClient,
    /// The controller (taken by the restart).
    pub controller: Option<RunningController>,
    /// Its pid.
    pub pid: u32,
    /// How it was started (to restart it).
    pub setup: ControllerSetup,
    /// The agents' shared state.
    pub shared: Arc<Shared>,
    /// The agent tasks.
    pub tasks: Vec<JoinHandle<()>>,
    /// Node names, canary first.
    pub names: Vec<String>,
    /// Faults per node.
    pub faults: Vec<Faults>,
    /// The release rolled out.
    pub target: Digest,
    /// Controller RSS before any agent connected, in KiB.
    pub rss_before_kib: u64,
    /// Controller CPU seconds before the rollout started.
    pub cpu_before_s: f64,
    /// Seconds until every agent was connected.
    pub connect_s: f64,
    /// The PKI's timing.
    pub pki: crate::pki::PkiTiming,
}
