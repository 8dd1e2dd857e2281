use super::*;
use crate::staging::tree;
use sha2::{Digest as _, Sha256};
use std::time::Duration;

/// Stages a tree release of `files` (one chunk each) into `data`, its
/// directory dated `age_s` seconds after the epoch (housekeeping orders
/// releases by that date).
fn stage(
    data: &Path,
    key: &ed25519_dalek::SigningKey,
    files: &[(&str, &[u8])],
    age_s: u64,
) -> Digest {
    let verifying = key.verifying_key();
    let (bytes, contents) = tree::tests::signed(key, files);
    let digest = releases::release_digest(&bytes);
    let release = tree::verify(&verifying, model::platform::Arch::current(), digest, &bytes)
        .expect("verifies");
    let store = tree::open_store(data, digest).expect("store");
    for content in &contents {
        store
            .put_bytes(&Sha256::digest(content).into(), content)
            .expect("put");
    }
    tree::install(
        data,
        &verifying,
        model::platform::Arch::current(),
        &release,
        &bytes,
        &store,
    )
    .expect("install");
    let dir = std::fs::File::open(super::super::release_dir(data, digest)).expect("dir");
    dir.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(age_s))
        .expect("date the release");
    digest
}

fn chunk_held(data: &Path, bytes: &[u8]) -> bool {
    let sha: [u8; 32] = Sha256::digest(bytes).into();
    data.join(CHUNKS_DIR).join(hex::encode(sha)).exists()
}

const KIB: usize = 1024;

static NO_CHUNKS: BTreeSet<Sha256Bytes> = BTreeSet::new();

/// A format-1 release needing `needed_bytes` (no chunks).
fn incoming(needed_bytes: u64) -> Incoming<'static> {
    Incoming {
        needed_bytes,
        chunks: &NO_CHUNKS,
    }
}

/// Four releases of 20 KiB (files and chunks: about 40 KiB each on disk),
/// one in use: the in-use one and the newest other are kept whatever the
/// budget; older ones only while they fit; a chunk shared with a kept
/// release stays, the others go.
#[test]
fn housekeeping_keeps_what_is_in_use_and_the_previous_then_what_fits() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path();
    let (key, _) = protocol::bundle::keygen();
    let shared = vec![1u8; 20 * KIB];
    let (a, b, c, d) = (
        vec![2u8; 20 * KIB],
        vec![3u8; 20 * KIB],
        vec![4u8; 20 * KIB],
        vec![5u8; 20 * KIB],
    );
    let oldest = stage(data, &key, &[("a", &a), ("s", &shared)], 100);
    let older = stage(data, &key, &[("b", &b)], 200);
    let previous = stage(data, &key, &[("c", &c)], 300);
    let serving = stage(data, &key, &[("d", &d)], 400);
    let in_use = BTreeSet::from([serving]);

    // A generous budget removes nothing.
    let done = make_room(data, &in_use, incoming(0), 10 << 20).expect("room");
    assert!(done.removed.is_empty(), "{done:?}");
    assert_eq!(done.chunks_removed, 0);

    // Room for 100 KiB more within 250 KiB: serving and previous (about
    // 40 KiB each) stay, and of the older ones only the newer fits.
    let done =
        make_room(data, &in_use, incoming(100 * KIB as u64), 250 * KIB as u64).expect("room");
    assert_eq!(done.removed, vec![oldest], "{done:?}");
    assert_eq!(done.chunks_removed, 2, "the oldest's two chunks");
    assert!(!chunk_held(data, &a) && !chunk_held(data, &shared));
    assert!(chunk_held(data, &b) && chunk_held(data, &c) && chunk_held(data, &d));
    assert!(!super::super::release_dir(data, oldest).exists());
    assert!(!manifest_path(data, oldest).exists());
    for kept in [older, previous, serving] {
        assert!(super::super::release_dir(data, kept).exists());
    }

    // A budget below what is in use: the release is refused, naming both
    // sizes, before anything is removed.
    let err = make_room(data, &in_use, incoming(1 << 20), 1).expect_err("no space");
    assert!(
        matches!(err, StageError::NoSpace { needs, left: 0 } if needs == 1 << 20),
        "{err:?}"
    );
    assert!(err.permanent());
    assert_eq!(
        err.to_string(),
        "no_space: needs 1.0 MiB, budget leaves 0 B"
    );
    for kept in [older, previous, serving] {
        assert!(
            super::super::release_dir(data, kept).exists(),
            "{kept} removed"
        );
    }
}

/// The chunks a staging cut short by a crash already fetched belong to no
/// installed release yet: housekeeping before the next attempt keeps
/// them (and counts them), removing only chunks nothing names.
#[test]
fn the_incoming_release_keeps_the_chunks_it_already_holds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path();
    let (store, _) = releases::ChunkStore::open(&data.join(CHUNKS_DIR)).expect("store");
    let fetched = vec![7u8; 30 * KIB];
    let stray = vec![8u8; 10 * KIB];
    let fetched_sha: Sha256Bytes = Sha256::digest(&fetched).into();
    store.put_bytes(&fetched_sha, &fetched).expect("put");
    store
        .put_bytes(&Sha256::digest(&stray).into(), &stray)
        .expect("put");
    let chunks = BTreeSet::from([fetched_sha, [9; 32]]);
    let incoming = Incoming {
        needed_bytes: 5 * KIB as u64,
        chunks: &chunks,
    };
    let done = make_room(data, &BTreeSet::new(), incoming, 1 << 20).expect("room");
    assert_eq!(done.chunks_removed, 1, "only the stray chunk: {done:?}");
    assert!(chunk_held(data, &fetched) && !chunk_held(data, &stray));
    assert_eq!(
        done.used_bytes,
        30 * KIB as u64,
        "the held chunk counts as used"
    );
}

/// A removal cut short by a crash leaves the directory set aside, never
/// under the release's name; the next run removes it.
#[test]
fn a_directory_set_aside_is_removed_by_the_next_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path();
    let aside = data
        .join("releases")
        .join(format!(".{}{GC_INFIX}7", "ab".repeat(32)));
    std::fs::create_dir_all(aside.join("sub")).expect("aside");
    std::fs::write(aside.join("sub/file"), b"x").expect("file");
    let done = make_room(data, &BTreeSet::new(), incoming(0), 1 << 20).expect("room");
    assert!(done.removed.is_empty());
    assert!(!aside.exists());
}

#[test]
fn sizes_read_as_operators_write_them() {
    assert_eq!(bytes_text(7), "7 B");
    assert_eq!(bytes_text(12 * 1024), "12 KiB");
    assert_eq!(bytes_text(300 * 1024 * 1024), "300 MiB");
    assert_eq!(bytes_text(1_288_490_189), "1.2 GiB");
}
