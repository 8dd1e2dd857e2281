//! The stored releases as every surface shows them (`GET /api/releases`,
//! `DELETE /api/releases/{digest}`, `fleetweft bundle list|rm`): what the
//! controller holds, and what in its state still names each release
//! ([`model::controller::ReleaseUse`], the model's rule), in one wording.

use model::controller::{ReleaseUse, Roster};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// `GET /api/releases`: the releases the controller holds.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, ToSchema)]
pub struct ReleaseList {
    /// Format-1 bundles first, then format-2 releases, each in digest order.
    pub releases: Vec<ReleaseDto>,
    /// Chunks in the controller's chunk store (shared ones once).
    pub chunks: u64,
    /// Their bytes.
    pub chunk_bytes: u64,
}

/// One stored release.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, ToSchema)]
pub struct ReleaseDto {
    /// Its release digest (hex).
    pub digest: String,
    /// 1: one signed file; 2: a signed manifest and content chunks.
    pub format: u16,
    /// The manifest's name (empty when it cannot be read).
    pub name: String,
    /// The manifest's version (empty when it cannot be read).
    pub version: String,
    /// What it unpacks to, in bytes: the app file or the tree's files.
    pub content_bytes: u64,
    /// Distinct chunks it names (0 for format 1).
    pub chunks: u64,
    /// Why the stored file is not served (unreadable, damaged, refused).
    pub problem: Option<String>,
    /// What names it; `null` when nothing does and it may be removed.
    pub in_use: Option<ReleaseUseDto>,
}

/// What in the controller's state names a release.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, ToSchema)]
pub struct ReleaseUseDto {
    /// Rollouts of it still active, or intended for some node (`r3`).
    pub rollouts: Vec<String>,
    /// Nodes (not retired) confirmed on it, saying they serve it, or last
    /// observed serving it.
    pub nodes: u64,
    /// Unsettled ops moving a node to it or restoring it.
    pub ops: u64,
    /// The same in words, naming the first node and op.
    pub text: String,
}

/// `DELETE /api/releases/{digest}`: what was removed and freed.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, ToSchema)]
pub struct RemoveReply {
    /// The release removed.
    pub release: ReleaseDto,
    /// Its chunks no other release names, removed.
    pub chunks_removed: u64,
    /// Their bytes.
    pub chunk_bytes_freed: u64,
    /// Chunks no release names, older than a day (an upload abandoned, a
    /// removal a crash cut short), removed.
    pub orphans_removed: u64,
    /// Their bytes.
    pub orphan_bytes_freed: u64,
    /// Why chunks that could have gone were kept; a later removal sweeps
    /// them.
    pub sweep_problem: Option<String>,
}

/// What names a release, in the one wording of the API, the CLI and the
/// refusal of a removal.
pub fn release_use(roster: &Roster, uses: &ReleaseUse) -> ReleaseUseDto {
    let rollouts: Vec<String> = uses.rollouts.iter().map(|r| r.to_string()).collect();
    let mut parts = Vec::new();
    if !rollouts.is_empty() {
        parts.push(format!("rollout {} deploys it", rollouts.join(", ")));
    }
    if let Some(node) = uses.node_example {
        let name = roster.display_name(node);
        parts.push(format!("{} node(s) run it ({name}", uses.nodes) + more(uses.nodes));
    }
    if let Some(op) = uses.op_example {
        parts.push(format!("{} unsettled op(s) name it ({op}", uses.ops) + more(uses.ops));
    }
    ReleaseUseDto {
        rollouts,
        nodes: uses.nodes,
        ops: uses.ops,
        text: parts.join("; "),
    }
}

fn more(count: u64) -> &'static str {
    if count > 1 {
        ", ...)"
    } else {
        ")"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::{NodeId, OpId, RolloutId};

    #[test]
    fn a_use_is_worded_with_its_first_node_and_op() {
        let mut roster = Roster::default();
        roster.enroll(NodeId(0), "node-a", &Default::default(), "127.0.0.1:1");
        let uses = ReleaseUse {
            rollouts: [RolloutId(3)].into(),
            nodes: 40,
            node_example: Some(NodeId(0)),
            ops: 1,
            op_example: Some(OpId(7)),
        };
        let dto = release_use(&roster, &uses);
        assert_eq!(
            dto.text,
            "rollout r3 deploys it; 40 node(s) run it (node-a, ...); 1 unsettled op(s) name it (op7)"
        );
        assert_eq!(
            (dto.rollouts, dto.nodes, dto.ops),
            (vec!["r3".to_string()], 40, 1)
        );
    }
}
