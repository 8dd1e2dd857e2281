//! (`snapshot` fault, issue #26) The controller's durable log as a restart
//! reads it: the events still held (an archived prefix is gone), and the
//! snapshots written beside them. Without the fault the checker keeps only
//! the fold (`World::durable`) and a restart starts from it; with it, a
//! restart rebuilds its state from this log as the real start does
//! (`eventlog::snapshot`): the newest snapshot that verifies, then the
//! events after it, every rule checked on each (`invariants::HistoryCheck`);
//! a snapshot that does not verify is skipped for an older one, or for
//! genesis and every event while nothing was archived.
//!
//! Every state of the checked world lies between batches (a batch is
//! appended, flushed and folded at once), so a snapshot of the durable state
//! is always one [`invariants::HistoryCheck::checkpoint`] allows: no repair
//! is owed there.

use invariants::{HistoryCheck, Rule, Violation};
use model::controller::{ControllerState, Event};

/// Snapshot writes along one path (torn ones included): two give a restart
/// an older snapshot to fall back on, and bound the space.
pub const SNAPSHOTS_MAX: usize = 2;

/// A snapshot record beside the log.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Snapshot {
    /// Log entries it claims to cover (its stamp): the state after entry
    /// `covers - 1`.
    pub covers: usize,
    /// The state its body holds. A torn write's body is not the state its
    /// stamp names: a loader that does not verify it reads the empty state
    /// (what a body cut off before its first byte leaves).
    pub state: ControllerState,
    /// Whether it verifies (checksum, link to the chain). A write torn by a
    /// crash does not.
    pub verified: bool,
}

/// What a restart reads: the log's entries not archived, and the snapshots.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct DurableLog {
    /// Entries `0..archived` were deleted by archiving.
    pub archived: usize,
    /// Entries `archived..`, in order: every durable event after the
    /// archived prefix.
    pub tail: Vec<Event>,
    /// Snapshots written, oldest (fewest entries covered) first.
    pub snapshots: Vec<Snapshot>,
}

/// Where a restart's state came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rebuilt {
    /// The state after the last entry.
    pub state: ControllerState,
    /// The `covers` of the snapshot it started from; `None` from genesis.
    pub from: Option<usize>,
    /// Entries folded after the snapshot (or genesis).
    pub replayed: usize,
    /// Newer snapshots skipped because they do not verify or their tail is
    /// gone, newest first (their `covers`).
    pub skipped: Vec<usize>,
}

impl DurableLog {
    /// Entries appended so far, archived ones included: the sequence the
    /// next entry gets.
    pub fn len(&self) -> usize {
        self.archived + self.tail.len()
    }

    /// Whether nothing was ever appended.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends a durable batch.
    pub fn append(&mut self, events: impl IntoIterator<Item = Event>) {
        self.tail.extend(events);
    }

    /// Whether a snapshot may be written now: fewer than
    /// [`SNAPSHOTS_MAX`] written, and entries the newest does not cover.
    pub fn may_snapshot(&self) -> bool {
        let covered = self.snapshots.last().map_or(0, |s| s.covers);
        self.snapshots.len() < SNAPSHOTS_MAX && self.len() > covered
    }

    /// Writes a snapshot of `state`, the fold of every entry so far.
    pub fn snapshot(&mut self, state: &ControllerState) {
        let covers = self.len();
        self.snapshots.push(Snapshot {
            covers,
            state: state.clone(),
            verified: true,
        });
    }

    /// A snapshot write cut short by a crash: stamped as covering every
    /// entry so far, it does not verify.
    pub fn torn_snapshot(&mut self) {
        let covers = self.len();
        self.snapshots.push(Snapshot {
            covers,
            state: ControllerState::default(),
            verified: false,
        });
    }

    /// The newest snapshot that verifies.
    pub fn newest_verified(&self) -> Option<&Snapshot> {
        self.snapshots.iter().rev().find(|s| s.verified)
    }

    /// Deletes the entries before `covers` (nothing if already deleted).
    pub fn archive_to(&mut self, covers: usize) {
        let drop = covers.saturating_sub(self.archived).min(self.tail.len());
        self.tail.drain(..drop);
        self.archived += drop;
    }

    /// The state a restart rebuilds: from the newest snapshot `trusted`
    /// takes (the real start: one that verifies) whose tail is whole, else
    /// from genesis while nothing was archived, folding the entries after
    /// it through [`HistoryCheck`]. `Err` when no start is possible (the
    /// archived entries are covered by no usable snapshot) or a replayed
    /// event breaks a rule.
    pub fn rebuild(&self, trusted: impl Fn(&Snapshot) -> bool) -> Result<Rebuilt, Violation> {
        let mut skipped = Vec::new();
        for snap in self.snapshots.iter().rev() {
            // A snapshot older than the archived prefix has lost its tail.
            if !trusted(snap) || snap.covers < self.archived {
                skipped.push(snap.covers);
                continue;
            }
            let check = HistoryCheck::resume(snap.state.clone(), snap.covers);
            return self.fold(check, Some(snap.covers), skipped);
        }
        if self.archived > 0 {
            return Err(Violation::new(
                Rule::RestartRebuildsTheFold,
                format!(
                    "no start is possible: entries 0..{} were archived and no snapshot that verifies covers them",
                    self.archived
                ),
            ));
        }
        self.fold(HistoryCheck::new(), None, skipped)
    }

    /// Folds the entries from `from` (genesis: 0) onwards into `check`.
    fn fold(
        &self,
        mut check: HistoryCheck,
        from: Option<usize>,
        skipped: Vec<usize>,
    ) -> Result<Rebuilt, Violation> {
        let start = from.unwrap_or(0) - self.archived;
        for event in &self.tail[start..] {
            check.push(event).map_err(|v| v.violation)?;
        }
        let state = check.finish().map_err(|v| v.violation)?;
        Ok(Rebuilt {
            state,
            from,
            replayed: self.tail.len() - start,
            skipped,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::controller::{apply, step, Input};
    use model::{Digest, NodeId, Plan};

    /// A log of a started rollout (its events in two batches) and its fold.
    fn started() -> (DurableLog, ControllerState) {
        let mut log = DurableLog::default();
        let mut state = ControllerState::default();
        let inputs = [
            Input::FromAgent {
                node: NodeId(0),
                msg: model::ToController::Hello {
                    serving: Some(Digest::repeat(1)),
                    generation: model::Generation(0),
                },
            },
            Input::StartRollout {
                plan: Plan {
                    release: Digest::repeat(2),
                    canary: NodeId(0),
                    followers: vec![],
                    slots_max: 1,
                    approval_after_canary: false,
                },
            },
        ];
        for input in inputs {
            let events = step(&state, &input).expect("accepted");
            events.iter().for_each(|e| apply(&mut state, e));
            log.append(events);
        }
        (log, state)
    }

    #[test]
    fn a_restart_rebuilds_from_genesis_from_a_snapshot_and_past_a_torn_one() {
        let (mut log, fold) = started();
        let genesis = log.rebuild(|s| s.verified).expect("a start");
        assert_eq!((genesis.state.clone(), genesis.from), (fold.clone(), None));
        log.snapshot(&fold);
        log.archive_to(log.newest_verified().map_or(0, |s| s.covers));
        assert_eq!(log.tail.len(), 0);
        let from_snapshot = log.rebuild(|s| s.verified).expect("a start");
        assert_eq!(from_snapshot.state, fold);
        assert_eq!(from_snapshot.from, Some(log.len()));
        // A torn write after it is skipped; trusting it loses the state.
        log.torn_snapshot();
        let real = log.rebuild(|s| s.verified).expect("a start");
        assert_eq!((real.state, real.skipped.len()), (fold.clone(), 1));
        let trusting = log.rebuild(|_| true).expect("a start");
        assert_ne!(trusting.state, fold);
    }

    #[test]
    fn archiving_past_the_newest_verified_snapshot_leaves_no_start() {
        let (mut log, _) = started();
        log.torn_snapshot();
        log.archive_to(log.len());
        let err = log.rebuild(|s| s.verified).expect_err("no start");
        assert_eq!(err.rule, Rule::RestartRebuildsTheFold);
    }
}
