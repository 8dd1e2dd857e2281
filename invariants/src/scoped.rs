//! State rules checked where an event could break them, so that checking
//! costs O(log n) per event however large the fleet and the history: the
//! runtime checks every batch, and a restart replays the whole log. The
//! whole-state [`crate::check_state`] (which also recounts every index
//! `apply` keeps) is what the model checker runs on its small states.

use crate::state_rules::{b1_over_budget_is_paused, s11_rollout, s4_op};
use crate::{broken, Rule, Violation};
use model::controller::{ControllerState, Event, Op};
use model::{NodeId, OpId, RolloutId};
use std::collections::BTreeSet;

/// The rollouts, ops and nodes whose state rules some events may change.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Touched {
    /// Rollouts whose slots, canary or followers may have changed.
    pub rollouts: BTreeSet<RolloutId>,
    /// Ops that may have changed.
    pub ops: BTreeSet<OpId>,
    /// Nodes whose record may have changed.
    pub nodes: BTreeSet<NodeId>,
}

impl Touched {
    /// Note what `event` touched, looked up in the state it led to.
    pub fn add(&mut self, after: &ControllerState, event: &Event) {
        let (rollout, op, node) = names(event);
        if let Some(op) = op {
            self.ops.insert(op);
            if let Some(o) = after.op_summary(op) {
                self.rollouts.insert(o.rollout);
                self.nodes.insert(o.node);
            }
        }
        self.rollouts.extend(rollout);
        if let Some(node) = node {
            self.nodes.insert(node);
            // The node's live op: a (re)connect or release resends it.
            if let Some(live) = after.nodes.get(&node).and_then(|n| n.live_op) {
                self.ops.insert(live);
            }
        }
    }

    /// Adds everything `other` touched.
    pub fn extend(&mut self, other: Touched) {
        self.rollouts.extend(other.rollouts);
        self.ops.extend(other.ops);
        self.nodes.extend(other.nodes);
    }

    /// What one event touched.
    pub fn of(after: &ControllerState, event: &Event) -> Touched {
        let mut touched = Touched::default();
        touched.add(after, event);
        touched
    }
}

/// The rollout, op and node an event names.
fn names(event: &Event) -> (Option<RolloutId>, Option<OpId>, Option<NodeId>) {
    match event {
        Event::RolloutStarted { rollout, .. }
        | Event::RolloutSuperseded { rollout, .. }
        | Event::RolloutPaused { rollout, .. }
        | Event::RolloutResumed { rollout }
        | Event::RolloutApproved { rollout }
        | Event::RolloutCompleted { rollout }
        | Event::RolloutEnded { rollout, .. }
        | Event::RolloutPolicySet { rollout, .. }
        | Event::RolloutArchesSet { rollout, .. }
        | Event::RolloutConfigured { rollout, .. }
        | Event::RolloutFollowersAdded { rollout, .. } => (Some(*rollout), None, None),
        Event::ConfigSet { .. }
        | Event::Acted { .. }
        | Event::OperatorAdded { .. }
        | Event::CredentialRotated { .. }
        | Event::OperatorRevoked { .. } => (None, None, None),
        Event::OpGranted {
            op, rollout, node, ..
        } => (Some(*rollout), Some(*op), Some(*node)),
        Event::CommitDecided { op, .. }
        | Event::CommitReplayed { op, .. }
        | Event::ReportRecorded { op, .. }
        | Event::ProbeRecorded { op, .. }
        | Event::OperatorObserved { op, .. }
        | Event::RestoreRequested { op }
        | Event::OpUnknown { op, .. }
        | Event::OpSettled { op, .. }
        | Event::OpClaimed { op, .. }
        | Event::RollBackOrdered { op } => (None, Some(*op), None),
        Event::LateReportIgnored { node, op }
        | Event::StaleCommandRejected { node, op, .. }
        | Event::ForeignMessageIgnored { node, op, .. }
        | Event::ForgottenOpIgnored { node, op } => (None, Some(*op), Some(*node)),
        Event::NodeObserved { node, .. }
        | Event::NodeHello { node, .. }
        | Event::NodePlatform { node, .. }
        | Event::NodeQuarantined { node, .. }
        | Event::NodeReleased { node }
        | Event::CertRevoked { node, .. }
        | Event::NodeEnrolled { node, .. }
        | Event::NodeLabeled { node, .. }
        | Event::NodeRetired { node } => (None, None, Some(*node)),
    }
}

/// S1, S2, S4 and S11 on what was touched; the first violation. The op
/// `restore_owed` may still be `Decided` after a failed canary probe (see
/// [`crate::check_history`]).
pub fn check_state_touched(
    state: &ControllerState,
    touched: &Touched,
    restore_owed: Option<OpId>,
) -> Result<(), Violation> {
    for r in touched.rollouts.iter().filter_map(|r| state.rollout(*r)) {
        if r.occupied > u32::from(r.plan.slots_max) {
            return broken(
                Rule::S1,
                format!(
                    "rollout {} has {} unsettled ops with slots_max {}",
                    r.id, r.occupied, r.plan.slots_max
                ),
            );
        }
    }
    for op in touched.ops.iter().filter_map(|op| state.op(*op)) {
        s2_op(state, op)?;
        s4_op(state, op)?;
    }
    for node in &touched.nodes {
        s2_node(state, *node)?;
    }
    for r in touched.rollouts.iter().filter_map(|r| state.rollout(*r)) {
        b1_over_budget_is_paused(r)?;
        s11_rollout(state, r, restore_owed)?;
    }
    Ok(())
}

/// S2 for one op: an unsettled op is its node's recorded live op.
fn s2_op(state: &ControllerState, op: &Op) -> Result<(), Violation> {
    let recorded = state.nodes.get(&op.node).and_then(|n| n.live_op);
    if op.occupies_slot() && recorded != Some(op.id) {
        let what = recorded.map_or_else(|| "no live op".to_string(), |r| format!("live op {r}"));
        return broken(
            Rule::S2,
            format!(
                "{} records {what} but {} is unsettled on it",
                op.node, op.id
            ),
        );
    }
    Ok(())
}

/// S2 for one node: its recorded live op is an unsettled op of its own.
fn s2_node(state: &ControllerState, node: NodeId) -> Result<(), Violation> {
    let Some(live) = state.nodes.get(&node).and_then(|n| n.live_op) else {
        return Ok(());
    };
    match state.op(live) {
        Some(o) if o.node == node && o.occupies_slot() => Ok(()),
        _ => broken(
            Rule::S2,
            format!("{node} records live op {live} but has no such unsettled op"),
        ),
    }
}
