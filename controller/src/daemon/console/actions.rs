//! Acting from the console's pages (issue #28 item 3): a rollout's page
//! offers approve, resume and pause, an op's page roll back, the three
//! resolutions and a claim, each only where the model would accept it now
//! (`rollout_actions`, `operator_actions`: the forms never restate a rule).
//! A form posts to `POST /rollouts/{id}/act` or `POST /ops/{op}/act` with
//! the session's CSRF token ([`super::session`]); the controller submits
//! the same input the API would, and answers with the page again (303) or,
//! when the model refuses, a page with the refusal in the model's own
//! words (409). A resolution from the page is always backed by a fresh
//! controller probe of the node's route, taken when the form is posted:
//! nothing on a page settles an op without the observation the rules
//! require, and a probe that does not show what the resolution claims is
//! refused by the model like any other.

use super::session::{checked, form_pairs, see_other, Current, PageForm};
use super::{escape, param, path_value, refusal, url_part, PagePath, Refused};
use crate::daemon::core::InputError;
use crate::daemon::state::{acting, Api};
use crate::daemon::view::{parse_op_id, parse_rollout_id, words};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use model::controller::{node_actions, operator_actions, rollout_actions, ControllerState};
use model::controller::{Actor, Input, Op, Rollout};
use std::fmt::Write;

/// Longest owner or review date a claim form takes (the API's claim takes
/// what the model bounds; the form says so before posting).
const CLAIM_TEXT_BYTES_MAX: usize = 128;

/// `POST /rollouts/{id}/act`'s form, as documented (parsed as pairs).
#[derive(utoipa::ToSchema)]
#[allow(dead_code)] // Declares the form for the document; never built.
struct RolloutActForm {
    /// The session's CSRF token, from the page's form.
    csrf: String,
    /// `approve`, `resume` or `pause`.
    action: String,
}

/// `POST /ops/{op}/act`'s form, as documented (parsed as pairs).
#[derive(utoipa::ToSchema)]
#[allow(dead_code)] // Declares the form for the document; never built.
struct OpActForm {
    /// The session's CSRF token, from the page's form.
    csrf: String,
    /// `rollback`, `confirm-new`, `confirm-baseline`, `abandon` or `claim`.
    action: String,
    /// A claim's review date.
    review_by: Option<String>,
}

/// How a page offers actions: to a logged-in session (with its CSRF
/// token), or a link to log in first.
#[derive(Clone, Debug)]
pub enum Acting {
    /// Not logged in: the page links to `/login?next=HERE`.
    Anonymous {
        /// The page's own path, to come back to.
        here: String,
    },
    /// Logged in: forms carry this token.
    Session {
        /// The session's CSRF token.
        csrf: String,
        /// Who is logged in, and the role the operators record now.
        operator: String,
    },
}

impl Acting {
    /// How the request behind `headers`, for the page at `here`, may act.
    pub fn of(api: &Api, headers: &HeaderMap, here: &str) -> Acting {
        match super::session::current(api, headers) {
            Some(Current { csrf, actor, .. }) => {
                let operator = match &actor {
                    Actor::Operator { name, .. } => {
                        let role = api.core.operators().get(name).map(|r| r.role);
                        match role {
                            Some(role) => format!("{name} ({})", words::role(role)),
                            None => name.clone(),
                        }
                    }
                    Actor::ControllerConfig => "controller.toml".to_string(),
                };
                Acting::Session { csrf, operator }
            }
            None => Acting::Anonymous {
                here: here.to_string(),
            },
        }
    }

    /// The forms' hidden CSRF field, or the login link saying what logging
    /// in would offer.
    fn form_or_login(&self, offers: &str) -> Result<String, String> {
        match self {
            Acting::Session { csrf, .. } => Ok(format!(
                "<input type=\"hidden\" name=\"csrf\" value=\"{}\">",
                escape(csrf)
            )),
            Acting::Anonymous { here } => Err(format!(
                "<p id=\"login-to-act\"><a href=\"/login?next={}\">Log in</a> to {}.</p>\n",
                escape(&url_part(here)),
                escape(offers)
            )),
        }
    }
}

/// A logged-in session's logout form, for the foot of a page.
fn logout_form(acting: &Acting) -> String {
    match acting {
        Acting::Session { csrf, operator } => format!(
            "<form method=\"post\" action=\"/logout\" class=\"logout\"><input type=\"hidden\" name=\"csrf\" value=\"{}\">\
             <span id=\"operator\">Logged in as {}</span> <button type=\"submit\">Log out</button></form>\n",
            escape(csrf),
            escape(operator)
        ),
        Acting::Anonymous { .. } => String::new(),
    }
}

/// The rollout page's actions: a button per action the model accepts now.
pub fn rollout_forms(s: &ControllerState, r: &Rollout, acting: &Acting) -> String {
    let offered = rollout_actions(s, r.id);
    let mut h = String::from("<h2>Actions</h2>\n");
    if offered.is_empty() {
        h.push_str("<p id=\"no-actions\">Nothing to approve, resume or pause now.</p>\n");
        return h;
    }
    let words: Vec<&str> = offered.iter().map(|a| words::rollout_action(*a)).collect();
    let hidden = match acting.form_or_login(&words.join(", ")) {
        Ok(hidden) => hidden,
        Err(login) => return h + &login,
    };
    let _ = write!(
        h,
        "<form method=\"post\" action=\"/rollouts/{}/act\" id=\"rollout-actions\">{hidden}",
        url_part(&r.id.to_string())
    );
    for word in words {
        let _ = write!(
            h,
            "<button type=\"submit\" name=\"action\" value=\"{word}\">{word}</button> "
        );
    }
    h.push_str("</form>\n");
    h.push_str(&logout_form(acting));
    h
}

/// The op page's actions: roll back and each resolution the model accepts
/// now (a resolution is backed by a probe taken when it is posted), and a
/// claim while the op holds its slot.
pub fn op_forms(s: &ControllerState, op: &Op, acting: &Acting) -> String {
    let offered = operator_actions(s, op.id);
    let mut h = String::from("<h2>Actions</h2>\n");
    if offered.is_empty() && !op.occupies_slot() {
        h.push_str("<p id=\"no-actions\">Nothing to do: this op is settled.</p>\n");
        return h;
    }
    let words: Vec<&str> = offered.iter().map(|a| words::op_action(*a)).collect();
    let offers = if words.is_empty() {
        "claim it".to_string()
    } else {
        format!("{} or claim it", words.join(", "))
    };
    let hidden = match acting.form_or_login(&offers) {
        Ok(hidden) => hidden,
        Err(login) => return h + &login,
    };
    let path = format!("/ops/{}/act", url_part(&op.id.to_string()));
    if !words.is_empty() {
        let _ = write!(
            h,
            "<form method=\"post\" action=\"{path}\" id=\"op-actions\">{hidden}<p>A resolution is judged on a probe of the node's route taken now.</p>"
        );
        for word in words {
            let _ = write!(
                h,
                "<button type=\"submit\" name=\"action\" value=\"{word}\">{word}</button> "
            );
        }
        h.push_str("</form>\n");
    }
    if op.occupies_slot() {
        let _ = writeln!(
            h,
            "<form method=\"post\" action=\"{path}\" id=\"claim\">{hidden}<input type=\"hidden\" name=\"action\" value=\"claim\">\
             <p>Claimed by you, the operator logged in. <label for=\"review_by\">review by</label> <input id=\"review_by\" name=\"review_by\" maxlength=\"{CLAIM_TEXT_BYTES_MAX}\" required> \
             <button type=\"submit\">claim</button></p></form>"
        );
    }
    h.push_str(&logout_form(acting));
    h
}

/// The node page's actions: probe (read back and record what serves),
/// retire and release where the model accepts them now, and labels.
pub fn node_forms(s: &ControllerState, node: model::NodeId, acting: &Acting) -> String {
    let Some(name) = s.roster.name(node) else {
        return String::new();
    };
    let offered = node_actions(s, node);
    let mut words = vec!["probe"];
    words.extend(offered.iter().map(|a| words::node_action(*a)));
    let mut h = String::from("<h2>Actions</h2>\n");
    let hidden = match acting.form_or_login(&format!("{} or label it", words.join(", "))) {
        Ok(hidden) => hidden,
        Err(login) => return h + &login,
    };
    let path = format!("/nodes/{}/act", url_part(name));
    let _ = write!(
        h,
        "<form method=\"post\" action=\"{path}\" id=\"node-actions\">{hidden}"
    );
    for word in words {
        let _ = write!(
            h,
            "<button type=\"submit\" name=\"action\" value=\"{word}\">{word}</button> "
        );
    }
    h.push_str("</form>\n");
    let _ = writeln!(
        h,
        "<form method=\"post\" action=\"{path}\" id=\"labels\">{hidden}<input type=\"hidden\" name=\"action\" value=\"label\">\
         <p><label for=\"label-set\">set labels (key=value, comma-separated)</label> <input id=\"label-set\" name=\"set\"> \
         <label for=\"label-remove\">remove keys (comma-separated)</label> <input id=\"label-remove\" name=\"remove\"> \
         <button type=\"submit\">label</button></p></form>"
    );
    h.push_str(&logout_form(acting));
    h
}

/// Submit `input`; back to `page` when accepted, else the refusal in the
/// model's words.
async fn submit(api: &Api, actor: Actor, input: Input, page: &str) -> Response {
    match api.core.submit(acting(actor, input)).await {
        Ok(_) => see_other(page, None),
        Err(InputError::Refused(why)) => refused(
            crate::daemon::error::refusal_status(&why),
            page,
            &why.to_string(),
        ),
        Err(InputError::Stopped) => super::unavailable(),
    }
}

/// The model refused (409, or 400 for a request it finds malformed: the
/// API's status); its words, and the way back.
fn refused(status: StatusCode, page: &str, why: &str) -> Response {
    let body = format!(
        "<h1>Refused</h1>\n<p id=\"refusal\" class=\"bad\" role=\"alert\">The controller refused: {}. Nothing was recorded.</p>\n<p><a href=\"{}\">Back to the page</a></p>\n",
        escape(why),
        escape(page)
    );
    super::html(status, super::shell("Refused", false, &body))
}

/// An action form's path value, its fields and who acts.
type ActForm = (String, Vec<(String, String)>, Actor);

/// An action form's path value and fields, once its session and CSRF
/// token are checked ([`checked`]); else the page saying why nothing was
/// done.
fn session_form(
    api: &Api,
    headers: &HeaderMap,
    id: PagePath,
    form: PageForm,
) -> Result<ActForm, Refused> {
    let id = path_value(id)?;
    let pairs = form_pairs(form)?;
    let session = checked(api, headers, &pairs)?;
    Ok((id, pairs, session.actor))
}

/// `POST /rollouts/{id}/act` (form: `csrf`, `action` = approve, resume or
/// pause).
#[utoipa::path(post, path = "/rollouts/{id}/act", tag = "console", security(("session" = [])),
    params(("id" = String, Path, description = "rollout id: r0, r1, ...")),
    request_body(content = RolloutActForm, content_type = "application/x-www-form-urlencoded"),
    responses(
        (status = 303, description = "done: back to the rollout's page"),
        (status = 400, description = "a malformed form or an unknown action, named (HTML)", body = String, content_type = "text/html"),
        (status = 401, description = "not logged in: nothing done (HTML)", body = String, content_type = "text/html"),
        (status = 403, description = "the form's token is not the session's: nothing done (HTML)", body = String, content_type = "text/html"),
        (status = 404, description = "no such rollout (HTML)", body = String, content_type = "text/html"),
        (status = 409, description = "the model refused, in its words: nothing recorded (HTML)", body = String, content_type = "text/html"),
        (status = 503, description = "the controller core stopped (HTML)", body = String, content_type = "text/html"),
    ))]
async fn rollout_act(
    State(api): State<Api>,
    headers: HeaderMap,
    id: PagePath,
    form: PageForm,
) -> Response {
    let (id, pairs, actor) = match session_form(&api, &headers, id, form) {
        Ok(parsed) => parsed,
        Err(page) => return page.into_response(),
    };
    let Some(rollout) = parse_rollout_id(&id) else {
        return refusal(StatusCode::NOT_FOUND, &format!("no rollout {id}"));
    };
    let word = param(&pairs, "action").unwrap_or("");
    let Some(action) = words::parse_rollout_action(word) else {
        return refusal(
            StatusCode::BAD_REQUEST,
            &format!("field `action`: {word:?} is not approve, resume or pause"),
        );
    };
    use model::controller::RolloutAction as A;
    let input = match action {
        A::Approve => Input::Approve { rollout },
        A::Resume => Input::Resume { rollout },
        A::Pause => Input::Pause { rollout },
    };
    tracing::info!("console: {word} {rollout} from the rollout's page");
    submit(&api, actor, input, &format!("/rollouts/{}", url_part(&id))).await
}

/// `POST /ops/{op}/act` (form: `csrf`, `action` = rollback, confirm-new,
/// confirm-baseline, abandon or claim; a claim's `review_by`: the claim is
/// held by the session's operator).
#[utoipa::path(post, path = "/ops/{op}/act", tag = "console", security(("session" = [])),
    params(("op" = String, Path, description = "op id: op0, op1, ...")),
    request_body(content = OpActForm, content_type = "application/x-www-form-urlencoded"),
    responses(
        (status = 303, description = "done: back to the op's page"),
        (status = 400, description = "a malformed form, an unknown action or a missing field, named (HTML)", body = String, content_type = "text/html"),
        (status = 401, description = "not logged in: nothing done (HTML)", body = String, content_type = "text/html"),
        (status = 403, description = "the form's token is not the session's: nothing done (HTML)", body = String, content_type = "text/html"),
        (status = 404, description = "no such op (HTML)", body = String, content_type = "text/html"),
        (status = 409, description = "the model refused, in its words: nothing recorded (HTML)", body = String, content_type = "text/html"),
        (status = 502, description = "a resolution's probe of the node's route could not be made: nothing recorded (HTML)", body = String, content_type = "text/html"),
        (status = 503, description = "the controller core stopped (HTML)", body = String, content_type = "text/html"),
    ))]
async fn op_act(
    State(api): State<Api>,
    headers: HeaderMap,
    id: PagePath,
    form: PageForm,
) -> Response {
    let (id, pairs, actor) = match session_form(&api, &headers, id, form) {
        Ok(parsed) => parsed,
        Err(page) => return page.into_response(),
    };
    let Some(snap) = api.core.snapshot().await else {
        return super::unavailable();
    };
    let Some(op) = parse_op_id(&id).and_then(|o| snap.state.op(o)) else {
        return refusal(StatusCode::NOT_FOUND, &format!("no op {id}"));
    };
    let page = format!("/ops/{}", url_part(&id));
    let input = match op_input(&api, op, &pairs, &actor).await {
        Ok(input) => input,
        Err(page) => return page.into_response(),
    };
    tracing::info!(
        "console: {} {} from the op's page",
        param(&pairs, "action").unwrap_or(""),
        op.id
    );
    submit(&api, actor, input, &page).await
}

/// The input an op form asks for; a resolution probes the route now.
async fn op_input(
    api: &Api,
    op: &Op,
    pairs: &[(String, String)],
    actor: &Actor,
) -> Result<Input, Refused> {
    let word = param(pairs, "action").unwrap_or("");
    if word == "rollback" {
        return Ok(Input::RollBack { op: op.id });
    }
    if word == "claim" {
        let text = |field: &str| -> Result<String, Refused> {
            let value = param(pairs, field).unwrap_or("").trim().to_string();
            if value.is_empty() || value.len() > CLAIM_TEXT_BYTES_MAX {
                return Err(Refused(
                    StatusCode::BAD_REQUEST,
                    format!("field `{field}`: give 1 to {CLAIM_TEXT_BYTES_MAX} bytes"),
                ));
            }
            Ok(value)
        };
        return Ok(Input::Claim {
            op: op.id,
            owner: match actor {
                Actor::Operator { name, .. } => name.clone(),
                Actor::ControllerConfig => String::new(),
            },
            review_by: text("review_by")?,
        });
    }
    let Some(resolution) = words::parse_resolution(word) else {
        return Err(Refused(
            StatusCode::BAD_REQUEST,
            format!(
                "field `action`: {word:?} is not rollback, confirm-new, confirm-baseline, abandon or claim"
            ),
        ));
    };
    match crate::daemon::probe::probe_route(api, op.node).await {
        Ok(probed) => Ok(Input::Resolve {
            op: op.id,
            observation: probed.observation,
            resolution,
        }),
        Err(_) => Err(Refused(
            StatusCode::BAD_GATEWAY,
            "the controller could not probe the node's route to back the resolution: nothing recorded"
                .to_string(),
        )),
    }
}

/// `POST /nodes/{name}/act`'s form, as documented (parsed as pairs).
#[derive(utoipa::ToSchema)]
#[allow(dead_code)] // Declares the form for the document; never built.
struct NodeActForm {
    /// The session's CSRF token, from the page's form.
    csrf: String,
    /// `probe`, `retire`, `release` or `label`.
    action: String,
    /// A label's `key=value` pairs to set, comma-separated.
    set: Option<String>,
    /// Label keys to remove, comma-separated.
    remove: Option<String>,
}

/// `POST /nodes/{name}/act` (form: `csrf`, `action` = probe, retire,
/// release or label; a label's `set` and `remove`).
#[utoipa::path(post, path = "/nodes/{name}/act", tag = "console", security(("session" = [])),
    params(("name" = String, Path, description = "an enrolled node's name")),
    request_body(content = NodeActForm, content_type = "application/x-www-form-urlencoded"),
    responses(
        (status = 303, description = "done: back to the node's page"),
        (status = 400, description = "a malformed form, an unknown action or bad labels, named (HTML)", body = String, content_type = "text/html"),
        (status = 401, description = "not logged in: nothing done (HTML)", body = String, content_type = "text/html"),
        (status = 403, description = "the form's token is not the session's: nothing done (HTML)", body = String, content_type = "text/html"),
        (status = 404, description = "no such node (HTML)", body = String, content_type = "text/html"),
        (status = 409, description = "the model refused, in its words: nothing recorded (HTML)", body = String, content_type = "text/html"),
        (status = 502, description = "the probe could not be made: nothing recorded (HTML)", body = String, content_type = "text/html"),
        (status = 503, description = "the controller core stopped (HTML)", body = String, content_type = "text/html"),
    ))]
async fn node_act(
    State(api): State<Api>,
    headers: HeaderMap,
    name: PagePath,
    form: PageForm,
) -> Response {
    let (name, pairs, actor) = match session_form(&api, &headers, name, form) {
        Ok(parsed) => parsed,
        Err(page) => return page.into_response(),
    };
    let Some(node) = api.core.roster().id(&name) else {
        return refusal(
            StatusCode::NOT_FOUND,
            &format!("no node {name} in the fleet"),
        );
    };
    let page = format!("/nodes/{}", url_part(&name));
    let word = param(&pairs, "action").unwrap_or("");
    tracing::info!("console: {word} {name} from the node's page");
    let input = match word {
        "probe" => return probe_and_record(&api, actor, node, &page).await,
        "retire" => Input::RetireNode { name },
        "release" => Input::ReleaseNode { node },
        "label" => match labels_of(&pairs) {
            Ok((set, remove)) => Input::LabelNode { name, set, remove },
            Err(page) => return page.into_response(),
        },
        other => {
            return refusal(
                StatusCode::BAD_REQUEST,
                &format!("field `action`: {other:?} is not probe, retire, release or label"),
            )
        }
    };
    submit(&api, actor, input, &page).await
}

/// Probe `node` now and record what was seen (`Input::Observe`), as
/// `POST /api/nodes/{name}/probe` does; back to `page`.
async fn probe_and_record(api: &Api, actor: Actor, node: model::NodeId, page: &str) -> Response {
    let gathered = match crate::daemon::verify::gather(api, node).await {
        Ok(g) => g,
        Err(answer) => {
            return refusal(
                StatusCode::BAD_GATEWAY,
                &format!(
                    "the controller could not probe the node (HTTP {}): nothing recorded",
                    answer.status().as_u16()
                ),
            )
        }
    };
    match crate::daemon::verify::record(api, node, &gathered.fresh, Some(actor)).await {
        Ok(_) => see_other(page, None),
        Err(InputError::Refused(why)) => refused(
            crate::daemon::error::refusal_status(&why),
            page,
            &why.to_string(),
        ),
        Err(InputError::Stopped) => super::unavailable(),
    }
}

/// A label form's `set` (`key=value`, comma-separated) and `remove`
/// (keys, comma-separated); the model checks the names and values.
fn labels_of(
    pairs: &[(String, String)],
) -> Result<
    (
        model::controller::Labels,
        std::collections::BTreeSet<String>,
    ),
    Refused,
> {
    let list = |field: &str| -> Vec<String> {
        param(pairs, field)
            .unwrap_or("")
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()
    };
    let mut set = model::controller::Labels::new();
    for pair in list("set") {
        let Some((key, value)) = pair.split_once('=') else {
            return Err(Refused(
                StatusCode::BAD_REQUEST,
                format!("field `set`: {pair:?} is not key=value"),
            ));
        };
        set.insert(key.trim().to_string(), value.trim().to_string());
    }
    let remove: std::collections::BTreeSet<String> = list("remove").into_iter().collect();
    if set.is_empty() && remove.is_empty() {
        return Err(Refused(
            StatusCode::BAD_REQUEST,
            "fields `set` and `remove`: give a label to set or a key to remove".to_string(),
        ));
    }
    Ok((set, remove))
}

/// The action routes.
pub fn routes() -> utoipa_axum::router::OpenApiRouter<Api> {
    utoipa_axum::router::OpenApiRouter::new()
        .routes(utoipa_axum::routes!(rollout_act))
        .routes(utoipa_axum::routes!(op_act))
        .routes(utoipa_axum::routes!(node_act))
}
