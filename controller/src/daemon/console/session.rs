//! Logging in to the console (issue #28 item 3): `GET /login` asks for the
//! operator's credential (the one the CLI and the API take as
//! `Authorization: Bearer`; issue #28 item 2), `POST /login` finds whose it
//! is and opens a session kept in a cookie, `POST /logout` closes it.
//! Every action of a session is stepped as its operator's, so the model
//! refuses it, in its words, once the role is too low or the credential
//! was rotated or revoked.
//!
//! The cookie is `Secure; HttpOnly; SameSite=Strict`: script cannot read
//! it, another site's page cannot send it, and a browser keeps it only
//! over HTTPS or on loopback (`http://127.0.0.1`, `http://localhost`,
//! which browsers treat as secure). Its value is a random 256-bit session
//! id, never the credential. Every form a page offers carries the
//! session's own random CSRF token, and an action is carried out only
//! when the form's token is the session's (the synchronizer token
//! pattern; the cookie alone never acts). Sessions live in the controller's
//! memory: at most [`SESSIONS_MAX`], each for [`SESSION_TTL_MS`]; a
//! restart or a takeover logs everyone out, which costs a login and
//! never an action.

use super::{escape, html, shell};
pub use crate::daemon::sessions::{
    same_secret, Current, Sessions, SESSIONS_MAX, SESSION_COOKIE, SESSION_TTL_MS,
};
use crate::daemon::state::{operator_of, Api};
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use std::time::Instant;

/// The session cookie's value in `headers`, if any.
fn cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == SESSION_COOKIE)
        .map(|(_, value)| value.to_string())
}

/// The request's open session, if it has one.
pub fn current(api: &Api, headers: &HeaderMap) -> Option<Current> {
    let id = cookie(headers)?;
    api.sessions.get(&id, Instant::now())
}

/// Where a login sends the browser back to: a console path of this
/// controller (`/...`, never `//host` or a scheme), else the overview.
pub fn safe_next(next: Option<&str>) -> String {
    match next {
        Some(n)
            if n.starts_with('/')
                && !n.starts_with("//")
                && !n.contains('\\')
                && !n.chars().any(char::is_control) =>
        {
            n.to_string()
        }
        _ => "/".to_string(),
    }
}

/// The login page; `wrong`: the credential given was refused.
pub fn login_page(next: &str, wrong: bool) -> String {
    let error = if wrong {
        "<p id=\"error\" class=\"bad\" role=\"alert\">Unknown, rotated or revoked credential: nothing was done.</p>\n"
    } else {
        ""
    };
    let body = format!(
        "<h1>Log in</h1>\n{error}<form method=\"post\" action=\"/login\" id=\"login\">\
         <input type=\"hidden\" name=\"next\" value=\"{}\">\
         <p><label for=\"token\">Operator credential</label> \
         <input type=\"password\" id=\"token\" name=\"token\" autocomplete=\"current-password\" required></p>\
         <p><button type=\"submit\">Log in</button></p></form>\n\
         <p>Your credential is the one the CLI uses: the first admin's is <code>pki/operator-token</code>, \
         others come from <code>fleetweft operator add</code>. \
         The session lasts {} hours, in a cookie only this controller's pages send.</p>\n",
        escape(next),
        SESSION_TTL_MS / 3_600_000,
    );
    shell("Log in", false, &body)
}

/// `POST /login`'s form, as documented (parsed as pairs).
#[derive(utoipa::ToSchema)]
#[allow(dead_code)] // Declares the form for the document; never built.
struct LoginForm {
    /// The operator's credential.
    token: String,
    /// The console path to go back to.
    next: Option<String>,
}

/// `POST /logout`'s form, as documented (parsed as pairs).
#[derive(utoipa::ToSchema)]
#[allow(dead_code)] // Declares the form for the document; never built.
struct LogoutForm {
    /// The session's CSRF token, from the page's form.
    csrf: String,
}

/// A form's fields, or the 400 page.
pub type PageForm =
    Result<axum::extract::Form<Vec<(String, String)>>, axum::extract::rejection::FormRejection>;

/// The pairs of `f`, or the 400 page.
pub fn form_pairs(f: PageForm) -> Result<Vec<(String, String)>, super::Refused> {
    f.map(|f| f.0).map_err(|e| {
        super::Refused(
            StatusCode::BAD_REQUEST,
            format!("malformed form: {}", e.body_text()),
        )
    })
}

/// `GET /login`: the login form.
#[utoipa::path(get, path = "/login", tag = "console",
    params(("next" = Option<String>, Query, description = "the console path to go back to after the login")),
    responses(
        (status = 200, description = "the login form (HTML)", body = String, content_type = "text/html"),
        (status = 400, description = "a malformed query string (HTML)", body = String, content_type = "text/html"),
    ))]
async fn login_form(q: super::PageQuery) -> Response {
    let pairs = match super::pairs(q) {
        Ok(p) => p,
        Err(page) => return page.into_response(),
    };
    let next = safe_next(super::param(&pairs, "next"));
    html(StatusCode::OK, login_page(&next, false))
}

/// `POST /login` (form: `token`, `next`): a right token opens a session
/// and sends the browser back to `next`; a wrong one is refused.
#[utoipa::path(post, path = "/login", tag = "console",
    request_body(content = LoginForm, content_type = "application/x-www-form-urlencoded"),
    responses(
        (status = 303, description = "logged in: the session cookie is set, back to `next`"),
        (status = 400, description = "a malformed form (HTML)", body = String, content_type = "text/html"),
        (status = 401, description = "unknown, rotated or revoked credential: no session (HTML)", body = String, content_type = "text/html"),
    ))]
async fn login(State(api): State<Api>, form: PageForm) -> Response {
    let pairs = match form_pairs(form) {
        Ok(p) => p,
        Err(page) => return page.into_response(),
    };
    let next = safe_next(super::param(&pairs, "next"));
    let token = super::param(&pairs, "token").unwrap_or("");
    let Some((actor, _)) = operator_of(&api, token) else {
        tracing::warn!("console: a login with an unknown or revoked credential was refused");
        return html(StatusCode::UNAUTHORIZED, login_page(&next, true));
    };
    if let model::controller::Actor::Operator { name, .. } = &actor {
        tracing::info!("console: operator {name} logged in");
    }
    let session = api.sessions.open(Instant::now(), actor);
    let cookie = format!(
        "{SESSION_COOKIE}={}; Path=/; Max-Age={}; Secure; HttpOnly; SameSite=Strict",
        session.id,
        SESSION_TTL_MS / 1000
    );
    see_other(&next, Some(cookie))
}

/// `POST /logout` (form: `csrf`): closes the session.
#[utoipa::path(post, path = "/logout", tag = "console", security(("session" = [])),
    request_body(content = LogoutForm, content_type = "application/x-www-form-urlencoded"),
    responses(
        (status = 303, description = "logged out: the cookie is cleared, back to the overview"),
        (status = 400, description = "a malformed form (HTML)", body = String, content_type = "text/html"),
        (status = 401, description = "no open session (HTML)", body = String, content_type = "text/html"),
        (status = 403, description = "no session, or the form's token is not the session's (HTML)", body = String, content_type = "text/html"),
    ))]
async fn logout(State(api): State<Api>, headers: HeaderMap, form: PageForm) -> Response {
    let pairs = match form_pairs(form) {
        Ok(p) => p,
        Err(page) => return page.into_response(),
    };
    match checked(&api, &headers, &pairs) {
        Ok(session) => {
            api.sessions.close(&session.id);
            let cookie =
                format!("{SESSION_COOKIE}=; Path=/; Max-Age=0; Secure; HttpOnly; SameSite=Strict");
            see_other("/", Some(cookie))
        }
        Err(page) => page.into_response(),
    }
}

/// The session of a form post whose `csrf` field is that session's token;
/// else the page saying why nothing was done (401 without a session,
/// 403 with a token that is not the session's).
pub fn checked(
    api: &Api,
    headers: &HeaderMap,
    pairs: &[(String, String)],
) -> Result<Current, super::Refused> {
    let Some(session) = current(api, headers) else {
        return Err(super::Refused(
            StatusCode::UNAUTHORIZED,
            "not logged in (or the session ended): log in and try again; nothing was done"
                .to_string(),
        ));
    };
    let presented = super::param(pairs, "csrf").unwrap_or("");
    if !same_secret(presented, &session.csrf) {
        return Err(super::Refused(
            StatusCode::FORBIDDEN,
            "this form is not from this session's page (stale, or from another site): reload the page and try again; nothing was done"
                .to_string(),
        ));
    }
    Ok(session)
}

/// 303 See Other to `to`, setting `cookie` when given.
pub fn see_other(to: &str, cookie: Option<String>) -> Response {
    let mut response =
        (StatusCode::SEE_OTHER, [(header::LOCATION, to.to_string())]).into_response();
    if let Some(value) = cookie.and_then(|c| HeaderValue::from_str(&c).ok()) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

/// The session routes.
pub fn routes() -> utoipa_axum::router::OpenApiRouter<Api> {
    utoipa_axum::router::OpenApiRouter::new()
        .routes(utoipa_axum::routes!(login_form, login))
        .routes(utoipa_axum::routes!(logout))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_console_path_is_a_place_to_go_back_to() {
        assert_eq!(safe_next(Some("/rollouts/r1")), "/rollouts/r1");
        for bad in [
            "//evil.example/",
            "https://evil.example/",
            "/\\evil",
            "x",
            "/a\nb",
        ] {
            assert_eq!(safe_next(Some(bad)), "/", "{bad:?}");
        }
        assert_eq!(safe_next(None), "/");
    }

    #[test]
    fn the_session_cookie_is_read_among_others() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            HeaderValue::from_static("a=1; fleetweft_session=abc; b=2"),
        );
        assert_eq!(cookie(&headers).as_deref(), Some("abc"));
        assert!(
            same_secret("abc", "abc") && !same_secret("abc", "abd") && !same_secret("ab", "abc")
        );
    }
}
