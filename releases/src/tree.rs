//! Trees on disk: signing a directory, verifying a directory or a chunk
//! store against a manifest, and assembling a tree from chunks.
//!
//! Everything streams: a file is read one chunk at a time (at most
//! [`CHUNK_BYTES_MAX`] in memory), whatever its size. What grows with the
//! release is the list of entries, bounded by the manifest limits.
//!
//! Symlinks are refused, not followed and not kept: a link's target is
//! resolved on the node at run time, where "inside the tree" depends on
//! every other link and directory of the tree; refusing is the rule that
//! cannot be got wrong, and an app that needs a link can make it at start.

use std::collections::{BTreeSet, HashSet};
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use ed25519_dalek::SigningKey;
use sha2::{Digest as _, Sha256};

use crate::chunking::{chunk_reader, Chunking, Sink};
use crate::error::{io_err, ReleaseError};
use crate::limits::{CHUNK_BYTES_MAX, ENTRIES_MAX, RELEASE_BYTES_MAX};
use crate::manifest::{self, over_limit, Entry, Manifest, Mode, ReleaseFields, Sha256Bytes};
use crate::store::{sync_dir, ChunkStore};

/// A regular file found by [`walk`].
#[derive(Clone, Debug)]
pub struct Found {
    /// Path relative to the tree, `/`-separated.
    pub rel: String,
    /// Path on disk.
    pub abs: PathBuf,
    /// Mode from its permission bits.
    pub mode: Mode,
    /// Size when listed.
    pub size: u64,
    /// Device and inode when listed: the file read must be this one.
    dev_ino: (u64, u64),
    /// What `stat` said when listed (see [`crate::readback`]).
    pub(crate) stamp: crate::stamp::Stamp,
}

/// Lists the regular files under `root`, sorted by path bytes. Refuses a
/// symlink, a fifo, a socket or a device, a name that is not UTF-8 or not
/// a valid path, and more than [`ENTRIES_MAX`] files.
pub fn walk(root: &Path) -> Result<Vec<Found>, ReleaseError> {
    let mut found = Vec::new();
    let mut dirs = vec![(root.to_path_buf(), String::new())];
    while let Some((dir, prefix)) = dirs.pop() {
        for item in fs::read_dir(&dir).map_err(io_err(&dir))? {
            let item = item.map_err(io_err(&dir))?;
            let name = item
                .file_name()
                .into_string()
                .map_err(|name| ReleaseError::BadPath {
                    path: format!("{prefix}{}", name.to_string_lossy()),
                    problem: crate::error::PathProblem::NotUtf8,
                })?;
            let rel = format!("{prefix}{name}");
            crate::path::validate_path(&rel)?;
            let abs = item.path();
            let meta = fs::symlink_metadata(&abs).map_err(io_err(&abs))?;
            let kind = meta.file_type();
            if kind.is_dir() {
                dirs.push((abs, format!("{rel}/")));
            } else if kind.is_file() {
                found.push(Found {
                    rel,
                    abs,
                    mode: Mode::of_permissions(meta.mode()),
                    size: meta.len(),
                    dev_ino: (meta.dev(), meta.ino()),
                    stamp: crate::stamp::Stamp::of(&meta),
                });
                over_limit("entries", found.len() as u64, ENTRIES_MAX as u64)?;
            } else {
                return Err(ReleaseError::NotRegular {
                    path: rel,
                    kind: kind_name(&kind),
                });
            }
        }
    }
    found.sort_by(|a, b| a.rel.as_bytes().cmp(b.rel.as_bytes()));
    Ok(found)
}

fn kind_name(kind: &fs::FileType) -> &'static str {
    if kind.is_symlink() {
        "symlink"
    } else if kind.is_fifo() {
        "fifo"
    } else if kind.is_socket() {
        "socket"
    } else if kind.is_block_device() {
        "block device"
    } else if kind.is_char_device() {
        "char device"
    } else {
        "special file"
    }
}

/// Opens a listed file and checks it is still the regular file listed
/// (not swapped for a link or another file since).
pub(crate) fn open_found(found: &Found) -> Result<File, ReleaseError> {
    let file = File::open(&found.abs).map_err(io_err(&found.abs))?;
    let meta = file.metadata().map_err(io_err(&found.abs))?;
    if !meta.is_file() || (meta.dev(), meta.ino()) != found.dev_ino {
        return Err(ReleaseError::ChangedWhileRead {
            path: found.abs.clone(),
            before: found.size,
            read: meta.len(),
        });
    }
    Ok(file)
}

/// Chunks every file under `root` (streaming), handing each chunk to
/// `sink`; returns the entries, sorted, within every limit.
pub fn tree_entries(root: &Path, sink: &mut Sink<'_>) -> Result<Vec<Entry>, ReleaseError> {
    let mut entries = Vec::new();
    let mut total: u64 = 0;
    for found in walk(root)? {
        over_limit(
            "release bytes",
            total.saturating_add(found.size),
            RELEASE_BYTES_MAX,
        )?;
        let file = open_found(&found)?;
        let chunked = chunk_reader(file, Chunking::RELEASE, &found.abs, sink)?;
        if chunked.size != found.size {
            return Err(ReleaseError::ChangedWhileRead {
                path: found.abs,
                before: found.size,
                read: chunked.size,
            });
        }
        total += chunked.size;
        entries.push(Entry {
            path: found.rel,
            mode: found.mode,
            size: chunked.size,
            sha256: chunked.sha256,
            chunks: chunked.chunks,
        });
    }
    Ok(entries)
}

/// Signs the directory `root` as a format-2 release: every file chunked
/// (each chunk handed to `sink`, e.g. a [`ChunkStore`]), the manifest
/// built, checked and signed. Returns the release file's bytes.
pub fn sign_dir(
    key: &SigningKey,
    fields: ReleaseFields,
    root: &Path,
    sink: &mut Sink<'_>,
) -> Result<Vec<u8>, ReleaseError> {
    let entries = tree_entries(root, sink)?;
    manifest::sign(key, fields, entries)
}

/// Signs `root` (the files every node stages) with a tree per
/// architecture (`arch_roots`: each architecture's own files, e.g. its
/// binaries) as a format-3 release; with no `arch_roots`, exactly
/// [`sign_dir`]. Each node stages `root` merged with its architecture's
/// tree, so a path may not be in both.
pub fn sign_dir_arches(
    key: &SigningKey,
    fields: ReleaseFields,
    root: &Path,
    arch_roots: &[(model::platform::Arch, PathBuf)],
    sink: &mut Sink<'_>,
) -> Result<Vec<u8>, ReleaseError> {
    let entries = tree_entries(root, sink)?;
    let mut trees = Vec::with_capacity(arch_roots.len());
    for (arch, dir) in arch_roots {
        trees.push(crate::ArchTree {
            arch: *arch,
            entries: tree_entries(dir, sink)?,
        });
    }
    trees.sort_by_key(|t| t.arch);
    manifest::sign_arches(key, fields, entries, trees)
}

/// A sink that stores each chunk in `store` (once).
pub fn store_sink(
    store: &ChunkStore,
) -> impl FnMut(&crate::ChunkRef, &[u8]) -> Result<(), ReleaseError> + '_ {
    move |chunk, bytes| store.put_bytes(&chunk.sha256, bytes).map(|_| ())
}

pub(crate) fn mismatch(path: &str, reason: impl Into<String>) -> ReleaseError {
    ReleaseError::FileMismatch {
        path: path.to_string(),
        reason: reason.into(),
    }
}

/// Checks that `root` holds exactly the tree of `manifest`: the same files
/// (nothing missing, nothing extra, no link or special file), each of its
/// mode and size, and every chunk of each hashing to the manifest's digest.
/// Streams one chunk at a time.
pub fn verify_dir(manifest: &Manifest, root: &Path) -> Result<(), ReleaseError> {
    let listed = listing(manifest, root)?;
    let mut buffer = vec![0u8; CHUNK_BYTES_MAX as usize];
    for (entry, found) in manifest.entries.iter().zip(&listed) {
        verify_file(entry, open_found(found)?, &mut buffer)?;
    }
    Ok(())
}

/// Lists `root` and matches it with `manifest` without reading a byte of
/// content: exactly its files (nothing missing, nothing extra, no link or
/// special file), each of its mode and size. Returns them in the
/// manifest's order.
pub(crate) fn listing(manifest: &Manifest, root: &Path) -> Result<Vec<Found>, ReleaseError> {
    let found = walk(root)?;
    let names: HashSet<&str> = manifest.entries.iter().map(|e| e.path.as_str()).collect();
    if let Some(extra) = found.iter().find(|f| !names.contains(f.rel.as_str())) {
        return Err(ReleaseError::Unexpected {
            path: extra.rel.clone(),
        });
    }
    let mut by_path = found
        .into_iter()
        .map(|f| (f.rel.clone(), f))
        .collect::<std::collections::HashMap<_, _>>();
    let mut listed = Vec::with_capacity(manifest.entries.len());
    for entry in &manifest.entries {
        let found = by_path
            .remove(&entry.path)
            .ok_or_else(|| mismatch(&entry.path, "missing from the directory"))?;
        if found.mode != entry.mode {
            return Err(mismatch(
                &entry.path,
                format!("mode {:?}, release says {:?}", found.mode, entry.mode),
            ));
        }
        if found.size != entry.size {
            return Err(mismatch(
                &entry.path,
                format!("{} bytes, release says {}", found.size, entry.size),
            ));
        }
        listed.push(found);
    }
    Ok(listed)
}

/// Reads `file` chunk by chunk as `entry` lists them, checking each digest
/// and the whole-file digest, and that nothing follows.
pub(crate) fn verify_file(
    entry: &Entry,
    mut file: File,
    buffer: &mut [u8],
) -> Result<(), ReleaseError> {
    let mut whole = Sha256::new();
    let mut offset: u64 = 0;
    for (index, chunk) in entry.chunks.iter().enumerate() {
        let part = &mut buffer[..chunk.len as usize];
        file.read_exact(part).map_err(|e| {
            mismatch(
                &entry.path,
                format!("chunk {index} at offset {offset}: {e}"),
            )
        })?;
        let actual: Sha256Bytes = Sha256::digest(&*part).into();
        if actual != chunk.sha256 {
            return Err(mismatch(
                &entry.path,
                format!(
                    "chunk {index} at offset {offset} hashes to {}, release says {}",
                    hex::encode(actual),
                    chunk.hex()
                ),
            ));
        }
        whole.update(&*part);
        offset += u64::from(chunk.len);
    }
    let mut probe = [0u8; 1];
    if file
        .read(&mut probe)
        .map_err(|e| mismatch(&entry.path, e.to_string()))?
        != 0
    {
        return Err(mismatch(
            &entry.path,
            format!("longer than {} bytes", entry.size),
        ));
    }
    if <[u8; 32]>::from(whole.finalize()) != entry.sha256 {
        return Err(mismatch(&entry.path, "whole-file digest differs"));
    }
    Ok(())
}

/// Checks that `store` holds every chunk of `manifest` (every
/// architecture tree's too), each re-verified (a damaged one is removed and
/// reported). One chunk in memory at a time.
pub fn verify_store(manifest: &Manifest, store: &ChunkStore) -> Result<(), ReleaseError> {
    for entry in manifest.all_entries() {
        for chunk in &entry.chunks {
            let bytes = store
                .get(&chunk.sha256)?
                .ok_or_else(|| ReleaseError::MissingChunk {
                    digest: chunk.hex(),
                    path: entry.path.clone(),
                })?;
            if bytes.len() != chunk.len as usize {
                return Err(mismatch(
                    &entry.path,
                    format!(
                        "chunk {} is {} bytes, release says {}",
                        chunk.hex(),
                        bytes.len(),
                        chunk.len
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Builds the tree of `manifest` at `dest` from the chunks in `store`.
///
/// The tree is written under a staging name next to `dest`: each file from
/// its chunks (each re-verified as it is read), its whole-file digest
/// checked, its mode set and fsynced; then every directory is fsynced, the
/// staging directory renamed to `dest` and the parent fsynced. Nothing is
/// visible under `dest` until it is whole; on any error the staging
/// directory is removed. Refuses an existing `dest`.
pub fn assemble(manifest: &Manifest, store: &ChunkStore, dest: &Path) -> Result<(), ReleaseError> {
    if dest.symlink_metadata().is_ok() {
        return Err(ReleaseError::Exists(dest.to_path_buf()));
    }
    let parent = dest
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = dest
        .file_name()
        .ok_or_else(|| ReleaseError::Exists(dest.to_path_buf()))?;
    let staging = parent.join(format!(
        ".{}.staging-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    // A staging directory of an earlier attempt is never trusted.
    let _ = fs::remove_dir_all(&staging);
    let built = fs::create_dir(&staging)
        .map_err(io_err(&staging))
        .and_then(|()| write_tree(manifest, store, &staging))
        .and_then(|()| fs::rename(&staging, dest).map_err(io_err(dest)))
        .and_then(|()| sync_dir(parent));
    if built.is_err() {
        // Best effort: what is left is a staging name, never `dest`.
        let _ = fs::remove_dir_all(&staging);
    }
    built
}

fn write_tree(manifest: &Manifest, store: &ChunkStore, root: &Path) -> Result<(), ReleaseError> {
    let mut dirs = BTreeSet::new();
    for entry in &manifest.entries {
        let path = root.join(&entry.path);
        if let Some((dir, _)) = entry.path.rsplit_once('/') {
            let dir_path = root.join(dir);
            fs::create_dir_all(&dir_path).map_err(io_err(&dir_path))?;
            let mut at = dir;
            loop {
                dirs.insert(at.to_string());
                match at.rsplit_once('/') {
                    Some((up, _)) => at = up,
                    None => break,
                }
            }
        }
        write_entry(entry, store, &path)?;
    }
    // Deepest first: a directory's names are durable before its own.
    for dir in dirs.iter().rev() {
        sync_dir(&root.join(dir))?;
    }
    sync_dir(root)
}

fn write_entry(entry: &Entry, store: &ChunkStore, path: &Path) -> Result<(), ReleaseError> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(io_err(path))?;
    let mut whole = Sha256::new();
    for chunk in &entry.chunks {
        let bytes = store
            .get(&chunk.sha256)?
            .ok_or_else(|| ReleaseError::MissingChunk {
                digest: chunk.hex(),
                path: entry.path.clone(),
            })?;
        if bytes.len() != chunk.len as usize {
            return Err(mismatch(
                &entry.path,
                format!(
                    "chunk {} is {} bytes, release says {}",
                    chunk.hex(),
                    bytes.len(),
                    chunk.len
                ),
            ));
        }
        whole.update(&bytes);
        file.write_all(&bytes).map_err(io_err(path))?;
    }
    if <[u8; 32]>::from(whole.finalize()) != entry.sha256 {
        return Err(mismatch(
            &entry.path,
            "assembled file's whole-file digest differs",
        ));
    }
    file.set_permissions(fs::Permissions::from_mode(entry.mode.permissions()))
        .map_err(io_err(path))?;
    file.sync_all().map_err(io_err(path))
}
