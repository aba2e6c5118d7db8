//! How a node runs: its configuration, and the node-to-node listener's limits.

use crate::auth::ClusterSecret;
use crate::clock::WallClock;
use crate::network::TlsMaterial;
use crate::transport::Transport;
use crate::types::NodeAddr;
use sluice_statemachine::draw::DrawKey;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

/// The leader takes a snapshot every this many times `snapshot_every` entries (see
/// [`crate::sm_store::SnapshotDeferral`]): encoding one pauses every client write while it runs.
pub(super) const LEADER_SNAPSHOT_FACTOR: u64 = 4;
/// Connections the node-to-node listener holds open at once. Each peer keeps one (all calls
/// share it), so this leaves room for many more nodes, tools and reconnects, and for clients
/// without credentials, each closed within [`RAFT_AUTHENTICATE_WITHIN`].
pub const RAFT_CONNECTIONS_MAX: usize = 1_024;
/// Of [`RAFT_CONNECTIONS_MAX`], the connections kept for the cluster's members (from the
/// addresses their Raft addresses resolve to): connections from anywhere else, which may take
/// all the rest, never keep the nodes from reaching each other.
pub const RAFT_CONNECTIONS_RESERVED: usize = 64;
/// How often a node looks up its members' Raft addresses again (a name may move to another
/// address), for [`RAFT_CONNECTIONS_RESERVED`].
pub const MEMBER_ADDRESSES_EVERY: Duration = Duration::from_secs(10);
/// Connections the node-to-node listener holds open from one address (nodes on one machine
/// share an address).
pub const RAFT_CONNECTIONS_PER_ADDRESS_MAX: usize = 32;
/// How long a connection to the node-to-node listener may take to send its first bytes, to
/// finish its TLS handshake, and to make its first call that passes the cluster's credential
/// check; then it is closed. Nodes connect in milliseconds; a client without credentials holds
/// a slot no longer than this.
pub const RAFT_AUTHENTICATE_WITHIN: Duration = Duration::from_secs(3);
/// Calls one node-to-node connection may have in flight (replication streams, forwarding,
/// clock samples and reads all share a peer's connection).
pub const RAFT_STREAMS_PER_CONNECTION_MAX: u32 = 1_024;

/// How a node runs.
#[derive(Clone, Debug)]
pub struct NodeConfig {
    /// This node's id; never reused for another node.
    pub id: u64,
    /// Where RocksDB and snapshots live.
    pub data_dir: PathBuf,
    /// Address the node-to-node service listens on (port 0 picks one).
    pub listen_raft: SocketAddr,
    /// Addresses other nodes and clients use; an empty `raft` is filled with the bound address.
    pub advertise: NodeAddr,
    /// Mutual TLS between nodes.
    pub tls: Option<TlsMaterial>,
    /// The cluster secret's credential, carried by every node-to-node call and required of
    /// every call received (see [`crate::ClusterSecret`]). Without it (and without TLS) anyone who can
    /// reach the node-to-node address controls the cluster: keep such a node on loopback.
    pub cluster_secret: Option<ClusterSecret>,
    /// Secrets whose credentials are accepted from other nodes besides `cluster_secret`'s, but
    /// never sent: during a rotation, the next secret (before nodes send it) or the previous
    /// one (while some still send it).
    pub cluster_secrets_also_accepted: Vec<ClusterSecret>,
    /// Leader heartbeat interval.
    pub heartbeat_ms: u64,
    /// Election timeout range.
    pub election_timeout_ms: (u64, u64),
    /// A node whose election timer fires first asks whether a majority would vote for it
    /// (Pre-Vote), and raises its term only if so: a node cut off from the leader, or from a
    /// majority, does not disturb a leader the others still hear. (A follower that heard from a
    /// leader within the election timeout refuses votes either way: openraft's leader lease.)
    pub pre_vote: bool,
    /// Entries between snapshots (the leader waits four times as long; each node adds up to a
    /// quarter, so that nodes take theirs at different log indexes).
    pub snapshot_every: u64,
    /// Log entries kept behind a snapshot for lagging followers.
    pub logs_kept_after_snapshot: u64,
    /// How often the leader checks whether a tick is due.
    pub tick_interval_ms: u64,
    /// Commands that may wait for a proposal before writes are refused as `Busy`.
    pub write_queue_max: usize,
    /// Proposals submitted and not yet applied, at most. Writes that arrive while all are in
    /// flight queue and share the next proposal, so a small number gives large batches under load
    /// and costs one commit's wait at most. (A follower forwards with its own, larger limit.)
    pub proposals_in_flight: usize,
    /// Deadline for one write or linearizable read.
    pub request_timeout: Duration,
    /// This node's wall clock (the system's; shifted only to test clock faults).
    pub wall_clock: WallClock,
    /// The key room draw secrets derive from: the same on every node (see
    /// `sluice_statemachine::draw`).
    pub draw_key: DrawKey,
    /// The admission ledger's retention on this node (`None`: no records are kept).
    pub ledger: Option<LedgerRetention>,
    /// Where log entries are archived before they are purged (`None`: not archived).
    pub archive: Option<ArchiveConfig>,
    /// What a simulation replaces (the network, the WAL's syncs); `None` in the product.
    pub simulation: Option<Simulation>,
}

/// The parts of a node a whole-cluster simulation replaces with its own.
#[derive(Clone, Debug)]
pub struct Simulation {
    /// The network between nodes (see [`crate::sim::Transport`]).
    pub transport: Arc<dyn Transport>,
    /// How long each WAL sync takes; syncs run on the node's (simulated) runtime.
    pub wal_sync_takes: Duration,
    /// The last log index whose append was synced, kept by the simulation across the node's
    /// crashes (see [`crate::log_store::forget_unsynced`]).
    pub wal_synced: Arc<AtomicU64>,
    /// A known bug put back, to show that the simulation finds it.
    pub broken: Option<Broken>,
}

/// Bugs a simulation can put back into a node (never in the product).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Broken {
    /// Appends are reported durable before the WAL is synced.
    AckBeforeSync,
    /// A restarted leader resumes its old term (openraft's leader restore), which is unsafe when
    /// a crash lost entries that followers already hold.
    LeaderRestore,
}

/// Where and how long a node archives its log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArchiveConfig {
    /// The directory (one per node).
    pub dir: PathBuf,
    /// Segments older than this are dropped once a newer base snapshot allows (`None`: kept).
    pub keep: Option<Duration>,
}

/// How long a node keeps ledger records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LedgerRetention {
    /// Records older than this (log time) are removed.
    pub max_age: Duration,
    /// At most this many records (about), the oldest removed first.
    pub records_max: u64,
}

impl Default for LedgerRetention {
    fn default() -> Self {
        Self {
            max_age: Duration::from_secs(90 * 86_400),
            records_max: LEDGER_RECORDS_MAX,
        }
    }
}

/// The default bound on the ledger records a node keeps (about 100 bytes each on disk).
pub const LEDGER_RECORDS_MAX: u64 = 200_000_000;

impl NodeConfig {
    /// Defaults for node `id` keeping data in `data_dir` and listening on `listen_raft`.
    pub fn new(id: u64, data_dir: impl Into<PathBuf>, listen_raft: SocketAddr) -> Self {
        Self {
            id,
            data_dir: data_dir.into(),
            listen_raft,
            advertise: NodeAddr::default(),
            tls: None,
            cluster_secret: None,
            cluster_secrets_also_accepted: Vec::new(),
            heartbeat_ms: 100,
            election_timeout_ms: (500, 1_000),
            pre_vote: true,
            snapshot_every: 20_000,
            logs_kept_after_snapshot: 5_000,
            tick_interval_ms: 20,
            write_queue_max: 200_000,
            proposals_in_flight: 2,
            request_timeout: Duration::from_secs(5),
            wall_clock: WallClock::system(),
            draw_key: DrawKey::default(),
            ledger: Some(LedgerRetention::default()),
            archive: None,
            simulation: None,
        }
    }
}
