//! A room's page: its state as badges and a summary, charts of its recent figures, the live
//! actions, the notice to the line, the line itself, access codes, staff tokens, the
//! configuration, and deleting it.

use super::form::{readable_utc, Errors, Fields, View};
use super::{csrf, form_session, page, see_other, session, AdminForm, AppState};
use crate::app::{App, Path};
use crate::error::IntoHttp;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use sluice_ops::history::Span;
use sluice_ops::model::RoomBody;
use sluice_ops::text::esc;

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

/// The figures that matter during a sale, at the top of the page.
fn summary(r: &RoomBody) -> String {
    let full = r.active >= r.config.capacity;
    // Each value and note has an id: the page's script keeps them current (`/admin/stats.json`).
    let cell = |id: &str, label: &str, value: String, note: &str| {
        format!(
            "<div><dt>{label}</dt><dd><strong id=\"t-{id}\">{value}</strong> <small id=\"t-{id}-note\">{note}</small></dd></div>"
        )
    };
    format!(
        "<dl id=\"overview\" class=\"figures\" data-room=\"{}\">{}{}{}{}{}</dl>",
        esc(&r.name),
        cell(
            "waiting",
            "Waiting",
            r.waiting.to_string(),
            "people in line"
        ),
        cell(
            "inside",
            "Inside",
            format!("{} / {}", r.active, r.config.capacity),
            if full { "full" } else { "of capacity" }
        ),
        cell(
            "admitted",
            "Admitted",
            r.admitted_last_minute.to_string(),
            &format!(
                "in the last minute (at most {}/min)",
                r.config.admit_per_minute
            )
        ),
        cell(
            "eta",
            "Newest waiter's wait",
            fmt_wait(r.newest_eta_secs),
            "as shown on their page"
        ),
        cell(
            "totals",
            "Totals",
            format!("{} / {}", r.totals.joined, r.totals.admitted),
            "joined / admitted"
        ),
    )
}

/// Codes just made, shown this once: one a line to copy, as CSV to download (the columns of
/// `sluice ctl codes create`), and as invitation links (each opens the room's page with its
/// code filled in). The buttons need the script; the text is there without it.
fn made_codes(room: &str, made: &sluice_ops::model::CodesCreatedBody) -> String {
    let b = &made.batch;
    let room_path = |code: &str| format!("/wait/{}?code={code}", esc(room));
    let rows = made.codes.len().clamp(2, 12);
    let codes = made
        .codes
        .iter()
        .map(|c| esc(c))
        .collect::<Vec<_>>()
        .join("\n");
    let links = made
        .codes
        .iter()
        .map(|c| room_path(&esc(c)))
        .collect::<Vec<_>>()
        .join("\n");
    format!(
        "<section id=\"made-codes\" class=\"card\" aria-labelledby=\"made-h\"><h3 id=\"made-h\">The new codes of batch {id}</h3>\
<label for=\"made-list\">Codes, one a line</label><textarea id=\"made-list\" readonly rows=\"{rows}\">{codes}</textarea>\
<p class=\"js-only\" hidden><button type=\"button\" data-copy=\"made-list\">Copy the codes</button> \
<button type=\"button\" id=\"made-csv\" data-batch=\"{id}\" data-lane=\"{lane}\" data-uses=\"{uses}\" data-expires=\"{expires}\">Download as CSV</button> \
<button type=\"button\" data-copy=\"made-links\">Copy the invitation links</button></p>\
<label for=\"made-links\">Invitation links (each opens the room's page with its code filled in)</label>\
<textarea id=\"made-links\" class=\"links\" readonly rows=\"{rows}\">{links}</textarea></section>",
        id = b.id,
        lane = esc(b.lane.as_deref().unwrap_or("")),
        uses = b.uses,
        expires = b.expires_at.map(sluice_ops::civil::iso_utc).unwrap_or_default(),
    )
}

fn charts(room: &str, span: Span) -> String {
    let link = |s: Span, code: &str, label: &str| {
        let current = if s == span {
            " aria-current=\"true\""
        } else {
            ""
        };
        format!("<a href=\"?span={code}#charts\" data-span=\"{code}\"{current}>{label}</a>")
    };
    let code = match span {
        Span::Quarter => "15m",
        Span::Hour => "1h",
        Span::Day => "1d",
    };
    format!(
        "<section id=\"charts\" aria-labelledby=\"charts-h\"><h2 id=\"charts-h\">Recent figures</h2>\
<nav class=\"spans\" aria-label=\"Time range\">{} {} {}</nav>\
<div id=\"chart-box\" data-room=\"{}\" data-span=\"{code}\"></div>\
<noscript><p>The charts need JavaScript; the figures above are current.</p></noscript></section>",
        link(Span::Quarter, "15m", "Last 15 minutes"),
        link(Span::Hour, "1h", "Last hour"),
        link(Span::Day, "1d", "Last day"),
        esc(room),
    )
}

fn form(r: &str, hidden: &str, action: &str, body: &str) -> String {
    format!(
        "<form method=\"post\" action=\"/admin/rooms/{r}/action\">{hidden}<input type=\"hidden\" name=\"action\" value=\"{action}\">{body}</form>"
    )
}

/// Pause, health, admit, revoke: each its own small form.
fn actions(room: &RoomBody, hidden: &str) -> String {
    let r = esc(&room.name);
    let c = &room.config;
    let (pause_action, pause_label, pause_note) = if c.paused {
        (
            "resume",
            "Resume admissions",
            "Admissions are paused; joins still queue.",
        )
    } else {
        (
            "pause",
            "Pause admissions",
            "Joins still queue; nobody is admitted while paused.",
        )
    };
    let healths = [
        ("ok", "OK"),
        ("slow", "Slow (admit slower)"),
        ("down", "Down (admit nobody)"),
    ]
    .iter()
    .map(|(v, l)| {
        format!(
            "<option value=\"{v}\"{}>{l}</option>",
            if c.health == *v { " selected" } else { "" }
        )
    })
    .collect::<String>();
    [
        form(&r, hidden, pause_action, &format!("<p>{pause_note}</p><button>{pause_label}</button>")),
        form(&r, hidden, "health", &format!(
            "<div class=\"field\"><label for=\"a-health\">Origin health</label><select id=\"a-health\" name=\"health\">{healths}</select></div>\
<div class=\"field\"><label for=\"a-sf\">Rate while slow (0–1)</label><input id=\"a-sf\" name=\"slow_factor\" value=\"{}\" inputmode=\"decimal\"></div><button>Set health</button>",
            c.slow_factor
        )),
        form(&r, hidden, "admit", "<div class=\"field\"><label for=\"a-count\">Admit now, ignoring the rate and the pause (not the capacity)</label>\
<input id=\"a-count\" name=\"count\" type=\"number\" min=\"1\" value=\"1\"></div><button>Admit</button>"),
        form(&r, hidden, "revoke", "<div class=\"field\"><label for=\"a-vid\">End one visitor's session or place (visitor id)</label><input id=\"a-vid\" name=\"visitor_id\"></div>\
<div class=\"field check\"><input type=\"checkbox\" id=\"a-rall\" name=\"confirm_all\" value=\"yes\"><label for=\"a-rall\">End every session of the room instead (leave the id empty)</label></div><button class=\"danger\">Revoke</button>"),
    ]
    .map(|f| format!("<div class=\"card\">{f}</div>"))
    .concat()
}

fn notice_section(room: &RoomBody, hidden: &str, can_act: bool) -> String {
    let r = esc(&room.name);
    let current = room.notice.as_ref().map_or(String::new(), |n| {
        format!(
            "<p>Shown since <time data-unix=\"{t}\">{}</time>:</p><blockquote class=\"notice\">{}</blockquote>{}",
            readable_utc(n.set_at),
            esc(&n.text),
            if can_act {
                form(&r, hidden, "notice_clear", "<button>Take it down</button>")
            } else {
                String::new()
            },
            t = n.set_at
        )
    });
    if !can_act {
        let none = if room.notice.is_none() {
            "<p>No notice is shown.</p>"
        } else {
            ""
        };
        return format!(
            "<section aria-labelledby=\"notice-h\"><h2 id=\"notice-h\">Notice to everyone in line</h2>{current}{none}</section>"
        );
    }
    format!(
        "<section aria-labelledby=\"notice-h\"><h2 id=\"notice-h\">Notice to everyone in line</h2>{current}{}</section>",
        form(
            &r,
            hidden,
            "notice",
            "<div class=\"field\"><label for=\"a-notice\">Message (plain text, at most 500 bytes), shown live on every waiter's page</label>\
<textarea id=\"a-notice\" name=\"text\" rows=\"2\" maxlength=\"500\" required></textarea></div><button>Show to the line</button>"
        )
    )
}

fn since(app: &App, room: &str, seq: u64, now: u64) -> String {
    match app.history.joined_between(room, seq) {
        Some((Some(_), at)) => format!(
            "<time data-unix=\"{at}\">{}</time> ({} ago)",
            readable_utc(at),
            fmt_wait(Some(now.saturating_sub(at)))
        ),
        Some((None, at)) => format!(
            "before <time data-unix=\"{at}\">{}</time>",
            readable_utc(at)
        ),
        None => "just now".into(),
    }
}

/// The first waiters of every lane, in admission order.
async fn queue_section(app: &App, room: &RoomBody) -> String {
    let now = now_secs(app);
    let q = match app.sluice.queue(&room.name, 0, QUEUE_SHOWN, false).await {
        Ok(q) => q,
        Err(e) => return format!("<p class=\"err\">{}</p>", esc(&e.message)),
    };
    if q.entries.is_empty() {
        return "<h2 id=\"line\">Waiting line</h2><p>Nobody is waiting.</p>".into();
    }
    let rows: String = q
        .entries
        .iter()
        .map(|e| {
            let seen = e.last_seen_ms / 1000;
            format!(
                "<tr><td>{}</td><td>{}</td><td><code>{}</code></td><td>{}</td><td>{} ago</td></tr>",
                e.position,
                esc(e.lane.as_deref().unwrap_or("—")),
                esc(&e.visitor_id),
                since(app, &room.name, e.seq, now),
                fmt_wait(Some(now.saturating_sub(seen)))
            )
        })
        .collect();
    let more = q.waiting.saturating_sub(q.entries.len() as u64);
    let more = if more > 0 {
        format!(
            "<p>And {more} more (all of them: <code>GET /v1/rooms/{}/queue</code>).</p>",
            esc(&room.name)
        )
    } else {
        String::new()
    };
    let order = if room.config.mode == "lottery" {
        " In a lottery the order is the line's, not the draw's."
    } else {
        ""
    };
    format!(
        "<h2 id=\"line\">Waiting line</h2><p>The first {} in admission order, each lane first.{order}</p>\
<div class=\"scroll\"><table><thead><tr><th>Place</th><th>Lane</th><th>Visitor</th><th>Joined</th><th>Last check-in</th></tr></thead><tbody>{rows}</tbody></table></div>{more}",
        q.entries.len()
    )
}

fn danger_zone(room: &RoomBody, hidden: &str) -> String {
    let r = esc(&room.name);
    format!(
        "<section id=\"danger\" class=\"danger-zone\" aria-labelledby=\"del-h\"><h2 id=\"del-h\">Delete the room</h2>\
<p>Ends its {} and {} at once; their visitors are turned away.</p>{}</section>",
        sluice_ops::text::count(room.waiting, "waiting place", "waiting places"),
        sluice_ops::text::count(room.active, "session", "sessions"),
        form(
            &r,
            hidden,
            "delete",
            &format!("<div class=\"field\"><label for=\"a-del\">Type the room's name, <code>{r}</code>, to delete it</label>\
<input id=\"a-del\" name=\"confirm_name\" autocomplete=\"off\" required></div><button class=\"danger\">Delete room {r}</button>")
        )
    )
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
    let hidden = format!("<input type=\"hidden\" name=\"csrf\" value=\"{token}\">");
    let r = esc(&room.name);
    // A viewer sees the room without the forms that change it.
    let can_act = s.may_act();
    let acts = |html: String| if can_act { html } else { String::new() };
    // An action's refusal (not a field of the form) goes at the top.
    let general = errors
        .get("")
        .filter(|_| submitted.is_none())
        .map(|e| format!("<p class=\"err\" role=\"alert\">{}</p>", esc(e)))
        .unwrap_or_default();
    let flash = flash.map(|n| flash_html(n, &room.name)).unwrap_or_default();
    let health = room
        .health_change
        .as_ref()
        .map(|c| format!("<p>Origin health: {}</p>", esc(&c.reason)))
        .unwrap_or_default();
    let view = View::new(errors, submitted);
    let fields = super::config::fields(&view, &room.config, &room.name);
    let config = acts(format!(
        "<h2 id=\"config\">Configuration</h2><form method=\"post\" action=\"/admin/rooms/{r}/config\" novalidate>{hidden}{fields}\
<p><button type=\"submit\">Save configuration</button></p></form>"
    ));
    // A refused save: every error in one list at the top of the page (the page reloads at its
    // top), each linked to its field; the script moves the focus to it. Only for the
    // configuration form: an action's refusal is `general`.
    let fix = if submitted.is_some() {
        view.summary()
    } else {
        String::new()
    };
    let jump = jump_bar(can_act);
    let actions = if can_act {
        format!(
            "<h2 id=\"actions\">Actions</h2><div class=\"cards\">{}</div>",
            actions(room, &hidden)
        )
    } else {
        super::viewer_note().to_string()
    };
    let body = format!(
        "{}<p><a href=\"/admin\">← All rooms</a></p><h1>Room {r}</h1><p class=\"badges\">{}</p>{jump}{flash}{general}{fix}{health}\
{}{}{actions}{}{}{}{}{config}{}\
<script src=\"/assets/uplot.js\" defer></script><script src=\"/assets/admin.js\" defer></script>",
        super::who(s),
        badges(room, now_secs(app)),
        summary(room),
        charts(&room.name, span),
        notice_section(room, &hidden, can_act),
        queue_section(app, room).await + &super::ledger::section(app, &room.name).await.to_string(),
        super::codes_section(app, &room.name, &room.config.lanes, &token, can_act),
        acts(format!(
            "<h2 id=\"staff\">Staff bypass tokens</h2>{}",
            super::bypass_forms(&r, &hidden)
        )),
        acts(danger_zone(room, &hidden)),
    );
    page(&format!("Room {}", room.name), &body)
}

/// The page is long: a bar of jump links to its parts, kept at the top as it scrolls (the
/// parts that change the room only for who may act).
fn jump_bar(can_act: bool) -> String {
    let mut links = vec![
        ("overview", "Overview"),
        ("charts", "Figures"),
        ("line", "Line"),
        ("codes", "Codes"),
    ];
    if can_act {
        links.extend([
            ("staff", "Staff"),
            ("config", "Settings"),
            ("design", "Design"),
            ("danger", "Delete"),
        ]);
    }
    let links: Vec<String> = links
        .iter()
        .map(|(id, label)| format!("<a href=\"#{id}\">{label}</a>"))
        .collect();
    format!(
        "<nav class=\"jump\" aria-label=\"Parts of this page\">{}</nav>",
        links.join(" ")
    )
}

/// What the last action said, and the codes it made (shown this once).
fn flash_html(n: &crate::app::FlashNote, room: &str) -> String {
    let codes = n.codes.as_ref().map(|m| made_codes(room, m));
    format!(
        "<p class=\"ok\" role=\"status\">{}</p>{}",
        esc(&n.text),
        codes.unwrap_or_default()
    )
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
    sluice_ops::model::VisitorReply {
        state: sluice_ops::model::ReplyState::Waiting,
        room: room.to_string(),
        visitor_id: String::new(),
        ticket: String::new(),
        position: Some(42),
        lane: None,
        ahead: None,
        eta_secs: Some(480),
        eta_max_secs: Some(720),
        waiting: Some(120),
        provisional: None,
        held: None,
        next_check_secs: None,
        admission_token: None,
        expires_at: None,
        notice,
        reason: None,
        applied_index: 0,
    }
}

/// `POST /admin/rooms/{room}/preview`: the waiting page with the form's branding, as a visitor
/// in the middle of the line would see it; nothing is saved.
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
    let warning = sluice_ops::model::check_contrast(&config.branding)
        .err()
        .map(|(_, why)| why);
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
    let mut html = crate::pages::preview_html(lang, &reply, &view, now_secs(&app));
    let banner = match warning {
        Some(w) => format!("<div role=\"alert\" style=\"background:#b00020;color:#fff;padding:.6rem 1rem;font:16px system-ui\">Preview: this branding would be refused: {}</div>", esc(&w)),
        None => "<div role=\"note\" style=\"background:#1a1a1a;color:#fff;padding:.6rem 1rem;font:16px system-ui\">Preview of the visitor's page with the form's branding (not saved)</div>".to_string(),
    };
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
