//! A rollout plan: which release goes where, in which order, how many at once.

use crate::ids::{Digest, NodeId};
use serde::{Deserialize, Serialize};

/// Upper bound on the nodes of one fleet. A limit on everything: node ids
/// are `u32`, but a plan, a roster and an event must stay bounded.
pub const NODES_MAX: usize = 100_000;
/// Upper bound on a rollout's concurrency budget. A plan asking for more is
/// refused rather than silently clamped.
pub const SLOTS_MAX_LIMIT: u16 = 10_000;
/// Upper bound on followers in one plan: a rollout may span the whole
/// fleet, canary included.
pub const FOLLOWERS_MAX: usize = NODES_MAX - 1;
/// Upper bound on the followers one log entry records. A plan is recorded
/// in `RolloutStarted` and, past this many followers, continued in
/// `RolloutFollowersAdded` entries of the same batch: one log entry stays
/// at most 64 KiB (larger sled pages would go to blob files that sled
/// 0.34.7 never fsyncs), and a node id takes up to 5 bytes there, so
/// 12,000 followers is what fits with room to spare.
pub const FOLLOWERS_PER_EVENT_MAX: usize = 12_000;

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
    /// A [`Policy`] whose waves or budgets do not fit the plan.
    InvalidWaves(String),
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
            PlanError::InvalidWaves(why) => write!(f, "invalid waves or budget: {why}"),
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

/// Upper bound on the waves of one rollout.
pub const WAVES_MAX: usize = 32;

/// How a rollout moves through its plan beyond the order: waves and
/// failure budgets. The default is one wave and no budget, which is the
/// behaviour of a plan alone: the first failed follower restores and
/// pauses, and an operator may resume.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Policy {
    /// Where each follower wave ends, as a count of followers: strictly
    /// increasing, the last one the plan's follower count. Wave 1 starts
    /// after the canary; wave k+1 is granted only once every op of the
    /// waves before it settled (S4). Empty: one wave.
    pub wave_ends: Vec<u32>,
    /// An operator approves before each wave after the first.
    pub approval_between_waves: bool,
    /// Follower ops that may fail (restored, each proven as S9 asks)
    /// before the rollout pauses itself and grants no more (B1). `None`:
    /// no budget, the first failure pauses and an operator may resume.
    pub max_failed: Option<u32>,
    /// The rollout pauses itself and grants no more while this many of its
    /// ops are UNKNOWN at once (B1). UNKNOWN never counts as failed.
    pub max_unknown: Option<u32>,
}

impl Policy {
    /// Check the policy against the plan it goes with.
    pub fn validate(&self, plan: &Plan) -> Result<(), PlanError> {
        let followers = plan.followers.len() as u32;
        if self.wave_ends.len() > WAVES_MAX {
            return Err(PlanError::InvalidWaves(format!(
                "{} waves exceed the limit of {WAVES_MAX}",
                self.wave_ends.len()
            )));
        }
        if !self.wave_ends.windows(2).all(|w| w[0] < w[1]) || self.wave_ends.first() == Some(&0) {
            return Err(PlanError::InvalidWaves(
                "wave ends must be strictly increasing and above 0".into(),
            ));
        }
        if let Some(last) = self.wave_ends.last() {
            if *last != followers {
                return Err(PlanError::InvalidWaves(format!(
                    "the last wave ends at {last} but the plan has {followers} followers"
                )));
            }
        }
        if self.max_unknown == Some(0) {
            return Err(PlanError::InvalidWaves(
                "max_unknown 0 would pause before anything is granted".into(),
            ));
        }
        Ok(())
    }

    /// The wave (from 2) that follower `index` opens, if it is the first of
    /// a wave after the first.
    pub fn wave_opened_by(&self, index: u32) -> Option<u32> {
        self.wave_ends
            .iter()
            .position(|end| *end == index)
            .map(|k| k as u32 + 2)
    }

    /// The wave (from 1; 0 before any follower) the latest of `granted`
    /// followers belongs to: wave k covers followers [end(k-1), end(k)),
    /// so the follower at index `granted - 1` is in wave 1 + the number of
    /// ends at or before it. O(log waves).
    pub fn current_wave(&self, granted: u32) -> u32 {
        if granted == 0 {
            return 0;
        }
        let wave = 1 + self.wave_ends.partition_point(|end| *end < granted) as u32;
        wave.min(self.waves())
    }

    /// Waves after the canary (at least one).
    pub fn waves(&self) -> u32 {
        (self.wave_ends.len() as u32).max(1)
    }
}
