//! Sluice's black-box test harness: real `sluice serve` processes in network namespaces, faults
//! on a seeded schedule, client workloads that record histories, and independent checkers.
//! It reaches the nodes only over the network, as a client would.
//!
//! Map of the crate:
//! - [`net`]: namespaces, veth pairs, a bridge, and nftables faults (partitions, packet loss).
//! - [`db`]: the `sluice` processes (authenticating each other by a cluster secret or mutual
//!   TLS): start, SIGKILL, SIGSTOP/SIGCONT, libfaketime clocks,
//!   membership changes.
//! - [`lazyfs`]: the FUSE filesystem that forgets unsynced writes (run as `sluice-lazyfs`,
//!   mounted on the nodes' data directories for the `kill-lose-unsynced` fault).
//! - [`nemesis`]: the fault kinds and their seeded schedule.
//! - [`workload`]: queue-append (list-append), admission, lottery.
//! - [`history`], [`client`], [`ticket`]: recording operations, classifying answers, minting
//!   tickets with known visitor ids.
//! - [`checker`]: strict serializability (via `adya`), capacity, rate, FIFO, no lost writes,
//!   convergence, lottery replay.
//! - [`liveness`]: acknowledged writes while healthy and under each fault (every run's
//!   summary).
//! - [`runner`]: one run end to end.
//! - [`bench`](mod@bench): the load generator and the side-by-side benchmark against etcd and a
//!   hello-world server.
//! - [`etcd`]: etcd under the same partition faults and schedule, for the liveness comparison.

pub mod bench;
pub mod checker;
pub mod client;
pub mod db;
pub mod etcd;
pub mod history;
pub mod lazyfs;
pub mod liveness;
pub mod nemesis;
pub mod net;
pub mod proxy;
pub mod runner;
pub mod ticket;
pub mod workload;

/// Generated gRPC clients: etcd's KV service (the subset used) and Sluice's public API.
#[allow(missing_docs, clippy::all, missing_debug_implementations)]
pub mod pb {
    /// etcd v3 KV.
    pub mod etcd {
        tonic::include_proto!("etcdserverpb");
    }
    /// Sluice's public API.
    pub mod sluice {
        tonic::include_proto!("sluice.v1");
    }
}
