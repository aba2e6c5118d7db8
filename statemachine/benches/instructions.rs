//! Instruction counts of the state machine's hot paths, under Valgrind's callgrind (gungraun):
//! counts, not seconds, so that they do not move with the machine's load. `benchmarks/instructions.py`
//! runs this and compares each count with `benchmarks/instructions.json`.
//!
//! The workloads are small (callgrind runs code about fifty times slower): an entry of 1,024
//! joins into a room of 10,000 waiters, with the ledger's records kept and without; the same for
//! sessions (each join admitted); and a snapshot of a room of 100,000 waiters.

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

library_benchmark_group!(name = hot; benchmarks = apply_1024_joins, snapshot);
main!(library_benchmark_groups = hot);
