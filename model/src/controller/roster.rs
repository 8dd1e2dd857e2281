//! The fleet roster: which nodes are enrolled, under which name, with which
//! labels and public route, and which are retired. A node joins the fleet
//! through a durable `NodeEnrolled` event; its [`NodeId`] is its enrollment
//! order in the log, so the identity of a node never depends on a config
//! file's order.
//!
//! The roster is folded by `apply` like the rest of the state and decided
//! here (`enroll`, `label`, `retire`, called from `decide`), so the rules of enrollment are written once.

use crate::ids::NodeId;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Longest node name, in bytes: one DNS label, so `<name>.nodes.fleetweft`
/// is a valid certificate SAN (the same bound the PKI enforces).
pub const NODE_NAME_BYTES_MAX: usize = 63;
/// Most labels one node carries: a selector matches against them, and an
/// event carries them whole, so they stay few and short.
pub const LABELS_PER_NODE_MAX: usize = 16;
/// Longest label key, in bytes.
pub const LABEL_KEY_BYTES_MAX: usize = 63;
/// Longest label value, in bytes.
pub const LABEL_VALUE_BYTES_MAX: usize = 63;
/// Longest public route text, in bytes (an address such as
/// `[2001:db8::1]:8080`; the runtime parses and validates it).
pub const PUBLIC_ROUTE_BYTES_MAX: usize = 256;

/// Labels of a node: key → value, both `[a-z0-9._-]`, bounded by the
/// limits above.
pub type Labels = BTreeMap<String, String>;

/// One enrolled node.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct RosterEntry {
    /// The node's name: the node id its certificate carries.
    pub name: String,
    /// Its labels, matched by rollout selectors.
    pub labels: Labels,
    /// Its public route, as an address text.
    pub public: String,
    /// Retired: nothing is granted to it and its agent is refused. Kept so
    /// its id and name are never reused (the log still names them).
    pub retired: bool,
}

/// Every node ever enrolled, indexed by [`NodeId`] (enrollment order), and
/// a name → id index.
/// Persistent collections, as the rest of the state: cloning the state
/// in `step` must not copy a 100,000-node roster.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Roster {
    entries: imbl::Vector<RosterEntry>,
    by_name: imbl::OrdMap<String, NodeId>,
    /// Index: how many entries are retired, so a summary needs no scan.
    #[serde(default)]
    retired: usize,
}

impl Roster {
    /// The id the next enrolled node takes: its enrollment order.
    pub fn next_id(&self) -> NodeId {
        NodeId(self.entries.len() as u32)
    }

    /// How many nodes were ever enrolled (retired ones included).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// No node was ever enrolled.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entry of `node`, if it was enrolled.
    pub fn get(&self, node: NodeId) -> Option<&RosterEntry> {
        self.entries.get(node.0 as usize)
    }

    /// The id enrolled under `name`, retired or not.
    pub fn id(&self, name: &str) -> Option<NodeId> {
        self.by_name.get(name).copied()
    }

    /// The id of `name` if it is enrolled and not retired: whom the
    /// controller accepts a connection from.
    pub fn active_id(&self, name: &str) -> Option<NodeId> {
        self.id(name).filter(|n| !self.is_retired(*n))
    }

    /// The name of `node`, if it was enrolled.
    pub fn name(&self, node: NodeId) -> Option<&str> {
        self.get(node).map(|e| e.name.as_str())
    }

    /// The name of `node`, or its model id text when it was never enrolled
    /// (a log written before enrollment existed).
    pub fn display_name(&self, node: NodeId) -> String {
        self.name(node)
            .map_or_else(|| node.to_string(), str::to_string)
    }

    /// How many enrolled nodes are retired (an index, no scan).
    pub fn retired_count(&self) -> usize {
        self.retired
    }

    /// Whether `node` is enrolled and retired.
    pub fn is_retired(&self, node: NodeId) -> bool {
        self.get(node).is_some_and(|e| e.retired)
    }

    /// Every enrolled node in enrollment order.
    pub fn iter(&self) -> impl Iterator<Item = (NodeId, &RosterEntry)> {
        self.entries
            .iter()
            .enumerate()
            .map(|(i, e)| (NodeId(i as u32), e))
    }

    /// The enrolled, not retired nodes whose labels hold every pair of
    /// `selector`, in enrollment order.
    pub fn select<'a>(&'a self, selector: &'a Labels) -> impl Iterator<Item = NodeId> + 'a {
        self.iter()
            .filter(move |(_, e)| {
                !e.retired && selector.iter().all(|(k, v)| e.labels.get(k) == Some(v))
            })
            .map(|(id, _)| id)
    }

    /// Fold `NodeEnrolled`. `referents_exist` checked the id is the next
    /// and the name is fresh.
    pub fn enroll(&mut self, node: NodeId, name: &str, labels: &Labels, public: &str) {
        assert_eq!(node, self.next_id(), "enrollment out of order");
        self.by_name.insert(name.to_string(), node);
        self.entries.push_back(RosterEntry {
            name: name.to_string(),
            labels: labels.clone(),
            public: public.to_string(),
            retired: false,
        });
    }

    /// Fold `NodeLabeled`: the event carries the node's whole label set.
    pub fn relabel(&mut self, node: NodeId, labels: &Labels) {
        if let Some(e) = self.entries.get_mut(node.0 as usize) {
            e.labels = labels.clone();
        }
    }

    /// Fold `NodeRetired`.
    pub fn retire(&mut self, node: NodeId) {
        if let Some(e) = self.entries.get_mut(node.0 as usize) {
            // Retiring twice is refused by `decide`; count each node once
            // all the same, so the index cannot drift from the entries.
            if !e.retired {
                self.retired += 1;
            }
            e.retired = true;
        }
    }
}

/// Why a name, a label or a route cannot go into the roster.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RosterLimit {
    /// A name that is not `[a-z0-9-]{1,63}`.
    Name(String),
    /// More than [`LABELS_PER_NODE_MAX`] labels.
    TooManyLabels(usize),
    /// A label key or value that is empty, too long, or not `[a-z0-9._-]`.
    Label(String),
    /// An empty public route or one over [`PUBLIC_ROUTE_BYTES_MAX`] bytes.
    Public(String),
    /// [`crate::plan::NODES_MAX`] nodes are enrolled already.
    RosterFull,
}

impl std::fmt::Display for RosterLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RosterLimit::Name(n) => write!(
                f,
                "node name {n:?} must be 1 to {NODE_NAME_BYTES_MAX} characters of a-z, 0-9 and '-'"
            ),
            RosterLimit::TooManyLabels(c) => {
                write!(f, "{c} labels exceed the limit of {LABELS_PER_NODE_MAX}")
            }
            RosterLimit::Label(l) => write!(
                f,
                "label {l:?}: key and value must be 1 to {LABEL_KEY_BYTES_MAX} characters of a-z, 0-9, '.', '_' and '-'"
            ),
            RosterLimit::Public(p) => write!(
                f,
                "public route {p:?} must be 1 to {PUBLIC_ROUTE_BYTES_MAX} bytes"
            ),
            RosterLimit::RosterFull => write!(
                f,
                "{} nodes are enrolled already (the limit)",
                crate::plan::NODES_MAX
            ),
        }
    }
}

/// Whether `name` can be a node's name (and its certificate's node id).
pub fn validate_name(name: &str) -> Result<(), RosterLimit> {
    let ok = !name.is_empty()
        && name.len() <= NODE_NAME_BYTES_MAX
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(RosterLimit::Name(name.to_string()))
    }
}

/// Whether `labels` fit the limits. Keys and values avoid `,` and `=` so a
/// selector `k=v,k2=v2` is unambiguous.
pub fn validate_labels(labels: &Labels) -> Result<(), RosterLimit> {
    if labels.len() > LABELS_PER_NODE_MAX {
        return Err(RosterLimit::TooManyLabels(labels.len()));
    }
    let word = |s: &str, max: usize| {
        !s.is_empty()
            && s.len() <= max
            && s.bytes().all(|b| {
                b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'-' | b'_' | b'.')
            })
    };
    for (k, v) in labels {
        if !word(k, LABEL_KEY_BYTES_MAX) || !word(v, LABEL_VALUE_BYTES_MAX) {
            return Err(RosterLimit::Label(format!("{k}={v}")));
        }
    }
    Ok(())
}

/// Whether `public` fits: non-empty, bounded, no control characters. The
/// runtime checks it is an address it can probe.
pub fn validate_public(public: &str) -> Result<(), RosterLimit> {
    let ok = !public.is_empty()
        && public.len() <= PUBLIC_ROUTE_BYTES_MAX
        && !public.chars().any(char::is_control);
    if ok {
        Ok(())
    } else {
        Err(RosterLimit::Public(public.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::{Labels, Roster};
    use crate::ids::NodeId;

    /// The retired index counts each retired node once, as the entries say.
    #[test]
    fn retired_count_follows_the_entries() {
        let mut roster = Roster::default();
        for (i, name) in ["a", "b", "c"].iter().enumerate() {
            roster.enroll(NodeId(i as u32), name, &Labels::new(), "127.0.0.1:1");
        }
        assert_eq!(roster.retired_count(), 0);
        roster.retire(NodeId(1));
        roster.retire(NodeId(1));
        roster.retire(NodeId(7));
        let by_scan = roster.iter().filter(|(_, e)| e.retired).count();
        assert_eq!(roster.retired_count(), 1);
        assert_eq!(roster.retired_count(), by_scan);
    }
}
