//! Server configuration: a TOML file, overridden by environment variables and flags.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::path::PathBuf;

/// One member of the initial cluster.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Peer {
    /// Node id (never reused).
    pub id: u64,
    /// Node-to-node address.
    pub raft: String,
    /// Public HTTP address.
    #[serde(default)]
    pub http: String,
    /// Public gRPC address.
    #[serde(default)]
    pub grpc: String,
}

/// An HMAC key for tickets.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TicketKey {
    /// Key id, carried in every ticket.
    pub id: String,
    /// At least 32 bytes, base64.
    pub secret: String,
}

/// Token material, identical on every node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokensConfig {
    /// Ticket keys; the first signs, all verify (rotation: add a new first key, drop the old later).
    pub ticket_keys: Vec<TicketKey>,
    /// Ed25519 seed for admission tokens, 32 bytes base64.
    pub jwt_seed: String,
    /// Key id published in the JWKS.
    #[serde(default = "default_jwt_kid")]
    pub jwt_key_id: String,
    /// `iss` of admission tokens.
    #[serde(default = "default_issuer")]
    pub issuer: String,
}

fn default_jwt_kid() -> String {
    "j1".into()
}
fn default_issuer() -> String {
    "sluice".into()
}

/// PEM files for mutual TLS between nodes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsFiles {
    /// CA certificate that signed every node.
    pub ca: PathBuf,
    /// This node's certificate.
    pub cert: PathBuf,
    /// This node's key.
    pub key: PathBuf,
    /// Name expected in peers' certificates (default: the host of their address).
    #[serde(default)]
    pub server_name: Option<String>,
}

/// PEM files for client-facing TLS (HTTP and gRPC).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerTlsFiles {
    /// Certificate chain.
    pub cert: PathBuf,
    /// Private key.
    pub key: PathBuf,
}

/// Request limits.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Largest request body, and largest gRPC request message.
    pub body_bytes_max: usize,
    /// HTTP visitor requests per second per client address.
    pub visitor_requests_per_second: u32,
    /// Burst above that rate.
    pub visitor_burst: u32,
    /// Deadline for a write or linearizable read, ms.
    pub request_timeout_ms: u64,
    /// Concurrent HTTP requests per node.
    pub concurrent_requests_max: usize,
    /// Open HTTP connections per node, and as many public gRPC connections; past it the node
    /// accepts a new connection only when one closes (the rest wait in the listen backlog).
    pub connections_max: usize,
    /// How long an HTTP client may take to send its first bytes (on HTTP/2 its whole preface)
    /// and, on HTTP/1, each request's headers, ms, counted from the connection's start (or the
    /// end of its TLS handshake, which gets at most 10 s) or from the previous response; then the
    /// connection is closed. A gRPC client has as long for its first 24 bytes. Longer than the
    /// idle timeout of a reverse proxy's kept-alive upstream connections (nginx 60 s, Traefik
    /// 90 s), so that the proxy closes an idle connection first and never sends a request on one
    /// that Sluice is closing.
    pub header_read_timeout_ms: u64,
    /// Open status streams (`/events`, gRPC `Visitor/Watch`) per node; past it a new one is
    /// answered 503 (`Unavailable`) and the waiting page falls back to polling.
    pub event_streams_max: usize,
    /// Largest request head (request line and headers) on HTTP/1, and largest header list on
    /// HTTP/2 and public gRPC, bytes. Past it HTTP/1 is answered 431 and the connection closed;
    /// HTTP/2 refuses the stream. It also bounds the buffer each HTTP/1 connection may grow to.
    pub header_bytes_max: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            body_bytes_max: 64 * 1024,
            visitor_requests_per_second: 20,
            visitor_burst: 40,
            request_timeout_ms: 5_000,
            concurrent_requests_max: 10_000,
            connections_max: 20_000,
            header_read_timeout_ms: 120_000,
            event_streams_max: 10_000,
            header_bytes_max: 32 * 1024,
        }
    }
}

/// Raft timing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RaftTuning {
    /// Heartbeat interval, ms.
    pub heartbeat_ms: u64,
    /// Election timeout lower bound, ms.
    pub election_timeout_min_ms: u64,
    /// Election timeout upper bound, ms.
    pub election_timeout_max_ms: u64,
    /// Log entries between snapshots (each node adds up to a quarter, so that nodes take theirs
    /// at different log indexes; the leader waits four times as long).
    pub snapshot_every: u64,
    /// Log entries kept behind a snapshot: a follower that falls further behind is sent the
    /// snapshot instead of the entries.
    pub logs_kept_after_snapshot: u64,
    /// Proposals the leader keeps in flight at once. Commands that arrive meanwhile (a
    /// follower's forwarded ones included) wait and share the next proposal: fewer makes larger
    /// batches.
    pub proposals_in_flight: usize,
}

impl Default for RaftTuning {
    fn default() -> Self {
        Self {
            heartbeat_ms: 100,
            election_timeout_min_ms: 500,
            election_timeout_max_ms: 1_000,
            snapshot_every: 20_000,
            logs_kept_after_snapshot: 5_000,
            proposals_in_flight: 2,
        }
    }
}

/// Everything a node needs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// This node's id.
    pub node_id: u64,
    /// RocksDB, snapshots.
    pub data_dir: PathBuf,
    /// HTTP listen address.
    pub http_addr: SocketAddr,
    /// gRPC listen address.
    pub grpc_addr: SocketAddr,
    /// Node-to-node listen address.
    pub raft_addr: SocketAddr,
    /// HTTP address others use (default: `http_addr`).
    #[serde(default)]
    pub advertise_http: Option<String>,
    /// gRPC address others use.
    #[serde(default)]
    pub advertise_grpc: Option<String>,
    /// Node-to-node address others use.
    #[serde(default)]
    pub advertise_raft: Option<String>,
    /// Create the cluster from `peers` on first start (exactly one node, once).
    #[serde(default)]
    pub bootstrap: bool,
    /// The initial members (with `bootstrap`).
    #[serde(default)]
    pub peers: Vec<Peer>,
    /// Operator bearer token.
    #[serde(default)]
    pub admin_token: Option<String>,
    /// File holding the operator bearer token.
    #[serde(default)]
    pub admin_token_file: Option<PathBuf>,
    /// A bearer token that reads `/metrics` and nothing else, for the scraper (the operator
    /// token reads it too). At least 16 characters.
    #[serde(default)]
    pub metrics_token: Option<String>,
    /// Token keys.
    pub tokens: TokensConfig,
    /// Node-to-node mutual TLS.
    #[serde(default)]
    pub tls: Option<TlsFiles>,
    /// Client-facing TLS.
    #[serde(default)]
    pub http_tls: Option<ServerTlsFiles>,
    /// `text` or `json`.
    #[serde(default = "default_log_format")]
    pub log_format: String,
    /// Use the last address of `X-Forwarded-For`, the one the proxy in front added, as the client
    /// address (only behind a trusted proxy).
    #[serde(default)]
    pub trust_forwarded_for: bool,
    /// Mark cookies `Secure` (serve over HTTPS).
    #[serde(default)]
    pub secure_cookies: bool,
    /// Request limits.
    #[serde(default)]
    pub limits: Limits,
    /// Raft timing.
    #[serde(default)]
    pub raft: RaftTuning,
}

fn default_log_format() -> String {
    "text".into()
}

impl ServerConfig {
    /// Parses TOML.
    pub fn from_toml(text: &str) -> Result<Self, String> {
        toml::from_str(text).map_err(|e| e.to_string())
    }

    /// Checks what parsing cannot.
    pub fn validate(&self) -> Result<(), String> {
        if self.node_id == 0 {
            return Err("node_id must be at least 1".into());
        }
        if self.bootstrap && !self.peers.iter().any(|p| p.id == self.node_id) {
            return Err("with bootstrap, peers must include this node".into());
        }
        let mut ids: Vec<u64> = self.peers.iter().map(|p| p.id).collect();
        ids.sort_unstable();
        ids.dedup();
        if ids.len() != self.peers.len() {
            return Err("peer ids must be unique".into());
        }
        if self.admin_token.is_none() && self.admin_token_file.is_none() {
            return Err("admin_token or admin_token_file is required".into());
        }
        if self.metrics_token.as_ref().is_some_and(|t| t.len() < 16) {
            return Err("metrics_token must be at least 16 characters".into());
        }
        if !(1..=1_000_000).contains(&self.limits.connections_max) {
            return Err("limits.connections_max must be between 1 and 1000000".into());
        }
        if !(1..=1_000_000).contains(&self.limits.event_streams_max) {
            return Err("limits.event_streams_max must be between 1 and 1000000".into());
        }
        if !(8_192..=1 << 20).contains(&self.limits.header_bytes_max) {
            return Err("limits.header_bytes_max must be between 8192 and 1048576".into());
        }
        if !(100..=600_000).contains(&self.limits.header_read_timeout_ms) {
            return Err("limits.header_read_timeout_ms must be between 100 and 600000".into());
        }
        let (l, r) = (&self.limits, &self.raft);
        let ranges: [(&str, u64, u64, u64); 9] = [
            (
                "limits.body_bytes_max",
                l.body_bytes_max as u64,
                1_024,
                16 << 20,
            ),
            (
                "limits.visitor_requests_per_second",
                l.visitor_requests_per_second.into(),
                1,
                1_000_000_000,
            ),
            (
                "limits.visitor_burst",
                l.visitor_burst.into(),
                1,
                1_000_000_000,
            ),
            (
                "limits.request_timeout_ms",
                l.request_timeout_ms,
                100,
                600_000,
            ),
            (
                "limits.concurrent_requests_max",
                l.concurrent_requests_max as u64,
                1,
                1_000_000,
            ),
            ("raft.heartbeat_ms", r.heartbeat_ms, 10, 60_000),
            (
                "raft.election_timeout_max_ms",
                r.election_timeout_max_ms,
                20,
                600_000,
            ),
            (
                "raft.snapshot_every",
                r.snapshot_every,
                10,
                1_000_000_000_000,
            ),
            (
                "raft.logs_kept_after_snapshot",
                r.logs_kept_after_snapshot,
                0,
                10_000_000,
            ),
        ];
        for (name, v, lo, hi) in ranges {
            if !(lo..=hi).contains(&v) {
                return Err(format!("{name} must be between {lo} and {hi}"));
            }
        }
        if !(r.heartbeat_ms < r.election_timeout_min_ms
            && r.election_timeout_min_ms < r.election_timeout_max_ms)
        {
            return Err(
                "raft timing must be heartbeat_ms < election_timeout_min_ms < election_timeout_max_ms"
                    .into(),
            );
        }
        if !(1..=1024).contains(&self.raft.proposals_in_flight) {
            return Err("raft.proposals_in_flight must be between 1 and 1024".into());
        }
        if !matches!(self.log_format.as_str(), "text" | "json") {
            return Err("log_format must be text or json".into());
        }
        self.ticket_keys()?;
        self.jwt_seed()?;
        Ok(())
    }

    /// Decoded ticket keys.
    pub fn ticket_keys(&self) -> Result<Vec<(String, Vec<u8>)>, String> {
        self.tokens
            .ticket_keys
            .iter()
            .map(|k| {
                B64.decode(&k.secret)
                    .map(|s| (k.id.clone(), s))
                    .map_err(|_| format!("ticket key {} is not base64", k.id))
            })
            .collect()
    }

    /// Decoded JWT seed.
    pub fn jwt_seed(&self) -> Result<Vec<u8>, String> {
        let s = B64
            .decode(&self.tokens.jwt_seed)
            .map_err(|_| "tokens.jwt_seed is not base64".to_string())?;
        if s.len() != 32 {
            return Err("tokens.jwt_seed must decode to 32 bytes".into());
        }
        Ok(s)
    }

    /// The operator token, from the config or its file.
    pub fn admin_token(&self) -> Result<String, String> {
        if let Some(t) = &self.admin_token {
            return Ok(t.clone());
        }
        let path = self
            .admin_token_file
            .as_ref()
            .ok_or("no admin token configured")?;
        std::fs::read_to_string(path)
            .map(|s| s.trim().to_string())
            .map_err(|e| format!("{}: {e}", path.display()))
    }
}

/// 32 random bytes, base64: for fresh secrets.
pub fn random_secret() -> String {
    let mut b = [0u8; 32];
    getrandom::fill(&mut b).expect("OS randomness");
    B64.encode(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = include_str!("../../deploy/sluice.example.toml");

    #[test]
    fn the_annotated_sample_parses_and_validates() {
        let c = ServerConfig::from_toml(SAMPLE).unwrap();
        c.validate().unwrap();
        assert_eq!(c.peers.len(), 3);
    }

    #[test]
    fn the_compose_and_kubernetes_configurations_parse_and_validate() {
        let compose = include_str!("../../deploy/compose/sluice.toml");
        let k8s = include_str!("../../deploy/k8s/sluice.yaml");
        // The ConfigMap's `sluice.toml: |` block, indented by four spaces, up to the next document.
        let embedded: String = k8s
            .split("sluice.toml: |\n")
            .nth(1)
            .expect("the ConfigMap holds sluice.toml")
            .split("\n---")
            .next()
            .unwrap()
            .lines()
            .map(|l| format!("{}\n", l.strip_prefix("    ").unwrap_or(l)))
            .collect();
        for (name, text) in [("compose", compose), ("k8s", embedded.as_str())] {
            let c = ServerConfig::from_toml(text).unwrap_or_else(|e| panic!("{name}: {e}"));
            c.validate().unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(c.peers.len(), 3, "{name}");
        }
    }

    #[test]
    fn unknown_keys_and_bad_values_are_refused() {
        assert!(
            ServerConfig::from_toml(&format!("{SAMPLE}\nsurprise = 1\n"))
                .unwrap_err()
                .contains("surprise")
        );
        let mut c = ServerConfig::from_toml(SAMPLE).unwrap();
        c.tokens.jwt_seed = "short".into();
        assert!(c.validate().is_err());
        let mut c = ServerConfig::from_toml(SAMPLE).unwrap();
        c.node_id = 9;
        assert!(c.validate().unwrap_err().contains("peers must include"));
        let mut c = ServerConfig::from_toml(SAMPLE).unwrap();
        c.raft.proposals_in_flight = 0;
        assert!(c.validate().unwrap_err().contains("proposals_in_flight"));
        let mut c = ServerConfig::from_toml(SAMPLE).unwrap();
        c.limits.connections_max = 0;
        assert!(c.validate().unwrap_err().contains("connections_max"));
        let mut c = ServerConfig::from_toml(SAMPLE).unwrap();
        c.limits.header_bytes_max = 4_096;
        assert!(c.validate().unwrap_err().contains("header_bytes_max"));
        let mut c = ServerConfig::from_toml(SAMPLE).unwrap();
        assert_eq!(c.raft.logs_kept_after_snapshot, 5_000, "the sample sets it");
        c.raft.logs_kept_after_snapshot = 20_000_000;
        assert!(c
            .validate()
            .unwrap_err()
            .contains("logs_kept_after_snapshot"));
        let mut c = ServerConfig::from_toml(SAMPLE).unwrap();
        c.limits.event_streams_max = 0;
        assert!(c.validate().unwrap_err().contains("event_streams_max"));
        // Values that would break a node: no snapshot period, no time for a write, no
        // heartbeat, an election timeout below the heartbeat.
        for (field, change) in [
            (
                "snapshot_every",
                Box::new(|c: &mut ServerConfig| c.raft.snapshot_every = 0)
                    as Box<dyn Fn(&mut ServerConfig)>,
            ),
            (
                "request_timeout_ms",
                Box::new(|c: &mut ServerConfig| c.limits.request_timeout_ms = 0),
            ),
            (
                "heartbeat_ms",
                Box::new(|c: &mut ServerConfig| c.raft.heartbeat_ms = 0),
            ),
            (
                "body_bytes_max",
                Box::new(|c: &mut ServerConfig| c.limits.body_bytes_max = 0),
            ),
            (
                "raft timing",
                Box::new(|c: &mut ServerConfig| c.raft.election_timeout_min_ms = 50),
            ),
            (
                "raft timing",
                Box::new(|c: &mut ServerConfig| c.raft.election_timeout_min_ms = 5_000),
            ),
        ] {
            let mut c = ServerConfig::from_toml(SAMPLE).unwrap();
            change(&mut c);
            assert!(c.validate().unwrap_err().contains(field), "{field}");
        }
        let mut c = ServerConfig::from_toml(SAMPLE).unwrap();
        c.limits.header_read_timeout_ms = 0;
        assert!(c.validate().unwrap_err().contains("header_read_timeout_ms"));
    }
}
