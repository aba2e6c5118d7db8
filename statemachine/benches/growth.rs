//! The slowest single entry while a room grows. Run: `cargo bench -p sluice-statemachine --bench
//! growth`.
//!
//! Grows a line of waiters, then a set of sessions, to 1,000,000 in entries of 16 joins (a batch
//! at moderate load) and prints the apply time of the median entry, the 99.9th percentile and the
//! slowest few with where they happened. A structure that grows all at once (a hash table that
//! doubles, a vector that is copied) shows up as one slow entry, and it is the same entry on every
//! node. Runs with the server's allocator, since whether growing a vector copies it depends on it.

mod common;

use common::*;
use sluice_statemachine::*;
use std::time::Instant;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const PER_ENTRY: u64 = 16;

fn main() {
    let now = 1_750_000_000_000;
    for (what, config) in [("waiters", room_config()), ("sessions", sessions_config())] {
        let mut sm = new_machine(now, config);
        let mut times = Vec::with_capacity((WAITERS / PER_ENTRY) as usize);
        for (i, start) in (0..WAITERS).step_by(PER_ENTRY as usize).enumerate() {
            let p = Proposal {
                time_ms: now,
                commands: (start..start + PER_ENTRY)
                    .map(|v| Command::Join {
                        room: "bench".into(),
                        visitor: visitor(v),
                    })
                    .collect(),
            };
            let t = Instant::now();
            sm.apply(1, i as u64 + 2, &p);
            times.push((t.elapsed().as_nanos() as u64, start));
        }
        times.sort_unstable();
        let n = times.len();
        let slowest: Vec<String> = times[n - 4..]
            .iter()
            .rev()
            .map(|(t, at)| format!("{:.2} ms at {at}", *t as f64 / 1e6))
            .collect();
        println!(
            "growth: entries of {PER_ENTRY} joins up to {WAITERS} {what}: p50 {:.1} µs, p99.9 {:.1} µs, slowest {}",
            times[n / 2].0 as f64 / 1e3,
            times[n * 999 / 1000].0 as f64 / 1e3,
            slowest.join(", ")
        );
    }
}
