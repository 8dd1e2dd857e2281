//! `fleetweft log copy`: moves a controller log between backends, sled →
//! etcd (to adopt HA) and etcd → sled (a backup `log verify` can check
//! offline), verifying every entry on the way.
//!
//! The copy is byte for byte: the source is verified in full first (every
//! envelope, the hash chain, every event decoded and the history replayed
//! through the rules, as `log verify` does), then its raw encoded envelopes
//! are written unchanged, in order, to an EMPTY destination (a non-empty
//! one is refused before anything is written), and finally the destination
//! is verified the same way and must have the same number of entries and
//! the same head hash. Writing to etcd first wins the log's leadership
//! (refusing when a controller leads the prefix), so no controller can
//! append meanwhile; the writes are fenced transactions within the
//! storage's batch limits. A copy that fails half-way leaves a prefix of
//! the log in the destination (each batch whole): delete it and retry.
//!
//! **A log whose head was archived** (issue #26) is copied as what it is:
//! its live start (the first live sequence and the hash it continues),
//! its entries from there, and its snapshots (a start needs one covering
//! the live start), byte for byte. The source's live chain is verified
//! and every event decoded; the rules need the whole history, which is
//! in the archive: check them with `fleetweft log verify --archive DIR`
//! on either copy (the archive directory itself is copied as files).

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::inspect::{verify_controller_log, verify_controller_log_in, InspectError, LogSummary};
use eventlog::{
    verify_storage_with, BatchLimits, EtcdClient, EtcdConfig, EtcdStorage, EtcdTls, Leadership,
    LogStorage, RawEntry, SledStorage, StorageError,
};

/// Where a log lives, as `fleetweft log copy --from/--to` names it:
/// `etcd://HOST:PORT[,HOST:PORT...]/PREFIX` or a sled log directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogLocation {
    /// A sled log directory.
    Sled(PathBuf),
    /// A log in etcd.
    Etcd {
        /// Client endpoints.
        endpoints: Vec<String>,
        /// Key prefix, starting with `/`.
        prefix: String,
        /// TLS to the members (`--ca-file` etc.), `None` for plain http.
        tls: Option<EtcdTls>,
    },
}

impl LogLocation {
    /// Parses `etcd://E1,E2/prefix` or a directory path.
    pub fn parse(text: &str) -> Result<Self, String> {
        let Some(rest) = text.strip_prefix("etcd://") else {
            return Ok(LogLocation::Sled(PathBuf::from(text)));
        };
        let Some(slash) = rest.find('/') else {
            return Err(format!(
                "{text:?} names no key prefix: use etcd://HOST:PORT[,HOST:PORT...]/PREFIX"
            ));
        };
        let (endpoints, prefix) = rest.split_at(slash);
        let endpoints: Vec<String> = endpoints.split(',').map(str::to_string).collect();
        if endpoints.iter().any(|e| e.is_empty()) || prefix.len() < 2 {
            return Err(format!(
                "{text:?}: use etcd://HOST:PORT[,HOST:PORT...]/PREFIX"
            ));
        }
        Ok(LogLocation::Etcd {
            endpoints,
            prefix: prefix.to_string(),
            tls: None,
        })
    }

    /// The same location reached with `tls` when it is in etcd; a sled
    /// directory is returned unchanged.
    #[must_use]
    pub fn with_tls(self, tls: Option<EtcdTls>) -> Self {
        match self {
            LogLocation::Etcd {
                endpoints, prefix, ..
            } => LogLocation::Etcd {
                endpoints,
                prefix,
                tls,
            },
            sled => sled,
        }
    }

    /// The etcd backend's configuration, `None` for a sled directory.
    pub fn etcd_config(&self) -> Option<EtcdConfig> {
        match self {
            LogLocation::Sled(_) => None,
            LogLocation::Etcd {
                endpoints,
                prefix,
                tls,
            } => {
                let mut config = EtcdConfig::new(endpoints.clone(), prefix.clone());
                config.tls = tls.clone();
                Some(config)
            }
        }
    }

    fn name(&self) -> String {
        match self {
            LogLocation::Sled(dir) => dir.display().to_string(),
            LogLocation::Etcd {
                endpoints, prefix, ..
            } => format!("etcd://{}{prefix}", endpoints.join(",")),
        }
    }
}

/// Why a copy failed.
#[derive(Debug, thiserror::Error)]
pub enum CopyError {
    /// The source did not verify: nothing was written.
    #[error("the source log {name} does not verify, nothing was copied: {source}")]
    Source {
        /// The source's name.
        name: String,
        /// What verification found.
        #[source]
        source: InspectError,
    },
    /// The destination already holds something: nothing was written.
    #[error("refusing to copy into {name}: it is not empty ({what})")]
    DestinationNotEmpty {
        /// The destination's name.
        name: String,
        /// What is there.
        what: String,
    },
    /// Reading the source or writing the destination failed.
    #[error("copying into {name} failed: {source} (the destination may hold a prefix of the log: delete it and retry)")]
    Storage {
        /// The destination's name.
        name: String,
        /// The storage failure.
        #[source]
        source: StorageError,
    },
    /// The written copy does not verify, or differs from the source.
    #[error("the copy in {name} does not match its source: {reason}")]
    Mismatch {
        /// The destination's name.
        name: String,
        /// What differs.
        reason: String,
    },
}

/// The outcome of a successful copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyReport {
    /// Entries in the log (archived ones included), the same in both.
    pub entries: u64,
    /// Hex of the head hash, the same in both.
    pub head_hash: String,
    /// The first live sequence (0 unless the head was archived).
    pub first_live: u64,
    /// Snapshots copied (only for a log whose head was archived).
    pub snapshots: usize,
}

/// Copies the controller log at `from` into the empty `to`, verifying the
/// source before and the destination after (see the module docs).
/// `candidate` names this tool in the etcd leader key while it writes.
pub fn copy_log(
    from: &LogLocation,
    to: &LogLocation,
    candidate: &str,
) -> Result<CopyReport, CopyError> {
    let start = live_start(from).map_err(|source| CopyError::Source {
        name: from.name(),
        source: InspectError::Uninspectable(eventlog::VerifyError::Storage(source)),
    })?;
    if start.is_archived() {
        return copy_archived(from, to, candidate);
    }
    let source_summary = verify_location(from).map_err(|source| CopyError::Source {
        name: from.name(),
        source,
    })?;
    let storage_error = |source| CopyError::Storage {
        name: to.name(),
        source,
    };
    let entries = read_all(from).map_err(storage_error)?;
    write_all(to, &entries, candidate)?;
    let copied = verify_location(to).map_err(|err| CopyError::Mismatch {
        name: to.name(),
        reason: err.to_string(),
    })?;
    if copied.entries != source_summary.entries || copied.head_hash != source_summary.head_hash {
        return Err(CopyError::Mismatch {
            name: to.name(),
            reason: format!(
                "{} entries with head {} where the source has {} with head {}",
                copied.entries, copied.head_hash, source_summary.entries, source_summary.head_hash
            ),
        });
    }
    Ok(CopyReport {
        entries: copied.entries,
        head_hash: copied.head_hash,
        first_live: 0,
        snapshots: 0,
    })
}

/// Opens `location` for reading (sled: the log directory, which must not
/// be in use; etcd: read-only).
fn open_source(location: &LogLocation) -> Result<Box<dyn LogStorage>, StorageError> {
    match location {
        LogLocation::Sled(dir) => Ok(Box::new(SledStorage::open_existing(dir)?)),
        LogLocation::Etcd { .. } => {
            let config = location
                .etcd_config()
                .ok_or_else(|| StorageError::EtcdConfig("internal: no etcd config".into()))?;
            Ok(Box::new(open_etcd_read_only(&config)?))
        }
    }
}

/// Where the log at `location` starts (genesis unless archived). A sled
/// directory that is not a log yet reads as genesis: `verify_location`
/// then names what it is.
fn live_start(location: &LogLocation) -> Result<eventlog::LiveStart, StorageError> {
    if let LogLocation::Sled(dir) = location {
        if !eventlog::is_log_dir(dir) {
            return Ok(eventlog::LiveStart::genesis());
        }
    }
    open_source(location)?.live_start()
}

/// The live chain of `storage` verified, every event decoded.
fn verify_live(storage: &dyn LogStorage) -> Result<eventlog::VerifyReport, InspectError> {
    verify_storage_with(storage, |sequence, payload| {
        eventlog::decode_payload::<model::controller::Event>(payload)
            .map(|_| ())
            .map_err(|err| format!("entry {sequence}: undecodable controller event: {err}"))
    })
    .map_err(|err| InspectError::from_verify(err, crate::inspect::LogKind::Controller))
}

/// Copies a log whose head was archived: live start, live entries and
/// snapshots (module docs).
fn copy_archived(
    from: &LogLocation,
    to: &LogLocation,
    candidate: &str,
) -> Result<CopyReport, CopyError> {
    let source_error = |source| CopyError::Source {
        name: from.name(),
        source,
    };
    let storage_error = |source| CopyError::Storage {
        name: to.name(),
        source,
    };
    let (start, entries, snapshots, source_report) = {
        let source = open_source(from)
            .map_err(|err| source_error(InspectError::Uninspectable(err.into())))?;
        let report = verify_live(source.as_ref()).map_err(source_error)?;
        let start = source.live_start().map_err(storage_error)?;
        let entries: Vec<RawEntry> = source
            .read_from(start.sequence)
            .collect::<Result<_, _>>()
            .map_err(storage_error)?;
        let mut snapshots = Vec::new();
        for covers in source.snapshot_sequences().map_err(storage_error)? {
            if let Some(record) = source.read_snapshot(covers).map_err(storage_error)? {
                snapshots.push((covers, record));
            }
        }
        if !snapshots
            .iter()
            .any(|(covers, _)| *covers >= start.sequence)
        {
            return Err(source_error(InspectError::Damaged(
                eventlog::VerifyError::NeedsArchive {
                    first_live: start.sequence,
                },
            )));
        }
        (start, entries, snapshots, report)
    };
    let sequenced = sequenced(&entries);
    let write = |storage: &dyn LogStorage, limits: BatchLimits| -> Result<(), StorageError> {
        storage.set_live_start(&start)?;
        write_batches(storage, &sequenced, limits)?;
        for (covers, record) in &snapshots {
            storage.put_snapshot(*covers, record)?;
        }
        storage.flush()
    };
    match to {
        LogLocation::Sled(dir) => {
            refuse_non_empty_dir(dir, &to.name())?;
            let storage = SledStorage::create_or_open(dir).map_err(storage_error)?;
            write(&storage, BatchLimits::UNBOUNDED).map_err(storage_error)?;
        }
        LogLocation::Etcd { .. } => write_etcd(to, candidate, &write)?,
    }
    verify_copy(to, &source_report, snapshots.len())
}

/// [`copy_archived`]'s write to etcd: as the candidate's leadership, under
/// an empty prefix.
fn write_etcd(
    to: &LogLocation,
    candidate: &str,
    write: &dyn Fn(&dyn LogStorage, BatchLimits) -> Result<(), StorageError>,
) -> Result<(), CopyError> {
    let storage_error = |source| CopyError::Storage {
        name: to.name(),
        source,
    };
    let config = to.etcd_config().ok_or_else(|| {
        storage_error(StorageError::EtcdConfig("internal: no etcd config".into()))
    })?;
    let client = EtcdClient::connect(&config).map_err(storage_error)?;
    let leadership =
        Leadership::campaign(&client, &config, candidate, Duration::ZERO).map_err(storage_error)?;
    let storage = EtcdStorage::open(&client, &config, &leadership).map_err(storage_error)?;
    if storage.read_from(0).next().is_some() {
        return Err(CopyError::DestinationNotEmpty {
            name: to.name(),
            what: "entries exist under the prefix".into(),
        });
    }
    let limits = storage.batch_limits();
    write(&storage, limits).map_err(storage_error)?;
    leadership.resign().map_err(storage_error)?;
    Ok(())
}

/// Reads back the archived copy at `to` and checks it against the
/// source's verify report and snapshot count.
fn verify_copy(
    to: &LogLocation,
    source_report: &eventlog::VerifyReport,
    snapshots: usize,
) -> Result<CopyReport, CopyError> {
    let mismatch = |reason: String| CopyError::Mismatch {
        name: to.name(),
        reason,
    };
    let copy = open_source(to).map_err(|err| mismatch(err.to_string()))?;
    let copied = verify_live(copy.as_ref()).map_err(|err| mismatch(err.to_string()))?;
    let copied_snapshots = copy
        .snapshot_sequences()
        .map_err(|err| mismatch(err.to_string()))?;
    if copied.entries != source_report.entries
        || copied.head_hash != source_report.head_hash
        || copied.first_live != source_report.first_live
        || copied_snapshots.len() != snapshots
    {
        return Err(mismatch(format!(
            "{} entries from {} with head {} and {} snapshots where the source has {} from {} \
             with head {} and {}",
            copied.entries,
            copied.first_live,
            hex(&copied.head_hash),
            copied_snapshots.len(),
            source_report.entries,
            source_report.first_live,
            hex(&source_report.head_hash),
            snapshots
        )));
    }
    Ok(CopyReport {
        entries: copied.entries,
        head_hash: hex(&copied.head_hash),
        first_live: copied.first_live,
        snapshots,
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Verifies the controller log at `location` as `log verify` does.
pub fn verify_location(location: &LogLocation) -> Result<LogSummary, InspectError> {
    match location {
        LogLocation::Sled(dir) => verify_controller_log(dir),
        LogLocation::Etcd { .. } => {
            let config = location.etcd_config().ok_or_else(|| {
                InspectError::Uninspectable(eventlog::VerifyError::Storage(
                    StorageError::EtcdConfig("internal: no etcd config".into()),
                ))
            })?;
            let storage = open_etcd_read_only(&config)
                .map_err(|err| InspectError::Uninspectable(eventlog::VerifyError::Storage(err)))?;
            verify_controller_log_in(&storage, &location.name())
        }
    }
}

/// The state the controller log at `location` folds to, every event
/// checked against the rules (`fleetweft-check --from-log`). A sled
/// location may be the log directory or the controller's data directory
/// holding it. With `until`, the state right after that sequence. Reads
/// only.
pub fn state_at(
    location: &LogLocation,
    until: Option<u64>,
) -> Result<model::controller::ControllerState, InspectError> {
    match location {
        LogLocation::Sled(dir) => {
            let dir = crate::inspect::locate(dir, crate::inspect::LogKind::Controller)?;
            Ok(crate::inspect::controller_state(dir, until)?.0)
        }
        LogLocation::Etcd { .. } => {
            let config = location.etcd_config().ok_or_else(|| {
                InspectError::Uninspectable(eventlog::VerifyError::Storage(
                    StorageError::EtcdConfig("internal: no etcd config".into()),
                ))
            })?;
            let storage = open_etcd_read_only(&config)
                .map_err(|err| InspectError::Uninspectable(eventlog::VerifyError::Storage(err)))?;
            Ok(crate::inspect::controller_state_in(&storage, &location.name(), until)?.0)
        }
    }
}

/// Opens an etcd log read-only (for `log verify|show --etcd`).
pub fn open_etcd_read_only(config: &EtcdConfig) -> Result<EtcdStorage, StorageError> {
    let client = EtcdClient::connect(config)?;
    EtcdStorage::open_read_only(&client, config)
}

/// Every raw entry of the (already verified) log at `location`, in order.
fn read_all(location: &LogLocation) -> Result<Vec<RawEntry>, StorageError> {
    match location {
        LogLocation::Sled(dir) => {
            // verify() worked on a private copy; the log is not in use, so
            // reading it directly only runs sled's (idempotent) recovery.
            let storage = SledStorage::open_existing(dir)?;
            storage.read_from(0).collect()
        }
        LogLocation::Etcd { .. } => {
            let config = location
                .etcd_config()
                .ok_or_else(|| StorageError::EtcdConfig("internal: no etcd config".into()))?;
            open_etcd_read_only(&config)?.read_from(0).collect()
        }
    }
}

/// Writes `entries` unchanged into the empty destination.
fn write_all(to: &LogLocation, entries: &[RawEntry], candidate: &str) -> Result<(), CopyError> {
    let storage_error = |source| CopyError::Storage {
        name: to.name(),
        source,
    };
    let sequenced = sequenced(entries);
    match to {
        LogLocation::Sled(dir) => {
            refuse_non_empty_dir(dir, &to.name())?;
            let storage = SledStorage::create_or_open(dir).map_err(storage_error)?;
            write_batches(&storage, &sequenced, BatchLimits::UNBOUNDED).map_err(storage_error)
        }
        LogLocation::Etcd { .. } => {
            let config = to.etcd_config().ok_or_else(|| {
                storage_error(StorageError::EtcdConfig("internal: no etcd config".into()))
            })?;
            let client = EtcdClient::connect(&config).map_err(storage_error)?;
            let leadership = Leadership::campaign(&client, &config, candidate, Duration::ZERO)
                .map_err(storage_error)?;
            let storage =
                EtcdStorage::open(&client, &config, &leadership).map_err(storage_error)?;
            if storage.read_from(0).next().is_some() {
                return Err(CopyError::DestinationNotEmpty {
                    name: to.name(),
                    what: "entries exist under the prefix".into(),
                });
            }
            let limits = storage.batch_limits();
            write_batches(&storage, &sequenced, limits).map_err(storage_error)?;
            leadership.resign().map_err(storage_error)
        }
    }
}

/// The entries with their sequences (keys were verified to be 8 bytes).
fn sequenced(entries: &[RawEntry]) -> Vec<(u64, Vec<u8>)> {
    entries
        .iter()
        .filter_map(|entry| {
            let key = <[u8; 8]>::try_from(entry.key.as_slice()).ok()?;
            Some((u64::from_be_bytes(key), entry.value.clone()))
        })
        .collect()
}

/// Appends in batches within `limits`, then flushes.
fn write_batches(
    storage: &dyn LogStorage,
    entries: &[(u64, Vec<u8>)],
    limits: BatchLimits,
) -> Result<(), StorageError> {
    let mut start = 0;
    while start < entries.len() {
        let mut end = start;
        let mut bytes = 0usize;
        while end < entries.len()
            && end - start < limits.entries_max
            && bytes.saturating_add(entries[end].1.len()) <= limits.bytes_max
        {
            bytes += entries[end].1.len();
            end += 1;
        }
        // An entry alone always fits (entries are at most 64 KiB).
        let end = end.max(start + 1);
        storage.append_batch(&entries[start..end])?;
        start = end;
    }
    storage.flush()
}

fn refuse_non_empty_dir(dir: &Path, name: &str) -> Result<(), CopyError> {
    match std::fs::read_dir(dir) {
        Ok(mut listing) => match listing.next() {
            None => Ok(()),
            Some(_) => Err(CopyError::DestinationNotEmpty {
                name: name.to_string(),
                what: "the directory has files".into(),
            }),
        },
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(err) => Err(CopyError::DestinationNotEmpty {
            name: name.to_string(),
            what: format!("cannot list it: {err}"),
        }),
    }
}
