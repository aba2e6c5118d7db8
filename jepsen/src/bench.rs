//! The load generator and the side-by-side benchmark: a real 3-node Sluice cluster and a real
//! 3-node etcd cluster (both fsyncing, separate processes, loopback), plus an axum hello-world,
//! driven by the same generator in the same run.

use crate::pb;
use anyhow::{bail, Context, Result};
use hdrhistogram::Histogram;
use serde::Serialize;
use serde_json::{json, Value};
use sluice_testkit::free_port;
use sluice_testkit::node::{self, Addrs};
use std::collections::BTreeMap;
use std::future::Future;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Operator token of the benchmark cluster.
pub const TOKEN: &str = "bench-operator-token-0123456789abcdef";

/// Throughput and latency of one step.
#[derive(Debug, Clone, Serialize)]
pub struct Stats {
    /// Step name.
    pub name: String,
    /// Concurrent clients (closed loop) or 0 (open loop).
    pub clients: usize,
    /// Target rate (open loop) or 0.
    pub target_rate: u64,
    /// Seconds measured.
    pub seconds: f64,
    /// Successful operations.
    pub ops: u64,
    /// Operations per second.
    pub per_sec: f64,
    /// Latency percentiles, ms.
    pub p50_ms: f64,
    /// p99.
    pub p99_ms: f64,
    /// p99.9.
    pub p999_ms: f64,
    /// Maximum.
    pub max_ms: f64,
    /// Errors by kind.
    pub errors: BTreeMap<String, u64>,
    /// Compare-and-retry attempts beyond the first (etcd joins).
    pub retries: u64,
    /// CPU time (user and system) per successful operation, µs, of each Sluice node (`n1`..)
    /// and of the generator itself, over the step; Sluice join steps only.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub cpu_us_per_op: BTreeMap<String, f64>,
    /// When the step started, ms since the Unix epoch: to line it up with the nodes' logs
    /// (snapshots, slow WAL syncs).
    pub started_unix_ms: u64,
    /// Open loop only: how late after its scheduled time an operation started (p50 and p99,
    /// ms). The latency counts from the scheduled time, so this is the generator's own share.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_lag_p50_ms: Option<f64>,
    /// See `start_lag_p50_ms`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_lag_p99_ms: Option<f64>,
}

/// Operations an open-loop step keeps in flight at most; past that it starts late (and the
/// lateness counts as latency) rather than pile up requests without bound.
const OPEN_LOOP_IN_FLIGHT_MAX: usize = 20_000;

impl Stats {
    fn new(
        name: &str,
        clients: usize,
        target_rate: u64,
        secs: f64,
        h: &Histogram<u64>,
        errors: BTreeMap<String, u64>,
        retries: u64,
    ) -> Self {
        let q = |x: f64| h.value_at_quantile(x) as f64 / 1000.0;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        Stats {
            name: name.into(),
            clients,
            target_rate,
            seconds: secs,
            ops: h.len(),
            per_sec: h.len() as f64 / secs,
            p50_ms: q(0.5),
            p99_ms: q(0.99),
            p999_ms: q(0.999),
            max_ms: h.max() as f64 / 1000.0,
            errors,
            retries,
            cpu_us_per_op: BTreeMap::new(),
            started_unix_ms: now
                .saturating_sub(Duration::from_secs_f64(secs))
                .as_millis() as u64,
            start_lag_p50_ms: None,
            start_lag_p99_ms: None,
        }
    }

    /// Records the CPU each process used between `before` and `after` (from [`CpuUse::now`]),
    /// per successful operation of this step.
    fn cpu_between(mut self, before: &CpuUse, after: &CpuUse) -> Self {
        let ops = self.ops.max(1) as f64;
        for (who, &end) in &after.0 {
            if let Some(&start) = before.0.get(who) {
                let us = end.saturating_sub(start) as f64 * 1e6 / USER_HZ as f64;
                self.cpu_us_per_op.insert(who.clone(), us / ops);
            }
        }
        self
    }

    /// One line for humans.
    pub fn line(&self) -> String {
        format!(
            "{:<34} {:>4} clients {:>10.0}/s  p50 {:>7.2} ms  p99 {:>7.2} ms  p99.9 {:>7.2} ms  max {:>8.2} ms  errors {}",
            self.name,
            self.clients,
            self.per_sec,
            self.p50_ms,
            self.p99_ms,
            self.p999_ms,
            self.max_ms,
            self.errors.values().sum::<u64>()
        ) + &match self.start_lag_p99_ms {
            Some(l) => format!("  start lag p99 {l:.2} ms"),
            None => String::new(),
        } + &if self.cpu_us_per_op.is_empty() {
            String::new()
        } else {
            format!(
                "  cpu/op {:.0} µs",
                self.cpu_us_per_op.values().sum::<f64>()
            )
        }
    }
}

/// The unit of the CPU times in `/proc/<pid>/stat`: Linux fixes it at 100 per second for user
/// space on every architecture it runs on.
const USER_HZ: u64 = 100;

/// CPU time (user and system) a process has used, in 1/`USER_HZ` s, from `/proc/<pid>/stat`;
/// 0 if it cannot be read.
pub fn cpu_ticks(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            // The fields after the command name (in parentheses, and it may hold spaces) start
            // at field 3; utime and stime are fields 14 and 15.
            let f: Vec<&str> = s.get(s.rfind(')')? + 1..)?.split_whitespace().collect();
            Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
        })
        .unwrap_or(0)
}

/// CPU time used so far by each Sluice node (`n1`..) and by this process (`generator`).
#[derive(Debug, Clone)]
struct CpuUse(BTreeMap<String, u64>);

impl CpuUse {
    fn now(c: &SluiceCluster) -> Self {
        let mut m: BTreeMap<String, u64> = c
            .children
            .iter()
            .map(|(id, ch)| (format!("n{id}"), cpu_ticks(ch.id())))
            .collect();
        m.insert("generator".into(), cpu_ticks(std::process::id()));
        CpuUse(m)
    }
}

type OpResult = Result<u64, String>;

/// A request that got a success status is done; any other status is an error of that kind.
fn answered(r: &reqwest::Response) -> OpResult {
    if r.status().is_success() {
        Ok(0)
    } else {
        Err(r.status().to_string())
    }
}

/// Closed loop: `clients` tasks each issue the next operation as soon as the last completes.
/// The operation returns the number of retries it needed.
pub async fn closed_loop<F, Fut>(name: &str, clients: usize, duration: Duration, op: F) -> Stats
where
    F: Fn(usize, u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = OpResult> + Send,
{
    let op = Arc::new(op);
    let deadline = Instant::now() + duration;
    let started = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..clients {
        let op = op.clone();
        tasks.push(tokio::spawn(async move {
            let mut h = Histogram::<u64>::new_with_bounds(1, 120_000_000, 3).expect("histogram");
            let mut errors: BTreeMap<String, u64> = BTreeMap::new();
            let mut retries = 0;
            let mut i = 0u64;
            while Instant::now() < deadline {
                let t = Instant::now();
                match op(c, i).await {
                    Ok(r) => {
                        retries += r;
                        h.saturating_record(t.elapsed().as_micros() as u64);
                    }
                    Err(e) => *errors.entry(e).or_default() += 1,
                }
                i += 1;
            }
            (h, errors, retries)
        }));
    }
    let mut h = Histogram::<u64>::new_with_bounds(1, 120_000_000, 3).expect("histogram");
    let (mut errors, mut retries) = (BTreeMap::new(), 0);
    for t in tasks {
        if let Ok((th, te, tr)) = t.await {
            h.add(th).expect("same bounds");
            for (k, v) in te {
                *errors.entry(k).or_default() += v;
            }
            retries += tr;
        }
    }
    Stats::new(
        name,
        clients,
        0,
        started.elapsed().as_secs_f64(),
        &h,
        errors,
        retries,
    )
}

/// Open loop: operations start on a fixed schedule at `rate` per second whatever the latency;
/// latency counts from the scheduled start (no coordinated omission). One task starts the
/// operations and collects their results, so that an operation starts as soon as that task
/// wakes at its time, not after a task of its own has been spawned and scheduled; how late
/// operations started all the same (tokio's timer fires on millisecond ticks, and the task waits
/// for a core like everything else on a busy machine) is reported as the start lag, which is
/// part of the latency.
pub async fn open_loop<F, Fut>(name: &str, rate: u64, duration: Duration, op: F) -> Stats
where
    F: Fn(usize, u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = OpResult> + Send + 'static,
{
    use futures::stream::{FuturesUnordered, StreamExt};
    let histogram = || Histogram::<u64>::new_with_bounds(1, 120_000_000, 3).expect("histogram");
    let (mut latency, mut lag) = (histogram(), histogram());
    let mut errors: BTreeMap<String, u64> = BTreeMap::new();
    let started = tokio::time::Instant::now();
    let total = rate * duration.as_secs();
    let interval = Duration::from_nanos(1_000_000_000 / rate.max(1));
    let due = |k: u64| started + interval * k as u32;
    let mut in_flight = FuturesUnordered::new();
    let mut k = 0u64;
    loop {
        let now = tokio::time::Instant::now();
        while k < total && due(k) <= now && in_flight.len() < OPEN_LOOP_IN_FLIGHT_MAX {
            let intended = due(k);
            lag.saturating_record((now - intended).as_micros() as u64);
            let op = op(k as usize, k);
            in_flight.push(async move { (op.await, intended) });
            k += 1;
        }
        if k >= total && in_flight.is_empty() {
            break;
        }
        tokio::select! {
            biased;
            Some((r, intended)) = in_flight.next(), if !in_flight.is_empty() => match r {
                Ok(_) => latency.saturating_record(intended.elapsed().as_micros() as u64),
                Err(e) => *errors.entry(e).or_default() += 1,
            },
            _ = tokio::time::sleep_until(due(k)), if k < total
                && in_flight.len() < OPEN_LOOP_IN_FLIGHT_MAX => {}
        }
    }
    let mut stats = Stats::new(
        name,
        0,
        rate,
        started.elapsed().as_secs_f64(),
        &latency,
        errors,
        0,
    );
    stats.start_lag_p50_ms = Some(lag.value_at_quantile(0.5) as f64 / 1000.0);
    stats.start_lag_p99_ms = Some(lag.value_at_quantile(0.99) as f64 / 1000.0);
    stats
}

fn find_bin(name: &str) -> Result<PathBuf> {
    let exe = std::env::current_exe()?;
    for dir in exe.ancestors().skip(1).take(3) {
        let c = dir.join(name);
        if c.is_file() {
            return Ok(c);
        }
    }
    bail!("cannot find {name} near {}", exe.display())
}

/// Resident memory of a process, bytes.
pub fn rss(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

/// A 3-node Sluice cluster of separate processes on loopback.
#[derive(Debug)]
pub struct SluiceCluster {
    dir: PathBuf,
    bin: PathBuf,
    /// Where each node listens, by id.
    pub addrs: BTreeMap<u64, Addrs>,
    children: BTreeMap<u64, Child>,
}

impl SluiceCluster {
    /// Starts `n` nodes and waits until ready.
    pub async fn start(dir: &Path, n: u64) -> Result<Self> {
        Self::start_with(dir, n, "").await
    }

    /// Starts `n` nodes whose configuration ends with `extra` (TOML sections), and waits until
    /// ready.
    pub async fn start_with(dir: &Path, n: u64, extra: &str) -> Result<Self> {
        std::fs::create_dir_all(dir)?;
        let mut c = SluiceCluster {
            dir: dir.into(),
            bin: crate::db::find_sluice()?,
            addrs: (1..=n).map(|id| (id, Addrs::loopback())).collect(),
            children: BTreeMap::new(),
        };
        for id in 1..=n {
            let cfg = format!(
                "{head}{peers}[tokens]\nticket_keys = [{{ id = \"b\", secret = \"YmVuY2gtdGlja2V0LXNlY3JldC1vZi0zMi1ieXRlcyE=\" }}]\n\
jwt_seed = \"YmVuY2gtand0LXNlZWQtb2YtZXhhY3RseS0zMmJ5dGU=\"\ndraw_secret = \"YmVuY2gtZHJhdy1zZWNyZXQtb2YtZXhhY3RseS0zMmI=\"\n[limits]\nvisitor_requests_per_second = 1000000\nvisitor_burst = 1000000\nconcurrent_requests_max = 100000\nrequests_per_address_max = 1000000\n{extra}",
                head = node::node_toml(id, &dir.join(format!("n{id}")), &c.addrs[&id], id == 1, TOKEN),
                peers = node::peers_toml(&c.addrs),
            );
            std::fs::write(dir.join(format!("n{id}.toml")), cfg)?;
            c.spawn(id)?;
        }
        c.wait_ready(Duration::from_secs(60)).await?;
        Ok(c)
    }

    fn spawn(&mut self, id: u64) -> Result<()> {
        let log = std::fs::File::create(self.dir.join(format!("n{id}.log")))?;
        let mut cmd = Command::new(&self.bin);
        cmd.args(["serve", "--config"])
            .arg(self.dir.join(format!("n{id}.toml")))
            .env("RUST_LOG", node::NODE_LOG)
            .stderr(log);
        let child =
            node::spawn_listening(cmd, &format!("node {id}")).map_err(anyhow::Error::msg)?;
        self.children.insert(id, child);
        Ok(())
    }

    /// The running nodes' URLs (`http://host:port`) by id.
    fn urls(&self) -> BTreeMap<u64, String> {
        self.children
            .keys()
            .map(|id| (*id, self.addrs[id].url()))
            .collect()
    }

    /// Waits for every running node's `/readyz`.
    pub async fn wait_ready(&self, timeout: Duration) -> Result<()> {
        node::wait_ready(&reqwest::Client::new(), self.urls(), timeout)
            .await
            .map_err(anyhow::Error::msg)
    }

    /// Writes each running node's `/metrics` to `metrics-n{id}.txt` next to its log (commit
    /// latency and WAL sync histograms, for reading a run afterwards). Best effort.
    pub async fn save_metrics(&self) {
        let http = reqwest::Client::new();
        for id in self.children.keys() {
            let text = match http
                .get(format!("{}/metrics", self.addrs[id].url()))
                .bearer_auth(TOKEN)
                .send()
                .await
            {
                Ok(r) => r.text().await.unwrap_or_default(),
                Err(e) => format!("# not scraped: {e}\n"),
            };
            let _ = std::fs::write(self.dir.join(format!("metrics-n{id}.txt")), text);
        }
    }

    /// The leader's id.
    pub async fn leader(&self) -> Result<u64> {
        let http = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let urls = self.urls();
            if let Some(l) = node::leader(&http, &urls, TOKEN, |l| urls.contains_key(&l)).await {
                return Ok(l);
            }
            if Instant::now() > deadline {
                bail!("no leader");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// SIGKILL.
    pub fn kill(&mut self, id: u64) {
        if let Some(mut c) = self.children.remove(&id) {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Restarts a killed node.
    pub fn restart(&mut self, id: u64) -> Result<()> {
        self.spawn(id)
    }

    /// Resident memory of each node.
    pub fn rss(&self) -> BTreeMap<u64, u64> {
        self.children
            .iter()
            .map(|(id, c)| (*id, rss(c.id())))
            .collect()
    }

    /// Node ids running.
    pub fn running(&self) -> Vec<u64> {
        self.children.keys().copied().collect()
    }
}

impl Drop for SluiceCluster {
    fn drop(&mut self) {
        for c in self.children.values_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The arguments of one member of a new etcd cluster: its name and data directory, the URLs it
/// serves clients and peers on (and advertises), and the whole initial cluster
/// (`name=peer-url,...`) with its token.
pub(crate) fn etcd_member_args(
    cmd: &mut Command,
    name: &str,
    data_dir: &Path,
    client_url: &str,
    peer_url: &str,
    initial_cluster: &str,
    token: &str,
) {
    cmd.args(["--name", name, "--data-dir"])
        .arg(data_dir)
        .args([
            "--listen-client-urls",
            client_url,
            "--advertise-client-urls",
            client_url,
        ])
        .args([
            "--listen-peer-urls",
            peer_url,
            "--initial-advertise-peer-urls",
            peer_url,
        ])
        .args([
            "--initial-cluster",
            initial_cluster,
            "--initial-cluster-state",
            "new",
            "--initial-cluster-token",
            token,
        ]);
}

/// Waits until a put through every endpoint succeeds.
pub(crate) async fn wait_etcd_up(endpoints: &[String], timeout: Duration) -> Result<()> {
    let deadline = Instant::now() + timeout;
    for ep in endpoints {
        loop {
            let ok = async {
                let mut kv = pb::etcd::kv_client::KvClient::connect(ep.clone())
                    .await
                    .ok()?;
                kv.put(pb::etcd::PutRequest {
                    key: b"ping".to_vec(),
                    value: b"1".to_vec(),
                    lease: 0,
                })
                .await
                .ok()
            }
            .await
            .is_some();
            if ok {
                break;
            }
            if Instant::now() > deadline {
                bail!("etcd at {ep} did not come up");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    Ok(())
}

/// A 3-member etcd cluster (Debian's `etcd-server`, fsync on) on loopback.
#[derive(Debug)]
pub struct EtcdCluster {
    /// Client endpoints.
    pub endpoints: Vec<String>,
    children: Vec<Child>,
}

impl EtcdCluster {
    /// Starts three members and waits until they answer.
    pub async fn start(dir: &Path) -> Result<Self> {
        let ports: Vec<(u16, u16)> = (0..3).map(|_| (free_port(), free_port())).collect();
        let initial: Vec<String> = ports
            .iter()
            .enumerate()
            .map(|(i, (_, p))| format!("e{i}=http://127.0.0.1:{p}"))
            .collect();
        let mut children = Vec::new();
        let mut endpoints = Vec::new();
        for (i, (c, p)) in ports.iter().enumerate() {
            let log = std::fs::File::create(dir.join(format!("etcd{i}.log")))?;
            let mut cmd = Command::new("etcd");
            etcd_member_args(
                &mut cmd,
                &format!("e{i}"),
                &dir.join(format!("etcd{i}")),
                &format!("http://127.0.0.1:{c}"),
                &format!("http://127.0.0.1:{p}"),
                &initial.join(","),
                "sluice-bench",
            );
            let child = cmd
                .args([
                    "--log-level",
                    "error",
                    "--quota-backend-bytes",
                    "8589934592",
                ])
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .context("starting etcd (install Debian's etcd-server)")?;
            children.push(child);
            endpoints.push(format!("http://127.0.0.1:{c}"));
        }
        let e = EtcdCluster {
            endpoints,
            children,
        };
        wait_etcd_up(&e.endpoints, Duration::from_secs(60)).await?;
        Ok(e)
    }
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A plain etcd put of a new key per call, spread over `kvs`.
fn etcd_put_op(
    kvs: &[pb::etcd::kv_client::KvClient<tonic::transport::Channel>],
    next: &Arc<AtomicU64>,
) -> impl Fn(usize, u64) -> std::pin::Pin<Box<dyn Future<Output = OpResult> + Send>>
       + Send
       + Sync
       + 'static {
    let (kvs, next) = (kvs.to_vec(), next.clone());
    move |c, _| {
        let mut kv = kvs[c % kvs.len()].clone();
        let v = next.fetch_add(1, Ordering::Relaxed);
        Box::pin(async move {
            kv.put(pb::etcd::PutRequest {
                key: format!("k/{v}").into_bytes(),
                value: b"x".to_vec(),
                lease: 0,
            })
            .await
            .map(|_| 0)
            .map_err(|s| format!("{:?}", s.code()))
        })
    }
}

/// etcd's equivalent of a join: read the room's sequence key, then one transaction that, if the
/// key is unchanged, increments it and writes the visitor's key; retried on a failed compare.
pub async fn etcd_join(
    kv: &mut pb::etcd::kv_client::KvClient<tonic::transport::Channel>,
    room: &str,
    visitor: u64,
) -> OpResult {
    use pb::etcd::*;
    let seq_key = format!("rooms/{room}/seq").into_bytes();
    let mut retries = 0;
    loop {
        let r = kv
            .range(RangeRequest {
                key: seq_key.clone(),
                ..Default::default()
            })
            .await
            .map_err(|s| format!("range: {:?}", s.code()))?
            .into_inner();
        let (seq, rev) = r.kvs.first().map_or((0u64, 0i64), |kv| {
            (
                String::from_utf8_lossy(&kv.value).parse().unwrap_or(0),
                kv.mod_revision,
            )
        });
        let next = (seq + 1).to_string().into_bytes();
        let txn = TxnRequest {
            compare: vec![Compare {
                result: compare::CompareResult::Equal as i32,
                target: compare::CompareTarget::Mod as i32,
                key: seq_key.clone(),
                target_union: Some(compare::TargetUnion::ModRevision(rev)),
            }],
            success: vec![
                RequestOp {
                    request: Some(request_op::Request::RequestPut(PutRequest {
                        key: seq_key.clone(),
                        value: next.clone(),
                        lease: 0,
                    })),
                },
                RequestOp {
                    request: Some(request_op::Request::RequestPut(PutRequest {
                        key: format!("rooms/{room}/visitors/{visitor:032x}").into_bytes(),
                        value: next,
                        lease: 0,
                    })),
                },
            ],
            failure: vec![],
        };
        let t = kv
            .txn(txn)
            .await
            .map_err(|s| format!("txn: {:?}", s.code()))?
            .into_inner();
        if t.succeeded {
            return Ok(retries);
        }
        retries += 1;
    }
}

/// The hello-world baseline server.
#[derive(Debug)]
pub struct Hello {
    /// `host:port`.
    pub addr: String,
    child: Child,
}

impl Hello {
    /// Starts `sluice-hello`.
    pub fn start() -> Result<Self> {
        let mut cmd = Command::new(find_bin("sluice-hello")?);
        cmd.arg("127.0.0.1:0");
        let mut child = cmd.stdout(Stdio::piped()).spawn()?;
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut line)?;
        let addr = line
            .trim()
            .strip_prefix("listening ")
            .context("hello did not start")?
            .to_string();
        Ok(Hello { addr, child })
    }
}

impl Drop for Hello {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How long and how big the benchmark runs.
#[derive(Debug, Clone, Serialize)]
pub struct BenchOpts {
    /// Seconds per throughput step.
    pub secs: u64,
    /// Waiters for the memory and restart figures.
    pub waiters: u64,
    /// Client counts for the throughput-against-clients table.
    pub client_steps: Vec<usize>,
    /// Where the processes keep data and logs.
    pub dir: PathBuf,
    /// Which steps to run.
    pub only: Steps,
    /// The open-loop latency step's rate, joins/s, instead of half the measured peak.
    pub rate: Option<u64>,
}

/// A subset of the benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Steps {
    /// Everything.
    All,
    /// The Sluice join steps and the half-peak latency step.
    Joins,
    /// Memory with the waiters, restart and failover.
    Memory,
    /// Hello-world, gate checks and follower status reads.
    Reads,
    /// Joins with the admission ledger kept and not kept, on fresh clusters, alternating.
    Ledger,
    /// The etcd anchors alone (joins with a room per client at 64 clients, puts at 256).
    Etcd,
}

fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .pool_max_idle_per_host(512)
        .timeout(Duration::from_secs(10))
        .build()
        .expect("client")
}

async fn grpc_visitors(
    c: &SluiceCluster,
) -> Result<Vec<pb::sluice::visitor_client::VisitorClient<tonic::transport::Channel>>> {
    let mut v = Vec::new();
    for a in c.addrs.values() {
        let ch = tonic::transport::Endpoint::from_shared(format!("http://{}", a.grpc))?
            .tcp_nodelay(true)
            .connect()
            .await?;
        v.push(pb::sluice::visitor_client::VisitorClient::new(ch));
    }
    Ok(v)
}

async fn put_room(c: &SluiceCluster, room: &str, body: Value) -> Result<()> {
    let http = http_client();
    for _ in 0..100 {
        for a in c.addrs.values() {
            if let Ok(r) = http
                .put(format!("{}/v1/rooms/{room}", a.url()))
                .bearer_auth(TOKEN)
                .json(&body)
                .send()
                .await
            {
                if r.status().is_success() {
                    return Ok(());
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bail!("could not create room {room}")
}

fn sluice_join_op(
    clients: Vec<pb::sluice::visitor_client::VisitorClient<tonic::transport::Channel>>,
    room: &'static str,
) -> impl Fn(usize, u64) -> std::pin::Pin<Box<dyn Future<Output = OpResult> + Send>>
       + Send
       + Sync
       + 'static {
    move |c, _| {
        let mut v = clients[c % clients.len()].clone();
        Box::pin(async move {
            v.join(pb::sluice::JoinRequest {
                room: room.into(),
                ticket: String::new(),
                client_address: String::new(),
                altcha: String::new(),
                identity: String::new(),
                challenge_token: String::new(),
                code: String::new(),
            })
            .await
            .map(|_| 0)
            .map_err(|s| format!("{:?}", s.code()))
        })
    }
}

async fn etcd_clients(
    etcd: &EtcdCluster,
) -> Result<Vec<pb::etcd::kv_client::KvClient<tonic::transport::Channel>>> {
    let mut kvs = Vec::new();
    for ep in &etcd.endpoints {
        kvs.push(pb::etcd::kv_client::KvClient::connect(ep.clone()).await?);
    }
    Ok(kvs)
}

/// A closed-loop step of etcd joins: every client on one hot room, or each on its own room.
async fn etcd_join_step(
    kvs: &[pb::etcd::kv_client::KvClient<tonic::transport::Channel>],
    next: &Arc<AtomicU64>,
    name: &str,
    clients: usize,
    own_room: bool,
    d: Duration,
) -> Stats {
    let (kvs, next) = (kvs.to_vec(), next.clone());
    closed_loop(name, clients, d, move |c, _| {
        let mut kv = kvs[c % kvs.len()].clone();
        let v = next.fetch_add(1, Ordering::Relaxed);
        let room = if own_room {
            format!("own-{c}")
        } else {
            "hot".to_string()
        };
        async move { etcd_join(&mut kv, &room, v).await }
    })
    .await
}

/// The etcd anchors alone: joins with a room per client at 64 clients and plain puts at 256.
async fn etcd_anchors(opts: &BenchOpts, d: Duration) -> Result<Value> {
    let etcd = EtcdCluster::start(&opts.dir).await?;
    let kvs = etcd_clients(&etcd).await?;
    let next = Arc::new(AtomicU64::new(0));
    let own64 = etcd_join_step(&kvs, &next, "etcd join, own room each", 64, true, d).await;
    println!("{}", own64.line());
    let put256 = closed_loop("etcd plain put", 256, d, etcd_put_op(&kvs, &next)).await;
    println!("{}", put256.line());
    println!(
        "summary: etcd joins (own room, 64 clients) {:.0}/s; etcd puts (256 clients) {:.0}/s",
        own64.per_sec, put256.per_sec
    );
    Ok(json!({
        "etcd_join_own_room_64_per_sec": own64.per_sec,
        "etcd_put_256_per_sec": put256.per_sec,
        "steps": [own64, put256],
    }))
}

/// Runs every step and returns the report (also printed line by line).
pub async fn run(opts: &BenchOpts) -> Result<Value> {
    std::fs::create_dir_all(&opts.dir)?;
    let d = Duration::from_secs(opts.secs);
    let mut steps: Vec<Stats> = Vec::new();
    let mut note = |s: Stats| {
        println!("{}", s.line());
        steps.push(s);
    };
    if opts.only == Steps::Ledger {
        return ledger_ab(opts, d).await;
    }
    if opts.only == Steps::Etcd {
        return etcd_anchors(opts, d).await;
    }
    let hello = Hello::start()?;
    if opts.only == Steps::Memory {
        let (rss, restart_ms, first) = memory_restart_failover(opts).await?;
        return Ok(json!({
            "rss_bytes_with_waiters": rss,
            "waiters": opts.waiters,
            "restart_to_serving_ms": restart_ms,
            "leader_kill_to_first_ack_ms": first.as_millis() as u64,
        }));
    }
    let sluice = SluiceCluster::start(&opts.dir.join("sluice"), 3).await?;
    let http = http_client();
    if opts.only == Steps::Reads {
        let r = reads(&sluice, &hello, &http, d).await?;
        println!("summary: {}", r.summary());
        return Ok(json!({
            "ratios": r.ratios(),
            "steps": [r.hello, r.gate, r.status, r.status_admitted],
        }));
    }

    // Joins: one hot room, at several client counts.
    put_room(&sluice, "hot", hot_room()).await?;
    let visitors = grpc_visitors(&sluice).await?;
    let mut join_rate: BTreeMap<usize, f64> = BTreeMap::new();
    let mut join_table = Vec::new();
    for &clients in &opts.client_steps {
        let s = join_step(
            &sluice,
            &visitors,
            "sluice join, hot room (gRPC)",
            clients,
            d,
        )
        .await;
        join_rate.insert(clients, s.per_sec);
        join_table.push(json!({"clients": clients, "per_sec": s.per_sec, "p99_ms": s.p99_ms}));
        note(s);
    }

    if opts.only == Steps::Joins {
        let peak = join_rate.values().cloned().fold(0.0, f64::max);
        let half_stats = half_peak(&sluice, &visitors, peak, opts.rate, d).await;
        let half_p99 = half_stats.p99_ms;
        note(half_stats);
        sluice.save_metrics().await;
        println!("summary: peak {peak:.0} joins/s; join p99 at half peak {half_p99:.2} ms");
        return Ok(json!({
            "steps": steps,
            "joins_vs_clients": join_table,
            "join_p99_ms_at_half_peak": half_p99,
            "peak_join_per_sec": peak,
        }));
    }

    let etcd = EtcdCluster::start(&opts.dir).await?;
    // etcd: the same join, every client on one hot room, and every client on its own room; plain puts.
    let kvs = etcd_clients(&etcd).await?;
    let next = Arc::new(AtomicU64::new(0));
    let etcd_hot64 = etcd_join_step(&kvs, &next, "etcd join, hot room", 64, false, d).await;
    let etcd_own64 = etcd_join_step(&kvs, &next, "etcd join, own room each", 64, true, d).await;
    let etcd_put256 = closed_loop("etcd plain put", 256, d, etcd_put_op(&kvs, &next)).await;
    // etcd's own latency at half of its own peak, the reference for Sluice's half-peak figure.
    let etcd_put_half_rate = (etcd_put256.per_sec / 2.0) as u64;
    let etcd_put_half = open_loop(
        &format!("etcd plain put at half its peak ({etcd_put_half_rate}/s)"),
        etcd_put_half_rate.max(1),
        d,
        etcd_put_op(&kvs, &next),
    )
    .await;
    let etcd_put_half_p99 = etcd_put_half.p99_ms;
    let sluice64 = join_step(
        &sluice,
        &visitors,
        "sluice join, hot room, 64 clients",
        64,
        d,
    )
    .await;
    let sluice256 = join_step(
        &sluice,
        &visitors,
        "sluice join, hot room, 256 clients",
        256,
        d,
    )
    .await;
    let (r_own, r_hot, r_put) = (
        sluice64.per_sec / etcd_own64.per_sec.max(1e-9),
        sluice64.per_sec / etcd_hot64.per_sec.max(1e-9),
        sluice256.per_sec / etcd_put256.per_sec.max(1e-9),
    );
    let peak = sluice64
        .per_sec
        .max(sluice256.per_sec)
        .max(join_rate.values().cloned().fold(0.0, f64::max));
    note(etcd_hot64);
    note(etcd_own64);
    note(etcd_put256);
    note(etcd_put_half);
    note(sluice64);
    note(sluice256);

    let read_steps = reads(&sluice, &hello, &http, d).await?;
    let mut ratios = read_steps.ratios();
    let read_summary = read_steps.summary();
    let http_addrs: Vec<String> = sluice.addrs.values().map(|a| a.http.clone()).collect();
    note(read_steps.hello);
    note(read_steps.gate);
    note(read_steps.status);
    note(read_steps.status_admitted);

    // A realistic mix: 5% joins, 60% status reads, 35% gate checks.
    let (h, addrs) = (http.clone(), Arc::new(http_addrs.clone()));
    let (adm2, wait2) = (
        Arc::new(steps_tickets(&http, &http_addrs, "gate", 50).await?),
        Arc::new(steps_tickets(&http, &http_addrs, "line", 50).await?),
    );
    let mix = closed_loop("mix 5% join / 60% status / 35% gate", 64, d, move |c, i| {
        let (h, a, adm, wait) = (h.clone(), addrs.clone(), adm2.clone(), wait2.clone());
        async move {
            let node = &a[(c + i as usize) % a.len()];
            let r = match i % 20 {
                0 => {
                    h.post(format!("http://{node}/v1/rooms/line/join"))
                        .send()
                        .await
                }
                1..=12 => {
                    h.get(format!("http://{node}/v1/rooms/line/status"))
                        .header(
                            "authorization",
                            format!("Ticket {}", wait[i as usize % wait.len()]),
                        )
                        .send()
                        .await
                }
                _ => {
                    h.get(format!("http://{node}/gate/gate/check"))
                        .header(
                            "cookie",
                            format!("sluice_ticket={}", adm[i as usize % adm.len()]),
                        )
                        .send()
                        .await
                }
            };
            let r = r.map_err(|e| e.to_string())?;
            answered(&r)
        }
    })
    .await;
    note(mix);

    // Join latency at half the peak rate (open loop).
    let half_stats = half_peak(&sluice, &visitors, peak, opts.rate, d).await;
    let half_p99 = half_stats.p99_ms;
    note(half_stats);
    // And at the rate etcd's puts ran at half of etcd's peak: the two latencies at the same load.
    let at_etcd = join_at(
        &sluice,
        &visitors,
        &format!("sluice join at etcd's half-peak rate ({etcd_put_half_rate}/s)"),
        etcd_put_half_rate,
        d,
    )
    .await;
    let at_etcd_p99 = at_etcd.p99_ms;
    note(at_etcd);
    sluice.save_metrics().await;

    // Memory, restart and failover on a fresh cluster holding only the waiters.
    drop(sluice);
    let (rss_all, restart_ms, first) = memory_restart_failover(opts).await?;
    let target = opts.waiters;

    ratios.extend([
        (
            "sluice_join_hot_64_over_etcd_join_own_room_64".to_string(),
            json!(r_own),
        ),
        (
            "sluice_join_hot_64_over_etcd_join_hot_room_64".to_string(),
            json!(r_hot),
        ),
        (
            "sluice_join_hot_256_over_etcd_put_256".to_string(),
            json!(r_put),
        ),
    ]);
    let report = json!({
        "steps": steps,
        "joins_vs_clients": join_table,
        "ratios": ratios,
        "join_p99_ms_at_half_peak": half_p99,
        "etcd_put_p99_ms_at_half_its_peak": etcd_put_half_p99,
        "join_p99_ms_at_etcd_half_peak_rate": at_etcd_p99,
        "peak_join_per_sec": peak,
        "rss_bytes_with_waiters": rss_all,
        "waiters": target,
        "restart_to_serving_ms": restart_ms,
        "leader_kill_to_first_ack_ms": first.as_millis() as u64,
    });
    println!(
        "summary: joins/s vs etcd own-room {:.1}x, vs etcd hot-room {:.1}x, vs etcd puts {:.2}x; {}; join p99 at half peak {:.2} ms (etcd put p99 at half its peak {:.2} ms, join p99 at that rate {:.2} ms); rss {} MB; restart {} ms; failover {} ms",
        r_own,
        r_hot,
        r_put,
        read_summary,
        half_p99,
        etcd_put_half_p99,
        at_etcd_p99,
        rss_all.values().max().copied().unwrap_or(0) / (1 << 20),
        restart_ms,
        first.as_millis()
    );
    drop(etcd);
    drop(hello);
    Ok(report)
}

/// Resident memory of each node of a fresh cluster holding `opts.waiters` waiters in one room,
/// then a follower's restart to serving, then the leader's death to the first acknowledged write.
async fn memory_restart_failover(opts: &BenchOpts) -> Result<(BTreeMap<u64, u64>, u64, Duration)> {
    let mut sluice = SluiceCluster::start(&opts.dir.join("sluice-memory"), 3).await?;
    put_room(&sluice, "hot", hot_room()).await?;
    let visitors = grpc_visitors(&sluice).await?;
    put_room(
        &sluice,
        "big",
        json!({"paused": true, "max_waiting": 10_000_000, "waiter_ttl_secs": 86_400}),
    )
    .await?;
    let filled = Arc::new(AtomicU64::new(0));
    let target = opts.waiters;
    let fill = {
        let (v, filled) = (visitors.clone(), filled.clone());
        closed_loop(
            "fill big room",
            256,
            Duration::from_secs(3600),
            move |c, _| {
                let mut v = v[c % v.len()].clone();
                let filled = filled.clone();
                async move {
                    if filled.load(Ordering::Relaxed) >= target {
                        tokio::time::sleep(Duration::from_millis(5)).await;
                        return Err("done".into());
                    }
                    v.join(pb::sluice::JoinRequest {
                        room: "big".into(),
                        ticket: String::new(),
                        client_address: String::new(),
                        altcha: String::new(),
                        identity: String::new(),
                        challenge_token: String::new(),
                        code: String::new(),
                    })
                    .await
                    .map_err(|s| format!("{:?}", s.code()))?;
                    filled.fetch_add(1, Ordering::Relaxed);
                    Ok(0)
                }
            },
        )
    };
    // Stop the fill as soon as the target is reached.
    let fill_task = tokio::spawn(fill);
    while filled.load(Ordering::Relaxed) < target {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    fill_task.abort();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rss_all = sluice.rss();
    println!(
        "resident memory with {target} waiters: {:?} MB",
        rss_all.values().map(|b| b / (1 << 20)).collect::<Vec<_>>()
    );

    // Restart a follower holding them: time to serving.
    let leader = sluice.leader().await?;
    let follower = *sluice
        .running()
        .iter()
        .find(|&&id| id != leader)
        .expect("a follower");
    sluice.kill(follower);
    let t = Instant::now();
    sluice.restart(follower)?;
    sluice.wait_ready(Duration::from_secs(120)).await?;
    let restart_ms = t.elapsed().as_millis() as u64;
    println!("node restart with {target} waiters → serving: {restart_ms} ms");

    // Leader killed → first acknowledged write, with clients on the surviving nodes.
    let leader = sluice.leader().await?;
    let survivors: Vec<_> = sluice
        .addrs
        .iter()
        .filter(|(id, _)| **id != leader)
        .map(|(_, a)| a.grpc.clone())
        .collect();
    let mut clients = Vec::new();
    for g in &survivors {
        let ch = tonic::transport::Endpoint::from_shared(format!("http://{g}"))?
            .connect()
            .await?;
        clients.push(pb::sluice::visitor_client::VisitorClient::new(ch));
    }
    sluice.kill(leader);
    let killed = Instant::now();
    let first = loop {
        let mut c = clients[0].clone();
        if c.join(pb::sluice::JoinRequest {
            room: "hot".into(),
            ticket: String::new(),
            client_address: String::new(),
            altcha: String::new(),
            identity: String::new(),
            challenge_token: String::new(),
            code: String::new(),
        })
        .await
        .is_ok()
        {
            break killed.elapsed();
        }
        if killed.elapsed() > Duration::from_secs(30) {
            bail!("no write acknowledged within 30 s of the leader's death");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    println!(
        "leader killed → first acknowledged write: {} ms",
        first.as_millis()
    );

    Ok((rss_all, restart_ms, first))
}

/// The read steps, each against the hello-world baseline measured right before them.
struct Reads {
    hello: Stats,
    gate: Stats,
    /// Status reads of waiting visitors.
    status: Stats,
    /// Status reads of admitted visitors (each answer carries an admission token).
    status_admitted: Stats,
}

impl Reads {
    fn ratios(&self) -> serde_json::Map<String, Value> {
        let of = |s: &Stats| json!(s.per_sec / self.hello.per_sec.max(1e-9));
        serde_json::Map::from_iter([
            ("gate_over_hello_world".to_string(), of(&self.gate)),
            (
                "follower_status_over_hello_world".to_string(),
                of(&self.status),
            ),
            (
                "follower_status_admitted_over_hello_world".to_string(),
                of(&self.status_admitted),
            ),
        ])
    }

    fn summary(&self) -> String {
        let of = |s: &Stats| s.per_sec / self.hello.per_sec.max(1e-9);
        format!(
            "gate/hello {:.2}; status/hello {:.2} (waiting), {:.2} (admitted)",
            of(&self.gate),
            of(&self.status),
            of(&self.status_admitted)
        )
    }
}

/// Hello-world, then gate checks and follower status reads of waiting and of admitted
/// visitors, back to back (64 clients each).
async fn reads(
    sluice: &SluiceCluster,
    hello: &Hello,
    http: &reqwest::Client,
    d: Duration,
) -> Result<Reads> {
    // The baseline, measured right before the reads it is compared with: on a shared machine the
    // speed drifts over minutes.
    let url = format!("http://{}/", hello.addr);
    let h = http.clone();
    let hello_stats = closed_loop("hello-world GET /", 64, d, move |_, _| {
        let (h, url) = (h.clone(), url.clone());
        async move {
            h.get(&url)
                .send()
                .await
                .and_then(|r| r.error_for_status())
                .map(|_| 0)
                .map_err(|e| e.to_string())
        }
    })
    .await;

    // Gate checks and follower status reads, against hello-world.
    put_room(sluice, "gate", json!({"capacity": 10_000_000, "admit_per_minute": 60_000_000, "admit_burst": 1_000_000, "session_ttl_secs": 3600})).await?;
    put_room(
        sluice,
        "line",
        json!({"paused": true, "max_waiting": 10_000_000, "waiter_ttl_secs": 86_400}),
    )
    .await?;
    let http_addrs: Vec<String> = sluice.addrs.values().map(|a| a.http.clone()).collect();
    let admitted = steps_tickets(http, &http_addrs, "gate", 200).await?;
    let waiting = steps_tickets(http, &http_addrs, "line", 200).await?;
    // Every node answers the gate from its applied state: wait until each has applied the last
    // admission. (Status reads wait for the ticket's own write themselves.)
    let last = admitted.last().cloned().unwrap_or_default();
    let deadline = Instant::now() + Duration::from_secs(10);
    for h in &http_addrs {
        while !http
            .get(format!("http://{h}/gate/gate/check"))
            .header("cookie", format!("sluice_ticket={last}"))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            if Instant::now() > deadline {
                bail!("node {h} did not apply the gate room's admissions");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let leader = sluice.leader().await?;
    let followers: Vec<String> = sluice
        .addrs
        .iter()
        .filter(|(id, _)| **id != leader)
        .map(|(_, a)| a.http.clone())
        .collect();
    let admitted = Arc::new(admitted);
    // On the followers, as the status reads and wrk's runs (`jepsen/scripts/reads.sh`): what a
    // node answers from its applied state, beside a leader's work.
    let (h, tickets, addrs) = (http.clone(), admitted.clone(), Arc::new(followers.clone()));
    let gate = closed_loop("gate check (followers)", 64, d, move |c, i| {
        let (h, t, a) = (h.clone(), tickets.clone(), addrs.clone());
        async move {
            let url = format!("http://{}/gate/gate/check", a[c % a.len()]);
            let cookie = format!("sluice_ticket_gate={}", t[(c + i as usize) % t.len()]);
            let r = h
                .get(&url)
                .header("cookie", cookie)
                .send()
                .await
                .map_err(|e| e.to_string())?;
            answered(&r)
        }
    })
    .await;
    let followers = Arc::new(followers);
    let status = status_step(
        http,
        "status read (followers)",
        "line",
        Arc::new(waiting),
        followers.clone(),
        d,
    )
    .await;
    let status_admitted = status_step(
        http,
        "status read, admitted (followers)",
        "gate",
        admitted,
        followers,
        d,
    )
    .await;
    Ok(Reads {
        hello: hello_stats,
        gate,
        status,
        status_admitted,
    })
}

/// Closed-loop status reads, step `name`, by 64 clients of `room`'s visitors holding `tickets`,
/// on the followers.
async fn status_step(
    http: &reqwest::Client,
    name: &str,
    room: &'static str,
    tickets: Arc<Vec<String>>,
    followers: Arc<Vec<String>>,
    d: Duration,
) -> Stats {
    let h = http.clone();
    closed_loop(name, 64, d, move |c, i| {
        let (h, t, f) = (h.clone(), tickets.clone(), followers.clone());
        async move {
            let url = format!("http://{}/v1/rooms/{room}/status", f[c % f.len()]);
            let r = h
                .get(&url)
                .header(
                    "authorization",
                    format!("Ticket {}", t[(c + i as usize) % t.len()]),
                )
                .send()
                .await
                .map_err(|e| e.to_string())?;
            answered(&r)
        }
    })
    .await
}

/// Closed-loop joins on the hot room by `clients` clients, with the CPU each process used.
async fn join_step(
    sluice: &SluiceCluster,
    visitors: &[pb::sluice::visitor_client::VisitorClient<tonic::transport::Channel>],
    name: &str,
    clients: usize,
    d: Duration,
) -> Stats {
    let before = CpuUse::now(sluice);
    closed_loop(name, clients, d, sluice_join_op(visitors.to_vec(), "hot"))
        .await
        .cpu_between(&before, &CpuUse::now(sluice))
}

/// The hot room of the join steps: every join admitted at once (a joined and an admitted
/// record in the ledger).
fn hot_room() -> Value {
    json!({"capacity": 10_000_000, "admit_per_minute": 60_000_000, "admit_burst": 1_000_000, "max_waiting": 10_000_000, "session_ttl_secs": 3600})
}

/// Join throughput on the hot room with the admission ledger kept and not kept: each round
/// starts a fresh cluster of each kind (kept first, then not), runs a join step at the largest
/// client count, and stops it; the report holds every run and the ratio of the means.
async fn ledger_ab(opts: &BenchOpts, d: Duration) -> Result<Value> {
    let clients = opts.client_steps.iter().copied().max().unwrap_or(256);
    let (mut kept, mut not_kept) = (Vec::new(), Vec::new());
    let mut steps = Vec::new();
    for round in 0..LEDGER_ROUNDS {
        for keep in [true, false] {
            let dir = opts.dir.join(format!("ledger-{keep}-{round}"));
            let sluice =
                SluiceCluster::start_with(&dir, 3, &format!("[ledger]\nenabled = {keep}\n"))
                    .await?;
            put_room(&sluice, "hot", hot_room()).await?;
            let visitors = grpc_visitors(&sluice).await?;
            let name = format!(
                "sluice join, hot room (gRPC), ledger {}",
                if keep { "kept" } else { "not kept" }
            );
            let s = join_step(&sluice, &visitors, &name, clients, d).await;
            println!("{}", s.line());
            // The configuration took: records are there exactly when kept.
            let has = has_ledger(&sluice).await?;
            if has != keep {
                bail!(
                    "{name}: the node's ledger is {}",
                    if has { "kept" } else { "not kept" }
                );
            }
            if keep { &mut kept } else { &mut not_kept }.push(s.per_sec);
            steps.push(s);
            drop(sluice);
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let ratio = mean(&kept) / mean(&not_kept);
    println!(
        "summary: ledger kept {:.0} joins/s {kept:.0?}, not kept {:.0} {not_kept:.0?}: ratio {ratio:.3}",
        mean(&kept),
        mean(&not_kept)
    );
    Ok(json!({
        "clients": clients,
        "kept_per_sec": kept,
        "not_kept_per_sec": not_kept,
        "ratio": ratio,
        "steps": steps,
    }))
}

/// Whether node 1 keeps ledger records of the hot room (and has some).
async fn has_ledger(c: &SluiceCluster) -> Result<bool> {
    let url = format!("{}/v1/rooms/hot/ledger?limit=1", c.addrs[&1].url());
    let r = http_client().get(url).bearer_auth(TOKEN).send().await?;
    if !r.status().is_success() {
        return Ok(false);
    }
    let page: Value = r.json().await?;
    Ok(page["records"].as_array().is_some_and(|r| !r.is_empty()))
}

/// Rounds of the ledger step (a cluster with the ledger kept and one without in each).
const LEDGER_ROUNDS: usize = 3;

/// Open-loop joins on the hot room at half of `peak` joins/s, or at `rate` if given.
async fn half_peak(
    sluice: &SluiceCluster,
    visitors: &[pb::sluice::visitor_client::VisitorClient<tonic::transport::Channel>],
    peak: f64,
    rate: Option<u64>,
    d: Duration,
) -> Stats {
    let (name, rate) = match rate {
        Some(r) => (format!("sluice join at a set rate ({r}/s)"), r),
        None => {
            let half = (peak / 2.0) as u64;
            (format!("sluice join at half peak ({half}/s)"), half)
        }
    };
    join_at(sluice, visitors, &name, rate, d).await
}

/// Open-loop joins on the hot room at `rate` joins/s.
async fn join_at(
    sluice: &SluiceCluster,
    visitors: &[pb::sluice::visitor_client::VisitorClient<tonic::transport::Channel>],
    name: &str,
    rate: u64,
    d: Duration,
) -> Stats {
    let before = CpuUse::now(sluice);
    open_loop(
        name,
        rate.max(1),
        d,
        sluice_join_op(visitors.to_vec(), "hot"),
    )
    .await
    .cpu_between(&before, &CpuUse::now(sluice))
}

async fn steps_tickets(
    http: &reqwest::Client,
    addrs: &[String],
    room: &str,
    n: usize,
) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for i in 0..n {
        let v: Value = http
            .post(format!(
                "http://{}/v1/rooms/{room}/join",
                addrs[i % addrs.len()]
            ))
            .send()
            .await?
            .json()
            .await?;
        out.push(v["ticket"].as_str().unwrap_or_default().to_string());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The schedule, not the answers, starts operations: at 100/s for a second, operations that
    /// each take 300 ms are 30 at a time in flight, all 100 run, and each one's latency is its
    /// own 300 ms counted from its scheduled start. (Tokio's clock is paused: it jumps to the
    /// next timer whenever every task waits, so the figures are exact.)
    #[tokio::test(start_paused = true)]
    async fn open_loop_starts_operations_on_schedule_whatever_the_latency() {
        let now = Arc::new(AtomicU64::new(0));
        let most = Arc::new(AtomicU64::new(0));
        let (n, m) = (now.clone(), most.clone());
        let stats = open_loop("test", 100, Duration::from_secs(1), move |_, k| {
            let (n, m) = (n.clone(), m.clone());
            async move {
                m.fetch_max(n.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(300)).await;
                n.fetch_sub(1, Ordering::SeqCst);
                if k == 7 {
                    Err("refused".to_string())
                } else {
                    Ok(0)
                }
            }
        })
        .await;
        assert_eq!(stats.ops, 99);
        assert_eq!(stats.errors, BTreeMap::from([("refused".to_string(), 1)]));
        assert_eq!(most.load(Ordering::SeqCst), 30);
        assert!((300.0..302.0).contains(&stats.p50_ms), "{stats:?}");
        assert!((300.0..302.0).contains(&stats.max_ms), "{stats:?}");
        assert_eq!(stats.start_lag_p99_ms, Some(0.0));
        assert!(stats.line().contains("start lag p99 0.00 ms"));
        // The step lasts its second plus the last operation's 300 ms, not 100 × 300 ms.
        assert!((1.29..1.32).contains(&stats.seconds), "{stats:?}");
    }

    #[test]
    fn cpu_ticks_count_this_process_working() {
        let me = std::process::id();
        let start = cpu_ticks(me);
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut x = 0u64;
        while cpu_ticks(me) < start + 3 {
            for i in 0..100_000u64 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
            }
            assert!(Instant::now() < deadline, "30 ms of work never showed");
        }
        assert_ne!(x, 1);
        // No such process: nothing to count.
        assert_eq!(cpu_ticks(u32::MAX), 0);
    }
}
