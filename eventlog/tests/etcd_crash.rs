//! Crash consistency on etcd: the whole 3-member cluster is SIGKILLed while
//! a leader appends batches of varying sizes, then restarted on its data.
//! Every acknowledged batch must be there, every batch must be whole or
//! absent, and the log must verify. A cluster of its own, so killing it
//! does not disturb the other tests.

mod etcd_harness;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use etcd_harness::{config, prefix, Cluster, Limits};
use eventlog::{verify_storage_with, EtcdClient, EtcdStorage, EventLog, Leadership};

type Log = EventLog<String, EtcdStorage>;

/// Batch `b` has `size(b)` events, `"b{b}:{i}/{size}"`.
fn size(batch: usize) -> usize {
    [1, 7, 64, 200, 3, 512][batch % 6]
}

#[test]
fn a_whole_cluster_crash_keeps_every_acknowledged_batch_whole() {
    let Some(mut cluster) = Cluster::start("crash", 3, Limits::Fitting) else {
        return;
    };
    let mut config = config(&cluster.endpoints(), &prefix("crash"));
    config.request_timeout_ms = 2_000;
    let client = EtcdClient::connect(&config).expect("connect");
    let leadership =
        Leadership::campaign(&client, &config, "crasher", Duration::from_secs(10)).expect("lead");
    let storage = EtcdStorage::open(&client, &config, &leadership).expect("open");
    let (log, _) = Log::with_storage(storage).expect("replay");
    let acked = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let appender = {
        let (acked, stop) = (Arc::clone(&acked), Arc::clone(&stop));
        thread::spawn(move || {
            for batch in 0.. {
                if stop.load(Ordering::Acquire) {
                    return;
                }
                let n = size(batch);
                let events = (0..n).map(|i| format!("b{batch}:{i}/{n}")).collect();
                match log.append(events) {
                    Ok(_) => acked.lock().unwrap_or_else(|p| p.into_inner()).push(batch),
                    // The crash: the outcome of this batch is unknown.
                    Err(_) => return,
                }
            }
        })
    };
    // Let some batches through, then pull the plug on every member at once.
    while acked.lock().unwrap_or_else(|p| p.into_inner()).len() < 20 {
        thread::sleep(Duration::from_millis(20));
    }
    cluster.kill_all();
    stop.store(true, Ordering::Release);
    appender.join().expect("appender thread");
    let acked = acked.lock().unwrap_or_else(|p| p.into_inner()).clone();
    drop(leadership);
    cluster.restart_all();

    let client = EtcdClient::connect(&config).expect("reconnect");
    let storage = EtcdStorage::open_read_only(&client, &config).expect("read-only");
    verify_storage_with(&storage, |_, _| Ok(())).expect("the log verifies after the crash");
    let (_, events) = Log::with_storage(storage).expect("replay");
    let mut batches: Vec<(usize, usize)> = Vec::new(); // (batch, events seen)
    for (_, event) in &events {
        let (head, of) = event.split_once('/').expect("event format");
        let (batch, index) = head[1..].split_once(':').expect("event format");
        let (batch, index, of): (usize, usize, usize) = (
            batch.parse().expect("batch"),
            index.parse().expect("index"),
            of.parse().expect("size"),
        );
        match batches.last_mut() {
            Some((current, seen)) if *current == batch => {
                assert_eq!(index, *seen, "batch {batch} out of order");
                *seen += 1;
            }
            _ => {
                assert_eq!(index, 0, "batch {batch} starts in the middle");
                batches.push((batch, 1));
            }
        }
        assert_eq!(of, size(batch));
    }
    for (batch, seen) in &batches {
        assert_eq!(
            *seen,
            size(*batch),
            "batch {batch} is partial: {seen} events"
        );
    }
    let present: Vec<usize> = batches.iter().map(|(b, _)| *b).collect();
    // Batches are appended in order, so the present ones are a prefix that
    // covers every acknowledged one (at most one unacknowledged batch, the
    // one in flight at the crash, may have committed).
    assert_eq!(present, (0..present.len()).collect::<Vec<_>>());
    assert!(
        present.len() == acked.len() || present.len() == acked.len() + 1,
        "acknowledged {} batches, found {}",
        acked.len(),
        present.len()
    );
}
