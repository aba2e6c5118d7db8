//! One test run: network and nodes up, workload and nemesis for a while, heal, final reads,
//! checkers, and the files a reader needs afterwards (history, nemesis log, summary).

use crate::checker::{self, LogEntry, Verdict};
use crate::db::Db;
use crate::history::{to_jsonl, History, Kind};
use crate::liveness::{self, Liveness};
use crate::nemesis::{Fault, Nemesis};
use crate::net::Net;
use crate::ticket::{mint, value_of};
use crate::workload::{self, Ctx, Workload};
use anyhow::{Context, Result};
use base64::Engine;
use rand_chacha::ChaCha8Rng;
use rand_core::SeedableRng;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What to run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Spec {
    /// A name for the results directory.
    pub name: String,
    /// Initial nodes (3 or 5).
    pub nodes: u64,
    /// Faults to draw from.
    pub faults: Vec<Fault>,
    /// The workload.
    pub workload: Workload,
    /// How long the workload runs.
    pub duration: Duration,
    /// Seed of the fault schedule and the workload.
    pub seed: u64,
    /// Concurrent clients.
    pub workers: usize,
    /// How long each fault lasts.
    pub fault_hold: Duration,
    /// Quiet time between faults.
    pub quiet: Duration,
    /// Where results go.
    pub out: PathBuf,
    /// How the nodes authenticate each other.
    pub auth: crate::db::NodeAuth,
    /// Mount every data directory on `sluice-lazyfs` even if no fault drops unsynced writes (to
    /// measure what it costs); runs with `kill-lose-unsynced` always do.
    #[serde(default)]
    pub lazyfs: bool,
    /// `[raft] pre_vote` of every node: a node asks whether a majority would vote for it before
    /// it stands for election.
    #[serde(default = "yes")]
    pub pre_vote: bool,
    /// Send node-to-node traffic through the link proxy even if no fault needs it (to measure
    /// what it costs); runs with link faults always do.
    #[serde(default)]
    pub proxy: bool,
}

fn yes() -> bool {
    true
}

impl Spec {
    /// Whether the nodes' data directories are mounts of `sluice-lazyfs`.
    pub fn on_lazyfs(&self) -> bool {
        self.lazyfs || self.faults.contains(&Fault::KillLoseUnsynced)
    }

    /// Whether node-to-node traffic goes through the link proxy.
    pub fn on_proxy(&self) -> bool {
        self.proxy || self.faults.iter().any(|f| f.is_link())
    }
}

/// What a run found.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Summary {
    /// Run name.
    pub name: String,
    /// Workload.
    pub workload: String,
    /// Faults drawn from.
    pub faults: Vec<String>,
    /// Nodes at start.
    pub nodes: u64,
    /// Seed (rerun with it to replay the schedule).
    pub seed: u64,
    /// Operations by outcome.
    pub ok: u64,
    /// Failed operations.
    pub fail: u64,
    /// Indeterminate operations.
    pub info: u64,
    /// Faults as they happened.
    pub nemesis: Vec<String>,
    /// Verdicts.
    pub checks: Vec<Verdict>,
    /// All checks held.
    pub valid: bool,
    /// Wall time of the run, seconds.
    pub seconds: f64,
    /// Snapshots the nodes installed from a leader (from their logs).
    #[serde(default)]
    pub snapshots_installed: u64,
    /// Node-to-node authentication: `secret` or `tls`.
    #[serde(default)]
    pub auth: String,
    /// Whether the nodes ran with Pre-Vote.
    #[serde(default = "yes")]
    pub pre_vote: bool,
    /// Acknowledged writes while healthy and under each fault.
    #[serde(default)]
    pub liveness: Liveness,
}

/// Lines holding `what` in the node logs (`n*.log`) under `dir`.
fn count_in_node_logs(dir: &std::path::Path, what: &str) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
        .filter_map(|e| std::fs::read_to_string(e.path()).ok())
        .map(|text| text.lines().filter(|l| l.contains(what)).count() as u64)
        .sum()
}

pub(crate) fn net_params(name: &str) -> (String, String) {
    // A prefix and subnet unique to this process and run, so stale state never collides.
    let pid = std::process::id() % 1000;
    let h = name
        .bytes()
        .fold(0u32, |a, b| a.wrapping_mul(31).wrapping_add(b as u32))
        % 200;
    (
        format!("sj{pid}x{h}"),
        format!("10.{}.{}", 100 + (pid % 100), h + 1),
    )
}

/// Runs one test.
pub async fn run(spec: &Spec) -> Result<Summary> {
    let started = Instant::now();
    std::fs::create_dir_all(&spec.out)?;
    let (prefix, subnet) = net_params(&spec.name);
    let net = Net::create(&prefix, &subnet)
        .context("creating the test network (needs root, iproute2, nftables)")?;
    let opts = crate::db::Options {
        snapshots: spec.workload.snapshots(),
        auth: spec.auth,
        lazyfs: spec.on_lazyfs(),
        pre_vote: spec.pre_vote,
        link_proxy: spec.on_proxy().then_some(spec.seed),
    };
    let mut db = Db::start(net, spec.out.join("nodes"), spec.nodes, opts).await?;
    // The phased room's sale starts when its room is made, its later phases a third and two
    // thirds into the run.
    let plan = spec.workload.phase_plan(unix_ms() / 1000, spec.duration);
    for (room, config) in spec.workload.rooms(&plan) {
        db.admin_any(
            reqwest::Method::PUT,
            &format!("/v1/rooms/{room}"),
            Some(config),
            Duration::from_secs(30),
        )
        .await?;
    }
    // The lanes workload's presale codes, made once before the clients start.
    let mut codes = Vec::new();
    if spec.workload == Workload::Lanes {
        let made = db
            .admin_any(
                reqwest::Method::POST,
                &format!("/v1/rooms/{}/codes", workload::LANES_ROOM),
                Some(json!({"count": workload::PRESALE_CODES, "lane": workload::PRESALE_LANE})),
                Duration::from_secs(30),
            )
            .await?;
        codes = made["codes"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|c| c.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        anyhow::ensure!(
            codes.len() as u64 == workload::PRESALE_CODES,
            "codes: {made}"
        );
    }
    let history = History::new();
    let limits = limits_of(spec.workload, &plan, &history, spec.fault_hold);
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(64)
        .build()?;
    let ctx = Ctx {
        history: history.clone(),
        http: http.clone(),
        nodes: db.members.iter().map(|&id| (id, db.url(id))).collect(),
        next_value: Arc::new(AtomicU64::new(1)),
        next_process: Arc::new(AtomicU64::new(0)),
        deadline: Instant::now() + spec.duration,
        timeout: Duration::from_secs(3),
        codes: Arc::new(std::sync::Mutex::new(codes)),
    };
    let clients = tokio::spawn(workload::run(
        spec.workload,
        ctx.clone(),
        spec.workers,
        spec.seed,
    ));
    let mut nemesis = Nemesis::new(ChaCha8Rng::seed_from_u64(spec.seed), spec.faults.clone());
    let mut windows = Vec::new();
    while Instant::now() + spec.quiet + spec.fault_hold < ctx.deadline {
        tokio::time::sleep(spec.quiet).await;
        let at = started.elapsed().as_millis() as u64;
        let desc = match nemesis.step(&mut db, spec.fault_hold, &history).await {
            Ok(step) => step.record(&mut windows),
            Err(e) => format!("fault failed: {e}"),
        };
        nemesis.log.push((at, desc));
    }
    clients.await.context("workload")?;
    let workload_end = history.now();
    let healed = async {
        db.heal_all().await?;
        db.wait_ready(Duration::from_secs(60)).await
    }
    .await;
    let lose = spec.faults.contains(&Fault::KillLoseUnsynced);
    let unhealed = match healed {
        Ok(()) => None,
        // After crashes that lost unsynced writes, a node that does not come back is what the
        // run found (the `recovery` verdict), not a failure of the harness: the checks go on.
        Err(e) if lose => Some(format!("after healing: {e:#}")),
        Err(e) => return Err(e),
    };

    // Let the cluster settle, then read the final state.
    let digests = converge(&db).await;
    let events_so_far = history.events();
    let nemesis_log: Vec<String> = nemesis.log.iter().map(|(_, d)| d.clone()).collect();
    let mut checks = vec![
        checker::exercised(&nemesis_log, !spec.faults.is_empty(), &events_so_far),
        checker::convergence(&digests, db.members.len().max(1)),
    ];
    if lose {
        let panics = panics_in_node_logs(&spec.out.join("nodes"));
        checks.push(recovery(&nemesis_log, unhealed.as_deref(), &panics));
    }
    match spec.workload {
        Workload::QueueAppend => {
            let mut finals = BTreeMap::new();
            for key in 0..3u64 {
                let v = db
                    .admin_any(
                        reqwest::Method::GET,
                        &format!("/v1/rooms/q{key}/queue?consistent=true&limit=10000"),
                        None,
                        Duration::from_secs(30),
                    )
                    .await?;
                let list: Vec<u64> = v["entries"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|e| e["visitor_id"].as_str().and_then(value_of))
                            .collect()
                    })
                    .unwrap_or_default();
                let p = 1_000_000 + key;
                history.record(Kind::Invoke, p, "txn", json!([["r", key, null]]), 0, None);
                history.record(
                    Kind::Ok,
                    p,
                    "txn",
                    json!([["r", key, list.clone()]]),
                    0,
                    None,
                );
                finals.insert(key, list);
            }
            let events = history.events();
            checks.push(checker::list_append(&events, &spec.out));
            checks.push(checker::appends_kept(&events, &finals));
        }
        Workload::Admission | Workload::Lottery | Workload::Lanes | Workload::Phases => {
            let room = spec.workload.visitor_room();
            let finals = final_states(&db, &http, room, &events_so_far).await;
            checks.push(checker::no_lost_joins(
                &events_so_far,
                &finals,
                workload::WAITER_TTL_SECS * 1000,
            ));
            if spec.workload != Workload::Lottery {
                checks.push(checker::capacity(&events_so_far, &limits));
                checks.push(checker::rate(&events_so_far, &limits));
                checks.push(if spec.workload == Workload::Lanes {
                    checker::lanes(&events_so_far)
                } else {
                    checker::fifo(&events_so_far)
                });
            } else {
                let log = fetch_log(&db).await?;
                let digest = digests.values().next();
                checks.push(checker::lottery_replay_with_key(
                    &events_so_far,
                    room,
                    &log,
                    digest,
                    db.draw_key(),
                ));
            }
        }
    }
    let events = history.events();
    let liveness = liveness::liveness(&events, &windows, workload_end);
    std::fs::write(spec.out.join("history.jsonl"), to_jsonl(&events))?;
    std::fs::write(spec.out.join("nemesis.log"), nemesis.log_text())?;
    let count = |k: Kind| events.iter().filter(|e| e.kind == k).count() as u64;
    let summary = Summary {
        name: spec.name.clone(),
        workload: spec.workload.name(),
        faults: spec.faults.iter().map(|f| f.name()).collect(),
        nodes: spec.nodes,
        seed: spec.seed,
        ok: count(Kind::Ok),
        fail: count(Kind::Fail),
        info: count(Kind::Info),
        nemesis: nemesis.log_lines(),
        valid: checks.iter().all(|c| c.valid),
        checks,
        seconds: started.elapsed().as_secs_f64(),
        snapshots_installed: count_in_node_logs(&spec.out.join("nodes"), "snapshot installed"),
        auth: spec.auth.name().to_string(),
        pre_vote: spec.pre_vote,
        liveness,
    };
    std::fs::write(
        spec.out.join("summary.json"),
        serde_json::to_string_pretty(&summary)?,
    )?;
    db.stop_all();
    Ok(summary)
}

/// Milliseconds since the unix epoch, by this machine's clock (the clock the nodes' log time
/// follows when no fault moves it).
fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The monitored room's limits on the history's clock: the admission room's, or each phase of
/// the phased room's sale from where its start (unix seconds, in the log's time) falls on the
/// history's clock. A start may be off by the slack either way (the log's time is the leader's
/// clock, held to the voters' median); a session admitted before a start may count for its
/// lifetime after it, or for a fault's hold while no leader moves the log's time.
fn limits_of(
    w: Workload,
    plan: &[workload::PhasePlan],
    history: &History,
    fault_hold: Duration,
) -> checker::Limits {
    let mut limits = checker::Limits::constant(
        workload::ADMISSION_CAPACITY,
        workload::ADMISSION_RATE_PER_MINUTE,
        workload::ADMISSION_BURST,
    );
    if w == Workload::Phases && !plan.is_empty() {
        let (now_ns, now_unix_ms) = (history.now(), unix_ms());
        let on_history = |unix_secs: u64| {
            (now_ns + (unix_secs * 1000).saturating_mul(1_000_000))
                .saturating_sub(now_unix_ms * 1_000_000)
        };
        limits.phases = plan
            .iter()
            .enumerate()
            .map(|(i, p)| checker::Limit {
                from_ns: if i == 0 { 0 } else { on_history(p.starts_at) },
                capacity: p.capacity,
                per_minute: p.per_minute,
            })
            .collect();
        limits.slack_ns = PHASE_SLACK.as_nanos() as u64;
        limits.carry_ns =
            (Duration::from_secs(workload::SESSION_TTL_SECS) + fault_hold).as_nanos() as u64;
    }
    limits
}

/// How far from the history's clock a phase's start in the log's time may fall.
const PHASE_SLACK: Duration = Duration::from_secs(1);

/// The panics in the node logs (`*.log` under `dir`): the file, the line and the one after it
/// (the message).
fn panics_in_node_logs(dir: &std::path::Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let Ok(text) = std::fs::read_to_string(&f) else {
            continue;
        };
        let lines: Vec<&str> = text.lines().collect();
        for (i, l) in lines
            .iter()
            .enumerate()
            .filter(|(_, l)| l.contains("panicked at"))
        {
            out.push(format!(
                "{}: {l} {}",
                f.file_name().unwrap_or_default().to_string_lossy(),
                lines.get(i + 1).unwrap_or(&"")
            ));
        }
    }
    out
}

/// After crashes that lost unsynced writes: every crashed node started again on what its disk
/// kept, every node was ready after healing (`unhealed` says why not), and no node panicked
/// (`panics`, from the node logs: a Raft core that finds a follower's log shorter than the
/// follower had acknowledged panics, and a later restart would hide it).
pub fn recovery(nemesis: &[String], unhealed: Option<&str>, panics: &[String]) -> Verdict {
    let crashes = nemesis
        .iter()
        .filter(|d| d.starts_with("kill-lose-unsynced "))
        .count();
    let not_restarted: Vec<String> = nemesis
        .iter()
        .filter(|d| d.starts_with("kill-lose-unsynced ") && d.contains("did not restart"))
        .cloned()
        .collect();
    let detail = format!(
        "{} of {crashes} crashes that lost unsynced writes left a node that did not restart; {}; \
         {} panics in the node logs",
        not_restarted.len(),
        if unhealed.is_some() {
            "not every node was ready after healing"
        } else {
            "every node was ready after healing"
        },
        panics.len()
    );
    let failed: Vec<String> = unhealed
        .map(str::to_string)
        .into_iter()
        .chain(panics.iter().cloned())
        .chain(not_restarted)
        .collect();
    Verdict {
        checker: "recovery".into(),
        valid: failed.is_empty(),
        detail,
        ops: failed.into_iter().take(8).collect(),
    }
}

/// Polls every member's digest until all agree (or 60 s pass).
async fn converge(db: &Db) -> BTreeMap<u64, (u64, String)> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mut digests = BTreeMap::new();
        for &id in &db.members {
            if let Ok((200, v)) = db
                .admin(id, reqwest::Method::GET, "/v1/cluster/digest", None)
                .await
            {
                if let (Some(i), Some(d)) = (v["applied_index"].as_u64(), v["digest"].as_str()) {
                    digests.insert(id, (i, d.to_string()));
                }
            }
        }
        let agree = digests.len() == db.members.len()
            && digests
                .values()
                .collect::<std::collections::BTreeSet<_>>()
                .len()
                == 1;
        if agree || Instant::now() > deadline {
            return digests;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The final state of every visitor a join was attempted for (`rejected:<reason>` when ended).
async fn final_states(
    db: &Db,
    http: &reqwest::Client,
    room: &str,
    events: &[crate::history::Event],
) -> BTreeMap<u64, String> {
    let values: Vec<u64> = events
        .iter()
        .filter(|e| e.f == "join" && e.kind == Kind::Invoke)
        .filter_map(|e| e.value.as_u64())
        .collect();
    let urls: Vec<String> = db.members.iter().map(|&id| db.url(id)).collect();
    let mut out = BTreeMap::new();
    for chunk in values.chunks(32) {
        let futs = chunk.iter().enumerate().map(|(i, &v)| {
            let url = format!(
                "{}/v1/rooms/{room}/status?consistent=true",
                urls[i % urls.len()]
            );
            let ticket = mint(crate::db::TICKET_SECRET, room, v);
            let http = http.clone();
            async move {
                for _ in 0..20 {
                    let r = http
                        .get(&url)
                        .header("authorization", format!("Ticket {ticket}"))
                        .timeout(Duration::from_secs(5))
                        .send()
                        .await;
                    if let Ok(r) = r {
                        let status = r.status();
                        let b: Value = r.json().await.unwrap_or(Value::Null);
                        if status.is_success() {
                            let s = b["state"].as_str().unwrap_or_default();
                            return (
                                v,
                                if s == "rejected" {
                                    format!("rejected:{}", b["reason"].as_str().unwrap_or(""))
                                } else {
                                    s.to_string()
                                },
                            );
                        }
                        if status.as_u16() == 404 {
                            return (v, "unknown".to_string());
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                (v, "unreachable".to_string())
            }
        });
        for (v, s) in futures::future::join_all(futs).await {
            out.insert(v, s);
        }
    }
    out
}

/// The whole log from one member.
async fn fetch_log(db: &Db) -> Result<Vec<LogEntry>> {
    let mut log = Vec::new();
    let mut from = 1u64;
    loop {
        let v = db
            .admin_any(
                reqwest::Method::GET,
                &format!("/v1/cluster/log?from={from}&limit=5000"),
                None,
                Duration::from_secs(30),
            )
            .await?;
        let entries = v["entries"].as_array().cloned().unwrap_or_default();
        if entries.is_empty() {
            break;
        }
        for e in entries {
            let proposal = match e["proposal"].as_str() {
                Some(p) => Some(base64::engine::general_purpose::STANDARD.decode(p)?),
                None => None,
            };
            log.push(LogEntry {
                index: e["index"].as_u64().unwrap_or(0),
                term: e["term"].as_u64().unwrap_or(0),
                proposal,
            });
        }
        from = log.last().map_or(from, |e| e.index + 1);
    }
    Ok(log)
}
