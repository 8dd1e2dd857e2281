//! Reading back an installed tree for a proof at a bounded cost
//! ([`verify_dir_cached`]), instead of re-hashing every byte of it on
//! every read (4 GiB of SHA-256 per probe of a large release).
//!
//! What a read-back must still catch, and how:
//!
//! - A file added, removed, renamed, swapped, retyped, re-moded or
//!   resized: the whole tree is listed and `stat`ed on every call, and
//!   matched against the signed manifest exactly as
//!   [`crate::tree::verify_dir`] does.
//! - Content changed through the filesystem, same size included (`write`,
//!   `truncate` then rewrite, `mmap`, a copy over it, a rename over it):
//!   each of these sets the file's ctime to the current time, and ctime
//!   cannot be set from user space (`touch -d` and `utimensat` set mtime
//!   and atime, and themselves move ctime). A file whose [`Stamp`] (device,
//!   inode, size, mode, mtime, ctime) is the one recorded when its bytes
//!   last verified is not re-hashed; any other file is, whole.
//! - A stamp taken within [`RACY_WINDOW`] of its own ctime is never
//!   recorded (git's "racy clean" rule): on a filesystem with coarse
//!   timestamps an edit in the same tick would keep the stamp.
//! - Content changed beneath the filesystem (bit rot, a write to the raw
//!   device, another system mounting the disk, a clock set back before an
//!   edit): no stamp moves. Every call also re-hashes up to
//!   `rehash_bytes_max` of the tree's chunks, resuming where the previous
//!   call stopped, so such a change is found within
//!   `release bytes / rehash_bytes_max` calls. The cost per call is that
//!   budget plus what changed, both bounded and measured
//!   ([`ReadBackCost`]).
//!
//! The stamps live in the caller's memory only: a process that starts
//! again hashes the whole tree once, and nothing on disk is trusted to say
//! what was verified.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::time::SystemTime;

use sha2::{Digest as _, Sha256};

use crate::error::{io_err, ReleaseError};
use crate::manifest::{Manifest, Sha256Bytes};
use crate::tree::{listing, mismatch, open_found, verify_file, Found};

pub use crate::stamp::{Stamp, RACY_WINDOW};

/// What one release's read-backs remember between calls: per entry, the
/// stamp its bytes last verified under, and where the rolling re-hash
/// resumes. Keep one per release (the stamps are by manifest entry).
#[derive(Debug, Default)]
pub struct ReadBackCache {
    stamps: Vec<Option<Stamp>>,
    /// (entry, chunk, byte offset of that chunk in its file).
    cursor: (usize, usize, u64),
}

/// What one [`verify_dir_cached`] call read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadBackCost {
    /// Files hashed whole (new, changed or racy stamp).
    pub files_hashed: usize,
    /// Bytes hashed, whole files and rolling chunks together.
    pub bytes_hashed: u64,
}

/// Checks that `root` holds exactly the tree of `manifest`, as
/// [`crate::tree::verify_dir`] does, at a bounded cost (see the module's
/// documentation): listing and `stat` of every file, whole-file hashes of
/// files whose stamp is not the one recorded in `cache`, and up to
/// `rehash_bytes_max` bytes of chunks re-hashed in turn. `now` decides
/// which stamps are too fresh to record. On any error `cache` is emptied.
pub fn verify_dir_cached(
    manifest: &Manifest,
    root: &Path,
    cache: &mut ReadBackCache,
    rehash_bytes_max: u64,
    now: SystemTime,
) -> Result<ReadBackCost, ReleaseError> {
    if cache.stamps.len() != manifest.entries.len() {
        *cache = ReadBackCache {
            stamps: vec![None; manifest.entries.len()],
            cursor: (0, 0, 0),
        };
    }
    let checked = check_changed(manifest, root, cache, now).and_then(|(listed, mut cost)| {
        cost.bytes_hashed += rolling(manifest, &listed, cache, rehash_bytes_max)?;
        Ok(cost)
    });
    if checked.is_err() {
        *cache = ReadBackCache::default();
    }
    checked
}

/// Lists the tree against the manifest and hashes every file whose stamp
/// is not the recorded one, recording the stamps that are not racy.
fn check_changed(
    manifest: &Manifest,
    root: &Path,
    cache: &mut ReadBackCache,
    now: SystemTime,
) -> Result<(Vec<Found>, ReadBackCost), ReleaseError> {
    let listed = listing(manifest, root)?;
    let mut cost = ReadBackCost::default();
    let mut buffer = Vec::new();
    for (i, (entry, found)) in manifest.entries.iter().zip(&listed).enumerate() {
        if cache.stamps[i] == Some(found.stamp) {
            continue;
        }
        cache.stamps[i] = None;
        if buffer.is_empty() {
            buffer = vec![0u8; crate::limits::CHUNK_BYTES_MAX as usize];
        }
        verify_file(entry, open_found(found)?, &mut buffer)?;
        cost.files_hashed += 1;
        cost.bytes_hashed += entry.size;
        // The stamp was taken before the bytes were read: a change while
        // they were read moves it, and the next call hashes again.
        if !found.stamp.racy(now) {
            cache.stamps[i] = Some(found.stamp);
        }
    }
    Ok((listed, cost))
}

/// Re-hashes chunks from the cache's cursor on until `budget` bytes are
/// read or every chunk was read once; returns the bytes read.
fn rolling(
    manifest: &Manifest,
    listed: &[Found],
    cache: &mut ReadBackCache,
    budget: u64,
) -> Result<u64, ReleaseError> {
    let chunks: usize = manifest.entries.iter().map(|e| e.chunks.len()).sum();
    let (mut read, mut visited) = (0u64, 0usize);
    let mut open: Option<(usize, File)> = None;
    let mut buffer = Vec::new();
    while read < budget && visited < chunks {
        let (e, c, offset) = cache.cursor;
        let Some(entry) = manifest.entries.get(e) else {
            cache.cursor = (0, 0, 0);
            continue;
        };
        let Some(chunk) = entry.chunks.get(c) else {
            cache.cursor = (e + 1, 0, 0);
            continue;
        };
        let file = match open.take() {
            Some((i, file)) if i == e => file,
            _ => open_found(&listed[e])?,
        };
        let file = &mut open.insert((e, file)).1;
        buffer.resize(chunk.len as usize, 0);
        let path = &listed[e].abs;
        file.seek(SeekFrom::Start(offset))
            .and_then(|_| file.read_exact(&mut buffer))
            .map_err(io_err(path))?;
        let actual: Sha256Bytes = Sha256::digest(&buffer).into();
        if actual != chunk.sha256 {
            cache.stamps[e] = None;
            return Err(mismatch(
                &entry.path,
                format!(
                    "chunk {c} at offset {offset} hashes to {}, release says {}",
                    hex::encode(actual),
                    chunk.hex()
                ),
            ));
        }
        read += u64::from(chunk.len);
        visited += 1;
        cache.cursor = (e, c + 1, offset + u64::from(chunk.len));
    }
    Ok(read)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::{sign_dir, verify_dir};
    use crate::ReleaseFields;

    /// A signed tree of two files in `root`: (manifest, the big file).
    fn tree(root: &Path) -> (Manifest, std::path::PathBuf) {
        let mut noise = crate::sample::Noise::new(1, 3 * 1024 * 1024);
        let mut big = Vec::new();
        noise.read_to_end(&mut big).expect("noise");
        std::fs::create_dir_all(root.join("d")).expect("dir");
        std::fs::write(root.join("d/big.bin"), &big).expect("big");
        std::fs::write(root.join("app.py"), b"print('hi')").expect("app");
        let (key, _) = protocol::bundle::keygen();
        let fields = ReleaseFields {
            name: "t".into(),
            version: "v".into(),
            run: vec!["./app.py".into()],
            probe: protocol::bundle::ProbeSpec {
                path: "/".into(),
                expect_status: 200,
                expect_body: "hi".into(),
                expect_json: None,
            },
            limits: Default::default(),
            migration: None,
        };
        let bytes = sign_dir(&key, fields, root, &mut |_, _| Ok(())).expect("sign");
        let manifest = crate::read_unverified(&bytes).expect("manifest").manifest;
        (manifest, root.join("d/big.bin"))
    }

    /// Later than every stamp of the test by more than the racy window.
    fn later() -> SystemTime {
        SystemTime::now() + RACY_WINDOW * 2
    }

    #[test]
    fn an_unchanged_tree_is_hashed_once_then_within_the_budget() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (manifest, _) = tree(dir.path());
        let made = SystemTime::now();
        let mut cache = ReadBackCache::default();
        let first = verify_dir_cached(&manifest, dir.path(), &mut cache, 0, later()).expect("ok");
        assert_eq!(first.files_hashed, 2);
        let again = verify_dir_cached(&manifest, dir.path(), &mut cache, 0, later()).expect("ok");
        assert_eq!(again, ReadBackCost::default(), "nothing changed, no budget");
        let budget = 1024 * 1024;
        let rolled =
            verify_dir_cached(&manifest, dir.path(), &mut cache, budget, later()).expect("ok");
        assert_eq!(rolled.files_hashed, 0);
        assert!(rolled.bytes_hashed >= budget, "{rolled:?}");
        assert!(rolled.bytes_hashed < budget + u64::from(crate::limits::CHUNK_BYTES_MAX));
        // Fresh stamps are racy: never recorded, hashed every time.
        let mut fresh = ReadBackCache::default();
        let now = made;
        verify_dir_cached(&manifest, dir.path(), &mut fresh, 0, now).expect("ok");
        let racy = verify_dir_cached(&manifest, dir.path(), &mut fresh, 0, now).expect("ok");
        assert_eq!(racy.files_hashed, 2);
    }

    /// A same-size edit through the filesystem moves ctime: found at the
    /// next call, however small the budget.
    #[test]
    fn a_same_size_edit_is_found_at_the_next_read_back() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (manifest, big) = tree(dir.path());
        let mut cache = ReadBackCache::default();
        verify_dir_cached(&manifest, dir.path(), &mut cache, 0, later()).expect("ok");
        // Past the coarsest timestamp tick of common filesystems (1 s).
        std::thread::sleep(std::time::Duration::from_millis(1100));
        let mut bytes = std::fs::read(&big).expect("read");
        bytes[2_000_000] ^= 1;
        std::fs::write(&big, &bytes).expect("same-size edit");
        let found = verify_dir_cached(&manifest, dir.path(), &mut cache, 0, later());
        assert!(
            matches!(found, Err(ReleaseError::FileMismatch { .. })),
            "{found:?}"
        );
        assert!(verify_dir(&manifest, dir.path()).is_err());
    }

    /// A change no stamp shows (here: the recorded stamp forged to the
    /// edited file's, as bit rot or a raw-device write would leave it) is
    /// found by the rolling re-hash within release bytes / budget calls.
    #[test]
    fn a_change_beneath_the_filesystem_is_found_by_the_rolling_rehash() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (manifest, big) = tree(dir.path());
        let mut cache = ReadBackCache::default();
        verify_dir_cached(&manifest, dir.path(), &mut cache, 0, later()).expect("ok");
        let mut bytes = std::fs::read(&big).expect("read");
        bytes[3 * 1024 * 1024 - 10] ^= 1;
        std::fs::write(&big, &bytes).expect("edit");
        let listed = listing(&manifest, dir.path()).expect("listing");
        for (i, found) in listed.iter().enumerate() {
            cache.stamps[i] = Some(found.stamp);
        }
        let stamped = verify_dir_cached(&manifest, dir.path(), &mut cache, 0, later());
        assert!(stamped.is_ok(), "no budget, no stamp moved: not seen yet");
        let total: u64 = manifest.entries.iter().map(|e| e.size).sum();
        let budget = 256 * 1024;
        let calls = total.div_ceil(budget) + 1;
        let found = (0..calls).any(|_| {
            verify_dir_cached(&manifest, dir.path(), &mut cache, budget, later()).is_err()
        });
        assert!(found, "the rolling re-hash never reached the edited chunk");
    }
}
