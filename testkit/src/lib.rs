//! What Sluice's test harnesses share (the API's process clusters, the Raft crate's in-process
//! ones, the load generator's, the fault suite's): loopback ports nobody else will take, waiting
//! on a condition with a deadline instead of sleeping a guessed time, in [`node`] how a
//! `sluice serve` process is configured, started and found ready, and in [`crowd`] visitors
//! that behave as waiting pages do, by the tens of thousands (solving proof-of-work challenges
//! with [`pow`]).

pub mod crowd;
pub mod node;
pub mod pow;

use std::future::Future;
use std::time::Duration;
use tokio::time::Instant;

/// A loopback port that is free now and was never handed out before by this process. Ports come
/// from below the kernel's ephemeral range (32768 and up), so an outgoing connection cannot take
/// one before the node binds it; each process starts at its own offset.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    loop {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        assert!(n < 20_000, "no free loopback port");
        let port = 10_000 + (std::process::id().wrapping_mul(7_919).wrapping_add(n) % 20_000);
        if std::net::TcpListener::bind(("127.0.0.1", port as u16)).is_ok() {
            return port as u16;
        }
    }
}

/// Waits for `cond` to hold, polling every 25 ms, up to `timeout`; panics naming `what`
/// otherwise. A condition that reads a visitor's status through the API counts against the
/// visitor rate limit (20/s, a burst of 40, by default): at 40 polls a second it runs out after
/// about two seconds.
pub async fn wait_for<F, Fut>(what: &str, timeout: Duration, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if cond().await {
            return;
        }
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_never_handed_out_twice_and_are_free() {
        // Each port is bound the moment it is handed out, and held: a port handed out twice
        // would fail its second bind, and one not free would fail its first. (Bound later, a
        // port can be taken meanwhile by any process of the machine starting a server.)
        let mut held = Vec::new();
        for _ in 0..50 {
            let p = free_port();
            assert!(
                (10_000..30_000).contains(&p),
                "{p} is below the ephemeral range"
            );
            held.push(std::net::TcpListener::bind(("127.0.0.1", p)).expect("free when handed out"));
        }
        let ports: std::collections::BTreeSet<u16> = held
            .iter()
            .map(|l| l.local_addr().unwrap().port())
            .collect();
        assert_eq!(ports.len(), 50);
    }

    #[tokio::test(start_paused = true)]
    async fn waiting_ends_when_the_condition_holds_and_panics_past_the_deadline() {
        let polls = std::cell::Cell::new(0);
        wait_for("the third poll", Duration::from_secs(1), || {
            polls.set(polls.get() + 1);
            let n = polls.get();
            async move { n >= 3 }
        })
        .await;
        assert_eq!(polls.get(), 3);
        let never = tokio::spawn(wait_for("never", Duration::from_millis(100), || async {
            false
        }));
        let e = never.await.unwrap_err();
        assert!(e.is_panic());
    }
}
