//! A1 a release runs where it has a tree (issue #24 item 5): no op is
//! granted to a node whose recorded architecture the rollout's release has
//! no tree for, nor to a node whose architecture is not known yet when the
//! release is per-architecture. Written apart from the model's
//! `ReleaseArches::admits`: it reads the set and the platform itself.

use crate::{broken, Rule, Violation};
use model::controller::{ControllerState, Event};
use model::platform::ReleaseArches;

/// A1 on one event, against the state before it.
pub fn a1_grant_has_a_tree(before: &ControllerState, event: &Event) -> Result<(), Violation> {
    let Event::OpGranted {
        op, rollout, node, ..
    } = event
    else {
        return Ok(());
    };
    let Some(r) = before.rollout(*rollout) else {
        return Ok(());
    };
    let ReleaseArches::Only(set) = r.arches else {
        return Ok(());
    };
    let arch = before
        .nodes
        .get(node)
        .and_then(|n| n.platform)
        .map(|p| p.arch);
    match arch {
        Some(arch) if set.contains(arch) => Ok(()),
        Some(arch) => broken(
            Rule::ArchHasATree,
            format!("{op} granted to {node}, which runs on {arch}: rollout {rollout}'s release has trees for {set} only"),
        ),
        None => broken(
            Rule::ArchHasATree,
            format!("{op} granted to {node}, whose architecture is not known: rollout {rollout}'s release has trees for {set} only"),
        ),
    }
}
