//! Waves and failure budgets (SPEC §10): a later wave opens only once every
//! op of the waves before it settled; a follower failing within the budget
//! is restored without pausing; over the budget the rollout pauses itself
//! and grants nothing more (B1); as many UNKNOWN ops as `max_unknown` pause
//! it, and UNKNOWN never counts as failed.

use model::controller::{step, ControllerState, Event, Input, PauseReason, Refusal};
use model::plan::Policy;
use model::{Digest, NodeId, OpId, Plan, ProbeVerdict, RolloutId, RouteObservation};

use testkit::{accept, fixtures};

const V2: Digest = Digest::repeat(2);
const R0: RolloutId = RolloutId(0);
const NODES: u32 = 7;

/// Seven nodes serving v1; a v2 rollout with canary node 0 and followers
/// 1..=6 under `policy`, 10 slots.
fn started(policy: Policy) -> ControllerState {
    fixtures::started_staged(fixtures::plan(NODES, 10, false), policy)
}

fn switch(state: &mut ControllerState, op: u32, answer: RouteObservation) -> Vec<Event> {
    fixtures::switch(state, op, answer)
}

fn wrong() -> RouteObservation {
    RouteObservation::new(ProbeVerdict::WrongAnswer, Some(V2), true)
}

fn granted(state: &ControllerState) -> usize {
    state.ops_granted()
}

fn waves(ends: Vec<u32>) -> Policy {
    Policy {
        wave_ends: ends,
        ..Policy::default()
    }
}

#[test]
fn a_later_wave_opens_only_once_every_op_before_it_settled() {
    // Waves of 2 and 4 followers.
    let mut state = started(waves(vec![2, 6]));
    switch(&mut state, 0, RouteObservation::passing(V2));
    assert_eq!(granted(&state), 3, "canary and wave 1 (2 followers)");
    switch(&mut state, 1, RouteObservation::passing(V2));
    assert_eq!(granted(&state), 3, "op2 of wave 1 still holds its slot");
    switch(&mut state, 2, RouteObservation::passing(V2));
    assert_eq!(granted(&state), 7, "wave 2 opens at once, slots allowing");
}

#[test]
fn approval_between_waves_holds_the_next_wave_for_an_operator() {
    let policy = Policy {
        approval_between_waves: true,
        ..waves(vec![1, 6])
    };
    let mut state = started(policy);
    switch(&mut state, 0, RouteObservation::passing(V2));
    switch(&mut state, 1, RouteObservation::passing(V2));
    assert_eq!(granted(&state), 2);
    assert!(state.awaiting_approval(R0));
    accept(&mut state, Input::Approve { rollout: R0 });
    assert_eq!(granted(&state), 7);
    assert!(!state.awaiting_approval(R0));
}

#[test]
fn failures_within_the_budget_restore_without_pausing_and_over_it_pause() {
    let policy = Policy {
        max_failed: Some(1),
        ..Policy::default()
    };
    let mut state = started(policy);
    switch(&mut state, 0, RouteObservation::passing(V2));
    let events = switch(&mut state, 1, wrong());
    assert!(events.contains(&Event::RestoreRequested { op: OpId(1) }));
    assert!(state.rollouts[0].paused.is_none(), "within the budget");
    let events = switch(&mut state, 2, wrong());
    assert!(events.contains(&Event::RolloutPaused {
        rollout: R0,
        reason: PauseReason::FailureBudget { op: OpId(2) },
    }));
    // B1: resuming a rollout whose failure budget is spent changes nothing.
    assert_eq!(
        step(&state, &Input::Resume { rollout: R0 }),
        Err(Refusal::OverBudget(R0))
    );
}

#[test]
fn without_a_budget_the_first_failed_follower_pauses_as_a_plan_alone_does() {
    let mut state = started(Policy::default());
    switch(&mut state, 0, RouteObservation::passing(V2));
    let events = switch(&mut state, 1, wrong());
    assert!(events.contains(&Event::RolloutPaused {
        rollout: R0,
        reason: PauseReason::ProbeFailed { op: OpId(1) },
    }));
    assert!(step(&state, &Input::Resume { rollout: R0 }).is_ok());
}

#[test]
fn unknown_ops_at_the_budget_pause_and_never_count_as_failed() {
    let policy = Policy {
        max_unknown: Some(2),
        max_failed: Some(0),
        ..Policy::default()
    };
    let mut state = started(policy);
    switch(&mut state, 0, RouteObservation::passing(V2));
    accept(&mut state, Input::Timeout { op: OpId(1) });
    assert!(state.rollouts[0].paused.is_none());
    let events = accept(&mut state, Input::Timeout { op: OpId(2) });
    assert!(events.contains(&Event::RolloutPaused {
        rollout: R0,
        reason: PauseReason::UnknownBudget,
    }));
    assert_eq!(state.rollouts[0].failed, 0, "UNKNOWN is not failed");
    assert_eq!(state.slots_occupied(R0), 6, "UNKNOWN ops keep their slots");
    assert_eq!(
        step(&state, &Input::Resume { rollout: R0 }),
        Err(Refusal::OverBudget(R0))
    );
    // Evidence settles one: under the budget again, resume is accepted.
    switch(&mut state, 1, RouteObservation::passing(V2));
    assert!(step(&state, &Input::Resume { rollout: R0 }).is_ok());
}

#[test]
fn a_policy_that_does_not_fit_its_plan_is_refused() {
    let state = started(Policy::default());
    let plan = state.rollouts[0].plan.as_ref().clone();
    for ends in [vec![3], vec![0, 6], vec![4, 2, 6], vec![2, 7]] {
        let refused = step(
            &state,
            &Input::StartStaged {
                plan: plan.clone(),
                policy: waves(ends.clone()),
                arches: model::platform::ReleaseArches::Any,
                deploys: None,
            },
        );
        assert!(
            matches!(refused, Err(Refusal::InvalidPlan(_))),
            "{ends:?}: {refused:?}"
        );
    }
    let at_limit: Vec<u32> = (1..=model::plan::WAVES_MAX as u32).collect();
    let long_plan = Plan {
        followers: (1..=model::plan::WAVES_MAX as u32).map(NodeId).collect(),
        ..plan
    };
    assert!(step(
        &state,
        &Input::StartStaged {
            plan: long_plan,
            policy: waves(at_limit),
            arches: model::platform::ReleaseArches::Any,
            deploys: None,
        }
    )
    .is_ok());
}

/// S11: a canary judged wrong stops the rollout whatever its failure
/// budget. The budget is for followers: a failed canary inside it still
/// pauses, for the canary's reason, and no follower is granted.
#[test]
fn a_failed_canary_pauses_even_inside_a_failure_budget() {
    for max_failed in [1, 2, 6] {
        let policy = Policy {
            max_failed: Some(max_failed),
            ..Policy::default()
        };
        let mut state = started(policy);
        let events = switch(&mut state, 0, wrong());
        assert!(events.contains(&Event::RestoreRequested { op: OpId(0) }));
        assert!(
            events.contains(&Event::RolloutPaused {
                rollout: R0,
                reason: PauseReason::ProbeFailed { op: OpId(0) },
            }),
            "budget {max_failed}: {events:?}"
        );
        assert_eq!(granted(&state), 1, "budget {max_failed}: no follower");
    }
}

/// The current wave is the one the latest granted follower is in: wave k
/// covers followers [end(k-1), end(k)); 0 before any follower; a plan
/// without wave ends is one wave.
#[test]
fn the_current_wave_is_the_wave_of_the_latest_granted_follower() {
    let policy = waves(vec![2, 10, 19]);
    for (granted, wave) in [(0, 0), (1, 1), (2, 1), (3, 2), (10, 2), (11, 3), (19, 3)] {
        assert_eq!(policy.current_wave(granted), wave, "{granted} granted");
    }
    let single = Policy::default();
    assert_eq!((single.current_wave(0), single.current_wave(5)), (0, 1));
}

/// A rollout's operator actions are what `step` accepts: a rollout paused
/// by an operator whose UNKNOWN budget filled meanwhile cannot be resumed
/// (its pause reason still says "operator"; the budget decides), and the
/// spent budget is named.
#[test]
fn rollout_actions_follow_the_budget_not_the_pause_reason() {
    use model::controller::{rollout_actions, Budget, RolloutAction};
    let policy = Policy {
        max_unknown: Some(2),
        ..Policy::default()
    };
    let mut state = started(policy);
    switch(&mut state, 0, RouteObservation::passing(V2));
    assert_eq!(rollout_actions(&state, R0), vec![RolloutAction::Pause]);
    accept(&mut state, Input::Pause { rollout: R0 });
    assert_eq!(rollout_actions(&state, R0), vec![RolloutAction::Resume]);
    accept(&mut state, Input::Timeout { op: OpId(1) });
    accept(&mut state, Input::Timeout { op: OpId(2) });
    assert_eq!(
        state.rollouts[0].paused,
        Some(PauseReason::Operator),
        "the pause keeps its reason"
    );
    assert_eq!(state.rollouts[0].budget_spent(), Some(Budget::Unknown));
    assert_eq!(rollout_actions(&state, R0), vec![]);
    assert_eq!(
        step(&state, &Input::Resume { rollout: R0 }),
        Err(Refusal::OverBudget(R0))
    );
}
