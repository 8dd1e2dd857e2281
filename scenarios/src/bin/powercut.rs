//! `fleetweft-powercut [--cuts N] [--seed S] [--mutant NAME] [--json]`:
//! cuts power under the real controller and agents N times (issue #25;
//! see `fleetweft_scenarios::powercut`). Exit 0 when nothing acknowledged
//! was lost and no rule broke (with `--mutant`: when the mutant was
//! caught), 1 otherwise, 2 when the harness cannot run here.
// Production functions stay within 70 lines (clippy.toml, issue #22 item 6);
// tests may run longer.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

use clap::Parser;
use fleetweft_scenarios::{fleet, net, powercut};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "fleetweft-powercut",
    about = "Power cuts under the real controller and agents, on lazy filesystems"
)]
struct Cli {
    /// Power cuts to perform.
    #[arg(long, default_value_t = 50)]
    cuts: u64,
    /// Seed of the campaign's random choices.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Run with this durability mutant (needs a `durability-mutants`
    /// build: scripts/powercut.sh --mutants); stops at the first loss.
    #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(eventlog::mutants::ALL))]
    mutant: Option<String>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// Print a line per cut on stderr.
    #[arg(long)]
    verbose: bool,
    /// Keep the run's directory (mounts' backing dirs, logs) even when it passed.
    #[arg(long)]
    keep: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Err(e) = net::preflight(false) {
        eprintln!("fleetweft-powercut cannot run here: {e:#}");
        return ExitCode::from(2);
    }
    let bins = match fleet::Bins::beside_me() {
        Ok(b) => b,
        Err(e) => {
            eprintln!("fleetweft-powercut: {e:#}");
            return ExitCode::from(2);
        }
    };
    net::remove_leftovers();
    let opts = powercut::Options {
        cuts: cli.cuts,
        seed: cli.seed,
        mutant: cli.mutant.clone(),
        dir: powercut::default_dir(),
        verbose: cli.verbose,
    };
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let outcome = rt.block_on(async {
        powercut::stop_on_signals()?;
        powercut::run(&bins, &opts).await
    });
    rt.shutdown_timeout(std::time::Duration::from_secs(5));
    let report = match outcome {
        Ok(report) => report,
        Err(e) => {
            eprintln!(
                "fleetweft-powercut: {e:#}\n  run kept in {}",
                opts.dir.display()
            );
            return ExitCode::from(2);
        }
    };
    let failed = report.acked_lost > 0 || report.violations > 0;
    print_report(&report, cli.json);
    let keep = cli.keep || failed || !powercut::removable(&opts.dir);
    if keep {
        eprintln!("run kept in {}", opts.dir.display());
    } else {
        let _ = std::fs::remove_dir_all(&opts.dir);
    }
    match (&cli.mutant, failed) {
        (Some(_), true) | (None, false) => ExitCode::SUCCESS,
        _ => ExitCode::from(1),
    }
}

/// The run's report: JSON, or one line and a line per failure.
fn print_report(report: &powercut::Report, json: bool) {
    if json {
        match serde_json::to_string_pretty(report) {
            Ok(text) => println!("{text}"),
            Err(e) => eprintln!("cannot print the report: {e}"),
        }
    } else {
        println!(
            "cuts {} acked_checked {} acked_lost {} torn_tails {} recovered {} violations {} ({:.0} s)",
            report.cuts,
            report.acked_checked,
            report.acked_lost,
            report.torn_tails,
            report.recovered,
            report.violations,
            report.wall_s
        );
        for f in &report.failures {
            println!("  {f}");
        }
    }
}
