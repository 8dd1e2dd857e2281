//! Snapshots on sled: opening from the newest usable snapshot equals a
//! full replay, damaged / unlinked / out-of-range snapshots are skipped
//! (older one, else genesis), opening reads only the tail, the durable
//! watermark still refuses a truncated log, and deep verification names
//! a snapshot that differs from the fold.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use eventlog::{
    sled_config, verify, verify_snapshots, BatchLimits, EventLog, LogError, LogStorage, RawEntry,
    SledStorage, SnapshotFault, SnapshotSkip, StorageError, VerifyError,
};

type Log = EventLog<String, SledStorage>;

/// The test's "state": every event folded so far, one per line.
fn encode(events: &[String]) -> Vec<u8> {
    events.join("\n").into_bytes()
}

fn decode(bytes: &[u8]) -> Result<Vec<String>, String> {
    let text = std::str::from_utf8(bytes).map_err(|err| err.to_string())?;
    Ok(if text.is_empty() {
        Vec::new()
    } else {
        text.split('\n').map(str::to_string).collect()
    })
}

fn events(tag: &str, range: std::ops::Range<usize>) -> Vec<String> {
    range.map(|i| format!("{tag}-{i}")).collect()
}

/// A closed log in `dir` holding `tag-0..tag-n`, with snapshots at `at`.
fn log_with_snapshots(dir: &Path, tag: &str, n: usize, at: &[usize]) -> Vec<String> {
    let all = events(tag, 0..n);
    let (log, _) = Log::open(dir).expect("open");
    for chunk in all.chunks(10) {
        let _ = log.append(chunk.to_vec()).expect("append");
    }
    for &covers in at {
        log.put_snapshot(covers as u64, &encode(&all[..covers]))
            .expect("put snapshot");
    }
    log.close().expect("close");
    all
}

/// Runs `f` on the raw sled tree `tree` of the closed log in `dir`.
fn with_raw_tree(dir: &Path, tree: &str, f: impl FnOnce(&sled::Tree)) {
    let db = sled_config(dir).open().expect("raw open");
    let tree = db.open_tree(tree).expect("tree");
    f(&tree);
    db.flush().expect("flush");
}

/// The state after opening from a snapshot and folding the tail.
fn fold(open: &eventlog::SnapshotOpen<String, SledStorage, Vec<String>>) -> Vec<String> {
    let mut state = open
        .snapshot
        .as_ref()
        .map(|s| s.state.clone())
        .unwrap_or_default();
    state.extend(open.tail.iter().map(|(_, e)| e.clone()));
    state
}

#[test]
fn snapshot_and_tail_equal_a_full_replay_and_the_log_appends_after_the_tail() {
    let dir = tempfile::tempdir().expect("temp dir");
    let all = log_with_snapshots(dir.path(), "a", 100, &[30, 60]);
    let open = Log::open_from_snapshot(dir.path(), decode).expect("open from snapshot");
    assert_eq!(open.snapshot.as_ref().map(|s| s.covers), Some(60));
    assert!(open.skipped.is_empty());
    assert_eq!(open.tail.first().map(|(s, _)| *s), Some(60));
    assert_eq!(fold(&open), all);
    assert_eq!(open.log.snapshot_sequences().expect("list"), vec![60, 30]);
    let appended = open.log.append(vec!["after".into()]).expect("append");
    assert_eq!(appended.into_inner()[0].0, 100);
    open.log.close().expect("close");
    // A full open (which checks the layout, snapshots tree included) and
    // a forensic verification agree.
    let report = verify(dir.path()).expect("verifies with a snapshots tree");
    assert_eq!(report.entries, 101);
    let (_, replayed) = Log::open(dir.path()).expect("full open");
    assert_eq!(replayed.len(), 101);
}

#[test]
fn a_snapshot_at_the_end_opens_with_an_empty_tail() {
    let dir = tempfile::tempdir().expect("temp dir");
    let all = log_with_snapshots(dir.path(), "e", 40, &[40]);
    let open = Log::open_from_snapshot(dir.path(), decode).expect("open");
    assert_eq!(open.snapshot.as_ref().map(|s| s.covers), Some(40));
    assert!(open.tail.is_empty());
    assert_eq!(fold(&open), all);
    let appended = open.log.append(vec!["next".into()]).expect("append");
    assert_eq!(appended.into_inner()[0].0, 40);
    open.log.close().expect("close");
    verify(dir.path()).expect("the appended entry chains on");
}

#[test]
fn a_damaged_snapshot_is_skipped_for_an_older_one_then_for_genesis() {
    let dir = tempfile::tempdir().expect("temp dir");
    let all = log_with_snapshots(dir.path(), "d", 100, &[30, 60]);
    let flip = |covers: u64| {
        with_raw_tree(dir.path(), "snapshots", |tree| {
            let mut value = tree
                .get(covers.to_be_bytes())
                .expect("get")
                .expect("present")
                .to_vec();
            let middle = value.len() / 2;
            value[middle] ^= 0x01;
            tree.insert(covers.to_be_bytes(), value).expect("insert");
        })
    };
    flip(60);
    let open = Log::open_from_snapshot(dir.path(), decode).expect("open");
    assert_eq!(open.snapshot.as_ref().map(|s| s.covers), Some(30));
    assert_eq!(
        open.skipped,
        vec![(60, SnapshotSkip::Damaged(SnapshotFault::ChecksumMismatch))]
    );
    assert_eq!(fold(&open), all);
    open.log.close().expect("close");
    flip(30);
    let open = Log::open_from_snapshot(dir.path(), decode).expect("open");
    assert!(open.snapshot.is_none(), "genesis: a full replay");
    assert_eq!(open.skipped.len(), 2);
    assert_eq!(fold(&open), all);
}

#[test]
fn a_snapshot_of_another_chain_or_beyond_the_end_is_skipped() {
    let other = tempfile::tempdir().expect("temp dir");
    log_with_snapshots(other.path(), "other", 200, &[50, 150]);
    let mut foreign = Vec::new();
    with_raw_tree(other.path(), "snapshots", |tree| {
        for covers in [50u64, 150] {
            let value = tree.get(covers.to_be_bytes()).expect("get").expect("some");
            foreign.push((covers, value.to_vec()));
        }
    });
    let dir = tempfile::tempdir().expect("temp dir");
    let all = log_with_snapshots(dir.path(), "a", 100, &[20]);
    with_raw_tree(dir.path(), "snapshots", |tree| {
        for (covers, value) in &foreign {
            tree.insert(covers.to_be_bytes(), value.as_slice())
                .expect("plant");
        }
    });
    let open = Log::open_from_snapshot(dir.path(), decode).expect("open");
    assert_eq!(open.snapshot.as_ref().map(|s| s.covers), Some(20));
    assert_eq!(open.skipped.len(), 2, "{:?}", open.skipped);
    assert_eq!(
        open.skipped[0],
        (
            150,
            SnapshotSkip::BeyondEnd {
                covers: 150,
                end: 100
            }
        )
    );
    assert!(
        matches!(
            &open.skipped[1],
            (50, SnapshotSkip::Unlinked { sequence: 49, .. })
        ),
        "{:?}",
        open.skipped[1]
    );
    assert_eq!(fold(&open), all);
}

#[test]
fn a_state_the_decoder_refuses_is_skipped() {
    let dir = tempfile::tempdir().expect("temp dir");
    let all = log_with_snapshots(dir.path(), "u", 30, &[10]);
    let (log, _) = Log::open(dir.path()).expect("open");
    log.put_snapshot(20, &[0xff, 0xfe])
        .expect("put (not UTF-8)");
    log.close().expect("close");
    let open = Log::open_from_snapshot(dir.path(), decode).expect("open");
    assert_eq!(open.snapshot.as_ref().map(|s| s.covers), Some(10));
    assert!(matches!(
        open.skipped[..],
        [(20, SnapshotSkip::Undecodable { .. })]
    ));
    assert_eq!(fold(&open), all);
}

#[test]
fn snapshots_of_entries_not_durable_or_too_far_are_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (log, _) = Log::open(dir.path()).expect("open");
    let _ = log.append(events("x", 0..5)).expect("append");
    assert!(matches!(
        log.put_snapshot(6, b""),
        Err(LogError::SnapshotAhead {
            covers: 6,
            durable_end: 5
        })
    ));
    log.put_snapshot(0, b"")
        .expect("covering nothing is allowed");
    log.put_snapshot(5, &encode(&events("x", 0..5)))
        .expect("put");
    assert_eq!(log.snapshot_sequences().expect("list"), vec![5, 0]);
    assert_eq!(log.prune_snapshots(1).expect("prune"), vec![0]);
    assert_eq!(log.snapshot_sequences().expect("list"), vec![5]);
}

#[test]
fn the_durable_watermark_still_refuses_a_truncated_log() {
    let dir = tempfile::tempdir().expect("temp dir");
    log_with_snapshots(dir.path(), "t", 50, &[20]);
    // sled's recovery dropping a damaged tail, as the watermark exists for.
    with_raw_tree(dir.path(), "entries", |tree| {
        for sequence in 45u64..50 {
            tree.remove(sequence.to_be_bytes()).expect("remove");
        }
    });
    match Log::open_from_snapshot(dir.path(), decode) {
        Err(LogError::Verify(VerifyError::Truncated {
            first_missing: 45,
            durable_end: 50,
        })) => {}
        Err(other) => panic!("expected Truncated, got {other}"),
        Ok(_) => panic!("a truncated log opened"),
    }
}

/// Counts entries handed out by `read_from` iterators.
struct Counting {
    inner: SledStorage,
    entries_read: AtomicU64,
}

impl LogStorage for Counting {
    fn append_batch(&self, entries: &[(u64, Vec<u8>)]) -> Result<(), StorageError> {
        self.inner.append_batch(entries)
    }
    fn flush(&self) -> Result<(), StorageError> {
        self.inner.flush()
    }
    fn read_from(
        &self,
        from: u64,
    ) -> Box<dyn Iterator<Item = Result<RawEntry, StorageError>> + '_> {
        Box::new(self.inner.read_from(from).inspect(|_| {
            self.entries_read.fetch_add(1, Ordering::Relaxed);
        }))
    }
    fn last_sequence(&self) -> Result<Option<u64>, StorageError> {
        self.inner.last_sequence()
    }
    fn batch_limits(&self) -> BatchLimits {
        self.inner.batch_limits()
    }
    fn put_snapshot(&self, covers: u64, record: &[u8]) -> Result<(), StorageError> {
        self.inner.put_snapshot(covers, record)
    }
    fn snapshot_sequences(&self) -> Result<Vec<u64>, StorageError> {
        self.inner.snapshot_sequences()
    }
    fn read_snapshot(&self, covers: u64) -> Result<Option<Vec<u8>>, StorageError> {
        self.inner.read_snapshot(covers)
    }
    fn delete_snapshot(&self, covers: u64) -> Result<(), StorageError> {
        self.inner.delete_snapshot(covers)
    }
}

#[test]
fn opening_from_a_snapshot_reads_only_the_tail() {
    const PREFIX: usize = 3_000;
    const TAIL: usize = 7;
    let dir = tempfile::tempdir().expect("temp dir");
    let all = log_with_snapshots(dir.path(), "c", PREFIX + TAIL, &[PREFIX]);
    let counting = Counting {
        inner: SledStorage::open_existing(dir.path()).expect("open storage"),
        entries_read: AtomicU64::new(0),
    };
    let open = EventLog::<String, Counting>::with_storage_from_snapshot(counting, decode)
        .expect("open from snapshot");
    assert_eq!(
        open.snapshot.as_ref().map(|s| s.covers),
        Some(PREFIX as u64)
    );
    assert_eq!(fold_counting(&open), all);
    let read = open.log.storage().entries_read.load(Ordering::Relaxed);
    // The tail, plus entry PREFIX - 1 (the snapshot's link): nothing of
    // the 3,000-entry prefix beyond it.
    assert!(read <= TAIL as u64 + 1, "read {read} entries");
    drop(open);
    // A full open of the same log reads every entry.
    let counting = Counting {
        inner: SledStorage::open_existing(dir.path()).expect("open storage"),
        entries_read: AtomicU64::new(0),
    };
    let (log, _) = EventLog::<String, Counting>::with_storage(counting).expect("replay");
    assert!(log.storage().entries_read.load(Ordering::Relaxed) >= (PREFIX + TAIL) as u64);
}

fn fold_counting(open: &eventlog::SnapshotOpen<String, Counting, Vec<String>>) -> Vec<String> {
    let mut state = open
        .snapshot
        .as_ref()
        .map(|s| s.state.clone())
        .unwrap_or_default();
    state.extend(open.tail.iter().map(|(_, e)| e.clone()));
    state
}

#[test]
fn deep_verification_names_the_first_snapshot_that_differs_from_the_fold() {
    let dir = tempfile::tempdir().expect("temp dir");
    let all = log_with_snapshots(dir.path(), "v", 50, &[10, 40, 50]);
    let storage = SledStorage::open_existing(dir.path()).expect("open storage");
    let check = |storage: &SledStorage| {
        let mut acc: Vec<String> = Vec::new();
        verify_snapshots(
            storage,
            &mut acc,
            |acc, _, payload| {
                acc.push(eventlog::decode_payload::<String>(payload).map_err(|e| e.to_string())?);
                Ok(())
            },
            |acc, _, state| {
                let decoded = decode(state)?;
                if decoded == *acc {
                    Ok(())
                } else {
                    Err(format!("{} events instead of {}", decoded.len(), acc.len()))
                }
            },
        )
        .expect("the log verifies")
    };
    let report = check(&storage);
    assert_eq!(report.agreeing, vec![10, 40, 50]);
    assert_eq!(report.first_difference, None);
    assert_eq!(report.log.entries, 50);
    drop(storage);
    // A snapshot whose record is sound and linked but whose state is not
    // the fold (a bug in the writer's fold, say).
    let (log, _) = Log::open(dir.path()).expect("open");
    log.put_snapshot(40, &encode(&all[..39])).expect("put");
    drop(log);
    let storage = SledStorage::open_existing(dir.path()).expect("open storage");
    let report = check(&storage);
    assert_eq!(report.agreeing, vec![10]);
    let (covers, reason) = report.first_difference.expect("a difference");
    assert_eq!(covers, 40);
    assert!(reason.contains("39 events instead of 40"), "{reason}");
}
