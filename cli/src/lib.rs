//! The `fleetweft` command line's operations: each operator command over
//! the API ([`ops`]) and `fleetweft watch` ([`watch`]). The binary
//! (`src/main.rs`) parses the command line and dispatches here.

#![forbid(unsafe_code)]
#![warn(missing_docs)]
// Production functions stay within 70 lines (clippy.toml, issue #22 item 6);
// tests may run longer.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

pub mod deep;
pub mod ops;
pub mod outcome;
pub mod release_export;
pub mod release_list;
pub mod release_tree;
pub mod release_upload;
pub mod watch;
