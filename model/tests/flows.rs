//! End-to-end flows through the pure cores: controller and agents wired by
//! hand, no faults. These pin the happy path and the two headline stories.

use model::agent::{AgentEvent, AgentInput};
use model::controller::{step, ControllerState, Event, Input, OpPhase, Outcome, RolloutStatus};
use model::recovery::StageFailure;
use model::{
    Decision, Digest, NodeId, OpId, Plan, ProbeVerdict, RolloutId, RouteObservation, ToAgent,
};
use testkit::feed_into;
use testkit::fleet::Fleet;

const V1: Digest = Digest::repeat(1);
const V2: Digest = Digest::repeat(2);
const V3: Digest = Digest::repeat(3);

fn plan() -> Plan {
    Plan {
        release: V2,
        canary: NodeId(0),
        followers: vec![NodeId(1), NodeId(2)],
        slots_max: 1,
        approval_after_canary: false,
    }
}

#[test]
fn happy_rollout_verifies_every_node_and_completes() {
    let mut fleet = Fleet::model(3);
    fleet.accept(Input::StartRollout { plan: plan() });
    fleet.run();
    let r = &fleet.ctrl.rollouts[0];
    assert_eq!(r.status, RolloutStatus::Completed, "log: {:#?}", fleet.log);
    for op in fleet.ctrl.ops.values() {
        assert_eq!(op.phase, OpPhase::Settled(Outcome::Verified));
    }
    assert!(fleet.agents.iter().all(|a| a.serving == Some(V2)));
}

#[test]
fn wrong_answer_on_canary_restores_and_pauses() {
    let mut fleet = Fleet::model(3);
    fleet.v2_correct[0] = false;
    fleet.accept(Input::StartRollout { plan: plan() });
    fleet.run();
    let r = &fleet.ctrl.rollouts[0];
    assert!(r.paused.is_some());
    assert_eq!(fleet.ctrl.ops.len(), 1, "no follower granted");
    assert_eq!(
        fleet.ctrl.ops[&model::OpId(0)].phase,
        OpPhase::Settled(Outcome::RolledBack)
    );
    assert_eq!(fleet.agents[0].serving, Some(V1));
}

#[test]
fn approval_gate_waits_for_the_operator() {
    let mut fleet = Fleet::model(3);
    let mut p = plan();
    p.approval_after_canary = true;
    fleet.accept(Input::StartRollout { plan: p });
    fleet.run();
    assert_eq!(fleet.ctrl.ops.len(), 1, "only the canary before approval");
    fleet.accept(Input::Approve {
        rollout: RolloutId(0),
    });
    fleet.run();
    assert_eq!(fleet.ctrl.rollouts[0].status, RolloutStatus::Completed);
}

#[test]
fn replay_rebuilds_the_same_state() {
    let mut fleet = Fleet::model(3);
    fleet.accept(Input::StartRollout { plan: plan() });
    fleet.run();
    assert_eq!(model::controller::replay(&fleet.log), fleet.ctrl);
}

#[test]
fn a_claim_is_recorded_refused_when_invalid_and_settles_nothing() {
    use model::controller::{Claim, Refusal};
    use model::OpId;
    let mut ctrl = ControllerState::default();
    let mut log = Vec::new();
    let mut run = |ctrl: &mut ControllerState, input: Input| feed_into(ctrl, &mut log, input);
    run(&mut ctrl, Input::StartRollout { plan: plan() }).unwrap();
    let claim = |owner: &str, review_by: &str| Input::Claim {
        op: OpId(0),
        owner: owner.into(),
        review_by: review_by.into(),
    };
    assert_eq!(
        run(
            &mut ctrl,
            Input::Claim {
                op: OpId(9),
                owner: "a".into(),
                review_by: "t".into()
            }
        ),
        Err(Refusal::UnknownOp(OpId(9)))
    );
    assert!(matches!(
        run(&mut ctrl, claim(" ", "t")),
        Err(Refusal::InvalidClaim(_))
    ));
    let long = "x".repeat(129);
    assert!(matches!(
        run(&mut ctrl, claim(&long, "t")),
        Err(Refusal::InvalidClaim(_))
    ));
    assert!(matches!(
        run(&mut ctrl, claim("a", &long)),
        Err(Refusal::InvalidClaim(_))
    ));
    let before = ctrl.clone();
    let events = run(&mut ctrl, claim("alice", "2026-12-01T10:00:00Z")).unwrap();
    assert_eq!(
        events,
        vec![Event::OpClaimed {
            op: OpId(0),
            owner: "alice".into(),
            review_by: "2026-12-01T10:00:00Z".into()
        }]
    );
    assert_eq!(
        events[0].to_string(),
        "op0 claimed by alice, review by 2026-12-01T10:00:00Z"
    );
    let op = &ctrl.ops[&model::OpId(0)];
    assert_eq!(
        op.claim,
        Some(Claim {
            owner: "alice".into(),
            review_by: "2026-12-01T10:00:00Z".into()
        })
    );
    assert_eq!(
        op.phase,
        before.ops[&model::OpId(0)].phase,
        "a claim settles nothing"
    );
    assert!(op.occupies_slot());
    run(
        &mut ctrl,
        Input::Resolve {
            op: OpId(0),
            observation: RouteObservation {
                verdict: ProbeVerdict::Unreachable,
                identity: None,
                process_healthy: false,
                process_uptime_ms: None,
                process_restarts: None,
                artifact: None,
            },
            resolution: model::controller::Resolution::Abandon,
        },
    )
    .unwrap();
    assert_eq!(
        run(&mut ctrl, claim("bob", "t")),
        Err(Refusal::OpAlreadySettled(OpId(0)))
    );
    assert_eq!(model::controller::replay(&log), ctrl);
}

/// A node that was away when its op was granted never fetches that op's
/// release once the op is superseded: the supersede stores an abort for it,
/// the node hears that abort (not an `Apply`) when it comes back, reports
/// what serves, and the op settles so the newer rollout can proceed.
#[test]
fn an_op_superseded_before_its_node_heard_of_it_is_aborted_unseen() {
    let mut fleet = Fleet::model(3);
    fleet.accept(Input::StartRollout { plan: plan() });
    // node 0 (the canary) is away: its Apply is lost.
    let lost = fleet.to_agents.pop_front().expect("the canary's apply");
    assert!(
        matches!(lost, (NodeId(0), ToAgent::Apply { .. })),
        "{lost:?}"
    );
    fleet.accept(Input::StartRollout {
        plan: Plan {
            release: V3,
            ..plan()
        },
    });
    assert!(fleet.log.contains(&Event::CommitDecided {
        op: OpId(0),
        decision: Decision::Abort,
    }));
    assert_eq!(
        fleet.ctrl.ops[&model::OpId(0)].phase,
        OpPhase::Decided,
        "slot still held"
    );
    // node 0 comes back: what it hears about op0 is the stored abort.
    fleet.agent(NodeId(0), AgentInput::Connected);
    let to_node0: Vec<_> = fleet.to_agents.iter().map(|(_, m)| *m).collect();
    assert!(
        to_node0
            .iter()
            .all(|m| !matches!(m, ToAgent::Apply { op: OpId(0), .. })),
        "{to_node0:?}"
    );
    fleet.run();
    assert!(fleet.agent_log.iter().any(|(n, e)| *n == NodeId(0)
        && matches!(e, AgentEvent::AbortedUnseen { op: OpId(0), release, .. } if *release == V2)));
    assert!(
        !fleet.agent_log.iter().any(|(_, e)| matches!(
            e,
            AgentEvent::Accepted { release, .. } if *release == V2
        )),
        "nobody staged the superseded release"
    );
    // Archived once its rollout finished and node 0 got a newer op.
    assert_eq!(
        fleet.ctrl.op_summary(OpId(0)).and_then(|o| o.outcome),
        Some(Outcome::NotApplied)
    );
    assert_eq!(fleet.ctrl.rollouts[1].status, RolloutStatus::Completed);
    assert!(fleet.agents.iter().all(|a| a.serving == Some(V3)));
}

/// Confirm-baseline is refused while a Commit is stored and no restore was
/// asked for: the node may still hear that Commit (replayed unchanged) and
/// switch, overturning the recorded baseline. Abandon stays possible.
#[test]
fn confirm_baseline_is_refused_while_a_stored_commit_may_still_land() {
    use model::controller::{Refusal, Resolution};
    let mut fleet = Fleet::model(3);
    fleet.accept(Input::StartRollout { plan: plan() });
    // The canary asks to commit; the Commit is stored, its reply is lost.
    let (node, apply) = fleet.to_agents.pop_front().expect("apply");
    fleet.agent(node, AgentInput::Command(apply));
    let reply = fleet.to_agents.pop_front().expect("commit reply");
    assert!(matches!(
        reply,
        (
            _,
            ToAgent::CommitReply {
                decision: Decision::Commit,
                ..
            }
        )
    ));
    // The node still serves v1, and an operator sees that.
    let seen_v1 = RouteObservation::passing(V1);
    let refused = step(
        &fleet.ctrl,
        &Input::Resolve {
            op: OpId(0),
            observation: seen_v1,
            resolution: Resolution::ConfirmBaseline,
        },
    );
    assert_eq!(refused, Err(Refusal::CommitMayStillLand(OpId(0))));
    // Worded as itself: why the baseline cannot be confirmed, what to do.
    let text = refused.expect_err("refused").to_string();
    assert!(
        text.contains("stored commit decision that its node may still act on")
            && text.contains("abandon"),
        "{text}"
    );
    assert!(step(
        &fleet.ctrl,
        &Input::Resolve {
            op: OpId(0),
            observation: seen_v1,
            resolution: Resolution::Abandon,
        },
    )
    .is_ok());
    // What the refusal protects: the replayed Commit does land.
    fleet.agent(node, AgentInput::Command(reply.1));
    assert_eq!(fleet.agents[0].serving, Some(V2));
}

/// Confirm-new is refused while a restore is in flight: the node may still
/// put the baseline back under a record that says the new release serves.
#[test]
fn confirm_new_is_refused_while_a_restore_may_still_land() {
    use model::controller::{Refusal, Resolution};
    let mut fleet = Fleet::model(3);
    fleet.v2_correct[0] = false;
    fleet.accept(Input::StartRollout { plan: plan() });
    // Deliver until the Restore is queued for the canary, then hold it.
    while let Some((node, msg)) = fleet.to_agents.pop_front() {
        if matches!(msg, ToAgent::Restore { .. }) {
            fleet.to_agents.push_front((node, msg));
            break;
        }
        fleet.agent(node, AgentInput::Command(msg));
    }
    assert_eq!(fleet.ctrl.ops[&model::OpId(0)].phase, OpPhase::Restoring);
    // An operator happens to see v2 answering correctly (intermittent).
    let refused = step(
        &fleet.ctrl,
        &Input::Resolve {
            op: OpId(0),
            observation: RouteObservation::passing(V2),
            resolution: Resolution::ConfirmNew,
        },
    );
    assert_eq!(refused, Err(Refusal::RestoreMayStillLand(OpId(0))));
    // What the refusal protects: the Restore does land.
    fleet.run();
    assert_eq!(fleet.agents[0].serving, Some(V1));
    assert_eq!(
        fleet.ctrl.ops[&model::OpId(0)].phase,
        OpPhase::Settled(Outcome::RolledBack)
    );
}

/// An agent re-sends its report until newer work arrives. While its op waits
/// (UNKNOWN: nothing proves what serves), a copy that says what was already
/// recorded is not logged again; a report that says something new is.
#[test]
fn a_resent_identical_report_is_not_logged_again() {
    use model::{ReportKind, StageRefusal, ToController};
    let mut fleet = Fleet::model(3);
    // node 0 serves nothing yet, so nothing can prove "not applied".
    fleet.agents[0].serving = None;
    fleet.accept(Input::StartRollout { plan: plan() });
    // The canary's bundle fails verification: the table stops at once.
    fleet.stage_failure[0] = Some(StageFailure::Permanent);
    let apply = fleet.to_agents.pop_front().expect("the canary's apply");
    fleet.agent(apply.0, AgentInput::Command(apply.1));
    let op = &fleet.ctrl.ops[&model::OpId(0)];
    assert!(op.unknown.is_some() && op.occupies_slot(), "{op:?}");
    let logged = fleet.log.len();
    let report = |n: &Fleet<ControllerState>| {
        n.log
            .iter()
            .filter(|e| matches!(e, Event::ReportRecorded { .. }))
            .count()
    };
    let reports = report(&fleet);
    assert_eq!(reports, 1);
    for _ in 0..5 {
        fleet.agent(NodeId(0), AgentInput::Retry);
    }
    assert_eq!(fleet.log.len(), logged, "{:#?}", &fleet.log[logged..]);
    // Something new (the route now answers as v3) is recorded.
    fleet.accept(Input::FromAgent {
        node: NodeId(0),
        msg: ToController::Report {
            op: OpId(0),
            kind: ReportKind::Refused(StageRefusal::BundleRejected),
            observation: RouteObservation {
                verdict: ProbeVerdict::Pass,
                identity: Some(V3),
                process_healthy: true,
                process_uptime_ms: None,
                process_restarts: None,
                artifact: None,
            },
        },
    });
    assert_eq!(report(&fleet), reports + 1);
}

/// The operator's roll back of an UNKNOWN canary whose commit reply was
/// lost: refused where there is nothing to put back, accepted with a stored
/// Commit; the node (still waiting for its decision) hears the Restore,
/// keeps the baseline, proves it, and the op settles RolledBack (S9). The
/// stored Commit, replayed late, switches nothing.
#[test]
fn an_operator_rolls_back_an_unknown_op_and_a_probe_proves_it() {
    use model::controller::{Refusal, UnknownReason};
    let mut fleet = Fleet::model(3);
    fleet.accept(Input::StartRollout { plan: plan() });
    let apply = fleet.to_agents.pop_front().expect("the canary's apply");
    // Granted, not decided: nothing to roll back.
    assert_eq!(
        step(&fleet.ctrl, &Input::RollBack { op: OpId(0) }),
        Err(Refusal::NothingToRollBack(OpId(0)))
    );
    fleet.agent(apply.0, AgentInput::Command(apply.1));
    // The node asked to commit; the decision is stored, its reply is lost.
    let reply = fleet.to_agents.pop_front().expect("the commit reply");
    assert!(matches!(
        reply.1,
        ToAgent::CommitReply {
            decision: Decision::Commit,
            ..
        }
    ));
    fleet.accept(Input::Timeout { op: OpId(0) });
    assert_eq!(
        fleet.ctrl.ops[&model::OpId(0)].unknown,
        Some(UnknownReason::Silence)
    );
    fleet.accept(Input::RollBack { op: OpId(0) });
    assert!(fleet.log.contains(&Event::RollBackOrdered { op: OpId(0) }));
    assert_eq!(fleet.ctrl.ops[&model::OpId(0)].phase, OpPhase::Restoring);
    assert!(fleet.ctrl.rollouts[0].paused.is_some(), "no more grants");
    assert_eq!(
        step(&fleet.ctrl, &Input::RollBack { op: OpId(0) }),
        Err(Refusal::AlreadyRestoring(OpId(0)))
    );
    fleet.run();
    assert_eq!(
        fleet.ctrl.ops[&model::OpId(0)].phase,
        OpPhase::Settled(Outcome::RolledBack),
        "{:#?}",
        fleet.log
    );
    assert_eq!(fleet.agents[0].serving, Some(V1));
    // The lost Commit, delivered late, finds no op waiting for it.
    fleet.agent(reply.0, AgentInput::Command(reply.1));
    assert_eq!(fleet.agents[0].serving, Some(V1));
    assert_eq!(fleet.ctrl.ops.len(), 1, "paused: no follower granted");
    assert_eq!(
        step(&fleet.ctrl, &Input::RollBack { op: OpId(0) }),
        Err(Refusal::OpAlreadySettled(OpId(0)))
    );
}
