//! Identity conflicts: two live agents presenting one node's certificate
//! replace each other's connection over and over. A single agent that
//! reconnects replaces a stale connection of its own at most now and then
//! (a restart before the old connection timed out), so
//! [`IDENTITY_CONFLICT_REPLACEMENTS_MIN`] replacements of a still-attached
//! connection within [`IDENTITY_CONFLICT_WINDOW_MS`] is a conflict. The
//! controller's driver notes each replacement with its own monotonic
//! clock (time is an input, as everywhere in this crate) and, when this
//! says so, feeds [`crate::controller::Input::IdentityConflict`].

use crate::ids::NodeId;
use std::collections::{HashMap, VecDeque};

/// The window in which replacements of a node's live connection count
/// towards a conflict, in milliseconds.
pub const IDENTITY_CONFLICT_WINDOW_MS: u64 = 10_000;
/// Replacements of a node's live connection within the window that make an
/// identity conflict. Two fighting agents reach it within a few seconds
/// (each reconnects after its 200 ms base backoff; the issue measured 64 in
/// 10 s); a restarting agent replaces its stale connection once per
/// restart, and scenario 8 (SIGKILLed in each stage) restarts 4 to 5 times
/// within one window, which 4 here once mistook for a clone.
pub const IDENTITY_CONFLICT_REPLACEMENTS_MIN: usize = 16;

/// Recent replacements of each node's live connection, by the driver's
/// monotonic clock in milliseconds.
#[derive(Debug, Default)]
pub struct ConflictWatch {
    replaced: HashMap<NodeId, VecDeque<u64>>,
}

impl ConflictWatch {
    /// Note that `node`'s live connection was replaced at `now_ms`; true
    /// when that makes an identity conflict.
    pub fn replaced(&mut self, node: NodeId, now_ms: u64) -> bool {
        let times = self.replaced.entry(node).or_default();
        while times
            .front()
            .is_some_and(|t| now_ms.saturating_sub(*t) > IDENTITY_CONFLICT_WINDOW_MS)
        {
            times.pop_front();
        }
        times.push_back(now_ms);
        // Bounded: never more than the threshold is kept.
        while times.len() > IDENTITY_CONFLICT_REPLACEMENTS_MIN {
            times.pop_front();
        }
        assert!(times.len() <= IDENTITY_CONFLICT_REPLACEMENTS_MIN);
        times.len() >= IDENTITY_CONFLICT_REPLACEMENTS_MIN
    }

    /// Forget `node`'s replacements (an operator released it).
    pub fn forget(&mut self, node: NodeId) {
        self.replaced.remove(&node);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: NodeId = NodeId(0);
    const B: NodeId = NodeId(1);

    #[test]
    fn replacements_within_the_window_make_a_conflict() {
        let mut watch = ConflictWatch::default();
        let (t0, step_ms) = (5_000u64, 200u64);
        for i in 0..IDENTITY_CONFLICT_REPLACEMENTS_MIN as u64 - 1 {
            assert!(!watch.replaced(A, t0 + step_ms * i), "{i}");
        }
        // Another node's replacements do not count for A.
        assert!(!watch.replaced(B, t0));
        let last = t0 + step_ms * IDENTITY_CONFLICT_REPLACEMENTS_MIN as u64;
        assert!(watch.replaced(A, last));
    }

    #[test]
    fn occasional_reconnects_never_do() {
        let mut watch = ConflictWatch::default();
        // One replacement a little more often than the window allows for
        // the threshold: never a conflict, however long it goes on.
        let gap = IDENTITY_CONFLICT_WINDOW_MS / (IDENTITY_CONFLICT_REPLACEMENTS_MIN as u64 - 1) + 1;
        for i in 0..100u64 {
            assert!(!watch.replaced(A, i * gap), "replacement {i}");
        }
    }

    #[test]
    fn a_release_starts_the_count_again() {
        let mut watch = ConflictWatch::default();
        for i in 0..IDENTITY_CONFLICT_REPLACEMENTS_MIN as u64 - 1 {
            watch.replaced(A, i);
        }
        watch.forget(A);
        assert!(!watch.replaced(A, 10));
    }
}
