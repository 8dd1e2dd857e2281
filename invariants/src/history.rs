//! Whole histories: fold an event log and check every step of it.

use crate::scoped::{check_state_touched, Touched};
use crate::{check_event, Rule, Violation};
use model::controller::{apply, ControllerState, Event};
use model::{OpId, RolloutId};
use std::fmt;

/// A rule broken somewhere in a history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HistoryViolation {
    /// Index (from 0) of the offending event in the history.
    pub index: usize,
    /// The broken rule and what broke it.
    pub violation: Violation,
}

impl fmt::Display for HistoryViolation {
    /// `"event #12: S3 evidence releases a slot: op0 settled verified but …"`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "event #{}: {}", self.index, self.violation)
    }
}

impl std::error::Error for HistoryViolation {}

/// Fold `events` from `ControllerState::default()` with
/// `model::controller::apply`, running [`check_event`] before and the state
/// rules on what it touched ([`check_state_touched`]) after every event, so
/// a replay costs O(log n) per event. Returns the final state.
///
/// Two exceptions, because the log does not mark where a step's batch ends:
/// - the state right after a failed probe of a canary is recorded breaks
///   S11 (a failed probe, no restore requested yet), and the very next
///   event of the same batch is the `RestoreRequested` that repairs it;
/// - the state right after the event that takes a rollout over its
///   failure budget (a follower's `RestoreRequested` one failure past
///   `max_failed`, an `OpUnknown` reaching `max_unknown`) breaks B1 (over
///   budget, not paused), and the very next event of the same batch is the
///   `RolloutPaused` of that rollout that repairs it.
///
/// Such a state is let through *only if* the next event is the repair;
/// otherwise the violation is reported at the event that left it owed,
/// also when the history ends there.
pub fn check_history<'a>(
    events: impl IntoIterator<Item = &'a Event>,
) -> Result<ControllerState, HistoryViolation> {
    let mut check = HistoryCheck::new();
    for event in events {
        check.push(event)?;
    }
    check.finish()
}

/// [`check_history`] one event at a time, for a log that grows while it is
/// read (a hot standby following the leader's log): the same checks, the
/// same owed-repair exceptions, across calls.
#[derive(Clone, Debug)]
pub struct HistoryCheck {
    state: ControllerState,
    /// Index the next event gets.
    next: usize,
    /// A repair the previous event left owed: (its index, the repair, the
    /// violation to report if the repair does not come next).
    owed: Option<(usize, Owed, Violation)>,
    /// O1 across the history: who acted last.
    acts: crate::OperatorActs,
}

impl Default for HistoryCheck {
    fn default() -> Self {
        Self::new()
    }
}

impl HistoryCheck {
    /// From `ControllerState::default()`, the first event indexed 0.
    pub fn new() -> Self {
        Self::resume(ControllerState::default(), 0)
    }

    /// From `state`, a state between inputs that a checked history of
    /// `next` events left (its next event gets index `next`, e.g. the log
    /// sequence).
    pub fn resume(state: ControllerState, next: usize) -> Self {
        HistoryCheck {
            state,
            next,
            owed: None,
            acts: crate::OperatorActs::history(),
        }
    }

    /// Checks and folds one event; on `Err` the check must not go on.
    pub fn push(&mut self, event: &Event) -> Result<(), HistoryViolation> {
        let index = self.next;
        self.next += 1;
        if let Some((at, repair, violation)) = self.owed.take() {
            if !repair.is(event) {
                return Err(HistoryViolation {
                    index: at,
                    violation,
                });
            }
        }
        check_event(&self.state, event)
            .and_then(|()| self.acts.check(&self.state, event))
            .map_err(|violation| HistoryViolation { index, violation })?;
        apply(&mut self.state, event);
        let touched = Touched::of(&self.state, event);
        if let Err(violation) = check_state_touched(&self.state, &touched, None) {
            let repair = restore_owed(&self.state, &touched, event, &violation)
                .map(Owed::Restore)
                .or_else(|| pause_owed(&self.state, &touched, event, &violation).map(Owed::Pause));
            match repair {
                Some(repair) => self.owed = Some((index, repair, violation)),
                None => return Err(HistoryViolation { index, violation }),
            }
        }
        Ok(())
    }

    /// The state folded so far (mid-batch while a repair is owed).
    pub fn state(&self) -> &ControllerState {
        &self.state
    }

    /// Whether no repair is owed: the state is one between inputs.
    pub fn is_settled(&self) -> bool {
        self.owed.is_none()
    }

    /// The state and the index its next event gets, when a snapshot may be
    /// taken here: no repair is owed, so the state is one between inputs
    /// and [`HistoryCheck::resume`] from it (e.g. from a decoded snapshot
    /// stamped with the index as the log sequence it covers) checks the
    /// rest of the history exactly as this check would. `None` mid-batch,
    /// after an event that left a repair owed: a snapshot there would drop
    /// the obligation (resuming forgets it) and let a missing repair pass.
    pub fn checkpoint(&self) -> Option<(&ControllerState, usize)> {
        self.owed.is_none().then_some((&self.state, self.next))
    }

    /// The index the next event gets: events checked so far, plus the
    /// index this check was resumed at.
    pub fn next_index(&self) -> usize {
        self.next
    }

    /// The final state, or the violation of a repair still owed.
    pub fn finish(self) -> Result<ControllerState, HistoryViolation> {
        match self.owed {
            Some((index, _, violation)) => Err(HistoryViolation { index, violation }),
            None => Ok(self.state),
        }
    }
}

/// The event a mid-batch state waits for.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Owed {
    /// S11: the restore of this op.
    Restore(OpId),
    /// B1: a pause of this rollout.
    Pause(RolloutId),
}

impl Owed {
    fn is(self, event: &Event) -> bool {
        match (self, event) {
            (Owed::Restore(op), Event::RestoreRequested { op: o }) => op == *o,
            (Owed::Pause(r), Event::RolloutPaused { rollout, .. }) => r == *rollout,
            _ => false,
        }
    }
}

/// The rollout whose pause `event` left owed, when that is the only thing
/// wrong with `state`: `event` took it over its failure budget (B1 is
/// checked before S11 per rollout, so the check without the rollout must
/// pass for the exception to apply).
fn pause_owed(
    state: &ControllerState,
    touched: &Touched,
    event: &Event,
    violation: &Violation,
) -> Option<RolloutId> {
    if violation.rule != Rule::FailureBudget {
        return None;
    }
    let op = match event {
        Event::RestoreRequested { op } | Event::OpUnknown { op, .. } => *op,
        _ => return None,
    };
    let rollout = state.op(op)?.rollout;
    let mut others = touched.clone();
    others.rollouts.retain(|r| *r != rollout);
    check_state_touched(state, &others, None).ok()?;
    let r = state.rollout(rollout)?;
    (r.over_budget() && r.paused.is_none()).then_some(rollout)
}

/// The op whose restore `event` left owed, when that is the only thing
/// wrong with `state`. `check_state` runs S11 last, so an S11 violation
/// means S1, S2 and S4 hold.
fn restore_owed(
    state: &ControllerState,
    touched: &Touched,
    event: &Event,
    violation: &Violation,
) -> Option<OpId> {
    if violation.rule != Rule::S11 {
        return None;
    }
    let op = match event {
        Event::ReportRecorded { op, .. } | Event::ProbeRecorded { op, .. } => *op,
        _ => return None,
    };
    check_state_touched(state, touched, Some(op))
        .ok()
        .map(|()| op)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::*;
    use model::controller::{Input, OpPhase, Outcome, Resolution};
    use model::ReportKind;

    #[test]
    fn check_history_accepts_a_clean_rollout_and_returns_its_state() {
        let mut w = World::canary_verified(2, true);
        w.input(Input::Approve { rollout: R0 });
        w.switch(1, pass(V2));
        w.switch(2, pass(V2));
        let state = check_history(&w.log).unwrap();
        assert_eq!(state, w.state);
        assert_eq!(
            state.rollouts[0].status,
            model::controller::RolloutStatus::Completed
        );
    }

    #[test]
    fn check_history_accepts_a_wrong_answer_restored_in_the_same_batch() {
        let mut w = World::canary_wrong();
        w.report(0, ReportKind::Restored, pass(V1));
        // The same story through a controller probe.
        w.start(plan(1, false));
        w.ask_commit(1);
        w.input(Input::RouteProbed {
            node: A,
            observation: wrong(V2),
        });
        assert_eq!(w.op(1).phase, OpPhase::Restoring);
        w.resolve(1, pass(V1), Resolution::ConfirmBaseline);
        let state = check_history(&w.log).unwrap();
        // op0's rollout finished and node-a has a newer op: archived.
        assert_eq!(
            state.op_summary(OpId(0)).unwrap().outcome,
            Some(Outcome::RolledBack)
        );
        assert_eq!(state, w.state);
    }

    #[test]
    fn check_history_rejects_a_log_cut_between_failed_probe_and_restore() {
        let w = World::canary_wrong();
        let at = w
            .log
            .iter()
            .position(|e| matches!(e, Event::RestoreRequested { .. }))
            .unwrap();
        let err = check_history(&w.log[..at]).unwrap_err();
        assert_eq!(err.index, at - 1);
        assert_eq!(err.violation.rule, Rule::S11);
        // Anything but the restore next is rejected just the same.
        let mut swapped = w.log[..at].to_vec();
        swapped.push(Event::RolloutPaused {
            rollout: R0,
            reason: model::controller::PauseReason::ProbeFailed { op: OpId(0) },
        });
        swapped.push(w.log[at].clone());
        let err = check_history(&swapped).unwrap_err();
        assert_eq!((err.index, err.violation.rule), (at - 1, Rule::S11));
    }

    #[test]
    fn check_history_rejects_a_settle_without_evidence_at_its_index() {
        let mut w = World::new();
        w.start(plan(1, false));
        w.input(Input::Timeout { op: OpId(0) });
        w.event(Event::OpSettled {
            op: OpId(0),
            outcome: Outcome::NotApplied,
        });
        let err = check_history(&w.log).unwrap_err();
        assert_eq!(err.index, w.log.len() - 1);
        assert_eq!(err.violation.rule, Rule::S3);
        assert!(
            err.to_string().starts_with(&format!(
                "event #{}: S3 evidence releases a slot: op0 settled not-applied",
                err.index
            )),
            "{err}"
        );
    }

    #[test]
    fn check_history_rejects_a_state_rule_broken_by_an_event() {
        let mut w = World::new();
        w.start(plan(3, false));
        // A restore request for a settled op would take its slot back: no
        // transition rule is about it, the state rules catch the result
        // (node-a's record no longer names its unsettled op).
        w.switch(0, pass(V2));
        let at = w.log.len();
        w.event(Event::RestoreRequested { op: OpId(0) });
        let err = check_history(&w.log).unwrap_err();
        assert_eq!(err.index, at);
        assert_eq!(err.violation.rule, Rule::S2);
    }

    #[test]
    fn check_history_of_nothing_is_the_default_state() {
        assert_eq!(check_history([]).unwrap(), ControllerState::default());
    }

    /// A forged log naming an op that was never granted is refused by name
    /// at its index; the fold (`apply`, which asserts W1) never sees it.
    #[test]
    fn check_history_refuses_an_event_for_an_op_never_granted() {
        let mut w = World::new();
        w.start(plan(1, false));
        let mut log = w.log.clone();
        log.push(Event::OpClaimed {
            op: OpId(4),
            owner: "ops".into(),
            review_by: "tomorrow".into(),
        });
        let err = check_history(&log).unwrap_err();
        assert_eq!(err.index, log.len() - 1);
        assert_eq!(err.violation.rule, Rule::NamesWhatExists);
        assert!(
            err.to_string().contains("op op4, which was never granted"),
            "{err}"
        );
    }

    /// A follower that fails one past `max_failed`: the log holds its
    /// restore and, next, the pause that repairs B1 (scenario 18 found
    /// `log verify` refusing exactly such a log).
    fn over_budget(max_unknown: Option<u32>) -> World {
        let mut w = World::new();
        w.input(Input::StartStaged {
            plan: plan(2, false),
            policy: model::plan::Policy {
                wave_ends: vec![1, 2],
                approval_between_waves: false,
                max_failed: Some(0),
                max_unknown,
            },
            arches: model::platform::ReleaseArches::Any,
            deploys: None,
        });
        w.switch(0, pass(V2));
        w.switch(1, wrong(V2));
        w
    }

    #[test]
    fn check_history_lets_the_state_before_a_budget_pause_through_only_if_the_pause_comes_next() {
        let w = over_budget(None);
        let restore = w
            .log
            .iter()
            .position(|e| *e == Event::RestoreRequested { op: OpId(1) })
            .expect("the failed follower's restore");
        assert!(
            matches!(w.log[restore + 1], Event::RolloutPaused { rollout: R0, .. }),
            "{:?}",
            w.log
        );
        let state = check_history(&w.log).expect("a budget pause is sound");
        assert!(state.rollouts[0].paused.is_some());
        // Without the pause, B1 is broken at the restore, also when the
        // history ends there.
        let mut unpaused = w.log.clone();
        unpaused.remove(restore + 1);
        let err = check_history(&unpaused).unwrap_err();
        assert_eq!(
            (err.index, err.violation.rule),
            (restore, Rule::FailureBudget)
        );
        let err = check_history(&w.log[..=restore]).unwrap_err();
        assert_eq!(
            (err.index, err.violation.rule),
            (restore, Rule::FailureBudget)
        );
    }

    /// Checks `log` from genesis, then, at every point where
    /// [`HistoryCheck::checkpoint`] allows a snapshot, encodes the state as
    /// a snapshot, decodes it, resumes from it and checks the tail: the
    /// verdict (final state or violation, index included) must be the
    /// same. Returns the checkpoints taken.
    fn resuming_from_every_checkpoint_agrees(log: &[Event]) -> Vec<usize> {
        use model::controller::snapshot::{decode_state, encode_state};
        let from_genesis = check_history(log);
        let mut check = HistoryCheck::new();
        let mut taken = Vec::new();
        for cut in 0..=log.len() {
            if let Some((state, next)) = check.checkpoint() {
                assert_eq!(next, cut, "the checkpoint's index is the events folded");
                let bytes = encode_state(state).expect("encodes");
                let decoded = decode_state(&bytes).expect("decodes");
                let mut resumed = HistoryCheck::resume(decoded, next);
                let verdict = log[cut..]
                    .iter()
                    .try_for_each(|event| resumed.push(event))
                    .and_then(|()| resumed.finish());
                assert_eq!(verdict, from_genesis, "resumed at {cut}");
                taken.push(cut);
            }
            let Some(event) = log.get(cut) else { break };
            if check.push(event).is_err() {
                break;
            }
        }
        taken
    }

    #[test]
    fn resuming_from_a_snapshot_at_a_checkpoint_gives_the_same_verdict() {
        // A clean history: the same final state from every checkpoint.
        let mut w = World::canary_verified(2, true);
        w.input(Input::Approve { rollout: R0 });
        w.switch(1, pass(V2));
        w.switch(2, pass(V2));
        let taken = resuming_from_every_checkpoint_agrees(&w.log);
        assert_eq!(taken.len(), w.log.len() + 1, "no repair is ever owed");

        // A wrong answer and its restore: no checkpoint between the two.
        let mut w = World::canary_wrong();
        w.report(0, ReportKind::Restored, pass(V1));
        let restore = w
            .log
            .iter()
            .position(|e| matches!(e, Event::RestoreRequested { .. }))
            .expect("the restore");
        let taken = resuming_from_every_checkpoint_agrees(&w.log);
        assert!(!taken.contains(&restore), "mid-batch, a repair is owed");
        assert!(taken.contains(&(restore + 1)));
    }

    #[test]
    fn a_violation_after_a_checkpoint_is_found_when_resuming_from_its_snapshot() {
        // B1: the pause that repairs the budget is missing, well after the
        // first checkpoints.
        let w = over_budget(None);
        let restore = w
            .log
            .iter()
            .position(|e| *e == Event::RestoreRequested { op: OpId(1) })
            .expect("the failed follower's restore");
        let mut unpaused = w.log.clone();
        unpaused.remove(restore + 1);
        let taken = resuming_from_every_checkpoint_agrees(&unpaused);
        assert!(
            taken.iter().any(|&cut| cut > 0 && cut < restore),
            "{taken:?}"
        );
        // S3: a settle without evidence as the last event.
        let mut w = World::new();
        w.start(plan(1, false));
        w.input(Input::Timeout { op: OpId(0) });
        w.event(Event::OpSettled {
            op: OpId(0),
            outcome: Outcome::NotApplied,
        });
        let taken = resuming_from_every_checkpoint_agrees(&w.log);
        assert!(taken.contains(&(w.log.len() - 1)), "{taken:?}");
        let err = check_history(&w.log).unwrap_err();
        assert_eq!(err.violation.rule, Rule::S3);
    }

    #[test]
    fn check_history_lets_the_state_before_an_unknown_budget_pause_through() {
        let mut w = World::new();
        w.input(Input::StartStaged {
            plan: plan(2, false),
            policy: model::plan::Policy {
                wave_ends: vec![],
                approval_between_waves: false,
                max_failed: None,
                max_unknown: Some(1),
            },
            arches: model::platform::ReleaseArches::Any,
            deploys: None,
        });
        w.input(Input::Timeout { op: OpId(0) });
        let unknown = w
            .log
            .iter()
            .position(|e| matches!(e, Event::OpUnknown { .. }))
            .expect("the canary went UNKNOWN");
        assert!(matches!(
            w.log[unknown + 1],
            Event::RolloutPaused { rollout: R0, .. }
        ));
        check_history(&w.log).expect("an unknown-budget pause is sound");
        let err = check_history(&w.log[..=unknown]).unwrap_err();
        assert_eq!(
            (err.index, err.violation.rule),
            (unknown, Rule::FailureBudget)
        );
    }
}
