//! Fleetweft's controller: the durable [`driver`] around the pure `model`
//! controller core and its event log, and the [`daemon`] that runs it
//! (one core task; the agents' QUIC links, the operator HTTP API, the
//! dashboard, HA on etcd, readbacks and webhooks only send it inputs).

#![forbid(unsafe_code)]
#![warn(missing_docs)]
// Production functions stay within 70 lines (clippy.toml, issue #22 item 6);
// tests may run longer.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

pub mod archive;
pub mod daemon;
pub mod driver;
pub mod event_log;
pub mod policy_text;
pub mod snapshot;
pub mod takeover;
