//! Agent-side rules: judged on the agent's journal records.

use crate::{broken, Rule, Violation};
use model::agent::{AgentEvent, AgentState};

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
    Ok(())
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
        }
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
