//! Instruction counts of the state machine's hot paths, under Valgrind's callgrind (gungraun):
//! counts, not seconds, so that they do not move with the machine's load. `benchmarks/instructions.py`
//! runs this and compares each count with `benchmarks/instructions.json`.
//!
//! The workloads are small (callgrind runs code about fifty times slower): an entry of 1,024
//! joins into a room of 10,000 waiters, with the ledger's records kept and without; the same for
//! sessions (each join admitted); a snapshot of a room of 100,000 waiters; and 1,024 status
//! reads of waiters behind a full room whose places end at different times (the estimate's
//! walk through the sessions, second by second).

mod common;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use common::*;
use gungraun::{library_benchmark, library_benchmark_group, main};
use sluice_statemachine::*;
use std::hint::black_box;

const NOW: u64 = 1_750_000_000_000;
const BATCH: u64 = 1_024;

/// A machine whose room holds `n` visitors (waiters or sessions by `config`), and the entry of
/// the next 1,024 joins.
fn filled(n: u64, config: RoomConfig, ledger: bool) -> (StateMachine, Proposal) {
    let mut sm = new_machine(NOW, config);
    let mut index = 1;
    for start in (0..n).step_by(BATCH as usize) {
        index += 1;
        sm.apply(1, index, &joins(start, (start + BATCH).min(n)));
    }
    sm.keep_ledger(ledger);
    (sm, joins(n, n + BATCH))
}

fn joins(from: u64, to: u64) -> Proposal {
    Proposal {
        time_ms: NOW,
        commands: (from..to)
            .map(|v| Command::Join {
                room: "bench".into(),
                visitor: visitor(v),
            })
            .collect(),
    }
}

fn waiters(ledger: bool) -> (StateMachine, Proposal) {
    filled(10_000, room_config(), ledger)
}

fn sessions(ledger: bool) -> (StateMachine, Proposal) {
    filled(10_000, sessions_config(), ledger)
}

#[library_benchmark]
#[bench::waiters(setup = waiters, args = (false))]
#[bench::waiters_ledger(setup = waiters, args = (true))]
#[bench::sessions(setup = sessions, args = (false))]
#[bench::sessions_ledger(setup = sessions, args = (true))]
fn apply_1024_joins((mut sm, entry): (StateMachine, Proposal)) -> StateMachine {
    let out = sm.apply(1, u64::MAX / 2, black_box(&entry));
    black_box(out);
    black_box(sm.take_ledger());
    sm
}

fn big_room() -> StateMachine {
    filled(100_000, room_config(), false).0
}

#[library_benchmark]
#[bench::waiters_100k(setup = big_room)]
fn snapshot(sm: StateMachine) -> Vec<u8> {
    black_box(sm.snapshot())
}

/// A full room of 1,000 places taken one a second over 1,000 seconds (half of them used, after
/// a few short visits that taught the room how long a used place lasts), and 10,000 waiters
/// behind it; the 1,024 waiters whose status is read, spread through the line.
fn full_room() -> (StateMachine, Vec<VisitorId>) {
    let config = RoomConfig {
        capacity: 1_000,
        admit_per_minute: 60_000,
        admit_burst: 1_000,
        session_ttl_secs: 3_600,
        waiter_ttl_secs: 3_600,
        max_waiting: WAITERS + 1,
        ..RoomConfig::default()
    };
    let mut sm = new_machine(NOW, config);
    let mut index = 1;
    let mut at = |sm: &mut StateMachine, secs: u64, commands: Vec<Command>| {
        index += 1;
        sm.apply(
            1,
            index,
            &Proposal {
                time_ms: NOW + secs * 1_000,
                commands,
            },
        );
    };
    let room = || "bench".to_string();
    let short: Vec<VisitorId> = (0..20).map(|v| visitor(1_000_000 + v)).collect();
    for &v in &short {
        at(
            &mut sm,
            0,
            vec![Command::Join {
                room: room(),
                visitor: v,
            }],
        );
    }
    at(
        &mut sm,
        1,
        vec![Command::Touch {
            room: room(),
            visitors: short.clone(),
        }],
    );
    for &v in &short {
        at(
            &mut sm,
            30,
            vec![Command::Leave {
                room: room(),
                visitor: v,
            }],
        );
    }
    for v in 0..1_000 {
        at(
            &mut sm,
            31 + v,
            vec![Command::Join {
                room: room(),
                visitor: visitor(v),
            }],
        );
    }
    let used: Vec<VisitorId> = (0..1_000).step_by(2).map(visitor).collect();
    at(
        &mut sm,
        1_040,
        vec![Command::Touch {
            room: room(),
            visitors: used,
        }],
    );
    for start in (1_000..11_000).step_by(BATCH as usize) {
        at(
            &mut sm,
            1_050,
            joins(start, (start + BATCH).min(11_000)).commands,
        );
    }
    at(&mut sm, 1_060, vec![Command::Tick]);
    let read = (0..BATCH).map(|i| visitor(1_000 + i * 9)).collect();
    (sm, read)
}

#[library_benchmark]
#[bench::behind_a_full_room(setup = full_room)]
fn status_1024_reads((sm, read): (StateMachine, Vec<VisitorId>)) -> StateMachine {
    for v in black_box(&read) {
        black_box(sm.visitor("bench", *v).ok());
    }
    sm
}

library_benchmark_group!(name = hot; benchmarks = apply_1024_joins, snapshot, status_1024_reads);
main!(library_benchmark_groups = hot);
