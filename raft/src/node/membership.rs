//! Membership changes: add a learner, promote it, remove a node; ids are never reused.

use super::{raft_err, ClusterStatus, NodeInner, RaftNode};
use crate::error::ClusterError;
use crate::types::NodeAddr;
use crate::{codec, pb};
use openraft::ChangeMembers;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::time::Duration;

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

impl RaftNode {
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
}

impl NodeInner {
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
}
