//! Who the client is: its address, as the connection's peer or, behind a trusted reverse proxy,
//! as that proxy reports it in `X-Forwarded-For`.
//!
//! `X-Forwarded-For` is a list each proxy appends the address it received the request from to.
//! Every entry left of the last one a trusted proxy added came with the request and could be
//! anything, so the list is read from its right end: past the hops that are trusted proxies
//! themselves, to the first that is not. That is the client. The header is read at all only when
//! the connection's peer is a trusted proxy; from anyone else it is ignored.

use std::net::IpAddr;
use std::str::FromStr;

/// Most entries of `X-Forwarded-For` read (from the right); a longer chain is cut there.
pub const FORWARDED_HOPS_MAX: usize = 16;
/// Most trusted-proxy entries a configuration may list.
pub const TRUSTED_PROXIES_MAX: usize = 256;

/// An address block: an address and how many leading bits of it are fixed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cidr {
    net: IpAddr,
    prefix: u8,
}

impl FromStr for Cidr {
    type Err = String;

    /// `10.0.0.0/8`, `fd00::/8`, or a single address (`127.0.0.1`, `::1`).
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("{s:?} is not an address or CIDR block");
        let (addr, prefix) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p.parse::<u8>().map_err(|_| bad())?)),
            None => (s, None),
        };
        let net: IpAddr = addr.trim().parse().map_err(|_| bad())?;
        let bits = if net.is_ipv4() { 32 } else { 128 };
        let prefix = prefix.unwrap_or(bits);
        if prefix > bits {
            return Err(bad());
        }
        Ok(Cidr {
            net: net.to_canonical(),
            prefix,
        })
    }
}

impl Cidr {
    /// Whether `ip` is inside the block (an IPv4-mapped IPv6 address counts as IPv4).
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.net, ip.to_canonical()) {
            (IpAddr::V4(n), IpAddr::V4(a)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(n) & mask == u32::from(a) & mask
            }
            (IpAddr::V6(n), IpAddr::V6(a)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(n) & mask == u128::from(a) & mask
            }
            _ => false,
        }
    }
}

/// The reverse proxies whose `X-Forwarded-For` is believed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TrustedProxies(Vec<Cidr>);

impl TrustedProxies {
    /// Parses a configuration's list.
    pub fn parse(entries: &[String]) -> Result<Self, String> {
        if entries.len() > TRUSTED_PROXIES_MAX {
            return Err(format!(
                "trusted_proxies may list at most {TRUSTED_PROXIES_MAX} entries"
            ));
        }
        entries
            .iter()
            .map(|e| e.parse().map_err(|m| format!("trusted_proxies: {m}")))
            .collect::<Result<Vec<_>, _>>()
            .map(Self)
    }

    /// Whether `ip` is a trusted proxy.
    pub fn trusts(&self, ip: IpAddr) -> bool {
        self.0.iter().any(|c| c.contains(ip))
    }

    /// Whether any proxy is trusted.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The client's address, for a request from `peer` carrying the `X-Forwarded-For` values
    /// `forwarded` (every such header, in order, as bytes: one hop that is not text must not
    /// make the whole header unreadable).
    pub fn client<'a>(&self, peer: IpAddr, forwarded: impl Iterator<Item = &'a [u8]>) -> IpAddr {
        let peer = peer.to_canonical();
        if !self.trusts(peer) {
            return peer;
        }
        let hops: Vec<&[u8]> = forwarded.flat_map(|v| v.split(|b| *b == b',')).collect();
        let mut client = peer;
        for hop in hops.iter().rev().take(FORWARDED_HOPS_MAX) {
            // Something that is not an address ends the walk at the last hop that was one.
            let Some(ip) = std::str::from_utf8(hop)
                .ok()
                .and_then(|h| parse_hop(h.trim()))
            else {
                break;
            };
            client = ip;
            if !self.trusts(ip) {
                break;
            }
        }
        client
    }
}

/// An `X-Forwarded-For` entry: an address, perhaps with a port (`1.2.3.4:5`, `[::1]:5`).
fn parse_hop(s: &str) -> Option<IpAddr> {
    s.parse::<IpAddr>()
        .ok()
        .or_else(|| s.parse::<std::net::SocketAddr>().ok().map(|a| a.ip()))
        .map(|ip| ip.to_canonical())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn blocks_contain_what_they_should() {
        let c: Cidr = "10.1.0.0/16".parse().unwrap();
        assert!(c.contains(ip("10.1.200.3")));
        assert!(!c.contains(ip("10.2.0.1")));
        assert!(c.contains(ip("::ffff:10.1.0.9")), "IPv4-mapped");
        let one: Cidr = "::1".parse().unwrap();
        assert!(one.contains(ip("::1")) && !one.contains(ip("::2")));
        let all: Cidr = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains(ip("8.8.8.8")) && !all.contains(ip("::1")));
        let v6: Cidr = "fd00::/8".parse().unwrap();
        assert!(v6.contains(ip("fd12::1")) && !v6.contains(ip("fe80::1")));
        for bad in ["10.0.0.0/33", "nonsense", "::/129", "1.2.3.4/x", ""] {
            assert!(bad.parse::<Cidr>().is_err(), "{bad}");
        }
    }

    #[test]
    fn the_header_is_believed_only_from_a_trusted_peer_and_read_from_the_right() {
        let t = TrustedProxies::parse(&["127.0.0.1".into(), "10.0.0.0/8".into()]).unwrap();
        let xff = |v: &'static str| std::iter::once(v.as_bytes());
        // An untrusted peer's header is ignored: it could say anything.
        assert_eq!(
            t.client(ip("203.0.113.9"), xff("1.1.1.1")),
            ip("203.0.113.9")
        );
        // Behind one trusted proxy: the address it appended.
        assert_eq!(
            t.client(ip("127.0.0.1"), xff("6.6.6.6, 203.0.113.9")),
            ip("203.0.113.9"),
            "a spoofed entry left of the proxy's own is not read"
        );
        // Behind two trusted proxies: past the inner one's hop.
        assert_eq!(
            t.client(ip("127.0.0.1"), xff("6.6.6.6, 203.0.113.9, 10.0.0.7")),
            ip("203.0.113.9")
        );
        // Several headers are one list, in order.
        assert_eq!(
            t.client(
                ip("127.0.0.1"),
                [&b"6.6.6.6"[..], b"203.0.113.9"].into_iter()
            ),
            ip("203.0.113.9")
        );
        // A hop that is not text, left of the proxy's own, changes nothing.
        assert_eq!(
            t.client(
                ip("127.0.0.1"),
                std::iter::once(&b"6.6.\xff.6, 203.0.113.9"[..])
            ),
            ip("203.0.113.9")
        );
        // Nothing believable: the proxy itself.
        assert_eq!(
            t.client(ip("127.0.0.1"), std::iter::empty()),
            ip("127.0.0.1")
        );
        assert_eq!(t.client(ip("127.0.0.1"), xff("garbage")), ip("127.0.0.1"));
        // Ports are tolerated.
        assert_eq!(
            t.client(ip("127.0.0.1"), xff("[2001:db8::1]:443")),
            ip("2001:db8::1")
        );
        // Nobody trusted: the peer, always.
        assert_eq!(
            TrustedProxies::default().client(ip("127.0.0.1"), xff("1.1.1.1")),
            ip("127.0.0.1")
        );
        assert!(TrustedProxies::parse(&["bad".into()]).is_err());
    }
}
