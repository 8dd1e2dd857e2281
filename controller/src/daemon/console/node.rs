//! `GET /nodes` (nodes paged, filtered by state and labels) and
//! `GET /nodes/{name}` (one node: identity, labels, confirmed release,
//! drift, the proof's evidence table with each item's source and time,
//! and its op history). The node page judges the recorded evidence by
//! default (no readback on a page load); `?proof=live` reads the node
//! back now, as `GET /api/nodes/{name}/proof` does, and records nothing.

use super::{
    badge, escape, html, link, node_class, node_link, op_dto_class, op_link, pager, pairs, param,
    path_value, query, refusal, rollout_link, shell, url_part, PagePath, PageQuery,
};
use crate::daemon::core::Snapshot;
use crate::daemon::state::Api;
use crate::daemon::view::{
    node_dto, node_page, one_op, parse_node_query, NodeDto, NodeState, OpDto, QueryError,
};
use api::report::format_epoch_ms;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use model::NodeId;
use proof::NodeProof;
use std::fmt::Write;

/// Nodes one page of `/nodes` lists.
pub const NODES_PER_PAGE_MAX: usize = 100;
/// Ops a node page lists from its history (newest rollout first).
pub const NODE_OP_HISTORY_MAX: usize = 50;

/// The node pages' routes.
pub fn routes() -> utoipa_axum::router::OpenApiRouter<Api> {
    utoipa_axum::router::OpenApiRouter::new()
        .routes(utoipa_axum::routes!(node_list))
        .routes(utoipa_axum::routes!(node_one))
}

/// `GET /nodes`'s query, as documented (`label=KEY=VALUE`, repeatable,
/// is read too, as `/api/nodes` reads it). Empty is absent: the filter
/// form's "any".
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // Declares the query for the document; never built.
struct NodeListPageParams {
    /// Only nodes in this state.
    #[param(pattern = "^(|idle|live|unknown|drifted|quarantined|retired)$")]
    state: Option<String>,
    /// Start after this node; 404 when no node has it.
    #[param(pattern = "^(|[a-z0-9-]{1,63})$")]
    after: Option<String>,
}

/// `GET /nodes/{name}`'s query, as documented.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // Declares the query for the document; never built.
struct NodePageParams {
    /// `live`: read the node back now (records nothing); `recorded` (or
    /// empty, the default): judge the recorded evidence.
    #[param(pattern = "^(|live|recorded)$")]
    proof: Option<String>,
}

/// `GET /nodes`: nodes, paged.
#[utoipa::path(get, path = "/nodes", tag = "console",
    params(NodeListPageParams),
    responses(
        (status = 200, description = "a page of nodes (HTML)", body = String, content_type = "text/html"),
        (status = 400, description = "a bad parameter, named (HTML)", body = String, content_type = "text/html"),
        (status = 404, description = "no such node to start after (HTML)", body = String, content_type = "text/html"),
(status = 503, description = "the controller core stopped (HTML)", body = String, content_type = "text/html"),
    ))]
async fn node_list(State(api): State<Api>, q: PageQuery) -> Response {
    let mut pairs = match pairs(q) {
        Ok(p) => p,
        Err(page) => return page.into_response(),
    };
    let Some(snap) = api.core.snapshot().await else {
        return super::unavailable();
    };
    pairs.retain(|(k, v)| k != "limit" && !v.is_empty());
    let mut q = match parse_node_query(&snap.state, &pairs) {
        Ok(q) => q,
        Err(e) => return query_refusal(e),
    };
    q.limit = NODES_PER_PAGE_MAX;
    let page = node_page(&snap, &q);
    html(StatusCode::OK, render_list(&snap, &pairs, &page))
}

/// A view-layer refusal of a query as a page.
pub fn query_refusal(e: QueryError) -> Response {
    match e {
        QueryError::BadRequest(m) => refusal(StatusCode::BAD_REQUEST, &m),
        QueryError::NotFound(m) => refusal(StatusCode::NOT_FOUND, &m),
    }
}

/// The state filter as a form (GET: no JavaScript), with `hidden`
/// parameters kept.
pub fn filter_form(
    action: &str,
    words: &[&str],
    chosen: Option<&str>,
    hidden: &[(&str, &str)],
) -> String {
    let mut h = format!(
        "<form method=\"get\" action=\"{}\"><label>state <select name=\"state\"><option value=\"\">any</option>",
        escape(action)
    );
    for w in words {
        let selected = if Some(*w) == chosen { " selected" } else { "" };
        let _ = write!(h, "<option{selected}>{}</option>", escape(w));
    }
    h.push_str("</select></label> ");
    for (k, v) in hidden {
        let _ = write!(
            h,
            "<input type=\"hidden\" name=\"{}\" value=\"{}\">",
            escape(k),
            escape(v)
        );
    }
    h.push_str("<button type=\"submit\">show</button></form>\n");
    h
}

pub fn render_list(
    snap: &Snapshot,
    pairs: &[(String, String)],
    page: &crate::daemon::view::Page<NodeDto>,
) -> String {
    let state = param(pairs, "state");
    let words: Vec<&str> = NodeState::ALL.iter().map(|s| s.as_str()).collect();
    let labels: Vec<(&str, &str)> = pairs
        .iter()
        .filter(|(k, _)| k == "label")
        .map(|(_, v)| ("label", v.as_str()))
        .collect();
    let mut h = format!(
        "<h1>Nodes</h1>\n<p>{} enrolled &middot; <a href=\"/fleet\">fleet map</a></p>\n",
        snap.state.roster.len()
    );
    h.push_str(&filter_form("/nodes", &words, state, &labels));
    h.push_str("<table id=\"nodes\"><tr><th>node</th><th>state</th><th>connected</th><th>confirmed release</th><th>live op</th><th>labels</th></tr>\n");
    for n in &page.items {
        let st = NodeState::parse(&n.state).unwrap_or(NodeState::Idle);
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td><td>{}</td><td>{}</td></tr>",
            node_link(&n.name),
            badge(node_class(st), &n.state),
            if n.connected { "yes" } else { "no" },
            escape(&n.confirmed.as_deref().map_or_else(|| "-".into(), crate::daemon::view::short)),
            n.live_op.as_deref().map_or_else(|| "-".into(), op_link),
            escape(&labels_text(n)),
        );
    }
    h.push_str("</table>\n");
    let mut rest: Vec<(&str, Option<&str>)> = vec![("state", state)];
    rest.extend(labels.iter().map(|(k, v)| (*k, Some(*v))));
    let next = page.next.as_deref().map(|after| {
        let mut with = rest.clone();
        with.push(("after", Some(after)));
        format!("/nodes{}", query(&with))
    });
    h.push_str(&pager(
        param(pairs, "after").map(|_| format!("/nodes{}", query(&rest))),
        next,
    ));
    shell("Nodes", false, &h)
}

fn labels_text(n: &NodeDto) -> String {
    n.labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `GET /nodes/{name}`: one node.
#[utoipa::path(get, path = "/nodes/{name}", tag = "console",
    params(("name" = String, Path, description = "an enrolled node's name"), NodePageParams),
    responses(
        (status = 200, description = "the node's page (HTML)", body = String, content_type = "text/html"),
        (status = 400, description = "a bad parameter, named (HTML)", body = String, content_type = "text/html"),
        (status = 404, description = "no such node (HTML)", body = String, content_type = "text/html"),
(status = 503, description = "the controller core stopped (HTML)", body = String, content_type = "text/html"),
    ))]
async fn node_one(
    State(api): State<Api>,
    headers: axum::http::HeaderMap,
    name: PagePath,
    q: PageQuery,
) -> Response {
    let (name, pairs) = match (path_value(name), pairs(q)) {
        (Ok(n), Ok(p)) => (n, p),
        (Err(page), _) | (_, Err(page)) => return page.into_response(),
    };
    let live = match param(&pairs, "proof") {
        None | Some("" | "recorded") => false,
        Some("live") => true,
        Some(other) => {
            return refusal(
                StatusCode::BAD_REQUEST,
                &format!("parameter `proof`: {other:?} is not live or recorded"),
            )
        }
    };
    let Some(snap) = api.core.snapshot().await else {
        return super::unavailable();
    };
    let Some(node) = snap.state.roster.id(&name) else {
        return refusal(
            StatusCode::NOT_FOUND,
            &format!("no node {name} in the fleet"),
        );
    };
    let (proof, note) = if live && snap.state.intended_rollout(node).is_some() {
        match crate::daemon::verify::gather(&api, node).await {
            Ok(g) => (
                proof::live_node_proof(&snap.state, node, &name, &g.fresh),
                None,
            ),
            Err(answer) => (
                proof::recorded_node_proof(&snap.state, node, &name),
                Some(format!(
                    "could not read back now (HTTP {}): the recorded evidence is judged instead",
                    answer.status().as_u16()
                )),
            ),
        }
    } else {
        (proof::recorded_node_proof(&snap.state, node, &name), None)
    };
    let acting = super::actions::Acting::of(&api, &headers, &format!("/nodes/{}", url_part(&name)));
    let page = render_acting(&snap, node, (&proof, note.as_deref()), Some(&acting));
    html(StatusCode::OK, page)
}

/// The node page, read-only.
pub fn render_one(snap: &Snapshot, node: NodeId, proof: &NodeProof, note: Option<&str>) -> String {
    render_acting(snap, node, (proof, note), None)
}

/// The node page, with the actions `acting` may take when given.
pub fn render_acting(
    snap: &Snapshot,
    node: NodeId,
    (proof, note): (&NodeProof, Option<&str>),
    acting: Option<&super::actions::Acting>,
) -> String {
    let Some(n) = node_dto(snap, node) else {
        return shell("no such node", false, "<p>no such node</p>");
    };
    let st = NodeState::parse(&n.state).unwrap_or(NodeState::Idle);
    let mut h = format!(
        "<h1>Node {}</h1>\n<p id=\"node-state\">state {}</p>\n",
        escape(&n.name),
        badge(node_class(st), &n.state)
    );
    if let Some(acting) = acting {
        h.push_str(&super::actions::node_forms(&snap.state, node, acting));
    }
    render_identity(&mut h, &n);
    render_drift(&mut h, &n);
    h.push_str("<h2>Proof</h2>\n");
    if let Some(note) = note {
        let _ = writeln!(h, "<p class=\"waiting\">{}</p>", escape(note));
    }
    h.push_str(&proof_table(proof));
    let _ = writeln!(
        h,
        "<p>{} &middot; {}</p>",
        link(
            &format!("/nodes/{}", url_part(&n.name)),
            "judge the recorded evidence"
        ),
        link(
            &format!("/nodes/{}?proof=live", url_part(&n.name)),
            "read the node back now"
        )
    );
    render_history(&mut h, snap, node);
    shell(&format!("Node {}", n.name), false, &h)
}

fn render_identity(h: &mut String, n: &NodeDto) {
    let quarantine = match &n.quarantined {
        Some([a, b]) => format!(
            "<span class=\"quarantined\">quarantined: two live connections from {} and {}</span>",
            escape(a),
            escape(b)
        ),
        None => "no".to_string(),
    };
    let _ = writeln!(
        h,
        "<h2>Identity</h2>\n<table id=\"identity\">\
         <tr><th>name</th><td>{}</td></tr>\
         <tr><th>public route</th><td><code>{}</code></td></tr>\
         <tr><th>connected</th><td>{}</td></tr>\
         <tr><th>platform</th><td>{} / {}</td></tr>\
         <tr><th>retired</th><td>{}</td></tr>\
         <tr><th>quarantined</th><td>{quarantine}</td></tr>\
         <tr><th>confirmed release</th><td><code>{}</code></td></tr>\
         <tr><th>agent says it serves</th><td><code>{}</code></td></tr>\
         <tr><th>live op</th><td>{}</td></tr>\
         <tr><th>labels</th><td>{}</td></tr></table>",
        escape(&n.name),
        escape(&n.public),
        if n.connected { "yes" } else { "no" },
        escape(n.arch.as_deref().unwrap_or("not said")),
        escape(n.os.as_deref().unwrap_or("not said")),
        if n.retired { "yes" } else { "no" },
        escape(
            n.confirmed
                .as_deref()
                .unwrap_or(crate::daemon::view::words::NO_RELEASE)
        ),
        escape(
            n.reported_serving
                .as_deref()
                .unwrap_or(crate::daemon::view::words::NO_RELEASE)
        ),
        n.live_op.as_deref().map_or_else(|| "-".into(), op_link),
        escape(&labels_text(n)),
    );
}

fn render_drift(h: &mut String, n: &NodeDto) {
    h.push_str("<h2>Drift</h2>\n");
    let seen = match &n.observed {
        Some(o) => format!(
            "latest observation: {} by {} at {}",
            escape(&o.result),
            escape(&o.source),
            escape(&format_epoch_ms(o.at_ms))
        ),
        None => "no observation recorded since its last op settled".to_string(),
    };
    if n.drifted {
        let _ = writeln!(
            h,
            "<p id=\"drift\" class=\"drifted\">DRIFTED: its latest observation contradicts its confirmed release; {seen}</p>"
        );
    } else {
        let _ = writeln!(h, "<p id=\"drift\">not drifted; {seen}</p>");
    }
}

/// A proof's verdict and its evidence table: each item with what was
/// expected and observed, its source and its time.
pub fn proof_table(p: &NodeProof) -> String {
    let mut h = format!(
        "<p id=\"verdict\">verdict <span class=\"{0}\">{0}</span> ({1}){2}: {3}</p>\n",
        p.verdict.as_str(),
        match p.mode {
            proof::ProofMode::Live => "read back now",
            proof::ProofMode::Recorded => "recorded evidence",
        },
        p.op.as_deref().map_or_else(String::new, |op| format!(
            ", judged against {}",
            op_link(op)
        )),
        escape(&p.summary),
    );
    h.push_str("<table class=\"evidence\"><tr><th>item</th><th>expected</th><th>observed</th><th>matches</th><th>reason</th><th>source</th><th>when</th></tr>\n");
    for c in &p.checks {
        let (class, word) = match c.ok {
            Some(true) => ("ok", "yes"),
            Some(false) => ("bad", "no"),
            None => ("unknown", "could not read"),
        };
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"{class}\">{word}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&c.item),
            escape(c.expected.as_deref().unwrap_or("-")),
            escape(c.observed.as_deref().unwrap_or("-")),
            escape(c.reason.map_or("-", |r| r.as_str())),
            escape(c.origin.as_str()),
            escape(&c.observed_at_ms.map_or_else(|| "not recorded".into(), format_epoch_ms)),
        );
    }
    h.push_str("</table>\n");
    h
}

/// The node's ops, newest rollout first, from each rollout's index.
fn node_ops(snap: &Snapshot, node: NodeId) -> Vec<OpDto> {
    let s = &snap.state;
    s.rollouts
        .iter()
        .rev()
        .filter_map(|r| r.op_for(node))
        .filter_map(|id| one_op(s, id))
        .take(NODE_OP_HISTORY_MAX)
        .collect()
}

fn render_history(h: &mut String, snap: &Snapshot, node: NodeId) {
    let ops = node_ops(snap, node);
    h.push_str("<h2>Op history</h2>\n");
    if ops.is_empty() {
        h.push_str("<p>no op remembered for this node</p>\n");
        return;
    }
    h.push_str("<table id=\"history\"><tr><th>op</th><th>rollout</th><th>state</th><th>phase</th><th>outcome</th><th>release</th></tr>\n");
    for o in &ops {
        let class = op_dto_class(o);
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td></tr>",
            op_link(&o.id),
            rollout_link(&o.rollout),
            badge(class, &o.state),
            escape(&o.phase),
            escape(o.outcome.as_deref().unwrap_or("-")),
            escape(&crate::daemon::view::short(&o.release)),
        );
    }
    let _ = writeln!(
        h,
        "</table>\n<p>at most the {NODE_OP_HISTORY_MAX} newest; every event about it: {}</p>",
        link(
            &format!(
                "/events?node={}",
                url_part(&snap.state.roster.display_name(node))
            ),
            "its events"
        )
    );
}
