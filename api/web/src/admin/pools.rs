//! The pools page: every pool with its rooms' counts, a form that makes or changes one, and
//! deleting one (its name typed to confirm).

use super::{csrf, form_session, render, see_other, session, AdminForm, AppState};
use crate::app::App;
use crate::error::ApiError;
use axum::http::HeaderMap;
use axum::response::{Html, IntoResponse, Response};
use sluice_ops::model::{PoolBody, PoolReply};

/// The pools page (`templates/admin/pools.html`).
#[derive(askama::Template)]
#[template(path = "admin/pools.html")]
struct PoolsPage<'a> {
    title: &'static str,
    who: &'a super::Session,
    token: &'a str,
    can_act: bool,
    flash: Option<&'a str>,
    error: Option<&'a str>,
    pools: Vec<PoolRow<'a>>,
}

/// A pool as its row shows it.
struct PoolRow<'a> {
    pool: &'a PoolReply,
    /// The most places taken in one of its rooms.
    busiest: u64,
}

fn pools_html(
    app: &App,
    s: &super::Session,
    flash: Option<&str>,
    error: Option<&str>,
) -> Html<String> {
    let pools = app.sluice.list_pools().unwrap_or_default();
    render(&PoolsPage {
        title: "Pools",
        who: s,
        token: &csrf(app, s),
        can_act: s.may_act(),
        flash,
        error,
        pools: pools
            .iter()
            .map(|p| PoolRow {
                pool: p,
                busiest: p.rooms.iter().map(|r| r.count).max().unwrap_or(0),
            })
            .collect(),
    })
}

/// `GET /admin/pools`.
#[utoipa::path(get, path = "/admin/pools", tag = "dashboard", operation_id = "dashboard_pools_page", responses((status = 200, description = "HTML: the pools (needs the session cookie)", content_type = "text/html")))]
pub async fn pools_page(axum::extract::State(app): AppState, headers: HeaderMap) -> Response {
    let Some(s) = session(&app, &headers) else {
        return see_other("/admin");
    };
    let flash = app.flash.take(&s.id).map(|n| n.text);
    pools_html(&app, &s, flash.as_deref(), None).into_response()
}

/// `POST /admin/pools`: make or change a pool (`put`), or delete one (`delete`, its name typed
/// again in `confirm_name`).
#[utoipa::path(post, path = "/admin/pools", tag = "dashboard", operation_id = "dashboard_pool_action", request_body(content_type = "application/x-www-form-urlencoded"), responses((status = 303, description = "done: back to the pools (needs the session cookie and CSRF token)")))]
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
            pools_html(&app, &s, None, Some(&e.message)),
        )
            .into_response(),
    }
}
