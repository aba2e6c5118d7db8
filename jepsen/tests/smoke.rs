//! The short fault-injection run that CI does: five workloads, a few fault kinds each, real
//! `sluice serve` processes in network namespaces, the nodes authenticating each other with a
//! cluster secret (or, in the admission run, mutual TLS); and queue-append once more with crashes
//! that lose what the nodes had not synced, on `sluice-lazyfs`. Needs root, iproute2, nftables,
//! libfaketime, `adya` and /dev/fuse (`.ci/run` installs the programs): skipped without them,
//! failed in the full tier (`SLUICE_TEST_FULL=1`).

mod common;

use common::{prerequisites, use_adya, Need};
use sluice_jepsen::db::NodeAuth;
use sluice_jepsen::nemesis::Fault;
use sluice_jepsen::runner::{run, Spec};
use sluice_jepsen::workload::Workload;
use std::time::Duration;

/// One cluster at a time: the machine has two cores.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Runs `workload` under `faults` for the test `test`.
async fn smoke(test: &str, workload: Workload, faults: Vec<Fault>, auth: NodeAuth) {
    let _turn = ONE_AT_A_TIME.lock().await;
    // Network namespaces and nftables rules need root; list-append histories are checked by adya.
    let mut needs = vec![
        Need::Root,
        Need::Program("ip"),
        Need::Program("nft"),
        Need::Program("adya"),
    ];
    if faults.contains(&Fault::Clock) {
        needs.push(Need::Libfaketime);
    }
    if faults.contains(&Fault::KillLoseUnsynced) {
        needs.push(Need::Fuse);
    }
    if !prerequisites(test, &needs) {
        return;
    }
    use_adya();
    let secs: u64 = std::env::var("SLUICE_SMOKE_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(35);
    let dir = tempfile::tempdir().unwrap();
    let lose = faults.contains(&Fault::KillLoseUnsynced);
    let links: Vec<Fault> = faults.iter().copied().filter(|f| f.is_link()).collect();
    let spec = Spec {
        name: format!(
            "smoke-{}{}{}",
            workload.name(),
            if lose { "-lose-unsynced" } else { "" },
            if links.is_empty() { "" } else { "-links" }
        ),
        nodes: 3,
        faults,
        workload,
        duration: Duration::from_secs(secs),
        seed: 7,
        workers: 6,
        // Crashes that lose unsynced writes are held briefly, so that a short run still sees
        // every target in turn (one node, the leader, a minority, all of them).
        fault_hold: Duration::from_secs(if lose { 3 } else { 5 }),
        quiet: Duration::from_secs(2),
        out: dir.path().to_path_buf(),
        auth,
        lazyfs: false,
        pre_vote: true,
        proxy: false,
    };
    let summary = run(&spec).await.expect("the run completes");
    let keep = std::env::var("SLUICE_SMOKE_KEEP").is_ok();
    if keep || !summary.valid {
        let target = std::env::temp_dir().join(format!("sluice-{}", spec.name));
        let _ = std::fs::remove_dir_all(&target);
        let _ = std::process::Command::new("cp")
            .arg("-r")
            .arg(dir.path())
            .arg(&target)
            .status();
        eprintln!("results kept in {}", target.display());
    }
    assert!(summary.ok > 50, "too little happened: {summary:?}");
    assert!(!summary.nemesis.is_empty(), "no fault was injected");
    for c in &summary.checks {
        assert!(
            c.valid,
            "{} violated: {} {:?} (seed {})",
            c.checker, c.detail, c.ops, summary.seed
        );
    }
    // Each link fault was made (not skipped for want of the proxy).
    for f in links {
        assert!(
            summary
                .nemesis
                .iter()
                .any(|d| d.contains(&format!("{} ", f.name())) && !d.contains("skipped")),
            "no {} in {:?}",
            f.name(),
            summary.nemesis
        );
    }
    if lose {
        // Every target took its turn (one node, the leader, a minority, all of them), each
        // crash dropped what was unsynced at that moment, and the recovery was checked.
        let crashes: Vec<&String> = summary
            .nemesis
            .iter()
            .filter(|d| d.contains("kill-lose-unsynced "))
            .collect();
        for what in ["one", "leader", "minority", "all"] {
            assert!(
                crashes
                    .iter()
                    .any(|d| d.contains(&format!("kill-lose-unsynced {what} "))),
                "no kill-lose-unsynced {what}: {crashes:?}"
            );
        }
        assert!(
            summary.checks.iter().any(|c| c.checker == "recovery"),
            "recovery was not checked: {:?}",
            summary.checks
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke_queue_append_under_partitions_and_leader_crashes() {
    smoke(
        "smoke::smoke_queue_append_under_partitions_and_leader_crashes",
        Workload::QueueAppend,
        vec![
            Fault::IsolateLeader,
            Fault::MajorityMinority,
            Fault::KillLeader,
        ],
        NodeAuth::Secret,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke_admission_under_crashes_pauses_and_clock_faults() {
    smoke(
        "smoke::smoke_admission_under_crashes_pauses_and_clock_faults",
        Workload::Admission,
        vec![Fault::Kill, Fault::Pause, Fault::Clock],
        NodeAuth::MutualTls,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke_lottery_under_loss_total_crash_and_membership_changes() {
    smoke(
        "smoke::smoke_lottery_under_loss_total_crash_and_membership_changes",
        Workload::Lottery,
        vec![Fault::Loss, Fault::KillAll, Fault::Membership],
        NodeAuth::Secret,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke_queue_append_under_crashes_that_lose_unsynced_writes() {
    smoke(
        "smoke::smoke_queue_append_under_crashes_that_lose_unsynced_writes",
        Workload::QueueAppend,
        vec![Fault::KillLoseUnsynced],
        NodeAuth::Secret,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke_lanes_under_leader_crashes_and_partitions() {
    smoke(
        "smoke::smoke_lanes_under_leader_crashes_and_partitions",
        Workload::Lanes,
        vec![Fault::KillLeader, Fault::MajorityMinority],
        NodeAuth::Secret,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke_phases_under_leader_crashes_clock_faults_and_pauses() {
    smoke(
        "smoke::smoke_phases_under_leader_crashes_clock_faults_and_pauses",
        Workload::Phases,
        vec![Fault::KillLeader, Fault::Clock, Fault::Pause],
        NodeAuth::Secret,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke_queue_append_under_slow_one_way_and_flaky_links() {
    smoke(
        "smoke::smoke_queue_append_under_slow_one_way_and_flaky_links",
        Workload::QueueAppend,
        vec![
            Fault::SlowLink,
            Fault::SlowLeader,
            Fault::OneWay,
            Fault::Flaky,
        ],
        NodeAuth::Secret,
    )
    .await;
}
