//! What a client of the controller needs, and nothing that runs one: the
//! DTOs and the view layer that words them (built from one [`Snapshot`]
//! of the controller), the controller's role as its answers carry it, the
//! handover report, and the typed HTTP client the CLI, the demo, fleetsim
//! and the fault scenarios share.

#![forbid(unsafe_code)]
#![warn(missing_docs)]
// Production functions stay within 70 lines (clippy.toml, issue #22 item 6);
// tests may run longer.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

pub mod client;
pub mod exit;
pub mod role;
pub mod table;
pub mod view;

pub use view::snapshot::Snapshot;
/// The handover report and the snapshot, under the names their users know.
pub use view::{report, snapshot};

/// The event log's directory inside the controller's data directory
/// (where the controller opens it; `fleetweft log --data` looks for it
/// there).
pub const LOG_DIR: &str = "log";
