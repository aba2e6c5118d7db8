//! Sluice's Raft layer: the only crate that knows Raft, RocksDB and durability.
//!
//! Its surface is [`RaftNode`] (started from a [`NodeConfig`]), the errors it returns
//! ([`ClusterError`]), and the few values the operations above read: the committed state
//! ([`SmState`]), the cluster's view ([`ClusterStatus`], [`NodeMetrics`], [`LogRecord`],
//! [`LatencyHistogram`]), the ledger's pages ([`LedgerQuery`], [`LedgerPage`]), the cluster's
//! time ([`WallClock`]), the archive's [`replay`] and seeding a node from a backup
//! ([`seed_from_backup`]). [`sim`] holds the hooks a deterministic simulation drives.
//! Every module is private; this crate's own tests and benches reach them through the
//! `test-support` feature.
//!
//! Map of the modules:
//! - `node`: the start function (config → storage → network → Raft → server), the write
//!   batcher, the tick proposer, reads and membership.
//! - `log_store`: the Raft log and vote in RocksDB with group commit; `ledger_store`: the ledger
//!   of applied commands; `storage`: the threads every store hands its RocksDB work to.
//! - `sm_store`: `sluice-statemachine` behind a lock, with durable snapshot files (whose format,
//!   and backups', is `snapshot_file`'s).
//! - `archive`: the log archived before it is purged, and its replay (files in `segment`'s
//!   format).
//! - `network` and `service`: the tonic node-to-node transport, client and server; `transport`:
//!   the byte streams under it (TCP, or a simulation's network); `auth`: the cluster secret
//!   every node-to-node call carries (its listener is bounded by `sluice-gate`).
//! - `clock`: the cluster's time, the lower median of the voters' wall clocks.
//! - `types`: openraft's type configuration; `codec`: the versioned encoding of everything
//!   stored or sent; `error`: every failure to reach an outcome; `metrics`: a latency histogram.

/// Declares modules private, or public under the `test-support` feature (for this crate's own
/// tests and benches, which build stores and craft node-to-node calls directly).
macro_rules! internal_modules {
    ($($name:ident),* $(,)?) => {$(
        #[cfg(feature = "test-support")]
        #[doc(hidden)]
        pub mod $name;
        #[cfg(not(feature = "test-support"))]
        mod $name;
    )*};
}

internal_modules!(
    archive,
    auth,
    codec,
    ledger_store,
    log_store,
    network,
    node,
    service,
    sm_store,
    types
);
mod clock;
mod error;
mod forward;
pub mod group;
mod leader_contact;
mod metrics;
mod reply;
mod runtime;
mod segment;
mod snapshot_file;
mod storage;
mod transport;

/// Generated protobuf types and gRPC stubs of the node-to-node service.
#[cfg(feature = "test-support")]
#[doc(hidden)]
#[allow(missing_docs, clippy::all, missing_debug_implementations)]
pub mod pb {
    tonic::include_proto!("sluice.raft.v1");
}
#[cfg(not(feature = "test-support"))]
#[allow(missing_docs, clippy::all, missing_debug_implementations, dead_code)]
mod pb {
    tonic::include_proto!("sluice.raft.v1");
}

pub use archive::{replay, ReplayOptions, ReplayReport};
pub use auth::{ClusterSecret, SECRET_BYTES_MIN};
pub use clock::WallClock;
pub use error::ClusterError;
pub use group::GroupId;
pub use ledger_store::{LedgerPage, LedgerQuery, LEDGER_PAGE_MAX};
pub use metrics::{HistogramSnapshot, LatencyHistogram};
pub use network::TlsMaterial;
pub use node::{
    wall_ms, ArchiveConfig, Broken, ClusterStatus, LedgerRetention, LogRecord, MembershipOp,
    NodeConfig, NodeMetrics, RaftNode, Replication, Simulation, LOG_PAGE_MAX,
};
pub use sm_store::{seed_from_backup, SmState};
pub use types::NodeAddr;

/// What a deterministic simulation drives: the byte streams between nodes ([`Transport`](sim::Transport), set
/// in [`NodeConfig`]), the thread's seed for openraft's randomness, and a crash that loses what
/// the disk had not yet synced.
pub mod sim {
    pub use crate::log_store::{forget_unsynced, forget_unsynced_in, open_db_retrying};
    pub use crate::runtime::seed_this_thread;
    pub use crate::transport::{BoxIo, Incoming, Transport};
}

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
