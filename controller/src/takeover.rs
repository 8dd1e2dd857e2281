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

use crate::driver::{ControllerError, ControllerLog};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::Controller;
    use eventlog::{LogStorage, RawEntry, SledStorage, StorageError};
    use model::controller::Input;
    use std::sync::{Arc, Mutex};

    /// One sled log shared by a leader and a standby (as etcd is), which
    /// can also say a snapshot write was cut short (as etcd's can).
    #[derive(Clone)]
    struct Shared {
        sled: Arc<SledStorage>,
        torn: Arc<Mutex<Vec<u64>>>,
    }

    impl LogStorage for Shared {
        fn append_batch(&self, entries: &[(u64, Vec<u8>)]) -> Result<(), StorageError> {
            self.sled.append_batch(entries)
        }
        fn flush(&self) -> Result<(), StorageError> {
            self.sled.flush()
        }
        fn read_from(
            &self,
            from: u64,
        ) -> Box<dyn Iterator<Item = Result<RawEntry, StorageError>> + '_> {
            self.sled.read_from(from)
        }
        fn last_sequence(&self) -> Result<Option<u64>, StorageError> {
            self.sled.last_sequence()
        }
        fn put_snapshot(&self, covers: u64, record: &[u8]) -> Result<(), StorageError> {
            self.sled.put_snapshot(covers, record)
        }
        fn snapshot_sequences(&self) -> Result<Vec<u64>, StorageError> {
            self.sled.snapshot_sequences()
        }
        fn incomplete_snapshots(&self) -> Result<Vec<u64>, StorageError> {
            Ok(self.torn.lock().map(|t| t.clone()).unwrap_or_default())
        }
        fn read_snapshot(&self, covers: u64) -> Result<Option<Vec<u8>>, StorageError> {
            self.sled.read_snapshot(covers)
        }
        fn delete_snapshot(&self, covers: u64) -> Result<(), StorageError> {
            if let Ok(mut torn) = self.torn.lock() {
                torn.retain(|c| *c != covers);
            }
            self.sled.delete_snapshot(covers)
        }
        fn live_start(&self) -> Result<eventlog::LiveStart, StorageError> {
            self.sled.live_start()
        }
        fn set_live_start(&self, start: &eventlog::LiveStart) -> Result<(), StorageError> {
            self.sled.set_live_start(start)
        }
        fn delete_below(&self, end: u64) -> Result<u64, StorageError> {
            self.sled.delete_below(end)
        }
    }

    struct TempDir(std::path::PathBuf);

    impl TempDir {
        fn new(tag: &str) -> Self {
            let dir = std::env::temp_dir()
                .join(format!("fleetweft-takeover-{tag}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            TempDir(dir)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn shared(dir: &TempDir) -> Shared {
        Shared {
            sled: Arc::new(SledStorage::create_or_open(&dir.0).expect("sled")),
            torn: Arc::default(),
        }
    }

    fn start(storage: &Shared) -> Controller {
        Controller::start_on_storage(Box::new(storage.clone()), |b: &[u8]| {
            Ok::<_, String>(b.to_vec())
        })
        .expect("start")
        .controller
    }

    fn enroll(leader: &mut Controller, from: usize, to: usize) {
        for i in from..to {
            let input = Input::EnrollNode {
                name: format!("edge-{i}"),
                labels: Default::default(),
                public: format!("192.0.2.{}:9000", i % 250 + 1),
            };
            let _ = leader.handle(input).expect("enrolled");
        }
    }

    #[test]
    fn a_standby_takes_over_from_the_newest_snapshot_plus_its_tail_skipping_a_torn_one() {
        let dir = TempDir::new("promote");
        let storage = shared(&dir);
        let mut leader = start(&storage);
        enroll(&mut leader, 0, 10);
        let mut standby = start(&storage);
        enroll(&mut leader, 10, 20);
        let first = leader.put_snapshot(b"").expect("snapshot").covers;
        enroll(&mut leader, 20, 30);
        let second = leader.put_snapshot(b"").expect("snapshot").covers;
        assert_eq!(standby.follow().expect("follows").len(), 20);
        enroll(&mut leader, 30, 35);
        // The leader dies inside its next snapshot write, and its own
        // prune would have removed the older snapshot already.
        let torn = second + 5;
        storage.torn.lock().expect("lock").push(torn);
        let promoted = standby
            .promote(Box::new(storage.clone()))
            .expect("takes over");
        assert_eq!(promoted.tail.len(), 5, "the events after the last poll");
        assert_eq!(
            promoted.from,
            TakeoverFrom {
                snapshot: Some(second),
                tail: 5,
                skipped: vec![(torn, SnapshotSkip::Incomplete)],
            }
        );
        assert!(first < second);
        assert_eq!(standby.state(), leader.state());
        assert_eq!(standby.last_sequence(), leader.last_sequence());
        let pruned = standby.prune_snapshots(1).expect("prunes");
        assert_eq!(pruned, vec![torn, first], "the torn write's parts go too");
    }

    #[test]
    fn a_takeover_refuses_a_followed_state_that_differs_from_the_snapshots_fold() {
        let dir = TempDir::new("diverged");
        let storage = shared(&dir);
        let mut leader = start(&storage);
        enroll(&mut leader, 0, 10);
        let covers = leader.put_snapshot(b"").expect("snapshot").covers;
        enroll(&mut leader, 10, 12);
        let log: crate::driver::ControllerLog =
            eventlog::EventLog::with_storage(Box::new(storage.clone()) as Box<dyn LogStorage>)
                .expect("opens")
                .0;
        let (state, from) = from_snapshot(&log, leader.state()).expect("agrees");
        assert_eq!(state.as_ref(), Some(leader.state()));
        assert_eq!(from.snapshot, Some(covers));
        assert!(matches!(
            from_snapshot(&log, &ControllerState::default()),
            Err(ControllerError::TakeoverDiverged { covers: c, end: 12 }) if c == covers
        ));
    }

    #[test]
    fn a_standby_the_archiving_overtook_catches_up_from_the_newest_snapshot() {
        let dir = TempDir::new("catch-up");
        let archive = TempDir::new("catch-up-archive");
        let storage = shared(&dir);
        let mut leader = start(&storage);
        enroll(&mut leader, 0, 5);
        let mut standby = start(&storage);
        enroll(&mut leader, 5, 30);
        let covers = leader.put_snapshot(b"").expect("snapshot").covers;
        enroll(&mut leader, 30, 33);
        leader
            .archiver()
            .archive(&archive.0, covers, &eventlog::ArchiveConfig::default())
            .expect("archives");
        assert!(matches!(
            standby.follow(),
            Err(ControllerError::Log(eventlog::LogError::BehindArchive { next: 5, first_live }))
                if first_live == covers
        ));
        let caught = standby
            .catch_up(|b: &[u8]| Ok::<_, String>(b.to_vec()))
            .expect("catches up");
        assert_eq!((caught.covers, caught.tail.len()), (covers, 3));
        assert_eq!(standby.state(), leader.state());
        enroll(&mut leader, 33, 35);
        assert_eq!(standby.follow().expect("follows on").len(), 2);
        assert_eq!(standby.state(), leader.state());
        assert_eq!(standby.last_sequence(), leader.last_sequence());
    }
}
