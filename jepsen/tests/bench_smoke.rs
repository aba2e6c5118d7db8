//! A few seconds of the load generator against real Sluice, etcd and hello-world processes: every
//! step produces operations and the report has every figure (the figures themselves are
//! benchmarks, recorded in BENCHMARKS.md, not checked here).

mod common;

use common::{prerequisites, Need};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_load_generator_runs_every_step() {
    if !prerequisites(
        "bench_smoke::the_load_generator_runs_every_step",
        &[Need::Program("etcd")],
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let opts = sluice_jepsen::bench::BenchOpts {
        secs: 1,
        waiters: 3_000,
        client_steps: vec![1, 8],
        dir: dir.path().to_path_buf(),
        only: sluice_jepsen::bench::Steps::All,
        rate: None,
    };
    let report = sluice_jepsen::bench::run(&opts)
        .await
        .expect("the benchmark runs");
    let steps = report["steps"].as_array().unwrap();
    assert!(steps.len() >= 10, "{report}");
    for s in steps {
        assert!(s["ops"].as_u64().unwrap() > 0, "a step did nothing: {s}");
    }
    // Steps are reported in the order they ran, each with its start time.
    let starts: Vec<u64> = steps
        .iter()
        .map(|s| s["started_unix_ms"].as_u64().unwrap())
        .collect();
    assert!(starts.windows(2).all(|w| w[0] <= w[1]), "{starts:?}");
    // Open-loop steps say how late the generator started their operations; closed-loop ones
    // have no schedule to be late for.
    for s in steps {
        let open = s["target_rate"].as_u64().unwrap() > 0;
        assert_eq!(s.get("start_lag_p99_ms").is_some(), open, "{s}");
        if open {
            let (p50, p99) = (
                s["start_lag_p50_ms"].as_f64().unwrap(),
                s["start_lag_p99_ms"].as_f64().unwrap(),
            );
            assert!(p50 <= p99 && p99 <= s["max_ms"].as_f64().unwrap(), "{s}");
        }
    }
    // Sluice's join steps carry each process's CPU per join; the generator always used some.
    let joins: Vec<_> = steps
        .iter()
        .filter(|s| s["name"].as_str().unwrap().starts_with("sluice join"))
        .collect();
    assert!(joins.len() >= 3, "{report}");
    for s in joins {
        let cpu = s["cpu_us_per_op"].as_object().expect("CPU per join");
        let keys: Vec<&str> = cpu.keys().map(String::as_str).collect();
        assert_eq!(keys, ["generator", "n1", "n2", "n3"], "{s}");
        assert!(cpu["generator"].as_f64().unwrap() > 0.0, "{s}");
    }
    for (k, v) in report["ratios"].as_object().unwrap() {
        assert!(v.as_f64().unwrap() > 0.0, "{k}");
    }
    assert!(report["rss_bytes_with_waiters"]
        .as_object()
        .unwrap()
        .values()
        .all(|v| v.as_u64().unwrap() > 1 << 20));
    for k in [
        "join_p99_ms_at_half_peak",
        "etcd_put_p99_ms_at_half_its_peak",
    ] {
        assert!(report[k].as_f64().unwrap() > 0.0, "{k}: {report}");
    }
    assert!(report["restart_to_serving_ms"].as_u64().is_some());
    assert!(report["leader_kill_to_first_ack_ms"].as_u64().is_some());
}

/// The ledger step runs joins on fresh clusters with the admission ledger kept and not kept (it
/// fails if a cluster's ledger is not what it was configured to be) and reports their ratio.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ledger_step_compares_clusters_with_and_without_the_ledger() {
    let dir = tempfile::tempdir().unwrap();
    let opts = sluice_jepsen::bench::BenchOpts {
        secs: 1,
        waiters: 0,
        client_steps: vec![1, 8],
        dir: dir.path().to_path_buf(),
        only: sluice_jepsen::bench::Steps::Ledger,
        rate: None,
    };
    let report = sluice_jepsen::bench::run(&opts)
        .await
        .expect("the ledger step runs");
    assert_eq!(report["clients"], 8, "the largest client count: {report}");
    for k in ["kept_per_sec", "not_kept_per_sec"] {
        let runs = report[k].as_array().unwrap();
        assert_eq!(runs.len(), 3, "{k}: {report}");
        assert!(
            runs.iter().all(|r| r.as_f64().unwrap() > 0.0),
            "{k}: {report}"
        );
    }
    let steps = report["steps"].as_array().unwrap();
    let kept = |s: &serde_json::Value| s["name"].as_str().unwrap().ends_with("ledger kept");
    assert_eq!(steps.iter().filter(|s| kept(s)).count(), 3, "{report}");
    assert!(report["ratio"].as_f64().unwrap() > 0.0, "{report}");
}

/// The processes whose parent is `pid`, from `/proc`.
fn children_of(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(child) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        // `pid (comm) state ppid ...`; the command name may hold spaces and parentheses.
        let after = &stat[stat.rfind(')').unwrap() + 1..];
        let ppid: u32 = after.split_whitespace().nth(1).unwrap().parse().unwrap();
        if ppid == pid {
            out.push(child);
        }
    }
    out
}

/// Ctrl-C stops the benchmark and every process it started: none is left running.
#[test]
fn an_interrupted_benchmark_leaves_no_process_behind() {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    use std::time::{Duration, Instant};
    let dir = tempfile::tempdir().unwrap();
    // Its errors go to a file: a pipe would stay open in any process left behind.
    let errors = dir.path().join("stderr.txt");
    let mut bench = std::process::Command::new(env!("CARGO_BIN_EXE_sluice-jepsen"))
        .args([
            "bench",
            "--only",
            "joins",
            "--secs",
            "120",
            "--clients",
            "1",
        ])
        .arg("--out")
        .arg(dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&errors).unwrap())
        .spawn()
        .unwrap();
    // The hello-world server and the three nodes.
    let deadline = Instant::now() + Duration::from_secs(60);
    let children = loop {
        let c = children_of(bench.id());
        if c.len() >= 4 {
            break c;
        }
        assert!(bench.try_wait().unwrap().is_none(), "the benchmark ended");
        assert!(Instant::now() < deadline, "only {c:?} started");
        std::thread::sleep(Duration::from_millis(20));
    };
    kill(Pid::from_raw(bench.id() as i32), Signal::SIGINT).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = bench.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "the benchmark did not stop");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(!status.success());
    let stderr = std::fs::read_to_string(&errors).unwrap();
    assert!(stderr.contains("interrupted by SIGINT"), "{stderr}");
    // Each was killed and reaped by the benchmark; one left running would still be in /proc.
    for pid in children {
        assert!(
            !std::path::Path::new(&format!("/proc/{pid}")).exists(),
            "process {pid} outlived the benchmark"
        );
    }
}
