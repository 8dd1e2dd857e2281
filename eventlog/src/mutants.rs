//! Durability mutants for the power-cut campaign (issue #25,
//! `fleetweft-powercut --mutant NAME`).
//!
//! Each mutant removes one durability step, so the campaign can show it
//! catches the loss. They exist only in builds with the cargo feature
//! `durability-mutants` (off by default, never in a shipped binary); even
//! then a mutant acts only in a process started with
//! `FLEETWEFT_DURABILITY_MUTANT=NAME`. Without the feature [`active`] is a
//! constant `false` and the branches it guards compile away.

/// The environment variable naming the one mutant a process runs with.
pub const MUTANT_ENV: &str = "FLEETWEFT_DURABILITY_MUTANT";

/// The controller's bundle store writes a bundle without fsyncing it.
pub const NO_FSYNC_BUNDLE_STORE: &str = "no-fsync-bundle-store";
/// The controller's bundle store renames a bundle into place without
/// fsyncing the directory.
pub const NO_DIRSYNC_AFTER_RENAME: &str = "no-dirsync-after-rename";
/// An event log never flushes: meant for the agent's journal (the
/// campaign sets it on agents only).
pub const NO_FSYNC_AGENT_JOURNAL: &str = "no-fsync-agent-journal";
/// An event log acknowledges a group before flushing it; the flush comes
/// with the next group (the campaign sets it on the controller only).
pub const ACK_BEFORE_FLUSH: &str = "ack-before-flush";

/// Every mutant, in the order the campaign reports them.
pub const ALL: [&str; 4] = [
    NO_FSYNC_BUNDLE_STORE,
    NO_DIRSYNC_AFTER_RENAME,
    NO_FSYNC_AGENT_JOURNAL,
    ACK_BEFORE_FLUSH,
];

/// True when this process runs with mutant `name` (feature on and
/// [`MUTANT_ENV`] names it).
#[cfg(feature = "durability-mutants")]
pub fn active(name: &str) -> bool {
    static CHOSEN: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    let chosen = CHOSEN.get_or_init(|| {
        let chosen = std::env::var(MUTANT_ENV).ok();
        if let Some(mutant) = &chosen {
            eprintln!("DURABILITY MUTANT ACTIVE: {mutant} (a test build; never ship this)");
        }
        chosen
    });
    chosen.as_deref() == Some(name)
}

/// Always false: this build has no durability mutants.
#[cfg(not(feature = "durability-mutants"))]
#[inline(always)]
pub fn active(_name: &str) -> bool {
    false
}
