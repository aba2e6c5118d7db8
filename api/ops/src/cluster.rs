//! What the edges may know of the Raft node: the value types of its status and counters, and
//! the bounds of its pages. Re-exported here so that no crate above the operations names the
//! Raft crate; the node itself stays inside [`crate::core::Sluice`].

pub use sluice_raft::LEDGER_PAGE_MAX;
pub use sluice_raft::{ClusterStatus, NodeMetrics, LOG_PAGE_MAX};
pub use sluice_raft::{HistogramSnapshot, LatencyHistogram};

use crate::core::Sluice;
use crate::error::{ApiError, Kind};
use crate::model::{Digest, LearnerBody, MembershipBody};
use sluice_raft::{ClusterError, MembershipOp, NodeAddr};
use sluice_statemachine::Command;
use std::collections::BTreeMap;
use std::time::Duration;

pub use sluice_raft::LogRecord;

/// Least time between two computations of the state digest on one node.
pub const DIGEST_GAP: Duration = Duration::from_secs(1);

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

/// Whether `a` is `host:port`: a non-empty host (a name, an IPv4 address or a bracketed IPv6
/// one) and a port from 1 to 65535, at most `ADDR_LEN_MAX` bytes.
pub(crate) fn host_port(a: &str) -> bool {
    let Some((host, port)) = a.rsplit_once(':') else {
        return false;
    };
    a.len() <= ADDR_LEN_MAX
        && !host.is_empty()
        && port.parse::<u16>().is_ok_and(|p| p > 0)
        && (host.starts_with('[') && host.ends_with(']')
            || host
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'.' || c == b'-'))
}

/// Longest node address a membership change accepts.
pub const ADDR_LEN_MAX: usize = 256;

impl Sluice {
    /// This node's view of the cluster.
    pub fn cluster(&self) -> ClusterStatus {
        self.node.status()
    }

    /// Adds a learner (addresses are host:port, at most [`ADDR_LEN_MAX`] bytes each).
    pub async fn add_learner(&self, b: &LearnerBody) -> Result<ClusterStatus, ApiError> {
        // Every address is host:port; the clients' too, so that the node can be reached and
        // named in the cluster's status.
        for (field, a) in [
            ("raft_addr", &b.raft_addr),
            ("http_addr", &b.http_addr),
            ("grpc_addr", &b.grpc_addr),
        ] {
            if !host_port(a) {
                return Err(ApiError::invalid(
                    field,
                    format!("must be host:port (at most {ADDR_LEN_MAX} bytes), not {a:?}"),
                ));
            }
        }
        // A learner nothing answers for would only fill the log with replication retries.
        let reachable = tokio::time::timeout(
            Duration::from_secs(2),
            tokio::net::TcpStream::connect(b.raft_addr.as_str()),
        )
        .await;
        if !matches!(reachable, Ok(Ok(_))) {
            return Err(ApiError::invalid(
                "raft_addr",
                format!(
                    "nothing answers at {} (is the new node started, and is its raft_addr this one?)",
                    b.raft_addr
                ),
            ));
        }
        let addr = NodeAddr {
            raft: b.raft_addr.clone(),
            http: b.http_addr.clone(),
            grpc: b.grpc_addr.clone(),
        };
        // Raft's own entry, not a command: logged with who asked, for the record.
        tracing::info!(operator = %crate::operators::acting_name(), id = b.id, raft = %b.raft_addr, "adding a learner");
        let done = format!("added node {} as a learner ({})", b.id, b.raft_addr);
        self.noted_change(
            format!("adding node {} as a learner ({})", b.id, b.raft_addr),
            done,
            MembershipOp::AddLearner { id: b.id, addr },
        )
        .await
    }

    /// Makes a membership change, which Raft makes by an entry of its own, with the operator
    /// audit log's notes around it: what is `asked`, under the operator's name, before (a
    /// change is not made unless that note is in the log, so none is made unseen), and what was
    /// `done` after (best effort: the change stands whether or not it reaches the log).
    pub(crate) async fn noted_change(
        &self,
        asked: String,
        done: String,
        op: MembershipOp,
    ) -> Result<ClusterStatus, ApiError> {
        self.write(Command::NoteClusterChange { what: asked })
            .await?;
        let status = self.node.membership(op).await?;
        if let Err(e) = self.write(Command::NoteClusterChange { what: done }).await {
            tracing::warn!(error = %e.message, "a membership change's result is not in the audit log");
        }
        Ok(status)
    }

    /// Promotes or removes a node.
    pub async fn change_membership(&self, b: &MembershipBody) -> Result<ClusterStatus, ApiError> {
        let op = match b.action.as_str() {
            "promote" => MembershipOp::Promote { id: b.id },
            "remove" => MembershipOp::Remove { id: b.id },
            _ => return Err(ApiError::invalid("action", "must be promote or remove")),
        };
        tracing::info!(operator = %crate::operators::acting_name(), id = b.id, action = %b.action, "changing the membership");
        let (asked, done) = if b.action == "promote" {
            ("promoting node {} to voter", "promoted node {} to voter")
        } else {
            ("removing node {}", "removed node {}")
        };
        let id = b.id.to_string();
        self.noted_change(asked.replace("{}", &id), done.replace("{}", &id), op)
            .await
    }

    /// Ready to serve: recovered, a leader is known, and applied is close to committed.
    pub fn ready(&self) -> Result<(), ApiError> {
        let s = self.node.status();
        if !s.ready {
            return Err(ClusterError::NotReady.into());
        }
        if s.leader.is_none() {
            return Err(ClusterError::NoLeader.into());
        }
        // A leader that no quorum has acknowledged within the election timeout cannot commit
        // (its followers are down or cut off, or have elected another).
        let quorum_gone = s.leader == Some(s.id)
            && s.voters.len() > 1
            && self
                .node
                .quorum_ack_age()
                .is_none_or(|age| age > self.node.election_timeout_max());
        if quorum_gone {
            return Err(ApiError::new(
                Kind::Unavailable,
                "no_quorum",
                "this leader has not heard from a quorum of its cluster within the election timeout",
            )
            .retry(1));
        }
        if s.committed_index.saturating_sub(s.applied_index) > 1_000 {
            return Err(
                ApiError::new(Kind::Unavailable, "catching_up", "applying the log").retry(1),
            );
        }
        Ok(())
    }
}
