//! What must hold after every power cut, checked on the durable state
//! (every process dead, every mount cut) before anything restarts:
//!
//! - the controller's log verifies: chain, decoding, and every rule over
//!   the whole history (one grant per node and rollout, one decision per
//!   op, replays equal to it, ... as `fleetweft log verify` checks them),
//!   read through the archive segments and then the live log once entries
//!   were archived (`log verify --archive`);
//! - every snapshot left in the log is the fold of the history up to the
//!   entry it covers (`log verify --deep`): a cut during a snapshot write
//!   or an archiving run leaves no snapshot a start would trust wrongly;
//! - every API write the harness saw acknowledged is in the log, each
//!   event at the sequence the reply named and in the same words;
//! - every command an agent received (a grant, a stored decision, a
//!   restore, a settle) rests on its event in the log;
//! - every agent journal verifies and holds at least as many records as
//!   the agent said were durable when it last acted;
//! - every acknowledged upload is in the bundle store, whole;
//! - every release directory under its final name is complete and
//!   verifies (staging is write-temp, sync, rename: never half there).

use super::mounts::data_dir;
use super::witness::{read_agent_log, Received};
use super::Campaign;
use crate::fleet::{Fleet, NODES};
use model::controller::Event;
use std::collections::HashMap;
use std::path::Path;

/// Runs every check of the module docs; losses and violations go to the
/// campaign's report.
pub(super) async fn after_cut(fleet: &Fleet, root: &Path, campaign: &mut Campaign, cut: u64) {
    let log = data_dir(root, "controller").join("log");
    let archive = data_dir(root, "controller").join(super::ARCHIVE_DIR_NAME);
    let events = match controller_log(&log, &archive) {
        Ok((events, first_live)) => {
            let archived = &mut campaign.report.archived_entries_max;
            *archived = (*archived).max(first_live);
            events
        }
        Err(why) => {
            campaign.report.violations += 1;
            campaign.report.fail(cut, why);
            return;
        }
    };
    acked_writes(campaign, &events, cut);
    for node in NODES {
        agent_commands(fleet, campaign, node, &events, cut);
        agent_journal(fleet, root, campaign, node, cut);
        staged_releases(root, campaign, node, cut);
    }
    uploads(root, campaign, cut);
}

/// The controller log, verified with every rule, as (sequence, event):
/// with an archive, the whole chain through it, and every snapshot
/// compared with the fold.
/// Also returns the first live sequence (0: nothing archived).
fn controller_log(dir: &Path, archive: &Path) -> Result<(HashMap<u64, Event>, u64), String> {
    if !dir.exists() {
        return Ok((HashMap::new(), 0));
    }
    if !archive.exists() {
        return Ok((live_log(dir)?, 0));
    }
    let read = eventlog::read_private_copy(dir, |storage| Ok(whole_history(archive, storage)));
    read.map_err(|e| format!("reading {}: {e}", dir.display()))?
}

/// A log that was never archived: `log verify`, then every event.
fn live_log(dir: &Path) -> Result<HashMap<u64, Event>, String> {
    logtools::inspect::verify_controller_log(dir)
        .map_err(|e| format!("log verify failed on {}: {e}", dir.display()))?;
    let mut events = HashMap::new();
    logtools::inspect::visit_events(dir, 0, |sequence, event| {
        events.insert(sequence, event.clone());
    })
    .map_err(|e| format!("reading {}: {e}", dir.display()))?;
    Ok(events)
}

/// `log verify --archive --deep` on a private copy of the live log, then
/// every event from genesis.
fn whole_history(
    archive: &Path,
    storage: &dyn eventlog::LogStorage,
) -> Result<(HashMap<u64, Event>, u64), String> {
    let history = logtools::history::verify_history(archive, storage)
        .map_err(|e| format!("log verify --archive failed: {e}"))?;
    let (deep, _) = logtools::snapshot::verify_deep_with_archive(archive, storage)
        .map_err(|e| format!("log verify --deep failed: {e}"))?;
    if let Some((covers, reason)) = deep.first_difference {
        return Err(format!(
            "the snapshot covering {covers} entries is not the fold of the history: {reason}"
        ));
    }
    let mut events = HashMap::new();
    logtools::history::visit_history(archive, storage, 0, |sequence, event, _| {
        events.insert(sequence, event.clone());
        Ok(())
    })
    .map_err(|e| format!("reading the history: {e}"))?;
    Ok((events, history.first_live))
}

fn acked_writes(campaign: &mut Campaign, events: &HashMap<u64, Event>, cut: u64) {
    let mut lost = Vec::new();
    for write in &campaign.acked {
        for (sequence, text) in &write.events {
            campaign.report.acked_checked += 1;
            match events.get(sequence) {
                Some(event) if event.to_string() == *text => {}
                other => lost.push(format!(
                    "acknowledged write `{}`: #{sequence} {text:?} is {}",
                    write.what,
                    other.map_or("gone".to_string(), |e| format!("now {:?}", e.to_string()))
                )),
            }
        }
    }
    record_losses(campaign, cut, lost);
}

fn agent_commands(
    fleet: &Fleet,
    campaign: &mut Campaign,
    node: &str,
    events: &HashMap<u64, Event>,
    cut: u64,
) {
    let witness = read_agent_log(&fleet.last_log(node));
    let mut lost = Vec::new();
    for received in &witness.received {
        campaign.report.acked_checked += 1;
        if !events.values().any(|e| received.rests_on(e)) {
            lost.push(format!(
                "{node} received {received:?}, but its event is not in the log"
            ));
        }
        if let Received::Commit { op, .. } = received {
            let decided = events
                .values()
                .filter(|e| matches!(e, Event::CommitDecided { op: o, .. } if o.0 == *op))
                .count();
            if decided > 1 {
                campaign.report.violations += 1;
                campaign
                    .report
                    .fail(cut, format!("op{op} has {decided} decisions"));
            }
        }
    }
    record_losses(campaign, cut, lost);
}

fn agent_journal(fleet: &Fleet, root: &Path, campaign: &mut Campaign, node: &str, cut: u64) {
    let witness = read_agent_log(&fleet.last_log(node));
    let journal = data_dir(root, node).join(agent::journal::JOURNAL_DIR);
    if !journal.exists() {
        if witness.journal_records > 0 {
            record_losses(campaign, cut, vec![format!("{node}'s journal is gone")]);
        }
        return;
    }
    match logtools::inspect::verify_journal(&journal) {
        Ok(summary) => {
            campaign.report.acked_checked += 1;
            if let Some(serving) = &summary.serving {
                serving_release_whole(root, campaign, node, serving, cut);
            }
            if summary.entries < witness.journal_records {
                record_losses(
                    campaign,
                    cut,
                    vec![format!(
                        "{node} acted with {} journal records durable; {} survived",
                        witness.journal_records, summary.entries
                    )],
                );
            }
        }
        Err(e) => {
            campaign.report.violations += 1;
            campaign
                .report
                .fail(cut, format!("{node}'s journal does not verify: {e}"));
        }
    }
}

/// The release the journal says the route serves must be on disk, whole:
/// the agent brings it back from there after a restart.
fn serving_release_whole(
    root: &Path,
    campaign: &mut Campaign,
    node: &str,
    serving: &str,
    cut: u64,
) {
    let releases = data_dir(root, node).join("releases");
    let found = std::fs::read_dir(&releases).ok().and_then(|entries| {
        entries
            .flatten()
            .map(|e| e.file_name().to_string_lossy().to_string())
            .find(|name| name.starts_with(serving))
    });
    campaign.report.acked_checked += 1;
    if found.is_none() {
        record_losses(
            campaign,
            cut,
            vec![format!(
                "{node}'s journal says {serving} serves, but its release directory is gone"
            )],
        );
    }
    // Found: `staged_releases` checks that it is whole.
}

fn staged_releases(root: &Path, campaign: &mut Campaign, node: &str, cut: u64) {
    let data = data_dir(root, node);
    let Ok(entries) = std::fs::read_dir(data.join("releases")) else {
        return;
    };
    let key = match protocol::bundle::load_verifying_key(&root.join("keys/bundle-signing.pub")) {
        Ok(key) => key,
        Err(e) => {
            campaign
                .report
                .fail(cut, format!("cannot read the signing key: {e}"));
            return;
        }
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        if name.starts_with('.') {
            continue; // a temporary directory: never trusted, removed by staging
        }
        let Some(digest) = agent::probe::parse_digest(&name) else {
            continue;
        };
        match agent::staging::read_back(&data, &key, model::platform::Arch::current(), digest) {
            model::ArtifactRead::Digest(d) if d == digest => {}
            other => {
                campaign.report.violations += 1;
                campaign.report.fail(
                    cut,
                    format!("{node}'s release {name} is under its final name but reads {other:?}"),
                );
            }
        }
    }
}

fn uploads(root: &Path, campaign: &mut Campaign, cut: u64) {
    let store = data_dir(root, "controller").join("bundles");
    let mut lost = Vec::new();
    for digest in &campaign.uploads {
        campaign.report.acked_checked += 1;
        let path = store.join(format!("{}.bundle", digest.to_hex()));
        match std::fs::read(&path) {
            Ok(bytes) if protocol::bundle::bundle_digest(&bytes) == *digest => {}
            Ok(bytes) => lost.push(format!(
                "uploaded bundle {} holds {} bytes that do not hash to it",
                digest.to_hex(),
                bytes.len()
            )),
            Err(e) => lost.push(format!("uploaded bundle {} is gone: {e}", digest.to_hex())),
        }
    }
    record_losses(campaign, cut, lost);
}

fn record_losses(campaign: &mut Campaign, cut: u64, lost: Vec<String>) {
    campaign.report.acked_lost += lost.len() as u64;
    for why in lost {
        campaign.report.fail(cut, why);
    }
}
