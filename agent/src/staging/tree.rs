//! Staging a format-2 (tree) release (issue #23 item 2).
//!
//! The release digest names the signed manifest; it is fetched like a
//! format-1 bundle, then verified (digest and signature: a failure is
//! permanent). Its content chunks land in the agent's content-addressed
//! store `DATA/chunks` ([`releases::ChunkStore`]: hashed as they land,
//! temporary file, fsync, rename). Chunks already held, say after a
//! restart mid-fetch, are re-hashed before they are trusted: a torn or
//! wrong one is removed and fetched again (the model's rule,
//! `model/src/chunks.rs`). Then the tree is assembled under a staging name
//! in `DATA/releases`, fsynced and renamed to `DATA/releases/<digest>/`,
//! with the signed manifest stored beside it as
//! `DATA/releases/<digest>.release` (written first, so a tree under its
//! real name always has its manifest).
//!
//! Nothing on disk is trusted on its own word: [`load`] and [`read_back`]
//! re-verify the manifest and the whole tree ([`releases::tree::verify_dir`]).

use super::{release_dir, sync_dir, write_synced, Release, StageError};
use ed25519_dalek::VerifyingKey;
use model::platform::Arch;
use model::Digest;
use releases::readback::{verify_dir_cached, ReadBackCache};
use releases::{ChunkRef, ChunkStore, ReleaseError, VerifiedRelease};
use std::path::{Path, PathBuf};

/// The agent's chunk store, under the data directory.
pub const CHUNKS_DIR: &str = "chunks";
/// Extension of the signed manifest stored beside a tree release.
pub const MANIFEST_EXTENSION: &str = "release";

/// Where the signed manifest of the tree release `digest` is stored.
pub fn manifest_path(data_dir: &Path, digest: Digest) -> PathBuf {
    data_dir
        .join("releases")
        .join(format!("{}.{MANIFEST_EXTENSION}", digest.to_hex()))
}

/// Whether fetched signed bytes are a format-2 release manifest (rather
/// than a format-1 bundle): told by the magic, both are then verified.
pub fn is_tree_release(bytes: &[u8]) -> bool {
    bytes.starts_with(releases::manifest::MAGIC)
}

/// Whether `digest` was staged as a tree (its signed manifest is there).
pub fn is_installed_tree(data_dir: &Path, digest: Digest) -> bool {
    manifest_path(data_dir, digest).is_file()
}

/// Checks fetched `bytes` as the release `digest`: they must hash to it and
/// verify under `key`. Both failures are permanent. The manifest returned
/// is the tree a node of `arch` stages ([`releases::Manifest::into_arch`]:
/// the common files and its architecture's tree, when the release has
/// per-architecture trees); a release without a tree for `arch` is refused,
/// permanently, before anything is fetched (issue #24 item 5).
pub fn verify(
    key: &VerifyingKey,
    arch: Arch,
    digest: Digest,
    bytes: &[u8],
) -> Result<VerifiedRelease, StageError> {
    let actual = releases::release_digest(bytes);
    if actual != digest {
        return Err(StageError::WrongDigest { digest, actual });
    }
    let refused = |source| StageError::TreeRefused { digest, source };
    let verified = releases::verify(key, bytes).map_err(refused)?;
    Ok(VerifiedRelease {
        manifest: verified.manifest.into_arch(arch).map_err(refused)?,
        digest: verified.digest,
    })
}

/// Partly fetched chunks, kept across a restart ([`releases::PartialChunks`]).
pub const PARTIAL_CHUNKS_DIR: &str = "chunks-partial";

/// Opens (creating) the agent's partly fetched chunks.
pub fn open_partials(
    data_dir: &Path,
    digest: Digest,
) -> Result<releases::PartialChunks, StageError> {
    releases::PartialChunks::open(&data_dir.join(PARTIAL_CHUNKS_DIR))
        .map_err(|source| StageError::Tree { digest, source })
}

/// Opens (creating) the agent's chunk store, removing what a crash left
/// half written.
pub fn open_store(data_dir: &Path, digest: Digest) -> Result<ChunkStore, StageError> {
    ChunkStore::open(&data_dir.join(CHUNKS_DIR))
        .map(|(store, _removed)| store)
        .map_err(|source| StageError::Tree { digest, source })
}

/// Bytes staging `release` adds to the disk: the tree's files, the signed
/// manifest (`manifest_bytes`) and the chunks `store` does not hold by
/// name (what the disk budget must leave room for).
pub fn bytes_to_stage(release: &VerifiedRelease, manifest_bytes: usize, store: &ChunkStore) -> u64 {
    let missing: u64 = release
        .manifest
        .unique_chunks()
        .iter()
        .filter(|c| !store.has(&c.sha256))
        .map(|c| u64::from(c.len))
        .sum();
    release.manifest.total_bytes() + manifest_bytes as u64 + missing
}

/// The distinct chunks of `release` that `store` does not hold intact.
/// Every held chunk is re-read and re-hashed first: a torn one (wrong
/// bytes, wrong length) is removed and listed, never trusted.
pub fn missing_chunks(
    release: &VerifiedRelease,
    store: &ChunkStore,
) -> Result<Vec<ChunkRef>, StageError> {
    let digest = release.digest;
    let mut missing = Vec::new();
    for chunk in release.manifest.unique_chunks() {
        match store.get(&chunk.sha256) {
            Ok(Some(bytes)) if bytes.len() == chunk.len as usize => {}
            Ok(Some(bytes)) => {
                tracing::warn!(
                    "chunk {} is {} bytes, the release says {}: fetching it again",
                    chunk.hex(),
                    bytes.len(),
                    chunk.len
                );
                store
                    .remove(&chunk.sha256)
                    .map_err(|source| StageError::Tree { digest, source })?;
                missing.push(chunk);
            }
            Ok(None) => missing.push(chunk),
            Err(e @ ReleaseError::TornChunk { .. }) => {
                tracing::warn!("{e}");
                missing.push(chunk);
            }
            Err(source) => return Err(StageError::Tree { digest, source }),
        }
    }
    Ok(missing)
}

/// Installs the verified `release` (whose signed bytes are `bytes`) from
/// the chunks in `store`: the signed manifest is stored beside the tree
/// (temporary file, fsync, rename, fsync), then the tree is assembled
/// under a staging name, fsynced and renamed into place. An already
/// installed tree is re-verified instead ([`load`]).
pub fn install(
    data_dir: &Path,
    key: &VerifyingKey,
    arch: Arch,
    release: &VerifiedRelease,
    bytes: &[u8],
    store: &ChunkStore,
) -> Result<Release, StageError> {
    let digest = release.digest;
    let dir = release_dir(data_dir, digest);
    let manifest_file = manifest_path(data_dir, digest);
    if dir.exists() && manifest_file.is_file() {
        return load(data_dir, key, arch, digest);
    }
    let parent = super::releases_parent(data_dir)?;
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| StageError::Io { path, source }
    };
    // A directory under the real name without its manifest beside it was
    // never whole by this code's order: it is not trusted, it is rebuilt.
    if dir.exists() {
        std::fs::remove_dir_all(&dir).map_err(io(&dir))?;
    }
    let tmp = parent.join(format!(".{}.{MANIFEST_EXTENSION}.tmp", digest.to_hex()));
    write_synced(&tmp, bytes)?;
    std::fs::rename(&tmp, &manifest_file).map_err(io(&manifest_file))?;
    sync_dir(&parent).map_err(io(&parent))?;
    remove_stale_staging(&parent, digest);
    releases::tree::assemble(&release.manifest, store, &dir)
        .map_err(|source| StageError::Tree { digest, source })?;
    of_release(release, dir)
}

/// Removes the staging directories an earlier process left for `digest`
/// (killed mid-assembly: `tree::assemble` names them by process id, and
/// only cleans its own). Never trusted, only in the way of disk space;
/// best effort.
fn remove_stale_staging(parent: &Path, digest: Digest) {
    let prefix = format!(".{}.staging-", digest.to_hex());
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_name().to_string_lossy().starts_with(&prefix) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// Loads the installed tree release `digest`: its stored manifest must
/// hash to `digest` and verify, and the tree must match it exactly
/// ([`releases::tree::verify_dir`]: every file, mode, size and chunk). A
/// tree that does not is rebuilt from the verified chunks in the agent's
/// store ([`repair`]), as a format-1 release's app file is rewritten from
/// its bundle; when that cannot be done it is `TreeAltered`.
pub fn load(
    data_dir: &Path,
    key: &VerifyingKey,
    arch: Arch,
    digest: Digest,
) -> Result<Release, StageError> {
    let release = read_manifest(data_dir, key, arch, digest)?;
    let dir = release_dir(data_dir, digest);
    if let Err(source) = releases::tree::verify_dir(&release.manifest, &dir) {
        tracing::warn!("release {digest}: the installed tree was altered ({source}): rebuilding it from its chunks");
        if let Err(why) = repair(data_dir, &release, &dir) {
            tracing::warn!("release {digest}: cannot rebuild the tree: {why}");
            return Err(StageError::TreeAltered { digest, source });
        }
    }
    of_release(&release, dir)
}

/// Rebuilds the altered tree `dir` of the verified `release` from the
/// chunk store: the altered tree is renamed aside under a staging name,
/// the tree assembled anew (every chunk re-verified as read, the whole
/// written under a staging name, fsynced and renamed into place), and the
/// altered one removed. If the assembly fails (a chunk missing or torn)
/// the altered tree is renamed back, so nothing is lost and the caller
/// reports it. A crash in between leaves no tree under the real name
/// (observed as absent: staged again) and a staging name that the next
/// install removes.
fn repair(data_dir: &Path, release: &VerifiedRelease, dir: &Path) -> Result<(), StageError> {
    let digest = release.digest;
    let store = open_store(data_dir, digest)?;
    let parent = super::releases_parent(data_dir)?;
    let aside = parent.join(format!(
        ".{}.staging-altered-{}",
        digest.to_hex(),
        std::process::id()
    ));
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| StageError::Io { path, source }
    };
    // A leftover of an earlier repair in this process id is never trusted.
    let _ = std::fs::remove_dir_all(&aside);
    std::fs::rename(dir, &aside).map_err(io(dir))?;
    if let Err(source) = releases::tree::assemble(&release.manifest, &store, dir) {
        std::fs::rename(&aside, dir).map_err(io(dir))?;
        return Err(StageError::Tree { digest, source });
    }
    // Best effort: the altered tree is only in the way of disk space now.
    let _ = std::fs::remove_dir_all(&aside);
    Ok(())
}

/// Reads back the installed tree release `digest` for a proof:
/// `Digest(digest)` only when the tree on disk matches its manifest;
/// `AppFileOf` when it is instead, file for file, another tree release
/// installed beside it ([`tree_release_of`]); `AppFileAltered` when a file
/// differs, is missing or is extra otherwise;
/// `Unreadable` when the manifest or the tree cannot be read; `Digest` of
/// what is there when the stored manifest hashes to something else. Every
/// byte of the tree is hashed (see [`read_back_cached`] for the bounded
/// read-back a running agent does).
pub fn read_back(
    data_dir: &Path,
    key: &VerifyingKey,
    arch: Arch,
    digest: Digest,
) -> model::ArtifactRead {
    read_back_with(
        data_dir,
        key,
        arch,
        digest,
        &mut ReadBackCache::default(),
        0,
    )
}

/// Bytes of chunks each read-back of a tree re-hashes besides the files
/// whose stamp changed (`releases::readback`): what it costs on an
/// unchanged tree, about 40 ms of SHA-256 on this project's 2-core VM. A
/// change no stamp shows (bit rot, a raw-device write) is found within
/// release bytes / this many read-backs: 64 for a 4 GiB release.
pub const READBACK_REHASH_BYTES_MAX: u64 = 64 * 1024 * 1024;
/// Releases whose read-back stamps are kept: the serving one, and a few
/// more across switches; beyond it the map starts again (each costs one
/// full hash more, never a wrong answer).
pub const READBACK_CACHES_MAX: usize = 4;

/// What earlier read-backs verified, per release, in this process only.
#[derive(Debug, Default)]
pub struct ReadBacks(std::sync::Mutex<std::collections::HashMap<Digest, ReadBackCache>>);

/// [`read_back`] at a bounded cost: the tree is listed and stat'ed whole,
/// files whose stamp moved since they last verified are hashed whole,
/// and [`READBACK_REHASH_BYTES_MAX`] of the rest in turn
/// (`releases::readback::verify_dir_cached`, whose documentation says
/// what this catches and when).
pub fn read_back_cached(
    data_dir: &Path,
    key: &VerifyingKey,
    arch: Arch,
    digest: Digest,
    caches: &ReadBacks,
) -> model::ArtifactRead {
    // A panic while holding it left stamps no worse than absent ones.
    let mut map = caches.0.lock().unwrap_or_else(|p| p.into_inner());
    if !map.contains_key(&digest) && map.len() >= READBACK_CACHES_MAX {
        map.clear();
    }
    let cache = map.entry(digest).or_default();
    read_back_with(
        data_dir,
        key,
        arch,
        digest,
        cache,
        READBACK_REHASH_BYTES_MAX,
    )
}

fn read_back_with(
    data_dir: &Path,
    key: &VerifyingKey,
    arch: Arch,
    digest: Digest,
    cache: &mut ReadBackCache,
    rehash_bytes_max: u64,
) -> model::ArtifactRead {
    let release = match read_manifest(data_dir, key, arch, digest) {
        Ok(release) => release,
        Err(StageError::WrongDigest { actual, .. }) => return model::ArtifactRead::Digest(actual),
        // The release has no tree for this node's architecture (its
        // declared architecture changed since it was staged): whatever
        // tree is there is not one this node may serve.
        Err(StageError::TreeRefused {
            source: ReleaseError::NoTreeForArch { .. },
            ..
        }) => return model::ArtifactRead::AppFileAltered(digest),
        // The bytes hash to the intended release, so they are it; they can
        // only stop verifying if the trusted key changed.
        Err(StageError::TreeRefused { .. }) => return model::ArtifactRead::Digest(digest),
        Err(_) => return model::ArtifactRead::Unreadable,
    };
    let dir = release_dir(data_dir, digest);
    let now = std::time::SystemTime::now();
    match verify_dir_cached(&release.manifest, &dir, cache, rehash_bytes_max, now) {
        Ok(cost) => {
            tracing::debug!(
                files_hashed = cost.files_hashed,
                bytes_hashed = cost.bytes_hashed,
                "read back {digest}"
            );
            model::ArtifactRead::Digest(digest)
        }
        Err(ReleaseError::Io { .. }) => model::ArtifactRead::Unreadable,
        Err(_) => match tree_release_of(data_dir, key, arch, digest, &dir) {
            Some(release) => model::ArtifactRead::AppFileOf {
                installed: digest,
                release,
            },
            None => model::ArtifactRead::AppFileAltered(digest),
        },
    }
}

/// The tree release installed beside `installed` whose tree `dir` is, file
/// for file: what an altered tree really is, when it is a release at all
/// (an older release swapped in behind the route, issue #24 item 1). A
/// release counts only if its stored manifest verifies under `key`; its
/// own tree on disk is not read. Each candidate's listing is matched first
/// (sizes, modes, names), and only a release of at most
/// [`READBACK_REHASH_BYTES_MAX`] is hashed whole against `dir`, at most
/// [`super::RELEASES_COMPARED_MAX`] of them: a larger one stays merely
/// altered.
fn tree_release_of(
    data_dir: &Path,
    key: &VerifyingKey,
    arch: Arch,
    installed: Digest,
    dir: &Path,
) -> Option<Digest> {
    let entries = std::fs::read_dir(data_dir.join("releases")).ok()?;
    entries
        .flatten()
        .filter_map(|entry| crate::probe::parse_digest(entry.file_name().to_str()?))
        .filter(|d| *d != installed && is_installed_tree(data_dir, *d))
        .take(super::RELEASES_COMPARED_MAX)
        .find(|d| {
            read_manifest(data_dir, key, arch, *d).is_ok_and(|r| {
                r.manifest.total_bytes() <= READBACK_REHASH_BYTES_MAX
                    && releases::tree::verify_dir(&r.manifest, dir).is_ok()
            })
        })
}

/// The stored signed manifest of `digest`, checked (hash and signature).
fn read_manifest(
    data_dir: &Path,
    key: &VerifyingKey,
    arch: Arch,
    digest: Digest,
) -> Result<VerifiedRelease, StageError> {
    let path = manifest_path(data_dir, digest);
    let bytes = releases::manifest::read_release_file(&path).map_err(|e| match e {
        ReleaseError::Io { path, source } => StageError::Io { path, source },
        source => StageError::TreeRefused { digest, source },
    })?;
    verify(key, arch, digest, &bytes)
}

/// The runnable view of a verified tree release installed in `dir`.
fn of_release(release: &VerifiedRelease, dir: PathBuf) -> Result<Release, StageError> {
    let m = &release.manifest;
    let probe = m
        .probe
        .to_spec()
        .map_err(|source| StageError::TreeRefused {
            digest: release.digest,
            source,
        })?;
    Ok(Release {
        digest: release.digest,
        code: release.digest,
        configured: None,
        dir,
        name: m.name.clone(),
        version: m.version.clone(),
        run: m.run.clone(),
        probe,
        limits: m.limits.clone(),
        migration: m.migration.clone(),
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use protocol::bundle::ProbeSpec;
    use sha2::{Digest as _, Sha256};

    /// A file of `bytes` at `path`, in one chunk.
    fn one_chunk_entry(path: &str, bytes: &[u8]) -> releases::Entry {
        releases::Entry {
            path: path.into(),
            mode: releases::Mode::File,
            size: bytes.len() as u64,
            sha256: Sha256::digest(bytes).into(),
            chunks: vec![ChunkRef {
                sha256: Sha256::digest(bytes).into(),
                len: bytes.len() as u32,
            }],
        }
    }

    /// The test release's fields: `python3 app.py`, probed for `hi`.
    fn test_fields(version: &str) -> releases::ReleaseFields {
        releases::ReleaseFields {
            name: "t".into(),
            version: version.into(),
            run: vec!["python3".into(), "app.py".into()],
            probe: ProbeSpec {
                path: "/".into(),
                expect_status: 200,
                expect_body: "hi".into(),
                expect_json: None,
            },
            limits: Default::default(),
            migration: None,
        }
    }

    /// A release of `files` (path, bytes), one chunk per file, signed.
    pub(crate) fn signed(
        key: &ed25519_dalek::SigningKey,
        files: &[(&str, &[u8])],
    ) -> (Vec<u8>, Vec<Vec<u8>>) {
        let entries = files
            .iter()
            .map(|(path, bytes)| one_chunk_entry(path, bytes))
            .collect();
        let bytes = releases::sign(key, test_fields("v2"), entries).expect("sign");
        (bytes, files.iter().map(|(_, b)| b.to_vec()).collect())
    }

    #[test]
    fn a_tree_is_staged_from_chunks_and_read_back_against_its_manifest() {
        let dir = tempfile::tempdir().expect("temp dir");
        let data = dir.path();
        let (signing, verifying) = protocol::bundle::keygen();
        let files: [(&str, &[u8]); 2] = [("app.py", b"print('hi')"), ("static/a.css", b"body{}")];
        let (bytes, contents) = signed(&signing, &files);
        let digest = releases::release_digest(&bytes);
        let release = verify(&verifying, Arch::current(), digest, &bytes).expect("verifies");
        let store = open_store(data, digest).expect("store");
        assert_eq!(missing_chunks(&release, &store).expect("missing").len(), 2);
        // One chunk is held but torn: it is listed again, and removed.
        let first: [u8; 32] = Sha256::digest(&contents[0]).into();
        std::fs::write(store.path(&first), b"torn").expect("torn chunk");
        store
            .put_bytes(&Sha256::digest(&contents[1]).into(), &contents[1])
            .expect("put");
        let missing = missing_chunks(&release, &store).expect("missing");
        assert_eq!(missing.len(), 1);
        assert_eq!(missing[0].sha256, first);
        assert!(!store.has(&first), "the torn chunk was removed");
        store.put_bytes(&first, &contents[0]).expect("put");
        assert!(missing_chunks(&release, &store).expect("none").is_empty());

        // A process killed mid-assembly left its staging directory.
        let stale = data
            .join("releases")
            .join(format!(".{}.staging-1", digest.to_hex()));
        std::fs::create_dir_all(stale.join("static")).expect("stale staging dir");
        let installed =
            install(data, &verifying, Arch::current(), &release, &bytes, &store).expect("install");
        assert!(!stale.exists(), "the stale staging directory was removed");
        assert_eq!(installed.run, vec!["python3", "app.py"]);
        let tree = release_dir(data, digest);
        assert_eq!(
            std::fs::read(tree.join("static/a.css")).expect("css"),
            b"body{}"
        );
        assert!(is_installed_tree(data, digest));
        assert_eq!(
            read_back(data, &verifying, Arch::current(), digest),
            model::ArtifactRead::Digest(digest)
        );
        assert!(crate::staging::load(data, &verifying, Arch::current(), digest).is_ok());
        let caches = ReadBacks::default();
        assert_eq!(
            read_back_cached(data, &verifying, Arch::current(), digest, &caches),
            model::ArtifactRead::Digest(digest)
        );
        std::fs::write(tree.join("static/a.css"), b"body{x}").expect("tamper");
        assert_eq!(
            read_back(data, &verifying, Arch::current(), digest),
            model::ArtifactRead::AppFileAltered(digest)
        );
        assert_eq!(
            read_back_cached(data, &verifying, Arch::current(), digest, &caches),
            model::ArtifactRead::AppFileAltered(digest)
        );
        // At load (a start, or recovery's observation) the altered tree is
        // rebuilt from the verified chunks: same-size edit, extra file.
        std::fs::write(tree.join("app.py"), b"print('HI')").expect("same-size edit");
        std::fs::write(tree.join("extra.txt"), b"x").expect("extra file");
        assert!(matches!(
            crate::staging::observe(data, &verifying, Arch::current(), digest),
            crate::staging::Installed::ReVerified(_)
        ));
        assert_eq!(
            std::fs::read(tree.join("app.py")).expect("app"),
            b"print('hi')"
        );
        assert_eq!(
            std::fs::read(tree.join("static/a.css")).expect("css"),
            b"body{}"
        );
        assert!(!tree.join("extra.txt").exists());
        assert_eq!(
            read_back(data, &verifying, Arch::current(), digest),
            model::ArtifactRead::Digest(digest)
        );
        // Without its chunks it cannot be rebuilt: reported, and the
        // altered tree is left as it was (never lost).
        store.remove(&first).expect("remove a chunk");
        std::fs::write(tree.join("static/a.css"), b"body{y}").expect("tamper");
        assert!(matches!(
            crate::staging::observe(data, &verifying, Arch::current(), digest),
            crate::staging::Installed::Unknown(StageError::TreeAltered { .. })
        ));
        assert_eq!(
            std::fs::read(tree.join("static/a.css")).expect("css"),
            b"body{y}"
        );
        let leftovers = std::fs::read_dir(data.join("releases"))
            .expect("releases")
            .count();
        assert_eq!(leftovers, 2, "the tree and its manifest, no staging name");
    }

    /// Signs `files` as a tree release, puts its chunks in the agent's
    /// store and installs it; returns its digest.
    fn install_signed(
        data: &Path,
        signing: &ed25519_dalek::SigningKey,
        verifying: &VerifyingKey,
        files: &[(&str, &[u8])],
    ) -> Digest {
        let (bytes, contents) = signed(signing, files);
        let digest = releases::release_digest(&bytes);
        let release = verify(verifying, Arch::current(), digest, &bytes).expect("verifies");
        let store = open_store(data, digest).expect("store");
        for content in &contents {
            store
                .put_bytes(&Sha256::digest(content).into(), content)
                .expect("put");
        }
        install(data, verifying, Arch::current(), &release, &bytes, &store).expect("install");
        digest
    }

    /// Issue #24 item 1: a tree that is, file for file, another installed
    /// tree release is named as that release; one that is no release's
    /// stays merely altered.
    #[test]
    fn an_altered_tree_that_is_another_release_is_named() {
        let dir = tempfile::tempdir().expect("temp dir");
        let data = dir.path();
        let (signing, verifying) = protocol::bundle::keygen();
        let css: &[u8] = b"body{}";
        let one = install_signed(
            data,
            &signing,
            &verifying,
            &[("app.py", b"print('one')"), ("static/a.css", css)],
        );
        let two = install_signed(
            data,
            &signing,
            &verifying,
            &[("app.py", b"print('two')"), ("static/a.css", css)],
        );
        let tree = release_dir(data, two);
        std::fs::write(tree.join("app.py"), b"print('one')").expect("swap one's app in");
        let caches = ReadBacks::default();
        let named = model::ArtifactRead::AppFileOf {
            installed: two,
            release: one,
        };
        assert_eq!(read_back(data, &verifying, Arch::current(), two), named);
        assert_eq!(
            read_back_cached(data, &verifying, Arch::current(), two, &caches),
            named
        );
        std::fs::write(tree.join("app.py"), b"print('two!')").expect("no release's app");
        assert_eq!(
            read_back(data, &verifying, Arch::current(), two),
            model::ArtifactRead::AppFileAltered(two)
        );
    }

    #[test]
    fn a_foreign_or_altered_manifest_is_a_permanent_failure() {
        let (signing, _) = protocol::bundle::keygen();
        let (_, stranger) = protocol::bundle::keygen();
        let (bytes, _) = signed(&signing, &[("app.py", b"x")]);
        let digest = releases::release_digest(&bytes);
        let e = verify(&stranger, Arch::current(), digest, &bytes).expect_err("foreign key");
        assert!(matches!(e, StageError::TreeRefused { .. }) && e.permanent());
        let e = verify(&stranger, Arch::current(), Digest::repeat(9), &bytes)
            .expect_err("wrong digest");
        assert!(matches!(e, StageError::WrongDigest { .. }) && e.permanent());
        assert!(is_tree_release(&bytes));
    }

    /// A release with a common `app.py` and a `bin/native` per
    /// architecture (`x86_64` and `aarch64`), one chunk per file, signed.
    fn signed_arches(key: &ed25519_dalek::SigningKey) -> Vec<u8> {
        let trees = vec![
            releases::ArchTree {
                arch: Arch::X86_64,
                entries: vec![one_chunk_entry("bin/native", b"x86")],
            },
            releases::ArchTree {
                arch: Arch::Aarch64,
                entries: vec![one_chunk_entry("bin/native", b"arm!")],
            },
        ];
        let common = vec![one_chunk_entry("app.py", b"print('hi')")];
        releases::sign_arches(key, test_fields("v3"), common, trees).expect("sign")
    }

    #[test]
    fn an_agent_stages_only_its_own_architecture_s_tree() {
        let (signing, verifying) = protocol::bundle::keygen();
        let bytes = signed_arches(&signing);
        let digest = releases::release_digest(&bytes);
        for (arch, native) in [(Arch::X86_64, &b"x86"[..]), (Arch::Aarch64, &b"arm!"[..])] {
            let dir = tempfile::tempdir().expect("temp dir");
            let data = dir.path();
            let release = verify(&verifying, arch, digest, &bytes).expect("verifies");
            let store = open_store(data, digest).expect("store");
            let missing = missing_chunks(&release, &store).expect("missing");
            assert_eq!(missing.len(), 2, "{arch}: app.py and its own binary only");
            for content in [&b"print('hi')"[..], native] {
                store
                    .put_bytes(&Sha256::digest(content).into(), content)
                    .expect("put");
            }
            install(data, &verifying, arch, &release, &bytes, &store).expect("install");
            let tree = release_dir(data, digest);
            assert_eq!(
                std::fs::read(tree.join("bin/native")).expect("read"),
                native
            );
            assert_eq!(
                read_back(data, &verifying, arch, digest),
                model::ArtifactRead::Digest(digest)
            );
            // Read back as the other architecture, the tree is not its own.
            let other = if arch == Arch::X86_64 {
                Arch::Aarch64
            } else {
                Arch::X86_64
            };
            assert_eq!(
                read_back(data, &verifying, other, digest),
                model::ArtifactRead::AppFileAltered(digest)
            );
        }
    }

    #[test]
    fn a_release_without_a_tree_for_the_agent_s_architecture_is_refused_for_good() {
        let (signing, verifying) = protocol::bundle::keygen();
        let bytes = signed_arches(&signing);
        let digest = releases::release_digest(&bytes);
        let e = verify(&verifying, Arch::Other, digest, &bytes).expect_err("no tree");
        assert!(e.permanent(), "{e}");
        assert!(
            matches!(
                e,
                StageError::TreeRefused {
                    source: ReleaseError::NoTreeForArch { .. },
                    ..
                }
            ),
            "{e}"
        );
        assert!(e.to_string().contains("no tree for other"), "{e}");
    }
}
