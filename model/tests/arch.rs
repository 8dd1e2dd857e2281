//! One release for every architecture (issue #24 item 5): an agent's
//! platform is recorded once per change (`NodePlatform`), kept through a
//! replay and a snapshot, and a rollout whose plan selects a node the
//! release has no tree for, or whose architecture is not known, is refused
//! before anything is recorded, naming the nodes.

use model::controller::snapshot::{decode_state, encode_state};
use model::controller::{replay, step, ControllerState, Event, Input, Labels, Refusal};
use model::plan::Policy;
use model::platform::{
    Arch, ArchMismatch, ArchSet, Os, Platform, ReleaseArches, ARCH_MISMATCHES_NAMED_MAX,
};
use model::{Digest, Generation, NodeId, Plan, ToController};

use testkit::accept_into;

const V2: Digest = Digest::repeat(2);

fn platform(arch: Arch) -> Platform {
    Platform {
        arch,
        os: Os::Linux,
    }
}

/// A fleet of enrolled nodes `edge-0`, `edge-1`, ...; each that has an
/// architecture said so through its agent.
fn fleet(arches: &[Option<Arch>]) -> (ControllerState, Vec<Event>) {
    let mut state = ControllerState::default();
    let mut log = Vec::new();
    for (i, arch) in arches.iter().enumerate() {
        let enroll = Input::EnrollNode {
            name: format!("edge-{i}"),
            labels: Labels::new(),
            public: "127.0.0.1:8080".into(),
        };
        accept_into(&mut state, &mut log, enroll);
        if let Some(arch) = arch {
            let said = Input::FromAgent {
                node: NodeId(i as u32),
                msg: ToController::Platform {
                    platform: platform(*arch),
                },
            };
            accept_into(&mut state, &mut log, said);
        }
    }
    (state, log)
}

fn start(nodes: usize, arches: ReleaseArches) -> Input {
    Input::StartStaged {
        plan: Plan {
            release: V2,
            canary: NodeId(0),
            followers: (1..nodes as u32).map(NodeId).collect(),
            slots_max: 1,
            approval_after_canary: false,
        },
        policy: Policy::default(),
        arches,
        deploys: None,
    }
}

fn only(arches: &[Arch]) -> ReleaseArches {
    ReleaseArches::Only(ArchSet::of(arches.iter().copied()))
}

#[test]
fn a_platform_is_recorded_once_per_change_and_survives_replay_and_snapshot() {
    let (mut state, mut log) = fleet(&[Some(Arch::Aarch64)]);
    let node = NodeId(0);
    assert_eq!(
        log.last(),
        Some(&Event::NodePlatform {
            node,
            platform: platform(Arch::Aarch64)
        })
    );
    assert_eq!(state.nodes[&node].platform, Some(platform(Arch::Aarch64)));
    // Saying the same again (every reconnection) records nothing.
    let again = Input::FromAgent {
        node,
        msg: ToController::Platform {
            platform: platform(Arch::Aarch64),
        },
    };
    assert_eq!(step(&state, &again).expect("accepted"), vec![]);
    // A change is recorded.
    let moved = Input::FromAgent {
        node,
        msg: ToController::Platform {
            platform: platform(Arch::X86_64),
        },
    };
    assert_eq!(accept_into(&mut state, &mut log, moved).len(), 1);
    assert_eq!(replay(&log), state);
    let bytes = encode_state(&state).expect("encodes");
    assert_eq!(decode_state(&bytes).expect("decodes"), state);
    assert_eq!(
        decode_state(&bytes).expect("decodes").nodes[&node].platform,
        Some(platform(Arch::X86_64))
    );
}

#[test]
fn a_quarantined_node_s_platform_is_not_recorded() {
    let (mut state, mut log) = fleet(&[None]);
    let node = NodeId(0);
    let conflict = Input::IdentityConflict {
        node,
        first_peer: "10.0.0.1:1".into(),
        second_peer: "10.0.0.2:2".into(),
    };
    accept_into(&mut state, &mut log, conflict);
    let said = Input::FromAgent {
        node,
        msg: ToController::Platform {
            platform: platform(Arch::X86_64),
        },
    };
    assert_eq!(step(&state, &said).expect("accepted"), vec![]);
}

#[test]
fn a_mixed_fleet_starts_a_release_with_a_tree_for_each_of_its_architectures() {
    let (state, _) = fleet(&[Some(Arch::Aarch64), Some(Arch::X86_64), Some(Arch::Aarch64)]);
    let events = step(&state, &start(3, only(&[Arch::X86_64, Arch::Aarch64]))).expect("starts");
    assert!(matches!(events[0], Event::RolloutStarted { .. }));
}

#[test]
fn a_plan_over_a_node_without_a_tree_is_refused_naming_it_before_anything_is_recorded() {
    let (state, _) = fleet(&[Some(Arch::X86_64), Some(Arch::Aarch64), Some(Arch::X86_64)]);
    let refusal = step(&state, &start(3, only(&[Arch::X86_64]))).expect_err("refused");
    assert_eq!(
        refusal,
        Refusal::NoTreeForArch {
            release: ArchSet::of([Arch::X86_64]),
            nodes: vec![ArchMismatch {
                name: "edge-1".into(),
                arch: Some(Arch::Aarch64),
            }],
            count: 1,
        }
    );
    let text = refusal.to_string();
    assert!(text.contains("edge-1 (aarch64)"), "{text}");
    assert!(text.contains("trees for x86_64 only"), "{text}");
    // Nothing was recorded: the generation did not move.
    assert_eq!(state.generation, Generation(0));
    assert!(state.rollouts.is_empty());
}

#[test]
fn a_node_whose_architecture_is_not_known_runs_only_releases_for_any() {
    let (state, _) = fleet(&[Some(Arch::X86_64), None]);
    let refusal = step(&state, &start(2, only(&[Arch::X86_64, Arch::Aarch64])))
        .expect_err("an unknown architecture is refused");
    assert!(
        refusal
            .to_string()
            .contains("edge-1 (architecture unknown)"),
        "{refusal}"
    );
    // A release without per-architecture trees runs anywhere, as before.
    assert!(step(&state, &start(2, ReleaseArches::Any)).is_ok());
    let plain = Input::StartRollout {
        plan: Plan {
            release: V2,
            canary: NodeId(1),
            followers: vec![],
            slots_max: 1,
            approval_after_canary: false,
        },
    };
    assert!(step(&state, &plain).is_ok());
}

#[test]
fn a_node_of_another_architecture_is_refused_even_as_the_canary() {
    let (state, _) = fleet(&[Some(Arch::Other), Some(Arch::X86_64)]);
    let refusal =
        step(&state, &start(2, only(&[Arch::X86_64, Arch::Aarch64]))).expect_err("refused");
    assert!(refusal.to_string().contains("edge-0 (other)"), "{refusal}");
}

#[test]
fn a_refusal_names_at_most_its_bound_and_counts_the_rest() {
    let many = ARCH_MISMATCHES_NAMED_MAX + 5;
    let (state, _) = fleet(&vec![Some(Arch::Aarch64); many]);
    let Err(Refusal::NoTreeForArch { nodes, count, .. }) =
        step(&state, &start(many, only(&[Arch::X86_64])))
    else {
        panic!("refused by architecture");
    };
    assert_eq!(nodes.len(), ARCH_MISMATCHES_NAMED_MAX);
    assert_eq!(count as usize, many);
    let refusal = step(&state, &start(many, only(&[Arch::X86_64]))).expect_err("refused");
    assert!(refusal.to_string().ends_with(" and 5 more"), "{refusal}");
}

/// The rollout records its release's architectures (`RolloutArchesSet`,
/// before any grant, kept through a replay and a snapshot), and a node
/// whose architecture changed since the start is not granted: the rollout
/// waits for it as for a retired node (A1).
#[test]
fn a_follower_that_changed_architecture_after_the_start_is_not_granted() {
    let (mut state, mut log) = fleet(&[Some(Arch::Aarch64), Some(Arch::X86_64)]);
    let events = accept_into(
        &mut state,
        &mut log,
        start(2, only(&[Arch::Aarch64, Arch::X86_64])),
    );
    let set = events
        .iter()
        .position(|e| matches!(e, Event::RolloutArchesSet { .. }));
    let grant = events
        .iter()
        .position(|e| matches!(e, Event::OpGranted { .. }));
    assert!(
        set.is_some() && set < grant,
        "recorded before the canary's grant: {events:?}"
    );
    let r = state.rollouts.front().expect("started");
    assert_eq!(r.arches, only(&[Arch::Aarch64, Arch::X86_64]));
    assert_eq!(replay(&log), state, "a replay rebuilds the architectures");
    let bytes = encode_state(&state).expect("encodes");
    let decoded = decode_state(&bytes).expect("decodes");
    assert_eq!(decoded, state, "a snapshot keeps them");
    // edge-1 is re-imaged as an "other" machine before its grant.
    let said = Input::FromAgent {
        node: NodeId(1),
        msg: ToController::Platform {
            platform: platform(Arch::Other),
        },
    };
    accept_into(&mut state, &mut log, said);
    // The canary passes; the follower would be next.
    for msg in [
        ToController::CommitRequest { op: model::OpId(0) },
        ToController::Report {
            op: model::OpId(0),
            kind: model::ReportKind::Switched,
            observation: model::RouteObservation::passing(V2),
        },
    ] {
        let events = accept_into(
            &mut state,
            &mut log,
            Input::FromAgent {
                node: NodeId(0),
                msg,
            },
        );
        assert!(
            !events
                .iter()
                .any(|e| matches!(e, Event::OpGranted { node, .. } if *node == NodeId(1))),
            "{events:?}"
        );
    }
    let r = state.rollouts.front().expect("started");
    assert_eq!(r.followers_granted, 0, "the rollout waits for edge-1");
}
