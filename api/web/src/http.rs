//! The HTTP API (axum): visitor endpoints, the proxy gate, operator endpoints, pages, metrics,
//! health and the OpenAPI document. Handlers only parse and render; [`Sluice`] does the work.

use crate::app::{
    client_ip, client_ip_of, client_of, cookie, error_with_cookie, retire_legacy_cookie,
    set_ticket_cookie, AppState,
};
pub use crate::app::{cookie_name, cookie_ticket, App, Path, Query, COOKIE};
use crate::error::ApiError;
use crate::error::IntoHttp;
use crate::error::Kind;
use crate::pages;
use axum::body::Bytes;
use axum::extract::{FromRequest, MatchedPath, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{any, delete, get, post};
use axum::{Json, Router};
use serde::Deserialize;
use sluice_gate::rate::ClientLimiter;
use sluice_ops::core::{Sluice, TicketSource};
use sluice_ops::explain::{
    AdmissionBody, AdmissionGroupBody, AdmittedBetweenBody, EndBody, ExplainedState,
    ExplanationBody, PlaceBody, SentenceBody,
};
use sluice_ops::ledger::{DrawBody, DrawStatusBody, LedgerPageBody, LedgerRecordBody};
use sluice_ops::model::*;
use sluice_ops::visitors::{GateAsk, JoinProof};
use std::convert::Infallible;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use utoipa::OpenApi;

// ---- helpers ---------------------------------------------------------------------------------

fn header_ticket(headers: &HeaderMap) -> Option<String> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| credentials(v, "Ticket"))
        .map(str::to_string)
}

use sluice_ops::auth::credentials;

/// Ticket precedence: body field, `Authorization: Ticket`, query `ticket`, `room`'s cookie.
fn ticket_source(
    headers: &HeaderMap,
    room: &str,
    query: Option<&str>,
    body: Option<String>,
) -> TicketSource {
    if let Some(t) = body
        .or_else(|| header_ticket(headers))
        .or_else(|| query.map(str::to_string))
    {
        return TicketSource::Explicit(t);
    }
    match cookie_ticket(headers, room) {
        Some(t) => TicketSource::Cookie(t),
        None => TicketSource::None,
    }
}

fn parse_body<T: serde::de::DeserializeOwned + Default>(body: &Bytes) -> Result<T, ApiError> {
    if body.iter().all(|b| b.is_ascii_whitespace()) {
        return Ok(T::default());
    }
    parse_required(body)
}

/// A JSON object body. Only an object: serde would also fill a struct from an array, field by
/// field in order (`[]` an all-default configuration, `[1, 2]` its first two fields).
fn parse_required<T: serde::de::DeserializeOwned>(body: &Bytes) -> Result<T, ApiError> {
    let first = body.iter().find(|b| !b.is_ascii_whitespace());
    if first.is_some_and(|b| *b != b'{') {
        return Err(ApiError::new(
            Kind::Invalid,
            "invalid_body",
            "the body must be a JSON object",
        ));
    }
    serde_json::from_slice(body).map_err(json_error)
}

fn json_error(e: serde_json::Error) -> ApiError {
    let msg = e.to_string();
    if msg.contains("unknown field `") {
        crate::error::unknown_field(&msg)
    } else if e.is_syntax() || e.is_eof() {
        ApiError::new(Kind::Invalid, "malformed_json", msg)
    } else {
        ApiError::new(Kind::Invalid, "invalid_body", msg)
    }
}

/// A visitor's reply as JSON, re-issuing the cookie when the ticket came from one (or a new
/// visitor was made). A ticket given explicitly (body, header, query) never sets a cookie: a
/// link with `?ticket=` must not put someone else's ticket into a browser.
fn with_cookie(
    app: &App,
    room: &str,
    src: &TicketSource,
    headers: &HeaderMap,
    reply: VisitorReply,
) -> Response {
    let ticket = reply.ticket.clone();
    let mut resp = Json(reply).into_response();
    if !matches!(src, TicketSource::Explicit(_)) {
        set_ticket_cookie(app, &mut resp, room, &ticket);
        retire_legacy_cookie(app, &mut resp, room, headers);
    }
    resp.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

fn respond<T: serde::Serialize>(r: Result<T, ApiError>) -> Response {
    match r {
        Ok(v) => Json(v).into_response(),
        Err(e) => e.into_http(),
    }
}

/// Query parameters of reads.
#[derive(Debug, Default, Deserialize)]
pub struct ReadQuery {
    /// Linearizable read.
    #[serde(default)]
    pub consistent: Option<bool>,
    /// Ticket (alternative to the cookie).
    #[serde(default)]
    pub ticket: Option<String>,
    /// The shop's identity assertion, carried by the waiting page into its join form (before
    /// `next` in the query: `next` takes the rest).
    #[serde(default)]
    pub identity: Option<String>,
    /// An access code from an invitation link, which the waiting page puts in its form.
    #[serde(default)]
    pub code: Option<String>,
    /// Queue page start.
    #[serde(default)]
    pub offset: Option<u64>,
    /// Page size (queue entries, rooms).
    #[serde(default)]
    pub limit: Option<usize>,
    /// Rooms page start: the rooms named after this one.
    #[serde(default)]
    pub after: Option<String>,
    /// Where the waiting page sends an admitted visitor.
    #[serde(default)]
    pub next: Option<String>,
}

// ---- visitor endpoints -------------------------------------------------------------------

/// Join a room, or resume the place a ticket holds.
#[utoipa::path(post, path = "/v1/rooms/{room}/join", request_body(content = Option<JoinBody>),
    params(("room" = String, Path, description = "Room name")),
    responses((status = 200, body = VisitorReply), (status = 401, description = "invalid ticket"),
        (status = 403, description = "challenge_invalid: the solution is forged, wrong, expired or used"),
        (status = 404, description = "unknown room"),
        (status = 428, description = "challenge_required: the room asks a proof-of-work (GET its challenge)"),
        (status = 429, description = "place_limit: the client network holds its share of places"),
        (status = 503, description = "queue full or no leader; see Retry-After")))]
async fn join(
    State(app): AppState,
    Path(room): Path<String>,
    Query(q): Query<ReadQuery>,
    headers: HeaderMap,
    extensions: axum::http::Extensions,
    body: Bytes,
) -> Response {
    let b: JoinBody = match parse_body(&body) {
        Ok(b) => b,
        Err(e) => return e.into_http(),
    };
    let src = ticket_source(&headers, &room, q.ticket.as_deref(), b.ticket);
    let client = client_ip_of(&app, &headers, &extensions);
    match app
        .sluice
        .join(
            &room,
            &src,
            Some(client),
            &JoinProof::new(b.altcha.as_deref(), b.identity.as_deref())
                .with_external(b.challenge_token.as_deref())
                .with_code(b.code.as_deref()),
        )
        .await
    {
        Ok(r) => with_cookie(&app, &room, &src, &headers, r),
        Err(e) => error_with_cookie(&app, &room, e),
    }
}

/// A proof-of-work challenge for joining the room (ALTCHA's protocol version 2,
/// `PBKDF2/SHA-256`): solve it, then join with the solution in `altcha`. Signed and bound to
/// the room; valid for five minutes and for one place.
#[utoipa::path(get, path = "/v1/rooms/{room}/challenge",
    params(("room" = String, Path, description = "Room name")),
    responses((status = 200, description = "the challenge: {parameters, signature}"),
        (status = 404, description = "unknown room, or challenge_not_required")))]
async fn challenge(State(app): AppState, Path(room): Path<String>) -> Response {
    match app.sluice.challenge(&room) {
        Ok(json) => (
            [
                (header::CONTENT_TYPE, "application/json"),
                (header::CACHE_CONTROL, "no-store"),
            ],
            json,
        )
            .into_response(),
        Err(e) => e.into_http(),
    }
}

/// A visitor's status, from this node's applied state (or linearizable with `consistent=true`).
#[utoipa::path(get, path = "/v1/rooms/{room}/status",
    params(("room" = String, Path), ("consistent" = Option<bool>, Query), ("ticket" = Option<String>, Query)),
    responses((status = 200, body = VisitorReply), (status = 401), (status = 404)))]
async fn status(
    State(app): AppState,
    Path(room): Path<String>,
    Query(q): Query<ReadQuery>,
    headers: HeaderMap,
    extensions: axum::http::Extensions,
) -> Response {
    let client = client_ip_of(&app, &headers, &extensions);
    status_answer(app, room, q, headers, client).await
}

/// [`status`]'s answer for the client at `client`.
async fn status_answer(
    app: Arc<App>,
    room: String,
    q: ReadQuery,
    headers: HeaderMap,
    client: IpAddr,
) -> Response {
    let src = ticket_source(&headers, &room, q.ticket.as_deref(), None);
    match app
        .sluice
        .status(&room, &src, q.consistent.unwrap_or(false), Some(client))
        .await
    {
        Ok(r) => with_cookie(&app, &room, &src, &headers, r),
        Err(e) => e.into_http(),
    }
}

/// Record activity (renews a session, checks a waiter in); batched.
#[utoipa::path(post, path = "/v1/rooms/{room}/heartbeat", request_body(content = Option<TicketBody>),
    params(("room" = String, Path)), responses((status = 200, body = VisitorReply), (status = 401), (status = 404)))]
async fn heartbeat(
    State(app): AppState,
    Path(room): Path<String>,
    Query(q): Query<ReadQuery>,
    headers: HeaderMap,
    extensions: axum::http::Extensions,
    body: Bytes,
) -> Response {
    let client = client_ip_of(&app, &headers, &extensions);
    let b: TicketBody = match parse_body(&body) {
        Ok(b) => b,
        Err(e) => return e.into_http(),
    };
    let src = ticket_source(&headers, &room, q.ticket.as_deref(), b.ticket);
    match app.sluice.heartbeat(&room, &src, Some(client)).await {
        Ok(r) => with_cookie(&app, &room, &src, &headers, r),
        Err(e) => e.into_http(),
    }
}

/// Leave the room.
#[utoipa::path(post, path = "/v1/rooms/{room}/leave", request_body(content = Option<TicketBody>),
    params(("room" = String, Path)), responses((status = 200, body = VisitorReply), (status = 401), (status = 404)))]
async fn leave(
    State(app): AppState,
    Path(room): Path<String>,
    Query(q): Query<ReadQuery>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let b: TicketBody = match parse_body(&body) {
        Ok(b) => b,
        Err(e) => return e.into_http(),
    };
    let src = ticket_source(&headers, &room, q.ticket.as_deref(), b.ticket);
    respond(app.sluice.leave(&room, &src).await)
}

/// How often a visitor's event stream says it is alive when its status has not changed.
pub const EVENTS_ALIVE_EVERY: Duration = Duration::from_secs(15);

/// Server-Sent Events: the visitor's status whenever it changes, and an `alive` event every
/// [`EVENTS_ALIVE_EVERY`] without a change; ends once admitted or gone.
/// While it is open the visitor counts as present, as with heartbeats.
#[utoipa::path(get, path = "/v1/rooms/{room}/events", params(("room" = String, Path)),
    responses((status = 200, description = "text/event-stream of `status` events (VisitorReply JSON)")))]
async fn events(
    State(app): AppState,
    Path(room): Path<String>,
    Query(q): Query<ReadQuery>,
    headers: HeaderMap,
    extensions: axum::http::Extensions,
) -> Response {
    use futures::StreamExt;
    let src = ticket_source(&headers, &room, q.ticket.as_deref(), None);
    let client = client_ip_of(&app, &headers, &extensions);
    let watch = match sluice_ops::watch::open(app.sluice.clone(), room, src, client).await {
        Ok(w) => w,
        Err(e) => return e.into_http(),
    };
    let events = watch.map(|r| {
        Ok::<_, Infallible>(match r {
            Ok(r) => Event::default()
                .event("status")
                .json_data(&r)
                .unwrap_or_else(|_| Event::default()),
            Err(e) => Event::default().event("error").data(e.body().to_string()),
        })
    });
    // The keep-alive is an event the page sees (with data: a browser drops an event without
    // any): its status still holds, and the page says when it last heard so (and when it has
    // heard nothing for a while).
    Sse::new(events)
        .keep_alive(
            KeepAlive::new()
                .interval(EVENTS_ALIVE_EVERY)
                .event(Event::default().event("alive").data("{}")),
        )
        .into_response()
}

/// A request body within the configured limit; a refused one is our JSON error.
struct Body(Bytes);

impl<S: Send + Sync> FromRequest<S> for Body {
    type Rejection = crate::error::HttpError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        Bytes::from_request(req, state)
            .await
            .map(Body)
            .map_err(|e| crate::error::HttpError(crate::error::bytes_rejection(e)))
    }
}

/// Forward-auth for reverse proxies: 200 when the cookie's ticket holds an active admission, or
/// a bypass rule of the room lets the request through (`X-Sluice-Bypass` on the answer says
/// which: `path`, `network` or `token`).
#[utoipa::path(get, path = "/gate/{room}/check", params(("room" = String, Path)),
    responses((status = 200, description = "admitted, or let through by a bypass rule"), (status = 401, description = "not admitted")))]
async fn gate(
    State(app): AppState,
    room: Result<Path<String>, crate::error::HttpError>,
    method: axum::http::Method,
    uri: axum::http::Uri,
    headers: HeaderMap,
    extensions: axum::http::Extensions,
) -> Response {
    let client = client_ip_of(&app, &headers, &extensions);
    gate_answer(&app, room.ok(), &method, &uri, &headers, client)
}

/// The gate's 200: who the visitor is, the bypass that let it through, and a fresh ticket
/// for the proxy to pass on.
fn gate_passed(app: &App, ok: &sluice_ops::visitors::GateOk, room: Option<&str>) -> Response {
    let mut r = StatusCode::OK.into_response();
    if let Some(Ok(h)) = ok.visitor.map(|v| HeaderValue::from_str(&v.to_string())) {
        r.headers_mut().insert("x-sluice-visitor", h);
    }
    if let Some(kind) = ok.bypassed {
        r.headers_mut()
            .insert("x-sluice-bypass", HeaderValue::from_static(kind.as_str()));
    }
    // The proxy passes this on as the answer's `Set-Cookie` (nginx:
    // `auth_request_set` + `add_header`), so that a visitor who only browses the origin
    // keeps a current ticket across key rotations and past the cookie's day.
    if let (Some(t), Some(room)) = (&ok.fresh_ticket, room) {
        let mut cookie = Response::new(axum::body::Body::empty());
        set_ticket_cookie(app, &mut cookie, room, t);
        if let Some(v) = cookie.headers().get(header::SET_COOKIE) {
            r.headers_mut().insert("x-sluice-set-cookie", v.clone());
        }
    }
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

/// [`gate`]'s answer for the client at `client`.
fn gate_answer(
    app: &App,
    room: Option<Path<String>>,
    method: &axum::http::Method,
    uri: &axum::http::Uri,
    headers: &HeaderMap,
    client: IpAddr,
) -> Response {
    // A path that is not a room name is denied like any other (and no waiting page is named).
    let room = room.filter(|Path(r)| Sluice::check_room(r).is_ok());
    let checked = match &room {
        Some(Path(room)) => {
            let ticket = header_ticket(headers).or_else(|| cookie_ticket(headers, room));
            let staff = headers
                .get(sluice_ops::bypass::STAFF_HEADER)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
                .or_else(|| cookie(headers, &sluice_ops::bypass::cookie_name(room)));
            let (target, method) = crate::forwarded::original_request(headers, method, uri.query());
            app.sluice.gate(
                room,
                &GateAsk {
                    ticket: ticket.as_deref(),
                    client: Some(client),
                    target,
                    method,
                    staff: staff.as_deref(),
                },
            )
        }
        None => Err(ApiError::invalid("room", "not a room name")),
    };
    match checked {
        Ok(ok) => gate_passed(app, &ok, room.as_ref().map(|Path(r)| r.as_str())),
        Err(mut e) => {
            // A proxy's forward-auth understands 200 and 401 (and retries on 503), nothing else.
            if e.kind != Kind::Unavailable {
                e.kind = Kind::Unauthenticated;
            }
            let mut r = e.into_http();
            if let Some(Path(room)) = &room {
                if let Ok(h) = HeaderValue::from_str(&format!("/wait/{room}")) {
                    r.headers_mut().insert("x-sluice-wait", h);
                }
            }
            r
        }
    }
}

// ---- operator endpoints ------------------------------------------------------------------

/// Create or replace a room; with `If-None-Match: *`, only create it (an existing room is
/// refused with 409 `room_exists` and left as it is).
#[utoipa::path(put, path = "/v1/rooms/{room}", request_body = RoomConfigBody,
    params(("room" = String, Path), ("If-None-Match" = Option<String>, Header, description = "`*`: create only")),
    responses((status = 201, body = RoomBody), (status = 200, body = RoomBody), (status = 400), (status = 401), (status = 409, description = "room_exists (create only)")),
    security(("bearer" = [])))]
async fn put_room(
    State(app): AppState,
    Path(room): Path<String>,
    headers: HeaderMap,
    Body(body): Body,
) -> Response {
    let b: RoomConfigBody = match parse_body(&body) {
        Ok(b) => b,
        Err(e) => return e.into_http(),
    };
    // `If-None-Match: *`: create only, never replace (RFC 9110 13.1.2).
    let create_only = headers
        .get(header::IF_NONE_MATCH)
        .is_some_and(|v| v.as_bytes().trim_ascii() == b"*");
    match app.sluice.put_room(&room, &b, create_only).await {
        Ok((r, created)) => (
            if created {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            },
            Json(r),
        )
            .into_response(),
        Err(e) => e.into_http(),
    }
}

/// A room.
#[utoipa::path(get, path = "/v1/rooms/{room}", params(("room" = String, Path), ("consistent" = Option<bool>, Query)),
    responses((status = 200, body = RoomBody), (status = 404)), security(("bearer" = [])))]
async fn get_room(
    State(app): AppState,
    Path(room): Path<String>,
    Query(q): Query<ReadQuery>,
) -> Response {
    respond(
        app.sluice
            .get_room(&room, q.consistent.unwrap_or(false))
            .await,
    )
}

/// Delete a room with everyone in it.
#[utoipa::path(delete, path = "/v1/rooms/{room}", params(("room" = String, Path)),
    responses((status = 200, body = CountReply), (status = 404)), security(("bearer" = [])))]
async fn delete_room(State(app): AppState, Path(room): Path<String>) -> Response {
    respond(app.sluice.delete_room(&room).await)
}

/// Rooms by name, a page at a time (`next_after` names where the next page starts).
#[utoipa::path(get, path = "/v1/rooms", params(("consistent" = Option<bool>, Query),
        ("after" = Option<String>, Query, description = "list rooms named after this one"),
        ("limit" = Option<usize>, Query, description = "page size, 1 to 1,000 (100)")),
    responses((status = 200, body = RoomList)), security(("bearer" = [])))]
async fn list_rooms(State(app): AppState, Query(q): Query<ReadQuery>) -> Response {
    respond(
        app.sluice
            .list_rooms(
                q.after.as_deref(),
                q.limit.unwrap_or(sluice_ops::model::ROOMS_PAGE_DEFAULT),
                q.consistent.unwrap_or(false),
            )
            .await,
    )
}

/// `GET /v1/overview`: every room together: how many, how many open, who waits and who is
/// inside in all of them, and their totals added up, as this node has applied them.
#[utoipa::path(get, path = "/v1/overview",
    responses((status = 200, body = OverviewBody), (status = 401), (status = 403)), security(("bearer" = [])))]
async fn overview(State(app): AppState) -> Response {
    respond(app.sluice.overview())
}

/// Operator actions: `pause`, `resume`, `mode`, `health`, `admit`, `revoke`, `ban`, `unban`,
/// `notice` (a message shown live to everyone in line).
#[utoipa::path(post, path = "/v1/rooms/{room}/{action}",
    params(("room" = String, Path), ("action" = String, Path, description = "pause | resume | mode | health | admit | revoke | ban | unban | notice")),
    request_body(content = Option<serde_json::Value>, description = "mode: ModeBody; health: HealthBody; admit: AdmitBody; revoke: RevokeBody; ban, unban: BanBody; notice: SetNoticeBody"),
    responses((status = 200, description = "RoomBody or CountReply"), (status = 400), (status = 404)), security(("bearer" = [])))]
async fn room_action(
    State(app): AppState,
    Path((room, action)): Path<(String, String)>,
    body: Bytes,
) -> Response {
    let s = &app.sluice;
    let r: Result<serde_json::Value, ApiError> = async {
        Ok(match action.as_str() {
            "pause" => serde_json::to_value(s.pause(&room, true).await?),
            "resume" => serde_json::to_value(s.pause(&room, false).await?),
            "mode" => {
                let b: ModeBody = parse_required(&body)?;
                serde_json::to_value(s.set_mode(&room, &b.mode).await?)
            }
            "health" => {
                let b: HealthBody = parse_required(&body)?;
                serde_json::to_value(s.set_health(&room, &b.health, b.slow_factor).await?)
            }
            "admit" => {
                let b: AdmitBody = parse_required(&body)?;
                serde_json::to_value(s.admit(&room, b.count).await?)
            }
            "revoke" => {
                let b: RevokeBody = parse_required(&body)?;
                serde_json::to_value(s.revoke(&room, b.visitor_id.as_deref(), b.all).await?)
            }
            "notice" => {
                let b: SetNoticeBody = parse_required(&body)?;
                serde_json::to_value(s.set_notice(&room, b.text.as_deref()).await?)
            }
            "ban" | "unban" => {
                let b: BanBody = parse_required(&body)?;
                let lift = action == "unban";
                serde_json::to_value(s.ban(&room, &b.visitor_id, b.duration_secs, lift).await?)
            }
            _ => {
                return Err(ApiError::new(
                    Kind::NotFound,
                    "not_found",
                    format!("no action {action:?}"),
                ))
            }
        }
        .expect("replies serialize"))
    }
    .await;
    respond(r)
}

/// Staff bypass tokens: `tokens` issues one (`BypassTokenBody` → `BypassTokenReply`), `revoke`
/// ends one on every node (`BypassRevokeBody` → `CountReply`).
#[utoipa::path(post, path = "/v1/rooms/{room}/bypass/{op}",
    params(("room" = String, Path), ("op" = String, Path, description = "tokens | revoke")),
    request_body(content = serde_json::Value, description = "tokens: BypassTokenBody; revoke: BypassRevokeBody"),
    responses((status = 201, body = BypassTokenReply), (status = 200, body = CountReply), (status = 400), (status = 404), (status = 409, description = "the room does not accept staff tokens")),
    security(("bearer" = [])))]
async fn bypass_op(
    State(app): AppState,
    Path((room, op)): Path<(String, String)>,
    body: Bytes,
) -> Response {
    match op.as_str() {
        "tokens" => {
            let issued = async {
                let b: BypassTokenBody = parse_required(&body)?;
                app.sluice
                    .issue_bypass_token(&room, b.ttl_secs, &b.label)
                    .await
            };
            match issued.await {
                Ok(reply) => (StatusCode::CREATED, Json(reply)).into_response(),
                Err(e) => e.into_http(),
            }
        }
        "revoke" => {
            let r = async {
                let b: BypassRevokeBody = parse_required(&body)?;
                app.sluice.revoke_bypass_token(&room, &b).await
            }
            .await;
            respond(r)
        }
        _ => ApiError::new(
            Kind::NotFound,
            "not_found",
            format!("no bypass operation {op:?}"),
        )
        .into_http(),
    }
}

/// Makes a batch of access codes (invitations): random codes, in the answer this once (the
/// cluster keeps only their hashes). Each places the visitor who redeems it in the batch's
/// lane, or lets it into an invite-only room.
#[utoipa::path(post, path = "/v1/rooms/{room}/codes",
    params(("room" = String, Path)),
    request_body = CodesCreateBody,
    responses((status = 201, body = CodesCreatedBody), (status = 400), (status = 404), (status = 409, description = "limit_reached: the room holds its most codes or batches")),
    security(("bearer" = [])))]
async fn create_codes(State(app): AppState, Path(room): Path<String>, body: Bytes) -> Response {
    let r = async {
        let b: CodesCreateBody = parse_required(&body)?;
        app.sluice.create_codes(&room, &b).await
    }
    .await;
    match r {
        Ok(reply) => (StatusCode::CREATED, Json(reply)).into_response(),
        Err(e) => e.into_http(),
    }
}

/// A room's batches of access codes, with how much of each was used (never the codes).
#[utoipa::path(get, path = "/v1/rooms/{room}/codes",
    params(("room" = String, Path), ("consistent" = Option<bool>, Query, description = "linearizable read")),
    responses((status = 200, body = CodeBatchList), (status = 404)),
    security(("bearer" = [])))]
async fn list_codes(
    State(app): AppState,
    Path(room): Path<String>,
    Query(q): Query<ReadQuery>,
) -> Response {
    respond(
        app.sluice
            .code_batches(&room, q.consistent.unwrap_or(false))
            .await,
    )
}

/// Ends a batch of access codes: none of them works from now on (the places they gave stay).
#[utoipa::path(delete, path = "/v1/rooms/{room}/codes/{batch}",
    params(("room" = String, Path), ("batch" = u32, Path)),
    responses((status = 200, body = CountReply, description = "count: the codes the batch held"), (status = 404)),
    security(("bearer" = [])))]
async fn end_codes(State(app): AppState, Path((room, batch)): Path<(String, String)>) -> Response {
    let Ok(batch) = batch.parse::<u32>() else {
        return ApiError::invalid("batch", "a batch number").into_http();
    };
    respond(app.sluice.end_codes(&room, batch).await)
}

/// Proxies report the origin's answers to admitted traffic; a room with an origin rule
/// measures them with its probe's, over the rule's window, and its health follows.
#[utoipa::path(post, path = "/v1/rooms/{room}/origin/reports",
    params(("room" = String, Path)),
    request_body = OriginReportBody,
    responses((status = 200, body = RoomBody), (status = 400, description = "no origin rule, or a bad report"), (status = 404)),
    security(("bearer" = [])))]
async fn origin_reports(State(app): AppState, Path(room): Path<String>, body: Bytes) -> Response {
    let r = async {
        let b: OriginReportBody = parse_required(&body)?;
        let answers: Vec<(u16, u64)> = b.samples.iter().map(|s| (s.status, s.latency_ms)).collect();
        app.sluice
            .report_origin(&room, sluice_statemachine::HealthSource::Reports, &answers)
            .await
    }
    .await;
    respond(r)
}

/// Waiters in admission order.
#[utoipa::path(get, path = "/v1/rooms/{room}/queue",
    params(("room" = String, Path), ("consistent" = Option<bool>, Query), ("offset" = Option<u64>, Query), ("limit" = Option<usize>, Query)),
    responses((status = 200, body = QueueReply), (status = 404)), security(("bearer" = [])))]
async fn queue(
    State(app): AppState,
    Path(room): Path<String>,
    Query(q): Query<ReadQuery>,
) -> Response {
    respond(
        app.sluice
            .queue(
                &room,
                q.offset.unwrap_or(0),
                q.limit.unwrap_or(100),
                q.consistent.unwrap_or(false),
            )
            .await,
    )
}

/// A page of the room's admission ledger, in log order: every decision that changed a
/// visitor's place (joined, moved, admitted and by which rule, ended and why), the room's own
/// events, and operators' commands. Records of a room that no longer exists are still served.
/// Pass a page's `next` as `after` for the following page.
#[utoipa::path(get, path = "/v1/rooms/{room}/ledger",
    params(("room" = String, Path),
        ("visitor" = Option<String>, Query, description = "only this visitor's records (32 hex digits)"),
        ("from" = Option<String>, Query, description = "only records at or after this log time: RFC 3339 or ms since the epoch"),
        ("to" = Option<String>, Query, description = "only records at or before this log time: RFC 3339 or ms since the epoch"),
        ("after" = Option<String>, Query, description = "the previous page's next"),
        ("limit" = Option<usize>, Query, description = "records per page, 1 to 1,000 (100)"),
        ("consistent" = Option<bool>, Query, description = "cover everything committed, not only what this node has applied")),
    responses((status = 200, body = LedgerPageBody), (status = 400, description = "a bad parameter (error.field names it)"),
        (status = 401), (status = 404, description = "ledger_off: this node keeps no ledger")),
    security(("bearer" = [])))]
async fn ledger(
    State(app): AppState,
    Path(room): Path<String>,
    Query(q): Query<sluice_ops::ledger::LedgerParams>,
) -> Response {
    respond(app.sluice.ledger(&room, &q).await)
}

/// The room's report over a range of log time, from this node's ledger: per minute, places
/// taken, admissions, abandonments, the waits of those admitted (median, p90, p99) and how
/// often the estimate shown was right, and the totals (`format=csv`: the minutes as CSV).
#[utoipa::path(get, path = "/v1/rooms/{room}/report",
    params(("room" = String, Path),
        ("from" = Option<String>, Query, description = "from this log time: RFC 3339 or ms since the epoch (a day before `to`)"),
        ("to" = Option<String>, Query, description = "to this log time (now); at most 7 days after `from`"),
        ("format" = Option<String>, Query, description = "json (default) or csv")),
    responses((status = 200, description = "the report", content(
            (sluice_ops::report::ReportBody = "application/json"),
            (String = "text/csv"))),
        (status = 400, description = "a bad parameter (error.field names it)"),
        (status = 401), (status = 404, description = "ledger_off: this node keeps no ledger"),
        (status = 413, description = "report_too_large: ask for a shorter range")),
    security(("bearer" = [])))]
async fn report(
    State(app): AppState,
    Path(room): Path<String>,
    Query(q): Query<sluice_ops::report::ReportParams>,
) -> Response {
    let csv = match q.csv() {
        Ok(csv) => csv,
        Err(e) => return e.into_http(),
    };
    let samples = app.history.samples(&room);
    match app.sluice.report(&room, &q, &samples).await {
        Ok(r) if csv => {
            let name = format!("attachment; filename=\"{room}-report.csv\"");
            let mut resp = r.csv().into_response();
            let h = resp.headers_mut();
            h.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/csv; charset=utf-8"),
            );
            if let Ok(v) = HeaderValue::from_str(&name) {
                h.insert(header::CONTENT_DISPOSITION, v);
            }
            resp
        }
        r => respond(r),
    }
}

/// Why a visitor got in when it did, or has not yet: sentences citing the log indexes that
/// prove them (the join and its place, the others admitted meanwhile by rule, the admission's
/// rule or draw, how the place ended), from this node's ledger and applied state.
#[utoipa::path(get, path = "/v1/rooms/{room}/visitors/{visitor}/explain",
    params(("room" = String, Path), ("visitor" = String, Path, description = "the visitor id (32 hex digits)")),
    responses((status = 200, body = ExplanationBody), (status = 400), (status = 401),
        (status = 404, description = "ledger_off: this node keeps no ledger")),
    security(("bearer" = [])))]
async fn explain(State(app): AppState, Path((room, visitor)): Path<(String, String)>) -> Response {
    respond(app.sluice.explain(&room, &visitor).await)
}

/// The commitment a room's draws are bound to, for anyone: published before any draw uses its
/// secret, which the room's ledger reveals once no draw can use it.
#[utoipa::path(get, path = "/v1/rooms/{room}/draw", params(("room" = String, Path)),
    responses((status = 200, body = DrawStatusBody), (status = 404)))]
async fn draw(State(app): AppState, Path(room): Path<String>) -> Response {
    respond(app.sluice.draw_status(&room))
}

/// Create or reconfigure a pool.
#[utoipa::path(put, path = "/v1/pools/{pool}", request_body = PoolBody, params(("pool" = String, Path)),
    responses((status = 200, body = PoolReply)), security(("bearer" = [])))]
async fn put_pool(State(app): AppState, Path(pool): Path<String>, Body(body): Body) -> Response {
    match parse_required::<PoolBody>(&body) {
        Ok(b) => respond(app.sluice.put_pool(&pool, &b).await),
        Err(e) => e.into_http(),
    }
}

/// A pool.
#[utoipa::path(get, path = "/v1/pools/{pool}", params(("pool" = String, Path), ("consistent" = Option<bool>, Query)),
    responses((status = 200, body = PoolReply), (status = 404)), security(("bearer" = [])))]
async fn get_pool(
    State(app): AppState,
    Path(pool): Path<String>,
    Query(q): Query<ReadQuery>,
) -> Response {
    respond(
        app.sluice
            .get_pool(&pool, q.consistent.unwrap_or(false))
            .await,
    )
}

/// Every pool.
#[utoipa::path(get, path = "/v1/pools", responses((status = 200, body = PoolList)), security(("bearer" = [])))]
async fn list_pools(State(app): AppState) -> Response {
    respond(app.sluice.list_pools().map(|pools| PoolList { pools }))
}

/// Deletes a pool.
#[utoipa::path(delete, path = "/v1/pools/{pool}", params(("pool" = String, Path)),
    responses((status = 204), (status = 404)), security(("bearer" = [])))]
async fn delete_pool(State(app): AppState, Path(pool): Path<String>) -> Response {
    match app.sluice.delete_pool(&pool).await {
        Ok(_) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => e.into_http(),
    }
}

/// Pool actions: `assign`, `release`, `report`.
#[utoipa::path(post, path = "/v1/pools/{pool}/{action}",
    params(("pool" = String, Path), ("action" = String, Path, description = "assign | release | report")),
    request_body(content = Option<PoolRoomBody>), responses((status = 200, description = "AssignReply or PoolReply")), security(("bearer" = [])))]
async fn pool_action(
    State(app): AppState,
    Path((pool, action)): Path<(String, String)>,
    body: Bytes,
) -> Response {
    let s = &app.sluice;
    match action.as_str() {
        "assign" => respond(s.assign(&pool).await),
        "release" | "report" => match parse_required::<PoolRoomBody>(&body) {
            Ok(b) => respond(s.release_or_report(&pool, &b, action == "report").await),
            Err(e) => e.into_http(),
        },
        _ => {
            ApiError::new(Kind::NotFound, "not_found", format!("no action {action:?}")).into_http()
        }
    }
}

/// This node's view of the cluster.
#[utoipa::path(get, path = "/v1/cluster", responses((status = 200, description = "ClusterStatus")), security(("bearer" = [])))]
async fn cluster(State(app): AppState) -> Response {
    Json(app.sluice.cluster()).into_response()
}

/// Add a learner.
#[utoipa::path(post, path = "/v1/cluster/learners", request_body = LearnerBody,
    responses((status = 200, description = "ClusterStatus"), (status = 400)), security(("bearer" = [])))]
async fn add_learner(State(app): AppState, Body(body): Body) -> Response {
    match parse_required::<LearnerBody>(&body) {
        Ok(b) => respond(app.sluice.add_learner(&b).await),
        Err(e) => e.into_http(),
    }
}

/// Promote a learner or remove a node.
#[utoipa::path(post, path = "/v1/cluster/membership", request_body = MembershipBody,
    responses((status = 200, description = "ClusterStatus"), (status = 400)), security(("bearer" = [])))]
async fn membership(State(app): AppState, Body(body): Body) -> Response {
    match parse_required::<MembershipBody>(&body) {
        Ok(b) => respond(app.sluice.change_membership(&b).await),
        Err(e) => e.into_http(),
    }
}

/// The applied index and state digest of this node (at most one computation a second; callers
/// in between share the next one, never an older one).
#[utoipa::path(get, path = "/v1/cluster/digest", responses((status = 200, description = "{applied_index, digest}")), security(("bearer" = [])))]
async fn digest(State(app): AppState) -> Response {
    match app.sluice.digest(tokio::time::Instant::now()).await {
        Ok(d) => Json(serde_json::json!({
            "applied_index": d.applied_index,
            "digest": d.digest,
            "content_digest": d.content,
        }))
        .into_response(),
        Err(e) => e.into_http(),
    }
}

/// Log entries held by this node, for audits and replays (`proposal` is the base64 of the
/// encoded proposal, as stored in the log).
#[utoipa::path(get, path = "/v1/cluster/log", params(("from" = Option<u64>, Query), ("limit" = Option<u64>, Query)),
    responses((status = 200, description = "{entries: [{index, term, proposal?}]}")), security(("bearer" = [])))]
async fn log(State(app): AppState, Query(q): Query<LogQuery>) -> Response {
    use base64::Engine;
    let from = q.from.unwrap_or(1);
    let limit = q.limit.unwrap_or(1_000);
    match app.sluice.log_entries(from, limit).await {
        Ok(entries) => {
            let entries: Vec<serde_json::Value> = entries
                .into_iter()
                .map(|e| {
                    serde_json::json!({
                        "index": e.index,
                        "term": e.term,
                        "proposal": e.proposal.map(|p| base64::engine::general_purpose::STANDARD.encode(p)),
                    })
                })
                .collect();
            Json(serde_json::json!({ "entries": entries })).into_response()
        }
        Err(e) => e.into_http(),
    }
}

/// The whole applied state of this node as a backup file (`application/octet-stream`); restore it
/// into a new cluster with `sluice restore`.
#[utoipa::path(get, path = "/v1/cluster/backup", responses((status = 200, description = "the backup file")), security(("bearer" = [])))]
async fn backup(State(app): AppState) -> Response {
    match app.sluice.backup() {
        Ok((bytes, index)) => (
            [
                (
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/octet-stream"),
                ),
                (
                    header::HeaderName::from_static("x-sluice-applied-index"),
                    HeaderValue::from(index),
                ),
            ],
            bytes,
        )
            .into_response(),
        Err(e) => e.into_http(),
    }
}

/// Query of `/v1/cluster/log`.
#[derive(Debug, Default, Deserialize)]
pub struct LogQuery {
    /// First index.
    #[serde(default)]
    pub from: Option<u64>,
    /// Most entries.
    #[serde(default)]
    pub limit: Option<u64>,
}

#[utoipa::path(get, path = "/metrics", tag = "operations",
    responses((status = 200, description = "the node's metrics, Prometheus text format 0.0.4", content_type = "text/plain"), (status = 401), (status = 403)),
    security(("bearer" = [])))]
async fn metrics(State(app): AppState) -> Response {
    let body = crate::metrics::render(&app.metrics, &app.sluice, &app.auth);
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        body,
    )
        .into_response()
}

// ---- public endpoints --------------------------------------------------------------------

/// `GET /healthz`: the process answers (liveness).
#[utoipa::path(get, path = "/healthz", tag = "operations",
    responses((status = 200, description = "`{\"status\": \"ok\"}`", content_type = "application/json")))]
async fn healthz() -> Response {
    Json(serde_json::json!({"status": "ok"})).into_response()
}

/// `GET /readyz`: the node has recovered and knows a leader (readiness).
#[utoipa::path(get, path = "/readyz", tag = "operations",
    responses((status = 200, description = "`{\"status\": \"ready\"}`", content_type = "application/json"), (status = 503, description = "not ready: recovering, or no leader known")))]
async fn readyz(State(app): AppState) -> Response {
    match app.sluice.ready() {
        Ok(()) => Json(serde_json::json!({"status": "ready"})).into_response(),
        Err(e) => e.into_http(),
    }
}

/// `GET /.well-known/jwks.json`: the public keys that admission tokens are signed with.
#[utoipa::path(get, path = "/.well-known/jwks.json", tag = "operations",
    responses((status = 200, description = "a JWK set (RFC 7517) of Ed25519 keys (`OKP`, `EdDSA`)", content_type = "application/json")))]
async fn jwks(State(app): AppState) -> Response {
    (
        [(header::CACHE_CONTROL, "max-age=300")],
        Json(app.sluice.jwt.jwks()),
    )
        .into_response()
}

/// The OpenAPI document, built and encoded once: anyone may ask for it, as often as they like.
#[utoipa::path(get, path = "/openapi.json", tag = "operations",
    responses((status = 200, description = "this document", content_type = "application/json")))]
async fn openapi() -> Response {
    static DOC: std::sync::OnceLock<axum::body::Bytes> = std::sync::OnceLock::new();
    let doc = DOC.get_or_init(|| {
        serde_json::to_vec(&ApiDoc::openapi())
            .expect("the OpenAPI document encodes")
            .into()
    });
    ([(header::CONTENT_TYPE, "application/json")], doc.clone()).into_response()
}

/// `GET /assets/{name}`: the pages' scripts.
#[utoipa::path(get, path = "/assets/{name}", tag = "pages", params(("name" = String, Path)),
    responses((status = 200, description = "a script or style sheet of the pages"), (status = 404)))]
async fn asset(Path(name): Path<String>) -> Response {
    match pages::ASSETS.iter().find(|(n, _)| *n == name) {
        Some((_, body)) => (
            [
                (header::CONTENT_TYPE, pages::asset_type(&name)),
                (header::CACHE_CONTROL, "max-age=300"),
            ],
            *body,
        )
            .into_response(),
        None => ApiError::new(Kind::NotFound, "not_found", "no such asset").into_http(),
    }
}

/// `GET /`: the node's landing page.
#[utoipa::path(get, path = "/", tag = "pages", responses((status = 200, description = "HTML", content_type = "text/html")))]
async fn landing(State(app): AppState) -> Html<String> {
    Html(pages::landing(app.demo_room.as_deref()))
}

/// `GET /demo`: the demo room's stand-in shop (`sluice dev` only), where an admitted visitor
/// lands.
#[utoipa::path(get, path = "/demo", tag = "pages",
    responses((status = 200, description = "HTML: the demo room's stand-in shop", content_type = "text/html"), (status = 404, description = "no demo room on this node")))]
async fn demo(State(app): AppState, headers: HeaderMap) -> Response {
    let Some(room) = app.demo_room.clone() else {
        return ApiError::new(Kind::NotFound, "not_found", "no demo room on this node").into_http();
    };
    let admitted = match cookie_ticket(&headers, &room) {
        Some(t) => app
            .sluice
            .heartbeat(&room, &TicketSource::Cookie(t), None)
            .await
            .is_ok_and(|r| r.state == ReplyState::Admitted),
        None => false,
    };
    let mut r = Html(pages::demo_shop(&room, admitted)).into_response();
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

/// `GET /wait/{room}`: the waiting page.
#[utoipa::path(get, path = "/wait/{room}", tag = "pages", params(("room" = String, Path)),
    responses((status = 200, description = "HTML: the waiting page", content_type = "text/html")))]
async fn wait_page(
    State(app): AppState,
    Path(room): Path<String>,
    Query(q): Query<ReadQuery>,
    axum::extract::RawQuery(raw): axum::extract::RawQuery,
    headers: HeaderMap,
) -> Response {
    let next = raw_next(raw.as_deref()).or(q.next);
    pages::wait(
        &app,
        &room,
        next.as_deref(),
        page_lang(raw.as_deref(), &headers),
        &headers,
        pages::WaitRequest::Look {
            identity: q.identity,
            code: q.code,
            just_joined: query_before_next(raw.as_deref(), "joined").as_deref() == Some("1"),
        },
    )
    .await
}

/// `POST /wait/{room}`: the waiting page's form (and script) joining the line.
#[utoipa::path(post, path = "/wait/{room}", tag = "pages", params(("room" = String, Path)),
    request_body(content_type = "application/x-www-form-urlencoded", description = "`altcha`, `identity`, `code` or a challenge provider's field"),
    responses((status = 200, description = "HTML: the waiting page", content_type = "text/html"), (status = 303, description = "admitted: on to the site")))]
async fn wait_join(
    State(app): AppState,
    Path(room): Path<String>,
    Query(q): Query<ReadQuery>,
    axum::extract::RawQuery(raw): axum::extract::RawQuery,
    headers: HeaderMap,
    extensions: axum::http::Extensions,
    body: Bytes,
) -> Response {
    let next = raw_next(raw.as_deref()).or(q.next);
    let client = client_ip_of(&app, &headers, &extensions);
    // The form's fields: `altcha` when a solver filled it in, `identity` when the shop's link
    // brought one (others are ignored).
    let fields = serde_urlencoded::from_bytes::<Vec<(String, String)>>(&body).unwrap_or_default();
    let field = |name: &str| {
        fields
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .filter(|v| !v.is_empty())
    };
    // The provider widgets' own field names, as a page hosting one posts them.
    let external = [
        "challenge_token",
        "cf-turnstile-response",
        "h-captcha-response",
        "g-recaptcha-response",
    ]
    .into_iter()
    .find_map(field);
    let join = pages::WaitRequest::Join {
        client,
        altcha: field("altcha"),
        identity: field("identity"),
        external,
        code: field("code"),
    };
    let pl = page_lang(raw.as_deref(), &headers);
    pages::wait(&app, &room, next.as_deref(), pl, &headers, join).await
}

/// `GET /wait/{room}/bypass`: the form where staff give their browser a bypass token.
#[utoipa::path(get, path = "/wait/{room}/bypass", tag = "pages", params(("room" = String, Path)),
    responses((status = 200, description = "HTML: the staff bypass form", content_type = "text/html")))]
async fn staff_page(
    Path(room): Path<String>,
    axum::extract::RawQuery(raw): axum::extract::RawQuery,
    headers: HeaderMap,
) -> Response {
    if Sluice::check_room(&room).is_err() {
        return ApiError::invalid("room", "not a room name").into_http();
    }
    staff_answer(
        StatusCode::OK,
        pages::staff_form(lang_of(raw.as_deref(), &headers), &room, None),
    )
}

/// `POST /wait/{room}/bypass`: checks the token (signed for this room, not expired, not
/// revoked, the room accepts staff tokens) and gives it to the browser as the room's bypass
/// cookie, until it expires; then on to the site.
#[utoipa::path(post, path = "/wait/{room}/bypass", tag = "pages", params(("room" = String, Path)),
    request_body(content_type = "application/x-www-form-urlencoded", description = "`token`: a staff bypass token"),
    responses((status = 303, description = "the bypass cookie set: on to the site"), (status = 403, description = "HTML: the form again, the token refused", content_type = "text/html")))]
async fn staff_enter(
    State(app): AppState,
    Path(room): Path<String>,
    axum::extract::RawQuery(raw): axum::extract::RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if Sluice::check_room(&room).is_err() {
        return ApiError::invalid("room", "not a room name").into_http();
    }
    let fields = serde_urlencoded::from_bytes::<Vec<(String, String)>>(&body).unwrap_or_default();
    let token = fields
        .iter()
        .find(|(k, _)| k == "token")
        .map(|(_, v)| v.trim())
        .unwrap_or_default();
    match app.sluice.staff_token(&room, token) {
        Ok(left_secs) => {
            let mut r = StatusCode::SEE_OTHER.into_response();
            r.headers_mut()
                .insert(header::LOCATION, HeaderValue::from_static("/"));
            let secure = if app.secure_cookies { "; Secure" } else { "" };
            let cookie = format!(
                "{}={token}; Path=/; HttpOnly; SameSite=Lax; Max-Age={left_secs}{secure}",
                sluice_ops::bypass::cookie_name(&room)
            );
            if let Ok(v) = HeaderValue::from_str(&cookie) {
                r.headers_mut().insert(header::SET_COOKIE, v);
            }
            r.headers_mut()
                .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            r
        }
        Err(e) => staff_answer(
            crate::error::http_status(e.kind),
            pages::staff_form(lang_of(raw.as_deref(), &headers), &room, Some(&e.message)),
        ),
    }
}

/// The visitor's language: `?lang=`, else `Accept-Language`.
fn lang_of(raw_query: Option<&str>, headers: &HeaderMap) -> crate::i18n::Lang {
    page_lang(raw_query, headers).lang
}

/// The value of `key` in the query, read before `next=` (whose raw value is the shop's own
/// address and may carry parameters of its own).
fn query_before_next(raw_query: Option<&str>, key: &str) -> Option<String> {
    let q = raw_query.unwrap_or("");
    // The query without a raw `next` (which is no parameter: it is not encoded).
    let rest = match raw_next_span(q) {
        Some((start, end)) => format!("{}&{}", &q[..start - "next=".len()], &q[end..]),
        None => q.to_string(),
    };
    serde_urlencoded::from_str::<Vec<(String, String)>>(&rest)
        .ok()
        .and_then(|pairs| pairs.into_iter().find(|(k, _)| k == key))
        .map(|(_, v)| v)
}

/// A waiting page's language: `lang` from the query, else `Accept-Language`.
fn page_lang(raw_query: Option<&str>, headers: &HeaderMap) -> pages::PageLang {
    let param = query_before_next(raw_query, "lang");
    pages::PageLang::new(
        param.as_deref(),
        headers
            .get(header::ACCEPT_LANGUAGE)
            .and_then(|v| v.to_str().ok()),
    )
}

fn staff_answer(status: StatusCode, html: String) -> Response {
    let mut r = (status, Html(html)).into_response();
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

/// The page to return to, as a proxy writes it: `next=` followed by the request URI as the
/// client sent it (nginx: `return 302 /wait/shop?next=$request_uri`), which is still
/// percent-encoded and may hold a query string of its own, `&`s and all. So when the value of
/// `next` starts with `/`, it is everything after `next=`, taken as it is (never decoded: a
/// decoded CR LF must not reach a header). Otherwise `next` is an ordinary, encoded parameter.
/// A raw `next` without a `?` of its own has no query to carry: it ends at the next `&`, and
/// the parameters after it are the page's (`/wait/demo?next=/demo&lang=de`).
fn raw_next(query: Option<&str>) -> Option<String> {
    let q = query?;
    let (start, end) = raw_next_span(q)?;
    Some(q[start..end].to_string())
}

/// Where the value of a raw `next` ([`raw_next`]) lies in the query.
fn raw_next_span(q: &str) -> Option<(usize, usize)> {
    let at = if q.starts_with("next=") {
        0
    } else {
        q.find("&next=")? + 1
    };
    let start = at + "next=".len();
    let value = &q[start..];
    if !value.starts_with('/') {
        return None;
    }
    let len = if value.contains('?') {
        value.len()
    } else {
        value.find('&').unwrap_or(value.len())
    };
    Some((start, start + len))
}

async fn not_found(
    State(app): AppState,
    method: axum::http::Method,
    headers: HeaderMap,
) -> Response {
    // Counted here: the metrics layer sees matched routes only.
    app.metrics
        .http(method.as_str(), "unmatched", 404, Duration::ZERO);
    // A browser (a visitor sent to a page that is not Sluice's) gets a page; a client, JSON.
    if accepts_html(&headers) {
        return (
            StatusCode::NOT_FOUND,
            Html(
                "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>Not found</title></head>\
<body><main><h1>Not found</h1><p>There is no page at this address.</p></main></body></html>",
            ),
        )
            .into_response();
    }
    ApiError::new(Kind::NotFound, "not_found", "no such endpoint").into_http()
}

// ---- middleware --------------------------------------------------------------------------

/// The request's bearer token, if any.
fn bearer(req: &Request) -> Option<&str> {
    req.headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| credentials(v, "Bearer"))
}

/// Operator routes: the bearer token must name an operator whose role is at least what the
/// route asks ([`crate::roles::http_role`], from the method and the matched route); the
/// request then runs with that operator acting, so that its writes are attributed to it.
async fn operator_auth(State(app): AppState, req: Request, next: Next) -> Response {
    let client = client_ip(&app, &req);
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or(req.uri().path(), |p| p.as_str());
    let needed = crate::roles::http_role(req.method(), route);
    let checked = app
        .auth
        .authenticate(client, bearer(&req))
        .and_then(|op| op.may(needed).map(|()| op));
    match checked {
        Ok(op) => sluice_ops::operators::acting(op, next.run(req)).await,
        Err(e) => e.into_http(),
    }
}

/// Proxies' reports: a backend's token (`backend_tokens`), or an operator's whose role is at
/// least `operator`. Not attributed: reports are measurements, not an operator's decision.
async fn backend_auth(State(app): AppState, req: Request, next: Next) -> Response {
    let client = client_ip(&app, &req);
    match app
        .auth
        .check(client, bearer(&req), sluice_ops::auth::Scope::Backend)
    {
        Ok(()) => next.run(req).await,
        Err(e) => e.into_http(),
    }
}

/// `/metrics`: any operator's token, or the scraper's own (`metrics_token`).
async fn metrics_auth(State(app): AppState, req: Request, next: Next) -> Response {
    let client = client_ip(&app, &req);
    match app
        .auth
        .check(client, bearer(&req), sluice_ops::auth::Scope::Metrics)
    {
        Ok(()) => next.run(req).await,
        Err(e) => e.into_http(),
    }
}

async fn rate_limit(State(app): AppState, req: Request, next: Next) -> Response {
    match limit(&app.limiter, client_ip(&app, &req)) {
        Ok(()) => next.run(req).await,
        // A browser on the waiting page gets a page that says so and tries again by itself.
        Err(e) if req.uri().path().starts_with("/wait/") && accepts_html(req.headers()) => {
            let pl = page_lang(req.uri().query(), req.headers());
            pages::too_many(pl, e.retry_after.unwrap_or(1))
        }
        Err(e) => e.into_http(),
    }
}

/// Whether the client asks for HTML (a browser navigating), not JSON.
fn accepts_html(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("text/html"))
}

/// Counts a visitor request from `client` against its rate (an IPv6 client is its /64: it holds
/// all of it); 429 with `Retry-After` past it.
pub(crate) fn limit(limiter: &ClientLimiter, client: IpAddr) -> Result<(), ApiError> {
    sluice_gate::rate::check(limiter, client).map_err(ApiError::rate_limited)
}

async fn record(State(app): AppState, req: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = req.method().clone();
    // A shared copy of the route template, not a new string per request.
    let route = req.extensions().get::<MatchedPath>().cloned();
    let resp = next.run(req).await;
    app.metrics.http(
        method.as_str(),
        route.as_ref().map_or("unmatched", |p| p.as_str()),
        resp.status().as_u16(),
        started.elapsed(),
    );
    resp
}

/// The two reads a waiting room serves most, answered before the router (by [`crate::edge`]):
/// a proxy's gate check on every request to the origin, and a visitor's status on every poll of
/// the waiting page. They run the same handlers, in the same order of checks (the visitor rate
/// limit, then the query, for status reads), as the routes below, without the router's
/// matching, layers and extractors, which cost about as much per request as these handlers do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HotRoute {
    /// `/gate/{room}/check`, any method.
    Gate,
    /// `GET /v1/rooms/{room}/status`.
    Status,
}

impl HotRoute {
    /// The route's template, as the router names it in metrics.
    pub(crate) const fn template(self) -> &'static str {
        match self {
            HotRoute::Gate => "/gate/{room}/check",
            HotRoute::Status => "/v1/rooms/{room}/status",
        }
    }

    /// The hot route `method` and `path` ask for, with its room, if they ask for one: the path
    /// exactly as the router would match it, with a room segment the router would decode to
    /// itself (no percent escapes). Anything else (`HEAD`, an escaped name) goes to the router.
    pub(crate) fn of<'p>(method: &axum::http::Method, path: &'p str) -> Option<(Self, &'p str)> {
        let segment = |rest: &'p str, suffix: &str| {
            rest.strip_suffix(suffix)
                .filter(|r| !r.is_empty() && !r.contains(['/', '%']))
        };
        if let Some(rest) = path.strip_prefix("/gate/") {
            return segment(rest, "/check").map(|room| (HotRoute::Gate, room));
        }
        if method != axum::http::Method::GET {
            return None;
        }
        let rest = path.strip_prefix("/v1/rooms/")?;
        segment(rest, "/status").map(|room| (HotRoute::Status, room))
    }

    /// Answers `req`, which asks for this route in `room`, from `peer`.
    pub(crate) async fn answer(
        self,
        app: Arc<App>,
        room: String,
        req: Request,
        peer: std::net::SocketAddr,
    ) -> Response {
        use axum::extract::FromRequestParts;
        let (mut parts, _) = req.into_parts();
        let client = client_of(&app, &parts.headers, peer.ip());
        match self {
            HotRoute::Gate => gate_answer(
                &app,
                Some(Path(room)),
                &parts.method,
                &parts.uri,
                &parts.headers,
                client,
            ),
            HotRoute::Status => {
                if let Err(e) = limit(&app.limiter, client) {
                    return e.into_http();
                }
                match Query::<ReadQuery>::from_request_parts(&mut parts, &()).await {
                    Ok(Query(q)) => status_answer(app, room, q, parts.headers, client).await,
                    Err(e) => e.into_response(),
                }
            }
        }
    }
}

/// The HTTP routes, each with the layers only it needs; what every request passes through
/// (body limit, security headers, concurrency limit) is [`crate::edge`], around them.
pub fn router(app: Arc<App>) -> Router {
    let visitor = Router::new()
        .route("/v1/rooms/{room}/join", post(join))
        .route("/v1/rooms/{room}/challenge", get(challenge))
        // Mostly answered before routing (`HotRoute`).
        .route("/v1/rooms/{room}/status", get(status))
        .route("/v1/rooms/{room}/heartbeat", post(heartbeat))
        .route("/v1/rooms/{room}/leave", post(leave))
        .route("/v1/rooms/{room}/events", get(events))
        .route("/v1/rooms/{room}/draw", get(draw))
        .route("/wait/{room}", get(wait_page).post(wait_join))
        .route("/wait/{room}/bypass", get(staff_page).post(staff_enter))
        .route_layer(middleware::from_fn_with_state(app.clone(), rate_limit));
    let operator = Router::new()
        .route("/v1/rooms", get(list_rooms))
        .route("/v1/overview", get(overview))
        .route(
            "/v1/rooms/{room}",
            get(get_room).put(put_room).delete(delete_room),
        )
        .route("/v1/rooms/{room}/queue", get(queue))
        .route("/v1/rooms/{room}/ledger", get(ledger))
        .route("/v1/rooms/{room}/report", get(report))
        .route("/v1/rooms/{room}/visitors/{visitor}/explain", get(explain))
        .route("/v1/rooms/{room}/bypass/{op}", post(bypass_op))
        .route("/v1/rooms/{room}/codes", get(list_codes).post(create_codes))
        .route("/v1/rooms/{room}/codes/{batch}", delete(end_codes))
        .route("/v1/rooms/{room}/{action}", post(room_action))
        .route("/v1/pools", get(list_pools))
        .route(
            "/v1/pools/{pool}",
            get(get_pool).put(put_pool).delete(delete_pool),
        )
        .route("/v1/pools/{pool}/{action}", post(pool_action))
        .route("/v1/cluster", get(cluster))
        .route("/v1/cluster/learners", post(add_learner))
        .route("/v1/cluster/membership", post(membership))
        .route("/v1/cluster/digest", get(digest))
        .route("/v1/cluster/log", get(log))
        .route("/v1/cluster/backup", get(backup))
        .route("/v1/audit", get(audit_list))
        .route_layer(middleware::from_fn_with_state(app.clone(), operator_auth));
    let reporters = Router::new()
        .route("/v1/rooms/{room}/origin/reports", post(origin_reports))
        .route_layer(middleware::from_fn_with_state(app.clone(), backend_auth));
    let scrape = Router::new()
        .route("/metrics", get(metrics))
        .route_layer(middleware::from_fn_with_state(app.clone(), metrics_auth));
    let public = Router::new()
        .route("/", get(landing))
        .route("/demo", get(demo))
        .route("/assets/{name}", get(asset))
        // Any method: Envoy's ext_authz asks with the original request's. Mostly answered
        // before routing (`HotRoute`).
        .route("/gate/{room}/check", any(gate))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/.well-known/jwks.json", get(jwks))
        .route("/openapi.json", get(openapi));
    // The dashboard: never inside another site's frame (clickjacking), and password guessing
    // slowed to the visitor rate per address.
    let dashboard = Router::new()
        .route("/admin", get(crate::admin::dashboard))
        .route(
            "/admin/login",
            post(crate::admin::login)
                .route_layer(middleware::from_fn_with_state(app.clone(), rate_limit)),
        )
        .route("/admin/logout", post(crate::admin::logout))
        .route("/admin/stats.json", get(crate::admin::stats))
        .route("/admin/rooms", post(crate::admin::create_room))
        .route("/admin/rooms/{room}", get(crate::admin::room))
        .route(
            "/admin/rooms/{room}/config",
            post(crate::admin::save_config),
        )
        .route("/admin/rooms/{room}/action", post(crate::admin::action))
        .route("/admin/rooms/{room}/preview", post(crate::admin::preview))
        .route(
            "/admin/rooms/{room}/explain",
            get(crate::admin::explain_page),
        )
        .route(
            "/admin/rooms/{room}/history.json",
            get(crate::admin::history),
        )
        .route("/admin/rooms/{room}/report", get(crate::admin::report_page))
        .route(
            "/admin/pools",
            get(crate::admin::pools_page).post(crate::admin::pool_action),
        )
        .route("/admin/audit", get(crate::admin::audit_page))
        .route_layer(middleware::from_fn_with_state(
            app.clone(),
            crate::admin::session_layer,
        ));
    Router::new()
        .merge(visitor)
        .merge(operator)
        .merge(reporters)
        .merge(scrape)
        .merge(public)
        .merge(dashboard)
        .fallback(not_found)
        .method_not_allowed_fallback(|| async {
            ApiError::new(
                Kind::MethodNotAllowed,
                "method_not_allowed",
                "method not allowed",
            )
            .into_http()
        })
        .route_layer(middleware::from_fn_with_state(app.clone(), record))
        .with_state(app)
}

#[cfg(test)]
mod tests {
    use super::{query_before_next, raw_next, ApiDoc, HotRoute};
    use axum::http::Method;
    use utoipa::OpenApi;

    /// The routes [`super::router`] serves, each with its methods, read from its source (axum
    /// cannot list a router's routes): `any` stands for every method.
    fn routes_served() -> Vec<(String, Vec<&'static str>)> {
        let src = include_str!("http.rs");
        let start = src.find("pub fn router(").expect("the router");
        let body = &src[start..];
        let body = &body[..body.find("\n}\n").expect("the router's end")];
        let method_at = |call: &str, m: &str| {
            call.match_indices(&format!("{m}(")).any(|(i, _)| {
                !call[..i]
                    .chars()
                    .next_back()
                    .is_some_and(|c| c.is_alphanumeric() || c == '_')
            })
        };
        body.split(".route(")
            .skip(1)
            .map(|call| {
                let call = call.trim_start();
                let path = call
                    .strip_prefix('"')
                    .and_then(|r| r.split('"').next())
                    .expect("a route's path is a literal");
                let methods = ["get", "post", "put", "delete", "any"]
                    .into_iter()
                    .filter(|m| method_at(call, m))
                    .collect();
                (path.to_string(), methods)
            })
            .collect()
    }

    #[test]
    fn every_route_the_router_serves_is_in_the_openapi_document_and_no_other() {
        let doc = ApiDoc::openapi();
        let served = routes_served();
        assert!(served.len() > 50, "{served:?}");
        for (path, methods) in &served {
            let item = doc
                .paths
                .paths
                .get(path)
                .unwrap_or_else(|| panic!("{path} is served but not in the OpenAPI document"));
            assert!(!methods.is_empty(), "{path}: no method read");
            for m in methods {
                let documented = match *m {
                    "get" | "any" => item.get.is_some(),
                    "post" => item.post.is_some(),
                    "put" => item.put.is_some(),
                    "delete" => item.delete.is_some(),
                    _ => unreachable!(),
                };
                assert!(documented, "{m} {path} is served but not documented");
            }
        }
        for path in doc.paths.paths.keys() {
            assert!(
                served.iter().any(|(p, _)| p == path),
                "{path} is documented but not served"
            );
        }
        // The operations' names are unique, as OpenAPI asks.
        let mut ids: Vec<String> = doc
            .paths
            .paths
            .values()
            .flat_map(|i| [&i.get, &i.post, &i.put, &i.delete])
            .flatten()
            .filter_map(|o| o.operation_id.clone())
            .collect();
        let n = ids.len();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), n, "an operation id is used twice");
    }

    #[test]
    fn hot_routes_are_the_router_paths_whose_room_needs_no_decoding() {
        let of = |m: &Method, p| HotRoute::of(m, p);
        for m in [Method::GET, Method::POST, Method::HEAD, Method::DELETE] {
            assert_eq!(
                of(&m, "/gate/sale/check"),
                Some((HotRoute::Gate, "sale")),
                "{m}: any method, as the route"
            );
        }
        assert_eq!(
            of(&Method::GET, "/v1/rooms/sale-2/status"),
            Some((HotRoute::Status, "sale-2"))
        );
        for (m, p) in [
            (Method::HEAD, "/v1/rooms/sale/status"),
            (Method::POST, "/v1/rooms/sale/status"),
            (Method::GET, "/gate/sa%6ce/check"),
            (Method::GET, "/v1/rooms/sa%6ce/status"),
            (Method::GET, "/gate//check"),
            (Method::GET, "/gate/a/b/check"),
            (Method::GET, "/gate/sale/check/"),
            (Method::GET, "/v1/rooms/sale/status/"),
            (Method::GET, "/v1/rooms//status"),
            (Method::GET, "/v1/rooms/sale/statuses"),
            (Method::GET, "/gate/check"),
            (Method::GET, "/v1/rooms/status"),
        ] {
            assert_eq!(of(&m, p), None, "{m} {p}: routed");
        }
    }

    #[test]
    fn next_is_the_rest_of_the_query_as_the_proxy_sent_it() {
        assert_eq!(
            raw_next(Some("next=/cart?item=4&qty=2")).as_deref(),
            Some("/cart?item=4&qty=2")
        );
        assert_eq!(
            raw_next(Some("lang=fr&next=/x%0d%0aSet-Cookie:%20a=b")).as_deref(),
            Some("/x%0d%0aSet-Cookie:%20a=b"),
            "never decoded"
        );
        assert_eq!(
            raw_next(Some("next=%2Fcart")),
            None,
            "an encoded one is a parameter"
        );
        assert_eq!(raw_next(Some("mynext=/x")), None);
        assert_eq!(raw_next(None), None);
    }

    /// A raw `next` without a query of its own ends at the next `&`: the page's parameters after
    /// it are read (`lang` was swallowed, and the visitor sent to `/demo&lang=de`).
    #[test]
    fn parameters_after_a_next_without_a_query_are_the_pages() {
        let q = "next=/demo&lang=de&joined=1";
        assert_eq!(raw_next(Some(q)).as_deref(), Some("/demo"));
        assert_eq!(query_before_next(Some(q), "lang").as_deref(), Some("de"));
        assert_eq!(query_before_next(Some(q), "joined").as_deref(), Some("1"));
        let q = "lang=fr&next=/cart?item=4&lang=de";
        assert_eq!(raw_next(Some(q)).as_deref(), Some("/cart?item=4&lang=de"));
        assert_eq!(query_before_next(Some(q), "lang").as_deref(), Some("fr"));
        assert_eq!(query_before_next(Some("next=/x"), "lang"), None);
    }
}

/// The OpenAPI document, generated from the handlers above.
#[derive(OpenApi)]
#[openapi(
    info(title = "Sluice", description = "Virtual waiting room and admission coordinator", version = "1"),
    paths(join, challenge, status, heartbeat, leave, events, gate, put_room, get_room, delete_room, list_rooms, room_action, bypass_op, create_codes, list_codes, end_codes, origin_reports, queue, ledger, report, explain, draw,
          put_pool, get_pool, list_pools, delete_pool, pool_action, cluster, add_learner, membership, digest, log, backup, audit_list, overview,
          healthz, readyz, metrics, jwks, openapi, landing, demo, asset, wait_page, wait_join, staff_page, staff_enter,
          crate::admin::dashboard, crate::admin::login, crate::admin::logout, crate::admin::stats, crate::admin::create_room, crate::admin::action,
          crate::admin::room::room, crate::admin::room::save_config, crate::admin::room::preview, crate::admin::room::history,
          crate::admin::ledger::explain_page, crate::admin::pools::pools_page, crate::admin::pools::pool_action, crate::admin::audit::audit_page, crate::admin::report::report_page),
    components(schemas(VisitorReply, OverviewBody, TicketBody, JoinBody, RoomConfigBody, BrandingBody, EntryBody, PowBody, ExternalChallengeBody, LineBody, OriginBody, BypassBody, BypassPathBody, BypassTokenBody, BypassTokenReply, BypassRevokeBody, CodesCreateBody, CodesCreatedBody, CodeBatchBody, CodeBatchList, LaneBody, LaneStatusBody, ProbeBody, OriginReportBody, OriginSampleBody, HealthChangeBody, OriginWindowBody, RoomBody, RoomList, TotalsBody, ModeBody, HealthBody,
        AdmitBody, RevokeBody, BanBody, SetNoticeBody, NoticeBody, CountReply, QueueReply, QueueEntryBody, PoolBody, PoolReply, PoolList, PoolRoom, AssignReply, PoolRoomBody,
        LearnerBody, MembershipBody, sluice_ops::audit::AuditEntry, sluice_ops::audit::AuditPage,
        LedgerPageBody, LedgerRecordBody, sluice_ops::report::ReportBody, sluice_ops::report::ReportRowBody, DrawBody, DrawStatusBody, ExplainedState, ExplanationBody, SentenceBody, PlaceBody, AdmissionBody, EndBody, AdmissionGroupBody, AdmittedBetweenBody)),
    modifiers(&BearerAuth)
)]
#[derive(Debug)]
pub struct ApiDoc;

struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
        let c = openapi.components.get_or_insert_with(Default::default);
        c.add_security_scheme(
            "bearer",
            SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
        );
    }
}
/// `GET /v1/audit`: the operator audit log, a page at a time.
#[utoipa::path(get, path = "/v1/audit",
    params(("room" = Option<String>, Query, description = "only commands that addressed this room or pool"),
        ("operator" = Option<String>, Query, description = "only this operator's commands"),
        ("from" = Option<String>, Query, description = "only at or after this log time: RFC 3339 or ms since the epoch"),
        ("to" = Option<String>, Query, description = "only at or before this log time: RFC 3339 or ms since the epoch"),
        ("after" = Option<String>, Query, description = "the previous page's next"),
        ("limit" = Option<usize>, Query, description = "page size, 1 to 1,000 (100)")),
    responses((status = 200, body = sluice_ops::audit::AuditPage), (status = 400), (status = 401), (status = 404, description = "ledger_off: this node keeps no ledger")),
    security(("bearer" = [])))]
async fn audit_list(
    State(app): State<Arc<App>>,
    Query(q): Query<sluice_ops::audit::AuditQuery>,
) -> Response {
    match sluice_ops::audit::list(&app.sluice, &q).await {
        Ok(page) => axum::Json(page).into_response(),
        Err(e) => e.into_http(),
    }
}
