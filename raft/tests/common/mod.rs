//! An in-process cluster of real nodes: each with its own RocksDB directory and loopback port,
//! talking gRPC to each other.
#![allow(dead_code)]

use sluice_raft::{ClusterError, MembershipOp, NodeAddr, NodeConfig, RaftNode};
use sluice_statemachine::{Command, Outcome, RoomConfig, VisitorId};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use tempfile::TempDir;

pub use sluice_testkit::wait_for;

#[derive(Debug)]
pub struct TestCluster {
    pub dir: TempDir,
    pub nodes: BTreeMap<u64, RaftNode>,
    pub configs: BTreeMap<u64, NodeConfig>,
    pub tune: fn(&mut NodeConfig),
}

pub fn quick(cfg: &mut NodeConfig) {
    cfg.heartbeat_ms = 50;
    cfg.election_timeout_ms = (300, 600);
}

pub fn visitor(n: u64) -> VisitorId {
    VisitorId::from_u128(n as u128 + 1_000_000)
}

pub fn join(room: &str, n: u64) -> Command {
    Command::Join {
        room: room.into(),
        visitor: visitor(n),
    }
}

pub fn room_config() -> RoomConfig {
    RoomConfig {
        capacity: 1_000_000,
        admit_per_minute: 60_000_000,
        max_waiting: 1_000_000,
        session_ttl_secs: 3_600,
        waiter_ttl_secs: 3_600,
        ..RoomConfig::default()
    }
}

impl TestCluster {
    /// Starts `n` nodes (ids 1..=n) and initializes them as one cluster.
    pub async fn start(n: u64, tune: fn(&mut NodeConfig)) -> Self {
        let mut c = TestCluster {
            dir: tempfile::tempdir().unwrap(),
            nodes: BTreeMap::new(),
            configs: BTreeMap::new(),
            tune,
        };
        for id in 1..=n {
            c.start_node(id).await;
        }
        let members: BTreeMap<u64, NodeAddr> =
            c.nodes.iter().map(|(id, n)| (*id, n.addr())).collect();
        c.nodes[&1].initialize(members).await.unwrap();
        c.wait_leader().await;
        c
    }

    pub fn config_for(&self, id: u64) -> NodeConfig {
        let mut cfg = NodeConfig::new(
            id,
            self.dir.path().join(format!("n{id}")),
            "127.0.0.1:0".parse().unwrap(),
        );
        cfg.cluster_secret = Some(test_secret());
        (self.tune)(&mut cfg);
        cfg
    }

    /// Starts node `id` with a fresh config (first start) or its previous one (restart, same port).
    pub async fn start_node(&mut self, id: u64) -> RaftNode {
        let cfg = match self.configs.get(&id) {
            Some(c) => c.clone(),
            None => self.config_for(id),
        };
        let node = RaftNode::start(cfg.clone()).await.unwrap();
        let mut kept = cfg;
        kept.listen_raft = node.raft_addr();
        kept.advertise = node.addr();
        self.configs.insert(id, kept);
        self.nodes.insert(id, node.clone());
        node
    }

    pub async fn stop_node(&mut self, id: u64) {
        if let Some(n) = self.nodes.remove(&id) {
            n.shutdown().await;
        }
    }

    pub async fn wait_leader(&self) -> u64 {
        self.wait_leader_within(Duration::from_secs(10)).await
    }

    pub async fn wait_leader_within(&self, timeout: Duration) -> u64 {
        let mut leader = 0;
        wait_for("a leader", timeout, || {
            let l = self
                .nodes
                .values()
                .find(|n| n.is_leader() && n.is_ready())
                .map(|n| n.id());
            leader = l.unwrap_or(0);
            async move { l.is_some() }
        })
        .await;
        leader
    }

    pub fn leader(&self) -> Option<&RaftNode> {
        self.nodes.values().find(|n| n.is_leader())
    }

    pub fn any_follower(&self) -> &RaftNode {
        self.nodes
            .values()
            .find(|n| !n.is_leader())
            .expect("a follower")
    }

    /// Writes through `node`, retrying retriable errors (joins are idempotent).
    pub async fn write_via(&self, node: &RaftNode, cmd: Command) -> Outcome {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            match node.write(cmd.clone()).await {
                Ok((o, _)) => return o,
                Err(e) if e.is_retriable() && Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(25)).await
                }
                Err(e) => panic!("write failed: {e}"),
            }
        }
    }

    pub async fn create_room(&self, room: &str) {
        let node = self.nodes.values().next().unwrap();
        let o = self
            .write_via(
                node,
                Command::PutRoom {
                    room: room.into(),
                    config: room_config(),
                },
            )
            .await;
        assert!(matches!(o, Outcome::Room(_)), "{o:?}");
    }

    /// Waits until every running node has applied `index` and reports the same digest there.
    pub async fn wait_converged(&self) -> (u64, String) {
        let mut result = (0, String::new());
        wait_for(
            "all nodes at the same applied index and digest",
            Duration::from_secs(20),
            || {
                let digests: Vec<Result<(u64, String), ClusterError>> =
                    self.nodes.values().map(|n| n.digest()).collect();
                let ok = digests.iter().all(|d| d.is_ok())
                    && digests.windows(2).all(|w| w[0] == w[1])
                    && self.nodes.values().all(|n| {
                        let s = n.status();
                        s.applied_index == s.last_log_index
                    });
                if ok {
                    result = digests[0].clone().unwrap();
                }
                async move { ok }
            },
        )
        .await;
        result
    }

    pub async fn membership(
        &self,
        op: MembershipOp,
    ) -> Result<sluice_raft::ClusterStatus, ClusterError> {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let node = self
                .leader()
                .or_else(|| self.nodes.values().next())
                .unwrap();
            match node.membership(op.clone()).await {
                Err(e) if e.is_retriable() && Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(50)).await
                }
                r => return r,
            }
        }
    }

    pub async fn shutdown(mut self) {
        let ids: Vec<u64> = self.nodes.keys().copied().collect();
        for id in ids {
            self.stop_node(id).await;
        }
    }
}

/// The secret of the test clusters: every node-to-node call carries its credential.
pub fn test_secret() -> sluice_raft::auth::ClusterSecret {
    sluice_raft::auth::ClusterSecret::new(b"the-test-clusters-secret-of-32-bytes").unwrap()
}

/// A node-to-node client for `addr` carrying `secret`'s credential (none if `None`).
pub async fn raft_client(
    addr: &str,
    secret: Option<sluice_raft::auth::ClusterSecret>,
) -> sluice_raft::network::RaftClient {
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    sluice_raft::pb::raft_service_client::RaftServiceClient::with_interceptor(
        channel,
        sluice_raft::auth::Credential::new(secret),
    )
}
