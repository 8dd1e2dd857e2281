//! 20 simulated agents against a real controller process: a rollout that
//! completes with every op verified, and one with wrong answers that ends
//! paused. Needs `target/release/fleetweft` (the controller) next to the
//! simulator: `cargo build --release -p runtime --bin fleetweft` first
//! (`scripts/fleetsim.sh` does).

use std::path::PathBuf;
use std::process::Command;

const AGENTS: &str = "20";

fn simulator() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_fleetweft-fleetsim"))
}

/// Run the simulator with `extra` arguments; its JSON report.
fn run(extra: &[&str]) -> serde_json::Value {
    let exe = simulator();
    let controller = exe.with_file_name("fleetweft");
    assert!(
        controller.exists(),
        "{} is missing: run `cargo build --release -p runtime --bin fleetweft` first",
        controller.display()
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let pki = dir.path().join("pki");
    let work = dir.path().join("work");
    let output = Command::new(&exe)
        .args([
            "--agents",
            AGENTS,
            "--slots",
            "5",
            "--timeout-s",
            "120",
            "--json",
        ])
        .arg("--pki-dir")
        .arg(&pki)
        .arg("--dir")
        .arg(&work)
        .args(extra)
        .output()
        .expect("running the simulator");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "simulator failed: {stderr}");
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("not a JSON report ({e}): {stderr}"))
}

#[test]
fn twenty_agents_complete_with_every_op_verified() {
    let r = run(&["--switch-ms", "5..30", "--expect", "completed"]);
    let rollout = &r["rollout"];
    assert_eq!(rollout["status"], "completed", "{r:#}");
    assert_eq!(rollout["ops"], 20, "{r:#}");
    assert_eq!(rollout["outcomes"]["verified"], 20, "{r:#}");
    assert_eq!(
        rollout["outcomes"].as_object().map(|o| o.len()),
        Some(1),
        "{r:#}"
    );
    assert_eq!(rollout["unresolved"], 0, "{r:#}");
    // The controller judged the routes the embedded server answers.
    for (node, verdict) in r["proofs"].as_object().expect("proofs") {
        assert_eq!(verdict, "verified", "{node}: {r:#}");
    }
    assert_eq!(r["commit_latency"]["count"], 20, "{r:#}");
    assert_eq!(r["agents_saw"]["fetches"], 20, "{r:#}");
    let restart = &r["restart"];
    assert_eq!(
        restart["log_sequence_before"], restart["log_sequence_after"],
        "{r:#}"
    );
    assert!(r["controller"]["peak_rss_kib"].as_u64() > Some(0), "{r:#}");
    assert!(r["events"]["in_log"].as_u64() > Some(20), "{r:#}");
}

#[test]
fn wrong_answers_end_the_rollout_paused() {
    let r = run(&["--wrong", "10%", "--expect", "paused"]);
    let rollout = &r["rollout"];
    assert_eq!(r["faults"]["wrong"], 2, "{r:#}");
    assert_eq!(rollout["status"], "paused", "{r:#}");
    // Today's budget is 0: the first wrong follower is restored, proven,
    // and the rollout stops; the second is never granted.
    assert_eq!(rollout["outcomes"]["rolled-back"], 1, "{r:#}");
    assert!(rollout["ops"].as_u64() < Some(20), "{r:#}");
    assert_eq!(r["agents_saw"]["restores"], 1, "{r:#}");
    // The report waits for the ops granted before the pause: none is open.
    assert!(rollout["outcomes"].get("open").is_none(), "{r:#}");
    let failed = r["proofs"]
        .as_object()
        .expect("proofs")
        .values()
        .filter(|v| *v == "failed")
        .count();
    assert_eq!(failed, 1, "the restored wrong node's proof fails: {r:#}");
}
