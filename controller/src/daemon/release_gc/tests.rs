use super::*;
use ed25519_dalek::SigningKey;
use protocol::bundle::ProbeSpec;
use sha2::Digest as _;
use std::fs;
use std::path::{Path, PathBuf};

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "fleetweft-release-gc-{name}-{}",
        std::process::id()
    ));
    let _ = fs::remove_dir_all(&dir);
    dir
}

fn probe() -> ProbeSpec {
    ProbeSpec {
        path: "/health".into(),
        expect_status: 200,
        expect_body: "ok".into(),
        expect_json: None,
    }
}

/// A tree release of `files` (path, bytes), signed, its chunks stored and
/// its manifest accepted.
fn tree(store: &ReleaseStore, key: &SigningKey, dir: &Path, files: &[(&str, &[u8])]) -> Digest {
    let root = dir.join(format!("src-{}", files.len()));
    let _ = fs::remove_dir_all(&root);
    for (path, bytes) in files {
        fs::create_dir_all(root.join(path).parent().expect("parent")).expect("dirs");
        fs::write(root.join(path), bytes).expect("write");
    }
    let fields = releases::ReleaseFields {
        name: "shop".into(),
        version: format!("v{}", files.len()),
        run: vec!["./app".into()],
        probe: probe(),
        limits: Default::default(),
        migration: None,
    };
    let mut sink = releases::tree::store_sink(&store.chunks);
    let bytes = releases::tree::sign_dir(key, fields, &root, &mut sink).expect("sign");
    store
        .accept(&key.verifying_key(), &bytes)
        .expect("accept")
        .digest
}

fn bundle(dir: &BundleDir, key: &SigningKey) -> Digest {
    let fields = protocol::bundle::ManifestFields {
        name: "tiny".into(),
        version: "1".into(),
        app_file_name: "app.py".into(),
        run: vec!["python3".into(), "app.py".into()],
        probe: probe(),
    };
    let bytes = protocol::bundle::sign(key, b"print('hi')\n", fields).expect("sign");
    let digest = protocol::bundle::bundle_digest(&bytes);
    dir.store(digest, &bytes).expect("store");
    digest
}

fn chunk_count(store: &ReleaseStore) -> usize {
    store.chunks.entries().expect("entries").len()
}

/// Makes a chunk look written `age` ago.
fn age(store: &ReleaseStore, digest: &Sha256Bytes, age: Duration) {
    let file = fs::File::options()
        .write(true)
        .open(store.chunks.path(digest))
        .expect("open chunk");
    file.set_modified(SystemTime::now() - age)
        .expect("set mtime");
}

struct Fixture {
    dir: PathBuf,
    bundles: BundleDir,
    store: ReleaseStore,
    key: SigningKey,
}

fn fixture(name: &str) -> Fixture {
    let dir = temp_dir(name);
    let (bundles, _) = BundleDir::open(dir.join("bundles")).expect("bundles");
    let store = ReleaseStore::open(&dir).expect("store");
    let (key, _) = protocol::bundle::keygen();
    Fixture {
        dir,
        bundles,
        store,
        key,
    }
}

#[test]
fn the_list_names_both_formats_and_a_damaged_manifest() {
    let f = fixture("list");
    let one = bundle(&f.bundles, &f.key);
    let two = tree(
        &f.store,
        &f.key,
        &f.dir,
        &[("a.txt", b"alpha"), ("b/c.txt", b"beta")],
    );
    let damaged = tree(&f.store, &f.key, &f.dir, &[("a.txt", b"alpha")]);
    fs::write(f.store.manifests.path(damaged), b"no longer a manifest").expect("damage");
    let listed = list(&f.bundles, &f.store, &f.key.verifying_key()).expect("list");
    let first = &listed[0];
    assert_eq!(
        (first.digest.as_str(), first.format, first.name.as_str()),
        (one.to_hex().as_str(), 1, "tiny")
    );
    assert_eq!(first.content_bytes, 12);
    let tree_row = listed
        .iter()
        .find(|s| s.digest == two.to_hex())
        .expect("tree listed");
    assert_eq!(
        (tree_row.format, tree_row.chunks, tree_row.content_bytes),
        (2, 2, 9)
    );
    assert_eq!(tree_row.problem, None);
    let broken = listed
        .iter()
        .find(|s| s.digest == damaged.to_hex())
        .expect("listed");
    assert!(broken.problem.is_some(), "{broken:?}");
    assert_eq!(listed.len(), 3);
    fs::remove_dir_all(&f.dir).ok();
}

#[test]
fn removing_a_release_drops_only_chunks_nothing_else_names() {
    let f = fixture("remove");
    let key = f.key.verifying_key();
    let shared: &[u8] = b"shared by both releases";
    let old = tree(
        &f.store,
        &f.key,
        &f.dir,
        &[("s", shared), ("o", b"only the old")],
    );
    let new = tree(
        &f.store,
        &f.key,
        &f.dir,
        &[("s", shared), ("n", b"new"), ("m", b"more")],
    );
    // An upload that never posted its manifest: one chunk old, one fresh.
    let stale: Sha256Bytes = sha2::Sha256::digest(b"stale orphan").into();
    let fresh: Sha256Bytes = sha2::Sha256::digest(b"fresh orphan").into();
    f.store
        .chunks
        .put_bytes(&stale, b"stale orphan")
        .expect("put");
    f.store
        .chunks
        .put_bytes(&fresh, b"fresh orphan")
        .expect("put");
    age(
        &f.store,
        &stale,
        Duration::from_millis(ORPHAN_CHUNK_AGE_MS + 60_000),
    );
    assert_eq!(chunk_count(&f.store), 6);

    let removed = remove(&f.bundles, &f.store, &key, old, SystemTime::now())
        .expect("remove")
        .expect("held");
    assert_eq!((removed.chunks_removed, removed.chunk_bytes_freed), (1, 12));
    assert_eq!(
        (removed.orphans_removed, removed.orphan_bytes_freed),
        (1, 12)
    );
    assert_eq!(removed.sweep_problem, None);
    assert!(!f.store.knows(old));
    assert!(
        f.store.chunks.has(&fresh),
        "a fresh orphan may be an upload under way"
    );
    assert!(f
        .store
        .missing(&f.store.read(&key, new).expect("new"))
        .is_empty());
    assert_eq!(chunk_count(&f.store), 4);
    let again = remove(&f.bundles, &f.store, &key, old, SystemTime::now()).expect("remove");
    assert_eq!(again, None, "not held any more");
    fs::remove_dir_all(&f.dir).ok();
}

#[test]
fn removing_a_bundle_keeps_every_named_chunk() {
    let f = fixture("bundle");
    let key = f.key.verifying_key();
    let one = bundle(&f.bundles, &f.key);
    let two = tree(&f.store, &f.key, &f.dir, &[("a", b"alpha")]);
    // Even a chunk as old as an orphan stays while a manifest names it.
    for chunk in f
        .store
        .read(&key, two)
        .expect("read")
        .manifest
        .unique_chunks()
    {
        age(
            &f.store,
            &chunk.sha256,
            Duration::from_millis(2 * ORPHAN_CHUNK_AGE_MS),
        );
    }
    let removed = remove(&f.bundles, &f.store, &key, one, SystemTime::now())
        .expect("remove")
        .expect("held");
    assert_eq!(
        (removed.release.format, removed.release.name.as_str()),
        (1, "tiny")
    );
    assert_eq!(removed.chunks_removed + removed.orphans_removed, 0);
    assert!(!f.bundles.path(one).exists());
    assert_eq!(
        find(&f.bundles, &f.store, &key, two).map(|s| s.chunks),
        Some(1)
    );
    assert_eq!(chunk_count(&f.store), 1);
    fs::remove_dir_all(&f.dir).ok();
}
