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

use super::api::{status_dto, EventDto, StatusDto};
use super::core::Snapshot;
use crate::proof::{NodeProof, Unresolved, Verdict};
use model::NodeId;
use std::fmt::Write;
use std::time::SystemTime;

/// Events shown on the dashboard.
pub const DASHBOARD_EVENTS: usize = 20;

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
.quarantined{color:#fff;background:#b00020;font-weight:bold}";

fn verdict_cell(v: Verdict) -> String {
    format!("<td class=\"{0}\">{0}</td>", v.as_str())
}

fn short(d: &Option<String>) -> String {
    d.as_deref()
        .map_or_else(|| "-".to_string(), crate::cli_ops::short)
}

/// Everything the dashboard shows, read from one snapshot.
pub struct DashboardData {
    /// `/api/status`.
    pub status: StatusDto,
    /// Every node's proof, in fleet order.
    pub proofs: Vec<NodeProof>,
    /// `/api/unresolved`.
    pub unresolved: Vec<Unresolved>,
    /// The latest events, oldest first.
    pub events: Vec<EventDto>,
}

/// Gather the DTOs from a snapshot.
pub fn data(snap: &Snapshot, events: Vec<EventDto>) -> DashboardData {
    let roster = &snap.state.roster;
    let names = |n: NodeId| roster.display_name(n);
    DashboardData {
        status: status_dto(snap),
        proofs: roster
            .iter()
            .filter(|(_, e)| !e.retired)
            .map(|(id, e)| crate::proof::recorded_node_proof(&snap.state, id, &e.name))
            .collect(),
        unresolved: crate::proof::unresolved(&snap.state, &names, &snap.log_index),
        events,
    }
}

/// The dashboard page.
pub fn render(d: &DashboardData) -> String {
    let s = &d.status;
    let unknown_ops: Vec<&str> = s
        .ops
        .iter()
        .filter(|o| o.unknown.is_some() && o.holds_slot)
        .map(|o| o.id.as_str())
        .collect();
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"refresh\" content=\"2\"><title>Fleetweft</title>\
         <style>{STYLE}</style></head><body>\n<h1>Fleetweft</h1>\n\
         <p>log sequence {} &middot; generation {} &middot; {} UNKNOWN op(s)</p>\n",
        s.last_sequence
            .map_or_else(|| "none".to_string(), |q| q.to_string()),
        s.generation,
        unknown_ops.len()
    );

    for n in &s.nodes {
        if let Some([first, second]) = &n.quarantined {
            let _ = writeln!(
                h,
                "<p class=\"quarantined\" id=\"identity-conflict-{0}\">IDENTITY CONFLICT: {0} is quarantined: two live connections presented its certificate, from {1} and {2}. Nothing is sent to it until an operator runs <code>fleetweft node release {0}</code> (after <code>fleetweft node revoke-cert {0}</code> if the certificate was copied).</p>",
                escape(&n.name),
                escape(first),
                escape(second)
            );
        }
    }
    h.push_str("<h2>Fleet</h2>\n<table id=\"fleet\"><tr><th>node</th><th>connected</th><th>confirmed release</th><th>live op</th><th>proof</th></tr>\n");
    for n in &s.nodes {
        let proof = d.proofs.iter().find(|p| p.node == n.name);
        let live = match &n.live_op {
            Some(op) if unknown_ops.contains(&op.as_str()) => {
                format!("<td class=\"unknown\">{} UNKNOWN</td>", escape(op))
            }
            Some(op) => format!("<td>{}</td>", escape(op)),
            None => "<td>-</td>".to_string(),
        };
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td><code>{}</code></td>{live}{}</tr>",
            escape(&n.name),
            if n.connected { "yes" } else { "no" },
            escape(&short(&n.confirmed)),
            match proof {
                _ if n.quarantined.is_some() => {
                    "<td class=\"quarantined\">QUARANTINED</td>".to_string()
                }
                _ if n.drifted => "<td class=\"drifted\">DRIFTED</td>".to_string(),
                Some(p) => verdict_cell(p.verdict),
                None => "<td>-</td>".to_string(),
            },
        );
    }
    h.push_str("</table>\n");

    h.push_str("<h2>Rollouts</h2>\n");
    if s.rollouts.is_empty() {
        h.push_str("<p>no rollouts</p>\n");
    } else {
        h.push_str("<table id=\"rollouts\"><tr><th>rollout</th><th>release</th><th>status</th><th>progress</th><th>slots (occupied / max, UNKNOWN counted)</th><th>ops</th></tr>\n");
    }
    for r in &s.rollouts {
        let ops: Vec<_> = s.ops.iter().filter(|o| o.rollout == r.id).collect();
        let nodes = 1 + r.followers.len();
        let settled = ops.iter().filter(|o| o.phase == "settled").count();
        let unknown_here = ops
            .iter()
            .filter(|o| o.unknown.is_some() && o.holds_slot)
            .count();
        let mut op_cells = String::new();
        for o in &ops {
            let (class, label) = match (&o.unknown, &o.outcome) {
                (Some(u), _) if o.holds_slot => ("unknown", format!("UNKNOWN ({u})")),
                (_, Some(out)) if out == "verified" => ("ok", out.clone()),
                (_, Some(out)) => ("", out.clone()),
                _ => ("waiting", o.phase.clone()),
            };
            let _ = write!(
                op_cells,
                "<span class=\"{class}\">{} {}: {}</span><br>",
                escape(&o.id),
                escape(&o.node),
                escape(&label)
            );
        }
        let status = match &r.paused_reason {
            Some(p) => format!("{} ({})", r.status, p),
            None => r.status.clone(),
        };
        let slots_class = if unknown_here > 0 {
            " class=\"unknown\""
        } else {
            ""
        };
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td><code>{}</code></td><td>{}</td><td>{settled} / {nodes} nodes settled</td>\
             <td{slots_class}>{} / {}{}</td><td>{op_cells}</td></tr>",
            escape(&r.id),
            escape(&crate::cli_ops::short(&r.release)),
            escape(&status),
            r.slots_occupied,
            r.slots_max,
            if unknown_here > 0 {
                format!(" ({unknown_here} UNKNOWN)")
            } else {
                String::new()
            },
        );
    }
    if !s.rollouts.is_empty() {
        h.push_str("</table>\n");
    }

    h.push_str("<h2>Unresolved (handover)</h2>\n");
    if d.unresolved.is_empty() {
        h.push_str("<p>nothing unresolved</p>\n");
    } else {
        h.push_str("<table id=\"unresolved\"><tr><th>node</th><th>op</th><th>rollout</th><th>phase</th><th>state</th><th>since</th><th>missing evidence</th><th>owner</th><th>review by</th><th>options</th><th>check</th></tr>\n");
    }
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
    if !d.unresolved.is_empty() {
        h.push_str("</table>\n");
    }

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

/// Prometheus text exposition of the snapshot.
pub fn metrics(snap: &Snapshot, now: SystemTime) -> String {
    let s = status_dto(snap);
    let mut m = String::new();
    m.push_str("# HELP fleetweft_nodes_drifted Nodes whose latest observation contradicts their confirmed release.\n# TYPE fleetweft_nodes_drifted gauge\n");
    let _ = writeln!(
        m,
        "fleetweft_nodes_drifted {}",
        s.nodes.iter().filter(|n| n.drifted).count()
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
    m.push_str("# HELP fleetweft_slots_occupied Slots held by a rollout's ops (UNKNOWN ops count).\n# TYPE fleetweft_slots_occupied gauge\n");
    for r in &s.rollouts {
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
    for r in &s.rollouts {
        let _ = writeln!(
            m,
            "fleetweft_slots_max{{rollout=\"{}\"}} {}",
            label(&r.id),
            r.slots_max
        );
    }
    // Each op counted once: `unknown` if UNKNOWN and still holding its slot,
    // else by phase.
    let mut counts = [0usize; 5];
    for o in s.ops.iter() {
        let i = if o.unknown.is_some() && o.holds_slot {
            0
        } else {
            match o.phase.as_str() {
                "granted" => 1,
                "decided" => 2,
                "restoring" => 3,
                _ => 4,
            }
        };
        counts[i] += 1;
    }
    m.push_str("# HELP fleetweft_ops Ops by state (each op once; unknown takes precedence over its phase).\n# TYPE fleetweft_ops gauge\n");
    for (state, n) in ["unknown", "granted", "decided", "restoring", "settled"]
        .iter()
        .zip(counts)
    {
        let _ = writeln!(m, "fleetweft_ops{{state=\"{state}\"}} {n}");
    }
    let oldest = snap
        .state
        .ops
        .values()
        .filter(|o| o.unknown.is_some() && o.occupies_slot())
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
    m
}

fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::{escape, render, DashboardData};
    use crate::daemon::api::{NodeDto, StatusDto};

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
        }
    }

    fn page(drifted: bool) -> String {
        let proof = crate::proof::recorded_node_proof(
            &model::controller::ControllerState::default(),
            model::NodeId(0),
            "node-a",
        );
        render(&DashboardData {
            status: StatusDto {
                last_sequence: Some(1),
                generation: 1,
                rollouts: vec![],
                nodes: vec![node(drifted)],
                ops: vec![],
            },
            proofs: vec![crate::proof::NodeProof {
                verdict: crate::proof::Verdict::Verified,
                ..proof
            }],
            unresolved: vec![],
            events: vec![],
        })
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

    #[test]
    fn escape_covers_markup_and_quotes() {
        assert_eq!(
            escape(r#"<a href="x">&'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;"
        );
    }
}
