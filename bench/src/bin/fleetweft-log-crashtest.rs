//! Crash-test helper: appends events to a log until it is killed, printing
//! every acknowledged event.
//!
//! Usage: `fleetweft-log-crashtest DIR RUN [THREADS]`
//!
//! Each appender thread appends batches of 1–4 events; once an append
//! returns `Durable`, its events are printed as `SEQUENCE RUN WRITER N`
//! lines and stdout is flushed, so whatever the parent read before the
//! SIGKILL was acknowledged. Stops by itself after `RUN_SECONDS_MAX`.
// Production functions stay within 70 lines (clippy.toml, issue #22 item 6);
// tests may run longer.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use eventlog::EventLog;
use serde::{Deserialize, Serialize};

/// Bound on one run, in case the parent never kills it.
const RUN_SECONDS_MAX: u64 = 60;

/// The event the crash test appends; the test decodes the same shape.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
enum CrashEvent {
    Tick { run: u32, writer: u32, n: u64 },
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let (Some(dir), Some(run)) = (args.get(1), args.get(2).and_then(|s| s.parse().ok())) else {
        eprintln!("usage: fleetweft-log-crashtest DIR RUN [THREADS]");
        return ExitCode::from(2);
    };
    let threads: u32 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(4);
    let log = match EventLog::<CrashEvent>::open(dir) {
        Ok((log, _replayed)) => Arc::new(log),
        Err(err) => {
            eprintln!("fleetweft-log-crashtest: open failed: {err}");
            return ExitCode::FAILURE;
        }
    };
    let deadline = Instant::now() + Duration::from_secs(RUN_SECONDS_MAX);
    let appenders: Vec<_> = (0..threads)
        .map(|writer| {
            let log = Arc::clone(&log);
            thread::spawn(move || append_until(&log, run, writer, deadline))
        })
        .collect();
    let mut status = ExitCode::SUCCESS;
    for appender in appenders {
        match appender.join() {
            Ok(Ok(())) => {}
            Ok(Err(err)) => {
                eprintln!("fleetweft-log-crashtest: {err}");
                status = ExitCode::FAILURE;
            }
            Err(_) => status = ExitCode::FAILURE,
        }
    }
    status
}

fn append_until(
    log: &EventLog<CrashEvent>,
    run: u32,
    writer: u32,
    deadline: Instant,
) -> Result<(), String> {
    let mut n: u64 = 0;
    while Instant::now() < deadline {
        let batch: Vec<CrashEvent> = (0..1 + n % 4)
            .map(|i| CrashEvent::Tick {
                run,
                writer,
                n: n + i,
            })
            .collect();
        n += batch.len() as u64;
        let durable = log.append(batch).map_err(|err| err.to_string())?;
        let mut lines = String::new();
        for (sequence, CrashEvent::Tick { run, writer, n }) in durable.into_inner() {
            lines.push_str(&format!("{sequence} {run} {writer} {n}\n"));
        }
        // One write of a few short lines: the pipe receives it whole.
        let mut stdout = std::io::stdout().lock();
        stdout
            .write_all(lines.as_bytes())
            .and_then(|()| stdout.flush())
            .map_err(|err| format!("stdout: {err}"))?;
    }
    Ok(())
}
