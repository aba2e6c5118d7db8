//! A node run as a child process is killed with SIGKILL during a stream of acknowledged writes,
//! then restarted: every acknowledged write is present.

mod common;

use common::*;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use sluice_raft::pb::raft_service_client::RaftServiceClient;
use sluice_raft::{codec, ClusterError, NodeConfig, RaftNode};
use sluice_statemachine::{Command, Outcome};
use std::io::{BufRead, BufReader};
use std::process::{Command as Process, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

async fn forward(
    addr: &str,
    cmds: Vec<Command>,
) -> Option<Vec<Result<(Outcome, u64), ClusterError>>> {
    let mut c = RaftServiceClient::connect(format!("http://{addr}"))
        .await
        .ok()?;
    let reply = c
        .forward(sluice_raft::pb::Payload {
            data: codec::encode(&cmds),
        })
        .await
        .ok()?;
    codec::decode(&reply.into_inner().data).ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_loses_no_acknowledged_write() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("node");
    let mut child = Process::new(env!("CARGO_BIN_EXE_sluice-raft-node"))
        .args([
            "--id",
            "1",
            "--dir",
            data.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
            "--init",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("listening ")
        .expect("address line")
        .to_string();

    // Wait until the node leads and accepts writes.
    wait_for(
        "the child node accepts writes",
        Duration::from_secs(20),
        || {
            let addr = addr.clone();
            async move {
                let cmd = Command::PutRoom {
                    room: "d".into(),
                    config: room_config(),
                };
                matches!(
                    forward(&addr, vec![cmd]).await.as_deref(),
                    Some([Ok((Outcome::Room(_), _))])
                )
            }
        },
    )
    .await;

    // Eight writers stream joins; each acknowledgement is recorded.
    let acked = Arc::new(Mutex::new(Vec::<u64>::new()));
    let mut writers = Vec::new();
    for w in 0..8u64 {
        let (addr, acked) = (addr.clone(), acked.clone());
        writers.push(tokio::spawn(async move {
            for i in 0.. {
                let n = w * 1_000_000 + i;
                match forward(&addr, vec![join("d", n)]).await.as_deref() {
                    Some([Ok((Outcome::Visitor(_), _))]) => acked.lock().unwrap().push(n),
                    _ => return,
                }
            }
        }));
    }
    wait_for(
        "a stream of acknowledged writes",
        Duration::from_secs(30),
        || {
            let n = acked.lock().unwrap().len();
            async move { n >= 400 }
        },
    )
    .await;
    kill(Pid::from_raw(child.id() as i32), Signal::SIGKILL).unwrap();
    child.wait().unwrap();
    for w in writers {
        w.await.unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    assert!(acked.len() >= 400);

    // Restart on the same directory (in this process) and check every acknowledged write.
    let mut cfg = NodeConfig::new(1, &data, "127.0.0.1:0".parse().unwrap());
    quick(&mut cfg);
    let node = RaftNode::start(cfg).await.unwrap();
    wait_for(
        "the restarted node recovers",
        Duration::from_secs(20),
        || {
            let ready = node.is_ready();
            async move { ready }
        },
    )
    .await;
    let missing: Vec<u64> = node
        .read(|st| {
            acked
                .iter()
                .copied()
                .filter(|&n| st.sm.visitor("d", visitor(n)).is_err())
                .collect()
        })
        .unwrap()
        .0;
    assert!(
        missing.is_empty(),
        "{} acknowledged joins lost, e.g. {:?}",
        missing.len(),
        &missing[..missing.len().min(5)]
    );
    node.shutdown().await;
}
