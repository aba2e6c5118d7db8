//! The cluster's time: the lower median of the voters' wall clocks, as this node estimates them.
//!
//! The leader stamps every log entry with this time, so one node whose clock is wrong (stepped
//! minutes ahead, or behind) cannot move the cluster's clock while a majority of the clocks
//! agree. Each node asks every other voter for its wall clock once a second (`sample_peers`)
//! and keeps, per peer, the answer mapped onto its own monotonic clock: the peer's clock now is
//! estimated as the answer plus the monotonic time elapsed since the middle of the round trip.
//! The error of an estimate is at most half its round trip, so answers that took longer than
//! [`SAMPLE_RTT_MAX`] are not used, and estimates older than [`SAMPLE_FRESH`] (a peer down or
//! cut off) drop out.
//!
//! Of `V` voters, up to `f = (V - 1) / 2` clocks may be wrong. With `k` clocks known (this
//! node's own among them), the time is the `(k - f)`-th smallest: the lower median when all are
//! known, never above a clock that is right, and unknown (`None`) when fewer than `f + 1` are
//! known. The leader then waits briefly for the next answers rather than trust its clock alone.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::time::Instant;

/// How often each node asks the other voters for their clocks.
pub const SAMPLE_EVERY: Duration = Duration::from_secs(1);
/// How soon it asks again when some did not answer (at start, before the first election can end,
/// and while a peer is down).
pub const SAMPLE_RETRY: Duration = Duration::from_millis(200);
/// An estimate older than this is not used.
pub const SAMPLE_FRESH: Duration = Duration::from_secs(5);
/// An answer whose round trip took longer than this is not used (its error could be half that).
pub const SAMPLE_RTT_MAX: Duration = Duration::from_millis(1_000);

/// A wall clock, ms since the epoch. The system's, or (for tests of clock faults) the system's
/// shifted by a fixed offset, or (in a simulation) one that runs with the simulated monotonic
/// clock and can be stepped.
#[derive(Clone, Debug, Default)]
pub struct WallClock {
    offset_ms: i64,
    simulated: Option<Arc<Simulated>>,
}

#[derive(Debug)]
struct Simulated {
    /// The clock's reading at `start`.
    epoch_ms: u64,
    start: Instant,
    /// Steps taken since, in all.
    stepped_ms: AtomicI64,
}

/// This machine's wall clock, ms since the epoch. Sluice itself uses the cluster's time
/// (`RaftNode::now_ms`) for everything with a deadline.
pub fn wall_ms() -> u64 {
    WallClock::system().now_ms()
}

impl WallClock {
    /// The system clock.
    pub fn system() -> Self {
        Self::default()
    }

    /// The system clock shifted by `offset_ms` (negative: behind).
    pub fn shifted(offset_ms: i64) -> Self {
        Self {
            offset_ms,
            simulated: None,
        }
    }

    /// A clock that reads `epoch_ms` now and then runs with the monotonic clock of the runtime
    /// it is read in (a simulation's, whose time is simulated). Clones share its steps.
    pub fn simulated(epoch_ms: u64) -> Self {
        Self {
            offset_ms: 0,
            simulated: Some(Arc::new(Simulated {
                epoch_ms,
                start: Instant::now(),
                stepped_ms: AtomicI64::new(0),
            })),
        }
    }

    /// Steps a simulated clock (and its clones) by `ms` (negative: back). Other clocks stay.
    pub fn step(&self, ms: i64) {
        if let Some(s) = &self.simulated {
            s.stepped_ms.fetch_add(ms, Ordering::Relaxed);
        }
    }

    /// Now, ms since the epoch.
    pub fn now_ms(&self) -> u64 {
        let base = match &self.simulated {
            None => SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
            Some(s) => (s.epoch_ms + s.start.elapsed().as_millis() as u64)
                .saturating_add_signed(s.stepped_ms.load(Ordering::Relaxed)),
        };
        base.saturating_add_signed(self.offset_ms)
    }
}

#[derive(Clone, Copy, Debug)]
struct Sample {
    /// The peer's clock at `at`, ms since the epoch.
    peer_ms: u64,
    /// Middle of the round trip, on this node's monotonic clock.
    at: Instant,
}

impl Sample {
    /// The peer's clock at `now`, carried forward on the monotonic clock, unless the sample is
    /// older than [`SAMPLE_FRESH`].
    fn estimate_at(&self, now: Instant) -> Option<u64> {
        let age = now.saturating_duration_since(self.at);
        (age <= SAMPLE_FRESH).then(|| self.peer_ms.saturating_add(age.as_millis() as u64))
    }
}

/// This node's view of the cluster's time.
#[derive(Clone)]
pub struct ClusterClock {
    own: WallClock,
    samples: Arc<Mutex<BTreeMap<u64, Sample>>>,
    /// Voters, this node counted among them.
    voters: Arc<AtomicUsize>,
    answered: Arc<tokio::sync::Notify>,
}

impl fmt::Debug for ClusterClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClusterClock")
            .field("own", &self.own)
            .finish_non_exhaustive()
    }
}

impl ClusterClock {
    /// A view with no peer estimates yet: until the first answers it is `own`.
    pub fn new(own: WallClock) -> Self {
        Self {
            own,
            samples: Arc::default(),
            voters: Arc::new(AtomicUsize::new(1)),
            answered: Arc::default(),
        }
    }

    /// This node's own wall clock.
    pub fn own(&self) -> WallClock {
        self.own.clone()
    }

    /// Records peer `id`'s answer `peer_ms` to a request sent at `sent` and answered at
    /// `received` (both on this node's monotonic clock). Returns whether it was used.
    pub fn record(&self, id: u64, peer_ms: u64, sent: Instant, received: Instant) -> bool {
        let rtt = received.saturating_duration_since(sent);
        if rtt > SAMPLE_RTT_MAX {
            return false;
        }
        let at = sent + rtt / 2;
        let mut samples = self.samples.lock().expect("clock samples lock");
        samples.insert(id, Sample { peer_ms, at });
        drop(samples);
        self.answered.notify_waiters();
        true
    }

    /// Sets the other voters (this node counts as one more) and forgets the estimates of nodes
    /// that are not among them.
    pub fn retain(&self, peers: &[u64]) {
        let mut samples = self.samples.lock().expect("clock samples lock");
        samples.retain(|id, _| peers.contains(id));
        self.set_voters(peers.len() + 1);
    }

    /// Sets how many voters there are, this node among them.
    pub fn set_voters(&self, voters: usize) {
        self.voters.store(voters, Ordering::Relaxed);
    }

    /// The cluster's time now, ms since the epoch, if enough voters' clocks are known (see the
    /// module documentation).
    pub fn agreed_ms(&self) -> Option<u64> {
        self.estimate(Instant::now(), self.own.now_ms())
    }

    /// [`agreed_ms`](Self::agreed_ms), waiting up to `max` for answers that make it known.
    pub async fn wait_agreed(&self, max: Duration) -> Option<u64> {
        let deadline = tokio::time::Instant::now() + max;
        loop {
            let answered = self.answered.notified();
            if let Some(t) = self.agreed_ms() {
                return Some(t);
            }
            if tokio::time::timeout_at(deadline, answered).await.is_err() {
                return self.agreed_ms();
            }
        }
    }

    /// The cluster's time now, or this node's own clock while too few clocks are known: for what
    /// a node decides alone (a gate check, a token's times).
    pub fn now_ms(&self) -> u64 {
        self.now_at(Instant::now(), self.own.now_ms())
    }

    /// How far the cluster's time is from this node's own clock, in ms (positive: this node's
    /// clock is behind).
    pub fn offset_ms(&self) -> i64 {
        let now = Instant::now();
        let own = self.own.now_ms();
        self.now_at(now, own) as i64 - own as i64
    }

    /// How many other voters' clocks are known (fresh estimates).
    pub fn peers_known(&self) -> usize {
        let now = Instant::now();
        let samples = self.samples.lock().expect("clock samples lock");
        samples.values().filter_map(|s| s.estimate_at(now)).count()
    }

    fn now_at(&self, now: Instant, own_ms: u64) -> u64 {
        self.estimate(now, own_ms).unwrap_or(own_ms)
    }

    fn estimate(&self, now: Instant, own_ms: u64) -> Option<u64> {
        let mut values: Vec<u64> = Vec::with_capacity(8);
        values.push(own_ms);
        {
            let samples = self.samples.lock().expect("clock samples lock");
            values.extend(samples.values().filter_map(|s| s.estimate_at(now)));
        }
        values.sort_unstable();
        let wrong_max = (self.voters.load(Ordering::Relaxed).max(1) - 1) / 2;
        let k = values.len();
        (k > wrong_max).then(|| values[k - wrong_max - 1])
    }
}

/// Asks each of `peers` (id, node-to-node address) for its wall clock, concurrently, and records
/// the answers in `clock`. A peer that does not answer in time, or does not know the call (an
/// older node), is left out. Returns whether every peer's answer was recorded.
pub(crate) async fn sample_peers(
    clock: &ClusterClock,
    network: &crate::network::Peers,
    peers: Vec<(u64, String)>,
) -> bool {
    let calls = peers.into_iter().map(|(id, addr)| async move {
        let Ok(mut client) = network.client(&addr) else {
            return false;
        };
        let mut req = tonic::Request::new(crate::pb::Empty {});
        req.set_timeout(SAMPLE_RTT_MAX * 5);
        let sent = Instant::now();
        let reply = tokio::time::timeout(SAMPLE_RTT_MAX * 5, client.wall_clock(req)).await;
        let received = Instant::now();
        match reply {
            Ok(Ok(r)) => clock.record(id, r.into_inner().unix_ms, sent, received),
            _ => false,
        }
    });
    futures::future::join_all(calls)
        .await
        .into_iter()
        .all(|ok| ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: u64 = 1_800_000_000_000;

    /// A node of three voters (itself, 2 and 3) with these estimates.
    fn clock_with(samples: &[(u64, u64)], at: Instant) -> ClusterClock {
        let c = ClusterClock::new(WallClock::system());
        c.retain(&[2, 3]);
        for &(id, ms) in samples {
            assert!(c.record(id, ms, at, at));
        }
        c
    }

    #[test]
    fn one_clock_far_off_is_outvoted() {
        let at = Instant::now();
        // This node's clock ten minutes ahead; both peers agree on T.
        let c = clock_with(&[(2, T), (3, T + 3)], at);
        assert_eq!(c.now_at(at, T + 600_000), T + 3);
        // Ten minutes behind.
        assert_eq!(c.now_at(at, T - 600_000), T);
        // One peer off, this node right.
        let c = clock_with(&[(2, T - 600_000), (3, T + 2)], at);
        assert_eq!(c.now_at(at, T + 1), T + 1);
    }

    #[test]
    fn estimates_move_with_the_monotonic_clock() {
        let at = Instant::now();
        let c = clock_with(&[(2, T), (3, T)], at);
        let later = at + Duration::from_millis(1_500);
        // This node's clock stepped back an hour meanwhile: the peers' estimates carry on.
        assert_eq!(c.now_at(later, T - 3_600_000), T + 1_500);
    }

    #[test]
    fn with_two_clocks_the_earlier_wins_and_alone_a_node_has_its_own() {
        let at = Instant::now();
        let c = clock_with(&[(2, T + 600_000)], at);
        assert_eq!(c.now_at(at, T), T);
        let c = clock_with(&[(2, T)], at);
        assert_eq!(c.now_at(at, T + 600_000), T);
        // A single voter is the cluster.
        let alone = ClusterClock::new(WallClock::system());
        assert_eq!(alone.estimate(at, T + 5), Some(T + 5));
    }

    #[test]
    fn stale_slow_and_removed_estimates_are_not_used() {
        let at = Instant::now();
        let c = clock_with(&[(2, T + 600_000), (3, T + 600_000)], at);
        assert_eq!(c.now_at(at, T), T + 600_000);
        // Six seconds on, both estimates are stale: this node's clock alone.
        let later = at + SAMPLE_FRESH + Duration::from_secs(1);
        assert_eq!(c.estimate(later, T), None);
        assert_eq!(c.now_at(later, T), T);
        assert_eq!(c.peers_known(), 2);
        // An answer that took too long is refused.
        let c = ClusterClock::new(WallClock::system());
        c.retain(&[2, 3]);
        assert!(!c.record(2, T, at, at + SAMPLE_RTT_MAX + Duration::from_millis(1)));
        assert_eq!(c.estimate(at, T + 600_000), None);
        assert_eq!(c.now_at(at, T + 600_000), T + 600_000);
        // A removed voter's estimate goes.
        let c = clock_with(&[(2, T + 600_000), (3, T + 600_000)], at);
        c.retain(&[3, 4]);
        assert_eq!(c.now_at(at, T), T);
    }

    #[test]
    fn with_too_few_clocks_known_there_is_no_agreed_time() {
        let at = Instant::now();
        let c = ClusterClock::new(WallClock::system());
        c.retain(&[2, 3, 4, 5]);
        // Five voters, two of them may be wrong: this node's clock and one more are not enough,
        // even if both say the same.
        assert!(c.record(2, T + 600_000, at, at));
        assert_eq!(c.estimate(at, T + 600_000), None);
        // Three known: the smallest, which is at or below a right clock if two are wrong.
        assert!(c.record(3, T, at, at));
        assert_eq!(c.estimate(at, T + 600_000), Some(T));
        assert!(c.record(4, T + 1, at, at));
        assert_eq!(c.estimate(at, T + 600_000), Some(T + 1));
        // All five: the lower median.
        assert!(c.record(5, T + 2, at, at));
        assert_eq!(c.estimate(at, T + 600_000), Some(T + 2));
    }

    #[tokio::test]
    async fn waiting_for_an_agreed_time_ends_with_an_answer_or_the_deadline() {
        let c = ClusterClock::new(WallClock::system());
        c.retain(&[2, 3]);
        assert_eq!(c.wait_agreed(Duration::from_millis(20)).await, None);
        let answering = c.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            let now = Instant::now();
            answering.record(2, WallClock::system().now_ms(), now, now);
        });
        let t = c.wait_agreed(Duration::from_secs(10)).await;
        assert!(t.is_some_and(|t| t.abs_diff(WallClock::system().now_ms()) < 1_000));
    }

    #[test]
    fn an_estimate_is_placed_at_the_middle_of_its_round_trip() {
        let sent = Instant::now();
        let c = ClusterClock::new(WallClock::system());
        c.retain(&[2, 3]);
        assert!(c.record(2, T, sent, sent + Duration::from_millis(40)));
        assert!(c.record(3, T, sent, sent + Duration::from_millis(40)));
        assert_eq!(c.now_at(sent + Duration::from_millis(40), 0), T + 20);
    }

    #[test]
    fn a_shifted_wall_clock_is_shifted() {
        let sys = WallClock::system().now_ms();
        let ahead = WallClock::shifted(600_000).now_ms();
        assert!(ahead >= sys + 600_000 && ahead < sys + 610_000);
    }
}
