//! Seeded simulator: a generated workload applied to several replicas, one of them restored from
//! a snapshot half-way; digests compared at checkpoints; invariants checked after every entry.
//!
//! `sluice-sim [--seed N] [--entries N] [--rooms N]` prints one summary line and exits non-zero,
//! naming the seed, on any divergence or broken invariant. Any failure replays from its seed.

use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};
use sluice_statemachine::*;
use std::process::ExitCode;

struct Gen {
    rng: ChaCha8Rng,
}

impl Gen {
    fn below(&mut self, n: u64) -> u64 {
        self.rng.next_u64() % n
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }
}

fn room_config(g: &mut Gen, now: u64) -> RoomConfig {
    let opens = g.chance(30).then(|| now + g.below(60_000));
    RoomConfig {
        capacity: 1 + g.below(50),
        admit_per_minute: 1 + g.below(3_000),
        admit_burst: g.below(10),
        session_ttl_secs: 1 + g.below(120),
        waiter_ttl_secs: 1 + g.below(300),
        mode: g.pick(&[
            Mode::Fifo,
            Mode::Fifo,
            Mode::Lottery,
            Mode::Passthrough,
            Mode::Reject,
        ]),
        opens_at_ms: opens,
        closes_at_ms: (g.chance(10)).then(|| opens.unwrap_or(now) + 1 + g.below(600_000)),
        shuffle_at_open: opens.is_some() && g.chance(50),
        max_waiting: 1 + g.below(5_000),
        paused: g.chance(5),
        health: g.pick(&[
            Health::Ok,
            Health::Ok,
            Health::Ok,
            Health::Slow,
            Health::Down,
        ]),
        slow_factor_permille: 1 + g.below(999),
        branding: Branding::default(),
    }
}

fn command(g: &mut Gen, rooms: &[String], visitors: u64, now: u64) -> Command {
    let room = rooms[g.below(rooms.len() as u64) as usize].clone();
    let visitor = VisitorId::from_u128(1 + g.below(visitors) as u128);
    match g.below(100) {
        0..=39 => Command::Join { room, visitor },
        40..=49 => Command::Heartbeat { room, visitor },
        50..=57 => Command::Leave { room, visitor },
        58..=64 => {
            let n = g.below(50);
            Command::Touch {
                room,
                visitors: (0..n)
                    .map(|_| VisitorId::from_u128(1 + g.below(visitors) as u128))
                    .collect(),
            }
        }
        65..=79 => Command::Tick,
        80..=81 => Command::Pause { room },
        82..=84 => Command::Resume { room },
        85..=86 => Command::SetMode {
            room,
            mode: g.pick(&[Mode::Fifo, Mode::Lottery, Mode::Passthrough, Mode::Reject]),
        },
        87..=88 => Command::SetHealth {
            room,
            health: g.pick(&[Health::Ok, Health::Slow, Health::Down]),
            slow_factor_permille: g.chance(50).then(|| 1 + g.below(999)),
        },
        89 => Command::ForceAdmit {
            room,
            count: 1 + g.below(20),
        },
        90 => Command::Revoke { room, visitor },
        91 => Command::RevokeAll { room },
        92 => Command::UpdateRoom {
            config: room_config(g, now),
            room,
        },
        93 => Command::PutPool {
            pool: "pool".into(),
            room_capacity: 1 + g.below(20),
            rooms_max: 1 + g.below(10),
        },
        94..=96 => Command::PoolAssign {
            pool: "pool".into(),
        },
        97 => Command::PoolRelease {
            pool: "pool".into(),
            room_index: g.below(10),
        },
        98 => Command::PoolReport {
            pool: "pool".into(),
            room_index: g.below(10),
            count: g.below(25),
        },
        // Garbage: a bad name, an unknown room.
        _ => Command::Join {
            room: if g.chance(50) {
                "Bad!".into()
            } else {
                "missing".into()
            },
            visitor,
        },
    }
}

fn arg(args: &[String], name: &str, default: u64) -> Result<u64, String> {
    match args.iter().position(|a| a == name) {
        Some(i) => args
            .get(i + 1)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("{name} needs a number")),
        None => Ok(default),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let parsed = (|| {
        Ok::<_, String>((
            arg(&args, "--seed", 1)?,
            arg(&args, "--entries", 20_000)?,
            arg(&args, "--rooms", 4)?,
        ))
    })();
    let (seed, entries, room_count) = match parsed {
        Ok(v) => v,
        Err(e) => {
            eprintln!("sluice-sim: {e}\nusage: sluice-sim [--seed N] [--entries N] [--rooms N]");
            return ExitCode::from(2);
        }
    };
    match run(seed, entries, room_count.clamp(1, 64)) {
        Ok(summary) => {
            println!("{summary}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            println!("sluice-sim seed={seed} FAILED: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(seed: u64, entries: u64, room_count: u64) -> Result<String, String> {
    let mut g = Gen {
        rng: ChaCha8Rng::seed_from_u64(seed),
    };
    let mut now: u64 = 1_750_000_000_000;
    let rooms: Vec<String> = (0..room_count).map(|i| format!("room-{i}")).collect();
    let visitors = 50 + g.below(2_000);
    let mut a = StateMachine::new();
    let mut b = StateMachine::new();
    let mut c: Option<StateMachine> = None;
    let (mut commands, mut term) = (0u64, 1u64);
    // Rooms whose active count may legitimately exceed capacity (passthrough, lowered capacity)
    // until it falls back under.
    let mut overshoot_ok = vec![false; rooms.len()];
    for index in 1..=entries {
        now += g.below(1_500);
        if g.chance(1) {
            term += 1;
        }
        let proposal = if index <= room_count {
            let room = rooms[(index - 1) as usize].clone();
            Proposal {
                time_ms: now,
                commands: vec![Command::CreateRoom {
                    config: room_config(&mut g, now),
                    room,
                }],
            }
        } else if g.chance(2) {
            // A leader's clock may lag: the machine must keep time monotonic.
            Proposal {
                time_ms: now.saturating_sub(g.below(5_000)),
                commands: vec![Command::Tick],
            }
        } else {
            let n = 1 + g.below(8);
            Proposal {
                time_ms: now,
                commands: (0..n)
                    .map(|_| command(&mut g, &rooms, visitors, now))
                    .collect(),
            }
        };
        commands += proposal.commands.len() as u64;
        for cmd in &proposal.commands {
            if let Command::SetMode {
                room,
                mode: Mode::Passthrough,
            }
            | Command::UpdateRoom { room, .. } = cmd
            {
                if let Some(i) = rooms.iter().position(|r| r == room) {
                    overshoot_ok[i] = true;
                }
            }
        }
        let out_a = a.apply(term, index, &proposal);
        let out_b = b.apply(term, index, &proposal);
        if out_a != out_b {
            return Err(format!("outcomes differ at entry {index}"));
        }
        if let Some(c) = c.as_mut() {
            if c.apply(term, index, &proposal) != out_a {
                return Err(format!(
                    "restored replica's outcomes differ at entry {index}"
                ));
            }
        }
        for (i, name) in rooms.iter().enumerate() {
            if let Some(r) = a.room(name) {
                if r.active <= r.config.capacity {
                    overshoot_ok[i] = r.config.mode == Mode::Passthrough;
                } else if !overshoot_ok[i] {
                    return Err(format!(
                        "room {name} active {} > capacity {} at entry {index}",
                        r.active, r.config.capacity
                    ));
                }
            }
        }
        if index == entries / 2 {
            let restored =
                StateMachine::restore(&a.snapshot()).map_err(|e| format!("restore: {e}"))?;
            if restored.digest() != a.digest() {
                return Err(format!("restored digest differs at entry {index}"));
            }
            c = Some(restored);
        }
        if index % 1_000 == 0 || index == entries {
            let d = a.digest();
            if b.digest() != d || c.as_ref().is_some_and(|c| c.digest() != d) {
                return Err(format!("digests diverge at entry {index}"));
            }
        }
    }
    let rooms_v = a.rooms();
    let sum = |f: fn(&RoomView) -> u64| rooms_v.iter().map(f).sum::<u64>();
    Ok(format!(
        "sluice-sim seed={seed} entries={entries} commands={commands} rooms={} joined={} admitted={} expired={} abandoned={} waiting={} active={} replicas=3 digest={} ok",
        rooms_v.len(),
        sum(|r| r.totals.joined),
        sum(|r| r.totals.admitted),
        sum(|r| r.totals.expired),
        sum(|r| r.totals.abandoned),
        sum(|r| r.waiting),
        sum(|r| r.active),
        &digest_hex(&a.digest())[..16],
    ))
}
