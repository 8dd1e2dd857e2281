//! The fault harnesses over the real binaries: the network-namespace
//! scenarios (`fleetweft-scenarios`) and the power-cut campaign
//! (`fleetweft-powercut`), sharing one fleet harness.
// Production functions stay within 70 lines (clippy.toml, issue #22 item 6);
// tests may run longer.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

pub mod fleet;
pub mod net;
pub mod powercut;
pub mod relay;
pub mod scenarios;
