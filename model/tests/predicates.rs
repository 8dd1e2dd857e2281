//! The rule predicates the operator surface asks instead of restating them.

use model::controller::{step, ControllerState, Input};
use model::{Digest, Generation, NodeId, OpId, Plan, ReportKind, RouteObservation};
use model::{ProbeVerdict, ToController};

use testkit::accept;

const V1: Digest = Digest::repeat(1);
const V2: Digest = Digest::repeat(2);
const A: NodeId = NodeId(0);

fn from_a(state: &mut ControllerState, msg: ToController) {
    accept(state, Input::FromAgent { node: A, msg });
}

/// A probe is judged as the release the op's phase expects, with the
/// op's other release as the legitimate alternative: judging a
/// baseline by the new release's spec could never prove a rollback.
#[test]
fn a_probe_is_judged_as_the_release_the_phase_expects() {
    let mut state = ControllerState::default();
    from_a(
        &mut state,
        ToController::Hello {
            serving: Some(V1),
            generation: Generation(0),
        },
    );
    // Before any rollout: nothing confirmed, nothing intended.
    assert_eq!(state.releases_to_judge(A), (None, None));
    accept(
        &mut state,
        Input::StartRollout {
            plan: Plan {
                release: V2,
                canary: A,
                followers: vec![],
                slots_max: 1,
                approval_after_canary: false,
            },
        },
    );
    // Granted, not switched: the baseline should answer.
    assert_eq!(state.releases_to_judge(A), (Some(V1), Some(V2)));
    from_a(&mut state, ToController::CommitRequest { op: OpId(0) });
    // Commit decided: the new release should answer (or still v1).
    assert_eq!(state.releases_to_judge(A), (Some(V2), Some(V1)));
    from_a(
        &mut state,
        ToController::Report {
            op: OpId(0),
            kind: ReportKind::Switched,
            observation: RouteObservation {
                verdict: ProbeVerdict::WrongAnswer,
                ..RouteObservation::passing(V2)
            },
        },
    );
    // A wrong answer: restoring, so the baseline should answer again.
    assert_eq!(state.releases_to_judge(A), (Some(V1), Some(V2)));
    from_a(
        &mut state,
        ToController::Report {
            op: OpId(0),
            kind: ReportKind::Restored,
            observation: RouteObservation::passing(V1),
        },
    );
    // Rolled back and settled: what was last proven there.
    assert_eq!(state.releases_to_judge(A), (Some(V1), None));
}

/// Approval is awaited only with a gate, after the canary passed, once.
/// node-a said hello serving v1, then a rollout of v2 with canary node-a.
fn started(followers: Vec<NodeId>, approval_after_canary: bool) -> ControllerState {
    let mut state = ControllerState::default();
    from_a(
        &mut state,
        ToController::Hello {
            serving: Some(V1),
            generation: Generation(0),
        },
    );
    accept(
        &mut state,
        Input::StartRollout {
            plan: Plan {
                release: V2,
                canary: A,
                followers,
                slots_max: 1,
                approval_after_canary,
            },
        },
    );
    state
}

#[test]
fn awaiting_approval_is_the_one_state_approve_is_accepted_in() {
    let mut state = started(vec![NodeId(1)], true);
    let r = model::RolloutId(0);
    assert!(!state.awaiting_approval(r), "canary not passed yet");
    assert!(step(&state, &Input::Approve { rollout: r }).is_err());
    from_a(&mut state, ToController::CommitRequest { op: OpId(0) });
    from_a(
        &mut state,
        ToController::Report {
            op: OpId(0),
            kind: ReportKind::Switched,
            observation: RouteObservation::passing(V2),
        },
    );
    assert!(state.awaiting_approval(r));
    accept(&mut state, Input::Approve { rollout: r });
    assert!(!state.awaiting_approval(r), "approved once");
    assert!(step(&state, &Input::Approve { rollout: r }).is_err());
}

/// The operator's options are what `step` accepts, asked, not restated.
#[test]
fn operator_actions_are_what_step_accepts() {
    use model::controller::{operator_actions, OperatorAction as A_};
    let mut state = started(vec![], false);
    let op = OpId(0);
    // Granted, no decision: nothing to roll back; any resolution with a
    // backing observation.
    assert_eq!(
        operator_actions(&state, op),
        vec![A_::ConfirmNew, A_::ConfirmBaseline, A_::Abandon]
    );
    from_a(&mut state, ToController::CommitRequest { op });
    // A stored Commit: roll back possible, confirm-baseline refused.
    assert_eq!(
        operator_actions(&state, op),
        vec![A_::RollBack, A_::ConfirmNew, A_::Abandon]
    );
    accept(&mut state, Input::RollBack { op });
    // Restoring: confirm-new refused, roll back already ordered.
    assert_eq!(operator_actions(&state, op), vec![A_::Abandon]);
}

/// A rollout's options are what `step` accepts: pause while granting,
/// approve only at the gate, resume only while paused.
#[test]
fn rollout_actions_are_what_step_accepts() {
    use model::controller::{rollout_actions, RolloutAction as R_};
    let r = model::RolloutId(0);
    let mut state = started(vec![NodeId(1)], true);
    assert_eq!(rollout_actions(&state, r), vec![R_::Pause]);
    from_a(&mut state, ToController::CommitRequest { op: OpId(0) });
    from_a(
        &mut state,
        ToController::Report {
            op: OpId(0),
            kind: ReportKind::Switched,
            observation: RouteObservation::passing(V2),
        },
    );
    assert_eq!(rollout_actions(&state, r), vec![R_::Approve, R_::Pause]);
    accept(&mut state, Input::Pause { rollout: r });
    assert_eq!(rollout_actions(&state, r), vec![R_::Approve, R_::Resume]);
    accept(&mut state, Input::Approve { rollout: r });
    assert_eq!(rollout_actions(&state, r), vec![R_::Resume]);
    assert!(rollout_actions(&state, model::RolloutId(7)).is_empty());
}

/// A node's options are what `step` accepts: an enrolled node may be
/// retired unless it holds a live op, released only while quarantined.
#[test]
fn node_actions_are_what_step_accepts() {
    use model::controller::{node_actions, Labels, NodeAction as N_};
    let mut state = ControllerState::default();
    accept(
        &mut state,
        Input::EnrollNode {
            name: "edge-a".into(),
            labels: Labels::new(),
            public: "127.0.0.1:8080".into(),
        },
    );
    assert_eq!(node_actions(&state, A), vec![N_::Retire]);
    accept(
        &mut state,
        Input::IdentityConflict {
            node: A,
            first_peer: "10.0.0.1:1".into(),
            second_peer: "10.0.0.2:1".into(),
        },
    );
    assert_eq!(node_actions(&state, A), vec![N_::Retire, N_::Release]);
    accept(&mut state, Input::ReleaseNode { node: A });
    accept(
        &mut state,
        Input::StartRollout {
            plan: Plan {
                release: V2,
                canary: A,
                followers: vec![],
                slots_max: 1,
                approval_after_canary: false,
            },
        },
    );
    assert!(
        node_actions(&state, A).is_empty(),
        "a node holding a live op cannot be retired"
    );
    assert!(node_actions(&state, NodeId(9)).is_empty(), "no such node");
}
