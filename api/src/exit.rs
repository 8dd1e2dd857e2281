//! The controller's own exit codes above 2 (`docs/operations.md`, "Exit
//! codes"): the daemon returns them as errors, `fleetweft controller`
//! exits with them, and the fault scenarios check them.

/// The event log failed while running (an append or flush failed): nothing
/// more can be acknowledged, so the controller stops at once.
pub const LOG_FAILED: u8 = 3;

/// A deposed leader (its lease lost, or an append fenced) stops with this
/// before it releases anything a new leader may already hold.
pub const DEPOSED: i32 = 4;
