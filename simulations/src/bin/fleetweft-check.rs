//! `fleetweft-check`: explore Fleetweft's rules exhaustively, or show that a
//! named mutant of them is caught.
//!
//! Exit 0 when every safety property holds and every reachability property
//! found an example; 1 on a violation (after printing the shortest
//! counterexample); 2 on bad arguments.
// Production functions stay within 70 lines (clippy.toml, issue #22 item 6);
// tests may run longer.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

/// mimalloc instead of the system allocator: the search allocates and frees
/// small objects on every step from two threads, where glibc's malloc spent
/// about a tenth of the time (issue #27 item 4; docs/model.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use anyhow::Context;
use clap::Parser;
use simulations::config::{CHUNKS_MAX, FAULTS_MAX, FOLLOWERS_MAX};
use simulations::gallery::{mutant_config, page};
use simulations::{run, CheckConfig, Faults, FleetModel, LivenessCheck, Mutant, RunOptions};
use stateright::Model;
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(
    name = "fleetweft-check",
    about = "Model-check Fleetweft's rollout rules (S1–S11, and P1 with --proofs)"
)]
struct Args {
    /// Followers after the canary (0..=4).
    #[arg(long)]
    followers: Option<u8>,
    /// The plan's slots_max (1..=4).
    #[arg(long)]
    slots: Option<u8>,
    /// Faults the environment may inject, comma separated:
    /// loss,dup,partition,agent-crash,controller-crash,wrong-answer,app-crash,
    /// early-timeout (the default set); swap-old,foreign-route and (with
    /// --config) old-config, which strike a settled node and imply
    /// --proofs; stage-error;
    /// controller-failover (a standby takes over, the old leader lives on
    /// deposed and its appends are fenced); and snapshot (snapshots beside
    /// the log, torn writes, archiving; every restart rebuilds from them)
    #[arg(long)]
    faults: Option<String>,
    /// Total faults along one path (0..=4).
    #[arg(long)]
    max_faults: Option<u8>,
    /// Put an approval gate after the canary.
    #[arg(long)]
    approval: bool,
    /// Let the operator start a superseding rollout (v3).
    #[arg(long)]
    supersede: bool,
    /// Let the operator order an op with a stored Commit rolled back (once
    /// per path).
    #[arg(long)]
    rollback: bool,
    /// No operator actions (pause, resume, resolve).
    #[arg(long)]
    no_operator: bool,
    /// Let an operator ask a live proof of a settled node and a verifier
    /// record observations of it (implied by swap-old, foreign-route and
    /// old-config).
    #[arg(long)]
    proofs: bool,
    /// Enroll the nodes by name at the start and let the operator retire
    /// one of them (R1).
    #[arg(long)]
    roster: bool,
    /// A mixed fleet: the canary runs on aarch64, the followers on x86_64;
    /// releases carry per-architecture trees (A1).
    #[arg(long)]
    arches: bool,
    /// A configuration rollout: the operator records the app's
    /// configuration revision and the start deploys v1's code with it (C1).
    #[arg(long)]
    config: bool,
    /// Named operators: an admin makes every operator input and a viewer
    /// tries to approve every rollout, which the rules refuse (O1).
    #[arg(long)]
    operators: bool,
    /// Start the first rollout in waves under a failure budget of 0.
    #[arg(long)]
    waves: bool,
    /// With --waves: followers per wave (default 1).
    #[arg(long)]
    wave_size: Option<u8>,
    /// Symmetry reduction over the followers of one wave (needs --waves,
    /// --wave-size 2+, slots for a whole wave; explored depth first).
    #[arg(long)]
    symmetry: bool,
    /// Content chunks per release (1..=4, default 1: a format-1 bundle
    /// staged whole). With 2 or more, agent-crash strikes at every point
    /// of a chunked fetch and a restart resumes from re-verified chunks.
    #[arg(long)]
    chunks: Option<u8>,
    /// Every release declares a migration, `reversible` or
    /// `irreversible` (issue #24 item 2): agent-crash strikes while it
    /// runs (the table must stop), migration-error makes it fail.
    #[arg(long)]
    migration: Option<String>,
    /// Also check the liveness properties under weak fairness of message
    /// delivery, timers and agent steps (LV1–LV3), on a graph kept whole;
    /// a violation is printed as a lasso (stem, then the loop).
    #[arg(long)]
    liveness: bool,
    /// Check only the liveness properties (no safety run; for measuring).
    #[arg(long, conflicts_with = "liveness")]
    liveness_only: bool,
    /// Check a named mutant instead of the real rules.
    #[arg(long)]
    mutant: Option<String>,
    /// List the mutants and the rule each must break.
    #[arg(long)]
    list_mutants: bool,
    /// Worker threads.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Search breadth first, keeping the whole frontier in memory (the
    /// default is depth first: the same states and verdicts, a fraction of
    /// the memory; a counterexample is shortened breadth first either way).
    #[arg(long)]
    breadth_first: bool,
    /// Serve stateright's Explorer on this address (e.g. 127.0.0.1:3000).
    #[arg(long)]
    explore: Option<String>,
    /// Print the report as JSON on stdout.
    #[arg(long)]
    json: bool,
    /// Write the counterexample (or the clean result) as a Markdown page.
    #[arg(long, value_name = "FILE")]
    markdown: Option<std::path::PathBuf>,
    /// Write the shortest counterexample as a message sequence chart: an
    /// SVG picture when FILE ends in `.svg`, else Mermaid
    /// `sequenceDiagram` text. Nothing is written when no rule broke.
    #[arg(long, value_name = "FILE")]
    diagram: Option<std::path::PathBuf>,
    /// Explore from a real controller log: a data or log directory (sled)
    /// or `etcd://HOST:PORT[,...]/PREFIX`. The live part of its state (the
    /// active or paused rollout, its live ops, the nodes they touch) is
    /// projected onto the checker's world and every interleaving of the
    /// faults and operator inputs is explored from there.
    #[arg(long, value_name = "DATA")]
    from_log: Option<String>,
    /// With --from-log: explore from the state right after this log
    /// sequence (as `fleetweft log show` numbers events), not the end.
    #[arg(long, value_name = "SEQ")]
    until: Option<u64>,
    /// With --from-log: path length explored (default: from 10, deeper
    /// by 2 while the next level fits in --states-max and --time-max-s,
    /// up to 40).
    #[arg(long)]
    depth: Option<usize>,
    /// With --from-log: states generated (repeats included) after which
    /// the exploration stops.
    #[arg(long, default_value_t = simulations::explore::STATES_MAX_DEFAULT)]
    states_max: usize,
    /// With --from-log: seconds after which the exploration stops.
    #[arg(long, default_value_t = simulations::explore::TIME_MAX_S_DEFAULT)]
    time_max_s: u64,
    /// With --from-log: nodes projected, canary included (1..=5).
    #[arg(long, default_value_t = simulations::projection::NODES_DEFAULT)]
    nodes_max: usize,
    /// With --from-log: followers not yet granted projected after the
    /// granted ones.
    #[arg(long, default_value_t = simulations::projection::UPCOMING_MAX)]
    upcoming: usize,
}

/// `--from-log DATA`: load and verify the log, project its live part,
/// explore from there within the bounds, and tell what can go wrong.
fn from_log(args: &Args, data: &str, cfg: &CheckConfig) -> anyhow::Result<ExitCode> {
    use simulations::explore::{explore, refusal, Depth, DEPTH_MAX_DEFAULT};
    use simulations::projection::{Limits, ProjectionError, NODES_MAX};
    if let Some(why) = refusal(cfg) {
        anyhow::bail!("--from-log: {why}");
    }
    if args.nodes_max == 0 || args.nodes_max > NODES_MAX {
        anyhow::bail!("--nodes-max: {} is outside 1..={NODES_MAX}", args.nodes_max);
    }
    let location = logtools::copy::LogLocation::parse(data).map_err(anyhow::Error::msg)?;
    let loaded = std::time::Instant::now();
    let state = logtools::copy::state_at(&location, args.until)
        .with_context(|| format!("reading the controller log {data}"))?;
    let at = args
        .until
        .map_or(String::new(), |seq| format!(" up to #{seq}"));
    eprintln!(
        "loaded {data}{at}: {} rollouts, {} nodes, {} ops granted, in {:.1}s",
        state.rollouts.len(),
        state.nodes.len(),
        state.ops_granted(),
        loaded.elapsed().as_secs_f64()
    );
    let limits = Limits {
        nodes_max: args.nodes_max,
        upcoming_max: args.upcoming,
    };
    let (depth, depth_max) = match args.depth {
        Some(d) => (Depth::Fixed(d.max(1)), d.max(1)),
        None => (Depth::Deepen, DEPTH_MAX_DEFAULT),
    };
    let bounds = simulations::run::Bounds {
        depth_max,
        states_max: args.states_max.max(1),
        time_max: std::time::Duration::from_secs(args.time_max_s.max(1)),
    };
    let options = RunOptions {
        threads: args.threads,
        progress: true,
        order: Default::default(),
    };
    let explored = match explore(&state, cfg, limits, bounds, depth, &options) {
        Ok(e) => e,
        Err(ProjectionError::NothingLive(why)) => {
            println!("nothing to explore from here: {why}");
            return Ok(ExitCode::SUCCESS);
        }
        Err(e) => return Err(e.into()),
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&explored)?);
    } else {
        print!("{}", explored.text());
    }
    if let Some(path) = &args.diagram {
        write_diagram(&explored.report, path)?;
    }
    Ok(if explored.broken() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// `--diagram FILE`: the first counterexample's chart, SVG or Mermaid by
/// the file's extension.
fn write_diagram(report: &simulations::run::Report, path: &std::path::Path) -> anyhow::Result<()> {
    let Some(chart) = simulations::run::first_diagram(report) else {
        eprintln!("no rule broke: no diagram written to {}", path.display());
        return Ok(());
    };
    let text = match path.extension().is_some_and(|e| e == "svg") {
        true => chart.svg(),
        false => chart.mermaid(),
    };
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

fn usage_error(message: String) -> ExitCode {
    eprintln!("fleetweft-check: {message}");
    ExitCode::from(2)
}

/// [`config`]: the sizes and the fault set the options ask for, each
/// within its limit.
fn set_sizes(args: &Args, cfg: &mut CheckConfig) -> Result<(), String> {
    if let Some(f) = args.followers {
        if f > FOLLOWERS_MAX {
            return Err(format!(
                "--followers: {f} is above the limit {FOLLOWERS_MAX}"
            ));
        }
        cfg.followers = f;
    }
    if let Some(s) = args.slots {
        if s == 0 || s > 4 {
            return Err(format!("--slots: {s} is outside 1..=4"));
        }
        cfg.slots = s;
    }
    if let Some(list) = &args.faults {
        cfg.faults = Faults::parse(list).map_err(|e| format!("--faults: {e}"))?;
    }
    if let Some(m) = args.max_faults {
        if m > FAULTS_MAX {
            return Err(format!("--max-faults: {m} is above the limit {FAULTS_MAX}"));
        }
        cfg.max_faults = m;
    }
    Ok(())
}

fn config(args: &Args) -> Result<CheckConfig, String> {
    let mutant = match &args.mutant {
        None => None,
        Some(name) => Some(
            Mutant::parse(name)
                .ok_or_else(|| format!("--mutant: unknown mutant '{name}' (see --list-mutants)"))?,
        ),
    };
    let mut cfg = match mutant {
        Some(m) => mutant_config(m),
        None => CheckConfig::default(),
    };
    set_sizes(args, &mut cfg)?;
    cfg.approval |= args.approval;
    cfg.supersede |= args.supersede;
    cfg.rollback |= args.rollback;
    cfg.proofs |= args.proofs;
    cfg.roster |= args.roster;
    cfg.arches |= args.arches;
    cfg.config |= args.config;
    cfg.operators |= args.operators;
    cfg.waves |= args.waves;
    if let Some(size) = args.wave_size {
        if size == 0 || size > FOLLOWERS_MAX {
            return Err(format!(
                "--wave-size: {size} is outside 1..={FOLLOWERS_MAX}"
            ));
        }
        cfg.wave_size = size;
    }
    if let Some(chunks) = args.chunks {
        if chunks == 0 || chunks > CHUNKS_MAX {
            return Err(format!("--chunks: {chunks} is outside 1..={CHUNKS_MAX}"));
        }
        cfg.chunks = chunks;
    }
    if let Some(kind) = args.migration.as_deref() {
        cfg.migration = Some(match kind {
            "reversible" => model::agent::MigrationKind::Reversible,
            "irreversible" => model::agent::MigrationKind::Irreversible,
            other => {
                return Err(format!(
                    "--migration: '{other}' is neither reversible nor irreversible"
                ))
            }
        });
    }
    if args.liveness {
        cfg.liveness = LivenessCheck::WithSafety;
    }
    if args.liveness_only {
        cfg.liveness = LivenessCheck::Only;
    }
    cfg.symmetry |= args.symmetry;
    if cfg.symmetry && cfg.liveness != LivenessCheck::Off {
        return Err(
            "--liveness: not with --symmetry (the graph is explored unreduced)".to_string(),
        );
    }
    if cfg.symmetry {
        if let Some(why) = cfg.symmetry_refusal() {
            return Err(format!("--symmetry: {why}"));
        }
    }
    if args.no_operator {
        cfg.operator = false;
    }
    if args.threads == 0 || args.threads > 64 {
        return Err(format!("--threads: {} is outside 1..=64", args.threads));
    }
    Ok(cfg)
}

fn main() -> ExitCode {
    let args = match Args::try_parse() {
        Ok(a) => a,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    if args.list_mutants {
        for m in Mutant::ALL {
            println!(
                "{:<24} breaks {:<28} {}",
                m.name(),
                m.breaks().to_string(),
                m.description()
            );
        }
        return ExitCode::SUCCESS;
    }
    let cfg = match config(&args) {
        Ok(c) => c,
        Err(message) => return usage_error(message),
    };
    match real_main(&args, cfg) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("fleetweft-check: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn real_main(args: &Args, cfg: CheckConfig) -> anyhow::Result<ExitCode> {
    if let Some(data) = &args.from_log {
        return from_log(args, data, &cfg);
    }
    if let Some(addr) = &args.explore {
        eprintln!("serving stateright Explorer on http://{addr} ({cfg})");
        FleetModel::new(cfg)
            .checker()
            .threads(args.threads)
            .serve(addr.as_str());
        loop {
            std::thread::park();
        }
    }
    eprintln!("checking: {cfg}");
    let report = run(
        &cfg,
        &RunOptions {
            threads: args.threads,
            progress: true,
            order: if args.breadth_first {
                simulations::run::SearchOrder::BreadthFirst
            } else {
                simulations::run::SearchOrder::DepthFirst
            },
        },
    );
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", simulations::run::summary(&report));
        if let Some(line) = simulations::run::peak_memory_line(&report) {
            println!("{line}");
        }
    }
    if let Some(path) = &args.markdown {
        let text = match cfg.mutant {
            Some(m) => page(m, &report),
            None => simulations::run::markdown(&report, "Fleetweft check", "The real rules."),
        };
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &args.diagram {
        write_diagram(&report, path)?;
    }
    if let Some(m) = cfg.mutant {
        let caught: Vec<String> = report.failures().filter_map(|p| p.rule.clone()).collect();
        if caught.iter().any(|r| r == m.breaks().code()) {
            eprintln!("mutant {} caught: breaks {}", m.name(), m.breaks());
        } else {
            eprintln!(
                "mutant {} NOT caught as expected (expected {}, failures: {:?})",
                m.name(),
                m.breaks(),
                caught
            );
        }
    }
    Ok(if report.ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
