//! What the edges may know of the Raft node: the value types of its status and counters, and
//! the bounds of its pages. Re-exported here so that no crate above the operations names the
//! Raft crate; the node itself stays inside [`crate::core::Sluice`].

pub use sluice_raft::ledger_store::LEDGER_PAGE_MAX;
pub use sluice_raft::metrics::{HistogramSnapshot, LatencyHistogram};
pub use sluice_raft::{ClusterStatus, NodeMetrics, LOG_PAGE_MAX};

use crate::core::Sluice;
use crate::error::ApiError;
use std::collections::BTreeMap;
use std::time::Duration;

pub use sluice_raft::LogRecord;

/// Least time between two computations of the state digest on one node.
pub const DIGEST_GAP: Duration = Duration::from_secs(1);

/// This node's state digests and the index they were computed at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Digest {
    /// The last applied index the digests are of.
    pub applied_index: u64,
    /// BLAKE3 of the canonical state (hex).
    pub digest: String,
    /// BLAKE3 of the state without the log position (hex): equal on replicas that hold the
    /// same rooms whatever entries they applied.
    pub content: String,
}

/// The last digest computed on this node, and when: callers within [`DIGEST_GAP`] of it share
/// the next one.
#[derive(Debug, Default)]
pub(crate) struct DigestPacing(tokio::sync::Mutex<Option<(tokio::time::Instant, Digest)>>);

impl Sluice {
    /// The cluster's time now (ms since the epoch), by which tokens and sessions are judged.
    pub fn now_ms(&self) -> u64 {
        self.node.now_ms()
    }

    /// This node's counters.
    pub fn node_metrics(&self) -> NodeMetrics {
        self.node.metrics()
    }

    /// How far this node's clock is from the cluster's (ms), how many peers' clocks it knows,
    /// and whether a majority's clocks agree on the cluster's time.
    pub fn clock(&self) -> (i64, usize, bool) {
        (
            self.node.clock_offset_ms(),
            self.node.clock_peers_known(),
            self.node.clock_agreed(),
        )
    }

    /// On the leader: how long since each follower acknowledged an append (none yet: `None`).
    pub fn follower_ack_ages(&self) -> BTreeMap<u64, Option<Duration>> {
        self.node.follower_ack_ages()
    }

    /// On the leader: how long since a quorum acknowledged an append.
    pub fn quorum_ack_age(&self) -> Option<Duration> {
        self.node.quorum_ack_age()
    }

    /// Pre-vote and vote requests this node has sent.
    pub fn vote_requests_sent(&self) -> (u64, u64) {
        self.node.vote_requests_sent()
    }

    /// Log entries this node holds from `from`, at most `limit` (at most [`LOG_PAGE_MAX`]).
    pub async fn log_entries(&self, from: u64, limit: u64) -> Result<Vec<LogRecord>, ApiError> {
        if limit > LOG_PAGE_MAX {
            return Err(ApiError::invalid(
                "limit",
                format!("must be at most {LOG_PAGE_MAX}"),
            ));
        }
        Ok(self.node.log_entries(from, limit).await?)
    }

    /// The whole applied state as a backup file, and the index it is at.
    pub fn backup(&self) -> Result<(Vec<u8>, u64), ApiError> {
        Ok(self.node.backup()?)
    }

    /// The state's digests, computed after `asked` (never a stale answer), one computation at
    /// a time and at most one each [`DIGEST_GAP`]: each encodes the whole state twice while
    /// applies wait, so callers in between share the next one.
    pub async fn digest(&self, asked: tokio::time::Instant) -> Result<Digest, ApiError> {
        let mut last = self.digests.0.lock().await;
        if let Some((at, d)) = last.as_ref() {
            if *at >= asked {
                return Ok(d.clone());
            }
            tokio::time::sleep_until(*at + DIGEST_GAP).await;
        }
        let at = tokio::time::Instant::now();
        let ((digest, content), applied_index) = self.node.read(|st| {
            (
                sluice_statemachine::digest_hex(&st.sm.digest()),
                sluice_statemachine::digest_hex(&st.sm.content_digest()),
            )
        })?;
        let d = Digest {
            applied_index,
            digest,
            content,
        };
        *last = Some((at, d.clone()));
        Ok(d)
    }
}
