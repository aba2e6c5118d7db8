//! Session renewals and waiter check-ins, collected per node and proposed in batches: one
//! `Touch` command per room per flush, never one log entry per page view.

use sluice_raft::RaftNode;
use sluice_statemachine::limits::TOUCH_BATCH_MAX;
use sluice_statemachine::{Command, VisitorId};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Renewals waiting for a flush, at most; beyond it they are dropped (the next page view renews).
pub const PENDING_MAX: usize = 100_000;
/// How often pending renewals are proposed.
pub const FLUSH_EVERY: Duration = Duration::from_millis(500);

/// The sending side, cloned into handlers.
#[derive(Clone, Debug)]
pub struct Renewer {
    tx: mpsc::Sender<(String, VisitorId)>,
}

impl Renewer {
    /// Starts the flusher for `node`; it stops with `cancel`.
    pub fn start(node: RaftNode, cancel: CancellationToken) -> Self {
        let (tx, rx) = mpsc::channel(PENDING_MAX);
        tokio::spawn(flusher(node, rx, cancel));
        Self { tx }
    }

    /// Records activity of a visitor (best effort).
    pub fn touch(&self, room: &str, visitor: VisitorId) {
        let _ = self.tx.try_send((room.to_string(), visitor));
    }
}

async fn flusher(
    node: RaftNode,
    mut rx: mpsc::Receiver<(String, VisitorId)>,
    cancel: CancellationToken,
) {
    let mut pending: BTreeMap<String, BTreeSet<VisitorId>> = BTreeMap::new();
    let mut tick = tokio::time::interval(FLUSH_EVERY);
    loop {
        tokio::select! {
            _ = cancel.cancelled() => break,
            item = rx.recv() => match item {
                Some((room, v)) => { pending.entry(room).or_default().insert(v); }
                None => break,
            },
            _ = tick.tick() => {
                for (room, visitors) in std::mem::take(&mut pending) {
                    let visitors: Vec<VisitorId> = visitors.into_iter().collect();
                    for chunk in visitors.chunks(TOUCH_BATCH_MAX) {
                        let node = node.clone();
                        let cmd = Command::Touch { room: room.clone(), visitors: chunk.to_vec() };
                        tokio::spawn(async move {
                            if let Err(e) = node.write(cmd).await {
                                tracing::debug!(error = %e, "renewal batch not applied");
                            }
                        });
                    }
                }
            }
        }
    }
}
