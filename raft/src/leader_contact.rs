//! When a follower last heard from its leader, so that it can tell a leader it merely follows
//! from one it can still reach.
//!
//! A follower cut off from the leader (the far side of a majorities ring, say, where the rest
//! of the cluster still hears the leader and Pre-Vote keeps this node from standing) goes on
//! naming that leader indefinitely. Sending it a write or a read-index request then waits for a
//! connection that never comes, until the client gives up, and a client that tries each node in
//! turn spends the whole fault waiting. Once the leader has been silent for longer than an
//! election timeout, such a node refuses at once with a retriable `NoLeader`, and the client
//! goes elsewhere.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::time::Instant;

/// The node id and time of the last message from an elected leader at least as recent as this
/// node's vote. Times are milliseconds since this node started.
#[derive(Debug)]
pub(crate) struct LeaderContact {
    started: Instant,
    /// The leader last heard from (0: none yet; node ids start at 1).
    leader: AtomicU64,
    /// When, in milliseconds since `started`.
    at_ms: AtomicU64,
}

impl LeaderContact {
    pub(crate) fn new() -> Self {
        Self {
            started: Instant::now(),
            leader: AtomicU64::new(0),
            at_ms: AtomicU64::new(0),
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// A message came from `leader`, which holds an elected vote not behind this node's.
    pub(crate) fn heard(&self, leader: u64) {
        self.leader.store(leader, Ordering::Relaxed);
        self.at_ms.store(self.now_ms(), Ordering::Relaxed);
    }

    /// How long `leader` has been silent: since its last message, or since this node started if
    /// none came from it (a node just started, or a leader just elected, gets the same grace).
    pub(crate) fn silence(&self, leader: u64) -> Duration {
        silence(
            self.leader.load(Ordering::Relaxed),
            self.at_ms.load(Ordering::Relaxed),
            leader,
            self.now_ms(),
        )
    }
}

fn silence(heard_from: u64, at_ms: u64, leader: u64, now_ms: u64) -> Duration {
    let since = if heard_from == leader { at_ms } else { 0 };
    Duration::from_millis(now_ms.saturating_sub(since))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn silence_counts_from_the_last_message_of_that_leader() {
        assert_eq!(silence(2, 1_000, 2, 1_250), Duration::from_millis(250));
        // Another leader's messages say nothing about this one: counted from the start.
        assert_eq!(silence(3, 1_000, 2, 1_250), Duration::from_millis(1_250));
        // Nothing heard yet.
        assert_eq!(silence(0, 0, 2, 400), Duration::from_millis(400));
        // A reading taken just before a message was recorded is not negative.
        assert_eq!(silence(2, 1_300, 2, 1_250), Duration::ZERO);
    }

    #[test]
    fn a_message_resets_the_silence() {
        let c = LeaderContact::new();
        std::thread::sleep(Duration::from_millis(30));
        assert!(c.silence(2) >= Duration::from_millis(30));
        c.heard(2);
        // Read in this order, the difference is at least the time between start and message,
        // however long the reads themselves are delayed.
        let (two, three) = (c.silence(2), c.silence(3));
        assert!(
            three - two >= Duration::from_millis(30),
            "{two:?} {three:?}"
        );
    }
}
