//! Linearized command throughput and commit latency of a 3-node cluster on one machine (fsync on),
//! at 1, 16 and 256 concurrent proposers; and the time a node with 1,000,000 waiters takes to
//! restart and serve. Run: `cargo bench --workspace --bench cluster`.
//!
//! `SLUICE_BENCH_ONLY=ledger` instead compares join throughput with the ledger kept and not
//! kept (records of every join and admission written to RocksDB, or only their chain in the
//! state), on fresh clusters, alternating, at 256 proposers into a room that admits at once.

#[path = "../tests/common/mod.rs"]
mod common;

use common::*;
use hdrhistogram::Histogram;
use sluice_statemachine::{Command, Outcome, RoomConfig, VisitorId};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

// The allocator the `sluice` binary runs with.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn tune(cfg: &mut sluice_raft::NodeConfig) {
    cfg.snapshot_every = 100_000;
}

fn without_ledger(cfg: &mut sluice_raft::NodeConfig) {
    tune(cfg);
    cfg.ledger = None;
}

/// Joins per second at 256 proposers, ledger kept or not, on a fresh cluster.
async fn joins_per_sec(ledger: bool, secs: u64) -> f64 {
    let c = TestCluster::start(3, if ledger { tune } else { without_ledger }).await;
    let leader = c.leader().unwrap().clone();
    c.write_via(
        &leader,
        Command::PutRoom {
            room: "bench".into(),
            config: RoomConfig {
                max_waiting: 10_000_000,
                ..room_config()
            },
        },
    )
    .await;
    let next = Arc::new(AtomicU64::new(0));
    let t = Instant::now();
    run(&c, 256, secs, next.clone()).await;
    let rate = next.load(Ordering::Relaxed) as f64 / t.elapsed().as_secs_f64();
    c.shutdown().await;
    rate
}

async fn ledger_ab(secs: u64) {
    let (mut on, mut off) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        on.push(joins_per_sec(true, secs).await);
        off.push(joins_per_sec(false, secs).await);
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    println!(
        "ledger kept: {:.0} joins/s {on:.0?}; not kept: {:.0} joins/s {off:.0?}; ratio {:.3}",
        mean(&on),
        mean(&off),
        mean(&on) / mean(&off)
    );
}

async fn run(c: &TestCluster, proposers: u64, secs: u64, next: Arc<AtomicU64>) {
    let leader = c.leader().unwrap().clone();
    let hist = Arc::new(Mutex::new(Histogram::<u64>::new(3).unwrap()));
    let end = Instant::now() + Duration::from_secs(secs);
    let mut tasks = Vec::new();
    for _ in 0..proposers {
        let (leader, hist, next) = (leader.clone(), hist.clone(), next.clone());
        tasks.push(tokio::spawn(async move {
            let mut local = Histogram::<u64>::new(3).unwrap();
            while Instant::now() < end {
                let n = next.fetch_add(1, Ordering::Relaxed);
                let t = Instant::now();
                let o = leader
                    .write(Command::Join {
                        room: "bench".into(),
                        visitor: VisitorId::from_u128(n as u128 + 1),
                    })
                    .await;
                assert!(matches!(o, Ok((Outcome::Visitor(_), _))), "{o:?}");
                local.record(t.elapsed().as_micros() as u64).unwrap();
            }
            hist.lock().unwrap().add(local).unwrap();
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let h = hist.lock().unwrap();
    println!(
        "proposers {proposers:>3}: {:>8.0} commands/s, latency p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        h.len() as f64 / secs as f64,
        h.value_at_quantile(0.5) as f64 / 1e3,
        h.value_at_quantile(0.99) as f64 / 1e3,
        h.max() as f64 / 1e3,
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let secs: u64 = std::env::var("SLUICE_BENCH_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let waiters: u64 = std::env::var("SLUICE_BENCH_WAITERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    if std::env::var("SLUICE_BENCH_ONLY").as_deref() == Ok("ledger") {
        return ledger_ab(secs).await;
    }
    let mut c = TestCluster::start(3, tune).await;
    let config = RoomConfig {
        paused: true,
        max_waiting: 10_000_000,
        waiter_ttl_secs: 86_400,
        ..room_config()
    };
    let leader = c.leader().unwrap().clone();
    c.write_via(
        &leader,
        Command::PutRoom {
            room: "bench".into(),
            config,
        },
    )
    .await;
    let next = Arc::new(AtomicU64::new(0));
    for p in [1, 16, 256] {
        run(&c, p, secs, next.clone()).await;
    }

    // Fill the room to `waiters`, snapshot, then restart a follower and time it to serving.
    let t = Instant::now();
    while next.load(Ordering::Relaxed) < waiters {
        let start = next.fetch_add(1_024, Ordering::Relaxed);
        let cmds: Vec<Command> = (start..start + 1_024)
            .map(|n| Command::Join {
                room: "bench".into(),
                visitor: VisitorId::from_u128(n as u128 + 1),
            })
            .collect();
        for r in leader.write_many(cmds).await {
            r.unwrap();
        }
    }
    let total = leader
        .read(|st| st.sm.room("bench").unwrap().waiting)
        .unwrap()
        .0;
    println!(
        "filled to {total} waiters in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    for n in c.nodes.values() {
        n.raft().trigger().snapshot().await.unwrap();
    }
    c.wait_converged().await;
    let follower = c.any_follower().id();
    wait_for("the follower's snapshot", Duration::from_secs(120), || {
        let s = c.nodes[&follower].status();
        async move { s.snapshot_index + 100 >= s.applied_index && s.snapshot_index > 0 }
    })
    .await;
    c.stop_node(follower).await;
    let t = Instant::now();
    let node = c.start_node(follower).await;
    wait_for(
        "the restarted follower serves reads",
        Duration::from_secs(120),
        || {
            let ready = node.is_ready();
            async move { ready }
        },
    )
    .await;
    let served = node
        .read(|st| st.sm.room("bench").unwrap().waiting)
        .unwrap()
        .0;
    println!(
        "restart with {served} waiters: serving after {:.0} ms",
        t.elapsed().as_secs_f64() * 1e3
    );
    c.shutdown().await;
}
