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

/// Path length explored first by default ([`Depth::Deepen`] goes deeper
/// while it fits): a projected start with the default faults and four
/// nodes is explored to this depth within the default states_max (the
/// 10,000-node fleetsim log paused mid-rollout: 1.5M generated, 9.5 s).
pub const DEPTH_DEFAULT: usize = 10;

/// Deepest path length [`Depth::Deepen`] goes to by default (the
/// pinned configurations' whole spaces are 18 to 43 deep from a fresh
/// fleet; a projected state starts mid-way).
pub const DEPTH_MAX_DEFAULT: usize = 40;

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
            depth_max: DEPTH_MAX_DEFAULT,
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
    /// Wall time of every run, the shallower ones of [`Depth::Deepen`]
    /// included, in milliseconds.
    pub total_ms: u128,
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
            out.push_str(&format!(
                "\nbreaks \"{}\" from here; shortest path:\n",
                p.name
            ));
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
        out.push_str(&format!(
            "explored in {:.1}s in all (shallower depths included)\n",
            self.total_ms as f64 / 1000.0
        ));
        out
    }
}

/// How deep to explore.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Depth {
    /// Exactly this path length.
    Fixed(usize),
    /// From [`DEPTH_DEFAULT`] deeper by [`DEPTH_STEP`] while the next
    /// level is likely to fit in the bounds' states and time (each level
    /// multiplies the states by about 1.8 on the projected fleetsim log);
    /// the deepest exploration that finished is reported.
    Deepen,
}

/// Levels added at each step of [`Depth::Deepen`].
pub const DEPTH_STEP: usize = 2;

/// How much larger (states and time) the next step of [`Depth::Deepen`]
/// is assumed to be than the last.
const DEEPEN_GROWTH: usize = 4;

/// Project `state` and explore from there under `base`'s faults and
/// operator, within `bounds` (whose `depth_max` is the deepest
/// [`Depth::Deepen`] goes).
pub fn explore(
    state: &ControllerState,
    base: &CheckConfig,
    limits: Limits,
    bounds: Bounds,
    depth: Depth,
    options: &RunOptions,
) -> Result<Explored, ProjectionError> {
    let projection: Projection = project(state, base, limits)?;
    let model = projection.model();
    let started = std::time::Instant::now();
    let mut depth_now = match depth {
        Depth::Fixed(d) => d,
        Depth::Deepen => DEPTH_DEFAULT.min(bounds.depth_max),
    };
    loop {
        let left = bounds.time_max.saturating_sub(started.elapsed());
        let step = Bounds {
            depth_max: depth_now,
            time_max: left.max(Duration::from_secs(1)),
            ..bounds
        };
        let report = run_bounded(&model, options, &step);
        let stopped = stopped_by(&report, &step);
        let fits = report.states.saturating_mul(DEEPEN_GROWTH) < bounds.states_max
            && started.elapsed() * DEEPEN_GROWTH as u32 + started.elapsed() < bounds.time_max;
        let deeper = depth == Depth::Deepen
            && stopped.is_none()
            && report.failures().next().is_none()
            && report.max_depth >= depth_now
            && depth_now + DEPTH_STEP <= bounds.depth_max
            && fits;
        if !deeper {
            return Ok(Explored {
                start: projection.describe(),
                report,
                depth_max: depth_now,
                stopped,
                total_ms: started.elapsed().as_millis(),
            });
        }
        depth_now += DEPTH_STEP;
    }
}

/// Which bound stopped a run before its depth, if one did.
fn stopped_by(report: &Report, bounds: &Bounds) -> Option<String> {
    if report.states >= bounds.states_max {
        Some(format!(
            "states_max {} generated states reached",
            bounds.states_max
        ))
    } else if report.elapsed_ms >= bounds.time_max.as_millis() {
        Some(format!("time_max {} s reached", bounds.time_max.as_secs()))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Faults;
    use crate::fleet::{Action, FleetModel};
    use crate::world::Msg;
    use model::{OpId, RolloutId};

    /// A canary granted, its commit decided and the reply lost, the
    /// rollout paused: the controller's state.
    fn lost_reply() -> ControllerState {
        let model = FleetModel::new(CheckConfig {
            followers: 1,
            faults: Faults::none(),
            max_faults: 0,
            ..CheckConfig::default()
        });
        let mut w = model.transition(&model.initial(), Action::Start, &mut None);
        for to_agent in [true, false] {
            let msg = *w
                .net
                .iter()
                .find(|m| matches!(m, Msg::ToAgent(..)) == to_agent)
                .expect("a message");
            w = model.transition(&w, Action::Deliver { msg, fault: None }, &mut None);
        }
        let reply = *w.net.iter().next().expect("the reply");
        w = model.transition(&w, Action::Drop(reply), &mut None);
        w = model.transition(&w, Action::Pause(RolloutId(0)), &mut None);
        assert!(w.durable.op(OpId(0)).is_some_and(|o| o.decision.is_some()));
        w.durable.to_owned_value()
    }

    #[test]
    fn deepening_stops_where_the_space_ends_and_tells_it() {
        let base = CheckConfig {
            faults: Faults::none().with(Fault::Loss),
            ..CheckConfig::default()
        };
        let options = RunOptions {
            threads: 1,
            progress: false,
            order: Default::default(),
        };
        let e = explore(
            &lost_reply(),
            &base,
            Limits::default(),
            Bounds::default(),
            Depth::Deepen,
            &options,
        )
        .unwrap();
        assert!(!e.broken());
        assert!(e.stopped.is_none());
        // The space ran out before the depth: every state was explored.
        assert!(e.report.max_depth < e.depth_max, "{}", e.text());
        let text = e.text();
        assert!(
            text.contains("every state reachable from here explored"),
            "{text}"
        );
        assert!(text.contains("paused (operator)"), "{text}");
        // A fixed depth short of the space says so.
        let short = explore(
            &lost_reply(),
            &base,
            Limits::default(),
            Bounds::default(),
            Depth::Fixed(3),
            &options,
        )
        .unwrap();
        assert_eq!(short.report.max_depth, 3);
        assert!(
            short.text().contains("no violation within depth 3"),
            "{}",
            short.text()
        );
    }
}
