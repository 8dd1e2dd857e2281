//! `GET /handover`: the handover report (`/api/unresolved`, SPEC §7) as a
//! page, paged, each entry's three answers side by side: who holds what,
//! what evidence is missing and how it is fetched, and who decides (and
//! what they may decide). Every word comes from the report's entries.

use super::{escape, html, link, node_link, op_link, pager, pairs, rollout_link, shell, PageQuery};
use crate::daemon::core::Snapshot;
use crate::daemon::state::Api;
use crate::daemon::view::handover_report;
use api::report::Unresolved;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use std::fmt::Write;

/// Entries one page of the handover report shows.
pub const HANDOVER_ENTRIES_PER_PAGE_MAX: usize = 50;

/// The handover page's route.
pub fn routes() -> utoipa_axum::router::OpenApiRouter<Api> {
    utoipa_axum::router::OpenApiRouter::new().routes(utoipa_axum::routes!(handover))
}

/// `GET /handover`: the handover report.
#[utoipa::path(get, path = "/handover", tag = "console",
    params(super::rollout::SkipParams),
    responses(
        (status = 200, description = "the handover report (HTML)", body = String, content_type = "text/html"),
        (status = 400, description = "a bad parameter, named (HTML)", body = String, content_type = "text/html"),
(status = 503, description = "the controller core stopped (HTML)", body = String, content_type = "text/html"),
    ))]
async fn handover(State(api): State<Api>, q: PageQuery) -> Response {
    let pairs = match pairs(q) {
        Ok(p) => p,
        Err(page) => return page.into_response(),
    };
    let skip = match super::number_param(&pairs, "skip") {
        Ok(n) => n.unwrap_or(0),
        Err(page) => return page.into_response(),
    };
    let Some(snap) = api.core.snapshot().await else {
        return super::unavailable();
    };
    html(StatusCode::OK, render(&snap, skip))
}

/// The handover page from entry `skip` on.
pub fn render(snap: &Snapshot, skip: usize) -> String {
    let report = handover_report(snap);
    let mut h = format!(
        "<h1>Handover report</h1>\n<p>{} unresolved entr{}: each is work someone must own until evidence settles it.</p>\n",
        report.len(),
        if report.len() == 1 { "y" } else { "ies" }
    );
    if report.is_empty() {
        h.push_str("<p id=\"nothing\">nothing unresolved</p>\n");
        return shell("Handover report", false, &h);
    }
    h.push_str("<table id=\"handover\"><tr><th>who holds what</th><th>what evidence is missing, and who gets it</th><th>who decides</th></tr>\n");
    for u in report.iter().skip(skip).take(HANDOVER_ENTRIES_PER_PAGE_MAX) {
        entry(&mut h, u);
    }
    h.push_str("</table>\n");
    let next = skip + HANDOVER_ENTRIES_PER_PAGE_MAX;
    h.push_str(&pager(
        (skip > 0).then(|| "/handover".to_string()),
        (next < report.len()).then(|| format!("/handover?skip={next}")),
    ));
    shell("Handover report", false, &h)
}

fn list(items: &[String]) -> String {
    items
        .iter()
        .map(|i| format!("<li>{}</li>", escape(i)))
        .collect()
}

/// One entry as a row of three answers.
fn entry(h: &mut String, u: &Unresolved) {
    let state = match &u.unknown_reason {
        Some(r) => format!("<span class=\"unknown\">UNKNOWN ({})</span>", escape(r)),
        None => "<span class=\"waiting\">waiting</span>".to_string(),
    };
    let owner = match &u.owner {
        Some(o) => format!(
            "operator <b>{}</b> holds it, review by {}",
            escape(o),
            escape(u.review_by.as_deref().unwrap_or("not scheduled"))
        ),
        None => {
            use model::controller::Role;
            let role = crate::daemon::view::words::role;
            format!(
                "<span class=\"unowned\">unowned</span>: an operator with the {} role (or {}) may claim it",
                role(Role::Approver),
                role(Role::Admin)
            )
        }
    };
    let holder = if u.op == "-" {
        format!("rollout {}", rollout_link(&u.rollout))
    } else {
        format!(
            "op {} of rollout {} holds a slot",
            op_link(&u.op),
            rollout_link(&u.rollout)
        )
    };
    let _ = writeln!(
        h,
        "<tr class=\"entry\"><td>{} on {}: {} {state}<br>{}<br>last confirmed release <code>{}</code></td>\
         <td><ul>{}</ul>last seen: {}<br>fetched by whoever runs <code>{}</code></td>\
         <td>{owner}<ul>{}</ul>{}</td></tr>",
        holder,
        node_link(&u.node),
        escape(&u.phase),
        escape(&u.since),
        escape(&u.last_confirmed_release.as_deref().map_or_else(|| "none".into(), crate::daemon::view::short)),
        list(&u.missing_evidence),
        escape(u.last_serving_result.as_deref().unwrap_or("nothing recorded")),
        escape(&u.check_command),
        list(&u.options),
        if u.op == "-" {
            String::new()
        } else {
            link(&format!("/ops/{}", super::url_part(&u.op)), "the op's page")
        },
    );
}
