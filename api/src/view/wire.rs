//! The request and reply bodies of the API's writes and of the event feed,
//! shared by the server (`daemon::api`) and the client (`cli_ops`): one
//! serde type each, never a `json!` built on either side. Their schemas in
//! `/api/openapi.json` are derived from these types; the limits they
//! declare are the ones the handlers enforce (tests in `daemon::http`).

use model::controller::Labels;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The most a `from` sequence or a process uptime may be: JSON integers
/// are documented as int64, so larger values are refused rather than read.
pub const INT64_MAX: u64 = i64::MAX as u64;

/// A label key or value: what `model::controller::roster::validate_labels`
/// accepts (1 to 63 of a-z, 0-9, '.', '_', '-').
pub const LABEL_WORD_PATTERN: &str = "^[a-z0-9._-]{1,63}$";

/// A public route the controller can probe: an IPv4 address and a port,
/// as `std::net::SocketAddr` parses them (no leading zeros), the first
/// octet not 0 (`0.0.0.0/8` is unreachable) and the port not 0, as the API
/// checks (`probeable_route`).
pub const PUBLIC_ROUTE_PATTERN: &str = concat!(
    "^(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9][0-9]?)\\.",
    "((25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])\\.){2}",
    "(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])",
    ":(6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[1-9][0-9]{0,3})$"
);

/// Why no probe can reach `addr`, if none can: port 0, or an address in
/// `0.0.0.0/8` or `::` (unspecified). The API and the config file's
/// `[[nodes]]` refuse such a public route at enrollment.
pub fn unprobeable(addr: &std::net::SocketAddr) -> Option<&'static str> {
    let this_network = match addr.ip() {
        std::net::IpAddr::V4(ip) => ip.octets()[0] == 0,
        std::net::IpAddr::V6(ip) => ip.is_unspecified(),
    };
    if addr.port() == 0 {
        Some("has port 0, which no probe can reach; give the port the app serves on")
    } else if this_network {
        Some("is an unspecified address, which no probe can reach; give the address the controller reaches the node on")
    } else {
        None
    }
}

/// The schema of a label set: at most `LABELS_PER_NODE_MAX` pairs of
/// label words, as the roster enforces.
pub fn labels_schema() -> utoipa::openapi::schema::Object {
    use utoipa::openapi::{ObjectBuilder, Type};
    let word = || {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .pattern(Some(LABEL_WORD_PATTERN))
            .build()
    };
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .property_names(Some(word()))
        .additional_properties(Some(utoipa::openapi::schema::AdditionalProperties::RefOr(
            utoipa::openapi::RefOr::T(utoipa::openapi::schema::Schema::Object(word())),
        )))
        .max_properties(Some(model::controller::roster::LABELS_PER_NODE_MAX))
        .build()
}

/// [`labels_schema`], or null.
pub fn optional_labels_schema() -> utoipa::openapi::schema::Object {
    let mut schema = labels_schema();
    schema.schema_type = utoipa::openapi::schema::SchemaType::from_iter([
        utoipa::openapi::Type::Object,
        utoipa::openapi::Type::Null,
    ]);
    schema
}

/// A public route's schema ([`PUBLIC_ROUTE_PATTERN`]).
pub fn public_route_schema() -> utoipa::openapi::schema::Object {
    utoipa::openapi::ObjectBuilder::new()
        .schema_type(utoipa::openapi::Type::String)
        .pattern(Some(PUBLIC_ROUTE_PATTERN))
        .examples(["10.0.0.5:8080"])
        .build()
}

/// One event of the log, as `/api/events` and the dashboard show it.
#[derive(Serialize, Deserialize, Debug, Clone, ToSchema)]
pub struct EventDto {
    /// Log sequence.
    pub sequence: u64,
    /// Domain words.
    pub text: String,
    /// The event itself (the model's encoding).
    #[schema(value_type = Object)]
    pub event: model::controller::Event,
}

/// One event a write recorded.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, ToSchema)]
pub struct RecordedEvent {
    /// Log sequence.
    pub sequence: u64,
    /// Domain words.
    pub text: String,
}

/// The answer of every write that goes through the core: what it recorded.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, ToSchema)]
pub struct WriteReply {
    /// The events recorded, in log order (possibly none).
    pub events: Vec<RecordedEvent>,
}

/// `POST /api/bundles`: the bundle accepted.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, ToSchema)]
pub struct UploadReply {
    /// Its release digest (hex): what `POST /api/rollouts` names.
    pub digest: String,
    /// The manifest's name.
    pub name: String,
    /// The manifest's version.
    pub version: String,
}

/// `PUT /api/chunks/{sha256}`: the chunk held.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, ToSchema)]
pub struct ChunkReply {
    /// The chunk's SHA-256 (hex), its name.
    pub sha256: String,
    /// Its length in bytes.
    pub bytes: u64,
}

// The `slots` schema's maximum is a literal (utoipa takes no paths there).
const _: () = assert!(model::plan::SLOTS_MAX_LIMIT == 10_000);

/// `POST /api/rollouts`.
#[derive(Serialize, Deserialize, Debug, Clone, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StartRollout {
    /// Release digest (hex) of an uploaded bundle.
    #[schema(pattern = "^[0-9a-f]{64}$")]
    pub release: String,
    /// Canary node. Optional with `select`: the first selected node.
    #[serde(default)]
    pub canary: Option<String>,
    /// Followers in order.
    #[serde(default)]
    pub followers: Vec<String>,
    /// Instead of `followers`: every enrolled, not retired node whose
    /// labels hold all these pairs, in enrollment order, resolved once at
    /// start (the plan records the list).
    #[serde(default)]
    #[schema(schema_with = optional_labels_schema)]
    pub select: Option<Labels>,
    /// Slot budget: ops that may hold a slot at once (1 to
    /// `model::plan::SLOTS_MAX_LIMIT`).
    #[schema(minimum = 1, maximum = 10_000)]
    pub slots: u16,
    /// Wait for approval after the canary.
    #[serde(default)]
    pub approve_after_canary: bool,
    /// Waves: cumulative ends, counts of followers or percentages of them
    /// (`"1%,10%,50%,100%"`). Wave k+1 is granted only once every op of
    /// the waves before it settled and the rollout is within its budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waves: Option<String>,
    /// Wait for `rollout approve` before each wave after the first.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub approve_between_waves: bool,
    /// Failed follower ops allowed (`"N"` or `"P%"` of the followers)
    /// before the rollout pauses itself and grants no more.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_failed: Option<String>,
    /// Pause once this many ops are UNKNOWN at once (`"N"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unknown: Option<String>,
}

/// `POST /api/nodes`: enroll a node.
#[derive(Serialize, Deserialize, Debug, Clone, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EnrollRequest {
    /// Its name: 1-63 of a-z, 0-9, '-'.
    #[schema(pattern = "^[a-z0-9-]{1,63}$")]
    pub name: String,
    /// Its labels: keys and values are 1-63 of a-z, 0-9, '.', '_', '-'.
    #[serde(default)]
    #[schema(schema_with = labels_schema)]
    pub labels: Labels,
    /// Its public route (`HOST:PORT`, an IP address), probed by the
    /// controller.
    #[schema(schema_with = public_route_schema)]
    pub public: String,
}

/// `POST /api/nodes/{name}/labels`: set and drop labels (drops first).
#[derive(Serialize, Deserialize, Debug, Clone, Default, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LabelRequest {
    /// Labels to set.
    #[serde(default)]
    #[schema(schema_with = labels_schema)]
    pub set: Labels,
    /// Label keys to drop.
    #[serde(default)]
    pub remove: Vec<String>,
}

/// What an operator saw of a node's route (`POST /api/ops/{op}/resolve`).
#[derive(Serialize, Deserialize, Debug, Clone, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ObservationBody {
    /// `pass`, `wrong-answer` or `unreachable`.
    #[schema(pattern = "^(pass|wrong-answer|unreachable)$")]
    pub verdict: String,
    /// The `X-Fleetweft-Release` the route answered with (64 hex digits).
    #[serde(default)]
    #[schema(pattern = "^[0-9a-f]{64}$")]
    pub identity: Option<String>,
    /// Whether the app process was up.
    #[serde(default)]
    pub process_healthy: bool,
    /// How long the process had been up, in ms; absent or null: not
    /// observed (recorded, never judged on).
    #[serde(default)]
    #[schema(minimum = 0, maximum = 9223372036854775807_u64)]
    pub process_uptime_ms: Option<u64>,
    /// How often the agent's supervisor had restarted the process; absent
    /// or null: not observed.
    #[serde(default)]
    #[schema(value_type = Option<u64>, minimum = 0, maximum = 4294967295_u64)]
    pub process_restarts: Option<u32>,
}

/// `POST /api/ops/{op}/resolve`: exactly one of `observation` and
/// `"probe": true` (the schema says so with a `oneOf`; the handler's
/// `parse_resolve` enforces it).
#[derive(Serialize, Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct ResolveRequest {
    /// `confirm-new`, `confirm-baseline` or `abandon`.
    pub resolution: String,
    /// The observation the operator typed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observation: Option<ObservationBody>,
    /// Instead of an observation: the controller probes the route now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<bool>,
}

impl utoipa::PartialSchema for ResolveRequest {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::AdditionalProperties;
        use utoipa::openapi::{ObjectBuilder, OneOfBuilder, Type};
        let words = super::words::RESOLUTIONS.map(super::words::resolution);
        let resolution = || {
            ObjectBuilder::new()
                .schema_type(Type::String)
                .enum_values(Some(words))
                .build()
        };
        let flag = |value: bool| {
            ObjectBuilder::new()
                .schema_type(Type::Boolean)
                .enum_values(Some([value]))
                .build()
        };
        let typed = ObjectBuilder::new()
            .property("resolution", resolution())
            .required("resolution")
            .property("observation", ObservationBody::schema())
            .required("observation")
            .property("probe", flag(false))
            .additional_properties(Some(
                AdditionalProperties::<utoipa::openapi::schema::Schema>::FreeForm(false),
            ))
            .description(Some("settle with the observation the operator typed"))
            .build();
        let probed = ObjectBuilder::new()
            .property("resolution", resolution())
            .required("resolution")
            .property("probe", flag(true))
            .required("probe")
            .property(
                "observation",
                ObjectBuilder::new().schema_type(Type::Null).build(),
            )
            .additional_properties(Some(
                AdditionalProperties::<utoipa::openapi::schema::Schema>::FreeForm(false),
            ))
            .description(Some("settle with a fresh controller probe of the route"))
            .build();
        OneOfBuilder::new().item(typed).item(probed).into()
    }
}

impl ToSchema for ResolveRequest {}

/// `POST /api/ops/{op}/claim`: an operator takes an unsettled op.
#[derive(Serialize, Deserialize, Debug, Clone, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ClaimRequest {
    /// Who takes it: the operator making the claim, the default; another
    /// name is refused (trimmed; not empty).
    #[schema(min_length = 1, max_length = 128, pattern = "\\S")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// When they will have looked at it.
    #[schema(max_length = 128, example = "2026-12-01T10:00:00Z")]
    pub review_by: String,
}

/// `POST /api/nodes/{name}/revoke-cert`: the certificate to revoke; `{}`:
/// the one presented on the node's latest connection (a body is required).
#[derive(Serialize, Deserialize, Debug, Clone, Default, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RevokeRequest {
    /// SHA-256 of the certificate's DER (hex).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(pattern = "^[0-9a-f]{64}$")]
    pub fingerprint: Option<String>,
}

/// A write that takes no fields: an empty body or `{}`.
#[derive(Serialize, Deserialize, Debug, Clone, Default, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Empty {}

/// `POST /api/nodes/{name}/observe` and `/probe`: what a fresh readback of
/// the node saw, judged, and recorded.
#[derive(Serialize, Deserialize, Debug, Clone, ToSchema)]
pub struct ObserveDto {
    /// The node.
    pub node: String,
    /// The release the route was judged as (hex).
    pub release: String,
    /// The probe spec of that release.
    #[schema(value_type = Object)]
    pub expect: protocol::bundle::ProbeSpec,
    /// What answered on the public route (`None`: nothing did).
    #[schema(value_type = Option<Object>)]
    pub answer: Option<RouteAnswer>,
    /// The controller's look at the route, judged by that spec.
    #[schema(value_type = Object)]
    pub observation: model::RouteObservation,
    /// The route against the release it should answer as: the same
    /// function the proof's health probe and identity checks use.
    #[schema(value_type = String)]
    pub judgement: proof::RouteJudgement,
    /// The agent's readback (`{"Ok": ...}`), or why there is none
    /// (`{"Err": "..."}`).
    #[schema(value_type = Object)]
    pub readback: Result<model::RouteObservation, String>,
    /// The live proof judged on this readback.
    #[schema(value_type = Object)]
    pub proof: proof::NodeProof,
    /// Events recorded (the node's observation, or evidence for its live op
    /// and whatever it settled), in domain words.
    pub recorded: Vec<String>,
    /// Why nothing was recorded, if nothing was (observed too soon again).
    pub not_recorded: Option<String>,
}

/// The first 12 hex digits of a digest: how the CLI and the dashboard
/// shorten a release.
pub fn short(digest: &str) -> String {
    digest.chars().take(12).collect()
}

/// What a node's public route answered.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RouteAnswer {
    /// HTTP status.
    pub status: u16,
    /// `X-Fleetweft-Release`, if the route named a release.
    pub identity: Option<String>,
    /// The body (trimmed, bounded).
    pub body: String,
}

/// `POST /api/operators`: record an operator (an admin's write; issue #28
/// item 2). The controller issues its credential and answers it once.
#[derive(Serialize, Deserialize, Debug, Clone, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AddOperatorRequest {
    /// 1 to 64 bytes of `[a-z0-9._-]`, starting with a letter or digit;
    /// a name is never reused, even once revoked.
    #[schema(
        min_length = 1,
        max_length = 64,
        pattern = "^[a-z0-9][a-z0-9._-]*$",
        example = "ada"
    )]
    pub name: String,
    /// `viewer`, `deployer`, `approver` or `admin`
    /// (`model::controller::words::role`).
    #[schema(pattern = "^(viewer|deployer|approver|admin)$", example = "approver")]
    pub role: String,
}

/// An operator as the API shows it: never its credential.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, ToSchema)]
pub struct OperatorDto {
    /// Its name.
    pub name: String,
    /// `viewer`, `deployer`, `approver` or `admin`.
    pub role: String,
    /// Revoked: its credential is refused; the name stays taken.
    pub revoked: bool,
}

/// A credential just issued (`POST /api/operators`, `.../rotate`): shown
/// this once, never again; the log keeps only its SHA-256.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, ToSchema)]
pub struct CredentialReply {
    /// Whose it is.
    pub operator: String,
    /// Its role.
    pub role: String,
    /// The credential: 64 hex characters, for `Authorization: Bearer`,
    /// the console's login and `--token-file`.
    pub credential: String,
    /// The events recorded.
    pub events: Vec<RecordedEvent>,
}
