//! The pools page: every pool with its rooms' counts, a form that makes or changes one, and
//! deleting one (its name typed to confirm).

use super::{csrf, form_session, page, see_other, session, AdminForm, AppState};
use crate::app::App;
use crate::error::ApiError;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use sluice_ops::model::{PoolBody, PoolReply};
use sluice_ops::text::esc;

/// The pools' rows; with `hidden` (the form's CSRF field, for those who may act), a form that
/// deletes each.
fn pool_rows(pools: &[PoolReply], hidden: Option<&str>) -> String {
    pools
        .iter()
        .map(|p| {
            let n = esc(&p.name);
            let busiest = p.rooms.iter().map(|r| r.count).max().unwrap_or(0);
            let delete = hidden.map_or(String::new(), |hidden| format!("<td><form method=\"post\" action=\"/admin/pools\">{hidden}<input type=\"hidden\" name=\"action\" value=\"delete\"><input type=\"hidden\" name=\"name\" value=\"{n}\">\
<label for=\"del-{n}\" class=\"sr\">Type {n} to delete pool {n}</label><input id=\"del-{n}\" name=\"confirm_name\" placeholder=\"type {n}\" size=\"10\" required> \
<button class=\"danger\">Delete</button></form></td>"));
            format!(
                "<tr><td>{n}</td><td>{}</td><td>{}</td><td>{} / {}</td><td>{} (busiest {busiest} of {})</td>{delete}</tr>",
                p.room_capacity,
                p.rooms_max,
                p.rooms.len(),
                p.rooms_max,
                p.total,
                p.room_capacity,
            )
        })
        .collect()
}

fn pools_html(app: &App, s: &super::Session, flash: Option<&str>, error: Option<&str>) -> String {
    let token = csrf(app, s);
    let hidden = format!("<input type=\"hidden\" name=\"csrf\" value=\"{token}\">");
    let can_act = s.may_act();
    let note = flash
        .map(|n| format!("<p class=\"ok\" role=\"status\">{}</p>", esc(n)))
        .unwrap_or_default();
    let err = error
        .map(|e| format!("<p class=\"err\" role=\"alert\">{}</p>", esc(e)))
        .unwrap_or_default();
    let pools = app.sluice.list_pools().unwrap_or_default();
    let table = if pools.is_empty() {
        "<p>No pools. A pool hands out places in a set of rooms of equal capacity (<code>POST /v1/pools/{pool}/assign</code>), for sharding a very large event.</p>".to_string()
    } else {
        format!(
            "<div class=\"scroll\"><table><thead><tr><th>Pool</th><th>Capacity of each room</th><th>Most rooms</th><th>Rooms in use</th><th>Places taken</th>{}</tr></thead><tbody>{}</tbody></table></div>",
            if can_act { "<th>Delete</th>" } else { "" },
            pool_rows(&pools, can_act.then_some(hidden.as_str()))
        )
    };
    let top = format!(
        "{}<p><a href=\"/admin\">← All rooms</a></p><h1>Pools</h1>{note}{err}{table}",
        super::who(s)
    );
    if !can_act {
        return format!("{top}{}", super::viewer_note());
    }
    format!(
        "{top}\
<h2>Make or change a pool</h2><form method=\"post\" action=\"/admin/pools\" class=\"card\">{hidden}<input type=\"hidden\" name=\"action\" value=\"put\">\
<div class=\"field\"><label for=\"p-name\">Name</label><input id=\"p-name\" name=\"name\" pattern=\"[a-z0-9][a-z0-9\\-]{{0,63}}\" required></div>\
<div class=\"field\"><label for=\"p-cap\">Capacity of each room</label><input id=\"p-cap\" name=\"room_capacity\" type=\"number\" min=\"1\" required></div>\
<div class=\"field\"><label for=\"p-max\">Most rooms</label><input id=\"p-max\" name=\"rooms_max\" type=\"number\" min=\"1\" value=\"1000\" required></div>\
<button>Save pool</button></form>"
    )
}

/// `GET /admin/pools`.
pub async fn pools_page(axum::extract::State(app): AppState, headers: HeaderMap) -> Response {
    let Some(s) = session(&app, &headers) else {
        return see_other("/admin");
    };
    let flash = app.flash.take(&s.id).map(|n| n.text);
    page("Pools", &pools_html(&app, &s, flash.as_deref(), None)).into_response()
}

/// `POST /admin/pools`: make or change a pool (`put`), or delete one (`delete`, its name typed
/// again in `confirm_name`).
pub async fn pool_action(
    axum::extract::State(app): AppState,
    headers: HeaderMap,
    AdminForm(f): AdminForm,
) -> Response {
    let s = match form_session(&app, &headers, &f) {
        Ok(s) => s,
        Err(answer) => return *answer,
    };
    let get = |k: &str| f.get(k).map(|v| v.trim().to_string()).unwrap_or_default();
    let name = get("name");
    let num = |k: &str| {
        get(k)
            .parse::<u64>()
            .map_err(|_| ApiError::invalid(k, "must be a whole number"))
    };
    let done: Result<String, ApiError> = async {
        match get("action").as_str() {
            "put" => {
                let body = PoolBody {
                    room_capacity: num("room_capacity")?,
                    rooms_max: num("rooms_max")?,
                };
                let p = app.sluice.put_pool(&name, &body).await?;
                Ok(format!(
                    "Pool {} saved: rooms of {}, at most {}.",
                    p.name, p.room_capacity, p.rooms_max
                ))
            }
            "delete" if get("confirm_name") != name => Err(ApiError::invalid(
                "confirm_name",
                format!("type the pool's name, {name}, to delete it"),
            )),
            "delete" => {
                app.sluice.delete_pool(&name).await?;
                Ok(format!("Pool {name} deleted."))
            }
            other => Err(ApiError::invalid(
                "action",
                format!("unknown action {other:?}"),
            )),
        }
    }
    .await;
    match done {
        Ok(msg) => {
            app.flash.put(&s.id, msg);
            see_other("/admin/pools")
        }
        Err(e) => (
            crate::error::http_status(e.kind),
            page("Pools", &pools_html(&app, &s, None, Some(&e.message))),
        )
            .into_response(),
    }
}
