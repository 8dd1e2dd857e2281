//! Whole-log verification: layout, keys, envelopes and the hash chain.
//!
//! What the chain proves: every entry is intact (checksum), in its place
//! (sequence = key, no gaps) and in its order (each entry names the hash of
//! the one before). What it does not prove: authenticity. Anyone who can
//! write the files can rewrite the whole log with a fresh valid chain; the
//! chain detects accidents and partial tampering, not a determined writer.
//! A log cut after entry N is a valid chain of N+1 entries; the durable
//! watermark kept beside the database reveals such a cut when the lost
//! entries had been flushed (which is what acknowledged entries are).

use std::path::{Path, PathBuf};

use super::envelope::{hash_bytes, Envelope, EnvelopeFault, Hash};
use super::forensic::{CopyProblem, CopyRefused, SnapshotCopy};
use super::sled_storage::SledStorage;
use super::storage::{Hex, LiveStart, LogStorage, RawEntry, StorageError};

/// Summary of a log that verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyReport {
    /// The log's length: the sequence after its last entry (entries below
    /// [`first_live`](VerifyReport::first_live) are archived, not read).
    pub entries: u64,
    /// The first live sequence: 0 unless entries were archived (see
    /// [`LiveStart`](super::LiveStart)); the walk started there, from the
    /// recorded hash of the entry before it.
    pub first_live: u64,
    /// Sequence of the last entry, `None` if the log is empty.
    pub last_sequence: Option<u64>,
    /// Hash of the last entry's encoded bytes (the genesis hash if empty):
    /// the head of the chain, comparable between copies of a log.
    pub head_hash: Hash,
    /// Sum of encoded entry sizes (keys excluded).
    pub entry_bytes: u64,
}

/// The first problem found in a log.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    /// The directory has no sled database, or a database without the log marker.
    #[error("{path} is not a Fleetweft log: {reason}")]
    NotALog {
        /// Directory verified.
        path: PathBuf,
        /// What was missing.
        reason: String,
    },
    /// Another process holds the database's lock: a controller or an agent
    /// is running on this log. Nothing was read.
    #[error(
        "{path} is in use: a running controller or agent holds its database lock \
         (stop it to inspect the log, or ask the running controller through its API)"
    )]
    InUse {
        /// Directory verified.
        path: PathBuf,
    },
    /// A forensic read could not make its private copy (too large, no space,
    /// unreadable): the log was neither changed nor judged.
    #[error("cannot inspect {path} without writing to it: {problem}")]
    Uninspectable {
        /// Directory verified.
        path: PathBuf,
        /// Why the copy failed.
        problem: CopyProblem,
    },
    /// The storage layer failed, including corruption reported by sled itself.
    #[error(transparent)]
    Storage(StorageError),
    /// A key in the entries tree is not an 8-byte sequence number.
    #[error(
        "foreign key {} in the entries tree where sequence {expected} was expected",
        Hex(key)
    )]
    ForeignKey {
        /// The sequence expected at that point of the scan (the first bad one).
        expected: u64,
        /// The offending key.
        key: Vec<u8>,
    },
    /// Data outside the entries tree that the log never writes.
    #[error(
        "foreign data in sled tree {:?}: {}",
        String::from_utf8_lossy(tree),
        match key { Some(key) => format!("key {}", Hex(key)), None => "an unexpected tree".into() }
    )]
    ForeignData {
        /// The tree holding it.
        tree: Vec<u8>,
        /// The first unexpected key, `None` for an unexpected empty tree.
        key: Option<Vec<u8>>,
    },
    /// A sequence is missing: the next key present is later.
    #[error("sequence {missing} is missing (the next entry present is sequence {next_present})")]
    Gap {
        /// The first missing sequence.
        missing: u64,
        /// The key found in its place.
        next_present: u64,
    },
    /// The storage engine's last key disagrees with a full scan.
    #[error(
        "the scan ended at sequence {scanned_last:?} but storage reports {reported_last:?} as last"
    )]
    Inconsistent {
        /// Last sequence seen by the scan.
        scanned_last: Option<u64>,
        /// Last sequence the engine reports.
        reported_last: Option<u64>,
    },
    /// Entries that were durable are gone: the log ends before the durable
    /// watermark. sled's recovery drops everything after damage in its file.
    #[error(
        "sequence {first_missing} is missing: entries up to {durable_end} (exclusive) were \
         durable, but the log ends before it (the storage engine discarded a damaged tail)"
    )]
    Truncated {
        /// The first lost sequence (the log's length).
        first_missing: u64,
        /// The watermark: every sequence below it had been durable.
        durable_end: u64,
    },
    /// The entries below `first_live` are archived: this check needs the
    /// whole history (a deep verification folds from genesis), so it needs
    /// the archive too.
    #[error(
        "the entries below sequence {first_live} are archived: this check needs the whole \
         history, verify it together with the archive"
    )]
    NeedsArchive {
        /// The first live sequence.
        first_live: u64,
    },
    /// The entry at `sequence` is bad.
    #[error("sequence {sequence}: {fault}")]
    Entry {
        /// The first bad sequence.
        sequence: u64,
        /// What is wrong with it.
        fault: EntryFault,
    },
}

impl VerifyError {
    /// The first bad sequence, where the error has one.
    pub fn sequence(&self) -> Option<u64> {
        match self {
            VerifyError::ForeignKey { expected, .. } => Some(*expected),
            VerifyError::Gap { missing, .. } => Some(*missing),
            VerifyError::Truncated { first_missing, .. } => Some(*first_missing),
            VerifyError::Entry { sequence, .. } => Some(*sequence),
            VerifyError::NotALog { .. }
            | VerifyError::InUse { .. }
            | VerifyError::Uninspectable { .. }
            | VerifyError::Storage(_)
            | VerifyError::ForeignData { .. }
            | VerifyError::NeedsArchive { .. }
            | VerifyError::Inconsistent { .. } => None,
        }
    }
}

impl VerifyError {
    /// The same error with the directory `from` named `to` instead, so an
    /// error found in a private copy names the log the caller gave.
    fn relocated(self, from: &Path, to: &Path) -> Self {
        let place = |path: PathBuf| if path == from { to.to_path_buf() } else { path };
        match self {
            VerifyError::NotALog { path, reason } => VerifyError::NotALog {
                path: place(path),
                reason,
            },
            VerifyError::Storage(storage) => VerifyError::Storage(match storage {
                StorageError::Corruption { path, detail } => StorageError::Corruption {
                    path: place(path),
                    detail,
                },
                StorageError::NotALog { path, reason } => StorageError::NotALog {
                    path: place(path),
                    reason,
                },
                StorageError::MalformedKey { path, key } => StorageError::MalformedKey {
                    path: place(path),
                    key,
                },
                StorageError::Io {
                    path,
                    action,
                    source,
                } => StorageError::Io {
                    path: place(path),
                    action,
                    source,
                },
                // The etcd backend's errors name no directory.
                other => other,
            }),
            other => other,
        }
    }
}

impl From<StorageError> for VerifyError {
    fn from(err: StorageError) -> Self {
        match err {
            StorageError::NotALog { path, reason } => VerifyError::NotALog { path, reason },
            other => VerifyError::Storage(other),
        }
    }
}

/// What is wrong with one entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EntryFault {
    /// The envelope itself is bad: checksum, version, size or decoding.
    #[error(transparent)]
    Envelope(#[from] EnvelopeFault),
    /// The envelope names a different sequence than its key (moved entry).
    #[error("the entry claims sequence {stored}")]
    SequenceMismatch {
        /// The sequence inside the envelope.
        stored: u64,
    },
    /// `prev_hash` is not the hash of the previous entry.
    #[error("broken hash chain: prev_hash does not match the previous entry")]
    BrokenChain,
    /// The caller's hook rejected the payload.
    #[error("rejected by the payload check: {reason}")]
    Rejected {
        /// The hook's message.
        reason: String,
    },
}

/// Verifies the log in `dir`: layout, every entry, and the hash chain.
///
/// A forensic read: it never writes to `dir`, damaged or not (see the
/// `forensic` module). It opens a private copy of the directory, so a log
/// held open by a running controller or agent is refused as
/// [`VerifyError::InUse`], and a directory over
/// [`FORENSIC_COPY_BYTES_MAX`](super::FORENSIC_COPY_BYTES_MAX) as
/// [`VerifyError::Uninspectable`]. Errors name `dir`, never the copy.
pub fn verify(dir: impl AsRef<Path>) -> Result<VerifyReport, VerifyError> {
    verify_with(dir, |_, _| Ok(()))
}

/// Like [`verify`], and also passes each entry's sequence and payload to
/// `check` (in order, after the entry itself verified), so callers can decode
/// events with [`decode_payload`](super::decode_payload) and check them, e.g.
/// by replaying them through the model. The first `Err` stops verification
/// as [`EntryFault::Rejected`] at that sequence.
pub fn verify_with(
    dir: impl AsRef<Path>,
    check: impl FnMut(u64, &[u8]) -> Result<(), String>,
) -> Result<VerifyReport, VerifyError> {
    let dir = dir.as_ref();
    let copy = SnapshotCopy::take(dir).map_err(|refused| copy_refused(dir, refused))?;
    // The storage is dropped before the copy is removed.
    verify_in_place_with(copy.path(), check).map_err(|err| err.relocated(copy.path(), dir))
}

/// Runs `read` on a private copy of the sled log in `dir` (as [`verify`]
/// reads it: `dir` itself is never written), e.g. a deep pass over its
/// snapshots ([`verify_snapshots`](super::verify_snapshots)). Errors name
/// `dir`, not the copy.
pub fn read_private_copy<R>(
    dir: impl AsRef<Path>,
    read: impl FnOnce(&SledStorage) -> Result<R, VerifyError>,
) -> Result<R, VerifyError> {
    let dir = dir.as_ref();
    let copy = SnapshotCopy::take(dir).map_err(|refused| copy_refused(dir, refused))?;
    let result = SledStorage::open_existing(copy.path())
        .map_err(VerifyError::from)
        .and_then(|storage| read(&storage));
    result.map_err(|err| err.relocated(copy.path(), dir))
}

/// Why no private copy of `dir` was taken, as the error that names it.
fn copy_refused(dir: &Path, refused: CopyRefused) -> VerifyError {
    let path = dir.to_path_buf();
    match refused {
        CopyRefused::NotALog(reason) => VerifyError::NotALog { path, reason },
        CopyRefused::InUse => VerifyError::InUse { path },
        CopyRefused::Failed(problem) => VerifyError::Uninspectable { path, problem },
    }
}

/// [`verify`] on the directory itself, without a private copy.
///
/// Opening runs sled's recovery on `dir`, which may rewrite its files: a
/// damaged database is cut (zeroed) after the first bad byte, and even an
/// intact one may get a new snapshot file. Use it only on a directory that
/// may change, e.g. to measure verification alone; never on evidence.
/// The log must not be open elsewhere (sled holds an exclusive lock).
pub fn verify_in_place(dir: impl AsRef<Path>) -> Result<VerifyReport, VerifyError> {
    verify_in_place_with(dir, |_, _| Ok(()))
}

/// [`verify_with`] on the directory itself; see [`verify_in_place`].
pub fn verify_in_place_with(
    dir: impl AsRef<Path>,
    check: impl FnMut(u64, &[u8]) -> Result<(), String>,
) -> Result<VerifyReport, VerifyError> {
    let storage = SledStorage::open_existing(dir.as_ref())?;
    check_layout(&storage)?;
    let report = walk_chain(&storage, check)?;
    check_watermark(&storage, &report)?;
    Ok(report)
}

/// Verifies the log in any storage (e.g. an [`EtcdStorage`](super::EtcdStorage)):
/// every key, envelope and the hash chain, passing each payload to `check`
/// as [`verify_with`] does. Reading only: nothing is written. A sled
/// directory is better verified with [`verify`], which also checks its
/// layout and durable watermark without touching its files.
pub fn verify_storage_with<S: LogStorage + ?Sized>(
    storage: &S,
    check: impl FnMut(u64, &[u8]) -> Result<(), String>,
) -> Result<VerifyReport, VerifyError> {
    walk_chain(storage, check)
}

/// Refuses a log shorter than what was once durable.
pub(super) fn check_watermark(
    storage: &SledStorage,
    report: &VerifyReport,
) -> Result<(), VerifyError> {
    check_durable_end(storage, report.entries)
}

/// Refuses a log of `entries` entries shorter than what was once durable.
/// Needs only the log's length, not a scan (the snapshot open path passes
/// the engine's last sequence + 1 and cross-checks it after its tail walk).
pub(super) fn check_durable_end(storage: &SledStorage, entries: u64) -> Result<(), VerifyError> {
    let durable_end = storage.durable_watermark();
    if entries < durable_end {
        return Err(VerifyError::Truncated {
            first_missing: entries,
            durable_end,
        });
    }
    Ok(())
}

/// Refuses data outside the log layout (sled-specific part of verification).
pub(super) fn check_layout(storage: &SledStorage) -> Result<(), VerifyError> {
    match storage.find_foreign_data()? {
        Some(foreign) => Err(VerifyError::ForeignData {
            tree: foreign.tree,
            key: foreign.key,
        }),
        None => Ok(()),
    }
}

/// Scans every entry in key order, checking keys, envelopes and the chain,
/// and hands each verified payload to `check`.
pub(super) fn walk_chain<S: LogStorage + ?Sized>(
    storage: &S,
    mut check: impl FnMut(u64, &[u8]) -> Result<(), String>,
) -> Result<VerifyReport, VerifyError> {
    walk_chain_heads(storage, |sequence, payload, _| check(sequence, payload))
}

/// [`walk_chain`] whose `check` also gets each entry's verified
/// `prev_hash`: the chain's head just before the entry.
pub(super) fn walk_chain_heads<S: LogStorage + ?Sized>(
    storage: &S,
    check: impl FnMut(u64, &[u8], &Hash) -> Result<(), String>,
) -> Result<VerifyReport, VerifyError> {
    // Entries below the live start were archived (and may linger until
    // the archiving's deletion finishes): the walk starts at the start.
    let start = storage.live_start()?;
    let walked = walk_from(storage, start.sequence, start.prev_hash, check)?;
    check_scan_end(storage, &start, walked.end)?;
    Ok(VerifyReport {
        entries: walked.end,
        first_live: start.sequence,
        last_sequence: walked.end.checked_sub(1),
        head_hash: walked.head_hash,
        entry_bytes: walked.entry_bytes,
    })
}

/// The live log's end as the engine reports it: the sequence after its
/// last key, or the live start if nothing at or above it is stored (all
/// was archived; keys below the start are leftovers of an archiving).
pub(super) fn live_end<S: LogStorage + ?Sized>(
    storage: &S,
    start: &LiveStart,
) -> Result<u64, StorageError> {
    let after_last = storage
        .last_sequence()?
        .map_or(0, |last| last.saturating_add(1));
    Ok(after_last.max(start.sequence))
}

/// Cross-checks a scan that ended at `scanned_end` against the engine's
/// own idea of the end (after the scan: a read-only etcd storage answers
/// at the scan's revision).
pub(super) fn check_scan_end<S: LogStorage + ?Sized>(
    storage: &S,
    start: &LiveStart,
    scanned_end: u64,
) -> Result<(), VerifyError> {
    if live_end(storage, start)? != scanned_end {
        return Err(VerifyError::Inconsistent {
            scanned_last: scanned_end.checked_sub(1),
            reported_last: storage.last_sequence()?,
        });
    }
    Ok(())
}

/// Where a [`walk_from`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Walked {
    /// The sequence after the last entry read (`from` if none).
    pub(super) end: u64,
    /// Hash of the last entry read (`prev_hash` if none).
    pub(super) head_hash: Hash,
    /// Sum of the encoded sizes of the entries read.
    pub(super) entry_bytes: u64,
}

/// Reads the entries from sequence `from` to the end, checking each as
/// `walk_chain` does (key = sequence, no gap, envelope, sequence inside
/// the envelope, `prev_hash` chain starting at `prev_hash`), and hands each
/// verified payload (and the entry's `prev_hash`) to `check`. Reads nothing
/// before `from` (a scan from 0 also sees foreign keys sorting before
/// sequence 0).
pub(super) fn walk_from<S: LogStorage + ?Sized>(
    storage: &S,
    from: u64,
    mut prev_hash: Hash,
    mut check: impl FnMut(u64, &[u8], &Hash) -> Result<(), String>,
) -> Result<Walked, VerifyError> {
    let mut expected = from;
    let mut entry_bytes: u64 = 0;
    for item in storage.read_from(from) {
        let raw = item?;
        let envelope = check_stored_entry(expected, &prev_hash, &raw)?;
        let entry_error = |fault: EntryFault| VerifyError::Entry {
            sequence: expected,
            fault,
        };
        check(expected, &envelope.payload, &prev_hash)
            .map_err(|reason| entry_error(EntryFault::Rejected { reason }))?;
        prev_hash = hash_bytes(&raw.value);
        entry_bytes += raw.value.len() as u64;
        expected += 1;
    }
    Ok(Walked {
        end: expected,
        head_hash: prev_hash,
        entry_bytes,
    })
}

/// Checks one stored entry where sequence `expected` belongs: its key is
/// that sequence (else a foreign key or a gap), its envelope decodes and
/// its checksum holds, it names that sequence, and its `prev_hash` is
/// `prev_hash`. Returns the decoded envelope.
pub(super) fn check_stored_entry(
    expected: u64,
    prev_hash: &Hash,
    raw: &RawEntry,
) -> Result<Envelope, VerifyError> {
    let sequence = match <[u8; 8]>::try_from(raw.key.as_slice()) {
        Ok(bytes) => u64::from_be_bytes(bytes),
        Err(_) => {
            return Err(VerifyError::ForeignKey {
                expected,
                key: raw.key.clone(),
            })
        }
    };
    // Keys arrive strictly increasing, so any mismatch is a hole.
    if sequence != expected {
        return Err(VerifyError::Gap {
            missing: expected,
            next_present: sequence,
        });
    }
    check_entry_bytes(sequence, prev_hash, &raw.value)
        .map_err(|fault| VerifyError::Entry { sequence, fault })
}

/// Checks the encoded entry `value` as entry `sequence` continuing the
/// chain at `prev_hash` (envelope, checksum, sequence, link): the part of
/// [`check_stored_entry`] that archive segments, which have no keys, share.
pub(super) fn check_entry_bytes(
    sequence: u64,
    prev_hash: &Hash,
    value: &[u8],
) -> Result<Envelope, EntryFault> {
    let envelope = Envelope::decode(value)?;
    if envelope.sequence != sequence {
        return Err(EntryFault::SequenceMismatch {
            stored: envelope.sequence,
        });
    }
    if envelope.prev_hash != *prev_hash {
        return Err(EntryFault::BrokenChain);
    }
    Ok(envelope)
}

#[cfg(test)]
mod forensic_tests;
