//! B1 (failure budgets) and S4 across waves, as plain functions: each test
//! builds a real state with the model, then offers the rule an event the
//! model would never produce, and the rule must refuse it.

use invariants::{check_event, check_state, Rule};
use model::controller::{ControllerState, Event, Input};
use model::plan::Policy;
use model::{
    Digest, Generation, NodeId, OpId, Plan, ProbeVerdict, ReportKind, RolloutId, RouteObservation,
    ToController,
};

use testkit::{accept_into, feed_with, fixtures};

const V1: Digest = Digest::repeat(1);
const V2: Digest = Digest::repeat(2);
const R0: RolloutId = RolloutId(0);

/// The test kit's step-then-apply, every event and the state after the
/// batch checked against the rules (an input the test expects taken).
fn accept_checked(state: &mut ControllerState, input: Input) {
    let check = |state: &ControllerState, event: &Event| {
        check_event(state, event).expect("the real model keeps the rules")
    };
    feed_with(state, &input, check, |_, _| {}).expect("accepted");
    check_state(state).expect("the real model keeps the rules");
}

fn started(policy: Policy) -> ControllerState {
    let mut state = ControllerState::default();
    for input in fixtures::staged_inputs(fixtures::plan(5, 1, false), policy) {
        accept_checked(&mut state, input);
    }
    state
}

fn switch(state: &mut ControllerState, op: u32, answer: RouteObservation) {
    let node = state.op(OpId(op)).expect("op").node;
    for input in fixtures::switch_inputs(node, OpId(op), answer) {
        accept_checked(state, input);
    }
}

/// The grant the model would make next, if nothing held it back.
fn next_grant(state: &ControllerState, node: u32) -> Event {
    Event::OpGranted {
        op: state.next_op_id(),
        rollout: R0,
        node: NodeId(node),
        release: V2,
        generation: Generation(1),
        baseline: Some(V1),
        is_canary: false,
    }
}

#[test]
fn b1_refuses_a_grant_over_the_failure_budget() {
    let mut state = started(Policy {
        max_failed: Some(0),
        ..Policy::default()
    });
    switch(&mut state, 0, RouteObservation::passing(V2));
    let wrong = RouteObservation::new(ProbeVerdict::WrongAnswer, Some(V2), true);
    switch(&mut state, 1, wrong);
    let restored = RouteObservation::passing(V1);
    let msg = ToController::Report {
        op: OpId(1),
        kind: ReportKind::Restored,
        observation: restored,
    };
    accept_checked(
        &mut state,
        Input::FromAgent {
            node: NodeId(1),
            msg,
        },
    );
    assert_eq!(state.rollouts[0].failed, 1);
    assert_eq!(state.ops_granted(), 2, "the model grants nothing more");
    let v = check_event(&state, &next_grant(&state, 2)).expect_err("over budget");
    assert_eq!(v.rule, Rule::S5, "paused, so S5 speaks first: {v}");
    // Unpaused by hand (no input does that over budget): B1 still refuses.
    std::sync::Arc::make_mut(&mut state.rollouts[0]).paused = None;
    let v = check_event(&state, &next_grant(&state, 2)).expect_err("over budget");
    assert_eq!(v.rule, Rule::FailureBudget, "{v}");
    let v = check_state(&state).expect_err("over budget and not paused");
    assert_eq!(v.rule, Rule::FailureBudget, "{v}");
}

#[test]
fn s4_refuses_a_later_wave_before_the_earlier_one_settled() {
    let mut state = started(Policy {
        wave_ends: vec![1, 4],
        ..Policy::default()
    });
    switch(&mut state, 0, RouteObservation::passing(V2));
    assert_eq!(state.ops_granted(), 2, "wave 1 is node 1");
    // More slots, so only the wave gate holds node 2 back.
    std::sync::Arc::make_mut(&mut std::sync::Arc::make_mut(&mut state.rollouts[0]).plan)
        .slots_max = 4;
    let v = check_event(&state, &next_grant(&state, 2)).expect_err("wave 1 unsettled");
    assert_eq!(v.rule, Rule::S4, "{v}");
    assert!(v.detail.contains("opens wave 2"), "{v}");
    // Out of plan order is S4 too.
    switch(&mut state, 1, RouteObservation::passing(V2));
    let v = check_event(&state, &next_grant(&state, 3)).expect_err("node 2 is next");
    assert_eq!(v.rule, Rule::S4, "{v}");
}

/// Every event the inputs produced, in order: what the log would hold.
fn logged(state: &mut ControllerState, log: &mut Vec<Event>, input: Input) {
    accept_into(state, log, input);
}

/// A history whose follower failure takes the rollout over its budget of 0:
/// the restore and the pause are two events of one input.
fn over_budget_history() -> (ControllerState, Vec<Event>) {
    let mut state = ControllerState::default();
    let mut log = Vec::new();
    for n in 0..3 {
        let msg = ToController::Hello {
            serving: Some(V1),
            generation: Generation(0),
        };
        logged(
            &mut state,
            &mut log,
            Input::FromAgent {
                node: NodeId(n),
                msg,
            },
        );
    }
    let plan = Plan {
        release: V2,
        canary: NodeId(0),
        followers: vec![NodeId(1), NodeId(2)],
        slots_max: 1,
        approval_after_canary: false,
    };
    let policy = Policy {
        max_failed: Some(0),
        ..Policy::default()
    };
    logged(
        &mut state,
        &mut log,
        Input::StartStaged {
            plan,
            policy,
            arches: model::platform::ReleaseArches::Any,
            deploys: None,
        },
    );
    let wrong = RouteObservation::new(ProbeVerdict::WrongAnswer, Some(V2), true);
    for (op, answer) in [(0, RouteObservation::passing(V2)), (1, wrong)] {
        let node = NodeId(op);
        let op = OpId(op);
        let ask = ToController::CommitRequest { op };
        logged(&mut state, &mut log, Input::FromAgent { node, msg: ask });
        let msg = ToController::Report {
            op,
            kind: ReportKind::Switched,
            observation: answer,
        };
        logged(&mut state, &mut log, Input::FromAgent { node, msg });
    }
    (state, log)
}

#[test]
fn a_replayed_history_accepts_the_pause_that_follows_a_restore_over_budget() {
    let (state, log) = over_budget_history();
    assert!(state.rollouts[0].paused.is_some(), "paused by the budget");
    let restore = log
        .iter()
        .position(|e| *e == Event::RestoreRequested { op: OpId(1) })
        .expect("restore of op1");
    assert!(
        matches!(log[restore + 1], Event::RolloutPaused { .. }),
        "the pause is the restore's next event"
    );
    // A restart replays this log: the state between the two events is over
    // budget and not paused, which the live controller never shows.
    assert_eq!(invariants::check_history(&log).expect("clean"), state);
    // A log cut between them (or the pause missing) is refused, naming B1
    // at the restore.
    let cut = &log[..=restore];
    let err = invariants::check_history(cut).expect_err("pause owed");
    assert_eq!(
        (err.index, err.violation.rule),
        (restore, Rule::FailureBudget)
    );
    let mut skipped = log.clone();
    skipped.remove(restore + 1);
    let err = invariants::check_history(&skipped).expect_err("pause missing");
    assert_eq!(
        (err.index, err.violation.rule),
        (restore, Rule::FailureBudget)
    );
}
