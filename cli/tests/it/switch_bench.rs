//! `fleetweft-switch-bench`, small (issue #24 item 3): the benchmark's
//! figures are reported by hand (`docs/performance.md`); this checks only
//! what must be zero whatever the machine: no request fails while a
//! healthy rollout moves three real routes under load, no route answers
//! the old release after the new one, and a canary that answers wrongly
//! never reaches the followers' routes.

use crate::binaries::agent_binary;
use std::process::Command;

#[test]
fn a_rollout_under_load_fails_no_request_and_a_wrong_canary_stays_on_its_node() {
    // Built with every binary of the workspace, beside the agent.
    let bench = agent_binary().with_file_name("fleetweft-switch-bench");
    let out = Command::new(&bench)
        .args(["--json", "--rate", "50", "--quiet-s", "2", "--after-s", "1"])
        .output()
        .expect("run fleetweft-switch-bench");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let f: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert!(f["requests"].as_u64().is_some_and(|n| n > 100), "{f}");
    assert_eq!(f["failed"], 0, "{f}");
    assert_eq!(f["switched_routes"], 3, "{f}");
    assert_eq!(f["old_answers_after_switch"], 0, "{f}");
    assert_eq!(f["proof"], "verified", "{f}");
    assert_eq!(f["follower_failures_in_canary_phase"], 0, "{f}");
    assert_eq!(f["canary_other_failures"], 0, "{f}");
}
