//! The admission ledger on a cluster of real nodes: every node keeps the same records, also
//! across snapshots, log purges and restarts, and their chain is in the state every node agrees
//! on.

mod common;

use common::*;
use sluice_raft::ledger_store::{LedgerPage, LedgerQuery};
use sluice_raft::{NodeConfig, RaftNode};
use sluice_statemachine::draw::DrawKey;
use sluice_statemachine::ledger::{Chain, Event, Record};
use sluice_statemachine::{Command, Mode, RoomConfig};
use std::time::Duration;

fn snapshots_often(cfg: &mut NodeConfig) {
    quick(cfg);
    cfg.snapshot_every = 40;
    cfg.logs_kept_after_snapshot = 5;
    cfg.draw_key = DrawKey([9; 32]);
}

/// Every record of `room` this node keeps, page by page.
async fn all_records(node: &RaftNode, room: &str) -> (Vec<Record>, LedgerPage) {
    let mut out = Vec::new();
    let mut after = None;
    loop {
        let page = node
            .ledger(LedgerQuery {
                room: room.into(),
                after,
                limit: 50,
                ..LedgerQuery::default()
            })
            .await
            .unwrap()
            .expect("the ledger is kept");
        out.extend(page.records.iter().cloned());
        match page.next {
            Some(n) => after = Some(n),
            None => return (out, page),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_node_keeps_the_same_ledger_through_snapshots_and_restarts() {
    let mut c = TestCluster::start(3, snapshots_often).await;
    let leader = c.wait_leader().await;
    let leader_node = c.nodes[&leader].clone();
    c.write_via(
        &leader_node,
        Command::CreateRoom {
            room: "lot".into(),
            config: RoomConfig {
                mode: Mode::Lottery,
                capacity: 30,
                ..room_config()
            },
        },
    )
    .await;
    for i in 0..200u64 {
        c.write_via(&leader_node, join("lot", i)).await;
    }
    let follower = *c.nodes.keys().find(|&&id| id != leader).unwrap();
    c.stop_node(follower).await;
    for i in 200..300u64 {
        c.write_via(&leader_node, join("lot", i)).await;
    }
    c.start_node(follower).await;
    let (applied, _) = c.wait_converged().await;
    assert!(
        c.nodes.values().all(|n| n.status().snapshot_index > 0),
        "snapshots were taken and the log purged behind them"
    );
    // Records are written just after their entries apply: wait until every node's are.
    for node in c.nodes.values() {
        wait_for("the ledger written", Duration::from_secs(10), || async {
            all_records(node, "lot").await.1.through >= applied
        })
        .await;
    }
    let (reference, page) = all_records(&leader_node, "lot").await;
    assert_eq!(page.complete_from, 1);
    let joined = reference
        .iter()
        .filter(|r| matches!(r.event, Event::Joined { .. }))
        .count();
    let admitted = reference
        .iter()
        .filter(|r| matches!(r.event, Event::Admitted { .. }))
        .count();
    assert_eq!((joined, admitted), (300, 30));
    assert!(reference
        .iter()
        .any(|r| matches!(r.event, Event::DrawCommitted { .. })));
    for (id, node) in &c.nodes {
        let (records, page) = all_records(node, "lot").await;
        // A node that caught up by installing a snapshot has no records of the entries the
        // snapshot covered, and says so; from there on its records are the same.
        let from = page.complete_from;
        let tail = |rs: &[Record]| -> Vec<Record> {
            rs.iter().filter(|r| r.index >= from).cloned().collect()
        };
        assert_eq!(
            tail(&records),
            tail(&reference),
            "node {id} keeps other records"
        );
        if from == 1 {
            // The chain in the node's state is the chain over these records.
            let chain = node.read(|st| st.sm.ledger_chain()).unwrap().0;
            assert_eq!(chain, Chain::default().after(&records), "node {id}");
        }
    }
    // One visitor's records, through the visitor index.
    let v = leader_node
        .ledger(LedgerQuery {
            room: "lot".into(),
            visitor: Some(visitor(7)),
            limit: 10,
            ..LedgerQuery::default()
        })
        .await
        .unwrap()
        .unwrap();
    assert!(!v.records.is_empty());
    assert!(v
        .records
        .iter()
        .all(|r| r.event.visitor() == Some(visitor(7))));
    c.shutdown().await;
}
