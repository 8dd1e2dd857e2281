//! The rollout as an operator starts and watches it (the HTTP API with the
//! operator token), and the report: what the controller recorded, what it
//! cost (`/proc`), what the agents saw, and a restart on the log.

use crate::fleet::{Fleet, PROGRESS_EVERY_MS, ROLLOUT_POLL_MS};
use crate::options::Options;
use crate::stats::{Percentiles, Stats};
use anyhow::Context;
use api::client::ApiClient;
use api::view::{OpDto, RolloutDto};
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Rollout statuses that end the wait.
pub const ENDED_STATUSES: [&str; 5] = [
    "completed",
    "paused",
    "waiting-approval",
    "superseded",
    "ended",
];

/// The whole report (`--json` prints exactly this).
#[derive(Debug, Serialize)]
pub struct Report {
    /// Simulated agents.
    pub agents: usize,
    /// The slot budget.
    pub slots: u16,
    /// Nodes given each fault.
    pub faults: FaultCounts,
    /// The PKI.
    pub pki: crate::pki::PkiTiming,
    /// Seconds until every agent was connected.
    pub connect_s: f64,
    /// Handshake times (TLS + QUIC, as the agents saw them).
    pub handshake: Percentiles,
    /// The rollout.
    pub rollout: RolloutReport,
    /// The controller's cost.
    pub controller: ControllerReport,
    /// The event log.
    pub events: EventsReport,
    /// Commit request to commit reply, as the agents saw it.
    pub commit_latency: Percentiles,
    /// What the agents did.
    pub agents_saw: AgentCounts,
    /// Proofs fetched after the rollout.
    pub proofs: BTreeMap<String, String>,
    /// Restarting the controller on the resulting log.
    pub restart: Option<RestartReport>,
}

/// How many nodes got each fault.
#[derive(Debug, Serialize)]
pub struct FaultCounts {
    /// Answer wrongly.
    pub wrong: usize,
    /// Go silent.
    pub silent: usize,
    /// Crash and restart.
    pub crash: usize,
}

/// The rollout, as the controller recorded it.
#[derive(Debug, Serialize)]
pub struct RolloutReport {
    /// Its id.
    pub id: String,
    /// Its final status.
    pub status: String,
    /// Why it paused, if it did.
    pub paused_reason: Option<String>,
    /// Whether it ended before `--timeout-s`.
    pub finished: bool,
    /// From the start request to the end, in seconds.
    pub wall_s: f64,
    /// From the start request until every op granted before the end was
    /// settled or UNKNOWN, in seconds.
    pub settled_s: f64,
    /// Ops granted.
    pub ops: usize,
    /// Ops by outcome (`verified`, `rolled-back`, ...; `unknown` holding a
    /// slot; `open` otherwise unsettled).
    pub outcomes: BTreeMap<String, usize>,
    /// Verified ops per minute of `settled_s`.
    pub node_updates_per_min: f64,
    /// Entries in the handover report (`/api/unresolved`).
    pub unresolved: usize,
}

/// The controller process's cost.
#[derive(Debug, Serialize)]
pub struct ControllerReport {
    /// CPU seconds over its whole life (user + system).
    pub cpu_s: f64,
    /// CPU seconds during the rollout.
    pub cpu_s_rollout: f64,
    /// RSS before any agent connected, KiB.
    pub rss_before_agents_kib: u64,
    /// Peak RSS (VmHWM), KiB.
    pub peak_rss_kib: u64,
    /// (peak - before) / agents, KiB.
    pub rss_per_agent_kib: f64,
}

/// The event log.
#[derive(Debug, Serialize)]
pub struct EventsReport {
    /// Entries in the log (`fleetweft_log_sequence` + 1).
    pub in_log: u64,
    /// Events per flush, when the controller exposes flushes.
    pub per_flush: Option<f64>,
    /// Why `per_flush` is missing.
    pub note: Option<String>,
}

/// What the agents did.
#[derive(Debug, Serialize)]
pub struct AgentCounts {
    /// `Apply` commands received.
    pub applies: usize,
    /// Bundles fetched.
    pub fetches: usize,
    /// Routes switched.
    pub switches: usize,
    /// `Restore` commands received.
    pub restores: usize,
    /// Ops closed by the controller's `Settled`.
    pub closed: usize,
    /// Went silent.
    pub silences: usize,
    /// Crashed and restarted.
    pub crashes: usize,
    /// Failed connection attempts.
    pub connect_failures: usize,
}

/// The controller restarted on the resulting log.
#[derive(Debug, Serialize)]
pub struct RestartReport {
    /// From spawn to the API answering, seconds.
    pub seconds: f64,
    /// Log sequence before the kill and after the restart (equal: the
    /// whole log is back).
    pub log_sequence_before: Option<f64>,
    /// After.
    pub log_sequence_after: Option<f64>,
}

/// A Prometheus sample of `/metrics` text (the first with that exact name
/// and labels).
pub fn metric(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

/// How many times a read the report needs is asked before the run gives
/// up: a controller busy with a large fleet may miss the client's
/// 10-second call timeout a few times.
pub const API_READ_ATTEMPTS_MAX: u32 = 30;

/// GET `path`, asking again while the controller is too busy to answer.
pub async fn get_patiently<T: serde::de::DeserializeOwned>(
    api: &ApiClient,
    path: &str,
) -> anyhow::Result<T> {
    let mut attempt = 1;
    loop {
        match api.get::<T>(path).await {
            Ok(value) => return Ok(value),
            Err(e) if attempt < API_READ_ATTEMPTS_MAX => {
                eprintln!("fleetsim: GET {path} (attempt {attempt}): {e}; asking again");
                attempt += 1;
            }
            Err(e) => return Err(e).with_context(|| format!("GET {path}")),
        }
    }
}

/// Rollout `id` with its counts, from `GET /api/rollouts`, which carries
/// no follower list: `GET /api/rollouts/{id}` names every follower (1.2 MB
/// of JSON at 100,000 nodes, answered in 0.3 s on one of the controller's
/// runtime threads), and this asks again [`ROLLOUT_POLL_MS`] after each
/// answer, beside the agents' connections on the same cores. The list's size
/// grows with the rollouts run, never with the fleet; this controller runs
/// one.
async fn rollout_summary(api: &ApiClient, id: &str) -> anyhow::Result<RolloutDto> {
    let all: Vec<RolloutDto> = api.get("/api/rollouts").await?;
    find_rollout(all, id)
}

/// `id` among `all`, or an error naming it.
fn find_rollout(all: Vec<RolloutDto>, id: &str) -> anyhow::Result<RolloutDto> {
    all.into_iter()
        .find(|r| r.id == id)
        .with_context(|| format!("GET /api/rollouts lists no rollout {id}"))
}

/// Every op of rollout `id`, page by page (`/api/ops?rollout=ID`), asking
/// again while the controller is too busy to answer.
pub async fn rollout_ops_patiently(api: &ApiClient, id: &str) -> anyhow::Result<Vec<OpDto>> {
    let mut attempt = 1;
    loop {
        match api
            .all_pages::<OpDto>("/api/ops", &format!("rollout={id}"))
            .await
        {
            Ok(ops) => return Ok(ops),
            Err(e) if attempt < API_READ_ATTEMPTS_MAX => {
                eprintln!(
                    "fleetsim: GET /api/ops?rollout={id} (attempt {attempt}): {e}; asking again"
                );
                attempt += 1;
            }
            Err(e) => return Err(e).with_context(|| format!("GET /api/ops?rollout={id}")),
        }
    }
}

/// `/metrics`, asking again while the controller is too busy to answer.
pub async fn metrics_patiently(api: &ApiClient) -> anyhow::Result<String> {
    let mut attempt = 1;
    loop {
        match api.get_text("/metrics").await {
            Ok(text) => return Ok(text),
            Err(e) if attempt < API_READ_ATTEMPTS_MAX => {
                eprintln!("fleetsim: GET /metrics (attempt {attempt}): {e}; asking again");
                attempt += 1;
            }
            Err(e) => return Err(e).context("GET /metrics"),
        }
    }
}

/// The rollout's end as seen by the wait.
pub struct RolloutEnd {
    /// Its final DTO.
    pub dto: RolloutDto,
    /// Wall time to the end (completion or pause).
    pub wall: Duration,
    /// Wall time until the ops granted before the end settled or went
    /// UNKNOWN (equal to `wall` for a completed rollout).
    pub settled: Duration,
    /// Whether it ended in time.
    pub finished: bool,
}

/// The `POST /api/rollouts` body: canary first, every other node a
/// follower.
fn start_body(options: &Options, fleet: &Fleet) -> serde_json::Value {
    let mut body = serde_json::json!({
        "release": fleet.target.to_hex(),
        "canary": fleet.names[0],
        "followers": fleet.names[1..],
        "slots": options.slots,
    });
    // Waves and failure budgets are being added to the model: they go
    // through to the rollout start here, unchanged, and the controller
    // decides (today it refuses the unknown fields, which is reported).
    for (field, value) in [
        ("waves", &options.waves),
        ("max_failed", &options.max_failed),
        ("max_unknown", &options.max_unknown),
    ] {
        if let Some(v) = value {
            body[field] = serde_json::Value::String(v.clone());
        }
    }
    body
}

/// Start the rollout over every node (canary first) and wait for its end.
pub async fn run_rollout(options: &Options, fleet: &Fleet) -> anyhow::Result<RolloutEnd> {
    let body = start_body(options, fleet);
    let started = Instant::now();
    let _: serde_json::Value = fleet
        .api
        .post_json("/api/rollouts", &body)
        .await
        .context("starting the rollout")?;
    let rollouts: Vec<RolloutDto> = get_patiently(&fleet.api, "/api/rollouts").await?;
    let id = rollouts
        .last()
        .context("no rollout after the start")?
        .id
        .clone();
    eprintln!(
        "fleetsim: rollout {id} started over {} nodes, {} slots",
        fleet.names.len(),
        options.slots
    );
    let deadline = started + Duration::from_secs(options.timeout_s);
    let mut next_progress = started;
    let mut last: Option<RolloutDto> = None;
    loop {
        // A controller falling behind may not answer within the client's
        // timeout: keep asking until the deadline, never give up early.
        match rollout_summary(&fleet.api, &id).await {
            Ok(dto) => last = Some(dto),
            Err(e) => eprintln!(
                "fleetsim: [{:>6.1} s] GET /api/rollouts ({id}): {e:#}",
                started.elapsed().as_secs_f64()
            ),
        }
        let ended = last
            .as_ref()
            .is_some_and(|d| ENDED_STATUSES.contains(&d.status.as_str()));
        if ended || Instant::now() > deadline {
            let wall = started.elapsed();
            let dto = match last {
                Some(dto) => dto,
                None => {
                    let all: Vec<RolloutDto> = get_patiently(&fleet.api, "/api/rollouts").await?;
                    find_rollout(all, &id)?
                }
            };
            if ended && dto.status != "completed" {
                settle_in_flight(options, fleet, &id).await;
            }
            return Ok(RolloutEnd {
                wall,
                settled: started.elapsed(),
                finished: ended,
                dto,
            });
        }
        if let Some(dto) = last.as_ref().filter(|_| Instant::now() >= next_progress) {
            progress(fleet, started, dto).await;
            next_progress = Instant::now() + Duration::from_millis(PROGRESS_EVERY_MS);
        }
        tokio::time::sleep(Duration::from_millis(ROLLOUT_POLL_MS)).await;
    }
}

/// A paused rollout's ops already granted go on: wait (at most twice the
/// op timeout) until each is settled or UNKNOWN, so the report's outcomes
/// and handover list are final rather than a snapshot mid-flight.
async fn settle_in_flight(options: &Options, fleet: &Fleet, id: &str) {
    let deadline = Instant::now() + Duration::from_millis(options.op_timeout_ms.saturating_mul(2));
    while Instant::now() < deadline {
        // The rollout's own counts: ops holding a slot that are not UNKNOWN
        // are still in flight (no scan of its ops).
        if let Ok(dto) = fleet
            .api
            .get::<RolloutDto>(&format!("/api/rollouts/{id}"))
            .await
        {
            let open = dto.counts.occupied.saturating_sub(dto.counts.unknown);
            if open == 0 {
                return;
            }
            eprintln!("fleetsim: rollout {id} ended; {open} ops granted before it still in flight");
        }
        tokio::time::sleep(Duration::from_millis(PROGRESS_EVERY_MS)).await;
    }
}

async fn progress(fleet: &Fleet, started: Instant, dto: &RolloutDto) {
    let s = &fleet.shared.stats;
    let metrics = fleet.api.get_text("/metrics").await.unwrap_or_default();
    let unknown = metric(&metrics, "fleetweft_ops{state=\"unknown\"}").unwrap_or(0.0);
    let restores = Stats::get(&s.restores);
    eprintln!(
        "fleetsim: [{:>6.1} s] {} {} | connected {} | granted {} verified {} failed {} unknown {unknown} | silent {} crashed {}",
        started.elapsed().as_secs_f64(),
        dto.id,
        dto.status,
        Stats::get(&s.connected),
        Stats::get(&s.applies),
        Stats::get(&s.closed).saturating_sub(restores),
        restores,
        Stats::get(&s.silences),
        Stats::get(&s.crashes),
    );
}

/// Ops of rollout `id` and their count by outcome.
fn outcomes_of(ops: &[OpDto]) -> (usize, BTreeMap<String, usize>) {
    let mut outcomes = BTreeMap::new();
    for o in ops {
        let key = match (&o.outcome, &o.unknown) {
            (Some(outcome), _) => outcome.clone(),
            (None, Some(_)) if o.holds_slot => "unknown".to_string(),
            _ => "open".to_string(),
        };
        *outcomes.entry(key).or_insert(0) += 1;
    }
    (ops.len(), outcomes)
}

/// What the agents counted.
fn agent_counts(s: &Stats) -> AgentCounts {
    AgentCounts {
        applies: Stats::get(&s.applies),
        fetches: Stats::get(&s.fetches),
        switches: Stats::get(&s.switches),
        restores: Stats::get(&s.restores),
        closed: Stats::get(&s.closed),
        silences: Stats::get(&s.silences),
        crashes: Stats::get(&s.crashes),
        connect_failures: Stats::get(&s.connect_failures),
    }
}

/// Everything but the restart, read once the rollout ended.
pub async fn collect(options: &Options, fleet: &Fleet, end: RolloutEnd) -> anyhow::Result<Report> {
    let ops = rollout_ops_patiently(&fleet.api, &end.dto.id).await?;
    let unresolved: Vec<serde_json::Value> = get_patiently(&fleet.api, "/api/unresolved").await?;
    let (ops, outcomes) = outcomes_of(&ops);
    let verified = outcomes.get("verified").copied().unwrap_or(0);
    let minutes = end.settled.as_secs_f64() / 60.0;
    let proc = crate::procfs::sample(fleet.pid)?;
    let metrics = metrics_patiently(&fleet.api).await?;
    let n = fleet.names.len();
    let s = &fleet.shared.stats;
    Ok(Report {
        agents: n,
        slots: options.slots,
        faults: FaultCounts {
            wrong: fleet.faults.iter().filter(|f| f.wrong).count(),
            silent: fleet.faults.iter().filter(|f| f.silent).count(),
            crash: fleet.faults.iter().filter(|f| f.crash).count(),
        },
        pki: fleet.pki.clone(),
        connect_s: fleet.connect_s,
        handshake: s.handshake_percentiles(),
        rollout: RolloutReport {
            id: end.dto.id.clone(),
            status: end.dto.status.clone(),
            paused_reason: end.dto.paused_reason.clone(),
            finished: end.finished,
            wall_s: end.wall.as_secs_f64(),
            settled_s: end.settled.as_secs_f64(),
            ops,
            outcomes,
            node_updates_per_min: if minutes > 0.0 {
                verified as f64 / minutes
            } else {
                0.0
            },
            unresolved: unresolved.len(),
        },
        controller: ControllerReport {
            cpu_s: proc.cpu_s,
            cpu_s_rollout: proc.cpu_s - fleet.cpu_before_s,
            rss_before_agents_kib: fleet.rss_before_kib,
            peak_rss_kib: proc.peak_rss_kib,
            rss_per_agent_kib: proc.peak_rss_kib.saturating_sub(fleet.rss_before_kib) as f64
                / n as f64,
        },
        events: EventsReport {
            in_log: metric(&metrics, "fleetweft_log_sequence").map_or(0, |s| (s + 1.0) as u64),
            per_flush: metric(&metrics, "fleetweft_events_per_flush"),
            note: metric(&metrics, "fleetweft_events_per_flush")
                .is_none()
                .then(|| "the controller does not expose flushes in /metrics".to_string()),
        },
        commit_latency: s.commit_percentiles(),
        agents_saw: agent_counts(s),
        // Without agents (a timed-out run stopped them) a proof can only
        // say that nothing answered: none are asked.
        proofs: if fleet.tasks.is_empty() {
            BTreeMap::new()
        } else {
            proofs(fleet, options.proofs).await
        },
        restart: None,
    })
}

/// The proof verdicts of the canary, a few followers and every wrong node
/// (up to `count` in all): the controller probes their routes on the
/// embedded server and reads back their agents.
async fn proofs(fleet: &Fleet, count: usize) -> BTreeMap<String, String> {
    let wrong = fleet
        .faults
        .iter()
        .enumerate()
        .filter(|(_, f)| f.wrong)
        .map(|(i, _)| i);
    let picks: Vec<usize> = (0..fleet.names.len())
        .take(count)
        .chain(wrong.take(count))
        .collect();
    let mut verdicts = BTreeMap::new();
    for i in picks.into_iter().take(count.saturating_mul(2)) {
        let name = &fleet.names[i];
        let verdict = match fleet
            .api
            .get::<proof::NodeProof>(&format!("/api/nodes/{name}/proof"))
            .await
        {
            Ok(p) => serde_json::to_value(p.verdict)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
            Err(e) => format!("error: {e}"),
        };
        verdicts.insert(name.clone(), verdict);
    }
    verdicts
}

/// Kill the controller, start it on the same log, time until its API
/// answers; then stop it.
pub async fn restart(fleet: &mut Fleet) -> anyhow::Result<RestartReport> {
    let before = metrics_patiently(&fleet.api).await.ok();
    let controller = fleet
        .controller
        .take()
        .context("the controller was already stopped")?;
    controller.kill().await?;
    let (again, took) = fleet
        .setup
        .start(&fleet.api, "controller-restart.log")
        .await?;
    let after = fleet.api.get_text("/metrics").await.ok();
    again.kill().await?;
    let sequence = |m: &Option<String>| {
        m.as_deref()
            .and_then(|m| metric(m, "fleetweft_log_sequence"))
    };
    Ok(RestartReport {
        seconds: took.as_secs_f64(),
        log_sequence_before: sequence(&before),
        log_sequence_after: sequence(&after),
    })
}

/// The report for people.
pub fn human(r: &Report) -> String {
    let ro = &r.rollout;
    let c = &r.controller;
    let mut out = format!(
        "fleetsim: {} agents, {} slots; faults: {} wrong, {} silent, {} crash\n",
        r.agents, r.slots, r.faults.wrong, r.faults.silent, r.faults.crash
    );
    out += &format!(
        "PKI: {} generated in {:.2} s, {} reused; all connected in {:.1} s (handshake p50 {:.1} ms, p99 {:.1} ms)\n",
        r.pki.generated, r.pki.seconds, r.pki.reused, r.connect_s, r.handshake.p50_ms, r.handshake.p99_ms
    );
    out += &format!(
        "rollout {}: {}{}{} in {:.1} s (in-flight ops done at {:.1} s): {} ops {:?}; {:.0} node-updates/min; {} unresolved\n",
        ro.id,
        ro.status,
        ro.paused_reason
            .as_deref()
            .map(|p| format!(" ({p})"))
            .unwrap_or_default(),
        if ro.finished { "" } else { " (TIMED OUT)" },
        ro.wall_s,
        ro.settled_s,
        ro.ops,
        ro.outcomes,
        ro.node_updates_per_min,
        ro.unresolved
    );
    out += &format!(
        "controller: {:.1} CPU s ({:.1} during the rollout), peak RSS {} KiB (before agents {} KiB), {:.1} KiB per agent\n",
        c.cpu_s, c.cpu_s_rollout, c.peak_rss_kib, c.rss_before_agents_kib, c.rss_per_agent_kib
    );
    out += &format!(
        "events: {} in the log; per flush: {}\n",
        r.events.in_log,
        r.events.per_flush.map_or_else(
            || r.events.note.clone().unwrap_or_default(),
            |f| format!("{f:.2}")
        )
    );
    out += &format!(
        "commit request -> reply: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms ({} samples)\n",
        r.commit_latency.p50_ms,
        r.commit_latency.p99_ms,
        r.commit_latency.max_ms,
        r.commit_latency.count
    );
    let a = &r.agents_saw;
    out += &format!(
        "agents: {} applies, {} fetches, {} switches, {} restores, {} closed, {} silences, {} crashes, {} connect failures\n",
        a.applies, a.fetches, a.switches, a.restores, a.closed, a.silences, a.crashes, a.connect_failures
    );
    out += &format!("proofs: {:?}\n", r.proofs);
    if let Some(rs) = &r.restart {
        out += &format!(
            "restart on the log: API answered in {:.2} s (log sequence {:?} -> {:?})\n",
            rs.seconds, rs.log_sequence_before, rs.log_sequence_after
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_are_read_by_exact_name() {
        let text = "# HELP x\nfleetweft_log_sequence 41\nfleetweft_ops{state=\"unknown\"} 2\nfleetweft_agents_connected 7\n";
        assert_eq!(metric(text, "fleetweft_log_sequence"), Some(41.0));
        assert_eq!(metric(text, "fleetweft_ops{state=\"unknown\"}"), Some(2.0));
        assert_eq!(metric(text, "fleetweft_agents"), None);
    }
}
