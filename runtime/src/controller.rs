//! [`Controller`]: the pure `model` controller around the durable log.
//!
//! The loop of SPEC §3: `step` decides, the log makes the events durable,
//! `apply` folds them, `effects` says what to send. This module holds no rule
//! of its own; every decision comes from [`model::controller::step`], and
//! the rules are checked by the `invariants` crate (always on open, and as
//! TIGER_STYLE assertions on every step, in release builds too).
//!
//! **No effect before flush (S7).** Effects leave [`Controller::handle`] only
//! inside a [`Ready`], and a `Ready` can only be built from a [`Durable`]
//! token, which only the log creates after the flush covering the events.

use std::path::Path;

use model::controller::{apply, effects, step, ControllerState, Effect, Event, Input, Refusal};

use crate::log::{Durable, EventLog, LogError};

/// Upper bound on one encoded controller event, in bytes (varint bincode):
/// the largest is a `RolloutStarted` naming [`FOLLOWERS_MAX`] followers (a
/// node id is at most 5 bytes) or an `OpClaimed` with two texts of
/// [`CLAIM_TEXT_MAX`] characters (at most 4 bytes each, plus a length),
/// each with under 128 bytes of fixed fields. The golden encoding test
/// measures the largest real ones against it.
///
/// [`FOLLOWERS_MAX`]: model::plan::FOLLOWERS_MAX
/// [`CLAIM_TEXT_MAX`]: model::controller::CLAIM_TEXT_MAX
pub const EVENT_BYTES_BOUND: usize = {
    let plan = 128 + model::plan::FOLLOWERS_MAX * 5;
    let claim = 128 + 2 * (9 + model::controller::CLAIM_TEXT_MAX * 4);
    if plan > claim {
        plan
    } else {
        claim
    }
};

// Every event the model can produce fits one log entry: an append can never
// fail for size on a valid input.
const _: () = assert!(EVENT_BYTES_BOUND <= eventlog::PAYLOAD_BYTES_MAX);

/// Why the controller could not start or could not handle an input.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    /// The model refused the input; nothing was recorded.
    #[error("input refused: {0}")]
    Refused(Refusal),
    /// The log failed: on open (corrupt, not a log, I/O) or on append. After
    /// an append failure the log is poisoned; restart to see what is durable.
    #[error(transparent)]
    Log(#[from] LogError),
    /// The log is intact but its history breaks a rule: the controller
    /// refuses to start rather than act on a state the rules never allow.
    #[error("refusing to start: the event at sequence {sequence} breaks {violation}")]
    RuleViolated {
        /// Sequence of the offending event.
        sequence: u64,
        /// The broken rule and what broke it.
        violation: invariants::Violation,
    },
}

/// What one handled input produced, once durable: the events with their
/// sequences and the effects to perform (sends, timers).
///
/// Built only by [`Ready::from_durable`], which takes the log's [`Durable`]
/// token: holding a `Ready` proves its events reached disk (S7).
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use = "a Ready carries effects the runtime must perform"]
pub struct Ready {
    events: Vec<(u64, Event)>,
    effects: Vec<Effect>,
}

impl Ready {
    /// The only constructor. Private: only `handle` pairs a durable batch
    /// with the effects derived from applying it.
    fn from_durable(durable: Durable<Vec<(u64, Event)>>, effects: Vec<Effect>) -> Self {
        Ready {
            events: durable.into_inner(),
            effects,
        }
    }

    /// The durable events, in sequence order.
    pub fn events(&self) -> &[(u64, Event)] {
        &self.events
    }

    /// The effects to perform, in the order the events produced them.
    pub fn effects(&self) -> &[Effect] {
        &self.effects
    }

    /// Takes the events and effects out.
    pub fn into_parts(self) -> (Vec<(u64, Event)>, Vec<Effect>) {
        (self.events, self.effects)
    }
}

/// The controller: its durable log and the state folded from it.
pub struct Controller {
    log: EventLog<Event>,
    state: ControllerState,
    /// Sequence of the last event applied, `None` for an empty log. Kept
    /// here because the log's own accessor can fail (poisoned mutex).
    last_sequence: Option<u64>,
}

impl Controller {
    /// Opens (or creates) the log in `dir`, verifies it, and rebuilds the
    /// state by replaying every event through `invariants::check_history`.
    ///
    /// Refuses to start, naming the sequence, if the log is corrupt or its
    /// history breaks a rule. Nothing is ever repaired.
    pub fn open(dir: impl AsRef<Path>) -> Result<Controller, ControllerError> {
        Ok(Self::open_with_events(dir)?.0)
    }

    /// [`Controller::open`], also handing back the replayed events (for the
    /// daemon's event feed).
    pub fn open_with_events(
        dir: impl AsRef<Path>,
    ) -> Result<(Controller, Vec<(u64, Event)>), ControllerError> {
        let (log, events) = EventLog::<Event>::open(dir)?;
        let state =
            invariants::check_history(events.iter().map(|(_, event)| event)).map_err(|err| {
                ControllerError::RuleViolated {
                    // The log returns events densely from sequence 0, but map
                    // through the list rather than assume it.
                    sequence: events
                        .get(err.index)
                        .map_or(err.index as u64, |(sequence, _)| *sequence),
                    violation: err.violation,
                }
            })?;
        let last_sequence = events.last().map(|(sequence, _)| *sequence);
        Ok((
            Controller {
                log,
                state,
                last_sequence,
            },
            events,
        ))
    }

    /// Handles one input: the model decides, the log makes the events
    /// durable, then they are applied and their effects collected.
    ///
    /// A refused input returns [`ControllerError::Refused`] and records
    /// nothing. On a log error nothing is applied; the log is poisoned.
    pub fn handle(&mut self, input: Input) -> Result<Ready, ControllerError> {
        let events = step(&self.state, &input).map_err(ControllerError::Refused)?;
        let durable = self.log.append(events)?;
        let mut out = Vec::new();
        let mut touched = invariants::Touched::default();
        for (sequence, event) in durable.get() {
            // Kept on in release builds (TIGER_STYLE): a rule broken here is
            // a bug in the model, and acting on it would release effects the
            // rules forbid. docs/performance.md measures what it costs.
            if let Err(violation) = invariants::check_event(&self.state, event) {
                panic!("model produced an event breaking a rule at sequence {sequence} ({event}): {violation}");
            }
            apply(&mut self.state, event);
            touched.add(&self.state, event);
            out.extend(effects(&self.state, event));
            self.last_sequence = Some(*sequence);
        }
        // State rules hold between batches, not between a batch's events (a
        // canary's failed probe is followed by its restore in the same batch).
        // Checked on what the batch touched: O(log n) per event.
        if let Err(violation) = invariants::check_state_touched(&self.state, &touched, None) {
            panic!(
                "state after sequence {:?} breaks a rule: {violation}",
                self.last_sequence
            );
        }
        Ok(Ready::from_durable(durable, out))
    }

    /// The current state: the fold of every durable event.
    pub fn state(&self) -> &ControllerState {
        &self.state
    }

    /// Sequence of the last durable event, `None` if the log is empty.
    pub fn last_sequence(&self) -> Option<u64> {
        self.last_sequence
    }

    /// Flushes and closes the log, reporting a failed final flush.
    pub fn close(self) -> Result<(), ControllerError> {
        self.log.close()?;
        Ok(())
    }
}
