//! The narrow storage interface the log needs, so the commit protocol can be
//! tested against a fault-injecting store and the engine could be swapped.

use std::fmt;
use std::path::PathBuf;

use sha2::{Digest, Sha256};

use super::envelope::{genesis_hash, Hash};

/// One raw key/value pair from the entries tree, as stored.
///
/// The key is kept raw so verification can report keys that are not
/// sequence numbers instead of silently skipping them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawEntry {
    /// The stored key; a log entry's key is its sequence as big-endian u64.
    pub key: Vec<u8>,
    /// The stored value; a log entry's value is an encoded envelope.
    pub value: Vec<u8>,
}

/// The largest batch a storage applies atomically: one
/// [`LogStorage::append_batch`] must hold at most `entries_max` entries whose
/// encoded envelopes add up to at most `bytes_max` bytes.
///
/// The log never splits an append over several storage batches (that would
/// break all-or-nothing): an append over these limits is refused before
/// anything is written, and the group commit stops adding appends to a
/// group before it would exceed them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchLimits {
    /// Most entries in one atomic batch.
    pub entries_max: usize,
    /// Most bytes of encoded envelopes (values, keys excluded) in one batch.
    pub bytes_max: usize,
}

impl BatchLimits {
    /// No limit beyond the log's own (sled's batches are bounded only by
    /// memory, and the log bounds those with `APPEND_BYTES_MAX`).
    pub const UNBOUNDED: BatchLimits = BatchLimits {
        entries_max: usize::MAX,
        bytes_max: usize::MAX,
    };
}

/// Where the live log starts: the entries below `sequence` were moved to
/// an archive (see the `archive` module) and deleted from the storage;
/// `prev_hash` is the hash of entry `sequence - 1`, the chain's head just
/// before the first live entry. A log never archived starts at
/// [`LiveStart::genesis`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LiveStart {
    /// The first sequence the live log holds (or will hold, if it is empty).
    pub sequence: u64,
    /// The hash of entry `sequence - 1` (the genesis hash for 0).
    pub prev_hash: Hash,
}

/// Bytes of an encoded [`LiveStart`]: sequence, hash, SHA-256 checksum.
pub(crate) const LIVE_START_BYTES: usize = 8 + 32 + 32;

impl LiveStart {
    /// The start of a log nothing was archived from.
    pub fn genesis() -> Self {
        LiveStart {
            sequence: 0,
            prev_hash: genesis_hash(),
        }
    }

    /// Whether entries were archived (the live log does not start at 0).
    pub fn is_archived(&self) -> bool {
        self.sequence > 0
    }

    /// The stored form: sequence (u64 BE), hash, and a SHA-256 over both,
    /// so a damaged record is refused rather than trusted as a chain head.
    pub(crate) fn encode(&self) -> [u8; LIVE_START_BYTES] {
        let mut out = [0u8; LIVE_START_BYTES];
        out[..8].copy_from_slice(&self.sequence.to_be_bytes());
        out[8..40].copy_from_slice(&self.prev_hash);
        let checksum = Sha256::digest(&out[..40]);
        out[40..].copy_from_slice(&checksum);
        out
    }

    /// The record in `bytes`, `None` if it is not an intact one.
    pub(crate) fn decode(bytes: &[u8]) -> Option<Self> {
        if bytes.len() != LIVE_START_BYTES
            || Sha256::digest(&bytes[..40]).as_slice() != &bytes[40..]
        {
            return None;
        }
        let sequence = u64::from_be_bytes(bytes[..8].try_into().ok()?);
        let prev_hash = bytes[8..40].try_into().ok()?;
        Some(LiveStart {
            sequence,
            prev_hash,
        })
    }
}

/// An ordered key/value store holding encoded envelopes by sequence.
///
/// Implementations must be usable from several threads at once: the log
/// calls `flush` from one thread while others call `append_batch`.
pub trait LogStorage: Send + Sync {
    /// Inserts every `(sequence, encoded envelope)` pair atomically: after a
    /// crash either all of the batch is present or none of it. Nothing is
    /// durable until a later [`flush`](LogStorage::flush) returns `Ok`.
    fn append_batch(&self, entries: &[(u64, Vec<u8>)]) -> Result<(), StorageError>;

    /// Makes every `append_batch` that returned before this call durable.
    /// `Ok` is a promise that those entries survive a crash or power loss.
    fn flush(&self) -> Result<(), StorageError>;

    /// Iterates raw entries in key order, starting at `from`'s key.
    ///
    /// `from == 0` yields every key in the entries tree, including foreign
    /// keys that sort before sequence 0, so a full scan misses nothing.
    fn read_from(&self, from: u64)
        -> Box<dyn Iterator<Item = Result<RawEntry, StorageError>> + '_>;

    /// The highest sequence present, or `None` for an empty log.
    fn last_sequence(&self) -> Result<Option<u64>, StorageError>;

    /// The largest batch [`append_batch`](LogStorage::append_batch) applies
    /// atomically. Unbounded unless the engine has limits (etcd does).
    fn batch_limits(&self) -> BatchLimits {
        BatchLimits::UNBOUNDED
    }

    /// Stores `record` (an encoded snapshot record, opaque here) as the
    /// snapshot covering entries `0..covers`, replacing one stored under
    /// the same `covers`. `Ok` means durable: a crash after it returns
    /// keeps the whole record; a crash before leaves the old record or
    /// none, never a part that could be read as whole.
    ///
    /// Default: refused as [`StorageError::SnapshotsUnsupported`] (a
    /// storage without snapshots still opens: it lists none).
    fn put_snapshot(&self, covers: u64, record: &[u8]) -> Result<(), StorageError> {
        let _ = (covers, record);
        Err(StorageError::SnapshotsUnsupported)
    }

    /// The `covers` of every stored snapshot, newest (highest) first.
    /// Default: none.
    fn snapshot_sequences(&self) -> Result<Vec<u64>, StorageError> {
        Ok(Vec::new())
    }

    /// The `covers` of every snapshot whose write was cut short (a crash
    /// or a lost fence between its parts and the manifest written last:
    /// parts stored, never read as a snapshot), newest first. They are
    /// named when a start or a takeover skips them, and deleted by
    /// [`delete_snapshot`](LogStorage::delete_snapshot). Default: none (a
    /// storage whose snapshot put is atomic leaves none).
    fn incomplete_snapshots(&self) -> Result<Vec<u64>, StorageError> {
        Ok(Vec::new())
    }

    /// The record stored under `covers`, `None` if there is none (e.g.
    /// deleted since it was listed). Default: none.
    fn read_snapshot(&self, covers: u64) -> Result<Option<Vec<u8>>, StorageError> {
        let _ = covers;
        Ok(None)
    }

    /// Deletes the snapshot stored under `covers` (nothing if there is
    /// none); durable when `Ok`. Default: refused as
    /// [`StorageError::SnapshotsUnsupported`].
    fn delete_snapshot(&self, covers: u64) -> Result<(), StorageError> {
        let _ = covers;
        Err(StorageError::SnapshotsUnsupported)
    }

    /// Where the live log starts ([`LiveStart`]): entries below it were
    /// archived. Default: genesis (a storage that cannot archive).
    fn live_start(&self) -> Result<LiveStart, StorageError> {
        Ok(LiveStart::genesis())
    }

    /// Records `start` as where the live log starts, replacing the old
    /// record; durable when `Ok`. Called after the entries below it are
    /// safely archived and before they are deleted, so a crash in between
    /// leaves entries below the start that every reader skips. Default:
    /// refused as [`StorageError::ArchiveUnsupported`].
    fn set_live_start(&self, start: &LiveStart) -> Result<(), StorageError> {
        let _ = start;
        Err(StorageError::ArchiveUnsupported)
    }

    /// Deletes every entry with a sequence below `end` (already archived,
    /// below the recorded live start) and returns how many it deleted;
    /// durable when `Ok`. Done in bounded steps, so it may be cut short by
    /// a crash; calling it again finishes. Default: refused as
    /// [`StorageError::ArchiveUnsupported`].
    fn delete_below(&self, end: u64) -> Result<u64, StorageError> {
        let _ = end;
        Err(StorageError::ArchiveUnsupported)
    }

    /// Returns the space that [`delete_below`](LogStorage::delete_below)
    /// freed, where the engine keeps deleted keys' old versions (etcd
    /// compacts its revision history up to the revision of the last
    /// delete this handle made). Returns the revision compacted to,
    /// `None` when there was nothing to do. Default: nothing to do.
    fn compact_deleted(&self) -> Result<Option<i64>, StorageError> {
        Ok(None)
    }

    /// How many bytes the storage's database takes, and its quota when the
    /// engine reports one (etcd 3.4 does not: the daemon's configuration
    /// names it). `None` when the engine cannot tell. Default: `None`.
    fn space(&self) -> Result<Option<StorageSpace>, StorageError> {
        Ok(None)
    }
}

/// What [`LogStorage::space`] reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StorageSpace {
    /// The database's size (etcd: `dbSize` of the member asked; sled: its
    /// files on disk).
    pub bytes: u64,
    /// The most the engine accepts before refusing writes, if it says.
    pub quota_bytes: Option<u64>,
}

/// A failure of the storage layer.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// The storage engine found its own files damaged. The log never tries
    /// to repair this itself: a human decides whether to restore a copy.
    #[error(
        "the log database at {path} is corrupt ({detail}); refusing to use it \
         (no automatic repair is attempted: restore a copy or investigate)"
    )]
    Corruption {
        /// Directory of the database.
        path: PathBuf,
        /// What the engine reported.
        detail: String,
    },
    /// The directory holds no Fleetweft log (no database, or no log marker).
    #[error("{path} is not a Fleetweft log: {reason}")]
    NotALog {
        /// Directory that was opened.
        path: PathBuf,
        /// What was missing or unexpected.
        reason: String,
    },
    /// A key in the entries tree is not an 8-byte sequence number.
    #[error(
        "key {} in the entries tree of {path} is not an 8-byte sequence number",
        Hex(key)
    )]
    MalformedKey {
        /// Directory of the database.
        path: PathBuf,
        /// The offending key.
        key: Vec<u8>,
    },
    /// An I/O or engine failure while doing `action`.
    #[error("storage failure at {path} while {action}: {source}")]
    Io {
        /// Directory of the database.
        path: PathBuf,
        /// What the log was doing, e.g. "flushing".
        action: &'static str,
        /// The underlying error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// An etcd request failed or timed out while doing `action`, on every
    /// member tried within the request budget. After an append failed so
    /// its outcome is unknown (it may have committed; the backend resolves
    /// what it can by retrying first), so the log poisons itself; reopen
    /// to see what is there.
    #[error("etcd at {target} failed while {action}: {detail}")]
    Etcd {
        /// Endpoints and key prefix, e.g. `127.0.0.1:2379,... prefix /fw`.
        target: String,
        /// What the log was doing, e.g. "appending a batch".
        action: &'static str,
        /// What the client or server reported.
        detail: String,
    },
    /// The append's fencing compare failed: the leader key no longer holds
    /// this controller's lease (it expired, was revoked, or another
    /// controller was elected). Nothing of the batch was written.
    #[error(
        "deposed: the leader key {leader_key} no longer holds this controller's lease \
         (now held by {holder}); nothing was appended and this controller must stop acting"
    )]
    Deposed {
        /// The leader key under the log's prefix.
        leader_key: String,
        /// Who holds the leader key now, or "nobody".
        holder: String,
    },
    /// The leader key is still ours but a sequence key of the batch exists
    /// already: someone wrote to the log without holding the leadership.
    /// Nothing of the batch was written.
    #[error(
        "sequence {first} or a later one of this batch already exists under {prefix}: \
         another writer appended to the log; nothing was appended"
    )]
    SequenceTaken {
        /// The log's key prefix.
        prefix: String,
        /// First sequence of the refused batch.
        first: u64,
    },
    /// A batch over the storage's [`BatchLimits`] reached the storage: a
    /// bug in the caller (the log checks first). Nothing was written.
    #[error(
        "a batch of {entries} entries / {bytes} bytes exceeds the storage's atomic limit of \
         {} entries / {} bytes",
        limits.entries_max, limits.bytes_max
    )]
    BatchTooLarge {
        /// Entries in the batch.
        entries: usize,
        /// Encoded bytes in the batch.
        bytes: usize,
        /// The storage's limits.
        limits: BatchLimits,
    },
    /// The etcd cluster refuses transactions as large as the log's atomic
    /// batch limit (its `--max-txn-ops` or `--max-request-bytes` is too
    /// small). Checked when the log is opened, before anything is written.
    #[error(
        "the etcd cluster at {target} refuses an atomic batch of {entries_max} entries / \
         {bytes_max} bytes ({server}); start every member with {remedy}, or lower the \
         log's batch limits"
    )]
    EtcdLimitsTooSmall {
        /// Endpoints and key prefix.
        target: String,
        /// The entries limit that was probed.
        entries_max: usize,
        /// The bytes limit that was probed.
        bytes_max: usize,
        /// The server's refusal.
        server: String,
        /// The etcd flags that would fit.
        remedy: String,
    },
    /// A write was attempted on a storage opened read-only (no leadership).
    #[error("the log at {target} was opened read-only (no leadership); refusing to write")]
    ReadOnly {
        /// Endpoints and key prefix.
        target: String,
    },
    /// This storage does not keep snapshots (a test or benchmark store
    /// implementing only the entry methods of [`LogStorage`]).
    #[error("this log storage does not keep snapshots")]
    SnapshotsUnsupported,
    /// This storage cannot archive (a test or benchmark store implementing
    /// only the entry methods of [`LogStorage`]).
    #[error("this log storage cannot move entries to an archive")]
    ArchiveUnsupported,
    /// The record of where the live log starts is damaged: the log cannot
    /// tell which chain head its first live entry continues.
    #[error("the live-start record of the log at {target} is damaged; refusing to use it")]
    LiveStartDamaged {
        /// Directory or endpoints and prefix.
        target: String,
    },
    /// The configuration of the etcd backend is unusable.
    #[error("invalid etcd log configuration: {0}")]
    EtcdConfig(String),
    /// Another controller leads this log and the campaign's wait ran out.
    #[error("another controller ({holder}) leads the log at {target}; gave up waiting after {waited_ms} ms")]
    LeaderElsewhere {
        /// Endpoints and key prefix.
        target: String,
        /// The leader key's value (the other controller's name).
        holder: String,
        /// How long the campaign waited.
        waited_ms: u64,
    },
}

impl StorageError {
    /// Whether this error means another controller holds (or took) the
    /// right to append: the caller must stop acting at once. Matches
    /// [`StorageError::Deposed`] and [`StorageError::SequenceTaken`].
    pub fn is_fencing(&self) -> bool {
        matches!(
            self,
            StorageError::Deposed { .. } | StorageError::SequenceTaken { .. }
        )
    }
}

/// Formats bytes as `0x…` hex for error messages.
pub(crate) struct Hex<'a>(pub(crate) &'a [u8]);

impl fmt::Display for Hex<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("0x")?;
        for byte in self.0 {
            write!(f, "{byte:02x}")?;
        }
        Ok(())
    }
}

/// A boxed storage is a storage: lets one log type run on whichever
/// backend the configuration names (sled or etcd).
impl LogStorage for Box<dyn LogStorage> {
    fn append_batch(&self, entries: &[(u64, Vec<u8>)]) -> Result<(), StorageError> {
        (**self).append_batch(entries)
    }

    fn flush(&self) -> Result<(), StorageError> {
        (**self).flush()
    }

    fn read_from(
        &self,
        from: u64,
    ) -> Box<dyn Iterator<Item = Result<RawEntry, StorageError>> + '_> {
        (**self).read_from(from)
    }

    fn last_sequence(&self) -> Result<Option<u64>, StorageError> {
        (**self).last_sequence()
    }

    fn batch_limits(&self) -> BatchLimits {
        (**self).batch_limits()
    }

    fn put_snapshot(&self, covers: u64, record: &[u8]) -> Result<(), StorageError> {
        (**self).put_snapshot(covers, record)
    }

    fn snapshot_sequences(&self) -> Result<Vec<u64>, StorageError> {
        (**self).snapshot_sequences()
    }

    fn incomplete_snapshots(&self) -> Result<Vec<u64>, StorageError> {
        (**self).incomplete_snapshots()
    }

    fn read_snapshot(&self, covers: u64) -> Result<Option<Vec<u8>>, StorageError> {
        (**self).read_snapshot(covers)
    }

    fn delete_snapshot(&self, covers: u64) -> Result<(), StorageError> {
        (**self).delete_snapshot(covers)
    }

    fn live_start(&self) -> Result<LiveStart, StorageError> {
        (**self).live_start()
    }

    fn set_live_start(&self, start: &LiveStart) -> Result<(), StorageError> {
        (**self).set_live_start(start)
    }

    fn delete_below(&self, end: u64) -> Result<u64, StorageError> {
        (**self).delete_below(end)
    }

    fn compact_deleted(&self) -> Result<Option<i64>, StorageError> {
        (**self).compact_deleted()
    }

    fn space(&self) -> Result<Option<StorageSpace>, StorageError> {
        (**self).space()
    }
}
