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

/// The deployment tests' fixture and helpers, for housekeeping of
/// deployments (issue #24 item 1).
mod deployments {
    use crate::staging;
    use crate::staging::deployment::tests::{document, signed, Fixture};
    use crate::staging::deployment::{install, installed, is_installed};
    use model::Digest;
    use protocol::bundle;

    /// Housekeeping removes the deployments nothing names, keeps those in
    /// use and the newest other one whose code is kept.
    #[test]
    fn housekeeping_keeps_what_is_named_and_the_previous_deployment() {
        let f = Fixture::new();
        let d1 = f.doc.digest();
        let install_rev = |rev| {
            let doc = document(f.code, rev);
            install(f.data(), doc.digest(), &doc.encode()).expect("install");
            // Installed in order: distinct modification times.
            std::thread::sleep(std::time::Duration::from_millis(20));
            doc.digest()
        };
        std::thread::sleep(std::time::Duration::from_millis(20));
        let d2 = install_rev(2);
        let d3 = install_rev(3);
        let d4 = install_rev(4);
        let kept_codes = [f.code].into();
        // Serving d1 (the baseline), deploying d4: d3 is the previous one.
        let in_use = [d1, d4].into();
        let removed = super::super::tidy_deployments(f.data(), &in_use, &kept_codes).expect("tidy");
        assert_eq!(removed, vec![d2]);
        let mut left = installed(f.data());
        left.sort();
        let mut want = vec![d1, d3, d4];
        want.sort();
        assert_eq!(left, want);
        // Its code gone, the previous one is useless; in use, never removed.
        let removed =
            super::super::tidy_deployments(f.data(), &[d1].into(), &[].into()).expect("tidy");
        assert_eq!(removed.len(), 2);
        assert_eq!(installed(f.data()), vec![d1]);
    }

    /// `make_room` keeps the code of a deployment in use, which the model
    /// names only through the deployment, over a newer release.
    #[test]
    fn a_deployment_in_use_keeps_its_code_on_disk() {
        let f = Fixture::new();
        let d1 = f.doc.digest();
        let bytes_of = |d: Digest| -> u64 {
            std::fs::read_dir(staging::release_dir(f.data(), d))
                .expect("dir")
                .flatten()
                .map(|e| e.metadata().expect("meta").len())
                .sum()
        };
        let mut newer = Vec::new();
        for app in [&b"print('v2')"[..], b"print('v3')"] {
            std::thread::sleep(std::time::Duration::from_millis(20));
            let bytes = signed(&f.signing, app);
            let digest = bundle::bundle_digest(&bytes);
            staging::install(f.data(), &f.key, digest, &bytes).expect("install");
            newer.push(digest);
        }
        let (x, y) = (newer[0], newer[1]);
        // Room for the code and the newest other release only.
        let budget = bytes_of(f.code) + bytes_of(y) + 1;
        let incoming = super::super::Incoming {
            needed_bytes: 1,
            chunks: &Default::default(),
        };
        let done = super::super::make_room(f.data(), &[d1].into(), incoming, budget).expect("room");
        assert_eq!(done.removed, vec![x]);
        assert!(staging::release_dir(f.data(), f.code).exists());
        assert!(done.deployments_removed.is_empty());
        assert!(is_installed(f.data(), d1));
    }
}
