//! The client side of the node-to-node transport: one long-lived tonic channel per peer address,
//! RPC timeouts enforced locally, snapshots streamed in chunks, transport failures reported to
//! openraft as `Unreachable` (so it backs off) or `Network`.

use crate::auth::{ClusterSecret, Credential};
use crate::codec;
use crate::pb;
use crate::pb::raft_service_client::RaftServiceClient;
use crate::transport::Transport;
use crate::types::{NodeAddr, TypeConfig, Vote};
use openraft::alias::SnapshotOf;
use openraft::base::{BoxFuture, BoxStream};
use openraft::errors::{
    NetworkError, RPCError, RaftError, ReplicationClosed, StreamingError, Unreachable,
};
use openraft::network::{RPCOption, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, StreamAppendResult, VoteRequest,
    VoteResponse,
};
use openraft::{OptionalSend, RaftNetworkV2};
use std::collections::HashMap;
use std::future::Future;
use std::io::Cursor;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

/// Largest single gRPC message between nodes.
pub const MESSAGE_BYTES_MAX: usize = 64 << 20;
/// Most log entries in one replication message. An entry holds at most
/// [`PROPOSAL_BYTES_MAX`](sluice_statemachine::limits::PROPOSAL_BYTES_MAX) of commands, so a
/// message of this many stays under [`MESSAGE_BYTES_MAX`] however large the entries are: a
/// follower never meets a message too large to send, which it would be sent again and again.
pub const REPLICATION_ENTRIES_MAX: u64 = 48;
/// What an entry adds to its commands on the wire, at most: its log id, the proposal's stamp,
/// lengths (a membership entry, which holds no commands, is far smaller than a full proposal).
const ENTRY_OVERHEAD_BYTES_MAX: usize = 4_096;
const _: () = assert!(
    REPLICATION_ENTRIES_MAX as usize
        * (sluice_statemachine::limits::PROPOSAL_BYTES_MAX + ENTRY_OVERHEAD_BYTES_MAX)
        <= MESSAGE_BYTES_MAX
);

/// A client of the node-to-node service, carrying this cluster's credential.
pub type RaftClient = RaftServiceClient<InterceptedService<Channel, Credential>>;

/// Bytes per snapshot chunk on the wire.
pub const SNAPSHOT_CHUNK_BYTES: usize = 1 << 20;
/// The shortest timeout used for AppendEntries, whatever openraft suggests (its suggestion is
/// the heartbeat interval, too short for a large batch behind a follower's fsync).
pub const APPEND_TIMEOUT_MIN: Duration = Duration::from_millis(1_000);
/// How long a peer that answered `AppendStream` with `Unimplemented` (a node of an older version,
/// during a rolling upgrade) is replicated to by unary AppendEntries before streaming is tried again.
pub const UNARY_FALLBACK: Duration = Duration::from_secs(60);

/// How often a peer that stays unreachable is reported again in the log.
pub const UNREACHABLE_REPORT_EVERY: Duration = Duration::from_secs(30);

/// Which peers are unreachable, since when, and when that was last logged: a peer that is down
/// is reported when it goes, every [`UNREACHABLE_REPORT_EVERY`] while it stays down, and when it
/// answers again (openraft's own warnings, one per failed attempt, some 40 a second, are off by
/// default).
#[derive(Debug, Default)]
pub struct Reachability {
    down: HashMap<u64, (Instant, Instant)>,
}

/// What to log about a peer.
#[derive(Debug, PartialEq, Eq)]
pub enum ReachReport {
    /// It has just become unreachable.
    Lost,
    /// It has been unreachable this long.
    StillDown(Duration),
    /// It answered again after being unreachable this long.
    Back(Duration),
}

impl Reachability {
    /// A call to `peer` failed at `now`: what to log, if anything.
    pub fn failed(&mut self, peer: u64, now: Instant) -> Option<ReachReport> {
        match self.down.get_mut(&peer) {
            None => {
                self.down.insert(peer, (now, now));
                Some(ReachReport::Lost)
            }
            Some((since, logged))
                if now.saturating_duration_since(*logged) >= UNREACHABLE_REPORT_EVERY =>
            {
                *logged = now;
                Some(ReachReport::StillDown(
                    now.saturating_duration_since(*since),
                ))
            }
            Some(_) => None,
        }
    }

    /// `peer` answered at `now`: what to log, if anything.
    pub fn answered(&mut self, peer: u64, now: Instant) -> Option<ReachReport> {
        self.down
            .remove(&peer)
            .map(|(since, _)| ReachReport::Back(now.saturating_duration_since(since)))
    }
}

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
    /// Peers without `AppendStream`, by address, and since when.
    unary_only: Arc<Mutex<HashMap<String, Instant>>>,
    /// Peers that did not answer, for the log.
    reach: Arc<Mutex<Reachability>>,
    tls: Option<TlsMaterial>,
    credential: Credential,
    /// Vote requests sent: `[pre-votes, votes]`.
    vote_requests: Arc<[AtomicU64; 2]>,
    /// A network other than TCP (a simulation's).
    transport: Option<Arc<dyn Transport>>,
}

impl Peers {
    /// An empty set of channels using `tls` when given, every call carrying the credential
    /// of `secret` when given.
    pub fn new(tls: Option<TlsMaterial>, secret: Option<ClusterSecret>) -> Self {
        Self {
            channels: Arc::default(),
            unary_only: Arc::default(),
            reach: Arc::default(),
            tls,
            credential: Credential(secret),
            vote_requests: Arc::default(),
            transport: None,
        }
    }

    /// The same, connecting over `transport` instead of TCP (and without TLS).
    pub fn over(mut self, transport: Option<Arc<dyn Transport>>) -> Self {
        self.transport = transport;
        self
    }

    /// Vote requests this node has sent: (pre-votes, votes). A node that cannot win an election
    /// sends pre-votes and no votes; votes that keep growing mean elections keep happening.
    pub fn vote_requests_sent(&self) -> (u64, u64) {
        (
            self.vote_requests[0].load(Ordering::Relaxed),
            self.vote_requests[1].load(Ordering::Relaxed),
        )
    }

    /// Whether `addr` answered `AppendStream` with `Unimplemented` less than [`UNARY_FALLBACK`] ago.
    fn is_unary_only(&self, addr: &str) -> bool {
        let mut map = self.unary_only.lock().expect("unary map lock");
        match map.get(addr) {
            Some(since) if since.elapsed() < UNARY_FALLBACK => true,
            Some(_) => {
                map.remove(addr);
                false
            }
            None => false,
        }
    }

    /// Records a failed call to `peer` (logging it when it is news).
    fn peer_failed(&self, peer: u64, error: &RPCError<TypeConfig>) {
        if !matches!(error, RPCError::Unreachable(_)) {
            return;
        }
        let report = self
            .reach
            .lock()
            .expect("reachability lock")
            .failed(peer, Instant::now());
        match report {
            Some(ReachReport::Lost) => tracing::warn!(node = peer, %error, "cannot reach node"),
            Some(ReachReport::StillDown(d)) => {
                tracing::warn!(node = peer, secs = d.as_secs(), %error, "node still unreachable")
            }
            _ => {}
        }
    }

    /// Records an answer from `peer`.
    fn peer_answered(&self, peer: u64) {
        let report = self
            .reach
            .lock()
            .expect("reachability lock")
            .answered(peer, Instant::now());
        if let Some(ReachReport::Back(d)) = report {
            tracing::info!(node = peer, secs = d.as_secs(), "node reachable again");
        }
    }

    fn set_unary_only(&self, addr: &str) {
        let mut map = self.unary_only.lock().expect("unary map lock");
        map.insert(addr.to_string(), Instant::now());
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
        let ch = match &self.transport {
            None => ep.connect_lazy(),
            Some(t) => {
                let (t, addr) = (t.clone(), addr.to_string());
                ep.connect_with_connector_lazy(tower::service_fn(
                    move |_: tonic::codegen::http::Uri| {
                        let connecting = t.connect(addr.clone());
                        async move { connecting.await.map(hyper_util::rt::TokioIo::new) }
                    },
                ))
            }
        };
        map.insert(addr.to_string(), ch.clone());
        Ok(ch)
    }

    /// A gRPC client for the node-to-node service at `addr`.
    pub fn client(&self, addr: &str) -> Result<RaftClient, tonic::transport::Error> {
        Ok(
            RaftServiceClient::with_interceptor(self.channel(addr)?, self.credential.clone())
                .max_decoding_message_size(MESSAGE_BYTES_MAX)
                .max_encoding_message_size(MESSAGE_BYTES_MAX),
        )
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
            unreachable(target, s)
        }
        // Reported like a peer that is down (logged when it starts, then every 30 s), naming
        // the likely cause.
        tonic::Code::Unauthenticated => unreachable(
            target,
            format!("{s} (it refused this node's credential: is its cluster_secret the same?)"),
        ),
        _ => RPCError::Network(NetworkError::from_string(format!("node {target}: {s}"))),
    }
}

fn unreachable(target: u64, e: impl std::fmt::Display) -> RPCError<TypeConfig> {
    RPCError::Unreachable(Unreachable::from_string(format!("node {target}: {e}")))
}

/// The results of a replication stream, one per request, in order. openraft waits for them
/// without a limit, so a request left unanswered for `timeout` ends the stream as `Unreachable`
/// here, as a unary AppendEntries would have timed out. `sent` counts the requests handed to the
/// transport so far.
fn stream_results<R>(
    target: u64,
    responses: R,
    sent: Arc<AtomicU64>,
    timeout: Duration,
) -> impl futures::Stream<Item = Result<StreamAppendResult<TypeConfig>, RPCError<TypeConfig>>> + Send
where
    R: futures::Stream<Item = Result<pb::Payload, tonic::Status>> + Send + Unpin,
{
    use futures::StreamExt as _;
    futures::stream::unfold(Some((responses, 0u64)), move |state| {
        let sent = sent.clone();
        async move {
            let (mut responses, answered) = state?;
            // Requests sent before this wait began must be answered within `timeout`; those
            // sent during it get a window of their own.
            let mut owed = sent.load(Ordering::Relaxed);
            loop {
                match tokio::time::timeout(timeout, responses.next()).await {
                    Ok(None) => return None,
                    Ok(Some(Err(s))) => return Some((Err(status_to_rpc(target, s)), None)),
                    Ok(Some(Ok(p))) => {
                        let r: Result<StreamAppendResult<TypeConfig>, _> = codec::decode(&p.data)
                            .map_err(|e| {
                                RPCError::Network(NetworkError::from_string(format!(
                                    "node {target}: {e}"
                                )))
                            });
                        let next = r.is_ok().then_some((responses, answered + 1));
                        return Some((r, next));
                    }
                    Err(_) if owed > answered => {
                        let e = format!("an append unanswered for {timeout:?}");
                        return Some((Err(unreachable(target, e)), None));
                    }
                    Err(_) => owed = sent.load(Ordering::Relaxed),
                }
            }
        }
    })
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
        F: FnOnce(RaftClient, tonic::Request<pb::Payload>) -> Fut,
        Fut: Future<Output = Result<tonic::Response<pb::Payload>, tonic::Status>>,
    {
        let client = self
            .peers
            .client(&self.addr)
            .map_err(|e| unreachable(self.target, e))?;
        let mut request = tonic::Request::new(pb::Payload {
            data: codec::encode(req),
        });
        request.set_timeout(timeout);
        let reply = match tokio::time::timeout(timeout, rpc(client, request)).await {
            Err(_) => Err(unreachable(
                self.target,
                format!("no reply within {timeout:?}"),
            )),
            Ok(r) => r.map_err(|s| status_to_rpc(self.target, s)),
        };
        let reply = match reply {
            Ok(r) => {
                self.peers.peer_answered(self.target);
                r
            }
            Err(e) => {
                self.peers.peer_failed(self.target, &e);
                return Err(e);
            }
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

/// How long a replication session that could not start waits before it reports the failure
/// (and openraft starts the next): a peer that is down is tried 20 times a second, and a
/// restarted one is reached well within an election timeout.
const START_FAILURE_PAUSE: Duration = Duration::from_millis(50);

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

    /// Replication on one gRPC stream per session (`AppendStream`), so that openraft can have
    /// several requests on the way to a follower, each a message on the stream rather than a
    /// call of its own. openraft's default sends one request and waits for its answer; it is
    /// used for a peer that answers `AppendStream` with `Unimplemented` (an older node): that
    /// session ends with the error, and openraft's next one goes unary.
    fn stream_append<'s, S>(
        &'s mut self,
        input: S,
        option: RPCOption,
    ) -> BoxFuture<
        's,
        Result<
            BoxStream<'s, Result<StreamAppendResult<TypeConfig>, RPCError<TypeConfig>>>,
            RPCError<TypeConfig>,
        >,
    >
    where
        S: futures::Stream<Item = AppendEntriesRequest<TypeConfig>>
            + OptionalSend
            + Unpin
            + 'static,
    {
        use futures::StreamExt as _;
        if self.peers.is_unary_only(&self.addr) {
            return openraft::network::stream_append_sequential(self, input, option);
        }
        let target = self.target;
        let timeout = option.hard_ttl().max(APPEND_TIMEOUT_MIN);
        let client = self.peers.client(&self.addr);
        let (peers, addr) = (self.peers.clone(), self.addr.clone());
        Box::pin(async move {
            let mut client = client.map_err(|e| unreachable(target, e))?;
            let sent = Arc::new(AtomicU64::new(0));
            let counted = sent.clone();
            let requests = input.map(move |rpc| {
                counted.fetch_add(1, Ordering::Relaxed);
                pb::Payload {
                    data: codec::encode(&rpc),
                }
            });
            let responses =
                match tokio::time::timeout(timeout, client.append_stream(requests)).await {
                    Err(_) => {
                        let e = unreachable(target, format!("no answer within {timeout:?}"));
                        peers.peer_failed(target, &e);
                        return Err(e);
                    }
                    Ok(Err(s)) if s.code() == tonic::Code::Unimplemented => {
                        tracing::warn!(
                            node = target,
                            "no AppendStream (an older node?): replicating to it by unary calls"
                        );
                        peers.set_unary_only(&addr);
                        return Err(status_to_rpc(target, s));
                    }
                    Ok(Err(s)) => {
                        // Connecting to a peer that is down fails at once, before tonic reads any
                        // request, so openraft's backoff (which waits inside the request stream)
                        // never comes into play: without this pause the leader retried such a peer
                        // in a tight loop, a core busy and a warning every 20 µs.
                        tokio::time::sleep(START_FAILURE_PAUSE).await;
                        let e = status_to_rpc(target, s);
                        peers.peer_failed(target, &e);
                        return Err(e);
                    }
                    Ok(Ok(r)) => {
                        peers.peer_answered(target);
                        r.into_inner()
                    }
                };
            let results: BoxStream<'s, _> =
                Box::pin(stream_results(target, responses, sent, timeout));
            Ok(results)
        })
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<VoteResponse<TypeConfig>, RPCError<TypeConfig>> {
        self.peers.vote_requests[1].fetch_add(1, Ordering::Relaxed);
        self.call(&rpc, option.hard_ttl(), |mut c, r| async move {
            c.vote(r).await
        })
        .await
    }

    // A peer that cannot be reached answers with an error, which openraft does not count as a
    // grant: an isolated node never gathers a quorum of pre-votes, so it never raises its term.
    // A peer of an older release, which knows no pre-vote, is counted as granting (as openraft
    // does for a network without pre-votes), so that elections go on during a rolling upgrade.
    async fn pre_vote(
        &mut self,
        rpc: VoteRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<VoteResponse<TypeConfig>, RPCError<TypeConfig>> {
        self.peers.vote_requests[0].fetch_add(1, Ordering::Relaxed);
        let unimplemented = Arc::new(AtomicBool::new(false));
        let seen = unimplemented.clone();
        let result = self
            .call(&rpc, option.hard_ttl(), |mut c, r| async move {
                let reply = c.pre_vote(r).await;
                if matches!(&reply, Err(s) if s.code() == tonic::Code::Unimplemented) {
                    seen.store(true, Ordering::Relaxed);
                }
                reply
            })
            .await;
        if unimplemented.load(Ordering::Relaxed) {
            return Ok(VoteResponse::new(rpc.vote, None, true));
        }
        result
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_that_stays_down_is_reported_going_every_30_s_and_coming_back() {
        let mut r = Reachability::default();
        let t = Instant::now();
        let at = |s: u64| t + Duration::from_secs(s);
        assert_eq!(r.answered(2, at(0)), None, "never down");
        assert_eq!(r.failed(2, at(0)), Some(ReachReport::Lost));
        // Some 40 failures a second are not reported one by one.
        for ms in (25..30_000).step_by(25) {
            assert_eq!(r.failed(2, t + Duration::from_millis(ms)), None);
        }
        assert_eq!(
            r.failed(2, at(30)),
            Some(ReachReport::StillDown(Duration::from_secs(30)))
        );
        assert_eq!(r.failed(2, at(45)), None);
        // Another peer is reported on its own.
        assert_eq!(r.failed(3, at(45)), Some(ReachReport::Lost));
        assert_eq!(
            r.answered(2, at(50)),
            Some(ReachReport::Back(Duration::from_secs(50)))
        );
        assert_eq!(r.answered(2, at(51)), None);
        assert_eq!(r.failed(2, at(52)), Some(ReachReport::Lost), "down again");
    }
    use futures::StreamExt;

    const WAIT: Duration = Duration::from_millis(50);

    fn answer() -> Result<pb::Payload, tonic::Status> {
        let r: StreamAppendResult<TypeConfig> = Ok(None);
        Ok(pb::Payload {
            data: codec::encode(&r),
        })
    }

    type Feed = tokio::sync::mpsc::UnboundedSender<Result<pb::Payload, tonic::Status>>;

    /// A results stream over a channel the test feeds, with `sent` requests counted as sent.
    fn results(
        sent: u64,
    ) -> (
        Feed,
        Arc<AtomicU64>,
        impl futures::Stream<Item = Result<StreamAppendResult<TypeConfig>, RPCError<TypeConfig>>>,
    ) {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let sent = Arc::new(AtomicU64::new(sent));
        let rx = tokio_stream::wrappers::UnboundedReceiverStream::new(rx);
        let s = stream_results(7, rx, sent.clone(), WAIT);
        (tx, sent, s)
    }

    #[tokio::test]
    async fn results_come_in_order_and_end_with_the_stream() {
        let (tx, _sent, s) = results(2);
        let mut s = Box::pin(s);
        tx.send(answer()).unwrap();
        tx.send(answer()).unwrap();
        drop(tx);
        assert!(matches!(s.next().await, Some(Ok(Ok(None)))));
        assert!(matches!(s.next().await, Some(Ok(Ok(None)))));
        assert!(s.next().await.is_none());
    }

    #[tokio::test]
    async fn an_unanswered_request_ends_the_stream_as_unreachable() {
        let (_tx, _sent, s) = results(1);
        let mut s = Box::pin(s);
        let first = tokio::time::timeout(WAIT * 40, s.next())
            .await
            .expect("gives up after its timeout");
        match first {
            Some(Err(RPCError::Unreachable(e))) => assert!(e.to_string().contains("node 7")),
            other => panic!("{other:?}"),
        }
        assert!(s.next().await.is_none(), "nothing after the error");
    }

    #[tokio::test]
    async fn an_idle_stream_waits_for_requests_without_limit() {
        let (tx, sent, s) = results(0);
        let mut s = Box::pin(s);
        // Several timeouts pass with nothing owed: no error.
        assert!(tokio::time::timeout(WAIT * 4, s.next()).await.is_err());
        sent.fetch_add(1, Ordering::Relaxed);
        tx.send(answer()).unwrap();
        assert!(matches!(s.next().await, Some(Ok(Ok(None)))));
    }

    #[tokio::test]
    async fn garbage_and_transport_errors_end_the_stream() {
        let (tx, _sent, s) = results(1);
        let mut s = Box::pin(s);
        tx.send(Ok(pb::Payload {
            data: vec![0xff; 3],
        }))
        .unwrap();
        assert!(matches!(s.next().await, Some(Err(RPCError::Network(_)))));
        assert!(s.next().await.is_none());

        let (tx, _sent, s) = results(1);
        let mut s = Box::pin(s);
        tx.send(Err(tonic::Status::unavailable("gone"))).unwrap();
        assert!(matches!(
            s.next().await,
            Some(Err(RPCError::Unreachable(_)))
        ));
        assert!(s.next().await.is_none());
    }

    /// A node of an older version: unary AppendEntries only, and nothing else used here.
    struct UnaryOnly {
        appends: Arc<AtomicU64>,
    }

    type NoStream =
        std::pin::Pin<Box<dyn futures::Stream<Item = Result<pb::Payload, tonic::Status>> + Send>>;

    #[tonic::async_trait]
    impl pb::raft_service_server::RaftService for UnaryOnly {
        async fn append_entries(
            &self,
            _: tonic::Request<pb::Payload>,
        ) -> Result<tonic::Response<pb::Payload>, tonic::Status> {
            self.appends.fetch_add(1, Ordering::Relaxed);
            let r: Result<AppendEntriesResponse<TypeConfig>, RaftError<TypeConfig>> =
                Ok(AppendEntriesResponse::Success);
            Ok(tonic::Response::new(pb::Payload {
                data: codec::encode(&r),
            }))
        }
        async fn vote(
            &self,
            _: tonic::Request<pb::Payload>,
        ) -> Result<tonic::Response<pb::Payload>, tonic::Status> {
            Err(tonic::Status::unimplemented("vote"))
        }
        async fn pre_vote(
            &self,
            _: tonic::Request<pb::Payload>,
        ) -> Result<tonic::Response<pb::Payload>, tonic::Status> {
            Err(tonic::Status::unimplemented("pre_vote"))
        }
        type AppendStreamStream = NoStream;
        async fn append_stream(
            &self,
            _: tonic::Request<tonic::Streaming<pb::Payload>>,
        ) -> Result<tonic::Response<NoStream>, tonic::Status> {
            Err(tonic::Status::unimplemented("AppendStream"))
        }
        async fn install_snapshot(
            &self,
            _: tonic::Request<tonic::Streaming<pb::SnapshotChunk>>,
        ) -> Result<tonic::Response<pb::Payload>, tonic::Status> {
            Err(tonic::Status::unimplemented("install_snapshot"))
        }
        async fn read_index(
            &self,
            _: tonic::Request<pb::Empty>,
        ) -> Result<tonic::Response<pb::Payload>, tonic::Status> {
            Err(tonic::Status::unimplemented("read_index"))
        }
        async fn forward(
            &self,
            _: tonic::Request<pb::Payload>,
        ) -> Result<tonic::Response<pb::Payload>, tonic::Status> {
            Err(tonic::Status::unimplemented("forward"))
        }
        type ForwardStreamStream = NoStream;
        async fn forward_stream(
            &self,
            _: tonic::Request<tonic::Streaming<pb::Payload>>,
        ) -> Result<tonic::Response<NoStream>, tonic::Status> {
            Err(tonic::Status::unimplemented("forward_stream"))
        }
        async fn membership(
            &self,
            _: tonic::Request<pb::Payload>,
        ) -> Result<tonic::Response<pb::Payload>, tonic::Status> {
            Err(tonic::Status::unimplemented("membership"))
        }
        async fn status(
            &self,
            _: tonic::Request<pb::Empty>,
        ) -> Result<tonic::Response<pb::Payload>, tonic::Status> {
            Err(tonic::Status::unimplemented("status"))
        }
        async fn wall_clock(
            &self,
            _: tonic::Request<pb::Empty>,
        ) -> Result<tonic::Response<pb::WallTime>, tonic::Status> {
            Err(tonic::Status::unimplemented("wall_clock"))
        }
    }

    #[tokio::test]
    async fn a_peer_without_append_stream_is_replicated_to_by_unary_calls() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let appends = Arc::new(AtomicU64::new(0));
        let svc = pb::raft_service_server::RaftServiceServer::new(UnaryOnly {
            appends: appends.clone(),
        });
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(svc)
                .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
        );
        let mut conn = PeerConn {
            target: 7,
            addr: addr.to_string(),
            peers: Peers::new(None, None),
        };
        let heartbeat = || AppendEntriesRequest::<TypeConfig> {
            vote: Vote::new(1, 1),
            prev_log_id: None,
            entries: Vec::new(),
            leader_commit: None,
        };
        let option = || RPCOption::new(Duration::from_secs(2));
        // The first session finds no AppendStream and ends with the error.
        let first = conn
            .stream_append(tokio_stream::iter(vec![heartbeat()]), option())
            .await
            .err();
        assert!(matches!(first, Some(RPCError::Network(_))), "{first:?}");
        assert_eq!(appends.load(Ordering::Relaxed), 0);
        // The next goes unary: one call per request, answered in order.
        let results: Vec<_> = conn
            .stream_append(tokio_stream::iter(vec![heartbeat(), heartbeat()]), option())
            .await
            .expect("a unary session")
            .collect()
            .await;
        assert_eq!(results.len(), 2, "{results:?}");
        assert!(
            results.iter().all(|r| matches!(r, Ok(Ok(None)))),
            "{results:?}"
        );
        assert_eq!(appends.load(Ordering::Relaxed), 2);
    }

    #[tokio::test]
    async fn a_session_to_a_peer_that_is_down_fails_after_a_pause() {
        // A port nothing listens on.
        let addr = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let mut conn = PeerConn {
            target: 7,
            addr: addr.to_string(),
            peers: Peers::new(None, None),
        };
        let heartbeat = AppendEntriesRequest::<TypeConfig> {
            vote: Vote::new(1, 1),
            prev_log_id: None,
            entries: Vec::new(),
            leader_commit: None,
        };
        // Connecting fails at once; the session reports it only after the pause, so that the
        // next one does not follow straight away.
        let started = Instant::now();
        let ended = conn
            .stream_append(
                tokio_stream::iter(vec![heartbeat]),
                RPCOption::new(Duration::from_secs(2)),
            )
            .await;
        assert!(started.elapsed() >= START_FAILURE_PAUSE);
        assert!(
            matches!(ended, Err(RPCError::Unreachable(_))),
            "{:?}",
            ended.err()
        );
    }
}
