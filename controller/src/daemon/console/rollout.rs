//! `GET /rollouts` (every rollout, newest first, paged) and
//! `GET /rollouts/{id}` (one rollout: its plan, its waves as progress bars
//! with counts per state, its failure and UNKNOWN budgets as gauges, the
//! canary's evidence, and the ops of one wave, paged). Counts come from
//! the view layer (`api::view::rollout_counts`, `api::view::waves`); the
//! status word from `rollout_status_word`, and a rollout whose ops still
//! hold a slot never reads `completed` whatever its recorded status.

use super::node::proof_table;
use super::op::{evidence_table, OPS_PER_PAGE_MAX};
use super::{
    badge, escape, html, link, node_link, number_param, op_link, pager, pairs, path_value,
    plan_class, plan_letter, refusal, shell, url_part, PagePath, PageQuery,
};
use crate::daemon::core::Snapshot;
use crate::daemon::state::Api;
use crate::daemon::view::durations::DurationHistogram;
use crate::daemon::view::waves::{
    plan_node, plan_node_state, wave_progress, PlanNodeState, WaveProgress,
};
use crate::daemon::view::{
    handover_report, parse_rollout_id, rollout_counts, rollout_status_word, words, RolloutCounts,
};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use model::controller::{ControllerState, Rollout, RolloutStatus};
use std::fmt::Write;

/// Rollouts one page of `/rollouts` lists (newest first).
pub const ROLLOUTS_PER_PAGE_MAX: usize = 50;

/// The rollout pages' routes.
pub fn routes() -> utoipa_axum::router::OpenApiRouter<Api> {
    utoipa_axum::router::OpenApiRouter::new()
        .routes(utoipa_axum::routes!(rollout_list))
        .routes(utoipa_axum::routes!(rollout_one))
}

/// A rollout's status badge: the view's word and its class. A rollout
/// holding a slot is unresolved whatever its recorded status says: it
/// reads as its ops holding slots, never `completed`.
pub fn status_badge(s: &ControllerState, r: &Rollout) -> String {
    let text = match r.paused {
        Some(reason) if r.status == RolloutStatus::Active => words::paused(reason),
        _ => rollout_status_word(s, r).to_string(),
    };
    if r.occupied > 0 && r.status != RolloutStatus::Active {
        return badge(
            "unknown",
            &format!("{text}, {} op(s) still holding a slot", r.occupied),
        );
    }
    let c = rollout_counts(r);
    let class = match r.status {
        RolloutStatus::Completed if c.passed as usize == c.plan_nodes => "ok",
        RolloutStatus::Active if c.unknown > 0 => "unknown",
        RolloutStatus::Active => "waiting",
        _ => "resolved",
    };
    badge(class, &text)
}

/// `GET /rollouts`'s and `GET /handover`'s query, as documented.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // Declares the query for the document; never built.
pub struct SkipParams {
    /// Entries to skip (empty: none).
    #[param(pattern = "^(|[0-9]{1,9})$")]
    skip: Option<String>,
}

/// `GET /rollouts/{id}`'s query, as documented.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // Declares the query for the document; never built.
struct RolloutPageParams {
    /// The wave whose ops are listed (0: the canary; default: the current
    /// wave; past the last: the last).
    #[param(pattern = "^(|[0-9]{1,9})$")]
    wave: Option<String>,
    /// The plan position to list from (within the wave).
    #[param(pattern = "^(|[0-9]{1,9})$")]
    from: Option<String>,
}

/// `GET /rollouts`: every rollout, newest first.
#[utoipa::path(get, path = "/rollouts", tag = "console",
    params(SkipParams),
    responses(
        (status = 200, description = "the rollouts (HTML)", body = String, content_type = "text/html"),
        (status = 400, description = "a bad parameter, named (HTML)", body = String, content_type = "text/html"),
(status = 503, description = "the controller core stopped (HTML)", body = String, content_type = "text/html"),
    ))]
async fn rollout_list(State(api): State<Api>, q: PageQuery) -> Response {
    let pairs = match pairs(q) {
        Ok(p) => p,
        Err(page) => return page.into_response(),
    };
    let skip = match number_param(&pairs, "skip") {
        Ok(n) => n.unwrap_or(0),
        Err(page) => return page.into_response(),
    };
    let Some(snap) = api.core.snapshot().await else {
        return super::unavailable();
    };
    html(StatusCode::OK, render_list(&snap.state, skip))
}

/// The rollout list page.
pub fn render_list(s: &ControllerState, skip: usize) -> String {
    let mut h = format!("<h1>Rollouts</h1>\n<p>{} in all</p>\n", s.rollouts.len());
    h.push_str("<table id=\"rollouts\"><tr><th>rollout</th><th>status</th><th>release</th><th>progress</th><th>UNKNOWN</th><th>ops</th></tr>\n");
    for r in s
        .rollouts
        .iter()
        .rev()
        .skip(skip)
        .take(ROLLOUTS_PER_PAGE_MAX)
    {
        let c = rollout_counts(r);
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td><code>{}</code></td><td>{} / {} settled, {} passed</td><td{}>{}</td><td>{}</td></tr>",
            link(&format!("/rollouts/{}", r.id), &r.id.to_string()),
            status_badge(s, r),
            escape(&crate::daemon::view::short(&r.plan.release.to_hex())),
            c.settled,
            c.plan_nodes,
            c.passed,
            if c.unknown > 0 { " class=\"unknown\"" } else { "" },
            c.unknown,
            link(&format!("/ops?rollout={}", r.id), &format!("{} op(s)", c.granted)),
        );
    }
    h.push_str("</table>\n");
    let next = skip + ROLLOUTS_PER_PAGE_MAX;
    h.push_str(&pager(
        (skip > 0).then(|| "/rollouts".to_string()),
        (next < s.rollouts.len()).then(|| format!("/rollouts?skip={next}")),
    ));
    shell("Rollouts", false, &h)
}

/// `GET /rollouts/{id}`: one rollout.
#[utoipa::path(get, path = "/rollouts/{id}", tag = "console",
    params(("id" = String, Path, description = "rollout id: r0, r1, ..."), RolloutPageParams),
    responses(
        (status = 200, description = "the rollout's page (HTML)", body = String, content_type = "text/html"),
        (status = 400, description = "a bad parameter, named (HTML)", body = String, content_type = "text/html"),
        (status = 404, description = "no such rollout (HTML)", body = String, content_type = "text/html"),
(status = 503, description = "the controller core stopped (HTML)", body = String, content_type = "text/html"),
    ))]
async fn rollout_one(
    State(api): State<Api>,
    headers: axum::http::HeaderMap,
    id: PagePath,
    q: PageQuery,
) -> Response {
    let (id, pairs) = match (path_value(id), pairs(q)) {
        (Ok(i), Ok(p)) => (i, p),
        (Err(page), _) | (_, Err(page)) => return page.into_response(),
    };
    let (wave, from) = match (number_param(&pairs, "wave"), number_param(&pairs, "from")) {
        (Ok(w), Ok(f)) => (w, f),
        (Err(page), _) | (_, Err(page)) => return page.into_response(),
    };
    let Some(snap) = api.core.snapshot().await else {
        return super::unavailable();
    };
    let Some(r) = parse_rollout_id(&id).and_then(|r| snap.state.rollout(r)) else {
        return refusal(StatusCode::NOT_FOUND, &format!("no rollout {id}"));
    };
    let acting = super::actions::Acting::of(&api, &headers, &format!("/rollouts/{}", r.id));
    html(
        StatusCode::OK,
        render_acting(&snap, r, (wave, from), Some(&acting)),
    )
}

/// The rollout page, read-only; `wave` and `from` choose the ops listed.
pub fn render_one(
    snap: &Snapshot,
    r: &Rollout,
    wave: Option<usize>,
    from: Option<usize>,
) -> String {
    render_acting(snap, r, (wave, from), None)
}

/// The rollout page, with the actions `acting` may take when given.
pub fn render_acting(
    snap: &Snapshot,
    r: &Rollout,
    (wave, from): (Option<usize>, Option<usize>),
    acting: Option<&super::actions::Acting>,
) -> String {
    let s = &snap.state;
    let c = rollout_counts(r);
    let mut h = format!(
        "<h1>Rollout {}</h1>\n<p id=\"rollout-status\">status {}</p>\n",
        r.id,
        status_badge(s, r)
    );
    if let Some(acting) = acting {
        h.push_str(&super::actions::rollout_forms(s, r, acting));
    }
    render_plan(&mut h, s, r, &c);
    render_budgets(&mut h, r, &c);
    render_next_step(&mut h, snap, r);
    let waves = wave_progress(s, r);
    render_waves(&mut h, r, waves.as_deref());
    render_durations(&mut h, snap, r);
    render_canary(&mut h, snap, r);
    if let Some(waves) = &waves {
        let current = (c.current_wave as usize).min(waves.len() - 1);
        let chosen = wave.unwrap_or(current).min(waves.len() - 1);
        render_wave_ops(&mut h, s, r, &waves[chosen], from);
    }
    shell(&format!("Rollout {}", r.id), false, &h)
}

fn render_plan(h: &mut String, s: &ControllerState, r: &Rollout, c: &RolloutCounts) {
    let _ = writeln!(
        h,
        "<h2>Plan</h2>\n<table id=\"plan\">\
         <tr><th>release</th><td><code>{}</code></td></tr>\
         <tr><th>generation</th><td>{}</td></tr>\
         <tr><th>canary</th><td>{}</td></tr>\
         <tr><th>nodes</th><td>{} (the canary and {} follower(s))</td></tr>\
         <tr><th>waves</th><td>{} after the canary; now in wave {}; approval between waves: {}; approval after the canary: {}</td></tr>\
         <tr><th>slots</th><td>{} / {} occupied (UNKNOWN ops hold theirs)</td></tr>\
         <tr><th>progress</th><td>{} granted, {} settled ({} passed, {} not), {} UNKNOWN, {} failed</td></tr>\
         <tr><th>ops</th><td>{} &middot; {}</td></tr></table>",
        escape(&r.plan.release.to_hex()),
        r.generation.0,
        node_link(&s.roster.display_name(r.plan.canary)),
        c.plan_nodes,
        r.plan.followers.len(),
        c.waves,
        c.current_wave,
        if r.policy.approval_between_waves { "yes" } else { "no" },
        if r.plan.approval_after_canary { "yes" } else { "no" },
        r.occupied,
        r.plan.slots_max,
        c.granted,
        c.settled,
        c.passed,
        c.settled_not_passed,
        c.unknown,
        c.failed,
        link(&format!("/ops?rollout={}", r.id), "every op"),
        link(&format!("/ops?rollout={}&state=unknown", r.id), "its UNKNOWN ops"),
    );
}

/// The failure and UNKNOWN budgets as gauges (`<meter>`), with their
/// numbers in words beside them.
fn render_budgets(h: &mut String, r: &Rollout, c: &RolloutCounts) {
    h.push_str("<h2>Budgets</h2>\n<table id=\"budgets\">");
    let failed = match r.policy.max_failed {
        Some(max) => format!(
            "<meter min=\"0\" max=\"{0}\" value=\"{1}\" aria-label=\"failed ops\"></meter> {1} failed, {max} allowed: it pauses past {max}",
            max + 1,
            c.failed
        ),
        None => format!(
            "{} failed; no budget: the first failed follower pauses it",
            c.failed
        ),
    };
    let unknown = match r.policy.max_unknown {
        Some(max) => format!(
            "<meter min=\"0\" max=\"{max}\" value=\"{0}\" aria-label=\"UNKNOWN ops\"></meter> {0} UNKNOWN now; it pauses at {max}",
            c.unknown
        ),
        None => format!("{} UNKNOWN now; no UNKNOWN budget", c.unknown),
    };
    let _ = writeln!(
        h,
        "<tr><th>failures</th><td>{failed}</td></tr><tr><th>UNKNOWN</th><td{}>{unknown}</td></tr></table>",
        if c.unknown > 0 { " class=\"unknown\"" } else { "" },
    );
}

/// What the rollout waits for, when it waits for an operator: its
/// handover report entry's missing evidence and options.
fn render_next_step(h: &mut String, snap: &Snapshot, r: &Rollout) {
    let id = r.id.to_string();
    let Some(u) = handover_report(snap)
        .into_iter()
        .find(|u| u.rollout == id && u.op == "-")
    else {
        return;
    };
    let items = |items: &[String]| -> String {
        items
            .iter()
            .map(|i| format!("<li>{}</li>", escape(i)))
            .collect()
    };
    let _ = writeln!(
        h,
        "<h2>Waiting for an operator</h2>\n<p id=\"waiting\" class=\"waiting\">{}: {}</p>\n<ul>{}</ul>\n<p>options</p><ul>{}</ul>",
        escape(&u.phase),
        escape(&u.since),
        items(&u.missing_evidence),
        items(&u.options),
    );
}

/// One progress bar: a segment per state, its width its share, its
/// letter and count inside; the legend below names every state present.
pub fn progress_bar(w: &WaveProgress) -> String {
    let total = w.nodes().max(1);
    let mut bar = String::from("<div class=\"bar\" role=\"img\" aria-label=\"progress\">");
    let mut legend = String::new();
    for state in PlanNodeState::ALL {
        let n = w.count(state);
        if n == 0 {
            continue;
        }
        let class = plan_class(state);
        let letter = plan_letter(state);
        let _ = write!(
            bar,
            "<span class=\"c-{class}\" style=\"width:{:.2}%\" title=\"{} {n}\">{letter}</span>",
            n as f64 * 100.0 / total as f64,
            escape(state.as_str()),
        );
        let _ = write!(
            legend,
            "<span class=\"c-{class}\">&nbsp;{letter}&nbsp;</span> {} {n} &middot; ",
            escape(state.as_str())
        );
    }
    bar.push_str("</div>");
    format!("{bar}<p class=\"legend\">{legend}{} node(s)</p>", w.nodes())
}

fn render_waves(h: &mut String, r: &Rollout, waves: Option<&[WaveProgress]>) {
    h.push_str("<h2>Waves</h2>\n");
    let Some(waves) = waves else {
        h.push_str("<p>this rollout's settled ops were forgotten (older than the rollouts the state remembers): its counts above stay, per-node states are in the log</p>\n");
        return;
    };
    for w in waves {
        let title = match w.wave {
            0 => "canary".to_string(),
            k => format!("wave {k}"),
        };
        let _ = writeln!(
            h,
            "<div class=\"wave\" id=\"wave-{}\"><h3>{}</h3>{}<p>{}</p></div>",
            w.wave,
            escape(&title),
            progress_bar(w),
            link(&format!("/rollouts/{}?wave={}", r.id, w.wave), "its ops"),
        );
    }
}

/// How long the rollout's settled ops took, grant to settlement: one row
/// per bucket, a bar as long as its share of the fullest bucket, the count
/// beside it (the numbers are the reading; the bars, the picture).
fn render_durations(h: &mut String, snap: &Snapshot, r: &Rollout) {
    h.push_str("<h2>Op durations, grant to settlement</h2>\n");
    let Some(hist) = snap.op_durations.histogram(r.id) else {
        h.push_str(
            "<p id=\"durations\">no op of this rollout settled while this controller ran</p>\n",
        );
        return;
    };
    let fullest = hist.counts.iter().copied().max().unwrap_or(0).max(1);
    h.push_str(
        "<table id=\"durations\" class=\"hist\"><tr><th>duration</th><th>ops</th><th></th></tr>\n",
    );
    for (i, n) in hist.counts.iter().enumerate() {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{n}</td><td class=\"b\"><span style=\"width:{:.1}%\"></span></td></tr>",
            escape(&DurationHistogram::label(i)),
            f64::from(*n) * 100.0 / f64::from(fullest),
        );
    }
    h.push_str("</table>\n");
    let _ = writeln!(
        h,
        "<p>{} op(s) measured by this controller's clock{}</p>",
        hist.dated(),
        match hist.undated {
            0 => String::new(),
            n => format!(
                "; {n} more settled without a duration (granted before this controller started)"
            ),
        }
    );
}

/// The canary's op evidence and its recorded proof.
fn render_canary(h: &mut String, snap: &Snapshot, r: &Rollout) {
    let s = &snap.state;
    let name = s.roster.display_name(r.plan.canary);
    let _ = writeln!(h, "<h2>The canary, {}</h2>", node_link(&name));
    match r.op_for(r.plan.canary).and_then(|id| s.op(id)) {
        Some(op) => {
            let _ = writeln!(h, "<p>its op {}</p>", op_link(&op.id.to_string()));
            h.push_str(&evidence_table(op));
        }
        None => h.push_str("<p>no op of the canary is kept hot in the state</p>\n"),
    }
    if s.intended_rollout(r.plan.canary).map(|i| i.id) == Some(r.id) {
        h.push_str(&proof_table(&proof::recorded_node_proof(
            s,
            r.plan.canary,
            &name,
        )));
    }
}

/// The plan nodes of wave `w` from position `from`, a page of them.
fn render_wave_ops(
    h: &mut String,
    s: &ControllerState,
    r: &Rollout,
    w: &WaveProgress,
    from: Option<usize>,
) {
    let start = from.unwrap_or(w.start).clamp(w.start, w.end);
    let end = w.end.min(start + OPS_PER_PAGE_MAX);
    let _ = writeln!(
        h,
        "<h2 id=\"ops\">Ops of {}</h2>\n<p>plan positions {} to {} of {}..{}</p>",
        match w.wave {
            0 => "the canary".to_string(),
            k => format!("wave {k}"),
        },
        start,
        end,
        w.start,
        w.end
    );
    h.push_str("<table id=\"wave-ops\"><tr><th>node</th><th>op</th><th>state</th></tr>\n");
    for node in (start..end).filter_map(|p| plan_node(r, p)) {
        let state = plan_node_state(s, r, node);
        let op = r
            .op_for(node)
            .map_or_else(|| "-".to_string(), |id| op_link(&id.to_string()));
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{op}</td><td>{}</td></tr>",
            node_link(&s.roster.display_name(node)),
            badge(plan_class(state), state.as_str()),
        );
    }
    h.push_str("</table>\n");
    let base = format!("/rollouts/{}?wave={}", url_part(&r.id.to_string()), w.wave);
    h.push_str(&pager(
        (start > w.start).then(|| base.clone()),
        (end < w.end).then(|| format!("{base}&from={end}")),
    ));
}
