//! Speed and memory of the state machine. Run: `cargo bench -p sluice-statemachine`.
//!
//! Prints: commands/s for joins (1,000,000 visitors into one room, 1,024 commands per entry),
//! bytes per waiter (resident-memory growth and the structures' own accounting), snapshot encode
//! and decode time at 1,000,000 waiters, status reads/s, and at 1,000,000 sessions the bytes per
//! session, snapshot encode time and gate checks/s.

mod common;

use common::*;
use sluice_statemachine::*;
use std::time::Instant;

const PER_ENTRY: u64 = 1_024;

fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

fn proposals(from: u64, to: u64, now: u64) -> Vec<Proposal> {
    (from..to)
        .step_by(PER_ENTRY as usize)
        .map(|start| Proposal {
            time_ms: now,
            commands: (start..(start + PER_ENTRY).min(to))
                .map(|v| Command::Join {
                    room: "bench".into(),
                    visitor: visitor(v),
                })
                .collect(),
        })
        .collect()
}

/// Joins `WAITERS` visitors in small batches of entries, so that the only lasting allocation is
/// the state.
fn fill(sm: &mut StateMachine, now: u64) {
    let mut index = 1;
    for start in (0..WAITERS).step_by(PER_ENTRY as usize * 16) {
        for p in proposals(start, (start + PER_ENTRY * 16).min(WAITERS), now) {
            index += 1;
            sm.apply(1, index, &p);
        }
    }
}

fn main() {
    let now = 1_750_000_000_000;

    // Memory: grow the line.
    let rss0 = rss_bytes();
    let mut sm = new_machine(now, room_config());
    fill(&mut sm, now);
    let rss1 = rss_bytes();
    assert_eq!(sm.room("bench").unwrap().waiting, WAITERS);
    println!(
        "memory: {WAITERS} waiters, resident growth {:.1} bytes/waiter, structures {:.1} bytes/waiter",
        (rss1 - rss0) as f64 / WAITERS as f64,
        sm.waiter_heap_bytes() as f64 / WAITERS as f64
    );

    // Snapshot encode + decode.
    let t = Instant::now();
    let bytes = sm.snapshot();
    let enc = t.elapsed();
    let t = Instant::now();
    let restored = StateMachine::restore(&bytes).expect("restore");
    let dec = t.elapsed();
    assert_eq!(restored.room("bench").unwrap().waiting, WAITERS);
    println!(
        "snapshot: {WAITERS} waiters, {:.1} MB, encode {:.0} ms, decode {:.0} ms, total {:.0} ms",
        bytes.len() as f64 / 1e6,
        enc.as_secs_f64() * 1e3,
        dec.as_secs_f64() * 1e3,
        (enc + dec).as_secs_f64() * 1e3
    );
    drop(restored);

    // Status reads spread over the line (exact positions).
    let reads = 200_000u64;
    let t = Instant::now();
    let mut positions = 0u64;
    for i in 0..reads {
        let v = (i * 7_919) % WAITERS;
        let view = sm.visitor("bench", visitor(v)).unwrap();
        if let VisitorState::Waiting {
            position: Some(p), ..
        } = view.state
        {
            positions += p;
        }
    }
    let el = t.elapsed();
    assert!(positions > 0);
    println!(
        "status: {:.0} reads/s at {WAITERS} waiters",
        reads as f64 / el.as_secs_f64()
    );
    drop(sm);

    // Sessions: 1,000,000 admitted visitors. Resident growth, snapshot encode (a node takes its
    // snapshot while applies wait) and gate checks (`session_active`) spread over them.
    let rss0 = rss_bytes();
    let mut sm = new_machine(now, sessions_config());
    fill(&mut sm, now);
    let rss1 = rss_bytes();
    assert_eq!(sm.room("bench").unwrap().active, WAITERS);
    let t = Instant::now();
    let bytes = sm.snapshot();
    println!(
        "sessions: {WAITERS}, resident growth {:.1} bytes/session; snapshot {:.1} MB, encode {:.0} ms",
        (rss1 - rss0) as f64 / WAITERS as f64,
        bytes.len() as f64 / 1e6,
        t.elapsed().as_secs_f64() * 1e3
    );
    let checks = 1_000_000u64;
    let t = Instant::now();
    let mut active = 0u64;
    for i in 0..checks {
        let v = (i * 7_919) % WAITERS;
        let id = visitor(v);
        active += u64::from(sm.session_active("bench", id, now));
    }
    assert_eq!(active, checks);
    println!(
        "gate: {:.0} session checks/s at {WAITERS} sessions",
        checks as f64 / t.elapsed().as_secs_f64()
    );
    drop((sm, bytes));

    // Throughput: apply 1,000,000 joins, pre-encoded commands decoded first as Raft would.
    for round in 0..3 {
        let mut sm = new_machine(now, room_config());
        let batch = proposals(0, WAITERS, now);
        let t = Instant::now();
        for (i, p) in batch.iter().enumerate() {
            sm.apply(1, i as u64 + 2, p);
        }
        let el = t.elapsed();
        println!(
            "apply: round {round}: {WAITERS} joins in {:.0} ms = {:.2} M commands/s",
            el.as_secs_f64() * 1e3,
            WAITERS as f64 / el.as_secs_f64() / 1e6
        );
    }
}
