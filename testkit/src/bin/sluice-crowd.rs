//! `sluice-crowd`: a crowd of waiting pages against a Sluice cluster on this machine, in
//! several processes (each process's open files are capped), with what each visitor saw added
//! up, the moment each admission was applied read from the room's ledger, and the nodes'
//! memory and CPU sampled while it runs. See BENCHMARKS.md ("The crowd") for the runs.

use anyhow::{bail, Context, Result};
use clap::Parser;
use serde_json::{json, Value};
use sluice_testkit::crowd::{self, Listen, Plan, Polls, Summary, VisitorRecord};
use sluice_testkit::node::{self, Addrs};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::time::Instant;

#[derive(Parser, Debug)]
#[command(about = "A crowd of waiting pages against a Sluice cluster on loopback")]
struct Args {
    /// The nodes' URLs, comma-separated (`http://127.0.0.1:8080,...`); or use --cluster.
    #[arg(long, value_delimiter = ',')]
    nodes: Vec<String>,
    /// Start this many nodes on loopback (RocksDB under --dir) instead of using --nodes.
    #[arg(long)]
    cluster: Option<u64>,
    /// Where a started cluster keeps its data and logs (a fresh directory).
    #[arg(long, default_value = "crowd-run")]
    dir: PathBuf,
    /// The `sluice` binary a started cluster runs (default: next to this one).
    #[arg(long)]
    sluice: Option<PathBuf>,
    /// TOML appended to each started node's configuration (its `[limits]` first, if any).
    #[arg(long)]
    node_config: Option<PathBuf>,
    /// The operator token (a started cluster's is this one).
    #[arg(long, default_value = "crowd-operator-token-of-32-characters")]
    token: String,
    #[arg(long, default_value = "crowd")]
    room: String,
    /// The room's configuration (JSON body of `PUT /v1/rooms/{room}`); the room is created
    /// with it before the crowd arrives. Without it, the room must exist.
    #[arg(long)]
    room_config: Option<String>,
    /// Visitors in all.
    #[arg(long, default_value_t = 1000)]
    visitors: usize,
    /// Processes that share them (each holds at most 19,000 event streams, or 400,000 visitors
    /// that poll or only join).
    #[arg(long, default_value_t = 1)]
    procs: usize,
    /// Joins spread over this many seconds.
    #[arg(long, default_value_t = 10)]
    arrive_secs: u64,
    /// Then this many new visitors a minute, until the end (in all, over the processes).
    #[arg(long, default_value_t = 0)]
    joins_per_minute: u64,
    /// The crowd stops after this many seconds.
    #[arg(long, default_value_t = 60)]
    duration_secs: u64,
    /// `events` (hold the event stream), `poll` (poll status at the room's cadence) or `join`
    /// (only join: the opening minute).
    #[arg(long, default_value = "events")]
    listen: String,
    /// Every request on a new connection, closed after it (browsers arriving).
    #[arg(long)]
    fresh_connections: bool,
    /// Fetch and solve each visitor's proof-of-work challenge before the crowd starts, and join
    /// with the solution (the room's rule must ask for one).
    #[arg(long)]
    pow: bool,
    /// An admitted visitor stays between these many seconds, `MIN-MAX`.
    #[arg(long, default_value = "5-30")]
    session_secs: String,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Write every visitor's record here (JSON lines).
    #[arg(long)]
    records: Option<PathBuf>,
    /// Write the summary here too (JSON).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Internal: run one process's share, its plan on standard input.
    #[arg(long, hide = true)]
    worker: bool,
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    crowd::raise_open_files();
    if args.worker {
        return worker().await;
    }
    if args.visitors > crowd::VISITORS_MAX {
        bail!("at most {} visitors", crowd::VISITORS_MAX);
    }
    let duration = Duration::from_secs(args.duration_secs);
    if duration > crowd::DURATION_MAX {
        bail!("at most {} s", crowd::DURATION_MAX.as_secs());
    }
    let mut cluster = match args.cluster {
        Some(n) => Some(Cluster::start(&args, n).await?),
        None => None,
    };
    let nodes = match &cluster {
        Some(c) => c.urls(),
        None => args.nodes.clone(),
    };
    if nodes.is_empty() {
        bail!("no nodes: give --nodes or --cluster");
    }
    let http = reqwest::Client::new();
    if let Some(cfg) = &args.room_config {
        put_room(&http, &nodes[0], &args.token, &args.room, cfg).await?;
    }
    let sampler = cluster
        .as_ref()
        .map(|c| c.sample_every(Duration::from_secs(2), duration));
    let started = Instant::now();
    let (records, polls) = run_workers(&args, &nodes, duration).await?;
    let wall = started.elapsed();
    let samples = match sampler {
        Some(s) => s.await.unwrap_or_default(),
        None => Vec::new(),
    };
    let applied = admissions_applied(&http, &nodes[0], &args.token, &args.room).await;
    let report = report(&records, &polls, &applied, &samples, wall);
    println!("{}", serde_json::to_string_pretty(&report)?);
    if let Some(p) = &args.out {
        std::fs::write(p, serde_json::to_string_pretty(&report)?)?;
    }
    if let Some(p) = &args.records {
        let mut f = std::io::BufWriter::new(std::fs::File::create(p)?);
        for r in &records {
            writeln!(f, "{}", serde_json::to_string(r)?)?;
        }
    }
    if let Some(c) = cluster.as_mut() {
        c.stop();
    }
    Ok(())
}

/// One process's share: its plan from standard input; to standard output its polls' counts,
/// then its records, a line each.
async fn worker() -> Result<()> {
    let mut line = String::new();
    std::io::stdin().read_line(&mut line)?;
    let plan: Plan = serde_json::from_str(&line).context("the plan")?;
    let (records, polls) = crowd::run(plan).await.map_err(anyhow::Error::msg)?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    writeln!(out, "{}", serde_json::to_string(&polls)?)?;
    for r in records {
        writeln!(out, "{}", serde_json::to_string(&r)?)?;
    }
    Ok(())
}

/// The plans of `args.procs` processes: visitors and source addresses shared out in turn.
fn plans(args: &Args, nodes: &[String], duration: Duration) -> Result<Vec<Plan>> {
    let listen = match args.listen.as_str() {
        "events" => Listen::Events,
        "poll" => Listen::Poll,
        "join" => Listen::Join,
        other => bail!("--listen is events, poll or join, not {other}"),
    };
    let (lo, hi) = args
        .session_secs
        .split_once('-')
        .and_then(|(a, b)| Some((a.parse::<u64>().ok()?, b.parse::<u64>().ok()?)))
        .context("--session-secs is MIN-MAX")?;
    let procs = args.procs.clamp(1, usize::from(crowd::SOURCES_MAX));
    let per_sources = crowd::SOURCES_MAX as usize / procs;
    let mut first = 0;
    let mut out = Vec::new();
    for p in 0..procs {
        let visitors = args.visitors / procs + usize::from(p < args.visitors % procs);
        out.push(Plan {
            nodes: nodes.to_vec(),
            room: args.room.clone(),
            visitors,
            first,
            arrive_over: Duration::from_secs(args.arrive_secs),
            then_per_minute: args.joins_per_minute / procs as u64
                + u64::from((p as u64) < args.joins_per_minute % procs as u64),
            duration,
            listen,
            session: (Duration::from_secs(lo), Duration::from_secs(hi)),
            sources: (2 + (p * per_sources) as u8, per_sources as u8),
            seed: args.seed.wrapping_add(p as u64),
            fresh_connections: args.fresh_connections,
            pow: args.pow,
        });
        first += out.last().map_or(visitors, Plan::total);
    }
    for p in &out {
        p.check().map_err(anyhow::Error::msg)?;
    }
    Ok(out)
}

/// Runs the worker processes and gathers their records and polls; none outlives the crowd's
/// time by more than a minute, or five with `--pow` (they are killed then, and when this
/// process ends).
async fn run_workers(
    args: &Args,
    nodes: &[String],
    duration: Duration,
) -> Result<(Vec<VisitorRecord>, Polls)> {
    let exe = std::env::current_exe()?;
    let mut children = Vec::new();
    for plan in plans(args, nodes, duration)? {
        let mut child = tokio::process::Command::new(&exe)
            .arg("--worker")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let mut stdin = child.stdin.take().context("a worker's stdin")?;
        stdin
            .write_all(format!("{}\n", serde_json::to_string(&plan)?).as_bytes())
            .await?;
        drop(stdin);
        children.push(child);
    }
    let gather = children.into_iter().map(|mut child| async move {
        let stdout = child.stdout.take().context("a worker's stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        let mut recs = Vec::new();
        let mut polls = Polls::default();
        if let Some(line) = lines.next_line().await? {
            polls = serde_json::from_str::<Polls>(&line)?;
        }
        while let Some(line) = lines.next_line().await? {
            recs.push(serde_json::from_str::<VisitorRecord>(&line)?);
        }
        let status = child.wait().await?;
        if !status.success() {
            bail!("a worker ended with {status}");
        }
        Ok::<_, anyhow::Error>((recs, polls))
    });
    let slack = Duration::from_secs(if args.pow { 300 } else { 60 });
    let all = tokio::time::timeout(duration + slack, futures::future::try_join_all(gather))
        .await
        .context("the workers did not end in time after the crowd's")??;
    let mut polls = Polls::default();
    let mut records = Vec::new();
    for (r, p) in all {
        records.extend(r);
        polls.add(&p);
    }
    Ok((records, polls))
}

async fn put_room(
    http: &reqwest::Client,
    node: &str,
    token: &str,
    room: &str,
    cfg: &str,
) -> Result<()> {
    let body: Value = serde_json::from_str(cfg).context("--room-config is JSON")?;
    let r = http
        .put(format!("{node}/v1/rooms/{room}"))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await?;
    if !r.status().is_success() {
        bail!(
            "creating the room: {} {}",
            r.status(),
            r.text().await.unwrap_or_default()
        );
    }
    Ok(())
}

/// When each visitor's admission was applied (its ledger record's log time), by visitor id;
/// empty when the node keeps no ledger.
async fn admissions_applied(
    http: &reqwest::Client,
    node: &str,
    token: &str,
    room: &str,
) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    let mut after: Option<String> = None;
    // Bounded: 100,000 pages of 1,000 records.
    for _ in 0..100_000 {
        let mut q = vec![("limit", "1000".to_string()), ("consistent", "true".into())];
        q.extend(after.clone().map(|a| ("after", a)));
        let Ok(r) = http
            .get(format!("{node}/v1/rooms/{room}/ledger"))
            .bearer_auth(token)
            .query(&q)
            .send()
            .await
        else {
            break;
        };
        let Ok(page) = r.json::<Value>().await else {
            break;
        };
        for rec in page["records"].as_array().into_iter().flatten() {
            if rec["kind"] == "admitted" {
                if let (Some(v), Some(t)) = (rec["visitor_id"].as_str(), rec["time_ms"].as_u64()) {
                    out.entry(v.to_string()).or_insert(t);
                }
            }
        }
        match page["next"].as_str() {
            Some(n) => after = Some(n.to_string()),
            None => break,
        }
    }
    out
}

/// The run's figures: the crowd's summary, how long after it was applied each admission
/// reached its visitor, and the nodes' samples.
fn report(
    records: &[VisitorRecord],
    polls: &Polls,
    applied: &BTreeMap<String, u64>,
    samples: &[Value],
    wall: Duration,
) -> Value {
    let summary: Summary = crowd::summarize(records);
    let mut told_after: Vec<f64> = records
        .iter()
        .filter(|r| r.joined.as_deref() == Some("waiting"))
        .filter_map(|r| Some(r.admitted_at_ms? as f64 - *applied.get(&r.visitor_id)? as f64))
        .collect();
    told_after.sort_by(f64::total_cmp);
    let unmatched = records
        .iter()
        .filter(|r| r.joined.as_deref() == Some("waiting") && r.admitted_at_ms.is_some())
        .filter(|r| !applied.contains_key(&r.visitor_id))
        .count();
    json!({
        "wall_secs": wall.as_secs_f64(),
        "summary": summary,
        "admissions_in_ledger": applied.len(),
        "admission_told_after_applied_ms": {
            "count": told_after.len(),
            "p50": crowd::quantile(&told_after, 0.5),
            "p99": crowd::quantile(&told_after, 0.99),
            "max": told_after.last().copied().unwrap_or(0.0),
            "admitted_waiters_without_a_ledger_record": unmatched,
        },
        "polls": {
            "answered": polls.total(),
            "per_second_peak": polls.per_second.iter().max().copied().unwrap_or(0),
            "per_second_mean_while_any": busy_mean(&polls.per_second),
            "p50_ms": polls.quantile_ms(0.5),
            "p99_ms": polls.quantile_ms(0.99),
            "max_ms": polls.quantile_ms(1.0),
            "per_second": polls.per_second,
        },
        "samples": samples,
    })
}

/// The mean of the counts that are not zero (0 if none is).
fn busy_mean(per_second: &[u64]) -> f64 {
    let busy: Vec<u64> = per_second.iter().copied().filter(|n| *n > 0).collect();
    busy.iter().sum::<u64>() as f64 / busy.len().max(1) as f64
}

/// A cluster this run started: `sluice serve` processes on loopback.
struct Cluster {
    addrs: BTreeMap<u64, Addrs>,
    children: BTreeMap<u64, std::process::Child>,
}

impl Cluster {
    async fn start(args: &Args, n: u64) -> Result<Self> {
        if !(1..=5).contains(&n) {
            bail!("--cluster is 1 to 5 nodes");
        }
        let bin = match &args.sluice {
            Some(b) => b.clone(),
            None => std::env::current_exe()?.with_file_name("sluice"),
        };
        let extra = match &args.node_config {
            Some(p) => std::fs::read_to_string(p)?,
            None => String::new(),
        };
        std::fs::create_dir_all(&args.dir)?;
        let dir = std::fs::canonicalize(&args.dir)?;
        let addrs: BTreeMap<u64, Addrs> = (1..=n).map(|id| (id, Addrs::loopback())).collect();
        let mut c = Cluster {
            addrs,
            children: BTreeMap::new(),
        };
        for id in 1..=n {
            let data = dir.join(format!("n{id}"));
            if data.exists() {
                bail!("{} exists: give a fresh --dir", data.display());
            }
            let cfg = format!(
                "{head}{peers}[tokens]\njwt_seed = \"Y3Jvd2Qtand0LXNlZWQtb2YtZXhhY3RseS0zMmJ5dGU=\"\n\
                 draw_secret = \"Y3Jvd2QtZHJhdy1zZWNyZXQtb2YtZXhhY3RseS0zMmI=\"\n\
                 ticket_keys = [{{ id = \"c\", secret = \"Y3Jvd2QtdGlja2V0LXNlY3JldC1vZi0zMi1ieXRlcyE=\" }}]\n{extra}",
                head = node::node_toml(id, &data, &c.addrs[&id], id == 1, &args.token),
                peers = node::peers_toml(&c.addrs),
            );
            let path = dir.join(format!("n{id}.toml"));
            std::fs::write(&path, cfg)?;
            let log = std::fs::File::create(dir.join(format!("n{id}.log")))?;
            let mut cmd = std::process::Command::new(&bin);
            cmd.args(["serve", "--config"])
                .arg(&path)
                .env("RUST_LOG", node::NODE_LOG)
                .stderr(log);
            let child =
                node::spawn_listening(cmd, &format!("node {id}")).map_err(anyhow::Error::msg)?;
            c.children.insert(id, child);
        }
        let urls = c.addrs.iter().map(|(id, a)| (*id, a.url()));
        node::wait_ready(&reqwest::Client::new(), urls, Duration::from_secs(60))
            .await
            .map_err(anyhow::Error::msg)?;
        Ok(c)
    }

    fn urls(&self) -> Vec<String> {
        self.addrs.values().map(Addrs::url).collect()
    }

    /// Samples each node's resident memory and CPU time, and the kernel's TCP socket memory,
    /// every `every` for `within`.
    fn sample_every(
        &self,
        every: Duration,
        within: Duration,
    ) -> tokio::task::JoinHandle<Vec<Value>> {
        let pids: BTreeMap<u64, u32> = self.children.iter().map(|(id, c)| (*id, c.id())).collect();
        tokio::spawn(async move {
            let start = Instant::now();
            let mut out = Vec::new();
            while start.elapsed() < within {
                let nodes: BTreeMap<String, Value> = pids
                    .iter()
                    .map(|(id, pid)| {
                        (
                            id.to_string(),
                            json!({ "rss_bytes": rss(*pid), "cpu_secs": cpu_secs(*pid) }),
                        )
                    })
                    .collect();
                out.push(json!({
                    "t_secs": start.elapsed().as_secs_f64().round(),
                    "nodes": nodes,
                    "tcp_mem_bytes": tcp_mem_bytes(),
                }));
                tokio::time::sleep(every).await;
            }
            out
        })
    }

    fn stop(&mut self) {
        for c in self.children.values_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A process's resident memory, bytes (0 if it cannot be read).
fn rss(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .map_or(0, |kb| kb * 1024)
}

/// A process's CPU time (user and system), seconds, at 100 ticks a second.
fn cpu_secs(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            let rest = &s[s.rfind(')')? + 2..];
            let f: Vec<&str> = rest.split_whitespace().collect();
            Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
        })
        .map_or(0.0, |t| t as f64 / 100.0)
}

/// The kernel's memory for TCP sockets (`/proc/net/sockstat`, pages of 4 KiB), bytes.
fn tcp_mem_bytes() -> u64 {
    std::fs::read_to_string("/proc/net/sockstat")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("TCP:"))?;
            let f: Vec<&str> = line.split_whitespace().collect();
            let i = f.iter().position(|w| *w == "mem")?;
            f.get(i + 1)?.parse::<u64>().ok()
        })
        .map_or(0, |p| p * 4096)
}
