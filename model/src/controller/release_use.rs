//! Which releases the controller's state still names (issue #23 item 6):
//! the one definition the controller's release store asks before it drops
//! a release's bytes (`fleetweft bundle rm`) and that `fleetweft bundle
//! list` shows. A release is *in use* while the state could still need to
//! hand it to a node, judge a node against it, or restore it:
//!
//! - a rollout deploys it that is still active (granting or paused) or is
//!   the intended rollout of some node (a proof judges that node against
//!   its release, and a new grant of it would fetch it);
//! - a node that is not retired is confirmed on it, said it serves it and
//!   nothing was confirmed since, or was last observed serving it;
//! - an unsettled op moves a node to it or restores it (its baseline).
//!
//! A deployment (code plus configuration, issue #24 item 1) names its
//! code through the rollouts that deploy it; a node serving a deployment
//! whose rollout is no longer intended anywhere names only the deployment
//! digest (its agent keeps the code it runs).
//!
//! Computed in one pass over the nodes and the intent index, never over
//! history: the cost is the fleet's size, asked on an operator's command,
//! not per event.

use super::state::ControllerState;
use crate::ids::{Digest, NodeId, OpId, RolloutId};
use std::collections::{BTreeMap, BTreeSet};

/// What names one release in the controller's state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReleaseUse {
    /// Rollouts of this release still active, or intended for some node.
    pub rollouts: BTreeSet<RolloutId>,
    /// Nodes (not retired) confirmed on it, saying they serve it (nothing
    /// confirmed), or last observed serving it.
    pub nodes: u64,
    /// The first such node, to name in a refusal.
    pub node_example: Option<NodeId>,
    /// Unsettled ops moving a node to it or restoring it.
    pub ops: u64,
    /// The first such op, to name in a refusal.
    pub op_example: Option<OpId>,
}

impl ReleaseUse {
    fn node(&mut self, node: NodeId) {
        self.nodes += 1;
        self.node_example.get_or_insert(node);
    }

    fn op(&mut self, op: OpId) {
        self.ops += 1;
        self.op_example.get_or_insert(op);
    }
}

impl ControllerState {
    /// Every release the state names, with what names it (see the module
    /// documentation for the rule). A release absent from the map may be
    /// removed from the controller's store.
    pub fn release_uses(&self) -> BTreeMap<Digest, ReleaseUse> {
        let mut uses: BTreeMap<Digest, ReleaseUse> = BTreeMap::new();
        let rollouts = self.intended.values().copied().chain(self.active);
        for id in rollouts.collect::<BTreeSet<_>>() {
            if let Some(rollout) = self.rollout(id) {
                let release = rollout.plan.release;
                uses.entry(release).or_default().rollouts.insert(id);
                // A deployment's code is in use as long as the deployment
                // is (issue #24 item 1): its bytes are what nodes stage.
                if let Some(deploys) = &rollout.deploys {
                    uses.entry(deploys.code).or_default().rollouts.insert(id);
                }
            }
        }
        for (node, record) in self.nodes.iter() {
            if !self.roster.is_retired(*node) {
                let observed = record
                    .observed
                    .as_ref()
                    .and_then(|o| o.observation.identity);
                // The claim counts only where nothing was proven, as for a
                // baseline ([`super::NodeRecord::baseline`]): a node confirmed
                // on v2 that last said hello on v1 no longer needs v1.
                let claimed = record.confirmed.or(record.reported_serving);
                let named: BTreeSet<Digest> = [claimed, observed].into_iter().flatten().collect();
                for release in named {
                    uses.entry(release).or_default().node(*node);
                }
            }
            let live = record.live_op.and_then(|id| self.op(id));
            if let Some(op) = live.filter(|o| o.occupies_slot()) {
                let named: BTreeSet<Digest> = [Some(op.release), op.baseline]
                    .into_iter()
                    .flatten()
                    .collect();
                for release in named {
                    uses.entry(release).or_default().op(op.id);
                }
            }
        }
        uses
    }

    /// What names `release`, or `None` when nothing does and its bytes may
    /// be dropped.
    pub fn release_use(&self, release: Digest) -> Option<ReleaseUse> {
        self.release_uses().remove(&release)
    }
}
