//! The overview (`GET /`): the summary, the first nodes, the rollouts,
//! the handover report's first entries, the latest events and the fleet
//! map's counts, each a link to its own page. It reads the same DTOs as
//! the API: [`status_dto`], [`proof`]'s node proofs and the handover
//! report. Refreshed every 2 s (until the pages follow the event stream);
//! every text is escaped.
//!
//! UNKNOWN has its own neutral style (class `unknown`: grey background,
//! amber text, dashed border), never the green of success or the red of
//! failure: an UNKNOWN op is neither.
//!
//! A drifted node (its latest observation contradicts its confirmed
//! release) has its own style too (class `drifted`: white on purple), never
//! the green of a verified node. The overview's proofs are the recorded
//! ones (`--cached`): a page refreshed every 2 s must not read every node
//! back.

use super::{escape, link, node_link, op_link, rollout_link, shell, url_part};
use crate::daemon::core::Snapshot;
use crate::daemon::error::ApiError;
use crate::daemon::state::Api;
use crate::daemon::view::{
    node_page, status_dto, NodeDto, NodeQuery, NodeState, Page, RolloutDto, StatusDto,
};
use crate::daemon::view::{ErrorBody, EventDto};
use api::report::Unresolved;
use axum::extract::State;
use axum::response::{Html, IntoResponse, Response};
use proof::{NodeProof, Verdict};
use std::fmt::Write;

/// The overview's routes (`/` and `/metrics`), documented like the API's.
pub fn routes() -> utoipa_axum::router::OpenApiRouter<Api> {
    utoipa_axum::router::OpenApiRouter::new()
        .routes(utoipa_axum::routes!(dashboard))
        .routes(utoipa_axum::routes!(metrics_text))
}

/// `GET /`: the overview.
#[utoipa::path(get, path = "/", tag = "dashboard",
    responses(
        (status = 200, description = "the console's overview (HTML; follows /live with JavaScript, else reloads every 2 s)", body = String, content_type = "text/html"),
        (status = 503, description = "the controller core stopped", body = ErrorBody),
    ))]
async fn dashboard(State(api): State<Api>) -> Result<Html<String>, ApiError> {
    let snap = api.core.snapshot().await.ok_or(ApiError::Unavailable)?;
    let from = snap
        .last_sequence
        .map_or(0, |last| (last + 1).saturating_sub(DASHBOARD_EVENTS as u64));
    let logged = api.core.events(from, DASHBOARD_EVENTS).await;
    let events = {
        let roster = api.core.roster();
        logged
            .into_iter()
            .map(|(sequence, event)| crate::daemon::view::event_dto(&roster, sequence, event))
            .collect()
    };
    Ok(Html(render(&data(&snap, events))))
}

/// `GET /metrics`: Prometheus text exposition.
#[utoipa::path(get, path = "/metrics", tag = "dashboard",
    responses(
        (status = 200, description = "Prometheus text exposition format", body = String, content_type = "text/plain"),
        (status = 503, description = "the controller core stopped", body = ErrorBody),
    ))]
async fn metrics_text(State(api): State<Api>) -> Response {
    let Some(snap) = api.core.snapshot().await else {
        return ApiError::Unavailable.into_response();
    };
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        super::metrics(&snap, std::time::SystemTime::now()) + &api.releases.served.metrics(),
    )
        .into_response()
}

/// Events shown on the overview; the rest are paged on `/events`.
pub const DASHBOARD_EVENTS: usize = 20;
/// Nodes shown in the fleet table (the first page, enrollment order); the
/// rest are a link away (`/nodes`).
pub const DASHBOARD_NODES_MAX: usize = 50;
/// Handover entries shown; the whole report is paged on `/handover`.
pub const DASHBOARD_UNRESOLVED_MAX: usize = 100;
/// Quarantine banners shown (each names one node).
pub const DASHBOARD_QUARANTINED_MAX: usize = 20;

fn verdict_cell(v: Verdict) -> String {
    format!("<td class=\"{0}\">{0}</td>", v.as_str())
}

fn short(d: &Option<String>) -> String {
    d.as_deref()
        .map_or_else(|| "-".to_string(), crate::daemon::view::short)
}

/// Everything the dashboard shows, read from one snapshot. Every list is
/// bounded, so the page stays small whatever the fleet size.
pub struct DashboardData {
    /// Nodes in each state (the fleet map's legend).
    pub map_counts: Vec<(NodeState, usize)>,
    /// The `/api/status` summary.
    pub status: StatusDto,
    /// The first page of nodes.
    pub nodes: Page<NodeDto>,
    /// The recorded proof of each node of that page, in the same order.
    pub proofs: Vec<NodeProof>,
    /// The quarantined nodes (at most [`DASHBOARD_QUARANTINED_MAX`]) and
    /// the two peers that presented each one's certificate.
    pub quarantined: Vec<(String, [String; 2])>,
    /// The first [`DASHBOARD_UNRESOLVED_MAX`] handover entries.
    pub unresolved: Vec<Unresolved>,
    /// The latest events, oldest first.
    pub events: Vec<EventDto>,
}

/// Gather the DTOs from a snapshot.
pub fn data(snap: &Snapshot, events: Vec<EventDto>) -> DashboardData {
    let state = &snap.state;
    let roster = &state.roster;
    let nodes = node_page(
        snap,
        &NodeQuery {
            limit: DASHBOARD_NODES_MAX,
            ..NodeQuery::default()
        },
    );
    let proofs = nodes
        .items
        .iter()
        .filter_map(|n| roster.id(&n.name).map(|id| (id, n)))
        .map(|(id, n)| proof::recorded_node_proof(state, id, &n.name))
        .collect();
    let mut unresolved = crate::daemon::view::handover_report(snap);
    unresolved.truncate(DASHBOARD_UNRESOLVED_MAX);
    DashboardData {
        map_counts: super::fleet::counts(snap),
        status: status_dto(snap),
        nodes,
        proofs,
        quarantined: state
            .quarantined
            .iter()
            .take(DASHBOARD_QUARANTINED_MAX)
            .map(|(id, q)| {
                (
                    roster.display_name(*id),
                    [q.first_peer.clone(), q.second_peer.clone()],
                )
            })
            .collect(),
        unresolved,
        events,
    }
}

/// The overview page.
pub fn render(d: &DashboardData) -> String {
    let s = &d.status;
    let mut h = String::new();
    let _ = write!(
        h,
        "<h1>Fleetweft</h1>\n\
         <p>log sequence {} &middot; generation {} &middot; {} UNKNOWN op(s) &middot; {} unresolved</p>\n",
        s.last_sequence
            .map_or_else(|| "none".to_string(), |q| q.to_string()),
        s.generation,
        s.ops.unknown,
        s.unresolved,
    );
    render_banners(&mut h, d);
    render_counts(&mut h, s);
    h.push_str("<h2>Fleet map</h2>\n");
    h.push_str(&super::fleet::legend(&d.map_counts));
    render_fleet(&mut h, d);
    render_rollouts(&mut h, s);
    render_unresolved(&mut h, d);
    render_events(&mut h, &d.events);
    shell("Fleetweft", true, &h)
}

/// The latest events, newest first, each linked to its op or rollout.
fn render_events(h: &mut String, events: &[EventDto]) {
    h.push_str("<h2>Latest events</h2>\n<table id=\"events\"><tr><th>#</th><th>event</th><th>about</th></tr>\n");
    for e in events.iter().rev() {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
            e.sequence,
            escape(&e.text),
            super::events::about(&e.event),
        );
    }
    h.push_str("</table>\n<p><a href=\"/events\">every event</a></p>\n");
}

/// The banners above the counts: the log behind the fleet, storage nearly
/// full, a standby's view, identity conflicts.
fn render_banners(h: &mut String, d: &DashboardData) {
    let s = &d.status;
    // The log is behind the fleet: first and loudest, one banner a node.
    for a in &s.ahead_of_log {
        let _ = writeln!(
            h,
            "<p class=\"quarantined\" id=\"log-behind-{}\">{}</p>",
            escape(&a.node),
            escape(&a.warning)
        );
    }
    if s.nodes_ahead_of_log > s.ahead_of_log.len() {
        let _ = writeln!(
            h,
            "<p class=\"quarantined\">and {} more node(s) ahead of the log: see <a href=\"/handover\">the handover report</a></p>",
            s.nodes_ahead_of_log - s.ahead_of_log.len()
        );
    }
    if let Some(warning) = s.storage.as_ref().and_then(|st| st.warning.as_ref()) {
        let _ = writeln!(
            h,
            "<p class=\"quarantined\" id=\"storage-nearly-full\">{}</p>",
            escape(warning)
        );
    }
    if s.role == crate::daemon::role::Role::Standby {
        let leader = match &s.leader {
            Some(url) => format!("leader is <a href=\"{0}/\">{0}</a>", escape(url)),
            None => "no leader is known right now".to_string(),
        };
        let _ = writeln!(
            h,
            "<p class=\"standby\" id=\"standby\">STANDBY VIEW, {leader}: this hot standby shows the leader's log as of sequence {}; writes go to the leader.</p>",
            s.log_sequence
                .map_or_else(|| "none".to_string(), |q| q.to_string()),
        );
    }
    for (name, [first, second]) in &d.quarantined {
        let _ = writeln!(
            h,
            "<p class=\"quarantined\" id=\"identity-conflict-{0}\">IDENTITY CONFLICT: {0} is quarantined: two live connections presented its certificate, from {1} and {2}. Nothing is sent to it until an operator runs <code>fleetweft node release {0}</code> (after <code>fleetweft node revoke-cert {0}</code> if the certificate was copied).</p>",
            escape(name),
            escape(first),
            escape(second)
        );
    }
}

/// The fleet's counts, the active rollout's progress and where the lists are.
fn render_counts(h: &mut String, s: &StatusDto) {
    let n = &s.nodes;
    let o = &s.ops;
    let _ = writeln!(
        h,
        "<h2>Summary</h2>\n<table id=\"counts\">\
         <tr><th>nodes</th><td>{} enrolled, {} connected, {} retired, {} quarantined</td><td><a href=\"/nodes\">nodes</a> &middot; <a href=\"/nodes?state=unknown\">UNKNOWN</a> &middot; <a href=\"/nodes?state=quarantined\">quarantined</a> &middot; <a href=\"/fleet\">fleet map</a></td></tr>\
         <tr><th>ops</th><td>{} granted, {} holding a slot, <span class=\"{}\">{} UNKNOWN</span>, {} settled ({} passed, {} not), {} failed, {} archived, {} forgotten</td><td><a href=\"/ops\">ops</a> &middot; <a href=\"/ops?state=unknown\">UNKNOWN</a> &middot; <a href=\"/handover\">handover report</a></td></tr></table>",
        n.enrolled, n.connected, n.retired, n.quarantined,
        o.granted, o.holding_slot,
        if o.unknown > 0 { "unknown" } else { "" },
        o.unknown, o.settled, o.passed, o.settled_not_passed, o.failed, o.archived, o.forgotten,
    );
    match &s.active {
        Some(r) => {
            let c = &r.counts;
            let _ = writeln!(
                h,
                "<p id=\"active\">active rollout {0}: {1} &middot; {2} / {3} nodes settled ({4} passed) &middot; wave {5} of {6} &middot; slots {7} / {8} &middot; {9} UNKNOWN &middot; <a href=\"/ops?rollout={0}\">its ops</a> &middot; <a href=\"/rollouts/{0}\">details</a></p>",
                escape(&r.id),
                escape(&rollout_status(r)),
                c.settled, c.plan_nodes, c.passed, c.current_wave, c.waves,
                r.slots_occupied, r.slots_max, c.unknown,
            );
        }
        None => h.push_str("<p id=\"active\">no active rollout</p>\n"),
    }
}

fn rollout_status(r: &RolloutDto) -> String {
    match &r.paused_reason {
        Some(p) => format!("{} ({})", r.status, p),
        None => r.status.clone(),
    }
}

/// The first page of nodes, with a link to the next.
fn render_fleet(h: &mut String, d: &DashboardData) {
    h.push_str("<h2>Fleet</h2>\n<table id=\"fleet\"><tr><th>node</th><th>connected</th><th>confirmed release</th><th>live op</th><th>proof</th><th>page</th></tr>\n");
    for (n, proof) in d
        .nodes
        .items
        .iter()
        .zip(d.proofs.iter().map(Some).chain(std::iter::repeat(None)))
    {
        let live = match &n.live_op {
            Some(op) if NodeState::parse(&n.state) == Some(NodeState::Unknown) => {
                format!(
                    "<td class=\"unknown\">{}</td>",
                    link(&format!("/ops/{}", url_part(op)), &format!("{op} UNKNOWN"))
                )
            }
            Some(op) => format!("<td>{}</td>", op_link(op)),
            None => "<td>-</td>".to_string(),
        };
        let verdict = match proof {
            _ if n.quarantined.is_some() => {
                "<td class=\"quarantined\">QUARANTINED</td>".to_string()
            }
            _ if n.drifted => "<td class=\"drifted\">DRIFTED</td>".to_string(),
            _ if n.retired => "<td>retired</td>".to_string(),
            Some(p) => verdict_cell(p.verdict),
            None => "<td>-</td>".to_string(),
        };
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td><code>{}</code></td>{live}{verdict}<td>{}</td></tr>",
            escape(&n.name),
            if n.connected { "yes" } else { "no" },
            escape(&short(&n.confirmed)),
            link(&format!("/nodes/{}", url_part(&n.name)), "node page"),
        );
    }
    h.push_str("</table>\n");
    if let Some(next) = &d.nodes.next {
        let _ = writeln!(
            h,
            "<p>showing the first {} of {} nodes &middot; <a href=\"/nodes?after={}\">next page</a></p>",
            d.nodes.items.len(),
            d.status.nodes.enrolled,
            escape(&url_part(next))
        );
    }
}

/// The latest rollouts with their progress from the indexes.
fn render_rollouts(h: &mut String, s: &StatusDto) {
    h.push_str("<h2>Rollouts</h2>\n");
    if s.rollouts.is_empty() {
        h.push_str("<p>no rollouts</p>\n");
        return;
    }
    h.push_str("<table id=\"rollouts\"><tr><th>rollout</th><th>release</th><th>status</th><th>progress</th><th>slots (occupied / max, UNKNOWN counted)</th><th>ops</th></tr>\n");
    for r in &s.rollouts {
        let c = &r.counts;
        let unknown = if c.unknown > 0 {
            format!(" ({} UNKNOWN)", c.unknown)
        } else {
            String::new()
        };
        let _ = writeln!(
            h,
            "<tr><td>{12}</td><td><code>{1}</code></td><td>{2}</td><td>{3} / {4} nodes settled, {5} passed, wave {6} of {7}</td>\
             <td{8}>{9} / {10}{unknown}</td><td><a href=\"/ops?rollout={0}\">{11} op(s)</a></td></tr>",
            escape(&url_part(&r.id)),
            escape(&crate::daemon::view::short(&r.release)),
            escape(&rollout_status(r)),
            c.settled, c.plan_nodes, c.passed, c.current_wave, c.waves,
            if c.unknown > 0 { " class=\"unknown\"" } else { "" },
            r.slots_occupied, r.slots_max, c.granted, rollout_link(&r.id),
        );
    }
    h.push_str("</table>\n");
    if s.rollouts_total > s.rollouts.len() {
        let _ = writeln!(
            h,
            "<p>the latest {} of {} rollouts &middot; <a href=\"/rollouts\">all</a></p>",
            s.rollouts.len(),
            s.rollouts_total
        );
    }
}

/// The first entries of the handover report.
fn render_unresolved(h: &mut String, d: &DashboardData) {
    h.push_str("<h2>Unresolved (handover)</h2>\n");
    if d.unresolved.is_empty() {
        h.push_str("<p>nothing unresolved</p>\n");
        return;
    }
    h.push_str("<table id=\"unresolved\"><tr><th>node</th><th>op</th><th>rollout</th><th>phase</th><th>state</th><th>since</th><th>missing evidence</th><th>owner</th><th>review by</th><th>options</th><th>check</th></tr>\n");
    for u in &d.unresolved {
        let state = match &u.unknown_reason {
            Some(r) => format!("<td class=\"unknown\">UNKNOWN ({})</td>", escape(r)),
            None => "<td class=\"waiting\">waiting</td>".to_string(),
        };
        let owner = match &u.owner {
            Some(o) => format!("<td>{}</td>", escape(o)),
            None => "<td class=\"unowned\">unowned</td>".to_string(),
        };
        let list = |items: &[String]| {
            items
                .iter()
                .map(|i| format!("<li>{}</li>", escape(i)))
                .collect::<String>()
        };
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td>{state}<td>{}</td><td><ul>{}</ul></td>{owner}<td>{}</td><td><ul>{}</ul></td><td><code>{}</code></td></tr>",
            node_link(&u.node),
            op_link(&u.op),
            rollout_link(&u.rollout),
            escape(&u.phase),
            escape(&u.since),
            list(&u.missing_evidence),
            escape(u.review_by.as_deref().unwrap_or("not scheduled")),
            list(&u.options),
            escape(&u.check_command),
        );
    }
    h.push_str("</table>\n");
    if d.status.unresolved > d.unresolved.len() {
        let _ = writeln!(
            h,
            "<p>the first {} of {} entries &middot; <a href=\"/handover\">the whole handover report</a></p>",
            d.unresolved.len(),
            d.status.unresolved
        );
    }
}
