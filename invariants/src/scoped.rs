//! State rules checked where an event could break them, so that checking
//! costs O(log n) per event however large the fleet and the history: the
//! runtime checks every batch, and a restart replays the whole log. The
//! whole-state [`crate::check_state`] (which also recounts every index
//! `apply` keeps) is what the model checker runs on its small states.

use crate::state_rules::{flag_mismatch, s11_rollout};
use crate::{broken, words, Rule, Violation};
use model::controller::{ControllerState, Event, Op, Outcome, Resolution};
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
        | Event::RolloutFollowersAdded { rollout, .. } => (Some(*rollout), None, None),
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

/// B1 in a state: an active rollout over its failure budget is paused.
pub(crate) fn b1_over_budget_is_paused(r: &model::controller::Rollout) -> Result<(), Violation> {
    if r.status == model::controller::RolloutStatus::Active && r.over_budget() && r.paused.is_none()
    {
        return broken(
            Rule::FailureBudget,
            format!(
                "rollout {} is over its failure budget ({} failed, {} UNKNOWN) but not paused",
                r.id, r.failed, r.unknown
            ),
        );
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

/// S4 for one op: its canary flag agrees with the plan, and a follower
/// exists only after its canary passed and, with a gate, an approval.
pub(crate) fn s4_op(state: &ControllerState, op: &Op) -> Result<(), Violation> {
    let Some(r) = state.rollout(op.rollout) else {
        return Ok(());
    };
    let on_canary = op.node == r.plan.canary;
    if op.is_canary != on_canary {
        return broken(Rule::S4, flag_mismatch(op.id, op.node, op.is_canary, r));
    }
    // A forgotten rollout's canary op may be forgotten: its follower was
    // judged against it when granted, and nothing in the rollout changes.
    if on_canary || r.forgotten {
        return Ok(());
    }
    // The canary op may be archived (its rollout finished, its node moved
    // on): its summary keeps the outcome.
    let canary = r.op_for(r.plan.canary).and_then(|c| state.op_summary(c));
    let passed = canary.is_some_and(|c| {
        matches!(
            c.outcome,
            Some(Outcome::Verified | Outcome::Resolved(Resolution::ConfirmNew))
        )
    });
    if !passed {
        let canary_state = canary.map_or_else(
            || "has no op".to_string(),
            |c| match state.op(c.id) {
                Some(hot) => format!("op {} is {}", c.id, words::phase(hot.phase)),
                None => format!("op {} is archived unpassed", c.id),
            },
        );
        return broken(
            Rule::S4,
            format!(
                "follower {} ({}) exists in rollout {} but canary {} {canary_state}",
                op.id, op.node, r.id, r.plan.canary
            ),
        );
    }
    if r.plan.approval_after_canary && !r.approved {
        return broken(
            Rule::S4,
            format!(
                "follower {} ({}) exists in rollout {} before an operator approved after the canary",
                op.id, op.node, r.id
            ),
        );
    }
    Ok(())
}
