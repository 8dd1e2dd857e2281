//! Signing a directory, verifying it, storing its chunks, assembling it
//! elsewhere, and the ways each refuses.

mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use common::{fields, fixed_key};
use releases::limits::CHUNK_BYTES_MAX;
use releases::tree::{self, assemble, sign_dir, store_sink, verify_dir, verify_store};
use releases::{manifest, ChunkStore, Mode, ReleaseError};
use sha2::Digest as _;

fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut state = seed.wrapping_add(1);
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

/// A small app tree: a package of modules, an executable, an empty file
/// and a data file of several chunks.
fn app_tree(root: &Path) {
    fs::create_dir_all(root.join("shop/static")).expect("dirs");
    fs::write(root.join("shop/__init__.py"), b"").expect("init");
    fs::write(root.join("shop/__main__.py"), b"print('shop')\n").expect("main");
    fs::write(root.join("shop/static/logo.svg"), b"<svg/>").expect("svg");
    fs::write(root.join("run.sh"), b"#!/bin/sh\nexec python3 -m shop\n").expect("run");
    fs::set_permissions(root.join("run.sh"), fs::Permissions::from_mode(0o755)).expect("chmod");
    fs::write(root.join("data.bin"), noise(9 * 1024 * 1024 + 3, 1)).expect("data");
}

fn signed(root: &Path, store: &ChunkStore) -> releases::VerifiedRelease {
    let bytes = sign_dir(&fixed_key(), fields(), root, &mut store_sink(store)).expect("sign");
    manifest::verify(&fixed_key().verifying_key(), &bytes).expect("verify")
}

#[test]
fn sign_store_assemble_verify_round_trip() {
    let temp = tempfile::tempdir().expect("temp");
    let src = temp.path().join("src");
    app_tree(&src);
    let (store, _) = ChunkStore::open(&temp.path().join("chunks")).expect("store");
    let release = signed(&src, &store);
    let m = &release.manifest;
    let paths: Vec<_> = m.entries.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "data.bin",
            "run.sh",
            "shop/__init__.py",
            "shop/__main__.py",
            "shop/static/logo.svg"
        ]
    );
    assert_eq!(m.entries[1].mode, Mode::Executable);
    assert_eq!(m.entries[2].mode, Mode::File);
    assert!(m.entries[2].chunks.is_empty(), "an empty file has no chunk");
    assert!(
        m.entries[0].chunks.len() >= 3,
        "{:?}",
        m.entries[0].chunks.len()
    );
    verify_dir(m, &src).expect("the source verifies");
    verify_store(m, &store).expect("the store holds every chunk");

    let dest = temp.path().join("release");
    assemble(m, &store, &dest).expect("assemble");
    verify_dir(m, &dest).expect("the assembled tree verifies");
    let mode = fs::metadata(dest.join("run.sh"))
        .expect("meta")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o755);
    let mode = fs::metadata(dest.join("shop/__main__.py"))
        .expect("meta")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o644);
    // Nothing but the release and the store is left in the parent.
    let names: Vec<_> = fs::read_dir(temp.path())
        .expect("ls")
        .map(|e| e.expect("e").file_name())
        .collect();
    assert_eq!(names.len(), 3, "{names:?}");
    let err = assemble(m, &store, &dest).unwrap_err();
    assert!(matches!(err, ReleaseError::Exists(_)), "{err}");
}

#[test]
fn special_files_and_symlinks_are_refused_by_name() {
    let temp = tempfile::tempdir().expect("temp");
    let root = temp.path().join("t");
    fs::create_dir_all(root.join("lib")).expect("dir");
    fs::write(root.join("lib/a.py"), b"a").expect("a");
    std::os::unix::fs::symlink("a.py", root.join("lib/b.py")).expect("link");
    let err = tree::walk(&root).unwrap_err();
    assert!(
        matches!(err, ReleaseError::NotRegular { ref path, kind: "symlink" } if path == "lib/b.py"),
        "{err}"
    );
    fs::remove_file(root.join("lib/b.py")).expect("rm");
    let fifo = root.join("lib/pipe");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(made.success());
    let err = tree::walk(&root).unwrap_err();
    assert!(
        matches!(err, ReleaseError::NotRegular { ref path, kind: "fifo" } if path == "lib/pipe"),
        "{err}"
    );
    fs::remove_file(&fifo).expect("rm");
    let sock = std::os::unix::net::UnixListener::bind(root.join("s.sock")).expect("bind");
    let err = tree::walk(&root).unwrap_err();
    assert!(
        matches!(err, ReleaseError::NotRegular { kind: "socket", .. }),
        "{err}"
    );
    drop(sock);
}

#[test]
fn verify_dir_names_what_differs() {
    let temp = tempfile::tempdir().expect("temp");
    let src = temp.path().join("src");
    app_tree(&src);
    let (store, _) = ChunkStore::open(&temp.path().join("chunks")).expect("store");
    let m = signed(&src, &store).manifest;
    // One byte flipped in the second chunk of the data file.
    let data = src.join("data.bin");
    let mut bytes = fs::read(&data).expect("read");
    let at = m.entries[0].chunks[0].len as usize + 5;
    bytes[at] ^= 1;
    fs::write(&data, &bytes).expect("write");
    let err = verify_dir(&m, &src).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("data.bin") && text.contains("chunk 1"),
        "{text}"
    );
    bytes[at] ^= 1;
    fs::write(&data, &bytes).expect("restore");
    fs::write(src.join("extra.txt"), b"x").expect("extra");
    let err = verify_dir(&m, &src).unwrap_err();
    assert!(
        matches!(err, ReleaseError::Unexpected { ref path } if path == "extra.txt"),
        "{err}"
    );
    fs::remove_file(src.join("extra.txt")).expect("rm");
    fs::set_permissions(src.join("run.sh"), fs::Permissions::from_mode(0o644)).expect("chmod");
    let err = verify_dir(&m, &src).unwrap_err();
    assert!(
        err.to_string().contains("run.sh") && err.to_string().contains("mode"),
        "{err}"
    );
    fs::remove_file(src.join("run.sh")).expect("rm");
    let err = verify_dir(&m, &src).unwrap_err();
    assert!(err.to_string().contains("missing"), "{err}");
}

#[test]
fn a_torn_chunk_is_detected_removed_and_never_assembled() {
    let temp = tempfile::tempdir().expect("temp");
    let src = temp.path().join("src");
    app_tree(&src);
    let (store, _) = ChunkStore::open(&temp.path().join("chunks")).expect("store");
    let m = signed(&src, &store).manifest;
    let chunk = m.entries[0].chunks[1];
    let path = store.path(&chunk.sha256);
    // Truncated, as a power cut on a lying disk could leave it.
    let bytes = fs::read(&path).expect("read");
    fs::write(&path, &bytes[..bytes.len() / 2]).expect("truncate");
    let err = assemble(&m, &store, &temp.path().join("r1")).unwrap_err();
    assert!(matches!(err, ReleaseError::TornChunk { .. }), "{err}");
    assert!(!store.has(&chunk.sha256), "the torn chunk was removed");
    assert!(
        !temp.path().join("r1").exists(),
        "nothing half-written is visible"
    );
    let staging_left = fs::read_dir(temp.path()).expect("ls").any(|e| {
        e.expect("e")
            .file_name()
            .to_string_lossy()
            .contains("staging")
    });
    assert!(!staging_left, "the staging directory was removed");
    let err = assemble(&m, &store, &temp.path().join("r1")).unwrap_err();
    assert!(
        matches!(err, ReleaseError::MissingChunk { ref path, .. } if path == "data.bin"),
        "{err}"
    );
    // Fetched again (here: from the bytes), it assembles.
    store.put(&chunk.sha256, bytes.as_slice()).expect("refetch");
    // Wrong bytes of the right length: detected on read too.
    let other = m.entries[0].chunks[2];
    let mut wrong = fs::read(store.path(&other.sha256)).expect("read");
    wrong[0] ^= 0xff;
    fs::write(store.path(&other.sha256), &wrong).expect("write");
    let err = verify_store(&m, &store).unwrap_err();
    assert!(matches!(err, ReleaseError::TornChunk { .. }), "{err}");
    wrong[0] ^= 0xff;
    store.put(&other.sha256, wrong.as_slice()).expect("refetch");
    assemble(&m, &store, &temp.path().join("r1")).expect("assemble");
    verify_dir(&m, &temp.path().join("r1")).expect("verify");
}

#[test]
fn put_verifies_as_bytes_land_and_leaves_nothing_on_failure() {
    let temp = tempfile::tempdir().expect("temp");
    let dir = temp.path().join("chunks");
    let (store, _) = ChunkStore::open(&dir).expect("store");
    let good = noise(1000, 3);
    let digest: [u8; 32] = <sha2::Sha256 as sha2::Digest>::digest(&good).into();
    let err = store.put(&digest, &good[..999]).unwrap_err();
    assert!(matches!(err, ReleaseError::ChunkMismatch { .. }), "{err}");
    let too_long = std::io::repeat(0).take_bytes(u64::from(CHUNK_BYTES_MAX) + 10);
    let err = store.put(&digest, too_long).unwrap_err();
    assert!(
        matches!(
            err,
            ReleaseError::OverLimit {
                what: "chunk bytes",
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(
        fs::read_dir(&dir).expect("ls").count(),
        0,
        "no name, no temporary file"
    );
    assert_eq!(store.put(&digest, good.as_slice()).expect("put"), 1000);
    assert!(store.has(&digest));
    assert_eq!(store.get(&digest).expect("get"), Some(good));
    // A temporary file left by a crash mid-put is removed at open: the
    // chunk it was is simply absent.
    fs::write(dir.join(".tmp-abc-1-0"), b"partial").expect("tmp");
    let (_, removed) = ChunkStore::open(&dir).expect("reopen");
    assert_eq!(removed, 1);
}

trait TakeBytes: std::io::Read + Sized {
    fn take_bytes(self, n: u64) -> std::io::Take<Self> {
        self.take(n)
    }
}
impl<R: std::io::Read> TakeBytes for R {}

#[test]
fn format_1_bundle_reads_as_a_tree_of_one_file() {
    use protocol::bundle::{self, ManifestFields};
    let (secret, public) = bundle::keygen();
    let app = noise(3 * 1024 * 1024, 4);
    let file = bundle::sign(
        &secret,
        &app,
        ManifestFields {
            name: "hello".into(),
            version: "1".into(),
            app_file_name: "server".into(),
            run: vec!["./server".into()],
            probe: fields().probe,
        },
    )
    .expect("sign v1");
    let verified = bundle::verify(&public, &file).expect("verify v1");
    let v1 = releases::v1::tree_of_bundle(&verified).expect("tree");
    let m = &v1.release.manifest;
    assert_eq!(m.format, 1);
    assert_eq!(v1.release.digest, verified.digest);
    assert_eq!(m.entries.len(), 1);
    assert_eq!(m.entries[0].path, "server");
    assert_eq!(m.entries[0].mode, Mode::Executable);
    assert_eq!(m.entries[0].sha256, verified.manifest.app_sha256);
    let temp = tempfile::tempdir().expect("temp");
    let (store, _) = ChunkStore::open(&temp.path().join("chunks")).expect("store");
    for (chunk, bytes) in &v1.chunks {
        store.put(&chunk.sha256, bytes.as_slice()).expect("put");
    }
    assemble(m, &store, &temp.path().join("r")).expect("assemble");
    assert_eq!(fs::read(temp.path().join("r/server")).expect("read"), app);
}

/// What garbage collection walks: the chunks stored, nothing else of the
/// directory (a chunk being written, a stray file), and a removed chunk is
/// gone from the listing.
#[test]
fn entries_list_the_stored_chunks_and_only_them() {
    let temp = tempfile::tempdir().expect("temp");
    let dir = temp.path().join("chunks");
    let (store, _) = ChunkStore::open(&dir).expect("store");
    let chunks: [&[u8]; 2] = [b"one chunk", b"another chunk"];
    let digests: Vec<[u8; 32]> = chunks
        .iter()
        .map(|c| {
            let digest: [u8; 32] = sha2::Sha256::digest(c).into();
            store.put_bytes(&digest, c).expect("put");
            digest
        })
        .collect();
    fs::write(dir.join(".tmp-half-written"), b"x").expect("temp file");
    fs::write(dir.join("README"), b"not a chunk").expect("stray");
    let mut listed: Vec<_> = store
        .entries()
        .expect("entries")
        .iter()
        .map(|c| (c.digest, c.bytes))
        .collect();
    listed.sort();
    let mut expected: Vec<_> = digests
        .iter()
        .zip(chunks)
        .map(|(d, c)| (*d, c.len() as u64))
        .collect();
    expected.sort();
    assert_eq!(listed, expected);
    store.remove(&digests[0]).expect("remove");
    let left: Vec<_> = store
        .entries()
        .expect("entries")
        .iter()
        .map(|c| c.digest)
        .collect();
    assert_eq!(left, [digests[1]]);
}
