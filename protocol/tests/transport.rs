//! Loopback tests of the QUIC transport: mutual TLS, node id from the
//! certificate, control-stream frames, bundle fetch, and hostile peers.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use model::{Decision, Digest, Generation, OpId, ToAgent, ToController};
use protocol::frame::FrameBody;
use protocol::quic::{
    self, AgentConnection, ControllerEndpoint, TransportError, CLOSE_BAD_FRAME, CLOSE_NOT_A_NODE,
    CLOSE_UNEXPECTED_FRAME,
};
use protocol::tls::{ClientIdentity, ServerIdentity};
use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use sha2::{Digest as _, Sha256};

/// Upper bound on any single test step, so a bug hangs no CI run.
const STEP: Duration = Duration::from_secs(20);

async fn step<F: std::future::Future>(f: F) -> F::Output {
    tokio::time::timeout(STEP, f)
        .await
        .expect("test step timed out")
}

/// A throwaway CA that signs leaf certificates.
struct Ca {
    cert: rcgen::Certificate,
    key: KeyPair,
}

impl Ca {
    fn new(name: &str) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let key = KeyPair::generate().expect("key");
        let cert = params.self_signed(&key).expect("ca cert");
        Ca { cert, key }
    }

    fn der(&self) -> CertificateDer<'static> {
        self.cert.der().clone()
    }

    fn leaf(
        &self,
        sans: &[&str],
        purpose: ExtendedKeyUsagePurpose,
    ) -> (rcgen::Certificate, KeyPair) {
        let mut params =
            CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>())
                .expect("params");
        params.extended_key_usages = vec![purpose];
        let key = KeyPair::generate().expect("key");
        let cert = params.signed_by(&key, &self.cert, &self.key).expect("leaf");
        (cert, key)
    }

    fn server(&self) -> ServerIdentity {
        let (cert, key) = self.leaf(
            &["localhost", "127.0.0.1"],
            ExtendedKeyUsagePurpose::ServerAuth,
        );
        ServerIdentity::new(self.der(), vec![cert.der().clone()], private(&key))
    }

    fn client(&self, sans: &[&str]) -> ClientIdentity {
        let (cert, key) = self.leaf(sans, ExtendedKeyUsagePurpose::ClientAuth);
        ClientIdentity::new(self.der(), vec![cert.der().clone()], private(&key))
    }
}

fn private(key: &KeyPair) -> PrivateKeyDer<'static> {
    PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()))
}

fn controller(ca: &Ca) -> (ControllerEndpoint, SocketAddr) {
    let endpoint =
        ControllerEndpoint::bind("127.0.0.1:0".parse().expect("addr"), ca.server()).expect("bind");
    let addr = endpoint.local_addr().expect("local addr");
    (endpoint, addr)
}

fn hello() -> FrameBody {
    FrameBody::ToController(ToController::Hello {
        serving: Some(Digest::repeat(1)),
        generation: Generation(4),
    })
}

/// Connects an agent, sends Hello, and returns both ends with the controller
/// side's control stream accepted and the Hello checked.
async fn linked(
    endpoint: &ControllerEndpoint,
    addr: SocketAddr,
    identity: ClientIdentity,
) -> (AgentConnection, quic::AgentLink, quic::ControlStream) {
    let (agent, link) = tokio::join!(
        async {
            let mut agent = AgentConnection::connect(addr, "localhost", identity)
                .await
                .expect("connect");
            agent.control().send(&hello()).await.expect("send hello");
            agent
        },
        async {
            endpoint
                .accept()
                .await
                .expect("endpoint open")
                .expect("authenticated")
        }
    );
    let mut control = step(link.control()).await.expect("control stream");
    assert_eq!(step(control.recv()).await.expect("hello"), hello());
    (agent, link, control)
}

/// Connects with quinn directly (valid fleet cert) so raw bytes can be sent.
async fn raw_agent(
    endpoint: &ControllerEndpoint,
    addr: SocketAddr,
    ca: &Ca,
    bytes: &[u8],
) -> (
    quinn::Endpoint,
    quinn::Connection,
    quinn::SendStream,
    quic::AgentLink,
) {
    let config =
        quic::quinn_client_config(&ca.client(&["node-r.nodes.fleetweft"])).expect("config");
    let mut client = quinn::Endpoint::client("127.0.0.1:0".parse().expect("addr")).expect("client");
    client.set_default_client_config(config);
    let ((conn, send), link) = tokio::join!(
        async {
            let conn = client
                .connect(addr, "localhost")
                .expect("connect")
                .await
                .expect("handshake");
            let (mut send, _recv) = conn.open_bi().await.expect("open");
            send.write_all(bytes).await.expect("write raw");
            // Returned, not dropped: dropping `send` would finish the stream.
            (conn, send)
        },
        async {
            endpoint
                .accept()
                .await
                .expect("endpoint open")
                .expect("authenticated")
        }
    );
    (client, conn, send, link)
}

async fn application_close_code(conn: &quinn::Connection) -> Option<u64> {
    match step(conn.closed()).await {
        quinn::ConnectionError::ApplicationClosed(close) => Some(close.error_code.into_inner()),
        _ => None,
    }
}

#[tokio::test]
async fn frames_round_trip_and_node_id_comes_from_the_certificate() {
    let ca = Ca::new("fleet");
    // Load the identities from PEM files, the way the binaries will.
    let dir = tempfile::tempdir().expect("tempdir");
    let write = |name: &str, text: String| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).expect("write pem");
        path
    };
    let ca_pem = write("ca.pem", ca.cert.pem());
    let (server_cert, server_key) = ca.leaf(
        &["localhost", "127.0.0.1"],
        ExtendedKeyUsagePurpose::ServerAuth,
    );
    let (node_cert, node_key) = ca.leaf(
        &["node-a.nodes.fleetweft"],
        ExtendedKeyUsagePurpose::ClientAuth,
    );
    let server = ServerIdentity::from_pem_files(
        &ca_pem,
        &write("controller.pem", server_cert.pem()),
        &write("controller-key.pem", server_key.serialize_pem()),
    )
    .expect("server identity");
    let client = ClientIdentity::from_pem_files(
        &ca_pem,
        &write("node-a.pem", node_cert.pem()),
        &write("node-a-key.pem", node_key.serialize_pem()),
    )
    .expect("client identity");

    let endpoint =
        ControllerEndpoint::bind("127.0.0.1:0".parse().expect("addr"), server).expect("bind");
    let addr = endpoint.local_addr().expect("addr");
    let (mut agent, link, mut control) = linked(&endpoint, addr, client).await;
    assert_eq!(link.node, "node-a");

    let apply = FrameBody::ToAgent(ToAgent::Apply {
        op: OpId(1),
        generation: Generation(5),
        release: Digest::repeat(2),
    });
    step(control.send(&apply)).await.expect("send apply");
    assert_eq!(
        step(agent.control().recv()).await.expect("recv apply"),
        apply
    );

    let request = FrameBody::ToController(ToController::CommitRequest { op: OpId(1) });
    step(agent.control().send(&request))
        .await
        .expect("send request");
    assert_eq!(step(control.recv()).await.expect("recv request"), request);

    let reply = FrameBody::ToAgent(ToAgent::CommitReply {
        op: OpId(1),
        generation: Generation(5),
        release: Digest::repeat(5),
        decision: Decision::Commit,
    });
    // Split halves work from separate tasks.
    let (mut tx, _rx) = control.split();
    tokio::spawn(async move { tx.send(&reply).await })
        .await
        .expect("join")
        .expect("send reply");
    assert!(matches!(
        step(agent.control().recv()).await.expect("recv reply"),
        FrameBody::ToAgent(ToAgent::CommitReply { .. })
    ));
}

#[tokio::test]
async fn readbacks_travel_their_own_direction_only() {
    let ca = Ca::new("fleet");
    let (endpoint, addr) = controller(&ca);
    let (mut agent, _link, mut control) =
        linked(&endpoint, addr, ca.client(&["node-a.nodes.fleetweft"])).await;
    let ask = FrameBody::ReadBackRequest { request: 9 };
    step(control.send(&ask)).await.expect("send request");
    assert_eq!(
        step(agent.control().recv()).await.expect("recv request"),
        ask
    );
    let answer = FrameBody::ReadBackReply {
        request: 9,
        observation: model::RouteObservation::passing(Digest::repeat(3)),
        serving: Some(Digest::repeat(3)),
    };
    step(agent.control().send(&answer))
        .await
        .expect("send reply");
    assert_eq!(step(control.recv()).await.expect("recv reply"), answer);
    // A controller answering a readback is out of place on the agent.
    step(control.send(&answer))
        .await
        .expect("send misplaced reply");
    let err = step(agent.control().recv())
        .await
        .expect_err("reply towards the agent");
    assert!(
        matches!(err, TransportError::UnexpectedFrame { .. }),
        "{err:?}"
    );

    // An agent asking the controller for a readback is out of place.
    let wrong = protocol::frame::encode(&ask).expect("encode");
    let (_c, conn, _s, link) = raw_agent(&endpoint, addr, &ca, &wrong).await;
    let mut control = step(link.control()).await.expect("control");
    let err = step(control.recv()).await.expect_err("wrong direction");
    assert!(
        matches!(err, TransportError::UnexpectedFrame { .. }),
        "{err:?}"
    );
    assert_eq!(
        application_close_code(&conn).await,
        Some(u64::from(CLOSE_UNEXPECTED_FRAME))
    );
}

#[tokio::test]
async fn client_cert_from_another_ca_is_refused() {
    let fleet = Ca::new("fleet");
    let other = Ca::new("other");
    let (endpoint, addr) = controller(&fleet);
    // The agent trusts the fleet CA (so it accepts the controller) but its
    // own certificate is signed by another CA.
    let (cert, key) = other.leaf(
        &["node-a.nodes.fleetweft"],
        ExtendedKeyUsagePurpose::ClientAuth,
    );
    let identity = ClientIdentity::new(fleet.der(), vec![cert.der().clone()], private(&key));
    let (agent, accepted) = tokio::join!(
        AgentConnection::connect(addr, "localhost", identity),
        async { endpoint.accept().await.expect("endpoint open") }
    );
    assert!(
        matches!(accepted, Err(TransportError::Handshake(_))),
        "{accepted:?}"
    );
    // In TLS 1.3 the client may consider the handshake done before the
    // server has checked its certificate; either way it cannot talk.
    if let Ok(mut agent) = agent {
        let sent = agent.control().send(&hello()).await;
        let received = step(agent.control().recv()).await;
        assert!(sent.is_err() || received.is_err());
    }
}

#[tokio::test]
async fn cert_without_node_san_is_refused() {
    let ca = Ca::new("fleet");
    let (endpoint, addr) = controller(&ca);
    let (agent, accepted) = tokio::join!(
        AgentConnection::connect(addr, "localhost", ca.client(&["node-a.example.com"])),
        async { endpoint.accept().await.expect("endpoint open") }
    );
    assert!(
        matches!(&accepted, Err(TransportError::NotANodeCert(reason)) if reason.contains(".nodes.fleetweft")),
        "{accepted:?}"
    );
    let agent = agent.expect("handshake itself succeeds");
    assert_eq!(
        application_close_code(agent.connection()).await,
        Some(u64::from(CLOSE_NOT_A_NODE))
    );
}

#[tokio::test]
async fn oversized_and_garbage_frames_close_the_connection_and_accepting_goes_on() {
    let ca = Ca::new("fleet");
    let (endpoint, addr) = controller(&ca);

    // A length prefix far over FRAME_BYTES_MAX.
    let (_c1, conn, _s1, link) =
        raw_agent(&endpoint, addr, &ca, &[0xff, 0xff, 0xff, 0xff, 0]).await;
    let mut control = step(link.control()).await.expect("control");
    let err = step(control.recv()).await.expect_err("oversized");
    assert!(
        matches!(
            err,
            TransportError::BadFrame(protocol::frame::FrameError::TooLarge { .. })
        ),
        "{err:?}"
    );
    assert_eq!(
        application_close_code(&conn).await,
        Some(u64::from(CLOSE_BAD_FRAME))
    );

    // A plausible length followed by garbage.
    let garbage = [0, 0, 0, 6, 0x01, 0xfe, 0xfd, 0xfc, 0xfb, 0xfa];
    let (_c2, conn, _s2, link) = raw_agent(&endpoint, addr, &ca, &garbage).await;
    let mut control = step(link.control()).await.expect("control");
    let err = step(control.recv()).await.expect_err("garbage");
    assert!(matches!(err, TransportError::BadFrame(_)), "{err:?}");
    assert_eq!(
        application_close_code(&conn).await,
        Some(u64::from(CLOSE_BAD_FRAME))
    );

    // A well-formed frame in the wrong direction.
    let wrong = protocol::frame::encode(&FrameBody::ToAgent(ToAgent::Restore {
        op: OpId(1),
        generation: Generation(1),
    }))
    .expect("encode");
    let (_c3, conn, _s3, link) = raw_agent(&endpoint, addr, &ca, &wrong).await;
    let mut control = step(link.control()).await.expect("control");
    let err = step(control.recv()).await.expect_err("wrong direction");
    assert!(
        matches!(err, TransportError::UnexpectedFrame { .. }),
        "{err:?}"
    );
    assert_eq!(
        application_close_code(&conn).await,
        Some(u64::from(CLOSE_UNEXPECTED_FRAME))
    );

    // The controller still accepts and serves a well-behaved agent.
    let (_agent, link, _control) =
        linked(&endpoint, addr, ca.client(&["node-b.nodes.fleetweft"])).await;
    assert_eq!(link.node, "node-b");
}

#[tokio::test]
async fn bundles_are_fetched_by_digest_and_checked() {
    let ca = Ca::new("fleet");
    let (endpoint, addr) = controller(&ca);
    let good = b"#!/bin/sh\necho hello\n".repeat(1000);
    let good_digest = Digest(Sha256::digest(&good).into());
    let liar_digest = Digest::repeat(0xaa);
    let mut bundles = HashMap::new();
    bundles.insert(good_digest, good.clone());
    // The store answers this digest with bytes that hash to something else.
    bundles.insert(liar_digest, b"not what you asked for".to_vec());
    let store = Arc::new(move |digest: Digest| bundles.get(&digest).cloned());

    let (agent, link, _control) =
        linked(&endpoint, addr, ca.client(&["node-a.nodes.fleetweft"])).await;
    let server = tokio::spawn(async move { link.serve_bundles(store).await });

    assert_eq!(
        step(agent.fetch_bundle(good_digest)).await.expect("fetch"),
        good
    );
    let err = step(agent.fetch_bundle(liar_digest))
        .await
        .expect_err("mismatch");
    assert!(
        matches!(err, TransportError::DigestMismatch { expected, .. } if expected == liar_digest),
        "{err:?}"
    );
    let missing = Digest::repeat(0x33);
    let err = step(agent.fetch_bundle(missing))
        .await
        .expect_err("missing");
    assert!(
        matches!(err, TransportError::BundleMissing(d) if d == missing),
        "{err:?}"
    );
    // Concurrent fetches share the connection.
    let (a, b) = tokio::join!(
        agent.fetch_bundle(good_digest),
        agent.fetch_bundle(good_digest)
    );
    assert_eq!((a.expect("a"), b.expect("b")), (good.clone(), good));

    agent.close();
    assert!(matches!(
        step(server).await.expect("join"),
        TransportError::Connection(_)
    ));
}

/// A chunk source for tests: a map, with one entry answering bytes that
/// hash to something else.
struct MapChunks(HashMap<Digest, Vec<u8>>);

impl quic::ChunkSource for MapChunks {
    fn chunk(&self, digest: Digest, _offset: u64) -> Option<Vec<u8>> {
        self.0.get(&digest).cloned()
    }
}

#[tokio::test]
async fn chunks_and_bundles_share_the_streams_and_chunks_are_checked() {
    let ca = Ca::new("fleet");
    let (endpoint, addr) = controller(&ca);
    let chunk = b"a content chunk ".repeat(4096);
    let chunk_digest = Digest(Sha256::digest(&chunk).into());
    let liar = Digest::repeat(0xbb);
    let chunks = MapChunks(HashMap::from([
        (chunk_digest, chunk.clone()),
        (liar, b"other bytes".to_vec()),
    ]));
    let bundle = b"a bundle".to_vec();
    let bundle_digest = Digest(Sha256::digest(&bundle).into());
    let bundles = HashMap::from([(bundle_digest, bundle.clone())]);
    let store = Arc::new(move |digest: Digest| bundles.get(&digest).cloned());
    let (agent, link, _control) =
        linked(&endpoint, addr, ca.client(&["node-a.nodes.fleetweft"])).await;
    let server = tokio::spawn(async move { link.serve_streams(store, Arc::new(chunks)).await });
    let conn = agent.connection();
    let (a, b, c) = tokio::join!(
        quic::fetch_chunk(conn, chunk_digest),
        quic::fetch_chunk(conn, chunk_digest),
        quic::fetch_signed(conn, bundle_digest, quic::SIGNED_FILE_BYTES_MAX),
    );
    assert_eq!(a.expect("chunk"), chunk);
    assert_eq!(b.expect("chunk again"), chunk);
    assert_eq!(c.expect("bundle"), bundle);
    let err = step(quic::fetch_chunk(conn, liar)).await.expect_err("liar");
    assert!(
        matches!(err, TransportError::ChunkDigestMismatch { expected, .. } if expected == liar),
        "{err:?}"
    );
    let missing = Digest::repeat(0x44);
    let err = step(quic::fetch_chunk(conn, missing))
        .await
        .expect_err("missing");
    assert!(
        matches!(err, TransportError::ChunkMissing(d) if d == missing),
        "{err:?}"
    );
    agent.close();
    assert!(matches!(
        step(server).await.expect("join"),
        TransportError::Connection(_)
    ));
}

/// One chunk, counting the bytes handed to the stream.
struct CountingChunk {
    digest: Digest,
    bytes: Vec<u8>,
    sent: Arc<std::sync::atomic::AtomicU64>,
}

impl quic::ChunkSource for CountingChunk {
    fn chunk(&self, digest: Digest, _offset: u64) -> Option<Vec<u8>> {
        (digest == self.digest).then(|| self.bytes.clone())
    }

    fn sent(&self, bytes: u64) {
        self.sent
            .fetch_add(bytes, std::sync::atomic::Ordering::Relaxed);
    }
}

/// A fetch cut short resumes after the bytes it kept: the controller sends
/// only the rest (each piece handed over as it arrives), and the prefix
/// is hashed with it, so a wrong prefix is refused, not stored.
#[tokio::test]
async fn a_resumed_chunk_fetch_gets_only_the_rest_and_checks_the_prefix() {
    let ca = Ca::new("fleet");
    let (endpoint, addr) = controller(&ca);
    let chunk: Vec<u8> = (0..300_000u32).map(|i| (i % 241) as u8).collect();
    let digest = Digest(Sha256::digest(&chunk).into());
    let sent = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let chunks = CountingChunk {
        digest,
        bytes: chunk.clone(),
        sent: sent.clone(),
    };
    let store = Arc::new(|_: Digest| None);
    let (agent, link, _control) =
        linked(&endpoint, addr, ca.client(&["node-a.nodes.fleetweft"])).await;
    let server = tokio::spawn(async move { link.serve_streams(store, Arc::new(chunks)).await });
    let conn = agent.connection();
    let kept = 123_456;
    let mut arrived = 0usize;
    let whole = step(quic::fetch_chunk_resumed(
        conn,
        digest,
        chunk[..kept].to_vec(),
        |piece| arrived += piece.len(),
    ))
    .await
    .expect("resumed");
    assert_eq!(whole, chunk);
    assert_eq!(arrived, chunk.len() - kept, "only the rest travels");
    let counted = sent.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(
        counted,
        (chunk.len() - kept) as u64,
        "the source counts what it sent"
    );
    let all = step(quic::fetch_chunk_resumed(
        conn,
        digest,
        chunk.clone(),
        |_| {},
    ))
    .await
    .expect("a prefix that is the whole chunk");
    assert_eq!(all, chunk);
    let mut wrong = chunk[..kept].to_vec();
    wrong[7] ^= 1;
    let err = step(quic::fetch_chunk_resumed(conn, digest, wrong, |_| {}))
        .await
        .expect_err("a wrong prefix");
    assert!(
        matches!(err, TransportError::ChunkDigestMismatch { expected, .. } if expected == digest),
        "{err:?}"
    );
    let mut long = chunk.clone();
    long.push(0);
    let err = step(quic::fetch_chunk_resumed(conn, digest, long, |_| {}))
        .await
        .expect_err("a prefix past the end");
    assert!(
        matches!(err, TransportError::ChunkDigestMismatch { .. }),
        "{err:?}"
    );
    agent.close();
    let _ = step(server).await;
}

/// A hand-written controller answers one chunk request with `len` announced
/// and `sent` bytes sent: the agent's fetch fails with a typed error.
async fn chunk_answered_with(len: u64, sent: usize) -> TransportError {
    let ca = Ca::new("fleet");
    let (endpoint, addr) = controller(&ca);
    let (agent, link, _control) =
        linked(&endpoint, addr, ca.client(&["node-a.nodes.fleetweft"])).await;
    let server = tokio::spawn(async move {
        let (mut send, mut recv) = link.conn.accept_bi().await.expect("a request");
        let request = protocol::frame::read_frame(&mut recv).await.expect("frame");
        assert!(
            matches!(request, FrameBody::FetchChunk { .. }),
            "{request:?}"
        );
        let follows = FrameBody::ChunkFollows { len };
        protocol::frame::write_frame(&mut send, &follows)
            .await
            .expect("follows");
        send.write_all(&vec![7u8; sent]).await.expect("bytes");
        send.finish().expect("finish");
        // Keep the connection until the agent has read the answer.
        let _ = link.conn.closed().await;
    });
    let err = step(quic::fetch_chunk(agent.connection(), Digest::repeat(5)))
        .await
        .expect_err("a bad answer");
    agent.close();
    let _ = step(server).await;
    err
}

#[tokio::test]
async fn a_chunk_stream_that_ends_early_runs_long_or_is_too_large_is_refused() {
    let short = chunk_answered_with(100, 40).await;
    assert!(
        matches!(&short, TransportError::ChunkStream { why, .. } if why.contains("40 of 100")),
        "{short:?}"
    );
    let long = chunk_answered_with(100, 140).await;
    assert!(
        matches!(&long, TransportError::ChunkStream { why, .. } if why.contains("more than")),
        "{long:?}"
    );
    let huge = chunk_answered_with(quic::CHUNK_BYTES_MAX + 1, 0).await;
    assert!(
        matches!(huge, TransportError::ChunkLength { .. }),
        "{huge:?}"
    );
    let empty = chunk_answered_with(0, 0).await;
    assert!(
        matches!(empty, TransportError::ChunkLength { len: 0, .. }),
        "{empty:?}"
    );
}

/// The controller's TLS config refuses a TLS 1.2 client. Checked with plain
/// rustls connections in memory: over QUIC a TLS 1.2-only client cannot even
/// be built (quinn panics on such a config, QUIC being TLS 1.3 by definition).
#[test]
fn tls12_only_client_cannot_connect() {
    let ca = Ca::new("fleet");
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.der()).expect("root");
    let (cert, key) = ca.leaf(
        &["node-a.nodes.fleetweft"],
        ExtendedKeyUsagePurpose::ClientAuth,
    );
    let tls12 = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(&[&rustls::version::TLS12])
    .expect("versions")
    .with_root_certificates(roots)
    .with_client_auth_cert(vec![cert.der().clone()], private(&key))
    .expect("client config");
    let server_config = protocol::tls::server_config(&ca.server()).expect("server config");
    let mut server = rustls::ServerConnection::new(Arc::new(server_config)).expect("server");
    let name = rustls::pki_types::ServerName::try_from("localhost").expect("name");
    let mut client = rustls::ClientConnection::new(Arc::new(tls12), name).expect("client");
    let mut refused = false;
    // A handshake takes a few flights; stop at the first refusal.
    for _ in 0..8 {
        let mut flight = Vec::new();
        client.write_tls(&mut flight).expect("client write");
        server
            .read_tls(&mut flight.as_slice())
            .expect("server read");
        if server.process_new_packets().is_err() {
            refused = true;
            break;
        }
        let mut flight = Vec::new();
        server.write_tls(&mut flight).expect("server write");
        client
            .read_tls(&mut flight.as_slice())
            .expect("client read");
        if client.process_new_packets().is_err() {
            refused = true;
            break;
        }
    }
    assert!(refused, "TLS 1.2 handshake was not refused");
    assert!(server.is_handshaking());
}
