//! A real agent process against a scripted controller: after it accepted a
//! newer generation, a command of an older generation that arrives on a new
//! connection (a late copy from before a reconnect) is refused and
//! reported, never applied (S8).

use model::{Digest, Generation, OpId, ToAgent, ToController};
use protocol::bundle::{self, ManifestFields, ProbeSpec};
use protocol::frame::FrameBody;
use protocol::quic::{ControlStream, ControllerEndpoint};
use protocol::tls::ServerIdentity;
use std::sync::Arc;
use std::time::Duration;

/// Every wait in this test is bounded.
const WAIT: Duration = Duration::from_secs(30);

async fn next_to_controller(control: &mut ControlStream) -> ToController {
    loop {
        let frame = tokio::time::timeout(WAIT, control.recv())
            .await
            .expect("agent answered in time")
            .expect("control stream open");
        if let FrameBody::ToController(msg) = frame {
            return msg;
        }
    }
}

async fn accept(endpoint: &ControllerEndpoint) -> (protocol::quic::AgentLink, ControlStream) {
    let link = tokio::time::timeout(WAIT, endpoint.accept())
        .await
        .expect("agent connected in time")
        .expect("endpoint open")
        .expect("agent authenticated");
    let control = link.control().await.expect("control stream");
    (link, control)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_generation_after_reconnect_is_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let pki = protocol::pki::init_fleet(
        &dir.path().join("pki"),
        &["node-a".to_string()],
        "localhost",
    )
    .expect("pki");
    let (signing, verifying) = bundle::keygen();
    let pubkey = dir.path().join("bundle.pub");
    bundle::save_verifying_key(&pubkey, &verifying).expect("pubkey");
    let app = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../examples/hello/app.py"
    ))
    .expect("sample app");
    let bytes = bundle::sign(
        &signing,
        &app,
        ManifestFields {
            name: "hello".into(),
            version: "v1".into(),
            app_file_name: "app.py".into(),
            run: vec!["python3".into(), "app.py".into()],
            probe: ProbeSpec {
                path: "/hello".into(),
                expect_status: 200,
                expect_body: "hello from v1".into(),
                expect_json: None,
            },
        },
    )
    .expect("sign");
    let release: Digest = bundle::bundle_digest(&bytes);

    let identity = ServerIdentity::from_pem_files(
        &pki.ca_cert(),
        &pki.controller_cert(),
        &pki.controller_key(),
    )
    .expect("controller identity");
    let endpoint =
        ControllerEndpoint::bind("127.0.0.1:0".parse().expect("addr"), identity).expect("bind");
    let addr = endpoint.local_addr().expect("addr");
    let public_port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let config = dir.path().join("agent.toml");
    std::fs::write(
        &config,
        format!(
            "node = \"node-a\"\ndata_dir = {:?}\npublic_port = {public_port}\n[controller]\naddr = \"{addr}\"\n[tls]\nca = {:?}\ncert = {:?}\nkey = {:?}\n[bundles]\npubkey = {:?}\n[timing]\nretry_ms = 300\nbackoff_base_ms = 50\nbackoff_max_ms = 200\n",
            dir.path().join("data").display().to_string(),
            pki.ca_cert().display().to_string(),
            pki.node_cert("node-a").display().to_string(),
            pki.node_key("node-a").display().to_string(),
            pubkey.display().to_string(),
        ),
    )
    .expect("config");
    let _agent = tokio::process::Command::new(env!("CARGO_BIN_EXE_fleetweft-agent"))
        .arg("--config")
        .arg(&config)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start the agent");

    // First connection: the agent says hello, accepts op1 at gen 2.
    let (link, mut control) = accept(&endpoint).await;
    assert_eq!(link.node, "node-a");
    let store = Arc::new(move |digest: Digest| (digest == release).then(|| bytes.clone()));
    let serving = {
        let link = protocol::quic::AgentLink {
            node: link.node.clone(),
            conn: link.conn.clone(),
        };
        tokio::spawn(async move { link.serve_bundles(store).await })
    };
    assert!(matches!(
        next_to_controller(&mut control).await,
        ToController::Hello { .. }
    ));
    control
        .send(&FrameBody::ToAgent(ToAgent::Apply {
            op: OpId(1),
            generation: Generation(2),
            release,
        }))
        .await
        .expect("send apply");
    loop {
        if let ToController::CommitRequest { op } = next_to_controller(&mut control).await {
            assert_eq!(op, OpId(1));
            break;
        }
    }

    // The connection drops; the agent reconnects and says it accepted gen 2.
    link.conn.close(0u32.into(), b"test: drop the connection");
    serving.abort();
    let (_link2, mut control) = accept(&endpoint).await;
    match next_to_controller(&mut control).await {
        ToController::Hello { generation, .. } => assert_eq!(generation, Generation(2)),
        other => panic!("expected hello, got {other:?}"),
    }
    // A late copy of an older command (gen 1) arrives on the new connection.
    control
        .send(&FrameBody::ToAgent(ToAgent::Apply {
            op: OpId(0),
            generation: Generation(1),
            release,
        }))
        .await
        .expect("send stale apply");
    loop {
        match next_to_controller(&mut control).await {
            ToController::Rejected {
                op,
                generation,
                accepted,
            } => {
                assert_eq!(
                    (op, generation, accepted),
                    (OpId(0), Generation(1), Generation(2))
                );
                break;
            }
            // Retries of op1's commit request may interleave; op0 is never asked for.
            ToController::CommitRequest { op } => assert_eq!(op, OpId(1), "stale op0 applied"),
            _ => {}
        }
    }
}
