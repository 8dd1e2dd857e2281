//! Scenario 25 (issue #24 item 2 on real agents): a release's data
//! migration. m1 (an app that writes its own data: `db` holding `schema
//! 1`, plus a file of uploads per node) everywhere; m2 declares a
//! migration (`bundle sign --migrate`) that moves the uploads to `files/`
//! and rewrites `db` to `schema 2`, and refuses any other schema: rolled
//! out, every node verified with its data as the migration says. m3's
//! migration writes garbage into the data directory and exits 1: on the
//! canary node-a the op ends `rolled-back`, its code (m2's release
//! directory) and data (the app's data directory) byte for byte as before
//! m3, proven by a serving probe of m2; the rollout is paused, its proof
//! failed, and the log grants no follower.

use super::signed::{canary_restored, roll_out_verified, sign_and_upload, tree, tree_diff};
use super::*;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The releases' name: it keys the data directory, shared by m1, m2, m3.
const APP: &str = "notes";

/// Prepended to the sample app: it makes its data on its first start.
const DATA_PRELUDE: &str = "import os as _os\n\
_db = _os.path.join(_os.environ['FLEETWEFT_DATA_DIR'], 'db')\n\
if not _os.path.exists(_db):\n    with open(_db, 'w') as _f:\n        _f.write('schema 1\\n')\n";

/// m2's migration: schema 1 to 2, uploads moved to `files/`; anything but
/// schema 1 is refused (`set -e`).
const MIGRATE_TO_2: &str = "set -e\ncd \"$FLEETWEFT_DATA_DIR\"\n\
grep -qx 'schema 1' db\nmkdir files\nmv uploads/* files/\nrmdir uploads\n\
printf 'schema 2\\n' > db\n";

/// m3's migration: writes garbage over and beside the data, then fails.
const MIGRATE_BROKEN: &str = "cd \"$FLEETWEFT_DATA_DIR\"\nprintf 'garbage\\n' > db\n\
rm -rf files\nmkdir junk\nhead -c 4096 /dev/urandom > junk/blob\nexit 1\n";

pub(super) fn all() -> Vec<Scenario> {
    vec![Scenario {
        number: 25,
        title: "data migration: m2's migration rewrites every node's data and rolls out verified; m3's migration writes garbage and fails on the canary: code and data restored byte for byte, proven by probe, paused, no follower",
        rule: "S9 restore needs proof, code and data go back together",
        versions: &[],
        extra: &[],
        nodes: &NODES,
        layout: Layout::Single,
        body: body!(migration),
    }]
}

/// `node`'s data directory of the app.
fn data_of(f: &Fleet, node: &str) -> PathBuf {
    agent::app_data::dir_for(&f.dir.join(format!("{node}-data")), APP)
}

async fn migration(f: &mut Fleet) -> anyhow::Result<String> {
    f.start_agent("node-a", &AgentFaults::default())?;
    f.start_agent("node-b", &AgentFaults::default())?;
    f.start_agent("node-c", &AgentFaults::default())?;
    f.wait("every agent connected", WAIT_MS, all_connected)
        .await?;
    let app = f.dir.join("app");
    std::fs::create_dir_all(&app)?;
    std::fs::write(
        app.join("app.py"),
        format!("{DATA_PRELUDE}{}", demo::HELLO_APP),
    )?;
    let m1 = sign_and_upload(f, &app, APP, "m1", &[]).await?;
    roll_out_verified(f, m1).await?;
    for node in NODES {
        let data = data_of(f, node);
        let db = std::fs::read_to_string(data.join("db"))
            .with_context(|| format!("{node}: m1's app wrote no db"))?;
        ensure!(db == "schema 1\n", "{node}: m1's db: {db:?}");
        std::fs::create_dir_all(data.join("uploads"))?;
        std::fs::write(data.join(format!("uploads/{node}.txt")), upload_of(node))?;
    }
    migrate_everywhere(f, &app).await?;
    let reason = failed_migration_on_canary(f, &app).await?;
    Ok(format!(
        "m2 migrated 3 nodes' data (schema 2, uploads moved); m3's failed migration on node-a: rolled-back, code and data byte for byte, no follower; proof failed ({reason})"
    ))
}

/// What the harness puts in `node`'s uploads (the app's user data).
fn upload_of(node: &str) -> String {
    format!("photo of {node}\n")
}

/// m2 (with [`MIGRATE_TO_2`]) everywhere: every node verified, its data
/// exactly `db` = `schema 2` and `files/<node>.txt` with the upload, and
/// the migration's snapshot removed once the op settled.
async fn migrate_everywhere(f: &mut Fleet, app: &Path) -> anyhow::Result<()> {
    std::fs::write(app.join("migrate.sh"), MIGRATE_TO_2)?;
    let m2 = sign_and_upload(f, app, APP, "m2", &["--migrate", "sh migrate.sh"]).await?;
    roll_out_verified(f, m2).await?;
    for node in NODES {
        f.assert_serves(node, "m2").await?;
        let data = data_of(f, node);
        let files: BTreeMap<PathBuf, Option<Vec<u8>>> = tree(&data)?
            .into_iter()
            .map(|(path, entry)| match entry {
                signed::Entry::File(_, bytes) => (path, Some(bytes)),
                _ => (path, None),
            })
            .collect();
        let want = BTreeMap::from([
            (PathBuf::from("db"), Some(b"schema 2\n".to_vec())),
            (PathBuf::from("files"), None),
            (
                PathBuf::from(format!("files/{node}.txt")),
                Some(upload_of(node).into_bytes()),
            ),
        ]);
        ensure!(
            files == want,
            "{node}'s data after m2's migration: {files:?}, expected {want:?}"
        );
        let snapshot = agent::app_data::snapshot_for(&data);
        wait_for("the settled op's data snapshot is removed", WAIT_MS, || {
            let gone = !snapshot.exists();
            async move { gone }
        })
        .await?;
    }
    Ok(())
}

/// m3 (with [`MIGRATE_BROKEN`]) through canary node-a: restored with
/// proof, paused, no follower; node-a's m2 release directory and data
/// directory (and the followers' data) equal to before, entry for entry
/// and byte for byte. Returns the proof's reason for node-a.
async fn failed_migration_on_canary(f: &mut Fleet, app: &Path) -> anyhow::Result<String> {
    let m2_dir = f
        .dir
        .join(format!("node-a-data/releases/{}", f.digest("m2").to_hex()));
    ensure!(
        m2_dir.is_dir(),
        "m2's release directory: {}",
        m2_dir.display()
    );
    let mut before = vec![(m2_dir.clone(), tree(&m2_dir)?)];
    for node in NODES {
        let data = data_of(f, node);
        before.push((data.clone(), tree(&data)?));
    }
    std::fs::write(app.join("migrate.sh"), MIGRATE_BROKEN)?;
    let m3 = sign_and_upload(f, app, APP, "m3", &["--migrate", "sh migrate.sh"]).await?;
    let id = f
        .start_rollout_api(m3, "node-a", &["node-b", "node-c"])
        .await?;
    let op = canary_restored(f, &id, "m2").await?;
    let reports: Vec<String> = f
        .events()
        .await?
        .into_iter()
        .map(|e| e.text)
        .filter(|t| t.starts_with(&format!("record report for {} (", op.id)))
        .collect();
    let restored = format!("(restored): pass from {}", f.digest("m2"));
    ensure!(
        reports.iter().any(|t| t.contains("(refused: the migration failed"))
            && reports.iter().any(|t| t.contains(&restored)),
        "the log should hold node-a's refusal (the migration failed) and a serving probe of m2 after the restore: {reports:?}"
    );
    for (dir, was) in &before {
        let diff = tree_diff(was, &tree(dir)?);
        ensure!(
            diff.is_empty(),
            "{} differs from before m3: {diff:?}",
            dir.display()
        );
    }
    ensure!(
        f.logs("node-a").contains("migration failed, data put back"),
        "node-a's agent says why m3 did not switch"
    );
    let (code, proof) = f.rollout_proof(&id).await?;
    ensure!(
        code == 1 && proof["verdict"] == "failed",
        "{id}'s proof should be failed: {proof:#}"
    );
    let canary = &proof["nodes"][0];
    ensure!(
        canary["node"] == "node-a" && canary["verdict"] == "failed",
        "node-a's part of {id}'s proof should be failed: {proof:#}"
    );
    Ok(canary["reason"].to_string())
}
