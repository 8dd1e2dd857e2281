//! Fleetweft runtime: the pieces that touch disk, clocks and threads around
//! the pure `model` crate. So far: the controller's durable event log.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod log;
