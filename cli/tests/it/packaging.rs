//! The systemd units under `packaging/`: the options the project promises
//! (dedicated user, `--config`, restart on failure, hardening) are there,
//! and `systemd-analyze verify` accepts them without a warning when it is
//! available (skipped with the reason printed otherwise).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The units and the binary each starts.
const UNITS: [(&str, &str); 2] = [
    ("fleetweft-controller.service", "fleetweft"),
    ("fleetweft-agent@.service", "fleetweft-agent"),
];

fn packaging() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../packaging")
}

#[test]
fn units_carry_the_promised_options() {
    for (unit, binary) in UNITS {
        let text = std::fs::read_to_string(packaging().join(unit)).expect("unit file");
        let exec = format!("ExecStart=/usr/bin/{binary} ");
        assert!(
            text.lines()
                .any(|l| l.starts_with(&exec) && l.contains(" --config /etc/fleetweft/")),
            "{unit}: ExecStart with --config"
        );
        for line in [
            "Restart=on-failure",
            "NoNewPrivileges=yes",
            "ProtectSystem=strict",
            "ProtectHome=yes",
            "PrivateTmp=yes",
            "CapabilityBoundingSet=",
        ] {
            assert!(text.lines().any(|l| l == line), "{unit}: {line}");
        }
        let user = text
            .lines()
            .find_map(|l| l.strip_prefix("User="))
            .expect("a User= line");
        assert!(
            user.starts_with("fleetweft"),
            "{unit}: dedicated user, not {user}"
        );
    }
}

#[test]
fn systemd_analyze_verify_accepts_the_units() {
    let probe = Command::new("systemd-analyze").arg("--version").output();
    if !probe.is_ok_and(|o| o.status.success()) {
        println!("skipped: systemd-analyze is not available here");
        return;
    }
    // verify insists the ExecStart binary exists: point it at the built
    // one, in a copy; everything else is checked as shipped.
    let bin_dir = PathBuf::from(env!("CARGO_BIN_EXE_fleetweft"))
        .parent()
        .expect("target dir")
        .to_path_buf();
    let temp = tempfile::tempdir().expect("temp dir");
    let mut paths = Vec::new();
    for (unit, binary) in UNITS {
        let text = std::fs::read_to_string(packaging().join(unit)).expect("unit file");
        let text = text.replace(
            &format!("/usr/bin/{binary} "),
            &format!("{} ", bin_dir.join(binary).display()),
        );
        // A template is verified through one instance of it.
        let name = unit.replace("@.service", "@node-a.service");
        let path = temp.path().join(&name);
        std::fs::write(&path, text).expect("write unit");
        paths.push(path);
    }
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .args(&paths)
        .output()
        .expect("run systemd-analyze");
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Warnings about our units (an unknown option, a bad value) make the
    // test fail even though verify itself exits 0 for them; lines about
    // the host's own units are not ours to judge.
    let ours: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains(&*temp.path().to_string_lossy()))
        .collect();
    assert!(out.status.success() && ours.is_empty(), "{stderr}");
}

/// The HA layout's example files (docs/operations.md, "A 3-host HA
/// layout"): the controller config parses as an etcd controller with three
/// endpoints and an advert, and the etcd defaults carry exactly the
/// transaction limits the log needs (a controller refuses to open a log on
/// a cluster with smaller ones).
#[test]
fn ha_examples_parse_and_carry_the_limits_the_log_needs() {
    let path = packaging().join("controller-ha.toml");
    // The TLS files are read when the config is validated: point them at
    // real PEM files (a generated CA and client certificate).
    let pki = tempfile::tempdir().expect("temp dir");
    let key = rcgen::KeyPair::generate().expect("key");
    let cert = rcgen::CertificateParams::new(vec!["c1".to_string()])
        .expect("params")
        .self_signed(&key)
        .expect("certificate");
    for (file, pem) in [
        ("etcd-ca.pem", cert.pem()),
        ("etcd-client.pem", cert.pem()),
        ("etcd-client-key.pem", key.serialize_pem()),
    ] {
        std::fs::write(pki.path().join(file), pem).expect("write PEM");
    }
    let text = std::fs::read_to_string(&path)
        .expect("controller-ha.toml")
        .replace(
            "/etc/fleetweft/pki/etcd-",
            &format!("{}/etcd-", pki.path().display()),
        );
    let config = controller::daemon::config::ControllerConfig::parse(&path, &text)
        .unwrap_or_else(|err| panic!("packaging/controller-ha.toml: {err}"));
    let etcd = config.storage.etcd_config().expect("backend = \"etcd\"");
    assert_eq!(etcd.endpoints.len(), 3, "one member per controller host");
    assert!(etcd.tls.is_some(), "TLS to etcd, as the members require");
    assert!(config.storage.advertise_api.is_some() && config.storage.advertise_agents.is_some());
    let defaults = std::fs::read_to_string(packaging().join("etcd.default")).expect("etcd.default");
    let value = |key: &str| {
        defaults
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{key}=")))
            .unwrap_or_else(|| panic!("etcd.default: no {key}"))
            .to_string()
    };
    assert_eq!(
        value("ETCD_MAX_TXN_OPS"),
        eventlog::ETCD_MAX_TXN_OPS_REQUIRED.to_string()
    );
    assert_eq!(
        value("ETCD_MAX_REQUEST_BYTES"),
        eventlog::ETCD_MAX_REQUEST_BYTES.to_string()
    );
    let cluster = value("ETCD_INITIAL_CLUSTER");
    assert_eq!(cluster.split(',').count(), 3, "{cluster}");
}
