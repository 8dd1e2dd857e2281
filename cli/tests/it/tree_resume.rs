//! A tree release survives its agent being SIGKILLed in the middle of the
//! fetch (issue #23 item 3, end to end): a real agent process is killed
//! once its chunk store holds half of a release of about 100 chunks, and
//! started again; it resumes from the chunks it holds (each re-hashed
//! first), fetches only the rest, and the rollout completes with its proof
//! verified. The chunks in flight at the kill resume after the bytes the
//! agent kept of them (`DATA/chunks-partial`, `FetchChunkFrom`), so what
//! was sent twice is at most one chunk (the bound), counted from
//! the controller's egress counters (`/metrics`), which count bytes as
//! they are handed to QUIC: what sat in QUIC's buffers at the kill
//! counts as sent twice.

use crate::binaries::agent_binary;
use crate::fleet::loopback::Loopback;
use crate::tree_rollout::{chunk_counts_in, start, write_tree};
use agent::daemon::CHUNK_FETCHES_IN_FLIGHT_MAX;
use model::Digest;
use releases::limits::{CHUNK_BYTES_MAX, MIB};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Bytes of the large file: about 100 chunks of 1 MiB on average, so half
/// the fetch is a moment the test can catch.
const LARGE_FILE_BYTES: u64 = 100 * MIB;
/// The node killed mid-fetch (the canary of a rollout of one node).
const NODE: &str = "node-a";

/// Bytes of the complete chunks in a chunk store (temporary files, whose
/// names start with `.`, are partial chunks: not counted).
fn held(chunks: &Path) -> (usize, u64) {
    let Ok(entries) = std::fs::read_dir(chunks) else {
        return (0, 0);
    };
    let sizes: Vec<u64> = entries
        .flatten()
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .filter_map(|e| e.metadata().ok().map(|m| m.len()))
        .collect();
    (sizes.len(), sizes.iter().sum())
}

/// The controller's chunk egress counters: (chunks, bytes).
async fn served(fleet: &Loopback) -> (u64, u64) {
    let text = fleet.api.get_text("/metrics").await.expect("/metrics");
    let counter = |name: &str| -> u64 {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .unwrap_or_else(|| panic!("/metrics has no {name}:\n{text}"))
            .trim()
            .parse()
            .expect("a counter")
    };
    (
        counter("fleetweft_chunks_served_total "),
        counter("fleetweft_artifact_bytes_served_total{kind=\"chunk\"} "),
    )
}

#[test]
fn an_agent_killed_at_half_its_fetch_resumes_from_the_chunks_it_holds() {
    super::tree_rollout::run_fleet_test(resume_body);
}

async fn resume_body(dir: PathBuf) {
    let mut fleet = start(dir.clone()).await;
    fleet
        .wait("the agents connected", |s| s.nodes[0].connected)
        .await;
    let tree = dir.join("tree");
    write_tree(&tree, "body { color: black }\n");
    let large = std::fs::File::create(tree.join("large.bin")).expect("large file");
    let mut writer = std::io::BufWriter::new(large);
    std::io::copy(
        &mut releases::sample::Noise::new(7, LARGE_FILE_BYTES),
        &mut writer,
    )
    .expect("large file bytes");
    drop(writer);
    let v1 = fleet.sign_and_upload(&tree, "v1").await;
    let manifest = releases::read_unverified(
        &std::fs::read(dir.join("signed-v1/manifest")).expect("manifest"),
    )
    .expect("a manifest")
    .manifest;
    let unique = manifest.unique_chunks();
    let unique_bytes: u64 = unique.iter().map(|c| u64::from(c.len)).sum();
    let before = served(&fleet).await;

    let _: serde_json::Value = fleet
        .api
        .post_json(
            "/api/rollouts",
            &serde_json::json!({"release": v1.to_hex(), "canary": NODE, "followers": [], "slots": 1}),
        )
        .await
        .expect("start the rollout");
    let chunks = dir.join(format!("{NODE}-data/chunks"));
    let (held_at_kill, _) = kill_at_half(&mut fleet, &chunks, unique_bytes).await;
    let data_dir = dir.join(format!("{NODE}-data"));
    let kept_at_kill = partial_bytes_in_flight(&data_dir, &chunks);
    assert!(
        held_at_kill < unique.len(),
        "the fetch finished before the kill: nothing to resume (make the file larger)"
    );

    let config = dir.join(format!("agent-{NODE}.toml"));
    let log = dir.join(format!("logs/{NODE}-restarted.log"));
    let args = ["--config".to_string(), config.display().to_string()];
    let restarted = demo::spawn(&agent_binary(), &args, &log).expect("restart the agent");
    fleet.children.insert(NODE.to_string(), restarted);
    fleet
        .wait("r0 completed", |s| {
            s.rollouts
                .iter()
                .any(|r| r.id == "r0" && r.status == "completed")
        })
        .await;
    check_resumed(&fleet, v1, &log, held_at_kill, unique.len()).await;
    let text = std::fs::read_to_string(&log).expect("the restarted agent's log");
    if kept_at_kill > 0 {
        assert!(
            text.contains("kept bytes"),
            "{kept_at_kill} bytes were kept of chunks in flight, and no fetch resumed after them"
        );
    }
    assert_eq!(
        partial_bytes(&data_dir),
        0,
        "partial chunks left once the release is staged"
    );
    let (chunks_served, bytes_served) = served(&fleet).await;
    let refetched_chunks = chunks_served - before.0 - unique.len() as u64;
    let refetched_bytes = bytes_served - before.1 - unique_bytes;
    assert!(
        refetched_chunks <= CHUNK_FETCHES_IN_FLIGHT_MAX as u64,
        "{refetched_chunks} chunks fetched twice: more than were in flight"
    );
    assert!(
        refetched_bytes <= u64::from(CHUNK_BYTES_MAX),
        "{refetched_bytes} bytes sent twice: more than one chunk"
    );
    let tree_on_node = fleet.release_dir(NODE, v1);
    let size = std::fs::metadata(tree_on_node.join("large.bin")).expect("large file on the node");
    assert_eq!(size.len(), LARGE_FILE_BYTES);
}

/// Waits until the agent's store holds half the release, SIGKILLs it and
/// returns what its store held then: (chunks, bytes).
async fn kill_at_half(fleet: &mut Loopback, chunks: &Path, unique_bytes: u64) -> (usize, u64) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while held(chunks).1 < unique_bytes / 2 {
        assert!(
            Instant::now() < deadline,
            "the agent never held half the release"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    fleet.kill(NODE).await;
    held(chunks)
}

/// Bytes kept of chunks in flight (`DATA/chunks-partial`).
fn partial_bytes(data_dir: &Path) -> u64 {
    let dir = data_dir.join(agent::staging::tree::PARTIAL_CHUNKS_DIR);
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .filter_map(|e| e.metadata().ok().map(|m| m.len()))
        .sum()
}

/// Bytes kept of chunks that were in flight at the kill: partial files
/// whose chunk is not also stored whole. A kill between storing a chunk
/// and forgetting its partial bytes leaves a partial file beside the
/// whole chunk; the restarted agent holds that chunk, never fetches it,
/// and so never resumes after those bytes (the file goes once the
/// release is staged).
fn partial_bytes_in_flight(data_dir: &Path, chunks: &Path) -> u64 {
    let dir = data_dir.join(agent::staging::tree::PARTIAL_CHUNKS_DIR);
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .filter(|e| !chunks.join(e.file_name()).is_file())
        .filter_map(|e| e.metadata().ok().map(|m| m.len()))
        .sum()
}

/// The restarted agent re-used every chunk its store held at the kill and
/// fetched the rest; the rollout's op and proof are verified.
async fn check_resumed(
    fleet: &Loopback,
    v1: Digest,
    log: &Path,
    held_at_kill: usize,
    unique: usize,
) {
    let (fetched, held) = chunk_counts_in(log, v1);
    assert!(
        held >= held_at_kill,
        "{held} chunks re-used after the restart, {held_at_kill} were held at the kill"
    );
    assert_eq!(fetched + held, unique, "every chunk fetched or held once");
    let view = fleet.api.fleet_view().await.expect("view");
    let op = view
        .ops
        .iter()
        .find(|o| o.rollout == "r0")
        .expect("r0's op");
    assert_eq!(op.outcome.as_deref(), Some("verified"), "{op:?}");
    let proof: proof::RolloutProof = fleet
        .api
        .get("/api/rollouts/r0/proof")
        .await
        .expect("the rollout's proof");
    assert_eq!(proof.verdict, proof::Verdict::Verified, "{proof:#?}");
}
