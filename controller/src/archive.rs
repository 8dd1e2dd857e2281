//! Archiving the controller's history (issue #26 item 2): which entries
//! may leave the live log, and a handle that archives beside the core.
//!
//! **What may be archived** ([`archive_upto`]): entries below the newest
//! snapshot (a start folds only what is after it; the event log refuses
//! more), *and* outside both retention windows of `[log]`: more than
//! `keep_events` behind the log's end, and appended more than `keep_days`
//! days ago (0 turns a window off). Events carry no time, so an entry's
//! age is its snapshot's: an entry is known to be older than a day once a
//! snapshot covering it was written more than a day ago. The daemon
//! remembers when it wrote or loaded each snapshot ([`SnapshotTimes`]);
//! a snapshot loaded at start counts as written at start (snapshots do
//! not record a time), so after a restart the age window only errs
//! towards keeping more.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use eventlog::{ArchiveConfig, ArchiveReport, LogError, StorageSpace};

use crate::event_log::ControllerLog;

/// Seconds in a day, for `keep_days`.
const DAY_S: u64 = 86_400;

/// Most snapshot times remembered: older ones are merged (the newest of
/// those past the age window is all the rule needs).
const SNAPSHOT_TIMES_MAX: usize = 4_096;

/// The retention windows of `[log]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retention {
    /// Entries kept behind the end (0: no count window).
    pub keep_events: u64,
    /// Days kept (0: no age window).
    pub keep_days: u64,
}

/// When each snapshot this process knows of was written: `(covers, at)`,
/// oldest first.
#[derive(Clone, Debug, Default)]
pub struct SnapshotTimes {
    marks: VecDeque<(u64, SystemTime)>,
}

impl SnapshotTimes {
    /// Remembers that a snapshot covering `covers` entries was written
    /// (or loaded) at `at`.
    pub fn record(&mut self, covers: u64, at: SystemTime) {
        if self.marks.back().is_some_and(|(c, _)| *c >= covers) {
            return;
        }
        self.marks.push_back((covers, at));
        if self.marks.len() > SNAPSHOT_TIMES_MAX {
            self.marks.pop_front();
        }
    }

    /// Entries covered by a snapshot written at or before `cutoff` (the
    /// newest such), 0 if none.
    pub fn covered_at(&self, cutoff: SystemTime) -> u64 {
        self.marks
            .iter()
            .rev()
            .find(|(_, at)| *at <= cutoff)
            .map_or(0, |(covers, _)| *covers)
    }

    /// Forgets every mark older than the newest one at or before
    /// `cutoff` (it answers for them all).
    pub fn forget_before(&mut self, cutoff: SystemTime) {
        while self.marks.len() > 1 && self.marks.get(1).is_some_and(|(_, at)| *at <= cutoff) {
            self.marks.pop_front();
        }
    }
}

/// The end (exclusive) of what may be archived in a log of `end` entries
/// whose newest snapshot covers `snapshot_covers`, at `now` (module docs).
pub fn archive_upto(
    end: u64,
    snapshot_covers: u64,
    retention: Retention,
    times: &SnapshotTimes,
    now: SystemTime,
) -> u64 {
    let by_count = if retention.keep_events == 0 {
        end
    } else {
        end.saturating_sub(retention.keep_events)
    };
    let by_age = if retention.keep_days == 0 {
        end
    } else {
        let window = Duration::from_secs(retention.keep_days.saturating_mul(DAY_S));
        match now.checked_sub(window) {
            Some(cutoff) => times.covered_at(cutoff),
            None => 0,
        }
    };
    snapshot_covers.min(by_count).min(by_age)
}

/// A handle on the controller's log for archiving beside the core: the
/// event log's archiving runs beside appends (it reads durable entries,
/// records the new live start, deletes below it; `eventlog::archive_log`).
#[derive(Clone)]
pub struct Archiver {
    pub(crate) log: Arc<ControllerLog>,
}

impl Archiver {
    /// Archives the entries below `upto` into `dir` and deletes them from
    /// the live log, then compacts the storage's history of the deletes
    /// (etcd). Refused by the event log past the newest intact snapshot or
    /// the durable end.
    pub fn archive(
        &self,
        dir: &Path,
        upto: u64,
        config: &ArchiveConfig,
    ) -> Result<Archived, LogError> {
        let report = self.log.archive_to(dir, upto, config)?;
        let compacted_to = self.log.storage().compact_deleted()?;
        Ok(Archived {
            report,
            compacted_to,
        })
    }

    /// The first live sequence (entries below it are archived).
    pub fn first_live(&self) -> Result<u64, LogError> {
        Ok(self.log.storage().live_start()?.sequence)
    }

    /// The storage's size and quota, as the engine reports them.
    pub fn space(&self) -> Result<Option<StorageSpace>, LogError> {
        Ok(self.log.storage().space()?)
    }
}

/// What one [`Archiver::archive`] did.
#[derive(Debug, Clone)]
pub struct Archived {
    /// The event log's report.
    pub report: ArchiveReport,
    /// The etcd revision compacted to after the deletes, if any.
    pub compacted_to: Option<i64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(s)
    }

    #[test]
    fn archiving_stops_at_the_snapshot_and_at_both_windows() {
        let none = SnapshotTimes::default();
        let off = Retention {
            keep_events: 0,
            keep_days: 0,
        };
        assert_eq!(archive_upto(1_000, 600, off, &none, at(0)), 600);
        let count = Retention {
            keep_events: 300,
            keep_days: 0,
        };
        assert_eq!(archive_upto(1_000, 600, count, &none, at(0)), 600);
        assert_eq!(archive_upto(1_000, 900, count, &none, at(0)), 700);
        assert_eq!(archive_upto(200, 100, count, &none, at(0)), 0);
        let days = Retention {
            keep_events: 0,
            keep_days: 1,
        };
        assert_eq!(
            archive_upto(1_000, 900, days, &none, at(10 * DAY_S)),
            0,
            "no snapshot time known: nothing is old enough"
        );
        let mut times = SnapshotTimes::default();
        times.record(100, at(DAY_S));
        times.record(400, at(2 * DAY_S));
        times.record(800, at(3 * DAY_S));
        assert_eq!(archive_upto(1_000, 900, days, &times, at(2 * DAY_S)), 100);
        assert_eq!(
            archive_upto(1_000, 900, days, &times, at(3 * DAY_S + 1)),
            400
        );
        assert_eq!(archive_upto(1_000, 900, days, &times, at(9 * DAY_S)), 800);
        let both = Retention {
            keep_events: 700,
            keep_days: 1,
        };
        assert_eq!(archive_upto(1_000, 900, both, &times, at(9 * DAY_S)), 300);
        times.forget_before(at(2 * DAY_S + 1));
        assert_eq!(times.covered_at(at(2 * DAY_S + 1)), 400);
        assert_eq!(times.covered_at(at(DAY_S)), 0, "the older mark is merged");
        times.record(700, at(4 * DAY_S));
        assert_eq!(times.covered_at(at(5 * DAY_S)), 800, "no going back");
    }
}
