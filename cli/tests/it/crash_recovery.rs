//! Property: whatever prefix of appends was acknowledged before a crash is
//! exactly what reopening yields, in order, and the log continues cleanly.

use crate::common;

use std::fs;
use std::io;
use std::path::Path;

use common::TestEvent;
use eventlog::{verify, EventLog};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::Index;

/// How the process "ends" after the acknowledged prefix.
#[derive(Debug, Clone, Copy)]
enum Crash {
    /// Clean shutdown.
    CloseThenReopen,
    /// No `close`: the handle is dropped (sled's Drop flushes best-effort).
    DropWithoutClose,
    /// The files are copied while the log is still open, before any Drop
    /// flush: the copy is the state a killed process would leave behind.
    CopyWhileOpen,
}

fn arb_event() -> impl Strategy<Value = TestEvent> {
    prop_oneof![
        (any::<u32>(), any::<u8>())
            .prop_map(|(rollout, wave)| TestEvent::Planned { rollout, wave }),
        ".{0,40}".prop_map(TestEvent::Note),
        (proptest::option::of(".{0,20}"), any::<u64>())
            .prop_map(|(reason, at)| TestEvent::Halted { reason, at }),
    ]
}

fn arb_crash() -> impl Strategy<Value = Crash> {
    prop_oneof![
        Just(Crash::CloseThenReopen),
        Just(Crash::DropWithoutClose),
        Just(Crash::CopyWhileOpen),
    ]
}

fn copy_dir(from: &Path, to: &Path) -> io::Result<()> {
    fs::create_dir_all(to)?;
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            fs::copy(entry.path(), target)?;
        }
    }
    Ok(())
}

fn append_all(
    log: &EventLog<TestEvent>,
    batches: &[Vec<TestEvent>],
    acked: &mut Vec<(u64, TestEvent)>,
) {
    for batch in batches {
        let durable = log.append(batch.clone()).expect("append");
        acked.extend(durable.into_inner());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    #[test]
    fn reopening_after_a_crash_yields_every_acknowledged_event(
        batches in vec(vec(arb_event(), 0..6), 1..10),
        crash_point in any::<Index>(),
        crash in arb_crash(),
    ) {
        let crash_at = crash_point.index(batches.len() + 1);
        let temp = tempfile::tempdir().expect("temp dir");
        let dir = temp.path().join("log");
        let copy = temp.path().join("crash-image");

        let (log, replayed) = EventLog::<TestEvent>::open(&dir).expect("create");
        prop_assert!(replayed.is_empty());
        let mut acked = Vec::new();
        append_all(&log, &batches[..crash_at], &mut acked);
        let reopen_dir = match crash {
            Crash::CloseThenReopen => {
                log.close().expect("close");
                dir.clone()
            }
            Crash::DropWithoutClose => {
                drop(log);
                dir.clone()
            }
            Crash::CopyWhileOpen => {
                copy_dir(&dir, &copy).expect("copy the open log");
                drop(log);
                copy.clone()
            }
        };

        let report = verify(&reopen_dir).expect("the chain verifies after the crash");
        prop_assert_eq!(report.entries, acked.len() as u64);
        let (log, events) = EventLog::<TestEvent>::open(&reopen_dir).expect("reopen");
        prop_assert_eq!(&events, &acked);

        // The log continues the same chain after recovery.
        append_all(&log, &batches[crash_at..], &mut acked);
        log.close().expect("close");
        let (_log, events) = EventLog::<TestEvent>::open(&reopen_dir).expect("reopen again");
        prop_assert_eq!(&events, &acked);
        let expected: Vec<u64> = (0..acked.len() as u64).collect();
        let sequences: Vec<u64> = events.iter().map(|(sequence, _)| *sequence).collect();
        prop_assert_eq!(sequences, expected);
    }
}
