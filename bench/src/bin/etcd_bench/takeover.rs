//! Takeover time of a hot standby (issue #14 benchmark): leader SIGKILL to
//! the new leader's first grant, over many kills, broken down by phase.
//!
//! Two real controller daemons (`fleetweft controller`, from next to this
//! binary) on one prefix of the cluster, a bundle uploaded to both, and
//! `kills + 1` nodes enrolled by `[[nodes]]` (no agents: a grant needs
//! none). Each round: wait until the standby has caught up with the
//! leader's log sequence, SIGKILL the leader, then poll (every
//! [`POLL_MS`]) in order for
//! 1. **lease expiry**: the leader key `P/leader` gone (etcd deleted it
//!    with the dead leader's lease; read through etcd's JSON gateway);
//! 2. **election**: the key back, created by the standby's campaign;
//! 3. **take over**: the standby's `/api/status` says `leader` (it swapped
//!    in the fenced log, read the tail, re-armed deadlines);
//! 4. **first grant**: a rollout start with a fresh canary, sent to it
//!    until accepted; the reply comes once the start and the canary's
//!    grant (one append) are committed on a quorum.
//!
//! Then the killed controller is started again (a standby) for the next
//! round. Each phase is measured from the end of the one before, so the
//! phases add up to the total; a phase's resolution is one poll.
//!
//! **Agents back** (issue #26 item 6), measured alongside the phases from
//! the same SIGKILL: `agents` real `fleetweft-agent` processes (default
//! timing), each listing both controllers, and the time until the new
//! leader's `/api/status` says `leader` with every one of them connected.
//! Each round starts only once every agent is connected to the leader.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use api::client::ApiClient;
use demo::quickstart::{EtcdLog, FleetLayout, HaController};
use tokio::process::Child;

/// Poll interval of every phase.
const POLL_MS: u64 = 5;
/// Longest one phase may take before the round is declared stuck.
const PHASE_MAX_MS: u64 = 60_000;

/// One round's phase durations, milliseconds.
#[derive(Clone, Copy, Debug, Default)]
pub struct Round {
    expiry_ms: f64,
    election_ms: f64,
    take_over_ms: f64,
    grant_ms: f64,
    /// Inside the take over: from the new leader's "elected" log line to
    /// its "took over" line (opening the fenced log, which probes etcd's
    /// limits, then the tail read and re-armed deadlines).
    promote_ms: f64,
    /// From the SIGKILL to every agent connected to the new leader
    /// (measured on its own, not one of the phases above).
    agents_ms: f64,
}

impl Round {
    fn total_ms(&self) -> f64 {
        self.expiry_ms + self.election_ms + self.take_over_ms + self.grant_ms
    }
}

/// A controller daemon of the bench.
struct Daemon {
    spec: HaController,
    config: PathBuf,
    api: ApiClient,
    child: Option<Child>,
    log: PathBuf,
    starts: u32,
}

impl Daemon {
    fn start(&mut self, exe: &Path) -> anyhow::Result<()> {
        self.starts += 1;
        let args = [
            "controller".to_string(),
            "--config".to_string(),
            self.config.display().to_string(),
        ];
        self.log = self
            .config
            .with_file_name(format!("{}-{}.log", self.spec.name, self.starts));
        self.child = Some(demo::spawn(exe, &args, &self.log)?);
        Ok(())
    }

    async fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.start_kill();
            let _ = child.wait().await;
        }
    }

    async fn status(&self) -> Option<serde_json::Value> {
        self.api.get("/api/status").await.ok()
    }
}

/// What the bench needs to run rounds.
struct Setup {
    daemons: Vec<Daemon>,
    exe: PathBuf,
    release: String,
    /// The canaries of the rounds' rollouts (enrolled, no agent).
    nodes: Vec<String>,
    /// The agent processes, killed on drop; they list both controllers.
    agents: Vec<Child>,
    /// etcd's JSON gateway of the first member, and the leader key.
    gateway: ApiClient,
    leader_key: String,
}

/// What one run measures.
#[derive(Clone, Copy, Debug)]
pub struct Plan {
    /// The controllers' lease TTL.
    pub lease_ttl_ms: u64,
    /// Leader SIGKILLs, one round each.
    pub kills: usize,
    /// Agent processes listing both controllers.
    pub agents: usize,
}

/// Runs `plan.kills` rounds on `endpoints`; one [`Round`] per kill. `dir`
/// receives the fleet's files and the daemons' and agents' logs.
pub async fn measure(dir: &Path, endpoints: &[String], plan: Plan) -> anyhow::Result<Vec<Round>> {
    let kills = plan.kills;
    let mut setup = set_up(dir, endpoints, plan).await?;
    let mut rounds = Vec::new();
    let mut leader = 0;
    for kill in 0..kills {
        let standby = 1 - leader;
        let round = one_round(&mut setup, leader, standby, kill + 1)
            .await
            .with_context(|| format!("round {} (logs in {})", kill + 1, dir.display()))?;
        eprintln!(
            "kill {:>2}: expiry {:>5.0} ms, election {:>4.0} ms, take over {:>4.0} ms (promote {:>4.0}), grant {:>4.0} ms, total {:>5.0} ms; agents back {:>5.0} ms",
            kill + 1,
            round.expiry_ms,
            round.election_ms,
            round.take_over_ms,
            round.promote_ms,
            round.grant_ms,
            round.total_ms(),
            round.agents_ms
        );
        rounds.push(round);
        setup.daemons[leader].start(&setup.exe)?;
        wait_role(&setup.daemons[leader], "standby").await?;
        leader = standby;
    }
    for agent in &mut setup.agents {
        let _ = agent.start_kill();
        let _ = agent.wait().await;
    }
    for daemon in &mut setup.daemons {
        daemon.kill().await;
    }
    Ok(rounds)
}

/// The binary `name` next to this one.
fn sibling(name: &str) -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()?.with_file_name(name);
    if !exe.exists() {
        bail!(
            "{} not found: build it with `cargo build --release --workspace --bins`",
            exe.display()
        );
    }
    Ok(exe)
}

async fn set_up(dir: &Path, endpoints: &[String], plan: Plan) -> anyhow::Result<Setup> {
    let exe = sibling("fleetweft")?;
    let agent_exe = sibling("fleetweft-agent")?;
    let nodes: Vec<String> = (0..=plan.kills).map(|i| format!("n{i:03}")).collect();
    let agent_nodes: Vec<String> = (0..plan.agents).map(|i| format!("agent-{i:02}")).collect();
    let enrolled: Vec<String> = nodes.iter().chain(&agent_nodes).cloned().collect();
    let public_ports = enrolled
        .iter()
        .map(|_| demo::ports::free_port())
        .collect::<Result<Vec<_>, _>>()?;
    let layout = FleetLayout {
        dir: dir.to_path_buf(),
        nodes: enrolled.clone(),
        quic_port: 0,
        api_port: 0,
        public_ports,
    };
    let (pki, signing) = layout.write_pki_and_keys()?;
    let token = protocol::pki::load_operator_token(&pki.operator_token())?;
    let prefix = format!("/fleetweft-takeover-bench/{}", std::process::id());
    let log = EtcdLog {
        endpoints: endpoints.to_vec(),
        prefix: prefix.clone(),
        lease_ttl_ms: plan.lease_ttl_ms,
    };
    let mut daemons = ["a", "b"]
        .map(|name| daemon(name, &layout, &pki, &log, &token))
        .into_iter()
        .collect::<anyhow::Result<Vec<_>>>()?;
    daemons[0].start(&exe)?;
    wait_role(&daemons[0], "leader").await?;
    let bytes = demo::sign_hello(&signing, "v1")?;
    let answer: serde_json::Value = daemons[0].api.post_bytes("/api/bundles", bytes).await?;
    let release = answer["digest"]
        .as_str()
        .context("the bundle upload's answer has no digest")?
        .to_string();
    // Bundles are files on each controller host.
    demo::ha::copy_bundles(
        &layout.ha_controller_data("a"),
        &layout.ha_controller_data("b"),
    )?;
    daemons[1].start(&exe)?;
    wait_role(&daemons[1], "standby").await?;
    let agents = start_agents(&layout, &pki, &daemons, &agent_nodes, &agent_exe)?;
    Ok(Setup {
        daemons,
        exe,
        release,
        nodes,
        agents,
        gateway: ApiClient::new(format!("http://{}", endpoints[0]), None),
        leader_key: format!("{prefix}/leader"),
    })
}

/// One `fleetweft-agent` per name in `agents`, with the default timing,
/// listing every controller of `daemons` in that order.
fn start_agents(
    layout: &FleetLayout,
    pki: &protocol::pki::FleetPki,
    daemons: &[Daemon],
    agents: &[String],
    exe: &Path,
) -> anyhow::Result<Vec<Child>> {
    let controllers: Vec<HaController> = daemons.iter().map(|d| d.spec.clone()).collect();
    let mut children = Vec::new();
    for node in agents {
        let index = layout
            .nodes
            .iter()
            .position(|n| n == node)
            .context("an agent that is not enrolled")?;
        let port = layout.public_ports[index];
        let text = layout.ha_agent_toml(pki, node, port, &controllers);
        let config = layout.agent_config(node);
        std::fs::write(&config, text).with_context(|| format!("writing {}", config.display()))?;
        let args = ["--config".to_string(), config.display().to_string()];
        let log = layout.dir.join(format!("{node}.log"));
        children.push(demo::spawn(exe, &args, &log)?);
    }
    Ok(children)
}

/// Controller `name`'s config written, not started yet.
fn daemon(
    name: &str,
    layout: &FleetLayout,
    pki: &protocol::pki::FleetPki,
    log: &EtcdLog,
    token: &str,
) -> anyhow::Result<Daemon> {
    let spec = HaController {
        name: name.to_string(),
        quic_port: demo::ports::free_port()?,
        api_port: demo::ports::free_port()?,
    };
    let config = layout.write_ha_controller_config(pki, &spec, log, None)?;
    let api = ApiClient::new(spec.api_url(), Some(token.to_string()));
    Ok(Daemon {
        spec,
        config,
        api,
        child: None,
        log: PathBuf::new(),
        starts: 0,
    })
}

async fn one_round(
    setup: &mut Setup,
    leader: usize,
    standby: usize,
    canary: usize,
) -> anyhow::Result<Round> {
    // The standby has folded everything the leader appended: the takeover
    // reads a short tail, as in steady operation; every agent is on the
    // leader.
    wait_caught_up(&setup.daemons[leader], &setup.daemons[standby]).await?;
    wait_agents(&setup.daemons[leader], setup.agents.len(), Instant::now()).await?;
    let old_key = leader_key_revision(setup)
        .await?
        .context("no leader key before the kill")?;
    setup.daemons[leader].kill().await;
    let killed = Instant::now();
    let setup = &*setup;
    let (phases, agents) = tokio::join!(
        phases(setup, standby, canary, &old_key, killed),
        wait_agents(&setup.daemons[standby], setup.agents.len(), killed),
    );
    let mut round = phases?;
    round.agents_ms = agents?;
    Ok(round)
}

/// Polls `daemon` until it answers as the leader with `agents` agents
/// connected; the milliseconds since `since`.
async fn wait_agents(daemon: &Daemon, agents: usize, since: Instant) -> anyhow::Result<f64> {
    loop {
        let status = daemon.status().await;
        let back = status.is_some_and(|s| {
            s["role"] == "leader" && s["nodes"]["connected"].as_u64() == Some(agents as u64)
        });
        if back {
            return Ok(since.elapsed().as_secs_f64() * 1_000.0);
        }
        stuck(since, "every agent to connect to the leader")?;
        tokio::time::sleep(Duration::from_millis(POLL_MS)).await;
    }
}

/// The phases of one round, from the SIGKILL at `killed`.
async fn phases(
    setup: &Setup,
    standby: usize,
    canary: usize,
    old_key: &str,
    killed: Instant,
) -> anyhow::Result<Round> {
    let poll = Duration::from_millis(POLL_MS);
    let mut round = Round::default();
    let mut mark = killed;
    let phase = |mark: &mut Instant| -> f64 {
        let now = Instant::now();
        let ms = (now - *mark).as_secs_f64() * 1_000.0;
        *mark = now;
        ms
    };
    // 1. The dead leader's lease expires: etcd deletes the key.
    while leader_key_revision(setup).await?.as_deref() == Some(old_key) {
        stuck(killed, "the dead leader's key to go")?;
        tokio::time::sleep(poll).await;
    }
    round.expiry_ms = phase(&mut mark);
    // 2. The standby's campaign creates the key again.
    while leader_key_revision(setup).await?.is_none() {
        stuck(killed, "the standby's campaign to create the key")?;
        tokio::time::sleep(poll).await;
    }
    round.election_ms = phase(&mut mark);
    // 3. The standby answers as the leader.
    let daemon = &setup.daemons[standby];
    while daemon.status().await.is_none_or(|s| s["role"] != "leader") {
        stuck(killed, "the standby to answer as leader")?;
        tokio::time::sleep(poll).await;
    }
    round.take_over_ms = phase(&mut mark);
    // 4. Its first grant, acknowledged once durable.
    first_grant(setup, standby, canary, killed).await?;
    round.grant_ms = phase(&mut mark);
    round.promote_ms = promote_ms(&setup.daemons[standby].log)?;
    Ok(round)
}

/// Milliseconds between the last "elected" and the last "took over" line
/// of a controller's log (tracing's UTC timestamps, microseconds).
fn promote_ms(log: &Path) -> anyhow::Result<f64> {
    let text =
        std::fs::read_to_string(log).with_context(|| format!("reading {}", log.display()))?;
    let at = |needle: &str| -> anyhow::Result<f64> {
        let line = text
            .lines()
            .rev()
            .find(|l| l.contains(needle))
            .with_context(|| format!("no {needle:?} line in {}", log.display()))?;
        seconds_of_day(line).with_context(|| format!("no timestamp on {line:?}"))
    };
    let elected = at("elected: this controller leads")?;
    let took_over = at("took over as leader")?;
    // Across midnight the second time of day is the smaller one.
    Ok((took_over - elected).rem_euclid(86_400.0) * 1_000.0)
}

/// `2026-12-02T15:14:50.884479Z ...` -> seconds since midnight.
fn seconds_of_day(line: &str) -> Option<f64> {
    let time = line.get(11..)?.split('Z').next()?;
    let mut parts = time.split(':');
    let hours: f64 = parts.next()?.parse().ok()?;
    let minutes: f64 = parts.next()?.parse().ok()?;
    let seconds: f64 = parts.next()?.parse().ok()?;
    Some(hours * 3_600.0 + minutes * 60.0 + seconds)
}

/// Sends a rollout start with node `canary` to the new leader until it is
/// accepted; checks the acknowledged append holds the canary's grant.
async fn first_grant(
    setup: &Setup,
    leader: usize,
    canary: usize,
    killed: Instant,
) -> anyhow::Result<()> {
    let start = serde_json::json!({
        "release": setup.release,
        "canary": setup.nodes[canary],
        "slots": 1,
    });
    let api = &setup.daemons[leader].api;
    let reply = loop {
        match api
            .post_json::<serde_json::Value>("/api/rollouts", &start)
            .await
        {
            Ok(reply) => break reply,
            Err(err) => {
                stuck(killed, &format!("the first grant (last answer: {err})"))?;
                tokio::time::sleep(Duration::from_millis(POLL_MS)).await;
            }
        }
    };
    let granted = reply["events"].as_array().is_some_and(|events| {
        events.iter().any(|e| {
            e["text"]
                .as_str()
                .is_some_and(|t| t.starts_with("grant op"))
        })
    });
    if !granted {
        bail!("the rollout start was accepted without a grant: {reply}");
    }
    Ok(())
}

fn stuck(since: Instant, what: &str) -> anyhow::Result<()> {
    if since.elapsed() > Duration::from_millis(PHASE_MAX_MS) {
        bail!("waited {PHASE_MAX_MS} ms for {what}");
    }
    Ok(())
}

async fn wait_role(daemon: &Daemon, role: &str) -> anyhow::Result<()> {
    let started = Instant::now();
    while daemon.status().await.is_none_or(|s| s["role"] != role) {
        if started.elapsed() > Duration::from_millis(PHASE_MAX_MS) {
            bail!(
                "controller {} did not answer as {role}; see {}",
                daemon.spec.name,
                daemon.log.display()
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

async fn wait_caught_up(leader: &Daemon, standby: &Daemon) -> anyhow::Result<()> {
    let started = Instant::now();
    loop {
        let (l, s) = (leader.status().await, standby.status().await);
        let sequence =
            |s: &Option<serde_json::Value>| s.as_ref().map(|s| s["log_sequence"].clone());
        if s.as_ref().is_some_and(|s| s["role"] == "standby") && sequence(&l) == sequence(&s) {
            return Ok(());
        }
        if started.elapsed() > Duration::from_millis(PHASE_MAX_MS) {
            bail!("the standby never caught up with the leader: {l:?} / {s:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The leader key's create revision, or `None` when there is no key, read
/// through etcd's JSON gateway (`/v3/kv/range`, a linearizable read).
async fn leader_key_revision(setup: &Setup) -> anyhow::Result<Option<String>> {
    let body = serde_json::json!({ "key": base64(setup.leader_key.as_bytes()) });
    let answer: serde_json::Value = setup
        .gateway
        .post_json("/v3/kv/range", &body)
        .await
        .context("reading the leader key through etcd's gateway")?;
    Ok(answer["kvs"]
        .as_array()
        .and_then(|kvs| kvs.first())
        .map(|kv| kv["create_revision"].to_string()))
}

/// Standard base64 with padding (the gateway's encoding of bytes fields).
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The `q` quantile (0..=1) of `values` by the nearest-rank method.
pub fn quantile(values: &[f64], q: f64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (q * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted[rank.min(sorted.len()) - 1]
}

/// A table row: the phase's name and how to read it from a round.
type Phase = (&'static str, fn(&Round) -> f64);

/// The Markdown table of `rounds`: p50, p99 and max of each phase.
pub fn table(rounds: &[Round], plan: Plan) -> String {
    let phases: [Phase; 7] = [
        ("lease expiry (kill -> leader key gone)", |r| r.expiry_ms),
        ("election (key gone -> standby's key)", |r| r.election_ms),
        (
            "take over (-> role leader: tail read, deadlines re-armed)",
            |r| r.take_over_ms,
        ),
        (
            "first grant (-> rollout start + grant durable, acknowledged)",
            |r| r.grant_ms,
        ),
        ("**total: SIGKILL -> first grant**", Round::total_ms),
        (
            "(inside take over: elected -> took over, the new leader's own log)",
            |r| r.promote_ms,
        ),
        (
            "**agents back: SIGKILL -> every agent connected to the new leader**",
            |r| r.agents_ms,
        ),
    ];
    let mut out = format!(
        "{} kills, lease TTL {} ms, {} agents, poll {POLL_MS} ms\n\n| phase | p50 ms | p99 ms | max ms |\n|---|---:|---:|---:|\n",
        rounds.len(),
        plan.lease_ttl_ms,
        plan.agents
    );
    for (name, of) in phases {
        let values: Vec<f64> = rounds.iter().map(of).collect();
        out.push_str(&format!(
            "| {name} | {:.0} | {:.0} | {:.0} |\n",
            quantile(&values, 0.5),
            quantile(&values, 0.99),
            quantile(&values, 1.0)
        ));
    }
    out
}
