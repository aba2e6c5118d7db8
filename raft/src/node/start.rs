//! Starting a node: config → storage → network → Raft → server, then its background duties.

use super::config::{
    Broken, NodeConfig, LEADER_SNAPSHOT_FACTOR, RAFT_AUTHENTICATE_WITHIN, RAFT_CONNECTIONS_MAX,
    RAFT_CONNECTIONS_PER_ADDRESS_MAX, RAFT_CONNECTIONS_RESERVED, RAFT_STREAMS_PER_CONNECTION_MAX,
};
use super::Raft;
use super::{contact, tasks, write, NodeInner, RaftNode};
use crate::auth::Gatekeeper;
use crate::clock::ClusterClock;
use crate::error::ClusterError;
use crate::forward::Forwarder;
use crate::leader_contact::LeaderContact;
use crate::ledger_store::LedgerStore;
use crate::log_store::{open_db_retrying, LogStore};
use crate::network::{NetworkFactory, Peers};
use crate::pb::raft_service_server::RaftServiceServer;
use crate::service::{RaftRpc, MESSAGE_BYTES_MAX};
use crate::sm_store::{SmStore, SnapshotDeferral};
use crate::snapshot_policy;
use crate::storage::StorageThread;
use crate::transport::Transport;
use futures::StreamExt;
use sluice_gate::listener::{ConnectionGate, ConnectionLimits, Reserve};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

fn fatal(e: std::io::Error) -> ClusterError {
    ClusterError::Fatal(e.to_string())
}

impl RaftNode {
    /// Opens storage, starts Raft and the node-to-node server. The node serves reads once it
    /// has recovered (see [`super::ClusterStatus::ready`]).
    pub async fn start(mut cfg: NodeConfig) -> Result<Self, ClusterError> {
        let storage = Storage::open(&cfg).await?;
        let transport = cfg.simulation.as_ref().map(|s| s.transport.clone());
        let listener = Listening::bind(&cfg, transport.as_deref()).await?;
        let raft_addr = listener.local_addr()?;
        if cfg.advertise.raft.is_empty() {
            cfg.advertise.raft = raft_addr.to_string();
        }
        let peers = Peers::new(cfg.tls.clone(), cfg.cluster_secret.clone()).over(transport);
        let network = NetworkFactory {
            peers: peers.clone(),
        };
        let config = Arc::new(raft_config(&cfg)?);
        let raft = Raft::new(cfg.id, config, network, storage.log_store, storage.sm_store)
            .await
            .map_err(|e| ClusterError::Fatal(e.to_string()))?;
        let gatekeeper = raft_port_gatekeeper(&cfg);
        let members = tasks::MemberAddresses::default();
        let gate = raft_port_gate(&members);

        let (queue, queued) = mpsc::channel(cfg.write_queue_max);
        let inner = Arc::new(NodeInner {
            id: cfg.id,
            raft,
            sm: storage.sm,
            peers,
            queue,
            ready: AtomicBool::new(false),
            clock: ClusterClock::new(cfg.wall_clock.clone()),
            stamp: std::sync::Mutex::new((0, 0)),
            tick_in_flight: AtomicBool::new(false),
            commit_latency: Arc::default(),
            wal_sync: storage.log.wal_sync.clone(),
            queue_wait: Arc::default(),
            forward_latency: Arc::default(),
            snapshot_encode: storage.snapshot_encode,
            woken: storage.woken,
            leader_changes: AtomicU64::new(0),
            auth_refused: gatekeeper.refused.clone(),
            connections_refused: gate.refused.clone(),
            forwarder: Forwarder::default(),
            leader_contact: LeaderContact::new(),
            cut_off: tokio::sync::watch::Sender::new(false),
            cancel: CancellationToken::new(),
            stopped: tokio::sync::watch::Sender::new(None),
            member_addresses: members,
            cfg,
            db: storage.db,
            log: storage.log,
            ledger: storage.ledger,
            ledger_scans: Arc::new(tokio::sync::Semaphore::new(super::LEDGER_SCANS_MAX)),
            storage_threads: storage.threads,
        });
        // A simulated network has names of its own, not the resolver's.
        let tcp = matches!(listener, Listening::Tcp(_));
        let server = serve(&inner, listener, gate, gatekeeper)?;
        spawn_duties(&inner, queued, storage.deferral);
        if tcp {
            tokio::spawn(tasks::resolve_members(inner.clone()));
        }
        Ok(Self {
            inner,
            raft_addr,
            server: Arc::new(tokio::sync::Mutex::new(Some(server))),
        })
    }
}

/// Who may call the Raft port: a holder of the cluster's secret, or of one still accepted.
fn raft_port_gatekeeper(cfg: &NodeConfig) -> Gatekeeper {
    let secrets = cfg.cluster_secret.iter();
    Gatekeeper::new(
        secrets
            .chain(&cfg.cluster_secrets_also_accepted)
            .cloned()
            .collect(),
    )
}

/// The Raft port's connection gate: few connections, per address fewer, authenticated soon,
/// with slots kept for the members' addresses.
fn raft_port_gate(members: &tasks::MemberAddresses) -> ConnectionGate {
    ConnectionGate::new(ConnectionLimits {
        connections_max: RAFT_CONNECTIONS_MAX,
        per_address_max: RAFT_CONNECTIONS_PER_ADDRESS_MAX,
        first_bytes_timeout: RAFT_AUTHENTICATE_WITHIN,
        exempt: None,
        reserve: Some(Reserve {
            slots: RAFT_CONNECTIONS_RESERVED,
            holders: members.holders(),
        }),
    })
}

/// A node's storage, opened: one RocksDB database for the log, the ledger and the Raft metadata,
/// and the snapshot directory beside it.
struct Storage {
    db: Arc<rocksdb::DB>,
    /// Handed to Raft.
    log_store: LogStore,
    /// The node's own reader of the same log.
    log: LogStore,
    /// Handed to Raft.
    sm_store: SmStore,
    sm: Arc<std::sync::RwLock<crate::sm_store::SmState>>,
    snapshot_encode: Arc<crate::metrics::LatencyHistogram>,
    woken: crate::sm_store::Woke,
    deferral: Arc<SnapshotDeferral>,
    ledger: Option<LedgerStore>,
    /// The threads that write to the database (the WAL flusher, the ledger writer).
    threads: Vec<StorageThread>,
}

impl Storage {
    async fn open(cfg: &NodeConfig) -> Result<Self, ClusterError> {
        std::fs::create_dir_all(&cfg.data_dir).map_err(fatal)?;
        let db = open_db_retrying(&cfg.data_dir.join("db"))
            .await
            .map_err(fatal)?;
        // A node runs one group, group 0, whose parts have the names a node always gave them.
        let group = crate::group::GroupId(0);
        let log_store = match &cfg.simulation {
            None => LogStore::new(db.clone()).map_err(fatal)?,
            Some(s) => LogStore::simulated(
                db.clone(),
                s.wal_sync_takes,
                s.wal_synced.clone(),
                s.broken == Some(Broken::AckBeforeSync),
            ),
        };
        let mut log_store = log_store.in_group(group);
        let ledger = cfg
            .ledger
            .map(|_| LedgerStore::new(db.clone()).in_group(group));
        let snapshots = group.snapshots(&cfg.data_dir);
        let mut sm_store = SmStore::new(&snapshots, ledger.clone(), cfg.draw_key).map_err(fatal)?;
        if let Some(a) = &cfg.archive {
            let archive =
                Arc::new(crate::archive::Archive::new(&group.archive(&a.dir), &snapshots, a.keep).map_err(fatal)?);
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
        let deferral = sm_store.deferral();
        deferral.leader_every.store(
            cfg.snapshot_every.saturating_mul(LEADER_SNAPSHOT_FACTOR),
            Ordering::Relaxed,
        );
        let threads = log_store
            .flusher_thread()
            .into_iter()
            .chain(sm_store.ledger_thread())
            .collect();
        Ok(Self {
            threads,
            db,
            log: log_store.clone(),
            log_store,
            snapshot_encode: sm_store.snapshot_encode(),
            woken: sm_store.woken(),
            sm: sm_store.handle(),
            sm_store,
            deferral,
            ledger,
        })
    }
}

/// Syncs a directory, so that the entries made in it are durable.
fn sync_dir(dir: &std::path::Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// Where the node-to-node service takes its connections from.
enum Listening {
    Tcp(tokio::net::TcpListener),
    Custom(SocketAddr, crate::transport::Incoming),
}

impl Listening {
    async fn bind(
        cfg: &NodeConfig,
        transport: Option<&dyn Transport>,
    ) -> Result<Self, ClusterError> {
        Ok(match transport {
            None => Self::Tcp(
                tokio::net::TcpListener::bind(cfg.listen_raft)
                    .await
                    .map_err(fatal)?,
            ),
            Some(t) => {
                let (addr, incoming) = t.listen(cfg.listen_raft).await.map_err(fatal)?;
                Self::Custom(addr, incoming)
            }
        })
    }

    fn local_addr(&self) -> Result<SocketAddr, ClusterError> {
        match self {
            Self::Tcp(l) => l.local_addr().map_err(fatal),
            Self::Custom(addr, _) => Ok(*addr),
        }
    }
}

/// openraft's configuration for this node.
fn raft_config(cfg: &NodeConfig) -> Result<openraft::Config, ClusterError> {
    openraft::Config {
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
        max_payload_entries: crate::network::REPLICATION_ENTRIES_MAX,
        snapshot_policy: snapshot_policy(cfg.snapshot_every, cfg.id),
        max_in_snapshot_log_to_keep: cfg.logs_kept_after_snapshot,
        purge_batch_size: 256,
        replication_lag_threshold: cfg.logs_kept_after_snapshot.max(1),
        ..Default::default()
    }
    .validate()
    .map_err(|e| ClusterError::Invalid(e.to_string()))
}

/// Serves the node-to-node service until the node is cancelled. Calls are checked for the
/// cluster's credential before their bodies are read, and every connection must make a call
/// that passes in time (without a secret, any call: after TLS's handshake, or on loopback).
fn serve(
    inner: &Arc<NodeInner>,
    listener: Listening,
    gate: ConnectionGate,
    gatekeeper: Gatekeeper,
) -> Result<JoinHandle<()>, ClusterError> {
    let mut builder = tonic::transport::Server::builder()
        .tcp_nodelay(true)
        .concurrency_limit_per_connection(RAFT_STREAMS_PER_CONNECTION_MAX as usize)
        .max_concurrent_streams(Some(RAFT_STREAMS_PER_CONNECTION_MAX));
    if let Some(tls) = &inner.cfg.tls {
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
    let svc = tonic::service::interceptor::InterceptedService::new(
        RaftServiceServer::new(RaftRpc::new(inner))
            .max_decoding_message_size(MESSAGE_BYTES_MAX)
            .max_encoding_message_size(MESSAGE_BYTES_MAX),
        gatekeeper,
    );
    let cancel = inner.cancel.clone();
    let router = builder.add_service(svc);
    Ok(tokio::spawn(async move {
        let served = match listener {
            Listening::Tcp(listener) => {
                let incoming = sluice_gate::listener::gated_incoming(
                    listener,
                    gate,
                    Some(RAFT_AUTHENTICATE_WITHIN),
                    None,
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
    }))
}

/// Starts the node's background duties: the write batcher, the leader's ticks, the watchers of
/// the core, of leadership and of the leader's contact, clock sampling, ledger upkeep, and the
/// wait for recovery after which the node serves reads.
fn spawn_duties(
    inner: &Arc<NodeInner>,
    queued: mpsc::Receiver<write::Pending>,
    deferral: Arc<SnapshotDeferral>,
) {
    tokio::spawn(write::batcher(inner.clone(), queued));
    tokio::spawn(tasks::ticker(inner.clone()));
    tokio::spawn(tasks::track_leadership(inner.clone(), deferral));
    tokio::spawn(tasks::watch_core(inner.clone()));
    tokio::spawn(tasks::sample_clocks(inner.clone()));
    tokio::spawn(contact::watch_leader_contact(inner.clone()));
    tokio::spawn(tasks::keep_ledger(inner.clone()));
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
}
