//! What the API reads: one consistent copy of the controller's state and
//! the runtime facts around it, shared in O(1) (persistent collections).
//! The controller's core publishes it; the view layer reads only this.

use model::controller::ControllerState;
use model::{NodeId, OpId};
use std::collections::HashMap;
use std::time::SystemTime;

/// What the API reads.
#[derive(Clone, Debug)]
pub struct Snapshot {
    /// The controller state.
    pub state: ControllerState,
    /// The last durable sequence.
    pub last_sequence: Option<u64>,
    /// Nodes with a live connection.
    pub connected: imbl::OrdSet<NodeId>,
    /// When each op that is UNKNOWN now became UNKNOWN, by this process's
    /// wall clock (runtime-only: the model has no clock). An op already
    /// UNKNOWN when the daemon started counts from the start.
    pub unknown_since: imbl::OrdMap<OpId, SystemTime>,
    /// How long ops took from grant to settlement, per rollout, by this
    /// process's clock (runtime-only, like `unknown_since`).
    pub op_durations: crate::view::durations::OpDurations,
    /// Where each unresolved op and waiting rollout started in the log
    /// (the handover report's "since when"); built from the whole log at
    /// start, so it survives restarts.
    pub log_index: crate::view::report::LogIndex,
    /// `NodeQuarantined` entries in the whole log: identity conflicts ever
    /// detected (the `/metrics` counter).
    pub identity_conflicts: u64,
    /// The SHA-256 fingerprint of the certificate each node presented on
    /// its latest connection since this process started (what
    /// `fleetweft node revoke-cert NODE` revokes without `--cert`).
    pub presented: imbl::HashMap<NodeId, [u8; 32]>,
    /// Peer addresses of the muted connections of each quarantined node.
    pub quarantined_peers: HashMap<NodeId, Vec<String>>,
    /// Group-commit counters since this process started.
    pub batches: BatchStats,
    /// Op deadlines armed now (one per op holding a slot).
    pub deadlines_armed: usize,
    /// Nodes whose agent reported a higher generation than the log's
    /// (runtime-only: see the controller's `ahead` module).
    pub ahead_of_log: imbl::OrdMap<NodeId, model::Generation>,
    /// Leader, or a hot standby whose state is a view of the leader's log
    /// as of `last_sequence`.
    pub role: crate::role::Role,
    /// Where the leader is, as a standby last read it.
    pub leader: Option<crate::role::Advert>,
    /// The event log's storage as last measured (`None` before).
    pub storage: Option<crate::view::storage::StorageUse>,
}

/// Group-commit counters (`/metrics`): inputs and events per durable batch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BatchStats {
    /// Durable batches (one flush each; a batch of refusals only appends
    /// nothing and is not counted).
    pub batches: u64,
    /// Inputs taken into them (refused ones included).
    pub inputs: u64,
    /// Events they appended.
    pub events: u64,
}
