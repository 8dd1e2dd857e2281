//! `controller.toml`. A bad config names the file, the key and what was
//! expected.

use serde::Deserialize;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// Upper bound on the config file size.
pub const CONFIG_BYTES_MAX: u64 = 8 * 1024 * 1024;

/// The whole controller configuration.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ControllerConfig {
    /// Where the event log and accepted bundles live.
    pub data_dir: PathBuf,
    /// The QUIC address agents connect to.
    pub listen: SocketAddr,
    /// The fleet, in order: a node's position is its id in the event log,
    /// so append new nodes at the end and never reorder.
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
}

fn default_api() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 7800))
}

/// Deadlines.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
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
        if cfg.nodes.is_empty() {
            return Err(invalid(
                "key `nodes`: expected at least one [[nodes]] entry".into(),
            ));
        }
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
        if cfg.timing.op_timeout_ms == 0 {
            return Err(invalid(
                "key `timing.op_timeout_ms`: expected more than 0".into(),
            ));
        }
        Ok(cfg)
    }

    /// The node id of a name, if it is in the fleet.
    pub fn node_id(&self, name: &str) -> Option<model::NodeId> {
        self.nodes
            .iter()
            .position(|n| n.name == name)
            .map(|i| model::NodeId(i as u32))
    }

    /// The name of a node id.
    pub fn node_name(&self, node: model::NodeId) -> String {
        self.nodes
            .get(node.0 as usize)
            .map_or_else(|| node.to_string(), |n| n.name.clone())
    }
}
