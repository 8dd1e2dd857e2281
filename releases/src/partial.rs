//! Chunks fetched in part, kept across a restart (issue #23: a node
//! killed mid-fetch refetches at most one chunk).
//!
//! While a chunk arrives, its bytes are appended to `DIR/<sha256>` as they
//! come, without fsync: a SIGKILLed agent keeps them (the page cache
//! survives the process), a power cut may keep fewer or torn ones. At the
//! next attempt the agent reads what is there and asks only for the rest
//! (`FetchChunkFrom`). Nothing here is trusted: the kept prefix and the
//! rest are hashed together before the chunk enters the
//! [`crate::ChunkStore`], and a prefix that makes the hash wrong is thrown
//! away and the chunk fetched whole. A file longer than its chunk is
//! removed when read. The directory holds at most the chunks in flight
//! when the agent stopped (each at most [`CHUNK_BYTES_MAX`]), and is
//! emptied once a release is staged.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use crate::error::{io_err, ReleaseError};
use crate::limits::CHUNK_BYTES_MAX;
use crate::manifest::ChunkRef;

/// A directory of partly fetched chunks, named by the chunk's digest.
#[derive(Debug, Clone)]
pub struct PartialChunks {
    dir: PathBuf,
}

impl PartialChunks {
    /// Opens (creating) the directory.
    pub fn open(dir: &Path) -> Result<PartialChunks, ReleaseError> {
        fs::create_dir_all(dir).map_err(io_err(dir))?;
        Ok(PartialChunks {
            dir: dir.to_path_buf(),
        })
    }

    /// Where the partial bytes of `chunk` are kept.
    pub fn path(&self, chunk: &ChunkRef) -> PathBuf {
        self.dir.join(chunk.hex())
    }

    /// The bytes of `chunk` kept from an earlier attempt: empty when there
    /// are none, and when the file is longer than the chunk or cannot be
    /// read (then it is removed: a guess is worth less than a refetch).
    /// At most the chunk's length, so at most [`CHUNK_BYTES_MAX`].
    pub fn prefix(&self, chunk: &ChunkRef) -> Vec<u8> {
        let path = self.path(chunk);
        let Ok(file) = File::open(&path) else {
            return Vec::new();
        };
        let len = u64::from(chunk.len).min(u64::from(CHUNK_BYTES_MAX));
        let mut bytes = Vec::new();
        // One byte past the chunk tells a file that is too long.
        match file.take(len + 1).read_to_end(&mut bytes) {
            Ok(read) if read as u64 <= len => bytes,
            _ => {
                self.remove(chunk);
                Vec::new()
            }
        }
    }

    /// A writer that appends the bytes of `chunk` after the `kept` bytes
    /// already in its file (truncating anything after them). The caller
    /// may go on without one: keeping bytes only shortens a refetch.
    pub fn writer(&self, chunk: &ChunkRef, kept: u64) -> Result<PartialWriter, ReleaseError> {
        use std::io::Seek;
        let path = self.path(chunk);
        let mut file = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(false)
            .open(&path)
            .map_err(io_err(&path))?;
        file.set_len(kept).map_err(io_err(&path))?;
        file.seek(std::io::SeekFrom::Start(kept))
            .map_err(io_err(&path))?;
        Ok(PartialWriter { file, path })
    }

    /// Forgets the partial bytes of `chunk` (stored whole, or wrong).
    /// Best effort: a file left behind is never trusted.
    pub fn remove(&self, chunk: &ChunkRef) {
        let _ = fs::remove_file(self.path(chunk));
    }

    /// Removes every partial chunk (once a release is staged, what is
    /// left belongs to no fetch under way). Best effort. Returns how many
    /// files were removed.
    pub fn clear(&self) -> usize {
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return 0;
        };
        entries
            .flatten()
            .filter(|entry| fs::remove_file(entry.path()).is_ok())
            .count()
    }
}

/// Appends the pieces of one chunk as they arrive.
#[derive(Debug)]
pub struct PartialWriter {
    file: File,
    path: PathBuf,
}

impl PartialWriter {
    /// Appends `piece` (no fsync: see the module's comment).
    pub fn append(&mut self, piece: &[u8]) -> Result<(), ReleaseError> {
        self.file.write_all(piece).map_err(io_err(&self.path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::{Digest as _, Sha256};

    fn chunk_of(bytes: &[u8]) -> ChunkRef {
        ChunkRef {
            sha256: Sha256::digest(bytes).into(),
            len: bytes.len() as u32,
        }
    }

    #[test]
    fn kept_bytes_come_back_as_the_prefix_and_writing_resumes_after_them() {
        let dir = tempfile::tempdir().expect("tempdir");
        let partials = PartialChunks::open(dir.path()).expect("open");
        let whole: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        let chunk = chunk_of(&whole);
        assert!(partials.prefix(&chunk).is_empty());
        let mut writer = partials.writer(&chunk, 0).expect("writer");
        writer.append(&whole[..3_000]).expect("append");
        drop(writer);
        let prefix = partials.prefix(&chunk);
        assert_eq!(prefix, whole[..3_000]);
        let mut writer = partials
            .writer(&chunk, prefix.len() as u64)
            .expect("writer");
        writer.append(&whole[3_000..]).expect("append");
        drop(writer);
        assert_eq!(partials.prefix(&chunk), whole);
        partials.remove(&chunk);
        assert!(partials.prefix(&chunk).is_empty());
    }

    #[test]
    fn a_file_longer_than_its_chunk_is_removed_not_used() {
        let dir = tempfile::tempdir().expect("tempdir");
        let partials = PartialChunks::open(dir.path()).expect("open");
        let chunk = chunk_of(b"four");
        fs::write(partials.path(&chunk), b"fourfive").expect("write");
        assert!(partials.prefix(&chunk).is_empty());
        assert!(!partials.path(&chunk).exists());
    }

    #[test]
    fn a_writer_truncates_what_follows_the_kept_bytes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let partials = PartialChunks::open(dir.path()).expect("open");
        let chunk = chunk_of(b"abcdefgh");
        fs::write(partials.path(&chunk), b"abcXYZ").expect("write");
        let mut writer = partials.writer(&chunk, 3).expect("writer");
        writer.append(b"defgh").expect("append");
        drop(writer);
        assert_eq!(partials.prefix(&chunk), b"abcdefgh");
        assert_eq!(partials.clear(), 1);
        assert!(partials.prefix(&chunk).is_empty());
    }
}
