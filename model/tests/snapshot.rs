//! Snapshots of the controller state (`model::controller::snapshot`):
//! golden bytes pin the encoding, a property test checks that states
//! reached by folding events round-trip, and damaged bytes are refused by
//! name, never with a panic.
//!
//! The golden file is named after the format version. If this test fails
//! because the state's encoding changed, bump `SNAPSHOT_FORMAT_VERSION`
//! (old snapshots are then skipped and the log replayed, never misread)
//! and write the new version's file with
//! `FLEETWEFT_BLESS=1 cargo test -p model --test snapshot`; blessing never
//! rewrites an existing version's file.

use model::controller::snapshot::{
    decode_state, encode_state, SnapshotFormatError, SNAPSHOT_FORMAT_VERSION,
    SNAPSHOT_HEADER_BYTES, SNAPSHOT_MAGIC,
};
use model::controller::{
    apply, step, ControllerState, Event, Input, ObservationSource, Outcome, Resolution,
};
use model::{
    Decision, Digest, Generation, NodeId, OpId, Plan, ProbeVerdict, ReportKind, RolloutId,
    RouteObservation, ToController,
};
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

const V1: Digest = Digest::repeat(0x11);
const V2: Digest = Digest::repeat(0x22);
const V3: Digest = Digest::repeat(0x33);

fn wrong(release: Digest) -> RouteObservation {
    RouteObservation {
        verdict: ProbeVerdict::WrongAnswer,
        identity: Some(release),
        process_healthy: true,
        process_uptime_ms: Some(1_234),
        process_restarts: Some(1),
        artifact: None,
    }
}

/// A small history touching every part of the state: roster, hello,
/// a rollout with a verified canary and a follower, quarantine, a revoked
/// certificate, an observation, a claim.
fn golden_events() -> Vec<Event> {
    let labels = BTreeMap::from([("region".to_string(), "eu".to_string())]);
    let (r0, a, b) = (RolloutId(0), NodeId(0), NodeId(1));
    vec![
        Event::NodeEnrolled {
            node: a,
            name: "edge-a".into(),
            labels: labels.clone(),
            public: "10.0.0.1:8080".into(),
        },
        Event::NodeEnrolled {
            node: b,
            name: "edge-b".into(),
            labels,
            public: "10.0.0.2:8080".into(),
        },
        Event::NodeHello {
            node: a,
            serving: Some(V1),
            generation: Generation(0),
        },
        Event::NodeHello {
            node: b,
            serving: Some(V1),
            generation: Generation(0),
        },
        Event::NodePlatform {
            node: a,
            platform: model::platform::Platform {
                arch: model::platform::Arch::Aarch64,
                os: model::platform::Os::Linux,
            },
        },
        Event::NodePlatform {
            node: b,
            platform: model::platform::Platform {
                arch: model::platform::Arch::X86_64,
                os: model::platform::Os::Linux,
            },
        },
        Event::RolloutStarted {
            rollout: r0,
            plan: Plan {
                release: V2,
                canary: a,
                followers: vec![b],
                slots_max: 1,
                approval_after_canary: false,
            },
            generation: Generation(1),
        },
        Event::RolloutArchesSet {
            rollout: r0,
            arches: model::platform::ArchSet::of([
                model::platform::Arch::Aarch64,
                model::platform::Arch::X86_64,
            ]),
        },
        Event::OpGranted {
            op: OpId(0),
            rollout: r0,
            node: a,
            release: V2,
            generation: Generation(1),
            baseline: Some(V1),
            is_canary: true,
        },
        Event::CommitDecided {
            op: OpId(0),
            decision: Decision::Commit,
        },
        Event::ReportRecorded {
            op: OpId(0),
            kind: ReportKind::Switched,
            observation: RouteObservation::passing(V2),
        },
        Event::OpSettled {
            op: OpId(0),
            outcome: Outcome::Verified,
        },
        Event::OpGranted {
            op: OpId(1),
            rollout: r0,
            node: b,
            release: V2,
            generation: Generation(1),
            baseline: Some(V1),
            is_canary: false,
        },
        Event::OpClaimed {
            op: OpId(1),
            owner: "ops".into(),
            review_by: "2030-01-01".into(),
        },
        Event::NodeObserved {
            node: a,
            observation: RouteObservation::passing(V2),
            source: ObservationSource::ReadBack,
            at_ms: 1_700_000_000_000,
        },
        Event::NodeQuarantined {
            node: b,
            first_peer: "10.0.0.2:5000".into(),
            second_peer: "10.0.0.9:5000".into(),
        },
        Event::CertRevoked {
            node: b,
            fingerprint: V3,
        },
        Event::ConfigSet {
            revision: model::config::ConfigRevision {
                app: "hello".into(),
                revision: 1,
                fingerprint: V3,
                env: Vec::new(),
                files: Vec::new(),
            },
        },
        Event::RolloutConfigured {
            rollout: r0,
            deploys: model::config::Deploys {
                code: V3,
                app: "hello".into(),
                revision: 1,
                fingerprint: V3,
            },
        },
        Event::OperatorAdded {
            name: "root".into(),
            role: model::controller::Role::Admin,
            credential: V1,
        },
        Event::OperatorAdded {
            name: "ada".into(),
            role: model::controller::Role::Approver,
            credential: V2,
        },
        Event::CredentialRotated {
            name: "ada".into(),
            credential: V3,
        },
        Event::OperatorAdded {
            name: "vera".into(),
            role: model::controller::Role::Viewer,
            credential: Digest::repeat(0x44),
        },
        Event::OperatorRevoked {
            name: "vera".into(),
        },
    ]
}

fn golden_state() -> ControllerState {
    let mut state = ControllerState::default();
    for event in golden_events() {
        apply(&mut state, &event);
    }
    state
}

fn golden_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!(
        "tests/golden/controller_state_v{SNAPSHOT_FORMAT_VERSION}.hex"
    ))
}

fn to_hex(bytes: &[u8]) -> String {
    let mut text = String::new();
    for line in bytes.chunks(32) {
        for byte in line {
            text.push_str(&format!("{byte:02x}"));
        }
        text.push('\n');
    }
    text
}

fn from_hex(text: &str) -> Vec<u8> {
    let digits: Vec<u8> = text.bytes().filter(u8::is_ascii_hexdigit).collect();
    digits
        .chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).expect("ascii"), 16).expect("hex"))
        .collect()
}

#[test]
fn the_encoding_of_a_fixed_state_matches_its_golden_bytes() {
    let state = golden_state();
    let encoded = encode_state(&state).expect("encodes");
    let path = golden_path();
    if std::env::var_os("FLEETWEFT_BLESS").is_some() && !path.exists() {
        std::fs::write(&path, to_hex(&encoded)).expect("write the golden file");
    }
    let text = std::fs::read_to_string(&path).unwrap_or_else(|err| {
        panic!(
            "{}: {err}; write it with FLEETWEFT_BLESS=1 (only for a new format version)",
            path.display()
        )
    });
    let golden = from_hex(&text);
    assert_eq!(
        decode_state(&golden).expect("the golden bytes decode"),
        state,
        "the golden bytes decode to the fixed state"
    );
    assert!(
        encoded == golden,
        "the snapshot encoding changed: bump SNAPSHOT_FORMAT_VERSION and bless a new \
         golden file (see the module docs).\nnow:\n{}",
        to_hex(&encoded)
    );
}

#[test]
fn damaged_headers_and_bodies_are_refused_by_name() {
    let bytes = encode_state(&golden_state()).expect("encodes");
    assert_eq!(
        decode_state(&bytes[..5]),
        Err(SnapshotFormatError::ShortHeader { len: 5 })
    );
    let mut magic = bytes.clone();
    magic[0] ^= 0xff;
    assert!(matches!(
        decode_state(&magic),
        Err(SnapshotFormatError::WrongMagic { .. })
    ));
    let mut version = bytes.clone();
    version[SNAPSHOT_MAGIC.len()..SNAPSHOT_HEADER_BYTES]
        .copy_from_slice(&(SNAPSHOT_FORMAT_VERSION + 1).to_le_bytes());
    assert_eq!(
        decode_state(&version),
        Err(SnapshotFormatError::UnsupportedVersion {
            found: SNAPSHOT_FORMAT_VERSION + 1
        })
    );
    let mut trailing = bytes.clone();
    trailing.push(0);
    assert!(matches!(
        decode_state(&trailing),
        Err(SnapshotFormatError::TrailingBytes { trailing: 1, .. })
    ));
    for cut in SNAPSHOT_HEADER_BYTES..bytes.len() {
        assert!(
            decode_state(&bytes[..cut]).is_err(),
            "a snapshot cut at byte {cut} decoded"
        );
    }
    assert!(matches!(
        decode_state(&bytes[..bytes.len() - 1]),
        Err(SnapshotFormatError::Truncated { .. })
    ));
}

/// Every single-byte change is either refused or decodes to some state:
/// never a panic, never an allocation driven by a garbled length (the
/// values below make every varint length claim up to 2^64).
#[test]
fn no_byte_change_makes_decoding_panic() {
    let bytes = encode_state(&golden_state()).expect("encodes");
    for index in SNAPSHOT_HEADER_BYTES..bytes.len() {
        for value in [0x00, 0x01, 0x7f, 0xfb, 0xfc, 0xfd, 0xff] {
            let mut damaged = bytes.clone();
            damaged[index] = value;
            let _ = decode_state(&damaged);
        }
    }
}

/// An input for the property test, from three small numbers.
fn input(kind: u8, x: u8, y: u8) -> Input {
    let node = NodeId(u32::from(x % 4));
    let op = OpId(u32::from(y % 6));
    let rollout = RolloutId(u32::from(y % 3));
    let observation = match y % 3 {
        0 => RouteObservation::passing(V2),
        1 => RouteObservation::passing(V1),
        _ => wrong(V2),
    };
    let name = format!("node-{}", x % 4);
    match kind % 16 {
        0 => Input::EnrollNode {
            name,
            labels: BTreeMap::from([("tier".into(), format!("t{}", y % 2))]),
            public: format!("10.0.0.{}:8080", x % 4),
        },
        1 => Input::FromAgent {
            node,
            msg: ToController::Hello {
                serving: Some(V1),
                generation: Generation(0),
            },
        },
        2 => Input::StartRollout {
            plan: Plan {
                release: V2,
                canary: node,
                followers: (0..4)
                    .map(NodeId)
                    .filter(|n| *n != node)
                    .take(usize::from(y % 4))
                    .collect(),
                slots_max: u16::from(y % 2) + 1,
                approval_after_canary: y & 1 == 0,
            },
        },
        3 => Input::FromAgent {
            node,
            msg: ToController::CommitRequest { op },
        },
        4 => Input::FromAgent {
            node,
            msg: ToController::Report {
                op,
                kind: ReportKind::Switched,
                observation,
            },
        },
        5 => Input::RouteProbed { node, observation },
        6 => Input::Timeout { op },
        7 => Input::Approve { rollout },
        8 => Input::Pause { rollout },
        9 => Input::Resume { rollout },
        10 => Input::Resolve {
            op,
            observation: RouteObservation::passing(V1),
            resolution: Resolution::ConfirmBaseline,
        },
        11 => Input::IdentityConflict {
            node,
            first_peer: "10.1.0.1:1".into(),
            second_peer: "10.1.0.2:2".into(),
        },
        12 => Input::ReleaseNode { node },
        13 => Input::Claim {
            op,
            owner: "ops".into(),
            review_by: "later".into(),
        },
        14 => Input::LabelNode {
            name,
            set: BTreeMap::new(),
            remove: BTreeSet::from(["tier".to_string()]),
        },
        _ => Input::Observe {
            node,
            observation,
            source: ObservationSource::Operator,
            now_ms: u64::from(y) * 20_000,
        },
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Every state reached by folding accepted inputs' events encodes and
    /// decodes back to an equal state.
    #[test]
    fn states_reached_by_folding_events_round_trip(
        inputs in prop::collection::vec((any::<u8>(), any::<u8>(), any::<u8>()), 1..60)
    ) {
        let mut state = ControllerState::default();
        for (kind, x, y) in inputs {
            let Ok(events) = step(&state, &input(kind, x, y)) else { continue };
            for event in &events {
                apply(&mut state, event);
            }
            let bytes = encode_state(&state).expect("encodes");
            prop_assert_eq!(decode_state(&bytes).expect("decodes"), state.clone());
            // The drifted index is what a walk over every node finds.
            prop_assert_eq!(&state.drifted, &state.drifted_by_scan());
        }
    }
}
