//! C1 a rollout deploys the configuration the log recorded (issue #24
//! item 1): the invariant catches a log that skips a revision or deploys
//! one the log did not record, and passes one that follows the rules.

use model::config::{ConfigRevision, Deploys};
use model::controller::{ControllerState, Event, Input, Labels};
use model::{Digest, RolloutId};
use testkit::accept_into;

fn revision(n: u64, fingerprint: u8) -> ConfigRevision {
    ConfigRevision {
        app: "hello".into(),
        revision: n,
        fingerprint: Digest::repeat(fingerprint),
        env: Vec::new(),
        files: Vec::new(),
    }
}

fn deploys(revision: u64, fingerprint: u8) -> Deploys {
    Deploys {
        code: Digest::repeat(1),
        app: "hello".into(),
        revision,
        fingerprint: Digest::repeat(fingerprint),
    }
}

fn enrolled(nodes: usize) -> (ControllerState, Vec<Event>) {
    let mut state = ControllerState::default();
    let mut log = Vec::new();
    for i in 0..nodes {
        let enroll = Input::EnrollNode {
            name: format!("edge-{i}"),
            labels: Labels::new(),
            public: "127.0.0.1:8080".into(),
        };
        accept_into(&mut state, &mut log, enroll);
    }
    (state, log)
}

#[test]
fn c1_catches_a_log_that_skips_a_revision_or_deploys_an_unrecorded_one() {
    let (mut state, mut log) = enrolled(0);
    accept_into(
        &mut state,
        &mut log,
        Input::SetConfig {
            revision: revision(1, 10),
        },
    );
    let skipped = Event::ConfigSet {
        revision: revision(3, 12),
    };
    let caught = invariants::check_event(&state, &skipped);
    assert!(caught.is_err_and(|v| v.rule == invariants::Rule::DeploysRecordedConfig));
    let unrecorded = Event::RolloutConfigured {
        rollout: RolloutId(0),
        deploys: deploys(1, 99),
    };
    // Rollout r0 is not started here: C1 alone, not the referent check.
    let caught = invariants::c1_deploys_recorded_config(&state, &unrecorded);
    assert!(caught.is_err_and(|v| v.rule == invariants::Rule::DeploysRecordedConfig));
    let recorded = Event::RolloutConfigured {
        rollout: RolloutId(0),
        deploys: deploys(1, 10),
    };
    assert_eq!(
        invariants::c1_deploys_recorded_config(&state, &recorded),
        Ok(())
    );
}
