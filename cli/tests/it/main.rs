//! Every integration test of the runtime, in one test binary.
//!
//! One binary instead of one per file: each test binary links the whole
//! runtime (tokio, axum, quinn, rustls, sled, etcd-client) and instantiates
//! its generics again, so 28 binaries cost a fresh CI build about as much
//! as the runtime itself (measured with `cargo build --timings`, see the
//! commit). Run one file's tests with a filter:
//! `cargo test --release -p runtime --test it golden_encoding::`.
//!
//! Tests of different files now share a process: nothing here may set
//! environment variables or change the working directory, and ports come
//! from `demo::ports::free_port`, which never hands one out twice in a
//! process.

// Shared set-up.
mod api_harness;
mod binaries;
mod common;
#[path = "../../../eventlog/tests/etcd_harness/mod.rs"]
mod etcd_harness;
mod fleet;
mod sse;

mod api;
mod arch_rollout;
mod archiving;
mod batch;
mod cli;
mod config_rollout;
mod console;
mod console_actions;
mod console_browser;
mod controller_crash;
mod controller_restart;
mod conventions;
mod corruption;
mod crash_recovery;
mod dashboard_browser;
mod demo;
mod fleet_faults;
mod forensics;
mod fuzz_seeds;
mod golden_encoding;
mod group_commit;
mod ha_dial;
mod ha_etcd;
mod identity;
mod limits_rollout;
mod log_behind;
mod log_copy_etcd;
mod migration_rollout;
mod older_release;
mod packaging;
mod pki_bundle_cli;
mod power_loss;
mod quickstart;
mod readback;
mod release_gc;
mod roster;
mod schemathesis;
mod snapshots;
mod stream;
mod surfaces;
mod switch_bench;
mod tree_bundle_cli;
mod tree_mirrors;
mod tree_resume;
mod tree_rollout;
mod tree_upload;
mod webhooks;
