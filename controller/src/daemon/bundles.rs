//! The controller's bundle directory: verified bundles stored under their
//! digest, written so that a durable `RolloutStarted` never refers to a file
//! a crash can take back.

use model::Digest;
use protocol::quic::BundleStore;
use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Extension of a bundle being written; never served, removed at start.
const TEMP_EXTENSION: &str = "tmp";

/// Where uploaded bundles live, one file per digest.
pub struct BundleDir {
    /// The directory.
    pub dir: PathBuf,
    /// The extension of a stored file (`bundle`; `release` for signed
    /// format-2 manifests).
    extension: &'static str,
}

/// Extension of a stored format-1 bundle.
const BUNDLE_EXTENSION: &str = "bundle";

impl BundleDir {
    /// Opens the bundle directory, removing temporary files a crash or a
    /// failed upload left behind (an upload is either whole under its final
    /// name or not there at all). Returns how many were removed.
    pub fn open(dir: PathBuf) -> io::Result<(BundleDir, usize)> {
        Self::open_with_extension(dir, BUNDLE_EXTENSION)
    }

    /// Opens a directory of signed files stored as `<digest>.<extension>`,
    /// with the same clean-up and durability as [`BundleDir::open`].
    pub fn open_with_extension(
        dir: PathBuf,
        extension: &'static str,
    ) -> io::Result<(BundleDir, usize)> {
        fs::create_dir_all(&dir)?;
        let mut removed = 0;
        for entry in fs::read_dir(&dir)? {
            let path = entry?.path();
            if path.extension().is_some_and(|e| e == TEMP_EXTENSION) {
                fs::remove_file(&path)?;
                tracing::warn!("removed {}: an upload that never finished", path.display());
                removed += 1;
            }
        }
        Ok((BundleDir { dir, extension }, removed))
    }

    /// Where the bundle with `digest` lives.
    pub fn path(&self, digest: Digest) -> PathBuf {
        self.dir
            .join(format!("{}.{}", digest.to_hex(), self.extension))
    }

    /// Stores a verified bundle durably: written to a temporary file in the
    /// same directory, fsynced, renamed into place, then the directory is
    /// fsynced so the rename itself survives a crash. On any failure the
    /// temporary file is removed and nothing is left under the final name.
    pub fn store(&self, digest: Digest, bytes: &[u8]) -> io::Result<PathBuf> {
        let path = self.path(digest);
        let tmp = path.with_extension(TEMP_EXTENSION);
        let written = write_synced(&tmp, bytes)
            .and_then(|()| fs::rename(&tmp, &path))
            .and_then(|()| sync_dir(&self.dir));
        if let Err(e) = written {
            // Best effort: the file may not exist if creating it failed.
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
        Ok(path)
    }
}

impl BundleDir {
    /// The digests stored here, read from the file names (files of another
    /// extension or name are skipped).
    pub fn digests(&self) -> io::Result<Vec<Digest>> {
        let suffix = format!(".{}", self.extension);
        let mut digests = Vec::new();
        for entry in fs::read_dir(&self.dir)? {
            let name = entry?.file_name();
            let stem = name.to_str().and_then(|n| n.strip_suffix(suffix.as_str()));
            if let Some(digest) = stem.and_then(releases::chunk_name) {
                digests.push(Digest(digest));
            }
        }
        Ok(digests)
    }

    /// Removes the file of `digest` durably (the directory fsynced after
    /// the unlink). `false` when there was none.
    pub fn remove(&self, digest: Digest) -> io::Result<bool> {
        match fs::remove_file(self.path(digest)) {
            Ok(()) => {
                sync_dir(&self.dir)?;
                Ok(true)
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }
}

/// Creates `path` with `bytes` and fsyncs it before returning.
fn write_synced(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut file = File::create(path)?;
    file.write_all(bytes)?;
    if eventlog::mutants::active(eventlog::mutants::NO_FSYNC_BUNDLE_STORE) {
        return Ok(());
    }
    file.sync_all()
}

/// Fsyncs a directory, making the names created or renamed in it durable.
fn sync_dir(dir: &Path) -> io::Result<()> {
    if eventlog::mutants::active(eventlog::mutants::NO_DIRSYNC_AFTER_RENAME) {
        return Ok(());
    }
    File::open(dir)?.sync_all()
}

impl BundleStore for BundleDir {
    fn get(&self, digest: Digest) -> Option<Vec<u8>> {
        let path = self.path(digest);
        let bytes = fs::read(&path).ok()?;
        // Serve only what still hashes to its name; say so when it does not.
        let actual = protocol::bundle::bundle_digest(&bytes);
        if actual != digest {
            tracing::warn!(
                "{} hashes to {actual}, not its name: refusing to serve it (tampered or damaged)",
                path.display()
            );
            return None;
        }
        Some(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("fleetweft-bundles-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn a_stored_bundle_is_served_and_leaves_no_temporary_file() {
        let (store, removed) = BundleDir::open(temp_dir("store")).expect("open");
        assert_eq!(removed, 0);
        let bytes = b"not really a bundle, but hashed as one".to_vec();
        let digest = protocol::bundle::bundle_digest(&bytes);
        let path = store.store(digest, &bytes).expect("store");
        assert_eq!(fs::read(&path).expect("read"), bytes);
        assert_eq!(store.get(digest), Some(bytes));
        let names: Vec<_> = fs::read_dir(&store.dir)
            .expect("list")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
        fs::remove_dir_all(&store.dir).ok();
    }

    #[test]
    fn a_failed_store_leaves_nothing_and_start_removes_leftovers() {
        let dir = temp_dir("fail");
        let (store, _) = BundleDir::open(dir.clone()).expect("open");
        let digest = Digest::repeat(7);
        // A directory where the final name goes makes the rename fail after
        // the temporary file was written and synced.
        fs::create_dir(store.path(digest)).expect("block the final name");
        assert!(store.store(digest, b"bytes").is_err());
        let tmp = store.path(digest).with_extension(TEMP_EXTENSION);
        assert!(!tmp.exists(), "the temporary file was removed");
        // A leftover from a crash is removed at the next start.
        fs::write(&tmp, b"half an upload").expect("leftover");
        let (_, removed) = BundleDir::open(dir.clone()).expect("reopen");
        assert_eq!(removed, 1);
        assert!(!tmp.exists());
        fs::remove_dir_all(&dir).ok();
    }
}
