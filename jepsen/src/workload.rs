//! Workloads: client loops that record every operation in the history.
//!
//! - `queue-append`: paused rooms with long TTLs are append-only lists; a join appends the
//!   visitor, a `consistent=true` queue read reads the list (Elle's list-append).
//! - `admission`: a FIFO room with small capacity and rate; visitors join, wait, browse, leave or
//!   expire; a monitor reads the room and its line linearizably.
//! - `lottery`: a lottery room; visitors join and poll their status, which reports the log index
//!   it was read at, so the draws can be replayed from the log.
//! - `lanes`: the admission room with a presale lane before its own line; a third of the
//!   visitors join with an access code for the presale (a `lane` event in the history says
//!   which), so the checkers judge order within each lane and priority across them.
//! - `phases`: the admission workload in a room that sells in three phases (a presale, the
//!   public sale, a last drop), each with its own capacity and rate from its start; the
//!   capacity and rate checkers hold each read to the phase in effect.

use crate::client::{call, call_json, Res};
use crate::db::TICKET_SECRET;
use crate::history::{History, Kind};
use crate::ticket::{mint, value_of};
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Which workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Workload {
    /// List-append over paused rooms.
    QueueAppend,
    /// Capacity, rate, FIFO, no lost joins.
    Admission,
    /// Lottery draws replayed from the log.
    Lottery,
    /// Admission with a presale lane: capacity, rate, FIFO within each lane, lanes in order.
    Lanes,
    /// Admission in a room that sells in phases: capacity and rate of each phase, FIFO, no
    /// lost joins.
    Phases,
}

/// One phase of the phased room's sale, as the run plans it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PhasePlan {
    /// Its start, unix seconds.
    pub starts_at: u64,
    /// Its name.
    pub name: &'static str,
    /// The room's capacity from its start.
    pub capacity: u64,
    /// The room's admissions per minute from its start.
    pub per_minute: u64,
}

impl Workload {
    /// Parses a kebab-case name.
    pub fn parse(s: &str) -> Option<Self> {
        serde_json::from_value(Value::String(s.into())).ok()
    }

    /// The kebab-case name.
    pub fn name(self) -> String {
        serde_json::to_value(self)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default()
    }

    /// The nodes' `snapshot_every` and `logs_kept_after_snapshot`. The lottery replay needs the
    /// whole log, so its runs never snapshot. The others snapshot often (queue-append writes
    /// about a hundred entries a second, admission a few; a leader takes its snapshots four
    /// times less often) and keep few entries behind, so that a follower back from a fault is
    /// often sent a snapshot, and snapshot building, sending and installing run under the
    /// faults.
    pub fn snapshots(self) -> (u64, u64) {
        match self {
            Workload::Lottery => (10_000_000, 5_000),
            Workload::QueueAppend => (20, 10),
            Workload::Admission | Workload::Lanes | Workload::Phases => (10, 5),
        }
    }

    /// The room whose line and counts a monitor reads linearizably, if the workload has one.
    pub fn monitored_room(self) -> Option<&'static str> {
        match self {
            Workload::Admission => Some(ADMISSION_ROOM),
            Workload::Lanes => Some(LANES_ROOM),
            Workload::Phases => Some(PHASES_ROOM),
            Workload::QueueAppend | Workload::Lottery => None,
        }
    }

    /// The room visitors join.
    pub fn visitor_room(self) -> &'static str {
        match self {
            Workload::Admission | Workload::QueueAppend => ADMISSION_ROOM,
            Workload::Lanes => LANES_ROOM,
            Workload::Phases => PHASES_ROOM,
            Workload::Lottery => LOTTERY_ROOM,
        }
    }

    /// The phased room's sale for a run that starts at `start` (unix seconds) and lasts `run`:
    /// the presale from the start, the public sale from a third of the run, the last drop from
    /// two thirds (empty for the other workloads). Capacities only grow, as sales' do; the last
    /// drop's rate is lower than the public sale's, so that the checkers see a rate fall too.
    pub fn phase_plan(self, start: u64, run: Duration) -> Vec<PhasePlan> {
        if self != Workload::Phases {
            return Vec::new();
        }
        let third = (run.as_secs() / 3).max(1);
        vec![
            PhasePlan {
                starts_at: start,
                name: "Presale",
                capacity: 2,
                per_minute: 60,
            },
            PhasePlan {
                starts_at: start + third,
                name: "Public sale",
                capacity: 4,
                per_minute: 240,
            },
            PhasePlan {
                starts_at: start + 2 * third,
                name: "Last drop",
                capacity: 6,
                per_minute: 90,
            },
        ]
    }

    /// Rooms and their configurations (`plan`: the phased room's sale, [`Self::phase_plan`]).
    pub fn rooms(self, plan: &[PhasePlan]) -> Vec<(String, Value)> {
        match self {
            Workload::QueueAppend => (0..3)
                .map(|k| {
                    (format!("q{k}"), json!({"capacity": 1, "paused": true, "waiter_ttl_secs": 2_592_000, "session_ttl_secs": 2_592_000, "max_waiting": 1_000_000}))
                })
                .collect(),
            Workload::Admission => vec![(
                ADMISSION_ROOM.into(),
                json!({"capacity": ADMISSION_CAPACITY, "admit_per_minute": ADMISSION_RATE_PER_MINUTE, "admit_burst": ADMISSION_BURST,
                       "session_ttl_secs": SESSION_TTL_SECS, "waiter_ttl_secs": WAITER_TTL_SECS, "max_waiting": 1_000_000}),
            )],
            Workload::Lanes => vec![(
                LANES_ROOM.into(),
                json!({"capacity": ADMISSION_CAPACITY, "admit_per_minute": ADMISSION_RATE_PER_MINUTE, "admit_burst": ADMISSION_BURST,
                       "session_ttl_secs": SESSION_TTL_SECS, "waiter_ttl_secs": WAITER_TTL_SECS, "max_waiting": 1_000_000,
                       "lanes": [{"name": PRESALE_LANE}]}),
            )],
            Workload::Phases => {
                let first = plan.first().cloned().unwrap_or(PhasePlan {
                    starts_at: 0,
                    name: "",
                    capacity: ADMISSION_CAPACITY,
                    per_minute: ADMISSION_RATE_PER_MINUTE,
                });
                // The first phase's limits are the room's own; the later ones are its timeline.
                let phases: Vec<Value> = plan
                    .iter()
                    .skip(1)
                    .map(|p| json!({"starts_at": p.starts_at, "name": p.name, "capacity": p.capacity, "admit_per_minute": p.per_minute, "announce": true}))
                    .collect();
                vec![(
                    PHASES_ROOM.into(),
                    json!({"capacity": first.capacity, "admit_per_minute": first.per_minute, "admit_burst": ADMISSION_BURST,
                           "session_ttl_secs": SESSION_TTL_SECS, "waiter_ttl_secs": WAITER_TTL_SECS, "max_waiting": 1_000_000,
                           "phases": phases}),
                )]
            }
            Workload::Lottery => vec![(
                LOTTERY_ROOM.into(),
                // An entry policy that never refuses, so that joins carry what the edge knows of
                // the client (`JoinWith`) and the replay reads them from the log.
                json!({"mode": "lottery", "capacity": 3, "admit_per_minute": 600, "admit_burst": 2, "session_ttl_secs": 2, "waiter_ttl_secs": WAITER_TTL_SECS, "max_waiting": 1_000_000,
                       "entry": {"places_per_client_max": 1_000_000}}),
            )],
        }
    }
}

/// How long the admission and lottery rooms keep a waiter who stops checking in: longer than a
/// run, so that no waiter of a run may end abandoned.
pub const WAITER_TTL_SECS: u64 = 600;

/// How long an admitted visitor's session lasts in the admission, lanes and phases rooms.
pub const SESSION_TTL_SECS: u64 = 3;

/// The admission workload's room and limits.
pub const ADMISSION_ROOM: &str = "adm";
/// Capacity of the admission room.
pub const ADMISSION_CAPACITY: u64 = 3;
/// Rate of the admission room.
pub const ADMISSION_RATE_PER_MINUTE: u64 = 120;
/// Burst of the admission room.
pub const ADMISSION_BURST: u64 = 2;
/// The lottery workload's room.
pub const LOTTERY_ROOM: &str = "lot";
/// The lanes workload's room (the admission room's limits, and a presale lane).
pub const LANES_ROOM: &str = "lan";
/// The phases workload's room.
pub const PHASES_ROOM: &str = "pha";
/// The lanes workload's priority lane.
pub const PRESALE_LANE: &str = "presale";
/// Access codes the lanes workload makes for the presale (more than a run uses).
pub const PRESALE_CODES: u64 = 5_000;

/// What client loops share.
#[derive(Clone, Debug)]
pub struct Ctx {
    /// Where events go.
    pub history: History,
    /// HTTP.
    pub http: reqwest::Client,
    /// Node base URLs by id (clients pick among the members alive at start).
    pub nodes: Vec<(u64, String)>,
    /// Next visitor value.
    pub next_value: Arc<AtomicU64>,
    /// Next process id.
    pub next_process: Arc<AtomicU64>,
    /// When to stop.
    pub deadline: Instant,
    /// Per-request timeout.
    pub timeout: Duration,
    /// Unused access codes for the presale lane (the lanes workload).
    pub codes: Arc<std::sync::Mutex<Vec<String>>>,
}

impl Ctx {
    fn process(&self) -> u64 {
        self.next_process.fetch_add(1, Ordering::SeqCst)
    }
}

/// Runs the workload's client loops until the deadline.
pub async fn run(w: Workload, ctx: Ctx, workers: usize, seed: u64) {
    let mut tasks = Vec::new();
    for i in 0..workers {
        let ctx = ctx.clone();
        let rng = ChaCha8Rng::seed_from_u64(seed ^ (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        tasks.push(tokio::spawn(async move {
            match w {
                Workload::QueueAppend => queue_append_worker(ctx, i, rng).await,
                Workload::Admission | Workload::Lottery | Workload::Lanes | Workload::Phases => {
                    visitor_worker(ctx, i, rng, w).await
                }
            }
        }));
    }
    if let Some(room) = w.monitored_room() {
        let ctx = ctx.clone();
        tasks.push(tokio::spawn(
            async move { admission_monitor(ctx, room).await },
        ));
    }
    for t in tasks {
        let _ = t.await;
    }
}

fn node_of(ctx: &Ctx, i: usize) -> (u64, String) {
    ctx.nodes[i % ctx.nodes.len()].clone()
}

async fn queue_append_worker(ctx: Ctx, i: usize, mut rng: ChaCha8Rng) {
    let mut process = ctx.process();
    let mut round = 0usize;
    while Instant::now() < ctx.deadline {
        // Spread over nodes; move on after each operation so faults hit every path.
        let (node, url) = node_of(&ctx, i + round);
        round += 1;
        let key = rng.next_u64() % 3;
        if rng.next_u64().is_multiple_of(2) {
            let v = ctx.next_value.fetch_add(1, Ordering::SeqCst);
            let room = format!("q{key}");
            let micro = json!([["append", key, v]]);
            ctx.history
                .record(Kind::Invoke, process, "txn", micro.clone(), node, None);
            let r = call(
                &ctx.http,
                reqwest::Method::POST,
                &format!("{url}/v1/rooms/{room}/join"),
                Some(&mint(TICKET_SECRET, &room, v)),
                false,
                true,
                ctx.timeout,
            )
            .await;
            match r {
                Res::Ok(_) => {
                    ctx.history
                        .record(Kind::Ok, process, "txn", micro, node, None);
                }
                Res::Fail(e) => {
                    ctx.history
                        .record(Kind::Fail, process, "txn", micro, node, Some(e));
                }
                Res::Info(e) => {
                    ctx.history
                        .record(Kind::Info, process, "txn", micro, node, Some(e));
                    process = ctx.process();
                }
            }
        } else {
            ctx.history.record(
                Kind::Invoke,
                process,
                "txn",
                json!([["r", key, null]]),
                node,
                None,
            );
            let r = call(
                &ctx.http,
                reqwest::Method::GET,
                &format!("{url}/v1/rooms/q{key}/queue?consistent=true&limit=10000"),
                None,
                true,
                false,
                ctx.timeout,
            )
            .await;
            match r {
                Res::Ok(v) => {
                    let list: Vec<u64> = v["entries"]
                        .as_array()
                        .map(|a| {
                            a.iter()
                                .filter_map(|e| e["visitor_id"].as_str().and_then(value_of))
                                .collect()
                        })
                        .unwrap_or_default();
                    ctx.history.record(
                        Kind::Ok,
                        process,
                        "txn",
                        json!([["r", key, list]]),
                        node,
                        None,
                    );
                }
                Res::Fail(e) | Res::Info(e) => {
                    ctx.history.record(
                        Kind::Fail,
                        process,
                        "txn",
                        json!([["r", key, null]]),
                        node,
                        Some(e),
                    );
                }
            }
        }
    }
}

async fn visitor_worker(ctx: Ctx, i: usize, mut rng: ChaCha8Rng, w: Workload) {
    let room = w.visitor_room();
    let mut round = 0usize;
    while Instant::now() < ctx.deadline {
        let process = ctx.process();
        let (node, url) = node_of(&ctx, i + round);
        round += 1;
        let v = ctx.next_value.fetch_add(1, Ordering::SeqCst);
        let ticket = mint(TICKET_SECRET, room, v);
        // In the lanes workload, a third of the visitors hold a presale code.
        let code = (w == Workload::Lanes && rng.next_u64().is_multiple_of(3))
            .then(|| ctx.codes.lock().expect("codes").pop())
            .flatten();
        if code.is_some() {
            let lane = json!({"v": v, "lane": PRESALE_LANE});
            ctx.history
                .record(Kind::Invoke, process, "lane", lane.clone(), node, None);
            ctx.history
                .record(Kind::Ok, process, "lane", lane, node, None);
        }
        ctx.history
            .record(Kind::Invoke, process, "join", json!(v), node, None);
        let join_url = format!("{url}/v1/rooms/{room}/join");
        let r = match &code {
            Some(c) => {
                call_json(
                    &ctx.http,
                    &join_url,
                    &ticket,
                    &json!({"code": c}),
                    ctx.timeout,
                )
                .await
            }
            None => {
                call(
                    &ctx.http,
                    reqwest::Method::POST,
                    &join_url,
                    Some(&ticket),
                    false,
                    true,
                    ctx.timeout,
                )
                .await
            }
        };
        let mut state = match r {
            Res::Ok(b) => {
                ctx.history.record(
                    Kind::Ok,
                    process,
                    "join",
                    json!({"v": v, "state": b["state"], "index": b["applied_index"]}),
                    node,
                    None,
                );
                b["state"].as_str().unwrap_or_default().to_string()
            }
            Res::Fail(e) => {
                ctx.history
                    .record(Kind::Fail, process, "join", json!(v), node, Some(e));
                continue;
            }
            Res::Info(e) => {
                ctx.history
                    .record(Kind::Info, process, "join", json!(v), node, Some(e));
                continue;
            }
        };
        // Wait to be admitted, polling local status (each answer carries its log index).
        while state == "waiting" && Instant::now() < ctx.deadline {
            tokio::time::sleep(Duration::from_millis(150)).await;
            let sp = ctx.process();
            ctx.history
                .record(Kind::Invoke, sp, "status", json!(v), node, None);
            match call(
                &ctx.http,
                reqwest::Method::GET,
                &format!("{url}/v1/rooms/{room}/status"),
                Some(&ticket),
                false,
                false,
                ctx.timeout,
            )
            .await
            {
                Res::Ok(b) => {
                    state = b["state"].as_str().unwrap_or_default().to_string();
                    ctx.history.record(
                        Kind::Ok,
                        sp,
                        "status",
                        json!({"v": v, "state": state, "index": b["applied_index"]}),
                        node,
                        None,
                    );
                }
                Res::Fail(e) | Res::Info(e) => {
                    ctx.history
                        .record(Kind::Fail, sp, "status", json!(v), node, Some(e));
                }
            }
        }
        if state == "admitted" {
            // Browse a little, then leave (or just go away and let the session expire).
            tokio::time::sleep(Duration::from_millis(rng.next_u64() % 800)).await;
            if rng.next_u64().is_multiple_of(2) {
                let lp = ctx.process();
                ctx.history
                    .record(Kind::Invoke, lp, "leave", json!(v), node, None);
                let r = call(
                    &ctx.http,
                    reqwest::Method::POST,
                    &format!("{url}/v1/rooms/{room}/leave"),
                    Some(&ticket),
                    false,
                    true,
                    ctx.timeout,
                )
                .await;
                let (kind, err) = match r {
                    Res::Ok(_) => (Kind::Ok, None),
                    Res::Fail(e) => (Kind::Fail, Some(e)),
                    Res::Info(e) => (Kind::Info, Some(e)),
                };
                ctx.history.record(kind, lp, "leave", json!(v), node, err);
            }
        }
    }
}

async fn admission_monitor(ctx: Ctx, room: &'static str) {
    let mut round = 0usize;
    while Instant::now() < ctx.deadline {
        let (node, url) = node_of(&ctx, round);
        round += 1;
        let p = ctx.process();
        ctx.history
            .record(Kind::Invoke, p, "room", Value::Null, node, None);
        match call(
            &ctx.http,
            reqwest::Method::GET,
            &format!("{url}/v1/rooms/{room}?consistent=true"),
            None,
            true,
            false,
            ctx.timeout,
        )
        .await
        {
            Res::Ok(b) => {
                ctx.history.record(Kind::Ok, p, "room", json!({"active": b["active"], "admitted": b["totals"]["admitted"], "index": b["applied_index"]}), node, None);
            }
            Res::Fail(e) | Res::Info(e) => {
                ctx.history
                    .record(Kind::Fail, p, "room", Value::Null, node, Some(e));
            }
        }
        let p = ctx.process();
        ctx.history
            .record(Kind::Invoke, p, "line", Value::Null, node, None);
        match call(
            &ctx.http,
            reqwest::Method::GET,
            &format!("{url}/v1/rooms/{room}/queue?consistent=true&limit=10000"),
            None,
            true,
            false,
            ctx.timeout,
        )
        .await
        {
            Res::Ok(b) => {
                let list: Vec<u64> = b["entries"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|e| e["visitor_id"].as_str().and_then(value_of))
                            .collect()
                    })
                    .unwrap_or_default();
                ctx.history
                    .record(Kind::Ok, p, "line", json!(list), node, None);
            }
            Res::Fail(e) | Res::Info(e) => {
                ctx.history
                    .record(Kind::Fail, p, "line", Value::Null, node, Some(e));
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
