//! Golden bytes: the encoding of every controller `Event`, agent
//! `AgentEvent` and wire message variant is pinned in
//! `tests/golden/encodings.txt`. A log, a journal or a peer written by an
//! older build must decode in this one, so an encoding that changes is a
//! break, not a refactor: new variants are appended last (bincode numbers
//! variants by position) and get a new golden line; old lines never change.
//!
//! Adding a variant makes the `*_variant` matches below fail to compile:
//! give the variant a name there and a sample in the list, then write its
//! line with `FLEETWEFT_BLESS_GOLDEN=1 cargo test --release -p runtime --test it
//! golden_encoding::` (it only adds lines; it refuses to rewrite one).

use model::agent::AgentEvent;
use model::chunks::ChunkSet;
use model::controller::{
    Event, ObservationSource, Outcome, PauseReason, Resolution, UnknownReason,
};
use model::recovery::{ChunkReading, ErrorClass, Exit, Observed, Position, Reading, StageFailure};
use model::{
    ArtifactRead, Decision, Digest, Generation, NodeId, OpId, Plan, ProbeVerdict, ReportKind,
    RolloutId, RouteObservation, StageRefusal, ToAgent, ToController,
};
use protocol::frame::FrameBody;
use std::collections::BTreeMap;
use std::path::PathBuf;

const V1: Digest = Digest::repeat(0x11);
const V2: Digest = Digest::repeat(0x22);
const OP: OpId = OpId(7);
const R: RolloutId = RolloutId(3);
const NODE: NodeId = NodeId(2);
const GEN: Generation = Generation(5);

/// An observation with every field set, so each is pinned.
fn observation() -> RouteObservation {
    RouteObservation {
        verdict: ProbeVerdict::WrongAnswer,
        identity: Some(V2),
        process_healthy: true,
        process_uptime_ms: Some(1_234),
        process_restarts: Some(1),
        artifact: Some(ArtifactRead::AppFileAltered(V1)),
    }
}

/// Two labels, so the map's encoding (length, then pairs in key order) is
/// pinned.
fn labels() -> BTreeMap<String, String> {
    BTreeMap::from([
        ("region".to_string(), "eu".to_string()),
        ("tier".to_string(), "edge".to_string()),
    ])
}

/// A platform other than the default machine's, so both fields are pinned.
fn platform() -> model::platform::Platform {
    model::platform::Platform {
        arch: model::platform::Arch::Aarch64,
        os: model::platform::Os::Linux,
    }
}

fn event_variant(e: &Event) -> &'static str {
    match e {
        Event::RolloutStarted { .. } => "RolloutStarted",
        Event::RolloutSuperseded { .. } => "RolloutSuperseded",
        Event::RolloutPaused { .. } => "RolloutPaused",
        Event::RolloutResumed { .. } => "RolloutResumed",
        Event::RolloutApproved { .. } => "RolloutApproved",
        Event::RolloutCompleted { .. } => "RolloutCompleted",
        Event::OpGranted { .. } => "OpGranted",
        Event::CommitDecided { .. } => "CommitDecided",
        Event::CommitReplayed { .. } => "CommitReplayed",
        Event::ReportRecorded { .. } => "ReportRecorded",
        Event::ProbeRecorded { .. } => "ProbeRecorded",
        Event::RestoreRequested { .. } => "RestoreRequested",
        Event::OpUnknown { .. } => "OpUnknown",
        Event::OpSettled { .. } => "OpSettled",
        Event::OperatorObserved { .. } => "OperatorObserved",
        Event::OpClaimed { .. } => "OpClaimed",
        Event::NodeHello { .. } => "NodeHello",
        Event::LateReportIgnored { .. } => "LateReportIgnored",
        Event::StaleCommandRejected { .. } => "StaleCommandRejected",
        Event::ForeignMessageIgnored { .. } => "ForeignMessageIgnored",
        Event::RollBackOrdered { .. } => "RollBackOrdered",
        Event::NodeObserved { .. } => "NodeObserved",
        Event::RolloutEnded { .. } => "RolloutEnded",
        Event::NodeQuarantined { .. } => "NodeQuarantined",
        Event::NodeReleased { .. } => "NodeReleased",
        Event::CertRevoked { .. } => "CertRevoked",
        Event::NodeEnrolled { .. } => "NodeEnrolled",
        Event::NodeLabeled { .. } => "NodeLabeled",
        Event::NodeRetired { .. } => "NodeRetired",
        Event::RolloutPolicySet { .. } => "RolloutPolicySet",
        Event::RolloutFollowersAdded { .. } => "RolloutFollowersAdded",
        Event::ForgottenOpIgnored { .. } => "ForgottenOpIgnored",
        Event::NodePlatform { .. } => "NodePlatform",
        Event::RolloutArchesSet { .. } => "RolloutArchesSet",
        Event::ConfigSet { .. } => "ConfigSet",
        Event::RolloutConfigured { .. } => "RolloutConfigured",
        Event::Acted { .. } => "Acted",
        Event::OperatorAdded { .. } => "OperatorAdded",
        Event::CredentialRotated { .. } => "CredentialRotated",
        Event::OperatorRevoked { .. } => "OperatorRevoked",
    }
}

/// One sample of every `Event` variant, in declaration order.
fn events() -> Vec<Event> {
    vec![
        Event::RolloutStarted {
            rollout: R,
            plan: Plan {
                release: V2,
                canary: NodeId(0),
                followers: vec![NodeId(1), NodeId(300)],
                slots_max: 2,
                approval_after_canary: true,
            },
            generation: GEN,
        },
        Event::RolloutSuperseded {
            rollout: R,
            by: RolloutId(4),
        },
        Event::RolloutPaused {
            rollout: R,
            reason: PauseReason::ProbeFailed { op: OP },
        },
        Event::RolloutResumed { rollout: R },
        Event::RolloutApproved { rollout: R },
        Event::RolloutCompleted { rollout: R },
        Event::OpGranted {
            op: OP,
            rollout: R,
            node: NODE,
            release: V2,
            generation: GEN,
            baseline: Some(V1),
            is_canary: false,
        },
        Event::CommitDecided {
            op: OP,
            decision: Decision::Commit,
        },
        Event::CommitReplayed {
            op: OP,
            decision: Decision::Abort,
        },
        Event::ReportRecorded {
            op: OP,
            kind: ReportKind::Refused(StageRefusal::EffectUnknown),
            observation: observation(),
        },
        Event::ProbeRecorded {
            op: OP,
            observation: observation(),
        },
        Event::RestoreRequested { op: OP },
        Event::OpUnknown {
            op: OP,
            reason: UnknownReason::Contradictory,
        },
        Event::OpSettled {
            op: OP,
            outcome: Outcome::Resolved(Resolution::ConfirmBaseline),
        },
        Event::OperatorObserved {
            op: OP,
            observation: observation(),
        },
        Event::OpClaimed {
            op: OP,
            owner: "ops-émile".into(),
            review_by: "2026-12-01T10:00:00Z".into(),
        },
        Event::NodeHello {
            node: NODE,
            serving: Some(V1),
            generation: GEN,
        },
        Event::LateReportIgnored { node: NODE, op: OP },
        Event::StaleCommandRejected {
            node: NODE,
            op: OP,
            generation: Generation(4),
            accepted: GEN,
        },
        Event::ForeignMessageIgnored {
            node: NODE,
            op: OP,
            owner: Some(NodeId(1)),
        },
        Event::RollBackOrdered { op: OP },
        Event::NodeObserved {
            node: NODE,
            observation: observation(),
            source: ObservationSource::ReadBack,
            at_ms: 1_764_000_000_000,
        },
        Event::RolloutEnded {
            rollout: R,
            not_passed: 2,
        },
        Event::NodeQuarantined {
            node: NODE,
            first_peer: "10.0.0.11:52000".into(),
            second_peer: "10.0.0.99:41000".into(),
        },
        Event::NodeReleased { node: NODE },
        Event::CertRevoked {
            node: NODE,
            fingerprint: V1,
        },
        Event::NodeEnrolled {
            node: NODE,
            name: "edge-7".into(),
            labels: labels(),
            public: "10.0.0.12:8080".into(),
        },
        Event::NodeLabeled {
            node: NODE,
            labels: labels(),
        },
        Event::NodeRetired { node: NODE },
        Event::RolloutPolicySet {
            rollout: R,
            policy: model::plan::Policy {
                wave_ends: vec![1, 10, 100],
                approval_between_waves: true,
                max_failed: Some(2),
                max_unknown: Some(5),
            },
        },
        Event::RolloutFollowersAdded {
            rollout: R,
            followers: vec![NODE, NodeId(70_000)],
        },
        Event::ForgottenOpIgnored { node: NODE, op: OP },
        Event::NodePlatform {
            node: NODE,
            platform: platform(),
        },
        Event::RolloutArchesSet {
            rollout: R,
            arches: model::platform::ArchSet::of([
                model::platform::Arch::Aarch64,
                model::platform::Arch::X86_64,
            ]),
        },
        Event::ConfigSet {
            revision: model::config::ConfigRevision {
                app: "hello".into(),
                revision: 2,
                fingerprint: V1,
                env: vec![
                    (
                        "GREETING".into(),
                        model::config::LoggedValue::Plain("hi".into()),
                    ),
                    (
                        "TOKEN".into(),
                        model::config::LoggedValue::Sealed {
                            nonce: [7; 12],
                            ciphertext: vec![1, 2, 3, 4],
                            fingerprint: V2,
                        },
                    ),
                ],
                files: vec![("app.toml".into(), b"level = 3\n".to_vec())],
            },
        },
        Event::RolloutConfigured {
            rollout: R,
            deploys: model::config::Deploys {
                code: V1,
                app: "hello".into(),
                revision: 2,
                fingerprint: V2,
            },
        },
        Event::Acted {
            by: model::controller::ActedBy::Operator("ada".into()),
        },
        Event::OperatorAdded {
            name: "ada".into(),
            role: model::controller::Role::Approver,
            credential: V1,
        },
        Event::CredentialRotated {
            name: "ada".into(),
            credential: V2,
        },
        Event::OperatorRevoked { name: "ada".into() },
    ]
}

fn agent_event_variant(e: &AgentEvent) -> &'static str {
    match e {
        AgentEvent::Accepted { .. } => "Accepted",
        AgentEvent::Switched { .. } => "Switched",
        AgentEvent::AbortAccepted { .. } => "AbortAccepted",
        AgentEvent::AbortedUnseen { .. } => "AbortedUnseen",
        AgentEvent::Restored { .. } => "Restored",
        AgentEvent::Refused { .. } => "Refused",
        AgentEvent::Probed { .. } => "Probed",
        AgentEvent::Restarted { .. } => "Restarted",
        AgentEvent::Closed { .. } => "Closed",
        AgentEvent::Recovery { .. } => "Recovery",
        AgentEvent::Staged { .. } => "Staged",
        AgentEvent::StageFailed { .. } => "StageFailed",
        AgentEvent::ChunkVerified { .. } => "ChunkVerified",
        AgentEvent::ChunksKept { .. } => "ChunksKept",
        AgentEvent::MigrationDeclared { .. } => "MigrationDeclared",
        AgentEvent::MigrationStarted { .. } => "MigrationStarted",
        AgentEvent::MigrationFailed { .. } => "MigrationFailed",
        AgentEvent::RollbackNeedsPerson { .. } => "RollbackNeedsPerson",
    }
}

/// One sample of every `AgentEvent` variant, in declaration order.
fn agent_events() -> Vec<AgentEvent> {
    vec![
        AgentEvent::Accepted {
            op: OP,
            generation: GEN,
            release: V2,
        },
        AgentEvent::Switched {
            op: OP,
            generation: GEN,
        },
        AgentEvent::AbortAccepted {
            op: OP,
            generation: GEN,
        },
        AgentEvent::AbortedUnseen {
            op: OP,
            generation: GEN,
            release: V2,
        },
        AgentEvent::Restored {
            op: OP,
            generation: GEN,
        },
        AgentEvent::Refused {
            op: OP,
            reason: StageRefusal::BundleRejected,
        },
        AgentEvent::Probed {
            op: OP,
            observation: observation(),
        },
        AgentEvent::Restarted { serving: None },
        AgentEvent::Closed { op: OP },
        AgentEvent::Recovery {
            op: OP,
            reading: Reading {
                position: Position::AfterArtifactCommitted,
                error: Some(ErrorClass::Transient),
                observed: Some(Observed::ReVerified),
                budget_left: 2,
            },
            exit: Exit::Resume,
        },
        AgentEvent::Staged { op: OP },
        AgentEvent::StageFailed {
            op: OP,
            failure: StageFailure::Transient {
                bundle_missing: true,
            },
        },
        AgentEvent::ChunkVerified { op: OP, chunk: 2 },
        AgentEvent::ChunksKept {
            op: OP,
            reading: ChunkReading {
                verified: ChunkSet(0b101),
                unverified: ChunkSet(0b010),
                tree: Observed::Absent,
            },
            kept: ChunkSet(0b101),
        },
        AgentEvent::MigrationDeclared {
            op: OP,
            kind: model::agent::MigrationKind::Irreversible,
        },
        AgentEvent::MigrationStarted {
            op: OP,
            generation: Generation(3),
        },
        AgentEvent::MigrationFailed { op: OP },
        AgentEvent::RollbackNeedsPerson {
            op: OP,
            generation: Generation(3),
        },
    ]
}

fn frame_variant(f: &FrameBody) -> String {
    let inner = |name: &str, sub: &str| format!("{name}.{sub}");
    match f {
        FrameBody::ToAgent(m) => inner(
            "ToAgent",
            match m {
                ToAgent::Apply { .. } => "Apply",
                ToAgent::CommitReply { .. } => "CommitReply",
                ToAgent::Restore { .. } => "Restore",
                ToAgent::Settled { .. } => "Settled",
            },
        ),
        FrameBody::ToController(m) => inner(
            "ToController",
            match m {
                ToController::Hello { .. } => "Hello",
                ToController::CommitRequest { .. } => "CommitRequest",
                ToController::Report { .. } => "Report",
                ToController::Rejected { .. } => "Rejected",
                ToController::Platform { .. } => "Platform",
            },
        ),
        FrameBody::FetchBundle { .. } => "FetchBundle".into(),
        FrameBody::BundleFollows { .. } => "BundleFollows".into(),
        FrameBody::BundleMissing => "BundleMissing".into(),
        FrameBody::ReadBackRequest { .. } => "ReadBackRequest".into(),
        FrameBody::ReadBackReply { .. } => "ReadBackReply".into(),
        FrameBody::NotLeader { .. } => "NotLeader".into(),
        FrameBody::FetchChunk { .. } => "FetchChunk".into(),
        FrameBody::ChunkFollows { .. } => "ChunkFollows".into(),
        FrameBody::ChunkMissing => "ChunkMissing".into(),
        FrameBody::Mirrors { .. } => "Mirrors".into(),
        FrameBody::FetchSources { .. } => "FetchSources".into(),
        FrameBody::FetchChunkFrom { .. } => "FetchChunkFrom".into(),
        FrameBody::Isolation { .. } => "Isolation".into(),
        FrameBody::FetchDeployment { .. } => "FetchDeployment".into(),
        FrameBody::DeploymentFollows { .. } => "DeploymentFollows".into(),
        FrameBody::DeploymentMissing => "DeploymentMissing".into(),
        FrameBody::ConfigurationRead { .. } => "ConfigurationRead".into(),
    }
}

/// One sample of every wire frame, and of every message inside one.
fn frames() -> Vec<FrameBody> {
    vec![
        FrameBody::ToAgent(ToAgent::Apply {
            op: OP,
            generation: GEN,
            release: V2,
        }),
        FrameBody::ToAgent(ToAgent::CommitReply {
            op: OP,
            generation: GEN,
            release: V2,
            decision: Decision::Commit,
        }),
        FrameBody::ToAgent(ToAgent::Restore {
            op: OP,
            generation: GEN,
        }),
        FrameBody::ToAgent(ToAgent::Settled {
            op: OP,
            generation: GEN,
        }),
        FrameBody::ToController(ToController::Hello {
            serving: Some(V1),
            generation: GEN,
        }),
        FrameBody::ToController(ToController::CommitRequest { op: OP }),
        FrameBody::ToController(ToController::Report {
            op: OP,
            kind: ReportKind::Switched,
            observation: observation(),
        }),
        FrameBody::ToController(ToController::Rejected {
            op: OP,
            generation: Generation(4),
            accepted: GEN,
        }),
        FrameBody::ToController(ToController::Platform {
            platform: platform(),
        }),
        FrameBody::FetchBundle { digest: V2 },
        FrameBody::BundleFollows { len: 70_000 },
        FrameBody::BundleMissing,
        FrameBody::ReadBackRequest { request: 9 },
        FrameBody::ReadBackReply {
            request: 9,
            observation: observation(),
            serving: Some(V2),
        },
        FrameBody::NotLeader {
            leader: Some("10.0.0.2:7443".into()),
        },
        FrameBody::FetchChunk { digest: V2 },
        FrameBody::ChunkFollows { len: 4_194_304 },
        FrameBody::ChunkMissing,
        FrameBody::Mirrors {
            release: V2,
            mirrors: vec!["http://10.0.0.9:8080/fleet".into()],
        },
        FrameBody::FetchSources {
            op: OP,
            release: V2,
            sources: vec![
                protocol::frame::SourceTally {
                    source: "mirror[0] 10.0.0.9:8080".into(),
                    chunks: 3,
                    bytes: 5_000_000,
                    failures: 1,
                },
                protocol::frame::SourceTally {
                    source: "controller".into(),
                    chunks: 1,
                    bytes: 300,
                    failures: 0,
                },
            ],
        },
        FrameBody::FetchChunkFrom {
            digest: V2,
            offset: 1_048_576,
        },
        FrameBody::Isolation {
            release: V2,
            applied: "memory 256 MiB (cgroup v1 memory.limit_in_bytes)".into(),
        },
        FrameBody::FetchDeployment { digest: V2 },
        FrameBody::DeploymentFollows { len: 812 },
        FrameBody::DeploymentMissing,
        FrameBody::ConfigurationRead {
            deployment: V2,
            fingerprint: Some(V1),
        },
    ]
}

fn artifact_read_variant(a: &ArtifactRead) -> &'static str {
    match a {
        ArtifactRead::Digest(_) => "Digest",
        ArtifactRead::Unreadable => "Unreadable",
        ArtifactRead::AppFileAltered(_) => "AppFileAltered",
        ArtifactRead::AppFileOf { .. } => "AppFileOf",
    }
}

/// One sample of every `ArtifactRead` variant, in declaration order: an
/// observation carries one inside events (`NodeObserved`, reports) and
/// frames (`ReadBackReply`), so each is pinned on its own.
fn artifact_reads() -> Vec<ArtifactRead> {
    vec![
        ArtifactRead::Digest(V2),
        ArtifactRead::Unreadable,
        ArtifactRead::AppFileAltered(V2),
        ArtifactRead::AppFileOf {
            installed: V2,
            release: V1,
        },
    ]
}

/// Every sample as `(kind variant, encoded bytes)`, checking on the way
/// that the bytes decode back to the sample.
fn encodings() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for a in artifact_reads() {
        let bytes = eventlog::encode_payload(&a).expect("encode an artifact read");
        let back: ArtifactRead = eventlog::decode_payload(&bytes).expect("decode");
        assert_eq!(back, a);
        out.push((
            format!("artifact-read {}", artifact_read_variant(&a)),
            bytes,
        ));
    }
    for e in events() {
        let bytes = eventlog::encode_payload(&e).expect("encode an event");
        let back: Event = eventlog::decode_payload(&bytes).expect("decode an event");
        assert_eq!(back, e);
        out.push((format!("event {}", event_variant(&e)), bytes));
    }
    for e in agent_events() {
        let bytes = eventlog::encode_payload(&e).expect("encode an agent event");
        let back: AgentEvent = eventlog::decode_payload(&bytes).expect("decode");
        assert_eq!(back, e);
        out.push((format!("agent-event {}", agent_event_variant(&e)), bytes));
    }
    for f in frames() {
        let bytes = protocol::frame::encode(&f).expect("encode a frame");
        let back = protocol::frame::decode(&bytes).expect("decode a frame");
        assert_eq!(back, f);
        out.push((format!("frame {}", frame_variant(&f)), bytes));
    }
    out
}

fn golden_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden/encodings.txt")
}

fn read_golden() -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(golden_path()).unwrap_or_default();
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let (name, hex) = l.rsplit_once(' ').expect("`kind variant hex` lines");
            (name.to_string(), hex.to_string())
        })
        .collect()
}

#[test]
fn every_variant_has_exactly_one_sample_in_declaration_order() {
    // bincode writes the variant's position first (one varint byte here):
    // samples in declaration order start 0, 1, 2, …, so none is missing
    // between two others and none is listed twice.
    let positions = |bytes: Vec<Vec<u8>>| bytes.iter().map(|b| b[0]).collect::<Vec<u8>>();
    let expect = |n: usize| (0..n as u8).collect::<Vec<u8>>();
    let events: Vec<Vec<u8>> = events()
        .iter()
        .map(|e| eventlog::encode_payload(e).expect("encode"))
        .collect();
    assert_eq!(positions(events.clone()), expect(events.len()));
    let agent: Vec<Vec<u8>> = agent_events()
        .iter()
        .map(|e| eventlog::encode_payload(e).expect("encode"))
        .collect();
    assert_eq!(positions(agent.clone()), expect(agent.len()));
    let reads: Vec<Vec<u8>> = artifact_reads()
        .iter()
        .map(|a| eventlog::encode_payload(a).expect("encode"))
        .collect();
    assert_eq!(positions(reads.clone()), expect(reads.len()));
}

#[test]
fn encodings_match_the_golden_bytes() {
    let golden = read_golden();
    let bless = std::env::var_os("FLEETWEFT_BLESS_GOLDEN").is_some();
    let mut added = Vec::new();
    for (name, bytes) in encodings() {
        let hex = hex::encode(&bytes);
        match golden.get(&name) {
            Some(pinned) => assert_eq!(
                pinned, &hex,
                "the encoding of {name} changed: logs, journals and peers written \
                 before would no longer decode. Append new variants last instead; \
                 a deliberate format change bumps LOG_FORMAT_VERSION or WIRE_VERSION \
                 and replaces the golden file by hand"
            ),
            None if bless => added.push(format!("{name} {hex}")),
            None => {
                panic!("{name} has no golden line: run with FLEETWEFT_BLESS_GOLDEN=1 to add it")
            }
        }
    }
    if !added.is_empty() {
        let mut text = std::fs::read_to_string(golden_path()).unwrap_or_else(|_| {
            "# Pinned encodings: `kind variant hex`. Lines are only ever added.\n".into()
        });
        for line in added {
            text.push_str(&line);
            text.push('\n');
        }
        std::fs::create_dir_all(golden_path().parent().expect("a parent")).expect("mkdir");
        std::fs::write(golden_path(), text).expect("write the golden file");
    }
}

/// The largest events the model can produce fit `EVENT_BYTES_BOUND`, which
/// a compile-time assertion keeps within one log entry.
#[test]
fn the_largest_events_fit_the_event_bound() {
    use controller::driver::EVENT_BYTES_BOUND;
    use model::controller::CLAIM_TEXT_MAX;
    use model::plan::FOLLOWERS_PER_EVENT_MAX;
    let widest = Event::RolloutStarted {
        rollout: RolloutId(u32::MAX),
        plan: Plan {
            release: V2,
            canary: NodeId(model::plan::NODES_MAX as u32 - 1),
            followers: (0..FOLLOWERS_PER_EVENT_MAX)
                .map(|_| NodeId(model::plan::NODES_MAX as u32 - 1))
                .collect(),
            slots_max: model::plan::SLOTS_MAX_LIMIT,
            approval_after_canary: true,
        },
        generation: Generation(u64::MAX),
    };
    let text: String = std::iter::repeat_n('😀', CLAIM_TEXT_MAX).collect();
    let claim = Event::OpClaimed {
        op: OpId(u32::MAX),
        owner: text.clone(),
        review_by: text,
    };
    use model::controller::roster::{
        LABELS_PER_NODE_MAX, LABEL_KEY_BYTES_MAX, LABEL_VALUE_BYTES_MAX, NODE_NAME_BYTES_MAX,
        PUBLIC_ROUTE_BYTES_MAX,
    };
    // The roster's limits bound an enrollment: every label at its longest.
    let labels: BTreeMap<String, String> = (0..LABELS_PER_NODE_MAX)
        .map(|i| {
            let key = format!("{i:0>width$}", width = LABEL_KEY_BYTES_MAX);
            (key, "v".repeat(LABEL_VALUE_BYTES_MAX))
        })
        .collect();
    let enrolled = Event::NodeEnrolled {
        node: NodeId(model::plan::NODES_MAX as u32 - 1),
        name: "n".repeat(NODE_NAME_BYTES_MAX),
        labels,
        public: "p".repeat(PUBLIC_ROUTE_BYTES_MAX),
    };
    let added = Event::RolloutFollowersAdded {
        rollout: RolloutId(u32::MAX),
        followers: (0..FOLLOWERS_PER_EVENT_MAX)
            .map(|_| NodeId(model::plan::NODES_MAX as u32 - 1))
            .collect(),
    };
    // A configuration revision at every bound: the most keys, each named
    // at its longest, values filling the rest of its bytes, most files.
    use model::config::*;
    let name = |i: usize| format!("K{i:0>width$}", width = CONFIG_NAME_BYTES_MAX - 1);
    let env: Vec<(String, LoggedValue)> = (0..CONFIG_KEYS_MAX)
        .map(|i| (name(i), LoggedValue::Plain(String::new())))
        .collect();
    let files: Vec<(String, Vec<u8>)> = (0..CONFIG_FILES_MAX)
        .map(|i| {
            (
                format!("f{i:0>width$}", width = CONFIG_NAME_BYTES_MAX - 1),
                Vec::new(),
            )
        })
        .collect();
    let mut revision = ConfigRevision {
        app: "a".repeat(CONFIG_APP_BYTES_MAX),
        revision: u64::MAX,
        fingerprint: V1,
        env,
        files,
    };
    let room = CONFIG_BYTES_MAX - revision.logged_bytes();
    revision.files[0].1 = vec![0xff; room];
    assert_eq!(revision.check(), Ok(()));
    let config = Event::ConfigSet { revision };
    for event in [widest, added, claim, enrolled, config] {
        let len = eventlog::encode_payload(&event).expect("encode").len();
        assert!(
            len <= EVENT_BYTES_BOUND,
            "{} encodes to {len} bytes, over the bound of {EVENT_BYTES_BOUND}",
            event_variant(&event)
        );
    }
}
