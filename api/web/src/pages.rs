//! HTML pages: the landing page and the waiting page. Everything is served by Sluice itself: no
//! external assets, a few kilobytes per page. The operator dashboard is in [`crate::admin`].

use crate::app::App;
use crate::i18n::{texts, Lang, Texts, Units};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use sluice_ops::core::TicketSource;
use sluice_ops::model::{ReplyState, VisitorReply};
use sluice_statemachine::{Mode, RoomView};

pub use sluice_ops::text::esc;

/// Only same-site absolute paths are followed after admission (no open redirects), written as
/// a URL writes them: no spaces, quotes or angle brackets (those come percent-encoded).
pub fn safe_next(next: Option<&str>) -> String {
    match next {
        Some(n)
            if n.starts_with('/')
                && !n.starts_with("//")
                && !n.contains('\\')
                && n.len() <= 2048
                && !n
                    .chars()
                    .any(|c| c.is_control() || c.is_whitespace() || "<>\"'`".contains(c)) =>
        {
            n.to_string()
        }
        _ => "/".to_string(),
    }
}

/// The language a waiting page speaks: the visitor's pick (`?lang=`), which the page's own
/// links and forms carry on, or else the browser's preference (`Accept-Language`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageLang {
    /// The language.
    pub lang: Lang,
    /// Picked by the visitor, not negotiated.
    pub picked: bool,
}

impl PageLang {
    /// From the `lang` parameter, if it names a language, else the header.
    pub fn new(param: Option<&str>, accept_language: Option<&str>) -> Self {
        match param.and_then(Lang::from_tag) {
            Some(lang) => PageLang { lang, picked: true },
            None => PageLang {
                lang: Lang::negotiate(accept_language),
                picked: false,
            },
        }
    }

    /// `lang=xx&` when picked, for the page's own URLs (before `next=`, which comes last).
    fn query(self) -> String {
        if self.picked {
            format!("lang={}&", self.lang.tag())
        } else {
            String::new()
        }
    }
}

/// The language links of a waiting page for `room`.
fn switcher(pl: PageLang, room: &str, next: &str, code: &str) -> String {
    let mut pairs: Vec<(&str, &str)> = Vec::new();
    if !code.is_empty() {
        pairs.push(("code", code));
    }
    pairs.push(("next", next));
    crate::i18n::switcher(pl.lang, &format!("/wait/{room}"), &pairs)
}

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

/// The shared style: readable, responsive, high contrast, respects reduced motion.
pub const STYLE: &str = include_str!("../assets/page.css");

fn page(lang: Lang, title: &str, head_extra: &str, body: &str) -> String {
    format!(
        "<!doctype html><html lang=\"{}\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
<title>{}</title><style>{STYLE}</style>{head_extra}</head><body><main>{body}</main></body></html>",
        lang.tag(),
        esc(title)
    )
}

/// The landing page of a node.
pub fn landing(demo_room: Option<&str>) -> String {
    let demo = match demo_room {
        Some(r) => format!(
            "<p>Try the demo room: open <a href=\"/wait/{r}?next=/demo\">/wait/{r}</a> in a few different browsers or browser profiles (the tabs and private windows of one browser share its cookies: they are one visitor). It admits two visitors at a time; the others wait in line and move up as sessions end (after a minute without activity).</p>",
            r = esc(r)
        ),
        None => String::new(),
    };
    page(
        Lang::En,
        "Sluice",
        "",
        &format!(
            "<h1>Sluice</h1><p>A self-hosted virtual waiting room and admission coordinator.</p>{demo}\
<ul><li><a href=\"/admin\">Operator dashboard</a></li><li><a href=\"/openapi.json\">API document (OpenAPI)</a></li>\
<li><a href=\"/.well-known/jwks.json\">Admission token keys (JWKS)</a></li><li><a href=\"/readyz\">Readiness</a></li></ul>"
        ),
    )
}

/// The demo's stand-in for a shop (`sluice dev`): what an admitted visitor of `room` reaches,
/// or, for anyone else, the way to its line.
pub fn demo_shop(room: &str, admitted: bool) -> String {
    let r = esc(room);
    let body = if admitted {
        format!(
            "<h1>You are in</h1><p>This page stands in for the shop behind the waiting room \
<b>{r}</b>: you were admitted from its line. Your place lasts while you keep using it (each visit to \
this page counts); visitors still waiting move up as places end.</p>\
<p><a href=\"/\">Back to the start page</a></p>"
        )
    } else {
        format!(
            "<h1>Not admitted yet</h1><p>This page stands in for the shop behind the waiting room \
<b>{r}</b>. Join its line first.</p><p><a class=\"button\" href=\"/wait/{r}?next=/demo\">To the waiting room</a></p>"
        )
    };
    page(Lang::En, "Demo shop", "", &body)
}

/// The page where staff give their browser a bypass token for `room`: a form that posts it
/// back, with `note` (why a token was refused), in the visitor's language.
pub fn staff_form(lang: Lang, room: &str, note: Option<&str>) -> String {
    let t = texts(lang);
    let note = note
        .map(|n| {
            format!(
                "<p role=\"alert\" class=\"card\">{} {}</p>",
                t.staff_refused,
                esc(n)
            )
        })
        .unwrap_or_default();
    page(
        lang,
        t.staff_title,
        "",
        &format!(
            "<h1>{title}{colon}{room}</h1>{note}<p>{intro}</p>\
<form method=\"post\"><label for=\"token\">{label}</label><br>\
<input id=\"token\" name=\"token\" type=\"password\" autocomplete=\"off\" required maxlength=\"512\" style=\"width:100%\"><br><br>\
<button type=\"submit\">{enter}</button></form>",
            title = t.staff_title,
            intro = esc(t.staff_intro).replace("{room}", &format!("<b>{}</b>", esc(room))),
            label = t.staff_token,
            enter = t.staff_enter,
            colon = lang.colon(),
            room = esc(room)
        ),
    )
}

/// A waiting time as a range ("4 min – 5 min"), one figure when both ends read alike, or
/// `unknown` when there is no honest estimate. The page's script writes it alike (`wait.js`).
fn fmt_wait(units: &Units, eta: Option<u64>, eta_max: Option<u64>, unknown: &str) -> String {
    match (eta.map(|s| units.fmt(s)), eta_max.map(|s| units.fmt(s))) {
        (None, _) => unknown.to_string(),
        (Some(a), Some(b)) if a != b => format!("{a} – {b}"),
        (Some(a), _) => a,
    }
}

fn branding_css(room: Option<&RoomView>) -> String {
    let Some(b) = room.map(|r| &r.config.branding) else {
        return String::new();
    };
    // Colours were validated as #rrggbb by the state machine.
    let mut css = String::new();
    if let Some(c) = &b.accent_color {
        css.push_str(&format!("--accent:{c};"));
    }
    if let Some(c) = &b.background_color {
        css.push_str(&format!("--bg:{c};"));
    }
    if let Some(c) = room.and_then(|r| r.text_color.as_ref()) {
        css.push_str(&format!("--fg:{c};"));
    }
    if css.is_empty() {
        String::new()
    } else {
        format!("<style>:root{{{}}}</style>", esc(&css))
    }
}

fn header_html(t: &Texts, room: Option<&RoomView>, fallback_title: &str) -> (String, String) {
    let b = room.map(|r| r.config.branding.clone()).unwrap_or_default();
    let title = b
        .title
        .clone()
        .unwrap_or_else(|| fallback_title.to_string());
    // The organiser's own name for the page, above the line's heading, with its logo.
    let logo = b
        .logo_url
        .as_ref()
        .map(|u| format!("<img class=\"logo\" src=\"{}\" alt=\"\">", esc(u)))
        .unwrap_or_default();
    let brand = b
        .title
        .as_ref()
        .map(|t| format!("<p class=\"brand-title\">{}</p>", esc(t)))
        .unwrap_or_default();
    let header = if logo.is_empty() && brand.is_empty() {
        String::new()
    } else {
        format!("<header class=\"brand\">{logo}{brand}</header>")
    };
    let message = b
        .message
        .as_ref()
        .map(|m| format!("<p class=\"brand-message\">{}</p>", esc(m)))
        .unwrap_or_default();
    let _ = t;
    (title, format!("{header}{message}"))
}

/// The line that says a room's draws are committed in advance (the commitment's first 16 hex
/// digits), opening to what that means and the whole commitment. Works without JavaScript.
fn draw_html(t: &Texts, draw: Option<&sluice_ops::ledger::DrawBody>) -> String {
    let Some(d) = draw else {
        return String::new();
    };
    let start = d.commitment.get(..16).unwrap_or(&d.commitment);
    let line = esc(t.draw_committed).replace("{c}", &format!("<code>{}</code>", esc(start)));
    format!(
        "<details id=\"draw\" class=\"draw\"><summary><small>{line} <span style=\"text-decoration:underline\">{}</span></small></summary>\
<p><small>{}</small></p><p><small><code style=\"word-break:break-all\">{}</code> ({})</small></p></details>",
        esc(t.draw_what),
        esc(t.draw_explained),
        esc(&d.commitment),
        esc(&d.algorithm)
    )
}

fn wait_html(
    t: &Texts,
    pl: PageLang,
    r: &VisitorReply,
    room: Option<&RoomView>,
    draw: Option<&sluice_ops::ledger::DrawBody>,
    next: &str,
    now_secs: u64,
) -> String {
    let lang = pl.lang;
    let colon = lang.colon();
    let (title, top) = header_html(t, room, &r.room);
    let lottery = room.is_some_and(|v| v.config.mode == Mode::Lottery);
    let position = r.position.map_or("—".to_string(), |p| p.to_string());
    let eta = fmt_wait(&t.units, r.eta_secs, r.eta_max_secs, t.unknown);
    // Without an estimate, say why when the reason is the room's: paused, or its site down.
    let why = match room {
        _ if r.held == Some(true) => {
            format!("<p id=\"why\" role=\"status\">{}</p>", t.why_held)
        }
        Some(v) if r.eta_secs.is_none() && v.config.paused => {
            format!("<p id=\"why\" role=\"status\">{}</p>", t.why_paused)
        }
        Some(v) if r.eta_secs.is_none() && v.config.health == sluice_statemachine::Health::Down => {
            format!("<p id=\"why\" role=\"status\">{}</p>", t.why_origin_down)
        }
        _ => String::new(),
    };
    // The opening the visitor waits for: its lane's, else the room's.
    let lane_view = room.and_then(|v| {
        let name = r.lane.as_deref()?;
        v.lanes.iter().find(|l| l.name == name)
    });
    let opens_at = match lane_view {
        Some(l) if l.opens_at_ms.is_some() => l.opens_at_ms.filter(|_| !l.open),
        _ => room.filter(|v| !v.open).and_then(|v| v.config.opens_at_ms),
    }
    .map(|ms| ms / 1000);
    let countdown = match opens_at {
        // How long, and when: the date and time in UTC here, in the visitor's own zone and
        // language once the script has run.
        Some(at) => format!(
            "<div class=\"card\"><p>{} <strong id=\"cd\" data-at=\"{at}\" data-left=\"{left}\">{}</strong> \
(<time id=\"opens\" datetime=\"{iso}\" data-unix=\"{at}\">{utc}</time>)</p></div>",
            t.opens_in,
            t.units.fmt(at.saturating_sub(now_secs)),
            left = at.saturating_sub(now_secs),
            iso = sluice_ops::civil::iso_utc(at),
            utc = sluice_ops::civil::readable_utc(at),
        ),
        None => String::new(),
    };
    let place = if lottery {
        format!("<p>{}</p>", t.lottery)
    } else if r.provisional == Some(true) {
        format!("<p id=\"provisional\">{}</p>", t.drawn_at_open)
    } else if r.position.is_none() {
        // The room shows only the waiting time.
        String::new()
    } else {
        format!(
            "<p>{}{colon}<span class=\"big\" id=\"pos\">{position}</span></p>",
            t.your_place
        )
    };
    let waiting = r
        .waiting
        .map(|n| {
            format!(
                "<p>{}{colon}<strong id=\"waiting\">{n}</strong></p>",
                t.people_waiting
            )
        })
        .unwrap_or_default();
    let lane = r
        .lane
        .as_ref()
        .map(|l| {
            format!(
                "<p>{}{colon}<strong id=\"lane\">{}</strong></p>",
                t.your_lane,
                esc(l)
            )
        })
        .unwrap_or_default();
    let ahead = r
        .ahead
        .filter(|&n| n > 0)
        .map(|n| {
            format!(
                "<p>{}{colon}<strong id=\"ahead\">{n}</strong></p>",
                t.ahead_in_lanes
            )
        })
        .unwrap_or_default();
    // In the room's own line of a room with codes: a code moves the visitor to its lane.
    let redeem = if r.lane.is_none() && room.is_some_and(|v| v.codes > 0) {
        format!(
            "<p>{}</p>{}",
            t.code_have,
            code_form(t, pl, &r.room, next, "", true)
        )
    } else {
        String::new()
    };
    // The operator's notice: always on the page (hidden without one), so that a notice set
    // while the visitor waits appears live.
    let notice = format!(
        "<p id=\"notice\" class=\"notice\" role=\"status\" aria-label=\"{}\"{}>{}</p>",
        esc(t.notice_heading),
        if r.notice.is_some() { "" } else { " hidden" },
        esc(r.notice.as_deref().unwrap_or(""))
    );
    // Everyone ahead, in all lanes, in words (plural forms for the script to pick from); not
    // said where lanes go first and the room does not show how many wait in them (it would
    // count only the visitor's own line).
    let lanes_untold = r.ahead.is_none() && room.is_some_and(|v| !v.lanes.is_empty());
    let people_ahead = r
        .position
        .filter(|_| !lanes_untold)
        .map(|p| {
            let n = p - 1 + r.ahead.unwrap_or(0);
            let forms = &t.people_ahead;
            format!(
                "<p id=\"people-ahead\" data-one=\"{}\" data-few=\"{}\" data-many=\"{}\" data-other=\"{}\">{}</p>",
                esc(forms.one),
                esc(forms.few),
                esc(forms.many),
                esc(forms.other),
                esc(&crate::i18n::people_ahead(lang, n))
            )
        })
        .unwrap_or_default();
    let updated = format!(
        "<p class=\"updated\">{}{colon}<time id=\"updated\" datetime=\"{now_secs}\">{:02}:{:02}:{:02} UTC</time></p>\
<p id=\"stale\" class=\"notice\" role=\"status\" hidden>{}</p>",
        t.last_updated,
        now_secs % 86_400 / 3_600,
        now_secs % 3_600 / 60,
        now_secs % 60,
        esc(t.no_news),
    );
    let check = r.next_check_secs.unwrap_or(5);
    // The script is a file of its own (no inline script: the page's Content-Security-Policy
    // forbids them); it reads its data from these attributes.
    let script = format!(
        "<div id=\"sluice-wait\" hidden data-room=\"{}\" data-next=\"{}\" data-unknown=\"{}\" data-check=\"{check}\" \
data-turn=\"{}\" data-cont=\"{}\" data-lang=\"{}\" data-colon=\"{}\" data-place=\"{}\" data-wait=\"{}\" data-units=\"{}\"></div>\
<script src=\"/assets/wait.js\" defer></script>",
        esc(&r.room),
        esc(next),
        esc(t.unknown),
        esc(t.your_turn),
        esc(t.continue_),
        lang.tag(),
        esc(colon),
        esc(t.your_place),
        esc(t.estimated_wait),
        esc(&t.units.joined()),
    );
    // One live region says what changed in a whole sentence, once (the figures themselves do
    // not talk).
    let say = "<p id=\"say\" class=\"sr\" role=\"status\" aria-live=\"polite\"></p>";
    let langs = switcher(pl, &r.room, next, "");
    page(
        lang,
        &title,
        &format!(
            "{}<noscript><meta http-equiv=\"refresh\" content=\"{check}\"></noscript>",
            branding_css(room)
        ),
        &format!(
            "{top}<h1>{}</h1>{notice}<div id=\"details\"><p>{}</p>{countdown}{lane}{place}{people_ahead}{ahead}{waiting}\
<p>{}{colon}<strong id=\"eta\">{eta}</strong></p>{why}</div>\
<label for=\"prog\">{}</label><progress id=\"prog\" aria-label=\"{}\"></progress>{updated}{say}{draw}{redeem}{langs}{script}",
            t.in_line, t.keep_open, t.estimated_wait, t.progress, t.progress,
            draw = draw_html(t, draw),
        ),
    )
}

/// The waiting page as a visitor at `reply` would see it in `room` (the dashboard's preview of
/// a room's branding before it is saved). Its script is left out: a preview moves nowhere.
pub fn preview_html(lang: Lang, reply: &VisitorReply, room: &RoomView, now_secs: u64) -> String {
    let pl = PageLang {
        lang,
        picked: false,
    };
    let html = wait_html(texts(lang), pl, reply, Some(room), None, "/", now_secs);
    html.replace("<script src=\"/assets/wait.js\" defer></script>", "")
}

fn message_html(
    t: &Texts,
    pl: PageLang,
    room: Option<&RoomView>,
    room_name: &str,
    next: &str,
    text: &str,
    retry: bool,
) -> String {
    message_with_links(t, pl, room, room_name, next, text, retry, None)
}

/// A message page with a way onward: the organiser's page after the event (`after_url`), and
/// back to the site.
#[allow(clippy::too_many_arguments)]
fn message_with_links(
    t: &Texts,
    pl: PageLang,
    room: Option<&RoomView>,
    room_name: &str,
    next: &str,
    text: &str,
    retry: bool,
    after_url: Option<&str>,
) -> String {
    let lang = pl.lang;
    let after = after_url
        .map(|u| {
            format!(
                "<p><a class=\"button\" href=\"{}\">{}</a></p>",
                esc(u),
                t.after_event
            )
        })
        .unwrap_or_default();
    let onward = format!("{after}<p><a href=\"/\">{}</a></p>", t.back_to_site);
    let (title, top) = header_html(t, room, room_name);
    let refresh = if retry {
        "<meta http-equiv=\"refresh\" content=\"10\">"
    } else {
        ""
    };
    page(
        lang,
        &title,
        &format!("{}{refresh}", branding_css(room)),
        &format!(
            "{top}<h1>{}</h1><p role=\"status\">{}</p>{onward}{}",
            t.sorry,
            esc(text),
            switcher(pl, room_name, next, "")
        ),
    )
}

/// A form that redeems an access code (posting to the waiting page, which joins with it):
/// `required` where a place needs one.
fn code_form(
    t: &Texts,
    pl: PageLang,
    room: &str,
    next: &str,
    code: &str,
    required: bool,
) -> String {
    format!(
        "<form class=\"card\" method=\"post\" action=\"/wait/{room}?{lq}next={next}\">\
<p><label for=\"code\">{}</label><br><input id=\"code\" name=\"code\" value=\"{code}\" \
autocomplete=\"off\" autocapitalize=\"characters\" spellcheck=\"false\" maxlength=\"{max}\" \
style=\"width:100%;font-family:monospace\"{req}></p><p><button type=\"submit\">{}</button></p></form>",
        t.code_label,
        t.code_button,
        room = esc(room),
        lq = esc(&pl.query()),
        next = esc(next),
        code = esc(code),
        max = sluice_ops::codes::CODE_TEXT_MAX,
        req = if required { " required" } else { "" },
    )
}

/// What the join page's form carries besides the join.
struct JoinForm<'a> {
    /// The room asks a proof-of-work, which the page's script solves.
    pow: bool,
    /// The shop's identity assertion, from the link.
    identity: &'a str,
    /// An invitation's access code, from the link.
    code: &'a str,
    /// The room gives places only to code holders.
    invite_only: bool,
    /// The visitor's last place was lost by not checking in.
    away: bool,
    /// The browser was just given a place and came back without its cookie: it keeps none.
    cookies_lost: bool,
}

/// The page that asks a visitor without a place to join: a form that posts to the page itself
/// (without JavaScript), which the page's script submits for the visitor (with it). Showing it
/// takes no place: link previews, prefetchers, crawlers and uptime checks only look. In a room
/// with access codes the form has a code field (filled in from an invitation link); an
/// invite-only room's page waits for the visitor to give one.
fn join_html(
    t: &Texts,
    pl: PageLang,
    room: Option<&RoomView>,
    room_name: &str,
    next: &str,
    form: JoinForm<'_>,
) -> String {
    let JoinForm {
        pow,
        identity,
        code,
        invite_only,
        away,
        cookies_lost,
    } = form;
    let with_codes = invite_only || !code.is_empty() || room.is_some_and(|r| r.codes > 0);
    let code_field = if with_codes {
        format!(
            "<p><label for=\"code\">{}</label><br><input id=\"code\" name=\"code\" value=\"{}\" \
autocomplete=\"off\" autocapitalize=\"characters\" spellcheck=\"false\" maxlength=\"{}\" \
style=\"width:100%;font-family:monospace\"{}></p>",
            t.code_label,
            esc(code),
            sluice_ops::codes::CODE_TEXT_MAX,
            if invite_only { " required" } else { "" }
        )
    } else {
        String::new()
    };
    // An invite-only room without a code in the link: the visitor types it, then joins. A
    // visitor whose place was lost reads why before joining again.
    let auto_join = !(away || cookies_lost || invite_only && code.is_empty());
    let intro = if away {
        t.away_too_long
    } else if invite_only {
        t.invite_only
    } else if pow && auto_join {
        // The script hides the button while it works, and joins by itself: "press the button"
        // would name a button that is not there (it comes back, with why, if the work fails).
        t.keep_open
    } else {
        t.join_intro
    };
    let lang = pl.lang;
    let (title, top) = header_html(t, room, room_name);
    // With a proof-of-work, the script solves it (a progress bar and a live text say how far it
    // is) and then joins; without JavaScript, the page says why the button cannot work.
    let pow_html = if pow {
        format!(
            "<div id=\"pow\" hidden><p role=\"status\" aria-live=\"polite\">{}</p>\
<p><progress id=\"pow-bar\" max=\"1\" value=\"0\" aria-label=\"{}\"></progress> <span id=\"pow-pct\"></span></p></div>\
<p id=\"pow-failed\" role=\"alert\" hidden>{}</p>\
<noscript><p role=\"alert\">{}</p></noscript>",
            t.pow_working, t.progress, t.challenge_needs_script, t.challenge_needs_script
        )
    } else {
        String::new()
    };
    page(
        lang,
        &title,
        &branding_css(room),
        &format!(
            "{top}<h1>{}</h1><p>{}</p>{pow_html}\
<p id=\"cookies\" role=\"alert\"{cookies_hidden}>{}</p>\
<form id=\"join\" method=\"post\" action=\"/wait/{room}?{lq}next={next}\"><input type=\"hidden\" name=\"altcha\" value=\"\">\
<input type=\"hidden\" name=\"identity\" value=\"{identity}\">{code_field}\
<p><button type=\"submit\">{}</button></p></form>\
<div id=\"sluice-wait\" hidden data-room=\"{room}\" data-next=\"{next}\" data-join=\"1\" data-manual=\"{manual}\" data-pow=\"{pow}\"></div>\
{langs}<script src=\"/assets/wait.js\" defer></script>",
            t.join_title,
            intro,
            t.cookies_blocked,
            t.join_button,
            manual = if auto_join { "" } else { "1" },
            room = esc(room_name),
            lq = esc(&pl.query()),
            next = esc(next),
            pow = if pow { "1" } else { "" },
            identity = esc(identity),
            langs = switcher(pl, room_name, next, code),
            cookies_hidden = if cookies_lost { "" } else { " hidden" },
        ),
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
    // A visitor who already holds a place is only checked in (batched), not written per view;
    // one who brings a code joins with it (which redeems it for the place held).
    let redeeming = matches!(&request, WaitRequest::Join { code: Some(_), .. });
    // A place lost by not checking in: the page says so, rather than quietly taking a new one.
    let mut away = false;
    let resumed = match &src {
        // (An admitted visitor is sent on through the gate, which counts its network.)
        TicketSource::Cookie(_) if !redeeming => match app.sluice.heartbeat(room, &src, None).await
        {
            Ok(r) if r.state != ReplyState::Rejected => Some(r),
            Ok(r) => {
                away = r.reason.as_deref() == Some("abandoned");
                None
            }
            _ => None,
        },
        _ => None,
    };
    let page = WaitPage::new(app, room, next, pl);
    let joining = matches!(request, WaitRequest::Join { .. });
    let code_given = match &request {
        WaitRequest::Look { code, .. } | WaitRequest::Join { code, .. } => code.clone(),
    };
    let reply = match (resumed, request) {
        (Some(r), _) => Ok(r),
        (
            None,
            WaitRequest::Join {
                client,
                altcha,
                identity,
                external,
                code,
            },
        ) => {
            let proof =
                sluice_ops::visitors::JoinProof::new(altcha.as_deref(), identity.as_deref())
                    .with_external(external.as_deref())
                    .with_code(code.as_deref());
            app.sluice.join(room, &src, Some(client), &proof).await
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
                identity: &identity.unwrap_or_default(),
                code: &code.unwrap_or_default(),
                invite_only: page.invite_only,
                away,
                cookies_lost: just_joined && matches!(src, TicketSource::None),
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

/// What one waiting page is about: the room (as this node's applied state has it), where the
/// visitor goes once admitted, the language.
struct WaitPage<'a> {
    app: &'a App,
    room: &'a str,
    view: Option<RoomView>,
    /// Where an admitted visitor goes (checked: a path on this site).
    next: String,
    pl: PageLang,
    t: &'static Texts,
    /// The room gives places only to code holders.
    invite_only: bool,
    /// Where a closed room sends its visitors.
    after_url: Option<String>,
}

impl<'a> WaitPage<'a> {
    fn new(app: &'a App, room: &'a str, next: Option<&str>, pl: PageLang) -> Self {
        let view = app.sluice.room_view(room);
        // A page is never rendered from another room's state than the one asked for.
        assert!(
            view.as_ref().is_none_or(|v| v.name == room),
            "the waiting page of {room} read another room"
        );
        let (invite_only, after_url) = app
            .sluice
            .entry_policy_here(room)
            .map_or((false, None), |p| (p.invite_only, p.after_url));
        WaitPage {
            app,
            room,
            view,
            next: safe_next(next),
            pl,
            t: texts(pl.lang),
            invite_only,
            after_url,
        }
    }

    /// A visitor without a place: the join page, or why the room takes nobody.
    fn look(&self, form: JoinForm<'_>) -> Response {
        let (app, room, t, pl, next) = (self.app, self.room, self.t, self.pl, &self.next);
        if self.view.is_none() || sluice_ops::core::Sluice::check_room(room).is_err() {
            return message_page(t, pl, None, room, next, t.not_found, StatusCode::NOT_FOUND);
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
            let html = message_with_links(t, pl, Some(v), room, next, text, false, after);
            let mut r = (StatusCode::FORBIDDEN, Html(html)).into_response();
            no_store(&mut r);
            return r;
        }
        let pow = app
            .sluice
            .entry_policy_here(room)
            .is_some_and(|p| p.proof_of_work.is_some());
        let mut r = Html(join_html(
            t,
            pl,
            self.view.as_ref(),
            room,
            next,
            JoinForm { pow, ..form },
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
        let mut html = message_html(t, pl, self.view.as_ref(), room, next, text, retry);
        // After a failed check, a way back to the join page (which solves a new challenge,
        // or takes the shop's link again).
        if e.code == "invite_only" || e.code.starts_with("code_") {
            let form = code_form(t, pl, room, next, code_given.unwrap_or(""), true);
            html = html.replacen("</main>", &format!("{form}</main>"), 1);
        } else if e.code.starts_with("challenge_") || e.code.starts_with("identity_") {
            let back = format!(
                "<p><a class=\"button\" href=\"/wait/{}?{}next={}\">{}</a></p></main>",
                esc(room),
                esc(&pl.query()),
                esc(next),
                t.rejoin
            );
            html = html.replacen("</main>", &back, 1);
        }
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
            see_other(next)
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
            see_other(&format!("/wait/{room}?{}{marker}next={next}", pl.query()))
        } else if reply.state == ReplyState::Waiting {
            let now_secs = app.sluice.now_ms() / 1000;
            // A room that draws shows what its draws are bound to.
            let lottery_lanes = app
                .sluice
                .entry_policy_here(room)
                .is_some_and(|p| p.lanes.iter().any(|l| l.lottery));
            let draw = self
                .view
                .as_ref()
                .and_then(|v| sluice_ops::ledger::DrawBody::of(v, lottery_lanes));
            Html(wait_html(
                t,
                pl,
                reply,
                self.view.as_ref(),
                draw.as_ref(),
                next,
                now_secs,
            ))
            .into_response()
        } else {
            let (text, after) = match reply.reason.as_deref() {
                Some("room_closed") => (t.closed, self.after_url.as_deref()),
                Some("room_rejecting") => (t.not_taking, None),
                _ => (t.ended, None),
            };
            let html =
                message_with_links(t, pl, self.view.as_ref(), room, next, text, false, after);
            (StatusCode::FORBIDDEN, Html(html)).into_response()
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

/// A 303 to `to` (a same-site path, already checked).
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
    let t = texts(pl.lang);
    let html = page(
        pl.lang,
        t.sorry,
        &format!("<meta http-equiv=\"refresh\" content=\"{retry_secs}\">"),
        &format!(
            "<h1>{}</h1><p role=\"status\">{}</p><p><a href=\"/\">{}</a></p>",
            t.sorry, t.too_many, t.back_to_site
        ),
    );
    let mut r = (StatusCode::TOO_MANY_REQUESTS, Html(html)).into_response();
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(retry_secs));
    no_store(&mut r);
    r
}

/// A message page with `status`.
fn message_page(
    t: &Texts,
    pl: PageLang,
    room: Option<&RoomView>,
    room_name: &str,
    next: &str,
    text: &str,
    status: StatusCode,
) -> Response {
    let mut r = (
        status,
        Html(message_html(t, pl, room, room_name, next, text, false)),
    )
        .into_response();
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

    #[test]
    fn escaping() {
        assert_eq!(
            esc("<a href=\"x\">'&'</a>"),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
    }

    #[test]
    fn durations_read_well() {
        let en = &crate::i18n::texts(Lang::En).units;
        assert_eq!(fmt_wait(en, Some(200), Some(250), "?"), "4 min – 5 min");
        assert_eq!(fmt_wait(en, Some(181), Some(200), "?"), "4 min");
        assert_eq!(fmt_wait(en, Some(5), None, "?"), "5 s");
        assert_eq!(fmt_wait(en, None, Some(5), "?"), "?");
        let ja = &crate::i18n::texts(Lang::Ja).units;
        assert_eq!(fmt_wait(ja, Some(200), Some(250), "?"), "4分 – 5分");
    }
}
