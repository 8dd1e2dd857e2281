//! The fleet's data directories on lazy mounts sharing one power line, and
//! the power cut itself: every sync held from the instant power fails,
//! every process killed, every mount cut.

use anyhow::Context;
use lazyfs::{CutReport, LazyConfig, LazyMount, PowerLine, TearMode};
use std::path::{Path, PathBuf};

/// Tear granularity of every mount (bytes): one page.
pub const TEAR_BLOCK_BYTES: u64 = 4096;

/// The store a dropped path belongs to, for the report.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Store {
    /// The controller's sled event log (group commits).
    ControllerLog,
    /// The controller's bundle store (uploads).
    BundleStore,
    /// The controller's archive segments (issue #26).
    ControllerArchive,
    /// Anything else of the controller's (webhook queue, watermark, ...).
    ControllerOther,
    /// An agent's journal.
    AgentJournal,
    /// An agent's staging area and release directories.
    AgentStaging,
    /// Anything else of an agent's.
    AgentOther,
}

impl Store {
    /// The report's key.
    pub fn key(self) -> &'static str {
        match self {
            Store::ControllerLog => "controller_log",
            Store::BundleStore => "bundle_store",
            Store::ControllerArchive => "controller_archive",
            Store::ControllerOther => "controller_other",
            Store::AgentJournal => "agent_journal",
            Store::AgentStaging => "agent_staging",
            Store::AgentOther => "agent_other",
        }
    }

    /// The store a path relative to a data directory lives in.
    fn of(controller: bool, rel: &str) -> Store {
        let first = rel.trim_start_matches('/').split('/').next().unwrap_or("");
        match (controller, first) {
            (true, "log") => Store::ControllerLog,
            (true, "bundles") => Store::BundleStore,
            (true, super::ARCHIVE_DIR_NAME) => Store::ControllerArchive,
            (true, _) => Store::ControllerOther,
            (false, "journal") => Store::AgentJournal,
            (false, "releases") | (false, "staging") => Store::AgentStaging,
            (false, _) => Store::AgentOther,
        }
    }
}

/// One lazily mounted data directory.
pub struct DataMount {
    /// `controller` or the node's name.
    pub owner: String,
    mount: LazyMount,
}

/// Every data directory of the fleet, on one power line.
pub struct Mounts {
    /// The line every mount is on.
    pub line: PowerLine,
    mounts: Vec<DataMount>,
}

/// What one cut did, summed over the mounts.
#[derive(Debug, Default)]
pub struct CutOutcome {
    /// Stores that lost pending state in this cut.
    pub stores: std::collections::BTreeSet<Store>,
    /// Writes torn instead of dropped.
    pub torn: u64,
    /// Syncs that were held (in flight when power failed).
    pub held_syncs: usize,
    /// The mounts' own lines (`data PATH`, `entry +PATH`, `torn PATH`).
    pub details: Vec<String>,
}

impl Mounts {
    /// Mounts `root/<owner>-data` (created) over `root/durable/<owner>`
    /// for every owner, tearing the last pending write of each file at a
    /// cut. Fails (naming the mount) when FUSE is not available.
    pub fn mount(root: &Path, owners: &[String]) -> anyhow::Result<Mounts> {
        let line = PowerLine::new();
        let mut mounts = Vec::new();
        for owner in owners {
            let backing = root.join("durable").join(owner);
            let at = data_dir(root, owner);
            std::fs::create_dir_all(&backing)?;
            std::fs::create_dir_all(&at)?;
            let mut config = LazyConfig::new(&backing);
            config.tear = TearMode::Zero;
            config.block_bytes = TEAR_BLOCK_BYTES;
            config.power = Some(line.clone());
            let mount = LazyMount::mount(&at, config)
                .with_context(|| format!("mounting the lazy filesystem at {}", at.display()))?;
            mounts.push(DataMount {
                owner: owner.clone(),
                mount,
            });
        }
        Ok(Mounts { line, mounts })
    }

    /// Cuts every mount (call after power failed and the processes died)
    /// and restores power.
    pub fn cut_all(&self) -> CutOutcome {
        let mut outcome = CutOutcome::default();
        for m in &self.mounts {
            outcome.held_syncs += m.mount.held_syncs();
            let report: CutReport = m.mount.cut();
            outcome.torn += report.torn_writes;
            for line in &report.details {
                if let Some(rel) = dropped_path(line) {
                    outcome
                        .stores
                        .insert(Store::of(m.owner == "controller", rel));
                }
                outcome.details.push(format!("{}: {line}", m.owner));
            }
        }
        self.line.restore();
        outcome
    }
}

/// Where `owner`'s data directory is mounted.
pub fn data_dir(root: &Path, owner: &str) -> PathBuf {
    root.join(format!("{owner}-data"))
}

/// The path a cut report's line names (`data PATH (N bytes)`, `entry
/// +PATH`, `entry -PATH`, `torn PATH`).
fn dropped_path(line: &str) -> Option<&str> {
    let rest = line
        .strip_prefix("data ")
        .or_else(|| line.strip_prefix("entry +"))
        .or_else(|| line.strip_prefix("entry -"))
        .or_else(|| line.strip_prefix("torn "))?;
    Some(rest.split(" (").next().unwrap_or(rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dropped_paths_are_sorted_into_their_stores() {
        let cases = [
            ("data /log/db (4096 bytes)", true, Store::ControllerLog),
            ("entry +/bundles/ab.bundle", true, Store::BundleStore),
            ("torn /journal/db", false, Store::AgentJournal),
            ("entry -/releases/.x.tmp", false, Store::AgentStaging),
            ("data /webhooks/q (3 bytes)", true, Store::ControllerOther),
        ];
        for (line, controller, store) in cases {
            let rel = dropped_path(line).expect(line);
            assert_eq!(Store::of(controller, rel), store, "{line}");
        }
    }
}
