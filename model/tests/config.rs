//! Configuration as its own release layer (issue #24 item 1), the rules:
//! a revision is recorded only as its app's next and within its bounds; a
//! rollout deploys only the app's latest recorded revision with the
//! recorded fingerprint (its `RolloutConfigured` right after the start);
//! both kept through a replay and a snapshot (C1, the invariant, is
//! tested in invariants/tests/config.rs).

use model::config::{ConfigRevision, Deploys, LoggedValue, CONFIG_BYTES_MAX, CONFIG_KEYS_MAX};
use model::controller::snapshot::{decode_state, encode_state};
use model::controller::{replay, step, ControllerState, Event, Input, Labels, Refusal};
use model::plan::Policy;
use model::platform::ReleaseArches;
use model::{Digest, NodeId, Plan, RolloutId};

use testkit::accept_into;

const CODE: Digest = Digest::repeat(1);
const DEPLOYMENT: Digest = Digest::repeat(2);

fn revision(n: u64, fingerprint: u8) -> ConfigRevision {
    ConfigRevision {
        app: "hello".into(),
        revision: n,
        fingerprint: Digest::repeat(fingerprint),
        env: vec![
            ("GREETING".into(), LoggedValue::Plain("hi".into())),
            (
                "TOKEN".into(),
                LoggedValue::Sealed {
                    nonce: [0; 12],
                    ciphertext: vec![9; 20],
                    fingerprint: Digest::repeat(77),
                },
            ),
        ],
        files: vec![("app.toml".into(), b"level = 3\n".to_vec())],
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

fn start(deploys: Deploys) -> Input {
    Input::StartStaged {
        plan: Plan {
            release: DEPLOYMENT,
            canary: NodeId(0),
            followers: vec![NodeId(1)],
            slots_max: 1,
            approval_after_canary: false,
        },
        policy: Policy::default(),
        arches: ReleaseArches::Any,
        deploys: Some(deploys),
    }
}

fn deploys(revision: u64, fingerprint: u8) -> Deploys {
    Deploys {
        code: CODE,
        app: "hello".into(),
        revision,
        fingerprint: Digest::repeat(fingerprint),
    }
}

#[test]
fn revisions_are_recorded_in_order_and_a_skipped_or_repeated_one_is_refused() {
    let (mut state, mut log) = enrolled(0);
    let refused = step(
        &state,
        &Input::SetConfig {
            revision: revision(2, 10),
        },
    );
    assert!(
        matches!(&refused, Err(Refusal::InvalidConfig(why)) if why.contains("not its next one (1)")),
        "{refused:?}"
    );
    accept_into(
        &mut state,
        &mut log,
        Input::SetConfig {
            revision: revision(1, 10),
        },
    );
    accept_into(
        &mut state,
        &mut log,
        Input::SetConfig {
            revision: revision(2, 11),
        },
    );
    assert_eq!(state.configs["hello"].revision, 2);
    assert_eq!(state.configs["hello"].fingerprint, Digest::repeat(11));
    let again = step(
        &state,
        &Input::SetConfig {
            revision: revision(2, 12),
        },
    );
    assert!(matches!(again, Err(Refusal::InvalidConfig(_))), "{again:?}");
    // The text of the event never shows a value.
    let text = log.last().map(ToString::to_string).unwrap_or_default();
    assert_eq!(
        text,
        "configuration hello revision 2 (v11): 2 key(s), 1 secret(s), 1 file(s)"
    );
    assert!(!text.contains("hi"), "{text}");
}

#[test]
fn a_revision_over_a_bound_or_with_a_bad_name_is_refused_naming_it() {
    let state = ControllerState::default();
    let mut big = revision(1, 10);
    big.files[0].1 = vec![0; CONFIG_BYTES_MAX];
    let refused = step(&state, &Input::SetConfig { revision: big });
    assert!(
        matches!(&refused, Err(Refusal::InvalidConfig(why)) if why.contains("more than")),
        "{refused:?}"
    );
    let mut many = revision(1, 10);
    many.env = (0..=CONFIG_KEYS_MAX)
        .map(|i| (format!("K{i:04}"), LoggedValue::Plain(String::new())))
        .collect();
    assert!(matches!(
        step(&state, &Input::SetConfig { revision: many }),
        Err(Refusal::InvalidConfig(_))
    ));
    for (key, file) in [
        ("PORT", "a"),
        ("FLEETWEFT_X", "a"),
        ("1A", "a"),
        ("A", "../x"),
        ("A", ""),
    ] {
        let mut bad = revision(1, 10);
        bad.env = vec![(key.into(), LoggedValue::Plain(String::new()))];
        bad.files = vec![(file.into(), Vec::new())];
        let refused = step(&state, &Input::SetConfig { revision: bad });
        let named = if key == "A" { file } else { key };
        assert!(
            matches!(&refused, Err(Refusal::InvalidConfig(why)) if why.contains(&format!("{named:?}"))),
            "{key} {file}: {refused:?}"
        );
    }
}

#[test]
fn a_rollout_deploys_only_the_latest_recorded_revision() {
    let (mut state, mut log) = enrolled(2);
    let none = step(&state, &start(deploys(1, 10)));
    assert_eq!(
        none,
        Err(Refusal::ConfigNotLatest {
            app: "hello".into(),
            revision: 1,
            latest: 0
        })
    );
    accept_into(
        &mut state,
        &mut log,
        Input::SetConfig {
            revision: revision(1, 10),
        },
    );
    accept_into(
        &mut state,
        &mut log,
        Input::SetConfig {
            revision: revision(2, 11),
        },
    );
    for stale in [deploys(1, 10), deploys(2, 10)] {
        let refused = step(&state, &start(stale.clone()));
        assert!(
            matches!(refused, Err(Refusal::ConfigNotLatest { latest: 2, .. })),
            "{stale:?}: {refused:?}"
        );
    }
    let events = accept_into(&mut state, &mut log, start(deploys(2, 11)));
    let configured = events
        .iter()
        .position(|e| matches!(e, Event::RolloutConfigured { .. }));
    let started = events
        .iter()
        .position(|e| matches!(e, Event::RolloutStarted { .. }));
    assert!(started < configured && configured.is_some(), "{events:?}");
    let r = state.rollout(RolloutId(0)).expect("the rollout");
    assert_eq!(r.deploys, Some(deploys(2, 11)));
    assert_eq!(r.plan.release, DEPLOYMENT);
    // Kept through a replay and a snapshot.
    let replayed = replay(&log);
    assert_eq!(replayed, state);
    let bytes = encode_state(&state).expect("encodes");
    let decoded = decode_state(&bytes).expect("decodes");
    assert_eq!(decoded, state);
}
