//! The read-only dashboard (`GET /`) and the Prometheus metrics
//! (`GET /metrics`). Both read the same DTOs as the API: [`status_dto`],
//! [`crate::proof`]'s node proofs and handover report. Server-rendered HTML,
//! refreshed every 2 s; every text is escaped.
//!
//! UNKNOWN has its own neutral style (class `unknown`: grey background,
//! amber text, dashed border), never the green of success or the red of
//! failure: an UNKNOWN op is neither.
//!
//! A drifted node (its latest observation contradicts its confirmed
//! release) has its own style too (class `drifted`: white on purple), never
//! the green of a verified node. The dashboard's proofs are the recorded
//! ones (`--cached`): a page refreshed every 2 s must not read every node
//! back.

use super::core::Snapshot;
use super::error::ApiError;
use super::state::Api;
use super::view::{
    node_page, status_dto, words, NodeDto, NodeQuery, NodeState, OpState, Page, RolloutDto,
    StatusDto,
};
use super::view::{ErrorBody, EventDto};
use api::report::Unresolved;
use axum::extract::State;
use axum::response::{Html, IntoResponse, Response};
use model::controller::{OpPhase, Outcome};
use proof::{NodeProof, Verdict};
use std::fmt::Write;
use std::time::SystemTime;

/// The dashboard's routes (`/` and `/metrics`), documented like the API's.
pub fn routes() -> utoipa_axum::router::OpenApiRouter<Api> {
    utoipa_axum::router::OpenApiRouter::new()
        .routes(utoipa_axum::routes!(dashboard))
        .routes(utoipa_axum::routes!(metrics_text))
}

/// `GET /`: the dashboard.
#[utoipa::path(get, path = "/", tag = "dashboard",
    responses(
        (status = 200, description = "the dashboard (HTML, refreshes every 2 s)", body = String, content_type = "text/html"),
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
            .map(|(sequence, event)| super::view::event_dto(&roster, sequence, event))
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
        metrics(&snap, std::time::SystemTime::now()) + &api.releases.served.metrics(),
    )
        .into_response()
}

/// Events shown on the dashboard.
pub const DASHBOARD_EVENTS: usize = 20;
/// Nodes shown in the fleet table (the first page, enrollment order); the
/// rest are a link away (`/api/nodes`).
pub const DASHBOARD_NODES_MAX: usize = 50;
/// Handover entries shown; the whole report is `/api/unresolved`.
pub const DASHBOARD_UNRESOLVED_MAX: usize = 100;
/// Quarantine banners shown (each names one node).
pub const DASHBOARD_QUARANTINED_MAX: usize = 20;

/// Escape text for HTML element content and quoted attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = "body{font-family:sans-serif;margin:1.5em}\
table{border-collapse:collapse;margin-bottom:1.5em}\
td,th{border:1px solid #ccc;padding:.25em .6em;text-align:left;vertical-align:top}\
code{font-size:90%}\
.verified,.ok{color:#fff;background:#2a7a2a}\
.failed,.bad{color:#fff;background:#b02020}\
.unknown{color:#7a4b00;background:#e4e4e4;border:1px dashed #888}\
.stale,.partially-verified,.unverified,.waiting{color:#333;background:#f3e3b5}\
.unowned{font-weight:bold;text-transform:uppercase}\
.drifted{color:#fff;background:#6a3d9a;font-weight:bold}
.quarantined{color:#fff;background:#b00020;font-weight:bold}
.standby{color:#222;background:#cfe3ff;border:2px solid #2b5fa8;padding:.4em;font-weight:bold}";

fn verdict_cell(v: Verdict) -> String {
    format!("<td class=\"{0}\">{0}</td>", v.as_str())
}

fn short(d: &Option<String>) -> String {
    d.as_deref()
        .map_or_else(|| "-".to_string(), super::view::short)
}

/// Everything the dashboard shows, read from one snapshot. Every list is
/// bounded, so the page stays small whatever the fleet size.
pub struct DashboardData {
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
    let mut unresolved = super::view::handover_report(snap);
    unresolved.truncate(DASHBOARD_UNRESOLVED_MAX);
    DashboardData {
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

/// The dashboard page.
pub fn render(d: &DashboardData) -> String {
    let s = &d.status;
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"refresh\" content=\"2\"><title>Fleetweft</title>\
         <style>{STYLE}</style></head><body>\n<h1>Fleetweft</h1>\n\
         <p>log sequence {} &middot; generation {} &middot; {} UNKNOWN op(s) &middot; {} unresolved</p>\n",
        s.last_sequence
            .map_or_else(|| "none".to_string(), |q| q.to_string()),
        s.generation,
        s.ops.unknown,
        s.unresolved,
    );
    render_banners(&mut h, d);
    render_counts(&mut h, s);
    render_fleet(&mut h, d);
    render_rollouts(&mut h, s);
    render_unresolved(&mut h, d);
    h.push_str("<h2>Latest events</h2>\n<table id=\"events\"><tr><th>#</th><th>event</th></tr>\n");
    for e in d.events.iter().rev() {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td></tr>",
            e.sequence,
            escape(&e.text)
        );
    }
    h.push_str("</table>\n</body></html>\n");
    h
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
            "<p class=\"quarantined\">and {} more node(s) ahead of the log: see <a href=\"/api/unresolved\">the handover report</a></p>",
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
         <tr><th>nodes</th><td>{} enrolled, {} connected, {} retired, {} quarantined</td><td><a href=\"/api/nodes?limit=100\">nodes</a> &middot; <a href=\"/api/nodes?state=unknown\">UNKNOWN</a> &middot; <a href=\"/api/nodes?state=quarantined\">quarantined</a></td></tr>\
         <tr><th>ops</th><td>{} granted, {} holding a slot, <span class=\"{}\">{} UNKNOWN</span>, {} settled ({} passed, {} not), {} failed, {} archived, {} forgotten</td><td><a href=\"/api/ops?limit=100\">ops</a> &middot; <a href=\"/api/ops?state=unknown\">UNKNOWN</a> &middot; <a href=\"/api/unresolved\">handover report</a></td></tr></table>",
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
                "<p id=\"active\">active rollout {0}: {1} &middot; {2} / {3} nodes settled ({4} passed) &middot; wave {5} of {6} &middot; slots {7} / {8} &middot; {9} UNKNOWN &middot; <a href=\"/api/ops?rollout={0}\">its ops</a> &middot; <a href=\"/api/rollouts/{0}\">details</a></p>",
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
    h.push_str("<h2>Fleet</h2>\n<table id=\"fleet\"><tr><th>node</th><th>connected</th><th>confirmed release</th><th>live op</th><th>proof</th></tr>\n");
    for (n, proof) in d
        .nodes
        .items
        .iter()
        .zip(d.proofs.iter().map(Some).chain(std::iter::repeat(None)))
    {
        let live = match &n.live_op {
            Some(op) if NodeState::parse(&n.state) == Some(NodeState::Unknown) => {
                format!("<td class=\"unknown\">{} UNKNOWN</td>", escape(op))
            }
            Some(op) => format!("<td>{}</td>", escape(op)),
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
            "<tr><td>{}</td><td>{}</td><td><code>{}</code></td>{live}{verdict}</tr>",
            escape(&n.name),
            if n.connected { "yes" } else { "no" },
            escape(&short(&n.confirmed)),
        );
    }
    h.push_str("</table>\n");
    if let Some(next) = &d.nodes.next {
        let _ = writeln!(
            h,
            "<p>showing the first {} of {} nodes &middot; <a href=\"/api/nodes?after={}\">next page</a></p>",
            d.nodes.items.len(),
            d.status.nodes.enrolled,
            escape(next)
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
            "<tr><td>{0}</td><td><code>{1}</code></td><td>{2}</td><td>{3} / {4} nodes settled, {5} passed, wave {6} of {7}</td>\
             <td{8}>{9} / {10}{unknown}</td><td><a href=\"/api/ops?rollout={0}\">{11} op(s)</a></td></tr>",
            escape(&r.id),
            escape(&super::view::short(&r.release)),
            escape(&rollout_status(r)),
            c.settled, c.plan_nodes, c.passed, c.current_wave, c.waves,
            if c.unknown > 0 { " class=\"unknown\"" } else { "" },
            r.slots_occupied, r.slots_max, c.granted,
        );
    }
    h.push_str("</table>\n");
    if s.rollouts_total > s.rollouts.len() {
        let _ = writeln!(
            h,
            "<p>the latest {} of {} rollouts &middot; <a href=\"/api/rollouts\">all</a></p>",
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
            escape(&u.node),
            escape(&u.op),
            escape(&u.rollout),
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
            "<p>the first {} of {} entries &middot; <a href=\"/api/unresolved\">the whole handover report</a></p>",
            d.unresolved.len(),
            d.status.unresolved
        );
    }
}

/// [`metrics`]: drifted, ahead-of-log and quarantined nodes, identity
/// conflicts and revoked certificates.
fn metrics_nodes(m: &mut String, snap: &Snapshot, s: &StatusDto) {
    m.push_str("# HELP fleetweft_nodes_drifted Nodes whose latest observation contradicts their confirmed release.\n# TYPE fleetweft_nodes_drifted gauge\n");
    let _ = writeln!(
        m,
        "fleetweft_nodes_drifted {}",
        snap.state
            .nodes
            .iter()
            .filter(|(id, r)| r.drift().is_some() && !snap.state.roster.is_retired(**id))
            .count()
    );
    let _ = writeln!(
        m,
        "# HELP {0} Nodes whose agent reported a higher generation than the controller's log has reached (the log is behind the fleet).\n# TYPE {0} gauge\n{0} {1}",
        super::view::ahead::METRIC,
        s.nodes_ahead_of_log
    );
    m.push_str("# HELP fleetweft_nodes_quarantined Nodes quarantined after an identity conflict (nothing is sent to them until an operator releases them).\n# TYPE fleetweft_nodes_quarantined gauge\n");
    let _ = writeln!(
        m,
        "fleetweft_nodes_quarantined {}",
        snap.state.quarantined.len()
    );
    for (node, q) in &snap.state.quarantined {
        let _ = writeln!(
            m,
            "fleetweft_node_quarantined{{node=\"{}\",first_peer=\"{}\",second_peer=\"{}\"}} 1",
            label(&snap.state.roster.display_name(*node)),
            label(&q.first_peer),
            label(&q.second_peer)
        );
    }
    m.push_str("# HELP fleetweft_identity_conflicts_total Identity conflicts detected (NodeQuarantined entries in the log).\n# TYPE fleetweft_identity_conflicts_total counter\n");
    let _ = writeln!(
        m,
        "fleetweft_identity_conflicts_total {}",
        snap.identity_conflicts
    );
    m.push_str("# HELP fleetweft_certs_revoked Revoked node certificates the handshake refuses.\n# TYPE fleetweft_certs_revoked gauge\n");
    let _ = writeln!(
        m,
        "fleetweft_certs_revoked {}",
        snap.state.revoked_certs.len()
    );
}

/// [`metrics`]: each rollout's slots, occupied and budgeted.
fn metrics_slots(m: &mut String, state: &model::controller::ControllerState) {
    let rollouts = super::view::rollout_dtos(state);
    m.push_str("# HELP fleetweft_slots_occupied Slots held by a rollout's ops (UNKNOWN ops count).\n# TYPE fleetweft_slots_occupied gauge\n");
    for r in &rollouts {
        let _ = writeln!(
            m,
            "fleetweft_slots_occupied{{rollout=\"{}\"}} {}",
            label(&r.id),
            r.slots_occupied
        );
    }
    m.push_str(
        "# HELP fleetweft_slots_max A rollout's slot budget.\n# TYPE fleetweft_slots_max gauge\n",
    );
    for r in &rollouts {
        let _ = writeln!(
            m,
            "fleetweft_slots_max{{rollout=\"{}\"}} {}",
            label(&r.id),
            r.slots_max
        );
    }
}

/// [`metrics`]: ops by state.
fn metrics_ops(m: &mut String, snap: &Snapshot, s: &StatusDto) {
    // Each op counted once: `unknown` if UNKNOWN and still holding its slot,
    // else by phase. Only unsettled ops are walked (the hot ones holding a
    // slot); every other op ever granted is settled. The label words are
    // the view layer's (`OpState` for unknown, the phase words otherwise).
    let unknown = OpState::Unknown.as_str();
    let phases = [
        OpPhase::Granted,
        OpPhase::Decided,
        OpPhase::Restoring,
        OpPhase::Settled(Outcome::Verified),
    ];
    let mut counts: Vec<(&str, usize)> = std::iter::once(unknown)
        .chain(phases.map(words::op_phase))
        .map(|w| (w, 0))
        .collect();
    let mut unsettled = 0;
    for o in snap.state.ops.values().filter(|o| o.occupies_slot()) {
        let word = match OpState::of(o) {
            OpState::Unknown => unknown,
            _ => words::op_phase(o.phase),
        };
        if let Some(c) = counts.iter_mut().find(|(w, _)| *w == word) {
            c.1 += 1;
        }
        unsettled += 1;
    }
    if let Some(c) = counts.iter_mut().find(|(w, _)| *w == words::SETTLED) {
        c.1 += s.ops.granted.saturating_sub(unsettled);
    }
    m.push_str("# HELP fleetweft_ops Ops by state (each op once; unknown takes precedence over its phase).\n# TYPE fleetweft_ops gauge\n");
    for (state, n) in counts {
        let _ = writeln!(m, "fleetweft_ops{{state=\"{state}\"}} {n}");
    }
}

/// Prometheus text exposition of the snapshot.
pub fn metrics(snap: &Snapshot, now: SystemTime) -> String {
    let s = status_dto(snap);
    let mut m = String::new();
    metrics_nodes(&mut m, snap, &s);
    metrics_slots(&mut m, &snap.state);
    metrics_ops(&mut m, snap, &s);
    let oldest = snap
        .state
        .ops
        .values()
        .filter(|o| o.is_unknown())
        .filter_map(|o| snap.unknown_since.get(&o.id))
        .min()
        .map_or(0.0, |t| {
            now.duration_since(*t).map_or(0.0, |d| d.as_secs_f64())
        });
    let _ = write!(
        m,
        "# HELP fleetweft_oldest_unknown_op_age_seconds Age of the oldest UNKNOWN op (0 if none), by the controller's wall clock since it became UNKNOWN (or since the daemon started).\n# TYPE fleetweft_oldest_unknown_op_age_seconds gauge\nfleetweft_oldest_unknown_op_age_seconds {oldest:.3}\n"
    );
    let _ = write!(
        m,
        "# HELP fleetweft_log_sequence Last durable event log sequence (-1 if empty).\n# TYPE fleetweft_log_sequence gauge\nfleetweft_log_sequence {}\n",
        s.last_sequence.map_or(-1, |q| q as i64)
    );
    let _ = write!(
        m,
        "# HELP fleetweft_agents_connected Agents with a live connection.\n# TYPE fleetweft_agents_connected gauge\nfleetweft_agents_connected {}\n",
        snap.connected.len()
    );
    let b = snap.batches;
    let _ = write!(
        m,
        "# HELP fleetweft_batches_total Durable batches the core appended (one flush each) since the daemon started.\n# TYPE fleetweft_batches_total counter\nfleetweft_batches_total {}\n# HELP fleetweft_batch_inputs_total Inputs the core handled in its batches.\n# TYPE fleetweft_batch_inputs_total counter\nfleetweft_batch_inputs_total {}\n# HELP fleetweft_events_per_flush Events per durable batch since the daemon started (0 before the first).\n# TYPE fleetweft_events_per_flush gauge\nfleetweft_events_per_flush {:.2}\n# HELP fleetweft_deadlines_armed Op deadlines armed (one per op holding a slot).\n# TYPE fleetweft_deadlines_armed gauge\nfleetweft_deadlines_armed {}\n",
        b.batches,
        b.inputs,
        if b.batches == 0 { 0.0 } else { b.events as f64 / b.batches as f64 },
        snap.deadlines_armed
    );
    let _ = write!(
        m,
        "# HELP fleetweft_nodes Enrolled nodes that are not retired.\n# TYPE fleetweft_nodes gauge\nfleetweft_nodes {}\n",
        snap.state.roster.iter().filter(|(_, e)| !e.retired).count()
    );
    m.push_str(&api::view::storage::metrics(snap.storage));
    m
}

fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::{data, escape, render, DashboardData};
    use crate::daemon::view::fixture::fleet;
    use crate::daemon::view::{
        node_page, op_page, NodeDto, NodeQuery, OpQuery, Page, PAGE_LIMIT_MAX,
    };

    fn node(drifted: bool) -> NodeDto {
        NodeDto {
            name: "node-a".into(),
            connected: true,
            confirmed: Some("ab".repeat(32)),
            reported_serving: None,
            live_op: None,
            drifted,
            observed: None,
            quarantined: None,
            labels: Default::default(),
            public: "127.0.0.1:8080".into(),
            retired: false,
            state: if drifted { "drifted" } else { "idle" }.into(),
            arch: Some("x86_64".into()),
            os: Some("linux".into()),
        }
    }

    fn page(drifted: bool) -> String {
        let snap = fleet(1, 1, 0, 0);
        let proof = proof::recorded_node_proof(
            &model::controller::ControllerState::default(),
            model::NodeId(0),
            "node-a",
        );
        let d = data(&snap, vec![]);
        render(&DashboardData {
            nodes: Page {
                items: vec![node(drifted)],
                next: None,
                total: Some(1),
            },
            proofs: vec![proof::NodeProof {
                verdict: proof::Verdict::Verified,
                ..proof
            }],
            ..d
        })
    }

    /// A standby's page says so and names the leader; a leader's does not.
    #[test]
    fn a_standby_view_shows_its_banner() {
        let snap = fleet(1, 1, 0, 0);
        let mut d = data(&snap, vec![]);
        assert!(!render(&d).contains("id=\"standby\""));
        d.status.role = crate::daemon::role::Role::Standby;
        d.status.log_sequence = Some(41);
        d.status.leader = Some("http://10.0.0.2:7800".into());
        let html = render(&d);
        assert!(
            html.contains("STANDBY VIEW, leader is <a href=\"http://10.0.0.2:7800/\">"),
            "{html}"
        );
        assert!(html.contains("as of sequence 41"), "{html}");
    }

    /// At 80% of the storage quota the page shows the view layer's
    /// warning, and `/metrics` both gauges; below it, no banner.
    #[test]
    fn a_nearly_full_storage_shows_its_banner_and_gauges() {
        let mut snap = fleet(1, 1, 0, 0);
        let quota = 1_000_000_000;
        snap.storage = Some(api::view::storage::StorageUse {
            bytes: quota / 2,
            quota_bytes: Some(quota),
        });
        assert!(!render(&data(&snap, vec![])).contains("storage-nearly-full"));
        let m = super::metrics(&snap, std::time::SystemTime::now());
        assert!(m.contains("\nfleetweft_storage_bytes 500000000\n"), "{m}");
        assert!(
            m.contains("\nfleetweft_storage_quota_bytes 1000000000\n"),
            "{m}"
        );
        snap.storage = Some(api::view::storage::StorageUse {
            bytes: quota * 9 / 10,
            quota_bytes: Some(quota),
        });
        let html = render(&data(&snap, vec![]));
        let warning = api::view::storage::sentence(quota * 9 / 10, quota);
        assert!(
            html.contains(&format!(
                "<p class=\"quarantined\" id=\"storage-nearly-full\">{}</p>",
                escape(&warning)
            )),
            "{html}"
        );
    }

    /// A drifted node has its own style, never the green of a verified one.
    #[test]
    fn a_drifted_node_is_shown_drifted_not_verified() {
        let drifted = page(true);
        assert!(
            drifted.contains("<td class=\"drifted\">DRIFTED</td>"),
            "{drifted}"
        );
        assert!(!drifted.contains("<td class=\"verified\">"), "{drifted}");
        let fine = page(false);
        assert!(
            fine.contains("<td class=\"verified\">verified</td>"),
            "{fine}"
        );
        assert!(!fine.contains("DRIFTED"));
    }

    /// A node ahead of the log: a banner on the dashboard (the view's
    /// warning) and the `/metrics` gauge; none without one.
    #[test]
    fn the_log_behind_the_fleet_is_a_banner_and_a_gauge() {
        let mut snap = fleet(2, 1, 0, 0);
        let now = std::time::SystemTime::now();
        let metric = crate::daemon::view::ahead::METRIC;
        assert!(super::metrics(&snap, now).contains(&format!("\n{metric} 0\n")));
        assert!(!render(&data(&snap, vec![])).contains("log-behind-"));
        let log = snap.state.generation.0;
        snap.ahead_of_log
            .insert(model::NodeId(1), model::Generation(log + 1));
        let m = super::metrics(&snap, now);
        assert!(
            m.contains(&format!("# TYPE {metric} gauge\n{metric} 1\n")),
            "{m}"
        );
        let html = render(&data(&snap, vec![]));
        let warning = crate::daemon::view::ahead::sentence("n1", log + 1, log);
        assert!(
            html.contains(&format!(
                "<p class=\"quarantined\" id=\"log-behind-n1\">{}</p>",
                escape(&warning)
            )),
            "{html}"
        );
    }

    /// Most bytes the dashboard may render for a 10,000-node fleet.
    const DASHBOARD_BYTES_MAX: usize = 200 * 1024;

    /// 10,000 enrolled nodes and a rollout over all of them (500 slots,
    /// 300 ops verified, 150 UNKNOWN): the dashboard stays under 200 KB,
    /// shows the counts and the bounded handover list, and every page
    /// endpoint's reply is bounded by its limit.
    #[test]
    fn the_dashboard_of_ten_thousand_nodes_stays_small() {
        let snap = fleet(10_000, 500, 300, 150);
        let html = render(&data(&snap, vec![]));
        eprintln!("dashboard of 10,000 nodes: {} bytes", html.len());
        assert!(
            html.len() < DASHBOARD_BYTES_MAX,
            "{} bytes for 10,000 nodes",
            html.len()
        );
        assert!(html.contains("10000 enrolled"), "the counts are shown");
        assert!(html.contains("150 UNKNOWN"), "the UNKNOWN count is shown");
        assert!(html.contains("<a href=\"/api/nodes?after=n49\">next page</a>"));
        assert!(
            html.contains("the first 100 of"),
            "the handover list is bounded"
        );
        // The summary behind /api/status is bounded too.
        let summary = serde_json::to_vec(&crate::daemon::view::status_dto(&snap)).expect("json");
        eprintln!("/api/status of 10,000 nodes: {} bytes", summary.len());
        assert!(
            summary.len() < 64 * 1024,
            "{} bytes of status",
            summary.len()
        );
        for limit in [1, 100, PAGE_LIMIT_MAX] {
            let nodes = node_page(
                &snap,
                &NodeQuery {
                    limit,
                    ..NodeQuery::default()
                },
            );
            assert_eq!(nodes.items.len(), limit);
            let ops = op_page(
                &snap.state,
                &OpQuery {
                    limit,
                    ..OpQuery::default()
                },
            );
            assert_eq!(ops.items.len(), limit.min(snap.state.ops_granted()));
            let json = serde_json::to_vec(&ops).expect("json").len()
                + serde_json::to_vec(&nodes).expect("json").len();
            // A page's size follows its limit, not the fleet.
            assert!(json < limit * 2_048, "{json} bytes for {limit} items");
        }
    }

    #[test]
    fn escape_covers_markup_and_quotes() {
        assert_eq!(
            escape(r#"<a href="x">&'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;"
        );
    }
}
