//! `sluice-cluster-sim`: runs seeded whole-cluster schedules and reports the ones whose history a checker
//! rejects. Exits non-zero if any did.

use clap::Parser;
use std::time::{Duration, Instant};

/// Seeded whole-cluster simulation: real Sluice nodes on a simulated network and clock, with
/// partitions, crashes that lose unsynced writes, clock steps and slow links, checked after each
/// schedule. A failing seed runs the same schedule again with `--seed S --schedules 1`.
#[derive(Parser, Debug)]
#[command(name = "sluice-cluster-sim", version)]
struct Args {
    /// Schedules to run (seeds `seed`, `seed + 1`, …).
    #[arg(long, default_value_t = 100)]
    schedules: u64,
    /// The first seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Voters.
    #[arg(long, default_value_t = 3)]
    nodes: u64,
    /// Client processes.
    #[arg(long, default_value_t = 4)]
    clients: usize,
    /// Simulated seconds the clients run for in each schedule.
    #[arg(long, default_value_t = 6.0)]
    time: f64,
    /// No faults (a baseline).
    #[arg(long)]
    no_faults: bool,
    /// Print every schedule's faults and verdicts, not only failing ones.
    #[arg(long)]
    verbose: bool,
    /// Put a known bug back into every node, to see the simulation find it.
    #[arg(long, value_parser = ["ack-before-sync", "leader-restore"])]
    broken: Option<String>,
    /// Write each failing schedule's history (JSON lines) into this directory.
    #[arg(long)]
    keep: Option<std::path::PathBuf>,
    /// Schedules run at once (default: one per CPU), each in a process of its own: a seed is
    /// the same schedule however many run at once and in whatever order.
    #[arg(long)]
    jobs: Option<usize>,
    /// Run the one schedule `--seed` and print its report as JSON (how the jobs run each
    /// schedule).
    #[arg(long, hide = true)]
    child: bool,
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "off".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    #[cfg(not(tokio_unstable))]
    if !args.child {
        eprintln!(
            "note: built without `--cfg tokio_unstable` (a RUSTFLAGS set in the environment \
replaces .cargo/config.toml's): tokio's choices are not seeded, so a seed may not replay exactly"
        );
    }
    if !(args.time > 0.0 && args.time <= 3_600.0) {
        anyhow::bail!("--time must be between 0 and 3600 seconds");
    }
    if !(1..=7).contains(&args.nodes) {
        anyhow::bail!("--nodes must be between 1 and 7");
    }
    if args.child {
        let report = sluice_cluster_sim::run(&config(&args, args.seed))?;
        serde_json::to_writer(std::io::stdout().lock(), &report)?;
        return Ok(());
    }
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .clamp(1, 64);
    let started = Instant::now();
    let (mut failed, mut simulated, mut ops) = (Vec::new(), Duration::ZERO, 0usize);
    let mut snapshots = (0, 0);
    let end = args.seed.saturating_add(args.schedules);
    let next = std::sync::atomic::AtomicU64::new(args.seed);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::scope(|scope| -> anyhow::Result<()> {
        for _ in 0..jobs {
            let (tx, next, args) = (tx.clone(), &next, &args);
            scope.spawn(move || loop {
                let seed = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if seed >= end {
                    return;
                }
                let report = in_a_process_of_its_own(args, seed);
                let stop = report.is_err();
                if tx.send((seed, report)).is_err() || stop {
                    // A schedule that could not run ends the whole run: no more seeds.
                    next.store(end, std::sync::atomic::Ordering::Relaxed);
                    return;
                }
            });
        }
        drop(tx);
        for (seed, report) in rx {
            let report = report?;
            simulated += report.simulated;
            ops += report.ok + report.failed + report.unknown;
            snapshots.0 += report.snapshots.0;
            snapshots.1 += report.snapshots.1;
            if !show(&args, seed, &report)? {
                failed.push(seed);
            }
        }
        Ok(())
    })?;
    failed.sort_unstable();
    let took = started.elapsed().as_secs_f64();
    println!(
        "{} schedules in {took:.1} s ({:.1} schedules/s), {:.0} s of cluster time simulated, {ops} operations, {} snapshots built and {} installed; {} invalid{}",
        args.schedules,
        args.schedules as f64 / took,
        simulated.as_secs_f64(),
        snapshots.0,
        snapshots.1,
        failed.len(),
        if failed.is_empty() {
            String::new()
        } else {
            format!(": seeds {failed:?}")
        }
    );
    if !failed.is_empty() {
        std::process::exit(1);
    }
    Ok(())
}

/// Runs schedule `seed` in a child process (`--child`). Everything a schedule's outcome depends
/// on is chosen by its seed, except for what its process did before: tokio numbers tasks from one
/// counter for the whole process, and the number of a crashed node's tasks decides the order in
/// which they are dropped, and so the order in which its connections' last messages leave. A
/// process of its own for each schedule leaves nothing to chance.
fn in_a_process_of_its_own(args: &Args, seed: u64) -> anyhow::Result<sluice_cluster_sim::Report> {
    use std::process::{Command, Stdio};
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.arg("--child")
        .args(["--seed", &seed.to_string()])
        .args(["--nodes", &args.nodes.to_string()])
        .args(["--clients", &args.clients.to_string()])
        .args(["--time", &args.time.to_string()]);
    if args.no_faults {
        cmd.arg("--no-faults");
    }
    if let Some(b) = &args.broken {
        cmd.args(["--broken", b]);
    }
    let out = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()?
        .wait_with_output()?;
    if !out.status.success() {
        anyhow::bail!("schedule {seed} could not run ({})", out.status);
    }
    Ok(serde_json::from_slice(&out.stdout)?)
}

/// Schedule `seed` as the arguments ask.
fn config(args: &Args, seed: u64) -> sluice_cluster_sim::Config {
    sluice_cluster_sim::Config {
        seed,
        nodes: args.nodes,
        clients: args.clients.clamp(1, 64),
        run_for: Duration::from_secs_f64(args.time),
        faults: !args.no_faults,
        broken: args.broken.as_deref().map(|b| match b {
            "ack-before-sync" => sluice_raft::Broken::AckBeforeSync,
            _ => sluice_raft::Broken::LeaderRestore,
        }),
    }
}

/// Prints a schedule's report if it failed (or with `--verbose`), and keeps a failing one's
/// history with `--keep`. Whether it was valid.
fn show(args: &Args, seed: u64, report: &sluice_cluster_sim::Report) -> anyhow::Result<bool> {
    let valid = report.valid();
    if !valid || args.verbose {
        println!(
            "seed {seed}: {} ({} ok, {} failed, {} unknown, {:.1} s simulated; fingerprint {:016x})",
            if valid { "valid" } else { "INVALID" },
            report.ok,
            report.failed,
            report.unknown,
            report.simulated.as_secs_f64(),
            report.fingerprint
        );
        for f in report.faults.iter().chain(&report.membership) {
            println!("    {f}");
        }
        println!(
            "    snapshots: {} built, {} installed",
            report.snapshots.0, report.snapshots.1
        );
        for v in &report.verdicts {
            println!("    {}: {} — {}", v.checker, v.valid, v.detail);
            for op in &v.ops {
                println!("        {op}");
            }
        }
    }
    if !valid {
        if let Some(dir) = &args.keep {
            std::fs::create_dir_all(dir)?;
            let path = dir.join(format!("seed-{seed}.jsonl"));
            std::fs::write(&path, sluice_jepsen::history::to_jsonl(&report.events))?;
        }
    }
    Ok(valid)
}
