//! The controller state machine: `step` decides, `apply` folds, `effects`
//! derives what to send. Pure: no IO, no clock, no randomness, no threads.

pub mod apply;
pub mod effects;
pub mod event;
pub mod input;
pub mod operators;
pub mod release_use;
pub mod roles;
pub mod roster;
pub mod snapshot;
pub mod state;
pub mod step;
pub mod timers;
pub mod words;

pub use apply::{apply, referents_exist, MissingReferent};
pub use effects::{current_command, effects, Effect};
pub use event::Event;
pub use input::Input;
pub use operators::{ActedBy, Actor, OperatorRecord, Operators, Role};
pub use release_use::ReleaseUse;
pub use roles::OffLogAction;
pub use roster::{Labels, Roster, RosterEntry, RosterLimit};
pub use state::*;
pub use step::{
    check_arches, decision_for, node_actions, operator_actions, progress, rollout_actions, step,
    step_in_place, Fold, NodeAction, OperatorAction, Refusal, RolloutAction,
};
pub use timers::{waits_on_deadline, Timers};

/// Rebuild a controller state by folding events in order: what a restart
/// does with the durable log.
pub fn replay<'a>(events: impl IntoIterator<Item = &'a Event>) -> ControllerState {
    let mut state = ControllerState::default();
    for event in events {
        apply(&mut state, event);
    }
    state
}
