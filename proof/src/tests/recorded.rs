//! The proof verdicts of recorded states (states folded from events, as
//! a log replay builds them): moved here from `api::view::report`'s tests
//! so that verdicts are tested once, in `proof` (issue #22 item 5).

use crate::*;
use model::controller::{apply, ControllerState, Event, Outcome, Resolution, UnknownReason};
use model::{
    ArtifactRead, Decision, Digest, Generation, NodeId, OpId, Plan, ProbeVerdict, ReportKind,
    RolloutId, RouteObservation,
};

const V1: Digest = Digest::repeat(1);
const V2: Digest = Digest::repeat(2);
const V3: Digest = Digest::repeat(3);
const A: NodeId = NodeId(0);
const B: NodeId = NodeId(1);

fn name(n: NodeId) -> String {
    n.to_string()
}

fn obs(verdict: ProbeVerdict, identity: Option<Digest>, process_healthy: bool) -> RouteObservation {
    RouteObservation::new(verdict, identity, process_healthy)
}

/// Builds a state by folding events, like a log replay.
struct S(ControllerState);

impl S {
    fn new() -> Self {
        S(ControllerState::default())
    }
    fn ev(mut self, e: Event) -> Self {
        apply(&mut self.0, &e);
        self
    }
    fn start(self, rollout: u32, release: Digest, followers: Vec<NodeId>, approval: bool) -> Self {
        self.ev(Event::RolloutStarted {
            rollout: RolloutId(rollout),
            plan: Plan {
                release,
                canary: A,
                followers,
                slots_max: 1,
                approval_after_canary: approval,
            },
            generation: Generation(rollout as u64 + 1),
        })
    }
    fn grant(self, op: u32, rollout: u32, node: NodeId, release: Digest) -> Self {
        self.ev(Event::OpGranted {
            op: OpId(op),
            rollout: RolloutId(rollout),
            node,
            release,
            generation: Generation(rollout as u64 + 1),
            baseline: Some(V1),
            is_canary: node == A,
        })
    }
    fn decide(self, op: u32, decision: Decision) -> Self {
        self.ev(Event::CommitDecided {
            op: OpId(op),
            decision,
        })
    }
    fn report(self, op: u32, kind: ReportKind, observation: RouteObservation) -> Self {
        self.ev(Event::ReportRecorded {
            op: OpId(op),
            kind,
            observation,
        })
    }
    fn probe(self, op: u32, observation: RouteObservation) -> Self {
        self.ev(Event::ProbeRecorded {
            op: OpId(op),
            observation,
        })
    }
    fn settle(self, op: u32, outcome: Outcome) -> Self {
        self.ev(Event::OpSettled {
            op: OpId(op),
            outcome,
        })
    }
    fn switched(self, op: u32, observation: RouteObservation) -> Self {
        self.decide(op, Decision::Commit)
            .report(op, ReportKind::Switched, observation)
    }
    fn proof(&self, node: NodeId) -> NodeProof {
        recorded_node_proof(&self.0, node, &name(node))
    }
}

fn canary_switched(observation: RouteObservation) -> S {
    S::new()
        .start(0, V2, vec![], false)
        .grant(0, 0, A, V2)
        .switched(0, observation)
}

fn verified() -> S {
    canary_switched(RouteObservation::passing(V2)).settle(0, Outcome::Verified)
}

fn item<'a>(p: &'a NodeProof, item: &str) -> &'a EvidenceCheck {
    p.checks.iter().find(|c| c.item == item).expect(item)
}

/// What an agent reports: the route's answer plus its supervisor's
/// numbers for the process.
fn agent_obs(release: Digest, uptime_ms: u64, restarts: u32) -> RouteObservation {
    RouteObservation {
        process_uptime_ms: Some(uptime_ms),
        process_restarts: Some(restarts),
        artifact: None,
        ..RouteObservation::passing(release)
    }
}

#[test]
fn proof_shows_the_process_uptime_and_restart_count() {
    let s = canary_switched(agent_obs(V2, 12_345, 0)).settle(0, Outcome::Verified);
    let p = s.proof(A);
    assert_eq!((p.verdict, p.reason), (Verdict::Verified, None), "{p:#?}");
    let c = item(&p, "process");
    assert_eq!(c.expected.as_deref(), Some("running, at most 3 restarts"));
    assert_eq!(c.observed.as_deref(), Some("running, up 12 s, 0 restarts"));
    assert_eq!((c.ok, c.reason), (Some(true), None));

    // At the supervisor's bound is not a loop yet.
    let p = canary_switched(agent_obs(V2, 61_000, 3))
        .settle(0, Outcome::Verified)
        .proof(A);
    let c = item(&p, "process");
    assert_eq!(
        c.observed.as_deref(),
        Some("running, up 1 min 1 s, 3 restarts")
    );
    assert_eq!((c.ok, p.verdict), (Some(true), Verdict::Verified));

    // A dead process shows no uptime, only its restarts.
    let down = RouteObservation {
        verdict: ProbeVerdict::Unreachable,
        identity: None,
        process_healthy: false,
        process_uptime_ms: Some(0),
        process_restarts: Some(1),
        artifact: None,
    };
    let p = canary_switched(down).proof(A);
    assert_eq!(
        item(&p, "process").observed.as_deref(),
        Some("down, 1 restart")
    );
}

#[test]
fn a_restart_count_above_the_bound_is_a_restart_loop() {
    // The route passes and identifies v2, yet the supervisor had to
    // restart the process more often than its bound allows.
    let over = model::evidence::PROCESS_RESTARTS_MAX + 1;
    let s = canary_switched(agent_obs(V2, 2_000, over)).settle(0, Outcome::Verified);
    let p = s.proof(A);
    let c = item(&p, "process");
    assert_eq!(
        (c.ok, c.reason),
        (Some(false), Some(ReasonCode::RestartLoop))
    );
    assert_eq!(c.observed.as_deref(), Some("running, up 2 s, 4 restarts"));
    assert_eq!(
        (p.verdict, p.reason),
        (Verdict::Failed, Some(ReasonCode::RestartLoop))
    );
    assert_eq!(
        ReasonCode::RestartLoop.as_str(),
        "restart_loop",
        "the code operators read"
    );
}

#[test]
fn a_controller_probe_shows_the_agents_last_process_numbers_as_earlier() {
    // The agent reported its numbers; the controller's own probe (which
    // cannot see the process) came later and is the latest observation.
    let later = RouteObservation::new(ProbeVerdict::Pass, Some(V2), true);
    let s = canary_switched(agent_obs(V2, 5_000, 1))
        .probe(0, later)
        .settle(0, Outcome::Verified);
    let p = s.proof(A);
    assert_eq!(p.verdict, Verdict::Verified);
    let c = item(&p, "process");
    assert_eq!(
        c.observed.as_deref(),
        Some("running, up 5 s, 1 restart (uptime and restarts as of an earlier observation)")
    );
    // The earlier count still counts for a restart loop.
    let s = canary_switched(agent_obs(V2, 5_000, 9))
        .probe(0, later)
        .settle(0, Outcome::Verified);
    assert_eq!(
        item(&s.proof(A), "process").reason,
        Some(ReasonCode::RestartLoop)
    );
}

#[test]
fn unobserved_process_numbers_are_said_and_do_not_change_the_verdict() {
    // No observation of the op saw the process (operator or controller
    // only): shown as not observed; the route alone proves serving.
    let p = verified().proof(A);
    let c = item(&p, "process");
    assert_eq!(
        c.observed.as_deref(),
        Some("running, uptime and restarts not observed")
    );
    assert_eq!((c.ok, p.verdict), (Some(true), Verdict::Verified));
    assert_eq!(
        observation_process_text(&RouteObservation::new(ProbeVerdict::Pass, None, true)),
        "running, uptime and restarts not observed"
    );
    assert_eq!(
        observation_process_text(&agent_obs(V2, 3 * 3_600_000 + 120_000, 0)),
        "running, up 3 h 2 min, 0 restarts"
    );
    assert_eq!(view_uptime_text(850), "850 ms");
    assert_eq!(view_uptime_text(2 * 86_400_000 + 3_600_000), "2 d 1 h");
}

#[test]
fn verified_when_every_item_matches() {
    let p = verified().proof(A);
    assert_eq!(p.verdict, Verdict::Verified, "{p:#?}");
    assert_eq!(p.reason, None);
    assert_eq!(p.op.as_deref(), Some("op0"));
    assert_eq!(p.intended_release, Some(V2.to_hex()));
    assert_eq!(p.checks.len(), 4);
    assert!(p
        .checks
        .iter()
        .all(|c| c.ok == Some(true) && c.reason.is_none()));
    assert!(
        p.summary.starts_with("node-a: verified for v2"),
        "{}",
        p.summary
    );
}

#[test]
fn partially_verified_when_the_artifact_claim_cannot_be_read() {
    // Settled by the controller's own probe: no agent report, so nothing
    // says which artifact the agent put in place.
    let s = S::new()
        .start(0, V2, vec![], false)
        .grant(0, 0, A, V2)
        .decide(0, Decision::Commit)
        .probe(0, RouteObservation::passing(V2))
        .settle(0, Outcome::Verified);
    let p = s.proof(A);
    assert_eq!(p.verdict, Verdict::PartiallyVerified, "{p:#?}");
    assert_eq!(p.reason, Some(ReasonCode::DigestUnreadable));
    let c = item(&p, "artifact digest");
    assert_eq!((c.ok, c.observed.as_ref()), (None, None));
    assert!(p.summary.contains("could not read: artifact digest"));
}

#[test]
fn process_looks_are_informational_when_the_route_proves_serving() {
    let s = canary_switched(obs(ProbeVerdict::Pass, Some(V2), false)).settle(0, Outcome::Verified);
    let p = s.proof(A);
    assert_eq!(p.verdict, Verdict::Verified);
    let c = item(&p, "process");
    assert_eq!(c.ok, Some(false));
    assert_eq!(c.reason, Some(ReasonCode::ProcessUnhealthy));
}

#[test]
fn unverified_without_evidence_or_settlement() {
    let granted = S::new().start(0, V2, vec![], false).grant(0, 0, A, V2);
    let p = granted.proof(A);
    assert_eq!(p.verdict, Verdict::Unverified);
    assert_eq!(p.reason, Some(ReasonCode::OpNotSettled));
    assert!(p.checks.is_empty());

    // Passing evidence, but the op has not settled yet.
    let p = canary_switched(RouteObservation::passing(V2)).proof(A);
    assert_eq!(p.verdict, Verdict::Unverified);
    assert_eq!(p.reason, Some(ReasonCode::OpNotSettled));

    // Settled, but its evidence is gone from state (an odd log): no evidence.
    let mut s = verified();
    s.0.ops.get_mut(&OpId(0)).expect("op0").evidence.clear();
    let p = s.proof(A);
    assert_eq!(
        (p.verdict, p.reason),
        (Verdict::Unverified, Some(ReasonCode::NoEvidence))
    );
}

#[test]
fn unknown_op_is_unverified() {
    let s = canary_switched(RouteObservation::passing(V2)).ev(Event::OpUnknown {
        op: OpId(0),
        reason: UnknownReason::Silence,
    });
    let p = s.proof(A);
    assert_eq!(
        (p.verdict, p.reason),
        (Verdict::Unverified, Some(ReasonCode::OpUnknown))
    );
}

#[test]
fn node_in_no_rollout_is_unverified() {
    let p = verified().proof(NodeId(7));
    assert_eq!(
        (p.verdict, p.reason),
        (Verdict::Unverified, Some(ReasonCode::NotInRollout))
    );
    assert_eq!(p.intended_release, None);
}

#[test]
fn wrong_answer_fails_and_stays_failed_after_the_rollback() {
    let failing = canary_switched(obs(ProbeVerdict::WrongAnswer, Some(V2), true));
    let p = failing.proof(A);
    assert_eq!(
        (p.verdict, p.reason),
        (Verdict::Failed, Some(ReasonCode::ProbeWrongAnswer))
    );
    assert_eq!(item(&p, "health probe").ok, Some(false));
    assert_eq!(item(&p, "route identity").ok, Some(true));

    // Restore proven: v1 serves healthy while v2 was intended.
    let s = failing
        .ev(Event::RestoreRequested { op: OpId(0) })
        .report(0, ReportKind::Restored, RouteObservation::passing(V1))
        .settle(0, Outcome::RolledBack);
    let p = s.proof(A);
    assert_eq!(
        (p.verdict, p.reason),
        (Verdict::Failed, Some(ReasonCode::ProbeWrongAnswer))
    );
    let cause = item(&p, "new release before rollback");
    assert_eq!(
        (cause.ok, cause.reason),
        (Some(false), Some(ReasonCode::ProbeWrongAnswer))
    );
    assert_eq!(item(&p, "health probe").ok, Some(true), "v1 answers now");
    let c = item(&p, "artifact digest");
    assert_eq!(
        (c.ok, c.reason),
        (Some(false), Some(ReasonCode::DigestMismatch))
    );
    assert_eq!(c.observed, Some(V1.to_hex()));
    assert_eq!(
        item(&p, "route identity").reason,
        Some(ReasonCode::RouteIdentityMismatch)
    );
}

#[test]
fn restart_loop_then_rollback_is_failed_restart_loop() {
    // v2 never stayed up: the switch report saw no answer and a dead
    // process; the baseline was restored and proven.
    let s = canary_switched(obs(ProbeVerdict::Unreachable, None, false))
        .ev(Event::RestoreRequested { op: OpId(0) })
        .report(0, ReportKind::Restored, RouteObservation::passing(V1))
        .settle(0, Outcome::RolledBack);
    let p = s.proof(A);
    assert_eq!(
        (p.verdict, p.reason),
        (Verdict::Failed, Some(ReasonCode::RestartLoop))
    );
    let cause = item(&p, "new release before rollback");
    assert_eq!(cause.reason, Some(ReasonCode::RestartLoop));
    assert!(p.summary.contains("restart_loop"), "{}", p.summary);
    // The node's own proof judges the same intent (its latest rollout).
    assert_eq!(item(&p, "route identity").observed, Some(V1.to_hex()));
}

#[test]
fn operator_confirmed_baseline_is_stale_rolled_back() {
    let s = canary_switched(obs(ProbeVerdict::Unreachable, None, false))
        .ev(Event::OperatorObserved {
            op: OpId(0),
            observation: RouteObservation::passing(V1),
        })
        .settle(0, Outcome::Resolved(Resolution::ConfirmBaseline));
    let p = s.proof(A);
    assert_eq!(
        (p.verdict, p.reason),
        (Verdict::Stale, Some(ReasonCode::RolledBack))
    );
}

#[test]
fn aborted_op_is_stale_not_applied() {
    let s = S::new()
        .start(0, V2, vec![], false)
        .grant(0, 0, A, V2)
        .decide(0, Decision::Abort)
        .report(0, ReportKind::NotApplied, RouteObservation::passing(V1))
        .settle(0, Outcome::NotApplied);
    let p = s.proof(A);
    assert_eq!(
        (p.verdict, p.reason),
        (Verdict::Stale, Some(ReasonCode::NotApplied))
    );
}

#[test]
fn a_refused_release_is_stale_not_applied_and_says_why() {
    let s = S::new()
        .start(0, V2, vec![], false)
        .grant(0, 0, A, V2)
        .report(
            0,
            ReportKind::Refused(model::StageRefusal::BundleRejected),
            RouteObservation::passing(V1),
        )
        .settle(0, Outcome::NotApplied);
    let p = s.proof(A);
    assert_eq!(
        (p.verdict, p.reason),
        (Verdict::Stale, Some(ReasonCode::NotApplied))
    );
    assert!(
        p.summary.contains("refused the release: bundle rejected"),
        "{}",
        p.summary
    );
    assert_eq!(item(&p, "artifact digest").observed, Some(V1.to_hex()));
}

#[test]
fn the_read_back_artifact_beats_the_claim() {
    let with_artifact = |artifact| RouteObservation {
        artifact: Some(artifact),
        ..RouteObservation::passing(V2)
    };
    // The rules settle on the route (it proves v2 serving); the proof
    // also judges what is on disk. Read back as v2: verified.
    let p = canary_switched(with_artifact(ArtifactRead::Digest(V2)))
        .settle(0, Outcome::Verified)
        .proof(A);
    assert_eq!(p.verdict, Verdict::Verified);
    // The report claims v2 but the bytes on disk hash to something else:
    // read something else => failed, digest_mismatch.
    let p = canary_switched(with_artifact(ArtifactRead::Digest(V3)))
        .settle(0, Outcome::Verified)
        .proof(A);
    assert_eq!(
        (p.verdict, p.reason),
        (Verdict::Failed, Some(ReasonCode::DigestMismatch))
    );
    assert_eq!(item(&p, "artifact digest").observed, Some(V3.to_hex()));
    // Could not read it back: not a mismatch, a gap.
    let p = canary_switched(with_artifact(ArtifactRead::Unreadable))
        .settle(0, Outcome::Verified)
        .proof(A);
    assert_eq!(
        (p.verdict, p.reason),
        (
            Verdict::PartiallyVerified,
            Some(ReasonCode::DigestUnreadable)
        )
    );
    let c = item(&p, "artifact digest");
    assert_eq!((c.ok, c.observed.clone()), (None, None));
    // The bundle is v2 but the app file that runs from it is not the
    // one inside it: read something else, with its own code.
    let p = canary_switched(with_artifact(ArtifactRead::AppFileAltered(V2)))
        .settle(0, Outcome::Verified)
        .proof(A);
    assert_eq!(
        (p.verdict, p.reason),
        (Verdict::Failed, Some(ReasonCode::AppFileMismatch))
    );
    let c = item(&p, "artifact digest");
    assert_eq!((c.ok, c.observed.clone()), (Some(false), Some(V2.to_hex())));
}

#[test]
fn abandoned_op_is_unverified() {
    let s = canary_switched(obs(ProbeVerdict::Unreachable, None, true))
        .ev(Event::OperatorObserved {
            op: OpId(0),
            observation: obs(ProbeVerdict::Unreachable, None, true),
        })
        .settle(0, Outcome::Resolved(Resolution::Abandon));
    let p = s.proof(A);
    assert_eq!(
        (p.verdict, p.reason),
        (Verdict::Unverified, Some(ReasonCode::Abandoned))
    );
}

#[test]
fn could_not_read_the_digest_and_read_another_digest_differ() {
    // The route answered correctly but without an identity header.
    let unreadable =
        canary_switched(obs(ProbeVerdict::Pass, None, true)).settle(0, Outcome::Verified);
    let p = unreadable.proof(A);
    let c = item(&p, "route identity");
    assert_eq!((c.ok, c.reason), (None, Some(ReasonCode::DigestUnreadable)));
    assert_eq!(c.observed, None);
    // What could be read matches; the identity could not be read.
    assert_eq!(
        (p.verdict, p.reason),
        (
            Verdict::PartiallyVerified,
            Some(ReasonCode::DigestUnreadable)
        )
    );

    // The route answered 200 as v1 although the agent switched to v2:
    // a stale proxy target. Read, and wrong.
    let other = canary_switched(obs(ProbeVerdict::Pass, Some(V1), true));
    let p = other.proof(A);
    let c = item(&p, "route identity");
    assert_eq!(
        (c.ok, c.reason),
        (Some(false), Some(ReasonCode::RouteIdentityMismatch))
    );
    assert_eq!(c.observed, Some(V1.to_hex()));
    assert_eq!(c.expected, Some(V2.to_hex()));
    assert_eq!(
        (p.verdict, p.reason),
        (Verdict::Failed, Some(ReasonCode::RouteIdentityMismatch))
    );
    assert_ne!(
        item(&unreadable.proof(A), "route identity").reason,
        item(&p, "route identity").reason
    );
}

#[test]
fn unreachable_route_cannot_be_read_and_dead_process_is_a_restart_loop() {
    let p = canary_switched(obs(ProbeVerdict::Unreachable, None, true)).proof(A);
    assert_eq!(
        item(&p, "health probe").reason,
        Some(ReasonCode::ProbeUnreachable)
    );
    assert_eq!(item(&p, "health probe").ok, None);
    assert_eq!(
        item(&p, "route identity").reason,
        Some(ReasonCode::ProbeUnreachable)
    );
    assert_eq!(item(&p, "route identity").ok, None);
    assert_eq!(
        (p.verdict, p.reason),
        (Verdict::Unverified, Some(ReasonCode::OpNotSettled))
    );

    let p = canary_switched(obs(ProbeVerdict::Unreachable, None, false)).proof(A);
    let c = item(&p, "process");
    assert_eq!(
        (c.ok, c.reason),
        (Some(false), Some(ReasonCode::RestartLoop))
    );
    assert_eq!(
        (p.verdict, p.reason),
        (Verdict::Failed, Some(ReasonCode::RestartLoop))
    );
}

#[test]
fn proxy_error_status_is_non_2xx() {
    let p = canary_switched(obs(ProbeVerdict::Unreachable, Some(V2), true)).proof(A);
    let c = item(&p, "health probe");
    assert_eq!(
        (c.ok, c.reason),
        (Some(false), Some(ReasonCode::ProbeNon2xx))
    );
    assert_eq!(
        (p.verdict, p.reason),
        (Verdict::Failed, Some(ReasonCode::ProbeNon2xx))
    );
}

#[test]
fn a_later_success_wins_over_an_earlier_failure() {
    let s = canary_switched(obs(ProbeVerdict::WrongAnswer, Some(V2), true))
        .probe(0, RouteObservation::passing(V2))
        .settle(0, Outcome::Verified);
    assert_eq!(s.proof(A).verdict, Verdict::Verified);
}

#[test]
fn node_not_granted_yet_is_stale_on_an_older_op_or_unverified() {
    // r0 put v1 on node-a and node-b; r1 (v2) has only reached node-a.
    let s = S::new()
        .start(0, V1, vec![B], false)
        .grant(0, 0, A, V1)
        .switched(0, RouteObservation::passing(V1))
        .settle(0, Outcome::Verified)
        .grant(1, 0, B, V1)
        .switched(1, RouteObservation::passing(V1))
        .settle(1, Outcome::Verified)
        .start(1, V2, vec![B], false)
        .grant(2, 1, A, V2);
    let p = s.proof(B);
    assert_eq!(
        (p.verdict, p.reason),
        (Verdict::Stale, Some(ReasonCode::SupersededOp))
    );
    assert_eq!(p.op, None);

    let fresh = S::new().start(0, V2, vec![B], false).grant(0, 0, A, V2);
    let p = fresh.proof(B);
    assert_eq!(
        (p.verdict, p.reason),
        (Verdict::Unverified, Some(ReasonCode::OpNotGranted))
    );
}

#[test]
fn rollout_verdict_is_the_worst_node() {
    let s = verified().start(1, V2, vec![B], false);
    // r0 (only node-a): verified.
    let r0 = rollout_proof(&s.0, RolloutId(0), &name, &|_| None).unwrap();
    assert_eq!(r0.verdict, Verdict::Verified);
    assert_eq!(r0.rollout, "r0");
    // r1: node-a verified again, node-b got a wrong answer.
    let s = s
        .grant(1, 1, A, V2)
        .switched(1, RouteObservation::passing(V2))
        .settle(1, Outcome::Verified)
        .grant(2, 1, B, V2)
        .switched(2, obs(ProbeVerdict::WrongAnswer, Some(V2), true));
    let r1 = rollout_proof(&s.0, RolloutId(1), &name, &|_| None).unwrap();
    assert_eq!(r1.nodes.len(), 2);
    assert_eq!(r1.nodes[0].verdict, Verdict::Verified);
    assert_eq!(r1.nodes[1].verdict, Verdict::Failed);
    assert_eq!(r1.verdict, Verdict::Failed);
    assert!(rollout_proof(&s.0, RolloutId(9), &name, &|_| None).is_none());

    let order = [
        Verdict::Failed,
        Verdict::Unverified,
        Verdict::PartiallyVerified,
        Verdict::Stale,
        Verdict::Verified,
    ];
    assert!(order.windows(2).all(|w| w[0].rank() < w[1].rank()));
}

#[test]
fn names_serialize_as_documented() {
    assert_eq!(Verdict::PartiallyVerified.to_string(), "partially-verified");
    assert_eq!(
        serde_json::to_string(&Verdict::PartiallyVerified).unwrap(),
        "\"partially-verified\""
    );
    for v in [
        Verdict::Verified,
        Verdict::Unverified,
        Verdict::Stale,
        Verdict::Failed,
    ] {
        assert_eq!(serde_json::to_string(&v).unwrap(), format!("\"{v}\""));
    }
    assert_eq!(
        serde_json::to_string(&ReasonCode::RouteIdentityMismatch).unwrap(),
        "\"route_identity_mismatch\""
    );
    assert_eq!(ReasonCode::DigestUnreadable.as_str(), "digest_unreadable");
}
