//! Times and durations as an operator types and reads them: `7d`, `2026-12-24T18:00:00Z`,
//! `@1767225600` in; `2026-12-24 18:00 UTC` out. UTC only, so that what one operator reads is
//! what another types, whatever their machines' time zones.

/// Unix seconds from a time from now (`7d`), a UTC date and time (`2026-12-24T18:00:00Z`,
/// `2026-12-24`), or `@1767225600`.
pub fn parse_when(s: &str) -> Result<u64, String> {
    let s = s.trim();
    if let Some(secs) = s.strip_prefix('@') {
        return secs
            .parse()
            .map_err(|_| format!("{s:?}: @ and unix seconds"));
    }
    if s.len() >= 10 && s.as_bytes()[4] == b'-' {
        return parse_utc(s)
            .ok_or_else(|| format!("{s:?}: a UTC time as 2026-12-24T18:00:00Z (or 2026-12-24)"));
    }
    Ok(now_secs() + parse_duration(s)?)
}

/// Seconds since the epoch, by this machine's clock.
pub fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// `YYYY-MM-DD`, `YYYY-MM-DDTHH:MM[:SS]Z` as unix seconds.
fn parse_utc(s: &str) -> Option<u64> {
    let num = |r: std::ops::Range<usize>| -> Option<u64> {
        let t = s.get(r)?;
        t.bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| t.parse().ok())?
    };
    let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    if s.as_bytes().get(7) != Some(&b'-') || !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    let (hh, mm, ss) = match s.len() {
        10 => (0, 0, 0),
        17 if s.ends_with('Z') && &s[10..11] == "T" && &s[13..14] == ":" => {
            (num(11..13)?, num(14..16)?, 0)
        }
        20 if s.ends_with('Z') && &s[10..11] == "T" && &s[13..14] == ":" && &s[16..17] == ":" => {
            (num(11..13)?, num(14..16)?, num(17..19)?)
        }
        _ => return None,
    };
    if hh > 23 || mm > 59 || ss > 59 {
        return None;
    }
    let days = sluice_ops::civil::unix_days(y, m, d)?;
    Some(days * 86_400 + hh * 3_600 + mm * 60 + ss)
}

/// Unix seconds as `2026-12-24 18:00 UTC` (with `:SS` when the seconds are not zero).
pub fn format_utc(secs: u64) -> String {
    let (y, m, d, hh, mm, ss) = sluice_ops::civil::civil_time(secs);
    if ss == 0 {
        format!("{y:04}-{m:02}-{d:02} {hh:02}:{mm:02} UTC")
    } else {
        format!("{y:04}-{m:02}-{d:02} {hh:02}:{mm:02}:{ss:02} UTC")
    }
}

/// Seconds from `90`, `90s`, `30m`, `8h` or `2d`.
pub fn parse_duration(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (digits, unit) = match s.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => s.split_at(i),
        None => (s, "s"),
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{s:?}: a number of seconds, or with s, m, h or d"))?;
    let factor = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3_600,
        "d" => 86_400,
        _ => return Err(format!("{s:?}: the unit must be s, m, h or d")),
    };
    n.checked_mul(factor)
        .ok_or_else(|| format!("{s:?} is too long"))
}

/// Seconds as a person says them: `90 s`, `30 min`, `8 h`, `2 d` (whole units only; otherwise
/// seconds).
pub fn format_duration(secs: u64) -> String {
    match secs {
        s if s >= 86_400 && s % 86_400 == 0 => format!("{} d", s / 86_400),
        s if s >= 3_600 && s % 3_600 == 0 => format!("{} h", s / 3_600),
        s if s >= 60 && s % 60 == 0 => format!("{} min", s / 60),
        s => format!("{s} s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_as_utc_dates_or_from_now() {
        assert_eq!(parse_when("@1767225600"), Ok(1_767_225_600));
        assert_eq!(parse_when("2026-01-01"), Ok(1_767_225_600));
        assert_eq!(parse_when("2026-01-01T00:00Z"), Ok(1_767_225_600));
        assert_eq!(parse_when("2024-02-29T12:30:15Z"), Ok(1_709_209_815));
        assert_eq!(parse_when("1970-01-01T00:00:00Z"), Ok(0));
        let now = now_secs();
        let later = parse_when("7d").unwrap();
        assert!((now + 604_800..now + 604_900).contains(&later));
        for bad in [
            "2026-13-01",
            "2026-01-01T25:00Z",
            "2026-01-01 10:00",
            "@x",
            "soon",
        ] {
            assert!(parse_when(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn times_are_shown_in_utc_and_read_back_the_same() {
        assert_eq!(format_utc(0), "1970-01-01 00:00 UTC");
        assert_eq!(format_utc(1_767_225_600), "2026-01-01 00:00 UTC");
        assert_eq!(format_utc(1_709_209_815), "2024-02-29 12:30:15 UTC");
        assert_eq!(format_utc(1_798_135_200), "2026-12-24 18:00 UTC");
        for secs in [0, 951_782_400, 1_709_209_815, 4_102_444_799, 1_798_135_200] {
            let shown = format_utc(secs);
            let typed = format!("{}T{}Z", &shown[..10], shown[11..].trim_end_matches(" UTC"));
            assert_eq!(parse_utc(&typed), Some(secs), "{shown}");
        }
    }

    #[test]
    fn durations_take_a_unit_or_mean_seconds() {
        assert_eq!(parse_duration("90"), Ok(90));
        assert_eq!(parse_duration("90s"), Ok(90));
        assert_eq!(parse_duration("30m"), Ok(1_800));
        assert_eq!(parse_duration("8h"), Ok(28_800));
        assert_eq!(parse_duration("2d"), Ok(172_800));
        for bad in ["", "h", "8w", "-1", "1.5h", "99999999999999999999d"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        assert_eq!(format_duration(90), "90 s");
        assert_eq!(format_duration(1_800), "30 min");
        assert_eq!(format_duration(28_800), "8 h");
        assert_eq!(format_duration(172_800), "2 d");
        assert_eq!(format_duration(0), "0 s");
    }
}
