//! QUIC endpoints (quinn) with mutual TLS between the controller and agents.
//!
//! Streams on one connection:
//! - the **control stream**: the first bidirectional stream the agent opens,
//!   right after connecting. Both sides exchange frames on it for the life of
//!   the connection. QUIC makes a stream visible to the peer only once data
//!   is sent on it, so the agent speaks first (its `Hello`, SPEC);
//! - **bundle and chunk streams**: every later bidirectional stream the
//!   agent opens carries one `FetchBundle` or `FetchChunk` request (its
//!   first frame decides) and its answer.
//!
//! QUIC hands bidirectional streams to the acceptor in stream-id order, so
//! the controller's first accepted stream is always the control stream.
//!
//! A peer that sends a malformed, oversized or out-of-place frame has its
//! whole connection closed with an application close code and a logged
//! reason; nothing it sends can panic this side.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use model::Digest;
use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use quinn::{Connection, Endpoint, RecvStream, SendStream, TransportConfig, VarInt};
use rustls::pki_types::CertificateDer;
use sha2::{Digest as _, Sha256};
use thiserror::Error;
use tracing::{debug, warn};

use crate::frame::{read_frame, write_frame, FrameBody, FrameError, DEPLOYMENT_FRAME_BYTES_MAX};
use crate::tls::{self, ClientIdentity, ServerIdentity, TlsError};

/// Largest bundle sent or accepted, in bytes: the bundle format's own bound,
/// so a bundle that verifies always fits the wire. Checked against the
/// announced length before any buffer is allocated.
pub use crate::bundle::BUNDLE_BYTES_MAX;

// The announced length is read into a usize buffer.
const _: () = assert!(BUNDLE_BYTES_MAX <= usize::MAX as u64);

/// Largest signed file served on a bundle stream, in bytes: a format-1
/// bundle (at most [`BUNDLE_BYTES_MAX`]) or the signed manifest of a
/// format-2 release (the `releases` crate's `RELEASE_FILE_BYTES_MAX`, a
/// 32 MiB manifest plus its magic and signature; that crate asserts it
/// fits). An agent asks for a release by digest before it knows its
/// format, so it accepts up to this bound and tells the format by the
/// bytes.
pub const SIGNED_FILE_BYTES_MAX: u64 = 33 * 1024 * 1024;

const _: () = assert!(BUNDLE_BYTES_MAX <= SIGNED_FILE_BYTES_MAX);
const _: () = assert!(SIGNED_FILE_BYTES_MAX <= usize::MAX as u64);

/// Largest content chunk sent or accepted on a chunk stream, in bytes: the
/// `releases` crate's `CHUNK_BYTES_MAX` (it asserts both are equal). What
/// one chunk request may make either side hold in memory.
pub const CHUNK_BYTES_MAX: u64 = 4 * 1024 * 1024;

/// Interval between QUIC keep-alive pings on the controller's end (and of
/// clients other than the agent daemon). Half of [`IDLE_TIMEOUT`], so a
/// healthy but quiet connection is never idled out: a ping whose answer is
/// lost is re-sent on QUIC's probe timeout, well within the other half.
///
/// A keep-alive is sent only after this long without a packet from the
/// peer (quinn re-arms it on every packet received), so it never fires on
/// an agent daemon's connection, whose own pings ([`AGENT_KEEP_ALIVE`])
/// arrive far more often; it keeps up peers that send none, such as the
/// fleet simulator's agents. It was 2 s: at 10,000 idle simulated agents
/// that cost the controller 23% of a core and the simulator 28%, against
/// 11% and 16% at 5 s (30,000: 56% and 67% against 27% and 40%;
/// docs/performance.md, "100,000 agents in one process").
pub const KEEP_ALIVE: Duration = Duration::from_secs(5);

const _: () = assert!(KEEP_ALIVE.as_millis() * 2 <= IDLE_TIMEOUT.as_millis());

/// A connection with no packets from the peer for this long is dead: an
/// agent notices a lost controller (and reconnects with [`Backoff`]), the
/// controller notices a lost agent, within seconds rather than TCP-like
/// minutes. Also bounds how long a stalled handshake can last.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(10);

/// Interval between an agent daemon's keep-alive pings. The agent gives
/// up a controller it has heard nothing from for as many of these in a
/// row as a live link of its kind would seldom stay silent
/// (`agent::liveness`: four, 1.5 s, on a clean LAN, so a dead leader is
/// left before its lease runs out, issue #26 item 6; about twenty on a
/// link losing 30% each way).
/// Costs a controller about 2.7 small packets per agent and second, each
/// answered by an ACK.
pub const AGENT_KEEP_ALIVE: Duration = Duration::from_millis(375);

/// An agent daemon's QUIC idle timeout: [`IDLE_TIMEOUT`], the backstop.
/// The agent's own watch (`agent::liveness`) gives a silent controller up
/// earlier, after a silence set by how often its link was silent. A
/// fixed 1.5 s here (QUIC takes the smaller of both ends' idle timeouts,
/// so it held on the controller's end too) cut scenario 13's lossy
/// 400 ms links over and over (three or four keep-alives in a row
/// unanswered is common at 30% loss each way), and an idle timeout
/// cannot change once a connection is up.
pub const AGENT_IDLE_TIMEOUT: Duration = IDLE_TIMEOUT;

const _: () = assert!(AGENT_KEEP_ALIVE.as_millis() * 20 <= AGENT_IDLE_TIMEOUT.as_millis());

/// How long the controller waits for a new connection's TLS handshake.
/// Handshakes are awaited one at a time in [`ControllerEndpoint::accept`],
/// so a peer that stalls one must not hold up the next agent for long.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// How long the controller waits for an agent to open its control stream
/// (send its first frame), and for a bundle stream's request frame.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Most bidirectional streams an agent may have open at once: the control
/// stream plus a few concurrent bundle fetches. Bounds per-agent work.
pub const STREAMS_BIDI_MAX: u32 = 8;

/// Application close code: orderly shutdown.
pub const CLOSE_NORMAL: u32 = 0;
/// Application close code: a frame was malformed, oversized or of another
/// wire version.
pub const CLOSE_BAD_FRAME: u32 = 1;
/// Application close code: a well-formed frame that does not belong where it
/// was sent (e.g. `ToAgent` from an agent).
pub const CLOSE_UNEXPECTED_FRAME: u32 = 2;
/// Application close code: the client certificate names no node.
pub const CLOSE_NOT_A_NODE: u32 = 3;
/// Application close code: the agent did not open its control stream in
/// time.
pub const CLOSE_CONTROL_TIMEOUT: u32 = 4;

/// Why a transport operation failed.
#[derive(Debug, Error)]
pub enum TransportError {
    /// A TLS configuration could not be built.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// quinn refused the TLS configuration.
    #[error("QUIC refused the TLS configuration: {0}")]
    QuicConfig(String),
    /// The UDP socket could not be bound.
    #[error("cannot bind UDP {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The OS error.
        source: std::io::Error,
    },
    /// A connection could not be started (bad server name, endpoint closed).
    #[error("cannot connect: {0}")]
    Connect(#[from] quinn::ConnectError),
    /// The TLS/QUIC handshake failed (untrusted certificate, wrong ALPN, ...).
    #[error("handshake failed: {0}")]
    Handshake(quinn::ConnectionError),
    /// The handshake took longer than [`HANDSHAKE_TIMEOUT`] (the
    /// controller's bound) or an agent's dial timeout.
    #[error("handshake did not finish within {0:?}")]
    HandshakeTimeout(Duration),
    /// The peer presented no certificate chain.
    #[error("peer presented no certificate")]
    NoPeerCertificate,
    /// The peer's certificate does not name exactly one well-formed node.
    #[error("certificate names no node: {0}")]
    NotANodeCert(String),
    /// The connection failed or was closed.
    #[error("connection lost: {0}")]
    Connection(quinn::ConnectionError),
    /// The agent did not open its control stream within [`REQUEST_TIMEOUT`],
    /// or a bundle request did not arrive in time.
    #[error("peer sent nothing within {0:?}")]
    RequestTimeout(Duration),
    /// The peer sent a malformed frame; the connection was closed.
    #[error("peer sent a bad frame: {0}")]
    BadFrame(FrameError),
    /// The peer sent a frame that does not belong here; the connection was
    /// closed.
    #[error("unexpected frame on {stream} stream: {got}")]
    UnexpectedFrame {
        /// Which stream ("control" or "bundle").
        stream: &'static str,
        /// What arrived.
        got: String,
    },
    /// Reading or writing a frame failed for a reason other than bad bytes.
    #[error(transparent)]
    Frame(FrameError),
    /// The peer finished the control stream.
    #[error("control stream finished by peer")]
    ControlFinished,
    /// A bundle's announced length exceeds [`BUNDLE_BYTES_MAX`].
    #[error("bundle of {len} bytes exceeds the limit of {max} bytes")]
    BundleTooLarge {
        /// Announced length.
        len: u64,
        /// [`BUNDLE_BYTES_MAX`].
        max: u64,
    },
    /// The controller has no bundle with this digest.
    #[error("controller has no bundle {0}")]
    BundleMissing(Digest),
    /// The bundle stream carried bytes other than what was announced.
    #[error("bundle stream: {0}")]
    BundleStream(String),
    /// The bundle's SHA-256 is not the digest asked for.
    #[error("bundle digest mismatch: asked for {expected}, got {got}")]
    DigestMismatch {
        /// Digest asked for.
        expected: Digest,
        /// SHA-256 of the bytes received.
        got: Digest,
    },
    /// The controller holds no chunk with this digest.
    #[error("controller has no chunk {0}")]
    ChunkMissing(Digest),
    /// A chunk's announced length is 0 or exceeds [`CHUNK_BYTES_MAX`].
    #[error("chunk {digest}: announced length {len} is outside 1..={max} bytes")]
    ChunkLength {
        /// The chunk asked for.
        digest: Digest,
        /// Announced length.
        len: u64,
        /// [`CHUNK_BYTES_MAX`].
        max: u64,
    },
    /// A chunk stream ended before the announced bytes, or carried more.
    #[error("chunk {digest}: {why}")]
    ChunkStream {
        /// The chunk asked for.
        digest: Digest,
        /// What was wrong with the stream.
        why: String,
    },
    /// A chunk's bytes hash to something else than the digest asked for.
    #[error("chunk digest mismatch: asked for {expected}, got {got}")]
    ChunkDigestMismatch {
        /// Digest asked for.
        expected: Digest,
        /// SHA-256 of the bytes received.
        got: Digest,
    },
}

/// The transport parameters both sides use.
fn transport_config() -> Arc<TransportConfig> {
    transport_config_with(KEEP_ALIVE, IDLE_TIMEOUT)
}

/// The transport parameters with this keep-alive and idle timeout.
fn transport_config_with(keep_alive: Duration, idle: Duration) -> Arc<TransportConfig> {
    let mut config = TransportConfig::default();
    config
        .keep_alive_interval(Some(keep_alive))
        // Infallible: both idle timeouts are far below the varint limit.
        .max_idle_timeout(Some(VarInt::from_u32(idle.as_millis() as u32).into()))
        .max_concurrent_bidi_streams(VarInt::from_u32(STREAMS_BIDI_MAX))
        // Neither side uses unidirectional streams; refuse them outright.
        .max_concurrent_uni_streams(VarInt::from_u32(0));
    Arc::new(config)
}

/// The controller's quinn server configuration (mutual TLS, TLS 1.3 only).
pub fn quinn_server_config(
    identity: &ServerIdentity,
) -> Result<quinn::ServerConfig, TransportError> {
    let tls = tls::server_config(identity)?;
    let crypto =
        QuicServerConfig::try_from(tls).map_err(|e| TransportError::QuicConfig(e.to_string()))?;
    let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    config.transport_config(transport_config());
    Ok(config)
}

/// An agent's quinn client configuration (mutual TLS, TLS 1.3 only).
pub fn quinn_client_config(
    identity: &ClientIdentity,
) -> Result<quinn::ClientConfig, TransportError> {
    let tls = tls::client_config(identity)?;
    let crypto =
        QuicClientConfig::try_from(tls).map_err(|e| TransportError::QuicConfig(e.to_string()))?;
    let mut config = quinn::ClientConfig::new(Arc::new(crypto));
    config.transport_config(transport_config());
    Ok(config)
}

/// An agent daemon's quinn client configuration: as
/// [`quinn_client_config`], with [`AGENT_KEEP_ALIVE`] (so the agent hears
/// from a live controller often enough to tell a dead one in seconds) and
/// [`AGENT_IDLE_TIMEOUT`].
pub fn quinn_agent_client_config(
    identity: &ClientIdentity,
) -> Result<quinn::ClientConfig, TransportError> {
    let mut config = quinn_client_config(identity)?;
    config.transport_config(transport_config_with(AGENT_KEEP_ALIVE, AGENT_IDLE_TIMEOUT));
    Ok(config)
}

fn close(conn: &Connection, code: u32, reason: &str) {
    conn.close(VarInt::from_u32(code), reason.as_bytes());
}

/// Which side of the control stream this is, i.e. which frames it accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    /// Accepts `ToController` and `ReadBackReply` frames only.
    Controller,
    /// Accepts `ToAgent`, `ReadBackRequest` and `NotLeader` frames only.
    Agent,
}

/// The sending half of a control stream.
#[derive(Debug)]
pub struct ControlSender {
    send: SendStream,
}

impl ControlSender {
    /// Sends one frame.
    pub async fn send(&mut self, body: &FrameBody) -> Result<(), TransportError> {
        write_frame(&mut self.send, body)
            .await
            .map_err(TransportError::Frame)
    }
}

/// The receiving half of a control stream.
#[derive(Debug)]
pub struct ControlReceiver {
    conn: Connection,
    recv: RecvStream,
    side: Side,
}

impl ControlReceiver {
    /// Receives one frame. On the controller only `ToController`,
    /// `ReadBackReply`, `FetchSources` and `Isolation` frames are accepted, on an agent
    /// only `ToAgent`, `ReadBackRequest`, `NotLeader` and `Mirrors`. A
    /// malformed or out-of-place
    /// frame closes the whole connection (the peer is broken or hostile;
    /// nothing later on the stream could be trusted to be in sync).
    pub async fn recv(&mut self) -> Result<FrameBody, TransportError> {
        let body = match read_frame(&mut self.recv).await {
            Ok(body) => body,
            Err(FrameError::Finished) => return Err(TransportError::ControlFinished),
            Err(e) if e.is_protocol_violation() => {
                warn!(peer = %self.conn.remote_address(), error = %e, "closing connection: bad frame on control stream");
                close(&self.conn, CLOSE_BAD_FRAME, &e.to_string());
                return Err(TransportError::BadFrame(e));
            }
            Err(e) => return Err(TransportError::Frame(e)),
        };
        let fits = matches!(
            (&body, self.side),
            (
                FrameBody::ToController(_)
                    | FrameBody::ReadBackReply { .. }
                    | FrameBody::FetchSources { .. }
                    | FrameBody::Isolation { .. }
                    | FrameBody::ConfigurationRead { .. },
                Side::Controller
            ) | (
                FrameBody::ToAgent(_)
                    | FrameBody::ReadBackRequest { .. }
                    | FrameBody::NotLeader { .. }
                    | FrameBody::Mirrors { .. },
                Side::Agent
            )
        );
        if !fits {
            let got = format!("{body:?}");
            warn!(peer = %self.conn.remote_address(), frame = %got, "closing connection: unexpected frame on control stream");
            close(
                &self.conn,
                CLOSE_UNEXPECTED_FRAME,
                "unexpected frame on control stream",
            );
            return Err(TransportError::UnexpectedFrame {
                stream: "control",
                got,
            });
        }
        Ok(body)
    }
}

/// The long-lived bidirectional control stream, either side.
#[derive(Debug)]
pub struct ControlStream {
    sender: ControlSender,
    receiver: ControlReceiver,
}

impl ControlStream {
    fn new(conn: Connection, send: SendStream, recv: RecvStream, side: Side) -> Self {
        ControlStream {
            sender: ControlSender { send },
            receiver: ControlReceiver { conn, recv, side },
        }
    }

    /// Sends one frame.
    pub async fn send(&mut self, body: &FrameBody) -> Result<(), TransportError> {
        self.sender.send(body).await
    }

    /// Receives one frame; see [`ControlReceiver::recv`].
    pub async fn recv(&mut self) -> Result<FrameBody, TransportError> {
        self.receiver.recv().await
    }

    /// Splits the stream so sending and receiving can run in separate tasks.
    pub fn split(self) -> (ControlSender, ControlReceiver) {
        (self.sender, self.receiver)
    }
}

/// Where the controller finds bundles to serve, by digest.
pub trait BundleStore: Send + Sync + 'static {
    /// The bundle bytes whose SHA-256 is `digest`, if known.
    fn get(&self, digest: Digest) -> Option<Vec<u8>>;

    /// The deployment document (issue #24 item 1) whose deployment digest
    /// is `digest`, if the controller made one: none by default.
    fn deployment(&self, _digest: Digest) -> Option<Vec<u8>> {
        None
    }
}

impl<F> BundleStore for F
where
    F: Fn(Digest) -> Option<Vec<u8>> + Send + Sync + 'static,
{
    fn get(&self, digest: Digest) -> Option<Vec<u8>> {
        self(digest)
    }
}

/// Where the controller finds content chunks of format-2 releases to
/// serve, by SHA-256 (issue #23 item 2).
pub trait ChunkSource: Send + Sync + 'static {
    /// The whole chunk whose SHA-256 is `digest`, re-verified, if held,
    /// for a requester that holds its first `offset` bytes already (only
    /// the bytes after `offset` are sent: a source that counts what it
    /// serves counts those). At most [`CHUNK_BYTES_MAX`] bytes: a longer
    /// answer is served as missing.
    fn chunk(&self, digest: Digest, offset: u64) -> Option<Vec<u8>>;

    /// Called as each piece of an answered chunk is handed to the stream
    /// (at most [`CHUNK_SEND_PIECE_BYTES`] at a time), so a source can
    /// count its egress as it goes: a transfer cut short counts what was
    /// handed over, not the whole chunk. The bytes still in QUIC's send
    /// buffer when the peer vanishes count too.
    fn sent(&self, _bytes: u64) {}
}

/// The piece a chunk answer is written to its stream in (and counted by
/// [`ChunkSource::sent`]).
pub const CHUNK_SEND_PIECE_BYTES: usize = 64 * 1024;

/// A chunk source that holds nothing: every chunk request is answered
/// [`FrameBody::ChunkMissing`].
#[derive(Clone, Copy, Debug, Default)]
pub struct NoChunks;

impl ChunkSource for NoChunks {
    fn chunk(&self, _digest: Digest, _offset: u64) -> Option<Vec<u8>> {
        None
    }
}

/// The SHA-256 fingerprint of the leaf certificate a peer presented at the
/// handshake, if any.
pub fn peer_fingerprint(conn: &Connection) -> Option<[u8; 32]> {
    let chain = conn
        .peer_identity()?
        .downcast::<Vec<CertificateDer<'static>>>()
        .ok()?;
    chain
        .first()
        .map(|leaf| crate::pki::cert_fingerprint(leaf.as_ref()))
}

/// The controller's QUIC endpoint (a clone is a handle on the same one).
#[derive(Debug, Clone)]
pub struct ControllerEndpoint {
    endpoint: Endpoint,
}

/// An authenticated agent connection, as seen by the controller.
#[derive(Debug, Clone)]
pub struct AgentLink {
    /// The node id from the agent's certificate (the only source of it).
    pub node: String,
    /// The QUIC connection.
    pub conn: Connection,
}

impl ControllerEndpoint {
    /// Binds the controller's UDP socket at `addr`.
    pub fn bind(addr: SocketAddr, identity: ServerIdentity) -> Result<Self, TransportError> {
        let config = quinn_server_config(&identity)?;
        let endpoint = endpoint_on(addr, Some(config))
            .map_err(|source| TransportError::Bind { addr, source })?;
        Ok(ControllerEndpoint { endpoint })
    }

    /// The bound address (useful when bound to port 0).
    pub fn local_addr(&self) -> Result<SocketAddr, TransportError> {
        self.endpoint
            .local_addr()
            .map_err(|source| TransportError::Bind {
                addr: SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)),
                source,
            })
    }

    /// Waits for the next connection and authenticates it.
    ///
    /// `None` once the endpoint is closed. `Some(Err(..))` for a connection
    /// that failed the handshake (e.g. a certificate from another CA) or
    /// whose certificate names no node; such connections are closed and the
    /// caller should simply keep accepting.
    pub async fn accept(&self) -> Option<Result<AgentLink, TransportError>> {
        let incoming = self.endpoint.accept().await?;
        Some(authenticate(incoming).await)
    }

    /// The next incoming connection, its handshake not yet run: hand it to
    /// [`authenticate`] in a task of its own, so one slow handshake (up to
    /// [`HANDSHAKE_TIMEOUT`]) does not hold up the others. `None` once the
    /// endpoint is closed.
    pub async fn accept_incoming(&self) -> Option<quinn::Incoming> {
        self.endpoint.accept().await
    }

    /// Closes every connection and stops accepting.
    pub fn close(&self) {
        self.endpoint
            .close(VarInt::from_u32(CLOSE_NORMAL), b"controller shutting down");
    }
}

impl AgentLink {
    /// Accepts the agent's control stream. Call once, before
    /// [`AgentLink::serve_bundles`]: the first stream the agent opens is the
    /// control stream. Closes the connection if the agent does not send its
    /// first frame within [`REQUEST_TIMEOUT`].
    pub async fn control(&self) -> Result<ControlStream, TransportError> {
        match tokio::time::timeout(REQUEST_TIMEOUT, self.conn.accept_bi()).await {
            Ok(Ok((send, recv))) => Ok(ControlStream::new(
                self.conn.clone(),
                send,
                recv,
                Side::Controller,
            )),
            Ok(Err(e)) => Err(TransportError::Connection(e)),
            Err(_) => {
                warn!(node = %self.node, "closing connection: no control stream");
                close(
                    &self.conn,
                    CLOSE_CONTROL_TIMEOUT,
                    "no control stream opened",
                );
                Err(TransportError::RequestTimeout(REQUEST_TIMEOUT))
            }
        }
    }

    /// Answers the agent's bundle requests until the connection closes.
    /// Each request is served in its own task; a bad request closes the
    /// connection. Call after [`AgentLink::control`]. Chunk requests are
    /// answered missing; see [`AgentLink::serve_streams`].
    pub async fn serve_bundles<S: BundleStore>(&self, store: Arc<S>) -> TransportError {
        self.serve_streams(store, Arc::new(NoChunks)).await
    }

    /// Answers the agent's bundle and chunk requests until the connection
    /// closes: each later stream the agent opens carries one request, and
    /// its first frame decides which ([`FrameBody::FetchBundle`] or
    /// [`FrameBody::FetchChunk`]). Each is served in its own task (at most
    /// [`STREAMS_BIDI_MAX`] at once, QUIC's own bound); a bad request
    /// closes the connection. Call after [`AgentLink::control`].
    pub async fn serve_streams<S: BundleStore, C: ChunkSource>(
        &self,
        store: Arc<S>,
        chunks: Arc<C>,
    ) -> TransportError {
        loop {
            match self.conn.accept_bi().await {
                Ok((send, recv)) => {
                    let conn = self.conn.clone();
                    let store = store.clone();
                    let chunks = chunks.clone();
                    let node = self.node.clone();
                    tokio::spawn(async move {
                        let sources = (&*store, &*chunks);
                        if let Err(e) = serve_one_stream(&conn, send, recv, sources).await {
                            debug!(%node, error = %e, "bundle or chunk request failed");
                        }
                    });
                }
                Err(e) => return TransportError::Connection(e),
            }
        }
    }
}

/// What one request asks for.
enum Request {
    Bundle(Digest),
    /// A deployment document by its deployment digest.
    Deployment(Digest),
    /// A chunk by digest, from a byte offset (0: whole).
    Chunk(Digest, u64),
}

/// Reads the request frame of one bundle or chunk stream (within
/// [`REQUEST_TIMEOUT`]); a frame that is neither request closes the
/// connection.
async fn read_request(conn: &Connection, recv: &mut RecvStream) -> Result<Request, TransportError> {
    let request = match tokio::time::timeout(REQUEST_TIMEOUT, read_frame(recv)).await {
        Ok(result) => result,
        Err(_) => return Err(TransportError::RequestTimeout(REQUEST_TIMEOUT)),
    };
    match request {
        Ok(FrameBody::FetchBundle { digest }) => Ok(Request::Bundle(digest)),
        Ok(FrameBody::FetchDeployment { digest }) => Ok(Request::Deployment(digest)),
        Ok(FrameBody::FetchChunk { digest }) => Ok(Request::Chunk(digest, 0)),
        Ok(FrameBody::FetchChunkFrom { digest, offset }) => Ok(Request::Chunk(digest, offset)),
        Ok(other) => {
            let got = format!("{other:?}");
            warn!(peer = %conn.remote_address(), frame = %got, "closing connection: unexpected frame on bundle stream");
            close(
                conn,
                CLOSE_UNEXPECTED_FRAME,
                "unexpected frame on bundle stream",
            );
            Err(TransportError::UnexpectedFrame {
                stream: "bundle",
                got,
            })
        }
        Err(e) if e.is_protocol_violation() => {
            warn!(peer = %conn.remote_address(), error = %e, "closing connection: bad frame on bundle stream");
            close(conn, CLOSE_BAD_FRAME, &e.to_string());
            Err(TransportError::BadFrame(e))
        }
        Err(e) => Err(TransportError::Frame(e)),
    }
}

/// Answers one stream: `FetchBundle` in, `BundleFollows` + bytes or
/// `BundleMissing` out; or `FetchChunk` in, `ChunkFollows` + bytes or
/// `ChunkMissing` out.
async fn serve_one_stream<S: BundleStore + ?Sized, C: ChunkSource + ?Sized>(
    conn: &Connection,
    mut send: SendStream,
    mut recv: RecvStream,
    (store, chunks): (&S, &C),
) -> Result<(), TransportError> {
    let request = read_request(conn, &mut recv).await?;
    let (answer, missing) = answer_of(request, store, chunks);
    match answer {
        Some((frame, bytes)) => {
            let counted = matches!(frame, FrameBody::ChunkFollows { .. });
            write_frame(&mut send, &frame)
                .await
                .map_err(TransportError::Frame)?;
            for piece in bytes.chunks(CHUNK_SEND_PIECE_BYTES) {
                send.write_all(piece)
                    .await
                    .map_err(|e| TransportError::Frame(FrameError::Write(e.to_string())))?;
                if counted {
                    chunks.sent(piece.len() as u64);
                }
            }
        }
        None => write_frame(&mut send, &missing)
            .await
            .map_err(TransportError::Frame)?,
    }
    // Finishing tells the agent nothing more follows; an error only means the
    // agent already went away.
    let _ = send.finish();
    Ok(())
}

/// What answers `request`: the frame announcing the bytes and the bytes,
/// or `None` and the frame saying it is missing.
type Answer = (Option<(FrameBody, Vec<u8>)>, FrameBody);

/// The answer to one request from `store` or `chunks`.
fn answer_of<S: BundleStore + ?Sized, C: ChunkSource + ?Sized>(
    request: Request,
    store: &S,
    chunks: &C,
) -> Answer {
    match request {
        Request::Bundle(digest) => {
            let bundle = store.get(digest).filter(|bytes| {
                let fits = bytes.len() as u64 <= SIGNED_FILE_BYTES_MAX;
                if !fits {
                    // The agent would refuse it anyway; say missing rather
                    // than send it for nothing.
                    warn!(%digest, len = bytes.len(), "stored bundle exceeds SIGNED_FILE_BYTES_MAX; answering missing");
                }
                fits
            });
            let follows = bundle.map(|b| {
                (
                    FrameBody::BundleFollows {
                        len: b.len() as u64,
                    },
                    b,
                )
            });
            (follows, FrameBody::BundleMissing)
        }
        Request::Deployment(digest) => {
            let doc = store.deployment(digest).filter(|bytes| {
                let fits = bytes.len() as u64 <= DEPLOYMENT_FRAME_BYTES_MAX;
                if !fits {
                    warn!(%digest, len = bytes.len(), "deployment document exceeds DEPLOYMENT_FRAME_BYTES_MAX; answering missing");
                }
                fits
            });
            let follows = doc.map(|d| {
                let len = d.len() as u64;
                (FrameBody::DeploymentFollows { len }, d)
            });
            (follows, FrameBody::DeploymentMissing)
        }
        Request::Chunk(digest, offset) => {
            let chunk = chunks.chunk(digest, offset).filter(|bytes| {
                let fits = !bytes.is_empty() && bytes.len() as u64 <= CHUNK_BYTES_MAX;
                if !fits {
                    warn!(%digest, len = bytes.len(), "stored chunk is empty or exceeds CHUNK_BYTES_MAX; answering missing");
                }
                fits
            });
            let follows = chunk.map(|mut c| {
                // The bytes after `offset`; none when it is at or past the
                // end (the agent's hash of its prefix then fails, and it
                // fetches the chunk again whole).
                let rest = c.split_off(usize::try_from(offset).unwrap_or(usize::MAX).min(c.len()));
                (
                    FrameBody::ChunkFollows {
                        len: rest.len() as u64,
                    },
                    rest,
                )
            });
            (follows, FrameBody::ChunkMissing)
        }
    }
}

/// Fetches the bundle with SHA-256 `digest` over a new stream on `conn` and
/// checks the bytes hash to `digest`.
pub async fn fetch_bundle(conn: &Connection, digest: Digest) -> Result<Vec<u8>, TransportError> {
    fetch_signed(conn, digest, BUNDLE_BYTES_MAX).await
}

/// Fetches the signed file (a format-1 bundle or a format-2 release's
/// signed manifest) whose SHA-256 is `digest`, accepting at most `max`
/// bytes (at most [`SIGNED_FILE_BYTES_MAX`]), and checks the bytes hash
/// to `digest`.
pub async fn fetch_signed(
    conn: &Connection,
    digest: Digest,
    max: u64,
) -> Result<Vec<u8>, TransportError> {
    let max = max.min(SIGNED_FILE_BYTES_MAX);
    let (mut send, mut recv) = conn.open_bi().await.map_err(TransportError::Connection)?;
    write_frame(&mut send, &FrameBody::FetchBundle { digest })
        .await
        .map_err(TransportError::Frame)?;
    let _ = send.finish();
    let len = match read_frame(&mut recv).await {
        Ok(FrameBody::BundleFollows { len }) => len,
        Ok(FrameBody::BundleMissing) => return Err(TransportError::BundleMissing(digest)),
        Ok(other) => {
            return Err(TransportError::UnexpectedFrame {
                stream: "bundle",
                got: format!("{other:?}"),
            })
        }
        Err(e) if e.is_protocol_violation() => return Err(TransportError::BadFrame(e)),
        Err(e) => return Err(TransportError::Frame(e)),
    };
    let bytes = read_announced(&mut recv, len, max).await?;
    let got = Digest(Sha256::digest(&bytes).into());
    if got != digest {
        return Err(TransportError::DigestMismatch {
            expected: digest,
            got,
        });
    }
    Ok(bytes)
}

/// Fetches the deployment document whose deployment digest is `digest`
/// (issue #24 item 1): `None` when the controller answers that `digest`
/// is no deployment it made (a plain release). The bytes are not checked
/// here: `releases::config::Deployment::decode` checks they hash to
/// `digest`.
pub async fn fetch_deployment(
    conn: &Connection,
    digest: Digest,
) -> Result<Option<Vec<u8>>, TransportError> {
    let (mut send, mut recv) = conn.open_bi().await.map_err(TransportError::Connection)?;
    write_frame(&mut send, &FrameBody::FetchDeployment { digest })
        .await
        .map_err(TransportError::Frame)?;
    let _ = send.finish();
    let len = match read_frame(&mut recv).await {
        Ok(FrameBody::DeploymentFollows { len }) => len,
        Ok(FrameBody::DeploymentMissing) => return Ok(None),
        Ok(other) => {
            return Err(TransportError::UnexpectedFrame {
                stream: "deployment",
                got: format!("{other:?}"),
            })
        }
        Err(e) if e.is_protocol_violation() => return Err(TransportError::BadFrame(e)),
        Err(e) => return Err(TransportError::Frame(e)),
    };
    let bytes = read_announced(&mut recv, len, DEPLOYMENT_FRAME_BYTES_MAX).await?;
    Ok(Some(bytes))
}

/// The `len` bytes a bundle or deployment stream announced, refused over
/// `max` (at most [`SIGNED_FILE_BYTES_MAX`]) before anything is
/// allocated; a stream that ends early or runs on is an error.
async fn read_announced(
    recv: &mut RecvStream,
    len: u64,
    max: u64,
) -> Result<Vec<u8>, TransportError> {
    if len > max || len > SIGNED_FILE_BYTES_MAX {
        return Err(TransportError::BundleTooLarge { len, max });
    }
    // In bounds: len <= SIGNED_FILE_BYTES_MAX, which fits usize.
    let mut bytes = vec![0u8; len as usize];
    recv.read_exact(&mut bytes).await.map_err(|e| match e {
        quinn::ReadExactError::FinishedEarly(got) => {
            TransportError::BundleStream(format!("ended after {got} of {len} bytes"))
        }
        quinn::ReadExactError::ReadError(e) => TransportError::BundleStream(e.to_string()),
    })?;
    // Nothing may follow the announced bytes; a size limit of 0 makes any
    // extra byte an error.
    recv.read_to_end(0)
        .await
        .map_err(|e| TransportError::BundleStream(format!("after {len} bytes: {e}")))?;
    Ok(bytes)
}

/// Fetches the content chunk whose SHA-256 is `digest` over a new stream
/// on `conn`: the announced length is checked against
/// [`CHUNK_BYTES_MAX`] before anything is allocated, the bytes are hashed
/// before they are returned, and a stream that ends early, runs long or
/// hashes to anything else is a typed error. At most one chunk is held.
pub async fn fetch_chunk(conn: &Connection, digest: Digest) -> Result<Vec<u8>, TransportError> {
    fetch_chunk_resumed(conn, digest, Vec::new(), |_| {}).await
}

/// Fetches the chunk `digest` for a requester that holds its first bytes
/// already (`prefix`, possibly empty; kept from an attempt cut short):
/// asks for the bytes after the prefix ([`FrameBody::FetchChunkFrom`], or
/// [`FrameBody::FetchChunk`] for an empty prefix), hands each piece to
/// `piece` as it arrives (the agent appends it to its partial file, so a
/// second cut loses only what had not arrived), and hashes prefix and
/// rest together: a prefix that was wrong gives
/// [`TransportError::ChunkDigestMismatch`] like a wrong answer, never a
/// chunk. Prefix and announced rest together are held to
/// [`CHUNK_BYTES_MAX`] before anything is read.
pub async fn fetch_chunk_resumed(
    conn: &Connection,
    digest: Digest,
    prefix: Vec<u8>,
    piece: impl FnMut(&[u8]),
) -> Result<Vec<u8>, TransportError> {
    let (mut send, mut recv) = conn.open_bi().await.map_err(TransportError::Connection)?;
    let offset = prefix.len() as u64;
    let request = if offset == 0 {
        FrameBody::FetchChunk { digest }
    } else {
        FrameBody::FetchChunkFrom { digest, offset }
    };
    write_frame(&mut send, &request)
        .await
        .map_err(TransportError::Frame)?;
    let _ = send.finish();
    let len = match read_frame(&mut recv).await {
        Ok(FrameBody::ChunkFollows { len }) => len,
        Ok(FrameBody::ChunkMissing) => return Err(TransportError::ChunkMissing(digest)),
        Ok(other) => {
            return Err(TransportError::UnexpectedFrame {
                stream: "chunk",
                got: format!("{other:?}"),
            })
        }
        Err(e) if e.is_protocol_violation() => return Err(TransportError::BadFrame(e)),
        Err(e) => return Err(TransportError::Frame(e)),
    };
    let total = offset.saturating_add(len);
    if total == 0 || total > CHUNK_BYTES_MAX {
        return Err(TransportError::ChunkLength {
            digest,
            len: total,
            max: CHUNK_BYTES_MAX,
        });
    }
    let bytes = read_chunk_bytes(&mut recv, digest, prefix, len, piece).await?;
    let got = Digest(Sha256::digest(&bytes).into());
    if got != digest {
        return Err(TransportError::ChunkDigestMismatch {
            expected: digest,
            got,
        });
    }
    Ok(bytes)
}

/// Reads exactly `len` more bytes after `bytes` (together checked <=
/// [`CHUNK_BYTES_MAX`]), each piece also handed to `piece`, then the end
/// of the stream.
async fn read_chunk_bytes(
    recv: &mut RecvStream,
    digest: Digest,
    mut bytes: Vec<u8>,
    len: u64,
    mut piece: impl FnMut(&[u8]),
) -> Result<Vec<u8>, TransportError> {
    let stream = |why: String| TransportError::ChunkStream { digest, why };
    let mut left = len;
    // In bounds: prefix + len <= CHUNK_BYTES_MAX.
    bytes.reserve_exact(len as usize);
    while left > 0 {
        let max = usize::try_from(left).unwrap_or(usize::MAX);
        match recv.read_chunk(max, true).await {
            Ok(Some(chunk)) => {
                piece(&chunk.bytes);
                bytes.extend_from_slice(&chunk.bytes);
                left -= chunk.bytes.len() as u64;
            }
            Ok(None) => return Err(stream(format!("ended after {} of {len} bytes", len - left))),
            Err(e) => return Err(stream(e.to_string())),
        }
    }
    recv.read_to_end(0)
        .await
        .map_err(|e| stream(format!("more than the announced {len} bytes: {e}")))?;
    Ok(bytes)
}

/// The receive buffer asked for on an endpoint's UDP socket, in bytes
/// (the kernel grants at most `net.core.rmem_max`, 4 MiB here). The
/// default (`rmem_default`, 208 KiB, some 270 small datagrams) overflowed
/// on a controller with 35,000 agents: their keep-alive acknowledgements
/// alone arrive at 17,000 a second, so a few milliseconds off the CPU
/// dropped datagrams (3.7 million in 8 minutes), and connections whose
/// datagrams kept being dropped timed out. 4 MiB holds about 100 ms of
/// 100,000 agents' acknowledgements.
pub const UDP_RECV_BUFFER_BYTES: usize = 4 * 1024 * 1024;

/// A quinn endpoint (a server when `server` is given) on a UDP socket
/// bound at `addr`, its receive buffer raised towards
/// [`UDP_RECV_BUFFER_BYTES`] (a refusal is logged, not fatal: the default
/// buffer still works, only drops sooner under load).
pub fn endpoint_on(
    addr: SocketAddr,
    server: Option<quinn::ServerConfig>,
) -> std::io::Result<Endpoint> {
    let socket = std::net::UdpSocket::bind(addr)?;
    let state = quinn::udp::UdpSocketState::new((&socket).into())?;
    if let Err(e) = state.set_recv_buffer_size((&socket).into(), UDP_RECV_BUFFER_BYTES) {
        warn!(
            "cannot raise the UDP receive buffer of {addr} to {UDP_RECV_BUFFER_BYTES} bytes: {e}"
        );
    }
    let runtime =
        quinn::default_runtime().ok_or_else(|| std::io::Error::other("no async runtime found"))?;
    Endpoint::new(quinn::EndpointConfig::default(), server, socket, runtime)
}

/// An agent's connection to the controller, with its control stream open.
#[derive(Debug)]
pub struct AgentConnection {
    // Kept so the UDP socket lives as long as the connection.
    endpoint: Endpoint,
    conn: Connection,
    control: ControlStream,
}

impl AgentConnection {
    /// Connects to the controller at `addr`, verifying its certificate for
    /// `server_name`, and opens the control stream. The controller sees the
    /// control stream once the first frame (the agent's `Hello`) is sent.
    pub async fn connect(
        addr: SocketAddr,
        server_name: &str,
        identity: ClientIdentity,
    ) -> Result<Self, TransportError> {
        let config = quinn_client_config(&identity)?;
        Self::connect_with(addr, server_name, config).await
    }

    /// What an agent daemon dials, with `config` from
    /// [`quinn_agent_client_config`]: the handshake and the control stream
    /// are given up after `handshake_timeout`, so a dead or black-holed
    /// address fails in that time instead of holding the dial for the idle
    /// timeout.
    pub async fn dial(
        addr: SocketAddr,
        server_name: &str,
        config: quinn::ClientConfig,
        handshake_timeout: Duration,
    ) -> Result<Self, TransportError> {
        tokio::time::timeout(
            handshake_timeout,
            Self::connect_with(addr, server_name, config),
        )
        .await
        .map_err(|_| TransportError::HandshakeTimeout(handshake_timeout))?
    }

    /// Connects on an existing client `endpoint` with this connection's
    /// own `config` (its node's certificate): one endpoint, one UDP socket,
    /// carries many agents' connections (the fleet simulator's), where
    /// [`Self::connect`] binds a socket per connection.
    pub async fn connect_on(
        endpoint: &Endpoint,
        addr: SocketAddr,
        server_name: &str,
        config: quinn::ClientConfig,
    ) -> Result<Self, TransportError> {
        let conn = endpoint
            .connect_with(config, addr, server_name)?
            .await
            .map_err(TransportError::Handshake)?;
        let (send, recv) = conn.open_bi().await.map_err(TransportError::Connection)?;
        let control = ControlStream::new(conn.clone(), send, recv, Side::Agent);
        Ok(AgentConnection {
            endpoint: endpoint.clone(),
            conn,
            control,
        })
    }

    async fn connect_with(
        addr: SocketAddr,
        server_name: &str,
        config: quinn::ClientConfig,
    ) -> Result<Self, TransportError> {
        let local = if addr.is_ipv4() {
            SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0))
        } else {
            SocketAddr::from((Ipv6Addr::UNSPECIFIED, 0))
        };
        let endpoint = Endpoint::client(local).map_err(|source| TransportError::Bind {
            addr: local,
            source,
        })?;
        Self::connect_on(&endpoint, addr, server_name, config).await
    }

    /// The control stream.
    pub fn control(&mut self) -> &mut ControlStream {
        &mut self.control
    }

    /// The QUIC connection (e.g. to watch `closed()`).
    pub fn connection(&self) -> &Connection {
        &self.conn
    }

    /// Fetches and digest-checks a bundle; see [`fetch_bundle`].
    pub async fn fetch_bundle(&self, digest: Digest) -> Result<Vec<u8>, TransportError> {
        fetch_bundle(&self.conn, digest).await
    }

    /// Splits into the connection and the control stream, e.g. to run the
    /// control stream's halves in their own tasks. The returned endpoint must
    /// be kept alive as long as the connection is used.
    pub fn into_parts(self) -> (Endpoint, Connection, ControlStream) {
        (self.endpoint, self.conn, self.control)
    }

    /// Closes the connection in an orderly way.
    pub fn close(&self) {
        close(&self.conn, CLOSE_NORMAL, "agent closing");
    }
}

/// Connects to the controller; see [`AgentConnection::connect`].
pub async fn connect(
    addr: SocketAddr,
    server_name: &str,
    identity: ClientIdentity,
) -> Result<AgentConnection, TransportError> {
    AgentConnection::connect(addr, server_name, identity).await
}

/// Jittered exponential reconnect delays.
///
/// Attempt `n` waits between half and all of `min(max_ms, base_ms * 2^n)`
/// ("equal jitter"): growth keeps a dead controller from being hammered, the
/// jitter keeps a fleet that lost the controller at the same instant from
/// reconnecting in lockstep. Deterministic for a seed, so tests and
/// simulations replay; [`Backoff::for_node`] seeds from the node id so
/// different nodes spread out without a random number generator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Backoff {
    base_ms: u64,
    max_ms: u64,
    seed: u64,
    attempt: u32,
}

impl Backoff {
    /// A backoff with an explicit seed.
    pub fn new(base_ms: u64, max_ms: u64, seed: u64) -> Self {
        Backoff {
            base_ms,
            max_ms: max_ms.max(base_ms),
            seed,
            attempt: 0,
        }
    }

    /// A backoff seeded from the node id (FNV-1a).
    pub fn for_node(node: &str, base_ms: u64, max_ms: u64) -> Self {
        let seed = node.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        });
        Backoff::new(base_ms, max_ms, seed)
    }

    /// The delay before attempt `attempt` (0-based), without advancing.
    pub fn delay_for(&self, attempt: u32) -> Duration {
        let ceiling = self
            .base_ms
            .saturating_mul(2u64.saturating_pow(attempt))
            .min(self.max_ms);
        let floor = ceiling / 2;
        let jitter = xorshift(self.seed ^ u64::from(attempt).wrapping_mul(0x9e37_79b9_7f4a_7c15))
            % (ceiling - floor + 1);
        Duration::from_millis(floor + jitter)
    }

    /// The delay before the next attempt; advances the attempt counter.
    pub fn next_delay(&mut self) -> Duration {
        let delay = self.delay_for(self.attempt);
        self.attempt = self.attempt.saturating_add(1);
        delay
    }

    /// Attempts made since the last reset.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// Starts over after a successful connection.
    pub fn reset(&mut self) {
        self.attempt = 0;
    }
}

/// A few rounds of xorshift64 over a seed (zero is mapped away, since it is
/// xorshift's fixed point).
fn xorshift(seed: u64) -> u64 {
    let mut x = if seed == 0 {
        0x2545_f491_4f6c_dd1d
    } else {
        seed
    };
    for _ in 0..3 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    x
}

/// Runs `incoming`'s handshake (at most [`HANDSHAKE_TIMEOUT`]) and reads the
/// node id from the client certificate the handshake verified. A refusal
/// is logged here, once, with the peer's address.
pub async fn authenticate(incoming: quinn::Incoming) -> Result<AgentLink, TransportError> {
    let remote = incoming.remote_address();
    let result = handshake(incoming).await;
    if let Err(e) = &result {
        warn!(peer = %remote, error = %e, "refused agent connection");
    }
    result
}

/// The node id named by a certificate: the `<node>` of its single SAN DNS
/// name `<node>.nodes.fleetweft`.
///
/// This is the only source of a peer's node id; messages never carry one.
/// A certificate with no such SAN, with more than one (which node would it
/// be?), or with a malformed id is refused.
fn node_id_from_cert(der: &CertificateDer<'_>) -> Result<String, TransportError> {
    // One reading of the SAN convention, shared with the PKI that writes it.
    crate::pki::node_id_from_cert(der.as_ref())
        .map_err(|e| TransportError::NotANodeCert(e.to_string()))
}

async fn handshake(incoming: quinn::Incoming) -> Result<AgentLink, TransportError> {
    let conn = match tokio::time::timeout(HANDSHAKE_TIMEOUT, incoming).await {
        Ok(Ok(conn)) => conn,
        Ok(Err(e)) => return Err(TransportError::Handshake(e)),
        // Dropping the connecting future abandons the handshake.
        Err(_) => return Err(TransportError::HandshakeTimeout(HANDSHAKE_TIMEOUT)),
    };
    let chain = conn
        .peer_identity()
        .and_then(|any| any.downcast::<Vec<CertificateDer<'static>>>().ok());
    let node = match chain.as_deref().and_then(|chain| chain.first()) {
        Some(leaf) => node_id_from_cert(leaf),
        None => Err(TransportError::NoPeerCertificate),
    };
    match node {
        Ok(node) => {
            debug!(%node, peer = %conn.remote_address(), "agent connected");
            Ok(AgentLink { node, conn })
        }
        Err(e) => {
            close(&conn, CLOSE_NOT_A_NODE, &e.to_string());
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cert_with_sans(sans: &[&str]) -> CertificateDer<'static> {
        let key = rcgen::KeyPair::generate().expect("key");
        let params =
            rcgen::CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>())
                .expect("params");
        params.self_signed(&key).expect("cert").der().clone()
    }

    #[test]
    fn node_id_comes_from_the_node_san() {
        let cert = cert_with_sans(&["other.example", "node-a.nodes.fleetweft"]);
        assert_eq!(node_id_from_cert(&cert).expect("node id"), "node-a");
    }

    #[test]
    fn certs_without_exactly_one_well_formed_node_san_are_refused() {
        for sans in [
            &["localhost"][..],
            &["a.nodes.fleetweft", "b.nodes.fleetweft"][..],
            &["x.y.nodes.fleetweft"][..],
            &["nodes.fleetweft"][..],
        ] {
            let cert = cert_with_sans(sans);
            assert!(
                matches!(
                    node_id_from_cert(&cert),
                    Err(TransportError::NotANodeCert(_))
                ),
                "{sans:?} accepted"
            );
        }
        let garbage = CertificateDer::from(vec![0x30, 0x03, 0x01, 0x02]);
        assert!(node_id_from_cert(&garbage).is_err());
    }

    #[test]
    fn backoff_grows_within_bounds_and_is_deterministic() {
        let mut a = Backoff::for_node("node-a", 100, 5_000);
        let b = Backoff::for_node("node-a", 100, 5_000);
        for attempt in 0..40 {
            let ceiling = (100u64.saturating_mul(1u64 << attempt.min(40))).min(5_000);
            let d = a.next_delay().as_millis() as u64;
            assert!(d >= ceiling / 2 && d <= ceiling, "attempt {attempt}: {d}");
            assert_eq!(b.delay_for(attempt).as_millis() as u64, d);
        }
        a.reset();
        assert_eq!(a.attempt(), 0);
        assert!(a.next_delay() <= Duration::from_millis(100));
    }

    #[test]
    fn backoff_differs_between_nodes() {
        let a = Backoff::for_node("node-a", 1_000, 60_000);
        let b = Backoff::for_node("node-b", 1_000, 60_000);
        assert!((0..10).any(|n| a.delay_for(n) != b.delay_for(n)));
    }

    #[test]
    fn backoff_survives_extremes() {
        let b = Backoff::new(u64::MAX, u64::MAX, 0);
        let _ = b.delay_for(u32::MAX);
        let b = Backoff::new(0, 0, 7);
        assert_eq!(b.delay_for(3), Duration::ZERO);
    }
}
