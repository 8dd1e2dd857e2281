//! C1 a rollout deploys the configuration the log recorded (issue #24
//! item 1): each `ConfigSet` is its app's next revision, and a
//! `RolloutConfigured` names its app's latest recorded revision with the
//! fingerprint recorded for it. Written apart from the model's
//! `step::check_deploys`: it reads the state's heads itself.

use crate::{broken, Rule, Violation};
use model::controller::{ControllerState, Event};

/// C1 on one event, against the state before it.
pub fn c1_deploys_recorded_config(
    before: &ControllerState,
    event: &Event,
) -> Result<(), Violation> {
    match event {
        Event::ConfigSet { revision } => {
            let last = before.configs.get(&revision.app).map_or(0, |h| h.revision);
            if revision.revision == last + 1 {
                return Ok(());
            }
            broken(
                Rule::DeploysRecordedConfig,
                format!(
                    "configuration {} recorded as revision {} after revision {last}",
                    revision.app, revision.revision
                ),
            )
        }
        Event::RolloutConfigured { rollout, deploys } => {
            let head = before.configs.get(&deploys.app);
            let same = head.is_some_and(|h| {
                (h.revision, h.fingerprint) == (deploys.revision, deploys.fingerprint)
            });
            if same {
                return Ok(());
            }
            let latest = head.map_or(0, |h| h.revision);
            broken(
                Rule::DeploysRecordedConfig,
                format!(
                    "rollout {rollout} deploys configuration {} revision {} ({}), but the latest recorded is revision {latest}{}",
                    deploys.app,
                    deploys.revision,
                    deploys.fingerprint,
                    head.map(|h| format!(" ({})", h.fingerprint)).unwrap_or_default()
                ),
            )
        }
        _ => Ok(()),
    }
}
