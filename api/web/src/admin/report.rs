//! The room's report page (`/admin/rooms/{room}/report`): the report of
//! [`sluice_ops::report`] over a range of log time, its totals in words and its busy minutes
//! as a table, with the CSV and JSON to download (`format=csv|json`, with the session: the API
//! route wants a bearer token). Every signed-in operator may read it, viewers too.

use super::{render, see_other, session, AppState};
use crate::app::{Path, Query};
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use sluice_ops::report::{ReportBody, ReportParams, ReportRowBody};

/// The report page (`templates/admin/report.html`).
#[derive(askama::Template)]
#[template(path = "admin/report.html")]
struct ReportPage<'a> {
    title: &'a str,
    who: &'a super::Session,
    room: &'a str,
    from: &'a str,
    to: &'a str,
    /// The range's query, for the downloads.
    query: String,
    answer: Answer,
}

/// What the page shows.
enum Answer {
    /// The report could not be made.
    Failed(String),
    /// The report: its range, totals and the minutes in which anything happened.
    Report {
        from: String,
        to: String,
        totals: ReportRowBody,
        busy: Vec<ReportRowBody>,
        quiet: usize,
        complete_from: Option<u64>,
    },
}

/// `GET /admin/rooms/{room}/report?from=&to=[&format=csv|json]`.
#[utoipa::path(get, path = "/admin/rooms/{room}/report", tag = "dashboard", operation_id = "dashboard_report_page", params(("room" = String, Path)), responses((status = 200, description = "HTML: the room's report, or with format=csv|json the file (needs the session cookie)", content_type = "text/html")))]
pub async fn report_page(
    axum::extract::State(app): AppState,
    Path(room): Path<String>,
    Query(q): Query<ReportParams>,
    headers: HeaderMap,
) -> Response {
    let Some(s) = session(&app, &headers) else {
        return see_other("/admin");
    };
    let samples = app.history.samples(&room);
    let made = match q.csv() {
        Ok(_) => app.sluice.report(&room, &q, &samples).await,
        Err(e) => Err(e),
    };
    let download = |body: String, kind: &'static str, ext: &str| {
        let mut r = body.into_response();
        let h = r.headers_mut();
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
        if let Ok(v) =
            HeaderValue::from_str(&format!("attachment; filename=\"{room}-report.{ext}\""))
        {
            h.insert(header::CONTENT_DISPOSITION, v);
        }
        r
    };
    let answer = match (made, q.format.as_deref()) {
        (Ok(r), Some("csv")) => return download(r.csv(), "text/csv; charset=utf-8", "csv"),
        (Ok(r), Some("json")) => {
            let body = serde_json::to_string_pretty(&r).unwrap_or_default();
            return download(body, "application/json", "json");
        }
        (Ok(r), _) => answer_of(r),
        (Err(e), _) => Answer::Failed(e.message),
    };
    let nonempty = |v: &Option<String>| v.clone().filter(|s| !s.trim().is_empty());
    let mut params = Vec::new();
    params.extend(nonempty(&q.from).map(|f| ("from", f)));
    params.extend(nonempty(&q.to).map(|t| ("to", t)));
    let mut r = render(&ReportPage {
        title: &format!("Report — {room}"),
        who: &s,
        room: &room,
        from: q.from.as_deref().unwrap_or(""),
        to: q.to.as_deref().unwrap_or(""),
        query: serde_urlencoded::to_string(&params).unwrap_or_default(),
        answer,
    })
    .into_response();
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

fn answer_of(r: ReportBody) -> Answer {
    let total = r.minutes.len();
    let busy: Vec<ReportRowBody> = r
        .minutes
        .into_iter()
        .filter(|m| m.arrivals + m.admissions + m.abandonments > 0)
        .collect();
    Answer::Report {
        from: r.from,
        to: r.to,
        quiet: total - busy.len(),
        busy,
        totals: r.totals,
        complete_from: Some(r.complete_from).filter(|&c| c > 1),
    }
}

/// A wait in seconds, for people; `—` when unknown.
fn secs(v: &Option<u64>) -> String {
    match *v {
        None => "—".into(),
        Some(s) if s < 120 => format!("{s} s"),
        Some(s) if s < 7_200 => format!("{} min", s / 60),
        Some(s) => format!("{} h {} min", s / 3_600, s % 3_600 / 60),
    }
}

/// How often the estimate was right, for people.
fn right(r: &ReportRowBody) -> String {
    match r.estimates_compared {
        0 => "—".into(),
        n => format!(
            "{} of {n} ({} %)",
            r.estimates_right,
            r.estimates_right * 100 / n
        ),
    }
}
