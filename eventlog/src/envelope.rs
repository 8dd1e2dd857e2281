//! The on-disk entry format: one [`Envelope`] per log entry.
//!
//! Every entry carries a format version, its own sequence number, the SHA-256
//! of the previous entry's encoded bytes (the hash chain), the bincode-encoded
//! event, and a SHA-256 checksum over all of that. The checksum catches a
//! flipped byte in any entry, including the last one, which the chain alone
//! cannot (nothing after it points back at it).

use bincode::config::{Configuration, Limit, LittleEndian, Varint};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Version of the entry format (the envelope layout and the encoding of the
/// events in it) written by this build; readers reject others.
///
/// - 1: first layout.
/// - 2: route observations in events carry the process uptime and restart
///   count (`model::RouteObservation`); a version-1 log is refused by name
///   rather than misread.
pub const LOG_FORMAT_VERSION: u16 = 2;

/// Upper bound on one encoded envelope, in bytes.
///
/// Kept well under sled's "blob" threshold (a quarter of its segment size,
/// 2 MiB with the segment size the log configures): a sled leaf holds up to
/// 17 entries before splitting, and 17 × 64 KiB stays inline in sled's own
/// log, whose writes sled makes stable. Larger pages would go to separate
/// blob files that sled 0.34.7 never fsyncs.
pub const ENTRY_BYTES_MAX: usize = 64 * 1024;

/// Worst-case bincode overhead of an envelope around its payload: varint
/// version (≤ 3) + varint sequence (≤ 9) + prev hash (32) + varint payload
/// length (≤ 9) + checksum (32).
pub(crate) const ENVELOPE_OVERHEAD_MAX: usize = 3 + 9 + 32 + 9 + 32;

/// Upper bound on one encoded event (an envelope's payload), in bytes.
pub const PAYLOAD_BYTES_MAX: usize = ENTRY_BYTES_MAX - ENVELOPE_OVERHEAD_MAX;

/// A SHA-256 digest.
pub type Hash = [u8; 32];

/// The bincode configuration for envelopes and events. The limit makes a
/// corrupt length prefix fail cleanly instead of allocating gigabytes.
const CODEC: Configuration<LittleEndian, Varint, Limit<ENTRY_BYTES_MAX>> =
    bincode::config::standard().with_limit::<ENTRY_BYTES_MAX>();

/// The value the first entry's `prev_hash` chains to.
pub fn genesis_hash() -> Hash {
    hash_bytes(b"fleetweft-log-genesis-v1")
}

/// SHA-256 of `bytes`; the chain links entries by this hash of their encoding.
pub fn hash_bytes(bytes: &[u8]) -> Hash {
    Sha256::digest(bytes).into()
}

/// Why an envelope is not acceptable, before writing or after reading.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvelopeFault {
    /// Written by a different (probably newer) layout version.
    #[error("unsupported format version {found} (this build reads version {LOG_FORMAT_VERSION})")]
    UnsupportedVersion {
        /// The version found in the entry.
        found: u16,
    },
    /// The stored checksum does not match the entry's contents.
    #[error("checksum mismatch: the entry's bytes were altered")]
    ChecksumMismatch,
    /// Larger than [`ENTRY_BYTES_MAX`] (or its payload larger than [`PAYLOAD_BYTES_MAX`]).
    #[error("entry of {len} bytes exceeds the {max}-byte limit")]
    TooLarge {
        /// Size found.
        len: usize,
        /// The limit it broke.
        max: usize,
    },
    /// The bytes do not decode as an envelope (truncated, garbled or trailing bytes).
    #[error("undecodable entry: {detail}")]
    Undecodable {
        /// What the decoder reported.
        detail: String,
    },
}

/// One log entry as stored in the entries tree, keyed by its sequence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Envelope {
    /// Layout version; [`LOG_FORMAT_VERSION`] for everything this build writes.
    pub format_version: u16,
    /// Position in the log; equals the entry's key.
    pub sequence: u64,
    /// SHA-256 of the previous entry's encoded bytes, or [`genesis_hash`].
    pub prev_hash: Hash,
    /// The event, encoded with [`encode_payload`].
    pub payload: Vec<u8>,
    /// SHA-256 over the other fields, see [`Envelope::compute_checksum`].
    pub checksum: Hash,
}

impl Envelope {
    /// Builds an envelope of the current version with a correct checksum.
    pub fn seal(sequence: u64, prev_hash: Hash, payload: Vec<u8>) -> Self {
        let mut envelope = Envelope {
            format_version: LOG_FORMAT_VERSION,
            sequence,
            prev_hash,
            payload,
            checksum: [0; 32],
        };
        envelope.checksum = envelope.compute_checksum();
        envelope
    }

    /// SHA-256 over the version, sequence, prev hash and length-prefixed payload.
    ///
    /// Hashes a fixed layout rather than the bincode encoding so the checksum's
    /// meaning does not depend on encoder details.
    pub fn compute_checksum(&self) -> Hash {
        let mut hasher = Sha256::new();
        hasher.update(self.format_version.to_le_bytes());
        hasher.update(self.sequence.to_be_bytes());
        hasher.update(self.prev_hash);
        hasher.update((self.payload.len() as u64).to_le_bytes());
        hasher.update(&self.payload);
        hasher.finalize().into()
    }

    /// Checks version, payload size and checksum.
    ///
    /// Called both before an entry is written and after it is read back, so
    /// a bug on either side is caught at the boundary rather than at replay.
    pub fn validate(&self) -> Result<(), EnvelopeFault> {
        // Version first: a future version may checksum differently, and
        // "unsupported version" is the more useful diagnosis.
        if self.format_version != LOG_FORMAT_VERSION {
            return Err(EnvelopeFault::UnsupportedVersion {
                found: self.format_version,
            });
        }
        if self.payload.len() > PAYLOAD_BYTES_MAX {
            return Err(EnvelopeFault::TooLarge {
                len: self.payload.len(),
                max: PAYLOAD_BYTES_MAX,
            });
        }
        if self.checksum != self.compute_checksum() {
            return Err(EnvelopeFault::ChecksumMismatch);
        }
        Ok(())
    }

    /// Validates, then encodes with bincode; the result is what gets stored.
    pub fn encode(&self) -> Result<Vec<u8>, EnvelopeFault> {
        self.validate()?;
        self.encode_unchecked()
    }

    /// Encodes with bincode and checks the size bound, without validating.
    fn encode_unchecked(&self) -> Result<Vec<u8>, EnvelopeFault> {
        let bytes = bincode::serde::encode_to_vec(self, CODEC).map_err(|err| {
            EnvelopeFault::Undecodable {
                detail: format!("cannot encode envelope: {err}"),
            }
        })?;
        // Holds by construction given the payload bound; checked because
        // the bound is what keeps entries out of sled's unsynced blob files.
        if bytes.len() > ENTRY_BYTES_MAX {
            return Err(EnvelopeFault::TooLarge {
                len: bytes.len(),
                max: ENTRY_BYTES_MAX,
            });
        }
        Ok(bytes)
    }

    /// Seals a new envelope and encodes it: the bytes to store and their
    /// hash (the next entry's `prev_hash`).
    ///
    /// Same checks as `seal(..).encode()`, minus recomputing the checksum
    /// that was computed an instant earlier: one SHA-256 for the checksum and
    /// one for the chain per entry, instead of three.
    pub fn seal_encoded(
        sequence: u64,
        prev_hash: Hash,
        payload: Vec<u8>,
    ) -> Result<(Vec<u8>, Hash), EnvelopeFault> {
        let envelope = Envelope::seal(sequence, prev_hash, payload);
        if envelope.payload.len() > PAYLOAD_BYTES_MAX {
            return Err(EnvelopeFault::TooLarge {
                len: envelope.payload.len(),
                max: PAYLOAD_BYTES_MAX,
            });
        }
        let bytes = envelope.encode_unchecked()?;
        let hash = hash_bytes(&bytes);
        Ok((bytes, hash))
    }

    /// Decodes stored bytes (bounded, all bytes consumed) and validates.
    pub fn decode(bytes: &[u8]) -> Result<Self, EnvelopeFault> {
        if bytes.len() > ENTRY_BYTES_MAX {
            return Err(EnvelopeFault::TooLarge {
                len: bytes.len(),
                max: ENTRY_BYTES_MAX,
            });
        }
        let envelope: Envelope =
            decode_exact(bytes).map_err(|detail| EnvelopeFault::Undecodable { detail })?;
        envelope.validate()?;
        Ok(envelope)
    }
}

/// Encodes an event the way the log stores it (bincode 2, serde, standard config).
///
/// Fails if the event cannot be serialized or exceeds [`PAYLOAD_BYTES_MAX`].
pub fn encode_payload<E: Serialize>(event: &E) -> Result<Vec<u8>, PayloadError> {
    let bytes = bincode::serde::encode_to_vec(event, CODEC)
        .map_err(|err| PayloadError::Encode(err.to_string()))?;
    if bytes.len() > PAYLOAD_BYTES_MAX {
        return Err(PayloadError::TooLarge {
            len: bytes.len(),
            max: PAYLOAD_BYTES_MAX,
        });
    }
    Ok(bytes)
}

/// Decodes an event from an envelope payload; use it in `verify_with` hooks.
///
/// Trailing bytes are an error: a payload is exactly one event.
pub fn decode_payload<E: DeserializeOwned>(payload: &[u8]) -> Result<E, PayloadError> {
    if payload.len() > PAYLOAD_BYTES_MAX {
        return Err(PayloadError::TooLarge {
            len: payload.len(),
            max: PAYLOAD_BYTES_MAX,
        });
    }
    decode_exact(payload).map_err(PayloadError::Decode)
}

/// Why an event could not be turned into a payload or back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PayloadError {
    /// Serialization failed.
    #[error("cannot encode event: {0}")]
    Encode(String),
    /// The payload is not a valid encoding of the event type.
    #[error("cannot decode event: {0}")]
    Decode(String),
    /// Over [`PAYLOAD_BYTES_MAX`].
    #[error("event of {len} bytes exceeds the {max}-byte payload limit")]
    TooLarge {
        /// Encoded size.
        len: usize,
        /// The limit.
        max: usize,
    },
}

/// Bounded bincode decode that also rejects trailing bytes.
fn decode_exact<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, String> {
    let (value, read) =
        bincode::serde::decode_from_slice::<T, _>(bytes, CODEC).map_err(|err| err.to_string())?;
    if read != bytes.len() {
        return Err(format!(
            "{} trailing bytes after a {read}-byte value",
            bytes.len() - read
        ));
    }
    Ok(value)
}

/// Upper bound of the encoded envelopes' total size for `payloads`.
pub(super) fn encoded_bytes_bound(payloads: &[Vec<u8>]) -> usize {
    payloads
        .iter()
        .map(|payload| payload.len().saturating_add(ENVELOPE_OVERHEAD_MAX))
        .fold(0, usize::saturating_add)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seal_encode_decode_round_trips() {
        let envelope = Envelope::seal(7, genesis_hash(), vec![1, 2, 3]);
        let bytes = envelope.encode().expect("valid envelope encodes");
        assert_eq!(Envelope::decode(&bytes), Ok(envelope));
    }

    #[test]
    fn every_flipped_byte_is_detected() {
        let bytes = Envelope::seal(3, genesis_hash(), b"payload".to_vec())
            .encode()
            .expect("valid envelope encodes");
        for index in 0..bytes.len() {
            let mut corrupt = bytes.clone();
            corrupt[index] ^= 0x01;
            assert!(
                Envelope::decode(&corrupt).is_err(),
                "flip at byte {index} went unnoticed"
            );
        }
    }

    #[test]
    fn oversized_payload_is_refused_before_writing() {
        let envelope = Envelope::seal(0, genesis_hash(), vec![0; PAYLOAD_BYTES_MAX + 1]);
        assert!(matches!(
            envelope.encode(),
            Err(EnvelopeFault::TooLarge { .. })
        ));
        // The largest allowed payload still fits the entry bound.
        let largest = Envelope::seal(u64::MAX, genesis_hash(), vec![0xff; PAYLOAD_BYTES_MAX]);
        let bytes = largest.encode().expect("maximum payload fits");
        assert!(bytes.len() <= ENTRY_BYTES_MAX);
    }

    #[test]
    fn trailing_bytes_are_refused() {
        let mut bytes = Envelope::seal(0, genesis_hash(), vec![])
            .encode()
            .expect("valid envelope encodes");
        bytes.push(0);
        assert!(matches!(
            Envelope::decode(&bytes),
            Err(EnvelopeFault::Undecodable { .. })
        ));
    }
}
