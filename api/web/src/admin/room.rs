//! A room's page: its state as badges and a summary, charts of its recent figures, the live
//! actions, the notice to the line, the line itself, access codes, staff tokens, the
//! configuration, and deleting it.

use super::form::{readable_utc, Errors, Fields, View};
use super::{csrf, form_session, render, see_other, session, AdminForm, AppState};
use crate::app::{App, Path};
use crate::error::IntoHttp;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use sluice_ops::history::Span;
use sluice_ops::model::RoomBody;

/// Waiters the room's page lists (the API's `/queue` pages through the rest).
pub const QUEUE_SHOWN: usize = 50;

fn now_secs(app: &App) -> u64 {
    app.sluice.now_ms() / 1000
}

/// A room's state as badges (`templates/admin/badges.html`).
#[derive(askama::Template)]
#[template(path = "admin/badges.html")]
pub struct Badges {
    list: Vec<Badge>,
}

/// One word of a room's state.
struct Badge {
    /// Its colour class.
    class: &'static str,
    text: &'static str,
    /// The opening a queueing room waits for: seconds since the epoch, and as read (UTC).
    opens: Option<(u64, String)>,
}

impl Badge {
    fn new(class: &'static str, text: &'static str) -> Self {
        Badge {
            class,
            text,
            opens: None,
        }
    }
}

/// The room's state in words, each with its colour class (never colour alone): first one state,
/// the words `sluice ctl rooms` prints (closed, paused, queueing before its opening, admitting),
/// then how it takes newcomers when that is not the usual line, and what else holds.
pub fn badges(r: &RoomBody, now: u64) -> Badges {
    let mut b: Vec<Badge> = Vec::new();
    if r.closed {
        b.push(Badge::new("grey", "Closed"));
    } else if r.config.paused || r.paused_by_origin {
        let text = if r.paused_by_origin {
            "Paused: origin down"
        } else {
            "Paused"
        };
        b.push(Badge::new("amber", text));
    } else if !r.open {
        b.push(Badge {
            opens: r.config.opens_at.map(|t| (t, readable_utc(t))),
            ..Badge::new("blue", "Queueing")
        });
    } else {
        b.push(Badge::new("green", "Admitting"));
    }
    if !r.closed {
        match r.config.mode.as_str() {
            "passthrough" => b.push(Badge::new("grey", "Everyone enters")),
            "reject" => b.push(Badge::new("grey", "Newcomers turned away")),
            "lottery" => b.push(Badge::new("blue", "Lottery")),
            _ => {}
        }
    }
    match r.config.health.as_str() {
        "slow" => b.push(Badge::new("amber", "Origin slow")),
        "down" if !r.paused_by_origin => b.push(Badge::new("red", "Origin down")),
        _ => {}
    }
    if r.config.entry.invite_only {
        b.push(Badge::new("blue", "Invite only"));
    }
    if r.notice.is_some() {
        b.push(Badge::new("blue", "Notice shown"));
    }
    let _ = now;
    Badges { list: b }
}

fn fmt_wait(secs: Option<u64>) -> String {
    match secs {
        None => "no estimate".into(),
        Some(s) if s < 60 => format!("{s} s"),
        Some(s) if s < 3_600 => format!("{} min", s.div_ceil(60)),
        Some(s) => format!("{} h {} min", s / 3_600, s % 3_600 / 60),
    }
}

/// The room's page (`templates/admin/room.html` and its parts in `templates/admin/room/`).
#[derive(askama::Template)]
#[template(path = "admin/room.html")]
struct RoomPage<'a> {
    title: String,
    who: &'a super::Session,
    token: &'a str,
    room: &'a RoomBody,
    /// Whether the page has the forms that change the room.
    can_act: bool,
    badges: Badges,
    flash: Option<Flash<'a>>,
    /// An action's refusal (not a field of the form).
    general: Option<&'a str>,
    /// A refused save's errors, in one list.
    fix: Option<super::form::Summary>,
    /// The room is at its capacity.
    full: bool,
    /// The newest waiter's wait, in words.
    eta: String,
    /// The charts' time range (`15m`, `1h`, `1d`).
    span: &'static str,
    notice: Option<Notice<'a>>,
    /// The sale's phases, in order.
    timeline: Vec<PhaseRow<'a>>,
    queue: Queue,
    decisions: super::ledger::Section<'a>,
    codes: String,
    /// The configuration form's fields.
    config: super::config::ConfigForm<'a>,
    /// What deleting the room ends: its waiting places and its sessions, counted in words.
    ends: (String, String),
}

/// A phase of the sale, as the room's page lists it.
struct PhaseRow<'a> {
    index: usize,
    at: u64,
    readable: String,
    name: &'a str,
    /// What it changes, in words.
    changes: String,
    /// Done, in effect, next, later.
    state: &'static str,
    /// Still to start: it may be removed.
    editable: bool,
}

/// The rows of a room's timeline at `now` (unix seconds).
fn timeline(phases: &[sluice_ops::model::PhaseBody], now: u64) -> Vec<PhaseRow<'_>> {
    let current = phases.iter().rposition(|p| p.starts_at <= now);
    phases
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let mut changes = Vec::new();
            if let Some(c) = p.capacity {
                changes.push(format!("capacity {c}"));
            }
            if let Some(r) = p.admit_per_minute {
                changes.push(format!("{r} admissions a minute"));
            }
            if let Some(m) = &p.mode {
                changes.push(format!("mode {m}"));
            }
            match p.notice.as_deref() {
                Some("") => changes.push("notice taken down".into()),
                Some(n) => changes.push(format!("notice \u{201c}{n}\u{201d}")),
                None => {}
            }
            if p.template.is_some() {
                changes.push("its own page".into());
            }
            if p.announce {
                changes.push("announced to waiters".into());
            }
            let state = match current {
                Some(c) if i < c => "done",
                Some(c) if i == c => "in effect",
                _ if current.map_or(0, |c| c + 1) == i => "next",
                _ => "later",
            };
            PhaseRow {
                index: i,
                at: p.starts_at,
                readable: readable_utc(p.starts_at),
                name: &p.name,
                changes: if changes.is_empty() {
                    "nothing".into()
                } else {
                    changes.join(", ")
                },
                state,
                editable: p.starts_at > now,
            }
        })
        .collect()
}

/// What the last action said, and the codes it made (shown this once).
struct Flash<'a> {
    text: &'a str,
    made: Option<MadeCodes<'a>>,
}

/// Codes just made, as the page shows them this once.
struct MadeCodes<'a> {
    /// The batch.
    id: u32,
    lane: &'a str,
    uses: u32,
    /// When they expire (RFC 3339), or empty.
    expires: String,
    /// The text areas' height.
    rows: usize,
    /// The codes, one a line.
    codes: String,
    /// Their invitation links (each opens the room's page with its code filled in), one a line.
    links: String,
}

impl<'a> MadeCodes<'a> {
    fn of(room: &str, made: &'a sluice_ops::model::CodesCreatedBody) -> Self {
        let b = &made.batch;
        let links: Vec<String> = made
            .codes
            .iter()
            .map(|c| format!("/wait/{room}?code={c}"))
            .collect();
        MadeCodes {
            id: b.id,
            lane: b.lane.as_deref().unwrap_or(""),
            uses: b.uses,
            expires: b
                .expires_at
                .map(sluice_ops::civil::iso_utc)
                .unwrap_or_default(),
            rows: made.codes.len().clamp(2, 12),
            codes: made.codes.join("\n"),
            links: links.join("\n"),
        }
    }
}

/// The notice shown to the line.
struct Notice<'a> {
    /// Since when: seconds since the epoch, and as read (UTC).
    set_at: u64,
    readable: String,
    text: &'a str,
}

/// The first waiters, as the page lists them.
enum Queue {
    /// The line could not be read.
    Failed(String),
    /// Nobody is waiting.
    Empty,
    /// The first waiters, and how many more wait.
    Shown { rows: Vec<Waiter>, more: u64 },
}

/// A waiter as its row shows it.
struct Waiter {
    position: u64,
    lane: String,
    visitor_id: String,
    joined: Joined,
    /// How long ago it last checked in, in words.
    seen: String,
}

/// When a waiter joined, as far as this node's history tells.
enum Joined {
    /// At `at` (seconds since the epoch, and as read), `ago` in words.
    At {
        at: u64,
        readable: String,
        ago: String,
    },
    /// Before the history's first sample.
    Before { at: u64, readable: String },
    /// After its last sample.
    JustNow,
}

fn joined(app: &App, room: &str, seq: u64, now: u64) -> Joined {
    match app.history.joined_between(room, seq) {
        Some((Some(_), at)) => Joined::At {
            at,
            readable: readable_utc(at),
            ago: fmt_wait(Some(now.saturating_sub(at))),
        },
        Some((None, at)) => Joined::Before {
            at,
            readable: readable_utc(at),
        },
        None => Joined::JustNow,
    }
}

/// The first waiters of every lane, in admission order.
async fn queue(app: &App, room: &RoomBody) -> Queue {
    let now = now_secs(app);
    let q = match app.sluice.queue(&room.name, 0, QUEUE_SHOWN, false).await {
        Ok(q) => q,
        Err(e) => return Queue::Failed(e.message),
    };
    if q.entries.is_empty() {
        return Queue::Empty;
    }
    let rows: Vec<Waiter> = q
        .entries
        .into_iter()
        .map(|e| Waiter {
            position: e.position,
            lane: e.lane.unwrap_or_else(|| "—".into()),
            joined: joined(app, &room.name, e.seq, now),
            seen: fmt_wait(Some(now.saturating_sub(e.last_seen_ms / 1000))),
            visitor_id: e.visitor_id,
        })
        .collect();
    let more = q.waiting.saturating_sub(rows.len() as u64);
    Queue::Shown { rows, more }
}

/// The room's page; after a refused save, `submitted` shows the operator's input again with
/// `errors` at their fields and in a summary.
pub async fn room_page(
    app: &App,
    s: &super::Session,
    room: &RoomBody,
    errors: &Errors,
    submitted: Option<&Fields>,
    flash: Option<&crate::app::FlashNote>,
    span: Span,
) -> Html<String> {
    let token = csrf(app, s);
    // A viewer sees the room without the forms that change it.
    let can_act = s.may_act();
    let view = View::new(errors, submitted);
    let config = super::config::fields(&view, &room.config, &room.name);
    // A refused save: every error in one list at the top of the page (the page reloads at its
    // top), each linked to its field; the script moves the focus to it. Only for the
    // configuration form: an action's refusal is `general`.
    let fix = submitted.and_then(|_| view.summary());
    let count = sluice_ops::text::count;
    render(&RoomPage {
        title: format!("Room {}", room.name),
        who: s,
        token: &token,
        room,
        can_act,
        badges: badges(room, now_secs(app)),
        flash: flash.map(|n| Flash {
            text: &n.text,
            made: n.codes.as_ref().map(|m| MadeCodes::of(&room.name, m)),
        }),
        general: errors
            .get("")
            .filter(|_| submitted.is_none())
            .map(String::as_str),
        fix,
        full: room.active >= room.config.capacity,
        eta: fmt_wait(room.newest_eta_secs),
        span: match span {
            Span::Quarter => "15m",
            Span::Hour => "1h",
            Span::Day => "1d",
        },
        notice: room.notice.as_ref().map(|n| Notice {
            set_at: n.set_at,
            readable: readable_utc(n.set_at),
            text: &n.text,
        }),
        timeline: timeline(&room.config.phases, now_secs(app)),
        queue: queue(app, room).await,
        decisions: super::ledger::section(app, &room.name).await,
        codes: super::codes_section(app, &room.name, &room.config.lanes, &token, can_act),
        config,
        ends: (
            count(room.waiting, "waiting place", "waiting places"),
            count(room.active, "session", "sessions"),
        ),
    })
}

/// `?span=` of the room's page and its history.
#[derive(Debug, serde::Deserialize)]
pub struct SpanQuery {
    span: Option<String>,
}

impl SpanQuery {
    fn span(&self) -> Span {
        self.span
            .as_deref()
            .and_then(Span::parse)
            .unwrap_or(Span::Quarter)
    }
}

/// `GET /admin/rooms/{room}`.
#[utoipa::path(get, path = "/admin/rooms/{room}", tag = "dashboard", operation_id = "dashboard_room", params(("room" = String, Path)), responses((status = 200, description = "HTML: the room's page (needs the session cookie)", content_type = "text/html")))]
pub async fn room(
    State(app): AppState,
    Path(room): Path<String>,
    Query(q): Query<SpanQuery>,
    headers: HeaderMap,
) -> Response {
    let Some(s) = session(&app, &headers) else {
        return see_other("/admin");
    };
    // Right after an action, the page shows its result and the state it left (a linearizable
    // read: this node may not have applied the action yet).
    let flash = app.flash.take(&s.id);
    match app.sluice.get_room(&room, flash.is_some()).await {
        Ok(r) => {
            let mut resp = room_page(&app, &s, &r, &Errors::new(), None, flash.as_ref(), q.span())
                .await
                .into_response();
            resp.headers_mut().insert(
                axum::http::header::CACHE_CONTROL,
                axum::http::HeaderValue::from_static("no-store"),
            );
            resp
        }
        Err(e) => not_found(e),
    }
}

/// The page for a room that cannot be shown (a name that is not a room's, say).
pub fn not_found(e: crate::error::ApiError) -> Response {
    let page = super::MessagePage {
        title: "Not found",
        alert: false,
        text: &e.message,
        open_room: None,
        back: "All rooms",
    };
    (crate::error::http_status(e.kind), super::render(&page)).into_response()
}

/// `POST /admin/rooms/{room}/config`: save, or show the form again with the operator's input,
/// every error at its field and in a summary at the top.
#[utoipa::path(post, path = "/admin/rooms/{room}/config", tag = "dashboard", operation_id = "dashboard_save_config", params(("room" = String, Path)), request_body(content_type = "application/x-www-form-urlencoded"), responses((status = 303, description = "saved: back to the room's page"), (status = 400, description = "HTML: the form again, with what was wrong", content_type = "text/html")))]
pub async fn save_config(
    State(app): AppState,
    Path(room): Path<String>,
    headers: HeaderMap,
    AdminForm(f): AdminForm,
) -> Response {
    let s = match form_session(&app, &headers, &f) {
        Ok(s) => s,
        Err(answer) => return *answer,
    };
    let current = match app.sluice.get_room(&room, true).await {
        Ok(r) => r,
        Err(e) => return not_found(e),
    };
    let refused = |status: StatusCode, errors: Errors| {
        let (app, s, current, f) = (&app, &s, &current, &f);
        async move {
            (
                status,
                room_page(app, s, current, &errors, Some(f), None, Span::Quarter).await,
            )
                .into_response()
        }
    };
    let body = match super::config::read(&f, &current.config) {
        Ok(b) => b,
        Err(errors) => return refused(StatusCode::BAD_REQUEST, errors).await,
    };
    // The engine names its fields as the API does; the form's lanes are one field.
    let form_errors = |errors: Vec<crate::error::ApiError>| -> Errors {
        let mut out = Errors::new();
        for e in errors {
            let mut field = e.field.clone().unwrap_or_default();
            // The summary names the field by its label: not again by its API name.
            let message = e
                .message
                .strip_prefix(&format!("{field}: "))
                .unwrap_or(&e.message)
                .to_string();
            if field.starts_with("entry.lanes") || field.starts_with("lanes") {
                field = "lanes".into();
            }
            out.entry(field).or_insert(message);
        }
        out
    };
    // Every rule the form breaks at once, not one a save.
    let broken = app.sluice.room_body_errors(&body, &current.config);
    if !broken.is_empty() {
        return refused(StatusCode::BAD_REQUEST, form_errors(broken)).await;
    }
    match app.sluice.put_room(&room, &body, false).await {
        Ok(_) => {
            app.flash.put(&s.id, "Saved.".to_string());
            see_other(&format!("/admin/rooms/{room}"))
        }
        Err(e) => {
            let status = crate::error::http_status(e.kind);
            refused(status, form_errors(vec![e])).await
        }
    }
}

/// The room a branding preview shows: open, 120 waiting, with the form's configuration.
fn preview_view(
    room: &str,
    config: sluice_statemachine::RoomConfig,
    active: u64,
    text_color: Option<String>,
) -> sluice_statemachine::RoomView {
    sluice_statemachine::RoomView {
        name: room.to_string(),
        config,
        created_at_ms: 0,
        open: true,
        closed: false,
        waiting: 120,
        active,
        totals: Default::default(),
        admitted_last_minute: 0,
        eta_rate_per_minute: 0,
        bucket_tokens: 0,
        next_seq: 1,
        sessions_shared: 0,
        health_change: None,
        paused_by_origin: false,
        origin_window: None,
        lanes: Vec::new(),
        codes: 0,
        notice: None,
        draw: None,
        newest_eta_secs: None,
        text_color,
        challenges_remembered: 0,
    }
}

/// The visitor a branding preview shows: 42nd in line, about ten minutes from the turn.
fn preview_reply(room: &str, notice: Option<String>) -> sluice_ops::model::VisitorReply {
    use sluice_ops::model::{ReplyState, VisitorReply};
    let mut r = VisitorReply::bare(
        ReplyState::Waiting,
        room.to_string(),
        String::new(),
        String::new(),
        0,
    );
    (r.position, r.eta_secs, r.eta_max_secs, r.waiting) =
        (Some(42), Some(480), Some(720), Some(120));
    r.notice = notice;
    r
}

/// The bar above a branding preview (`templates/admin/preview_banner.html`).
#[derive(askama::Template)]
#[template(path = "admin/preview_banner.html")]
struct PreviewBanner {
    /// Why the branding would be refused.
    warning: Option<String>,
}

/// `POST /admin/rooms/{room}/preview`: the waiting page with the form's branding, as a visitor
/// in the middle of the line would see it; nothing is saved.
#[utoipa::path(post, path = "/admin/rooms/{room}/preview", tag = "dashboard", operation_id = "dashboard_preview", params(("room" = String, Path)), request_body(content_type = "application/x-www-form-urlencoded"), responses((status = 200, description = "HTML: the waiting page as the form would make it, not saved", content_type = "text/html")))]
pub async fn preview(
    State(app): AppState,
    Path(room): Path<String>,
    headers: HeaderMap,
    AdminForm(f): AdminForm,
) -> Response {
    if let Err(answer) = form_session(&app, &headers, &f) {
        return *answer;
    }
    let current = match app.sluice.get_room(&room, false).await {
        Ok(r) => r,
        Err(e) => return not_found(e),
    };
    let mut config = current.config.clone();
    if let Ok(read) = super::config::read(&f, &current.config) {
        config.branding = read.branding;
    }
    let template = config.branding.template.clone();
    let refused = template
        .as_deref()
        .and_then(|t| sluice_ops::page::check(t).err())
        .map(|e| format!("the page template: {e} (the built-in page is shown below)"));
    let warning = sluice_ops::model::check_contrast(&config.branding)
        .err()
        .map(|(_, why)| why)
        .into_iter()
        .chain(refused)
        .reduce(|a, b| format!("{a}; {b}"));
    let Ok(sm_config) = config.to_config() else {
        return not_found(crate::error::ApiError::invalid(
            "branding",
            "cannot be shown",
        ));
    };
    let text_color = config.branding.text_color.clone();
    let view = preview_view(&room, sm_config, current.active, text_color);
    let notice = current.notice.as_ref().map(|n| n.text.clone());
    let reply = preview_reply(&room, notice);
    let lang = crate::i18n::Lang::negotiate(
        headers
            .get(axum::http::header::ACCEPT_LANGUAGE)
            .and_then(|v| v.to_str().ok()),
    );
    let shown = template.filter(|t| sluice_ops::page::check(t).is_ok());
    let mut html =
        crate::pages::preview_html(lang, &reply, &view, now_secs(&app), shown.as_deref());
    let banner = PreviewBanner { warning }.to_string();
    if let Some(i) = html.find("<body>") {
        html.insert_str(i + "<body>".len(), &banner);
    }
    let mut resp = Html(html).into_response();
    resp.headers_mut().insert(
        axum::http::header::CACHE_CONTROL,
        axum::http::HeaderValue::from_static("no-store"),
    );
    resp
}

/// `GET /admin/rooms/{room}/history.json?span=15m|1h|1d`: what the charts draw.
#[utoipa::path(get, path = "/admin/rooms/{room}/history.json", tag = "dashboard", operation_id = "dashboard_history", params(("room" = String, Path)), responses((status = 200, description = "the room's sampled figures for its charts (needs the session cookie)", content_type = "application/json")))]
pub async fn history(
    State(app): AppState,
    Path(room): Path<String>,
    Query(q): Query<SpanQuery>,
    headers: HeaderMap,
) -> Response {
    if session(&app, &headers).is_none() {
        return crate::error::ApiError::unauthorized().into_http();
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    match app.history.series(&room, q.span(), now) {
        Some(s) => axum::Json(s).into_response(),
        None => axum::Json(sluice_ops::history::Series::default()).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_statemachine::{Command, EntryPolicy, Mode, Proposal, RoomConfig, StateMachine};

    /// The room made with `config` at `at_ms`, as seen 10 s later.
    fn body(config: RoomConfig, at_ms: u64) -> RoomBody {
        let mut sm = StateMachine::new();
        let create = Command::CreateRoom {
            room: "r".into(),
            config,
        };
        for (index, time_ms, commands) in [
            (1, at_ms, vec![create]),
            (2, at_ms + 10_000, vec![Command::Tick]),
        ] {
            sm.apply(1, index, &Proposal { time_ms, commands });
        }
        RoomBody::new(&sm.room("r").unwrap(), &EntryPolicy::default(), 2)
    }

    /// The overview and the room's page say one state per room, as the CLI does: never
    /// "Queueing" for a paused, closed or open room.
    #[test]
    fn a_room_shows_one_state() {
        const T: u64 = 1_800_000_000_000;
        let state = |config: RoomConfig| {
            let b = badges(&body(config, T), T / 1000).to_string();
            ["Closed", "Paused", "Queueing", "Admitting"]
                .into_iter()
                .filter(|w| b.contains(&format!(">{w}")))
                .collect::<Vec<_>>()
        };
        assert_eq!(state(RoomConfig::default()), ["Admitting"]);
        let paused = RoomConfig {
            paused: true,
            ..RoomConfig::default()
        };
        assert_eq!(state(paused), ["Paused"]);
        let scheduled = RoomConfig {
            opens_at_ms: Some(T + 86_400_000),
            ..RoomConfig::default()
        };
        assert_eq!(state(scheduled), ["Queueing"]);
        let closed = RoomConfig {
            closes_at_ms: Some(T + 5_000),
            paused: true,
            ..RoomConfig::default()
        };
        assert_eq!(state(closed), ["Closed"]);
        let lottery = RoomConfig {
            mode: Mode::Lottery,
            ..RoomConfig::default()
        };
        let b = badges(&body(lottery, T), T / 1000).to_string();
        assert!(b.contains(">Admitting") && b.contains(">Lottery"), "{b}");
    }
}
