//! Session renewals and waiter check-ins, collected per node and proposed in batches: one
//! `Touch` command per room per flush, never one log entry per page view.
//!
//! A gate check or heartbeat only adds the visitor to a set under a short lock: no allocation
//! once the room has an entry, no channel, no task woken per request.

use sluice_raft::RaftNode;
use sluice_statemachine::limits::TOUCH_BATCH_MAX;
use sluice_statemachine::{ClientKey, Command, VisitorId};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Renewals waiting for a flush, at most; beyond it they are dropped (the next page view renews).
pub const PENDING_MAX: usize = 100_000;
/// How often pending renewals are proposed.
pub const FLUSH_EVERY: Duration = Duration::from_millis(500);

#[derive(Debug, Default)]
struct Pending {
    rooms: BTreeMap<String, BTreeSet<VisitorId>>,
    /// Visits with the client network they came from, for rooms that count networks.
    visits: BTreeMap<String, BTreeSet<(VisitorId, ClientKey)>>,
    count: usize,
}

/// What one flush proposes for one room.
type Due = (
    BTreeMap<String, BTreeSet<VisitorId>>,
    BTreeMap<String, BTreeSet<(VisitorId, ClientKey)>>,
);

impl Pending {
    fn add(&mut self, room: &str, visitor: VisitorId) {
        if self.count >= PENDING_MAX {
            return;
        }
        let set = match self.rooms.get_mut(room) {
            Some(s) => s,
            None => self.rooms.entry(room.to_string()).or_default(),
        };
        if set.insert(visitor) {
            self.count += 1;
        }
    }

    fn add_from(&mut self, room: &str, visitor: VisitorId, net: ClientKey) {
        if self.count >= PENDING_MAX {
            return;
        }
        let set = match self.visits.get_mut(room) {
            Some(s) => s,
            None => self.visits.entry(room.to_string()).or_default(),
        };
        if set.insert((visitor, net)) {
            self.count += 1;
        }
    }

    fn take(&mut self) -> Due {
        self.count = 0;
        (
            std::mem::take(&mut self.rooms),
            std::mem::take(&mut self.visits),
        )
    }
}

/// The recording side, cloned into handlers.
#[derive(Clone, Debug)]
pub struct Renewer {
    pending: Arc<Mutex<Pending>>,
}

impl Renewer {
    /// Starts the flusher for `node`; it stops with `cancel`.
    pub fn start(node: RaftNode, cancel: CancellationToken) -> Self {
        let pending = Arc::new(Mutex::new(Pending::default()));
        tokio::spawn(flusher(node, pending.clone(), cancel));
        Self { pending }
    }

    /// Records activity of a visitor (best effort).
    pub fn touch(&self, room: &str, visitor: VisitorId) {
        self.pending
            .lock()
            .expect("renewals lock")
            .add(room, visitor);
    }

    /// Records activity of a visitor from a client network, for a room that counts the
    /// networks a session is used from (best effort).
    pub fn touch_from(&self, room: &str, visitor: VisitorId, net: ClientKey) {
        self.pending
            .lock()
            .expect("renewals lock")
            .add_from(room, visitor, net);
    }
}

async fn flusher(node: RaftNode, pending: Arc<Mutex<Pending>>, cancel: CancellationToken) {
    let mut tick = tokio::time::interval(FLUSH_EVERY);
    loop {
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = tick.tick() => {}
        }
        let (due, visits) = pending.lock().expect("renewals lock").take();
        for (room, visits) in visits {
            let visits: Vec<(VisitorId, ClientKey)> = visits.into_iter().collect();
            for chunk in visits.chunks(TOUCH_BATCH_MAX) {
                propose(
                    &node,
                    Command::TouchFrom {
                        room: room.clone(),
                        visits: chunk.to_vec(),
                    },
                );
            }
        }
        for (room, visitors) in due {
            let visitors: Vec<VisitorId> = visitors.into_iter().collect();
            for chunk in visitors.chunks(TOUCH_BATCH_MAX) {
                propose(
                    &node,
                    Command::Touch {
                        room: room.clone(),
                        visitors: chunk.to_vec(),
                    },
                );
            }
        }
    }
}

fn propose(node: &RaftNode, cmd: Command) {
    let node = node.clone();
    tokio::spawn(async move {
        if let Err(e) = node.write(cmd).await {
            tracing::debug!(error = %e, "renewal batch not applied");
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pending_renewals_are_deduplicated_grouped_by_room_and_bounded() {
        let mut p = Pending::default();
        let v = |n: u128| VisitorId(n.to_be_bytes());
        p.add("a", v(2));
        p.add("a", v(1));
        p.add("a", v(2));
        p.add("b", v(1));
        assert_eq!(p.count, 3);
        let due = p.take().0;
        assert_eq!(
            due.into_iter()
                .map(|(r, v)| (r, v.into_iter().collect::<Vec<_>>()))
                .collect::<Vec<_>>(),
            vec![
                ("a".to_string(), vec![v(1), v(2)]),
                ("b".to_string(), vec![v(1)])
            ]
        );
        assert_eq!(p.count, 0);
        for i in 0..PENDING_MAX as u128 + 10 {
            p.add("c", v(i));
        }
        assert_eq!(p.count, PENDING_MAX);
        // Visits with a network share the bound, and are kept per (visitor, network).
        p.add_from("d", v(1), ClientKey([1; 16]));
        assert_eq!(p.take().0["c"].len(), PENDING_MAX);
        let net = |n: u8| ClientKey([n; 16]);
        p.add_from("d", v(1), net(1));
        p.add_from("d", v(1), net(2));
        p.add_from("d", v(1), net(1));
        assert_eq!(p.count, 2);
        let (plain, visits) = p.take();
        assert!(plain.is_empty());
        assert_eq!(
            visits["d"].iter().copied().collect::<Vec<_>>(),
            vec![(v(1), net(1)), (v(1), net(2))]
        );
    }
}
