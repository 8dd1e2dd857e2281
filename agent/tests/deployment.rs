//! A real agent process against a scripted controller (issue #24 item 1):
//! an `Apply` naming a deployment (code plus configuration) is staged by
//! asking for the document after the bundle is missing, served under the
//! deployment's digest with the configuration in the app's environment,
//! and read back with the fingerprint of the process that listens; a
//! configuration-only change then starts a new instance, never a no-op.

use model::{ArtifactRead, Decision, Digest, Generation, OpId, ToAgent, ToController};
use protocol::bundle::{self, ManifestFields, ProbeSpec};
use protocol::frame::{FrameBody, READBACK_INTERVAL_MIN_MS};
use protocol::quic::{BundleStore, ControlStream, ControllerEndpoint};
use protocol::tls::ServerIdentity;
use releases::config::{Configuration, Deployment, EnvValue};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::sync::Arc;
use std::time::Duration;

/// Every wait in this test is bounded.
const WAIT: Duration = Duration::from_secs(60);

/// The controller's store: bundles by digest, deployment documents by
/// deployment digest.
struct Store {
    bundles: HashMap<Digest, Vec<u8>>,
    deployments: HashMap<Digest, Vec<u8>>,
}

impl BundleStore for Store {
    fn get(&self, digest: Digest) -> Option<Vec<u8>> {
        self.bundles.get(&digest).cloned()
    }

    fn deployment(&self, digest: Digest) -> Option<Vec<u8>> {
        self.deployments.get(&digest).cloned()
    }
}

async fn next_frame(control: &mut ControlStream) -> FrameBody {
    tokio::time::timeout(WAIT, control.recv())
        .await
        .expect("agent answered in time")
        .expect("control stream open")
}

/// Runs op `op` of `release` to its report; the report's observation.
async fn roll_out(
    control: &mut ControlStream,
    op: OpId,
    release: Digest,
) -> model::RouteObservation {
    let generation = Generation(1);
    control
        .send(&FrameBody::ToAgent(ToAgent::Apply {
            op,
            generation,
            release,
        }))
        .await
        .expect("send apply");
    loop {
        match next_frame(control).await {
            FrameBody::ToController(ToController::CommitRequest { op: o }) if o == op => break,
            FrameBody::ToController(ToController::Report { op: o, .. }) if o == op => {
                panic!("op {op} reported before its commit (refused?)")
            }
            _ => {}
        }
    }
    control
        .send(&FrameBody::ToAgent(ToAgent::CommitReply {
            op,
            generation,
            release,
            decision: Decision::Commit,
        }))
        .await
        .expect("send commit");
    let observation = loop {
        if let FrameBody::ToController(ToController::Report {
            op: o, observation, ..
        }) = next_frame(control).await
        {
            if o == op {
                break observation;
            }
        }
    };
    control
        .send(&FrameBody::ToAgent(ToAgent::Settled { op, generation }))
        .await
        .expect("send settled");
    observation
}

/// A readback: the configuration read sent just before the reply, and
/// the reply's serving digest and artifact read.
async fn read_back(
    control: &mut ControlStream,
    request: u64,
) -> (
    Option<(Digest, Option<Digest>)>,
    Option<Digest>,
    Option<ArtifactRead>,
) {
    tokio::time::sleep(Duration::from_millis(READBACK_INTERVAL_MIN_MS + 50)).await;
    control
        .send(&FrameBody::ReadBackRequest { request })
        .await
        .expect("ask");
    let mut configuration = None;
    loop {
        match next_frame(control).await {
            FrameBody::ConfigurationRead {
                deployment,
                fingerprint,
            } => configuration = Some((deployment, fingerprint)),
            FrameBody::ReadBackReply {
                request: r,
                observation,
                serving,
            } if r == request => return (configuration, serving, observation.artifact),
            _ => {}
        }
    }
}

/// `GET /status` on the public route: the body (the sample app echoes
/// `FLEETWEFT_RELEASE` there).
fn status(port: u16) -> String {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    stream
        .write_all(b"GET /status HTTP/1.0\r\nHost: node\r\n\r\n")
        .expect("request");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("answer");
    answer
}

fn deployment(code: Digest, revision: u64, greeting: &str) -> Deployment {
    Deployment {
        release: code,
        config: Configuration {
            app: "hello".into(),
            revision,
            env: vec![("GREETING".into(), EnvValue::Plain(greeting.into()))],
            files: vec![("greeting.txt".into(), greeting.as_bytes().to_vec())],
        },
    }
}

fn agent_config(
    dir: &std::path::Path,
    pki: &protocol::pki::FleetPki,
    addr: std::net::SocketAddr,
    public_port: u16,
) -> std::path::PathBuf {
    let config = dir.join("agent.toml");
    std::fs::write(
        &config,
        format!(
            "node = \"node-a\"\ndata_dir = {:?}\npublic_port = {public_port}\n[controller]\naddr = \"{addr}\"\n[tls]\nca = {:?}\ncert = {:?}\nkey = {:?}\n[bundles]\npubkey = {:?}\n[timing]\nretry_ms = 300\nbackoff_base_ms = 50\nbackoff_max_ms = 200\n",
            dir.join("data").display().to_string(),
            pki.ca_cert().display().to_string(),
            pki.node_cert("node-a").display().to_string(),
            pki.node_key("node-a").display().to_string(),
            dir.join("bundle.pub").display().to_string(),
        ),
    )
    .expect("config");
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_is_staged_served_read_back_and_reconfigured() {
    let dir = tempfile::tempdir().expect("temp dir");
    let pki = protocol::pki::init_fleet(
        &dir.path().join("pki"),
        &["node-a".to_string()],
        "localhost",
    )
    .expect("pki");
    let (signing, verifying) = bundle::keygen();
    bundle::save_verifying_key(&dir.path().join("bundle.pub"), &verifying).expect("pubkey");
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
    let code = bundle::bundle_digest(&bytes);
    let (doc1, doc2) = (deployment(code, 1, "hi"), deployment(code, 2, "ho"));
    let (d1, d2) = (doc1.digest(), doc2.digest());
    let store = Arc::new(Store {
        bundles: [(code, bytes)].into(),
        deployments: [(d1, doc1.encode()), (d2, doc2.encode())].into(),
    });

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
    let config = agent_config(dir.path(), &pki, addr, public_port);
    let _agent = tokio::process::Command::new(env!("CARGO_BIN_EXE_fleetweft-agent"))
        .arg("--config")
        .arg(&config)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start the agent");

    let link = tokio::time::timeout(WAIT, endpoint.accept())
        .await
        .expect("agent connected in time")
        .expect("endpoint open")
        .expect("agent authenticated");
    let mut control = link.control().await.expect("control stream");
    let bundles = protocol::quic::AgentLink {
        node: link.node.clone(),
        conn: link.conn.clone(),
    };
    tokio::spawn(async move { bundles.serve_bundles(store).await });

    // The deployment is served under its own digest.
    let observation = roll_out(&mut control, OpId(1), d1).await;
    assert_eq!(observation.identity, Some(d1), "{observation}");
    assert_eq!(observation.artifact, Some(ArtifactRead::Digest(d1)));
    // FLEETWEFT_RELEASE is still the code's digest.
    let answer = tokio::task::spawn_blocking(move || status(public_port))
        .await
        .expect("status");
    assert!(answer.contains(&code.to_hex()), "{answer}");
    let data = dir.path().join("data");
    let document = data
        .join("deployments")
        .join(d1.to_hex())
        .join("deployment.bin");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&document)
            .expect("document")
            .permissions(),
    );
    assert_eq!(mode & 0o777, 0o600);

    let fp1 = doc1.config.fingerprint();
    let (configuration, serving, artifact) = read_back(&mut control, 1).await;
    assert_eq!(configuration, Some((d1, Some(fp1))));
    assert_eq!(serving, Some(d1));
    assert_eq!(artifact, Some(ArtifactRead::Digest(d1)));

    // A configuration-only change: same code, a new instance.
    let observation = roll_out(&mut control, OpId(2), d2).await;
    assert_eq!(observation.identity, Some(d2), "{observation}");
    let (configuration, serving, _) = read_back(&mut control, 2).await;
    assert_eq!(configuration, Some((d2, Some(doc2.config.fingerprint()))));
    assert_eq!(serving, Some(d2));
}
