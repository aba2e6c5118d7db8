//! Sluice's Raft layer: the only crate that knows Raft, RocksDB and durability.
//!
//! Map of the crate:
//! - [`archive`]: the log archived before it is purged, and its replay (its files' format is
//!   the private `segment`'s).
//! - [`node`]: [`RaftNode`]: the start function (config → storage → network → Raft → server),
//!   the write batcher, the tick proposer, reads and membership.
//! - [`log_store`]: the Raft log and vote in RocksDB with group commit.
//! - [`sm_store`]: `sluice-statemachine` behind a lock, with durable snapshot files (whose
//!   format, and backups', is `snapshot_file`'s).
//! - [`network`] and [`service`]: the tonic node-to-node transport, client and server;
//!   [`transport`]: the byte streams under it (TCP, or a simulation's network).
//! - [`auth`]: the cluster secret every node-to-node call carries (its listener is bounded by
//!   `sluice-gate`: connections in all and per address, a deadline for the first bytes).
//! - The cluster's time, the lower median of the voters' wall clocks ([`WallClock`], from the
//!   private `clock`).
//! - [`types`]: openraft's type configuration; [`codec`]: the versioned encoding of everything
//!   stored or sent; [`ClusterError`], every failure to reach an outcome; [`metrics`]: a latency
//!   histogram. Modules not listed are the crate's own.

pub mod archive;
pub mod auth;
mod clock;
pub mod codec;
mod error;
mod forward;
mod leader_contact;
pub mod ledger_store;
pub mod log_store;
pub mod metrics;
pub mod network;
pub mod node;
mod reply;
pub mod runtime;
mod segment;
pub mod service;
pub mod sm_store;
mod snapshot_file;
mod storage;
pub mod transport;
pub mod types;

/// Generated protobuf types and gRPC stubs of the node-to-node service.
#[allow(missing_docs, clippy::all, missing_debug_implementations)]
pub mod pb {
    tonic::include_proto!("sluice.raft.v1");
}

pub use clock::WallClock;
pub use error::ClusterError;
pub use network::TlsMaterial;
pub use node::{
    wall_ms, Broken, ClusterStatus, LogRecord, MembershipOp, NodeConfig, NodeMetrics, RaftNode,
    Replication, Simulation, LOG_PAGE_MAX,
};
pub use sm_store::SmState;
pub use types::{NodeAddr, TypeConfig};

/// Node `node` snapshots every `every × (1 + (node mod 5)/16)` entries. The periods differ per
/// node so that replicas do not all stop to encode and fsync a snapshot at the same log index: a
/// majority stays responsive while one node snapshots, also when replicas share hardware.
pub(crate) fn snapshot_policy(every: u64, node: u64) -> openraft::SnapshotPolicy {
    let every = every.max(1);
    openraft::SnapshotPolicy::LogsSinceLast(every + every * (node % 5) / 16)
}

#[cfg(test)]
mod policy_tests {
    use super::snapshot_policy;
    use openraft::SnapshotPolicy::LogsSinceLast;

    #[test]
    fn snapshot_periods_differ_per_node_and_never_shrink() {
        let periods: Vec<u64> = (1..=5)
            .map(|n| match snapshot_policy(20_000, n) {
                LogsSinceLast(p) => p,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(periods, vec![21_250, 22_500, 23_750, 25_000, 20_000]);
        assert!(matches!(snapshot_policy(0, 3), LogsSinceLast(1)));
    }
}
