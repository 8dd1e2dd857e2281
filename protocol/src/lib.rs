//! # What the controller and agents share
//!
//! - `pki`: the fleet CA, controller and node certificates, operator token.
//! - `bundle`: signed app bundles (manifest + app file, Ed25519).
//! - `identity`: the checks an agent's identity passes before it starts.
//! - `frame`: versioned, length-prefixed, bounded wire frames.
//! - `quic`: quinn endpoints with mutual TLS (rustls, TLS 1.3 only).
// Production functions stay within 70 lines (clippy.toml, issue #22 item 6);
// tests may run longer.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]
pub mod bundle;
pub mod frame;
pub mod identity;
pub mod journal;
pub mod pki;
pub mod quic;
pub mod tls;
