//! Rules about inputs that may come at any moment: deadlines that fire late
//! (the runtime never cancels a timer), operator commands given early,
//! twice or to the wrong rollout, and acknowledgements that arrive after
//! newer work. Each judges one event against the state just before it; the
//! environment of the checker offers every such input in every state, so a
//! rule that accepts one it should refuse is seen here.

use crate::{broken, words, Rule, Violation};
use model::agent::{AgentEvent, AgentState};
use model::controller::{ControllerState, Event, OpPhase, RolloutStatus};

/// S8 on the controller: a late input changes nothing. A settled op never
/// becomes UNKNOWN (a deadline armed at its grant may fire long after it
/// settled), and an UNKNOWN mark names an op that was granted.
pub fn s8_settled_op_stays_settled(
    before: &ControllerState,
    event: &Event,
) -> Result<(), Violation> {
    let Event::OpUnknown { op, .. } = event else {
        return Ok(());
    };
    let Some(o) = before.op(*op) else {
        return broken(
            Rule::S8,
            format!("{op} marked UNKNOWN but no such op was granted"),
        );
    };
    if let OpPhase::Settled(outcome) = o.phase {
        return broken(
            Rule::S8,
            format!(
                "{op} marked UNKNOWN although it already settled {}",
                words::outcome(outcome)
            ),
        );
    }
    Ok(())
}

/// S5 on pause events: `RolloutPaused` only pauses an active rollout that
/// is not paused yet, and `RolloutResumed` only resumes an active, paused
/// one. A second pause would overwrite why the rollout stopped (a failed
/// canary's probe read as an operator's pause, or the other way round).
pub fn s5_pause_events_change_state(
    before: &ControllerState,
    event: &Event,
) -> Result<(), Violation> {
    let (rollout, pausing) = match event {
        Event::RolloutPaused { rollout, .. } => (*rollout, true),
        Event::RolloutResumed { rollout } => (*rollout, false),
        _ => return Ok(()),
    };
    let verb = if pausing { "paused" } else { "resumed" };
    let Some(r) = before.rollout(rollout) else {
        return broken(
            Rule::S5,
            format!("rollout {rollout} {verb} but it was never started"),
        );
    };
    if r.status != RolloutStatus::Active {
        return broken(
            Rule::S5,
            format!(
                "rollout {rollout} {verb} while it is {}",
                words::status(r.status)
            ),
        );
    }
    match (pausing, r.paused) {
        (true, Some(reason)) => broken(
            Rule::S5,
            format!(
                "rollout {rollout} paused again while it is already {}",
                words::pause(reason)
            ),
        ),
        (false, None) => broken(
            Rule::S5,
            format!("rollout {rollout} resumed although it is not paused"),
        ),
        _ => Ok(()),
    }
}

/// S4 on approvals: `RolloutApproved` is accepted only for an active
/// rollout whose plan asks for an approval after the canary, once the
/// canary op of that rollout passed, and only once. Written without
/// `ControllerState::awaiting_approval`, which is the deciding code.
pub fn s4_approval_after_canary(before: &ControllerState, event: &Event) -> Result<(), Violation> {
    let Event::RolloutApproved { rollout } = event else {
        return Ok(());
    };
    let Some(r) = before.rollout(*rollout) else {
        return broken(
            Rule::S4,
            format!("rollout {rollout} approved but it was never started"),
        );
    };
    let why = if r.status != RolloutStatus::Active {
        Some(format!("it is {}", words::status(r.status)))
    } else if !r.plan.approval_after_canary {
        Some("its plan has no approval gate".to_string())
    } else if r.approved {
        Some("it was already approved".to_string())
    } else {
        let canary = r.plan.canary;
        let passed = before
            .ops
            .values()
            .filter(|o| o.rollout == r.id && o.node == canary)
            .any(|o| o.passed());
        (!passed).then(|| format!("its canary {canary} has not passed"))
    };
    match why {
        Some(why) => broken(
            Rule::S4,
            format!("rollout {rollout} approved although {why}"),
        ),
        None => Ok(()),
    }
}

/// All rules of this module on one controller event, in the order S4, S5,
/// S8; the first violation.
pub fn check_input_event(before: &ControllerState, event: &Event) -> Result<(), Violation> {
    s4_approval_after_canary(before, event)?;
    s5_pause_events_change_state(before, event)?;
    s8_settled_op_stays_settled(before, event)
}

/// S8 on the agent: an agent closes only its own current op, and only one
/// the controller settled. An acknowledgement for another op (a late copy
/// for an op it closed before) must leave the current op as it is, or that
/// op stops being reported and can never settle on its own.
///
/// `controller` is the controller's durable state and `journal` the agent's
/// state when the agent journals `event`.
pub fn s8_close_only_settled(
    controller: &ControllerState,
    journal: &AgentState,
    event: &AgentEvent,
) -> Result<(), Violation> {
    let AgentEvent::Closed { op } = *event else {
        return Ok(());
    };
    let current = journal.op.map(|o| o.id);
    if current != Some(op) {
        let held = current.map_or("no op".to_string(), |c| c.to_string());
        return broken(
            Rule::S8,
            format!("the agent closed {op} while it holds {held}"),
        );
    }
    // An archived op is settled by construction: read its summary too.
    let settled = controller
        .op_summary(op)
        .is_some_and(|o| o.outcome.is_some());
    if !settled {
        return broken(
            Rule::S8,
            format!("the agent closed {op}, which the controller has not settled"),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::*;
    use model::agent::{AgentOp, AgentStage};
    use model::controller::{Input, PauseReason, UnknownReason};
    use model::{Generation, OpId, ReportKind};

    fn unknown(op: u32) -> Event {
        Event::OpUnknown {
            op: OpId(op),
            reason: UnknownReason::Silence,
        }
    }

    #[test]
    fn a_live_op_may_become_unknown() {
        let mut w = World::new();
        w.start(plan(1, false));
        holds(s8_settled_op_stays_settled(&w.state, &unknown(0)));
        // The real timeout of a live op passes every rule of this module.
        let events = w.input(Input::Timeout { op: OpId(0) });
        assert_eq!(events, vec![unknown(0)]);
    }

    #[test]
    fn a_settled_op_that_becomes_unknown_is_rejected() {
        let w = World::canary_verified(1, false);
        let v = rejected(s8_settled_op_stays_settled(&w.state, &unknown(0)), Rule::S8);
        assert!(v.detail.contains("already settled"), "{v}");
        rejected(s8_settled_op_stays_settled(&w.state, &unknown(9)), Rule::S8);
        // The real step lets a late deadline change nothing.
        let late = model::controller::step(&w.state, &Input::Timeout { op: OpId(0) });
        assert_eq!(late, Ok(vec![]));
    }

    fn paused(reason: PauseReason) -> Event {
        Event::RolloutPaused {
            rollout: R0,
            reason,
        }
    }

    #[test]
    fn pausing_an_active_unpaused_rollout_and_resuming_it_pass() {
        let mut w = World::new();
        w.start(plan(1, false));
        holds(s5_pause_events_change_state(
            &w.state,
            &paused(PauseReason::Operator),
        ));
        w.input(Input::Pause { rollout: R0 });
        holds(s5_pause_events_change_state(
            &w.state,
            &Event::RolloutResumed { rollout: R0 },
        ));
    }

    #[test]
    fn pausing_a_paused_rollout_is_rejected() {
        // The canary answered wrongly: restoring, paused by the failed probe.
        let w = World::canary_wrong();
        let again = paused(PauseReason::Operator);
        let v = rejected(s5_pause_events_change_state(&w.state, &again), Rule::S5);
        assert!(v.detail.contains("already"), "{v}");
    }

    #[test]
    fn pausing_or_resuming_a_rollout_that_is_not_active_is_rejected() {
        let mut w = World::canary_verified(1, false);
        w.start(plan(1, false)); // r0 superseded by r1
        rejected(
            s5_pause_events_change_state(&w.state, &paused(PauseReason::Operator)),
            Rule::S5,
        );
        rejected(
            s5_pause_events_change_state(&w.state, &Event::RolloutResumed { rollout: R0 }),
            Rule::S5,
        );
        // Resuming an active rollout that is not paused.
        rejected(
            s5_pause_events_change_state(&w.state, &Event::RolloutResumed { rollout: R1 }),
            Rule::S5,
        );
        let never = Event::RolloutResumed {
            rollout: model::RolloutId(7),
        };
        rejected(s5_pause_events_change_state(&w.state, &never), Rule::S5);
    }

    const APPROVED: Event = Event::RolloutApproved { rollout: R0 };

    #[test]
    fn an_approval_after_a_passed_canary_on_a_gated_plan_passes_once() {
        let mut w = World::canary_verified(1, true);
        holds(s4_approval_after_canary(&w.state, &APPROVED));
        w.input(Input::Approve { rollout: R0 });
        let v = rejected(s4_approval_after_canary(&w.state, &APPROVED), Rule::S4);
        assert!(v.detail.contains("already approved"), "{v}");
    }

    #[test]
    fn an_approval_before_the_canary_passed_is_rejected() {
        let mut w = World::new();
        w.start(plan(1, true));
        let v = rejected(s4_approval_after_canary(&w.state, &APPROVED), Rule::S4);
        assert!(v.detail.contains("has not passed"), "{v}");
        // Switched but not yet verified is not passed either.
        w.ask_commit(0);
        rejected(s4_approval_after_canary(&w.state, &APPROVED), Rule::S4);
    }

    #[test]
    fn an_approval_of_an_ungated_or_inactive_rollout_is_rejected() {
        let w = World::canary_verified(1, false);
        let v = rejected(s4_approval_after_canary(&w.state, &APPROVED), Rule::S4);
        assert!(v.detail.contains("no approval gate"), "{v}");
        let mut gated = World::canary_verified(1, true);
        gated.start(plan(1, true));
        let v = rejected(s4_approval_after_canary(&gated.state, &APPROVED), Rule::S4);
        assert!(v.detail.contains("superseded"), "{v}");
        let never = Event::RolloutApproved {
            rollout: model::RolloutId(7),
        };
        rejected(s4_approval_after_canary(&gated.state, &never), Rule::S4);
    }

    #[test]
    fn check_input_event_passes_on_real_inputs_and_runs_every_rule() {
        let mut w = World::canary_verified(2, true);
        w.input(Input::Approve { rollout: R0 });
        w.input(Input::Pause { rollout: R0 });
        w.input(Input::Resume { rollout: R0 });
        w.switch(1, wrong(V2));
        let mut state = ControllerState::default();
        for e in &w.log {
            holds(check_input_event(&state, e));
            model::controller::apply(&mut state, e);
        }
        rejected(check_input_event(&state, &APPROVED), Rule::S4);
        rejected(
            check_input_event(&state, &paused(PauseReason::Operator)),
            Rule::S5,
        );
        rejected(check_input_event(&state, &unknown(0)), Rule::S8);
    }

    fn reporting(op: u32) -> AgentState {
        AgentState {
            accepted: Generation(1),
            serving: Some(V2),
            op: Some(AgentOp {
                id: OpId(op),
                generation: Generation(1),
                release: V2,
                baseline: Some(V1),
                stage: AgentStage::Reporting(ReportKind::Switched, pass(V2)),
                budget_left: model::agent::ATTEMPT_BUDGET,
                verified: Default::default(),
                migration: None,
            }),
            highest_op: Some(OpId(op)),
            ..AgentState::default()
        }
    }

    #[test]
    fn an_agent_closes_its_own_settled_op() {
        let w = World::canary_verified(1, false);
        let closed = AgentEvent::Closed { op: OpId(0) };
        holds(s8_close_only_settled(&w.state, &reporting(0), &closed));
        // Any other agent event is not this rule's.
        let switched = AgentEvent::Switched {
            op: OpId(1),
            generation: Generation(1),
        };
        holds(s8_close_only_settled(&w.state, &reporting(1), &switched));
        // Archived once its rollout finished: still settled. A late settled
        // acknowledgement for it may close it (the checker found this).
        let mut archived = w.state.clone();
        let summary = archived.op_summary(OpId(0)).expect("op0 was granted");
        archived.ops.remove(&OpId(0));
        archived.archive.insert(OpId(0), summary);
        holds(s8_close_only_settled(&archived, &reporting(0), &closed));
    }

    #[test]
    fn an_agent_closing_another_op_or_an_unsettled_one_is_rejected() {
        let mut w = World::canary_verified(2, false);
        // op0 is settled; the agent holds op1 (not settled) and closes op0.
        w.switch(1, unreachable());
        let closed0 = AgentEvent::Closed { op: OpId(0) };
        let v = rejected(
            s8_close_only_settled(&w.state, &reporting(1), &closed0),
            Rule::S8,
        );
        assert!(v.detail.contains("while it holds op1"), "{v}");
        let idle = AgentState::default();
        rejected(s8_close_only_settled(&w.state, &idle, &closed0), Rule::S8);
        // Its own op, but the controller has not settled it.
        let closed1 = AgentEvent::Closed { op: OpId(1) };
        let v = rejected(
            s8_close_only_settled(&w.state, &reporting(1), &closed1),
            Rule::S8,
        );
        assert!(v.detail.contains("has not settled"), "{v}");
    }
}
