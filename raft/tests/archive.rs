//! The log archive on a cluster of real nodes: entries purged behind snapshots are archived with
//! their ledger records and checkpoints, and the archive, replayed, reaches the live state.

mod common;

use common::*;
use sluice_raft::archive::{replay, ReplayOptions};
use sluice_raft::node::ArchiveConfig;
use sluice_raft::NodeConfig;
use sluice_statemachine::draw::DrawKey;
use sluice_statemachine::{Command, Mode, Proposal, RoomConfig};
use std::time::Duration;

const KEY: DrawKey = DrawKey([11; 32]);

fn archived(cfg: &mut NodeConfig) {
    quick(cfg);
    cfg.snapshot_every = 30;
    cfg.logs_kept_after_snapshot = 5;
    cfg.draw_key = KEY;
    cfg.archive = Some(ArchiveConfig {
        dir: cfg.data_dir.join("archive"),
        keep: None,
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purged_log_replays_from_the_archive_to_the_live_digest() {
    let c = TestCluster::start(3, archived).await;
    let leader = c.wait_leader().await;
    let node = c.nodes[&leader].clone();
    c.write_via(
        &node,
        Command::CreateRoom {
            room: "lot".into(),
            config: RoomConfig {
                mode: Mode::Lottery,
                capacity: 40,
                ..room_config()
            },
        },
    )
    .await;
    for i in 0..800u64 {
        c.write_via(&node, join("lot", i)).await;
    }
    // The lottery ends: its secret is revealed.
    c.write_via(
        &node,
        Command::SetMode {
            room: "lot".into(),
            mode: Mode::Fifo,
        },
    )
    .await;
    c.wait_converged().await;
    // Every node purged its log behind several snapshots, archiving it first.
    let follower = *c.nodes.keys().find(|&&id| id != leader).unwrap();
    let dir = c.configs[&follower].data_dir.join("archive");
    wait_for("segments archived", Duration::from_secs(20), || {
        let dir = dir.clone();
        async move {
            std::fs::read_dir(&dir).is_ok_and(|d| {
                d.filter(|e| {
                    e.as_ref()
                        .is_ok_and(|e| e.file_name().to_string_lossy().starts_with("seg-"))
                })
                .count()
                    >= 3
            })
        }
    })
    .await;
    let f = &c.nodes[&follower];
    let first_in_log = f
        .log_entries(1, 1)
        .await
        .unwrap()
        .first()
        .map_or(0, |e| e.index);
    assert!(first_in_log != 1, "the log's beginning is purged");
    let (report, mut sm) = replay(
        &dir,
        &ReplayOptions {
            key: KEY,
            room: Some("lot".into()),
            ..ReplayOptions::default()
        },
    )
    .unwrap();
    assert!(report.ok(), "{:?}", report.mismatches);
    assert!(
        report.segments >= 3 && report.checkpoints >= 1,
        "{report:?}"
    );
    assert!(report.room_records >= 400, "{report:?}");
    // The archive ends where the log this node still holds begins: the two together are the
    // whole history, and replayed they reach the live digest.
    let mut next = report.through + 1;
    let (applied, digest) = f.read(|st| (st.applied_index(), st.sm.digest())).unwrap().0;
    while next <= applied {
        let page = f.log_entries(next, 1_000).await.unwrap();
        assert_eq!(
            page.first().map(|e| e.index),
            Some(next),
            "a hole after the archive"
        );
        for e in page {
            match &e.proposal {
                Some(p) => {
                    sm.apply(e.term, e.index, &Proposal::decode(p).unwrap());
                }
                None => sm.apply_empty(e.term, e.index),
            }
            next = e.index + 1;
        }
    }
    assert_eq!(
        sm.digest(),
        digest,
        "archive + log replay to the live state"
    );
    c.shutdown().await;
}

/// Writes `n` joins into room "sale" through the cluster's leader.
async fn joins(c: &TestCluster, from: u64, n: u64) {
    let leader = c.wait_leader().await;
    let node = c.nodes[&leader].clone();
    for i in from..from + n {
        c.write_via(&node, join("sale", i)).await;
    }
}

/// Writes joins until the leader's log no longer holds entry `index` (purged behind a
/// snapshot).
async fn write_until_purged(c: &TestCluster, index: u64, from: u64) {
    let mut next = from;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let leader = c.wait_leader().await;
        let held = c.nodes[&leader]
            .log_entries(index, 1)
            .await
            .unwrap()
            .first()
            .is_some_and(|e| e.index == index);
        if !held {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the leader's log still holds entry {index}"
        );
        joins(c, next, 30).await;
        next += 30;
    }
}

/// A node whose log never held what a snapshot covers (one far behind, one added after the
/// log was purged) installs the snapshot, and openraft then purges its log through it: the
/// archive continues from that snapshot instead of failing the purge, and the node keeps up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_installs_a_snapshot_keeps_archiving_from_it() {
    use sluice_raft::MembershipOp;
    let mut c = TestCluster::start(3, archived).await;
    c.create_room("sale").await;
    joins(&c, 0, 50).await;
    c.wait_converged().await;
    // Node 3 (not the one that bootstrapped the cluster) falls behind the purged log.
    let behind = c.nodes[&3].status().last_log_index;
    c.stop_node(3).await;
    write_until_purged(&c, behind + 1, 1_000).await;
    c.start_node(3).await;
    c.wait_converged().await;
    // Node 4 joins after the log's beginning is gone.
    write_until_purged(&c, c.nodes[&3].status().last_log_index, 2_000).await;
    let n4 = c.start_node(4).await;
    c.membership(MembershipOp::AddLearner {
        id: 4,
        addr: n4.addr(),
    })
    .await
    .unwrap();
    // Both stay up and archive what comes after the snapshot they installed (a purge drops at
    // least 256 entries at a time).
    joins(&c, 3_000, 400).await;
    c.wait_converged().await;
    for id in [3u64, 4] {
        let dir = c.configs[&id].data_dir.join("archive");
        let names = || -> Vec<String> {
            std::fs::read_dir(&dir)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        };
        wait_for("a segment archived", Duration::from_secs(20), || {
            let archived = names().iter().any(|n| n.starts_with("seg-"));
            async move { archived }
        })
        .await;
        assert!(
            names().iter().any(|n| n.starts_with("base-")),
            "node {id}'s archive continues from a snapshot: {:?}",
            names()
        );
        let (report, _) = replay(
            &dir,
            &ReplayOptions {
                key: KEY,
                ..ReplayOptions::default()
            },
        )
        .unwrap();
        assert!(report.ok(), "node {id}: {:?}", report.mismatches);
    }
    c.shutdown().await;
}
