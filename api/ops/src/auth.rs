//! Operator authentication: the token check every operator surface shares (HTTP bearer, the
//! dashboard's sign-in, gRPC `Admin` and `Cluster`, `/metrics`), and the backoff that makes
//! guessing slow.
//!
//! A token names an operator ([`crate::operators`]): the break-glass `admin_token`, or one of
//! the configured `[[operators]]`, each known by the SHA-256 of its token only. A presented
//! token is hashed and its hash compared with every credential's in constant time. What the
//! operator may then do is its role's, checked by each surface.
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
use crate::error::Kind;
use crate::operators::{parse_hash, token_hash, Operator, OperatorConfig, Role, BREAK_GLASS};
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use subtle::{ConditionallySelectable, ConstantTimeEq};

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
pub use sluice_gate::listener::address_key as client_key;

/// The operator credentials and the record of wrong guesses.
#[derive(Debug)]
pub struct OperatorAuth {
    /// The break-glass `admin_token` (the dashboard also signs its sessions with it).
    token: String,
    /// Every operator credential: the SHA-256 of its token and whom it names, the break-glass
    /// credential first. Hashes are unique.
    credentials: Vec<([u8; 32], Operator)>,
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

/// What a token other than an operator's may be accepted for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Read `/metrics`: any operator's token, or the scraper's.
    Metrics,
    /// Call the gRPC `Visitor` service (or report an origin's answers) as a backend: a backend
    /// token, or the token of an operator whose role is at least `operator`.
    Backend,
}

/// The longest token looked at: a longer one is wrong without being hashed.
pub const TOKEN_BYTES_MAX: usize = 1_024;

impl OperatorAuth {
    /// Checks against the break-glass `token` (named [`BREAK_GLASS`], role `admin`) and, for
    /// `/metrics`, `metrics_token`.
    pub fn new(token: String, metrics_token: Option<String>) -> Self {
        let admin = Operator {
            name: BREAK_GLASS.into(),
            role: Role::Admin,
        };
        Self {
            credentials: vec![(token_hash(&token), admin)],
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

    /// Also accepts the named `operators` (checked as [`crate::operators::validate`] does, and
    /// none with the break-glass token's hash: one token names one operator).
    pub fn with_operators(mut self, operators: &[OperatorConfig]) -> Result<Self, String> {
        crate::operators::validate(operators)?;
        for o in operators {
            let hash = parse_hash(&o.token_sha256).expect("validated");
            if bool::from(hash[..].ct_eq(&self.credentials[0].0[..])) {
                return Err(format!(
                    "operators.{}.token_sha256 is the admin_token's hash: one token names one \
                     operator (give {} a token of its own)",
                    o.name, o.name
                ));
            }
            let op = Operator {
                name: o.name.as_str().into(),
                role: o.role,
            };
            self.credentials.push((hash, op));
        }
        Ok(self)
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

    /// A digest of the operator credentials this node accepts (each one's name, role and
    /// token hash, in name order; the break-glass credential included): the same on every node
    /// configured alike, whatever the order of their `[[operators]]`, so that nodes still
    /// accepting a removed or demoted operator show. 16 hex digits.
    pub fn credentials_digest(&self) -> String {
        use sha2::Digest;
        let mut all: Vec<&([u8; 32], Operator)> = self.credentials.iter().collect();
        all.sort_by(|a, b| a.1.name.cmp(&b.1.name));
        let mut h = sha2::Sha256::new();
        for (hash, op) in all {
            h.update((op.name.len() as u64).to_be_bytes());
            h.update(op.name.as_bytes());
            h.update(op.role.as_str().as_bytes());
            h.update(hash);
        }
        crate::operators::hex(&h.finalize()[..8])
    }

    /// How many operator credentials this node accepts (the break-glass one included).
    pub fn credentials_count(&self) -> usize {
        self.credentials.len()
    }

    /// The break-glass token (the dashboard signs its sessions with it).
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The role of the operator named `name` and the hash of its token (a dashboard session is
    /// bound to it, so that a new token or role ends the sessions of the old), if it is one.
    pub fn credential(&self, name: &str) -> Option<(Role, [u8; 32])> {
        self.credentials
            .iter()
            .find(|(_, o)| &*o.name == name)
            .map(|(h, o)| (o.role, *h))
    }

    /// The operator whose token `client` presents: `Ok` for a right token; 401 for a wrong or
    /// missing one (counted); 429 with `Retry-After`, unchecked, while the client backs off.
    pub fn authenticate(
        &self,
        client: IpAddr,
        presented: Option<&str>,
    ) -> Result<Operator, ApiError> {
        self.authenticate_at(client, presented, Instant::now())
    }

    fn authenticate_at(
        &self,
        client: IpAddr,
        presented: Option<&str>,
        now: Instant,
    ) -> Result<Operator, ApiError> {
        let (op, _) = self.guard_at(client, presented, None, now)?;
        Ok(op.expect("without a scope only an operator's token passes"))
    }

    /// Checks `presented` from `client` for `scope`: `Ok` for a token it accepts; 403 for an
    /// operator's whose role is too small for it; otherwise as [`Self::authenticate`].
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
        match self.guard_at(client, presented, Some(scope), now)? {
            (_, true) => Ok(()),
            (Some(op), false) if scope == Scope::Backend => op.may(Role::Operator),
            _ => Ok(()),
        }
    }

    /// The operator `presented` names, if any: its hash compared with every credential's in
    /// constant time, so that the time taken says nothing of which matched, or how nearly.
    fn find(&self, presented: Option<&str>) -> Option<&Operator> {
        let p = presented.filter(|p| p.len() <= TOKEN_BYTES_MAX)?;
        let h = token_hash(p);
        let mut found = u32::MAX;
        for (i, (hash, _)) in self.credentials.iter().enumerate() {
            found.conditional_assign(&(i as u32), hash[..].ct_eq(&h[..]));
        }
        self.credentials.get(found as usize).map(|(_, o)| o)
    }

    /// The one check every credential goes through: the client's backoff, then the token. `Ok`
    /// with the operator it names and whether `scope` accepts it otherwise (the metrics or a
    /// backend token).
    fn guard_at(
        &self,
        client: IpAddr,
        presented: Option<&str>,
        scope: Option<Scope>,
        now: Instant,
    ) -> Result<(Option<Operator>, bool), ApiError> {
        let key = client_key(client);
        // The whole check under one lock (the comparison takes a few microseconds), so that
        // guesses sent at once cannot all pass before the first failure is recorded.
        let mut record = self.record.lock().expect("auth lock");
        if let Some(f) = record.clients.get(&key).filter(|f| f.shut_until > now) {
            self.throttled_total.fetch_add(1, Ordering::Relaxed);
            return Err(throttled(f.shut_until - now));
        }
        let op = self.find(presented).cloned();
        let matches =
            |t: &str| presented.is_some_and(|p| bool::from(p.as_bytes().ct_eq(t.as_bytes())));
        let other = match scope {
            None => false,
            Some(Scope::Metrics) => self.metrics_token.as_deref().is_some_and(matches),
            // Every listed token is compared, so that the time taken does not say which.
            Some(Scope::Backend) => self
                .backend_tokens
                .iter()
                .fold(false, |any, t| matches(t) | any),
        };
        if op.is_some() || other {
            if let Some(f) = record.clients.remove(&key) {
                record.by_last.remove(&(f.last, key));
            }
            return Ok((op, other));
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
        Kind::TooMany,
        "auth_throttled",
        "too many wrong operator tokens from this client; wait before trying again",
    )
    .retry(wait.as_secs().max(1))
}

/// The credentials of an `Authorization` value in `scheme`, whose name is case-insensitive
/// (RFC 9110 11.1): `bearer x` is `Bearer x`.
pub fn credentials<'a>(value: &'a str, scheme: &str) -> Option<&'a str> {
    let (name, rest) = value.split_once(' ')?;
    name.eq_ignore_ascii_case(scheme).then(|| rest.trim())
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
            let e = a.authenticate_at(c, Some("guess"), t).unwrap_err();
            assert_eq!(e.kind, Kind::Unauthenticated);
        }
        // The next wrong guess starts the backoff; during it even the right token is not
        // looked at (the answer would tell a guesser it was right).
        assert_eq!(
            a.authenticate_at(c, Some("guess"), t).unwrap_err().kind,
            Kind::Unauthenticated
        );
        let e = a.authenticate_at(c, Some(TOKEN), t).unwrap_err();
        assert_eq!((e.kind, e.code), (Kind::TooMany, "auth_throttled"));
        assert_eq!(e.retry_after, Some(1));
        // After it, one more wrong guess doubles it.
        let t1 = t + BACKOFF_FIRST;
        assert!(a.authenticate_at(c, Some("guess"), t1).is_err());
        let e = a.authenticate_at(c, Some(TOKEN), t1).unwrap_err();
        assert_eq!(e.retry_after, Some(2));
        // Another address, and the operator's own, are not affected.
        assert!(a
            .authenticate_at(ip("198.51.100.1"), Some(TOKEN), t1)
            .is_ok());
        // A right token after the backoff clears the count.
        let t2 = t1 + Duration::from_secs(2);
        assert!(a.authenticate_at(c, Some(TOKEN), t2).is_ok());
        assert_eq!(a.clients_tracked(), 0);
        // The scraper's token reads metrics and nothing else.
        assert!(a
            .check_at(c, Some("scraper-token-16ch"), Scope::Metrics, t2)
            .is_ok());
        assert!(a
            .authenticate_at(c, Some("scraper-token-16ch"), t2)
            .is_err());
        assert_eq!(
            a.failures_total.load(Ordering::Relaxed),
            FREE_FAILURES as u64 + 3
        );
        assert_eq!(a.throttled_total.load(Ordering::Relaxed), 2);
    }

    fn named(name: &str, role: Role, token: &str) -> OperatorConfig {
        OperatorConfig {
            name: name.into(),
            role,
            token_sha256: crate::operators::hex(&token_hash(token)),
        }
    }

    #[test]
    fn each_token_names_its_operator_and_every_credential_shares_the_backoff() {
        let alice = "alice-token-0123456789abcdef0123456";
        let viewer = "viewer-token-0123456789abcdef012345";
        let a = OperatorAuth::new(TOKEN.into(), None)
            .with_operators(&[
                named("alice", Role::Operator, alice),
                named("vera", Role::Viewer, viewer),
            ])
            .unwrap()
            .with_backend_tokens(vec!["backend-token-0123456789abcdef012345".into()]);
        let t = Instant::now();
        let c = ip("203.0.113.9");
        let who = |token: &str| {
            a.authenticate_at(c, Some(token), t)
                .map(|o| (o.name, o.role))
        };
        assert_eq!(who(TOKEN).unwrap(), (BREAK_GLASS.into(), Role::Admin));
        assert_eq!(who(alice).unwrap(), ("alice".into(), Role::Operator));
        assert_eq!(who(viewer).unwrap(), ("vera".into(), Role::Viewer));
        // A viewer reads metrics but does not speak for a backend; an operator does.
        assert!(a.check_at(c, Some(viewer), Scope::Metrics, t).is_ok());
        let e = a.check_at(c, Some(viewer), Scope::Backend, t).unwrap_err();
        assert_eq!((e.kind, e.code), (Kind::Forbidden, "forbidden"));
        assert!(a.check_at(c, Some(alice), Scope::Backend, t).is_ok());
        assert!(a
            .check_at(
                c,
                Some("backend-token-0123456789abcdef012345"),
                Scope::Backend,
                t
            )
            .is_ok());
        // Not the hash itself, not a prefix, nothing too long to look at.
        let hash = crate::operators::hex(&token_hash(alice));
        let long = format!("{alice}{}", "x".repeat(TOKEN_BYTES_MAX));
        for wrong in [hash.as_str(), &alice[..alice.len() - 1], long.as_str()] {
            assert_eq!(who(wrong).unwrap_err().kind, Kind::Unauthenticated);
        }
        assert_eq!(
            a.authenticate_at(c, None, t).unwrap_err().kind,
            Kind::Unauthenticated
        );
        // Every credential counts towards one backoff: after the four wrong guesses above, two
        // more shut the client out, whoever's token it then presents.
        assert_eq!(a.failures_total.load(Ordering::Relaxed), 4);
        for _ in 0..2 {
            let _ = who("guess");
        }
        for token in [TOKEN, alice, viewer] {
            assert_eq!(who(token).unwrap_err().code, "auth_throttled");
        }
        assert_eq!(a.credential("alice").map(|(r, _)| r), Some(Role::Operator));
        assert_eq!(a.credential("nobody"), None);
    }

    /// Nodes configured with the same credentials, in any order, show the same digest; a
    /// removed operator, a changed role or a changed token changes it.
    #[test]
    fn the_credentials_digest_shows_nodes_configured_differently() {
        let team = [
            named("alice", Role::Operator, "alice-token-0123456789abcdef0123"),
            named("vera", Role::Viewer, "vera-token-0123456789abcdef01234"),
        ];
        let auth = |ops: &[OperatorConfig]| {
            OperatorAuth::new("the-admin-token-0123456789abcdef".into(), None)
                .with_operators(ops)
                .unwrap()
        };
        let digest = auth(&team).credentials_digest();
        assert_eq!(digest.len(), 16);
        assert_eq!(
            auth(&[team[1].clone(), team[0].clone()]).credentials_digest(),
            digest
        );
        assert_eq!(auth(&team).credentials_count(), 3);
        let mut demoted = team.clone();
        demoted[0].role = Role::Viewer;
        let mut rekeyed = team.clone();
        rekeyed[1] = named("vera", Role::Viewer, "vera-new-token-0123456789abcdef0");
        for other in [auth(&team[..1]), auth(&demoted), auth(&rekeyed)] {
            assert_ne!(other.credentials_digest(), digest);
        }
        let other_admin = OperatorAuth::new("another-admin-token-0123456789ab".into(), None)
            .with_operators(&team)
            .unwrap();
        assert_ne!(other_admin.credentials_digest(), digest);
    }

    #[test]
    fn the_break_glass_token_is_no_named_operators() {
        let e = OperatorAuth::new(TOKEN.into(), None)
            .with_operators(&[named("alice", Role::Viewer, TOKEN)])
            .unwrap_err();
        assert!(e.contains("admin_token's hash"), "{e}");
    }

    #[test]
    fn many_addresses_guessing_at_once_each_back_off_at_their_first_guess() {
        let a = OperatorAuth::new(TOKEN.into(), None);
        let t = Instant::now();
        for i in 0..GLOBAL_FAILURES_PER_SECOND_MAX {
            let c = IpAddr::from([10, 0, (i / 256) as u8, i as u8]);
            assert_eq!(
                a.authenticate_at(c, Some("g"), t).unwrap_err().kind,
                Kind::Unauthenticated
            );
            assert!(
                a.shut_out(c, t).is_none(),
                "below the node's rate: free guesses"
            );
        }
        let c = ip("192.0.2.77");
        assert!(a.authenticate_at(c, Some("g"), t).is_err());
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
            let _ = a.authenticate_at(addr(i), Some("g"), at);
        }
        assert_eq!(a.clients_tracked(), CLIENTS_TRACKED_MAX);
        let later = t + Duration::from_secs(20_000);
        let _ = a.authenticate_at(addr(CLIENTS_TRACKED_MAX), Some("g"), later);
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
            let _ = a.authenticate_at(c, Some("g"), t);
        }
        let e = a
            .authenticate_at(ip("2001:db8:1:2::ffff"), Some(TOKEN), t)
            .unwrap_err();
        assert_eq!(e.kind, Kind::TooMany);
        assert!(a
            .authenticate_at(ip("2001:db8:1:3::1"), Some(TOKEN), t)
            .is_ok());
    }
}
