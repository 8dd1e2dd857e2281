//! `fleetweft log verify --deep` (issue #26): after the log verifies, fold
//! it again from genesis and compare every stored snapshot with the fold
//! at the point it covers ([`controller::snapshot::verify_deep`]).
//! Snapshots are a cache, never a second source of truth: one that
//! differs makes the log fail verification, naming the snapshot.

use std::fmt::Write as _;

use eventlog::{LogStorage, SnapshotsReport, VerifyError};

/// What the deep pass found, in the words and the JSON `log verify` prints.
pub struct Deep {
    /// The lines to print under the summary.
    pub text: String,
    /// `{"agreeing": [...], "differs": null | {"covers", "reason"}}`.
    pub json: serde_json::Value,
    /// Whether every snapshot agrees with the fold.
    pub sound: bool,
}

/// Runs the deep pass on `storage`; an error is a log that could not be
/// read or verified this time (it verified a moment before).
pub fn check(storage: &dyn LogStorage) -> Result<Deep, VerifyError> {
    let report = controller::snapshot::verify_deep(storage)?;
    Ok(describe(&report))
}

/// [`check`] through the archive in `dir`: the fold from genesis starts
/// in the archive. A damaged archive is the error.
pub fn check_with_archive(
    dir: &std::path::Path,
    storage: &dyn LogStorage,
) -> Result<Deep, eventlog::ArchiveError> {
    let (report, _) = controller::snapshot::verify_deep_with_archive(dir, storage)?;
    Ok(describe(&report))
}

fn describe(report: &SnapshotsReport) -> Deep {
    let mut text = String::new();
    let agreeing: Vec<String> = report.agreeing.iter().map(u64::to_string).collect();
    let _ = writeln!(
        text,
        "snapshots:     {} agree with the fold from genesis{}",
        report.agreeing.len(),
        if agreeing.is_empty() {
            String::new()
        } else {
            format!(" (covering {} entries)", agreeing.join(", "))
        }
    );
    let differs = report.first_difference.as_ref().map(|(covers, reason)| {
        let _ = writeln!(
            text,
            "snapshot covering {covers} entries is not the fold: {reason}"
        );
        serde_json::json!({ "covers": covers, "reason": reason })
    });
    Deep {
        text,
        json: serde_json::json!({ "agreeing": report.agreeing, "differs": differs }),
        sound: report.first_difference.is_none(),
    }
}
