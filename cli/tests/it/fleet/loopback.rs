//! The real-process half of the test kit (issue #22 item 5): a fleet of
//! the demo's nodes ([`NODES`]) on loopback, its files written by the
//! quickstart's builder (`demo::quickstart::FleetLayout`: PKI, keys,
//! `controller.toml`, agent configs, as a new user gets them), and its
//! processes started, logged, killed and reaped here. One builder for
//! every test that runs real agents: the controller as a child process
//! ([`Loopback::start_controller`]) or in the test's runtime
//! ([`Loopback::start_controller_here`]), agents with extra arguments or
//! edited configs, HA fleets laying out their own controllers on it.

use std::collections::HashMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use api::client::{ApiClient, FleetView};
use controller::daemon::config::ControllerConfig;
use demo::NODES;
use protocol::pki::FleetPki;
use tokio::process::Child;

use crate::binaries::{agent_binary, fleetweft};

/// How often a wait polls.
const POLL_MS: u64 = 100;
/// How long [`Loopback::start_controller`] waits for the API, in seconds.
const CONTROLLER_UP_S: u64 = 60;

/// How a process's log files are named under `logs/`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogNames {
    /// `<name>.log`, written over by a restart.
    Plain,
    /// `<name>.<n>.log` for its n-th start (1-based), every start kept.
    PerStart,
}

/// A loopback fleet: its files, its ports, and the processes it started.
pub struct Loopback {
    /// The fleet's directory (configs, `pki/`, `keys/`, data, `logs/`).
    pub dir: PathBuf,
    pub pki: FleetPki,
    /// The operator token.
    pub token: String,
    /// The bundle-signing key (saved in `keys/` too).
    pub signing: ed25519_dalek::SigningKey,
    pub quic_port: u16,
    pub api_port: u16,
    /// Each node's public route port, in [`NODES`] order.
    pub public_ports: Vec<u16>,
    /// The API's base URL, for the CLI.
    pub api_url: String,
    /// The operator's API client.
    pub api: ApiClient,
    /// Running children by name.
    pub children: HashMap<String, Child>,
    /// How many times each name was started.
    pub starts: HashMap<String, u32>,
    log_names: LogNames,
    /// Removed on drop unless the test failed (its logs kept for a
    /// post-mortem).
    removed_on_drop: Option<PathBuf>,
}

impl Drop for Loopback {
    fn drop(&mut self) {
        for child in self.children.values_mut() {
            let _ = child.start_kill();
        }
        if !std::thread::panicking() {
            if let Some(dir) = &self.removed_on_drop {
                let _ = std::fs::remove_dir_all(dir);
            }
        }
    }
}

impl Loopback {
    /// Lays out a fleet of [`NODES`] in `dir` on free ports: PKI, the
    /// bundle-signing keys, `controller.toml` with `extra_controller_toml`
    /// appended, `logs/`. Nothing runs yet.
    pub fn lay_out(dir: PathBuf, extra_controller_toml: &str) -> Loopback {
        std::fs::create_dir_all(dir.join("logs")).expect("logs dir");
        let port = || demo::ports::free_port().expect("free port");
        let (quic_port, api_port) = (port(), port());
        let public_ports: Vec<u16> = NODES.iter().map(|_| port()).collect();
        let layout = demo::layout_of(&dir, quic_port, api_port, &public_ports);
        let (pki, signing) = layout.write_pki_and_keys().expect("pki and keys");
        let token = protocol::pki::load_operator_token(&pki.operator_token()).expect("token");
        layout
            .write_controller_config(&pki, None)
            .expect("controller config");
        if !extra_controller_toml.is_empty() {
            let config = layout.controller_config();
            let text = std::fs::read_to_string(&config).expect("controller config");
            std::fs::write(&config, format!("{text}\n{extra_controller_toml}"))
                .expect("extend the config");
        }
        let api_url = layout.api_url();
        Loopback {
            dir,
            pki,
            api: ApiClient::new(api_url.clone(), Some(token.clone())),
            token,
            signing,
            quic_port,
            api_port,
            public_ports,
            api_url,
            children: HashMap::new(),
            starts: HashMap::new(),
            log_names: LogNames::Plain,
            removed_on_drop: None,
        }
    }

    /// A fleet in `fleet/` of a new temporary directory, which is removed
    /// when the fleet is dropped after a passing test; logs per start.
    pub fn in_temp_dir(extra_controller_toml: &str) -> Loopback {
        let parent = tempfile::tempdir().expect("temp dir").keep();
        let mut fleet = Loopback::lay_out(parent.join("fleet"), extra_controller_toml);
        fleet.log_names = LogNames::PerStart;
        fleet.removed_on_drop = Some(parent);
        fleet
    }

    /// How the processes' logs are named from now on.
    pub fn log_names(mut self, names: LogNames) -> Loopback {
        self.log_names = names;
        self
    }

    /// The log file of `name`'s `n`-th start.
    pub fn log_path(&self, name: &str, n: u32) -> PathBuf {
        match self.log_names {
            LogNames::Plain => self.dir.join(format!("logs/{name}.log")),
            LogNames::PerStart => self.dir.join(format!("logs/{name}.{n}.log")),
        }
    }

    /// Every log file of `name` (one per start), concatenated.
    pub fn logs(&self, name: &str) -> String {
        (1..=self.starts.get(name).copied().unwrap_or(0))
            .map(|n| std::fs::read_to_string(self.log_path(name, n)).unwrap_or_default())
            .collect()
    }

    /// The log of `name`'s latest start only.
    pub fn last_log(&self, name: &str) -> String {
        let n = self.starts.get(name).copied().unwrap_or(0);
        std::fs::read_to_string(self.log_path(name, n)).unwrap_or_default()
    }

    /// Starts `exe` with `args` as `name`, its output to its log.
    pub fn spawn(&mut self, name: &str, exe: &Path, args: &[String]) {
        let n = self.starts.entry(name.to_string()).or_insert(0);
        *n += 1;
        let n = *n;
        let log = self.log_path(name, n);
        let child = demo::spawn(exe, args, &log).expect("spawn");
        assert!(
            self.children.insert(name.to_string(), child).is_none(),
            "{name} is already running"
        );
    }

    /// SIGKILLs `name` and reaps it.
    pub async fn kill(&mut self, name: &str) {
        let mut child = self.children.remove(name).expect("a running child");
        child.start_kill().expect("kill");
        child.wait().await.expect("reap");
    }

    /// `fleetweft controller` as the child `controller`, once its API
    /// answers.
    pub async fn start_controller(&mut self) {
        let config = self.dir.join("controller.toml").display().to_string();
        self.spawn(
            "controller",
            &fleetweft(),
            &["controller".into(), "--config".into(), config],
        );
        let api = self.api.clone();
        poll(
            "the controller's API answers",
            Duration::from_secs(CONTROLLER_UP_S),
            || async {
                api.get::<controller::daemon::api::StatusDto>("/api/status")
                    .await
                    .is_ok()
            },
        )
        .await;
    }

    /// The controller in the test's runtime (its log in
    /// `logs/controller.log`); the runtime must be shut down before the
    /// directory is removed, so it never writes into a removed log.
    pub async fn start_controller_here(&self) -> controller::daemon::core::CoreHandle {
        let log =
            std::fs::File::create(self.dir.join("logs/controller.log")).expect("controller log");
        let _ = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(std::sync::Mutex::new(log))
            .try_init();
        let cfg = ControllerConfig::load(&self.dir.join("controller.toml")).expect("load config");
        let daemon = controller::daemon::start(cfg, false)
            .await
            .expect("start the controller");
        let core = daemon.core.clone();
        tokio::spawn(daemon.serve());
        core
    }

    /// Writes `node`'s agent config (the fleet's defaults) and returns it.
    pub fn agent_config(&self, node: &str) -> PathBuf {
        let i = NODES.iter().position(|n| *n == node).expect("a fleet node");
        demo::write_agent_config(
            &self.dir,
            &self.pki,
            node,
            self.quic_port,
            self.public_ports[i],
            None,
        )
        .expect("agent config")
    }

    /// Starts `name`'s agent on `config` with `extra` arguments.
    pub fn spawn_agent(&mut self, name: &str, config: &Path, extra: &[&str]) {
        let mut args = vec!["--config".to_string(), config.display().to_string()];
        args.extend(extra.iter().map(|a| a.to_string()));
        self.spawn(name, &agent_binary(), &args);
    }

    /// Starts `node`'s agent on the fleet's default config, with `extra`
    /// arguments (such as `--arch aarch64`).
    pub fn start_agent(&mut self, node: &str, extra: &[&str]) {
        let config = self.agent_config(node);
        self.spawn_agent(node, &config, extra);
    }

    /// Polls the fleet view until `done` holds, within `step`.
    pub async fn wait_view(
        &self,
        what: &str,
        step: Duration,
        done: impl Fn(&FleetView) -> bool,
    ) -> FleetView {
        let deadline = Instant::now() + step;
        loop {
            if let Ok(s) = self.api.fleet_view().await {
                if done(&s) {
                    return s;
                }
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for: {what} (logs in {})",
                self.dir.join("logs").display()
            );
            tokio::time::sleep(Duration::from_millis(POLL_MS)).await;
        }
    }
}

/// Polls `check` until it holds, within `step`.
pub async fn poll<F: Future<Output = bool>>(what: &str, step: Duration, check: impl Fn() -> F) {
    let deadline = Instant::now() + step;
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(POLL_MS)).await;
    }
}
