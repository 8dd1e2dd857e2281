//! The etcd log backend against a real 3-member etcd cluster on loopback
//! (started by the harness, one prefix per test): append and read back,
//! all-or-nothing batches, fencing of deposed appenders and racing logs,
//! lease expiry, read-only opens, the storage's batch limits.
//!
//! Skipped with a loud notice only when etcd cannot be installed (not root).

mod etcd_harness;

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use etcd_harness::{config, prefix, shared_endpoints};
use eventlog::{
    verify_storage_with, BatchLimits, EtcdClient, EtcdConfig, EtcdStorage, EventLog, Leadership,
    LogError, LogStorage, StorageError,
};

type Log = EventLog<String, EtcdStorage>;

/// Campaigns as `name` on `config` (waiting at most 10 s) and opens the log.
fn lead(config: &EtcdConfig, name: &str) -> (EtcdClient, Leadership, Log, Vec<(u64, String)>) {
    let client = EtcdClient::connect(config).expect("connect to the test cluster");
    let leadership = Leadership::campaign(&client, config, name, Duration::from_secs(10))
        .expect("win the election");
    let storage = EtcdStorage::open(&client, config, &leadership).expect("open the etcd log");
    let (log, events) = Log::with_storage(storage).expect("replay the log");
    (client, leadership, log, events)
}

/// Every event of the log at `config`, read through a read-only storage
/// after verifying the whole chain.
fn read_back(config: &EtcdConfig) -> Vec<(u64, String)> {
    let client = EtcdClient::connect(config).expect("connect");
    let storage = EtcdStorage::open_read_only(&client, config).expect("open read-only");
    verify_storage_with(&storage, |_, _| Ok(())).expect("the log verifies");
    let (_, events) = Log::with_storage(storage).expect("replay read-only");
    events
}

fn strings(prefix: &str, range: std::ops::Range<usize>) -> Vec<String> {
    range.map(|i| format!("{prefix}-{i}")).collect()
}

/// Puts `value` at the raw entry key of `sequence` under `prefix`, as a
/// writer that ignores leadership would.
fn plant(endpoints: &[String], prefix: &str, sequence: u64, value: &[u8]) {
    let mut key = format!("{prefix}/e/").into_bytes();
    key.extend_from_slice(&sequence.to_be_bytes());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime for the raw client");
    runtime.block_on(async {
        let mut client = etcd_client::Client::connect(endpoints, None)
            .await
            .expect("raw connect");
        client.put(key, value, None).await.expect("raw put");
    });
}

#[test]
fn appends_read_back_and_verify() {
    let Some(endpoints) = shared_endpoints() else {
        return;
    };
    let config = config(&endpoints, &prefix("append"));
    let (_client, leadership, log, replayed) = lead(&config, "controller-a");
    assert!(replayed.is_empty(), "a fresh prefix is an empty log");
    let mut expected = Vec::new();
    for (batch, size) in [1usize, 64, 512, 3].into_iter().enumerate() {
        let events = strings(&format!("b{batch}"), 0..size);
        let durable = log.append(events.clone()).expect("append");
        let first = expected.len() as u64;
        let got: Vec<_> = durable.into_inner();
        assert_eq!(got.first().map(|(s, _)| *s), Some(first));
        expected.extend((first..).zip(events));
    }
    assert_eq!(
        log.last_sequence().expect("last"),
        Some(expected.len() as u64 - 1)
    );
    assert_eq!(read_back(&config), expected);
    // Reopening under the same leadership continues the chain.
    drop(log);
    let client = EtcdClient::connect(&config).expect("connect");
    let storage = EtcdStorage::open(&client, &config, &leadership).expect("reopen");
    let (log, replayed) = Log::with_storage(storage).expect("replay");
    assert_eq!(replayed, expected);
    let durable = log
        .append(vec!["after-reopen".into()])
        .expect("append after reopen");
    assert_eq!(durable.get()[0].0, expected.len() as u64);
}

#[test]
fn a_batch_meeting_an_existing_key_writes_nothing_and_poisons() {
    let Some(endpoints) = shared_endpoints() else {
        return;
    };
    let prefix = prefix("all-or-nothing");
    let config = config(&endpoints, &prefix);
    let (_client, _leadership, log, _) = lead(&config, "controller-a");
    let before = strings("kept", 0..5);
    let _ = log.append(before.clone()).expect("first batch");
    // A foreign writer puts sequence 12, in the middle of the next batch
    // (5..=24): the whole batch must be refused, not just its later half.
    plant(&endpoints, &prefix, 12, b"planted");
    let err = log
        .append(strings("lost", 0..20))
        .expect_err("the batch must fail");
    assert!(
        matches!(
            err,
            LogError::Storage(StorageError::SequenceTaken { first: 5, .. })
        ),
        "expected SequenceTaken at 5, got {err:?}"
    );
    assert!(err.is_fencing());
    assert!(matches!(
        log.append(vec!["x".into()]),
        Err(LogError::Poisoned)
    ));
    // Nothing of the refused batch exists: only 0..5 and the planted key.
    let client = EtcdClient::connect(&config).expect("connect");
    let storage = EtcdStorage::open_read_only(&client, &config).expect("read-only");
    let keys: Vec<Vec<u8>> = storage
        .read_from(0)
        .map(|entry| entry.expect("read").key)
        .collect();
    let expected: Vec<Vec<u8>> = [0u64, 1, 2, 3, 4, 12]
        .iter()
        .map(|s| s.to_be_bytes().to_vec())
        .collect();
    assert_eq!(keys, expected);
    // And verification reports the hole the planted key makes.
    let verdict = verify_storage_with(&storage, |_, _| Ok(()));
    assert!(
        matches!(
            verdict,
            Err(eventlog::VerifyError::Gap {
                missing: 5,
                next_present: 12
            })
        ),
        "{verdict:?}"
    );
}

#[test]
fn a_deposed_appender_fails_and_writes_nothing() {
    let Some(endpoints) = shared_endpoints() else {
        return;
    };
    let config = config(&endpoints, &prefix("deposed"));
    let (_ca, leader_a, log_a, _) = lead(&config, "controller-a");
    let _ = log_a
        .append(strings("a", 0..3))
        .expect("A appends while leading");
    // A loses its lease (revoked here; expiry is tested separately) and B
    // is elected and takes over at the tail.
    leader_a.resign().expect("A resigns");
    let (_cb, _leader_b, log_b, replayed) = lead(&config, "controller-b");
    assert_eq!(replayed.len(), 3);
    let _ = log_b.append(strings("b", 0..2)).expect("B appends");
    // A still believes it can append at sequence 3: fenced.
    let err = log_a
        .append(strings("late-a", 0..4))
        .expect_err("A is deposed");
    match &err {
        LogError::Storage(StorageError::Deposed { holder, .. }) => {
            assert_eq!(holder, "controller-b")
        }
        other => panic!("expected Deposed, got {other:?}"),
    }
    assert!(err.is_fencing());
    assert!(matches!(
        log_a.append(vec!["again".into()]),
        Err(LogError::Poisoned)
    ));
    let mut expected = strings("a", 0..3);
    expected.extend(strings("b", 0..2));
    let got: Vec<String> = read_back(&config).into_iter().map(|(_, e)| e).collect();
    assert_eq!(
        got, expected,
        "nothing of the deposed appender's batch was written"
    );
}

#[test]
fn racing_logs_exactly_one_wins_each_sequence() {
    let Some(endpoints) = shared_endpoints() else {
        return;
    };
    let config = config(&endpoints, &prefix("race"));
    let (client, leadership, log_a, _) = lead(&config, "controller-a");
    // Two logs at the same tail under one leadership (a bug the fence's
    // second compare must still catch): both append at once, repeatedly.
    let storage_b = EtcdStorage::open(&client, &config, &leadership).expect("second open");
    let (log_b, _) = Log::with_storage(storage_b).expect("replay");
    let barrier = Arc::new(Barrier::new(2));
    let run = |log: Log, name: &'static str, barrier: Arc<Barrier>| {
        thread::spawn(move || {
            barrier.wait();
            let mut won = Vec::new();
            for round in 0..20 {
                match log.append(vec![format!("{name}-{round}")]) {
                    Ok(durable) => won.extend(durable.into_inner()),
                    Err(err) => return (won, Some(err)),
                }
            }
            (won, None)
        })
    };
    let a = run(log_a, "a", Arc::clone(&barrier));
    let b = run(log_b, "b", barrier);
    let (won_a, err_a) = a.join().expect("thread a");
    let (won_b, err_b) = b.join().expect("thread b");
    // Each log stops at its first refusal; at most one can run unrefused.
    let refusals = [&err_a, &err_b].iter().filter(|e| e.is_some()).count();
    assert!(
        refusals >= 1,
        "two logs at one tail cannot both append 20 times"
    );
    for err in [err_a, err_b].into_iter().flatten() {
        assert!(
            matches!(err, LogError::Storage(StorageError::SequenceTaken { .. })),
            "{err:?}"
        );
    }
    // Every acknowledged entry is in the log, at its sequence, and no
    // sequence was acknowledged twice.
    let log = read_back(&config);
    let mut acked: Vec<_> = won_a.into_iter().chain(won_b).collect();
    acked.sort();
    let before = acked.len();
    acked.dedup_by_key(|(sequence, _)| *sequence);
    assert_eq!(
        acked.len(),
        before,
        "a sequence was acknowledged to both logs"
    );
    assert_eq!(log, acked);
}

#[test]
fn two_candidates_exactly_one_leads() {
    let Some(endpoints) = shared_endpoints() else {
        return;
    };
    let config = config(&endpoints, &prefix("election"));
    for round in 0..5 {
        let barrier = Arc::new(Barrier::new(2));
        let handles: Vec<_> = ["x", "y"]
            .into_iter()
            .map(|name| {
                let (config, barrier) = (config.clone(), Arc::clone(&barrier));
                thread::spawn(move || {
                    let client = EtcdClient::connect(&config).expect("connect");
                    barrier.wait();
                    Leadership::campaign(&client, &config, name, Duration::ZERO)
                })
            })
            .collect();
        let outcomes: Vec<_> = handles
            .into_iter()
            .map(|h| h.join().expect("join"))
            .collect();
        let winners = outcomes.iter().filter(|o| o.is_ok()).count();
        assert_eq!(
            winners,
            1,
            "round {round}: {outcomes:?}",
            outcomes = outcomes
                .iter()
                .map(|o| o.as_ref().map(|_| "won").map_err(|e| e.to_string()))
                .collect::<Vec<_>>()
        );
        for outcome in &outcomes {
            if let Err(err) = outcome {
                assert!(matches!(err, StorageError::LeaderElsewhere { .. }), "{err}");
            }
        }
        // Dropping the winner revokes its lease for the next round.
    }
}

#[test]
fn lease_expiry_deposes() {
    let Some(endpoints) = shared_endpoints() else {
        return;
    };
    let mut config = config(&endpoints, &prefix("expiry"));
    config.lease_ttl_ms = 1_000;
    let (_client, leadership, log, _) = lead(&config, "controller-a");
    let _ = log
        .append(vec!["before".into()])
        .expect("append while leading");
    assert_eq!(leadership.ttl(), Duration::from_secs(1));
    // A crashed controller: the lease is no longer renewed, never revoked.
    leadership.abandon();
    let observer = EtcdClient::connect(&config).expect("connect");
    let started = Instant::now();
    // etcd expires the lease one TTL after its last renewal (its lessor
    // checks twice a second); a standby can be elected then.
    let standby = Leadership::campaign(&observer, &config, "standby", Duration::from_secs(10))
        .expect("the standby is elected once the lease expired");
    let waited = started.elapsed();
    // One TTL plus etcd's expiry check and raft; generous for a loaded CI.
    assert!(waited <= Duration::from_secs(8), "expiry took {waited:?}");
    let err = log
        .append(vec!["after".into()])
        .expect_err("expired leader is fenced");
    assert!(err.is_fencing(), "{err:?}");
    let got: Vec<String> = read_back(&config).into_iter().map(|(_, e)| e).collect();
    assert_eq!(got, vec!["before".to_string()]);
    drop(standby);
}

#[test]
fn keep_alive_holds_leadership_past_the_ttl() {
    let Some(endpoints) = shared_endpoints() else {
        return;
    };
    let mut config = config(&endpoints, &prefix("keepalive"));
    config.lease_ttl_ms = 2_000;
    let (_client, leadership, log, _) = lead(&config, "controller-a");
    // 5 x 1.4 s: well past the 2 s TTL, so only renewals keep it.
    for i in 0..5 {
        thread::sleep(Duration::from_millis(1_400));
        let _ = log
            .append(vec![format!("tick-{i}")])
            .expect("a leader whose lease is kept alive keeps appending");
    }
    assert!(!leadership.is_lost());
}

#[test]
fn read_only_storage_refuses_appends() {
    let Some(endpoints) = shared_endpoints() else {
        return;
    };
    let config = config(&endpoints, &prefix("read-only"));
    let client = EtcdClient::connect(&config).expect("connect");
    let storage = EtcdStorage::open_read_only(&client, &config).expect("read-only");
    let (log, _) = Log::with_storage(storage).expect("replay");
    let err = log.append(vec!["x".into()]).expect_err("read-only");
    assert!(
        matches!(err, LogError::Storage(StorageError::ReadOnly { .. })),
        "{err:?}"
    );
}

#[test]
fn appends_over_the_batch_limits_are_refused_without_poisoning() {
    let Some(endpoints) = shared_endpoints() else {
        return;
    };
    let mut config = config(&endpoints, &prefix("limits"));
    config.limits = BatchLimits {
        entries_max: 100,
        bytes_max: 32 << 10,
    };
    let (_client, _leadership, log, _) = lead(&config, "controller-a");
    let err = log
        .append(strings("x", 0..101))
        .expect_err("over entries_max");
    assert!(
        matches!(
            err,
            LogError::ExceedsStorageBatch {
                entries: 101,
                entries_max: 100,
                ..
            }
        ),
        "{err:?}"
    );
    let err = log
        .append(vec!["y".repeat(40 << 10)])
        .expect_err("over bytes_max");
    assert!(
        matches!(err, LogError::ExceedsStorageBatch { .. }),
        "{err:?}"
    );
    // The log is still usable, and concurrent appends that together exceed
    // the limits are committed in several groups, each within them.
    let _ = log
        .append(strings("ok", 0..100))
        .expect("a batch at the limit");
    let log = Arc::new(log);
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let log = Arc::clone(&log);
            thread::spawn(move || {
                for i in 0..5 {
                    let _ = log
                        .append(strings(&format!("t{t}-{i}"), 0..60))
                        .expect("append");
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().expect("appender");
    }
    assert_eq!(read_back(&config).len(), 100 + 4 * 5 * 60);
}

#[test]
fn invalid_configurations_are_refused_clearly() {
    let cases = [
        (EtcdConfig::new(vec![], "/p"), "endpoints"),
        (
            EtcdConfig::new(vec!["127.0.0.1:1".into()], "relative"),
            "prefix",
        ),
        (EtcdConfig::new(vec!["127.0.0.1:1".into()], "/"), "prefix"),
        (
            EtcdConfig {
                lease_ttl_ms: 500,
                ..EtcdConfig::new(vec!["127.0.0.1:1".into()], "/p")
            },
            "lease_ttl_ms",
        ),
    ];
    for (config, field) in cases {
        let err = config.validate().expect_err("invalid");
        assert!(matches!(err, StorageError::EtcdConfig(_)));
        assert!(err.to_string().contains(field), "{err} should name {field}");
    }
}

/// A hot standby's read-only log follows what the leader appends, entry
/// by entry verified; once the leader is gone and the standby is elected,
/// the same log on the fenced storage appends onto the followed chain
/// without replaying it. A planted entry that breaks the chain is refused
/// naming its sequence, and the follower's end does not move.
#[test]
fn a_follower_reads_new_entries_then_appends_after_election() {
    let Some(endpoints) = shared_endpoints() else {
        return;
    };
    let prefix = prefix("follow");
    let config = config(&endpoints, &prefix);
    let (_client, leadership, leader, _) = lead(&config, "controller-a");
    let client = EtcdClient::connect(&config).expect("connect");
    let storage = EtcdStorage::open_read_only(&client, &config).expect("read-only");
    let (follower, replayed) = Log::with_storage(storage).expect("replay read-only");
    assert!(replayed.is_empty());
    assert!(follower.read_new().expect("nothing new").is_empty());
    let _ = leader.append(strings("a", 0..3)).expect("append");
    let _ = leader.append(strings("b", 0..2)).expect("append");
    let got = follower.read_new().expect("read the new entries");
    let want: Vec<(u64, String)> = (0..)
        .zip(strings("a", 0..3).into_iter().chain(strings("b", 0..2)))
        .collect();
    assert_eq!(got, want);
    assert_eq!(follower.last_sequence().expect("last"), Some(4));
    assert!(follower.read_new().expect("caught up").is_empty());
    // The leader resigns; the standby is elected and swaps its storage.
    drop(leader);
    leadership.resign().expect("resign");
    let won = Leadership::campaign(&client, &config, "controller-b", Duration::from_secs(10))
        .expect("elected");
    let fenced = EtcdStorage::open(&client, &config, &won).expect("open fenced");
    let promoted = follower.map_storage(|_| fenced);
    assert!(promoted.read_new().expect("at the tail").is_empty());
    let durable = promoted
        .append(vec!["c-0".into()])
        .expect("append as leader");
    assert_eq!(durable.get()[0].0, 5);
    let whole = read_back(&config);
    assert_eq!(whole.len(), 6, "the chain verifies across the takeover");
    // A writer outside the leadership plants an entry that is no envelope:
    // a follower refuses it by sequence and stays where it was.
    let storage = EtcdStorage::open_read_only(&client, &config).expect("read-only");
    let (second, _) = Log::with_storage(storage).expect("replay");
    plant(&endpoints, &prefix, 6, b"not an envelope");
    let err = second.read_new().expect_err("a bad entry is refused");
    assert!(
        matches!(&err, LogError::Verify(e) if e.sequence() == Some(6)),
        "expected a verify error at 6, got {err:?}"
    );
    assert_eq!(second.last_sequence().expect("last"), Some(5));
}

/// A read-only scan and the storage's own idea of the last sequence agree
/// although the leader appended in between (one revision for both).
#[test]
fn read_only_last_sequence_matches_the_latest_scan() {
    let Some(endpoints) = shared_endpoints() else {
        return;
    };
    let config = config(&endpoints, &prefix("scan-revision"));
    let (_client, _leadership, log, _) = lead(&config, "controller-a");
    let _ = log.append(strings("first", 0..5)).expect("append");
    let client = EtcdClient::connect(&config).expect("connect");
    let reader = EtcdStorage::open_read_only(&client, &config).expect("read-only");
    let scanned = reader.read_from(0).count() as u64;
    assert_eq!(scanned, 5);
    // The leader appends after the scan ended, before the cross-check.
    let _ = log.append(strings("more", 0..3)).expect("append more");
    assert_eq!(reader.last_sequence().expect("last"), Some(scanned - 1));
    // A new scan sees the growth, and the cross-check with it.
    assert_eq!(reader.read_from(0).count(), 8);
    assert_eq!(reader.last_sequence().expect("last"), Some(7));
}

/// Standbys opening (replay + chain verification) while the leader appends
/// as fast as it can: every open succeeds and sees a prefix of the log.
#[test]
fn read_only_opens_racing_appends_all_succeed() {
    let Some(endpoints) = shared_endpoints() else {
        return;
    };
    let config = config(&endpoints, &prefix("open-race"));
    let (_client, _leadership, log, _) = lead(&config, "controller-a");
    let _ = log.append(strings("seed", 0..50)).expect("seed");
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let appender = {
        let done = Arc::clone(&done);
        thread::spawn(move || {
            let mut round = 0;
            while !done.load(std::sync::atomic::Ordering::Acquire) {
                let _ = log
                    .append(vec![format!("race-{round}")])
                    .expect("append while standbys open");
                round += 1;
            }
            round
        })
    };
    let client = EtcdClient::connect(&config).expect("connect");
    let mut sizes = Vec::new();
    for _ in 0..30 {
        let storage = EtcdStorage::open_read_only(&client, &config).expect("read-only");
        let (_, events) = Log::with_storage(storage).expect("a standby's open during appends");
        sizes.push(events.len());
    }
    done.store(true, std::sync::atomic::Ordering::Release);
    let appended = appender.join().expect("appender");
    assert!(appended > 0, "the leader appended during the opens");
    assert!(sizes.windows(2).all(|w| w[0] <= w[1]), "{sizes:?}");
}

/// The resolution of an append whose outcome was unknown: the retry of the
/// same transaction meets our own keys (our bytes, our lease: success),
/// someone else's bytes (refused), no keys (it commits now), or another
/// leader (deposed, though the bytes are ours). Without an unknown outcome
/// existing keys are a plain refusal.
#[test]
fn an_unknown_outcome_is_resolved_by_reading_back() {
    let Some(endpoints) = shared_endpoints() else {
        return;
    };
    let config = config(&endpoints, &prefix("resolve"));
    let client = EtcdClient::connect(&config).expect("connect");
    let leadership =
        Leadership::campaign(&client, &config, "controller-a", Duration::from_secs(10))
            .expect("win the election");
    let storage = EtcdStorage::open(&client, &config, &leadership).expect("open");
    let batch = vec![(0, b"zero".to_vec()), (1, b"one".to_vec())];
    storage
        .append_batch(&batch)
        .expect("the first attempt commits");
    // Its answer was lost: the retry finds exactly our bytes.
    storage
        .append_after_unknown_outcome(&batch)
        .expect("our own committed attempt is recognised");
    // A batch with other bytes at those sequences is not ours.
    let other = vec![(0, b"zero".to_vec()), (1, b"uno".to_vec())];
    let err = storage
        .append_after_unknown_outcome(&other)
        .expect_err("other bytes are not our attempt");
    assert!(
        matches!(err, StorageError::SequenceTaken { first: 0, .. }),
        "{err:?}"
    );
    // Without an unknown outcome, existing keys are refused, even ours.
    let err = storage
        .append_batch(&batch)
        .expect_err("a second append of the same batch");
    assert!(matches!(err, StorageError::SequenceTaken { .. }), "{err:?}");
    // A retry whose first attempt never committed commits now, once.
    let next = vec![(2, b"two".to_vec())];
    storage
        .append_after_unknown_outcome(&next)
        .expect("a lost attempt commits on retry");
    let values: Vec<Vec<u8>> = storage
        .read_from(0)
        .map(|entry| entry.expect("read").value)
        .collect();
    assert_eq!(
        values,
        vec![b"zero".to_vec(), b"one".to_vec(), b"two".to_vec()]
    );
    // Deposed: our bytes are there, but the leader key is not ours.
    leadership.resign().expect("resign");
    let err = storage
        .append_after_unknown_outcome(&batch)
        .expect_err("a deposed retry");
    assert!(matches!(err, StorageError::Deposed { .. }), "{err:?}");
}

/// Deletes the raw entry key of `sequence` under `prefix`, as damage would.
fn punch(endpoints: &[String], prefix: &str, sequence: u64) {
    let mut key = format!("{prefix}/e/").into_bytes();
    key.extend_from_slice(&sequence.to_be_bytes());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime for the raw client");
    runtime.block_on(async {
        let mut client = etcd_client::Client::connect(endpoints, None)
            .await
            .expect("raw connect");
        client.delete(key, None).await.expect("raw delete");
    });
}

/// `last_sequence` counts the live entries instead of sorting the range
/// (which etcd does by reading all of it); a hole makes the count and the
/// keys disagree, and the answer is still the last key, so a scan's
/// cross-check reports the hole instead of a wrong end.
#[test]
fn last_sequence_is_the_last_key_with_or_without_a_hole() {
    let Some(endpoints) = shared_endpoints() else {
        return;
    };
    let prefix = prefix("last-hole");
    let config = config(&endpoints, &prefix);
    let (client, _leadership, log, _) = lead(&config, "controller-a");
    let _ = log.append(strings("e", 0..10)).expect("append");
    let reader = EtcdStorage::open_read_only(&client, &config).expect("read-only");
    assert_eq!(reader.last_sequence().expect("last"), Some(9));
    punch(&endpoints, &prefix, 4);
    let reader = EtcdStorage::open_read_only(&client, &config).expect("read-only");
    assert_eq!(reader.last_sequence().expect("last with a hole"), Some(9));
    punch(&endpoints, &prefix, 9);
    let reader = EtcdStorage::open_read_only(&client, &config).expect("read-only");
    assert_eq!(
        reader.last_sequence().expect("last after the end went"),
        Some(8)
    );
}
