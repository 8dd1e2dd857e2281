//! `controller.toml`. A bad config names the file, the key and what was
//! expected.

use serde::Deserialize;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// Upper bound on the config file size: a bootstrap `[[nodes]]` list of
/// `model::plan::NODES_MAX` entries at about 100 bytes each (name, route,
/// a few labels) fits.
pub const CONFIG_BYTES_MAX: u64 = 16 * 1024 * 1024;

/// The whole controller configuration.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ControllerConfig {
    /// Where the event log and accepted bundles live.
    pub data_dir: PathBuf,
    /// The QUIC address agents connect to.
    pub listen: SocketAddr,
    /// Bootstrap nodes: at start, each entry whose name is not enrolled yet
    /// is enrolled (`NodeEnrolled`), in file order. Entries already
    /// enrolled change nothing (the log holds the roster), so the list may
    /// be reordered or shortened; `fleetweft node add` enrolls more.
    #[serde(default)]
    pub nodes: Vec<NodeEntry>,
    /// TLS material.
    pub tls: TlsSection,
    /// The key bundles must be signed with.
    pub bundles: BundleSection,
    /// The operator HTTP API.
    pub api: ApiSection,
    /// Deadlines.
    #[serde(default)]
    pub timing: TimingSection,
    /// Periodic re-verification of settled nodes (off by default).
    #[serde(default)]
    pub verify: VerifySection,
    /// Honoured only with `--allow-fault-injection`.
    #[serde(default)]
    pub faults: FaultSection,
    /// Where the event log lives: sled in `data_dir` (the default) or etcd.
    #[serde(default)]
    pub storage: StorageSection,
    /// Where durable events are POSTed, signed (off when absent).
    #[serde(default)]
    pub webhooks: Vec<WebhookEntry>,
    /// Snapshots of the state, so a start folds only the events after
    /// the newest (issue #26).
    #[serde(default)]
    pub log: LogSection,
    /// Plain-HTTP mirrors of release chunks, for every node and per
    /// label (`[artifacts]`, issue #23 item 5; [`super::mirrors`]).
    #[serde(default)]
    pub artifacts: super::mirrors::ArtifactsSection,
}

/// Fewest events between two snapshots when `log.snapshot_every_events`
/// is not 0: below it, writing snapshots costs more than the replay saved.
pub const SNAPSHOT_EVERY_EVENTS_MIN: u64 = 64;

/// Most snapshots kept (`log.snapshots_keep`): older ones are deleted.
pub const SNAPSHOTS_KEEP_MAX: usize = 16;

/// Entries the live log keeps behind its end unless `log.keep_events`
/// says otherwise: about 3 node-updates of a 10,000-node fleet, 56 MB on
/// sled. A start opens the whole live log (sled reads all of it: 83% of a
/// start on a 5.6 GB log), so this window, not the history, sets the
/// start time: 2.48 s with 1,000,000 live entries, 0.69 s with 200,000
/// (docs/performance.md, "Restart"); on etcd it sets the database size.
pub const KEEP_EVENTS_DEFAULT: u64 = 200_000;

/// Most `log.keep_events` accepted (a live log of 1,000 million entries
/// is what archiving exists to avoid).
pub const KEEP_EVENTS_MAX: u64 = 1_000_000_000;

/// Days of history the live log keeps unless `log.keep_days` says
/// otherwise: none. An age window keeps as many entries as the fleet
/// appends in that time, so the live log (a start's time, etcd's
/// database) would grow with the event rate instead of staying bounded
/// by `keep_events`; an operator who wants a week readable without the
/// archive sets it knowing that.
pub const KEEP_DAYS_DEFAULT: u64 = 0;

/// Most `log.keep_days` accepted (ten years).
pub const KEEP_DAYS_MAX: u64 = 3_650;

/// `[log]`: when the leader writes a snapshot of its state (the model's
/// state and the core's derived indexes) beside the log, and how many it
/// keeps. A snapshot is a cache: a start loads the newest that verifies
/// and folds only the events after it; one that does not verify is
/// skipped, naming why, and an older one (or the whole log) is used.
///
/// With `archive_dir`, after each snapshot the leader moves the entries
/// that are below the newest snapshot *and* outside both retention
/// windows (more than `keep_events` behind the end, and appended more
/// than `keep_days` days ago; 0 turns a window off) into compressed
/// segments there, then deletes them from the live log (issue #26).
///
/// ```toml
/// [log]
/// snapshot_every_events = 100000  # 0: never by count
/// snapshot_every_s = 3600         # 0: never by time (needs new events)
/// snapshots_keep = 2
/// archive_dir = "/var/lib/fleetweft/archive"  # unset: never archive
/// keep_events = 1000000           # 0: no count window
/// keep_days = 7                   # 0: no age window
/// ```
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogSection {
    /// A snapshot once this many events were appended since the last.
    pub snapshot_every_events: u64,
    /// A snapshot once this many seconds passed since the last, if any
    /// event was appended meanwhile.
    pub snapshot_every_s: u64,
    /// Snapshots kept; the oldest beyond it are deleted.
    pub snapshots_keep: usize,
    /// Where archived history goes; `None`: nothing is archived.
    pub archive_dir: Option<PathBuf>,
    /// Entries kept in the live log behind its end (0: no count window).
    pub keep_events: u64,
    /// Days of history kept in the live log (0: no age window).
    pub keep_days: u64,
}

impl Default for LogSection {
    fn default() -> Self {
        // About 14 node-updates of a 1,000-node fleet, or 1.4 at 10,000
        // (7 events each): a restart folds at most this many events.
        LogSection {
            snapshot_every_events: 100_000,
            snapshot_every_s: 3_600,
            snapshots_keep: 2,
            archive_dir: None,
            keep_events: KEEP_EVENTS_DEFAULT,
            keep_days: KEEP_DAYS_DEFAULT,
        }
    }
}

impl LogSection {
    fn validate(&self) -> Result<(), String> {
        let every = self.snapshot_every_events;
        if every != 0 && every < SNAPSHOT_EVERY_EVENTS_MIN {
            return Err(format!(
                "key `log.snapshot_every_events`: expected 0 (off) or at least {SNAPSHOT_EVERY_EVENTS_MIN}, got {every}"
            ));
        }
        if !(1..=SNAPSHOTS_KEEP_MAX).contains(&self.snapshots_keep) {
            return Err(format!(
                "key `log.snapshots_keep`: expected 1 to {SNAPSHOTS_KEEP_MAX}, got {}",
                self.snapshots_keep
            ));
        }
        if self.keep_events > KEEP_EVENTS_MAX {
            return Err(format!(
                "key `log.keep_events`: expected 0 (no count window) to {KEEP_EVENTS_MAX}, got {}",
                self.keep_events
            ));
        }
        if self.keep_days > KEEP_DAYS_MAX {
            return Err(format!(
                "key `log.keep_days`: expected 0 (no age window) to {KEEP_DAYS_MAX}, got {}",
                self.keep_days
            ));
        }
        if let Some(dir) = &self.archive_dir {
            if dir.as_os_str().is_empty() {
                return Err(
                    "key `log.archive_dir`: expected a directory, got an empty path".into(),
                );
            }
            if self.snapshot_every_events == 0 && self.snapshot_every_s == 0 {
                return Err("key `log.archive_dir`: archiving follows snapshots, and \
                     `log.snapshot_every_events` and `log.snapshot_every_s` are both 0 (off)"
                    .into());
            }
        }
        Ok(())
    }

    /// Refuses an archive directory inside the log's own directory (sled
    /// would find foreign files there) or the data directory itself.
    fn validate_archive_dir(&self, data_dir: &Path) -> Result<(), String> {
        let Some(dir) = &self.archive_dir else {
            return Ok(());
        };
        let log_dir = data_dir.join("log");
        if dir == data_dir || dir.starts_with(&log_dir) {
            return Err(format!(
                "key `log.archive_dir`: {} is the data directory or inside its log; use a \
                 directory of its own (e.g. {})",
                dir.display(),
                data_dir.join("archive").display()
            ));
        }
        Ok(())
    }
}

/// Which engine holds the controller's event log.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StorageBackend {
    /// sled in `data_dir/log`: one machine, zero set-up.
    #[default]
    Sled,
    /// An etcd cluster (`endpoints`, `prefix`), for high availability.
    Etcd,
}

/// `[storage]`: the event log's backend.
///
/// ```toml
/// [storage]
/// backend = "etcd"
/// endpoints = ["10.0.0.1:2379", "10.0.0.2:2379", "10.0.0.3:2379"]
/// prefix = "/fleetweft/prod"
/// lease_ttl_ms = 5000
/// # TLS (optional): the CA of the members' certificates, and this
/// # controller's client certificate when the members require one.
/// ca_file = "/etc/fleetweft/etcd-ca.pem"
/// cert_file = "/etc/fleetweft/etcd-client.pem"
/// key_file = "/etc/fleetweft/etcd-client-key.pem"
/// ```
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StorageSection {
    /// `"sled"` (default) or `"etcd"`.
    #[serde(default)]
    pub backend: StorageBackend,
    /// etcd client endpoints (etcd only).
    #[serde(default)]
    pub endpoints: Vec<String>,
    /// The log's key prefix, one per fleet (etcd only).
    #[serde(default)]
    pub prefix: Option<String>,
    /// Leadership lease TTL in ms, whole seconds, at least 1000 (etcd
    /// only; default `eventlog::LEASE_TTL_MS_DEFAULT`).
    #[serde(default)]
    pub lease_ttl_ms: Option<u64>,
    /// The API URL this controller advertises while it leads (standbys
    /// name it in their 503s and `leader` fields; etcd only; default
    /// `http://` + `api.listen`).
    #[serde(default)]
    pub advertise_api: Option<String>,
    /// The agents' address (HOST:PORT) this controller advertises while it
    /// leads (standbys answer an agent's hello with it; etcd only; default
    /// `listen`).
    #[serde(default)]
    pub advertise_agents: Option<String>,
    /// PEM CA certificate(s) of the members: turns TLS to etcd on (etcd
    /// only).
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// PEM client certificate for mutual TLS, with `key_file` (etcd only).
    #[serde(default)]
    pub cert_file: Option<PathBuf>,
    /// PEM private key of `cert_file` (etcd only).
    #[serde(default)]
    pub key_file: Option<PathBuf>,
    /// The members' `--quota-backend-bytes` (etcd only; default etcd's
    /// own default, [`ETCD_QUOTA_BYTES_DEFAULT`]): etcd 3.4 does not
    /// report it, and `/metrics`, `fleetweft status` and the dashboard
    /// compare the database's size with it (a warning at
    /// `api::view::storage::WARN_PERCENT`).
    #[serde(default)]
    pub quota_backend_bytes: Option<u64>,
}

/// etcd's own default `--quota-backend-bytes` (2 GiB).
pub const ETCD_QUOTA_BYTES_DEFAULT: u64 = 2 << 30;

/// Most `storage.quota_backend_bytes` accepted: etcd's documented
/// maximum (8 GiB).
pub const ETCD_QUOTA_BYTES_MAX: u64 = 8 << 30;

/// Least `storage.quota_backend_bytes` accepted (64 MiB): below it a
/// member refuses writes after a few snapshots.
pub const ETCD_QUOTA_BYTES_MIN: u64 = 64 << 20;

impl StorageSection {
    /// The etcd backend's configuration, `None` for sled. Valid once the
    /// config parsed (`ControllerConfig::parse` validates it).
    pub fn etcd_config(&self) -> Option<eventlog::EtcdConfig> {
        if self.backend != StorageBackend::Etcd {
            return None;
        }
        let mut config = eventlog::EtcdConfig::new(
            self.endpoints.clone(),
            self.prefix.clone().unwrap_or_default(),
        );
        if let Some(ttl) = self.lease_ttl_ms {
            config.lease_ttl_ms = ttl;
        }
        config.tls = self.ca_file.as_ref().map(|ca_file| eventlog::EtcdTls {
            ca_file: ca_file.clone(),
            cert_file: self.cert_file.clone(),
            key_file: self.key_file.clone(),
        });
        Some(config)
    }

    /// The etcd members' quota, `None` for sled (it has none).
    pub fn quota_bytes(&self) -> Option<u64> {
        (self.backend == StorageBackend::Etcd)
            .then(|| self.quota_backend_bytes.unwrap_or(ETCD_QUOTA_BYTES_DEFAULT))
    }

    /// Names the first unusable key.
    fn validate(&self) -> Result<(), String> {
        match self.backend {
            StorageBackend::Sled => {
                let stray = [
                    ("endpoints", !self.endpoints.is_empty()),
                    ("prefix", self.prefix.is_some()),
                    ("lease_ttl_ms", self.lease_ttl_ms.is_some()),
                    ("advertise_api", self.advertise_api.is_some()),
                    ("advertise_agents", self.advertise_agents.is_some()),
                    ("ca_file", self.ca_file.is_some()),
                    ("cert_file", self.cert_file.is_some()),
                    ("key_file", self.key_file.is_some()),
                    ("quota_backend_bytes", self.quota_backend_bytes.is_some()),
                ];
                match stray.iter().find(|(_, set)| *set) {
                    Some((key, _)) => Err(format!(
                        "key `storage.{key}`: only used with `backend = \"etcd\"` (the backend is sled)"
                    )),
                    None => Ok(()),
                }
            }
            StorageBackend::Etcd => {
                if self.endpoints.is_empty() {
                    return Err(
                        "key `storage.endpoints`: `backend = \"etcd\"` needs at least one endpoint"
                            .into(),
                    );
                }
                if self.prefix.is_none() {
                    return Err("key `storage.prefix`: `backend = \"etcd\"` needs the log's key prefix, e.g. \"/fleetweft/prod\"".into());
                }
                if self.ca_file.is_none() && (self.cert_file.is_some() || self.key_file.is_some()) {
                    return Err("key `storage.ca_file`: a client certificate (`cert_file`, `key_file`) is only used with TLS, which needs the members' CA in `ca_file`".into());
                }
                if let Some(quota) = self.quota_backend_bytes {
                    if !(ETCD_QUOTA_BYTES_MIN..=ETCD_QUOTA_BYTES_MAX).contains(&quota) {
                        return Err(format!(
                            "key `storage.quota_backend_bytes`: expected {ETCD_QUOTA_BYTES_MIN} to \
                             {ETCD_QUOTA_BYTES_MAX} (the members' --quota-backend-bytes), got {quota}"
                        ));
                    }
                }
                let config = self.etcd_config().ok_or("internal: no etcd config")?;
                config
                    .validate()
                    .map_err(|err| format!("section `storage`: {err}"))
            }
        }
    }
}

/// The least `verify.every_s`: a node is observed at most once per
/// `model::controller::OBSERVATION_INTERVAL_MIN_MS`.
pub const VERIFY_EVERY_S_MIN: u64 = model::controller::OBSERVATION_INTERVAL_MIN_MS / 1000;

/// Periodic re-verification: read back every connected node every
/// `every_s` seconds, spread over the interval, and record what was seen
/// (`NodeObserved`), so drift shows without anyone asking.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VerifySection {
    /// Seconds between two readbacks of one node; 0 (the default) is off.
    #[serde(default)]
    pub every_s: u64,
}

/// One node of the fleet.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeEntry {
    /// The node id (the SAN of its certificate).
    pub name: String,
    /// The node's public route, probed by the controller.
    pub public: SocketAddr,
    /// Its labels at enrollment (`fleetweft node label` changes them).
    #[serde(default)]
    pub labels: model::controller::Labels,
}

/// TLS files.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsSection {
    /// Fleet CA certificate.
    pub ca: PathBuf,
    /// Controller certificate.
    pub cert: PathBuf,
    /// Controller private key.
    pub key: PathBuf,
    /// The operator token file (Bearer token for writes).
    pub operator_token: PathBuf,
    /// The fleet's configuration key (issue #24 item 1: secrets are sealed
    /// with it before they reach the log); default `config-key` beside the
    /// operator token, where `fleetweft pki init` writes it. Every
    /// controller of a fleet needs the same one. Without it, configuration
    /// without secrets still works and a secret is refused.
    #[serde(default)]
    pub config_key: Option<PathBuf>,
}

impl TlsSection {
    /// Where the configuration key is read from.
    pub fn config_key_path(&self) -> PathBuf {
        self.config_key.clone().unwrap_or_else(|| {
            self.operator_token
                .with_file_name(protocol::pki::CONFIG_KEY_FILE)
        })
    }
}

/// Bundle verification.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BundleSection {
    /// Ed25519 public key (PEM).
    pub pubkey: PathBuf,
}

/// The HTTP API.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiSection {
    /// Where the API listens; loopback by default.
    #[serde(default = "default_api")]
    pub listen: SocketAddr,
    /// Events buffered for each follower of the event stream (SSE readers,
    /// webhooks); a reader further behind is dropped with a reason and
    /// resumes from the log with `Last-Event-ID`. 1 to
    /// [`STREAM_BUFFER_EVENTS_MAX`], default [`STREAM_BUFFER_EVENTS_DEFAULT`].
    #[serde(default = "default_stream_buffer")]
    pub stream_buffer_events: usize,
}

/// The default of `[api] stream_buffer_events`.
pub const STREAM_BUFFER_EVENTS_DEFAULT: usize = 1_024;
/// The most `[api] stream_buffer_events` may be (the buffer is shared by
/// every follower; each slot holds one event).
pub const STREAM_BUFFER_EVENTS_MAX: usize = 65_536;

fn default_stream_buffer() -> usize {
    STREAM_BUFFER_EVENTS_DEFAULT
}

/// Upper bound on `[[webhooks]]` entries (one delivery task each).
pub const WEBHOOKS_MAX: usize = 16;

/// `[[webhooks]]`: POST every durable event (or those of the kinds listed)
/// to `url`, signed with HMAC-SHA256 under the secret.
///
/// ```toml
/// [[webhooks]]
/// url = "http://127.0.0.1:9000/fleetweft"
/// events = ["rollout-completed", "rollout-paused"]   # optional, default all
/// secret_file = "/etc/fleetweft/webhook.secret"      # or secret = "..."
/// ```
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookEntry {
    /// Where deliveries go: `http://HOST:PORT/PATH`.
    pub url: String,
    /// Event kinds to deliver (`daemon::view::words::EVENT_KINDS`); empty
    /// or absent is every kind.
    #[serde(default)]
    pub events: Vec<String>,
    /// The signing secret, inline.
    #[serde(default)]
    pub secret: Option<String>,
    /// A file holding the signing secret (surrounding whitespace trimmed).
    #[serde(default)]
    pub secret_file: Option<PathBuf>,
}

impl WebhookEntry {
    /// Names the first unusable key of entry `i`.
    fn validate(&self, i: usize) -> Result<(), String> {
        let uri: axum::http::Uri = self
            .url
            .parse()
            .map_err(|e| format!("key `webhooks[{i}].url`: {:?} is not a URL: {e}", self.url))?;
        if uri.scheme_str() != Some("http") || uri.authority().is_none() {
            return Err(format!(
                "key `webhooks[{i}].url`: {:?} must be http://HOST:PORT/PATH (https is not supported yet: put a TLS proxy on loopback in front of the receiver)",
                self.url
            ));
        }
        for kind in &self.events {
            if !super::view::words::EVENT_KINDS.contains(&kind.as_str()) {
                return Err(format!(
                    "key `webhooks[{i}].events`: unknown event kind {kind:?} (one of: {})",
                    super::view::words::EVENT_KINDS.join(", ")
                ));
            }
        }
        match (&self.secret, &self.secret_file) {
            (Some(_), Some(_)) => Err(format!(
                "key `webhooks[{i}].secret`: give `secret` or `secret_file`, not both"
            )),
            (None, None) => Err(format!(
                "key `webhooks[{i}].secret`: every webhook needs `secret` or `secret_file`"
            )),
            (Some(secret), None) if secret.trim().is_empty() => {
                Err(format!("key `webhooks[{i}].secret`: empty"))
            }
            _ => Ok(()),
        }
    }
}

fn default_api() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 7800))
}

/// Deadlines; each field optional on its own (its [`Default`] value).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TimingSection {
    /// After this long without settling evidence an op becomes UNKNOWN
    /// (it keeps its slot).
    pub op_timeout_ms: u64,
}

impl Default for TimingSection {
    fn default() -> Self {
        TimingSection {
            op_timeout_ms: 30_000,
        }
    }
}

/// Fault injection for demos and tests.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultSection {
    /// Drop the first commit reply the controller sends for an op moving to
    /// this release (digest hex), after the decision is durable, as if the
    /// network lost it.
    #[serde(default)]
    pub drop_first_commit_reply_for: Option<String>,
    /// etcd only: once this file exists, the next snapshot write holds
    /// after its chunks are stored and before its manifest is written,
    /// logging `FAULT INJECTION: holding in the snapshot write covering N
    /// entries`, until the process is killed. Scenario 23 kills a leader
    /// there: without it that window lasts one etcd round trip.
    #[serde(default)]
    pub hold_in_snapshot_write: Option<PathBuf>,
}

/// Why a config could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{path}: cannot read: {source}")]
    Read {
        /// The config file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a valid configuration.
    #[error("{path}: {detail}")]
    Invalid {
        /// The config file.
        path: PathBuf,
        /// What was wrong, naming the key.
        detail: String,
    },
}

impl ControllerConfig {
    /// Read and validate `path`.
    pub fn load(path: &Path) -> Result<ControllerConfig, ConfigError> {
        let read = |source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        };
        let len = std::fs::metadata(path).map_err(read)?.len();
        if len > CONFIG_BYTES_MAX {
            return Err(ConfigError::Invalid {
                path: path.to_path_buf(),
                detail: format!("larger than {CONFIG_BYTES_MAX} bytes"),
            });
        }
        let text = std::fs::read_to_string(path).map_err(read)?;
        Self::parse(path, &text)
    }

    /// Parse config text; `path` only names the file in errors.
    pub fn parse(path: &Path, text: &str) -> Result<ControllerConfig, ConfigError> {
        let invalid = |detail: String| ConfigError::Invalid {
            path: path.to_path_buf(),
            detail,
        };
        let cfg: ControllerConfig = toml::from_str(text).map_err(|e| invalid(e.to_string()))?;
        if cfg.nodes.len() > model::plan::NODES_MAX {
            return Err(invalid(format!(
                "key `nodes`: {} nodes exceed the limit of {}",
                cfg.nodes.len(),
                model::plan::NODES_MAX
            )));
        }
        let mut seen = std::collections::BTreeSet::new();
        for (i, node) in cfg.nodes.iter().enumerate() {
            protocol::pki::validate_node_id(&node.name)
                .map_err(|e| invalid(format!("key `nodes[{i}].name`: {e}")))?;
            model::controller::roster::validate_labels(&node.labels)
                .map_err(|e| invalid(format!("key `nodes[{i}].labels`: {e}")))?;
            if let Some(why) = super::view::wire::unprobeable(&node.public) {
                return Err(invalid(format!(
                    "key `nodes[{i}].public`: {} {why}",
                    node.public
                )));
            }
            if !seen.insert(node.name.clone()) {
                return Err(invalid(format!(
                    "key `nodes[{i}].name`: {} appears twice",
                    node.name
                )));
            }
        }
        if cfg.verify.every_s != 0 && cfg.verify.every_s < VERIFY_EVERY_S_MIN {
            return Err(invalid(format!(
                "key `verify.every_s`: expected 0 (off) or at least {VERIFY_EVERY_S_MIN} (a node is observed at most once per {VERIFY_EVERY_S_MIN} s)"
            )));
        }
        cfg.storage.validate().map_err(invalid)?;
        cfg.artifacts.validate().map_err(invalid)?;
        cfg.log.validate().map_err(invalid)?;
        cfg.log
            .validate_archive_dir(&cfg.data_dir)
            .map_err(invalid)?;
        if !(1..=STREAM_BUFFER_EVENTS_MAX).contains(&cfg.api.stream_buffer_events) {
            return Err(invalid(format!(
                "key `api.stream_buffer_events`: expected 1 to {STREAM_BUFFER_EVENTS_MAX}"
            )));
        }
        if cfg.webhooks.len() > WEBHOOKS_MAX {
            return Err(invalid(format!(
                "key `webhooks`: {} entries exceed the limit of {WEBHOOKS_MAX}",
                cfg.webhooks.len()
            )));
        }
        for (i, hook) in cfg.webhooks.iter().enumerate() {
            hook.validate(i).map_err(invalid)?;
        }
        if cfg.timing.op_timeout_ms == 0 {
            return Err(invalid(
                "key `timing.op_timeout_ms`: expected more than 0".into(),
            ));
        }
        Ok(cfg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = r#"
data_dir = "/var/lib/fleetweft"
listen = "127.0.0.1:7700"
[tls]
ca = "ca.pem"
cert = "c.pem"
key = "c.key"
operator_token = "t"
[bundles]
pubkey = "b.pub"
[api]
"#;

    fn parse(extra: &str) -> Result<ControllerConfig, String> {
        ControllerConfig::parse(Path::new("controller.toml"), &format!("{BASE}{extra}"))
            .map_err(|err| err.to_string())
    }

    /// Optional sections are optional field by field: an empty `[timing]`,
    /// `[verify]` or `[faults]` takes each field's default.
    #[test]
    fn empty_optional_sections_take_the_defaults() {
        let cfg = parse("[timing]\n[verify]\n[faults]\n[storage]\n").expect("valid");
        assert_eq!(
            cfg.timing.op_timeout_ms,
            TimingSection::default().op_timeout_ms
        );
        assert_eq!(cfg.storage.backend, StorageBackend::Sled);
    }

    #[test]
    fn storage_defaults_to_sled() {
        let cfg = parse("").expect("valid");
        assert_eq!(cfg.storage.backend, StorageBackend::Sled);
        assert!(cfg.storage.etcd_config().is_none());
    }

    #[test]
    fn an_etcd_storage_section_parses() {
        let cfg = parse(
            "[storage]\nbackend = \"etcd\"\nendpoints = [\"127.0.0.1:2379\"]\nprefix = \"/fw/prod\"\nlease_ttl_ms = 3000\n",
        )
        .expect("valid");
        let etcd = cfg.storage.etcd_config().expect("etcd");
        assert_eq!(etcd.endpoints, vec!["127.0.0.1:2379".to_string()]);
        assert_eq!(etcd.prefix, "/fw/prod");
        assert_eq!(etcd.lease_ttl_ms, 3000);
    }

    #[test]
    fn an_unreachable_etcd_stops_the_daemon_naming_it() {
        let cfg = parse(
            "[storage]\nbackend = \"etcd\"\nendpoints = [\"127.0.0.1:1\"]\nprefix = \"/fw\"\n",
        )
        .expect("valid");
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("runtime");
        match runtime.block_on(crate::daemon::start(cfg, false)) {
            Ok(_) => panic!("the daemon started without its etcd"),
            Err(err) => {
                let text = format!("{err:#}");
                assert!(
                    text.contains("opening the event log on etcd 127.0.0.1:1 at /fw"),
                    "{text}"
                );
            }
        }
    }

    #[test]
    fn webhook_entries_parse_and_bad_ones_name_the_key() {
        let good = "[[webhooks]]\nurl = \"http://127.0.0.1:9/h\"\nsecret = \"s\"\nevents = [\"rollout-completed\"]\n";
        let cfg = parse(good).expect("valid");
        assert_eq!(
            cfg.webhooks[0].events,
            vec!["rollout-completed".to_string()]
        );
        let cases = [
            ("url = \"https://h:1/\"\nsecret = \"s\"", "webhooks[0].url"),
            ("url = \"not a url\"\nsecret = \"s\"", "webhooks[0].url"),
            ("url = \"http://h:1/\"", "webhooks[0].secret"),
            (
                "url = \"http://h:1/\"\nsecret = \" \"",
                "webhooks[0].secret",
            ),
            (
                "url = \"http://h:1/\"\nsecret = \"s\"\nsecret_file = \"f\"",
                "webhooks[0].secret",
            ),
            (
                "url = \"http://h:1/\"\nsecret = \"s\"\nevents = [\"rollout-done\"]",
                "webhooks[0].events",
            ),
            (
                "url = \"http://h:1/\"\nsecret = \"s\"\nsecrets = 1",
                "secrets",
            ),
        ];
        for (entry, key) in cases {
            let err = parse(&format!("[[webhooks]]\n{entry}\n")).expect_err(entry);
            assert!(err.contains(key), "{entry:?}: {err} should name {key}");
        }
        let err = parse("stream_buffer_events = 0\n").expect_err("zero buffer");
        assert!(err.contains("api.stream_buffer_events"), "{err}");
    }

    /// A bootstrap node whose public route no probe can reach (port 0, an
    /// unspecified address) stops the daemon naming the key.
    #[test]
    fn an_unprobeable_public_route_is_refused_naming_the_node() {
        let node = |public: &str| format!("[[nodes]]\nname = \"n1\"\npublic = \"{public}\"\n");
        parse(&node("10.0.0.5:8080")).expect("probeable");
        for public in ["10.0.0.5:0", "0.0.0.0:8080", "[::]:8080"] {
            let err = parse(&node(public)).expect_err(public);
            assert!(err.contains("nodes[0].public"), "{public}: {err}");
        }
    }

    #[test]
    fn storage_tls_keys_reach_the_etcd_config() {
        let section = StorageSection {
            backend: StorageBackend::Etcd,
            endpoints: vec!["h:1".into()],
            prefix: Some("/p".into()),
            ca_file: Some("/etc/ca.pem".into()),
            cert_file: Some("/etc/c.pem".into()),
            key_file: Some("/etc/k.pem".into()),
            ..StorageSection::default()
        };
        let tls = section.etcd_config().expect("etcd").tls.expect("tls");
        assert_eq!(tls.ca_file, PathBuf::from("/etc/ca.pem"));
        assert_eq!(tls.cert_file, Some(PathBuf::from("/etc/c.pem")));
        assert_eq!(tls.key_file, Some(PathBuf::from("/etc/k.pem")));
        let plain = StorageSection {
            ca_file: None,
            ..section
        };
        assert!(plain.etcd_config().expect("etcd").tls.is_none());
    }

    #[test]
    fn the_archive_keys_parse_and_bad_ones_name_the_key() {
        let cfg = parse("[log]\narchive_dir = \"/var/lib/fleetweft-archive\"\nkeep_events = 64\nkeep_days = 0\n")
            .expect("valid");
        assert_eq!(
            cfg.log.archive_dir,
            Some(PathBuf::from("/var/lib/fleetweft-archive"))
        );
        assert_eq!((cfg.log.keep_events, cfg.log.keep_days), (64, 0));
        let defaults = parse("").expect("valid");
        assert_eq!(defaults.log.archive_dir, None);
        assert_eq!(defaults.log.keep_events, KEEP_EVENTS_DEFAULT);
        assert_eq!(defaults.log.keep_days, KEEP_DAYS_DEFAULT);
        let cases = [
            ("keep_events = 1000000001", "log.keep_events"),
            ("keep_days = 3651", "log.keep_days"),
            ("keep_days = -1", "keep_days"),
            ("archive_dir = \"\"", "log.archive_dir"),
            ("archive_dir = \"/var/lib/fleetweft\"", "log.archive_dir"),
            (
                "archive_dir = \"/var/lib/fleetweft/log/a\"",
                "log.archive_dir",
            ),
            (
                "archive_dir = \"/a\"\nsnapshot_every_events = 0\nsnapshot_every_s = 0",
                "log.archive_dir",
            ),
        ];
        for (section, key) in cases {
            let err = parse(&format!("[log]\n{section}\n")).expect_err(section);
            assert!(err.contains(key), "{section:?}: {err} should name {key}");
        }
    }

    #[test]
    fn bad_storage_sections_name_the_key() {
        let cases = [
            ("backend = \"zookeeper\"", "backend"),
            ("backend = \"etcd\"\nprefix = \"/p\"", "storage.endpoints"),
            (
                "backend = \"etcd\"\nendpoints = [\"h:1\"]",
                "storage.prefix",
            ),
            (
                "backend = \"etcd\"\nendpoints = [\"h:1\"]\nprefix = \"p\"",
                "prefix",
            ),
            (
                "backend = \"etcd\"\nendpoints = [\"h:1\"]\nprefix = \"/p\"\nlease_ttl_ms = 10",
                "lease_ttl_ms",
            ),
            ("endpoints = [\"h:1\"]", "storage.endpoints"),
            ("lease_ttl_ms = 2000", "storage.lease_ttl_ms"),
            ("quota_backend_bytes = 2147483648", "storage.quota_backend_bytes"),
            (
                "backend = \"etcd\"\nendpoints = [\"h:1\"]\nprefix = \"/p\"\nquota_backend_bytes = 1024",
                "storage.quota_backend_bytes",
            ),
            ("backend = \"etcd\"\ntls = true", "tls"),
            ("ca_file = \"/ca.pem\"", "storage.ca_file"),
            ("key_file = \"/k.pem\"", "storage.key_file"),
            (
                "backend = \"etcd\"\nendpoints = [\"h:1\"]\nprefix = \"/p\"\ncert_file = \"/c.pem\"\nkey_file = \"/k.pem\"",
                "storage.ca_file",
            ),
            (
                "backend = \"etcd\"\nendpoints = [\"h:1\"]\nprefix = \"/p\"\nca_file = \"/nonexistent/ca.pem\"",
                "ca_file",
            ),
            (
                "backend = \"etcd\"\nendpoints = [\"h:1\"]\nprefix = \"/p\"\nca_file = \"/nonexistent/ca.pem\"\ncert_file = \"/c.pem\"",
                "key_file",
            ),
            (
                "backend = \"etcd\"\nendpoints = [\"https://h:1\"]\nprefix = \"/p\"",
                "ca_file",
            ),
        ];
        for (section, key) in cases {
            let err = parse(&format!("[storage]\n{section}\n")).expect_err(section);
            assert!(err.contains(key), "{section:?}: {err} should name {key}");
        }
    }
}
