//! Scenario 24 (issue #23): a directory release on three real agents, the
//! operator's commands end to end (`bundle sign --dir`, `bundle upload`,
//! `bundle export`). The tree is a Python package of several modules, a
//! static asset directory and a 200 MiB data file.
//!
//! - node-a (the canary, no mirror) fetches from the controller and is
//!   SIGKILLed once it holds half the release; started again it resumes,
//!   and the controller sends at most one chunk twice (its chunk egress
//!   counter against the release's distinct bytes).
//! - node-b and node-c are labelled `site=mirrored`, whose mirrors are, in
//!   order, one that flips a byte of every chunk, one that stalls after
//!   1,000 bytes, and a good one: both bad ones are detected (each op's
//!   sources show their failures) and every chunk comes from the good one,
//!   none from the controller.
//! - t2 changes one file: each node fetches only that file's chunks (the
//!   agent's `N chunk(s) fetched, M already held` line).
//!
//! Every rollout's proof is verified, and each op names its sources.

use super::*;
use crate::fleet::CLI_MS;
use api::view::OpDto;
use model::Digest;
use std::time::Instant;

/// Bytes of the tree's data file.
const DATA_FILE_BYTES: u64 = 200 * 1024 * 1024;
/// Longest a sign, upload or export of the tree may take.
const TREE_COMMAND_MS: u64 = 180_000;
/// Longest the tree's rollout may take (200 MiB to three nodes, a kill,
/// two bad mirrors).
const TREE_ROLLOUT_MS: u64 = 150_000;
/// The label that gives a node the scenario's mirrors.
const SITE: &str = "mirrored";
/// `releases::limits::CHUNK_BYTES_MAX` (4 MiB): the most a resume may send twice.
const CHUNK_BYTES_MAX: u64 = 4 * 1024 * 1024;

pub(super) fn all() -> Vec<Scenario> {
    vec![Scenario {
        number: 24,
        title: "directory release (package, assets, 200 MiB file) through the canary: a node SIGKILLed at half its fetch resumes (at most one chunk again), a corrupting and a stalling mirror are detected and passed over, t2 fetches only its changed chunks",
        rule: "S15 trust by digest, resume, mirrors untrusted",
        versions: &["v1"],
        extra: &[("m", 40), ("n", 41), ("g", 42)],
        nodes: &NODES,
        layout: Layout::Single,
        body: body!(tree_release),
    }]
}

async fn tree_release(f: &mut Fleet) -> anyhow::Result<String> {
    let root = f.dir.join("mirror-root");
    let corrupt = f.start_mirror("m", "corrupt", &root)?;
    let stall = f.start_mirror("n", "stall", &root)?;
    let good = f.start_mirror("g", "good", &root)?;
    f.controller_toml_extra = format!(
        "\n[[artifacts.site]]\nlabels = {{ site = \"{SITE}\" }}\nmirrors = [\"{corrupt}\", \"{stall}\", \"{good}\"]\n"
    );
    f.stop("controller").await?;
    f.start_controller(&ControllerFaults::default()).await?;
    baseline(f, &AgentFaults::default()).await?;
    for node in ["node-b", "node-c"] {
        let _: serde_json::Value = f
            .api()
            .post_json(
                &format!("/api/nodes/{node}/labels"),
                &serde_json::json!({"set": {"site": SITE}}),
            )
            .await
            .map_err(|e| anyhow::anyhow!("labelling {node}: {e}"))?;
    }
    let tree = f.dir.join("tree");
    write_tree(&tree, "body { color: black }\n")?;
    let t1 = sign_upload_export(f, &tree, "t1", &root).await?;

    let served_before = chunk_bytes_served(f).await?;
    let id = f
        .start_rollout_with_slots(t1.digest, "node-a", &["node-b", "node-c"], 2)
        .await?;
    let kept = kill_at_half(f, "node-a", t1.unique_bytes).await?;
    f.start_agent("node-a", &AgentFaults::default())?;
    f.wait("t1 everywhere", TREE_ROLLOUT_MS, |s| {
        rollout_is(s, &id, "completed")
    })
    .await?;
    let sent = chunk_bytes_served(f).await? - served_before;
    let twice = sent.saturating_sub(t1.unique_bytes);
    ensure!(
        twice <= CHUNK_BYTES_MAX,
        "the controller sent {sent} chunk bytes for a release of {} distinct bytes: {twice} twice, more than one chunk",
        t1.unique_bytes
    );
    ensure!(
        kept == 0 || f.logs("node-a").contains("kept bytes"),
        "node-a kept {kept} bytes of chunks in flight and resumed none of them"
    );
    check_sources(f, &id).await?;
    check_verified(f, &id).await?;
    for node in NODES {
        f.assert_serves(node, "t1").await?;
    }

    roll_one_file_change(f, &tree, &root).await?;
    Ok(format!(
        "t1 ({} distinct bytes) on 3 nodes, node-a killed mid-fetch ({kept} bytes kept in flight, {twice} sent twice); t2 fetched 1 chunk per node",
        t1.unique_bytes
    ))
}

/// t2 changes `static/app.css` only: each node fetches that one chunk,
/// and the rollout is verified.
async fn roll_one_file_change(f: &mut Fleet, tree: &Path, root: &Path) -> anyhow::Result<()> {
    write_tree(tree, "body { color: navy }\n")?;
    let t2 = sign_upload_export(f, tree, "t2", root).await?;
    let id = f
        .start_rollout_with_slots(t2.digest, "node-a", &["node-b", "node-c"], 2)
        .await?;
    f.wait("t2 everywhere", TREE_ROLLOUT_MS, |s| {
        rollout_is(s, &id, "completed")
    })
    .await?;
    for node in NODES {
        let fetched = fetched_chunks(&f.logs(node), t2.digest)?;
        ensure!(
            fetched == 1,
            "{node} fetched {fetched} chunks of t2, which changed one small file"
        );
    }
    check_verified(f, &id).await
}

/// A signed, uploaded and exported tree release.
struct Tree {
    digest: Digest,
    unique_bytes: u64,
}

/// `app.py` (the sample app), a package of three modules, a static
/// directory (`app.css` is `css`) and `data/model.bin`.
fn write_tree(root: &Path, css: &str) -> anyhow::Result<()> {
    for dir in ["shop", "static/img", "data"] {
        std::fs::create_dir_all(root.join(dir))?;
    }
    std::fs::write(root.join("app.py"), demo::HELLO_APP)?;
    std::fs::write(root.join("shop/__init__.py"), "from . import cart, price\n")?;
    std::fs::write(
        root.join("shop/cart.py"),
        "def total(items):\n    return sum(items)\n",
    )?;
    std::fs::write(root.join("shop/price.py"), "VAT = 0.19\n")?;
    std::fs::write(root.join("static/app.css"), css)?;
    std::fs::write(root.join("static/index.html"), "<h1>shop</h1>\n")?;
    std::fs::write(root.join("static/img/logo.svg"), "<svg/>\n")?;
    let data = root.join("data/model.bin");
    if !data.exists() {
        write_noise(&data, DATA_FILE_BYTES)?;
    }
    Ok(())
}

/// `bytes` of deterministic noise (incompressible, no repeated chunk).
fn write_noise(path: &Path, bytes: u64) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut block = vec![0u8; 1 << 16];
    let mut left = bytes;
    while left > 0 {
        for b in block.iter_mut() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *b = x as u8;
        }
        let n = left.min(block.len() as u64) as usize;
        out.write_all(&block[..n])?;
        left -= n as u64;
    }
    out.flush()?;
    Ok(())
}

/// `bundle sign --dir`, `bundle upload` and `bundle export` (into the
/// mirrors' root), as an operator runs them.
async fn sign_upload_export(
    f: &mut Fleet,
    tree: &Path,
    version: &str,
    root: &Path,
) -> anyhow::Result<Tree> {
    let out = f.dir.join(format!("signed-{version}"));
    let key = f.dir.join("keys/bundle-signing.key");
    let (tree_s, out_s, key_s) = (
        tree.display().to_string(),
        out.display().to_string(),
        key.display().to_string(),
    );
    let expect = format!("hello from {version}");
    let sign = [
        "bundle",
        "sign",
        "--key",
        &key_s,
        "--dir",
        &tree_s,
        "--name",
        "shop",
        "--version",
        version,
        "--run",
        "python3 app.py",
        "--probe-path",
        "/hello",
        "--expect-status",
        "200",
        "--expect-body",
        &expect,
        "--out",
        &out_s,
    ];
    let (code, stdout, stderr) = f.cli_offline(&sign, TREE_COMMAND_MS).await?;
    ensure!(code == 0, "bundle sign --dir: {stdout}{stderr}");
    let (code, stdout) = f
        .cli_within(&["bundle", "upload", &out_s], TREE_COMMAND_MS)
        .await?;
    ensure!(code == 0, "bundle upload: {stdout}");
    let digest = stdout
        .split_whitespace()
        .find_map(|word| agent::probe::parse_digest(word.trim_end_matches(':')))
        .with_context(|| format!("bundle upload printed no release digest: {stdout}"))?;
    let fleet_dir = root.join("fleet").display().to_string();
    let export = ["bundle", "export", &out_s, "--out", &fleet_dir, "--json"];
    let (code, stdout, stderr) = f.cli_offline(&export, TREE_COMMAND_MS).await?;
    ensure!(code == 0, "bundle export: {stdout}{stderr}");
    let exported: serde_json::Value =
        serde_json::from_str(&stdout).with_context(|| format!("export JSON: {stdout}"))?;
    let unique_bytes = distinct_chunk_bytes(&out.join("chunks"))?;
    f.note_release(version, digest, out);
    ensure!(
        exported["chunks"].as_u64().is_some(),
        "bundle export --json names no chunk count: {exported}"
    );
    Ok(Tree {
        digest,
        unique_bytes,
    })
}

/// Bytes of the distinct chunks `bundle sign --dir` wrote.
fn distinct_chunk_bytes(dir: &Path) -> anyhow::Result<u64> {
    let mut bytes = 0;
    for entry in std::fs::read_dir(dir)? {
        bytes += entry?.metadata()?.len();
    }
    Ok(bytes)
}

/// The controller's chunk egress counter.
async fn chunk_bytes_served(f: &Fleet) -> anyhow::Result<u64> {
    let text = f.metrics().await?;
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("fleetweft_artifact_bytes_served_total{kind=\"chunk\"} "))
        .context("/metrics has no chunk egress counter")?;
    Ok(line.trim().parse()?)
}

/// SIGKILLs `node`'s agent once its chunk store holds half of
/// `unique_bytes`; returns the bytes it kept of chunks in flight.
async fn kill_at_half(f: &mut Fleet, node: &str, unique_bytes: u64) -> anyhow::Result<u64> {
    let data = f.dir.join(format!("{node}-data"));
    let held = || dir_bytes(&data.join(agent::staging::tree::CHUNKS_DIR));
    let started = Instant::now();
    while held() < unique_bytes / 2 {
        ensure!(
            started.elapsed() < Duration::from_millis(TREE_ROLLOUT_MS),
            "{node} never held half the release ({} of {unique_bytes} bytes)",
            held()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    f.kill(node).await?;
    ensure!(
        held() < unique_bytes,
        "{node} held the whole release before the kill: nothing to resume"
    );
    Ok(dir_bytes(
        &data.join(agent::staging::tree::PARTIAL_CHUNKS_DIR),
    ))
}

/// Bytes of the files directly in `dir` (0 when it does not exist).
fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .filter_map(|e| e.metadata().ok().map(|m| m.len()))
        .sum()
}

/// node-a's chunks came from the controller; node-b's and node-c's all
/// from the good mirror (the third), after the corrupting and the
/// stalling one each failed at least once; none from the controller.
async fn check_sources(f: &Fleet, id: &str) -> anyhow::Result<()> {
    let status = f.status().await?;
    for node in NODES {
        let op = op_of(&status, id, node).with_context(|| format!("{id} has no op on {node}"))?;
        let dto: OpDto = f
            .api()
            .get(&format!("/api/ops/{}", op.id))
            .await
            .map_err(|e| anyhow::anyhow!("GET /api/ops/{}: {e}", op.id))?;
        let source = |prefix: &str| dto.sources.iter().find(|s| s.source.starts_with(prefix));
        let names: Vec<&str> = dto.sources.iter().map(|s| s.source.as_str()).collect();
        if node == "node-a" {
            ensure!(
                source("controller").is_some_and(|s| s.chunks > 0),
                "{node}'s chunks should come from the controller: {names:?}"
            );
            continue;
        }
        ensure!(
            source("mirror[0]").is_some_and(|s| s.failures > 0 && s.chunks == 0),
            "{node}: the corrupting mirror should fail and serve nothing: {:?}",
            dto.sources
        );
        ensure!(
            source("mirror[1]").is_some_and(|s| s.failures > 0 && s.chunks == 0),
            "{node}: the stalling mirror should fail and serve nothing: {:?}",
            dto.sources
        );
        ensure!(
            source("mirror[2]").is_some_and(|s| s.chunks > 0),
            "{node}: the good mirror should serve: {:?}",
            dto.sources
        );
        ensure!(
            source("controller").is_none_or(|s| s.chunks == 0),
            "{node} took chunks from the controller: {:?}",
            dto.sources
        );
    }
    Ok(())
}

/// The rollout's proof and each node's are verified.
async fn check_verified(f: &Fleet, id: &str) -> anyhow::Result<()> {
    let (code, proof) = f.rollout_proof(id).await?;
    ensure!(
        code == 0 && proof["verdict"] == "verified",
        "rollout {id}'s proof should be verified: {proof}"
    );
    for node in NODES {
        let (code, proof) = f.node_proof(node).await?;
        ensure!(
            code == 0 && proof["verdict"] == "verified",
            "{node}'s proof should be verified: {proof}"
        );
    }
    Ok(())
}

/// The `N chunk(s) fetched` of the agent's latest staging of `release`.
fn fetched_chunks(log: &str, release: Digest) -> anyhow::Result<u64> {
    let prefix = format!("release {release}: ");
    let line = log
        .lines()
        .filter_map(|l| l.split_once(&prefix).map(|(_, rest)| rest))
        .next_back()
        .with_context(|| format!("no staging line for {release} in the agent's log"))?;
    line.split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .with_context(|| format!("unreadable staging line: {line}"))
}

// `CLI_MS` bounds every other command; the tree's are longer.
const _: () = assert!(TREE_COMMAND_MS > CLI_MS);
