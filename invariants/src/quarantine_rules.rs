//! Q1 quarantine silences: after an identity conflict two agents hold a
//! node's identity, so a command could reach either. Nothing is granted to
//! a quarantined node and no command is sent to it until an operator
//! releases it.

use crate::{broken, Rule, Violation};
use model::controller::{apply, effects, ControllerState, Effect, Event};

/// Q1 on one event: it grants nothing to a node quarantined before it, and
/// the effects it produces send nothing to a node quarantined after it.
/// Costs nothing while no node is quarantined and the event quarantines
/// none (the model checker's default configuration).
pub fn q1_quarantine_silences(before: &ControllerState, event: &Event) -> Result<(), Violation> {
    if let Event::OpGranted { op, node, .. } = event {
        if before.is_quarantined(*node) {
            return broken(
                Rule::QuarantineSilences,
                format!("{op} granted to {node}, which is quarantined"),
            );
        }
    }
    if before.quarantined.is_empty() && !matches!(event, Event::NodeQuarantined { .. }) {
        return Ok(());
    }
    let mut after = before.clone();
    apply(&mut after, event);
    q1_no_command_to_quarantined(&after, &effects(&after, event))
}

/// Q1 on effects about to be performed in `state`: none sends a command to
/// a quarantined node.
pub fn q1_no_command_to_quarantined(
    state: &ControllerState,
    effects: &[Effect],
) -> Result<(), Violation> {
    for effect in effects {
        if let Effect::Send { to, msg } = effect {
            if state.is_quarantined(*to) {
                return broken(
                    Rule::QuarantineSilences,
                    format!("{msg:?} sent to {to}, which is quarantined"),
                );
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::*;
    use model::controller::{step, Input};
    use model::{Generation, OpId, ToAgent};

    fn conflict(node: model::NodeId) -> Input {
        Input::IdentityConflict {
            node,
            first_peer: "10.0.0.1:1".into(),
            second_peer: "10.0.0.2:2".into(),
        }
    }

    #[test]
    fn q1_holds_on_every_event_of_a_quarantine_and_release() {
        let mut w = World::new();
        w.input(conflict(B));
        w.input(Input::StartRollout {
            plan: plan(2, false),
        });
        w.input(Input::ReleaseNode { node: B });
        w.input(conflict(A));
        let mut state = ControllerState::default();
        for event in &w.log {
            holds(q1_quarantine_silences(&state, event));
            apply(&mut state, event);
        }
        assert!(state.is_quarantined(A));
    }

    #[test]
    fn q1_a_grant_to_a_quarantined_node_is_rejected() {
        let mut w = World::new();
        w.input(conflict(A));
        let grant = Event::OpGranted {
            op: OpId(0),
            rollout: R0,
            node: A,
            release: V2,
            generation: Generation(1),
            baseline: None,
            is_canary: true,
        };
        rejected(
            q1_quarantine_silences(&w.state, &grant),
            Rule::QuarantineSilences,
        );
        // The model itself never makes one.
        let events = step(
            &w.state,
            &Input::StartRollout {
                plan: plan(1, false),
            },
        )
        .expect("start");
        assert!(!events.iter().any(|e| matches!(e, Event::OpGranted { .. })));
    }

    #[test]
    fn q1_a_command_to_a_quarantined_node_is_rejected() {
        let mut w = World::new();
        w.input(conflict(A));
        let apply_cmd = Effect::Send {
            to: A,
            msg: ToAgent::Apply {
                op: OpId(0),
                generation: Generation(1),
                release: V2,
            },
        };
        rejected(
            q1_no_command_to_quarantined(&w.state, &[apply_cmd]),
            Rule::QuarantineSilences,
        );
        let to_b = Effect::Send {
            to: B,
            msg: ToAgent::Apply {
                op: OpId(0),
                generation: Generation(1),
                release: V2,
            },
        };
        holds(q1_no_command_to_quarantined(&w.state, &[to_b]));
    }
}
