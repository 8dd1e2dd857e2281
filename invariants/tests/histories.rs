//! Whole stories through the checked fleet (every rule at every step), and
//! their logs through `check_history`, as `fleetweft log verify` reads them.

mod common;

use common::{Harness, BROKEN, V1};
use invariants::{check_history, Rule};
use model::agent::AgentInput;
use model::controller::{Event, Input, OpPhase, Outcome, Resolution, RolloutStatus};
use model::{Digest, NodeId, OpId, Plan, RolloutId, RouteObservation};

const V2: Digest = Digest::repeat(2);

fn plan(release: Digest, gate: bool) -> Plan {
    Plan {
        release,
        canary: NodeId(0),
        followers: vec![NodeId(1), NodeId(2), NodeId(3)],
        slots_max: 2,
        approval_after_canary: gate,
    }
}

#[test]
fn gated_rollout_completes_and_its_log_verifies() {
    let mut fleet = Harness::new().unwrap();
    fleet
        .controller(Input::StartRollout {
            plan: plan(V2, true),
        })
        .unwrap();
    fleet.drain(200).unwrap();
    assert_eq!(fleet.ctrl.ops.len(), 1, "the gate holds the followers");
    fleet
        .controller(Input::Approve {
            rollout: RolloutId(0),
        })
        .unwrap();
    fleet.drain(500).unwrap();
    assert_eq!(fleet.ctrl.rollouts[0].status, RolloutStatus::Completed);
    fleet.check_log().unwrap();
}

#[test]
fn broken_canary_is_restored_and_stops_the_rollout() {
    let mut fleet = Harness::new().unwrap();
    fleet
        .controller(Input::StartRollout {
            plan: plan(BROKEN, false),
        })
        .unwrap();
    fleet.drain(200).unwrap();
    assert_eq!(fleet.phase(0), Some(OpPhase::Settled(Outcome::RolledBack)));
    assert_eq!(fleet.ctrl.ops.len(), 1, "no follower");
    assert!(fleet.ctrl.rollouts[0].paused.is_some());
    assert_eq!(fleet.agents[0].serving, Some(V1));
    assert_eq!(fleet.stats.restore_owed, 1);
    fleet.check_log().unwrap();
}

#[test]
fn superseded_rollout_settles_its_ops_and_refuses_stale_commands() {
    let mut fleet = Harness::new().unwrap();
    fleet
        .controller(Input::StartRollout {
            plan: plan(V2, false),
        })
        .unwrap();
    fleet.drain(200).unwrap(); // canary verified, followers granted
    let old_apply = *fleet
        .sent_to_agents
        .iter()
        .find(|(node, _)| *node == NodeId(1))
        .expect("apply for node-b sent");
    fleet
        .controller(Input::StartRollout {
            plan: plan(Digest::repeat(4), false),
        })
        .unwrap();
    fleet.drain(1000).unwrap();
    assert_eq!(fleet.ctrl.rollouts[1].status, RolloutStatus::Completed);
    // The first rollout's Apply for node-b arrives again, very late.
    fleet
        .agent(old_apply.0, AgentInput::Command(old_apply.1))
        .unwrap();
    fleet.drain(100).unwrap();
    assert!(fleet
        .log
        .iter()
        .any(|e| matches!(e, Event::StaleCommandRejected { .. })));
    assert!(fleet.agents[1].serving == Some(Digest::repeat(4)));
    fleet.check_log().unwrap();
}

#[test]
fn operator_resolution_of_an_unknown_op_verifies() {
    let mut fleet = Harness::new().unwrap();
    fleet
        .controller(Input::StartRollout {
            plan: plan(V2, false),
        })
        .unwrap();
    // Every message is lost; the deadline passes.
    fleet.to_agents.clear();
    fleet.controller(Input::Timeout { op: OpId(0) }).unwrap();
    assert!(fleet.ctrl.op(OpId(0)).unwrap().unknown.is_some());
    fleet
        .controller(Input::Resolve {
            op: OpId(0),
            observation: RouteObservation::passing(V1),
            resolution: Resolution::ConfirmBaseline,
        })
        .unwrap();
    assert_eq!(
        fleet.phase(0),
        Some(OpPhase::Settled(Outcome::Resolved(
            Resolution::ConfirmBaseline
        )))
    );
    fleet.check_log().unwrap();
}

#[test]
fn tampered_log_is_rejected_at_the_tampered_event() {
    let mut fleet = Harness::new().unwrap();
    fleet
        .controller(Input::StartRollout {
            plan: plan(BROKEN, false),
        })
        .unwrap();
    fleet.drain(200).unwrap();
    let mut log = fleet.log.clone();
    // Someone rewrites the rollback as a success.
    let at = log
        .iter()
        .position(|e| matches!(e, Event::OpSettled { .. }))
        .unwrap();
    log[at] = Event::OpSettled {
        op: OpId(0),
        outcome: Outcome::Verified,
    };
    let err = check_history(&log).unwrap_err();
    assert_eq!(err.index, at);
    assert_eq!(err.violation.rule, Rule::S3);
    // Or drops the restore request that followed the wrong answer.
    let mut log = fleet.log.clone();
    let restore = log
        .iter()
        .position(|e| matches!(e, Event::RestoreRequested { .. }))
        .unwrap();
    log.remove(restore);
    let err = check_history(&log).unwrap_err();
    assert_eq!((err.index, err.violation.rule), (restore - 1, Rule::S11));
}
