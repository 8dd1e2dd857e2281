//! SPEC §11 S15 / issue #23 item 3: a release is a tree of content chunks
//! fetched by digest, and a fetch survives crashes by resuming from the
//! chunks it verified. What the agent's journal holds of that fetch: which
//! chunks of the op's release it verified ([`ChunkSet`]), and what a
//! re-verification from disk found ([`ChunkReading`]) after a restart or a
//! failed attempt. The recovery table ([`crate::recovery`]) decides on the
//! reading; [`crate::agent`] journals the chunks it keeps.
//!
//! A chunk on disk is absent, partial (a write cut short), torn (written
//! whole but not as it was sent: a crash before its sync) or complete. Only
//! re-verification (its digest recomputed) tells a complete chunk from a
//! torn one, so on restart the journal's own list is never trusted: a chunk
//! that re-verifies is kept, anything else is fetched again.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The most chunks a release has in the model (the set is a 16-bit mask;
/// the checker uses 2 or 3).
pub const CHUNKS_MAX: u8 = 16;

/// Chunks a driver fetches at once. A crash can cut short at most these,
/// so a resume fetches at most this many chunks a second time (the
/// issue's `resume_refetched_bytes` ≤ one chunk).
pub const CHUNKS_IN_FLIGHT_MAX: u8 = 1;

/// A set of chunk indexes of one release (bit `i`: chunk `i`).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct ChunkSet(pub u16);

impl ChunkSet {
    /// No chunk.
    pub const NONE: ChunkSet = ChunkSet(0);

    /// Every chunk of a release of `count` chunks (clamped to
    /// [`CHUNKS_MAX`]).
    pub fn all(count: u8) -> ChunkSet {
        let count = count.min(CHUNKS_MAX);
        ChunkSet(((1u32 << count) - 1) as u16)
    }

    /// Whether chunk `index` is in the set.
    pub fn has(self, index: u8) -> bool {
        index < CHUNKS_MAX && self.0 & (1 << index) != 0
    }

    /// This set plus chunk `index` (unchanged when out of range).
    pub fn with(self, index: u8) -> ChunkSet {
        if index < CHUNKS_MAX {
            ChunkSet(self.0 | (1 << index))
        } else {
            self
        }
    }

    /// This set without the chunks of `other`.
    pub fn without(self, other: ChunkSet) -> ChunkSet {
        ChunkSet(self.0 & !other.0)
    }

    /// Both sets together.
    pub fn union(self, other: ChunkSet) -> ChunkSet {
        ChunkSet(self.0 | other.0)
    }

    /// The chunks in both sets.
    pub fn intersect(self, other: ChunkSet) -> ChunkSet {
        ChunkSet(self.0 & other.0)
    }

    /// Whether every chunk of this set is in `other`.
    pub fn is_subset(self, other: ChunkSet) -> bool {
        self.0 & !other.0 == 0
    }

    /// Whether the set is empty.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// How many chunks are in the set.
    pub fn len(self) -> u8 {
        self.0.count_ones() as u8
    }

    /// The indexes in the set, lowest first.
    pub fn indexes(self) -> impl Iterator<Item = u8> {
        (0..CHUNKS_MAX).filter(move |i| self.has(*i))
    }
}

/// "{0, 2}".
impl fmt::Display for ChunkSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<String> = self.indexes().map(|i| i.to_string()).collect();
        write!(f, "{{{}}}", names.join(", "))
    }
}

/// What re-reading an op's chunks and tree from disk found: each chunk
/// present had its digest recomputed. Never the journal's own claim.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ChunkReading {
    /// Chunks present whose digest matched: complete and good.
    pub verified: ChunkSet,
    /// Chunks present that did not verify (partial or torn): fetched again.
    pub unverified: ChunkSet,
    /// The tree assembled in the release directory, re-verified as a
    /// whole: absent, good, or there but not shown good.
    pub tree: crate::recovery::Observed,
}

/// "verified {0}, unverified {1}, tree Absent".
impl fmt::Display for ChunkReading {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "verified {}, unverified {}, tree {:?}",
            self.verified, self.unverified, self.tree
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_holds_its_chunks_and_prints_them() {
        let set = ChunkSet::NONE.with(0).with(2);
        assert!(set.has(0) && !set.has(1) && set.has(2));
        assert_eq!(set.len(), 2);
        assert_eq!(set.to_string(), "{0, 2}");
        assert!(set.is_subset(ChunkSet::all(3)));
        assert!(!ChunkSet::all(3).is_subset(set));
        assert_eq!(ChunkSet::all(3).without(set), ChunkSet::NONE.with(1));
        assert_eq!(ChunkSet::all(CHUNKS_MAX).len(), CHUNKS_MAX);
        assert_eq!(ChunkSet::all(0), ChunkSet::NONE);
        assert_eq!(ChunkSet::NONE.with(CHUNKS_MAX), ChunkSet::NONE);
    }
}
