//! The operator console (issue #28 item 1): server-rendered HTML pages,
//! one file per page, read from the same view layer as the API and the CLI
//! (`api::view`, its words in `api::view::words`). Every page works
//! without JavaScript, is bounded whatever the fleet size (each list is
//! paged by a `*_PER_PAGE_MAX` constant; every page of a 10,000-node fleet
//! stays under [`PAGE_BYTES_MAX`], tested), escapes every text
//! ([`escape`]), and links only to other pages of the console, never to
//! the API's JSON.
//!
//! The pages:
//!
//! | route | page | file |
//! |---|---|---|
//! | `/` | the overview (counts, the first nodes, rollouts, the handover report's first entries, the latest events), refreshed every 2 s | `main_page.rs` |
//! | `/fleet` | the fleet map: one cell per node, coloured and lettered by state, legend with counts | `fleet.rs` |
//! | `/rollouts`, `/rollouts/{id}` | every rollout; one rollout's plan, waves as progress bars, budgets as gauges, the canary's evidence, each wave's ops paged | `rollout.rs` |
//! | `/nodes`, `/nodes/{name}` | nodes paged and filtered; one node's labels, identity, confirmed release, proof evidence, op history, drift | `node.rs` |
//! | `/ops`, `/ops/{op}`, `/ops/{op}/diagram.svg` | ops paged and filtered; one op's events as a timeline and a sequence diagram, why it is UNKNOWN and what would settle it, its claim | `op.rs` |
//! | `/handover` | the handover report, paged, each entry's three answers | `handover.rs` |
//! | `/events` | the event log, paged, filtered by kind, rollout, op or node | `events.rs` |
//!
//! States are never shown better than the evidence: an op's class comes
//! from its [`OpState`] ([`op_class`]: only `verified` is `ok`), UNKNOWN
//! has its own neutral style (never the green of success or the red of
//! failure), and a rollout holding a slot never reads `completed`.
//! Colour is never the only sign: every state cell carries its word or a
//! letter named in a legend (the Okabe-Ito palette, readable with the
//! common colour-vision deficiencies).
//!
//! Every page follows the log without reloading (`live.rs`: `GET /live`
//! ticks, `GET /live.js` swaps the page's `<main>`); without JavaScript
//! pages read as before.
//!
//! `GET /metrics` (Prometheus) lives here too (`metrics.rs`): it reads the
//! same snapshot.

use super::state::Api;
use super::view::waves::PlanNodeState;
use super::view::{NodeState, OpState};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

mod actions;
mod events;
mod fleet;
mod handover;
pub(crate) mod live;
pub mod main_page;
mod metrics;
mod node;
mod op;
mod rollout;
pub mod session;
#[cfg(test)]
mod tests;

pub use main_page::{
    data, render, DashboardData, DASHBOARD_EVENTS, DASHBOARD_NODES_MAX, DASHBOARD_QUARANTINED_MAX,
    DASHBOARD_UNRESOLVED_MAX,
};
pub use metrics::metrics;

/// Every console page of a 10,000-node fleet stays under this many bytes
/// (tested in `tests.rs`).
pub const PAGE_BYTES_MAX: usize = 200 * 1024;

/// The console's routes (and `/metrics`), documented like the API's.
pub fn routes() -> utoipa_axum::router::OpenApiRouter<Api> {
    main_page::routes()
        .merge(fleet::routes())
        .merge(rollout::routes())
        .merge(node::routes())
        .merge(op::routes())
        .merge(handover::routes())
        .merge(events::routes())
        .merge(live::routes())
        .merge(session::routes())
        .merge(actions::routes())
}

/// A full page of events and a full op timeline, all about `op`: the
/// largest event page and op page [`every_page`] can render.
fn full_feed(
    s: &model::controller::ControllerState,
    op: model::OpId,
) -> (Vec<crate::daemon::view::EventDto>, self::op::Timeline) {
    let events: Vec<_> = (0..self::events::EVENTS_PER_PAGE_MAX as u64)
        .map(|q| {
            let e = model::controller::Event::OpUnknown {
                op,
                reason: model::controller::UnknownReason::Silence,
            };
            crate::daemon::view::event_dto(&s.roster, q, e)
        })
        .collect();
    let timeline = self::op::Timeline {
        events: events
            .iter()
            .cycle()
            .take(self::op::OP_TIMELINE_EVENTS_MAX)
            .cloned()
            .collect(),
        stopped_at: Some(1),
    };
    (events, timeline)
}

/// Every page the console renders of `snap`, by name: the overview, the
/// fleet map, the rollouts, the first rollout (its current wave and its
/// last wave's last page), the canary's and an UNKNOWN node's pages, the
/// first UNKNOWN op's page with a full timeline, the node and op lists,
/// the handover report and a full page of events. Used by the size
/// tests and by `fleetweft-console-bench` (render cost against fleet
/// size). `None` for a state without rollout 0.
pub fn every_page(snap: &crate::daemon::core::Snapshot) -> Option<Vec<(String, String)>> {
    use crate::daemon::view::{node_page, op_page, NodeQuery, OpQuery};
    use model::{NodeId, OpId, RolloutId};
    let s = &snap.state;
    let r = s.rollout(RolloutId(0))?;
    let waves = crate::daemon::view::waves::wave_bounds(r);
    let (last_start, last_end) = waves.last().copied().unwrap_or((0, 0));
    let last_from = last_start.max(last_end.saturating_sub(10));
    let unknown = crate::daemon::view::unknown_ops(s, 1);
    let unknown_op = unknown
        .first()
        .and_then(|o| o.id.strip_prefix("op")?.parse().ok().map(OpId))
        .unwrap_or(OpId(0));
    let unknown_node = s.op_summary(unknown_op).map_or(NodeId(0), |o| o.node);
    let (events, timeline) = full_feed(s, unknown_op);
    let name = |n: NodeId| s.roster.display_name(n);
    let node_page_of = |n: NodeId| {
        let p = proof::recorded_node_proof(s, n, &name(n));
        self::node::render_one(snap, n, &p, None)
    };
    let nodes = node_page(
        snap,
        &NodeQuery {
            limit: self::node::NODES_PER_PAGE_MAX,
            ..NodeQuery::default()
        },
    );
    let ops = op_page(
        s,
        &OpQuery {
            limit: self::op::OPS_PER_PAGE_MAX,
            ..OpQuery::default()
        },
    );
    Some(vec![
        ("overview".into(), render(&data(snap, events.clone()))),
        ("fleet map".into(), self::fleet::render(snap, 0)),
        ("rollouts".into(), self::rollout::render_list(s, 0)),
        (
            "rollout".into(),
            self::rollout::render_one(snap, r, None, None),
        ),
        (
            "rollout, last wave".into(),
            self::rollout::render_one(
                snap,
                r,
                Some(waves.len().saturating_sub(1)),
                Some(last_from),
            ),
        ),
        ("canary node".into(), node_page_of(r.plan.canary)),
        ("UNKNOWN node".into(), node_page_of(unknown_node)),
        (
            "UNKNOWN op".into(),
            self::op::render_one(snap, unknown_op, Some(&timeline)),
        ),
        ("nodes".into(), self::node::render_list(snap, &[], &nodes)),
        ("ops".into(), self::op::render_list(&[], &ops)),
        ("handover".into(), self::handover::render(snap, 0)),
        (
            "events".into(),
            self::events::render(&[], 0, 1_000, &events, Some(100)),
        ),
    ])
}

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

/// Percent-encode `text` for a path segment or a query value (everything
/// but RFC 3986's unreserved characters). The result still goes through
/// [`escape`] inside an attribute.
pub fn url_part(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                out.push(b as char)
            }
            b => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// `<a href="HREF">TEXT</a>`, both escaped.
pub fn link(href: &str, text: &str) -> String {
    format!("<a href=\"{}\">{}</a>", escape(href), escape(text))
}

/// The link to node `name`'s page.
pub fn node_link(name: &str) -> String {
    link(&format!("/nodes/{}", url_part(name)), name)
}

/// The link to op `id`'s page (`-` is no op: plain text).
pub fn op_link(id: &str) -> String {
    if id == "-" {
        return "-".to_string();
    }
    link(&format!("/ops/{}", url_part(id)), id)
}

/// The link to rollout `id`'s page (`-` is no rollout: plain text).
pub fn rollout_link(id: &str) -> String {
    if id == "-" {
        return "-".to_string();
    }
    link(&format!("/rollouts/{}", url_part(id)), id)
}

/// The style every page shares. `.unknown` stays first of its name: the
/// tests read the first rule. The fleet map and the bars use the
/// Okabe-Ito palette, each colour paired with a letter.
pub const STYLE: &str = "body{font-family:sans-serif;margin:1.5em}\
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
.standby{color:#222;background:#cfe3ff;border:2px solid #2b5fa8;padding:.4em;font-weight:bold}
nav{margin-bottom:1em}nav a{margin-right:1em}\
.resolved,.pending,.retired,.idle,.live{color:#222;background:#eee}\
.bar{display:flex;width:40em;height:1.4em;border:1px solid #888;margin:.3em 0}\
.bar span{overflow:hidden;white-space:nowrap;font-size:80%;text-align:center;line-height:1.4em}\
.map{font-family:monospace;font-size:14px;line-height:19px;white-space:nowrap}.map b{font-weight:normal}\
.c-ok{background:#009E73;color:#fff}.c-unknown,.mU{background:#E69F00;color:#000}\
.c-waiting{background:#F0E442;color:#000}.c-bad,.c-quarantined,.mQ{background:#D55E00;color:#fff}\
.c-resolved,.c-drifted,.mD{background:#CC79A7;color:#000}.c-pending{background:#fff;color:#555}\
.c-idle,.mI{background:#56B4E9;color:#000}.c-live,.mL{background:#0072B2;color:#fff}\
.c-retired,.mR{background:#bbb;color:#000}\
meter{width:20em}\
.hist td.b{width:30em}.hist span{display:inline-block;height:1em;background:#0072B2}";

/// The links at the top of every page.
const NAV: &str = "<nav><a href=\"/\">overview</a><a href=\"/fleet\">fleet map</a>\
<a href=\"/rollouts\">rollouts</a><a href=\"/nodes\">nodes</a><a href=\"/ops\">ops</a>\
<a href=\"/handover\">handover report</a><a href=\"/events\">events</a></nav>\n";

/// A whole page: `title` (escaped here) and `body` (already HTML) in
/// `<main id="main">`, which `/live.js` swaps for a fresh copy when the
/// log changes (see `live.rs`). `refresh`: without JavaScript, reload
/// every 2 s (the overview only).
pub fn shell(title: &str, refresh: bool, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">{}<title>{} - Fleetweft</title>\
         <style>{STYLE}</style><script src=\"/live.js\" defer></script></head><body>\n{NAV}<main id=\"main\">\n{body}</main></body></html>\n",
        if refresh {
            "<noscript><meta http-equiv=\"refresh\" content=\"2\"></noscript>"
        } else {
            ""
        },
        escape(title),
    )
}

/// A page answer: `text/html`.
pub fn html(status: StatusCode, page: String) -> Response {
    (
        status,
        [(axum::http::header::CONTENT_TYPE, "text/html; charset=utf-8")],
        page,
    )
        .into_response()
}

/// A page saying why the request was not served, with its status.
pub fn refusal(status: StatusCode, message: &str) -> Response {
    let title = status.canonical_reason().unwrap_or("error");
    let body = format!(
        "<h1>{}</h1>\n<p id=\"error\">{}</p>\n",
        escape(title),
        escape(message)
    );
    html(status, shell(title, false, &body))
}

/// The core stopped: 503, as a page.
pub fn unavailable() -> Response {
    refusal(StatusCode::SERVICE_UNAVAILABLE, "controller core stopped")
}

/// A page's query string as pairs; a query that does not decode is a 400
/// page.
pub type PageQuery =
    Result<axum::extract::Query<Vec<(String, String)>>, axum::extract::rejection::QueryRejection>;

/// Why a page was not served: its status and message, answered as a
/// page ([`refusal`]).
pub struct Refused(pub StatusCode, pub String);

impl IntoResponse for Refused {
    fn into_response(self) -> Response {
        refusal(self.0, &self.1)
    }
}

/// A page's path parameter; one that does not decode is a 400 page.
pub type PagePath = Result<axum::extract::Path<String>, axum::extract::rejection::PathRejection>;

/// The value of `p`, or the 400 page.
pub fn path_value(p: PagePath) -> Result<String, Refused> {
    p.map(|p| p.0).map_err(|e| {
        Refused(
            StatusCode::BAD_REQUEST,
            format!("malformed path: {}", e.body_text()),
        )
    })
}

/// A whole number parameter (empty is absent), or the 400 page.
pub fn number_param(pairs: &[(String, String)], key: &str) -> Result<Option<usize>, Refused> {
    match param(pairs, key).filter(|v| !v.is_empty()) {
        None => Ok(None),
        Some(v) => v.parse().map(Some).map_err(|_| {
            Refused(
                StatusCode::BAD_REQUEST,
                format!("parameter `{key}`: {v:?} is not a whole number"),
            )
        }),
    }
}

/// The pairs of `q`, or the 400 page.
pub fn pairs(q: PageQuery) -> Result<Vec<(String, String)>, Refused> {
    q.map(|q| q.0).map_err(|e| {
        Refused(
            StatusCode::BAD_REQUEST,
            format!("malformed query string: {}", e.body_text()),
        )
    })
}

/// The one value of parameter `key`, if given.
pub fn param<'a>(pairs: &'a [(String, String)], key: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// The class of an op in `state`: only a verified op is `ok`; UNKNOWN is
/// `unknown` (neutral), an unsettled phase `waiting`, an outcome that did
/// not pass `bad`, an operator's resolution `resolved`.
pub fn op_class(state: OpState) -> &'static str {
    match state {
        OpState::Verified => "ok",
        OpState::Unknown => "unknown",
        OpState::Granted | OpState::Decided | OpState::Restoring => "waiting",
        OpState::RolledBack | OpState::NotApplied => "bad",
        OpState::Resolved => "resolved",
    }
}

/// The class of an op DTO, by its state word ([`op_class`]); a word no
/// state has is `unknown` (neutral, never `ok`).
pub fn op_dto_class(o: &super::view::OpDto) -> &'static str {
    OpState::ALL
        .into_iter()
        .find(|s| s.as_str() == o.state)
        .map_or("unknown", op_class)
}

/// The class of a plan node in `state` ([`op_class`], `pending` when not
/// granted).
pub fn plan_class(state: PlanNodeState) -> &'static str {
    match state {
        PlanNodeState::NotGranted => "pending",
        PlanNodeState::Op(s) => op_class(s),
    }
}

/// The letter a bar segment or a map cell carries next to its colour, so
/// the state reads without colour (named in each legend).
pub fn plan_letter(state: PlanNodeState) -> char {
    match state {
        PlanNodeState::NotGranted => '.',
        PlanNodeState::Op(s) => match s {
            OpState::Unknown => 'U',
            OpState::Granted => 'G',
            OpState::Decided => 'D',
            OpState::Restoring => 'S',
            OpState::Verified => 'V',
            OpState::RolledBack => 'B',
            OpState::NotApplied => 'N',
            OpState::Resolved => 'R',
        },
    }
}

/// The class of a node in `state`: UNKNOWN neutral, drifted and
/// quarantined their own; idle, live and retired plain (a node's
/// verdict is its proof's, on its page).
pub fn node_class(state: NodeState) -> &'static str {
    match state {
        NodeState::Idle => "idle",
        NodeState::Live => "live",
        NodeState::Unknown => "unknown",
        NodeState::Drifted => "drifted",
        NodeState::Quarantined => "quarantined",
        NodeState::Retired => "retired",
    }
}

/// The letter of a node state on the fleet map.
pub fn node_letter(state: NodeState) -> char {
    match state {
        NodeState::Idle => 'I',
        NodeState::Live => 'L',
        NodeState::Unknown => 'U',
        NodeState::Drifted => 'D',
        NodeState::Quarantined => 'Q',
        NodeState::Retired => 'R',
    }
}

/// `<span class="CLASS">WORD</span>`: a state badge (word escaped).
pub fn badge(class: &str, word: &str) -> String {
    format!("<span class=\"{class}\">{}</span>", escape(word))
}

/// "previous" / "next" links of a paged list; `None` hides one.
pub fn pager(first: Option<String>, next: Option<String>) -> String {
    let mut out = String::from("<p class=\"pager\">");
    if let Some(href) = first {
        out.push_str(&link(&href, "first page"));
        out.push(' ');
    }
    match next {
        Some(href) => out.push_str(&link(&href, "next page")),
        None => out.push_str("end of the list"),
    }
    out.push_str("</p>\n");
    out
}

/// A query string from `pairs` whose value is given (`?k=v&...`, or empty).
pub fn query(pairs: &[(&str, Option<&str>)]) -> String {
    let parts: Vec<String> = pairs
        .iter()
        .filter_map(|(k, v)| v.map(|v| format!("{k}={}", url_part(v))))
        .collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!("?{}", parts.join("&"))
    }
}
