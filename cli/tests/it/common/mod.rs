//! Shared helpers for the log's integration tests.
#![allow(dead_code)]

use std::path::Path;
use std::time::{Duration, Instant};

use eventlog::{sled_config, EventLog};
use serde::{Deserialize, Serialize};

/// A small stand-in for the model's events, with a few serde shapes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum TestEvent {
    Planned { rollout: u32, wave: u8 },
    Note(String),
    Halted { reason: Option<String>, at: u64 },
}

/// A deterministic event for index `i`.
pub fn sample(i: u64) -> TestEvent {
    match i % 3 {
        0 => TestEvent::Planned {
            rollout: i as u32,
            wave: (i % 7) as u8,
        },
        1 => TestEvent::Note(format!("note number {i}")),
        _ => TestEvent::Halted {
            reason: i.is_multiple_of(2).then(|| "operator".to_string()),
            at: i * 1000,
        },
    }
}

/// Creates a closed log in `dir` holding `count` sample events (sequences 0..count).
pub fn make_log(dir: &Path, count: u64) -> Vec<(u64, TestEvent)> {
    let (log, replayed) = EventLog::<TestEvent>::open(dir).expect("open a new log");
    assert!(replayed.is_empty());
    let mut acknowledged = Vec::new();
    let events: Vec<TestEvent> = (0..count).map(sample).collect();
    for chunk in events.chunks(3) {
        let durable = log.append(chunk.to_vec()).expect("append");
        acknowledged.extend(durable.into_inner());
    }
    log.close().expect("close");
    acknowledged
}

/// Opens the closed log's raw sled database and lets `edit` change it,
/// simulating damage done behind the log's back.
pub fn edit_raw(dir: &Path, edit: impl FnOnce(&sled::Db, &sled::Tree)) {
    let db = open_raw(dir);
    let entries = db.open_tree("entries").expect("entries tree");
    edit(&db, &entries);
    db.flush().expect("flush raw edit");
}

/// Opens the raw sled database, retrying while a just-dropped handle's
/// background tasks still hold sled's file lock (as `EventLog::open` does).
pub fn open_raw(dir: &Path) -> sled::Db {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match sled_config(dir).open() {
            Ok(db) => return db,
            Err(err)
                if err.to_string().contains("could not acquire lock")
                    && Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(err) => panic!("open raw sled db at {}: {err}", dir.display()),
        }
    }
}

/// The big-endian key of `sequence`.
pub fn key(sequence: u64) -> [u8; 8] {
    sequence.to_be_bytes()
}
