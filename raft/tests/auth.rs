//! The node-to-node port is operator access: whoever can call it can propose commands, change
//! membership and install snapshots. These tests call it as an attacker would, without this
//! cluster's credential, and as an operator repairing what a dead node left behind.

mod common;

use common::*;
use sluice_raft::auth::ClusterSecret;
use sluice_raft::{codec, pb, MembershipOp, NodeAddr};
use sluice_statemachine::Command;
use std::time::Duration;

fn payload<T: serde::Serialize>(v: &T) -> pb::Payload {
    pb::Payload {
        data: codec::encode(v),
    }
}

/// Every call of the service, made with `client`: each one's status code (or OK).
async fn call_everything(
    client: &mut sluice_raft::network::RaftClient,
) -> Vec<(&'static str, tonic::Code)> {
    let code = |r: Result<(), tonic::Status>| r.err().map_or(tonic::Code::Ok, |s| s.code());
    let fake = NodeAddr {
        raft: "127.0.0.1:1".into(),
        http: String::new(),
        grpc: String::new(),
    };
    let commands = vec![
        Command::Pause { room: "r".into() },
        Command::ForceAdmit {
            room: "r".into(),
            count: 10,
        },
        Command::DeleteRoom { room: "r".into() },
    ];
    let mut out = Vec::new();
    out.push((
        "Forward",
        code(client.forward(payload(&commands)).await.map(drop)),
    ));
    out.push((
        "ForwardStream",
        code(
            client
                .forward_stream(tokio_stream::iter(vec![payload(&(1u64, commands.clone()))]))
                .await
                .map(drop),
        ),
    ));
    out.push((
        "Membership",
        code(
            client
                .membership(payload(&MembershipOp::AddLearner {
                    id: 4242,
                    addr: fake,
                }))
                .await
                .map(drop),
        ),
    ));
    out.push((
        "AppendEntries",
        code(client.append_entries(payload(&0u8)).await.map(drop)),
    ));
    out.push((
        "AppendStream",
        code(
            client
                .append_stream(tokio_stream::iter(vec![payload(&0u8)]))
                .await
                .map(drop),
        ),
    ));
    out.push(("Vote", code(client.vote(payload(&0u8)).await.map(drop))));
    let chunk = pb::SnapshotChunk {
        header: Vec::new(),
        data: vec![0; 1 << 20],
    };
    out.push((
        "InstallSnapshot",
        code(
            client
                .install_snapshot(tokio_stream::iter(vec![chunk]))
                .await
                .map(drop),
        ),
    ));
    out.push((
        "ReadIndex",
        code(client.read_index(pb::Empty {}).await.map(drop)),
    ));
    out.push(("Status", code(client.status(pb::Empty {}).await.map(drop))));
    out.push((
        "WallClock",
        code(client.wall_clock(pb::Empty {}).await.map(drop)),
    ));
    out
}

/// With no credential, or another cluster's, every call on every node is refused before its
/// body is looked at, and nothing changes; this cluster's own credential is let through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_without_this_clusters_credential_is_refused_and_nothing_changes() {
    let c = TestCluster::start(3, quick).await;
    c.create_room("r").await;
    let (index, digest) = c.wait_converged().await;
    let members = c.leader().unwrap().status().nodes;
    let other = ClusterSecret::new(b"another-clusters-secret-32-bytes!!").unwrap();
    for (who, secret) in [("no credential", None), ("another cluster's", Some(other))] {
        for node in c.nodes.values() {
            let mut client = raft_client(&node.raft_addr().to_string(), secret.clone()).await;
            for (call, code) in call_everything(&mut client).await {
                assert_eq!(
                    code,
                    tonic::Code::Unauthenticated,
                    "{call} on node {} with {who}",
                    node.id()
                );
            }
        }
    }
    assert_eq!(c.wait_converged().await, (index, digest), "nothing applied");
    let leader = c.leader().unwrap();
    assert_eq!(leader.status().nodes, members, "membership unchanged");
    let room = leader.read(|st| st.sm.room("r")).unwrap().0.unwrap();
    assert!(!room.config.paused);
    assert!(leader.metrics().auth_refused >= 10, "refusals are counted");
    // The right credential: the same calls get past the gate (and are then judged on their
    // contents; the forwarded pause, for one, is applied).
    let mut client = raft_client(&leader.raft_addr().to_string(), Some(test_secret())).await;
    client.status(pb::Empty {}).await.expect("let through");
    client
        .forward(payload(&vec![Command::Pause { room: "r".into() }]))
        .await
        .expect("let through");
    c.wait_converged().await;
    let room = leader.read(|st| st.sm.room("r")).unwrap().0.unwrap();
    assert!(room.config.paused);
    c.shutdown().await;
}

/// A node that was added and promoted but never came (a fake one, or one that died before it
/// caught up) is removed by the operator, and the cluster carries on, also after a restart.
/// While another voter is down too, the promotion cannot commit (the new configuration's
/// quorum is 3 of 4, and only 2 answer), writes stall, and a removal is refused as "in
/// progress": the repair is to bring the down voter back, let the change commit, then remove
/// the node that never came (deploy/README.md, "Membership").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voter_that_never_came_is_removed_by_the_operator() {
    let mut c = TestCluster::start(3, quick).await;
    c.create_room("r").await;
    let fake = NodeAddr {
        raft: "127.0.0.1:1".into(),
        http: String::new(),
        grpc: String::new(),
    };
    c.membership(MembershipOp::AddLearner {
        id: 4242,
        addr: fake,
    })
    .await
    .expect("a learner is added");
    // A follower goes down, then the learner is promoted: the change cannot commit.
    let leader_id = c.wait_leader().await;
    let down = *c.nodes.keys().find(|id| **id != leader_id).unwrap();
    c.stop_node(down).await;
    let leader = c.nodes[&leader_id].clone();
    let promote = tokio::spawn({
        let leader = leader.clone();
        async move { leader.membership(MembershipOp::Promote { id: 4242 }).await }
    });
    wait_for("the promotion is proposed", Duration::from_secs(10), || {
        let voters = leader.status().voters;
        async move { voters.contains(&4242) }
    })
    .await;
    let stalled = tokio::time::timeout(Duration::from_secs(2), leader.write(join("r", 1))).await;
    assert!(
        !matches!(stalled, Ok(Ok(_))),
        "a write commits only with 3 of 4 voters: {stalled:?}"
    );
    let refused = leader.membership(MembershipOp::Remove { id: 4242 }).await;
    assert!(
        refused.is_err(),
        "a second change waits for the first: {refused:?}"
    );
    // The repair: the voter comes back, the promotion commits, the node that never came is
    // removed.
    c.start_node(down).await;
    let promoted = promote.await.unwrap();
    assert!(promoted.is_ok(), "{promoted:?}");
    let s = c
        .membership(MembershipOp::Remove { id: 4242 })
        .await
        .expect("removed");
    assert_eq!(s.voters, vec![1, 2, 3]);
    c.write_via(c.leader().unwrap(), join("r", 2)).await;
    // And the cluster restarts as the three it is.
    drop(leader);
    for id in [1, 2, 3] {
        c.stop_node(id).await;
    }
    for id in [1, 2, 3] {
        c.start_node(id).await;
    }
    c.wait_leader().await;
    c.write_via(c.leader().unwrap(), join("r", 3)).await;
    assert_eq!(
        c.wait_converged().await.0,
        c.leader().unwrap().status().last_log_index
    );
    c.shutdown().await;
}
