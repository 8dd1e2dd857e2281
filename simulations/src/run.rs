//! Running the checker: progress on stderr, a summary, and counterexamples
//! told as numbered steps in domain words.

use crate::config::{CheckConfig, LivenessCheck};
use crate::fleet::{Action, FleetModel};
use crate::properties::rule_of;
pub use crate::verdict::{tell, PropertyResult, Status};
use crate::world::World;
use serde::Serialize;
use stateright::{Checker, Expectation, HasDiscoveries, Model};
use std::io::Write;
use std::time::{Duration, Instant};

/// How often progress is printed.
pub const PROGRESS_INTERVAL_MS: u64 = 2_000;

/// What one run of the checker found.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub config: String,
    pub unique_states: usize,
    pub states: usize,
    pub max_depth: usize,
    pub elapsed_ms: u128,
    pub states_per_sec: u64,
    pub properties: Vec<PropertyResult>,
    /// The liveness exploration's figures, when it ran.
    pub liveness: Option<crate::lasso::LivenessFigures>,
}

impl Report {
    /// Every safety property held and every reachability property was found.
    pub fn ok(&self) -> bool {
        self.properties
            .iter()
            .all(|p| matches!(p.status, Status::Pass | Status::Found))
    }

    /// The failed safety properties.
    pub fn failures(&self) -> impl Iterator<Item = &PropertyResult> {
        self.properties.iter().filter(|p| p.status == Status::Fail)
    }
}

/// Options for one run.
#[derive(Clone, Debug)]
pub struct RunOptions {
    pub threads: usize,
    /// Print progress lines to stderr.
    pub progress: bool,
    /// The order of an exhaustive search.
    pub order: SearchOrder,
}

/// The order in which an exhaustive search visits states. Both visit every
/// reachable state once and report the same counts; a counterexample is
/// shortened breadth first afterwards either way, so the order changes
/// only the cost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SearchOrder {
    /// Depth first: memory is the visited fingerprints plus one path (the
    /// default configuration: 25 MiB instead of 1.4 GiB, and 1.7x the
    /// states per second, because no queue of whole worlds is kept).
    #[default]
    DepthFirst,
    /// Breadth first: keeps every state of the frontier; the first
    /// counterexample found is already the shortest.
    BreadthFirst,
}

/// Explore `cfg` exhaustively (depth first by default, see
/// [`SearchOrder`]), stopping at the first safety failure. A mutant is
/// always searched breadth first: the rule it is expected to break is the
/// one its shortest counterexample breaks, and a depth-first search may
/// stop first at a deeper break of another rule. A bounded run
/// ([`run_bounded`]) is breadth first too, level by level.
pub fn run(cfg: &CheckConfig, options: &RunOptions) -> Report {
    let mut report = match cfg.liveness {
        LivenessCheck::Only => Report {
            config: cfg.to_string(),
            unique_states: 0,
            states: 0,
            max_depth: 0,
            elapsed_ms: 0,
            states_per_sec: 0,
            properties: Vec::new(),
            liveness: None,
        },
        _ => run_safety(FleetModel::new(cfg.clone()), options, None),
    };
    let safe = report.failures().next().is_none();
    if cfg.liveness != LivenessCheck::Off && safe {
        add_liveness(cfg, options, &mut report);
    }
    report
}

/// Check the liveness properties and add them to `report`; a graph too
/// large to keep leaves them unsettled, saying why.
fn add_liveness(cfg: &CheckConfig, options: &RunOptions, report: &mut Report) {
    let model = FleetModel::new(cfg.clone());
    match crate::lasso::check_liveness(&model, options.progress) {
        Ok((results, figures)) => {
            if report.unique_states == 0 {
                // Liveness only: the report's figures are the graph's.
                report.unique_states = figures.states;
                report.states = figures.edges;
                report.max_depth = figures.max_depth;
                report.elapsed_ms = figures.elapsed_ms;
                let secs = figures.elapsed_ms as f64 / 1000.0;
                report.states_per_sec = (figures.states as f64 / secs.max(1e-9)) as u64;
            }
            report.properties.extend(results);
            report.liveness = Some(figures);
        }
        Err(e) => {
            eprintln!("liveness not checked: {e}");
            report
                .properties
                .extend(crate::liveness::Liveness::ALL.map(|l| PropertyResult {
                    name: l.name().to_string(),
                    kind: "leads-to".to_string(),
                    status: Status::Unsettled,
                    rule: Some(l.code().to_string()),
                    counterexample: None,
                    diagram: None,
                }));
        }
    }
}

/// Bounds that make an exploration finish whatever the space's size
/// (`--from-log`: a real state may open a space far larger than the
/// pinned configurations').
#[derive(Clone, Copy, Debug)]
pub struct Bounds {
    /// States of a path beyond which nothing is expanded.
    pub depth_max: usize,
    /// States generated (repeats included, as stateright counts them)
    /// after which the exploration stops; it may overshoot by a block.
    pub states_max: usize,
    /// Wall time after which the exploration stops.
    pub time_max: Duration,
}

/// The safety properties explored from `model`'s initial world (a
/// projected real state) within `bounds`, breadth first, stopping at the
/// first safety failure. Liveness is not checked (its graph is kept
/// whole, which the bounds would cut).
pub fn run_bounded(model: &FleetModel, options: &RunOptions, bounds: &Bounds) -> Report {
    run_safety(model.clone(), options, Some(bounds))
}

/// The safety and reachability properties, by stateright's checker.
fn run_safety(model: FleetModel, options: &RunOptions, bounds: Option<&Bounds>) -> Report {
    let cfg = model.cfg.clone();
    let started = Instant::now();
    let mut builder = model
        .clone()
        .checker()
        .threads(options.threads.max(1))
        .finish_when(HasDiscoveries::AnyFailures);
    if let Some(b) = bounds {
        builder = builder
            .target_max_depth(b.depth_max)
            .target_state_count(b.states_max)
            .timeout(b.time_max);
    }
    // stateright reduces symmetry in its depth-first checker only; the
    // counterexample is shortened breadth first afterwards either way.
    let checker = if cfg.symmetry {
        assert!(
            cfg.symmetry_refusal().is_none(),
            "{cfg}: {:?}",
            cfg.symmetry_refusal()
        );
        let spawned = builder
            .symmetry_fn(crate::symmetry::representative_of)
            .spawn_dfs();
        finish(spawned, options, started)
    } else if bounds.is_none() && cfg.mutant.is_none() && options.order == SearchOrder::DepthFirst {
        finish(builder.spawn_dfs(), options, started)
    } else {
        finish(builder.spawn_bfs(), options, started)
    };
    let elapsed = started.elapsed();
    let discoveries = &checker.discoveries;
    let any_failure = model
        .properties()
        .iter()
        .any(|p| p.expectation == Expectation::Always && discoveries.contains_key(p.name));
    let properties = model
        .properties()
        .into_iter()
        .map(|p| {
            let found = discoveries.get(p.name);
            property_result(&model, p, found, any_failure)
        })
        .collect();
    let states = checker.states;
    Report {
        config: cfg.to_string(),
        unique_states: checker.unique_states,
        states,
        max_depth: checker.max_depth,
        elapsed_ms: elapsed.as_millis(),
        states_per_sec: (states as f64 / elapsed.as_secs_f64().max(1e-9)) as u64,
        properties,
        liveness: None,
    }
}

/// One property's result: its status, and for a failure the shortest
/// counterexample, narrated.
fn property_result(
    model: &FleetModel,
    p: stateright::Property<FleetModel>,
    found: Option<&stateright::Path<World, Action>>,
    any_failure: bool,
) -> PropertyResult {
    let (kind, status) = match (&p.expectation, found) {
        (Expectation::Always, Some(_)) => ("always", Status::Fail),
        (Expectation::Always, None) if any_failure => ("always", Status::Unsettled),
        (Expectation::Always, None) => ("always", Status::Pass),
        (Expectation::Sometimes, Some(_)) => ("sometimes", Status::Found),
        (Expectation::Sometimes, None) if any_failure => ("sometimes", Status::Unsettled),
        (Expectation::Sometimes, None) => ("sometimes", Status::NotFound),
        (Expectation::Eventually, Some(_)) => ("eventually", Status::Fail),
        (Expectation::Eventually, None) => ("eventually", Status::Pass),
    };
    let (counterexample, diagram) = match (&status, found) {
        (Status::Fail, Some(path)) => {
            let found = path.clone().into_vec();
            let shortest = shortest_path(model, p.condition, found.len()).unwrap_or(found);
            let (text, chart) = narrate(model, shortest, p.name);
            (Some(text), Some(chart))
        }
        _ => (None, None),
    };
    PropertyResult {
        name: p.name.to_string(),
        kind: kind.to_string(),
        status,
        rule: rule_of(p.name).map(|r| r.code().to_string()),
        counterexample,
        diagram,
    }
}

/// What a finished checker run found.
struct Finished {
    discoveries: std::collections::HashMap<&'static str, stateright::Path<World, Action>>,
    states: usize,
    unique_states: usize,
    max_depth: usize,
}

/// Wait for `checker`, printing progress when asked.
fn finish(checker: impl Checker<FleetModel>, options: &RunOptions, started: Instant) -> Finished {
    let mut last = Instant::now();
    while !checker.is_done() {
        std::thread::sleep(Duration::from_millis(50));
        if options.progress && last.elapsed() >= Duration::from_millis(PROGRESS_INTERVAL_MS) {
            last = Instant::now();
            let secs = started.elapsed().as_secs_f64();
            let states = checker.state_count();
            let _ = writeln!(
                std::io::stderr(),
                "[{secs:6.1}s] states {states}, unique {}, depth {}, {:.0} states/s",
                checker.unique_state_count(),
                checker.max_depth(),
                states as f64 / secs.max(1e-9)
            );
        }
    }
    let checker = checker.join();
    Finished {
        discoveries: checker.discoveries(),
        states: checker.state_count(),
        unique_states: checker.unique_state_count(),
        max_depth: checker.max_depth(),
    }
}

/// Upper bound on states the counterexample shortener may visit.
pub const SHORTEN_STATES_MAX: usize = 2_000_000;

/// The shortest path from the initial state to a state where `condition`
/// fails, searched breadth first up to `depth_max` states long.
///
/// Why: stateright's BFS records a discovery per block of states and a later
/// state of the same block can overwrite an earlier, shorter one, so the path
/// it returns is not always the shortest. Counterexamples are read by people;
/// the shortest one is the clearest.
pub fn shortest_path(
    model: &FleetModel,
    condition: fn(&FleetModel, &World) -> bool,
    depth_max: usize,
) -> Option<Vec<(World, Option<Action>)>> {
    use std::collections::{HashMap, VecDeque};
    let init = model.initial();
    let mut parent: HashMap<World, Option<(World, Action)>> = HashMap::new();
    parent.insert(init.clone(), None);
    let mut queue = VecDeque::from([(init, 1usize)]);
    let mut actions = Vec::new();
    while let Some((world, depth)) = queue.pop_front() {
        if !condition(model, &world) {
            // Walk back to the root, then tell it forwards.
            let mut path: Vec<(World, Option<Action>)> = vec![(world.clone(), None)];
            let mut cursor = world;
            while let Some(Some((prev, action))) = parent.get(&cursor).cloned() {
                path.push((prev.clone(), Some(action)));
                cursor = prev;
            }
            path.reverse();
            return Some(path);
        }
        if depth >= depth_max || parent.len() >= SHORTEN_STATES_MAX {
            continue;
        }
        model.enabled(&world, &mut actions);
        for action in actions.drain(..) {
            let next = model.transition(&world, action, &mut None);
            if next == world || parent.contains_key(&next) {
                continue;
            }
            parent.insert(next.clone(), Some((world.clone(), action)));
            queue.push_back((next, depth + 1));
        }
    }
    None
}

/// Tell a path as numbered steps in domain words, with what each step made
/// the controller and agents do, and the broken rule at the end; and the
/// same path as a sequence chart.
pub fn narrate(
    model: &FleetModel,
    path: Vec<(World, Option<Action>)>,
    property: &str,
) -> (Vec<String>, seqchart::Chart) {
    let (mut steps, chart, last) = tell(model, path, None);
    let detail = last.as_ref().and_then(|w| why_broken(w, property));
    let broken = match detail {
        Some(detail) => format!("=> breaks {property}: {detail}"),
        None => format!("=> breaks {property}"),
    };
    let chart = chart.broken(broken.trim_start_matches("=> "));
    steps.push(broken);
    (steps, chart)
}

/// Why `property` fails in `world`, in domain words.
fn why_broken(world: &World, property: &str) -> Option<String> {
    let rule = rule_of(property)?;
    if let Some(v) = world.violation.as_ref().filter(|v| v.rule == rule) {
        return Some(v.detail.clone());
    }
    let ctrl = world.controller();
    if let (invariants::Rule::ProofIsReadback, Some(node)) = (rule, world.ghost.proof_lied) {
        let intended = ctrl
            .intended_rollout(node)
            .map_or("nothing".to_string(), |r| r.plan.release.to_string());
        return Some(format!(
            "a live proof of {node} says verified for {intended}, but {}",
            world.truth(node)
        ));
    }
    let state_check = match rule {
        invariants::Rule::S1 => invariants::s1_slot_bound(&ctrl),
        invariants::Rule::S2 => invariants::s2_one_live_op_per_node(&ctrl),
        invariants::Rule::S4 => invariants::s4_canary_first(&ctrl),
        invariants::Rule::S10 => {
            let ghost = &world.ghost;
            invariants::s10_human_waits_survive(
                &ctrl,
                &|r| ghost.approved_by_operator & (1 << r.0) != 0,
                &|op| ghost.resolved_by_operator & (1 << op.0) != 0,
            )
        }
        invariants::Rule::S11 => invariants::s11_wrong_answer_stops(&ctrl),
        _ => Ok(()),
    };
    match state_check {
        Err(v) => Some(v.detail),
        Ok(()) if rule == invariants::Rule::S11 => Some(
            "the controller counts the canary as verified while its route answers wrongly"
                .to_string(),
        ),
        Ok(()) => None,
    }
}

/// The first broken property's counterexample as a sequence chart.
pub fn first_diagram(report: &Report) -> Option<&seqchart::Chart> {
    report.failures().find_map(|p| p.diagram.as_ref())
}

/// The line `fleetweft-check` prints after its summary: the process's peak
/// memory, and per unique state (only a process that ran one check alone
/// can say it; a test or the controller cannot).
pub fn peak_memory_line(report: &Report) -> Option<String> {
    let peak = peak_memory_bytes()?;
    Some(format!(
        "peak memory: {} MiB, {} bytes per unique state",
        peak >> 20,
        peak / (report.unique_states.max(1) as u64)
    ))
}

/// The process's peak resident memory (`VmHWM` of `/proc/self/status`),
/// where Linux tells it.
pub fn peak_memory_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The human summary.
pub fn summary(report: &Report) -> String {
    let mut out = String::new();
    out.push_str(&format!("config: {}\n", report.config));
    out.push_str(&format!(
        "explored: {} unique states ({} generated), max depth {}, {:.1}s, {} states/s\n",
        report.unique_states,
        report.states,
        report.max_depth,
        report.elapsed_ms as f64 / 1000.0,
        report.states_per_sec
    ));
    if let Some(l) = &report.liveness {
        out.push_str(&format!(
            "liveness graph: {} states, {} edges, {:.1}s (weak fairness of delivery, timers and agent steps)\n",
            l.states,
            l.edges,
            l.elapsed_ms as f64 / 1000.0
        ));
    }
    for p in &report.properties {
        let status = match p.status {
            Status::Pass => "PASS",
            Status::Fail => "FAIL",
            Status::Found => "FOUND",
            Status::NotFound => "NOT FOUND",
            Status::Unsettled => "unsettled (stopped at first failure)",
        };
        out.push_str(&format!("  {status:<10} {:<9} {}\n", p.kind, p.name));
    }
    for p in report.failures() {
        out.push_str(&format!("\ncounterexample for \"{}\":\n", p.name));
        for step in p.counterexample.iter().flatten() {
            out.push_str(step);
            out.push('\n');
        }
    }
    out
}

/// A Markdown page for a failed run (the counterexample gallery).
pub fn markdown(report: &Report, title: &str, intro: &str) -> String {
    let mut out = format!("# {title}\n\n{intro}\n\n");
    out.push_str(&format!("Configuration: {}\n\n", report.config));
    out.push_str(&match &report.liveness {
        Some(graph) => format!(
            "Explored {} unique states: the whole graph ({} transitions), kept for the liveness check under weak fairness.\n\n",
            graph.states, graph.edges
        ),
        None => format!(
            "Explored {} unique states before the first violation (max depth {}).\n\n",
            report.unique_states, report.max_depth
        ),
    });
    for p in report.failures() {
        out.push_str(&format!("## Property broken: {}\n\n", p.name));
        out.push_str("```text\n");
        for step in p.counterexample.iter().flatten() {
            out.push_str(step);
            out.push('\n');
        }
        out.push_str("```\n\n");
        if let Some(chart) = &p.diagram {
            out.push_str("### As a sequence diagram\n\n```mermaid\n");
            out.push_str(&chart.mermaid());
            out.push_str("```\n\n");
        }
    }
    if report.failures().next().is_none() {
        out.push_str("No property failed.\n");
    }
    out
}
