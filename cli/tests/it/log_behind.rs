//! Issue 13, "the first hour": a restored older backup of the controller's
//! data runs behind what its agents report, and says so loudly. A real
//! `fleetweft controller` process: a rollout takes it to generation 1 and
//! node-a's agent (scripted over the real QUIC protocol) says it accepted
//! generation 1; the controller is stopped and its data replaced by a copy
//! taken before the rollout (generation 0); started again, node-a says
//! hello with generation 1 (twice, on two connections). `/api/status`,
//! `fleetweft status [--json]`, `/metrics`, the handover report and the
//! daemon log all say the log is behind, the log once per node and
//! generation, and nothing of it is written to the event log.

use crate::api_harness;

use api_harness::*;
use std::path::Path;
use std::time::{Duration, Instant};

/// Every wait here is bounded.
const WAIT: Duration = Duration::from_secs(20);

/// What node-a's agent says on a new connection: hello, having accepted
/// `generation`. Waits until the controller logged it.
async fn hello(ctl: &Controller, generation: u64) {
    let identity = protocol::tls::ClientIdentity::from_pem_files(
        &ctl.pki.ca_cert(),
        &ctl.pki.node_cert("node-a"),
        &ctl.pki.node_key("node-a"),
    )
    .expect("node-a identity");
    let addr = format!("127.0.0.1:{}", ctl.quic_port)
        .parse()
        .expect("addr");
    let before = hellos(ctl);
    let mut conn = protocol::quic::AgentConnection::connect(addr, "localhost", identity)
        .await
        .expect("connect as node-a");
    conn.control()
        .send(&protocol::frame::FrameBody::ToController(
            model::ToController::Hello {
                serving: None,
                generation: model::Generation(generation),
            },
        ))
        .await
        .expect("send hello");
    let deadline = Instant::now() + WAIT;
    while hellos(ctl) == before {
        assert!(Instant::now() < deadline, "the hello was not logged");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The hellos in the event log (only node-a speaks here).
fn hellos(ctl: &Controller) -> usize {
    let events = ctl.get_json("/api/events?from=0&limit=1000");
    events
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["event"].get("NodeHello").is_some())
        .count()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

fn stop(ctl: &mut Controller) {
    let _ = ctl.child.kill();
    let _ = ctl.child.wait();
}

fn start(ctl: &mut Controller) {
    ctl.child = spawn_controller(ctl._dir.path());
    ctl.wait_up();
}

fn daemon_log(ctl: &Controller) -> String {
    std::fs::read_to_string(ctl._dir.path().join("controller.log")).unwrap_or_default()
}

const WARNING: &str = "LOG BEHIND THE FLEET: node-a reports generation 1, but the controller's log is at generation 0";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restored_older_backup_says_it_is_behind_its_agents() {
    let mut ctl = Controller::start();
    let data = ctl._dir.path().join("data");
    let backup = ctl._dir.path().join("backup");
    stop(&mut ctl);
    copy_dir(&data, &backup);
    start(&mut ctl);
    ctl.start_rollout("node-a");
    assert_eq!(ctl.status()["generation"], 1);
    // The agent accepted the rollout's generation: at the log's, not ahead.
    hello(&ctl, 1).await;
    assert_eq!(ctl.status()["nodes_ahead_of_log"], 0);
    assert!(!daemon_log(&ctl).contains("LOG BEHIND"));

    // The operator restores the older copy and starts the controller.
    stop(&mut ctl);
    std::fs::remove_dir_all(&data).expect("remove data");
    copy_dir(&backup, &data);
    start(&mut ctl);
    assert_eq!(ctl.status()["generation"], 0);
    assert_eq!(ctl.status()["nodes_ahead_of_log"], 0, "no agent spoke yet");
    let sequence = ctl.last_sequence();
    hello(&ctl, 1).await;
    hello(&ctl, 1).await;

    let status = ctl.status();
    assert_eq!(status["nodes_ahead_of_log"], 1, "{status}");
    let entry = &status["ahead_of_log"][0];
    assert_eq!(
        (
            &entry["node"],
            &entry["reported_generation"],
            &entry["log_generation"]
        ),
        (
            &serde_json::json!("node-a"),
            &serde_json::json!(1),
            &serde_json::json!(0)
        ),
        "{status}"
    );
    let warning = entry["warning"].as_str().expect("warning");
    assert!(warning.starts_with(WARNING), "{warning}");
    // Only the two hellos were logged: the observation is not an event.
    assert_eq!(
        ctl.last_sequence().as_u64(),
        sequence.as_u64().map(|s| s + 2),
        "only the hellos are in the log"
    );

    // The CLI: the JSON is the API's, the text carries the warning.
    let out = ctl.cli(&["status", "--json"], None);
    assert_eq!(out.status.code(), Some(0));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(json["ahead_of_log"], status["ahead_of_log"]);
    let out = ctl.cli(&["status"], None);
    assert!(text(&out.stdout).contains(warning), "{}", text(&out.stdout));

    // `/metrics` and the handover report.
    let (code, metrics) = ctl.http("GET", "/metrics", None, b"");
    assert_eq!(code, 200);
    assert!(
        metrics.contains("\nfleetweft_nodes_ahead_of_log 1\n"),
        "{metrics}"
    );
    let report = ctl.get_json("/api/unresolved");
    assert_eq!(report[0]["node"], "node-a", "{report}");
    assert!(
        report[0]["phase"]
            .as_str()
            .is_some_and(|p| p.starts_with("ahead of the log: reports generation 1")),
        "{report}"
    );
    let out = ctl.cli(&["unresolved"], None);
    assert_eq!(out.status.code(), Some(1), "something is unresolved");
    assert!(
        text(&out.stdout).contains("ahead of the log"),
        "{}",
        text(&out.stdout)
    );

    // The daemon log says it once for node-a at generation 1, not per hello.
    let log = daemon_log(&ctl);
    assert_eq!(log.matches(WARNING).count(), 1, "{log}");

    // Restarted, the controller knows it from its log before any agent
    // speaks again (the hellos are durable), and says it once more.
    stop(&mut ctl);
    start(&mut ctl);
    assert_eq!(ctl.status()["nodes_ahead_of_log"], 1);
    assert_eq!(daemon_log(&ctl).matches(WARNING).count(), 2);
}
