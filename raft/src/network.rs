//! The client side of the node-to-node transport: one long-lived tonic channel per peer address,
//! RPC timeouts enforced locally, snapshots streamed in chunks, transport failures reported to
//! openraft as `Unreachable` (so it backs off) or `Network`.

use crate::codec;
use crate::pb;
use crate::pb::raft_service_client::RaftServiceClient;
use crate::types::{NodeAddr, TypeConfig, Vote};
use openraft::alias::SnapshotOf;
use openraft::errors::{
    NetworkError, RPCError, RaftError, ReplicationClosed, StreamingError, Unreachable,
};
use openraft::network::{RPCOption, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, VoteRequest, VoteResponse,
};
use openraft::{OptionalSend, RaftNetworkV2};
use std::collections::HashMap;
use std::future::Future;
use std::io::Cursor;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

/// Bytes per snapshot chunk on the wire.
pub const SNAPSHOT_CHUNK_BYTES: usize = 1 << 20;
/// The shortest timeout used for AppendEntries, whatever openraft suggests (its suggestion is
/// the heartbeat interval, too short for a large batch behind a follower's fsync).
pub const APPEND_TIMEOUT_MIN: Duration = Duration::from_millis(1_000);

/// TLS material for node-to-node traffic (mutual authentication), PEM-encoded.
#[derive(Clone, Debug)]
pub struct TlsMaterial {
    /// CA that signed every node's certificate.
    pub ca_pem: Vec<u8>,
    /// This node's certificate chain.
    pub cert_pem: Vec<u8>,
    /// This node's private key.
    pub key_pem: Vec<u8>,
    /// Name to expect in peers' certificates; defaults to the host part of their address.
    pub server_name: Option<String>,
}

/// Channels to peers, shared by every RPC client of this node.
#[derive(Clone, Debug)]
pub struct Peers {
    channels: Arc<Mutex<HashMap<String, Channel>>>,
    tls: Option<TlsMaterial>,
}

impl Peers {
    /// An empty set of channels using `tls` when given.
    pub fn new(tls: Option<TlsMaterial>) -> Self {
        Self {
            channels: Arc::default(),
            tls,
        }
    }

    /// The channel to `addr` (`host:port`), created lazily on first use and kept.
    pub fn channel(&self, addr: &str) -> Result<Channel, tonic::transport::Error> {
        let mut map = self.channels.lock().expect("peer map lock");
        if let Some(c) = map.get(addr) {
            return Ok(c.clone());
        }
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        let mut ep = Endpoint::from_shared(format!("{scheme}://{addr}"))?
            .connect_timeout(Duration::from_millis(500))
            .tcp_nodelay(true)
            .http2_keep_alive_interval(Duration::from_secs(5))
            .keep_alive_timeout(Duration::from_secs(5))
            .keep_alive_while_idle(true);
        if let Some(tls) = &self.tls {
            let host = addr
                .rsplit_once(':')
                .map_or(addr, |(h, _)| h)
                .trim_matches(['[', ']']);
            let cfg = ClientTlsConfig::new()
                .ca_certificate(Certificate::from_pem(&tls.ca_pem))
                .identity(Identity::from_pem(&tls.cert_pem, &tls.key_pem))
                .domain_name(tls.server_name.clone().unwrap_or_else(|| host.to_string()));
            ep = ep.tls_config(cfg)?;
        }
        let ch = ep.connect_lazy();
        map.insert(addr.to_string(), ch.clone());
        Ok(ch)
    }

    /// A gRPC client for the node-to-node service at `addr`.
    pub fn client(
        &self,
        addr: &str,
    ) -> Result<RaftServiceClient<Channel>, tonic::transport::Error> {
        Ok(RaftServiceClient::new(self.channel(addr)?)
            .max_decoding_message_size(crate::service::MESSAGE_BYTES_MAX)
            .max_encoding_message_size(crate::service::MESSAGE_BYTES_MAX))
    }
}

/// Makes openraft's per-target clients.
#[derive(Clone, Debug)]
pub struct NetworkFactory {
    pub(crate) peers: Peers,
}

/// openraft's client for one target node.
#[derive(Debug)]
pub struct PeerConn {
    target: u64,
    addr: String,
    peers: Peers,
}

impl RaftNetworkFactory<TypeConfig> for NetworkFactory {
    type Network = PeerConn;

    async fn new_client(&mut self, target: u64, node: &NodeAddr) -> PeerConn {
        PeerConn {
            target,
            addr: node.raft.clone(),
            peers: self.peers.clone(),
        }
    }
}

fn status_to_rpc(target: u64, s: tonic::Status) -> RPCError<TypeConfig> {
    match s.code() {
        tonic::Code::Unavailable | tonic::Code::Unknown | tonic::Code::Cancelled => {
            RPCError::Unreachable(Unreachable::from_string(format!("node {target}: {s}")))
        }
        _ => RPCError::Network(NetworkError::from_string(format!("node {target}: {s}"))),
    }
}

impl PeerConn {
    async fn call<Req, Resp, F, Fut>(
        &self,
        req: &Req,
        timeout: Duration,
        rpc: F,
    ) -> Result<Resp, RPCError<TypeConfig>>
    where
        Req: serde::Serialize,
        Resp: serde::de::DeserializeOwned,
        F: FnOnce(RaftServiceClient<Channel>, tonic::Request<pb::Payload>) -> Fut,
        Fut: Future<Output = Result<tonic::Response<pb::Payload>, tonic::Status>>,
    {
        let client = self.peers.client(&self.addr).map_err(|e| {
            RPCError::Unreachable(Unreachable::from_string(format!(
                "node {}: {e}",
                self.target
            )))
        })?;
        let mut request = tonic::Request::new(pb::Payload {
            data: codec::encode(req),
        });
        request.set_timeout(timeout);
        let reply = match tokio::time::timeout(timeout, rpc(client, request)).await {
            Err(_) => {
                return Err(RPCError::Unreachable(Unreachable::from_string(format!(
                    "node {}: no reply within {timeout:?}",
                    self.target
                ))))
            }
            Ok(r) => r.map_err(|s| status_to_rpc(self.target, s))?,
        };
        let result: Result<Resp, RaftError<TypeConfig>> = codec::decode(&reply.into_inner().data)
            .map_err(|e| {
            RPCError::Network(NetworkError::from_string(format!(
                "node {}: {e}",
                self.target
            )))
        })?;
        result.map_err(|e| RPCError::Unreachable(Unreachable::new(&e)))
    }
}

impl RaftNetworkV2<TypeConfig> for PeerConn {
    type SnapshotData = Cursor<Vec<u8>>;

    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<TypeConfig>, RPCError<TypeConfig>> {
        let timeout = option.hard_ttl().max(APPEND_TIMEOUT_MIN);
        self.call(&rpc, timeout, |mut c, r| async move {
            c.append_entries(r).await
        })
        .await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<VoteResponse<TypeConfig>, RPCError<TypeConfig>> {
        self.call(&rpc, option.hard_ttl(), |mut c, r| async move {
            c.vote(r).await
        })
        .await
    }

    async fn full_snapshot(
        &mut self,
        vote: Vote,
        snapshot: SnapshotOf<TypeConfig, Self::SnapshotData>,
        cancel: impl Future<Output = ReplicationClosed> + OptionalSend + 'static,
        option: RPCOption,
    ) -> Result<SnapshotResponse<TypeConfig>, StreamingError<TypeConfig>> {
        let target = self.target;
        let mut client = self.peers.client(&self.addr).map_err(|e| {
            StreamingError::Unreachable(Unreachable::from_string(format!("node {target}: {e}")))
        })?;
        let header = codec::encode(&(vote, snapshot.meta.clone()));
        let data = snapshot.snapshot.into_inner();
        let mut chunks = vec![pb::SnapshotChunk {
            header,
            data: Vec::new(),
        }];
        chunks.extend(
            data.chunks(SNAPSHOT_CHUNK_BYTES)
                .map(|c| pb::SnapshotChunk {
                    header: Vec::new(),
                    data: c.to_vec(),
                }),
        );
        let send = async move {
            let reply = client
                .install_snapshot(tokio_stream::iter(chunks))
                .await
                .map_err(|s| StreamingError::from(status_to_rpc(target, s)))?;
            let result: Result<SnapshotResponse<TypeConfig>, RaftError<TypeConfig>> =
                codec::decode(&reply.into_inner().data).map_err(|e| {
                    StreamingError::Network(NetworkError::from_string(format!(
                        "node {target}: {e}"
                    )))
                })?;
            result.map_err(|e| StreamingError::Unreachable(Unreachable::new(&e)))
        };
        let timeout = option.hard_ttl();
        tokio::select! {
            closed = cancel => Err(StreamingError::Closed(closed)),
            r = tokio::time::timeout(timeout, send) => match r {
                Ok(r) => r,
                Err(_) => Err(StreamingError::Unreachable(Unreachable::from_string(format!(
                    "node {target}: snapshot not installed within {timeout:?}"
                )))),
            },
        }
    }
}
