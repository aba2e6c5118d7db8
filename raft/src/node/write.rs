//! The write path: a bounded queue, one batcher draining it into proposals (many commands per
//! log entry) stamped with the cluster's time, submitted in order with a few in flight, or
//! forwarded to the leader from a follower.

use super::NodeInner;
use crate::error::ClusterError;
use crate::reply::{deliver, fail_all, Reply, Waiter};
use crate::types::{Request, TypeConfig};
use openraft::async_runtime::WatchReceiver;
use openraft::errors::ClientWriteError;
use openraft::impls::ProgressResponder;
use openraft::raft::ClientWriteResult;
use sluice_statemachine::limits::PROPOSAL_BYTES_MAX;
use sluice_statemachine::{Command, Outcome, Proposal};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

/// Most commands the batcher puts in one proposal (log entry). It is below what an entry may
/// hold at all ([`COMMANDS_PER_PROPOSAL_MAX`](sluice_statemachine::limits::COMMANDS_PER_PROPOSAL_MAX),
/// which every replica checks when it decodes one), so a batch is never refused for its size.
pub const BATCH_COMMANDS_MAX: usize = 1_024;
const _: () = assert!(BATCH_COMMANDS_MAX <= sluice_statemachine::limits::COMMANDS_PER_PROPOSAL_MAX);
/// Batches a follower keeps in flight to the leader on its forwarding stream; what arrives while
/// all are out shares the next one. The leader batches forwarded commands into its own proposals,
/// so a follower holding them back only adds a wait (`sluice-jepsen bench`: 2 in flight left
/// forwarded joins ~2.7 ms in the follower's queue, 64 left 0.35 ms).
const FORWARDS_IN_FLIGHT: usize = 64;
/// Most bytes of commands the leader queues from one forwarded batch: what a follower's batcher
/// puts in one batch at most (it cuts batches at [`PROPOSAL_BYTES_MAX`] like the leader's own).
/// Commands of a batch past it are answered `Busy`, not queued.
pub const FORWARDED_BATCH_BYTES_MAX: usize = PROPOSAL_BYTES_MAX;
/// Longest a new leader waits, once per term, for enough voters' clocks to stamp its first entry.
const CLOCK_AGREEMENT_WAIT: Duration = Duration::from_millis(500);

/// A write waiting in the queue for its proposal.
pub(super) struct Pending {
    cmd: Command,
    /// Its encoded size, counted against [`PROPOSAL_BYTES_MAX`].
    bytes: usize,
    /// Forwarded here by a follower: proposed only while this node leads, never forwarded on.
    forwarded: bool,
    tx: Waiter,
    queued: Instant,
}

impl Pending {
    /// `cmd`, queued now (sized by the writer's task, not the batcher's).
    fn new(cmd: Command, forwarded: bool, tx: Waiter) -> Self {
        Pending {
            bytes: cmd.encoded_len(),
            cmd,
            forwarded,
            tx,
            queued: Instant::now(),
        }
    }
}

/// The refusal of a command of `bytes` encoded bytes, larger than any proposal may be.
fn too_large(bytes: usize) -> ClusterError {
    ClusterError::Invalid(format!(
        "a command of {bytes} bytes; a log entry takes at most {PROPOSAL_BYTES_MAX} bytes of \
         commands"
    ))
}

/// Adds what is queued to `batch`, which holds `bytes`, while it has fewer than
/// [`BATCH_COMMANDS_MAX`] commands and the next fits in [`PROPOSAL_BYTES_MAX`]: the one that
/// does not fit is returned, to begin the next batch. (No command larger than that is queued:
/// [`NodeInner::enqueue`] refuses it. Were one queued, it would be carried to a batch of its
/// own.)
fn fill(
    batch: &mut Vec<Pending>,
    mut bytes: usize,
    rx: &mut mpsc::Receiver<Pending>,
) -> Option<Pending> {
    while batch.len() < BATCH_COMMANDS_MAX {
        let Ok(p) = rx.try_recv() else { return None };
        if bytes + p.bytes > PROPOSAL_BYTES_MAX {
            return Some(p);
        }
        bytes += p.bytes;
        batch.push(p);
    }
    None
}

/// Drains the write queue into proposals.
pub(super) async fn batcher(inner: Arc<NodeInner>, mut rx: mpsc::Receiver<Pending>) {
    let slots = Arc::new(Semaphore::new(inner.cfg.proposals_in_flight.max(1)));
    let forward_slots = Arc::new(Semaphore::new(FORWARDS_IN_FLIGHT));
    // The command that did not fit in the last batch begins the next.
    let mut carried: Option<Pending> = None;
    loop {
        let first = match carried.take() {
            Some(p) => p,
            None => tokio::select! {
                _ = inner.cancel.cancelled() => break,
                p = rx.recv() => match p { Some(p) => p, None => break },
            },
        };
        let sem = if inner.raft.is_leader() {
            &slots
        } else {
            &forward_slots
        };
        let permit = tokio::select! {
            _ = inner.cancel.cancelled() => break,
            p = sem.clone().acquire_owned() => p.expect("semaphore never closed"),
        };
        // Everything that queued while we waited for a slot joins this proposal, as far as it
        // fits.
        let bytes = first.bytes;
        let mut batch = vec![first];
        carried = fill(&mut batch, bytes, &mut rx);
        assert!(batch.len() <= BATCH_COMMANDS_MAX, "a batch past its bound");
        for p in &batch {
            inner.queue_wait.observe(p.queued.elapsed());
        }
        if inner.raft.is_leader() {
            propose_batch(&inner, batch, permit).await;
        } else {
            forward_batch(&inner, batch, permit);
        }
    }
    rx.close();
    while let Ok(p) = rx.try_recv() {
        let _ = p.tx.send(Err(ClusterError::ShuttingDown));
    }
}

/// Proposes a batch as the leader; each command's answer is delivered once it is applied.
async fn propose_batch(
    inner: &Arc<NodeInner>,
    batch: Vec<Pending>,
    permit: tokio::sync::OwnedSemaphorePermit,
) {
    let (cmds, txs): (Vec<Command>, Vec<_>) = batch.into_iter().map(|p| (p.cmd, p.tx)).unzip();
    if inner.cut_off_from_leader() {
        // No quorum has answered for an election timeout: a proposal would wait for one that
        // may never come.
        fail_all(txs, ClusterError::NoLeader);
        return;
    }
    match inner.propose(cmds).await {
        Ok(done) => {
            tokio::spawn(async move {
                deliver(txs, done.await);
                drop(permit);
            });
        }
        Err(e) => fail_all(txs, e),
    }
}

/// Forwards a batch to the leader. Leadership may have moved while these waited: the follower
/// that forwarded a command here retries it itself, so it is not forwarded a second time.
fn forward_batch(
    inner: &Arc<NodeInner>,
    batch: Vec<Pending>,
    permit: tokio::sync::OwnedSemaphorePermit,
) {
    let (forwarded, local): (Vec<Pending>, Vec<Pending>) =
        batch.into_iter().partition(|p| p.forwarded);
    fail_all(
        forwarded.into_iter().map(|p| p.tx).collect(),
        ClusterError::NoLeader,
    );
    let (cmds, txs): (Vec<Command>, Vec<_>) = local.into_iter().map(|p| (p.cmd, p.tx)).unzip();
    if cmds.is_empty() {
        return;
    }
    let inner = inner.clone();
    tokio::spawn(async move { inner.forward(cmds, txs, permit).await });
}

/// The term, the known leader and the index of the membership's log entry.
pub(super) type Leadership = (u64, Option<u64>, Option<u64>);

impl NodeInner {
    pub(super) async fn write(&self, cmd: Command) -> Result<(Outcome, u64), ClusterError> {
        let deadline = tokio::time::Instant::now() + self.cfg.request_timeout;
        loop {
            // What the attempt starts from: a change after this, even one published before the
            // refusal arrives, is worth another attempt at once.
            let tried_under = self.leadership();
            let (tx, rx) = oneshot::channel();
            self.enqueue(Pending::new(cmd.clone(), false, tx))?;
            let result = match tokio::time::timeout_at(deadline, rx).await {
                Err(_) => Err(ClusterError::Timeout),
                Ok(Err(_)) => Err(ClusterError::ShuttingDown),
                Ok(Ok(r)) => r,
            };
            match result {
                // Not appended anywhere: safe to try again once a leader is known, unless this
                // node is cut off from the one it follows (then the client had better try
                // another node now than wait here).
                Err(ClusterError::NoLeader)
                    if tokio::time::Instant::now() + Duration::from_millis(50) < deadline
                        && !self.cut_off_from_leader() =>
                {
                    self.leadership_changed(tried_under, Duration::from_millis(50))
                        .await;
                }
                other => return other,
            }
        }
    }

    /// Who leads as far as this node knows, and under which membership: the term, the leader,
    /// and the index of the membership's log entry (a change of which can bring the leader's
    /// address).
    pub(super) fn leadership(&self) -> Leadership {
        let m = self.raft.metrics();
        let m = m.borrow_watched();
        (
            m.current_term,
            m.current_leader,
            m.membership_config.log_id().as_ref().map(|l| l.index),
        )
    }

    /// Waits until [`leadership`](Self::leadership) differs from `from` (at once if it does
    /// already), or `at_most`. Other changes of openraft's metrics do not end the wait: they
    /// come on every turn of openraft's loop, and a write retried on each one spun (found by the
    /// whole-cluster simulation, where time stood still while it did).
    pub(super) async fn leadership_changed(&self, from: Leadership, at_most: Duration) {
        let mut m = self.raft.metrics();
        let _ = tokio::time::timeout(at_most, async {
            loop {
                // Marked seen before it is compared, so that `changed` waits for the next one.
                m.borrow_and_update();
                if self.leadership() != from {
                    return;
                }
                if m.changed().await.is_err() {
                    // openraft stopped: nothing changes any more.
                    std::future::pending::<()>().await
                }
            }
        })
        .await;
    }

    /// The time for the next proposal: the cluster's time, never less than the applied clock or
    /// an earlier stamp of this term. In a new term, while too few voters' clocks are known
    /// (after a restart, before the first answers), it waits up to [`CLOCK_AGREEMENT_WAIT`] once
    /// for them; after that, this node's own clock stands in (a peer of an older version, which
    /// does not answer, or most peers unreachable, when nothing can commit anyway).
    async fn stamp(&self) -> u64 {
        let (term, voters) = {
            let m = self.raft.metrics();
            let m = m.borrow_watched();
            let voters = m.membership_config.membership().voter_ids().count();
            (m.current_term, voters)
        };
        // The membership as the leader knows it now, not as the sampler last saw it.
        self.clock.set_voters(voters.max(1));
        let first_in_term = {
            let mut s = self.stamp.lock().expect("stamp lock");
            let first = s.0 != term;
            if first {
                *s = (term, 0);
            }
            first
        };
        let agreed = match self.clock.agreed_ms() {
            None if first_in_term => self.clock.wait_agreed(CLOCK_AGREEMENT_WAIT).await,
            agreed => agreed,
        };
        let now = agreed.unwrap_or_else(|| {
            if first_in_term {
                tracing::warn!("too few voters' clocks known: stamping with this node's own clock");
            }
            self.clock.own().now_ms()
        });
        let clock = self.sm.read().expect("state lock").sm.clock_ms();
        let mut s = self.stamp.lock().expect("stamp lock");
        let t = now.max(clock).max(s.1);
        s.1 = t;
        t
    }

    /// Submits one proposal in order; the returned future resolves when it is applied.
    async fn propose(
        &self,
        cmds: Vec<Command>,
    ) -> Result<
        impl std::future::Future<Output = Vec<Result<(Outcome, u64), ClusterError>>> + Send + 'static,
        ClusterError,
    > {
        let n = cmds.len();
        let proposal = Proposal {
            time_ms: self.stamp().await,
            commands: cmds,
        };
        let (responder, done) =
            ProgressResponder::<TypeConfig, ClientWriteResult<TypeConfig>>::complete_only();
        let started = Instant::now();
        self.raft
            .client_write_ff(Request(proposal), Some(responder))
            .await
            .map_err(|e| ClusterError::Fatal(e.to_string()))?;
        let hist = self.commit_latency.clone();
        Ok(async move {
            let err = |e: ClusterError| vec![Err(e); n];
            match done.await {
                Ok(Ok(resp)) => {
                    let index = resp.log_id.index;
                    let outcomes = resp.data.0;
                    if outcomes.len() != n {
                        return err(ClusterError::Fatal(format!(
                            "{} outcomes for {n} commands",
                            outcomes.len()
                        )));
                    }
                    hist.observe(started.elapsed());
                    outcomes.into_iter().map(|o| Ok((o, index))).collect()
                }
                Ok(Err(ClientWriteError::ForwardToLeader(_))) => err(ClusterError::NoLeader),
                Ok(Err(ClientWriteError::LogEntryDiscarded(_))) => {
                    err(ClusterError::Indeterminate(
                        "leadership changed before the entry was known to commit".into(),
                    ))
                }
                Ok(Err(e)) => err(ClusterError::Invalid(e.to_string())),
                Err(_) => err(ClusterError::Indeterminate(
                    "the node stopped before the entry was applied".into(),
                )),
            }
        })
    }

    /// Puts `p` in the write queue: the one way into it, for this node's own writes and for
    /// commands a follower forwarded. A command larger than a proposal may hold
    /// ([`PROPOSAL_BYTES_MAX`]) is refused here, before it reaches the batcher: proposed alone,
    /// it would be a log entry that no replication message is sized to carry.
    fn enqueue(&self, p: Pending) -> Result<(), ClusterError> {
        if p.bytes > PROPOSAL_BYTES_MAX {
            return Err(too_large(p.bytes));
        }
        self.queue.try_send(p).map_err(|e| match e {
            mpsc::error::TrySendError::Full(_) => ClusterError::Busy,
            mpsc::error::TrySendError::Closed(_) => ClusterError::ShuttingDown,
        })
    }

    /// For commands forwarded by a follower: they join this node's own write queue, so that they
    /// share proposals with every other write, if this node leads. Each is refused on its own if
    /// it is larger than a proposal may be; and of one batch at most
    /// [`FORWARDED_BATCH_BYTES_MAX`] bytes of commands are queued, the rest answered `Busy`.
    pub(crate) async fn submit_as_leader(&self, cmds: Vec<Command>) -> Vec<Reply> {
        let n = cmds.len();
        if !self.raft.is_leader() {
            return vec![Err(ClusterError::NoLeader); n];
        }
        let mut waiting = Vec::with_capacity(n);
        let mut queued_bytes = 0usize;
        for cmd in cmds {
            let (tx, rx) = oneshot::channel();
            let p = Pending::new(cmd, true, tx);
            let bytes = p.bytes;
            let queued = if bytes <= PROPOSAL_BYTES_MAX
                && queued_bytes.saturating_add(bytes) > FORWARDED_BATCH_BYTES_MAX
            {
                Err(ClusterError::Busy)
            } else {
                self.enqueue(p)
            };
            if queued.is_ok() {
                queued_bytes += bytes;
            }
            waiting.push(queued.map(|()| rx));
        }
        let deadline = tokio::time::Instant::now() + self.cfg.request_timeout;
        let mut results = Vec::with_capacity(n);
        for w in waiting {
            results.push(match w {
                Ok(rx) => match tokio::time::timeout_at(deadline, rx).await {
                    Err(_) => Err(ClusterError::Timeout),
                    Ok(Err(_)) => Err(ClusterError::ShuttingDown),
                    Ok(Ok(r)) => r,
                },
                Err(e) => Err(e),
            });
        }
        results
    }

    /// Sends a batch to the leader on this follower's forwarding stream.
    async fn forward(&self, cmds: Vec<Command>, txs: Vec<Waiter>, slot: OwnedSemaphorePermit) {
        let (leader, addr) = match self.leader_addr() {
            Ok(l) => l,
            Err(e) => return fail_all(txs, e),
        };
        if leader == self.id {
            return fail_all(txs, ClusterError::NoLeader);
        }
        // A live leader opens a stream well within an election timeout; one that does not is
        // as good as gone (and the write, never sent, is retried).
        let open_timeout = self.cfg.request_timeout.min(self.silence_limit());
        // Cut by the batcher as the leader's own proposals are.
        assert!(
            cmds.len() <= BATCH_COMMANDS_MAX,
            "a forwarded batch of {} commands",
            cmds.len()
        );
        self.forwarder
            .send(
                &self.peers,
                (leader, &addr),
                open_timeout,
                &self.forward_latency,
                cmds,
                txs,
                slot,
            )
            .await;
    }
}

#[cfg(test)]
mod tests {
    use crate::types::NodeAddr;
    use sluice_statemachine::Command;
    use std::collections::BTreeMap;
    use std::time::{Duration, Instant};

    /// A write refused for want of a leader waits for the term, the leader or the membership to
    /// change before it tries again, not for any change of openraft's metrics (they change on
    /// every turn of openraft's loop: the write spun).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_refused_write_waits_for_a_change_of_leadership_not_of_any_metric() {
        let dir = tempfile::tempdir().unwrap();
        let node = crate::node::start_alone(dir.path()).await;
        let addr = NodeAddr {
            raft: node.raft_addr().to_string(),
            http: String::new(),
            grpc: String::new(),
        };

        // A leader elected ends the wait.
        let started = Instant::now();
        let before = node.inner.leadership();
        let wait = node
            .inner
            .leadership_changed(before, Duration::from_secs(30));
        tokio::pin!(wait);
        assert!(futures::poll!(&mut wait).is_pending());
        let (init, ()) = tokio::join!(node.initialize(BTreeMap::from([(1, addr)])), wait);
        init.unwrap();
        let waited = started.elapsed();
        assert!(waited < Duration::from_secs(30), "ended after {waited:?}");
        // A change made before a wait begins ends it at once.
        let started = Instant::now();
        node.inner
            .leadership_changed(before, Duration::from_secs(30))
            .await;
        assert!(started.elapsed() < Duration::from_secs(1));

        // Writes go on (each one changes the metrics) while the wait runs: it runs its course.
        let deadline = Instant::now() + Duration::from_secs(20);
        while node.write(Command::Tick).await.is_err() {
            assert!(Instant::now() < deadline, "no leader");
        }
        let waiting = node.inner.clone();
        let started = Instant::now();
        let wait = tokio::spawn(async move {
            let now = waiting.leadership();
            waiting
                .leadership_changed(now, Duration::from_millis(600))
                .await;
            started.elapsed()
        });
        let mut writes = 0;
        while !wait.is_finished() {
            node.write(Command::Tick).await.unwrap();
            writes += 1;
        }
        let waited = wait.await.unwrap();
        assert!(writes > 1, "{writes} writes");
        assert!(
            waited >= Duration::from_millis(600),
            "ended after {waited:?}"
        );
        node.shutdown().await;
    }

    /// A batch takes what is queued while it fits in a proposal's bytes and commands; the first
    /// command that does not fit begins the next batch, and one too large for any batch still
    /// gets a batch of its own.
    #[test]
    fn batches_are_cut_at_a_proposals_bytes() {
        use super::{fill, Pending, BATCH_COMMANDS_MAX, PROPOSAL_BYTES_MAX};
        use sluice_statemachine::{ClientKey, VisitorId};
        let touch = |visits: usize| {
            let (tx, _) = tokio::sync::oneshot::channel();
            Pending::new(
                Command::TouchFrom {
                    room: "r".into(),
                    visits: vec![(VisitorId([1; 16]), ClientKey([2; 16])); visits],
                },
                false,
                tx,
            )
        };
        let big = touch(10_000);
        let per = big.bytes;
        let fit = PROPOSAL_BYTES_MAX / per;
        assert!((2..=4).contains(&fit), "{per} bytes");
        let (q, mut rx) = tokio::sync::mpsc::channel(64);
        for _ in 0..fit + 2 {
            q.try_send(touch(10_000)).ok().unwrap();
        }
        let mut batch = vec![touch(10_000)];
        let carried = fill(&mut batch, per, &mut rx).expect("one left over");
        assert_eq!(batch.len(), fit);
        assert!(batch.iter().map(|p| p.bytes).sum::<usize>() <= PROPOSAL_BYTES_MAX);
        // The left-over one begins the next batch, which takes the rest.
        let mut next = vec![carried];
        assert!(fill(&mut next, per, &mut rx).is_none());
        assert_eq!(next.len(), 3);
        // Small commands are bounded by their count.
        let (q, mut rx) = tokio::sync::mpsc::channel(BATCH_COMMANDS_MAX + 10);
        for _ in 0..BATCH_COMMANDS_MAX + 10 {
            q.try_send(touch(1)).ok().unwrap();
        }
        let mut batch = vec![touch(1)];
        assert!(fill(&mut batch, 0, &mut rx).is_none());
        assert_eq!(batch.len(), BATCH_COMMANDS_MAX);
        // A command over the budget by itself is carried to a batch of its own.
        let (q, mut rx) = tokio::sync::mpsc::channel(4);
        q.try_send(touch(40_000)).ok().unwrap();
        let mut batch = vec![touch(1)];
        let alone = fill(&mut batch, 40, &mut rx).expect("carried");
        assert!(alone.bytes > PROPOSAL_BYTES_MAX);
        let mut own = vec![alone];
        assert!(fill(&mut own, PROPOSAL_BYTES_MAX + 1, &mut rx).is_none());
        assert_eq!((batch.len(), own.len()), (1, 1));
    }
}
