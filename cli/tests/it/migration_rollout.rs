//! A release's data migration on real agents (issue #24 item 2): v1 → v2
//! with a migration rolls out verified and every node's data is migrated
//! (its snapshot removed once the op settled); a v3 whose migration fails
//! on the canary leaves the canary's data byte for byte as it was, is
//! rolled back with proof, and no follower is granted.

use crate::fleet::loopback::{poll, Loopback};
use crate::tree_rollout::{run_fleet_test, start, write_tree, AGENTS};
use std::path::{Path, PathBuf};
use std::time::Duration;

#[test]
fn a_migration_keeps_the_data_and_a_failed_one_is_restored_byte_for_byte() {
    run_fleet_test(migration_body);
}

/// `node`'s data directory of the test app.
fn data_dir(fleet: &Loopback, node: &str) -> PathBuf {
    agent::app_data::dir_for(&fleet.dir.join(format!("{node}-data")), "hello-tree")
}

fn migrate(script: &str, tree: &Path) -> releases::AppMigration {
    std::fs::write(tree.join("migrate.sh"), script).expect("migrate.sh");
    releases::AppMigration {
        command: vec!["sh".into(), "migrate.sh".into()],
        irreversible: false,
    }
}

async fn migration_body(dir: PathBuf) {
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
    for node in AGENTS {
        let data = data_dir(&fleet, node);
        assert!(data.is_dir(), "{node}: v1 runs with its data directory");
        std::fs::write(data.join("db"), format!("schema 1\n{node}\n")).expect("v1's data");
    }

    // v2 migrates the data: schema 1 → 2, and only from schema 1.
    let m = migrate(
        "set -e\ngrep -q 'schema 1' \"$FLEETWEFT_DATA_DIR/db\"\n\
         sed -i 's/schema 1/schema 2/' \"$FLEETWEFT_DATA_DIR/db\"\n",
        &tree,
    );
    let v2 = fleet.sign_and_upload_migrating(&tree, "v2", m).await;
    fleet.roll_out("r1", v2, &AGENTS).await;
    for node in AGENTS {
        let db = std::fs::read_to_string(data_dir(&fleet, node).join("db")).expect("db");
        assert_eq!(db, format!("schema 2\n{node}\n"), "{node}: migrated");
        let snapshot = agent::app_data::snapshot_for(&data_dir(&fleet, node));
        poll(
            "the settled op's snapshot is removed",
            Duration::from_secs(30),
            || {
                let gone = !snapshot.exists();
                async move { gone }
            },
        )
        .await;
    }

    // v3's migration breaks the data, then fails.
    let before = std::fs::read(data_dir(&fleet, "node-a").join("db")).expect("db");
    let m = migrate(
        "echo broken > \"$FLEETWEFT_DATA_DIR/db\"\ntouch \"$FLEETWEFT_DATA_DIR/half\"\nexit 1\n",
        &tree,
    );
    let v3 = fleet.sign_and_upload_migrating(&tree, "v3", m).await;
    fleet.canary_rolled_back("r2", v3, &AGENTS).await;
    let data = data_dir(&fleet, "node-a");
    assert_eq!(
        std::fs::read(data.join("db")).expect("db"),
        before,
        "byte for byte"
    );
    assert!(
        !data.join("half").exists(),
        "nothing the failed migration left"
    );
    let answer = fleet.public("node-a").await;
    assert!(
        matches!(&answer, Some((200, Some(id), body)) if *id == v2.to_hex() && body == "hello from v2"),
        "node-a serves v2 again: {answer:?}"
    );
    let log = std::fs::read_to_string(fleet.dir.join("logs/node-a.log")).unwrap_or_default();
    assert!(
        log.contains("migration failed, data put back"),
        "the agent says why v3 did not switch"
    );
}
