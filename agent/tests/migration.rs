//! A release's data migration on real processes (issue #24 item 2): a
//! `migrate` script run in the release directory with
//! `FLEETWEFT_DATA_DIR`, the data snapshotted before it and put back, byte
//! for byte, when it fails, times out or a roll back asks; a data
//! directory over the snapshot bound is refused before anything runs.

use agent::app_data::{self, DATA_SNAPSHOT_BYTES_MAX};
use agent::migration::{self, MigrationError};
use agent::supervisor::AppSpec;
use model::Digest;
use std::path::{Path, PathBuf};
use std::time::Duration;
use testkit::files::contents;

const TIMEOUT: Duration = Duration::from_secs(20);

/// A release directory holding `migrate.sh` with `script`, and the app's
/// data directory holding a file and a nested one.
fn app(root: &Path, script: &str) -> AppSpec {
    let dir = root.join("release");
    std::fs::create_dir_all(&dir).expect("release dir");
    std::fs::write(dir.join("migrate.sh"), script).expect("script");
    let data = app_data::dir_for(&root.join("agent-data"), "shop");
    app_data::ensure(&data, None).expect("data dir");
    std::fs::write(data.join("db.txt"), "schema 1\nalice\n").expect("db");
    std::fs::create_dir(data.join("blobs")).expect("blobs");
    std::fs::write(data.join("blobs/a"), vec![42u8; 10_000]).expect("blob");
    AppSpec {
        release: Digest::repeat(5),
        code: Digest::repeat(5),
        dir,
        run: vec!["true".into()],
        env: vec![("FLEETWEFT_VERSION".into(), "v2".into())],
        limits: Default::default(),
        cgroups: false,
        data: Some(data),
    }
}

fn command() -> Vec<String> {
    vec!["sh".into(), "migrate.sh".into()]
}

fn data(spec: &AppSpec) -> PathBuf {
    spec.data.clone().expect("a data dir")
}

/// The script runs in the release directory, sees the data directory and
/// the app's environment, and what it writes stays; the snapshot of the
/// data before it is kept for a roll back.
#[tokio::test]
async fn a_migration_writes_the_data_and_keeps_the_snapshot() {
    let root = tempfile::tempdir().expect("temp");
    let spec = app(
        root.path(),
        "set -e\n\
         test -f migrate.sh\n\
         sed -i 's/schema 1/schema 2/' \"$FLEETWEFT_DATA_DIR/db.txt\"\n\
         echo \"$FLEETWEFT_VERSION\" > \"$FLEETWEFT_DATA_DIR/migrated-by\"\n",
    );
    let before = contents(&data(&spec));
    migration::run(&spec, &command(), DATA_SNAPSHOT_BYTES_MAX, TIMEOUT)
        .await
        .expect("migrates");
    let db = std::fs::read_to_string(data(&spec).join("db.txt")).expect("db");
    assert_eq!(db, "schema 2\nalice\n");
    let by = std::fs::read_to_string(data(&spec).join("migrated-by")).expect("marker");
    assert_eq!(by.trim(), "v2");
    let snapshot = app_data::snapshot_for(&data(&spec));
    assert_eq!(
        contents(&snapshot),
        before,
        "the snapshot is the data before"
    );
}

/// A script that changes the data, then fails: the data is byte for byte
/// what it was, and the failure says how it exited and what it said.
#[tokio::test]
async fn a_failing_migration_leaves_the_data_byte_for_byte_as_before() {
    let root = tempfile::tempdir().expect("temp");
    let spec = app(
        root.path(),
        "echo 'schema 2' > \"$FLEETWEFT_DATA_DIR/db.txt\"\n\
         rm -r \"$FLEETWEFT_DATA_DIR/blobs\"\n\
         touch \"$FLEETWEFT_DATA_DIR/half-done\"\n\
         echo 'column exists' >&2\n\
         exit 3\n",
    );
    let before = contents(&data(&spec));
    let err = migration::run(&spec, &command(), DATA_SNAPSHOT_BYTES_MAX, TIMEOUT)
        .await
        .expect_err("fails");
    assert!(matches!(err, MigrationError::Exited { .. }), "{err}");
    assert!(err.to_string().contains("column exists"), "{err}");
    assert_eq!(contents(&data(&spec)), before);
    assert!(!app_data::snapshot_for(&data(&spec)).exists());
}

/// A migration past its timeout is killed and counted failed; the data
/// is put back.
#[tokio::test]
async fn a_migration_past_its_timeout_is_killed_and_the_data_put_back() {
    let root = tempfile::tempdir().expect("temp");
    let spec = app(
        root.path(),
        "echo changed > \"$FLEETWEFT_DATA_DIR/db.txt\"\nexec sleep 30\n",
    );
    let before = contents(&data(&spec));
    let started = std::time::Instant::now();
    let err = migration::run(
        &spec,
        &command(),
        DATA_SNAPSHOT_BYTES_MAX,
        Duration::from_millis(500),
    )
    .await
    .expect_err("times out");
    assert!(matches!(err, MigrationError::TimedOut { .. }), "{err}");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(contents(&data(&spec)), before);
}

/// After a migration succeeded, a roll back puts the snapshot back: the
/// data is what it was before the migration, and the snapshot is gone.
#[tokio::test]
async fn a_rollback_after_a_migration_restores_the_data() {
    let root = tempfile::tempdir().expect("temp");
    let spec = app(
        root.path(),
        "echo 'schema 2' > \"$FLEETWEFT_DATA_DIR/db.txt\"\n",
    );
    let before = contents(&data(&spec));
    migration::run(&spec, &command(), DATA_SNAPSHOT_BYTES_MAX, TIMEOUT)
        .await
        .expect("migrates");
    // The new release writes more data before the roll back.
    std::fs::write(data(&spec).join("orders"), "written by v2").expect("write");
    assert_ne!(contents(&data(&spec)), before);
    let snapshot = app_data::snapshot_for(&data(&spec));
    assert!(app_data::restore(&data(&spec), &snapshot).expect("restores"));
    assert_eq!(contents(&data(&spec)), before);
    assert!(!snapshot.exists());
}

/// A data directory over the snapshot bound is refused with the bound
/// named: the script never runs and nothing is written.
#[tokio::test]
async fn an_over_bound_data_dir_is_refused_and_the_command_never_runs() {
    let root = tempfile::tempdir().expect("temp");
    let spec = app(root.path(), "touch \"$FLEETWEFT_DATA_DIR/ran\"\n");
    let before = contents(&data(&spec));
    let err = migration::run(&spec, &command(), 1_000, TIMEOUT)
        .await
        .expect_err("refused");
    assert!(matches!(err, MigrationError::Snapshot { .. }), "{err}");
    assert!(
        err.to_string().contains("snapshot bound of 1000 bytes"),
        "{err}"
    );
    assert_eq!(contents(&data(&spec)), before);
    assert!(!app_data::snapshot_for(&data(&spec)).exists());
}
