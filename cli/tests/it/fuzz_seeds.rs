//! The fuzz targets' generated seeds (`fuzz/corpus/<target>/gen-*`): real
//! encodings made by this crate's own encoders. The test fails when a
//! committed seed no longer equals what the encoders make (an encoding
//! changed) or a generated seed is missing; run it with
//! `FLEETWEFT_WRITE_FUZZ_SEEDS=1` to rewrite them. Hand-picked edge cases
//! (`edge-*`) are left alone.

use agent::journal::{Record, Stage};
use agent::recovery::ErrorClass;
use ed25519_dalek::SigningKey;
use eventlog::{encode_payload, genesis_hash, Envelope};
use model::agent::AgentEvent;
use model::controller::{Event, PauseReason};
use model::{
    Decision, Digest, Generation, NodeId, OpId, Plan, ProbeVerdict, ReportKind, RolloutId,
    RouteObservation, StageRefusal, ToAgent, ToController,
};
use protocol::bundle::{sign, JsonField, ManifestFields, ProbeSpec};
use protocol::frame::{encode, FrameBody};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

include!("../../../fuzz/fixed_key.rs");

/// Prefix of the files this test owns in each corpus directory.
const GENERATED_PREFIX: &str = "gen-";
const RELEASE: Digest = Digest([0xab; 32]);

type Seeds = BTreeMap<(&'static str, String), Vec<u8>>;

fn observation() -> RouteObservation {
    RouteObservation {
        process_uptime_ms: Some(1_500),
        process_restarts: Some(2),
        ..RouteObservation::new(ProbeVerdict::Pass, Some(RELEASE), true)
    }
}

fn frames(seeds: &mut Seeds) {
    let (op, generation) = (OpId(3), Generation(2));
    let bodies = [
        (
            "apply",
            FrameBody::ToAgent(ToAgent::Apply {
                op,
                generation,
                release: RELEASE,
            }),
        ),
        (
            "commit-reply",
            FrameBody::ToAgent(ToAgent::CommitReply {
                op,
                generation,
                release: RELEASE,
                decision: Decision::Commit,
            }),
        ),
        (
            "restore",
            FrameBody::ToAgent(ToAgent::Restore { op, generation }),
        ),
        (
            "settled",
            FrameBody::ToAgent(ToAgent::Settled { op, generation }),
        ),
        (
            "hello",
            FrameBody::ToController(ToController::Hello {
                serving: Some(RELEASE),
                generation,
            }),
        ),
        (
            "commit-request",
            FrameBody::ToController(ToController::CommitRequest { op }),
        ),
        (
            "report",
            FrameBody::ToController(ToController::Report {
                op,
                kind: ReportKind::Refused(StageRefusal::BundleRejected),
                observation: observation(),
            }),
        ),
        (
            "rejected",
            FrameBody::ToController(ToController::Rejected {
                op,
                generation,
                accepted: Generation(5),
            }),
        ),
        ("fetch", FrameBody::FetchBundle { digest: RELEASE }),
        ("follows", FrameBody::BundleFollows { len: 3_000 }),
        ("missing", FrameBody::BundleMissing),
        (
            "readback-request",
            FrameBody::ReadBackRequest { request: 9 },
        ),
        (
            "readback-reply",
            FrameBody::ReadBackReply {
                request: 9,
                observation: observation(),
                serving: None,
            },
        ),
        // The readback of an older release's app swapped in behind the
        // route (issue #24 item 1).
        (
            "readback-reply-app-file-of",
            FrameBody::ReadBackReply {
                request: 10,
                observation: RouteObservation {
                    artifact: Some(model::ArtifactRead::AppFileOf {
                        installed: RELEASE,
                        release: Digest([0xcd; 32]),
                    }),
                    ..RouteObservation::new(ProbeVerdict::WrongAnswer, Some(RELEASE), true)
                },
                serving: Some(RELEASE),
            },
        ),
        ("fetch-chunk", FrameBody::FetchChunk { digest: RELEASE }),
        ("chunk-follows", FrameBody::ChunkFollows { len: 4_194_304 }),
        ("chunk-missing", FrameBody::ChunkMissing),
        (
            "mirrors",
            FrameBody::Mirrors {
                release: RELEASE,
                mirrors: vec![
                    "http://mirror.example:8080/fleet".into(),
                    "http://10.0.0.9".into(),
                ],
            },
        ),
        (
            "fetch-sources",
            FrameBody::FetchSources {
                op,
                release: RELEASE,
                sources: vec![protocol::frame::SourceTally {
                    source: "mirror[0] mirror.example:8080".into(),
                    chunks: 2,
                    bytes: 8_388_608,
                    failures: 1,
                }],
            },
        ),
        (
            "fetch-chunk-from",
            FrameBody::FetchChunkFrom {
                digest: RELEASE,
                offset: 1_048_576,
            },
        ),
        (
            "isolation",
            FrameBody::Isolation {
                release: RELEASE,
                applied: "memory 256 MiB (cgroup v1 memory.limit_in_bytes)".into(),
            },
        ),
        (
            "fetch-deployment",
            FrameBody::FetchDeployment { digest: RELEASE },
        ),
        (
            "configuration-read",
            FrameBody::ConfigurationRead {
                deployment: RELEASE,
                fingerprint: Some(RELEASE),
            },
        ),
    ];
    for (name, body) in bodies {
        let bytes = encode(&body).expect("seed frame encodes");
        seeds.insert(("frame", name.into()), bytes);
    }
}

fn probe_exact() -> ProbeSpec {
    ProbeSpec {
        path: "/hello".into(),
        expect_status: 200,
        expect_body: "hello from v1".into(),
        expect_json: None,
    }
}

fn probe_json() -> ProbeSpec {
    ProbeSpec {
        path: "/status".into(),
        expect_status: 200,
        expect_body: String::new(),
        expect_json: Some(JsonField::parse("/version=\"v2\"").expect("valid field")),
    }
}

/// Signed bundles of the sample app and the manifests inside them.
fn bundles(seeds: &mut Seeds) {
    let key = SigningKey::from_bytes(&FUZZ_SIGNING_KEY_SEED);
    let app = include_bytes!("../../../examples/hello/app.py");
    let cases = [
        ("exact", probe_exact(), &app[..]),
        ("json", probe_json(), &b"x"[..]),
    ];
    for (name, probe, app) in cases {
        let fields = ManifestFields {
            name: "hello".into(),
            version: "v1".into(),
            app_file_name: "app.py".into(),
            run: vec!["python3".into(), "app.py".into()],
            probe: probe.clone(),
        };
        let bundle = sign(&key, app, fields).expect("seed bundle signs");
        let magic = protocol::bundle::MAGIC.len();
        let manifest_len = u32::from_be_bytes(bundle[magic..magic + 4].try_into().expect("4"));
        let manifest = bundle[magic + 4..magic + 4 + manifest_len as usize].to_vec();
        if name == "exact" {
            // Derived refusals: no signature, and a signature over other text.
            let sig_at = magic + 4 + manifest_len as usize + 4;
            let mut unsigned = bundle.clone();
            unsigned[sig_at..sig_at + 64].fill(0);
            seeds.insert(("bundle", "unsigned".into()), unsigned);
            let mut altered = bundle.clone();
            altered[magic + 4 + 10] ^= 0x20;
            seeds.insert(("bundle", "manifest-altered".into()), altered);
        }
        seeds.insert(("bundle", name.into()), bundle);
        seeds.insert(("manifest", name.into()), manifest);
        let spec = serde_json::to_vec(&probe).expect("probe spec serializes");
        seeds.insert(("manifest", format!("probe-{name}")), spec);
    }
}

fn events() -> Vec<(&'static str, Event)> {
    let (op, rollout, generation) = (OpId(1), RolloutId(0), Generation(1));
    let plan = Plan {
        release: RELEASE,
        canary: NodeId(0),
        followers: vec![NodeId(1), NodeId(2)],
        slots_max: 1,
        approval_after_canary: true,
    };
    vec![
        (
            "rollout-started",
            Event::RolloutStarted {
                rollout,
                plan,
                generation,
            },
        ),
        (
            "paused",
            Event::RolloutPaused {
                rollout,
                reason: PauseReason::ProbeFailed { op },
            },
        ),
        (
            "op-granted",
            Event::OpGranted {
                op,
                rollout,
                node: NodeId(0),
                release: RELEASE,
                generation,
                baseline: Some(Digest([1; 32])),
                is_canary: true,
            },
        ),
        (
            "commit-decided",
            Event::CommitDecided {
                op,
                decision: Decision::Abort,
            },
        ),
        (
            "report-recorded",
            Event::ReportRecorded {
                op,
                kind: ReportKind::Switched,
                observation: observation(),
            },
        ),
        (
            "op-claimed",
            Event::OpClaimed {
                op,
                owner: "ana".into(),
                review_by: "friday".into(),
            },
        ),
        (
            "node-hello",
            Event::NodeHello {
                node: NodeId(2),
                serving: None,
                generation,
            },
        ),
    ]
}

/// Controller events as stored entries and as bare payloads.
fn log_entries(seeds: &mut Seeds) {
    let mut prev = genesis_hash();
    for (sequence, (name, event)) in (0u64..).zip(events()) {
        let payload = encode_payload(&event).expect("seed event encodes");
        let (bytes, hash) =
            Envelope::seal_encoded(sequence, prev, payload.clone()).expect("seed envelope encodes");
        prev = hash;
        seeds.insert(("envelope", format!("entry-{name}")), bytes);
        seeds.insert(("envelope", format!("payload-{name}")), payload);
    }
}

fn journal(seeds: &mut Seeds) {
    let (op, generation) = (OpId(4), Generation(3));
    let records = [
        (
            "accepted",
            Record::Core(AgentEvent::Accepted {
                op,
                generation,
                release: RELEASE,
            }),
        ),
        (
            "probed",
            Record::Core(AgentEvent::Probed {
                op,
                observation: observation(),
            }),
        ),
        (
            "restarted",
            Record::Core(AgentEvent::Restarted {
                serving: Some(RELEASE),
            }),
        ),
        (
            "pending",
            Record::Pending {
                op,
                stage: Stage::Fetch,
                fingerprint: RELEASE,
                attempt_id: 2,
                budget_left: 1,
            },
        ),
        (
            "done",
            Record::Done {
                op,
                stage: Stage::Verify,
            },
        ),
        (
            "stopped",
            Record::Stopped {
                op,
                stage: Stage::Stage,
                refusal: StageRefusal::AttemptBudgetSpent,
                reason: "3 attempts".into(),
            },
        ),
        (
            "failed",
            Record::Failed {
                op,
                stage: Stage::Fetch,
                class: ErrorClass::Transient,
                bundle_missing: true,
                reason: "no bundle".into(),
            },
        ),
        ("resumed", Record::Resumed { op, attempt_id: 3 }),
    ];
    for (name, record) in records {
        let bytes = encode_payload(&record).expect("seed record encodes");
        seeds.insert(("journal", name.into()), bytes);
    }
}

const CONTROLLER_TOML: &str = r#"data_dir = "/var/lib/fleetweft"
listen = "127.0.0.1:7700"

[api]
listen = "127.0.0.1:7800"

[tls]
ca = "pki/ca.pem"
cert = "pki/controller.pem"
key = "pki/controller-key.pem"
operator_token = "pki/operator-token"

[bundles]
pubkey = "keys/bundle-signing.pub"

[timing]
op_timeout_ms = 15000

[verify]
every_s = 60

[faults]
drop_first_commit_reply_for = "abababababababababababababababababababababababababababababababab"

[[nodes]]
name = "node-a"
public = "127.0.0.1:8101"

[[nodes]]
name = "node-b"
public = "[::1]:8102"
"#;

const AGENT_TOML: &str = r#"node = "node-a"
data_dir = "/var/lib/fleetweft-agent"
public_port = 8101
public_ip = "0.0.0.0"

[controller]
addr = "127.0.0.1:7700"
server_name = "localhost"

[tls]
ca = "pki/ca.pem"
cert = "pki/nodes/node-a.pem"
key = "pki/nodes/node-a-key.pem"

[bundles]
pubkey = "keys/bundle-signing.pub"

[timing]
retry_ms = 1000
backoff_base_ms = 200
backoff_max_ms = 5000

[faults]
answer_wrongly = ["abababababababababababababababababababababababababababababababab"]
crash_on_start = []
hold_at = "fetch"
hold_ms = 100
"#;

/// Configs and API bodies the real parsers accept (checked below).
fn texts(seeds: &mut Seeds) {
    seeds.insert(("controller_toml", "full".into()), CONTROLLER_TOML.into());
    seeds.insert(("agent_toml", "full".into()), AGENT_TOML.into());
    let release = RELEASE.to_hex();
    let bodies = [
        (
            "start",
            format!(
                r#"{{"release":"{release}","canary":"node-a","followers":["node-b"],"slots":1,"approve_after_canary":true}}"#
            ),
        ),
        (
            "resolve-probe",
            r#"{"resolution":"confirm-new","probe":true}"#.into(),
        ),
        (
            "resolve-typed",
            format!(
                r#"{{"resolution":"abandon","observation":{{"verdict":"wrong-answer","identity":"{release}","process_healthy":true,"process_uptime_ms":10,"process_restarts":null}}}}"#
            ),
        ),
        ("claim", r#"{"owner":" ana ","review_by":"friday"}"#.into()),
        ("rollback", "{}".into()),
    ];
    for (name, body) in bodies {
        seeds.insert(("api_json", name.into()), body.into_bytes());
    }
}

fn generate() -> Seeds {
    let mut seeds = Seeds::new();
    frames(&mut seeds);
    bundles(&mut seeds);
    log_entries(&mut seeds);
    journal(&mut seeds);
    texts(&mut seeds);
    seeds
}

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus")
}

#[test]
fn the_text_seeds_are_accepted_by_the_real_parsers() {
    use controller::daemon::api::{
        parse_claim, parse_resolve, parse_roll_back, parse_start_rollout,
    };
    let seeds = generate();
    let text = |target: &'static str, name: &str| {
        std::str::from_utf8(&seeds[&(target, name.to_string())]).expect("utf-8 seed")
    };
    controller::daemon::config::ControllerConfig::parse(
        Path::new("c.toml"),
        text("controller_toml", "full"),
    )
    .expect("controller seed parses");
    agent::config::AgentConfig::parse(Path::new("a.toml"), text("agent_toml", "full"))
        .expect("agent seed parses");
    let body = |name: &str| text("api_json", name).as_bytes();
    parse_start_rollout(body("start")).expect("start seed parses");
    parse_resolve(body("resolve-probe")).expect("resolve seed parses");
    parse_resolve(body("resolve-typed")).expect("typed resolve seed parses");
    let claim = parse_claim(body("claim")).expect("claim seed parses");
    assert_eq!(
        claim.owner.as_deref(),
        Some("ana"),
        "claim texts are trimmed"
    );
    parse_roll_back(body("rollback")).expect("rollback seed parses");
}

/// The committed `gen-*` seeds are exactly what the encoders make now.
#[test]
fn committed_fuzz_seeds_match_the_encoders() {
    let seeds = generate();
    let root = corpus_dir();
    if std::env::var_os("FLEETWEFT_WRITE_FUZZ_SEEDS").is_some() {
        write_seeds(&root, &seeds);
    }
    let mut problems = Vec::new();
    for ((target, name), bytes) in &seeds {
        let path = root.join(target).join(format!("{GENERATED_PREFIX}{name}"));
        match std::fs::read(&path) {
            Ok(found) if found == *bytes => {}
            Ok(_) => problems.push(format!("{} differs", path.display())),
            Err(e) => problems.push(format!("{}: {e}", path.display())),
        }
    }
    for entry in std::fs::read_dir(&root).expect("fuzz/corpus exists") {
        let dir = entry.expect("corpus entry").path();
        let target = dir
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_string();
        for file in std::fs::read_dir(&dir).expect("target corpus dir") {
            let name = file
                .expect("seed entry")
                .file_name()
                .to_string_lossy()
                .to_string();
            if let Some(seed) = name.strip_prefix(GENERATED_PREFIX) {
                if !seeds.keys().any(|(t, n)| *t == target && n == seed) {
                    problems.push(format!("{target}/{name} is no longer generated"));
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "fuzz seeds are stale (rerun with FLEETWEFT_WRITE_FUZZ_SEEDS=1):\n{}",
        problems.join("\n")
    );
}

fn write_seeds(root: &Path, seeds: &Seeds) {
    for ((target, name), bytes) in seeds {
        let dir = root.join(target);
        std::fs::create_dir_all(&dir).expect("create corpus dir");
        std::fs::write(dir.join(format!("{GENERATED_PREFIX}{name}")), bytes).expect("write seed");
    }
}
