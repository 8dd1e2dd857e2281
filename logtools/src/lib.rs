//! Fleetweft's log tools, behind `fleetweft log`: read-only inspection of
//! a controller log or an agent journal ([`inspect`]: verify, show) and
//! copying a controller log between backends ([`copy`]).

#![forbid(unsafe_code)]
#![warn(missing_docs)]
// Production functions stay within 70 lines (clippy.toml, issue #22 item 6);
// tests may run longer.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

pub mod ahead;
pub mod annex;
pub mod copy;
pub mod diagram;
pub mod history;
pub mod inspect;
pub mod snapshot;
