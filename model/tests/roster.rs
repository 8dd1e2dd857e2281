//! The fleet roster in the controller core: a node is enrolled under a
//! fresh name and takes the next id (its enrollment order), labels are
//! bounded and replaced whole, a retired node is never granted anything,
//! retiring is refused while the node holds a live op, and a replay
//! rebuilds the roster exactly.

use model::controller::roster::{
    LABELS_PER_NODE_MAX, LABEL_KEY_BYTES_MAX, NODE_NAME_BYTES_MAX, PUBLIC_ROUTE_BYTES_MAX,
};
use model::controller::{
    apply, replay, step, ControllerState, Event, Input, Labels, Refusal, RosterLimit,
};
use model::{Digest, NodeId, Plan};
use std::collections::BTreeSet;

use testkit::accept_into;

const V1: Digest = Digest::repeat(1);

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn enroll_input(name: &str, pairs: &[(&str, &str)]) -> Input {
    Input::EnrollNode {
        name: name.into(),
        labels: labels(pairs),
        public: "127.0.0.1:8080".into(),
    }
}

fn refused(state: &ControllerState, input: Input) -> Refusal {
    step(state, &input).expect_err("refused")
}

#[test]
fn enrollment_order_is_the_node_id_and_names_are_unique() {
    let mut state = ControllerState::default();
    let mut log = Vec::new();
    for (i, name) in ["web-1", "web-2", "db-1"].iter().enumerate() {
        let events = accept_into(
            &mut state,
            &mut log,
            enroll_input(name, &[("tier", "edge")]),
        );
        assert_eq!(
            events,
            vec![Event::NodeEnrolled {
                node: NodeId(i as u32),
                name: name.to_string(),
                labels: labels(&[("tier", "edge")]),
                public: "127.0.0.1:8080".into(),
            }]
        );
    }
    assert_eq!(state.roster.id("db-1"), Some(NodeId(2)));
    assert_eq!(state.roster.name(NodeId(1)), Some("web-2"));
    assert_eq!(
        refused(&state, enroll_input("web-2", &[])),
        Refusal::NodeNameTaken("web-2".into())
    );
    assert_eq!(replay(&log), state, "a replay rebuilds the roster");
}

#[test]
fn names_labels_and_routes_are_bounded() {
    let state = ControllerState::default();
    let long_name = "a".repeat(NODE_NAME_BYTES_MAX + 1);
    assert!(step(&state, &enroll_input(&"a".repeat(NODE_NAME_BYTES_MAX), &[])).is_ok());
    for bad in [long_name.as_str(), "", "Web-1", "web_1", "web.1"] {
        assert_eq!(
            refused(&state, enroll_input(bad, &[])),
            Refusal::RosterLimit(RosterLimit::Name(bad.into())),
            "{bad:?}"
        );
    }
    let many: Labels = (0..=LABELS_PER_NODE_MAX)
        .map(|i| (format!("k{i}"), "v".to_string()))
        .collect();
    let full: Labels = many.clone().into_iter().take(LABELS_PER_NODE_MAX).collect();
    let with = |labels: Labels| Input::EnrollNode {
        name: "n".into(),
        labels,
        public: "127.0.0.1:1".into(),
    };
    assert!(
        step(&state, &with(full)).is_ok(),
        "the limit itself is fine"
    );
    assert_eq!(
        refused(&state, with(many)),
        Refusal::RosterLimit(RosterLimit::TooManyLabels(LABELS_PER_NODE_MAX + 1))
    );
    let long_key = "k".repeat(LABEL_KEY_BYTES_MAX + 1);
    for (k, v) in [
        (long_key.as_str(), "v"),
        ("a,b", "v"),
        ("k", "x=y"),
        ("k", ""),
    ] {
        assert!(
            matches!(
                refused(&state, with(labels(&[(k, v)]))),
                Refusal::RosterLimit(RosterLimit::Label(_))
            ),
            "{k}={v}"
        );
    }
    for public in [String::new(), "x".repeat(PUBLIC_ROUTE_BYTES_MAX + 1)] {
        let input = Input::EnrollNode {
            name: "n".into(),
            labels: Labels::new(),
            public: public.clone(),
        };
        assert_eq!(
            refused(&state, input),
            Refusal::RosterLimit(RosterLimit::Public(public))
        );
    }
}

#[test]
fn labels_are_set_and_removed_and_the_event_carries_the_whole_set() {
    let mut state = ControllerState::default();
    let mut log = Vec::new();
    accept_into(
        &mut state,
        &mut log,
        enroll_input("web-1", &[("region", "eu"), ("tier", "edge")]),
    );
    let events = accept_into(
        &mut state,
        &mut log,
        Input::LabelNode {
            name: "web-1".into(),
            set: labels(&[("region", "us"), ("rack", "r7")]),
            remove: BTreeSet::from(["tier".to_string()]),
        },
    );
    assert_eq!(
        events,
        vec![Event::NodeLabeled {
            node: NodeId(0),
            labels: labels(&[("rack", "r7"), ("region", "us")]),
        }]
    );
    // The same labels again change nothing, so nothing is recorded.
    let again = Input::LabelNode {
        name: "web-1".into(),
        set: labels(&[("rack", "r7")]),
        remove: BTreeSet::new(),
    };
    assert_eq!(step(&state, &again), Ok(vec![]));
    let unknown = Input::LabelNode {
        name: "nope".into(),
        set: Labels::new(),
        remove: BTreeSet::new(),
    };
    assert_eq!(
        refused(&state, unknown),
        Refusal::UnknownNode("nope".into())
    );
    assert_eq!(replay(&log), state);
}

fn plan(canary: u32, followers: &[u32]) -> Plan {
    Plan {
        release: V1,
        canary: NodeId(canary),
        followers: followers.iter().map(|n| NodeId(*n)).collect(),
        slots_max: 1,
        approval_after_canary: false,
    }
}

#[test]
fn retire_is_refused_while_the_node_holds_a_live_op() {
    let mut state = ControllerState::default();
    let mut log = Vec::new();
    accept_into(&mut state, &mut log, enroll_input("web-1", &[]));
    accept_into(&mut state, &mut log, enroll_input("web-2", &[]));
    accept_into(
        &mut state,
        &mut log,
        Input::StartRollout {
            plan: plan(0, &[1]),
        },
    );
    let op = state.nodes[&NodeId(0)].live_op.expect("canary granted");
    assert_eq!(
        refused(
            &state,
            Input::RetireNode {
                name: "web-1".into()
            }
        ),
        Refusal::NodeHasLiveOp {
            name: "web-1".into(),
            op
        }
    );
    // Its follower holds nothing yet: it can be retired.
    let events = accept_into(
        &mut state,
        &mut log,
        Input::RetireNode {
            name: "web-2".into(),
        },
    );
    assert_eq!(events, vec![Event::NodeRetired { node: NodeId(1) }]);
    assert!(state.roster.is_retired(NodeId(1)));
    assert_eq!(
        refused(
            &state,
            Input::RetireNode {
                name: "web-2".into()
            }
        ),
        Refusal::NodeRetired("web-2".into())
    );
    assert_eq!(
        refused(&state, enroll_input("web-2", &[])),
        Refusal::NodeNameTaken("web-2".into()),
        "a retired name is never reused"
    );
    assert_eq!(replay(&log), state);
}

#[test]
fn a_retired_node_is_never_granted_anything() {
    let mut state = ControllerState::default();
    let mut log = Vec::new();
    for name in ["c", "f1", "f2"] {
        accept_into(&mut state, &mut log, enroll_input(name, &[]));
    }
    accept_into(
        &mut state,
        &mut log,
        Input::RetireNode { name: "f1".into() },
    );
    // A plan naming a retired node is refused outright.
    assert_eq!(
        refused(
            &state,
            Input::StartRollout {
                plan: plan(1, &[2])
            }
        ),
        Refusal::PlanNodeRetired(NodeId(1))
    );
    // A node retired after its rollout started is skipped by no grant:
    // the rollout waits at it, as at a quarantined node.
    let mut state = ControllerState::default();
    let mut log = Vec::new();
    for name in ["c", "f1", "f2"] {
        accept_into(&mut state, &mut log, enroll_input(name, &[]));
    }
    accept_into(
        &mut state,
        &mut log,
        Input::StartRollout {
            plan: plan(0, &[1, 2]),
        },
    );
    accept_into(
        &mut state,
        &mut log,
        Input::RetireNode { name: "f1".into() },
    );
    let canary = state.nodes[&NodeId(0)].live_op.expect("canary granted");
    let settled = accept_into(
        &mut state,
        &mut log,
        Input::Resolve {
            op: canary,
            observation: model::RouteObservation::passing(V1),
            resolution: model::controller::Resolution::ConfirmNew,
        },
    );
    assert!(
        !settled
            .iter()
            .any(|e| matches!(e, Event::OpGranted { node, .. } if *node == NodeId(1))),
        "granted to a retired node: {settled:?}"
    );
    let live = state.nodes.get(&NodeId(1)).and_then(|r| r.live_op);
    assert_eq!(live, None, "a retired node holds no op");
}

#[test]
fn selection_matches_every_pair_in_enrollment_order_and_skips_retired() {
    let mut state = ControllerState::default();
    let mut log = Vec::new();
    accept_into(
        &mut state,
        &mut log,
        enroll_input("a", &[("region", "eu"), ("tier", "edge")]),
    );
    accept_into(
        &mut state,
        &mut log,
        enroll_input("b", &[("region", "us"), ("tier", "edge")]),
    );
    accept_into(&mut state, &mut log, enroll_input("c", &[("region", "eu")]));
    accept_into(
        &mut state,
        &mut log,
        enroll_input("d", &[("region", "eu"), ("tier", "edge")]),
    );
    accept_into(
        &mut state,
        &mut log,
        enroll_input("e", &[("region", "eu"), ("tier", "edge")]),
    );
    accept_into(&mut state, &mut log, Input::RetireNode { name: "d".into() });
    let selector = labels(&[("region", "eu"), ("tier", "edge")]);
    let chosen: Vec<NodeId> = state.roster.select(&selector).collect();
    assert_eq!(chosen, vec![NodeId(0), NodeId(4)]);
    let all: Vec<NodeId> = state.roster.select(&Labels::new()).collect();
    assert_eq!(all.len(), 4, "an empty selector selects every active node");
}

#[test]
fn events_naming_a_node_never_enrolled_or_out_of_order_are_refused_by_the_fold() {
    use model::controller::{referents_exist, MissingReferent};
    let mut state = ControllerState::default();
    let out_of_order = Event::NodeEnrolled {
        node: NodeId(1),
        name: "x".into(),
        labels: Labels::new(),
        public: "p".into(),
    };
    assert_eq!(
        referents_exist(&state, &out_of_order),
        Err(MissingReferent::Node(NodeId(1)))
    );
    assert_eq!(
        referents_exist(&state, &Event::NodeRetired { node: NodeId(0) }),
        Err(MissingReferent::Node(NodeId(0)))
    );
    apply(
        &mut state,
        &Event::NodeEnrolled {
            node: NodeId(0),
            name: "x".into(),
            labels: Labels::new(),
            public: "p".into(),
        },
    );
    let twice = Event::NodeEnrolled {
        node: NodeId(1),
        name: "x".into(),
        labels: Labels::new(),
        public: "p".into(),
    };
    assert_eq!(
        referents_exist(&state, &twice),
        Err(MissingReferent::NameTaken(NodeId(0)))
    );
}

#[test]
fn folding_only_the_roster_events_gives_the_state_roster() {
    let mut state = ControllerState::default();
    let mut log = Vec::new();
    accept_into(&mut state, &mut log, enroll_input("a", &[("tier", "edge")]));
    accept_into(&mut state, &mut log, enroll_input("b", &[]));
    accept_into(
        &mut state,
        &mut log,
        Input::StartRollout {
            plan: plan(0, &[1]),
        },
    );
    accept_into(
        &mut state,
        &mut log,
        Input::LabelNode {
            name: "b".into(),
            set: labels(&[("region", "eu")]),
            remove: BTreeSet::new(),
        },
    );
    accept_into(&mut state, &mut log, Input::RetireNode { name: "b".into() });
    let mut roster = model::controller::Roster::default();
    for event in &log {
        roster.fold(event);
    }
    assert_eq!(roster, state.roster);
}
