//! Data that outlives releases (issue #24 item 2): each app has a
//! directory under the agent's data directory, kept across releases and
//! rollbacks, handed to every instance as `FLEETWEFT_DATA_DIR`. Keyed by
//! the release's name, so v1, v2 and a rollback to v1 of one app share it;
//! a release under another name is another app.
//!
//! Before a release's migration runs, the directory is copied to its
//! snapshot ([`snapshot`], within [`DATA_SNAPSHOT_BYTES_MAX`]); a failed
//! migration, and a roll back after a reversible one, put the snapshot
//! back in place by rename ([`restore`]). Files are reflinked (`ioctl FICLONE`) where the file
//! system shares blocks (btrfs, XFS), else copied.

use sha2::{Digest as _, Sha256};
use std::path::{Path, PathBuf};

/// The agent data directory's subdirectory holding every app's data.
pub const APP_DATA_DIR: &str = "app-data";
/// Longest app name used as a directory name as it is, in bytes.
const NAME_AS_DIR_BYTES_MAX: usize = 64;

/// `DATA/app-data/<name>`: the name itself when it is a plain file name
/// (letters, digits, `.`, `_`, `-`, not starting with `.` or `-`), else
/// `app-` and 16 hex digits of its SHA-256 (a release name may hold `/`
/// or `..`, which must never pick a directory elsewhere).
pub fn dir_for(data_dir: &Path, name: &str) -> PathBuf {
    data_dir.join(APP_DATA_DIR).join(dir_name(name))
}

fn dir_name(name: &str) -> String {
    let plain = !name.is_empty()
        && name.len() <= NAME_AS_DIR_BYTES_MAX
        && !name.starts_with(['.', '-'])
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if plain {
        return name.to_string();
    }
    let digest = Sha256::digest(name.as_bytes());
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("app-{hex}")
}

/// Largest data directory the agent snapshots before a migration, in
/// bytes (file sizes added up): a copy of more would take the node's disk
/// and time the migration's caller does not expect. Over it the migration
/// is refused before anything is changed.
pub const DATA_SNAPSHOT_BYTES_MAX: u64 = 1 << 30;
/// Most files and directories a snapshot copies: the bound on the walk.
pub const DATA_SNAPSHOT_ENTRIES_MAX: u64 = 1_000_000;
/// A snapshot's name while it is copied: a crash leaves it, never a
/// half-copied snapshot under its final name.
const SNAPSHOT_TEMP_SUFFIX: &str = ".partial";

/// Why a snapshot could not be taken or put back.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// The data directory is over the bound: nothing was copied.
    #[error(
        "the data directory {dir} holds {bytes} bytes or more, over the snapshot bound of {bytes_max} bytes: the migration is refused, nothing was changed"
    )]
    OverBound {
        dir: PathBuf,
        bytes: u64,
        bytes_max: u64,
    },
    /// The data directory has more entries than a snapshot walks.
    #[error("the data directory {dir} holds more than {DATA_SNAPSHOT_ENTRIES_MAX} files and directories: the migration is refused, nothing was changed")]
    TooManyEntries { dir: PathBuf },
    /// A file system call failed.
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn io(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> SnapshotError {
    let path = path.to_path_buf();
    move |source| SnapshotError::Io { what, path, source }
}

/// Where the snapshot of the app data directory `dir` lives: beside it,
/// under a name no app directory takes (they never start with `.`), so
/// putting it back is a rename within one file system.
pub fn snapshot_for(dir: &Path) -> PathBuf {
    let leaf = dir
        .file_name()
        .map_or_else(|| "app".to_string(), |n| n.to_string_lossy().into_owned());
    dir.with_file_name(format!(".snapshot.{leaf}"))
}

/// Bytes (file sizes added up) and entries under `dir`, stopping as soon
/// as either is over its bound. Symbolic links count as entries and are
/// not followed.
fn measure(dir: &Path, bytes_max: u64) -> Result<(u64, u64), SnapshotError> {
    let (mut bytes, mut entries) = (0u64, 0u64);
    let mut todo = vec![dir.to_path_buf()];
    while let Some(at) = todo.pop() {
        for entry in std::fs::read_dir(&at).map_err(io("reading", &at))? {
            let entry = entry.map_err(io("reading", &at))?;
            let kind = entry.file_type().map_err(io("reading", &entry.path()))?;
            entries += 1;
            if kind.is_dir() {
                todo.push(entry.path());
            } else if kind.is_file() {
                let len = entry
                    .metadata()
                    .map_err(io("reading", &entry.path()))?
                    .len();
                bytes = bytes.saturating_add(len);
            }
            if bytes > bytes_max {
                return Err(SnapshotError::OverBound {
                    dir: dir.to_path_buf(),
                    bytes,
                    bytes_max,
                });
            }
            if entries > DATA_SNAPSHOT_ENTRIES_MAX {
                return Err(SnapshotError::TooManyEntries {
                    dir: dir.to_path_buf(),
                });
            }
        }
    }
    Ok((bytes, entries))
}

/// Copies the data directory `dir` to `to` (a fresh snapshot: an older one
/// there is replaced), fsynced, under a temporary name renamed into place
/// once whole. Refused, changing nothing, when `dir` holds more than
/// `bytes_max` bytes. Returns the bytes copied.
pub fn snapshot(dir: &Path, to: &Path, bytes_max: u64) -> Result<u64, SnapshotError> {
    let (bytes, _) = measure(dir, bytes_max)?;
    let mut partial = to.as_os_str().to_owned();
    partial.push(SNAPSHOT_TEMP_SUFFIX);
    let partial = PathBuf::from(partial);
    remove_if_there(&partial)?;
    copy_tree(dir, &partial)?;
    remove_if_there(to)?;
    std::fs::rename(&partial, to).map_err(io("renaming the snapshot to", to))?;
    sync_parent(to)?;
    Ok(bytes)
}

/// Puts the snapshot `from` back as the data directory `dir`: `dir` is
/// renamed aside, the snapshot renamed into its place, and what was `dir`
/// removed. Each rename is atomic, and a crash between them fails safe:
/// the snapshot is still whole under its own name, `dir` missing, and the
/// next restore finishes the job (a missing `dir` is simply replaced).
/// An exchange of the two names in one step (`RENAME_EXCHANGE`) would
/// leave, on a crash before the old data is removed, the migrated data
/// under the snapshot's name, which a later restore would put back: not
/// used. `false` when there is no snapshot: nothing was migrated since
/// the last restore, or the snapshot was never finished (the migration
/// runs only once it is), and `dir` is left alone.
pub fn restore(dir: &Path, from: &Path) -> Result<bool, SnapshotError> {
    if !from.is_dir() {
        return Ok(false);
    }
    let mut aside = from.as_os_str().to_owned();
    aside.push(".replaced");
    let aside = PathBuf::from(aside);
    remove_if_there(&aside)?;
    match std::fs::rename(dir, &aside) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io("moving aside", dir)(e)),
    }
    std::fs::rename(from, dir).map_err(io("renaming the snapshot to", dir))?;
    sync_parent(dir)?;
    remove_if_there(&aside)?;
    Ok(true)
}

/// Removes the snapshot `at`, if there is one (its op settled).
pub fn discard(at: &Path) -> Result<(), SnapshotError> {
    remove_if_there(at)
}

fn remove_if_there(at: &Path) -> Result<(), SnapshotError> {
    match std::fs::remove_dir_all(at) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io("removing", at)(e)),
    }
}

/// Copies `from` into the new directory `to`: directories, regular files
/// (fsynced) and symbolic links, with their modes and, where the agent may
/// (as root), their owners, so the app finds its data as it left it.
fn copy_tree(from: &Path, to: &Path) -> Result<(), SnapshotError> {
    let mut todo = vec![(from.to_path_buf(), to.to_path_buf())];
    while let Some((src, dst)) = todo.pop() {
        let meta = std::fs::symlink_metadata(&src).map_err(io("reading", &src))?;
        std::fs::create_dir(&dst).map_err(io("creating", &dst))?;
        for entry in std::fs::read_dir(&src).map_err(io("reading", &src))? {
            let entry = entry.map_err(io("reading", &src))?;
            let (s, d) = (entry.path(), dst.join(entry.file_name()));
            let kind = entry.file_type().map_err(io("reading", &s))?;
            if kind.is_dir() {
                todo.push((s, d));
            } else if kind.is_symlink() {
                let target = std::fs::read_link(&s).map_err(io("reading", &s))?;
                std::os::unix::fs::symlink(target, &d).map_err(io("creating", &d))?;
                keep_owner(&s, &d)?;
            } else if kind.is_file() {
                copy_file(&s, &d)?;
            }
        }
        std::fs::set_permissions(&dst, meta.permissions())
            .map_err(io("setting the mode of", &dst))?;
        keep_owner(&src, &dst)?;
        std::fs::File::open(&dst)
            .and_then(|d| d.sync_all())
            .map_err(io("syncing", &dst))?;
    }
    Ok(())
}

fn copy_file(from: &Path, to: &Path) -> Result<(), SnapshotError> {
    if !reflink(from, to) {
        std::fs::copy(from, to).map_err(io("copying to", to))?;
    }
    keep_owner(from, to)?;
    std::fs::File::open(to)
        .and_then(|f| f.sync_all())
        .map_err(io("syncing", to))
}

/// A reflink of `from` as the new file `to` (`ioctl FICLONE`: the two
/// share their blocks until either is written, on btrfs, XFS and the
/// like), with `from`'s mode; `false` where the file system cannot, and
/// then nothing of `to` is left for the plain copy.
fn reflink(from: &Path, to: &Path) -> bool {
    use std::os::fd::AsRawFd;
    let Ok(src) = std::fs::File::open(from) else {
        return false;
    };
    let Ok(dst) = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(to)
    else {
        return false;
    };
    // SAFETY: two descriptors open for the duration of the call.
    let cloned = unsafe { libc::ioctl(dst.as_raw_fd(), libc::FICLONE, src.as_raw_fd()) } == 0;
    let moded = cloned
        && src
            .metadata()
            .and_then(|m| dst.set_permissions(m.permissions()))
            .is_ok();
    if !moded {
        drop(dst);
        let _ = std::fs::remove_file(to);
    }
    moded
}

/// Gives `to` the owner of `from` when the agent runs as root (otherwise
/// everything it copies is its own already).
fn keep_owner(from: &Path, to: &Path) -> Result<(), SnapshotError> {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Ok(());
    }
    let meta = std::fs::symlink_metadata(from).map_err(io("reading", from))?;
    std::os::unix::fs::lchown(to, Some(meta.uid()), Some(meta.gid()))
        .map_err(io("setting the owner of", to))
}

fn sync_parent(at: &Path) -> Result<(), SnapshotError> {
    let parent = at.parent().unwrap_or(Path::new("."));
    std::fs::File::open(parent)
        .and_then(|d| d.sync_all())
        .map_err(io("syncing", parent))
}

/// Creates `dir` (mode 0700) if it is missing and, when the app runs as
/// another user, gives it to that user: the app may write its data, other
/// users may not read it.
pub fn ensure(dir: &Path, owner: Option<(u32, u32)>) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    if let Some((uid, gid)) = owner {
        std::os::unix::fs::chown(dir, Some(uid), Some(gid))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use testkit::files::contents;

    #[test]
    fn a_plain_name_is_its_own_directory_and_any_other_is_hashed() {
        let root = Path::new("/data");
        assert_eq!(
            dir_for(root, "shop-web_2.x"),
            root.join("app-data/shop-web_2.x")
        );
        for odd in [
            "../etc",
            "a/b",
            ".hidden",
            "-rf",
            "",
            "naïve",
            &"n".repeat(65),
        ] {
            let dir = dir_for(root, odd);
            assert_eq!(
                dir.parent(),
                Some(root.join("app-data").as_path()),
                "{odd:?}"
            );
            let leaf = dir
                .file_name()
                .expect("leaf")
                .to_string_lossy()
                .into_owned();
            assert!(
                leaf.starts_with("app-") && leaf.len() == 20,
                "{odd:?}: {leaf}"
            );
        }
        assert_ne!(dir_name("a/b"), dir_name("a/c"));
    }

    #[test]
    fn the_directory_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let root = tempfile::tempdir().expect("temp");
        let dir = dir_for(root.path(), "shop");
        ensure(&dir, None).expect("made");
        ensure(&dir, None).expect("kept");
        let mode = std::fs::metadata(&dir).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
    }

    fn data_with_files(root: &Path) -> PathBuf {
        let dir = dir_for(root, "shop");
        ensure(&dir, None).expect("made");
        std::fs::write(dir.join("db.txt"), b"schema 1\n").expect("write");
        std::fs::create_dir(dir.join("nested")).expect("mkdir");
        std::fs::write(dir.join("nested/blob"), vec![7u8; 4096]).expect("write");
        dir
    }

    /// A snapshot, then changes, then the restore: the directory is byte
    /// for byte what it was, and the snapshot is gone.
    #[test]
    fn a_restore_puts_the_data_back_byte_for_byte() {
        let root = tempfile::tempdir().expect("temp");
        let dir = data_with_files(root.path());
        let before = contents(&dir);
        let snap = snapshot_for(&dir);
        assert_eq!(snap.parent(), dir.parent());
        let copied = snapshot(&dir, &snap, DATA_SNAPSHOT_BYTES_MAX).expect("snapshot");
        assert_eq!(copied, 9 + 4096);
        std::fs::write(dir.join("db.txt"), b"schema 2\n").expect("write");
        std::fs::remove_file(dir.join("nested/blob")).expect("rm");
        std::fs::write(dir.join("new"), b"x").expect("write");
        assert!(restore(&dir, &snap).expect("restore"));
        assert_eq!(contents(&dir), before);
        assert!(!snap.exists());
        // A crash between the two renames left no directory and the whole
        // snapshot: the next restore finishes it.
        snapshot(&dir, &snap, DATA_SNAPSHOT_BYTES_MAX).expect("snapshot");
        std::fs::remove_dir_all(&dir).expect("gone");
        assert!(restore(&dir, &snap).expect("restore"));
        assert_eq!(contents(&dir), before);
        // Nothing more to restore: the directory is left alone.
        assert!(!restore(&dir, &snap).expect("no snapshot"));
        assert_eq!(contents(&dir), before);
    }

    /// Over the bound, the snapshot is refused and nothing is written.
    #[test]
    fn a_data_directory_over_the_bound_is_refused_untouched() {
        let root = tempfile::tempdir().expect("temp");
        let dir = data_with_files(root.path());
        let before = contents(&dir);
        let snap = snapshot_for(&dir);
        let err = snapshot(&dir, &snap, 4096).expect_err("over");
        assert!(
            matches!(
                err,
                SnapshotError::OverBound {
                    bytes_max: 4096,
                    ..
                }
            ),
            "{err}"
        );
        assert!(err.to_string().contains("snapshot bound"), "{err}");
        assert!(!snap.exists());
        let mut partial = snap.as_os_str().to_owned();
        partial.push(SNAPSHOT_TEMP_SUFFIX);
        assert!(!PathBuf::from(partial).exists());
        assert_eq!(contents(&dir), before);
        // At the bound it is taken.
        assert!(snapshot(&dir, &snap, 9 + 4096).is_ok());
    }
}
