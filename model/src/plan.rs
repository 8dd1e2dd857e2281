//! A rollout plan: which release goes where, in which order, how many at once.

use crate::ids::{Digest, NodeId};
use serde::{Deserialize, Serialize};

/// Upper bound on the nodes of one fleet. A limit on everything: node ids
/// are `u32`, but a plan, a roster and an event must stay bounded.
pub const NODES_MAX: usize = 100_000;
/// Upper bound on a rollout's concurrency budget. A plan asking for more is
/// refused rather than silently clamped.
pub const SLOTS_MAX_LIMIT: u16 = 10_000;
/// Upper bound on followers in one plan. The plan is recorded in one log
/// entry (`RolloutStarted`, at most 64 KiB: larger sled pages would go to
/// blob files that sled 0.34.7 never fsyncs), and a node id takes up to 5
/// bytes there, so 12,000 followers is what fits with room to spare. A
/// fleet larger than that rolls out in several rollouts.
pub const FOLLOWERS_MAX: usize = 12_000;

/// What an operator asks for when starting a rollout.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Plan {
    /// The release (bundle digest) to move nodes to.
    pub release: Digest,
    /// The node that goes first and is judged by its serving answer.
    pub canary: NodeId,
    /// Followers, granted strictly in this order after the canary.
    pub followers: Vec<NodeId>,
    /// Concurrency budget: ops of this rollout not yet settled.
    pub slots_max: u16,
    /// Wait for an operator's approval once the canary is verified.
    pub approval_after_canary: bool,
}

/// Why a plan is not acceptable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PlanError {
    /// `slots_max` is 0 or above [`SLOTS_MAX_LIMIT`].
    SlotsOutOfRange(u16),
    /// A node appears twice (canary among followers, or a repeated follower).
    DuplicateNode(NodeId),
    /// More than [`FOLLOWERS_MAX`] followers.
    TooManyFollowers(usize),
}

impl std::fmt::Display for PlanError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PlanError::SlotsOutOfRange(s) => {
                write!(f, "slots_max {s} is out of range 1..={SLOTS_MAX_LIMIT}")
            }
            PlanError::DuplicateNode(n) => write!(f, "node {n} appears twice in the plan"),
            PlanError::TooManyFollowers(c) => {
                write!(f, "{c} followers exceed the limit of {FOLLOWERS_MAX}")
            }
        }
    }
}

impl Plan {
    /// Check the plan's shape. The controller refuses invalid plans.
    pub fn validate(&self) -> Result<(), PlanError> {
        if self.slots_max == 0 || self.slots_max > SLOTS_MAX_LIMIT {
            return Err(PlanError::SlotsOutOfRange(self.slots_max));
        }
        if self.followers.len() > FOLLOWERS_MAX {
            return Err(PlanError::TooManyFollowers(self.followers.len()));
        }
        let mut seen = std::collections::BTreeSet::new();
        for node in std::iter::once(&self.canary).chain(&self.followers) {
            if !seen.insert(*node) {
                return Err(PlanError::DuplicateNode(*node));
            }
        }
        Ok(())
    }

    /// Every node of the plan, canary first.
    pub fn nodes(&self) -> impl Iterator<Item = NodeId> + '_ {
        std::iter::once(self.canary).chain(self.followers.iter().copied())
    }
}
