//! The room page's "Recent decisions" (the room's last ledger records, newest first, in words,
//! with their log index and operator) and "Explain a visitor" (a form that asks by `GET`, and
//! the page that answers it with [`sluice_ops::explain`]'s sentences). No script: both work as
//! plain HTML.

use super::{render, see_other, session, AppState};
use crate::app::{App, Path, Query};
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use sluice_ops::ledger::{describe, rfc3339, Words};
use sluice_statemachine::ledger::Record;

/// Records the room's page lists.
pub const DECISIONS_SHOWN: usize = 50;

/// The room page's "Recent decisions" and "Explain a visitor" sections
/// (`templates/admin/decisions.html`).
#[derive(askama::Template)]
#[template(path = "admin/decisions.html")]
pub struct Section<'a> {
    room: &'a str,
    decisions: Decisions,
}

/// The room's last ledger records, as the page lists them.
enum Decisions {
    /// The ledger could not be read.
    Failed(String),
    /// None recorded on this node yet.
    Nothing,
    /// The records, newest first; `all`: none were too many to reach.
    Records { rows: Vec<DecisionRow>, all: bool },
}

/// A record as its row shows it.
struct DecisionRow {
    index: u64,
    /// When (RFC 3339, UTC).
    time: String,
    words: Vec<Word>,
    /// The operator who caused it.
    by: Option<String>,
}

/// A part of a record in words: text, or a visitor, which links to its explanation.
enum Word {
    Text(String),
    Visitor { id: String, short: String },
}

impl DecisionRow {
    fn of(r: &Record) -> Self {
        let words = describe(r)
            .into_iter()
            .map(|w| match w {
                Words::Text(t) => Word::Text(t),
                Words::Visitor(v) => {
                    let id = v.to_string();
                    let short = id[..8].to_string();
                    Word::Visitor { id, short }
                }
            })
            .collect();
        DecisionRow {
            index: r.index,
            time: rfc3339(r.time_ms),
            words,
            by: r.by.as_deref().map(str::to_string),
        }
    }
}

/// The room's "Recent decisions" and "Explain a visitor" sections.
pub async fn section<'a>(app: &App, room: &'a str) -> Section<'a> {
    let decisions = match app.sluice.recent_records(room, DECISIONS_SHOWN).await {
        Ok((records, _)) if records.is_empty() => Decisions::Nothing,
        Ok((records, all)) => Decisions::Records {
            rows: records.iter().map(DecisionRow::of).collect(),
            all,
        },
        Err(e) => Decisions::Failed(e.message),
    };
    Section { room, decisions }
}

/// The explain page (`templates/admin/explain.html`).
#[derive(askama::Template)]
#[template(path = "admin/explain.html")]
struct ExplainPage<'a> {
    title: &'a str,
    room: &'a str,
    visitor: &'a str,
    answer: Answer,
}

/// What the explain page answers.
enum Answer {
    /// No visitor asked about.
    Nothing,
    /// The visitor's explanation could not be given.
    Failed(String),
    Explained(sluice_ops::explain::ExplanationBody),
}

/// The explain page's query.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExplainView {
    /// The visitor id.
    #[serde(default)]
    visitor: Option<String>,
}

/// `GET /admin/rooms/{room}/explain?visitor=…`: a visitor's explanation, sentence by sentence
/// with the log indexes that prove each, and the form to ask about another.
#[utoipa::path(get, path = "/admin/rooms/{room}/explain", tag = "dashboard", operation_id = "dashboard_explain_page", params(("room" = String, Path)), responses((status = 200, description = "HTML: why a visitor is where they are (needs the session cookie)", content_type = "text/html")))]
pub async fn explain_page(
    State(app): AppState,
    Path(room): Path<String>,
    Query(q): Query<ExplainView>,
    headers: HeaderMap,
) -> Response {
    if session(&app, &headers).is_none() {
        return see_other("/admin");
    }
    let visitor = q.visitor.unwrap_or_default();
    let visitor = visitor.trim();
    let (status, answer) = if visitor.is_empty() {
        (axum::http::StatusCode::OK, Answer::Nothing)
    } else {
        match app.sluice.explain(&room, visitor).await {
            Ok(x) => (axum::http::StatusCode::OK, Answer::Explained(x)),
            Err(e) => (crate::error::http_status(e.kind), Answer::Failed(e.message)),
        }
    };
    let page = ExplainPage {
        title: &format!("Explain — {room}"),
        room: &room,
        visitor,
        answer,
    };
    let mut resp = (status, render(&page)).into_response();
    resp.headers_mut().insert(
        axum::http::header::CACHE_CONTROL,
        axum::http::HeaderValue::from_static("no-store"),
    );
    resp
}
