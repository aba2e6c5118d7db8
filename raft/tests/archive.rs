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
                    >= 2
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
