//! The yardstick the checker's speed is measured against (issue #27 item 4):
//! stateright's own two-phase-commit example, `examples/2pc.rs` of
//! stateright 0.31 (MIT, Jonathan Nadal and contributors), kept here
//! unchanged in its rules so `fleetweft-check-bench` can run it in the same
//! sitting as our model. Only the symmetry reduction is left out (the
//! example's `check`, which the benchmark repeats, does not use it).

use std::collections::BTreeSet;
use std::ops::Range;

use stateright::{Model, Property};

/// A resource manager, numbered `0..N`.
type R = usize;

/// The two-phase-commit system with `rms` resource managers.
#[derive(Clone)]
pub struct TwoPhaseSys {
    /// The resource managers.
    pub rms: Range<R>,
}

/// A state of the system.
#[derive(Clone, Debug, Eq, Hash, PartialEq)]
pub struct TwoPhaseState {
    rm_state: Vec<RmState>,
    tm_state: TmState,
    tm_prepared: Vec<bool>,
    msgs: BTreeSet<Message>,
}

#[derive(Clone, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
enum Message {
    Prepared { rm: R },
    Commit,
    Abort,
}

#[derive(Clone, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
enum RmState {
    Working,
    Prepared,
    Committed,
    Aborted,
}

#[derive(Clone, Debug, Eq, Hash, PartialEq)]
enum TmState {
    Init,
    Committed,
    Aborted,
}

/// A step of the system.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// The transaction manager receives a `Prepared`.
    TmRcvPrepared(R),
    /// The transaction manager commits.
    TmCommit,
    /// The transaction manager aborts.
    TmAbort,
    /// A resource manager prepares.
    RmPrepare(R),
    /// A resource manager chooses to abort.
    RmChooseToAbort(R),
    /// A resource manager receives the commit.
    RmRcvCommitMsg(R),
    /// A resource manager receives the abort.
    RmRcvAbortMsg(R),
}

impl Model for TwoPhaseSys {
    type State = TwoPhaseState;
    type Action = Action;

    fn init_states(&self) -> Vec<Self::State> {
        vec![TwoPhaseState {
            rm_state: self.rms.clone().map(|_| RmState::Working).collect(),
            tm_state: TmState::Init,
            tm_prepared: self.rms.clone().map(|_| false).collect(),
            msgs: Default::default(),
        }]
    }

    fn actions(&self, state: &Self::State, actions: &mut Vec<Self::Action>) {
        if state.tm_state == TmState::Init && state.tm_prepared.iter().all(|p| *p) {
            actions.push(Action::TmCommit);
        }
        if state.tm_state == TmState::Init {
            actions.push(Action::TmAbort);
        }
        for rm in self.rms.clone() {
            if state.tm_state == TmState::Init && state.msgs.contains(&Message::Prepared { rm }) {
                actions.push(Action::TmRcvPrepared(rm));
            }
            if state.rm_state.get(rm) == Some(&RmState::Working) {
                actions.push(Action::RmPrepare(rm));
            }
            if state.rm_state.get(rm) == Some(&RmState::Working) {
                actions.push(Action::RmChooseToAbort(rm));
            }
            if state.msgs.contains(&Message::Commit) {
                actions.push(Action::RmRcvCommitMsg(rm));
            }
            if state.msgs.contains(&Message::Abort) {
                actions.push(Action::RmRcvAbortMsg(rm));
            }
        }
    }

    fn next_state(&self, last_state: &Self::State, action: Self::Action) -> Option<Self::State> {
        let mut state = last_state.clone();
        match action {
            Action::TmRcvPrepared(rm) => {
                state.tm_prepared[rm] = true;
            }
            Action::TmCommit => {
                state.tm_state = TmState::Committed;
                state.msgs.insert(Message::Commit);
            }
            Action::TmAbort => {
                state.tm_state = TmState::Aborted;
                state.msgs.insert(Message::Abort);
            }
            Action::RmPrepare(rm) => {
                state.rm_state[rm] = RmState::Prepared;
                state.msgs.insert(Message::Prepared { rm });
            }
            Action::RmChooseToAbort(rm) => {
                state.rm_state[rm] = RmState::Aborted;
            }
            Action::RmRcvCommitMsg(rm) => {
                state.rm_state[rm] = RmState::Committed;
            }
            Action::RmRcvAbortMsg(rm) => {
                state.rm_state[rm] = RmState::Aborted;
            }
        }
        Some(state)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::<Self>::sometimes("abort agreement", |_, state| {
                state.rm_state.iter().all(|s| s == &RmState::Aborted)
            }),
            Property::<Self>::sometimes("commit agreement", |_, state| {
                state.rm_state.iter().all(|s| s == &RmState::Committed)
            }),
            Property::<Self>::always("consistent", |_, state| {
                !state.rm_state.iter().any(|s1| {
                    state
                        .rm_state
                        .iter()
                        .any(|s2| s1 == &RmState::Aborted && s2 == &RmState::Committed)
                })
            }),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stateright::Checker;

    /// The counts stateright's own test pins for this example.
    #[test]
    fn the_yardstick_is_stateright_s_2pc() {
        let checker = TwoPhaseSys { rms: 0..3 }.checker().spawn_bfs().join();
        assert_eq!(checker.unique_state_count(), 288);
        checker.assert_properties();
        let checker = TwoPhaseSys { rms: 0..5 }.checker().spawn_bfs().join();
        assert_eq!(checker.unique_state_count(), 8_832);
    }
}
