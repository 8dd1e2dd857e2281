//! Forensic inspection of a controller log or an agent journal:
//! `fleetweft log verify` and `fleetweft log show` are thin formatting
//! around these functions.
//!
//! **They never write.** Everything goes through [`verify_with`], which
//! opens a private copy of the directory (see the `eventlog` crate's
//! `forensic` module), so the directory given is left byte for byte as it
//! was found, damaged or not. A log held open by a running controller or
//! agent is reported [in use](InspectError::InUse) without being read.
//!
//! Every entry, the hash chain and the durable watermark are checked, and
//! every payload is decoded as the kind of log asked for: controller events
//! ([`model::controller::Event`], whose history is also replayed through
//! `invariants::check_history`) or agent journal records
//! ([`agent::journal::Record`]). Both kinds share the log format, so a
//! payload that does not decode is also tried as the other kind: a log
//! whose every entry is of the other kind is [the wrong
//! kind](InspectError::WrongKind), not damage.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use api::view::words;
use model::agent::{agent_apply, AgentState};
use model::controller::{ControllerState, Event, RolloutStatus};
use protocol::journal::Record;
use serde::de::DeserializeOwned;
use serde::Serialize;

use eventlog::{
    decode_payload, is_log_dir, verify_storage_with, verify_with, EntryFault, LogStorage,
    VerifyError, VerifyReport,
};

/// Which kind of log a command is pointed at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LogKind {
    /// The controller's event log (`--data`).
    Controller,
    /// An agent's journal (`--journal`).
    AgentJournal,
}

impl LogKind {
    /// The log's directory inside its daemon's data directory.
    pub fn subdir(self) -> &'static str {
        match self {
            LogKind::Controller => api::LOG_DIR,
            LogKind::AgentJournal => protocol::journal::JOURNAL_DIR,
        }
    }

    /// The `fleetweft log` flag that names a log of this kind.
    pub fn flag(self) -> &'static str {
        match self {
            LogKind::Controller => "--data",
            LogKind::AgentJournal => "--journal",
        }
    }

    /// The daemon that writes it.
    pub fn owner(self) -> &'static str {
        match self {
            LogKind::Controller => "controller",
            LogKind::AgentJournal => "agent",
        }
    }

    fn noun(self) -> &'static str {
        match self {
            LogKind::Controller => "a controller log",
            LogKind::AgentJournal => "an agent journal",
        }
    }

    fn entry_noun(self) -> &'static str {
        match self {
            LogKind::Controller => "controller event",
            LogKind::AgentJournal => "agent journal record",
        }
    }

    fn other(self) -> LogKind {
        match self {
            LogKind::Controller => LogKind::AgentJournal,
            LogKind::AgentJournal => LogKind::Controller,
        }
    }
}

/// Why a log could not be shown sound.
#[derive(Debug, thiserror::Error)]
pub enum InspectError {
    /// The directory is missing or holds no Fleetweft log.
    #[error("{0}")]
    NotALog(VerifyError),
    /// The directory holds the other kind of log (or the other daemon's
    /// data directory): nothing is wrong with it, the flag is.
    #[error("{} is {what}, not {}: use {}", path.display(), expected.noun(), found.flag())]
    WrongKind {
        /// The directory given.
        path: PathBuf,
        /// The kind asked for.
        expected: LogKind,
        /// The kind found.
        found: LogKind,
        /// What was found, in words.
        what: String,
    },
    /// A running controller or agent holds the log's lock: nothing was read.
    #[error(
        "{} is in use by a running {owner} (it holds the log's lock); nothing was read. {advice}",
        path.display(),
        owner = kind.owner(),
        advice = match kind {
            LogKind::Controller => "Stop the controller to inspect its log, or ask the \
                running controller (`fleetweft status`, `GET /api/events`)",
            LogKind::AgentJournal => "Stop the agent to inspect its journal",
        }
    )]
    InUse {
        /// The log directory.
        path: PathBuf,
        /// The kind asked for.
        kind: LogKind,
    },
    /// The private copy could not be made (over the size limit, no space,
    /// unreadable): the log was neither changed nor judged.
    #[error("{0}")]
    Uninspectable(VerifyError),
    /// The log is damaged (checksum, gap, broken chain, undecodable event,
    /// storage failure). The message names the first bad sequence if known.
    #[error("{0}")]
    Damaged(VerifyError),
    /// The log is intact but an event breaks one of the rules.
    #[error("sequence {sequence}: rule {violation}")]
    RuleViolated {
        /// Sequence of the offending event.
        sequence: u64,
        /// The broken rule and what broke it.
        violation: invariants::Violation,
    },
    /// The live log verifies, but its head was archived: the rules are
    /// checked over the whole history, which needs the archive.
    #[error(
        "the live log verifies from sequence {first_live} on, but the entries below it are \
         archived: the rules are checked over the whole history, so give the archive too \
         (`fleetweft log verify --archive DIR`)"
    )]
    NeedsArchive {
        /// The first live sequence.
        first_live: u64,
    },
    /// The archive (or where it meets the live log) is damaged: the
    /// message names the segment and the first bad sequence when known.
    #[error("{0}")]
    Archive(eventlog::ArchiveError),
}

impl InspectError {
    /// The first bad sequence, where there is one.
    pub fn sequence(&self) -> Option<u64> {
        match self {
            InspectError::Damaged(err) => err.sequence(),
            InspectError::RuleViolated { sequence, .. } => Some(*sequence),
            InspectError::Archive(eventlog::ArchiveError::Segment { sequence, .. }) => *sequence,
            InspectError::Archive(eventlog::ArchiveError::Live(err)) => err.sequence(),
            InspectError::Archive(_) | InspectError::NeedsArchive { .. } => None,
            InspectError::NotALog(_)
            | InspectError::WrongKind { .. }
            | InspectError::InUse { .. }
            | InspectError::Uninspectable(_) => None,
        }
    }

    /// The broken rule's code (`"S3"`), for a rule violation.
    pub fn rule(&self) -> Option<&'static str> {
        match self {
            InspectError::RuleViolated { violation, .. } => Some(violation.rule.code()),
            _ => None,
        }
    }

    /// A verification failure of a log of `kind`, sorted by what it says.
    pub fn from_verify(err: VerifyError, kind: LogKind) -> Self {
        match err {
            VerifyError::NotALog { .. } => InspectError::NotALog(err),
            VerifyError::InUse { path } => InspectError::InUse { path, kind },
            VerifyError::Uninspectable { .. } => InspectError::Uninspectable(err),
            // etcd unreachable or timing out says nothing about the log.
            VerifyError::Storage(eventlog::StorageError::Etcd { .. }) => {
                InspectError::Uninspectable(err)
            }
            other => InspectError::Damaged(other),
        }
    }
}

/// The log directory `given` names for a log of `kind`: `given` itself if
/// it holds a sled database, else its `log/` (controller) or `journal/`
/// (agent) subdirectory if that does. A data directory of the other daemon
/// is [`InspectError::WrongKind`]. Anything else is returned as it is, for
/// verification to call it not a log. Reads metadata only.
pub fn locate(given: &Path, kind: LogKind) -> Result<PathBuf, InspectError> {
    if is_log_dir(given) {
        return Ok(given.to_path_buf());
    }
    let own = given.join(kind.subdir());
    if is_log_dir(&own) {
        return Ok(own);
    }
    let other = kind.other();
    if is_log_dir(&given.join(other.subdir())) {
        return Err(InspectError::WrongKind {
            path: given.to_path_buf(),
            expected: kind,
            found: other,
            what: format!(
                "the data directory of an {} (holding {}/)",
                other.owner(),
                other.subdir()
            ),
        });
    }
    Ok(given.to_path_buf())
}

/// Verifies `dir` decoding every payload as `T` (a log of `kind`) and
/// handing it to `visit`, and tells the other kind (payloads of type `O`)
/// from damage: when some payload is not a `T` but every payload read is an
/// `O`, the log is [`InspectError::WrongKind`]. Otherwise the first payload
/// that is not a `T` is the damage, as it always was.
fn walk_as<T: DeserializeOwned, O: DeserializeOwned>(
    dir: &Path,
    kind: LogKind,
    visit: impl FnMut(u64, T),
) -> Result<VerifyReport, InspectError> {
    walk_with::<T, O>(dir, kind, |check| verify_with(dir, check), visit)
}

/// A payload check as [`verify_with`] takes it.
type PayloadCheck<'a> = &'a mut dyn FnMut(u64, &[u8]) -> Result<(), String>;

/// [`walk_as`] over any verification (`verify` runs the chain walk with the
/// check it is given); `name` names the log in errors.
fn walk_with<T: DeserializeOwned, O: DeserializeOwned>(
    dir: &Path,
    kind: LogKind,
    verify: impl FnOnce(PayloadCheck<'_>) -> Result<VerifyReport, VerifyError>,
    mut visit: impl FnMut(u64, T),
) -> Result<VerifyReport, InspectError> {
    // The first payload that is not a `T`, and why.
    let mut first_misfit: Option<(u64, String)> = None;
    // Whether every payload read so far is an `O`.
    let mut all_other = true;
    let result = verify(&mut |sequence, payload| {
        if all_other && decode_payload::<O>(payload).is_err() {
            all_other = false;
        }
        match decode_payload::<T>(payload) {
            Ok(entry) if first_misfit.is_none() => visit(sequence, entry),
            Ok(_) => {}
            Err(err) => {
                if first_misfit.is_none() {
                    first_misfit = Some((
                        sequence,
                        format!("undecodable {}: {err}", kind.entry_noun()),
                    ));
                }
            }
        }
        match &first_misfit {
            // Still possibly the other kind: read on to find out.
            Some(_) if all_other => Ok(()),
            Some((_, reason)) => Err(reason.clone()),
            None => Ok(()),
        }
    });
    match (first_misfit, result) {
        (None, result) => result.map_err(|err| InspectError::from_verify(err, kind)),
        (Some(_), _) if all_other => Err(InspectError::WrongKind {
            path: dir.to_path_buf(),
            expected: kind,
            found: kind.other(),
            what: kind.other().noun().to_string(),
        }),
        // The first misfit is the first bad entry, whatever stopped the walk.
        (Some((sequence, reason)), _) => Err(InspectError::Damaged(VerifyError::Entry {
            sequence,
            fault: EntryFault::Rejected { reason },
        })),
    }
}

/// One rollout as `log verify` reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RolloutSummary {
    /// `r0`, `r1`, …
    pub id: String,
    /// `active`, `paused (why)`, `waiting-approval`, `superseded`, `completed`,
    /// `ended (...)`: the view layer's words.
    pub status: String,
    /// The release, as the model prints it.
    pub release: String,
    /// Not active and no op holding a slot: nothing can change it any more
    /// (the model's `Rollout::finished`).
    pub finished: bool,
}

/// One unsettled op as `log verify` reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OpenOp {
    /// `op0`, `op1`, …
    pub op: String,
    /// The node it moves.
    pub node: String,
    /// `granted`, `decided`, `restoring`.
    pub phase: String,
    /// Why the outcome is UNKNOWN, if it is.
    pub unknown: Option<String>,
}

/// What a sound log holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LogSummary {
    /// Number of entries.
    pub entries: u64,
    /// Sequence of the last entry, `None` if empty.
    pub last_sequence: Option<u64>,
    /// Hex of the chain's head hash, comparable between copies.
    pub head_hash: String,
    /// Every rollout.
    pub rollouts: Vec<RolloutSummary>,
    /// Ops holding a slot (not settled), UNKNOWN ones included.
    pub open_ops: Vec<OpenOp>,
}

/// What a sound agent journal holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JournalSummary {
    /// Number of records.
    pub entries: u64,
    /// Sequence of the last record, `None` if empty.
    pub last_sequence: Option<u64>,
    /// Hex of the chain's head hash, comparable between copies.
    pub head_hash: String,
    /// The release the agent's route serves, as journaled.
    pub serving: Option<String>,
    /// The highest generation the agent accepted.
    pub accepted: String,
    /// The op the agent works on, if any.
    pub op: Option<String>,
    /// The last record, in domain words.
    pub last_record: Option<String>,
}

/// Verifies the controller log in `dir`: entries, chain, decoding, and the
/// rules over the whole history. Never writes to `dir`.
pub fn verify_controller_log(dir: impl AsRef<Path>) -> Result<LogSummary, InspectError> {
    let mut events: Vec<(u64, Event)> = Vec::new();
    let report = walk_as::<Event, Record>(dir.as_ref(), LogKind::Controller, |sequence, event| {
        events.push((sequence, event));
    })?;
    check_rules(&report, &events)
}

/// [`verify_controller_log`] on a log in any storage, e.g. etcd
/// (`fleetweft log verify --etcd`); `name` names it in errors. Reads only.
pub fn verify_controller_log_in(
    storage: &dyn LogStorage,
    name: &str,
) -> Result<LogSummary, InspectError> {
    let mut events: Vec<(u64, Event)> = Vec::new();
    let report = walk_with::<Event, Record>(
        Path::new(name),
        LogKind::Controller,
        |check| verify_storage_with(storage, check),
        |sequence, event| events.push((sequence, event)),
    )?;
    check_rules(&report, &events)
}

/// [`visit_events`] on a log in any storage; `name` names it in errors.
pub fn visit_events_in(
    storage: &dyn LogStorage,
    name: &str,
    from: u64,
    mut visit: impl FnMut(u64, &Event),
) -> Result<VerifyReport, InspectError> {
    walk_with::<Event, Record>(
        Path::new(name),
        LogKind::Controller,
        |check| verify_storage_with(storage, check),
        |sequence, event| {
            if sequence >= from {
                visit(sequence, &event);
            }
        },
    )
}

/// The state a sound controller log in `dir` folds to (every event
/// checked against the rules on the way, as `log verify` does), with the
/// verification's report: what `fleetweft-check --from-log` projects.
/// With `until`, the fold stops after that sequence (the state as it
/// stood then); the whole log is still verified. Never writes to `dir`.
pub fn controller_state(
    dir: impl AsRef<Path>,
    until: Option<u64>,
) -> Result<(ControllerState, VerifyReport), InspectError> {
    let mut events: Vec<(u64, Event)> = Vec::new();
    let report = walk_as::<Event, Record>(dir.as_ref(), LogKind::Controller, |sequence, event| {
        if until.is_none_or(|last| sequence <= last) {
            events.push((sequence, event));
        }
    })?;
    let state = fold_checked(&report, &events)?;
    Ok((state, report))
}

/// [`controller_state`] of a log in any storage, e.g. etcd; `name` names
/// it in errors. Reads only.
pub fn controller_state_in(
    storage: &dyn LogStorage,
    name: &str,
    until: Option<u64>,
) -> Result<(ControllerState, VerifyReport), InspectError> {
    let mut events: Vec<(u64, Event)> = Vec::new();
    let report = walk_with::<Event, Record>(
        Path::new(name),
        LogKind::Controller,
        |check| verify_storage_with(storage, check),
        |sequence, event| {
            if until.is_none_or(|last| sequence <= last) {
                events.push((sequence, event));
            }
        },
    )?;
    let state = fold_checked(&report, &events)?;
    Ok((state, report))
}

/// Replays a verified controller history through the rules.
fn check_rules(report: &VerifyReport, events: &[(u64, Event)]) -> Result<LogSummary, InspectError> {
    let state = fold_checked(report, events)?;
    Ok(summarize(report, &state))
}

/// The fold of a verified controller history, every event checked
/// against the rules; a log whose head was archived needs the archive.
fn fold_checked(
    report: &VerifyReport,
    events: &[(u64, Event)],
) -> Result<ControllerState, InspectError> {
    if report.first_live > 0 {
        return Err(InspectError::NeedsArchive {
            first_live: report.first_live,
        });
    }
    let state =
        invariants::check_history(events.iter().map(|(_, event)| event)).map_err(|err| {
            InspectError::RuleViolated {
                sequence: events
                    .get(err.index)
                    .map_or(err.index as u64, |(sequence, _)| *sequence),
                violation: err.violation,
            }
        })?;
    Ok(state)
}

/// Calls `visit` with every event from sequence `from` on, in order, while
/// verifying the log; stops at the first damaged entry with its error.
/// Never writes to `dir`.
pub fn visit_events(
    dir: impl AsRef<Path>,
    from: u64,
    mut visit: impl FnMut(u64, &Event),
) -> Result<VerifyReport, InspectError> {
    walk_as::<Event, Record>(dir.as_ref(), LogKind::Controller, |sequence, event| {
        if sequence >= from {
            visit(sequence, &event);
        }
    })
}

/// Verifies the agent journal in `dir`: entries, chain and that every
/// record decodes. Never writes to `dir`.
pub fn verify_journal(dir: impl AsRef<Path>) -> Result<JournalSummary, InspectError> {
    let mut state = AgentState::default();
    let mut last_record = None;
    let report = walk_as::<Record, Event>(dir.as_ref(), LogKind::AgentJournal, |_, record| {
        if let Record::Core(event) = &record {
            agent_apply(&mut state, event);
        }
        last_record = Some(record);
    })?;
    Ok(JournalSummary {
        entries: report.entries,
        last_sequence: report.last_sequence,
        head_hash: hex(&report.head_hash),
        serving: state.serving.map(|release| release.to_string()),
        accepted: state.accepted.to_string(),
        op: state
            .op
            .map(|op| format!("{} ({}, {})", op.id, op.release, op.generation)),
        last_record: last_record.map(|record| record.to_string()),
    })
}

/// Calls `visit` with every journal record from sequence `from` on, in
/// order, while verifying the journal; stops at the first damaged entry.
/// Never writes to `dir`.
pub fn visit_records(
    dir: impl AsRef<Path>,
    from: u64,
    mut visit: impl FnMut(u64, &Record),
) -> Result<VerifyReport, InspectError> {
    walk_as::<Record, Event>(dir.as_ref(), LogKind::AgentJournal, |sequence, record| {
        if sequence >= from {
            visit(sequence, &record);
        }
    })
}

/// `text` as a terminal can show it without obeying it: every control
/// character (`char::is_control`: ESC, CR, LF, TAB, DEL, C1 controls, …)
/// becomes visible text (`\n`, `\r`, `\t`, else `\u{1b}`), and `\` becomes
/// `\\` so an escape can never be mistaken for typed text. For any text
/// from the log an operator or agent supplied (claim owners, review-by
/// texts, failure reasons) and anything printed around it.
pub fn printable(text: &str) -> Cow<'_, str> {
    if !text.chars().any(|c| c.is_control() || c == '\\') {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// JSON text with the control characters JSON itself leaves raw (DEL and
/// the C1 controls, U+007F to U+009F; serde escapes the rest) written as
/// `\u00XX` escapes, so JSON output is as safe on a terminal as
/// [`printable`] text. Outside strings JSON holds none, so this is the same
/// JSON value.
pub fn printable_json(json: &str) -> Cow<'_, str> {
    let raw = |c: &char| ('\u{7f}'..='\u{9f}').contains(c);
    if !json.chars().any(|c| raw(&c)) {
        return Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 8);
    for c in json.chars() {
        if raw(&c) {
            let _ = write!(out, "\\u{:04x}", c as u32);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub(crate) fn summarize(report: &VerifyReport, state: &ControllerState) -> LogSummary {
    let rollouts = state
        .rollouts
        .iter()
        .map(|rollout| {
            let word = api::view::rollout_status_word(state, rollout);
            let status = match (rollout.status, rollout.paused) {
                (RolloutStatus::Ended, _) => {
                    format!("{word} (nothing more can happen; not every node passed)")
                }
                (RolloutStatus::Active, Some(reason)) => words::paused(reason),
                _ => word.to_string(),
            };
            RolloutSummary {
                id: rollout.id.to_string(),
                status,
                release: rollout.plan.release.to_string(),
                finished: rollout.finished(),
            }
        })
        .collect();
    let open_ops = state
        .ops
        .values()
        .filter(|op| op.occupies_slot())
        .map(|op| OpenOp {
            op: op.id.to_string(),
            node: op.node.to_string(),
            phase: words::op_phase(op.phase).to_string(),
            unknown: op.unknown.map(words::unknown_reason_sentence),
        })
        .collect();
    LogSummary {
        entries: report.entries,
        last_sequence: report.last_sequence,
        head_hash: report
            .head_hash
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect(),
        rollouts,
        open_ops,
    }
}
