//! `GET /fleet`: the fleet map. One cell per node in enrollment order,
//! coloured by its state (the view layer's [`NodeState`]) from the
//! Okabe-Ito palette and lettered, so it reads without colour; a legend
//! names each letter with its word and count and links to the nodes in
//! that state. Each row of [`MAP_ROW_NODES`] cells links to the node list
//! from its first node. Runs of one state share one element, so a rollout
//! (whose states come in runs, wave by wave) costs little; the worst case
//! (every node unlike its neighbour) is [`MAP_CELL_BYTES_MAX`] a node.

use super::{escape, html, node_letter, pairs, param, refusal, shell, url_part, PageQuery};
use crate::daemon::core::Snapshot;
use crate::daemon::state::Api;
use crate::daemon::view::NodeState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use model::NodeId;
use std::fmt::Write;

/// Nodes one map page shows: the whole of a 10,000-node fleet.
pub const FLEET_MAP_NODES_PER_PAGE_MAX: usize = 10_000;
/// Cells in one row of the map.
pub const MAP_ROW_NODES: usize = 100;
/// Bytes one cell costs at most (`<b class=mX>X</b>`, a run of one).
pub const MAP_CELL_BYTES_MAX: usize = 17;

// A whole page of the worst case stays under the page limit, with room
// for the rows' links and the legend.
const _: () =
    assert!(FLEET_MAP_NODES_PER_PAGE_MAX * MAP_CELL_BYTES_MAX + 20 * 1024 < super::PAGE_BYTES_MAX);

/// The map's route.
pub fn routes() -> utoipa_axum::router::OpenApiRouter<Api> {
    utoipa_axum::router::OpenApiRouter::new().routes(utoipa_axum::routes!(fleet_map))
}

/// `GET /fleet`'s query, as documented.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // Declares the query for the document; never built.
struct FleetParams {
    /// Start after this node (enrollment order); 404 when no node has it.
    #[param(pattern = "^[a-z0-9-]{1,63}$")]
    after: Option<String>,
}

/// `GET /fleet`: the fleet map.
#[utoipa::path(get, path = "/fleet", tag = "console",
    params(FleetParams),
    responses(
        (status = 200, description = "the fleet map (HTML)", body = String, content_type = "text/html"),
        (status = 404, description = "no such node to start after (HTML)", body = String, content_type = "text/html"),
(status = 503, description = "the controller core stopped (HTML)", body = String, content_type = "text/html"),
    ))]
async fn fleet_map(State(api): State<Api>, q: PageQuery) -> Response {
    let pairs = match pairs(q) {
        Ok(p) => p,
        Err(page) => return page.into_response(),
    };
    let Some(snap) = api.core.snapshot().await else {
        return super::unavailable();
    };
    let start = match param(&pairs, "after") {
        None => 0,
        Some(name) => match snap.state.roster.id(name) {
            Some(id) => id.0 as usize + 1,
            None => {
                return refusal(
                    StatusCode::NOT_FOUND,
                    &format!("parameter `after`: no node {name} is enrolled"),
                )
            }
        },
    };
    html(StatusCode::OK, render(&snap, start))
}

/// The letter's class on the map (`mI`, `mU`, ...).
fn cell_class(state: NodeState) -> String {
    format!("m{}", node_letter(state))
}

/// Nodes in each state, every state listed (O(fleet), O(log n) each).
pub fn counts(snap: &Snapshot) -> Vec<(NodeState, usize)> {
    let mut counts: Vec<(NodeState, usize)> = NodeState::ALL.iter().map(|s| (*s, 0)).collect();
    for i in 0..snap.state.roster.len() {
        let state = NodeState::of(&snap.state, NodeId(i as u32));
        if let Some(c) = counts.iter_mut().find(|(s, _)| *s == state) {
            c.1 += 1;
        }
    }
    counts
}

/// The legend: each state's cell, word and count, linked to its nodes.
pub fn legend(counts: &[(NodeState, usize)]) -> String {
    let mut h = String::from("<p id=\"map-legend\">colour and letter per node state: ");
    for (state, n) in counts {
        let _ = write!(
            h,
            "<span class=\"map\"><b class=\"{}\">{}</b></span> <a href=\"/nodes?state={}\">{}</a> {n} &middot; ",
            cell_class(*state),
            node_letter(*state),
            url_part(state.as_str()),
            escape(state.as_str()),
        );
    }
    h.push_str("<a href=\"/fleet\">the whole map</a></p>\n");
    h
}

/// The map page of the nodes from `start` on.
pub fn render(snap: &Snapshot, start: usize) -> String {
    let total = snap.state.roster.len();
    let end = total.min(start + FLEET_MAP_NODES_PER_PAGE_MAX);
    let mut h = String::new();
    let _ = writeln!(
        h,
        "<h1>Fleet map</h1>\n<p>{total} node(s) enrolled; nodes {} to {end} in enrollment order, {MAP_ROW_NODES} a row; each row links to the node list from its first node.</p>",
        (start + 1).min(end),
    );
    h.push_str(&legend(&counts(snap)));
    h.push_str("<div class=\"map\" id=\"map\" role=\"group\" aria-label=\"fleet map: one lettered cell per node, see the legend; each row starts with a link to its first node\">\n");
    for row in (start..end).step_by(MAP_ROW_NODES) {
        let href = match row {
            0 => "/nodes".to_string(),
            r => format!(
                "/nodes?after={}",
                url_part(&snap.state.roster.display_name(NodeId(r as u32 - 1)))
            ),
        };
        let first = snap.state.roster.display_name(NodeId(row as u32));
        let _ = write!(h, "<a href=\"{}\">{}</a> ", escape(&href), escape(&first));
        render_row(&mut h, snap, row, end.min(row + MAP_ROW_NODES));
        h.push_str("<br>\n");
    }
    h.push_str("</div>\n");
    if end < total {
        let last = snap.state.roster.display_name(NodeId(end as u32 - 1));
        let _ = writeln!(
            h,
            "<p><a href=\"/fleet?after={}\">next page</a></p>",
            escape(&url_part(&last))
        );
    }
    shell("Fleet map", false, &h)
}

/// One row: runs of one state in one element each.
fn render_row(h: &mut String, snap: &Snapshot, from: usize, to: usize) {
    let mut run: Option<(NodeState, usize)> = None;
    let flush = |h: &mut String, run: Option<(NodeState, usize)>| {
        if let Some((state, n)) = run {
            let letter = node_letter(state);
            let _ = write!(
                h,
                "<b class={}>{}</b>",
                cell_class(state),
                std::iter::repeat_n(letter, n).collect::<String>()
            );
        }
    };
    for i in from..to {
        let state = NodeState::of(&snap.state, NodeId(i as u32));
        match &mut run {
            Some((s, n)) if *s == state => *n += 1,
            _ => {
                flush(h, run.take());
                run = Some((state, 1));
            }
        }
    }
    flush(h, run);
}
