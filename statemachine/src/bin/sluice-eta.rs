//! How true are the waiting times the line tells? Seeded scenarios drive the real state machine
//! second by second: visitors arrive, wait, look at their status every few seconds, are
//! admitted, and end their sessions (leaving, or letting them expire). Every estimate shown to
//! every waiter is kept and compared, once that visitor is admitted, with the wait it really had;
//! beside it, the estimate today's rule would have given from the same state (the position
//! divided by the admission rate, blended half and half with the last minute's admissions).
//!
//! An admitted visitor who uses the place renews it as the gate would: at its first look after
//! the admission, then every [`USE_EVERY_SECS`]. One who does not hold it unused until the room
//! ends it (its first-use TTL, or its session TTL).
//!
//! How an estimate is judged:
//! - In line order, against the wait the visitor had: its error (the median at most 25 % of the
//!   true wait) and whether it was optimistic, more than 20 % shorter than the truth (at most 5 %
//!   of them).
//! - Drawn by lot, a wait is a chance, not a place: the shorter figure is the even chance and the
//!   longer one the nine in ten. It is judged by whether those chances came true: between 35 %
//!   and 65 % of the waiters admitted by the even chance's figure, and at most 5 % admitted more
//!   than 20 % after the longer one.
//! - An estimate shown before an operator changed the room (a pause, the origin's health), or
//!   before a scripted change of how visitors behave was visible ([`Sessions::InTurn`]: a
//!   visitor of a new kind admitted, and [`UNUSED_GRACE_MS`] past), told the room as it
//!   was and is not judged (the count of them is printed). Random mixtures are judged whole.
//!
//! `sluice-eta [--seed N] [--scale F] [--scenario NAME]` prints one line per scenario and a last
//! line with the targets, and fails (exit 1) when a scenario misses them. `--scale` multiplies
//! the number of visitors (a short run: 0.1).

use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};
use sluice_statemachine::limits::UNUSED_GRACE_MS;
use sluice_statemachine::*;
use std::collections::{BTreeMap, BTreeSet};
use std::process::ExitCode;

const T0: u64 = 1_800_000_000_000;
/// Seconds between two looks at the status by one waiter.
const POLL_SECS: u64 = 10;
/// A scenario that has not admitted everyone by then is cut off (the rest are not judged).
const HORIZON_SECS: u64 = 6 * 3600;
/// Seconds between two renewals of a place in use (the gate's, as pages are viewed).
const USE_EVERY_SECS: u64 = 20;

/// How admitted visitors use and end their sessions.
#[derive(Clone)]
enum Sessions {
    /// They use the place and leave after a uniformly drawn number of seconds.
    Leave(u64, u64),
    /// They never come: the place is held unused until the room ends it.
    Unused,
    /// They use the place and leave together at the next multiple of this many seconds after a
    /// minute of use (checkout waves).
    Waves(u64),
    /// Each admitted visitor behaves as one of these, drawn with these weights.
    Mix(Vec<(u64, Sessions)>),
    /// The visitors behave in the order of their admission: the first this many as the first,
    /// and so on; the last for the rest. Each switch is a change of the room.
    InTurn(Vec<(u64, Sessions)>),
}

impl Sessions {
    /// Whether the admission of the `nth` visitor changes the room in a script: any of a kind
    /// between the first and the last, and the first of the last.
    fn switches_at(&self, nth: u64) -> bool {
        let Sessions::InTurn(kinds) = self else {
            return false;
        };
        let mut first = 0;
        for (i, (count, _)) in kinds.iter().enumerate() {
            let last = i + 1 == kinds.len();
            if i > 0 && nth >= first && (nth < first + count || last) {
                return !last || nth == first;
            }
            first += count;
        }
        false
    }

    /// How the `nth` visitor admitted behaves: `Leave`, `Unused` or `Waves`.
    fn pick(&self, nth: u64, below: &mut dyn FnMut(u64) -> u64) -> Sessions {
        match self {
            Sessions::Mix(kinds) => {
                let mut r = below(kinds.iter().map(|(w, _)| w).sum());
                for (w, k) in kinds {
                    if r < *w {
                        return k.pick(nth, below);
                    }
                    r -= w;
                }
                unreachable!("a weight drawn below their sum")
            }
            Sessions::InTurn(kinds) => {
                let mut first = 0;
                for (i, (count, k)) in kinds.iter().enumerate() {
                    if nth < first + count || i + 1 == kinds.len() {
                        return k.pick(nth - first, below);
                    }
                    first += count;
                }
                unreachable!("InTurn lists at least one kind")
            }
            leaf => leaf.clone(),
        }
    }
}

struct Scenario {
    name: &'static str,
    config: RoomConfig,
    /// Visitors, and the seconds over which they arrive (evenly at random).
    visitors: u64,
    arrive_over: u64,
    sessions: Sessions,
    /// Commands at given seconds: pauses, health changes.
    events: Vec<(u64, Command)>,
    /// The entry policy, if not the default.
    policy: Option<EntryPolicy>,
}

fn scenarios(scale: f64) -> Vec<Scenario> {
    let n = |v: u64| ((v as f64 * scale).round() as u64).max(10);
    let room = |capacity, admit_per_minute, session_ttl_secs| RoomConfig {
        capacity,
        admit_per_minute,
        admit_burst: 1,
        session_ttl_secs,
        waiter_ttl_secs: 86_400,
        max_waiting: 1_000_000,
        ..RoomConfig::default()
    };
    let cmd = |c: Command| c;
    let stuck = Sessions::InTurn(vec![
        (8, Sessions::Leave(5, 20)),
        (2, Sessions::Unused),
        (1, Sessions::Leave(5, 20)),
    ]);
    vec![
        Scenario {
            name: "rate-bound",
            config: room(100_000, 60, 3600),
            visitors: n(600),
            arrive_over: 120,
            sessions: Sessions::Leave(600, 1200),
            events: vec![],
            policy: None,
        },
        Scenario {
            name: "capacity-long",
            config: room(20, 600, 3600),
            visitors: n(300),
            arrive_over: 300,
            sessions: Sessions::Leave(300, 900),
            events: vec![],
            policy: None,
        },
        Scenario {
            name: "capacity-short",
            config: room(50, 6000, 30),
            visitors: n(3000),
            arrive_over: 600,
            sessions: Sessions::Unused,
            events: vec![],
            policy: None,
        },
        Scenario {
            name: "bursty-leaves",
            config: room(40, 6000, 3600),
            visitors: n(600),
            arrive_over: 300,
            sessions: Sessions::Waves(240),
            events: vec![],
            policy: None,
        },
        Scenario {
            name: "pause",
            config: room(100_000, 120, 3600),
            visitors: n(600),
            arrive_over: 120,
            sessions: Sessions::Leave(600, 1200),
            events: vec![
                (120, cmd(Command::Pause { room: "r".into() })),
                (240, cmd(Command::Resume { room: "r".into() })),
            ],
            policy: None,
        },
        Scenario {
            name: "health-slow",
            config: room(100_000, 120, 3600),
            visitors: n(600),
            arrive_over: 120,
            sessions: Sessions::Leave(600, 1200),
            events: vec![(
                120,
                cmd(Command::SetHealth {
                    room: "r".into(),
                    health: Health::Slow,
                    slow_factor_permille: Some(500),
                }),
            )],
            policy: None,
        },
        Scenario {
            name: "lottery",
            config: RoomConfig {
                mode: Mode::Lottery,
                ..room(100_000, 60, 3600)
            },
            visitors: n(300),
            arrive_over: 30,
            sessions: Sessions::Leave(600, 1200),
            events: vec![],
            policy: None,
        },
        // A few short visits, then two visitors admitted who never come: the room is full of
        // unused places until their session TTL ends them, ten minutes on.
        Scenario {
            name: "stuck",
            config: room(2, 600, 600),
            visitors: n(16),
            arrive_over: 60,
            sessions: stuck.clone(),
            events: vec![],
            policy: None,
        },
        // The same, with a first-use TTL of five minutes.
        Scenario {
            name: "stuck-first-use",
            config: room(2, 600, 600),
            visitors: n(16),
            arrive_over: 60,
            sessions: stuck,
            events: vec![],
            policy: Some(EntryPolicy {
                first_use_ttl_secs: Some(300),
                ..EntryPolicy::default()
            }),
        },
        // Nobody uses a place: each is held until the first-use TTL.
        Scenario {
            name: "all-unused",
            config: room(10, 600, 900),
            visitors: n(300),
            arrive_over: 300,
            sessions: Sessions::Unused,
            events: vec![],
            policy: Some(EntryPolicy {
                first_use_ttl_secs: Some(120),
                ..EntryPolicy::default()
            }),
        },
        // Nine in ten use their place for a short visit; one in ten never comes, and holds the
        // place until the first-use TTL of two minutes.
        Scenario {
            name: "mixed-held",
            config: room(10, 600, 600),
            visitors: n(300),
            arrive_over: 300,
            sessions: Sessions::Mix(vec![(9, Sessions::Leave(10, 60)), (1, Sessions::Unused)]),
            events: vec![],
            policy: Some(EntryPolicy {
                first_use_ttl_secs: Some(120),
                ..EntryPolicy::default()
            }),
        },
    ]
}

/// One estimate shown: when, the new one and its longer end, and the old rule's.
struct Shown {
    at: u64,
    new: Option<(u64, u64)>,
    old: Option<u64>,
}

/// What the old rule would have told a waiter `ahead` admissions from the door.
fn old_estimate(room: &RoomView, ahead: u64, now: u64, opened_at: Option<u64>) -> Option<u64> {
    if room.config.paused {
        return None;
    }
    let setpoint = room.config.admit_per_minute * room.config.rate_permille();
    let rate = match opened_at {
        Some(t) if now >= t + 60_000 => {
            setpoint.min((setpoint + room.admitted_last_minute * 1000) / 2)
        }
        _ => setpoint,
    };
    (rate > 0).then(|| (ahead as u128 * 60_000).div_ceil(rate as u128) as u64)
}

#[derive(Default)]
struct Judged {
    estimates: u64,
    none: u64,
    errors: Vec<f64>,
    optimistic: u64,
    within: u64,
}

impl Judged {
    fn add(&mut self, estimate: Option<(u64, u64)>, actual: u64) {
        self.estimates += 1;
        let Some((e, max)) = estimate else {
            self.none += 1;
            return;
        };
        let truth = actual.max(1) as f64;
        self.errors.push((e as f64 - truth).abs() / truth);
        if (e as f64) < truth * 0.8 {
            self.optimistic += 1;
        }
        if e <= actual.max(1) + 1 && actual <= max + 1 {
            self.within += 1;
        }
    }

    fn median(&mut self) -> f64 {
        if self.errors.is_empty() {
            return f64::NAN;
        }
        self.errors.sort_by(f64::total_cmp);
        self.errors[self.errors.len() / 2]
    }

    fn given(&self) -> u64 {
        self.estimates - self.none
    }

    fn optimistic_share(&self) -> f64 {
        self.optimistic as f64 / self.given().max(1) as f64
    }

    fn line(&mut self, label: &str) -> String {
        format!(
            "{label}: median_error={:.1}% optimistic_over_20={:.1}% in_range={:.1}% none={}",
            self.median() * 100.0,
            self.optimistic_share() * 100.0,
            self.within as f64 * 100.0 / self.given().max(1) as f64,
            self.none,
        )
    }
}

struct Outcome {
    new: Judged,
    old: Judged,
    admitted: u64,
    visitors: u64,
    /// Estimates shown before an operator changed the room: not judged.
    before_change: u64,
    /// Drawn by lot: the shares of waiters admitted by the even chance's figure, and more than
    /// 20 % after the longer figure.
    lottery: Option<(f64, f64)>,
}

impl Outcome {
    /// Whether the scenario meets the targets (see the module's documentation).
    fn met(&mut self) -> bool {
        match self.lottery {
            Some((even, late)) => (0.35..=0.65).contains(&even) && late <= 0.05,
            None => self.new.median() <= 0.25 && self.new.optimistic_share() <= 0.05,
        }
    }
}

fn run(s: &Scenario, seed: u64) -> Outcome {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut below = |n: u64| if n == 0 { 0 } else { rng.next_u64() % n };
    let mut sm = StateMachine::new();
    let mut index = 0u64;
    let mut apply = |sm: &mut StateMachine, now: u64, commands: Vec<Command>| {
        if commands.is_empty() {
            return;
        }
        index += 1;
        sm.apply(
            1,
            index,
            &Proposal {
                time_ms: now,
                commands,
            },
        );
    };
    let mut setup = vec![Command::CreateRoom {
        room: "r".into(),
        config: s.config.clone(),
    }];
    if let Some(p) = &s.policy {
        setup.push(Command::SetEntryPolicy {
            room: "r".into(),
            policy: p.encode(),
        });
    }
    apply(&mut sm, T0, setup);
    let vid = |v: u64| VisitorId::from_u128(1 + v as u128);
    // Arrival second of each visitor; when each poll falls (a visitor's own phase).
    let mut arrivals: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    let mut phase = Vec::new();
    for v in 0..s.visitors {
        arrivals.entry(below(s.arrive_over)).or_default().push(v);
        phase.push(below(POLL_SECS));
    }
    let mut events: BTreeMap<u64, Vec<Command>> = BTreeMap::new();
    for (at, c) in &s.events {
        events.entry(*at).or_default().push(c.clone());
    }
    let mut waiting: BTreeSet<u64> = BTreeSet::new();
    let mut shown: BTreeMap<u64, Vec<Shown>> = BTreeMap::new();
    let mut admitted_at: BTreeMap<u64, u64> = BTreeMap::new();
    let mut leaves: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    let mut uses: BTreeMap<u64, Vec<VisitorId>> = BTreeMap::new();
    let mut admissions = 0u64;
    // Seconds at which the room changed: the operator's events, and scripted switches of kind.
    let mut changes: Vec<u64> = s.events.iter().map(|&(at, _)| at).collect();
    let lottery = s.config.mode == Mode::Lottery;
    for sec in 0..HORIZON_SECS {
        let now = T0 + sec * 1000;
        let mut commands = vec![Command::Tick];
        commands.extend(events.remove(&sec).unwrap_or_default());
        if let Some(visitors) = uses.remove(&sec) {
            commands.push(Command::Touch {
                room: "r".into(),
                visitors,
            });
        }
        for v in leaves.remove(&sec).unwrap_or_default() {
            commands.push(Command::Leave {
                room: "r".into(),
                visitor: vid(v),
            });
        }
        for v in arrivals.remove(&sec).unwrap_or_default() {
            commands.push(Command::Join {
                room: "r".into(),
                visitor: vid(v),
            });
            waiting.insert(v);
        }
        apply(&mut sm, now, commands);
        // Ticks when the room asks for them (a token due, a session expiring), as the leader
        // proposes them, up to the next second.
        let mut last = now;
        while let Some(t) = sm.next_due_ms().filter(|&t| t > last && t < now + 1000) {
            apply(&mut sm, t, vec![Command::Tick]);
            last = t;
        }
        let room = sm.room("r").expect("the room");
        let mut now_admitted = Vec::new();
        for &v in &waiting {
            match sm.visitor("r", vid(v)).map(|view| view.state) {
                Ok(VisitorState::Waiting {
                    position,
                    waiting: count,
                    eta_secs,
                    eta_max_secs,
                    ..
                }) => {
                    if (sec + phase[v as usize]) % POLL_SECS == 0 {
                        let count = count.unwrap_or(room.waiting);
                        let ahead = if lottery {
                            count
                        } else {
                            position.unwrap_or(count)
                        };
                        shown.entry(v).or_default().push(Shown {
                            at: sec,
                            new: eta_secs.zip(eta_max_secs),
                            old: old_estimate(&room, ahead, now, Some(T0)),
                        });
                    }
                }
                Ok(VisitorState::Admitted { .. }) => now_admitted.push(v),
                _ => now_admitted.push(v), // ended without admission: not judged
            }
        }
        for v in now_admitted {
            waiting.remove(&v);
            if !matches!(
                sm.visitor("r", vid(v)).map(|view| view.state),
                Ok(VisitorState::Admitted { .. })
            ) {
                shown.remove(&v);
                continue;
            }
            admitted_at.insert(v, sec);
            let end = match s.sessions.pick(admissions, &mut below) {
                Sessions::Leave(lo, hi) => Some(sec + lo + below(hi - lo + 1)),
                Sessions::Waves(every) => Some((sec + 60).div_ceil(every) * every),
                _ => None,
            };
            if s.sessions.switches_at(admissions) {
                changes.push(sec + UNUSED_GRACE_MS.div_ceil(1000));
            }
            admissions += 1;
            if let Some(end) = end {
                leaves.entry(end).or_default().push(v);
                // The place is used from the visitor's next look at its status (its page sees
                // the admission and sends it on), or before leaving, then renewed as it is used.
                let next_look =
                    sec + 1 + (POLL_SECS - (sec + 1 + phase[v as usize]) % POLL_SECS) % POLL_SECS;
                let first = next_look.min(end.saturating_sub(1)).max(sec + 1);
                for at in (first..end).step_by(USE_EVERY_SECS as usize) {
                    uses.entry(at).or_default().push(vid(v));
                }
            }
        }
        if arrivals.is_empty() && waiting.is_empty() {
            break;
        }
    }
    let mut out = Outcome {
        new: Judged::default(),
        old: Judged::default(),
        admitted: admitted_at.len() as u64,
        visitors: s.visitors,
        before_change: 0,
        lottery: None,
    };
    // (given, admitted by the even chance, admitted more than 20 % after the longer figure)
    let mut chances = (0u64, 0u64, 0u64);
    for (v, list) in shown {
        let Some(&at) = admitted_at.get(&v) else {
            continue;
        };
        for e in list {
            if changes.iter().any(|&change| e.at < change && change <= at) {
                out.before_change += 1;
                continue;
            }
            let actual = at - e.at;
            if std::env::var("SLUICE_ETA_TRACE").is_ok_and(|n| n == s.name) {
                eprintln!(
                    "visitor={v} at={} admitted={at} truth={actual} new={:?}",
                    e.at, e.new
                );
            }
            out.new.add(e.new, actual);
            out.old.add(e.old.map(|o| (o, o)), actual);
            if let Some((secs, max)) = e.new {
                chances.0 += 1;
                chances.1 += u64::from(actual <= secs);
                chances.2 += u64::from(max as f64 * 1.2 < actual as f64);
            }
        }
    }
    if lottery {
        let given = chances.0.max(1) as f64;
        out.lottery = Some((chances.1 as f64 / given, chances.2 as f64 / given));
    }
    out
}

fn main() -> ExitCode {
    let mut seed = 1u64;
    let mut scale = 1.0f64;
    let mut only: Option<String> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let value = args.next();
        let ok = match (a.as_str(), value) {
            ("--seed", Some(v)) => v.parse().map(|v| seed = v).is_ok(),
            ("--scale", Some(v)) => v
                .parse()
                .map(|v: f64| scale = v)
                .is_ok_and(|_| scale > 0.0 && scale <= 100.0),
            ("--scenario", Some(v)) => {
                only = Some(v);
                true
            }
            _ => false,
        };
        if !ok {
            eprintln!("usage: sluice-eta [--seed N] [--scale F (0 < F <= 100)] [--scenario NAME]");
            return ExitCode::from(2);
        }
    }
    let all = scenarios(scale);
    if let Some(name) = &only {
        if !all.iter().any(|s| s.name == name) {
            let names: Vec<_> = all.iter().map(|s| s.name).collect();
            eprintln!("no scenario {name}; there are: {}", names.join(", "));
            return ExitCode::from(2);
        }
    }
    println!("sluice-eta seed={seed} scale={scale}");
    let (mut new_all, mut old_all) = (Judged::default(), Judged::default());
    let mut missed = Vec::new();
    for s in all
        .iter()
        .filter(|s| only.as_ref().is_none_or(|n| n == s.name))
    {
        let mut o = run(s, seed);
        let met = o.met();
        let lottery = o
            .lottery
            .map(|(even, late)| {
                format!(
                    " admitted_by_even_chance={:.1}% late_over_20_past_longer={:.1}%",
                    even * 100.0,
                    late * 100.0
                )
            })
            .unwrap_or_default();
        let (new, old) = (o.new.line("new"), o.old.line("old"));
        println!(
            "scenario={} visitors={} admitted={} estimates={} before_change={} | {new} | {old}{lottery} | {}",
            s.name,
            o.visitors,
            o.admitted,
            o.new.estimates,
            o.before_change,
            if met { "met" } else { "MISSED" },
        );
        if !met {
            missed.push(s.name);
        }
        if o.lottery.is_some() {
            continue; // judged by its chances, not by a wait
        }
        new_all.estimates += o.new.estimates;
        new_all.none += o.new.none;
        new_all.optimistic += o.new.optimistic;
        new_all.within += o.new.within;
        new_all.errors.append(&mut o.new.errors);
        old_all.estimates += o.old.estimates;
        old_all.none += o.old.none;
        old_all.optimistic += o.old.optimistic;
        old_all.within += o.old.within;
        old_all.errors.append(&mut o.old.errors);
    }
    println!(
        "all in line order | {} | {} | targets (each scenario: median error <= 25%, optimistic over 20% <= 5%; by lot: even chance 35-65%, late over 20% <= 5%): {}",
        new_all.line("new"),
        old_all.line("old"),
        if missed.is_empty() {
            "met".to_string()
        } else {
            format!("missed by {}", missed.join(", "))
        }
    );
    if missed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every scenario, at two seeds, meets the targets: an estimate rule that tells a stuck
    /// room's line "a few seconds" for ten minutes, or drifts in any other scenario, fails here.
    #[test]
    fn every_scenario_meets_the_targets() {
        for seed in [1, 2] {
            for s in scenarios(1.0) {
                let mut o = run(&s, seed);
                assert!(o.new.given() > 0, "{}: no estimate judged", s.name);
                assert!(
                    o.met(),
                    "{} (seed {seed}) misses: {}, {:?}",
                    s.name,
                    o.new.line("new"),
                    o.lottery
                );
            }
        }
    }
}
