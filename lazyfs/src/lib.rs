//! A lazy filesystem for power-loss tests.
//!
//! [`LazyMount`] mounts a FUSE pass-through view of a backing directory.
//! Reads, `getattr` and `readdir` see the current state (pending changes
//! included, like a page cache), but nothing reaches the backing directory
//! until it is synced:
//!
//! * file data (writes, truncates) becomes durable at that file's `fsync` or
//!   `fdatasync`; `close` does not make it durable;
//! * a directory entry change (create, mkdir, rename, unlink, rmdir) becomes
//!   durable when its parent directory is fsynced.
//!
//! A *cut* ([`LazyMount::cut`], writing `cut` to [`CTL_NAME`] at the mount
//! root, or the Nth sync with [`LazyConfig::cut_at_sync`]) drops everything
//! pending: the mount then serves the durable state, which is exactly what
//! the backing directory holds. See `lazyfs/README.md` for the model and
//! what it does not cover.

#![warn(missing_docs)]
// Production functions stay within 70 lines (clippy.toml, issue #22 item 6);
// tests may run longer.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

pub mod enumerate;
mod fs;
mod mount;
mod ns;
mod power;
mod state;

pub use mount::LazyMount;
pub use power::PowerLine;
pub use state::{CutReport, CTL_NAME, PENDING_BYTES_MAX, STORE_NAME};

use std::path::PathBuf;

/// Default tear granularity in bytes: one page / one common disk block.
pub const DEFAULT_BLOCK_BYTES: u64 = 4096;

/// What a cut does to the last pending write of each file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TearMode {
    /// Drop the pending write entirely (the durable content stays as synced).
    #[default]
    None,
    /// Keep the first `floor(whole_blocks / 2)` whole blocks of the last
    /// pending write and write zeros over the rest of its range.
    Zero,
    /// Like `Zero`, but the rest of the range gets deterministic garbage
    /// (a pseudo-random stream seeded by the write's offset).
    Garbage,
}

/// How to mount a lazy filesystem.
#[derive(Debug, Clone)]
pub struct LazyConfig {
    /// The directory holding the durable state (it must exist).
    pub backing: PathBuf,
    /// Whether a cut tears the last pending write of each file.
    pub tear: TearMode,
    /// Tear granularity in bytes (must be > 0 when `tear` is not `None`).
    pub block_bytes: u64,
    /// If `Some(n)`, the nth `fsync`/`fsyncdir` call (counted from 1 since
    /// the mount) performs a cut instead of syncing and fails with `EIO`.
    pub cut_at_sync: Option<u64>,
    /// A power line shared with other mounts ([`PowerLine`]): once it has
    /// tripped, every sync on this mount is held unanswered until the next
    /// cut. `None`: syncs are never held.
    pub power: Option<PowerLine>,
}

impl LazyConfig {
    /// A config with no tearing and no automatic cut.
    pub fn new(backing: impl Into<PathBuf>) -> LazyConfig {
        LazyConfig {
            backing: backing.into(),
            tear: TearMode::None,
            block_bytes: DEFAULT_BLOCK_BYTES,
            cut_at_sync: None,
            power: None,
        }
    }
}

/// Why mounting failed.
#[derive(Debug, thiserror::Error)]
pub enum LazyError {
    /// The backing directory is missing or unreadable.
    #[error("backing directory {path}: {source}")]
    Backing {
        /// The backing directory.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The configuration is inconsistent.
    #[error("invalid config: {0}")]
    Config(String),
    /// The FUSE mount itself failed (no `/dev/fuse`, not root, ...).
    #[error("mounting FUSE at {path}: {source}")]
    Mount {
        /// The mountpoint.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
}
