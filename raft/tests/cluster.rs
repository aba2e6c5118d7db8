//! Three-node clusters of real nodes (RocksDB directories, loopback gRPC), waiting on conditions
//! with deadlines.

mod common;

use common::*;
use sluice_raft::{ClusterError, MembershipOp, NodeConfig};
use sluice_statemachine::{Command, Outcome, VisitorState};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn snapshots_often(cfg: &mut NodeConfig) {
    quick(cfg);
    cfg.snapshot_every = 40;
    cfg.logs_kept_after_snapshot = 5;
}

fn present(node: &sluice_raft::RaftNode, room: &str, n: u64) -> bool {
    node.read(|st| st.sm.visitor(room, visitor(n)).is_ok())
        .map(|(b, _)| b)
        .unwrap_or(false)
}

/// Keeps writing joins through the given nodes until stopped; returns the acknowledged ones.
fn writer(
    c: Arc<tokio::sync::RwLock<TestCluster>>,
    stop: Arc<AtomicBool>,
    next: Arc<AtomicU64>,
) -> tokio::task::JoinHandle<Vec<u64>> {
    tokio::spawn(async move {
        let mut acked = Vec::new();
        while !stop.load(Ordering::SeqCst) {
            let n = next.fetch_add(1, Ordering::SeqCst);
            let node = {
                let c = c.read().await;
                let nodes: Vec<_> = c.nodes.values().cloned().collect();
                nodes[(n as usize) % nodes.len()].clone()
            };
            if let Ok((Outcome::Visitor(_), _)) = node.write(join("stream", n)).await {
                acked.push(n);
            }
        }
        acked
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn election_replication_and_identical_digests() {
    let c = TestCluster::start(3, quick).await;
    c.create_room("r").await;
    // Writes through every node, followers included (forwarded to the leader).
    let nodes: Vec<_> = c.nodes.values().cloned().collect();
    for i in 0..60u64 {
        let node = &nodes[(i % 3) as usize];
        let o = c.write_via(node, join("r", i)).await;
        assert!(matches!(o, Outcome::Visitor(_)), "{o:?}");
    }
    // A mixed workload: leaves, heartbeats, a pause, a pool.
    for i in 0..20u64 {
        c.write_via(
            &nodes[0],
            Command::Leave {
                room: "r".into(),
                visitor: visitor(i),
            },
        )
        .await;
        c.write_via(
            &nodes[1],
            Command::Heartbeat {
                room: "r".into(),
                visitor: visitor(i + 20),
            },
        )
        .await;
    }
    c.write_via(
        &nodes[2],
        Command::PutPool {
            pool: "p".into(),
            room_capacity: 5,
            rooms_max: 3,
        },
    )
    .await;
    c.write_via(&nodes[2], Command::PoolAssign { pool: "p".into() })
        .await;
    let (index, digest) = c.wait_converged().await;
    assert!(index > 80);
    assert_eq!(digest.len(), 64);
    for n in c.nodes.values() {
        let (room, _) = n.read(|st| st.sm.room("r").unwrap()).unwrap();
        assert_eq!(room.totals.joined, 60);
        assert_eq!(room.totals.left, 20);
    }
    // Exactly one leader, and every node agrees on it.
    let leaders: Vec<_> = c.nodes.values().filter(|n| n.is_leader()).collect();
    assert_eq!(leaders.len(), 1);
    let leader = leaders[0].id();
    assert!(c.nodes.values().all(|n| n.status().leader == Some(leader)));
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writes_through_every_node_share_log_entries() {
    let c = TestCluster::start(3, quick).await;
    c.create_room("r").await;
    c.wait_converged().await;
    let before = c.leader().unwrap().read(|st| st.applied_index()).unwrap().0;
    // 48 writers, 16 through each node, each writing 20 joins one after another: the
    // followers forward theirs, and all of them queue behind the few proposals in flight on
    // the leader.
    let nodes: Vec<_> = c.nodes.values().cloned().collect();
    let writers = (0..48u64).map(|w| {
        let node = nodes[(w % 3) as usize].clone();
        async move {
            let mut out = Vec::new();
            for k in 0..20 {
                out.push((node.id(), node.write(join("r", w * 20 + k)).await));
            }
            out
        }
    });
    let results = futures::future::join_all(writers).await;
    // Log index → the nodes its commands came in through.
    let mut origins: std::collections::BTreeMap<u64, std::collections::BTreeSet<u64>> =
        Default::default();
    for (via, r) in results.into_iter().flatten() {
        let (o, index) = r.expect("write");
        assert!(matches!(o, Outcome::Visitor(_)), "{o:?}");
        origins.entry(index).or_default().insert(via);
    }
    let (after, _) = c.wait_converged().await;
    let entries = after - before;
    // One log entry per command would be 960 (with 32 proposals in flight it takes about 200).
    assert!(
        entries <= 160,
        "960 writes took {entries} log entries ({} with writes)",
        origins.len()
    );
    // Forwarded commands join the leader's own queue: entries mix writes that came in through
    // different nodes.
    assert!(
        origins.values().any(|o| o.len() >= 2),
        "no entry mixes commands from different nodes: {origins:?}"
    );
    for n in c.nodes.values() {
        let (room, _) = n.read(|st| st.sm.room("r").unwrap()).unwrap();
        assert_eq!(room.totals.joined, 960);
    }
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_killed_new_leader_and_nothing_committed_is_lost() {
    let mut c = TestCluster::start(3, quick).await;
    c.create_room("r").await;
    let old = c.wait_leader().await;
    // Half of the writes go through the followers, which forward them on their streams to the
    // old leader.
    let ids: Vec<u64> = c.nodes.keys().copied().collect();
    for i in 0..30u64 {
        let node = c.nodes[&ids[i as usize % ids.len()]].clone();
        c.write_via(&node, join("r", i)).await;
    }
    let killed_at = std::time::Instant::now();
    c.stop_node(old).await;
    let new = c.wait_leader().await;
    assert_ne!(new, old);
    // Election timeout is 300–600 ms; allow for scheduling on a loaded machine.
    assert!(
        killed_at.elapsed() < Duration::from_secs(5),
        "took {:?}",
        killed_at.elapsed()
    );
    let survivor = c.nodes[&new].clone();
    // The survivors have known two leaders (for /metrics); the count is kept by a task that
    // follows the node's metrics, so it may lag the election by a moment.
    wait_for(
        "the survivor to count two leaders",
        Duration::from_secs(10),
        || {
            let survivor = survivor.clone();
            async move { survivor.metrics().leader_changes >= 2 }
        },
    )
    .await;
    c.write_via(&survivor, join("r", 1000)).await;
    // The remaining follower's stream went to the old leader; its writes now reach the new one.
    let follower = c.any_follower().clone();
    c.write_via(&follower, join("r", 1001)).await;
    for n in c.nodes.values() {
        let ((), _) = n.read_linearizable(|_| ()).await.unwrap();
        for i in (0..30).chain([1000, 1001]) {
            assert!(present(n, "r", i), "node {} lost visitor {i}", n.id());
        }
    }
    // The old leader comes back as a follower and catches up.
    c.start_node(old).await;
    c.wait_converged().await;
    assert!(present(&c.nodes[&old], "r", 1000));
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_whose_raft_core_stops_is_no_longer_ready_and_says_why() {
    let c = TestCluster::start(3, quick).await;
    c.create_room("r").await;
    let follower = c.any_follower().clone();
    wait_for("the follower ready", Duration::from_secs(10), || {
        let ready = follower.is_ready();
        async move { ready }
    })
    .await;
    // What a storage error does to the core, without a shutdown of the node.
    follower.raft().shutdown().await.unwrap();
    let reason = tokio::time::timeout(Duration::from_secs(5), follower.failed())
        .await
        .expect("failed() resolves");
    assert!(!reason.is_empty());
    assert!(!follower.is_ready());
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follower_restart_recovers_from_snapshot_and_log() {
    let mut c = TestCluster::start(3, snapshots_often).await;
    c.create_room("r").await;
    let leader = c.wait_leader().await;
    let follower = *c.nodes.keys().find(|&&id| id != leader).unwrap();
    let leader_node = c.nodes[&leader].clone();
    for i in 0..100u64 {
        c.write_via(&leader_node, join("r", i)).await;
    }
    c.wait_converged().await;
    // The follower takes its snapshot in the background once enough entries are applied.
    let f = c.nodes[&follower].clone();
    wait_for("the follower's snapshot", Duration::from_secs(10), || {
        let taken = f.status().snapshot_index > 0;
        async move { taken }
    })
    .await;
    // The node's database stays open while any handle to it lives.
    drop(f);
    c.stop_node(follower).await;
    for i in 100..150u64 {
        c.write_via(&leader_node, join("r", i)).await;
    }
    let node = c.start_node(follower).await;
    assert!(!node.is_ready() || node.status().applied_index > 0);
    c.wait_converged().await;
    for i in [0, 99, 100, 149] {
        assert!(present(&node, "r", i), "visitor {i}");
    }
    c.shutdown().await;
}

/// A follower that was down while commands of the largest size were written catches up: the
/// write path cuts proposals at their byte bound and replication sends few enough entries at a
/// time that no message is over the nodes' size limit (with 256 entries a message, a run of
/// full proposals made one, which the follower was sent again and again without end).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_catches_up_over_entries_of_the_largest_size() {
    use sluice_statemachine::limits::{PROPOSAL_BYTES_MAX, TOUCH_BATCH_MAX};
    use sluice_statemachine::ClientKey;
    let mut c = TestCluster::start(3, quick).await;
    c.create_room("r").await;
    let leader = c.wait_leader().await;
    let follower = *c.nodes.keys().find(|&&id| id != leader).unwrap();
    c.stop_node(follower).await;
    let leader_node = c.nodes[&leader].clone();
    let renewals = |w: u64| Command::TouchFrom {
        room: "r".into(),
        visits: (0..TOUCH_BATCH_MAX as u64)
            .map(|i| (visitor(w * 100_000 + i), ClientKey([w as u8; 16])))
            .collect(),
    };
    // 80 MB of commands, written at once: they fill proposals to their bound.
    let writers: usize = 240;
    assert!(writers * renewals(0).encoded_len() > 64 << 20);
    let before = leader_node.status().last_log_index;
    let c = Arc::new(c);
    let mut tasks = Vec::new();
    for w in 0..writers as u64 {
        let (c, l, cmd) = (c.clone(), leader_node.clone(), renewals(w));
        tasks.push(tokio::spawn(async move { c.write_via(&l, cmd).await }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let entries = leader_node.status().last_log_index - before;
    let per_entry = renewals(0).encoded_len() * writers / entries as usize;
    assert!(
        per_entry <= PROPOSAL_BYTES_MAX,
        "{entries} entries, {per_entry} bytes each"
    );
    let mut c = Arc::into_inner(c).expect("the writers are done");
    let node = c.start_node(follower).await;
    c.wait_converged().await;
    assert_eq!(
        node.status().applied_index,
        leader_node.status().applied_index
    );
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_node_lets_go_of_its_database_while_its_peers_keep_calling() {
    // Its peers' connections stay open after it stops (they keep sending heartbeats and
    // entries): they must not keep the node's database, and its directory's lock, alive.
    let mut c = TestCluster::start(3, quick).await;
    c.create_room("r").await;
    let leader = c.wait_leader().await;
    let leader_node = c.nodes[&leader].clone();
    let mut writers = Vec::new();
    for w in 0..64u64 {
        let l = leader_node.clone();
        writers.push(tokio::spawn(async move {
            for i in 0..40u64 {
                l.write(join("r", w * 1_000 + i)).await.unwrap();
            }
        }));
    }
    for w in writers {
        w.await.unwrap();
    }
    for n in c.nodes.values() {
        n.raft().trigger().snapshot().await.unwrap();
    }
    c.wait_converged().await;
    let follower = *c.nodes.keys().find(|&&id| id != leader).unwrap();
    let f = c.nodes[&follower].clone();
    wait_for("the follower's snapshot", Duration::from_secs(10), || {
        let taken = f.status().snapshot_index > 0;
        async move { taken }
    })
    .await;
    drop(f);
    let db_dir = c.config_for(follower).data_dir.join("db");
    c.stop_node(follower).await;
    wait_for(
        "the stopped node's database to be released",
        Duration::from_secs(3),
        || {
            let free = sluice_raft::log_store::open_db(&db_dir).is_ok();
            async move { free }
        },
    )
    .await;
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_puts_off_snapshots_that_followers_take() {
    // Snapshots every ~40 entries; the leader waits four times as long.
    let c = TestCluster::start(3, snapshots_often).await;
    c.create_room("r").await;
    let leader = c.wait_leader().await;
    let leader_node = c.nodes[&leader].clone();
    for i in 0..100u64 {
        c.write_via(&leader_node, join("r", i)).await;
    }
    c.wait_converged().await;
    // A follower builds its snapshot beside its applies: it may finish a moment later. Each
    // snapshot's encoding is timed for /metrics.
    let followers: Vec<sluice_raft::RaftNode> = c
        .nodes
        .iter()
        .filter(|(id, _)| **id != leader)
        .map(|(_, n)| n.clone())
        .collect();
    wait_for(
        "every follower's snapshot, timed",
        Duration::from_secs(20),
        || {
            let done = followers
                .iter()
                .all(|n| n.status().snapshot_index > 0 && n.metrics().snapshot_encode.count > 0);
            async move { done }
        },
    )
    .await;
    assert_eq!(
        leader_node.status().snapshot_index,
        0,
        "the leader put its snapshots off"
    );
    assert_eq!(leader_node.metrics().snapshot_encode.count, 0);
    // Past four periods the leader takes one too.
    for i in 100..260u64 {
        c.write_via(&leader_node, join("r", i)).await;
    }
    wait_for("the leader's snapshot", Duration::from_secs(20), || {
        let n = leader_node.clone();
        async move { n.status().snapshot_index > 0 }
    })
    .await;
    assert_eq!(c.wait_leader().await, leader, "one leader throughout");
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lagging_learner_catches_up_by_snapshot_then_membership_changes_under_writes() {
    let c = TestCluster::start(3, snapshots_often).await;
    c.create_room("stream").await;
    let c = Arc::new(tokio::sync::RwLock::new(c));
    let stop = Arc::new(AtomicBool::new(false));
    let next = Arc::new(AtomicU64::new(0));
    let w = writer(c.clone(), stop.clone(), next.clone());
    // Let the log run well past a snapshot so a new node cannot be fed from the log alone.
    wait_for("writes and a snapshot", Duration::from_secs(30), || {
        let c = c.clone();
        async move {
            let c = c.read().await;
            let s = c.leader().map(|l| l.status());
            s.is_some_and(|s| s.applied_index > 120 && s.snapshot_index > 40)
        }
    })
    .await;
    // Add node 4 as a learner, then promote it; remove node 1 — all while writes continue.
    let n4 = {
        let mut cw = c.write().await;
        cw.start_node(4).await
    };
    let st = c
        .read()
        .await
        .membership(MembershipOp::AddLearner {
            id: 4,
            addr: n4.addr(),
        })
        .await
        .unwrap();
    assert!(st.learners.contains(&4));
    wait_for(
        "learner 4 installs a snapshot and catches up",
        Duration::from_secs(30),
        || {
            let n4 = n4.clone();
            async move {
                let s = n4.status();
                s.snapshot_index > 0 && s.applied_index > 120
            }
        },
    )
    .await;
    let st = c
        .read()
        .await
        .membership(MembershipOp::Promote { id: 4 })
        .await
        .unwrap();
    assert!(st.voters.contains(&4));
    let st = c
        .read()
        .await
        .membership(MembershipOp::Remove { id: 1 })
        .await
        .unwrap();
    assert!(!st.voters.contains(&1) && !st.learners.contains(&1));
    // A removed id is never handed out again.
    let again = c
        .read()
        .await
        .membership(MembershipOp::AddLearner {
            id: 1,
            addr: n4.addr(),
        })
        .await;
    assert!(matches!(again, Err(ClusterError::Invalid(_))), "{again:?}");
    {
        let mut cw = c.write().await;
        cw.stop_node(1).await;
    }
    let more = next.load(Ordering::SeqCst) + 20;
    wait_for(
        "writes continue after the changes",
        Duration::from_secs(30),
        || {
            let next = next.clone();
            async move { next.load(Ordering::SeqCst) > more }
        },
    )
    .await;
    stop.store(true, Ordering::SeqCst);
    let acked = w.await.unwrap();
    assert!(acked.len() > 100);
    let c = Arc::try_unwrap(c).unwrap().into_inner();
    c.wait_converged().await;
    for n in c.nodes.values() {
        for &v in &acked {
            assert!(
                present(n, "stream", v),
                "node {} lost acknowledged visitor {v}",
                n.id()
            );
        }
    }
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follower_reads_local_and_linearizable() {
    let c = TestCluster::start(3, quick).await;
    c.create_room("r").await;
    let follower = c.any_follower().clone();
    let leader = c.leader().unwrap().clone();
    c.write_via(&leader, join("r", 7)).await;
    // A linearizable read on a follower sees the write acknowledged just before it.
    let (seen, index) = follower
        .read_linearizable(|st| st.sm.visitor("r", visitor(7)).is_ok())
        .await
        .unwrap();
    assert!(seen);
    assert!(index >= leader.status().committed_index.min(index));
    // A local read reports the applied index it read at.
    let (_, local_index) = follower.read(|_| ()).unwrap();
    assert!(local_index >= index);
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_ticks_expire_sessions_then_an_idle_cluster_writes_nothing() {
    let c = TestCluster::start(3, quick).await;
    let leader = c.leader().unwrap().clone();
    let config = sluice_statemachine::RoomConfig {
        session_ttl_secs: 1,
        capacity: 1,
        ..room_config()
    };
    c.write_via(
        &leader,
        Command::PutRoom {
            room: "t".into(),
            config,
        },
    )
    .await;
    c.write_via(&leader, join("t", 1)).await;
    c.write_via(&leader, join("t", 2)).await;
    // Nobody writes: the leader's ticks expire visitor 1 and admit visitor 2, then expire it too.
    wait_for(
        "both sessions expire by ticks alone",
        Duration::from_secs(10),
        || {
            let leader = leader.clone();
            async move {
                leader
                    .read(|st| {
                        let r = st.sm.room("t").unwrap();
                        r.totals.expired == 2 && r.active == 0
                    })
                    .map(|(b, _)| b)
                    .unwrap_or(false)
            }
        },
    )
    .await;
    let v2 = leader
        .read(|st| st.sm.visitor("t", visitor(2)).unwrap())
        .unwrap()
        .0;
    assert!(matches!(v2.state, VisitorState::Ended { .. }));
    let (_, before) = c.wait_converged().await;
    let index = leader.status().last_log_index;
    // Nothing is due any more: over a second (ten times the tick interval and heartbeat) the log
    // does not grow.
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    assert_eq!(
        leader.status().last_log_index,
        index,
        "an idle cluster proposes no ticks"
    );
    assert_eq!(c.wait_converged().await.1, before);
    c.shutdown().await;
}

/// The first chunk of a snapshot from a sender with `vote`, with `len` bytes of data.
fn snapshot_chunk(vote: sluice_raft::types::Vote, len: usize) -> sluice_raft::pb::SnapshotChunk {
    sluice_raft::pb::SnapshotChunk {
        header: sluice_raft::codec::encode(&(vote, sluice_raft::types::SnapshotMeta::default())),
        data: vec![0; len],
    }
}

/// A snapshot is written to a file in the data directory as it arrives (not kept in memory),
/// one at a time: while one is being received, a second is refused (its leader retries later).
/// A stream that ends badly installs nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_receives_one_snapshot_at_a_time_into_a_file() {
    use openraft::async_runtime::WatchReceiver;
    let c = TestCluster::start(3, quick).await;
    c.create_room("r").await;
    let (index, digest) = c.wait_converged().await;
    let follower = c.any_follower().clone();
    let target = follower.raft_addr().to_string();
    let vote = follower.raft().metrics().borrow_watched().vote;
    let part = c.configs[&follower.id()]
        .data_dir
        .join(sluice_raft::service::SNAPSHOT_RECEIVING_FILE);
    // One stream sends a first chunk with the follower's own (current) vote, then stalls.
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tx.send(snapshot_chunk(vote, 100_000)).await.unwrap();
    tx.send(snapshot_chunk(vote, 100_000)).await.unwrap();
    let mut stalled_client = raft_client(&target, Some(test_secret())).await;
    let stalled = tokio::spawn(async move {
        stalled_client
            .install_snapshot(tokio_stream::wrappers::ReceiverStream::new(rx))
            .await
    });
    wait_for(
        "the chunks are in the file",
        Duration::from_secs(10),
        || {
            let len = std::fs::metadata(&part).map_or(0, |m| m.len());
            async move { len >= 200_000 }
        },
    )
    .await;
    // Meanwhile a second is refused at once.
    let mut second = raft_client(&target, Some(test_secret())).await;
    let r = second
        .install_snapshot(tokio_stream::iter(vec![snapshot_chunk(vote, 10)]))
        .await;
    assert_eq!(r.unwrap_err().code(), tonic::Code::Unavailable);
    // The stalled sender goes away: nothing is installed, the file is gone, and the next
    // snapshot is received again (a stale one: answered at once with the follower's vote).
    stalled.abort();
    drop(tx);
    wait_for(
        "the partial file is removed",
        Duration::from_secs(10),
        || {
            let gone = !part.exists();
            async move { gone }
        },
    )
    .await;
    let stale = sluice_raft::types::Vote::new_committed(0, 9);
    let after = second
        .install_snapshot(tokio_stream::iter(vec![snapshot_chunk(stale, 10)]))
        .await;
    assert!(after.is_ok(), "{after:?}");
    assert_eq!(c.wait_converged().await, (index, digest));
    c.shutdown().await;
}

/// A sender whose vote is behind the node's is answered at once, from the header alone: its
/// data is never read (before, the node buffered a stream of up to 4 GiB in memory first).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_snapshot_is_answered_without_reading_its_data() {
    let c = TestCluster::start(3, quick).await;
    let target = c.any_follower().raft_addr().to_string();
    let mut client = raft_client(&target, Some(test_secret())).await;
    // A stream that never ends: only an answer from the header can come back.
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    tx.send(snapshot_chunk(
        sluice_raft::types::Vote::new_committed(0, 9),
        1 << 20,
    ))
    .await
    .unwrap();
    let reply = tokio::time::timeout(
        Duration::from_secs(5),
        client.install_snapshot(tokio_stream::wrappers::ReceiverStream::new(rx)),
    )
    .await
    .expect("answered without waiting for the rest of the stream")
    .unwrap();
    let answer: Result<
        openraft::raft::SnapshotResponse<sluice_raft::types::TypeConfig>,
        openraft::errors::RaftError<sluice_raft::types::TypeConfig>,
    > = sluice_raft::codec::decode(&reply.into_inner().data).unwrap();
    assert!(
        answer.unwrap().vote.leader_id().term > 0,
        "the node's own, newer vote"
    );
    // An uncommitted vote is no leader's: refused.
    let r = client
        .install_snapshot(tokio_stream::iter(vec![snapshot_chunk(
            sluice_raft::types::Vote::new(99, 1),
            10,
        )]))
        .await;
    assert_eq!(r.unwrap_err().code(), tonic::Code::InvalidArgument);
    drop(tx);
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_on_the_wire_is_an_error_and_changes_nothing() {
    let c = TestCluster::start(3, quick).await;
    c.create_room("r").await;
    c.write_via(c.leader().unwrap(), join("r", 1)).await;
    let (index, digest) = c.wait_converged().await;
    let target = c.any_follower().raft_addr().to_string();
    let mut client = raft_client(&target, Some(test_secret())).await;
    let garbage: Vec<Vec<u8>> = vec![
        vec![],
        vec![0xff; 64],
        vec![1, 0xff, 0xff, 0xff, 0xff, 0x0f],
        b"\x01hello".to_vec(),
    ];
    for g in &garbage {
        let p = || sluice_raft::pb::Payload { data: g.clone() };
        assert_eq!(
            client.append_entries(p()).await.unwrap_err().code(),
            tonic::Code::InvalidArgument
        );
        assert_eq!(
            client.vote(p()).await.unwrap_err().code(),
            tonic::Code::InvalidArgument
        );
        assert_eq!(
            client.forward(p()).await.unwrap_err().code(),
            tonic::Code::InvalidArgument
        );
        assert_eq!(
            client.membership(p()).await.unwrap_err().code(),
            tonic::Code::InvalidArgument
        );
        let chunk = sluice_raft::pb::SnapshotChunk {
            header: g.clone(),
            data: vec![1, 2, 3],
        };
        assert_eq!(
            client
                .install_snapshot(tokio_stream::iter(vec![chunk]))
                .await
                .unwrap_err()
                .code(),
            tonic::Code::InvalidArgument
        );
    }
    // A forwarding stream that carries garbage is ended with an error; nothing is proposed.
    for g in &garbage {
        let msg = sluice_raft::pb::Payload { data: g.clone() };
        let mut replies = client
            .forward_stream(tokio_stream::iter(vec![msg]))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(
            replies.message().await.unwrap_err().code(),
            tonic::Code::InvalidArgument
        );
    }
    // A proposal with garbage inside a well-formed envelope is refused too.
    let bad_entry = sluice_raft::codec::encode(&vec![0u8; 3]);
    assert!(client
        .forward(sluice_raft::pb::Payload { data: bad_entry })
        .await
        .is_err());
    assert_eq!(c.wait_converged().await, (index, digest));
    // The cluster still works.
    c.write_via(c.leader().unwrap(), join("r", 2)).await;
    c.shutdown().await;
}

fn node_1_ten_minutes_ahead(cfg: &mut NodeConfig) {
    quick(cfg);
    if cfg.id == 1 {
        cfg.wall_clock = sluice_raft::WallClock::shifted(600_000);
    }
}

fn node_1_ten_minutes_behind(cfg: &mut NodeConfig) {
    quick(cfg);
    if cfg.id == 1 {
        cfg.wall_clock = sluice_raft::WallClock::shifted(-600_000);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_whose_clock_is_off_stamps_the_time_the_other_clocks_agree_on() {
    for (tune, offset) in [
        (node_1_ten_minutes_ahead as fn(&mut NodeConfig), 600_000i64),
        (node_1_ten_minutes_behind, -600_000),
    ] {
        let c = TestCluster::start(3, tune).await;
        let n1 = c.nodes[&1].clone();
        wait_for("node 1 leads", Duration::from_secs(10), || {
            let n1 = n1.clone();
            async move {
                if !n1.is_leader() {
                    // Each try is a new election; one of them finds the others' logs no newer.
                    n1.raft().trigger().elect(false).await.unwrap();
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                n1.is_leader() && n1.is_ready()
            }
        })
        .await;
        wait_for(
            "every node knows both peers' clocks",
            Duration::from_secs(10),
            || {
                let all = c.nodes.values().all(|n| n.clock_peers_known() == 2);
                async move { all }
            },
        )
        .await;
        // Node 1 sees its own clock off by the offset, the others see theirs right.
        let off = n1.clock_offset_ms();
        assert!((off + offset).abs() < 1_000, "node 1 offset {off} ms");
        for n in c.nodes.values().filter(|n| n.id() != 1) {
            let off = n.clock_offset_ms();
            assert!(off.abs() < 1_000, "node {} offset {off} ms", n.id());
        }
        // The entries node 1 stamps carry the real time, not node 1's.
        let before = sluice_raft::wall_ms();
        c.write_via(
            &n1,
            Command::PutRoom {
                room: "r".into(),
                config: room_config(),
            },
        )
        .await;
        c.write_via(&c.nodes[&2], join("r", 1)).await;
        let after = sluice_raft::wall_ms();
        c.wait_converged().await;
        for n in c.nodes.values() {
            let (clock, _) = n.read(|st| st.sm.clock_ms()).unwrap();
            assert!(
                clock + 1_000 >= before && clock <= after + 1_000,
                "node {}: log clock {clock}, real time {before}..{after} (node 1 off by {offset})",
                n.id()
            );
        }
        c.shutdown().await;
    }
}

/// A node cut off from every other asks whether it could win (pre-votes) and never raises its
/// term, so that it cannot unseat a leader the others still follow once it is back; with
/// pre-vote off it stands for election, at a higher term, again and again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_cut_off_asks_before_it_stands_for_election() {
    use openraft::async_runtime::WatchReceiver;
    for pre_vote in [true, false] {
        let tune: fn(&mut NodeConfig) = if pre_vote {
            quick
        } else {
            |c| {
                quick(c);
                c.pre_vote = false;
            }
        };
        let mut c = TestCluster::start(3, tune).await;
        let leader = c.wait_leader().await;
        let lone = c.nodes.keys().copied().find(|id| *id != leader).unwrap();
        let node = c.nodes[&lone].clone();
        let term = || node.raft().metrics().borrow_watched().current_term;
        let others: Vec<u64> = c.nodes.keys().copied().filter(|id| *id != lone).collect();
        for id in others {
            c.stop_node(id).await;
        }
        let (pre_votes, votes) = node.vote_requests_sent();
        let term_before = term();
        if pre_vote {
            wait_for(
                "three rounds of pre-votes to both peers",
                Duration::from_secs(20),
                || {
                    let sent = node.vote_requests_sent().0 - pre_votes;
                    async move { sent >= 6 }
                },
            )
            .await;
            assert_eq!(
                node.vote_requests_sent().1,
                votes,
                "no election was started"
            );
            assert_eq!(term(), term_before, "the term did not move");
        } else {
            wait_for("three elections", Duration::from_secs(20), || {
                let sent = node.vote_requests_sent().1 - votes;
                async move { sent >= 6 }
            })
            .await;
            assert!(term() >= term_before + 3, "each election raised the term");
        }
        c.shutdown().await;
    }
}

fn slow_elections(cfg: &mut NodeConfig) {
    cfg.heartbeat_ms = 50;
    cfg.election_timeout_ms = (1_500, 2_000);
}

/// A leader that restarts, even long before anyone else would stand for election, does not
/// resume its old term: a crash may have lost entries it had sent but not synced, and in the
/// old term it would write other entries under their log ids. Leadership moves to a new term.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_leader_does_not_resume_its_old_term() {
    use openraft::async_runtime::WatchReceiver;
    let mut c = TestCluster::start(3, slow_elections).await;
    c.create_room("r").await;
    let old = c.wait_leader().await;
    let term_before = c.nodes[&old].raft().metrics().borrow_watched().current_term;
    c.stop_node(old).await;
    let restarted = c.start_node(old).await;
    assert!(
        !restarted.is_leader(),
        "the restarted node came back as leader of term {term_before}"
    );
    let leader = c.wait_leader_within(Duration::from_secs(30)).await;
    let term_after = c.nodes[&leader]
        .raft()
        .metrics()
        .borrow_watched()
        .current_term;
    assert!(
        term_after > term_before,
        "leader {leader} leads term {term_after}, the term before the restart was {term_before}"
    );
    c.write_via(&c.nodes[&leader].clone(), join("r", 1)).await;
    c.wait_converged().await;
    c.shutdown().await;
}

fn patient_clients(cfg: &mut NodeConfig) {
    quick(cfg);
    cfg.request_timeout = Duration::from_secs(20);
}

/// A follower that can no longer hear its leader, while nothing tells it of another (Pre-Vote
/// keeps it from standing), refuses writes and linearizable reads at once, with the retriable
/// `NoLeader`, instead of holding each until the request times out: its clients go to another
/// node. The leader here is a black hole: its port accepts connections and never answers, as a
/// dropped link does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_cut_off_from_its_leader_refuses_at_once() {
    let mut c = TestCluster::start(3, patient_clients).await;
    c.create_room("r").await;
    let leader = c.wait_leader().await;
    let follower = *c.nodes.keys().find(|&&id| id != leader).unwrap();
    let node = c.nodes[&follower].clone();
    // It forwards to the leader while it hears it.
    c.write_via(&node, join("r", 1)).await;
    let leader_addr = c.configs[&leader].listen_raft;
    let others: Vec<u64> = c
        .nodes
        .keys()
        .copied()
        .filter(|id| *id != follower)
        .collect();
    for id in others {
        c.stop_node(id).await;
    }
    let hole = tokio::net::TcpListener::bind(leader_addr).await.unwrap();
    let held = tokio::spawn(async move {
        let mut conns = Vec::new();
        while let Ok((s, _)) = hole.accept().await {
            conns.push(s);
        }
    });
    assert_eq!(
        node.status().leader,
        Some(leader),
        "it still names the leader"
    );
    let asked = std::time::Instant::now();
    let write = node.write(join("r", 2)).await;
    assert_eq!(write.err(), Some(sluice_raft::ClusterError::NoLeader));
    let read = node.read_linearizable(|_| ()).await;
    assert_eq!(read.err(), Some(sluice_raft::ClusterError::NoLeader));
    // An election timeout (at most 600 ms) and then no more: the requests' own timeout is 20 s.
    assert!(
        asked.elapsed() < Duration::from_secs(5),
        "refused only after {:?}",
        asked.elapsed()
    );
    held.abort();
    c.shutdown().await;
}

/// A leader that no quorum answers any more (its followers gone) refuses writes and
/// linearizable reads at once, with the retriable `NoLeader`, once an election timeout has
/// passed without an acknowledgement, instead of proposing into a log nobody will commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_cut_off_from_its_quorum_refuses_at_once() {
    let mut c = TestCluster::start(3, patient_clients).await;
    c.create_room("r").await;
    let leader = c.wait_leader().await;
    let node = c.nodes[&leader].clone();
    c.write_via(&node, join("r", 1)).await;
    let others: Vec<u64> = c.nodes.keys().copied().filter(|id| *id != leader).collect();
    for id in others {
        c.stop_node(id).await;
    }
    let asked = std::time::Instant::now();
    let write = node.write(join("r", 2)).await;
    assert!(
        matches!(
            write,
            Err(sluice_raft::ClusterError::NoLeader | sluice_raft::ClusterError::Indeterminate(_))
        ),
        "{write:?}"
    );
    let read = node.read_linearizable(|_| ()).await;
    assert_eq!(read.err(), Some(sluice_raft::ClusterError::NoLeader));
    let write = node.write(join("r", 3)).await;
    assert_eq!(write.err(), Some(sluice_raft::ClusterError::NoLeader));
    // An election timeout (at most 600 ms) and a heartbeat: the requests' own timeout is 20 s.
    assert!(
        asked.elapsed() < Duration::from_secs(5),
        "refused only after {:?}",
        asked.elapsed()
    );
    c.shutdown().await;
}

/// A write on a node that knows no leader waits for Raft's metrics to change between its retries
/// instead of spinning. On a runtime whose clock stands still unless every task is idle, a
/// spinning write never reaches its deadline; a waiting one ends with `no_leader` when it does.
#[test]
fn a_write_without_a_leader_waits_between_retries_instead_of_spinning() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .unwrap();
        let r = rt.block_on(async move {
            let mut cfg = NodeConfig::new(1, path, "127.0.0.1:0".parse().unwrap());
            cfg.request_timeout = Duration::from_secs(2);
            let node = sluice_raft::RaftNode::start(cfg).await.unwrap();
            let r = node.write(Command::Tick).await.map(drop);
            node.shutdown().await;
            r
        });
        let _ = tx.send(r);
    });
    let r = rx
        .recv_timeout(Duration::from_secs(120))
        .expect("the write spun: its deadline never came on a clock that moves only when idle");
    assert!(
        matches!(r, Err(ClusterError::NoLeader | ClusterError::Timeout)),
        "{r:?}"
    );
}

/// A command larger than a proposal may hold is refused before it reaches the batcher, whether
/// a follower forwards it to the leader (on the forwarding stream or the unary call) or a client
/// writes it on any node: it becomes no log entry, which no replication message is sized to
/// carry, and the commands forwarded with it still go through. Of one forwarded batch, the
/// leader queues at most what a follower's batcher puts in one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forwarded_command_larger_than_a_proposal_is_refused_and_writes_no_entry() {
    use sluice_raft::node::FORWARDED_BATCH_BYTES_MAX;
    use sluice_raft::{codec, pb};
    use sluice_statemachine::limits::PROPOSAL_BYTES_MAX;
    use sluice_statemachine::ClientKey;
    type Replies = Vec<Result<(Outcome, u64), ClusterError>>;
    let c = TestCluster::start(3, quick).await;
    c.create_room("r").await;
    let leader = c.nodes[&c.wait_leader().await].clone();
    let touches = |visits: u64| Command::TouchFrom {
        room: "r".into(),
        visits: (0..visits)
            .map(|i| (visitor(i), ClientKey([7; 16])))
            .collect(),
    };
    let big = touches(40_000);
    assert!(big.encoded_len() > PROPOSAL_BYTES_MAX);
    let is_big =
        |cmd: &Command| matches!(cmd, Command::TouchFrom { visits, .. } if visits.len() == 40_000);
    let too_large = |r: &Result<(Outcome, u64), ClusterError>| matches!(r, Err(ClusterError::Invalid(m)) if m.contains("bytes"));
    let before = leader.status().last_log_index;
    let mut client = raft_client(&leader.raft_addr().to_string(), Some(test_secret())).await;

    // On the forwarding stream, as a follower sends: the large command alone, then between two
    // joins.
    let batches = vec![
        pb::Payload {
            data: codec::encode(&(1u64, vec![big.clone()])),
        },
        pb::Payload {
            data: codec::encode(&(2u64, vec![join("r", 1), big.clone(), join("r", 2)])),
        },
    ];
    let mut replies = client
        .forward_stream(tokio_stream::iter(batches))
        .await
        .unwrap()
        .into_inner();
    let mut answers = std::collections::BTreeMap::new();
    while let Some(msg) = replies.message().await.unwrap() {
        let (id, results): (u64, Replies) = codec::decode(&msg.data).unwrap();
        answers.insert(id, results);
    }
    assert!(
        answers[&1].len() == 1 && too_large(&answers[&1][0]),
        "{:?}",
        answers[&1]
    );
    let mixed = &answers[&2];
    assert!(
        matches!(mixed[0], Ok((Outcome::Visitor(_), _))),
        "{mixed:?}"
    );
    assert!(too_large(&mixed[1]), "{mixed:?}");
    assert!(
        matches!(mixed[2], Ok((Outcome::Visitor(_), _))),
        "{mixed:?}"
    );
    // The unary call refuses it alike.
    let unary = client
        .forward(pb::Payload {
            data: codec::encode(&vec![big.clone()]),
        })
        .await
        .unwrap()
        .into_inner();
    let unary: Replies = codec::decode(&unary.data).unwrap();
    assert!(unary.len() == 1 && too_large(&unary[0]), "{unary:?}");
    // A write of it on the leader, or on a follower (which does not forward it), too.
    let follower = c.any_follower().clone();
    for node in [&leader, &follower] {
        let got = node.write(big.clone()).await;
        assert!(too_large(&got), "node {}: {got:?}", node.id());
    }

    // Of one forwarded batch, what a follower's batcher puts in one is queued; the rest is
    // answered `Busy`.
    let full = touches(10_000);
    let fit = FORWARDED_BATCH_BYTES_MAX / full.encoded_len();
    assert!((1..8).contains(&fit), "{fit}");
    let results: Replies = codec::decode(
        &client
            .forward(pb::Payload {
                data: codec::encode(&vec![full.clone(); fit + 1]),
            })
            .await
            .unwrap()
            .into_inner()
            .data,
    )
    .unwrap();
    assert!(results[..fit].iter().all(|r| r.is_ok()), "{results:?}");
    assert_eq!(results[fit], Err(ClusterError::Busy));

    // The log holds the joins and the batch's commands that were queued, and never the large
    // command.
    let after = leader.status().last_log_index;
    let entries = leader
        .log_entries(before + 1, after - before)
        .await
        .unwrap();
    let commands: Vec<Command> = entries
        .iter()
        .filter_map(|e| e.proposal.as_deref())
        .flat_map(|p| sluice_statemachine::Proposal::decode(p).unwrap().commands)
        .collect();
    assert!(!commands.iter().any(is_big), "a large command in the log");
    assert_eq!(
        commands
            .iter()
            .filter(|c| matches!(c, Command::Join { .. }))
            .count(),
        2
    );
    assert_eq!(commands.iter().filter(|c| **c == full).count(), fit);
    c.shutdown().await;
}
