//! One release for every architecture (issue #24 item 5), on real agents:
//! node-a declares `aarch64`, node-b `x86_64` (`fleetweft-agent --arch`),
//! node-c never connects. The controller records each declared
//! architecture as the node's `arch` label (API and `fleetweft nodes`).
//! One release with an `aarch64` and an `x86_64` tree rolls out to both
//! connected nodes, each op verified and the proof verified, and each node
//! holds the common files with its own architecture's tree and not the
//! other's. A release with only an `x86_64` tree over node-a is refused
//! before anything is granted, naming node-a and its architecture; a plan
//! over node-c, whose architecture is not known, is refused naming it.

use crate::fleet::loopback::Loopback;
use crate::tree_rollout::{run_fleet_test, start_agents, AGENTS};
use model::platform::Arch;
use std::path::{Path, PathBuf};

/// The file each architecture's tree carries, with its own text.
const ARCH_FILE: &str = "bin/arch.txt";

fn arch_tree(root: &Path, arch: Arch) -> PathBuf {
    let dir = root.join(format!("tree-{arch}"));
    std::fs::create_dir_all(dir.join("bin")).expect("arch dir");
    std::fs::write(dir.join(ARCH_FILE), format!("built for {arch}\n")).expect("arch file");
    dir
}

fn common_tree(root: &Path) -> PathBuf {
    let dir = root.join("tree-common");
    std::fs::create_dir_all(&dir).expect("common dir");
    std::fs::write(dir.join("app.py"), demo::HELLO_APP).expect("app");
    dir
}

#[test]
fn a_mixed_fleet_rolls_one_release_with_a_tree_per_architecture() {
    run_fleet_test(mixed_fleet_body);
}

async fn mixed_fleet_body(dir: PathBuf) {
    let agents: [(&str, &[&str]); 2] = [
        ("node-a", &["--arch", "aarch64"]),
        ("node-b", &["--arch", "x86_64"]),
    ];
    let fleet = start_agents(dir.clone(), "", &agents).await;
    fleet
        .wait("both agents said their architecture", |s| {
            s.nodes[0].arch.as_deref() == Some("aarch64")
                && s.nodes[1].arch.as_deref() == Some("x86_64")
                && s.nodes[0].connected
                && s.nodes[1].connected
        })
        .await;
    let view = fleet.api.fleet_view().await.expect("view");
    assert_eq!(view.nodes[2].arch, None, "node-c never said");
    assert_eq!(view.nodes[0].os.as_deref(), Some(std::env::consts::OS));
    nodes_table_shows_arch(&fleet).await;

    let common = common_tree(&dir);
    let (arm, x86) = (
        arch_tree(&dir, Arch::Aarch64),
        arch_tree(&dir, Arch::X86_64),
    );
    let both = [(Arch::Aarch64, arm), (Arch::X86_64, x86.clone())];
    let v1 = fleet.sign_and_upload_arches(&common, &both, "v1").await;
    fleet.roll_out("r0", v1, &AGENTS).await;
    for (node, arch, other) in [
        ("node-a", Arch::Aarch64, Arch::X86_64),
        ("node-b", Arch::X86_64, Arch::Aarch64),
    ] {
        let release = fleet.release_dir(node, v1);
        assert!(release.join("app.py").is_file(), "{node}: the common files");
        let text = std::fs::read_to_string(release.join(ARCH_FILE)).expect("arch file");
        assert_eq!(text, format!("built for {arch}\n"), "{node}: its own tree");
        assert!(!text.contains(other.name()), "{node}: not the other's tree");
    }

    let x86_only = fleet
        .sign_and_upload_arches(&common, &[(Arch::X86_64, x86)], "v2")
        .await;
    let refused = start_rollout(&fleet, x86_only, "node-b", &["node-a"]).await;
    assert!(
        refused.contains("409") && refused.contains("node-a (aarch64)"),
        "{refused}"
    );
    assert!(
        !refused.contains("node-b"),
        "node-b has its tree: {refused}"
    );
    let refused = start_rollout(&fleet, v1, "node-c", &[]).await;
    assert!(
        refused.contains("node-c (architecture unknown)"),
        "{refused}"
    );
    // Nothing was recorded: one rollout, its two ops.
    let view = fleet.api.fleet_view().await.expect("view");
    assert_eq!(view.rollouts.len(), 1, "{:?}", view.rollouts);
    assert_eq!(view.ops.len(), 2, "{:?}", view.ops);
}

/// Starts a rollout expected to be refused; returns the error's text.
async fn start_rollout(
    fleet: &Loopback,
    release: model::Digest,
    canary: &str,
    followers: &[&str],
) -> String {
    let started: Result<serde_json::Value, _> = fleet
        .api
        .post_json(
            "/api/rollouts",
            &serde_json::json!({
                "release": release.to_hex(),
                "canary": canary,
                "followers": followers,
                "slots": 1,
            }),
        )
        .await;
    started.expect_err("the rollout is refused").to_string()
}

/// `fleetweft nodes` has an ARCH column with each node's label.
async fn nodes_table_shows_arch(fleet: &Loopback) {
    let page: api::view::Page<api::view::NodeDto> =
        fleet.api.get("/api/nodes").await.expect("nodes");
    let text = cli::ops::render_nodes(&page);
    let header = text.lines().next().expect("a header");
    assert!(header.contains("ARCH"), "{text}");
    let row = |node: &str| {
        text.lines()
            .find(|l| l.starts_with(node))
            .unwrap_or_else(|| panic!("no row for {node}:\n{text}"))
            .to_string()
    };
    assert!(row("node-a").contains("aarch64"), "{text}");
    assert!(row("node-b").contains("x86_64"), "{text}");
}
