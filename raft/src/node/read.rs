//! Reads: of applied state on this node, linearizable ones through the leader's read index,
//! and this node's view of the cluster.

use super::contact::becomes_true;
use super::NodeInner;
use crate::error::ClusterError;
use crate::sm_store::SmState;
use crate::types::NodeAddr;
use crate::{codec, pb};
use openraft::async_runtime::WatchReceiver;
use openraft::errors::RaftError;
use openraft::{ReadPolicy, ServerState};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

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

impl NodeInner {
    pub(super) fn local_read<T>(
        &self,
        f: impl FnOnce(&SmState) -> T,
    ) -> Result<(T, u64), ClusterError> {
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

    pub(super) async fn read_index(&self) -> Result<u64, ClusterError> {
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
