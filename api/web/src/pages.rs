//! HTML pages: the landing page and the waiting page. Everything is served by Sluice itself: no
//! external assets, a few kilobytes per page. The operator dashboard is in [`crate::admin`].

use crate::app::App;
use crate::i18n::{texts, Lang, Texts};
pub use crate::views::Next;
use crate::views::{join_html, message_html, wait_html, JoinForm, Message, RoomPage, Then};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use sluice_ops::core::TicketSource;
use sluice_ops::model::{ReplyState, VisitorReply};
use sluice_statemachine::{Mode, RoomView};

pub use crate::views::{demo_shop, landing, staff_form, PageLang, STYLE};
pub use sluice_ops::text::esc;

/// Only same-site absolute paths are followed after admission (no open redirects), written as
/// a URL writes them: no spaces, quotes or angle brackets (those come percent-encoded).
pub fn safe_next(next: Option<&str>) -> String {
    match next {
        Some(n) if n.starts_with('/') && !n.starts_with("//") && written_as_url(n) => n.to_string(),
        _ => "/".to_string(),
    }
}

/// At most 2 KiB, without spaces, controls, quotes, angle brackets or backslashes.
fn written_as_url(n: &str) -> bool {
    n.len() <= 2048
        && !n
            .chars()
            .any(|c| c.is_control() || c.is_whitespace() || "<>\"'`\\".contains(c))
}

/// Where a visitor goes once admitted: a same-site path ([`safe_next`]), or a page of another
/// site whose exact origin the room lists in `origins` (an `http(s)` URL without user name or
/// password, carrying no `sluice_token` of its own). Anything else: this site's front page.
pub fn next_of(next: Option<&str>, origins: &[String]) -> Next {
    match next {
        Some(n) if !n.starts_with('/') && !origins.is_empty() && written_as_url(n) => {
            away(n, origins).unwrap_or_else(Next::home)
        }
        n => Next::Here(safe_next(n)),
    }
}

fn away(n: &str, origins: &[String]) -> Option<Next> {
    let u = url::Url::parse(n).ok()?;
    let plain = matches!(u.scheme(), "https" | "http")
        && u.username().is_empty()
        && u.password().is_none()
        && !u.query_pairs().any(|(k, _)| k == HANDOFF_PARAM);
    let origin = u.origin().ascii_serialization();
    (plain && origins.contains(&origin)).then(|| Next::Away {
        url: u.to_string(),
        origin,
    })
}

/// The query parameter that carries a handed-off visitor's admission token.
pub const HANDOFF_PARAM: &str = "sluice_token";

/// The pages' scripts, served from the binary at `/assets/…`: pages carry no inline script,
/// so that their Content-Security-Policy can forbid inline scripts altogether.
pub const ASSETS: &[(&str, &str)] = &[
    ("wait.js", include_str!("../assets/wait.js")),
    ("admin.js", include_str!("../assets/admin.js")),
    ("pow.js", include_str!("../assets/pow.js")),
    ("admin.css", include_str!("../assets/admin.css")),
    (
        "uplot.js",
        include_str!("../assets/vendor/uplot/uPlot.iife.min.js"),
    ),
    (
        "uplot.css",
        include_str!("../assets/vendor/uplot/uPlot.min.css"),
    ),
];

/// The `Content-Type` of an asset, by its name's ending.
pub fn asset_type(name: &str) -> &'static str {
    if name.ends_with(".css") {
        "text/css; charset=utf-8"
    } else {
        "text/javascript; charset=utf-8"
    }
}

/// The policy of every page and script (other answers carry a stricter one, see `edge.rs`):
/// scripts only from this origin's files, no frames, no plugins, forms and connections to this
/// origin only. (Styles may be inline: the pages and
/// their room's colours set them.)
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
style-src 'self' 'unsafe-inline'; img-src 'self' https: data:; connect-src 'self'; \
form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

/// The waiting page as a visitor at `reply` would see it in `room`, made by `template` if one
/// is given (the dashboard's preview of a room's branding before it is saved). Its script is
/// left out: a preview moves nowhere.
pub fn preview_html(
    lang: Lang,
    reply: &VisitorReply,
    room: &RoomView,
    now_secs: u64,
    template: Option<&str>,
) -> String {
    let own = RoomPage {
        template,
        next_phase: None,
    };
    let pl = PageLang {
        lang,
        picked: false,
    };
    wait_html(
        pl,
        reply,
        Some(room),
        None,
        &Next::home(),
        now_secs,
        false,
        own,
    )
}

/// What a visitor's browser asks of the waiting page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WaitRequest {
    /// `GET` (or `HEAD`): show where the visitor stands; never takes a place, nor a code's
    /// use. With the shop's identity assertion and an invitation's access code, which the
    /// page's forms carry on.
    Look {
        /// The shop's identity assertion.
        identity: Option<String>,
        /// An access code from an invitation link.
        code: Option<String>,
        /// Sent here right after a join (`joined=1`): without a cookie now, the browser keeps
        /// none, and joining again would only take another place.
        just_joined: bool,
    },
    /// `POST`: join (or resume the place the cookie holds, or redeem a code for it), for a
    /// client at this address, with what the form carried.
    Join {
        /// The client's address.
        client: std::net::IpAddr,
        /// A solved proof-of-work.
        altcha: Option<String>,
        /// The shop's identity assertion.
        identity: Option<String>,
        /// An external challenge provider's token.
        external: Option<String>,
        /// An access code.
        code: Option<String>,
    },
}

/// `GET /wait/{room}` shows the line to a visitor who holds a place (checking it in), moves an
/// admitted one on, and asks anyone else to join; `POST /wait/{room}` joins (or resumes), then
/// redirects to the `GET` (so that reloading the page does not post again). `Accept:
/// application/json` gets the visitor's JSON status instead.
pub async fn wait(
    app: &App,
    room: &str,
    next: Option<&str>,
    pl: PageLang,
    headers: &HeaderMap,
    request: WaitRequest,
) -> Response {
    let wants_json = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("application/json") && !v.contains("text/html"));
    let src = match crate::app::cookie_ticket(headers, room) {
        Some(tk) => TicketSource::Cookie(tk),
        None => TicketSource::None,
    };
    let redeeming = matches!(&request, WaitRequest::Join { code: Some(_), .. });
    let (resumed, away) = resume(app, room, &src, redeeming).await;
    let page = WaitPage::new(app, room, next, pl);
    let joining = matches!(request, WaitRequest::Join { .. });
    let code_given = match &request {
        WaitRequest::Look { code, .. } | WaitRequest::Join { code, .. } => code.clone(),
    };
    let reply = match (resumed, &request) {
        (Some(r), _) => Ok(r),
        (None, WaitRequest::Join { client, .. }) => {
            let proof = request.join_proof().expect("a join");
            app.sluice.join(room, &src, Some(*client), &proof).await
        }
        (None, WaitRequest::Look { .. }) if wants_json => {
            Err(crate::error::ApiError::missing_ticket())
        }
        (
            None,
            WaitRequest::Look {
                identity,
                code,
                just_joined,
            },
        ) => {
            let form = JoinForm {
                pow: false,
                identity: identity.as_deref().unwrap_or_default(),
                code: code.as_deref().unwrap_or_default(),
                invite_only: page.invite_only,
                away,
                cookies_lost: *just_joined && matches!(src, TicketSource::None),
                kept_cookie: matches!(src, TicketSource::Cookie(_)),
            };
            return page.look(form);
        }
    };
    let (mut resp, ticket) = match reply {
        Ok(reply) if wants_json => {
            let ticket = reply.ticket.clone();
            (axum::Json(reply).into_response(), ticket)
        }
        Ok(reply) => {
            let ticket = reply.ticket.clone();
            (page.answer(&reply, &src, joining), ticket)
        }
        Err(e) if wants_json => return crate::app::error_with_cookie(app, room, e),
        Err(e) => return page.refused(e, code_given.as_deref()),
    };
    crate::app::set_ticket_cookie(app, &mut resp, room, &ticket);
    crate::app::retire_legacy_cookie(app, &mut resp, room, headers);
    no_store(&mut resp);
    resp
}

impl WaitRequest {
    /// What a `POST`'s form carried for the join (`None` for a `GET`).
    fn join_proof(&self) -> Option<sluice_ops::visitors::JoinProof<'_>> {
        let WaitRequest::Join {
            altcha,
            identity,
            external,
            code,
            ..
        } = self
        else {
            return None;
        };
        let proof = sluice_ops::visitors::JoinProof::new(altcha.as_deref(), identity.as_deref());
        Some(
            proof
                .with_external(external.as_deref())
                .with_code(code.as_deref()),
        )
    }
}

/// The place a visitor's cookie holds, checked in (batched, not written per view); none for a
/// visitor who brings a code (who joins with it, which redeems it for the place held). Also
/// whether the place was lost by not checking in: the page says so, rather than quietly take
/// a new one. (An admitted visitor is sent on through the gate, which counts its network.)
async fn resume(
    app: &App,
    room: &str,
    src: &TicketSource,
    redeeming: bool,
) -> (Option<VisitorReply>, bool) {
    if !matches!(src, TicketSource::Cookie(_)) || redeeming {
        return (None, false);
    }
    match app.sluice.heartbeat(room, src, None).await {
        Ok(r) if r.state != ReplyState::Rejected => (Some(r), false),
        Ok(r) => (None, r.reason.as_deref() == Some("abandoned")),
        _ => (None, false),
    }
}

/// What one waiting page is about: the room (as this node's applied state has it), where the
/// visitor goes once admitted, the language.
struct WaitPage<'a> {
    app: &'a App,
    room: &'a str,
    view: Option<RoomView>,
    /// Where an admitted visitor goes (checked: a path on this site, or a page of a site the
    /// room hands visitors to).
    next: Next,
    pl: PageLang,
    t: &'static Texts,
    /// The room gives places only to code holders.
    invite_only: bool,
    /// Where a closed room sends its visitors.
    after_url: Option<String>,
    /// The room's own page template (`branding.template`, or the phase in effect's).
    template: Option<String>,
    /// The next phase of the room's sale it announces: its name and start.
    next_phase: Option<(String, u64)>,
}

impl<'a> WaitPage<'a> {
    fn new(app: &'a App, room: &'a str, next: Option<&str>, pl: PageLang) -> Self {
        let view = app.sluice.room_view(room);
        // A page is never rendered from another room's state than the one asked for.
        assert!(
            view.as_ref().is_none_or(|v| v.name == room),
            "the waiting page of {room} read another room"
        );
        let now_ms = app.sluice.now_ms();
        let (invite_only, after_url, origins, template, next_phase) = app
            .sluice
            .entry_policy_here(room, |p| {
                let phase = sluice_statemachine::phases::current(&p.phases, now_ms);
                let next = sluice_statemachine::phases::next_announced(&p.phases, now_ms);
                (
                    p.invite_only,
                    p.after_url.clone(),
                    p.handoff_origins.clone(),
                    phase
                        .and_then(|ph| ph.page_template.clone())
                        .or_else(|| p.page_template.clone()),
                    next.map(|ph| (ph.name.clone(), ph.starts_at_ms)),
                )
            })
            .unwrap_or_default();
        WaitPage {
            app,
            room,
            view,
            next: next_of(next, &origins),
            pl,
            t: texts(pl.lang),
            invite_only,
            after_url,
            template,
            next_phase,
        }
    }

    /// What the room shows of its own on its pages.
    fn own(&self) -> RoomPage<'_> {
        RoomPage {
            template: self.template.as_deref(),
            next_phase: self.next_phase.as_ref().map(|(n, at)| (n.as_str(), *at)),
        }
    }

    /// A visitor without a place: the join page, or why the room takes nobody.
    fn look(&self, form: JoinForm<'_>) -> Response {
        let (app, room, t, pl, next) = (self.app, self.room, self.t, self.pl, &self.next);
        if self.view.is_none() || sluice_ops::core::Sluice::check_room(room).is_err() {
            let not_found = Message::text(t.not_found);
            return message_page(pl, None, room, next, not_found, StatusCode::NOT_FOUND);
        }
        // A room that takes nobody new says so at once, rather than offer a join.
        if let Some(v) = self
            .view
            .as_ref()
            .filter(|v| v.closed || v.config.mode == Mode::Reject)
        {
            let (text, after) = if v.closed {
                (t.closed, self.after_url.as_deref())
            } else {
                (t.not_taking, None)
            };
            let message = Message {
                after_url: after,
                ..Message::text(text)
            };
            let html = message_html(pl, Some(v), room, next, message);
            let mut r = (StatusCode::FORBIDDEN, Html(html)).into_response();
            no_store(&mut r);
            return r;
        }
        let pow = app
            .sluice
            .entry_policy_here(room, |p| p.proof_of_work.is_some())
            .unwrap_or(false);
        let mut r = Html(join_html(
            pl,
            self.view.as_ref(),
            room,
            next,
            JoinForm { pow, ..form },
            self.own(),
        ))
        .into_response();
        no_store(&mut r);
        r
    }

    /// A join or check-in refused: the page that says why (and how to try again).
    fn refused(&self, e: crate::error::ApiError, code_given: Option<&str>) -> Response {
        let (app, room, t, pl, next) = (self.app, self.room, self.t, self.pl, &self.next);
        let text = match e.code {
            "queue_full" => t.full,
            "room_not_found" | "invalid_field" => t.not_found,
            "banned" => t.ended,
            "place_limit" => t.place_limit,
            "challenge_required" => t.challenge_needs_script,
            "challenge_invalid" => t.challenge_invalid,
            "identity_required" | "identity_invalid" => t.identity_required,
            "invite_only" => t.invite_only,
            "code_invalid" => t.code_invalid,
            "code_used_up" => t.code_used_up,
            "code_expired" => t.code_expired,
            _ => t.busy,
        };
        let retry = crate::error::http_status(e.kind).is_server_error();
        // After a failed check, a way back to the join page (which solves a new challenge,
        // or takes the shop's link again).
        let then = if e.code == "invite_only" || e.code.starts_with("code_") {
            Then::Code(code_given.unwrap_or(""))
        } else if e.code.starts_with("challenge_") || e.code.starts_with("identity_") {
            Then::Rejoin
        } else {
            Then::Nothing
        };
        let message = Message {
            retry,
            then,
            ..Message::text(text)
        };
        let html = message_html(pl, self.view.as_ref(), room, next, message);
        let mut resp = (crate::error::http_status(e.kind), Html(html)).into_response();
        if let Some(s) = e.retry_after {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(s));
        }
        if let Some(t) = &e.ticket {
            crate::app::set_ticket_cookie(app, &mut resp, room, t);
        }
        resp
    }

    /// The visitor's place: an admitted one is sent on, a new place is redirected to the page
    /// that shows it, a waiting one sees the line, an ended one why.
    fn answer(&self, reply: &VisitorReply, src: &TicketSource, joining: bool) -> Response {
        let (app, room, t, pl, next) = (self.app, self.room, self.t, self.pl, &self.next);
        if reply.state == ReplyState::Admitted {
            self.admitted(reply)
        } else if reply.state == ReplyState::Waiting && joining {
            // A code redeemed for the place held, or a join: the line, with a GET.
            // Post, then redirect, then get: a reload shows the line and posts nothing again.
            // A new visitor's browser is sent back marked, so that one that kept no cookie is
            // told so rather than asked to join again.
            let marker = if matches!(src, TicketSource::None) {
                "joined=1&"
            } else {
                ""
            };
            see_other(&format!(
                "/wait/{room}?{}{marker}next={}",
                pl.query(),
                next.query()
            ))
        } else if reply.state == ReplyState::Waiting {
            let now_secs = app.sluice.now_ms() / 1000;
            // A room that draws shows what its draws are bound to.
            let lottery_lanes = app
                .sluice
                .entry_policy_here(room, |p| p.lanes.iter().any(|l| l.lottery))
                .unwrap_or(false);
            let draw = self
                .view
                .as_ref()
                .and_then(|v| sluice_ops::ledger::DrawBody::of(v, lottery_lanes));
            Html(wait_html(
                pl,
                reply,
                self.view.as_ref(),
                draw.as_ref(),
                next,
                now_secs,
                true,
                self.own(),
            ))
            .into_response()
        } else {
            let (text, after) = match reply.reason.as_deref() {
                Some("room_closed") => (t.closed, self.after_url.as_deref()),
                Some("room_rejecting") => (t.not_taking, None),
                _ => (t.ended, None),
            };
            let message = Message {
                after_url: after,
                ..Message::text(text)
            };
            let html = message_html(pl, self.view.as_ref(), room, next, message);
            (StatusCode::FORBIDDEN, Html(html)).into_response()
        }
    }

    /// An admitted visitor, sent on: to a path of this site (whose gate checks the cookie), or
    /// to another site with a single-use token in the URL (to this site's front page should
    /// the room no longer list that site).
    fn admitted(&self, reply: &VisitorReply) -> Response {
        match &self.next {
            Next::Here(path) => see_other(path),
            Next::Away { url, origin } => {
                let Some(token) = self.app.sluice.handoff_token(reply, origin) else {
                    return see_other("/");
                };
                let Ok(mut to) = url::Url::parse(url) else {
                    return see_other("/");
                };
                to.query_pairs_mut().append_pair(HANDOFF_PARAM, &token);
                let mut r = see_other(to.as_str());
                // The token is for the other site alone: not for this page's own referrer.
                r.headers_mut().insert(
                    header::REFERRER_POLICY,
                    HeaderValue::from_static("no-referrer"),
                );
                r
            }
        }
    }
}

/// An answer for one visitor only, never cached, varying with what decides it.
fn no_store(resp: &mut Response) {
    resp.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp.headers_mut().insert(
        header::VARY,
        HeaderValue::from_static("Accept, Accept-Language, Cookie"),
    );
}

/// A 303 to `to` (checked before).
fn see_other(to: &str) -> Response {
    let mut r = StatusCode::SEE_OTHER.into_response();
    if let Ok(v) = HeaderValue::from_str(to) {
        r.headers_mut().insert(header::LOCATION, v);
    }
    r
}

/// The page for a browser whose network sent too many requests: says so, and reloads itself
/// once `retry_secs` have passed (no state is read: it must stay cheap).
pub fn too_many(pl: PageLang, retry_secs: u64) -> Response {
    let html = crate::views::too_many_html(pl.lang, retry_secs);
    let mut r = (StatusCode::TOO_MANY_REQUESTS, Html(html)).into_response();
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(retry_secs));
    no_store(&mut r);
    r
}

/// A message page with `status`.
fn message_page(
    pl: PageLang,
    room: Option<&RoomView>,
    room_name: &str,
    next: &Next,
    message: Message<'_>,
    status: StatusCode,
) -> Response {
    let html = message_html(pl, room, room_name, next, message);
    let mut r = (status, Html(html)).into_response();
    no_store(&mut r);
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The vendored charting library is served exactly as its release (`SHA256SUMS` beside it).
    #[test]
    fn vendored_assets_are_the_released_files() {
        use sha2::{Digest, Sha256};
        let sums = include_str!("../assets/vendor/uplot/SHA256SUMS");
        for (served, file) in [
            ("uplot.js", "uPlot.iife.min.js"),
            ("uplot.css", "uPlot.min.css"),
        ] {
            let body = ASSETS.iter().find(|(n, _)| *n == served).unwrap().1;
            let hex: String = Sha256::digest(body.as_bytes())
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            assert!(
                sums.lines().any(|l| l == format!("{hex}  {file}")),
                "{served} is not {file} as released"
            );
        }
        assert_eq!(asset_type("uplot.css"), "text/css; charset=utf-8");
        assert_eq!(asset_type("admin.js"), "text/javascript; charset=utf-8");
    }

    #[test]
    fn next_is_never_an_open_redirect() {
        assert_eq!(safe_next(Some("/shop?x=1")), "/shop?x=1");
        for bad in [
            "//evil.example",
            "https://evil.example",
            "/\\evil",
            "javascript:alert(1)",
            "/a\nb",
            "/</script><script>alert(1)</script>",
            "/a b",
            "/\"onload=\"x",
        ] {
            assert_eq!(safe_next(Some(bad)), "/", "{bad}");
        }
        assert_eq!(safe_next(None), "/");
    }

    /// Another site is followed only at an origin the room lists exactly: a look-alike host,
    /// a user name in front of it, another scheme or port, or a token already in the link
    /// sends the visitor to this site's front page instead (and no token is minted for it).
    #[test]
    fn another_site_is_followed_only_at_a_listed_origin() {
        let listed = vec![
            "https://shop.example.com".to_string(),
            "http://localhost:8081".to_string(),
        ];
        let away = |n: &str| match next_of(Some(n), &listed) {
            Next::Away { url, origin } => Some((url, origin)),
            Next::Here(p) => {
                assert_eq!(p, "/", "{n}");
                None
            }
        };
        assert_eq!(
            away("https://shop.example.com/checkout?item=7&size=m#top"),
            Some((
                "https://shop.example.com/checkout?item=7&size=m#top".into(),
                "https://shop.example.com".into()
            ))
        );
        assert_eq!(
            away("https://SHOP.example.com:443/a").map(|a| a.1),
            Some("https://shop.example.com".into()),
            "written otherwise, the same origin"
        );
        assert!(away("http://localhost:8081/").is_some());
        for bad in [
            "https://shop.example.com.evil.example/",
            "https://evil.example/?https://shop.example.com",
            "https://shop.example.com@evil.example/",
            "https://user:pw@shop.example.com/",
            "http://shop.example.com/",
            "https://shop.example.com:8443/",
            "http://localhost:8082/",
            "https://shop.example.com/?sluice_token=forged",
            "javascript://shop.example.com/%0aalert(1)",
            "https://shop.example.com/a b",
            "https://shop.example.com/\"onload",
            "//shop.example.com/",
            "shop.example.com/",
        ] {
            assert_eq!(away(bad), None, "{bad}");
        }
        let long = format!("https://shop.example.com/{}", "a".repeat(2048));
        assert_eq!(away(&long), None, "longer than 2 KiB");
        // A room that lists nobody follows paths only.
        assert_eq!(
            next_of(Some("https://shop.example.com/"), &[]),
            Next::home()
        );
        assert_eq!(
            next_of(Some("/shop?x=1"), &listed),
            Next::Here("/shop?x=1".into())
        );
        // The page's own links carry it encoded; its script goes through this page again.
        let n = next_of(Some("https://shop.example.com/c?a=1&b=2"), &listed);
        assert_eq!(
            n.query(),
            "https%3A%2F%2Fshop.example.com%2Fc%3Fa%3D1%26b%3D2"
        );
        let pl = PageLang {
            lang: crate::i18n::Lang::En,
            picked: false,
        };
        assert_eq!(n.go(pl, "sale"), format!("/wait/sale?next={}", n.query()));
    }

    #[test]
    fn escaping() {
        assert_eq!(
            esc("<a href=\"x\">'&'</a>"),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
    }
}
