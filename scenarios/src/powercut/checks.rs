//! What must hold after every power cut, checked on the durable state
//! (every process dead, every mount cut) before anything restarts:
//!
//! - the controller's log verifies: chain, decoding, and every rule over
//!   the whole history (one grant per node and rollout, one decision per
//!   op, replays equal to it, ... as `fleetweft log verify` checks them);
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
    let events = match controller_log(&log) {
        Ok(events) => events,
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

/// The controller log, verified with every rule, as (sequence, event).
fn controller_log(dir: &Path) -> Result<HashMap<u64, Event>, String> {
    if !dir.exists() {
        return Ok(HashMap::new());
    }
    logtools::inspect::verify_controller_log(dir)
        .map_err(|e| format!("log verify failed on {}: {e}", dir.display()))?;
    let mut events = HashMap::new();
    logtools::inspect::visit_events(dir, 0, |sequence, event| {
        events.insert(sequence, event.clone());
    })
    .map_err(|e| format!("reading {}: {e}", dir.display()))?;
    Ok(events)
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
        match agent::staging::read_back(&data, &key, digest) {
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
