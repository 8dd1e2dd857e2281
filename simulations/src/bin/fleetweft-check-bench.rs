//! The checker's speed against a yardstick, in one sitting (issue #27 item
//! 4): `fleetweft-check` (the binary beside this one) runs a configuration
//! of ours in a child process, then stateright's own two-phase-commit
//! example with 9 resource managers (`simulations::yardstick`) runs in this
//! process to its end (or for `--seconds`), and the two alternate for
//! `--rounds`. Prints
//! each run's states generated per second, the peak memory of ours, and
//! the ratio of the medians. Machines are noisy: compare the ratio, not
//! the rates. Asserts nothing about time.
//!
//! `cargo build --release --bins && ./target/release/fleetweft-check-bench`
// Production functions stay within 70 lines (clippy.toml, issue #22 item 6);
// tests may run longer.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use clap::Parser;
use stateright::{Checker, Model};

use simulations::yardstick::TwoPhaseSys;

#[derive(Parser)]
#[command(about = "fleetweft-check's states per second against stateright's 2pc example")]
struct Args {
    /// Seconds the yardstick may run each round (default: to its end,
    /// 123,558,402 states with 9 resource managers, as the issue measured
    /// it; a capped run is not comparable: the yardstick's rate falls as its
    /// visited set grows, 7.7M states/s over its first 4 s, 4.5M over 25 s
    /// while still unfinished on this machine).
    #[arg(long)]
    seconds: Option<f64>,
    /// Resource managers of the yardstick.
    #[arg(long, default_value_t = 9)]
    rms: usize,
    /// Worker threads, for both.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Rounds (ours, then the yardstick); the medians are compared.
    #[arg(long, default_value_t = 1)]
    rounds: usize,
    /// Arguments for fleetweft-check (default: its default configuration).
    #[arg(last = true)]
    check_args: Vec<String>,
}

/// One run's figures.
struct Run {
    generated: u64,
    unique: u64,
    secs: f64,
    peak_bytes: Option<u64>,
}

impl Run {
    fn rate(&self) -> f64 {
        self.generated as f64 / self.secs.max(1e-9)
    }
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if args.rounds == 0 || args.threads == 0 {
        bail!("--rounds and --threads must be at least 1");
    }
    let (mut theirs, mut ours) = (Vec::new(), Vec::new());
    for round in 1..=args.rounds {
        let f = fleet(&args)?;
        println!(
            "round {round}: fleetweft-check {}: {} states ({} unique) in {:.1} s: {:.0} states/s, peak {} MiB ({} bytes per unique state)",
            args.check_args.join(" "),
            f.generated,
            f.unique,
            f.secs,
            f.rate(),
            f.peak_bytes.unwrap_or(0) >> 20,
            f.peak_bytes.unwrap_or(0) / f.unique.max(1)
        );
        let y = yardstick(&args, args.seconds);
        println!(
            "round {round}: 2pc ({} rms): {} states ({} unique) in {:.1} s: {:.0} states/s",
            args.rms,
            y.generated,
            y.unique,
            y.secs,
            y.rate()
        );
        theirs.push(y.rate());
        ours.push(f.rate());
    }
    let (t, o) = (median(&mut theirs), median(&mut ours));
    println!(
        "ratio: {:.1}% of the yardstick's states per second (medians of {} round(s): {o:.0} / {t:.0})",
        100.0 * o / t,
        args.rounds
    );
    Ok(())
}

/// The yardstick for `--seconds`, depth first as the example's `check`
/// runs it (its figures in the issue were taken that way).
fn yardstick(args: &Args, seconds: Option<f64>) -> Run {
    let started = Instant::now();
    let mut builder = TwoPhaseSys { rms: 0..args.rms }
        .checker()
        .threads(args.threads);
    if let Some(s) = seconds {
        builder = builder.timeout(Duration::from_secs_f64(s.max(0.1)));
    }
    let checker = builder.spawn_dfs().join();
    Run {
        generated: checker.state_count() as u64,
        unique: checker.unique_state_count() as u64,
        secs: started.elapsed().as_secs_f64(),
        peak_bytes: None,
    }
}

/// `fleetweft-check` in a child, its summary read back.
fn fleet(args: &Args) -> anyhow::Result<Run> {
    let exe = std::env::current_exe().context("this binary's path")?;
    let check = exe.with_file_name("fleetweft-check");
    let out = Command::new(&check)
        .arg("--threads")
        .arg(args.threads.to_string())
        .args(&args.check_args)
        .output()
        .with_context(|| format!("running {}", check.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let explored = text
        .lines()
        .find(|l| l.starts_with("explored: "))
        .ok_or_else(|| anyhow!("{} printed no `explored:` line:\n{text}", check.display()))?;
    // explored: N unique states (M generated), max depth D, S.Ss, R states/s
    let words: Vec<&str> = explored.split_whitespace().collect();
    let number = |i: usize| -> anyhow::Result<f64> {
        let w = words
            .get(i)
            .ok_or_else(|| anyhow!("short line: {explored}"))?;
        w.trim_matches(|c: char| !c.is_ascii_digit() && c != '.')
            .parse::<f64>()
            .with_context(|| format!("word {i} of {explored}"))
    };
    let peak_bytes = text
        .lines()
        .find_map(|l| l.strip_prefix("peak memory: "))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|mib| mib.parse::<u64>().ok())
        .map(|mib| mib << 20);
    Ok(Run {
        unique: number(1)? as u64,
        generated: number(4)? as u64,
        secs: number(9)?,
        peak_bytes,
    })
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(|a, b| a.total_cmp(b));
    values[values.len() / 2]
}
