//! Liveness results as reports read them: each fair violation replayed
//! from the initial world through the model and told as a lasso, the stem
//! (numbered steps to the loop) and the loop (steps that repeat forever),
//! with a mark where the loop starts in the text and in the chart.

use crate::fleet::{Action, FleetModel};
use crate::liveness::{self, fair_class, Explored, Found, Lasso, Liveness, LivenessError};
use crate::verdict::{tell, PropertyResult, Status};
use crate::world::World;

/// Figures of one liveness exploration.
#[derive(Clone, Debug, serde::Serialize)]
pub struct LivenessFigures {
    /// States of the graph (fingerprints kept).
    pub states: usize,
    /// Transitions that change the state (edges kept).
    pub edges: usize,
    /// The longest breadth-first path from the initial world, in steps.
    pub max_depth: usize,
    /// Time to explore the graph and search it, in milliseconds.
    pub elapsed_ms: u128,
}

/// Explore `model`'s graph and check every liveness property on it.
pub fn check_liveness(
    model: &FleetModel,
    progress: bool,
) -> Result<(Vec<PropertyResult>, LivenessFigures), LivenessError> {
    let started = std::time::Instant::now();
    let explored = liveness::explore(model, progress)?;
    let results = liveness::check(&explored)
        .into_iter()
        .map(|(property, found)| result(model, &explored, property, found))
        .collect();
    let figures = LivenessFigures {
        states: explored.graph.len(),
        edges: explored.graph.edges.len(),
        max_depth: explored.depth.iter().copied().max().map_or(0, usize::from),
        elapsed_ms: started.elapsed().as_millis(),
    };
    if progress {
        eprintln!(
            "liveness: {} states, {} edges, {:.1}s",
            figures.states,
            figures.edges,
            figures.elapsed_ms as f64 / 1000.0
        );
    }
    Ok((results, figures))
}

fn result(
    model: &FleetModel,
    explored: &Explored,
    property: Liveness,
    found: Option<Found>,
) -> PropertyResult {
    let (status, counterexample, diagram) = match found {
        None => (Status::Pass, None, None),
        Some(found) => {
            let (text, chart) = tell_lasso(model, explored, &found);
            (Status::Fail, Some(text), Some(chart))
        }
    };
    PropertyResult {
        name: property.name().to_string(),
        kind: "leads-to".to_string(),
        status,
        rule: Some(property.code().to_string()),
        counterexample,
        diagram,
    }
}

/// The action indexes (into `FleetModel::enabled`) from the root to `state`.
fn stem(explored: &Explored, state: u32) -> Vec<u16> {
    let mut picks = Vec::new();
    let mut cursor = state;
    while cursor != 0 {
        picks.push(explored.parent_action[cursor as usize]);
        cursor = explored.parent[cursor as usize];
    }
    picks.reverse();
    picks
}

/// Take the actions picked by index, from `world`, recording each step.
fn replay(
    model: &FleetModel,
    mut world: World,
    picks: impl IntoIterator<Item = u16>,
    path: &mut Vec<(World, Option<Action>)>,
) -> World {
    let mut actions = Vec::new();
    for pick in picks {
        model.enabled(&world, &mut actions);
        let action = actions[usize::from(pick)];
        actions.clear();
        let next = model.transition(&world, action, &mut None);
        path.push((world, Some(action)));
        world = next;
    }
    world
}

/// The fair actions offered in `world` that change nothing: the loop of a
/// lasso that stays where it is.
fn stutters(model: &FleetModel, world: &World) -> Vec<u16> {
    let mut actions = Vec::new();
    model.enabled(world, &mut actions);
    actions
        .iter()
        .enumerate()
        .filter(|(_, a)| {
            fair_class(a).is_some() && model.transition(world, **a, &mut None) == *world
        })
        .map(|(ix, _)| ix as u16)
        .collect()
}

/// The lasso as numbered steps and a chart: the stem, a mark, the loop,
/// and the verdict.
fn tell_lasso(
    model: &FleetModel,
    explored: &Explored,
    found: &Found,
) -> (Vec<String>, seqchart::Chart) {
    let Lasso { entry, cycle } = &found.lasso;
    let mut path = Vec::new();
    let at_entry = replay(model, model.initial(), stem(explored, *entry), &mut path);
    let loop_at = path.len();
    let (picks, how) = if cycle.is_empty() {
        let picks = stutters(model, &at_entry);
        let how = "from here no fair action changes anything (the steps below, if any, change nothing), so it stays so forever";
        (picks, how)
    } else {
        let picks = cycle
            .iter()
            .map(|e| explored.graph.edges[*e as usize].action)
            .collect();
        (
            picks,
            "the steps below repeat forever, and every fair action enabled all along them is taken",
        )
    };
    let last = replay(model, at_entry, picks, &mut path);
    let steps_in_loop = path.len() - loop_at;
    path.push((last, None));
    let note = format!("↻ loop: {how}");
    let (mut text, chart, _) = tell(model, path, Some((loop_at, &note)));
    let span = match steps_in_loop {
        0 => format!("from step {loop_at} on"),
        _ => format!(
            "steps {}..{} repeat forever",
            loop_at + 1,
            loop_at + steps_in_loop
        ),
    };
    let verdict = format!(
        "=> breaks {}: {} ({span}, under weak fairness)",
        found.property.name(),
        found.property.what(found.entity)
    );
    let chart = chart.broken(verdict.trim_start_matches("=> "));
    text.push(verdict);
    (text, chart)
}
