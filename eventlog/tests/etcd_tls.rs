//! The etcd backend over TLS: a member serving https only and requiring
//! client certificates (`--client-cert-auth`), a PKI made with rcgen.
//! Appends and reads work with the right CA and client certificate; a
//! wrong CA, or no client certificate, is refused with an error that says
//! why; half-configured TLS is refused before connecting, naming the key.
//!
//! Skipped with a loud notice only when etcd cannot be installed (not root).

mod etcd_harness;

use std::time::Duration;

use etcd_harness::{prefix, Cluster, Limits};
use eventlog::{EtcdClient, EtcdStorage, EtcdTls, EventLog, Leadership, LogStorage, StorageError};

type Log = EventLog<String, EtcdStorage>;

#[test]
fn tls_with_client_certificates_appends_and_reads_and_refuses_strangers() {
    let Some(cluster) = Cluster::start_with("tls", 1, Limits::Fitting, true) else {
        return;
    };
    let pki = cluster.pki().expect("a TLS cluster has a PKI").clone();
    let config = cluster.config(&prefix("tls"));
    let client = EtcdClient::connect(&config).expect("connect over TLS");
    let leadership =
        Leadership::campaign(&client, &config, "controller-a", Duration::from_secs(10))
            .expect("win the election over TLS");
    let storage = EtcdStorage::open(&client, &config, &leadership).expect("open over TLS");
    let (log, _) = Log::with_storage(storage).expect("replay");
    let events: Vec<String> = (0..10).map(|i| format!("tls-{i}")).collect();
    let _ = log.append(events.clone()).expect("append over TLS");
    let reader = EtcdStorage::open_read_only(&client, &config).expect("read-only");
    let (_, read) = Log::with_storage(reader).expect("read back over TLS");
    assert_eq!(read.into_iter().map(|(_, e)| e).collect::<Vec<_>>(), events);

    // A CA that did not sign the member's certificate: refused, saying so.
    let mut wrong_ca = config.clone();
    wrong_ca.tls = Some(EtcdTls {
        ca_file: pki.other_ca.clone(),
        ..pki.client_tls()
    });
    let detail = first_request_error(&wrong_ca);
    assert!(
        detail.contains("certificate") || detail.contains("UnknownIssuer"),
        "a wrong CA should be named as a certificate problem: {detail}"
    );
    // No client certificate where the member requires one: refused.
    let mut anonymous = config.clone();
    anonymous.tls = Some(EtcdTls {
        cert_file: None,
        key_file: None,
        ..pki.client_tls()
    });
    let detail = first_request_error(&anonymous);
    assert!(detail.contains("`cert_file`"), "{detail}");
    // Plain http to an https-only member: refused, hinting at TLS.
    let mut plain = config.clone();
    plain.tls = None;
    let detail = first_request_error(&plain);
    assert!(detail.contains("`ca_file`"), "{detail}");
    // The good configuration still reads (the refusals changed nothing).
    assert_eq!(log.storage().last_sequence().expect("last"), Some(9));
}

/// The error of the first request on `config` (which must fail).
fn first_request_error(config: &eventlog::EtcdConfig) -> String {
    let outcome = EtcdClient::connect(config)
        .and_then(|client| EtcdStorage::open_read_only(&client, config))
        .and_then(|storage| storage.last_sequence());
    match outcome {
        Ok(last) => panic!("a request with {:?} succeeded ({last:?})", config.tls),
        Err(err @ StorageError::Etcd { .. }) => {
            eprintln!("refused as expected: {err}");
            err.to_string()
        }
        Err(err) => panic!("expected an etcd error, got {err}"),
    }
}

#[test]
fn half_configured_tls_is_refused_naming_the_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = etcd_harness::Pki::generate(dir.path());
    let base = eventlog::EtcdConfig::new(vec!["127.0.0.1:1".into()], "/fleetweft-test/tls-bad");
    let with = |tls: EtcdTls| {
        let mut config = base.clone();
        config.tls = Some(tls);
        config.validate().expect_err("must be refused").to_string()
    };
    let good = pki.client_tls();
    let cases = [
        (
            EtcdTls {
                key_file: None,
                ..good.clone()
            },
            "key_file",
        ),
        (
            EtcdTls {
                cert_file: None,
                ..good.clone()
            },
            "cert_file",
        ),
        (
            EtcdTls {
                ca_file: dir.path().join("missing.pem"),
                ..good.clone()
            },
            "ca_file",
        ),
        (
            EtcdTls {
                ca_file: pki.client_key.clone(),
                ..good.clone()
            },
            "ca_file",
        ),
        (
            EtcdTls {
                key_file: Some(pki.client_cert.clone()),
                ..good.clone()
            },
            "key_file",
        ),
    ];
    for (tls, key) in cases {
        let err = with(tls);
        assert!(err.contains(key), "{err} should name {key}");
    }
    // Scheme mismatches are named too.
    let mut https_no_tls = base.clone();
    https_no_tls.endpoints = vec!["https://127.0.0.1:1".into()];
    let err = https_no_tls
        .validate()
        .expect_err("https without a CA")
        .to_string();
    assert!(err.contains("ca_file"), "{err}");
    let mut http_with_tls = base.clone();
    http_with_tls.endpoints = vec!["http://127.0.0.1:1".into()];
    http_with_tls.tls = Some(good.clone());
    let err = http_with_tls
        .validate()
        .expect_err("http with TLS")
        .to_string();
    assert!(err.contains("http"), "{err}");
    // And the good one passes.
    let mut fine = base;
    fine.tls = Some(good);
    fine.validate().expect("a complete TLS configuration");
}
