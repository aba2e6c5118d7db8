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
/// Clients whose wrong guesses are remembered at once; past it the one that guessed longest
/// ago is forgotten.
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

/// The key a client's guesses are counted under: its IPv4 address, or its IPv6 /64.
pub use sluice_raft::listener::address_key as client_key;

/// The operator tokens and the record of wrong guesses.
#[derive(Debug)]
pub struct OperatorAuth {
    token: String,
    metrics_token: Option<String>,
    /// Tokens of the backends that call the gRPC `Visitor` service.
    backend_tokens: Vec<String>,
    record: Mutex<Record>,
    /// Wrong tokens so far.
    pub failures_total: AtomicU64,
    /// Requests refused unchecked because their client was backing off.
    pub throttled_total: AtomicU64,
}

/// Clients' wrong guesses, with an index by when each last guessed (to forget the oldest in
/// O(log n) when full), and the node's wrong guesses in the current second.
#[derive(Debug)]
struct Record {
    clients: HashMap<IpAddr, Failures>,
    by_last: std::collections::BTreeSet<(Instant, IpAddr)>,
    /// Wrong guesses in the current second: (second, count).
    global: (Instant, u64),
}

/// What may be done with a token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Everything an operator does.
    Operator,
    /// Read `/metrics` only: the operator token or the scraper's.
    Metrics,
    /// Call the gRPC `Visitor` service as a backend: a backend token or the operator's.
    Backend,
}

impl OperatorAuth {
    /// Checks against the operator `token` and, for `/metrics`, `metrics_token`.
    pub fn new(token: String, metrics_token: Option<String>) -> Self {
        Self {
            token,
            metrics_token,
            backend_tokens: Vec::new(),
            record: Mutex::new(Record {
                clients: HashMap::new(),
                by_last: Default::default(),
                global: (Instant::now(), 0),
            }),
            failures_total: AtomicU64::default(),
            throttled_total: AtomicU64::default(),
        }
    }

    /// Also accepts `tokens` from backends calling the gRPC `Visitor` service.
    pub fn with_backend_tokens(mut self, tokens: Vec<String>) -> Self {
        self.backend_tokens = tokens;
        self
    }

    /// Whether backends must present a token to call the gRPC `Visitor` service.
    pub fn backends_need_tokens(&self) -> bool {
        !self.backend_tokens.is_empty()
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
        // The whole check under one lock (the comparison takes well under a microsecond), so
        // that guesses sent at once cannot all pass before the first failure is recorded.
        let mut record = self.record.lock().expect("auth lock");
        if let Some(f) = record.clients.get(&key).filter(|f| f.shut_until > now) {
            self.throttled_total.fetch_add(1, Ordering::Relaxed);
            return Err(throttled(f.shut_until - now));
        }
        let matches =
            |t: &str| presented.is_some_and(|p| bool::from(p.as_bytes().ct_eq(t.as_bytes())));
        let ok = matches(&self.token)
            || match scope {
                Scope::Operator => false,
                Scope::Metrics => self.metrics_token.as_deref().is_some_and(matches),
                // Every listed token is compared, so that the time taken does not say which.
                Scope::Backend => self
                    .backend_tokens
                    .iter()
                    .fold(false, |any, t| matches(t) | any),
            };
        if ok {
            if let Some(f) = record.clients.remove(&key) {
                record.by_last.remove(&(f.last, key));
            }
            return Ok(());
        }
        self.failures_total.fetch_add(1, Ordering::Relaxed);
        record.failed(key, now);
        Err(ApiError::unauthorized())
    }

    /// How long `key` is still shut out, if it is.
    #[cfg(test)]
    fn shut_out(&self, key: IpAddr, now: Instant) -> Option<Duration> {
        let record = self.record.lock().expect("auth lock");
        let f = record.clients.get(&client_key(key))?;
        (f.shut_until > now).then(|| f.shut_until - now)
    }

    /// Clients with a record of wrong guesses now.
    pub fn clients_tracked(&self) -> usize {
        self.record.lock().expect("auth lock").clients.len()
    }
}

impl Record {
    fn failed(&mut self, key: IpAddr, now: Instant) {
        if now.saturating_duration_since(self.global.0) >= Duration::from_secs(1) {
            self.global = (now, 0);
        }
        self.global.1 += 1;
        let busy = self.global.1 > GLOBAL_FAILURES_PER_SECOND_MAX;
        let mut f = match self.clients.remove(&key) {
            Some(f) => {
                self.by_last.remove(&(f.last, key));
                f
            }
            None => {
                // Full: forget the client that guessed longest ago.
                while self.clients.len() >= CLIENTS_TRACKED_MAX {
                    let Some((_, oldest)) = self.by_last.pop_first() else {
                        break;
                    };
                    self.clients.remove(&oldest);
                }
                Failures {
                    count: 0,
                    last: now,
                    shut_until: now,
                }
            }
        };
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
        self.by_last.insert((f.last, key));
        self.clients.insert(key, f);
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
    fn a_full_record_forgets_the_client_that_guessed_longest_ago() {
        let a = OperatorAuth::new(TOKEN.into(), None);
        let t = Instant::now();
        let addr = |i: usize| IpAddr::from([10, (i >> 16) as u8, (i >> 8) as u8, i as u8]);
        for i in 0..CLIENTS_TRACKED_MAX {
            // Spread over time, below the node's rate, so that none is shut out.
            let at = t + Duration::from_millis(i as u64 * 100);
            let _ = a.check_at(addr(i), Some("g"), Scope::Operator, at);
        }
        assert_eq!(a.clients_tracked(), CLIENTS_TRACKED_MAX);
        let later = t + Duration::from_secs(20_000);
        let _ = a.check_at(addr(CLIENTS_TRACKED_MAX), Some("g"), Scope::Operator, later);
        assert_eq!(a.clients_tracked(), CLIENTS_TRACKED_MAX);
        let record = a.record.lock().unwrap();
        assert!(
            !record.clients.contains_key(&addr(0)),
            "the oldest is forgotten"
        );
        assert!(record.clients.contains_key(&addr(1)));
        assert_eq!(record.by_last.len(), record.clients.len());
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
