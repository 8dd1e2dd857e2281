//! The console's actions in a real browser (issue #28 items 3 and 6):
//! real controller and agents on loopback, v1 everywhere, then v2 with an
//! approval gate after the canary. Headless Debian chromium
//! (`scripts/a11y.sh --run actions.mjs`) logs in from r1's page, pauses
//! and resumes r1 from it, sees the model's refusal when a stale tab
//! pauses again, and approves; a tab opened before the approval follows
//! r1 to `completed` without reloading. The log then holds exactly what
//! the browser did, and every node serves v2. Screenshots of the steps go
//! to `docs/console/` (`FLEETWEFT_BLESS=1`) or the test's directory.

use crate::fleet::loopback::Loopback;
use demo::NODES;
use std::time::Duration;

/// How long the whole test may take (the browser's steps are bounded by
/// 60 s each inside the script).
const TEST: Duration = Duration::from_secs(420);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_pauses_resumes_and_approves_from_the_browser() {
    tokio::time::timeout(TEST, browser_body())
        .await
        .expect("the test overran its deadline");
}

async fn browser_body() {
    let mut fleet = Loopback::in_temp_dir("");
    fleet.sign_hello(&["v1", "v2"]);
    fleet.start_controller().await;
    for node in NODES {
        fleet.start_agent(node, &[]);
    }
    fleet.upload_hello(&["v1", "v2"]).await;
    fleet
        .wait("every agent connected", |s| {
            s.nodes.iter().all(|n| n.connected)
        })
        .await;
    let (v1, v2) = (fleet.digest("v1"), fleet.digest("v2"));
    fleet.roll_out("r0", v1, &NODES).await;
    let _: serde_json::Value = fleet
        .api
        .post_json(
            "/api/rollouts",
            &serde_json::json!({
                "release": v2.to_hex(), "canary": NODES[0], "followers": &NODES[1..],
                "slots": 1, "approve_after_canary": true,
            }),
        )
        .await
        .expect("start r1");
    fleet
        .wait("r1 waits for approval", |s| {
            s.rollouts
                .iter()
                .any(|r| r.id == "r1" && r.status == "waiting-approval")
        })
        .await;

    let shots = if std::env::var_os("FLEETWEFT_BLESS").is_some() {
        std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/console"))
    } else {
        fleet.dir.join("screenshots")
    };
    std::fs::create_dir_all(&shots).expect("the screenshots' directory");
    let steps = run_browser(&fleet, &shots).await;
    for step in &steps {
        eprintln!("browser: {step}");
    }
    for step in ["login", "pause", "refusal", "resume", "live"] {
        let line = steps.iter().find(|s| s["step"] == step);
        assert!(
            line.is_some_and(|s| s["ok"] == true),
            "browser step {step}: {steps:#?}\ncontroller: {}",
            fleet.logs("controller")
        );
    }

    let events = fleet.event_text().await;
    for said in [
        "rollout r1 paused (operator)",
        "rollout r1 resumed",
        "rollout r1 approved after canary",
        "rollout r1 completed",
    ] {
        assert!(events.contains(said), "{said}: {events}");
    }
    for node in NODES {
        let answer = fleet.public(node).await.expect("the route answers");
        assert_eq!(answer.1.as_deref(), Some(&*v2.to_hex()), "{node}");
    }
    fleet.verify_log().await;
}

/// Runs `scripts/a11y/actions.mjs` against the fleet's console; its JSON
/// lines, one per step.
async fn run_browser(fleet: &Loopback, shots: &std::path::Path) -> Vec<serde_json::Value> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/a11y.sh");
    let out = tokio::process::Command::new("bash")
        .arg(script)
        .args(["--run", "actions.mjs", &fleet.api_url, &fleet.token, "r1"])
        .arg(shots)
        .output()
        .await
        .expect("running scripts/a11y.sh --run actions.mjs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "actions.mjs: {stdout}\n{stderr}");
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|_| panic!("a JSON line: {l}\n{stderr}")))
        .collect()
}
