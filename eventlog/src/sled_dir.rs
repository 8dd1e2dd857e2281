//! The log directory on disk, below sled: creating a log atomically,
//! recognising a sled database, and waiting for sled's file lock.

use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

use fs2::FileExt;

use super::storage::StorageError;
use super::watermark::Watermark;

/// Files sled keeps in a database directory.
/// Tree holding the entries.
pub(super) const ENTRIES_TREE: &[u8] = b"entries";
/// Tree holding the log marker.
pub(super) const META_TREE: &[u8] = b"meta";
/// The marker's key in [`META_TREE`].
pub(super) const META_FORMAT_KEY: &[u8] = b"format";
/// The marker's value: this is a Fleetweft log in layout version 1.
pub(super) const META_FORMAT_VALUE: &[u8] = b"fleetweft-log-v1";

/// sled's segment (and IO buffer) size. sled persists it in `conf` and refuses
/// to open a database with a different value, so it can never change for an
/// existing log. 8 MiB (default 512 KiB) puts sled's blob threshold, a quarter
/// segment, at 2 MiB: far above any leaf page of [`ENTRY_BYTES_MAX`]-bounded
/// entries, so entries stay in the main file.
///
/// [`ENTRY_BYTES_MAX`]: super::ENTRY_BYTES_MAX
const SEGMENT_BYTES: usize = 8 * 1024 * 1024;

/// sled's in-memory page cache bound (default 1 GiB). The log reads the tree
/// once at open and afterwards only appends, so a large cache buys nothing and
/// a controller on a small edge host should not reserve 1 GiB for it.
const CACHE_BYTES: u64 = 64 * 1024 * 1024;

/// The exact sled configuration of a log in `dir`.
///
/// Public so tools and tests can open the raw database (sled refuses a
/// different segment size). Every option is set explicitly rather than
/// inheriting sled's defaults.
pub fn sled_config(dir: &Path) -> sled::Config {
    sled::Config::new()
        .path(dir)
        // HighThroughput: the log is append-only and never overwrites or
        // deletes, so there is little fragmentation for LowSpace's extra
        // rewriting to reclaim, and append latency is what acknowledgements
        // wait on. Note: sled 0.34.7 stores this option but reads it nowhere
        // (checked in its source), so today this records intent only.
        .mode(sled::Mode::HighThroughput)
        .cache_capacity(CACHE_BYTES)
        // No background flusher: durability points are exactly the log's
        // explicit flushes, each of which precedes an acknowledgement. A
        // timer flush would only add fsyncs nobody waits for.
        .flush_every_ms(None)
        .segment_size(SEGMENT_BYTES)
        // Entries are small and already dense; compression would add CPU on
        // the commit path (and needs a sled feature we do not enable).
        .use_compression(false)
        .temporary(false)
        .create_new(false)
}

const SLED_CONF_FILE: &str = "conf";
pub(super) const SLED_DB_FILE: &str = "db";
pub(super) const SLED_BLOBS_DIR: &str = "blobs";

/// How long opening waits for a previous holder's file lock to go away.
const LOCK_RELEASE_WAIT: Duration = Duration::from_secs(5);

/// Creates a new, empty log at `dir` (missing or an empty directory).
///
/// The database is built in a sibling staging directory and renamed into
/// place only once the marker is durable, so a crash mid-creation leaves
/// either nothing or a complete empty log, never a marker-less database that
/// would later be refused as "not a Fleetweft log".
pub(super) fn create(dir: &Path) -> Result<(), StorageError> {
    let staging = staging_path(dir);
    // Only this function creates the staging name, so a leftover is the
    // remains of a crashed creation and holds nothing of value.
    if staging.exists() {
        fs::remove_dir_all(&staging)
            .map_err(|err| io_error(dir, "removing a stale staging directory", err))?;
    }
    {
        let db = sled_config(&staging)
            .open()
            .map_err(|err| sled_error(dir, "creating the database", err))?;
        db.open_tree(ENTRIES_TREE)
            .map_err(|err| sled_error(dir, "creating the entries tree", err))?;
        db.open_tree(META_TREE)
            .and_then(|meta| meta.insert(META_FORMAT_KEY, META_FORMAT_VALUE))
            .map_err(|err| sled_error(dir, "writing the log marker", err))?;
        db.flush()
            .map_err(|err| sled_error(dir, "flushing the new database", err))?;
    }
    Watermark::create(&staging)
        .map_err(|err| io_error(dir, "creating the durable watermark", err))?;
    // sled syncs neither `conf` nor directory entries; do it before the
    // rename publishes the log.
    for file in [SLED_CONF_FILE, SLED_DB_FILE] {
        File::open(staging.join(file))
            .and_then(|file| file.sync_all())
            .map_err(|err| io_error(dir, "syncing the new database files", err))?;
    }
    for directory in [staging.join(SLED_BLOBS_DIR), staging.clone()] {
        sync_dir(&directory).map_err(|err| io_error(dir, "syncing the new directories", err))?;
    }
    // rename(2) replaces `dir` if it is an empty directory.
    fs::rename(&staging, dir).map_err(|err| io_error(dir, "moving the new log into place", err))?;
    sync_dir(&parent_of(dir)).map_err(|err| io_error(dir, "syncing the parent directory", err))
}

fn staging_path(dir: &Path) -> PathBuf {
    let mut name = dir.file_name().unwrap_or_default().to_os_string();
    name.push(".fleetweft-creating");
    parent_of(dir).join(name)
}

fn parent_of(dir: &Path) -> PathBuf {
    match dir.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Waits (bounded) until nobody holds sled's exclusive lock on `db_file`.
///
/// sled's background writer tasks keep their own handles to the database
/// file, and with them its `flock`, until they finish, which can be a moment
/// after the last `Db` handle was dropped (e.g. right after `close`). Without
/// this wait, reopening a log just closed in the same process can fail with
/// "could not acquire lock". A lock still held after the wait belongs to a
/// live user; sled's open then reports it.
pub(super) fn wait_for_lock_release(db_file: &Path) -> io::Result<()> {
    let file = File::open(db_file)?;
    let deadline = Instant::now() + LOCK_RELEASE_WAIT;
    loop {
        match FileExt::try_lock_exclusive(&file) {
            Ok(()) => return FileExt::unlock(&file),
            Err(err)
                if err.kind() == fs2::lock_contended_error().kind()
                    && Instant::now() < deadline =>
            {
                thread::sleep(Duration::from_millis(5));
            }
            // Timed out or cannot lock at all: let sled's open report it.
            Err(_) => return Ok(()),
        }
    }
}

/// What [`lock_shared_for_reading`] found.
pub(super) enum SharedLock {
    /// Nobody else holds the lock; ours (shared) lasts as long as the file.
    Held(File),
    /// Another process (or handle) holds sled's exclusive lock.
    InUse,
    /// The file system does not support `flock` (nor can sled lock it).
    Unsupported,
}

/// Takes a shared lock on sled's `db_file`, opened read-only, waiting as
/// [`wait_for_lock_release`] does for a holder that is just going away.
///
/// While a shared lock is held, sled's exclusive `try_lock` fails, so no
/// controller or agent can open the database.
pub(super) fn lock_shared_for_reading(db_file: &Path) -> io::Result<SharedLock> {
    let file = File::open(db_file)?;
    let deadline = Instant::now() + LOCK_RELEASE_WAIT;
    loop {
        match FileExt::try_lock_shared(&file) {
            Ok(()) => return Ok(SharedLock::Held(file)),
            Err(err) if err.kind() == fs2::lock_contended_error().kind() => {
                if Instant::now() >= deadline {
                    return Ok(SharedLock::InUse);
                }
                thread::sleep(Duration::from_millis(5));
            }
            // No flock on this file system (ENOLCK, EOPNOTSUPP): sled's own
            // lock fails the same way, so no database can be open on it.
            Err(_) => return Ok(SharedLock::Unsupported),
        }
    }
}

/// Whether `dir` holds a sled database (sled's `conf` and `db` files): a
/// log, or at least something to verify as one. Looks at metadata only.
pub fn is_log_dir(dir: &Path) -> bool {
    has_sled_files(dir)
}

pub(super) fn has_sled_files(dir: &Path) -> bool {
    dir.join(SLED_CONF_FILE).is_file() && dir.join(SLED_DB_FILE).is_file()
}

/// Whether `dir` exists and has any entry; a missing directory has none.
pub(super) fn dir_has_entries(dir: &Path) -> io::Result<bool> {
    match fs::read_dir(dir) {
        Ok(mut entries) => Ok(entries.next().is_some()),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(err) => Err(err),
    }
}

pub(super) fn io_error(path: &Path, action: &'static str, err: io::Error) -> StorageError {
    StorageError::Io {
        path: path.to_path_buf(),
        action,
        source: Box::new(err),
    }
}

/// Maps sled errors, keeping corruption distinct so it is never mistaken
/// for a transient failure.
pub(super) fn sled_error(path: &Path, action: &'static str, err: sled::Error) -> StorageError {
    match err {
        sled::Error::Corruption { at, .. } => StorageError::Corruption {
            path: path.to_path_buf(),
            detail: match at {
                Some(at) => format!("sled reported corruption at {at} while {action}"),
                None => format!("sled reported corruption while {action}"),
            },
        },
        other => StorageError::Io {
            path: path.to_path_buf(),
            action,
            source: Box::new(other),
        },
    }
}
