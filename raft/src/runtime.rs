//! The async runtime openraft runs on: openraft's own tokio runtime, except for its random
//! numbers (election timeouts, the first wait of a tick), which come from a generator kept per
//! thread that a simulation can seed.
//!
//! openraft's tokio runtime draws them from the operating system, so two runs of one seeded
//! whole-cluster schedule (`cluster-sim/`) would elect at different times however exactly the
//! network and clock were replayed. Here each thread starts from a seed of the operating
//! system's too (so nodes of a real cluster still draw independent timeouts), unless
//! [`seed_this_thread`] gave it one: every node of a simulated schedule runs on the schedule's
//! thread, in an order the simulation fixes, so their draws follow from the schedule's seed.

use openraft::rt::{AsyncRuntime, OptionalSend};
use openraft_rt_tokio::TokioRuntime;
use rand_openraft::rngs::SmallRng;
use rand_openraft::SeedableRng;
use std::cell::Cell;
use std::future::Future;
use std::time::Duration;

thread_local! {
    /// The state the next generator is seeded from (`None`: not seeded yet).
    static STATE: Cell<Option<u64>> = const { Cell::new(None) };
}

/// Seeds this thread's generator: the draws openraft makes on this thread from now on follow
/// from `seed` alone.
pub fn seed_this_thread(seed: u64) {
    STATE.with(|s| s.set(Some(seed)));
}

/// The next seed of this thread's sequence (SplitMix64 over the thread's state).
fn next_seed() -> u64 {
    STATE.with(|s| {
        let state = s
            .get()
            .unwrap_or_else(|| getrandom::u64().unwrap_or_else(|_| os_fallback()));
        let next = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        s.set(Some(next));
        let z = (next ^ (next >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        let z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    })
}

/// A seed from the standard library's per-process hashing keys, should the operating system's
/// generator fail.
fn os_fallback() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(0);
    h.finish()
}

/// openraft's tokio runtime with random numbers from [`seed_this_thread`]'s generator.
#[derive(Debug)]
pub struct RaftRuntime(TokioRuntime);

impl AsyncRuntime for RaftRuntime {
    type JoinError = <TokioRuntime as AsyncRuntime>::JoinError;
    type JoinHandle<T: OptionalSend + 'static> = <TokioRuntime as AsyncRuntime>::JoinHandle<T>;
    type Sleep = <TokioRuntime as AsyncRuntime>::Sleep;
    type Instant = <TokioRuntime as AsyncRuntime>::Instant;
    type TimeoutError = <TokioRuntime as AsyncRuntime>::TimeoutError;
    type Timeout<R, T: Future<Output = R> + OptionalSend> =
        <TokioRuntime as AsyncRuntime>::Timeout<R, T>;
    type ThreadLocalRng = SmallRng;

    fn spawn<T>(future: T) -> Self::JoinHandle<T::Output>
    where
        T: Future + OptionalSend + 'static,
        T::Output: OptionalSend + 'static,
    {
        TokioRuntime::spawn(future)
    }

    fn sleep(duration: Duration) -> Self::Sleep {
        TokioRuntime::sleep(duration)
    }

    fn sleep_until(deadline: Self::Instant) -> Self::Sleep {
        TokioRuntime::sleep_until(deadline)
    }

    fn timeout<R, F: Future<Output = R> + OptionalSend>(
        duration: Duration,
        future: F,
    ) -> Self::Timeout<R, F> {
        TokioRuntime::timeout(duration, future)
    }

    fn timeout_at<R, F: Future<Output = R> + OptionalSend>(
        deadline: Self::Instant,
        future: F,
    ) -> Self::Timeout<R, F> {
        TokioRuntime::timeout_at(deadline, future)
    }

    fn is_panic(join_error: &Self::JoinError) -> bool {
        TokioRuntime::is_panic(join_error)
    }

    fn thread_rng() -> Self::ThreadLocalRng {
        SmallRng::seed_from_u64(next_seed())
    }

    type Mpsc = <TokioRuntime as AsyncRuntime>::Mpsc;
    type Watch = <TokioRuntime as AsyncRuntime>::Watch;
    type Oneshot = <TokioRuntime as AsyncRuntime>::Oneshot;
    type Mutex<T: OptionalSend + 'static> = <TokioRuntime as AsyncRuntime>::Mutex<T>;

    fn new(threads: usize) -> Self {
        Self(TokioRuntime::new(threads))
    }

    fn block_on<F, T>(&mut self, future: F) -> T
    where
        F: Future<Output = T>,
    {
        self.0.block_on(future)
    }
}

/// Runs blocking work (file writes, fsyncs) off the runtime's workers: on a blocking thread on a
/// multi-thread runtime (the product's), in place on a current-thread runtime (a test's, or a
/// simulated host's, where a thread finishing in real time would make what happens at which
/// simulated moment depend on the machine's speed).
pub(crate) async fn blocking<F, T>(f: F) -> std::io::Result<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    match tokio::runtime::Handle::current().runtime_flavor() {
        tokio::runtime::RuntimeFlavor::CurrentThread => Ok(f()),
        _ => tokio::task::spawn_blocking(f)
            .await
            .map_err(std::io::Error::other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_openraft::RngExt;

    fn draws() -> Vec<u64> {
        (0..8)
            .map(|_| RaftRuntime::thread_rng().random_range(150..300))
            .collect()
    }

    #[test]
    fn a_seeded_thread_draws_the_same_numbers_every_time() {
        let (a, b) = (
            std::thread::spawn(|| {
                seed_this_thread(7);
                draws()
            }),
            std::thread::spawn(|| {
                seed_this_thread(7);
                draws()
            }),
        );
        let (a, b) = (a.join().unwrap(), b.join().unwrap());
        assert_eq!(a, b);
        assert!(
            a.iter().any(|&d| d != a[0]),
            "one number drawn over and over: {a:?}"
        );
        let other = std::thread::spawn(|| {
            seed_this_thread(8);
            draws()
        });
        assert_ne!(a, other.join().unwrap());
    }

    #[test]
    fn unseeded_threads_draw_independently() {
        let runs: Vec<Vec<u64>> = (0..2)
            .map(|_| std::thread::spawn(draws).join().unwrap())
            .collect();
        assert_ne!(runs[0], runs[1]);
    }
}
