//! Versioned, length-prefixed, bounded wire frames.
//!
//! A frame on the wire is a `u32` big-endian length followed by that many
//! bytes of body. The body is the bincode-2 (serde, standard config) encoding
//! of [`WireFrame`]. Every check that can reject a peer's bytes happens before
//! anything is trusted: the length is checked before a buffer is allocated,
//! then the version, then the body, then that nothing trails it.

use model::{Digest, OpId, RouteObservation, ToAgent, ToController};
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// The wire format version this build speaks. Bumped on any incompatible
/// change to [`FrameBody`]; a peer on another version is refused outright
/// rather than half-understood.
///
/// - 1: first format.
/// - 2: route observations in reports carry the process uptime and restart
///   count (`model::RouteObservation`).
/// - 3: the controller can ask an agent for a fresh readback of its route
///   ([`FrameBody::ReadBackRequest`], answered by [`FrameBody::ReadBackReply`]).
pub const WIRE_VERSION: u16 = 3;

/// The shortest time, in milliseconds, between the end of one readback an
/// agent answered and the next one it answers. A readback re-probes the
/// route and re-hashes the installed bundle and app file, so it is bounded;
/// a request that comes sooner is dropped (never answered with an older
/// observation, which would show a stale value as current). The controller
/// spaces its requests by the same bound so it does not ask in vain.
pub const READBACK_INTERVAL_MIN_MS: u64 = 200;

/// The largest frame body accepted or produced, in bytes. Control messages
/// are a few hundred bytes; bundles travel as raw bytes outside frames, so a
/// small bound costs nothing and caps what a peer can make us allocate.
pub const FRAME_BYTES_MAX: usize = 64 * 1024;

/// Size of the length prefix in front of every frame body.
pub const LENGTH_PREFIX_BYTES: usize = 4;

// The length prefix can express every frame length up to the bound.
const _: () = assert!(FRAME_BYTES_MAX as u64 <= u32::MAX as u64);
const _: () = assert!(LENGTH_PREFIX_BYTES == std::mem::size_of::<u32>());

/// What a frame carries.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum FrameBody {
    /// A command from the controller to an agent (control stream).
    ToAgent(ToAgent),
    /// A message from an agent to the controller (control stream).
    ToController(ToController),
    /// First frame on a bundle stream: the agent asks for a bundle by digest.
    FetchBundle {
        /// SHA-256 of the bundle bytes wanted.
        digest: Digest,
    },
    /// The controller has the bundle; exactly `len` raw bytes follow the frame.
    BundleFollows {
        /// Number of raw bytes after this frame.
        len: u64,
    },
    /// The controller has no bundle with the asked-for digest.
    BundleMissing,
    /// The controller asks an agent for a fresh readback of what its public
    /// route serves now (control stream, controller to agent). Changes
    /// nothing on the agent. Appended after the older variants so their
    /// encodings stay the same.
    ReadBackRequest {
        /// The controller's id of this request, echoed in the reply.
        request: u64,
    },
    /// The agent's answer to [`FrameBody::ReadBackRequest`] (control stream,
    /// agent to controller): its route probed and its artifact re-read when
    /// the request arrived, never a remembered observation.
    ReadBackReply {
        /// The id of the request this answers.
        request: u64,
        /// The fresh probe of the route, with the process uptime and restart
        /// count and the artifact read back from disk.
        observation: RouteObservation,
        /// The release the agent's route points at now; `None` when it
        /// points at nothing.
        serving: Option<Digest>,
    },
    /// A hot standby's answer to an agent's hello (control stream,
    /// controller to agent): "not the leader, try `leader`"; the standby
    /// then closes the connection. Appended after the older variants so
    /// their encodings stay the same (an older agent cannot decode it,
    /// closes the connection, and moves on to its next address: the same
    /// outcome, so the wire version is not bumped). A transport message,
    /// not a model command: it never reaches the agent's core.
    NotLeader {
        /// The leader's agents' address (`HOST:PORT`) as it advertises it;
        /// `None` while no leader is known.
        leader: Option<String>,
    },
    /// First frame on a chunk stream (issue #23 item 2): the agent asks
    /// for one content chunk of a format-2 release by its SHA-256.
    /// Appended after the older variants so their encodings stay the same;
    /// a controller that does not know it closes the stream's connection as
    /// for any unexpected frame, which the agent retries as transient.
    FetchChunk {
        /// SHA-256 of the chunk bytes wanted.
        digest: Digest,
    },
    /// The controller holds the chunk; exactly `len` raw bytes follow the
    /// frame (at most [`crate::quic::CHUNK_BYTES_MAX`]).
    ChunkFollows {
        /// Number of raw bytes after this frame.
        len: u64,
    },
    /// The controller holds no chunk with the asked-for digest.
    ChunkMissing,
    /// The plain-HTTP mirrors an agent may fetch the chunks of `release`
    /// from (issue #23 item 5), sent on the control stream just before
    /// the `ToAgent::Apply` of that release (controller to agent). A
    /// transport hint, not a model command: mirrors are untrusted (every
    /// chunk is checked against the signed manifest) and the controller
    /// stays the last source, so the agent's core never sees it. Sent
    /// only when the node's list is not empty, so an agent that does not
    /// know the frame keeps working as long as no mirror is configured.
    /// Appended after the older variants so their encodings stay the same.
    Mirrors {
        /// The release the list is for; an agent uses it for no other.
        release: Digest,
        /// Base URLs (`http://host[:port][/path]`), tried in order; a
        /// chunk is at `BASE/chunks/<sha256>`. At most [`MIRRORS_MAX`].
        mirrors: Vec<String>,
    },
    /// Where the chunks of a staged release came from (agent to
    /// controller, control stream), sent once the release is staged and
    /// before its commit request: one tally per source that served or
    /// failed. Telemetry for operators (`fleetweft op show`), never
    /// evidence: the artifact's read-back stays the proof. Appended after
    /// the older variants so their encodings stay the same.
    FetchSources {
        /// The op that staged the release.
        op: OpId,
        /// The release staged.
        release: Digest,
        /// One tally per source, mirrors in list order, the controller
        /// last. At most [`MIRRORS_MAX`] + 1.
        sources: Vec<SourceTally>,
    },
    /// First frame on a chunk stream that resumes a fetch cut short (agent
    /// to controller): the bytes of the chunk with SHA-256 `digest` from
    /// `offset` on, the agent holding the bytes before it from an earlier
    /// attempt (a restart mid-fetch). Answered as [`FrameBody::FetchChunk`]
    /// is, `ChunkFollows` announcing the bytes after `offset` (0 when
    /// `offset` is at or past the chunk's end). The agent hashes its
    /// prefix and the bytes that follow together, so a wrong prefix is
    /// found and the chunk fetched again whole: nothing is trusted for
    /// being kept. A fetch from the start still uses `FetchChunk`, so a
    /// controller that does not know this frame fails only resumed
    /// fetches. Appended after the older variants so their encodings stay
    /// the same.
    FetchChunkFrom {
        /// SHA-256 of the whole chunk.
        digest: Digest,
        /// Bytes of the chunk the agent already holds.
        offset: u64,
    },
    /// The limits applied to the app process behind the route (agent to
    /// controller, control stream; issue #24 item 4), sent just before a
    /// [`FrameBody::ReadBackReply`] when the instance the route forwards
    /// to runs a release that declares limits: what the node's kernel
    /// really enforces (cgroup v2, cgroup v1, rlimits, or not applied),
    /// for the proof's process row, so nobody mistakes a signature for a
    /// sandbox. Not evidence of serving. A release without limits never
    /// causes it, so an older controller (which closes the connection on
    /// an unknown frame) only meets it with a format-4 release it could
    /// not have accepted. Appended after the older variants so their
    /// encodings stay the same.
    Isolation {
        /// The release whose instance this describes.
        release: Digest,
        /// What was applied, worded by the agent (at most
        /// [`ISOLATION_TEXT_BYTES_MAX`] bytes; longer is cut at a char
        /// boundary by the sender).
        applied: String,
    },
    /// First frame on a bundle stream that asks for a deployment document
    /// (issue #24 item 1; agent to controller): the release code plus the
    /// configuration revision whose deployment digest is `digest`.
    /// Answered `DeploymentFollows` and the document's bytes
    /// (`releases::config::Deployment`, at most
    /// [`DEPLOYMENT_FRAME_BYTES_MAX`]), or `DeploymentMissing` when
    /// `digest` is no deployment the controller made (a plain release:
    /// fetched as before). The agent checks the document hashes to
    /// `digest`. Asked only when an `Apply`'s release is not a release the
    /// agent can fetch as a bundle or tree, so an older controller never
    /// sees it unless a configuration was set. Appended after the older
    /// variants so their encodings stay the same.
    FetchDeployment {
        /// The deployment digest wanted.
        digest: Digest,
    },
    /// The controller made the deployment; exactly `len` raw bytes follow.
    DeploymentFollows {
        /// Number of raw bytes after this frame.
        len: u64,
    },
    /// The digest asked for is no deployment the controller made.
    DeploymentMissing,
    /// The configuration the process behind the route was started with
    /// (agent to controller, control stream), sent just before a
    /// [`FrameBody::ReadBackReply`] when the route serves a deployment
    /// with a configuration: read back from the serving process's own
    /// environment (`FLEETWEFT_CONFIG_FINGERPRINT`), not remembered. For
    /// the proof's `configuration` row. Appended after the older variants
    /// so their encodings stay the same.
    ConfigurationRead {
        /// The deployment the route points at.
        deployment: Digest,
        /// The fingerprint the serving process was started with; `None`
        /// when it has none or its environment could not be read.
        fingerprint: Option<Digest>,
    },
}

/// Most bytes of a deployment document on a bundle stream.
pub const DEPLOYMENT_FRAME_BYTES_MAX: u64 = 256 * 1024;

/// Longest [`FrameBody::Isolation`] text, in bytes.
pub const ISOLATION_TEXT_BYTES_MAX: usize = 1024;

const _: () = assert!(ISOLATION_TEXT_BYTES_MAX + 64 < FRAME_BYTES_MAX);

/// `text` cut to at most [`ISOLATION_TEXT_BYTES_MAX`] bytes at a char
/// boundary.
pub fn isolation_text(text: &str) -> String {
    let mut end = text.len().min(ISOLATION_TEXT_BYTES_MAX);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}

/// Most mirrors one [`FrameBody::Mirrors`] lists (and the controller's
/// config accepts per node): each costs a stalled chunk at most
/// `MIRROR_CHUNK_TIMEOUT_MS` before the next is tried.
pub const MIRRORS_MAX: usize = 8;

/// Longest mirror base URL, in bytes: [`MIRRORS_MAX`] of them fit a frame
/// ([`FRAME_BYTES_MAX`]) with room to spare.
pub const MIRROR_URL_BYTES_MAX: usize = 1024;

const _: () = assert!(MIRRORS_MAX * (MIRROR_URL_BYTES_MAX + 8) + 64 < FRAME_BYTES_MAX);

/// What one source did for one staging (see [`FrameBody::FetchSources`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceTally {
    /// `mirror[I] HOST[:PORT]` (I the index in the node's list; never the
    /// URL's path, query or credentials) or `controller`.
    pub source: String,
    /// Chunks it served that verified.
    pub chunks: u64,
    /// Bytes of those chunks.
    pub bytes: u64,
    /// Chunks asked of it that failed (wrong bytes, truncated, too long,
    /// stalled, refused): each then came from the next source.
    pub failures: u64,
}

/// The encoded shape of a frame body: the version travels inside every frame
/// so a peer on another version is detected on its first frame.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireFrame {
    /// Always [`WIRE_VERSION`] when produced by this build.
    pub version: u16,
    /// The payload.
    pub body: FrameBody,
}

/// Why a frame could not be encoded, read, decoded or written.
#[derive(Debug, Error)]
pub enum FrameError {
    /// The length prefix announces more than [`FRAME_BYTES_MAX`] bytes.
    #[error("frame length {len} exceeds the limit of {max} bytes")]
    TooLarge {
        /// Announced (or encoded) body length.
        len: u64,
        /// The limit, [`FRAME_BYTES_MAX`].
        max: usize,
    },
    /// The frame was made by a peer speaking another wire version.
    #[error("wire version {got} is not supported (this build speaks {expected})")]
    WrongVersion {
        /// Version found in the frame.
        got: u16,
        /// [`WIRE_VERSION`].
        expected: u16,
    },
    /// The body is not a valid encoding (bad version field or bad payload).
    #[error("frame body cannot be decoded: {0}")]
    Undecodable(String),
    /// The body decoded but bytes were left over: the frame is not canonical.
    #[error("frame body has {trailing} trailing byte(s) after a {used}-byte frame")]
    TrailingBytes {
        /// Bytes the decoder used.
        used: usize,
        /// Bytes left after them.
        trailing: usize,
    },
    /// The stream ended in the middle of a frame.
    #[error("stream ended {got} byte(s) into a {expected}-byte {part}")]
    Truncated {
        /// Which part was cut: "length prefix" or "frame body".
        part: &'static str,
        /// Bytes received before the end.
        got: usize,
        /// Bytes needed.
        expected: usize,
    },
    /// The peer finished the stream cleanly between frames.
    #[error("stream finished")]
    Finished,
    /// Encoding a frame failed (never expected for well-formed values).
    #[error("frame cannot be encoded: {0}")]
    Encode(String),
    /// Reading from the stream failed (connection lost, stream reset, ...).
    #[error("reading a frame failed: {0}")]
    Read(String),
    /// Writing to the stream failed (connection lost, stream stopped, ...).
    #[error("writing a frame failed: {0}")]
    Write(String),
}

impl FrameError {
    /// Whether the error means the peer sent bytes that break the protocol
    /// (as opposed to the stream or connection going away). Such a peer is
    /// disconnected.
    pub fn is_protocol_violation(&self) -> bool {
        matches!(
            self,
            FrameError::TooLarge { .. }
                | FrameError::WrongVersion { .. }
                | FrameError::Undecodable(_)
                | FrameError::TrailingBytes { .. }
                | FrameError::Truncated { .. }
        )
    }
}

/// The bincode configuration for frame bodies. The limit bounds what the
/// decoder may allocate for a claimed collection length, independent of how
/// many bytes were actually received.
fn config() -> bincode::config::Configuration<
    bincode::config::LittleEndian,
    bincode::config::Varint,
    bincode::config::Limit<FRAME_BYTES_MAX>,
> {
    bincode::config::standard().with_limit::<FRAME_BYTES_MAX>()
}

/// Encodes `body` as a complete frame: length prefix followed by the body.
pub fn encode(body: &FrameBody) -> Result<Vec<u8>, FrameError> {
    let wire = WireFrame {
        version: WIRE_VERSION,
        body: body.clone(),
    };
    let encoded = bincode::serde::encode_to_vec(&wire, config())
        .map_err(|e| FrameError::Encode(e.to_string()))?;
    let len = check_len(encoded.len() as u64)?;
    let mut out = Vec::with_capacity(LENGTH_PREFIX_BYTES + encoded.len());
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&encoded);
    Ok(out)
}

/// Checks an announced body length against [`FRAME_BYTES_MAX`].
fn check_len(len: u64) -> Result<u32, FrameError> {
    match u32::try_from(len) {
        Ok(small) if len <= FRAME_BYTES_MAX as u64 => Ok(small),
        _ => Err(FrameError::TooLarge {
            len,
            max: FRAME_BYTES_MAX,
        }),
    }
}

/// Decodes a frame body (the bytes after the length prefix).
///
/// The version is decoded on its own first so that a frame from another
/// version is reported as [`FrameError::WrongVersion`] rather than as an
/// undecodable payload. This equals decoding [`WireFrame`] in one go, because
/// bincode encodes a struct as its fields back to back.
pub fn decode_body(bytes: &[u8]) -> Result<FrameBody, FrameError> {
    if bytes.len() > FRAME_BYTES_MAX {
        return Err(FrameError::TooLarge {
            len: bytes.len() as u64,
            max: FRAME_BYTES_MAX,
        });
    }
    let (version, version_len): (u16, usize) =
        bincode::serde::decode_from_slice(bytes, config())
            .map_err(|e| FrameError::Undecodable(format!("version: {e}")))?;
    if version != WIRE_VERSION {
        return Err(FrameError::WrongVersion {
            got: version,
            expected: WIRE_VERSION,
        });
    }
    let rest = bytes.get(version_len..).unwrap_or_default();
    let (body, body_len): (FrameBody, usize) = bincode::serde::decode_from_slice(rest, config())
        .map_err(|e| FrameError::Undecodable(e.to_string()))?;
    let used = version_len + body_len;
    if used != bytes.len() {
        return Err(FrameError::TrailingBytes {
            used,
            trailing: bytes.len() - used,
        });
    }
    Ok(body)
}

/// Decodes one complete frame (length prefix and body) that must fill
/// `bytes` exactly. Used by tests and by anything holding a whole frame in
/// memory; streams use [`read_frame`].
pub fn decode(bytes: &[u8]) -> Result<FrameBody, FrameError> {
    let (prefix, body) = match bytes.split_first_chunk::<LENGTH_PREFIX_BYTES>() {
        Some(split) => split,
        None => {
            return Err(FrameError::Truncated {
                part: "length prefix",
                got: bytes.len(),
                expected: LENGTH_PREFIX_BYTES,
            })
        }
    };
    let len = check_len(u64::from(u32::from_be_bytes(*prefix)))? as usize;
    match body.len().cmp(&len) {
        std::cmp::Ordering::Less => Err(FrameError::Truncated {
            part: "frame body",
            got: body.len(),
            expected: len,
        }),
        std::cmp::Ordering::Greater => Err(FrameError::TrailingBytes {
            used: LENGTH_PREFIX_BYTES + len,
            trailing: body.len() - len,
        }),
        std::cmp::Ordering::Equal => decode_body(body),
    }
}

/// Reads exactly `buf.len()` bytes, naming `part` if the stream ends early.
async fn read_part(
    recv: &mut quinn::RecvStream,
    buf: &mut [u8],
    part: &'static str,
) -> Result<(), FrameError> {
    match recv.read_exact(buf).await {
        Ok(()) => Ok(()),
        Err(quinn::ReadExactError::FinishedEarly(got)) => Err(FrameError::Truncated {
            part,
            got,
            expected: buf.len(),
        }),
        Err(quinn::ReadExactError::ReadError(e)) => Err(FrameError::Read(e.to_string())),
    }
}

/// Reads one frame from `recv`.
///
/// Returns [`FrameError::Finished`] if the peer finished the stream cleanly
/// before the first byte of a frame. The body buffer is allocated only after
/// the announced length passed the [`FRAME_BYTES_MAX`] check.
pub async fn read_frame(recv: &mut quinn::RecvStream) -> Result<FrameBody, FrameError> {
    let mut prefix = [0u8; LENGTH_PREFIX_BYTES];
    match read_part(recv, &mut prefix, "length prefix").await {
        Err(FrameError::Truncated { got: 0, .. }) => return Err(FrameError::Finished),
        other => other?,
    }
    let len = check_len(u64::from(u32::from_be_bytes(prefix)))? as usize;
    let mut body = vec![0u8; len];
    read_part(recv, &mut body, "frame body").await?;
    decode_body(&body)
}

/// Encodes and writes one frame to `send`.
pub async fn write_frame(send: &mut quinn::SendStream, body: &FrameBody) -> Result<(), FrameError> {
    let bytes = encode(body)?;
    send.write_all(&bytes)
        .await
        .map_err(|e| FrameError::Write(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::msg::{Decision, ReportKind};
    use model::{Generation, OpId};
    use proptest::prelude::*;

    fn samples() -> Vec<FrameBody> {
        vec![
            FrameBody::ToController(ToController::Hello {
                serving: Some(Digest::repeat(7)),
                generation: Generation(3),
            }),
            FrameBody::ToAgent(ToAgent::CommitReply {
                op: OpId(9),
                generation: Generation(2),
                release: Digest::repeat(5),
                decision: Decision::Commit,
            }),
            FrameBody::FetchBundle {
                digest: Digest::repeat(0xfe),
            },
            FrameBody::BundleFollows { len: u64::MAX },
            FrameBody::BundleMissing,
            FrameBody::ReadBackRequest { request: u64::MAX },
            readback_reply(),
            FrameBody::ReadBackReply {
                request: 0,
                observation: RouteObservation::new(model::ProbeVerdict::Unreachable, None, false),
                serving: None,
            },
        ]
    }

    /// A readback reply with every optional field filled in.
    fn readback_reply() -> FrameBody {
        FrameBody::ReadBackReply {
            request: 7,
            observation: RouteObservation {
                verdict: model::ProbeVerdict::WrongAnswer,
                identity: Some(Digest::repeat(3)),
                process_healthy: true,
                process_uptime_ms: Some(u64::MAX),
                process_restarts: Some(2),
                artifact: Some(model::ArtifactRead::AppFileAltered(Digest::repeat(4))),
            },
            serving: Some(Digest::repeat(4)),
        }
    }

    #[test]
    fn round_trips() {
        for body in samples() {
            let bytes = encode(&body).expect("encode");
            assert_eq!(decode(&bytes).expect("decode"), body);
        }
        let _ = ReportKind::Switched;
    }

    #[test]
    fn oversized_length_is_refused_before_reading() {
        let mut bytes = ((FRAME_BYTES_MAX + 1) as u32).to_be_bytes().to_vec();
        bytes.push(0);
        assert!(matches!(decode(&bytes), Err(FrameError::TooLarge { .. })));
        let bytes = u32::MAX.to_be_bytes();
        assert!(matches!(decode(&bytes), Err(FrameError::TooLarge { .. })));
    }

    #[test]
    fn wrong_version_is_named() {
        let wire = WireFrame {
            version: WIRE_VERSION + 1,
            body: FrameBody::BundleMissing,
        };
        let body = bincode::serde::encode_to_vec(&wire, config()).expect("encode");
        match decode_body(&body) {
            Err(FrameError::WrongVersion { got, expected }) => {
                assert_eq!((got, expected), (WIRE_VERSION + 1, WIRE_VERSION));
            }
            other => panic!("expected WrongVersion, got {other:?}"),
        }
    }

    #[test]
    fn trailing_bytes_are_refused() {
        let frame = encode(&FrameBody::BundleMissing).expect("encode");
        let mut body = frame[LENGTH_PREFIX_BYTES..].to_vec();
        body.push(0);
        assert!(matches!(
            decode_body(&body),
            Err(FrameError::TrailingBytes { trailing: 1, .. })
        ));
        let mut whole = frame.clone();
        whole.push(0);
        assert!(matches!(
            decode(&whole),
            Err(FrameError::TrailingBytes { trailing: 1, .. })
        ));
    }

    #[test]
    fn garbage_is_undecodable() {
        let mut body = bincode::serde::encode_to_vec(WIRE_VERSION, config()).expect("encode");
        body.extend_from_slice(&[0xff, 0xff, 0xff]);
        assert!(matches!(
            decode_body(&body),
            Err(FrameError::Undecodable(_))
        ));
        assert!(matches!(decode_body(&[]), Err(FrameError::Undecodable(_))));
    }

    /// A readback reply is bounded and checked like every other frame: an
    /// oversized one is refused before decoding, and a cut or corrupted one
    /// (a bad verdict tag, an unknown frame kind) is undecodable, never
    /// half-read.
    #[test]
    fn readback_reply_refuses_oversize_and_garbage() {
        let frame = encode(&readback_reply()).expect("encode");
        let body = frame[LENGTH_PREFIX_BYTES..].to_vec();

        let mut oversized = body.clone();
        oversized.resize(FRAME_BYTES_MAX + 1, 0);
        assert!(matches!(
            decode_body(&oversized),
            Err(FrameError::TooLarge { .. })
        ));
        let mut announced = ((FRAME_BYTES_MAX + 1) as u32).to_be_bytes().to_vec();
        announced.extend_from_slice(&body);
        assert!(matches!(
            decode(&announced),
            Err(FrameError::TooLarge { .. })
        ));

        assert!(matches!(
            decode_body(&body[..body.len() - 1]),
            Err(FrameError::Undecodable(_))
        ));

        // version, frame kind 6 (ReadBackReply), request 7: then the verdict.
        let head = bincode::serde::encode_to_vec((WIRE_VERSION, 6u32, 7u64), config())
            .expect("encode head");
        assert!(body.starts_with(&head), "the layout this test assumes");
        let mut bad_verdict = body.clone();
        bad_verdict[head.len()] = 3;
        assert!(matches!(
            decode_body(&bad_verdict),
            Err(FrameError::Undecodable(_))
        ));
        let mut unknown_kind = body;
        unknown_kind[head.len() - 2] = 7;
        assert!(matches!(
            decode_body(&unknown_kind),
            Err(FrameError::Undecodable(_))
        ));
    }

    #[test]
    fn truncated_frames_are_named() {
        let frame = encode(&FrameBody::BundleMissing).expect("encode");
        assert!(matches!(
            decode(&frame[..2]),
            Err(FrameError::Truncated {
                part: "length prefix",
                ..
            })
        ));
        assert!(matches!(
            decode(&frame[..frame.len() - 1]),
            Err(FrameError::Truncated {
                part: "frame body",
                ..
            })
        ));
    }

    proptest! {
        /// Random bytes never panic the decoder, and anything it accepts
        /// re-encodes to exactly the same bytes (the encoding is canonical).
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            if let Ok(body) = decode_body(&bytes) {
                let frame = encode(&body).expect("re-encode");
                prop_assert_eq!(&frame[LENGTH_PREFIX_BYTES..], &bytes[..]);
            }
            let _ = decode(&bytes);
        }

        /// Random bytes behind a valid prefix and version never panic either,
        /// so the payload decoder itself is exercised, not just the checks.
        #[test]
        fn random_payload_never_panics(payload in proptest::collection::vec(any::<u8>(), 0..256)) {
            let mut body = bincode::serde::encode_to_vec(WIRE_VERSION, config()).expect("encode");
            body.extend_from_slice(&payload);
            let mut frame = (body.len() as u32).to_be_bytes().to_vec();
            frame.extend_from_slice(&body);
            let _ = decode(&frame);
        }
    }
}
