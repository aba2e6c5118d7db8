//! The server side of the node-to-node transport. Every payload is decoded with bounds; garbage
//! is answered with `InvalidArgument`, never a panic, and never reaches Raft or the state machine.

use crate::codec;
use crate::error::ClusterError;
use crate::node::{MembershipOp, NodeInner};
use crate::pb;
use crate::pb::raft_service_server::RaftService;
use crate::types::{SnapshotMeta, TypeConfig, Vote};
use openraft::async_runtime::WatchReceiver;
use openraft::errors::RaftError;
use openraft::raft::{AppendEntriesRequest, SnapshotResponse, VoteRequest};
use openraft::storage::Snapshot;
use sluice_statemachine::limits::COMMANDS_PER_PROPOSAL_MAX;
use sluice_statemachine::Command;
use std::io::Cursor;
use std::sync::Arc;
use tokio::sync::Semaphore;
use tokio_stream::StreamExt;
use tonic::{Request, Response, Status, Streaming};

pub use crate::network::MESSAGE_BYTES_MAX;
/// Batches a forwarding stream may have waiting for outcomes at once; more wait to be read.
pub const FORWARD_STREAM_BATCHES_MAX: usize = 1_024;
pub use crate::snapshot_file::SNAPSHOT_BYTES_MAX;
/// Longest wait for the next chunk of a snapshot being received.
pub const SNAPSHOT_CHUNK_WAIT_MAX: std::time::Duration = std::time::Duration::from_secs(30);

/// Where a snapshot being received is written, in the data directory, until it is whole.
pub const SNAPSHOT_RECEIVING_FILE: &str = "snapshot-receiving.part";

/// Writes a snapshot's chunks, `first` and then the rest of `stream`, to the file at `path` as
/// they come (not to memory: at most [`SNAPSHOT_BYTES_MAX`], each chunk within
/// [`SNAPSHOT_CHUNK_WAIT_MAX`]), and reads the whole back once the stream has ended well. The
/// file is removed either way.
async fn receive_to_file(
    path: &std::path::Path,
    first: Vec<u8>,
    stream: &mut Streaming<pb::SnapshotChunk>,
) -> Result<Vec<u8>, Status> {
    use std::io::Write;
    /// Removes the file when the receipt ends, however it ends (its call may be dropped
    /// midway, when the sender goes away).
    struct Removed<'a>(&'a std::path::Path);
    impl Drop for Removed<'_> {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(self.0);
        }
    }
    let io = |e: std::io::Error| Status::internal(format!("{}: {e}", path.display()));
    let _removed = Removed(path);
    // The file's work runs where `runtime::blocking` puts it: a simulated node's stays on its
    // own thread, so that when a snapshot arrives does not depend on a thread pool's timing.
    let append = |mut file: std::fs::File, data: Vec<u8>| {
        crate::runtime::blocking(move || file.write_all(&data).map(|()| file))
    };
    async {
        let owned = path.to_owned();
        let mut file = crate::runtime::blocking(move || std::fs::File::create(owned))
            .await
            .and_then(|r| r)
            .map_err(io)?;
        let mut len = first.len();
        file = append(file, first).await.and_then(|r| r).map_err(io)?;
        loop {
            let next = tokio::time::timeout(SNAPSHOT_CHUNK_WAIT_MAX, stream.next())
                .await
                .map_err(|_| Status::deadline_exceeded("the snapshot's next chunk is late"))?;
            let Some(chunk) = next else { break };
            let chunk = chunk?;
            len += chunk.data.len();
            if len > SNAPSHOT_BYTES_MAX {
                return Err(Status::resource_exhausted("snapshot too large"));
            }
            file = append(file, chunk.data).await.and_then(|r| r).map_err(io)?;
        }
        drop(file);
        let owned = path.to_owned();
        crate::runtime::blocking(move || std::fs::read(owned))
            .await
            .and_then(|r| r)
            .map_err(io)
    }
    .await
}

/// The answers of a streaming call: payloads, or the status that ends the stream.
type PayloadStream =
    std::pin::Pin<Box<dyn tokio_stream::Stream<Item = Result<pb::Payload, Status>> + Send>>;

/// The node-to-node gRPC service.
#[derive(Clone, Debug)]
pub struct RaftRpc {
    /// Held weakly: a peer's open connection must not keep a stopped node (its database, its
    /// directory's lock) alive.
    node: std::sync::Weak<NodeInner>,
    /// One snapshot is received at a time: each is buffered whole before it is installed.
    pub(crate) snapshot_receive: Arc<tokio::sync::Semaphore>,
}

impl RaftRpc {
    /// The service of `node`.
    pub(crate) fn new(node: &Arc<NodeInner>) -> Self {
        Self {
            node: Arc::downgrade(node),
            snapshot_receive: Arc::new(tokio::sync::Semaphore::new(1)),
        }
    }
}

impl RaftRpc {
    fn node(&self) -> Result<Arc<NodeInner>, Status> {
        self.node
            .upgrade()
            .ok_or_else(|| Status::unavailable("the node is stopping"))
    }
}

fn decode<T: serde::de::DeserializeOwned>(p: &pb::Payload) -> Result<T, Status> {
    codec::decode(&p.data).map_err(|e| Status::invalid_argument(e.to_string()))
}

fn reply<T: serde::Serialize>(v: &T) -> Result<Response<pb::Payload>, Status> {
    Ok(Response::new(pb::Payload {
        data: codec::encode(v),
    }))
}

#[tonic::async_trait]
impl RaftService for RaftRpc {
    async fn append_entries(
        &self,
        req: Request<pb::Payload>,
    ) -> Result<Response<pb::Payload>, Status> {
        let rpc: AppendEntriesRequest<TypeConfig> = decode(req.get_ref())?;
        let node = self.node()?;
        node.heard_from_leader(&rpc.vote);
        reply(&node.raft.append_entries(rpc).await)
    }

    type AppendStreamStream = PayloadStream;

    async fn append_stream(
        &self,
        req: Request<Streaming<pb::Payload>>,
    ) -> Result<Response<Self::AppendStreamStream>, Status> {
        // A request that fails to arrive or to decode ends the input; openraft then answers what
        // came before it and ends the output, which the leader sees end short of its requests.
        let node = self.node()?;
        let weak = self.node.clone();
        let input = futures::StreamExt::scan(req.into_inner(), (), move |_, m| {
            let rpc = match m {
                Ok(p) => match decode::<AppendEntriesRequest<TypeConfig>>(&p) {
                    Ok(rpc) => match weak.upgrade() {
                        Some(node) => {
                            node.heard_from_leader(&rpc.vote);
                            Some(rpc)
                        }
                        None => None,
                    },
                    Err(e) => {
                        tracing::warn!(error = %e, "undecodable append request; ending the stream");
                        None
                    }
                },
                Err(_) => None,
            };
            futures::future::ready(rpc)
        });
        let output = StreamExt::map(node.raft.stream_append(input), |r| match r {
            Ok(result) => Ok(pb::Payload {
                data: codec::encode(&result),
            }),
            Err(fatal) => Err(Status::unavailable(fatal.to_string())),
        });
        // Ends with the node, so that a graceful shutdown is not held open by the stream.
        let output = futures::StreamExt::take_until(output, node.cancel.clone().cancelled_owned());
        Ok(Response::new(Box::pin(output)))
    }

    async fn vote(&self, req: Request<pb::Payload>) -> Result<Response<pb::Payload>, Status> {
        let rpc: VoteRequest<TypeConfig> = decode(req.get_ref())?;
        reply(&self.node()?.raft.vote(rpc).await)
    }

    async fn pre_vote(&self, req: Request<pb::Payload>) -> Result<Response<pb::Payload>, Status> {
        let rpc: VoteRequest<TypeConfig> = decode(req.get_ref())?;
        reply(&self.node()?.raft.pre_vote(rpc).await)
    }

    async fn install_snapshot(
        &self,
        req: Request<Streaming<pb::SnapshotChunk>>,
    ) -> Result<Response<pb::Payload>, Status> {
        let node = self.node()?;
        let mut stream = req.into_inner();
        let first = stream
            .next()
            .await
            .ok_or_else(|| Status::invalid_argument("empty snapshot stream"))??;
        let (vote, meta): (Vote, SnapshotMeta) =
            codec::decode(&first.header).map_err(|e| Status::invalid_argument(e.to_string()))?;
        // Only an elected leader sends snapshots, and one whose vote is behind this node's is
        // answered at once, as openraft would answer it, without a byte of its data read.
        if !vote.is_committed() {
            return Err(Status::invalid_argument(
                "a snapshot comes from an elected leader (a committed vote)",
            ));
        }
        let current = node.raft.metrics().borrow_watched().vote;
        if vote < current {
            let stale: Result<SnapshotResponse<TypeConfig>, RaftError<TypeConfig>> =
                Ok(SnapshotResponse::new(current));
            return reply(&stale);
        }
        // Another one under way (from a leader since replaced, say): this leader retries later.
        let _receiving = self
            .snapshot_receive
            .clone()
            .try_acquire_owned()
            .map_err(|_| Status::unavailable("another snapshot is being received"))?;
        let data = receive_to_file(
            &node.cfg.data_dir.join(SNAPSHOT_RECEIVING_FILE),
            first.data,
            &mut stream,
        )
        .await?;
        let snapshot = Snapshot {
            meta,
            snapshot: Cursor::new(data),
        };
        let result = node
            .raft
            .install_full_snapshot(vote, snapshot)
            .await
            .map_err(RaftError::<TypeConfig>::Fatal);
        reply(&result)
    }

    async fn read_index(&self, _req: Request<pb::Empty>) -> Result<Response<pb::Payload>, Status> {
        reply(&self.node()?.read_index_local().await)
    }

    async fn forward(&self, req: Request<pb::Payload>) -> Result<Response<pb::Payload>, Status> {
        let cmds: Vec<Command> = decode(req.get_ref())?;
        if cmds.len() > COMMANDS_PER_PROPOSAL_MAX {
            return Err(Status::invalid_argument("too many commands"));
        }
        let results: Vec<Result<(sluice_statemachine::Outcome, u64), ClusterError>> =
            self.node()?.submit_as_leader(cmds).await;
        reply(&results)
    }

    type ForwardStreamStream = PayloadStream;

    async fn forward_stream(
        &self,
        req: Request<Streaming<pb::Payload>>,
    ) -> Result<Response<Self::ForwardStreamStream>, Status> {
        let node = self.node()?;
        let mut inbound = req.into_inner();
        let (tx, rx) = tokio::sync::mpsc::channel(FORWARD_STREAM_BATCHES_MAX);
        tokio::spawn(async move {
            let in_flight = Arc::new(Semaphore::new(FORWARD_STREAM_BATCHES_MAX));
            // Ends with the node, so that the server's graceful shutdown is not held open by a
            // follower's stream; the follower treats what it had sent as indeterminate.
            loop {
                let msg = tokio::select! {
                    _ = node.cancel.cancelled() => break,
                    m = inbound.next() => match m {
                        Some(Ok(m)) => m,
                        _ => break,
                    },
                };
                let (id, cmds): (u64, Vec<Command>) = match codec::decode(&msg.data) {
                    Ok(v) => v,
                    Err(e) => {
                        let _ = tx.send(Err(Status::invalid_argument(e.to_string()))).await;
                        break;
                    }
                };
                if cmds.len() > COMMANDS_PER_PROPOSAL_MAX {
                    let _ = tx
                        .send(Err(Status::invalid_argument("too many commands")))
                        .await;
                    break;
                }
                let Ok(permit) = in_flight.clone().acquire_owned().await else {
                    break;
                };
                let (node, tx) = (node.clone(), tx.clone());
                tokio::spawn(async move {
                    let results = node.submit_as_leader(cmds).await;
                    let data = codec::encode(&(id, results));
                    let _ = tx.send(Ok(pb::Payload { data })).await;
                    drop(permit);
                });
            }
        });
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }

    async fn membership(&self, req: Request<pb::Payload>) -> Result<Response<pb::Payload>, Status> {
        let op: MembershipOp = decode(req.get_ref())?;
        reply(&self.node()?.membership_local(op).await)
    }

    async fn status(&self, _req: Request<pb::Empty>) -> Result<Response<pb::Payload>, Status> {
        reply(&self.node()?.status())
    }

    async fn wall_clock(&self, _req: Request<pb::Empty>) -> Result<Response<pb::WallTime>, Status> {
        Ok(Response::new(pb::WallTime {
            unix_ms: self.node()?.clock.own().now_ms(),
        }))
    }
}
