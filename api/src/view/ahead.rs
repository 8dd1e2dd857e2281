//! Nodes ahead of the log (`daemon::ahead`): their one wording and shape,
//! for the daemon log, `/api/status` and `fleetweft status`, the dashboard
//! banner, the handover report and `/metrics`.

use crate::view::report::Unresolved;
use crate::view::snapshot::Snapshot;
use model::NodeId;
use serde::{Deserialize, Serialize};

/// Nodes ahead of the log listed in `/api/status` (the count is whole).
pub const STATUS_AHEAD_OF_LOG_MAX: usize = 20;

/// The `/metrics` gauge of nodes ahead of the log.
pub const METRIC: &str = "fleetweft_nodes_ahead_of_log";

/// A node whose agent reported a higher generation than the log reached.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, utoipa::ToSchema)]
pub struct AheadOfLogDto {
    /// The node.
    pub node: String,
    /// The highest generation its agent reported (hello or refusal).
    pub reported_generation: u64,
    /// The controller's current generation, from its log.
    pub log_generation: u64,
    /// The warning, in words ([`sentence`]).
    pub warning: String,
}

/// The warning, once for every surface.
pub fn sentence(node: &str, reported: u64, log: u64) -> String {
    format!(
        "LOG BEHIND THE FLEET: {node} reports generation {reported}, but the controller's log is at \
         generation {log}: the log is missing what the fleet did (an older backup of the \
         controller's data restored?). Start no rollout from this log; stop the controller \
         and restore its newest data"
    )
}

/// The handover report's phase words for such a node.
pub fn phase(reported: u64, log: u64) -> String {
    format!("ahead of the log: reports generation {reported}, the log is at generation {log}")
}

/// How many nodes are ahead of the log.
pub fn count(snap: &Snapshot) -> usize {
    snap.ahead_of_log.len()
}

/// The first `max` nodes ahead of the log, in node order.
pub fn dtos(snap: &Snapshot, max: usize) -> Vec<AheadOfLogDto> {
    let log = snap.state.generation.0;
    snap.ahead_of_log
        .iter()
        .take(max)
        .map(|(node, reported)| {
            let name = snap.state.roster.display_name(*node);
            AheadOfLogDto {
                warning: sentence(&name, reported.0, log),
                node: name,
                reported_generation: reported.0,
                log_generation: log,
            }
        })
        .collect()
}

/// The handover report's entry for each node ahead of the log.
pub fn unresolved(snap: &Snapshot) -> Vec<Unresolved> {
    let log = snap.state.generation.0;
    snap.ahead_of_log
        .iter()
        .map(|(node, reported)| entry(snap, *node, reported.0, log))
        .collect()
}

fn entry(snap: &Snapshot, node: NodeId, reported: u64, log: u64) -> Unresolved {
    let s = &snap.state;
    let name = s.roster.display_name(node);
    let record = s.nodes.get(&node);
    Unresolved {
        node: name.clone(),
        op: "-".into(),
        rollout: "-".into(),
        release: record
            .and_then(|r| r.reported_serving)
            .map(|d| d.to_hex())
            .unwrap_or_default(),
        generation: reported,
        phase: phase(reported, log),
        unknown_reason: None,
        last_confirmed_release: record.and_then(|r| r.confirmed).map(|d| d.to_hex()),
        last_serving_result: None,
        missing_evidence: vec![format!(
            "the controller's log of generations {}..={reported}: what the fleet did after the log ends",
            log + 1
        )],
        owner: None,
        review_by: None,
        options: vec![
            format!(
                "stop the controller, restore the newest copy of its data directory (one at generation {reported} or later), start it again"
            ),
            "if no newer copy exists: keep rollouts stopped and follow docs/operations.md, \"The log is behind the fleet\"".to_string(),
        ],
        check_command: "fleetweft status".to_string(),
        since_sequence: None,
        since: format!("reported by its agent while the log is at generation {log}"),
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixture::fleet;
    use super::super::{handover_report, status_dto};
    use super::*;
    use model::Generation;

    /// A node reporting generation 3 to a controller whose log is at 1:
    /// the status, its count and the handover report say so, in the one
    /// wording; a node that is not ahead is not named.
    #[test]
    fn a_node_ahead_of_the_log_is_in_the_status_and_the_handover_report() {
        let mut snap = fleet(3, 1, 0, 0);
        let log = snap.state.generation.0;
        assert!(status_dto(&snap).ahead_of_log.is_empty());
        assert_eq!(status_dto(&snap).nodes_ahead_of_log, 0);
        let before = handover_report(&snap).len();
        snap.ahead_of_log.insert(NodeId(1), Generation(log + 2));
        let status = status_dto(&snap);
        assert_eq!(status.nodes_ahead_of_log, 1);
        assert_eq!(
            status.ahead_of_log,
            vec![AheadOfLogDto {
                node: "n1".into(),
                reported_generation: log + 2,
                log_generation: log,
                warning: sentence("n1", log + 2, log),
            }]
        );
        let warning = &status.ahead_of_log[0].warning;
        assert!(
            warning.starts_with("LOG BEHIND THE FLEET: n1 reports generation 3")
                && warning.contains("log is at generation 1"),
            "{warning}"
        );
        let report = handover_report(&snap);
        assert_eq!(report.len(), before + 1, "one entry more");
        let first = &report[0];
        assert_eq!(
            (first.node.as_str(), first.phase.as_str(), first.generation),
            ("n1", phase(log + 2, log).as_str(), log + 2),
            "the log behind comes first: {first:?}"
        );
        assert!(
            first.options[0].contains("generation 3 or later"),
            "{first:?}"
        );
    }

    /// The status lists a bounded number of them; the count is whole.
    #[test]
    fn the_status_list_is_bounded() {
        let mut snap = fleet(STATUS_AHEAD_OF_LOG_MAX as u32 + 5, 1, 0, 0);
        let log = snap.state.generation;
        for n in 0..STATUS_AHEAD_OF_LOG_MAX as u32 + 5 {
            snap.ahead_of_log.insert(NodeId(n), Generation(log.0 + 1));
        }
        let status = status_dto(&snap);
        assert_eq!(status.nodes_ahead_of_log, STATUS_AHEAD_OF_LOG_MAX + 5);
        assert_eq!(status.ahead_of_log.len(), STATUS_AHEAD_OF_LOG_MAX);
    }
}
