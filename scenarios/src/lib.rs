//! The fault harnesses over the real binaries: the network-namespace
//! scenarios (`fleetweft-scenarios`) and the power-cut campaign
//! (`fleetweft-powercut`), sharing one fleet harness.

pub mod fleet;
pub mod net;
pub mod powercut;
pub mod relay;
pub mod scenarios;
