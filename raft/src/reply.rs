//! Where a queued command's outcome goes: the write path and the forwarding stream hand each
//! command's waiter its reply, or the same error to a whole batch.

use crate::error::ClusterError;
use sluice_statemachine::Outcome;
use tokio::sync::oneshot;

/// A command's outcome and the index of the entry that carried it.
pub(crate) type Reply = Result<(Outcome, u64), ClusterError>;
/// Where a queued command's reply goes.
pub(crate) type Waiter = oneshot::Sender<Reply>;

/// Answers every waiter of a batch with `e`.
pub(crate) fn fail_all(txs: Vec<Waiter>, e: ClusterError) {
    for tx in txs {
        let _ = tx.send(Err(e.clone()));
    }
}

/// Answers each waiter with its own result, in order: one result per command.
pub(crate) fn deliver(txs: Vec<Waiter>, results: Vec<Reply>) {
    assert_eq!(txs.len(), results.len(), "one result per command");
    for (tx, r) in txs.into_iter().zip(results) {
        let _ = tx.send(r);
    }
}
