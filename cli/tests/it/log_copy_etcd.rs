//! `fleetweft log copy` and `log verify|show --etcd` against a real
//! 3-member etcd cluster on loopback: a controller log copied sled → etcd
//! → sled is byte for byte the original (same raw entries, same head hash)
//! and verifies at every step; a non-empty destination is refused.
//!
//! Skipped with a loud notice only when etcd cannot be installed (not root).

use crate::etcd_harness;
use crate::fleet;

use std::path::Path;
use std::process::{Command, Output};

use etcd_harness::{prefix, shared_endpoints};
use eventlog::{LogStorage, RawEntry, SledStorage};
use fleet::{plan, Fleet};
use model::agent::AgentInput;
use model::controller::Input;
use model::NodeId;

fn fleetweft(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fleetweft"))
        .args(args)
        .output()
        .expect("run fleetweft")
}

fn text(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A closed controller log with a rollout and many reconnections.
fn controller_log(dir: &Path) {
    let mut fleet = Fleet::new(dir, 3);
    fleet
        .controller(Input::StartRollout { plan: plan(true) })
        .expect("start");
    fleet.run();
    for _ in 0..20 {
        for node in 0..3 {
            fleet.agent(NodeId(node), AgentInput::Connected);
        }
    }
    fleet.run();
    fleet.close().expect("close");
    // Wait for sled's lock release (verify does).
    let _ = eventlog::verify(dir);
}

fn raw_entries(dir: &Path) -> Vec<RawEntry> {
    let storage = SledStorage::open_existing(dir).expect("open the sled log");
    let entries = storage
        .read_from(0)
        .collect::<Result<Vec<_>, _>>()
        .expect("read");
    drop(storage);
    let _ = eventlog::verify(dir);
    entries
}

#[test]
fn sled_to_etcd_to_sled_is_the_same_log_and_verifies() {
    let Some(endpoints) = shared_endpoints() else {
        return;
    };
    let temp = tempfile::tempdir().expect("temp dir");
    let original = temp.path().join("original");
    controller_log(&original);
    let before = raw_entries(&original);
    assert!(
        before.len() > 50,
        "a log worth copying: {} entries",
        before.len()
    );

    let etcd = format!("etcd://{}{}", endpoints.join(","), prefix("copy"));
    let out = fleetweft(&[
        "log",
        "copy",
        "--from",
        original.to_str().expect("utf-8"),
        "--to",
        &etcd,
    ]);
    assert!(out.status.success(), "sled -> etcd: {}", text(&out));

    let joined = endpoints.join(",");
    let etcd_prefix = prefix("copy");
    let verified = fleetweft(&["log", "verify", "--etcd", &joined, "--prefix", &etcd_prefix]);
    assert!(
        verified.status.success(),
        "verify --etcd: {}",
        text(&verified)
    );
    let local = fleetweft(&["log", "verify", "--data", original.to_str().expect("utf-8")]);
    // Same summary but for the name on the first line.
    let tail = |out: &Output| {
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .skip(1)
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(tail(&verified), tail(&local));
    let shown = fleetweft(&["log", "show", "--etcd", &joined, "--prefix", &etcd_prefix]);
    let shown_local = fleetweft(&["log", "show", "--data", original.to_str().expect("utf-8")]);
    assert!(shown.status.success(), "{}", text(&shown));
    assert_eq!(shown.stdout, shown_local.stdout);

    // Copying into the now non-empty etcd prefix is refused.
    let again = fleetweft(&[
        "log",
        "copy",
        "--from",
        original.to_str().expect("utf-8"),
        "--to",
        &etcd,
    ]);
    assert_eq!(again.status.code(), Some(1), "{}", text(&again));
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("not empty"),
        "{}",
        text(&again)
    );

    let back = temp.path().join("back");
    let out = fleetweft(&[
        "log",
        "copy",
        "--from",
        &etcd,
        "--to",
        back.to_str().expect("utf-8"),
    ]);
    assert!(out.status.success(), "etcd -> sled: {}", text(&out));
    let after = raw_entries(&back);
    assert_eq!(after, before, "the round trip changed the log");
    let verified = fleetweft(&["log", "verify", "--data", back.to_str().expect("utf-8")]);
    assert!(verified.status.success(), "{}", text(&verified));
    assert_eq!(tail(&verified), tail(&local));

    // And into a non-empty directory is refused.
    let again = fleetweft(&[
        "log",
        "copy",
        "--from",
        &etcd,
        "--to",
        back.to_str().expect("utf-8"),
    ]);
    assert_eq!(again.status.code(), Some(1), "{}", text(&again));
}

/// The same tools over TLS: a member serving https only and requiring
/// client certificates; `--ca-file/--cert-file/--key-file` reach it, and
/// without them the tools fail saying what may be missing.
#[test]
fn log_tools_reach_an_etcd_over_mutual_tls() {
    let Some(cluster) =
        etcd_harness::Cluster::start_with("cli-tls", 1, etcd_harness::Limits::Fitting, true)
    else {
        return;
    };
    let pki = cluster.pki().expect("a TLS cluster has a PKI").clone();
    let path = |p: &Path| p.to_str().expect("utf-8").to_string();
    let (ca, cert, key) = (path(&pki.ca), path(&pki.client_cert), path(&pki.client_key));
    let tls: Vec<&str> = vec!["--ca-file", &ca, "--cert-file", &cert, "--key-file", &key];
    let temp = tempfile::tempdir().expect("temp dir");
    let original = temp.path().join("original");
    controller_log(&original);
    let joined = cluster.endpoints().join(",");
    let etcd_prefix = prefix("cli-tls");
    let etcd = format!("etcd://{joined}{etcd_prefix}");
    let mut copy = vec!["log", "copy", "--from", original.to_str().expect("utf-8")];
    copy.extend(["--to", &etcd]);
    copy.extend(&tls);
    let out = fleetweft(&copy);
    assert!(
        out.status.success(),
        "sled -> etcd over TLS: {}",
        text(&out)
    );
    let mut verify = vec!["log", "verify", "--etcd", &joined, "--prefix", &etcd_prefix];
    verify.extend(&tls);
    let verified = fleetweft(&verify);
    assert!(
        verified.status.success(),
        "verify over TLS: {}",
        text(&verified)
    );
    // Without TLS: uninspectable (exit 4), hinting at `ca_file`.
    let plain = fleetweft(&["log", "verify", "--etcd", &joined, "--prefix", &etcd_prefix]);
    assert_eq!(plain.status.code(), Some(4), "{}", text(&plain));
    assert!(
        String::from_utf8_lossy(&plain.stderr).contains("ca_file")
            || String::from_utf8_lossy(&plain.stdout).contains("ca_file"),
        "{}",
        text(&plain)
    );
    // A client certificate without its key is a usage error naming it.
    let half = fleetweft(&[
        "log",
        "verify",
        "--etcd",
        &joined,
        "--prefix",
        &etcd_prefix,
        "--ca-file",
        &ca,
        "--cert-file",
        &cert,
    ]);
    assert_eq!(half.status.code(), Some(2), "{}", text(&half));
    assert!(
        String::from_utf8_lossy(&half.stderr).contains("--key-file"),
        "{}",
        text(&half)
    );
}
