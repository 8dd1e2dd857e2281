//! Agent-side rules: judged on the agent's journal records.

use crate::{broken, words, Rule, Violation};
use model::agent::{AgentEvent, AgentState};
use model::controller::{ControllerState, OpPhase, Outcome, Resolution};

/// S8 on the agent: a journal record that acts on a command (accept, switch,
/// abort, restore) never carries a generation lower than one the agent has
/// already accepted. Such a command must be refused and the refusal
/// reported, never applied.
pub fn s8_no_stale_apply(before: &AgentState, event: &AgentEvent) -> Result<(), Violation> {
    let (op, generation, act) = match *event {
        AgentEvent::Accepted { op, generation, .. } => (op, generation, "accepted"),
        AgentEvent::Switched { op, generation } => (op, generation, "switched the route for"),
        AgentEvent::AbortAccepted { op, generation } => (op, generation, "aborted"),
        AgentEvent::AbortedUnseen { op, generation, .. } => {
            (op, generation, "aborted (never received)")
        }
        AgentEvent::Restored { op, generation } => (op, generation, "restored the baseline for"),
        AgentEvent::Refused { .. }
        | AgentEvent::Probed { .. }
        | AgentEvent::Restarted { .. }
        | AgentEvent::Closed { .. } => return Ok(()),
    };
    if generation < before.accepted {
        return broken(
            Rule::S8,
            format!(
                "the agent {act} {op} under {generation} after it had accepted {}",
                before.accepted
            ),
        );
    }
    // Starting an op at or below one already taken on is a late copy: op
    // ids only grow.
    let starts = matches!(
        event,
        AgentEvent::Accepted { .. } | AgentEvent::AbortedUnseen { .. }
    );
    if let Some(highest) = before.highest_op.filter(|h| starts && op <= *h) {
        return broken(
            Rule::S8,
            format!("the agent {act} {op} after it had already taken on {highest}"),
        );
    }
    Ok(())
}

/// S8 across the wire: a node switches its route for an op only while the
/// controller's record still allows that switch: the op unsettled, or
/// settled as the switch (verified, confirmed new) or abandoned (serving
/// state declared unknown). A switch for an op the controller settled on
/// the baseline (confirmed baseline, rolled back, not applied) is a late
/// command producing a second, conflicting change: the controller would
/// believe one release while the node serves another. Symmetrically, a
/// restore for an op settled on the new release (verified, confirmed new).
///
/// `controller` is the controller's durable state when the agent journals
/// `event`. Only the checker sees both sides at once; the runtime cannot.
pub fn s8_switch_agrees_with_record(
    controller: &ControllerState,
    event: &AgentEvent,
) -> Result<(), Violation> {
    let (op, restores) = match *event {
        AgentEvent::Switched { op, .. } => (op, false),
        AgentEvent::Restored { op, .. } => (op, true),
        _ => return Ok(()),
    };
    let Some(o) = controller.op(op) else {
        return Ok(()); // the controller never granted it: S7 says so
    };
    let OpPhase::Settled(outcome) = o.phase else {
        return Ok(());
    };
    // Abandon declares the serving state unknown: nothing to contradict.
    let on_new = matches!(
        outcome,
        Outcome::Verified | Outcome::Resolved(Resolution::ConfirmNew)
    );
    let agrees = outcome == Outcome::Resolved(Resolution::Abandon) || on_new != restores;
    if agrees {
        return Ok(());
    }
    let what = if restores {
        "restored the baseline"
    } else {
        "switched to the new release"
    };
    broken(
        Rule::S8,
        format!(
            "{} {what} for {op} after the controller settled it {}",
            o.node,
            words::outcome(outcome)
        ),
    )
}

/// All agent rules: today only [`s8_no_stale_apply`].
pub fn check_agent_event(before: &AgentState, event: &AgentEvent) -> Result<(), Violation> {
    s8_no_stale_apply(before, event)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::*;
    use model::agent::{agent_apply, agent_step, AgentInput};
    use model::{Generation, OpId, ToAgent};

    fn journal_at(accepted: u64) -> AgentState {
        AgentState {
            accepted: Generation(accepted),
            serving: Some(V1),
            op: None,
            highest_op: None,
        }
    }

    #[test]
    fn s8_an_op_id_at_or_below_one_taken_on_is_a_late_copy() {
        let mut before = journal_at(1);
        before.highest_op = Some(OpId(4));
        let newer = AgentEvent::Accepted {
            op: OpId(5),
            generation: Generation(1),
            release: V2,
        };
        holds(s8_no_stale_apply(&before, &newer));
        let again = AgentEvent::Accepted {
            op: OpId(4),
            generation: Generation(1),
            release: V2,
        };
        let v = rejected(s8_no_stale_apply(&before, &again), Rule::S8);
        assert_eq!(
            v.detail,
            "the agent accepted op4 after it had already taken on op4"
        );
        let unseen = AgentEvent::AbortedUnseen {
            op: OpId(2),
            generation: Generation(1),
            release: V2,
        };
        rejected(s8_no_stale_apply(&before, &unseen), Rule::S8);
        // The core itself ignores such a late copy: a duplicated Apply of
        // an op the agent closed starts nothing.
        let out = agent_step(
            &before,
            AgentInput::Command(ToAgent::Apply {
                op: OpId(4),
                generation: Generation(1),
                release: V2,
            }),
        );
        assert!(out.events.is_empty(), "{:?}", out.events);
        let out = agent_step(
            &before,
            AgentInput::Command(ToAgent::CommitReply {
                op: OpId(3),
                generation: Generation(1),
                release: V2,
                decision: model::Decision::Abort,
            }),
        );
        assert!(out.events.is_empty(), "{:?}", out.events);
    }

    #[test]
    fn s8_a_switch_must_agree_with_the_controllers_record() {
        use model::controller::Resolution;
        let switched = AgentEvent::Switched {
            op: OpId(0),
            generation: Generation(1),
        };
        let mut w = World::new();
        w.start(plan(1, false));
        // Unsettled (granted, then decided): the switch is expected.
        holds(s8_switch_agrees_with_record(&w.state, &switched));
        w.ask_commit(0);
        holds(s8_switch_agrees_with_record(&w.state, &switched));
        // Settled as the switch: fine.
        let mut verified = w.clone();
        verified.report(0, model::ReportKind::Switched, pass(V2));
        holds(s8_switch_agrees_with_record(&verified.state, &switched));
        // Settled on the baseline: a switch now contradicts the record.
        // The real rules refuse this resolution under a stored Commit, so
        // build the state by hand.
        let mut baseline = w.clone();
        baseline.event(model::controller::Event::OpSettled {
            op: OpId(0),
            outcome: Outcome::Resolved(Resolution::ConfirmBaseline),
        });
        let v = rejected(
            s8_switch_agrees_with_record(&baseline.state, &switched),
            Rule::S8,
        );
        assert_eq!(
            v.detail,
            "node-a switched to the new release for op0 after the controller settled it resolved by an operator (baseline)"
        );
        // Abandoned: the operator declared the serving state unknown.
        let mut abandoned = w.clone();
        abandoned.resolve(0, pass(V1), Resolution::Abandon);
        holds(s8_switch_agrees_with_record(&abandoned.state, &switched));
        // A restore for an op settled on the new release contradicts it;
        // one for an op settled on the baseline agrees.
        let restored = AgentEvent::Restored {
            op: OpId(0),
            generation: Generation(1),
        };
        let v = rejected(
            s8_switch_agrees_with_record(&verified.state, &restored),
            Rule::S8,
        );
        assert_eq!(
            v.detail,
            "node-a restored the baseline for op0 after the controller settled it verified"
        );
        holds(s8_switch_agrees_with_record(&baseline.state, &restored));
        holds(s8_switch_agrees_with_record(&abandoned.state, &restored));
    }

    #[test]
    fn s8_no_stale_apply_passes_on_current_and_newer_commands() {
        let before = journal_at(2);
        let same = AgentEvent::Accepted {
            op: OpId(3),
            generation: Generation(2),
            release: V2,
        };
        holds(s8_no_stale_apply(&before, &same));
        let newer = AgentEvent::Restored {
            op: OpId(3),
            generation: Generation(5),
        };
        holds(s8_no_stale_apply(&before, &newer));
        // Records that act on no command carry no generation to judge.
        holds(s8_no_stale_apply(
            &before,
            &AgentEvent::Refused {
                op: OpId(0),
                reason: model::StageRefusal::BundleRejected,
            },
        ));
        holds(s8_no_stale_apply(
            &before,
            &AgentEvent::Probed {
                op: OpId(0),
                observation: pass(V1),
            },
        ));
        holds(s8_no_stale_apply(
            &before,
            &AgentEvent::Restarted { serving: None },
        ));
    }

    #[test]
    fn s8_stale_apply_is_rejected() {
        let before = journal_at(2);
        let stale = [
            AgentEvent::Accepted {
                op: OpId(0),
                generation: Generation(1),
                release: V2,
            },
            AgentEvent::Switched {
                op: OpId(0),
                generation: Generation(1),
            },
            AgentEvent::AbortAccepted {
                op: OpId(0),
                generation: Generation(1),
            },
            AgentEvent::Restored {
                op: OpId(0),
                generation: Generation(1),
            },
        ];
        for event in stale {
            rejected(s8_no_stale_apply(&before, &event), Rule::S8);
        }
        let v = rejected(s8_no_stale_apply(&before, &stale[0]), Rule::S8);
        assert_eq!(
            v.detail,
            "the agent accepted op0 under gen 1 after it had accepted gen 2"
        );
    }

    #[test]
    fn check_agent_event_passes_on_a_real_agent_refusing_a_stale_command() {
        let mut journal = journal_at(0);
        let commands = [
            ToAgent::Apply {
                op: OpId(1),
                generation: Generation(2),
                release: V3,
            },
            // A late, duplicated apply of gen 1: refused, nothing journaled.
            ToAgent::Apply {
                op: OpId(0),
                generation: Generation(1),
                release: V2,
            },
            ToAgent::CommitReply {
                op: OpId(1),
                generation: Generation(2),
                release: V3,
                decision: model::Decision::Commit,
            },
        ];
        for cmd in commands {
            let out = agent_step(&journal, AgentInput::Command(cmd));
            for event in &out.events {
                holds(check_agent_event(&journal, event));
                agent_apply(&mut journal, event);
            }
        }
        assert_eq!(journal.serving, Some(V3));
    }

    #[test]
    fn check_agent_event_rejects_a_stale_switch() {
        let before = journal_at(3);
        let stale = AgentEvent::Switched {
            op: OpId(0),
            generation: Generation(2),
        };
        rejected(check_agent_event(&before, &stale), Rule::S8);
    }
}
