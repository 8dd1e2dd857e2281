//! Observations of settled nodes (SPEC §10, proof is a readback): recorded
//! at most one per node per interval, drift judged on them, baselines taken
//! from them, and the cause of a restore kept apart from the bounded
//! evidence window.

use model::controller::{
    step, ControllerState, Event, Input, ObservationSource, OpPhase, Outcome, Refusal,
    OBSERVATION_INTERVAL_MIN_MS, OP_EVIDENCE_MAX,
};
use model::{
    ArtifactRead, Decision, Digest, NodeId, OpId, Plan, ProbeVerdict, ReportKind, RouteObservation,
    ToController,
};

use testkit::accept;

const V1: Digest = Digest::repeat(1);
const V2: Digest = Digest::repeat(2);
const NODE: NodeId = NodeId(0);
const OP: OpId = OpId(0);

fn from_agent(state: &mut ControllerState, msg: ToController) -> Vec<Event> {
    accept(state, Input::FromAgent { node: NODE, msg })
}

fn report(observation: RouteObservation) -> ToController {
    ToController::Report {
        op: OP,
        kind: ReportKind::Switched,
        observation,
    }
}

/// A one-node rollout of v2 up to the agent's switch report, not sent yet.
fn committed() -> ControllerState {
    let mut state = ControllerState::default();
    from_agent(
        &mut state,
        ToController::Hello {
            serving: Some(V1),
            generation: model::Generation(0),
        },
    );
    accept(
        &mut state,
        Input::StartRollout {
            plan: Plan {
                release: V2,
                canary: NODE,
                followers: vec![],
                slots_max: 1,
                approval_after_canary: false,
            },
        },
    );
    from_agent(&mut state, ToController::CommitRequest { op: OP });
    assert_eq!(state.ops[&model::OpId(0)].decision, Some(Decision::Commit));
    state
}

/// v2 verified on the node.
fn verified() -> ControllerState {
    let mut state = committed();
    from_agent(&mut state, report(RouteObservation::passing(V2)));
    assert_eq!(
        state.ops[&model::OpId(0)].phase,
        OpPhase::Settled(Outcome::Verified)
    );
    state
}

fn observe(observation: RouteObservation, now_ms: u64) -> Input {
    Input::Observe {
        node: NODE,
        observation,
        source: ObservationSource::ReadBack,
        now_ms,
    }
}

fn wrong(identity: Digest) -> RouteObservation {
    RouteObservation::new(ProbeVerdict::WrongAnswer, Some(identity), true)
}

#[test]
fn an_observation_matching_the_confirmed_release_is_no_drift() {
    let mut state = verified();
    let events = accept(&mut state, observe(RouteObservation::passing(V2), 1_000));
    assert!(matches!(
        events[..],
        [Event::NodeObserved { at_ms: 1_000, .. }]
    ));
    assert!(state.nodes[&NODE].drift().is_none());
    assert_eq!(
        state.ops[&model::OpId(0)].phase,
        OpPhase::Settled(Outcome::Verified)
    );
}

#[test]
fn a_contradicting_observation_is_drift_and_rewrites_no_history() {
    for seen in [
        wrong(V2),
        RouteObservation::passing(V1),
        RouteObservation::new(ProbeVerdict::Unreachable, None, false),
        RouteObservation::new(ProbeVerdict::Pass, None, true),
        RouteObservation {
            artifact: Some(ArtifactRead::AppFileAltered(V2)),
            ..RouteObservation::passing(V2)
        },
        RouteObservation {
            artifact: Some(ArtifactRead::Digest(V1)),
            ..RouteObservation::passing(V2)
        },
        // The app file is v1's signed app (issue #24 item 1): still drift.
        RouteObservation {
            artifact: Some(ArtifactRead::AppFileOf {
                installed: V2,
                release: V1,
            }),
            ..RouteObservation::passing(V2)
        },
    ] {
        let mut state = verified();
        accept(&mut state, observe(seen, 1_000));
        let drift = state.nodes[&NODE].drift().expect("drifted");
        assert_eq!(drift.observation, seen);
        assert_eq!(state.nodes[&NODE].confirmed, Some(V2), "the record stays");
        assert_eq!(
            state.ops[&model::OpId(0)].phase,
            OpPhase::Settled(Outcome::Verified)
        );
    }
}

#[test]
fn an_unreadable_artifact_alone_is_no_drift() {
    let mut state = verified();
    let seen = RouteObservation {
        artifact: Some(ArtifactRead::Unreadable),
        ..RouteObservation::passing(V2)
    };
    accept(&mut state, observe(seen, 1_000));
    assert!(state.nodes[&NODE].drift().is_none());
}

#[test]
fn observations_are_bounded_to_one_per_node_per_interval() {
    let mut state = verified();
    accept(&mut state, observe(RouteObservation::passing(V2), 50_000));
    let just_before = 50_000 + OBSERVATION_INTERVAL_MIN_MS - 1;
    assert_eq!(
        step(&state, &observe(wrong(V2), just_before)),
        Err(Refusal::ObservedTooSoon {
            node: NODE,
            retry_after_ms: 1
        })
    );
    // The wait told to the operator is what is left of the interval.
    assert_eq!(
        step(&state, &observe(wrong(V2), 50_010)),
        Err(Refusal::ObservedTooSoon {
            node: NODE,
            retry_after_ms: OBSERVATION_INTERVAL_MIN_MS - 10
        })
    );
    // A clock that went backwards is too soon as well: a whole interval
    // from the last observation.
    assert_eq!(
        step(&state, &observe(wrong(V2), 10)),
        Err(Refusal::ObservedTooSoon {
            node: NODE,
            retry_after_ms: OBSERVATION_INTERVAL_MIN_MS
        })
    );
    let at_limit = 50_000 + OBSERVATION_INTERVAL_MIN_MS;
    assert!(step(&state, &observe(wrong(V2), at_limit)).is_ok());
}

#[test]
fn an_observation_of_a_node_with_a_live_op_is_that_ops_evidence() {
    let mut state = committed();
    let events = accept(&mut state, observe(RouteObservation::passing(V2), 1_000));
    assert!(matches!(events[0], Event::ProbeRecorded { op: OP, .. }));
    assert!(!events
        .iter()
        .any(|e| matches!(e, Event::NodeObserved { .. })));
    assert_eq!(
        state.ops[&model::OpId(0)].phase,
        OpPhase::Settled(Outcome::Verified)
    );
}

#[test]
fn a_drifted_nodes_next_baseline_is_what_was_observed() {
    let mut state = verified();
    accept(&mut state, observe(RouteObservation::passing(V1), 1_000));
    assert_eq!(state.nodes[&NODE].baseline(), Some(V1));
    // Nothing proven serving: no baseline, never the old claim.
    let mut state = verified();
    accept(&mut state, observe(wrong(V2), 1_000));
    assert_eq!(state.nodes[&NODE].baseline(), None);
    // Without drift: the confirmed release.
    assert_eq!(verified().nodes[&NODE].baseline(), Some(V2));
}

#[test]
fn a_settling_op_clears_the_older_observation() {
    let mut state = verified();
    accept(&mut state, observe(wrong(V2), 1_000));
    assert!(state.nodes[&NODE].drift().is_some());
    // The next rollout's op on the drifted node settles: its evidence is
    // newer than the observation (settling the settled op again would be
    // refused by `referents_exist`, tested in apply_preconditions.rs).
    let v3 = Digest::repeat(3);
    accept(
        &mut state,
        Input::StartRollout {
            plan: Plan {
                release: v3,
                canary: NODE,
                followers: vec![],
                slots_max: 1,
                approval_after_canary: false,
            },
        },
    );
    let next = OpId(1);
    from_agent(&mut state, ToController::CommitRequest { op: next });
    let events = from_agent(
        &mut state,
        ToController::Report {
            op: next,
            kind: ReportKind::Switched,
            observation: RouteObservation::passing(v3),
        },
    );
    assert!(events
        .iter()
        .any(|e| matches!(e, Event::OpSettled { op, .. } if *op == next)));
    assert!(state.nodes[&NODE].observed.is_none());
}

#[test]
fn the_cause_of_a_restore_survives_the_evidence_window() {
    let mut state = committed();
    let first_wrong = wrong(V2);
    from_agent(&mut state, report(first_wrong));
    assert_eq!(state.ops[&model::OpId(0)].phase, OpPhase::Restoring);
    // More evidence than the window keeps: the restored app is killed.
    for restarts in 0..=OP_EVIDENCE_MAX as u32 {
        let down = RouteObservation {
            process_restarts: Some(restarts),
            ..RouteObservation::new(ProbeVerdict::Unreachable, None, false)
        };
        from_agent(
            &mut state,
            ToController::Report {
                op: OP,
                kind: ReportKind::Restored,
                observation: down,
            },
        );
    }
    let op = &state.ops[&model::OpId(0)];
    assert!(op
        .evidence
        .iter()
        .all(|e| e.observation.verdict == ProbeVerdict::Unreachable));
    let cause = op.cause.expect("the cause is kept");
    assert_eq!(cause.observation, first_wrong);
}

#[test]
fn an_operator_rollback_of_a_passing_release_has_no_failed_cause() {
    let mut state = committed();
    accept(&mut state, Input::RollBack { op: OP });
    assert_eq!(state.ops[&model::OpId(0)].phase, OpPhase::Restoring);
    assert_eq!(state.ops[&model::OpId(0)].cause, None);
}
