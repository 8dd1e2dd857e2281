//! An etcd member with etcd's default limits (`--max-txn-ops 128`,
//! `--max-request-bytes 1.5 MiB`) cannot hold the log's default atomic
//! batch: opening for appends must refuse, clearly, naming the flags that
//! would fit, and write nothing. Smaller configured limits that fit open.

mod etcd_harness;

use std::time::Duration;

use etcd_harness::{config, prefix, Cluster, Limits};
use eventlog::{BatchLimits, EtcdClient, EtcdStorage, Leadership, LogStorage, StorageError};

#[test]
fn too_small_server_limits_are_refused_at_open() {
    let Some(cluster) = Cluster::start("limits", 1, Limits::EtcdDefaults) else {
        return;
    };
    let endpoints = cluster.endpoints();
    let mut config = config(&endpoints, &prefix("limits"));
    let client = EtcdClient::connect(&config).expect("connect");
    let leadership =
        Leadership::campaign(&client, &config, "a", Duration::from_secs(10)).expect("lead");

    // The default limits: too many operations for --max-txn-ops 128.
    let err = EtcdStorage::open(&client, &config, &leadership)
        .err()
        .expect("the default limits do not fit etcd's defaults");
    let text = err.to_string();
    assert!(
        matches!(err, StorageError::EtcdLimitsTooSmall { .. }),
        "{err:?}"
    );
    assert!(text.contains("--max-txn-ops=32768"), "{text}");
    assert!(text.contains("--max-request-bytes="), "{text}");
    assert!(text.contains("ops probe"), "{text}");

    // Few entries but many bytes: over --max-request-bytes.
    config.limits = BatchLimits {
        entries_max: 100,
        bytes_max: 4 << 20,
    };
    config.validate().expect("4 MiB is a valid limit");
    let err = EtcdStorage::open(&client, &config, &leadership)
        .err()
        .expect("4 MiB does not fit 1.5 MiB");
    assert!(
        matches!(err, StorageError::EtcdLimitsTooSmall { .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("bytes probe"), "{err}");

    // Limits that fit the server open, and the probes wrote nothing.
    config.limits = BatchLimits {
        entries_max: 100,
        bytes_max: 1 << 20,
    };
    let storage = EtcdStorage::open(&client, &config, &leadership).expect("fitting limits");
    assert_eq!(storage.last_sequence().expect("last"), None);
    assert_eq!(storage.read_from(0).count(), 0, "the probes wrote nothing");
}

#[test]
fn limits_etcd_could_not_replay_are_refused_before_connecting() {
    let mut config = eventlog::EtcdConfig::new(vec!["127.0.0.1:1".into()], "/p");
    config.limits = BatchLimits {
        entries_max: 100,
        bytes_max: 12 << 20,
    };
    let err = config.validate().expect_err("over the WAL record limit");
    assert!(err.to_string().contains("WAL"), "{err}");
    config.limits = eventlog::ETCD_BATCH_LIMITS_DEFAULT;
    config.prefix = format!("/{}", "p".repeat(eventlog::ETCD_PREFIX_BYTES_MAX));
    let err = config.validate().expect_err("prefix too long");
    assert!(err.to_string().contains("prefix"), "{err}");
}
