//! Seed 003's `stale` on real agents (issue #24 item 1): v1 then v2 are
//! rolled out over the demo's three nodes, then v1's signed app is swapped
//! in behind node-c's v2 route and its process killed, so the supervisor
//! starts v1's code under v2's name. The live proof (API and `fleetweft
//! proof`) says `stale`, `older_release_serving`, naming v1 by version and
//! digest; the rollout's proof is stale too. An app file that answers the
//! same but is no release's stays `failed`, `app_file_mismatch`, as before.

use crate::fleet::loopback::{poll, Loopback};
use demo::NODES;
use model::Digest;
use proof::{NodeProof, ReasonCode, Verdict};
use std::path::Path;
use std::time::Duration;

/// How long one wait may take.
const STEP: Duration = Duration::from_secs(60);
/// How long the whole test may take: two rollouts, two swaps and the
/// proofs take about 5 s alone; CI's run overran 240 s once (stop 41,
/// the steps' own waits not yet timed), so the waits now print their
/// durations and the bound leaves room for every step's.
const TEST: Duration = Duration::from_secs(420);

/// Pids of node-c's app processes running from `dir` (their working
/// directory is the release directory).
fn app_pids(dir: &Path) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let pid = e.file_name().to_str()?.parse::<i32>().ok()?;
            let cwd = std::fs::read_link(e.path().join("cwd")).ok()?;
            (cwd == dir).then_some(pid)
        })
        .collect()
}

/// Writes `app` over node-c's installed v2 app file, behind the agent's
/// back, and kills the running app so the supervisor starts the file now
/// there; waits until the route gives v1's answer.
async fn swap_in(fleet: &Loopback, v2: Digest, app: &[u8]) {
    let dir = fleet.release_dir("node-c", v2);
    let dir = dir.canonicalize().unwrap_or(dir);
    let pids = app_pids(&dir);
    assert!(
        !pids.is_empty(),
        "node-c's v2 app runs from {}",
        dir.display()
    );
    std::fs::write(dir.join("app.py"), app).expect("overwrite v2's app file");
    for pid in pids {
        // SAFETY: kill(2) of an app process this test's fleet started.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }
    poll("node-c's route gives v1's answer", STEP, || async {
        let answer = fleet.public("node-c").await;
        matches!(answer, Some((200, _, body)) if body == "hello from v1")
    })
    .await;
}

async fn node_proof(fleet: &Loopback) -> NodeProof {
    fleet
        .api
        .get("/api/nodes/node-c/proof")
        .await
        .expect("node-c's proof")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_release_swapped_in_behind_the_route_is_stale_naming_it() {
    tokio::time::timeout(TEST, older_release_body())
        .await
        .expect("the test overran its deadline");
}

async fn older_release_body() {
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
    fleet.roll_out("r1", v2, &NODES).await;

    // v1's signed app, exactly as node-c installed it for r0.
    let v1_app = std::fs::read(fleet.release_dir("node-c", v1).join("app.py")).expect("v1's app");
    swap_in(&fleet, v2, &v1_app).await;
    let p = node_proof(&fleet).await;
    assert_eq!(
        (p.verdict, p.reason),
        (Verdict::Stale, Some(ReasonCode::OlderReleaseServing)),
        "{p:#?}"
    );
    let named = format!("; v1 ({}) serves in its place", &v1.to_hex()[..12]);
    assert!(p.summary.ends_with(&named), "{}", p.summary);
    let artifact = p.checks.iter().find(|c| c.item == "artifact digest");
    let observed = artifact
        .and_then(|c| c.observed.clone())
        .unwrap_or_default();
    assert_eq!(
        observed,
        format!("{} with the app file of {} (v1)", v2.to_hex(), v1.to_hex()),
        "{p:#?}"
    );

    // `fleetweft proof` says the same, and exits 1: not verified.
    let (code, out) = fleet.cli_code(&["proof", "node-c", "--json"]);
    assert_eq!(code, Some(1), "{out}");
    let cli: NodeProof = serde_json::from_str(&out).expect("proof JSON");
    assert_eq!(cli.reason, Some(ReasonCode::OlderReleaseServing), "{out}");
    assert!(cli.summary.ends_with(&named), "{out}");
    // The rollout is as good as its worst node: stale.
    let r1: proof::RolloutProof = fleet
        .api
        .get("/api/rollouts/r1/proof")
        .await
        .expect("r1's proof");
    assert_eq!(r1.verdict, Verdict::Stale, "{r1:#?}");

    // Recorded, the look is drift; the cached proof has no answer judged
    // by v1's own spec and stays failed, as before.
    let _: serde_json::Value = fleet
        .api
        .post_json("/api/nodes/node-c/observe", &serde_json::json!({}))
        .await
        .expect("observe node-c");
    let cached: NodeProof = fleet
        .api
        .get("/api/nodes/node-c/proof?cached=true")
        .await
        .expect("cached proof");
    assert!(cached.drifted, "{cached:#?}");
    assert_eq!(
        (cached.verdict, cached.reason),
        (Verdict::Failed, Some(ReasonCode::AppFileMismatch)),
        "{cached:#?}"
    );

    // The same answer from an app file that is no release's: failed.
    let mut altered = v1_app.clone();
    altered.extend_from_slice(b"\n# no release's app\n");
    swap_in(&fleet, v2, &altered).await;
    let p = node_proof(&fleet).await;
    assert_eq!(
        (p.verdict, p.reason),
        (Verdict::Failed, Some(ReasonCode::AppFileMismatch)),
        "{p:#?}"
    );
    fleet.verify_log().await;
}
