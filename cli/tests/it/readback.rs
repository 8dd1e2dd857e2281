//! A fresh readback end to end: a controller in this process (so the test
//! reaches its core), real agents as child processes on loopback. The
//! readback must be what the agent reads *now*: after the installed app file
//! is overwritten on the agent's disk, the next readback says so.

use crate::fleet::loopback::Loopback;
use controller::daemon::core::ReadBackError;
use controller::daemon::readback::READBACK_INTERVAL_MIN_MS;
use model::{ArtifactRead, NodeId, ProbeVerdict};
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

/// How long the whole test may take.
const TEST: Duration = Duration::from_secs(180);

/// PKI, one signed release (v1), the controller in this process, and agents
/// for `agents`; the release uploaded.
async fn start(dir: PathBuf, agents: &[&str]) -> Loopback {
    let mut fleet = Loopback::lay_out(dir, "");
    fleet.sign_hello(&["v1"]);
    fleet.start_controller_here().await;
    for node in agents {
        fleet.start_agent(node, &[]);
    }
    fleet.upload_hello(&["v1"]).await;
    fleet
}

/// The controller runs inside the test's runtime: the runtime is shut down
/// (stopping it) before its directory is removed, so it never writes into
/// a removed log. A failed test keeps the directory for a post-mortem.
#[test]
fn a_readback_is_read_fresh_from_the_agent() {
    let dir = tempfile::tempdir().expect("temp dir").keep();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        tokio::time::timeout(TEST, readback_body(dir.join("fleet")))
            .await
            .expect("the test overran its deadline")
    });
    drop(runtime);
    let _ = std::fs::remove_dir_all(&dir);
}

async fn readback_body(dir: PathBuf) {
    // node-c's agent is never started.
    let fleet = start(dir, &["node-a", "node-b"]).await;
    let release = fleet.digest("v1");
    let (a, c) = (NodeId(0), NodeId(2));
    fleet
        .wait("node-a and node-b connected", |s| {
            s.nodes[0].connected && s.nodes[1].connected
        })
        .await;
    let _: serde_json::Value = fleet
        .api
        .post_json(
            "/api/rollouts",
            &serde_json::json!({
                "release": release.to_hex(),
                "canary": "node-a",
                "followers": ["node-b"],
                "slots": 1,
            }),
        )
        .await
        .expect("start the rollout");
    fleet
        .wait("r0 completed", |s| {
            s.rollouts
                .iter()
                .any(|r| r.id == "r0" && r.status == "completed")
        })
        .await;
    let logged = fleet.quiet_sequence().await;

    // (a) What is installed and serves, read back now.
    let before = SystemTime::now();
    let fresh = fleet
        .core()
        .read_back(a)
        .await
        .expect("a readback of node-a");
    assert!(fresh.observed_at >= before && fresh.observed_at <= SystemTime::now());
    assert_eq!(fresh.serving, Some(release));
    assert_eq!(fresh.observation.verdict, ProbeVerdict::Pass, "{fresh:?}");
    assert_eq!(fresh.observation.identity, Some(release));
    assert_eq!(
        fresh.observation.artifact,
        Some(ArtifactRead::Digest(release))
    );
    assert!(fresh.observation.process_uptime_ms.is_some(), "{fresh:?}");
    assert!(fresh.observation.process_restarts.is_some(), "{fresh:?}");

    // Asked again at once: refused by the controller rather than dropped
    // by the agent (which would read as "did not answer").
    assert_eq!(
        fleet.core().read_back(a).await,
        Err(ReadBackError::TooSoon),
        "a second readback within {READBACK_INTERVAL_MIN_MS} ms"
    );

    // (b) The app file behind the route changes on disk: the next readback
    // sees it, so it is read now, not remembered.
    let app_file = fleet.release_dir("node-a", release).join("app.py");
    let mut app = std::fs::read(&app_file).expect("the installed app file");
    app.extend_from_slice(b"\n# altered behind the agent's back\n");
    std::fs::write(&app_file, app).expect("overwrite the app file");
    tokio::time::sleep(Duration::from_millis(READBACK_INTERVAL_MIN_MS)).await;
    let altered = fleet.core().read_back(a).await.expect("a second readback");
    assert_eq!(
        altered.observation.artifact,
        Some(ArtifactRead::AppFileAltered(release)),
        "{altered:?}"
    );
    assert!(altered.observed_at > fresh.observed_at);
    // node-b was left alone and still reads back clean.
    let b = fleet.core().read_back(NodeId(1)).await.expect("node-b");
    assert_eq!(b.observation.artifact, Some(ArtifactRead::Digest(release)));

    // (c) No agent, no readback.
    assert_eq!(
        fleet.core().read_back(c).await,
        Err(ReadBackError::NotConnected)
    );
    assert_eq!(
        ReadBackError::NotConnected.to_string(),
        "the agent is not connected"
    );

    // A readback is not an event.
    assert_eq!(fleet.last_sequence().await, logged);
}
