//! A release's limits on real agents (issue #24 item 4): a release within
//! its limits rolls out verified and the node's live proof names the
//! limits its agent applied; a release whose app goes over its memory
//! limit is stopped by it on the canary, rolled back, the node serves the
//! previous release again, and no follower is granted.

use crate::tree_rollout::{run_fleet_test, start, write_tree, AGENTS};
use std::path::PathBuf;

/// Takes 400 MiB as it starts, before it listens.
const GREEDY_PREFIX: &str =
    "hog = bytearray(400 << 20)\nfor i in range(0, len(hog), 4096):\n    hog[i] = 1\n";

#[test]
fn limits_are_applied_stated_in_the_proof_and_a_release_over_its_memory_limit_rolls_back() {
    run_fleet_test(limits_body);
}

async fn limits_body(dir: PathBuf) {
    let fleet = start(dir.clone()).await;
    fleet
        .wait("the agents connected", |s| {
            s.nodes[0].connected && s.nodes[1].connected
        })
        .await;
    let tree = dir.join("tree");
    write_tree(&tree, "body { color: black }\n");
    let within = releases::AppLimits {
        memory_bytes_max: Some(256 << 20),
        open_files_max: Some(256),
        ..releases::AppLimits::default()
    };
    let v1 = fleet.sign_and_upload_limited(&tree, "v1", within).await;
    fleet.roll_out("r0", v1, &AGENTS).await;
    let proof: proof::NodeProof = fleet
        .api
        .get("/api/nodes/node-a/proof")
        .await
        .expect("node-a's proof");
    let process = proof.checks.iter().find(|c| c.item == "process");
    let observed = process.and_then(|c| c.observed.clone()).unwrap_or_default();
    assert!(
        observed.contains("; limits: memory 256 MiB (")
            && observed.contains("open files 256 (rlimit RLIMIT_NOFILE)"),
        "the process row names the limits applied: {observed:?}"
    );

    // v2's app goes over its 64 MiB as it starts.
    let app = std::fs::read_to_string(tree.join("app.py")).expect("app");
    std::fs::write(tree.join("app.py"), format!("{GREEDY_PREFIX}{app}")).expect("greedy app");
    let over = releases::AppLimits {
        memory_bytes_max: Some(64 << 20),
        ..releases::AppLimits::default()
    };
    let v2 = fleet.sign_and_upload_limited(&tree, "v2", over).await;
    fleet.canary_rolled_back("r1", v2, &AGENTS).await;
    let answer = fleet.public("node-a").await;
    assert!(
        matches!(&answer, Some((200, Some(id), body)) if *id == v1.to_hex() && body == "hello from v1"),
        "node-a serves v1 again: {answer:?}"
    );
    let log = std::fs::read_to_string(fleet.dir.join("logs/node-a.log")).unwrap_or_default();
    assert!(
        log.contains("stopped by its memory limit"),
        "the agent says why v2 did not start"
    );
}
