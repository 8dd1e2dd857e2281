//! The narrow storage interface the log needs, so the commit protocol can be
//! tested against a fault-injecting store and the engine could be swapped.

use std::fmt;
use std::path::PathBuf;

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
