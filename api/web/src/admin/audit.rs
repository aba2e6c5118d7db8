//! The "Audit log" page: who did what to which room, when, and with what outcome, from this
//! node's ledger ([`sluice_ops::audit`]), filtered by room, operator and how far back, a page at a
//! time in log order. Every signed-in operator may read it, viewers too.

use super::{render, see_other, session, AppState};
use crate::app::{App, Query};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use sluice_ops::audit::{AuditEntry, AuditQuery};

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

/// The audit page (`templates/admin/audit.html`).
#[derive(askama::Template)]
#[template(path = "admin/audit.html")]
struct AuditPage<'a> {
    title: &'static str,
    who: &'a super::Session,
    room: &'a str,
    operator: &'a str,
    since: &'a str,
    spans: &'static [(&'static str, &'static str, Option<u64>)],
    listing: Listing,
}

/// What the page lists under its filters.
enum Listing {
    /// `since` is none of the form's spans.
    BadSpan,
    /// The log could not be read.
    Failed(String),
    /// One page of entries.
    Page {
        /// Where this node's records begin, when not at the log's start.
        complete_from: Option<u64>,
        /// How far back, in words.
        label: &'static str,
        entries: Vec<AuditEntry>,
        /// The next page's query.
        next: Option<String>,
    },
}

/// `GET /admin/audit`.
#[utoipa::path(get, path = "/admin/audit", tag = "dashboard", operation_id = "dashboard_audit_page", responses((status = 200, description = "HTML: the operator audit log (needs the session cookie)", content_type = "text/html")))]
pub async fn audit_page(
    axum::extract::State(app): AppState,
    Query(v): Query<AuditView>,
    headers: HeaderMap,
) -> Response {
    let Some(s) = session(&app, &headers) else {
        return see_other("/admin");
    };
    let since = v.since.as_deref().unwrap_or("day");
    let listing = match SPANS.iter().find(|(key, _, _)| *key == since) {
        Some((_, label, secs)) => listing(&app, &v, since, label, *secs).await,
        None => Listing::BadSpan,
    };
    let mut r = render(&AuditPage {
        title: "Audit log",
        who: &s,
        room: v.room.as_deref().unwrap_or(""),
        operator: v.operator.as_deref().unwrap_or(""),
        since,
        spans: &SPANS,
        listing,
    })
    .into_response();
    r.headers_mut().insert(
        axum::http::header::CACHE_CONTROL,
        axum::http::HeaderValue::from_static("no-store"),
    );
    r
}

/// One page of entries, with the query of the next.
async fn listing(
    app: &App,
    v: &AuditView,
    since: &str,
    label: &'static str,
    secs: Option<u64>,
) -> Listing {
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
        Err(e) => return Listing::Failed(e.message),
    };
    let next = p.next.as_ref().map(|next| {
        let mut params = vec![("since", since.to_string()), ("after", next.clone())];
        params.extend(q.room.clone().map(|r| ("room", r)));
        params.extend(q.operator.clone().map(|o| ("operator", o)));
        serde_urlencoded::to_string(&params).unwrap_or_default()
    });
    Listing::Page {
        complete_from: Some(p.complete_from).filter(|&from| from > 1),
        label,
        entries: p.entries,
        next,
    }
}
