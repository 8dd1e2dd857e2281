//! Crash points of the PKI writes (issue #25 item 4), on the lazy
//! filesystem: a power cut at every sync of `init_fleet` and of
//! `issue_node --force`, and one after each returned. A fleet directory is
//! absent or complete; a node's certificate and key are both the old pair
//! or both the new one, never one of each. Skips loudly without FUSE
//! unless FLEETWEFT_REQUIRE_FUSE=1.

use lazyfs::enumerate::{every_sync_point, CutPoint, Enumerated};
use lazyfs::LazyError;
use protocol::pki::{self, FleetPki};
use std::path::Path;

fn nodes() -> Vec<String> {
    vec!["node-a".to_string(), "node-b".to_string()]
}

fn enumerated(result: Result<Enumerated, LazyError>) {
    match result {
        Ok(figures) => eprintln!("crash points: {figures:?}"),
        Err(e) if std::env::var("FLEETWEFT_REQUIRE_FUSE").as_deref() != Ok("1") => {
            eprintln!("\n!!!!! SKIPPING crash-point enumeration: cannot mount FUSE ({e}) !!!!!\n");
        }
        Err(e) => panic!("FUSE mount failed and FLEETWEFT_REQUIRE_FUSE=1: {e}"),
    }
}

/// Every file a fleet directory must hold, readable.
fn complete(dir: &Path) -> bool {
    let pki = FleetPki {
        dir: dir.to_path_buf(),
        nodes: nodes(),
    };
    let mut files = vec![
        pki.ca_cert(),
        pki.ca_key(),
        pki.controller_cert(),
        pki.controller_key(),
    ];
    for node in nodes() {
        files.push(pki.node_cert(&node));
        files.push(pki.node_key(&node));
    }
    files
        .iter()
        .all(|f| std::fs::metadata(f).is_ok_and(|m| m.len() > 0))
        && pki::load_operator_token(&pki.operator_token()).is_ok()
}

#[test]
fn a_fleet_directory_is_absent_or_complete_at_every_crash_point() {
    let dir = tempfile::tempdir().expect("tempdir");
    let write = |mnt: &Path| pki::init_fleet(&mnt.join("pki"), &nodes(), "localhost").is_ok();
    let check = |mnt: &Path, point: CutPoint, ok: bool| {
        let fleet = mnt.join("pki");
        let present = fleet.exists();
        assert!(
            !present || complete(&fleet),
            "{point:?}: a fleet directory under its name is complete"
        );
        assert!(
            present || !ok,
            "{point:?}: init returned Ok, the directory must be there"
        );
    };
    enumerated(every_sync_point(dir.path(), |_| {}, write, check));
}

#[test]
fn a_reissued_node_has_the_old_pair_or_the_new_one_at_every_crash_point() {
    let dir = tempfile::tempdir().expect("tempdir");
    // A fleet made durably beforehand (straight in the backing directory).
    let template = tempfile::tempdir().expect("tempdir");
    let fleet = pki::init_fleet(&template.path().join("pki"), &nodes(), "localhost").expect("init");
    let old = (
        std::fs::read(fleet.node_cert("node-a")).expect("cert"),
        std::fs::read(fleet.node_key("node-a")).expect("key"),
    );
    let setup = |backing: &Path| {
        lazyfs::enumerate::copy_tree(&template.path().join("pki"), &backing.join("pki"))
            .expect("copy")
    };
    let write = |mnt: &Path| pki::issue_node(&mnt.join("pki"), "node-a", true).is_ok();
    let check = |mnt: &Path, point: CutPoint, ok: bool| {
        let pki = FleetPki {
            dir: mnt.join("pki"),
            nodes: nodes(),
        };
        let pair = (
            std::fs::read(pki.node_cert("node-a")).expect("cert survives"),
            std::fs::read(pki.node_key("node-a")).expect("key survives"),
        );
        let cert_old = pair.0 == old.0;
        let key_old = pair.1 == old.1;
        assert_eq!(cert_old, key_old, "{point:?}: one of each pair");
        assert!(
            !(ok && cert_old),
            "{point:?}: issue returned Ok, the new pair must be there"
        );
    };
    enumerated(every_sync_point(dir.path(), setup, write, check));
}
