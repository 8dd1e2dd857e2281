//! [`LogStorage`] on sled 0.34.7.
//!
//! Layout of a log directory (a sled database):
//! - tree `entries`: key = sequence as big-endian u64 (so key order is log
//!   order), value = encoded [`Envelope`](super::Envelope);
//! - tree `meta`: the key `format` = `fleetweft-log-v1`, written when the
//!   log is created (its absence means "not a Fleetweft log"), and, once
//!   entries were archived, `live_start` = the encoded [`LiveStart`] (the
//!   first live sequence and the hash of the entry before it). A log with
//!   `live_start` is refused by builds older than archiving (foreign data):
//!   no downgrade;
//! - tree `snapshots` (only once a snapshot was put): key = the sequence
//!   the snapshot covers (entries `0..covers`) as big-endian u64, value =
//!   an encoded snapshot record (see `snapshot.rs`); a key that is not 8
//!   bytes is foreign. A log with this tree is refused by builds older
//!   than snapshots (they report it as foreign data): no downgrade;
//! - nothing else: data in any other tree is reported as foreign;
//! - beside sled's files, `fleetweft-durable`: the durable watermark (see
//!   `watermark.rs`), which reveals entries that sled's recovery dropped.
//!
//! Durability: sled 0.34.7's `flush` makes its log writes stable with
//! `sync_file_range(2)` on Linux, which persists neither file metadata (the
//! file grows as sled appends) nor the drive's volatile write cache, and it
//! never fsyncs its `blobs/` files or its `conf` file. [`SledStorage::flush`]
//! therefore follows `Db::flush` with an `fdatasync` of the database file (and
//! of any blob file), and log creation syncs every file and directory it made.

use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use super::sled_dir::{
    create, dir_has_entries, has_sled_files, io_error, sled_config, sled_error,
    wait_for_lock_release, ENTRIES_TREE, META_FORMAT_KEY, META_FORMAT_VALUE, META_TREE,
    SLED_BLOBS_DIR, SLED_DB_FILE,
};
use super::storage::{LiveStart, LogStorage, RawEntry, StorageError};
use super::watermark::{Watermark, WATERMARK_FILE};

/// The live start's key in [`META_TREE`], written by the first archiving.
pub(super) const META_LIVE_START_KEY: &[u8] = b"live_start";
/// Most keys one step of [`LogStorage::delete_below`] removes in one sled
/// batch: bounds the batch's memory (keys only) and the work between two
/// checks of progress.
const DELETE_BATCH_KEYS_MAX: usize = 16_384;
/// Tree holding snapshot records, created by the first snapshot put.
pub(super) const SNAPSHOTS_TREE: &[u8] = b"snapshots";
/// Name sled gives its default tree; the log keeps it empty.
const SLED_DEFAULT_TREE: &[u8] = b"__sled__default";

/// A sled database holding one Fleetweft log.
pub struct SledStorage {
    path: PathBuf,
    db: sled::Db,
    entries: sled::Tree,
    /// The marker and the live start.
    meta: sled::Tree,
    /// Our own handle on sled's database file, for the `fdatasync` that
    /// sled's `flush` does not do (see the module docs).
    db_file: File,
    /// End of everything appended so far; a flush covers the value read
    /// before it starts.
    appended_end: AtomicU64,
    /// Lower bound on durable entries, advanced after each flush.
    watermark: Mutex<Watermark>,
}

impl SledStorage {
    /// Opens the log in `dir`, creating it if `dir` is missing or empty.
    ///
    /// A non-empty directory without a sled database, or a sled database
    /// without the log marker, is refused as [`StorageError::NotALog`].
    pub fn create_or_open(dir: &Path) -> Result<Self, StorageError> {
        if !has_sled_files(dir) {
            if dir_has_entries(dir).map_err(|err| io_error(dir, "inspecting the directory", err))? {
                return Err(StorageError::NotALog {
                    path: dir.to_path_buf(),
                    reason: "the directory is not empty and holds no sled database".into(),
                });
            }
            create(dir)?;
        }
        Self::open_existing(dir)
    }

    /// Opens an existing log without ever creating one.
    ///
    /// sled runs its own crash recovery on open (it discards a torn tail of
    /// its segment log, and may write a snapshot); the log itself never
    /// rewrites entries. To read a log without changing its files, use
    /// [`verify`](super::verify), which opens a private copy.
    pub fn open_existing(dir: &Path) -> Result<Self, StorageError> {
        // Check before calling sled, which would create a fresh database.
        if !has_sled_files(dir) {
            return Err(StorageError::NotALog {
                path: dir.to_path_buf(),
                reason: "no sled database (missing `conf` or `db` file)".into(),
            });
        }
        wait_for_lock_release(&dir.join(SLED_DB_FILE))
            .map_err(|err| io_error(dir, "waiting for the database lock", err))?;
        let db = sled_config(dir)
            .open()
            .map_err(|err| sled_error(dir, "opening the database", err))?;
        // Looking before `open_tree`, which would create the tree.
        if !db.tree_names().iter().any(|name| name == META_TREE) {
            return Err(StorageError::NotALog {
                path: dir.to_path_buf(),
                reason: "the sled database has no `meta` tree".into(),
            });
        }
        let meta = db
            .open_tree(META_TREE)
            .map_err(|err| sled_error(dir, "opening the meta tree", err))?;
        match meta
            .get(META_FORMAT_KEY)
            .map_err(|err| sled_error(dir, "reading the log marker", err))?
        {
            Some(value) if value == META_FORMAT_VALUE => {}
            Some(value) => {
                return Err(StorageError::NotALog {
                    path: dir.to_path_buf(),
                    reason: format!(
                        "unknown log marker {:?} (expected {:?})",
                        String::from_utf8_lossy(&value),
                        String::from_utf8_lossy(META_FORMAT_VALUE)
                    ),
                })
            }
            None => {
                return Err(StorageError::NotALog {
                    path: dir.to_path_buf(),
                    reason: "the meta tree has no `format` marker".into(),
                })
            }
        }
        let entries = db
            .open_tree(ENTRIES_TREE)
            .map_err(|err| sled_error(dir, "opening the entries tree", err))?;
        let db_file = File::open(dir.join(SLED_DB_FILE))
            .map_err(|err| io_error(dir, "opening the database file for fsync", err))?;
        let watermark = Watermark::open(dir)
            .map_err(|err| io_error(dir, "reading the durable watermark", err))?
            .ok_or_else(|| StorageError::Corruption {
                path: dir.to_path_buf(),
                detail: format!(
                    "the durable watermark file `{WATERMARK_FILE}` is missing or damaged"
                ),
            })?;
        let storage = SledStorage {
            path: dir.to_path_buf(),
            db,
            entries,
            meta,
            db_file,
            appended_end: AtomicU64::new(0),
            watermark: Mutex::new(watermark),
        };
        // What sled recovered is covered by the next flush; a malformed last
        // key is left for verification to report.
        if let Ok(Some(last)) = storage.last_sequence() {
            storage
                .appended_end
                .store(last.saturating_add(1), Ordering::Release);
        }
        Ok(storage)
    }

    /// The durable watermark: every sequence below it was durable at some
    /// point, so a log with fewer entries has lost acknowledged data.
    pub fn durable_watermark(&self) -> u64 {
        // A poisoned lock still holds the last value written.
        match self.watermark.lock() {
            Ok(mark) => mark.durable_end(),
            Err(poisoned) => poisoned.into_inner().durable_end(),
        }
    }

    /// The log directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The first piece of data outside the log layout, if any: a key in
    /// sled's default tree, a tree other than `meta`, `entries` and
    /// `snapshots`, a key in `meta` other than the marker, or a key in
    /// `snapshots` that is not an 8-byte sequence.
    ///
    /// Reads every key of `snapshots` (sled loads their values too): the
    /// cost grows with the snapshots kept, not with the log's length.
    pub fn find_foreign_data(&self) -> Result<Option<ForeignData>, StorageError> {
        for name in self.db.tree_names() {
            let name: &[u8] = &name;
            if name == ENTRIES_TREE {
                continue;
            }
            if name == SNAPSHOTS_TREE {
                if let Some(key) = self.foreign_snapshot_key()? {
                    return Ok(Some(ForeignData {
                        tree: name.to_vec(),
                        key: Some(key),
                    }));
                }
                continue;
            }
            let tree = self
                .db
                .open_tree(name)
                .map_err(|err| sled_error(&self.path, "opening a tree", err))?;
            let allowed: &[&[u8]] = match name {
                META_TREE => &[META_FORMAT_KEY, META_LIVE_START_KEY],
                SLED_DEFAULT_TREE => &[],
                // A tree the log never creates is foreign even when empty.
                _ => {
                    let first = tree
                        .first()
                        .map_err(|err| sled_error(&self.path, "scanning a tree", err))?;
                    return Ok(Some(ForeignData {
                        tree: name.to_vec(),
                        key: first.map(|(key, _)| key.to_vec()),
                    }));
                }
            };
            for item in tree.iter() {
                let (key, _) =
                    item.map_err(|err| sled_error(&self.path, "scanning a tree", err))?;
                if !allowed.contains(&&*key) {
                    return Ok(Some(ForeignData {
                        tree: name.to_vec(),
                        key: Some(key.to_vec()),
                    }));
                }
            }
        }
        Ok(None)
    }

    /// The first key of the snapshots tree that is not an 8-byte sequence.
    fn foreign_snapshot_key(&self) -> Result<Option<Vec<u8>>, StorageError> {
        let Some(tree) = self.snapshots_tree(false)? else {
            return Ok(None);
        };
        for item in tree.iter() {
            let (key, _) =
                item.map_err(|err| sled_error(&self.path, "scanning the snapshots", err))?;
            if key.len() != 8 {
                return Ok(Some(key.to_vec()));
            }
        }
        Ok(None)
    }

    /// The snapshots tree; `None` when it does not exist and `create` is
    /// false (reads never create it, so a log that never had a snapshot
    /// keeps the layout older builds accept).
    fn snapshots_tree(&self, create: bool) -> Result<Option<sled::Tree>, StorageError> {
        if !create && !self.db.tree_names().iter().any(|n| n == SNAPSHOTS_TREE) {
            return Ok(None);
        }
        self.db
            .open_tree(SNAPSHOTS_TREE)
            .map(Some)
            .map_err(|err| sled_error(&self.path, "opening the snapshots tree", err))
    }

    /// fsyncs every file in `blobs/`, and the directory if it has any.
    ///
    /// Entry bounds keep sled from writing blobs for this log, so normally
    /// this is one empty directory read; it exists so durability does not
    /// rest on that arithmetic alone.
    fn sync_blobs(&self) -> io::Result<()> {
        let blobs = self.path.join(SLED_BLOBS_DIR);
        let mut found = false;
        for entry in fs::read_dir(&blobs)? {
            let entry = entry?;
            match File::open(entry.path()).and_then(|file| file.sync_data()) {
                Ok(()) => found = true,
                // sled may garbage-collect a blob between listing and opening.
                Err(err) if err.kind() == io::ErrorKind::NotFound => {}
                Err(err) => return Err(err),
            }
        }
        if found {
            File::open(&blobs)?.sync_all()?;
        }
        Ok(())
    }
}

impl LogStorage for SledStorage {
    fn append_batch(&self, entries: &[(u64, Vec<u8>)]) -> Result<(), StorageError> {
        // A single insert is atomic by itself. `apply_batch` is only used
        // when atomicity across entries is needed, because in sled 0.34.7 it
        // rolls the IO buffer (`pin_log`): every batch pays its own write and
        // sync_file_range, which would defeat group commit for the common
        // one-event append.
        let result = match entries {
            [(sequence, value)] => self
                .entries
                .insert(sequence.to_be_bytes(), value.as_slice())
                .map(|_| ()),
            _ => {
                let mut batch = sled::Batch::default();
                for (sequence, value) in entries {
                    batch.insert(&sequence.to_be_bytes(), value.as_slice());
                }
                self.entries.apply_batch(batch)
            }
        };
        result.map_err(|err| sled_error(&self.path, "inserting entries", err))?;
        if let Some((last, _)) = entries.iter().max_by_key(|(sequence, _)| *sequence) {
            self.appended_end
                .fetch_max(last.saturating_add(1), Ordering::Release);
        }
        Ok(())
    }

    fn flush(&self) -> Result<(), StorageError> {
        // Read before flushing: every append counted here has returned, so
        // the flush below covers it.
        let covered = self.appended_end.load(Ordering::Acquire);
        self.db
            .flush()
            .map_err(|err| sled_error(&self.path, "flushing", err))?;
        // sled's flush used sync_file_range, see the module docs. fdatasync on
        // any handle covers every dirty page and the size of the inode.
        self.db_file
            .sync_data()
            .map_err(|err| io_error(&self.path, "syncing the database file", err))?;
        self.sync_blobs()
            .map_err(|err| io_error(&self.path, "syncing blob files", err))?;
        self.watermark
            .lock()
            .map_err(|_| {
                io_error(
                    &self.path,
                    "recording the durable watermark",
                    io::Error::other("lock poisoned"),
                )
            })?
            .advance(covered)
            .map_err(|err| io_error(&self.path, "recording the durable watermark", err))
    }

    fn read_from(
        &self,
        from: u64,
    ) -> Box<dyn Iterator<Item = Result<RawEntry, StorageError>> + '_> {
        // A range starting at [0; 8] would skip foreign keys such as [0],
        // which sort before it; a full scan from 0 sees everything.
        let iter = if from == 0 {
            self.entries.iter()
        } else {
            self.entries.range(from.to_be_bytes()..)
        };
        Box::new(iter.map(move |item| {
            item.map(|(key, value)| RawEntry {
                key: key.to_vec(),
                value: value.to_vec(),
            })
            .map_err(|err| sled_error(&self.path, "reading entries", err))
        }))
    }

    /// One insert (atomic in sled), then [`flush`](LogStorage::flush):
    /// `Ok` only once the record is durable. A record over sled's blob
    /// threshold (2 MiB) goes to a blob file, which `flush` fsyncs.
    fn put_snapshot(&self, covers: u64, record: &[u8]) -> Result<(), StorageError> {
        let tree = self.snapshots_tree(true)?.ok_or_else(|| {
            io_error(
                &self.path,
                "creating the snapshots tree",
                io::Error::other("missing"),
            )
        })?;
        tree.insert(covers.to_be_bytes(), record)
            .map_err(|err| sled_error(&self.path, "writing a snapshot", err))?;
        self.flush()
    }

    fn snapshot_sequences(&self) -> Result<Vec<u64>, StorageError> {
        let Some(tree) = self.snapshots_tree(false)? else {
            return Ok(Vec::new());
        };
        let mut sequences = Vec::new();
        // Keys only in spirit: sled 0.34.7 has no key-only scan, so each
        // value is paged in; the caller keeps few snapshots.
        for item in tree.iter().keys().rev() {
            let key = item.map_err(|err| sled_error(&self.path, "listing snapshots", err))?;
            // Foreign keys are `check_layout`'s to report; not a snapshot.
            if let Ok(bytes) = <[u8; 8]>::try_from(key.as_ref()) {
                sequences.push(u64::from_be_bytes(bytes));
            }
        }
        Ok(sequences)
    }

    fn read_snapshot(&self, covers: u64) -> Result<Option<Vec<u8>>, StorageError> {
        let Some(tree) = self.snapshots_tree(false)? else {
            return Ok(None);
        };
        tree.get(covers.to_be_bytes())
            .map(|value| value.map(|v| v.to_vec()))
            .map_err(|err| sled_error(&self.path, "reading a snapshot", err))
    }

    /// One remove, then a flush: `Ok` once the removal is durable.
    fn delete_snapshot(&self, covers: u64) -> Result<(), StorageError> {
        let Some(tree) = self.snapshots_tree(false)? else {
            return Ok(());
        };
        tree.remove(covers.to_be_bytes())
            .map_err(|err| sled_error(&self.path, "deleting a snapshot", err))?;
        self.flush()
    }

    /// The `live_start` key of the meta tree; genesis without one.
    fn live_start(&self) -> Result<LiveStart, StorageError> {
        let stored = self
            .meta
            .get(META_LIVE_START_KEY)
            .map_err(|err| sled_error(&self.path, "reading the live start", err))?;
        match stored {
            None => Ok(LiveStart::genesis()),
            Some(bytes) => {
                LiveStart::decode(&bytes).ok_or_else(|| StorageError::LiveStartDamaged {
                    target: self.path.display().to_string(),
                })
            }
        }
    }

    /// One insert (atomic in sled), then a flush: durable when `Ok`.
    fn set_live_start(&self, start: &LiveStart) -> Result<(), StorageError> {
        self.meta
            .insert(META_LIVE_START_KEY, &start.encode()[..])
            .map_err(|err| sled_error(&self.path, "writing the live start", err))?;
        self.flush()
    }

    /// Removes the 8-byte keys in `[0, end)` in batches of at most
    /// `DELETE_BATCH_KEYS_MAX`, then flushes once: a crash before the
    /// flush leaves some of them, which a second call removes. Other keys
    /// (foreign ones) are left for verification to report.
    fn delete_below(&self, end: u64) -> Result<u64, StorageError> {
        let mut deleted: u64 = 0;
        // Each step scans on from the key after the last one it removed:
        // rescanning from 0 would walk the emptied leaves again.
        let mut low: Vec<u8> = 0u64.to_be_bytes().to_vec();
        loop {
            let mut batch = sled::Batch::default();
            let mut keys = 0usize;
            let mut last = None;
            for item in self.entries.range(low.clone()..end.to_be_bytes().to_vec()) {
                let (key, _) =
                    item.map_err(|err| sled_error(&self.path, "listing archived entries", err))?;
                if key.len() == 8 {
                    batch.remove(key.clone());
                    keys += 1;
                }
                last = Some(key);
                if keys == DELETE_BATCH_KEYS_MAX {
                    break;
                }
            }
            let Some(last) = last else {
                break;
            };
            self.entries
                .apply_batch(batch)
                .map_err(|err| sled_error(&self.path, "deleting archived entries", err))?;
            deleted += keys as u64;
            low = last.to_vec();
            low.push(0);
        }
        self.flush()?;
        Ok(deleted)
    }

    /// sled's files on disk (`Db::size_on_disk`); sled has no quota.
    fn space(&self) -> Result<Option<super::storage::StorageSpace>, StorageError> {
        let bytes = self
            .db
            .size_on_disk()
            .map_err(|err| sled_error(&self.path, "measuring the database", err))?;
        Ok(Some(super::storage::StorageSpace {
            bytes,
            quota_bytes: None,
        }))
    }

    fn last_sequence(&self) -> Result<Option<u64>, StorageError> {
        let Some((key, _)) = self
            .entries
            .last()
            .map_err(|err| sled_error(&self.path, "reading the last entry", err))?
        else {
            return Ok(None);
        };
        let bytes: [u8; 8] = key
            .as_ref()
            .try_into()
            .map_err(|_| StorageError::MalformedKey {
                path: self.path.clone(),
                key: key.to_vec(),
            })?;
        Ok(Some(u64::from_be_bytes(bytes)))
    }
}

/// Data found outside the log layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForeignData {
    /// The sled tree it is in.
    pub tree: Vec<u8>,
    /// The first unexpected key, or `None` for an unexpected empty tree.
    pub key: Option<Vec<u8>>,
}
