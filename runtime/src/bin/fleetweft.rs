//! `fleetweft`: the operator's command line.
//!
//! - `fleetweft log verify --data DIR [--json]`: checks every entry, the hash
//!   chain and the rules over the whole history; prints a summary. Exit 0 if
//!   sound, 1 naming the first bad sequence and why, 2 if DIR is not a log.
//! - `fleetweft log show --data DIR [--from SEQ] [--json]`: prints the events
//!   in domain words (or JSON lines).

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};
use runtime::inspect::{verify_controller_log, visit_events, InspectError, LogSummary};

/// Exit code for a log that is damaged or breaks a rule.
const EXIT_BAD_LOG: u8 = 1;
/// Exit code for a directory that is not a Fleetweft log (or is missing).
const EXIT_NOT_A_LOG: u8 = 2;

#[derive(Parser)]
#[command(name = "fleetweft", about = "Fleetweft edge release manager")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Inspect the controller's durable event log.
    Log {
        #[command(subcommand)]
        command: LogCommand,
    },
}

#[derive(Subcommand)]
enum LogCommand {
    /// Verify every entry, the hash chain and the rules; print a summary.
    Verify {
        /// The controller's data directory (the log's sled database).
        #[arg(long)]
        data: PathBuf,
        /// Print the summary (or the failure) as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Print the events, one per line, in domain words.
    Show {
        /// The controller's data directory (the log's sled database).
        #[arg(long)]
        data: PathBuf,
        /// First sequence to print.
        #[arg(long, default_value_t = 0)]
        from: u64,
        /// Print JSON lines instead.
        #[arg(long)]
        json: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Log {
            command: LogCommand::Verify { data, json },
        } => log_verify(&data, json),
        Command::Log {
            command: LogCommand::Show { data, from, json },
        } => log_show(&data, from, json),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("fleetweft: {err:#}");
            ExitCode::from(EXIT_BAD_LOG)
        }
    }
}

/// Exit code for an inspection failure: 2 for "not a log", else 1.
fn exit_code(err: &InspectError) -> ExitCode {
    match err {
        InspectError::NotALog(_) => ExitCode::from(EXIT_NOT_A_LOG),
        _ => ExitCode::from(EXIT_BAD_LOG),
    }
}

fn log_verify(dir: &std::path::Path, json: bool) -> anyhow::Result<ExitCode> {
    let mut out = io::stdout().lock();
    match verify_controller_log(dir) {
        Ok(summary) => {
            if json {
                let value = serde_json::json!({ "sound": true, "summary": summary });
                writeln!(out, "{}", serde_json::to_string_pretty(&value)?)?;
            } else {
                print_summary(&mut out, dir, &summary)?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(err) => {
            if json {
                let kind = match &err {
                    InspectError::NotALog(_) => "not a log",
                    InspectError::Damaged(_) => "damaged",
                    InspectError::RuleViolated { .. } => "rule violated",
                };
                let value = serde_json::json!({
                    "sound": false,
                    "error": kind,
                    "sequence": err.sequence(),
                    "rule": err.rule(),
                    "reason": err.to_string(),
                });
                writeln!(out, "{}", serde_json::to_string_pretty(&value)?)?;
            } else {
                let prefix = match &err {
                    InspectError::NotALog(_) => "not a Fleetweft log",
                    InspectError::Damaged(_) => "log is damaged",
                    InspectError::RuleViolated { .. } => "log breaks a rule",
                };
                eprintln!("fleetweft: {prefix}: {err}");
            }
            Ok(exit_code(&err))
        }
    }
}

fn print_summary(
    out: &mut impl Write,
    dir: &std::path::Path,
    summary: &LogSummary,
) -> anyhow::Result<()> {
    writeln!(out, "log {} is sound", dir.display())?;
    writeln!(out, "entries:       {}", summary.entries)?;
    match summary.last_sequence {
        Some(last) => writeln!(out, "last sequence: {last}")?,
        None => writeln!(out, "last sequence: none (empty log)")?,
    }
    writeln!(out, "head hash:     {}", summary.head_hash)?;
    writeln!(out, "rollouts:      {}", summary.rollouts.len())?;
    for rollout in &summary.rollouts {
        writeln!(
            out,
            "  {}  {}  release {}",
            rollout.id, rollout.status, rollout.release
        )?;
    }
    writeln!(out, "open ops:      {}", summary.open_ops.len())?;
    for op in &summary.open_ops {
        write!(out, "  {}  {}  {}", op.op, op.node, op.phase)?;
        match &op.unknown {
            Some(reason) => writeln!(out, "  UNKNOWN: {reason}")?,
            None => writeln!(out)?,
        }
    }
    Ok(())
}

fn log_show(dir: &std::path::Path, from: u64, json: bool) -> anyhow::Result<ExitCode> {
    let mut out = io::stdout().lock();
    // Write errors inside the visitor are kept and reported after the walk,
    // since the visitor itself cannot fail the verification.
    let mut write_error: Option<anyhow::Error> = None;
    let result = visit_events(dir, from, |sequence, event| {
        if write_error.is_some() {
            return;
        }
        let line = if json {
            serde_json::to_string(&serde_json::json!({
                "sequence": sequence,
                "text": event.to_string(),
                "event": event,
            }))
            .map_err(anyhow::Error::from)
        } else {
            Ok(format!("{sequence:>6}  {event}"))
        };
        if let Err(err) = line.and_then(|line| writeln!(out, "{line}").map_err(Into::into)) {
            write_error = Some(err);
        }
    });
    if let Some(err) = write_error {
        return Err(err).context("writing events");
    }
    match result {
        Ok(_) => Ok(ExitCode::SUCCESS),
        Err(err) => {
            eprintln!("fleetweft: stopped: {err}");
            Ok(exit_code(&err))
        }
    }
}
