//! Mutual TLS between nodes: a cluster of nodes with certificates from one CA works; a node whose
//! certificate comes from another CA cannot join or talk to its peers; a client without a
//! certificate cannot reach the node-to-node service.

mod common;

use common::*;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use sluice_raft::{MembershipOp, NodeAddr, NodeConfig, RaftNode, TlsMaterial};
use std::collections::BTreeMap;
use std::time::Duration;

struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl Ca {
    fn new(name: &str) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        Ca {
            issuer: CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap(),
        }
    }

    fn node(&self) -> TlsMaterial {
        let key = KeyPair::generate().unwrap();
        let params =
            CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()]).unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        TlsMaterial {
            ca_pem: self.issuer.pem().into_bytes(),
            cert_pem: cert.pem().into_bytes(),
            key_pem: key.serialize_pem().into_bytes(),
            server_name: None,
        }
    }
}

async fn start(dir: &std::path::Path, id: u64, tls: TlsMaterial) -> RaftNode {
    let mut cfg = NodeConfig::new(
        id,
        dir.join(format!("n{id}")),
        "127.0.0.1:0".parse().unwrap(),
    );
    quick(&mut cfg);
    cfg.tls = Some(tls);
    RaftNode::start(cfg).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_between_nodes() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new("sluice test ca");
    let mut nodes = Vec::new();
    for id in 1..=3 {
        nodes.push(start(dir.path(), id, ca.node()).await);
    }
    let members: BTreeMap<u64, NodeAddr> = nodes.iter().map(|n| (n.id(), n.addr())).collect();
    nodes[0].initialize(members).await.unwrap();
    wait_for("a leader over TLS", Duration::from_secs(15), || {
        let ok = nodes.iter().any(|n| n.is_leader() && n.is_ready());
        async move { ok }
    })
    .await;
    let leader = nodes.iter().find(|n| n.is_leader()).unwrap().clone();
    let follower = nodes.iter().find(|n| !n.is_leader()).unwrap().clone();
    // Writes through a follower cross TLS twice (forward, then replication).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        match follower
            .write(sluice_statemachine::Command::PutRoom {
                room: "r".into(),
                config: room_config(),
            })
            .await
        {
            Ok(_) => break,
            Err(e) if e.is_retriable() && std::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await
            }
            Err(e) => panic!("{e}"),
        }
    }

    // A node with a certificate from another CA is added as a learner but never receives the log.
    let rogue = start(dir.path(), 4, Ca::new("other ca").node()).await;
    leader
        .membership(MembershipOp::AddLearner {
            id: 4,
            addr: rogue.addr(),
        })
        .await
        .unwrap();
    for i in 0..20 {
        follower.write(join("r", i)).await.unwrap();
    }
    wait_for(
        "the honest nodes apply the writes",
        Duration::from_secs(10),
        || {
            let done = nodes.iter().all(|n| {
                n.read(|st| st.sm.room("r").map(|r| r.totals.joined))
                    .ok()
                    .and_then(|(j, _)| j)
                    == Some(20)
            });
            async move { done }
        },
    )
    .await;
    let s = rogue.status();
    assert_eq!(
        s.applied_index, 0,
        "the rogue node must not receive entries"
    );
    let lag = leader
        .status()
        .replication
        .get(&4)
        .map(|r| r.matched_index)
        .unwrap_or(0);
    assert_eq!(lag, 0, "the leader never matched the rogue node's log");

    // A plaintext client is refused by a TLS node.
    let plain = sluice_raft::pb::raft_service_client::RaftServiceClient::connect(format!(
        "http://{}",
        leader.raft_addr()
    ))
    .await;
    let refused = match plain {
        Err(_) => true,
        Ok(mut c) => c.status(sluice_raft::pb::Empty {}).await.is_err(),
    };
    assert!(refused);
    rogue.shutdown().await;
    for n in nodes {
        n.shutdown().await;
    }
}
