//! Real crashes: a helper process appends until SIGKILLed at a random
//! moment; after each kill, every event it reported as acknowledged must be
//! in the log, unchanged, and the log must verify.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use eventlog::{verify, EventLog};
use serde::{Deserialize, Serialize};

/// Same shape as the helper's event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
enum CrashEvent {
    Tick { run: u32, writer: u32, n: u64 },
}

const KILLS: u32 = 24;
// Up to 300 ms: early kills land during startup and recovery, later ones
// mid-append. Later kills must still ack something, see the final assert.
const KILL_AFTER_MS_MAX: u64 = 300;
/// Odd runs count their delay from the helper's first acknowledgement, so
/// they kill mid-append however slowly a loaded machine starts the helper;
/// even runs count from the spawn (kills during open and recovery).
const FIRST_ACK_WAIT_MS_MAX: u64 = 20_000;

/// xorshift64: enough randomness for kill timing, reproducible from the seed.
fn next(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// Parses complete `SEQUENCE RUN WRITER N` lines (a line cut by the kill has
/// no newline and was never fully reported).
fn acknowledged(output: &str) -> Vec<(u64, CrashEvent)> {
    output
        .split_inclusive('\n')
        .filter(|line| line.ends_with('\n'))
        .map(|line| {
            let fields: Vec<u64> = line
                .split_whitespace()
                .map(|field| field.parse().expect("numeric field"))
                .collect();
            let [sequence, run, writer, n] = fields[..] else {
                panic!("malformed line {line:?}");
            };
            let event = CrashEvent::Tick {
                run: run as u32,
                writer: writer as u32,
                n,
            };
            (sequence, event)
        })
        .collect()
}

/// Everything the helper prints, keeping a last line cut by the kill (no
/// newline); signals `first` once the first complete line arrived.
fn read_reporting_first_line(
    stdout: std::process::ChildStdout,
    first: mpsc::Sender<()>,
) -> std::io::Result<String> {
    let mut reader = BufReader::new(stdout);
    let mut output = String::new();
    loop {
        let before = output.len();
        if reader.read_line(&mut output)? == 0 {
            return Ok(output);
        }
        if before == 0 && output.ends_with('\n') {
            let _ = first.send(());
        }
    }
}

#[test]
fn sigkilled_appender_loses_nothing_it_acknowledged() {
    let started = Instant::now();
    let seed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| elapsed.as_nanos() as u64)
        .unwrap_or(1)
        | 1;
    eprintln!("sigkill test seed: {seed}");
    let mut rng = seed;
    let temp = tempfile::tempdir().expect("temp dir");
    let dir = temp.path().join("log");
    let mut acked: BTreeMap<u64, CrashEvent> = BTreeMap::new();
    let mut rounds_with_acks = 0;

    for run in 0..KILLS {
        let mut child = Command::new(env!("CARGO_BIN_EXE_fleetweft-log-crashtest"))
            .arg(&dir)
            .arg(run.to_string())
            .arg("4")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn helper");
        let stdout = child.stdout.take().expect("piped stdout");
        let (first_ack, first_ack_seen) = mpsc::channel();
        let reader = thread::spawn(move || read_reporting_first_line(stdout, first_ack));
        if run % 2 == 1 {
            // Err: the helper ended or never acknowledged in time; the
            // final count of runs that acknowledged says whether that is ok.
            let _ = first_ack_seen.recv_timeout(Duration::from_millis(FIRST_ACK_WAIT_MS_MAX));
        }
        let delay = next(&mut rng) % KILL_AFTER_MS_MAX;
        thread::sleep(Duration::from_millis(delay));
        // On unix, Child::kill sends SIGKILL.
        child.kill().expect("SIGKILL helper");
        let status = child.wait().expect("reap helper");
        assert!(
            !status.success(),
            "run {run}: helper exited on its own ({status}) instead of being killed"
        );
        let output = reader.join().expect("reader thread").expect("read stdout");

        let new = acknowledged(&output);
        if !new.is_empty() {
            rounds_with_acks += 1;
        }
        for (sequence, event) in new {
            if let Some(earlier) = acked.insert(sequence, event.clone()) {
                panic!(
                    "run {run} (seed {seed}): sequence {sequence} acknowledged twice, \
                     first {earlier:?} then {event:?}: an acknowledged entry was lost"
                );
            }
        }

        // Killed before the helper's first open created the database (a
        // kill after 0-2 ms): nothing was acknowledged, so nothing can be
        // lost, and there is no log to verify yet. Any later run must find
        // one.
        let created = dir.join("conf").exists() && dir.join("db").exists();
        if !created && acked.is_empty() {
            eprintln!("run {run}: killed after {delay} ms, before the log was created");
            continue;
        }
        let report = verify(&dir).unwrap_or_else(|err| panic!("run {run} (seed {seed}): {err}"));
        let (log, events) = EventLog::<CrashEvent>::open(&dir)
            .unwrap_or_else(|err| panic!("run {run} (seed {seed}): reopen failed: {err}"));
        assert_eq!(report.entries, events.len() as u64);
        for (sequence, event) in &acked {
            let found = events.get(*sequence as usize);
            assert_eq!(
                found,
                Some(&(*sequence, event.clone())),
                "run {run} (seed {seed}, killed after {delay} ms): acknowledged sequence {sequence} missing or changed"
            );
        }
        log.close().expect("close");
    }

    eprintln!(
        "{KILLS} kills, {} acknowledged events checked, {rounds_with_acks} runs acknowledged something, {:?}",
        acked.len(),
        started.elapsed()
    );
    assert!(
        rounds_with_acks >= KILLS / 2,
        "too few runs got as far as appending"
    );
}
