//! What scenarios 25 and 26 share: directory releases signed and uploaded
//! with the operator's CLI (`bundle sign --dir` with the release's own
//! flags, `bundle upload`), a canary whose op must end restored with no
//! follower granted, and directory trees read whole for byte-for-byte
//! comparisons.

use super::*;
use api::view::OpDto;
use model::Digest;
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt as _;
use std::path::PathBuf;

/// Longest a `bundle sign --dir` or `bundle upload` of a small tree may
/// take.
const SIGN_MS: u64 = 60_000;

/// `bundle sign --dir TREE --name NAME --version VERSION` with the sample
/// app's run command and probe (`GET /hello` answers `hello from
/// VERSION`) and `flags` (`--migrate ...`, `--memory-max ...`), then
/// `bundle upload`, as an operator runs them; the release is noted as
/// `version` for [`Fleet::assert_serves`]. Returns its digest.
pub(super) async fn sign_and_upload(
    f: &mut Fleet,
    tree: &Path,
    name: &str,
    version: &str,
    flags: &[&str],
) -> anyhow::Result<Digest> {
    let out = f.dir.join(format!("signed-{version}"));
    let key = f.dir.join("keys/bundle-signing.key");
    let (tree_s, out_s, key_s) = (
        tree.display().to_string(),
        out.display().to_string(),
        key.display().to_string(),
    );
    let expect = format!("hello from {version}");
    let mut sign = vec![
        "bundle",
        "sign",
        "--key",
        &key_s,
        "--dir",
        &tree_s,
        "--name",
        name,
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
    sign.extend_from_slice(flags);
    let (code, stdout, stderr) = f.cli_offline(&sign, SIGN_MS).await?;
    ensure!(code == 0, "bundle sign --dir {version}: {stdout}{stderr}");
    let (code, stdout) = f.cli_within(&["bundle", "upload", &out_s], SIGN_MS).await?;
    ensure!(code == 0, "bundle upload {version}: {stdout}");
    let digest = stdout
        .split_whitespace()
        .find_map(|word| agent::probe::parse_digest(word.trim_end_matches(':')))
        .with_context(|| format!("bundle upload printed no release digest: {stdout}"))?;
    f.note_release(version, digest, out);
    Ok(digest)
}

/// `release` through canary node-a then node-b and node-c, slots 1:
/// completed, every route serving it, rollout and node proofs verified.
pub(super) async fn roll_out_verified(f: &Fleet, release: model::Digest) -> anyhow::Result<String> {
    let id = f
        .start_rollout_api(release, "node-a", &["node-b", "node-c"])
        .await?;
    f.wait(&format!("{id} completes"), WAIT_MS, |s| {
        rollout_is(s, &id, "completed")
    })
    .await?;
    let (code, proof) = f.rollout_proof(&id).await?;
    ensure!(
        code == 0 && proof["verdict"] == "verified",
        "{id}'s proof should be verified: {proof}"
    );
    for node in NODES {
        let (code, proof) = f.node_proof(node).await?;
        ensure!(
            code == 0 && proof["verdict"] == "verified",
            "{node}'s proof should be verified: {proof}"
        );
    }
    Ok(id)
}

/// The canary `node-a`'s op of rollout `id` settles `rolled-back`, the
/// rollout is paused, node-a serves `baseline` again (a serving probe of
/// its public route: body and identity), and the log holds exactly one
/// grant of the rollout (the canary's: no follower was granted, also not
/// 2 s later). Returns the canary's op.
pub(super) async fn canary_restored(f: &Fleet, id: &str, baseline: &str) -> anyhow::Result<OpDto> {
    let s = f
        .wait("the canary's op settles", WAIT_MS, |s| {
            op_of(s, id, "node-a").is_some_and(|o| o.outcome.is_some())
        })
        .await?;
    let canary = op_of(&s, id, "node-a").context("the canary's op")?.clone();
    ensure!(
        canary.outcome.as_deref() == Some("rolled-back"),
        "the canary's op should be rolled back (restore proven): {canary:?}\nevents:\n{}",
        f.event_text().await
    );
    f.wait("the rollout is paused", WAIT_MS, |s| {
        rollout_is(s, id, "paused")
    })
    .await?;
    f.assert_serves("node-a", baseline).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let s = f.status().await?;
    ensure!(
        op_of(&s, id, "node-b").is_none() && op_of(&s, id, "node-c").is_none(),
        "no follower granted: {:?}",
        s.ops
    );
    let grants: Vec<String> = f
        .events()
        .await?
        .iter()
        .filter(
            |e| matches!(&e.event, Event::OpGranted { rollout, .. } if rollout.to_string() == id),
        )
        .map(|e| e.text.clone())
        .collect();
    ensure!(
        grants.len() == 1 && grants[0].contains("node-a"),
        "the log grants the canary only: {grants:?}"
    );
    Ok(canary)
}

/// One entry of a directory tree read whole.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Entry {
    /// A directory and its mode.
    Dir(u32),
    /// A file, its mode and its bytes.
    File(u32, Vec<u8>),
    /// A symbolic link and its target.
    Link(PathBuf),
}

/// Every entry under `dir` (not `dir` itself) by its path relative to
/// `dir`: a recursive listing with modes, file contents and link targets.
pub(super) fn tree(dir: &Path) -> anyhow::Result<BTreeMap<PathBuf, Entry>> {
    let mut out = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(at) = todo.pop() {
        let entries =
            std::fs::read_dir(&at).with_context(|| format!("reading {}", at.display()))?;
        for entry in entries {
            let path = entry?.path();
            let meta = std::fs::symlink_metadata(&path)?;
            let mode = meta.permissions().mode();
            let rel = path.strip_prefix(dir)?.to_path_buf();
            let item = if meta.file_type().is_symlink() {
                Entry::Link(std::fs::read_link(&path)?)
            } else if meta.is_dir() {
                todo.push(path.clone());
                Entry::Dir(mode)
            } else {
                let bytes =
                    std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
                Entry::File(mode, bytes)
            };
            out.insert(rel, item);
        }
    }
    Ok(out)
}

/// Where two trees differ, one line per path (empty when equal).
pub(super) fn tree_diff(
    before: &BTreeMap<PathBuf, Entry>,
    after: &BTreeMap<PathBuf, Entry>,
) -> Vec<String> {
    let mut lines = Vec::new();
    for (path, entry) in before {
        match after.get(path) {
            None => lines.push(format!("{} gone", path.display())),
            Some(now) if now != entry => lines.push(format!("{} changed", path.display())),
            Some(_) => {}
        }
    }
    for path in after.keys().filter(|p| !before.contains_key(*p)) {
        lines.push(format!("{} added", path.display()));
    }
    lines
}
