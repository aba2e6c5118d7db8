//! Runs the seeded simulator binary for a few seeds: three replicas (one restored from a snapshot
//! half-way) must agree on every outcome and digest, and the invariants it checks must hold.

use std::process::Command;

#[test]
fn simulator_replicas_agree_for_several_seeds() {
    for seed in [1u64, 2, 3, 42] {
        let out = Command::new(env!("CARGO_BIN_EXE_sluice-sim"))
            .args([
                "--seed",
                &seed.to_string(),
                "--entries",
                "4000",
                "--rooms",
                "3",
            ])
            .output()
            .expect("run sluice-sim");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "seed {seed}: {stdout}");
        assert!(
            stdout.starts_with(&format!("sluice-sim seed={seed} entries=4000")),
            "{stdout}"
        );
        assert!(stdout.trim_end().ends_with(" ok"), "{stdout}");
        // The workload did something: visitors joined and were admitted.
        let field = |name: &str| -> u64 {
            stdout
                .split_whitespace()
                .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        assert!(field("joined") > 100, "{stdout}");
        assert!(field("admitted") > 10, "{stdout}");
    }
}

#[test]
fn simulator_refuses_bad_arguments() {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice-sim"))
        .args(["--seed", "x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// The waiting-time simulation runs every scenario and reports both estimators on each, and
/// its exit status says whether every scenario met the targets (a short run may miss them).
#[test]
fn the_eta_simulation_runs_and_reports() {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice-eta"))
        .args(["--seed", "3", "--scale", "0.05"])
        .output()
        .expect("run sluice-eta");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    let met = last.ends_with(": met");
    assert_eq!(out.status.code(), Some(if met { 0 } else { 1 }), "{stdout}");
    for scenario in [
        "rate-bound",
        "capacity-long",
        "capacity-short",
        "bursty-leaves",
        "pause",
        "health-slow",
        "lottery",
        "stuck",
        "stuck-first-use",
        "all-unused",
        "mixed-held",
    ] {
        let line = stdout
            .lines()
            .find(|l| l.starts_with(&format!("scenario={scenario} ")))
            .unwrap_or_else(|| panic!("no line for {scenario}: {stdout}"));
        assert!(line.contains("| new: median_error="), "{line}");
        assert!(line.contains("| old: median_error="), "{line}");
    }
    assert!(last.starts_with("all in line order | new:"), "{stdout}");
    let bad = Command::new(env!("CARGO_BIN_EXE_sluice-eta"))
        .args(["--scenario", "nonesuch"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
}
