//! The whole history of a controller log whose head was archived (issue
//! #26): `fleetweft log verify --archive DIR` and `log show --archive
//! DIR` read the archive's segments and then the live log as one chain
//! ([`eventlog::HistoryReader`]), check every event against the rules
//! from genesis, streaming (20 million events are never held at once),
//! and name a damaged segment by file and first bad sequence. Reading
//! only: neither the archive nor the log is changed.

use std::path::Path;

use eventlog::{decode_payload, ArchiveError, HistoryReader, HistoryReport, LogStorage};
use model::controller::Event;

use crate::inspect::{summarize, InspectError, LogKind, LogSummary};

/// What `log verify --archive` found on a sound history.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct HistorySummary {
    /// The whole history's summary (entries from genesis).
    pub summary: LogSummary,
    /// Archive segments read.
    pub segments: usize,
    /// The sequence after the archive's last entry (0 without one).
    pub archive_end: u64,
    /// The live log's first sequence.
    pub first_live: u64,
}

/// Verifies the archive in `archive` and the live log in `storage` as one
/// chain, and the rules over every event from genesis.
pub fn verify_history(
    archive: &Path,
    storage: &dyn LogStorage,
) -> Result<HistorySummary, InspectError> {
    let mut check = invariants::HistoryCheck::new();
    let report = visit_history(archive, storage, 0, |sequence, event, _| {
        check.push(event).map_err(|err| InspectError::RuleViolated {
            sequence,
            violation: err.violation,
        })
    })?;
    let state = check.finish().map_err(|err| InspectError::RuleViolated {
        sequence: err.index as u64,
        violation: err.violation,
    })?;
    Ok(HistorySummary {
        summary: summarize(&report.log, &state),
        segments: report.segments.len(),
        archive_end: report.archive_end,
        first_live: report.log.first_live,
    })
}

/// Calls `visit` with every event from `from` on (and whether it was read
/// from the archive), verifying the whole chain; the first error (of the
/// chain, a decoding, or `visit`'s own) stops the walk.
pub fn visit_history(
    archive: &Path,
    storage: &dyn LogStorage,
    from: u64,
    mut visit: impl FnMut(u64, &Event, bool) -> Result<(), InspectError>,
) -> Result<HistoryReport, InspectError> {
    let mut reader = HistoryReader::open(archive, storage, from).map_err(archive_error)?;
    for entry in reader.by_ref() {
        let entry = entry.map_err(archive_error)?;
        let event = decode_payload::<Event>(&entry.payload).map_err(|err| {
            InspectError::Damaged(eventlog::VerifyError::Entry {
                sequence: entry.sequence,
                fault: eventlog::EntryFault::Rejected {
                    reason: format!("undecodable controller event: {err}"),
                },
            })
        })?;
        visit(entry.sequence, &event, entry.archived)?;
    }
    Ok(reader.report())
}

/// An archive error as `log verify` reports it: the live log's own
/// failures as they are without an archive.
pub fn archive_error(err: ArchiveError) -> InspectError {
    match err {
        ArchiveError::Live(err) => InspectError::from_verify(err, LogKind::Controller),
        other => InspectError::Archive(other),
    }
}
