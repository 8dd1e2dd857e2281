//! `fleetweft-switch-bench`: do users notice a rollout? (issue #24 item 3,
//! "Benchmark, not a timed test").
//!
//! A real controller and `--agents` real agents on loopback (the transfer
//! bench's fleet), all serving the sample app v1. A load generator sends
//! `GET /hello` to every public route at `--rate` requests per second each
//! (open loop: a request is sent on its tick whether or not earlier ones
//! answered), over keep-alive connections as service clients do. After
//! `--quiet-s` seconds of load on the quiet fleet, v2 is rolled out
//! (canary, then every follower at once) and the load goes on until
//! `--after-s` seconds past the rollout's completion.
//!
//! A request *fails* when nothing answers within the route client's bound
//! (3 s), or the answer is not `200` with a `hello from <version>` body.
//! Printed: requests and failures, latency p50/p99/max on the quiet fleet
//! and during the rollout, p99 within `SWITCH_WINDOW_MS` of each route's
//! switch (its first v2 answer), and answers of v1 after a route's first v2
//! answer (a route that flapped back).
//!
//! Then v3 is rolled out under the same load with a canary whose app
//! answers a healthy `200` with the wrong body (node-0's agent runs with
//! `[faults] answer_wrongly`): how many wrong answers users of the
//! canary's route got and over how long (from the first to the last sent),
//! what else failed there, and what failed on the followers' routes (none
//! should: the canary's failure stops the rollout before them).
//!
//! `cargo build --release --bin fleetweft --bin fleetweft-agent --bin fleetweft-switch-bench`
//! `target/release/fleetweft-switch-bench --json`
// Production functions stay within 70 lines (clippy.toml, issue #22 item 6);
// tests may run longer.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

// The transfer bench's fleet; this bench uses only part of it.
#[allow(dead_code)]
#[path = "transfer_bench/fleet.rs"]
mod fleet;

use anyhow::{bail, Context};
use api::client::RouteClient;
use clap::Parser;
use fleet::Fleet;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

#[derive(Parser)]
#[command(name = "fleetweft-switch-bench")]
struct Args {
    /// Agent processes, each with its public route under load.
    #[arg(long, default_value_t = 3)]
    agents: usize,
    /// Requests per second sent to each route.
    #[arg(long, default_value_t = 200)]
    rate: u32,
    /// Seconds of load on the quiet fleet before the rollout.
    #[arg(long, default_value_t = 10)]
    quiet_s: u64,
    /// Seconds of load after the rollout completed.
    #[arg(long, default_value_t = 3)]
    after_s: u64,
    /// Where everything goes (must not exist); default a new directory in
    /// the temp dir. Removed at the end unless `--keep`.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Keep the directory (logs, data) at the end.
    #[arg(long)]
    keep: bool,
    /// Print the figures as one JSON object.
    #[arg(long)]
    json: bool,
}

/// Requests of one route in flight at most; a tick finding this many
/// unanswered counts as a failure (the route is not keeping up).
const IN_FLIGHT_MAX: usize = 512;
/// Around a route's switch (its first answer of the new release), in
/// milliseconds either side: the window whose p99 is reported.
const SWITCH_WINDOW_MS: u64 = 1_000;
/// How long a rollout of the sample app may take.
const ROLLOUT_TIMEOUT_MS: u64 = 120_000;
/// Most failure reasons printed.
const REASONS_MAX: usize = 5;

/// One request's outcome.
#[derive(Clone, Debug)]
struct Sample {
    route: usize,
    /// When it was sent, since the load began.
    sent_ms: u64,
    latency_us: u64,
    /// The version that answered (`v1`, `v2`), or why it failed.
    outcome: Result<String, String>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if args.agents == 0 || args.rate == 0 {
        bail!("--agents and --rate must be at least 1");
    }
    let dir = match &args.dir {
        Some(dir) => dir.clone(),
        None => std::env::temp_dir().join(format!("fleetweft-switch-bench-{}", std::process::id())),
    };
    if dir.exists() {
        bail!("{} exists: give a new --dir", dir.display());
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let outcome = run(&args, &dir).await;
    if args.keep || outcome.is_err() {
        eprintln!("kept {}", dir.display());
    } else {
        let _ = std::fs::remove_dir_all(&dir);
    }
    let figures = outcome?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&figures)?);
    } else {
        print_table(&figures);
    }
    Ok(())
}

async fn run(args: &Args, dir: &std::path::Path) -> anyhow::Result<serde_json::Value> {
    let (mut fleet, [_, v2, v3], all) = fleet_on_v1(args, dir).await?;
    let routes: Vec<SocketAddr> = fleet
        .layout
        .public_ports
        .iter()
        .map(|p| SocketAddr::from(([127, 0, 0, 1], *p)))
        .collect();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let began = Instant::now();
    let load: Vec<_> = routes
        .iter()
        .enumerate()
        .map(|(i, addr)| tokio::spawn(load_route(i, *addr, args.rate, began, tx.clone())))
        .collect();
    drop(tx);
    eprintln!(
        "load: {} req/s on each of {} route(s); quiet for {} s",
        args.rate,
        routes.len(),
        args.quiet_s
    );
    tokio::time::sleep(Duration::from_secs(args.quiet_s)).await;
    let rollout_from_ms = ms_since(began);
    eprintln!("rolling v2 out under load");
    let rollout = fleet.start_rollout(v2, 0, &all[1..]).await?;
    fleet
        .wait_completed(&rollout, Duration::from_millis(ROLLOUT_TIMEOUT_MS))
        .await?;
    let rollout_to_ms = ms_since(began);
    eprintln!(
        "rollout completed in {} ms; load for {} s more",
        rollout_to_ms - rollout_from_ms,
        args.after_s
    );
    tokio::time::sleep(Duration::from_secs(args.after_s)).await;
    let verdict = fleet.proof_verdict(&rollout).await?;
    let canary_from_ms = ms_since(began);
    eprintln!("rolling v3 out under load: its canary answers wrongly");
    let bad = fleet.start_rollout(v3, 0, &all[1..]).await?;
    wait_settled(&mut fleet, &bad).await?;
    let canary_to_ms = ms_since(began);
    eprintln!("the canary was restored; load for {} s more", args.after_s);
    tokio::time::sleep(Duration::from_secs(args.after_s)).await;
    for task in &load {
        task.abort();
    }
    // Requests still in flight finish and send their samples; the channel
    // closes when the last one is dropped.
    let mut samples = Vec::new();
    let drain = async {
        while let Some(sample) = rx.recv().await {
            samples.push(sample);
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(10), drain).await;
    let phases = Phases {
        rollout_from_ms,
        rollout_to_ms,
        canary_from_ms,
        canary_to_ms,
    };
    Ok(figures(args, &samples, &phases, &verdict))
}

/// A fleet of `args.agents` nodes, node-0's app answering v3 wrongly, v1
/// rolled out everywhere; returns it with the three releases' digests and
/// every node's index.
async fn fleet_on_v1(
    args: &Args,
    dir: &std::path::Path,
) -> anyhow::Result<(Fleet, [model::Digest; 3], Vec<usize>)> {
    let nodes: Vec<String> = (0..args.agents).map(|i| format!("node-{i}")).collect();
    let mut fleet = Fleet::start(dir, nodes, "").await?;
    let signed = [
        sign(&fleet, "v1")?,
        sign(&fleet, "v2")?,
        sign(&fleet, "v3")?,
    ];
    let [v1, v2, v3] = signed.clone().map(|b| protocol::bundle::bundle_digest(&b));
    // The wrong-answer canary: node-0's app answers `goodbye from v3`.
    fleet.answer_wrongly(0, v3)?;
    let all: Vec<usize> = (0..args.agents).collect();
    for i in &all {
        fleet.start_agent(*i)?;
    }
    fleet.wait_connected(&all, Duration::from_secs(60)).await?;
    for bytes in signed {
        upload(&fleet, bytes).await?;
    }
    eprintln!("rolling v1 out to {} node(s)", args.agents);
    let rollout = fleet.start_rollout(v1, 0, &all[1..]).await?;
    fleet
        .wait_completed(&rollout, Duration::from_millis(ROLLOUT_TIMEOUT_MS))
        .await?;

    Ok((fleet, [v1, v2, v3], all))
}

/// Until the wrong canary's rollout `bad` stops moving.
async fn wait_settled(fleet: &mut Fleet, bad: &str) -> anyhow::Result<()> {
    let moving = ["active", "waiting-approval"];
    fleet
        .wait(
            "the wrong canary's rollout settled",
            Duration::from_millis(ROLLOUT_TIMEOUT_MS),
            |view| {
                view.rollouts
                    .iter()
                    .any(|r| r.id == bad && !moving.contains(&r.status.as_str()))
            },
        )
        .await?;
    Ok(())
}

/// The sample app at `version`, signed with the fleet's key.
fn sign(fleet: &Fleet, version: &str) -> anyhow::Result<Vec<u8>> {
    let key = protocol::bundle::load_signing_key(&fleet.signing_key)
        .with_context(|| format!("reading {}", fleet.signing_key.display()))?;
    demo::sign_hello(&key, version).context("signing the sample app")
}

async fn upload(fleet: &Fleet, bytes: Vec<u8>) -> anyhow::Result<()> {
    let _: api::view::UploadReply = fleet
        .api
        .post_bytes("/api/bundles", bytes)
        .await
        .context("uploading the sample app")?;
    Ok(())
}

fn ms_since(began: Instant) -> u64 {
    u64::try_from(began.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// Sends `GET /hello` to `addr` at `rate` per second until aborted.
async fn load_route(
    route: usize,
    addr: SocketAddr,
    rate: u32,
    began: Instant,
    samples: mpsc::UnboundedSender<Sample>,
) {
    let client = RouteClient::new();
    let in_flight = std::sync::Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT_MAX));
    let mut tick = tokio::time::interval(Duration::from_secs(1) / rate);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    loop {
        tick.tick().await;
        let sent_ms = ms_since(began);
        let Ok(permit) = in_flight.clone().try_acquire_owned() else {
            let outcome = Err(format!("{IN_FLIGHT_MAX} requests in flight"));
            let _ = samples.send(Sample {
                route,
                sent_ms,
                latency_us: 0,
                outcome,
            });
            continue;
        };
        let (client, samples) = (client.clone(), samples.clone());
        tokio::spawn(async move {
            let start = Instant::now();
            let answer = client.get(addr, "/hello").await;
            let latency_us = u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX);
            let outcome = match answer {
                None => Err("no answer within 3 s".to_string()),
                Some(a) if a.status != 200 => Err(format!("status {}: {}", a.status, a.body)),
                Some(a) => match a.body.strip_prefix("hello from ") {
                    Some(version) => Ok(version.to_string()),
                    None => Err(format!("wrong body {:?}", a.body)),
                },
            };
            let _ = samples.send(Sample {
                route,
                sent_ms,
                latency_us,
                outcome,
            });
            drop(permit);
        });
    }
}

/// Latency percentile `p` (0..=100) of `samples`, in milliseconds.
fn percentile_ms(samples: &[&Sample], p: usize) -> f64 {
    let mut latencies: Vec<u64> = samples.iter().map(|s| s.latency_us).collect();
    if latencies.is_empty() {
        return 0.0;
    }
    latencies.sort_unstable();
    let at = (latencies.len() * p / 100).min(latencies.len() - 1);
    latencies[at] as f64 / 1000.0
}

/// When each phase began, since the load began.
struct Phases {
    rollout_from_ms: u64,
    rollout_to_ms: u64,
    canary_from_ms: u64,
    canary_to_ms: u64,
}

fn figures(args: &Args, samples: &[Sample], phases: &Phases, verdict: &str) -> serde_json::Value {
    let (healthy, canary): (Vec<&Sample>, Vec<&Sample>) = samples
        .iter()
        .partition(|s| s.sent_ms < phases.canary_from_ms);
    let answered: Vec<&Sample> = healthy
        .iter()
        .copied()
        .filter(|s| s.outcome.is_ok())
        .collect();
    let quiet: Vec<&Sample> = answered
        .iter()
        .copied()
        .filter(|s| s.sent_ms < phases.rollout_from_ms)
        .collect();
    let rollout = phases.rollout_from_ms..phases.rollout_to_ms;
    let during: Vec<&Sample> = answered
        .iter()
        .copied()
        .filter(|s| rollout.contains(&s.sent_ms))
        .collect();
    let failures: Vec<&Sample> = healthy
        .iter()
        .copied()
        .filter(|s| s.outcome.is_err())
        .collect();
    let (switch, flapped) = switches(args.agents, &answered);
    let near_switch: Vec<&Sample> = answered
        .iter()
        .copied()
        .filter(|s| {
            switch.get(s.route).copied().flatten().is_some_and(|at| {
                s.sent_ms + SWITCH_WINDOW_MS >= at && s.sent_ms <= at + SWITCH_WINDOW_MS
            })
        })
        .collect();
    let max_ms = answered.iter().map(|s| s.latency_us).max().unwrap_or(0) as f64 / 1000.0;
    let mut figures = serde_json::json!({
        "agents": args.agents,
        "rate_per_route": args.rate,
        "requests": healthy.len(),
        "failed": failures.len(),
        "failure_examples": examples(&failures),
        "quiet_requests": quiet.len(),
        "quiet_p50_ms": percentile_ms(&quiet, 50),
        "quiet_p99_ms": percentile_ms(&quiet, 99),
        "rollout_s": rollout.end.saturating_sub(rollout.start) as f64 / 1000.0,
        "rollout_requests": during.len(),
        "rollout_p50_ms": percentile_ms(&during, 50),
        "rollout_p99_ms": percentile_ms(&during, 99),
        "switch_window_ms": SWITCH_WINDOW_MS,
        "switch_p99_ms": percentile_ms(&near_switch, 99),
        "max_ms": max_ms,
        "switched_routes": switch.iter().filter(|s| s.is_some()).count(),
        "old_answers_after_switch": flapped,
        "proof": verdict,
    });
    if let Some(object) = figures.as_object_mut() {
        object.extend(canary_figures(&canary, phases));
    }
    figures
}

/// The wrong-answer canary's phase: its route's wrong answers (and the
/// span between the first and the last one sent), anything else that
/// failed there, and what failed on the followers' routes.
fn canary_figures(
    canary: &[&Sample],
    phases: &Phases,
) -> serde_json::Map<String, serde_json::Value> {
    let wrong = |s: &&&Sample| s.outcome.as_ref().is_err_and(|why| why.contains("goodbye"));
    let on_canary: Vec<&Sample> = canary.iter().copied().filter(|s| s.route == 0).collect();
    let bad: Vec<&Sample> = on_canary.iter().filter(wrong).copied().collect();
    let other: Vec<&Sample> = on_canary
        .iter()
        .copied()
        .filter(|s| s.outcome.is_err() && !bad.iter().any(|b| std::ptr::eq(*b, *s)))
        .collect();
    let followers: Vec<&Sample> = canary
        .iter()
        .copied()
        .filter(|s| s.route != 0 && s.outcome.is_err())
        .collect();
    let span_ms = match (bad.first(), bad.last()) {
        (Some(first), Some(last)) => last.sent_ms - first.sent_ms,
        _ => 0,
    };
    let phase_s = phases.canary_to_ms.saturating_sub(phases.canary_from_ms) as f64 / 1000.0;
    let mut map = serde_json::Map::new();
    map.insert("canary_phase_s".into(), phase_s.into());
    map.insert("canary_requests".into(), on_canary.len().into());
    map.insert("canary_wrong_answers".into(), bad.len().into());
    map.insert("canary_wrong_span_ms".into(), span_ms.into());
    map.insert("canary_other_failures".into(), other.len().into());
    map.insert("canary_other_examples".into(), examples(&other).into());
    map.insert(
        "follower_failures_in_canary_phase".into(),
        followers.len().into(),
    );
    map
}

/// The first few failures, in words.
fn examples(failures: &[&Sample]) -> Vec<String> {
    failures
        .iter()
        .take(REASONS_MAX)
        .map(|s| {
            let why = s.outcome.clone().err().unwrap_or_default();
            format!("route {} at {} ms: {why}", s.route, s.sent_ms)
        })
        .collect()
}

/// Per route, when it first answered v2 (by send time), and how many v1
/// answers were sent after that on any route.
fn switches(routes: usize, answered: &[&Sample]) -> (Vec<Option<u64>>, usize) {
    let mut first_new: Vec<Option<u64>> = vec![None; routes];
    for s in answered.iter().filter(|s| s.outcome.as_deref() == Ok("v2")) {
        let slot = &mut first_new[s.route];
        *slot = Some(slot.map_or(s.sent_ms, |t| t.min(s.sent_ms)));
    }
    let flapped = answered
        .iter()
        .filter(|s| s.outcome.as_deref() == Ok("v1"))
        .filter(|s| first_new[s.route].is_some_and(|at| s.sent_ms > at))
        .count();
    (first_new, flapped)
}

fn print_table(f: &serde_json::Value) {
    for key in [
        "agents",
        "rate_per_route",
        "requests",
        "failed",
        "quiet_p50_ms",
        "quiet_p99_ms",
        "rollout_s",
        "rollout_p50_ms",
        "rollout_p99_ms",
        "switch_p99_ms",
        "max_ms",
        "switched_routes",
        "old_answers_after_switch",
        "proof",
        "canary_phase_s",
        "canary_requests",
        "canary_wrong_answers",
        "canary_wrong_span_ms",
        "canary_other_failures",
        "follower_failures_in_canary_phase",
    ] {
        println!("{key:<26} {}", f[key]);
    }
    if let Some(examples) = f["failure_examples"].as_array() {
        for e in examples {
            println!("  failed: {}", e.as_str().unwrap_or_default());
        }
    }
}
