//! Scenarios 19-22 (issue 14): controller high availability on etcd. Three
//! controller hosts `c1`-`c3`, each an etcd member and a controller on its
//! own member; the agents list all three. `c1` leads at the start.
//!
//! Every one of them asserts from the log in etcd (`fleetweft log show
//! --etcd`, and etcd's own history for who wrote what): one grant per node
//! per rollout, one commit decision per op with every replay equal to it,
//! and every entry written under a live leadership lease with epochs that
//! never go back (no event appended by a deposed leader); then `fleetweft
//! log verify --etcd` (in `run_one`).
//!
//! A controller that exits (4 when deposed, 3 when its log fails) is
//! started again by the harness where the scenario says so, as systemd's
//! `Restart=always` would.

use super::*;
use crate::fleet::{leadership_runs, runs_text, CONTROLLER_HOSTS, LEASE_TTL_MS, POLL_MS};
use std::collections::HashMap;
use std::time::Instant;

/// Exit code of a deposed controller (`api::exit::DEPOSED`).
const EXIT_DEPOSED: i32 = api::exit::DEPOSED;
/// How long after losing its etcd quorum (partition, stopped members) a
/// leader may still run: it stops one TTL after its last successful
/// renewal was sent, which was before the cut; with 1 s of slack for a
/// loaded 2-core machine (the harness polls, the process must exit).
const LEADER_STOP_MS: u64 = LEASE_TTL_MS + 1_000;
/// How long a standby may take to lead once the leader is gone: the lease
/// runs out (TTL), etcd may first elect a raft leader (about 1 s) and
/// extend leases on that, then a campaign round.
pub(super) const TAKEOVER_MS: u64 = 4 * LEASE_TTL_MS + 5_000;

/// The HA scenarios.
pub(super) fn all() -> Vec<Scenario> {
    const V12: &[&str] = &["v1", "v2"];
    const V123: &[&str] = &["v1", "v2", "v3"];
    fn ha(
        number: usize,
        title: &'static str,
        rule: &'static str,
        versions: &'static [&'static str],
        body: Body,
    ) -> Scenario {
        Scenario {
            number,
            title,
            rule,
            versions,
            extra: &[],
            nodes: &NODES,
            layout: Layout::Ha,
            body,
        }
    }
    vec![
        ha(19, "HA on etcd: leader SIGKILLed after a commit decision is stored, its reply lost: a standby takes over and replays it", "S6, S7 across a takeover, fencing", V12, body!(leader_killed_after_decision)),
        ha(20, "HA on etcd: leader partitioned from the other controller hosts, not from the agents: it stops within its lease, agents move", "fencing, S6, one grant per node", V12, body!(leader_partitioned)),
        ha(21, "HA on etcd: one etcd member stopped, rollouts go on; two stopped, the leader stops; members back, the fleet carries on", "quorum, fencing", V123, body!(etcd_members_stopped)),
        ha(22, "HA on etcd: every controller, etcd member, agent and app killed at once and restarted: the same state", "durability, log verify", V123, body!(everything_restarted)),
    ]
}

/// Agents (all three controllers in `addrs`), all connected to the leader,
/// then v1 everywhere.
pub(super) async fn agents_and_v1(f: &mut Fleet, faults_a: &AgentFaults) -> anyhow::Result<()> {
    f.start_agent("node-a", faults_a)?;
    f.start_agent("node-b", &AgentFaults::default())?;
    f.start_agent("node-c", &AgentFaults::default())?;
    f.wait("every agent connected to the leader", WAIT_MS, |s| {
        s.nodes.len() == NODES.len() && all_connected(s)
    })
    .await?;
    let id = f
        .rollout("v1", "node-a", &["node-b", "node-c"], 3, false)
        .await?;
    f.wait("v1 everywhere", WAIT_MS, |s| {
        rollout_is(s, &id, "completed")
    })
    .await?;
    Ok(())
}

/// What the log in etcd shows.
struct Audit {
    /// Stored commit decisions (one per op).
    decisions: usize,
    /// Replays of stored decisions (each equal to it).
    replays: HashMap<String, usize>,
    /// Leadership runs: (controller, first sequence, last sequence).
    runs: Vec<(usize, u64, u64)>,
    /// The events.
    events: Vec<EventDto>,
}

impl Audit {
    /// One line for the summary.
    fn note(&self) -> String {
        format!(
            "{} events, {} decisions, {} replays; writers {}",
            self.events.len(),
            self.decisions,
            self.replays.values().sum::<usize>(),
            runs_text(&self.runs)
        )
    }
}

/// Read the log from etcd and check what every HA scenario asserts: one
/// grant per node per rollout, one decision per op, replays equal to it,
/// every entry written under a live lease, epochs never going back.
async fn audit(f: &Fleet) -> anyhow::Result<Audit> {
    let events = f.log_events().await?;
    let mut grants: HashMap<(String, String), usize> = HashMap::new();
    let mut decided = HashMap::new();
    let mut replays: HashMap<String, usize> = HashMap::new();
    for e in &events {
        match &e.event {
            Event::OpGranted { rollout, node, .. } => {
                *grants
                    .entry((rollout.to_string(), node.to_string()))
                    .or_default() += 1;
            }
            Event::CommitDecided { op, decision } => {
                ensure!(
                    decided.insert(op.to_string(), *decision).is_none(),
                    "{op} decided twice (#{})",
                    e.sequence
                );
            }
            Event::CommitReplayed { op, decision } => {
                let stored = decided.get(&op.to_string());
                ensure!(
                    stored == Some(decision),
                    "#{}: {op} replayed {decision:?}, the stored decision is {stored:?}",
                    e.sequence
                );
                *replays.entry(op.to_string()).or_default() += 1;
            }
            _ => {}
        }
    }
    let twice: Vec<_> = grants.iter().filter(|(_, n)| **n > 1).collect();
    ensure!(
        twice.is_empty(),
        "a node granted twice in one rollout: {twice:?}"
    );
    // Read after the events: the running leader may have appended since.
    let writes = f.writes().await?;
    ensure!(
        writes.len() >= events.len()
            && writes
                .iter()
                .zip(&events)
                .all(|(w, e)| w.sequence == e.sequence),
        "the entries in etcd ({}) do not match the {} events shown",
        writes.len(),
        events.len()
    );
    let runs = leadership_runs(&writes)?;
    Ok(Audit {
        decisions: decided.len(),
        replays,
        runs,
        events,
    })
}

/// The controllers that exited since they were started, started again
/// (as systemd's `Restart=always` would): (controller, exit code).
async fn revive_controllers(f: &mut Fleet) -> anyhow::Result<Vec<(usize, Option<i32>)>> {
    let mut revived = Vec::new();
    for i in 1..=CONTROLLER_HOSTS.len() {
        let name = format!("controller-{i}");
        let code = if f.running(&name) {
            match f.exited(&name)? {
                Some(code) => code,
                None => continue,
            }
        } else {
            None
        };
        f.spawn_ha_controller(i, &ControllerFaults::default())?;
        revived.push((i, code));
    }
    Ok(revived)
}

/// The leader at the end of a run: the last run's controller.
fn last_writer(a: &Audit) -> Option<usize> {
    a.runs.last().map(|r| r.0)
}

async fn leader_killed_after_decision(f: &mut Fleet) -> anyhow::Result<String> {
    let v2 = f.digest("v2");
    f.start_ha_controllers(&ControllerFaults {
        drop_first_commit_reply_for: Some(v2),
        ..ControllerFaults::default()
    })
    .await?;
    // node-a asks again only after LOST_REPLY_RETRY_MS: the SIGKILL lands
    // before any retry reaches c1, so the decision reaches node-a only as
    // a replay by the next leader.
    let slow_retry = AgentFaults {
        retry_ms: Some(LOST_REPLY_RETRY_MS),
        ..AgentFaults::default()
    };
    agents_and_v1(f, &slow_retry).await?;
    let id = f
        .rollout("v2", "node-a", &["node-b", "node-c"], 1, false)
        .await?;
    let op = op_id(f, &id, "node-a").await?;
    let decided = f
        .wait_event("the canary's commit decision is stored", WAIT_MS, |e| {
            is_commit_decided(e, &op)
        })
        .await?;
    f.kill("controller-1").await?;
    let killed = Instant::now();
    let leader = f
        .wait_leader("a standby takes over", TAKEOVER_MS, |i| i != 1)
        .await?;
    let takeover_ms = killed.elapsed().as_millis();
    f.wait("the rollout completes on the new leader", WAIT_MS, |s| {
        rollout_is(s, &id, "completed")
    })
    .await?;
    for node in NODES {
        f.assert_serves(node, "v2").await?;
    }
    // c1, started again as systemd would, follows as a standby.
    f.start_supervised(1, WAIT_MS).await?;
    f.wait_role(1, Some("standby"), WAIT_MS).await?;
    let a = audit(f).await?;
    let replayed = a.replays.get(&op).copied().unwrap_or(0);
    ensure!(
        replayed >= 1,
        "c{leader} never replayed {op}'s stored decision"
    );
    ensure!(
        a.decisions == 6,
        "one decision per op of two rollouts: {}",
        a.note()
    );
    let [(1, _, c1_last), (new, _, _)] = a.runs[..] else {
        bail!("c1 then one new leader should have written: {}", a.note());
    };
    ensure!(
        new == leader,
        "the log's last writer is c{new}, not c{leader}"
    );
    ensure!(
        c1_last >= decided.sequence,
        "c1 wrote the decision #{}",
        decided.sequence
    );
    Ok(format!(
        "c{leader} led {takeover_ms} ms after the SIGKILL; {op} replayed {replayed}x, never re-decided; {}",
        a.note()
    ))
}

async fn leader_partitioned(f: &mut Fleet) -> anyhow::Result<String> {
    f.start_ha_controllers(&ControllerFaults::default()).await?;
    agents_and_v1(f, &AgentFaults::default()).await?;
    let id = f
        .rollout("v2", "node-a", &["node-b", "node-c"], 1, false)
        .await?;
    // Mid-rollout: the canary is granted, and c1 is cut from c2 and c3
    // (their etcd members are the quorum); agents and operator still
    // reach it.
    op_id(f, &id, "node-a").await?;
    f.net.partition("c1", &["c2", "c3"])?;
    let cut = Instant::now();
    let code = f.wait_exit("controller-1", LEADER_STOP_MS).await?;
    let stopped_ms = cut.elapsed().as_millis();
    let log = f.last_log("controller-1");
    ensure!(
        code == Some(EXIT_DEPOSED) && log.contains("deposed"),
        "c1 should stop as deposed (exit {EXIT_DEPOSED}), exited {code:?}:\n{}",
        tail(&log)
    );
    let leader = f
        .wait_leader("c2 or c3 takes over", TAKEOVER_MS, |i| i != 1)
        .await?;
    let elected_ms = cut.elapsed().as_millis();
    // The old leader stopped before the new one was elected (same clock).
    let stopped_at = log_time(&log, "deposed").context("c1's deposed line")?;
    let new_log = f.last_log(&format!("controller-{leader}"));
    let elected_at = log_time(&new_log, "elected: this controller leads")
        .with_context(|| format!("c{leader}'s elected line"))?;
    let margin_ms = ((elected_at - stopped_at) * 1000.0).round();
    ensure!(
        margin_ms > 0.0,
        "c{leader} was elected {} ms BEFORE c1 stopped acting",
        -margin_ms
    );
    f.wait(
        "the agents on the new leader, the rollout completed",
        WAIT_MS,
        |s| all_connected(s) && rollout_is(s, &id, "completed"),
    )
    .await?;
    let moved_ms = cut.elapsed().as_millis();
    for node in NODES {
        f.assert_serves(node, "v2").await?;
    }
    f.net.heal_partition("c1")?;
    f.wait_etcd_healthy(1).await?;
    let failed_starts = f.start_supervised(1, WAIT_MS).await?;
    f.wait_role(1, Some("standby"), WAIT_MS).await?;
    let a = audit(f).await?;
    let [(1, _, _), (new, _, _)] = a.runs[..] else {
        bail!("c1 then one new leader should have written: {}", a.note());
    };
    ensure!(
        new == leader,
        "the log's last writer is c{new}, not c{leader}"
    );
    Ok(format!(
        "c1 exited {EXIT_DEPOSED} {stopped_ms} ms after the cut, {margin_ms} ms before c{leader} was elected (led at {elected_ms} ms), agents moved and the rollout completed at {moved_ms} ms; c1 back as a standby (failed starts {failed_starts:?}); {}",
        a.note()
    ))
}

async fn etcd_members_stopped(f: &mut Fleet) -> anyhow::Result<String> {
    f.start_ha_controllers(&ControllerFaults::default()).await?;
    agents_and_v1(f, &AgentFaults::default()).await?;
    // One member down, the leader's own (c1's, the one its client pins): a
    // quorum is left, c1 fails over to another member and goes on leading.
    f.stop("etcd-1").await?;
    let id = f
        .rollout("v2", "node-a", &["node-b", "node-c"], 1, false)
        .await?;
    f.wait("v2 completes with one member down", WAIT_MS, |s| {
        rollout_is(s, &id, "completed")
    })
    .await?;
    ensure!(f.leader().await == Some(1), "c1 still leads");
    // Two down: no quorum. The leader's lease cannot be renewed: it stops.
    f.stop("etcd-2").await?;
    let cut = Instant::now();
    let code = f.wait_exit("controller-1", LEADER_STOP_MS).await?;
    let stopped_ms = cut.elapsed().as_millis();
    let log = f.last_log("controller-1");
    ensure!(
        code == Some(EXIT_DEPOSED) && log.contains("leadership lease was lost"),
        "c1 should stop naming its lost lease (exit {EXIT_DEPOSED}), exited {code:?}:\n{}",
        tail(&log)
    );
    let refused = f
        .rollout("v3", "node-a", &["node-b", "node-c"], 1, false)
        .await;
    ensure!(refused.is_err(), "a rollout started without a quorum");
    // The members come back; every controller that stopped meanwhile is
    // started again; one leads, and the fleet carries on.
    f.start_etcd(1)?;
    f.start_etcd(2)?;
    for i in 1..=CONTROLLER_HOSTS.len() {
        f.wait_etcd_healthy(i).await?;
    }
    let revived = revive_controllers(f).await?;
    let leader = f
        .wait_leader("a leader again", TAKEOVER_MS, |_| true)
        .await?;
    f.wait("every agent on the new leader", WAIT_MS, all_connected)
        .await?;
    let id = f
        .rollout("v3", "node-a", &["node-b", "node-c"], 1, false)
        .await?;
    f.wait("v3 completes after the members returned", WAIT_MS, |s| {
        rollout_is(s, &id, "completed")
    })
    .await?;
    for node in NODES {
        f.assert_serves(node, "v3").await?;
    }
    let a = audit(f).await?;
    ensure!(a.runs[0].0 == 1, "c1 wrote first: {}", a.note());
    ensure!(
        last_writer(&a) == Some(leader),
        "c{leader} wrote last: {}",
        a.note()
    );
    Ok(format!(
        "c1 exited {EXIT_DEPOSED} {stopped_ms} ms after quorum loss; restarted {revived:?}; c{leader} led after; {}",
        a.note()
    ))
}

/// Each rollout's (id, status) and each op's (id, node, outcome), sorted.
type State = (Vec<(String, String)>, Vec<(String, String, Option<String>)>);

/// What must survive a restart of everything: each rollout's status and
/// each op's node and outcome, and the log's events.
fn state_of(s: &FleetView) -> State {
    let mut rollouts: Vec<_> = s
        .rollouts
        .iter()
        .map(|r| (r.id.clone(), r.status.clone()))
        .collect();
    let mut ops: Vec<_> = s
        .ops
        .iter()
        .map(|o| (o.id.clone(), o.node.clone(), o.outcome.clone()))
        .collect();
    rollouts.sort();
    ops.sort();
    (rollouts, ops)
}

/// SIGKILL everything at once, as a power cut of every host would, then
/// start every member, controller and agent at once; controllers that
/// start before their member answers stop, and are started again (as
/// systemd would) until one leads: (the leader, the restarts).
async fn restart_everything(f: &mut Fleet) -> anyhow::Result<(usize, Vec<(usize, Option<i32>)>)> {
    f.kill_everything().await?;
    for i in 1..=CONTROLLER_HOSTS.len() {
        f.start_etcd(i)?;
    }
    for i in 1..=CONTROLLER_HOSTS.len() {
        f.spawn_ha_controller(i, &ControllerFaults::default())?;
    }
    for node in NODES {
        f.start_agent(node, &AgentFaults::default())?;
    }
    let deadline = Instant::now() + Duration::from_millis(WAIT_MS);
    let mut restarts = Vec::new();
    loop {
        restarts.extend(revive_controllers(f).await?);
        if let Some(i) = f.leader().await {
            return Ok((i, restarts));
        }
        ensure!(
            Instant::now() < deadline,
            "no leader after the restart; restarts {restarts:?}"
        );
        tokio::time::sleep(Duration::from_millis(POLL_MS)).await;
    }
}

async fn everything_restarted(f: &mut Fleet) -> anyhow::Result<String> {
    f.start_ha_controllers(&ControllerFaults::default()).await?;
    agents_and_v1(f, &AgentFaults::default()).await?;
    let id = f
        .rollout("v2", "node-a", &["node-b", "node-c"], 1, false)
        .await?;
    let before = f
        .wait("v2 completes", WAIT_MS, |s| rollout_is(s, &id, "completed"))
        .await?;
    let log_before = f.log_events().await?;
    let killed = Instant::now();
    let (leader, restarts) = restart_everything(f).await?;
    let after = f.wait("every agent back", WAIT_MS, all_connected).await?;
    let back_ms = killed.elapsed().as_millis();
    ensure!(
        state_of(&after) == state_of(&before),
        "the state changed over the restart:\nbefore {:?}\nafter  {:?}",
        state_of(&before),
        state_of(&after)
    );
    for node in NODES {
        f.assert_serves(node, "v2").await?;
    }
    let log_after = f.log_events().await?;
    ensure!(
        log_after.len() >= log_before.len()
            && log_after
                .iter()
                .zip(&log_before)
                .all(|(a, b)| same_event(a, b)),
        "the log's first {} events changed over the restart",
        log_before.len()
    );
    // And it carries on.
    let id = f
        .rollout("v3", "node-a", &["node-b", "node-c"], 1, false)
        .await?;
    f.wait("v3 completes after the restart", WAIT_MS, |s| {
        rollout_is(s, &id, "completed")
    })
    .await?;
    let a = audit(f).await?;
    ensure!(
        last_writer(&a) == Some(leader),
        "c{leader} wrote last: {}",
        a.note()
    );
    Ok(format!(
        "back in {back_ms} ms, c{leader} leads, same rollouts and ops, the log's {} events unchanged; controller restarts {restarts:?}; {}",
        log_before.len(),
        a.note()
    ))
}

/// Whether two events read from the log are the same entry.
fn same_event(a: &EventDto, b: &EventDto) -> bool {
    a.sequence == b.sequence
        && a.text == b.text
        && serde_json::to_value(&a.event).ok() == serde_json::to_value(&b.event).ok()
}

/// When the first line of a daemon's log containing `needle` was written,
/// in seconds since midnight (UTC; tracing's `2026-12-02T14:59:06.854869Z`).
fn log_time(log: &str, needle: &str) -> Option<f64> {
    let line = log.lines().find(|l| l.contains(needle))?;
    let stamp = line.split_whitespace().next()?;
    let time = stamp.split_once('T')?.1.trim_end_matches('Z');
    let mut parts = time.split(':');
    let h: f64 = parts.next()?.parse().ok()?;
    let m: f64 = parts.next()?.parse().ok()?;
    let s: f64 = parts.next()?.parse().ok()?;
    Some(h * 3600.0 + m * 60.0 + s)
}

/// The last lines of a daemon's log, for a failure message.
pub(super) fn tail(log: &str) -> String {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}
