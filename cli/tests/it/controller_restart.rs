//! The controller survives restarts in each waiting situation: the state is
//! rebuilt identically from the log, the wait is still there, and a retried
//! commit request gets the stored decision back (S6, S10).
//!
//! Every test runs on each log backend (`fleet::backends`: sled, and etcd
//! when the test cluster is up), the same test body: on etcd a restart is
//! a new process winning the leadership, after a resign (orderly stop) or
//! after the crashed one's lease expired.

use crate::fleet;

use controller::driver::ControllerError;
use fleet::{backends, plan, Backend, Fleet, LogHome, V2};
use model::agent::AgentInput;
use model::controller::{Event, Input, OpPhase, Outcome, RolloutStatus, UnknownReason};
use model::{Decision, NodeId, OpId, RolloutId, ToController};

const R0: RolloutId = RolloutId(0);

/// Restarts (close and, separately, crash-drop) and checks the state is equal.
fn restart_keeps_state(fleet: Fleet, close: bool) -> Fleet {
    let before = fleet.ctrl.state().clone();
    let last = fleet.ctrl.last_sequence();
    let fleet = fleet.restart(close);
    let backend = fleet.home.backend().name();
    assert_eq!(
        fleet.ctrl.state(),
        &before,
        "state rebuilt from the {backend} log"
    );
    assert_eq!(fleet.ctrl.last_sequence(), last, "on {backend}");
    fleet
}

/// Runs `test` once per backend and restart kind, each on a fresh log.
fn each_backend_and_restart(name: &str, test: impl Fn(Fleet, bool)) {
    for backend in backends() {
        for close in [true, false] {
            let temp = tempfile::tempdir().expect("temp dir");
            let home = LogHome::new(&backend, &temp.path().join("log"), name);
            test(Fleet::on(home, 3), close);
        }
    }
}

/// A retried commit request for `op` is answered from the stored decision.
fn retry_gets_stored_decision(fleet: &mut Fleet, node: NodeId, op: OpId) {
    let stored = fleet.ctrl.state().op(op).and_then(|o| o.decision);
    let stored = stored.expect("a stored decision");
    let events = fleet
        .controller(Input::FromAgent {
            node,
            msg: ToController::CommitRequest { op },
        })
        .expect("retry accepted");
    assert_eq!(
        events,
        vec![Event::CommitReplayed {
            op,
            decision: stored
        }],
        "a retry replays, never decides again"
    );
}

fn count_started(fleet: &Fleet) -> usize {
    fleet
        .ctrl
        .acknowledged
        .iter()
        .filter(|(_, e)| matches!(e, Event::RolloutStarted { .. }))
        .count()
}

#[test]
fn approval_gate_wait_survives_restart() {
    each_backend_and_restart("approval_gate_wait_survives_restart", |mut fleet, close| {
        fleet
            .controller(Input::StartRollout { plan: plan(true) })
            .expect("start");
        fleet.run();
        assert_eq!(fleet.ctrl.state().ops.len(), 1, "only the canary");
        let mut fleet = restart_keeps_state(fleet, close);
        let rollout = &fleet.ctrl.state().rollouts[0];
        assert_eq!(rollout.status, RolloutStatus::Active);
        assert!(!rollout.approved, "still waiting for the operator");
        assert_eq!(fleet.ctrl.state().ops.len(), 1, "no grant without approval");
        retry_gets_stored_decision(&mut fleet, NodeId(0), OpId(0));
        // The operator approves after the restart and the rollout finishes.
        fleet
            .controller(Input::Approve { rollout: R0 })
            .expect("approve");
        fleet.run();
        assert_eq!(
            fleet.ctrl.state().rollouts[0].status,
            RolloutStatus::Completed
        );
        assert_eq!(count_started(&fleet), 1);
        fleet.stop();
    });
}

#[test]
fn unknown_op_survives_restart_and_keeps_its_slot() {
    each_backend_and_restart(
        "unknown_op_survives_restart_and_keeps_its_slot",
        |mut fleet, close| {
            fleet
                .controller(Input::StartRollout { plan: plan(false) })
                .expect("start");
            // The apply to the canary is lost, then its deadline passes.
            fleet.to_agents.clear();
            fleet
                .controller(Input::Timeout { op: OpId(0) })
                .expect("timeout");
            let op = fleet.ctrl.state().op(OpId(0)).expect("op0").clone();
            assert_eq!(op.unknown, Some(UnknownReason::Silence));
            let mut fleet = restart_keeps_state(fleet, close);
            let op = fleet.ctrl.state().op(OpId(0)).expect("op0");
            assert_eq!(op.unknown, Some(UnknownReason::Silence));
            assert!(op.occupies_slot(), "UNKNOWN keeps its slot (S1)");
            assert_eq!(fleet.ctrl.state().slots_occupied(R0), 1);
            // The agent reconnects, gets the apply again, and the op settles.
            fleet.agent(NodeId(0), AgentInput::Connected);
            fleet.run();
            retry_gets_stored_decision(&mut fleet, NodeId(0), OpId(0));
            fleet.run();
            assert_eq!(
                fleet.ctrl.state().rollouts[0].status,
                RolloutStatus::Completed
            );
            assert_eq!(count_started(&fleet), 1);
            fleet.stop();
        },
    );
}

#[test]
fn stored_decision_with_lost_reply_is_replayed_after_restart() {
    each_backend_and_restart(
        "stored_decision_with_lost_reply_is_replayed_after_restart",
        |mut fleet, close| {
            fleet
                .controller(Input::StartRollout { plan: plan(false) })
                .expect("start");
            // The apply arrives; the agent asks; the decision is stored; the
            // reply is lost.
            assert!(fleet.deliver_one());
            let op = fleet.ctrl.state().op(OpId(0)).expect("op0");
            assert_eq!(op.phase, OpPhase::Decided);
            assert_eq!(op.decision, Some(Decision::Commit));
            assert_eq!(fleet.to_agents.len(), 1, "the commit reply in flight");
            fleet.to_agents.clear();
            let decided_before = fleet
                .ctrl
                .acknowledged
                .iter()
                .filter(|(_, e)| matches!(e, Event::CommitDecided { .. }))
                .count();
            let mut fleet = restart_keeps_state(fleet, close);
            assert_eq!(
                fleet.ctrl.state().op(OpId(0)).map(|o| o.phase),
                Some(OpPhase::Decided)
            );
            // The agent's retry timer re-sends the commit request.
            let seq_before = fleet.ctrl.acknowledged.len();
            fleet.agent(NodeId(0), AgentInput::Retry);
            assert_eq!(
                fleet.ctrl.acknowledged[seq_before].1,
                Event::CommitReplayed {
                    op: OpId(0),
                    decision: Decision::Commit
                }
            );
            fleet.run();
            let decided_after = fleet
                .ctrl
                .acknowledged
                .iter()
                .filter(|(_, e)| matches!(e, Event::CommitDecided { op: OpId(0), .. }))
                .count();
            assert_eq!(decided_before, decided_after, "no new decision for op0");
            assert_eq!(
                fleet.ctrl.state().op(OpId(0)).map(|o| o.phase),
                Some(OpPhase::Settled(Outcome::Verified))
            );
            assert_eq!(fleet.agents[0].serving, Some(V2));
            assert_eq!(
                fleet.ctrl.state().rollouts[0].status,
                RolloutStatus::Completed
            );
            assert_eq!(count_started(&fleet), 1);
            fleet.stop();
        },
    );
}

#[test]
fn refused_input_records_nothing() {
    for backend in backends() {
        let temp = tempfile::tempdir().expect("temp dir");
        let mut home = LogHome::new(&backend, &temp.path().join("log"), "refused");
        let mut ctrl = home.open();
        let err = ctrl.handle(Input::Approve { rollout: R0 }).unwrap_err();
        assert!(matches!(err, ControllerError::Refused(_)), "{err}");
        assert_eq!(ctrl.last_sequence(), None);
        home.stop(ctrl, true);
        let ctrl = home.open();
        assert_eq!(ctrl.last_sequence(), None, "on {}", backend.name());
        home.stop(ctrl, true);
        assert!(home.logged().is_empty());
    }
}

#[test]
fn every_acknowledged_event_is_in_the_log_in_order() {
    for backend in backends() {
        let temp = tempfile::tempdir().expect("temp dir");
        let home = LogHome::new(&backend, &temp.path().join("log"), "in-order");
        let mut fleet = Fleet::on(home, 3);
        fleet
            .controller(Input::StartRollout { plan: plan(false) })
            .expect("start");
        fleet.run();
        let acknowledged = fleet.ctrl.acknowledged.clone();
        let state = fleet.ctrl.state().clone();
        let home = fleet.stop();
        let logged = home.logged();
        assert_eq!(logged, acknowledged, "on {}", backend.name());
        let replayed = model::controller::replay(logged.iter().map(|(_, e)| e));
        assert_eq!(replayed, state);
        if backend == Backend::Sled {
            // The forensic reader sees the same log as the storage.
            let mut visited = Vec::new();
            logtools::inspect::visit_events(temp.path().join("log"), 0, |seq, e| {
                visited.push((seq, e.clone()))
            })
            .expect("verifies");
            assert_eq!(visited, logged);
        }
    }
}
