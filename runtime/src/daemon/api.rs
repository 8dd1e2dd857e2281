//! The operator HTTP API (axum). Reads are open on the API's address
//! (loopback by default); every write needs the operator token as
//! `Authorization: Bearer`, and a write without it changes nothing.

use super::bundles::BundleDir;
use super::config::ControllerConfig;
use super::core::CoreHandle;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use ed25519_dalek::VerifyingKey;
use model::controller::{Input, Resolution};
use model::{Digest, NodeId, OpId, Plan, RolloutId};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Upper bound on an uploaded bundle.
pub const UPLOAD_BYTES_MAX: usize = protocol::bundle::BUNDLE_BYTES_MAX as usize;

// An upload body is one bundle file: the limit is the bundle's, and it fits
// in memory on every target the daemon builds for.
const _: () = assert!(protocol::bundle::BUNDLE_BYTES_MAX <= usize::MAX as u64);
const _: () = assert!(UPLOAD_BYTES_MAX as u64 == protocol::bundle::BUNDLE_BYTES_MAX);
/// Upper bound on events returned by one page of `/api/events`.
pub const EVENTS_PAGE_MAX: usize = 1_000;

/// Shared API state.
#[derive(Clone)]
pub struct Api {
    /// The configuration (node names).
    pub cfg: Arc<ControllerConfig>,
    /// The core.
    pub core: CoreHandle,
    /// The operator token.
    pub token: Arc<String>,
    /// Accepted bundles.
    pub bundles: Arc<BundleDir>,
    /// The bundle signing key.
    pub key: Arc<VerifyingKey>,
}

/// The router.
pub fn router(api: Api) -> Router {
    Router::new()
        .route("/", get(dashboard))
        .route("/metrics", get(metrics))
        .route("/api/status", get(status))
        .route("/api/events", get(events))
        .route("/api/bundles", post(upload_bundle))
        .route("/api/rollouts", get(list_rollouts).post(start_rollout))
        .route("/api/rollouts/{id}", get(one_rollout))
        .route("/api/nodes", get(list_nodes).post(enroll_node))
        .route("/api/nodes/{name}/labels", post(label_node))
        .route("/api/nodes/{name}/retire", post(retire_node))
        .route("/api/rollouts/{id}/pause", post(pause))
        .route("/api/rollouts/{id}/resume", post(resume))
        .route("/api/rollouts/{id}/approve", post(approve))
        .route("/api/rollouts/{id}/proof", get(rollout_proof))
        .route("/api/nodes/{name}/proof", get(node_proof))
        .route("/api/nodes/{name}/probe", post(observe_node))
        .route("/api/nodes/{name}/observe", post(observe_node))
        .route("/api/nodes/{name}/release", post(release_node))
        .route("/api/nodes/{name}/revoke-cert", post(revoke_cert))
        .route("/api/unresolved", get(unresolved))
        .route("/api/ops", get(list_ops))
        .route("/api/ops/{op}", get(one_op))
        .route("/api/ops/{op}/resolve", post(resolve_op))
        .route("/api/ops/{op}/claim", post(claim_op))
        .route("/api/ops/{op}/rollback", post(roll_back_op))
        .route("/api/openapi.json", get(openapi))
        .layer(axum::extract::DefaultBodyLimit::max(UPLOAD_BYTES_MAX))
        .with_state(api)
}

fn error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(serde_json::json!({ "error": message.into() }))).into_response()
}

/// `None` when the request carries the operator token, else the 401 answer.
fn unauthorized(api: &Api, headers: &HeaderMap) -> Option<Response> {
    let presented = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    // Compare without an early exit so timing does not leak a prefix.
    let expected = api.token.as_bytes();
    let same = presented.len() == expected.len()
        && presented
            .bytes()
            .zip(expected.iter())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0;
    (!same).then(|| {
        error(
            StatusCode::UNAUTHORIZED,
            "missing or wrong operator token (Authorization: Bearer)",
        )
    })
}

pub use super::view::{
    status_dto, NodeDto, ObservedDto, OpDto, Page, RolloutCounts, RolloutDto, StatusDto,
};

async fn status(State(api): State<Api>) -> Response {
    match api.core.snapshot().await {
        Some(snap) => Json(status_dto(&snap)).into_response(),
        None => error(StatusCode::SERVICE_UNAVAILABLE, "controller core stopped"),
    }
}

#[derive(Deserialize)]
struct EventsQuery {
    from: Option<u64>,
    limit: Option<usize>,
}

/// One event in the feed.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct EventDto {
    /// Log sequence.
    pub sequence: u64,
    /// Domain words.
    pub text: String,
    /// The event itself.
    pub event: model::controller::Event,
}

async fn events(State(api): State<Api>, Query(q): Query<EventsQuery>) -> Response {
    let limit = q.limit.unwrap_or(EVENTS_PAGE_MAX).min(EVENTS_PAGE_MAX);
    let events = api.core.events(q.from.unwrap_or(0), limit).await;
    let dto: Vec<EventDto> = events
        .into_iter()
        .map(|(sequence, event)| EventDto {
            sequence,
            text: super::core::describe(&api.core.roster(), &event),
            event,
        })
        .collect();
    Json(dto).into_response()
}

async fn upload_bundle(State(api): State<Api>, headers: HeaderMap, body: Bytes) -> Response {
    if let Some(rejection) = unauthorized(&api, &headers) {
        return rejection;
    }
    let verified = match protocol::bundle::verify(&api.key, &body) {
        Ok(v) => v,
        Err(e) => return error(StatusCode::BAD_REQUEST, format!("bundle refused: {e}")),
    };
    if let Err(e) = api.bundles.store(verified.digest, &body) {
        return error(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("storing the bundle: {e}"),
        );
    }
    Json(serde_json::json!({
        "digest": verified.digest.to_hex(),
        "name": verified.manifest.name,
        "version": verified.manifest.version,
    }))
    .into_response()
}

/// `POST /api/rollouts`.
#[derive(Serialize, Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct StartRollout {
    /// Release digest (hex) of an uploaded bundle.
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
    pub select: Option<model::controller::Labels>,
    /// Slot budget.
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

async fn start_rollout(State(api): State<Api>, headers: HeaderMap, body: Bytes) -> Response {
    if let Some(rejection) = unauthorized(&api, &headers) {
        return rejection;
    }
    let (request, release) = match parse_start_rollout(&body) {
        Ok(parsed) => parsed,
        Err(why) => return bad_request(why),
    };
    if !api.bundles.path(release).exists() {
        return error(
            StatusCode::BAD_REQUEST,
            "field `release`: no such bundle uploaded",
        );
    }
    let (canary, followers) = match resolve_nodes(&api, &request) {
        Ok(nodes) => nodes,
        Err(why) => return bad_request(why),
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
    let plan = Plan {
        release,
        canary,
        followers,
        slots_max: request.slots,
        approval_after_canary: request.approve_after_canary,
    };
    respond(&api, Input::StartStaged { plan, policy }).await
}

/// The plan's canary and followers. Named nodes must be enrolled; a
/// `select` is resolved here, once, on the roster as of now: the enrolled,
/// not retired nodes whose labels hold every pair, in enrollment order,
/// the canary excluded (the first selected node when no canary is named).
/// The resolved list goes into the plan, so `RolloutStarted` records it
/// and a replay never resolves again.
fn resolve_nodes(api: &Api, request: &StartRollout) -> Result<(NodeId, Vec<NodeId>), String> {
    let roster = api.core.roster();
    let named = |field: &str, name: &str| {
        roster
            .id(name)
            .ok_or_else(|| format!("field `{field}`: no node {name} is enrolled"))
    };
    let canary = match &request.canary {
        Some(name) => Some(named("canary", name)?),
        None => None,
    };
    let Some(selector) = &request.select else {
        // parse_start_rollout refused a request with neither.
        let canary = canary.ok_or("field `canary`: name a canary, or give `select` to pick one")?;
        let followers = request
            .followers
            .iter()
            .map(|f| named("followers", f))
            .collect::<Result<_, _>>()?;
        return Ok((canary, followers));
    };
    if !request.followers.is_empty() {
        return Err("field `select`: give either `followers` or `select`, not both".into());
    }
    let mut selected = roster.select(selector).filter(|n| Some(*n) != canary);
    let Some(canary) = canary.or_else(|| selected.next()) else {
        return Err(empty_selection(selector));
    };
    let followers: Vec<NodeId> = selected.collect();
    if followers.is_empty() && request.canary.is_some() {
        return Err(empty_selection(selector));
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

fn agentless_digest(text: &str) -> Option<Digest> {
    let bytes = ::hex::decode(text.trim()).ok()?;
    Some(Digest(bytes.try_into().ok()?))
}

fn rollout_id(text: &str) -> Option<RolloutId> {
    text.strip_prefix('r')?.parse().ok().map(RolloutId)
}

async fn respond(api: &Api, input: Input) -> Response {
    use super::core::InputError;
    match api.core.submit(input).await {
        Ok(events) => {
            let roster = api.core.roster();
            Json(serde_json::json!({
                "events": events.iter().map(|(s, e)| serde_json::json!({
                    "sequence": s,
                    "text": super::core::describe(&roster, e),
                })).collect::<Vec<_>>(),
            }))
            .into_response()
        }
        Err(InputError::Refused(refusal)) => error(refusal_status(&refusal), refusal.to_string()),
        Err(stopped @ InputError::Stopped) => {
            error(StatusCode::SERVICE_UNAVAILABLE, stopped.to_string())
        }
    }
}

/// The HTTP status of a refusal, by its type: 404 for what does not
/// exist, 400 for input over a limit, 409 for what the state forbids now.
fn refusal_status(refusal: &model::controller::Refusal) -> StatusCode {
    use model::controller::Refusal;
    match refusal {
        Refusal::UnknownRollout(_) | Refusal::UnknownOp(_) | Refusal::UnknownNode(_) => {
            StatusCode::NOT_FOUND
        }
        Refusal::RosterLimit(_) => StatusCode::BAD_REQUEST,
        _ => StatusCode::CONFLICT,
    }
}

async fn rollout_command(
    api: Api,
    headers: HeaderMap,
    id: String,
    make: fn(RolloutId) -> Input,
) -> Response {
    if let Some(rejection) = unauthorized(&api, &headers) {
        return rejection;
    }
    let Some(rollout) = rollout_id(&id) else {
        return error(
            StatusCode::NOT_FOUND,
            format!("no rollout {id} (ids look like r0)"),
        );
    };
    respond(&api, make(rollout)).await
}

async fn pause(State(api): State<Api>, headers: HeaderMap, Path(id): Path<String>) -> Response {
    rollout_command(api, headers, id, |rollout| Input::Pause { rollout }).await
}

async fn resume(State(api): State<Api>, headers: HeaderMap, Path(id): Path<String>) -> Response {
    rollout_command(api, headers, id, |rollout| Input::Resume { rollout }).await
}

async fn approve(State(api): State<Api>, headers: HeaderMap, Path(id): Path<String>) -> Response {
    rollout_command(api, headers, id, |rollout| Input::Approve { rollout }).await
}

/// `?cached=true` on a proof: judge what was recorded instead of reading
/// back now.
#[derive(Deserialize, Default)]
struct ProofQuery {
    cached: Option<bool>,
}

async fn node_proof(
    State(api): State<Api>,
    Path(name): Path<String>,
    Query(q): Query<ProofQuery>,
) -> Response {
    let Some(node) = api.core.roster().id(&name) else {
        return error(
            StatusCode::NOT_FOUND,
            format!("no node {name} in the fleet"),
        );
    };
    let Some(snap) = api.core.snapshot().await else {
        return error(StatusCode::SERVICE_UNAVAILABLE, "controller core stopped");
    };
    // Nothing intended yet: there is nothing to read back against.
    if q.cached == Some(true) || snap.state.intended_rollout(node).is_none() {
        return Json(crate::proof::recorded_node_proof(&snap.state, node, &name)).into_response();
    }
    match super::verify::gather(&api, node).await {
        Ok(g) => Json(crate::proof::live_node_proof(
            &snap.state,
            node,
            &name,
            &g.fresh,
        ))
        .into_response(),
        Err(rejection) => rejection,
    }
}

async fn rollout_proof(
    State(api): State<Api>,
    Path(id): Path<String>,
    Query(q): Query<ProofQuery>,
) -> Response {
    let Some(snap) = api.core.snapshot().await else {
        return error(StatusCode::SERVICE_UNAVAILABLE, "controller core stopped");
    };
    let Some(r) = rollout_id(&id).and_then(|r| snap.state.rollout(r)) else {
        return error(StatusCode::NOT_FOUND, format!("no rollout {id}"));
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
    match crate::proof::rollout_proof(&snap.state, r.id, &names, &|n| fresh.get(&n).cloned()) {
        Some(proof) => Json(proof).into_response(),
        None => error(StatusCode::NOT_FOUND, format!("no rollout {id}")),
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

/// `POST /api/nodes/{name}/observe` and `POST /api/nodes/{name}/probe`:
/// what a fresh readback of the node saw, judged, and recorded.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct ObserveDto {
    /// The node.
    pub node: String,
    /// The release the route was judged as (hex).
    pub release: String,
    /// The probe spec of that release.
    pub expect: protocol::bundle::ProbeSpec,
    /// What answered on the public route (`None`: nothing did).
    pub answer: Option<crate::client::RouteAnswer>,
    /// The controller's look at the route, judged by that spec.
    pub observation: model::RouteObservation,
    /// The route against the release it should answer as: the same
    /// function the proof's health probe and identity checks use.
    pub judgement: crate::proof::RouteJudgement,
    /// The agent's readback, or why there is none.
    pub readback: Result<model::RouteObservation, String>,
    /// The live proof judged on this readback.
    pub proof: crate::proof::NodeProof,
    /// Events recorded (the node's observation, or evidence for its live op
    /// and whatever it settled), in domain words.
    pub recorded: Vec<String>,
    /// Why nothing was recorded, if nothing was (observed too soon again).
    pub not_recorded: Option<String>,
}

async fn observe_node(
    State(api): State<Api>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Response {
    // Recording an observation is a write.
    if let Some(rejection) = unauthorized(&api, &headers) {
        return rejection;
    }
    let Some(node) = api.core.roster().id(&name) else {
        return error(
            StatusCode::NOT_FOUND,
            format!("no node {name} in the fleet"),
        );
    };
    let g = match super::verify::gather(&api, node).await {
        Ok(g) => g,
        Err(rejection) => return rejection,
    };
    let (recorded, not_recorded) = match super::verify::record(&api, node, &g.fresh).await {
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
        Err(e) => return error(StatusCode::CONFLICT, e.to_string()),
    };
    let Some(snap) = api.core.snapshot().await else {
        return error(StatusCode::SERVICE_UNAVAILABLE, "controller core stopped");
    };
    Json(ObserveDto {
        judgement: crate::proof::judge_route(&g.probed.observation, g.probed.release),
        proof: crate::proof::live_node_proof(&snap.state, node, &name, &g.fresh),
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
    error(
        StatusCode::NOT_FOUND,
        format!("no node {name} in the fleet"),
    )
}

/// `POST /api/nodes`: enroll a node, `{"name", "labels"?, "public"}`. The
/// public route must be an address the controller can probe.
async fn enroll_node(State(api): State<Api>, headers: HeaderMap, body: Bytes) -> Response {
    if let Some(rejection) = unauthorized(&api, &headers) {
        return rejection;
    }
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
    if let Err(e) = public.parse::<std::net::SocketAddr>() {
        return bad_request(format!(
            "field `public`: {public:?} is not an address such as 10.0.0.5:8080: {e}"
        ));
    }
    let input = Input::EnrollNode {
        name: name.to_string(),
        labels,
        public: public.to_string(),
    };
    respond(&api, input).await
}

/// `POST /api/nodes/{name}/labels`: `{"set": {k: v}, "remove": [k]}`.
async fn label_node(
    State(api): State<Api>,
    headers: HeaderMap,
    Path(name): Path<String>,
    body: Bytes,
) -> Response {
    if let Some(rejection) = unauthorized(&api, &headers) {
        return rejection;
    }
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
    respond(&api, Input::LabelNode { name, set, remove }).await
}

/// `POST /api/nodes/{name}/retire`: refused (409) while the node holds a
/// live op.
async fn retire_node(
    State(api): State<Api>,
    headers: HeaderMap,
    Path(name): Path<String>,
    body: Bytes,
) -> Response {
    if let Some(rejection) = unauthorized(&api, &headers) {
        return rejection;
    }
    if !body.is_empty() {
        if let Err(why) = json_object(&body, &[]) {
            return bad_request(why);
        }
    }
    respond(&api, Input::RetireNode { name }).await
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
async fn release_node(
    State(api): State<Api>,
    headers: HeaderMap,
    Path(name): Path<String>,
    body: Bytes,
) -> Response {
    if let Some(rejection) = unauthorized(&api, &headers) {
        return rejection;
    }
    if !body.is_empty() {
        if let Err(why) = json_object(&body, &[]) {
            return bad_request(why);
        }
    }
    let node = api.core.roster().id(&name);
    match node {
        Some(node) => respond(&api, Input::ReleaseNode { node }).await,
        None => no_such_node(&name),
    }
}

/// `POST /api/nodes/{name}/revoke-cert` with `{"fingerprint": HEX}` (the
/// SHA-256 of the certificate's DER), or an empty body for the certificate
/// the node presented on its latest connection since the controller
/// started.
async fn revoke_cert(
    State(api): State<Api>,
    headers: HeaderMap,
    Path(name): Path<String>,
    body: Bytes,
) -> Response {
    if let Some(rejection) = unauthorized(&api, &headers) {
        return rejection;
    }
    let Some(node) = api.core.roster().id(&name) else {
        return no_such_node(&name);
    };
    let given = if body.is_empty() {
        None
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
                return error(StatusCode::SERVICE_UNAVAILABLE, "controller core stopped");
            };
            match snap.presented.get(&node) {
                Some(f) => Digest(*f),
                None => {
                    return error(
                        StatusCode::CONFLICT,
                        format!("{name} has presented no certificate since the controller started: name the certificate (fleetweft node revoke-cert {name} --cert FILE)"),
                    )
                }
            }
        }
    };
    respond(&api, Input::RevokeCert { node, fingerprint }).await
}

async fn unresolved(State(api): State<Api>) -> Response {
    let Some(snap) = api.core.snapshot().await else {
        return error(StatusCode::SERVICE_UNAVAILABLE, "controller core stopped");
    };
    let names = |n: NodeId| snap.state.roster.display_name(n);
    Json(crate::proof::unresolved(
        &snap.state,
        &names,
        &snap.log_index,
    ))
    .into_response()
}

async fn dashboard(State(api): State<Api>) -> Response {
    let Some(snap) = api.core.snapshot().await else {
        return error(StatusCode::SERVICE_UNAVAILABLE, "controller core stopped");
    };
    let from = snap.last_sequence.map_or(0, |last| {
        (last + 1).saturating_sub(super::dashboard::DASHBOARD_EVENTS as u64)
    });
    let events = api
        .core
        .events(from, super::dashboard::DASHBOARD_EVENTS)
        .await
        .into_iter()
        .map(|(sequence, event)| EventDto {
            sequence,
            text: super::core::describe(&api.core.roster(), &event),
            event,
        })
        .collect();
    let data = super::dashboard::data(&snap, events);
    axum::response::Html(super::dashboard::render(&data)).into_response()
}

async fn metrics(State(api): State<Api>) -> Response {
    let Some(snap) = api.core.snapshot().await else {
        return error(StatusCode::SERVICE_UNAVAILABLE, "controller core stopped");
    };
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        super::dashboard::metrics(&snap, std::time::SystemTime::now()),
    )
        .into_response()
}

/// What one probe of a node's public route by the controller saw.
pub struct Probed {
    /// The release judged against.
    pub release: Digest,
    /// Its probe spec.
    pub spec: protocol::bundle::ProbeSpec,
    /// What answered, if anything.
    pub answer: Option<crate::client::RouteAnswer>,
    /// The judged observation.
    pub observation: model::RouteObservation,
}

/// Probe `node`'s public route now and judge the answer by the probe spec of
/// the release it should be judged as. Records nothing; the error is the
/// HTTP answer to give.
///
/// Which release: while the node has a live op, either of the op's two
/// releases can legitimately be serving (the new one once switched, the
/// baseline before the switch, after an abort and after a restore), so the
/// answer is judged by the spec of whichever of the two the route
/// identifies as; an answer identifying as neither (or not at all) is
/// judged by the one the op's phase expects (the baseline while granted,
/// aborted or restoring; the new release otherwise). Without a live op:
/// what was last proven there, else the latest rollout that includes the
/// node. Judging a restored baseline by the new release's spec would make
/// a rollback impossible to prove from the controller.
///
/// The controller sees only the public route, never the process behind it:
/// the observation's `process_healthy` says only whether anything answered,
/// and its process uptime and restart count are `None` ("not observed").
/// The controller does not copy the agent's last reported numbers into its
/// own observation: they would be stale and the log would claim the
/// controller saw them. Proofs show the agent's latest reported numbers
/// alongside (see `crate::proof`).
pub async fn probe_route(api: &Api, node: NodeId) -> Result<Probed, Response> {
    let Some(snap) = api.core.snapshot().await else {
        return Err(error(
            StatusCode::SERVICE_UNAVAILABLE,
            "controller core stopped",
        ));
    };
    let name = snap.state.roster.display_name(node);
    let Some(entry) = snap.state.roster.get(node) else {
        return Err(error(
            StatusCode::NOT_FOUND,
            format!("no node {name} is enrolled"),
        ));
    };
    // The roster keeps the route as text; enrollment checked it parses.
    let public: std::net::SocketAddr = entry.public.parse().map_err(|e| {
        error(
            StatusCode::CONFLICT,
            format!(
                "{name}'s public route {:?} is not an address: {e}",
                entry.public
            ),
        )
    })?;
    let (expected, other) = snap.state.releases_to_judge(node);
    let Some(release) = expected else {
        return Err(error(
            StatusCode::CONFLICT,
            format!("no release is intended for {name} yet"),
        ));
    };
    let spec = probe_spec(api, release).map_err(|e| error(StatusCode::CONFLICT, e))?;
    let mut answer = crate::client::get_route(public, &spec.path).await;
    let mut judged = (release, spec);
    // The route says it serves the op's other release: judge it by that
    // release's own spec (asking again if that spec probes another path).
    let identity = answer
        .as_ref()
        .and_then(|a| a.identity.as_deref())
        .and_then(agentless_digest);
    if let Some(alt) = other.filter(|alt| identity == Some(*alt)) {
        let alt_spec = probe_spec(api, alt).map_err(|e| error(StatusCode::CONFLICT, e))?;
        if alt_spec.path != judged.1.path {
            answer = crate::client::get_route(public, &alt_spec.path).await;
        }
        judged = (alt, alt_spec);
    }
    let (release, spec) = judged;
    let observation = match &answer {
        None => spec.judge(None, "", None, false),
        Some(a) => {
            let identity = a.identity.as_deref().and_then(agentless_digest);
            // The controller cannot see the process; an answer means
            // something runs (recorded for operators, never judged on).
            // Uptime and restarts stay unobserved (`judge` leaves them None).
            spec.judge(Some(a.status), &a.body, identity, true)
        }
    };
    Ok(Probed {
        release,
        spec,
        answer,
        observation,
    })
}

/// The probe spec of `release`, read from its stored, verified bundle; the
/// error says why it cannot be had (an HTTP 409 for the caller).
fn probe_spec(api: &Api, release: Digest) -> Result<protocol::bundle::ProbeSpec, String> {
    std::fs::read(api.bundles.path(release))
        .map_err(|e| e.to_string())
        .and_then(|bytes| protocol::bundle::verify(&api.key, &bytes).map_err(|e| e.to_string()))
        .map(|verified| verified.manifest.probe)
        .map_err(|e| {
            format!(
                "bundle {} unavailable to judge the probe: {e}",
                release.to_hex()
            )
        })
}

fn op_id(text: &str) -> Option<OpId> {
    text.strip_prefix("op")?.parse().ok().map(OpId)
}

fn bad_request(message: impl Into<String>) -> Response {
    error(StatusCode::BAD_REQUEST, message)
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
    let process_uptime_ms = optional_count(map, "process_uptime_ms", u64::MAX)?;
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
    error(
        StatusCode::NOT_FOUND,
        format!("no op {id} (ids look like op0)"),
    )
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
    /// Who takes the op.
    pub owner: String,
    /// When they will have looked at it.
    pub review_by: String,
}

/// Parses a claim body: `owner` and `review_by`, both strings. Public so
/// the `api_json` fuzz target runs the handler's own parsing.
pub fn parse_claim(body: &[u8]) -> Result<ClaimBody, String> {
    let map = json_object(body, &["owner", "review_by"])?;
    let text = |field: &str| match map.get(field).and_then(|v| v.as_str()) {
        Some(t) => Ok(t.trim().to_string()),
        None => Err(format!("field `{field}`: expected a string")),
    };
    Ok(ClaimBody {
        owner: text("owner")?,
        review_by: text("review_by")?,
    })
}

/// `POST /api/ops/{op}/resolve`: settle an op by hand with an observation,
/// typed by the operator or taken by a fresh controller probe.
async fn resolve_op(
    State(api): State<Api>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    if let Some(rejection) = unauthorized(&api, &headers) {
        return rejection;
    }
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
        return error(StatusCode::SERVICE_UNAVAILABLE, "controller core stopped");
    };
    let Some(node) = snap.state.op(op).map(|o| o.node) else {
        return error(StatusCode::NOT_FOUND, format!("unknown op {op}"));
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
async fn roll_back_op(
    State(api): State<Api>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    if let Some(rejection) = unauthorized(&api, &headers) {
        return rejection;
    }
    if let Err(why) = parse_roll_back(&body) {
        return bad_request(why);
    }
    let Some(op) = op_id(&id) else {
        return no_such_op(&id);
    };
    respond(&api, Input::RollBack { op }).await
}

/// `POST /api/ops/{op}/claim`: an operator takes ownership of an unsettled op.
async fn claim_op(
    State(api): State<Api>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    if let Some(rejection) = unauthorized(&api, &headers) {
        return rejection;
    }
    let ClaimBody { owner, review_by } = match parse_claim(&body) {
        Ok(parsed) => parsed,
        Err(why) => return bad_request(why),
    };
    let Some(op) = op_id(&id) else {
        return no_such_op(&id);
    };
    respond(
        &api,
        Input::Claim {
            op,
            owner,
            review_by,
        },
    )
    .await
}

async fn openapi() -> Response {
    Json(super::openapi::document()).into_response()
}

async fn list_rollouts(State(api): State<Api>) -> Response {
    match api.core.snapshot().await {
        Some(snap) => Json(super::view::rollout_dtos(&snap.state)).into_response(),
        None => error(StatusCode::SERVICE_UNAVAILABLE, "controller core stopped"),
    }
}

/// `GET /api/rollouts/{id}`: the rollout with its followers and its counts
/// per op state (from the rollout's indexes).
async fn one_rollout(State(api): State<Api>, Path(id): Path<String>) -> Response {
    let Some(snap) = api.core.snapshot().await else {
        return error(StatusCode::SERVICE_UNAVAILABLE, "controller core stopped");
    };
    match rollout_id(&id).and_then(|r| snap.state.rollout(r)) {
        Some(r) => Json(super::view::rollout_dto(&snap.state, r, true)).into_response(),
        None => error(StatusCode::NOT_FOUND, format!("no rollout {id}")),
    }
}

/// `GET /api/nodes?label=k=v&state=S&limit=N&after=NAME`: a page of nodes
/// in enrollment order (see [`super::view::node_page`] for the scan bound).
async fn list_nodes(
    State(api): State<Api>,
    Query(pairs): Query<Vec<(String, String)>>,
) -> Response {
    let Some(snap) = api.core.snapshot().await else {
        return error(StatusCode::SERVICE_UNAVAILABLE, "controller core stopped");
    };
    match super::view::parse_node_query(&snap.state, &pairs) {
        Ok(q) => Json(super::view::node_page(&snap, &q)).into_response(),
        Err(why) => bad_request(why),
    }
}

/// `GET /api/ops?rollout=ID&state=S&limit=N&after=OP`: a page of ops, hot
/// and archived, in op order (see [`super::view::op_page`]).
async fn list_ops(State(api): State<Api>, Query(pairs): Query<Vec<(String, String)>>) -> Response {
    let Some(snap) = api.core.snapshot().await else {
        return error(StatusCode::SERVICE_UNAVAILABLE, "controller core stopped");
    };
    match super::view::parse_op_query(&snap.state, &pairs) {
        Ok(q) => Json(super::view::op_page(&snap.state, &q)).into_response(),
        Err(why) => bad_request(why),
    }
}

/// `GET /api/ops/{op}`: one op, hot or archived; 404 naming the op if it
/// was never granted.
async fn one_op(State(api): State<Api>, Path(id): Path<String>) -> Response {
    let Some(op) = op_id(&id) else {
        return no_such_op(&id);
    };
    let Some(snap) = api.core.snapshot().await else {
        return error(StatusCode::SERVICE_UNAVAILABLE, "controller core stopped");
    };
    match super::view::one_op(&snap.state, op) {
        Some(dto) => Json(dto).into_response(),
        None => error(StatusCode::NOT_FOUND, format!("no op {op}: never granted")),
    }
}
