//! `fleetweft demo --ha`: controller high availability on etcd (issue #14),
//! narrated. The demo starts its own 3-member etcd cluster on loopback, two
//! controllers on one log prefix (one leads, the other is a hot standby)
//! and three agents that list both. It installs v1 everywhere, rolls v2
//! out through the canary, and SIGKILLs the leader right after the
//! canary's commit decision is stored (its reply dropped by the leader's
//! fault switch, so no node has heard it): the standby is elected once the
//! leader's lease runs out, reads the log's tail, replays the stored
//! decision when the canary asks again (never deciding anew) and finishes
//! the rollout. It ends with the proofs, the handover report, and the log
//! in etcd checked: chain verified, one grant per node per rollout, one
//! decision per op and every replay equal to it.
//!
//! Every process it starts is stopped when it ends (or is interrupted);
//! where util-linux's `setpriv` is installed they are also started with a
//! parent-death signal, so the kernel kills them even when the demo itself
//! is SIGKILLed.

use crate as demo;
use crate::quickstart::{EtcdLog, FleetLayout, HaController};
use crate::{say, DemoOptions, Fleet, Prepared, NODES};
use anyhow::{bail, Context};
use api::client::{ApiClient, FleetView};
use api::view::EventDto;
use model::controller::Event;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Members of the demo's etcd cluster: the smallest that survives one loss.
pub const ETCD_MEMBERS: usize = 3;
/// The controllers' leadership lease: a takeover waits about this long
/// (etcd's minimum is 1.5 election timeouts, 0.75 s with the launcher's
/// loopback timers).
pub const HA_LEASE_TTL_MS: u64 = 2_000;
/// The log's key prefix in etcd.
pub const HA_PREFIX: &str = "/fleetweft/demo";
/// The controllers, in the order the agents list them (the first leads).
pub const CONTROLLERS: [&str; 2] = ["a", "b"];
/// How long the cluster may take to answer a quorum read after start.
const ETCD_HEALTH_WAIT_MS: u64 = 30_000;
/// Pause between two health probes of the cluster.
const ETCD_HEALTH_POLL_MS: u64 = 200;
/// The agents' retry of an unanswered request: longer than the demo needs
/// to kill the leader after the decision is stored, so the canary asks
/// again only once the leader is gone (then it asks the new leader).
const AGENT_RETRY_MS: u64 = 3_000;
/// The agents' reconnect backoff bounds: a dead leader is left quickly.
const AGENT_BACKOFF_BASE_MS: u64 = 100;
const AGENT_BACKOFF_MAX_MS: u64 = 1_000;
/// How often the demo looks for the stored decision (the kill must come
/// well before [`AGENT_RETRY_MS`]).
const DECISION_POLL_MS: u64 = 20;
/// How often the demo reads a controller's role.
const ROLE_POLL_MS: u64 = 50;

/// The demo's own etcd cluster on loopback, started by the one etcd
/// launcher (`etcdkit`). Stopped on drop; its data (preallocated WAL
/// files, 64 MiB per member) is removed then, its logs are kept.
pub struct EtcdCluster {
    members: etcdkit::Cluster,
}

/// util-linux's setpriv (Debian installs util-linux on every system).
const SETPRIV_PATH: &str = "/usr/bin/setpriv";

/// `exe` started through `setpriv --pdeathsig KILL` when util-linux's
/// setpriv is there: the kernel kills the process when the demo's main
/// thread (which starts every process) ends, however it ends. Without
/// setpriv, only the demo's own stop path stops it.
pub(crate) fn tied(exe: &Path, args: &[String]) -> (PathBuf, Vec<String>) {
    let setpriv = Path::new(SETPRIV_PATH);
    if setpriv.exists() {
        let mut all = vec![
            "--pdeathsig".to_string(),
            "KILL".to_string(),
            "--".to_string(),
            exe.display().to_string(),
        ];
        all.extend(args.iter().cloned());
        (setpriv.to_path_buf(), all)
    } else {
        (exe.to_path_buf(), args.to_vec())
    }
}

impl EtcdCluster {
    /// Starts [`ETCD_MEMBERS`] members with data under `data` and logs in
    /// `logs`, on ports picked now; [`EtcdCluster::wait_healthy`] waits for
    /// them.
    pub fn start(data: &Path, logs: &Path) -> anyhow::Result<EtcdCluster> {
        let spec = etcdkit::ClusterSpec {
            members: ETCD_MEMBERS,
            data_dir: data.to_path_buf(),
            log_dir: logs.to_path_buf(),
            log_prefix: "etcd-".into(),
            token: format!("fleetweft-demo-{}", std::process::id()),
            ports: etcdkit::Ports::Free,
            // Short raft timers on loopback, so a lease TTL of a couple of
            // seconds is honoured, and the transaction limits the log's
            // default atomic batch needs (docs/operations.md, "etcd's
            // limits and atomic batches").
            tuning: etcdkit::Tuning::loopback(),
            tls: None,
            lifetime: etcdkit::Lifetime::TiedToProcess,
        };
        let members = etcdkit::Cluster::start(spec).map_err(|e| match e {
            etcdkit::ClusterError::NotInstalled => anyhow::anyhow!(
                "`etcd` is not on PATH: `demo --ha` starts its own 3-member etcd cluster; \
                 install Debian's etcd-server (`bash scripts/etcd.sh install etcd` as root)"
            ),
            e => anyhow::anyhow!(e),
        })?;
        Ok(EtcdCluster { members })
    }

    /// Client endpoints, `127.0.0.1:PORT`.
    pub fn endpoints(&self) -> Vec<String> {
        self.members.endpoints()
    }

    /// Waits until the cluster answers a quorum read (etcd's `/health`);
    /// a member that exits is named with the end of its log.
    pub async fn wait_healthy(&mut self) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_millis(ETCD_HEALTH_WAIT_MS);
        loop {
            if self.members.healthy() {
                return Ok(());
            }
            self.members.check_alive()?;
            if Instant::now() > deadline {
                bail!(
                    "the etcd cluster did not answer a quorum read within {ETCD_HEALTH_WAIT_MS} ms; \
                     see {}",
                    self.members.log_of(0).display()
                );
            }
            tokio::time::sleep(Duration::from_millis(ETCD_HEALTH_POLL_MS)).await;
        }
    }

    /// Kills every member, waits for it, and removes the cluster's data
    /// (the logs stay). Idempotent.
    pub fn stop(&mut self) {
        self.members.stop_and_remove();
    }
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The HA fleet's processes and addresses, once up.
struct HaFleet {
    /// One API client per controller, in [`CONTROLLERS`] order.
    apis: Vec<ApiClient>,
    public_ports: Vec<u16>,
    log: EtcdLog,
}

/// The story of `demo --ha`; Ok(true) when the standby finished the
/// rollout with every node verified and the log in etcd sound.
pub(crate) async fn story(
    options: &DemoOptions,
    fleet: &mut Fleet,
    etcd: &mut Option<EtcdCluster>,
) -> anyhow::Result<bool> {
    let prepared = demo::prepare(options, "HA on etcd")?;
    let dir = prepared.dir.clone();
    let logs = dir.join("logs");
    std::fs::create_dir_all(&logs)?;

    say("[3] starting a 3-member etcd cluster on loopback: the log's replicated storage");
    let cluster = etcd.insert(EtcdCluster::start(&dir.join("etcd"), &logs)?);
    cluster.wait_healthy().await?;
    say(format!(
        "    members on {}; healthy (a quorum read answered)",
        cluster.endpoints().join(", ")
    ));
    let endpoints = cluster.endpoints();

    let (ha, mut seen) = start_ha_fleet(&prepared, endpoints, fleet).await?;
    let v1 = prepared.releases[0].1;
    let v2 = prepared.releases[1].1;
    let (a, b) = (&ha.apis[0], &ha.apis[1]);

    upload_bundles(&prepared, a).await?;

    say("\n[7] installing v1 everywhere on a: canary node-a, then node-b, node-c, one slot");
    demo::start_rollout(a, v1).await?;
    demo::wait_for(a, fleet, &mut seen, "rollout r0 completed", |s| {
        demo::rollout_status(s, "r0") == Some("completed")
    })
    .await?;

    kill_the_leader_mid_rollout(a, b, v2, fleet, &mut seen).await?;
    say(format!(
        "\n[10] the standby finishes r1 (events now read from b at {})",
        b.base()
    ));
    demo::wait_for(b, fleet, &mut seen, "rollout r1 completed on b", |s| {
        demo::rollout_status(s, "r1") == Some("completed")
    })
    .await?;
    let view: FleetView = b.fleet_view().await?;
    let connected = view.nodes.iter().filter(|n| n.connected).count();
    say(format!(
        "    {connected} of {} agents connected to b",
        NODES.len()
    ));

    let all_verified = demo::show_outcome(b, &ha.public_ports, 11).await?;
    let sound = show_log_in_etcd(&ha.log, 14).await?;
    let success = all_verified && sound;
    say(format!(
        "\ndemo {}",
        if success { "succeeded" } else { "FAILED" }
    ));
    if options.keep_running {
        say(format!(
            "fleet keeps running (API {}; controller a stays down); Ctrl-C stops it",
            b.base()
        ));
        std::future::pending::<()>().await;
    }
    Ok(success)
}

/// Step [6]: both releases uploaded to a, and copied into b's data
/// directory (bundles are files on each controller host; b, a standby,
/// takes no upload).
async fn upload_bundles(prepared: &Prepared, a: &ApiClient) -> anyhow::Result<()> {
    say("\n[6] uploading both bundles to a (the controller checks their signatures)");
    for (version, _, bytes) in &prepared.releases {
        let answer: serde_json::Value = a.post_bytes("/api/bundles", bytes.clone()).await?;
        say(format!(
            "    {version}: accepted as {}",
            answer["digest"].as_str().unwrap_or("?")
        ));
    }
    copy_bundles(
        &prepared.layout.ha_controller_data("a"),
        &prepared.layout.ha_controller_data("b"),
    )?;
    say("    copied into b's data directory too: bundles are files on each controller host");
    Ok(())
}

/// Steps [8] and [9]: v2 started on a, a SIGKILLed right after the
/// canary's decision is stored, b waited for until it leads (an error if
/// it does not within the step's time).
async fn kill_the_leader_mid_rollout(
    a: &ApiClient,
    b: &ApiClient,
    v2: model::Digest,
    fleet: &mut Fleet,
    seen: &mut u64,
) -> anyhow::Result<()> {
    say("\n[8] rolling out v2; a drops its first commit reply for v2 (its fault switch),");
    say("    so the canary's decision is stored but reaches no node, and a is killed right then");
    demo::start_rollout(a, v2).await?;
    let decided = wait_for_decision(a, fleet, seen).await?;
    let pid = fleet.kill("controller-a").await;
    let killed_at = Instant::now();
    say(format!(
        "    SIGKILL controller a (pid {}) right after #{decided} was stored",
        pid.map_or("?".into(), |p| p.to_string())
    ));
    take_over(b, killed_at, fleet).await
}

/// Steps [4] and [5]: the two controllers (a first, so it leads; then b,
/// a hot standby) and the three agents listing both; returns once a
/// reports every agent connected and b answers as a standby naming a.
async fn start_ha_fleet(
    prepared: &Prepared,
    endpoints: Vec<String>,
    fleet: &mut Fleet,
) -> anyhow::Result<(HaFleet, u64)> {
    let dir = &prepared.dir;
    let exe = std::env::current_exe().context("locating the fleetweft binary")?;
    let agent_exe = exe.with_file_name("fleetweft-agent");
    if !agent_exe.exists() {
        bail!(
            "{} not found: build it with `cargo build --release --workspace --bins` \
             (scripts/demo.sh does)",
            agent_exe.display()
        );
    }
    let public_ports: Vec<u16> = (0..NODES.len())
        .map(|_| crate::ports::free_port())
        .collect::<Result<_, _>>()?;
    let layout = FleetLayout {
        public_ports: public_ports.clone(),
        ..demo::layout_of(dir, 0, 0, &[])
    };
    let controllers: Vec<HaController> = CONTROLLERS
        .iter()
        .map(|name| {
            Ok(HaController {
                name: name.to_string(),
                quic_port: crate::ports::free_port()?,
                api_port: crate::ports::free_port()?,
            })
        })
        .collect::<anyhow::Result<_>>()?;
    let log = EtcdLog {
        endpoints,
        prefix: HA_PREFIX.to_string(),
        lease_ttl_ms: HA_LEASE_TTL_MS,
    };
    let apis = start_controllers(prepared, &layout, &controllers, &log, fleet).await?;
    say("\n[5] three agents, each listing both controllers: addrs = [a, b]");
    for (i, node) in NODES.iter().enumerate() {
        let mut text = layout.ha_agent_toml(&prepared.pki, node, public_ports[i], &controllers);
        text.push_str(&format!(
            "\n[timing]\nretry_ms = {AGENT_RETRY_MS}\nbackoff_base_ms = {AGENT_BACKOFF_BASE_MS}\nbackoff_max_ms = {AGENT_BACKOFF_MAX_MS}\n"
        ));
        let config = layout.agent_config(node);
        std::fs::write(&config, text).with_context(|| format!("writing {}", config.display()))?;
        let args = vec!["--config".to_string(), config.display().to_string()];
        let (program, args) = tied(&agent_exe, &args);
        fleet.push(node, &program, &args, dir.join(format!("logs/{node}.log")))?;
    }
    let mut seen = 0u64;
    demo::wait_for(
        &apis[0],
        fleet,
        &mut seen,
        "every agent connected to a",
        |s| s.nodes.len() == NODES.len() && s.nodes.iter().all(|n| n.connected),
    )
    .await?;
    say(format!("    logs in {}", dir.join("logs").display()));
    let ha = HaFleet {
        apis,
        public_ports,
        log,
    };
    Ok((ha, seen))
}

/// Step [4]: each controller started in turn, the first until it leads,
/// the next until it answers as a standby naming the leader; their API
/// clients, in `controllers` order.
async fn start_controllers(
    prepared: &Prepared,
    layout: &FleetLayout,
    controllers: &[HaController],
    log: &EtcdLog,
    fleet: &mut Fleet,
) -> anyhow::Result<Vec<ApiClient>> {
    let exe = std::env::current_exe().context("locating the fleetweft binary")?;
    say(format!(
        "\n[4] two controllers on one log (prefix {HA_PREFIX}, lease TTL {HA_LEASE_TTL_MS} ms)"
    ));
    let v2 = prepared.releases[1].1;
    let mut apis = Vec::new();
    for (i, controller) in controllers.iter().enumerate() {
        // Only a drops a reply: the fault that makes the kill land between
        // the stored decision and any node hearing it.
        let drop = (i == 0).then_some(v2);
        let config = layout.write_ha_controller_config(&prepared.pki, controller, log, drop)?;
        let mut args = vec![
            "controller".to_string(),
            "--config".into(),
            config.display().to_string(),
        ];
        if drop.is_some() {
            args.push("--allow-fault-injection".into());
        }
        let name = format!("controller-{}", controller.name);
        let (program, args) = tied(&exe, &args);
        let log_file = prepared.dir.join(format!("logs/{name}.log"));
        fleet.push(&name, &program, &args, log_file)?;
        let api = ApiClient::new(controller.api_url(), Some(prepared.token.clone()));
        let role = if i == 0 { "leader" } else { "standby" };
        let step = Duration::from_millis(demo::STEP_TIMEOUT_MS);
        let mut status = wait_role(&api, role, fleet, step).await?;
        // A standby learns where the leader is at its next campaign round.
        while role == "standby" && !status["leader"].is_string() {
            tokio::time::sleep(Duration::from_millis(ROLE_POLL_MS)).await;
            status = wait_role(&api, role, fleet, step).await?;
        }
        let what = match status["leader"].as_str() {
            Some(leader) if role == "standby" => format!("following the leader at {leader}"),
            _ => "elected: holds the lease on the leader key".to_string(),
        };
        say(format!(
            "    {}: {role} on {} ({what}, log sequence {})",
            controller.name,
            controller.api_url(),
            sequence(&status)
        ));
        apis.push(api);
    }
    Ok(apis)
}

/// The last log sequence a status says its controller folded.
fn sequence(status: &serde_json::Value) -> String {
    status["log_sequence"]
        .as_u64()
        .map_or("none (the log is empty)".to_string(), |s| s.to_string())
}

/// `/api/status` of one controller, as JSON; `None` if it does not answer.
async fn status(api: &ApiClient) -> Option<serde_json::Value> {
    api.get::<serde_json::Value>("/api/status").await.ok()
}

/// Waits until the controller behind `api` answers with `role`; its status.
async fn wait_role(
    api: &ApiClient,
    role: &str,
    fleet: &mut Fleet,
    wait_max: Duration,
) -> anyhow::Result<serde_json::Value> {
    let deadline = Instant::now() + wait_max;
    loop {
        if let Some(status) = status(api).await {
            if status["role"] == role {
                return Ok(status);
            }
        }
        fleet
            .check_alive()
            .with_context(|| format!("while waiting for {} to answer as {role}", api.base()))?;
        if Instant::now() > deadline {
            bail!(
                "timed out after {} ms waiting for {} to answer as {role}\n{}",
                wait_max.as_millis(),
                api.base(),
                fleet.log_tails(6)
            );
        }
        tokio::time::sleep(Duration::from_millis(ROLE_POLL_MS)).await;
    }
}

/// Narrates a's events until the first commit decision of r1 is stored;
/// its sequence.
async fn wait_for_decision(
    api: &ApiClient,
    fleet: &mut Fleet,
    seen: &mut u64,
) -> anyhow::Result<u64> {
    let deadline = Instant::now() + Duration::from_millis(demo::STEP_TIMEOUT_MS);
    let r1_started = *seen;
    loop {
        let path = format!("/api/events?from={seen}");
        if let Ok(events) = api.get::<Vec<EventDto>>(&path).await {
            for e in events {
                if !matches!(e.event, Event::NodeHello { .. }) {
                    say(format!("    #{:<3} {}", e.sequence, e.text));
                }
                *seen = e.sequence + 1;
                let decision = matches!(e.event, Event::CommitDecided { .. });
                if decision && e.sequence >= r1_started {
                    return Ok(e.sequence);
                }
            }
        }
        fleet
            .check_alive()
            .context("while waiting for the canary's commit decision")?;
        if Instant::now() > deadline {
            bail!(
                "timed out after {} ms waiting for the canary's commit decision\n{}",
                demo::STEP_TIMEOUT_MS,
                fleet.log_tails(6)
            );
        }
        tokio::time::sleep(Duration::from_millis(DECISION_POLL_MS)).await;
    }
}

/// Step [9]: b, a standby until now, is elected once a's lease runs out,
/// reads the log's tail and leads; an error if it does not within the
/// step's time.
async fn take_over(b: &ApiClient, killed_at: Instant, fleet: &mut Fleet) -> anyhow::Result<()> {
    say(format!(
        "\n[9] the standby takes over: a's lease ({HA_LEASE_TTL_MS} ms) must run out first"
    ));
    if let Some(s) = status(b).await {
        say(format!(
            "    b: role {}, leader {}, log sequence {}",
            s["role"].as_str().unwrap_or("?"),
            s["leader"].as_str().unwrap_or("unknown"),
            sequence(&s)
        ));
    }
    let s = wait_role(
        b,
        "leader",
        fleet,
        Duration::from_millis(demo::STEP_TIMEOUT_MS),
    )
    .await?;
    say(format!(
        "    b: role leader {} ms after the kill (elected, read the log's tail, re-armed the \
         deadlines of the ops holding a slot), log sequence {}",
        killed_at.elapsed().as_millis(),
        sequence(&s)
    ));
    say("    the agents move to b; the canary asks again for its decision: b replays the stored one");
    Ok(())
}

/// Copies every bundle file of the controller data directory `from` into
/// `to`'s (what an operator does for each controller host of an HA fleet).
pub fn copy_bundles(from: &Path, to: &Path) -> anyhow::Result<()> {
    let (from, to) = (from.join("bundles"), to.join("bundles"));
    std::fs::create_dir_all(&to).with_context(|| format!("creating {}", to.display()))?;
    for entry in std::fs::read_dir(&from).with_context(|| format!("reading {}", from.display()))? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        std::fs::copy(entry.path(), &target).with_context(|| {
            format!("copying {} to {}", entry.path().display(), target.display())
        })?;
    }
    Ok(())
}

/// What the log in etcd says about the story.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct LogCheck {
    /// Entries in the log (its chain verified on reading).
    pub(crate) entries: usize,
    /// Grants per (rollout, node); each must be 1.
    pub(crate) grants_twice: usize,
    /// Ops with a stored decision.
    pub(crate) decided: usize,
    /// Ops decided more than once (must be 0).
    pub(crate) decided_twice: usize,
    /// Replays of a stored decision, and how many differed from it (must
    /// be 0).
    pub(crate) replays: usize,
    pub(crate) replays_differing: usize,
}

/// One grant per node per rollout, one decision per op, every replay equal
/// to the stored decision.
pub(crate) fn check_log(events: &[(u64, Event)]) -> LogCheck {
    let mut grants = BTreeMap::new();
    let mut decisions = BTreeMap::new();
    let mut check = LogCheck {
        entries: events.len(),
        ..LogCheck::default()
    };
    for (_, event) in events {
        match event {
            Event::OpGranted { rollout, node, .. } => {
                *grants.entry((*rollout, *node)).or_insert(0u32) += 1;
            }
            Event::CommitDecided { op, decision } => {
                let earlier = decisions.insert(*op, *decision);
                check.decided_twice += usize::from(earlier.is_some());
            }
            Event::CommitReplayed { op, decision } => {
                check.replays += 1;
                if decisions.get(op) != Some(decision) {
                    check.replays_differing += 1;
                }
            }
            _ => {}
        }
    }
    check.grants_twice = grants.values().filter(|n| **n > 1).count();
    check.decided = decisions.len();
    check
}

/// The last step: the log in etcd read back (chain verified), and
/// [`check_log`] on it. True when it is sound and the stored decision was
/// replayed.
async fn show_log_in_etcd(log: &EtcdLog, step: u32) -> anyhow::Result<bool> {
    say(format!(
        "\n[{step}] the log in etcd under {}, read back and verified",
        log.prefix
    ));
    let config = eventlog::EtcdConfig::new(log.endpoints.clone(), log.prefix.clone());
    let events = tokio::task::spawn_blocking(move || -> anyhow::Result<Vec<(u64, Event)>> {
        let storage = logtools::copy::open_etcd_read_only(&config)?;
        let (_log, events) = eventlog::EventLog::<Event, _>::with_storage(storage)?;
        Ok(events)
    })
    .await
    .context("reading the log in etcd panicked")??;
    let check = check_log(&events);
    say(format!(
        "    {} entries, hash chain verified; {} op(s) decided, {} decided twice; \
         {} replay(s) of a stored decision, {} differing; nodes granted twice in a rollout: {}",
        check.entries,
        check.decided,
        check.decided_twice,
        check.replays,
        check.replays_differing,
        check.grants_twice
    ));
    Ok(check.decided_twice == 0
        && check.replays_differing == 0
        && check.grants_twice == 0
        && check.replays >= 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::{Decision, Digest, Generation, NodeId, OpId, RolloutId};

    fn grant(op: u32, rollout: u32, node: u32) -> Event {
        Event::OpGranted {
            op: OpId(op),
            rollout: RolloutId(rollout),
            node: NodeId(node),
            release: Digest([1; 32]),
            generation: Generation(1),
            baseline: None,
            is_canary: false,
        }
    }

    fn numbered(events: Vec<Event>) -> Vec<(u64, Event)> {
        (0u64..).zip(events).collect()
    }

    /// The end-of-story check finds a second grant, a second decision and
    /// a replay that differs; a sound log passes with its replay counted.
    #[test]
    fn the_log_check_finds_what_it_must() {
        let decide = |op, decision| Event::CommitDecided {
            op: OpId(op),
            decision,
        };
        let replay = |op, decision| Event::CommitReplayed {
            op: OpId(op),
            decision,
        };
        let sound = numbered(vec![
            grant(0, 0, 0),
            decide(0, Decision::Commit),
            replay(0, Decision::Commit),
            grant(1, 0, 1),
            grant(2, 1, 0),
        ]);
        let check = check_log(&sound);
        assert_eq!(
            check,
            LogCheck {
                entries: 5,
                grants_twice: 0,
                decided: 1,
                decided_twice: 0,
                replays: 1,
                replays_differing: 0,
            }
        );
        let bad = numbered(vec![
            grant(0, 0, 0),
            grant(1, 0, 0),
            decide(0, Decision::Commit),
            decide(0, Decision::Abort),
            replay(1, Decision::Commit),
        ]);
        let check = check_log(&bad);
        assert_eq!(check.grants_twice, 1);
        assert_eq!(check.decided_twice, 1);
        assert_eq!(check.replays_differing, 1, "a replay of no stored decision");
    }
}
