//! The controller's event log ([`ControllerLog`]) and why driving it
//! failed ([`ControllerError`]): what the driver, the archiver and the
//! takeover share (`crate::driver` re-exports both).

use eventlog::{EventLog, LogError};
use model::controller::{Event, Refusal};

/// The log under the controller: sled's directory, or etcd's prefix held
/// under a [`eventlog::Leadership`] (its appends are fenced).
pub type ControllerLog = EventLog<Event, Box<dyn eventlog::LogStorage>>;

/// Why the controller could not start or could not handle an input.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    /// The model refused the input; nothing was recorded.
    #[error("input refused: {0}")]
    Refused(Refusal),
    /// The log failed: on open (corrupt, not a log, I/O) or on append. After
    /// an append failure the log is poisoned; restart to see what is durable.
    #[error(transparent)]
    Log(#[from] LogError),
    /// The log is intact but its history breaks a rule: the controller
    /// refuses to start rather than act on a state the rules never allow.
    #[error("refusing to start: the event at sequence {sequence} breaks {violation}")]
    RuleViolated {
        /// Sequence of the offending event.
        sequence: u64,
        /// The broken rule and what broke it.
        violation: invariants::Violation,
    },
    /// A hot standby was elected while an archiving handle on its log was
    /// still held (a standby never archives: a bug, caught).
    #[error("cannot take over: another handle on the log is still in use")]
    LogShared,
    /// A hot standby elected leader: the newest usable snapshot plus the
    /// events after it fold to another state than the one it followed
    /// ([`crate::takeover`]); it does not lead.
    #[error("cannot take over: the snapshot of the first {covers} entries plus the entries up to {end} folds to another state than the followed one")]
    TakeoverDiverged {
        /// The snapshot's `covers`.
        covers: u64,
        /// The log's end.
        end: u64,
    },
}
