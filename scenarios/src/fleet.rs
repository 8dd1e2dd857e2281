//! A fleet inside the scenario network: the real `fleetweft controller` in
//! namespace `ctl`, a real `fleetweft-agent` in each node's namespace, a
//! signed sample app per release. Outcomes are read only through the public
//! surface: the operator's CLI (`status|proof|unresolved --json`), the API's
//! event feed, `fleetweft log verify` and the nodes' public routes.

mod ha;

pub use ha::{leadership_runs, runs_text, Archiving, Layout, CONTROLLER_HOSTS, LEASE_TTL_MS};

use crate::net::{self, Net, ETCD_EXE, SUBNET};
use anyhow::{anyhow, bail, ensure, Context};
use api::client::{ApiClient, RouteAnswer};
use api::client::{FleetView, FLEET_VIEW_READS_MAX};
use api::view::{EventDto, NodeDto, OpDto, Page, RolloutDto, StatusDto};
use model::controller::Event;
use model::Digest;
use protocol::bundle;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::process::{Child, Command};

/// The nodes of every scenario but those that ask for more, in
/// `controller.toml` order.
pub const NODES: [&str; 3] = ["node-a", "node-b", "node-c"];
/// Most nodes one scenario may ask for: each is a namespace, an agent and
/// an app on a 2-core machine, and host octets 11.. must stay below the
/// extra hosts' (20..).
pub const NODES_MAX: usize = 9;
/// The controller's QUIC port.
pub const QUIC_PORT: u16 = 7000;
/// The delaying relay's port (in the controller's namespace).
pub const RELAY_PORT: u16 = 7001;
/// The controller's API port (on its scenario address).
pub const API_PORT: u16 = 7800;
/// Each node's public route port.
pub const PUBLIC_PORT: u16 = 8080;
/// How long one operator command may take (most answer in milliseconds).
pub const CLI_MS: u64 = 20_000;
/// The port of a scenario's plain-HTTP mirrors ([`Fleet::start_mirror`]).
pub const MIRROR_PORT: u16 = 8000;
/// Default deadline of one wait.
pub const WAIT_MS: u64 = 45_000;

/// The agents' `[timing] retry_ms` unless a scenario sets its own.
pub const AGENT_RETRY_MS: u64 = 1_000;
/// How often a wait polls.
pub const POLL_MS: u64 = 150;
/// How often a public route is asked before it counts as not answering.
pub const ROUTE_ATTEMPTS: u32 = 20;
/// After this long without settling evidence an op is UNKNOWN.
pub const OP_TIMEOUT_MS: u64 = 5_000;

/// Where the binaries are.
#[derive(Clone, Debug)]
pub struct Bins {
    /// `fleetweft`.
    pub fleetweft: PathBuf,
    /// `fleetweft-agent`.
    pub agent: PathBuf,
    /// This harness (for `relay`).
    pub harness: PathBuf,
}

impl Bins {
    /// The binaries beside this one (same cargo profile directory).
    pub fn beside_me() -> anyhow::Result<Bins> {
        let harness = std::env::current_exe()?;
        let dir = harness.parent().context("harness has no directory")?;
        let bins = Bins {
            fleetweft: dir.join("fleetweft"),
            agent: dir.join("fleetweft-agent"),
            harness: harness.clone(),
        };
        for b in [&bins.fleetweft, &bins.agent] {
            ensure!(
                b.exists(),
                "{} missing: build the workspace first (cargo build --release --workspace)",
                b.display()
            );
        }
        Ok(bins)
    }
}

/// Faults an agent is started with (honoured with `--allow-fault-injection`).
#[derive(Clone, Debug, Default)]
pub struct AgentFaults {
    /// Releases whose app answers wrongly while healthy.
    pub answer_wrongly: Vec<Digest>,
    /// Releases whose app exits at once on every start.
    pub crash_on_start: Vec<Digest>,
    /// Where to hold once (`fetch`, `verify`, `stage`, `switch`, `probe`,
    /// `restore-probe`), and for how long.
    pub hold_at: Option<(&'static str, u64)>,
    /// The agent's `[timing] retry_ms` (how long an unanswered request
    /// waits before it is sent again); `None` keeps 1,000 ms. Not a fault:
    /// needs no `--allow-fault-injection`.
    pub retry_ms: Option<u64>,
    /// Which cgroups the agent sees and may use for a release's limits.
    /// Not a fault either.
    pub cgroups: AgentCgroups,
}

/// The cgroups an agent is started with (scenario 26).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AgentCgroups {
    /// Started with `ip netns exec`, which mounts a fresh sysfs on `/sys`
    /// in its own mount namespace: `/sys/fs/cgroup` is an empty directory
    /// there, so the agent finds no cgroup and limits go to rlimits. Every
    /// scenario but 26.
    #[default]
    Hidden,
    /// Started with `nsenter --net` (the node's network namespace, the
    /// host's mounts): the agent sees the host's cgroup hierarchies, with
    /// `[isolation] cgroups = true` (the default) it uses them.
    Host,
    /// As [`AgentCgroups::Host`] with `[isolation] cgroups = false` in the
    /// agent's config: the hierarchies are there and the agent is told
    /// not to use them (rlimits only).
    HostOff,
}

/// Options of the controller.
#[derive(Clone, Debug, Default)]
pub struct ControllerFaults {
    /// Drop the first commit reply for this release.
    pub drop_first_commit_reply_for: Option<Digest>,
    /// Once this file exists, hold in the next snapshot write between its
    /// chunks and its manifest until killed (etcd only).
    pub hold_in_snapshot_write: Option<PathBuf>,
}

impl ControllerFaults {
    /// Whether any fault switch is on.
    fn any(&self) -> bool {
        self.drop_first_commit_reply_for.is_some() || self.hold_in_snapshot_write.is_some()
    }
}

/// A running fleet. Dropping it kills every process it started.
pub struct Fleet {
    /// Everything of this scenario lives here.
    pub dir: PathBuf,
    /// The network.
    pub net: Net,
    bins: Bins,
    pki: protocol::pki::FleetPki,
    /// version -> (release digest, bundle file)
    releases: HashMap<String, (Digest, PathBuf)>,
    children: HashMap<String, Child>,
    starts: HashMap<String, u32>,
    api: ApiClient,
    /// Where agents send QUIC (the controller, or the delaying relay).
    pub agent_quic_port: u16,
    /// This fleet's nodes (`node-<letter>`), in `controller.toml` order;
    /// node i lives on host `<letter>` at octet 11 + i.
    nodes: Vec<String>,
    /// Three controller hosts on etcd ([`Layout::Ha`]), or one on sled.
    layout: Layout,
    /// Extra environment for processes started from now on: `(name
    /// prefix, variable, value)`; a process whose name starts with the
    /// prefix gets the variable (the power-cut campaign's mutants).
    pub child_env: Vec<(String, String, String)>,
    /// Appended to every `controller.toml` the fleet writes (e.g. a `[log]`
    /// section); empty by default.
    pub controller_toml_extra: String,
    /// `[log]` of every controller started from now on, and the archive
    /// directory every `log` command reads (scenario 23).
    pub archiving: Option<Archiving>,
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for child in self.children.values_mut() {
            let _ = child.start_kill();
        }
    }
}

impl Fleet {
    /// The network (controller, `nodes`, and `extra` hosts), the PKI,
    /// signed releases `versions`, and the controller running. With
    /// [`Layout::Ha`]: three controller hosts, each with its etcd member
    /// running (quorum reached) and its controller NOT started yet (the
    /// scenario starts them with the faults it needs).
    pub async fn start(
        dir: &Path,
        bins: &Bins,
        versions: &[&str],
        extra: &[(&str, u8)],
        nodes: &[&str],
        layout: Layout,
    ) -> anyhow::Result<Fleet> {
        ensure!(
            !nodes.is_empty() && nodes.len() <= NODES_MAX,
            "a scenario needs 1 to {NODES_MAX} nodes, not {}",
            nodes.len()
        );
        std::fs::create_dir_all(dir.join("logs"))?;
        let mut hosts = match layout {
            Layout::Single => vec![("ctl", 1u8)],
            Layout::Ha => CONTROLLER_HOSTS
                .iter()
                .zip(1u8..)
                .map(|(h, o)| (*h, o))
                .collect(),
        };
        for (i, node) in nodes.iter().enumerate() {
            hosts.push((host_of(node)?, 11 + i as u8));
        }
        hosts.extend_from_slice(extra);
        let net = Net::create(&hosts)?;
        let names: Vec<String> = nodes.iter().map(|s| s.to_string()).collect();
        let pki = protocol::pki::init_fleet(&dir.join("pki"), &names, "localhost")?;
        let token = protocol::pki::load_operator_token(&pki.operator_token())?;
        let keys = dir.join("keys");
        std::fs::create_dir_all(&keys)?;
        let (signing, verifying) = bundle::keygen();
        bundle::save_signing_key(&keys.join("bundle-signing.key"), &signing)?;
        bundle::save_verifying_key(&keys.join("bundle-signing.pub"), &verifying)?;
        let mut releases = HashMap::new();
        for version in versions {
            let bytes = demo::sign_hello(&signing, version)?;
            let path = dir.join(format!("hello-{version}.bundle"));
            std::fs::write(&path, &bytes)?;
            releases.insert(version.to_string(), (bundle::bundle_digest(&bytes), path));
        }
        let ctl_ip = net.hosts[0].ip.clone();
        let api = ApiClient::new(format!("http://{ctl_ip}:{API_PORT}"), Some(token));
        let mut fleet = Fleet {
            dir: dir.to_path_buf(),
            net,
            bins: bins.clone(),
            pki,
            releases,
            children: HashMap::new(),
            starts: HashMap::new(),
            api,
            agent_quic_port: QUIC_PORT,
            nodes: names,
            layout,
            child_env: Vec::new(),
            controller_toml_extra: String::new(),
            archiving: None,
        };
        match layout {
            Layout::Single => fleet.start_controller(&ControllerFaults::default()).await?,
            Layout::Ha => fleet.start_etcd_cluster().await?,
        }
        Ok(fleet)
    }

    /// The digest of `version`.
    pub fn digest(&self, version: &str) -> Digest {
        self.releases
            .get(version)
            .map(|r| r.0)
            .unwrap_or_else(|| panic!("scenario bug: no release {version}"))
    }

    /// Signs the sample app as `version` (a new release), keeps its bundle
    /// file beside the others and returns its digest and bytes.
    pub fn add_release(&mut self, version: &str) -> anyhow::Result<(Digest, Vec<u8>)> {
        let signing = bundle::load_signing_key(&self.dir.join("keys/bundle-signing.key"))?;
        let bytes = demo::sign_hello(&signing, version)?;
        let path = self.dir.join(format!("hello-{version}.bundle"));
        std::fs::write(&path, &bytes)?;
        let digest = bundle::bundle_digest(&bytes);
        self.releases.insert(version.to_string(), (digest, path));
        Ok((digest, bytes))
    }

    /// Names `digest` as release `version` (uploaded by the scenario itself,
    /// e.g. a tree release), so [`Fleet::assert_serves`] knows it.
    pub fn note_release(&mut self, version: &str, digest: Digest, path: PathBuf) {
        self.releases.insert(version.to_string(), (digest, path));
    }

    /// The operator's API client (the controller's address and token).
    pub fn api(&self) -> &ApiClient {
        &self.api
    }

    /// True while the fleet's process `name` runs (as far as the harness
    /// knows: it has not killed or reaped it).
    pub fn is_running(&self, name: &str) -> bool {
        self.children.contains_key(name)
    }

    /// The bundle file of `version`.
    pub fn bundle_file(&self, version: &str) -> PathBuf {
        self.releases[version].1.clone()
    }

    /// The API URL(s) the operator's CLI is given: the controller, or the
    /// three controller hosts (a write follows a standby's 503 to the
    /// leader).
    fn controller_url(&self) -> String {
        match self.layout {
            Layout::Single => format!("http://{}.1:{API_PORT}", SUBNET),
            Layout::Ha => ha::api_urls().join(","),
        }
    }

    /// The controller's data directory.
    pub fn controller_data(&self) -> PathBuf {
        self.dir.join("controller-data")
    }

    /// Start `exe args` inside namespace `ns` as `name`; its output goes to
    /// `logs/<name>.<n>.log` (one file per start).
    fn spawn_in(
        &mut self,
        name: &str,
        ns: &str,
        exe: &Path,
        args: &[String],
    ) -> anyhow::Result<()> {
        self.spawn_entering(name, ns, false, exe, args)
    }

    /// [`Fleet::spawn_in`]; with `host_mounts`, through `nsenter --net`
    /// instead of `ip netns exec`: the network namespace only, the host's
    /// mounts (its `/sys/fs/cgroup`) kept.
    fn spawn_entering(
        &mut self,
        name: &str,
        ns: &str,
        host_mounts: bool,
        exe: &Path,
        args: &[String],
    ) -> anyhow::Result<()> {
        ensure!(!self.children.contains_key(name), "{name} already running");
        let n = self.starts.entry(name.to_string()).or_insert(0);
        *n += 1;
        let log = self.dir.join(format!("logs/{name}.{n}.log"));
        let out = std::fs::File::create(&log)?;
        let err = out.try_clone()?;
        // `ip netns exec` (and `nsenter`) enters the namespace and execs:
        // the child's pid is the process itself, so a SIGKILL reaches it
        // directly.
        let mut cmd = if host_mounts {
            let mut cmd = Command::new("nsenter");
            cmd.arg(format!("--net=/run/netns/{ns}")).arg("--");
            cmd
        } else {
            let mut cmd = Command::new("ip");
            cmd.args(["netns", "exec", ns]);
            cmd
        };
        cmd.arg(exe)
            .args(args)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .kill_on_drop(true);
        for (prefix, key, value) in &self.child_env {
            if name.starts_with(prefix.as_str()) {
                cmd.env(key, value);
            }
        }
        // SAFETY: prctl(2) only, between fork and exec. If the harness itself
        // is killed, the kernel kills its daemons too (kill_on_drop cannot
        // run then), so a killed run leaves no process behind; the signal
        // survives the exec of `ip netns exec`.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd
            .spawn()
            .with_context(|| format!("starting {name} in {ns}"))?;
        self.children.insert(name.to_string(), child);
        Ok(())
    }

    /// Write `controller.toml` and start the controller; wait for its API.
    pub async fn start_controller(&mut self, faults: &ControllerFaults) -> anyhow::Result<()> {
        let ctl = self.net.host("ctl")?.ip.clone();
        let text = self.controller_toml(&self.controller_data(), &ctl, faults);
        let config = self.dir.join("controller.toml");
        std::fs::write(&config, text)?;
        let args = controller_args(&config, faults);
        let exe = self.bins.fleetweft.clone();
        self.spawn_in("controller", "fwsc-ctl", &exe, &args)?;
        let api = self.api.clone();
        wait_for("the controller's API answers", WAIT_MS, || {
            let api = api.clone();
            async move { api.get::<StatusDto>("/api/status").await.is_ok() }
        })
        .await
    }

    /// A controller's config on `ip` with its data in `data`: everything
    /// but `[storage]` (sled unless the caller adds one).
    fn controller_toml(&self, data: &Path, ctl: &str, faults: &ControllerFaults) -> String {
        let mut text = format!(
            "data_dir = {:?}\nlisten = \"{ctl}:{QUIC_PORT}\"\n\n[api]\nlisten = \"{ctl}:{API_PORT}\"\n\n[tls]\nca = {:?}\ncert = {:?}\nkey = {:?}\noperator_token = {:?}\n\n[bundles]\npubkey = {:?}\n\n[timing]\nop_timeout_ms = {OP_TIMEOUT_MS}\n",
            data.display().to_string(),
            self.pki.ca_cert().display().to_string(),
            self.pki.controller_cert().display().to_string(),
            self.pki.controller_key().display().to_string(),
            self.pki.operator_token().display().to_string(),
            self.dir.join("keys/bundle-signing.pub").display().to_string(),
        );
        if faults.any() {
            text.push_str("\n[faults]\n");
        }
        if let Some(release) = faults.drop_first_commit_reply_for {
            text.push_str(&format!(
                "drop_first_commit_reply_for = \"{}\"\n",
                release.to_hex()
            ));
        }
        if let Some(file) = &faults.hold_in_snapshot_write {
            text.push_str(&format!(
                "hold_in_snapshot_write = {:?}\n",
                file.display().to_string()
            ));
        }
        for (i, node) in self.nodes.iter().enumerate() {
            text.push_str(&format!(
                "\n[[nodes]]\nname = \"{node}\"\npublic = \"{SUBNET}.{}:{PUBLIC_PORT}\"\n",
                11 + i
            ));
        }
        text.push_str(&self.controller_toml_extra);
        text
    }

    /// Start node `node`'s agent (a, b, c) with `faults`, against the fleet
    /// CA (or another fleet's `pki` when given).
    pub fn start_agent(&mut self, node: &str, faults: &AgentFaults) -> anyhow::Result<()> {
        self.start_agent_as(node, node, faults, None)
    }

    /// Start an agent claiming to be `node` inside `host`'s namespace, with
    /// `pki` (default: the fleet's).
    pub fn start_agent_as(
        &mut self,
        name: &str,
        node: &str,
        faults: &AgentFaults,
        pki: Option<&protocol::pki::FleetPki>,
    ) -> anyhow::Result<()> {
        ensure!(self.nodes.iter().any(|n| n == node), "unknown node {node}");
        let host = host_of(node)?;
        let ns = if name == node {
            self.net.host(host)?.ns.clone()
        } else {
            self.net.host("x")?.ns.clone()
        };
        // The fleet's CA, and with a foreign `pki` also that pki's CA: the
        // agent's own startup check (its certificate chains to a CA it is
        // configured with) then passes, and the controller alone decides.
        let ca = match pki {
            None => self.pki.ca_cert(),
            Some(foreign) => {
                let bundle = self.dir.join(format!("{name}-ca-bundle.pem"));
                let mut pem = std::fs::read(self.pki.ca_cert())?;
                pem.extend(std::fs::read(foreign.ca_cert())?);
                std::fs::write(&bundle, pem)?;
                bundle
            }
        };
        let pki = pki.unwrap_or(&self.pki);
        let addr = match self.layout {
            Layout::Single => format!("addr = \"{SUBNET}.1:{}\"", self.agent_quic_port),
            Layout::Ha => format!("addrs = [{}]", ha::agent_addrs().join(", ")),
        };
        let mut text = format!(
            "node = \"{node}\"\ndata_dir = {:?}\npublic_port = {PUBLIC_PORT}\npublic_ip = \"0.0.0.0\"\n\n[controller]\n{addr}\nserver_name = \"localhost\"\n\n[tls]\nca = {:?}\ncert = {:?}\nkey = {:?}\n\n[bundles]\npubkey = {:?}\n\n[timing]\nretry_ms = {}\nbackoff_base_ms = 200\nbackoff_max_ms = 2000\n",
            self.dir.join(format!("{name}-data")).display().to_string(),
            ca.display().to_string(),
            pki.node_cert(node).display().to_string(),
            pki.node_key(node).display().to_string(),
            self.dir.join("keys/bundle-signing.pub").display().to_string(),
            faults.retry_ms.unwrap_or(AGENT_RETRY_MS),
        );
        if faults.cgroups == AgentCgroups::HostOff {
            text.push_str("\n[isolation]\ncgroups = false\n");
        }
        let any_fault = !faults.answer_wrongly.is_empty()
            || !faults.crash_on_start.is_empty()
            || faults.hold_at.is_some();
        if any_fault {
            let list = |d: &[Digest]| {
                d.iter()
                    .map(|x| format!("\"{}\"", x.to_hex()))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            text.push_str(&format!(
                "\n[faults]\nanswer_wrongly = [{}]\ncrash_on_start = [{}]\n",
                list(&faults.answer_wrongly),
                list(&faults.crash_on_start)
            ));
            if let Some((point, ms)) = faults.hold_at {
                text.push_str(&format!("hold_at = \"{point}\"\nhold_ms = {ms}\n"));
            }
        }
        let config = self.dir.join(format!("agent-{name}.toml"));
        std::fs::write(&config, text)?;
        let mut args = vec!["--config".to_string(), config.display().to_string()];
        if any_fault {
            args.push("--allow-fault-injection".into());
        }
        let exe = self.bins.agent.clone();
        let host_mounts = faults.cgroups != AgentCgroups::Hidden;
        self.spawn_entering(name, &ns, host_mounts, &exe, &args)
    }

    /// Start the delaying relay in the controller's namespace; agents
    /// started afterwards send QUIC through it.
    pub fn start_relay(&mut self, delay_ms: u64) -> anyhow::Result<()> {
        let ctl = self.net.host("ctl")?.ip.clone();
        let args = vec![
            "relay".to_string(),
            "--listen".into(),
            format!("{ctl}:{RELAY_PORT}"),
            "--upstream".into(),
            format!("{ctl}:{QUIC_PORT}"),
            "--delay-ms".into(),
            delay_ms.to_string(),
        ];
        let exe = self.bins.harness.clone();
        self.spawn_in("relay", "fwsc-ctl", &exe, &args)?;
        self.agent_quic_port = RELAY_PORT;
        Ok(())
    }

    /// The pid of a running process of the fleet.
    pub fn pid(&self, name: &str) -> anyhow::Result<u32> {
        self.children
            .get(name)
            .and_then(|c| c.id())
            .with_context(|| format!("{name} is not running"))
    }

    /// SIGKILL `name` and reap it.
    pub async fn kill(&mut self, name: &str) -> anyhow::Result<()> {
        let mut child = self
            .children
            .remove(name)
            .with_context(|| format!("{name} is not running"))?;
        child.start_kill()?;
        tokio::time::timeout(Duration::from_secs(10), child.wait())
            .await
            .with_context(|| format!("{name} did not die after SIGKILL"))??;
        Ok(())
    }

    /// SIGTERM `name` (an orderly stop) and reap it; SIGKILL after 10 s.
    pub async fn stop(&mut self, name: &str) -> anyhow::Result<()> {
        let pid = self.pid(name)?;
        // SAFETY: kill(2) on a pid we started and have not reaped.
        unsafe {
            libc::kill(pid as i32, libc::SIGTERM);
        }
        let mut child = self.children.remove(name).context("running")?;
        if tokio::time::timeout(Duration::from_secs(10), child.wait())
            .await
            .is_err()
        {
            child.start_kill()?;
            child.wait().await?;
            bail!("{name} ignored SIGTERM for 10 s");
        }
        Ok(())
    }

    /// Kill every process and tear the network down.
    pub async fn shutdown(&mut self) -> anyhow::Result<()> {
        let names: Vec<String> = self.children.keys().cloned().collect();
        for name in names {
            let _ = self.kill(&name).await;
        }
        let cgroups = self.remove_app_cgroups().await;
        self.net.teardown()?;
        ensure!(cgroups.is_empty(), "cgroups left behind: {cgroups:?}");
        Ok(())
    }

    /// Removes the cgroups this fleet's agents made for their apps
    /// (`fleetweft-<release>-<port>` under the agent's own cgroup, which
    /// is the harness's: [`AgentCgroups::Host`]) and left behind when they
    /// were killed; returns those still there after 5 s.
    async fn remove_app_cgroups(&self) -> Vec<PathBuf> {
        let found = agent::isolation::Hierarchies::detect();
        let parents = found.v2.iter().map(|(d, _)| d.clone());
        let parents: Vec<PathBuf> = parents
            .chain(found.v1.iter().map(|(_, d)| d.clone()))
            .collect();
        let ours: Vec<String> = self
            .releases
            .values()
            .map(|(d, _)| format!("fleetweft-{}-", &d.to_hex()[..12]))
            .collect();
        let mut left = Vec::new();
        for _ in 0..50 {
            left = parents
                .iter()
                .filter_map(|p| std::fs::read_dir(p).ok())
                .flat_map(|entries| entries.flatten().map(|e| e.path()))
                .filter(|path| {
                    let name = path.file_name().unwrap_or_default().to_string_lossy();
                    path.is_dir() && ours.iter().any(|o| name.starts_with(o.as_str()))
                })
                .filter(|path| std::fs::remove_dir(path).is_err())
                .collect();
            if left.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        left
    }

    /// Every log of `name`, concatenated, one start after another.
    pub fn logs(&self, name: &str) -> String {
        let mut text = String::new();
        for n in 1..=self.starts.get(name).copied().unwrap_or(0) {
            let path = self.dir.join(format!("logs/{name}.{n}.log"));
            text.push_str(&std::fs::read_to_string(path).unwrap_or_default());
        }
        text
    }

    /// The log of the latest start of `name`.
    pub fn last_log(&self, name: &str) -> String {
        let n = self.starts.get(name).copied().unwrap_or(0);
        std::fs::read_to_string(self.dir.join(format!("logs/{name}.{n}.log"))).unwrap_or_default()
    }

    /// Run the CLI from the root namespace for a command that talks to no
    /// controller (`bundle sign --dir`, `bundle export`): (exit code,
    /// stdout, stderr), within `ms`.
    pub async fn cli_offline(
        &self,
        args: &[&str],
        ms: u64,
    ) -> anyhow::Result<(i32, String, String)> {
        let mut cmd = Command::new(&self.bins.fleetweft);
        cmd.args(args).stdin(Stdio::null()).kill_on_drop(true);
        let out = tokio::time::timeout(Duration::from_millis(ms), cmd.output())
            .await
            .with_context(|| format!("fleetweft {} took over {ms} ms", args.join(" ")))??;
        Ok((
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ))
    }

    /// A plain-HTTP mirror on `host` (an extra host of the scenario), port
    /// [`MIRROR_PORT`], serving `root` (`GET /fleet/chunks/<sha256>` is
    /// `root/fleet/chunks/<sha256>`) as `mode` says: `good`, `corrupt`
    /// (the first byte of every chunk flipped) or `stall` (headers and
    /// 1,000 bytes, then nothing). It prints `served NAME LEN` per chunk
    /// it sent whole. Returns its base URL.
    pub fn start_mirror(&mut self, host: &str, mode: &str, root: &Path) -> anyhow::Result<String> {
        let ns = self.net.host(host)?.ns.clone();
        let ip = self.net.host(host)?.ip.clone();
        let script = [
            "import http.server, os, sys, time".to_string(),
            "root, mode, port = sys.argv[1], sys.argv[2], int(sys.argv[3])".to_string(),
            "class H(http.server.BaseHTTPRequestHandler):".to_string(),
            "    def do_GET(self):".to_string(),
            "        name = self.path.rsplit('/', 1)[-1]".to_string(),
            "        path = os.path.join(root, 'fleet', 'chunks', name)".to_string(),
            "        if not self.path.startswith('/fleet/chunks/') or not os.path.isfile(path):".to_string(),
            "            self.send_response(404); self.send_header('Content-Length', '0'); self.end_headers(); return".to_string(),
            "        data = open(path, 'rb').read()".to_string(),
            "        if mode == 'corrupt':".to_string(),
            "            data = bytes([data[0] ^ 0xff]) + data[1:]".to_string(),
            "        self.send_response(200)".to_string(),
            "        self.send_header('Content-Length', str(len(data)))".to_string(),
            "        self.end_headers()".to_string(),
            "        if mode == 'stall':".to_string(),
            "            self.wfile.write(data[:1000]); self.wfile.flush(); time.sleep(3600); return".to_string(),
            "        self.wfile.write(data)".to_string(),
            "        print('served', name, len(data), flush=True)".to_string(),
            "    def log_message(self, *a):".to_string(),
            "        pass".to_string(),
            "s = http.server.ThreadingHTTPServer(('0.0.0.0', port), H)".to_string(),
            "s.daemon_threads = True".to_string(),
            "s.serve_forever()".to_string(),
        ]
        .join("\n");
        let path = self.dir.join(format!("mirror-{host}.py"));
        std::fs::write(&path, script)?;
        let python = PathBuf::from("/usr/bin/python3");
        let args = [
            path.display().to_string(),
            root.display().to_string(),
            mode.to_string(),
            MIRROR_PORT.to_string(),
        ];
        self.spawn_in(&format!("mirror-{host}"), &ns, &python, &args)?;
        Ok(format!("http://{ip}:{MIRROR_PORT}/fleet"))
    }

    /// Run the operator CLI from the root namespace: (exit code, stdout).
    pub async fn cli(&self, args: &[&str]) -> anyhow::Result<(i32, String)> {
        self.cli_at(&self.controller_url(), args).await
    }

    /// [`Fleet::cli`] allowed `ms` (a large upload).
    pub async fn cli_within(&self, args: &[&str], ms: u64) -> anyhow::Result<(i32, String)> {
        self.cli_at_within(&self.controller_url(), args, ms).await
    }

    /// [`Fleet::cli`] against the API URL(s) `url`.
    async fn cli_at(&self, url: &str, args: &[&str]) -> anyhow::Result<(i32, String)> {
        self.cli_at_within(url, args, CLI_MS).await
    }

    /// [`Fleet::cli_at`] allowed `ms`.
    async fn cli_at_within(
        &self,
        url: &str,
        args: &[&str],
        ms: u64,
    ) -> anyhow::Result<(i32, String)> {
        let mut cmd = Command::new(&self.bins.fleetweft);
        cmd.args(args)
            .arg("--controller")
            .arg(url)
            .arg("--token-file")
            .arg(self.pki.operator_token())
            .stdin(Stdio::null())
            .kill_on_drop(true);
        let out = tokio::time::timeout(Duration::from_millis(ms), cmd.output())
            .await
            .with_context(|| format!("fleetweft {} hung", args.join(" ")))??;
        let code = out.status.code().unwrap_or(-1);
        if code == 2 {
            bail!(
                "fleetweft {}: usage or connection error: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok((code, String::from_utf8_lossy(&out.stdout).into_owned()))
    }

    /// `fleetweft status --json` (the summary), with every node and op
    /// read page by page through `fleetweft nodes|ops --json` and every
    /// rollout from `/api/rollouts`: the whole of a three-node fleet. With
    /// three controllers, all of it is read from the one that leads now (a
    /// standby's view may lag, or be stale while its etcd member is down);
    /// no leader is an error (a wait polls again).
    ///
    /// The lists come from several requests, so the view is read again
    /// while the log moved on between its first and its last request (up
    /// to [`FLEET_VIEW_READS_MAX`] times): a check across lists (an op's
    /// outcome and its rollout's status) must not see the op newer than
    /// the rollout. Scenario 5 failed once on exactly that.
    pub async fn status(&self) -> anyhow::Result<FleetView> {
        let mut view = self.status_once().await?;
        for _ in 1..FLEET_VIEW_READS_MAX {
            let url = self.read_url().await?;
            let now: StatusDto = self
                .read_api(&url)
                .get("/api/status")
                .await
                .map_err(|e| anyhow!("status: {e}"))?;
            if now.last_sequence == view.last_sequence {
                return Ok(view);
            }
            view = self.status_once().await?;
        }
        Ok(view)
    }

    /// One read of every list, which may straddle new events.
    async fn status_once(&self) -> anyhow::Result<FleetView> {
        let url = self.read_url().await?;
        let (_, out) = self.cli_at(&url, &["status", "--json"]).await?;
        let summary: StatusDto =
            serde_json::from_str(&out).with_context(|| format!("status JSON: {out}"))?;
        let rollouts: Vec<RolloutDto> = self
            .read_api(&url)
            .get("/api/rollouts")
            .await
            .map_err(|e| anyhow!("rollouts: {e}"))?;
        let nodes = self
            .cli_pages(&url, "nodes")
            .await?
            .into_iter()
            .map(serde_json::from_value::<NodeDto>)
            .collect::<Result<_, _>>()
            .context("a node of fleetweft nodes --json")?;
        let ops = self
            .cli_pages(&url, "ops")
            .await?
            .into_iter()
            .map(serde_json::from_value::<OpDto>)
            .collect::<Result<_, _>>()
            .context("an op of fleetweft ops --json")?;
        Ok(FleetView::new(summary, rollouts, nodes, ops))
    }

    /// Every item of `fleetweft LIST --json`, following `next`.
    async fn cli_pages(&self, url: &str, list: &str) -> anyhow::Result<Vec<serde_json::Value>> {
        let mut items = Vec::new();
        let mut after: Option<String> = None;
        for _ in 0..api::client::LIST_PAGES_MAX {
            let mut args = vec![list, "--json", "--limit", "1000"];
            if let Some(a) = &after {
                args.extend(["--after", a.as_str()]);
            }
            let (code, out) = self.cli_at(url, &args).await?;
            ensure!(code == 0, "fleetweft {list} refused: {out}");
            let page: Page<serde_json::Value> =
                serde_json::from_str(&out).with_context(|| format!("{list} JSON: {out}"))?;
            items.extend(page.items);
            after = page.next;
            if after.is_none() {
                return Ok(items);
            }
        }
        bail!(
            "fleetweft {list}: more than {} pages",
            api::client::LIST_PAGES_MAX
        )
    }

    /// `fleetweft proof --rollout ID --json`: (exit code, JSON).
    pub async fn rollout_proof(&self, id: &str) -> anyhow::Result<(i32, serde_json::Value)> {
        let (code, out) = self.cli(&["proof", "--rollout", id, "--json"]).await?;
        Ok((code, serde_json::from_str(&out).context("proof JSON")?))
    }

    /// `fleetweft proof NODE --json`: (exit code, JSON).
    pub async fn node_proof(&self, node: &str) -> anyhow::Result<(i32, serde_json::Value)> {
        let (code, out) = self.cli(&["proof", node, "--json"]).await?;
        Ok((code, serde_json::from_str(&out).context("proof JSON")?))
    }

    /// `fleetweft unresolved --json`: (exit code, JSON).
    pub async fn unresolved(&self) -> anyhow::Result<(i32, serde_json::Value)> {
        let (code, out) = self.cli(&["unresolved", "--json"]).await?;
        Ok((code, serde_json::from_str(&out).context("unresolved JSON")?))
    }

    /// `fleetweft rollout start`; returns the new rollout's id.
    pub async fn rollout(
        &self,
        version: &str,
        canary: &str,
        followers: &[&str],
        slots: u8,
        approval: bool,
    ) -> anyhow::Result<String> {
        let gate: &[&str] = if approval {
            &["--approve-after-canary"]
        } else {
            &[]
        };
        self.rollout_with(version, canary, followers, slots, gate)
            .await
    }

    /// `fleetweft rollout start` with `more` options (`--waves 50%,100%`,
    /// `--max-failed 1`, ...); returns the new rollout's id.
    pub async fn rollout_with(
        &self,
        version: &str,
        canary: &str,
        followers: &[&str],
        slots: u8,
        more: &[&str],
    ) -> anyhow::Result<String> {
        let bundle = self.bundle_file(version).display().to_string();
        let slots = slots.to_string();
        let followers = followers.join(",");
        let mut args = vec![
            "rollout", "start", "--bundle", &bundle, "--canary", canary, "--slots", &slots,
            "--json",
        ];
        if !followers.is_empty() {
            args.extend(["--followers", &followers]);
        }
        args.extend_from_slice(more);
        let (code, out) = self.cli(&args).await?;
        ensure!(code == 0, "rollout start refused: {out}");
        let release = self.digest(version).to_hex();
        let status = self.status().await?;
        status
            .rollouts
            .iter()
            .rev()
            .find(|r| r.release == release)
            .map(|r| r.id.clone())
            .ok_or_else(|| anyhow!("no rollout of {version} after starting it"))
    }

    /// `fleetweft rollout pause|resume|approve ID`.
    pub async fn rollout_command(&self, verb: &str, id: &str) -> anyhow::Result<()> {
        let (code, out) = self.cli(&["rollout", verb, id, "--json"]).await?;
        ensure!(code == 0, "rollout {verb} {id} refused: {out}");
        Ok(())
    }

    /// Upload a bundle through the API (`POST /api/bundles`).
    pub async fn upload(&self, bytes: &[u8]) -> anyhow::Result<()> {
        let _: serde_json::Value = self
            .api
            .post_bytes("/api/bundles", bytes.to_vec())
            .await
            .map_err(|e| anyhow!("upload: {e}"))?;
        Ok(())
    }

    /// Start a rollout of an already uploaded release through the API
    /// (`POST /api/rollouts`), slots 1; returns its id.
    pub async fn start_rollout_api(
        &self,
        release: Digest,
        canary: &str,
        followers: &[&str],
    ) -> anyhow::Result<String> {
        self.start_rollout_with_slots(release, canary, followers, 1)
            .await
    }

    /// [`Fleet::start_rollout_api`] with `slots`.
    pub async fn start_rollout_with_slots(
        &self,
        release: Digest,
        canary: &str,
        followers: &[&str],
        slots: u16,
    ) -> anyhow::Result<String> {
        let reply: serde_json::Value = self
            .api
            .post_json(
                "/api/rollouts",
                &serde_json::json!({
                    "release": release.to_hex(),
                    "canary": canary,
                    "followers": followers,
                    "slots": slots,
                }),
            )
            .await
            .map_err(|e| anyhow!("start rollout: {e}"))?;
        // The start's own event names the rollout (`rollout rN starts: …`):
        // its plan may name a deployment of `release` rather than `release`.
        let started = reply["events"].as_array().and_then(|events| {
            events.iter().find_map(|e| {
                let mut words = e["text"].as_str()?.split_whitespace();
                match (words.next(), words.next(), words.next()) {
                    (Some("rollout"), Some(id), Some("starts:")) => Some(id.to_string()),
                    _ => None,
                }
            })
        });
        if let Some(id) = started {
            return Ok(id);
        }
        let status = self.status().await?;
        status
            .rollouts
            .iter()
            .rev()
            .find(|r| r.release == release.to_hex())
            .map(|r| r.id.clone())
            .ok_or_else(|| anyhow!("no rollout of {release} after starting it"))
    }

    /// The whole event log, through the API's feed (with three
    /// controllers, the leader's).
    pub async fn events(&self) -> anyhow::Result<Vec<EventDto>> {
        let api = self.read_api(&self.read_url().await?);
        let mut all: Vec<EventDto> = Vec::new();
        loop {
            let from = all.last().map(|e| e.sequence + 1).unwrap_or(0);
            let page: Vec<EventDto> = api
                .get(&format!("/api/events?from={from}"))
                .await
                .map_err(|e| anyhow!("event feed: {e}"))?;
            if page.is_empty() {
                return Ok(all);
            }
            all.extend(page);
        }
    }

    /// The events, one line each, for failure messages.
    pub async fn event_text(&self) -> String {
        match self.events().await {
            Ok(events) => events
                .iter()
                .map(|e| format!("  #{} {}\n", e.sequence, e.text))
                .collect(),
            Err(e) => format!("  (no events: {e})"),
        }
    }

    /// Poll the status until `done` holds (bounded by `ms`).
    pub async fn wait(
        &self,
        what: &str,
        ms: u64,
        done: impl Fn(&FleetView) -> bool,
    ) -> anyhow::Result<FleetView> {
        let deadline = Instant::now() + Duration::from_millis(ms);
        let mut last_error = None;
        loop {
            match self.status().await {
                Ok(s) if done(&s) => return Ok(s),
                Ok(_) => {}
                Err(e) => last_error = Some(e),
            }
            if Instant::now() > deadline {
                bail!(
                    "timed out after {ms} ms waiting for: {what}\nlast error: {last_error:?}\nevents:\n{}",
                    self.event_text().await
                );
            }
            tokio::time::sleep(Duration::from_millis(POLL_MS)).await;
        }
    }

    /// Poll the event log until one event satisfies `find`.
    pub async fn wait_event(
        &self,
        what: &str,
        ms: u64,
        find: impl Fn(&Event) -> bool,
    ) -> anyhow::Result<EventDto> {
        let deadline = Instant::now() + Duration::from_millis(ms);
        loop {
            if let Ok(events) = self.events().await {
                if let Some(e) = events.into_iter().find(|e| find(&e.event)) {
                    return Ok(e);
                }
            }
            if Instant::now() > deadline {
                bail!(
                    "timed out after {ms} ms waiting for: {what}\nevents:\n{}",
                    self.event_text().await
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Poll `name`'s latest log until it contains `needle`.
    pub async fn wait_log(&self, name: &str, needle: &str, ms: u64) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_millis(ms);
        while !self.last_log(name).contains(needle) {
            if Instant::now() > deadline {
                bail!("timed out after {ms} ms waiting for {name} to log {needle:?}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(())
    }

    /// GET /hello on `node`'s public route from the operator's host.
    pub async fn public(&self, node: &str) -> Option<RouteAnswer> {
        let i = self.nodes.iter().position(|n| n == node)?;
        let addr: std::net::SocketAddr =
            format!("{SUBNET}.{}:{PUBLIC_PORT}", 11 + i).parse().ok()?;
        api::client::get_route(addr, "/hello").await
    }

    /// `node`'s public route answers `version`'s body and identity. Asked
    /// up to [`ROUTE_ATTEMPTS`] times: on a lossy link one GET may time out,
    /// but any answer that is not `version` fails at once.
    pub async fn assert_serves(&self, node: &str, version: &str) -> anyhow::Result<()> {
        let want = self.digest(version).to_hex();
        for _ in 0..ROUTE_ATTEMPTS {
            let Some(answer) = self.public(node).await else {
                tokio::time::sleep(Duration::from_millis(POLL_MS)).await;
                continue;
            };
            let ok = answer.status == 200
                && answer.body == format!("hello from {version}")
                && answer.identity.as_deref() == Some(want.as_str());
            ensure!(ok, "{node} should serve {version}: {answer:?}");
            return Ok(());
        }
        bail!("{node}'s public route did not answer in {ROUTE_ATTEMPTS} attempts")
    }

    /// The log's last sequence once it stayed unchanged for `quiet_ms`.
    pub async fn quiet_sequence(&self, quiet_ms: u64, ms: u64) -> anyhow::Result<Option<u64>> {
        let deadline = Instant::now() + Duration::from_millis(ms);
        let mut last = self.status().await?.last_sequence;
        let mut since = Instant::now();
        loop {
            tokio::time::sleep(Duration::from_millis(POLL_MS)).await;
            let now = self.status().await?.last_sequence;
            if now != last {
                last = now;
                since = Instant::now();
            } else if since.elapsed() >= Duration::from_millis(quiet_ms) {
                return Ok(last);
            }
            ensure!(Instant::now() < deadline, "the log never went quiet");
        }
    }

    /// Stop the controller, then `fleetweft log verify` must pass on its log.
    /// With three controllers: stop them all, then verify the log in etcd
    /// (the members still run; the teardown stops them).
    pub async fn verify_log(&mut self) -> anyhow::Result<String> {
        if self.children.contains_key("controller") {
            self.kill("controller").await?;
        }
        let mut cmd = Command::new(&self.bins.fleetweft);
        match self.layout {
            Layout::Single => {
                cmd.args(["log", "verify", "--data"])
                    .arg(self.controller_data().join("log"));
            }
            Layout::Ha => {
                self.kill_controllers().await?;
                cmd.args(self.etcd_log_args("verify"));
                if self.archiving.is_some() {
                    cmd.arg("--deep");
                }
            }
        }
        let out = tokio::time::timeout(Duration::from_secs(60), cmd.kill_on_drop(true).output())
            .await
            .context("log verify hung")??;
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        ensure!(out.status.success(), "fleetweft log verify failed: {text}");
        Ok(text)
    }

    /// `GET /metrics` of the controller.
    pub async fn metrics(&self) -> anyhow::Result<String> {
        Ok(self.api.get_text("/metrics").await?)
    }

    /// Start a stand-in HTTP server on `node`'s public port (inside its
    /// namespace) that answers `GET /hello` with 200, `body` and
    /// `X-Fleetweft-Release: identity`: a route answering as another release.
    /// The node's agent must be stopped first (it holds the port).
    pub fn start_standin(&mut self, node: &str, body: &str, identity: &str) -> anyhow::Result<()> {
        let host = &node[node.len() - 1..];
        let ns = self.net.host(host)?.ns.clone();
        // One line each: a `\` line continuation would eat the indentation.
        let script = [
            "import http.server".to_string(),
            "class H(http.server.BaseHTTPRequestHandler):".to_string(),
            "    def do_GET(self):".to_string(),
            format!("        b = {body:?}.encode()"),
            "        self.send_response(200)".to_string(),
            format!("        self.send_header('X-Fleetweft-Release', {identity:?})"),
            "        self.send_header('Content-Length', str(len(b)))".to_string(),
            "        self.end_headers()".to_string(),
            "        self.wfile.write(b)".to_string(),
            "    def log_message(self, *a):".to_string(),
            "        pass".to_string(),
            format!(
                "http.server.ThreadingHTTPServer(('0.0.0.0', {PUBLIC_PORT}), H).serve_forever()"
            ),
        ]
        .join("\n");
        let path = self.dir.join(format!("standin-{node}.py"));
        std::fs::write(&path, script)?;
        let python = PathBuf::from("/usr/bin/python3");
        self.spawn_in(
            &format!("standin-{node}"),
            &ns,
            &python,
            &[path.display().to_string()],
        )
    }

    /// Start `argv` by hand inside `node`'s network namespace, as an
    /// operator on the node would: in `cwd`, with exactly `env` (nothing of
    /// the harness's environment), as child `name` of the harness.
    pub fn start_by_hand(
        &mut self,
        node: &str,
        name: &str,
        cwd: &Path,
        env: &[String],
        argv: &[&str],
    ) -> anyhow::Result<()> {
        let ns = self.net.host(host_of(node)?)?.ns.clone();
        // `env -i -C DIR K=V... CMD`: execs in turn, so the child's pid is
        // the app's own.
        let mut args = vec![
            "-i".to_string(),
            "-C".to_string(),
            cwd.display().to_string(),
        ];
        args.extend(env.iter().cloned());
        args.extend(argv.iter().map(|a| a.to_string()));
        self.spawn_in(name, &ns, Path::new("/usr/bin/env"), &args)
    }

    /// The working directory of `node`'s running app of `release` (its
    /// release directory, where the app file that is started lives).
    pub fn app_dir(&self, node: &str, release: Digest) -> Option<PathBuf> {
        let data = self.dir.join(format!("{node}-data"));
        let hex = release.to_hex();
        processes_under(&data)
            .into_iter()
            .find(|(_, cmdline, cwd)| {
                cmdline.contains("app.py") && cwd.to_string_lossy().contains(&hex)
            })
            .map(|(_, _, cwd)| cwd)
    }

    /// Pids of app processes (`app.py`) running from `node`'s data
    /// directory for `release`.
    pub fn app_pids(&self, node: &str, release: Digest) -> Vec<u32> {
        let data = self.dir.join(format!("{node}-data"));
        let hex = release.to_hex();
        processes_under(&data)
            .into_iter()
            .filter(|(_, cmdline, cwd)| {
                cmdline.contains("app.py") && cwd.to_string_lossy().contains(&hex)
            })
            .map(|(pid, _, _)| pid)
            .collect()
    }
}

/// The scenario host of `node`: the letter of `node-<letter>`.
/// `fleetweft controller --config CONFIG`, with fault injection allowed
/// when `faults` switch any on.
fn controller_args(config: &Path, faults: &ControllerFaults) -> Vec<String> {
    let mut args = vec![
        "controller".to_string(),
        "--config".into(),
        config.display().to_string(),
    ];
    if faults.any() {
        args.push("--allow-fault-injection".into());
    }
    args
}

fn host_of(node: &str) -> anyhow::Result<&str> {
    match node.strip_prefix("node-") {
        Some(letter) if letter.len() == 1 && letter.bytes().all(|b| b.is_ascii_lowercase()) => {
            Ok(letter)
        }
        _ => bail!("scenario node {node:?} is not node-<letter>"),
    }
}

/// Processes whose command line or working directory mentions `dir`:
/// (pid, command line, cwd).
pub fn processes_under(dir: &Path) -> Vec<(u32, String, PathBuf)> {
    let me = std::process::id();
    let needle = dir.display().to_string();
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let cmdline = std::fs::read(entry.path().join("cmdline"))
            .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
            .unwrap_or_default();
        if cmdline.is_empty() {
            continue; // a zombie or a kernel thread
        }
        let cwd = std::fs::read_link(entry.path().join("cwd")).unwrap_or_default();
        if cmdline.contains(&needle) || cwd.starts_with(dir) {
            found.push((pid, cmdline, cwd));
        }
    }
    found
}

/// Poll `check` until true (bounded by `ms`).
pub async fn wait_for<F, Fut>(what: &str, ms: u64, check: F) -> anyhow::Result<()>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_millis(ms);
    while !check().await {
        if Instant::now() > deadline {
            bail!("timed out after {ms} ms waiting for: {what}");
        }
        tokio::time::sleep(Duration::from_millis(POLL_MS)).await;
    }
    Ok(())
}

/// The rollout `id`.
pub fn rollout<'a>(s: &'a FleetView, id: &str) -> Option<&'a RolloutDto> {
    s.rollouts.iter().find(|r| r.id == id)
}

/// Whether rollout `id` has status `status`.
pub fn rollout_is(s: &FleetView, id: &str, status: &str) -> bool {
    rollout(s, id).is_some_and(|r| r.status == status)
}

/// The op of rollout `id` on `node`.
pub fn op_of<'a>(s: &'a FleetView, id: &str, node: &str) -> Option<&'a OpDto> {
    s.ops.iter().find(|o| o.rollout == id && o.node == node)
}

/// Whether every node is connected.
pub fn all_connected(s: &FleetView) -> bool {
    s.nodes.iter().all(|n| n.connected)
}

/// Whether `node` is connected.
pub fn connected(s: &FleetView, node: &str) -> bool {
    s.nodes.iter().any(|n| n.name == node && n.connected)
}

/// How many commit decisions were stored for `op`, and how many replays
/// carried a decision different from the stored one.
pub fn decisions(events: &[EventDto], op: &str) -> (usize, usize) {
    let mut stored = None;
    let mut decided = 0;
    let mut differing = 0;
    for e in events {
        match &e.event {
            Event::CommitDecided { op: o, decision } if o.to_string() == op => {
                decided += 1;
                stored = Some(*decision);
            }
            Event::CommitReplayed { op: o, decision }
                if o.to_string() == op && stored != Some(*decision) =>
            {
                differing += 1;
            }
            _ => {}
        }
    }
    (decided, differing)
}

/// How many replays of a stored decision were logged for `op`.
pub fn replays(events: &[EventDto], op: &str) -> usize {
    events
        .iter()
        .filter(|e| matches!(&e.event, Event::CommitReplayed { op: o, .. } if o.to_string() == op))
        .count()
}

/// The largest number of ops of rollout `id` holding a slot at once,
/// replayed from the log: a grant takes a slot, only settling frees it.
pub fn max_slots_held(events: &[EventDto], id: &str) -> usize {
    let mut held = std::collections::HashSet::new();
    let mut max = 0;
    for e in events {
        match &e.event {
            Event::OpGranted { op, rollout, .. } if rollout.to_string() == id => {
                held.insert(op.to_string());
                max = max.max(held.len());
            }
            Event::OpSettled { op, .. } => {
                held.remove(&op.to_string());
            }
            _ => {}
        }
    }
    max
}

/// Re-exported for scenarios.
pub use net::Direction;
