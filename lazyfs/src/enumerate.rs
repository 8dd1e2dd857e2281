//! Crash-point enumeration in the style of SQLite's crash VFS: run a write
//! path once to count its syncs, then once more for every sync point, on a
//! fresh mount that cuts power exactly there, and check what survived.
//!
//! Why sync points cover every crash point: on this filesystem only a sync
//! changes the durable state. A crash after any operation between two
//! syncs leaves the durable state of the crash at the next sync (the sync
//! that never happened), except for the last pending write, which a
//! tearing cut may half-apply; every run here tears (zeros), so each point
//! is checked at its worst. So `syncs + 1` runs (a cut at each sync, and
//! one after the path returned) visit every durable state a power cut can
//! leave, deterministically.

use crate::{LazyConfig, LazyError, LazyMount, TearMode};
use std::path::Path;

/// Where one run of the write path was cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CutPoint {
    /// Power failed at this sync (1-based): it never returned, and the
    /// write path saw it fail (`EIO`).
    AtSync(u64),
    /// Power failed after the write path returned.
    AfterReturn,
}

/// One enumeration's figures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Enumerated {
    /// Syncs the write path performs when nothing fails.
    pub syncs: u64,
    /// Runs checked (`syncs + 1`).
    pub runs: u64,
}

/// Runs `write` on a mount over a backing directory prepared by `setup`
/// once per crash point and calls `check(mountpoint, point, write_ok)` on
/// what survived each cut (`write_ok`: what the write path returned).
/// `dir` holds the runs' backing and mount directories. `check` panics (it
/// is a test) when the state is wrong.
pub fn every_sync_point(
    dir: &Path,
    setup: impl Fn(&Path),
    write: impl Fn(&Path) -> bool,
    check: impl Fn(&Path, CutPoint, bool),
) -> Result<Enumerated, LazyError> {
    let syncs = {
        let (mount, mnt) = mount_fresh(dir, "count", &setup, None)?;
        assert!(write(&mnt), "the write path must succeed without a cut");
        mount.report().syncs
    };
    let points = (1..=syncs)
        .map(CutPoint::AtSync)
        .chain([CutPoint::AfterReturn]);
    for point in points {
        let cut_at_sync = match point {
            CutPoint::AtSync(n) => Some(n),
            CutPoint::AfterReturn => None,
        };
        let (mount, mnt) = mount_fresh(dir, &format!("{point:?}"), &setup, cut_at_sync)?;
        let ok = write(&mnt);
        // Power is off from the cut point on: whatever the path did after
        // its failed sync never happened either.
        mount.cut();
        check(&mnt, point, ok);
    }
    Ok(Enumerated {
        syncs,
        runs: syncs + 1,
    })
}

fn mount_fresh(
    dir: &Path,
    name: &str,
    setup: &impl Fn(&Path),
    cut_at_sync: Option<u64>,
) -> Result<(LazyMount, std::path::PathBuf), LazyError> {
    let backing = dir.join(format!("{name}.backing"));
    let mnt = dir.join(format!("{name}.mnt"));
    let io = |source| LazyError::Backing {
        path: backing.clone(),
        source,
    };
    std::fs::create_dir_all(&backing).map_err(io)?;
    std::fs::create_dir_all(&mnt).map_err(io)?;
    setup(&backing);
    let mut config = LazyConfig::new(&backing);
    config.tear = TearMode::Zero;
    config.cut_at_sync = cut_at_sync;
    let mount = LazyMount::mount(&mnt, config)?;
    Ok((mount, mnt))
}

/// Copies the tree `from` to `to` (regular files and directories): a
/// `setup` for [`every_sync_point`] that starts each run from the same
/// durable state, prepared once outside any mount.
pub fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}
