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
//! `cargo build --release --bin fleetweft --bin fleetweft-agent --bin fleetweft-switch-bench`
//! `target/release/fleetweft-switch-bench --json`

// The transfer bench's fleet; this bench uses only part of it.
#[allow(dead_code)]
#[path = "transfer_bench/fleet.rs"]
mod fleet;

use anyhow::{bail, Context};
use api::client::RouteClient;
use clap::Parser;
use fleet::Fleet;
use model::Digest;
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
    let nodes: Vec<String> = (0..args.agents).map(|i| format!("node-{i}")).collect();
    let mut fleet = Fleet::start(dir, nodes, "").await?;
    let all: Vec<usize> = (0..args.agents).collect();
    for i in &all {
        fleet.start_agent(*i)?;
    }
    fleet.wait_connected(&all, Duration::from_secs(60)).await?;
    let v1 = upload(&fleet, "v1").await?;
    let v2 = upload(&fleet, "v2").await?;
    eprintln!("rolling v1 out to {} node(s)", args.agents);
    let rollout = fleet.start_rollout(v1, 0, &all[1..]).await?;
    fleet
        .wait_completed(&rollout, Duration::from_millis(ROLLOUT_TIMEOUT_MS))
        .await?;

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
    let verdict = fleet.proof_verdict(&rollout).await?;
    Ok(figures(
        args,
        &samples,
        (rollout_from_ms, rollout_to_ms),
        &verdict,
    ))
}

/// Signs the sample app at `version` with the fleet's key and uploads it.
async fn upload(fleet: &Fleet, version: &str) -> anyhow::Result<Digest> {
    let key = protocol::bundle::load_signing_key(&fleet.signing_key)
        .with_context(|| format!("reading {}", fleet.signing_key.display()))?;
    let bytes = demo::sign_hello(&key, version).context("signing the sample app")?;
    let reply: api::view::UploadReply = fleet
        .api
        .post_bytes("/api/bundles", bytes)
        .await
        .context("uploading the sample app")?;
    let hex = hex_digest(&reply.digest)?;
    Ok(hex)
}

fn hex_digest(text: &str) -> anyhow::Result<Digest> {
    let bytes = (0..32)
        .map(|i| u8::from_str_radix(text.get(2 * i..2 * i + 2).unwrap_or("zz"), 16))
        .collect::<Result<Vec<u8>, _>>()
        .with_context(|| format!("{text:?} is not a digest"))?;
    let bytes: [u8; 32] = bytes
        .try_into()
        .map_err(|_| anyhow::anyhow!("{text:?} is not 32 bytes"))?;
    Ok(Digest(bytes))
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

fn figures(
    args: &Args,
    samples: &[Sample],
    rollout: (u64, u64),
    verdict: &str,
) -> serde_json::Value {
    let answered: Vec<&Sample> = samples.iter().filter(|s| s.outcome.is_ok()).collect();
    let quiet: Vec<&Sample> = answered
        .iter()
        .copied()
        .filter(|s| s.sent_ms < rollout.0)
        .collect();
    let during: Vec<&Sample> = answered
        .iter()
        .copied()
        .filter(|s| (rollout.0..rollout.1).contains(&s.sent_ms))
        .collect();
    let failures: Vec<&Sample> = samples.iter().filter(|s| s.outcome.is_err()).collect();
    let reasons: Vec<String> = failures
        .iter()
        .take(REASONS_MAX)
        .map(|s| {
            format!(
                "route {} at {} ms: {}",
                s.route,
                s.sent_ms,
                s.outcome.clone().err().unwrap_or_default()
            )
        })
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
    serde_json::json!({
        "agents": args.agents,
        "rate_per_route": args.rate,
        "requests": samples.len(),
        "failed": failures.len(),
        "failure_examples": reasons,
        "quiet_requests": quiet.len(),
        "quiet_p50_ms": percentile_ms(&quiet, 50),
        "quiet_p99_ms": percentile_ms(&quiet, 99),
        "rollout_s": (rollout.1 - rollout.0) as f64 / 1000.0,
        "rollout_requests": during.len(),
        "rollout_p50_ms": percentile_ms(&during, 50),
        "rollout_p99_ms": percentile_ms(&during, 99),
        "switch_window_ms": SWITCH_WINDOW_MS,
        "switch_p99_ms": percentile_ms(&near_switch, 99),
        "max_ms": max_ms,
        "switched_routes": switch.iter().filter(|s| s.is_some()).count(),
        "old_answers_after_switch": flapped,
        "proof": verdict,
    })
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
    ] {
        println!("{key:<26} {}", f[key]);
    }
    if let Some(examples) = f["failure_examples"].as_array() {
        for e in examples {
            println!("  failed: {}", e.as_str().unwrap_or_default());
        }
    }
}
