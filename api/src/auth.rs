//! Operator authentication: the token check every operator surface shares (HTTP bearer, the
//! dashboard's sign-in, gRPC `Admin` and `Cluster`, `/metrics`), and the backoff that makes
//! guessing slow.
//!
//! Wrong guesses are counted per client (an IPv4 address, or an IPv6 /64, which one client
//! usually holds whole) and in all. A client's first [`FREE_FAILURES`] wrong guesses cost
//! nothing; each one after that shuts it out for twice as long as the one before, from
//! [`BACKOFF_FIRST`] up to [`BACKOFF_MAX`]. While the whole node sees more than
//! [`GLOBAL_FAILURES_PER_SECOND_MAX`] wrong guesses a second (many addresses guessing at once),
//! every client's first wrong guess already starts its backoff. A client that is shut out is
//! answered 429 with `Retry-After`, without its token being compared at all, so that answers
//! teach nothing during the backoff. A right token clears the client's count. Operators with
//! the token never guess wrong, so the backoff never reaches them.

use crate::error::ApiError;
use axum::http::StatusCode;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use subtle::ConstantTimeEq;

/// Wrong guesses a client may make before its backoff starts.
pub const FREE_FAILURES: u32 = 5;
/// The first backoff.
pub const BACKOFF_FIRST: Duration = Duration::from_secs(1);
/// The longest backoff.
pub const BACKOFF_MAX: Duration = Duration::from_secs(300);
/// Wrong guesses per second over the whole node past which every client backs off at once.
pub const GLOBAL_FAILURES_PER_SECOND_MAX: u64 = 50;
/// Clients whose wrong guesses are remembered at once; past it the ones whose backoff has
/// ended are forgotten first, then the oldest.
pub const CLIENTS_TRACKED_MAX: usize = 100_000;
/// How long a client's count is kept after its last wrong guess.
const FORGET_AFTER: Duration = Duration::from_secs(3_600);

/// One client's wrong guesses.
#[derive(Clone, Copy, Debug)]
struct Failures {
    count: u32,
    last: Instant,
    shut_until: Instant,
}

/// The operator tokens and the record of wrong guesses.
#[derive(Debug)]
pub struct OperatorAuth {
    token: String,
    metrics_token: Option<String>,
    clients: Mutex<HashMap<IpAddr, Failures>>,
    /// Wrong guesses in the current second: (second, count).
    global: Mutex<(Instant, u64)>,
    /// Wrong tokens so far.
    pub failures_total: AtomicU64,
    /// Requests refused unchecked because their client was backing off.
    pub throttled_total: AtomicU64,
}

/// What may be done with a token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Everything an operator does.
    Operator,
    /// Read `/metrics` only: the operator token or the scraper's.
    Metrics,
}

/// The key a client's guesses are counted under: its IPv4 address, or its IPv6 /64.
pub fn client_key(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => IpAddr::V6((u128::from(v6) & !((1u128 << 64) - 1)).into()),
        v4 => v4,
    }
}

impl OperatorAuth {
    /// Checks against the operator `token` and, for `/metrics`, `metrics_token`.
    pub fn new(token: String, metrics_token: Option<String>) -> Self {
        Self {
            token,
            metrics_token,
            clients: Mutex::default(),
            global: Mutex::new((Instant::now(), 0)),
            failures_total: AtomicU64::default(),
            throttled_total: AtomicU64::default(),
        }
    }

    /// The operator token (the dashboard signs its sessions with it).
    pub fn token(&self) -> &str {
        &self.token
    }

    /// Checks `presented` from `client` for `scope`: `Ok` for a right token; 401 for a wrong
    /// or missing one (counted); 429 with `Retry-After`, unchecked, while the client backs off.
    pub fn check(
        &self,
        client: IpAddr,
        presented: Option<&str>,
        scope: Scope,
    ) -> Result<(), ApiError> {
        self.check_at(client, presented, scope, Instant::now())
    }

    fn check_at(
        &self,
        client: IpAddr,
        presented: Option<&str>,
        scope: Scope,
        now: Instant,
    ) -> Result<(), ApiError> {
        let key = client_key(client);
        if let Some(wait) = self.shut_out(key, now) {
            self.throttled_total.fetch_add(1, Ordering::Relaxed);
            return Err(throttled(wait));
        }
        let matches =
            |t: &str| presented.is_some_and(|p| bool::from(p.as_bytes().ct_eq(t.as_bytes())));
        let ok = matches(&self.token)
            || (scope == Scope::Metrics && self.metrics_token.as_deref().is_some_and(matches));
        if ok {
            if presented.is_some() {
                self.clients.lock().expect("auth lock").remove(&key);
            }
            return Ok(());
        }
        self.failed(key, now);
        Err(ApiError::unauthorized())
    }

    /// How long `key` is still shut out, if it is.
    fn shut_out(&self, key: IpAddr, now: Instant) -> Option<Duration> {
        let clients = self.clients.lock().expect("auth lock");
        let f = clients.get(&key)?;
        (f.shut_until > now).then(|| f.shut_until - now)
    }

    fn failed(&self, key: IpAddr, now: Instant) {
        self.failures_total.fetch_add(1, Ordering::Relaxed);
        let busy = {
            let mut g = self.global.lock().expect("auth lock");
            if now.saturating_duration_since(g.0) >= Duration::from_secs(1) {
                *g = (now, 0);
            }
            g.1 += 1;
            g.1 > GLOBAL_FAILURES_PER_SECOND_MAX
        };
        let mut clients = self.clients.lock().expect("auth lock");
        if clients.len() >= CLIENTS_TRACKED_MAX && !clients.contains_key(&key) {
            clients.retain(|_, f| {
                f.shut_until > now && now.saturating_duration_since(f.last) < FORGET_AFTER
            });
            if clients.len() >= CLIENTS_TRACKED_MAX {
                // Still full of clients backing off: forget the one that guessed longest ago.
                if let Some(oldest) = clients.iter().min_by_key(|(_, f)| f.last).map(|(k, _)| *k) {
                    clients.remove(&oldest);
                }
            }
        }
        let f = clients.entry(key).or_insert(Failures {
            count: 0,
            last: now,
            shut_until: now,
        });
        if now.saturating_duration_since(f.last) >= FORGET_AFTER {
            f.count = 0;
        }
        f.count += 1;
        f.last = now;
        let free = if busy { 0 } else { FREE_FAILURES };
        if f.count > free {
            let doublings = (f.count - free - 1).min(16);
            let backoff = BACKOFF_FIRST
                .saturating_mul(1 << doublings)
                .min(BACKOFF_MAX);
            f.shut_until = now + backoff;
            if f.count == free + 1 {
                tracing::warn!(client = %key, "repeated wrong operator tokens: backing off");
            }
        }
    }

    /// Clients with a record of wrong guesses now.
    pub fn clients_tracked(&self) -> usize {
        self.clients.lock().expect("auth lock").len()
    }
}

fn throttled(wait: Duration) -> ApiError {
    ApiError::new(
        StatusCode::TOO_MANY_REQUESTS,
        "auth_throttled",
        "too many wrong operator tokens from this client; wait before trying again",
    )
    .retry(wait.as_secs().max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "the-right-operator-token-of-32-chars";

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn wrong_guesses_back_off_and_a_right_token_is_never_slowed() {
        let a = OperatorAuth::new(TOKEN.into(), Some("scraper-token-16ch".into()));
        let t = Instant::now();
        let c = ip("203.0.113.5");
        for _ in 0..FREE_FAILURES {
            let e = a
                .check_at(c, Some("guess"), Scope::Operator, t)
                .unwrap_err();
            assert_eq!(e.status, StatusCode::UNAUTHORIZED);
        }
        // The next wrong guess starts the backoff; during it even the right token is not
        // looked at (the answer would tell a guesser it was right).
        assert_eq!(
            a.check_at(c, Some("guess"), Scope::Operator, t)
                .unwrap_err()
                .status,
            StatusCode::UNAUTHORIZED
        );
        let e = a.check_at(c, Some(TOKEN), Scope::Operator, t).unwrap_err();
        assert_eq!(
            (e.status, e.code),
            (StatusCode::TOO_MANY_REQUESTS, "auth_throttled")
        );
        assert_eq!(e.retry_after, Some(1));
        // After it, one more wrong guess doubles it.
        let t1 = t + BACKOFF_FIRST;
        assert!(a.check_at(c, Some("guess"), Scope::Operator, t1).is_err());
        let e = a.check_at(c, Some(TOKEN), Scope::Operator, t1).unwrap_err();
        assert_eq!(e.retry_after, Some(2));
        // Another address, and the operator's own, are not affected.
        assert!(a
            .check_at(ip("198.51.100.1"), Some(TOKEN), Scope::Operator, t1)
            .is_ok());
        // A right token after the backoff clears the count.
        let t2 = t1 + Duration::from_secs(2);
        assert!(a.check_at(c, Some(TOKEN), Scope::Operator, t2).is_ok());
        assert_eq!(a.clients_tracked(), 0);
        // The scraper's token reads metrics and nothing else.
        assert!(a
            .check_at(c, Some("scraper-token-16ch"), Scope::Metrics, t2)
            .is_ok());
        assert!(a
            .check_at(c, Some("scraper-token-16ch"), Scope::Operator, t2)
            .is_err());
        assert_eq!(
            a.failures_total.load(Ordering::Relaxed),
            FREE_FAILURES as u64 + 3
        );
        assert_eq!(a.throttled_total.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn many_addresses_guessing_at_once_each_back_off_at_their_first_guess() {
        let a = OperatorAuth::new(TOKEN.into(), None);
        let t = Instant::now();
        for i in 0..GLOBAL_FAILURES_PER_SECOND_MAX {
            let c = IpAddr::from([10, 0, (i / 256) as u8, i as u8]);
            assert_eq!(
                a.check_at(c, Some("g"), Scope::Operator, t)
                    .unwrap_err()
                    .status,
                StatusCode::UNAUTHORIZED
            );
            assert!(
                a.shut_out(c, t).is_none(),
                "below the node's rate: free guesses"
            );
        }
        let c = ip("192.0.2.77");
        assert!(a.check_at(c, Some("g"), Scope::Operator, t).is_err());
        assert!(
            a.shut_out(c, t).is_some(),
            "past it, the first wrong guess shuts out"
        );
    }

    #[test]
    fn an_ipv6_client_is_counted_by_its_64() {
        let a = OperatorAuth::new(TOKEN.into(), None);
        let t = Instant::now();
        for i in 0..=FREE_FAILURES {
            let c = ip(&format!("2001:db8:1:2::{:x}", i + 1));
            let _ = a.check_at(c, Some("g"), Scope::Operator, t);
        }
        let e = a
            .check_at(ip("2001:db8:1:2::ffff"), Some(TOKEN), Scope::Operator, t)
            .unwrap_err();
        assert_eq!(e.status, StatusCode::TOO_MANY_REQUESTS);
        assert!(a
            .check_at(ip("2001:db8:1:3::1"), Some(TOKEN), Scope::Operator, t)
            .is_ok());
    }
}
