//! `GET /ops` (ops paged, filtered by rollout and state) and
//! `GET /ops/{op}` (one op: its events as a timeline and as a sequence
//! diagram, `GET /ops/{op}/diagram.svg`, why it is UNKNOWN and what would
//! settle it, its claim, its evidence). The op's words and
//! its next steps are the view layer's and the handover report's; the
//! timeline is read from the log from the op's grant, which the log index
//! dates for every op holding a slot and for each node's latest op; an
//! older op's events are a link to the event page filtered by it.

use super::actions::Acting;
use super::node::{filter_form, query_refusal};
use super::{
    badge, escape, html, link, node_link, op_dto_class, op_link, pager, pairs, param, path_value,
    query, refusal, rollout_link, shell, url_part, PagePath, PageQuery,
};
use crate::daemon::core::Snapshot;
use crate::daemon::state::Api;
use crate::daemon::view::{
    event_dto, event_op, handover_report, one_op, op_missing, op_page, parse_op_query, words,
    EventDto, OpDto, OpFilter, Page,
};
use api::report::Unresolved;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use model::controller::{EvidenceItem, EvidenceSource, Op};
use model::OpId;
use std::fmt::Write;

/// Ops one page of `/ops` (and of a rollout's wave) lists.
pub const OPS_PER_PAGE_MAX: usize = 100;
/// Events one op's timeline shows.
pub const OP_TIMELINE_EVENTS_MAX: usize = 200;
/// Log entries one op page reads from the op's grant on, at most.
pub const OP_TIMELINE_SCAN_EVENTS_MAX: usize = 10_000;
/// Log entries read per request to the core while scanning.
const SCAN_PAGE_EVENTS: usize = 500;

/// The op pages' routes.
pub fn routes() -> utoipa_axum::router::OpenApiRouter<Api> {
    utoipa_axum::router::OpenApiRouter::new()
        .routes(utoipa_axum::routes!(op_list))
        .routes(utoipa_axum::routes!(op_one))
        .routes(utoipa_axum::routes!(op_diagram))
}

/// `GET /ops`'s query, as documented. Empty is absent: the filter form's
/// "any".
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // Declares the query for the document; never built.
struct OpListPageParams {
    /// Only this rollout's ops; 404 for a rollout that does not exist.
    #[param(pattern = "^(|r[0-9]{1,9})$")]
    rollout: Option<String>,
    /// Only ops in this state (or `settled`, `holding-slot`).
    #[param(
        pattern = "^(|unknown|granted|decided|restoring|verified|rolled-back|not-applied|resolved|settled|holding-slot)$"
    )]
    state: Option<String>,
    /// Start after this op.
    #[param(pattern = "^(|op[0-9]{1,9})$")]
    after: Option<String>,
}

/// `GET /ops`: ops, paged.
#[utoipa::path(get, path = "/ops", tag = "console",
    params(OpListPageParams),
    responses(
        (status = 200, description = "a page of ops (HTML)", body = String, content_type = "text/html"),
        (status = 400, description = "a bad parameter, named (HTML)", body = String, content_type = "text/html"),
        (status = 404, description = "no such rollout (HTML)", body = String, content_type = "text/html"),
(status = 503, description = "the controller core stopped (HTML)", body = String, content_type = "text/html"),
    ))]
async fn op_list(State(api): State<Api>, q: PageQuery) -> Response {
    let mut pairs = match pairs(q) {
        Ok(p) => p,
        Err(page) => return page.into_response(),
    };
    let Some(snap) = api.core.snapshot().await else {
        return super::unavailable();
    };
    pairs.retain(|(k, v)| k != "limit" && !v.is_empty());
    let mut q = match parse_op_query(&snap.state, &pairs) {
        Ok(q) => q,
        Err(e) => return query_refusal(e),
    };
    q.limit = OPS_PER_PAGE_MAX;
    let page = op_page(&snap.state, &q);
    html(StatusCode::OK, render_list(&pairs, &page))
}

/// The rows of an op table.
pub fn op_rows(h: &mut String, ops: &[OpDto]) {
    h.push_str("<table class=\"ops\"><tr><th>op</th><th>rollout</th><th>node</th><th>state</th><th>phase</th><th>outcome</th><th>decision</th></tr>\n");
    for o in ops {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            op_link(&o.id),
            rollout_link(&o.rollout),
            node_link(&o.node),
            badge(op_dto_class(o), &o.state),
            escape(&o.phase),
            escape(o.outcome.as_deref().unwrap_or("-")),
            escape(o.decision.as_deref().unwrap_or(words::NO_DECISION)),
        );
    }
    h.push_str("</table>\n");
}

pub fn render_list(pairs: &[(String, String)], page: &Page<OpDto>) -> String {
    let rollout = param(pairs, "rollout");
    let state = param(pairs, "state");
    let filters = OpFilter::words();
    let words: Vec<&str> = filters.split(", ").collect();
    let mut h = String::from("<h1>Ops</h1>\n");
    if let Some(r) = rollout {
        let _ = writeln!(h, "<p>rollout {}</p>", rollout_link(r));
    }
    let hidden: Vec<(&str, &str)> = rollout.map(|r| ("rollout", r)).into_iter().collect();
    h.push_str(&filter_form("/ops", &words, state, &hidden));
    if let Some(total) = page.total {
        let _ = writeln!(h, "<p>{total} op(s) in all</p>");
    }
    op_rows(&mut h, &page.items);
    let rest = [("rollout", rollout), ("state", state)];
    let next = page.next.as_deref().map(|after| {
        let mut with = rest.to_vec();
        with.push(("after", Some(after)));
        format!("/ops{}", query(&with))
    });
    h.push_str(&pager(
        param(pairs, "after").map(|_| format!("/ops{}", query(&rest))),
        next,
    ));
    shell("Ops", false, &h)
}

/// An op's events read from the log.
pub struct Timeline {
    /// Its events, in log order.
    pub events: Vec<EventDto>,
    /// Where the scan stopped before the log's end, if it did.
    pub stopped_at: Option<u64>,
}

/// Where op `id`'s events start in the log, when the log index knows:
/// its grant, for an op holding a slot or its node's latest op.
pub fn timeline_start(snap: &Snapshot, id: OpId) -> Option<u64> {
    if let Some(seq) = snap.log_index.granted.get(&id) {
        return Some(*seq);
    }
    let node = snap.state.op_summary(id)?.node;
    let record = snap.state.nodes.get(&node)?;
    if record.live_op.or(record.last_op) != Some(id) {
        return None;
    }
    snap.log_index.node_granted.get(&node).copied()
}

/// Read op `id`'s events from `from` on, bounded by
/// [`OP_TIMELINE_SCAN_EVENTS_MAX`] entries and [`OP_TIMELINE_EVENTS_MAX`]
/// events.
async fn read_timeline(api: &Api, id: OpId, from: u64) -> Timeline {
    let mut events = Vec::new();
    let mut at = from;
    let mut scanned = 0;
    loop {
        let page = api.core.events(at, SCAN_PAGE_EVENTS).await;
        let Some(last) = page.last().map(|(seq, _)| *seq) else {
            return Timeline {
                events,
                stopped_at: None,
            };
        };
        scanned += page.len();
        let roster = api.core.roster();
        events.extend(
            page.into_iter()
                .filter(|(_, e)| event_op(e) == Some(id))
                .map(|(seq, e)| event_dto(&roster, seq, e)),
        );
        at = last + 1;
        if events.len() >= OP_TIMELINE_EVENTS_MAX || scanned >= OP_TIMELINE_SCAN_EVENTS_MAX {
            events.truncate(OP_TIMELINE_EVENTS_MAX);
            return Timeline {
                events,
                stopped_at: Some(at),
            };
        }
    }
}

/// `GET /ops/{op}`: one op.
#[utoipa::path(get, path = "/ops/{op}", tag = "console",
    params(("op" = String, Path, description = "op id: op0, op1, ...")),
    responses(
        (status = 200, description = "the op's page (HTML)", body = String, content_type = "text/html"),
        (status = 400, description = "a path that does not decode (HTML)", body = String, content_type = "text/html"),
        (status = 404, description = "no such op, or forgotten (HTML)", body = String, content_type = "text/html"),
(status = 503, description = "the controller core stopped (HTML)", body = String, content_type = "text/html"),
    ))]
async fn op_one(State(api): State<Api>, headers: HeaderMap, text: PagePath) -> Response {
    match op_and_timeline(&api, text).await {
        Ok((snap, id, timeline)) => {
            let acting = Acting::of(&api, &headers, &format!("/ops/{id}"));
            let page = render_acting(&snap, id, timeline.as_ref(), Some(&acting));
            html(StatusCode::OK, page)
        }
        Err(refused) => refused,
    }
}

/// `GET /ops/{op}/diagram.svg`: the op's timeline as a sequence diagram
/// (the chart `fleetweft log show --diagram` and the checker's
/// counterexamples draw), a picture of what the op page's timeline lists.
#[utoipa::path(get, path = "/ops/{op}/diagram.svg", tag = "console",
    params(("op" = String, Path, description = "op id: op0, op1, ...")),
    responses(
        (status = 200, description = "the op's sequence diagram (SVG)", body = String, content_type = "image/svg+xml"),
        (status = 400, description = "a path that does not decode (HTML)", body = String, content_type = "text/html"),
        (status = 404, description = "no such op, or forgotten (HTML)", body = String, content_type = "text/html"),
(status = 503, description = "the controller core stopped (HTML)", body = String, content_type = "text/html"),
    ))]
async fn op_diagram(State(api): State<Api>, text: PagePath) -> Response {
    match op_and_timeline(&api, text).await {
        Ok((snap, id, timeline)) => (
            StatusCode::OK,
            [(axum::http::header::CONTENT_TYPE, "image/svg+xml")],
            diagram_svg(&snap, id, timeline.as_ref()),
        )
            .into_response(),
        Err(refused) => refused,
    }
}

/// The op named by the path, the snapshot it was found in and its
/// timeline (when the log index dates it), or the refusal page.
async fn op_and_timeline(
    api: &Api,
    text: PagePath,
) -> Result<(Snapshot, OpId, Option<Timeline>), Response> {
    let text = path_value(text).map_err(IntoResponse::into_response)?;
    let Some(snap) = api.core.snapshot().await else {
        return Err(super::unavailable());
    };
    let Some(id) = crate::daemon::view::parse_op_id(&text) else {
        return Err(refusal(
            StatusCode::NOT_FOUND,
            &format!("no op {text}: op ids look like op0"),
        ));
    };
    if one_op(&snap.state, id).is_none() {
        return Err(refusal(StatusCode::NOT_FOUND, &op_missing(&snap.state, id)));
    }
    let timeline = match timeline_start(&snap, id) {
        Some(from) => Some(read_timeline(api, id, from).await),
        None => None,
    };
    Ok((snap, id, timeline))
}

/// The op's sequence diagram (SVG): its timeline's events drawn as the
/// log's chart draws them, the node's lane under its name. Without a
/// timeline (the log index does not date the op) the chart says so.
pub fn diagram_svg(snap: &Snapshot, id: OpId, timeline: Option<&Timeline>) -> String {
    let mut chart = logtools::diagram::LogChart::new();
    if let Some(node) = snap.state.op_summary(id).map(|o| o.node) {
        chart.op_on(id, node, &snap.state.roster.display_name(node));
    }
    let events = timeline.map_or(&[][..], |t| &t.events[..]);
    for e in events {
        chart.event(e.sequence, &e.event);
    }
    let closing = match timeline {
        None => format!(
            "{id}'s events are not dated by the log index (only ops holding a slot and each node's latest op are): see /events?op={id}"
        ),
        Some(Timeline { stopped_at: Some(at), .. }) => format!(
            "{id}: {} event(s) drawn; the rest from log sequence {at} on",
            events.len()
        ),
        Some(_) => format!("{id}: every event of the op, {} drawn", events.len()),
    };
    chart.finish_with(closing).svg()
}

/// The op page, read-only.
pub fn render_one(snap: &Snapshot, id: OpId, timeline: Option<&Timeline>) -> String {
    render_acting(snap, id, timeline, None)
}

/// The op page, with the actions `acting` may take when given.
pub fn render_acting(
    snap: &Snapshot,
    id: OpId,
    timeline: Option<&Timeline>,
    acting: Option<&Acting>,
) -> String {
    let s = &snap.state;
    let Some(o) = one_op(s, id) else {
        return shell("no such op", false, &escape(&op_missing(s, id)));
    };
    let mut h = format!(
        "<h1>Op {}</h1>\n<p id=\"op-state\">state {}</p>\n",
        escape(&o.id),
        badge(op_dto_class(&o), &o.state)
    );
    render_facts(&mut h, &o);
    let entry = handover_report(snap).into_iter().find(|u| u.op == o.id);
    if let Some(op) = s.op(id) {
        render_unknown(&mut h, op, entry.as_ref());
        render_claim(&mut h, op);
        if let Some(acting) = acting {
            h.push_str(&super::actions::op_forms(s, op, acting));
        }
        h.push_str(&evidence_table(op));
    } else {
        h.push_str("<p>archived: only its summary is kept in the state; its whole story is in the log</p>\n");
    }
    render_timeline(&mut h, &o, timeline);
    shell(&format!("Op {}", o.id), false, &h)
}

fn render_facts(h: &mut String, o: &OpDto) {
    let _ = writeln!(
        h,
        "<table id=\"facts\">\
         <tr><th>rollout</th><td>{}</td></tr>\
         <tr><th>node</th><td>{}</td></tr>\
         <tr><th>release</th><td><code>{}</code></td></tr>\
         <tr><th>generation</th><td>{}</td></tr>\
         <tr><th>phase</th><td>{}</td></tr>\
         <tr><th>outcome</th><td>{}</td></tr>\
         <tr><th>decision</th><td>{}</td></tr>\
         <tr><th>holds a slot</th><td>{}</td></tr>\
         <tr><th>archived</th><td>{}</td></tr></table>",
        rollout_link(&o.rollout),
        node_link(&o.node),
        escape(&o.release),
        o.generation,
        escape(&o.phase),
        escape(o.outcome.as_deref().unwrap_or("-")),
        escape(o.decision.as_deref().unwrap_or(words::NO_DECISION)),
        if o.holds_slot { "yes" } else { "no" },
        if o.archived { "yes" } else { "no" },
    );
}

/// Why it is UNKNOWN (or what it waits for) and what would settle it:
/// the handover report's entry.
fn render_unknown(h: &mut String, op: &Op, entry: Option<&Unresolved>) {
    if let Some(reason) = op.unknown.filter(|_| op.is_unknown()) {
        let _ = writeln!(
            h,
            "<h2>Why it is UNKNOWN</h2>\n<p id=\"why-unknown\" class=\"unknown\">UNKNOWN: {}</p>",
            escape(&words::unknown_reason_sentence(reason))
        );
    }
    let Some(u) = entry else {
        return;
    };
    let list = |items: &[String]| -> String {
        items
            .iter()
            .map(|i| format!("<li>{}</li>", escape(i)))
            .collect()
    };
    let _ = writeln!(
        h,
        "<h2>What would settle it</h2>\n<ul id=\"missing\">{}</ul>\n<p>check: <code>{}</code> &middot; {}</p>\n<h2>Options</h2>\n<ul id=\"options\">{}</ul>",
        list(&u.missing_evidence),
        escape(&u.check_command),
        escape(&u.since),
        list(&u.options),
    );
}

fn render_claim(h: &mut String, op: &Op) {
    h.push_str("<h2>Claim</h2>\n");
    match &op.claim {
        Some(c) => {
            let _ = writeln!(
                h,
                "<p id=\"claim\">owned by <b>{}</b>, review by {}</p>",
                escape(&c.owner),
                escape(&c.review_by)
            );
        }
        None if op.occupies_slot() => {
            let _ = writeln!(
                h,
                "<p id=\"claim\"><span class=\"unowned\">unowned</span>: take it with <code>fleetweft claim {} --review-by WHEN</code></p>",
                op.id
            );
        }
        None => h.push_str("<p id=\"claim\">not claimed</p>\n"),
    }
}

/// Who recorded an op's evidence item, in the proof's words.
fn evidence_source(source: EvidenceSource) -> String {
    match source {
        EvidenceSource::Agent(kind) => format!(
            "{} ({})",
            proof::Origin::AgentReport.as_str(),
            words::report_kind(kind)
        ),
        EvidenceSource::ControllerProbe => proof::Origin::ControllerProbe.as_str().to_string(),
        EvidenceSource::Operator => proof::Origin::Operator.as_str().to_string(),
    }
}

/// The evidence recorded with an op (most recent last), and what made it
/// restore, if anything did.
pub fn evidence_table(op: &Op) -> String {
    let mut h = String::from("<h2>Evidence recorded with the op</h2>\n");
    if op.evidence.is_empty() {
        h.push_str("<p class=\"unknown\">none recorded</p>\n");
    } else {
        h.push_str("<table class=\"evidence\"><tr><th>source</th><th>observed</th><th>after the restore was asked</th></tr>\n");
        for e in &op.evidence {
            evidence_row(&mut h, e);
        }
        h.push_str("</table>\n");
    }
    if let Some(cause) = &op.cause {
        let _ = writeln!(
            h,
            "<p id=\"cause\">what made it restore: {} ({})</p>",
            escape(&proof::observation_str(&cause.observation)),
            escape(&evidence_source(cause.source))
        );
    }
    h
}

fn evidence_row(h: &mut String, e: &EvidenceItem) {
    let _ = writeln!(
        h,
        "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
        escape(&evidence_source(e.source)),
        escape(&proof::observation_str(&e.observation)),
        if e.after_restore { "yes" } else { "no" },
    );
}

fn render_timeline(h: &mut String, o: &OpDto, timeline: Option<&Timeline>) {
    h.push_str("<h2>Timeline</h2>\n");
    let all = format!("/events?op={}", url_part(&o.id));
    let Some(t) = timeline else {
        let _ = writeln!(
            h,
            "<p>the log index dates only the ops holding a slot and each node's latest op: {}</p>",
            link(&all, "this op's events in the log")
        );
        return;
    };
    let _ = writeln!(
        h,
        "<p>{}</p>",
        link(
            &format!("/ops/{}/diagram.svg", url_part(&o.id)),
            "the op as a sequence diagram (SVG, below the list)"
        )
    );
    h.push_str("<ol id=\"timeline\">\n");
    for e in &t.events {
        let _ = writeln!(
            h,
            "<li><a href=\"/events?from={0}\">#{0}</a> <b>{1}</b> {2}</li>",
            e.sequence,
            escape(words::event_kind(&e.event)),
            escape(&e.text)
        );
    }
    h.push_str("</ol>\n");
    let _ = writeln!(
        h,
        "<figure><img id=\"diagram\" src=\"/ops/{}/diagram.svg\" alt=\"the events listed above, drawn as a sequence diagram\"></figure>",
        url_part(&o.id)
    );
    if let Some(at) = t.stopped_at {
        let _ = writeln!(
            h,
            "<p>the timeline stops here (at most {OP_TIMELINE_EVENTS_MAX} events, {OP_TIMELINE_SCAN_EVENTS_MAX} log entries read): {}</p>",
            link(&format!("{all}&from={at}"), "the rest in the log")
        );
    }
}
