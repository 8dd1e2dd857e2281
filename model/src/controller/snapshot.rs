//! A versioned byte encoding of [`ControllerState`] for snapshots: a
//! controller start loads the newest snapshot and folds only the log's
//! tail after it, instead of every event ever appended.
//!
//! Format: [`SNAPSHOT_MAGIC`] (8 bytes), [`SNAPSHOT_FORMAT_VERSION`] (u16
//! little-endian), then the state in bincode 2 (serde, standard
//! configuration: little-endian, varint integers), all bytes consumed.
//!
//! A snapshot is a cache of the log's fold, never a source of truth: a
//! snapshot of another version is refused by name (the caller falls back
//! to an older snapshot or to a full replay), never misread. Any change to
//! the encoding of [`ControllerState`] or of a type inside it (a field
//! added, a variant inserted) must bump [`SNAPSHOT_FORMAT_VERSION`]; the
//! golden test in `model/tests/snapshot.rs` fails until it does.
//!
//! Decoding treats its input as untrusted: length prefixes never drive an
//! allocation larger than the input (see `bounded.rs`), and every failure
//! is a [`SnapshotFormatError`], never a panic. It checks the encoding,
//! not the meaning: a state that decodes is not thereby one the rules
//! allow (`invariants::check_state` judges that), which is why storage
//! layers checksum the bytes and tie them to the log they summarise.

mod bounded;

use super::state::ControllerState;
use bincode::config::{Configuration, Limit, LittleEndian, Varint};
use bincode::error::DecodeError;
use serde::de::{DeserializeSeed, Deserializer};
use serde::Deserialize;

/// The first bytes of every encoded controller-state snapshot.
pub const SNAPSHOT_MAGIC: [u8; 8] = *b"FWCSTATE";

/// Version of the snapshot encoding written by this build; decoding refuses
/// every other.
///
/// - 1: first encoding.
/// - 2: forgotten rollouts (`Rollout::forgotten`, `ControllerState::
///   remembered` and `forgotten_ops`): a version-1 state never forgot, so
///   folding on from it would differ from a fold from genesis.
/// - 3: the drifted-node index (`ControllerState::drifted`): a version-2
///   state would decode without it and miscount drifted nodes.
/// - 4: a node's platform (`NodeRecord::platform`, issue #24 item 5): a
///   version-3 state has no field for it; a start that finds one folds
///   from an older snapshot or from genesis and writes a version-4 one.
/// - 5: a rollout's architectures (`Rollout::arches`, issue #24 item 5):
///   a version-4 state would decode without them and grant a node the
///   release has no tree for.
/// - 6: configurations (`ControllerState::configs`, `Rollout::deploys`,
///   issue #24 item 1): a version-5 state would decode without them and
///   refuse a rollout of the latest recorded revision.
/// - 7: operators (`ControllerState::operators`, issue #28 item 2): a
///   version-6 state would decode without them and refuse every operator,
///   or let an input without one through.
pub const SNAPSHOT_FORMAT_VERSION: u16 = 7;

/// Bytes before the bincode body: magic and version.
pub const SNAPSHOT_HEADER_BYTES: usize = SNAPSHOT_MAGIC.len() + 2;

/// Largest encoded snapshot accepted, in bytes (256 MiB): far above a
/// fleet of 100,000 nodes with a million archived ops, and a bound on what
/// a damaged length can make the decoder read.
pub const SNAPSHOT_BYTES_MAX: usize = 256 << 20;

/// bincode with a bound on the body, so no length can claim more than
/// [`SNAPSHOT_BYTES_MAX`].
const CODEC: Configuration<LittleEndian, Varint, Limit<SNAPSHOT_BYTES_MAX>> =
    bincode::config::standard().with_limit::<SNAPSHOT_BYTES_MAX>();

/// Why bytes are not a snapshot this build can read, or a state could not
/// be encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SnapshotFormatError {
    /// Shorter than the header: cut off before the body started.
    #[error("snapshot of {len} bytes is shorter than its {SNAPSHOT_HEADER_BYTES}-byte header")]
    ShortHeader {
        /// Bytes present.
        len: usize,
    },
    /// The first bytes are not [`SNAPSHOT_MAGIC`]: not a controller-state
    /// snapshot at all.
    #[error("not a controller-state snapshot: magic {found:02x?}, expected {SNAPSHOT_MAGIC:02x?}")]
    WrongMagic {
        /// The bytes found where the magic belongs.
        found: [u8; 8],
    },
    /// Written in another encoding version (older or newer).
    #[error(
        "snapshot format version {found} is not supported (this build reads version \
         {SNAPSHOT_FORMAT_VERSION})"
    )]
    UnsupportedVersion {
        /// The version in the header.
        found: u16,
    },
    /// Over [`SNAPSHOT_BYTES_MAX`].
    #[error("snapshot of {len} bytes exceeds the {max}-byte limit")]
    TooLarge {
        /// Size found (or encoded).
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The body ends before the state does.
    #[error("snapshot truncated: the state needs at least {missing} more bytes")]
    Truncated {
        /// Bytes missing, as far as the decoder could tell.
        missing: usize,
    },
    /// The body is not an encoding of a controller state.
    #[error("snapshot body does not decode as a controller state: {detail}")]
    Undecodable {
        /// What the decoder reported.
        detail: String,
    },
    /// Bytes remain after the state: the body is exactly one state.
    #[error("{trailing} trailing bytes after a {read}-byte state")]
    TrailingBytes {
        /// Bytes left over.
        trailing: usize,
        /// Bytes the state took.
        read: usize,
    },
    /// The state could not be encoded.
    #[error("cannot encode the controller state: {detail}")]
    Encode {
        /// What the encoder reported.
        detail: String,
    },
}

/// Encodes `state` as a snapshot: header, then bincode.
pub fn encode_state(state: &ControllerState) -> Result<Vec<u8>, SnapshotFormatError> {
    let mut bytes = Vec::with_capacity(SNAPSHOT_HEADER_BYTES);
    bytes.extend_from_slice(&SNAPSHOT_MAGIC);
    bytes.extend_from_slice(&SNAPSHOT_FORMAT_VERSION.to_le_bytes());
    bincode::serde::encode_into_std_write(state, &mut bytes, CODEC).map_err(|err| {
        SnapshotFormatError::Encode {
            detail: err.to_string(),
        }
    })?;
    if bytes.len() > SNAPSHOT_BYTES_MAX {
        return Err(SnapshotFormatError::TooLarge {
            len: bytes.len(),
            max: SNAPSHOT_BYTES_MAX,
        });
    }
    Ok(bytes)
}

/// Decodes a snapshot written by [`encode_state`] of this format version.
///
/// Checks, in order: size, header length, magic, version, then decodes the
/// body exactly (no bytes missing, none left over).
pub fn decode_state(bytes: &[u8]) -> Result<ControllerState, SnapshotFormatError> {
    if bytes.len() > SNAPSHOT_BYTES_MAX {
        return Err(SnapshotFormatError::TooLarge {
            len: bytes.len(),
            max: SNAPSHOT_BYTES_MAX,
        });
    }
    let Some((header, body)) = bytes.split_at_checked(SNAPSHOT_HEADER_BYTES) else {
        return Err(SnapshotFormatError::ShortHeader { len: bytes.len() });
    };
    let (magic, version) = header.split_at(SNAPSHOT_MAGIC.len());
    if magic != SNAPSHOT_MAGIC {
        let mut found = [0u8; 8];
        found.copy_from_slice(magic);
        return Err(SnapshotFormatError::WrongMagic { found });
    }
    let found = u16::from_le_bytes([version[0], version[1]]);
    if found != SNAPSHOT_FORMAT_VERSION {
        return Err(SnapshotFormatError::UnsupportedVersion { found });
    }
    let (state, read) =
        bincode::serde::seed_decode_from_slice(StateSeed, body, CODEC).map_err(decode_error)?;
    if read != body.len() {
        return Err(SnapshotFormatError::TrailingBytes {
            trailing: body.len() - read,
            read,
        });
    }
    Ok(state)
}

/// Decodes the state through the allocation-safe adapter.
struct StateSeed;

impl<'de> DeserializeSeed<'de> for StateSeed {
    type Value = ControllerState;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        ControllerState::deserialize(bounded::Bounded(deserializer))
    }
}

fn decode_error(err: DecodeError) -> SnapshotFormatError {
    match err {
        DecodeError::UnexpectedEnd { additional } => SnapshotFormatError::Truncated {
            missing: additional,
        },
        other => SnapshotFormatError::Undecodable {
            detail: other.to_string(),
        },
    }
}
