//! A format-2 (tree) release reaches and runs on real agents (issue #23
//! item 2): a directory (the hello app, a stylesheet in a subdirectory, a
//! data file of several chunks) is signed, its chunks and manifest are
//! uploaded, and a rollout to two real agents (child processes on
//! loopback, the controller in this process) completes with every op
//! verified and the rollout's proof verified; the tree is on each node's
//! disk. Then v2 changes one file: each agent fetches only that file's
//! chunks (delta by content), counted from the agent's log.

use crate::fleet::loopback::Loopback;
use model::Digest;
use releases::ChunkStore;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long one wait may take.
pub(crate) const STEP: Duration = Duration::from_secs(90);
/// How long the whole test may take.
const TEST: Duration = Duration::from_secs(300);
/// Bytes of the data file: several content-defined chunks (1 MiB average).
const DATA_FILE_BYTES: u32 = 3_000_000;
/// The nodes the rollouts run on: canary first.
pub(crate) const AGENTS: [&str; 2] = ["node-a", "node-b"];

/// Runs `body` on a fresh fleet directory in a 2-worker runtime, within
/// [`TEST`]; removes the directory afterwards (the tree tests share it).
pub(crate) fn run_fleet_test<F: std::future::Future<Output = ()>>(body: impl FnOnce(PathBuf) -> F) {
    let dir = tempfile::tempdir().expect("temp dir").keep();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        tokio::time::timeout(TEST, body(dir.join("fleet")))
            .await
            .expect("the test overran its deadline")
    });
    drop(runtime);
    let _ = std::fs::remove_dir_all(&dir);
}

/// PKI, a signing key, the controller in this process and the agents of
/// [`AGENTS`], each a child process (also used by `tree_resume` and
/// `tree_mirrors`); a wait may take [`STEP`].
pub(crate) async fn start(dir: PathBuf) -> Loopback {
    start_with(dir, "").await
}

/// [`start`], with `extra` appended to the controller's config.
pub(crate) async fn start_with(dir: PathBuf, extra: &str) -> Loopback {
    let agents: Vec<(&str, &[&str])> = AGENTS.iter().map(|n| (*n, &[][..])).collect();
    start_agents(dir, extra, &agents).await
}

/// [`start_with`], starting the agents of `agents` (node name, extra
/// arguments such as `--arch aarch64`) instead of [`AGENTS`].
pub(crate) async fn start_agents(
    dir: PathBuf,
    extra: &str,
    agents: &[(&str, &[&str])],
) -> Loopback {
    let mut fleet = Loopback::lay_out(dir, extra).step(STEP);
    fleet.start_controller_here().await;
    for (node, more) in agents {
        fleet.start_agent(node, more);
    }
    fleet
}

/// Writes the release tree of `version` under `root`: the hello app (its
/// answer names the manifest's version), a stylesheet in a subdirectory
/// whose text is `css`, and a data file of several chunks.
pub(crate) fn write_tree(root: &Path, css: &str) {
    std::fs::create_dir_all(root.join("static")).expect("static dir");
    std::fs::write(root.join("app.py"), demo::HELLO_APP).expect("app");
    std::fs::write(root.join("static/app.css"), css).expect("css");
    let data: Vec<u8> = (0..DATA_FILE_BYTES)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(root.join("model.bin"), data).expect("data");
}

/// What `node`'s agent logged about fetching `release`'s chunks:
/// (fetched, already held).
fn chunk_counts(fleet: &Loopback, node: &str, release: Digest) -> (usize, usize) {
    chunk_counts_in(&fleet.dir.join(format!("logs/{node}.log")), release)
}

/// What the agent logging to `log` said about fetching `release`'s
/// chunks: (fetched, already held).
pub(crate) fn chunk_counts_in(log: &Path, release: Digest) -> (usize, usize) {
    let name = log.display();
    let text = std::fs::read_to_string(log).expect("agent log");
    let prefix = format!("release {release}: ");
    let line = text
        .lines()
        .find_map(|l| l.split_once(&prefix).map(|(_, rest)| rest.to_string()))
        .unwrap_or_else(|| panic!("{name} logged no chunk counts for {release}:\n{text}"));
    let numbers: Vec<usize> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter(|w| !w.is_empty())
        .map(|w| w.parse().expect("a count"))
        .collect();
    (numbers[0], numbers[1])
}

/// How many chunks the file `path` of `manifest` has.
fn chunks_of(manifest: &releases::Manifest, path: &str) -> usize {
    let entry = manifest.entries.iter().find(|e| e.path == path);
    entry.map(|e| e.chunks.len()).expect("the entry")
}

#[test]
fn a_tree_release_rolls_out_to_real_agents_and_v2_fetches_only_what_changed() {
    run_fleet_test(tree_rollout_body);
}

async fn tree_rollout_body(dir: PathBuf) {
    let fleet = start(dir.clone()).await;
    fleet
        .wait("the agents connected", |s| {
            s.nodes[0].connected && s.nodes[1].connected
        })
        .await;
    let tree = dir.join("tree");
    write_tree(&tree, "body { color: black }\n");
    let v1 = fleet.sign_and_upload(&tree, "v1").await;
    fleet.roll_out("r0", v1, &AGENTS).await;
    let store = ChunkStore::open_read_only(&dir.join("signed-v1/chunks")).expect("store");
    let all_chunks = std::fs::read_dir(store.dir()).expect("chunks").count();
    for node in AGENTS {
        let release = fleet.release_dir(node, v1);
        assert_eq!(
            std::fs::read(release.join("static/app.css")).expect("css on the node"),
            b"body { color: black }\n"
        );
        assert_eq!(
            std::fs::metadata(release.join("model.bin"))
                .expect("data")
                .len(),
            u64::from(DATA_FILE_BYTES)
        );
        assert!(release.join("app.py").is_file(), "{node}");
        assert_eq!(chunk_counts(&fleet, node, v1), (all_chunks, 0), "{node}");
    }

    // v2: one file changed. Each agent fetches only its chunk(s).
    write_tree(&tree, "body { color: teal }\n");
    let v2 = fleet.sign_and_upload(&tree, "v2").await;
    fleet.roll_out("r1", v2, &AGENTS).await;
    let signed = v2_manifest(&fleet, v2);
    let changed = chunks_of(&signed, "static/app.css");
    let unique = signed.unique_chunks().len();
    for node in AGENTS {
        assert_eq!(
            chunk_counts(&fleet, node, v2),
            (changed, unique - changed),
            "{node}: only the changed file's chunks are fetched"
        );
        let release = fleet.release_dir(node, v2);
        assert_eq!(
            std::fs::read(release.join("static/app.css")).expect("css"),
            b"body { color: teal }\n"
        );
    }
}

/// The verified manifest of `release` as node-a stored it.
fn v2_manifest(fleet: &Loopback, release: Digest) -> releases::Manifest {
    let path = fleet
        .dir
        .join("node-a-data/releases")
        .join(format!("{}.release", release.to_hex()));
    let bytes = std::fs::read(path).expect("the stored manifest");
    releases::read_unverified(&bytes)
        .expect("a release manifest")
        .manifest
}
