//! One Sluice node: config → storage → network → Raft → server, plus the leader's duties.
//!
//! - Writes: commands queue on a bounded channel; one batcher drains it into proposals (many
//!   commands per log entry), stamps each with the cluster's time (`clock.rs`: the lower median
//!   of the voters' wall clocks as the leader sees them), and submits them to Raft
//!   in order with a few proposals in flight. On a follower the batch is forwarded to the
//!   leader on a long-lived stream (`forward.rs`), where its commands join the leader's own
//!   queue. A write that found no leader is retried until its deadline; a write whose fate is
//!   unknown reports `Indeterminate`.
//! - Ticks: while leader, proposes `Tick` whenever the state machine says something is due.
//! - Reads: local reads of applied state (with the applied index), and linearizable reads via the
//!   leader's read index, on any node.
//! - Membership: initialize, add learner, promote, remove; node ids are never reused.

use crate::auth::{ClusterSecret, Gatekeeper};
use crate::clock::{ClusterClock, WallClock};
use crate::error::ClusterError;
use crate::forward::Forwarder;
use crate::leader_contact::LeaderContact;
use crate::ledger_store::{LedgerPage, LedgerQuery, LedgerStore};
use crate::log_store::{open_db, LogStore};
use crate::metrics::LatencyHistogram;
use crate::network::{NetworkFactory, Peers, TlsMaterial};
use crate::pb;
use crate::pb::raft_service_server::RaftServiceServer;
use crate::service::{RaftRpc, MESSAGE_BYTES_MAX};
use crate::sm_store::{SmState, SmStore, SnapshotDeferral};
use crate::transport::Transport;
use crate::types::{NodeAddr, Raft, Request, TypeConfig, Vote};
use crate::{codec, snapshot_policy};
use futures::StreamExt;
use openraft::async_runtime::WatchReceiver;
use openraft::errors::{ClientWriteError, RaftError};
use openraft::impls::ProgressResponder;
use openraft::raft::ClientWriteResult;
use openraft::{ChangeMembers, ReadPolicy, ServerState};
use serde::{Deserialize, Serialize};
use sluice_statemachine::draw::DrawKey;
use sluice_statemachine::{digest_hex, Command, Outcome, Proposal};
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Most commands the batcher puts in one proposal (log entry). It is below what an entry may
/// hold at all ([`COMMANDS_PER_PROPOSAL_MAX`](sluice_statemachine::limits::COMMANDS_PER_PROPOSAL_MAX),
/// which every replica checks when it decodes one), so a batch is never refused for its size.
pub const BATCH_COMMANDS_MAX: usize = 1_024;
const _: () = assert!(BATCH_COMMANDS_MAX <= sluice_statemachine::limits::COMMANDS_PER_PROPOSAL_MAX);
/// Batches a follower keeps in flight to the leader on its forwarding stream; what arrives while
/// all are out shares the next one. The leader batches forwarded commands into its own proposals,
/// so a follower holding them back only adds a wait (`sluice-jepsen bench`: 2 in flight left
/// forwarded joins ~2.7 ms in the follower's queue, 64 left 0.35 ms).
const FORWARDS_IN_FLIGHT: usize = 64;
/// Longest a new leader waits, once per term, for enough voters' clocks to stamp its first entry.
const CLOCK_AGREEMENT_WAIT: Duration = Duration::from_millis(500);
/// The leader takes a snapshot every this many times `snapshot_every` entries (see
/// [`SnapshotDeferral`]): encoding one pauses every client write while it runs.
const LEADER_SNAPSHOT_FACTOR: u64 = 4;
/// Connections the node-to-node listener holds open at once. Each peer keeps one (all calls
/// share it), so this leaves room for many more nodes, tools and reconnects, and for clients
/// without credentials, each closed within [`RAFT_AUTHENTICATE_WITHIN`].
pub const RAFT_CONNECTIONS_MAX: usize = 1_024;
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
    /// every call received (see [`crate::auth`]). Without it (and without TLS) anyone who can
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
    /// The network between nodes (see [`crate::transport`]).
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

/// Where the node-to-node service takes its connections from.
enum Listening {
    Tcp(tokio::net::TcpListener),
    Custom(SocketAddr, crate::transport::Incoming),
}

/// A change of cluster membership.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MembershipOp {
    /// Add a node as a learner (it replicates but does not vote).
    AddLearner {
        /// A node id never used in this cluster before.
        id: u64,
        /// Its addresses.
        addr: NodeAddr,
    },
    /// Make a learner a voter.
    Promote {
        /// The learner.
        id: u64,
    },
    /// Remove a voter or learner from the cluster for good.
    Remove {
        /// The node.
        id: u64,
    },
}

/// How far one follower is behind the leader.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Replication {
    /// The follower's last log index known to match the leader's.
    pub matched_index: u64,
    /// Entries the follower is behind the leader's last log index.
    pub lag: u64,
}

/// A node's view of the cluster.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterStatus {
    /// This node.
    pub id: u64,
    /// `Leader`, `Follower`, `Candidate`, `Learner` or `Shutdown`.
    pub state: String,
    /// The leader this node knows of.
    pub leader: Option<u64>,
    /// Current term.
    pub term: u64,
    /// Last log index on this node.
    pub last_log_index: u64,
    /// Highest index known committed.
    pub committed_index: u64,
    /// Highest index applied to the state machine here.
    pub applied_index: u64,
    /// Index of the last snapshot.
    pub snapshot_index: u64,
    /// Voters.
    pub voters: Vec<u64>,
    /// Learners.
    pub learners: Vec<u64>,
    /// Every member's addresses.
    pub nodes: BTreeMap<u64, NodeAddr>,
    /// Per follower replication (on the leader only).
    pub replication: BTreeMap<u64, Replication>,
    /// Has this node recovered its state and may serve reads?
    pub ready: bool,
    /// The state machine's log clock, ms since the epoch.
    pub clock_ms: u64,
}

struct Pending {
    cmd: Command,
    /// Forwarded here by a follower: proposed only while this node leads, never forwarded on.
    forwarded: bool,
    tx: Waiter,
    queued: Instant,
}

/// A command's outcome and the index of the entry that carried it.
pub(crate) type Reply = Result<(Outcome, u64), ClusterError>;
/// Where a queued command's reply goes.
pub(crate) type Waiter = oneshot::Sender<Reply>;

/// Shared internals of a node.
pub struct NodeInner {
    pub(crate) id: u64,
    pub(crate) raft: Raft,
    sm: Arc<RwLock<SmState>>,
    peers: Peers,
    queue: mpsc::Sender<Pending>,
    ready: AtomicBool,
    /// The cluster's time as this node sees it; the leader stamps entries with it.
    pub(crate) clock: ClusterClock,
    /// The last stamp, and the term it was made in (a new term starts from the applied clock,
    /// so that a stamp that never committed, made while cut off, is not carried on).
    stamp: std::sync::Mutex<(u64, u64)>,
    tick_in_flight: AtomicBool,
    /// Time from proposal submission to applied outcome on the leader.
    pub commit_latency: Arc<LatencyHistogram>,
    /// Duration of each WAL sync.
    pub wal_sync: Arc<LatencyHistogram>,
    /// Time a write waits in this node's queue before it is proposed or forwarded.
    pub queue_wait: Arc<LatencyHistogram>,
    /// Round trip of each batch forwarded from a follower to the leader.
    pub forward_latency: Arc<LatencyHistogram>,
    /// How long each snapshot's encoding paused this node's applies.
    pub snapshot_encode: Arc<LatencyHistogram>,
    /// Leaders this node has come to know of (the first one included): a count that keeps
    /// rising means elections keep happening.
    pub leader_changes: AtomicU64,
    /// Node-to-node calls refused for want of this cluster's credential.
    pub auth_refused: Arc<AtomicU64>,
    /// Node-to-node connections closed at once because their address had too many open.
    pub connections_refused: Arc<AtomicU64>,
    forwarder: Forwarder,
    /// When the leader was last heard from (a follower cut off from it refuses at once).
    leader_contact: LeaderContact,
    /// True while this node is cut off from leadership (see [`watch_leader_contact`]).
    cut_off: tokio::sync::watch::Sender<bool>,
    pub(crate) cancel: CancellationToken,
    /// Set with the reason when the Raft core stops without [`RaftNode::shutdown`].
    stopped: tokio::sync::watch::Sender<Option<String>>,
    pub(crate) cfg: NodeConfig,
    db: Arc<rocksdb::DB>,
    log: LogStore,
    ledger: Option<LedgerStore>,
}

/// One log entry as read back for audits and replays.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogRecord {
    /// Index.
    pub index: u64,
    /// Term of the leader that wrote it.
    pub term: u64,
    /// The proposal (encoded as in the log) for normal entries; `None` for blank and membership.
    pub proposal: Option<Vec<u8>>,
}

/// Most entries one log read returns.
pub const LOG_PAGE_MAX: u64 = 10_000;

impl std::fmt::Debug for NodeInner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NodeInner({})", self.id)
    }
}

/// A running node. Cheap to clone.
#[derive(Clone, Debug)]
pub struct RaftNode {
    inner: Arc<NodeInner>,
    raft_addr: SocketAddr,
    server: Arc<tokio::sync::Mutex<Option<tokio::task::JoinHandle<()>>>>,
}

/// This machine's wall clock, ms since the epoch. Sluice itself uses the cluster's time,
/// [`RaftNode::now_ms`], for everything with a deadline.
pub fn wall_ms() -> u64 {
    WallClock::system().now_ms()
}

fn raft_err(e: RaftError<TypeConfig, ClientWriteError<TypeConfig>>) -> ClusterError {
    // Proposed, then overwritten by another leader's log: another node may have committed it.
    if let RaftError::APIError(ClientWriteError::LogEntryDiscarded(_)) = &e {
        ClusterError::Indeterminate(format!("{e}: it may or may not have taken effect"))
    } else if e.forward_to_leader().is_some() {
        ClusterError::NoLeader
    } else if let RaftError::Fatal(f) = &e {
        ClusterError::Fatal(f.to_string())
    } else {
        ClusterError::Invalid(e.to_string())
    }
}

impl RaftNode {
    /// Opens storage, starts Raft and the node-to-node server. The node serves reads once it
    /// has recovered (see [`ClusterStatus::ready`]).
    pub async fn start(mut cfg: NodeConfig) -> Result<Self, ClusterError> {
        let fatal = |e: std::io::Error| ClusterError::Fatal(e.to_string());
        std::fs::create_dir_all(&cfg.data_dir).map_err(fatal)?;
        let db = open_db_retrying(&cfg.data_dir.join("db"))
            .await
            .map_err(fatal)?;
        let mut log_store = match &cfg.simulation {
            None => LogStore::new(db.clone()).map_err(fatal)?,
            Some(s) => LogStore::simulated(
                db.clone(),
                s.wal_sync_takes,
                s.wal_synced.clone(),
                s.broken == Some(Broken::AckBeforeSync),
            ),
        };
        let transport = cfg.simulation.as_ref().map(|s| s.transport.clone());
        let ledger = cfg.ledger.map(|_| LedgerStore::new(db.clone()));
        let snapshots = cfg.data_dir.join("snapshots");
        let mut sm_store = SmStore::new(&snapshots, ledger.clone(), cfg.draw_key).map_err(fatal)?;
        if let Some(a) = &cfg.archive {
            let archive =
                Arc::new(crate::archive::Archive::new(&a.dir, &snapshots, a.keep).map_err(fatal)?);
            log_store = log_store.with_archive(archive.clone(), ledger.clone());
            sm_store = sm_store.with_archive(archive);
        }
        // The directories just made (the data directory, its `db/` and `snapshots/`) are durable
        // only once their parents are synced: a crash could otherwise take them away, and with
        // them everything in them.
        sync_dir(&cfg.data_dir).map_err(fatal)?;
        if let Some(parent) = cfg.data_dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            sync_dir(parent).map_err(fatal)?;
        }
        let log_reader = log_store.clone();
        let snapshot_encode = sm_store.snapshot_encode();
        let deferral = sm_store.deferral();
        deferral.leader_every.store(
            cfg.snapshot_every.saturating_mul(LEADER_SNAPSHOT_FACTOR),
            Ordering::Relaxed,
        );
        let sm = sm_store.handle();

        let listener = match &transport {
            None => Listening::Tcp(
                tokio::net::TcpListener::bind(cfg.listen_raft)
                    .await
                    .map_err(fatal)?,
            ),
            Some(t) => {
                let (addr, incoming) = t.listen(cfg.listen_raft).await.map_err(fatal)?;
                Listening::Custom(addr, incoming)
            }
        };
        let raft_addr = match &listener {
            Listening::Tcp(l) => l.local_addr().map_err(fatal)?,
            Listening::Custom(addr, _) => *addr,
        };
        if cfg.advertise.raft.is_empty() {
            cfg.advertise.raft = raft_addr.to_string();
        }

        let raft_config = openraft::Config {
            cluster_name: "sluice".into(),
            heartbeat_interval: cfg.heartbeat_ms,
            election_timeout_min: cfg.election_timeout_ms.0,
            election_timeout_max: cfg.election_timeout_ms.1,
            enable_pre_vote: Some(cfg.pre_vote),
            // A leader that restarts stands for election at a higher term instead of resuming
            // its old one. Resuming is unsafe when a crash loses log entries that were never
            // synced here but that followers already hold: the leader would write different
            // entries under the same log ids, which followers take as ones they have.
            enable_leader_restore: Some(
                cfg.simulation
                    .as_ref()
                    .is_some_and(|s| s.broken == Some(Broken::LeaderRestore)),
            ),
            install_snapshot_timeout: 120_000,
            max_payload_entries: 256,
            snapshot_policy: snapshot_policy(cfg.snapshot_every, cfg.id),
            max_in_snapshot_log_to_keep: cfg.logs_kept_after_snapshot,
            purge_batch_size: 256,
            replication_lag_threshold: cfg.logs_kept_after_snapshot.max(1),
            ..Default::default()
        }
        .validate()
        .map_err(|e| ClusterError::Invalid(e.to_string()))?;
        let peers = Peers::new(cfg.tls.clone(), cfg.cluster_secret.clone()).over(transport);
        let gatekeeper = Gatekeeper::new(
            cfg.cluster_secret
                .iter()
                .chain(&cfg.cluster_secrets_also_accepted)
                .cloned()
                .collect(),
        );
        let gate = crate::listener::ConnectionGate::new(crate::listener::ConnectionLimits {
            connections_max: RAFT_CONNECTIONS_MAX,
            per_address_max: RAFT_CONNECTIONS_PER_ADDRESS_MAX,
            first_bytes_timeout: RAFT_AUTHENTICATE_WITHIN,
            exempt: None,
        });
        let network = NetworkFactory {
            peers: peers.clone(),
        };
        let raft = Raft::new(cfg.id, Arc::new(raft_config), network, log_store, sm_store)
            .await
            .map_err(|e| ClusterError::Fatal(e.to_string()))?;

        let (tx, rx) = mpsc::channel(cfg.write_queue_max);
        let inner = Arc::new(NodeInner {
            id: cfg.id,
            raft,
            sm,
            peers,
            queue: tx,
            ready: AtomicBool::new(false),
            clock: ClusterClock::new(cfg.wall_clock.clone()),
            stamp: std::sync::Mutex::new((0, 0)),
            tick_in_flight: AtomicBool::new(false),
            commit_latency: Arc::default(),
            wal_sync: log_reader.wal_sync.clone(),
            queue_wait: Arc::default(),
            forward_latency: Arc::default(),
            snapshot_encode,
            leader_changes: AtomicU64::new(0),
            auth_refused: gatekeeper.refused.clone(),
            connections_refused: gate.refused.clone(),
            forwarder: Forwarder::default(),
            leader_contact: LeaderContact::new(),
            cut_off: tokio::sync::watch::Sender::new(false),
            cancel: CancellationToken::new(),
            stopped: tokio::sync::watch::Sender::new(None),
            cfg: cfg.clone(),
            db,
            log: log_reader,
            ledger,
        });

        let mut builder = tonic::transport::Server::builder()
            .tcp_nodelay(true)
            .concurrency_limit_per_connection(RAFT_STREAMS_PER_CONNECTION_MAX as usize)
            .max_concurrent_streams(Some(RAFT_STREAMS_PER_CONNECTION_MAX));
        if let Some(tls) = &cfg.tls {
            let server_tls = tonic::transport::ServerTlsConfig::new()
                .identity(tonic::transport::Identity::from_pem(
                    &tls.cert_pem,
                    &tls.key_pem,
                ))
                .client_ca_root(tonic::transport::Certificate::from_pem(&tls.ca_pem))
                .timeout(RAFT_AUTHENTICATE_WITHIN);
            builder = builder
                .tls_config(server_tls)
                .map_err(|e| ClusterError::Invalid(format!("TLS: {e}")))?;
        }
        // Calls are checked for the cluster's credential before their bodies are read.
        let svc = tonic::service::interceptor::InterceptedService::new(
            RaftServiceServer::new(RaftRpc::new(inner.clone()))
                .max_decoding_message_size(MESSAGE_BYTES_MAX)
                .max_encoding_message_size(MESSAGE_BYTES_MAX),
            gatekeeper,
        );
        let cancel = inner.cancel.clone();
        let router = builder.add_service(svc);
        let server = tokio::spawn(async move {
            let served = match listener {
                Listening::Tcp(listener) => {
                    // Every connection must make a call the gatekeeper lets through in time
                    // (without a secret, any call: after TLS's handshake, or on loopback).
                    let incoming = crate::listener::gated_incoming(
                        listener,
                        gate,
                        Some(RAFT_AUTHENTICATE_WITHIN),
                        cancel.clone(),
                    );
                    router
                        .serve_with_incoming_shutdown(incoming, cancel.cancelled_owned())
                        .await
                }
                Listening::Custom(_, incoming) => {
                    let incoming = incoming.map(|c| c.map(crate::transport::Accepted));
                    router
                        .serve_with_incoming_shutdown(incoming, cancel.cancelled_owned())
                        .await
                }
            };
            if let Err(e) = served {
                tracing::error!(error = %e, "node-to-node server stopped");
            }
        });

        tokio::spawn(batcher(inner.clone(), rx));
        tokio::spawn(ticker(inner.clone()));
        tokio::spawn(track_leadership(inner.clone(), deferral));
        tokio::spawn(watch_core(inner.clone()));
        tokio::spawn(sample_clocks(inner.clone()));
        tokio::spawn(watch_leader_contact(inner.clone()));
        tokio::spawn(keep_ledger(inner.clone()));
        let rec = inner.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = rec.cancel.cancelled() => {}
                r = rec.raft.wait_for_recovery(None) => if r.is_ok() {
                    rec.ready.store(true, Ordering::SeqCst);
                    tracing::info!(id = rec.id, "recovered; serving reads");
                }
            }
        });
        Ok(Self {
            inner,
            raft_addr,
            server: Arc::new(tokio::sync::Mutex::new(Some(server))),
        })
    }

    /// This node's id.
    pub fn id(&self) -> u64 {
        self.inner.id
    }

    /// The cluster's time now as this node sees it, ms since the epoch: the lower median of the
    /// voters' wall clocks. The leader stamps entries with it (made monotonic).
    pub fn now_ms(&self) -> u64 {
        self.inner.clock.now_ms()
    }

    /// The cluster's time minus this node's own wall clock, ms (what this node's clock is off).
    pub fn clock_offset_ms(&self) -> i64 {
        self.inner.clock.offset_ms()
    }

    /// How many other voters' clocks this node currently knows.
    pub fn clock_peers_known(&self) -> usize {
        self.inner.clock.peers_known()
    }

    /// Whether this node knows enough voters' clocks to tell the cluster's time (when it does
    /// not, as leader it stamps entries with its own clock).
    pub fn clock_agreed(&self) -> bool {
        self.inner.clock.agreed_ms().is_some()
    }

    /// The bound node-to-node address.
    pub fn raft_addr(&self) -> SocketAddr {
        self.raft_addr
    }

    /// The addresses this node advertises.
    pub fn addr(&self) -> NodeAddr {
        self.inner.cfg.advertise.clone()
    }

    /// The openraft handle (for metrics and tests).
    pub fn raft(&self) -> &Raft {
        &self.inner.raft
    }

    /// Shared internals (latency histogram).
    pub fn inner(&self) -> &NodeInner {
        &self.inner
    }

    /// Creates a new cluster with these members (call on one node, once).
    pub async fn initialize(&self, members: BTreeMap<u64, NodeAddr>) -> Result<(), ClusterError> {
        self.inner
            .raft
            .initialize(members)
            .await
            .map_err(|e| ClusterError::Invalid(e.to_string()))
    }

    /// Applies one command through the log (forwarded to the leader if needed). Returns its
    /// outcome and the log index it was applied at.
    pub async fn write(&self, cmd: Command) -> Result<(Outcome, u64), ClusterError> {
        self.inner.write(cmd).await
    }

    /// Waits until this node has applied `index` (read-your-writes on any node).
    pub async fn wait_applied(&self, index: u64, timeout: Duration) -> Result<(), ClusterError> {
        if self.inner.sm.read().expect("state lock").applied_index() >= index {
            return Ok(());
        }
        self.inner
            .raft
            .wait(Some(timeout))
            .applied_index_at_least(Some(index), "read your writes")
            .await
            .map(|_| ())
            .map_err(|_| ClusterError::Timeout)
    }

    /// Applies several commands (each independently, in order of submission).
    pub async fn write_many(
        &self,
        cmds: Vec<Command>,
    ) -> Vec<Result<(Outcome, u64), ClusterError>> {
        futures::future::join_all(cmds.into_iter().map(|c| self.inner.write(c))).await
    }

    /// Reads applied state on this node; returns the value and the applied log index.
    pub fn read<T>(&self, f: impl FnOnce(&SmState) -> T) -> Result<(T, u64), ClusterError> {
        self.inner.local_read(f)
    }

    /// A linearizable read: waits until this node has applied the leader's read index.
    pub async fn read_linearizable<T>(
        &self,
        f: impl FnOnce(&SmState) -> T,
    ) -> Result<(T, u64), ClusterError> {
        let index = self.inner.read_index().await?;
        self.inner
            .raft
            .wait(Some(self.inner.cfg.request_timeout))
            .applied_index_at_least(Some(index), "linearizable read")
            .await
            .map_err(|_| ClusterError::Timeout)?;
        self.inner.local_read(f)
    }

    /// Log entries from `from` (at most `limit`, at most [`LOG_PAGE_MAX`]) still held by this
    /// node (entries before the last purge are gone). For audits: replaying them reproduces the
    /// state, lottery draws included.
    pub async fn log_entries(&self, from: u64, limit: u64) -> Result<Vec<LogRecord>, ClusterError> {
        use openraft::storage::RaftLogReader;
        let mut log = self.inner.log.clone();
        let end = from.saturating_add(limit.min(LOG_PAGE_MAX));
        let entries = log
            .try_get_log_entries(from..end)
            .await
            .map_err(|e| ClusterError::Fatal(e.to_string()))?;
        Ok(entries
            .into_iter()
            .map(|e| LogRecord {
                index: e.log_id.index,
                term: e.log_id.leader_id.term,
                proposal: match &e.payload {
                    openraft::EntryPayload::Normal(r) => Some(r.0.encode()),
                    _ => None,
                },
            })
            .collect())
    }

    /// A page of this node's ledger records (`None`: the node keeps none).
    pub async fn ledger(&self, q: LedgerQuery) -> Result<Option<LedgerPage>, ClusterError> {
        let Some(store) = self.inner.ledger.clone() else {
            return Ok(None);
        };
        if !self.inner.ready.load(Ordering::SeqCst) {
            return Err(ClusterError::NotReady);
        }
        tokio::task::spawn_blocking(move || store.query(&q))
            .await
            .map_err(|e| ClusterError::Fatal(e.to_string()))?
            .map(Some)
            .map_err(|e| ClusterError::Fatal(e.to_string()))
    }

    /// Up to `limit` of this node's ledger records of every room after `after`, in log order
    /// (`None`: the node keeps no ledger).
    pub async fn ledger_after(
        &self,
        after: Option<sluice_statemachine::ledger::RecordKey>,
        limit: usize,
    ) -> Result<Option<Vec<sluice_statemachine::ledger::Record>>, ClusterError> {
        let Some(store) = self.inner.ledger.clone() else {
            return Ok(None);
        };
        tokio::task::spawn_blocking(move || store.after(after, limit))
            .await
            .map_err(|e| ClusterError::Fatal(e.to_string()))?
            .map(Some)
            .map_err(|e| ClusterError::Fatal(e.to_string()))
    }

    /// The ledger position just before this node's first record at or after log time `ms`
    /// (`None`: the node keeps no ledger).
    pub async fn ledger_position_before(
        &self,
        ms: u64,
    ) -> Result<Option<sluice_statemachine::ledger::RecordKey>, ClusterError> {
        let Some(store) = self.inner.ledger.clone() else {
            return Ok(None);
        };
        tokio::task::spawn_blocking(move || store.position_before_time(ms))
            .await
            .map_err(|e| ClusterError::Fatal(e.to_string()))?
            .map(Some)
            .map_err(|e| ClusterError::Fatal(e.to_string()))
    }

    /// The whole applied state as a backup file (the snapshot format), with its index.
    pub fn backup(&self) -> Result<(Vec<u8>, u64), ClusterError> {
        self.inner.local_read(crate::sm_store::export)
    }

    /// The applied index and state digest, read together.
    pub fn digest(&self) -> Result<(u64, String), ClusterError> {
        self.read(|st| digest_hex(&st.sm.digest()))
            .map(|(d, i)| (i, d))
    }

    /// Changes membership (forwarded to the leader if needed).
    pub async fn membership(&self, op: MembershipOp) -> Result<ClusterStatus, ClusterError> {
        if self.inner.raft.is_leader() {
            return self.inner.membership_local(op).await;
        }
        let (_, addr) = self.inner.leader_addr()?;
        let mut client = self
            .inner
            .peers
            .client(&addr)
            .map_err(|e| ClusterError::Invalid(e.to_string()))?;
        let mut req = tonic::Request::new(pb::Payload {
            data: codec::encode(&op),
        });
        req.set_timeout(Duration::from_secs(30));
        let reply = client
            .membership(req)
            .await
            .map_err(|s| ClusterError::Indeterminate(s.to_string()))?;
        codec::decode::<Result<ClusterStatus, ClusterError>>(&reply.into_inner().data)
            .map_err(|e| ClusterError::Indeterminate(e.to_string()))?
    }

    /// This node's view of the cluster.
    pub fn status(&self) -> ClusterStatus {
        self.inner.status()
    }

    /// Is this node the leader?
    pub fn is_leader(&self) -> bool {
        self.inner.raft.is_leader()
    }

    /// On a leader: how long ago a quorum last acknowledged it (`None` if it is not the leader,
    /// or has not been acknowledged yet). A leader cut off from its followers stays leader in
    /// its own eyes; this is how it can tell.
    pub fn quorum_ack_age(&self) -> Option<Duration> {
        let m = self.inner.raft.metrics().borrow_watched().clone();
        m.last_quorum_acked.map(|t| openraft::Instant::elapsed(&*t))
    }

    /// On a leader: how long ago each follower last acknowledged it (`None` for one that has
    /// not yet). Replication lag alone reads 0 for a follower that is down while nothing is
    /// written.
    pub fn follower_ack_ages(&self) -> BTreeMap<u64, Option<Duration>> {
        let m = self.inner.raft.metrics().borrow_watched().clone();
        m.heartbeat
            .map(|h| {
                h.into_iter()
                    .filter(|(id, _)| *id != self.inner.id)
                    .map(|(id, t)| (id, t.map(|t| openraft::Instant::elapsed(&*t))))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Vote requests this node has sent since it started: (pre-votes, votes).
    pub fn vote_requests_sent(&self) -> (u64, u64) {
        self.inner.peers.vote_requests_sent()
    }

    /// The longest election timeout: a leader not acknowledged by a quorum for this long has
    /// likely been replaced, or cannot commit.
    pub fn election_timeout_max(&self) -> Duration {
        Duration::from_millis(self.inner.cfg.election_timeout_ms.1)
    }

    /// Has this node recovered and may serve reads? False again once its Raft core has stopped.
    pub fn is_ready(&self) -> bool {
        self.inner.ready.load(Ordering::SeqCst)
    }

    /// Resolves, with the reason, when this node's Raft core stops without [`Self::shutdown`]
    /// (a storage error, say): the node can no longer apply anything, and its process should
    /// end so that its supervisor restarts it.
    pub async fn failed(&self) -> String {
        let mut rx = self.inner.stopped.subscribe();
        let reason = match rx.wait_for(Option::is_some).await {
            Ok(reason) => reason.clone(),
            Err(_) => None,
        };
        match reason {
            Some(reason) => reason,
            None => std::future::pending().await,
        }
    }

    /// Stops accepting work, stops Raft and the server, and syncs the WAL.
    pub async fn shutdown(&self) {
        self.inner.cancel.cancel();
        self.inner.forwarder.close().await;
        if let Err(e) = self.inner.raft.shutdown().await {
            tracing::warn!(error = %e, "raft shutdown");
        }
        if let Some(h) = self.server.lock().await.take() {
            let _ = tokio::time::timeout(Duration::from_secs(5), h).await;
        }
        if let Err(e) = self.inner.db.flush_wal(true) {
            tracing::warn!(error = %e, "final WAL sync");
        }
    }
}

/// Opens RocksDB, waiting briefly for a previous instance in this process to release its lock.
/// Syncs a directory, so that the entries made in it are durable.
fn sync_dir(dir: &std::path::Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// How often a node removes ledger records past their retention.
const LEDGER_UPKEEP_EVERY: Duration = Duration::from_secs(60);

/// Removes ledger records past the retention, by log time, a bounded pass at a time.
async fn keep_ledger(inner: Arc<NodeInner>) {
    let (Some(store), Some(retention)) = (inner.ledger.clone(), inner.cfg.ledger) else {
        return;
    };
    let mut every = tokio::time::interval(LEDGER_UPKEEP_EVERY);
    loop {
        tokio::select! {
            _ = inner.cancel.cancelled() => return,
            _ = every.tick() => {}
        }
        let now = inner.sm.read().expect("state lock").sm.clock_ms();
        let before = now.saturating_sub(retention.max_age.as_millis() as u64);
        let store = store.clone();
        let pass =
            tokio::task::spawn_blocking(move || store.purge(before, retention.records_max)).await;
        match pass {
            Ok(Ok(0)) => {}
            Ok(Ok(n)) => tracing::info!(removed = n, "ledger records past retention removed"),
            Ok(Err(e)) => tracing::warn!(error = %e, "ledger retention pass failed"),
            Err(e) => tracing::warn!(error = %e, "ledger retention pass failed"),
        }
    }
}

async fn open_db_retrying(dir: &std::path::Path) -> std::io::Result<Arc<rocksdb::DB>> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match open_db(dir) {
            Ok(db) => return Ok(db),
            Err(e) if e.to_string().contains("lock") && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await
            }
            // Still locked after the wait: another process holds the directory.
            Err(e) if e.to_string().contains("lock") => {
                return Err(std::io::Error::other(format!(
                    "another process (another Sluice node?) is using the data directory {}: \
stop it, or give this node a data directory of its own ({e})",
                    dir.display()
                )))
            }
            Err(e) => return Err(e),
        }
    }
}

pub(crate) fn fail_all(txs: Vec<Waiter>, e: ClusterError) {
    for tx in txs {
        let _ = tx.send(Err(e.clone()));
    }
}

pub(crate) fn deliver(txs: Vec<Waiter>, results: Vec<Reply>) {
    assert_eq!(txs.len(), results.len(), "one result per command");
    for (tx, r) in txs.into_iter().zip(results) {
        let _ = tx.send(r);
    }
}

/// Drains the write queue into proposals.
async fn batcher(inner: Arc<NodeInner>, mut rx: mpsc::Receiver<Pending>) {
    let slots = Arc::new(Semaphore::new(inner.cfg.proposals_in_flight.max(1)));
    let forward_slots = Arc::new(Semaphore::new(FORWARDS_IN_FLIGHT));
    loop {
        let first = tokio::select! {
            _ = inner.cancel.cancelled() => break,
            p = rx.recv() => match p { Some(p) => p, None => break },
        };
        let sem = if inner.raft.is_leader() {
            &slots
        } else {
            &forward_slots
        };
        let permit = tokio::select! {
            _ = inner.cancel.cancelled() => break,
            p = sem.clone().acquire_owned() => p.expect("semaphore never closed"),
        };
        // Everything that queued while we waited for a slot joins this proposal.
        let mut batch = vec![first];
        while batch.len() < BATCH_COMMANDS_MAX {
            match rx.try_recv() {
                Ok(p) => batch.push(p),
                Err(_) => break,
            }
        }
        assert!(batch.len() <= BATCH_COMMANDS_MAX, "a batch past its bound");
        for p in &batch {
            inner.queue_wait.observe(p.queued.elapsed());
        }
        if inner.raft.is_leader() {
            let (cmds, txs): (Vec<Command>, Vec<_>) =
                batch.into_iter().map(|p| (p.cmd, p.tx)).unzip();
            if inner.cut_off_from_leader() {
                // No quorum has answered for an election timeout: a proposal would wait for
                // one that may never come.
                fail_all(txs, ClusterError::NoLeader);
                continue;
            }
            match inner.propose(cmds).await {
                Ok(done) => {
                    tokio::spawn(async move {
                        deliver(txs, done.await);
                        drop(permit);
                    });
                }
                Err(e) => fail_all(txs, e),
            }
        } else {
            // Leadership moved while these waited: the follower that forwarded a command retries
            // it itself, so it is not forwarded a second time from here.
            let (forwarded, local): (Vec<Pending>, Vec<Pending>) =
                batch.into_iter().partition(|p| p.forwarded);
            fail_all(
                forwarded.into_iter().map(|p| p.tx).collect(),
                ClusterError::NoLeader,
            );
            let (cmds, txs): (Vec<Command>, Vec<_>) =
                local.into_iter().map(|p| (p.cmd, p.tx)).unzip();
            if cmds.is_empty() {
                continue;
            }
            let inner = inner.clone();
            tokio::spawn(async move { inner.forward(cmds, txs, permit).await });
        }
    }
    rx.close();
    while let Ok(p) = rx.try_recv() {
        let _ = p.tx.send(Err(ClusterError::ShuttingDown));
    }
}

/// The leaderships a node has seen. A leadership is a leader in a term: the same node elected
/// again in a later term is a new one, since an election happened.
#[derive(Default)]
struct Leaderships {
    last: Option<(u64, u64)>,
}

impl Leaderships {
    /// Records the current term and leader; true when they name a leadership not seen last.
    fn observe(&mut self, term: u64, leader: Option<u64>) -> bool {
        let Some(leader) = leader else { return false };
        let new = self.last != Some((term, leader));
        self.last = Some((term, leader));
        new
    }
}

/// How often [`watch_core`] looks at the Raft core.
const CORE_CHECK_EVERY: Duration = Duration::from_millis(250);

/// Notices a Raft core that stopped by itself (a storage error is fatal to it): the node stops
/// answering ready, and [`RaftNode::failed`] resolves. The metrics watch changes with every
/// batch the core handles, so it is looked at on a timer instead of on each change.
async fn watch_core(inner: Arc<NodeInner>) {
    loop {
        tokio::select! {
            _ = inner.cancel.cancelled() => return,
            _ = tokio::time::sleep(CORE_CHECK_EVERY) => {}
        }
        let reason = {
            let m = inner.raft.metrics();
            let m = m.borrow_watched();
            match &m.running_state {
                Err(e) => Some(e.to_string()),
                Ok(()) if m.state == ServerState::Shutdown => Some("Raft stopped".to_string()),
                Ok(()) => None,
            }
        };
        if let Some(reason) = reason {
            if inner.cancel.is_cancelled() {
                return;
            }
            inner.ready.store(false, Ordering::SeqCst);
            tracing::error!(
                reason,
                "the Raft core stopped; this node can no longer serve"
            );
            inner.stopped.send_replace(Some(reason));
            return;
        }
    }
}

/// Keeps the snapshot deferral's view of whether this node leads up to date, and counts the
/// leaderships (leader and term) this node has known.
async fn track_leadership(inner: Arc<NodeInner>, deferral: Arc<SnapshotDeferral>) {
    let mut m = inner.raft.server_metrics();
    let mut known = Leaderships::default();
    loop {
        let (leading, term, leader) = {
            let now = m.borrow_watched();
            (
                now.state == openraft::ServerState::Leader,
                now.vote.leader_id().term,
                now.current_leader,
            )
        };
        deferral.leading.store(leading, Ordering::Relaxed);
        if known.observe(term, leader) {
            inner.leader_changes.fetch_add(1, Ordering::Relaxed);
        }
        tokio::select! {
            _ = inner.cancel.cancelled() => break,
            r = m.changed() => if r.is_err() { break },
        }
    }
}

/// Asks the other voters for their wall clocks once a second, for [`ClusterClock`].
async fn sample_clocks(inner: Arc<NodeInner>) {
    loop {
        let peers: Vec<(u64, String)> = {
            let m = inner.raft.metrics();
            let m = m.borrow_watched();
            let membership = m.membership_config.membership();
            membership
                .voter_ids()
                .filter(|id| *id != inner.id)
                .filter_map(|id| membership.get_node(&id).map(|n| (id, n.raft.clone())))
                .collect()
        };
        let ids: Vec<u64> = peers.iter().map(|(id, _)| *id).collect();
        inner.clock.retain(&ids);
        // No peers yet (the membership is not loaded) counts as a round to retry soon.
        let complete = tokio::select! {
            _ = inner.cancel.cancelled() => break,
            all = crate::clock::sample_peers(&inner.clock, &inner.peers, peers) => all && !ids.is_empty(),
        };
        let pause = if complete {
            crate::clock::SAMPLE_EVERY
        } else {
            crate::clock::SAMPLE_RETRY
        };
        tokio::select! {
            _ = inner.cancel.cancelled() => break,
            _ = tokio::time::sleep(pause) => {}
        }
    }
}

/// Notices, within a heartbeat, when this node is cut off from leadership (its leader silent,
/// or, as leader, its quorum, for longer than an election timeout): what it had forwarded and
/// not yet seen answered is answered as indeterminate, and read-index requests waiting on the
/// leader or the quorum are refused, so that no client waits out its own timeout for them.
async fn watch_leader_contact(inner: Arc<NodeInner>) {
    let every = Duration::from_millis(inner.cfg.heartbeat_ms.max(10));
    loop {
        tokio::select! {
            _ = inner.cancel.cancelled() => break,
            _ = tokio::time::sleep(every) => {}
        }
        let cut_off = inner.cut_off_from_leader();
        let changed = inner
            .cut_off
            .send_if_modified(|c| std::mem::replace(c, cut_off) != cut_off);
        if changed && cut_off {
            tracing::warn!(
                id = inner.id,
                "the leader has been silent for longer than an election timeout; refusing writes and linearizable reads"
            );
            inner
                .forwarder
                .abandon("went silent for longer than an election timeout")
                .await;
        }
    }
}

/// Resolves when `rx` turns true after it was subscribed (a value already true, set by a
/// check that may be out of date by now, does not count).
async fn becomes_true(rx: &mut tokio::sync::watch::Receiver<bool>) {
    while rx.changed().await.is_ok() {
        if *rx.borrow_and_update() {
            return;
        }
    }
    std::future::pending::<()>().await;
}

/// Proposes `Tick` while leader whenever the state machine has something due.
async fn ticker(inner: Arc<NodeInner>) {
    let every = Duration::from_millis(inner.cfg.tick_interval_ms.max(1));
    loop {
        tokio::select! {
            _ = inner.cancel.cancelled() => break,
            _ = tokio::time::sleep(every) => {}
        }
        if !inner.ready.load(Ordering::SeqCst)
            || !inner.raft.is_leader()
            || inner.tick_in_flight.load(Ordering::SeqCst)
        {
            continue;
        }
        let (due, clock) = {
            let st = inner.sm.read().expect("state lock");
            (st.sm.next_due_ms(), st.sm.clock_ms())
        };
        if due.is_some_and(|d| d <= inner.clock.agreed_ms().unwrap_or(clock).max(clock)) {
            inner.tick_in_flight.store(true, Ordering::SeqCst);
            let inner = inner.clone();
            tokio::spawn(async move {
                if let Err(e) = inner.write(Command::Tick).await {
                    tracing::debug!(error = %e, "tick not applied");
                }
                inner.tick_in_flight.store(false, Ordering::SeqCst);
            });
        }
    }
}

impl NodeInner {
    async fn write(&self, cmd: Command) -> Result<(Outcome, u64), ClusterError> {
        let deadline = tokio::time::Instant::now() + self.cfg.request_timeout;
        loop {
            let (tx, rx) = oneshot::channel();
            self.queue
                .try_send(Pending {
                    cmd: cmd.clone(),
                    forwarded: false,
                    tx,
                    queued: Instant::now(),
                })
                .map_err(|e| match e {
                    mpsc::error::TrySendError::Full(_) => ClusterError::Busy,
                    mpsc::error::TrySendError::Closed(_) => ClusterError::ShuttingDown,
                })?;
            let result = match tokio::time::timeout_at(deadline, rx).await {
                Err(_) => Err(ClusterError::Timeout),
                Ok(Err(_)) => Err(ClusterError::ShuttingDown),
                Ok(Ok(r)) => r,
            };
            match result {
                // Not appended anywhere: safe to try again once a leader is known, unless this
                // node is cut off from the one it follows (then the client had better try
                // another node now than wait here).
                Err(ClusterError::NoLeader)
                    if tokio::time::Instant::now() + Duration::from_millis(50) < deadline
                        && !self.cut_off_from_leader() =>
                {
                    // A fresh receiver has seen only what openraft's own had: without marking the
                    // current metrics seen, `changed` returns at once and this loop spins until
                    // the deadline (found by the whole-cluster simulation, where time stood still).
                    let mut m = self.raft.metrics();
                    m.borrow_and_update();
                    let _ = tokio::time::timeout(Duration::from_millis(50), m.changed()).await;
                }
                other => return other,
            }
        }
    }

    /// The time for the next proposal: the cluster's time, never less than the applied clock or
    /// an earlier stamp of this term. In a new term, while too few voters' clocks are known
    /// (after a restart, before the first answers), it waits up to [`CLOCK_AGREEMENT_WAIT`] once
    /// for them; after that, this node's own clock stands in (a peer of an older version, which
    /// does not answer, or most peers unreachable, when nothing can commit anyway).
    async fn stamp(&self) -> u64 {
        let (term, voters) = {
            let m = self.raft.metrics();
            let m = m.borrow_watched();
            let voters = m.membership_config.membership().voter_ids().count();
            (m.current_term, voters)
        };
        // The membership as the leader knows it now, not as the sampler last saw it.
        self.clock.set_voters(voters.max(1));
        let first_in_term = {
            let mut s = self.stamp.lock().expect("stamp lock");
            let first = s.0 != term;
            if first {
                *s = (term, 0);
            }
            first
        };
        let agreed = match self.clock.agreed_ms() {
            None if first_in_term => self.clock.wait_agreed(CLOCK_AGREEMENT_WAIT).await,
            agreed => agreed,
        };
        let now = agreed.unwrap_or_else(|| {
            if first_in_term {
                tracing::warn!("too few voters' clocks known: stamping with this node's own clock");
            }
            self.clock.own().now_ms()
        });
        let clock = self.sm.read().expect("state lock").sm.clock_ms();
        let mut s = self.stamp.lock().expect("stamp lock");
        let t = now.max(clock).max(s.1);
        s.1 = t;
        t
    }

    /// Submits one proposal in order; the returned future resolves when it is applied.
    async fn propose(
        &self,
        cmds: Vec<Command>,
    ) -> Result<
        impl std::future::Future<Output = Vec<Result<(Outcome, u64), ClusterError>>> + Send + 'static,
        ClusterError,
    > {
        let n = cmds.len();
        let proposal = Proposal {
            time_ms: self.stamp().await,
            commands: cmds,
        };
        let (responder, done) =
            ProgressResponder::<TypeConfig, ClientWriteResult<TypeConfig>>::complete_only();
        let started = Instant::now();
        self.raft
            .client_write_ff(Request(proposal), Some(responder))
            .await
            .map_err(|e| ClusterError::Fatal(e.to_string()))?;
        let hist = self.commit_latency.clone();
        Ok(async move {
            let err = |e: ClusterError| vec![Err(e); n];
            match done.await {
                Ok(Ok(resp)) => {
                    let index = resp.log_id.index;
                    let outcomes = resp.data.0;
                    if outcomes.len() != n {
                        return err(ClusterError::Fatal(format!(
                            "{} outcomes for {n} commands",
                            outcomes.len()
                        )));
                    }
                    hist.observe(started.elapsed());
                    outcomes.into_iter().map(|o| Ok((o, index))).collect()
                }
                Ok(Err(ClientWriteError::ForwardToLeader(_))) => err(ClusterError::NoLeader),
                Ok(Err(ClientWriteError::LogEntryDiscarded(_))) => {
                    err(ClusterError::Indeterminate(
                        "leadership changed before the entry was known to commit".into(),
                    ))
                }
                Ok(Err(e)) => err(ClusterError::Invalid(e.to_string())),
                Err(_) => err(ClusterError::Indeterminate(
                    "the node stopped before the entry was applied".into(),
                )),
            }
        })
    }

    /// For commands forwarded by a follower: they join this node's own write queue, so that they
    /// share proposals with every other write, if this node leads.
    pub(crate) async fn submit_as_leader(
        &self,
        cmds: Vec<Command>,
    ) -> Vec<Result<(Outcome, u64), ClusterError>> {
        let n = cmds.len();
        if !self.raft.is_leader() {
            return vec![Err(ClusterError::NoLeader); n];
        }
        let mut waiting = Vec::with_capacity(n);
        for cmd in cmds {
            let (tx, rx) = oneshot::channel();
            let queued = self.queue.try_send(Pending {
                cmd,
                forwarded: true,
                tx,
                queued: Instant::now(),
            });
            waiting.push(match queued {
                Ok(()) => Ok(rx),
                Err(mpsc::error::TrySendError::Full(_)) => Err(ClusterError::Busy),
                Err(mpsc::error::TrySendError::Closed(_)) => Err(ClusterError::ShuttingDown),
            });
        }
        let deadline = tokio::time::Instant::now() + self.cfg.request_timeout;
        let mut results = Vec::with_capacity(n);
        for w in waiting {
            results.push(match w {
                Ok(rx) => match tokio::time::timeout_at(deadline, rx).await {
                    Err(_) => Err(ClusterError::Timeout),
                    Ok(Err(_)) => Err(ClusterError::ShuttingDown),
                    Ok(Ok(r)) => r,
                },
                Err(e) => Err(e),
            });
        }
        results
    }

    /// A message came from an elected leader holding `vote`: if it is not behind this node's
    /// vote, that leader is live as far as this node can tell.
    pub(crate) fn heard_from_leader(&self, vote: &Vote) {
        if !vote.is_committed() {
            return;
        }
        let current = self.raft.metrics().borrow_watched().vote;
        if *vote >= current {
            self.leader_contact.heard(vote.leader_id().node_id);
        }
    }

    /// Is this a follower whose leader has been silent for longer than an election timeout
    /// (cut off from it by a partition the rest of the cluster does not share, typically:
    /// Pre-Vote and the others' leader lease keep it from electing anyone else), or a leader
    /// that no quorum has acknowledged for as long (the others have likely elected another)?
    fn cut_off_from_leader(&self) -> bool {
        let m = self.raft.metrics();
        let m = m.borrow_watched();
        match m.current_leader {
            Some(l) if l == self.id => {
                m.membership_config.membership().voter_ids().count() > 1
                    && m.last_quorum_acked
                        .as_ref()
                        .is_some_and(|t| openraft::Instant::elapsed(&**t) > self.silence_limit())
            }
            Some(l) => self.gone_silent(l),
            None => false,
        }
    }

    /// How long a leader may go unheard (or a leader's quorum unanswering) before this node
    /// takes it as cut off: the longest election timeout, after which the others would elect.
    fn silence_limit(&self) -> Duration {
        Duration::from_millis(self.cfg.election_timeout_ms.1)
    }

    /// Has `leader`, another node, been silent for longer than [`Self::silence_limit`]?
    fn gone_silent(&self, leader: u64) -> bool {
        leader != self.id && self.leader_contact.silence(leader) > self.silence_limit()
    }

    /// The leader to send writes and read-index requests to: `NoLeader` if none is known, or if
    /// it has been silent for longer than an election timeout (a request would wait for a
    /// connection that does not come).
    fn leader_addr(&self) -> Result<(u64, String), ClusterError> {
        let m = self.raft.metrics().borrow_watched().clone();
        let leader = m.current_leader.ok_or(ClusterError::NoLeader)?;
        if self.gone_silent(leader) {
            return Err(ClusterError::NoLeader);
        }
        let addr = m
            .membership_config
            .membership()
            .get_node(&leader)
            .map(|n| n.raft.clone())
            .ok_or(ClusterError::NoLeader)?;
        Ok((leader, addr))
    }

    /// Sends a batch to the leader on this follower's forwarding stream.
    async fn forward(&self, cmds: Vec<Command>, txs: Vec<Waiter>, slot: OwnedSemaphorePermit) {
        let (leader, addr) = match self.leader_addr() {
            Ok(l) => l,
            Err(e) => return fail_all(txs, e),
        };
        if leader == self.id {
            return fail_all(txs, ClusterError::NoLeader);
        }
        // A live leader opens a stream well within an election timeout; one that does not is
        // as good as gone (and the write, never sent, is retried).
        let open_timeout = self.cfg.request_timeout.min(self.silence_limit());
        self.forwarder
            .send(
                &self.peers,
                (leader, &addr),
                open_timeout,
                &self.forward_latency,
                cmds,
                txs,
                slot,
            )
            .await;
    }

    fn local_read<T>(&self, f: impl FnOnce(&SmState) -> T) -> Result<(T, u64), ClusterError> {
        if !self.ready.load(Ordering::SeqCst) {
            return Err(ClusterError::NotReady);
        }
        let st = self.sm.read().expect("state lock");
        Ok((f(&st), st.applied_index()))
    }

    pub(crate) async fn read_index_local(&self) -> Result<u64, ClusterError> {
        if self.cut_off_from_leader() {
            return Err(ClusterError::NoLeader);
        }
        let mut cut_off = self.cut_off.subscribe();
        let lin = tokio::select! {
            r = self.raft.get_read_linearizer(ReadPolicy::ReadIndex) => r,
            // No quorum has answered for an election timeout: none may.
            _ = becomes_true(&mut cut_off) => return Err(ClusterError::NoLeader),
        };
        let lin = lin.map_err(|e| {
            if let RaftError::Fatal(f) = &e {
                ClusterError::Fatal(f.to_string())
            } else {
                ClusterError::NoLeader
            }
        })?;
        Ok(lin.read_log_id().index())
    }

    async fn read_index(&self) -> Result<u64, ClusterError> {
        if self.raft.is_leader() {
            return self.read_index_local().await;
        }
        let (_, addr) = self.leader_addr()?;
        let mut client = self
            .peers
            .client(&addr)
            .map_err(|_| ClusterError::NoLeader)?;
        let mut req = tonic::Request::new(pb::Empty {});
        req.set_timeout(self.cfg.request_timeout);
        let mut cut_off = self.cut_off.subscribe();
        let reply = tokio::select! {
            r = tokio::time::timeout(self.cfg.request_timeout, client.read_index(req)) => r
                .map_err(|_| ClusterError::Timeout)?
                .map_err(|_| ClusterError::NoLeader)?,
            // The leader went silent meanwhile: no answer is coming.
            _ = becomes_true(&mut cut_off) => return Err(ClusterError::NoLeader),
        };
        codec::decode::<Result<u64, ClusterError>>(&reply.into_inner().data)
            .map_err(|_| ClusterError::NoLeader)?
    }

    pub(crate) async fn membership_local(
        &self,
        op: MembershipOp,
    ) -> Result<ClusterStatus, ClusterError> {
        if !self.raft.is_leader() {
            return Err(ClusterError::NoLeader);
        }
        let (voters, learners, ever) = {
            let st = self.sm.read().expect("state lock");
            let m = st.membership.membership();
            (
                m.voter_ids().collect::<BTreeSet<u64>>(),
                m.learner_ids().collect::<BTreeSet<u64>>(),
                st.members_ever.clone(),
            )
        };
        match op {
            MembershipOp::AddLearner { id, addr } => {
                if voters.contains(&id) || learners.contains(&id) {
                    return Err(ClusterError::Invalid(format!(
                        "node {id} is already a member"
                    )));
                }
                if ever.contains(&id) {
                    return Err(ClusterError::Invalid(format!(
                        "node id {id} was used before; ids are never reused"
                    )));
                }
                if addr.raft.is_empty() {
                    return Err(ClusterError::Invalid(
                        "the learner needs a raft address".into(),
                    ));
                }
                self.raft
                    .add_learner(id, addr, false)
                    .await
                    .map_err(raft_err)?;
            }
            MembershipOp::Promote { id } => {
                if !learners.contains(&id) {
                    return Err(ClusterError::Invalid(format!("node {id} is not a learner")));
                }
                self.raft
                    .change_membership(ChangeMembers::AddVoterIds(BTreeSet::from([id])), false)
                    .await
                    .map_err(raft_err)?;
            }
            MembershipOp::Remove { id } => {
                let change = if voters.contains(&id) {
                    if voters.len() == 1 {
                        return Err(ClusterError::Invalid("cannot remove the last voter".into()));
                    }
                    ChangeMembers::RemoveVoters(BTreeSet::from([id]))
                } else if learners.contains(&id) {
                    ChangeMembers::RemoveNodes(BTreeSet::from([id]))
                } else {
                    return Err(ClusterError::Invalid(format!("node {id} is not a member")));
                };
                self.raft
                    .change_membership(change, false)
                    .await
                    .map_err(raft_err)?;
            }
        }
        Ok(self.status())
    }

    pub(crate) fn status(&self) -> ClusterStatus {
        let m = self.raft.metrics().borrow_watched().clone();
        let last = m.last_log_index.unwrap_or(0);
        let membership = m.membership_config.membership();
        let clock_ms = self.sm.read().expect("state lock").sm.clock_ms();
        ClusterStatus {
            id: self.id,
            state: match m.state {
                ServerState::Leader => "Leader",
                ServerState::Follower => "Follower",
                ServerState::Candidate => "Candidate",
                ServerState::Learner => "Learner",
                ServerState::Shutdown => "Shutdown",
            }
            .to_string(),
            leader: m.current_leader,
            term: m.current_term,
            last_log_index: last,
            committed_index: m
                .cluster_committed
                .as_ref()
                .or(m.local_committed.as_ref())
                .map_or(0, |l| l.index),
            applied_index: m.last_applied.as_ref().map_or(0, |l| l.index),
            snapshot_index: m.snapshot.as_ref().map_or(0, |l| l.index),
            voters: membership.voter_ids().collect(),
            learners: membership.learner_ids().collect(),
            nodes: membership.nodes().map(|(id, n)| (*id, n.clone())).collect(),
            replication: m
                .replication
                .as_ref()
                .map(|r| {
                    r.iter()
                        .filter(|(id, _)| **id != self.id)
                        .map(|(id, matched)| {
                            let mi = matched.as_ref().map_or(0, |l| l.index);
                            (
                                *id,
                                Replication {
                                    matched_index: mi,
                                    lag: last.saturating_sub(mi),
                                },
                            )
                        })
                        .collect()
                })
                .unwrap_or_default(),
            ready: self.ready.load(Ordering::SeqCst),
            clock_ms,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{raft_err, Leaderships};
    use crate::ClusterError;
    use openraft::errors::{ClientWriteError, ForwardToLeader, RaftError};

    #[test]
    fn a_discarded_membership_change_is_indeterminate_a_refused_one_retriable() {
        let discarded: RaftError<crate::TypeConfig, ClientWriteError<crate::TypeConfig>> =
            RaftError::APIError(ClientWriteError::LogEntryDiscarded(ForwardToLeader::empty()));
        assert!(matches!(
            raft_err(discarded),
            ClusterError::Indeterminate(_)
        ));
        let refused: RaftError<crate::TypeConfig, ClientWriteError<crate::TypeConfig>> =
            RaftError::APIError(ClientWriteError::ForwardToLeader(ForwardToLeader::empty()));
        assert!(matches!(raft_err(refused), ClusterError::NoLeader));
    }

    #[test]
    fn a_leader_elected_again_in_a_later_term_is_a_new_leadership() {
        let mut seen = Leaderships::default();
        assert!(seen.observe(3, Some(1)), "the first leader");
        assert!(!seen.observe(3, Some(1)), "the same leadership again");
        assert!(!seen.observe(4, None), "an election under way");
        assert!(seen.observe(4, Some(1)), "node 1 won term 4");
        assert!(seen.observe(5, Some(2)), "node 2 won term 5");
    }
}
