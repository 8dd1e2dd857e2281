//! Random inputs through the controller on a real log, a crash (drop
//! without close) or a clean stop after a random prefix, then a restart:
//! the rebuilt state is the replay of exactly the acknowledged events, and
//! no acknowledged event is missing from the log.

use controller::driver::{Controller, ControllerError};
use model::controller::{replay, Event, Input, Resolution};
use model::{
    Digest, Generation, NodeId, OpId, Plan, ProbeVerdict, ReportKind, RolloutId, RouteObservation,
    ToController,
};
use proptest::prelude::*;

const NODES: u32 = 3;

fn node() -> impl Strategy<Value = NodeId> {
    (0..NODES).prop_map(NodeId)
}

fn op() -> impl Strategy<Value = OpId> {
    (0u32..4).prop_map(OpId)
}

fn rollout() -> impl Strategy<Value = RolloutId> {
    (0u32..3).prop_map(RolloutId)
}

fn release() -> impl Strategy<Value = Option<Digest>> {
    prop_oneof![Just(None), (1u8..3).prop_map(|v| Some(Digest::repeat(v)))]
}

fn observation() -> impl Strategy<Value = RouteObservation> {
    (
        prop_oneof![
            Just(ProbeVerdict::Pass),
            Just(ProbeVerdict::WrongAnswer),
            Just(ProbeVerdict::Unreachable)
        ],
        release(),
        any::<bool>(),
    )
        .prop_map(|(verdict, identity, process_healthy)| {
            RouteObservation::new(verdict, identity, process_healthy)
        })
}

fn plan() -> impl Strategy<Value = Plan> {
    (
        node(),
        proptest::collection::vec(node(), 0..3),
        1u8..3,
        any::<bool>(),
        1u8..3,
    )
        .prop_map(|(canary, followers, slots_max, approval, v)| {
            // Mostly valid plans: duplicates removed (an invalid one is
            // just refused, which is covered by other inputs).
            let mut seen = vec![canary];
            let followers = followers
                .into_iter()
                .filter(|n| {
                    let fresh = !seen.contains(n);
                    seen.push(*n);
                    fresh
                })
                .collect();
            Plan {
                release: Digest::repeat(v),
                canary,
                followers,
                slots_max: u16::from(slots_max),
                approval_after_canary: approval,
            }
        })
}

fn to_controller() -> impl Strategy<Value = ToController> {
    prop_oneof![
        (release(), 0u64..4).prop_map(|(serving, g)| ToController::Hello {
            serving,
            generation: Generation(g)
        }),
        op().prop_map(|op| ToController::CommitRequest { op }),
        (
            op(),
            prop_oneof![
                Just(ReportKind::Switched),
                Just(ReportKind::Restored),
                Just(ReportKind::NotApplied)
            ],
            observation()
        )
            .prop_map(|(op, kind, observation)| ToController::Report {
                op,
                kind,
                observation
            }),
        (op(), 0u64..4, 0u64..4).prop_map(|(op, g, a)| ToController::Rejected {
            op,
            generation: Generation(g),
            accepted: Generation(a)
        }),
    ]
}

fn input() -> impl Strategy<Value = Input> {
    prop_oneof![
        2 => plan().prop_map(|plan| Input::StartRollout { plan }),
        1 => rollout().prop_map(|rollout| Input::Pause { rollout }),
        1 => rollout().prop_map(|rollout| Input::Resume { rollout }),
        1 => rollout().prop_map(|rollout| Input::Approve { rollout }),
        1 => (
            op(),
            observation(),
            prop_oneof![
                Just(Resolution::ConfirmNew),
                Just(Resolution::ConfirmBaseline),
                Just(Resolution::Abandon)
            ]
        )
            .prop_map(|(op, observation, resolution)| Input::Resolve {
                op,
                observation,
                resolution
            }),
        6 => (node(), to_controller()).prop_map(|(node, msg)| Input::FromAgent { node, msg }),
        2 => (node(), observation()).prop_map(|(node, observation)| Input::RouteProbed {
            node,
            observation
        }),
        2 => op().prop_map(|op| Input::Timeout { op }),
    ]
}

/// Hands each of `inputs` to the controller on its log, recording every
/// event it acknowledged; refusals record nothing.
fn handle_all(ctrl: &mut Controller, inputs: &[Input], acknowledged: &mut Vec<(u64, Event)>) {
    for input in inputs {
        match ctrl.handle(input.clone()) {
            Ok(ready) => acknowledged.extend(ready.into_parts().0),
            Err(ControllerError::Refused(_)) => {}
            Err(err) => panic!("controller failed on {input:?}: {err}"),
        }
    }
}

fn replay_of(acknowledged: &[(u64, Event)]) -> model::controller::ControllerState {
    replay(acknowledged.iter().map(|(_, event)| event))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn restart_rebuilds_exactly_the_acknowledged_state(
        inputs in proptest::collection::vec(input(), 0..40),
        cut in any::<proptest::sample::Index>(),
        clean_stop in any::<bool>(),
    ) {
        let temp = tempfile::tempdir().expect("temp dir");
        let dir = temp.path().join("log");
        let cut = cut.index(inputs.len() + 1);
        let mut acknowledged = Vec::new();

        let mut ctrl = Controller::open(&dir).expect("open");
        handle_all(&mut ctrl, &inputs[..cut], &mut acknowledged);
        if clean_stop {
            ctrl.close().expect("close");
        } else {
            // A crash as far as the log is concerned: no final flush.
            drop(ctrl);
        }

        let mut ctrl = Controller::open(&dir).expect("reopen after the stop");
        prop_assert_eq!(ctrl.state(), &replay_of(&acknowledged));
        prop_assert_eq!(ctrl.last_sequence(), acknowledged.last().map(|(s, _)| *s));
        handle_all(&mut ctrl, &inputs[cut..], &mut acknowledged);
        let state = ctrl.state().clone();
        prop_assert_eq!(&state, &replay_of(&acknowledged));
        drop(ctrl);

        // Sequences are dense and every acknowledged event is in the log.
        for (index, (sequence, _)) in acknowledged.iter().enumerate() {
            prop_assert_eq!(*sequence, index as u64);
        }
        let mut logged = Vec::new();
        logtools::inspect::visit_events(&dir, 0, |sequence, event| {
            logged.push((sequence, event.clone()))
        })
        .expect("log verifies");
        prop_assert_eq!(&logged, &acknowledged);
        let ctrl = Controller::open(&dir).expect("final reopen");
        prop_assert_eq!(ctrl.state(), &state);
        ctrl.close().expect("close");
    }
}

/// A contradictory "switched, wrong answer" report on an undecided canary (no
/// honest agent sends it) makes the op UNKNOWN; it must neither panic the
/// controller nor leave a log that a restart refuses.
#[test]
fn contradictory_switch_report_on_undecided_canary() {
    let temp = tempfile::tempdir().expect("temp dir");
    let mut ctrl = Controller::open(temp.path().join("log")).expect("open");
    let plan = Plan {
        release: Digest::repeat(2),
        canary: NodeId(0),
        followers: vec![],
        slots_max: 1,
        approval_after_canary: false,
    };
    let _started = ctrl.handle(Input::StartRollout { plan }).expect("start");
    let report = Input::FromAgent {
        node: NodeId(0),
        msg: ToController::Report {
            op: OpId(0),
            kind: ReportKind::Switched,
            observation: RouteObservation {
                verdict: ProbeVerdict::WrongAnswer,
                identity: None,
                process_healthy: true,
                process_uptime_ms: None,
                process_restarts: None,
                artifact: None,
            },
        },
    };
    let _recorded = ctrl.handle(report).expect("handled");
    ctrl.close().expect("close");
    Controller::open(temp.path().join("log")).expect("a restart accepts the log");
}

/// The annex a test stores beside the state: the sequence it was taken at,
/// so a start can say which snapshot it used.
fn annex_of(covers: u64) -> Vec<u8> {
    covers.to_le_bytes().to_vec()
}

fn decode_annex(bytes: &[u8]) -> Result<u64, String> {
    let bytes: [u8; 8] = bytes
        .try_into()
        .map_err(|_| format!("{} bytes, not 8", bytes.len()))?;
    Ok(u64::from_le_bytes(bytes))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// Issue #26: a start from the newest snapshot plus the events after
    /// it rebuilds exactly the state a replay of every acknowledged event
    /// does, after a crash or a clean stop, and folds only that tail. A
    /// snapshot whose annex the runtime refuses is skipped, naming it, and
    /// the one before it (or genesis) is used, with the same state.
    #[test]
    fn a_start_from_a_snapshot_equals_the_replay_of_every_acknowledged_event(
        inputs in proptest::collection::vec(input(), 0..40),
        snap_points in proptest::collection::vec(any::<proptest::sample::Index>(), 1..3),
        cut in any::<proptest::sample::Index>(),
        clean_stop in any::<bool>(),
        refuse_newest in any::<bool>(),
    ) {
        let temp = tempfile::tempdir().expect("temp dir");
        let dir = temp.path().join("log");
        let cut = cut.index(inputs.len() + 1);
        let mut points: Vec<usize> = snap_points.iter().map(|p| p.index(cut + 1)).collect();
        points.sort_unstable();
        points.dedup();
        let mut acknowledged = Vec::new();
        let mut ctrl = Controller::open(&dir).expect("open");
        let mut taken = Vec::new();
        let mut fed = 0;
        for point in &points {
            handle_all(&mut ctrl, &inputs[fed..*point], &mut acknowledged);
            fed = *point;
            let covers = acknowledged.len() as u64;
            prop_assert_eq!(ctrl.put_snapshot(&annex_of(covers)).expect("snapshot").covers, covers);
            taken.push(covers);
        }
        handle_all(&mut ctrl, &inputs[fed..cut], &mut acknowledged);
        if clean_stop {
            ctrl.close().expect("close");
        } else {
            drop(ctrl);
        }

        // The runtime may refuse the newest snapshot's annex (e.g. written
        // by another build): the start falls back, the state is the same.
        let newest = *taken.last().expect("one snapshot at least");
        let refused = refuse_newest.then_some(newest);
        let started = Controller::start(&dir, |bytes| {
            let covers = decode_annex(bytes)?;
            if Some(covers) == refused {
                return Err("refused by the test".to_string());
            }
            Ok(covers)
        })
        .expect("start from a snapshot");
        let used = taken.iter().rev().copied().find(|c| Some(*c) != refused);
        prop_assert_eq!(started.snapshot.as_ref().map(|s| s.covers), used);
        prop_assert_eq!(started.snapshot.as_ref().map(|s| s.annex), used);
        prop_assert_eq!(started.skipped.len(), usize::from(refused.is_some()));
        let from = used.unwrap_or(0);
        prop_assert_eq!(&started.tail[..], &acknowledged[from as usize..]);
        let mut ctrl = started.controller;
        prop_assert_eq!(ctrl.state(), &replay_of(&acknowledged));
        prop_assert_eq!(ctrl.last_sequence(), acknowledged.last().map(|(s, _)| *s));

        // Appends go on after a start from a snapshot, chained as before.
        handle_all(&mut ctrl, &inputs[cut..], &mut acknowledged);
        ctrl.close().expect("close");
        let replayed = Controller::open(&dir).expect("a full replay still accepts the log");
        prop_assert_eq!(replayed.state(), &replay_of(&acknowledged));
        replayed.close().expect("close");
    }
}
