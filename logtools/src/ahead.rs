//! Agents ahead of the log: a node whose agent says it accepted a higher
//! generation than the controller's log has reached. The log is then behind
//! what the fleet did (typically an older backup of the controller's data
//! was restored), so its ops, op ids and generations may repeat ones the
//! agents already acted on.
//!
//! An observation of the runtime, not a rule: nothing of it is written to
//! the event log and the model decides nothing on it. The core folds every
//! durable `NodeHello` (the generation the agent last accepted) and
//! `StaleCommandRejected` (the generation the agent refused for) into it,
//! from the whole log at start and then as events become durable. One entry
//! per node at most: bounded by the fleet.

use model::controller::Event;
use model::{Generation, NodeId};

/// The highest generation each node reported above the controller's own.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AheadOfLog {
    /// Node -> the highest generation it reported, kept only while it is
    /// above the controller's current generation.
    seen: imbl::OrdMap<NodeId, Generation>,
}

impl AheadOfLog {
    /// From the nodes a snapshot's annex names (node -> the generation it
    /// said it has).
    pub fn from_nodes(seen: imbl::OrdMap<NodeId, Generation>) -> Self {
        AheadOfLog { seen }
    }

    /// Note `event`, the controller's generation being `current` after it.
    /// Returns `Some((node, reported))` when the node reported a generation
    /// above `current` and above anything it reported before: the caller
    /// says so once (not per message).
    pub fn record(&mut self, event: &Event, current: Generation) -> Option<(NodeId, Generation)> {
        let (node, reported) = match *event {
            Event::NodeHello {
                node, generation, ..
            } => (node, generation),
            Event::StaleCommandRejected { node, accepted, .. } => (node, accepted),
            _ => return None,
        };
        if reported <= current {
            return None;
        }
        match self.seen.get(&node) {
            Some(known) if *known >= reported => None,
            _ => {
                self.seen.insert(node, reported);
                Some((node, reported))
            }
        }
    }

    /// Forget every node the controller's generation caught up with (a new
    /// rollout bumped it to or past what the node reported).
    pub fn caught_up(&mut self, current: Generation) {
        let behind: Vec<NodeId> = self
            .seen
            .iter()
            .filter(|(_, g)| **g <= current)
            .map(|(n, _)| *n)
            .collect();
        for node in behind {
            self.seen.remove(&node);
        }
    }

    /// Forget `node` (retired: its agent is refused from now on).
    pub fn forget(&mut self, node: NodeId) {
        self.seen.remove(&node);
    }

    /// The nodes ahead of the log and what each reported, in node order.
    pub fn nodes(&self) -> &imbl::OrdMap<NodeId, Generation> {
        &self.seen
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello(node: u32, generation: u64) -> Event {
        Event::NodeHello {
            node: NodeId(node),
            serving: None,
            generation: Generation(generation),
        }
    }

    #[test]
    fn a_higher_generation_is_noted_once_per_node_and_generation() {
        let mut ahead = AheadOfLog::default();
        let current = Generation(2);
        assert_eq!(
            ahead.record(&hello(0, 2), current),
            None,
            "equal: not ahead"
        );
        assert_eq!(
            ahead.record(&hello(0, 1), current),
            None,
            "behind: not ahead"
        );
        assert_eq!(
            ahead.record(&hello(0, 3), current),
            Some((NodeId(0), Generation(3)))
        );
        assert_eq!(ahead.record(&hello(0, 3), current), None, "said once");
        assert_eq!(ahead.record(&hello(0, 2), current), None);
        let rejected = Event::StaleCommandRejected {
            node: NodeId(0),
            op: model::OpId(4),
            generation: Generation(2),
            accepted: Generation(4),
        };
        assert_eq!(
            ahead.record(&rejected, current),
            Some((NodeId(0), Generation(4))),
            "a higher one is said again"
        );
        assert_eq!(ahead.nodes().get(&NodeId(0)), Some(&Generation(4)));
        assert_eq!(ahead.nodes().len(), 1, "one entry per node");
    }

    #[test]
    fn a_node_is_forgotten_once_the_controller_catches_up() {
        let mut ahead = AheadOfLog::default();
        ahead.record(&hello(0, 3), Generation(2));
        ahead.record(&hello(1, 5), Generation(2));
        ahead.caught_up(Generation(3));
        assert_eq!(
            ahead.nodes().keys().copied().collect::<Vec<_>>(),
            vec![NodeId(1)]
        );
        ahead.forget(NodeId(1));
        assert!(ahead.nodes().is_empty());
    }
}
