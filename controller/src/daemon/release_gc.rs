//! Listing and removing stored releases (issue #23 item 6): the format-1
//! bundles in [`BundleDir`] and the format-2 manifests of the
//! [`ReleaseStore`], and the chunks no remaining release references.
//!
//! Whether a release may go is the model's rule
//! ([`model::controller::ControllerState::release_use`]), asked by the API
//! under the release gate (`super::state::Api::release_gate`), so no
//! rollout can start on a release while it is being removed. This module
//! only does the disk work, in an order a crash cannot hurt: the signed
//! file goes first (unlinked, directory fsynced), then its chunks. A crash
//! in between leaves chunks no release names: *orphans*, removed by a
//! later removal once older than [`ORPHAN_CHUNK_AGE_MS`] (the age spares
//! the chunks of an upload still under way, whose manifest is not posted
//! yet). A chunk is never removed while an accepted manifest names it.

use super::bundles::BundleDir;
use super::release_store::ReleaseStore;
use super::view::ReleaseDto;
use ed25519_dalek::VerifyingKey;
use model::Digest;
use releases::manifest::Sha256Bytes;
use std::collections::BTreeSet;
use std::io;
use std::time::{Duration, SystemTime};

/// How old a chunk no release names must be before a removal sweeps it:
/// one day, longer than an upload is expected to pause between chunks.
pub const ORPHAN_CHUNK_AGE_MS: u64 = 24 * 60 * 60 * 1000;

/// One stored release as listed: the API's row ([`ReleaseDto`]), with
/// `in_use` left for the caller, who asks the model.
pub type Stored = ReleaseDto;

/// What a removal freed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Removed {
    /// The release removed.
    pub release: Stored,
    /// Its chunks no other release names, removed now.
    pub chunks_removed: u64,
    /// Their bytes.
    pub chunk_bytes_freed: u64,
    /// Chunks no release names, older than [`ORPHAN_CHUNK_AGE_MS`],
    /// removed now.
    pub orphans_removed: u64,
    /// Their bytes.
    pub orphan_bytes_freed: u64,
    /// Why chunks were kept that could have gone (the sweep could not
    /// read what the remaining releases name); a later removal sweeps them.
    pub sweep_problem: Option<String>,
}

/// Every stored release, format-1 bundles first, each in digest order.
pub fn list(
    bundles: &BundleDir,
    releases: &ReleaseStore,
    key: &VerifyingKey,
) -> io::Result<Vec<Stored>> {
    let mut stored: Vec<Stored> = sorted(bundles.digests()?)
        .into_iter()
        .map(|d| describe_bundle(bundles, key, d))
        .collect();
    for digest in sorted(releases.manifests.digests()?) {
        stored.push(describe_tree(releases, key, digest).0);
    }
    Ok(stored)
}

fn sorted(mut digests: Vec<Digest>) -> Vec<Digest> {
    digests.sort();
    digests
}

/// The stored release `digest`, if held.
pub fn find(
    bundles: &BundleDir,
    releases: &ReleaseStore,
    key: &VerifyingKey,
    digest: Digest,
) -> Option<Stored> {
    if bundles.path(digest).is_file() {
        Some(describe_bundle(bundles, key, digest))
    } else if releases.knows(digest) {
        Some(describe_tree(releases, key, digest).0)
    } else {
        None
    }
}

fn describe_bundle(bundles: &BundleDir, key: &VerifyingKey, digest: Digest) -> Stored {
    let mut stored = unread(digest, 1);
    let path = bundles.path(digest);
    match protocol::bundle::read_bundle(&path).map_err(|e| e.to_string()) {
        Err(why) => stored.problem = Some(format!("unreadable: {why}")),
        Ok(bytes) => match protocol::bundle::verify(key, &bytes) {
            Err(e) => stored.problem = Some(format!("refused: {e}")),
            Ok(v) if v.digest != digest => {
                stored.problem = Some(format!("hashes to {}, not its name", v.digest.to_hex()))
            }
            Ok(v) => {
                stored.name = v.manifest.name;
                stored.version = v.manifest.version;
                stored.content_bytes = v.app.len() as u64;
            }
        },
    }
    stored
}

/// The listing of a stored manifest and the chunks it names (none when it
/// cannot be read or verified).
fn describe_tree(
    releases: &ReleaseStore,
    key: &VerifyingKey,
    digest: Digest,
) -> (Stored, Vec<releases::ChunkRef>) {
    let mut stored = unread(digest, 2);
    match releases.read(key, digest) {
        Err(why) => {
            stored.problem = Some(why);
            (stored, Vec::new())
        }
        Ok(release) if release.digest != digest => {
            let actual = release.digest.to_hex();
            stored.problem = Some(format!("hashes to {actual}, not its name"));
            (stored, Vec::new())
        }
        Ok(release) => {
            let chunks = release.manifest.unique_chunks();
            stored.name = release.manifest.name.clone();
            stored.version = release.manifest.version.clone();
            stored.content_bytes = release.manifest.total_bytes();
            stored.chunks = chunks.len() as u64;
            (stored, chunks)
        }
    }
}

fn unread(digest: Digest, format: u16) -> Stored {
    Stored {
        digest: digest.to_hex(),
        format,
        name: String::new(),
        version: String::new(),
        content_bytes: 0,
        chunks: 0,
        problem: None,
        in_use: None,
    }
}

/// Removes the stored release `digest` and then the chunks nothing names
/// any more; `Ok(None)` when it is not held. The caller has checked that
/// the controller's state does not name it.
pub fn remove(
    bundles: &BundleDir,
    releases: &ReleaseStore,
    key: &VerifyingKey,
    digest: Digest,
    now: SystemTime,
) -> io::Result<Option<Removed>> {
    let (release, own_chunks) = if bundles.path(digest).is_file() {
        let stored = describe_bundle(bundles, key, digest);
        bundles.remove(digest)?;
        (stored, Vec::new())
    } else if releases.knows(digest) {
        let (stored, chunks) = describe_tree(releases, key, digest);
        releases.manifests.remove(digest)?;
        (stored, chunks)
    } else {
        return Ok(None);
    };
    let mut removed = Removed {
        release,
        chunks_removed: 0,
        chunk_bytes_freed: 0,
        orphans_removed: 0,
        orphan_bytes_freed: 0,
        sweep_problem: None,
    };
    if let Err(why) = sweep(releases, key, &own_chunks, now, &mut removed) {
        tracing::warn!("chunk sweep after removing {digest}: {why}");
        removed.sweep_problem = Some(why);
    }
    Ok(Some(removed))
}

/// Removes `own` chunks no remaining manifest names, and orphans older
/// than [`ORPHAN_CHUNK_AGE_MS`]. Stops (keeping every chunk not yet
/// removed) when a remaining manifest cannot be read from disk: what it
/// names is unknown, so nothing may be judged unnamed.
fn sweep(
    releases: &ReleaseStore,
    key: &VerifyingKey,
    own: &[releases::ChunkRef],
    now: SystemTime,
    removed: &mut Removed,
) -> Result<(), String> {
    let named = named_chunks(releases, key)?;
    for chunk in own.iter().filter(|c| !named.contains(&c.sha256)) {
        releases
            .chunks
            .remove(&chunk.sha256)
            .map_err(|e| e.to_string())?;
        removed.chunks_removed += 1;
        removed.chunk_bytes_freed += u64::from(chunk.len);
    }
    let age = Duration::from_millis(ORPHAN_CHUNK_AGE_MS);
    let cutoff = now.checked_sub(age).unwrap_or(SystemTime::UNIX_EPOCH);
    for chunk in releases.chunks.entries().map_err(|e| e.to_string())? {
        if chunk.modified < cutoff && !named.contains(&chunk.digest) {
            releases
                .chunks
                .remove(&chunk.digest)
                .map_err(|e| e.to_string())?;
            removed.orphans_removed += 1;
            removed.orphan_bytes_freed += chunk.bytes;
        }
    }
    Ok(())
}

/// Every chunk an accepted manifest names. A manifest that reads but does
/// not verify (damaged: never served) names nothing; one that cannot be
/// read at all is an error.
fn named_chunks(
    releases: &ReleaseStore,
    key: &VerifyingKey,
) -> Result<BTreeSet<Sha256Bytes>, String> {
    let mut named = BTreeSet::new();
    let digests = releases.manifests.digests().map_err(|e| e.to_string())?;
    for digest in digests {
        let path = releases.manifests.path(digest);
        let bytes = releases::manifest::read_release_file(&path)
            .map_err(|e| format!("reading {}: {e}", path.display()))?;
        match releases::verify(key, &bytes) {
            Ok(release) => named.extend(release.manifest.unique_chunks().iter().map(|c| c.sha256)),
            Err(e) => tracing::warn!(
                "{} does not verify ({e}): it names no chunk",
                path.display()
            ),
        }
    }
    Ok(named)
}

#[cfg(test)]
mod tests;
