//! Architectures and operating systems (issue #24 item 5): what an agent
//! says it runs on, what a release carries trees for, and the rule that
//! joins them: a rollout may only select nodes the release has a tree for.
//!
//! The agent declares its platform on every connection (right after its
//! `Hello`, [`crate::ToController::Platform`]); the controller records it
//! durably (`Event::NodePlatform`) as the node's `arch` label. A release
//! is either architecture-independent ([`ReleaseArches::Any`]: a format-1
//! bundle or a tree without per-architecture trees, which runs anywhere,
//! as before) or carries a tree for each architecture in a set
//! ([`ReleaseArches::Only`]).

use serde::{Deserialize, Serialize};
use std::fmt;

/// A CPU architecture, as `std::env::consts::ARCH` names it. Only the two
/// a release can carry a tree for are told apart; any other is `Other`
/// (recorded, so a tree release is refused on it by name). New variants
/// are appended last (bincode numbers them by position).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Arch {
    /// 64-bit x86 (`x86_64`).
    X86_64,
    /// 64-bit ARM (`aarch64`).
    Aarch64,
    /// Any other architecture: no release carries a tree for it.
    Other,
}

impl Arch {
    /// The architectures a release may carry a tree for, in order.
    pub const WITH_TREES: [Arch; 2] = [Arch::X86_64, Arch::Aarch64];

    /// The architecture `std::env::consts::ARCH` names (`Other` for any
    /// but `x86_64` and `aarch64`).
    pub fn from_name(name: &str) -> Arch {
        match name {
            "x86_64" => Arch::X86_64,
            "aarch64" => Arch::Aarch64,
            _ => Arch::Other,
        }
    }

    /// A name a flag or a manifest may use: `x86_64`, `aarch64` (also
    /// `amd64`, `arm64`, the Debian names). `None` for anything else.
    pub fn parse_tree_arch(name: &str) -> Option<Arch> {
        match name {
            "x86_64" | "amd64" => Some(Arch::X86_64),
            "aarch64" | "arm64" => Some(Arch::Aarch64),
            _ => None,
        }
    }

    /// The architecture this process runs on.
    pub fn current() -> Arch {
        Arch::from_name(std::env::consts::ARCH)
    }

    /// Its name, as `std::env::consts::ARCH` spells it.
    pub fn name(self) -> &'static str {
        match self {
            Arch::X86_64 => "x86_64",
            Arch::Aarch64 => "aarch64",
            Arch::Other => "other",
        }
    }

    /// Its bit in an [`ArchSet`] (`Other` has none: no tree is for it).
    fn bit(self) -> u8 {
        match self {
            Arch::X86_64 => 1,
            Arch::Aarch64 => 2,
            Arch::Other => 0,
        }
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An operating system, as `std::env::consts::OS` names it. Recorded and
/// shown; no rule uses it yet. New variants are appended last.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Os {
    /// `linux`.
    Linux,
    /// `macos`.
    Macos,
    /// Anything else.
    Other,
}

impl Os {
    /// The system `std::env::consts::OS` names.
    pub fn from_name(name: &str) -> Os {
        match name {
            "linux" => Os::Linux,
            "macos" => Os::Macos,
            _ => Os::Other,
        }
    }

    /// The system this process runs on.
    pub fn current() -> Os {
        Os::from_name(std::env::consts::OS)
    }

    /// Its name, as `std::env::consts::OS` spells it.
    pub fn name(self) -> &'static str {
        match self {
            Os::Linux => "linux",
            Os::Macos => "macos",
            Os::Other => "other",
        }
    }
}

impl fmt::Display for Os {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What an agent says it runs on (two bytes in a node's record).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Platform {
    /// Its CPU architecture.
    pub arch: Arch,
    /// Its operating system.
    pub os: Os,
}

impl Platform {
    /// The platform this process runs on.
    pub fn current() -> Platform {
        Platform {
            arch: Arch::current(),
            os: Os::current(),
        }
    }
}

impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.os, self.arch)
    }
}

/// A set of architectures with trees (a bit per [`Arch::WITH_TREES`]).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct ArchSet(u8);

impl ArchSet {
    /// The set of `arches` (`Other` is never in a set).
    pub fn of(arches: impl IntoIterator<Item = Arch>) -> ArchSet {
        ArchSet(arches.into_iter().fold(0, |bits, a| bits | a.bit()))
    }

    /// Whether `arch` is in the set.
    pub fn contains(self, arch: Arch) -> bool {
        arch.bit() != 0 && self.0 & arch.bit() != 0
    }

    /// Its architectures, in [`Arch::WITH_TREES`] order.
    pub fn iter(self) -> impl Iterator<Item = Arch> {
        Arch::WITH_TREES
            .into_iter()
            .filter(move |a| self.contains(*a))
    }
}

impl fmt::Display for ArchSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.iter().map(Arch::name).collect();
        if names.is_empty() {
            f.write_str("none")
        } else {
            f.write_str(&names.join(", "))
        }
    }
}

/// Which architectures a release runs on.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub enum ReleaseArches {
    /// Architecture-independent (a format-1 bundle, or a tree without
    /// per-architecture trees): any node may run it, whatever its
    /// architecture, known or not.
    #[default]
    Any,
    /// Only nodes whose recorded architecture is in the set.
    Only(ArchSet),
}

impl ReleaseArches {
    /// Whether a node whose recorded architecture is `arch` (`None`: not
    /// known yet) may be selected. A per-architecture release never runs
    /// on a node whose architecture is not known: nothing says which tree
    /// it would need, and guessing would stage a binary that cannot run.
    pub fn admits(self, arch: Option<Arch>) -> bool {
        match self {
            ReleaseArches::Any => true,
            ReleaseArches::Only(set) => arch.is_some_and(|a| set.contains(a)),
        }
    }
}

/// A node a plan selects that the release has no tree for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArchMismatch {
    /// The node's enrolled name (or its id when it has none).
    pub name: String,
    /// Its recorded architecture; `None` when it never said.
    pub arch: Option<Arch>,
}

impl fmt::Display for ArchMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.arch {
            Some(arch) => write!(f, "{} ({arch})", self.name),
            None => write!(f, "{} (architecture unknown)", self.name),
        }
    }
}

/// The most mismatched nodes a refusal names (the count covers the rest).
pub const ARCH_MISMATCHES_NAMED_MAX: usize = 16;
