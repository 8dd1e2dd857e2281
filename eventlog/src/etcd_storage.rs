//! [`LogStorage`] on an etcd v3 cluster (3.4+), for controller high
//! availability (issue 14).
//!
//! Layout under the configured prefix `P` (trailing `/` stripped):
//! - `P/e/<sequence as 8 big-endian bytes>` = the encoded
//!   [`Envelope`](super::Envelope), byte for byte what sled stores, so key
//!   order is log order and `log copy` moves entries unchanged;
//! - `P/leader` = the leading controller's name, attached to its lease
//!   (see [`Leadership`](super::Leadership));
//! - `P/s/<covers as 8 big-endian bytes>/c/<index as 4 big-endian bytes>`
//!   = chunk `index` of the snapshot record covering entries `0..covers`
//!   (at most [`SNAPSHOT_CHUNK_BYTES_MAX`] each), and
//!   `P/s/<covers>/m` = its manifest (see *Snapshots* below);
//! - `P/start` = the encoded [`LiveStart`] once entries were archived (see
//!   *Archiving* below);
//! - nothing else is written (`P/probe` is named by the open-time limit
//!   probe, whose compare always fails, so it is never written either).
//!
//! **Snapshots.** A snapshot record can be far larger than one etcd
//! request may be (256 MiB against [`ETCD_MAX_REQUEST_BYTES`]), and one
//! transaction cannot hold it, so a put is several fenced transactions
//! (each the append's leader compares: create revision and lease of the
//! leader key): first one deleting everything under `P/s/<covers>/`, then
//! the chunks, as many per transaction as the batch limits allow, then the
//! manifest, last. Readers list and read only snapshots with a manifest,
//! reading the chunks at the manifest's revision, so a put cut short (a
//! crash, a lost fence) leaves chunks nobody reads, never a partial
//! snapshot; the next put or delete of that `covers` removes them. A
//! deposed writer's first transaction fails its compare and it writes
//! nothing more. The record's own checksum (see `snapshot.rs`) is checked
//! after reassembly. Deleted snapshots occupy etcd's database until a
//! compaction and defragmentation reclaim them: run etcd with
//! `--auto-compaction-retention`.
//!
//! **Archiving.** Once the entries below a sequence are safely in archive
//! segments (see `archive.rs`), `P/start` is put in one fenced transaction
//! (the live start: every reader starts there), then the archived entry
//! keys are deleted in fenced transactions of at most
//! [`ETCD_DELETE_KEYS_MAX`] keys each, so no single raft entry has to
//! remove millions of keys and a deposed writer deletes nothing. A crash
//! between them leaves keys below the start, which readers skip and the
//! next archiving deletes. As with snapshots, etcd returns the space only
//! after a compaction and defragmentation.
//!
//! **Durability and `flush`.** An append is ONE etcd transaction. etcd
//! answers a transaction only after raft committed it on a quorum, each
//! member having fsynced it to its WAL, so when `append_batch` returns `Ok`
//! the batch is durable on a quorum. `flush` therefore has nothing left to
//! do and returns `Ok`: the `Durable` token the log hands out after it still
//! means "committed on a quorum" (S7).
//!
//! **Fencing.** The transaction's compares are (a) the leader key's
//! create revision and lease are this controller's, and (b) no key in the
//! batch's sequence range exists yet (one range compare, `create_revision
//! == 0` over `[P/e/first, P/e/last+1)`, which etcd evaluates on every key
//! in the range and which holds on an empty range). Only if both hold are
//! the puts applied, atomically; otherwise nothing is written and the
//! append fails with [`StorageError::Deposed`] or
//! [`StorageError::SequenceTaken`], which poisons the log.
//!
//! **Unknown outcomes.** An append whose attempt failed without an answer
//! (the member died, etcd answered "unavailable" because its raft leader
//! died, or no answer within `ATTEMPT_TIMEOUT_MS`) may or may not have
//! committed. It is resolved, not guessed: the SAME transaction is sent
//! again (to the next member), at most [`APPEND_ATTEMPTS_MAX`] times within
//! the request budget and the lease TTL. Its compares make this safe: if
//! the first attempt did not commit, the retry commits the batch once; if
//! it did, the retry fails with "sequence taken", and then the batch's keys
//! and the leader key are read back in one revision: our exact bytes under
//! our still-held leader key mean the earlier attempt committed (success,
//! so `Durable` still means quorum-committed, S7); anything else is a real
//! refusal. Only when every attempt is exhausted does the append fail with
//! an unknown outcome (and the log poisons itself).
//!
//! **Limits.** etcd refuses a transaction with more than `--max-txn-ops`
//! operations (default 128) or a request over `--max-request-bytes`
//! (default 1.5 MiB). The log never splits an atomic batch, so the storage
//! reports [`BatchLimits`] (default [`ETCD_BATCH_LIMITS_DEFAULT`]) that the
//! log respects (refusing larger appends, bounding groups), and
//! [`EtcdStorage::open`] probes the cluster with a transaction of exactly
//! the largest allowed shape (its compare always fails, so nothing is
//! written), refusing to open with [`StorageError::EtcdLimitsTooSmall`]
//! when the server's limits are smaller. [`ETCD_MAX_TXN_OPS_REQUIRED`] and
//! [`etcd_request_bytes_required`] give the flags that fit.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use etcd_client::{
    CompactionOptions, Compare, CompareOp, DeleteOptions, GetOptions, SortOrder, SortTarget, Txn,
    TxnOp, TxnOpResponse,
};

use super::etcd_thread::{
    grpc_code, CallError, EtcdClient, Retry, ATTEMPT_TIMEOUT_MS, DECODE_BYTES_MAX, RETRY_PAUSE_MS,
};
use super::etcd_tls::EtcdTls;
use super::leadership::{Fence, Leadership, LEASE_TTL_MS_DEFAULT};
use super::snapshot::SNAPSHOT_RECORD_BYTES_MAX;
use super::storage::{BatchLimits, LiveStart, LogStorage, RawEntry, StorageError};

/// The atomic batch limits of an etcd log unless configured otherwise:
/// 32,768 entries (the log's `APPEND_EVENTS_MAX`, so every append the
/// controller makes, up to two slots' worth plus one input's events, fits)
/// and 7 MiB of encoded envelopes (over 200 bytes for each of 32,768
/// events; the controller's events are typically smaller). Bounded by
/// [`ETCD_WAL_ENTRY_BYTES_MAX`], not by choice.
pub const ETCD_BATCH_LIMITS_DEFAULT: BatchLimits = BatchLimits {
    entries_max: 32_768,
    bytes_max: 7 << 20,
};

/// etcd 3.4 refuses, when replaying its WAL at start, any record over
/// 10 MiB (`wal: max entry size limit exceeded`, a fatal error: the member
/// cannot start again). etcd does NOT refuse such a request when it is
/// proposed if `--max-request-bytes` allows it, so a too-generous server
/// flag turns one large batch into a cluster that cannot restart (our
/// crash test found this). Every transaction must therefore stay below
/// this, with room for raft's and the WAL's framing.
pub const ETCD_WAL_ENTRY_BYTES_MAX: usize = 10 << 20;

/// The `--max-request-bytes` to start members with: etcd's recommended
/// maximum (10 MiB) less 64 KiB for the raft entry and WAL record framing
/// around the request, so no accepted request can make an unreplayable WAL
/// record (see [`ETCD_WAL_ENTRY_BYTES_MAX`]). scripts/etcd.sh uses it.
pub const ETCD_MAX_REQUEST_BYTES: usize = ETCD_WAL_ENTRY_BYTES_MAX - (64 << 10);

/// Longest prefix accepted, so that the default limits' keys fit
/// [`ETCD_MAX_REQUEST_BYTES`] (each of 32,768 keys repeats the prefix).
pub const ETCD_PREFIX_BYTES_MAX: usize = 64;

/// The `--max-txn-ops` the default limits need: one put per entry (the
/// three compares are counted separately by etcd and fit too).
pub const ETCD_MAX_TXN_OPS_REQUIRED: usize = ETCD_BATCH_LIMITS_DEFAULT.entries_max;

/// Protobuf and key bytes one put adds to a transaction beyond its value:
/// the key (prefix + 11 bytes) plus field tags and lengths (under 16).
const PUT_OVERHEAD_BYTES: usize = 16;

/// Fixed bytes of a transaction beyond its puts: compares, gRPC framing.
const TXN_OVERHEAD_BYTES: usize = 4096;

/// Largest chunk of a snapshot record stored under one etcd key, in bytes
/// (1 MiB): well under etcd's default 1.5 MiB request limit on its own, so
/// a chunk never dominates a transaction, and a read page of
/// [`SNAPSHOT_READ_PAGE_CHUNKS`] stays far under the client's decode limit.
pub const SNAPSHOT_CHUNK_BYTES_MAX: usize = 1 << 20;

/// Chunks read per range request when reading a snapshot (8 MiB at most).
const SNAPSHOT_READ_PAGE_CHUNKS: i64 = 8;

/// Bytes a chunk key is longer than an entry key, and some: the limit
/// probe measured the server with entry keys, so a chunk's value gives up
/// this much of the batch byte limit.
const SNAPSHOT_CHUNK_KEY_EXTRA_BYTES: usize = 64;

/// Most entry keys one fenced transaction of
/// [`LogStorage::delete_below`] deletes: a delete range is one operation
/// whatever it covers, but etcd applies it (and records every key's
/// tombstone) in one raft entry, so the range is bounded.
pub const ETCD_DELETE_KEYS_MAX: u64 = 8_192;

/// Entries read per range request when scanning.
const SCAN_PAGE_ENTRIES: i64 = 256;

/// Most attempts of one append whose earlier attempts' outcome is unknown
/// (see the module docs), all within the request budget and the lease.
pub const APPEND_ATTEMPTS_MAX: u32 = 4;

/// The `--max-request-bytes` a batch of `limits` needs with keys under
/// `prefix` (a bound: values, keys, protobuf framing).
pub fn etcd_request_bytes_required(limits: BatchLimits, prefix: &str) -> usize {
    let key_bytes = prefix.len() + ENTRY_KEY_SUFFIX_BYTES;
    limits
        .bytes_max
        .saturating_add(
            limits
                .entries_max
                .saturating_mul(key_bytes + PUT_OVERHEAD_BYTES),
        )
        .saturating_add(TXN_OVERHEAD_BYTES)
}

/// `/e/` plus the 8-byte sequence.
const ENTRY_KEY_SUFFIX_BYTES: usize = 3 + 8;

/// How to reach one etcd-backed log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdConfig {
    /// Client URLs or `host:port`s of the cluster's members.
    pub endpoints: Vec<String>,
    /// Key prefix of this log (one per fleet), e.g. `/fleetweft/prod`.
    pub prefix: String,
    /// Leadership lease TTL in milliseconds, rounded up to whole seconds
    /// (etcd's unit); at least 1,000. See [`Leadership`].
    pub lease_ttl_ms: u64,
    /// Longest one etcd operation may take, its retries on other members
    /// included (see `etcd_thread.rs`).
    pub request_timeout_ms: u64,
    /// The atomic batch limits this log promises (and probes at open).
    pub limits: BatchLimits,
    /// TLS to the members; `None` for plain http. With it, `HOST:PORT`
    /// endpoints are reached over https.
    pub tls: Option<EtcdTls>,
}

impl EtcdConfig {
    /// A configuration with the default TTL, timeout and limits.
    pub fn new(endpoints: Vec<String>, prefix: impl Into<String>) -> Self {
        EtcdConfig {
            endpoints,
            prefix: prefix.into(),
            lease_ttl_ms: LEASE_TTL_MS_DEFAULT,
            request_timeout_ms: super::etcd_thread::REQUEST_TIMEOUT_MS_DEFAULT,
            limits: ETCD_BATCH_LIMITS_DEFAULT,
            tls: None,
        }
    }

    /// Refuses an unusable configuration, naming what is wrong.
    pub fn validate(&self) -> Result<(), StorageError> {
        let bad = |what: String| Err(StorageError::EtcdConfig(what));
        if self.endpoints.is_empty() || self.endpoints.iter().any(|e| e.trim().is_empty()) {
            return bad("`endpoints` must list at least one non-empty endpoint".into());
        }
        self.validate_schemes()?;
        if let Some(tls) = &self.tls {
            tls.validate()?;
        }
        let prefix = self.prefix.trim_end_matches('/');
        if prefix.is_empty() || !prefix.starts_with('/') {
            return bad(format!(
                "`prefix` {:?} must start with `/` and name something, e.g. /fleetweft/prod",
                self.prefix
            ));
        }
        if prefix.len() > ETCD_PREFIX_BYTES_MAX {
            return bad(format!(
                "`prefix` is {} bytes long; at most {ETCD_PREFIX_BYTES_MAX} (every entry key repeats it)",
                prefix.len()
            ));
        }
        let needed = etcd_request_bytes_required(self.limits, prefix);
        if needed > ETCD_MAX_REQUEST_BYTES {
            return bad(format!(
                "batch limits of {} entries / {} bytes need transactions of up to {needed} bytes, \
                 over the {ETCD_MAX_REQUEST_BYTES} bytes etcd 3.4 can replay from its WAL \
                 (records over 10 MiB stop a member from starting again)",
                self.limits.entries_max, self.limits.bytes_max
            ));
        }
        if self.lease_ttl_ms < 1_000 {
            return bad(format!(
                "`lease_ttl_ms` = {} is below etcd's 1 s granularity (use at least 1000)",
                self.lease_ttl_ms
            ));
        }
        if self.request_timeout_ms == 0 {
            return bad("`request_timeout_ms` must be positive".into());
        }
        if self.limits.entries_max == 0 || self.limits.bytes_max == 0 {
            return bad("batch limits must be positive".into());
        }
        Ok(())
    }

    /// An `https://` endpoint needs `ca_file`; an `http://` one cannot be
    /// used with it (etcd-client refuses the mix, less clearly).
    fn validate_schemes(&self) -> Result<(), StorageError> {
        for endpoint in &self.endpoints {
            let https = endpoint.starts_with("https://");
            if https && self.tls.is_none() {
                return Err(StorageError::EtcdConfig(format!(
                    "endpoint {endpoint} is https but no TLS `ca_file` (--ca-file) is configured"
                )));
            }
            if endpoint.starts_with("http://") && self.tls.is_some() {
                return Err(StorageError::EtcdConfig(format!(
                    "endpoint {endpoint} is plain http but TLS (`ca_file`) is configured: \
                     write https:// or HOST:PORT"
                )));
            }
        }
        Ok(())
    }

    /// Endpoints and prefix as named in errors.
    pub(super) fn target(&self) -> String {
        format!("{} prefix {}", self.endpoints.join(","), self.prefix)
    }

    /// The prefix without trailing slashes.
    pub(super) fn clean_prefix(&self) -> &str {
        self.prefix.trim_end_matches('/')
    }
}

/// The keys of one log.
#[derive(Debug, Clone)]
pub(super) struct Keys {
    /// `P`.
    pub(super) prefix: String,
    /// `P/e/`.
    entries: Vec<u8>,
    /// `P/leader`.
    pub(super) leader: Vec<u8>,
    /// `P/probe`.
    probe: Vec<u8>,
    /// `P/s/`.
    snapshots: Vec<u8>,
    /// `P/start`.
    start: Vec<u8>,
}

impl Keys {
    pub(super) fn new(prefix: &str) -> Self {
        Keys {
            prefix: prefix.to_string(),
            entries: format!("{prefix}/e/").into_bytes(),
            leader: format!("{prefix}/leader").into_bytes(),
            probe: format!("{prefix}/probe").into_bytes(),
            snapshots: format!("{prefix}/s/").into_bytes(),
            start: format!("{prefix}/start").into_bytes(),
        }
    }

    /// `P/s/<covers>/`: everything of one snapshot.
    fn snapshot_dir(&self, covers: u64) -> Vec<u8> {
        let mut key = self.snapshots.clone();
        key.extend_from_slice(&covers.to_be_bytes());
        key.push(b'/');
        key
    }

    /// `P/s/<covers>/m`.
    fn snapshot_manifest(&self, covers: u64) -> Vec<u8> {
        let mut key = self.snapshot_dir(covers);
        key.push(b'm');
        key
    }

    /// `P/s/<covers>/c/`: the chunks' prefix.
    fn snapshot_chunks(&self, covers: u64) -> Vec<u8> {
        let mut key = self.snapshot_dir(covers);
        key.extend_from_slice(b"c/");
        key
    }

    /// `P/s/<covers>/c/<index>`.
    fn snapshot_chunk(&self, covers: u64, index: u32) -> Vec<u8> {
        let mut key = self.snapshot_chunks(covers);
        key.extend_from_slice(&index.to_be_bytes());
        key
    }

    fn entry(&self, sequence: u64) -> Vec<u8> {
        let mut key = self.entries.clone();
        key.extend_from_slice(&sequence.to_be_bytes());
        key
    }

    /// The first key after every entry key (`P/e0`: `/` + 1).
    fn entries_end(&self) -> Vec<u8> {
        range_end(&self.entries)
    }
}

/// The first key after every key starting with `prefix`, which ends in
/// `/` (so `/` + 1 = `0`).
fn range_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    if let Some(last) = end.last_mut() {
        *last += 1;
    }
    end
}

/// A Fleetweft log in etcd. Appends need a [`Leadership`]; without one
/// (tools reading the log) the storage is read-only.
pub struct EtcdStorage {
    client: EtcdClient,
    keys: Keys,
    limits: BatchLimits,
    fence: Option<Fence>,
    /// Revision of the latest scan's first page (0: none yet). A read-only
    /// storage answers `last_sequence` at it, so a verification's scan and
    /// its cross-check see one snapshot while a leader appends.
    scanned_at: AtomicI64,
    /// Appends that needed more than one attempt (for tests and drills).
    append_retries: AtomicU64,
    /// Revision of the last transaction that deleted archived entries
    /// (0: none yet), and the revision compacted to since (0: none):
    /// [`LogStorage::compact_deleted`] compacts from one to the other.
    deleted_at: AtomicI64,
    compacted_to: AtomicI64,
    /// Fault injection only ([`EtcdStorage::hold_before_manifest`]).
    before_manifest: Option<ManifestHook>,
}

/// Called by a snapshot put after its chunks are stored and before its
/// manifest is written, with the snapshot's `covers`: fault injection
/// only (the controller's `[faults] hold_in_snapshot_write`, honoured
/// only with `--allow-fault-injection`), so a scenario can kill a leader
/// inside that window, which otherwise lasts one etcd round trip.
pub type ManifestHook = std::sync::Arc<dyn Fn(u64) + Send + Sync>;

/// The cluster accepted transactions of these limits under this prefix
/// ([`EtcdStorage::probe`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitsProbed {
    limits: BatchLimits,
    prefix: String,
}

impl EtcdStorage {
    /// Opens the log for appending under `leadership` (which must come from
    /// a campaign on the same prefix), after probing that the cluster
    /// accepts transactions of `config.limits`.
    pub fn open(
        client: &EtcdClient,
        config: &EtcdConfig,
        leadership: &Leadership,
    ) -> Result<Self, StorageError> {
        let storage = Self::fenced(client, config, leadership)?;
        storage.probe_limits()?;
        Ok(storage)
    }

    /// Probes, without any leadership (the probe writes nothing), that the
    /// cluster accepts transactions of `config.limits`: a hot standby does
    /// it before it campaigns, so its takeover skips the probe
    /// ([`EtcdStorage::open_probed`]); two transactions of the largest
    /// batch's shape took most of a takeover's 0.3-0.8 s.
    pub fn probe(client: &EtcdClient, config: &EtcdConfig) -> Result<LimitsProbed, StorageError> {
        Self::open_read_only(client, config)?.probe_limits()?;
        Ok(LimitsProbed {
            limits: config.limits,
            prefix: config.clean_prefix().to_string(),
        })
    }

    /// [`EtcdStorage::open`] without its probe when `probed` covers
    /// `config` (same limits and prefix); otherwise it probes.
    pub fn open_probed(
        client: &EtcdClient,
        config: &EtcdConfig,
        leadership: &Leadership,
        probed: &LimitsProbed,
    ) -> Result<Self, StorageError> {
        if probed.limits != config.limits || probed.prefix != config.clean_prefix() {
            return Self::open(client, config, leadership);
        }
        Self::fenced(client, config, leadership)
    }

    /// The fenced storage of `leadership`, not probed.
    fn fenced(
        client: &EtcdClient,
        config: &EtcdConfig,
        leadership: &Leadership,
    ) -> Result<Self, StorageError> {
        config.validate()?;
        let keys = Keys::new(config.clean_prefix());
        if leadership.fence().leader_key != keys.leader {
            return Err(StorageError::EtcdConfig(format!(
                "the leadership was won under another prefix than {}",
                keys.prefix
            )));
        }
        Ok(EtcdStorage {
            client: client.clone(),
            keys,
            limits: config.limits,
            fence: Some(leadership.fence().clone()),
            scanned_at: AtomicI64::new(0),
            append_retries: AtomicU64::new(0),
            deleted_at: AtomicI64::new(0),
            compacted_to: AtomicI64::new(0),
            before_manifest: None,
        })
    }

    /// Opens the log read-only: scans work, appends fail with
    /// [`StorageError::ReadOnly`]. No leadership, no limit probe.
    pub fn open_read_only(client: &EtcdClient, config: &EtcdConfig) -> Result<Self, StorageError> {
        config.validate()?;
        Ok(EtcdStorage {
            client: client.clone(),
            keys: Keys::new(config.clean_prefix()),
            limits: config.limits,
            fence: None,
            scanned_at: AtomicI64::new(0),
            append_retries: AtomicU64::new(0),
            deleted_at: AtomicI64::new(0),
            compacted_to: AtomicI64::new(0),
            before_manifest: None,
        })
    }

    /// Fault injection only: `hook` runs inside every snapshot put,
    /// after the chunks and before the manifest ([`ManifestHook`]).
    pub fn hold_before_manifest(&mut self, hook: ManifestHook) {
        self.before_manifest = Some(hook);
    }

    /// Every snapshot directory under `P/s/`: its `covers`, and whether
    /// its manifest is stored (keys only, one range request).
    fn snapshot_dirs(&self) -> Result<std::collections::BTreeMap<u64, bool>, StorageError> {
        let start = self.keys.snapshots.clone();
        let options = GetOptions::new()
            .with_range(range_end(&self.keys.snapshots))
            .with_keys_only();
        let response = self
            .client
            .call(Retry::Idempotent, move |mut client| {
                let (start, options) = (start.clone(), options.clone());
                async move { client.get(start, Some(options)).await }
            })
            .map_err(|err| self.client.error("listing snapshots", err))?;
        let prefix_len = self.keys.snapshots.len();
        let mut dirs = std::collections::BTreeMap::new();
        for kv in response.kvs() {
            let Some((covers, rest)) = kv
                .key()
                .get(prefix_len..)
                .and_then(|suffix| suffix.split_at_checked(8))
            else {
                continue;
            };
            let Ok(covers) = <[u8; 8]>::try_from(covers) else {
                continue;
            };
            let manifest = dirs.entry(u64::from_be_bytes(covers)).or_insert(false);
            *manifest |= rest == b"/m";
        }
        Ok(dirs)
    }

    /// The log's key prefix.
    pub fn prefix(&self) -> &str {
        &self.keys.prefix
    }

    /// How many appends so far needed a second attempt (an attempt failed
    /// with an unknown outcome and was resolved by retrying).
    pub fn append_retries(&self) -> u64 {
        self.append_retries.load(Ordering::Relaxed)
    }

    /// Sends two transactions shaped like the largest allowed batch (first
    /// with empty values, counting operations only, then with the full
    /// bytes) whose compare always fails: the server checks their size and
    /// operation count, applies nothing, and refuses if its limits are
    /// smaller than ours.
    fn probe_limits(&self) -> Result<(), StorageError> {
        let BatchLimits {
            entries_max,
            bytes_max,
        } = self.limits;
        let value_bytes = bytes_max / entries_max.max(1);
        for (values, what) in [(0, "ops"), (value_bytes, "bytes")] {
            let puts: Vec<TxnOp> = (0..entries_max as u64)
                .map(|sequence| TxnOp::put(self.keys.entry(sequence), vec![0u8; values], None))
                .collect();
            // A create revision is never negative: the compare fails.
            let never = Compare::create_revision(self.keys.probe.clone(), CompareOp::Less, 0);
            let txn = Txn::new().when([never]).and_then(puts);
            let sent = self.client.call(Retry::Patient, move |mut client| {
                let txn = txn.clone();
                async move { client.txn(txn).await }
            });
            match sent {
                Ok(response) if !response.succeeded() => {}
                Ok(_) => {
                    return Err(self.client.error(
                        "probing the cluster's limits",
                        CallError::Client(etcd_client::Error::Internal(
                            "a compare that cannot hold held".into(),
                        )),
                    ))
                }
                Err(err) => return Err(self.limits_error(what, err)),
            }
        }
        Ok(())
    }

    /// A probe refusal: too small limits, or just a failed request.
    fn limits_error(&self, what: &str, err: CallError) -> StorageError {
        match err.grpc_code() {
            Some(grpc_code::INVALID_ARGUMENT | grpc_code::RESOURCE_EXHAUSTED) => {
                let ops = self.limits.entries_max.max(3);
                let bytes = etcd_request_bytes_required(self.limits, &self.keys.prefix);
                let server = match &err {
                    CallError::Client(client) => format!("{what} probe: {client}"),
                    _ => what.to_string(),
                };
                StorageError::EtcdLimitsTooSmall {
                    target: self.client.target().to_string(),
                    entries_max: self.limits.entries_max,
                    bytes_max: self.limits.bytes_max,
                    server,
                    remedy: format!("--max-txn-ops={ops} --max-request-bytes={bytes}"),
                }
            }
            _ => self.client.error("probing the cluster's limits", err),
        }
    }

    /// Reads one page of raw entries in `[start, end)` at `revision` (0 =
    /// the current one). Returns the entries (keys relative to `P/e/`),
    /// whether more follow, and the revision read.
    fn read_page(
        &self,
        start: Vec<u8>,
        revision: i64,
    ) -> Result<(Vec<RawEntry>, bool, i64), StorageError> {
        let options = GetOptions::new()
            .with_range(self.keys.entries_end())
            .with_limit(SCAN_PAGE_ENTRIES)
            .with_sort(SortTarget::Key, SortOrder::Ascend)
            .with_revision(revision);
        let response = self
            .client
            .call(Retry::Idempotent, move |client| {
                let (start, options) = (start.clone(), options.clone());
                async move {
                    let mut kv = client
                        .kv_client()
                        .max_decoding_message_size(DECODE_BYTES_MAX);
                    kv.get(start, Some(options)).await
                }
            })
            .map_err(|err| self.client.error("reading entries", err))?;
        let read_at = response.header().map_or(revision, |h| h.revision());
        let prefix_len = self.keys.entries.len();
        let entries = response
            .kvs()
            .iter()
            .map(|kv| RawEntry {
                key: kv.key().get(prefix_len..).unwrap_or_default().to_vec(),
                value: kv.value().to_vec(),
            })
            .collect();
        Ok((entries, response.more(), read_at))
    }

    /// The fencing transaction for `entries` (consecutive sequences).
    fn append_txn(&self, fence: &Fence, entries: &[(u64, Vec<u8>)]) -> Txn {
        let first = entries.first().map_or(0, |(sequence, _)| *sequence);
        let end = entries.last().map_or(0, |(sequence, _)| *sequence + 1);
        let compares = [
            Compare::create_revision(
                self.keys.leader.clone(),
                CompareOp::Equal,
                fence.create_revision,
            ),
            Compare::lease(self.keys.leader.clone(), CompareOp::Equal, fence.lease_id),
            Compare::create_revision(self.keys.entry(first), CompareOp::Equal, 0)
                .with_range(self.keys.entry(end)),
        ];
        let puts: Vec<TxnOp> = entries
            .iter()
            .map(|(sequence, value)| TxnOp::put(self.keys.entry(*sequence), value.clone(), None))
            .collect();
        Txn::new()
            .when(compares)
            .and_then(puts)
            .or_else([TxnOp::get(self.keys.leader.clone(), None)])
    }

    /// Appends `entries` with the fencing transaction, retrying it while
    /// its outcome is unknown (module docs). `unknown` says an earlier
    /// attempt may already have committed it.
    fn append_resolving(
        &self,
        entries: &[(u64, Vec<u8>)],
        unknown: bool,
    ) -> Result<(), StorageError> {
        let Some(fence) = &self.fence else {
            return Err(StorageError::ReadOnly {
                target: self.client.target().to_string(),
            });
        };
        let Some((first, _)) = entries.first() else {
            return Ok(());
        };
        let bytes = entries.iter().map(|(_, value)| value.len()).sum();
        if entries.len() > self.limits.entries_max || bytes > self.limits.bytes_max {
            return Err(StorageError::BatchTooLarge {
                entries: entries.len(),
                bytes,
                limits: self.limits,
            });
        }
        self.send_append(fence, entries, *first, unknown)
    }

    /// The attempts of one append (see [`EtcdStorage::append_resolving`]).
    fn send_append(
        &self,
        fence: &Fence,
        entries: &[(u64, Vec<u8>)],
        first: u64,
        mut unknown: bool,
    ) -> Result<(), StorageError> {
        let txn = self.append_txn(fence, entries);
        let budget = self.client.timeout().min(fence.lease_ttl);
        let deadline = Instant::now() + budget;
        let pause = Duration::from_millis(RETRY_PAUSE_MS);
        let mut attempt = 1;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let limit = if attempt < APPEND_ATTEMPTS_MAX {
                left.min(Duration::from_millis(ATTEMPT_TIMEOUT_MS))
            } else {
                left
            };
            let txn = txn.clone();
            let sent = self.client.attempt(limit, move |client| {
                let txn = txn.clone();
                async move {
                    let mut kv = client
                        .kv_client()
                        .max_decoding_message_size(DECODE_BYTES_MAX);
                    kv.txn(txn).await
                }
            });
            match sent {
                Ok(response) if response.succeeded() => return Ok(()),
                Ok(response) => {
                    let refusal = self.refusal(fence, &response.op_responses(), first);
                    return match refusal {
                        StorageError::SequenceTaken { .. } if unknown => {
                            self.resolve(fence, entries, refusal)
                        }
                        refusal => Err(refusal),
                    };
                }
                Err(err)
                    if err.is_unavailable()
                        && attempt < APPEND_ATTEMPTS_MAX
                        && deadline.saturating_duration_since(Instant::now()) > pause =>
                {
                    if attempt == 1 {
                        self.append_retries.fetch_add(1, Ordering::Relaxed);
                    }
                    unknown = true;
                    attempt += 1;
                    std::thread::sleep(pause);
                }
                Err(err) => return Err(self.client.error("appending a batch", err)),
            }
        }
    }

    /// Sends `entries` as `append_batch` does once an attempt failed with
    /// an unknown outcome: existing keys are read back and compared, so an
    /// append that did commit is `Ok`. For tests and drills of the
    /// resolution (a lost answer cannot be provoked on demand).
    #[doc(hidden)]
    pub fn append_after_unknown_outcome(
        &self,
        entries: &[(u64, Vec<u8>)],
    ) -> Result<(), StorageError> {
        self.append_resolving(entries, true)
    }

    /// After a retried append met existing keys: reads the batch's keys and
    /// the leader key in one revision. Our exact bytes under our leader key
    /// are our earlier attempt, committed: `Ok`. Anything else: `refusal`
    /// (someone else's keys) or deposed (the leader key changed).
    fn resolve(
        &self,
        fence: &Fence,
        entries: &[(u64, Vec<u8>)],
        refusal: StorageError,
    ) -> Result<(), StorageError> {
        let first = entries.first().map_or(0, |(sequence, _)| *sequence);
        let end = entries.last().map_or(0, |(sequence, _)| *sequence + 1);
        let range = GetOptions::new()
            .with_range(self.keys.entry(end))
            .with_sort(SortTarget::Key, SortOrder::Ascend);
        let read = Txn::new().and_then([
            TxnOp::get(self.keys.entry(first), Some(range)),
            TxnOp::get(self.keys.leader.clone(), None),
        ]);
        let response = self
            .client
            .call(Retry::Idempotent, move |client| {
                let read = read.clone();
                async move {
                    let mut kv = client
                        .kv_client()
                        .max_decoding_message_size(DECODE_BYTES_MAX);
                    kv.txn(read).await
                }
            })
            .map_err(|err| self.client.error("reading back a retried batch", err))?;
        let responses = response.op_responses();
        let (Some(TxnOpResponse::Get(stored)), Some(TxnOpResponse::Get(leader))) =
            (responses.first(), responses.get(1))
        else {
            return Err(refusal);
        };
        let ours = leader.kvs().first().is_some_and(|kv| {
            kv.create_revision() == fence.create_revision && kv.lease() == fence.lease_id
        });
        if !ours {
            return Err(self.refusal(fence, &responses[1..], first));
        }
        let identical = stored.kvs().len() == entries.len()
            && stored
                .kvs()
                .iter()
                .zip(entries)
                .all(|(kv, (sequence, value))| {
                    kv.key() == self.keys.entry(*sequence).as_slice()
                        && kv.value() == value.as_slice()
                });
        if identical {
            Ok(())
        } else {
            Err(refusal)
        }
    }

    /// The lowest entry sequence present below `end`, `None` if none is.
    fn first_sequence_below(&self, end: u64) -> Result<Option<u64>, StorageError> {
        let options = GetOptions::new()
            .with_range(self.keys.entry(end))
            .with_limit(1)
            .with_keys_only()
            .with_sort(SortTarget::Key, SortOrder::Ascend);
        let start = self.keys.entry(0);
        let response = self
            .client
            .call(Retry::Idempotent, move |mut client| {
                let (start, options) = (start.clone(), options.clone());
                async move { client.get(start, Some(options)).await }
            })
            .map_err(|err| self.client.error("finding archived entries", err))?;
        let Some(kv) = response.kvs().first() else {
            return Ok(None);
        };
        let suffix = kv.key().get(self.keys.entries.len()..).unwrap_or_default();
        match <[u8; 8]>::try_from(suffix) {
            Ok(bytes) => Ok(Some(u64::from_be_bytes(bytes))),
            // A longer foreign key inside the range: verification reports
            // it; deleting stops rather than remove what it did not write.
            Err(_) => Ok(None),
        }
    }

    /// The fence of a writable storage, or [`StorageError::ReadOnly`].
    fn writer_fence(&self) -> Result<&Fence, StorageError> {
        self.fence.as_ref().ok_or_else(|| StorageError::ReadOnly {
            target: self.client.target().to_string(),
        })
    }

    /// Sends `ops` in one transaction guarded by the leader compares (as
    /// appends are); a failed compare is [`StorageError::Deposed`].
    /// The operations must be idempotent: a failed attempt is retried on
    /// the next member (a chunk put twice is the same chunk).
    fn fenced_txn(
        &self,
        fence: &Fence,
        ops: Vec<TxnOp>,
        action: &'static str,
    ) -> Result<Vec<TxnOpResponse>, StorageError> {
        self.fenced_txn_at(fence, ops, action)
            .map(|(responses, _)| responses)
    }

    /// [`EtcdStorage::fenced_txn`], also returning the revision the
    /// transaction committed at.
    fn fenced_txn_at(
        &self,
        fence: &Fence,
        ops: Vec<TxnOp>,
        action: &'static str,
    ) -> Result<(Vec<TxnOpResponse>, i64), StorageError> {
        let compares = [
            Compare::create_revision(
                self.keys.leader.clone(),
                CompareOp::Equal,
                fence.create_revision,
            ),
            Compare::lease(self.keys.leader.clone(), CompareOp::Equal, fence.lease_id),
        ];
        let txn = Txn::new()
            .when(compares)
            .and_then(ops)
            .or_else([TxnOp::get(self.keys.leader.clone(), None)]);
        // Patient: a transaction of several MiB may take longer than one
        // quick attempt on a slow disk.
        let response = self
            .client
            .call(Retry::Patient, move |client| {
                let txn = txn.clone();
                async move {
                    let mut kv = client
                        .kv_client()
                        .max_decoding_message_size(DECODE_BYTES_MAX);
                    kv.txn(txn).await
                }
            })
            .map_err(|err| self.client.error(action, err))?;
        if response.succeeded() {
            let revision = response.header().map_or(0, |header| header.revision());
            return Ok((response.op_responses(), revision));
        }
        Err(self.refusal(fence, &response.op_responses(), 0))
    }

    /// Chunk size and chunks per transaction for this log's batch limits:
    /// a snapshot transaction carries at most `bytes_max` value bytes in
    /// at most `entries_max` puts, a shape the open-time probe accepted.
    fn snapshot_chunking(&self) -> (usize, usize) {
        let BatchLimits {
            entries_max,
            bytes_max,
        } = self.limits;
        let chunk = SNAPSHOT_CHUNK_BYTES_MAX
            .min(bytes_max.saturating_sub(SNAPSHOT_CHUNK_KEY_EXTRA_BYTES))
            .max(1);
        let per_txn = (bytes_max / (chunk + SNAPSHOT_CHUNK_KEY_EXTRA_BYTES))
            .min(entries_max)
            .max(1);
        (chunk, per_txn)
    }

    /// The revision of `covers`'s manifest, `None` without one.
    fn snapshot_manifest_revision(&self, covers: u64) -> Result<Option<i64>, StorageError> {
        let key = self.keys.snapshot_manifest(covers);
        let response = self
            .client
            .call(Retry::Idempotent, move |mut client| {
                let key = key.clone();
                async move { client.get(key, None).await }
            })
            .map_err(|err| self.client.error("reading a snapshot manifest", err))?;
        if response.kvs().is_empty() {
            return Ok(None);
        }
        Ok(Some(response.header().map_or(0, |h| h.revision())))
    }

    /// One page of `covers`'s chunks from `start`, at `revision`: the
    /// values and whether more follow (then the key after the last one).
    fn read_chunk_page(
        &self,
        covers: u64,
        start: Vec<u8>,
        revision: i64,
    ) -> Result<ChunkPage, StorageError> {
        let options = GetOptions::new()
            .with_range(range_end(&self.keys.snapshot_chunks(covers)))
            .with_limit(SNAPSHOT_READ_PAGE_CHUNKS)
            .with_sort(SortTarget::Key, SortOrder::Ascend)
            .with_revision(revision);
        let response = self
            .client
            .call(Retry::Idempotent, move |client| {
                let (start, options) = (start.clone(), options.clone());
                async move {
                    let mut kv = client
                        .kv_client()
                        .max_decoding_message_size(DECODE_BYTES_MAX);
                    kv.get(start, Some(options)).await
                }
            })
            .map_err(|err| self.client.error("reading snapshot chunks", err))?;
        let next = match (response.more(), response.kvs().last()) {
            (true, Some(last)) => {
                let mut next = last.key().to_vec();
                next.push(0);
                Some(next)
            }
            _ => None,
        };
        let values = response
            .kvs()
            .iter()
            .map(|kv| kv.value().to_vec())
            .collect();
        Ok((values, next))
    }

    /// Why a fencing transaction's compare failed, from its `or_else` read
    /// of the leader key.
    fn refusal(&self, fence: &Fence, responses: &[TxnOpResponse], first: u64) -> StorageError {
        let leader = responses.iter().find_map(|response| match response {
            TxnOpResponse::Get(get) => Some(get.kvs().first().cloned()),
            _ => None,
        });
        let leader_key = String::from_utf8_lossy(&self.keys.leader).into_owned();
        match leader.flatten() {
            Some(kv)
                if kv.create_revision() == fence.create_revision
                    && kv.lease() == fence.lease_id =>
            {
                StorageError::SequenceTaken {
                    prefix: self.keys.prefix.clone(),
                    first,
                }
            }
            Some(kv) => StorageError::Deposed {
                leader_key,
                holder: String::from_utf8_lossy(kv.value()).into_owned(),
            },
            None => StorageError::Deposed {
                leader_key,
                holder: "nobody".into(),
            },
        }
    }
}

impl LogStorage for EtcdStorage {
    /// One fencing transaction (see the module docs); on `Ok` the batch is
    /// committed on a quorum.
    fn append_batch(&self, entries: &[(u64, Vec<u8>)]) -> Result<(), StorageError> {
        self.append_resolving(entries, false)
    }

    /// Nothing to do: a successful `append_batch` was already committed on
    /// a quorum (each member fsynced its WAL before etcd answered).
    fn flush(&self) -> Result<(), StorageError> {
        Ok(())
    }

    /// Pages through `P/e/` in key order, every page at the revision of the
    /// first, so a scan is one consistent snapshot even while a leader
    /// appends.
    fn read_from(
        &self,
        from: u64,
    ) -> Box<dyn Iterator<Item = Result<RawEntry, StorageError>> + '_> {
        // From 0, start at the bare prefix so foreign keys sorting before
        // sequence 0 are seen too.
        let start = if from == 0 {
            self.keys.entries.clone()
        } else {
            self.keys.entry(from)
        };
        Box::new(Scan {
            storage: self,
            next: Some(start),
            revision: 0,
            page: VecDeque::new(),
        })
    }

    /// The live entries are contiguous from the live start, so the last is
    /// the start plus their count, confirmed by counting none above it
    /// (then every sequence in between is there). etcd
    /// (3.4) counts from its in-memory index, while a descending range
    /// with a limit reads every key-value in it before sorting: at 200,000
    /// live entries under load that outlasted the 5 s request budget and
    /// a start failed (`fleetweft-restart-bench --etcd`). A log whose
    /// count and keys disagree (a hole) falls back to that range.
    fn last_sequence(&self) -> Result<Option<u64>, StorageError> {
        // Read-only: at the latest scan's revision (see `scanned_at`); a
        // leader's log has no other writer, so it reads the current one.
        let revision = match self.fence {
            None => self.scanned_at.load(Ordering::Acquire),
            Some(_) => 0,
        };
        let (start, revision) = self.live_start_at(revision)?;
        let count = self.count_entries_from(start.sequence, revision)?;
        let Some(last) = start.sequence.saturating_add(count).checked_sub(1) else {
            return Ok(None);
        };
        if count > 0 && self.count_entries_from(last.saturating_add(1), revision)? == 0 {
            return Ok(Some(last));
        }
        self.last_sequence_by_range(revision)
    }

    fn batch_limits(&self) -> BatchLimits {
        self.limits
    }

    /// Fenced transactions: clear `P/s/<covers>/`, write the chunks, then
    /// the manifest (module docs). `Ok` means every transaction committed
    /// on a quorum. Refused as [`StorageError::Deposed`] once the fence is
    /// lost, and as [`StorageError::ReadOnly`] without leadership.
    fn put_snapshot(&self, covers: u64, record: &[u8]) -> Result<(), StorageError> {
        let fence = self.writer_fence()?;
        let dir = self.keys.snapshot_dir(covers);
        let clear = TxnOp::delete(
            dir.clone(),
            Some(DeleteOptions::new().with_range(range_end(&dir))),
        );
        self.fenced_txn(fence, vec![clear], "clearing a snapshot's keys")?;
        let (chunk_bytes, per_txn) = self.snapshot_chunking();
        let chunks: Vec<&[u8]> = record.chunks(chunk_bytes).collect();
        let count = u32::try_from(chunks.len()).map_err(|_| {
            StorageError::EtcdConfig(format!(
                "a snapshot of {} bytes needs more than {} chunks",
                record.len(),
                u32::MAX
            ))
        })?;
        for (group, batch) in chunks.chunks(per_txn).enumerate() {
            let puts = batch
                .iter()
                .enumerate()
                .map(|(i, chunk)| {
                    // < count, which fits u32.
                    let index = (group * per_txn + i) as u32;
                    TxnOp::put(
                        self.keys.snapshot_chunk(covers, index),
                        chunk.to_vec(),
                        None,
                    )
                })
                .collect();
            self.fenced_txn(fence, puts, "writing snapshot chunks")?;
        }
        let mut manifest = Vec::with_capacity(20);
        manifest.extend_from_slice(&covers.to_be_bytes());
        manifest.extend_from_slice(&count.to_be_bytes());
        manifest.extend_from_slice(&(record.len() as u64).to_be_bytes());
        if let Some(hook) = &self.before_manifest {
            hook(covers);
        }
        let put = TxnOp::put(self.keys.snapshot_manifest(covers), manifest, None);
        self.fenced_txn(fence, vec![put], "writing a snapshot manifest")?;
        Ok(())
    }

    /// The snapshots with a manifest (a put cut short has none).
    fn snapshot_sequences(&self) -> Result<Vec<u64>, StorageError> {
        let dirs = self.snapshot_dirs()?;
        Ok(dirs
            .into_iter()
            .rev()
            .filter(|(_, m)| *m)
            .map(|(c, _)| c)
            .collect())
    }

    /// Chunks without a manifest: puts cut short.
    fn incomplete_snapshots(&self) -> Result<Vec<u64>, StorageError> {
        let dirs = self.snapshot_dirs()?;
        Ok(dirs
            .into_iter()
            .rev()
            .filter(|(_, m)| !*m)
            .map(|(c, _)| c)
            .collect())
    }

    /// The chunks, concatenated in index order, read at the manifest's
    /// revision (so a concurrent delete or rewrite is not seen half-done).
    /// Stops past [`SNAPSHOT_RECORD_BYTES_MAX`]: the record check refuses
    /// what was read.
    fn read_snapshot(&self, covers: u64) -> Result<Option<Vec<u8>>, StorageError> {
        let Some(revision) = self.snapshot_manifest_revision(covers)? else {
            return Ok(None);
        };
        let mut record = Vec::new();
        let mut start = Some(self.keys.snapshot_chunks(covers));
        while let Some(from) = start.take() {
            let (values, next) = self.read_chunk_page(covers, from, revision)?;
            for value in values {
                record.extend_from_slice(&value);
            }
            if record.len() > SNAPSHOT_RECORD_BYTES_MAX {
                break;
            }
            start = next;
        }
        Ok(Some(record))
    }

    /// One fenced transaction deleting the manifest and every chunk.
    fn delete_snapshot(&self, covers: u64) -> Result<(), StorageError> {
        let fence = self.writer_fence()?;
        let dir = self.keys.snapshot_dir(covers);
        let delete = TxnOp::delete(
            dir.clone(),
            Some(DeleteOptions::new().with_range(range_end(&dir))),
        );
        self.fenced_txn(fence, vec![delete], "deleting a snapshot")?;
        Ok(())
    }

    /// `P/start`, genesis without it.
    fn live_start(&self) -> Result<LiveStart, StorageError> {
        Ok(self.live_start_at(0)?.0)
    }

    /// One fenced put of `P/start`: committed on a quorum when `Ok`.
    fn set_live_start(&self, start: &LiveStart) -> Result<(), StorageError> {
        let fence = self.writer_fence()?;
        let put = TxnOp::put(self.keys.start.clone(), start.encode().to_vec(), None);
        self.fenced_txn(fence, vec![put], "writing the live start")?;
        Ok(())
    }

    /// Fenced delete ranges of at most [`ETCD_DELETE_KEYS_MAX`] sequences,
    /// each starting at the lowest entry key still present (so a second
    /// call skips what the first deleted), until none is below `end`.
    fn delete_below(&self, end: u64) -> Result<u64, StorageError> {
        let fence = self.writer_fence()?;
        let mut deleted: u64 = 0;
        while let Some(low) = self.first_sequence_below(end)? {
            let high = low.saturating_add(ETCD_DELETE_KEYS_MAX).min(end);
            let delete = TxnOp::delete(
                self.keys.entry(low),
                Some(DeleteOptions::new().with_range(self.keys.entry(high))),
            );
            let (responses, revision) =
                self.fenced_txn_at(fence, vec![delete], "deleting archived entries")?;
            self.deleted_at.fetch_max(revision, Ordering::AcqRel);
            for response in responses {
                if let TxnOpResponse::Delete(delete) = response {
                    deleted += u64::try_from(delete.deleted()).unwrap_or(0);
                }
            }
        }
        Ok(deleted)
    }

    /// Compacts etcd's revision history up to the revision of the last
    /// delete of archived entries (issue #26 item 3): etcd keeps every
    /// deleted key's old versions until a compaction, so without one the
    /// database does not shrink however much is archived. Not physical:
    /// it returns once etcd has recorded the compaction, and etcd frees the
    /// old versions in its backend in the background. A physical compaction
    /// waits for that, which took more than the 5 s request budget after
    /// 200,000 archived entries under load (`fleetweft-restart-bench
    /// --etcd`), so the run failed while nothing was wrong. A revision
    /// already compacted (by etcd's `--auto-compaction-*` or another
    /// controller) counts as done. Compaction is cluster-wide: it drops
    /// old versions of every key below that revision, which this log
    /// never reads (it reads the latest values, and a standby polls).
    /// The space is reused by etcd; the file shrinks only after
    /// `etcdctl defrag` (docs/operations.md).
    fn compact_deleted(&self) -> Result<Option<i64>, StorageError> {
        let target = self.deleted_at.load(Ordering::Acquire);
        if target == 0 || target <= self.compacted_to.load(Ordering::Acquire) {
            return Ok(None);
        }
        let outcome = self
            .client
            .call(Retry::Idempotent, move |mut client| async move {
                client.compact(target, Some(CompactionOptions::new())).await
            });
        match outcome {
            Ok(_) => {}
            Err(CallError::Client(etcd_client::Error::GRpcStatus(status)))
                if status
                    .message()
                    .contains("required revision has been compacted") => {}
            Err(err) => return Err(self.client.error("compacting the revision history", err)),
        }
        self.compacted_to.fetch_max(target, Ordering::AcqRel);
        Ok(Some(target))
    }

    /// The database size of the member answering (etcd's `Status`); etcd
    /// 3.4 does not report its `--quota-backend-bytes`, so the quota is
    /// `None` here and the daemon's `[storage] quota_backend_bytes` names
    /// it.
    fn space(&self) -> Result<Option<super::storage::StorageSpace>, StorageError> {
        let status = self
            .client
            .call(Retry::Idempotent, |mut client| async move {
                client.status().await
            })
            .map_err(|err| self.client.error("reading the member's status", err))?;
        Ok(Some(super::storage::StorageSpace {
            bytes: u64::try_from(status.db_size()).unwrap_or(0),
            quota_bytes: None,
        }))
    }
}

/// Reads behind [`EtcdStorage`]'s `last_sequence`.
impl EtcdStorage {
    /// The live start at `revision` (0: the current one), and the revision
    /// it was read at.
    fn live_start_at(&self, revision: i64) -> Result<(LiveStart, i64), StorageError> {
        let key = self.keys.start.clone();
        let options = GetOptions::new().with_revision(revision);
        let response = self
            .client
            .call(Retry::Idempotent, move |mut client| {
                let (key, options) = (key.clone(), options.clone());
                async move { client.get(key, Some(options)).await }
            })
            .map_err(|err| self.client.error("reading the live start", err))?;
        // The header names the store's current revision, not the one read.
        let at = match revision {
            0 => response.header().map_or(0, |h| h.revision()),
            asked => asked,
        };
        let start = match response.kvs().first() {
            None => LiveStart::genesis(),
            Some(kv) => {
                LiveStart::decode(kv.value()).ok_or_else(|| StorageError::LiveStartDamaged {
                    target: self.client.target().to_string(),
                })?
            }
        };
        Ok((start, at))
    }

    /// How many entry keys there are at `from` and above, at `revision`.
    fn count_entries_from(&self, from: u64, revision: i64) -> Result<u64, StorageError> {
        let options = GetOptions::new()
            .with_range(self.keys.entries_end())
            .with_count_only()
            .with_revision(revision);
        let start = self.keys.entry(from);
        let response = self
            .client
            .call(Retry::Idempotent, move |mut client| {
                let (start, options) = (start.clone(), options.clone());
                async move { client.get(start, Some(options)).await }
            })
            .map_err(|err| self.client.error("counting the live entries", err))?;
        Ok(u64::try_from(response.count()).unwrap_or(0))
    }

    /// The last entry key by a descending range (reads the whole range).
    fn last_sequence_by_range(&self, revision: i64) -> Result<Option<u64>, StorageError> {
        let options = GetOptions::new()
            .with_range(self.keys.entries_end())
            .with_limit(1)
            .with_keys_only()
            .with_sort(SortTarget::Key, SortOrder::Descend)
            .with_revision(revision);
        let start = self.keys.entries.clone();
        let response = self
            .client
            .call(Retry::Idempotent, move |mut client| {
                let (start, options) = (start.clone(), options.clone());
                async move { client.get(start, Some(options)).await }
            })
            .map_err(|err| self.client.error("reading the last entry", err))?;
        let Some(kv) = response.kvs().first() else {
            return Ok(None);
        };
        let suffix = kv.key().get(self.keys.entries.len()..).unwrap_or_default();
        match <[u8; 8]>::try_from(suffix) {
            Ok(bytes) => Ok(Some(u64::from_be_bytes(bytes))),
            Err(_) => Err(StorageError::EtcdConfig(format!(
                "key {:?} under {} is not an 8-byte sequence number",
                String::from_utf8_lossy(kv.key()),
                self.keys.prefix
            ))),
        }
    }
}

/// One page of a snapshot's chunk values, and the key the next page
/// starts at (`None` after the last).
type ChunkPage = (Vec<Vec<u8>>, Option<Vec<u8>>);

/// A paged, snapshot-consistent scan of the entries.
struct Scan<'a> {
    storage: &'a EtcdStorage,
    /// Where the next page starts; `None` once the last page was read.
    next: Option<Vec<u8>>,
    /// Revision of the first page (0 until it is read).
    revision: i64,
    page: VecDeque<RawEntry>,
}

impl Iterator for Scan<'_> {
    type Item = Result<RawEntry, StorageError>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(entry) = self.page.pop_front() {
            return Some(Ok(entry));
        }
        let start = self.next.take()?;
        match self.storage.read_page(start, self.revision) {
            Ok((entries, more, revision)) => {
                if self.revision == 0 {
                    self.storage.scanned_at.store(revision, Ordering::Release);
                }
                self.revision = revision;
                if more {
                    if let Some(last) = entries.last() {
                        // The smallest key after the last one read.
                        let mut next = self.storage.keys.entries.clone();
                        next.extend_from_slice(&last.key);
                        next.push(0);
                        self.next = Some(next);
                    }
                }
                self.page = entries.into();
                self.page.pop_front().map(Ok)
            }
            Err(err) => Some(Err(err)),
        }
    }
}
