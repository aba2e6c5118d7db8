//! Watching a room's origin, and what the line shows.
//!
//! The origin's health sets the admission rate (`ok`, `slow`, `down`). An operator may set it by
//! hand; a room with an [`OriginRule`] has it set from measurements instead. The measurements
//! come in as commands ([`Command::ReportOrigin`](crate::Command::ReportOrigin)): the leader's
//! probe of the origin, and proxies' reports of the responses admitted visitors got. Each carries
//! counts ([`OriginSamples`]), classified at the edge against the rule's thresholds; the state
//! machine keeps them by log time over the rule's window, and decides here, on every replica
//! alike, when the verdict has held long enough to change the health (hysteresis), and why
//! ([`HealthChange`]).
//!
//! A verdict is `down` when the share of errors reaches `down_error_permille`, or when more than
//! `100 − latency_percentile` per cent of the requests were slower than `down_latency_ms` (that
//! is, the percentile's latency is above it); `slow` likewise with the `slow_` thresholds; `ok`
//! otherwise. With fewer than `min_samples` in the window there is no verdict, and the health
//! stays.

use crate::rejection::Rejection;
use crate::types::Health;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// Longest origin URL, in bytes.
pub const ORIGIN_URL_LEN_MAX: usize = 512;
/// Longest measurement window (an hour).
pub const ORIGIN_WINDOW_SECS_MAX: u64 = 3_600;
/// Shortest measurement window.
pub const ORIGIN_WINDOW_SECS_MIN: u64 = 5;
/// Slots a window is kept in: samples are summed per slot of `window / ORIGIN_SLOTS` seconds
/// (at least one second), so a room's watch holds a bounded amount of state.
pub const ORIGIN_SLOTS: u64 = 60;
/// Longest hysteresis hold (an hour).
pub const ORIGIN_HOLD_SECS_MAX: u64 = 3_600;
/// Most samples one report may carry.
pub const ORIGIN_REPORT_SAMPLES_MAX: u64 = 1_000_000;
/// Largest latency threshold (ten minutes).
pub const ORIGIN_LATENCY_MS_MAX: u64 = 600_000;
/// Longest probe interval (an hour).
pub const PROBE_INTERVAL_SECS_MAX: u64 = 3_600;
/// Longest probe timeout (a minute).
pub const PROBE_TIMEOUT_MS_MAX: u64 = 60_000;
/// Largest status-read budget of a room, per second.
pub const STATUS_READS_PER_SEC_MAX: u64 = 1_000_000;
/// Shortest polling interval a waiter is told.
pub const NEXT_CHECK_SECS_MIN: u64 = 5;

/// What the line shows to those in it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LineRule {
    /// Tell waiters how many are waiting.
    pub show_waiting: bool,
    /// Tell waiters their place in line (else only the waiting time).
    pub show_positions: bool,
    /// Most status reads per second that polling waiters should make, all together: each
    /// waiter is told to check again no sooner than `waiting / budget` seconds (at least
    /// [`NEXT_CHECK_SECS_MIN`], at most half the waiter TTL, so that a waiter who follows the
    /// advice keeps its place). `None`: [`NEXT_CHECK_SECS_MIN`]. Live updates (SSE) are not
    /// polling and are not affected.
    pub status_reads_per_sec: Option<u64>,
}

impl Default for LineRule {
    fn default() -> Self {
        Self {
            show_waiting: true,
            show_positions: true,
            status_reads_per_sec: None,
        }
    }
}

impl LineRule {
    /// Checks the ranges.
    pub fn validate(&self) -> Result<(), Rejection> {
        if self
            .status_reads_per_sec
            .is_some_and(|n| !(1..=STATUS_READS_PER_SEC_MAX).contains(&n))
        {
            return Err(Rejection::invalid(
                "line.status_reads_per_sec",
                format!("must be between 1 and {STATUS_READS_PER_SEC_MAX}"),
            ));
        }
        Ok(())
    }

    /// Seconds a waiter should wait before it polls again, with `waiting` in line and a waiter
    /// TTL of `waiter_ttl_secs`.
    pub fn next_check_secs(&self, waiting: u64, waiter_ttl_secs: u64) -> u64 {
        let spread = self.status_reads_per_sec.map_or(0, |b| waiting.div_ceil(b));
        let ceiling = (waiter_ttl_secs / 2).max(1);
        spread.max(NEXT_CHECK_SECS_MIN).min(ceiling)
    }
}

/// How the probe asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ProbeMethod {
    /// `GET`.
    Get,
    /// `HEAD`.
    Head,
}

/// The leader's active probe of the origin.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeRule {
    /// An `http://` or `https://` URL.
    pub url: String,
    /// The method.
    pub method: ProbeMethod,
    /// Seconds between probes.
    pub interval_secs: u64,
    /// A probe not answered within this is an error.
    pub timeout_ms: u64,
}

/// How a room's origin is watched, and what its health follows.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OriginRule {
    /// The leader's probe (`None`: only proxies' reports are measured).
    pub probe: Option<ProbeRule>,
    /// Samples older than this no longer count.
    pub window_secs: u64,
    /// Fewer samples in the window give no verdict.
    pub min_samples: u64,
    /// The latency percentile compared with the latency thresholds (50..=99).
    pub latency_percentile: u64,
    /// `slow` when the percentile's latency is above this.
    pub slow_latency_ms: Option<u64>,
    /// `down` when the percentile's latency is above this.
    pub down_latency_ms: Option<u64>,
    /// `slow` when at least this share of requests failed, in thousandths.
    pub slow_error_permille: Option<u64>,
    /// `down` when at least this share of requests failed, in thousandths.
    pub down_error_permille: Option<u64>,
    /// A worse verdict must hold this long before the health worsens.
    pub worsen_after_secs: u64,
    /// A better verdict must hold this long before the health improves.
    pub recover_after_secs: u64,
    /// Pause the room while the origin is `down`, and resume it when it recovers (unless the
    /// room was paused by hand meanwhile).
    pub auto_pause: bool,
}

impl Default for OriginRule {
    fn default() -> Self {
        Self {
            probe: None,
            window_secs: 60,
            min_samples: 5,
            latency_percentile: 90,
            slow_latency_ms: None,
            down_latency_ms: None,
            slow_error_permille: None,
            down_error_permille: None,
            worsen_after_secs: 0,
            recover_after_secs: 30,
            auto_pause: false,
        }
    }
}

fn bounded(field: &'static str, v: Option<u64>, lo: u64, hi: u64) -> Result<(), Rejection> {
    match v {
        Some(v) if !(lo..=hi).contains(&v) => Err(Rejection::invalid(
            field,
            format!("must be between {lo} and {hi}"),
        )),
        _ => Ok(()),
    }
}

impl OriginRule {
    /// Checks the ranges and that the rule can reach a verdict.
    pub fn validate(&self) -> Result<(), Rejection> {
        if let Some(p) = &self.probe {
            let url_ok = (p.url.starts_with("http://") || p.url.starts_with("https://"))
                && p.url.len() <= ORIGIN_URL_LEN_MAX
                && p.url.len() > "https://".len()
                && !p
                    .url
                    .bytes()
                    .any(|b| b.is_ascii_whitespace() || b.is_ascii_control());
            if !url_ok {
                return Err(Rejection::invalid(
                    "origin.probe.url",
                    format!(
                        "must be an http:// or https:// URL of at most {ORIGIN_URL_LEN_MAX} bytes, without spaces"
                    ),
                ));
            }
            bounded(
                "origin.probe.interval_secs",
                Some(p.interval_secs),
                1,
                PROBE_INTERVAL_SECS_MAX,
            )?;
            bounded(
                "origin.probe.timeout_ms",
                Some(p.timeout_ms),
                10,
                PROBE_TIMEOUT_MS_MAX,
            )?;
        }
        bounded(
            "origin.window_secs",
            Some(self.window_secs),
            ORIGIN_WINDOW_SECS_MIN,
            ORIGIN_WINDOW_SECS_MAX,
        )?;
        bounded(
            "origin.min_samples",
            Some(self.min_samples),
            1,
            ORIGIN_REPORT_SAMPLES_MAX,
        )?;
        bounded(
            "origin.latency_percentile",
            Some(self.latency_percentile),
            50,
            99,
        )?;
        bounded(
            "origin.slow_latency_ms",
            self.slow_latency_ms,
            1,
            ORIGIN_LATENCY_MS_MAX,
        )?;
        bounded(
            "origin.down_latency_ms",
            self.down_latency_ms,
            1,
            ORIGIN_LATENCY_MS_MAX,
        )?;
        bounded(
            "origin.slow_error_permille",
            self.slow_error_permille,
            1,
            1000,
        )?;
        bounded(
            "origin.down_error_permille",
            self.down_error_permille,
            1,
            1000,
        )?;
        bounded(
            "origin.worsen_after_secs",
            Some(self.worsen_after_secs),
            0,
            ORIGIN_HOLD_SECS_MAX,
        )?;
        bounded(
            "origin.recover_after_secs",
            Some(self.recover_after_secs),
            0,
            ORIGIN_HOLD_SECS_MAX,
        )?;
        if let (Some(s), Some(d)) = (self.slow_latency_ms, self.down_latency_ms) {
            if d < s {
                return Err(Rejection::invalid(
                    "origin.down_latency_ms",
                    "must not be below slow_latency_ms".into(),
                ));
            }
        }
        if let (Some(s), Some(d)) = (self.slow_error_permille, self.down_error_permille) {
            if d < s {
                return Err(Rejection::invalid(
                    "origin.down_error_permille",
                    "must not be below slow_error_permille".into(),
                ));
            }
        }
        if self.slow_latency_ms.is_none()
            && self.down_latency_ms.is_none()
            && self.slow_error_permille.is_none()
            && self.down_error_permille.is_none()
        {
            return Err(Rejection::invalid(
                "origin",
                "needs at least one threshold (latency or error share)".into(),
            ));
        }
        Ok(())
    }

    /// One request's outcome as counts: `failed` for an error (no answer in time, a connection
    /// failure, a 5xx status).
    pub fn sample(&self, latency_ms: u64, failed: bool) -> OriginSamples {
        let latency_ms = latency_ms.min(ORIGIN_LATENCY_MS_MAX * 10);
        OriginSamples {
            count: 1,
            errors: failed as u64,
            over_slow: self.slow_latency_ms.is_some_and(|t| latency_ms > t) as u64,
            over_down: self.down_latency_ms.is_some_and(|t| latency_ms > t) as u64,
            latency_ms_sum: latency_ms,
        }
    }

    /// The verdict of a window's samples; `None` with too few.
    pub fn verdict(&self, w: &OriginSamples) -> Option<Health> {
        if w.count < self.min_samples || w.count == 0 {
            return None;
        }
        // More than this many thousandths above a latency threshold puts the percentile above
        // it.
        let tail = 1000 - self.latency_percentile * 10;
        let over = |n: u64| n * 1000 > tail * w.count;
        let failing = |limit: Option<u64>| limit.is_some_and(|l| w.errors * 1000 >= l * w.count);
        let down = failing(self.down_error_permille)
            || (self.down_latency_ms.is_some() && over(w.over_down));
        let slow = failing(self.slow_error_permille)
            || (self.slow_latency_ms.is_some() && over(w.over_slow));
        Some(if down {
            Health::Down
        } else if slow {
            Health::Slow
        } else {
            Health::Ok
        })
    }

    fn slot_ms(&self) -> u64 {
        (self.window_secs * 1000 / ORIGIN_SLOTS).max(1000)
    }
}

/// Requests' outcomes, counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OriginSamples {
    /// Requests.
    pub count: u64,
    /// Of them, errors.
    pub errors: u64,
    /// Of them, slower than the rule's `slow_latency_ms`.
    pub over_slow: u64,
    /// Of them, slower than the rule's `down_latency_ms`.
    pub over_down: u64,
    /// Their latencies summed, ms.
    pub latency_ms_sum: u64,
}

impl OriginSamples {
    /// Adds `o`'s counts (saturating).
    pub fn add(&mut self, o: &OriginSamples) {
        self.count = self.count.saturating_add(o.count);
        self.errors = self.errors.saturating_add(o.errors);
        self.over_slow = self.over_slow.saturating_add(o.over_slow);
        self.over_down = self.over_down.saturating_add(o.over_down);
        self.latency_ms_sum = self.latency_ms_sum.saturating_add(o.latency_ms_sum);
    }

    /// Checks that the counts are consistent and within bounds.
    pub fn validate(&self) -> Result<(), Rejection> {
        if !(1..=ORIGIN_REPORT_SAMPLES_MAX).contains(&self.count) {
            return Err(Rejection::invalid(
                "samples.count",
                format!("must be between 1 and {ORIGIN_REPORT_SAMPLES_MAX}"),
            ));
        }
        if self.errors > self.count || self.over_slow > self.count || self.over_down > self.count {
            return Err(Rejection::invalid(
                "samples",
                "errors, over_slow and over_down must not exceed count".into(),
            ));
        }
        if self.latency_ms_sum / self.count > ORIGIN_LATENCY_MS_MAX * 10 {
            return Err(Rejection::invalid(
                "samples.latency_ms_sum",
                "the mean latency is beyond any threshold".into(),
            ));
        }
        Ok(())
    }
}

/// Who set the health.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum HealthSource {
    /// An operator, by hand.
    Operator,
    /// The leader's probe of the origin.
    Probe,
    /// Proxies' reports of admitted traffic.
    Reports,
}

impl HealthSource {
    /// The lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            HealthSource::Operator => "operator",
            HealthSource::Probe => "probe",
            HealthSource::Reports => "reports",
        }
    }
}

/// The last change of a room's health, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HealthChange {
    /// The health it changed to.
    pub health: Health,
    /// Who changed it.
    pub source: HealthSource,
    /// When (log time, ms).
    pub at_ms: u64,
    /// The samples in the window that gave the verdict (none for an operator's change).
    pub window: OriginSamples,
    /// The window's length, seconds.
    pub window_secs: u64,
    /// Whether the change paused the room (or resumed it).
    pub paused: Option<bool>,
}

/// A room's measurements of its origin: replicated, snapshotted.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OriginWatch {
    /// Samples by slot (slot start, log time ms), oldest first, within the window.
    pub slots: VecDeque<(u64, OriginSamples)>,
    /// A verdict other than the current health, and since when it has held.
    pub pending: Option<(Health, u64)>,
    /// The last change of health.
    pub last_change: Option<HealthChange>,
    /// The room is paused because its origin is down (an automatic pause).
    pub paused_by_origin: bool,
}

fn severity(h: Health) -> u8 {
    match h {
        Health::Ok => 0,
        Health::Slow => 1,
        Health::Down => 2,
    }
}

impl OriginWatch {
    /// Whether there is nothing to keep.
    pub fn is_empty(&self) -> bool {
        *self == OriginWatch::default()
    }

    /// The samples within `rule`'s window at `now`.
    pub fn window(&self, rule: &OriginRule, now: u64) -> OriginSamples {
        let from = now.saturating_sub(rule.window_secs * 1000);
        let mut sum = OriginSamples::default();
        for (_, s) in self
            .slots
            .iter()
            .filter(|(at, _)| *at + rule.slot_ms() > from)
        {
            sum.add(s);
        }
        sum
    }

    /// Records `samples` at `now`, and returns the health the room should change to, if the
    /// verdict has held long enough.
    pub fn record(
        &mut self,
        rule: &OriginRule,
        samples: &OriginSamples,
        current: Health,
        now: u64,
    ) -> Option<Health> {
        let slot_ms = rule.slot_ms();
        let slot = now / slot_ms * slot_ms;
        match self.slots.back_mut() {
            Some((at, s)) if *at == slot => s.add(samples),
            _ => self.slots.push_back((slot, *samples)),
        }
        let from = now.saturating_sub(rule.window_secs * 1000);
        while self
            .slots
            .front()
            .is_some_and(|(at, _)| *at + slot_ms <= from)
            || self.slots.len() as u64 > ORIGIN_SLOTS + 1
        {
            self.slots.pop_front();
        }
        let verdict = rule.verdict(&self.window(rule, now))?;
        if verdict == current {
            self.pending = None;
            return None;
        }
        let since = match self.pending {
            Some((h, t)) if h == verdict => t,
            _ => {
                self.pending = Some((verdict, now));
                now
            }
        };
        let hold = if severity(verdict) > severity(current) {
            rule.worsen_after_secs
        } else {
            rule.recover_after_secs
        };
        (now - since >= hold * 1000).then(|| {
            self.pending = None;
            verdict
        })
    }

    /// Forgets the measurements (the rule changed: they were counted against other
    /// thresholds), keeping the last change and the pause flag.
    pub fn reset(&mut self) {
        self.slots.clear();
        self.pending = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule() -> OriginRule {
        OriginRule {
            min_samples: 4,
            slow_latency_ms: Some(500),
            down_error_permille: Some(500),
            worsen_after_secs: 2,
            recover_after_secs: 10,
            ..OriginRule::default()
        }
    }

    fn feed(w: &mut OriginWatch, r: &OriginRule, h: &mut Health, at: u64, ms: u64, fail: bool) {
        if let Some(n) = w.record(r, &r.sample(ms, fail), *h, at) {
            *h = n;
        }
    }

    #[test]
    fn verdicts_follow_the_thresholds() {
        let r = rule();
        let s = |count, errors, over_slow| OriginSamples {
            count,
            errors,
            over_slow,
            ..OriginSamples::default()
        };
        assert_eq!(r.verdict(&s(3, 3, 3)), None, "too few samples");
        assert_eq!(
            r.verdict(&s(10, 0, 1)),
            Some(Health::Ok),
            "p90 at the threshold"
        );
        assert_eq!(r.verdict(&s(10, 0, 2)), Some(Health::Slow), "p90 above");
        assert_eq!(r.verdict(&s(10, 4, 0)), Some(Health::Ok));
        assert_eq!(r.verdict(&s(10, 5, 0)), Some(Health::Down), "half failed");
    }

    #[test]
    fn health_changes_only_after_the_verdict_holds() {
        let r = rule();
        let mut w = OriginWatch::default();
        let mut h = Health::Ok;
        for i in 0..4 {
            feed(&mut w, &r, &mut h, i * 1000, 10, false);
        }
        assert_eq!(h, Health::Ok);
        // Slow answers: the verdict turns slow at once, the health two seconds later.
        for i in 4..20 {
            feed(&mut w, &r, &mut h, i * 1000, 900, false);
            let want = if i < 6 { Health::Ok } else { Health::Slow };
            assert_eq!(h, want, "at {i} s");
        }
        assert_eq!(h, Health::Slow);
        // One fast answer in slow ones does not flap it back.
        feed(&mut w, &r, &mut h, 20_000, 10, false);
        assert_eq!(h, Health::Slow);
        // Errors: down.
        for i in 21..60 {
            feed(&mut w, &r, &mut h, i * 1000, 10, true);
        }
        assert_eq!(h, Health::Down);
        // Healthy again: the window forgets the errors after 60 s, and the health recovers only
        // after ten more seconds of a good verdict.
        let mut recovered = None;
        for i in 60..200 {
            feed(&mut w, &r, &mut h, i * 1000, 10, false);
            if h == Health::Ok && recovered.is_none() {
                recovered = Some(i);
            }
        }
        let at = recovered.expect("recovers");
        assert!((100..=115).contains(&at), "recovered at {at} s");
        assert!(w.slots.len() as u64 <= ORIGIN_SLOTS + 1);
    }

    #[test]
    fn rules_are_validated() {
        assert!(OriginRule::default().validate().is_err(), "no threshold");
        rule().validate().unwrap();
        let bad = [
            OriginRule {
                window_secs: 1,
                ..rule()
            },
            OriginRule {
                latency_percentile: 100,
                ..rule()
            },
            OriginRule {
                slow_latency_ms: Some(500),
                down_latency_ms: Some(100),
                ..rule()
            },
            OriginRule {
                probe: Some(ProbeRule {
                    url: "ftp://x".into(),
                    method: ProbeMethod::Get,
                    interval_secs: 1,
                    timeout_ms: 100,
                }),
                ..rule()
            },
            OriginRule {
                probe: Some(ProbeRule {
                    url: format!("http://{}", "a".repeat(ORIGIN_URL_LEN_MAX)),
                    method: ProbeMethod::Get,
                    interval_secs: 1,
                    timeout_ms: 100,
                }),
                ..rule()
            },
        ];
        for b in bad {
            assert!(b.validate().is_err(), "{b:?}");
        }
        let samples = OriginSamples {
            count: 2,
            errors: 3,
            ..OriginSamples::default()
        };
        assert!(samples.validate().is_err());
    }

    #[test]
    fn polling_advice_keeps_to_the_budget_and_the_waiter_ttl() {
        let line = LineRule {
            status_reads_per_sec: Some(100),
            ..LineRule::default()
        };
        assert_eq!(line.next_check_secs(10, 120), NEXT_CHECK_SECS_MIN);
        assert_eq!(line.next_check_secs(3_001, 120), 31);
        assert_eq!(
            line.next_check_secs(1_000_000, 120),
            60,
            "half the waiter TTL"
        );
        assert_eq!(LineRule::default().next_check_secs(1_000_000, 120), 5);
        assert_eq!(line.next_check_secs(1_000_000, 1), 1);
    }
}
