//! Damage done to a closed log behind its back is detected by `verify` and
//! refused by `EventLog::open`, with the first bad sequence named.

use crate::common;

use std::fs;
use std::path::Path;

use common::{edit_raw, key, make_log, TestEvent};
use eventlog::{
    decode_payload, verify, verify_with, EntryFault, Envelope, EnvelopeFault, EventLog, LogError,
    StorageError, VerifyError, LOG_FORMAT_VERSION,
};

const ENTRIES: u64 = 10;

/// A closed log of `ENTRIES` events in a fresh temp dir.
fn fresh_log() -> (tempfile::TempDir, std::path::PathBuf) {
    let temp = tempfile::tempdir().expect("temp dir");
    let dir = temp.path().join("log");
    make_log(&dir, ENTRIES);
    (temp, dir)
}

/// Runs `verify`, expects failure, and checks that opening is refused too.
fn expect_refused(dir: &Path) -> VerifyError {
    let err = verify(dir).expect_err("verify must fail");
    let open = EventLog::<TestEvent>::open(dir).map(|_| ());
    assert!(
        open.is_err(),
        "open must refuse a log that fails verify ({err})"
    );
    err
}

fn raw_value(dir: &Path, sequence: u64) -> Vec<u8> {
    let mut value = None;
    edit_raw(dir, |_, entries| {
        value = entries
            .get(key(sequence))
            .expect("read")
            .map(|v| v.to_vec());
    });
    value.expect("entry present")
}

fn put_raw(dir: &Path, sequence: u64, value: Vec<u8>) {
    edit_raw(dir, |_, entries| {
        entries.insert(key(sequence), value).expect("insert");
    });
}

#[test]
fn intact_log_verifies_and_reopens_with_every_event() {
    let (_temp, dir) = fresh_log();
    let report = verify(&dir).expect("intact log verifies");
    assert_eq!(report.entries, ENTRIES);
    assert_eq!(report.last_sequence, Some(ENTRIES - 1));
    let (log, events) = EventLog::<TestEvent>::open(&dir).expect("reopen");
    let expected: Vec<_> = (0..ENTRIES).map(|i| (i, common::sample(i))).collect();
    assert_eq!(events, expected);
    // Appending continues the sequence and the chain.
    let more = log.append(vec![common::sample(99)]).expect("append");
    assert_eq!(more.get()[0].0, ENTRIES);
    log.close().expect("close");
    assert_eq!(verify(&dir).expect("verifies").entries, ENTRIES + 1);
}

#[test]
fn flipped_payload_byte_in_the_last_entry_is_a_checksum_mismatch() {
    let (_temp, dir) = fresh_log();
    let last = ENTRIES - 1;
    let mut value = raw_value(&dir, last);
    // version (1) + sequence (1) + prev_hash (32) + length (1): payload starts at 35.
    value[36] ^= 0x01;
    put_raw(&dir, last, value);
    let err = expect_refused(&dir);
    assert!(
        matches!(
            err,
            VerifyError::Entry {
                sequence,
                fault: EntryFault::Envelope(EnvelopeFault::ChecksumMismatch),
            } if sequence == last
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("sequence 9"), "{err}");
}

#[test]
fn flipped_checksum_byte_in_a_middle_entry_is_detected() {
    let (_temp, dir) = fresh_log();
    let mut value = raw_value(&dir, 4);
    let last_byte = value.len() - 1;
    value[last_byte] ^= 0x80;
    put_raw(&dir, 4, value);
    let err = expect_refused(&dir);
    assert_eq!(err.sequence(), Some(4), "{err}");
    assert!(matches!(
        err,
        VerifyError::Entry {
            fault: EntryFault::Envelope(EnvelopeFault::ChecksumMismatch),
            ..
        }
    ));
}

#[test]
fn truncated_value_is_undecodable() {
    let (_temp, dir) = fresh_log();
    let value = raw_value(&dir, 5);
    put_raw(&dir, 5, value[..value.len() / 2].to_vec());
    let err = expect_refused(&dir);
    assert!(
        matches!(
            err,
            VerifyError::Entry {
                sequence: 5,
                fault: EntryFault::Envelope(EnvelopeFault::Undecodable { .. }),
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("sequence 5"), "{err}");
}

#[test]
fn removed_key_is_a_gap() {
    let (_temp, dir) = fresh_log();
    edit_raw(&dir, |_, entries| {
        entries.remove(key(3)).expect("remove");
    });
    let err = expect_refused(&dir);
    assert!(
        matches!(
            err,
            VerifyError::Gap {
                missing: 3,
                next_present: 4
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("sequence 3 is missing"), "{err}");
}

#[test]
fn removed_last_key_is_caught_by_the_durable_watermark() {
    // A chain cut at its end is still a valid chain; only the watermark knows.
    let (_temp, dir) = fresh_log();
    edit_raw(&dir, |_, entries| {
        entries.remove(key(ENTRIES - 1)).expect("remove");
    });
    let err = expect_refused(&dir);
    assert!(
        matches!(
            err,
            VerifyError::Truncated {
                first_missing: 9,
                durable_end: 10
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("sequence 9 is missing"), "{err}");
}

#[test]
fn removed_first_key_is_a_gap_at_zero() {
    let (_temp, dir) = fresh_log();
    edit_raw(&dir, |_, entries| {
        entries.remove(key(0)).expect("remove");
    });
    let err = expect_refused(&dir);
    assert!(
        matches!(err, VerifyError::Gap { missing: 0, .. }),
        "{err:?}"
    );
}

#[test]
fn key_that_is_not_a_sequence_is_foreign() {
    let (_temp, dir) = fresh_log();
    edit_raw(&dir, |_, entries| {
        entries.insert(b"junk", b"value".to_vec()).expect("insert");
    });
    let err = expect_refused(&dir);
    assert!(
        matches!(&err, VerifyError::ForeignKey { expected: 10, key } if key == b"junk"),
        "{err:?}"
    );
    assert!(err.to_string().contains("0x6a756e6b"), "{err}");
    assert!(err.to_string().contains("sequence 10"), "{err}");
}

#[test]
fn short_key_sorting_before_sequence_zero_is_foreign() {
    let (_temp, dir) = fresh_log();
    edit_raw(&dir, |_, entries| {
        entries.insert([0u8], b"value".to_vec()).expect("insert");
    });
    let err = expect_refused(&dir);
    assert!(
        matches!(err, VerifyError::ForeignKey { expected: 0, .. }),
        "{err:?}"
    );
}

#[test]
fn key_in_the_wrong_tree_is_foreign() {
    let (_temp, dir) = fresh_log();
    edit_raw(&dir, |db, _| {
        db.insert(key(0), b"stray".to_vec()).expect("insert");
    });
    let err = expect_refused(&dir);
    assert!(
        matches!(&err, VerifyError::ForeignData { tree, key: Some(_) } if tree == b"__sled__default"),
        "{err:?}"
    );
}

#[test]
fn unexpected_tree_is_foreign() {
    let (_temp, dir) = fresh_log();
    edit_raw(&dir, |db, _| {
        db.open_tree("extra").expect("tree");
    });
    let err = expect_refused(&dir);
    assert!(
        matches!(&err, VerifyError::ForeignData { tree, key: None } if tree == b"extra"),
        "{err:?}"
    );
}

#[test]
fn valid_entry_with_wrong_prev_hash_breaks_the_chain() {
    let (_temp, dir) = fresh_log();
    let original = Envelope::decode(&raw_value(&dir, 6)).expect("decodes");
    let forged = Envelope::seal(6, [7; 32], original.payload)
        .encode()
        .expect("encodes");
    put_raw(&dir, 6, forged);
    let err = expect_refused(&dir);
    assert!(
        matches!(
            err,
            VerifyError::Entry {
                sequence: 6,
                fault: EntryFault::BrokenChain
            }
        ),
        "{err:?}"
    );
}

#[test]
fn swapped_entries_are_detected_at_the_first() {
    let (_temp, dir) = fresh_log();
    let (two, three) = (raw_value(&dir, 2), raw_value(&dir, 3));
    put_raw(&dir, 2, three);
    put_raw(&dir, 3, two);
    let err = expect_refused(&dir);
    assert!(
        matches!(
            err,
            VerifyError::Entry {
                sequence: 2,
                fault: EntryFault::SequenceMismatch { stored: 3 }
            }
        ),
        "{err:?}"
    );
}

#[test]
fn unsupported_version_is_reported() {
    let (_temp, dir) = fresh_log();
    let mut envelope = Envelope::decode(&raw_value(&dir, 2)).expect("decodes");
    // A version this build does not write (a future one).
    envelope.format_version = LOG_FORMAT_VERSION + 1;
    envelope.checksum = envelope.compute_checksum();
    // `encode` refuses other versions, so encode the raw struct directly.
    let bytes =
        bincode::serde::encode_to_vec(&envelope, bincode::config::standard()).expect("encode");
    put_raw(&dir, 2, bytes);
    let err = expect_refused(&dir);
    assert!(
        matches!(
            err,
            VerifyError::Entry {
                sequence: 2,
                fault: EntryFault::Envelope(EnvelopeFault::UnsupportedVersion { found })
            } if found == LOG_FORMAT_VERSION + 1
        ),
        "{err:?}"
    );
}

#[test]
fn payload_hook_sees_every_event_and_can_reject_one() {
    let (_temp, dir) = fresh_log();
    let mut seen = Vec::new();
    let err = verify_with(&dir, |sequence, payload| {
        let event: TestEvent = decode_payload(payload).map_err(|e| e.to_string())?;
        seen.push(event);
        if sequence == 7 {
            return Err("event 7 is not allowed here".into());
        }
        Ok(())
    })
    .expect_err("hook rejects");
    assert_eq!(seen.len(), 8);
    assert!(
        matches!(
            &err,
            VerifyError::Entry { sequence: 7, fault: EntryFault::Rejected { reason } }
                if reason.contains("not allowed")
        ),
        "{err:?}"
    );
}

#[test]
fn damage_inside_sleds_file_is_refused_not_silently_truncated() {
    // sled's recovery treats damage in its segment file like a torn write and
    // drops everything after it; the durable watermark must notice.
    for offset in [30usize, 2_000, 20_000] {
        let temp = tempfile::tempdir().expect("temp dir");
        let dir = temp.path().join("log");
        make_log(&dir, 200);
        let path = dir.join("db");
        let mut bytes = fs::read(&path).expect("read db file");
        for byte in &mut bytes[offset..offset + 16] {
            *byte ^= 0xff;
        }
        fs::write(&path, &bytes).expect("write db file");
        let err = verify(&dir).expect_err("damage must be detected");
        match &err {
            VerifyError::Storage(StorageError::Corruption { path, .. }) => {
                assert_eq!(path, &dir, "corruption names the log directory")
            }
            VerifyError::Truncated {
                first_missing,
                durable_end: 200,
            } => assert!(*first_missing < 200),
            other => panic!("unexpected error at offset {offset}: {other:?}"),
        }
        let open = EventLog::<TestEvent>::open(&dir).map(|_| ());
        let message = open.expect_err("open refuses").to_string();
        assert!(
            message.contains("corrupt") || message.contains("missing"),
            "{message}"
        );
    }
}

#[test]
fn sled_corruption_error_names_the_path() {
    let (_temp, dir) = fresh_log();
    let path = dir.join("db");
    let mut bytes = fs::read(&path).expect("read db file");
    for byte in &mut bytes[30..46] {
        *byte ^= 0xff;
    }
    fs::write(&path, &bytes).expect("write db file");
    let err = EventLog::<TestEvent>::open(&dir)
        .map(|_| ())
        .expect_err("refused");
    assert!(
        matches!(&err, LogError::Storage(StorageError::Corruption { path, .. }) if path == &dir),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(message.contains(&dir.display().to_string()), "{message}");
    assert!(message.contains("no automatic repair"), "{message}");
}

#[test]
fn missing_watermark_is_refused() {
    let (_temp, dir) = fresh_log();
    fs::remove_file(dir.join("fleetweft-durable")).expect("remove");
    let err = expect_refused(&dir);
    assert!(
        matches!(err, VerifyError::Storage(StorageError::Corruption { .. })),
        "{err:?}"
    );
}

#[test]
fn directories_without_a_log_are_not_a_log() {
    let temp = tempfile::tempdir().expect("temp dir");

    let missing = temp.path().join("missing");
    assert!(matches!(verify(&missing), Err(VerifyError::NotALog { .. })));
    assert!(!missing.exists(), "verify must not create anything");

    let empty = temp.path().join("empty");
    fs::create_dir(&empty).expect("mkdir");
    let err = verify(&empty).expect_err("empty dir");
    assert!(matches!(err, VerifyError::NotALog { .. }), "{err:?}");
    assert!(err.to_string().contains("is not a Fleetweft log"), "{err}");

    let plain = temp.path().join("plain-sled");
    {
        let db = eventlog::sled_config(&plain).open().expect("plain sled db");
        db.insert("k", "v").expect("insert");
        db.flush().expect("flush");
    }
    let err = verify(&plain).expect_err("plain sled db");
    assert!(matches!(err, VerifyError::NotALog { .. }), "{err:?}");
    let err = EventLog::<TestEvent>::open(&plain)
        .map(|_| ())
        .expect_err("open refuses a foreign sled db");
    assert!(
        matches!(err, LogError::Storage(StorageError::NotALog { .. })),
        "{err:?}"
    );

    let other = temp.path().join("other-files");
    fs::create_dir(&other).expect("mkdir");
    fs::write(other.join("notes.txt"), "hello").expect("write");
    let err = EventLog::<TestEvent>::open(&other)
        .map(|_| ())
        .expect_err("open refuses a non-empty non-log dir");
    assert!(
        matches!(err, LogError::Storage(StorageError::NotALog { .. })),
        "{err:?}"
    );
}

#[test]
fn wrong_log_marker_is_not_a_log() {
    let (_temp, dir) = fresh_log();
    edit_raw(&dir, |db, _| {
        db.open_tree("meta")
            .and_then(|meta| meta.insert("format", "something-else"))
            .expect("overwrite marker");
    });
    let err = verify(&dir).expect_err("wrong marker");
    assert!(matches!(err, VerifyError::NotALog { .. }), "{err:?}");
}

#[test]
fn open_creates_a_log_in_an_empty_directory() {
    let temp = tempfile::tempdir().expect("temp dir");
    let (log, events) = EventLog::<TestEvent>::open(temp.path()).expect("create in empty dir");
    assert!(events.is_empty());
    log.close().expect("close");
    let report = verify(temp.path()).expect("new log verifies");
    assert_eq!(report.entries, 0);
    assert_eq!(report.head_hash, eventlog::genesis_hash());
}
