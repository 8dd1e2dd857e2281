//! The agent's disk budget and housekeeping (issue #23 item 6).
//!
//! Releases pile up: every rollout stages one more under `DATA/releases`,
//! and a tree release's chunks stay in `DATA/chunks` (they make the next
//! release's fetch a delta, and rebuild an altered tree). Before each
//! staging the agent makes room:
//!
//! - it always keeps the releases the model says are in use
//!   ([`model::AgentState::releases_in_use`]: serving, the op's release,
//!   its baseline) and the most recently staged other one (the previous
//!   release, which a rollback names);
//! - it keeps older releases, newest first, while everything fits
//!   `[storage] max_bytes` with room for the release about to be staged;
//! - it removes the rest, and then every chunk no kept tree names;
//! - if the release to stage does not fit even so, staging fails
//!   permanently with `no_space: needs N, budget leaves M`, before a byte
//!   of it is written and before anything is removed (the recovery table
//!   stops, as for a refused bundle: retrying cannot make room).
//!
//! A release directory is renamed aside (`.<hex>.gc-<pid>`, directory
//! fsynced) before it is removed, so a crash mid-removal never leaves a
//! half-deleted tree under a release's name; what a crash leaves aside is
//! removed at the next run. Chunks shared by several releases count once.

use super::tree::{manifest_path, CHUNKS_DIR, MANIFEST_EXTENSION};
use super::{sync_dir, StageError};
use model::Digest;
use releases::manifest::Sha256Bytes;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// Default of the agent's `[storage] max_bytes`: room for a few releases
/// of the largest size a release may have (`releases` limits a tree to
/// 16 GiB), on the disk of a typical edge node.
pub const STORAGE_BYTES_MAX_DEFAULT: u64 = 32 * 1024 * 1024 * 1024;

/// Sizes as operators read them: the one formatter, in `releases`.
pub use releases::limits::bytes_text;

/// Infix of a release directory being removed (never a digest's name).
const GC_INFIX: &str = ".gc-";

/// One release found on disk.
#[derive(Debug, Clone)]
struct Held {
    digest: Digest,
    /// Bytes of its directory and, for a tree, its stored manifest.
    bytes: u64,
    /// When it was staged (its directory's modification time).
    staged_at: SystemTime,
    /// The distinct chunks its stored manifest names (none for format 1).
    chunks: Vec<(Sha256Bytes, u64)>,
}

/// What one run of housekeeping did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Housekeeping {
    /// Releases removed, oldest first.
    pub removed: Vec<Digest>,
    /// Chunks removed (named by no kept tree).
    pub chunks_removed: u64,
    /// Bytes freed in all.
    pub freed_bytes: u64,
    /// Bytes the kept releases and their chunks take now.
    pub used_bytes: u64,
    /// Deployments removed (issue #24 item 1; [`tidy_deployments`]).
    pub deployments_removed: Vec<Digest>,
}

/// The release about to be staged.
#[derive(Debug, Clone, Copy)]
pub struct Incoming<'a> {
    /// Bytes staging it adds (its files, its manifest, the chunks not
    /// held yet).
    pub needed_bytes: u64,
    /// Its chunks (none for format 1): those already held (an attempt a
    /// crash cut short fetched them) are kept and count as used.
    pub chunks: &'a BTreeSet<Sha256Bytes>,
}

/// Makes room for the `incoming` release within `max_bytes`: see the
/// module's documentation. `in_use` comes from the model and is never
/// removed.
pub fn make_room(
    data_dir: &Path,
    in_use: &BTreeSet<Digest>,
    incoming: Incoming<'_>,
    max_bytes: u64,
) -> Result<Housekeeping, StageError> {
    let parent = data_dir.join("releases");
    remove_set_aside(&parent);
    // A deployment in use keeps its code: the model names the deployment.
    let in_use = &with_codes(data_dir, in_use);
    let held = list_releases(&parent)?;
    let chunk_sizes = chunk_sizes(&data_dir.join(CHUNKS_DIR));
    let sizes = Sizes {
        held: &held,
        chunks: &chunk_sizes,
        incoming: incoming.chunks,
    };
    let needed_bytes = incoming.needed_bytes;
    let keep = choose(&sizes, in_use, needed_bytes, max_bytes);
    // Refused before anything is removed: releases are not thrown away
    // for a staging that cannot happen anyway.
    let used = sizes.used_bytes(&keep);
    let left = max_bytes.saturating_sub(used);
    if needed_bytes > left {
        return Err(StageError::NoSpace {
            needs: needed_bytes,
            left,
        });
    }
    let mut done = Housekeeping::default();
    let mut gone: Vec<&Held> = held.iter().filter(|h| !keep.contains(&h.digest)).collect();
    gone.sort_by_key(|h| h.staged_at);
    for h in gone {
        remove_release(&parent, data_dir, h.digest)?;
        done.removed.push(h.digest);
        done.freed_bytes += h.bytes;
    }
    let named: BTreeSet<Sha256Bytes> = held
        .iter()
        .filter(|h| keep.contains(&h.digest))
        .flat_map(|h| h.chunks.iter().map(|(sha, _)| *sha))
        .chain(incoming.chunks.iter().copied())
        .collect();
    for (sha, bytes) in &chunk_sizes {
        if !named.contains(sha) && remove_chunk(data_dir, sha) {
            done.chunks_removed += 1;
            done.freed_bytes += bytes;
        }
    }
    done.used_bytes = used;
    done.deployments_removed = tidy_deployments(data_dir, in_use, &keep)?;
    Ok(done)
}

/// `in_use` and the code of every deployment among them (read from its
/// document, checked against its digest; one that does not check keeps
/// nothing).
fn with_codes(data_dir: &Path, in_use: &BTreeSet<Digest>) -> BTreeSet<Digest> {
    let codes: Vec<Digest> = in_use
        .iter()
        .filter_map(|d| super::deployment::code_of(data_dir, *d))
        .collect();
    in_use.iter().copied().chain(codes).collect()
}

/// Removes the deployments nothing names any more (issue #24 item 1):
/// every one the model does not name (`in_use`: serving, the op's, its
/// baseline is never removed), except the most recently installed other
/// one whose code is kept (`kept_codes`), the previous deployment a later
/// rollout may name again, as the previous release is kept. A deployment
/// whose document no longer checks, or whose code is gone, is useless
/// and removed unless in use. Their documents are small (at most
/// `releases::config::DEPLOYMENT_BYTES_MAX`): not counted in the budget.
pub fn tidy_deployments(
    data_dir: &Path,
    in_use: &BTreeSet<Digest>,
    kept_codes: &BTreeSet<Digest>,
) -> Result<Vec<Digest>, StageError> {
    let mut others: Vec<(SystemTime, Digest, bool)> = super::deployment::installed(data_dir)
        .into_iter()
        .filter(|d| !in_use.contains(d))
        .map(|d| {
            let dir = super::deployment::deployment_dir(data_dir, d);
            let at = std::fs::metadata(&dir)
                .and_then(|m| m.modified())
                .unwrap_or(SystemTime::UNIX_EPOCH);
            let useful = super::deployment::code_of(data_dir, d)
                .is_some_and(|code| kept_codes.contains(&code));
            (at, d, useful)
        })
        .collect();
    others.sort_by_key(|(at, _, _)| std::cmp::Reverse(*at));
    let previous = others.iter().find(|(_, _, useful)| *useful).map(|o| o.1);
    let mut removed = Vec::new();
    for (_, digest, _) in others {
        if Some(digest) != previous {
            super::deployment::remove(data_dir, digest)?;
            removed.push(digest);
        }
    }
    Ok(removed)
}

/// The releases to keep: those in use, the newest other one, then older
/// ones newest first while the kept set and `needed_bytes` fit
/// `max_bytes`.
fn choose(
    sizes: &Sizes<'_>,
    in_use: &BTreeSet<Digest>,
    needed_bytes: u64,
    max_bytes: u64,
) -> BTreeSet<Digest> {
    let held = sizes.held;
    let mut keep: BTreeSet<Digest> = held
        .iter()
        .map(|h| h.digest)
        .filter(|d| in_use.contains(d))
        .collect();
    let mut others: Vec<&Held> = held.iter().filter(|h| !keep.contains(&h.digest)).collect();
    others.sort_by_key(|h| std::cmp::Reverse(h.staged_at));
    let mut others = others.into_iter();
    if let Some(previous) = others.next() {
        keep.insert(previous.digest);
    }
    for h in others {
        keep.insert(h.digest);
        let used = sizes.used_bytes(&keep);
        if used.saturating_add(needed_bytes) > max_bytes {
            keep.remove(&h.digest);
            // Newest first: an older one would be kept before a newer one
            // it was chosen over; stop at the first that does not fit.
            break;
        }
    }
    keep
}

/// What is on disk, for counting.
struct Sizes<'a> {
    held: &'a [Held],
    /// Every stored chunk and its size.
    chunks: &'a BTreeMap<Sha256Bytes, u64>,
    /// The chunks of the release about to be staged.
    incoming: &'a BTreeSet<Sha256Bytes>,
}

impl Sizes<'_> {
    /// Bytes of the `keep` releases plus the chunks they and the incoming
    /// release name, each chunk counted once.
    fn used_bytes(&self, keep: &BTreeSet<Digest>) -> u64 {
        let kept = self.held.iter().filter(|h| keep.contains(&h.digest));
        let mut chunks = BTreeSet::new();
        let mut bytes = 0_u64;
        let named = kept
            .clone()
            .flat_map(|h| h.chunks.iter().map(|(sha, _)| sha))
            .chain(self.incoming.iter());
        for sha in named {
            if chunks.insert(*sha) {
                bytes = bytes.saturating_add(self.chunks.get(sha).copied().unwrap_or(0));
            }
        }
        kept.fold(bytes, |sum, h| sum.saturating_add(h.bytes))
    }
}

/// The releases under `parent`: every directory named by a digest.
fn list_releases(parent: &Path) -> Result<Vec<Held>, StageError> {
    let entries = match std::fs::read_dir(parent) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(StageError::Io {
                path: parent.to_path_buf(),
                source,
            })
        }
    };
    let mut held = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(digest) = name.to_str().and_then(crate::probe::parse_digest) else {
            continue;
        };
        let Ok(meta) = entry.metadata() else {
            continue;
        };
        if !meta.is_dir() {
            continue;
        }
        held.push(held_release(parent, digest, &meta));
    }
    Ok(held)
}

/// What one release takes: its directory, its stored manifest (a tree)
/// and the chunks that manifest names.
fn held_release(parent: &Path, digest: Digest, meta: &std::fs::Metadata) -> Held {
    let dir = parent.join(digest.to_hex());
    let manifest = parent.join(format!("{}.{MANIFEST_EXTENSION}", digest.to_hex()));
    let mut bytes = dir_bytes(&dir);
    let mut chunks = Vec::new();
    if let Ok(signed) = std::fs::read(&manifest) {
        bytes += signed.len() as u64;
        // Verified when it was staged; here it only says which chunks to
        // keep, and a chunk wrongly removed is fetched again.
        if let Ok(release) = releases::read_unverified(&signed) {
            chunks = release
                .manifest
                .unique_chunks()
                .iter()
                .map(|c| (c.sha256, u64::from(c.len)))
                .collect();
        }
    }
    Held {
        digest,
        bytes,
        staged_at: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
        chunks,
    }
}

/// Bytes of the regular files under `dir` (not following links).
fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut bytes = 0_u64;
    for entry in entries.flatten() {
        let Ok(meta) = std::fs::symlink_metadata(entry.path()) else {
            continue;
        };
        if meta.is_dir() {
            bytes = bytes.saturating_add(dir_bytes(&entry.path()));
        } else {
            bytes = bytes.saturating_add(meta.len());
        }
    }
    bytes
}

/// Every stored chunk and its size (temporary files skipped).
fn chunk_sizes(dir: &Path) -> BTreeMap<Sha256Bytes, u64> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return BTreeMap::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name();
            let sha = hex::decode(name.to_str()?).ok()?;
            let sha = Sha256Bytes::try_from(sha.as_slice()).ok()?;
            Some((sha, entry.metadata().ok()?.len()))
        })
        .collect()
}

/// Removes a release: its directory is renamed aside (and the parent
/// fsynced) first, then its stored manifest, then the directory set aside.
fn remove_release(parent: &Path, data_dir: &Path, digest: Digest) -> Result<(), StageError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| StageError::Io { path, source }
    };
    let dir = parent.join(digest.to_hex());
    let aside = parent.join(format!(
        ".{}{GC_INFIX}{}",
        digest.to_hex(),
        std::process::id()
    ));
    std::fs::rename(&dir, &aside).map_err(io(&dir))?;
    sync_dir(parent).map_err(io(parent))?;
    let manifest = manifest_path(data_dir, digest);
    match std::fs::remove_file(&manifest) {
        Ok(()) => sync_dir(parent).map_err(io(parent))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(source) => {
            return Err(StageError::Io {
                path: manifest,
                source,
            })
        }
    }
    std::fs::remove_dir_all(&aside).map_err(io(&aside))?;
    Ok(())
}

/// Removes the directories an earlier run set aside and did not finish
/// removing. Best effort.
fn remove_set_aside(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        if name.to_string_lossy().contains(GC_INFIX) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// Removes one chunk; whether it was removed.
fn remove_chunk(data_dir: &Path, sha: &Sha256Bytes) -> bool {
    let path: PathBuf = data_dir.join(CHUNKS_DIR).join(hex::encode(sha));
    std::fs::remove_file(path).is_ok()
}

#[cfg(test)]
#[path = "disk/tests.rs"]
mod tests;
