//! "Explore from here": the checker run from a real state's projection
//! ([`crate::projection`]), bounded so it always finishes, and told in
//! domain words. Shared by `fleetweft-check --from-log` and the
//! controller's API.

use crate::config::{CheckConfig, Fault};
use crate::projection::{project, Limits, Projection, ProjectionError};
use crate::run::{run_bounded, Bounds, Report, RunOptions};
use crate::verdict::Status;
use model::controller::ControllerState;
use serde::Serialize;
use std::time::Duration;

/// Path length explored by default: a projected start with the default
/// faults and four nodes is explored to this depth within the default
/// states_max (the pinned configurations' whole spaces are 18 to 43 deep
/// from a fresh fleet; a projected state starts mid-way).
pub const DEPTH_DEFAULT: usize = 12;

/// States generated (repeats included: what stateright counts and
/// bounds) after which an exploration stops by default: about 3 million
/// unique worlds, under 3 GB, a minute or two on this project's 2-core
/// machines.
pub const STATES_MAX_DEFAULT: usize = 4_000_000;

/// Wall time after which an exploration stops by default, in seconds.
pub const TIME_MAX_S_DEFAULT: u64 = 100;

impl Default for Bounds {
    fn default() -> Self {
        Bounds {
            depth_max: DEPTH_DEFAULT,
            states_max: STATES_MAX_DEFAULT,
            time_max: Duration::from_secs(TIME_MAX_S_DEFAULT),
        }
    }
}

/// Why a configuration cannot explore from a projected state.
pub fn refusal(cfg: &CheckConfig) -> Option<&'static str> {
    if cfg.faults.has(Fault::Snapshot) {
        // The projected world has no log history to snapshot or rebuild.
        return Some("the snapshot fault needs the log from genesis; not with a projected start");
    }
    if cfg.roster || cfg.waves || cfg.symmetry {
        return Some("--roster, --waves and --symmetry describe a fresh fleet; the projection brings the real rollout's");
    }
    if cfg.liveness != crate::config::LivenessCheck::Off {
        return Some("liveness needs the whole graph; a bounded exploration cuts it");
    }
    None
}

/// What an exploration from a projected state found.
#[derive(Clone, Debug, Serialize)]
pub struct Explored {
    /// The projected start, in domain words.
    pub start: Vec<String>,
    /// The checker's report (properties, counterexamples, figures).
    pub report: Report,
    /// The path length explored.
    pub depth_max: usize,
    /// Why the exploration stopped before its depth, if it did (a bound
    /// on states or time).
    pub stopped: Option<String>,
}

impl Explored {
    /// Whether a rule can be broken from here.
    pub fn broken(&self) -> bool {
        self.report.failures().next().is_some()
    }

    /// The whole account: the start, then each broken rule with its
    /// shortest path, or "no violation within depth N: S states".
    pub fn text(&self) -> String {
        let mut out = String::from("projected start:\n");
        for line in &self.start {
            out.push_str(line);
            out.push('\n');
        }
        out.push_str(&format!("explored under: {}\n", self.report.config));
        let r = &self.report;
        for p in r.failures() {
            out.push_str(&format!("\nbreaks \"{}\" from here; shortest path:\n", p.name));
            for step in p.counterexample.iter().flatten() {
                out.push_str(step);
                out.push('\n');
            }
        }
        let figures = format!(
            "{} states ({} generated), max depth {}, {:.1}s",
            r.unique_states,
            r.states,
            r.max_depth,
            r.elapsed_ms as f64 / 1000.0
        );
        match (self.broken(), &self.stopped) {
            (true, _) => out.push_str(&format!("\nexplored {figures} before the first violation\n")),
            (false, None) if r.max_depth < self.depth_max => out.push_str(&format!(
                "\nno violation: every state reachable from here explored, {figures}\n"
            )),
            (false, None) => out.push_str(&format!(
                "\nno violation within depth {}: {figures}\n",
                self.depth_max
            )),
            (false, Some(why)) => out.push_str(&format!(
                "\nno violation found, but the exploration stopped early ({why}): {figures}; not exhaustive within depth {}\n",
                self.depth_max
            )),
        }
        let found: Vec<&str> = r
            .properties
            .iter()
            .filter(|p| p.status == Status::Found)
            .map(|p| p.name.as_str())
            .collect();
        if !found.is_empty() {
            out.push_str(&format!("reachable from here: {}\n", found.join("; ")));
        }
        out
    }
}

/// Project `state` and explore from there under `base`'s faults and
/// operator, within `bounds`.
pub fn explore(
    state: &ControllerState,
    base: &CheckConfig,
    limits: Limits,
    bounds: Bounds,
    options: &RunOptions,
) -> Result<Explored, ProjectionError> {
    let projection: Projection = project(state, base, limits)?;
    let model = projection.model();
    let report = run_bounded(&model, options, &bounds);
    let stopped = if report.states >= bounds.states_max {
        Some(format!("states_max {} generated states reached", bounds.states_max))
    } else if report.elapsed_ms >= bounds.time_max.as_millis() {
        Some(format!("time_max {} s reached", bounds.time_max.as_secs()))
    } else {
        None
    };
    Ok(Explored {
        start: projection.describe(),
        report,
        depth_max: bounds.depth_max,
        stopped,
    })
}
