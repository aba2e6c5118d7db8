//! A bare Raft node for crash tests: `sluice-raft-node --id N --dir DIR --listen ADDR [--init]`.
//! With `--init` it initializes a single-node cluster of itself. It serves the node-to-node
//! service until killed; clients write through its `Forward` RPC.

use sluice_raft::{NodeConfig, RaftNode};
use std::collections::BTreeMap;

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let id: u64 = arg(&args, "--id").ok_or("--id is required")?.parse()?;
    let dir = arg(&args, "--dir").ok_or("--dir is required")?;
    let listen = arg(&args, "--listen")
        .ok_or("--listen is required")?
        .parse()?;
    let node = RaftNode::start(NodeConfig::new(id, dir, listen)).await?;
    if args.iter().any(|a| a == "--init") {
        node.initialize(BTreeMap::from([(id, node.addr())])).await?;
    }
    println!("listening {}", node.raft_addr());
    tokio::signal::ctrl_c().await?;
    node.shutdown().await;
    Ok(())
}
