//! A rollout's plan as waves (issue #28 item 1): which plan nodes each wave
//! covers, and how many of them stand in each state, for the console's
//! progress bars and paged op lists. The words are the view layer's
//! ([`OpState`], plus [`NOT_GRANTED`] for a plan node with no op yet).
//!
//! Cost: O(plan) lookups in the rollout's `op_by_node` index and the op
//! maps (O(log n) each), never a scan of the log.

use crate::view::{op_state, OpState};
use model::controller::{ControllerState, Rollout};
use model::NodeId;

/// The word of a plan node this rollout granted nothing yet.
pub const NOT_GRANTED: &str = "not-granted";

/// Where one plan node of a rollout stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlanNodeState {
    /// No op granted to it by this rollout yet.
    NotGranted,
    /// Its op's one state.
    Op(OpState),
}

impl PlanNodeState {
    /// Every state, in the order the bars show them: UNKNOWN first (it
    /// is what needs an operator), then the unsettled phases, the
    /// outcomes, and what is not granted yet.
    pub const ALL: [PlanNodeState; 9] = [
        PlanNodeState::Op(OpState::Unknown),
        PlanNodeState::Op(OpState::Granted),
        PlanNodeState::Op(OpState::Decided),
        PlanNodeState::Op(OpState::Restoring),
        PlanNodeState::Op(OpState::Verified),
        PlanNodeState::Op(OpState::RolledBack),
        PlanNodeState::Op(OpState::NotApplied),
        PlanNodeState::Op(OpState::Resolved),
        PlanNodeState::NotGranted,
    ];

    /// Its word.
    pub fn as_str(self) -> &'static str {
        match self {
            PlanNodeState::NotGranted => NOT_GRANTED,
            PlanNodeState::Op(s) => s.as_str(),
        }
    }

    fn index(self) -> usize {
        PlanNodeState::ALL
            .iter()
            .position(|s| *s == self)
            .expect("every state is listed")
    }
}

/// One wave of a rollout: wave 0 is the canary, waves 1.. the followers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WaveProgress {
    /// 0 for the canary, then 1, 2, ...
    pub wave: u32,
    /// Its plan nodes, as positions in the plan (canary 0, then the
    /// followers from 1): `start..end`.
    pub start: usize,
    /// One past its last plan position.
    pub end: usize,
    /// Nodes in each state, in [`PlanNodeState::ALL`]'s order.
    pub counts: [usize; 9],
}

impl WaveProgress {
    /// Its plan nodes.
    pub fn nodes(&self) -> usize {
        self.end - self.start
    }

    /// How many stand in `state`.
    pub fn count(&self, state: PlanNodeState) -> usize {
        self.counts[state.index()]
    }
}

/// The plan positions of each wave: the canary `0..1`, then each
/// follower wave (`Policy::wave_ends`, one wave when empty).
pub fn wave_bounds(r: &Rollout) -> Vec<(usize, usize)> {
    let followers = r.plan.followers.len();
    let mut bounds = vec![(0, 1)];
    let mut start = 0usize;
    let ends: Vec<usize> = if r.policy.wave_ends.is_empty() {
        vec![followers]
    } else {
        r.policy.wave_ends.iter().map(|e| *e as usize).collect()
    };
    for end in ends {
        bounds.push((1 + start, 1 + end));
        start = end;
    }
    bounds
}

/// The plan node at `position` (canary 0, then the followers).
pub fn plan_node(r: &Rollout, position: usize) -> Option<NodeId> {
    match position {
        0 => Some(r.plan.canary),
        p => r.plan.followers.get(p - 1).copied(),
    }
}

/// Where `node` stands in rollout `r`.
pub fn plan_node_state(s: &ControllerState, r: &Rollout, node: NodeId) -> PlanNodeState {
    r.op_for(node)
        .and_then(|op| op_state(s, op))
        .map_or(PlanNodeState::NotGranted, PlanNodeState::Op)
}

/// Every wave's counts. `None` for a forgotten rollout: its settled ops
/// left the state, so a per-node count would call them not granted (its
/// totals stay in [`crate::view::rollout_counts`]).
pub fn wave_progress(s: &ControllerState, r: &Rollout) -> Option<Vec<WaveProgress>> {
    if r.forgotten {
        return None;
    }
    let waves = wave_bounds(r)
        .into_iter()
        .zip(0u32..)
        .map(|((start, end), wave)| {
            let mut counts = [0usize; 9];
            for node in (start..end).filter_map(|p| plan_node(r, p)) {
                counts[plan_node_state(s, r, node).index()] += 1;
            }
            WaveProgress {
                wave,
                start,
                end,
                counts,
            }
        })
        .collect();
    Some(waves)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::fixture::fleet;
    use model::RolloutId;

    /// The canary is wave 0; the counts of every wave add up to its
    /// nodes, and UNKNOWN ops are counted as UNKNOWN, never as verified.
    #[test]
    fn waves_count_every_plan_node_once() {
        let snap = fleet(50, 10, 5, 3);
        let r = snap.state.rollout(RolloutId(0)).unwrap();
        let waves = wave_progress(&snap.state, r).unwrap();
        assert_eq!(waves.len(), 2);
        assert_eq!((waves[0].start, waves[0].end), (0, 1));
        assert_eq!((waves[1].start, waves[1].end), (1, 50));
        assert_eq!(waves[0].count(PlanNodeState::Op(OpState::Verified)), 1);
        let w = &waves[1];
        assert_eq!(w.counts.iter().sum::<usize>(), w.nodes());
        assert_eq!(w.count(PlanNodeState::Op(OpState::Verified)), 5);
        assert_eq!(w.count(PlanNodeState::Op(OpState::Unknown)), 3);
        assert_eq!(
            w.count(PlanNodeState::Op(OpState::Unknown)),
            r.unknown as usize
        );
    }
}
