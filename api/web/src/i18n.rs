//! The waiting page's words in fifteen languages, chosen by `?lang=` or `Accept-Language`,
//! and the language switcher that links the page in each of them.

use sluice_ops::text::esc;

/// A supported language.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Lang {
    /// English (the default).
    En,
    /// German.
    De,
    /// French.
    Fr,
    /// Spanish.
    Es,
    /// Italian.
    It,
    /// Portuguese.
    Pt,
    /// Dutch.
    Nl,
    /// Polish.
    Pl,
    /// Swedish.
    Sv,
    /// Danish.
    Da,
    /// Norwegian Bokmål (also served for `no` and Nynorsk, `nn`).
    Nb,
    /// Finnish.
    Fi,
    /// Czech.
    Cs,
    /// Japanese.
    Ja,
    /// Turkish.
    Tr,
}

/// The longest language tag [`Lang::from_tag`] reads (RFC 5646 advises supporting 35).
const MAX_TAG: usize = 35;

impl Lang {
    /// Every language, in the order a switcher lists them: by their own names, alphabetically.
    pub const ALL: [Lang; 15] = [
        Lang::Cs,
        Lang::Da,
        Lang::De,
        Lang::En,
        Lang::Es,
        Lang::Fr,
        Lang::It,
        Lang::Nl,
        Lang::Nb,
        Lang::Pl,
        Lang::Pt,
        Lang::Fi,
        Lang::Sv,
        Lang::Tr,
        Lang::Ja,
    ];

    /// The BCP 47 tag.
    pub fn tag(self) -> &'static str {
        match self {
            Lang::En => "en",
            Lang::De => "de",
            Lang::Fr => "fr",
            Lang::Es => "es",
            Lang::It => "it",
            Lang::Pt => "pt",
            Lang::Nl => "nl",
            Lang::Pl => "pl",
            Lang::Sv => "sv",
            Lang::Da => "da",
            Lang::Nb => "nb",
            Lang::Fi => "fi",
            Lang::Cs => "cs",
            Lang::Ja => "ja",
            Lang::Tr => "tr",
        }
    }

    /// The language's name in itself, as a switcher shows it.
    pub fn endonym(self) -> &'static str {
        match self {
            Lang::En => "English",
            Lang::De => "Deutsch",
            Lang::Fr => "Français",
            Lang::Es => "Español",
            Lang::It => "Italiano",
            Lang::Pt => "Português",
            Lang::Nl => "Nederlands",
            Lang::Pl => "Polski",
            Lang::Sv => "Svenska",
            Lang::Da => "Dansk",
            Lang::Nb => "Norsk bokmål",
            Lang::Fi => "Suomi",
            Lang::Cs => "Čeština",
            Lang::Ja => "日本語",
            Lang::Tr => "Türkçe",
        }
    }

    /// What follows a label before its value: ": " in most languages, a narrow no-break space
    /// before the colon in French, a full-width colon in Japanese.
    pub fn colon(self) -> &'static str {
        match self {
            Lang::Fr => "\u{202f}: ",
            Lang::Ja => "：",
            _ => ": ",
        }
    }

    /// The language of a BCP 47 tag by its primary subtag, case-insensitively: `de`, `de-AT`,
    /// `pt-BR`, `nb-NO`; `no` and `nn` are served Bokmål; `_` is taken for `-`. `None` for a
    /// language without texts, and for anything that is not a well-formed tag of at most 35
    /// bytes.
    pub fn from_tag(tag: &str) -> Option<Lang> {
        if tag.is_empty() || tag.len() > MAX_TAG {
            return None;
        }
        let mut subtags = tag.split(['-', '_']);
        let primary = subtags.next()?;
        let well_formed = (2..=3).contains(&primary.len())
            && primary.bytes().all(|b| b.is_ascii_alphabetic())
            && subtags.all(|s| {
                (1..=8).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_alphanumeric())
            });
        if !well_formed {
            return None;
        }
        Some(match primary.to_ascii_lowercase().as_str() {
            "en" => Lang::En,
            "de" => Lang::De,
            "fr" => Lang::Fr,
            "es" => Lang::Es,
            "it" => Lang::It,
            "pt" => Lang::Pt,
            "nl" => Lang::Nl,
            "pl" => Lang::Pl,
            "sv" => Lang::Sv,
            "da" => Lang::Da,
            "nb" | "no" | "nn" => Lang::Nb,
            "fi" => Lang::Fi,
            "cs" => Lang::Cs,
            "ja" => Lang::Ja,
            "tr" => Lang::Tr,
            _ => return None,
        })
    }

    /// The best match for an `Accept-Language` header: the supported language with the highest
    /// quality value (the first listed among equals; `q=0` never), else English. Reads at most
    /// 32 entries.
    pub fn negotiate(header: Option<&str>) -> Lang {
        let mut best = (Lang::En, 0.0f32);
        for part in header.unwrap_or("").split(',').take(32) {
            let mut it = part.split(';');
            let Some(lang) = Lang::from_tag(it.next().unwrap_or("").trim()) else {
                continue;
            };
            let q = it
                .find_map(|p| {
                    let p = p.trim();
                    let v = p.strip_prefix("q=").or_else(|| p.strip_prefix("Q="))?;
                    Some(
                        v.trim()
                            .parse::<f32>()
                            .ok()
                            .filter(|q| q.is_finite())
                            .map_or(0.0, |q| q.clamp(0.0, 1.0)),
                    )
                })
                .unwrap_or(1.0);
            if q > best.1 {
                best = (lang, q);
            }
        }
        best.0
    }

    /// The visitor's language: a supported `?lang=` (the switcher's choice), else the
    /// negotiation of `Accept-Language`.
    pub fn choose(param: Option<&str>, accept_language: Option<&str>) -> Lang {
        param
            .and_then(Lang::from_tag)
            .unwrap_or_else(|| Lang::negotiate(accept_language))
    }

    /// The plural category of the whole number `n` in this language (CLDR's rules, which are
    /// also those of the browsers' `Intl.PluralRules`).
    pub fn plural(self, n: u64) -> PluralCategory {
        match self {
            Lang::Ja => PluralCategory::Other,
            Lang::Fr | Lang::Pt if n <= 1 => PluralCategory::One,
            Lang::Fr | Lang::Pt => PluralCategory::Other,
            Lang::Pl if n == 1 => PluralCategory::One,
            Lang::Pl if (2..=4).contains(&(n % 10)) && !(12..=14).contains(&(n % 100)) => {
                PluralCategory::Few
            }
            Lang::Pl => PluralCategory::Many,
            Lang::Cs => match n {
                1 => PluralCategory::One,
                2..=4 => PluralCategory::Few,
                _ => PluralCategory::Other,
            },
            _ if n == 1 => PluralCategory::One,
            _ => PluralCategory::Other,
        }
    }
}

/// A plural category (CLDR's names, for whole numbers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PluralCategory {
    /// One (in French and Portuguese also zero).
    One,
    /// A few (Polish 2–4, 22–24, …; Czech 2–4).
    Few,
    /// Many (Polish 0, 5–21, 25–31, …).
    Many,
    /// Everything else.
    Other,
}

impl PluralCategory {
    /// CLDR's name, as `Intl.PluralRules.prototype.select` returns it.
    pub fn as_str(self) -> &'static str {
        match self {
            PluralCategory::One => "one",
            PluralCategory::Few => "few",
            PluralCategory::Many => "many",
            PluralCategory::Other => "other",
        }
    }
}

/// The units of a duration in a language, short forms as the language writes them, each with
/// `{n}` where the number goes ("{n} min", "{n}分").
#[derive(Debug)]
pub struct Units {
    pub s: &'static str,
    pub min: &'static str,
    pub h: &'static str,
    pub d: &'static str,
}

impl Units {
    /// A duration as a visitor reads it: seconds under a minute, whole minutes (rounded up)
    /// under an hour, hours and minutes under a day, then days and hours.
    pub fn fmt(&self, secs: u64) -> String {
        let n = |unit: &str, n: u64| unit.replace("{n}", &n.to_string());
        match secs {
            s if s < 60 => n(self.s, s),
            s if s < 3_600 => n(self.min, s.div_ceil(60)),
            s if s < 86_400 => format!("{} {}", n(self.h, s / 3_600), n(self.min, s % 3_600 / 60)),
            s => format!(
                "{} {}",
                n(self.d, s / 86_400),
                n(self.h, s % 86_400 / 3_600)
            ),
        }
    }

    /// The four, `|`-separated, for the page's script.
    pub fn joined(&self) -> String {
        [self.s, self.min, self.h, self.d].join("|")
    }
}

/// A text that counts something, in each plural form of its language: `{n}` stands for the
/// number. Languages with two forms repeat `other` as `few` and `many`.
#[derive(Debug)]
pub struct Plural {
    /// The form for [`PluralCategory::One`].
    pub one: &'static str,
    /// The form for [`PluralCategory::Few`].
    pub few: &'static str,
    /// The form for [`PluralCategory::Many`].
    pub many: &'static str,
    /// The form for [`PluralCategory::Other`].
    pub other: &'static str,
}

impl Plural {
    const fn two(one: &'static str, other: &'static str) -> Plural {
        Plural {
            one,
            few: other,
            many: other,
            other,
        }
    }

    /// The form of `category`, with its `{n}` still in it.
    pub fn get(&self, category: PluralCategory) -> &'static str {
        match category {
            PluralCategory::One => self.one,
            PluralCategory::Few => self.few,
            PluralCategory::Many => self.many,
            PluralCategory::Other => self.other,
        }
    }
}

/// "N people ahead of you" in `lang`, in the plural form `n` takes (plain text: escape it
/// before it goes into HTML).
pub fn people_ahead(lang: Lang, n: u64) -> String {
    texts(lang)
        .people_ahead
        .get(lang.plural(n))
        .replace("{n}", &n.to_string())
}

/// The language switcher: a `<nav>` labelled in `current`'s language, with a link per language
/// (its own name, `hreflang` and `lang`) to `path` with `lang=` first and `query`'s other pairs
/// after it, `next` last. Give the pairs decoded: every key and value is percent-encoded whole
/// (`/` too, so that a `next` is never read as the raw rest of the query), and every attribute
/// HTML-escaped. A `lang` pair in `query` is replaced. The current language's link has
/// `aria-current="true"`. Works without JavaScript.
pub fn switcher(current: Lang, path: &str, query: &[(&str, &str)]) -> String {
    let pairs = query
        .iter()
        .filter(|(k, _)| !k.is_empty() && *k != "lang" && *k != "next")
        .chain(query.iter().filter(|(k, _)| *k == "next"));
    let mut rest = String::new();
    for (k, v) in pairs {
        rest.push('&');
        rest.push_str(&percent(k, b""));
        rest.push('=');
        rest.push_str(&percent(v, b""));
    }
    let path = percent(path, b"/");
    let mut out = format!(
        "<nav class=\"langs\" aria-label=\"{}\"><ul style=\"list-style:none;padding:0;margin:2rem 0 0;\
display:flex;flex-wrap:wrap;gap:.25rem 1rem;font-size:.9rem\">",
        esc(texts(current).language)
    );
    for lang in Lang::ALL {
        let here = if lang == current {
            " aria-current=\"true\" style=\"font-weight:700\""
        } else {
            ""
        };
        out.push_str(&format!(
            "<li><a href=\"{}\" hreflang=\"{tag}\" lang=\"{tag}\"{here}>{}</a></li>",
            esc(&format!("{path}?lang={}{rest}", lang.tag())),
            esc(lang.endonym()),
            tag = lang.tag(),
        ));
    }
    out.push_str("</ul></nav>");
    out
}

/// `s` percent-encoded (UTF-8), all but the unreserved characters of RFC 3986 and `keep`.
fn percent(s: &str, keep: &[u8]) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) || keep.contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The texts of the waiting page. None holds HTML: `<`, `>`, `&` and `"` never occur, so that
/// a text may go into a page as it is.
#[derive(Debug)]
pub struct Texts {
    /// Heading while waiting.
    pub in_line: &'static str,
    /// Advice to keep the page open.
    pub keep_open: &'static str,
    /// Label of the position.
    pub your_place: &'static str,
    /// Label of the ETA.
    pub estimated_wait: &'static str,
    /// An ETA that cannot be given.
    pub unknown: &'static str,
    /// Explanation of lottery mode.
    pub lottery: &'static str,
    /// Label of the number of people waiting.
    pub people_waiting: &'static str,
    /// Before a shuffled opening: places are drawn at the opening.
    pub drawn_at_open: &'static str,
    /// Countdown label before opening.
    pub opens_in: &'static str,
    /// The room is closed.
    pub closed: &'static str,
    /// The room takes no newcomers.
    pub not_taking: &'static str,
    /// The line is full.
    pub full: &'static str,
    /// The place ended.
    pub ended: &'static str,
    /// Button to join again.
    pub rejoin: &'static str,
    /// Admitted.
    pub your_turn: &'static str,
    /// Link to continue.
    pub continue_: &'static str,
    /// Heading of error pages.
    pub sorry: &'static str,
    /// Label of the progress bar.
    pub progress: &'static str,
    /// Busy / try again.
    pub busy: &'static str,
    /// Heading of the page that asks the visitor to join.
    pub join_title: &'static str,
    /// What joining does.
    pub join_intro: &'static str,
    /// The button that joins.
    pub join_button: &'static str,
    /// Joined, but the browser kept no cookie.
    pub cookies_blocked: &'static str,
    /// This network holds its share of places.
    pub place_limit: &'static str,
    /// The browser is solving the room's proof-of-work.
    pub pow_working: &'static str,
    /// The room asks a proof-of-work, which needs JavaScript (and a secure connection).
    pub challenge_needs_script: &'static str,
    /// The proof-of-work did not verify.
    pub challenge_invalid: &'static str,
    /// The room is for the shop's signed-in customers, and this visitor brought no (valid)
    /// assertion.
    pub identity_required: &'static str,
    /// Label of the access-code field.
    pub code_label: &'static str,
    /// The button that redeems a code.
    pub code_button: &'static str,
    /// Invitation to redeem a code while waiting.
    pub code_have: &'static str,
    /// The room is by invitation only.
    pub invite_only: &'static str,
    /// The code is not valid here.
    pub code_invalid: &'static str,
    /// The code has been used.
    pub code_used_up: &'static str,
    /// The code has expired.
    pub code_expired: &'static str,
    /// Label of the visitor's lane.
    pub your_lane: &'static str,
    /// Label of the waiters in the lanes before the visitor's.
    pub ahead_in_lanes: &'static str,
    /// Heading of the staff entry page.
    pub staff_title: &'static str,
    /// What the staff entry page does ({room} is replaced by the room).
    pub staff_intro: &'static str,
    /// Label of the staff token field.
    pub staff_token: &'static str,
    /// The button that enters with a staff token.
    pub staff_enter: &'static str,
    /// A staff token that does not let its holder in (the reason follows).
    pub staff_refused: &'static str,
    /// Why the wait is unknown: the room is paused.
    pub why_paused: &'static str,
    /// Why the wait is unknown: the site is down.
    pub why_origin_down: &'static str,
    /// Why a waiter is passed over for now: its network holds its share of sessions.
    pub why_held: &'static str,
    /// The visitor's place was lost by not checking in.
    pub away_too_long: &'static str,
    /// Label of the language switcher.
    pub language: &'static str,
    /// Label of the time the page's figures were last updated.
    pub last_updated: &'static str,
    /// Said when the page has heard nothing from the node for a while.
    pub no_news: &'static str,
    /// A waiting-room address that names no room (a mistyped link).
    pub not_found: &'static str,
    /// The visitor's network sent too many requests (HTTP 429); the place is kept.
    pub too_many: &'static str,
    /// Link back to the protected site.
    pub back_to_site: &'static str,
    /// Link on a closed room's page to the organiser's page about what follows.
    pub after_event: &'static str,
    /// Accessible label of the organiser's live message on the waiting page.
    pub notice_heading: &'static str,
    /// The room's draws are committed in advance ({c} is replaced by the commitment's start).
    pub draw_committed: &'static str,
    /// The summary that opens what a draw commitment means.
    pub draw_what: &'static str,
    /// What a draw commitment means.
    pub draw_explained: &'static str,
    /// The units of a waiting time: see [`Units`].
    pub units: Units,
    /// The people ahead of the visitor ({n}): see [`people_ahead`].
    pub people_ahead: Plural,
}

/// The texts in `lang`.
pub fn texts(lang: Lang) -> &'static Texts {
    match lang {
        Lang::En => &EN,
        Lang::De => &DE,
        Lang::Fr => &FR,
        Lang::Es => &ES,
        Lang::It => &IT,
        Lang::Pt => &PT,
        Lang::Nl => &NL,
        Lang::Pl => &PL,
        Lang::Sv => &SV,
        Lang::Da => &DA,
        Lang::Nb => &NB,
        Lang::Fi => &FI,
        Lang::Cs => &CS,
        Lang::Ja => &JA,
        Lang::Tr => &TR,
    }
}

static EN: Texts = Texts {
    in_line: "You are in line",
    keep_open: "Keep this page open. It moves you on by itself when it is your turn.",
    your_place: "Your place in line",
    estimated_wait: "Estimated wait",
    unknown: "unknown",
    people_waiting: "People in line",
    drawn_at_open: "Places are drawn by lot when the room opens: any place shown before then is provisional.",
    lottery: "Visitors are chosen by lottery: everyone waiting has the same chance.",
    opens_in: "Opens in",
    closed: "This room is closed.",
    not_taking: "This room is not taking new visitors right now.",
    full: "The line is full. Please try again in a moment.",
    ended: "Your place in line has ended.",
    rejoin: "Join the line again",
    your_turn: "It is your turn!",
    continue_: "Continue",
    sorry: "Sorry",
    progress: "Progress",
    busy: "We are busy. Please try again in a moment.",
    join_title: "Join the line",
    join_intro: "Press the button to take your place in line. Keep this page open afterwards: it moves you on by itself when it is your turn.",
    join_button: "Join the line",
    cookies_blocked: "Your browser did not keep the cookie that holds your place. Please allow cookies for this site, then press the button again.",
    place_limit: "Your network holds as many places in this line as one network may. Please try again once one of them has ended.",
    pow_working: "Checking your browser before it joins the line. This takes a few seconds; please keep this page open.",
    challenge_needs_script: "This line asks your browser to solve a small puzzle before it gives a place, so that bots cannot take the places of people. That needs JavaScript (and a secure connection): please turn JavaScript on, then join again.",
    challenge_invalid: "The check of your browser did not succeed. Please join again to try once more.",
    identity_required: "This line is for signed-in customers. Please sign in at the shop, then follow its link to the line again.",
    code_label: "Access code",
    code_button: "Use the code",
    code_have: "Have an access code? Enter it to move to the line it is for.",
    invite_only: "This line is by invitation only. Enter the access code from your invitation.",
    code_invalid: "This access code is not valid here. Please check it and try again.",
    code_used_up: "This access code has been used as often as it may be.",
    code_expired: "This access code has expired.",
    your_lane: "Your line",
    ahead_in_lanes: "In the lines before yours",
    staff_title: "Staff entry",
    staff_intro: "Paste the staff bypass token you were given. This browser then passes the waiting room of {room} until the token expires or is revoked; it takes no place in line.",
    staff_token: "Token",
    staff_enter: "Enter",
    staff_refused: "This token does not let you in:",
    why_paused: "The line is paused for the moment, so no waiting time can be given. Your place is kept.",
    why_origin_down: "The site is not taking visitors right now, so no waiting time can be given. Your place is kept.",
    why_held: "Your network (your address) already holds as many admissions as this room allows one network, so others go in past you for now and no waiting time can be given. Your place is kept: you go in when one of those admissions ends.",
    away_too_long: "You were away too long and lost your place in line. Join again to take a new place at its end. On a phone, keep this page open while you wait.",
    language: "Language",
    last_updated: "Last updated",
    no_news: "No news from the waiting room for a while: check your connection. This page keeps trying.",
    not_found: "There is no waiting room at this address. Check the link you followed, or go back to the site.",
    too_many: "Too many requests came from your network just now. Wait a moment, then reload this page; your place in line is kept.",
    back_to_site: "Back to the site",
    after_event: "What happens next",
    notice_heading: "Message from the organiser",
    draw_committed: "This draw is committed in advance to {c}.",
    draw_what: "What this means",
    draw_explained: "Before any place is drawn, the room publishes this fingerprint of the secret that decides its draws. When the draws are over, the secret itself is published: anyone can then check that it matches the fingerprint and redo every draw. So the draw cannot be changed once this fingerprint has been shown.",
    units: Units {
        s: "{n} s",
        min: "{n} min",
        h: "{n} h",
        d: "{n} d",
    },
    people_ahead: Plural::two("{n} person ahead of you", "{n} people ahead of you"),
};

static DE: Texts = Texts {
    in_line: "Sie sind in der Warteschlange",
    keep_open: "Lassen Sie diese Seite geöffnet. Sie werden automatisch weitergeleitet, sobald Sie an der Reihe sind.",
    your_place: "Ihr Platz in der Warteschlange",
    estimated_wait: "Geschätzte Wartezeit",
    unknown: "unbekannt",
    people_waiting: "Personen in der Warteschlange",
    drawn_at_open: "Die Plätze werden bei der Öffnung ausgelost: Jede vorher gezeigte Platzierung ist vorläufig.",
    lottery: "Die Auswahl erfolgt per Losverfahren: Alle Wartenden haben die gleiche Chance.",
    opens_in: "Öffnet in",
    closed: "Dieser Raum ist geschlossen.",
    not_taking: "Dieser Raum nimmt gerade keine neuen Besucher auf.",
    full: "Die Warteschlange ist voll. Bitte versuchen Sie es gleich noch einmal.",
    ended: "Ihr Platz in der Warteschlange ist abgelaufen.",
    rejoin: "Erneut anstellen",
    your_turn: "Sie sind an der Reihe!",
    continue_: "Weiter",
    sorry: "Entschuldigung",
    progress: "Fortschritt",
    busy: "Gerade ist viel los. Bitte versuchen Sie es gleich noch einmal.",
    join_title: "In die Warteschlange",
    join_intro: "Drücken Sie die Schaltfläche, um sich anzustellen. Lassen Sie die Seite danach geöffnet: Sie werden automatisch weitergeleitet, sobald Sie an der Reihe sind.",
    join_button: "Anstellen",
    cookies_blocked: "Ihr Browser hat das Cookie, das Ihren Platz hält, nicht gespeichert. Bitte erlauben Sie Cookies für diese Seite und drücken Sie die Schaltfläche erneut.",
    place_limit: "Ihr Netzwerk hält bereits so viele Plätze in dieser Warteschlange, wie ein Netzwerk halten darf. Bitte versuchen Sie es erneut, sobald einer davon abgelaufen ist.",
    pow_working: "Ihr Browser wird geprüft, bevor er sich anstellt. Das dauert einige Sekunden; bitte lassen Sie die Seite geöffnet.",
    challenge_needs_script: "Diese Warteschlange lässt Ihren Browser eine kleine Rechenaufgabe lösen, bevor sie einen Platz vergibt, damit Bots Menschen keine Plätze wegnehmen. Dafür ist JavaScript nötig (und eine sichere Verbindung): Bitte aktivieren Sie JavaScript und stellen Sie sich erneut an.",
    challenge_invalid: "Die Prüfung Ihres Browsers ist nicht gelungen. Bitte stellen Sie sich erneut an, um es noch einmal zu versuchen.",
    identity_required: "Diese Warteschlange ist für angemeldete Kundinnen und Kunden. Bitte melden Sie sich im Shop an und folgen Sie dann erneut seinem Link zur Warteschlange.",
    code_label: "Zugangscode",
    code_button: "Code einlösen",
    code_have: "Sie haben einen Zugangscode? Geben Sie ihn ein, um in die Warteschlange zu wechseln, für die er gilt.",
    invite_only: "Diese Warteschlange ist nur mit Einladung zugänglich. Geben Sie den Zugangscode aus Ihrer Einladung ein.",
    code_invalid: "Dieser Zugangscode gilt hier nicht. Bitte prüfen Sie ihn und versuchen Sie es erneut.",
    code_used_up: "Dieser Zugangscode wurde so oft verwendet, wie er darf.",
    code_expired: "Dieser Zugangscode ist abgelaufen.",
    your_lane: "Ihre Warteschlange",
    ahead_in_lanes: "In den Warteschlangen vor Ihrer",
    staff_title: "Eingang für Mitarbeitende",
    staff_intro: "Fügen Sie das Umgehungs-Token ein, das Sie erhalten haben. Dieser Browser passiert dann den Warteraum von {room}, bis das Token abläuft oder widerrufen wird; er nimmt keinen Platz in der Warteschlange ein.",
    staff_token: "Token",
    staff_enter: "Eintreten",
    staff_refused: "Dieses Token lässt Sie nicht hinein:",
    why_paused: "Die Warteschlange ist im Moment angehalten, daher lässt sich keine Wartezeit angeben. Ihr Platz bleibt erhalten.",
    why_origin_down: "Die Website nimmt gerade keine Besucher an, daher lässt sich keine Wartezeit angeben. Ihr Platz bleibt erhalten.",
    why_held: "Ihr Netzwerk (Ihre Adresse) hat bereits so viele Zutritte, wie dieser Raum einem Netzwerk erlaubt. Deshalb kommen andere vorerst vor Ihnen an die Reihe, und es lässt sich keine Wartezeit angeben. Ihr Platz bleibt erhalten: Sie kommen dran, sobald einer dieser Zutritte endet.",
    away_too_long: "Sie waren zu lange weg und haben Ihren Platz in der Warteschlange verloren. Stellen Sie sich erneut an, um einen neuen Platz am Ende zu erhalten. Lassen Sie diese Seite auf dem Telefon geöffnet, während Sie warten.",
    language: "Sprache",
    last_updated: "Zuletzt aktualisiert",
    no_news: "Seit einer Weile keine Nachricht vom Warteraum: Prüfen Sie Ihre Verbindung. Diese Seite versucht es weiter.",
    not_found: "Unter dieser Adresse gibt es keinen Warteraum. Prüfen Sie den Link, dem Sie gefolgt sind, oder kehren Sie zur Website zurück.",
    too_many: "Aus Ihrem Netzwerk kamen eben zu viele Anfragen. Warten Sie einen Moment und laden Sie diese Seite dann neu; Ihr Platz in der Warteschlange bleibt erhalten.",
    back_to_site: "Zurück zur Website",
    after_event: "Wie es weitergeht",
    notice_heading: "Nachricht des Veranstalters",
    draw_committed: "Diese Auslosung ist im Voraus festgelegt: {c}.",
    draw_what: "Was das bedeutet",
    draw_explained: "Bevor ein Platz ausgelost wird, veröffentlicht der Raum diesen Fingerabdruck des Geheimnisses, das über seine Auslosungen entscheidet. Sind die Auslosungen vorbei, wird das Geheimnis selbst veröffentlicht: Dann kann jede Person prüfen, dass es zum Fingerabdruck passt, und jede Auslosung nachrechnen. Die Auslosung lässt sich also nicht mehr ändern, sobald dieser Fingerabdruck gezeigt wurde.",
    units: Units {
        s: "{n} Sek.",
        min: "{n} Min.",
        h: "{n} Std.",
        d: "{n} Tg.",
    },
    people_ahead: Plural::two("{n} Person vor Ihnen", "{n} Personen vor Ihnen"),
};

static FR: Texts = Texts {
    in_line: "Vous êtes dans la file",
    keep_open: "Gardez cette page ouverte\u{202f}: elle vous redirige d’elle-même quand c’est votre tour.",
    your_place: "Votre place dans la file",
    estimated_wait: "Attente estimée",
    unknown: "inconnue",
    people_waiting: "Personnes dans la file",
    drawn_at_open: "Les places sont tirées au sort à l’ouverture\u{202f}: toute place affichée avant est provisoire.",
    lottery: "Les visiteurs sont tirés au sort\u{202f}: chaque personne en attente a la même chance.",
    opens_in: "Ouverture dans",
    closed: "Cette salle est fermée.",
    not_taking: "Cette salle n’accepte pas de nouveaux visiteurs pour le moment.",
    full: "La file est pleine. Veuillez réessayer dans un instant.",
    ended: "Votre place dans la file a expiré.",
    rejoin: "Rejoindre la file",
    your_turn: "C’est votre tour\u{202f}!",
    continue_: "Continuer",
    sorry: "Désolé",
    progress: "Progression",
    busy: "Nous sommes très sollicités. Veuillez réessayer dans un instant.",
    join_title: "Rejoindre la file",
    join_intro: "Appuyez sur le bouton pour prendre votre place dans la file. Gardez ensuite cette page ouverte\u{202f}: elle vous redirige d’elle-même quand c’est votre tour.",
    join_button: "Rejoindre la file",
    cookies_blocked: "Votre navigateur n’a pas gardé le cookie qui retient votre place. Autorisez les cookies pour ce site, puis appuyez à nouveau sur le bouton.",
    place_limit: "Votre réseau détient déjà autant de places dans cette file qu’un réseau le peut. Réessayez quand l’une d’elles aura pris fin.",
    pow_working: "Vérification de votre navigateur avant qu’il rejoigne la file. Cela prend quelques secondes\u{202f}; gardez cette page ouverte.",
    challenge_needs_script: "Cette file demande à votre navigateur de résoudre un petit calcul avant de donner une place, pour que des robots ne prennent pas la place des personnes. Il faut pour cela JavaScript (et une connexion sécurisée)\u{202f}: activez JavaScript, puis rejoignez à nouveau la file.",
    challenge_invalid: "La vérification de votre navigateur n’a pas abouti. Rejoignez à nouveau la file pour réessayer.",
    identity_required: "Cette file est réservée aux clients connectés. Connectez-vous à la boutique, puis suivez à nouveau son lien vers la file.",
    code_label: "Code d’accès",
    code_button: "Utiliser le code",
    code_have: "Vous avez un code d’accès\u{202f}? Saisissez-le pour passer dans la file à laquelle il donne droit.",
    invite_only: "Cette file est réservée aux invités. Saisissez le code d’accès de votre invitation.",
    code_invalid: "Ce code d’accès n’est pas valable ici. Vérifiez-le et réessayez.",
    code_used_up: "Ce code d’accès a déjà été utilisé autant de fois que permis.",
    code_expired: "Ce code d’accès a expiré.",
    your_lane: "Votre file",
    ahead_in_lanes: "Dans les files avant la vôtre",
    staff_title: "Entrée du personnel",
    staff_intro: "Collez le jeton de contournement que vous avez reçu. Ce navigateur passe alors la salle d’attente de {room} jusqu’à ce que le jeton expire ou soit révoqué\u{202f}; il ne prend aucune place dans la file.",
    staff_token: "Jeton",
    staff_enter: "Entrer",
    staff_refused: "Ce jeton ne vous fait pas entrer\u{202f}:",
    why_paused: "La file est en pause pour le moment\u{202f}: aucune durée d’attente ne peut être donnée. Votre place est conservée.",
    why_origin_down: "Le site n’accueille pas de visiteurs pour le moment\u{202f}: aucune durée d’attente ne peut être donnée. Votre place est conservée.",
    why_held: "Votre réseau (votre adresse) a déjà autant d’accès que cette salle en permet à un réseau\u{202f}: d’autres passent avant vous pour le moment et aucune durée d’attente ne peut être donnée. Votre place est conservée\u{202f}: vous entrerez dès que l’un de ces accès prendra fin.",
    away_too_long: "Votre absence a duré trop longtemps et vous avez perdu votre place. Rejoignez la file pour prendre une nouvelle place à la fin. Sur un téléphone, gardez cette page ouverte pendant l’attente.",
    language: "Langue",
    last_updated: "Dernière mise à jour",
    no_news: "Aucune nouvelle de la salle d’attente depuis un moment\u{202f}: vérifiez votre connexion. Cette page continue d’essayer.",
    not_found: "Il n’y a pas de salle d’attente à cette adresse. Vérifiez le lien que vous avez suivi ou revenez sur le site.",
    too_many: "Trop de requêtes sont venues de votre réseau à l’instant. Patientez un moment, puis rechargez cette page\u{202f}; votre place dans la file est conservée.",
    back_to_site: "Retour au site",
    after_event: "La suite",
    notice_heading: "Message de l’organisateur",
    draw_committed: "Ce tirage est fixé à l’avance\u{202f}: {c}.",
    draw_what: "Ce que cela signifie",
    draw_explained: "Avant tout tirage, la salle publie cette empreinte du secret qui décide de ses tirages. Une fois les tirages terminés, le secret lui-même est publié\u{202f}: chacun peut alors vérifier qu’il correspond à l’empreinte et refaire chaque tirage. Le tirage ne peut donc plus être modifié une fois cette empreinte affichée.",
    units: Units {
        s: "{n} s",
        min: "{n} min",
        h: "{n} h",
        d: "{n} j",
    },
    people_ahead: Plural::two("{n} personne devant vous", "{n} personnes devant vous"),
};

static ES: Texts = Texts {
    in_line: "Está en la fila",
    keep_open: "Mantenga esta página abierta: le llevará automáticamente cuando sea su turno.",
    your_place: "Su lugar en la fila",
    estimated_wait: "Espera estimada",
    unknown: "desconocida",
    people_waiting: "Personas en la fila",
    drawn_at_open: "Los puestos se sortean al abrir la sala: cualquier puesto mostrado antes es provisional.",
    lottery:
        "Los visitantes se eligen por sorteo: todos los que esperan tienen la misma oportunidad.",
    opens_in: "Abre en",
    closed: "Esta sala está cerrada.",
    not_taking: "Esta sala no admite nuevos visitantes en este momento.",
    full: "La fila está llena. Vuelva a intentarlo en un momento.",
    ended: "Su lugar en la fila ha terminado.",
    rejoin: "Volver a la fila",
    your_turn: "¡Es su turno!",
    continue_: "Continuar",
    sorry: "Lo sentimos",
    progress: "Progreso",
    busy: "Hay mucha demanda. Vuelva a intentarlo en un momento.",
    join_title: "Entrar en la fila",
    join_intro: "Pulse el botón para ocupar su lugar en la fila. Después mantenga esta página abierta: le llevará automáticamente cuando sea su turno.",
    join_button: "Entrar en la fila",
    cookies_blocked: "Su navegador no guardó la cookie que conserva su lugar. Permita las cookies para este sitio y vuelva a pulsar el botón.",
    place_limit: "Su red ya ocupa tantos lugares en esta fila como puede ocupar una red. Vuelva a intentarlo cuando uno de ellos haya terminado.",
    pow_working: "Comprobando su navegador antes de que entre en la fila. Tarda unos segundos; mantenga esta página abierta.",
    challenge_needs_script: "Esta fila pide a su navegador que resuelva un pequeño cálculo antes de dar un lugar, para que los robots no ocupen los lugares de las personas. Para ello hace falta JavaScript (y una conexión segura): active JavaScript y vuelva a entrar en la fila.",
    challenge_invalid: "La comprobación de su navegador no ha tenido éxito. Vuelva a entrar en la fila para intentarlo de nuevo.",
    identity_required: "Esta fila es para clientes que han iniciado sesión. Inicie sesión en la tienda y vuelva a seguir su enlace a la fila.",
    code_label: "Código de acceso",
    code_button: "Usar el código",
    code_have: "¿Tiene un código de acceso? Escríbalo para pasar a la fila a la que da derecho.",
    invite_only: "Esta fila es solo por invitación. Escriba el código de acceso de su invitación.",
    code_invalid: "Este código de acceso no es válido aquí. Compruébelo e inténtelo de nuevo.",
    code_used_up: "Este código de acceso ya se ha usado tantas veces como se permite.",
    code_expired: "Este código de acceso ha caducado.",
    your_lane: "Su fila",
    ahead_in_lanes: "En las filas antes de la suya",
    staff_title: "Entrada del personal",
    staff_intro: "Pegue el token de acceso que recibió. Este navegador pasará entonces la sala de espera de {room} hasta que el token caduque o sea revocado; no ocupa ningún lugar en la fila.",
    staff_token: "Token",
    staff_enter: "Entrar",
    staff_refused: "Este token no le deja entrar:",
    why_paused: "La fila está en pausa por el momento, así que no se puede dar un tiempo de espera. Su lugar se conserva.",
    why_origin_down: "El sitio no recibe visitantes en este momento, así que no se puede dar un tiempo de espera. Su lugar se conserva.",
    why_held: "Su red (su dirección) ya tiene tantos accesos como esta sala permite a una red, así que por ahora otros pasan antes y no se puede dar un tiempo de espera. Su lugar se conserva: entrará en cuanto termine uno de esos accesos.",
    away_too_long: "Estuvo ausente demasiado tiempo y perdió su lugar en la fila. Vuelva a unirse para tomar un nuevo lugar al final. En un teléfono, mantenga esta página abierta mientras espera.",
    language: "Idioma",
    last_updated: "Última actualización",
    no_news: "Hace un rato que no llegan noticias de la sala de espera: compruebe su conexión. Esta página sigue intentándolo.",
    not_found: "No hay ninguna sala de espera en esta dirección. Compruebe el enlace que siguió o vuelva al sitio.",
    too_many: "Acaban de llegar demasiadas solicitudes desde su red. Espere un momento y vuelva a cargar esta página; su lugar en la fila se conserva.",
    back_to_site: "Volver al sitio",
    after_event: "Qué pasa ahora",
    notice_heading: "Mensaje del organizador",
    draw_committed: "Este sorteo está fijado de antemano: {c}.",
    draw_what: "Qué significa esto",
    draw_explained: "Antes de sortear ninguna plaza, la sala publica esta huella del secreto que decide sus sorteos. Cuando terminan los sorteos, se publica el propio secreto: cualquiera puede comprobar entonces que coincide con la huella y repetir cada sorteo. Así, el sorteo ya no se puede cambiar una vez mostrada esta huella.",
    units: Units {
        s: "{n} s",
        min: "{n} min",
        h: "{n} h",
        d: "{n} d",
    },
    people_ahead: Plural::two("{n} persona delante de usted", "{n} personas delante de usted"),
};

static IT: Texts = Texts {
    in_line: "Sei in coda",
    keep_open: "Tieni aperta questa pagina. Quando sarà il tuo turno, ti porterà avanti da sola.",
    your_place: "Il tuo posto in coda",
    estimated_wait: "Attesa stimata",
    unknown: "non disponibile",
    people_waiting: "Persone in coda",
    drawn_at_open: "I posti vengono estratti a sorte all’apertura: qualsiasi posto mostrato prima è provvisorio.",
    lottery: "I visitatori vengono scelti tramite sorteggio: tutte le persone in attesa hanno la stessa probabilità.",
    opens_in: "Apre tra",
    closed: "Questa sala d’attesa è chiusa.",
    not_taking: "Al momento questa sala d’attesa non accetta nuovi visitatori.",
    full: "La coda è piena. Riprova tra un momento.",
    ended: "Il tuo posto in coda è scaduto.",
    rejoin: "Rimettiti in coda",
    your_turn: "È il tuo turno!",
    continue_: "Continua",
    sorry: "Spiacenti",
    progress: "Avanzamento",
    busy: "C’è molta richiesta in questo momento. Riprova tra un momento.",
    join_title: "Mettiti in coda",
    join_intro: "Premi il pulsante per prendere il tuo posto in coda. Poi tieni aperta questa pagina: quando sarà il tuo turno, ti porterà avanti da sola.",
    join_button: "Mettiti in coda",
    cookies_blocked: "Il tuo browser non ha conservato il cookie che tiene il tuo posto. Consenti i cookie per questo sito, poi premi di nuovo il pulsante.",
    place_limit: "La tua rete occupa già tutti i posti in questa coda consentiti a una singola rete. Riprova quando uno di questi sarà terminato.",
    pow_working: "Stiamo verificando il tuo browser prima che entri in coda. Ci vorrà qualche secondo; tieni aperta questa pagina.",
    challenge_needs_script: "Questa coda chiede al tuo browser di risolvere un piccolo calcolo prima di assegnare un posto, così i bot non possono prendere il posto delle persone. Serve JavaScript (e una connessione sicura): attiva JavaScript, poi rimettiti in coda.",
    challenge_invalid: "La verifica del tuo browser non è riuscita. Rimettiti in coda per riprovare.",
    identity_required: "Questa coda è riservata ai clienti che hanno effettuato l’accesso. Accedi al negozio, poi segui di nuovo il suo link alla coda.",
    code_label: "Codice di accesso",
    code_button: "Usa il codice",
    code_have: "Hai un codice di accesso? Inseriscilo per passare alla coda a cui dà diritto.",
    invite_only: "Questa coda è solo su invito. Inserisci il codice di accesso del tuo invito.",
    code_invalid: "Questo codice di accesso non è valido qui. Controllalo e riprova.",
    code_used_up: "Questo codice di accesso è già stato usato tutte le volte consentite.",
    code_expired: "Questo codice di accesso è scaduto.",
    your_lane: "La tua coda",
    ahead_in_lanes: "Nelle code prima della tua",
    staff_title: "Accesso per il personale",
    staff_intro: "Incolla il token di accesso diretto che hai ricevuto. Questo browser salterà poi la sala d’attesa di {room} finché il token non scade o non viene revocato; non occupa alcun posto in coda.",
    staff_token: "Token",
    staff_enter: "Entra",
    staff_refused: "Questo token non ti fa entrare:",
    why_paused: "La coda è in pausa per il momento, quindi non è possibile indicare un tempo di attesa. Il tuo posto è conservato.",
    why_origin_down: "Al momento il sito non accetta visitatori, quindi non è possibile indicare un tempo di attesa. Il tuo posto è conservato.",
    why_held: "La tua rete (il tuo indirizzo) ha già tanti accessi quanti questa sala ne consente a una rete, quindi per ora altri entrano prima di te e non è possibile indicare un tempo di attesa. Il tuo posto è conservato: entrerai appena uno di quegli accessi termina.",
    away_too_long: "La tua assenza è durata troppo a lungo e hai perso il tuo posto in coda. Rimettiti in coda per prendere un nuovo posto in fondo. Sul telefono, tieni aperta questa pagina mentre aspetti.",
    language: "Lingua",
    last_updated: "Ultimo aggiornamento",
    no_news: "Da un po’ nessuna notizia dalla sala d’attesa: controlla la connessione. Questa pagina continua a provare.",
    not_found: "Non c’è nessuna sala d’attesa a questo indirizzo. Controlla il link che hai seguito o torna al sito.",
    too_many: "Dalla tua rete sono appena arrivate troppe richieste. Attendi un momento, poi ricarica questa pagina; il tuo posto in coda è conservato.",
    back_to_site: "Torna al sito",
    after_event: "Cosa succede ora",
    notice_heading: "Messaggio dell’organizzatore",
    draw_committed: "Questo sorteggio è fissato in anticipo: {c}.",
    draw_what: "Che cosa significa",
    draw_explained: "Prima di sorteggiare qualsiasi posto, la sala pubblica questa impronta del segreto che decide i suoi sorteggi. Finiti i sorteggi, viene pubblicato il segreto stesso: chiunque può allora verificare che corrisponde all’impronta e rifare ogni sorteggio. Così il sorteggio non può più essere cambiato dopo che questa impronta è stata mostrata.",
    units: Units {
        s: "{n} s",
        min: "{n} min",
        h: "{n} h",
        d: "{n} g",
    },
    people_ahead: Plural::two("{n} persona davanti a te", "{n} persone davanti a te"),
};

static PT: Texts = Texts {
    in_line: "Está na fila",
    keep_open: "Mantenha esta página aberta. Quando chegar a sua vez, ela avança automaticamente.",
    your_place: "O seu lugar na fila",
    estimated_wait: "Tempo de espera estimado",
    unknown: "desconhecido",
    people_waiting: "Pessoas na fila",
    drawn_at_open: "Os lugares são sorteados na abertura: qualquer lugar mostrado antes disso é provisório.",
    lottery: "Os visitantes são escolhidos por sorteio: todos os que esperam têm a mesma probabilidade.",
    opens_in: "Abre em",
    closed: "Esta sala de espera está fechada.",
    not_taking: "Esta sala de espera não aceita novos visitantes neste momento.",
    full: "A fila está cheia. Tente novamente daqui a pouco.",
    ended: "O seu lugar na fila expirou.",
    rejoin: "Voltar à fila",
    your_turn: "Chegou a sua vez!",
    continue_: "Continuar",
    sorry: "Lamentamos",
    progress: "Progresso",
    busy: "Há muita procura neste momento. Tente novamente daqui a pouco.",
    join_title: "Entrar na fila",
    join_intro: "Clique no botão para ocupar o seu lugar na fila. Depois, mantenha esta página aberta: quando chegar a sua vez, ela avança automaticamente.",
    join_button: "Entrar na fila",
    cookies_blocked: "O seu navegador não guardou o cookie que mantém o seu lugar. Permita cookies para este site e clique novamente no botão.",
    place_limit: "A sua rede já ocupa tantos lugares nesta fila quanto uma rede pode ocupar. Tente novamente quando um deles terminar.",
    pow_working: "Antes de entrar na fila, o seu navegador é verificado. Isto demora alguns segundos; mantenha esta página aberta.",
    challenge_needs_script: "Esta fila pede ao seu navegador que resolva um pequeno cálculo antes de atribuir um lugar, para que robôs não ocupem os lugares das pessoas. Para isso, é necessário JavaScript (e uma conexão segura): ative o JavaScript e entre novamente na fila.",
    challenge_invalid: "A verificação do seu navegador não foi bem-sucedida. Entre novamente na fila para tentar outra vez.",
    identity_required: "Esta fila é para clientes com sessão iniciada. Inicie sessão na loja e siga novamente o link dela para a fila.",
    code_label: "Código de acesso",
    code_button: "Usar o código",
    code_have: "Tem um código de acesso? Insira-o para passar para a fila a que ele dá direito.",
    invite_only: "Esta fila é só para convidados. Insira o código de acesso do seu convite.",
    code_invalid: "Este código de acesso não é válido aqui. Verifique-o e tente novamente.",
    code_used_up: "Este código de acesso já foi usado tantas vezes quanto permitido.",
    code_expired: "Este código de acesso expirou.",
    your_lane: "A sua fila",
    ahead_in_lanes: "Nas filas antes da sua",
    staff_title: "Entrada de funcionários",
    staff_intro: "Cole o token de acesso direto que recebeu. Este navegador passa então a contornar a sala de espera de {room} até que o token expire ou seja revogado; não ocupa nenhum lugar na fila.",
    staff_token: "Token",
    staff_enter: "Entrar",
    staff_refused: "Este token não permite a sua entrada:",
    why_paused: "A fila está em pausa neste momento, por isso não é possível indicar um tempo de espera. O seu lugar está guardado.",
    why_origin_down: "O site não aceita visitantes neste momento, por isso não é possível indicar um tempo de espera. O seu lugar está guardado.",
    why_held: "A sua rede (o seu endereço) já tem tantos acessos quantos esta sala permite a uma rede, por isso, por agora, outros entram antes de si e não é possível indicar um tempo de espera. O seu lugar está guardado: entra assim que um desses acessos terminar.",
    away_too_long: "Esteve ausente tempo demais e perdeu o seu lugar na fila. Entre novamente para ocupar um novo lugar no fim. Num dispositivo móvel, mantenha esta página aberta enquanto espera.",
    language: "Idioma",
    last_updated: "Última atualização",
    no_news: "Há algum tempo sem notícias da sala de espera: verifique a sua ligação. Esta página continua a tentar.",
    not_found: "Não existe nenhuma sala de espera neste endereço. Verifique o link que seguiu ou volte ao site.",
    too_many: "Chegaram agora demasiados pedidos da sua rede. Aguarde um momento e depois recarregue esta página; o seu lugar na fila está guardado.",
    back_to_site: "Voltar ao site",
    after_event: "O que acontece a seguir",
    notice_heading: "Mensagem do organizador",
    draw_committed: "Este sorteio está fixado de antemão: {c}.",
    draw_what: "O que isto significa",
    draw_explained: "Antes de sortear qualquer lugar, a sala publica esta impressão digital do segredo que decide os seus sorteios. Quando os sorteios terminam, o próprio segredo é publicado: qualquer pessoa pode então verificar que corresponde à impressão digital e refazer cada sorteio. Assim, o sorteio já não pode ser alterado depois de esta impressão digital ter sido mostrada.",
    units: Units {
        s: "{n} s",
        min: "{n} min",
        h: "{n} h",
        d: "{n} d",
    },
    people_ahead: Plural::two("{n} pessoa à sua frente", "{n} pessoas à sua frente"),
};

static NL: Texts = Texts {
    in_line: "U staat in de rij",
    keep_open: "Houd deze pagina open. U gaat vanzelf verder zodra het uw beurt is.",
    your_place: "Uw plaats in de rij",
    estimated_wait: "Geschatte wachttijd",
    unknown: "onbekend",
    people_waiting: "Mensen in de rij",
    drawn_at_open: "De plaatsen worden bij de opening verloot: elke plaats die eerder wordt getoond, is voorlopig.",
    lottery: "Bezoekers worden door loting gekozen: iedereen die wacht, heeft dezelfde kans.",
    opens_in: "Opent over",
    closed: "Deze wachtruimte is gesloten.",
    not_taking: "Deze wachtruimte laat op dit moment geen nieuwe bezoekers toe.",
    full: "De rij is vol. Probeer het zo nog eens.",
    ended: "Uw plaats in de rij is verlopen.",
    rejoin: "Opnieuw aansluiten",
    your_turn: "Het is uw beurt!",
    continue_: "Doorgaan",
    sorry: "Helaas",
    progress: "Voortgang",
    busy: "Het is erg druk. Probeer het zo nog eens.",
    join_title: "Aansluiten in de rij",
    join_intro: "Klik op de knop om uw plaats in de rij in te nemen. Houd deze pagina daarna open: u gaat vanzelf verder zodra het uw beurt is.",
    join_button: "Aansluiten",
    cookies_blocked: "Uw browser heeft de cookie die uw plaats vasthoudt niet bewaard. Sta cookies toe voor deze site en klik daarna opnieuw op de knop.",
    place_limit: "Uw netwerk heeft al zoveel plaatsen in deze rij als één netwerk mag hebben. Probeer het opnieuw zodra een daarvan is verlopen.",
    pow_working: "Uw browser wordt gecontroleerd voordat hij aansluit in de rij. Dit duurt een paar seconden; houd deze pagina open.",
    challenge_needs_script: "Deze rij laat uw browser eerst een kleine rekenpuzzel oplossen voordat hij een plaats krijgt, zodat bots geen plaatsen van mensen kunnen innemen. Daarvoor is JavaScript nodig (en een beveiligde verbinding): zet JavaScript aan en sluit daarna opnieuw aan.",
    challenge_invalid: "De controle van uw browser is niet gelukt. Sluit opnieuw aan om het nog eens te proberen.",
    identity_required: "Deze rij is voor ingelogde klanten. Log in bij de winkel en volg daarna opnieuw de link naar de rij.",
    code_label: "Toegangscode",
    code_button: "Code gebruiken",
    code_have: "Hebt u een toegangscode? Vul die in om naar de rij te gaan waarvoor hij geldt.",
    invite_only: "Deze rij is alleen op uitnodiging. Vul de toegangscode uit uw uitnodiging in.",
    code_invalid: "Deze toegangscode is hier niet geldig. Controleer hem en probeer het opnieuw.",
    code_used_up: "Deze toegangscode is al zo vaak gebruikt als is toegestaan.",
    code_expired: "Deze toegangscode is verlopen.",
    your_lane: "Uw rij",
    ahead_in_lanes: "In de rijen vóór de uwe",
    staff_title: "Toegang voor medewerkers",
    staff_intro: "Plak het toegangstoken dat u hebt gekregen. Deze browser slaat dan de wachtruimte van {room} over totdat het token verloopt of wordt ingetrokken; hij neemt geen plaats in de rij in.",
    staff_token: "Token",
    staff_enter: "Binnengaan",
    staff_refused: "Met dit token komt u niet binnen:",
    why_paused: "De rij is op dit moment gepauzeerd, dus er kan geen wachttijd worden gegeven. Uw plaats blijft behouden.",
    why_origin_down: "De site ontvangt op dit moment geen bezoekers, dus er kan geen wachttijd worden gegeven. Uw plaats blijft behouden.",
    why_held: "Uw netwerk (uw adres) heeft al zoveel toegangen als deze ruimte één netwerk toestaat, dus voorlopig gaan anderen voor u en kan er geen wachttijd worden gegeven. Uw plaats blijft behouden: u komt aan de beurt zodra een van die toegangen afloopt.",
    away_too_long: "U was te lang weg en bent uw plaats in de rij kwijtgeraakt. Sluit opnieuw aan om achteraan een nieuwe plaats te krijgen. Houd op een telefoon deze pagina open terwijl u wacht.",
    language: "Taal",
    last_updated: "Laatst bijgewerkt",
    no_news: "Al een tijdje geen bericht van de wachtkamer: controleer uw verbinding. Deze pagina blijft het proberen.",
    not_found: "Op dit adres is geen wachtruimte. Controleer de link die u hebt gevolgd, of ga terug naar de site.",
    too_many: "Er kwamen zojuist te veel verzoeken van uw netwerk. Wacht even en laad deze pagina daarna opnieuw; uw plaats in de rij blijft behouden.",
    back_to_site: "Terug naar de site",
    after_event: "Hoe het verder gaat",
    notice_heading: "Bericht van de organisator",
    draw_committed: "Deze loting ligt vooraf vast: {c}.",
    draw_what: "Wat dit betekent",
    draw_explained: "Voordat er een plaats wordt geloot, publiceert de ruimte deze vingerafdruk van het geheim dat over de lotingen beslist. Als de lotingen voorbij zijn, wordt het geheim zelf gepubliceerd: dan kan iedereen nagaan dat het bij de vingerafdruk past en elke loting overdoen. De loting kan dus niet meer worden veranderd zodra deze vingerafdruk is getoond.",
    units: Units {
        s: "{n} s",
        min: "{n} min",
        h: "{n} u",
        d: "{n} d",
    },
    people_ahead: Plural::two("{n} persoon voor u", "{n} mensen voor u"),
};

static PL: Texts = Texts {
    in_line: "Jesteś w kolejce",
    keep_open: "Nie zamykaj tej strony. Gdy nadejdzie twoja kolej, sama przeniesie cię dalej.",
    your_place: "Twoje miejsce w kolejce",
    estimated_wait: "Szacowany czas oczekiwania",
    unknown: "nieznany",
    people_waiting: "Osoby w kolejce",
    drawn_at_open: "Miejsca zostaną rozlosowane w chwili otwarcia: każde miejsce pokazane wcześniej jest tymczasowe.",
    lottery: "Odwiedzający są wybierani w drodze losowania: każdy, kto czeka, ma taką samą szansę.",
    opens_in: "Otwarcie za",
    closed: "Ta poczekalnia jest zamknięta.",
    not_taking: "Ta poczekalnia nie przyjmuje teraz nowych odwiedzających.",
    full: "Kolejka jest pełna. Spróbuj ponownie za chwilę.",
    ended: "Twoje miejsce w kolejce wygasło.",
    rejoin: "Dołącz ponownie do kolejki",
    your_turn: "Twoja kolej!",
    continue_: "Dalej",
    sorry: "Przepraszamy",
    progress: "Postęp",
    busy: "Mamy teraz duży ruch. Spróbuj ponownie za chwilę.",
    join_title: "Dołącz do kolejki",
    join_intro: "Naciśnij przycisk, aby zająć miejsce w kolejce. Potem nie zamykaj tej strony: gdy nadejdzie twoja kolej, sama przeniesie cię dalej.",
    join_button: "Dołącz do kolejki",
    cookies_blocked: "Twoja przeglądarka nie zachowała pliku cookie, który przechowuje twoje miejsce. Zezwól na pliki cookie dla tej witryny i naciśnij przycisk ponownie.",
    place_limit: "Twoja sieć zajmuje już w tej kolejce tyle miejsc, ile może zająć jedna sieć. Spróbuj ponownie, gdy któreś z nich wygaśnie.",
    pow_working: "Sprawdzamy twoją przeglądarkę, zanim dołączy do kolejki. To potrwa kilka sekund; nie zamykaj tej strony.",
    challenge_needs_script: "Zanim ta kolejka przydzieli miejsce, prosi twoją przeglądarkę o rozwiązanie małego zadania, aby boty nie zajmowały miejsc ludzi. Wymaga to JavaScriptu (i bezpiecznego połączenia): włącz JavaScript, a następnie dołącz ponownie.",
    challenge_invalid: "Sprawdzenie twojej przeglądarki nie powiodło się. Dołącz ponownie, aby spróbować jeszcze raz.",
    identity_required: "Ta kolejka jest dla zalogowanych klientów. Zaloguj się w sklepie, a następnie ponownie skorzystaj z jego linku do kolejki.",
    code_label: "Kod dostępu",
    code_button: "Użyj kodu",
    code_have: "Masz kod dostępu? Wpisz go, aby przejść do kolejki, do której uprawnia.",
    invite_only: "Do tej kolejki można dołączyć tylko z zaproszeniem. Wpisz kod dostępu z zaproszenia.",
    code_invalid: "Ten kod dostępu nie jest tutaj ważny. Sprawdź go i spróbuj ponownie.",
    code_used_up: "Ten kod dostępu został już wykorzystany maksymalną liczbę razy.",
    code_expired: "Ten kod dostępu wygasł.",
    your_lane: "Twoja kolejka",
    ahead_in_lanes: "W kolejkach przed twoją",
    staff_title: "Wejście dla personelu",
    staff_intro: "Wklej otrzymany token pomijania kolejki. Ta przeglądarka będzie wtedy omijać poczekalnię {room}, dopóki token nie wygaśnie lub nie zostanie unieważniony; nie zajmuje ona miejsca w kolejce.",
    staff_token: "Token",
    staff_enter: "Wejdź",
    staff_refused: "Ten token nie pozwala ci wejść:",
    why_paused: "Kolejka jest chwilowo wstrzymana, więc nie można podać czasu oczekiwania. Twoje miejsce jest zachowane.",
    why_origin_down: "Witryna nie przyjmuje teraz odwiedzających, więc nie można podać czasu oczekiwania. Twoje miejsce jest zachowane.",
    why_held: "Twoja sieć (twój adres) ma już tyle wejść, ile ten pokój pozwala jednej sieci, więc na razie inni wchodzą przed tobą i nie można podać czasu oczekiwania. Twoje miejsce jest zachowane: wejdziesz, gdy jedno z tych wejść się zakończy.",
    away_too_long: "Twoja nieobecność trwała zbyt długo i miejsce w kolejce przepadło. Dołącz ponownie, aby zająć nowe miejsce na jej końcu. Na telefonie nie zamykaj tej strony, dopóki czekasz.",
    language: "Język",
    last_updated: "Ostatnia aktualizacja",
    no_news: "Od pewnego czasu brak wiadomości z poczekalni: sprawdź połączenie. Ta strona próbuje dalej.",
    not_found: "Pod tym adresem nie ma żadnej poczekalni. Sprawdź link, który cię tu doprowadził, albo wróć do witryny.",
    too_many: "Z twojej sieci przyszło przed chwilą zbyt wiele żądań. Odczekaj chwilę, a potem odśwież tę stronę; twoje miejsce w kolejce jest zachowane.",
    back_to_site: "Wróć do witryny",
    after_event: "Co dalej",
    notice_heading: "Wiadomość od organizatora",
    draw_committed: "To losowanie jest ustalone z góry: {c}.",
    draw_what: "Co to oznacza",
    draw_explained: "Zanim zostanie wylosowane jakiekolwiek miejsce, pokój publikuje ten odcisk sekretu, który rozstrzyga jego losowania. Po zakończeniu losowań publikowany jest sam sekret: każdy może wtedy sprawdzić, że pasuje do odcisku, i powtórzyć każde losowanie. Dlatego losowania nie można już zmienić, gdy ten odcisk został pokazany.",
    units: Units {
        s: "{n} s",
        min: "{n} min",
        h: "{n} godz.",
        d: "{n} d.",
    },
    people_ahead: Plural {
        one: "{n} osoba przed tobą",
        few: "{n} osoby przed tobą",
        many: "{n} osób przed tobą",
        other: "{n} osoby przed tobą",
    },
};

static SV: Texts = Texts {
    in_line: "Du står i kö",
    keep_open: "Håll den här sidan öppen. Den skickar dig vidare av sig själv när det är din tur.",
    your_place: "Din plats i kön",
    estimated_wait: "Beräknad väntetid",
    unknown: "okänd",
    people_waiting: "Personer i kön",
    drawn_at_open: "Platserna lottas när väntrummet öppnar: alla platser som visas innan dess är preliminära.",
    lottery: "Besökarna väljs genom lottning: alla som väntar har samma chans.",
    opens_in: "Öppnar om",
    closed: "Det här väntrummet är stängt.",
    not_taking: "Det här väntrummet tar inte emot nya besökare just nu.",
    full: "Kön är full. Försök igen om en liten stund.",
    ended: "Din plats i kön har gått ut.",
    rejoin: "Ställ dig i kön igen",
    your_turn: "Nu är det din tur!",
    continue_: "Fortsätt",
    sorry: "Tyvärr",
    progress: "Förlopp",
    busy: "Det är hög belastning just nu. Försök igen om en liten stund.",
    join_title: "Ställ dig i kön",
    join_intro: "Tryck på knappen för att ta din plats i kön. Håll sedan sidan öppen: den skickar dig vidare av sig själv när det är din tur.",
    join_button: "Ställ dig i kön",
    cookies_blocked: "Din webbläsare sparade inte kakan som håller din plats. Tillåt kakor för den här webbplatsen och tryck sedan på knappen igen.",
    place_limit: "Ditt nätverk har redan så många platser i den här kön som ett nätverk får ha. Försök igen när någon av dem har gått ut.",
    pow_working: "Vi kontrollerar din webbläsare innan den ställer sig i kön. Det tar några sekunder; håll sidan öppen.",
    challenge_needs_script: "Den här kön ber din webbläsare lösa en liten uppgift innan den får en plats, så att botar inte kan ta människors platser. Det kräver JavaScript (och en säker anslutning): slå på JavaScript och ställ dig sedan i kön igen.",
    challenge_invalid: "Kontrollen av din webbläsare lyckades inte. Ställ dig i kön igen för att försöka en gång till.",
    identity_required: "Den här kön är för inloggade kunder. Logga in i butiken och följ sedan butikens länk till kön igen.",
    code_label: "Åtkomstkod",
    code_button: "Använd koden",
    code_have: "Har du en åtkomstkod? Ange den för att gå till kön som den gäller för.",
    invite_only: "Den här kön kräver inbjudan. Ange åtkomstkoden från din inbjudan.",
    code_invalid: "Den här åtkomstkoden gäller inte här. Kontrollera den och försök igen.",
    code_used_up: "Den här åtkomstkoden har redan använts så många gånger som den får.",
    code_expired: "Den här åtkomstkoden har gått ut.",
    your_lane: "Din kö",
    ahead_in_lanes: "I köerna före din",
    staff_title: "Personalingång",
    staff_intro: "Klistra in den personaltoken du har fått. Den här webbläsaren går sedan förbi väntrummet för {room} tills token går ut eller återkallas; den tar ingen plats i kön.",
    staff_token: "Token",
    staff_enter: "Gå in",
    staff_refused: "Den här token släpper inte in dig:",
    why_paused: "Kön är pausad för tillfället, så ingen väntetid kan anges. Din plats finns kvar.",
    why_origin_down: "Webbplatsen tar inte emot besökare just nu, så ingen väntetid kan anges. Din plats finns kvar.",
    why_held: "Ditt nätverk (din adress) har redan så många insläpp som det här rummet tillåter ett nätverk, så just nu går andra före dig och ingen väntetid kan anges. Din plats finns kvar: du släpps in när ett av de insläppen tar slut.",
    away_too_long: "Du var borta för länge och har förlorat din plats i kön. Ställ dig i kön igen för att få en ny plats längst bak. På mobilen: håll sidan öppen medan du väntar.",
    language: "Språk",
    last_updated: "Senast uppdaterad",
    no_news: "Inget besked från väntrummet på en stund: kontrollera din anslutning. Sidan fortsätter att försöka.",
    not_found: "Det finns inget väntrum på den här adressen. Kontrollera länken du följde, eller gå tillbaka till webbplatsen.",
    too_many: "Det kom nyss för många förfrågningar från ditt nätverk. Vänta en stund och ladda sedan om sidan; din plats i kön finns kvar.",
    back_to_site: "Tillbaka till webbplatsen",
    after_event: "Vad händer nu",
    notice_heading: "Meddelande från arrangören",
    draw_committed: "Den här lottningen är bestämd i förväg: {c}.",
    draw_what: "Vad det betyder",
    draw_explained: "Innan någon plats lottas publicerar rummet detta fingeravtryck av hemligheten som avgör dess lottningar. När lottningarna är över publiceras själva hemligheten: då kan vem som helst kontrollera att den stämmer med fingeravtrycket och göra om varje lottning. Lottningen kan alltså inte ändras när detta fingeravtryck väl har visats.",
    units: Units {
        s: "{n} s",
        min: "{n} min",
        h: "{n} tim",
        d: "{n} d",
    },
    people_ahead: Plural::two("{n} person före dig", "{n} personer före dig"),
};

static DA: Texts = Texts {
    in_line: "Du står i kø",
    keep_open: "Hold denne side åben. Den sender dig videre af sig selv, når det er din tur.",
    your_place: "Din plads i køen",
    estimated_wait: "Forventet ventetid",
    unknown: "ukendt",
    people_waiting: "Personer i køen",
    drawn_at_open: "Pladserne fordeles ved lodtrækning, når venteværelset åbner: enhver plads, der vises inden da, er foreløbig.",
    lottery: "De besøgende udvælges ved lodtrækning: alle, der venter, har samme chance.",
    opens_in: "Åbner om",
    closed: "Dette venteværelse er lukket.",
    not_taking: "Dette venteværelse tager ikke imod nye besøgende lige nu.",
    full: "Køen er fuld. Prøv igen om et øjeblik.",
    ended: "Din plads i køen er udløbet.",
    rejoin: "Stil dig i køen igen",
    your_turn: "Nu er det din tur!",
    continue_: "Fortsæt",
    sorry: "Beklager",
    progress: "Fremskridt",
    busy: "Der er travlt lige nu. Prøv igen om et øjeblik.",
    join_title: "Stil dig i køen",
    join_intro: "Tryk på knappen for at tage din plads i køen. Hold derefter siden åben: den sender dig videre af sig selv, når det er din tur.",
    join_button: "Stil dig i køen",
    cookies_blocked: "Din browser gemte ikke den cookie, der holder din plads. Tillad cookies for dette websted, og tryk derefter på knappen igen.",
    place_limit: "Dit netværk har allerede så mange pladser i denne kø, som ét netværk må have. Prøv igen, når en af dem er udløbet.",
    pow_working: "Vi tjekker din browser, før den stiller sig i køen. Det tager et par sekunder; hold siden åben.",
    challenge_needs_script: "Denne kø beder din browser om at løse en lille opgave, før den får en plads, så bots ikke kan tage pladserne fra mennesker. Det kræver JavaScript (og en sikker forbindelse): slå JavaScript til, og stil dig så i køen igen.",
    challenge_invalid: "Tjekket af din browser lykkedes ikke. Stil dig i køen igen for at prøve en gang til.",
    identity_required: "Denne kø er for kunder, der er logget ind. Log ind i butikken, og følg derefter butikkens link til køen igen.",
    code_label: "Adgangskode",
    code_button: "Brug koden",
    code_have: "Har du en adgangskode? Indtast den for at komme over i den kø, den gælder for.",
    invite_only: "Denne kø kræver en invitation. Indtast adgangskoden fra din invitation.",
    code_invalid: "Denne adgangskode er ikke gyldig her. Tjek den, og prøv igen.",
    code_used_up: "Denne adgangskode er allerede brugt så mange gange, som den må.",
    code_expired: "Denne adgangskode er udløbet.",
    your_lane: "Din kø",
    ahead_in_lanes: "I køerne foran din",
    staff_title: "Indgang for personale",
    staff_intro: "Indsæt det personaletoken, du har fået. Denne browser springer derefter venteværelset for {room} over, indtil tokenet udløber eller bliver tilbagekaldt; den optager ingen plads i køen.",
    staff_token: "Token",
    staff_enter: "Gå ind",
    staff_refused: "Dette token giver dig ikke adgang:",
    why_paused: "Køen er sat på pause lige nu, så der kan ikke angives nogen ventetid. Din plads er bevaret.",
    why_origin_down: "Webstedet tager ikke imod besøgende lige nu, så der kan ikke angives nogen ventetid. Din plads er bevaret.",
    why_held: "Dit netværk (din adresse) har allerede så mange adgange, som dette rum tillader ét netværk, så indtil videre kommer andre ind før dig, og der kan ikke angives nogen ventetid. Din plads er bevaret: du kommer ind, når en af de adgange slutter.",
    away_too_long: "Du var væk for længe og har mistet din plads i køen. Stil dig i køen igen for at få en ny plads bagerst. På en telefon: hold siden åben, mens du venter.",
    language: "Sprog",
    last_updated: "Senest opdateret",
    no_news: "Ingen nyt fra venteværelset i et stykke tid: tjek din forbindelse. Siden bliver ved med at prøve.",
    not_found: "Der er intet venteværelse på denne adresse. Tjek det link, du fulgte, eller gå tilbage til webstedet.",
    too_many: "Der kom netop for mange forespørgsler fra dit netværk. Vent et øjeblik, og genindlæs derefter siden; din plads i køen er bevaret.",
    back_to_site: "Tilbage til webstedet",
    after_event: "Hvad sker der nu",
    notice_heading: "Besked fra arrangøren",
    draw_committed: "Denne lodtrækning er fastlagt på forhånd: {c}.",
    draw_what: "Hvad det betyder",
    draw_explained: "Før der trækkes lod om nogen plads, offentliggør rummet dette fingeraftryk af den hemmelighed, der afgør dets lodtrækninger. Når lodtrækningerne er slut, offentliggøres selve hemmeligheden: så kan alle kontrollere, at den passer til fingeraftrykket, og gentage hver lodtrækning. Lodtrækningen kan altså ikke ændres, når dette fingeraftryk først er vist.",
    units: Units {
        s: "{n} s",
        min: "{n} min",
        h: "{n} t",
        d: "{n} d",
    },
    people_ahead: Plural::two("{n} person foran dig", "{n} personer foran dig"),
};

static NB: Texts = Texts {
    in_line: "Du står i kø",
    keep_open: "Hold denne siden åpen. Den sender deg videre av seg selv når det er din tur.",
    your_place: "Plassen din i køen",
    estimated_wait: "Anslått ventetid",
    unknown: "ukjent",
    people_waiting: "Personer i køen",
    drawn_at_open: "Plassene fordeles ved loddtrekning når venterommet åpner: alle plasser som vises før det, er foreløpige.",
    lottery: "Besøkende velges ved loddtrekning: alle som venter, har like stor sjanse.",
    opens_in: "Åpner om",
    closed: "Dette venterommet er stengt.",
    not_taking: "Dette venterommet tar ikke imot nye besøkende akkurat nå.",
    full: "Køen er full. Prøv igjen om et øyeblikk.",
    ended: "Plassen din i køen er utløpt.",
    rejoin: "Still deg i køen igjen",
    your_turn: "Nå er det din tur!",
    continue_: "Fortsett",
    sorry: "Beklager",
    progress: "Fremdrift",
    busy: "Det er stor pågang akkurat nå. Prøv igjen om et øyeblikk.",
    join_title: "Still deg i køen",
    join_intro: "Trykk på knappen for å ta plassen din i køen. Hold deretter siden åpen: den sender deg videre av seg selv når det er din tur.",
    join_button: "Still deg i køen",
    cookies_blocked: "Nettleseren din tok ikke vare på informasjonskapselen som holder plassen din. Tillat informasjonskapsler for dette nettstedet, og trykk deretter på knappen igjen.",
    place_limit: "Nettverket ditt har allerede så mange plasser i denne køen som ett nettverk kan ha. Prøv igjen når en av dem er utløpt.",
    pow_working: "Vi sjekker nettleseren din før den stiller seg i køen. Det tar noen sekunder; hold siden åpen.",
    challenge_needs_script: "Denne køen ber nettleseren din løse en liten oppgave før den får en plass, slik at roboter ikke kan ta plassene til mennesker. Det krever JavaScript (og en sikker tilkobling): slå på JavaScript, og still deg i køen igjen.",
    challenge_invalid: "Kontrollen av nettleseren din lyktes ikke. Still deg i køen igjen for å prøve en gang til.",
    identity_required: "Denne køen er for innloggede kunder. Logg inn i butikken, og følg deretter butikkens lenke til køen igjen.",
    code_label: "Tilgangskode",
    code_button: "Bruk koden",
    code_have: "Har du en tilgangskode? Skriv den inn for å gå til køen den gjelder for.",
    invite_only: "Denne køen krever invitasjon. Skriv inn tilgangskoden fra invitasjonen din.",
    code_invalid: "Denne tilgangskoden er ikke gyldig her. Sjekk den og prøv igjen.",
    code_used_up: "Denne tilgangskoden er allerede brukt så mange ganger som den kan.",
    code_expired: "Denne tilgangskoden er utløpt.",
    your_lane: "Køen din",
    ahead_in_lanes: "I køene foran din",
    staff_title: "Inngang for ansatte",
    staff_intro: "Lim inn personaltokenet du har fått. Denne nettleseren går da forbi venterommet for {room} til tokenet utløper eller trekkes tilbake; den tar ingen plass i køen.",
    staff_token: "Token",
    staff_enter: "Gå inn",
    staff_refused: "Dette tokenet slipper deg ikke inn:",
    why_paused: "Køen er satt på pause for øyeblikket, så ingen ventetid kan oppgis. Plassen din beholdes.",
    why_origin_down: "Nettstedet tar ikke imot besøkende akkurat nå, så ingen ventetid kan oppgis. Plassen din beholdes.",
    why_held: "Nettverket ditt (adressen din) har allerede så mange adganger som dette rommet tillater ett nettverk, så inntil videre slipper andre inn før deg, og ingen ventetid kan oppgis. Plassen din beholdes: du slipper inn når en av de adgangene tar slutt.",
    away_too_long: "Du var borte for lenge og har mistet plassen din i køen. Still deg i køen igjen for å få en ny plass bakerst. På mobil: hold siden åpen mens du venter.",
    language: "Språk",
    last_updated: "Sist oppdatert",
    no_news: "Ingen nytt fra venterommet på en stund: sjekk tilkoblingen din. Siden fortsetter å prøve.",
    not_found: "Det finnes ikke noe venterom på denne adressen. Sjekk lenken du fulgte, eller gå tilbake til nettstedet.",
    too_many: "Det kom nettopp for mange forespørsler fra nettverket ditt. Vent litt, og last deretter inn siden på nytt; plassen din i køen beholdes.",
    back_to_site: "Tilbake til nettstedet",
    after_event: "Hva skjer nå",
    notice_heading: "Melding fra arrangøren",
    draw_committed: "Denne loddtrekningen er fastsatt på forhånd: {c}.",
    draw_what: "Hva dette betyr",
    draw_explained: "Før noen plass trekkes, publiserer rommet dette fingeravtrykket av hemmeligheten som avgjør loddtrekningene. Når loddtrekningene er over, publiseres selve hemmeligheten: da kan hvem som helst kontrollere at den stemmer med fingeravtrykket, og gjøre hver loddtrekning på nytt. Loddtrekningen kan altså ikke endres etter at dette fingeravtrykket er vist.",
    units: Units {
        s: "{n} s",
        min: "{n} min",
        h: "{n} t",
        d: "{n} d",
    },
    people_ahead: Plural::two("{n} person foran deg", "{n} personer foran deg"),
};

static FI: Texts = Texts {
    in_line: "Olet jonossa",
    keep_open: "Pidä tämä sivu auki. Se vie sinut automaattisesti eteenpäin, kun on vuorosi.",
    your_place: "Paikkasi jonossa",
    estimated_wait: "Arvioitu odotusaika",
    unknown: "ei tiedossa",
    people_waiting: "Ihmisiä jonossa",
    drawn_at_open: "Paikat arvotaan avautumishetkellä: ennen sitä näytetyt paikat ovat alustavia.",
    lottery: "Kävijät valitaan arpomalla: kaikilla jonottajilla on sama mahdollisuus.",
    opens_in: "Avautumiseen aikaa",
    closed: "Tämä odotushuone on suljettu.",
    not_taking: "Tämä odotushuone ei ota juuri nyt vastaan uusia kävijöitä.",
    full: "Jono on täynnä. Yritä hetken kuluttua uudelleen.",
    ended: "Paikkasi jonossa on vanhentunut.",
    rejoin: "Liity jonoon uudelleen",
    your_turn: "Nyt on vuorosi!",
    continue_: "Jatka",
    sorry: "Pahoittelemme",
    progress: "Edistyminen",
    busy: "Meillä on nyt ruuhkaa. Yritä hetken kuluttua uudelleen.",
    join_title: "Liity jonoon",
    join_intro: "Paina painiketta, niin saat paikan jonosta. Pidä sen jälkeen tämä sivu auki: se vie sinut automaattisesti eteenpäin, kun on vuorosi.",
    join_button: "Liity jonoon",
    cookies_blocked: "Selaimesi ei säilyttänyt evästettä, joka pitää paikkasi. Salli evästeet tälle sivustolle ja paina sitten painiketta uudelleen.",
    place_limit: "Verkostasi on jo niin monta paikkaa tässä jonossa kuin yhdestä verkosta saa olla. Yritä uudelleen, kun jokin niistä on päättynyt.",
    pow_working: "Tarkistamme selaimesi ennen kuin se liittyy jonoon. Tämä kestää muutaman sekunnin; pidä sivu auki.",
    challenge_needs_script: "Tämä jono pyytää selaintasi ratkaisemaan pienen tehtävän ennen kuin se antaa paikan, jotta botit eivät vie ihmisten paikkoja. Siihen tarvitaan JavaScript (ja suojattu yhteys): ota JavaScript käyttöön ja liity sitten jonoon uudelleen.",
    challenge_invalid: "Selaimesi tarkistus ei onnistunut. Liity jonoon uudelleen, niin yritämme vielä kerran.",
    identity_required: "Tämä jono on sisäänkirjautuneille asiakkaille. Kirjaudu sisään kauppaan ja seuraa sitten uudelleen kaupan linkkiä jonoon.",
    code_label: "Pääsykoodi",
    code_button: "Käytä koodia",
    code_have: "Onko sinulla pääsykoodi? Syötä se, niin pääset jonoon, johon se on tarkoitettu.",
    invite_only: "Tähän jonoon pääsee vain kutsulla. Syötä kutsussasi oleva pääsykoodi.",
    code_invalid: "Tämä pääsykoodi ei kelpaa täällä. Tarkista se ja yritä uudelleen.",
    code_used_up: "Tätä pääsykoodia on jo käytetty niin monta kertaa kuin sallittu.",
    code_expired: "Tämä pääsykoodi on vanhentunut.",
    your_lane: "Jonosi",
    ahead_in_lanes: "Jonoissa ennen omaasi",
    staff_title: "Henkilökunnan sisäänkäynti",
    staff_intro: "Liitä saamasi ohitustunniste. Tämä selain ohittaa sen jälkeen kohteen {room} odotushuoneen, kunnes tunniste vanhenee tai se perutaan; selain ei vie paikkaa jonosta.",
    staff_token: "Tunniste",
    staff_enter: "Siirry sisään",
    staff_refused: "Tällä tunnisteella et pääse sisään:",
    why_paused: "Jono on tällä hetkellä keskeytetty, joten odotusaikaa ei voida kertoa. Paikkasi säilyy.",
    why_origin_down: "Sivusto ei ota juuri nyt vastaan kävijöitä, joten odotusaikaa ei voida kertoa. Paikkasi säilyy.",
    why_held: "Verkollasi (osoitteellasi) on jo niin monta sisäänpääsyä kuin tämä huone sallii yhdelle verkolle, joten toistaiseksi muut pääsevät ohitsesi eikä odotusaikaa voida kertoa. Paikkasi säilyy: pääset sisään, kun yksi niistä sisäänpääsyistä päättyy.",
    away_too_long: "Olit poissa liian kauan ja menetit paikkasi jonossa. Liity jonoon uudelleen, niin saat uuden paikan jonon hännille. Pidä puhelimella tämä sivu auki odottaessasi.",
    language: "Kieli",
    last_updated: "Päivitetty viimeksi",
    no_news: "Jonosta ei ole kuulunut hetkeen mitään: tarkista yhteytesi. Sivu yrittää edelleen.",
    not_found: "Tässä osoitteessa ei ole odotushuonetta. Tarkista linkki, jota seurasit, tai palaa sivustolle.",
    too_many: "Verkostasi tuli juuri liian monta pyyntöä. Odota hetki ja lataa sitten tämä sivu uudelleen; paikkasi jonossa säilyy.",
    back_to_site: "Takaisin sivustolle",
    after_event: "Mitä seuraavaksi",
    notice_heading: "Järjestäjän viesti",
    draw_committed: "Tämä arvonta on lukittu etukäteen: {c}.",
    draw_what: "Mitä tämä tarkoittaa",
    draw_explained: "Ennen kuin yhtään paikkaa arvotaan, huone julkaisee tämän sormenjäljen salaisuudesta, joka ratkaisee sen arvonnat. Kun arvonnat ovat ohi, itse salaisuus julkaistaan: silloin kuka tahansa voi tarkistaa, että se vastaa sormenjälkeä, ja toistaa jokaisen arvonnan. Arvontaa ei siis voi enää muuttaa sen jälkeen, kun tämä sormenjälki on näytetty.",
    units: Units {
        s: "{n} s",
        min: "{n} min",
        h: "{n} t",
        d: "{n} pv",
    },
    people_ahead: Plural::two("{n} henkilö edelläsi", "{n} henkilöä edelläsi"),
};

static CS: Texts = Texts {
    in_line: "Jste ve frontě",
    keep_open: "Nechte tuto stránku otevřenou. Až na vás přijde řada, sama vás pustí dál.",
    your_place: "Vaše místo ve frontě",
    estimated_wait: "Odhadovaná doba čekání",
    unknown: "neznámá",
    people_waiting: "Počet lidí ve frontě",
    drawn_at_open: "Místa se losují při otevření: jakékoli místo zobrazené předtím je jen předběžné.",
    lottery: "Návštěvníci se vybírají losem: všichni čekající mají stejnou šanci.",
    opens_in: "Otevírá se za",
    closed: "Tato čekárna je zavřená.",
    not_taking: "Tato čekárna teď nepřijímá nové návštěvníky.",
    full: "Fronta je plná. Zkuste to prosím za chvíli znovu.",
    ended: "Vaše místo ve frontě vypršelo.",
    rejoin: "Znovu se zařadit do fronty",
    your_turn: "Jste na řadě!",
    continue_: "Pokračovat",
    sorry: "Omlouváme se",
    progress: "Průběh",
    busy: "Máme teď velký nápor. Zkuste to prosím za chvíli znovu.",
    join_title: "Zařadit se do fronty",
    join_intro: "Stisknutím tlačítka zaujmete své místo ve frontě. Potom nechte tuto stránku otevřenou: až na vás přijde řada, sama vás pustí dál.",
    join_button: "Zařadit se do fronty",
    cookies_blocked: "Váš prohlížeč si neuložil cookie, která drží vaše místo. Povolte prosím cookies pro tento web a stiskněte tlačítko znovu.",
    place_limit: "Vaše síť už v této frontě drží tolik míst, kolik jedna síť smí. Zkuste to znovu, až některé z nich skončí.",
    pow_working: "Ověřujeme váš prohlížeč, než se zařadí do fronty. Potrvá to několik sekund; nechte prosím tuto stránku otevřenou.",
    challenge_needs_script: "Tato fronta nechá váš prohlížeč před přidělením místa vyřešit malou úlohu, aby boti nemohli zabírat místa lidem. K tomu je potřeba JavaScript (a zabezpečené připojení): zapněte JavaScript a zařaďte se znovu.",
    challenge_invalid: "Ověření vašeho prohlížeče se nezdařilo. Zařaďte se znovu a zkuste to ještě jednou.",
    identity_required: "Tato fronta je určena přihlášeným zákazníkům. Přihlaste se v obchodě a pak znovu použijte jeho odkaz do fronty.",
    code_label: "Přístupový kód",
    code_button: "Použít kód",
    code_have: "Máte přístupový kód? Zadejte ho a přejdete do fronty, pro kterou platí.",
    invite_only: "Do této fronty se lze dostat jen na pozvánku. Zadejte přístupový kód z pozvánky.",
    code_invalid: "Tento přístupový kód tu neplatí. Zkontrolujte ho a zkuste to znovu.",
    code_used_up: "Tento přístupový kód už byl použit tolikrát, kolikrát smí.",
    code_expired: "Platnost tohoto přístupového kódu vypršela.",
    your_lane: "Vaše fronta",
    ahead_in_lanes: "Ve frontách před tou vaší",
    staff_title: "Vstup pro personál",
    staff_intro: "Vložte token personálu, který jste dostali. Tento prohlížeč pak bude obcházet čekárnu {room}, dokud token nevyprší nebo nebude zrušen; nezabírá žádné místo ve frontě.",
    staff_token: "Token",
    staff_enter: "Vstoupit",
    staff_refused: "S tímto tokenem nemůžete vstoupit:",
    why_paused: "Fronta je momentálně pozastavená, takže nelze určit dobu čekání. Vaše místo zůstává zachováno.",
    why_origin_down: "Web teď nepřijímá návštěvníky, takže nelze určit dobu čekání. Vaše místo zůstává zachováno.",
    why_held: "Vaše síť (vaše adresa) už má tolik vstupů, kolik tato místnost jedné síti dovoluje, takže zatím jdou ostatní před vámi a nelze určit dobu čekání. Vaše místo zůstává zachováno: dostanete se dovnitř, jakmile jeden z těchto vstupů skončí.",
    away_too_long: "Byli jste pryč příliš dlouho a přišli jste o své místo ve frontě. Zařaďte se znovu a dostanete nové místo na jejím konci. Na telefonu nechte tuto stránku během čekání otevřenou.",
    language: "Jazyk",
    last_updated: "Naposledy aktualizováno",
    no_news: "Z čekárny už chvíli nepřišla žádná zpráva: zkontrolujte připojení. Stránka to dál zkouší.",
    not_found: "Na této adrese není žádná čekárna. Zkontrolujte odkaz, který jste použili, nebo se vraťte na web.",
    too_many: "Z vaší sítě právě přišlo příliš mnoho požadavků. Chvíli počkejte a pak tuto stránku znovu načtěte; vaše místo ve frontě zůstává zachováno.",
    back_to_site: "Zpět na web",
    after_event: "Co bude dál",
    notice_heading: "Zpráva od pořadatele",
    draw_committed: "Toto losování je předem pevně dané: {c}.",
    draw_what: "Co to znamená",
    draw_explained: "Než se vylosuje jakékoli místo, místnost zveřejní tento otisk tajemství, které rozhoduje o jejích losováních. Po skončení losování se zveřejní samotné tajemství: každý pak může ověřit, že odpovídá otisku, a každé losování zopakovat. Losování tedy nelze změnit poté, co byl tento otisk zobrazen.",
    units: Units {
        s: "{n} s",
        min: "{n} min",
        h: "{n} h",
        d: "{n} d",
    },
    people_ahead: Plural {
        one: "{n} člověk před vámi",
        few: "{n} lidé před vámi",
        many: "{n} lidí před vámi",
        other: "{n} lidí před vámi",
    },
};

static JA: Texts = Texts {
    in_line: "順番待ちの列に並んでいます",
    keep_open: "このページを開いたままにしてください。順番が来ると、自動的に次のページへ進みます。",
    your_place: "あなたの順番",
    estimated_wait: "予想待ち時間",
    unknown: "不明",
    people_waiting: "待っている人数",
    drawn_at_open: "順番は開始時に抽選で決まります。それまでに表示される順番は仮のものです。",
    lottery: "入場は抽選で決まります。待っている方は全員、同じ確率で選ばれます。",
    opens_in: "開始まで",
    closed: "この待合室は閉じています。",
    not_taking: "この待合室は現在、新しい訪問者を受け付けていません。",
    full: "列が満員です。しばらくしてからもう一度お試しください。",
    ended: "列でのあなたの順番は終了しました。",
    rejoin: "もう一度列に並ぶ",
    your_turn: "あなたの番です！",
    continue_: "次へ進む",
    sorry: "申し訳ありません",
    progress: "進行状況",
    busy: "ただいま混み合っています。しばらくしてからもう一度お試しください。",
    join_title: "列に並ぶ",
    join_intro: "ボタンを押すと列に並びます。その後はこのページを開いたままにしてください。順番が来ると、自動的に次のページへ進みます。",
    join_button: "列に並ぶ",
    cookies_blocked: "お使いのブラウザが、順番を保持するCookieを保存しませんでした。このサイトのCookieを許可してから、もう一度ボタンを押してください。",
    place_limit: "お使いのネットワークは、この列で1つのネットワークが持てる上限まで順番を持っています。そのいずれかが終了してから、もう一度お試しください。",
    pow_working: "列に並ぶ前に、お使いのブラウザを確認しています。数秒かかりますので、このページを開いたままにしてください。",
    challenge_needs_script: "この列では、ボットが人の順番を奪わないよう、順番をお渡しする前にブラウザで小さな計算問題を解いていただきます。これにはJavaScript（と安全な接続）が必要です。JavaScriptを有効にしてから、もう一度列に並んでください。",
    challenge_invalid: "ブラウザの確認に失敗しました。もう一度列に並んで、再度お試しください。",
    identity_required: "この列はログインしたお客様専用です。ショップでログインしてから、もう一度ショップのリンクから列へお進みください。",
    code_label: "アクセスコード",
    code_button: "コードを使う",
    code_have: "アクセスコードをお持ちですか？入力すると、そのコードの列へ移動します。",
    invite_only: "この列は招待制です。招待状に記載されたアクセスコードを入力してください。",
    code_invalid: "このアクセスコードはここでは無効です。確認してから、もう一度お試しください。",
    code_used_up: "このアクセスコードは使用回数の上限に達しています。",
    code_expired: "このアクセスコードは有効期限が切れています。",
    your_lane: "あなたの列",
    ahead_in_lanes: "あなたより前の列",
    staff_title: "スタッフ用入口",
    staff_intro: "受け取ったスタッフ用トークンを貼り付けてください。トークンの有効期限が切れるか取り消されるまで、このブラウザは{room}の待合室を通過できます。列の順番は使いません。",
    staff_token: "トークン",
    staff_enter: "入る",
    staff_refused: "このトークンでは入場できません：",
    why_paused: "現在、列は一時停止中のため、待ち時間をお伝えできません。あなたの順番は保持されています。",
    why_origin_down: "現在、サイトが訪問者を受け付けていないため、待ち時間をお伝えできません。あなたの順番は保持されています。",
    why_held: "お使いのネットワーク（アドレス）は、このルームが1つのネットワークに認める入場数にすでに達しているため、当面は他の方が先に入場し、待ち時間をお伝えできません。あなたの順番は保持されています。それらの入場のいずれかが終わり次第、入場できます。",
    away_too_long: "長い間離れていたため、列での順番が失われました。もう一度並ぶと、列の最後に新しい順番が付きます。スマートフォンでは、お待ちの間このページを開いたままにしてください。",
    language: "言語",
    last_updated: "最終更新",
    no_news: "しばらく待合室から更新がありません。接続を確認してください。このページは再試行を続けます。",
    not_found: "このアドレスに待合室はありません。アクセスしたリンクをご確認いただくか、サイトにお戻りください。",
    too_many: "お使いのネットワークから、短時間に多くのリクエストが送信されました。しばらくお待ちいただいてから、このページを再読み込みしてください。列でのあなたの順番は保持されています。",
    back_to_site: "サイトに戻る",
    after_event: "今後について",
    notice_heading: "主催者からのお知らせ",
    draw_committed: "この抽選はあらかじめ確定しています：{c}",
    draw_what: "この表示の意味",
    draw_explained: "席を抽選する前に、待合室は抽選を決める秘密の値の指紋（ハッシュ値）を公開します。抽選が終わると、秘密の値そのものが公開されます。だれでも、それが指紋と一致することを確かめ、すべての抽選をやり直して確認できます。そのため、この指紋が表示された後に抽選を変えることはできません。",
    units: Units {
        s: "{n}秒",
        min: "{n}分",
        h: "{n}時間",
        d: "{n}日",
    },
    people_ahead: Plural::two("あなたの前に{n}人", "あなたの前に{n}人"),
};

static TR: Texts = Texts {
    in_line: "Sıradasınız",
    keep_open: "Bu sayfayı açık tutun. Sıranız geldiğinde sizi kendiliğinden yönlendirecektir.",
    your_place: "Sıradaki yeriniz",
    estimated_wait: "Tahmini bekleme süresi",
    unknown: "bilinmiyor",
    people_waiting: "Sıradaki kişi sayısı",
    drawn_at_open: "Yerler açılışta kurayla belirlenir: bundan önce gösterilen her yer geçicidir.",
    lottery: "Ziyaretçiler kurayla seçilir: bekleyen herkesin şansı eşittir.",
    opens_in: "Açılışa kalan süre",
    closed: "Bu bekleme odası kapalı.",
    not_taking: "Bu bekleme odası şu anda yeni ziyaretçi kabul etmiyor.",
    full: "Sıra dolu. Lütfen biraz sonra tekrar deneyin.",
    ended: "Sıradaki yerinizin süresi doldu.",
    rejoin: "Yeniden sıraya girin",
    your_turn: "Sıra sizde!",
    continue_: "Devam et",
    sorry: "Üzgünüz",
    progress: "İlerleme",
    busy: "Şu anda yoğunluk var. Lütfen biraz sonra tekrar deneyin.",
    join_title: "Sıraya girin",
    join_intro: "Sıradaki yerinizi almak için düğmeye basın. Ardından bu sayfayı açık tutun: sıranız geldiğinde sizi kendiliğinden yönlendirecektir.",
    join_button: "Sıraya gir",
    cookies_blocked: "Tarayıcınız, yerinizi tutan çerezi saklamadı. Lütfen bu site için çerezlere izin verin ve düğmeye yeniden basın.",
    place_limit: "Ağınız bu sırada bir ağın tutabileceği kadar yeri zaten tutuyor. Bunlardan birinin süresi dolduğunda tekrar deneyin.",
    pow_working: "Tarayıcınız sıraya girmeden önce kontrol ediliyor. Bu birkaç saniye sürer; lütfen bu sayfayı açık tutun.",
    challenge_needs_script: "Botlar insanların yerini almasın diye bu sıra, yer vermeden önce tarayıcınızdan küçük bir bulmaca çözmesini ister. Bunun için JavaScript (ve güvenli bir bağlantı) gerekir: lütfen JavaScript’i açın ve yeniden sıraya girin.",
    challenge_invalid: "Tarayıcınızın kontrolü başarısız oldu. Yeniden denemek için tekrar sıraya girin.",
    identity_required: "Bu sıra, oturum açmış müşteriler içindir. Lütfen mağazada oturum açın, ardından mağazanın sıraya giden bağlantısını yeniden izleyin.",
    code_label: "Erişim kodu",
    code_button: "Kodu kullan",
    code_have: "Erişim kodunuz mu var? Geçerli olduğu sıraya geçmek için kodu girin.",
    invite_only: "Bu sıraya yalnızca davetle girilebilir. Davetinizdeki erişim kodunu girin.",
    code_invalid: "Bu erişim kodu burada geçerli değil. Lütfen kontrol edip tekrar deneyin.",
    code_used_up: "Bu erişim kodu izin verilen sayıda kullanıldı.",
    code_expired: "Bu erişim kodunun süresi doldu.",
    your_lane: "Sıranız",
    ahead_in_lanes: "Sizinkinden önceki sıralarda",
    staff_title: "Personel girişi",
    staff_intro: "Size verilen personel belirtecini yapıştırın. Bu tarayıcı, belirtecin süresi dolana veya iptal edilene kadar {room} bekleme odasını atlar; sırada yer tutmaz.",
    staff_token: "Belirteç",
    staff_enter: "Gir",
    staff_refused: "Bu belirteç girişinize izin vermiyor:",
    why_paused: "Sıra şu anda duraklatıldı, bu nedenle bekleme süresi verilemiyor. Yeriniz korunuyor.",
    why_origin_down: "Site şu anda ziyaretçi kabul etmiyor, bu nedenle bekleme süresi verilemiyor. Yeriniz korunuyor.",
    why_held: "Ağınız (adresiniz) bu odanın bir ağa izin verdiği kadar girişe zaten sahip, bu yüzden şimdilik başkaları sizden önce giriyor ve bekleme süresi verilemiyor. Yeriniz korunuyor: bu girişlerden biri sona erdiğinde içeri alınacaksınız.",
    away_too_long: "Çok uzun süre uzak kaldığınız için sıradaki yerinizi kaybettiniz. Sonda yeni bir yer almak için yeniden sıraya girin. Telefonda beklerken bu sayfayı açık tutun.",
    language: "Dil",
    last_updated: "Son güncelleme",
    no_news: "Bir süredir bekleme odasından haber yok: bağlantınızı kontrol edin. Bu sayfa denemeye devam ediyor.",
    not_found: "Bu adreste bir bekleme odası yok. Tıkladığınız bağlantıyı kontrol edin veya siteye geri dönün.",
    too_many: "Ağınızdan az önce çok fazla istek geldi. Biraz bekleyin, ardından bu sayfayı yeniden yükleyin; sıradaki yeriniz korunuyor.",
    back_to_site: "Siteye dön",
    after_event: "Bundan sonra ne olacak",
    notice_heading: "Organizatörden mesaj",
    draw_committed: "Bu kura önceden sabitlenmiştir: {c}.",
    draw_what: "Bunun anlamı",
    draw_explained: "Herhangi bir yer için kura çekilmeden önce oda, kuralarını belirleyen gizli değerin bu parmak izini yayımlar. Kuralar bittiğinde gizli değerin kendisi yayımlanır: o zaman herkes parmak iziyle eşleştiğini kontrol edebilir ve her kurayı yeniden yapabilir. Bu nedenle, bu parmak izi gösterildikten sonra kura değiştirilemez.",
    units: Units {
        s: "{n} sn",
        min: "{n} dk",
        h: "{n} sa",
        d: "{n} g",
    },
    people_ahead: Plural::two("Önünüzde {n} kişi", "Önünüzde {n} kişi"),
};

#[cfg(test)]
mod tests {
    use super::*;

    /// Every text of `t`, by name: a field added to `Texts` must be added here too (the pattern
    /// names them all).
    fn fields(t: &Texts) -> Vec<(&'static str, &'static str)> {
        macro_rules! all {
            ($($f:ident),* $(,)?) => {{
                let Texts { $($f,)* people_ahead: _, units: _ } = t;
                vec![$((stringify!($f), *$f)),*]
            }};
        }
        all!(
            in_line,
            keep_open,
            your_place,
            estimated_wait,
            unknown,
            lottery,
            people_waiting,
            drawn_at_open,
            opens_in,
            closed,
            not_taking,
            full,
            ended,
            rejoin,
            your_turn,
            continue_,
            sorry,
            progress,
            busy,
            join_title,
            join_intro,
            join_button,
            cookies_blocked,
            place_limit,
            pow_working,
            challenge_needs_script,
            challenge_invalid,
            identity_required,
            code_label,
            code_button,
            code_have,
            invite_only,
            code_invalid,
            code_used_up,
            code_expired,
            your_lane,
            ahead_in_lanes,
            staff_title,
            staff_intro,
            staff_token,
            staff_enter,
            staff_refused,
            why_paused,
            why_origin_down,
            why_held,
            away_too_long,
            language,
            last_updated,
            no_news,
            not_found,
            too_many,
            back_to_site,
            after_event,
            notice_heading,
            draw_committed,
            draw_what,
            draw_explained,
        )
    }

    /// Every text of `t`, its plural forms included.
    fn strings(t: &Texts) -> Vec<(&'static str, &'static str)> {
        let p = &t.people_ahead;
        let mut all = fields(t);
        all.extend([
            ("people_ahead.one", p.one),
            ("people_ahead.few", p.few),
            ("people_ahead.many", p.many),
            ("people_ahead.other", p.other),
        ]);
        all
    }

    /// Texts that may read as in English: a word the languages borrow.
    const BORROWED: &[&str] = &["staff_token"];

    #[test]
    fn every_language_has_every_text() {
        assert!(Lang::ALL.len() >= 13);
        let en = fields(&EN);
        for lang in Lang::ALL {
            let t = texts(lang);
            for ((name, text), (_, english)) in fields(t).into_iter().zip(&en) {
                let at = format!("{}.{name}", lang.tag());
                assert!(!text.trim().is_empty(), "{at} is empty");
                assert_eq!(text, text.trim(), "{at} has spaces around it");
                assert!(!text.contains("  "), "{at} has a double space");
                assert!(
                    !text.contains(['<', '>', '&', '"']),
                    "{at} holds HTML: {text}"
                );
                // The same placeholders as in English (`{room}`), and no others.
                assert_eq!(
                    text.matches('{').collect::<Vec<_>>(),
                    english.matches('{').collect::<Vec<_>>(),
                    "{at}"
                );
                assert_eq!(text.contains("{room}"), english.contains("{room}"), "{at}");
                if lang != Lang::En && !BORROWED.contains(&name) {
                    assert_ne!(text, *english, "{at} is still English");
                }
            }
            for (name, form) in strings(t).into_iter().filter(|(n, _)| n.contains('.')) {
                assert_eq!(form.matches("{n}").count(), 1, "{}.{name}", lang.tag());
                assert_eq!(form.matches('{').count(), 1, "{}.{name}", lang.tag());
                if lang != Lang::En {
                    assert_ne!(form, EN.people_ahead.other, "{}.{name}", lang.tag());
                    assert_ne!(form, EN.people_ahead.one, "{}.{name}", lang.tag());
                }
            }
        }
    }

    #[test]
    fn every_language_writes_durations_in_its_own_units() {
        for lang in Lang::ALL {
            let u = &texts(lang).units;
            for unit in [u.s, u.min, u.h, u.d] {
                assert_eq!(unit.matches("{n}").count(), 1, "{}: {unit}", lang.tag());
                assert_eq!(unit.matches('{').count(), 1, "{}: {unit}", lang.tag());
                assert!(!unit.contains('|'), "{}: {unit}", lang.tag());
            }
        }
        let en = &texts(Lang::En).units;
        assert_eq!(en.fmt(5), "5 s");
        assert_eq!(en.fmt(61), "2 min");
        assert_eq!(en.fmt(3 * 3600 + 120), "3 h 2 min");
        assert_eq!(en.fmt(18 * 86_400 + 13 * 3600 + 540), "18 d 13 h");
        assert_eq!(texts(Lang::Ja).units.fmt(120), "2分");
        assert_eq!(texts(Lang::De).units.fmt(7_200), "2 Std. 0 Min.");
    }

    #[test]
    fn languages_are_listed_once_each() {
        for (i, a) in Lang::ALL.iter().enumerate() {
            assert_eq!(Lang::from_tag(a.tag()), Some(*a));
            assert!(!a.endonym().is_empty());
            for b in &Lang::ALL[i + 1..] {
                assert_ne!(a, b);
                assert_ne!(a.tag(), b.tag());
                assert_ne!(a.endonym(), b.endonym());
                assert!(!std::ptr::eq(texts(*a), texts(*b)), "{a:?} {b:?}");
            }
        }
        assert_eq!(Lang::De.endonym(), "Deutsch");
        assert_eq!(Lang::Fr.endonym(), "Français");
        assert_eq!(Lang::Ja.endonym(), "日本語");
        assert_eq!(Lang::Nb.tag(), "nb");
    }

    #[test]
    fn tags_are_read_by_their_language() {
        for (tag, lang) in [
            ("de", Lang::De),
            ("de-AT", Lang::De),
            ("DE-at", Lang::De),
            ("pt-BR", Lang::Pt),
            ("pt_PT", Lang::Pt),
            ("nb-NO", Lang::Nb),
            ("no", Lang::Nb),
            ("nn", Lang::Nb),
            ("NN-no", Lang::Nb),
            ("ja-JP", Lang::Ja),
            ("en-GB", Lang::En),
            ("cs-CZ", Lang::Cs),
            ("fr-CA", Lang::Fr),
            ("tr", Lang::Tr),
            ("fi", Lang::Fi),
            ("sv-FI", Lang::Sv),
            ("da-DK", Lang::Da),
            ("it-CH", Lang::It),
            ("nl-BE", Lang::Nl),
            ("pl", Lang::Pl),
            ("es-419", Lang::Es),
        ] {
            assert_eq!(Lang::from_tag(tag), Some(lang), "{tag}");
        }
        let long = format!("de-{}", "a".repeat(32));
        assert_eq!(
            (long.len(), Lang::from_tag(&long)),
            (35, None),
            "a subtag of 32"
        );
        let longest = "de-abcdefgh-abcdefgh-abcdefgh-abcd";
        assert_eq!(Lang::from_tag(longest), Some(Lang::De));
        assert_eq!(Lang::from_tag(&format!("{longest}e")), Some(Lang::De));
        assert_eq!(Lang::from_tag(&format!("{longest}-e")), None, "36 bytes");
        for bad in [
            "",
            "zh",
            "zh-CN",
            "zh-Hant-TW",
            "x",
            "d",
            "deu-",
            "de-",
            "-de",
            "de--AT",
            "de AT",
            "*",
            "de;q=1",
            "i-klingon",
            "dé",
            "e\u{301}s",
            "de-ÄT",
            "en\u{0}",
            "1d",
        ] {
            assert_eq!(Lang::from_tag(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn negotiation_honours_quality_values() {
        assert_eq!(Lang::negotiate(None), Lang::En);
        assert_eq!(Lang::negotiate(Some("")), Lang::En);
        assert_eq!(Lang::negotiate(Some("de-DE,de;q=0.9,en;q=0.8")), Lang::De);
        assert_eq!(Lang::negotiate(Some("ja, fr;q=0.5, es;q=0.7")), Lang::Ja);
        assert_eq!(Lang::negotiate(Some("zh, fr;q=0.5, es;q=0.7")), Lang::Es);
        assert_eq!(Lang::negotiate(Some("zh, ko")), Lang::En);
        assert_eq!(Lang::negotiate(Some("fr-CA")), Lang::Fr);
        assert_eq!(
            Lang::negotiate(Some("pt-BR,pt;q=0.9,en-US;q=0.8")),
            Lang::Pt
        );
        assert_eq!(Lang::negotiate(Some("nb-NO;q=0.4, da;q=0.6")), Lang::Da);
        assert_eq!(Lang::negotiate(Some("no")), Lang::Nb);
        assert_eq!(Lang::negotiate(Some("en;q=0.2, cs-CZ;Q=0.3")), Lang::Cs);
        assert_eq!(
            Lang::negotiate(Some("en;q=0.5, pl;q=0.5")),
            Lang::En,
            "ties: first"
        );
        assert_eq!(Lang::negotiate(Some("pl;q=0, it;q=0.001")), Lang::It);
        assert_eq!(
            Lang::negotiate(Some("pl;q=0")),
            Lang::En,
            "q=0: not acceptable"
        );
        assert_eq!(Lang::negotiate(Some("sv;q=inf, fi;q=0.5")), Lang::Fi);
        assert_eq!(Lang::negotiate(Some("sv;q=NaN, fi;q=0.5")), Lang::Fi);
        assert_eq!(Lang::negotiate(Some("sv;q=7, fi;q=1")), Lang::Sv);
        assert_eq!(Lang::negotiate(Some("*;q=1, tr;q=0.1")), Lang::Tr);
        assert_eq!(
            Lang::negotiate(Some(" TR-tr ; q=0.9 , en ; q=0.8")),
            Lang::Tr
        );
        assert_eq!(Lang::negotiate(Some(&"x,".repeat(10_000))), Lang::En);
        // Only the first 32 entries count.
        let many = format!("{}de", "zz,".repeat(32));
        assert_eq!(Lang::negotiate(Some(&many)), Lang::En);
        let many = format!("{}de", "zz,".repeat(31));
        assert_eq!(Lang::negotiate(Some(&many)), Lang::De);
    }

    #[test]
    fn the_parameter_wins_over_the_header() {
        assert_eq!(Lang::choose(Some("ja"), Some("de")), Lang::Ja);
        assert_eq!(Lang::choose(Some("pt-BR"), None), Lang::Pt);
        assert_eq!(Lang::choose(Some("xx"), Some("de")), Lang::De);
        assert_eq!(Lang::choose(Some(""), Some("fr;q=0.5")), Lang::Fr);
        assert_eq!(Lang::choose(None, None), Lang::En);
        assert_eq!(Lang::choose(Some(&"de".repeat(100)), Some("es")), Lang::Es);
    }

    #[test]
    fn french_spaces_its_punctuation() {
        let t = texts(Lang::Fr);
        let mut checked = 0;
        for (name, text) in strings(t).into_iter().chain([("colon", Lang::Fr.colon())]) {
            let chars: Vec<char> = text.chars().collect();
            for (i, &c) in chars.iter().enumerate() {
                if ":;!?»".contains(c) {
                    checked += 1;
                    assert!(
                        i > 0 && chars[i - 1] == '\u{202f}',
                        "fr.{name}: no narrow no-break space before {c:?}: {text}"
                    );
                }
                if c == '«' {
                    assert_eq!(chars.get(i + 1), Some(&'\u{202f}'), "fr.{name}: {text}");
                }
                assert!(c != '"', "fr.{name}: straight quotes: {text}");
                assert!(c != '\'', "fr.{name}: straight apostrophe: {text}");
            }
            assert!(!text.contains(" :") && !text.contains(" ?") && !text.contains(" !"));
            assert!(!text.contains("\u{a0}:"), "fr.{name}: {text}");
        }
        assert!(checked >= 10, "the check saw the French punctuation");
        assert_eq!(Lang::Fr.colon(), "\u{202f}: ");
        assert_eq!(Lang::En.colon(), ": ");
        assert_eq!(Lang::De.colon(), ": ");
    }

    #[test]
    fn japanese_uses_full_width_punctuation() {
        for (name, text) in strings(texts(Lang::Ja)) {
            assert!(
                !text.contains(['.', ',', ':', ';', '!', '?', '(', ')', ' ']),
                "ja.{name}: {text}"
            );
        }
        assert_eq!(Lang::Ja.colon(), "：");
        assert!(texts(Lang::Ja).your_turn.ends_with('！'));
        assert!(texts(Lang::Ja).staff_refused.ends_with('：'));
    }

    #[test]
    fn sentences_end_and_labels_do_not() {
        for lang in Lang::ALL {
            let t = texts(lang);
            for (name, text) in [("not_found", t.not_found), ("too_many", t.too_many)] {
                assert!(
                    text.ends_with(['.', '。']),
                    "{}.{name} is a sentence: {text}",
                    lang.tag()
                );
            }
            for (name, text) in [
                ("back_to_site", t.back_to_site),
                ("after_event", t.after_event),
                ("notice_heading", t.notice_heading),
            ] {
                assert!(
                    !text.ends_with(['.', '。', ':', '：', ';', '；']),
                    "{}.{name} is a label: {text}",
                    lang.tag()
                );
                assert!(text.chars().count() <= 40, "{}.{name}: {text}", lang.tag());
            }
        }
    }

    /// The `href`s of a switcher, by `hreflang`, with their `&amp;`s read back.
    fn hrefs(html: &str) -> Vec<(String, String)> {
        html.split("<a href=\"")
            .skip(1)
            .map(|a| {
                let href = &a[..a.find('"').unwrap()];
                let lang = a.split("hreflang=\"").nth(1).unwrap();
                (
                    lang[..lang.find('"').unwrap()].to_string(),
                    href.replace("&amp;", "&"),
                )
            })
            .collect()
    }

    #[test]
    fn the_switcher_links_every_language() {
        let hostile = "\"><script>alert(1)</script>";
        let html = switcher(
            Lang::De,
            "/wait/shop",
            &[
                ("next", "/cart?a=1&b=2 x"),
                ("code", hostile),
                ("lang", "fr"),
                ("identity", "a+b/c=="),
            ],
        );
        assert!(
            html.starts_with("<nav class=\"langs\" aria-label=\"Sprache\">"),
            "{html}"
        );
        assert!(html.ends_with("</ul></nav>"));
        assert!(!html.contains("<script"), "{html}");
        assert!(
            html.contains("code=%22%3E%3Cscript%3Ealert%281%29%3C%2Fscript%3E"),
            "{html}"
        );
        // One link per language, the current one marked, each in its own language.
        let links = hrefs(&html);
        assert_eq!(links.len(), Lang::ALL.len());
        assert_eq!(html.matches("aria-current=\"true\"").count(), 1);
        for lang in Lang::ALL {
            let tag = lang.tag();
            let a = format!("hreflang=\"{tag}\" lang=\"{tag}\"");
            let at = html.find(&a).unwrap_or_else(|| panic!("{tag}: {html}"));
            let end = at + html[at..].find("</a>").unwrap();
            let tail = &html[at..end];
            assert!(tail.ends_with(&format!(">{}", lang.endonym())), "{tail}");
            assert_eq!(
                tail.contains("aria-current=\"true\""),
                lang == Lang::De,
                "{tail}"
            );
        }
        // The links read back as the page's query with only the language changed: `lang` first,
        // `next` last and wholly encoded (a raw `next` takes the rest of the query).
        for (tag, href) in links {
            let (path, query) = href.split_once('?').unwrap();
            assert_eq!(path, "/wait/shop");
            assert!(query.starts_with(&format!("lang={tag}&")), "{query}");
            assert!(
                query.contains("&next=%2Fcart%3Fa%3D1%26b%3D2%20x"),
                "{query}"
            );
            assert!(
                query.ends_with("&next=%2Fcart%3Fa%3D1%26b%3D2%20x"),
                "{query}"
            );
            let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query).unwrap();
            let pairs: Vec<(&str, &str)> = pairs
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            assert_eq!(
                pairs,
                [
                    ("lang", tag.as_str()),
                    ("code", hostile),
                    ("identity", "a+b/c=="),
                    ("next", "/cart?a=1&b=2 x")
                ]
            );
        }
    }

    #[test]
    fn the_switcher_escapes_its_path_and_label() {
        let html = switcher(Lang::Fr, "/wait/a\"b<c> d?e&f", &[]);
        assert!(html.contains("aria-label=\"Langue\""), "{html}");
        assert!(!html.contains("a\"b") && !html.contains("<c>"), "{html}");
        let links = hrefs(&html);
        assert_eq!(links.len(), Lang::ALL.len());
        for (tag, href) in links {
            assert_eq!(href, format!("/wait/a%22b%3Cc%3E%20d%3Fe%26f?lang={tag}"));
        }
        let html = switcher(Lang::Ja, "/", &[("", "x"), ("a b", "&")]);
        assert!(html.contains("aria-label=\"言語\""));
        assert!(html.contains("href=\"/?lang=ja&amp;a%20b=%26\""), "{html}");
        assert!(html.contains("lang=\"ja\" aria-current=\"true\""), "{html}");
    }

    #[test]
    fn plurals_follow_each_language() {
        let counts = [0, 1, 2, 5, 22];
        let pl: Vec<String> = counts.iter().map(|&n| people_ahead(Lang::Pl, n)).collect();
        assert_eq!(
            pl,
            [
                "0 osób przed tobą",
                "1 osoba przed tobą",
                "2 osoby przed tobą",
                "5 osób przed tobą",
                "22 osoby przed tobą"
            ]
        );
        let cs: Vec<String> = counts.iter().map(|&n| people_ahead(Lang::Cs, n)).collect();
        assert_eq!(
            cs,
            [
                "0 lidí před vámi",
                "1 člověk před vámi",
                "2 lidé před vámi",
                "5 lidí před vámi",
                "22 lidí před vámi"
            ]
        );
        use PluralCategory::*;
        for (n, pl, cs) in [
            (3, Few, Few),
            (4, Few, Few),
            (11, Many, Other),
            (12, Many, Other),
            (14, Many, Other),
            (21, Many, Other),
            (24, Few, Other),
            (101, Many, Other),
            (102, Few, Other),
            (112, Many, Other),
            (1_000_003, Few, Other),
            (u64::MAX, Many, Other),
        ] {
            assert_eq!(Lang::Pl.plural(n), pl, "pl {n}");
            assert_eq!(Lang::Cs.plural(n), cs, "cs {n}");
        }
        assert_eq!(people_ahead(Lang::En, 1), "1 person ahead of you");
        assert_eq!(people_ahead(Lang::En, 0), "0 people ahead of you");
        assert_eq!(people_ahead(Lang::En, 3), "3 people ahead of you");
        assert_eq!(people_ahead(Lang::Fr, 0), "0 personne devant vous");
        assert_eq!(people_ahead(Lang::Fr, 2), "2 personnes devant vous");
        assert_eq!(people_ahead(Lang::De, 1), "1 Person vor Ihnen");
        assert_eq!(people_ahead(Lang::Fi, 7), "7 henkilöä edelläsi");
        assert_eq!(people_ahead(Lang::Ja, 1), "あなたの前に1人");
        assert_eq!(Lang::Ja.plural(1), Other);
        assert_eq!(Lang::En.plural(21), Other);
        assert_eq!(Lang::Pt.plural(0), One);
        assert_eq!(Few.as_str(), "few");
        assert_eq!(Many.as_str(), "many");
    }
}
