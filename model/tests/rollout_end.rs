//! A rollout in which nothing more can happen ends: its canary's op settled
//! without passing (abandoned, not applied), or every node has a settled op
//! and some did not pass. A paused rollout waits for its operator instead,
//! and ends only once resumed.

use model::controller::{
    step, ControllerState, Event, Input, OpPhase, Outcome, PauseReason, Refusal, Resolution,
    RolloutStatus,
};
use model::{Digest, NodeId, OpId, Plan, ReportKind, RolloutId, RouteObservation, ToController};

use testkit::{accept, fixtures};

const V1: Digest = Digest::repeat(1);
const R0: RolloutId = RolloutId(0);

/// Nodes a, b, c serving v1; rollout r0 of v2 started, canary op0 granted.
fn started(slots: u8) -> ControllerState {
    fixtures::started(fixtures::plan(3, u16::from(slots), false))
}

fn abandon(state: &mut ControllerState, op: u32) -> Vec<Event> {
    let observation = RouteObservation::passing(V1);
    accept(
        state,
        Input::Resolve {
            op: OpId(op),
            observation,
            resolution: Resolution::Abandon,
        },
    )
}

fn switch_passing(state: &mut ControllerState, op: u32) {
    fixtures::verify(state, op);
}

fn ended(events: &[Event], not_passed: u32) -> bool {
    events.contains(&Event::RolloutEnded {
        rollout: R0,
        not_passed,
    })
}

#[test]
fn a_rollout_whose_canary_was_abandoned_ends() {
    let mut state = started(1);
    let events = abandon(&mut state, 0);
    assert!(ended(&events, 1), "{events:#?}");
    assert_eq!(state.rollouts[0].status, RolloutStatus::Ended);
    assert!(state.active_rollout().is_none());
    // Nothing was granted to a follower, and nothing more will be.
    assert_eq!(state.ops.len(), 1);
    assert_eq!(
        step(&state, &Input::Pause { rollout: R0 })
            .map(|e| e.len())
            .ok(),
        None,
        "an ended rollout cannot be paused"
    );
}

#[test]
fn a_rollout_whose_nodes_all_settled_with_one_abandoned_ends() {
    let mut state = started(3);
    switch_passing(&mut state, 0);
    // Both followers granted at once (3 slots); b abandoned, c verified.
    assert_eq!(state.ops.len(), 3);
    let events = abandon(&mut state, 1);
    assert!(!ended(&events, 1), "c still holds its slot: {events:#?}");
    assert_eq!(state.rollouts[0].status, RolloutStatus::Active);
    switch_passing(&mut state, 2);
    assert_eq!(state.rollouts[0].status, RolloutStatus::Ended);
    let last = state.ops.values().map(|o| o.phase).collect::<Vec<_>>();
    assert_eq!(
        last,
        [
            OpPhase::Settled(Outcome::Verified),
            OpPhase::Settled(Outcome::Resolved(Resolution::Abandon)),
            OpPhase::Settled(Outcome::Verified),
        ]
    );
}

#[test]
fn a_paused_rollout_waits_for_its_operator_and_ends_once_resumed() {
    let mut state = started(1);
    accept(&mut state, Input::Pause { rollout: R0 });
    let events = abandon(&mut state, 0);
    assert!(!ended(&events, 1), "a pause waits: {events:#?}");
    assert_eq!(state.rollouts[0].status, RolloutStatus::Active);
    assert_eq!(state.rollouts[0].paused, Some(PauseReason::Operator));
    let events = accept(&mut state, Input::Resume { rollout: R0 });
    assert!(ended(&events, 1), "{events:#?}");
    assert_eq!(state.rollouts[0].status, RolloutStatus::Ended);
}

#[test]
fn a_fully_verified_rollout_completes_rather_than_ends() {
    let mut state = started(3);
    for op in 0..3 {
        switch_passing(&mut state, op);
    }
    assert_eq!(state.rollouts[0].status, RolloutStatus::Completed);
}

/// A rollout is archived once it finished, never while it is in play. A
/// finished rollout's settled ops move to the archive (each node's
/// latest op stays hot: a proof reads it), and the ops of rollouts older
/// than the last `ROLLOUTS_REMEMBERED` archived ones are forgotten: the
/// hot state is bounded by the fleet and the archive by that count, not
/// by history (a restart and a snapshot stay small).
#[test]
fn finished_rollouts_are_archived_and_the_hot_state_does_not_grow() {
    use model::controller::ROLLOUTS_REMEMBERED;
    let mut state = started(3);
    let rollouts = ROLLOUTS_REMEMBERED as u32 + 4;
    for r in 0..rollouts {
        let release = Digest::repeat(2 + r as u8);
        if r > 0 {
            let plan = Plan {
                release,
                canary: NodeId(0),
                followers: vec![NodeId(1), NodeId(2)],
                slots_max: 3,
                approval_after_canary: false,
            };
            accept(&mut state, Input::StartRollout { plan });
        }
        for op in 3 * r..3 * r + 3 {
            if op > 3 * r {
                // The canary settled, the followers hold their slots: the
                // rollout is still in play, so nothing of it is archived.
                let rollout = state.rollout(RolloutId(r)).expect("rollout");
                assert_eq!(rollout.status, RolloutStatus::Active, "r{r}");
                assert!(!rollout.archived, "r{r} is active: not archived");
                assert!(!state.remembered.contains(&RolloutId(r)), "r{r}");
            }
            let node = state.op(OpId(op)).expect("op").node;
            for msg in [
                ToController::CommitRequest { op: OpId(op) },
                ToController::Report {
                    op: OpId(op),
                    kind: ReportKind::Switched,
                    observation: RouteObservation::passing(release),
                },
            ] {
                accept(&mut state, Input::FromAgent { node, msg });
            }
        }
        let rollout = state.rollout(RolloutId(r)).expect("rollout");
        assert_eq!(rollout.status, RolloutStatus::Completed, "r{r}");
        assert!(rollout.archived, "r{r} finished, so archived");
        // Only each node's latest op stays hot.
        assert_eq!(state.ops.len(), 3, "r{r}");
        assert!(state.ops.keys().all(|op| op.0 >= 3 * r), "r{r}");
        let remembered = (r as usize + 1).min(ROLLOUTS_REMEMBERED);
        assert_eq!(state.remembered.len(), remembered, "r{r}");
        assert!(state.archive.len() <= 3 * ROLLOUTS_REMEMBERED, "r{r}");
        assert_eq!(
            state.ops.len() + state.archive.len() + state.forgotten_ops as usize,
            3 * (r as usize + 1),
            "r{r}: every op granted is hot, archived or forgotten"
        );
    }
    assert!(
        state.forgotten_ops > 0,
        "the oldest rollouts were forgotten"
    );
    assert!(state.op_forgotten(OpId(0)));
    assert_eq!(state.ops_granted(), 3 * rollouts as usize);
    // An operator naming an op that left the hot state is told it settled;
    // one never granted (the next id included) is unknown.
    let archived = *state.archive.keys().next().expect("an archived op");
    let next = state.next_op_id();
    for (op, refusal) in [
        (OpId(0), Refusal::OpAlreadySettled(OpId(0))),
        (archived, Refusal::OpAlreadySettled(archived)),
        (next, Refusal::UnknownOp(next)),
    ] {
        assert_eq!(step(&state, &Input::RollBack { op }), Err(refusal));
    }
}
