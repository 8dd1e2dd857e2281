//! `fleetweft-scenarios`: the fault scenarios of issue 6 against the real
//! binaries, each node in its own network namespace.
//!
//! - `fleetweft-scenarios [--only 2,5] [--keep]`: run scenarios (all by
//!   default), one at a time, each on a fresh network and fleet, each
//!   bounded in time; print one line per scenario and a summary. Exit 0 if
//!   all passed, 1 if any failed, 2 if the harness cannot run here (not
//!   root, no netns, a tool missing and not installable).
//! - `fleetweft-scenarios --list`: the scenarios and the rule each exercises.
//! - `fleetweft-scenarios relay --listen A --upstream B --delay-ms N`: the
//!   delaying UDP relay a scenario runs inside the controller's namespace.
// Production functions stay within 70 lines (clippy.toml, issue #22 item 6);
// tests may run longer.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

use fleetweft_scenarios::{fleet, net, relay, scenarios};

use clap::{Parser, Subcommand};
use std::io::Write as _;
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[derive(Parser)]
#[command(
    name = "fleetweft-scenarios",
    about = "Fleetweft fault scenarios in network namespaces"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Sub>,
    /// Run only these scenarios (numbers, comma-separated).
    #[arg(long, value_delimiter = ',')]
    only: Vec<usize>,
    /// List the scenarios and exit.
    #[arg(long)]
    list: bool,
    /// Keep each scenario's directory (logs, data) even when it passed.
    #[arg(long)]
    keep: bool,
}

#[derive(Subcommand)]
enum Sub {
    /// The delaying UDP relay (run by the harness inside a namespace).
    Relay {
        #[arg(long)]
        listen: std::net::SocketAddr,
        #[arg(long)]
        upstream: std::net::SocketAddr,
        #[arg(long)]
        delay_ms: u64,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    if let Some(Sub::Relay {
        listen,
        upstream,
        delay_ms,
    }) = cli.command
    {
        return match rt.block_on(relay::run(listen, upstream, delay_ms)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("relay: {e:#}");
                ExitCode::from(1)
            }
        };
    }
    let all = scenarios::all();
    if cli.list {
        print_list(&all);
        return ExitCode::SUCCESS;
    }
    let bins = match ready_to_run(&cli, &all) {
        Ok(bins) => bins,
        Err(code) => return code,
    };
    let root = std::env::temp_dir().join(format!("fleetweft-scenarios-{}", std::process::id()));
    let started = Instant::now();
    let selected: Vec<_> = all
        .iter()
        .filter(|s| cli.only.is_empty() || cli.only.contains(&s.number))
        .collect();
    println!(
        "running {} scenario(s); each node in its own network namespace",
        selected.len()
    );
    let failed = run_selected(&rt, &selected, &root, &bins, cli.keep);
    rt.shutdown_timeout(Duration::from_secs(5));
    println!(
        "\n{} passed, {} failed, in {:.0} s",
        selected.len() - failed.len(),
        failed.len(),
        started.elapsed().as_secs_f64()
    );
    if failed.is_empty() {
        let _ = std::fs::remove_dir(&root);
        ExitCode::SUCCESS
    } else {
        println!("failed: {failed:?}");
        ExitCode::from(1)
    }
}

/// Checks `--only`, the host (network namespaces, etcd when needed) and
/// the binaries beside this one, and removes an earlier run's leftovers.
fn ready_to_run(cli: &Cli, all: &[scenarios::Scenario]) -> Result<fleet::Bins, ExitCode> {
    for n in &cli.only {
        if !all.iter().any(|s| s.number == *n) {
            eprintln!("--only {n}: no such scenario (see --list)");
            return Err(ExitCode::from(2));
        }
    }
    let need_etcd = all.iter().any(|s| {
        s.layout == fleet::Layout::Ha && (cli.only.is_empty() || cli.only.contains(&s.number))
    });
    if let Err(e) = net::preflight(need_etcd) {
        eprintln!("fleetweft-scenarios cannot run here: {e:#}");
        return Err(ExitCode::from(2));
    }
    let bins = match fleet::Bins::beside_me() {
        Ok(b) => b,
        Err(e) => {
            eprintln!("fleetweft-scenarios: {e:#}");
            return Err(ExitCode::from(2));
        }
    };
    let stale = net::leftovers();
    if !stale.is_empty() {
        eprintln!(
            "removing leftovers of an earlier, interrupted run: {}",
            stale.join(", ")
        );
        net::remove_leftovers();
    }
    Ok(bins)
}

/// `--list`: one line a scenario.
fn print_list(all: &[scenarios::Scenario]) {
    // A reader that stops early (`| head`) is not an error: stop quietly
    // instead of panicking on the closed pipe.
    let mut out = std::io::stdout().lock();
    for s in all {
        if writeln!(out, "{:>2}. {} [{}]", s.number, s.title, s.rule).is_err() {
            break;
        }
    }
}

/// Run each selected scenario in its directory under `root`, printing
/// PASS or FAIL; returns the numbers of those that failed.
fn run_selected(
    rt: &tokio::runtime::Runtime,
    selected: &[&scenarios::Scenario],
    root: &std::path::Path,
    bins: &fleet::Bins,
    keep: bool,
) -> Vec<usize> {
    let mut failed = Vec::new();
    for s in selected {
        let dir = root.join(format!("s{:02}", s.number));
        let t0 = Instant::now();
        let outcome = rt.block_on(scenarios::run_one(s, &dir, bins));
        let secs = t0.elapsed().as_secs_f64();
        match outcome {
            Ok(notes) => {
                println!("PASS {:>2}. {} ({secs:.1} s){notes}", s.number, s.title);
                if !keep {
                    let _ = std::fs::remove_dir_all(&dir);
                }
            }
            Err(e) => {
                println!(
                    "FAIL {:>2}. {} ({secs:.1} s): {e:#}\n     logs kept in {}",
                    s.number,
                    s.title,
                    dir.display()
                );
                failed.push(s.number);
            }
        }
    }
    failed
}
