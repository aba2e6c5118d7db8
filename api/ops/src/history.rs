//! What the dashboard's charts draw: every node samples each room's figures from its own
//! applied state every [`SAMPLE_EVERY_SECS`] and keeps them in two bounded rings per room, an
//! hour at that step and a day at [`COARSE_EVERY_SECS`], so that charts are full on first load
//! and survive reloads. Memory is bounded: [`ROOMS_TRACKED_MAX`] rooms, each at most
//! [`FINE_SAMPLES`] + [`COARSE_SAMPLES`] samples. History starts again when the node restarts.

use serde::Serialize;
use sluice_statemachine::{Health, RoomView};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;

/// Seconds between samples.
pub const SAMPLE_EVERY_SECS: u64 = 10;
/// Samples of the fine ring: an hour.
pub const FINE_SAMPLES: usize = 360;
/// Seconds between samples of the coarse ring.
pub const COARSE_EVERY_SECS: u64 = 300;
/// Samples of the coarse ring: a day.
pub const COARSE_SAMPLES: usize = 288;
/// Most rooms whose history is kept (the first by name).
pub const ROOMS_TRACKED_MAX: usize = 1_000;

/// One room's figures at one instant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample {
    /// Unix seconds.
    pub t: u64,
    /// Places ever handed out (a counter).
    pub joined: u64,
    /// Admissions ever (a counter).
    pub admitted: u64,
    /// Waiters.
    pub waiting: u64,
    /// Active sessions.
    pub active: u64,
    /// Capacity.
    pub capacity: u64,
    /// The estimate shown to the newest waiter, seconds.
    pub newest_eta_secs: Option<u64>,
    /// 0 ok, 1 slow, 2 down.
    pub health: u8,
    /// The sequence number the next place will get: which places existed by then.
    pub next_seq: u64,
}

impl Sample {
    /// The figures of `v` at `t`.
    pub fn of(v: &RoomView, t: u64) -> Sample {
        Sample {
            t,
            joined: v.totals.joined,
            admitted: v.totals.admitted,
            waiting: v.waiting,
            active: v.active,
            capacity: v.config.capacity,
            newest_eta_secs: v.newest_eta_secs,
            health: match v.config.health {
                Health::Ok => 0,
                Health::Slow => 1,
                Health::Down => 2,
            },
            next_seq: v.next_seq,
        }
    }
}

#[derive(Debug, Default)]
struct Rings {
    fine: VecDeque<Sample>,
    coarse: VecDeque<Sample>,
}

impl Rings {
    fn push(&mut self, s: Sample) {
        // A room deleted and made again under the same name starts its counters again.
        if self.fine.back().is_some_and(|b| s.joined < b.joined) {
            *self = Rings::default();
        }
        if self.fine.len() == FINE_SAMPLES {
            self.fine.pop_front();
        }
        self.fine.push_back(s);
        if self
            .coarse
            .back()
            .is_none_or(|b| s.t >= b.t + COARSE_EVERY_SECS)
        {
            if self.coarse.len() == COARSE_SAMPLES {
                self.coarse.pop_front();
            }
            self.coarse.push_back(s);
        }
    }
}

/// The span a chart shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Span {
    /// The last 15 minutes.
    Quarter,
    /// The last hour.
    Hour,
    /// The last day.
    Day,
}

impl Span {
    /// `15m`, `1h` or `1d`.
    pub fn parse(s: &str) -> Option<Span> {
        match s {
            "15m" => Some(Span::Quarter),
            "1h" => Some(Span::Hour),
            "1d" => Some(Span::Day),
            _ => None,
        }
    }

    fn secs(self) -> u64 {
        match self {
            Span::Quarter => 900,
            Span::Hour => 3_600,
            Span::Day => 86_400,
        }
    }
}

/// Columns for a chart: one value per instant in `t`; `null` where there is none.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Series {
    /// Unix seconds.
    pub t: Vec<u64>,
    /// Places handed out per minute over the step before each instant.
    pub arrivals_per_min: Vec<Option<f64>>,
    /// Admissions per minute over the step before each instant.
    pub admissions_per_min: Vec<Option<f64>>,
    /// Waiters.
    pub waiting: Vec<u64>,
    /// Active sessions.
    pub active: Vec<u64>,
    /// Capacity.
    pub capacity: Vec<u64>,
    /// The estimate shown to the newest waiter, minutes.
    pub newest_eta_min: Vec<Option<f64>>,
    /// Origin health: 0 ok, 1 slow, 2 down.
    pub health: Vec<u8>,
}

impl Series {
    fn from_samples(samples: &[Sample]) -> Series {
        let mut s = Series::default();
        let per_min = |a: u64, b: u64, dt: u64| {
            (dt > 0 && b >= a).then(|| ((b - a) as f64 * 60.0 / dt as f64 * 10.0).round() / 10.0)
        };
        for (i, x) in samples.iter().enumerate() {
            let prev = i.checked_sub(1).map(|j| samples[j]);
            s.t.push(x.t);
            s.arrivals_per_min
                .push(prev.and_then(|p| per_min(p.joined, x.joined, x.t - p.t)));
            s.admissions_per_min
                .push(prev.and_then(|p| per_min(p.admitted, x.admitted, x.t - p.t)));
            s.waiting.push(x.waiting);
            s.active.push(x.active);
            s.capacity.push(x.capacity);
            s.newest_eta_min.push(
                x.newest_eta_secs
                    .map(|e| (e as f64 / 60.0 * 10.0).round() / 10.0),
            );
            s.health.push(x.health);
        }
        s
    }
}

/// Every tracked room's rings.
#[derive(Debug, Default)]
pub struct History {
    rooms: Mutex<BTreeMap<String, Rings>>,
}

impl History {
    /// Records one sample of each room in `rooms` at `t` (unix seconds) and forgets rooms that
    /// are gone. Rooms past [`ROOMS_TRACKED_MAX`] (by name) are not tracked.
    pub fn record(&self, rooms: &[RoomView], t: u64) {
        let mut map = self.rooms.lock().expect("history lock");
        map.retain(|name, _| rooms.iter().any(|r| &r.name == name));
        for v in rooms {
            if !map.contains_key(&v.name) && map.len() >= ROOMS_TRACKED_MAX {
                continue;
            }
            map.entry(v.name.clone())
                .or_default()
                .push(Sample::of(v, t));
        }
    }

    /// `room`'s figures over `span` ending at `now` (unix seconds); `None` for a room not
    /// tracked.
    pub fn series(&self, room: &str, span: Span, now: u64) -> Option<Series> {
        let map = self.rooms.lock().expect("history lock");
        let rings = map.get(room)?;
        let from = now.saturating_sub(span.secs());
        let mut samples: Vec<Sample> = match span {
            Span::Day => rings.coarse.iter().copied().collect(),
            _ => rings.fine.iter().copied().collect(),
        };
        // The day's chart ends with the latest sample too.
        if let (Span::Day, Some(last)) = (span, rings.fine.back()) {
            if samples.last() != Some(last) {
                samples.push(*last);
            }
        }
        samples.retain(|s| s.t >= from);
        Some(Series::from_samples(&samples))
    }

    /// When the place numbered `seq` was taken, as far as the samples tell: not before the
    /// first instant (`None`: before the oldest sample), not after the second. `None` when no
    /// sample has seen it yet, or the room is not tracked.
    pub fn joined_between(&self, room: &str, seq: u64) -> Option<(Option<u64>, u64)> {
        let mut before = None;
        for s in self.samples(room) {
            if s.next_seq > seq {
                return Some((before, s.t));
            }
            before = Some(s.t);
        }
        None
    }

    /// `room`'s samples, oldest first: the day's (every 5 minutes) before the hour's (every 10
    /// s). Empty for a room not tracked.
    pub fn samples(&self, room: &str) -> Vec<Sample> {
        let map = self.rooms.lock().expect("history lock");
        let Some(rings) = map.get(room) else {
            return Vec::new();
        };
        let first_fine = rings.fine.front().map_or(u64::MAX, |s| s.t);
        rings
            .coarse
            .iter()
            .filter(|s| s.t < first_fine)
            .chain(rings.fine.iter())
            .copied()
            .collect()
    }

    /// How many rooms are tracked.
    pub fn rooms(&self) -> usize {
        self.rooms.lock().expect("history lock").len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_statemachine::{RoomConfig, Totals};

    #[test]
    fn a_place_is_dated_between_the_samples_around_it() {
        let h = History::default();
        for i in 0..10u64 {
            let mut v = view("a", i, 0, i);
            v.next_seq = 1 + 5 * i;
            h.record(&[v], 100 + i * SAMPLE_EVERY_SECS);
        }
        // Seqs 1..=5 were taken between the first sample (next 1) and the second (next 6).
        assert_eq!(h.joined_between("a", 3), Some((Some(100), 110)));
        assert_eq!(h.joined_between("a", 6), Some((Some(110), 120)));
        assert_eq!(
            h.joined_between("a", 0),
            Some((None, 100)),
            "before history began"
        );
        assert_eq!(h.joined_between("a", 99), None, "not seen yet");
        assert_eq!(h.joined_between("b", 1), None);
    }

    fn view(name: &str, joined: u64, admitted: u64, waiting: u64) -> RoomView {
        RoomView {
            name: name.into(),
            config: RoomConfig::default(),
            created_at_ms: 0,
            open: true,
            closed: false,
            waiting,
            active: 3,
            totals: Totals {
                joined,
                admitted,
                ..Totals::default()
            },
            admitted_last_minute: 0,
            eta_rate_per_minute: 0,
            bucket_tokens: 0,
            next_seq: 1,
            sessions_shared: 0,
            health_change: None,
            paused_by_origin: false,
            origin_window: None,
            lanes: Vec::new(),
            codes: 0,
            notice: None,
            draw: None,
            newest_eta_secs: Some(90),
            text_color: None,
            challenges_remembered: 0,
        }
    }

    #[test]
    fn rates_come_from_counters_and_spans_cut_the_rings() {
        let h = History::default();
        for i in 0..=(FINE_SAMPLES as u64 + 10) {
            h.record(
                &[view("a", i * 20, i * 10, i)],
                1_000 + i * SAMPLE_EVERY_SECS,
            );
        }
        let now = 1_000 + (FINE_SAMPLES as u64 + 10) * SAMPLE_EVERY_SECS;
        let q = h.series("a", Span::Quarter, now).unwrap();
        assert_eq!(q.t.len(), 91, "15 minutes at 10 s, both ends");
        assert_eq!(q.arrivals_per_min[0], None, "no step before the first");
        assert_eq!(q.arrivals_per_min[1], Some(120.0), "20 per 10 s");
        assert_eq!(q.admissions_per_min[1], Some(60.0));
        assert_eq!(q.newest_eta_min[1], Some(1.5));
        assert_eq!(q.capacity[1], 100);
        let hour = h.series("a", Span::Hour, now).unwrap();
        assert_eq!(hour.t.len(), FINE_SAMPLES, "the fine ring is bounded");
        let day = h.series("a", Span::Day, now).unwrap();
        // A coarse sample every 5 minutes, and the latest one.
        assert!(day.t.windows(2).all(|w| w[1] > w[0]));
        assert_eq!(*day.t.last().unwrap(), now);
        assert_eq!(day.t.len(), 14);
        assert_eq!(h.series("b", Span::Hour, now), None);
    }

    #[test]
    fn rooms_that_go_are_forgotten_and_the_count_is_bounded() {
        let h = History::default();
        let many: Vec<RoomView> = (0..ROOMS_TRACKED_MAX + 5)
            .map(|i| view(&format!("r{i:05}"), 1, 1, 1))
            .collect();
        h.record(&many, 10);
        assert_eq!(h.rooms(), ROOMS_TRACKED_MAX);
        h.record(&many[..2], 20);
        assert_eq!(h.rooms(), 2);
    }

    #[test]
    fn a_room_made_again_starts_its_history_again() {
        let h = History::default();
        h.record(&[view("a", 50, 40, 1)], 10);
        h.record(&[view("a", 2, 0, 2)], 20);
        let s = h.series("a", Span::Quarter, 20).unwrap();
        assert_eq!(s.t, [20]);
        assert_eq!(Span::parse("1h"), Some(Span::Hour));
        assert_eq!(Span::parse("7y"), None);
    }
}
