//! `GET /events`: the event log, paged, filtered by query parameters
//! (`kind`, `rollout`, `op`, `node`; `from` the first sequence). Without a
//! filter it shows the latest page; with one it reads forward from `from`
//! (default 0), examining at most [`EVENTS_SCAN_MAX`] entries a page, and
//! links to the next page from where it stopped, as the API's filtered
//! pages do. Each event is in the view's words (`event_dto`'s text, the
//! kind word of `words::event_kind`).

use super::{
    escape, html, op_link, pager, pairs, param, query, refusal, rollout_link, shell, PageQuery,
};
use crate::daemon::state::Api;
use crate::daemon::view::{event_dto, event_op, event_rollout, words, EventDto};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use model::controller::{ControllerState, Event};
use model::{NodeId, OpId, RolloutId};
use std::fmt::Write;

/// Events one page shows.
pub const EVENTS_PER_PAGE_MAX: usize = 100;
/// Log entries one filtered page examines at most.
pub const EVENTS_SCAN_MAX: usize = 5_000;
/// Log entries read per request to the core while scanning.
const SCAN_PAGE_EVENTS: usize = 500;

/// The events page's route.
pub fn routes() -> utoipa_axum::router::OpenApiRouter<Api> {
    utoipa_axum::router::OpenApiRouter::new().routes(utoipa_axum::routes!(events))
}

/// What the page filters on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EventFilter {
    /// Only events of this kind word.
    pub kind: Option<&'static str>,
    /// Only this rollout's events (its own and its ops').
    pub rollout: Option<RolloutId>,
    /// Only this op's events.
    pub op: Option<OpId>,
    /// Only events naming this node (its ops' included).
    pub node: Option<NodeId>,
}

impl EventFilter {
    fn is_empty(&self) -> bool {
        *self == EventFilter::default()
    }

    /// Whether `event` passes every filter given.
    pub fn matches(&self, s: &ControllerState, event: &Event) -> bool {
        let op = event_op(event);
        let op_rollout = op.and_then(|o| s.op_summary(o)).map(|o| o.rollout);
        self.kind.is_none_or(|k| words::event_kind(event) == k)
            && self.op.is_none_or(|o| op == Some(o))
            && self
                .rollout
                .is_none_or(|r| event_rollout(event).or(op_rollout) == Some(r))
            && self.node.is_none_or(|n| event_node(s, event) == Some(n))
    }
}

/// The node an event names: its own `node` field, or its op's node.
fn event_node(s: &ControllerState, event: &Event) -> Option<NodeId> {
    if let Some(node) = event_op(event)
        .and_then(|o| s.op_summary(o))
        .map(|o| o.node)
    {
        return Some(node);
    }
    // The event's serialized fields: `{"Kind": {"node": N, ...}}`.
    let value = serde_json::to_value(event).ok()?;
    let fields = value.as_object()?.values().next()?;
    let n = fields.get("node")?.as_u64()?;
    u32::try_from(n).ok().map(NodeId)
}

/// Parse the page's filters; the error names the parameter.
pub fn parse_filter(
    s: &ControllerState,
    pairs: &[(String, String)],
) -> Result<EventFilter, (StatusCode, String)> {
    let bad = |m: String| (StatusCode::BAD_REQUEST, m);
    let mut f = EventFilter::default();
    for (k, v) in pairs {
        match k.as_str() {
            "kind" if !v.is_empty() => {
                f.kind = Some(
                    words::EVENT_KINDS
                        .iter()
                        .copied()
                        .find(|w| w == v)
                        .ok_or_else(|| {
                            bad(format!(
                                "parameter `kind`: {v:?} is not an event kind, expected one of {}",
                                words::EVENT_KINDS.join(", ")
                            ))
                        })?,
                )
            }
            "rollout" if !v.is_empty() => {
                f.rollout = Some(crate::daemon::view::parse_rollout_id(v).ok_or_else(|| {
                    bad(format!(
                        "parameter `rollout`: {v:?} is not a rollout id such as r0"
                    ))
                })?)
            }
            "op" if !v.is_empty() => {
                f.op = Some(
                    v.strip_prefix("op")
                        .and_then(|n| n.parse().ok())
                        .map(OpId)
                        .ok_or_else(|| {
                            bad(format!("parameter `op`: {v:?} is not an op id such as op0"))
                        })?,
                )
            }
            "node" if !v.is_empty() => {
                f.node = Some(s.roster.id(v).ok_or_else(|| {
                    (
                        StatusCode::NOT_FOUND,
                        format!("parameter `node`: no node {v} is enrolled"),
                    )
                })?)
            }
            "kind" | "rollout" | "op" | "node" | "from" => {}
            _ => {
                return Err(bad(format!(
                    "parameter `{k}`: unknown, expected one of kind, rollout, op, node, from"
                )))
            }
        }
    }
    Ok(f)
}

/// `GET /events`'s query, as documented. Empty is absent: the filter
/// form's "any". A test holds `kind`'s pattern to `words::EVENT_rollout-started|rollout-superseded|rollout-paused|rollout-resumed|rollout-approved|rollout-completed|op-granted|commit-decided|commit-replayed|report-recorded|probe-recorded|restore-requested|op-unknown|op-settled|operator-observed|op-claimed|node-hello|late-report-ignored|stale-command-rejected|foreign-message-ignored|roll-back-ordered|node-observed|rollout-ended|node-quarantined|node-released|cert-revoked|node-enrolled|node-labeled|node-retired|rollout-policy-set|rollout-followers-added|forgotten-op-ignored|node-platform|rollout-arches-set|config-set|rollout-configured|acted|operator-added|credential-rotated|operator-revoked`.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // Declares the query for the document; never built.
struct EventPageParams {
    /// The first sequence to read (default: the latest page without a
    /// filter, 0 with one).
    #[param(pattern = "^(|0|[1-9][0-9]{0,17})$")]
    from: Option<String>,
    /// Only events of this kind.
    #[param(
        pattern = "^(|rollout-started|rollout-superseded|rollout-paused|rollout-resumed|rollout-approved|rollout-completed|op-granted|commit-decided|commit-replayed|report-recorded|probe-recorded|restore-requested|op-unknown|op-settled|operator-observed|op-claimed|node-hello|late-report-ignored|stale-command-rejected|foreign-message-ignored|roll-back-ordered|node-observed|rollout-ended|node-quarantined|node-released|cert-revoked|node-enrolled|node-labeled|node-retired|rollout-policy-set|rollout-followers-added|forgotten-op-ignored|node-platform|rollout-arches-set|config-set|rollout-configured|acted|operator-added|credential-rotated|operator-revoked)$"
    )]
    kind: Option<String>,
    /// Only this rollout's events (its own and its ops').
    #[param(pattern = "^(|r[0-9]{1,9})$")]
    rollout: Option<String>,
    /// Only this op's events.
    #[param(pattern = "^(|op[0-9]{1,9})$")]
    op: Option<String>,
    /// Only events naming this node (its ops' included); 404 when no node
    /// has the name.
    #[param(pattern = "^(|[a-z0-9-]{1,63})$")]
    node: Option<String>,
}

/// `GET /events`: the event log, paged and filtered.
#[utoipa::path(get, path = "/events", tag = "console",
    params(EventPageParams),
    responses(
        (status = 200, description = "a page of events (HTML)", body = String, content_type = "text/html"),
        (status = 400, description = "a bad parameter, named (HTML)", body = String, content_type = "text/html"),
        (status = 404, description = "no such node (HTML)", body = String, content_type = "text/html"),
(status = 503, description = "the controller core stopped (HTML)", body = String, content_type = "text/html"),
    ))]
async fn events(State(api): State<Api>, q: PageQuery) -> Response {
    let pairs = match pairs(q) {
        Ok(p) => p,
        Err(page) => return page.into_response(),
    };
    let Some(snap) = api.core.snapshot().await else {
        return super::unavailable();
    };
    let filter = match parse_filter(&snap.state, &pairs) {
        Ok(f) => f,
        Err((status, m)) => return refusal(status, &m),
    };
    let from = match param(&pairs, "from")
        .filter(|v| !v.is_empty())
        .map(str::parse::<u64>)
    {
        Some(Ok(n)) => Some(n),
        Some(Err(_)) => {
            return refusal(
                StatusCode::BAD_REQUEST,
                "parameter `from`: not a whole number",
            )
        }
        None => None,
    };
    let end = snap.last_sequence.map_or(0, |l| l + 1);
    let start = from.unwrap_or(if filter.is_empty() {
        end.saturating_sub(EVENTS_PER_PAGE_MAX as u64)
    } else {
        0
    });
    let (events, stopped) = scan(&api, &snap.state, &filter, start).await;
    html(StatusCode::OK, render(&pairs, start, end, &events, stopped))
}

/// Read from `start`: the matching events (at most
/// [`EVENTS_PER_PAGE_MAX`]) and where the next page starts, if the log
/// goes on.
async fn scan(
    api: &Api,
    s: &ControllerState,
    filter: &EventFilter,
    start: u64,
) -> (Vec<EventDto>, Option<u64>) {
    let mut found = Vec::new();
    let mut at = start;
    let mut scanned = 0;
    loop {
        let want = SCAN_PAGE_EVENTS.min(EVENTS_SCAN_MAX - scanned);
        let page = api.core.events(at, want).await;
        let Some(last) = page.last().map(|(seq, _)| *seq) else {
            return (found, None);
        };
        scanned += page.len();
        let roster = api.core.roster();
        for (seq, event) in page {
            if found.len() == EVENTS_PER_PAGE_MAX {
                return (found, Some(seq));
            }
            if filter.matches(s, &event) {
                found.push(event_dto(&roster, seq, event));
            }
        }
        at = last + 1;
        if scanned >= EVENTS_SCAN_MAX {
            return (found, Some(at));
        }
    }
}

/// The rollout and op an event is about, as links.
pub fn about(event: &Event) -> String {
    let mut parts = Vec::new();
    if let Some(r) = event_rollout(event) {
        parts.push(rollout_link(&r.to_string()));
    }
    if let Some(o) = event_op(event) {
        parts.push(op_link(&o.to_string()));
    }
    parts.join(" ")
}

fn filter_form(pairs: &[(String, String)]) -> String {
    let value = |k: &str| escape(param(pairs, k).unwrap_or(""));
    let mut h = String::from("<form method=\"get\" action=\"/events\"><label>kind <select name=\"kind\"><option value=\"\">any</option>");
    for w in words::EVENT_KINDS {
        let selected = if param(pairs, "kind") == Some(w) {
            " selected"
        } else {
            ""
        };
        let _ = write!(h, "<option{selected}>{w}</option>");
    }
    let _ = writeln!(
        h,
        "</select></label> <label>rollout <input name=\"rollout\" size=\"6\" value=\"{}\"></label> \
         <label>op <input name=\"op\" size=\"8\" value=\"{}\"></label> \
         <label>node <input name=\"node\" size=\"12\" value=\"{}\"></label> \
         <label>from <input name=\"from\" size=\"8\" value=\"{}\"></label> \
         <button type=\"submit\">show</button></form>",
        value("rollout"),
        value("op"),
        value("node"),
        value("from"),
    );
    h
}

/// The events page.
pub fn render(
    pairs: &[(String, String)],
    start: u64,
    end: u64,
    events: &[EventDto],
    next: Option<u64>,
) -> String {
    let mut h = format!(
        "<h1>Events</h1>\n<p>the log holds sequences 0 to {}; this page reads from {start}</p>\n",
        end.saturating_sub(1)
    );
    h.push_str(&filter_form(pairs));
    h.push_str(
        "<table id=\"event-log\"><tr><th>#</th><th>kind</th><th>event</th><th>about</th></tr>\n",
    );
    for e in events {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            e.sequence,
            escape(words::event_kind(&e.event)),
            escape(&e.text),
            about(&e.event),
        );
    }
    h.push_str("</table>\n");
    let keep = |k: &str| param(pairs, k).filter(|v| !v.is_empty());
    let with_from = |from: u64| {
        let from = from.to_string();
        format!(
            "/events{}",
            query(&[
                ("kind", keep("kind")),
                ("rollout", keep("rollout")),
                ("op", keep("op")),
                ("node", keep("node")),
                ("from", Some(&from)),
            ])
        )
    };
    h.push_str(&pager(
        (start > 0).then(|| with_from(0)),
        next.map(with_from),
    ));
    shell("Events", false, &h)
}
