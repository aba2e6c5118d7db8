//! A few seconds of the load generator against real Sluice, etcd and hello-world processes: every
//! step produces operations and the report has every figure (the figures themselves are
//! benchmarks, recorded in BENCHMARKS.md, not checked here).

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_load_generator_runs_every_step() {
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
