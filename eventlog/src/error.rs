//! Errors of [`EventLog`](super::EventLog) operations.

use super::archive::ArchiveError;
use super::envelope::{EnvelopeFault, PayloadError};
use super::storage::StorageError;
use super::verify::VerifyError;

/// Why an [`EventLog`](super::EventLog) operation failed.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// The storage layer failed (I/O, engine-reported corruption, not a log).
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// The log failed verification when opened; it is not used.
    #[error("refusing to open the log: {0}")]
    Verify(VerifyError),
    /// An event could not be encoded (or is over the payload limit).
    #[error(transparent)]
    Payload(#[from] PayloadError),
    /// An envelope failed its own validation just before writing: a bug in
    /// this crate, caught before anything reached disk.
    #[error("internal error: entry {sequence} failed validation before writing: {fault}")]
    InvalidEntry {
        /// The sequence it was meant for.
        sequence: u64,
        /// What validation found.
        fault: EnvelopeFault,
    },
    /// More events in one append than [`APPEND_EVENTS_MAX`](super::APPEND_EVENTS_MAX).
    #[error("an append of {len} events exceeds the limit of {max}")]
    BatchTooLarge {
        /// Events in the rejected append.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// More payload bytes in one append than
    /// [`APPEND_BYTES_MAX`](super::APPEND_BYTES_MAX).
    #[error("an append of {bytes} payload bytes exceeds the limit of {max}")]
    BatchBytesTooLarge {
        /// Payload bytes in the rejected append.
        bytes: usize,
        /// The limit.
        max: usize,
    },
    /// The append is larger than the storage can apply atomically (its
    /// [`BatchLimits`](super::BatchLimits), e.g. etcd's transaction limits).
    /// Refused before anything was written; the log stays usable. The log
    /// never splits one append over several storage batches.
    #[error(
        "an append of {entries} events (at most {bytes} encoded bytes) exceeds the storage's \
         atomic batch limit of {entries_max} entries / {bytes_max} bytes"
    )]
    ExceedsStorageBatch {
        /// Events in the rejected append.
        entries: usize,
        /// Upper bound of the append's encoded size.
        bytes: usize,
        /// The storage's entries limit.
        entries_max: usize,
        /// The storage's bytes limit.
        bytes_max: usize,
    },
    /// A snapshot was asked for entries not yet durable: a crash could
    /// lose them and leave a snapshot of a log that never was.
    #[error(
        "a snapshot covering {covers} entries was refused: only {durable_end} entries are durable"
    )]
    SnapshotAhead {
        /// Entries the snapshot would cover.
        covers: u64,
        /// Entries durable now.
        durable_end: u64,
    },
    /// A snapshot's state is over
    /// [`SNAPSHOT_STATE_BYTES_MAX`](super::SNAPSHOT_STATE_BYTES_MAX).
    #[error("a snapshot state of {bytes} bytes exceeds the {max}-byte limit")]
    SnapshotTooLarge {
        /// Bytes of the refused state.
        bytes: usize,
        /// The limit.
        max: usize,
    },
    /// The entry a new snapshot would link to (`covers - 1`) could not be
    /// read as that entry; nothing was stored.
    #[error("cannot stamp a snapshot: entry {sequence} is unusable ({detail})")]
    SnapshotUnlinked {
        /// The entry it would link to.
        sequence: u64,
        /// What was wrong with it.
        detail: String,
    },
    /// A follower's next entry was archived (deleted from the live log)
    /// before it read it: it must catch up from a snapshot
    /// ([`EventLog::catch_up_from_snapshot`](super::EventLog::catch_up_from_snapshot)).
    #[error("the entries from {next} were archived before this follower read them (the live log starts at {first_live})")]
    BehindArchive {
        /// The entry the follower needed next.
        next: u64,
        /// The first live sequence.
        first_live: u64,
    },
    /// The entries read after a snapshot (a takeover's
    /// [`read_snapshot_and_tail`](super::EventLog::read_snapshot_and_tail))
    /// end elsewhere than the log's durable end.
    #[error("the entries after the snapshot of the first {covers} entries end at {tail_end}, the log at {end}")]
    SnapshotTailMismatch {
        /// What the snapshot covers.
        covers: u64,
        /// Where the walk after it ended.
        tail_end: u64,
        /// The log's durable end.
        end: u64,
    },
    /// The log's entries below `first_live` were archived and no usable
    /// snapshot covers at least `first_live` entries, so a start would need
    /// archived entries: the log is not opened (nothing was changed).
    /// `snapshot_covers` is the newest stored snapshot's, usable or not
    /// (the warnings name why each was skipped).
    #[error(
        "refusing to open the log: its entries below sequence {first_live} are archived and no \
         usable snapshot covers at least {first_live} entries ({})",
        match snapshot_covers {
            Some(covers) => format!("the newest snapshot covers {covers}"),
            None => "there is no snapshot".to_string(),
        }
    )]
    HistoryArchived {
        /// The first live sequence.
        first_live: u64,
        /// The newest stored snapshot's `covers`, `None` if there is none.
        snapshot_covers: Option<u64>,
    },
    /// Archiving up to `upto` was refused: a start opens from the newest
    /// usable snapshot and folds the entries after it, so no entry at or
    /// above its `covers` may leave the live log.
    #[error(
        "archiving up to sequence {upto} was refused: {}",
        match snapshot_covers {
            Some(covers) => format!(
                "the newest intact snapshot covers only {covers} entries, and a start needs \
                 every entry after it"
            ),
            None => "there is no intact snapshot, and a start needs every entry".to_string(),
        }
    )]
    ArchiveBeyondSnapshot {
        /// The requested end of the archived range.
        upto: u64,
        /// The newest intact snapshot's `covers`, `None` if there is none.
        snapshot_covers: Option<u64>,
    },
    /// Archiving up to `upto` was refused: entries at or above
    /// `durable_end` are not durable yet.
    #[error("archiving up to sequence {upto} was refused: only {durable_end} entries are durable")]
    ArchiveAhead {
        /// The requested end of the archived range.
        upto: u64,
        /// Entries durable now.
        durable_end: u64,
    },
    /// Writing or reading the archive failed, or the archive does not
    /// continue the log.
    #[error(transparent)]
    Archive(#[from] ArchiveError),
    /// An earlier storage failure (or a panic inside the log) left the log
    /// in an unknown state; no further appends are accepted. Reopen the log
    /// to see what reached disk.
    #[error("the log is unusable after an earlier storage failure; reopen it")]
    Poisoned,
}

impl LogError {
    /// Whether this error means the log lost its right to append (another
    /// controller leads): stop acting at once. Later appends on the same
    /// log return [`LogError::Poisoned`]; keep the first error's answer.
    pub fn is_fencing(&self) -> bool {
        matches!(self, LogError::Storage(storage) if storage.is_fencing())
    }
}

impl From<VerifyError> for LogError {
    /// Keeps storage failures as [`LogError::Storage`] even when they surface
    /// during the verification pass of `open`.
    fn from(err: VerifyError) -> Self {
        match err {
            VerifyError::Storage(storage) => LogError::Storage(storage),
            VerifyError::NotALog { path, reason } => {
                LogError::Storage(StorageError::NotALog { path, reason })
            }
            other => LogError::Verify(other),
        }
    }
}
