//! `agent.toml`. A bad config names the file, the key and what was expected.

use serde::Deserialize;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// Upper bound on the config file size.
pub const CONFIG_BYTES_MAX: u64 = 64 * 1024;

/// The whole agent configuration.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    /// This node's id; must match the SAN of `tls.cert`.
    pub node: String,
    /// Where the journal and installed releases live.
    pub data_dir: PathBuf,
    /// The public port users (and probes) reach the app on.
    pub public_port: u16,
    /// The address the public route binds: loopback by default; `0.0.0.0`
    /// when the controller probes the route from another host (the agent's
    /// own probes always go through 127.0.0.1, so a specific non-loopback
    /// address is refused).
    #[serde(default = "default_public_ip")]
    pub public_ip: std::net::IpAddr,
    pub controller: ControllerSection,
    pub tls: TlsSection,
    pub bundles: BundleSection,
    #[serde(default)]
    pub timing: TimingSection,
    /// The disk budget of staged releases.
    #[serde(default)]
    pub storage: StorageSection,
    /// How releases' limits are applied (issue #24 item 4).
    #[serde(default)]
    pub isolation: IsolationSection,
    /// Honoured only when the agent runs with `--allow-fault-injection`.
    #[serde(default)]
    pub faults: FaultSection,
    /// What the agent says it runs on (issue #24 item 5): this machine's
    /// architecture and system unless `--arch` / `--os` declare others
    /// (to simulate a mixed fleet on one machine). Not read from the file.
    #[serde(skip, default = "model::platform::Platform::current")]
    pub platform: model::platform::Platform,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ControllerSection {
    /// The controller's QUIC address (one controller).
    #[serde(default)]
    pub addr: Option<SocketAddr>,
    /// Every controller's QUIC address, when several run for high
    /// availability (issue #14): the agent connects to one and moves to the
    /// next when it cannot reach it or its session ends. At most
    /// [`CONTROLLER_ADDRS_MAX`]; give `addr` or `addrs`, not both.
    #[serde(default)]
    pub addrs: Vec<SocketAddr>,
    /// The name on the controller's certificate.
    #[serde(default = "default_server_name")]
    pub server_name: String,
}

/// Most controller addresses an agent config lists: an etcd-backed fleet
/// runs 3 or 5 controllers; 7 leaves room for a move between hosts.
pub const CONTROLLER_ADDRS_MAX: usize = 7;

impl ControllerSection {
    /// The addresses to try, in order: `addr`, or `addrs`.
    pub fn addresses(&self) -> Vec<SocketAddr> {
        match self.addr {
            Some(addr) => vec![addr],
            None => self.addrs.clone(),
        }
    }

    fn validate(&self) -> Result<(), String> {
        match (self.addr, self.addrs.len()) {
            (Some(_), n) if n > 0 => {
                Err("section [controller]: give `addr` or `addrs`, not both".into())
            }
            (None, 0) => Err("section [controller]: missing `addr` (or `addrs`)".into()),
            (_, n) if n > CONTROLLER_ADDRS_MAX => Err(format!(
                "key `controller.addrs`: {n} addresses, at most {CONTROLLER_ADDRS_MAX}"
            )),
            _ => {
                let mut seen = std::collections::BTreeSet::new();
                match self.addrs.iter().find(|a| !seen.insert(**a)) {
                    Some(twice) => Err(format!("key `controller.addrs`: {twice} is listed twice")),
                    None => Ok(()),
                }
            }
        }
    }
}

fn default_public_ip() -> std::net::IpAddr {
    std::net::IpAddr::from([127, 0, 0, 1])
}

fn default_server_name() -> String {
    "localhost".to_string()
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsSection {
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BundleSection {
    /// The Ed25519 public key bundles must be signed with.
    pub pubkey: PathBuf,
}

/// `[isolation]`: how a release's limits are applied
/// (`crate::isolation`, issue #24 item 4).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct IsolationSection {
    /// Use the cgroups this agent may write (v2, else v1) for memory, CPU
    /// and processes; `false`: rlimits only (a node whose cgroups another
    /// manager owns). Either way the proof says what was applied.
    pub cgroups: bool,
}

impl Default for IsolationSection {
    fn default() -> Self {
        IsolationSection { cgroups: true }
    }
}

/// `[storage]`: how much disk staged releases may take
/// (`crate::staging::disk`, issue #23 item 6).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StorageSection {
    /// Bytes the releases under `DATA/releases` and their chunks in
    /// `DATA/chunks` may take together, chunks shared by releases counted
    /// once. The releases in use and the previous one are kept whatever
    /// it says; a release that does not fit beside them is refused
    /// (`no_space`).
    pub max_bytes: u64,
}

impl Default for StorageSection {
    fn default() -> Self {
        StorageSection {
            max_bytes: crate::staging::disk::STORAGE_BYTES_MAX_DEFAULT,
        }
    }
}

/// Every field is optional on its own: a missing one takes its
/// [`Default`] value (`[timing]` with only `retry_ms` is valid).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TimingSection {
    /// How often outstanding work (a commit request, a report) is re-sent.
    pub retry_ms: u64,
    /// Reconnect backoff bounds.
    pub backoff_base_ms: u64,
    pub backoff_max_ms: u64,
    /// How long one dial of a controller (QUIC + TLS handshake, control
    /// stream) may take before that address counts as down for the round,
    /// at least: longer on a link measured slow, and doubled while that
    /// address keeps timing out (`liveness::dial_timeout`); see
    /// [`CONTROLLER_HANDSHAKE_TIMEOUT_MS`].
    pub handshake_timeout_ms: u64,
}

/// Default of `[timing] handshake_timeout_ms`. A handshake is one or two
/// round trips, a few ms on a LAN: half a second covers round trips up to
/// about 250 ms, yet a dead or black-holed controller (QUIC sends nothing
/// back) holds the search for the leader at most that long, not the 10 s
/// idle timeout. A slower or lossy link needs no setting: the agent
/// raises the bound itself, to four round trips of the link as last
/// measured, and doubles it for each dial of an address in a row that
/// timed out, up to 10 s (`liveness::dial_timeout`; scenario 13).
pub const CONTROLLER_HANDSHAKE_TIMEOUT_MS: u64 = 500;

impl Default for TimingSection {
    fn default() -> Self {
        TimingSection {
            retry_ms: 1_000,
            backoff_base_ms: 200,
            backoff_max_ms: 5_000,
            handshake_timeout_ms: CONTROLLER_HANDSHAKE_TIMEOUT_MS,
        }
    }
}

/// Fault injection for demos and tests. Ignored (with a warning) unless the
/// agent was started with `--allow-fault-injection`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultSection {
    /// Release digests (hex) whose app is started with
    /// `HELLO_ANSWER_WRONGLY=1`: healthy process, wrong answer.
    #[serde(default)]
    pub answer_wrongly: Vec<String>,
    /// Release digests (hex) whose app is started with
    /// `HELLO_CRASH_ON_START=1`: the process exits at once, every time, so
    /// the supervisor ends in a restart loop.
    #[serde(default)]
    pub crash_on_start: Vec<String>,
    /// Stop, once per agent process, at this point of an op for `hold_ms`,
    /// logging `FAULT INJECTION: holding at <point>` first: lets a test
    /// SIGKILL the agent inside a given stage.
    #[serde(default)]
    pub hold_at: Option<HoldPoint>,
    /// How long a hold lasts.
    #[serde(default = "default_hold_ms")]
    pub hold_ms: u64,
}

fn default_hold_ms() -> u64 {
    30_000
}

impl FaultSection {
    /// Whether any fault is configured.
    pub fn any(&self) -> bool {
        !self.answer_wrongly.is_empty() || !self.crash_on_start.is_empty() || self.hold_at.is_some()
    }
}

/// Where a held agent stops (see [`FaultSection::hold_at`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HoldPoint {
    /// After the fetch checkpoint is journaled, before the bundle is fetched.
    Fetch,
    /// After the fetch is recorded done, before verification and install.
    Verify,
    /// After the release is installed on disk, before the stage is recorded done.
    Stage,
    /// After the switch is journaled, before the route is switched.
    Switch,
    /// After the route is switched to the new release, before its probe.
    Probe,
    /// After a restore is journaled and the baseline started, before its probe.
    RestoreProbe,
}

impl std::fmt::Display for HoldPoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = match self {
            HoldPoint::Fetch => "fetch",
            HoldPoint::Verify => "verify",
            HoldPoint::Stage => "stage",
            HoldPoint::Switch => "switch",
            HoldPoint::Probe => "probe",
            HoldPoint::RestoreProbe => "restore-probe",
        };
        f.write_str(name)
    }
}

/// Why a config could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{path}: cannot read: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: larger than {CONFIG_BYTES_MAX} bytes")]
    TooLarge { path: PathBuf },
    #[error("{path}: {detail}")]
    Invalid { path: PathBuf, detail: String },
}

impl AgentConfig {
    /// Read and validate `path`.
    pub fn load(path: &Path) -> Result<AgentConfig, ConfigError> {
        let meta = std::fs::metadata(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        if meta.len() > CONFIG_BYTES_MAX {
            return Err(ConfigError::TooLarge {
                path: path.to_path_buf(),
            });
        }
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(path, &text)
    }

    /// Parse config text; `path` only names the file in errors.
    pub fn parse(path: &Path, text: &str) -> Result<AgentConfig, ConfigError> {
        let invalid = |detail: String| ConfigError::Invalid {
            path: path.to_path_buf(),
            detail,
        };
        // toml's message names the key, the line and what was expected.
        let cfg: AgentConfig = toml::from_str(text).map_err(|e| invalid(e.to_string()))?;
        protocol::pki::validate_node_id(&cfg.node)
            .map_err(|e| invalid(format!("key `node`: {e}")))?;
        if cfg.public_port == 0 {
            return Err(invalid(
                "key `public_port`: expected a port 1..=65535, got 0".into(),
            ));
        }
        if !cfg.public_ip.is_loopback() && !cfg.public_ip.is_unspecified() {
            return Err(invalid(format!(
                "key `public_ip`: expected a loopback address or 0.0.0.0, got {} (the agent probes its own route on 127.0.0.1)",
                cfg.public_ip
            )));
        }
        cfg.controller.validate().map_err(invalid)?;
        if cfg.timing.retry_ms == 0
            || cfg.timing.backoff_base_ms == 0
            || cfg.timing.handshake_timeout_ms == 0
        {
            return Err(invalid(
                "section [timing]: intervals must be above 0 ms".into(),
            ));
        }
        if cfg.storage.max_bytes == 0 {
            return Err(invalid(
                "key `storage.max_bytes`: expected a budget above 0 bytes, got 0".into(),
            ));
        }
        Ok(cfg)
    }
}

/// Checks the configured TLS identity (see
/// [`protocol::identity::check_identity`]): key matches certificate, the
/// certificate names `node`, is signed by `tls.ca` and is valid now.
pub fn check_identity(
    cfg: &AgentConfig,
) -> Result<protocol::identity::NodeIdentity, protocol::identity::IdentityError> {
    protocol::identity::check_identity(&cfg.tls.ca, &cfg.tls.cert, &cfg.tls.key, &cfg.node)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
node = "node-a"
data_dir = "/tmp/a"
public_port = 8101
[controller]
addr = "127.0.0.1:7700"
[tls]
ca = "ca.pem"
cert = "nodes/node-a.pem"
key = "nodes/node-a-key.pem"
[bundles]
pubkey = "bundle-signing.pub"
"#;

    #[test]
    fn a_good_config_parses() {
        let cfg = AgentConfig::parse(Path::new("agent.toml"), GOOD).expect("valid");
        assert_eq!(cfg.node, "node-a");
        assert_eq!(cfg.timing.retry_ms, 1_000);
    }

    /// An optional section is optional field by field: the fields not
    /// given keep their defaults (this was refused with "missing field
    /// `backoff_base_ms`").
    #[test]
    fn a_partial_timing_section_keeps_the_other_defaults() {
        let text = format!("{GOOD}[timing]\nretry_ms = 250\n");
        let cfg = AgentConfig::parse(Path::new("agent.toml"), &text).expect("valid");
        assert_eq!(cfg.timing.retry_ms, 250);
        assert_eq!(
            cfg.timing.backoff_base_ms,
            TimingSection::default().backoff_base_ms
        );
        assert_eq!(
            cfg.timing.backoff_max_ms,
            TimingSection::default().backoff_max_ms
        );
    }

    #[test]
    fn the_storage_budget_defaults_and_refuses_zero() {
        let cfg = AgentConfig::parse(Path::new("agent.toml"), GOOD).expect("valid");
        assert_eq!(
            cfg.storage.max_bytes,
            crate::staging::disk::STORAGE_BYTES_MAX_DEFAULT
        );
        let text = format!("{GOOD}[storage]\nmax_bytes = 1073741824\n");
        let cfg = AgentConfig::parse(Path::new("agent.toml"), &text).expect("valid");
        assert_eq!(cfg.storage.max_bytes, 1 << 30);
        let text = format!("{GOOD}[storage]\nmax_bytes = 0\n");
        let err = AgentConfig::parse(Path::new("agent.toml"), &text)
            .expect_err("a zero budget")
            .to_string();
        assert!(err.contains("storage.max_bytes"), "{err}");
    }

    #[test]
    fn several_controllers_are_tried_in_order_and_one_form_is_required() {
        let one = AgentConfig::parse(Path::new("agent.toml"), GOOD).expect("valid");
        assert_eq!(
            one.controller.addresses(),
            vec!["127.0.0.1:7700".parse().unwrap()]
        );
        let three = GOOD.replace(
            "addr = \"127.0.0.1:7700\"",
            "addrs = [\"127.0.0.1:7700\", \"127.0.0.2:7700\", \"127.0.0.3:7700\"]",
        );
        let cfg = AgentConfig::parse(Path::new("agent.toml"), &three).expect("valid");
        let addrs: Vec<String> = cfg
            .controller
            .addresses()
            .iter()
            .map(|a| a.to_string())
            .collect();
        assert_eq!(
            addrs,
            ["127.0.0.1:7700", "127.0.0.2:7700", "127.0.0.3:7700"]
        );
        let cases = [
            (
                GOOD.replace("addr = \"127.0.0.1:7700\"", ""),
                "missing `addr` (or `addrs`)",
            ),
            (
                GOOD.replace(
                    "addr = \"127.0.0.1:7700\"",
                    "addr = \"127.0.0.1:7700\"\naddrs = [\"127.0.0.2:7700\"]",
                ),
                "not both",
            ),
            (
                GOOD.replace(
                    "addr = \"127.0.0.1:7700\"",
                    "addrs = [\"127.0.0.2:7700\", \"127.0.0.2:7700\"]",
                ),
                "127.0.0.2:7700 is listed twice",
            ),
            (
                GOOD.replace(
                    "addr = \"127.0.0.1:7700\"",
                    &format!(
                        "addrs = [{}]",
                        (1..=CONTROLLER_ADDRS_MAX + 1)
                            .map(|i| format!("\"127.0.0.{i}:7700\""))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ),
                "8 addresses, at most 7",
            ),
        ];
        for (text, expected) in cases {
            let err = AgentConfig::parse(Path::new("agent.toml"), &text)
                .expect_err("invalid")
                .to_string();
            assert!(err.contains(expected), "{expected}: {err}");
        }
    }

    #[test]
    fn errors_name_the_file_and_the_key() {
        let bad = GOOD.replace("public_port = 8101", "public_port = \"x\"");
        let err = AgentConfig::parse(Path::new("agent.toml"), &bad).expect_err("invalid");
        let text = err.to_string();
        assert!(
            text.contains("agent.toml") && text.contains("public_port"),
            "{text}"
        );

        let bad = GOOD.replace("node = \"node-a\"", "node = \"Node A\"");
        let text = AgentConfig::parse(Path::new("agent.toml"), &bad)
            .expect_err("invalid")
            .to_string();
        assert!(text.contains("`node`"), "{text}");

        let bad = format!("{GOOD}\nsurprise = 1\n");
        let text = AgentConfig::parse(Path::new("agent.toml"), &bad)
            .expect_err("invalid")
            .to_string();
        assert!(text.contains("surprise"), "{text}");
    }
}
