//! The daemon's part of a snapshot (issue #26 item 1): what the core
//! derives from the whole history and would otherwise rebuild by reading
//! all of it at start. The log index (since when each unresolved thing
//! waits), the nodes ahead of the log, and the count of identity
//! conflicts. Each is bounded by the fleet and the live state, never by
//! history.
//!
//! Layout: magic `FWANNEX1`, then bincode (the workspace's 2.0.1, the
//! event log's encoding) of [`AnnexV1`]. Another magic is refused, so the
//! log skips the snapshot and replays further.

use std::collections::VecDeque;

use api::report::LogIndex;
use model::controller::{ControllerState, Event};
use model::{Generation, NodeId, OpId, RolloutId};
use serde::{Deserialize, Serialize};

use crate::ahead::AheadOfLog;

/// Magic and version of the annex written by this build.
const ANNEX_MAGIC: [u8; 8] = *b"FWANNEX1";

/// Largest annex decoded, in bytes: the event log's bound on a whole
/// snapshot's state (a damaged length cannot make the decoder allocate
/// more).
const ANNEX_BYTES_MAX: usize = eventlog::SNAPSHOT_STATE_BYTES_MAX;

/// What the core rebuilds from history at start, as of one sequence.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Derived {
    /// Since when each unresolved thing waits.
    pub log_index: LogIndex,
    /// Nodes that said they are ahead of the log.
    pub ahead: AheadOfLog,
    /// `NodeQuarantined` events so far (identity conflicts seen).
    pub identity_conflicts: u64,
}

/// The stored form: plain vectors, sorted, so equal annexes are equal
/// bytes.
#[derive(Serialize, Deserialize)]
struct AnnexV1 {
    granted: Vec<(OpId, u64)>,
    unknown: Vec<(OpId, u64)>,
    waiting: Vec<(RolloutId, u64)>,
    quarantined: Vec<(NodeId, u64)>,
    node_granted: Vec<(NodeId, u64)>,
    hello: Vec<(NodeId, u64)>,
    reported: Vec<(NodeId, u64)>,
    ahead: Vec<(NodeId, Generation)>,
    identity_conflicts: u64,
}

fn sorted<K: Ord + Copy + std::hash::Hash, V: Copy>(map: &imbl::HashMap<K, V>) -> Vec<(K, V)> {
    let mut pairs: Vec<(K, V)> = map.iter().map(|(k, v)| (*k, *v)).collect();
    pairs.sort_unstable_by_key(|(k, _)| *k);
    pairs
}

fn codec() -> impl bincode::config::Config {
    bincode::config::standard().with_limit::<ANNEX_BYTES_MAX>()
}

impl Derived {
    /// Rebuilt from `start` (a snapshot's annex, or nothing for genesis)
    /// and the events after it; `state` is the state after all of them.
    pub fn rebuild(start: Option<Derived>, tail: &[(u64, Event)], state: &ControllerState) -> Self {
        let mut derived = start.unwrap_or_default();
        for (sequence, event) in tail {
            derived.log_index.record(*sequence, event, state);
            match event {
                Event::NodeRetired { node } => derived.ahead.forget(*node),
                Event::NodeQuarantined { .. } => derived.identity_conflicts += 1,
                other => {
                    derived.ahead.record(other, state.generation);
                }
            }
        }
        derived.ahead.caught_up(state.generation);
        derived
    }

    /// Encodes the annex.
    pub fn encode(&self) -> Result<Vec<u8>, String> {
        let i = &self.log_index;
        let stored = AnnexV1 {
            granted: sorted(&i.granted),
            unknown: sorted(&i.unknown),
            waiting: sorted(&i.waiting),
            quarantined: sorted(&i.quarantined),
            node_granted: sorted(&i.node_granted),
            hello: sorted(&i.hello),
            reported: sorted(&i.reported),
            ahead: self.ahead.nodes().iter().map(|(n, g)| (*n, *g)).collect(),
            identity_conflicts: self.identity_conflicts,
        };
        let mut bytes = ANNEX_MAGIC.to_vec();
        bincode::serde::encode_into_std_write(&stored, &mut bytes, codec())
            .map_err(|e| format!("encoding the annex: {e}"))?;
        Ok(bytes)
    }

    /// Decodes an annex written by [`Derived::encode`]; the error names
    /// what is wrong.
    pub fn decode(bytes: &[u8]) -> Result<Self, String> {
        let Some(body) = bytes.strip_prefix(&ANNEX_MAGIC) else {
            return Err(format!(
                "the annex does not start with {:?}",
                String::from_utf8_lossy(&ANNEX_MAGIC)
            ));
        };
        let (stored, read): (AnnexV1, usize) =
            bincode::serde::decode_from_slice(body, codec()).map_err(|e| e.to_string())?;
        if read != body.len() {
            return Err(format!(
                "{} trailing bytes after the annex",
                body.len() - read
            ));
        }
        let log_index = LogIndex {
            granted: stored.granted.into_iter().collect(),
            unknown: stored.unknown.into_iter().collect(),
            waiting: stored.waiting.into_iter().collect(),
            quarantined: stored.quarantined.into_iter().collect(),
            node_granted: stored.node_granted.into_iter().collect(),
            hello: stored.hello.into_iter().collect(),
            reported: stored.reported.into_iter().collect(),
        };
        Ok(Derived {
            log_index,
            ahead: AheadOfLog::from_nodes(stored.ahead.into_iter().collect()),
            identity_conflicts: stored.identity_conflicts,
        })
    }
}

/// The newest events kept for the API's feed after a start: the tail,
/// at most `max`.
pub fn feed(tail: Vec<(u64, Event)>, max: usize) -> VecDeque<(u64, Event)> {
    let mut history = VecDeque::from(tail);
    let excess = history.len().saturating_sub(max);
    history.drain(..excess);
    history
}

#[cfg(test)]
mod tests {
    use super::*;

    fn derived() -> Derived {
        let mut d = Derived::default();
        d.log_index.granted.insert(OpId(3), 17);
        d.log_index.unknown.insert(OpId(3), 21);
        d.log_index.waiting.insert(RolloutId(1), 9);
        d.log_index.hello.insert(NodeId(2), 30);
        d.ahead = AheadOfLog::from_nodes([(NodeId(2), Generation(7))].into_iter().collect());
        d.identity_conflicts = 2;
        d
    }

    #[test]
    fn an_annex_round_trips() {
        let d = derived();
        let bytes = d.encode().expect("encodes");
        assert_eq!(Derived::decode(&bytes).expect("decodes"), d);
    }

    #[test]
    fn a_damaged_annex_is_refused_naming_why() {
        let bytes = derived().encode().expect("encodes");
        let err = Derived::decode(&bytes[1..]).expect_err("no magic");
        assert!(err.contains("FWANNEX1"), "{err}");
        let mut longer = bytes.clone();
        longer.push(0);
        let err = Derived::decode(&longer).expect_err("trailing");
        assert!(err.contains("trailing"), "{err}");
        assert!(Derived::decode(&bytes[..bytes.len() - 1]).is_err());
    }
}
