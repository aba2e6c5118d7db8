//! How true are the waiting times the line tells? Seeded scenarios drive the real state machine
//! second by second: visitors arrive, wait, look at their status every few seconds, are
//! admitted, and end their sessions (leaving, or letting them expire). Every estimate shown to
//! every waiter is kept and compared, once that visitor is admitted, with the wait it really had;
//! beside it, the estimate today's rule would have given from the same state (the position
//! divided by the admission rate, blended half and half with the last minute's admissions).
//!
//! `sluice-eta [--seed N] [--scale F] [--scenario NAME]` prints one line per scenario and a last
//! line with the targets: the median error of the estimates at most 25 % of the true wait, and
//! at most 5 % of them more than 20 % shorter than the truth. `--scale` multiplies the number of
//! visitors (a short run: 0.1).

use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};
use sluice_statemachine::*;
use std::collections::{BTreeMap, BTreeSet};
use std::process::ExitCode;

const T0: u64 = 1_800_000_000_000;
/// Seconds between two looks at the status by one waiter.
const POLL_SECS: u64 = 10;
/// A scenario that has not admitted everyone by then is cut off (the rest are not judged).
const HORIZON_SECS: u64 = 6 * 3600;

/// How admitted visitors end their sessions.
#[derive(Clone, Copy)]
enum Sessions {
    /// They leave after a uniformly drawn number of seconds.
    Leave(u64, u64),
    /// They never come back: the session expires at its TTL.
    Expire,
    /// They leave together at the next multiple of this many seconds after an hour's first
    /// minute of use (checkout waves).
    Waves(u64),
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
    vec![
        Scenario {
            name: "rate-bound",
            config: room(100_000, 60, 3600),
            visitors: n(600),
            arrive_over: 120,
            sessions: Sessions::Leave(600, 1200),
            events: vec![],
        },
        Scenario {
            name: "capacity-long",
            config: room(20, 600, 3600),
            visitors: n(300),
            arrive_over: 300,
            sessions: Sessions::Leave(300, 900),
            events: vec![],
        },
        Scenario {
            name: "capacity-short",
            config: room(50, 6000, 30),
            visitors: n(3000),
            arrive_over: 600,
            sessions: Sessions::Expire,
            events: vec![],
        },
        Scenario {
            name: "bursty-leaves",
            config: room(40, 6000, 3600),
            visitors: n(600),
            arrive_over: 300,
            sessions: Sessions::Waves(240),
            events: vec![],
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
    lottery_even: Option<f64>,
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
    apply(
        &mut sm,
        T0,
        vec![Command::CreateRoom {
            room: "r".into(),
            config: s.config.clone(),
        }],
    );
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
    let lottery = s.config.mode == Mode::Lottery;
    for sec in 0..HORIZON_SECS {
        let now = T0 + sec * 1000;
        let mut commands = vec![Command::Tick];
        commands.extend(events.remove(&sec).unwrap_or_default());
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
            let end = match s.sessions {
                Sessions::Leave(lo, hi) => Some(sec + lo + below(hi - lo + 1)),
                Sessions::Expire => None,
                Sessions::Waves(every) => Some((sec + 60).div_ceil(every) * every),
            };
            if let Some(end) = end {
                leaves.entry(end).or_default().push(v);
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
        lottery_even: None,
    };
    let mut even = (0u64, 0u64);
    for (v, list) in shown {
        let Some(&at) = admitted_at.get(&v) else {
            continue;
        };
        for e in list {
            let actual = at - e.at;
            out.new.add(e.new, actual);
            out.old.add(e.old.map(|o| (o, o)), actual);
            if let Some((secs, _)) = e.new {
                even.0 += 1;
                even.1 += u64::from(actual <= secs);
            }
        }
    }
    if lottery {
        out.lottery_even = Some(even.1 as f64 / even.0.max(1) as f64);
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
    for s in all
        .iter()
        .filter(|s| only.as_ref().is_none_or(|n| n == s.name))
    {
        let mut o = run(s, seed);
        let lottery = o
            .lottery_even
            .map(|p| format!(" admitted_by_even_chance_estimate={:.1}%", p * 100.0))
            .unwrap_or_default();
        let (new, old) = (o.new.line("new"), o.old.line("old"));
        println!(
            "scenario={} visitors={} admitted={} estimates={} | {new} | {old}{lottery}",
            s.name, o.visitors, o.admitted, o.new.estimates,
        );
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
    let met = new_all.median() <= 0.25 && new_all.optimistic_share() <= 0.05;
    println!(
        "all | {} | {} | targets (median error <= 25%, optimistic over 20% <= 5%): {}",
        new_all.line("new"),
        old_all.line("old"),
        if met { "met" } else { "not met" }
    );
    ExitCode::SUCCESS
}
