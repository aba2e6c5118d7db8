//! Civil dates in UTC (proleptic Gregorian), by Howard Hinnant's algorithms: one place for the
//! API's RFC 3339 times, `sluice ctl`'s dates and the dashboard's date-time pickers.

/// Days since 1970-01-01 of a civil date.
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (i64::from(m) + 9) % 12;
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The civil date (year, month, day) of a day count since 1970-01-01.
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// Days since 1970-01-01 of a civil date from 1970 on (`None` before).
pub fn unix_days(y: u64, m: u64, d: u64) -> Option<u64> {
    let (y, m, d) = (
        i64::try_from(y).ok()?,
        u32::try_from(m).ok()?,
        u32::try_from(d).ok()?,
    );
    u64::try_from(days_from_civil(y, m, d)).ok()
}

/// The civil date and the time of day of Unix seconds: (year, month, day, hour, minute, second).
pub fn civil_time(secs: u64) -> (i64, u32, u32, u64, u64, u64) {
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    (y, m, d, rest / 3_600, rest % 3_600 / 60, rest % 60)
}

/// `2026-12-24T18:00` (what a date-time picker holds), in UTC.
pub fn picker_utc(unix: u64) -> String {
    let days = (unix / 86_400) as i64;
    let secs = unix % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}",
        secs / 3_600,
        secs % 3_600 / 60
    )
}

/// `2026-12-24 18:00 UTC`, for reading.
pub fn readable_utc(unix: u64) -> String {
    format!("{} UTC", picker_utc(unix).replace('T', " "))
}

/// An instant as RFC 3339 in UTC (`2026-12-24T18:00:00Z`), for `<time datetime>`.
pub fn iso_utc(unix: u64) -> String {
    let (y, m, d, h, min, s) = civil_time(unix);
    format!("{y:04}-{m:02}-{d:02}T{h:02}:{min:02}:{s:02}Z")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_round_trip_and_match_known_days() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(unix_days(2026, 12, 24), Some(20_811));
        assert_eq!(unix_days(1969, 12, 31), None);
        assert_eq!(
            iso_utc(20_811 * 86_400 + 18 * 3_600),
            "2026-12-24T18:00:00Z"
        );
        assert_eq!(
            readable_utc(20_811 * 86_400 + 18 * 3_600),
            "2026-12-24 18:00 UTC"
        );
        for z in [-1_000_000, -1, 0, 59, 11_016, 20_811, 2_000_000] {
            let (y, m, d) = civil_from_days(z);
            assert_eq!(days_from_civil(y, m, d), z);
        }
        assert_eq!(civil_time(1_798_135_200), (2026, 12, 24, 18, 0, 0));
    }
}
