//! The fold: `apply(state, event)`. No decisions here: apply records what an
//! event says. It must accept every event `step` produces, and replaying the
//! durable log through it rebuilds the controller exactly.

use super::event::Event;
use super::roster::Roster;
use super::state::{
    Claim, ControllerState, EvidenceItem, EvidenceSource, NodeObservation, Op, OpPhase, Outcome,
    Quarantine, Resolution, Rollout, RolloutStatus, OP_EVIDENCE_MAX, ROLLOUTS_REMEMBERED,
};
use crate::evidence::ProbeVerdict;
use crate::ids::{NodeId, OpId, RolloutId};
use crate::msg::{Decision, ReportKind, StageRefusal};
use imbl::{OrdMap, Vector};
use std::fmt;
use std::sync::Arc;

/// An op or rollout an event folds into that the state does not hold (or,
/// for a new one, an id out of order): folding it would record a history
/// that never happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MissingReferent {
    /// The event names an op that was never granted, or grants one whose id
    /// is not the next.
    Op(OpId),
    /// The event names a rollout that was never started, or starts one
    /// whose id is not the next.
    Rollout(RolloutId),
    /// The event names a node that was never enrolled, or enrolls one
    /// whose id is not the next (enrollment order). Appended last.
    Node(NodeId),
    /// The event enrolls a name already enrolled as this node.
    NameTaken(NodeId),
    /// The event changes an op that settled in a finished rollout and was
    /// archived: nothing can change it any more.
    Archived(OpId),
    /// The event adds followers to a rollout whose plan is no longer being
    /// recorded (not the latest rollout, or its policy or a grant came
    /// already), or adds an empty chunk, a chunk over
    /// [`crate::plan::FOLLOWERS_PER_EVENT_MAX`], or more than
    /// [`crate::plan::FOLLOWERS_MAX`] in all. Appended last.
    PlanClosed(RolloutId),
    /// The event settles an op that has settled already: its slot and its
    /// counts were released once, and a second settle would release them
    /// again (the rollout's `occupied` would underflow). Appended last.
    Settled(OpId),
    /// The event changes an op the state forgot (settled in a rollout older
    /// than the last [`ROLLOUTS_REMEMBERED`] archived), or says an op was
    /// forgotten that is hot, archived or never granted. Appended last.
    Forgotten(OpId),
    /// The event adds an operator under a name already recorded, or
    /// rotates or revokes one that was never recorded or is revoked
    /// already. Appended last.
    Operator,
}

impl fmt::Display for MissingReferent {
    /// `"op op7, which was never granted"`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MissingReferent::Op(op) => write!(f, "op {op}, which was never granted"),
            MissingReferent::Rollout(r) => write!(f, "rollout {r}, which was never started"),
            MissingReferent::Node(n) => write!(
                f,
                "node {n}, which was never enrolled (or is not the next to enroll)"
            ),
            MissingReferent::NameTaken(n) => {
                write!(f, "a name already enrolled as node {n}")
            }
            MissingReferent::Archived(op) => {
                write!(
                    f,
                    "op {op}, which settled in a finished rollout and is archived"
                )
            }
            MissingReferent::PlanClosed(r) => write!(
                f,
                "the plan of rollout {r}, which is no longer being recorded (or a follower chunk out of bounds)"
            ),
            MissingReferent::Settled(op) => write!(f, "op {op}, which has settled already"),
            MissingReferent::Forgotten(op) => write!(
                f,
                "op {op}, which the state forgot (or which is not forgotten, for a forgotten-op event)"
            ),
            MissingReferent::Operator => f.write_str(
                "an operator that is not recorded (or is revoked, or is recorded already for an addition)",
            ),
        }
    }
}

/// `apply`'s precondition: every op and rollout `event` folds into exists
/// in `state`, and a new op or rollout takes the next id. `step` only
/// produces such events; `invariants::check_event` reports any other (a
/// damaged or forged log) before `apply` sees it.
pub fn referents_exist(state: &ControllerState, event: &Event) -> Result<(), MissingReferent> {
    match event {
        Event::RolloutStarted { rollout, .. } => {
            if rollout.0 as usize == state.rollouts.len() {
                Ok(())
            } else {
                Err(MissingReferent::Rollout(*rollout))
            }
        }
        Event::RolloutSuperseded { rollout, .. }
        | Event::RolloutPaused { rollout, .. }
        | Event::RolloutResumed { rollout }
        | Event::RolloutApproved { rollout }
        | Event::RolloutCompleted { rollout }
        | Event::RolloutEnded { rollout, .. }
        | Event::RolloutPolicySet { rollout, .. }
        | Event::RolloutArchesSet { rollout, .. }
        | Event::RolloutConfigured { rollout, .. } => rollout_exists(state, rollout),
        Event::RolloutFollowersAdded { rollout, followers } => {
            plan_open(state, *rollout, followers.len())
        }
        Event::OpGranted { op, rollout, .. } => {
            rollout_exists(state, rollout)?;
            if *op == state.next_op_id() {
                Ok(())
            } else {
                Err(MissingReferent::Op(*op))
            }
        }
        Event::CommitDecided { op, .. } => op_known(state, op),
        Event::ReportRecorded { op, .. }
        | Event::ProbeRecorded { op, .. }
        | Event::OperatorObserved { op, .. }
        | Event::RestoreRequested { op }
        | Event::OpClaimed { op, .. } => op_exists(state, op),
        Event::OpUnknown { op, .. } | Event::OpSettled { op, .. } => op_unsettled(state, op),
        Event::CommitReplayed { .. }
        | Event::NodeObserved { .. }
        | Event::NodeHello { .. }
        | Event::NodePlatform { .. }
        | Event::LateReportIgnored { .. }
        | Event::StaleCommandRejected { .. }
        | Event::ForeignMessageIgnored { .. }
        | Event::RollBackOrdered { .. }
        | Event::NodeQuarantined { .. }
        | Event::NodeReleased { .. }
        | Event::CertRevoked { .. }
        | Event::ConfigSet { .. }
        | Event::Acted { .. } => Ok(()),
        Event::OperatorAdded { .. }
        | Event::CredentialRotated { .. }
        | Event::OperatorRevoked { .. } => operator_referent(state, event),
        Event::ForgottenOpIgnored { op, .. } => {
            if state.op_forgotten(*op) {
                Ok(())
            } else {
                Err(MissingReferent::Forgotten(*op))
            }
        }
        Event::NodeEnrolled { node, name, .. } => node_enrollable(state, *node, name),
        Event::NodeLabeled { node, .. } | Event::NodeRetired { node } => {
            match state.roster.get(*node) {
                Some(_) => Ok(()),
                None => Err(MissingReferent::Node(*node)),
            }
        }
    }
}

/// `referents_exist` for an event that folds into a hot op.
fn op_exists(state: &ControllerState, op: &OpId) -> Result<(), MissingReferent> {
    match (state.op(*op), state.archive.contains_key(op)) {
        (Some(_), _) => Ok(()),
        (None, true) => Err(MissingReferent::Archived(*op)),
        (None, false) if state.op_forgotten(*op) => Err(MissingReferent::Forgotten(*op)),
        (None, false) => Err(MissingReferent::Op(*op)),
    }
}

/// `referents_exist` for a commit decision: a late commit request of an
/// archived op is still answered with its stored decision (S6), or decided
/// once if it never had one.
fn op_known(state: &ControllerState, op: &OpId) -> Result<(), MissingReferent> {
    match state.op_summary(*op) {
        Some(_) => Ok(()),
        None if state.op_forgotten(*op) => Err(MissingReferent::Forgotten(*op)),
        None => Err(MissingReferent::Op(*op)),
    }
}

/// `referents_exist` for an event that folds into an existing rollout.
fn rollout_exists(state: &ControllerState, r: &RolloutId) -> Result<(), MissingReferent> {
    match state.rollout(*r) {
        Some(_) => Ok(()),
        None => Err(MissingReferent::Rollout(*r)),
    }
}

/// `referents_exist` for `OpUnknown` and `OpSettled`: a settled op is never
/// UNKNOWN (`Op::is_unknown`), and settles once.
fn op_unsettled(state: &ControllerState, op: &OpId) -> Result<(), MissingReferent> {
    op_exists(state, op)?;
    match state.op(*op) {
        Some(o) if matches!(o.phase, OpPhase::Settled(_)) => Err(MissingReferent::Settled(*op)),
        _ => Ok(()),
    }
}

/// `referents_exist` for `NodeEnrolled`: a new name, and the next node id.
fn node_enrollable(
    state: &ControllerState,
    node: NodeId,
    name: &str,
) -> Result<(), MissingReferent> {
    if let Some(taken) = state.roster.id(name) {
        return Err(MissingReferent::NameTaken(taken));
    }
    if node == state.roster.next_id() {
        Ok(())
    } else {
        Err(MissingReferent::Node(node))
    }
}

/// Fold one event into the state.
///
/// # Panics
/// When `event` breaks [`referents_exist`]: an event for an op or rollout
/// that does not exist is a bug in whoever produced it, not a no-op (the
/// assertion stays on in release builds).
pub fn apply(state: &mut ControllerState, event: &Event) {
    if let Err(missing) = referents_exist(state, event) {
        panic!("apply: event {event} names {missing}");
    }
    match event {
        Event::RolloutStarted {
            rollout,
            plan,
            generation,
        } => start_rollout(state, *rollout, plan, *generation),
        Event::RolloutSuperseded { rollout, .. } => {
            end(state, *rollout, RolloutStatus::Superseded);
        }
        Event::RolloutPaused { rollout, reason } => {
            rollout_mut(state, *rollout).paused = Some(*reason);
        }
        Event::RolloutResumed { rollout } => {
            rollout_mut(state, *rollout).paused = None;
        }
        Event::RolloutApproved { rollout } => approve(state, *rollout),
        Event::RolloutPolicySet { rollout, policy } => {
            rollout_mut(state, *rollout).policy = Arc::new(policy.clone());
        }
        Event::RolloutArchesSet { rollout, arches } => {
            rollout_mut(state, *rollout).arches = crate::platform::ReleaseArches::Only(*arches);
        }
        Event::RolloutConfigured { rollout, deploys } => {
            rollout_mut(state, *rollout).deploys = Some(deploys.clone());
        }
        Event::ConfigSet { revision } => set_config(state, revision),
        Event::RolloutFollowersAdded { rollout, followers } => {
            add_followers(state, *rollout, followers);
        }
        Event::RolloutCompleted { rollout } => {
            end(state, *rollout, RolloutStatus::Completed);
        }
        Event::RolloutEnded { rollout, .. } => {
            end(state, *rollout, RolloutStatus::Ended);
        }
        Event::OpGranted { .. }
        | Event::CommitDecided { .. }
        | Event::CommitReplayed { .. }
        | Event::ReportRecorded { .. }
        | Event::ProbeRecorded { .. }
        | Event::OperatorObserved { .. }
        | Event::RestoreRequested { .. }
        | Event::OpUnknown { .. }
        | Event::OpSettled { .. }
        | Event::OpClaimed { .. } => apply_op_event(state, event),
        Event::NodeObserved { .. }
        | Event::NodeHello { .. }
        | Event::NodePlatform { .. }
        | Event::NodeQuarantined { .. }
        | Event::NodeReleased { .. }
        | Event::CertRevoked { .. }
        | Event::NodeEnrolled { .. }
        | Event::NodeLabeled { .. }
        | Event::NodeRetired { .. } => apply_node_event(state, event),
        Event::LateReportIgnored { .. }
        | Event::StaleCommandRejected { .. }
        | Event::ForeignMessageIgnored { .. }
        | Event::ForgottenOpIgnored { .. }
        | Event::RollBackOrdered { .. } => {
            // Recorded for the audit trail; a late or stale message never
            // changes a node's recorded state (S8).
        }
        // Who acted is the log's record; the state does not keep it.
        Event::Acted { .. } => {}
        Event::OperatorAdded { .. }
        | Event::CredentialRotated { .. }
        | Event::OperatorRevoked { .. } => apply_operator_event(state, event),
    }
}

/// `apply` for `ConfigSet`: the app's latest revision, whole.
fn set_config(state: &mut ControllerState, revision: &crate::config::ConfigRevision) {
    state
        .configs
        .insert(revision.app.clone(), Arc::new(revision.clone()));
}

/// `referents_exist` for the operators' events: an addition names a new
/// operator, a rotation or a revocation a recorded, unrevoked one.
fn operator_referent(state: &ControllerState, event: &Event) -> Result<(), MissingReferent> {
    let ok = match event {
        Event::OperatorAdded { name, .. } => state.operators.get(name).is_none(),
        Event::CredentialRotated { name, .. } | Event::OperatorRevoked { name } => {
            state.operators.get(name).is_some_and(|r| !r.revoked)
        }
        _ => true,
    };
    if ok {
        Ok(())
    } else {
        Err(MissingReferent::Operator)
    }
}

/// `apply` for the operators' events.
fn apply_operator_event(state: &mut ControllerState, event: &Event) {
    match event {
        Event::OperatorAdded {
            name,
            role,
            credential,
        } => state.operators.add(name, *role, *credential),
        Event::CredentialRotated { name, credential } => {
            state.operators.rotate(name, *credential);
        }
        Event::OperatorRevoked { name } => state.operators.revoke(name),
        _ => unreachable!("apply_operator_event: {event}"),
    }
}

/// `apply` for `RolloutStarted`.
fn start_rollout(
    state: &mut ControllerState,
    rollout: RolloutId,
    plan: &crate::plan::Plan,
    generation: crate::ids::Generation,
) {
    state.generation = generation;
    state.rollouts.push_back(Arc::new(Rollout {
        id: rollout,
        plan: Arc::new(plan.clone()),
        generation,
        status: RolloutStatus::Active,
        paused: None,
        approved: false,
        ops: Default::default(),
        op_by_node: Default::default(),
        occupied: 0,
        followers_granted: 0,
        settled: 0,
        settled_not_passed: 0,
        archived: false,
        forgotten: false,
        arches: crate::platform::ReleaseArches::Any,
        deploys: None,
        policy: Default::default(),
        failed: 0,
        unknown: 0,
        wave_approvals: 0,
    }));
    state.active = Some(rollout);
    // O(plan) once per rollout, so that no later read scans plans.
    for node in plan.nodes() {
        state.intended.insert(node, rollout);
    }
}

/// `apply` for `RolloutApproved`: the canary gate first, then one approval
/// per later wave.
fn approve(state: &mut ControllerState, rollout: RolloutId) {
    let r = rollout_mut(state, rollout);
    if r.plan.approval_after_canary && !r.approved {
        r.approved = true;
    } else {
        r.wave_approvals += 1;
    }
}

/// `apply` for `RolloutFollowersAdded`.
fn add_followers(state: &mut ControllerState, rollout: RolloutId, followers: &[NodeId]) {
    let r = rollout_mut(state, rollout);
    // The plan is unique here (recorded in this batch), so this
    // extends it in place; O(followers) once per rollout.
    Arc::make_mut(&mut r.plan)
        .followers
        .extend_from_slice(followers);
    for node in followers {
        state.intended.insert(*node, rollout);
    }
}

/// `apply` for the events that fold into one op.
fn apply_op_event(state: &mut ControllerState, event: &Event) {
    match event {
        Event::OpGranted {
            op,
            rollout,
            node,
            release,
            generation,
            baseline,
            is_canary,
        } => grant(
            state,
            Op {
                id: *op,
                rollout: *rollout,
                node: *node,
                generation: *generation,
                release: *release,
                baseline: *baseline,
                is_canary: *is_canary,
                phase: OpPhase::Granted,
                decision: None,
                unknown: None,
                evidence: Vec::new(),
                failed_probe_seen: false,
                claim: None,
                commit_acted_on: false,
                cause: None,
            },
        ),
        Event::CommitDecided { op, decision } => decide_commit(state, *op, *decision),
        Event::CommitReplayed { .. } => {
            // The decision was already stored; replaying it changes nothing.
        }
        Event::ReportRecorded {
            op,
            kind,
            observation,
        } => record_report(state, *op, *kind, *observation),
        Event::ProbeRecorded { op, observation } => record_probe(state, *op, *observation),
        Event::OperatorObserved { op, observation } => {
            let o = op_mut(state, *op);
            record(o, EvidenceSource::Operator, *observation, false);
        }
        Event::RestoreRequested { op } => request_restore(state, *op),
        Event::OpUnknown { op, reason } => mark_unknown(state, *op, *reason),
        Event::OpSettled { op, outcome } => settle(state, *op, *outcome),
        Event::OpClaimed {
            op,
            owner,
            review_by,
        } => {
            let o = op_mut(state, *op);
            o.claim = Some(Claim {
                owner: owner.clone(),
                review_by: review_by.clone(),
            });
        }
        // `apply` routes only the op events here.
        _ => unreachable!("apply_op_event: {event}"),
    }
}

/// `apply` for `OpGranted`: the new op, its rollout's counters and its
/// node's record.
fn grant(state: &mut ControllerState, new: Op) {
    let (op, rollout, node, is_canary) = (new.id, new.rollout, new.node, new.is_canary);
    state.ops.insert(op, new);
    state.next_op = OpId(op.0 + 1);
    let r = rollout_mut(state, rollout);
    r.ops.push_back(op);
    r.op_by_node.insert(node, op);
    r.occupied += 1;
    if !is_canary {
        r.followers_granted += 1;
    }
    let record = state.nodes.entry(node).or_default();
    record.live_op = Some(op);
    let previous = record.last_op.replace(op);
    if let Some(previous) = previous {
        archive_op(state, previous);
    }
    reindex_drift(state, node);
}

/// `apply` for `CommitDecided`.
fn decide_commit(state: &mut ControllerState, op: OpId, decision: Decision) {
    match state.ops.get_mut(&op) {
        Some(o) => {
            o.decision = Some(decision);
            if o.phase == OpPhase::Granted {
                o.phase = OpPhase::Decided;
            }
        }
        // `referents_exist` let it through: it is archived.
        None => {
            if let Some(summary) = state.archive.get_mut(&op) {
                summary.decision = Some(decision);
            }
        }
    }
}

/// `apply` for `ReportRecorded`.
fn record_report(
    state: &mut ControllerState,
    op: OpId,
    kind: ReportKind,
    observation: crate::evidence::RouteObservation,
) {
    let o = op_mut(state, op);
    // Only a committed op's switch report is a probe of the new
    // release; on an undecided op it is a contradiction, which
    // makes the op UNKNOWN instead (S11 judges served answers).
    let after_switch = kind == ReportKind::Switched
        && o.decision == Some(Decision::Commit)
        && o.phase == OpPhase::Decided;
    record(o, EvidenceSource::Agent(kind), observation, after_switch);
}

/// `apply` for `ProbeRecorded`.
fn record_probe(
    state: &mut ControllerState,
    op: OpId,
    observation: crate::evidence::RouteObservation,
) {
    let o = op_mut(state, op);
    let after_switch =
        o.decision == Some(Decision::Commit) && observation.identity == Some(o.release);
    record(
        o,
        EvidenceSource::ControllerProbe,
        observation,
        after_switch,
    );
}

/// `apply` for `OpUnknown`.
fn mark_unknown(state: &mut ControllerState, op: OpId, reason: super::state::UnknownReason) {
    let o = op_mut(state, op);
    let (rollout, first) = (o.rollout, o.unknown.is_none());
    o.unknown = Some(reason);
    rollout_mut(state, rollout).unknown += u32::from(first);
}

/// `apply` for `RestoreRequested`.
fn request_restore(state: &mut ControllerState, op: OpId) {
    let o = op_mut(state, op);
    let (rollout, first) = (o.rollout, o.phase != OpPhase::Restoring);
    o.phase = OpPhase::Restoring;
    // The observation that made it restore, kept apart from the
    // bounded evidence window so the cause survives (a proof
    // names it after later evidence pushed it out).
    if o.cause.is_none() {
        let release = o.release;
        o.cause = o
            .evidence
            .iter()
            .rev()
            .find(|e| !e.observation.proves_serving(release))
            .copied();
    }
    rollout_mut(state, rollout).failed += u32::from(first);
}

/// `apply` for `OpSettled`: the op, its rollout's counters and its node's
/// record.
fn settle(state: &mut ControllerState, op: OpId, outcome: Outcome) {
    let o = op_mut(state, op);
    o.phase = OpPhase::Settled(outcome);
    let was_unknown = o.unknown.take().is_some();
    let passed = o.passed();
    let (node, release, baseline, rollout) = (o.node, o.release, o.baseline, o.rollout);
    let r = rollout_mut(state, rollout);
    r.unknown -= u32::from(was_unknown);
    r.occupied -= 1;
    r.settled += 1;
    r.settled_not_passed += u32::from(!passed);
    archive_rollout(state, rollout);
    let record = state.nodes.entry(node).or_default();
    if record.live_op == Some(op) {
        record.live_op = None;
    }
    // The op's settling evidence is newer than any earlier look.
    record.observed = None;
    record.confirmed = match outcome {
        Outcome::Verified | Outcome::Resolved(Resolution::ConfirmNew) => Some(release),
        Outcome::RolledBack
        | Outcome::NotApplied
        | Outcome::Resolved(Resolution::ConfirmBaseline) => baseline,
        Outcome::Resolved(Resolution::Abandon) => None,
    };
    reindex_drift(state, node);
}

/// `apply` for the events that fold into one node's record or the roster.
fn apply_node_event(state: &mut ControllerState, event: &Event) {
    match event {
        Event::NodeObserved {
            node,
            observation,
            source,
            at_ms,
        } => {
            state.nodes.entry(*node).or_default().observed = Some(NodeObservation {
                observation: *observation,
                source: *source,
                at_ms: *at_ms,
            });
            reindex_drift(state, *node);
        }
        Event::NodeHello { node, serving, .. } => {
            state.nodes.entry(*node).or_default().reported_serving = *serving;
        }
        Event::NodePlatform { node, platform } => {
            state.nodes.entry(*node).or_default().platform = Some(*platform);
        }
        Event::NodeQuarantined {
            node,
            first_peer,
            second_peer,
        } => {
            state.quarantined.insert(
                *node,
                Quarantine {
                    first_peer: first_peer.clone(),
                    second_peer: second_peer.clone(),
                },
            );
        }
        Event::NodeReleased { node } => {
            state.quarantined.remove(node);
        }
        Event::CertRevoked { node, fingerprint } => {
            state.revoked_certs.insert(*fingerprint, *node);
        }
        Event::NodeEnrolled {
            node,
            name,
            labels,
            public,
        } => state.roster.enroll(*node, name, labels, public),
        Event::NodeLabeled { node, labels } => state.roster.relabel(*node, labels),
        Event::NodeRetired { node } => state.roster.retire(*node),
        // `apply` routes only the node events here.
        _ => unreachable!("apply_node_event: {event}"),
    }
}

/// Keep [`ControllerState::drifted`] in step for `node`: only `OpGranted`,
/// `OpSettled` and `NodeObserved` change what `drift` reads (the live op,
/// the confirmed release, the observation), and each calls this.
fn reindex_drift(state: &mut ControllerState, node: NodeId) {
    let drifted = state.nodes.get(&node).is_some_and(|r| r.drift().is_some());
    if drifted {
        state.drifted.insert(node);
    } else {
        state.drifted.remove(&node);
    }
}

/// The op an event folds into; [`referents_exist`] was asserted first.
fn op_mut(state: &mut ControllerState, op: OpId) -> &mut Op {
    state
        .ops
        .get_mut(&op)
        .expect("referents_exist: the op is hot")
}

/// The rollout an event folds into; [`referents_exist`] was asserted first.
/// Whether `added` more followers may join rollout `rollout`'s plan: it is
/// the latest rollout, nothing was granted in it and no policy recorded
/// yet (both come after the whole plan), and the chunk and the plan stay
/// within their limits.
fn plan_open(
    state: &ControllerState,
    rollout: RolloutId,
    added: usize,
) -> Result<(), MissingReferent> {
    use crate::plan::{FOLLOWERS_MAX, FOLLOWERS_PER_EVENT_MAX};
    let r = state
        .rollout(rollout)
        .ok_or(MissingReferent::Rollout(rollout))?;
    let latest = rollout.0 as usize + 1 == state.rollouts.len();
    let open = latest && r.ops.is_empty() && *r.policy == Default::default();
    let sized = (1..=FOLLOWERS_PER_EVENT_MAX).contains(&added)
        && r.plan.followers.len() + added <= FOLLOWERS_MAX;
    if open && sized {
        Ok(())
    } else {
        Err(MissingReferent::PlanClosed(rollout))
    }
}

fn rollout_mut(state: &mut ControllerState, rollout: RolloutId) -> &mut Rollout {
    let shared = state
        .rollouts
        .get_mut(rollout.0 as usize)
        .expect("referents_exist: the rollout exists");
    Arc::make_mut(shared)
}

/// A rollout stops granting: superseded, completed or ended.
fn end(state: &mut ControllerState, rollout: RolloutId, status: RolloutStatus) {
    rollout_mut(state, rollout).status = status;
    if state.active == Some(rollout) {
        state.active = None;
    }
    archive_rollout(state, rollout);
}

/// Once nothing more can happen in a rollout (not active, no op holding a
/// slot), its settled ops move to the archive, but each node's latest op,
/// which a proof still reads. O(ops of the rollout), once per rollout.
fn archive_rollout(state: &mut ControllerState, rollout: RolloutId) {
    let r = rollout_mut(state, rollout);
    if r.archived || !r.finished() {
        return;
    }
    r.archived = true;
    let ops = r.ops.clone();
    for op in ops {
        archive_op(state, op);
    }
    state.remembered.insert(rollout);
    while state.remembered.len() > ROLLOUTS_REMEMBERED {
        if let Some(oldest) = state.remembered.remove_min() {
            forget_rollout(state, oldest);
        }
    }
}

/// The state forgets an archived rollout's archived ops: they leave
/// `archive`, and its op lists keep only its hot ops (each its node's
/// latest, which a proof still reads). O(ops of the rollout), once per
/// rollout; what remains is bounded by the fleet, not by history.
fn forget_rollout(state: &mut ControllerState, rollout: RolloutId) {
    let ops = rollout_mut(state, rollout).ops.clone();
    let mut kept = Vector::new();
    let mut gone = 0_u64;
    for op in ops {
        if state.archive.remove(&op).is_some() {
            gone += 1;
        } else {
            kept.push_back(op);
        }
    }
    state.forgotten_ops += gone;
    let hot = |op: &OpId| state.ops.contains_key(op);
    let by_node: OrdMap<NodeId, OpId> = rollout_ref(state, rollout)
        .op_by_node
        .iter()
        .filter(|(_, op)| hot(op))
        .map(|(n, op)| (*n, *op))
        .collect();
    let r = rollout_mut(state, rollout);
    assert!(r.archived && !r.forgotten, "forgetting {rollout} twice");
    r.forgotten = true;
    r.ops = kept;
    r.op_by_node = by_node;
}

fn rollout_ref(state: &ControllerState, rollout: RolloutId) -> &Rollout {
    state
        .rollout(rollout)
        .expect("referents_exist: the rollout exists")
}

/// Move `op` to the archive if its rollout finished and it is not its
/// node's latest op (then nothing can change it and nothing reads it whole).
fn archive_op(state: &mut ControllerState, op: OpId) {
    let Some(o) = state.op(op) else {
        return;
    };
    let finished = state.rollout(o.rollout).is_some_and(Rollout::finished);
    let latest = state.nodes.get(&o.node).and_then(|n| n.last_op) == Some(op);
    if !finished || latest {
        return;
    }
    assert!(!o.occupies_slot(), "a finished rollout's op holds a slot");
    let summary = o.summary();
    let rollout = o.rollout;
    let node = o.node;
    state.ops.remove(&op);
    if !rollout_ref(state, rollout).forgotten {
        state.archive.insert(op, summary);
        return;
    }
    // Its rollout was forgotten while this op was its node's latest: it is
    // forgotten now, and leaves the rollout's lists of hot ops.
    state.forgotten_ops += 1;
    let r = rollout_mut(state, rollout);
    if let Ok(at) = r.ops.binary_search(&op) {
        r.ops.remove(at);
    }
    if r.op_by_node.get(&node) == Some(&op) {
        r.op_by_node.remove(&node);
    }
}

fn record(
    op: &mut Op,
    source: EvidenceSource,
    observation: crate::evidence::RouteObservation,
    after_switch: bool,
) {
    if after_switch && observation.verdict != ProbeVerdict::Pass {
        op.failed_probe_seen = true;
    }
    // The agent reports a switch or a restore only after it left its wait
    // for the decision; a route answering as the new release switched. So
    // does a refusal that only the Commit leads to (issue #24 item 2): the
    // migration it started failed, was interrupted, or a roll back after
    // it was refused; that agent never switches for this op again.
    let agent_moved_on = matches!(
        source,
        EvidenceSource::Agent(
            ReportKind::Switched
                | ReportKind::Restored
                | ReportKind::Refused(
                    StageRefusal::MigrationFailed
                        | StageRefusal::MigrationInterrupted
                        | StageRefusal::MigrationIrreversible
                )
        )
    );
    if agent_moved_on || observation.identity == Some(op.release) {
        op.commit_acted_on = true;
    }
    let item = EvidenceItem {
        source,
        observation,
        after_restore: op.phase == OpPhase::Restoring,
    };
    // A repeated observation (a retried report) adds nothing new: keep the
    // state small instead of filling the window with copies.
    if op.evidence.last() == Some(&item) {
        return;
    }
    if op.evidence.len() == OP_EVIDENCE_MAX {
        op.evidence.remove(0);
    }
    op.evidence.push(item);
}

/// The roster's share of [`apply`], for the runtime's copy of the roster.
impl Roster {
    /// Fold the roster part of `event` (the three roster events; others
    /// change nothing here): what `apply` does to `ControllerState::roster`,
    /// for a runtime that keeps a copy of the roster beside the state
    /// without cloning it per event. The event must have passed
    /// `referents_exist`.
    pub fn fold(&mut self, event: &Event) {
        match event {
            Event::NodeEnrolled {
                node,
                name,
                labels,
                public,
            } => self.enroll(*node, name, labels, public),
            Event::NodeLabeled { node, labels } => self.relabel(*node, labels),
            Event::NodeRetired { node } => self.retire(*node),
            _ => {}
        }
    }
}
