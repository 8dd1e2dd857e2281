//! Inputs that come early, twice or late, as real operators and timers do:
//! each is refused or changes nothing where the rules say so. These kill
//! the mutants of issue 12 that the model checker's old environment never
//! offered (a deadline after settlement, an acknowledgement for another op,
//! a pause of a paused rollout, an approval out of turn).

use model::agent::{agent_apply, agent_step, AgentInput, AgentOp, AgentStage, AgentState};
use model::controller::{
    step, ControllerState, Event, Input, OpPhase, Outcome, PauseReason, Refusal,
};
use model::{
    Decision, Digest, Generation, NodeId, OpId, Plan, ReportKind, RolloutId, RouteObservation,
    ToAgent, ToController,
};

use testkit::{feed, fixtures};

const V1: Digest = Digest::repeat(1);
const V2: Digest = Digest::repeat(2);
const V3: Digest = Digest::repeat(3);
const A: NodeId = NodeId(0);
const B: NodeId = NodeId(1);
const R0: RolloutId = RolloutId(0);

fn plan(release: Digest, gate: bool) -> Plan {
    Plan {
        release,
        canary: A,
        followers: vec![B],
        slots_max: 1,
        approval_after_canary: gate,
    }
}

/// Nodes a and b serving v1; rollout r0 of v2 started (canary op0 granted).
fn started(gate: bool) -> ControllerState {
    fixtures::started(plan(V2, gate))
}

/// The canary commits and reports a switch probed with `observation`.
fn canary_switches(state: &mut ControllerState, observation: RouteObservation) -> Vec<Event> {
    let op = OpId(0);
    feed(
        state,
        Input::FromAgent {
            node: A,
            msg: ToController::CommitRequest { op },
        },
    )
    .expect("commit request");
    feed(
        state,
        Input::FromAgent {
            node: A,
            msg: ToController::Report {
                op,
                kind: ReportKind::Switched,
                observation,
            },
        },
    )
    .expect("report")
}

fn wrong(release: Digest) -> RouteObservation {
    RouteObservation {
        verdict: model::ProbeVerdict::WrongAnswer,
        ..RouteObservation::passing(release)
    }
}

#[test]
fn a_deadline_that_fires_after_its_op_settled_changes_nothing() {
    let mut state = started(false);
    canary_switches(&mut state, RouteObservation::passing(V2));
    assert_eq!(
        state.ops[&model::OpId(0)].phase,
        OpPhase::Settled(Outcome::Verified)
    );
    let before = state.clone();
    // The runtime never cancels the deadline armed at the grant.
    assert_eq!(feed(&mut state, Input::Timeout { op: OpId(0) }), Ok(vec![]));
    assert_eq!(state, before);
    assert_eq!(state.ops[&model::OpId(0)].unknown, None);
    // A live op's deadline marks it UNKNOWN, once.
    let marked = feed(&mut state, Input::Timeout { op: OpId(1) }).expect("timeout");
    assert!(matches!(marked.as_slice(), [Event::OpUnknown { .. }]));
    assert_eq!(feed(&mut state, Input::Timeout { op: OpId(1) }), Ok(vec![]));
}

#[test]
fn a_failed_probe_does_not_pause_a_rollout_an_operator_paused() {
    let mut state = started(false);
    feed(&mut state, Input::Pause { rollout: R0 }).expect("pause");
    let events = canary_switches(&mut state, wrong(V2));
    assert!(events.contains(&Event::RestoreRequested { op: OpId(0) }));
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, Event::RolloutPaused { .. })),
        "{events:?}"
    );
    // Why it stopped is still the operator's pause.
    assert_eq!(state.rollouts[0].paused, Some(PauseReason::Operator));
}

#[test]
fn a_failed_probe_of_a_superseded_rollout_does_not_pause_it() {
    let mut state = started(false);
    feed(
        &mut state,
        Input::FromAgent {
            node: A,
            msg: ToController::CommitRequest { op: OpId(0) },
        },
    )
    .expect("commit request");
    assert_eq!(state.ops[&model::OpId(0)].decision, Some(Decision::Commit));
    feed(
        &mut state,
        Input::StartRollout {
            plan: plan(V3, false),
        },
    )
    .expect("supersede");
    let events = feed(
        &mut state,
        Input::FromAgent {
            node: A,
            msg: ToController::Report {
                op: OpId(0),
                kind: ReportKind::Switched,
                observation: wrong(V2),
            },
        },
    )
    .expect("report");
    assert!(events.contains(&Event::RestoreRequested { op: OpId(0) }));
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, Event::RolloutPaused { .. })),
        "{events:?}"
    );
    assert_eq!(state.rollouts[0].paused, None);
}

#[test]
fn an_approval_is_accepted_only_after_the_canary_passed_on_a_gated_plan_once() {
    let approve = Input::Approve { rollout: R0 };
    // Before the canary passed.
    let mut gated = started(true);
    assert_eq!(
        feed(&mut gated, approve.clone()),
        Err(Refusal::NotAwaitingApproval(R0))
    );
    canary_switches(&mut gated, RouteObservation::passing(V2));
    assert_eq!(
        feed(&mut gated, approve.clone()).expect("approved"),
        vec![
            Event::RolloutApproved { rollout: R0 },
            Event::OpGranted {
                op: OpId(1),
                rollout: R0,
                node: B,
                release: V2,
                generation: Generation(1),
                baseline: Some(V1),
                is_canary: false,
            }
        ]
    );
    // Twice.
    assert_eq!(
        feed(&mut gated, approve.clone()),
        Err(Refusal::NotAwaitingApproval(R0))
    );
    // A plan without a gate, canary passed.
    let mut ungated = started(false);
    canary_switches(&mut ungated, RouteObservation::passing(V2));
    assert_eq!(
        feed(&mut ungated, approve),
        Err(Refusal::NotAwaitingApproval(R0))
    );
}

fn reporting(op: u32) -> AgentState {
    AgentState {
        accepted: Generation(2),
        serving: Some(V3),
        op: Some(AgentOp {
            id: OpId(op),
            generation: Generation(2),
            release: V3,
            baseline: Some(V1),
            stage: AgentStage::Reporting(ReportKind::Switched, RouteObservation::passing(V3)),
            budget_left: model::agent::ATTEMPT_BUDGET,
            verified: Default::default(),
            migration: None,
        }),
        highest_op: Some(OpId(op)),
        ..AgentState::default()
    }
}

#[test]
fn an_acknowledgement_for_another_op_leaves_the_reported_op_open() {
    let agent = reporting(1);
    let late = ToAgent::Settled {
        op: OpId(0),
        generation: Generation(1),
    };
    let out = agent_step(&agent, AgentInput::Command(late));
    assert_eq!(out.events, vec![], "nothing is journaled");
    let mut after = agent;
    out.events.iter().for_each(|e| agent_apply(&mut after, e));
    assert_eq!(after, agent, "op1 is still reported");
    // Its own acknowledgement closes it.
    let own = ToAgent::Settled {
        op: OpId(1),
        generation: Generation(2),
    };
    let out = agent_step(&agent, AgentInput::Command(own));
    assert_eq!(
        out.events,
        vec![model::agent::AgentEvent::Closed { op: OpId(1) }]
    );
}

/// The agent's journal records read as what happened, in domain words (the
/// checker's counterexamples and `log show --journal` print them).
#[test]
fn agent_events_read_in_domain_words() {
    use model::agent::AgentEvent;
    let (op, generation) = (OpId(1), Generation(2));
    for (event, text) in [
        (
            AgentEvent::Accepted {
                op,
                generation,
                release: V2,
            },
            format!("accepts op1 ({V2}, {generation}) and starts staging it"),
        ),
        (
            AgentEvent::Switched { op, generation },
            "switches the route for op1".to_string(),
        ),
        (
            AgentEvent::AbortAccepted { op, generation },
            "aborts op1, route unchanged".to_string(),
        ),
        (
            AgentEvent::Restored { op, generation },
            "restores the baseline for op1".to_string(),
        ),
        (
            AgentEvent::Closed { op },
            "closes op1: the controller settled it".to_string(),
        ),
        (
            AgentEvent::Restarted { serving: None },
            "restarts and sees nothing serving".to_string(),
        ),
        (
            AgentEvent::Restarted { serving: Some(V1) },
            format!("restarts and sees {V1} serving"),
        ),
    ] {
        assert_eq!(event.to_string(), text);
    }
}

/// The controller's own probe of an UNKNOWN op's route restores the
/// baseline only on a wrong answer from the new release itself: a route it
/// cannot reach, or the baseline answering wrongly, says nothing about the
/// switch (the node may not have heard its Commit yet).
#[test]
fn a_probe_restores_only_on_a_wrong_answer_from_the_new_release() {
    let mut state = started(false);
    feed(
        &mut state,
        Input::FromAgent {
            node: A,
            msg: ToController::CommitRequest { op: OpId(0) },
        },
    )
    .expect("commit request");
    feed(&mut state, Input::Timeout { op: OpId(0) }).expect("timeout");
    let unreachable = RouteObservation::new(model::ProbeVerdict::Unreachable, None, false);
    for observation in [unreachable, wrong(V1)] {
        let mut probed = state.clone();
        let events = feed(
            &mut probed,
            Input::RouteProbed {
                node: A,
                observation,
            },
        )
        .expect("probe");
        assert_eq!(
            events,
            vec![Event::ProbeRecorded {
                op: OpId(0),
                observation
            }],
            "{observation}"
        );
        assert_eq!(probed.ops[&model::OpId(0)].phase, OpPhase::Decided);
    }
    let events = feed(
        &mut state,
        Input::RouteProbed {
            node: A,
            observation: wrong(V2),
        },
    )
    .expect("probe");
    assert!(events.contains(&Event::RestoreRequested { op: OpId(0) }));
}

/// A report of the switch can arrive twice (a duplicated message, or the
/// agent's resend crossing the restore order). While the op restores, a
/// late copy is an echo of what the controller already judged: it changes
/// nothing, and the agent's restore report still settles the op.
#[test]
fn a_duplicated_switch_report_does_not_make_a_restoring_op_unknown() {
    let mut state = started(false);
    let events = canary_switches(&mut state, wrong(V2));
    assert!(events.contains(&Event::RestoreRequested { op: OpId(0) }));
    assert_eq!(state.ops[&OpId(0)].phase, OpPhase::Restoring);
    let echo = Input::FromAgent {
        node: A,
        msg: ToController::Report {
            op: OpId(0),
            kind: ReportKind::Switched,
            observation: wrong(V2),
        },
    };
    let events = feed(&mut state, echo).expect("late echo");
    assert!(
        !events.iter().any(|e| matches!(e, Event::OpUnknown { .. })),
        "{events:?}"
    );
    let op = &state.ops[&OpId(0)];
    assert_eq!((op.phase, op.unknown), (OpPhase::Restoring, None));
    let restored = Input::FromAgent {
        node: A,
        msg: ToController::Report {
            op: OpId(0),
            kind: ReportKind::Restored,
            observation: RouteObservation::passing(V1),
        },
    };
    feed(&mut state, restored).expect("restored");
    assert_eq!(
        state.ops[&OpId(0)].phase,
        OpPhase::Settled(Outcome::RolledBack)
    );
}

/// The agent's log prints each reading of the recovery table and its exit
/// in these words (seed 002's table, the gallery's traces, the scenario
/// harness match them).
#[test]
fn the_recovery_table_reads_in_the_words_of_the_agent_log() {
    use model::agent::AgentEvent;
    use model::recovery::{ErrorClass, Exit, Observed, Position, Reading};
    let line = |position, error, observed, budget_left, exit| {
        AgentEvent::Recovery {
            op: OpId(0),
            reading: Reading {
                position,
                error,
                observed,
                budget_left,
            },
            exit,
        }
        .to_string()
    };
    let before = Position::BeforeStage;
    assert_eq!(
        line(
            before,
            Some(ErrorClass::Transient),
            Some(Observed::Absent),
            3,
            Exit::Retry
        ),
        "recovery table for op0: BeforeStage, Transient, Absent, budget 3 -> Retry"
    );
    assert_eq!(
        line(
            before,
            Some(ErrorClass::Permanent),
            Some(Observed::Absent),
            2,
            Exit::Stop
        ),
        "recovery table for op0: BeforeStage, Permanent, Absent, budget 2 -> Stop"
    );
    assert_eq!(
        line(
            Position::AfterArtifactCommitted,
            Some(ErrorClass::Transient),
            Some(Observed::ReVerified),
            2,
            Exit::Resume
        ),
        "recovery table for op0: AfterArtifactCommitted, Transient, ReVerified, budget 2 -> Resume"
    );
    assert_eq!(
        line(before, None, None, 1, Exit::Stop),
        "recovery table for op0: BeforeStage, missing, missing, budget 1 -> Stop"
    );
}

/// Every refusal reaches an operator as text (the CLI prints it, the API
/// returns it): the words of the common ones, from refusals `step` makes.
#[test]
fn refusals_read_as_operators_see_them() {
    let mut state = started(true);
    let refused = |state: &ControllerState, input: Input| {
        step(state, &input).expect_err("refused").to_string()
    };
    assert_eq!(
        refused(&state, Input::Resume { rollout: R0 }),
        "rollout r0 is not paused"
    );
    assert_eq!(
        refused(&state, Input::Approve { rollout: R0 }),
        "rollout r0 is not waiting for approval (no gate, canary not verified yet, or already approved)"
    );
    assert_eq!(
        refused(
            &state,
            Input::Pause {
                rollout: RolloutId(7)
            }
        ),
        "unknown rollout r7"
    );
    assert_eq!(
        refused(&state, Input::RollBack { op: OpId(9) }),
        "unknown op op9"
    );
    assert_eq!(
        refused(&state, Input::RollBack { op: OpId(0) }),
        "op0 has no stored commit decision, so its node never switched: there is nothing to roll back (its report will settle it, or resolve it with --resolution abandon)"
    );
    feed(&mut state, Input::Pause { rollout: R0 }).expect("pause");
    assert_eq!(
        refused(&state, Input::Pause { rollout: R0 }),
        "rollout r0 is already paused"
    );
    canary_switches(&mut state, wrong(V2));
    assert_eq!(
        refused(&state, Input::RollBack { op: OpId(0) }),
        "op0 is already being rolled back"
    );
}

/// A restoring op whose node acted on its Commit (it reported the switch)
/// is settled by the controller's own probe once that probe proves the
/// baseline serving (S9), without waiting for the agent's restore report.
#[test]
fn a_probe_proving_the_baseline_settles_a_restore_after_the_commit_landed() {
    let mut state = started(false);
    canary_switches(&mut state, wrong(V2));
    let op = &state.ops[&OpId(0)];
    assert_eq!(op.phase, OpPhase::Restoring);
    assert!(!op.commit_may_still_land(), "the switch report acted on it");
    let probed = Input::RouteProbed {
        node: A,
        observation: RouteObservation::passing(V1),
    };
    let events = feed(&mut state, probed).expect("probe");
    assert!(
        events.contains(&Event::OpSettled {
            op: OpId(0),
            outcome: Outcome::RolledBack,
        }),
        "{events:?}"
    );
}
