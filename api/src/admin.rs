//! The operator dashboard (`/admin`): sign-in with the operator token (kept in a secure,
//! HttpOnly, SameSite=Strict cookie), rooms with live charts drawn in SVG by the page itself,
//! the config editor with inline validation errors, operator actions, and the cluster.
//! Every form carries a CSRF token bound to the session.

use crate::error::ApiError;
use crate::http::App;
use crate::http::Path;
use crate::model::{BrandingBody, EntryBody, RoomConfigBody};
use crate::pages::{esc, STYLE};
use axum::extract::{Form, FromRequest, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use sluice_statemachine::limits::ROOMS_PAGE_MAX;
use std::collections::BTreeMap;
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
type Fields = BTreeMap<String, String>;

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
    app.sluice.node.now_ms() / 1000
}

/// What an action said, kept for the page the browser is sent to next (post, redirect, get:
/// reloading that page repeats nothing). One per signed-in session, taken when shown; at most
/// [`FLASH_MAX`] sessions' at once (the oldest go first).
#[derive(Debug, Default)]
pub struct Flash {
    notes: std::sync::Mutex<BTreeMap<[u8; 16], (u64, String)>>,
}

/// Most sessions' flash notes kept at once.
pub const FLASH_MAX: usize = 1_000;

impl Flash {
    fn put(&self, session: &Session, note: String) {
        let mut notes = self.notes.lock().expect("flash lock");
        let seq = notes.values().map(|(n, _)| *n).max().map_or(0, |n| n + 1);
        notes.insert(session.id, (seq, note));
        while notes.len() > FLASH_MAX {
            let oldest = notes
                .iter()
                .min_by_key(|(_, (n, _))| *n)
                .map(|(k, _)| *k)
                .expect("non-empty");
            notes.remove(&oldest);
        }
    }

    fn take(&self, session: &Session) -> Option<String> {
        self.notes
            .lock()
            .expect("flash lock")
            .remove(&session.id)
            .map(|(_, n)| n)
    }
}

/// A signed-in operator's session: a random id, when it began and when it was last used. Its
/// cookie is `{id}.{issued}.{active}.{mac}`, MACed with the operator token. Signing out ends
/// it on every node (a replicated record of ended sessions, kept until it would have ended).
#[derive(Clone, Debug)]
pub struct Session {
    id: [u8; 16],
    issued: u64,
    active: u64,
}

impl Session {
    fn id_hex(&self) -> String {
        self.id.iter().map(|b| format!("{b:02x}")).collect()
    }

    fn value(&self, app: &App) -> String {
        let msg = format!(
            "sluice admin session v2|{}|{}|{}",
            self.id_hex(),
            self.issued,
            self.active
        );
        format!(
            "{}.{}.{}.{}",
            self.id_hex(),
            self.issued,
            self.active,
            mac(app.auth.token(), &msg)
        )
    }

    /// The `Set-Cookie` value that holds this session.
    fn cookie(&self, app: &App) -> Option<HeaderValue> {
        let secure = if app.secure_cookies { "; Secure" } else { "" };
        HeaderValue::from_str(&format!(
            "{ADMIN_COOKIE}={}; Path=/admin; HttpOnly; SameSite=Strict; Max-Age={SESSION_SECS}{secure}",
            self.value(app)
        ))
        .ok()
    }

    fn parse(value: &str) -> Option<Session> {
        let mut parts = value.split('.');
        let (id, issued, active) = (parts.next()?, parts.next()?, parts.next()?);
        let _mac = parts.next()?;
        if parts.next().is_some() || id.len() != 32 {
            return None;
        }
        let mut bytes = [0u8; 16];
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = u8::from_str_radix(id.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        Some(Session {
            id: bytes,
            issued: issued.parse().ok()?,
            active: active.parse().ok()?,
        })
    }
}

/// The request's session, if it is valid: signed with the operator token, begun less than
/// [`SESSION_SECS`] and used less than [`SESSION_IDLE_SECS`] ago, and not signed out.
fn session(app: &App, headers: &HeaderMap) -> Option<Session> {
    let value = crate::http::cookie(headers, ADMIN_COOKIE)?;
    let s = Session::parse(&value)?;
    let t = now(app);
    let valid = bool::from(value.as_bytes().ct_eq(s.value(app).as_bytes()))
        && t < s.issued.saturating_add(SESSION_SECS)
        && t < s.active.saturating_add(SESSION_IDLE_SECS);
    let ended = || {
        app.sluice
            .node
            .read(|st| st.sm.credential_ended(&s.id))
            .map_or(true, |(ended, _)| ended)
    };
    (valid && !ended()).then_some(s)
}

/// Re-issues the session's cookie on the dashboard's answers once it is
/// [`SESSION_REFRESH_SECS`] old, so that an operator at work stays signed in and a forgotten
/// dashboard does not: pages and forms count as work, the charts' own polling does not.
pub async fn refresh_session(
    State(app): AppState,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let polling = req.uri().path() == "/admin/stats.json";
    let s = session(&app, req.headers()).filter(|_| !polling);
    let mut resp = next.run(req).await;
    if let Some(mut s) = s {
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

/// The answer to a form without its session's CSRF token.
fn csrf_refused() -> Response {
    ApiError::new(
        StatusCode::FORBIDDEN,
        "csrf_invalid",
        "the form's CSRF token is missing or not this session's: reload the page and try again",
    )
    .into_response()
}

fn page(title: &str, body: &str) -> Html<String> {
    Html(format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
<title>{} — Sluice</title><style>{STYLE}main{{max-width:64rem}}table{{border-collapse:collapse;width:100%}}td,th{{text-align:left;padding:.3rem .5rem;border-bottom:1px solid #ddd}}\
.err{{color:#b00020;font-weight:600}}input[aria-invalid=true],textarea[aria-invalid=true]{{border:2px solid #b00020}}textarea{{width:100%;font:inherit}}label{{display:block;margin-top:.5rem}}svg{{width:100%;height:3rem;background:#f6f8fb}}\
form.inline{{display:inline}}.ok{{color:#0a7d32}}</style></head><body><main>{body}</main></body></html>",
        esc(title)
    ))
}

fn login_form(error: Option<&str>) -> Html<String> {
    let err = error
        .map(|e| format!("<p class=\"err\" role=\"alert\">{}</p>", esc(e)))
        .unwrap_or_default();
    page(
        "Sign in",
        &format!(
            "<h1>Sluice operator dashboard</h1>{err}<form method=\"post\" action=\"/admin/login\">\
<label for=\"token\">Operator token</label><input id=\"token\" name=\"token\" type=\"password\" autocomplete=\"current-password\" required>\
<p><button type=\"submit\">Sign in</button></p></form>"
        ),
    )
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
    type Rejection = ApiError;

    async fn from_request(req: axum::extract::Request, state: &S) -> Result<Self, ApiError> {
        Form::<Fields>::from_request(req, state)
            .await
            .map(|Form(f)| AdminForm(f))
            .map_err(crate::error::form_rejection)
    }
}

/// `POST /admin/login`: wrong tokens count towards the client's backoff, like every other
/// operator credential (see [`crate::auth`]).
pub async fn login(
    State(app): AppState,
    headers: HeaderMap,
    axum::Extension(axum::extract::ConnectInfo(peer)): axum::Extension<
        axum::extract::ConnectInfo<std::net::SocketAddr>,
    >,
    AdminForm(f): AdminForm,
) -> Response {
    let mut extensions = axum::http::Extensions::new();
    extensions.insert(axum::extract::ConnectInfo(peer));
    let client = crate::http::client_ip_of(&app, &headers, &extensions);
    let presented = f.get("token").map(|t| t.trim());
    if let Err(e) = app
        .auth
        .check(client, presented, crate::auth::Scope::Operator)
    {
        let text = if e.status == StatusCode::TOO_MANY_REQUESTS {
            "Too many wrong tokens from here: wait a while before trying again."
        } else {
            "That token is not valid."
        };
        let mut r = (e.status, login_form(Some(text))).into_response();
        if let Some(secs) = e.retry_after {
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        return r;
    }
    let mut id = [0u8; 16];
    getrandom::fill(&mut id).expect("OS randomness");
    let t = now(&app);
    let s = Session {
        id,
        issued: t,
        active: t,
    };
    let mut r = see_other("/admin");
    if let Some(v) = s.cookie(&app) {
        r.headers_mut().insert(header::SET_COOKIE, v);
    }
    r
}

/// `POST /admin/logout`: ends the session on every node, not just in this browser.
pub async fn logout(State(app): AppState, headers: HeaderMap, AdminForm(f): AdminForm) -> Response {
    if let Some(s) = session(&app, &headers) {
        if !check_csrf(&app, &s, &f) {
            return csrf_refused();
        }
        let ended = app
            .sluice
            .node
            .write(sluice_statemachine::Command::EndCredential {
                credential: s.id,
                until_ms: s.issued.saturating_add(SESSION_SECS).saturating_mul(1000),
            })
            .await;
        if let Err(e) = ended {
            tracing::warn!(error = %e, "signing out: the session could not be ended everywhere");
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                page(
                    "Sign out",
                    "<p class=\"err\" role=\"alert\">Signing out failed: the cluster could not record it. Try again.</p><p><a href=\"/admin\">Back</a></p>",
                ),
            )
                .into_response();
        }
    }
    let mut r = see_other("/admin");
    r.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_static(
            "sluice_admin=; Path=/admin; HttpOnly; SameSite=Strict; Max-Age=0",
        ),
    );
    r
}

/// The live charts' script, served from `/assets/admin.js`.
const CHART_JS: &str = "<script src=\"/assets/admin.js\" defer></script>";

fn chart(kind: &str, room: &str, label: &str) -> String {
    format!(
        "<figure aria-label=\"{label}\"><svg id=\"{kind}-{r}\" viewBox=\"0 0 200 40\" preserveAspectRatio=\"none\" role=\"img\" aria-label=\"{label} over the last two minutes\">\
<polyline fill=\"none\" stroke=\"currentColor\" stroke-width=\"1.5\" points=\"\"></polyline></svg><figcaption>{label}: <span id=\"{kind}-n-{r}\" aria-live=\"off\"></span></figcaption></figure>",
        r = esc(room)
    )
}

/// `GET /admin`: rooms and cluster, or the sign-in form.
pub async fn dashboard(State(app): AppState, headers: HeaderMap) -> Response {
    let Some(s) = session(&app, &headers) else {
        return login_form(None).into_response();
    };
    let token = csrf(&app, &s);
    let rooms = app
        .sluice
        .list_rooms(None, ROOMS_PAGE_MAX, false)
        .await
        .map(|l| l.rooms)
        .unwrap_or_default();
    let mut rows = String::new();
    for r in &rooms {
        rows.push_str(&format!(
            "<tr><td><a href=\"/admin/rooms/{n}\">{n}</a></td><td>{mode}{paused}</td><td>{w}</td><td>{a} / {c}</td><td>{rate}/min</td><td>{chart}</td></tr>",
            n = esc(&r.name),
            mode = esc(&r.config.mode),
            paused = if r.config.paused { " <strong>(paused)</strong>" } else { "" },
            w = r.waiting,
            a = r.active,
            c = r.config.capacity,
            rate = r.admitted_last_minute,
            chart = chart("waiting", &r.name, "Waiting"),
        ));
    }
    let body = format!(
        "<h1>Sluice operator dashboard</h1><form class=\"inline\" method=\"post\" action=\"/admin/logout\"><input type=\"hidden\" name=\"csrf\" value=\"{token}\"><button>Sign out</button></form>\
<h2>Rooms</h2><table><thead><tr><th>Room</th><th>Mode</th><th>Waiting</th><th>Active / capacity</th><th>Admitted</th><th>Waiting, live</th></tr></thead><tbody>{rows}</tbody></table>\
<form method=\"post\" action=\"/admin/rooms\"><input type=\"hidden\" name=\"csrf\" value=\"{token}\"><label for=\"newroom\">New room name</label>\
<input id=\"newroom\" name=\"name\" pattern=\"[a-z0-9][a-z0-9-]{{0,63}}\" required> <button>Create</button></form>\
{cluster}{CHART_JS}",
        cluster = cluster_html(&app)
    );
    page("Dashboard", &body).into_response()
}

fn cluster_html(app: &App) -> String {
    let s = app.sluice.cluster();
    let mut rows = String::new();
    for (id, n) in &s.nodes {
        let role = if s.leader == Some(*id) {
            "leader"
        } else if s.voters.contains(id) {
            "voter"
        } else {
            "learner"
        };
        let lag = s.replication.get(id).map_or("—".to_string(), |r| {
            format!("{} (matched {})", r.lag, r.matched_index)
        });
        rows.push_str(&format!(
            "<tr><td>{id}</td><td>{role}</td><td>{}</td><td>{}</td><td>{lag}</td></tr>",
            esc(&n.raft),
            esc(&n.http)
        ));
    }
    format!(
        "<h2>Cluster</h2><p>This node: {id} ({state}). Leader: {leader}. Term {term}. Commit index {commit}, applied {applied}, last log {last}.</p>\
<table><thead><tr><th>Node</th><th>Role</th><th>Raft</th><th>HTTP</th><th>Replication lag</th></tr></thead><tbody>{rows}</tbody></table>",
        id = s.id,
        state = esc(&s.state),
        leader = s.leader.map_or("none".into(), |l| l.to_string()),
        term = s.term,
        commit = s.committed_index,
        applied = s.applied_index,
        last = s.last_log_index
    )
}

/// `GET /admin/stats.json`: what the charts draw.
pub async fn stats(State(app): AppState, headers: HeaderMap) -> Response {
    if session(&app, &headers).is_none() {
        return ApiError::unauthorized().into_response();
    }
    match app.sluice.list_rooms(None, ROOMS_PAGE_MAX, false).await {
        Ok(l) => axum::Json(serde_json::json!({
            "rooms": l.rooms.iter().map(|r| serde_json::json!({"name": r.name, "waiting": r.waiting, "active": r.active, "admitted_last_minute": r.admitted_last_minute})).collect::<Vec<_>>()
        }))
        .into_response(),
        Err(e) => e.into_response(),
    }
}

fn input(
    name: &str,
    label: &str,
    value: &str,
    kind: &str,
    errors: &BTreeMap<String, String>,
) -> String {
    let (invalid, err) = match errors.get(name) {
        Some(e) => (
            " aria-invalid=\"true\"",
            format!(
                " <span class=\"err\" id=\"err-{n}\">{}</span>",
                esc(e),
                n = esc(name)
            ),
        ),
        None => ("", String::new()),
    };
    let described = if err.is_empty() {
        String::new()
    } else {
        format!(" aria-describedby=\"err-{}\"", esc(name))
    };
    if kind == "checkbox" {
        let checked = if value == "true" { " checked" } else { "" };
        format!("<label><input type=\"checkbox\" name=\"{n}\"{checked}{invalid}{described}> {label}</label>{err}", n = esc(name))
    } else {
        format!(
            "<label for=\"f-{n}\">{label}</label><input id=\"f-{n}\" name=\"{n}\" type=\"{kind}\" value=\"{v}\"{invalid}{described}>{err}",
            n = esc(name),
            v = esc(value)
        )
    }
}

fn select(id: &str, name: &str, label: &str, value: &str, options: &[&str]) -> String {
    let opts: String = options
        .iter()
        .map(|o| {
            format!(
                "<option value=\"{o}\"{}>{o}</option>",
                if *o == value { " selected" } else { "" }
            )
        })
        .collect();
    format!(
        "<label for=\"{id}\">{label}</label><select id=\"{id}\" name=\"{name}\">{opts}</select>"
    )
}

/// The configuration form's fields for what the line shows and how the origin is watched.
fn line_and_origin_inputs(cfg: &RoomConfigBody, errors: &BTreeMap<String, String>) -> String {
    let opt = |v: Option<u64>| v.map(|x| x.to_string()).unwrap_or_default();
    let o = cfg.origin.clone().unwrap_or_default();
    let watched = cfg.origin.is_some();
    let probe = o.probe.as_ref();
    let probe_num = |f: fn(&crate::model::ProbeBody) -> u64| opt(probe.map(f));
    [
        input(
            "line.show_waiting",
            "Show waiters how many are waiting",
            &cfg.line.show_waiting.to_string(),
            "checkbox",
            errors,
        ),
        input(
            "line.show_positions",
            "Show waiters their place in line",
            &cfg.line.show_positions.to_string(),
            "checkbox",
            errors,
        ),
        input(
            "line.status_reads_per_sec",
            "Polling budget, status reads per second (empty: none)",
            &opt(cfg.line.status_reads_per_sec),
            "number",
            errors,
        ),
        input(
            "origin.probe.url",
            "Origin probe URL (empty: no probe)",
            probe.map_or("", |p| p.url.as_str()),
            "text",
            errors,
        ),
        input(
            "origin.probe.interval_secs",
            "Origin probe: every, seconds",
            &probe_num(|p| p.interval_secs),
            "number",
            errors,
        ),
        input(
            "origin.probe.timeout_ms",
            "Origin probe: timeout, ms",
            &probe_num(|p| p.timeout_ms),
            "number",
            errors,
        ),
        input(
            "origin.slow_latency_ms",
            "Origin slow above latency, ms (empty: not judged)",
            &opt(o.slow_latency_ms.filter(|_| watched)),
            "number",
            errors,
        ),
        input(
            "origin.down_latency_ms",
            "Origin down above latency, ms (empty: not judged)",
            &opt(o.down_latency_ms.filter(|_| watched)),
            "number",
            errors,
        ),
        input(
            "origin.slow_error_permille",
            "Origin slow from errors, per mille (empty: not judged)",
            &opt(o.slow_error_permille.filter(|_| watched)),
            "number",
            errors,
        ),
        input(
            "origin.down_error_permille",
            "Origin down from errors, per mille (empty: not judged)",
            &opt(o.down_error_permille.filter(|_| watched)),
            "number",
            errors,
        ),
        input(
            "origin.latency_percentile",
            "Origin latency percentile",
            &o.latency_percentile.to_string(),
            "number",
            errors,
        ),
        input(
            "origin.window_secs",
            "Origin window, seconds",
            &o.window_secs.to_string(),
            "number",
            errors,
        ),
        input(
            "origin.min_samples",
            "Origin: fewest samples for a verdict",
            &o.min_samples.to_string(),
            "number",
            errors,
        ),
        input(
            "origin.worsen_after_secs",
            "Origin: worsen after, seconds",
            &o.worsen_after_secs.to_string(),
            "number",
            errors,
        ),
        input(
            "origin.recover_after_secs",
            "Origin: recover after, seconds",
            &o.recover_after_secs.to_string(),
            "number",
            errors,
        ),
        input(
            "origin.auto_pause",
            "Pause the room while the origin is down",
            &o.auto_pause.to_string(),
            "checkbox",
            errors,
        ),
    ]
    .concat()
}

/// The configuration form's fields for the bypass rules: one path rule per line
/// (`[METHOD,…] /prefix`), one network per line.
fn bypass_inputs(cfg: &RoomConfigBody, errors: &BTreeMap<String, String>) -> String {
    let paths: Vec<String> = cfg
        .bypass
        .paths
        .iter()
        .map(|p| {
            if p.methods.is_empty() {
                p.prefix.clone()
            } else {
                format!("{} {}", p.methods.join(","), p.prefix)
            }
        })
        .collect();
    let area = |name: &str, label: &str, value: &str| {
        let err = errors
            .get(name)
            .map(|e| format!(" <span class=\"err\" id=\"err-{name}\">{}</span>", esc(e)))
            .unwrap_or_default();
        let invalid = if err.is_empty() {
            String::new()
        } else {
            format!(" aria-invalid=\"true\" aria-describedby=\"err-{name}\"")
        };
        format!(
            "<label for=\"f-{name}\">{label}</label><textarea id=\"f-{name}\" name=\"{name}\" rows=\"3\"{invalid}>{}</textarea>{err}",
            esc(value)
        )
    };
    [
        area(
            "bypass.paths",
            "Bypass paths, one per line: <code>/static/</code> or <code>POST /pay/callback</code> (no place taken)",
            &paths.join("\n"),
        ),
        area(
            "bypass.networks",
            "Bypass client networks, one per line (<code>10.1.0.0/16</code>)",
            &cfg.bypass.networks.join("\n"),
        ),
        input(
            "bypass.staff_tokens",
            "Accept staff bypass tokens",
            &cfg.bypass.staff_tokens.to_string(),
            "checkbox",
            errors,
        ),
    ]
    .concat()
}

/// Most codes the dashboard makes at once (more with `sluice ctl codes create`).
const DASHBOARD_CODES_MAX: u64 = 1_000;

/// The room page's access-code section: the lanes' counts, the batches with their uses (and a
/// button to end each), and a form that makes a batch.
fn codes_section(app: &App, room: &str, lanes: &[crate::model::LaneBody], token: &str) -> String {
    let r = esc(room);
    let hidden = format!("<input type=\"hidden\" name=\"csrf\" value=\"{token}\">");
    let view = app
        .sluice
        .node
        .read(|st| st.sm.room(room))
        .ok()
        .and_then(|(v, _)| v);
    let lane_rows: String = view
        .iter()
        .flat_map(|v| v.lanes.iter())
        .map(|l| {
            format!(
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&l.name),
                if l.open { "open" } else { "not yet" },
                l.waiting,
                l.joined,
                l.admitted,
                l.redeemed
            )
        })
        .collect();
    let lanes_table = if lane_rows.is_empty() {
        String::new()
    } else {
        format!(
            "<table><caption>Lanes</caption><tr><th>Lane</th><th>Admitting</th><th>Waiting</th><th>Joined</th><th>Admitted</th><th>Codes redeemed</th></tr>{lane_rows}</table>"
        )
    };
    let batches: Vec<crate::model::CodeBatchBody> = app
        .sluice
        .node
        .read(|st| st.sm.code_batches(room))
        .ok()
        .and_then(|(b, _)| b.ok())
        .unwrap_or_default()
        .iter()
        .map(crate::model::CodeBatchBody::from)
        .collect();
    let batch_rows: String = batches
        .iter()
        .map(|b| {
            format!(
                "<tr><td>{id}</td><td>{label}</td><td>{lane}</td><td>{uses}</td><td>{codes}</td><td>{used}</td><td>{used_up}</td><td>{exp}</td>\
<td><form class=\"inline\" method=\"post\" action=\"/admin/rooms/{r}/action\">{hidden}<input type=\"hidden\" name=\"action\" value=\"codes_end\">\
<input type=\"hidden\" name=\"batch\" value=\"{id}\"><button aria-label=\"End batch {id}\">End</button></form></td></tr>",
                id = b.id,
                label = esc(&b.label),
                lane = esc(b.lane.as_deref().unwrap_or("(own line)")),
                uses = b.uses,
                codes = b.codes,
                used = b.used,
                used_up = b.used_up,
                exp = b.expires_at.map_or("never".to_string(), |t| t.to_string()),
            )
        })
        .collect();
    let batch_table = if batch_rows.is_empty() {
        "<p>No access codes yet.</p>".to_string()
    } else {
        format!(
            "<table><caption>Code batches</caption><tr><th>Batch</th><th>Label</th><th>Lane</th><th>Uses each</th><th>Codes</th><th>Uses taken</th><th>Used up</th><th>Expires (unix s)</th><th></th></tr>{batch_rows}</table>"
        )
    };
    let lane_options: String =
        std::iter::once("<option value=\"\">(the room's own line)</option>".to_string())
            .chain(
                lanes
                    .iter()
                    .map(|l| format!("<option>{}</option>", esc(&l.name))),
            )
            .collect();
    format!(
        "<h2>Access codes</h2>{lanes_table}{batch_table}\
<form method=\"post\" action=\"/admin/rooms/{r}/action\">{hidden}<input type=\"hidden\" name=\"action\" value=\"codes_create\">\
<label for=\"f-ccount\">How many (at most {DASHBOARD_CODES_MAX}; more with sluice ctl codes create)</label><input id=\"f-ccount\" name=\"count\" type=\"number\" min=\"1\" max=\"{DASHBOARD_CODES_MAX}\" value=\"10\">\
<label for=\"f-cuses\">Uses per code</label><input id=\"f-cuses\" name=\"uses\" type=\"number\" min=\"1\" value=\"1\">\
<label for=\"f-clane\">Lane</label><select id=\"f-clane\" name=\"lane\">{lane_options}</select>\
<label for=\"f-cexp\">Valid for, hours (empty: no end)</label><input id=\"f-cexp\" name=\"expires_hours\" type=\"number\" min=\"1\">\
<label for=\"f-clabel\">Label</label><input id=\"f-clabel\" name=\"label\" maxlength=\"64\"> <button>Make codes</button></form>"
    )
}

/// The configuration form's field for the priority lanes: one per line, in order,
/// `name [opens=UNIX-SECONDS] [share=0.5] [lottery]`.
fn lane_inputs(cfg: &RoomConfigBody, errors: &BTreeMap<String, String>) -> String {
    let lines: Vec<String> = cfg
        .lanes
        .iter()
        .map(|l| {
            let mut line = l.name.clone();
            if let Some(t) = l.opens_at {
                line.push_str(&format!(" opens={t}"));
            }
            if let Some(s) = l.share {
                line.push_str(&format!(" share={s}"));
            }
            if l.order == "lottery" {
                line.push_str(" lottery");
            }
            line
        })
        .collect();
    // The form's own parse names `lanes`; the state machine's checks `entry.lanes.…`.
    let err = errors
        .iter()
        .find(|(k, _)| k.starts_with("lanes") || k.starts_with("entry.lanes"))
        .map(|(_, e)| format!(" <span class=\"err\" id=\"err-lanes\">{}</span>", esc(e)))
        .unwrap_or_default();
    let invalid = if err.is_empty() {
        ""
    } else {
        " aria-invalid=\"true\" aria-describedby=\"err-lanes\""
    };
    format!(
        "<label for=\"f-lanes\">Priority lanes before the room's own line, one per line, first first: \
<code>presale opens=1767225600 share=0.5 lottery</code> (opens, share and lottery optional)</label>\
<textarea id=\"f-lanes\" name=\"lanes\" rows=\"3\"{invalid}>{}</textarea>{err}",
        esc(&lines.join("\n"))
    )
}

/// The lanes part of the configuration form.
fn parse_lanes(f: &Fields) -> Result<Vec<crate::model::LaneBody>, (String, String)> {
    let bad = |l: &str, why: &str| ("lanes".to_string(), format!("{l:?}: {why}"));
    f.get("lanes")
        .map(|v| {
            v.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect::<Vec<_>>()
        })
        .unwrap_or_default()
        .into_iter()
        .map(|l| {
            let mut words = l.split_whitespace();
            let mut lane = crate::model::LaneBody {
                name: words.next().unwrap_or_default().to_string(),
                opens_at: None,
                share: None,
                order: "fifo".into(),
            };
            for w in words {
                if w == "lottery" {
                    lane.order = "lottery".into();
                } else if let Some(t) = w.strip_prefix("opens=") {
                    lane.opens_at =
                        Some(t.parse().map_err(|_| bad(l, "opens= takes unix seconds"))?);
                } else if let Some(s) = w.strip_prefix("share=") {
                    lane.share = Some(
                        s.parse()
                            .map_err(|_| bad(l, "share= takes a fraction, 0.5"))?,
                    );
                } else {
                    return Err(bad(
                        l,
                        "write name [opens=UNIX-SECONDS] [share=0.5] [lottery]",
                    ));
                }
            }
            Ok(lane)
        })
        .collect()
}

/// The bypass part of the configuration form.
fn parse_bypass(f: &Fields) -> Result<crate::model::BypassBody, (String, String)> {
    let lines = |k: &str| -> Vec<String> {
        f.get(k)
            .map(|v| {
                v.lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    };
    let paths = lines("bypass.paths")
        .into_iter()
        .map(|l| {
            let mut words = l.split_whitespace();
            match (words.next(), words.next(), words.next()) {
                (Some(prefix), None, _) => Ok(crate::model::BypassPathBody {
                    prefix: prefix.to_string(),
                    methods: vec![],
                }),
                (Some(methods), Some(prefix), None) => Ok(crate::model::BypassPathBody {
                    prefix: prefix.to_string(),
                    methods: methods.split(',').map(str::to_string).collect(),
                }),
                _ => Err((
                    "bypass.paths".to_string(),
                    format!("{l:?}: write /prefix or METHOD,METHOD /prefix"),
                )),
            }
        })
        .collect::<Result<_, _>>()?;
    Ok(crate::model::BypassBody {
        paths,
        networks: lines("bypass.networks"),
        staff_tokens: f.contains_key("bypass.staff_tokens"),
    })
}

/// A form field holding a whole number, or empty (`None`).
fn opt_num(f: &Fields, k: &str) -> Result<Option<u64>, (String, String)> {
    match f.get(k).map(|v| v.trim()).filter(|v| !v.is_empty()) {
        None => Ok(None),
        Some(v) => v
            .parse()
            .map(Some)
            .map_err(|_| (k.to_string(), "must be a whole number or empty".to_string())),
    }
}

/// The line and origin parts of the configuration form. The origin is watched when a probe URL
/// or any threshold is given.
fn parse_line_and_origin(
    f: &Fields,
) -> Result<(crate::model::LineBody, Option<crate::model::OriginBody>), (String, String)> {
    let opt_num = |k: &str| opt_num(f, k);
    let line = crate::model::LineBody {
        show_waiting: f.contains_key("line.show_waiting"),
        show_positions: f.contains_key("line.show_positions"),
        status_reads_per_sec: opt_num("line.status_reads_per_sec")?,
    };
    let d = crate::model::OriginBody::default();
    let url = f
        .get("origin.probe.url")
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty());
    let probe = url.map(|url| -> Result<_, (String, String)> {
        Ok(crate::model::ProbeBody {
            url,
            method: "GET".into(),
            interval_secs: opt_num("origin.probe.interval_secs")?.unwrap_or(5),
            timeout_ms: opt_num("origin.probe.timeout_ms")?.unwrap_or(2_000),
        })
    });
    let origin = crate::model::OriginBody {
        probe: probe.transpose()?,
        window_secs: opt_num("origin.window_secs")?.unwrap_or(d.window_secs),
        min_samples: opt_num("origin.min_samples")?.unwrap_or(d.min_samples),
        latency_percentile: opt_num("origin.latency_percentile")?.unwrap_or(d.latency_percentile),
        slow_latency_ms: opt_num("origin.slow_latency_ms")?,
        down_latency_ms: opt_num("origin.down_latency_ms")?,
        slow_error_permille: opt_num("origin.slow_error_permille")?,
        down_error_permille: opt_num("origin.down_error_permille")?,
        worsen_after_secs: opt_num("origin.worsen_after_secs")?.unwrap_or(d.worsen_after_secs),
        recover_after_secs: opt_num("origin.recover_after_secs")?.unwrap_or(d.recover_after_secs),
        auto_pause: f.contains_key("origin.auto_pause"),
    };
    let watched = origin.probe.is_some()
        || origin.slow_latency_ms.is_some()
        || origin.down_latency_ms.is_some()
        || origin.slow_error_permille.is_some()
        || origin.down_error_permille.is_some();
    Ok((line, watched.then_some(origin)))
}

fn room_page(
    app: &App,
    session: &Session,
    room: &str,
    cfg: &RoomConfigBody,
    errors: &BTreeMap<String, String>,
    notice: Option<&str>,
) -> Html<String> {
    let token = csrf(app, session);
    let opt = |v: Option<u64>| v.map(|x| x.to_string()).unwrap_or_default();
    let b = &cfg.branding;
    let general = errors
        .get("")
        .map(|e| format!("<p class=\"err\" role=\"alert\">{}</p>", esc(e)))
        .unwrap_or_default();
    let notice = notice
        .map(|n| format!("<p class=\"ok\" role=\"status\">{}</p>", esc(n)))
        .unwrap_or_default();
    let codes = codes_section(app, room, &cfg.lanes, &token);
    let hidden = format!("<input type=\"hidden\" name=\"csrf\" value=\"{token}\">");
    let r = esc(room);
    let body = format!(
        "<p><a href=\"/admin\">← All rooms</a></p><h1>Room {r}</h1>{notice}{general}\
<section aria-label=\"Live\">{}{}{}</section>\
<h2>Actions</h2>\
<form class=\"inline\" method=\"post\" action=\"/admin/rooms/{r}/action\">{hidden}<input type=\"hidden\" name=\"action\" value=\"{pause_action}\"><button>{pause_label}</button></form>\
<form method=\"post\" action=\"/admin/rooms/{r}/action\">{hidden}<input type=\"hidden\" name=\"action\" value=\"mode\">{} <button>Set mode</button></form>\
<form method=\"post\" action=\"/admin/rooms/{r}/action\">{hidden}<input type=\"hidden\" name=\"action\" value=\"health\">{}<label for=\"f-sf\">Slow factor (0–1)</label><input id=\"f-sf\" name=\"slow_factor\" value=\"{sf}\"> <button>Set health</button></form>\
<form method=\"post\" action=\"/admin/rooms/{r}/action\">{hidden}<input type=\"hidden\" name=\"action\" value=\"admit\"><label for=\"f-count\">Admit now (count)</label><input id=\"f-count\" name=\"count\" type=\"number\" min=\"1\" value=\"1\"> <button>Admit</button></form>\
<form method=\"post\" action=\"/admin/rooms/{r}/action\">{hidden}<input type=\"hidden\" name=\"action\" value=\"revoke\"><label for=\"f-vid\">Revoke visitor id</label><input id=\"f-vid\" name=\"visitor_id\"> \
<input type=\"checkbox\" id=\"f-rall\" name=\"confirm_all\" value=\"yes\"><label for=\"f-rall\">End every session (no visitor id)</label> <button>Revoke</button></form>\
<h2>Staff bypass tokens</h2>\
<form method=\"post\" action=\"/admin/rooms/{r}/action\">{hidden}<input type=\"hidden\" name=\"action\" value=\"bypass_issue\"><label for=\"f-bttl\">Valid for, hours (at most 168)</label><input id=\"f-bttl\" name=\"ttl_hours\" type=\"number\" min=\"1\" max=\"168\" value=\"8\"><label for=\"f-blabel\">For whom</label><input id=\"f-blabel\" name=\"label\" maxlength=\"64\"> <button>Issue a token</button></form>\
<form method=\"post\" action=\"/admin/rooms/{r}/action\">{hidden}<input type=\"hidden\" name=\"action\" value=\"bypass_revoke\"><label for=\"f-bid\">Revoke the token with id</label><input id=\"f-bid\" name=\"id\" maxlength=\"32\"> <button>Revoke token</button></form>\
{codes}<h2>Configuration</h2><form method=\"post\" action=\"/admin/rooms/{r}/config\">{hidden}{}{}{}{}{}{}{}{}{}{}{}{}{}{}{}{}{}{}{}{}{}{}{}{}{}{}{}{}{}{}{}{}{}{}{}\
<p><button type=\"submit\">Save configuration</button></p></form>{CHART_JS}",
        chart("waiting", room, "Waiting"),
        chart("active", room, "Active"),
        chart("rate", room, "Admitted in the last minute"),
        select("a-mode", "mode", "Mode", &cfg.mode, &["fifo", "lottery", "passthrough", "reject"]),
        select("a-health", "health", "Origin health", &cfg.health, &["ok", "slow", "down"]),
        input("capacity", "Capacity (active sessions)", &cfg.capacity.to_string(), "number", errors),
        input("admit_per_minute", "Admissions per minute", &cfg.admit_per_minute.to_string(), "number", errors),
        input("admit_burst", "Burst (0 = one second's worth)", &cfg.admit_burst.to_string(), "number", errors),
        input("session_ttl_secs", "Session TTL, seconds", &cfg.session_ttl_secs.to_string(), "number", errors),
        input("waiter_ttl_secs", "Waiter TTL, seconds", &cfg.waiter_ttl_secs.to_string(), "number", errors),
        input("max_waiting", "Most waiters", &cfg.max_waiting.to_string(), "number", errors),
        select("f-mode", "mode", "Mode", &cfg.mode, &["fifo", "lottery", "passthrough", "reject"]),
        input("opens_at", "Opens at (unix seconds, empty: open)", &opt(cfg.opens_at), "number", errors),
        input("closes_at", "Closes at (unix seconds, empty: never)", &opt(cfg.closes_at), "number", errors),
        input("shuffle_at_open", "Shuffle the pre-queue at opening", &cfg.shuffle_at_open.to_string(), "checkbox", errors),
        input("paused", "Paused", &cfg.paused.to_string(), "checkbox", errors),
        select("f-health", "health", "Origin health", &cfg.health, &["ok", "slow", "down"]),
        input("slow_factor", "Slow factor (0–1)", &cfg.slow_factor.to_string(), "text", errors),
        input("branding.title", "Page title", b.title.as_deref().unwrap_or(""), "text", errors),
        input("branding.message", "Message", b.message.as_deref().unwrap_or(""), "text", errors),
        input("branding.accent_color", "Accent colour (#rrggbb)", b.accent_color.as_deref().unwrap_or(""), "text", errors),
        input("branding.background_color", "Background colour (#rrggbb)", b.background_color.as_deref().unwrap_or(""), "text", errors),
        input("branding.logo_url", "Logo URL", b.logo_url.as_deref().unwrap_or(""), "text", errors),
        input("entry.places_per_client_max", "Most places per client network (empty: no limit)", &opt(cfg.entry.places_per_client_max), "number", errors),
        input("entry.sessions_per_client_max", "Most admitted sessions per client network (empty: no limit)", &opt(cfg.entry.sessions_per_client_max), "number", errors),
        input("entry.first_use_ttl_secs", "Use an admission within, seconds (empty: the session TTL)", &opt(cfg.entry.first_use_ttl_secs), "number", errors),
        input("entry.client_prefix_v4", "Client network: IPv4 prefix bits", &cfg.entry.client_prefix_v4.to_string(), "number", errors),
        input("entry.client_prefix_v6", "Client network: IPv6 prefix bits", &cfg.entry.client_prefix_v6.to_string(), "number", errors),
        input("entry.pow.work", "Proof-of-work: counters to try (empty: none)", &opt(cfg.entry.proof_of_work.as_ref().map(|p| u64::from(p.work))), "number", errors),
        input("entry.pow.cost", "Proof-of-work: PBKDF2 iterations per counter", &opt(cfg.entry.proof_of_work.as_ref().map(|p| u64::from(p.cost))), "number", errors),
        input("entry.identity_required", "One place per signed-in customer (the shop's identity assertion)", &cfg.entry.identity_required.to_string(), "checkbox", errors),
        input("entry.invite_only", "By invitation only (a place needs an access code)", &cfg.entry.invite_only.to_string(), "checkbox", errors),
        input("entry.networks_per_session_max", "Most client networks per admitted session (empty: not counted)", &opt(cfg.entry.networks_per_session_max), "number", errors),
        input("entry.networks_window_secs", "Forget a session's network not seen for, seconds (empty: never)", &opt(cfg.entry.networks_window_secs), "number", errors),
        input("entry.external_challenge.provider", "External challenge provider (empty: none)", cfg.entry.external_challenge.as_ref().map_or("", |e| e.provider.as_str()), "text", errors),
        input("entry.external_challenge.fail_open", "External challenge: let joins through when the provider is down", &cfg.entry.external_challenge.as_ref().is_some_and(|e| e.fail_open).to_string(), "checkbox", errors),
        input("entry.pow.double_every_waiting", "Proof-of-work: doubles for every this many waiting (empty: never)", &opt(cfg.entry.proof_of_work.as_ref().and_then(|p| p.double_every_waiting)), "number", errors),
        line_and_origin_inputs(cfg, errors),
        bypass_inputs(cfg, errors),
        lane_inputs(cfg, errors),
        pause_action = if cfg.paused { "resume" } else { "pause" },
        pause_label = if cfg.paused { "Resume" } else { "Pause" },
        sf = cfg.slow_factor,
    );
    page(&format!("Room {room}"), &body)
}

/// `GET /admin/rooms/{room}`.
pub async fn room(State(app): AppState, Path(room): Path<String>, headers: HeaderMap) -> Response {
    let Some(s) = session(&app, &headers) else {
        return see_other("/admin");
    };
    // Right after an action, the page shows its result and the state it left (a linearizable
    // read: this node may not have applied the action yet).
    let flash = app.flash.take(&s);
    match app.sluice.get_room(&room, flash.is_some()).await {
        Ok(r) => {
            let health = r
                .health_change
                .as_ref()
                .map(|c| format!("Origin health: {}.", c.reason));
            // The last action's result first, once.
            let note = match (flash, health) {
                (Some(f), Some(h)) => Some(format!("{f} {h}")),
                (f, h) => f.or(h),
            };
            let mut resp = room_page(
                &app,
                &s,
                &room,
                &r.config,
                &BTreeMap::new(),
                note.as_deref(),
            )
            .into_response();
            resp.headers_mut().insert(
                axum::http::header::CACHE_CONTROL,
                axum::http::HeaderValue::from_static("no-store"),
            );
            resp
        }
        Err(e) => (
            e.status,
            page(
                "Not found",
                &format!(
                    "<p>{}</p><p><a href=\"/admin\">Back</a></p>",
                    esc(&e.message)
                ),
            ),
        )
            .into_response(),
    }
}

fn parse_config(f: &Fields) -> Result<RoomConfigBody, (String, String)> {
    let num = |k: &str| -> Result<u64, (String, String)> {
        f.get(k)
            .map(|v| v.trim())
            .unwrap_or("0")
            .parse()
            .map_err(|_| (k.to_string(), "must be a whole number".to_string()))
    };
    let opt_num = |k: &str| opt_num(f, k);
    let text = |k: &str| {
        f.get(k)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    let d = crate::model::EntryBody::default();
    let bits = |k: &str| -> Result<u8, (String, String)> {
        match f.get(k).map(|v| v.trim()).filter(|v| !v.is_empty()) {
            None => Ok(if k.ends_with("v4") {
                d.client_prefix_v4
            } else {
                d.client_prefix_v6
            }),
            Some(v) => v
                .parse()
                .map_err(|_| (k.to_string(), "must be a number of bits".to_string())),
        }
    };
    let (line, origin) = parse_line_and_origin(f)?;
    Ok(RoomConfigBody {
        line,
        origin,
        bypass: parse_bypass(f)?,
        lanes: parse_lanes(f)?,
        capacity: num("capacity")?,
        admit_per_minute: num("admit_per_minute")?,
        admit_burst: num("admit_burst")?,
        session_ttl_secs: num("session_ttl_secs")?,
        waiter_ttl_secs: num("waiter_ttl_secs")?,
        mode: f.get("mode").cloned().unwrap_or_else(|| "fifo".into()),
        opens_at: opt_num("opens_at")?,
        closes_at: opt_num("closes_at")?,
        shuffle_at_open: f.contains_key("shuffle_at_open"),
        max_waiting: num("max_waiting")?,
        paused: f.contains_key("paused"),
        health: f.get("health").cloned().unwrap_or_else(|| "ok".into()),
        slow_factor: f
            .get("slow_factor")
            .and_then(|v| v.trim().parse().ok())
            .ok_or((
                "slow_factor".to_string(),
                "must be a number between 0 and 1".to_string(),
            ))?,
        branding: BrandingBody {
            title: text("branding.title"),
            message: text("branding.message"),
            accent_color: text("branding.accent_color"),
            background_color: text("branding.background_color"),
            logo_url: text("branding.logo_url"),
        },
        entry: EntryBody {
            first_use_ttl_secs: opt_num("entry.first_use_ttl_secs")?,
            places_per_client_max: opt_num("entry.places_per_client_max")?,
            sessions_per_client_max: opt_num("entry.sessions_per_client_max")?,
            client_prefix_v4: bits("entry.client_prefix_v4")?,
            client_prefix_v6: bits("entry.client_prefix_v6")?,
            proof_of_work: match opt_num("entry.pow.work")? {
                None => None,
                Some(work) => {
                    let small = |k: &str, v: u64| {
                        u32::try_from(v).map_err(|_| (k.to_string(), "is too large".to_string()))
                    };
                    Some(crate::model::PowBody {
                        work: small("entry.pow.work", work)?,
                        cost: match opt_num("entry.pow.cost")? {
                            Some(c) => small("entry.pow.cost", c)?,
                            None => crate::model::POW_COST_DEFAULT,
                        },
                        double_every_waiting: opt_num("entry.pow.double_every_waiting")?,
                        work_max: None,
                    })
                }
            },
            identity_required: f.contains_key("entry.identity_required"),
            invite_only: f.contains_key("entry.invite_only"),
            grace_secs: opt_num("entry.grace_secs")?,
            networks_per_session_max: opt_num("entry.networks_per_session_max")?,
            networks_window_secs: opt_num("entry.networks_window_secs")?,
            external_challenge: text("entry.external_challenge.provider").map(|provider| {
                crate::model::ExternalChallengeBody {
                    provider,
                    fail_open: f.contains_key("entry.external_challenge.fail_open"),
                }
            }),
        },
    })
}

/// `POST /admin/rooms/{room}/config`: save, or show the form again with the error at its field.
pub async fn save_config(
    State(app): AppState,
    Path(room): Path<String>,
    headers: HeaderMap,
    AdminForm(f): AdminForm,
) -> Response {
    let Some(s) = session(&app, &headers) else {
        return see_other("/admin");
    };
    if !check_csrf(&app, &s, &f) {
        return csrf_refused();
    }
    let body = match parse_config(&f) {
        Ok(b) => b,
        Err((field, msg)) => {
            let cfg = app
                .sluice
                .get_room(&room, false)
                .await
                .map(|r| r.config)
                .unwrap_or_default();
            return (
                StatusCode::BAD_REQUEST,
                room_page(&app, &s, &room, &cfg, &BTreeMap::from([(field, msg)]), None),
            )
                .into_response();
        }
    };
    match app.sluice.put_room(&room, &body, false).await {
        Ok(_) => {
            app.flash.put(&s, "Saved.".into());
            see_other(&format!("/admin/rooms/{room}"))
        }
        Err(e) => {
            let field = e.field.clone().unwrap_or_default();
            (
                e.status,
                room_page(
                    &app,
                    &s,
                    &room,
                    &body,
                    &BTreeMap::from([(field, e.message.clone())]),
                    None,
                ),
            )
                .into_response()
        }
    }
}

/// `POST /admin/rooms`: create a room with default settings.
pub async fn create_room(
    State(app): AppState,
    headers: HeaderMap,
    AdminForm(f): AdminForm,
) -> Response {
    let Some(s) = session(&app, &headers) else {
        return see_other("/admin");
    };
    if !check_csrf(&app, &s, &f) {
        return csrf_refused();
    }
    let name = f.get("name").cloned().unwrap_or_default();
    // Create only: a name already taken is refused, never reset to the defaults.
    match app
        .sluice
        .put_room(&name, &RoomConfigBody::default(), true)
        .await
    {
        Ok(_) => see_other(&format!("/admin/rooms/{name}")),
        Err(e) => (
            e.status,
            page(
                "Error",
                &format!(
                    "<p class=\"err\">{}</p><p><a href=\"/admin\">Back</a></p>",
                    esc(&e.message)
                ),
            ),
        )
            .into_response(),
    }
}

/// `POST /admin/rooms/{room}/action`: pause, resume, mode, health, admit, revoke.
pub async fn action(
    State(app): AppState,
    Path(room): Path<String>,
    headers: HeaderMap,
    AdminForm(f): AdminForm,
) -> Response {
    let Some(s) = session(&app, &headers) else {
        return see_other("/admin");
    };
    if !check_csrf(&app, &s, &f) {
        return csrf_refused();
    }
    let get = |k: &str| f.get(k).map(|v| v.trim().to_string()).unwrap_or_default();
    let sl = &app.sluice;
    let result: Result<String, ApiError> = async {
        Ok(match get("action").as_str() {
            "pause" => sl.pause(&room, true).await.map(|_| "Paused.".to_string())?,
            "resume" => sl
                .pause(&room, false)
                .await
                .map(|_| "Resumed.".to_string())?,
            "mode" => sl
                .set_mode(&room, &get("mode"))
                .await
                .map(|r| format!("Mode is now {}.", r.config.mode))?,
            "health" => {
                let sf = Some(get("slow_factor"))
                    .filter(|v| !v.is_empty())
                    .map(|v| v.parse::<f64>().unwrap_or(-1.0));
                sl.set_health(&room, &get("health"), sf)
                    .await
                    .map(|r| format!("Health is now {}.", r.config.health))?
            }
            "admit" => {
                let n = get("count")
                    .parse::<u64>()
                    .map_err(|_| ApiError::invalid("count", "must be a whole number"))?;
                sl.admit(&room, n)
                    .await
                    .map(|c| format!("Admitted {}.", c.count))?
            }
            "bypass_issue" => {
                let hours = get("ttl_hours")
                    .parse::<u64>()
                    .map_err(|_| ApiError::invalid("ttl_hours", "must be a whole number"))?;
                let t = sl.issue_bypass_token(&room, hours.saturating_mul(3_600), &get("label"))?;
                format!(
                    "Staff token (id {}), shown once; valid until {} (unix seconds). Give it to its holder, who enters it at /wait/{room}/bypass: {}",
                    t.id, t.expires_at, t.token
                )
            }
            "codes_create" => {
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
                    h => Some(
                        app.sluice.node.now_ms() / 1000
                            + h.parse::<u64>()
                                .map_err(|_| ApiError::invalid("expires_hours", "must be a whole number"))?
                                .saturating_mul(3_600),
                    ),
                };
                let body = crate::model::CodesCreateBody {
                    count: Some(count),
                    uses,
                    expires_at,
                    lane: Some(get("lane")).filter(|l| !l.is_empty()),
                    label: get("label"),
                    identities: Vec::new(),
                };
                let made = sl.create_codes(&room, &body).await?;
                format!(
                    "{} codes made (batch {}), shown this once; keep them: {}",
                    made.codes.len(),
                    made.batch.id,
                    made.codes.join(" ")
                )
            }
            "codes_end" => {
                let batch = get("batch")
                    .parse::<u32>()
                    .map_err(|_| ApiError::invalid("batch", "a batch number"))?;
                let n = sl.end_codes(&room, batch).await?;
                format!("Batch {batch} ended: its {} codes no longer work.", n.count)
            }
            "bypass_revoke" => {
                let body = crate::model::BypassRevokeBody {
                    token: None,
                    id: Some(get("id")),
                };
                sl.revoke_bypass_token(&room, &body).await?;
                "Token revoked on every node.".to_string()
            }
            "revoke" => {
                let v = get("visitor_id");
                let r = if v.is_empty() {
                    if get("confirm_all") != "yes" {
                        return Err(ApiError::invalid(
                            "confirm_all",
                            "to end every session of the room, give no visitor id and tick \"End every session\"",
                        ));
                    }
                    sl.revoke(&room, None, true).await?
                } else {
                    sl.revoke(&room, Some(&v), false).await?
                };
                format!("Revoked {}.", r.count)
            }
            other => {
                return Err(ApiError::invalid(
                    "action",
                    format!("unknown action {other:?}"),
                ))
            }
        })
    }
    .await;
    match result {
        Ok(msg) => {
            // Post, redirect, get: a reload of the room's page repeats nothing.
            app.flash.put(&s, msg);
            see_other(&format!("/admin/rooms/{room}"))
        }
        Err(e) => {
            let cfg = sl
                .get_room(&room, true)
                .await
                .map(|r| r.config)
                .unwrap_or_default();
            (
                e.status,
                room_page(
                    &app,
                    &s,
                    &room,
                    &cfg,
                    &BTreeMap::from([(String::new(), e.message.clone())]),
                    None,
                ),
            )
                .into_response()
        }
    }
}
