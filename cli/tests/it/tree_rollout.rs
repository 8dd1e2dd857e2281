//! A format-2 (tree) release reaches and runs on real agents (issue #23
//! item 2): a directory (the hello app, a stylesheet in a subdirectory, a
//! data file of several chunks) is signed, its chunks and manifest are
//! uploaded, and a rollout to two real agents (child processes on
//! loopback, the controller in this process) completes with every op
//! verified and the rollout's proof verified; the tree is on each node's
//! disk. Then v2 changes one file: each agent fetches only that file's
//! chunks (delta by content), counted from the agent's log.

use crate::fleet::loopback::Loopback;
use api::client::FleetView;
use model::Digest;
use protocol::bundle::ProbeSpec;
use releases::{ChunkStore, ReleaseFields};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long one wait may take.
pub(crate) const STEP: Duration = Duration::from_secs(90);
/// How long the whole test may take.
const TEST: Duration = Duration::from_secs(300);
/// Bytes of the data file: several content-defined chunks (1 MiB average).
const DATA_FILE_BYTES: u32 = 3_000_000;
/// The nodes the rollouts run on: canary first.
pub(crate) const AGENTS: [&str; 2] = ["node-a", "node-b"];

/// The controller in this process and the agents of [`AGENTS`], each a
/// child process (also used by `tree_resume` and `tree_mirrors`).
pub(crate) struct Fleet {
    /// The test kit's loopback fleet (`fleet::loopback`): directory,
    /// signing key, API client, the agent processes by node name.
    pub(crate) kit: Loopback,
}

impl std::ops::Deref for Fleet {
    type Target = Loopback;
    fn deref(&self) -> &Loopback {
        &self.kit
    }
}

impl std::ops::DerefMut for Fleet {
    fn deref_mut(&mut self) -> &mut Loopback {
        &mut self.kit
    }
}

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

/// PKI, a signing key, the controller in this process and the agents.
pub(crate) async fn start(dir: PathBuf) -> Fleet {
    start_with(dir, "").await
}

/// [`start`], with `extra` appended to the controller's config.
pub(crate) async fn start_with(dir: PathBuf, extra: &str) -> Fleet {
    let agents: Vec<(&str, &[&str])> = AGENTS.iter().map(|n| (*n, &[][..])).collect();
    start_agents(dir, extra, &agents).await
}

/// [`start_with`], starting the agents of `agents` (node name, extra
/// arguments such as `--arch aarch64`) instead of [`AGENTS`].
pub(crate) async fn start_agents(dir: PathBuf, extra: &str, agents: &[(&str, &[&str])]) -> Fleet {
    let mut kit = Loopback::lay_out(dir, extra);
    kit.start_controller_here().await;
    for (node, more) in agents {
        kit.start_agent(node, more);
    }
    Fleet { kit }
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

impl Fleet {
    /// Signs `tree` as `version` (chunks into `out/chunks`), uploads every
    /// chunk and then the manifest; returns the release digest.
    pub(crate) async fn sign_and_upload(&self, tree: &Path, version: &str) -> Digest {
        self.sign_and_upload_arches(tree, &[], version).await
    }

    /// [`Fleet::sign_and_upload`] with a tree per architecture
    /// (`arch_trees`: architecture, its directory) beside the common `tree`.
    pub(crate) async fn sign_and_upload_arches(
        &self,
        tree: &Path,
        arch_trees: &[(model::platform::Arch, PathBuf)],
        version: &str,
    ) -> Digest {
        let out = self.dir.join(format!("signed-{version}"));
        let (store, _) = ChunkStore::open(&out.join("chunks")).expect("chunk dir");
        let fields = ReleaseFields {
            name: "hello-tree".into(),
            version: version.into(),
            run: vec!["python3".into(), "app.py".into()],
            probe: ProbeSpec {
                path: "/hello".into(),
                expect_status: 200,
                expect_body: format!("hello from {version}"),
                expect_json: None,
            },
            limits: Default::default(),
        };
        let mut sink = releases::tree::store_sink(&store);
        let manifest =
            releases::tree::sign_dir_arches(&self.signing, fields, tree, arch_trees, &mut sink)
                .expect("sign");
        std::fs::write(out.join(releases::EXPORT_MANIFEST_FILE), &manifest).expect("manifest");
        for entry in std::fs::read_dir(store.dir()).expect("chunks") {
            let entry = entry.expect("chunk");
            let name = entry.file_name().to_string_lossy().into_owned();
            let bytes = std::fs::read(entry.path()).expect("chunk bytes");
            let _: serde_json::Value = self
                .api
                .put_bytes(&format!("/api/chunks/{name}"), bytes)
                .await
                .expect("upload a chunk");
        }
        let _: serde_json::Value = self
            .api
            .post_bytes("/api/releases", manifest.clone())
            .await
            .expect("upload the manifest");
        releases::release_digest(&manifest)
    }

    /// Starts a rollout of `release` over [`AGENTS`] and waits until it
    /// completes with every op verified and its proof verified.
    pub(crate) async fn roll_out(&self, id: &str, release: Digest) {
        let _: serde_json::Value = self
            .api
            .post_json(
                "/api/rollouts",
                &serde_json::json!({
                    "release": release.to_hex(),
                    "canary": AGENTS[0],
                    "followers": &AGENTS[1..],
                    "slots": 1,
                }),
            )
            .await
            .expect("start the rollout");
        self.wait(&format!("{id} completed"), |s| {
            s.rollouts
                .iter()
                .any(|r| r.id == id && r.status == "completed")
        })
        .await;
        let view = self.api.fleet_view().await.expect("view");
        let ops: Vec<_> = view.ops.iter().filter(|o| o.rollout == id).collect();
        assert_eq!(ops.len(), AGENTS.len(), "{ops:?}");
        for op in ops {
            assert_eq!(op.outcome.as_deref(), Some("verified"), "{op:?}");
        }
        let proof: proof::RolloutProof = self
            .api
            .get(&format!("/api/rollouts/{id}/proof"))
            .await
            .expect("the rollout's proof");
        assert_eq!(proof.verdict, proof::Verdict::Verified, "{proof:#?}");
    }

    pub(crate) async fn wait(&self, what: &str, done: impl Fn(&FleetView) -> bool) {
        let deadline = Instant::now() + STEP;
        loop {
            if let Ok(s) = self.api.fleet_view().await {
                if done(&s) {
                    return;
                }
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for: {what} (logs in {})",
                self.dir.join("logs").display()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The release directory of `release` on `node`'s disk.
    pub(crate) fn release_dir(&self, node: &str, release: Digest) -> PathBuf {
        self.dir
            .join(format!("{node}-data"))
            .join("releases")
            .join(release.to_hex())
    }

    /// What `node`'s agent logged about fetching `release`'s chunks:
    /// (fetched, already held).
    fn chunk_counts(&self, node: &str, release: Digest) -> (usize, usize) {
        chunk_counts_in(&self.dir.join(format!("logs/{node}.log")), release)
    }
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
    fleet.roll_out("r0", v1).await;
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
        assert_eq!(fleet.chunk_counts(node, v1), (all_chunks, 0), "{node}");
    }

    // v2: one file changed. Each agent fetches only its chunk(s).
    write_tree(&tree, "body { color: teal }\n");
    let v2 = fleet.sign_and_upload(&tree, "v2").await;
    fleet.roll_out("r1", v2).await;
    let signed = v2_manifest(&fleet, v2);
    let changed = chunks_of(&signed, "static/app.css");
    let unique = signed.unique_chunks().len();
    for node in AGENTS {
        assert_eq!(
            fleet.chunk_counts(node, v2),
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
fn v2_manifest(fleet: &Fleet, release: Digest) -> releases::Manifest {
    let path = fleet
        .dir
        .join("node-a-data/releases")
        .join(format!("{}.release", release.to_hex()));
    let bytes = std::fs::read(path).expect("the stored manifest");
    releases::read_unverified(&bytes)
        .expect("a release manifest")
        .manifest
}
