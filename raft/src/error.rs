//! Errors of the Raft layer. Expected outcomes of commands (rejections) are not errors: they
//! are `Outcome::Rejected` values. These are the ways a request can fail to reach an outcome.

use serde::{Deserialize, Serialize};

/// Why a write, read or membership change did not complete.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum ClusterError {
    /// No leader is known (election in progress or no quorum). Retry later.
    #[error("no leader is available")]
    NoLeader,
    /// This node has not finished recovering its state after a restart.
    #[error("the node is still recovering")]
    NotReady,
    /// Too many requests are queued on this node.
    #[error("the node is overloaded")]
    Busy,
    /// The request did not complete in time; a write may or may not have happened.
    #[error("timed out")]
    Timeout,
    /// The write reached the log but leadership changed before it was known to commit, or the
    /// connection to the leader broke mid-request: it may or may not have happened.
    #[error("the write's outcome is unknown: {0}")]
    Indeterminate(String),
    /// The node is shutting down.
    #[error("the node is shutting down")]
    ShuttingDown,
    /// A membership or cluster request that cannot be done as asked.
    #[error("invalid request: {0}")]
    Invalid(String),
    /// Storage failed; the node stops.
    #[error("fatal: {0}")]
    Fatal(String),
}

impl ClusterError {
    /// Could retrying the same request (idempotently) succeed?
    pub fn is_retriable(&self) -> bool {
        matches!(
            self,
            ClusterError::NoLeader
                | ClusterError::NotReady
                | ClusterError::Busy
                | ClusterError::Timeout
                | ClusterError::Indeterminate(_)
        )
    }

    /// Stable machine-readable code.
    pub fn code(&self) -> &'static str {
        match self {
            ClusterError::NoLeader => "no_leader",
            ClusterError::NotReady => "not_ready",
            ClusterError::Busy => "overloaded",
            ClusterError::Timeout => "timeout",
            ClusterError::Indeterminate(_) => "indeterminate",
            ClusterError::ShuttingDown => "shutting_down",
            ClusterError::Invalid(_) => "invalid_request",
            ClusterError::Fatal(_) => "internal",
        }
    }
}
