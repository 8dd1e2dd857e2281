//! `GET /metrics`: the Prometheus text exposition of one snapshot, in the
//! view layer's words.

use crate::daemon::core::Snapshot;
use crate::daemon::view::{status_dto, words, OpState, StatusDto};
use model::controller::{OpPhase, Outcome};
use std::fmt::Write;
use std::time::SystemTime;

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
        crate::daemon::view::ahead::METRIC,
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
    let rollouts = crate::daemon::view::rollout_dtos(state);
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
