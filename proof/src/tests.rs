//! Every reason code, from states built through the real `step`/`apply`;
//! the verdicts of states folded from events in [`recorded`].

mod recorded;

use super::*;
use model::controller::{apply, step, Input};
use model::{ArtifactRead, Generation, OpId, Plan, ToController};

const V1: Digest = Digest::repeat(1);
const V2: Digest = Digest::repeat(2);
const V3: Digest = Digest::repeat(3);
const A: NodeId = NodeId(0);
const B: NodeId = NodeId(1);
const NOW_MS: u64 = 1_700_000_000_000;

struct S(ControllerState);

impl S {
    fn new() -> Self {
        let mut s = S(ControllerState::default());
        for node in [A, B] {
            s = s.agent(
                node,
                ToController::Hello {
                    serving: Some(V1),
                    generation: Generation(0),
                },
            );
        }
        s
    }
    fn input(mut self, input: Input) -> Self {
        for e in step(&self.0, &input).expect("accepted") {
            apply(&mut self.0, &e);
        }
        self
    }
    fn agent(self, node: NodeId, msg: ToController) -> Self {
        self.input(Input::FromAgent { node, msg })
    }
    fn start(self, release: Digest, followers: Vec<NodeId>) -> Self {
        self.input(Input::StartRollout {
            plan: Plan {
                release,
                canary: A,
                followers,
                slots_max: 1,
                approval_after_canary: false,
            },
        })
    }
    fn commit(self, op: u32) -> Self {
        self.agent(A, ToController::CommitRequest { op: OpId(op) })
    }
    fn report(self, op: u32, kind: ReportKind, o: RouteObservation) -> Self {
        self.agent(
            A,
            ToController::Report {
                op: OpId(op),
                kind,
                observation: o,
            },
        )
    }
    /// Canary A verified on v2 (a one-node rollout).
    fn verified() -> Self {
        S::new().start(V2, vec![]).commit(0).report(
            0,
            ReportKind::Switched,
            RouteObservation::passing(V2),
        )
    }
    fn live(&self, node: NodeId, fresh: &Fresh) -> NodeProof {
        live_node_proof(&self.0, node, &node.to_string(), fresh)
    }
    fn recorded(&self, node: NodeId) -> NodeProof {
        recorded_node_proof(&self.0, node, &node.to_string())
    }
}

fn readback(release: Digest) -> RouteObservation {
    RouteObservation {
        process_uptime_ms: Some(12_000),
        process_restarts: Some(0),
        artifact: Some(ArtifactRead::Digest(release)),
        ..RouteObservation::passing(release)
    }
}

fn fresh(route: RouteObservation, agent: RouteObservation) -> Fresh {
    Fresh {
        route,
        route_at_ms: NOW_MS,
        agent: Ok((agent, NOW_MS + 5)),
        isolation: None,
        older: None,
        configuration: None,
    }
}

fn route(verdict: ProbeVerdict, identity: Option<Digest>) -> RouteObservation {
    RouteObservation::new(verdict, identity, verdict != ProbeVerdict::Unreachable)
}

fn verdict(p: &NodeProof) -> (Verdict, Option<ReasonCode>) {
    (p.verdict, p.reason)
}

fn item<'a>(p: &'a NodeProof, name: &str) -> &'a EvidenceCheck {
    p.checks
        .iter()
        .find(|c| c.item == name)
        .unwrap_or_else(|| panic!("no {name} in {p:#?}"))
}

#[test]
fn a_fresh_readback_matching_the_intent_is_verified_with_times_and_origins() {
    let p = S::verified().live(A, &fresh(RouteObservation::passing(V2), readback(V2)));
    assert_eq!(verdict(&p), (Verdict::Verified, None), "{p:#?}");
    assert_eq!(p.mode, ProofMode::Live);
    assert_eq!(item(&p, "route identity").origin, Origin::ControllerProbe);
    assert_eq!(item(&p, "route identity").observed_at_ms, Some(NOW_MS));
    assert_eq!(item(&p, "artifact digest").origin, Origin::AgentReadBack);
    assert_eq!(item(&p, "artifact digest").observed_at_ms, Some(NOW_MS + 5));
    assert!(p.checks.iter().all(|c| c.observed_at_ms.is_some()));
}

#[test]
fn route_identity_mismatch_is_failed_even_with_the_expected_body() {
    let p = S::verified().live(A, &fresh(RouteObservation::passing(V1), readback(V2)));
    assert_eq!(
        verdict(&p),
        (Verdict::Failed, Some(ReasonCode::RouteIdentityMismatch))
    );
    // And it names the cause when the body is wrong too.
    let p = S::verified().live(
        A,
        &fresh(route(ProbeVerdict::WrongAnswer, Some(V1)), readback(V2)),
    );
    assert_eq!(
        verdict(&p),
        (Verdict::Failed, Some(ReasonCode::RouteIdentityMismatch))
    );
}

#[test]
fn could_not_read_and_read_another_digest_are_different_answers() {
    let unreadable = RouteObservation {
        artifact: Some(ArtifactRead::Unreadable),
        ..readback(V2)
    };
    let p = S::verified().live(A, &fresh(RouteObservation::passing(V2), unreadable));
    assert_eq!(
        verdict(&p),
        (
            Verdict::PartiallyVerified,
            Some(ReasonCode::DigestUnreadable)
        )
    );
    assert_eq!(item(&p, "artifact digest").ok, None);
    let other = readback(V1);
    let p = S::verified().live(A, &fresh(RouteObservation::passing(V2), other));
    assert_eq!(
        verdict(&p),
        (Verdict::Failed, Some(ReasonCode::DigestMismatch))
    );
    assert_eq!(item(&p, "artifact digest").ok, Some(false));
}

#[test]
fn an_altered_app_file_is_app_file_mismatch() {
    let altered = RouteObservation {
        artifact: Some(ArtifactRead::AppFileAltered(V2)),
        ..readback(V2)
    };
    let p = S::verified().live(
        A,
        &fresh(route(ProbeVerdict::WrongAnswer, Some(V2)), altered),
    );
    assert_eq!(
        verdict(&p),
        (Verdict::Failed, Some(ReasonCode::AppFileMismatch))
    );
}

#[test]
fn restart_loop_and_process_looks() {
    let looping = RouteObservation {
        process_restarts: Some(model::evidence::PROCESS_RESTARTS_MAX + 1),
        ..readback(V2)
    };
    let p = S::verified().live(A, &fresh(RouteObservation::passing(V2), looping));
    assert_eq!(
        verdict(&p),
        (Verdict::Failed, Some(ReasonCode::RestartLoop))
    );
    // A dead-looking process behind a route that answers rightly is shown,
    // never judged on (S11).
    let dead = RouteObservation {
        process_healthy: false,
        ..readback(V2)
    };
    let p = S::verified().live(A, &fresh(RouteObservation::passing(V2), dead));
    assert_eq!(verdict(&p), (Verdict::Verified, None));
    assert_eq!(
        item(&p, "process").reason,
        Some(ReasonCode::ProcessUnhealthy)
    );
}

#[test]
fn probe_answers_wrong_error_status_and_none() {
    let cases = [
        (
            route(ProbeVerdict::WrongAnswer, Some(V2)),
            Verdict::Failed,
            ReasonCode::ProbeWrongAnswer,
        ),
        (
            route(ProbeVerdict::Unreachable, Some(V2)),
            Verdict::Failed,
            ReasonCode::ProbeNon2xx,
        ),
        (
            route(ProbeVerdict::Unreachable, None),
            Verdict::PartiallyVerified,
            ReasonCode::ProbeUnreachable,
        ),
        (
            route(ProbeVerdict::Pass, None),
            Verdict::PartiallyVerified,
            ReasonCode::DigestUnreadable,
        ),
    ];
    for (observed, want, reason) in cases {
        let p = S::verified().live(A, &fresh(observed, readback(V2)));
        assert_eq!(verdict(&p), (want, Some(reason)), "{observed}: {p:#?}");
    }
}

#[test]
fn an_agent_that_does_not_answer_is_readback_unavailable_never_an_old_value() {
    let f = Fresh {
        route: RouteObservation::passing(V2),
        route_at_ms: NOW_MS,
        agent: Err("the agent is not connected".into()),
        isolation: None,
        older: None,
        configuration: None,
    };
    let p = S::verified().live(A, &f);
    assert_eq!(
        verdict(&p),
        (
            Verdict::PartiallyVerified,
            Some(ReasonCode::ReadbackUnavailable)
        )
    );
    let artifact = item(&p, "artifact digest");
    assert_eq!(artifact.ok, None);
    assert!(
        artifact
            .observed
            .as_deref()
            .is_some_and(|o| o.contains("not connected")),
        "{artifact:?}"
    );
    // The recorded switch report's numbers are not shown as current.
    assert!(!item(&p, "process")
        .observed
        .as_deref()
        .unwrap_or_default()
        .contains("up "));
    // Neither route nor agent: unverified is never claimed verified.
    let f = Fresh {
        route: route(ProbeVerdict::Unreachable, None),
        ..f
    };
    assert_ne!(S::verified().live(A, &f).verdict, Verdict::Verified);
}

#[test]
fn op_states_give_their_reasons() {
    let unknown = S::new()
        .start(V2, vec![])
        .input(Input::Timeout { op: OpId(0) });
    let any = fresh(RouteObservation::passing(V2), readback(V2));
    assert_eq!(
        verdict(&unknown.live(A, &any)),
        (Verdict::Unverified, Some(ReasonCode::OpUnknown))
    );
    let granted = S::new().start(V2, vec![B]);
    assert_eq!(
        verdict(&granted.recorded(A)),
        (Verdict::Unverified, Some(ReasonCode::OpNotSettled))
    );
    assert_eq!(
        verdict(&granted.recorded(B)),
        (Verdict::Unverified, Some(ReasonCode::OpNotGranted))
    );
    assert_eq!(
        verdict(&S::new().recorded(A)),
        (Verdict::Unverified, Some(ReasonCode::NotInRollout))
    );
    let abandoned = S::new().start(V2, vec![]).input(Input::Resolve {
        op: OpId(0),
        observation: route(ProbeVerdict::Unreachable, None),
        resolution: Resolution::Abandon,
    });
    assert_eq!(
        verdict(&abandoned.live(A, &any)),
        (Verdict::Unverified, Some(ReasonCode::Abandoned))
    );
}

#[test]
fn an_op_settled_without_evidence_has_no_evidence() {
    let mut s = S::verified();
    s.0.ops[&model::OpId(0)].evidence.clear();
    assert_eq!(
        verdict(&s.recorded(A)),
        (Verdict::Unverified, Some(ReasonCode::NoEvidence))
    );
}

#[test]
fn a_node_not_granted_yet_serving_the_old_release_is_stale() {
    // r0 verified v2 on A; r1 (v3, canary A then B) has not reached B.
    let s = S::new()
        .start(V2, vec![])
        .commit(0)
        .report(0, ReportKind::Switched, RouteObservation::passing(V2))
        .start(V3, vec![B]);
    assert!(s.0.rollout_op_for(RolloutId(1), B).is_none());
    let p = s.live(B, &fresh(RouteObservation::passing(V1), readback(V1)));
    assert_eq!(
        verdict(&p),
        (Verdict::Stale, Some(ReasonCode::SupersededOp))
    );
    // Nothing answers: not enough to call it stale.
    let down = route(ProbeVerdict::Unreachable, None);
    let p = s.live(B, &fresh(down, down));
    assert_eq!(
        verdict(&p),
        (Verdict::Unverified, Some(ReasonCode::OpNotGranted))
    );
}

#[test]
fn a_rollback_without_a_failed_cause_is_stale_and_one_with_a_cause_is_failed() {
    let rolled = S::new()
        .start(V2, vec![])
        .commit(0)
        .input(Input::RollBack { op: OpId(0) })
        .report(0, ReportKind::Restored, RouteObservation::passing(V1));
    let p = rolled.live(A, &fresh(RouteObservation::passing(V1), readback(V1)));
    assert_eq!(verdict(&p), (Verdict::Stale, Some(ReasonCode::RolledBack)));
    // The canary answered wrongly, was restored, then its restored app was
    // killed: the cause is still the wrong answer, not what serves now.
    let mut s = S::new()
        .start(V2, vec![])
        .commit(0)
        .report(
            0,
            ReportKind::Switched,
            route(ProbeVerdict::WrongAnswer, Some(V2)),
        )
        .report(0, ReportKind::Restored, RouteObservation::passing(V1));
    for restarts in 1..=4 {
        s = s.report(
            0,
            ReportKind::Restored,
            RouteObservation {
                process_restarts: Some(restarts),
                ..route(ProbeVerdict::Unreachable, None)
            },
        );
    }
    let down = route(ProbeVerdict::Unreachable, None);
    let p = s.live(A, &fresh(down, down));
    assert_eq!(
        verdict(&p),
        (Verdict::Failed, Some(ReasonCode::ProbeWrongAnswer))
    );
    assert_eq!(
        item(&p, "new release before rollback").reason,
        Some(ReasonCode::ProbeWrongAnswer)
    );
}

#[test]
fn an_aborted_op_whose_baseline_serves_is_stale_not_applied() {
    let s = S::new().start(V2, vec![]).start(V3, vec![B]).report(
        0,
        ReportKind::NotApplied,
        RouteObservation::passing(V1),
    );
    // op0's rollout finished and node-a has a newer op: it is archived.
    assert_eq!(
        s.0.op_summary(model::OpId(0)).and_then(|o| o.outcome),
        Some(Outcome::NotApplied),
    );
    // r0's proof of node-a: the op is archived (its evidence stays in the
    // log), and what serves is judged against r1's newer op: superseded.
    let p = proof_of_rollout(&s, RolloutId(0), A);
    assert_eq!(
        verdict(&p),
        (Verdict::Stale, Some(ReasonCode::SupersededOp))
    );
    // The newest rollout's proof still names the aborted op's outcome.
    let p = proof_of_rollout(&s, RolloutId(1), A);
    assert_ne!(verdict(&p).0, Verdict::Verified);
}

fn proof_of_rollout(s: &S, r: RolloutId, node: NodeId) -> NodeProof {
    let f = fresh(RouteObservation::passing(V1), readback(V1));
    rollout_proof(&s.0, r, &|n| n.to_string(), &|_| Some(f.clone()))
        .expect("rollout")
        .nodes
        .into_iter()
        .find(|p| p.node == node.to_string())
        .expect("node")
}

#[test]
fn a_recorded_drift_is_judged_by_a_cached_proof_labelled_recorded() {
    let seen = RouteObservation {
        artifact: Some(ArtifactRead::AppFileAltered(V2)),
        ..route(ProbeVerdict::WrongAnswer, Some(V2))
    };
    let s = S::verified().input(Input::Observe {
        node: A,
        observation: seen,
        source: ObservationSource::ReadBack,
        now_ms: NOW_MS,
    });
    let p = s.recorded(A);
    assert_eq!(p.mode, ProofMode::Recorded);
    assert!(p.drifted);
    assert_eq!(
        verdict(&p),
        (Verdict::Failed, Some(ReasonCode::AppFileMismatch))
    );
    assert!(p.checks.iter().all(|c| c.observed_at_ms == Some(NOW_MS)));
    // Before the observation the cached proof was the settlement's memory.
    let p = S::verified().recorded(A);
    assert_eq!(verdict(&p), (Verdict::Verified, None));
    assert!(p.checks.iter().all(|c| c.observed_at_ms.is_none()));
}

#[test]
fn the_probe_verdict_judges_identity() {
    use RouteJudgement as J;
    let cases = [
        (RouteObservation::passing(V2), J::Pass),
        (RouteObservation::passing(V1), J::WrongIdentity),
        (route(ProbeVerdict::Pass, None), J::NoIdentity),
        (route(ProbeVerdict::WrongAnswer, Some(V2)), J::WrongAnswer),
        (route(ProbeVerdict::Unreachable, Some(V2)), J::Non2xx),
        (route(ProbeVerdict::Unreachable, None), J::Unreachable),
    ];
    for (o, want) in cases {
        assert_eq!(judge_route(&o, V2), want, "{o}");
        assert_eq!(want.passed(), want == J::Pass);
    }
}

#[test]
fn every_reason_code_has_one_wording_matching_its_serialization() {
    for r in ReasonCode::ALL {
        let json = serde_json::to_value(r).expect("serializes");
        assert_eq!(json.as_str(), Some(r.as_str()));
        assert_eq!(r.to_string(), r.as_str());
    }
}

#[test]
fn a_stand_in_answering_as_the_intended_release_over_a_rolled_back_node_is_failed() {
    let rolled = S::new()
        .start(V2, vec![])
        .commit(0)
        .input(Input::RollBack { op: OpId(0) })
        .report(0, ReportKind::Restored, RouteObservation::passing(V1));
    // The route answers as v2 (the intent) while the disk holds v1.
    let p = rolled.live(A, &fresh(RouteObservation::passing(V2), readback(V1)));
    assert_eq!(
        verdict(&p),
        (Verdict::Failed, Some(ReasonCode::DigestMismatch)),
        "{p:#?}"
    );
}

/// The process row says what confines the app, as the agent applied it
/// (issue #24 item 4), and says nothing of limits when none were read.
#[test]
fn the_process_row_names_the_limits_the_agent_applied() {
    let mut f = fresh(RouteObservation::passing(V2), RouteObservation::passing(V2));
    let plain = S::verified().live(A, &f);
    let observed = item(&plain, "process").observed.clone().unwrap_or_default();
    assert!(!observed.contains("limits"), "{observed}");
    f.isolation = Some("memory 64 MiB (cgroup v1 memory.limit_in_bytes)".into());
    let limited = S::verified().live(A, &f);
    let observed = item(&limited, "process")
        .observed
        .clone()
        .unwrap_or_default();
    assert!(
        observed.ends_with("; limits: memory 64 MiB (cgroup v1 memory.limit_in_bytes)"),
        "{observed}"
    );
    assert_eq!(
        limited.verdict, plain.verdict,
        "limits are stated, not judged"
    );
}

/// v1's signed app runs behind v2's route (issue #24 item 1, seed 003): the
/// route's proxy stamps v2, the answer is v1's, the agent reads the app
/// file back as v1's.
fn v1_swapped_in() -> (RouteObservation, RouteObservation) {
    let route_seen = route(ProbeVerdict::WrongAnswer, Some(V2));
    let agent_seen = RouteObservation {
        artifact: Some(ArtifactRead::AppFileOf {
            installed: V2,
            release: V1,
        }),
        ..readback(V2)
    };
    (route_seen, agent_seen)
}

/// The controller knows `release` as version `1.0.0`, and the route's
/// answer judged by its own spec is `answer`.
fn known(release: Digest, answer: ProbeVerdict) -> Option<KnownRelease> {
    Some(KnownRelease {
        release,
        version: "1.0.0".into(),
        answer,
    })
}

#[test]
fn a_healthy_older_release_swapped_in_is_stale_naming_it() {
    let (route_seen, agent_seen) = v1_swapped_in();
    let f = Fresh {
        older: known(V1, ProbeVerdict::Pass),
        configuration: None,
        ..fresh(route_seen, agent_seen)
    };
    let p = S::verified().live(A, &f);
    assert_eq!(
        verdict(&p),
        (Verdict::Stale, Some(ReasonCode::OlderReleaseServing)),
        "{p:#?}"
    );
    assert!(
        p.summary.ends_with("; 1.0.0 (v1) serves in its place"),
        "{}",
        p.summary
    );
    // The checks against the intent stay what they read.
    let artifact = item(&p, "artifact digest");
    assert_eq!(artifact.ok, Some(false));
    assert_eq!(artifact.reason, Some(ReasonCode::AppFileMismatch));
    assert_eq!(
        artifact.observed.as_deref(),
        Some(
            format!(
                "{} with the app file of {} (1.0.0)",
                V2.to_hex(),
                V1.to_hex()
            )
            .as_str()
        )
    );
    assert_eq!(
        item(&p, "health probe").reason,
        Some(ReasonCode::ProbeWrongAnswer)
    );
    // Stale ranks above failed for the rollout: what serves is healthy.
    let rollout = rollout_proof(&S::verified().0, RolloutId(0), &|n| n.to_string(), &|_| {
        Some(f.clone())
    })
    .expect("r0");
    assert_eq!(rollout.verdict, Verdict::Stale);
}

#[test]
fn an_older_release_read_back_whole_is_stale_naming_it() {
    // v1's whole release behind the route: the agent's route serves v1 and
    // its bundle reads back as v1; v2's spec calls v1's answer wrong.
    let f = Fresh {
        older: known(V1, ProbeVerdict::Pass),
        configuration: None,
        ..fresh(route(ProbeVerdict::WrongAnswer, Some(V1)), readback(V1))
    };
    let p = S::verified().live(A, &f);
    assert_eq!(
        verdict(&p),
        (Verdict::Stale, Some(ReasonCode::OlderReleaseServing)),
        "{p:#?}"
    );
    // Not known to the controller: the route identity mismatch, as before.
    let f = Fresh { older: None, ..f };
    assert_eq!(
        verdict(&S::verified().live(A, &f)),
        (Verdict::Failed, Some(ReasonCode::RouteIdentityMismatch))
    );
}

#[test]
fn an_unknown_broken_or_newer_release_stays_failed_as_before() {
    let (route_seen, agent_seen) = v1_swapped_in();
    let swapped = fresh(route_seen, agent_seen);
    let failed = (Verdict::Failed, Some(ReasonCode::AppFileMismatch));
    // The controller does not hold the release the app file is.
    assert_eq!(verdict(&S::verified().live(A, &swapped)), failed);
    // It does, but v1 answers wrongly by its own spec: not healthy.
    let wrong = Fresh {
        older: known(V1, ProbeVerdict::WrongAnswer),
        configuration: None,
        ..swapped.clone()
    };
    assert_eq!(verdict(&S::verified().live(A, &wrong)), failed);
    // A release the node never had (v3 was never granted to it).
    let v3 = Fresh {
        agent: Ok((
            RouteObservation {
                artifact: Some(ArtifactRead::AppFileOf {
                    installed: V2,
                    release: V3,
                }),
                ..readback(V2)
            },
            NOW_MS + 5,
        )),
        older: known(V3, ProbeVerdict::Pass),
        configuration: None,
        ..swapped.clone()
    };
    assert_eq!(verdict(&S::verified().live(A, &v3)), failed);
    // What the controller knows does not match what the agent read.
    let mismatched = Fresh {
        older: known(V3, ProbeVerdict::Pass),
        configuration: None,
        ..swapped.clone()
    };
    assert_eq!(verdict(&S::verified().live(A, &mismatched)), failed);
    // An altered app file that is no release's, whatever is known.
    let altered = Fresh {
        agent: Ok((
            RouteObservation {
                artifact: Some(ArtifactRead::AppFileAltered(V2)),
                ..readback(V2)
            },
            NOW_MS + 5,
        )),
        older: known(V1, ProbeVerdict::Pass),
        configuration: None,
        ..swapped.clone()
    };
    assert_eq!(verdict(&S::verified().live(A, &altered)), failed);
    // v1 in a restart loop is not a healthy workload.
    let looping = Fresh {
        agent: Ok((
            RouteObservation {
                process_restarts: Some(model::evidence::PROCESS_RESTARTS_MAX + 1),
                ..v1_swapped_in().1
            },
            NOW_MS + 5,
        )),
        older: known(V1, ProbeVerdict::Pass),
        configuration: None,
        ..swapped.clone()
    };
    let p = S::verified().live(A, &looping);
    assert_eq!(verdict(&p), failed);
    assert_eq!(item(&p, "process").reason, Some(ReasonCode::RestartLoop));
    // The route answers as a third release: not v1 serving.
    let foreign = Fresh {
        route: route(ProbeVerdict::WrongAnswer, Some(V3)),
        older: known(V1, ProbeVerdict::Pass),
        configuration: None,
        ..swapped
    };
    assert_eq!(
        verdict(&S::verified().live(A, &foreign)),
        (Verdict::Failed, Some(ReasonCode::RouteIdentityMismatch))
    );
}

#[test]
fn an_older_release_behind_an_op_in_flight_is_left_to_the_op() {
    // op0 switched and waits for its settling probe: its evidence decides.
    let switching = S::new().start(V2, vec![]).commit(0);
    assert!(switching.0.ops[&OpId(0)].occupies_slot());
    let (route_seen, agent_seen) = v1_swapped_in();
    let f = Fresh {
        older: known(V1, ProbeVerdict::Pass),
        configuration: None,
        ..fresh(route_seen, agent_seen)
    };
    assert_ne!(switching.live(A, &f).verdict, Verdict::Stale);
}

#[test]
fn a_recorded_older_release_stays_failed_having_no_answer_judged_as_it() {
    let (route_seen, agent_seen) = v1_swapped_in();
    let (seen, source) = merge_readback(&fresh(route_seen, agent_seen));
    let s = S::verified().input(Input::Observe {
        node: A,
        observation: seen,
        source,
        now_ms: NOW_MS,
    });
    let p = s.recorded(A);
    assert!(p.drifted);
    assert_eq!(
        verdict(&p),
        (Verdict::Failed, Some(ReasonCode::AppFileMismatch))
    );
}

#[test]
fn an_older_release_of_an_earlier_rollout_counts_as_had_before() {
    // r0 put v2 on A, r1 put v3 on A over it.
    let s = S::verified().start(V3, vec![]).commit(1).report(
        1,
        ReportKind::Switched,
        RouteObservation::passing(V3),
    );
    let app_of = |release: Digest| Fresh {
        route: route(ProbeVerdict::WrongAnswer, Some(V3)),
        route_at_ms: NOW_MS,
        agent: Ok((
            RouteObservation {
                artifact: Some(ArtifactRead::AppFileOf {
                    installed: V3,
                    release,
                }),
                ..readback(V3)
            },
            NOW_MS + 5,
        )),
        isolation: None,
        older: known(release, ProbeVerdict::Pass),
        configuration: None,
    };
    assert_eq!(
        verdict(&s.live(A, &app_of(V2))),
        (Verdict::Stale, Some(ReasonCode::OlderReleaseServing))
    );
    // v1 served before r0 (op0's baseline), but op0 is archived now and an
    // archived op keeps no baseline: the state no longer names v1 for A,
    // so it is judged as an unknown release.
    assert!(s.0.op(OpId(0)).is_none(), "op0 is archived");
    assert_eq!(
        verdict(&s.live(A, &app_of(V1))),
        (Verdict::Failed, Some(ReasonCode::AppFileMismatch))
    );
}

/// The fingerprint of the configuration the tests' rollout deploys, and
/// the old one a hand restart brings back.
const FINGERPRINT: Digest = Digest::repeat(41);
const OLD_FINGERPRINT: Digest = Digest::repeat(40);

impl S {
    /// Canary A verified on deployment V2 (code V1 with revision 1 of app
    /// `hello`, fingerprint [`FINGERPRINT`]).
    fn verified_configured() -> Self {
        let revision = model::config::ConfigRevision {
            app: "hello".into(),
            revision: 1,
            fingerprint: FINGERPRINT,
            env: vec![(
                "LEVEL".into(),
                model::config::LoggedValue::Plain("3".into()),
            )],
            files: vec![],
        };
        S::new()
            .input(Input::SetConfig { revision })
            .input(Input::StartStaged {
                plan: Plan {
                    release: V2,
                    canary: A,
                    followers: vec![],
                    slots_max: 1,
                    approval_after_canary: false,
                },
                policy: model::plan::Policy::default(),
                arches: model::platform::ReleaseArches::Any,
                deploys: Some(model::config::Deploys {
                    code: V1,
                    app: "hello".into(),
                    revision: 1,
                    fingerprint: FINGERPRINT,
                }),
            })
            .commit(0)
            .report(0, ReportKind::Switched, RouteObservation::passing(V2))
    }
}

fn configured(read: Option<Option<Digest>>) -> Fresh {
    Fresh {
        configuration: read,
        ..fresh(RouteObservation::passing(V2), readback(V2))
    }
}

#[test]
fn a_configured_deployment_is_verified_only_with_its_fingerprint_read_back() {
    let s = S::verified_configured();
    let p = s.live(A, &configured(Some(Some(FINGERPRINT))));
    assert_eq!(verdict(&p), (Verdict::Verified, None), "{p:#?}");
    let row = item(&p, "configuration");
    assert_eq!(row.expected, Some(FINGERPRINT.to_hex()));
    assert_eq!(row.observed, Some(FINGERPRINT.to_hex()));
    assert_eq!((row.ok, row.origin), (Some(true), Origin::AgentReadBack));
    // A code-only rollout has no such row.
    let plain = S::verified().live(A, &fresh(RouteObservation::passing(V2), readback(V2)));
    assert!(plain.checks.iter().all(|c| c.item != "configuration"));
}

#[test]
fn a_process_started_with_the_old_configuration_is_stale_naming_it() {
    let s = S::verified_configured();
    let p = s.live(A, &configured(Some(Some(OLD_FINGERPRINT))));
    assert_eq!(
        verdict(&p),
        (
            Verdict::Stale,
            Some(ReasonCode::ConfigurationFingerprintMismatch)
        ),
        "{p:#?}"
    );
    let row = item(&p, "configuration");
    assert_eq!(row.observed, Some(OLD_FINGERPRINT.to_hex()));
    assert_eq!(row.ok, Some(false));
    // A route serving no configured deployment at all: the same mismatch.
    let none = s.live(A, &configured(None));
    assert_eq!(
        none.reason,
        Some(ReasonCode::ConfigurationFingerprintMismatch)
    );
    // Another contradiction wins: a wrong answer with an old configuration
    // is failed, not stale.
    let wrong = Fresh {
        route: route(ProbeVerdict::WrongAnswer, Some(V2)),
        ..configured(Some(Some(OLD_FINGERPRINT)))
    };
    assert_eq!(
        verdict(&s.live(A, &wrong)),
        (Verdict::Failed, Some(ReasonCode::ProbeWrongAnswer))
    );
}

#[test]
fn a_configuration_that_cannot_be_read_is_never_verified() {
    let s = S::verified_configured();
    let p = s.live(A, &configured(Some(None)));
    assert_eq!(
        verdict(&p),
        (
            Verdict::PartiallyVerified,
            Some(ReasonCode::ConfigurationUnreadable)
        ),
        "{p:#?}"
    );
    let silent = Fresh {
        agent: Err("the agent is not connected".into()),
        ..configured(None)
    };
    let p = s.live(A, &silent);
    assert_eq!(item(&p, "configuration").ok, None);
    assert_ne!(p.verdict, Verdict::Verified);
    // A recorded proof keeps no configuration readback: no row.
    assert!(s
        .recorded(A)
        .checks
        .iter()
        .all(|c| c.item != "configuration"));
}
