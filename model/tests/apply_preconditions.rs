//! `apply`'s precondition stays on in release builds: an event for an op or
//! rollout that does not exist is a bug, never a silent no-op.

use model::controller::{apply, referents_exist, ControllerState, Event, MissingReferent};
use model::controller::{Outcome, UnknownReason};
use model::{Digest, Generation, NodeId, OpId, Plan, RolloutId};

fn started() -> ControllerState {
    let mut state = ControllerState::default();
    let plan = Plan {
        release: Digest::repeat(2),
        canary: NodeId(0),
        followers: vec![NodeId(1)],
        slots_max: 1,
        approval_after_canary: false,
    };
    apply(
        &mut state,
        &Event::RolloutStarted {
            rollout: RolloutId(0),
            plan,
            generation: Generation(1),
        },
    );
    state
}

#[test]
fn an_event_for_an_op_that_was_never_granted_is_named() {
    let state = started();
    let settle = Event::OpSettled {
        op: OpId(3),
        outcome: Outcome::Verified,
    };
    assert_eq!(
        referents_exist(&state, &settle),
        Err(MissingReferent::Op(OpId(3)))
    );
    let unknown = Event::OpUnknown {
        op: OpId(0),
        reason: UnknownReason::Silence,
    };
    assert_eq!(
        referents_exist(&state, &unknown),
        Err(MissingReferent::Op(OpId(0)))
    );
    // A commit decision for an op never granted (and never archived).
    let decided = Event::CommitDecided {
        op: OpId(3),
        decision: model::Decision::Commit,
    };
    assert_eq!(
        referents_exist(&state, &decided),
        Err(MissingReferent::Op(OpId(3)))
    );
    // A second rollout must take the next id, 1.
    let again = Event::RolloutStarted {
        rollout: RolloutId(0),
        plan: (*state.rollouts[0].plan).clone(),
        generation: Generation(2),
    };
    assert_eq!(
        referents_exist(&state, &again),
        Err(MissingReferent::Rollout(RolloutId(0)))
    );
    assert_eq!(
        referents_exist(
            &state,
            &Event::RolloutCompleted {
                rollout: RolloutId(0)
            }
        ),
        Ok(())
    );
}

#[test]
#[should_panic(expected = "names op op3, which was never granted")]
fn apply_panics_on_an_event_for_an_op_that_was_never_granted() {
    let mut state = started();
    apply(
        &mut state,
        &Event::OpSettled {
            op: OpId(3),
            outcome: Outcome::Verified,
        },
    );
}

#[test]
#[should_panic(expected = "names rollout r5, which was never started")]
fn apply_panics_on_an_event_for_a_rollout_that_was_never_started() {
    let mut state = started();
    apply(
        &mut state,
        &Event::RolloutApproved {
            rollout: RolloutId(5),
        },
    );
}

#[test]
fn settling_an_op_that_settled_already_is_named() {
    let mut state = started();
    let grant = Event::OpGranted {
        op: OpId(0),
        rollout: RolloutId(0),
        node: NodeId(0),
        release: Digest::repeat(2),
        generation: Generation(1),
        baseline: None,
        is_canary: true,
    };
    apply(&mut state, &grant);
    let settle = Event::OpSettled {
        op: OpId(0),
        outcome: Outcome::NotApplied,
    };
    assert_eq!(referents_exist(&state, &settle), Ok(()));
    apply(&mut state, &settle);
    // A second settle would release the slot twice (occupied underflows).
    assert_eq!(
        referents_exist(&state, &settle),
        Err(MissingReferent::Settled(OpId(0)))
    );
    // A settled op is never UNKNOWN (`Op::is_unknown` relies on it).
    let unknown = Event::OpUnknown {
        op: OpId(0),
        reason: model::controller::UnknownReason::Silence,
    };
    assert_eq!(
        referents_exist(&state, &unknown),
        Err(MissingReferent::Settled(OpId(0)))
    );
}

/// The operators' events name what they act on: an addition a name not yet
/// recorded, a rotation or a revocation a recorded, unrevoked operator.
#[test]
fn an_operator_event_for_a_missing_or_revoked_operator_is_named() {
    use model::controller::Role;
    let mut state = ControllerState::default();
    let add = Event::OperatorAdded {
        name: "ada".into(),
        role: Role::Approver,
        credential: Digest::repeat(7),
    };
    let revoke = |name: &str| Event::OperatorRevoked { name: name.into() };
    assert_eq!(
        referents_exist(&state, &revoke("ada")),
        Err(MissingReferent::Operator),
        "no such operator yet"
    );
    assert_eq!(referents_exist(&state, &add), Ok(()));
    apply(&mut state, &add);
    assert_eq!(
        referents_exist(&state, &add),
        Err(MissingReferent::Operator),
        "the name is taken"
    );
    assert_eq!(referents_exist(&state, &revoke("ada")), Ok(()));
    apply(&mut state, &revoke("ada"));
    assert_eq!(
        referents_exist(&state, &revoke("ada")),
        Err(MissingReferent::Operator),
        "already revoked"
    );
}
