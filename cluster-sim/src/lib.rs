//! A seeded whole-cluster simulation: real Sluice nodes (the raft crate's `RaftNode`, RocksDB,
//! the state machine, the gRPC node-to-node service) on turmoil's simulated network and clock,
//! in one thread. A seed decides everything the simulation chooses: message latencies, the
//! clients' operations and the nodes they go to, and a schedule of faults (partitions, crashes
//! that lose every write not yet synced, clock steps, slow networks, membership changes). After
//! each schedule the history is checked with the fault suite's checkers.
//!
//! What is simulated, and what is not:
//! - the network between nodes is turmoil's (TCP streams with latency, partitions, crashes);
//! - time is turmoil's: every node's timers, its monotonic clock and its wall clock
//!   ([`sluice_raft::WallClock::simulated`]) follow the simulated clock, so a schedule of a
//!   minute of cluster time runs in well under a second;
//! - storage is real RocksDB in a temporary directory. Each node syncs its WAL on its own
//!   runtime after a simulated delay (the store's delay set by [`sluice_raft::Simulation`]); a crash
//!   that loses unsynced writes removes what was appended and not yet synced
//!   ([`sluice_raft::sim::forget_unsynced`]) before the node restarts.
//!
//! A schedule's outcome depends on the seed alone once the schedule has a process of its own
//! (as the binary runs each): tokio's random choices are seeded by turmoil (the workspace builds
//! with `--cfg tokio_unstable`), openraft's by [`sluice_raft::sim::seed_this_thread`], and a
//! simulated node's file work stays on its thread. Within a process that ran other schedules,
//! tokio's process-wide task numbers can change the order in which a crashed node's tasks are
//! dropped, and with it what follows (cluster-sim/README.md, "Reproducing a seed").

mod workload;

use futures::future::BoxFuture;
use futures::StreamExt;
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};
use sluice_jepsen::checker::{self, Verdict};
use sluice_jepsen::history::{Event, History, Kind};
use sluice_raft::sim::{BoxIo, Incoming, Transport};
use sluice_raft::{Broken, ClusterError, MembershipOp, NodeAddr, NodeConfig, RaftNode, Simulation};
use sluice_statemachine::{Command, Outcome, VisitorId};
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use workload::{room, KEYS};

/// The port every simulated node listens on for the node-to-node service.
const RAFT_PORT: u16 = 7000;
/// The simulated wall clock's reading when a schedule starts (2027-01-15).
const EPOCH_MS: u64 = 1_800_000_000_000;
/// How long the clients wait for one operation.
const OP_TIMEOUT: Duration = Duration::from_secs(3);
/// How often each running node checks its state machine's derived indexes
/// ([`sluice_statemachine::StateMachine::check`]) during the load.
const CHECK_EVERY: Duration = Duration::from_millis(100);

/// One schedule's settings.
#[derive(Clone, Debug)]
pub struct Config {
    /// The seed: the same seed runs the same schedule.
    pub seed: u64,
    /// Voters at the start.
    pub nodes: u64,
    /// Client processes.
    pub clients: usize,
    /// Simulated time the clients run for (faults happen during it).
    pub run_for: Duration,
    /// Inject faults.
    pub faults: bool,
    /// A known bug put back into every node, to show that the simulation finds it.
    pub broken: Option<Broken>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            seed: 1,
            nodes: 3,
            clients: 4,
            run_for: Duration::from_secs(6),
            faults: true,
            broken: None,
        }
    }
}

/// What one schedule did and what the checkers found.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Report {
    /// The seed.
    pub seed: u64,
    /// Every checker's verdict.
    pub verdicts: Vec<Verdict>,
    /// Operations acknowledged, failed and indeterminate.
    pub ok: usize,
    /// Operations that certainly did not happen.
    pub failed: usize,
    /// Operations whose outcome is unknown.
    pub unknown: usize,
    /// The faults applied, in order, with their simulated times.
    pub faults: Vec<String>,
    /// The membership changes made, with their simulated times and results.
    pub membership: Vec<String>,
    /// Simulated time the schedule took.
    pub simulated: Duration,
    /// Snapshots the nodes built, and snapshots they installed (received from a leader, or
    /// read back from their own disk on a restart).
    pub snapshots: (u64, u64),
    /// The history.
    pub events: Vec<Event>,
    /// A hash of everything above and of the final reads: two runs of one seed that went the
    /// same way have the same fingerprint.
    pub fingerprint: u64,
}

impl Report {
    /// Did every checker pass?
    pub fn valid(&self) -> bool {
        self.verdicts.iter().all(|v| v.valid)
    }
}

/// turmoil's TCP as the nodes' transport.
#[derive(Debug)]
struct SimNet;

impl Transport for SimNet {
    fn connect(&self, addr: String) -> BoxFuture<'static, std::io::Result<BoxIo>> {
        Box::pin(async move {
            let s = turmoil::net::TcpStream::connect(addr).await?;
            Ok(Box::new(s) as BoxIo)
        })
    }

    fn listen(
        &self,
        addr: SocketAddr,
    ) -> BoxFuture<'static, std::io::Result<(SocketAddr, Incoming)>> {
        Box::pin(async move {
            let l = turmoil::net::TcpListener::bind(addr).await?;
            let local = l.local_addr()?;
            let incoming = futures::stream::unfold(l, |l| async move {
                let accepted = l.accept().await.map(|(s, _)| Box::new(s) as BoxIo);
                Some((accepted, l))
            });
            Ok((local, incoming.boxed()))
        })
    }
}

/// The voters and learners after a membership change.
type Members = (Vec<u64>, Vec<u64>);
/// A node's applied index, and what its state machine's check of itself found.
type Checked = (u64, Result<(), String>);

/// A client's request to a node, carried out on the node's own runtime.
enum Call {
    Write(Command, oneshot::Sender<Result<Outcome, ClusterError>>),
    Read(u64, oneshot::Sender<Result<Vec<u64>, ClusterError>>),
    Digest(oneshot::Sender<Result<(u64, String), ClusterError>>),
    /// The state machine's own check of its derived indexes, with the applied index.
    Check(oneshot::Sender<Result<Checked, ClusterError>>),
    Setup(
        Vec<Command>,
        oneshot::Sender<Result<Vec<Outcome>, ClusterError>>,
    ),
    Membership(MembershipOp, oneshot::Sender<Result<Members, ClusterError>>),
    /// The voters, if this node leads.
    Voters(oneshot::Sender<Option<Vec<u64>>>),
}

/// The schedule's phases.
const RUNNING: u8 = 0;
const HEALING: u8 = 1;
const CHECKING: u8 = 2;

/// What the hosts, the clients and the nemesis share.
struct Shared {
    dirs: BTreeMap<u64, PathBuf>,
    /// Where to send calls for each running node.
    gateways: Mutex<BTreeMap<u64, mpsc::UnboundedSender<Call>>>,
    /// Each running node's wall clock, and the steps taken by each node's clock so far.
    clocks: Mutex<BTreeMap<u64, sluice_raft::WallClock>>,
    steps: Mutex<BTreeMap<u64, i64>>,
    /// The last log index each node synced (kept across its crashes).
    synced: BTreeMap<u64, Arc<AtomicU64>>,
    /// Nodes whose next start loses what they had not synced.
    lose: Mutex<BTreeSet<u64>>,
    initialized: AtomicBool,
    /// Voters at the start; the spare host (`voters + 1`) joins during the schedule.
    voters: u64,
    /// The voters as the last membership change reported them (clients go to these).
    members: Mutex<Vec<u64>>,
    /// Membership changes the nemesis asked for, carried out by the driver.
    admin: Mutex<std::collections::VecDeque<MembershipOp>>,
    /// What became of them, for the report.
    notes: Mutex<Vec<String>>,
    phase: AtomicU8,
    /// The spare has been asked to join.
    joined: AtomicBool,
    /// How long each node's WAL syncs take (one node's disk is slow).
    wal_sync_takes: BTreeMap<u64, Duration>,
    broken: Option<Broken>,
    /// Every visitor sent to each policy room (whose reads look up the admitted among them).
    tried: BTreeMap<u64, Mutex<Vec<VisitorId>>>,
    /// What the clients learned, and what broke a rule.
    facts: Mutex<workload::Facts>,
    /// State machine checks made during the load, and those that failed.
    checks: AtomicU64,
    checks_failed: Mutex<Vec<String>>,
}

fn name(id: u64) -> String {
    format!("n{id}")
}

fn addr_of(id: u64) -> NodeAddr {
    NodeAddr {
        raft: format!("{}:{RAFT_PORT}", name(id)),
        ..NodeAddr::default()
    }
}

fn visitor(v: u64) -> VisitorId {
    VisitorId((v as u128).to_be_bytes())
}

fn value_of(id: &VisitorId) -> u64 {
    u128::from_be_bytes(id.0) as u64
}

/// Simulated time since the start, ns.
fn now_ns() -> u64 {
    turmoil::sim_elapsed().unwrap_or_default().as_nanos() as u64
}

type Boxed = Box<dyn std::error::Error>;

/// One node's software: storage (after a crash, what survived it), the node, and a gateway
/// that carries out clients' calls on this runtime.
async fn node_software(shared: Arc<Shared>, id: u64) -> Result<(), Boxed> {
    let dir = shared.dirs[&id].clone();
    if shared.lose.lock().unwrap().remove(&id) {
        let synced = shared.synced[&id].load(Ordering::SeqCst);
        // The crashed runtime's last references to the database go as its tasks drop.
        let db = sluice_raft::sim::open_db_retrying(&dir.join("db")).await?;
        sluice_raft::sim::forget_unsynced(&db, synced)?;
    }
    let step = shared.steps.lock().unwrap().get(&id).copied().unwrap_or(0);
    let elapsed = turmoil::sim_elapsed().unwrap_or_default().as_millis() as u64;
    let clock = sluice_raft::WallClock::simulated(EPOCH_MS + elapsed);
    clock.step(step);
    shared.clocks.lock().unwrap().insert(id, clock.clone());

    let mut cfg = NodeConfig::new(id, &dir, ([0, 0, 0, 0], RAFT_PORT).into());
    cfg.advertise = addr_of(id);
    cfg.heartbeat_ms = 50;
    cfg.election_timeout_ms = (300, 600);
    // Snapshots every 20–25 entries on a follower and every 80 on a leader (a one-second
    // schedule writes 100–200 entries): a node restarted after a crash restores the rooms from
    // its own snapshot, and one that fell behind a leader's purge installs the leader's. (Every
    // 10 entries found appends acknowledged before their sync in 3 of the first 20 schedules,
    // against 6 with 20 and 8 with 150: a snapshot taken before a crash masks the lost log.)
    cfg.snapshot_every = 20;
    cfg.logs_kept_after_snapshot = 10;
    cfg.request_timeout = Duration::from_secs(2);
    cfg.wall_clock = clock;
    cfg.ledger = None;
    cfg.simulation = Some(Simulation {
        transport: Arc::new(SimNet),
        wal_sync_takes: shared.wal_sync_takes[&id],
        wal_synced: shared.synced[&id].clone(),
        broken: shared.broken,
    });
    let node = RaftNode::start(cfg).await?;
    if id == 1 && !shared.initialized.swap(true, Ordering::SeqCst) {
        let members = (1..=shared.voters).map(|i| (i, addr_of(i))).collect();
        node.initialize(members).await?;
    }
    let (tx, mut rx) = mpsc::unbounded_channel();
    shared.gateways.lock().unwrap().insert(id, tx);
    // The state machine's check of itself, while the node runs: after it restarts on its own
    // snapshot and log, and after it installs a leader's snapshot.
    let (n, s) = (node.clone(), shared.clone());
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(CHECK_EVERY).await;
            if let Ok((r, index)) = n.read(|st| st.sm.check()) {
                s.checks.fetch_add(1, Ordering::Relaxed);
                if let Err(e) = r {
                    let at = turmoil::sim_elapsed().unwrap_or_default().as_millis();
                    s.checks_failed
                        .lock()
                        .unwrap()
                        .push(format!("{at} ms: n{id} at index {index}: {e}"));
                }
            }
        }
    });
    while let Some(call) = rx.recv().await {
        let (node, shared) = (node.clone(), shared.clone());
        tokio::spawn(async move { carry_out(&shared, &node, call).await });
    }
    Ok(())
}

async fn carry_out(shared: &Shared, node: &RaftNode, call: Call) {
    match call {
        Call::Write(cmd, reply) => {
            let _ = reply.send(node.write(cmd).await.map(|(o, _)| o));
        }
        Call::Read(key, reply) => {
            let r = node
                .read_linearizable(|st| match shared.tried.get(&key) {
                    Some(tried) => workload::places(&st.sm, &room(key), &tried.lock().unwrap()),
                    None => st
                        .sm
                        .queue(&room(key), 0, usize::MAX)
                        .map(|q| q.iter().map(|e| value_of(&e.visitor)).collect::<Vec<_>>())
                        .map_err(|e| format!("{e:?}")),
                })
                .await
                .and_then(|(q, _)| {
                    q.map_err(|e| {
                        // A room whose counts disagree with its lines: a finding, not a
                        // failed read.
                        let at = turmoil::sim_elapsed().unwrap_or_default().as_millis();
                        let n = node.id();
                        let broken = format!("{at} ms: a read of {} on n{n}: {e}", room(key));
                        shared.facts.lock().unwrap().broken.push(broken);
                        ClusterError::Invalid(e)
                    })
                });
            let _ = reply.send(r);
        }
        Call::Check(reply) => {
            let _ = reply.send(node.read(|st| st.sm.check()).map(|(r, i)| (i, r)));
        }
        Call::Membership(op, reply) => {
            let r = node.membership(op).await.map(|s| (s.voters, s.learners));
            let _ = reply.send(r);
        }
        Call::Voters(reply) => {
            let _ = reply.send(node.is_leader().then(|| node.status().voters));
        }
        Call::Digest(reply) => {
            let _ = reply.send(node.digest());
        }
        Call::Setup(cmds, reply) => {
            let mut r = Ok(Vec::new());
            for cmd in cmds {
                match node.write(cmd).await {
                    Ok((o, _)) => r.as_mut().expect("ok so far").push(o),
                    Err(e) => {
                        r = Err(e);
                        break;
                    }
                }
            }
            let _ = reply.send(r);
        }
    }
}

/// Sends `call` (made with a reply channel) to node `id` and waits up to `timeout` for the answer.
/// `None`: the node is down or did not answer (what it did is unknown).
async fn ask<T>(
    shared: &Shared,
    id: u64,
    make: impl FnOnce(oneshot::Sender<T>) -> Call,
    timeout: Duration,
) -> Option<T> {
    let (tx, rx) = oneshot::channel();
    let gw = shared.gateways.lock().unwrap().get(&id).cloned()?;
    gw.send(make(tx)).ok()?;
    tokio::time::timeout(timeout, rx).await.ok()?.ok()
}

/// What the driver read at the end: every list, and every node's applied index and digest.
type Finals = Arc<Mutex<(BTreeMap<u64, Vec<u64>>, BTreeMap<u64, (u64, String)>)>>;
/// Each node's state machine check at the end, with its applied index.
type FinalChecks = Arc<Mutex<BTreeMap<u64, Checked>>>;

/// The driver: sets up the rooms, runs the clients for `run_for`, then (once the nemesis has
/// healed everything) reads every list and every node's digest, and has every node check its
/// state machine.
async fn driver(
    shared: Arc<Shared>,
    cfg: Config,
    history: History,
    finals: Finals,
    checks: FinalChecks,
) -> Result<(), Boxed> {
    let setup = workload::setup();
    let mut attempt = 0u64;
    loop {
        let id = 1 + attempt % shared.voters;
        attempt += 1;
        let r = ask(&shared, id, |tx| Call::Setup(setup.clone(), tx), OP_TIMEOUT).await;
        if let Some(Ok(outcomes)) = r {
            // A room made by an earlier attempt exists already; anything else refused is the
            // workload's mistake.
            for (cmd, o) in setup.iter().zip(&outcomes) {
                if let (Outcome::Rejected(e), false) =
                    (o, matches!(cmd, Command::CreateRoom { .. }))
                {
                    return Err(format!("setup refused {cmd:?}: {e}").into());
                }
            }
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        if attempt > 200 {
            return Err("no leader to create the rooms".into());
        }
    }
    let started = tokio::time::Instant::now();
    let admin = tokio::task::spawn_local(administer(shared.clone()));
    let next = Arc::new(AtomicU64::new(1));
    let workers: Vec<_> = (0..cfg.clients)
        .map(|i| {
            let w =
                workload::Worker::new(shared.clone(), history.clone(), i, cfg.seed, next.clone());
            tokio::task::spawn_local(w.run())
        })
        .collect();
    tokio::time::sleep_until(started + cfg.run_for).await;
    shared.phase.store(HEALING, Ordering::SeqCst);
    for w in workers {
        w.await?;
    }
    admin.await?;
    // The nemesis heals everything and restarts every node; wait for that.
    while shared.phase.load(Ordering::SeqCst) != CHECKING {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut lists = BTreeMap::new();
    for key in 0..KEYS {
        let mut id = 1;
        loop {
            if let Some(Ok(list)) = ask(&shared, id, |tx| Call::Read(key, tx), OP_TIMEOUT).await {
                lists.insert(key, list);
                break;
            }
            if tokio::time::Instant::now() > deadline {
                return Err(format!("no final read of key {key} within 30 s").into());
            }
            let members = shared.members.lock().unwrap().clone();
            id = members[(members.iter().position(|&m| m == id).unwrap_or(0) + 1) % members.len()];
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    // Every voter applies up to the same index with the same digest.
    let mut digests = BTreeMap::new();
    let mut voters = shared.members.lock().unwrap().clone();
    while tokio::time::Instant::now() < deadline {
        digests.clear();
        for id in 1..=shared.voters + 1 {
            if let Some(Some(v)) = ask(&shared, id, Call::Voters, OP_TIMEOUT).await {
                voters = v;
            }
        }
        for &id in &voters {
            if let Some(Ok(d)) = ask(&shared, id, Call::Digest, OP_TIMEOUT).await {
                digests.insert(id, d);
            }
        }
        let distinct: BTreeSet<_> = digests.values().collect();
        if digests.len() == voters.len() && distinct.len() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Every node (voters, and any other still running) checks its state machine's derived
    // indexes against a rebuild from the state itself.
    let mut checked = BTreeMap::new();
    for id in 1..=shared.voters + 1 {
        if let Some(Ok(c)) = ask(&shared, id, Call::Check, OP_TIMEOUT).await {
            checked.insert(id, c);
        }
    }
    *shared.members.lock().unwrap() = voters;
    *finals.lock().unwrap() = (lists, digests);
    *checks.lock().unwrap() = checked;
    Ok(())
}

/// Carries out the membership changes the nemesis asks for, one at a time, through any voter.
async fn administer(shared: Arc<Shared>) {
    while shared.phase.load(Ordering::SeqCst) == RUNNING {
        let op = shared.admin.lock().unwrap().pop_front();
        let Some(op) = op else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let members = shared.members.lock().unwrap().clone();
        let mut result = None;
        for &via in &members {
            let r = ask(
                &shared,
                via,
                |tx| Call::Membership(op.clone(), tx),
                OP_TIMEOUT,
            )
            .await;
            if let Some(Ok((voters, _))) = &r {
                *shared.members.lock().unwrap() = voters.clone();
            }
            let done = matches!(r, Some(Ok(_)));
            result = Some(r);
            if done {
                break;
            }
        }
        let at = turmoil::sim_elapsed().unwrap_or_default().as_millis();
        shared.notes.lock().unwrap().push(format!(
            "{at:>6} ms {op:?}: {}",
            match result {
                Some(Some(Ok((v, l)))) => format!("voters {v:?}, learners {l:?}"),
                Some(Some(Err(e))) => e.to_string(),
                _ => "no answer".into(),
            }
        ));
    }
}

/// What a cut between nodes does to the bytes sent across it.
#[derive(Clone, Copy, Debug)]
enum Cut {
    /// Held and delivered when the cut heals, as TCP sees a partition: it sends them again
    /// until they arrive, and the connection survives.
    Held,
    /// Lost: every connection across the cut is silently dead, with bytes missing from its
    /// middle, until HTTP/2's keepalive (10 s) gives it up (a middlebox that forgot the
    /// connections, a peer restarted without its resets arriving). Rarer: each costs that wait.
    Dropped,
}

/// A fault the nemesis can apply, and how to undo it.
#[derive(Clone, Debug)]
enum Fault {
    /// Cut one node off from the others.
    Isolate(u64, Cut),
    /// Split the nodes in two.
    Split(Vec<u64>, Cut),
    /// Crash nodes; with `lose`, everything they had not synced is gone when they restart.
    Crash(Vec<u64>, bool),
    /// Step one node's wall clock by ms.
    Clock(u64, i64),
    /// Slow every link (up to this latency).
    Slow(Duration),
    /// Add the spare node as a learner and make it a voter.
    Join(u64),
    /// Remove a voter for good.
    Remove(u64),
}

fn pick(rng: &mut ChaCha8Rng, nodes: u64, shared: &Shared) -> Fault {
    let one = 1 + rng.next_u64() % nodes;
    let cut = if rng.next_u64().is_multiple_of(32) {
        Cut::Dropped
    } else {
        Cut::Held
    };
    let spare = shared.voters + 1;
    match rng.next_u64() % 10 {
        8 | 9 => {
            let members = shared.members.lock().unwrap().clone();
            if !members.contains(&spare) && !shared.joined.swap(true, Ordering::SeqCst) {
                Fault::Join(spare)
            } else if members.len() as u64 > shared.voters {
                Fault::Remove(members[(rng.next_u64() % members.len() as u64) as usize])
            } else {
                Fault::Isolate(one, cut)
            }
        }
        0 | 1 => Fault::Isolate(one, cut),
        2 => {
            let mut side: Vec<u64> = (1..=nodes)
                .filter(|_| rng.next_u64().is_multiple_of(2))
                .collect();
            if side.is_empty() {
                side.push(one);
            }
            Fault::Split(side, cut)
        }
        3 => Fault::Crash(vec![one], false),
        4 => Fault::Crash(vec![one], true),
        5 => Fault::Crash((1..=nodes).collect(), true),
        6 => {
            let ms = (rng.next_u64() % 120_000) as i64 - 60_000;
            Fault::Clock(one, ms)
        }
        _ => Fault::Slow(Duration::from_millis(20 + rng.next_u64() % 200)),
    }
}

/// The turmoil builder for a schedule.
fn builder(seed: u64) -> turmoil::Builder {
    let mut b = turmoil::Builder::new();
    b.rng_seed(seed)
        .simulation_duration(Duration::from_secs(3_600))
        .tick_duration(Duration::from_millis(1))
        .min_message_latency(Duration::from_micros(200))
        .max_message_latency(Duration::from_millis(3))
        .tcp_capacity(1 << 16);
    b
}

/// Runs one schedule and checks it.
pub fn run(cfg: &Config) -> anyhow::Result<Report> {
    let base = if std::path::Path::new("/dev/shm").is_dir() {
        tempfile::Builder::new()
            .prefix("sluice-cluster-sim-")
            .tempdir_in("/dev/shm")?
    } else {
        tempfile::tempdir()?
    };
    // The voters, and a spare host that joins when the nemesis says so.
    let ids: Vec<u64> = (1..=cfg.nodes + 1).collect();
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
    let shared = Arc::new(Shared {
        dirs: ids
            .iter()
            .map(|&i| (i, base.path().join(name(i))))
            .collect(),
        gateways: Mutex::default(),
        clocks: Mutex::default(),
        steps: Mutex::default(),
        synced: ids.iter().map(|&i| (i, Arc::default())).collect(),
        lose: Mutex::default(),
        initialized: AtomicBool::new(false),
        voters: cfg.nodes,
        members: Mutex::new((1..=cfg.nodes).collect()),
        admin: Mutex::default(),
        notes: Mutex::default(),
        joined: AtomicBool::new(false),
        phase: AtomicU8::new(RUNNING),
        wal_sync_takes: {
            let slow = 1 + rng.next_u64() % (cfg.nodes + 1);
            ids.iter()
                .map(|&i| {
                    let us = if i == slow {
                        10_000 + rng.next_u64() % 40_000
                    } else {
                        500 + rng.next_u64() % 4_000
                    };
                    (i, Duration::from_micros(us))
                })
                .collect()
        },
        broken: cfg.broken,
        tried: (workload::PLAIN..KEYS)
            .map(|k| (k, Mutex::default()))
            .collect(),
        facts: Mutex::default(),
        checks: AtomicU64::new(0),
        checks_failed: Mutex::default(),
    });
    // openraft's random draws (election timeouts) on this thread follow from the seed too.
    sluice_raft::sim::seed_this_thread(cfg.seed);
    let snapshots = SnapshotCounter::start();
    let mut sim = builder(cfg.seed).build();
    for &id in &ids {
        let s = shared.clone();
        sim.host(name(id), move || node_software(s.clone(), id));
    }
    let history = History::new();
    let finals = Arc::new(Mutex::new((BTreeMap::new(), BTreeMap::new())));
    let final_checks = FinalChecks::default();
    sim.client(
        "driver",
        driver(
            shared.clone(),
            cfg.clone(),
            history.clone(),
            finals.clone(),
            final_checks.clone(),
        ),
    );

    let mut faults = Vec::new();
    let mut active: Option<(Fault, Duration)> = None;
    // The first fault comes between a twelfth and a quarter of the load's time (0.5–1.5 s of
    // the default 6 s), so that short schedules have faults too.
    let load_ms = cfg.run_for.as_millis() as u64;
    let mut next_fault =
        Duration::from_millis(load_ms / 12 + rng.next_u64() % (load_ms / 6).max(1));
    let mut down: BTreeSet<u64> = BTreeSet::new();
    // A node whose software fails (for example one that cannot restart on what a crash left)
    // or a driver that cannot finish its final reads ends the schedule as invalid.
    // So does a node that panics (an assertion of openraft's, in a debug build, that the logs
    // of a known bug put back have broken): the schedule stops there, its history judged.
    let mut stopped = None;
    loop {
        let step = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sim.step()));
        match step {
            Ok(Ok(true)) => break,
            Ok(Ok(false)) => {}
            Ok(Err(e)) => {
                stopped = Some(e.to_string());
                break;
            }
            Err(panic) => {
                stopped = Some(format!("a node panicked: {}", panic_text(&*panic)));
                break;
            }
        }
        let now = sim.elapsed();
        let phase = shared.phase.load(Ordering::SeqCst);
        if phase == HEALING {
            if let Some((f, _)) = active.take() {
                heal(&mut sim, &f, &ids, &mut down);
            }
            for id in std::mem::take(&mut down) {
                sim.bounce(name(id));
            }
            shared.phase.store(CHECKING, Ordering::SeqCst);
            continue;
        }
        if phase != RUNNING || !cfg.faults {
            continue;
        }
        match &active {
            Some((f, until)) if now >= *until => {
                heal(&mut sim, f, &ids, &mut down);
                faults.push(format!("{:>6} ms heal", now.as_millis()));
                active = None;
                next_fault = now + Duration::from_millis(200 + rng.next_u64() % 1_500);
            }
            None if now >= next_fault => {
                let f = pick(&mut rng, cfg.nodes + 1, &shared);
                apply(&mut sim, &shared, &f, &ids, &mut down);
                faults.push(format!("{:>6} ms {f:?}", now.as_millis()));
                let lasts = Duration::from_millis(300 + rng.next_u64() % 2_500);
                active = Some((f, now + lasts));
            }
            _ => {}
        }
    }
    let simulated = sim.elapsed();
    // Dropping a simulation stopped by a panic may panic again (tasks dropped mid-way).
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(sim)));
    let membership = std::mem::take(&mut *shared.notes.lock().unwrap());

    let events = history.events();
    let (lists, digests) = finals.lock().unwrap().clone();
    let members = shared.members.lock().unwrap().clone();
    let mut verdicts = vec![
        checker::queue_linearizable(&events),
        checker::appends_kept(&events, &lists),
        checker::convergence(&digests, members.len()),
        checks_verdict(&shared, &members, &final_checks.lock().unwrap()),
    ];
    let (broken, judged) = {
        let mut f = shared.facts.lock().unwrap();
        (std::mem::take(&mut f.broken), f.judged)
    };
    verdicts.push(Verdict {
        checker: "entry rules kept".into(),
        valid: broken.is_empty(),
        detail: if broken.is_empty() {
            format!(
                "{judged} joins answered as acknowledged bans, identities, codes, lanes and \
                 network limits required; the policy rooms' counts matched their lines"
            )
        } else {
            format!("{} answers broke a rule", broken.len())
        },
        ops: broken,
    });
    verdicts.push(Verdict {
        checker: "schedule completes".into(),
        valid: stopped.is_none(),
        detail: stopped.unwrap_or_else(|| "every node ran and the final reads were made".into()),
        ops: vec![],
    });
    let fingerprint = {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        sluice_jepsen::history::to_jsonl(&events).hash(&mut h);
        (&faults, &membership, simulated, &lists, &digests).hash(&mut h);
        h.finish()
    };
    let count = |k: Kind| events.iter().filter(|e| e.kind == k).count();
    let report = Report {
        seed: cfg.seed,
        verdicts,
        ok: count(Kind::Ok),
        failed: count(Kind::Fail),
        unknown: count(Kind::Info),
        faults,
        membership,
        simulated,
        snapshots: snapshots.counts(),
        events,
        fingerprint,
    };
    Ok(report)
}

/// The verdict on the state machines' checks of themselves: every final voter's at the end,
/// and every node's during the load.
fn checks_verdict(shared: &Shared, members: &[u64], at_end: &BTreeMap<u64, Checked>) -> Verdict {
    let mut bad = shared.checks_failed.lock().unwrap().clone();
    for (id, (index, r)) in at_end {
        if let Err(e) = r {
            bad.push(format!("at the end: n{id} at index {index}: {e}"));
        }
    }
    for id in members.iter().filter(|id| !at_end.contains_key(id)) {
        bad.push(format!("at the end: voter n{id} did not answer"));
    }
    let during = shared.checks.load(Ordering::Relaxed);
    Verdict {
        checker: "state machine checks".into(),
        valid: bad.is_empty(),
        detail: if bad.is_empty() {
            format!(
                "{} nodes' state machines passed at the end, and {during} checks during the load",
                at_end.len()
            )
        } else {
            format!("{} checks failed", bad.len())
        },
        ops: bad,
    }
}

/// Counts the snapshots the nodes of a schedule build and install, from the raft crate's log
/// lines (everything of a schedule runs on its thread). `RUST_LOG` still selects what is
/// printed to stderr.
struct SnapshotCounter {
    /// The subscriber's guard (scoped to this thread).
    _guard: Box<dyn std::any::Any>,
}

thread_local! {
    static SNAPSHOTS: std::cell::Cell<(u64, u64)> = const { std::cell::Cell::new((0, 0)) };
}

/// Where the counter's log lines go: counted, not kept.
struct CountLines;

impl std::io::Write for CountLines {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let line = String::from_utf8_lossy(buf);
        SNAPSHOTS.with(|c| {
            let (built, installed) = c.get();
            c.set((
                built + u64::from(line.contains("snapshot built")),
                installed + u64::from(line.contains("snapshot installed")),
            ))
        });
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl SnapshotCounter {
    fn start() -> Self {
        use tracing_subscriber::layer::SubscriberExt;
        use tracing_subscriber::util::SubscriberInitExt;
        use tracing_subscriber::{EnvFilter, Layer};
        SNAPSHOTS.with(|c| c.set((0, 0)));
        let printed = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("off"));
        let subscriber = tracing_subscriber::registry()
            .with(
                tracing_subscriber::fmt::layer()
                    .with_writer(std::io::stderr)
                    .with_filter(printed),
            )
            .with(
                tracing_subscriber::fmt::layer()
                    .with_ansi(false)
                    .with_writer(|| CountLines)
                    .with_filter(EnvFilter::new("sluice_raft::sm_store=info")),
            );
        Self {
            _guard: Box::new(subscriber.set_default()),
        }
    }

    /// (built, installed) so far.
    fn counts(&self) -> (u64, u64) {
        SNAPSHOTS.with(|c| c.get())
    }
}

/// What a caught panic said.
fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "(no message)".into())
}

fn others(ids: &[u64], side: &[u64]) -> Vec<u64> {
    ids.iter().copied().filter(|i| !side.contains(i)).collect()
}

fn cut(sim: &mut turmoil::Sim<'_>, a: &[u64], b: &[u64], how: Cut) {
    for &x in a {
        for &y in b {
            match how {
                Cut::Held => sim.hold(name(x), name(y)),
                Cut::Dropped => sim.partition(name(x), name(y)),
            }
        }
    }
}

fn apply(
    sim: &mut turmoil::Sim<'_>,
    shared: &Shared,
    f: &Fault,
    ids: &[u64],
    down: &mut BTreeSet<u64>,
) {
    match f {
        Fault::Isolate(id, how) => cut(sim, &[*id], &others(ids, &[*id]), *how),
        Fault::Split(side, how) => cut(sim, side, &others(ids, side), *how),
        Fault::Crash(nodes, lose) => {
            for &id in nodes {
                if down.insert(id) {
                    shared.gateways.lock().unwrap().remove(&id);
                    if *lose {
                        shared.lose.lock().unwrap().insert(id);
                    }
                    sim.crash(name(id));
                }
            }
        }
        Fault::Clock(id, ms) => {
            *shared.steps.lock().unwrap().entry(*id).or_default() += ms;
            if let Some(c) = shared.clocks.lock().unwrap().get(id) {
                c.step(*ms);
            }
        }
        Fault::Slow(max) => sim.set_max_message_latency(*max),
        Fault::Join(id) => {
            let mut q = shared.admin.lock().unwrap();
            q.push_back(MembershipOp::AddLearner {
                id: *id,
                addr: addr_of(*id),
            });
            q.push_back(MembershipOp::Promote { id: *id });
        }
        Fault::Remove(id) => shared
            .admin
            .lock()
            .unwrap()
            .push_back(MembershipOp::Remove { id: *id }),
    }
}

fn heal(sim: &mut turmoil::Sim<'_>, f: &Fault, ids: &[u64], down: &mut BTreeSet<u64>) {
    match f {
        Fault::Isolate(_, Cut::Held) | Fault::Split(_, Cut::Held) => {
            for &a in ids {
                for &b in ids {
                    if a < b {
                        sim.release(name(a), name(b));
                    }
                }
            }
        }
        Fault::Isolate(_, Cut::Dropped) | Fault::Split(_, Cut::Dropped) => {
            for &a in ids {
                for &b in ids {
                    if a < b {
                        sim.repair(name(a), name(b));
                    }
                }
            }
        }
        Fault::Crash(..) => {
            for id in std::mem::take(down) {
                sim.bounce(name(id));
            }
        }
        // A stepped clock stays stepped (as a real one would until someone fixes it), and a
        // membership change stays made.
        Fault::Clock(..) | Fault::Join(_) | Fault::Remove(_) => {}
        Fault::Slow(_) => sim.set_max_message_latency(Duration::from_millis(3)),
    }
}
