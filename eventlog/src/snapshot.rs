//! Snapshots: a caller's state after the first `covers` entries, stored
//! beside the log so that opening folds only the entries after it.
//!
//! The log stays generic over its event type: the state is opaque bytes
//! the caller encodes and decodes (the controller uses
//! `model::controller::snapshot`). What this module adds is the stamp that
//! ties those bytes to one point of one chain, and the checks that a
//! snapshot may be trusted in place of a replay.
//!
//! **Record format** (version [`SNAPSHOT_RECORD_VERSION`]), a fixed layout
//! so its checksum does not depend on an encoder: magic `FWSN`, version
//! (u16 LE), `covers` (u64 BE), `head_hash` (32 bytes: the hash of entry
//! `covers - 1`'s encoded bytes, or the genesis hash when `covers` is 0),
//! state length (u64 LE), the state bytes, and SHA-256 over everything
//! before it.
//!
//! **Which snapshot opens the log.** Snapshots are tried newest first; one
//! is used only if its record verifies (checksum, version, length, the
//! stamp's `covers` = its key), it covers no more than the log holds, the
//! stored entry `covers - 1` hashes to its `head_hash` (which the tail walk
//! then checks entry `covers`'s `prev_hash` against), and the caller's
//! decoder accepts its state. A snapshot failing any of these is skipped
//! with a warning naming it and the reason, and the next older one is
//! tried; without any, the log is replayed from genesis as
//! [`EventLog::open`] does. A snapshot is a cache: skipping one costs
//! time, never correctness.
//!
//! **What opening from a snapshot does not check**: the entries the
//! snapshot covers are not read, so damage among them (or a foreign key
//! between them) is found only by a full verification
//! ([`verify`](super::verify), or [`verify_snapshots`], which also
//! compares every snapshot with the fold). That is the point: the cost of
//! opening follows the tail, not the log's length.

use std::fmt::Display;
use std::path::Path;

use serde::de::DeserializeOwned;
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::envelope::{decode_payload, genesis_hash, hash_bytes, Envelope, Hash};
use super::error::LogError;
use super::event_log::EventLog;
use super::sled_storage::SledStorage;
use super::storage::{LiveStart, LogStorage, RawEntry};
use super::verify::{
    check_durable_end, check_layout, check_scan_end, live_end, walk_chain_heads, walk_from,
    VerifyError, VerifyReport,
};

/// Version of the snapshot record layout written by this build; records
/// of other versions are skipped (the log is then replayed further).
pub const SNAPSHOT_RECORD_VERSION: u16 = 1;

/// Largest state accepted in a snapshot, in bytes (256 MiB, the bound of
/// the controller's state encoding).
pub const SNAPSHOT_STATE_BYTES_MAX: usize = 256 << 20;

const RECORD_MAGIC: [u8; 4] = *b"FWSN";

/// Bytes before the state: magic, version, covers, head hash, length.
const RECORD_HEADER_BYTES: usize = 4 + 2 + 8 + 32 + 8;

/// Bytes after the state: the SHA-256 checksum.
const RECORD_CHECKSUM_BYTES: usize = 32;

/// Largest encoded snapshot record, in bytes.
pub const SNAPSHOT_RECORD_BYTES_MAX: usize =
    SNAPSHOT_STATE_BYTES_MAX + RECORD_HEADER_BYTES + RECORD_CHECKSUM_BYTES;

/// Why stored bytes are not a usable snapshot record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SnapshotFault {
    /// Shorter than a record with an empty state.
    #[error("the record has {len} bytes, fewer than the {min} of its fixed fields")]
    TooShort {
        /// Bytes found.
        len: usize,
        /// The fixed fields' size.
        min: usize,
    },
    /// Longer than [`SNAPSHOT_RECORD_BYTES_MAX`].
    #[error("the record has {len} bytes, over the {max}-byte limit")]
    TooLarge {
        /// Bytes found.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// Not a snapshot record at all.
    #[error("the record does not start with the snapshot magic")]
    WrongMagic,
    /// Written by another layout version.
    #[error(
        "record version {found} is not supported (this build reads version \
         {SNAPSHOT_RECORD_VERSION})"
    )]
    UnsupportedVersion {
        /// The version found.
        found: u16,
    },
    /// The stored state length disagrees with the record's size.
    #[error("the record says its state has {stated} bytes but holds {actual}")]
    LengthMismatch {
        /// The length field.
        stated: u64,
        /// Bytes actually between the fixed fields.
        actual: usize,
    },
    /// The checksum does not match: the bytes were altered.
    #[error("checksum mismatch: the record's bytes were altered")]
    ChecksumMismatch,
    /// The stamp names another point of the log than its key.
    #[error("the record is stored under {key} but stamped as covering {stamped} entries")]
    CoversMismatch {
        /// The `covers` it is stored under.
        key: u64,
        /// The `covers` inside the record.
        stamped: u64,
    },
}

/// Why a stored snapshot was not used to open the log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SnapshotSkip {
    /// It covers entries the log does not have (the log lost a suffix, or
    /// the snapshot belongs to another log).
    #[error("it covers {covers} entries but the log has {end}")]
    BeyondEnd {
        /// What it covers.
        covers: u64,
        /// Entries in the log.
        end: u64,
    },
    /// Listed, then gone (deleted meanwhile).
    #[error("it was listed but could not be read back")]
    Missing,
    /// The record itself is bad.
    #[error(transparent)]
    Damaged(#[from] SnapshotFault),
    /// Its head hash is not the hash of the log's entry `covers - 1`: it
    /// summarises another chain.
    #[error("its head hash does not match the log's entry {sequence}: {detail}")]
    Unlinked {
        /// The entry it should link to (`covers - 1`).
        sequence: u64,
        /// What was found there.
        detail: String,
    },
    /// The caller's decoder refused the state bytes.
    #[error("its state does not decode: {reason}")]
    Undecodable {
        /// The decoder's message.
        reason: String,
    },
    /// Its write was cut short (a crash or a lost fence before the part
    /// written last): [`LogStorage::incomplete_snapshots`].
    #[error("its write was cut short: parts are stored without the manifest written last")]
    Incomplete,
    /// It covers fewer entries than the live log starts at: the entries
    /// between it and the first live one are archived, so a start from it
    /// would need them.
    #[error("it covers {covers} entries but the entries below {first_live} are archived")]
    Archived {
        /// What it covers.
        covers: u64,
        /// The first live sequence.
        first_live: u64,
    },
}

/// A decoded snapshot: the caller's state after entries `0..covers`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot<T> {
    /// Entries the state has folded; the tail starts at this sequence.
    pub covers: u64,
    /// The state, as the caller's decoder returned it.
    pub state: T,
}

/// What opening from a snapshot returns.
pub struct SnapshotOpen<E, S: LogStorage, T> {
    /// The log, ready to append after the tail.
    pub log: EventLog<E, S>,
    /// The snapshot used, `None` when the log was replayed from genesis.
    pub snapshot: Option<Snapshot<T>>,
    /// The events after the snapshot (every event without one), verified,
    /// in sequence order: fold them onto the snapshot's state.
    pub tail: Vec<(u64, E)>,
    /// Newer snapshots that were skipped, newest first, and why.
    pub skipped: Vec<(u64, SnapshotSkip)>,
}

impl<E: Serialize + DeserializeOwned, S: LogStorage, T> SnapshotOpen<E, S, T> {
    /// The same opening on another handle to the log's storage (boxed,
    /// so one controller type runs on sled or etcd). Nothing is re-read.
    pub fn map_storage<U: LogStorage>(self, f: impl FnOnce(S) -> U) -> SnapshotOpen<E, U, T> {
        SnapshotOpen {
            log: self.log.map_storage(f),
            snapshot: self.snapshot,
            tail: self.tail,
            skipped: self.skipped,
        }
    }
}

/// Encodes a snapshot record (see the module docs for the layout).
pub(super) fn encode_record(covers: u64, head_hash: &Hash, state: &[u8]) -> Vec<u8> {
    let mut record = Vec::with_capacity(RECORD_HEADER_BYTES + state.len() + RECORD_CHECKSUM_BYTES);
    record.extend_from_slice(&RECORD_MAGIC);
    record.extend_from_slice(&SNAPSHOT_RECORD_VERSION.to_le_bytes());
    record.extend_from_slice(&covers.to_be_bytes());
    record.extend_from_slice(head_hash);
    record.extend_from_slice(&(state.len() as u64).to_le_bytes());
    record.extend_from_slice(state);
    let checksum = Sha256::digest(&record);
    record.extend_from_slice(&checksum);
    record
}

/// A verified record: its head hash and state (its `covers` is its key).
#[derive(Debug)]
pub(super) struct Record {
    pub(super) head_hash: Hash,
    pub(super) state: Vec<u8>,
}

/// Decodes and verifies a record stored under `key`.
pub(super) fn decode_record(key: u64, mut bytes: Vec<u8>) -> Result<Record, SnapshotFault> {
    let len = bytes.len();
    let min = RECORD_HEADER_BYTES + RECORD_CHECKSUM_BYTES;
    if len < min {
        return Err(SnapshotFault::TooShort { len, min });
    }
    if len > SNAPSHOT_RECORD_BYTES_MAX {
        return Err(SnapshotFault::TooLarge {
            len,
            max: SNAPSHOT_RECORD_BYTES_MAX,
        });
    }
    let (body, checksum) = bytes.split_at(len - RECORD_CHECKSUM_BYTES);
    // Version before checksum: a future layout may checksum differently.
    if body[..4] != RECORD_MAGIC {
        return Err(SnapshotFault::WrongMagic);
    }
    let found = u16::from_le_bytes([body[4], body[5]]);
    if found != SNAPSHOT_RECORD_VERSION {
        return Err(SnapshotFault::UnsupportedVersion { found });
    }
    if Sha256::digest(body).as_slice() != checksum {
        return Err(SnapshotFault::ChecksumMismatch);
    }
    let field = |at: usize| -> [u8; 8] {
        let mut out = [0u8; 8];
        out.copy_from_slice(&body[at..at + 8]);
        out
    };
    let covers = u64::from_be_bytes(field(6));
    let mut head_hash = [0u8; 32];
    head_hash.copy_from_slice(&body[14..46]);
    let stated = u64::from_le_bytes(field(46));
    let actual = body.len() - RECORD_HEADER_BYTES;
    if stated != actual as u64 {
        return Err(SnapshotFault::LengthMismatch { stated, actual });
    }
    if covers != key {
        return Err(SnapshotFault::CoversMismatch {
            key,
            stamped: covers,
        });
    }
    // The state in place: drop the checksum, then the header.
    bytes.truncate(len - RECORD_CHECKSUM_BYTES);
    bytes.drain(..RECORD_HEADER_BYTES);
    Ok(Record {
        head_hash,
        state: bytes,
    })
}

/// The hash of the stored entry `covers - 1` (the genesis hash for 0),
/// after checking that it is that entry: the head a snapshot covering
/// `covers` entries links to. Reads one entry.
fn stored_head_hash<S: LogStorage + ?Sized>(
    storage: &S,
    start: &LiveStart,
    covers: u64,
) -> Result<Hash, String> {
    // The entry before the live start is archived: the start records its
    // hash (and is itself checksummed).
    if covers == start.sequence {
        return Ok(start.prev_hash);
    }
    if covers < start.sequence {
        return Err(format!(
            "the entry is archived (the live log starts at {})",
            start.sequence
        ));
    }
    let Some(sequence) = covers.checked_sub(1) else {
        return Ok(genesis_hash());
    };
    let Some(item) = storage.read_from(sequence).next() else {
        return Err("the log has no such entry".into());
    };
    let RawEntry { key, value } = item.map_err(|err| err.to_string())?;
    if key != sequence.to_be_bytes() {
        return Err(format!("the entry is missing (found key {key:02x?})"));
    }
    let envelope = Envelope::decode(&value).map_err(|err| err.to_string())?;
    if envelope.sequence != sequence {
        return Err(format!("the entry claims sequence {}", envelope.sequence));
    }
    Ok(hash_bytes(&value))
}

/// The log's length from the engine's last key (or its live start, if
/// every entry was archived).
fn log_end<S: LogStorage + ?Sized>(storage: &S) -> Result<u64, LogError> {
    let start = storage.live_start()?;
    Ok(live_end(storage, &start)?)
}

impl<E: Serialize + DeserializeOwned> EventLog<E, SledStorage> {
    /// [`EventLog::open`] from the newest usable snapshot: opens (or
    /// creates) the log in `dir`, refuses foreign data and a log shorter
    /// than its durable watermark as `open` does (the watermark is checked
    /// against the engine's last key, without a scan), then opens as
    /// [`EventLog::with_storage_from_snapshot`] does.
    pub fn open_from_snapshot<T, D: Display>(
        dir: impl AsRef<Path>,
        decode: impl FnMut(&[u8]) -> Result<T, D>,
    ) -> Result<SnapshotOpen<E, SledStorage, T>, LogError> {
        let storage = SledStorage::create_or_open(dir.as_ref())?;
        check_layout(&storage)?;
        let end = log_end(&storage)?;
        check_durable_end(&storage, end)?;
        Self::open_at_end(storage, end, decode)
    }
}

impl<E: Serialize + DeserializeOwned, S: LogStorage> EventLog<E, S> {
    /// Opens a log on any storage from its newest usable snapshot (module
    /// docs): `decode` turns a snapshot's state bytes into the caller's
    /// state; only the entries after the snapshot are read, verified (as
    /// [`read_new`](EventLog::read_new) verifies) and decoded. Without a
    /// usable snapshot, replays every entry as
    /// [`with_storage`](EventLog::with_storage) does.
    ///
    /// A damaged entry in the tail refuses the log, as it would a replay.
    pub fn with_storage_from_snapshot<T, D: Display>(
        storage: S,
        decode: impl FnMut(&[u8]) -> Result<T, D>,
    ) -> Result<SnapshotOpen<E, S, T>, LogError> {
        let end = log_end(&storage)?;
        Self::open_at_end(storage, end, decode)
    }

    fn open_at_end<T, D: Display>(
        storage: S,
        end: u64,
        mut decode: impl FnMut(&[u8]) -> Result<T, D>,
    ) -> Result<SnapshotOpen<E, S, T>, LogError> {
        let (found, skipped) = newest_usable(&storage, end, &mut decode)?;
        if let Some((snapshot, head_hash)) = found {
            return Self::open_tail(storage, snapshot, head_hash, skipped);
        }
        let (log, tail, _) = Self::replay(storage)?;
        Ok(SnapshotOpen {
            log,
            snapshot: None,
            tail,
            skipped,
        })
    }

    /// Reads and verifies the entries after `snapshot` and opens the log
    /// after them.
    fn open_tail<T>(
        storage: S,
        snapshot: Snapshot<T>,
        head_hash: Hash,
        skipped: Vec<(u64, SnapshotSkip)>,
    ) -> Result<SnapshotOpen<E, S, T>, LogError> {
        let mut tail = Vec::new();
        let walked = walk_from(
            &storage,
            snapshot.covers,
            head_hash,
            |sequence, payload, _| {
                let event = decode_payload::<E>(payload).map_err(|err| err.to_string())?;
                tail.push((sequence, event));
                Ok(())
            },
        )?;
        // As `walk_chain` does: the scan must end where the engine says.
        check_scan_end(&storage, &storage.live_start()?, walked.end)?;
        Ok(SnapshotOpen {
            log: Self::verified(storage, walked.end, walked.head_hash),
            snapshot: Some(snapshot),
            tail,
            skipped,
        })
    }

    /// Stores `state` (the caller's encoding of its state after entries
    /// `0..covers`) as a snapshot, stamped with `covers` and the hash of
    /// entry `covers - 1`; durable when `Ok`. Replaces a snapshot with the
    /// same `covers`.
    ///
    /// Refused for entries not yet durable (a crash could lose them and
    /// leave a snapshot of a log that never was) and for a state over
    /// [`SNAPSHOT_STATE_BYTES_MAX`]. On etcd, a lost fence is
    /// [`StorageError::Deposed`] ([`LogError::is_fencing`]). A failed put
    /// does not poison the log: appends are unaffected.
    pub fn put_snapshot(&self, covers: u64, state: &[u8]) -> Result<(), LogError> {
        if state.len() > SNAPSHOT_STATE_BYTES_MAX {
            return Err(LogError::SnapshotTooLarge {
                bytes: state.len(),
                max: SNAPSHOT_STATE_BYTES_MAX,
            });
        }
        let durable_end = self.durable_end()?;
        if covers > durable_end {
            return Err(LogError::SnapshotAhead {
                covers,
                durable_end,
            });
        }
        let start = self.storage().live_start()?;
        let head_hash = stored_head_hash(self.storage(), &start, covers).map_err(|detail| {
            LogError::SnapshotUnlinked {
                sequence: covers.saturating_sub(1),
                detail,
            }
        })?;
        let record = encode_record(covers, &head_hash, state);
        self.storage().put_snapshot(covers, &record)?;
        Ok(())
    }

    /// The `covers` of every stored snapshot, newest first.
    pub fn snapshot_sequences(&self) -> Result<Vec<u64>, LogError> {
        Ok(self.storage().snapshot_sequences()?)
    }

    /// Deletes the snapshot covering `covers` entries (nothing if none).
    pub fn delete_snapshot(&self, covers: u64) -> Result<(), LogError> {
        Ok(self.storage().delete_snapshot(covers)?)
    }

    /// Deletes all but the `keep` newest snapshots, and the parts of
    /// every snapshot whose write was cut short (the caller is the only
    /// writer and its own puts returned, so none is under way); returns
    /// the deleted ones' `covers`. Keeping two leaves an older one to
    /// fall back on if the newest turns out damaged.
    pub fn prune_snapshots(&self, keep: usize) -> Result<Vec<u64>, LogError> {
        let mut deleted = Vec::new();
        for covers in self.storage().incomplete_snapshots()? {
            tracing::info!(
                covers,
                "deleting the parts of a snapshot write cut short (covering {covers} entries)"
            );
            self.delete_snapshot(covers)?;
            deleted.push(covers);
        }
        for covers in self.snapshot_sequences()?.into_iter().skip(keep) {
            self.delete_snapshot(covers)?;
            deleted.push(covers);
        }
        Ok(deleted)
    }

    /// A follower whose next entry was archived
    /// ([`LogError::BehindArchive`]) catches up as a start would: the
    /// newest usable snapshot and the verified entries after it to the
    /// storage's end; this log's end moves there. Returns them and the
    /// newer snapshots skipped. Refused as `BehindArchive` when no
    /// snapshot is usable (the start would need archived entries).
    #[allow(clippy::type_complexity)]
    pub fn catch_up_from_snapshot<T, D: Display>(
        &self,
        mut decode: impl FnMut(&[u8]) -> Result<T, D>,
    ) -> Result<(Snapshot<T>, Vec<(u64, E)>, Vec<(u64, SnapshotSkip)>), LogError> {
        let storage = self.storage();
        let end = log_end(storage)?;
        let (found, skipped) = newest_usable(storage, end, &mut decode)?;
        let Some((snapshot, head_hash)) = found else {
            let first_live = storage.live_start()?.sequence;
            return Err(LogError::BehindArchive {
                next: self.durable_end()?,
                first_live,
            });
        };
        let mut tail = Vec::new();
        let walked = walk_from(
            storage,
            snapshot.covers,
            head_hash,
            |sequence, payload, _| {
                let event = decode_payload::<E>(payload).map_err(|err| err.to_string())?;
                tail.push((sequence, event));
                Ok(())
            },
        )?;
        self.advance_to(walked.end, walked.head_hash)?;
        Ok((snapshot, tail, skipped))
    }

    /// The newest usable snapshot and the verified entries after it, read
    /// from this log's storage as a start reads them (module docs), to
    /// the log's end, without changing the log: a hot standby elected
    /// leader takes over from them. Snapshots skipped are named, with
    /// why, and logged as a start logs them. `None` when no snapshot is
    /// usable (the caller's state then comes from genesis).
    #[allow(clippy::type_complexity)]
    pub fn read_snapshot_and_tail<T, D: Display>(
        &self,
        mut decode: impl FnMut(&[u8]) -> Result<T, D>,
    ) -> Result<
        (
            Option<(Snapshot<T>, Vec<(u64, E)>)>,
            Vec<(u64, SnapshotSkip)>,
        ),
        LogError,
    > {
        let end = self.durable_end()?;
        let storage = self.storage();
        let (found, skipped) = newest_usable(storage, end, &mut decode)?;
        let Some((snapshot, head_hash)) = found else {
            return Ok((None, skipped));
        };
        let mut tail = Vec::new();
        let walked = walk_from(
            storage,
            snapshot.covers,
            head_hash,
            |sequence, payload, _| {
                let event = decode_payload::<E>(payload).map_err(|err| err.to_string())?;
                tail.push((sequence, event));
                Ok(())
            },
        )?;
        if walked.end != end {
            return Err(LogError::SnapshotTailMismatch {
                covers: snapshot.covers,
                tail_end: walked.end,
                end,
            });
        }
        Ok((Some((snapshot, tail)), skipped))
    }
}

/// The newest snapshot of a log of `end` entries whose record verifies,
/// links to the chain and decodes, with the hash it links to; and the
/// newer ones skipped (each logged with why, writes cut short included).
#[allow(clippy::type_complexity)]
fn newest_usable<S: LogStorage + ?Sized, T, D: Display>(
    storage: &S,
    end: u64,
    decode: &mut impl FnMut(&[u8]) -> Result<T, D>,
) -> Result<(Option<(Snapshot<T>, Hash)>, Vec<(u64, SnapshotSkip)>), LogError> {
    let start = storage.live_start()?;
    let mut skipped: Vec<(u64, SnapshotSkip)> = storage
        .incomplete_snapshots()?
        .into_iter()
        .map(|covers| (covers, SnapshotSkip::Incomplete))
        .collect();
    let mut found = None;
    for covers in storage.snapshot_sequences()? {
        match usable_snapshot(storage, &start, covers, end, decode)? {
            Ok((state, head_hash)) => {
                found = Some((Snapshot { covers, state }, head_hash));
                break;
            }
            Err(skip) => skipped.push((covers, skip)),
        }
    }
    // Named only when newer than the one used: older ones cost nothing.
    // Without one used, every one is named (one covering 0 entries too).
    let used = found.as_ref().map(|(s, _)| s.covers);
    skipped.retain(|(covers, _)| used.is_none_or(|used| *covers > used));
    skipped.sort_by_key(|(covers, _)| std::cmp::Reverse(*covers));
    for (covers, skip) in &skipped {
        tracing::warn!(covers, reason = %skip, "skipping snapshot covering {covers} entries: {skip}");
    }
    Ok((found, skipped))
}

/// The `covers` of the newest snapshot a start could use as far as the
/// log can tell without the caller's decoder: its record verifies and it
/// links to the stored chain (or the live start). `None` without one.
pub(super) fn newest_intact_snapshot<S: LogStorage + ?Sized>(
    storage: &S,
) -> Result<Option<u64>, LogError> {
    let start = storage.live_start()?;
    for covers in storage.snapshot_sequences()? {
        if covers < start.sequence {
            break;
        }
        let Some(bytes) = storage.read_snapshot(covers)? else {
            continue;
        };
        let Ok(record) = decode_record(covers, bytes) else {
            continue;
        };
        if stored_head_hash(storage, &start, covers) == Ok(record.head_hash) {
            return Ok(Some(covers));
        }
    }
    Ok(None)
}

/// The decoded state and head hash of the snapshot covering `covers`, or
/// why it cannot be used (the inner `Err`); the outer `Err` is a storage
/// failure, which refuses the open as it would a replay.
#[allow(clippy::type_complexity)]
fn usable_snapshot<S: LogStorage + ?Sized, T, D: Display>(
    storage: &S,
    start: &LiveStart,
    covers: u64,
    end: u64,
    decode: &mut impl FnMut(&[u8]) -> Result<T, D>,
) -> Result<Result<(T, Hash), SnapshotSkip>, LogError> {
    if covers > end {
        return Ok(Err(SnapshotSkip::BeyondEnd { covers, end }));
    }
    if covers < start.sequence {
        return Ok(Err(SnapshotSkip::Archived {
            covers,
            first_live: start.sequence,
        }));
    }
    let Some(bytes) = storage.read_snapshot(covers)? else {
        return Ok(Err(SnapshotSkip::Missing));
    };
    let record = match decode_record(covers, bytes) {
        Ok(record) => record,
        Err(fault) => return Ok(Err(fault.into())),
    };
    match stored_head_hash(storage, start, covers) {
        Ok(hash) if hash == record.head_hash => {}
        Ok(_) => {
            return Ok(Err(SnapshotSkip::Unlinked {
                sequence: covers.saturating_sub(1),
                detail: "the entry hashes to another value".into(),
            }))
        }
        Err(detail) => {
            return Ok(Err(SnapshotSkip::Unlinked {
                sequence: covers.saturating_sub(1),
                detail,
            }))
        }
    }
    match decode(&record.state) {
        Ok(state) => Ok(Ok((state, record.head_hash))),
        Err(err) => Ok(Err(SnapshotSkip::Undecodable {
            reason: err.to_string(),
        })),
    }
}

/// What [`verify_snapshots`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotsReport {
    /// The whole log's verification.
    pub log: VerifyReport,
    /// Snapshots compared with the fold and found equal, oldest first.
    pub agreeing: Vec<u64>,
    /// The first (oldest) snapshot that is damaged, does not link to the
    /// chain, covers more than the log holds, or differs from the fold;
    /// `None` if every snapshot agrees. Snapshots after it are not compared.
    pub first_difference: Option<(u64, String)>,
}

/// Deep verification of snapshots (for `log verify --deep`): verifies the
/// whole chain as [`verify_storage_with`](super::verify_storage_with) does,
/// folding every payload into `acc` with `fold`, and each time the fold has
/// taken exactly `covers` entries, checks the snapshot covering `covers`:
/// its record, its head hash against the chain, and `compare(&acc, covers,
/// state bytes)`, which decodes the state and compares it with `acc`.
///
/// A `fold` error refuses the log (as a payload check does); a snapshot
/// that fails is reported in [`SnapshotsReport::first_difference`]. Reads
/// only: nothing is written.
pub fn verify_snapshots<S: LogStorage + ?Sized, A>(
    storage: &S,
    acc: &mut A,
    mut fold: impl FnMut(&mut A, u64, &[u8]) -> Result<(), String>,
    mut compare: impl FnMut(&A, u64, &[u8]) -> Result<(), String>,
) -> Result<SnapshotsReport, VerifyError> {
    // The fold starts at genesis: with the history's start archived, it
    // would start mid-history and every comparison would be meaningless.
    let start = storage.live_start()?;
    if start.is_archived() {
        return Err(VerifyError::NeedsArchive {
            first_live: start.sequence,
        });
    }
    let mut pending: Vec<u64> = storage.snapshot_sequences()?;
    pending.sort_unstable();
    let mut pending = pending.into_iter().peekable();
    let mut agreeing = Vec::new();
    let mut first_difference: Option<(u64, String)> = None;
    // Judges every snapshot covering exactly `at` entries, `head` being
    // the hash of entry `at - 1`; stops at the first difference.
    let mut judge = |acc: &A, at: u64, head: &Hash, first: &mut Option<(u64, String)>| {
        while let Some(&covers) = pending.peek() {
            if covers != at || first.is_some() {
                break;
            }
            pending.next();
            match judge_snapshot(storage, covers, head, |state| compare(acc, covers, state)) {
                Ok(()) => agreeing.push(covers),
                Err(reason) => *first = Some((covers, reason)),
            }
        }
    };
    let report = walk_chain_heads(storage, |sequence, payload, prev_hash| {
        judge(acc, sequence, prev_hash, &mut first_difference);
        fold(acc, sequence, payload)
    })?;
    judge(
        acc,
        report.entries,
        &report.head_hash,
        &mut first_difference,
    );
    if first_difference.is_none() {
        if let Some(covers) = pending.next() {
            let beyond = SnapshotSkip::BeyondEnd {
                covers,
                end: report.entries,
            };
            first_difference = Some((covers, beyond.to_string()));
        }
    }
    Ok(SnapshotsReport {
        log: report,
        agreeing,
        first_difference,
    })
}

/// Checks one snapshot against the chain's head at its point and the
/// caller's comparison; `Err` says why it differs.
pub(super) fn judge_snapshot<S: LogStorage + ?Sized>(
    storage: &S,
    covers: u64,
    head: &Hash,
    compare: impl FnOnce(&[u8]) -> Result<(), String>,
) -> Result<(), String> {
    let bytes = storage
        .read_snapshot(covers)
        .map_err(|err| format!("it cannot be read: {err}"))?
        .ok_or_else(|| SnapshotSkip::Missing.to_string())?;
    let record = decode_record(covers, bytes).map_err(|fault| fault.to_string())?;
    if record.head_hash != *head {
        let unlinked = SnapshotSkip::Unlinked {
            sequence: covers.saturating_sub(1),
            detail: "the entry hashes to another value".into(),
        };
        return Err(unlinked.to_string());
    }
    compare(&record.state).map_err(|reason| format!("the state differs from the fold: {reason}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_round_trips_and_every_flipped_byte_is_refused() {
        let head = hash_bytes(b"entry 6");
        let record = encode_record(7, &head, b"state bytes");
        let decoded = decode_record(7, record.clone()).expect("decodes");
        assert_eq!(decoded.head_hash, head);
        assert_eq!(decoded.state, b"state bytes");
        for index in 0..record.len() {
            let mut damaged = record.clone();
            damaged[index] ^= 0x01;
            assert!(
                decode_record(7, damaged).is_err(),
                "a flip at byte {index} went unnoticed"
            );
        }
    }

    #[test]
    fn records_are_refused_by_name() {
        let record = encode_record(7, &genesis_hash(), b"s");
        assert_eq!(
            decode_record(8, record.clone()).map(|_| ()),
            Err(SnapshotFault::CoversMismatch { key: 8, stamped: 7 })
        );
        assert!(matches!(
            decode_record(7, record[..10].to_vec()),
            Err(SnapshotFault::TooShort { len: 10, .. })
        ));
        let mut version = record.clone();
        version[4] = 9;
        assert_eq!(
            decode_record(7, version).map(|_| ()),
            Err(SnapshotFault::UnsupportedVersion { found: 9 })
        );
        let mut magic = record;
        magic[0] = b'X';
        assert_eq!(
            decode_record(7, magic).map(|_| ()),
            Err(SnapshotFault::WrongMagic)
        );
    }
}
