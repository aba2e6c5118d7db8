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

mod config;
mod contact;
mod membership;
mod read;
mod start;
mod tasks;
mod write;

pub use crate::clock::wall_ms;
pub use config::{
    ArchiveConfig, Broken, LedgerRetention, NodeConfig, Simulation, MEMBER_ADDRESSES_EVERY,
};
pub use membership::MembershipOp;
pub use read::{ClusterStatus, Replication};
#[cfg(feature = "test-support")]
pub use write::FORWARDED_BATCH_BYTES_MAX;

use crate::clock::ClusterClock;
use crate::error::ClusterError;
use crate::forward::Forwarder;
use crate::leader_contact::LeaderContact;
use crate::ledger_store::{LedgerPage, LedgerQuery, LedgerStore};
use crate::log_store::LogStore;
use crate::metrics::{HistogramSnapshot, LatencyHistogram};
use crate::network::Peers;
use crate::sm_store::SmState;
use crate::types::{NodeAddr, TypeConfig};
use openraft::async_runtime::WatchReceiver;
use openraft::errors::{ClientWriteError, RaftError};
use serde::{Deserialize, Serialize};
use sluice_statemachine::{digest_hex, Command, Outcome};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// The openraft handle of a node (its state machine store is the crate's own).
pub type Raft = openraft::Raft<TypeConfig, crate::sm_store::SmStore>;

/// Shared internals of a node: the crate's own, behind [`RaftNode`]'s methods.
pub(crate) struct NodeInner {
    pub(crate) id: u64,
    pub(crate) raft: Raft,
    sm: Arc<RwLock<SmState>>,
    peers: Peers,
    queue: mpsc::Sender<write::Pending>,
    ready: AtomicBool,
    /// The cluster's time as this node sees it; the leader stamps entries with it.
    pub(crate) clock: ClusterClock,
    /// The last stamp, and the term it was made in (a new term starts from the applied clock,
    /// so that a stamp that never committed, made while cut off, is not carried on).
    stamp: std::sync::Mutex<(u64, u64)>,
    tick_in_flight: AtomicBool,
    /// Time from proposal submission to applied outcome on the leader.
    commit_latency: Arc<LatencyHistogram>,
    /// Duration of each WAL sync.
    wal_sync: Arc<LatencyHistogram>,
    /// Time a write waits in this node's queue before it is proposed or forwarded.
    queue_wait: Arc<LatencyHistogram>,
    /// Round trip of each batch forwarded from a follower to the leader.
    forward_latency: Arc<LatencyHistogram>,
    /// How long each snapshot's encoding paused this node's applies.
    snapshot_encode: Arc<LatencyHistogram>,
    /// Whose status this node's applies changed at once.
    woken: crate::sm_store::Woke,
    /// Leaders this node has come to know of (the first one included): a count that keeps
    /// rising means elections keep happening.
    leader_changes: AtomicU64,
    /// Node-to-node calls refused for want of this cluster's credential.
    auth_refused: Arc<AtomicU64>,
    /// Node-to-node connections closed at once because their address had too many open.
    connections_refused: Arc<AtomicU64>,
    forwarder: Forwarder,
    /// When the leader was last heard from (a follower cut off from it refuses at once).
    leader_contact: LeaderContact,
    /// True while this node is cut off from leadership (see [`contact::watch_leader_contact`]).
    cut_off: tokio::sync::watch::Sender<bool>,
    pub(crate) cancel: CancellationToken,
    /// Set with the reason when the Raft core stops without [`RaftNode::shutdown`].
    stopped: tokio::sync::watch::Sender<Option<String>>,
    /// Where the members' connections come from, for the Raft listener's slots kept for them.
    member_addresses: tasks::MemberAddresses,
    pub(crate) cfg: NodeConfig,
    db: Arc<rocksdb::DB>,
    log: LogStore,
    ledger: Option<LedgerStore>,
    /// Ledger queries being scanned at once, at most [`LEDGER_SCANS_MAX`].
    ledger_scans: Arc<tokio::sync::Semaphore>,
    /// Stopped and joined at shutdown, so that the database closes on the thread that drops the
    /// node.
    storage_threads: Vec<crate::storage::StorageThread>,
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
/// Ledger queries (pages of the ledger, the audit log, an explanation's reads) a node scans at
/// once: each may read up to [`LEDGER_SCAN_MAX`](crate::ledger_store::LEDGER_SCAN_MAX) records
/// on a thread of its own, so more at once would take the cores that gate checks and joins run
/// on. The rest wait their turn, up to [`LEDGER_SCAN_WAIT`].
pub const LEDGER_SCANS_MAX: usize = 1;
/// How long a ledger query waits for its turn before it is refused as busy.
pub const LEDGER_SCAN_WAIT: Duration = Duration::from_secs(5);

/// A turn of `turns`, waited for at most `wait` (then [`ClusterError::Busy`]); turns are given
/// in the order they were asked for.
async fn take_turn(
    turns: &Arc<tokio::sync::Semaphore>,
    wait: Duration,
) -> Result<tokio::sync::OwnedSemaphorePermit, ClusterError> {
    tokio::time::timeout(wait, turns.clone().acquire_owned())
        .await
        .map_err(|_| ClusterError::Busy)?
        .map_err(|_| ClusterError::ShuttingDown)
}

/// What a node has counted and timed since it started, for its metrics.
#[derive(Clone, Debug)]
pub struct NodeMetrics {
    /// Leaderships (a leader in a term) this node has come to know of, the first included: a
    /// count that keeps rising means elections keep happening.
    pub leader_changes: u64,
    /// Node-to-node calls refused for want of this cluster's credential.
    pub auth_refused: u64,
    /// Node-to-node connections closed at once because their address had too many open.
    pub connections_refused: u64,
    /// Proposal submission to applied outcome, on the leader.
    pub commit_latency: HistogramSnapshot,
    /// Each WAL sync (one per group commit of log appends).
    pub wal_sync: HistogramSnapshot,
    /// Time a write waited in this node's queue before it was proposed or forwarded.
    pub queue_wait: HistogramSnapshot,
    /// Round trip of each batch forwarded from this follower to the leader.
    pub forward_latency: HistogramSnapshot,
    /// How long each snapshot's encoding paused this node's applies.
    pub snapshot_encode: HistogramSnapshot,
}

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
    /// This node's id.
    pub fn id(&self) -> u64 {
        self.inner.id
    }

    /// Whose status this node's applies change at once, from now on, batch by batch (see
    /// [`sluice_statemachine::Woken`]); a receiver that falls behind is told it lagged.
    pub fn woken(
        &self,
    ) -> tokio::sync::broadcast::Receiver<std::sync::Arc<[sluice_statemachine::Woken]>> {
        self.inner.woken.subscribe()
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

    /// The openraft handle, for the crate's own tests and benches (feature `test-support`):
    /// everything else goes through this type's methods.
    #[cfg(any(test, feature = "test-support"))]
    pub fn raft(&self) -> &Raft {
        &self.inner.raft
    }

    /// What this node has counted and timed since it started.
    pub fn metrics(&self) -> NodeMetrics {
        let i = &self.inner;
        NodeMetrics {
            leader_changes: i.leader_changes.load(Ordering::Relaxed),
            auth_refused: i.auth_refused.load(Ordering::Relaxed),
            connections_refused: i.connections_refused.load(Ordering::Relaxed),
            commit_latency: i.commit_latency.snapshot(),
            wal_sync: i.wal_sync.snapshot(),
            queue_wait: i.queue_wait.snapshot(),
            forward_latency: i.forward_latency.snapshot(),
            snapshot_encode: i.snapshot_encode.snapshot(),
        }
    }

    /// Has this node's storage a cluster in it (made by [`Self::initialize`] here or on another
    /// node and replicated here)?
    pub async fn is_initialized(&self) -> Result<bool, ClusterError> {
        self.inner
            .raft
            .is_initialized()
            .await
            .map_err(|e| ClusterError::Fatal(e.to_string()))
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
        let turn = take_turn(&self.inner.ledger_scans, LEDGER_SCAN_WAIT).await?;
        tokio::task::spawn_blocking(move || {
            let page = store.query(&q);
            drop(turn);
            page
        })
        .await
        .map_err(|e| ClusterError::Fatal(e.to_string()))?
        .map(Some)
        .map_err(|e| ClusterError::Fatal(e.to_string()))
    }

    /// Where this node's ledger records are whole: `(complete_from, through)`, the first and the
    /// last log index (`None`: the node keeps none). Records of entries before `complete_from`
    /// are not on this node (it caught up by a snapshot, or kept no ledger then).
    pub async fn ledger_coverage(&self) -> Result<Option<(u64, u64)>, ClusterError> {
        let Some(store) = self.inner.ledger.clone() else {
            return Ok(None);
        };
        if !self.inner.ready.load(Ordering::SeqCst) {
            return Err(ClusterError::NotReady);
        }
        tokio::task::spawn_blocking(move || Ok((store.complete_from()?, store.through()?)))
            .await
            .map_err(|e| ClusterError::Fatal(e.to_string()))?
            .map(Some)
            .map_err(|e: std::io::Error| ClusterError::Fatal(e.to_string()))
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
        if let Some(mut h) = self.server.lock().await.take() {
            // Peers' connections close within the grace; what is left is cut.
            if tokio::time::timeout(Duration::from_secs(5), &mut h)
                .await
                .is_err()
            {
                h.abort();
            }
        }
        // The flusher's last syncs and the ledger's last records are done before it returns.
        let threads = self.inner.storage_threads.clone();
        let joined = tokio::task::spawn_blocking(move || {
            threads
                .iter()
                .for_each(crate::storage::StorageThread::stop_and_join)
        });
        if let Err(e) = joined.await {
            tracing::warn!(error = %e, "storage threads");
        }
        if let Err(e) = self.inner.db.flush_wal(true) {
            tracing::warn!(error = %e, "final WAL sync");
        }
    }
}

/// A node of its own on loopback, for this crate's unit tests: started, not yet initialized.
#[cfg(test)]
pub(crate) async fn start_alone(dir: &std::path::Path) -> RaftNode {
    RaftNode::start(NodeConfig::new(1, dir, "127.0.0.1:0".parse().unwrap()))
        .await
        .unwrap()
}

#[cfg(test)]
mod tests {
    use super::raft_err;
    use crate::ClusterError;
    use openraft::errors::{ClientWriteError, ForwardToLeader, RaftError};

    /// Ledger scans take turns: while every turn is taken the next waits, in order, and is
    /// refused as busy once it has waited its time.
    #[tokio::test(start_paused = true)]
    async fn ledger_scans_take_turns_and_a_long_wait_is_refused_as_busy() {
        use super::{take_turn, LEDGER_SCANS_MAX, LEDGER_SCAN_WAIT};
        use std::sync::Arc;
        use std::time::Duration;
        let turns = Arc::new(tokio::sync::Semaphore::new(LEDGER_SCANS_MAX));
        let mut held = Vec::new();
        for _ in 0..LEDGER_SCANS_MAX {
            held.push(take_turn(&turns, LEDGER_SCAN_WAIT).await.unwrap());
        }
        let started = tokio::time::Instant::now();
        assert!(matches!(
            take_turn(&turns, LEDGER_SCAN_WAIT).await,
            Err(ClusterError::Busy)
        ));
        assert_eq!(started.elapsed(), LEDGER_SCAN_WAIT);
        // One that waits gets the turn as soon as one is given back.
        let waiting = tokio::spawn({
            let turns = turns.clone();
            async move { take_turn(&turns, LEDGER_SCAN_WAIT).await.is_ok() }
        });
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(!waiting.is_finished());
        held.pop();
        assert!(waiting.await.unwrap());
    }

    #[test]
    fn a_discarded_membership_change_is_indeterminate_a_refused_one_retriable() {
        let discarded: RaftError<crate::types::TypeConfig, ClientWriteError<crate::types::TypeConfig>> =
            RaftError::APIError(ClientWriteError::LogEntryDiscarded(ForwardToLeader::empty()));
        assert!(matches!(
            raft_err(discarded),
            ClusterError::Indeterminate(_)
        ));
        let refused: RaftError<crate::types::TypeConfig, ClientWriteError<crate::types::TypeConfig>> =
            RaftError::APIError(ClientWriteError::ForwardToLeader(ForwardToLeader::empty()));
        assert!(matches!(raft_err(refused), ClusterError::NoLeader));
    }
}
