//! Which releases the controller's state names (issue #23 item 6): the
//! rule `fleetweft bundle rm` asks before the store drops a release.

use model::controller::{ControllerState, Input, Labels};
use model::{Digest, Generation, NodeId, OpId, Plan, ReportKind, RolloutId, RouteObservation};
use model::{ProbeVerdict, ToController};

use testkit::accept;

const V1: Digest = Digest::repeat(1);
const V2: Digest = Digest::repeat(2);
const V3: Digest = Digest::repeat(3);
const A: NodeId = NodeId(0);
const B: NodeId = NodeId(1);

fn from(state: &mut ControllerState, node: NodeId, msg: ToController) {
    accept(state, Input::FromAgent { node, msg });
}

fn hello(state: &mut ControllerState, node: NodeId, serving: Option<Digest>) {
    let generation = Generation(0);
    from(
        state,
        node,
        ToController::Hello {
            serving,
            generation,
        },
    );
}

/// `node` commits `op` and reports `release` serving: the op passes.
fn pass(state: &mut ControllerState, node: NodeId, op: OpId, release: Digest) {
    from(state, node, ToController::CommitRequest { op });
    let observation = RouteObservation::passing(release);
    let kind = ReportKind::Switched;
    from(
        state,
        node,
        ToController::Report {
            op,
            kind,
            observation,
        },
    );
}

fn start(state: &mut ControllerState, release: Digest, canary: NodeId, followers: Vec<NodeId>) {
    let plan = Plan {
        release,
        canary,
        followers,
        slots_max: 1,
        approval_after_canary: false,
    };
    accept(state, Input::StartRollout { plan });
}

/// Two enrolled nodes, node-a saying it serves v1.
fn fleet() -> ControllerState {
    let mut state = ControllerState::default();
    for name in ["node-a", "node-b"] {
        let labels = Labels::new();
        let public = "127.0.0.1:8080".into();
        accept(
            &mut state,
            Input::EnrollNode {
                name: name.into(),
                labels,
                public,
            },
        );
    }
    hello(&mut state, A, Some(V1));
    state
}

#[test]
fn a_release_is_in_use_while_a_rollout_an_op_or_a_node_names_it() {
    let mut state = fleet();
    let v1 = state.release_use(V1).expect("node-a says it serves v1");
    assert_eq!((v1.nodes, v1.node_example, v1.ops), (1, Some(A), 0));
    assert!(v1.rollouts.is_empty());
    assert_eq!(state.release_use(V2), None, "nothing names v2 yet");

    start(&mut state, V2, A, vec![B]);
    let v2 = state.release_use(V2).expect("the rollout deploys v2");
    assert_eq!(
        v2.rollouts.iter().copied().collect::<Vec<_>>(),
        [RolloutId(0)]
    );
    assert_eq!((v2.ops, v2.op_example, v2.nodes), (1, Some(OpId(0)), 0));
    let v1 = state.release_use(V1).expect("the canary's op restores v1");
    assert_eq!((v1.ops, v1.op_example, v1.nodes), (1, Some(OpId(0)), 1));

    pass(&mut state, A, OpId(0), V2);
    // node-a is confirmed on v2: its old claim of v1 no longer counts, and
    // node-b (nothing served) restores nothing.
    assert_eq!(state.release_use(V1), None);
    let v2 = state.release_use(V2).expect("in use");
    assert_eq!((v2.nodes, v2.node_example), (1, Some(A)));
    assert_eq!((v2.ops, v2.op_example), (1, Some(OpId(1))), "node-b's op");
}

#[test]
fn a_finished_rollout_names_its_release_until_no_node_intends_or_runs_it() {
    let mut state = fleet();
    start(&mut state, V2, A, vec![B]);
    pass(&mut state, A, OpId(0), V2);
    pass(&mut state, B, OpId(1), V2);
    assert!(state.active.is_none(), "completed");
    let v2 = state.release_use(V2).expect("both nodes run v2");
    assert_eq!(v2.nodes, 2);
    assert_eq!(v2.ops, 0);
    assert_eq!(v2.rollouts.len(), 1, "still the nodes' intended rollout");

    start(&mut state, V3, A, vec![B]);
    pass(&mut state, A, OpId(2), V3);
    let v2 = state.release_use(V2).expect("node-b still runs v2");
    assert_eq!((v2.nodes, v2.node_example), (1, Some(B)));
    assert_eq!(
        (v2.ops, v2.op_example),
        (1, Some(OpId(3))),
        "node-b's baseline"
    );
    pass(&mut state, B, OpId(3), V3);
    assert_eq!(state.release_use(V2), None, "nothing names v2 any more");
    let uses = state.release_uses();
    assert_eq!(uses.keys().copied().collect::<Vec<_>>(), [V3]);
}

#[test]
fn a_retired_node_and_a_drifted_observation_are_judged_apart() {
    let mut state = fleet();
    accept(
        &mut state,
        Input::RetireNode {
            name: "node-a".into(),
        },
    );
    assert_eq!(state.release_use(V1), None, "only a retired node ran v1");

    hello(&mut state, B, Some(V1));
    start(&mut state, V2, B, vec![]);
    pass(&mut state, B, OpId(0), V2);
    // node-b is confirmed on v2, then a look finds v3 answering there.
    let observation = RouteObservation::passing(V3);
    assert_eq!(observation.verdict, ProbeVerdict::Pass);
    let now_ms = 1_000_000;
    let source = model::controller::ObservationSource::Operator;
    accept(
        &mut state,
        Input::Observe {
            node: B,
            observation,
            source,
            now_ms,
        },
    );
    assert!(state.drifted.contains(&B));
    let v3 = state.release_use(V3).expect("observed serving");
    assert_eq!((v3.nodes, v3.node_example), (1, Some(B)));
    assert!(
        state.release_use(V2).is_some(),
        "still what node-b is confirmed on"
    );
}
