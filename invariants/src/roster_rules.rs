//! R1 the roster holds: a node joins the fleet once, under a name no other
//! node ever had, and its id is its enrollment order; nothing is granted to
//! a retired node; a node whose op still holds a slot is not retired (its
//! op could then never settle on evidence from it).
//!
//! Every check is one or two map look-ups (O(log n) in the fleet), so
//! `check_event` stays cheap at 100,000 nodes.

use crate::{broken, Rule, Violation};
use model::controller::{ControllerState, Event};

/// R1 on one event, judged against the state just before it.
pub fn r1_roster_holds(before: &ControllerState, event: &Event) -> Result<(), Violation> {
    let roster = &before.roster;
    match event {
        Event::NodeEnrolled { node, name, .. } => {
            if let Some(taken) = roster.id(name) {
                return broken(
                    Rule::RosterHolds,
                    format!("{node} enrolled as {name:?}, a name {taken} already has"),
                );
            }
            if *node != roster.next_id() {
                return broken(
                    Rule::RosterHolds,
                    format!(
                        "{node} enrolled as {name:?} out of order: the next id is {}",
                        roster.next_id()
                    ),
                );
            }
            Ok(())
        }
        Event::OpGranted { op, node, .. } if roster.is_retired(*node) => broken(
            Rule::RosterHolds,
            format!("{op} granted to {node}, which is retired"),
        ),
        Event::NodeRetired { node } => match before.nodes.get(node).and_then(|r| r.live_op) {
            Some(op) => broken(
                Rule::RosterHolds,
                format!("{node} retired while {op} holds its slot"),
            ),
            None => Ok(()),
        },
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::*;
    use model::controller::{apply, step, Input, Labels};
    use model::{Generation, NodeId, OpId};

    fn enroll(w: &mut World, name: &str) {
        w.input(Input::EnrollNode {
            name: name.into(),
            labels: Labels::new(),
            public: "127.0.0.1:8080".into(),
        });
    }

    fn enrolled(node: u32, name: &str) -> Event {
        Event::NodeEnrolled {
            node: NodeId(node),
            name: name.into(),
            labels: Labels::new(),
            public: "127.0.0.1:8080".into(),
        }
    }

    #[test]
    fn r1_holds_on_every_event_of_enrollments_a_rollout_and_a_retirement() {
        let mut w = World::new();
        for name in ["a", "b", "c"] {
            enroll(&mut w, name);
        }
        w.input(Input::StartRollout {
            plan: plan(1, false),
        });
        w.input(Input::RetireNode { name: "c".into() });
        let mut state = model::controller::ControllerState::default();
        for event in &w.log {
            holds(r1_roster_holds(&state, event));
            holds(crate::check_event(&state, event));
            apply(&mut state, event);
        }
        assert!(state.roster.is_retired(C));
    }

    #[test]
    fn r1_an_enrollment_out_of_order_or_under_a_taken_name_is_rejected() {
        let mut w = World::new();
        enroll(&mut w, "a");
        rejected(
            r1_roster_holds(&w.state, &enrolled(0, "b")),
            Rule::RosterHolds,
        );
        rejected(
            r1_roster_holds(&w.state, &enrolled(2, "b")),
            Rule::RosterHolds,
        );
        rejected(
            r1_roster_holds(&w.state, &enrolled(1, "a")),
            Rule::RosterHolds,
        );
        holds(r1_roster_holds(&w.state, &enrolled(1, "b")));
    }

    #[test]
    fn r1_a_grant_to_a_retired_node_is_rejected() {
        let mut w = World::new();
        for name in ["a", "b", "c"] {
            enroll(&mut w, name);
        }
        w.input(Input::RetireNode { name: "a".into() });
        let grant = Event::OpGranted {
            op: OpId(0),
            rollout: R0,
            node: A,
            release: V2,
            generation: Generation(1),
            baseline: None,
            is_canary: true,
        };
        rejected(r1_roster_holds(&w.state, &grant), Rule::RosterHolds);
        // The model itself refuses a plan naming it.
        assert!(step(
            &w.state,
            &Input::StartRollout {
                plan: plan(1, false)
            }
        )
        .is_err());
    }

    #[test]
    fn r1_retiring_a_node_whose_op_holds_a_slot_is_rejected() {
        let mut w = World::new();
        for name in ["a", "b", "c"] {
            enroll(&mut w, name);
        }
        w.input(Input::StartRollout {
            plan: plan(1, false),
        });
        rejected(
            r1_roster_holds(&w.state, &Event::NodeRetired { node: A }),
            Rule::RosterHolds,
        );
        // check_event runs R1.
        rejected(
            crate::check_event(&w.state, &Event::NodeRetired { node: A }),
            Rule::RosterHolds,
        );
        holds(r1_roster_holds(&w.state, &Event::NodeRetired { node: B }));
    }
}
