//! A real agent process against a scripted controller: a readback request
//! is answered with a fresh probe of the route, and a request that comes
//! sooner than `READBACK_INTERVAL_MIN_MS` after the last answer is dropped,
//! never answered with the previous observation.

use model::{ProbeVerdict, RouteObservation, ToController};
use protocol::frame::{FrameBody, READBACK_INTERVAL_MIN_MS};
use protocol::quic::{ControlStream, ControllerEndpoint};
use protocol::tls::ServerIdentity;
use std::time::Duration;

/// Every wait in this test is bounded.
const WAIT: Duration = Duration::from_secs(30);

/// The next readback reply, skipping the agent's other messages.
async fn next_readback(
    control: &mut ControlStream,
) -> (u64, RouteObservation, Option<model::Digest>) {
    loop {
        let frame = tokio::time::timeout(WAIT, control.recv())
            .await
            .expect("agent answered in time")
            .expect("control stream open");
        if let FrameBody::ReadBackReply {
            request,
            observation,
            serving,
        } = frame
        {
            return (request, observation, serving);
        }
    }
}

/// Whether a readback reply arrives within `wait` (other messages skipped).
async fn readback_within(control: &mut ControlStream, wait: Duration) -> Option<u64> {
    tokio::time::timeout(wait, next_readback(control))
        .await
        .ok()
        .map(|(request, _, _)| request)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readbacks_are_answered_fresh_and_bounded() {
    let dir = tempfile::tempdir().expect("temp dir");
    let pki = protocol::pki::init_fleet(
        &dir.path().join("pki"),
        &["node-a".to_string()],
        "localhost",
    )
    .expect("pki");
    let (_signing, verifying) = protocol::bundle::keygen();
    let pubkey = dir.path().join("bundle.pub");
    protocol::bundle::save_verifying_key(&pubkey, &verifying).expect("pubkey");
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
            "node = \"node-a\"\ndata_dir = {:?}\npublic_port = {public_port}\n[controller]\naddr = \"{addr}\"\n[tls]\nca = {:?}\ncert = {:?}\nkey = {:?}\n[bundles]\npubkey = {:?}\n",
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

    let link = tokio::time::timeout(WAIT, endpoint.accept())
        .await
        .expect("agent connected in time")
        .expect("endpoint open")
        .expect("agent authenticated");
    let mut control = link.control().await.expect("control stream");
    let hello = tokio::time::timeout(WAIT, control.recv())
        .await
        .expect("hello in time")
        .expect("control stream open");
    assert!(matches!(
        hello,
        FrameBody::ToController(ToController::Hello { serving: None, .. })
    ));

    // Nothing installed: the route is probed and says so; nothing is
    // claimed of a process or an artifact.
    let ask = |request| FrameBody::ReadBackRequest { request };
    control.send(&ask(1)).await.expect("ask 1");
    let (request, observation, serving) = next_readback(&mut control).await;
    assert_eq!((request, serving), (1, None));
    assert_eq!(observation.verdict, ProbeVerdict::Unreachable);
    assert_eq!(observation.identity, None);
    assert_eq!(observation.artifact, None);
    assert_eq!(observation.process_uptime_ms, None);

    // Asked again at once: dropped, not answered from memory.
    control.send(&ask(2)).await.expect("ask 2");
    let quiet = Duration::from_millis(READBACK_INTERVAL_MIN_MS * 3);
    assert_eq!(readback_within(&mut control, quiet).await, None);

    // After the interval the agent answers again, on the same connection.
    control.send(&ask(3)).await.expect("ask 3");
    assert_eq!(readback_within(&mut control, WAIT).await, Some(3));
}
