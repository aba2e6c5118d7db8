//! `sluice-jepsen`: run fault-injection tests against real Sluice nodes.
//!
//! - `run --workload W --faults F,F --nodes N --time S --seed X --out DIR`: one test.
//! - `smoke --out DIR`: the short set CI runs.
//! - `matrix --out DIR [--time S] [--nodes 3,5]`: every fault × workload; writes a table.
//! - `liveness-etcd --faults F,F --nodes N --time S --seed X`: etcd under the same partition
//!   faults and schedule, with the liveness figures every run reports.
//!
//! Exits non-zero if any checker finds a violation; the summary names the checker, the
//! operations involved and the seed.

use anyhow::{bail, Result};
use clap::{Parser, Subcommand};
use sluice_jepsen::db::NodeAuth;
use sluice_jepsen::nemesis::Fault;
use sluice_jepsen::runner::{run, Spec, Summary};
use sluice_jepsen::workload::Workload;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Parser)]
#[command(
    name = "sluice-jepsen",
    about = "Fault-injection tests for Sluice clusters (run as root)"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// One test.
    Run {
        #[arg(long, default_value = "queue-append")]
        workload: String,
        /// Comma-separated faults, or `all` / `none`.
        #[arg(long, default_value = "all")]
        faults: String,
        #[arg(long, default_value_t = 3)]
        nodes: u64,
        /// Seconds of workload.
        #[arg(long, default_value_t = 60)]
        time: u64,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        #[arg(long, default_value_t = 6)]
        workers: usize,
        #[arg(long, default_value = "jepsen-results/run")]
        out: PathBuf,
        /// How the nodes authenticate each other: `secret` (a cluster secret) or `tls`
        /// (mutual TLS with a CA made for the run).
        #[arg(long, default_value = "secret")]
        auth: String,
        /// Mount the data directories on sluice-lazyfs even if no fault drops unsynced writes
        /// (to measure what it costs; `kill-lose-unsynced` always mounts them).
        #[arg(long)]
        lazyfs: bool,
        /// Send node-to-node traffic through the link proxy even if no fault needs it (to
        /// measure what it costs; the link faults always do).
        #[arg(long)]
        proxy: bool,
        /// The nodes' `[raft] pre_vote`: `on` (their default) or `off`.
        #[arg(long, default_value = "on")]
        pre_vote: String,
        /// Seconds each fault is held.
        #[arg(long, default_value_t = 6)]
        hold: u64,
        /// Seconds of quiet before each fault.
        #[arg(long, default_value_t = 3)]
        quiet: u64,
    },
    /// etcd (Debian's `etcd`, one member in each node's network namespace) under the partition
    /// faults of `run`, with the same seeded schedule, and a load of puts of new keys: the same
    /// liveness figures as a Sluice run's, for comparison.
    LivenessEtcd {
        /// Comma-separated partition faults (isolate-one, isolate-leader, majority-minority,
        /// bridge, majorities-ring).
        #[arg(long, default_value = "majorities-ring")]
        faults: String,
        #[arg(long, default_value_t = 5)]
        nodes: u64,
        /// Seconds of workload.
        #[arg(long, default_value_t = 30)]
        time: u64,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        #[arg(long, default_value_t = 6)]
        workers: usize,
        /// Seconds each fault is held.
        #[arg(long, default_value_t = 6)]
        hold: u64,
        /// Seconds of quiet before each fault.
        #[arg(long, default_value_t = 3)]
        quiet: u64,
        /// etcd's `--pre-vote`: `on` or `off` (etcd 3.4's default).
        #[arg(long, default_value = "off")]
        pre_vote: String,
        #[arg(long, default_value = "jepsen-results/liveness-etcd")]
        out: PathBuf,
    },
    /// The short set CI runs: a few fault kinds, each for about a minute or less.
    Smoke {
        #[arg(long, default_value = "jepsen-results/smoke")]
        out: PathBuf,
        /// Seconds per test.
        #[arg(long, default_value_t = 40)]
        time: u64,
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// The load generator: Sluice against etcd and hello-world on this machine.
    Bench {
        /// Seconds per throughput step.
        #[arg(long, default_value_t = 10)]
        secs: u64,
        /// Waiters for the memory and restart figures.
        #[arg(long, default_value_t = 1_000_000)]
        waiters: u64,
        /// Client counts for the joins-against-clients table.
        #[arg(long, default_value = "1,16,64,256")]
        clients: String,
        #[arg(long, default_value = "bench-results")]
        out: PathBuf,
        /// Run only some steps: `joins` (Sluice joins and the half-peak latency), `memory`
        /// (memory with the waiters, restart, failover), `reads` (hello-world, gate checks,
        /// follower status reads), `ledger` (joins at the largest client count with the
        /// admission ledger kept and not kept, three fresh clusters of each) or `etcd` (the
        /// etcd anchors alone: joins with a room per client at 64 clients, puts at 256).
        #[arg(long)]
        only: Option<String>,
        /// Run the open-loop latency step at this many joins/s instead of half the measured
        /// peak, to compare two builds at the same load.
        #[arg(long)]
        rate: Option<u64>,
    },
    /// Every fault × workload, for each node count; the runs alternate between the two
    /// node-to-node authentications (a cluster secret, mutual TLS).
    Matrix {
        #[arg(long, default_value = "jepsen-results/matrix")]
        out: PathBuf,
        #[arg(long, default_value_t = 60)]
        time: u64,
        #[arg(long, default_value = "3,5")]
        nodes: String,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Comma-separated faults, each run on its own with every workload (or `all`).
        #[arg(long, default_value = "all")]
        faults: String,
    },
}

fn parse_faults(s: &str) -> Result<Vec<Fault>> {
    match s {
        "all" => Ok(Fault::ALL.to_vec()),
        "none" | "" => Ok(vec![]),
        _ => s
            .split(',')
            .map(|f| Fault::parse(f.trim()).ok_or_else(|| anyhow::anyhow!("unknown fault {f:?}")))
            .collect(),
    }
}

fn spec(
    name: String,
    workload: Workload,
    faults: Vec<Fault>,
    nodes: u64,
    time: u64,
    seed: u64,
    out: PathBuf,
) -> Spec {
    Spec {
        name,
        nodes,
        faults,
        workload,
        duration: Duration::from_secs(time),
        seed,
        workers: 6,
        fault_hold: Duration::from_secs(6),
        quiet: Duration::from_secs(3),
        out,
        auth: NodeAuth::Secret,
        lazyfs: false,
        pre_vote: true,
        proxy: false,
    }
}

fn on_off(flag: &str, s: &str) -> Result<bool> {
    match s {
        "on" | "true" => Ok(true),
        "off" | "false" => Ok(false),
        _ => bail!("{flag} takes on or off, not {s:?}"),
    }
}

/// The `i`-th run's node-to-node authentication: the runs of a set take turns.
fn alternate(i: usize) -> NodeAuth {
    if i.is_multiple_of(2) {
        NodeAuth::Secret
    } else {
        NodeAuth::MutualTls
    }
}

fn report(s: &Summary) -> String {
    let mut line = format!(
        "{:<40} {:<13} nodes={} auth={}{} seed={} ok={} fail={} info={} faults={} snapshots_installed={} {}",
        s.name,
        s.workload,
        s.nodes,
        s.auth,
        if s.pre_vote { "" } else { " pre_vote=off" },
        s.seed,
        s.ok,
        s.fail,
        s.info,
        s.nemesis.len(),
        s.snapshots_installed,
        if s.valid { "VALID" } else { "INVALID" }
    );
    for l in s.liveness.lines() {
        line.push_str(&format!("\n    {l}"));
    }
    for c in s.checks.iter().filter(|c| !c.valid) {
        line.push_str(&format!("\n    {} violated: {}", c.checker, c.detail));
        for op in &c.ops {
            line.push_str(&format!("\n      {op}"));
        }
        line.push_str(&format!(
            "\n    replay: sluice-jepsen run --workload {} --faults {} --nodes {} --seed {} --auth {}{}",
            s.workload,
            s.faults.join(","),
            s.nodes,
            s.seed,
            s.auth,
            if s.pre_vote { "" } else { " --pre-vote off" }
        ));
    }
    line
}

async fn run_all(specs: Vec<Spec>, out: &PathBuf) -> Result<()> {
    std::fs::create_dir_all(out)?;
    let mut summaries = Vec::new();
    for s in specs {
        let summary = match run(&s).await {
            Ok(sum) => sum,
            Err(e) => bail!("{}: the run itself failed: {e:#}", s.name),
        };
        println!("{}", report(&summary));
        summaries.push(summary);
    }
    let table: String = summaries
        .iter()
        .map(|s| {
            format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
                s.name,
                s.workload,
                s.faults.join(", "),
                s.nodes,
                s.auth,
                s.ok + s.fail + s.info,
                s.nemesis.len(),
                s.snapshots_installed,
                if s.valid { "valid" } else { "INVALID" }
            )
        })
        .collect();
    std::fs::write(out.join("summary.md"), format!("| test | workload | faults | nodes | auth | ops | faults applied | snapshots installed | verdict |\n|---|---|---|---|---|---|---|---|---|\n{table}"))?;
    std::fs::write(
        out.join("summary.json"),
        serde_json::to_string_pretty(&summaries)?,
    )?;
    if summaries.iter().any(|s| !s.valid) {
        bail!("violations found; see {}/summary.json", out.display());
    }
    Ok(())
}

/// Listens for SIGINT and SIGTERM from now on (their default action, ending the process at
/// once, no longer applies); the future names the first to come.
fn stop_signal() -> std::io::Result<impl std::future::Future<Output = &'static str>> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut int = signal(SignalKind::interrupt())?;
    let mut term = signal(SignalKind::terminate())?;
    Ok(async move {
        tokio::select! {
            _ = int.recv() => "SIGINT",
            _ = term.recv() => "SIGTERM",
        }
    })
}

#[tokio::main]
async fn main() -> Result<()> {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Run {
            workload,
            faults,
            nodes,
            time,
            seed,
            workers,
            out,
            auth,
            lazyfs,
            proxy,
            pre_vote,
            hold,
            quiet,
        } => {
            let w = Workload::parse(&workload)
                .ok_or_else(|| anyhow::anyhow!("unknown workload {workload:?}"))?;
            let mut s = spec(
                format!("{workload}-{faults}-n{nodes}"),
                w,
                parse_faults(&faults)?,
                nodes,
                time,
                seed,
                out.clone(),
            );
            s.workers = workers;
            s.lazyfs = lazyfs;
            s.proxy = proxy;
            s.pre_vote = on_off("--pre-vote", &pre_vote)?;
            s.fault_hold = Duration::from_secs(hold);
            s.quiet = Duration::from_secs(quiet);
            s.auth = NodeAuth::parse(&auth)
                .ok_or_else(|| anyhow::anyhow!("--auth takes secret or tls, not {auth:?}"))?;
            run_all(
                vec![s],
                &out.parent()
                    .map(PathBuf::from)
                    .unwrap_or_else(|| out.clone()),
            )
            .await
        }
        Cmd::LivenessEtcd {
            faults,
            nodes,
            time,
            seed,
            workers,
            hold,
            quiet,
            pre_vote,
            out,
        } => {
            let spec = sluice_jepsen::etcd::EtcdSpec {
                nodes,
                faults: parse_faults(&faults)?,
                duration: Duration::from_secs(time),
                seed,
                workers,
                fault_hold: Duration::from_secs(hold),
                quiet: Duration::from_secs(quiet),
                pre_vote: on_off("--pre-vote", &pre_vote)?,
                out,
            };
            // On Ctrl-C or SIGTERM the run is dropped, and with it the etcd members and the
            // network.
            let stop = stop_signal()?;
            let summary = tokio::select! {
                r = sluice_jepsen::etcd::run(&spec) => r?,
                sig = stop => anyhow::bail!("interrupted by {sig}: the etcd members were stopped"),
            };
            println!(
                "{:<40} etcd nodes={} pre_vote={} seed={} ok={} fail={} info={} faults={}",
                summary.name,
                summary.nodes,
                if summary.pre_vote { "on" } else { "off" },
                summary.seed,
                summary.ok,
                summary.fail,
                summary.info,
                summary.nemesis.len()
            );
            for l in summary.liveness.lines() {
                println!("    {l}");
            }
            Ok(())
        }
        Cmd::Smoke { out, time, seed } => {
            let set = [
                (
                    "",
                    Workload::QueueAppend,
                    vec![
                        Fault::IsolateLeader,
                        Fault::MajorityMinority,
                        Fault::KillLeader,
                    ],
                ),
                (
                    "",
                    Workload::Admission,
                    vec![Fault::Kill, Fault::Pause, Fault::Clock],
                ),
                (
                    "",
                    Workload::Lottery,
                    vec![Fault::Loss, Fault::KillAll, Fault::Membership],
                ),
                (
                    "",
                    Workload::Lanes,
                    vec![Fault::KillLeader, Fault::MajorityMinority],
                ),
                (
                    "",
                    Workload::Phases,
                    vec![Fault::KillLeader, Fault::Clock, Fault::Pause],
                ),
                (
                    "-lose-unsynced",
                    Workload::QueueAppend,
                    vec![Fault::KillLoseUnsynced],
                ),
            ];
            let specs = set
                .into_iter()
                .enumerate()
                .map(|(i, (suffix, w, f))| {
                    let name = format!("smoke-{}{suffix}", w.name());
                    let mut s = spec(name.clone(), w, f, 3, time, seed, out.join(name));
                    s.auth = alternate(i);
                    s
                })
                .collect();
            run_all(specs, &out).await
        }
        Cmd::Bench {
            secs,
            waiters,
            clients,
            out,
            only,
            rate,
        } => {
            let only = match only.as_deref() {
                None => sluice_jepsen::bench::Steps::All,
                Some("joins") => sluice_jepsen::bench::Steps::Joins,
                Some("memory") => sluice_jepsen::bench::Steps::Memory,
                Some("reads") => sluice_jepsen::bench::Steps::Reads,
                Some("ledger") => sluice_jepsen::bench::Steps::Ledger,
                Some("etcd") => sluice_jepsen::bench::Steps::Etcd,
                Some(o) => {
                    anyhow::bail!("--only takes joins, memory, reads, ledger or etcd, not {o}")
                }
            };
            let opts = sluice_jepsen::bench::BenchOpts {
                secs,
                waiters,
                client_steps: clients
                    .split(',')
                    .filter_map(|c| c.trim().parse().ok())
                    .collect(),
                dir: out.join("data"),
                only,
                rate,
            };
            // On Ctrl-C or SIGTERM the run is dropped, and with it every process it started
            // (nodes, etcd, hello-world), so that none is left running. The handlers are in
            // place before the first process starts.
            let stop = stop_signal()?;
            let report = tokio::select! {
                r = sluice_jepsen::bench::run(&opts) => r?,
                sig = stop => {
                    anyhow::bail!("interrupted by {sig}: the benchmark's processes were stopped")
                }
            };
            std::fs::write(
                out.join("report.json"),
                serde_json::to_string_pretty(&report)?,
            )?;
            // Keep the nodes' logs and metrics; drop their data.
            for cluster in ["sluice", "sluice-memory"] {
                let Ok(files) = std::fs::read_dir(out.join("data").join(cluster)) else {
                    continue;
                };
                for e in files.flatten() {
                    if e.path()
                        .extension()
                        .is_some_and(|x| x == "log" || x == "txt")
                    {
                        let name = format!("{cluster}-{}", e.file_name().to_string_lossy());
                        std::fs::copy(e.path(), out.join(name))?;
                    }
                }
            }
            let _ = std::fs::remove_dir_all(out.join("data"));
            Ok(())
        }
        Cmd::Matrix {
            out,
            time,
            nodes,
            seed,
            faults,
        } => {
            let faults = parse_faults(&faults)?;
            let mut specs = Vec::new();
            for n in nodes
                .split(',')
                .filter_map(|n| n.trim().parse::<u64>().ok())
            {
                for w in [
                    Workload::QueueAppend,
                    Workload::Admission,
                    Workload::Lottery,
                    Workload::Lanes,
                    Workload::Phases,
                ] {
                    for &f in &faults {
                        let name = format!("{}-{}-n{n}", w.name(), f.name());
                        let mut s = spec(name.clone(), w, vec![f], n, time, seed, out.join(name));
                        s.auth = alternate(specs.len());
                        specs.push(s);
                    }
                }
            }
            run_all(specs, &out).await
        }
    }
}
