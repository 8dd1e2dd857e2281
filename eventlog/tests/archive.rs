//! Archived history on sled: a round trip through segments and the live
//! log, opening from a snapshot after archiving, the refusals (past the
//! snapshot, not durable, no snapshot at open), a flipped byte named by
//! segment and sequence without changing anything, a crash between the
//! segments and the deletion (both cut points) that verifies and that a
//! re-run finishes, and idempotence.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

use eventlog::archive::{list_segments, write_segments, SEGMENT_BYTES_MIN};
use eventlog::{
    genesis_hash, hash_bytes, sled_config, verify, verify_with_archive, ArchiveConfig,
    ArchiveError, EventLog, HistoryReader, LiveStart, LogError, LogStorage, SegmentFault,
    SledStorage,
};

type Log = EventLog<String, SledStorage>;

/// Small segments, so a few thousand events make several of them.
const SMALL: ArchiveConfig = ArchiveConfig {
    segment_bytes_max: SEGMENT_BYTES_MIN,
    zstd_level: 3,
};

/// Event `i`: text that compresses about as badly as hashes and ids do.
fn event(i: usize) -> String {
    let noise = hash_bytes(&i.to_le_bytes());
    let hex: String = noise.iter().map(|b| format!("{b:02x}")).collect();
    format!("event-{i}-{hex}{hex}")
}

fn events(n: usize) -> Vec<String> {
    (0..n).map(event).collect()
}

/// The test's state: how many events were folded.
fn encode(count: usize) -> Vec<u8> {
    (count as u64).to_le_bytes().to_vec()
}

fn decode(bytes: &[u8]) -> Result<u64, String> {
    let array: [u8; 8] = bytes.try_into().map_err(|_| "not 8 bytes".to_string())?;
    Ok(u64::from_le_bytes(array))
}

/// An open log in `dir` holding events `0..n`, with snapshots at `at`.
fn log_with(dir: &Path, n: usize, at: &[usize]) -> Log {
    let (log, _) = Log::open(dir).expect("open");
    for chunk in events(n).chunks(500) {
        let _ = log.append(chunk.to_vec()).expect("append");
    }
    for &covers in at {
        log.put_snapshot(covers as u64, &encode(covers))
            .expect("put snapshot");
    }
    log
}

/// Every file under `dir` and its bytes.
fn files(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    for entry in fs::read_dir(dir).expect("read dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            out.extend(files(&path));
        } else {
            out.insert(path.clone(), fs::read(&path).expect("read"));
        }
    }
    out
}

/// Every payload of the history, decoded, in order.
fn history(archive: &Path, storage: &SledStorage) -> Vec<(u64, String, bool)> {
    HistoryReader::open(archive, storage, 0)
        .expect("reader")
        .map(|entry| {
            let entry = entry.expect("entry");
            let event: String = eventlog::decode_payload(&entry.payload).expect("decode");
            (entry.sequence, event, entry.archived)
        })
        .collect()
}

fn first_stored_key(storage: &SledStorage) -> Option<u64> {
    let raw = storage.read_from(0).next()?.expect("read");
    Some(u64::from_be_bytes(raw.key.try_into().expect("8-byte key")))
}

#[test]
fn archived_history_and_live_log_read_and_verify_as_one_chain() {
    let temp = tempfile::tempdir().expect("temp dir");
    let (dir, archive) = (temp.path().join("log"), temp.path().join("archive"));
    let log = log_with(&dir, 6_000, &[4_000]);
    let report = log.archive_to(&archive, 4_000, &SMALL).expect("archive");
    assert_eq!(report.archived, 0..4_000);
    assert_eq!((report.first_live, report.deleted), (4_000, 4_000));
    assert!(
        report.segments.len() >= 2,
        "{} segments",
        report.segments.len()
    );
    for write in &report.segments {
        assert!(write.segment.bytes <= SMALL.segment_bytes_max);
        assert!(!write.already_present);
    }
    assert_eq!(first_stored_key(log.storage()), Some(4_000));
    let verified = verify_with_archive(&archive, log.storage(), |_, _| Ok(())).expect("verify");
    assert_eq!(verified.archive_end, 4_000);
    assert_eq!(verified.log.entries, 6_000);
    assert_eq!(verified.log.first_live, 4_000);
    assert_eq!(verified.segments, list_segments(&archive).expect("list"));
    let read = history(&archive, log.storage());
    let expected: Vec<(u64, String, bool)> = events(6_000)
        .into_iter()
        .enumerate()
        .map(|(i, e)| (i as u64, e, i < 4_000))
        .collect();
    assert_eq!(read, expected);
    // The payload check sees every sequence once, in order.
    let mut seen = 0u64;
    verify_with_archive(&archive, log.storage(), |sequence, _| {
        assert_eq!(sequence, seen);
        seen += 1;
        Ok(())
    })
    .expect("verify with check");
    assert_eq!(seen, 6_000);
    // A later archiving continues the same chain in the same directory.
    let _ = log.append(events(6_100)[6_000..].to_vec()).expect("append");
    log.put_snapshot(5_500, &encode(5_500)).expect("snapshot");
    let later = log
        .archive_to(&archive, 5_500, &SMALL)
        .expect("archive more");
    assert_eq!(later.archived, 4_000..5_500);
    let verified = verify_with_archive(&archive, log.storage(), |_, _| Ok(())).expect("verify");
    assert_eq!(
        (verified.log.entries, verified.log.first_live),
        (6_100, 5_500)
    );
    let read = HistoryReader::open(&archive, log.storage(), 5_990).expect("reader");
    let from: Vec<u64> = read.map(|e| e.expect("entry").sequence).collect();
    assert_eq!(from, (5_990..6_100).collect::<Vec<_>>());
}

#[test]
fn an_archived_log_opens_from_a_snapshot_covering_its_start_and_only_from_one() {
    let temp = tempfile::tempdir().expect("temp dir");
    let (dir, archive) = (temp.path().join("log"), temp.path().join("archive"));
    let log = log_with(&dir, 2_000, &[500, 1_200]);
    log.archive_to(&archive, 1_200, &SMALL).expect("archive");
    log.close().expect("close");

    let report = verify(&dir).expect("the live log alone verifies");
    assert_eq!((report.first_live, report.entries), (1_200, 2_000));

    let open = Log::open_from_snapshot(&dir, decode).expect("open from snapshot");
    assert_eq!(
        open.snapshot.as_ref().map(|s| (s.covers, s.state)),
        Some((1_200, 1_200))
    );
    assert_eq!(open.tail.len(), 800);
    assert_eq!(open.tail[0], (1_200, event(1_200)));
    let appended = open.log.append(vec!["after".into()]).expect("append");
    assert_eq!(appended.into_inner()[0].0, 2_000);
    // Both snapshots are kept; the older one now covers archived entries.
    open.log
        .delete_snapshot(1_200)
        .expect("delete the newest snapshot");
    open.log.close().expect("close");

    match Log::open_from_snapshot(&dir, decode).map(|_| ()) {
        Err(LogError::HistoryArchived {
            first_live: 1_200,
            snapshot_covers: Some(500),
        }) => {}
        other => panic!("expected HistoryArchived naming 1200 and 500, got {other:?}"),
    }
    let err = Log::open(&dir)
        .map(|_| ())
        .expect_err("a full replay is refused");
    assert!(
        matches!(
            err,
            LogError::HistoryArchived {
                first_live: 1_200,
                ..
            }
        ),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(text.contains("1200") && text.contains("500"), "{text}");
}

#[test]
fn archiving_past_the_snapshot_or_the_durable_end_is_refused_and_writes_nothing() {
    let temp = tempfile::tempdir().expect("temp dir");
    let (dir, archive) = (temp.path().join("log"), temp.path().join("archive"));
    let log = log_with(&dir, 1_000, &[]);
    match log.archive_to(&archive, 10, &SMALL) {
        Err(LogError::ArchiveBeyondSnapshot {
            upto: 10,
            snapshot_covers: None,
        }) => {}
        other => panic!("expected ArchiveBeyondSnapshot without snapshot, got {other:?}"),
    }
    log.put_snapshot(600, &encode(600)).expect("snapshot");
    match log.archive_to(&archive, 601, &SMALL) {
        Err(LogError::ArchiveBeyondSnapshot {
            upto: 601,
            snapshot_covers: Some(600),
        }) => {}
        other => panic!("expected ArchiveBeyondSnapshot at 600, got {other:?}"),
    }
    match log.archive_to(&archive, 1_001, &SMALL) {
        Err(LogError::ArchiveAhead {
            upto: 1_001,
            durable_end: 1_000,
        }) => {}
        other => panic!("expected ArchiveAhead, got {other:?}"),
    }
    assert!(!archive.exists(), "a refusal wrote nothing");
    assert_eq!(
        log.storage().live_start().expect("start"),
        LiveStart::genesis()
    );
    assert_eq!(first_stored_key(log.storage()), Some(0));
    // A damaged newest snapshot does not count: a start would fall back to
    // the older intact one, so that one bounds archiving.
    log.put_snapshot(300, &encode(300)).expect("snapshot");
    log.close().expect("close");
    let db = raw_open(&dir);
    let tree = db.open_tree("snapshots").expect("tree");
    let mut record = tree
        .get(600u64.to_be_bytes())
        .expect("get")
        .expect("record")
        .to_vec();
    let last = record.len() - 1;
    record[last] ^= 0x01;
    tree.insert(600u64.to_be_bytes(), record).expect("damage");
    db.flush().expect("flush");
    drop((tree, db));
    let (log, _) = Log::open(&dir).expect("reopen");
    match log.archive_to(&archive, 600, &SMALL) {
        Err(LogError::ArchiveBeyondSnapshot {
            upto: 600,
            snapshot_covers: Some(300),
        }) => {}
        other => panic!("expected ArchiveBeyondSnapshot at 300, got {other:?}"),
    }
    assert_eq!(
        log.archive_to(&archive, 300, &SMALL)
            .expect("archive")
            .first_live,
        300
    );
}

#[test]
fn a_flipped_byte_in_a_segment_is_named_by_file_and_sequence_and_nothing_changes() {
    let temp = tempfile::tempdir().expect("temp dir");
    let (dir, archive) = (temp.path().join("log"), temp.path().join("archive"));
    let log = log_with(&dir, 6_000, &[5_000]);
    log.archive_to(&archive, 5_000, &SMALL).expect("archive");
    let segments = list_segments(&archive).expect("list");
    assert!(segments.len() >= 3);
    let target = &segments[1];
    let pristine = fs::read(&target.path).expect("read");

    // A byte in the middle of the frames.
    let mut flipped = pristine.clone();
    let at = flipped.len() / 2;
    flipped[at] ^= 0x04;
    fs::write(&target.path, &flipped).expect("write");
    let before = files(&archive);
    let err = verify_with_archive(&archive, log.storage(), |_, _| Ok(())).expect_err("damage");
    match &err {
        ArchiveError::Segment {
            segment,
            sequence: Some(sequence),
            ..
        } => {
            assert_eq!(segment, &target.path);
            assert!((target.from..target.to).contains(sequence), "{err}");
        }
        other => panic!("expected a damaged segment, got {other:?}"),
    }
    let text = err.to_string();
    println!("a flipped byte at offset {at}: {text}");
    assert!(
        text.contains(&*target.path.to_string_lossy()) && text.contains("sequence"),
        "{text}"
    );
    assert_eq!(files(&archive), before, "verification changed nothing");
    // The reader yields every entry before the damaged frame, then stops.
    let read: Vec<_> = HistoryReader::open(&archive, log.storage(), 0)
        .expect("reader")
        .collect();
    assert!(matches!(
        read.last(),
        Some(Err(ArchiveError::Segment { .. }))
    ));
    assert!(read.len() as u64 > target.from);

    // A byte in the header: named as the header, by file.
    let mut header = pristine.clone();
    header[10] ^= 0x01;
    fs::write(&target.path, &header).expect("write");
    match verify_with_archive(&archive, log.storage(), |_, _| Ok(())) {
        Err(ArchiveError::Segment {
            segment,
            fault: SegmentFault::HeaderChecksum,
            ..
        }) => assert_eq!(segment, target.path),
        other => panic!("expected a damaged header, got {other:?}"),
    }
    // A byte in the frame index.
    let mut index = pristine.clone();
    index[eventlog_header_bytes() + 3] ^= 0x01;
    fs::write(&target.path, &index).expect("write");
    match verify_with_archive(&archive, log.storage(), |_, _| Ok(())) {
        Err(ArchiveError::Segment {
            segment,
            fault: SegmentFault::IndexDamaged { .. },
            ..
        }) => assert_eq!(segment, target.path),
        other => panic!("expected a damaged index, got {other:?}"),
    }
    fs::write(&target.path, &pristine).expect("restore");
    verify_with_archive(&archive, log.storage(), |_, _| Ok(())).expect("intact again");
}

/// Bytes of a segment header (magic, version, range, hashes, frame
/// count, checksum), as `archive.rs` lays it out.
fn eventlog_header_bytes() -> usize {
    4 + 2 + 8 + 8 + 32 + 32 + 4 + 32
}

#[test]
fn every_flipped_byte_of_a_small_segment_is_found() {
    let temp = tempfile::tempdir().expect("temp dir");
    let (dir, archive) = (temp.path().join("log"), temp.path().join("archive"));
    let log = log_with(&dir, 120, &[100]);
    log.archive_to(&archive, 100, &SMALL).expect("archive");
    let segments = list_segments(&archive).expect("list");
    assert_eq!(segments.len(), 1);
    let path = &segments[0].path;
    let pristine = fs::read(path).expect("read");
    // Every fourth byte (a flip inside the zstd frame may or may not decompress:
    // either way it is found, and named by the file; past the header and
    // index, by a sequence of the segment too).
    let body = eventlog_header_bytes() + 52 + 32;
    for at in (0..pristine.len()).step_by(4) {
        let mut damaged = pristine.clone();
        damaged[at] ^= 0x10;
        fs::write(path, &damaged).expect("write");
        match verify_with_archive(&archive, log.storage(), |_, _| Ok(())) {
            Err(ArchiveError::Segment {
                segment, sequence, ..
            }) => {
                assert_eq!(&segment, path);
                if at >= body {
                    assert!(sequence.is_some_and(|s| s < 100), "byte {at}: {sequence:?}");
                }
            }
            other => panic!("a flip at byte {at}: {other:?}"),
        }
    }
    fs::write(path, &pristine).expect("restore");
}

#[test]
fn a_crash_after_the_segments_leaves_a_log_that_verifies_and_a_rerun_finishes() {
    let temp = tempfile::tempdir().expect("temp dir");
    let (dir, archive) = (temp.path().join("log"), temp.path().join("archive"));
    let log = log_with(&dir, 3_000, &[2_000]);
    // Cut after step (1): segments durable, live start not recorded.
    let written = write_segments(&archive, log.storage(), 0, 2_000, genesis_hash(), &SMALL)
        .expect("segments");
    let head = written.last().expect("a segment").segment.last_hash;
    log.close().expect("close");
    let report = verify(&dir).expect("the live log is unchanged");
    assert_eq!((report.first_live, report.entries), (0, 3_000));
    let (log, events) = Log::open(&dir).expect("opens as before");
    assert_eq!(events.len(), 3_000);
    let verified = verify_with_archive(&archive, log.storage(), |_, _| Ok(())).expect("overlap");
    assert_eq!(verified.log.entries, 3_000);
    let read = history(&archive, log.storage());
    assert_eq!(read.len(), 3_000, "the overlap is read once");
    // The re-run resumes after the last segment and finishes.
    let rerun = log.archive_to(&archive, 2_000, &SMALL).expect("re-run");
    assert!(rerun.segments.is_empty());
    assert_eq!((rerun.first_live, rerun.deleted), (2_000, 2_000));
    verify_with_archive(&archive, log.storage(), |_, _| Ok(())).expect("verifies");

    // Cut after step (2): live start recorded, keys not yet deleted.
    let _ = log.append(events_from(3_000, 4_000)).expect("append");
    log.put_snapshot(3_500, &encode(3_500)).expect("snapshot");
    let more = write_segments(
        &archive,
        log.storage(),
        2_000,
        3_500,
        head_after(&archive),
        &SMALL,
    )
    .expect("segments");
    let start = LiveStart {
        sequence: 3_500,
        prev_hash: more.last().expect("segment").segment.last_hash,
    };
    log.storage().set_live_start(&start).expect("start");
    assert_eq!(first_stored_key(log.storage()), Some(2_000), "keys linger");
    verify_with_archive(&archive, log.storage(), |_, _| Ok(())).expect("verifies");
    log.close().expect("close");
    assert_eq!(verify(&dir).expect("verify").first_live, 3_500);
    let open = Log::open_from_snapshot(&dir, decode).expect("open");
    assert_eq!(open.snapshot.map(|s| s.covers), Some(3_500));
    let rerun = open
        .log
        .archive_to(&archive, 3_500, &SMALL)
        .expect("re-run");
    assert!(rerun.segments.is_empty() && rerun.archived.is_empty());
    assert_eq!(rerun.deleted, 1_500);
    assert_eq!(first_stored_key(open.log.storage()), Some(3_500));
    let _ = head;
}

fn events_from(from: usize, to: usize) -> Vec<String> {
    (from..to).map(event).collect()
}

/// The archive's head hash (its last segment's last hash).
fn head_after(archive: &Path) -> [u8; 32] {
    list_segments(archive)
        .expect("list")
        .last()
        .map_or(genesis_hash(), |s| s.last_hash)
}

#[test]
fn archiving_is_idempotent_and_never_replaces_a_different_segment() {
    let temp = tempfile::tempdir().expect("temp dir");
    let (dir, archive) = (temp.path().join("log"), temp.path().join("archive"));
    let log = log_with(&dir, 3_000, &[2_500]);
    let first =
        write_segments(&archive, log.storage(), 0, 2_500, genesis_hash(), &SMALL).expect("write");
    let again = write_segments(&archive, log.storage(), 0, 2_500, genesis_hash(), &SMALL)
        .expect("write again");
    assert_eq!(first.len(), again.len());
    assert!(again.iter().all(|w| w.already_present));
    assert!(first.iter().all(|w| !w.already_present));
    let before = files(&archive);
    // The same name with other bytes (another level): refused, kept.
    let other = ArchiveConfig {
        zstd_level: 19,
        ..SMALL
    };
    match write_segments(&archive, log.storage(), 0, 2_500, genesis_hash(), &other) {
        Err(ArchiveError::SegmentExists { segment }) => {
            assert_eq!(segment, first[0].segment.path)
        }
        other => panic!("expected SegmentExists, got {other:?}"),
    }
    assert_eq!(files(&archive), before);
    let report = log.archive_to(&archive, 2_500, &SMALL).expect("archive");
    assert!(report.segments.is_empty(), "already archived");
    let report = log
        .archive_to(&archive, 2_500, &SMALL)
        .expect("archive again");
    assert!(report.archived.is_empty() && report.deleted == 0);
    assert_eq!(files(&archive), before);
    // An archive directory that is not this log's is refused.
    let elsewhere = temp.path().join("elsewhere");
    match log.archive_to(&elsewhere, 2_500, &SMALL) {
        Err(LogError::Archive(ArchiveError::Boundary {
            archive_end: 0,
            first_live: 2_500,
            ..
        })) => {}
        other => panic!("expected a boundary refusal, got {other:?}"),
    }
    // A file that is no segment is refused by name.
    fs::write(archive.join("notes.txt"), b"x").expect("write");
    assert!(matches!(
        verify_with_archive(&archive, log.storage(), |_, _| Ok(())),
        Err(ArchiveError::ForeignFile { .. })
    ));
}

/// Figures, not asserts: archives 1,000,000 events (or
/// `ARCHIVE_BENCH_EVENTS`) and verifies archive plus live log. Run with
/// `cargo test --release -p eventlog --test archive -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement: about a minute"]
fn archive_throughput_for_a_million_events() {
    let temp = tempfile::tempdir().expect("temp dir");
    let (dir, archive) = (temp.path().join("log"), temp.path().join("archive"));
    let n: usize = std::env::var("ARCHIVE_BENCH_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let started = Instant::now();
    let log = log_with(&dir, n, &[n - 1_000]);
    println!("appended {n} events in {:?}", started.elapsed());
    let upto = (n - 1_000) as u64;
    let config = ArchiveConfig::default();
    // The two phases apart: segments (read, verify, compress, fsync),
    // then the live start and the deletion.
    let started = Instant::now();
    let written = write_segments(&archive, log.storage(), 0, upto, genesis_hash(), &config)
        .expect("segments");
    let elapsed = started.elapsed();
    let bytes: u64 = written.iter().map(|w| w.segment.bytes).sum();
    let started = Instant::now();
    let report = log.archive_to(&archive, upto, &config).expect("archive");
    let deleting = started.elapsed();
    let verified = verify_with_archive(&archive, log.storage(), |_, _| Ok(())).expect("verify");
    let raw = verified.log.entry_bytes;
    println!(
        "archived {upto} entries ({raw} raw bytes) into {} segments of {bytes} bytes \
         (ratio {:.2}) in {elapsed:?}: {:.0} entries/s; then {} keys deleted in {deleting:?}",
        written.len(),
        raw as f64 / bytes as f64,
        upto as f64 / elapsed.as_secs_f64(),
        report.deleted
    );
    let started = Instant::now();
    let verified = verify_with_archive(&archive, log.storage(), |_, _| Ok(())).expect("verify");
    let elapsed = started.elapsed();
    println!(
        "verified {} entries (archive + live) in {elapsed:?}: {:.0} entries/s",
        verified.log.entries,
        verified.log.entries as f64 / elapsed.as_secs_f64()
    );
}

/// Opens the log's sled database directly, waiting (bounded) while the
/// background threads of the log just closed still hold sled's lock, as
/// `eventlog`'s own open does (`sled_dir::wait_for_lock_release`): without
/// the wait this test failed once in a full run with "could not acquire
/// lock".
fn raw_open(dir: &Path) -> sled::Db {
    let deadline = Instant::now() + std::time::Duration::from_secs(5);
    loop {
        match sled_config(dir).open() {
            Ok(db) => return db,
            Err(e) if Instant::now() >= deadline => panic!("raw open: {e:?}"),
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(10)),
        }
    }
}
