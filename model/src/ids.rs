//! Identifiers and small value types shared by every part of the model.
//!
//! All of them are `Copy` and fixed-size: the model checker clones and hashes
//! states millions of times per second, so nothing here allocates.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A node of the fleet: its enrollment order. The runtime maps certificate
/// names to these indices through its roster; the model only needs identity
/// and order. At most [`crate::plan::NODES_MAX`] exist.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct NodeId(pub u32);

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // node-a, node-b, ... for the first 26 nodes, node-N afterwards.
        if self.0 < 26 {
            write!(f, "node-{}", (b'a' + self.0 as u8) as char)
        } else {
            write!(f, "node-{}", self.0)
        }
    }
}

/// A rollout: one attempt to move a set of nodes to a release.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct RolloutId(pub u32);

impl fmt::Display for RolloutId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "r{}", self.0)
    }
}

/// An operation: "node N moves to release R under generation G".
/// Op ids are allocated by the controller in grant order and never reused.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct OpId(pub u32);

impl fmt::Display for OpId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "op{}", self.0)
    }
}

/// The fleet-wide release generation. It only grows; every command carries it.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct Generation(pub u64);

impl fmt::Display for Generation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "gen {}", self.0)
    }
}

/// A release's identity: the SHA-256 digest of the bundle bytes.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Digest(pub [u8; 32]);

impl Digest {
    /// A digest whose every byte is `byte`: handy for models and tests, where
    /// releases are named v1, v2, ... rather than hashed.
    pub const fn repeat(byte: u8) -> Self {
        Digest([byte; 32])
    }

    /// Lower-case hex of the whole digest.
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Model releases (all bytes equal and small) print as v1, v2, ...;
        // real digests print as a 12-character hex prefix like git does.
        if self.0.iter().all(|b| *b == self.0[0]) && self.0[0] < 100 {
            write!(f, "v{}", self.0[0])
        } else {
            write!(f, "{}", &self.to_hex()[..12])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_read_like_the_docs() {
        assert_eq!(NodeId(0).to_string(), "node-a");
        assert_eq!(NodeId(2).to_string(), "node-c");
        assert_eq!(NodeId(30).to_string(), "node-30");
        assert_eq!(Digest::repeat(2).to_string(), "v2");
        let mut real = [0u8; 32];
        real[0] = 0xab;
        assert_eq!(Digest(real).to_string(), "ab0000000000");
    }
}
