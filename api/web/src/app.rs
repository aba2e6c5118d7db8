//! What every HTTP handler shares (the API's handlers, the pages and the dashboard): the state,
//! the extractors that refuse with our JSON error, the client's address, and the ticket cookies.

use crate::error::ApiError;
use crate::error::IntoHttp;
use crate::metrics::Metrics;
use axum::extract::{ConnectInfo, FromRequestParts, Request, State};
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::Response;
use sluice_ops::core::Sluice;
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

/// The prefix of the ticket cookies: each room's is `sluice_ticket_{room}`, so that a browser
/// holds a place in several rooms at once. A cookie named just `sluice_ticket` (what earlier
/// versions set, for every room) is still read, for the room it names, and replaced.
pub const COOKIE: &str = "sluice_ticket";

/// The name of `room`'s ticket cookie (room names are valid cookie-name characters).
pub fn cookie_name(room: &str) -> String {
    format!("{COOKIE}_{room}")
}

/// Everything handlers share.
#[derive(Debug)]
pub struct App {
    /// The operations.
    pub sluice: Arc<Sluice>,
    /// Request metrics.
    pub metrics: Arc<Metrics>,
    /// The operator tokens (and the scraper's, which reads `/metrics` only), with the backoff
    /// for wrong guesses; shared with the gRPC server.
    pub auth: Arc<sluice_ops::auth::OperatorAuth>,
    /// Per-client limiter for visitor endpoints (and gRPC `Visitor` calls without a backend
    /// token).
    pub limiter: Arc<sluice_gate::rate::ClientLimiter>,
    /// Whose `X-Forwarded-For` names the client.
    pub trusted_proxies: sluice_gate::client::TrustedProxies,
    /// Mark cookies `Secure`.
    pub secure_cookies: bool,
    /// Largest request body.
    pub body_bytes_max: usize,
    /// The room the landing page links to (`sluice dev`'s demo room).
    pub demo_room: Option<String>,
    /// The dashboard's notes from an action to the page after it.
    pub flash: Arc<Flash>,
    /// The rooms' recent figures, for the dashboard's charts.
    pub history: Arc<sluice_ops::history::History>,
}

impl App {
    /// Shared state with a limiter of `per_second` requests (burst `burst`) per client.
    pub fn new(
        sluice: Arc<Sluice>,
        metrics: Arc<Metrics>,
        auth: Arc<sluice_ops::auth::OperatorAuth>,
        per_second: u32,
        burst: u32,
    ) -> Self {
        App {
            sluice,
            metrics,
            auth,
            limiter: Arc::new(sluice_gate::rate::client_limiter(per_second, burst)),
            trusted_proxies: Default::default(),
            secure_cookies: false,
            body_bytes_max: 64 * 1024,
            demo_room: None,
            flash: Arc::default(),
            history: Arc::default(),
        }
    }
}

/// What handlers take the shared state as.
pub(crate) type AppState = State<Arc<App>>;

/// The value of the cookie `name`, if the request has one.
pub(crate) fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|v| {
            v.split(';').map(str::trim).find_map(|kv| {
                kv.strip_prefix(name)
                    .and_then(|r| r.strip_prefix('='))
                    .map(str::to_string)
            })
        })
}

/// The ticket in `room`'s cookie, or else in the one cookie earlier versions set for every
/// room (which [`Sluice::join`] ignores unless it names this room).
pub fn cookie_ticket(headers: &HeaderMap, room: &str) -> Option<String> {
    cookie(headers, &cookie_name(room)).or_else(|| cookie(headers, COOKIE))
}

/// axum's path extractor, refusing with our JSON error.
#[derive(Debug, FromRequestParts)]
#[from_request(via(axum::extract::Path), rejection(crate::error::HttpError))]
pub struct Path<T>(pub T);

/// axum's query extractor, refusing with our JSON error.
#[derive(Debug, FromRequestParts)]
#[from_request(via(axum::extract::Query), rejection(crate::error::HttpError))]
pub struct Query<T>(pub T);

/// Gives the browser `ticket` as its cookie for `room` (and retires the one cookie earlier
/// versions kept for every room).
pub(crate) fn set_ticket_cookie(app: &App, resp: &mut Response, room: &str, ticket: &str) {
    let secure = if app.secure_cookies { "; Secure" } else { "" };
    let name = cookie_name(room);
    let cookie = format!("{name}={ticket}; Path=/; HttpOnly; SameSite=Lax; Max-Age=86400{secure}");
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        resp.headers_mut().append(header::SET_COOKIE, v);
    }
}

/// Expires the one cookie earlier versions kept for every room, once its place (in `room`) has
/// moved to `room`'s own cookie; one that holds another room's place is left alone.
pub(crate) fn retire_legacy_cookie(
    app: &App,
    resp: &mut Response,
    room: &str,
    headers: &HeaderMap,
) {
    let names_room = cookie(headers, COOKIE)
        .and_then(|t| app.sluice.tickets.verify(&t).ok())
        .is_some_and(|t| t.room == room);
    if names_room {
        resp.headers_mut().append(
            header::SET_COOKIE,
            HeaderValue::from_static("sluice_ticket=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0"),
        );
    }
}

/// An error answer, with the cookie of the ticket it carries (a new visitor's join that may
/// still be applied).
pub(crate) fn error_with_cookie(app: &App, room: &str, e: ApiError) -> Response {
    let ticket = e.ticket.clone();
    let mut resp = e.into_http();
    if let Some(t) = ticket {
        set_ticket_cookie(app, &mut resp, room, &t);
    }
    resp
}

/// The client's address: the peer's, or behind a trusted proxy the one it reports.
pub(crate) fn client_ip(app: &App, req: &Request) -> IpAddr {
    client_ip_of(app, req.headers(), req.extensions())
}

/// [`client_ip`] from a request's parts.
pub(crate) fn client_ip_of(
    app: &App,
    headers: &HeaderMap,
    extensions: &axum::http::Extensions,
) -> IpAddr {
    let peer = extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip())
        .unwrap_or(IpAddr::from([0, 0, 0, 0]));
    client_of(app, headers, peer)
}

/// The client of a request with `headers` from the connection's `peer`: the peer, or the address
/// a trusted proxy there names.
pub(crate) fn client_of(app: &App, headers: &HeaderMap, peer: IpAddr) -> IpAddr {
    let forwarded = headers
        .get_all("x-forwarded-for")
        .iter()
        .map(|v| v.as_bytes());
    app.trusted_proxies.client(peer, forwarded)
}

/// What an action said, kept for the page the browser is sent to next (post, redirect, get:
/// reloading that page repeats nothing). One per signed-in session, taken when shown; at most
/// [`FLASH_MAX`] sessions' at once (the oldest go first).
#[derive(Debug, Default)]
pub struct Flash {
    notes: std::sync::Mutex<BTreeMap<[u8; 16], (u64, FlashNote)>>,
}

/// What an action said, and the access codes it made (shown this once).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FlashNote {
    pub text: String,
    pub codes: Option<sluice_ops::model::CodesCreatedBody>,
}

impl From<String> for FlashNote {
    fn from(text: String) -> Self {
        Self { text, codes: None }
    }
}

/// Most sessions' flash notes kept at once.
pub const FLASH_MAX: usize = 1_000;

impl Flash {
    pub(crate) fn put(&self, session: &[u8; 16], note: impl Into<FlashNote>) {
        let note = note.into();
        let mut notes = self.notes.lock().expect("flash lock");
        let seq = notes.values().map(|(n, _)| *n).max().map_or(0, |n| n + 1);
        notes.insert(*session, (seq, note));
        while notes.len() > FLASH_MAX {
            let oldest = notes
                .iter()
                .min_by_key(|(_, (n, _))| *n)
                .map(|(k, _)| *k)
                .expect("non-empty");
            notes.remove(&oldest);
        }
    }

    pub(crate) fn take(&self, session: &[u8; 16]) -> Option<FlashNote> {
        self.notes
            .lock()
            .expect("flash lock")
            .remove(session)
            .map(|(_, n)| n)
    }
}
