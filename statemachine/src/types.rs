//! Identifiers and room configuration, with validation.

use crate::limits::*;
use crate::rejection::Rejection;
use serde::{Deserialize, Serialize};
use std::fmt;

/// A visitor's 128-bit identifier. Sluice draws it at the edge (from a generator seeded with OS
/// randomness); inside the state machine it is only data.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, Default)]
pub struct VisitorId(pub [u8; 16]);

impl VisitorId {
    /// The id whose big-endian value is `v`.
    pub const fn from_u128(v: u128) -> Self {
        Self(v.to_be_bytes())
    }

    /// The id as a big-endian number.
    pub const fn as_u128(&self) -> u128 {
        u128::from_be_bytes(self.0)
    }

    /// Parses 32 lowercase or uppercase hex digits.
    pub fn parse_hex(s: &str) -> Option<Self> {
        if s.len() != 32 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        u128::from_str_radix(s, 16).ok().map(Self::from_u128)
    }
}

impl std::hash::Hash for VisitorId {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u128(self.as_u128());
    }
}

impl fmt::Display for VisitorId {
    /// 32 lower-case hex digits (written without the formatting machinery: the gate puts one
    /// in every answer's `x-sluice-visitor`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(std::str::from_utf8(&hex16(&self.0)).expect("hex digits are ASCII"))
    }
}

/// 16 bytes as 32 lower-case hex digits (ASCII), in order: visitor ids, credential ids.
pub(crate) fn hex16(bytes: &[u8; 16]) -> [u8; 32] {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = [0u8; 32];
    for (i, b) in bytes.iter().enumerate() {
        out[2 * i] = DIGITS[usize::from(b >> 4)];
        out[2 * i + 1] = DIGITS[usize::from(b & 15)];
    }
    out
}

impl fmt::Debug for VisitorId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "VisitorId({self})")
    }
}

/// Checks a room or pool name against `[a-z0-9][a-z0-9-]{0,63}`.
pub fn validate_name(field: &'static str, name: &str) -> Result<(), Rejection> {
    let bytes = name.as_bytes();
    let ok = !bytes.is_empty()
        && bytes.len() <= NAME_LEN_MAX
        && (bytes[0].is_ascii_lowercase() || bytes[0].is_ascii_digit())
        && bytes
            .iter()
            .all(|&b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(Rejection::invalid(
            field,
            format!("must match [a-z0-9][a-z0-9-]{{0,{}}}", NAME_LEN_MAX - 1),
        ))
    }
}

/// How a room chooses whom to admit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum Mode {
    /// In order of arrival (sequence number).
    #[default]
    Fifo,
    /// A uniform seeded draw among all waiters.
    Lottery,
    /// Everyone is admitted at once, ignoring capacity and rate; sessions are still counted, and
    /// bounded by [`crate::limits::SESSIONS_PER_ROOM_MAX`].
    Passthrough,
    /// Closed to newcomers; visitors already in line keep their place.
    Reject,
}

impl Mode {
    /// The mode's lowercase name as used on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Fifo => "fifo",
            Mode::Lottery => "lottery",
            Mode::Passthrough => "passthrough",
            Mode::Reject => "reject",
        }
    }

    /// Parses a lowercase mode name.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "fifo" => Mode::Fifo,
            "lottery" => Mode::Lottery,
            "passthrough" => Mode::Passthrough,
            "reject" => Mode::Reject,
            _ => return None,
        })
    }
}

/// The origin's health, which throttles the admission rate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum Health {
    /// Rate × 1.
    #[default]
    Ok,
    /// Rate × `slow_factor_permille` / 1000.
    Slow,
    /// Rate × 0: nobody is admitted.
    Down,
}

impl Health {
    /// The health's lowercase name as used on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Health::Ok => "ok",
            Health::Slow => "slow",
            Health::Down => "down",
        }
    }

    /// Parses a lowercase health name.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "ok" => Health::Ok,
            "slow" => Health::Slow,
            "down" => Health::Down,
            _ => return None,
        })
    }
}

/// How a room's waiting page looks. Replicated with the config so every node serves the same page.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Branding {
    /// Page title.
    pub title: Option<String>,
    /// A message shown above the position.
    pub message: Option<String>,
    /// Accent colour, `#rrggbb`.
    pub accent_color: Option<String>,
    /// Background colour, `#rrggbb`.
    pub background_color: Option<String>,
    /// Logo image, an `https://` or `http://` URL or an absolute path.
    pub logo_url: Option<String>,
}

/// A room's configuration: the brief's room table, plus the token-bucket burst and branding.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoomConfig {
    /// Most admitted sessions active at once (ignored in passthrough mode).
    pub capacity: u64,
    /// Most new admissions per minute: the token bucket's refill rate.
    pub admit_per_minute: u64,
    /// Token-bucket size; 0 means one second's worth of `admit_per_minute`, at least 1.
    pub admit_burst: u64,
    /// A session ends this long after its last recorded activity.
    pub session_ttl_secs: u64,
    /// A waiter who has not checked in for this long loses its place.
    pub waiter_ttl_secs: u64,
    /// How waiters are chosen.
    pub mode: Mode,
    /// Before this instant (ms since the epoch) visitors join a pre-queue; nobody is admitted.
    pub opens_at_ms: Option<u64>,
    /// From this instant (ms since the epoch) new joins are refused.
    pub closes_at_ms: Option<u64>,
    /// Shuffle the pre-queue once, by a seeded draw, at `opens_at_ms`.
    pub shuffle_at_open: bool,
    /// Most waiters; beyond it joins are refused with `queue_full`.
    pub max_waiting: u64,
    /// Silent operator pause: joins still queue, nobody is admitted.
    pub paused: bool,
    /// Origin health throttle.
    pub health: Health,
    /// Rate multiplier in thousandths while `health` is `slow` (1..=999).
    pub slow_factor_permille: u64,
    /// Look of the waiting page.
    pub branding: Branding,
}

impl Default for RoomConfig {
    fn default() -> Self {
        Self {
            capacity: 100,
            admit_per_minute: 600,
            admit_burst: 0,
            session_ttl_secs: 600,
            waiter_ttl_secs: 120,
            mode: Mode::Fifo,
            opens_at_ms: None,
            closes_at_ms: None,
            shuffle_at_open: false,
            max_waiting: 1_000_000,
            paused: false,
            health: Health::Ok,
            slow_factor_permille: 500,
            branding: Branding::default(),
        }
    }
}

fn range(field: &'static str, v: u64, lo: u64, hi: u64) -> Result<(), Rejection> {
    if v < lo || v > hi {
        Err(Rejection::invalid(
            field,
            format!("must be between {lo} and {hi}"),
        ))
    } else {
        Ok(())
    }
}

fn text(field: &'static str, v: &Option<String>, max: usize) -> Result<(), Rejection> {
    match v {
        Some(s) if s.len() > max => Err(Rejection::invalid(
            field,
            format!("must be at most {max} bytes"),
        )),
        Some(s) if s.chars().any(|c| c.is_control() && c != '\n') => Err(Rejection::invalid(
            field,
            "must not contain control characters".to_string(),
        )),
        _ => Ok(()),
    }
}

/// Checks an optional `#rrggbb` colour.
pub fn validate_color(field: &'static str, v: &Option<String>) -> Result<(), Rejection> {
    color(field, v)
}

fn color(field: &'static str, v: &Option<String>) -> Result<(), Rejection> {
    match v {
        Some(s)
            if !(s.len() == 7
                && s.starts_with('#')
                && s[1..].bytes().all(|b| b.is_ascii_hexdigit())) =>
        {
            Err(Rejection::invalid(field, "must be #rrggbb".to_string()))
        }
        _ => Ok(()),
    }
}

/// Checks an operator's notice: not empty, at most [`NOTICE_LEN_MAX`] bytes, no control
/// characters but line breaks.
pub fn validate_notice(v: &Option<String>) -> Result<(), Rejection> {
    if v.as_deref().is_some_and(|t| t.trim().is_empty()) {
        return Err(Rejection::invalid(
            "notice",
            "must not be empty (send none to take it down)".to_string(),
        ));
    }
    text("notice", v, NOTICE_LEN_MAX)
}

impl Branding {
    /// Checks lengths, colours and the logo URL.
    pub fn validate(&self) -> Result<(), Rejection> {
        text("branding.title", &self.title, BRANDING_TITLE_LEN_MAX)?;
        text("branding.message", &self.message, BRANDING_MESSAGE_LEN_MAX)?;
        color("branding.accent_color", &self.accent_color)?;
        color("branding.background_color", &self.background_color)?;
        text("branding.logo_url", &self.logo_url, BRANDING_URL_LEN_MAX)?;
        // As it always was (rooms in the log replay alike): `//host` passes here.
        if let Some(url) = &self.logo_url {
            let ok =
                (url.starts_with("https://") || url.starts_with("http://") || url.starts_with('/'))
                    && !url
                        .bytes()
                        .any(|b| b.is_ascii_whitespace() || b == b'"' || b == b'<' || b == b'>');
            if !ok {
                return Err(Rejection::invalid(
                    "branding.logo_url",
                    "must be an http(s) URL or an absolute path without spaces, quotes or angle brackets".to_string(),
                ));
            }
        }
        Ok(())
    }
}

/// Checks a URL a page links to: at most [`BRANDING_URL_LEN_MAX`] bytes, `http(s)://` or an
/// absolute path (not `//host`), without spaces, quotes, angle brackets or control characters.
pub fn validate_url(field: &'static str, url: &str) -> Result<(), Rejection> {
    text(field, &Some(url.to_string()), BRANDING_URL_LEN_MAX)?;
    let ok = (url.starts_with("https://")
        || url.starts_with("http://")
        || (url.starts_with('/') && !url.starts_with("//")))
        && !url
            .bytes()
            .any(|b| b.is_ascii_whitespace() || b == b'"' || b == b'<' || b == b'>');
    if ok {
        Ok(())
    } else {
        Err(Rejection::invalid(
            field,
            "must be an http(s) URL or an absolute path without spaces, quotes or angle brackets"
                .to_string(),
        ))
    }
}

/// Longest origin a room may hand visitors to.
pub const ORIGIN_LEN_MAX: usize = 200;

/// Checks a web origin as a browser serializes it: `https://host` or `https://host:port`, the
/// host in lower case (an internationalized name in its `xn--` form, an IPv6 address in
/// brackets), no default port, no path, user or query. Plain `http` only for this machine
/// (`localhost`, `127.0.0.1`, `[::1]`): a token in a URL must not cross a network in clear.
pub fn validate_origin(field: &'static str, origin: &str) -> Result<(), Rejection> {
    let bad = |why: &str| Err(Rejection::invalid(field, format!("{origin:?}: {why}")));
    if origin.len() > ORIGIN_LEN_MAX {
        return bad(&format!("longer than {ORIGIN_LEN_MAX} bytes"));
    }
    let (secure, rest) = if let Some(r) = origin.strip_prefix("https://") {
        (true, r)
    } else if let Some(r) = origin.strip_prefix("http://") {
        (false, r)
    } else {
        return bad("must start with https:// (or http:// for this machine)");
    };
    let (host, port) = match rest.strip_prefix('[') {
        Some(v6) => {
            let Some((addr, after)) = v6.split_once(']') else {
                return bad("an IPv6 address needs its closing bracket");
            };
            let v6_ok = !addr.is_empty()
                && addr
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b) || b == b':');
            if !v6_ok {
                return bad("not an IPv6 address in lower case");
            }
            let port = match after {
                "" => None,
                a => match a.strip_prefix(':') {
                    Some(p) => Some(p),
                    None => return bad("only a port may follow the host"),
                },
            };
            (&rest[..addr.len() + 2], port)
        }
        None => match rest.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (rest, None),
        },
    };
    let name_ok = |h: &str| {
        !h.is_empty()
            && h.len() <= 253
            && h.split('.').all(|label| {
                !label.is_empty()
                    && label.len() <= 63
                    && !label.starts_with('-')
                    && !label.ends_with('-')
                    && label
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            })
    };
    if !host.starts_with('[') && !name_ok(host) {
        return bad(
            "the host must be a name or address in lower case, with nothing after it but a port",
        );
    }
    if let Some(p) = port {
        let n: u16 = match p.parse() {
            Ok(n) if n > 0 && !p.starts_with('0') => n,
            _ => return bad("the port must be a number from 1 to 65535"),
        };
        if n == if secure { 443 } else { 80 } {
            return bad("write it without its default port, as browsers do");
        }
    }
    if !secure && !matches!(host, "localhost" | "127.0.0.1" | "[::1]") {
        return bad("must use https:// (plain http only for localhost)");
    }
    Ok(())
}

impl RoomConfig {
    /// Checks every field; the rejection names the first field that is wrong.
    pub fn validate(&self) -> Result<(), Rejection> {
        range("capacity", self.capacity, 1, CAPACITY_MAX)?;
        range(
            "admit_per_minute",
            self.admit_per_minute,
            1,
            ADMIT_PER_MINUTE_MAX,
        )?;
        range("admit_burst", self.admit_burst, 0, ADMIT_BURST_MAX)?;
        range("session_ttl_secs", self.session_ttl_secs, 1, TTL_SECS_MAX)?;
        range("waiter_ttl_secs", self.waiter_ttl_secs, 1, TTL_SECS_MAX)?;
        range("max_waiting", self.max_waiting, 1, WAITERS_PER_ROOM_MAX)?;
        range("slow_factor_permille", self.slow_factor_permille, 1, 999)?;
        if let Some(t) = self.opens_at_ms {
            range("opens_at", t, 0, INSTANT_MS_MAX)?;
        }
        if let Some(t) = self.closes_at_ms {
            range("closes_at", t, 0, INSTANT_MS_MAX)?;
        }
        if let (Some(open), Some(close)) = (self.opens_at_ms, self.closes_at_ms) {
            if close <= open {
                return Err(Rejection::invalid(
                    "closes_at",
                    "must be later than opens_at".to_string(),
                ));
            }
        }
        if self.shuffle_at_open && self.opens_at_ms.is_none() {
            return Err(Rejection::invalid(
                "shuffle_at_open",
                "needs opens_at".to_string(),
            ));
        }
        self.branding.validate()
    }

    /// The token bucket's size in whole admissions.
    pub fn burst(&self) -> u64 {
        if self.admit_burst > 0 {
            self.admit_burst
        } else {
            self.admit_per_minute.div_ceil(60).max(1)
        }
    }

    /// The health multiplier in thousandths.
    pub fn rate_permille(&self) -> u64 {
        match self.health {
            Health::Ok => 1000,
            Health::Slow => self.slow_factor_permille,
            Health::Down => 0,
        }
    }

    /// The admission setpoint per minute after the health multiplier (rounded down).
    pub fn effective_setpoint_per_minute(&self) -> u64 {
        self.admit_per_minute * self.rate_permille() / 1000
    }
}

/// A visitor's identity (the subject of the shop's assertion), hashed with the room's salt:
/// 16 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct IdentityKey(pub [u8; 16]);

/// Why bytes could not be decoded.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DecodeError {
    /// Nothing to decode.
    #[error("empty input")]
    Empty,
    /// A version this build does not know.
    #[error("unknown encoding version {0}")]
    Version(u8),
    /// The bytes are not a valid encoding.
    #[error("malformed encoding: {0}")]
    Malformed(String),
    /// A bound was exceeded.
    #[error("too large: {0}")]
    TooLarge(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for ok in ["a", "0", "sale-2026", &"a".repeat(64)] {
            assert!(validate_name("room", ok).is_ok(), "{ok}");
        }
        for bad in ["", "-a", "A", "a_b", "a b", "é", &"a".repeat(65)] {
            let err = validate_name("room", bad).unwrap_err();
            assert_eq!(err.field(), Some("room"), "{bad}");
        }
    }

    /// Only an origin as a browser writes it is taken: a host that could hide another
    /// (`@`, a path, a trailing dot or slash), a default port, or plain http across a network
    /// never matches, so it is refused when set.
    #[test]
    fn origins_are_taken_only_as_browsers_write_them() {
        for ok in [
            "https://shop.example.com",
            "https://shop.example.com:8443",
            "https://xn--bcher-kva.example",
            "https://10.0.0.7",
            "https://[2001:db8::1]:8443",
            "http://localhost:8081",
            "http://127.0.0.1:3000",
            "http://[::1]:3000",
        ] {
            assert!(validate_origin("o", ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "shop.example.com",
            "https://",
            "https://Shop.example.com",
            "https://shop.example.com/",
            "https://shop.example.com/path",
            "https://shop.example.com.",
            "https://user@shop.example.com",
            "https://shop.example.com?x=1",
            "https://shop.example.com#x",
            "https://shop.example.com:443",
            "http://localhost:80",
            "https://shop.example.com:0",
            "https://shop.example.com:65536",
            "https://shop.example.com:08443",
            "https://shop.example.com:",
            "https://-shop.example.com",
            "https://shop..example.com",
            "https://[2001:DB8::1]",
            "https://[::1]x",
            "https://[::1",
            "http://shop.example.com",
            "http://10.0.0.7:8080",
            "javascript://x",
            "https://b\u{fc}cher.example",
            &format!("https://{}.example", "a".repeat(ORIGIN_LEN_MAX)),
        ] {
            let e = validate_origin("line.handoff_origins", bad).unwrap_err();
            assert_eq!(e.field(), Some("line.handoff_origins"), "{bad}");
        }
    }

    /// The id reads as its big-endian value in 32 zero-padded lower-case hex digits.
    #[test]
    fn visitor_id_displays_as_its_value_in_hex() {
        for v in [
            0u128,
            1,
            0xab,
            u128::MAX,
            0x0123_4567_89ab_cdef_fedc_ba98_7654_3210,
        ] {
            let id = VisitorId::from_u128(v);
            assert_eq!(id.to_string(), format!("{v:032x}"));
            assert_eq!(VisitorId::parse_hex(&id.to_string()), Some(id));
        }
    }

    #[test]
    fn visitor_id_hex_round_trip() {
        let id = VisitorId::from_u128(0x0123_4567_89ab_cdef_0011_2233_4455_6677);
        let s = id.to_string();
        assert_eq!(s, "0123456789abcdef0011223344556677");
        assert_eq!(VisitorId::parse_hex(&s), Some(id));
        assert_eq!(VisitorId::parse_hex("xyz"), None);
        assert_eq!(VisitorId::parse_hex(&"g".repeat(32)), None);
        assert_eq!(
            VisitorId::parse_hex("+123456789abcdef0011223344556677"),
            None
        );
    }

    #[test]
    fn config_validation_names_the_field() {
        let good = RoomConfig::default();
        assert!(good.validate().is_ok());
        let cases: Vec<(&str, RoomConfig)> = vec![
            (
                "capacity",
                RoomConfig {
                    capacity: 0,
                    ..good.clone()
                },
            ),
            (
                "capacity",
                RoomConfig {
                    capacity: CAPACITY_MAX + 1,
                    ..good.clone()
                },
            ),
            (
                "admit_per_minute",
                RoomConfig {
                    admit_per_minute: 0,
                    ..good.clone()
                },
            ),
            (
                "admit_burst",
                RoomConfig {
                    admit_burst: ADMIT_BURST_MAX + 1,
                    ..good.clone()
                },
            ),
            (
                "session_ttl_secs",
                RoomConfig {
                    session_ttl_secs: 0,
                    ..good.clone()
                },
            ),
            (
                "waiter_ttl_secs",
                RoomConfig {
                    waiter_ttl_secs: TTL_SECS_MAX + 1,
                    ..good.clone()
                },
            ),
            (
                "max_waiting",
                RoomConfig {
                    max_waiting: 0,
                    ..good.clone()
                },
            ),
            (
                "slow_factor_permille",
                RoomConfig {
                    slow_factor_permille: 1000,
                    ..good.clone()
                },
            ),
            (
                "opens_at",
                RoomConfig {
                    opens_at_ms: Some(INSTANT_MS_MAX + 1),
                    ..good.clone()
                },
            ),
            (
                "closes_at",
                RoomConfig {
                    opens_at_ms: Some(10),
                    closes_at_ms: Some(10),
                    ..good.clone()
                },
            ),
            (
                "shuffle_at_open",
                RoomConfig {
                    shuffle_at_open: true,
                    ..good.clone()
                },
            ),
            (
                "branding.title",
                RoomConfig {
                    branding: Branding {
                        title: Some("x".repeat(121)),
                        ..Default::default()
                    },
                    ..good.clone()
                },
            ),
            (
                "branding.accent_color",
                RoomConfig {
                    branding: Branding {
                        accent_color: Some("red".into()),
                        ..Default::default()
                    },
                    ..good.clone()
                },
            ),
            (
                "branding.logo_url",
                RoomConfig {
                    branding: Branding {
                        logo_url: Some("javascript:alert(1)".into()),
                        ..Default::default()
                    },
                    ..good.clone()
                },
            ),
            (
                "branding.message",
                RoomConfig {
                    branding: Branding {
                        message: Some("a\u{0}b".into()),
                        ..Default::default()
                    },
                    ..good.clone()
                },
            ),
        ];
        for (field, cfg) in cases {
            let err = cfg.validate().unwrap_err();
            assert_eq!(err.field(), Some(field), "{cfg:?}");
        }
    }

    #[test]
    fn burst_and_rate() {
        let c = RoomConfig {
            admit_per_minute: 600,
            ..Default::default()
        };
        assert_eq!(c.burst(), 10);
        let c = RoomConfig {
            admit_per_minute: 1,
            ..Default::default()
        };
        assert_eq!(c.burst(), 1);
        let c = RoomConfig {
            admit_per_minute: 61,
            admit_burst: 0,
            ..Default::default()
        };
        assert_eq!(c.burst(), 2);
        let c = RoomConfig {
            admit_burst: 7,
            ..Default::default()
        };
        assert_eq!(c.burst(), 7);
        let c = RoomConfig {
            health: Health::Slow,
            slow_factor_permille: 250,
            admit_per_minute: 600,
            ..Default::default()
        };
        assert_eq!(c.effective_setpoint_per_minute(), 150);
        let c = RoomConfig {
            health: Health::Down,
            ..Default::default()
        };
        assert_eq!(c.effective_setpoint_per_minute(), 0);
    }
}
