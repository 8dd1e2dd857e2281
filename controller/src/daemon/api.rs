//! The operator HTTP API (axum). Reads are open on the API's address
//! (loopback by default); every write needs an operator's credential as
//! `Authorization: Bearer`, and the role the write needs (issue #28 item
//! 2); a write without them changes nothing.

use super::error::{ApiError, Path, Query};
use super::view::{
    ClaimRequest, EnrollRequest, ErrorBody, LabelRequest, RecordedEvent, ResolveRequest,
    RevokeRequest, UploadReply, WriteReply,
};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::Json;
use model::controller::{Actor, Input, OffLogAction, Resolution};
use model::platform::ReleaseArches;
use model::{Digest, NodeId, OpId, Plan, RolloutId};
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::probe::agentless_digest;
pub use super::probe::{controller_observation, probe_route, Probed};
pub use super::state::Api;

/// Upper bound on an uploaded bundle.
pub const UPLOAD_BYTES_MAX: usize = protocol::bundle::BUNDLE_BYTES_MAX as usize;

// An upload body is one bundle file: the limit is the bundle's, and it fits
// in memory on every target the daemon builds for.
const _: () = assert!(protocol::bundle::BUNDLE_BYTES_MAX <= usize::MAX as u64);
const _: () = assert!(UPLOAD_BYTES_MAX as u64 == protocol::bundle::BUNDLE_BYTES_MAX);
/// Upper bound on events returned by one page of `/api/events`.
pub const EVENTS_PAGE_MAX: usize = 1_000;

/// The API's routes, each at the path its `#[utoipa::path]` documents.
pub fn routes() -> OpenApiRouter<Api> {
    OpenApiRouter::new()
        .routes(routes!(status))
        .routes(routes!(events))
        .routes(routes!(upload_bundle))
        .routes(routes!(list_rollouts, start_rollout))
        .routes(routes!(one_rollout))
        .routes(routes!(list_nodes, enroll_node))
        .routes(routes!(label_node))
        .routes(routes!(retire_node))
        .routes(routes!(pause))
        .routes(routes!(resume))
        .routes(routes!(approve))
        .routes(routes!(rollout_proof))
        .routes(routes!(node_proof))
        .routes(routes!(probe_node))
        .routes(routes!(observe_node))
        .routes(routes!(release_node))
        .routes(routes!(revoke_cert))
        .routes(routes!(unresolved))
        .routes(routes!(list_ops))
        .routes(routes!(one_op))
        .routes(routes!(resolve_op))
        .routes(routes!(claim_op))
        .routes(routes!(roll_back_op))
}

use super::state::{acting, operator, operator_for};

pub use super::view::{
    status_dto, EventDto, NodeDto, ObserveDto, ObservedDto, OpDto, Page, RolloutCounts, RolloutDto,
    StartRollout, StatusDto,
};

#[utoipa::path(get, path = "/api/status", tag = "reads", 
    responses((status = 200, description = "a summary whose size does not grow with the fleet", body = StatusDto), (status = 503, description = "the controller core stopped", body = ErrorBody)))]
async fn status(State(api): State<Api>) -> Response {
    match api.core.snapshot().await {
        Some(snap) => Json(status_dto(&snap)).into_response(),
        None => ApiError::Unavailable.into_response(),
    }
}

/// `GET /api/events`'s query.
#[derive(Deserialize, Debug, Default, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct EventsQuery {
    /// The first sequence to return (default 0).
    #[param(minimum = 0, maximum = 9223372036854775807_u64)]
    pub from: Option<u64>,
    /// Events in the page (default and most: 1000; more is a 400).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u64>,
}

impl EventsQuery {
    /// The checked `(from, limit)`: the error names the parameter.
    pub fn checked(&self) -> Result<(u64, usize), ApiError> {
        let from = self.from.unwrap_or(0);
        if from > super::view::INT64_MAX {
            return Err(ApiError::BadRequest(format!(
                "parameter `from`: {from} is over the int64 range"
            )));
        }
        let limit = match self.limit {
            None => EVENTS_PAGE_MAX,
            Some(n) if (1..=EVENTS_PAGE_MAX as u64).contains(&n) => n as usize,
            Some(n) => {
                return Err(ApiError::BadRequest(format!(
                    "parameter `limit`: {n} is not a whole number from 1 to {EVENTS_PAGE_MAX}"
                )))
            }
        };
        Ok((from, limit))
    }
}

/// `GET /api/events?from=N&limit=N`: a page of the event log.
#[utoipa::path(get, path = "/api/events", tag = "reads", params(EventsQuery),
    responses(
        (status = 200, description = "events from `from` on, in log order", body = Vec<EventDto>),
        (status = 400, description = "a bad query parameter, named", body = ErrorBody),
    ))]
async fn events(
    State(api): State<Api>,
    Query(q): Query<EventsQuery>,
) -> Result<Json<Vec<EventDto>>, ApiError> {
    let (from, limit) = q.checked()?;
    let events = api.core.events(from, limit).await;
    let roster = api.core.roster();
    Ok(Json(
        events
            .into_iter()
            .map(|(sequence, event)| super::view::event_dto(&roster, sequence, event))
            .collect(),
    ))
}

/// `POST /api/bundles`: upload a signed bundle.
#[utoipa::path(post, path = "/api/bundles", tag = "writes", security(("bearer" = [])),
    request_body(content = Vec<u8>, content_type = "application/octet-stream", description = "a bundle file signed by `fleetweft bundle sign`"),
    responses(
        (status = 200, description = "accepted and stored", body = UploadReply),
        (status = 400, description = "the bundle's signature or format is refused", body = ErrorBody),
        (status = 401, description = "missing, unknown, rotated or revoked operator credential; nothing stored", body = ErrorBody), (status = 403, description = "the operator's role does not allow it: the message names the role it needs; nothing stored", body = ErrorBody),
        (status = 413, description = "over the bundle size limit", body = ErrorBody),
    ))]
async fn upload_bundle(State(api): State<Api>, headers: HeaderMap, body: Bytes) -> Response {
    if let Err(rejection) = operator_for(&api, &headers, OffLogAction::UploadRelease) {
        return rejection.into_response();
    }
    let verified = match protocol::bundle::verify(&api.key, &body) {
        Ok(v) => v,
        Err(e) => return ApiError::BadRequest(format!("bundle refused: {e}")).into_response(),
    };
    if let Err(e) = api.bundles.store(verified.digest, &body) {
        return ApiError::Internal(format!("storing the bundle: {e}")).into_response();
    }
    Json(UploadReply {
        digest: verified.digest.to_hex(),
        name: verified.manifest.name,
        version: verified.manifest.version,
    })
    .into_response()
}

#[utoipa::path(post, path = "/api/rollouts", security(("bearer" = [])), tag = "writes", request_body(content = StartRollout, description = "JSON object"), 
    responses((status = 200, description = "accepted: the events recorded, in domain words", body = WriteReply), (status = 400, description = "malformed request; the message names the field", body = ErrorBody), (status = 401, description = "missing, unknown, rotated or revoked operator credential; nothing recorded", body = ErrorBody), (status = 403, description = "the operator's role does not allow it: the message names the role it needs; nothing recorded", body = ErrorBody), (status = 404, description = "what the path names does not exist", body = ErrorBody), (status = 409, description = "the controller refused in its current state; nothing recorded", body = ErrorBody), (status = 503, description = "the controller core stopped", body = ErrorBody)))]
async fn start_rollout(State(api): State<Api>, headers: HeaderMap, body: Bytes) -> Response {
    let actor = match operator(&api, &headers) {
        Ok(actor) => actor,
        Err(rejection) => return rejection.into_response(),
    };
    let (request, release) = match parse_start_rollout(&body) {
        Ok(parsed) => parsed,
        Err(why) => return bad_request(why),
    };
    // Held until the rollout is recorded: a removal waits, then sees it.
    let _gate = api.release_gate.read().await;
    if !api.bundles.path(release).exists() && !api.releases.knows(release) {
        return ApiError::NotFound("field `release`: no such bundle or release uploaded".into())
            .into_response();
    }
    let (canary, followers) = match resolve_nodes(&api, &request) {
        Ok(nodes) => nodes,
        Err(e) => return e.into_response(),
    };
    let text = crate::policy_text::PolicyText {
        waves: request.waves.as_deref(),
        approval_between_waves: request.approve_between_waves,
        max_failed: request.max_failed.as_deref(),
        max_unknown: request.max_unknown.as_deref(),
    };
    let policy = match text.policy(followers.len() as u32) {
        Ok(policy) => policy,
        Err(why) => return bad_request(why),
    };
    let arches = match release_arches(&api, release) {
        Ok(arches) => arches,
        Err(e) => return e.into_response(),
    };
    // The app's latest configuration rides along (issue #24 item 1): the
    // plan then names the deployment, code plus configuration.
    let (release, deploys) = match deployment_of(&api, release).await {
        Ok(pair) => pair,
        Err(e) => return e.into_response(),
    };
    let plan = Plan {
        release,
        canary,
        followers,
        slots_max: request.slots,
        approval_after_canary: request.approve_after_canary,
    };
    let input = Input::StartStaged {
        plan,
        policy,
        arches,
        deploys,
    };
    respond(&api, actor, input).await
}

/// What a rollout of code `release` deploys: the deployment digest and
/// what it carries when the release's app has a configuration, else the
/// code alone. The model refuses the start if another revision is
/// recorded before it is stepped (`ConfigNotLatest`).
async fn deployment_of(
    api: &Api,
    release: Digest,
) -> Result<(Digest, Option<model::config::Deploys>), ApiError> {
    // A stored release that no longer verifies names no app: it is started
    // as the code alone, and its nodes refuse it as they would anyway (the
    // controller serves only what hashes to its name).
    let app = match release_app(api, release) {
        Ok(app) => app,
        Err(why) => {
            tracing::warn!("{why}: starting the rollout without a configuration");
            return Ok((release, None));
        }
    };
    let snapshot = api.core.snapshot().await.ok_or(ApiError::Unavailable)?;
    match super::configuration::deploys_for(&snapshot.state, &app, release) {
        Some((deploys, digest)) => Ok((digest, Some(deploys))),
        None => Ok((release, None)),
    }
}

/// The app name `release`'s signed manifest gives, or why it cannot be
/// read.
fn release_app(api: &Api, release: Digest) -> Result<String, String> {
    if api.releases.knows(release) {
        return api
            .releases
            .read(&api.key, release)
            .map(|verified| verified.manifest.name.clone())
            .map_err(|e| format!("release {release}: reading its manifest: {e}"));
    }
    let path = api.bundles.path(release);
    let bytes = std::fs::read(&path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    protocol::bundle::verify(&api.key, &bytes)
        .map(|verified| verified.manifest.name)
        .map_err(|e| format!("bundle {release} no longer verifies: {e}"))
}

/// The architectures `release` runs on, from its signed manifest: a
/// format-1 bundle and a tree without per-architecture trees run on any;
/// a tree with them only on those (the model refuses a plan over a node
/// of another architecture, or of one not known yet: issue #24 item 5).
fn release_arches(api: &Api, release: Digest) -> Result<ReleaseArches, ApiError> {
    if !api.releases.knows(release) {
        return Ok(ReleaseArches::Any);
    }
    api.releases
        .read(&api.key, release)
        .map(|verified| verified.manifest.arches())
        .map_err(|e| ApiError::Internal(format!("reading the release's manifest: {e}")))
}

/// The plan's canary and followers. Named nodes must be enrolled; a
/// `select` is resolved here, once, on the roster as of now: the enrolled,
/// not retired nodes whose labels hold every pair, in enrollment order,
/// the canary excluded (the first selected node when no canary is named).
/// The resolved list goes into the plan, so `RolloutStarted` records it
/// and a replay never resolves again.
fn resolve_nodes(api: &Api, request: &StartRollout) -> Result<(NodeId, Vec<NodeId>), ApiError> {
    let roster = api.core.roster();
    // A plan naming a node that is not enrolled names nothing: 404.
    let named = |field: &str, name: &str| {
        roster.id(name).ok_or_else(|| {
            ApiError::NotFound(format!("field `{field}`: no node {name} is enrolled"))
        })
    };
    let canary = match &request.canary {
        Some(name) => Some(named("canary", name)?),
        None => None,
    };
    let Some(selector) = &request.select else {
        // parse_start_rollout refused a request with neither.
        let canary = canary.ok_or_else(|| {
            ApiError::BadRequest(
                "field `canary`: name a canary, or give `select` to pick one".into(),
            )
        })?;
        let followers = request
            .followers
            .iter()
            .map(|f| named("followers", f))
            .collect::<Result<_, _>>()?;
        return Ok((canary, followers));
    };
    if !request.followers.is_empty() {
        return Err(ApiError::BadRequest(
            "field `select`: give either `followers` or `select`, not both".into(),
        ));
    }
    let mut selected = roster.select(selector).filter(|n| Some(*n) != canary);
    let Some(canary) = canary.or_else(|| selected.next()) else {
        return Err(ApiError::Conflict(empty_selection(selector)));
    };
    let followers: Vec<NodeId> = selected.collect();
    if followers.is_empty() && request.canary.is_some() {
        return Err(ApiError::Conflict(empty_selection(selector)));
    }
    Ok((canary, followers))
}

fn empty_selection(selector: &model::controller::Labels) -> String {
    let pairs: Vec<String> = selector.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!(
        "field `select`: {} matches no enrolled node that is not retired (besides the canary)",
        pairs.join(",")
    )
}

/// Parses a `POST /api/rollouts` body and decodes its release digest; the
/// handler then checks that the bundle and the nodes exist. Public so the
/// `api_json` fuzz target runs the handler's own parsing.
pub fn parse_start_rollout(body: &[u8]) -> Result<(StartRollout, Digest), String> {
    let request: StartRollout = match serde_json::from_slice(body) {
        Ok(r) => r,
        // serde_json names a missing or unknown field; a field of the wrong
        // type is named by `bad_field`.
        Err(e) => {
            let field = bad_field(body)
                .map(|f| format!("field `{f}`: "))
                .unwrap_or_default();
            return Err(format!("malformed request: {field}{e}"));
        }
    };
    if request.canary.is_none() && request.select.is_none() {
        return Err(String::from(
            "field `canary`: name a canary, or give `select` to pick one",
        ));
    }
    let Some(release) = agentless_digest(&request.release) else {
        return Err(String::from("field `release`: expected 64 hex digits"));
    };
    let slots_max = model::plan::SLOTS_MAX_LIMIT;
    if !(1..=slots_max).contains(&request.slots) {
        return Err(format!(
            "field `slots`: {} is out of range 1..={slots_max}",
            request.slots
        ));
    }
    Ok((request, release))
}

/// The first field of a `StartRollout` body that has the wrong type.
fn bad_field(body: &[u8]) -> Option<&'static str> {
    use serde_json::Value;
    let Ok(Value::Object(map)) = serde_json::from_slice::<Value>(body) else {
        return None;
    };
    let is_string_list = |v: &Value| {
        v.as_array()
            .is_some_and(|a| a.iter().all(|x| x.is_string()))
    };
    type Check<'a> = (&'static str, &'a dyn Fn(&Value) -> bool);
    let is_string_map = |v: &Value| {
        v.as_object()
            .is_some_and(|m| m.values().all(|x| x.is_string()))
    };
    let checks: [Check; 6] = [
        ("release", &|v: &Value| v.is_string()),
        ("canary", &|v: &Value| v.is_string()),
        ("select", &is_string_map),
        ("followers", &is_string_list),
        ("slots", &|v: &Value| {
            v.as_u64().is_some_and(|n| n <= u64::from(u16::MAX))
        }),
        ("approve_after_canary", &|v: &Value| v.is_boolean()),
    ];
    checks
        .iter()
        .find(|(name, ok)| map.get(*name).is_some_and(|v| !ok(v)))
        .map(|(name, _)| *name)
}

fn rollout_id(text: &str) -> Option<RolloutId> {
    text.strip_prefix('r')?.parse().ok().map(RolloutId)
}

/// Submit `input` as `actor` makes it; the events in domain words, or the
/// refusal with its status.
async fn respond(api: &Api, actor: Actor, input: Input) -> Response {
    use super::core::InputError;
    match api.core.submit(acting(actor, input)).await {
        Ok(events) => {
            let roster = api.core.roster();
            Json(WriteReply {
                events: events
                    .iter()
                    .map(|(s, e)| RecordedEvent {
                        sequence: *s,
                        text: super::core::describe(&roster, e),
                    })
                    .collect(),
            })
            .into_response()
        }
        Err(InputError::Refused(refusal)) => ApiError::Refused(refusal).into_response(),
        Err(InputError::Stopped) => ApiError::Unavailable.into_response(),
    }
}

async fn rollout_command(
    api: Api,
    headers: HeaderMap,
    id: String,
    make: fn(RolloutId) -> Input,
) -> Response {
    let actor = match operator(&api, &headers) {
        Ok(actor) => actor,
        Err(rejection) => return rejection.into_response(),
    };
    let Some(rollout) = rollout_id(&id) else {
        return ApiError::NotFound(format!("no rollout {id} (ids look like r0)")).into_response();
    };
    respond(&api, actor, make(rollout)).await
}

#[utoipa::path(post, path = "/api/rollouts/{id}/pause", security(("bearer" = [])), tag = "writes", params(("id" = String, Path, description = "rollout id: r0, r1, ...")), 
    responses((status = 200, description = "accepted: the events recorded, in domain words", body = WriteReply), (status = 400, description = "malformed request; the message names the field", body = ErrorBody), (status = 401, description = "missing, unknown, rotated or revoked operator credential; nothing recorded", body = ErrorBody), (status = 403, description = "the operator's role does not allow it: the message names the role it needs; nothing recorded", body = ErrorBody), (status = 404, description = "what the path names does not exist", body = ErrorBody), (status = 409, description = "the controller refused in its current state; nothing recorded", body = ErrorBody), (status = 503, description = "the controller core stopped", body = ErrorBody)))]
async fn pause(State(api): State<Api>, headers: HeaderMap, Path(id): Path<String>) -> Response {
    rollout_command(api, headers, id, |rollout| Input::Pause { rollout }).await
}

#[utoipa::path(post, path = "/api/rollouts/{id}/resume", security(("bearer" = [])), tag = "writes", params(("id" = String, Path, description = "rollout id: r0, r1, ...")), 
    responses((status = 200, description = "accepted: the events recorded, in domain words", body = WriteReply), (status = 400, description = "malformed request; the message names the field", body = ErrorBody), (status = 401, description = "missing, unknown, rotated or revoked operator credential; nothing recorded", body = ErrorBody), (status = 403, description = "the operator's role does not allow it: the message names the role it needs; nothing recorded", body = ErrorBody), (status = 404, description = "what the path names does not exist", body = ErrorBody), (status = 409, description = "the controller refused in its current state; nothing recorded", body = ErrorBody), (status = 503, description = "the controller core stopped", body = ErrorBody)))]
async fn resume(State(api): State<Api>, headers: HeaderMap, Path(id): Path<String>) -> Response {
    rollout_command(api, headers, id, |rollout| Input::Resume { rollout }).await
}

#[utoipa::path(post, path = "/api/rollouts/{id}/approve", security(("bearer" = [])), tag = "writes", params(("id" = String, Path, description = "rollout id: r0, r1, ...")), 
    responses((status = 200, description = "accepted: the events recorded, in domain words", body = WriteReply), (status = 400, description = "malformed request; the message names the field", body = ErrorBody), (status = 401, description = "missing, unknown, rotated or revoked operator credential; nothing recorded", body = ErrorBody), (status = 403, description = "the operator's role does not allow it: the message names the role it needs; nothing recorded", body = ErrorBody), (status = 404, description = "what the path names does not exist", body = ErrorBody), (status = 409, description = "the controller refused in its current state; nothing recorded", body = ErrorBody), (status = 503, description = "the controller core stopped", body = ErrorBody)))]
async fn approve(State(api): State<Api>, headers: HeaderMap, Path(id): Path<String>) -> Response {
    rollout_command(api, headers, id, |rollout| Input::Approve { rollout }).await
}

/// `?cached=true` on a proof: judge what was recorded instead of reading
/// back now.
#[derive(Deserialize, Default, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
struct ProofQuery {
    /// Judge the last recorded evidence instead of reading back now.
    cached: Option<bool>,
}

/// `GET /api/nodes`'s query, as documented. `view::parse_node_query`
/// parses it (a repeatable `label` is beyond serde's query strings) and
/// enforces exactly these limits; `daemon::http`'s tests compare them.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // Declares the query for the document; never built.
struct NodeListParams {
    /// `KEY=VALUE`; repeat for more (all must hold), at most 16.
    #[param(style = Form, explode, max_items = 16, inline)]
    label: Option<Vec<LabelFilter>>,
    /// Only nodes in this state (one state per node, by precedence).
    #[param(pattern = "^(idle|live|unknown|drifted|quarantined|retired)$")]
    state: Option<String>,
    /// Items in the page (default 100).
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<u64>,
    /// The cursor: the `next` of the previous page (a node name); 404 when
    /// no node has it.
    #[param(pattern = "^[a-z0-9-]{1,63}$")]
    after: Option<String>,
}

/// One `label` filter of `GET /api/nodes`: `KEY=VALUE`.
struct LabelFilter;

impl utoipa::PartialSchema for LabelFilter {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::ObjectBuilder::new()
            .schema_type(utoipa::openapi::Type::String)
            .pattern(Some("^[a-z0-9._-]{1,63}=[a-z0-9._-]{1,63}$"))
            .into()
    }
}

impl utoipa::ToSchema for LabelFilter {}

/// `GET /api/ops`'s query, as documented; `view::parse_op_query` parses
/// it and enforces these limits.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // Declares the query for the document; never built.
struct OpListParams {
    /// Only this rollout's ops; 404 for a rollout that does not exist.
    #[param(pattern = "^r[0-9]{1,9}$")]
    rollout: Option<String>,
    /// Only ops in this state (or `settled`, `holding-slot`).
    #[param(
        pattern = "^(unknown|granted|decided|restoring|verified|rolled-back|not-applied|resolved|settled|holding-slot)$"
    )]
    state: Option<String>,
    /// Items in the page (default 100).
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<u64>,
    /// The cursor: the `next` of the previous page (an op id).
    #[param(pattern = "^op[0-9]{1,9}$")]
    after: Option<String>,
}

#[utoipa::path(get, path = "/api/nodes/{name}/proof", tag = "reads", params(("name" = String, Path, description = "an enrolled node's name"), ProofQuery), 
    responses((status = 200, description = "the node's proof", body = Object), (status = 503, description = "the controller core stopped", body = ErrorBody), (status = 400, description = "malformed request; the message names the field", body = ErrorBody), (status = 404, description = "what the path names does not exist", body = ErrorBody), (status = 409, description = "the controller refused in its current state; nothing recorded", body = ErrorBody)))]
async fn node_proof(
    State(api): State<Api>,
    Path(name): Path<String>,
    Query(q): Query<ProofQuery>,
) -> Response {
    let Some(node) = api.core.roster().id(&name) else {
        return ApiError::NotFound(format!("no node {name} in the fleet")).into_response();
    };
    let Some(snap) = api.core.snapshot().await else {
        return ApiError::Unavailable.into_response();
    };
    // Nothing intended yet: there is nothing to read back against.
    if q.cached == Some(true) || snap.state.intended_rollout(node).is_none() {
        return Json(proof::recorded_node_proof(&snap.state, node, &name)).into_response();
    }
    match super::verify::gather(&api, node).await {
        Ok(g) => Json(proof::live_node_proof(&snap.state, node, &name, &g.fresh)).into_response(),
        Err(rejection) => rejection,
    }
}

#[utoipa::path(get, path = "/api/rollouts/{id}/proof", tag = "reads", params(("id" = String, Path, description = "rollout id: r0, r1, ..."), ProofQuery), 
    responses((status = 200, description = "the rollout's proof", body = Object), (status = 503, description = "the controller core stopped", body = ErrorBody), (status = 400, description = "malformed request; the message names the field", body = ErrorBody), (status = 404, description = "what the path names does not exist", body = ErrorBody)))]
async fn rollout_proof(
    State(api): State<Api>,
    Path(id): Path<String>,
    Query(q): Query<ProofQuery>,
) -> Response {
    let Some(snap) = api.core.snapshot().await else {
        return ApiError::Unavailable.into_response();
    };
    let Some(r) = rollout_id(&id).and_then(|r| snap.state.rollout(r)) else {
        return ApiError::NotFound(format!("no rollout {id}")).into_response();
    };
    let mut fresh = std::collections::HashMap::new();
    if q.cached != Some(true) {
        // Read every node back, a bounded number at a time.
        let nodes: Vec<NodeId> = r.plan.nodes().collect();
        for chunk in nodes.chunks(super::verify::LIVE_PROOFS_CONCURRENT_MAX) {
            let gathered = gather_all(&api, chunk).await;
            for (node, g) in chunk.iter().zip(gathered) {
                if let Some(g) = g {
                    fresh.insert(*node, g.fresh);
                }
            }
        }
    }
    let names = |n: NodeId| snap.state.roster.display_name(n);
    match proof::rollout_proof(&snap.state, r.id, &names, &|n| fresh.get(&n).cloned()) {
        Some(proof) => Json(proof).into_response(),
        None => ApiError::NotFound(format!("no rollout {id}")).into_response(),
    }
}

/// Gather a readback of each node at once; `None` for a node that cannot be
/// read back against an intent (no release intended, bundle unavailable):
/// its proof is judged on what was recorded.
async fn gather_all(api: &Api, nodes: &[NodeId]) -> Vec<Option<super::verify::Gathered>> {
    let tasks: Vec<_> = nodes
        .iter()
        .map(|n| {
            let api = api.clone();
            let n = *n;
            tokio::spawn(async move { super::verify::gather(&api, n).await.ok() })
        })
        .collect();
    let mut out = Vec::with_capacity(tasks.len());
    for t in tasks {
        out.push(t.await.ok().flatten());
    }
    out
}

/// `POST /api/nodes/{name}/probe`: the same as `observe` (both words are
/// in use by the CLI and scripts).
#[utoipa::path(post, path = "/api/nodes/{name}/probe", security(("bearer" = [])), tag = "writes", params(("name" = String, Path, description = "an enrolled node's name")),
    responses((status = 200, description = "what was seen, judged and recorded", body = ObserveDto), (status = 401, description = "missing, unknown, rotated or revoked operator credential; nothing recorded", body = ErrorBody), (status = 403, description = "the operator's role does not allow it: the message names the role it needs; nothing recorded", body = ErrorBody), (status = 404, description = "what the path names does not exist", body = ErrorBody), (status = 409, description = "the controller refused in its current state; nothing recorded", body = ErrorBody), (status = 503, description = "the controller core stopped", body = ErrorBody)))]
async fn probe_node(state: State<Api>, headers: HeaderMap, name: Path<String>) -> Response {
    observe_node(state, headers, name).await
}

#[utoipa::path(post, path = "/api/nodes/{name}/observe", security(("bearer" = [])), tag = "writes", params(("name" = String, Path, description = "an enrolled node's name")),
    responses((status = 200, description = "what was seen, judged and recorded", body = ObserveDto), (status = 401, description = "missing, unknown, rotated or revoked operator credential; nothing recorded", body = ErrorBody), (status = 403, description = "the operator's role does not allow it: the message names the role it needs; nothing recorded", body = ErrorBody), (status = 404, description = "what the path names does not exist", body = ErrorBody), (status = 409, description = "the controller refused in its current state; nothing recorded", body = ErrorBody), (status = 503, description = "the controller core stopped", body = ErrorBody)))]
async fn observe_node(
    State(api): State<Api>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Response {
    // Recording an observation is a write.
    let actor = match operator(&api, &headers) {
        Ok(actor) => actor,
        Err(rejection) => return rejection.into_response(),
    };
    let Some(node) = api.core.roster().id(&name) else {
        return ApiError::NotFound(format!("no node {name} in the fleet")).into_response();
    };
    let g = match super::verify::gather(&api, node).await {
        Ok(g) => g,
        Err(rejection) => return rejection,
    };
    let (recorded, not_recorded) =
        match super::verify::record(&api, node, &g.fresh, Some(actor)).await {
            Ok(events) => (
                events
                    .iter()
                    .map(|(s, e)| format!("#{s} {}", super::core::describe(&api.core.roster(), e)))
                    .collect(),
                None,
            ),
            Err(super::core::InputError::Refused(
                r @ model::controller::Refusal::ObservedTooSoon { .. },
            )) => (Vec::new(), Some(r.to_string())),
            Err(e) => return ApiError::Conflict(e.to_string()).into_response(),
        };
    let Some(snap) = api.core.snapshot().await else {
        return ApiError::Unavailable.into_response();
    };
    Json(ObserveDto {
        judgement: proof::judge_route(&g.probed.observation, g.probed.release),
        proof: proof::live_node_proof(&snap.state, node, &name, &g.fresh),
        node: name,
        release: g.probed.release.to_hex(),
        expect: g.probed.spec,
        answer: g.probed.answer,
        observation: g.probed.observation,
        readback: g.fresh.agent.map(|(o, _)| o),
        recorded,
        not_recorded,
    })
    .into_response()
}

/// The 404 for a node name the fleet does not have.
fn no_such_node(name: &str) -> Response {
    ApiError::NotFound(format!("no node {name} in the fleet")).into_response()
}

/// `POST /api/nodes`: enroll a node, `{"name", "labels"?, "public"}`. The
/// public route must be an address the controller can probe.
#[utoipa::path(post, path = "/api/nodes", security(("bearer" = [])), tag = "writes", request_body(content = EnrollRequest, description = "JSON object"), 
    responses((status = 200, description = "accepted: the events recorded, in domain words", body = WriteReply), (status = 400, description = "malformed request; the message names the field", body = ErrorBody), (status = 401, description = "missing, unknown, rotated or revoked operator credential; nothing recorded", body = ErrorBody), (status = 403, description = "the operator's role does not allow it: the message names the role it needs; nothing recorded", body = ErrorBody), (status = 404, description = "what the path names does not exist", body = ErrorBody), (status = 409, description = "the controller refused in its current state; nothing recorded", body = ErrorBody), (status = 503, description = "the controller core stopped", body = ErrorBody)))]
async fn enroll_node(State(api): State<Api>, headers: HeaderMap, body: Bytes) -> Response {
    let actor = match operator(&api, &headers) {
        Ok(actor) => actor,
        Err(rejection) => return rejection.into_response(),
    };
    let map = match json_object(&body, &["name", "labels", "public"]) {
        Ok(map) => map,
        Err(why) => return bad_request(why),
    };
    let Some(name) = map.get("name").and_then(|v| v.as_str()) else {
        return bad_request("field `name`: expected a string");
    };
    let labels = match string_map(map.get("labels"), "labels") {
        Ok(labels) => labels,
        Err(why) => return bad_request(why),
    };
    let Some(public) = map.get("public").and_then(|v| v.as_str()) else {
        return bad_request("field `public`: expected an address such as 10.0.0.5:8080");
    };
    if let Err(why) = probeable_route(public) {
        return bad_request(why);
    }
    let input = Input::EnrollNode {
        name: name.to_string(),
        labels,
        public: public.to_string(),
    };
    respond(&api, actor, input).await
}

/// `public` as an address the controller can probe
/// ([`super::view::wire::unprobeable`]), or the message naming the field.
fn probeable_route(public: &str) -> Result<std::net::SocketAddr, String> {
    let addr = public.parse::<std::net::SocketAddr>().map_err(|e| {
        format!("field `public`: {public:?} is not an address such as 10.0.0.5:8080: {e}")
    })?;
    match super::view::wire::unprobeable(&addr) {
        Some(why) => Err(format!("field `public`: {public:?} {why}")),
        None => Ok(addr),
    }
}

/// `POST /api/nodes/{name}/labels`: `{"set": {k: v}, "remove": [k]}`.
#[utoipa::path(post, path = "/api/nodes/{name}/labels", security(("bearer" = [])), tag = "writes", params(("name" = String, Path, description = "an enrolled node's name")), request_body(content = LabelRequest, description = "JSON object"), 
    responses((status = 200, description = "accepted: the events recorded, in domain words", body = WriteReply), (status = 400, description = "malformed request; the message names the field", body = ErrorBody), (status = 401, description = "missing, unknown, rotated or revoked operator credential; nothing recorded", body = ErrorBody), (status = 403, description = "the operator's role does not allow it: the message names the role it needs; nothing recorded", body = ErrorBody), (status = 404, description = "what the path names does not exist", body = ErrorBody), (status = 409, description = "the controller refused in its current state; nothing recorded", body = ErrorBody), (status = 503, description = "the controller core stopped", body = ErrorBody)))]
async fn label_node(
    State(api): State<Api>,
    headers: HeaderMap,
    Path(name): Path<String>,
    body: Bytes,
) -> Response {
    let actor = match operator(&api, &headers) {
        Ok(actor) => actor,
        Err(rejection) => return rejection.into_response(),
    };
    let map = match json_object(&body, &["set", "remove"]) {
        Ok(map) => map,
        Err(why) => return bad_request(why),
    };
    let set = match string_map(map.get("set"), "set") {
        Ok(set) => set,
        Err(why) => return bad_request(why),
    };
    let remove = match map.get("remove") {
        None => Default::default(),
        Some(serde_json::Value::Array(keys)) => {
            match keys
                .iter()
                .map(|k| k.as_str().map(str::to_string))
                .collect()
            {
                Some(keys) => keys,
                None => return bad_request("field `remove`: expected a list of label keys"),
            }
        }
        Some(_) => return bad_request("field `remove`: expected a list of label keys"),
    };
    respond(&api, actor, Input::LabelNode { name, set, remove }).await
}

/// `POST /api/nodes/{name}/retire`: refused (409) while the node holds a
/// live op.
#[utoipa::path(post, path = "/api/nodes/{name}/retire", security(("bearer" = [])), tag = "writes", params(("name" = String, Path, description = "an enrolled node's name")), 
    responses((status = 200, description = "accepted: the events recorded, in domain words", body = WriteReply), (status = 400, description = "malformed request; the message names the field", body = ErrorBody), (status = 401, description = "missing, unknown, rotated or revoked operator credential; nothing recorded", body = ErrorBody), (status = 403, description = "the operator's role does not allow it: the message names the role it needs; nothing recorded", body = ErrorBody), (status = 404, description = "what the path names does not exist", body = ErrorBody), (status = 409, description = "the controller refused in its current state; nothing recorded", body = ErrorBody), (status = 503, description = "the controller core stopped", body = ErrorBody)))]
async fn retire_node(
    State(api): State<Api>,
    headers: HeaderMap,
    Path(name): Path<String>,
    body: Bytes,
) -> Response {
    let actor = match operator(&api, &headers) {
        Ok(actor) => actor,
        Err(rejection) => return rejection.into_response(),
    };
    if !body.is_empty() {
        if let Err(why) = json_object(&body, &[]) {
            return bad_request(why);
        }
    }
    respond(&api, actor, Input::RetireNode { name }).await
}

/// A JSON object of strings (labels); absent is empty.
fn string_map(
    v: Option<&serde_json::Value>,
    field: &str,
) -> Result<model::controller::Labels, String> {
    let expected =
        || format!("field `{field}`: expected an object of strings, like {{\"region\": \"eu\"}}");
    match v {
        None => Ok(Default::default()),
        Some(serde_json::Value::Object(m)) => m
            .iter()
            .map(|(k, v)| {
                v.as_str()
                    .map(|v| (k.clone(), v.to_string()))
                    .ok_or_else(expected)
            })
            .collect(),
        Some(_) => Err(expected()),
    }
}

/// `POST /api/nodes/{name}/release`: an operator lifts a quarantine.
#[utoipa::path(post, path = "/api/nodes/{name}/release", security(("bearer" = [])), tag = "writes", params(("name" = String, Path, description = "an enrolled node's name")), 
    responses((status = 200, description = "accepted: the events recorded, in domain words", body = WriteReply), (status = 400, description = "malformed request; the message names the field", body = ErrorBody), (status = 401, description = "missing, unknown, rotated or revoked operator credential; nothing recorded", body = ErrorBody), (status = 403, description = "the operator's role does not allow it: the message names the role it needs; nothing recorded", body = ErrorBody), (status = 404, description = "what the path names does not exist", body = ErrorBody), (status = 409, description = "the controller refused in its current state; nothing recorded", body = ErrorBody), (status = 503, description = "the controller core stopped", body = ErrorBody)))]
async fn release_node(
    State(api): State<Api>,
    headers: HeaderMap,
    Path(name): Path<String>,
    body: Bytes,
) -> Response {
    let actor = match operator(&api, &headers) {
        Ok(actor) => actor,
        Err(rejection) => return rejection.into_response(),
    };
    if !body.is_empty() {
        if let Err(why) = json_object(&body, &[]) {
            return bad_request(why);
        }
    }
    let node = api.core.roster().id(&name);
    match node {
        Some(node) => respond(&api, actor, Input::ReleaseNode { node }).await,
        None => no_such_node(&name),
    }
}

/// `POST /api/nodes/{name}/revoke-cert` with `{"fingerprint": HEX}` (the
/// SHA-256 of the certificate's DER), or `{}` for the certificate the node
/// presented on its latest connection since the controller started. A
/// missing body is refused: a destructive write is never the default of
/// a request that says nothing.
#[utoipa::path(post, path = "/api/nodes/{name}/revoke-cert", security(("bearer" = [])), tag = "writes", params(("name" = String, Path, description = "an enrolled node's name")), request_body(content = RevokeRequest, description = "JSON object"), 
    responses((status = 200, description = "accepted: the events recorded, in domain words", body = WriteReply), (status = 400, description = "malformed request; the message names the field", body = ErrorBody), (status = 401, description = "missing, unknown, rotated or revoked operator credential; nothing recorded", body = ErrorBody), (status = 403, description = "the operator's role does not allow it: the message names the role it needs; nothing recorded", body = ErrorBody), (status = 404, description = "what the path names does not exist", body = ErrorBody), (status = 409, description = "the controller refused in its current state; nothing recorded", body = ErrorBody), (status = 503, description = "the controller core stopped", body = ErrorBody)))]
async fn revoke_cert(
    State(api): State<Api>,
    headers: HeaderMap,
    Path(name): Path<String>,
    body: Bytes,
) -> Response {
    let actor = match operator(&api, &headers) {
        Ok(actor) => actor,
        Err(rejection) => return rejection.into_response(),
    };
    let Some(node) = api.core.roster().id(&name) else {
        return no_such_node(&name);
    };
    let given = if body.is_empty() {
        return bad_request(
            "a body is required: {\"fingerprint\": HEX} names the certificate to revoke, {} revokes the one the node presented last",
        );
    } else {
        match json_object(&body, &["fingerprint"]) {
            Ok(map) => match map
                .get("fingerprint")
                .and_then(|v| v.as_str())
                .map(agentless_digest)
            {
                Some(Some(d)) => Some(d),
                Some(None) => return bad_request(
                    "field `fingerprint`: expected 64 hex characters (SHA-256 of the certificate)",
                ),
                None => None,
            },
            Err(why) => return bad_request(why),
        }
    };
    let fingerprint = match given {
        Some(d) => d,
        None => {
            let Some(snap) = api.core.snapshot().await else {
                return ApiError::Unavailable.into_response();
            };
            match snap.presented.get(&node) {
                Some(f) => Digest(*f),
                None => {
                    return ApiError::Conflict(format!("{name} has presented no certificate since the controller started: name the certificate (fleetweft node revoke-cert {name} --cert FILE)")).into_response()
                }
            }
        }
    };
    respond(&api, actor, Input::RevokeCert { node, fingerprint }).await
}

#[utoipa::path(get, path = "/api/unresolved", tag = "reads", 
    responses((status = 200, description = "the handover report: every op holding a slot, every rollout waiting for an operator", body = Vec<Object>), (status = 503, description = "the controller core stopped", body = ErrorBody)))]
async fn unresolved(State(api): State<Api>) -> Response {
    let Some(snap) = api.core.snapshot().await else {
        return ApiError::Unavailable.into_response();
    };
    Json(super::view::handover_report(&snap)).into_response()
}

fn op_id(text: &str) -> Option<OpId> {
    super::view::parse_op_id(text)
}

fn bad_request(message: impl Into<String>) -> Response {
    ApiError::BadRequest(message.into()).into_response()
}

/// The request body as a JSON object whose keys are all in `allowed`.
fn json_object(
    body: &[u8],
    allowed: &[&str],
) -> Result<serde_json::Map<String, serde_json::Value>, String> {
    let value: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| format!("malformed request: {e}"))?;
    let serde_json::Value::Object(map) = value else {
        return Err(String::from("malformed request: expected a JSON object"));
    };
    if let Some(unknown) = map.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(if allowed.is_empty() {
            format!("field `{unknown}`: this request takes no fields")
        } else {
            format!(
                "field `{unknown}`: unknown field, expected one of {}",
                allowed.join(", ")
            )
        });
    }
    Ok(map)
}

fn parse_resolution(v: Option<&serde_json::Value>) -> Result<Resolution, String> {
    match v.and_then(|v| v.as_str()) {
        Some("confirm-new") => Ok(Resolution::ConfirmNew),
        Some("confirm-baseline") => Ok(Resolution::ConfirmBaseline),
        Some("abandon") => Ok(Resolution::Abandon),
        _ => Err(String::from(
            "field `resolution`: expected \"confirm-new\", \"confirm-baseline\" or \"abandon\"",
        )),
    }
}

fn parse_observation(v: &serde_json::Value) -> Result<model::RouteObservation, String> {
    let serde_json::Value::Object(map) = v else {
        return Err(String::from("field `observation`: expected an object"));
    };
    let allowed = [
        "verdict",
        "identity",
        "process_healthy",
        "process_uptime_ms",
        "process_restarts",
    ];
    if let Some(unknown) = map.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(format!(
            "field `observation.{unknown}`: unknown field, expected one of {}",
            allowed.join(", ")
        ));
    }
    let verdict = match map.get("verdict").and_then(|v| v.as_str()) {
        Some("pass") => model::ProbeVerdict::Pass,
        Some("wrong-answer") => model::ProbeVerdict::WrongAnswer,
        Some("unreachable") => model::ProbeVerdict::Unreachable,
        _ => return Err(String::from(
            "field `observation.verdict`: expected \"pass\", \"wrong-answer\" or \"unreachable\"",
        )),
    };
    let identity = match map.get("identity") {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(h)) => match agentless_digest(h) {
            Some(d) => Some(d),
            None => {
                return Err(String::from(
                    "field `observation.identity`: expected 64 hex digits or null",
                ))
            }
        },
        Some(_) => {
            return Err(String::from(
                "field `observation.identity`: expected 64 hex digits or null",
            ))
        }
    };
    let process_healthy = match map.get("process_healthy") {
        None => false,
        Some(serde_json::Value::Bool(b)) => *b,
        Some(_) => {
            return Err(String::from(
                "field `observation.process_healthy`: expected true or false",
            ))
        }
    };
    // Absent or null: the operator did not see the process's numbers.
    // JSON integers are documented as int64: a larger uptime is refused.
    let process_uptime_ms = optional_count(map, "process_uptime_ms", super::view::INT64_MAX)?;
    let process_restarts = match optional_count(map, "process_restarts", u64::from(u32::MAX))? {
        Some(n) => Some(
            u32::try_from(n)
                .map_err(|_| String::from("field `observation.process_restarts`: out of range"))?,
        ),
        None => None,
    };
    Ok(model::RouteObservation {
        verdict,
        identity,
        process_healthy,
        process_uptime_ms,
        process_restarts,
        artifact: None,
    })
}

/// An optional whole number `0..=max` in an observation: absent or `null` is
/// `None` (not observed).
fn optional_count(
    map: &serde_json::Map<String, serde_json::Value>,
    field: &str,
    max: u64,
) -> Result<Option<u64>, String> {
    match map.get(field) {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(v) => match v.as_u64() {
            Some(n) if n <= max => Ok(Some(n)),
            _ => Err(format!(
                "field `observation.{field}`: expected a whole number from 0 to {max}, or null"
            )),
        },
    }
}

/// 404 for a path naming no op, saying what op ids look like.
fn no_such_op(id: &str) -> Response {
    ApiError::NotFound(format!("no op {id} (ids look like op0)")).into_response()
}

/// A parsed `POST /api/ops/{op}/resolve` body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolveBody {
    /// How the operator settles the op.
    pub resolution: Resolution,
    /// The observation the operator typed; `None` means `"probe": true`
    /// (the controller probes the route itself).
    pub observation: Option<model::RouteObservation>,
}

/// Parses a resolve body: exactly one of `observation` and `"probe": true`.
/// Public so the `api_json` fuzz target runs the handler's own parsing.
pub fn parse_resolve(body: &[u8]) -> Result<ResolveBody, String> {
    let map = json_object(body, &["observation", "probe", "resolution"])?;
    let resolution = parse_resolution(map.get("resolution"))?;
    let probe = match map.get("probe") {
        None => false,
        Some(serde_json::Value::Bool(b)) => *b,
        Some(_) => return Err(String::from("field `probe`: expected true or false")),
    };
    let observation = match map.get("observation") {
        None | Some(serde_json::Value::Null) => None,
        Some(v) => Some(parse_observation(v)?),
    };
    if probe == observation.is_some() {
        return Err(String::from(
            "field `observation`: give either an observation or \"probe\": true, not both or neither",
        ));
    }
    Ok(ResolveBody {
        resolution,
        observation,
    })
}

/// Parses a rollback body: empty, or a JSON object with no fields. Public
/// so the `api_json` fuzz target runs the handler's own parsing.
pub fn parse_roll_back(body: &[u8]) -> Result<(), String> {
    if !body.is_empty() {
        json_object(body, &[])?;
    }
    Ok(())
}

/// A parsed `POST /api/ops/{op}/claim` body, texts trimmed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaimBody {
    /// Who takes the op: the operator making the claim (`None`: them).
    pub owner: Option<String>,
    /// When they will have looked at it.
    pub review_by: String,
}

/// Parses a claim body: `review_by` and an optional `owner`, strings. Public so
/// the `api_json` fuzz target runs the handler's own parsing.
pub fn parse_claim(body: &[u8]) -> Result<ClaimBody, String> {
    let map = json_object(body, &["owner", "review_by"])?;
    let text = |field: &str| match map.get(field).and_then(|v| v.as_str()) {
        Some(t) => Ok(t.trim().to_string()),
        None => Err(format!("field `{field}`: expected a string")),
    };
    let owner = match map.get("owner") {
        None => None,
        Some(_) => Some(text("owner")?),
    };
    Ok(ClaimBody {
        owner,
        review_by: text("review_by")?,
    })
}

/// `POST /api/ops/{op}/resolve`: settle an op by hand with an observation,
/// typed by the operator or taken by a fresh controller probe.
#[utoipa::path(post, path = "/api/ops/{op}/resolve", security(("bearer" = [])), tag = "writes", params(("op" = String, Path, description = "op id: op0, op1, ...")), request_body(content = ResolveRequest, description = "JSON object"), 
    responses((status = 200, description = "accepted: the events recorded, in domain words", body = WriteReply), (status = 400, description = "malformed request; the message names the field", body = ErrorBody), (status = 401, description = "missing, unknown, rotated or revoked operator credential; nothing recorded", body = ErrorBody), (status = 403, description = "the operator's role does not allow it: the message names the role it needs; nothing recorded", body = ErrorBody), (status = 404, description = "what the path names does not exist", body = ErrorBody), (status = 409, description = "the controller refused in its current state; nothing recorded", body = ErrorBody), (status = 503, description = "the controller core stopped", body = ErrorBody)))]
async fn resolve_op(
    State(api): State<Api>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    let actor = match operator(&api, &headers) {
        Ok(actor) => actor,
        Err(rejection) => return rejection.into_response(),
    };
    let ResolveBody {
        resolution,
        observation: typed,
    } = match parse_resolve(&body) {
        Ok(parsed) => parsed,
        Err(why) => return bad_request(why),
    };
    let Some(op) = op_id(&id) else {
        return no_such_op(&id);
    };
    let Some(snap) = api.core.snapshot().await else {
        return ApiError::Unavailable.into_response();
    };
    let Some(node) = snap.state.op(op).map(|o| o.node) else {
        return ApiError::NotFound(format!("unknown op {op}")).into_response();
    };
    let observation = match typed {
        Some(o) => o,
        None => match probe_route(&api, node).await {
            Ok(p) => p.observation,
            Err(rejection) => return rejection,
        },
    };
    respond(
        &api,
        actor,
        Input::Resolve {
            op,
            observation,
            resolution,
        },
    )
    .await
}

/// `POST /api/ops/{op}/rollback`: an operator orders an op rolled back; it
/// settles `RolledBack` only when a serving probe proves the baseline (S9).
/// No body (an empty JSON object is accepted).
#[utoipa::path(post, path = "/api/ops/{op}/rollback", security(("bearer" = [])), tag = "writes", params(("op" = String, Path, description = "op id: op0, op1, ...")), 
    responses((status = 200, description = "accepted: the events recorded, in domain words", body = WriteReply), (status = 400, description = "malformed request; the message names the field", body = ErrorBody), (status = 401, description = "missing, unknown, rotated or revoked operator credential; nothing recorded", body = ErrorBody), (status = 403, description = "the operator's role does not allow it: the message names the role it needs; nothing recorded", body = ErrorBody), (status = 404, description = "what the path names does not exist", body = ErrorBody), (status = 409, description = "the controller refused in its current state; nothing recorded", body = ErrorBody), (status = 503, description = "the controller core stopped", body = ErrorBody)))]
async fn roll_back_op(
    State(api): State<Api>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    let actor = match operator(&api, &headers) {
        Ok(actor) => actor,
        Err(rejection) => return rejection.into_response(),
    };
    if let Err(why) = parse_roll_back(&body) {
        return bad_request(why);
    }
    let Some(op) = op_id(&id) else {
        return no_such_op(&id);
    };
    respond(&api, actor, Input::RollBack { op }).await
}

/// `POST /api/ops/{op}/claim`: an operator takes ownership of an unsettled op.
#[utoipa::path(post, path = "/api/ops/{op}/claim", security(("bearer" = [])), tag = "writes", params(("op" = String, Path, description = "op id: op0, op1, ...")), request_body(content = ClaimRequest, description = "JSON object"), 
    responses((status = 200, description = "accepted: the events recorded, in domain words", body = WriteReply), (status = 400, description = "malformed request; the message names the field", body = ErrorBody), (status = 401, description = "missing, unknown, rotated or revoked operator credential; nothing recorded", body = ErrorBody), (status = 403, description = "the operator's role does not allow it: the message names the role it needs; nothing recorded", body = ErrorBody), (status = 404, description = "what the path names does not exist", body = ErrorBody), (status = 409, description = "the controller refused in its current state; nothing recorded", body = ErrorBody), (status = 503, description = "the controller core stopped", body = ErrorBody)))]
async fn claim_op(
    State(api): State<Api>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    let actor = match operator(&api, &headers) {
        Ok(actor) => actor,
        Err(rejection) => return rejection.into_response(),
    };
    let ClaimBody { owner, review_by } = match parse_claim(&body) {
        Ok(parsed) => parsed,
        Err(why) => return bad_request(why),
    };
    let Some(op) = op_id(&id) else {
        return no_such_op(&id);
    };
    // A claim is held by the operator who makes it (the model refuses
    // another name): without an owner, it is theirs.
    let owner = match (owner, &actor) {
        (Some(owner), _) => owner,
        (None, Actor::Operator { name, .. }) => name.clone(),
        (None, Actor::ControllerConfig) => String::new(),
    };
    respond(
        &api,
        actor,
        Input::Claim {
            op,
            owner,
            review_by,
        },
    )
    .await
}

#[utoipa::path(get, path = "/api/rollouts", tag = "reads", 
    responses((status = 200, description = "every rollout, oldest first, without follower lists", body = Vec<RolloutDto>), (status = 503, description = "the controller core stopped", body = ErrorBody)))]
async fn list_rollouts(State(api): State<Api>) -> Response {
    match api.core.snapshot().await {
        Some(snap) => Json(super::view::rollout_dtos(&snap.state)).into_response(),
        None => ApiError::Unavailable.into_response(),
    }
}

/// `GET /api/rollouts/{id}`: the rollout with its followers and its counts
/// per op state (from the rollout's indexes).
#[utoipa::path(get, path = "/api/rollouts/{id}", tag = "reads", params(("id" = String, Path, description = "rollout id: r0, r1, ...")), 
    responses((status = 200, description = "the rollout with its followers", body = RolloutDto), (status = 503, description = "the controller core stopped", body = ErrorBody), (status = 404, description = "what the path names does not exist", body = ErrorBody)))]
async fn one_rollout(State(api): State<Api>, Path(id): Path<String>) -> Response {
    let Some(snap) = api.core.snapshot().await else {
        return ApiError::Unavailable.into_response();
    };
    match rollout_id(&id).and_then(|r| snap.state.rollout(r)) {
        Some(r) => Json(super::view::rollout_dto(&snap.state, r, true)).into_response(),
        None => ApiError::NotFound(format!("no rollout {id}")).into_response(),
    }
}

/// `GET /api/nodes?label=k=v&state=S&limit=N&after=NAME`: a page of nodes
/// in enrollment order (see [`super::view::node_page`] for the scan bound).
#[utoipa::path(get, path = "/api/nodes", tag = "reads", params(NodeListParams), 
    responses((status = 200, description = "a page of nodes in enrollment order; follow `next`", body = Page<NodeDto>), (status = 503, description = "the controller core stopped", body = ErrorBody), (status = 400, description = "malformed request; the message names the field", body = ErrorBody), (status = 404, description = "what the path names does not exist", body = ErrorBody)))]
async fn list_nodes(
    State(api): State<Api>,
    Query(pairs): Query<Vec<(String, String)>>,
) -> Response {
    let Some(snap) = api.core.snapshot().await else {
        return ApiError::Unavailable.into_response();
    };
    match super::view::parse_node_query(&snap.state, &pairs) {
        Ok(q) => Json(super::view::node_page(&snap, &q)).into_response(),
        Err(e) => ApiError::from(e).into_response(),
    }
}

/// `GET /api/ops?rollout=ID&state=S&limit=N&after=OP`: a page of ops, hot
/// and archived, in op order (see [`super::view::op_page`]).
#[utoipa::path(get, path = "/api/ops", tag = "reads", params(OpListParams), 
    responses((status = 200, description = "a page of ops in op order; follow `next`", body = Page<OpDto>), (status = 503, description = "the controller core stopped", body = ErrorBody), (status = 400, description = "malformed request; the message names the field", body = ErrorBody), (status = 404, description = "what the path names does not exist", body = ErrorBody)))]
async fn list_ops(State(api): State<Api>, Query(pairs): Query<Vec<(String, String)>>) -> Response {
    let Some(snap) = api.core.snapshot().await else {
        return ApiError::Unavailable.into_response();
    };
    match super::view::parse_op_query(&snap.state, &pairs) {
        Ok(q) => {
            let mut page = super::view::op_page(&snap.state, &q);
            for dto in &mut page.items {
                add_sources(&api, &snap.state, dto);
            }
            Json(page).into_response()
        }
        Err(e) => ApiError::from(e).into_response(),
    }
}

/// `GET /api/ops/{op}`: one op, hot or archived; 404 naming the op if it
/// was never granted or the state forgot it.
#[utoipa::path(get, path = "/api/ops/{op}", tag = "reads", params(("op" = String, Path, description = "op id: op0, op1, ...")), 
    responses((status = 200, description = "the op, hot or archived", body = OpDto), (status = 503, description = "the controller core stopped", body = ErrorBody), (status = 404, description = "what the path names does not exist", body = ErrorBody)))]
async fn one_op(State(api): State<Api>, Path(id): Path<String>) -> Response {
    let Some(op) = op_id(&id) else {
        return no_such_op(&id);
    };
    let Some(snap) = api.core.snapshot().await else {
        return ApiError::Unavailable.into_response();
    };
    match super::view::one_op(&snap.state, op) {
        Some(mut dto) => {
            add_sources(&api, &snap.state, &mut dto);
            Json(dto).into_response()
        }
        None => ApiError::NotFound(super::view::op_missing(&snap.state, op)).into_response(),
    }
}

/// Fills `dto.sources` from what the op's agent reported of its chunk
/// sources (kept beside the state, in memory: [`super::mirrors::SourcesBook`]).
fn add_sources(api: &Api, s: &model::controller::ControllerState, dto: &mut OpDto) {
    let Some(op) = op_id(&dto.id) else { return };
    let node = s
        .op(op)
        .map(|o| o.node)
        .or_else(|| s.archive.get(&op).map(|a| a.node));
    let Some(node) = node else { return };
    dto.sources = api
        .mirrors
        .sources
        .of(op, node)
        .into_iter()
        .map(|t| super::view::SourceDto {
            source: t.source,
            chunks: t.chunks,
            bytes: t.bytes,
            failures: t.failures,
        })
        .collect();
}
