//! The content-addressed chunk store: one file per chunk, named by the
//! lowercase hex SHA-256 of its bytes, in one directory.
//!
//! The layout is the export layout of issue #23 item 5: a store opened on
//! `OUT/chunks` is what any plain HTTP server serves at
//! `BASE/chunks/<sha256>`.
//!
//! Durability is the bundle store's discipline (controller/src/daemon/
//! bundles.rs): a chunk is written to a temporary file in the same
//! directory, fsynced, renamed to its name, and the directory fsynced. A
//! chunk is verified as its bytes land, before the rename, so a name in the
//! store only ever appears for bytes that hashed to it; a partially stored
//! chunk is a temporary file, removed at [`ChunkStore::open`]: it is just
//! absent, and fetching resumes by asking for it again. Every read
//! re-verifies: a chunk damaged on disk (torn by a power cut on a
//! filesystem that lies, bit rot, an operator's edit) is removed and
//! reported as [`ReleaseError::TornChunk`], never used.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use sha2::{Digest as _, Sha256};

use crate::error::{io_err, ReleaseError};
use crate::limits::CHUNK_BYTES_MAX;
use crate::manifest::Sha256Bytes;

/// Prefix of a chunk being written; never read, removed at open.
const TEMP_PREFIX: &str = ".tmp-";
/// Copy buffer while a chunk lands, in bytes.
const COPY_BUFFER_BYTES: usize = 64 * 1024;

/// Numbers temporary files within one process.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A directory of chunks named by digest.
#[derive(Debug)]
pub struct ChunkStore {
    dir: PathBuf,
    /// Whether a damaged chunk is removed when found (false for a store
    /// only inspected, e.g. by `fleetweft bundle verify`).
    remove_damaged: bool,
}

impl ChunkStore {
    /// Opens (creating if needed) the store in `dir`, removing temporary
    /// files a crash left behind. Returns the store and how many were
    /// removed.
    pub fn open(dir: &Path) -> Result<(ChunkStore, usize), ReleaseError> {
        fs::create_dir_all(dir).map_err(io_err(dir))?;
        let mut removed = 0;
        for entry in fs::read_dir(dir).map_err(io_err(dir))? {
            let entry = entry.map_err(io_err(dir))?;
            if entry.file_name().to_string_lossy().starts_with(TEMP_PREFIX) {
                let path = entry.path();
                fs::remove_file(&path).map_err(io_err(&path))?;
                removed += 1;
            }
        }
        Ok((
            ChunkStore {
                dir: dir.to_path_buf(),
                remove_damaged: true,
            },
            removed,
        ))
    }

    /// Opens an existing store to read and verify only: nothing is created,
    /// cleaned or removed (a damaged chunk is still reported, never
    /// returned).
    pub fn open_read_only(dir: &Path) -> Result<ChunkStore, ReleaseError> {
        let meta = fs::metadata(dir).map_err(io_err(dir))?;
        if !meta.is_dir() {
            let source = std::io::Error::other("not a directory");
            return Err(io_err(dir)(source));
        }
        Ok(ChunkStore {
            dir: dir.to_path_buf(),
            remove_damaged: false,
        })
    }

    /// The store's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where the chunk `digest` lives.
    pub fn path(&self, digest: &Sha256Bytes) -> PathBuf {
        self.dir.join(hex::encode(digest))
    }

    /// Whether the chunk is stored (under its name; [`ChunkStore::get`]
    /// re-verifies it).
    pub fn has(&self, digest: &Sha256Bytes) -> bool {
        self.path(digest).is_file()
    }

    /// Stores the chunk `digest` from `reader`, verifying the digest as the
    /// bytes land: at most [`CHUNK_BYTES_MAX`] bytes are read, and bytes
    /// that hash to anything else are never given the name. A chunk already
    /// stored is not written again. Returns the chunk's length.
    pub fn put(&self, digest: &Sha256Bytes, reader: impl Read) -> Result<u64, ReleaseError> {
        let path = self.path(digest);
        if let Ok(meta) = fs::metadata(&path) {
            return Ok(meta.len());
        }
        let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
        let tmp = self.dir.join(format!(
            "{TEMP_PREFIX}{}-{}-{n}",
            hex::encode(digest),
            std::process::id()
        ));
        let landed = land(&tmp, digest, reader).and_then(|len| {
            fs::rename(&tmp, &path).map_err(io_err(&path))?;
            sync_dir(&self.dir)?;
            Ok(len)
        });
        if landed.is_err() {
            // Best effort: the temporary file may not exist.
            let _ = fs::remove_file(&tmp);
        }
        landed
    }

    /// Stores a chunk held in memory (see [`ChunkStore::put`]).
    pub fn put_bytes(&self, digest: &Sha256Bytes, bytes: &[u8]) -> Result<u64, ReleaseError> {
        self.put(digest, bytes)
    }

    /// Reads the chunk `digest`, re-verifying it. `Ok(None)` when absent;
    /// a chunk whose bytes do not hash to its name is removed and reported
    /// as [`ReleaseError::TornChunk`].
    pub fn get(&self, digest: &Sha256Bytes) -> Result<Option<Vec<u8>>, ReleaseError> {
        let path = self.path(digest);
        let file = match File::open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err(&path)(e)),
        };
        let mut bytes = Vec::new();
        file.take(u64::from(CHUNK_BYTES_MAX) + 1)
            .read_to_end(&mut bytes)
            .map_err(io_err(&path))?;
        let reason = if bytes.len() > CHUNK_BYTES_MAX as usize {
            format!("over the {CHUNK_BYTES_MAX}-byte chunk limit")
        } else {
            let actual: Sha256Bytes = Sha256::digest(&bytes).into();
            if actual == *digest {
                return Ok(Some(bytes));
            }
            format!("{} bytes hashing to {}", bytes.len(), hex::encode(actual))
        };
        if self.remove_damaged {
            // Best effort: a damaged chunk that cannot be removed is still
            // never returned.
            let _ = fs::remove_file(&path);
        }
        Err(ReleaseError::TornChunk { path, reason })
    }

    /// Every stored chunk: its digest, length and when it was last written.
    /// Temporary files and names that are not a chunk's are skipped.
    pub fn entries(&self) -> Result<Vec<StoredChunk>, ReleaseError> {
        let mut chunks = Vec::new();
        for entry in fs::read_dir(&self.dir).map_err(io_err(&self.dir))? {
            let entry = entry.map_err(io_err(&self.dir))?;
            let name = entry.file_name();
            let Some(digest) = name.to_str().and_then(chunk_name) else {
                continue;
            };
            let path = entry.path();
            let meta = entry.metadata().map_err(io_err(&path))?;
            if meta.is_file() {
                let modified = meta.modified().map_err(io_err(&path))?;
                let bytes = meta.len();
                chunks.push(StoredChunk {
                    digest,
                    bytes,
                    modified,
                });
            }
        }
        Ok(chunks)
    }

    /// Removes the chunk `digest` if present (garbage collection).
    pub fn remove(&self, digest: &Sha256Bytes) -> Result<(), ReleaseError> {
        let path = self.path(digest);
        match fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io_err(&path)(e)),
            _ => Ok(()),
        }
    }
}

/// One chunk found in the store by [`ChunkStore::entries`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoredChunk {
    /// Its name.
    pub digest: Sha256Bytes,
    /// Its length on disk.
    pub bytes: u64,
    /// When it was last written (its file's modification time).
    pub modified: std::time::SystemTime,
}

/// The digest a chunk's name spells (64 lowercase hex digits, its file
/// name in a store and in a mirror's layout), or `None`.
pub fn chunk_name(name: &str) -> Option<Sha256Bytes> {
    let hex_digits =
        name.len() == 64 && name.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    let bytes = hex_digits.then(|| hex::decode(name).ok()).flatten()?;
    Sha256Bytes::try_from(bytes.as_slice()).ok()
}

/// Writes `reader` to the new file `tmp`, hashing as it goes; fsyncs it
/// when the bytes hash to `digest`. Returns the length.
fn land(tmp: &Path, digest: &Sha256Bytes, reader: impl Read) -> Result<u64, ReleaseError> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(tmp)
        .map_err(io_err(tmp))?;
    let mut limited = reader.take(u64::from(CHUNK_BYTES_MAX) + 1);
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; COPY_BUFFER_BYTES];
    let mut len: u64 = 0;
    loop {
        let n = match limited.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io_err(tmp)(e)),
        };
        len += n as u64;
        crate::manifest::over_limit("chunk bytes", len, CHUNK_BYTES_MAX.into())?;
        hasher.update(&buffer[..n]);
        file.write_all(&buffer[..n]).map_err(io_err(tmp))?;
    }
    let actual: Sha256Bytes = hasher.finalize().into();
    if actual != *digest {
        return Err(ReleaseError::ChunkMismatch {
            expected: hex::encode(digest),
            actual: hex::encode(actual),
        });
    }
    file.sync_all().map_err(io_err(tmp))?;
    Ok(len)
}

/// Fsyncs a directory: the names created or renamed in it become durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<(), ReleaseError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err(dir))
}
