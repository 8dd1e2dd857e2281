//! Where a hot standby elected leader takes over from (issue #26): the
//! newest usable snapshot in the log plus the events after it, as a
//! restart starts, checked against the state the standby followed.
//!
//! A standby folds every event the leader appends (`daemon::ha`), so at
//! its election it already holds the state. The takeover still reads the
//! newest snapshot that verifies (a write cut short by the old leader's
//! death is skipped, named, as is any damaged one) and folds the tail
//! after it through the history rules; the result must equal the followed
//! state, else the takeover is refused (the standby stops: two folds of
//! one log that differ mean a bug, never something to lead on). The new
//! leader then leads from the snapshot's fold. Cost: one snapshot read
//! and the fold of at most one snapshot interval of events, at election.

use eventlog::SnapshotSkip;
use model::controller::ControllerState;

use crate::event_log::{ControllerError, ControllerLog};

/// What a takeover started from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TakeoverFrom {
    /// The snapshot's `covers`, `None` when no snapshot was usable (the
    /// followed state, folded from genesis or from the snapshot the
    /// standby started on, is used).
    pub snapshot: Option<u64>,
    /// Events folded after the snapshot.
    pub tail: usize,
    /// Newer snapshots skipped, newest first, and why (each logged).
    pub skipped: Vec<(u64, SnapshotSkip)>,
}

/// The state folded from the newest usable snapshot of `log` and the
/// events after it, after checking it equals `followed`; `None` without a
/// usable snapshot. Reads only.
pub fn from_snapshot(
    log: &ControllerLog,
    followed: &ControllerState,
) -> Result<(Option<ControllerState>, TakeoverFrom), ControllerError> {
    let (found, skipped) = log.read_snapshot_and_tail(|bytes: &[u8]| {
        crate::snapshot::decode_frame(bytes)
            .map(|(state, _annex)| state)
            .map_err(|e| e.to_string())
    })?;
    let Some((snapshot, tail)) = found else {
        let from = TakeoverFrom {
            snapshot: None,
            tail: 0,
            skipped,
        };
        return Ok((None, from));
    };
    let covers = snapshot.covers;
    let mut check = invariants::HistoryCheck::resume(snapshot.state, covers as usize);
    for (_, event) in &tail {
        check.push(event).map_err(rule_violated)?;
    }
    let state = check.finish().map_err(rule_violated)?;
    let end = covers + tail.len() as u64;
    if state != *followed {
        return Err(ControllerError::TakeoverDiverged { covers, end });
    }
    let from = TakeoverFrom {
        snapshot: Some(covers),
        tail: tail.len(),
        skipped,
    };
    Ok((Some(state), from))
}

fn rule_violated(err: invariants::HistoryViolation) -> ControllerError {
    ControllerError::RuleViolated {
        sequence: err.index as u64,
        violation: err.violation,
    }
}
