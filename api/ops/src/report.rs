//! Reports after a sale, from the ledger: `GET /v1/rooms/{room}/report` (JSON or CSV),
//! `sluice ctl report`, the dashboard's report page. Per minute of log time: arrivals
//! (places taken), admissions, abandonments (waiters who left or stopped checking in), the
//! waits of those admitted (median, p90, p99) and how often the estimate shown was right; and
//! the same over the whole range.
//!
//! A wait is measured for an admission whose place was taken within the range (start the report
//! before the room opened to measure every one). The estimate a visitor was shown is not in the
//! ledger: it is the one this node's history ([`crate::history`]) recorded for the newest waiter
//! at its first sample after the place was taken, within two sample steps (so for the last day at
//! most, and only where the node sampled then). It was right when the wait came within
//! [`ESTIMATE_SLACK_SECS`] or a quarter of the estimate, whichever is more.

use crate::core::Sluice;
use crate::error::{ApiError, Kind};
use crate::history::{Sample, SAMPLE_EVERY_SECS};
use crate::ledger::{rfc3339, time_param};
use serde::{Deserialize, Serialize};
use sluice_raft::{LedgerQuery, LEDGER_PAGE_MAX};
use sluice_statemachine::ledger::{Event, Record};
use sluice_statemachine::EndReason;
use std::collections::BTreeMap;
use utoipa::ToSchema;

/// Longest range a report covers: a week of minutes.
pub const REPORT_MINUTES_MAX: u64 = 7 * 24 * 60;
/// The range a report covers when `from` is not given: the day before `to`.
pub const REPORT_DEFAULT_SECS: u64 = 86_400;
/// Most ledger records one report reads (about 2 million: a sale of several hundred thousand
/// visitors); a longer one is refused, asking for a shorter range.
pub const REPORT_RECORDS_MAX: usize = 2_000_000;
/// An estimate is right when the wait came within this many seconds of it (or a quarter of
/// it, whichever is more).
pub const ESTIMATE_SLACK_SECS: u64 = 60;

/// Reports being made on this node: one at a time.
static REPORTS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(1);

/// What a report asks.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReportParams {
    /// From this log time (RFC 3339, or ms since the epoch; default: a day before `to`).
    #[serde(default)]
    pub from: Option<String>,
    /// To this log time (default: now).
    #[serde(default)]
    pub to: Option<String>,
    /// `json` (default) or `csv`.
    #[serde(default)]
    pub format: Option<String>,
}

impl ReportParams {
    /// The range in ms, checked: `from` ≤ `to`, at most [`REPORT_MINUTES_MAX`] minutes.
    pub fn range(&self, now_ms: u64) -> Result<(u64, u64), ApiError> {
        let to = time_param("to", &self.to)?.unwrap_or(now_ms);
        let from = time_param("from", &self.from)?
            .unwrap_or_else(|| to.saturating_sub(REPORT_DEFAULT_SECS * 1000));
        if from > to {
            return Err(ApiError::invalid("from", "from: is after to"));
        }
        if (to - from) / 60_000 >= REPORT_MINUTES_MAX {
            return Err(ApiError::invalid(
                "to",
                format!(
                    "to: a report covers at most {} days",
                    REPORT_MINUTES_MAX / 1_440
                ),
            ));
        }
        Ok((from, to))
    }

    /// Whether CSV is asked (`format=csv`); 400 for a format that is neither.
    pub fn csv(&self) -> Result<bool, ApiError> {
        match self.format.as_deref() {
            None | Some("") | Some("json") => Ok(false),
            Some("csv") => Ok(true),
            Some(_) => Err(ApiError::invalid("format", "format: json or csv")),
        }
    }
}

/// One minute of a report (or its totals).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ReportRowBody {
    /// The minute's start (RFC 3339; `total` in the totals).
    pub minute: String,
    /// Places taken.
    pub arrivals: u64,
    /// Admissions.
    pub admissions: u64,
    /// Waiters who left the line, or lost their place by not checking in.
    pub abandonments: u64,
    /// Admissions whose wait is measured (their place was taken within the report's range).
    pub waits_measured: u64,
    /// Median wait of those, seconds.
    pub wait_p50_secs: Option<u64>,
    /// 90th percentile.
    pub wait_p90_secs: Option<u64>,
    /// 99th percentile.
    pub wait_p99_secs: Option<u64>,
    /// Admissions whose estimate is known ([`crate::report`]).
    pub estimates_compared: u64,
    /// Of those, estimates that were right.
    pub estimates_right: u64,
}

/// A room's report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ReportBody {
    /// The room.
    pub room: String,
    /// The range's start (RFC 3339).
    pub from: String,
    /// The range's end.
    pub to: String,
    /// Every minute of the range, in order (empty minutes too).
    pub minutes: Vec<ReportRowBody>,
    /// The whole range.
    pub totals: ReportRowBody,
    /// Ledger records read.
    pub records: u64,
    /// This node's records are whole from this log index on: a report of earlier times is
    /// only whole on a node that holds them.
    pub complete_from: u64,
}

/// The CSV header of a report's minutes.
pub const CSV_HEADER: &str = "minute,arrivals,admissions,abandonments,waits_measured,\
wait_p50_secs,wait_p90_secs,wait_p99_secs,estimates_compared,estimates_right";

impl ReportBody {
    /// The minutes as CSV (RFC 4180: a header, then one line per minute; an unknown figure is
    /// empty).
    pub fn csv(&self) -> String {
        let mut out = String::with_capacity(64 * (self.minutes.len() + 1));
        out.push_str(CSV_HEADER);
        out.push_str("\r\n");
        let opt = |v: Option<u64>| v.map(|v| v.to_string()).unwrap_or_default();
        for r in &self.minutes {
            out.push_str(&format!(
                "{},{},{},{},{},{},{},{},{},{}\r\n",
                r.minute,
                r.arrivals,
                r.admissions,
                r.abandonments,
                r.waits_measured,
                opt(r.wait_p50_secs),
                opt(r.wait_p90_secs),
                opt(r.wait_p99_secs),
                r.estimates_compared,
                r.estimates_right
            ));
        }
        out
    }
}

/// A minute's counts while records are read.
#[derive(Debug, Default)]
struct Minute {
    arrivals: u64,
    admissions: u64,
    abandonments: u64,
    waits_ms: Vec<u64>,
    estimates_compared: u64,
    estimates_right: u64,
}

/// The counts of a report, record by record.
#[derive(Debug)]
pub struct Tally {
    from_ms: u64,
    to_ms: u64,
    /// By minute since the epoch.
    minutes: BTreeMap<u64, Minute>,
    /// When each place taken within the range was taken, by sequence number.
    joined_ms: BTreeMap<u64, u64>,
    /// Admissions with a measured wait: (minute, sequence number, wait ms), for the estimates.
    admitted: Vec<(u64, u64, u64, u64)>,
}

impl Tally {
    /// For the log times `from_ms..=to_ms`.
    pub fn new(from_ms: u64, to_ms: u64) -> Self {
        Tally {
            from_ms,
            to_ms,
            minutes: BTreeMap::new(),
            joined_ms: BTreeMap::new(),
            admitted: Vec::new(),
        }
    }

    /// Counts one of the room's records (in log order; others of the range are ignored).
    pub fn add(&mut self, r: &Record) {
        if r.time_ms < self.from_ms || r.time_ms > self.to_ms {
            return;
        }
        let minute = r.time_ms / 60_000;
        match &r.event {
            Event::Joined { seq, .. } => {
                self.joined_ms.insert(*seq, r.time_ms);
                self.minutes.entry(minute).or_default().arrivals += 1;
            }
            Event::Admitted { seq, .. } => {
                let m = self.minutes.entry(minute).or_default();
                m.admissions += 1;
                if let Some(&j) = self.joined_ms.get(seq) {
                    let wait = r.time_ms.saturating_sub(j);
                    m.waits_ms.push(wait);
                    self.admitted.push((minute, *seq, j, wait));
                }
            }
            Event::Ended {
                reason: EndReason::Left | EndReason::Abandoned,
                admitted: false,
                seq,
                ..
            } => {
                self.joined_ms.remove(seq);
                self.minutes.entry(minute).or_default().abandonments += 1;
            }
            _ => {}
        }
    }

    /// The report, comparing waits with the estimates `samples` (this node's history of the
    /// room, oldest first) recorded.
    pub fn finish(
        mut self,
        room: &str,
        samples: &[Sample],
        records: u64,
        complete_from: u64,
    ) -> ReportBody {
        for &(minute, seq, joined, wait) in &self.admitted {
            if let Some(shown) = shown_estimate(samples, seq, joined) {
                let m = self.minutes.entry(minute).or_default();
                m.estimates_compared += 1;
                if estimate_right(shown, wait / 1000) {
                    m.estimates_right += 1;
                }
            }
        }
        let mut all = Minute::default();
        let mut rows = Vec::new();
        for minute in self.from_ms / 60_000..=self.to_ms / 60_000 {
            let m = self.minutes.remove(&minute).unwrap_or_default();
            all.arrivals += m.arrivals;
            all.admissions += m.admissions;
            all.abandonments += m.abandonments;
            all.estimates_compared += m.estimates_compared;
            all.estimates_right += m.estimates_right;
            all.waits_ms.extend_from_slice(&m.waits_ms);
            rows.push(row(rfc3339(minute * 60_000), m));
        }
        ReportBody {
            room: room.to_string(),
            from: rfc3339(self.from_ms),
            to: rfc3339(self.to_ms),
            minutes: rows,
            totals: row("total".into(), all),
            records,
            complete_from,
        }
    }
}

fn row(minute: String, mut m: Minute) -> ReportRowBody {
    m.waits_ms.sort_unstable();
    let p = |q: u64| percentile(&m.waits_ms, q).map(|ms| ms / 1000);
    ReportRowBody {
        minute,
        arrivals: m.arrivals,
        admissions: m.admissions,
        abandonments: m.abandonments,
        waits_measured: m.waits_ms.len() as u64,
        wait_p50_secs: p(50),
        wait_p90_secs: p(90),
        wait_p99_secs: p(99),
        estimates_compared: m.estimates_compared,
        estimates_right: m.estimates_right,
    }
}

/// The nearest-rank `q`th percentile of `sorted`.
fn percentile(sorted: &[u64], q: u64) -> Option<u64> {
    let n = sorted.len() as u64;
    (n > 0).then(|| sorted[((q * n).div_ceil(100)).clamp(1, n) as usize - 1])
}

/// Whether a wait of `wait_secs` came close enough to an estimate of `shown_secs`.
pub fn estimate_right(shown_secs: u64, wait_secs: u64) -> bool {
    wait_secs.abs_diff(shown_secs) <= ESTIMATE_SLACK_SECS.max(shown_secs / 4)
}

/// The estimate the newest waiter was shown at the first sample that saw the place `seq`
/// (taken at `joined_ms`), if that sample came within two steps of it.
fn shown_estimate(samples: &[Sample], seq: u64, joined_ms: u64) -> Option<u64> {
    let at = samples.partition_point(|s| s.next_seq <= seq);
    let s = samples.get(at)?;
    if (s.t * 1000).saturating_sub(joined_ms) > 2 * SAMPLE_EVERY_SECS * 1000 {
        return None;
    }
    s.newest_eta_secs
}

impl Sluice {
    /// `GET /v1/rooms/{room}/report`: the room's report over the range `params` asks, from
    /// this node's ledger (a room since deleted too), its estimates compared with `samples`
    /// (this node's history of the room).
    pub async fn report(
        &self,
        room: &str,
        params: &ReportParams,
        samples: &[Sample],
    ) -> Result<ReportBody, ApiError> {
        Self::check_room(room)?;
        let (from_ms, to_ms) = params.range(self.now_ms())?;
        // One at a time: a report may read millions of records.
        let Ok(_one) = REPORTS.try_acquire() else {
            return Err(ApiError::new(
                Kind::TooMany,
                "report_busy",
                "this node is making another report: try again in a moment".to_string(),
            )
            .retry(1));
        };
        self.ledger_caught_up(false).await?;
        let mut tally = Tally::new(from_ms, to_ms);
        let (mut after, mut read, mut complete_from) = (None, 0usize, 1);
        loop {
            let page = self
                .ledger_query(LedgerQuery {
                    room: room.to_string(),
                    from_ms: Some(from_ms),
                    to_ms: Some(to_ms),
                    after,
                    limit: LEDGER_PAGE_MAX,
                    ..LedgerQuery::default()
                })
                .await?;
            complete_from = page.complete_from.max(complete_from);
            read += page.records.len();
            if read > REPORT_RECORDS_MAX {
                return Err(ApiError::new(
                    Kind::TooLarge,
                    "report_too_large",
                    format!(
                        "the range holds more than {REPORT_RECORDS_MAX} ledger records: ask for \
a shorter one"
                    ),
                ));
            }
            for r in &page.records {
                tally.add(r);
            }
            match page.next {
                Some(k) => after = Some(k),
                None => break,
            }
        }
        Ok(tally.finish(room, samples, read as u64, complete_from))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_statemachine::ledger::Rule;
    use sluice_statemachine::VisitorId;

    fn rec(time_ms: u64, event: Event) -> Record {
        Record {
            index: time_ms,
            sub: 0,
            n: 0,
            time_ms,
            room: "sale".into(),
            by: None,
            event,
        }
    }

    fn joined(seq: u64) -> Event {
        Event::Joined {
            visitor: VisitorId::from_u128(seq as u128),
            seq,
            lane: None,
            position: seq,
        }
    }

    fn admitted(seq: u64) -> Event {
        Event::Admitted {
            visitor: VisitorId::from_u128(seq as u128),
            seq,
            lane: None,
            rule: Rule::Head,
        }
    }

    fn ended(seq: u64, reason: EndReason, admitted: bool) -> Event {
        Event::Ended {
            visitor: VisitorId::from_u128(seq as u128),
            seq,
            reason,
            admitted,
        }
    }

    const T0: u64 = 1_800_000_000_000; // a minute's start

    /// Each minute counts what happened in it; waits are measured for places taken within the
    /// range, with nearest-rank percentiles; only waiters who left or stopped checking in are
    /// abandonments; every minute of the range has a row.
    #[test]
    fn minutes_count_arrivals_admissions_abandonments_and_waits() {
        let mut t = Tally::new(T0, T0 + 3 * 60_000 - 1);
        t.add(&rec(T0 - 1, joined(1))); // before the range: its admission's wait is unknown
        for seq in 2..=11 {
            t.add(&rec(T0 + seq * 1_000, joined(seq)));
        }
        t.add(&rec(T0 + 30_000, admitted(1)));
        // Admitted in the second minute, after waiting 62, 63, … 70 s.
        for seq in 2..=10 {
            t.add(&rec(T0 + seq * 1_000 + (60 + seq) * 1_000, admitted(seq)));
        }
        t.add(&rec(T0 + 100_000, ended(11, EndReason::Abandoned, false)));
        t.add(&rec(T0 + 101_000, ended(2, EndReason::Expired, true)));
        t.add(&rec(T0 + 3 * 60_000, joined(12))); // after the range
        let r = t.finish("sale", &[], 23, 1);
        assert_eq!(r.minutes.len(), 3);
        assert_eq!(r.minutes[0].minute, rfc3339(T0));
        assert_eq!(
            (r.minutes[0].arrivals, r.minutes[0].admissions),
            (10, 1),
            "{:?}",
            r.minutes[0]
        );
        assert_eq!(r.minutes[0].waits_measured, 0, "joined before the range");
        let m = &r.minutes[1];
        assert_eq!((m.admissions, m.abandonments, m.waits_measured), (9, 1, 9));
        // Nearest rank of nine waits: the 5th, the 9th, the 9th.
        assert_eq!(
            (m.wait_p50_secs, m.wait_p90_secs, m.wait_p99_secs),
            (Some(66), Some(70), Some(70))
        );
        assert_eq!(
            r.minutes[2],
            ReportRowBody {
                minute: rfc3339(T0 + 120_000),
                ..ReportRowBody::default()
            }
        );
        assert_eq!(
            (
                r.totals.arrivals,
                r.totals.admissions,
                r.totals.abandonments
            ),
            (10, 10, 1)
        );
        assert_eq!(r.totals.minute, "total");
        let csv = r.csv();
        let lines: Vec<&str> = csv.split("\r\n").collect();
        assert_eq!(lines[0], CSV_HEADER);
        assert_eq!(
            lines.len(),
            3 + 2,
            "header, three minutes, and the last line's end"
        );
        assert_eq!(
            lines[2],
            format!("{},0,9,1,9,66,70,70,0,0", rfc3339(T0 + 60_000))
        );
        assert_eq!(lines[1], format!("{},10,1,0,0,,,,0,0", rfc3339(T0)));
    }

    /// The estimate compared is the newest waiter's at the first sample that saw the place,
    /// if it came soon enough; right within a minute or a quarter.
    #[test]
    fn estimates_are_compared_with_the_sample_that_saw_the_place() {
        let sample = |t: u64, next_seq: u64, eta: Option<u64>| Sample {
            t,
            joined: next_seq - 1,
            admitted: 0,
            waiting: 0,
            active: 0,
            capacity: 1,
            newest_eta_secs: eta,
            health: 0,
            next_seq,
        };
        let s0 = T0 / 1000;
        let samples = [
            sample(s0, 2, Some(10)),
            sample(s0 + 10, 4, Some(600)),
            sample(s0 + 60, 6, Some(60)),
        ];
        let mut t = Tally::new(T0, T0 + 3_600_000);
        // seq 2 and 3 first seen at +10 s (estimate 600 s); 4 and 5 at +60 s, too late for 4.
        for (seq, at) in [(2, 1), (3, 5), (4, 12), (5, 55)] {
            t.add(&rec(T0 + at * 1_000, joined(seq)));
        }
        for (seq, wait) in [(2, 700), (3, 900), (4, 60), (5, 20)] {
            let j = [(2, 1), (3, 5), (4, 12), (5, 55)]
                .iter()
                .find(|x| x.0 == seq)
                .unwrap()
                .1;
            t.add(&rec(T0 + (j + wait) * 1_000, admitted(seq)));
        }
        let r = t.finish("sale", &samples, 8, 1);
        // 2: 700 vs 600 (within 150): right; 3: 900 vs 600: wrong; 4: not compared (its
        // first sample came 48 s later); 5: 20 vs 60 (within 60): right.
        assert_eq!(
            (r.totals.estimates_compared, r.totals.estimates_right),
            (3, 2)
        );
        assert!(estimate_right(0, 60) && !estimate_right(0, 61));
        assert!(estimate_right(1_000, 1_250) && !estimate_right(1_000, 1_251));
    }

    #[test]
    fn ranges_are_checked() {
        let p = |from: &str, to: &str| ReportParams {
            from: Some(from.into()),
            to: Some(to.into()),
            format: None,
        };
        let now = T0;
        assert_eq!(
            ReportParams::default().range(now).unwrap(),
            (now - 86_400_000, now)
        );
        let (from, to) = p("2026-12-24T18:00:00Z", "2026-12-24T19:00:00+01:00")
            .range(now)
            .unwrap();
        assert_eq!(
            (from, to - from),
            (
                crate::ledger::parse_time_ms("2026-12-24T18:00:00Z").unwrap(),
                0
            )
        );
        for (from, to, field) in [
            ("2026-12-24T19:00:00Z", "2026-12-24T18:00:00Z", "from"),
            ("yesterday", "2026-12-24T18:00:00Z", "from"),
            ("2026-12-01T00:00:00Z", "2026-12-24T18:00:00Z", "to"),
        ] {
            let e = p(from, to).range(now).unwrap_err();
            assert_eq!(e.field.as_deref(), Some(field), "{from} {to}");
        }
        assert!(ReportParams {
            format: Some("xml".into()),
            ..ReportParams::default()
        }
        .csv()
        .is_err());
    }
}
