//! O1 an operator acts within its role (issue #28 item 2): once operators
//! are recorded, every event only an operator's input makes follows the
//! `Acted` that heads its batch, and the operator named there is recorded,
//! not revoked, and holds a role at least the one the event needs.
//!
//! The roles each event needs are written here from the events, not taken
//! from `model::controller::roles::required_role` (which the model
//! states over inputs): a model that let a viewer approve is caught by the
//! two disagreeing.

use crate::{Rule, Violation};
use model::controller::{ActedBy, ControllerState, Event, PauseReason, Role};

/// The role an event needs from whoever acted, `None` for an event that
/// is not only an operator's (agents', deadlines', the controller's own).
fn needs(event: &Event, by: Option<&ActedBy>) -> Option<Role> {
    Some(match event {
        Event::RolloutStarted { .. }
        | Event::ConfigSet { .. }
        | Event::RolloutResumed { .. }
        | Event::RolloutPaused {
            reason: PauseReason::Operator,
            ..
        } => Role::Deployer,
        Event::RolloutApproved { .. }
        | Event::OperatorObserved { .. }
        | Event::OpClaimed { .. }
        | Event::RollBackOrdered { .. } => Role::Approver,
        Event::NodeEnrolled { .. }
        | Event::NodeLabeled { .. }
        | Event::NodeRetired { .. }
        | Event::NodeReleased { .. }
        | Event::CertRevoked { .. }
        | Event::OperatorAdded { .. }
        | Event::OperatorRevoked { .. } => Role::Admin,
        Event::CredentialRotated { name, .. } => match by {
            Some(ActedBy::Operator(actor)) if actor == name => Role::Viewer,
            _ => Role::Admin,
        },
        _ => return None,
    })
}

/// O1 over the events of one batch ([`OperatorActs::batch`]) or of a
/// history read from a log ([`OperatorActs::history`], where batch
/// boundaries are not recorded: an event is judged against the latest
/// `Acted` before it, which in a log the rules wrote is its batch's).
/// O(1) per event but for an `OperatorAdded` while operators exist.
#[derive(Clone, Debug, Default)]
pub struct OperatorActs {
    actor: Option<ActedBy>,
    /// Some while judging one batch: whether the next event is its first.
    at_head: Option<bool>,
}

impl OperatorActs {
    /// For the events of one input, in order.
    pub fn batch() -> Self {
        OperatorActs {
            actor: None,
            at_head: Some(true),
        }
    }

    /// For a whole history, in order.
    pub fn history() -> Self {
        OperatorActs::default()
    }

    /// O1 on `event`, about to be applied to `before`.
    pub fn check(&mut self, before: &ControllerState, event: &Event) -> Result<(), Violation> {
        // Over a history every `Acted` may head a batch.
        let first = match &mut self.at_head {
            Some(at_head) => std::mem::replace(at_head, false),
            None => true,
        };
        if let Event::Acted { by } = event {
            if !first {
                return Err(broken(format!(
                    "{event} inside a batch: who acted heads the batch"
                )));
            }
            if let ActedBy::Operator(name) = by {
                if before.operators.get(name).is_none_or(|r| r.revoked) {
                    return Err(broken(format!(
                        "{event} names operator {name}, which is not recorded or is revoked"
                    )));
                }
            }
            self.actor = Some(by.clone());
            return Ok(());
        }
        let Some(role) = needs(event, self.actor.as_ref()) else {
            return Ok(());
        };
        self.judge(before, event, role)
    }

    /// `event` needs `role`: whoever acted must hold it.
    fn judge(&self, before: &ControllerState, event: &Event, role: Role) -> Result<(), Violation> {
        let word = model::controller::words::role;
        match &self.actor {
            // Before operators (and the bootstrap's first one) the rules
            // are the old ones.
            None if before.operators.is_empty() => Ok(()),
            None => Err(broken(format!(
                "\"{event}\" with no operator recorded as acting, while operators exist"
            ))),
            Some(ActedBy::ControllerConfig) => match event {
                Event::NodeEnrolled { .. } => Ok(()),
                _ => Err(broken(format!(
                    "\"{event}\" by controller.toml, which may only enroll nodes"
                ))),
            },
            Some(ActedBy::Operator(name)) => {
                let has = before.operators.get(name).map(|r| r.role);
                match has {
                    Some(has) if has >= role => Ok(()),
                    Some(has) => Err(broken(format!(
                        "\"{event}\" by operator {name}, who has the {} role: it needs {}",
                        word(has),
                        word(role)
                    ))),
                    None => Err(broken(format!(
                        "\"{event}\" by operator {name}, which is not recorded"
                    ))),
                }
            }
        }
    }
}

fn broken(detail: String) -> Violation {
    Violation::new(Rule::OperatorHasTheRole, detail)
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::{Digest, RolloutId};

    fn operators() -> ControllerState {
        let mut state = ControllerState::default();
        for (name, role, byte) in [("root", Role::Admin, 1), ("vera", Role::Viewer, 2)] {
            let event = Event::OperatorAdded {
                name: name.into(),
                role,
                credential: Digest::repeat(byte),
            };
            model::controller::apply(&mut state, &event);
        }
        state
    }

    fn acted(name: &str) -> Event {
        Event::Acted {
            by: ActedBy::Operator(name.into()),
        }
    }

    #[test]
    fn a_viewers_approval_breaks_o1_and_an_admins_does_not() {
        let state = operators();
        let approved = Event::RolloutApproved {
            rollout: RolloutId(0),
        };
        let mut acts = OperatorActs::batch();
        acts.check(&state, &acted("vera"))
            .expect("vera is recorded");
        let v = acts
            .check(&state, &approved)
            .expect_err("a viewer approved");
        assert_eq!(v.rule, Rule::OperatorHasTheRole);
        assert!(v.detail.contains("viewer") && v.detail.contains("approver"));
        let mut acts = OperatorActs::batch();
        acts.check(&state, &acted("root")).expect("root");
        acts.check(&state, &approved).expect("an admin approves");
    }

    #[test]
    fn over_a_history_every_acted_heads_its_batch() {
        let state = operators();
        let approved = Event::RolloutApproved {
            rollout: RolloutId(0),
        };
        let mut acts = OperatorActs::history();
        for _ in 0..2 {
            acts.check(&state, &acted("root")).expect("a batch's head");
            acts.check(&state, &approved).expect("the admin's");
        }
        acts.check(&state, &acted("vera")).expect("a batch's head");
        assert!(acts.check(&state, &approved).is_err(), "the viewer's");
    }

    #[test]
    fn an_operator_event_without_an_actor_breaks_o1_once_operators_exist() {
        let approved = Event::RolloutApproved {
            rollout: RolloutId(0),
        };
        let before = ControllerState::default();
        OperatorActs::batch()
            .check(&before, &approved)
            .expect("no operators yet");
        let v = OperatorActs::batch().check(&operators(), &approved);
        assert!(v.is_err_and(|v| v.detail.contains("no operator")));
        let mut late = OperatorActs::batch();
        late.check(&operators(), &approved).ok();
        assert!(late.check(&operators(), &acted("root")).is_err());
    }
}
