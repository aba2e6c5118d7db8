//! How often one client may ask: a token bucket per client (an IPv4 address, or an IPv6 /64,
//! which one client holds all of), for the visitor endpoints of both public APIs.

use std::net::IpAddr;
use std::num::NonZeroU32;
use std::time::Duration;

/// The buckets of every client seen recently.
pub type ClientLimiter = governor::DefaultKeyedRateLimiter<IpAddr>;

/// Buckets of `per_second` requests a second, `burst` at once (each at least 1).
pub fn client_limiter(per_second: u32, burst: u32) -> ClientLimiter {
    let rate = NonZeroU32::new(per_second.max(1)).expect("non-zero");
    let burst = NonZeroU32::new(burst.max(1)).expect("non-zero");
    governor::RateLimiter::keyed(governor::Quota::per_second(rate).allow_burst(burst))
}

/// Counts one request of `client`; past its rate, how long until the next one is allowed.
pub fn check(limiter: &ClientLimiter, client: IpAddr) -> Result<(), Duration> {
    let key = crate::listener::address_key(client);
    limiter.check_key(&key).map_err(|not_until| {
        not_until.wait_time_from(governor::clock::Clock::now(
            &governor::clock::DefaultClock::default(),
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_past_its_burst_waits_and_an_ipv6_client_is_its_64() {
        let l = client_limiter(1, 2);
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        assert!(check(&l, a).is_ok() && check(&l, a).is_ok());
        let wait = check(&l, a).unwrap_err();
        assert!(
            wait > Duration::ZERO && wait <= Duration::from_secs(1),
            "{wait:?}"
        );
        assert!(check(&l, "192.0.2.2".parse().unwrap()).is_ok());
        let (x, y): (IpAddr, IpAddr) = (
            "2001:db8::1".parse().unwrap(),
            "2001:db8::ffff".parse().unwrap(),
        );
        assert!(check(&l, x).is_ok() && check(&l, y).is_ok());
        assert!(check(&l, x).is_err());
    }
}
