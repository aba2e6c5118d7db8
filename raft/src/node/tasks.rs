//! The node's background duties: watching the Raft core and leadership, sampling the voters'
//! clocks, proposing ticks while leader, and removing ledger records past their retention.

use super::NodeInner;
use crate::sm_store::SnapshotDeferral;
use openraft::async_runtime::WatchReceiver;
use openraft::ServerState;
use sluice_statemachine::Command;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::net::IpAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// The leaderships a node has seen. A leadership is a leader in a term: the same node elected
/// again in a later term is a new one, since an election happened.
#[derive(Default)]
struct Leaderships {
    last: Option<(u64, u64)>,
}

impl Leaderships {
    /// Records the current term and leader; true when they name a leadership not seen last.
    fn observe(&mut self, term: u64, leader: Option<u64>) -> bool {
        let Some(leader) = leader else { return false };
        let new = self.last != Some((term, leader));
        self.last = Some((term, leader));
        new
    }
}

/// How often [`watch_core`] looks at the Raft core.
const CORE_CHECK_EVERY: Duration = Duration::from_millis(250);

/// Notices a Raft core that stopped by itself (a storage error is fatal to it): the node stops
/// answering ready, and [`super::RaftNode::failed`] resolves. The metrics watch changes with every
/// batch the core handles, so it is looked at on a timer instead of on each change.
pub(super) async fn watch_core(inner: Arc<NodeInner>) {
    loop {
        tokio::select! {
            _ = inner.cancel.cancelled() => return,
            _ = tokio::time::sleep(CORE_CHECK_EVERY) => {}
        }
        let reason = {
            let m = inner.raft.metrics();
            let m = m.borrow_watched();
            match &m.running_state {
                Err(e) => Some(e.to_string()),
                Ok(()) if m.state == ServerState::Shutdown => Some("Raft stopped".to_string()),
                Ok(()) => None,
            }
        };
        if let Some(reason) = reason {
            if inner.cancel.is_cancelled() {
                return;
            }
            inner.ready.store(false, Ordering::SeqCst);
            tracing::error!(
                reason,
                "the Raft core stopped; this node can no longer serve"
            );
            inner.stopped.send_replace(Some(reason));
            return;
        }
    }
}

/// Keeps the snapshot deferral's view of whether this node leads up to date, and counts the
/// leaderships (leader and term) this node has known.
pub(super) async fn track_leadership(inner: Arc<NodeInner>, deferral: Arc<SnapshotDeferral>) {
    let mut m = inner.raft.server_metrics();
    let mut known = Leaderships::default();
    loop {
        let (leading, term, leader) = {
            let now = m.borrow_watched();
            (
                now.state == openraft::ServerState::Leader,
                now.vote.leader_id().term,
                now.current_leader,
            )
        };
        deferral.leading.store(leading, Ordering::Relaxed);
        if known.observe(term, leader) {
            inner.leader_changes.fetch_add(1, Ordering::Relaxed);
        }
        tokio::select! {
            _ = inner.cancel.cancelled() => break,
            r = m.changed() => if r.is_err() { break },
        }
    }
}

/// Asks the other voters for their wall clocks once a second, for [`crate::clock::ClusterClock`].
pub(super) async fn sample_clocks(inner: Arc<NodeInner>) {
    loop {
        let peers: Vec<(u64, String)> = {
            let m = inner.raft.metrics();
            let m = m.borrow_watched();
            let membership = m.membership_config.membership();
            membership
                .voter_ids()
                .filter(|id| *id != inner.id)
                .filter_map(|id| membership.get_node(&id).map(|n| (id, n.raft.clone())))
                .collect()
        };
        let ids: Vec<u64> = peers.iter().map(|(id, _)| *id).collect();
        inner.clock.retain(&ids);
        // No peers yet (the membership is not loaded) counts as a round to retry soon.
        let complete = tokio::select! {
            _ = inner.cancel.cancelled() => break,
            all = crate::clock::sample_peers(&inner.clock, &inner.peers, peers) => all && !ids.is_empty(),
        };
        let pause = if complete {
            crate::clock::SAMPLE_EVERY
        } else {
            crate::clock::SAMPLE_RETRY
        };
        tokio::select! {
            _ = inner.cancel.cancelled() => break,
            _ = tokio::time::sleep(pause) => {}
        }
    }
}

/// Proposes `Tick` while leader whenever the state machine has something due.
pub(super) async fn ticker(inner: Arc<NodeInner>) {
    let every = Duration::from_millis(inner.cfg.tick_interval_ms.max(1));
    loop {
        tokio::select! {
            _ = inner.cancel.cancelled() => break,
            _ = tokio::time::sleep(every) => {}
        }
        if !inner.ready.load(Ordering::SeqCst)
            || !inner.raft.is_leader()
            || inner.tick_in_flight.load(Ordering::SeqCst)
        {
            continue;
        }
        let (due, clock) = {
            let st = inner.sm.read().expect("state lock");
            (st.sm.next_due_ms(), st.sm.clock_ms())
        };
        if due.is_some_and(|d| d <= inner.clock.agreed_ms().unwrap_or(clock).max(clock)) {
            inner.tick_in_flight.store(true, Ordering::SeqCst);
            let inner = inner.clone();
            tokio::spawn(async move {
                if let Err(e) = inner.write(Command::Tick).await {
                    tracing::debug!(error = %e, "tick not applied");
                }
                inner.tick_in_flight.store(false, Ordering::SeqCst);
            });
        }
    }
}

/// How often a node removes ledger records past their retention.
const LEDGER_UPKEEP_EVERY: Duration = Duration::from_secs(60);

/// Removes ledger records past the retention, by log time, a bounded pass at a time.
pub(super) async fn keep_ledger(inner: Arc<NodeInner>) {
    let (Some(store), Some(retention)) = (inner.ledger.clone(), inner.cfg.ledger) else {
        return;
    };
    let mut every = tokio::time::interval(LEDGER_UPKEEP_EVERY);
    loop {
        tokio::select! {
            _ = inner.cancel.cancelled() => return,
            _ = every.tick() => {}
        }
        let now = inner.sm.read().expect("state lock").sm.clock_ms();
        let before = now.saturating_sub(retention.max_age.as_millis() as u64);
        let store = store.clone();
        let pass =
            tokio::task::spawn_blocking(move || store.purge(before, retention.records_max)).await;
        match pass {
            Ok(Ok(0)) => {}
            Ok(Ok(n)) => tracing::info!(removed = n, "ledger records past retention removed"),
            Ok(Err(e)) => tracing::warn!(error = %e, "ledger retention pass failed"),
            Err(e) => tracing::warn!(error = %e, "ledger retention pass failed"),
        }
    }
}

/// The addresses the cluster's members' Raft addresses resolve to, for the listener's slots
/// kept for them ([`super::RAFT_CONNECTIONS_RESERVED`]).
#[derive(Clone, Debug, Default)]
pub(super) struct MemberAddresses(Arc<std::sync::RwLock<HashSet<IpAddr>>>);

impl MemberAddresses {
    /// The listener's test of a connecting address.
    pub(super) fn holders(&self) -> sluice_gate::listener::Exempt {
        let set = self.0.clone();
        Arc::new(move |ip| set.read().expect("member addresses lock").contains(&ip))
    }
}

/// How long one lookup of a member's address may take.
const MEMBER_LOOKUP_TIMEOUT: Duration = Duration::from_secs(5);

/// Keeps the node's [`MemberAddresses`] up to date: the members' Raft addresses are looked up now and every
/// [`super::MEMBER_ADDRESSES_EVERY`]. An address whose lookup fails keeps what it resolved to
/// before (a resolver's hiccup does not take a member's slots away).
pub(super) async fn resolve_members(inner: Arc<NodeInner>) {
    let mut known: BTreeMap<String, Vec<IpAddr>> = BTreeMap::new();
    loop {
        let addrs: BTreeSet<String> = {
            let m = inner.raft.metrics();
            let m = m.borrow_watched();
            m.membership_config
                .membership()
                .nodes()
                .map(|(_, n)| n.raft.clone())
                .collect()
        };
        known.retain(|a, _| addrs.contains(a));
        for a in addrs {
            let lookup = tokio::net::lookup_host(a.clone());
            if let Ok(Ok(found)) = tokio::time::timeout(MEMBER_LOOKUP_TIMEOUT, lookup).await {
                known.insert(a, found.map(|s| s.ip().to_canonical()).collect());
            }
        }
        *inner
            .member_addresses
            .0
            .write()
            .expect("member addresses lock") = known.values().flatten().copied().collect();
        tokio::select! {
            _ = inner.cancel.cancelled() => return,
            _ = tokio::time::sleep(super::MEMBER_ADDRESSES_EVERY) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Leaderships;

    #[test]
    fn a_leader_elected_again_in_a_later_term_is_a_new_leadership() {
        let mut seen = Leaderships::default();
        assert!(seen.observe(3, Some(1)), "the first leader");
        assert!(!seen.observe(3, Some(1)), "the same leadership again");
        assert!(!seen.observe(4, None), "an election under way");
        assert!(seen.observe(4, Some(1)), "node 1 won term 4");
        assert!(seen.observe(5, Some(2)), "node 2 won term 5");
    }
}

#[cfg(test)]
mod member_tests {
    use crate::types::NodeAddr;
    use std::collections::BTreeMap;
    use std::net::IpAddr;
    use std::time::{Duration, Instant};

    /// Once a node knows its cluster, the addresses its members' Raft addresses resolve to
    /// (names too) hold the listener's reserved slots; other addresses do not.
    #[tokio::test]
    async fn the_members_addresses_hold_the_reserved_slots() {
        let dir = tempfile::tempdir().unwrap();
        let node = crate::node::start_alone(dir.path()).await;
        let holds = node.inner.member_addresses.holders();
        let (member, other): (IpAddr, IpAddr) =
            ("127.0.0.1".parse().unwrap(), "127.0.0.9".parse().unwrap());
        assert!(!holds(member), "no members known yet");
        let addr = NodeAddr {
            raft: format!("localhost:{}", node.raft_addr().port()),
            http: String::new(),
            grpc: String::new(),
        };
        node.initialize(BTreeMap::from([(1, addr)])).await.unwrap();
        // Looked up again every MEMBER_ADDRESSES_EVERY; the test's clock moves on by itself.
        tokio::time::pause();
        let deadline = Instant::now() + Duration::from_secs(20);
        while !holds(member) {
            assert!(
                Instant::now() < deadline,
                "the member's address never held a slot"
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        assert!(!holds(other));
        node.shutdown().await;
    }
}
