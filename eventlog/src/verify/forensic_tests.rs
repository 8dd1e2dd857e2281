//! `verify`'s forensic promise (the `forensic` module): the log it reads
//! is left exactly as it was found, intact, damaged, read-only, in use or
//! missing.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use super::super::forensic::tests::{log_in_temp, tree};
use super::super::forensic::{CopyProblem, SnapshotCopy, COPY_PREFIX};
use super::super::sled_dir::SLED_DB_FILE;
use super::{verify, verify_in_place, VerifyError};
use crate::EventLog;

/// Whether verifying `dir` in place (on a copy of it) changes its files:
/// what `verify` must never do to the original.
fn in_place_rewrites(dir: &Path) -> bool {
    let copy = SnapshotCopy::take(dir).expect("copy");
    let before = tree(copy.path());
    let _ = verify_in_place(copy.path());
    tree(copy.path()) != before
}

#[test]
fn verify_leaves_intact_and_damaged_logs_as_it_found_them() {
    let (_temp, dir) = log_in_temp(300);
    let db = dir.join(SLED_DB_FILE);
    let before = tree(&dir);
    verify(&dir).expect("intact");
    assert_eq!(
        tree(&dir),
        before,
        "intact: no new snapshot, nothing rewritten"
    );
    assert!(
        in_place_rewrites(&dir),
        "the hazard: even an intact log changes"
    );

    // Three flipped bytes: sled's recovery would zero the file after the
    // first one if it ran on the original.
    // sled's file is one preallocated segment: damage its used part.
    let mut bytes = fs::read(&db).expect("read db");
    let used = bytes.iter().rposition(|b| *b != 0).expect("data") + 1;
    for offset in [used / 4, used / 2, 3 * used / 4] {
        bytes[offset] ^= 0x5a;
    }
    fs::write(&db, &bytes).expect("write db");
    let before = tree(&dir);
    let err = verify(&dir).expect_err("damage is found");
    assert!(
        !err.to_string().contains(COPY_PREFIX),
        "names the log: {err}"
    );
    assert_eq!(tree(&dir), before, "flipped bytes: unchanged");
    assert!(
        in_place_rewrites(&dir),
        "the hazard: sled's recovery rewrites it"
    );

    // Cut to half: recovery would rewrite the torn tail.
    fs::write(&db, &bytes[..used / 2]).expect("truncate db");
    let before = tree(&dir);
    let err = verify(&dir).expect_err("damage is found");
    assert!(
        err.to_string().contains(&dir.display().to_string()) || err.sequence().is_some(),
        "{err}"
    );
    assert_eq!(tree(&dir), before, "truncated: unchanged");
    assert!(
        in_place_rewrites(&dir),
        "the hazard: sled's recovery rewrites it"
    );
}

#[test]
fn a_read_only_log_verifies() {
    let (_temp, dir) = log_in_temp(5);
    let set_mode = |mode_file, mode_dir| {
        for entry in fs::read_dir(&dir).expect("list") {
            let path = entry.expect("entry").path();
            let mode = if path.is_dir() { mode_dir } else { mode_file };
            fs::set_permissions(&path, fs::Permissions::from_mode(mode)).expect("chmod");
        }
        fs::set_permissions(&dir, fs::Permissions::from_mode(mode_dir)).expect("chmod");
    };
    set_mode(0o444, 0o555);
    let result = verify(&dir);
    set_mode(0o644, 0o755);
    assert_eq!(result.expect("verifies").entries, 5);
}

#[test]
fn a_symlink_is_not_followed() {
    let (temp, dir) = log_in_temp(5);
    let outside = temp.path().join("outside");
    fs::write(&outside, b"not part of the log").expect("write");
    std::os::unix::fs::symlink(&outside, dir.join("snap.link")).expect("symlink");
    let err = verify(&dir).expect_err("refused");
    assert!(
        matches!(
            err,
            VerifyError::Uninspectable {
                problem: CopyProblem::Unexpected { .. },
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn an_open_log_is_in_use_and_a_missing_one_is_not_a_log() {
    let (temp, dir) = log_in_temp(5);
    let (log, _) = EventLog::<String>::open(&dir).expect("open");
    let err = verify(&dir).expect_err("in use");
    assert!(
        matches!(&err, VerifyError::InUse { path } if path == &dir),
        "{err:?}"
    );
    assert!(err.to_string().contains("in use"), "{err}");
    log.close().expect("close");
    assert_eq!(verify(&dir).expect("free again").entries, 5);

    let missing = temp.path().join("missing");
    let err = verify(&missing).expect_err("missing");
    assert!(matches!(err, VerifyError::NotALog { .. }), "{err:?}");
    assert!(!missing.exists(), "nothing created");
}
