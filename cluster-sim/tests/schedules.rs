//! The simulation in the test suite: schedules with faults keep every invariant, a known bug put
//! back is found, and a seed runs the same schedule again.

use sluice_cluster_sim::{run, Config, Report};
use sluice_raft::Broken;
use std::time::Duration;

fn schedule(seed: u64, broken: Option<Broken>) -> Report {
    run(&Config {
        seed,
        run_for: Duration::from_secs(3),
        broken,
        ..Config::default()
    })
    .expect("the schedule runs")
}

fn explain(r: &Report) -> String {
    let mut s = format!("seed {}:\n", r.seed);
    for f in &r.faults {
        s += &format!("  {f}\n");
    }
    for v in r.verdicts.iter().filter(|v| !v.valid) {
        s += &format!("  {}: {}\n", v.checker, v.detail);
        for op in &v.ops {
            s += &format!("    {op}\n");
        }
    }
    s
}

/// How many schedules the suite runs (`SLUICE_SIM_SCHEDULES`; the long runs use the binary).
fn schedules() -> u64 {
    std::env::var("SLUICE_SIM_SCHEDULES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10)
}

#[test]
fn schedules_with_partitions_crashes_and_clock_steps_keep_every_invariant() {
    let (mut faults, mut ok) = (0, 0);
    for seed in 1..=schedules() {
        let r = schedule(seed, None);
        assert!(r.valid(), "{}", explain(&r));
        faults += r.faults.len();
        ok += r.ok;
    }
    // The schedules did something: faults were applied and operations were acknowledged.
    assert!(faults as u64 >= schedules(), "only {faults} faults");
    assert!(
        ok as u64 >= 10 * schedules(),
        "only {ok} operations acknowledged"
    );
}

#[test]
fn a_node_that_acknowledges_appends_before_syncing_them_is_caught_and_caught_again() {
    let caught = (1..=20).find(|&seed| !schedule(seed, Some(Broken::AckBeforeSync)).valid());
    let seed = caught.expect("20 schedules passed with appends acknowledged before their sync");
    // The failing seed is the reproduction.
    let again = schedule(seed, Some(Broken::AckBeforeSync));
    assert!(!again.valid(), "seed {seed} failed once, then passed");
}

#[test]
fn a_seed_runs_the_same_schedule_again() {
    let (a, b) = (schedule(7, None), schedule(7, None));
    assert!(!a.faults.is_empty());
    assert_eq!(
        a.faults, b.faults,
        "the same faults at the same simulated times"
    );
    let verdicts = |r: &Report| r.verdicts.iter().map(|v| v.valid).collect::<Vec<_>>();
    assert_eq!(verdicts(&a), verdicts(&b));
}

#[test]
fn the_binary_runs_schedules_in_parallel_and_reports_each_seed_once() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sluice-cluster-sim"))
        .args([
            "--schedules",
            "3",
            "--seed",
            "11",
            "--time",
            "1",
            "--jobs",
            "2",
        ])
        .arg("--verbose")
        .output()
        .expect("the simulation runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    for seed in 11..=13 {
        assert_eq!(
            text.matches(&format!("seed {seed}: valid")).count(),
            1,
            "seed {seed} reported once: {text}"
        );
    }
    assert!(
        text.contains("3 schedules in") && text.contains("; 0 invalid"),
        "{text}"
    );
}
