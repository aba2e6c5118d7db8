//! The waiting page's words in fifteen languages, chosen by `?lang=` or `Accept-Language`,
//! and the language switcher that links the page in each of them.
//!
//! The words are data: one file per language, `i18n/<tag>.toml`, with a key per field of
//! [`Texts`] (`continue` for `continue_`), `[units]` and `[people_ahead]`. `build.rs` turns them
//! into this module's statics and refuses a file whose keys differ from English's; the tests
//! below check that every language has every text, with English's placeholders.

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
/// number. Languages with two forms repeat `other` as `few` and `many` (their files give `one`
/// and `other` alone).
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
pub(crate) fn percent(s: &str, keep: &[u8]) -> String {
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
    /// The next phase of the sale ({name}) and when it starts ({time}).
    pub next_phase: &'static str,
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

// The statics `EN`, `DE`, …: generated by `build.rs` from `i18n/<tag>.toml`.
include!(concat!(env!("OUT_DIR"), "/texts.rs"));

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
            next_phase,
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
    fn page_templates_are_checked_in_every_language_the_pages_speak() {
        let tags: Vec<&str> = Lang::ALL.iter().map(|l| l.tag()).collect();
        assert_eq!(tags, sluice_ops::page::PAGE_LANGS);
    }

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

    /// Every string of a language's file, by its dotted key.
    fn file_texts(tag: &str) -> std::collections::BTreeMap<String, String> {
        fn walk(
            prefix: &str,
            t: &toml::Table,
            out: &mut std::collections::BTreeMap<String, String>,
        ) {
            for (k, v) in t {
                let key = format!("{prefix}{k}");
                match v {
                    toml::Value::String(s) => {
                        out.insert(key, s.clone());
                    }
                    toml::Value::Table(t) => walk(&format!("{key}."), t, out),
                    other => panic!("{tag}.toml: {key} is {other:?}", tag = "i18n"),
                }
            }
        }
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("i18n")
            .join(format!("{tag}.toml"));
        let table: toml::Table = std::fs::read_to_string(path).unwrap().parse().unwrap();
        let mut out = std::collections::BTreeMap::new();
        walk("", &table, &mut out);
        out
    }

    /// `{…}` placeholders of a text, sorted.
    fn placeholders(text: &str) -> Vec<&str> {
        let mut all: Vec<&str> = text
            .match_indices('{')
            .map(|(i, _)| &text[i..=i + text[i..].find('}').expect("closed placeholder")])
            .collect();
        all.sort_unstable();
        all
    }

    #[test]
    fn every_language_file_has_every_message_and_placeholder() {
        let en = file_texts("en");
        assert_eq!(en.len(), fields(&EN).len() + 4 + 2, "en.toml against Texts");
        let files: Vec<String> = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/i18n"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(files.len(), Lang::ALL.len(), "{files:?}");
        for lang in Lang::ALL {
            let t = file_texts(lang.tag());
            for (key, english) in &en {
                // Two-form languages leave `few` and `many` to `other`.
                let text = match t.get(key) {
                    Some(text) => text,
                    None if key.starts_with("people_ahead.") => &t["people_ahead.other"],
                    None => panic!("{}.toml lacks {key}", lang.tag()),
                };
                assert_eq!(
                    placeholders(text),
                    placeholders(english),
                    "{}.toml: {key}",
                    lang.tag()
                );
            }
            let plural = |k: &str| matches!(k, "people_ahead.few" | "people_ahead.many");
            let extra: Vec<_> = t
                .keys()
                .filter(|k| !en.contains_key(*k) && !plural(k))
                .collect();
            assert!(extra.is_empty(), "{}.toml: {extra:?}", lang.tag());
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
