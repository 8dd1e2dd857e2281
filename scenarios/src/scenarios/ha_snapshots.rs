//! Scenario 23 (issue #26): the HA layout with snapshots, archiving and
//! etcd compaction on. The leader archives and compacts while rollouts
//! run; the standbys are restarted, so they start from a snapshot plus
//! the tail (the log's head is no longer in etcd); a rollout with an
//! approval gate waits after its canary, is approved, and the snapshot
//! that batch makes due is where the leader is SIGKILLed (chunks stored,
//! manifest not), the followers still to go; a standby takes
//! over from the newest intact snapshot plus the tail, naming the torn
//! one it skips, and the rollout completes. The whole history (archive
//! then live log) shows one commit decision per op, and `log verify
//! --archive --deep` is clean (in `run_one`).
//!
//! The kill lands inside the write through the controller's fault switch
//! `[faults] hold_in_snapshot_write` (honoured only with
//! `--allow-fault-injection`): armed by a file the harness creates, the
//! next snapshot write holds between its chunks and its manifest. The
//! harness checks in etcd that the chunks are there and the manifest is
//! not before it kills. Without the switch the window is one etcd round
//! trip (a scenario-sized state is one chunk).
//!
//! etcd's history is compacted here, so the writer-per-revision audit of
//! scenarios 19-22 cannot read who wrote the old entries; the held leader
//! cannot append (its core is blocked in the write), so every entry at or
//! after the torn snapshot's `covers` is the new leader's.

use super::ha::{agents_and_v1, tail, TAKEOVER_MS};
use super::*;
use crate::fleet::Archiving;
use std::collections::HashMap;
use std::time::Instant;

/// Snapshots every this many events: the least `[log]` accepts.
const SNAPSHOT_EVERY_EVENTS: u64 = 64;
/// Or every second in which events were appended.
const SNAPSHOT_EVERY_S: u64 = 1;
/// Entries the live log keeps behind its end; the rest is archived.
const KEEP_EVENTS: u64 = 16;
/// Most rollouts run before the leader must have archived and compacted.
const ROLLOUTS_TO_ARCHIVE_MAX: usize = 6;
/// Slack past [`SNAPSHOT_EVERY_S`] before arming, so the approval's
/// batch finds a snapshot due.
const IDLE_MARGIN_MS: u64 = 500;
/// How long the armed leader may take to start its next snapshot write:
/// its next batch at least [`SNAPSHOT_EVERY_S`] after the last snapshot.
const HOLD_WAIT_MS: u64 = 20_000;

/// What the held leader logs (`controller::daemon::ha`).
const HELD: &str = "FAULT INJECTION: holding in the snapshot write covering ";
/// A housekeeping run's end, and its etcd compaction.
const ARCHIVED: &str = "archiving done: the live log starts at ";
const COMPACTED: &str = "compacted_to=Some(";
/// A controller started from a snapshot (`daemon::open_log`).
const STARTED_FROM_SNAPSHOT: &str = ": a snapshot of the first ";
/// The takeover's line (`daemon::core`), and the skip of the torn write.
const TOOK_OVER: &str = "took over as leader from the snapshot of the first ";
const CUT_SHORT: &str = "its write was cut short";
/// The new leader's prune removing the torn write's chunks.
const TORN_DELETED: &str = "deleting the parts of a snapshot write cut short (covering ";

/// The scenario.
pub(super) fn all() -> Vec<Scenario> {
    vec![Scenario {
        number: 23,
        title: "HA on etcd with archiving: the leader archives and compacts mid-rollout, is SIGKILLed inside a snapshot write; a standby takes over from snapshot plus tail",
        rule: "snapshots are a cache, archiving loses nothing, S6 across a takeover",
        versions: &["v1", "v2", "v3"],
        extra: &[],
        nodes: &NODES,
        layout: Layout::Ha,
        body: body!(leader_killed_in_snapshot_write),
    }]
}

async fn leader_killed_in_snapshot_write(f: &mut Fleet) -> anyhow::Result<String> {
    let began = Instant::now();
    f.archiving = Some(Archiving {
        dir: f.dir.join("archive"),
        snapshot_every_events: SNAPSHOT_EVERY_EVENTS,
        snapshot_every_s: SNAPSHOT_EVERY_S,
        keep_events: KEEP_EVENTS,
    });
    let arm = f.dir.join("arm-snapshot-hold");
    f.start_ha_controllers(&ControllerFaults {
        hold_in_snapshot_write: Some(arm.clone()),
        ..ControllerFaults::default()
    })
    .await?;
    agents_and_v1(f, &AgentFaults::default()).await?;
    let (rollouts, current) = roll_until_archived(f).await?;
    let restarted = restart_standbys(f).await?;
    let next = if current == "v2" { "v3" } else { "v2" };
    let id = f
        .rollout(next, "node-a", &["node-b", "node-c"], 1, true)
        .await?;
    f.wait(
        "the canary settled, the rollout waits for approval",
        WAIT_MS,
        |s| rollout_is(s, &id, "waiting-approval"),
    )
    .await?;
    // Idle past the snapshot period, then armed: the approval's batch (or
    // the next one) writes the snapshot that holds, with the followers
    // still to go. Its reply leaves before the snapshot is written.
    tokio::time::sleep(Duration::from_millis(
        SNAPSHOT_EVERY_S * 1_000 + IDLE_MARGIN_MS,
    ))
    .await;
    std::fs::write(&arm, b"")?;
    f.rollout_command("approve", &id).await?;
    let torn = held_in_snapshot_write(f).await?;
    f.kill("controller-1").await?;
    let killed = Instant::now();
    let leader = f
        .wait_leader("a standby takes over", TAKEOVER_MS, |i| i != 1)
        .await?;
    let takeover_ms = killed.elapsed().as_millis();
    f.wait_log(&format!("controller-{leader}"), TOOK_OVER, WAIT_MS)
        .await?;
    let from = took_over(f, leader, torn)?;
    f.wait("the rollout completes on the new leader", WAIT_MS, |s| {
        all_connected(s) && rollout_is(s, &id, "completed")
    })
    .await?;
    for node in NODES {
        f.assert_serves(node, next).await?;
    }
    let name = format!("controller-{leader}");
    f.wait_log(&name, &format!("{TORN_DELETED}{torn} entries)"), WAIT_MS)
        .await?;
    f.wait_log(&name, ARCHIVED, WAIT_MS).await?;
    let failed_starts = f.start_supervised(1, WAIT_MS).await?;
    f.wait_role(1, Some("standby"), WAIT_MS).await?;
    let audit = audit_history(f, &id, torn).await?;
    Ok(format!(
        "archived and compacted after {rollouts} rollout(s); standbys restarted from snapshots {restarted:?}; c1 held in the write of snapshot {torn} (chunks, no manifest) and SIGKILLed; c{leader} led {takeover_ms} ms later from snapshot {from} plus the tail, skipping {torn}, deleted its chunks and archived on; c1 back as a standby (failed starts {failed_starts:?}); {audit}; {} s in all",
        began.elapsed().as_secs()
    ))
}

/// Rollouts v2, v3, v2, ... until c1 has archived and compacted at least
/// once (its log, and `P/start` in etcd). Returns how many and the
/// release serving now.
async fn roll_until_archived(f: &mut Fleet) -> anyhow::Result<(usize, &'static str)> {
    let mut current = "v1";
    for n in 1..=ROLLOUTS_TO_ARCHIVE_MAX {
        let next = if current == "v2" { "v3" } else { "v2" };
        let id = f
            .rollout(next, "node-a", &["node-b", "node-c"], 1, false)
            .await?;
        f.wait(&format!("rollout {n} ({next}) completes"), WAIT_MS, |s| {
            rollout_is(s, &id, "completed")
        })
        .await?;
        current = next;
        let log = f.last_log("controller-1");
        let compacted = log
            .lines()
            .any(|l| l.contains("archived entries below") && l.contains(COMPACTED));
        if compacted && log.contains(ARCHIVED) && f.live_start_stored().await? {
            return Ok((n, current));
        }
    }
    bail!("c1 had not archived and compacted after {ROLLOUTS_TO_ARCHIVE_MAX} rollouts")
}

/// SIGTERM c2 and c3 and start them again: the log's head is archived, so
/// each must start from a snapshot plus the tail. Returns the snapshots
/// they started from.
async fn restart_standbys(f: &mut Fleet) -> anyhow::Result<Vec<u64>> {
    let mut covers = Vec::new();
    for i in 2..=3 {
        let name = format!("controller-{i}");
        f.stop(&name).await?;
        f.start_ha_controller(i, &ControllerFaults::default())
            .await?;
        f.wait_role(i, Some("standby"), WAIT_MS).await?;
        let log = f.last_log(&name);
        let line = log
            .lines()
            .find(|l| l.contains(STARTED_FROM_SNAPSHOT))
            .with_context(|| format!("c{i} did not start from a snapshot:\n{}", tail(&log)))?;
        covers.push(number_after(line, STARTED_FROM_SNAPSHOT)?);
    }
    Ok(covers)
}

/// Waits until c1 holds in a snapshot write, and checks in etcd that the
/// write is cut: its chunks stored, its manifest not. Returns its covers.
async fn held_in_snapshot_write(f: &Fleet) -> anyhow::Result<u64> {
    f.wait_log("controller-1", HELD, HOLD_WAIT_MS).await?;
    let log = f.last_log("controller-1");
    let line = log
        .lines()
        .find(|l| l.contains(HELD))
        .context("the hold line")?;
    let torn = number_after(line, HELD)?;
    let keys = f.snapshot_keys().await?;
    let stored = keys.get(&torn).copied().unwrap_or_default();
    ensure!(
        stored.chunks > 0 && !stored.manifest,
        "snapshot {torn} should have chunks and no manifest: {stored:?} (all: {keys:?})"
    );
    ensure!(
        keys.iter().any(|(c, k)| *c < torn && k.manifest),
        "no intact snapshot older than {torn}: {keys:?}"
    );
    Ok(torn)
}

/// The new leader's log: it skipped the torn snapshot, naming it, and
/// took over from an older one plus the tail. Returns that one's covers.
fn took_over(f: &Fleet, leader: usize, torn: u64) -> anyhow::Result<u64> {
    let log = f.last_log(&format!("controller-{leader}"));
    let named = format!("skipping snapshot covering {torn} entries: {CUT_SHORT}");
    ensure!(
        log.contains(&named),
        "c{leader} did not name the torn snapshot {torn}:\n{}",
        tail(&log)
    );
    let line = log
        .lines()
        .find(|l| l.contains(TOOK_OVER))
        .with_context(|| format!("c{leader}'s takeover line:\n{}", tail(&log)))?;
    let from = number_after(line, TOOK_OVER)?;
    ensure!(from < torn, "took over from {from}, not older than {torn}");
    Ok(from)
}

/// The history read through the archive is dense from genesis.
fn ensure_dense(events: &[api::view::EventDto]) -> anyhow::Result<()> {
    ensure!(
        events.first().map(|e| e.sequence) == Some(0)
            && events.iter().zip(0u64..).all(|(e, i)| e.sequence == i),
        "the history read through the archive is not dense from genesis"
    );
    Ok(())
}

/// The whole history (archive, then the live log): every op granted has
/// exactly one commit decision, every replay equals it, no node granted
/// twice in a rollout, and the interrupted rollout completed after the
/// torn snapshot's point (by the new leader).
async fn audit_history(f: &Fleet, id: &str, torn: u64) -> anyhow::Result<String> {
    let events = f.log_events().await?;
    ensure_dense(&events)?;
    let mut granted: HashMap<String, usize> = HashMap::new();
    let mut per_node: HashMap<(String, String), usize> = HashMap::new();
    let mut decided: HashMap<String, _> = HashMap::new();
    let mut replays = 0;
    let mut completed_at = None;
    for e in &events {
        match &e.event {
            Event::OpGranted {
                op, rollout, node, ..
            } => {
                *granted.entry(op.to_string()).or_default() += 1;
                *per_node
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
                ensure!(
                    decided.get(&op.to_string()) == Some(decision),
                    "#{}: {op} replayed another decision",
                    e.sequence
                );
                replays += 1;
            }
            Event::RolloutCompleted { rollout } if rollout.to_string() == id => {
                completed_at = Some(e.sequence);
            }
            _ => {}
        }
    }
    let undecided: Vec<_> = granted
        .keys()
        .filter(|op| !decided.contains_key(*op))
        .collect();
    ensure!(
        undecided.is_empty(),
        "ops without a decision: {undecided:?}"
    );
    ensure!(
        decided.len() == granted.len(),
        "decisions for ops never granted"
    );
    let twice: Vec<_> = per_node.iter().filter(|(_, n)| **n > 1).collect();
    ensure!(
        twice.is_empty(),
        "a node granted twice in one rollout: {twice:?}"
    );
    let completed = completed_at.context("the interrupted rollout never completed")?;
    ensure!(
        completed >= torn,
        "{id} completed at #{completed}, before the torn snapshot's point {torn}"
    );
    Ok(format!(
        "{} events read through the archive, {} ops each with one decision, {replays} replays; {id} completed at #{completed}",
        events.len(),
        decided.len()
    ))
}

/// The number right after `marker` in `line`.
fn number_after(line: &str, marker: &str) -> anyhow::Result<u64> {
    let rest = line
        .split_once(marker)
        .map(|(_, rest)| rest)
        .with_context(|| format!("{marker:?} not in {line:?}"))?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits
        .parse()
        .with_context(|| format!("no number after {marker:?} in {line:?}"))
}
