//! The bench's fleet: a real controller (`fleetweft controller`) and real
//! agents (`fleetweft-agent`), each its own process on loopback, written
//! and started with the demo's helpers (`demo::quickstart::FleetLayout`,
//! `demo::spawn`), so their memory can be read from `/proc`.

use anyhow::{bail, Context};
use api::client::{ApiClient, FleetView};
use demo::quickstart::FleetLayout;
use model::Digest;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio::process::Child;

/// How long the controller's ops may go without settling evidence, in
/// milliseconds: the loopback default (15 s) is shorter than staging a
/// release of several GiB on two shared cores.
const OP_TIMEOUT_MS: u64 = 30 * 60 * 1000;
/// How often the API is polled while waiting, in milliseconds.
const POLL_MS: u64 = 100;

/// The running fleet.
pub struct Fleet {
    /// Where its files are.
    pub layout: FleetLayout,
    /// The operator's API client.
    pub api: ApiClient,
    /// The release signing key.
    pub signing_key: PathBuf,
    controller: Child,
    /// Agent processes by node index; `None` while stopped.
    agents: Vec<Option<Child>>,
    agent_exe: PathBuf,
    /// Times each agent was started (names its log).
    starts: Vec<u32>,
    /// Agents started with `--allow-fault-injection` ([`Fleet::answer_wrongly`]).
    faulty: Vec<bool>,
}

/// The binaries beside this one (`target/release`).
pub fn binaries() -> anyhow::Result<(PathBuf, PathBuf)> {
    let exe = std::env::current_exe().context("locating this binary")?;
    let fleetweft = exe.with_file_name("fleetweft");
    let agent = exe.with_file_name("fleetweft-agent");
    for bin in [&fleetweft, &agent] {
        if !bin.is_file() {
            bail!(
                "{} not found: `cargo build --release --bin fleetweft --bin fleetweft-agent` first",
                bin.display()
            );
        }
    }
    Ok((fleetweft, agent))
}

impl Fleet {
    /// Writes PKI, keys and configs for `nodes` in `dir` and starts the
    /// controller; agents start with [`Fleet::start_agent`].
    /// `extra_toml` is appended to the controller's config.
    pub async fn start(dir: &Path, nodes: Vec<String>, extra_toml: &str) -> anyhow::Result<Fleet> {
        let (fleetweft, agent_exe) = binaries()?;
        let port = || demo::ports::free_port().context("picking a free port");
        let mut layout = FleetLayout {
            dir: dir.to_path_buf(),
            quic_port: port()?,
            api_port: port()?,
            public_ports: Vec::new(),
            nodes,
        };
        for _ in &layout.nodes {
            layout.public_ports.push(port()?);
        }
        let (pki, _) = layout.write_pki_and_keys()?;
        let toml = layout.controller_toml(&pki, None);
        let default_timeout = format!(
            "op_timeout_ms = {}",
            demo::quickstart::LOOPBACK_OP_TIMEOUT_MS
        );
        if !toml.contains(&default_timeout) {
            bail!("the loopback controller config no longer sets `{default_timeout}`");
        }
        let toml = toml.replace(
            &default_timeout,
            &format!("op_timeout_ms = {OP_TIMEOUT_MS}"),
        ) + extra_toml;
        let config = layout.controller_config();
        std::fs::write(&config, toml).with_context(|| format!("writing {}", config.display()))?;
        for (node, public_port) in layout.nodes.iter().zip(&layout.public_ports) {
            layout.write_agent_config(&pki, node, *public_port, None)?;
        }
        let logs = dir.join("logs");
        std::fs::create_dir_all(&logs).context("creating the logs directory")?;
        let args = [
            "controller".to_string(),
            "--config".to_string(),
            config.display().to_string(),
        ];
        let controller = demo::spawn(&fleetweft, &args, &logs.join("controller.log"))?;
        let token = protocol::pki::load_operator_token(&pki.operator_token())?;
        let api = ApiClient::new(layout.api_url(), Some(token));
        let count = layout.nodes.len();
        Ok(Fleet {
            signing_key: layout.signing_key(),
            layout,
            api,
            controller,
            agents: (0..count).map(|_| None).collect(),
            agent_exe,
            starts: vec![0; count],
            faulty: vec![false; count],
        })
    }

    /// Starts the agent of node `i` (again, after [`Fleet::kill_agent`]).
    pub fn start_agent(&mut self, i: usize) -> anyhow::Result<()> {
        let node = &self.layout.nodes[i];
        let config = self.layout.agent_config(node);
        self.starts[i] += 1;
        let log = self
            .layout
            .dir
            .join(format!("logs/{node}-{}.log", self.starts[i]));
        let mut args = vec!["--config".to_string(), config.display().to_string()];
        if self.faulty[i] {
            args.push("--allow-fault-injection".to_string());
        }
        self.agents[i] = Some(demo::spawn(&self.agent_exe, &args, &log)?);
        Ok(())
    }

    /// Before node `i`'s agent starts: its sample app answers a healthy
    /// `200` with the wrong body when it runs `release` (the agent's
    /// `[faults] answer_wrongly`, honoured with `--allow-fault-injection`).
    pub fn answer_wrongly(&mut self, i: usize, release: Digest) -> anyhow::Result<()> {
        use std::io::Write;
        let config = self.layout.agent_config(&self.layout.nodes[i]);
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&config)
            .with_context(|| format!("opening {}", config.display()))?;
        let faults = format!("\n[faults]\nanswer_wrongly = [\"{}\"]\n", release.to_hex());
        file.write_all(faults.as_bytes())
            .with_context(|| format!("writing {}", config.display()))?;
        self.faulty[i] = true;
        Ok(())
    }

    /// SIGKILLs the agent of node `i` and reaps it.
    pub async fn kill_agent(&mut self, i: usize) -> anyhow::Result<()> {
        if let Some(mut child) = self.agents[i].take() {
            // tokio's kill is SIGKILL: no shutdown code runs.
            child.kill().await.context("SIGKILL the agent")?;
        }
        Ok(())
    }

    /// The controller's process id.
    pub fn controller_pid(&self) -> anyhow::Result<u32> {
        self.controller.id().context("the controller exited")
    }

    /// The process id of node `i`'s agent.
    pub fn agent_pid(&self, i: usize) -> anyhow::Result<u32> {
        self.agents[i]
            .as_ref()
            .and_then(Child::id)
            .with_context(|| format!("the agent of {} is not running", self.layout.nodes[i]))
    }

    /// Node `i`'s data directory.
    pub fn data_dir(&self, i: usize) -> PathBuf {
        self.layout
            .dir
            .join(format!("{}-data", self.layout.nodes[i]))
    }

    /// Fails when the controller or a started agent has exited.
    fn check_alive(&mut self) -> anyhow::Result<()> {
        if let Ok(Some(status)) = self.controller.try_wait() {
            bail!(
                "the controller exited ({status}); see {}/logs",
                self.layout.dir.display()
            );
        }
        for (i, agent) in self.agents.iter_mut().enumerate() {
            if let Some(Ok(Some(status))) = agent.as_mut().map(Child::try_wait) {
                bail!("the agent of {} exited ({status})", self.layout.nodes[i]);
            }
        }
        Ok(())
    }

    /// Polls the API until `done` holds, for at most `timeout`.
    pub async fn wait(
        &mut self,
        what: &str,
        timeout: Duration,
        done: impl Fn(&FleetView) -> bool,
    ) -> anyhow::Result<FleetView> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(view) = self.api.fleet_view().await {
                if done(&view) {
                    return Ok(view);
                }
            }
            self.check_alive()
                .with_context(|| format!("while waiting for: {what}"))?;
            if Instant::now() > deadline {
                bail!(
                    "timed out after {timeout:?} waiting for: {what} (logs in {}/logs)",
                    self.layout.dir.display()
                );
            }
            tokio::time::sleep(Duration::from_millis(POLL_MS)).await;
        }
    }

    /// Waits until the agents of `nodes` (indexes) are connected.
    pub async fn wait_connected(
        &mut self,
        nodes: &[usize],
        timeout: Duration,
    ) -> anyhow::Result<()> {
        let names: Vec<String> = nodes
            .iter()
            .map(|i| self.layout.nodes[*i].clone())
            .collect();
        self.wait("the agents connected", timeout, |view| {
            names
                .iter()
                .all(|name| view.nodes.iter().any(|n| &n.name == name && n.connected))
        })
        .await?;
        Ok(())
    }

    /// Starts a rollout of `release` to the nodes `canary` then `followers`
    /// (indexes), all at once after the canary; returns its id.
    pub async fn start_rollout(
        &mut self,
        release: Digest,
        canary: usize,
        followers: &[usize],
    ) -> anyhow::Result<String> {
        let before = self.api.fleet_view().await?.rollouts.len();
        let followers: Vec<&str> = followers
            .iter()
            .map(|i| self.layout.nodes[*i].as_str())
            .collect();
        let slots = followers.len().max(1);
        let _: serde_json::Value = self
            .api
            .post_json(
                "/api/rollouts",
                &serde_json::json!({
                    "release": release.to_hex(),
                    "canary": self.layout.nodes[canary],
                    "followers": followers,
                    "slots": slots,
                }),
            )
            .await
            .context("starting the rollout")?;
        let view = self.api.fleet_view().await?;
        let rollout = view
            .rollouts
            .get(before)
            .context("the new rollout is not listed")?;
        Ok(rollout.id.clone())
    }

    /// Waits until rollout `id` completed with every op verified.
    pub async fn wait_completed(&mut self, id: &str, timeout: Duration) -> anyhow::Result<()> {
        // Anything but these is final without an operator (paused too).
        let moving = ["active", "waiting-approval"];
        let view = self
            .wait(&format!("rollout {id} settled"), timeout, |view| {
                view.rollouts
                    .iter()
                    .any(|r| r.id == id && !moving.contains(&r.status.as_str()))
            })
            .await?;
        let status = view
            .rollouts
            .iter()
            .find(|r| r.id == id)
            .map(|r| r.status.as_str());
        if status != Some("completed") {
            bail!("rollout {id} ended {status:?}, not completed; see the logs");
        }
        for op in view.ops.iter().filter(|o| o.rollout == id) {
            if op.outcome.as_deref() != Some("verified") {
                bail!("rollout {id}: op {} ended {:?}", op.id, op.outcome);
            }
        }
        Ok(())
    }

    /// Sets the label `key=value` on node `i`.
    pub async fn label(&self, i: usize, key: &str, value: &str) -> anyhow::Result<()> {
        let node = &self.layout.nodes[i];
        let _: serde_json::Value = self
            .api
            .post_json(
                &format!("/api/nodes/{node}/labels"),
                &serde_json::json!({"set": {key: value}}),
            )
            .await
            .with_context(|| format!("labelling {node}"))?;
        Ok(())
    }

    /// The rollout's proof verdict (every node read back now).
    pub async fn proof_verdict(&self, id: &str) -> anyhow::Result<String> {
        let proof: serde_json::Value = self
            .api
            .get(&format!("/api/rollouts/{id}/proof"))
            .await
            .context("the rollout's proof")?;
        Ok(proof["verdict"].as_str().unwrap_or("none").to_string())
    }

    /// The controller's artifact egress counters from `/metrics`.
    pub async fn served(&self) -> anyhow::Result<Served> {
        let text = self.api.get_text("/metrics").await.context("/metrics")?;
        let counter = |name: &str| -> anyhow::Result<u64> {
            let line = text
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .with_context(|| format!("/metrics has no {name}"))?;
            line.trim()
                .parse()
                .with_context(|| format!("/metrics: {name} is {line:?}"))
        };
        Ok(Served {
            chunks: counter("fleetweft_chunks_served_total ")?,
            chunk_bytes: counter("fleetweft_artifact_bytes_served_total{kind=\"chunk\"} ")?,
            signed_bytes: counter("fleetweft_artifact_bytes_served_total{kind=\"signed\"} ")?,
        })
    }
}

/// The controller's egress counters (`fleetweft_*_served_total`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Served {
    /// Chunks sent.
    pub chunks: u64,
    /// Bytes of chunks sent.
    pub chunk_bytes: u64,
    /// Bytes of signed manifests and bundles sent.
    pub signed_bytes: u64,
}

impl Served {
    /// What was sent between `before` and `self`.
    pub fn since(self, before: Served) -> Served {
        Served {
            chunks: self.chunks - before.chunks,
            chunk_bytes: self.chunk_bytes - before.chunk_bytes,
            signed_bytes: self.signed_bytes - before.signed_bytes,
        }
    }

    /// All bytes sent.
    pub fn bytes(self) -> u64 {
        self.chunk_bytes + self.signed_bytes
    }
}
