//! Forensic reads: looking at a log without writing to it.
//!
//! sled 0.34.7 has no read-only open. Opening a database creates `blobs/`
//! if it is missing, runs sled's recovery (which treats damage in its file
//! like a torn write and zeroes everything after it) and may write a new
//! snapshot file even when the log is intact. A log that is evidence must
//! not go through that, so a forensic read opens a private copy:
//!
//! 1. refuse a directory without sled's files, without touching it;
//! 2. take a shared `flock` on the original's `db` file, the lock sled holds
//!    exclusively while a database is open: if it is held (after the same
//!    bounded wait `open` uses), the log is [in use](VerifyError::InUse);
//!    while ours is held, no controller or agent can open the log, so the
//!    copy is consistent;
//! 3. copy every file of the directory (sled's `conf`, `db`, snapshots,
//!    `blobs/`, the durable watermark) into a fresh private directory under
//!    the system's temporary directory (`TMPDIR`), at most
//!    [`FORENSIC_COPY_BYTES_MAX`] bytes and [`FORENSIC_COPY_FILES_MAX`]
//!    files; only directories and regular files are copied;
//! 4. release the lock, open the copy, and remove it when done.
//!
//! The original is only ever opened for reading.

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use super::sled_dir::{
    has_sled_files, lock_shared_for_reading, wait_for_lock_release, SharedLock, SLED_DB_FILE,
};

/// Most bytes a forensic read copies: the sum of the sizes of every file in
/// the log directory. At about 600 bytes on disk per event (see
/// `docs/performance.md`) this is some 7 million events.
pub const FORENSIC_COPY_BYTES_MAX: u64 = 4 * 1024 * 1024 * 1024;

/// Most files (and directories) a forensic read copies. A log directory
/// holds a handful: sled's `conf`, `db`, a snapshot or two, `blobs/`, the
/// watermark.
pub const FORENSIC_COPY_FILES_MAX: u64 = 10_000;

/// Deepest directory nesting copied (sled uses one level: `blobs/`).
const COPY_DEPTH_MAX: usize = 4;

/// Prefix of the private copies' directory names in the temporary directory.
pub(super) const COPY_PREFIX: &str = "fleetweft-forensic-";

/// Why a private copy could not be made. The original was not changed and
/// nothing was judged.
#[derive(Debug, thiserror::Error)]
pub enum CopyProblem {
    /// The directory is over [`FORENSIC_COPY_BYTES_MAX`].
    #[error(
        "its files hold {bytes} bytes, over the {max}-byte limit of the private copy \
         a forensic read makes (FORENSIC_COPY_BYTES_MAX)"
    )]
    TooLarge {
        /// Bytes found (so far, when the walk stopped early).
        bytes: u64,
        /// The limit.
        max: u64,
    },
    /// The directory holds more than [`FORENSIC_COPY_FILES_MAX`] entries.
    #[error(
        "it holds more than {max} files, the limit of the private copy a forensic read \
         makes (FORENSIC_COPY_FILES_MAX)"
    )]
    TooManyFiles {
        /// The limit.
        max: u64,
    },
    /// Something that is neither a regular file nor a directory (a symlink,
    /// a device, a socket), or directories nested deeper than sled makes.
    #[error("{} is not a regular file or directory of a sled database", entry.display())]
    Unexpected {
        /// The offending entry.
        entry: PathBuf,
    },
    /// Reading the original or writing the copy failed (e.g. no space left
    /// in the temporary directory: set `TMPDIR` to put the copy elsewhere).
    #[error("{action} {}: {source}", path.display())]
    Io {
        /// What was being done, e.g. "reading".
        action: &'static str,
        /// The file it was done to.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}

/// Why no private copy of a log directory was taken (`verify` names the
/// directory when it reports it).
#[derive(Debug)]
pub(super) enum CopyRefused {
    /// No sled database there: what is missing.
    NotALog(String),
    /// A running controller or agent holds the database's lock.
    InUse,
    /// The copy could not be made.
    Failed(CopyProblem),
}

/// A private copy of a log directory, removed when dropped.
pub(super) struct SnapshotCopy {
    dir: PathBuf,
}

impl SnapshotCopy {
    /// Copies the log in `original` (steps 1–3 of the module docs).
    pub(super) fn take(original: &Path) -> Result<Self, CopyRefused> {
        Self::take_within(original, Limits::FORENSIC)
    }

    fn take_within(original: &Path, limits: Limits) -> Result<Self, CopyRefused> {
        if !has_sled_files(original) {
            return Err(CopyRefused::NotALog(
                "no sled database (missing `conf` or `db` file)".into(),
            ));
        }
        let uninspectable = CopyRefused::Failed;
        let db_file = original.join(SLED_DB_FILE);
        // Held until the copy is complete; dropping the file releases it.
        let _lock = match lock_shared_for_reading(&db_file) {
            Ok(SharedLock::Held(file)) => Some(file),
            // A file system without flock: sled could not lock it either,
            // so no controller can be running on it.
            Ok(SharedLock::Unsupported) => None,
            Ok(SharedLock::InUse) => return Err(CopyRefused::InUse),
            Err(source) => {
                return Err(uninspectable(CopyProblem::Io {
                    action: "opening",
                    path: db_file,
                    source,
                }))
            }
        };
        Budget::new(limits)
            .measure(original, 0)
            .map_err(uninspectable)?;
        let copy = SnapshotCopy {
            dir: make_private_dir().map_err(uninspectable)?,
        };
        // On failure `copy` is dropped, which removes what was copied.
        copy_tree(original, &copy.dir, 0, &mut Budget::new(limits)).map_err(uninspectable)?;
        Ok(copy)
    }

    /// The copy's directory.
    pub(super) fn path(&self) -> &Path {
        &self.dir
    }
}

impl Drop for SnapshotCopy {
    /// Removes the copy (best effort). sled's background threads may still
    /// hold the copy's files for a moment after the last handle is dropped,
    /// and write a last snapshot; wait for them as `open` does, then remove.
    fn drop(&mut self) {
        let _ = wait_for_lock_release(&self.dir.join(SLED_DB_FILE));
        for _ in 0..3 {
            match fs::remove_dir_all(&self.dir) {
                Err(err) if err.kind() != io::ErrorKind::NotFound => {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                _ => return,
            }
        }
    }
}

/// The copy limits (the constants, or small ones in tests).
#[derive(Clone, Copy)]
struct Limits {
    bytes: u64,
    files: u64,
}

impl Limits {
    const FORENSIC: Limits = Limits {
        bytes: FORENSIC_COPY_BYTES_MAX,
        files: FORENSIC_COPY_FILES_MAX,
    };
}

/// Counts bytes and entries against the copy limits.
struct Budget {
    limits: Limits,
    bytes: u64,
    files: u64,
}

impl Budget {
    fn new(limits: Limits) -> Self {
        Budget {
            limits,
            bytes: 0,
            files: 0,
        }
    }

    fn add_entry(&mut self) -> Result<(), CopyProblem> {
        self.files += 1;
        if self.files > self.limits.files {
            return Err(CopyProblem::TooManyFiles {
                max: self.limits.files,
            });
        }
        Ok(())
    }

    fn add_bytes(&mut self, bytes: u64) -> Result<(), CopyProblem> {
        self.bytes = self.bytes.saturating_add(bytes);
        if self.bytes > self.limits.bytes {
            return Err(CopyProblem::TooLarge {
                bytes: self.bytes,
                max: self.limits.bytes,
            });
        }
        Ok(())
    }

    /// Bytes that may still be copied.
    fn bytes_left(&self) -> u64 {
        self.limits.bytes.saturating_sub(self.bytes)
    }

    /// Walks `dir` (metadata only), refusing it before anything is copied
    /// if it is over a limit or holds anything but files and directories.
    fn measure(&mut self, dir: &Path, depth: usize) -> Result<(), CopyProblem> {
        for entry in read_dir(dir)? {
            self.add_entry()?;
            let (path, kind) = entry;
            match kind {
                EntryKind::File(len) => self.add_bytes(len)?,
                EntryKind::Dir if depth < COPY_DEPTH_MAX => self.measure(&path, depth + 1)?,
                EntryKind::Dir => return Err(CopyProblem::Unexpected { entry: path }),
            }
        }
        Ok(())
    }
}

enum EntryKind {
    File(u64),
    Dir,
}

/// The entries of `dir` with their kind, without following symlinks.
fn read_dir(dir: &Path) -> Result<Vec<(PathBuf, EntryKind)>, CopyProblem> {
    let io_error = |path: &Path| {
        let path = path.to_path_buf();
        move |source| CopyProblem::Io {
            action: "listing",
            path,
            source,
        }
    };
    let mut entries = Vec::new();
    for entry in fs::read_dir(dir).map_err(io_error(dir))? {
        let entry = entry.map_err(io_error(dir))?;
        let path = entry.path();
        // `DirEntry::metadata` does not follow symlinks.
        let meta = entry.metadata().map_err(io_error(&path))?;
        let kind = if meta.is_file() {
            EntryKind::File(meta.len())
        } else if meta.is_dir() {
            EntryKind::Dir
        } else {
            return Err(CopyProblem::Unexpected { entry: path });
        };
        entries.push((path, kind));
    }
    Ok(entries)
}

/// Copies the files and directories of `from` into the existing `to`,
/// counting against `budget` again (a file may have grown since it was
/// measured: at most the budget's remainder is read).
fn copy_tree(from: &Path, to: &Path, depth: usize, budget: &mut Budget) -> Result<(), CopyProblem> {
    for (path, kind) in read_dir(from)? {
        budget.add_entry()?;
        let target = to.join(path.file_name().unwrap_or_default());
        match kind {
            EntryKind::Dir if depth < COPY_DEPTH_MAX => {
                DirBuilder::new()
                    .mode(0o700)
                    .create(&target)
                    .map_err(|source| CopyProblem::Io {
                        action: "creating",
                        path: target.clone(),
                        source,
                    })?;
                copy_tree(&path, &target, depth + 1, budget)?;
            }
            EntryKind::Dir => return Err(CopyProblem::Unexpected { entry: path }),
            EntryKind::File(_) => {
                let copied = copy_file(&path, &target, budget.bytes_left())?;
                budget.add_bytes(copied)?;
            }
        }
    }
    Ok(())
}

/// Copies at most `limit + 1` bytes of `from` into a new private file `to`
/// (so going over the limit is noticed); returns the bytes copied.
fn copy_file(from: &Path, to: &Path, limit: u64) -> Result<u64, CopyProblem> {
    let reading = |source| CopyProblem::Io {
        action: "reading",
        path: from.to_path_buf(),
        source,
    };
    let writing = |source| CopyProblem::Io {
        action: "writing",
        path: to.to_path_buf(),
        source,
    };
    let source = File::open(from).map_err(reading)?;
    // Our own permissions, never the original's: the copy must be writable
    // for sled even when the evidence is read-only.
    let mut target = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(to)
        .map_err(writing)?;
    let mut limited = source.take(limit.saturating_add(1));
    // io::copy reports read and write errors alike; tell them apart.
    let mut buffer = vec![0u8; 64 * 1024];
    let mut copied = 0u64;
    loop {
        let read = match limited.read(&mut buffer) {
            Ok(0) => return Ok(copied),
            Ok(read) => read,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            Err(err) => return Err(reading(err)),
        };
        io::Write::write_all(&mut target, &buffer[..read]).map_err(writing)?;
        copied += read as u64;
    }
}

/// Creates a new directory only we can read, under the temporary directory.
fn make_private_dir() -> Result<PathBuf, CopyProblem> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let base = std::env::temp_dir();
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.subsec_nanos());
    let mut last_error = None;
    for _ in 0..100 {
        let name = format!(
            "{COPY_PREFIX}{}-{nanos:x}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let dir = base.join(name);
        match DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => last_error = Some(err),
            Err(source) => {
                return Err(CopyProblem::Io {
                    action: "creating",
                    path: dir,
                    source,
                })
            }
        }
    }
    Err(CopyProblem::Io {
        action: "creating a private directory in",
        path: base,
        source: last_error.unwrap_or_else(|| io::Error::other("no free name")),
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::BTreeMap;

    use sha2::{Digest, Sha256};

    use super::*;
    use crate::EventLog;

    pub(crate) fn make_log(dir: &Path, count: u64) {
        let (log, _) = EventLog::<String>::open(dir).expect("open");
        let events = (0..count).map(|i| format!("event number {i}")).collect();
        let _durable = log.append(events).expect("append");
        log.close().expect("close");
    }

    /// Every entry below `dir` by relative path: a file's SHA-256, or `None`
    /// for a directory.
    pub(crate) fn tree(dir: &Path) -> BTreeMap<PathBuf, Option<[u8; 32]>> {
        fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Option<[u8; 32]>>) {
            for entry in fs::read_dir(dir).expect("list") {
                let path = entry.expect("entry").path();
                let relative = path.strip_prefix(root).expect("below root").to_path_buf();
                if path.is_dir() {
                    out.insert(relative, None);
                    walk(root, &path, out);
                } else {
                    let bytes = fs::read(&path).expect("read");
                    out.insert(relative, Some(Sha256::digest(&bytes).into()));
                }
            }
        }
        let mut out = BTreeMap::new();
        walk(dir, dir, &mut out);
        out
    }

    pub(crate) fn log_in_temp(count: u64) -> (tempfile::TempDir, PathBuf) {
        let temp = tempfile::tempdir().expect("temp dir");
        let dir = temp.path().join("log");
        make_log(&dir, count);
        (temp, dir)
    }

    #[test]
    fn the_copy_holds_every_file_and_is_removed_afterwards() {
        let (_temp, dir) = log_in_temp(20);
        let before = tree(&dir);
        let copy = SnapshotCopy::take(&dir).expect("copy");
        let copied = copy.path().to_path_buf();
        assert!(!copied.starts_with(&dir));
        assert_eq!(tree(&copied), before, "every file, byte for byte");
        drop(copy);
        assert!(!copied.exists(), "the copy is removed");
        assert_eq!(tree(&dir), before, "the original is untouched");
    }

    #[test]
    fn limits_refuse_before_copying() {
        let (_temp, dir) = log_in_temp(5);
        let before = tree(&dir);
        let small = |bytes, files| SnapshotCopy::take_within(&dir, Limits { bytes, files });
        let err = small(100, 1_000).err().expect("too large");
        let CopyRefused::Failed(problem) = err else {
            panic!("{err:?}")
        };
        assert!(
            matches!(problem, CopyProblem::TooLarge { max: 100, .. }),
            "{problem:?}"
        );
        assert!(
            problem.to_string().contains("FORENSIC_COPY_BYTES_MAX"),
            "{problem}"
        );
        let err = small(u64::MAX, 2).err().expect("too many files");
        assert!(
            matches!(
                err,
                CopyRefused::Failed(CopyProblem::TooManyFiles { max: 2 })
            ),
            "{err:?}"
        );
        assert_eq!(tree(&dir), before);
    }
}
