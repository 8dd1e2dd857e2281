//! Issue #26: the daemon writes snapshots of its state as `[log]` says,
//! starts from the newest plus the events after it, and answers exactly as
//! before the restart, "since when" of the handover report included (the
//! annex); `fleetweft log verify --deep` compares every snapshot with the
//! fold from genesis.

use std::process::Command;

use crate::api_harness::{s, Controller};

/// Enough enrollments to cross `snapshot_every_events` more than once.
const EXTRA_NODES: usize = 150;

fn enroll(ctl: &Controller, i: usize) {
    let body = serde_json::json!({
        "name": format!("edge-{i:03}"),
        "public": format!("127.0.0.1:{}", 20_000 + i),
    });
    let (code, text) = ctl.post_json("/api/nodes", &body);
    assert_eq!(code, 200, "enroll edge-{i:03}: {text}");
}

fn controller_log(ctl: &Controller) -> String {
    std::fs::read_to_string(ctl._dir.path().join("controller.log")).unwrap_or_default()
}

#[test]
fn a_restart_from_a_snapshot_answers_as_before_and_verify_deep_agrees() {
    let mut ctl = Controller::start_with(
        "",
        "\n[log]\nsnapshot_every_events = 64\nsnapshots_keep = 2\n",
    );
    for i in 0..EXTRA_NODES {
        enroll(&ctl, i);
    }
    // An op that goes UNKNOWN (its canary never connects): the handover
    // report says since which entry, from the log index.
    let out = ctl.cli(
        &[
            "rollout",
            "start",
            "--bundle",
            &s(&ctl.bundle),
            "--canary",
            "node-c",
            "--slots",
            "1",
            "--token-file",
            &s(&ctl.token_file),
        ],
        None,
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    ctl.wait_for_unknown();
    // More events after the UNKNOWN, so the newest snapshot covers it.
    for i in EXTRA_NODES..EXTRA_NODES + 70 {
        enroll(&ctl, i);
    }
    let before_unresolved = ctl.http("GET", "/api/unresolved", None, b"").1;
    let before_nodes = ctl.all_pages("/api/nodes");
    let before_status = ctl.status();
    assert!(
        controller_log(&ctl).contains("snapshot written"),
        "{}",
        controller_log(&ctl)
    );

    ctl.restart();
    let log = controller_log(&ctl);
    assert!(
        log.contains("a snapshot of the first"),
        "the restart did not start from a snapshot: {log}"
    );
    assert_eq!(
        ctl.http("GET", "/api/unresolved", None, b"").1,
        before_unresolved
    );
    assert_eq!(ctl.all_pages("/api/nodes"), before_nodes);
    assert_eq!(ctl.status()["rollouts"], before_status["rollouts"]);

    // Offline, every snapshot kept is compared with the fold from genesis.
    let _ = ctl.child.kill();
    let _ = ctl.child.wait();
    let data = ctl._dir.path().join("data");
    let out = Command::new(env!("CARGO_BIN_EXE_fleetweft"))
        .args(["log", "verify", "--deep", "--data"])
        .arg(&data)
        .output()
        .expect("run fleetweft log verify --deep");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("snapshots:     2 agree with the fold from genesis"),
        "{stdout}"
    );
}
