//! The operator dashboard (`/admin`): sign-in with an operator's token (the session, which
//! names the operator and its role, is kept in a secure, HttpOnly, SameSite=Strict cookie); the
//! rooms with their state as badges; each room's page (`room`: charts of the node's recent
//! samples drawn with uPlot, actions, the notice to the line, the line itself, codes, staff
//! tokens, the grouped configuration form of `config`, the room's recent decisions and
//! "Explain a visitor" of `ledger`, deleting); its report (`report`); pools (`pools`); the operator audit log
//! (`audit`); the cluster. Every form carries a CSRF token bound to the session, and
//! every action answers with a redirect (post, redirect, get). A viewer sees the pages without
//! their forms, and [`session_layer`] refuses its posts; every page says who is signed in.
//!
//! The pages are rendered from the templates in `api/web/templates/admin/` (askama: checked
//! when the crate is built, every value HTML-escaped unless the template says `|safe`, which
//! only a fragment rendered from another template or constant markup is). The code here decides
//! what a page shows, as plain values; the templates write the markup.

pub(crate) mod audit;
mod config;
mod form;
pub(crate) mod ledger;
pub(crate) mod pools;
pub(crate) mod report;
pub(crate) mod room;

pub use audit::audit_page;
pub use ledger::explain_page;
pub use pools::{pool_action, pools_page};
pub use report::report_page;
pub use room::{history, preview, room, save_config};

use crate::app::App;
use crate::app::Path;
use crate::error::ApiError;
use crate::error::IntoHttp;
use crate::error::Kind;
use axum::extract::{Form, FromRequest, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use sluice_ops::model::RoomConfigBody;
use sluice_ops::operators::{Operator, Role};
use sluice_statemachine::limits::ROOMS_PAGE_MAX;
use std::sync::Arc;
use subtle::ConstantTimeEq;

/// The session cookie.
pub const ADMIN_COOKIE: &str = "sluice_admin";
/// How long a sign-in lasts at most.
pub const SESSION_SECS: u64 = 12 * 3600;
/// How long a sign-in lasts unused: a dashboard left open and forgotten signs itself out.
pub const SESSION_IDLE_SECS: u64 = 30 * 60;
/// A session's cookie is re-issued, restarting its idle time, once it is this old.
const SESSION_REFRESH_SECS: u64 = 60;

type AppState = State<Arc<App>>;
use form::Fields;

fn mac(key: &str, msg: &str) -> String {
    let mut m = Hmac::<Sha256>::new_from_slice(key.as_bytes()).expect("any key length");
    m.update(msg.as_bytes());
    m.finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The cluster's time in seconds: a session signed in on one node lasts as long on the others.
fn now(app: &App) -> u64 {
    app.sluice.now_ms() / 1000
}

/// A signed-in operator's session: a random id, when it began and when it was last used, and
/// who signed in with what role. Its cookie is `{id}.{issued}.{active}.{name}.{role}.{mac}`,
/// MACed with the break-glass token over those and the hash of the operator's token, so that
/// a session ends when its operator's token or role changes, or the operator is removed.
/// Signing out ends it on every node (a replicated record of ended sessions, kept until it
/// would have ended).
#[derive(Clone, Debug)]
pub struct Session {
    id: [u8; 16],
    issued: u64,
    active: u64,
    name: String,
    role: Role,
}

impl Session {
    fn id_hex(&self) -> String {
        self.id.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The cookie's value, if the session's operator is still configured.
    fn value(&self, app: &App) -> Option<String> {
        let (_, credential) = app.auth.credential(&self.name)?;
        let msg = format!(
            "sluice admin session v3|{}|{}|{}|{}|{}|{}",
            self.id_hex(),
            self.issued,
            self.active,
            self.name,
            self.role,
            sluice_ops::operators::hex(&credential)
        );
        Some(format!(
            "{}.{}.{}.{}.{}.{}",
            self.id_hex(),
            self.issued,
            self.active,
            self.name,
            self.role,
            mac(app.auth.token(), &msg)
        ))
    }

    /// The `Set-Cookie` value that holds this session.
    fn cookie(&self, app: &App) -> Option<HeaderValue> {
        let secure = if app.secure_cookies { "; Secure" } else { "" };
        HeaderValue::from_str(&format!(
            "{ADMIN_COOKIE}={}; Path=/admin; HttpOnly; SameSite=Strict; Max-Age={SESSION_SECS}{secure}",
            self.value(app)?
        ))
        .ok()
    }

    fn parse(value: &str) -> Option<Session> {
        let mut parts = value.split('.');
        let (id, issued, active) = (parts.next()?, parts.next()?, parts.next()?);
        let (name, role) = (parts.next()?, parts.next()?);
        let _mac = parts.next()?;
        if parts.next().is_some() || id.len() != 32 {
            return None;
        }
        sluice_statemachine::types::validate_name("name", name).ok()?;
        let mut bytes = [0u8; 16];
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = u8::from_str_radix(id.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        Some(Session {
            id: bytes,
            issued: issued.parse().ok()?,
            active: active.parse().ok()?,
            name: name.to_string(),
            role: Role::parse(role)?,
        })
    }

    /// Who is signed in.
    pub fn operator(&self) -> Operator {
        Operator {
            name: self.name.as_str().into(),
            role: self.role,
        }
    }

    /// Whether the session's operator may act on rooms and pools (a viewer may not).
    pub fn may_act(&self) -> bool {
        self.role >= Role::Operator
    }
}

/// The request's session, if it is valid: signed with the break-glass token for an operator
/// configured with the same token and role, begun less than [`SESSION_SECS`] and used less
/// than [`SESSION_IDLE_SECS`] ago, and not signed out.
fn session(app: &App, headers: &HeaderMap) -> Option<Session> {
    let value = crate::app::cookie(headers, ADMIN_COOKIE)?;
    let s = Session::parse(&value)?;
    let (role, _) = app.auth.credential(&s.name)?;
    let t = now(app);
    let valid = bool::from(value.as_bytes().ct_eq(s.value(app)?.as_bytes()))
        && s.role == role
        && t < s.issued.saturating_add(SESSION_SECS)
        && t < s.active.saturating_add(SESSION_IDLE_SECS);
    let ended = || app.sluice.credential_ended(&s.id);
    (valid && !ended()).then_some(s)
}

/// The dashboard's one place for roles and sessions: a viewer's forms are refused (403
/// `forbidden`; signing in and out aside), and the request runs with the signed-in operator
/// acting, so that what it changes is attributed to it. Re-issues the session's cookie on the
/// answers once it is `SESSION_REFRESH_SECS` old, so that an operator at work stays signed in
/// and a forgotten dashboard does not: pages and forms count as work, the charts' own polling
/// does not.
pub async fn session_layer(
    State(app): AppState,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let path = req.uri().path();
    let polling = path == "/admin/stats.json";
    let form = req.method() != axum::http::Method::GET
        && req.method() != axum::http::Method::HEAD
        && !matches!(path, "/admin/login" | "/admin/logout");
    let signed_in = session(&app, req.headers());
    if let Some(s) = signed_in.as_ref().filter(|_| form) {
        if let Err(e) = s.operator().may(Role::Operator) {
            return e.into_http();
        }
    }
    let mut resp = match &signed_in {
        Some(s) => sluice_ops::operators::acting(s.operator(), next.run(req)).await,
        None => next.run(req).await,
    };
    if let Some(mut s) = signed_in.filter(|_| !polling) {
        let t = now(&app);
        if t >= s.active + SESSION_REFRESH_SECS && !resp.headers().contains_key(header::SET_COOKIE)
        {
            s.active = t;
            if let Some(v) = s.cookie(&app) {
                resp.headers_mut().insert(header::SET_COOKIE, v);
            }
        }
    }
    resp
}

fn csrf(app: &App, session: &Session) -> String {
    mac(app.auth.token(), &format!("csrf|{}", session.id_hex()))
}

fn check_csrf(app: &App, session: &Session, fields: &Fields) -> bool {
    fields
        .get("csrf")
        .is_some_and(|c| bool::from(c.as_bytes().ct_eq(csrf(app, session).as_bytes())))
}

/// The session of a form's sender, its CSRF token checked; else the answer to give (the
/// sign-in for no session, 403 for a token that is not the session's).
fn form_session(app: &App, headers: &HeaderMap, f: &Fields) -> Result<Session, Box<Response>> {
    let s = session(app, headers).ok_or_else(|| Box::new(see_other("/admin")))?;
    if check_csrf(app, &s, f) {
        Ok(s)
    } else {
        Err(Box::new(csrf_refused()))
    }
}

/// The answer to a form without its session's CSRF token.
fn csrf_refused() -> Response {
    ApiError::new(
        Kind::Forbidden,
        "csrf_invalid",
        "the form's CSRF token is missing or not this session's: reload the page and try again",
    )
    .into_http()
}

/// A dashboard page from its template.
fn render(page: &impl askama::Template) -> Html<String> {
    Html(page.render().expect("a page's values always render"))
}

/// The sign-in form (`templates/admin/login.html`).
#[derive(askama::Template)]
#[template(path = "admin/login.html")]
struct LoginPage<'a> {
    title: &'static str,
    error: Option<&'a str>,
}

fn login_form(error: Option<&str>) -> Html<String> {
    render(&LoginPage {
        title: "Sign in",
        error,
    })
}

/// A page that says what went wrong, and the way back (`templates/admin/message.html`).
#[derive(askama::Template)]
#[template(path = "admin/message.html")]
struct MessagePage<'a> {
    title: &'a str,
    /// Announced at once (`role="alert"`).
    alert: bool,
    text: &'a str,
    /// A room to offer the way to.
    open_room: Option<&'a str>,
    /// The words of the way back to the rooms.
    back: &'a str,
}

fn see_other(to: &str) -> Response {
    let mut r = StatusCode::SEE_OTHER.into_response();
    if let Ok(v) = HeaderValue::from_str(to) {
        r.headers_mut().insert(header::LOCATION, v);
    }
    r
}

/// A dashboard form's fields; a refused body (too large, wrong type) is our JSON error.
#[derive(Debug)]
pub struct AdminForm(Fields);

impl<S: Send + Sync> FromRequest<S> for AdminForm {
    type Rejection = crate::error::HttpError;

    async fn from_request(req: axum::extract::Request, state: &S) -> Result<Self, Self::Rejection> {
        Form::<Fields>::from_request(req, state)
            .await
            .map(|Form(f)| AdminForm(f))
            .map_err(|e| crate::error::HttpError(crate::error::form_rejection(e)))
    }
}

/// `POST /admin/login`: wrong tokens count towards the client's backoff, like every other
/// operator credential (see [`sluice_ops::auth`]).
#[utoipa::path(post, path = "/admin/login", tag = "dashboard", operation_id = "dashboard_login",
    request_body(content_type = "application/x-www-form-urlencoded", description = "`token`: an operator token"),
    responses((status = 303, description = "signed in: the session cookie set"), (status = 401, description = "HTML: the form again", content_type = "text/html"), (status = 429)))]
pub async fn login(
    State(app): AppState,
    headers: HeaderMap,
    axum::Extension(axum::extract::ConnectInfo(peer)): axum::Extension<
        axum::extract::ConnectInfo<std::net::SocketAddr>,
    >,
    AdminForm(f): AdminForm,
) -> Response {
    // A sign-in sent by another site's page (login CSRF: the attacker's own token, so that
    // what the victim then does is recorded as the attacker's, and what is shown once is shown
    // in the attacker's session) is refused before the token is even looked at. Browsers say
    // where a form came from; clients that are not browsers say nothing and are not refused.
    if let Some(site) = headers
        .get("sec-fetch-site")
        .and_then(|v| v.to_str().ok())
        .filter(|s| !matches!(*s, "same-origin" | "none"))
    {
        tracing::warn!(site, "dashboard sign-in sent from another site: refused");
        return (
            StatusCode::FORBIDDEN,
            login_form(Some(
                "This sign-in was sent from another site's page: sign in from this page.",
            )),
        )
            .into_response();
    }
    let mut extensions = axum::http::Extensions::new();
    extensions.insert(axum::extract::ConnectInfo(peer));
    let client = crate::app::client_ip_of(&app, &headers, &extensions);
    let presented = f.get("token").map(|t| t.trim());
    let op = match app.auth.authenticate(client, presented) {
        Ok(op) => op,
        Err(e) => {
            let text = if e.kind == crate::error::Kind::TooMany {
                "Too many wrong tokens from here: wait a while before trying again."
            } else {
                "That token is not valid."
            };
            let mut r = (crate::error::http_status(e.kind), login_form(Some(text))).into_response();
            if let Some(secs) = e.retry_after {
                r.headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from(secs));
            }
            return r;
        }
    };
    let mut random = [0u8; 16];
    getrandom::fill(&mut random).expect("OS randomness");
    // A session's id is marked as one, and carries its operator's tag, so that its sign-out
    // counts among ended sessions, and among its operator's.
    let id = sluice_statemachine::session_id(&op.name, random);
    debug_assert!(sluice_statemachine::is_session_credential(&id));
    let t = now(&app);
    let s = Session {
        id,
        issued: t,
        active: t,
        name: op.name.to_string(),
        role: op.role,
    };
    let mut r = see_other("/admin");
    if let Some(v) = s.cookie(&app) {
        r.headers_mut().insert(header::SET_COOKIE, v);
    }
    r
}

/// `POST /admin/logout`: ends the session on every node, not just in this browser.
#[utoipa::path(post, path = "/admin/logout", tag = "dashboard", operation_id = "dashboard_logout", responses((status = 303, description = "signed out; needs the dashboard's session cookie and a CSRF token; without a session, the sign-in page")))]
pub async fn logout(State(app): AppState, headers: HeaderMap, AdminForm(f): AdminForm) -> Response {
    if let Some(s) = session(&app, &headers) {
        if !check_csrf(&app, &s, &f) {
            return csrf_refused();
        }
        // Recorded as the signed-in operator's (`session_layer` made it the one acting).
        let ended = app
            .sluice
            .end_credential(
                s.id,
                s.issued.saturating_add(SESSION_SECS).saturating_mul(1000),
            )
            .await;
        match ended {
            Err(e) => {
                tracing::warn!(error = %e, "signing out: the session could not be ended everywhere");
                return (
                    StatusCode::SERVICE_UNAVAILABLE,
                    render(&MessagePage {
                        title: "Sign out",
                        alert: true,
                        text: "Signing out failed: the cluster could not record it. Try again.",
                        open_room: None,
                        back: "Back",
                    }),
                )
                    .into_response();
            }
            // Refused (too many sessions ended at once): this browser forgets the session, and
            // the operator learns that a copy of its cookie would still work elsewhere.
            Ok((sluice_statemachine::Outcome::Rejected(why), _)) => {
                tracing::warn!(reason = %why, "signing out: the cluster refused to end the session");
                let until = sluice_ops::ledger::rfc3339(
                    s.issued.saturating_add(SESSION_SECS).saturating_mul(1000),
                );
                let text = format!(
                    "This browser is signed out, but the cluster refused to end the session everywhere ({why}): a copy of its cookie would still work until {until}. Tell an admin; rotating the admin token ends every session."
                );
                let page = MessagePage {
                    title: "Sign out",
                    alert: true,
                    text: &text,
                    open_room: None,
                    back: "Sign in",
                };
                let mut r = (StatusCode::CONFLICT, render(&page)).into_response();
                clear_session_cookie(&mut r);
                return r;
            }
            Ok(_) => {}
        }
    }
    let mut r = see_other("/admin");
    clear_session_cookie(&mut r);
    r
}

/// Makes the browser forget its dashboard session.
fn clear_session_cookie(r: &mut Response) {
    r.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_static(
            "sluice_admin=; Path=/admin; HttpOnly; SameSite=Strict; Max-Age=0",
        ),
    );
}

/// The dashboard's first page (`templates/admin/dashboard.html`).
#[derive(askama::Template)]
#[template(path = "admin/dashboard.html")]
struct Dashboard<'a> {
    title: &'static str,
    who: &'a Session,
    token: &'a str,
    flash: Option<String>,
    rooms: Vec<RoomRow<'a>>,
    /// Every room together (the list above may be one page of them).
    all: sluice_ops::model::OverviewBody,
    can_act: bool,
    cluster: &'a sluice_ops::cluster::ClusterStatus,
    nodes: Vec<NodeRow<'a>>,
}

/// A room as the dashboard's list shows it.
struct RoomRow<'a> {
    room: &'a sluice_ops::model::RoomBody,
    badges: room::Badges,
}

/// A member of the cluster as its row shows it.
struct NodeRow<'a> {
    id: u64,
    role: &'static str,
    raft: &'a str,
    http: &'a str,
    /// Entries behind the leader, and the last index known to match (on the leader only).
    lag: Option<(u64, u64)>,
}

/// `GET /admin`: rooms and cluster, or the sign-in form.
#[utoipa::path(get, path = "/admin", tag = "dashboard", operation_id = "dashboard_dashboard", responses((status = 200, description = "HTML: the rooms, or the sign-in form", content_type = "text/html")))]
pub async fn dashboard(State(app): AppState, headers: HeaderMap) -> Response {
    let Some(s) = session(&app, &headers) else {
        return login_form(None).into_response();
    };
    let token = csrf(&app, &s);
    let flash = app.flash.take(&s.id).map(|n| n.text);
    let rooms = app
        .sluice
        .list_rooms(None, ROOMS_PAGE_MAX, flash.is_some())
        .await
        .map(|l| l.rooms)
        .unwrap_or_default();
    let now = now(&app);
    let cluster = app.sluice.cluster();
    let all = app
        .sluice
        .overview()
        .unwrap_or_else(|_| sluice_ops::model::OverviewBody::of(&[], 0));
    render(&Dashboard {
        all,
        title: "Dashboard",
        who: &s,
        token: &token,
        flash,
        rooms: rooms
            .iter()
            .map(|r| RoomRow {
                room: r,
                badges: room::badges(r, now),
            })
            .collect(),
        can_act: s.may_act(),
        nodes: node_rows(&cluster),
        cluster: &cluster,
    })
    .into_response()
}

/// The cluster's members, each with its role and, on the leader, how far behind it is.
fn node_rows(s: &sluice_ops::cluster::ClusterStatus) -> Vec<NodeRow<'_>> {
    s.nodes
        .iter()
        .map(|(id, n)| NodeRow {
            id: *id,
            role: if s.leader == Some(*id) {
                "leader"
            } else if s.voters.contains(id) {
                "voter"
            } else {
                "learner"
            },
            raft: &n.raft,
            http: &n.http,
            lag: s.replication.get(id).map(|r| (r.lag, r.matched_index)),
        })
        .collect()
}

/// `GET /admin/stats.json`: what the charts draw.
#[utoipa::path(get, path = "/admin/stats.json", tag = "dashboard", operation_id = "dashboard_stats", responses((status = 200, description = "the dashboard's figures for its charts (needs the session cookie)", content_type = "application/json"), (status = 401)))]
pub async fn stats(State(app): AppState, headers: HeaderMap) -> Response {
    if session(&app, &headers).is_none() {
        return ApiError::unauthorized().into_http();
    }
    // All rooms together (every room, not only the first page listed), for the line under
    // the list.
    let all = app.sluice.overview().ok().map(|o| {
        serde_json::json!({"waiting": o.waiting, "active": o.active, "admitted_last_minute": o.admitted_last_minute})
    });
    match app.sluice.list_rooms(None, ROOMS_PAGE_MAX, false).await {
        Ok(l) => axum::Json(serde_json::json!({
            "rooms": l.rooms.iter().map(|r| serde_json::json!({"name": r.name, "waiting": r.waiting, "active": r.active, "capacity": r.config.capacity, "admitted_last_minute": r.admitted_last_minute, "newest_eta_secs": r.newest_eta_secs, "joined": r.totals.joined, "admitted": r.totals.admitted})).collect::<Vec<_>>(),
            "all": all,
        }))
        .into_response(),
        Err(e) => e.into_http(),
    }
}

/// Most codes the dashboard makes at once (more with `sluice ctl codes create`).
const DASHBOARD_CODES_MAX: u64 = 1_000;
/// Longest validity of codes made on the page, hours (ten years).
const CODE_HOURS_MAX: u64 = 87_600;

/// The room page's access-code section: the lanes' counts, the batches with their uses (and,
/// for those who may act, a button to end each and a form that makes a batch).
pub(super) fn codes_section(
    app: &App,
    room: &str,
    lanes: &[sluice_ops::model::LaneBody],
    token: &str,
    can_act: bool,
) -> String {
    let batches = app.sluice.code_batches_here(room);
    let page = CodesSection {
        room,
        token,
        can_act,
        codes_max: DASHBOARD_CODES_MAX,
        lanes: app
            .sluice
            .room_view(room)
            .map(|v| v.lanes)
            .unwrap_or_default(),
        batches: batches.iter().map(BatchRow::of).collect(),
        lane_names: lanes.iter().map(|l| l.name.as_str()).collect(),
    };
    askama::Template::render(&page).expect("a section's values always render")
}

/// A room's access codes (`templates/admin/codes.html`).
#[derive(askama::Template)]
#[template(path = "admin/codes.html")]
struct CodesSection<'a> {
    room: &'a str,
    token: &'a str,
    can_act: bool,
    codes_max: u64,
    lanes: Vec<sluice_statemachine::LaneView>,
    batches: Vec<BatchRow<'a>>,
    lane_names: Vec<&'a str>,
}

/// A code batch as its row shows it.
struct BatchRow<'a> {
    id: u32,
    label: &'a str,
    lane: &'a str,
    uses: u32,
    codes: u64,
    used: u64,
    used_up: u64,
    /// When it expires: seconds since the epoch, and as read (UTC).
    expires: Option<(u64, String)>,
}

impl<'a> BatchRow<'a> {
    fn of(b: &'a sluice_ops::model::CodeBatchBody) -> Self {
        BatchRow {
            id: b.id,
            label: &b.label,
            lane: b.lane.as_deref().unwrap_or("(own line)"),
            uses: b.uses,
            codes: b.codes,
            used: b.used,
            used_up: b.used_up,
            expires: b.expires_at.map(|t| (t, form::readable_utc(t))),
        }
    }
}

/// `POST /admin/rooms`: create a room with default settings.
#[utoipa::path(post, path = "/admin/rooms", tag = "dashboard", operation_id = "dashboard_create_room", request_body(content_type = "application/x-www-form-urlencoded"), responses((status = 303, description = "created: on to the room's page (needs the session cookie and CSRF token)")))]
pub async fn create_room(
    State(app): AppState,
    headers: HeaderMap,
    AdminForm(f): AdminForm,
) -> Response {
    let s = match form_session(&app, &headers, &f) {
        Ok(s) => s,
        Err(answer) => return *answer,
    };
    let name = f.get("name").cloned().unwrap_or_default();
    // Create only: a name already taken is refused, never reset to the defaults.
    match app
        .sluice
        .put_room(&name, &RoomConfigBody::default(), true)
        .await
    {
        Ok(_) => {
            app.flash.put(
                &s.id,
                format!("Room {name} made with the default settings: set it up below."),
            );
            see_other(&format!("/admin/rooms/{name}#config"))
        }
        Err(e) => {
            // A name taken: the way to the room that has it.
            let page = MessagePage {
                title: "Room not made",
                alert: true,
                text: &e.message,
                open_room: (e.code == "room_exists").then_some(name.as_str()),
                back: "All rooms",
            };
            (crate::error::http_status(e.kind), render(&page)).into_response()
        }
    }
}

/// `POST /admin/rooms/{room}/action`: pause, resume, health, admit, revoke, the notice, codes,
/// staff tokens, delete. Done: the room's page (or, after a delete, the rooms) with the
/// result, by redirect; refused: the room's page with the reason at the top.
#[utoipa::path(post, path = "/admin/rooms/{room}/action", tag = "dashboard", operation_id = "dashboard_action", params(("room" = String, Path)), request_body(content_type = "application/x-www-form-urlencoded"), responses((status = 303, description = "done: back to the room's page (needs the session cookie and CSRF token)")))]
pub async fn action(
    State(app): AppState,
    Path(room): Path<String>,
    headers: HeaderMap,
    AdminForm(f): AdminForm,
) -> Response {
    let s = match form_session(&app, &headers, &f) {
        Ok(s) => s,
        Err(answer) => return *answer,
    };
    match do_action(&app, &room, &f).await {
        Ok((msg, to)) => {
            // Post, redirect, get: a reload of the page repeats nothing.
            app.flash.put(&s.id, msg);
            see_other(&to)
        }
        Err(e) => match app.sluice.get_room(&room, true).await {
            Ok(r) => (
                crate::error::http_status(e.kind),
                room::room_page(
                    &app,
                    &s,
                    &r,
                    &form::Errors::from([(String::new(), e.message.clone())]),
                    None,
                    None,
                    sluice_ops::history::Span::Quarter,
                )
                .await,
            )
                .into_response(),
            Err(_) => room::not_found(e),
        },
    }
}

/// Does one action: what to tell the operator, and where to send them.
async fn do_action(
    app: &App,
    room: &str,
    f: &Fields,
) -> Result<(crate::app::FlashNote, String), ApiError> {
    let get = |k: &str| f.get(k).map(|v| v.trim().to_string()).unwrap_or_default();
    let sl = &app.sluice;
    let here = format!("/admin/rooms/{room}");
    match get("action").as_str() {
        "delete" => {
            if get("confirm_name") != room {
                return Err(ApiError::invalid(
                    "confirm_name",
                    format!("type the room's name, {room}, to delete it"),
                ));
            }
            let gone = sl.delete_room(room).await?;
            return Ok((
                format!(
                    "Room {room} deleted ({} ended).",
                    sluice_ops::text::count(gone.count, "place or session", "places and sessions")
                )
                .into(),
                "/admin".into(),
            ));
        }
        "notice" => {
            let text = f.get("text").map(String::as_str).unwrap_or("");
            if text.trim().is_empty() {
                return Err(ApiError::invalid(
                    "text",
                    "write the message to show, or take the notice down",
                ));
            }
            sl.set_notice(room, Some(text)).await?;
            return Ok((
                "The notice is shown to everyone in line."
                    .to_string()
                    .into(),
                here,
            ));
        }
        "notice_clear" => {
            sl.set_notice(room, None).await?;
            return Ok(("The notice is taken down.".to_string().into(), here));
        }
        "phase_add" | "phase_remove" => {
            let mut body = sl.get_room(room, true).await?.config;
            let done = if get("action") == "phase_add" {
                let phase = phase_of(f)?;
                let said = format!("Phase {} added to the timeline.", phase.name);
                body.phases.push(phase);
                body.phases.sort_by_key(|p| p.starts_at);
                said
            } else {
                let i: usize = get("index")
                    .parse()
                    .ok()
                    .filter(|&i| i < body.phases.len())
                    .ok_or_else(|| ApiError::invalid("index", "no such phase"))?;
                let gone = body.phases.remove(i);
                format!("Phase {} removed from the timeline.", gone.name)
            };
            sl.put_room(room, &body, false).await?;
            return Ok((done.into(), here));
        }
        _ => {}
    }
    let msg = other_action(app, room, f).await?;
    Ok((msg, here))
}

/// The phase the dashboard's "Add a phase" form describes.
fn phase_of(f: &Fields) -> Result<sluice_ops::model::PhaseBody, ApiError> {
    let mut r = form::Reader::new(f);
    let starts_at = r.when("starts_at");
    let capacity = r.opt_num("capacity");
    let admit_per_minute = r.opt_num("admit_per_minute");
    if let Some((field, why)) = r.errors.iter().next() {
        return Err(ApiError::invalid(field, why.clone()));
    }
    let starts_at =
        starts_at.ok_or_else(|| ApiError::invalid("starts_at", "when the phase starts"))?;
    Ok(sluice_ops::model::PhaseBody {
        starts_at,
        name: r.text("name").unwrap_or_default(),
        capacity,
        admit_per_minute,
        mode: r.text("mode"),
        notice: r.text("notice"),
        template: None,
        announce: r.checked("announce"),
    })
}

/// A staff token issued from the dashboard: the note that shows it, once.
async fn bypass_issue(
    app: &App,
    room: &str,
    get: &impl Fn(&str) -> String,
) -> Result<String, ApiError> {
    let hours = get("ttl_hours")
        .parse::<u64>()
        .map_err(|_| ApiError::invalid("ttl_hours", "must be a whole number"))?;
    let t = app
        .sluice
        .issue_bypass_token(room, hours.saturating_mul(3_600), &get("label"))
        .await?;
    Ok(format!(
        "Staff token (id {}), shown once; valid until {} (unix seconds). Give it to its holder, who enters it at /wait/{room}/bypass: {}",
        t.id, t.expires_at, t.token
    ))
}

/// One visitor's session ended, or, confirmed, every session of the room.
async fn revoke(app: &App, room: &str, get: &impl Fn(&str) -> String) -> Result<String, ApiError> {
    let v = get("visitor_id");
    let r = if v.is_empty() {
        if get("confirm_all") != "yes" {
            return Err(ApiError::invalid(
                "confirm_all",
                "to end every session of the room, give no visitor id and tick \"End every session of the room instead\"",
            ));
        }
        app.sluice.revoke(room, None, true).await?
    } else {
        app.sluice.revoke(room, Some(&v), false).await?
    };
    Ok(format!("Revoked {}.", r.count))
}

/// The dashboard's "make codes" action: a batch of at most [`DASHBOARD_CODES_MAX`], shown once
/// on the page the browser is sent to, to copy, download or send.
async fn codes_create(
    app: &App,
    room: &str,
    get: &impl Fn(&str) -> String,
) -> Result<crate::app::FlashNote, ApiError> {
    let count = get("count")
        .parse::<u64>()
        .ok()
        .filter(|n| (1..=DASHBOARD_CODES_MAX).contains(n))
        .ok_or_else(|| {
            ApiError::invalid(
                "count",
                format!("between 1 and {DASHBOARD_CODES_MAX} (more with sluice ctl codes create)"),
            )
        })?;
    let uses = get("uses")
        .parse::<u32>()
        .map_err(|_| ApiError::invalid("uses", "must be a whole number"))?;
    let expires_at = match get("expires_hours").as_str() {
        "" => None,
        h => {
            let hours = h
                .parse::<u64>()
                .ok()
                .filter(|n| (1..=CODE_HOURS_MAX).contains(n))
                .ok_or_else(|| {
                    ApiError::invalid(
                        "expires_hours",
                        format!("a whole number of hours between 1 and {CODE_HOURS_MAX}"),
                    )
                })?;
            Some(app.sluice.now_ms() / 1000 + hours * 3_600)
        }
    };
    let body = sluice_ops::model::CodesCreateBody {
        count: Some(count),
        uses,
        expires_at,
        lane: Some(get("lane")).filter(|l| !l.is_empty()),
        label: get("label"),
        identities: Vec::new(),
    };
    let made = app.sluice.create_codes(room, &body).await?;
    Ok(crate::app::FlashNote {
        text: format!(
            "{} made (batch {}), shown this once: copy them or download them below.",
            sluice_ops::text::count(made.codes.len() as u64, "code", "codes"),
            made.batch.id,
        ),
        codes: Some(made),
    })
}

/// A room's actions other than its configuration, by the form's `action`.
async fn other_action(
    app: &App,
    room: &str,
    f: &Fields,
) -> Result<crate::app::FlashNote, ApiError> {
    let get = |k: &str| f.get(k).map(|v| v.trim().to_string()).unwrap_or_default();
    let sl = &app.sluice;
    Ok(crate::app::FlashNote::from(match get("action").as_str() {
        "pause" => sl.pause(room, true).await.map(|_| "Paused.".to_string())?,
        "resume" => sl
            .pause(room, false)
            .await
            .map(|_| "Resumed.".to_string())?,
        "mode" => sl
            .set_mode(room, &get("mode"))
            .await
            .map(|r| format!("Mode is now {}.", r.config.mode))?,
        "health" => {
            let sf = Some(get("slow_factor"))
                .filter(|v| !v.is_empty())
                .map(|v| v.parse::<f64>().unwrap_or(-1.0));
            sl.set_health(room, &get("health"), sf)
                .await
                .map(|r| format!("Health is now {}.", r.config.health))?
        }
        "admit" => {
            let n = get("count")
                .parse::<u64>()
                .map_err(|_| ApiError::invalid("count", "must be a whole number"))?;
            sl.admit(room, n)
                .await
                .map(|c| format!("Admitted {}.", c.count))?
        }
        "bypass_issue" => bypass_issue(app, room, &get).await?,
        "codes_create" => return codes_create(app, room, &get).await,
        "codes_end" => {
            let batch = get("batch")
                .parse::<u32>()
                .map_err(|_| ApiError::invalid("batch", "a batch number"))?;
            let n = sl.end_codes(room, batch).await?;
            format!(
                "Batch {batch} ended: its {} no longer work.",
                sluice_ops::text::count(n.count, "code", "codes")
            )
        }
        "bypass_revoke" => {
            let body = sluice_ops::model::BypassRevokeBody {
                token: None,
                id: Some(get("id")),
            };
            sl.revoke_bypass_token(room, &body).await?;
            "Token revoked on every node.".to_string()
        }
        "revoke" => revoke(app, room, &get).await?,
        other => {
            return Err(ApiError::invalid(
                "action",
                format!("unknown action {other:?}"),
            ))
        }
    }))
}
