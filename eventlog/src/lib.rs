//! Fleetweft's durable event log (SPEC §4): the controller's log and, with
//! the same format, the agent's journal.
//!
//! An append-only log in sled. Each entry is an [`Envelope`]: format version,
//! sequence (also the big-endian key), SHA-256 of the previous entry (a hash
//! chain), the bincode-encoded event, and a checksum. State is rebuilt by
//! replaying the events [`EventLog::open`] returns.
//!
//! **Acknowledge only what is [`Durable`].** [`EventLog::append`] returns a
//! `Durable` token, which only this module can create and only after the
//! storage flush covering the entries returned `Ok`. Concurrent appends share
//! flushes (group commit, see `commit.rs`).
//!
//! **The chain detects, it does not authenticate.** Corruption, reordering,
//! gaps and foreign keys are found by [`verify`]; someone able to rewrite
//! the whole log can produce a new valid chain. A lost suffix of entries
//! looks like a shorter valid chain; the durable watermark beside the
//! database catches that for entries that were durable before.
//!
//! Files: `envelope.rs` (entry format), `storage.rs` (the [`LogStorage`]
//! trait), `sled_storage.rs` (sled implementation and its durability notes),
//! `etcd_storage.rs` (the replicated etcd backend, its durability, fencing
//! and transaction limits), `etcd_thread.rs` (the async etcd client on its
//! own thread), `leadership.rs` (lease-based election and the fence),
//! `sled_dir.rs` (atomic creation, sled's files and lock),
//! `watermark.rs` (detects entries sled's recovery dropped), `commit.rs`
//! (group commit), `event_log.rs` ([`EventLog`]), `verify.rs`,
//! `forensic.rs` (verification never writes: it opens a private copy),
//! `snapshot.rs` (snapshot records, opening from the newest usable
//! snapshot, deep verification of snapshots), `archive.rs` (archive
//! segments: format, durable writing, listing), `archive_log.rs`
//! ([`EventLog::archive_to`]), `archive_read.rs` (reading and verifying
//! the archive and the live log as one chain).
//!
//! **Archived history.** The oldest entries (below the newest snapshot)
//! can be moved to compressed segment files ([`EventLog::archive_to`]);
//! the live log then starts at a later sequence ([`LiveStart`]). Opening
//! such a log needs a snapshot covering at least its first live sequence:
//! [`EventLog::open`], [`EventLog::with_storage`], and the snapshot opens
//! without one, refuse it as [`LogError::HistoryArchived`], naming the
//! first live sequence and the newest snapshot's coverage. The whole
//! history is verified with [`verify_with_archive`] and read with
//! [`HistoryReader`].
// Production functions stay within 70 lines (clippy.toml, issue #22 item 6);
// tests may run longer.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

pub mod archive;
mod archive_log;
mod archive_read;
mod commit;
mod durable;
mod envelope;
mod error;
mod etcd_config;
mod etcd_storage;
mod etcd_thread;
mod etcd_tls;
mod event_log;
mod forensic;
mod leadership;
pub mod mutants;
mod sled_dir;
mod sled_storage;
mod snapshot;
mod storage;
mod verify;
mod watermark;

pub use archive::{
    ArchiveConfig, ArchiveError, SegmentFault, SegmentInfo, SegmentWrite, SEGMENT_BYTES_MAX_DEFAULT,
};
pub use archive_log::ArchiveReport;
pub use archive_read::{
    verify_snapshots_with_archive, verify_with_archive, HistoryEntry, HistoryReader, HistoryReport,
};
pub use commit::CommitStats;
pub use durable::Durable;
pub use envelope::{
    decode_payload, encode_payload, genesis_hash, hash_bytes, Envelope, EnvelopeFault, Hash,
    PayloadError, ENTRY_BYTES_MAX, LOG_FORMAT_VERSION, PAYLOAD_BYTES_MAX,
};
pub use error::LogError;
pub use etcd_config::{
    etcd_request_bytes_required, EtcdConfig, ETCD_BATCH_LIMITS_DEFAULT, ETCD_MAX_REQUEST_BYTES,
    ETCD_MAX_TXN_OPS_REQUIRED, ETCD_PREFIX_BYTES_MAX, ETCD_WAL_ENTRY_BYTES_MAX,
    LEASE_TTL_MS_DEFAULT, REQUEST_TIMEOUT_MS_DEFAULT,
};
pub use etcd_storage::{
    EtcdStorage, LimitsProbed, ManifestHook, ETCD_DELETE_KEYS_MAX, SNAPSHOT_CHUNK_BYTES_MAX,
};
pub use etcd_thread::{
    EtcdClient, ATTEMPTS_MAX, ATTEMPT_TIMEOUT_MS, CONNECT_TIMEOUT_MS, RETRY_PAUSE_MS,
};
pub use etcd_tls::EtcdTls;
pub use event_log::{EventLog, APPEND_BYTES_MAX, APPEND_EVENTS_MAX};
pub use forensic::{CopyProblem, FORENSIC_COPY_BYTES_MAX, FORENSIC_COPY_FILES_MAX};
pub use leadership::{Fence, Leadership};
pub use sled_dir::{is_log_dir, sled_config};
pub use sled_storage::{ForeignData, SledStorage};
pub use snapshot::{
    verify_snapshots, Snapshot, SnapshotFault, SnapshotOpen, SnapshotSkip, SnapshotsReport,
    SNAPSHOT_RECORD_BYTES_MAX, SNAPSHOT_RECORD_VERSION, SNAPSHOT_STATE_BYTES_MAX,
};
pub use storage::{BatchLimits, LiveStart, LogStorage, RawEntry, StorageError, StorageSpace};
pub use verify::{
    read_private_copy, verify, verify_in_place, verify_in_place_with, verify_storage_with,
    verify_with, EntryFault, VerifyError, VerifyReport,
};
