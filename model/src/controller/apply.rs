//! The fold: `apply(state, event)`. No decisions here: apply records what an
//! event says. It must accept every event `step` produces, and replaying the
//! durable log through it rebuilds the controller exactly.

use super::event::Event;
use super::state::{
    Claim, ControllerState, EvidenceItem, EvidenceSource, NodeObservation, Op, OpPhase, Outcome,
    Quarantine, Resolution, Rollout, RolloutStatus, OP_EVIDENCE_MAX,
};
use crate::evidence::ProbeVerdict;
use crate::msg::{Decision, ReportKind};

/// Fold one event into the state. Events referring to ops or rollouts that do
/// not exist are ignored here; `invariants::check_event` reports them.
pub fn apply(state: &mut ControllerState, event: &Event) {
    match event {
        Event::RolloutStarted {
            rollout,
            plan,
            generation,
        } => {
            state.generation = *generation;
            state.rollouts.push(Rollout {
                id: *rollout,
                plan: plan.clone(),
                generation: *generation,
                status: RolloutStatus::Active,
                paused: None,
                approved: false,
                ops: Vec::new(),
            });
        }
        Event::RolloutSuperseded { rollout, .. } => {
            if let Some(r) = state.rollouts.get_mut(rollout.0 as usize) {
                r.status = RolloutStatus::Superseded;
            }
        }
        Event::RolloutPaused { rollout, reason } => {
            if let Some(r) = state.rollouts.get_mut(rollout.0 as usize) {
                r.paused = Some(*reason);
            }
        }
        Event::RolloutResumed { rollout } => {
            if let Some(r) = state.rollouts.get_mut(rollout.0 as usize) {
                r.paused = None;
            }
        }
        Event::RolloutApproved { rollout } => {
            if let Some(r) = state.rollouts.get_mut(rollout.0 as usize) {
                r.approved = true;
            }
        }
        Event::RolloutCompleted { rollout } => {
            if let Some(r) = state.rollouts.get_mut(rollout.0 as usize) {
                r.status = RolloutStatus::Completed;
            }
        }
        Event::OpGranted {
            op,
            rollout,
            node,
            release,
            generation,
            baseline,
            is_canary,
        } => {
            state.ops.push(Op {
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
            });
            if let Some(r) = state.rollouts.get_mut(rollout.0 as usize) {
                r.ops.push(*op);
            }
            state.nodes.entry(*node).or_default().live_op = Some(*op);
        }
        Event::CommitDecided { op, decision } => {
            if let Some(o) = op_mut(state, op.0) {
                o.decision = Some(*decision);
                if o.phase == OpPhase::Granted {
                    o.phase = OpPhase::Decided;
                }
            }
        }
        Event::CommitReplayed { .. } => {
            // The decision was already stored; replaying it changes nothing.
        }
        Event::ReportRecorded {
            op,
            kind,
            observation,
        } => {
            if let Some(o) = op_mut(state, op.0) {
                // Only a committed op's switch report is a probe of the new
                // release; on an undecided op it is a contradiction, which
                // makes the op UNKNOWN instead (S11 judges served answers).
                let after_switch = *kind == ReportKind::Switched
                    && o.decision == Some(Decision::Commit)
                    && o.phase == OpPhase::Decided;
                record(o, EvidenceSource::Agent(*kind), *observation, after_switch);
            }
        }
        Event::ProbeRecorded { op, observation } => {
            if let Some(o) = op_mut(state, op.0) {
                let after_switch =
                    o.decision == Some(Decision::Commit) && observation.identity == Some(o.release);
                record(
                    o,
                    EvidenceSource::ControllerProbe,
                    *observation,
                    after_switch,
                );
            }
        }
        Event::OperatorObserved { op, observation } => {
            if let Some(o) = op_mut(state, op.0) {
                record(o, EvidenceSource::Operator, *observation, false);
            }
        }
        Event::RestoreRequested { op } => {
            if let Some(o) = op_mut(state, op.0) {
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
            }
        }
        Event::OpUnknown { op, reason } => {
            if let Some(o) = op_mut(state, op.0) {
                o.unknown = Some(*reason);
            }
        }
        Event::OpSettled { op, outcome } => {
            let Some(o) = op_mut(state, op.0) else {
                return;
            };
            o.phase = OpPhase::Settled(*outcome);
            o.unknown = None;
            let (node, release, baseline) = (o.node, o.release, o.baseline);
            let record = state.nodes.entry(node).or_default();
            if record.live_op == Some(*op) {
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
        }
        Event::OpClaimed {
            op,
            owner,
            review_by,
        } => {
            if let Some(o) = op_mut(state, op.0) {
                o.claim = Some(Claim {
                    owner: owner.clone(),
                    review_by: review_by.clone(),
                });
            }
        }
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
        }
        Event::NodeHello { node, serving, .. } => {
            state.nodes.entry(*node).or_default().reported_serving = *serving;
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
        Event::LateReportIgnored { .. }
        | Event::StaleCommandRejected { .. }
        | Event::ForeignMessageIgnored { .. }
        | Event::RollBackOrdered { .. } => {
            // Recorded for the audit trail; a late or stale message never
            // changes a node's recorded state (S8).
        }
    }
}

fn op_mut(state: &mut ControllerState, index: u32) -> Option<&mut Op> {
    state.ops.get_mut(index as usize)
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
    // for the decision; a route answering as the new release switched.
    let agent_moved_on = matches!(
        source,
        EvidenceSource::Agent(ReportKind::Switched | ReportKind::Restored)
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
