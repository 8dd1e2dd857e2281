//! "Explore from here" (issue #27 item 3): `GET
//! /api/rollouts/{id}/explore?depth=N` projects the live part of the
//! controller's current state onto the model checker's world
//! (`simulations::projection`) and explores every interleaving of the
//! default faults and operator inputs from there, answering each rule a
//! path can break with its shortest path, or how far it looked.
//!
//! The exploration is CPU and memory heavy, so it is bounded in states
//! ([`EXPLORE_STATES_MAX`]) and time ([`EXPLORE_TIME_MAX_MS`]), runs on
//! the blocking pool with one checker thread, and one at a time (a
//! second request while one runs is a 409): a read that anyone on the
//! API's address may ask must not starve the core.

use super::error::{ApiError, Path, Query};
use super::state::Api;
use super::view::ErrorBody;
use axum::extract::State;
use axum::Json;
use model::RolloutId;
use serde::{Deserialize, Serialize};
use simulations::explore::{explore, Depth, Explored};
use simulations::projection::{Limits, ProjectionError};
use simulations::run::{Bounds, RunOptions};
use simulations::CheckConfig;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// States generated (repeats included) after which an exploration asked
/// of the API stops: about half a gigabyte of worlds at most, in the
/// controller's own process.
pub const EXPLORE_STATES_MAX: usize = 500_000;

/// Wall time after which an exploration asked of the API stops, in ms.
pub const EXPLORE_TIME_MAX_MS: u64 = 20_000;

/// Deepest path length a request may ask for.
pub const EXPLORE_DEPTH_MAX: u64 = 40;

/// One exploration at a time.
static RUNNING: AtomicBool = AtomicBool::new(false);

/// Frees [`RUNNING`] when the exploration ends, panics included.
struct Running;

impl Drop for Running {
    fn drop(&mut self) {
        RUNNING.store(false, Ordering::Release);
    }
}

/// The explore route.
pub fn routes() -> OpenApiRouter<Api> {
    OpenApiRouter::new().routes(routes!(explore_rollout))
}

/// `GET /api/rollouts/{id}/explore`'s query.
#[derive(Deserialize, Debug, Default, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ExploreQuery {
    /// Path length to explore (default: from 10, deeper while it fits
    /// in the bounds).
    #[param(minimum = 1, maximum = 40)]
    pub depth: Option<u64>,
}

/// What an exploration from the current state found.
#[derive(Serialize, Debug, utoipa::ToSchema)]
pub struct ExploreDto {
    /// The projected start in domain words: the rollout, each node with
    /// its real name and op, what was left out.
    pub start: Vec<String>,
    /// The rules some path from here breaks (empty: none found).
    pub broken: Vec<String>,
    /// Each broken rule's shortest path, as numbered steps.
    pub counterexamples: Vec<Vec<String>>,
    /// The path length explored.
    pub depth: u64,
    /// The deepest path reached.
    pub max_depth: u64,
    /// Unique states explored.
    pub states: u64,
    /// States generated, repeats included.
    pub generated: u64,
    /// Every state reachable from here was explored (the space ran out
    /// before the depth).
    pub exhaustive: bool,
    /// The bound that stopped the exploration early, if one did.
    pub stopped: Option<String>,
    /// Wall time, every depth tried included, in ms.
    pub elapsed_ms: u64,
    /// The whole account as text, as `fleetweft-check --from-log` prints.
    pub text: String,
}

impl ExploreDto {
    fn of(explored: &Explored) -> ExploreDto {
        let r = &explored.report;
        let failures = || r.failures();
        ExploreDto {
            start: explored.start.clone(),
            broken: failures().map(|p| p.name.clone()).collect(),
            counterexamples: failures()
                .map(|p| p.counterexample.clone().unwrap_or_default())
                .collect(),
            depth: explored.depth_max as u64,
            max_depth: r.max_depth as u64,
            states: r.unique_states as u64,
            generated: r.states as u64,
            exhaustive: explored.stopped.is_none() && r.max_depth < explored.depth_max,
            stopped: explored.stopped.clone(),
            elapsed_ms: u64::try_from(explored.total_ms).unwrap_or(u64::MAX),
            text: explored.text(),
        }
    }
}

/// `GET /api/rollouts/{id}/explore?depth=N`: what can go wrong from here.
#[utoipa::path(get, path = "/api/rollouts/{id}/explore", tag = "reads",
    params(("id" = String, Path, description = "rollout id: r0, r1, ..."), ExploreQuery),
    responses(
        (status = 200, description = "the projected start, each rule a path from here breaks with its shortest path, and how far the exploration looked", body = ExploreDto),
        (status = 400, description = "a bad query parameter, named", body = ErrorBody),
        (status = 404, description = "no such rollout", body = ErrorBody),
        (status = 409, description = "the rollout is not under way, or another exploration is running", body = ErrorBody),
        (status = 503, description = "the controller core stopped", body = ErrorBody),
    ))]
async fn explore_rollout(
    State(api): State<Api>,
    Path(id): Path<String>,
    Query(q): Query<ExploreQuery>,
) -> Result<Json<ExploreDto>, ApiError> {
    let depth = match q.depth {
        None => Depth::Deepen,
        Some(d) if (1..=EXPLORE_DEPTH_MAX).contains(&d) => Depth::Fixed(d as usize),
        Some(d) => {
            return Err(ApiError::BadRequest(format!(
                "parameter `depth`: {d} is not a whole number from 1 to {EXPLORE_DEPTH_MAX}"
            )))
        }
    };
    let snap = api.core.snapshot().await.ok_or(ApiError::Unavailable)?;
    let state = snap.state.clone();
    let rollout = id
        .strip_prefix('r')
        .and_then(|n| n.parse().ok())
        .map(RolloutId)
        .and_then(|r| state.rollout(r).map(|r| r.id))
        .ok_or_else(|| ApiError::NotFound(format!("no rollout {id}")))?;
    if state.active != Some(rollout) {
        return Err(ApiError::Conflict(format!(
            "{rollout} is not under way (neither active nor paused): nothing to explore"
        )));
    }
    if RUNNING.swap(true, Ordering::AcqRel) {
        return Err(ApiError::Conflict(
            "another exploration is running; ask again when it is done".to_string(),
        ));
    }
    let running = Running;
    let explored = tokio::task::spawn_blocking(move || {
        let _running = running;
        run(&state, depth)
    })
    .await
    .map_err(|e| ApiError::Conflict(format!("the exploration stopped: {e}")))?;
    match explored {
        Ok(e) => Ok(Json(ExploreDto::of(&e))),
        Err(ProjectionError::NothingLive(why)) => Err(ApiError::Conflict(why)),
        Err(e) => Err(ApiError::Conflict(e.to_string())),
    }
}

/// The exploration itself, under the checker's default faults and
/// operator, within the API's bounds.
fn run(
    state: &model::controller::ControllerState,
    depth: Depth,
) -> Result<Explored, ProjectionError> {
    let bounds = Bounds {
        depth_max: match depth {
            Depth::Fixed(d) => d,
            Depth::Deepen => EXPLORE_DEPTH_MAX as usize,
        },
        states_max: EXPLORE_STATES_MAX,
        time_max: Duration::from_millis(EXPLORE_TIME_MAX_MS),
    };
    let options = RunOptions {
        threads: 1,
        progress: false,
        order: Default::default(),
    };
    explore(
        state,
        &CheckConfig::default(),
        Limits::default(),
        bounds,
        depth,
        &options,
    )
}
