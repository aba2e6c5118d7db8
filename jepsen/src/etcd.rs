//! etcd under the same partition faults as Sluice, for comparison of liveness: one etcd member
//! (Debian's `etcd`) in each node's network namespace of [`crate::net`], the faults drawn by the
//! same seeded [`Nemesis`] (same order, same cuts; the leader from etcd's Maintenance/Status),
//! and closed-loop clients putting new keys, recorded in a [`History`], from which the same
//! [`crate::liveness`] figures are read as for a Sluice run.
//!
//! The members run with the harness's Raft timing for Sluice nodes (heartbeat 100 ms, election
//! timeout 600 ms, which etcd draws from [600, 1200) ms as Sluice's nodes draw from 600–1200 ms)
//! and fsync as etcd always does.

use crate::bench::{etcd_member_args, wait_etcd_up};
use crate::history::{to_jsonl, History, Kind};
use crate::liveness::{self, Liveness};
use crate::nemesis::{Fault, Nemesis};
use crate::net::Net;
use crate::pb::etcd::{kv_client::KvClient, maintenance_client::MaintenanceClient};
use crate::pb::etcd::{PutRequest, StatusRequest};
use anyhow::{Context, Result};
use rand_chacha::ChaCha8Rng;
use rand_core::SeedableRng;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tonic::transport::{Channel, Endpoint};

/// etcd's client port.
const CLIENT_PORT: u16 = 2379;
/// etcd's peer port.
const PEER_PORT: u16 = 2380;
/// Each put's deadline, as the Sluice workloads' requests have.
const PUT_TIMEOUT: Duration = Duration::from_secs(3);

/// What to run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct EtcdSpec {
    /// Members.
    pub nodes: u64,
    /// Faults to draw from (only partitions are injected; others are skipped and say so).
    pub faults: Vec<Fault>,
    /// How long the clients run.
    pub duration: Duration,
    /// Seed of the fault schedule.
    pub seed: u64,
    /// Concurrent clients.
    pub workers: usize,
    /// How long each fault lasts.
    pub fault_hold: Duration,
    /// Quiet time before each fault.
    pub quiet: Duration,
    /// etcd's `--pre-vote`.
    pub pre_vote: bool,
    /// Where results go.
    pub out: PathBuf,
}

/// What a run measured.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct EtcdSummary {
    /// Run name.
    pub name: String,
    /// `etcd --version`'s first line.
    pub etcd: String,
    /// Members.
    pub nodes: u64,
    /// Faults drawn from.
    pub faults: Vec<String>,
    /// Seed.
    pub seed: u64,
    /// etcd's `--pre-vote`.
    pub pre_vote: bool,
    /// Acknowledged puts.
    pub ok: u64,
    /// Puts that certainly failed.
    pub fail: u64,
    /// Puts that timed out or failed in a way that does not rule them out.
    pub info: u64,
    /// Faults as they happened ("ms since start: description").
    pub nemesis: Vec<String>,
    /// Wall time, seconds.
    pub seconds: f64,
    /// Acknowledged puts while healthy and under each fault.
    pub liveness: Liveness,
}

/// The members: killed when dropped, before the network goes.
#[derive(Debug)]
struct Members {
    children: BTreeMap<u64, Child>,
    net: Net,
}

impl Drop for Members {
    fn drop(&mut self) {
        for c in self.children.values_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The first line of `etcd --version`.
fn etcd_version() -> String {
    Command::new("etcd")
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .map(str::to_string)
        })
        .unwrap_or_else(|| "unknown".into())
}

/// The node whose member etcd's members name as leader (the first that names one), from the
/// member ids each node's member reported at the start.
async fn leader(
    status: &mut BTreeMap<u64, MaintenanceClient<Channel>>,
    ids: &BTreeMap<u64, u64>,
) -> Option<u64> {
    for m in status.values_mut() {
        let r = tokio::time::timeout(Duration::from_secs(1), m.status(StatusRequest {})).await;
        if let Ok(Ok(r)) = r {
            let l = r.into_inner().leader;
            if let Some(&node) = ids.get(&l) {
                return Some(node);
            }
        }
    }
    None
}

/// Runs one comparison run.
pub async fn run(spec: &EtcdSpec) -> Result<EtcdSummary> {
    let started = Instant::now();
    let faults: Vec<String> = spec.faults.iter().map(|f| f.name()).collect();
    let name = format!("etcd-{}-n{}", faults.join(","), spec.nodes);
    let dir = spec.out.join("nodes");
    // A new cluster each time: etcd refuses `--initial-cluster-state new` on old data.
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let (prefix, subnet) = crate::runner::net_params(&name);
    let net = Net::create(&prefix, &subnet)
        .context("creating the test network (needs root, iproute2, nftables)")?;
    let mut members = Members {
        children: BTreeMap::new(),
        net,
    };
    let ids: Vec<u64> = (1..=spec.nodes).collect();
    for &id in &ids {
        members.net.add_node(id)?;
    }
    let initial: Vec<String> = ids
        .iter()
        .map(|&id| format!("e{id}=http://{}:{PEER_PORT}", members.net.ip(id)))
        .collect();
    let endpoints: BTreeMap<u64, String> = ids
        .iter()
        .map(|&id| (id, format!("http://{}:{CLIENT_PORT}", members.net.ip(id))))
        .collect();
    for &id in &ids {
        let ip = members.net.ip(id);
        let log = std::fs::File::create(dir.join(format!("etcd{id}.log")))?;
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &members.net.ns(id), "etcd"]);
        etcd_member_args(
            &mut cmd,
            &format!("e{id}"),
            &dir.join(format!("etcd{id}")),
            &endpoints[&id],
            &format!("http://{ip}:{PEER_PORT}"),
            &initial.join(","),
            "sluice-liveness",
        );
        let child = cmd
            .args(["--heartbeat-interval", "100", "--election-timeout", "600"])
            .arg(format!("--pre-vote={}", spec.pre_vote))
            .args(["--logger", "zap", "--log-outputs", "stderr"])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .context("starting etcd (install Debian's etcd-server)")?;
        members.children.insert(id, child);
    }
    let eps: Vec<String> = endpoints.values().cloned().collect();
    wait_etcd_up(&eps, Duration::from_secs(60)).await?;

    let mut kvs = BTreeMap::new();
    let mut status = BTreeMap::new();
    for (&id, ep) in &endpoints {
        let channel = Endpoint::from_shared(ep.clone())?
            .connect_timeout(Duration::from_secs(1))
            .connect_lazy();
        kvs.insert(id, KvClient::new(channel.clone()));
        status.insert(id, MaintenanceClient::new(channel));
    }
    // Each node's member id (every member answers now: the cluster just came up).
    let mut member_ids = BTreeMap::new();
    for (&id, m) in status.iter_mut() {
        let r = m.status(StatusRequest {}).await?.into_inner();
        let member = r.header.map(|h| h.member_id).unwrap_or_default();
        member_ids.insert(member, id);
    }

    let history = History::new();
    let deadline = Instant::now() + spec.duration;
    let next_value = Arc::new(AtomicU64::new(1));
    let next_process = Arc::new(AtomicU64::new(0));
    let clients: Vec<(u64, KvClient<Channel>)> = kvs.into_iter().collect();
    let mut workers = Vec::new();
    for i in 0..spec.workers {
        let (history, next_value, next_process, clients) = (
            history.clone(),
            next_value.clone(),
            next_process.clone(),
            clients.clone(),
        );
        workers.push(tokio::spawn(async move {
            let mut process = next_process.fetch_add(1, Ordering::SeqCst);
            let mut round = 0usize;
            while Instant::now() < deadline {
                // Spread over the members, moving on after each put, as the Sluice workloads do.
                let (node, mut kv) = clients[(i + round) % clients.len()].clone();
                round += 1;
                let v = next_value.fetch_add(1, Ordering::SeqCst);
                history.record(Kind::Invoke, process, "put", json!(v), node, None);
                let put = kv.put(PutRequest {
                    key: format!("k/{v}").into_bytes(),
                    value: b"x".to_vec(),
                    lease: 0,
                });
                let (kind, err) = match tokio::time::timeout(PUT_TIMEOUT, put).await {
                    Ok(Ok(_)) => (Kind::Ok, None),
                    // Refused before it was proposed: no connection, or no leader known.
                    Ok(Err(s))
                        if s.message().contains("no leader")
                            || s.message().contains("error trying to connect") =>
                    {
                        (Kind::Fail, Some(format!("{:?}: {}", s.code(), s.message())))
                    }
                    Ok(Err(s)) => (Kind::Info, Some(format!("{:?}: {}", s.code(), s.message()))),
                    Err(_) => (Kind::Info, Some("timeout".into())),
                };
                history.record(kind, process, "put", json!(v), node, err);
                if kind == Kind::Info {
                    process = next_process.fetch_add(1, Ordering::SeqCst);
                }
            }
        }));
    }

    let mut nemesis = Nemesis::new(ChaCha8Rng::seed_from_u64(spec.seed), spec.faults.clone());
    let mut windows = Vec::new();
    while Instant::now() + spec.quiet + spec.fault_hold < deadline {
        tokio::time::sleep(spec.quiet).await;
        let at = started.elapsed().as_millis() as u64;
        let l = leader(&mut status, &member_ids).await;
        let desc = match nemesis
            .step_net(&mut members.net, &ids, l, spec.fault_hold, &history)
            .await
        {
            Ok(step) => step.record(&mut windows),
            Err(e) => format!("fault failed: {e}"),
        };
        nemesis.log.push((at, desc));
    }
    for w in workers {
        w.await.context("client")?;
    }
    let workload_end = history.now();
    members.net.heal()?;

    let events = history.events();
    let liveness = liveness::liveness(&events, &windows, workload_end);
    std::fs::write(spec.out.join("history.jsonl"), to_jsonl(&events))?;
    std::fs::write(spec.out.join("nemesis.log"), nemesis.log_text())?;
    let count = |k: Kind| events.iter().filter(|e| e.kind == k).count() as u64;
    let summary = EtcdSummary {
        name,
        etcd: etcd_version(),
        nodes: spec.nodes,
        faults,
        seed: spec.seed,
        pre_vote: spec.pre_vote,
        ok: count(Kind::Ok),
        fail: count(Kind::Fail),
        info: count(Kind::Info),
        nemesis: nemesis.log_lines(),
        seconds: started.elapsed().as_secs_f64(),
        liveness,
    };
    std::fs::write(
        spec.out.join("summary.json"),
        serde_json::to_string_pretty(&summary)?,
    )?;
    drop(members);
    // The members' data; their logs stay.
    for &id in &ids {
        let _ = std::fs::remove_dir_all(dir.join(format!("etcd{id}")));
    }
    Ok(summary)
}
