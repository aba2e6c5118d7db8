//! A room's bypass rules: requests the gate lets through without an admission, and that never
//! take a place or a session (payment providers' callbacks, static assets, health checks,
//! monitoring networks, staff with a bypass token).
//!
//! The rules are replicated room state (part of the room's [`EntryPolicy`](crate::EntryPolicy));
//! the gate evaluates them on any node from its applied state, with no log entry. They are
//! pure functions of the rule and the request, here so that the rule and its checks sit
//! together.
//!
//! A path matches only in its plain form. The gate sees the path the proxy received, which the
//! origin may read differently than a prefix comparison would (`/pay/../checkout`,
//! `/pay;x/../checkout`, `/pay%2F..%2Fcheckout`); so a path with a dot segment, an empty
//! segment, a percent sign, a backslash or a semicolon matches no rule, and its request needs
//! an admission like any other.

use crate::rejection::Rejection;
use serde::{Deserialize, Serialize};
use std::net::IpAddr;

/// Most path rules per room.
pub const BYPASS_PATHS_MAX: usize = 16;
/// Longest path prefix.
pub const BYPASS_PREFIX_LEN_MAX: usize = 128;
/// Most methods one path rule names.
pub const BYPASS_METHODS_MAX: usize = 8;
/// Longest method name.
pub const BYPASS_METHOD_LEN_MAX: usize = 16;
/// Most client networks per room.
pub const BYPASS_NETWORKS_MAX: usize = 32;
/// Shortest IPv4 network prefix a rule may name (a /8: one rule never lets in the internet).
pub const BYPASS_PREFIX_V4_MIN: u8 = 8;
/// Shortest IPv6 network prefix a rule may name.
pub const BYPASS_PREFIX_V6_MIN: u8 = 16;

/// A room's bypass rules. Off (nothing bypasses) until set, except staff tokens, which only an
/// operator can issue.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BypassRule {
    /// Paths (with methods) that need no admission.
    pub paths: Vec<PathRule>,
    /// Client networks that need no admission.
    pub networks: Vec<Network>,
    /// Whether staff bypass tokens issued for the room are accepted.
    pub staff_tokens: bool,
}

impl Default for BypassRule {
    fn default() -> Self {
        Self {
            paths: Vec::new(),
            networks: Vec::new(),
            staff_tokens: true,
        }
    }
}

/// Requests whose path starts with `prefix` (a whole segment at a time: `/pay` matches `/pay`
/// and `/pay/callback`, not `/payments`; `/static/` matches everything under it) and whose
/// method is one of `methods` (all, when empty).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathRule {
    /// The path prefix, in plain form ([`plain_path`]).
    pub prefix: String,
    /// Upper-case method names; empty: every method.
    pub methods: Vec<String>,
}

/// A client network: an address and the number of leading bits that name the network.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Network {
    /// The network's address (no bits set past `prefix`).
    pub addr: IpAddr,
    /// Leading bits.
    pub prefix: u8,
}

/// How a request was let through without an admission.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BypassKind {
    /// Its path (and method).
    Path,
    /// Its client network.
    Network,
    /// A staff bypass token.
    Token,
}

impl BypassKind {
    /// The name metrics and headers use.
    pub fn as_str(self) -> &'static str {
        match self {
            BypassKind::Path => "path",
            BypassKind::Network => "network",
            BypassKind::Token => "token",
        }
    }
}

/// The path of a request target (`/a/b?q`) if it is in plain form: it begins with `/`, holds
/// only letters, digits and `-._~/!$&'()*+,=:@`, and has no empty, `.` or `..` segment (a
/// trailing `/` is allowed), and no `#` anywhere (a browser never sends a fragment; an origin may
/// not cut the path at one). Anything else (`None`) matches no rule.
pub fn plain_path(target: &str) -> Option<&str> {
    if target.contains('#') {
        return None;
    }
    let path = target.split('?').next().unwrap_or("");
    let rest = path.strip_prefix('/')?;
    let allowed = |b: u8| b.is_ascii_alphanumeric() || b"-._~/!$&'()*+,=:@".contains(&b);
    if !path.bytes().all(allowed) {
        return None;
    }
    let segments: Vec<&str> = rest.split('/').collect();
    let last = segments.len() - 1;
    for (i, s) in segments.iter().enumerate() {
        if *s == "." || *s == ".." || (s.is_empty() && i != last) {
            return None;
        }
    }
    Some(path)
}

impl Network {
    /// Whether `ip` is in this network (an IPv4 address written as IPv6, `::ffff:a.b.c.d`,
    /// counts as IPv4).
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip.to_canonical()) {
            (IpAddr::V4(n), IpAddr::V4(a)) => {
                let mask = mask_v4(self.prefix);
                u32::from(n) & mask == u32::from(a) & mask
            }
            (IpAddr::V6(n), IpAddr::V6(a)) => {
                let mask = mask_v6(self.prefix);
                u128::from(n) & mask == u128::from(a) & mask
            }
            _ => false,
        }
    }

    /// Parses `a.b.c.d/n` or `x::/n` (a bare address is the address alone).
    pub fn parse(s: &str) -> Result<Network, String> {
        let (addr, prefix) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let addr: IpAddr = addr
            .parse()
            .map_err(|_| format!("{s:?} is not an address or a network (a.b.c.d/n, x::/n)"))?;
        let bits = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            Some(p) => p
                .parse::<u8>()
                .ok()
                .filter(|&p| p <= bits)
                .ok_or_else(|| format!("{s:?}: the prefix must be 0 to {bits}"))?,
            None => bits,
        };
        Ok(Network { addr, prefix })
    }

    fn validate(&self) -> Result<(), String> {
        let (min, max, host_bits) = match self.addr {
            IpAddr::V4(a) => (
                BYPASS_PREFIX_V4_MIN,
                32,
                u32::from(a) & !mask_v4(self.prefix) != 0,
            ),
            IpAddr::V6(a) => (
                BYPASS_PREFIX_V6_MIN,
                128,
                u128::from(a) & !mask_v6(self.prefix) != 0,
            ),
        };
        if !(min..=max).contains(&self.prefix) {
            return Err(format!("{self}: the prefix must be {min} to {max}"));
        }
        if host_bits {
            return Err(format!(
                "{self} has bits set past its prefix (the network is {})",
                Network {
                    addr: match self.addr {
                        IpAddr::V4(a) => IpAddr::V4((u32::from(a) & mask_v4(self.prefix)).into()),
                        IpAddr::V6(a) => IpAddr::V6((u128::from(a) & mask_v6(self.prefix)).into()),
                    },
                    prefix: self.prefix
                }
            ));
        }
        Ok(())
    }
}

impl std::fmt::Display for Network {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

fn mask_v4(prefix: u8) -> u32 {
    u32::MAX
        .checked_shl(32 - u32::from(prefix.min(32)))
        .unwrap_or(0)
}

fn mask_v6(prefix: u8) -> u128 {
    u128::MAX
        .checked_shl(128 - u32::from(prefix.min(128)))
        .unwrap_or(0)
}

impl PathRule {
    /// Whether a request with this plain path and method matches.
    pub fn matches(&self, path: &str, method: Option<&str>) -> bool {
        let prefix_ok = path == self.prefix
            || (path.starts_with(&self.prefix)
                && (self.prefix.ends_with('/') || path.as_bytes()[self.prefix.len()] == b'/'));
        prefix_ok
            && (self.methods.is_empty()
                || method.is_some_and(|m| self.methods.iter().any(|x| x == m)))
    }
}

impl BypassRule {
    /// Whether any path or network rule is set.
    pub fn is_set(&self) -> bool {
        !self.paths.is_empty() || !self.networks.is_empty()
    }

    /// Which rule lets a request through, if one does. `target` is the request's target as
    /// the proxy received it (path and query), `method` its method, `client` its address.
    pub fn lets_through(
        &self,
        target: Option<&str>,
        method: Option<&str>,
        client: Option<IpAddr>,
    ) -> Option<BypassKind> {
        if let Some(ip) = client {
            if self.networks.iter().any(|n| n.contains(ip)) {
                return Some(BypassKind::Network);
            }
        }
        if self.paths.is_empty() {
            return None;
        }
        let path = plain_path(target?)?;
        self.paths
            .iter()
            .any(|r| r.matches(path, method))
            .then_some(BypassKind::Path)
    }

    /// Checks the rules' counts, lengths and forms.
    pub fn validate(&self) -> Result<(), Rejection> {
        let bad = |field: &str, m: String| Err(Rejection::invalid(field, m));
        if self.paths.len() > BYPASS_PATHS_MAX {
            return bad(
                "bypass.paths",
                format!("at most {BYPASS_PATHS_MAX} path rules"),
            );
        }
        for p in &self.paths {
            if p.prefix.len() > BYPASS_PREFIX_LEN_MAX || plain_path(&p.prefix) != Some(&p.prefix) {
                return bad(
                    "bypass.paths",
                    format!(
                        "{:?}: a path of at most {BYPASS_PREFIX_LEN_MAX} bytes, beginning with '/', of letters, digits and -._~/!$&'()*+,=:@, without empty, '.' or '..' segments",
                        p.prefix
                    ),
                );
            }
            if p.prefix == "/" {
                return bad(
                    "bypass.paths",
                    "\"/\" would let every request through: use the room's passthrough mode".into(),
                );
            }
            if p.methods.len() > BYPASS_METHODS_MAX
                || p.methods.iter().any(|m| {
                    m.is_empty()
                        || m.len() > BYPASS_METHOD_LEN_MAX
                        || !m.bytes().all(|b| b.is_ascii_uppercase())
                })
            {
                return bad(
                    "bypass.paths",
                    format!(
                        "at most {BYPASS_METHODS_MAX} upper-case method names of at most {BYPASS_METHOD_LEN_MAX} letters"
                    ),
                );
            }
        }
        if self.networks.len() > BYPASS_NETWORKS_MAX {
            return bad(
                "bypass.networks",
                format!("at most {BYPASS_NETWORKS_MAX} networks"),
            );
        }
        for n in &self.networks {
            n.validate().or_else(|m| bad("bypass.networks", m))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule() -> BypassRule {
        BypassRule {
            paths: vec![
                PathRule {
                    prefix: "/pay/callback".into(),
                    methods: vec!["POST".into()],
                },
                PathRule {
                    prefix: "/static/".into(),
                    methods: vec![],
                },
            ],
            networks: vec![
                Network::parse("10.20.0.0/16").unwrap(),
                Network::parse("2001:db8::/32").unwrap(),
            ],
            staff_tokens: true,
        }
    }

    #[test]
    fn paths_match_a_whole_segment_at_a_time_and_with_their_methods() {
        let r = rule();
        let through = |t: &str, m: &str| r.lets_through(Some(t), Some(m), None);
        assert_eq!(through("/pay/callback", "POST"), Some(BypassKind::Path));
        assert_eq!(
            through("/pay/callback/42?x=1", "POST"),
            Some(BypassKind::Path)
        );
        assert_eq!(through("/pay/callback", "GET"), None, "method not listed");
        assert_eq!(r.lets_through(Some("/pay/callback"), None, None), None);
        assert_eq!(
            through("/pay/callbacks", "POST"),
            None,
            "not a whole segment"
        );
        assert_eq!(through("/static/app.css", "GET"), Some(BypassKind::Path));
        assert_eq!(through("/static", "GET"), None);
        assert_eq!(through("/checkout", "POST"), None);
        assert_eq!(r.lets_through(None, Some("POST"), None), None);
    }

    /// Paths the origin could read as another path never match.
    #[test]
    fn a_path_that_is_not_plain_matches_nothing() {
        let r = rule();
        for target in [
            "/pay/callback/../../checkout",
            "/pay/callback/./x",
            "/pay/callback/..",
            "/pay/callback%2F..%2F..%2Fcheckout",
            "/pay/callback/%2e%2e/checkout",
            "/pay/callback;x/../checkout",
            "/pay/callback\\..\\checkout",
            "/pay/callback//x",
            "//pay/callback",
            "pay/callback",
            "http://evil/pay/callback",
            "/pay/callback/\u{e9}",
            "",
        ] {
            assert_eq!(
                r.lets_through(Some(target), Some("POST"), None),
                None,
                "{target}"
            );
        }
        assert_eq!(
            plain_path("/a/b/?q=../x"),
            Some("/a/b/"),
            "the query is not the path"
        );
    }

    #[test]
    fn networks_match_by_prefix_and_mapped_addresses_count_as_ipv4() {
        let r = rule();
        let ip = |s: &str| Some(s.parse::<IpAddr>().unwrap());
        assert_eq!(
            r.lets_through(None, None, ip("10.20.3.4")),
            Some(BypassKind::Network)
        );
        assert_eq!(
            r.lets_through(None, None, ip("::ffff:10.20.3.4")),
            Some(BypassKind::Network)
        );
        assert_eq!(r.lets_through(None, None, ip("10.21.0.1")), None);
        assert_eq!(
            r.lets_through(None, None, ip("2001:db8:5::1")),
            Some(BypassKind::Network)
        );
        assert_eq!(r.lets_through(None, None, ip("2001:db9::1")), None);
        assert_eq!(
            BypassRule::default().lets_through(Some("/x"), Some("GET"), ip("10.20.3.4")),
            None
        );
    }

    #[test]
    fn rules_are_validated() {
        rule().validate().unwrap();
        BypassRule::default().validate().unwrap();
        let with_path = |prefix: &str, methods: &[&str]| BypassRule {
            paths: vec![PathRule {
                prefix: prefix.into(),
                methods: methods.iter().map(|m| m.to_string()).collect(),
            }],
            ..BypassRule::default()
        };
        for bad in [
            with_path("/", &[]),
            with_path("pay", &[]),
            with_path("/a/../b", &[]),
            with_path("/a%20b", &[]),
            with_path(&format!("/{}", "a".repeat(BYPASS_PREFIX_LEN_MAX)), &[]),
            with_path("/pay", &["post"]),
            with_path("/pay", &[""]),
            with_path("/pay", &["GET"; BYPASS_METHODS_MAX + 1]),
            BypassRule {
                paths: vec![with_path("/a", &[]).paths[0].clone(); BYPASS_PATHS_MAX + 1],
                ..BypassRule::default()
            },
            BypassRule {
                networks: vec![Network::parse("10.0.0.1/8").unwrap()],
                ..BypassRule::default()
            },
            BypassRule {
                networks: vec![Network::parse("0.0.0.0/0").unwrap()],
                ..BypassRule::default()
            },
            BypassRule {
                networks: vec![Network::parse("::/0").unwrap()],
                ..BypassRule::default()
            },
            BypassRule {
                networks: vec![Network::parse("10.0.0.0/8").unwrap(); BYPASS_NETWORKS_MAX + 1],
                ..BypassRule::default()
            },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
        assert!(Network::parse("10.0.0.0/33").is_err());
        assert!(Network::parse("ten").is_err());
        assert_eq!(Network::parse("192.0.2.7").unwrap().prefix, 32);
        let host_bits = BypassRule {
            networks: vec![Network::parse("10.1.2.3/16").unwrap()],
            ..BypassRule::default()
        };
        let Err(Rejection::InvalidField { reason, .. }) = host_bits.validate() else {
            panic!("host bits are refused");
        };
        assert!(reason.contains("10.1.0.0/16"), "{reason}");
    }
}
