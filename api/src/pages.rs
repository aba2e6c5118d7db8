//! HTML pages: the landing page, the waiting page and the operator dashboard's entry.
//! Everything is served by Sluice itself: no external assets.

use crate::core::TicketSource;
use crate::http::App;
use crate::model::VisitorReply;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

/// Escapes text for HTML element content and attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Only same-site absolute paths are followed after admission (no open redirects).
pub fn safe_next(next: Option<&str>) -> String {
    match next {
        Some(n)
            if n.starts_with('/')
                && !n.starts_with("//")
                && !n.contains('\\')
                && n.len() <= 2048
                && !n.chars().any(char::is_control) =>
        {
            n.to_string()
        }
        _ => "/".to_string(),
    }
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;max-width:40rem;margin:2rem auto;padding:0 1rem;line-height:1.5;color:#1a1a1a;background:#fff}\
h1{font-size:1.6rem}.big{font-size:2.4rem;font-weight:700}a{color:#0b57d0}code{background:#f2f2f2;padding:0 .2rem}";

fn page(title: &str, head_extra: &str, body: &str) -> String {
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
<title>{}</title><style>{STYLE}</style>{head_extra}</head><body><main>{body}</main></body></html>",
        esc(title)
    )
}

/// The landing page of a node.
pub fn landing(demo_room: Option<&str>) -> String {
    let demo = match demo_room {
        Some(r) => format!(
            "<p>Try the demo room: open <a href=\"/wait/{r}\">/wait/{r}</a> in a few browser tabs. It admits two visitors at a time; the others wait in line and move up as sessions end.</p>",
            r = esc(r)
        ),
        None => String::new(),
    };
    page(
        "Sluice",
        "",
        &format!(
            "<h1>Sluice</h1><p>A self-hosted virtual waiting room and admission coordinator.</p>{demo}\
<ul><li><a href=\"/admin\">Operator dashboard</a></li><li><a href=\"/openapi.json\">API document (OpenAPI)</a></li>\
<li><a href=\"/.well-known/jwks.json\">Admission token keys (JWKS)</a></li><li><a href=\"/readyz\">Readiness</a></li></ul>"
        ),
    )
}

/// The operator dashboard's entry page.
pub fn admin() -> String {
    page(
        "Sluice operator dashboard",
        "",
        "<h1>Operator dashboard</h1><p>Use the operator API with your bearer token, or <code>sluice ctl</code>.</p>",
    )
}

fn wait_html(r: &VisitorReply, next: &str) -> String {
    let room = esc(&r.room);
    let position = r.position.map_or("—".to_string(), |p| p.to_string());
    let eta = r.eta_secs.map_or("unknown".to_string(), |s| {
        if s < 60 {
            format!("{s} s")
        } else {
            format!("{} min", s.div_ceil(60))
        }
    });
    let script = format!(
        "<script>(function(){{var room={room_js},next={next_js};\
function show(s){{if(s.state==='admitted'){{fetch('/v1/rooms/'+room+'/join',{{method:'POST',credentials:'same-origin'}}).then(function(){{location.replace(next)}});return}}\
if(s.state!=='waiting'){{location.reload();return}}\
document.getElementById('pos').textContent=s.position==null?'—':s.position;\
document.getElementById('eta').textContent=s.eta_secs==null?'unknown':(s.eta_secs<60?s.eta_secs+' s':Math.ceil(s.eta_secs/60)+' min')}}\
function poll(){{fetch('/v1/rooms/'+room+'/status',{{credentials:'same-origin'}}).then(function(r){{return r.json()}}).then(show).catch(function(){{}});setTimeout(poll,5000)}}\
if(window.EventSource){{var es=new EventSource('/v1/rooms/'+room+'/events');es.addEventListener('status',function(e){{show(JSON.parse(e.data))}});es.onerror=function(){{es.close();setTimeout(poll,1000)}}}}else{{poll()}}\
}})();</script>",
        room_js = serde_json::to_string(&r.room).unwrap_or_default(),
        next_js = serde_json::to_string(next).unwrap_or_default(),
    );
    page(
        &format!("Waiting room — {}", r.room),
        "<noscript><meta http-equiv=\"refresh\" content=\"10\"></noscript>",
        &format!(
            "<h1>You are in line</h1><p>Room <strong>{room}</strong>. Keep this page open; it moves you on when it is your turn.</p>\
<p>Your place: <span class=\"big\" id=\"pos\" aria-live=\"polite\">{position}</span></p><p>Estimated wait: <span id=\"eta\" aria-live=\"polite\">{eta}</span></p>{script}"
        ),
    )
}

fn closed_html(r: &VisitorReply) -> String {
    let why = match r.reason.as_deref() {
        Some("room_closed") => "This room is closed.",
        Some("room_rejecting") => "This room is not taking new visitors right now.",
        _ => "Your place in line has ended.",
    };
    page("Waiting room", "", &format!("<h1>Sorry</h1><p>{why}</p>"))
}

/// `GET /wait/{room}`: joins or resumes, then shows the line, or moves an admitted visitor on.
pub async fn wait(app: &App, room: &str, next: Option<&str>, headers: &HeaderMap) -> Response {
    let next = safe_next(next);
    let wants_json = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("application/json") && !v.contains("text/html"));
    let src = match crate::http::cookie_ticket_of(headers) {
        Some(t) => TicketSource::Cookie(t),
        None => TicketSource::None,
    };
    // A visitor who already holds a place is only checked in (batched), not written per view.
    let resumed = match &src {
        TicketSource::Cookie(_) => match app.sluice.heartbeat(room, &src).await {
            Ok(r) if r.state != "rejected" => Some(r),
            _ => None,
        },
        _ => None,
    };
    let reply = match resumed {
        Some(r) => Ok(r),
        None => app.sluice.join(room, &src).await,
    };
    let reply = match reply {
        Ok(r) => r,
        Err(e) if wants_json => return e.into_response(),
        Err(e) => {
            let body = page(
                "Waiting room",
                "<meta http-equiv=\"refresh\" content=\"5\">",
                &format!("<h1>Please wait</h1><p>{}</p>", esc(&e.message)),
            );
            let mut resp = (e.status, axum::response::Html(body)).into_response();
            if let Some(s) = e.retry_after {
                resp.headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from(s));
            }
            return resp;
        }
    };
    let cookie = format!(
        "{}={}; Path=/; HttpOnly; SameSite=Lax; Max-Age=86400{}",
        crate::http::COOKIE,
        reply.ticket,
        if app.secure_cookies { "; Secure" } else { "" }
    );
    let mut resp = if wants_json {
        axum::Json(reply).into_response()
    } else if reply.state == "admitted" {
        let mut r = StatusCode::SEE_OTHER.into_response();
        if let Ok(v) = HeaderValue::from_str(&next) {
            r.headers_mut().insert(header::LOCATION, v);
        }
        r
    } else if reply.state == "waiting" {
        axum::response::Html(wait_html(&reply, &next)).into_response()
    } else {
        axum::response::Html(closed_html(&reply)).into_response()
    };
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        resp.headers_mut().insert(header::SET_COOKIE, v);
    }
    resp.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_is_never_an_open_redirect() {
        assert_eq!(safe_next(Some("/shop?x=1")), "/shop?x=1");
        for bad in [
            "//evil.example",
            "https://evil.example",
            "/\\evil",
            "javascript:alert(1)",
            "/a\nb",
        ] {
            assert_eq!(safe_next(Some(bad)), "/", "{bad}");
        }
        assert_eq!(safe_next(None), "/");
    }

    #[test]
    fn escaping() {
        assert_eq!(
            esc("<a href=\"x\">'&'</a>"),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
    }
}
