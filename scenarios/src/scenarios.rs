//! The scenarios of issue 6. Each runs on a fresh network and fleet, asserts
//! the rule it exercises through the public surface, and ends with
//! `fleetweft log verify` on the controller's log.

use crate::fleet::{
    all_connected, connected, decisions, max_slots_held, op_of, processes_under, replays, rollout,
    rollout_is, wait_for, AgentFaults, Bins, ControllerFaults, Direction, Fleet, Layout, NODES,
    WAIT_MS,
};
use crate::net;
use anyhow::{bail, ensure, Context};
use api::client::FleetView;
use api::view::EventDto;
use model::controller::Event;
use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::time::Duration;

/// A scenario's body: gets the fleet (controller running, no agents yet),
/// returns a note for the summary line.
type Body = for<'a> fn(&'a mut Fleet) -> Pin<Box<dyn Future<Output = anyhow::Result<String>> + 'a>>;

/// One scenario.
pub struct Scenario {
    /// Its number in issue 6.
    pub number: usize,
    /// What it does.
    pub title: &'static str,
    /// The rule(s) it exercises.
    pub rule: &'static str,
    /// Releases signed for it.
    versions: &'static [&'static str],
    /// Extra hosts (name, last octet).
    extra: &'static [(&'static str, u8)],
    /// The fleet's nodes (most scenarios: [`NODES`]).
    nodes: &'static [&'static str],
    /// One controller on sled, or three controller hosts on etcd.
    pub layout: Layout,
    body: Body,
}

/// Upper bound on one scenario, setup and teardown included.
pub const SCENARIO_MS: u64 = 300_000;
/// Upper bound on one wait under 30% loss and 200 ms delay.
pub const LOSSY_WAIT_MS: u64 = 120_000;

/// The nodes of the waves scenario: a canary and four followers, two per
/// wave.
const WAVE_NODES: [&str; 5] = ["node-a", "node-b", "node-c", "node-d", "node-e"];

macro_rules! body {
    ($f:ident) => {
        |fleet| Box::pin($f(fleet))
    };
}

mod configuration;
mod ha;
mod ha_snapshots;
mod memory_limit;
mod migration;
mod signed;
mod trees;

/// Every scenario, in issue order.
pub fn all() -> Vec<Scenario> {
    const V12: &[&str] = &["v1", "v2"];
    const V123: &[&str] = &["v1", "v2", "v3"];
    let mut all = vec![
        Scenario { number: 1, title: "happy rollout: canary then two followers, slots 1", rule: "S1 slots, liveness", versions: V12, extra: &[], nodes: &NODES, layout: Layout::Single, body: body!(happy) },
        Scenario { number: 2, title: "canary partitioned after grant: UNKNOWN, slot held; healed: settles", rule: "S2 silence is UNKNOWN, S1", versions: V12, extra: &[], nodes: &NODES, layout: Layout::Single, body: body!(canary_partitioned) },
        Scenario { number: 3, title: "commit reply lost, operator pauses, link healed: stored decision replayed", rule: "S6 stable decisions, S3 pause", versions: V12, extra: &[], nodes: &NODES, layout: Layout::Single, body: body!(lost_reply) },
        Scenario { number: 4, title: "controller SIGKILLed between commit decision and reply", rule: "S7 persist before reply, S6", versions: V12, extra: &[], nodes: &NODES, layout: Layout::Single, body: body!(controller_killed_before_reply) },
        Scenario { number: 5, title: "canary answers wrongly while healthy", rule: "S11 wrong answer stops, S9", versions: V12, extra: &[], nodes: &NODES, layout: Layout::Single, body: body!(wrong_answer) },
        Scenario { number: 6, title: "restored app killed before its proof: UNKNOWN until an agent restart proves the baseline", rule: "S9 restore needs proof, S2", versions: V12, extra: &[], nodes: &NODES, layout: Layout::Single, body: body!(restored_app_killed) },
        Scenario { number: 7, title: "node offline during a release change converges to the newest intent", rule: "S8 no stale apply, generations", versions: V123, extra: &[], nodes: &NODES, layout: Layout::Single, body: body!(offline_during_change) },
        Scenario { number: 8, title: "agent SIGKILLed in each stage: fixed recovery table, no double apply", rule: "SPEC §5 recovery, S6", versions: &["v1", "v2", "v3", "v4", "v5", "v6"], extra: &[], nodes: &NODES, layout: Layout::Single, body: body!(agent_killed_in_each_stage) },
        Scenario { number: 9, title: "approval gate survives a controller restart", rule: "S10 human waits survive", versions: V12, extra: &[], nodes: &NODES, layout: Layout::Single, body: body!(approval_survives_restart) },
        Scenario { number: 10, title: "restart loop of the new release: proof failed (restart_loop), baseline restored", rule: "S9, S11, proof verdicts", versions: V12, extra: &[], nodes: &NODES, layout: Layout::Single, body: body!(restart_loop) },
        Scenario { number: 11, title: "tampered bundle: refused on the node, nothing installed", rule: "bundle verification, evidence", versions: V12, extra: &[], nodes: &NODES, layout: Layout::Single, body: body!(tampered_bundle) },
        Scenario { number: 12, title: "foreign certificate: connection refused, nothing logged", rule: "mutual TLS", versions: &["v1"], extra: &[("x", 20)], nodes: &NODES, layout: Layout::Single, body: body!(foreign_certificate) },
        Scenario { number: 13, title: "30% loss and 200 ms delay on every fleet link: rollout completes", rule: "all rules under loss", versions: V12, extra: &[], nodes: &NODES, layout: Layout::Single, body: body!(lossy_links) },
        Scenario { number: 14, title: "follower partitioned with slots 2: the other proceeds, the silent slot stays held", rule: "S1, S2", versions: V12, extra: &[], nodes: &NODES, layout: Layout::Single, body: body!(follower_partitioned) },
        Scenario { number: 15, title: "orderly restart of every process in turn mid-rollout: it completes", rule: "restart is a new attempt, S6", versions: V12, extra: &[], nodes: &NODES, layout: Layout::Single, body: body!(rolling_restarts) },
        Scenario { number: 16, title: "after a verified rollout, a healthy v1 app file is swapped in behind the agent: proof failed, node drifted", rule: "proof is a readback, drift", versions: V12, extra: &[], nodes: &NODES, layout: Layout::Single, body: body!(swapped_behind_agent) },
        Scenario { number: 17, title: "after a verified rollout, a stand-in answers the public route as another release: proof failed (route_identity_mismatch)", rule: "proof is a readback, SPEC §6 identity", versions: V12, extra: &[], nodes: &NODES, layout: Layout::Single, body: body!(route_answers_as_another_release) },
        Scenario { number: 18, title: "waves 50%,100% with --max-failed 1 on 5 nodes: a wrong follower in wave 1 is restored and the rollout goes on; a second in wave 2 spends the budget: paused (failure budget)", rule: "S4 across waves, B1 failure budget, S9", versions: V12, extra: &[], nodes: &WAVE_NODES, layout: Layout::Single, body: body!(waves_with_a_failure_budget) },
    ];
    all.extend(ha::all());
    all.extend(ha_snapshots::all());
    all.extend(trees::all());
    all.extend(migration::all());
    all.extend(memory_limit::all());
    all.extend(configuration::all());
    all
}

/// Run one scenario: check for leftovers, build, run (bounded), always tear
/// down, then check nothing is left behind.
pub async fn run_one(s: &Scenario, dir: &Path, bins: &Bins) -> anyhow::Result<String> {
    let before = net::leftovers();
    ensure!(
        before.is_empty(),
        "leftovers before the scenario: {before:?}"
    );
    if dir.exists() {
        std::fs::remove_dir_all(dir)?;
    }
    std::fs::create_dir_all(dir)?;
    let outcome = tokio::time::timeout(Duration::from_millis(SCENARIO_MS), async {
        let mut fleet = Fleet::start(dir, bins, s.versions, s.extra, s.nodes, s.layout).await?;
        let result = async {
            let note = (s.body)(&mut fleet).await?;
            let verify = fleet.verify_log().await?;
            let summary = verify.lines().next().unwrap_or("").trim().to_string();
            Ok::<String, anyhow::Error>(format!("{note}; log verify: {summary}"))
        }
        .await;
        let down = fleet.shutdown().await;
        let note = result?;
        down?;
        Ok::<String, anyhow::Error>(note)
    })
    .await;
    // Whatever happened above, nothing may remain.
    let mut left = Vec::new();
    for _ in 0..50 {
        left = processes_under(dir);
        if left.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    if !left.is_empty() {
        for (pid, _, _) in &left {
            // SAFETY: kill(2) of a process of this scenario.
            unsafe {
                libc::kill(*pid as i32, libc::SIGKILL);
            }
        }
    }
    let after = net::leftovers();
    if !after.is_empty() {
        net::remove_leftovers();
    }
    let note = match outcome {
        Ok(result) => result?,
        Err(_) => bail!("scenario exceeded {SCENARIO_MS} ms"),
    };
    ensure!(left.is_empty(), "processes left behind: {left:?}");
    ensure!(after.is_empty(), "network left behind: {after:?}");
    Ok(format!(" — {note}"))
}

/// Agents up (node-a with `faults_a`), all connected, v1 everywhere.
async fn baseline(f: &mut Fleet, faults_a: &AgentFaults) -> anyhow::Result<()> {
    baseline_within(f, faults_a, WAIT_MS).await
}

/// [`baseline`] with each wait bounded by `ms` (longer on lossy links).
async fn baseline_within(f: &mut Fleet, faults_a: &AgentFaults, ms: u64) -> anyhow::Result<()> {
    f.start_agent("node-a", faults_a)?;
    f.start_agent("node-b", &AgentFaults::default())?;
    f.start_agent("node-c", &AgentFaults::default())?;
    f.wait("every agent connected", ms, all_connected).await?;
    let id = f
        .rollout("v1", "node-a", &["node-b", "node-c"], 3, false)
        .await?;
    f.wait("v1 everywhere", ms, |s| rollout_is(s, &id, "completed"))
        .await?;
    Ok(())
}

/// The op id of rollout `id` on `node`, waiting for its grant.
async fn op_id(f: &Fleet, id: &str, node: &str) -> anyhow::Result<String> {
    let s = f
        .wait(&format!("{id} grants {node}"), WAIT_MS, |s| {
            op_of(s, id, node).is_some()
        })
        .await?;
    Ok(op_of(&s, id, node).context("granted")?.id.clone())
}

fn is_commit_decided(e: &Event, op: &str) -> bool {
    matches!(e, Event::CommitDecided { op: o, .. } if o.to_string() == op)
}

async fn happy(f: &mut Fleet) -> anyhow::Result<String> {
    baseline(f, &AgentFaults::default()).await?;
    let id = f
        .rollout("v2", "node-a", &["node-b", "node-c"], 1, false)
        .await?;
    f.wait("the rollout completes", WAIT_MS, |s| {
        rollout_is(s, &id, "completed")
    })
    .await?;
    for node in NODES {
        f.assert_serves(node, "v2").await?;
    }
    let events = f.events().await?;
    let held = max_slots_held(&events, &id);
    ensure!(held == 1, "slots 1 but {held} ops held a slot at once");
    let (code, proof) = f.rollout_proof(&id).await?;
    ensure!(
        code == 0 && proof["verdict"] == "verified",
        "rollout proof should be verified: {proof}"
    );
    for node in NODES {
        let (code, proof) = f.node_proof(node).await?;
        ensure!(
            code == 0 && proof["verdict"] == "verified",
            "{node}'s proof should be verified: {proof}"
        );
    }
    let (code, _) = f.unresolved().await?;
    ensure!(code == 0, "nothing should be unresolved");
    Ok("3 nodes verified on v2, at most 1 slot held".into())
}

async fn canary_partitioned(f: &mut Fleet) -> anyhow::Result<String> {
    baseline(f, &AgentFaults::default()).await?;
    f.net.cut("a")?;
    let id = f
        .rollout("v2", "node-a", &["node-b", "node-c"], 1, false)
        .await?;
    let op = op_id(f, &id, "node-a").await?;
    let s = f
        .wait("the canary op turns UNKNOWN", WAIT_MS, |s| {
            op_of(s, &id, "node-a").is_some_and(|o| o.unknown.is_some())
        })
        .await?;
    let canary = op_of(&s, &id, "node-a").context("op")?;
    ensure!(
        canary.holds_slot,
        "an UNKNOWN op keeps its slot: {canary:?}"
    );
    ensure!(
        canary.outcome.is_none(),
        "silence is not an outcome: {canary:?}"
    );
    let (code, report) = f.unresolved().await?;
    ensure!(
        code == 1 && report.to_string().contains(&op),
        "the handover report names {op}: {report}"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let s = f.status().await?;
    ensure!(
        op_of(&s, &id, "node-b").is_none() && op_of(&s, &id, "node-c").is_none(),
        "no follower granted while the canary is UNKNOWN: {:?}",
        s.ops
    );
    f.net.heal("a")?;
    f.wait(
        "the canary op settles verified after healing",
        WAIT_MS,
        |s| op_of(s, &id, "node-a").is_some_and(|o| o.outcome.as_deref() == Some("verified")),
    )
    .await?;
    f.wait("the rollout completes", WAIT_MS, |s| {
        rollout_is(s, &id, "completed")
    })
    .await?;
    let held = max_slots_held(&f.events().await?, &id);
    ensure!(held == 1, "slots 1 but {held} held at once");
    Ok(format!("{op} UNKNOWN with slot held, settled after heal"))
}

/// How long node a waits before re-sending an unanswered request in the
/// lost-reply scenarios (3, 4): the window in which the scenario acts.
const LOST_REPLY_RETRY_MS: u64 = 10_000;

/// The controller restarted with its fault switch dropping the first commit
/// reply for v2, v1 everywhere, v2's rollout started, and the canary's
/// commit decision durable in the log (its reply never sent): (rollout, op).
async fn canary_decided_reply_dropped(f: &mut Fleet) -> anyhow::Result<(String, String)> {
    f.kill("controller").await?;
    let v2 = f.digest("v2");
    f.start_controller(&ControllerFaults {
        drop_first_commit_reply_for: Some(v2),
        ..ControllerFaults::default()
    })
    .await?;
    // Node a waits LOST_REPLY_RETRY_MS before asking again: the caller's
    // cut (or SIGKILL) must land before the retry's reply gets through, and
    // on a loaded 2-core CI machine 1 s was once not enough (scenario 3).
    let slow_retry = AgentFaults {
        retry_ms: Some(LOST_REPLY_RETRY_MS),
        ..AgentFaults::default()
    };
    baseline(f, &slow_retry).await?;
    let id = f
        .rollout("v2", "node-a", &["node-b", "node-c"], 1, false)
        .await?;
    let op = op_id(f, &id, "node-a").await?;
    f.wait_event("the canary's commit decision is logged", WAIT_MS, |e| {
        is_commit_decided(e, &op)
    })
    .await?;
    Ok((id, op))
}

async fn lost_reply(f: &mut Fleet) -> anyhow::Result<String> {
    let (id, op) = canary_decided_reply_dropped(f).await?;
    // The first reply was dropped by the controller's fault switch; the
    // one-way cut keeps every retry's reply from arriving too.
    f.net.cut_one_way("a", Direction::Inbound)?;
    f.rollout_command("pause", &id).await?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let s = f.status().await?;
    ensure!(
        rollout_is(&s, &id, "paused"),
        "paused: {:?}",
        rollout(&s, &id)
    );
    let canary = op_of(&s, &id, "node-a").context("op")?;
    ensure!(canary.outcome.is_none(), "no evidence yet: {canary:?}");
    f.net.heal_one_way("a", Direction::Inbound)?;
    let s = f
        .wait("the canary op settles while paused", WAIT_MS, |s| {
            op_of(s, &id, "node-a").is_some_and(|o| o.outcome.as_deref() == Some("verified"))
        })
        .await?;
    ensure!(
        rollout_is(&s, &id, "paused"),
        "still paused: {:?}",
        rollout(&s, &id)
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    let s = f.status().await?;
    ensure!(
        op_of(&s, &id, "node-b").is_none() && op_of(&s, &id, "node-c").is_none(),
        "no follower granted while paused: {:?}",
        s.ops
    );
    let events = f.events().await?;
    let (decided, differing) = decisions(&events, &op);
    let replayed = replays(&events, &op);
    ensure!(decided == 1, "one stored decision, got {decided}");
    ensure!(
        differing == 0,
        "{differing} replays differ from the stored decision"
    );
    ensure!(
        replayed >= 1,
        "the decision reached the node only by a replay"
    );
    f.rollout_command("resume", &id).await?;
    f.wait("the rollout completes after resume", WAIT_MS, |s| {
        rollout_is(s, &id, "completed")
    })
    .await?;
    Ok(format!("1 decision, {replayed} replays, none differing"))
}

async fn controller_killed_before_reply(f: &mut Fleet) -> anyhow::Result<String> {
    // The fault switch held the reply back after the decision was durable:
    // the SIGKILL below lands between "decided" and "replied".
    let (id, op) = canary_decided_reply_dropped(f).await?;
    f.kill("controller").await?;
    f.start_controller(&ControllerFaults::default()).await?;
    f.wait("the canary op settles after the restart", WAIT_MS, |s| {
        op_of(s, &id, "node-a").is_some_and(|o| o.outcome.as_deref() == Some("verified"))
    })
    .await?;
    f.wait("the rollout completes", WAIT_MS, |s| {
        rollout_is(s, &id, "completed")
    })
    .await?;
    let events = f.events().await?;
    let (decided, differing) = decisions(&events, &op);
    let replayed = replays(&events, &op);
    ensure!(decided == 1, "one stored decision, got {decided}");
    ensure!(differing == 0, "a replay differs from the stored decision");
    ensure!(
        replayed >= 1,
        "the restarted controller replayed the decision"
    );
    Ok(format!(
        "decision replayed {replayed}x after SIGKILL, never re-decided"
    ))
}

/// v1 everywhere with node-a's agent started with `faults(v2)`, then v2's
/// rollout (canary node-a, slots 1) started: its id.
async fn v2_on_faulty_canary(
    f: &mut Fleet,
    faults: impl FnOnce(model::Digest) -> AgentFaults,
) -> anyhow::Result<String> {
    let v2 = f.digest("v2");
    baseline(f, &faults(v2)).await?;
    f.rollout("v2", "node-a", &["node-b", "node-c"], 1, false)
        .await
}

async fn wrong_answer(f: &mut Fleet) -> anyhow::Result<String> {
    let id = v2_on_faulty_canary(f, |v2| AgentFaults {
        answer_wrongly: vec![v2],
        ..AgentFaults::default()
    })
    .await?;
    let s = f
        .wait("the canary op settles rolled back", WAIT_MS, |s| {
            op_of(s, &id, "node-a").is_some_and(|o| o.outcome.as_deref() == Some("rolled-back"))
        })
        .await?;
    ensure!(
        rollout_is(&s, &id, "paused"),
        "paused: {:?}",
        rollout(&s, &id)
    );
    f.assert_serves("node-a", "v1").await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let s = f.status().await?;
    ensure!(
        op_of(&s, &id, "node-b").is_none() && op_of(&s, &id, "node-c").is_none(),
        "no follower granted: {:?}",
        s.ops
    );
    let (code, proof) = f.rollout_proof(&id).await?;
    let text = proof.to_string();
    ensure!(
        code == 1 && proof["verdict"] == "failed" && text.contains("probe_wrong_answer"),
        "the rollout's proof is failed with probe_wrong_answer: {proof:#}"
    );
    Ok("restored v1 proven by probe, paused, no follower; proof failed/probe_wrong_answer".into())
}

async fn restored_app_killed(f: &mut Fleet) -> anyhow::Result<String> {
    let v1 = f.digest("v1");
    let id = v2_on_faulty_canary(f, |v2| AgentFaults {
        answer_wrongly: vec![v2],
        hold_at: Some(("restore-probe", 4_000)),
        ..AgentFaults::default()
    })
    .await?;
    f.wait_log("node-a", "holding at restore-probe", WAIT_MS)
        .await?;
    let pids = f.app_pids("node-a", v1);
    ensure!(!pids.is_empty(), "the restored v1 app is running");
    for pid in &pids {
        // SAFETY: kill(2) of the app process, behind the agent's back.
        unsafe {
            libc::kill(*pid as i32, libc::SIGKILL);
        }
    }
    let s = f
        .wait(
            "the canary op turns UNKNOWN (restore unproven)",
            WAIT_MS,
            |s| op_of(s, &id, "node-a").is_some_and(|o| o.unknown.is_some()),
        )
        .await?;
    let canary = op_of(&s, &id, "node-a").context("op")?.clone();
    ensure!(canary.holds_slot && canary.outcome.is_none(), "{canary:?}");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let s = f.status().await?;
    let still = op_of(&s, &id, "node-a").context("op")?;
    ensure!(
        still.outcome.is_none() && still.holds_slot,
        "without proof the op stays UNKNOWN: {still:?}"
    );
    ensure!(
        op_of(&s, &id, "node-b").is_none(),
        "no follower granted: {:?}",
        s.ops
    );
    f.kill("node-a").await?;
    f.start_agent("node-a", &AgentFaults::default())?;
    f.wait(
        "the agent restart proves the baseline; the op settles",
        WAIT_MS,
        |s| op_of(s, &id, "node-a").is_some_and(|o| o.outcome.as_deref() == Some("rolled-back")),
    )
    .await?;
    f.assert_serves("node-a", "v1").await?;
    Ok(format!(
        "{} UNKNOWN until the restarted agent proved v1",
        canary.id
    ))
}

async fn offline_during_change(f: &mut Fleet) -> anyhow::Result<String> {
    baseline(f, &AgentFaults::default()).await?;
    f.net.cut("c")?;
    let r1 = f
        .rollout("v2", "node-a", &["node-b", "node-c"], 1, false)
        .await?;
    let stale = op_id(f, &r1, "node-c").await?;
    // Node-c is offline, not merely slow: wait until the controller has
    // dropped its connection (QUIC idle timeout), so the Apply queued on the
    // dead connection is gone and only what the controller sends on
    // reconnect can reach node-c.
    f.wait("the controller drops node-c's connection", WAIT_MS, |s| {
        !connected(s, "node-c")
    })
    .await?;
    let r2 = f
        .rollout("v3", "node-a", &["node-b", "node-c"], 1, false)
        .await?;
    f.wait(
        "r1 superseded; node-a and node-b verified on v3",
        WAIT_MS,
        |s| {
            rollout_is(s, &r1, "superseded")
                && ["node-a", "node-b"].iter().all(|n| {
                    op_of(s, &r2, n).is_some_and(|o| o.outcome.as_deref() == Some("verified"))
                })
        },
    )
    .await?;
    f.net.heal("c")?;
    f.wait("r2 completes once node-c is back", WAIT_MS, |s| {
        rollout_is(s, &r2, "completed")
    })
    .await?;
    for node in NODES {
        f.assert_serves(node, "v3").await?;
    }
    let s = f.status().await?;
    let old = s.ops.iter().find(|o| o.id == stale).context("stale op")?;
    ensure!(
        old.outcome.as_deref() != Some("verified") && old.decision.as_deref() != Some("commit"),
        "the superseded op never applied on node-c: {old:?}"
    );
    let events = f.events().await?;
    let rejected = events
        .iter()
        .filter(|e| matches!(e.event, Event::StaleCommandRejected { .. }))
        .count();
    let c_reports_v2 = events.iter().any(|e| {
        matches!(&e.event, Event::ReportRecorded { op, observation, .. }
            if op.to_string() == stale && observation.identity == Some(f.digest("v2")))
    });
    ensure!(!c_reports_v2, "node-c never served v2");
    // The supersede stored an abort for the op node-c never received, so on
    // reconnect node-c hears that abort, not the old Apply: it never
    // fetches or stages v2.
    let staged = f
        .dir
        .join(format!("node-c-data/releases/{}", f.digest("v2").to_hex()));
    ensure!(
        !staged.exists(),
        "node-c never fetched the superseded v2: {} exists",
        staged.display()
    );
    ensure!(
        f.logs("node-c").contains("before receiving it"),
        "node-c journals the abort of an op it never received"
    );
    Ok(format!(
        "stale {stale} {} / {}, v2 never fetched on node-c; {rejected} stale command(s) rejected by generation",
        old.decision.as_deref().unwrap_or("undecided"),
        old.outcome.as_deref().unwrap_or("open")
    ))
}

async fn agent_killed_in_each_stage(f: &mut Fleet) -> anyhow::Result<String> {
    baseline(f, &AgentFaults::default()).await?;
    let stages = [
        ("fetch", "v2", Some("Retry")),
        ("verify", "v3", Some("Retry")),
        ("stage", "v4", Some("Resume")),
        ("switch", "v5", None),
        ("probe", "v6", None),
    ];
    let mut notes = Vec::new();
    for (stage, version, expect_exit) in stages {
        f.kill("node-a").await?;
        f.start_agent(
            "node-a",
            &AgentFaults {
                hold_at: Some((stage, 30_000)),
                ..AgentFaults::default()
            },
        )?;
        f.wait("node-a reconnects", WAIT_MS, |s| connected(s, "node-a"))
            .await?;
        let id = f.rollout(version, "node-a", &[], 1, false).await?;
        let op = op_id(f, &id, "node-a").await?;
        f.wait_log("node-a", &format!("holding at {stage}"), WAIT_MS)
            .await?;
        f.kill("node-a").await?;
        f.start_agent("node-a", &AgentFaults::default())?;
        let s = f
            .wait(
                &format!("{id} completes after a SIGKILL in {stage}"),
                WAIT_MS,
                |s| rollout_is(s, &id, "completed"),
            )
            .await?;
        let o = op_of(&s, &id, "node-a").context("op")?;
        ensure!(o.outcome.as_deref() == Some("verified"), "{stage}: {o:?}");
        let (decided, differing) = decisions(&f.events().await?, &op);
        ensure!(
            decided == 1 && differing == 0,
            "{stage}: one decision, got {decided}"
        );
        f.assert_serves("node-a", version).await?;
        let log = f.last_log("node-a");
        // SPEC §5: a restart is a new attempt of the same op, never a new op.
        ensure!(
            log.contains(&format!("restarted with {op} live: resuming as attempt")),
            "{stage}: the restart should resume {op} under a new attempt id"
        );
        let table: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("recovery table") && l.contains(&op))
            .collect();
        match expect_exit {
            Some(exit) => ensure!(
                table
                    .first()
                    .is_some_and(|l| l.contains(&format!("-> {exit}"))),
                "{stage}: after the restart the table should pick {exit}: {table:?}"
            ),
            None => ensure!(
                table.is_empty(),
                "{stage}: past the decision the staging table is not consulted: {table:?}"
            ),
        }
        notes.push(format!(
            "{stage}: {}",
            expect_exit.unwrap_or("resumed past decision")
        ));
    }
    Ok(notes.join(", "))
}

async fn approval_survives_restart(f: &mut Fleet) -> anyhow::Result<String> {
    baseline(f, &AgentFaults::default()).await?;
    let id = f
        .rollout("v2", "node-a", &["node-b", "node-c"], 1, true)
        .await?;
    f.wait("waiting for approval after the canary", WAIT_MS, |s| {
        rollout_is(s, &id, "waiting-approval")
    })
    .await?;
    f.kill("controller").await?;
    f.start_controller(&ControllerFaults::default()).await?;
    let s = f.status().await?;
    ensure!(
        rollout_is(&s, &id, "waiting-approval"),
        "still waiting after the restart: {:?}",
        rollout(&s, &id)
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let s = f.status().await?;
    ensure!(
        rollout_is(&s, &id, "waiting-approval") && op_of(&s, &id, "node-b").is_none(),
        "nobody approved but the operator: {:?}",
        s.ops
    );
    f.rollout_command("approve", &id).await?;
    f.wait("the rollout completes after approval", WAIT_MS, |s| {
        rollout_is(s, &id, "completed")
    })
    .await?;
    Ok("waiting-approval across a SIGKILL, completed after approve".into())
}

async fn restart_loop(f: &mut Fleet) -> anyhow::Result<String> {
    let id = v2_on_faulty_canary(f, |v2| AgentFaults {
        crash_on_start: vec![v2],
        ..AgentFaults::default()
    })
    .await?;
    let s = f
        .wait("the canary op settles", WAIT_MS, |s| {
            op_of(s, &id, "node-a").is_some_and(|o| o.outcome.is_some())
        })
        .await?;
    let canary = op_of(&s, &id, "node-a").context("op")?;
    ensure!(
        canary.outcome.as_deref() == Some("rolled-back"),
        "{canary:?}"
    );
    f.assert_serves("node-a", "v1").await?;
    let (code, proof) = f.rollout_proof(&id).await?;
    let text = proof.to_string();
    ensure!(
        code == 1 && text.contains("\"failed\"") && text.contains("restart_loop"),
        "proof failed with restart_loop: {proof:#}"
    );
    Ok("proof failed/restart_loop, v1 restored".into())
}

async fn tampered_bundle(f: &mut Fleet) -> anyhow::Result<String> {
    baseline(f, &AgentFaults::default()).await?;
    let v2 = f.digest("v2");
    let good = std::fs::read(f.bundle_file("v2"))?;
    f.upload(&good).await?;
    let stored = f
        .controller_data()
        .join(format!("bundles/{}.bundle", v2.to_hex()));
    let mut bad = std::fs::read(&stored)?;
    ensure!(bad == good, "the controller stored what was uploaded");
    let at = bad.len() / 2;
    bad[at] ^= 0x01;
    std::fs::write(&stored, &bad)?;
    let id = f
        .start_rollout_api(v2, "node-a", &["node-b", "node-c"])
        .await?;
    let s = f
        .wait("the canary op settles", WAIT_MS, |s| {
            op_of(s, &id, "node-a").is_some_and(|o| o.outcome.is_some())
        })
        .await?;
    let canary = op_of(&s, &id, "node-a").context("op")?.clone();
    ensure!(
        canary.outcome.as_deref() == Some("not-applied"),
        "{canary:?}"
    );
    let events = f.events().await?;
    ensure!(decisions(&events, &canary.id).0 == 0, "never decided");
    let v1 = f.digest("v1");
    ensure!(
        events.iter().any(|e| matches!(&e.event,
            Event::ReportRecorded { op, kind: model::ReportKind::Refused(model::StageRefusal::BundleUnavailable), observation }
                if op.to_string() == canary.id && observation.proves_serving(v1))),
        "evidence: a refused (the controller has no such bundle) report proving v1 still serves"
    );
    f.assert_serves("node-a", "v1").await?;
    let staged = f.dir.join(format!("node-a-data/releases/{}", v2.to_hex()));
    ensure!(
        !staged.exists(),
        "nothing installed: {} exists",
        staged.display()
    );
    ensure!(
        f.logs("node-a")
            .contains(&format!("refuses the bundle of {}", canary.id)),
        "the node refused the bundle"
    );
    let (code, proof) = f.rollout_proof(&id).await?;
    ensure!(
        code == 1
            && proof
                .to_string()
                .contains("refused the release: the controller has no such bundle"),
        "the proof says why node-a never applied it: {proof:#}"
    );
    Ok("not-applied with v1 proven, nothing installed; the proof names the refusal".into())
}

async fn foreign_certificate(f: &mut Fleet) -> anyhow::Result<String> {
    baseline(f, &AgentFaults::default()).await?;
    // Late reports after the rollout settle are logged too; wait until the
    // log is quiet so that any later entry can only be the intruder's.
    let before = f.quiet_sequence(2_000, WAIT_MS).await?;
    let names: Vec<String> = NODES.iter().map(|s| s.to_string()).collect();
    let foreign = protocol::pki::init_fleet(&f.dir.join("foreign-pki"), &names, "localhost")?;
    // The intruder trusts the real controller (fleet CA) but presents a
    // node-c certificate from another CA.
    f.start_agent_as(
        "intruder",
        "node-c",
        &AgentFaults::default(),
        Some(&foreign),
    )?;
    tokio::time::sleep(Duration::from_secs(4)).await;
    let s = f.status().await?;
    ensure!(
        s.last_sequence == before,
        "nothing logged from the intruder: {before:?} -> {:?}\n{}",
        s.last_sequence,
        f.event_text().await
    );
    ensure!(
        f.logs("intruder").contains("invalid peer certificate"),
        "the intruder's handshake is refused:\n{}",
        f.logs("intruder")
    );
    ensure!(
        f.logs("controller").contains("refused agent connection"),
        "the controller logs the refusal"
    );
    f.kill("intruder").await?;
    Ok(format!("log sequence unchanged at {before:?}"))
}

async fn lossy_links(f: &mut Fleet) -> anyhow::Result<String> {
    f.start_relay(200)?;
    f.net.lose(30)?;
    baseline_within(f, &AgentFaults::default(), LOSSY_WAIT_MS).await?;
    let id = f
        .rollout("v2", "node-a", &["node-b", "node-c"], 1, false)
        .await?;
    f.wait(
        "the rollout completes under loss and delay",
        LOSSY_WAIT_MS,
        |s| rollout_is(s, &id, "completed"),
    )
    .await?;
    for node in NODES {
        f.assert_serves(node, "v2").await?;
    }
    let events = f.events().await?;
    let held = max_slots_held(&events, &id);
    ensure!(held == 1, "slots 1 but {held} held at once");
    let unknown = events
        .iter()
        .filter(|e| matches!(e.event, Event::OpUnknown { .. }))
        .count();
    Ok(format!(
        "completed; {unknown} op(s) went UNKNOWN on the way and settled"
    ))
}

async fn follower_partitioned(f: &mut Fleet) -> anyhow::Result<String> {
    baseline(f, &AgentFaults::default()).await?;
    f.net.cut("c")?;
    let id = f
        .rollout("v2", "node-a", &["node-b", "node-c"], 2, false)
        .await?;
    let s = f
        .wait(
            "node-b verified while node-c is silent and UNKNOWN",
            WAIT_MS,
            |s| {
                op_of(s, &id, "node-b").is_some_and(|o| o.outcome.as_deref() == Some("verified"))
                    && op_of(s, &id, "node-c").is_some_and(|o| o.unknown.is_some())
            },
        )
        .await?;
    let silent = op_of(&s, &id, "node-c").context("op")?;
    ensure!(silent.holds_slot && silent.outcome.is_none(), "{silent:?}");
    let r = rollout(&s, &id).context("rollout")?;
    ensure!(r.slots_occupied == 1 && r.status == "active", "{r:?}");
    f.net.heal("c")?;
    f.wait("the rollout completes after healing", WAIT_MS, |s| {
        rollout_is(s, &id, "completed")
    })
    .await?;
    let held = max_slots_held(&f.events().await?, &id);
    ensure!(held <= 2, "slots 2 but {held} held at once");
    Ok("node-b verified, node-c's slot held until it came back".into())
}

async fn rolling_restarts(f: &mut Fleet) -> anyhow::Result<String> {
    baseline(f, &AgentFaults::default()).await?;
    let id = f
        .rollout("v2", "node-a", &["node-b", "node-c"], 1, false)
        .await?;
    for name in ["controller", "node-a", "node-b", "node-c"] {
        tokio::time::sleep(Duration::from_millis(700)).await;
        f.stop(name).await?;
        if name == "controller" {
            f.start_controller(&ControllerFaults::default()).await?;
        } else {
            f.start_agent(name, &AgentFaults::default())?;
            // Its route is rebuilt (journal, app started, probed) before it
            // reconnects; until then it answers 503.
            f.wait_log(name, "reconstructed what serves", WAIT_MS)
                .await?;
        }
    }
    let s = f
        .wait("the rollout completes", WAIT_MS, |s| {
            rollout_is(s, &id, "completed")
        })
        .await?;
    let events = f.events().await?;
    for o in s.ops.iter().filter(|o| o.rollout == id) {
        let (decided, differing) = decisions(&events, &o.id);
        ensure!(
            decided == 1 && differing == 0,
            "{}: {decided} decisions",
            o.id
        );
    }
    for node in NODES {
        f.assert_serves(node, "v2").await?;
    }
    Ok("every process restarted once; one decision per op".into())
}

/// v2 rolled out and verified everywhere (v1 first, then v2 through the
/// canary); returns the v2 rollout's id.
async fn verified_v2(f: &mut Fleet) -> anyhow::Result<String> {
    baseline(f, &AgentFaults::default()).await?;
    let id = f
        .rollout("v2", "node-a", &["node-b", "node-c"], 3, false)
        .await?;
    f.wait("v2 everywhere", WAIT_MS, |s| {
        rollout_is(s, &id, "completed")
    })
    .await?;
    let (code, proof) = f.node_proof("node-b").await?;
    ensure!(
        code == 0 && proof["verdict"] == "verified" && proof["mode"] == "live",
        "before the swap the live proof is verified: {proof:#}"
    );
    Ok(id)
}

/// What a drifted node must show on every surface: `status --json`,
/// `/metrics`, the handover report, and the cached proof labelled recorded.
async fn assert_drift_shown(f: &Fleet, node: &str, drifted_total: usize) -> anyhow::Result<()> {
    let s = f.status().await?;
    let n = s
        .nodes
        .iter()
        .find(|n| n.name == node)
        .context("node in status")?;
    ensure!(
        n.drifted && n.observed.is_some(),
        "status shows {node} drifted: {n:?}"
    );
    let metrics = f.metrics().await?;
    ensure!(
        metrics.contains(&format!("fleetweft_nodes_drifted {drifted_total}")),
        "/metrics counts {drifted_total} drifted: {metrics}"
    );
    let (code, open) = f.unresolved().await?;
    let entry = open
        .as_array()
        .and_then(|a| {
            a.iter()
                .find(|u| u["node"] == node && u["phase"] == "drifted")
        })
        .with_context(|| format!("a drifted entry for {node} in the handover report: {open:#}"))?;
    ensure!(code == 1, "the handover report has work");
    ensure!(
        entry["check_command"] == format!("fleetweft proof {node}"),
        "it names the command that verifies: {entry:#}"
    );
    let (code, out) = f.cli(&["proof", node, "--cached", "--json"]).await?;
    let cached: serde_json::Value = serde_json::from_str(&out)?;
    ensure!(
        code == 1 && cached["mode"] == "recorded" && cached["drifted"] == true,
        "the cached proof is labelled recorded and shows the drift: {cached:#}"
    );
    let (_, text) = f.cli(&["proof", node]).await?;
    ensure!(
        text.contains("OBSERVED AT") && text.contains(" ago)"),
        "every proof item prints its observation time: {text}"
    );
    Ok(())
}

async fn swapped_behind_agent(f: &mut Fleet) -> anyhow::Result<String> {
    verified_v2(f).await?;
    let (v1, v2) = (f.digest("v1"), f.digest("v2"));
    // Behind the agent's back: the installed v2 app file becomes v1's, and
    // the process is killed so the supervisor starts the swapped file.
    let v2_dir = f.app_dir("node-c", v2).context("node-c's v2 app runs")?;
    let v1_app = f
        .dir
        .join("node-c-data/releases")
        .join(v1.to_hex())
        .join("app.py");
    std::fs::copy(&v1_app, v2_dir.join("app.py"))
        .with_context(|| format!("copying {}", v1_app.display()))?;
    for pid in f.app_pids("node-c", v2) {
        // SAFETY: kill(2) of the app process, behind the agent's back.
        unsafe {
            libc::kill(pid as i32, libc::SIGKILL);
        }
    }
    wait_for("node-c's route answers as v1", WAIT_MS, || async {
        f.public("node-c")
            .await
            .is_some_and(|a| a.body == "hello from v1")
    })
    .await?;
    // A healthy v1 serves where v2 should (seed 003's stale, issue #24
    // item 1): the readback finds v1's signed app, its answer passes v1's
    // own spec, and the proof names v1.
    let (code, proof) = f.node_proof("node-c").await?;
    let named = format!("; v1 ({}) serves in its place", &v1.to_hex()[..12]);
    ensure!(
        code == 1
            && proof["verdict"] == "stale"
            && proof["reason"] == "older_release_serving"
            && proof["mode"] == "live"
            && proof["summary"]
                .as_str()
                .is_some_and(|s| s.ends_with(&named)),
        "the live proof reads the swap back and names v1: {proof:#}"
    );
    let (code, out) = f.cli(&["probe", "node-c"]).await?;
    ensure!(
        code == 1 && out.contains("verdict: wrong answer"),
        "fleetweft probe exits 1: {out}"
    );
    assert_drift_shown(f, "node-c", 1).await?;
    // History is not rewritten: the op stays verified.
    let s = f.status().await?;
    ensure!(
        s.ops
            .iter()
            .filter(|o| o.node == "node-c")
            .all(|o| o.outcome.as_deref() == Some("verified")),
        "node-c's ops stay as they settled: {:?}",
        s.ops
    );
    Ok("proof stale/older_release_serving naming v1 (live), probe exit 1, drifted in status, /metrics, handover".into())
}

async fn route_answers_as_another_release(f: &mut Fleet) -> anyhow::Result<String> {
    verified_v2(f).await?;
    let v1 = f.digest("v1");
    // A stand-in takes node-b's public port and answers the expected body
    // as another release.
    f.kill("node-b").await?;
    f.start_standin("node-b", "hello from v2", &v1.to_hex())?;
    wait_for(
        "the stand-in answers on node-b's route",
        WAIT_MS,
        || async {
            f.public("node-b")
                .await
                .is_some_and(|a| a.identity.as_deref() == Some(v1.to_hex().as_str()))
        },
    )
    .await?;
    let (code, proof) = f.node_proof("node-b").await?;
    ensure!(
        code == 1 && proof["verdict"] == "failed" && proof["reason"] == "route_identity_mismatch",
        "the live proof fails on identity: {proof:#}"
    );
    let (code, out) = f.cli(&["probe", "node-b"]).await?;
    ensure!(
        code == 1 && out.contains("verdict: wrong identity"),
        "fleetweft probe exits 1 on the wrong identity: {out}"
    );
    assert_drift_shown(f, "node-b", 1).await?;
    f.kill("standin-node-b").await?;
    Ok(
        "proof failed/route_identity_mismatch, probe 'wrong identity' exit 1, drifted everywhere"
            .into(),
    )
}

/// The log sequence of the first event matching `find`.
fn sequence_of(events: &[EventDto], find: impl Fn(&Event) -> bool) -> Option<u64> {
    events.iter().find(|e| find(&e.event)).map(|e| e.sequence)
}

/// [`waves_with_a_failure_budget`]'s agents, node-c and node-e answering v2
/// wrongly, all connected.
async fn start_wave_agents(f: &mut Fleet) -> anyhow::Result<()> {
    let v2 = f.digest("v2");
    let wrong = AgentFaults {
        answer_wrongly: vec![v2],
        ..AgentFaults::default()
    };
    for node in WAVE_NODES {
        let faults = if node == "node-c" || node == "node-e" {
            &wrong
        } else {
            &AgentFaults::default()
        };
        f.start_agent(node, faults)?;
    }
    f.wait("every agent connected", WAIT_MS, all_connected)
        .await?;
    Ok(())
}

/// Canary node-a, waves b,c then d,e (`--waves 50%,100%`), slots 2,
/// `--max-failed 1`; node-c and node-e answer v2 wrongly while healthy.
/// node-c's failure is within the budget: restored with proof, the rollout
/// goes on. node-e's spends it: restored with proof, the rollout pauses
/// itself (failure budget) and refuses a resume.
async fn waves_with_a_failure_budget(f: &mut Fleet) -> anyhow::Result<String> {
    start_wave_agents(f).await?;
    let followers = &WAVE_NODES[1..];
    let v1 = f.rollout("v1", "node-a", followers, 4, false).await?;
    f.wait("v1 everywhere", WAIT_MS, |s| {
        rollout_is(s, &v1, "completed")
    })
    .await?;
    let id = f
        .rollout_with(
            "v2",
            "node-a",
            followers,
            2,
            &["--waves", "50%,100%", "--max-failed", "1"],
        )
        .await?;
    let s = f
        .wait("the rollout pauses itself", WAIT_MS, |s| {
            rollout_is(s, &id, "paused")
                && followers
                    .iter()
                    .all(|n| op_of(s, &id, n).is_some_and(|o| o.outcome.is_some()))
        })
        .await?;
    let r = rollout(&s, &id).context("rollout")?;
    let reason = r.paused_reason.clone().unwrap_or_default();
    let e_op = op_of(&s, &id, "node-e").context("node-e's op")?.id.clone();
    ensure!(
        reason == format!("{e_op} failed over the failure budget"),
        "paused by node-e's failure over the budget: {r:?}"
    );
    for (node, outcome) in [
        ("node-a", "verified"),
        ("node-b", "verified"),
        ("node-c", "rolled-back"),
        ("node-d", "verified"),
        ("node-e", "rolled-back"),
    ] {
        let o = op_of(&s, &id, node).context("op")?;
        ensure!(o.outcome.as_deref() == Some(outcome), "{node}: {o:?}");
        f.assert_serves(node, if outcome == "verified" { "v2" } else { "v1" })
            .await?;
    }
    let events = f.events().await?;
    waves_in_order(&events, &s, &id)?;
    // The CLI says why on stderr; the exit code and the state are what
    // count here.
    let (code, out) = f.cli(&["rollout", "resume", &id, "--json"]).await?;
    ensure!(
        code == 1,
        "a resume over the budget is refused ({code}): {out}"
    );
    let after = f.status().await?;
    ensure!(
        rollout_is(&after, &id, "paused") && after.ops.len() == s.ops.len(),
        "still paused, nothing granted: {:?}",
        rollout(&after, &id)
    );
    let (_, status) = f.cli(&["status"]).await?;
    ensure!(
        status.contains("failure budget"),
        "status says why it paused: {status}"
    );
    let held = max_slots_held(&events, &id);
    ensure!(held <= 2, "slots 2 but {held} held at once");
    Ok(format!(
        "wave 2 granted only after wave 1 settled; node-c restored within the budget, node-e over it: paused ({reason}); resume refused; at most {held} slots held"
    ))
}

/// From the log: no op of wave 2 (node-d, node-e) is granted before both
/// ops of wave 1 (node-b, node-c) settled; node-c's failure paused
/// nothing (it was within the budget), and the only pause is node-e's.
fn waves_in_order(events: &[EventDto], s: &FleetView, id: &str) -> anyhow::Result<()> {
    let op =
        |node: &str| -> anyhow::Result<String> { Ok(op_of(s, id, node).context("op")?.id.clone()) };
    let granted = |op: &str| {
        sequence_of(
            events,
            |e| matches!(e, Event::OpGranted { op: o, .. } if o.to_string() == op),
        )
    };
    let settled = |op: &str| {
        sequence_of(
            events,
            |e| matches!(e, Event::OpSettled { op: o, .. } if o.to_string() == op),
        )
    };
    let mut wave1_settled = 0;
    for node in ["node-b", "node-c"] {
        let seq = settled(&op(node)?).with_context(|| format!("{node}'s op settled"))?;
        wave1_settled = wave1_settled.max(seq);
    }
    for node in ["node-d", "node-e"] {
        let seq = granted(&op(node)?).with_context(|| format!("{node}'s op granted"))?;
        ensure!(
            seq > wave1_settled,
            "{node} granted at #{seq}, before wave 1 settled at #{wave1_settled}"
        );
    }
    let pauses: Vec<&EventDto> = events
        .iter()
        .filter(|e| matches!(&e.event, Event::RolloutPaused { rollout, .. } if rollout.to_string() == id))
        .collect();
    ensure!(
        pauses.len() == 1 && pauses[0].sequence > wave1_settled,
        "one pause, in wave 2: {:?}",
        pauses.iter().map(|e| &e.text).collect::<Vec<_>>()
    );
    Ok(())
}
