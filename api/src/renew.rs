//! Session renewals and waiter check-ins, collected per node and proposed in batches: one
//! `Touch` command per room per flush, never one log entry per page view.
//!
//! A gate check or heartbeat only adds the visitor to a set under a short lock: no allocation
//! once the room has an entry, no channel, no task woken per request.

use sluice_raft::RaftNode;
use sluice_statemachine::limits::TOUCH_BATCH_MAX;
use sluice_statemachine::{Command, VisitorId};
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
    count: usize,
}

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

    fn take(&mut self) -> BTreeMap<String, BTreeSet<VisitorId>> {
        self.count = 0;
        std::mem::take(&mut self.rooms)
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
}

async fn flusher(node: RaftNode, pending: Arc<Mutex<Pending>>, cancel: CancellationToken) {
    let mut tick = tokio::time::interval(FLUSH_EVERY);
    loop {
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = tick.tick() => {}
        }
        let due = pending.lock().expect("renewals lock").take();
        for (room, visitors) in due {
            let visitors: Vec<VisitorId> = visitors.into_iter().collect();
            for chunk in visitors.chunks(TOUCH_BATCH_MAX) {
                let node = node.clone();
                let cmd = Command::Touch {
                    room: room.clone(),
                    visitors: chunk.to_vec(),
                };
                tokio::spawn(async move {
                    if let Err(e) = node.write(cmd).await {
                        tracing::debug!(error = %e, "renewal batch not applied");
                    }
                });
            }
        }
    }
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
        let due = p.take();
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
        assert_eq!(p.take()["c"].len(), PENDING_MAX);
    }
}
