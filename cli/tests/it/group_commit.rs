//! Group commit: concurrent appenders share flushes, an acknowledgement is
//! only ever given for flushed data, and a failed flush poisons the log.

use crate::common;

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use common::{sample, TestEvent};
use eventlog::{verify, EventLog, LogError, LogStorage, RawEntry, StorageError, APPEND_EVENTS_MAX};

/// In-memory storage whose "disk" is the snapshot taken at each flush.
#[derive(Default)]
struct MemStorage {
    memory: Mutex<BTreeMap<Vec<u8>, Vec<u8>>>,
    disk: Arc<Mutex<BTreeMap<Vec<u8>, Vec<u8>>>>,
    flushes: AtomicUsize,
    flush_delay: Duration,
    fail_flush: AtomicBool,
    panic_flush: AtomicBool,
}

impl MemStorage {
    fn with_delay(flush_delay: Duration) -> Self {
        MemStorage {
            flush_delay,
            ..MemStorage::default()
        }
    }

    /// A storage that starts from what this one has on "disk" (a crash).
    fn crashed_copy(&self) -> MemStorage {
        let disk = self.disk.lock().expect("lock").clone();
        MemStorage {
            memory: Mutex::new(disk.clone()),
            disk: Arc::new(Mutex::new(disk)),
            ..MemStorage::default()
        }
    }
}

fn failure(action: &'static str) -> StorageError {
    StorageError::Io {
        path: "mem".into(),
        action,
        source: "injected failure".into(),
    }
}

impl LogStorage for MemStorage {
    fn append_batch(&self, entries: &[(u64, Vec<u8>)]) -> Result<(), StorageError> {
        let mut memory = self.memory.lock().map_err(|_| failure("appending"))?;
        for (sequence, value) in entries {
            memory.insert(sequence.to_be_bytes().to_vec(), value.clone());
        }
        Ok(())
    }

    fn flush(&self) -> Result<(), StorageError> {
        let snapshot = self.memory.lock().map_err(|_| failure("flushing"))?.clone();
        thread::sleep(self.flush_delay);
        if self.panic_flush.load(Ordering::SeqCst) {
            panic!("injected panic in flush");
        }
        if self.fail_flush.load(Ordering::SeqCst) {
            return Err(failure("flushing"));
        }
        self.flushes.fetch_add(1, Ordering::SeqCst);
        *self.disk.lock().map_err(|_| failure("flushing"))? = snapshot;
        Ok(())
    }

    fn read_from(
        &self,
        from: u64,
    ) -> Box<dyn Iterator<Item = Result<RawEntry, StorageError>> + '_> {
        let entries: Vec<_> = match self.memory.lock() {
            Ok(memory) => memory
                .range(from.to_be_bytes().to_vec()..)
                .map(|(key, value)| {
                    Ok(RawEntry {
                        key: key.clone(),
                        value: value.clone(),
                    })
                })
                .collect(),
            Err(_) => vec![Err(failure("reading"))],
        };
        Box::new(entries.into_iter())
    }

    fn last_sequence(&self) -> Result<Option<u64>, StorageError> {
        let memory = self.memory.lock().map_err(|_| failure("reading"))?;
        Ok(memory
            .keys()
            .next_back()
            .map(|key| u64::from_be_bytes(key.as_slice().try_into().expect("8-byte test keys"))))
    }
}

#[test]
fn concurrent_appenders_share_flushes_and_are_acked_only_after_flush() {
    const THREADS: u64 = 16;
    const APPENDS: u64 = 20;
    let storage = MemStorage::with_delay(Duration::from_millis(2));
    let disk = Arc::clone(&storage.disk);
    let (log, replayed) = EventLog::<TestEvent, MemStorage>::with_storage(storage).expect("open");
    assert!(replayed.is_empty());
    let log = Arc::new(log);

    let handles: Vec<_> = (0..THREADS)
        .map(|thread_index| {
            let log = Arc::clone(&log);
            let disk = Arc::clone(&disk);
            thread::spawn(move || {
                let mut acked = Vec::new();
                for i in 0..APPENDS {
                    let event = sample(thread_index * 1000 + i);
                    let durable = log.append(vec![event.clone()]).expect("append");
                    let (sequence, returned) = durable.into_inner().remove(0);
                    assert_eq!(returned, event);
                    // The acknowledgement came after a flush that covered it.
                    let on_disk = disk
                        .lock()
                        .expect("lock")
                        .contains_key(&sequence.to_be_bytes()[..]);
                    assert!(
                        on_disk,
                        "sequence {sequence} acknowledged before it was flushed"
                    );
                    acked.push((sequence, event));
                }
                acked
            })
        })
        .collect();
    let mut acked: Vec<(u64, TestEvent)> = handles
        .into_iter()
        .flat_map(|handle| handle.join().expect("appender thread"))
        .collect();
    acked.sort_by_key(|(sequence, _)| *sequence);

    let total = THREADS * APPENDS;
    let sequences: HashSet<u64> = acked.iter().map(|(sequence, _)| *sequence).collect();
    assert_eq!(
        sequences,
        (0..total).collect::<HashSet<_>>(),
        "unique, gap-free sequences"
    );

    let log = Arc::try_unwrap(log).unwrap_or_else(|_| panic!("all appenders joined"));
    let flushes = log_flushes(&log);
    assert!(
        flushes < (total / 2) as usize,
        "{flushes} flushes for {total} appends: group commit is not grouping"
    );

    // After a crash, every acknowledged event is there, in order.
    let crashed = crashed_storage(&log);
    drop(log);
    let (_reopened, events) =
        EventLog::<TestEvent, MemStorage>::with_storage(crashed).expect("reopen");
    assert_eq!(events, acked);
}

fn log_flushes(log: &EventLog<TestEvent, MemStorage>) -> usize {
    storage_of(log).flushes.load(Ordering::SeqCst)
}

fn crashed_storage(log: &EventLog<TestEvent, MemStorage>) -> MemStorage {
    storage_of(log).crashed_copy()
}

fn storage_of(log: &EventLog<TestEvent, MemStorage>) -> &MemStorage {
    log.storage()
}

#[test]
fn failed_flush_is_not_acknowledged_and_poisons_the_log() {
    let storage = MemStorage::default();
    let (log, _) = EventLog::<TestEvent, MemStorage>::with_storage(storage).expect("open");
    let _acked = log.append(vec![sample(0)]).expect("healthy append");
    storage_of(&log).fail_flush.store(true, Ordering::SeqCst);
    let err = log.append(vec![sample(1)]).expect_err("flush fails");
    assert!(matches!(err, LogError::Storage(_)), "{err:?}");
    // Even with the fault gone, the log stays poisoned: a later successful
    // fsync would not prove the earlier data reached disk.
    storage_of(&log).fail_flush.store(false, Ordering::SeqCst);
    let err = log.append(vec![sample(2)]).expect_err("poisoned");
    assert!(matches!(err, LogError::Poisoned), "{err:?}");
    assert!(matches!(log.close(), Err(LogError::Poisoned)));
}

#[test]
fn a_panicking_flush_poisons_the_log_and_releases_every_waiter() {
    const THREADS: usize = 8;
    let storage = MemStorage::with_delay(Duration::from_millis(20));
    storage.panic_flush.store(true, Ordering::SeqCst);
    let (log, _) = EventLog::<TestEvent, MemStorage>::with_storage(storage).expect("open");
    let log = Arc::new(log);
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    for i in 0..THREADS {
        let log = Arc::clone(&log);
        let done_tx = done_tx.clone();
        thread::spawn(move || {
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                log.append(vec![sample(i as u64)]).map(|_| ())
            }));
            let _ = done_tx.send(result);
        });
    }
    let mut panicked = 0;
    for _ in 0..THREADS {
        // A waiter left parked by the unwinding leader would hang here.
        match done_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("every appender returns")
        {
            Err(_) => panicked += 1,
            Ok(Err(LogError::Poisoned)) => {}
            Ok(other) => panic!("expected Poisoned, got {other:?}"),
        }
    }
    assert!(panicked >= 1, "the flush panicked in some leader");
    storage_of(&log).panic_flush.store(false, Ordering::SeqCst);
    assert!(matches!(
        log.append(vec![sample(99)]),
        Err(LogError::Poisoned)
    ));
}

#[test]
fn empty_append_is_a_barrier_that_flushes_only_when_needed() {
    let (log, _) =
        EventLog::<TestEvent, MemStorage>::with_storage(MemStorage::default()).expect("open");
    let durable = log.append(vec![]).expect("empty append");
    assert!(durable.get().is_empty());
    assert_eq!(log_flushes(&log), 0, "nothing to flush");
    let _acked = log.append(vec![sample(0), sample(1)]).expect("append");
    assert_eq!(log_flushes(&log), 1);
    let _barrier = log.append(vec![]).expect("barrier");
    assert_eq!(log_flushes(&log), 1, "already durable: no second flush");
    assert_eq!(log.last_sequence().expect("last"), Some(1));
}

#[test]
fn oversized_batches_and_events_are_refused_before_writing() {
    let (log, _) =
        EventLog::<TestEvent, MemStorage>::with_storage(MemStorage::default()).expect("open");
    let too_many = vec![sample(0); APPEND_EVENTS_MAX + 1];
    assert!(matches!(
        log.append(too_many),
        Err(LogError::BatchTooLarge { .. })
    ));
    let huge = TestEvent::Note("x".repeat(eventlog::PAYLOAD_BYTES_MAX));
    assert!(matches!(log.append(vec![huge]), Err(LogError::Payload(_))));
    // Each entry fits, together they are over the bytes bound: refused
    // whole, before anything is written.
    let big = TestEvent::Note("x".repeat(eventlog::PAYLOAD_BYTES_MAX - 64));
    let count = eventlog::APPEND_BYTES_MAX / (eventlog::PAYLOAD_BYTES_MAX - 64) + 1;
    assert!(count <= APPEND_EVENTS_MAX);
    assert!(matches!(
        log.append(vec![big; count]),
        Err(LogError::BatchBytesTooLarge { .. })
    ));
    assert_eq!(
        log.last_sequence().expect("last"),
        None,
        "nothing was written"
    );
    log.close().expect("still healthy");
}

#[test]
fn concurrent_appenders_on_sled_recover_everything_acknowledged() {
    const THREADS: u64 = 8;
    const APPENDS: u64 = 25;
    let temp = tempfile::tempdir().expect("temp dir");
    let (log, _) = EventLog::<TestEvent>::open(temp.path()).expect("open");
    let log = Arc::new(log);
    let handles: Vec<_> = (0..THREADS)
        .map(|thread_index| {
            let log = Arc::clone(&log);
            thread::spawn(move || {
                (0..APPENDS)
                    .flat_map(|i| {
                        let batch = vec![sample(thread_index * 100 + i); 1 + (i % 3) as usize];
                        log.append(batch).expect("append").into_inner()
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut acked: Vec<(u64, TestEvent)> = handles
        .into_iter()
        .flat_map(|handle| handle.join().expect("appender thread"))
        .collect();
    acked.sort_by_key(|(sequence, _)| *sequence);
    // Drop without close: a crash after the last acknowledgement.
    drop(log);
    let report = verify(temp.path()).expect("verifies");
    assert_eq!(report.entries, acked.len() as u64);
    let (_log, events) = EventLog::<TestEvent>::open(temp.path()).expect("reopen");
    assert_eq!(events, acked);
}
