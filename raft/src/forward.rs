//! A follower's writes on their way to the leader. Each follower keeps one long-lived
//! `ForwardStream` to the current leader: a batch goes out as one message tagged with an id, and
//! its outcomes come back as one message with that id, in whatever order batches complete. A
//! stream costs one HTTP/2 stream for its whole life, where a request per batch cost a stream, a
//! header block and a trip through the server's service stack each.
//!
//! What a waiter is told when things go wrong follows what could have happened to its command:
//! a stream that could not be opened, or a batch that never left this node, was never delivered
//! (`NoLeader`, safe to retry); a batch that was sent and whose stream then ended may or may not
//! have been applied (`Indeterminate`).

use crate::codec;
use crate::error::ClusterError;
use crate::metrics::LatencyHistogram;
use crate::network::Peers;
use crate::pb;
use crate::reply::{deliver, fail_all, Reply, Waiter};
use sluice_statemachine::limits::PROPOSAL_BYTES_MAX;
use sluice_statemachine::Command;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, OwnedSemaphorePermit};
use tokio::time::Instant;
use tonic::Streaming;

/// Messages buffered for sending on one stream.
const SEND_BUFFER: usize = 256;

/// A batch sent and not yet answered.
struct Sent {
    at: Instant,
    waiters: Vec<Waiter>,
    /// The follower's forwarding slot, given back when the batch is answered.
    _slot: OwnedSemaphorePermit,
}

/// What the stream's reader shares with its senders.
#[derive(Default)]
struct Replies {
    /// Batches sent and not yet answered, by id; `None` once the stream has ended.
    pending: Mutex<Option<BTreeMap<u64, Sent>>>,
    next_id: AtomicU64,
}

impl Replies {
    fn take(&self, id: u64) -> Option<Sent> {
        self.pending
            .lock()
            .expect("pending lock")
            .as_mut()
            .and_then(|m| m.remove(&id))
    }

    fn is_open(&self) -> bool {
        self.pending.lock().expect("pending lock").is_some()
    }
}

/// What a batch's frame adds to its commands' own encoded sizes: the batch id and the count.
const FRAME_SLACK: usize = 32;

/// One open stream to one leader. Dropping the last handle ends the request side; the reader
/// finishes once the leader has answered what it was sent.
struct Stream {
    leader: u64,
    tx: mpsc::Sender<pb::Payload>,
    replies: Arc<Replies>,
}

/// The follower's current stream, opened on first use and again whenever the leader changes or
/// the stream ends.
#[derive(Default)]
pub(crate) struct Forwarder {
    current: tokio::sync::Mutex<Option<Arc<Stream>>>,
}

impl Forwarder {
    /// Sends `cmds` to `leader` at `addr`. Every waiter gets its own command's outcome, or an
    /// error; `slot` is held until then.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn send(
        &self,
        peers: &Peers,
        (leader, addr): (u64, &str),
        open_timeout: Duration,
        latency: &Arc<LatencyHistogram>,
        cmds: Vec<Command>,
        waiters: Vec<Waiter>,
        slot: OwnedSemaphorePermit,
    ) {
        let stream = match self
            .stream(peers, leader, addr, open_timeout, latency)
            .await
        {
            Ok(s) => s,
            Err(e) => return fail_all(waiters, e),
        };
        let id = stream.replies.next_id.fetch_add(1, Ordering::Relaxed);
        let sent = Sent {
            at: Instant::now(),
            waiters,
            _slot: slot,
        };
        {
            let mut pending = stream.replies.pending.lock().expect("pending lock");
            match pending.as_mut() {
                Some(m) => {
                    m.insert(id, sent);
                }
                // Ended before this batch was sent.
                None => return fail_all(sent.waiters, ClusterError::NoLeader),
            }
        }
        let data = codec::encode(&(id, &cmds));
        // A forwarded batch is cut as the leader's own proposals are, at the bytes of one
        // proposal (a lone command larger than that is refused before it is queued): within
        // what the leader accepts of one forwarded batch.
        assert!(
            cmds.len() == 1 || data.len() <= PROPOSAL_BYTES_MAX + FRAME_SLACK,
            "a forwarded batch of {} commands in {} bytes",
            cmds.len(),
            data.len()
        );
        if stream.tx.send(pb::Payload { data }).await.is_err() {
            // The request side is gone: this batch never left.
            if let Some(sent) = stream.replies.take(id) {
                fail_all(sent.waiters, ClusterError::NoLeader);
            }
        }
    }

    /// Drops the current stream; batches already sent are still answered.
    pub(crate) async fn close(&self) {
        *self.current.lock().await = None;
    }

    /// Drops the current stream and answers every batch sent on it and still unanswered now,
    /// as indeterminate (each may have been applied): the leader has gone silent, and the
    /// answers may never come.
    pub(crate) async fn abandon(&self, why: &str) {
        let Some(stream) = self.current.lock().await.take() else {
            return;
        };
        fail_unanswered(&stream.replies, stream.leader, why);
    }

    async fn stream(
        &self,
        peers: &Peers,
        leader: u64,
        addr: &str,
        open_timeout: Duration,
        latency: &Arc<LatencyHistogram>,
    ) -> Result<Arc<Stream>, ClusterError> {
        let mut current = self.current.lock().await;
        if let Some(s) = current
            .as_ref()
            .filter(|s| s.leader == leader && s.replies.is_open())
        {
            return Ok(s.clone());
        }
        *current = None;
        // Nothing is sent before the stream is open, so failing to open it is always retryable.
        let mut client = peers.client(addr).map_err(|_| ClusterError::NoLeader)?;
        let (tx, rx) = mpsc::channel(SEND_BUFFER);
        let opened = tokio::time::timeout(
            open_timeout,
            client.forward_stream(tokio_stream::wrappers::ReceiverStream::new(rx)),
        )
        .await;
        let inbound = match opened {
            Ok(Ok(r)) => r.into_inner(),
            Ok(Err(_)) | Err(_) => return Err(ClusterError::NoLeader),
        };
        let replies = Arc::new(Replies {
            pending: Mutex::new(Some(BTreeMap::new())),
            next_id: AtomicU64::new(0),
        });
        tokio::spawn(read_replies(
            leader,
            inbound,
            replies.clone(),
            latency.clone(),
        ));
        let s = Arc::new(Stream {
            leader,
            tx,
            replies,
        });
        *current = Some(s.clone());
        Ok(s)
    }
}

/// Hands each reply to its batch's waiters; when the stream ends, whatever was sent and not
/// answered is indeterminate.
async fn read_replies(
    leader: u64,
    mut inbound: Streaming<pb::Payload>,
    replies: Arc<Replies>,
    latency: Arc<LatencyHistogram>,
) {
    while let Ok(Some(msg)) = inbound.message().await {
        let Ok((id, results)) = codec::decode::<(u64, Vec<Reply>)>(&msg.data) else {
            break;
        };
        let Some(sent) = replies.take(id) else {
            continue;
        };
        latency.observe(sent.at.elapsed());
        if results.len() == sent.waiters.len() {
            deliver(sent.waiters, results);
        } else {
            fail_all(
                sent.waiters,
                ClusterError::Indeterminate(format!("bad reply from node {leader}")),
            );
        }
    }
    fail_unanswered(&replies, leader, "ended");
}

/// Ends `replies`: what was sent to `leader` and not answered is indeterminate.
fn fail_unanswered(replies: &Replies, leader: u64, why: &str) {
    let unanswered = replies
        .pending
        .lock()
        .expect("pending lock")
        .take()
        .unwrap_or_default();
    for (_, sent) in unanswered {
        fail_all(
            sent.waiters,
            ClusterError::Indeterminate(format!("the forwarding stream to node {leader} {why}")),
        );
    }
}
