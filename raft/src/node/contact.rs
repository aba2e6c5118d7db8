//! Whether this node is in touch with its leader (or, as leader, with its quorum), and what it
//! does when it is not.

use super::NodeInner;
use crate::error::ClusterError;
use crate::types::Vote;
use openraft::async_runtime::WatchReceiver;
use std::sync::Arc;
use std::time::Duration;

/// Notices, within a heartbeat, when this node is cut off from leadership (its leader silent,
/// or, as leader, its quorum, for longer than an election timeout): what it had forwarded and
/// not yet seen answered is answered as indeterminate, and read-index requests waiting on the
/// leader or the quorum are refused, so that no client waits out its own timeout for them.
pub(super) async fn watch_leader_contact(inner: Arc<NodeInner>) {
    let every = Duration::from_millis(inner.cfg.heartbeat_ms.max(10));
    loop {
        tokio::select! {
            _ = inner.cancel.cancelled() => break,
            _ = tokio::time::sleep(every) => {}
        }
        let cut_off = inner.cut_off_from_leader();
        let changed = inner
            .cut_off
            .send_if_modified(|c| std::mem::replace(c, cut_off) != cut_off);
        if changed && cut_off {
            tracing::warn!(
                id = inner.id,
                "the leader has been silent for longer than an election timeout; refusing writes and linearizable reads"
            );
            inner
                .forwarder
                .abandon("went silent for longer than an election timeout")
                .await;
        }
    }
}

/// Resolves when `rx` turns true after it was subscribed (a value already true, set by a
/// check that may be out of date by now, does not count).
pub(super) async fn becomes_true(rx: &mut tokio::sync::watch::Receiver<bool>) {
    while rx.changed().await.is_ok() {
        if *rx.borrow_and_update() {
            return;
        }
    }
    std::future::pending::<()>().await;
}

impl NodeInner {
    /// A message came from an elected leader holding `vote`: if it is not behind this node's
    /// vote, that leader is live as far as this node can tell.
    pub(crate) fn heard_from_leader(&self, vote: &Vote) {
        if !vote.is_committed() {
            return;
        }
        let current = self.raft.metrics().borrow_watched().vote;
        if *vote >= current {
            self.leader_contact.heard(vote.leader_id().node_id);
        }
    }

    /// Is this a follower whose leader has been silent for longer than an election timeout
    /// (cut off from it by a partition the rest of the cluster does not share, typically:
    /// Pre-Vote and the others' leader lease keep it from electing anyone else), or a leader
    /// that no quorum has acknowledged for as long (the others have likely elected another)?
    pub(super) fn cut_off_from_leader(&self) -> bool {
        let m = self.raft.metrics();
        let m = m.borrow_watched();
        match m.current_leader {
            Some(l) if l == self.id => {
                m.membership_config.membership().voter_ids().count() > 1
                    && m.last_quorum_acked
                        .as_ref()
                        .is_some_and(|t| openraft::Instant::elapsed(&**t) > self.silence_limit())
            }
            Some(l) => self.gone_silent(l),
            None => false,
        }
    }

    /// How long a leader may go unheard (or a leader's quorum unanswering) before this node
    /// takes it as cut off: the longest election timeout, after which the others would elect.
    pub(super) fn silence_limit(&self) -> Duration {
        Duration::from_millis(self.cfg.election_timeout_ms.1)
    }

    /// Has `leader`, another node, been silent for longer than [`Self::silence_limit`]?
    fn gone_silent(&self, leader: u64) -> bool {
        leader != self.id && self.leader_contact.silence(leader) > self.silence_limit()
    }

    /// The leader to send writes and read-index requests to: `NoLeader` if none is known, or if
    /// it has been silent for longer than an election timeout (a request would wait for a
    /// connection that does not come).
    pub(super) fn leader_addr(&self) -> Result<(u64, String), ClusterError> {
        let m = self.raft.metrics().borrow_watched().clone();
        let leader = m.current_leader.ok_or(ClusterError::NoLeader)?;
        if self.gone_silent(leader) {
            return Err(ClusterError::NoLeader);
        }
        let addr = m
            .membership_config
            .membership()
            .get_node(&leader)
            .map(|n| n.raft.clone())
            .ok_or(ClusterError::NoLeader)?;
        Ok((leader, addr))
    }
}
