//! `GET /api/openapi.json`: the API described as an OpenAPI 3.0 document,
//! written by hand. `runtime/tests/openapi.rs` checks it against the router:
//! every documented route answers, every routed path is documented.

use serde_json::{json, Value};

/// Every (path, method) the router serves, in OpenAPI path syntax. The
/// document lists exactly these.
pub const ROUTES: &[(&str, &str)] = &[
    ("/", "get"),
    ("/metrics", "get"),
    ("/api/status", "get"),
    ("/api/events", "get"),
    ("/api/bundles", "post"),
    ("/api/rollouts", "get"),
    ("/api/rollouts", "post"),
    ("/api/rollouts/{id}", "get"),
    ("/api/nodes", "get"),
    ("/api/nodes", "post"),
    ("/api/nodes/{name}/labels", "post"),
    ("/api/nodes/{name}/retire", "post"),
    ("/api/rollouts/{id}/pause", "post"),
    ("/api/rollouts/{id}/resume", "post"),
    ("/api/rollouts/{id}/approve", "post"),
    ("/api/rollouts/{id}/proof", "get"),
    ("/api/nodes/{name}/proof", "get"),
    ("/api/nodes/{name}/probe", "post"),
    ("/api/nodes/{name}/observe", "post"),
    ("/api/nodes/{name}/release", "post"),
    ("/api/nodes/{name}/revoke-cert", "post"),
    ("/api/unresolved", "get"),
    ("/api/ops", "get"),
    ("/api/ops/{op}", "get"),
    ("/api/ops/{op}/resolve", "post"),
    ("/api/ops/{op}/claim", "post"),
    ("/api/ops/{op}/rollback", "post"),
    ("/api/openapi.json", "get"),
];

/// The path parameters plus the optional `cached` query flag of a proof.
fn with_cached(mut params: Vec<Value>) -> Vec<Value> {
    params.push(
        json!({ "name": "cached", "in": "query", "required": false, "schema": { "type": "boolean" },
        "description": "judge the last recorded evidence instead of reading back now" }),
    );
    params
}

fn json_answer(description: &str) -> Value {
    json!({
        "description": description,
        "content": { "application/json": { "schema": { "type": "object" } } },
    })
}

fn error_answer(description: &str) -> Value {
    json!({
        "description": description,
        "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Error" } } },
    })
}

fn path_param(name: &str, description: &str) -> Value {
    json!({
        "name": name, "in": "path", "required": true,
        "description": description, "schema": { "type": "string" },
    })
}

/// A write: Bearer token, 401 without it, 409 when the controller refuses.
fn write(summary: &str, params: Vec<Value>, body: Option<Value>, extra_404: bool) -> Value {
    let mut responses = json!({
        "200": json_answer("accepted; the events recorded, in domain words"),
        "401": error_answer("missing or wrong operator token; nothing recorded"),
        "409": error_answer("the controller refused; nothing recorded"),
    });
    if body.is_some() {
        responses["400"] = error_answer("malformed request; the message names the field");
    }
    if extra_404 {
        responses["404"] = error_answer("no such id");
    }
    let mut op = json!({
        "summary": summary,
        "security": [{ "bearer": [] }],
        "parameters": params,
        "responses": responses,
    });
    if let Some(b) = body {
        op["requestBody"] = json!({ "required": true, "content": b });
    }
    op
}

fn read(summary: &str, params: Vec<Value>, ok: Value, extra_404: bool) -> Value {
    let mut responses = json!({ "200": ok });
    if extra_404 {
        responses["404"] = error_answer("no such id");
    }
    json!({ "summary": summary, "parameters": params, "responses": responses })
}

/// A paged read: 200 with a page, 400 naming a bad parameter.
fn paged(summary: &str, params: Vec<Value>, items: &str) -> Value {
    let mut op = read(
        summary,
        params,
        json!({
            "description": format!("a page of {items}"),
            "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Page" } } },
        }),
        false,
    );
    op["responses"]["400"] =
        error_answer("a bad query parameter; the message names it (`parameter `limit`: ...`)");
    op
}

/// The `limit` and `after` parameters of every paged read.
fn page_params(after: &str) -> Vec<Value> {
    use super::view::{PAGE_LIMIT_DEFAULT, PAGE_LIMIT_MAX};
    vec![
        json!({ "name": "limit", "in": "query", "required": false,
                "schema": { "type": "integer", "minimum": 1, "maximum": PAGE_LIMIT_MAX, "default": PAGE_LIMIT_DEFAULT },
                "description": format!("items in the page (default {PAGE_LIMIT_DEFAULT}, at most {PAGE_LIMIT_MAX}; more is a 400)") }),
        json!({ "name": "after", "in": "query", "required": false, "schema": { "type": "string" },
                "description": format!("the cursor: the `next` of the previous page ({after})") }),
    ]
}

fn schema_body(schema: Value) -> Value {
    json!({ "application/json": { "schema": schema } })
}

/// The OpenAPI document.
pub fn document() -> Value {
    let rollout = || vec![path_param("id", "rollout id: r0, r1, ...")];
    let node = || vec![path_param("name", "an enrolled node's name")];
    let labels = || {
        json!({
            "type": "object",
            "maxProperties": model::controller::roster::LABELS_PER_NODE_MAX,
            "additionalProperties": { "type": "string", "pattern": "^[a-z0-9._-]{1,63}$" },
            "description": "label key -> value; keys and values are 1-63 of a-z, 0-9, '.', '_', '-'",
        })
    };
    let op = || vec![path_param("op", "op id: op0, op1, ...")];
    let observation = json!({
        "type": "object",
        "required": ["verdict"],
        "additionalProperties": false,
        "properties": {
            "verdict": { "type": "string", "enum": ["pass", "wrong-answer", "unreachable"] },
            "identity": { "type": "string", "nullable": true, "pattern": "^[0-9a-f]{64}$",
                          "description": "the X-Fleetweft-Release the route answered with" },
            "process_healthy": { "type": "boolean", "default": false },
            "process_uptime_ms": { "type": "integer", "format": "int64", "minimum": 0, "nullable": true, "default": null,
                                   "description": "how long the app process had been up, in ms; null or absent: not observed (recorded, never judged on)" },
            "process_restarts": { "type": "integer", "format": "int64", "minimum": 0, "maximum": u32::MAX, "nullable": true, "default": null,
                                  "description": "how often the agent's supervisor had restarted the process; null or absent: not observed. Above the supervisor's bound the proof says restart_loop" },
        },
    });
    let resolution =
        json!({ "type": "string", "enum": ["confirm-new", "confirm-baseline", "abandon"] });
    json!({
        "openapi": "3.0.3",
        "info": {
            "title": "Fleetweft controller API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Reads are open on the API address; every write needs the operator token as Authorization: Bearer and changes nothing without it.",
        },
        "components": {
            "securitySchemes": { "bearer": { "type": "http", "scheme": "bearer" } },
            "schemas": {
                "Error": {
                    "type": "object", "required": ["error"],
                    "properties": { "error": { "type": "string" } },
                },
                "RouteObservation": observation,
                "Page": {
                    "type": "object", "required": ["items", "next"],
                    "description": format!("one page of a list. A filter with no index scans at most {} entries per page and may return fewer items than the limit (even none) with a `next`: follow `next` until it is null", super::view::PAGE_SCAN_MAX),
                    "properties": {
                        "items": { "type": "array", "items": { "type": "object" } },
                        "next": { "type": "string", "nullable": true, "description": "pass as `after` for the next page; null: the end of the list" },
                        "total": { "type": "integer", "description": "items matching in the whole list; only when an index knows it without a scan (no state or label filter)" },
                    },
                },
            },
        },
        "paths": {
            "/": { "get": read("the dashboard (HTML, refreshes every 2 s)", vec![],
                json!({ "description": "HTML page", "content": { "text/html": { "schema": { "type": "string" } } } }), false) },
            "/metrics": { "get": read("Prometheus metrics", vec![],
                json!({ "description": "text exposition format", "content": { "text/plain": { "schema": { "type": "string" } } } }), false) },
            "/api/status": { "get": read(&format!("a summary whose size does not grow with the fleet: generation, last_sequence, the active rollout and the latest {} rollouts with their counts, node counts (enrolled, connected, retired, quarantined), op counts (granted, archived, holding_slot, unknown, settled, passed, settled_not_passed, failed; from the rollouts' indexes), the unresolved count, the first {} UNKNOWN ops, and links to the paged lists", super::view::STATUS_ROLLOUTS_MAX, super::view::STATUS_UNKNOWN_OPS_MAX), vec![], json_answer("the summary"), false) },
            "/api/rollouts/{id}": { "get": read("one rollout: its followers in plan order and its counts per op state (plan_nodes, granted, followers_granted, occupied, unknown, settled, passed, settled_not_passed, failed, waves, current_wave), read from the rollout's indexes", vec![path_param("id", "a rollout id such as r0")], json_answer("the rollout"), true) },
            "/api/ops": { "get": paged("a page of ops, hot and archived, in op order. With rollout: the rollout's own op list, from the cursor (O(limit log n)). A state filter scans from the cursor within the page's scan budget", {
                let mut p = vec![
                    json!({ "name": "rollout", "in": "query", "required": false, "schema": { "type": "string" }, "description": "only this rollout's ops (r0, r1, ...); 400 for a rollout that does not exist" }),
                    json!({ "name": "state", "in": "query", "required": false, "schema": { "type": "string" },
                            "description": format!("only ops in this state: {}", super::view::OpFilter::words()) }),
                ];
                p.extend(page_params("an op id such as op41"));
                p
            }, "ops") },
            "/api/ops/{op}": { "get": read("one op, hot or archived (an archived op is shown from its summary, archived: true); 404 naming the op if it was never granted", op(), json_answer("the op"), true) },
            "/api/nodes": { "get": paged("a page of enrolled nodes in enrollment order (retired ones included, flagged). Without filters: O(limit log n). A label or state filter scans from the cursor within the page's scan budget (quarantined nodes are read from their own index)", {
                let mut p = vec![
                    json!({ "name": "label", "in": "query", "required": false, "schema": { "type": "string", "example": "region=eu" },
                            "description": format!("KEY=VALUE; repeat for more (all must hold), at most {}", super::view::LABEL_FILTERS_MAX) }),
                    json!({ "name": "state", "in": "query", "required": false, "schema": { "type": "string" },
                            "description": format!("only nodes in this state: {} (one state per node, in that order of precedence from retired down)", super::view::node_state_words()) }),
                ];
                p.extend(page_params("a node name"));
                p
            }, "nodes"),
                "post": write("enroll a node: it takes the next node id (enrollment order); its agent is accepted with any fleet-CA certificate for its name. 409 when the name is taken (names of retired nodes are never reused), 400 over a limit", vec![],
                Some(schema_body(json!({
                    "type": "object", "required": ["name", "public"], "additionalProperties": false,
                    "properties": {
                        "name": { "type": "string", "pattern": "^[a-z0-9-]{1,63}$" },
                        "labels": labels(),
                        "public": { "type": "string", "maxLength": model::controller::roster::PUBLIC_ROUTE_BYTES_MAX, "example": "10.0.0.5:8080",
                                    "description": "the node's public route (HOST:PORT), probed by the controller" },
                    },
                }))), false) },
            "/api/nodes/{name}/labels": { "post": write("set and drop labels of a node (drops first); the event records the whole new set. 404 for a node never enrolled, 409 for a retired one", node(),
                Some(schema_body(json!({
                    "type": "object", "additionalProperties": false,
                    "properties": {
                        "set": labels(),
                        "remove": { "type": "array", "items": { "type": "string" } },
                    },
                }))), true) },
            "/api/nodes/{name}/retire": { "post": write("retire a node: nothing more is granted to it and its agent is refused (its connections are closed). Refused (409) while the node holds a live op, or when already retired", node(), None, true) },
            "/api/events": { "get": read("a page of the event log", vec![
                json!({ "name": "from", "in": "query", "required": false, "schema": { "type": "integer", "minimum": 0 } }),
                json!({ "name": "limit", "in": "query", "required": false, "schema": { "type": "integer", "minimum": 0, "maximum": super::api::EVENTS_PAGE_MAX } }),
            ], json_answer("events with their sequence and domain words"), false) },
            "/api/bundles": { "post": write("upload a signed bundle", vec![],
                Some(json!({ "application/octet-stream": { "schema": { "type": "string", "format": "binary" } } })), false) },
            "/api/rollouts": { "get": read("every rollout with its counts (no follower lists; see /api/rollouts/{id})", vec![], json_answer("rollouts, oldest first"), false), "post": write("start a rollout (supersedes the active one)", vec![],
                Some(schema_body(json!({
                    "type": "object", "required": ["release", "slots"], "additionalProperties": false,
                    "description": "canary, select, or both; followers and select exclude each other",
                    "properties": {
                        "release": { "type": "string", "pattern": "^[0-9a-f]{64}$" },
                        "canary": { "type": "string", "nullable": true, "description": "the canary; with select and no canary, the first selected node" },
                        "followers": { "type": "array", "items": { "type": "string" } },
                        "select": { "allOf": [labels()], "nullable": true,
                                    "description": "the followers: every enrolled, not retired node whose labels hold all these pairs, in enrollment order, canary excluded; resolved once at start and recorded in the plan. 400 when it matches nothing" },
                        "slots": { "type": "integer", "minimum": 0, "maximum": 65535 },
                        "approve_after_canary": { "type": "boolean" },
                        "waves": { "type": "string", "description": "cumulative wave ends after the canary, counts or percentages of the followers, e.g. 1%,10%,50%,100%; wave k+1 is granted once every op of the waves before it settled" },
                        "approve_between_waves": { "type": "boolean" },
                        "max_failed": { "type": "string", "description": "N or P% of the followers: failed ops allowed before the rollout pauses itself and grants no more" },
                        "max_unknown": { "type": "string", "description": "N: pause once this many ops are UNKNOWN at once" },
                    },
                }))), false) },
            "/api/rollouts/{id}/pause": { "post": write("pause: no new grants, accounting continues", rollout(), None, true) },
            "/api/rollouts/{id}/resume": { "post": write("resume a paused rollout", rollout(), None, true) },
            "/api/rollouts/{id}/approve": { "post": write("pass the approval gate after the canary", rollout(), None, true) },
            "/api/rollouts/{id}/proof": { "get": read("the rollout's proof, every node read back now (controller probe + agent readback); records nothing", with_cached(rollout()), json_answer("the proof"), true) },
            "/api/nodes/{name}/proof": { "get": read("the node's proof, read back now (controller probe of the route + agent readback of the artifact and process); records nothing. cached=true judges the last recorded evidence instead, labelled mode=recorded", with_cached(node()), json_answer("the proof"), true) },
            "/api/nodes/{name}/probe": { "post": write("probe the node's public route and ask its agent for a readback now; record what was seen (evidence for a live op, else the node's observation, at most one per node per 10 s) and judge the route against the release it should serve", node(), None, true) },
            "/api/nodes/{name}/observe": { "post": write("read the node back now and record the observation (as probe); answers the live proof too", node(), None, true) },
            "/api/nodes/{name}/release": { "post": write("release a node quarantined after an identity conflict: its connections are closed and its agents reconnect. Refused (409) when the node is not quarantined", node(), None, true) },
            "/api/nodes/{name}/revoke-cert": { "post": write("revoke a node certificate (recorded; refused at every handshake from now on, across restarts; connections that presented it are closed). Without a body: the certificate the node presented on its latest connection since the controller started", node(),
                Some(schema_body(json!({
                    "type": "object", "additionalProperties": false,
                    "properties": {
                        "fingerprint": { "type": "string", "pattern": "^[0-9a-f]{64}$", "description": "SHA-256 of the certificate's DER" },
                    },
                }))), true) },
            "/api/unresolved": { "get": read("the handover report: every op holding a slot, every rollout waiting for an operator", vec![], json_answer("entries"), false) },
            "/api/ops/{op}/resolve": { "post": write("settle an op by hand with an observation (typed, or a fresh controller probe)", op(),
                Some(schema_body(json!({
                    "type": "object", "required": ["resolution"], "additionalProperties": false,
                    "description": "exactly one of observation and probe: true",
                    "properties": {
                        "observation": { "$ref": "#/components/schemas/RouteObservation" },
                        "probe": { "type": "boolean" },
                        "resolution": resolution,
                    },
                }))), true) },
            "/api/ops/{op}/claim": { "post": write("take ownership of an unsettled op (recorded in the log)", op(),
                Some(schema_body(json!({
                    "type": "object", "required": ["owner", "review_by"], "additionalProperties": false,
                    "properties": {
                        "owner": { "type": "string", "minLength": 1, "maxLength": model::controller::CLAIM_TEXT_MAX },
                        "review_by": { "type": "string", "maxLength": model::controller::CLAIM_TEXT_MAX, "example": "2026-12-01T10:00:00Z" },
                    },
                }))), true) },
            "/api/ops/{op}/rollback": { "post": write("order an op rolled back: its node puts the baseline back; it settles rolled-back only when a serving probe proves it. Refused (409) without a stored commit, without a baseline, or while already restoring. Pauses the rollout", op(), None, true) },
            "/api/openapi.json": { "get": read("this document", vec![], json_answer("OpenAPI 3.0"), false) },
        },
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_document_lists_exactly_the_routes() {
        let doc = super::document();
        let paths = doc["paths"].as_object().unwrap();
        let mut listed = Vec::new();
        for (path, methods) in paths {
            for method in methods.as_object().unwrap().keys() {
                listed.push((path.clone(), method.clone()));
            }
        }
        let mut expected: Vec<(String, String)> = super::ROUTES
            .iter()
            .map(|(p, m)| (p.to_string(), m.to_string()))
            .collect();
        listed.sort();
        expected.sort();
        assert_eq!(listed, expected);
    }
}
