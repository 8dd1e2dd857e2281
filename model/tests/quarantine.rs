//! Identity conflicts and revocations in the controller core: a
//! quarantined node gets no command and no grant, what it says is not
//! recorded, its op keeps its slot (silence makes it UNKNOWN), a conflict
//! is recorded once however long it lasts, and only an operator releases
//! the node. Revocations are durable: a replay rebuilds the deny list.

use model::controller::{
    replay, step, ControllerState, Effect, Event, Input, Refusal, UnknownReason,
};
use model::{Digest, Generation, NodeId, Plan, RouteObservation, ToController};

use testkit::accept_with_effects;
use testkit::fixtures;

const V1: Digest = Digest::repeat(1);
const V2: Digest = Digest::repeat(2);
const A: NodeId = NodeId(0);
const B: NodeId = NodeId(1);

fn conflict(node: NodeId) -> Input {
    Input::IdentityConflict {
        node,
        first_peer: "10.0.0.1:4000".into(),
        second_peer: "10.0.0.2:4001".into(),
    }
}

fn hello(node: NodeId) -> Input {
    Input::FromAgent {
        node,
        msg: ToController::Hello {
            serving: Some(V1),
            generation: Generation(0),
        },
    }
}

fn sends_to(effects: &[Effect], node: NodeId) -> bool {
    effects
        .iter()
        .any(|e| matches!(e, Effect::Send { to, .. } if *to == node))
}

/// v2 on canary A then B, one slot.
fn started() -> (ControllerState, Vec<Event>) {
    let mut state = ControllerState::default();
    let mut log = Vec::new();
    for input in fixtures::started_inputs(fixtures::plan(2, 1, false)) {
        accept_with_effects(&mut state, &mut log, input);
    }
    (state, log)
}

#[test]
fn a_conflict_quarantines_once_and_silences_the_node() {
    let (mut state, mut log) = started();
    let op = state.nodes[&A].live_op.expect("canary granted");
    let (events, sent) = accept_with_effects(&mut state, &mut log, conflict(A));
    assert!(matches!(events.as_slice(), [Event::NodeQuarantined { node, .. }] if *node == A));
    assert!(sent.is_empty(), "{sent:?}");
    // However long the two agents fight: nothing more is recorded, and
    // nothing they say is evidence or is answered.
    let before = log.len();
    for _ in 0..100 {
        let (events, _) = accept_with_effects(&mut state, &mut log, conflict(A));
        assert!(events.is_empty());
        let (events, sent) = accept_with_effects(&mut state, &mut log, hello(A));
        assert!(events.is_empty() && sent.is_empty());
        let commit = Input::FromAgent {
            node: A,
            msg: ToController::CommitRequest { op },
        };
        assert_eq!(step(&state, &commit), Ok(vec![]));
    }
    assert_eq!(log.len(), before);
    // Silence makes the op UNKNOWN; it keeps its slot.
    let (events, _) = accept_with_effects(&mut state, &mut log, Input::Timeout { op });
    assert!(matches!(
        events.as_slice(),
        [Event::OpUnknown {
            reason: UnknownReason::Silence,
            ..
        }]
    ));
    let o = state.op(op).expect("op");
    assert!(o.occupies_slot() && o.unknown.is_some());
    // The quarantine survives a restart (replay of the log).
    assert_eq!(replay(&log), state);
}

#[test]
fn the_release_resends_the_live_command_and_lets_the_node_speak() {
    let (mut state, mut log) = started();
    accept_with_effects(&mut state, &mut log, conflict(A));
    assert_eq!(
        step(&state, &Input::ReleaseNode { node: B }),
        Err(Refusal::NotQuarantined(B))
    );
    let (events, sent) = accept_with_effects(&mut state, &mut log, Input::ReleaseNode { node: A });
    assert_eq!(events, vec![Event::NodeReleased { node: A }]);
    assert!(sends_to(&sent, A), "the live op's command again: {sent:?}");
    assert!(!state.is_quarantined(A));
    let (events, _) = accept_with_effects(&mut state, &mut log, hello(A));
    assert_eq!(events.len(), 1, "a released node's hello is recorded");
}

#[test]
fn no_grant_reaches_a_quarantined_node() {
    let mut state = ControllerState::default();
    let mut log = Vec::new();
    accept_with_effects(&mut state, &mut log, conflict(B));
    let plan = Plan {
        release: V2,
        canary: A,
        followers: vec![B],
        slots_max: 2,
        approval_after_canary: false,
    };
    accept_with_effects(&mut state, &mut log, Input::StartRollout { plan });
    let op = state.nodes[&A].live_op.expect("canary granted");
    // Settle the canary: the follower B is next, but it is quarantined.
    accept_with_effects(
        &mut state,
        &mut log,
        Input::FromAgent {
            node: A,
            msg: ToController::CommitRequest { op },
        },
    );
    let (events, _) = accept_with_effects(
        &mut state,
        &mut log,
        Input::FromAgent {
            node: A,
            msg: ToController::Report {
                op,
                kind: model::ReportKind::Switched,
                observation: RouteObservation::passing(V2),
            },
        },
    );
    assert!(events.iter().any(|e| matches!(e, Event::OpSettled { .. })));
    assert!(
        !log.iter()
            .any(|e| matches!(e, Event::OpGranted { node, .. } if *node == B)),
        "{log:?}"
    );
    // Released, B is granted at once, in the same batch.
    let (events, sent) = accept_with_effects(&mut state, &mut log, Input::ReleaseNode { node: B });
    assert!(events
        .iter()
        .any(|e| matches!(e, Event::OpGranted { node, .. } if *node == B)));
    assert!(sends_to(&sent, B));
    assert_eq!(state.ops.len(), 2);
}

#[test]
fn revocations_are_recorded_once_and_replayed() {
    let mut state = ControllerState::default();
    let mut log = Vec::new();
    let fingerprint = Digest::repeat(0xab);
    let revoke = Input::RevokeCert {
        node: A,
        fingerprint,
    };
    accept_with_effects(&mut state, &mut log, revoke.clone());
    assert_eq!(step(&state, &revoke), Err(Refusal::AlreadyRevoked(A)));
    assert_eq!(replay(&log).revoked_certs.get(&fingerprint), Some(&A));
}

#[test]
fn peer_addresses_are_bounded() {
    let long = "x".repeat(model::controller::PEER_TEXT_MAX + 1);
    let at_limit = "x".repeat(model::controller::PEER_TEXT_MAX);
    let state = ControllerState::default();
    let input = |first: &str, second: &str| Input::IdentityConflict {
        node: A,
        first_peer: first.to_string(),
        second_peer: second.to_string(),
    };
    for (first, second) in [(long.as_str(), "p"), ("p", long.as_str())] {
        assert_eq!(
            step(&state, &input(first, second)),
            Err(Refusal::InvalidPeer(A))
        );
    }
    for (first, second) in [(at_limit.as_str(), "p"), ("p", at_limit.as_str())] {
        assert_eq!(step(&state, &input(first, second)).map(|e| e.len()), Ok(1));
    }
}
