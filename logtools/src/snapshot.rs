//! What the controller stores in a snapshot (issue #26 item 1): the
//! model's encoding of its state, and beside it the runtime's *annex*
//! (what the daemon derives from the history and would otherwise rebuild
//! by reading all of it: the log index, the nodes ahead of the log).
//!
//! The event log stamps the bytes with the sequence and head hash they
//! cover and checksums them (`eventlog::snapshot`); this layout only
//! splits them. Version [`SNAPSHOT_FRAME_VERSION`]: version (u16 LE),
//! state length (u64 LE), the state (`model::controller::snapshot`), then
//! the annex to the end (the daemon's own versioned encoding). A frame of
//! another version is refused, so the log skips the snapshot and replays
//! further: a snapshot is a cache, never the only copy of anything.

use model::controller::snapshot::{decode_state, encode_state, SnapshotFormatError};
use model::controller::ControllerState;

/// Version of the frame written by this build.
pub const SNAPSHOT_FRAME_VERSION: u16 = 1;

/// Bytes before the state: version, state length.
const FRAME_HEADER_BYTES: usize = 2 + 8;

/// Why a stored snapshot's bytes cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotFrameError {
    /// Fewer bytes than the frame's header.
    #[error("snapshot frame of {len} bytes is shorter than its {FRAME_HEADER_BYTES}-byte header")]
    ShortHeader {
        /// Bytes present.
        len: usize,
    },
    /// Written by another build's layout.
    #[error(
        "snapshot frame version {found} is not {SNAPSHOT_FRAME_VERSION}, the one this build reads"
    )]
    UnsupportedVersion {
        /// The version found.
        found: u16,
    },
    /// The state length points past the end.
    #[error("snapshot frame names a {state_len}-byte state but holds {available} bytes after its header")]
    StateLength {
        /// The length the header names.
        state_len: u64,
        /// Bytes after the header.
        available: usize,
    },
    /// The model's encoding of the state is refused.
    #[error("snapshot state: {0}")]
    State(#[from] SnapshotFormatError),
    /// The daemon's annex is refused.
    #[error("snapshot annex: {0}")]
    Annex(String),
}

/// Encodes `state` and the runtime's `annex` as one snapshot.
pub fn encode_frame(state: &ControllerState, annex: &[u8]) -> Result<Vec<u8>, SnapshotFrameError> {
    let state = encode_state(state)?;
    let mut bytes = Vec::with_capacity(FRAME_HEADER_BYTES + state.len() + annex.len());
    bytes.extend_from_slice(&SNAPSHOT_FRAME_VERSION.to_le_bytes());
    bytes.extend_from_slice(&(state.len() as u64).to_le_bytes());
    bytes.extend_from_slice(&state);
    bytes.extend_from_slice(annex);
    Ok(bytes)
}

/// Splits a frame written by [`encode_frame`]: the decoded state and the
/// annex's bytes (not interpreted here).
pub fn decode_frame(bytes: &[u8]) -> Result<(ControllerState, &[u8]), SnapshotFrameError> {
    let Some((header, rest)) = bytes.split_at_checked(FRAME_HEADER_BYTES) else {
        return Err(SnapshotFrameError::ShortHeader { len: bytes.len() });
    };
    let (version, state_len) = header.split_at(2);
    let found = u16::from_le_bytes([version[0], version[1]]);
    if found != SNAPSHOT_FRAME_VERSION {
        return Err(SnapshotFrameError::UnsupportedVersion { found });
    }
    let mut len = [0u8; 8];
    len.copy_from_slice(state_len);
    let state_len = u64::from_le_bytes(len);
    let split = usize::try_from(state_len)
        .ok()
        .filter(|n| *n <= rest.len())
        .ok_or(SnapshotFrameError::StateLength {
            state_len,
            available: rest.len(),
        })?;
    let (state, annex) = rest.split_at(split);
    Ok((decode_state(state)?, annex))
}

/// `fleetweft log verify --deep`: verifies the whole log (entries, chain,
/// decoding) while folding every event from genesis, and compares each
/// stored snapshot with the fold at the point it covers: its record, its
/// link to the chain, its frame, its annex (it must decode), and its state
/// (it must equal the fold). Reads only.
///
/// The annex is checked to decode, not compared: the core derives it
/// from the state after each durable batch, which a fold event by event
/// cannot reproduce, and it only says since when things wait.
pub fn verify_deep(
    storage: &dyn eventlog::LogStorage,
) -> Result<eventlog::SnapshotsReport, eventlog::VerifyError> {
    let mut state = ControllerState::default();
    eventlog::verify_snapshots(
        storage,
        &mut state,
        |state, sequence, payload| {
            let event = eventlog::decode_payload::<model::controller::Event>(payload)
                .map_err(|e| format!("entry {sequence}: {e}"))?;
            model::controller::apply(state, &event);
            Ok(())
        },
        compare_frame,
    )
}

/// [`verify_deep`] through the archive in `dir` (`log verify --deep
/// --archive DIR`): the fold starts at genesis in the archive's first
/// segment and goes on into the live log, and every stored snapshot is
/// compared with it where it covers. Reads only.
pub fn verify_deep_with_archive(
    dir: &std::path::Path,
    storage: &dyn eventlog::LogStorage,
) -> Result<(eventlog::SnapshotsReport, eventlog::HistoryReport), eventlog::ArchiveError> {
    let mut state = ControllerState::default();
    eventlog::verify_snapshots_with_archive(
        dir,
        storage,
        &mut state,
        |state, sequence, payload| {
            let event = eventlog::decode_payload::<model::controller::Event>(payload)
                .map_err(|e| format!("entry {sequence}: {e}"))?;
            model::controller::apply(state, &event);
            Ok(())
        },
        compare_frame,
    )
}

/// A stored frame against the fold of the first `covers` entries.
fn compare_frame(state: &ControllerState, covers: u64, bytes: &[u8]) -> Result<(), String> {
    let (stored, annex) = decode_frame(bytes).map_err(|e| e.to_string())?;
    crate::annex::Derived::decode(annex).map_err(|e| format!("annex: {e}"))?;
    if stored == *state {
        Ok(())
    } else {
        Err(format!(
            "its state differs from the fold of the first {covers} entries"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::controller::{apply, Event};
    use model::NodeId;

    fn some_state() -> ControllerState {
        let mut state = ControllerState::default();
        apply(
            &mut state,
            &Event::NodeEnrolled {
                node: NodeId(0),
                name: "edge-0".into(),
                labels: Default::default(),
                public: "192.0.2.1:9000".into(),
            },
        );
        state
    }

    #[test]
    fn a_frame_round_trips_state_and_annex() {
        let state = some_state();
        let bytes = encode_frame(&state, b"annex").expect("encodes");
        let (decoded, annex) = decode_frame(&bytes).expect("decodes");
        assert_eq!(decoded, state);
        assert_eq!(annex, b"annex");
    }

    #[test]
    fn a_damaged_frame_names_what_is_wrong() {
        let bytes = encode_frame(&some_state(), b"").expect("encodes");
        assert!(matches!(
            decode_frame(&bytes[..3]),
            Err(SnapshotFrameError::ShortHeader { len: 3 })
        ));
        let mut other = bytes.clone();
        other[0] = 9;
        assert!(matches!(
            decode_frame(&other),
            Err(SnapshotFrameError::UnsupportedVersion { found: 9 })
        ));
        let mut long = bytes.clone();
        long[2..10].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(matches!(
            decode_frame(&long),
            Err(SnapshotFrameError::StateLength { .. })
        ));
        let mut flipped = bytes;
        flipped[FRAME_HEADER_BYTES] ^= 0xff;
        assert!(matches!(
            decode_frame(&flipped),
            Err(SnapshotFrameError::State(_))
        ));
    }
}
