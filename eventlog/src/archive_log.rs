//! [`EventLog::archive_to`]: moves the oldest entries of a live log into
//! archive segments, then out of the storage.
//!
//! **Order, and why a crash anywhere is harmless.** (1) The entries are
//! written as segments, each durable before the next step (see
//! `archive.rs`); (2) the new live start is recorded, durably; (3) the
//! archived entries are deleted from the storage. Cut after (1), the log
//! is unchanged and the archive holds segments the live log still holds
//! too: verification reads the overlap once and checks that both agree,
//! and the next run resumes after the last segment. Cut after (2), keys
//! below the live start remain: every reader starts at the live start, and
//! the next run deletes them. Nothing is ever deleted that is not in a
//! durable segment first.
//!
//! **What may be archived.** Only durable entries, and only entries a
//! start does not need: a start opens from the newest usable snapshot and
//! folds the entries after it, so nothing at or above the newest intact
//! snapshot's `covers` may leave the live log.

use std::ops::Range;
use std::path::Path;

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::archive::{list_segments, write_segments, ArchiveConfig, ArchiveError, SegmentWrite};
use super::envelope::{genesis_hash, hash_bytes, Hash};
use super::error::LogError;
use super::event_log::EventLog;
use super::snapshot::newest_intact_snapshot;
use super::storage::{LiveStart, LogStorage};

/// What [`EventLog::archive_to`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArchiveReport {
    /// The segments written by this call, in order (an identical one that
    /// was present already is listed as such).
    pub segments: Vec<SegmentWrite>,
    /// The sequences this call added to the archive (empty if none).
    pub archived: Range<u64>,
    /// The first live sequence afterwards.
    pub first_live: u64,
    /// Entry keys deleted from the storage by this call.
    pub deleted: u64,
}

impl<E: Serialize + DeserializeOwned, S: LogStorage> EventLog<E, S> {
    /// Archives the entries below `upto` into segments in `dir` (created
    /// if missing), records that the live log now starts at `upto`, and
    /// deletes them from the storage (module docs). Entries archived by an
    /// earlier call are not written again: the archive in `dir` must hold
    /// exactly this log's entries below its live start, and `upto` at or
    /// below the live start only finishes an interrupted deletion.
    ///
    /// Refused, before anything is written, for entries not yet durable
    /// ([`LogError::ArchiveAhead`]) and for entries at or above the newest
    /// intact snapshot's `covers` ([`LogError::ArchiveBeyondSnapshot`]):
    /// a start from that snapshot needs them. Damage met in the entries is
    /// refused too (verification error): damage is never archived.
    pub fn archive_to(
        &self,
        dir: &Path,
        upto: u64,
        config: &ArchiveConfig,
    ) -> Result<ArchiveReport, LogError> {
        config.validate()?;
        let start = self.storage().live_start()?;
        let (archive_end, archive_head) = self.archive_joins(dir, &start)?;
        let target = upto.max(archive_end).max(start.sequence);
        if target > start.sequence {
            self.check_archivable(target)?;
        }
        let segments = write_segments(
            dir,
            self.storage(),
            archive_end,
            target,
            archive_head,
            config,
        )?;
        let head = segments
            .last()
            .map_or(archive_head, |w| w.segment.last_hash);
        if target > start.sequence {
            let new_start = LiveStart {
                sequence: target,
                prev_hash: head,
            };
            self.storage().set_live_start(&new_start)?;
        }
        let deleted = self.storage().delete_below(target)?;
        Ok(ArchiveReport {
            segments,
            archived: archive_end..target.max(archive_end),
            first_live: target,
            deleted,
        })
    }

    /// Refuses archiving below `target` when a start could need an entry
    /// there, or when it is not durable yet.
    fn check_archivable(&self, target: u64) -> Result<(), LogError> {
        let durable_end = self.durable_end()?;
        if target > durable_end {
            return Err(LogError::ArchiveAhead {
                upto: target,
                durable_end,
            });
        }
        let snapshot_covers = newest_intact_snapshot(self.storage())?;
        if snapshot_covers.is_none_or(|covers| target > covers) {
            return Err(LogError::ArchiveBeyondSnapshot {
                upto: target,
                snapshot_covers,
            });
        }
        Ok(())
    }

    /// Where the archive in `dir` ends and its head hash, after checking
    /// that it is this log's: it reaches the live start, and at the start
    /// (or at its own end, when an interrupted run archived further) it
    /// has the same chain head as the log.
    fn archive_joins(&self, dir: &Path, start: &LiveStart) -> Result<(u64, Hash), LogError> {
        let segments = list_segments(dir)?;
        let (end, head) = segments
            .last()
            .map_or((0, genesis_hash()), |s| (s.to, s.last_hash));
        let boundary = |unlinked| ArchiveError::Boundary {
            archive_end: end,
            first_live: start.sequence,
            unlinked,
        };
        if end < start.sequence {
            return Err(boundary(false).into());
        }
        let head_at_start = if start.sequence == 0 {
            Some(genesis_hash())
        } else {
            segments
                .iter()
                .find(|s| s.to == start.sequence)
                .map(|s| s.last_hash)
        };
        if head_at_start != Some(start.prev_hash) {
            return Err(boundary(true).into());
        }
        if end > start.sequence && self.stored_hash(end - 1)? != Some(head) {
            return Err(ArchiveError::OverlapDiffers { sequence: end - 1 }.into());
        }
        Ok((end, head))
    }

    /// The hash of the stored entry `sequence`, `None` if it is not there.
    fn stored_hash(&self, sequence: u64) -> Result<Option<Hash>, LogError> {
        match self.storage().read_from(sequence).next() {
            Some(item) => {
                let raw = item?;
                Ok((raw.key == sequence.to_be_bytes()).then(|| hash_bytes(&raw.value)))
            }
            None => Ok(None),
        }
    }
}
