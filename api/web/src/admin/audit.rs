//! The "Audit log" page: who did what to which room, when, and with what outcome, from this
//! node's ledger ([`sluice_ops::audit`]), filtered by room, operator and how far back, a page at a
//! time in log order. Every signed-in operator may read it, viewers too.

use super::{page, see_other, session, AppState};
use crate::app::{App, Query};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use sluice_ops::audit::{AuditEntry, AuditQuery};
use sluice_ops::text::esc;

/// Entries the page shows at once.
pub const AUDIT_SHOWN: usize = 100;

/// How far back the page looks, as its form offers it.
const SPANS: [(&str, &str, Option<u64>); 4] = [
    ("hour", "the last hour", Some(3_600)),
    ("day", "the last day", Some(86_400)),
    ("week", "the last week", Some(7 * 86_400)),
    ("all", "everything this node keeps", None),
];

/// The page's query: its filters and where the page starts.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditView {
    /// Only this room (or pool).
    #[serde(default)]
    room: Option<String>,
    /// Only this operator.
    #[serde(default)]
    operator: Option<String>,
    /// `hour`, `day` (the default), `week` or `all`.
    #[serde(default)]
    since: Option<String>,
    /// The previous page's `next`.
    #[serde(default)]
    after: Option<String>,
}

fn rows(entries: &[AuditEntry]) -> String {
    entries
        .iter()
        .map(|e| {
            let outcome = if e.outcome == "ok" {
                "<span class=\"badge green\">ok</span>".to_string()
            } else {
                format!("<span class=\"badge red\">{}</span>", esc(&e.outcome))
            };
            format!(
                "<tr><td><time datetime=\"{t}\">{t}</time></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{outcome}</td></tr>",
                e.index,
                esc(&e.operator),
                esc(if e.room.is_empty() { "—" } else { &e.room }),
                esc(&e.command),
                esc(&e.detail),
                t = esc(&e.time),
            )
        })
        .collect()
}

fn filters(v: &AuditView, since: &str) -> String {
    let value = |o: &Option<String>| esc(o.as_deref().unwrap_or(""));
    let spans: String = SPANS
        .iter()
        .map(|(key, label, _)| {
            format!(
                "<option value=\"{key}\"{}>{label}</option>",
                if *key == since { " selected" } else { "" }
            )
        })
        .collect();
    format!(
        "<form method=\"get\" action=\"/admin/audit\" class=\"card\">\
<div class=\"field\"><label for=\"au-room\">Room or pool</label><input id=\"au-room\" name=\"room\" value=\"{}\" maxlength=\"64\"></div>\
<div class=\"field\"><label for=\"au-op\">Operator</label><input id=\"au-op\" name=\"operator\" value=\"{}\" maxlength=\"64\"></div>\
<div class=\"field\"><label for=\"au-since\">Since</label><select id=\"au-since\" name=\"since\">{spans}</select></div>\
<button>Show</button></form>",
        value(&v.room),
        value(&v.operator),
    )
}

/// `GET /admin/audit`.
pub async fn audit_page(
    axum::extract::State(app): AppState,
    Query(v): Query<AuditView>,
    headers: HeaderMap,
) -> Response {
    let Some(s) = session(&app, &headers) else {
        return see_other("/admin");
    };
    let since = v.since.as_deref().unwrap_or("day");
    let body = match SPANS.iter().find(|(key, _, _)| *key == since) {
        Some((_, label, secs)) => listing(&app, &v, since, label, *secs).await,
        None => "<p class=\"err\" role=\"alert\">Since: choose one of the form's spans.</p>".into(),
    };
    let mut r = page(
        "Audit log",
        &format!(
            "{}<p><a href=\"/admin\">← All rooms</a></p><h1>Audit log</h1>\
<p>Every change an operator made, accepted or refused, by name (<code>admin</code>: the break-glass token), in log order.</p>{}{body}",
            super::who(&s),
            filters(&v, since)
        ),
    )
    .into_response();
    r.headers_mut().insert(
        axum::http::header::CACHE_CONTROL,
        axum::http::HeaderValue::from_static("no-store"),
    );
    r
}

/// The table of one page, with the link to the next.
async fn listing(app: &App, v: &AuditView, since: &str, label: &str, secs: Option<u64>) -> String {
    let nonempty = |o: &Option<String>| o.clone().filter(|s| !s.trim().is_empty());
    let q = AuditQuery {
        room: nonempty(&v.room),
        operator: nonempty(&v.operator),
        from: secs.map(|secs| {
            let ms = app.sluice.now_ms().saturating_sub(secs * 1000);
            ms.to_string()
        }),
        to: None,
        after: nonempty(&v.after),
        limit: Some(AUDIT_SHOWN),
    };
    let p = match sluice_ops::audit::list(&app.sluice, &q).await {
        Ok(p) => p,
        Err(e) => return format!("<p class=\"err\" role=\"alert\">{}</p>", esc(&e.message)),
    };
    let more = p.next.as_ref().map_or(String::new(), |next| {
        let mut params = vec![("since", since.to_string()), ("after", next.clone())];
        params.extend(q.room.clone().map(|r| ("room", r)));
        params.extend(q.operator.clone().map(|o| ("operator", o)));
        let query = serde_urlencoded::to_string(&params).unwrap_or_default();
        format!(
            "<p><a href=\"/admin/audit?{}\">Next page</a></p>",
            esc(&query)
        )
    });
    let partial = if p.complete_from > 1 {
        format!(
            "<p class=\"note\">This node's records begin at log index {} (it was given a snapshot, or keeps records for a limited time): ask another node for earlier ones.</p>",
            p.complete_from
        )
    } else {
        String::new()
    };
    if p.entries.is_empty() {
        return format!("{partial}<p>No operator commands in {label}.</p>{more}");
    }
    format!(
        "{partial}<div class=\"scroll\"><table id=\"audit\"><thead><tr><th>Time (UTC)</th><th>Log index</th><th>Operator</th><th>Room</th><th>Command</th><th>Detail</th><th>Outcome</th></tr></thead><tbody>{}</tbody></table></div>{more}",
        rows(&p.entries)
    )
}
