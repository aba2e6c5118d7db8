//! The room page's "Recent decisions" (the room's last ledger records, newest first, in words,
//! with their log index and operator) and "Explain a visitor" (a form that asks by `GET`, and
//! the page that answers it with [`sluice_ops::explain`]'s sentences). No script: both work as
//! plain HTML.

use super::{page, see_other, session, AppState};
use crate::app::{App, Path, Query};
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use sluice_ops::ledger::{describe, rfc3339, Words};
use sluice_ops::text::esc;
use sluice_statemachine::ledger::Record;

/// Records the room's page lists.
pub const DECISIONS_SHOWN: usize = 50;

/// Where a visitor's explanation is shown.
fn explain_href(room: &str, visitor: &str) -> String {
    format!(
        "/admin/rooms/{}/explain?visitor={}",
        esc(room),
        esc(visitor)
    )
}

/// A record in words, as HTML: its visitor links to the visitor's explanation.
fn words_html(room: &str, r: &Record) -> String {
    describe(r)
        .into_iter()
        .map(|w| match w {
            Words::Text(t) => esc(&t),
            Words::Visitor(v) => {
                let id = v.to_string();
                format!(
                    "<a href=\"{}\"><code>{}…</code></a>",
                    explain_href(room, &id),
                    &id[..8]
                )
            }
        })
        .collect()
}

/// The "Explain a visitor" form (a `GET`, so that the answer is a page of its own that can be
/// linked and reloaded), with `visitor` filled in.
pub fn explain_form(room: &str, visitor: &str) -> String {
    format!(
        "<form method=\"get\" action=\"/admin/rooms/{r}/explain\" class=\"card\">\
<div class=\"field\"><label for=\"x-vid\">Visitor id (32 hex digits)</label>\
<small class=\"hint\">Why this visitor got in when it did, or has not yet, from the log.</small>\
<input id=\"x-vid\" name=\"visitor\" value=\"{v}\" maxlength=\"32\" pattern=\"[0-9a-fA-F]{{32}}\" autocomplete=\"off\" spellcheck=\"false\" required></div>\
<button>Explain</button></form>",
        r = esc(room),
        v = esc(visitor)
    )
}

/// The room's "Recent decisions" and "Explain a visitor" sections.
pub async fn section(app: &App, room: &str) -> String {
    let decisions = match app.sluice.recent_records(room, DECISIONS_SHOWN).await {
        Ok((records, _)) if records.is_empty() => {
            "<p>No decisions recorded on this node yet.</p>".to_string()
        }
        Ok((records, all)) => {
            let rows: String = records
                .iter()
                .map(|r| {
                    let t = rfc3339(r.time_ms);
                    format!(
                        "<tr><td>{}</td><td><time datetime=\"{t}\">{t}</time></td><td>{}</td><td>{}</td></tr>",
                        r.index,
                        words_html(room, r),
                        r.by.as_deref().map_or("—".to_string(), esc),
                    )
                })
                .collect();
            let fewer = if all {
                String::new()
            } else {
                "<p>Fewer are shown: the decisions before them were too many to reach here.</p>"
                    .to_string()
            };
            format!(
                "<p>The last {} records of the room's admission ledger on this node, newest first \
(all of them: <code>sluice ctl ledger export --room {}</code>).</p>\
<div class=\"scroll\"><table id=\"decisions\"><thead><tr><th>Index</th><th>Time (UTC)</th><th>Decision</th><th>Operator</th></tr></thead>\
<tbody>{rows}</tbody></table></div>{fewer}",
                records.len(),
                esc(room)
            )
        }
        Err(e) => format!("<p class=\"err\">{}</p>", esc(&e.message)),
    };
    format!(
        "<section aria-labelledby=\"decisions-h\"><h2 id=\"decisions-h\">Recent decisions</h2>{decisions}</section>\
<section aria-labelledby=\"explain-h\"><h2 id=\"explain-h\">Explain a visitor</h2>{}</section>",
        explain_form(room, "")
    )
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
    let back = format!(
        "<p><a href=\"/admin/rooms/{r}\">← Room {r}</a></p>",
        r = esc(&room)
    );
    let (status, answer) = if visitor.is_empty() {
        (axum::http::StatusCode::OK, String::new())
    } else {
        match app.sluice.explain(&room, visitor).await {
            Ok(x) => {
                let items: String = x
                    .sentences
                    .iter()
                    .map(|s| {
                        let cited = if s.indexes.is_empty() {
                            String::new()
                        } else {
                            let list: Vec<String> = s.indexes.iter().map(u64::to_string).collect();
                            format!(" <small class=\"hint\">(log {})</small>", list.join(", "))
                        };
                        format!("<li>{}{cited}</li>", esc(&s.text))
                    })
                    .collect();
                (
                    axum::http::StatusCode::OK,
                    format!(
                        "<h2>Visitor <code>{}</code>: {}</h2><ol id=\"explanation\">{items}</ol>\
<p class=\"hint\">From this node's ledger (complete from index {}, through {}) and its state at index {}.</p>",
                        esc(&x.visitor_id),
                        x.state.as_str(),
                        x.complete_from,
                        x.through,
                        x.applied_index
                    ),
                )
            }
            Err(e) => (
                crate::error::http_status(e.kind),
                format!("<p class=\"err\" role=\"alert\">{}</p>", esc(&e.message)),
            ),
        }
    };
    let body = format!(
        "{back}<h1>Explain a visitor of room {}</h1>{}{answer}",
        esc(&room),
        explain_form(&room, visitor)
    );
    let mut resp = (status, page(&format!("Explain — {room}"), &body)).into_response();
    resp.headers_mut().insert(
        axum::http::header::CACHE_CONTROL,
        axum::http::HeaderValue::from_static("no-store"),
    );
    resp
}
