//! The room's configuration form, grouped as an operator thinks of it (capacity and rate,
//! schedule, mode, the visitor's page, who gets a place, the origin, what skips the line), and
//! its reading. Live switches (pause, origin health) are actions of their own, not fields here:
//! saving the form keeps whatever they are at the time.

use super::form::{parse_instant, Field, Fields, Reader, View};
use sluice_ops::model::{
    BrandingBody, BypassBody, BypassPathBody, EntryBody, ExternalChallengeBody, LaneBody, LineBody,
    OriginBody, PowBody, ProbeBody, RoomConfigBody,
};

const MODES: &[(&str, &str)] = &[
    ("fifo", "Queue, first come first served"),
    ("lottery", "Queue, drawn at random"),
    ("passthrough", "No queue: let everyone in"),
    ("reject", "No queue: turn newcomers away"),
];

/// The form's fields, in groups (`templates/admin/config.html`).
#[derive(askama::Template)]
#[template(path = "admin/config.html")]
pub struct ConfigForm<'a> {
    /// The room (its preview's address).
    room: &'a str,
    capacity: Vec<Field>,
    schedule: Vec<Field>,
    mode: Field,
    page: Vec<Field>,
    entry: Vec<Field>,
    origin: Vec<Field>,
    bypass: Vec<Field>,
}

/// The form's fields, in groups.
pub fn fields<'a>(v: &View, cfg: &RoomConfigBody, room: &'a str) -> ConfigForm<'a> {
    ConfigForm {
        room,
        capacity: capacity(v, cfg),
        schedule: schedule(v, cfg),
        mode: v.select("mode", "How visitors get in", &cfg.mode, MODES),
        page: visitor_page(v, cfg),
        entry: entry(v, &cfg.entry),
        origin: origin(v, cfg.origin.as_ref()),
        bypass: bypass(v, &cfg.bypass),
    }
}

fn capacity(v: &View, c: &RoomConfigBody) -> Vec<Field> {
    let e = &c.entry;
    vec![
        v.number(
            "capacity",
            "Capacity",
            Some(c.capacity),
            "Visitors inside at once (active sessions).",
        ),
        v.number(
            "admit_per_minute",
            "Admissions per minute",
            Some(c.admit_per_minute),
            "The most let in per minute, however many places are free.",
        ),
        v.number(
            "admit_burst",
            "Burst",
            Some(c.admit_burst),
            "Admissions at once after a quiet spell; 0: one second's worth.",
        ),
        v.number(
            "max_waiting",
            "Most waiters",
            Some(c.max_waiting),
            "Past it, newcomers are told the line is full.",
        ),
        v.number(
            "session_ttl_secs",
            "Session ends after, seconds idle",
            Some(c.session_ttl_secs),
            "",
        ),
        v.number(
            "waiter_ttl_secs",
            "A waiter is away after, seconds without a check-in",
            Some(c.waiter_ttl_secs),
            "Its page checks in by itself while open.",
        ),
        v.number(
            "entry.grace_secs",
            "Keep an away waiter's place for, seconds more",
            e.grace_secs,
            "Passed over while away, the place is resumed on return; empty: lost at once.",
        ),
        v.number(
            "entry.first_use_ttl_secs",
            "Use an admission within, seconds",
            e.first_use_ttl_secs,
            "Empty: the session's own time.",
        ),
    ]
}

fn schedule(v: &View, c: &RoomConfigBody) -> Vec<Field> {
    let lanes: Vec<String> = c
        .lanes
        .iter()
        .map(|l| {
            let mut line = l.name.clone();
            if let Some(t) = l.opens_at {
                line.push_str(&format!(" opens={}", super::form::picker_utc(t)));
            }
            if let Some(s) = l.share {
                line.push_str(&format!(" share={s}"));
            }
            if l.order == "lottery" {
                line.push_str(" lottery");
            }
            line
        })
        .collect();
    vec![
        v.when("opens_at", "Opens at", c.opens_at, "Before it, visitors wait in a pre-queue. Empty: open now."),
        v.when("closes_at", "Closes at", c.closes_at, "From it, newcomers are turned away. Empty: never."),
        v.check("shuffle_at_open", "Draw the pre-queue's order at the opening", c.shuffle_at_open),
        v.area(
            "lanes",
            "Priority lanes before the room's own line",
            &lanes.join("\n"),
            "One per line, first first: <code>presale opens=2026-12-24T18:00Z share=0.5 lottery</code> (opens in UTC, share and lottery optional).",
        ),
    ]
}

fn visitor_page(v: &View, c: &RoomConfigBody) -> Vec<Field> {
    let b = &c.branding;
    let s = |o: &Option<String>| o.clone().unwrap_or_default();
    vec![
        v.input("branding.title", "Title", &s(&b.title), "text", "The page's heading."),
        v.area("branding.message", "Message", &s(&b.message), "Shown above the place in line."),
        v.input("branding.accent_color", "Accent colour", &s(&b.accent_color), "text", "<code>#rrggbb</code>, at least 3:1 against the background."),
        v.input("branding.background_color", "Background colour", &s(&b.background_color), "text", "<code>#rrggbb</code>, at least 4.5:1 against the text."),
        v.input("branding.text_color", "Text colour", &s(&b.text_color), "text", "<code>#rrggbb</code>; empty: near-black (a dark background needs a light text)."),
        v.input("branding.logo_url", "Logo URL", &s(&b.logo_url), "text", ""),
        v.area("branding.template", "Page template", &s(&b.template), "Empty: the built-in page. HTML with the page's parts where they go: <code>{{ notice }}</code>, <code>{{ position }}</code>, <code>{{ estimate }}</code>, <code>{{ progress }}</code>, <code>{{ join_form }}</code> (each once), <code>{{ switcher }}</code>; values <code>{{ title }}</code>, <code>{{ message }}</code>, <code>{{ logo_url }}</code>, <code>{{ heading }}</code>, <code>{{ room }}</code>, <code>{{ page }}</code>; per language <code>{% if lang == \"de\" %}…{% else %}…{% endif %}</code>. Preview before saving."),
        v.check("line.show_positions", "Show waiters their place in line", c.line.show_positions),
        v.check("line.show_waiting", "Show waiters how many are waiting", c.line.show_waiting),
        v.number("line.status_reads_per_sec", "Polling budget, status reads per second", c.line.status_reads_per_sec, "Empty: none."),
        v.input("line.after_url", "After the event, send visitors to", c.line.after_url.as_deref().unwrap_or(""), "text", "The page of a closed room links here (a sold-out or thank-you page); empty: back to the site."),
        v.area("line.handoff_origins", "Other sites admitted visitors may be sent to", &c.line.handoff_origins.join("\n"), "One origin per line: <code>https://shop.example.com</code>. The application there checks the single-use token each visitor arrives with (deploy/handoff)."),
    ]
}

fn entry(v: &View, e: &EntryBody) -> Vec<Field> {
    let pow = e.proof_of_work.as_ref();
    vec![
        v.check(
            "entry.invite_only",
            "By invitation only (a place needs an access code)",
            e.invite_only,
        ),
        v.check(
            "entry.identity_required",
            "One place per signed-in customer (the shop's identity assertion)",
            e.identity_required,
        ),
        v.number(
            "entry.places_per_client_max",
            "Most places per client network",
            e.places_per_client_max,
            "Empty: no limit.",
        ),
        v.number(
            "entry.sessions_per_client_max",
            "Most admitted sessions per client network",
            e.sessions_per_client_max,
            "Empty: no limit.",
        ),
        v.number(
            "entry.client_prefix_v4",
            "Client network: IPv4 prefix bits",
            Some(u64::from(e.client_prefix_v4)),
            "",
        ),
        v.number(
            "entry.client_prefix_v6",
            "Client network: IPv6 prefix bits",
            Some(u64::from(e.client_prefix_v6)),
            "",
        ),
        v.number(
            "entry.networks_per_session_max",
            "Most client networks per admitted session",
            e.networks_per_session_max,
            "A shared ticket ends; empty: not counted.",
        ),
        v.number(
            "entry.networks_window_secs",
            "Forget a session's network unseen for, seconds",
            e.networks_window_secs,
            "Empty: never.",
        ),
        v.number(
            "entry.pow.work",
            "Proof-of-work: counters to try",
            pow.map(|p| u64::from(p.work)),
            "Empty: no proof-of-work.",
        ),
        v.number(
            "entry.pow.cost",
            "Proof-of-work: PBKDF2 iterations per counter",
            pow.map(|p| u64::from(p.cost)),
            "",
        ),
        v.number(
            "entry.pow.double_every_waiting",
            "Proof-of-work: doubles for every this many waiting",
            pow.and_then(|p| p.double_every_waiting),
            "Empty: never.",
        ),
        v.input(
            "entry.external_challenge.provider",
            "External challenge provider",
            e.external_challenge
                .as_ref()
                .map_or("", |x| x.provider.as_str()),
            "text",
            "A provider named in the nodes' configuration; empty: none.",
        ),
        v.check(
            "entry.external_challenge.fail_open",
            "Let joins through while the provider is down",
            e.external_challenge.as_ref().is_some_and(|x| x.fail_open),
        ),
    ]
}

fn origin(v: &View, o: Option<&OriginBody>) -> Vec<Field> {
    let watched = o.is_some();
    let d = o.cloned().unwrap_or_default();
    let p = d.probe.as_ref();
    let when_watched = |x: Option<u64>| x.filter(|_| watched);
    vec![
        v.input(
            "origin.probe.url",
            "Probe URL",
            p.map_or("", |p| p.url.as_str()),
            "text",
            "Empty: no probe (proxies may still report).",
        ),
        v.number(
            "origin.probe.interval_secs",
            "Probe every, seconds",
            p.map(|p| p.interval_secs),
            "",
        ),
        v.number(
            "origin.probe.timeout_ms",
            "Probe timeout, ms",
            p.map(|p| p.timeout_ms),
            "",
        ),
        v.number(
            "origin.slow_latency_ms",
            "Slow above latency, ms",
            when_watched(d.slow_latency_ms),
            "Empty: not judged.",
        ),
        v.number(
            "origin.down_latency_ms",
            "Down above latency, ms",
            when_watched(d.down_latency_ms),
            "Empty: not judged.",
        ),
        v.number(
            "origin.slow_error_permille",
            "Slow from errors, per mille",
            when_watched(d.slow_error_permille),
            "Empty: not judged.",
        ),
        v.number(
            "origin.down_error_permille",
            "Down from errors, per mille",
            when_watched(d.down_error_permille),
            "Empty: not judged.",
        ),
        v.number(
            "origin.latency_percentile",
            "Latency percentile",
            Some(d.latency_percentile),
            "",
        ),
        v.number(
            "origin.window_secs",
            "Window, seconds",
            Some(d.window_secs),
            "",
        ),
        v.number(
            "origin.min_samples",
            "Fewest samples for a verdict",
            Some(d.min_samples),
            "",
        ),
        v.number(
            "origin.worsen_after_secs",
            "Worsen after, seconds",
            Some(d.worsen_after_secs),
            "",
        ),
        v.number(
            "origin.recover_after_secs",
            "Recover after, seconds",
            Some(d.recover_after_secs),
            "",
        ),
        v.check(
            "origin.auto_pause",
            "Pause the room while the origin is down",
            d.auto_pause,
        ),
    ]
}

fn bypass(v: &View, b: &BypassBody) -> Vec<Field> {
    let paths: Vec<String> = b
        .paths
        .iter()
        .map(|p| {
            if p.methods.is_empty() {
                p.prefix.clone()
            } else {
                format!("{} {}", p.methods.join(","), p.prefix)
            }
        })
        .collect();
    vec![
        v.area("bypass.paths", "Paths that skip the line", &paths.join("\n"), "One per line: <code>/static/</code> or <code>POST /pay/callback</code>; no place is taken."),
        v.area("bypass.networks", "Client networks that skip the line", &b.networks.join("\n"), "One per line: <code>10.1.0.0/16</code>."),
        v.check("bypass.staff_tokens", "Accept staff bypass tokens", b.staff_tokens),
    ]
}

/// Reads the form; `current` gives what the form does not hold (pause, origin health, the
/// timeline). Every
/// field's error is collected.
pub fn read(f: &Fields, current: &RoomConfigBody) -> Result<RoomConfigBody, super::form::Errors> {
    let mut r = Reader::new(f);
    let lanes = parse_lanes(&mut r);
    let bypass = parse_bypass(&mut r);
    let line = LineBody {
        show_waiting: r.checked("line.show_waiting"),
        show_positions: r.checked("line.show_positions"),
        status_reads_per_sec: r.opt_num("line.status_reads_per_sec"),
        after_url: r.text("line.after_url"),
        handoff_origins: r.lines("line.handoff_origins"),
    };
    let origin = parse_origin(&mut r);
    let entry = parse_entry(&mut r);
    let body = RoomConfigBody {
        capacity: r.num("capacity"),
        admit_per_minute: r.num("admit_per_minute"),
        admit_burst: r.num_or("admit_burst", 0),
        session_ttl_secs: r.num("session_ttl_secs"),
        waiter_ttl_secs: r.num("waiter_ttl_secs"),
        mode: r.text("mode").unwrap_or_else(|| "fifo".into()),
        opens_at: r.when("opens_at"),
        closes_at: r.when("closes_at"),
        shuffle_at_open: r.checked("shuffle_at_open"),
        max_waiting: r.num("max_waiting"),
        paused: current.paused,
        health: current.health.clone(),
        slow_factor: current.slow_factor,
        branding: BrandingBody {
            title: r.text("branding.title"),
            message: r.text("branding.message"),
            accent_color: r.text("branding.accent_color"),
            background_color: r.text("branding.background_color"),
            logo_url: r.text("branding.logo_url"),
            text_color: r.text("branding.text_color"),
            template: r.text("branding.template"),
        },
        entry,
        line,
        origin,
        bypass,
        lanes,
        // Kept: the timeline has its own part of the room's page.
        phases: current.phases.clone(),
    };
    if r.errors.is_empty() {
        Ok(body)
    } else {
        Err(r.errors)
    }
}

fn parse_entry(r: &mut Reader) -> EntryBody {
    let d = EntryBody::default();
    let bits = |r: &mut Reader, k: &str, default: u8| {
        r.opt_num(k).map_or(default, |n| {
            u8::try_from(n).unwrap_or_else(|_| {
                r.fail(k, "must be a number of bits");
                default
            })
        })
    };
    let client_prefix_v4 = bits(r, "entry.client_prefix_v4", d.client_prefix_v4);
    let client_prefix_v6 = bits(r, "entry.client_prefix_v6", d.client_prefix_v6);
    let small = |r: &mut Reader, k: &str, v: u64| {
        u32::try_from(v).unwrap_or_else(|_| {
            r.fail(k, "is too large");
            0
        })
    };
    let proof_of_work = match r.opt_num("entry.pow.work") {
        None => None,
        Some(work) => {
            let work = small(r, "entry.pow.work", work);
            let cost = match r.opt_num("entry.pow.cost") {
                Some(c) => small(r, "entry.pow.cost", c),
                None => sluice_ops::model::POW_COST_DEFAULT,
            };
            Some(PowBody {
                work,
                cost,
                double_every_waiting: r.opt_num("entry.pow.double_every_waiting"),
                work_max: None,
            })
        }
    };
    EntryBody {
        first_use_ttl_secs: r.opt_num("entry.first_use_ttl_secs"),
        places_per_client_max: r.opt_num("entry.places_per_client_max"),
        sessions_per_client_max: r.opt_num("entry.sessions_per_client_max"),
        client_prefix_v4,
        client_prefix_v6,
        proof_of_work,
        identity_required: r.checked("entry.identity_required"),
        invite_only: r.checked("entry.invite_only"),
        grace_secs: r.opt_num("entry.grace_secs"),
        networks_per_session_max: r.opt_num("entry.networks_per_session_max"),
        networks_window_secs: r.opt_num("entry.networks_window_secs"),
        external_challenge: r.text("entry.external_challenge.provider").map(|provider| {
            ExternalChallengeBody {
                provider,
                fail_open: r.checked("entry.external_challenge.fail_open"),
            }
        }),
    }
}

/// The origin is watched when a probe URL or any threshold is given.
fn parse_origin(r: &mut Reader) -> Option<OriginBody> {
    let d = OriginBody::default();
    let probe = r.text("origin.probe.url").map(|url| ProbeBody {
        url,
        method: "GET".into(),
        interval_secs: r.num_or("origin.probe.interval_secs", 5),
        timeout_ms: r.num_or("origin.probe.timeout_ms", 2_000),
    });
    let o = OriginBody {
        probe,
        window_secs: r.num_or("origin.window_secs", d.window_secs),
        min_samples: r.num_or("origin.min_samples", d.min_samples),
        latency_percentile: r.num_or("origin.latency_percentile", d.latency_percentile),
        slow_latency_ms: r.opt_num("origin.slow_latency_ms"),
        down_latency_ms: r.opt_num("origin.down_latency_ms"),
        slow_error_permille: r.opt_num("origin.slow_error_permille"),
        down_error_permille: r.opt_num("origin.down_error_permille"),
        worsen_after_secs: r.num_or("origin.worsen_after_secs", d.worsen_after_secs),
        recover_after_secs: r.num_or("origin.recover_after_secs", d.recover_after_secs),
        auto_pause: r.checked("origin.auto_pause"),
    };
    let watched = o.probe.is_some()
        || o.slow_latency_ms.is_some()
        || o.down_latency_ms.is_some()
        || o.slow_error_permille.is_some()
        || o.down_error_permille.is_some();
    watched.then_some(o)
}

/// One lane per line: `name [opens=WHEN] [share=0.5] [lottery]`, WHEN in UTC or unix seconds.
fn parse_lanes(r: &mut Reader) -> Vec<LaneBody> {
    let mut lanes = Vec::new();
    for l in r.lines("lanes") {
        let mut words = l.split_whitespace();
        let mut lane = LaneBody {
            name: words.next().unwrap_or_default().to_string(),
            opens_at: None,
            share: None,
            order: "fifo".into(),
        };
        for w in words {
            let ok = if w == "lottery" {
                lane.order = "lottery".into();
                true
            } else if let Some(t) = w.strip_prefix("opens=") {
                lane.opens_at = parse_instant(t);
                lane.opens_at.is_some()
            } else if let Some(s) = w.strip_prefix("share=") {
                lane.share = s.parse().ok();
                lane.share.is_some()
            } else {
                false
            };
            if !ok {
                r.fail(
                    "lanes",
                    format!("{l:?}: write name [opens=2026-12-24T18:00Z] [share=0.5] [lottery]"),
                );
            }
        }
        lanes.push(lane);
    }
    lanes
}

fn parse_bypass(r: &mut Reader) -> BypassBody {
    let mut paths = Vec::new();
    for l in r.lines("bypass.paths") {
        let mut words = l.split_whitespace();
        match (words.next(), words.next(), words.next()) {
            (Some(prefix), None, _) => paths.push(BypassPathBody {
                prefix: prefix.to_string(),
                methods: vec![],
            }),
            (Some(methods), Some(prefix), None) => paths.push(BypassPathBody {
                prefix: prefix.to_string(),
                methods: methods.split(',').map(str::to_string).collect(),
            }),
            _ => r.fail(
                "bypass.paths",
                format!("{l:?}: write /prefix or METHOD,METHOD /prefix"),
            ),
        }
    }
    BypassBody {
        paths,
        networks: r.lines("bypass.networks"),
        staff_tokens: r.checked("bypass.staff_tokens"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(pairs: &[(&str, &str)]) -> Fields {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn every_wrong_field_is_named_and_live_switches_are_kept() {
        let current = RoomConfigBody {
            paused: true,
            health: "slow".into(),
            ..RoomConfigBody::default()
        };
        let f = fields(&[
            ("capacity", "lots"),
            ("admit_per_minute", "600"),
            ("session_ttl_secs", "600"),
            ("waiter_ttl_secs", ""),
            ("max_waiting", "1000"),
            ("opens_at", "soon"),
            ("lanes", "presale opens=2026-12-24T18:00Z\nvip share=half"),
            ("bypass.paths", "GET POST /x"),
        ]);
        let errors = read(&f, &current).unwrap_err();
        let names: Vec<&str> = errors.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            [
                "bypass.paths",
                "capacity",
                "lanes",
                "opens_at",
                "waiter_ttl_secs"
            ]
        );
        let f = fields(&[
            ("capacity", "5"),
            ("admit_per_minute", "600"),
            ("session_ttl_secs", "600"),
            ("waiter_ttl_secs", "60"),
            ("max_waiting", "1000"),
            ("entry.grace_secs", "120"),
            ("opens_at", "2026-12-24T18:00"),
            ("opens_at.unix", "1798131600"),
            ("lanes", "presale opens=2026-12-24T17:00Z lottery"),
        ]);
        let c = read(&f, &current).unwrap();
        assert_eq!(
            (c.paused, c.health.as_str()),
            (true, "slow"),
            "kept, not reset"
        );
        assert_eq!(
            c.opens_at,
            Some(1_798_131_600),
            "the browser's own conversion"
        );
        assert_eq!(c.entry.grace_secs, Some(120));
        assert_eq!(c.lanes[0].opens_at, Some(1_798_131_600));
        assert_eq!(c.lanes[0].order, "lottery");
    }
}
