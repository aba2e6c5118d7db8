//! The visitor's pages, rendered from the templates in `api/web/templates/` (askama: checked
//! when the crate is built, every value HTML-escaped unless the template says `|safe`, which
//! only markup this module builds from escaped parts is). This module decides what a page
//! shows; the templates say how.

use crate::i18n::{texts, Lang, Texts, Units};
use askama::Template;
use sluice_ops::ledger::DrawBody;
use sluice_ops::model::VisitorReply;
use sluice_ops::page::{PageKind, PageValues, Parts};
use sluice_ops::text::esc;
use sluice_statemachine::{Mode, RoomView};

/// The shared style: readable, responsive, high contrast, respects reduced motion.
pub const STYLE: &str = include_str!("../assets/page.css");

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
    pub(crate) fn query(self) -> String {
        if self.picked {
            format!("lang={}&", self.lang.tag())
        } else {
            String::new()
        }
    }
}

/// The templates' escaper: the project's one ([`esc`]), so that a value reads the same in a
/// page whether a template or code wrote it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Escape;

impl askama::filters::Escaper for Escape {
    fn write_escaped_str<W: std::fmt::Write>(&self, mut dest: W, text: &str) -> std::fmt::Result {
        dest.write_str(&esc(text))
    }
}

/// A template that cannot fail: every value it shows is a string or a number.
fn render(page: &impl Template) -> String {
    page.render().expect("a page's values always render")
}

/// The room's branding, as the pages show it.
#[derive(Debug, Default)]
struct Brand<'a> {
    logo: Option<&'a str>,
    title: Option<&'a str>,
    message: Option<&'a str>,
    /// Custom properties for the page's colours, or empty.
    css: String,
}

impl<'a> Brand<'a> {
    fn of(room: Option<&'a RoomView>) -> Self {
        let Some(room) = room else {
            return Brand::default();
        };
        let b = &room.config.branding;
        let mut css = String::new();
        for (name, colour) in [
            ("accent", b.accent_color.as_ref()),
            ("bg", b.background_color.as_ref()),
            ("fg", room.text_color.as_ref()),
        ] {
            if let Some(c) = colour {
                css.push_str(&format!("--{name}:{c};"));
            }
        }
        Brand {
            logo: b.logo_url.as_deref(),
            title: b.title.as_deref(),
            message: b.message.as_deref(),
            css,
        }
    }

    /// The page's title: the organiser's, else `fallback`.
    fn page_title(&self, fallback: &'a str) -> &'a str {
        self.title.unwrap_or(fallback)
    }
}

/// Where an admitted visitor goes on to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Next {
    /// A path of this site.
    Here(String),
    /// A page of another site the room hands visitors to (`line.handoff_origins`): the
    /// visitor arrives there with a single-use admission token.
    Away {
        /// The page, as parsed (without a `sluice_token` parameter).
        url: String,
        /// Its origin, as the room lists it.
        origin: String,
    },
}

impl Next {
    /// The front page of this site.
    pub fn home() -> Self {
        Next::Here("/".into())
    }

    /// As it is written (a path, or another site's URL).
    pub fn raw(&self) -> &str {
        match self {
            Next::Here(p) => p,
            Next::Away { url, .. } => url,
        }
    }

    /// As the page's own URLs carry it after `next=` (another site's URL percent-encoded).
    pub(crate) fn query(&self) -> String {
        match self {
            Next::Here(p) => p.clone(),
            Next::Away { url, .. } => crate::i18n::percent(url, b""),
        }
    }

    /// Where the page's script and its link send a visitor once admitted: the path, or for
    /// another site this page again, whose answer hands the visitor on with a token.
    pub(crate) fn go(&self, pl: PageLang, room: &str) -> String {
        match self {
            Next::Here(p) => p.clone(),
            Next::Away { .. } => format!("/wait/{room}?{}next={}", pl.query(), self.query()),
        }
    }
}

/// The language links of a waiting page for `room`.
fn switcher(pl: PageLang, room: &str, next: &Next, code: &str) -> String {
    let mut pairs: Vec<(&str, &str)> = Vec::new();
    if !code.is_empty() {
        pairs.push(("code", code));
    }
    pairs.push(("next", next.raw()));
    crate::i18n::switcher(pl.lang, &format!("/wait/{room}"), &pairs)
}

/// A waiting time as a range ("4 min – 5 min"), one figure when both ends read alike, or
/// `unknown` when there is no honest estimate. The page's script writes it alike (`wait.js`).
pub(crate) fn fmt_wait(
    units: &Units,
    eta: Option<u64>,
    eta_max: Option<u64>,
    unknown: &str,
) -> String {
    match (eta.map(|s| units.fmt(s)), eta_max.map(|s| units.fmt(s))) {
        (None, _) => unknown.to_string(),
        (Some(a), Some(b)) if a != b => format!("{a} – {b}"),
        (Some(a), _) => a,
    }
}

/// What the waiting page says of the visitor's place.
#[derive(Debug)]
enum Place {
    /// The room draws by lot: no place to show.
    Lottery,
    /// Places are drawn at the opening: any shown now is provisional.
    Provisional,
    /// The room shows only the waiting time.
    Untold,
    /// The place.
    At(u64),
}

/// The countdown to the opening the visitor waits for (seconds since the epoch).
#[derive(Debug)]
struct Countdown {
    at: u64,
    left: u64,
    left_text: String,
    iso: String,
    utc: String,
}

/// A room's commitment to its draws, as the page shows it.
#[derive(Debug)]
struct Draw<'a> {
    /// The sentence, with the commitment's start in `<code>` (escaped parts).
    line: String,
    commitment: &'a str,
    algorithm: &'a str,
}

impl<'a> Draw<'a> {
    fn of(t: &Texts, d: &'a DrawBody) -> Self {
        let start = d.commitment.get(..16).unwrap_or(&d.commitment);
        Draw {
            line: esc(t.draw_committed).replace("{c}", &format!("<code>{}</code>", esc(start))),
            commitment: &d.commitment,
            algorithm: &d.algorithm,
        }
    }
}

#[derive(Template)]
#[template(
    path = "wait.html",
    blocks = ["notice", "position", "estimate", "progress", "more", "script"]
)]
struct WaitPage<'a> {
    lang: &'static str,
    title: &'a str,
    t: &'static Texts,
    colon: &'static str,
    brand: Brand<'a>,
    check: u64,
    notice: Option<&'a str>,
    countdown: Option<Countdown>,
    lane: Option<&'a str>,
    place: Place,
    people_ahead: Option<String>,
    ahead: Option<u64>,
    waiting: Option<u64>,
    eta: String,
    why: Option<&'static str>,
    now: u64,
    clock: String,
    draw: Option<Draw<'a>>,
    /// The next announced phase of the sale, in words (escaped parts, its time in `<time>`).
    next_phase: Option<String>,
    redeem: bool,
    room: &'a str,
    next: String,
    go: String,
    lang_query: String,
    code: &'a str,
    code_max: usize,
    code_required: bool,
    switcher: String,
    script: bool,
    units: String,
}

/// Why the wait is unknown, when the reason is the room's: the visitor's network is held back,
/// the room is paused, or its site is down.
fn why_unknown(
    t: &'static Texts,
    r: &VisitorReply,
    room: Option<&RoomView>,
) -> Option<&'static str> {
    match room {
        _ if r.held == Some(true) => Some(t.why_held),
        Some(v) if r.eta_secs.is_none() && v.config.paused => Some(t.why_paused),
        Some(v) if r.eta_secs.is_none() && v.config.health == sluice_statemachine::Health::Down => {
            Some(t.why_origin_down)
        }
        _ => None,
    }
}

/// The opening the visitor waits for, if still to come: its lane's, else the room's.
fn countdown(
    t: &Texts,
    r: &VisitorReply,
    room: Option<&RoomView>,
    now_secs: u64,
) -> Option<Countdown> {
    let lane_view = room.and_then(|v| {
        let name = r.lane.as_deref()?;
        v.lanes.iter().find(|l| l.name == name)
    });
    let at = match lane_view {
        Some(l) if l.opens_at_ms.is_some() => l.opens_at_ms.filter(|_| !l.open),
        _ => room.filter(|v| !v.open).and_then(|v| v.config.opens_at_ms),
    }? / 1000;
    let left = at.saturating_sub(now_secs);
    Some(Countdown {
        at,
        left,
        left_text: t.units.fmt(left),
        iso: sluice_ops::civil::iso_utc(at),
        utc: sluice_ops::civil::readable_utc(at),
    })
}

fn place(r: &VisitorReply, room: Option<&RoomView>) -> Place {
    if room.is_some_and(|v| v.config.mode == Mode::Lottery) {
        Place::Lottery
    } else if r.provisional == Some(true) {
        Place::Provisional
    } else {
        r.position.map_or(Place::Untold, Place::At)
    }
}

/// "N people ahead of you", everyone ahead in all lanes; not said where lanes go first and the
/// room does not show how many wait in them (it would count only the visitor's own line).
fn people_ahead(lang: Lang, r: &VisitorReply, room: Option<&RoomView>) -> Option<String> {
    let lanes_untold = r.ahead.is_none() && room.is_some_and(|v| !v.lanes.is_empty());
    let p = r.position.filter(|_| !lanes_untold)?;
    Some(crate::i18n::people_ahead(
        lang,
        p - 1 + r.ahead.unwrap_or(0),
    ))
}

/// What a room's pages show of its own beyond its view: its page template and the next phase
/// of its sale it announces, as the phase in effect has them.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RoomPage<'a> {
    /// The page template (`None`: the built-in page).
    pub template: Option<&'a str>,
    /// The next announced phase: its name and start (ms since the epoch).
    pub next_phase: Option<(&'a str, u64)>,
}

/// "Next: Second drop, Sat 21:00 UTC", escaped, the time in a `<time>` the script shows in the
/// visitor's zone.
fn next_phase_line(t: &Texts, name: &str, at_ms: u64) -> String {
    let at = at_ms / 1000;
    let time = format!(
        "<time datetime=\"{}\" data-unix=\"{at}\">{}</time>",
        sluice_ops::civil::iso_utc(at),
        esc(&sluice_ops::civil::readable_utc(at))
    );
    esc(t.next_phase)
        .replace("{name}", &format!("<strong>{}</strong>", esc(name)))
        .replace("{time}", &time)
}

/// The waiting page of a visitor at `r` in `room`, made by the room's own template if it has
/// one; `script` false leaves out the page's script (a preview moves nowhere).
#[allow(clippy::too_many_arguments)]
pub(crate) fn wait_html(
    pl: PageLang,
    r: &VisitorReply,
    room: Option<&RoomView>,
    draw: Option<&DrawBody>,
    next: &Next,
    now_secs: u64,
    script: bool,
    own: RoomPage<'_>,
) -> String {
    let lang = pl.lang;
    let t = texts(lang);
    let brand = Brand::of(room);
    let page = WaitPage {
        lang: lang.tag(),
        title: brand.page_title(&r.room),
        t,
        colon: lang.colon(),
        check: r.next_check_secs.unwrap_or(5),
        notice: r.notice.as_deref(),
        countdown: countdown(t, r, room, now_secs),
        lane: r.lane.as_deref(),
        place: place(r, room),
        people_ahead: people_ahead(lang, r, room),
        ahead: r.ahead.filter(|&n| n > 0),
        waiting: r.waiting,
        eta: fmt_wait(&t.units, r.eta_secs, r.eta_max_secs, t.unknown),
        why: why_unknown(t, r, room),
        now: now_secs,
        clock: format!(
            "{:02}:{:02}:{:02}",
            now_secs % 86_400 / 3_600,
            now_secs % 3_600 / 60,
            now_secs % 60
        ),
        draw: draw.map(|d| Draw::of(t, d)),
        next_phase: own
            .next_phase
            .map(|(name, at)| next_phase_line(t, name, at)),
        redeem: r.lane.is_none() && room.is_some_and(|v| v.codes > 0),
        room: &r.room,
        next: next.query(),
        go: next.go(pl, &r.room),
        lang_query: pl.query(),
        code: "",
        code_max: sluice_ops::codes::CODE_TEXT_MAX,
        code_required: true,
        switcher: switcher(pl, &r.room, next, ""),
        script,
        units: t.units.joined(),
        brand,
    };
    let custom = own.template.and_then(|source| {
        let more = block(page.as_more());
        let position = block(page.as_position()) + &more;
        let parts = Parts {
            notice: &block(page.as_notice()),
            position: &position,
            estimate: &block(page.as_estimate()),
            progress: &block(page.as_progress()),
            switcher: &page.switcher,
            join_form: "",
        };
        let frame = Frame {
            kind: PageKind::Wait,
            pl,
            room: &r.room,
            heading: t.in_line,
            brand: &page.brand,
            refresh: Some(page.check),
        };
        custom_html(source, &frame, &parts, block(page.as_script()))
    });
    custom.unwrap_or_else(|| render(&page))
}

/// One block of a page's template (a part of the page a room's own template places).
fn block(part: impl Template) -> String {
    part.render().expect("a page's values always render")
}

/// What a page made by a room's own template is framed with.
struct Frame<'a> {
    kind: PageKind,
    pl: PageLang,
    room: &'a str,
    heading: &'a str,
    brand: &'a Brand<'a>,
    /// Without the script, reload after this many seconds.
    refresh: Option<u64>,
}

#[derive(Template)]
#[template(path = "custom.html")]
struct CustomPage<'a> {
    lang: &'static str,
    title: &'a str,
    brand: &'a Brand<'a>,
    refresh: Option<u64>,
    body: String,
    script: String,
}

/// The page a room's own template makes with `parts`, in the frame of every page, followed by
/// `script`; `None` (and a warning) if the template went over its bounds, so that the
/// built-in page is shown instead.
fn custom_html(source: &str, f: &Frame<'_>, parts: &Parts<'_>, script: String) -> Option<String> {
    let values = PageValues {
        kind: f.kind,
        lang: f.pl.lang.tag(),
        room: f.room,
        heading: f.heading,
        title: f.brand.title,
        message: f.brand.message,
        logo_url: f.brand.logo,
    };
    match sluice_ops::page::render(source, &values, parts) {
        Ok(body) => Some(render(&CustomPage {
            lang: f.pl.lang.tag(),
            title: f.brand.page_title(f.room),
            brand: f.brand,
            refresh: f.refresh,
            body,
            script,
        })),
        Err(e) => {
            tracing::warn!(room = f.room, error = %e, "the room's page template failed: the built-in page is shown");
            None
        }
    }
}

/// What a message page says, and what it offers besides the way back to the site.
#[derive(Debug)]
pub(crate) struct Message<'a> {
    /// The message (plain text).
    pub text: &'a str,
    /// Reload every 10 s (the answer was the node's failure, not the visitor's).
    pub retry: bool,
    /// The organiser's page about what follows a closed room.
    pub after_url: Option<&'a str>,
    /// A way back after a failed check.
    pub then: Then<'a>,
}

impl<'a> Message<'a> {
    /// Just `text`.
    pub fn text(text: &'a str) -> Self {
        Message {
            text,
            retry: false,
            after_url: None,
            then: Then::Nothing,
        }
    }
}

/// What a message page offers after a failed check.
#[derive(Debug)]
pub(crate) enum Then<'a> {
    /// Nothing more.
    Nothing,
    /// A code's form, filled in with the code given.
    Code(&'a str),
    /// The join page again.
    Rejoin,
}

#[derive(Template)]
#[template(path = "message.html")]
struct MessagePage<'a> {
    lang: &'static str,
    title: &'a str,
    t: &'static Texts,
    brand: Brand<'a>,
    refresh: Option<u64>,
    text: &'a str,
    after_url: Option<&'a str>,
    switcher: String,
    then: Then<'a>,
    room: &'a str,
    next: String,
    lang_query: String,
    code_max: usize,
}

/// A message page for `room_name`, with a way onward: the organiser's page after the event,
/// and back to the site.
pub(crate) fn message_html(
    pl: PageLang,
    room: Option<&RoomView>,
    room_name: &str,
    next: &Next,
    message: Message<'_>,
) -> String {
    let brand = Brand::of(room);
    render(&MessagePage {
        lang: pl.lang.tag(),
        title: brand.page_title(room_name),
        t: texts(pl.lang),
        refresh: message.retry.then_some(10),
        text: message.text,
        after_url: message.after_url,
        switcher: switcher(pl, room_name, next, ""),
        then: message.then,
        room: room_name,
        next: next.query(),
        lang_query: pl.query(),
        code_max: sluice_ops::codes::CODE_TEXT_MAX,
        brand,
    })
}

/// What the join page's form carries besides the join.
#[derive(Debug)]
pub(crate) struct JoinForm<'a> {
    /// The room asks a proof-of-work, which the page's script solves.
    pub pow: bool,
    /// The shop's identity assertion, from the link.
    pub identity: &'a str,
    /// An invitation's access code, from the link.
    pub code: &'a str,
    /// The room gives places only to code holders.
    pub invite_only: bool,
    /// The visitor's last place was lost by not checking in.
    pub away: bool,
    /// The browser was just given a place and came back without its cookie: it keeps none.
    pub cookies_lost: bool,
    /// The browser brought this room's cookie (a place since ended): it keeps cookies, so the
    /// page's script need not guess from how soon it is back.
    pub kept_cookie: bool,
}

#[derive(Template)]
#[template(path = "join.html", blocks = ["join_form", "script"])]
struct JoinPage<'a> {
    lang: &'static str,
    title: &'a str,
    t: &'static Texts,
    brand: Brand<'a>,
    intro: &'static str,
    pow: bool,
    cookies_lost: bool,
    kept_cookie: bool,
    auto_join: bool,
    room: &'a str,
    next: String,
    lang_query: String,
    identity: &'a str,
    with_codes: bool,
    code: &'a str,
    code_max: usize,
    code_required: bool,
    switcher: String,
}

/// The page that asks a visitor without a place to join: a form that posts to the page itself
/// (without JavaScript), which the page's script submits for the visitor (with it). Showing it
/// takes no place: link previews, prefetchers, crawlers and uptime checks only look. In a room
/// with access codes the form has a code field (filled in from an invitation link); an
/// invite-only room's page waits for the visitor to give one.
pub(crate) fn join_html(
    pl: PageLang,
    room: Option<&RoomView>,
    room_name: &str,
    next: &Next,
    form: JoinForm<'_>,
    own: RoomPage<'_>,
) -> String {
    let t = texts(pl.lang);
    // An invite-only room without a code in the link: the visitor types it, then joins. A
    // visitor whose place was lost reads why before joining again.
    let auto_join = !(form.away || form.cookies_lost || form.invite_only && form.code.is_empty());
    let intro = if form.away {
        t.away_too_long
    } else if form.invite_only {
        t.invite_only
    } else if form.pow && auto_join {
        // The script hides the button while it works, and joins by itself: "press the button"
        // would name a button that is not there (it comes back, with why, if the work fails).
        t.keep_open
    } else {
        t.join_intro
    };
    let brand = Brand::of(room);
    let page = JoinPage {
        lang: pl.lang.tag(),
        title: brand.page_title(room_name),
        t,
        intro,
        pow: form.pow,
        cookies_lost: form.cookies_lost,
        kept_cookie: form.kept_cookie,
        auto_join,
        room: room_name,
        next: next.query(),
        lang_query: pl.query(),
        identity: form.identity,
        with_codes: form.invite_only || !form.code.is_empty() || room.is_some_and(|r| r.codes > 0),
        code: form.code,
        code_max: sluice_ops::codes::CODE_TEXT_MAX,
        code_required: form.invite_only,
        switcher: switcher(pl, room_name, next, form.code),
        brand,
    };
    let custom = own.template.and_then(|source| {
        let parts = Parts {
            switcher: &page.switcher,
            join_form: &block(page.as_join_form()),
            ..Parts::default()
        };
        let frame = Frame {
            kind: PageKind::Join,
            pl,
            room: room_name,
            heading: t.join_title,
            brand: &page.brand,
            refresh: None,
        };
        custom_html(source, &frame, &parts, block(page.as_script()))
    });
    custom.unwrap_or_else(|| render(&page))
}

#[derive(Template)]
#[template(path = "staff.html")]
struct StaffPage<'a> {
    lang: &'static str,
    title: &'static str,
    t: &'static Texts,
    colon: &'static str,
    room: &'a str,
    note: Option<&'a str>,
    /// What the page does, the room's name in bold (escaped parts).
    intro: String,
}

/// The page where staff give their browser a bypass token for `room`: a form that posts it
/// back, with `note` (why a token was refused), in the visitor's language.
pub fn staff_form(lang: Lang, room: &str, note: Option<&str>) -> String {
    let t = texts(lang);
    render(&StaffPage {
        lang: lang.tag(),
        title: t.staff_title,
        t,
        colon: lang.colon(),
        room,
        note,
        intro: esc(t.staff_intro).replace("{room}", &format!("<b>{}</b>", esc(room))),
    })
}

#[derive(Template)]
#[template(path = "too_many.html")]
struct TooManyPage {
    lang: &'static str,
    title: &'static str,
    t: &'static Texts,
    retry_secs: u64,
}

/// The page for a browser whose network sent too many requests, reloading after `retry_secs`.
pub(crate) fn too_many_html(lang: Lang, retry_secs: u64) -> String {
    let t = texts(lang);
    render(&TooManyPage {
        lang: lang.tag(),
        title: t.sorry,
        t,
        retry_secs,
    })
}

#[derive(Template)]
#[template(path = "landing.html")]
struct Landing<'a> {
    lang: &'static str,
    title: &'static str,
    demo_room: Option<&'a str>,
}

/// The landing page of a node.
pub fn landing(demo_room: Option<&str>) -> String {
    render(&Landing {
        lang: Lang::En.tag(),
        title: "Sluice",
        demo_room,
    })
}

#[derive(Template)]
#[template(path = "demo_shop.html")]
struct DemoShop<'a> {
    lang: &'static str,
    title: &'static str,
    room: &'a str,
    admitted: bool,
}

/// The demo's stand-in for a shop (`sluice dev`): what an admitted visitor of `room` reaches,
/// or, for anyone else, the way to its line.
pub fn demo_shop(room: &str, admitted: bool) -> String {
    render(&DemoShop {
        lang: Lang::En.tag(),
        title: "Demo shop",
        room,
        admitted,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_well() {
        let en = &texts(Lang::En).units;
        assert_eq!(fmt_wait(en, Some(200), Some(250), "?"), "4 min – 5 min");
        assert_eq!(fmt_wait(en, Some(181), Some(200), "?"), "4 min");
        assert_eq!(fmt_wait(en, Some(5), None, "?"), "5 s");
        assert_eq!(fmt_wait(en, None, Some(5), "?"), "?");
        let ja = &texts(Lang::Ja).units;
        assert_eq!(fmt_wait(ja, Some(200), Some(250), "?"), "4分 – 5分");
    }
}
