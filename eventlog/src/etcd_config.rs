//! How to reach one etcd-backed log ([`EtcdConfig`]), its defaults and
//! the limits it is checked against, and the keys of one log ([`Keys`]):
//! what the storage ([`super::etcd_storage`]), the client thread
//! ([`super::etcd_thread`]) and the leadership ([`super::leadership`])
//! share.

use super::etcd_tls::EtcdTls;
use super::storage::{BatchLimits, StorageError};

/// Leadership lease TTL unless configured: a few seconds, so a standby takes
/// over soon after a leader dies, while a leader survives a short stall.
pub const LEASE_TTL_MS_DEFAULT: u64 = 5_000;

/// Longest one etcd operation may take by default, its retries on other
/// members included, before it counts as failed
/// (`EtcdConfig::request_timeout_ms`). An append whose outcome is still
/// unknown then poisons the log.
pub const REQUEST_TIMEOUT_MS_DEFAULT: u64 = 5_000;

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
    /// (etcd's unit); at least 1,000. See [`crate::Leadership`].
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
            request_timeout_ms: REQUEST_TIMEOUT_MS_DEFAULT,
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
    pub(super) entries: Vec<u8>,
    /// `P/leader`.
    pub(super) leader: Vec<u8>,
    /// `P/probe`.
    pub(super) probe: Vec<u8>,
    /// `P/s/`.
    pub(super) snapshots: Vec<u8>,
    /// `P/start`.
    pub(super) start: Vec<u8>,
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
    pub(super) fn snapshot_dir(&self, covers: u64) -> Vec<u8> {
        let mut key = self.snapshots.clone();
        key.extend_from_slice(&covers.to_be_bytes());
        key.push(b'/');
        key
    }

    /// `P/s/<covers>/m`.
    pub(super) fn snapshot_manifest(&self, covers: u64) -> Vec<u8> {
        let mut key = self.snapshot_dir(covers);
        key.push(b'm');
        key
    }

    /// `P/s/<covers>/c/`: the chunks' prefix.
    pub(super) fn snapshot_chunks(&self, covers: u64) -> Vec<u8> {
        let mut key = self.snapshot_dir(covers);
        key.extend_from_slice(b"c/");
        key
    }

    /// `P/s/<covers>/c/<index>`.
    pub(super) fn snapshot_chunk(&self, covers: u64, index: u32) -> Vec<u8> {
        let mut key = self.snapshot_chunks(covers);
        key.extend_from_slice(&index.to_be_bytes());
        key
    }

    pub(super) fn entry(&self, sequence: u64) -> Vec<u8> {
        let mut key = self.entries.clone();
        key.extend_from_slice(&sequence.to_be_bytes());
        key
    }

    /// The first key after every entry key (`P/e0`: `/` + 1).
    pub(super) fn entries_end(&self) -> Vec<u8> {
        range_end(&self.entries)
    }
}

/// The first key after every key starting with `prefix`, which ends in
/// `/` (so `/` + 1 = `0`).
pub(super) fn range_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    if let Some(last) = end.last_mut() {
        *last += 1;
    }
    end
}
