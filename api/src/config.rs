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

pub use sluice_ops::hook::ChallengeProviderConfig;
pub use sluice_ops::identity::IdentityConfig;

/// Token material, identical on every node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokensConfig {
    /// Ticket keys; the first signs, all verify (rotation: add a new first key, drop the old later).
    #[serde(default)]
    pub ticket_keys: Vec<TicketKey>,
    /// Ed25519 seed for admission tokens, 32 bytes base64.
    #[serde(default)]
    pub jwt_seed: String,
    /// Key id published in the JWKS.
    #[serde(default = "default_jwt_kid")]
    pub jwt_key_id: String,
    /// `iss` of admission tokens.
    #[serde(default = "default_issuer")]
    pub issuer: String,
    /// Longest an admission token lives, seconds (it also ends with its session). A client
    /// renews it with a status read; a copied token, or one kept after its session was revoked,
    /// is good for at most this long.
    #[serde(default = "default_admission_token_ttl")]
    pub admission_token_ttl_secs: u64,
    /// A status read returns the token this node last signed for the same admission while it
    /// has at least half its lifetime left, rather than sign another (signing is most of the
    /// read's cost). `false`: every read signs a new token with its own `jti`, for an origin
    /// that accepts each token only once.
    #[serde(default = "yes")]
    pub admission_token_reuse: bool,
    /// Keys the JWKS publishes besides the signing one (`jwt_seed`): the next key before a
    /// rotation, so that origins that cache the JWKS already know it; the previous one after
    /// it, until the tokens it signed have expired.
    #[serde(default)]
    pub jwt_published_keys: Vec<JwtKey>,
    /// The secret every node-to-node call is authenticated with, 32 bytes or more, base64
    /// (`sluice keygen` makes one). Required unless the nodes use mutual TLS (`[tls]`) or the
    /// node-to-node address is on loopback.
    #[serde(default)]
    pub cluster_secret: Option<String>,
    /// Cluster secrets accepted from other nodes besides `cluster_secret`, but never sent:
    /// during a rotation, the next one (before the nodes send it) or the previous one (until no
    /// node sends it any more). See deploy/README.md, "Rotating the cluster secret".
    #[serde(default)]
    pub cluster_secrets_also_accepted: Vec<String>,
    /// The secret rooms' draw secrets derive from, 32 bytes or more, base64: the same on every
    /// node, and never changed while a room draws (its committed secret could no longer be
    /// revealed). Without it, the draw key derives from `cluster_secret` (so, before rotating
    /// the cluster secret, set this to the current `cluster_secret`: the key stays the same).
    #[serde(default)]
    pub draw_secret: Option<String>,
}

impl Default for TokensConfig {
    fn default() -> Self {
        Self {
            ticket_keys: Vec::new(),
            jwt_seed: String::new(),
            jwt_key_id: default_jwt_kid(),
            issuer: default_issuer(),
            admission_token_ttl_secs: default_admission_token_ttl(),
            admission_token_reuse: true,
            jwt_published_keys: Vec::new(),
            cluster_secret: None,
            cluster_secrets_also_accepted: Vec::new(),
            draw_secret: None,
        }
    }
}

fn decode_cluster_secret(field: &str, s: &str) -> Result<Vec<u8>, String> {
    let s = B64
        .decode(s)
        .map_err(|_| format!("{field} is not base64"))?;
    if s.len() < sluice_raft::SECRET_BYTES_MIN {
        return Err(format!(
            "{field} must decode to at least {} bytes",
            sluice_raft::SECRET_BYTES_MIN
        ));
    }
    Ok(s)
}

/// A `tokens_file`: the `[tokens]` section alone.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TokensFile {
    tokens: TokensConfig,
}

/// A JWT signing key published in the JWKS (not signing).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JwtKey {
    /// Its key id.
    pub id: String,
    /// Its Ed25519 seed, 32 bytes, base64.
    pub seed: String,
}

fn default_admission_token_ttl() -> u64 {
    sluice_ops::tokens::ADMISSION_TOKEN_TTL_SECS
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
    /// HTTP requests being handled at once per node, counted once a request's body has been
    /// received (more wait): a client slow to send its body holds no place of the node's.
    pub concurrent_requests_max: usize,
    /// Open HTTP connections per node; past it the node accepts a new connection only when one
    /// closes (the rest wait in the listen backlog). Left out, it follows from the open-file
    /// limit and the memory (`budget.rs`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connections_max: Option<usize>,
    /// Open public gRPC connections per node (backends and tools), as `connections_max`; left
    /// out, a sixteenth of the connections the machine allows, 64 to 4,096.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grpc_connections_max: Option<usize>,
    /// How long an HTTP client may take to send its first bytes (on HTTP/2 its whole preface)
    /// and, on HTTP/1, each request's headers, ms, counted from the connection's start (or the
    /// end of its TLS handshake, which gets at most 10 s) or from the previous response; then the
    /// connection is closed; so is one that makes no progress for as long (no request in
    /// flight, or answers its client does not read), public gRPC ones too. A gRPC client has as
    /// long for its first 24 bytes. Longer than the
    /// idle timeout of a reverse proxy's kept-alive upstream connections (nginx 60 s, Traefik
    /// 90 s), so that the proxy closes an idle connection first and never sends a request on one
    /// that Sluice is closing.
    pub header_read_timeout_ms: u64,
    /// Open status streams (`/events`, gRPC `Visitor/Watch`) per node; past it a new one is
    /// answered 503 (`Unavailable`) and the waiting page falls back to polling. Left out, nine
    /// tenths of the HTTP connections, so that pages refused a stream can still poll.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event_streams_max: Option<usize>,
    /// Largest request head (request line and headers) on HTTP/1, and largest header list on
    /// HTTP/2 and public gRPC, bytes. Past it HTTP/1 is answered 431 and the connection closed;
    /// HTTP/2 refuses the stream. It also bounds the buffer each HTTP/1 connection may grow to.
    pub header_bytes_max: usize,
    /// Open connections from one client address (an IPv6 /64 counting as one), on the HTTP and
    /// the public gRPC listener each, and sixteen times as many from one IPv4 /24 or IPv6 /48;
    /// past it a new connection from that address is closed at once. Trusted proxies
    /// (`trusted_proxies`) are exempt: they speak for many clients.
    pub connections_per_address_max: usize,
    /// Requests one HTTP/2 or gRPC connection may have open at once.
    pub streams_per_connection_max: u32,
    /// HTTP requests one client address may have being handled at once (an IPv6 /64 counting
    /// as one), from their arrival to their answer's head (an open event stream counts no
    /// more once its answer has begun); past it a request is answered 429
    /// `too_many_in_flight` at once. It bounds what one address holds while its bodies are
    /// awaited. Trusted proxies (`trusted_proxies`) are exempt.
    pub requests_per_address_max: usize,
    /// Open status streams (`/events`, gRPC `Visitor/Watch`) per client address; one visitor
    /// has at most one (a new one replaces the old).
    pub event_streams_per_address_max: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            body_bytes_max: 64 * 1024,
            visitor_requests_per_second: 20,
            visitor_burst: 40,
            // The Raft crate's default (written once, in `NodeConfig::new`).
            request_timeout_ms: raft_defaults().request_timeout.as_millis() as u64,
            concurrent_requests_max: 10_000,
            connections_max: None,
            grpc_connections_max: None,
            header_read_timeout_ms: 120_000,
            event_streams_max: None,
            header_bytes_max: 32 * 1024,
            connections_per_address_max: 256,
            streams_per_connection_max: 128,
            requests_per_address_max: 64,
            event_streams_per_address_max: 64,
        }
    }
}

/// The Raft crate's defaults for a node's settings.
fn raft_defaults() -> sluice_raft::NodeConfig {
    sluice_raft::NodeConfig::new(0, "", std::net::SocketAddr::from(([127, 0, 0, 1], 0)))
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
    /// A node asks whether a majority would vote for it before it stands for election
    /// (Pre-Vote), so that a node cut off from the leader does not disturb it.
    pub pre_vote: bool,
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
    /// The Raft crate's own defaults (written once, in `NodeConfig::new`).
    fn default() -> Self {
        let n = raft_defaults();
        Self {
            heartbeat_ms: n.heartbeat_ms,
            election_timeout_min_ms: n.election_timeout_ms.0,
            election_timeout_max_ms: n.election_timeout_ms.1,
            pre_vote: n.pre_vote,
            snapshot_every: n.snapshot_every,
            logs_kept_after_snapshot: n.logs_kept_after_snapshot,
            proposals_in_flight: n.proposals_in_flight,
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
    /// Named operators, each with a role and the SHA-256 of its token (`[[operators]]`); the
    /// admin token is the break-glass credential beside them, named `admin`. At most
    /// [`OPERATORS_MAX`](sluice_ops::operators::OPERATORS_MAX).
    #[serde(default)]
    pub operators: Vec<sluice_ops::operators::OperatorConfig>,
    /// A bearer token that reads `/metrics` and nothing else, for the scraper (the operator
    /// token reads it too). At least 16 characters.
    #[serde(default)]
    pub metrics_token: Option<String>,
    /// Tokens of the backends that call the gRPC `Visitor` service (`authorization: Bearer`),
    /// each at least 32 characters. With none, `Visitor` calls are limited per client address
    /// like the HTTP visitor endpoints (a backend speaking for many visitors from one address
    /// then needs a token).
    #[serde(default)]
    pub backend_tokens: Vec<String>,
    /// Token keys and the cluster secret: here, or in `tokens_file`.
    #[serde(default)]
    pub tokens: TokensConfig,
    /// The keys the shop's identity assertions are verified with, for rooms that ask
    /// identities (`entry.identity_required`).
    #[serde(default)]
    pub identity: Option<IdentityConfig>,
    /// External challenge providers rooms may name (`entry.external_challenge`).
    #[serde(default)]
    pub challenge_providers: Vec<ChallengeProviderConfig>,
    /// A file holding the `[tokens]` section (`sluice keygen > tokens.toml`), read in its
    /// place when the node starts: the secrets can then live in a secret store or a file only
    /// the node reads, apart from the rest of the configuration.
    #[serde(default)]
    pub tokens_file: Option<PathBuf>,
    /// Node-to-node mutual TLS.
    #[serde(default)]
    pub tls: Option<TlsFiles>,
    /// Client-facing TLS.
    #[serde(default)]
    pub http_tls: Option<ServerTlsFiles>,
    /// `text` or `json`.
    #[serde(default = "default_log_format")]
    pub log_format: String,
    /// Reverse proxies whose `X-Forwarded-For` is believed, as addresses or CIDR blocks
    /// (`"10.0.0.0/8"`, `"::1"`). The client's address is the peer's, unless the peer is one
    /// of these: then `X-Forwarded-For` is read from its right end, past every trusted hop, to
    /// the first address that is not trusted. Nothing else is ever read from the header.
    /// Trusted proxies are also exempt from the per-address connection bound.
    #[serde(default)]
    pub trusted_proxies: Vec<String>,
    /// Replaced by `trusted_proxies`; refused with a message saying so.
    #[serde(default, skip_serializing)]
    pub trust_forwarded_for: Option<bool>,
    /// Mark cookies `Secure` (serve over HTTPS).
    #[serde(default)]
    pub secure_cookies: bool,
    /// Request limits.
    #[serde(default)]
    pub limits: Limits,
    /// Raft timing.
    #[serde(default)]
    pub raft: RaftTuning,
    /// The admission ledger this node keeps.
    #[serde(default)]
    pub ledger: LedgerConfig,
    /// Where this node archives its log before purging it (none: not archived).
    #[serde(default)]
    pub archive: Option<ArchiveSettings>,
    /// URLs told of rooms' and the cluster's events (the same on every node; the leader
    /// delivers).
    #[serde(default)]
    pub webhooks: Vec<sluice_ops::webhook::WebhookConfig>,
}

/// `[archive]`: the log entries a node purges behind its snapshots, kept with their ledger
/// records and checkpoints so that `sluice replay` can check every decision later.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArchiveSettings {
    /// The directory, one per node (keep it with the node's backups, or on shared storage).
    pub dir: PathBuf,
    /// Days of archive kept, 1..=36500 (older segments go once a newer base snapshot allows);
    /// none: kept for ever.
    #[serde(default)]
    pub keep_days: Option<u64>,
}

impl ArchiveSettings {
    /// The node's archive setting, checked.
    pub fn node_config(&self) -> Result<sluice_raft::ArchiveConfig, String> {
        if let Some(d) = self.keep_days {
            if !(1..=36_500).contains(&d) {
                return Err("archive.keep_days must be between 1 and 36500".into());
            }
        }
        Ok(sluice_raft::ArchiveConfig {
            dir: self.dir.clone(),
            keep: self
                .keep_days
                .map(|d| std::time::Duration::from_secs(d * 86_400)),
        })
    }
}

/// The admission ledger's records on this node (see ARCHITECTURE.md, "Ledger").
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LedgerConfig {
    /// Keep records (the chain over them is in the replicated state either way).
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Records older than this many days (log time) are removed, 1..=3650.
    #[serde(default = "default_ledger_retention_days")]
    pub retention_days: u64,
    /// At most this many records, the oldest removed first (1,000..=10,000,000,000).
    #[serde(default = "default_ledger_records_max")]
    pub records_max: u64,
}

fn yes() -> bool {
    true
}

/// The Raft crate's default retention (written once, in `LedgerRetention::default`).
fn default_ledger_retention_days() -> u64 {
    sluice_raft::LedgerRetention::default().max_age.as_secs() / 86_400
}

fn default_ledger_records_max() -> u64 {
    sluice_raft::LedgerRetention::default().records_max
}

impl Default for LedgerConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            retention_days: default_ledger_retention_days(),
            records_max: default_ledger_records_max(),
        }
    }
}

impl LedgerConfig {
    /// The node's retention setting, checked.
    pub fn retention(&self) -> Result<Option<sluice_raft::LedgerRetention>, String> {
        if !self.enabled {
            return Ok(None);
        }
        if !(1..=3_650).contains(&self.retention_days) {
            return Err("ledger.retention_days must be between 1 and 3650".into());
        }
        if !(1_000..=10_000_000_000).contains(&self.records_max) {
            return Err("ledger.records_max must be between 1000 and 10000000000".into());
        }
        Ok(Some(sluice_raft::LedgerRetention {
            max_age: std::time::Duration::from_secs(self.retention_days * 86_400),
            records_max: self.records_max,
        }))
    }
}

fn default_log_format() -> String {
    "text".into()
}

impl ServerConfig {
    /// Parses TOML.
    pub fn from_toml(text: &str) -> Result<Self, String> {
        toml::from_str(text).map_err(|e| e.to_string())
    }

    /// Reads `tokens_file`, if set, into `tokens` (which must then be empty).
    pub fn read_tokens_file(&mut self) -> Result<(), String> {
        let Some(path) = &self.tokens_file else {
            return Ok(());
        };
        if self.tokens != TokensConfig::default() {
            return Err("give the [tokens] section or tokens_file, not both".into());
        }
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let file: TokensFile =
            toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        self.tokens = file.tokens;
        Ok(())
    }

    /// Refuses secrets published in Sluice's own samples and documentation: anyone can read
    /// them, so a node using one is open to anyone (the `jwt_seed` of a sample, for one, lets
    /// anyone sign admission tokens that node's JWKS vouches for). Checked when a node starts,
    /// not when the samples are parsed.
    pub fn refuse_published_secrets(&self) -> Result<(), String> {
        let t = &self.tokens;
        let mut secrets: Vec<(&str, &str)> = vec![("tokens.jwt_seed", t.jwt_seed.as_str())];
        secrets.extend(
            t.ticket_keys
                .iter()
                .map(|k| ("tokens.ticket_keys", k.secret.as_str())),
        );
        secrets.extend(
            t.jwt_published_keys
                .iter()
                .map(|k| ("tokens.jwt_published_keys", k.seed.as_str())),
        );
        secrets.extend(
            t.cluster_secret
                .as_deref()
                .map(|s| ("tokens.cluster_secret", s)),
        );
        secrets.extend(
            t.cluster_secrets_also_accepted
                .iter()
                .map(|s| ("tokens.cluster_secrets_also_accepted", s.as_str())),
        );
        secrets.extend(t.draw_secret.as_deref().map(|s| ("tokens.draw_secret", s)));
        secrets.extend(self.admin_token.as_deref().map(|s| ("admin_token", s)));
        secrets.extend(self.metrics_token.as_deref().map(|s| ("metrics_token", s)));
        secrets.extend(
            self.backend_tokens
                .iter()
                .map(|s| ("backend_tokens", s.as_str())),
        );
        // An operator's token is known here by its hash: a published token's hash is listed.
        for o in &self.operators {
            if PUBLISHED_SECRETS_SHA256.contains(&o.token_sha256.to_ascii_lowercase().as_str()) {
                return Err(format!(
                    "operators.{}.token_sha256 is the hash of a sample value published with \
                     Sluice, which anyone can read: make the operator a token of its own with \
                     `sluice keygen --operator {} --role {}`",
                    o.name, o.name, o.role
                ));
            }
        }
        for (field, value) in secrets {
            if is_published_secret(value) {
                return Err(format!(
                    "{field} is a sample value published with Sluice, which anyone can read: \
                     generate your own with `sluice keygen` (and `sluice keygen --token` for \
                     operator tokens)"
                ));
            }
        }
        Ok(())
    }

    /// Checks what parsing cannot.
    pub fn validate(&self) -> Result<(), String> {
        self.check_node()?;
        self.check_credentials()?;
        self.check_limits()?;
        self.check_keys()
    }

    /// This node's id, its peers, the webhooks.
    fn check_node(&self) -> Result<(), String> {
        if self.node_id == 0 {
            return Err("node_id must be at least 1".into());
        }
        sluice_ops::webhook::check_all(&self.webhooks)?;
        sluice_ops::hook::check_all(&self.challenge_providers)?;
        if self.bootstrap && !self.peers.iter().any(|p| p.id == self.node_id) {
            return Err("with bootstrap, peers must include this node".into());
        }
        let mut ids: Vec<u64> = self.peers.iter().map(|p| p.id).collect();
        ids.sort_unstable();
        ids.dedup();
        if ids.len() != self.peers.len() {
            return Err("peer ids must be unique".into());
        }
        Ok(())
    }

    /// The operators' and backends' credentials.
    fn check_credentials(&self) -> Result<(), String> {
        if self.admin_token.is_none() && self.admin_token_file.is_none() {
            return Err("admin_token or admin_token_file is required".into());
        }
        sluice_ops::operators::validate(&self.operators)?;
        if self.metrics_token.as_ref().is_some_and(|t| t.len() < 16) {
            return Err("metrics_token must be at least 16 characters".into());
        }
        if self.backend_tokens.len() > 64
            || self
                .backend_tokens
                .iter()
                .any(|t| t.chars().count() < ADMIN_TOKEN_CHARS_MIN)
        {
            return Err(format!(
                "backend_tokens: at most 64, each at least {} characters",
                ADMIN_TOKEN_CHARS_MIN
            ));
        }
        Ok(())
    }

    /// Every limit and Raft timing within its range.
    fn check_limits(&self) -> Result<(), String> {
        for (name, value) in [
            ("connections_max", self.limits.connections_max),
            ("grpc_connections_max", self.limits.grpc_connections_max),
            ("event_streams_max", self.limits.event_streams_max),
        ] {
            if value.is_some_and(|n| !(1..=1_000_000).contains(&n)) {
                return Err(format!("limits.{name} must be between 1 and 1000000"));
            }
        }
        if !(8_192..=1 << 20).contains(&self.limits.header_bytes_max) {
            return Err("limits.header_bytes_max must be between 8192 and 1048576".into());
        }
        if !(100..=600_000).contains(&self.limits.header_read_timeout_ms) {
            return Err("limits.header_read_timeout_ms must be between 100 and 600000".into());
        }
        let (l, r) = (&self.limits, &self.raft);
        let ranges: [(&str, u64, u64, u64); 13] = [
            (
                "limits.connections_per_address_max",
                l.connections_per_address_max as u64,
                1,
                1_000_000,
            ),
            (
                "limits.streams_per_connection_max",
                l.streams_per_connection_max.into(),
                1,
                10_000,
            ),
            (
                "limits.event_streams_per_address_max",
                l.event_streams_per_address_max as u64,
                1,
                1_000_000,
            ),
            (
                "limits.requests_per_address_max",
                l.requests_per_address_max as u64,
                1,
                1_000_000,
            ),
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
        Ok(())
    }

    /// The log format, the trusted proxies, and the keys: tickets, admission tokens, the
    /// cluster's secret (required where the Raft port is reachable from other machines).
    fn check_keys(&self) -> Result<(), String> {
        if !matches!(self.log_format.as_str(), "text" | "json") {
            return Err("log_format must be text or json".into());
        }
        if self.trust_forwarded_for.is_some() {
            return Err(
                "trust_forwarded_for was replaced by trusted_proxies: list the addresses \
                 or CIDR blocks of the reverse proxies in front of the node"
                    .into(),
            );
        }
        self.trusted_proxies()?;
        self.ticket_keys()?;
        self.jwt_keys()?;
        if !(5..=86_400).contains(&self.tokens.admission_token_ttl_secs) {
            return Err("tokens.admission_token_ttl_secs must be between 5 and 86400".into());
        }
        let secret = self.cluster_secret()?;
        self.cluster_secrets_also_accepted()?;
        if secret.is_none() && self.tls.is_none() && !self.raft_addr.ip().is_loopback() {
            return Err(format!(
                "raft_addr {} is reachable from other machines, and whoever reaches it controls \
                 the cluster: set tokens.cluster_secret (the same on every node; `sluice keygen` \
                 makes one) or node-to-node mutual TLS ([tls])",
                self.raft_addr
            ));
        }
        Ok(())
    }

    /// The cluster secret, decoded.
    /// The key rooms' draw secrets derive from: from `tokens.draw_secret`, else from
    /// `tokens.cluster_secret`; `None` with neither (draws are then predictable).
    pub fn draw_key(&self) -> Result<Option<sluice_statemachine::draw::DrawKey>, String> {
        let material = match &self.tokens.draw_secret {
            Some(s) => decode_cluster_secret("tokens.draw_secret", s)?,
            None => match self.cluster_secret()? {
                Some(s) => s,
                None => return Ok(None),
            },
        };
        Ok(Some(sluice_statemachine::draw::DrawKey::from_secret(
            &material,
        )))
    }

    pub fn cluster_secret(&self) -> Result<Option<Vec<u8>>, String> {
        self.tokens
            .cluster_secret
            .as_deref()
            .map(|s| decode_cluster_secret("tokens.cluster_secret", s))
            .transpose()
    }

    /// The cluster secrets also accepted, decoded.
    pub fn cluster_secrets_also_accepted(&self) -> Result<Vec<Vec<u8>>, String> {
        if !self.tokens.cluster_secrets_also_accepted.is_empty()
            && self.tokens.cluster_secret.is_none()
        {
            return Err(
                "tokens.cluster_secrets_also_accepted needs a tokens.cluster_secret".into(),
            );
        }
        self.tokens
            .cluster_secrets_also_accepted
            .iter()
            .map(|s| decode_cluster_secret("tokens.cluster_secrets_also_accepted", s))
            .collect()
    }

    /// The trusted proxies, parsed.
    pub fn trusted_proxies(&self) -> Result<sluice_gate::client::TrustedProxies, String> {
        sluice_gate::client::TrustedProxies::parse(&self.trusted_proxies)
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

    /// The admission-token keys: the signing one, and the others the JWKS publishes.
    pub fn jwt_keys(&self) -> Result<sluice_ops::tokens::JwtKeys, String> {
        let mut keys = sluice_ops::tokens::JwtKeys::from_seed(
            &self.tokens.jwt_key_id,
            &self.tokens.issuer,
            &self.jwt_seed()?,
        )?
        .with_ttl(self.tokens.admission_token_ttl_secs)
        .with_reuse(self.tokens.admission_token_reuse);
        for k in &self.tokens.jwt_published_keys {
            let seed = B64
                .decode(&k.seed)
                .map_err(|_| format!("JWT key {} is not base64", k.id))?;
            keys = keys
                .publish(&k.id, &seed)
                .map_err(|e| format!("tokens.jwt_published_keys: {e}"))?;
        }
        Ok(keys)
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

/// The fewest characters an operator token may have.
pub const ADMIN_TOKEN_CHARS_MIN: usize = 32;

/// SHA-256 (hex) of every secret that Sluice's samples and documentation publish, or ever
/// published: a node refuses to start with any of them. A test finds every secret in the
/// samples and checks that it is listed here.
pub const PUBLISHED_SECRETS_SHA256: &[&str] = &[
    // deploy/sluice.example.toml
    "4e44bf3b3119d1eacba8c3fb48b9c845e6ab8fbfdd2b1646d6d98f0fb33ace1e",
    "5f6b77474a844190a57133786378a14c2629cb7dc7844f47c21afd9325e5ce65",
    "4e798418e275d37c0118b1b253b42e7332578f4019b2dc96b15ffbd3ec70ce13",
    "ce350e225b927db0b50d0d209150f60a604bc0f9d620e4319d57f7e734e1ee9a",
    "dcfb5950391f5adcf89f4b73b393a2c7515d52c20a3b4650c8a87b721744ccc4",
    "b3cf5152a10b7a596ff461bfb6e04203341d08239fc80a56ce135f187ef29e6e",
    "de54fe500c1c80408d2d8b4b32f4eff2395ea03d3096d39d92e7fd4f9c199324",
    // deploy/compose (before its secrets were generated)
    "d5526b00fe9f877898da0715d89c7ac20754cf01dd19df89839e6705e6ffc367",
    "67156c9261d14aa025546709fd3ef61a52be373720aff5da8a7c572b1720e4d3",
    "a929e03da99d19b10ad78ffca542f4851601f29a74c69acdcda02982634fea8d",
    // deploy/k8s (before its secrets moved to a Secret you create)
    "7270aee4c39ccca8ee35c71b12396e5b2f6d3f9e75a19bcd7600c4ab12ffca24",
    "62290b98ce4680d6829da579ad15b9d9fea571c9772ce8b13cd056c4c59b53df",
    "9d78a11d5a1b3cfd7e9fbdafb094df7b68336e717ad55abef203ee422773dfc8",
    // README.md (earlier versions)
    "787889db9fb632a15a191144b675920457fbcb4b3848946f0a0e142e668f8f69",
];

/// Whether `value` is one of [`PUBLISHED_SECRETS_SHA256`].
pub fn is_published_secret(value: &str) -> bool {
    use sha2::Digest;
    let hex: String = sha2::Sha256::digest(value.trim().as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    PUBLISHED_SECRETS_SHA256.contains(&hex.as_str())
}

/// A fresh operator token: 32 random bytes as base64 without its punctuation (about 42
/// characters, at least [`ADMIN_TOKEN_CHARS_MIN`]).
pub fn random_token() -> String {
    loop {
        let t = random_secret().replace(['+', '/', '='], "");
        if t.len() >= ADMIN_TOKEN_CHARS_MIN {
            return t;
        }
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
    fn the_draw_key_comes_from_the_draw_secret_else_the_cluster_secret() {
        let mut c = ServerConfig::from_toml(SAMPLE).unwrap();
        let a = B64.encode([1u8; 32]);
        let b = B64.encode([2u8; 32]);
        c.tokens.cluster_secret = None;
        c.tokens.draw_secret = None;
        assert_eq!(c.draw_key().unwrap(), None);
        c.tokens.cluster_secret = Some(a.clone());
        let from_cluster = c.draw_key().unwrap().unwrap();
        // Before a rotation of the cluster secret: the draw secret set to the old one keeps the key.
        c.tokens.cluster_secret = Some(b.clone());
        assert_ne!(c.draw_key().unwrap().unwrap(), from_cluster);
        c.tokens.draw_secret = Some(a);
        assert_eq!(c.draw_key().unwrap().unwrap(), from_cluster);
        c.tokens.draw_secret = Some(B64.encode([3u8; 8]));
        assert!(c.draw_key().unwrap_err().contains("tokens.draw_secret"));
        assert!(LedgerConfig {
            retention_days: 0,
            ..LedgerConfig::default()
        }
        .retention()
        .is_err());
        assert_eq!(
            LedgerConfig {
                enabled: false,
                ..LedgerConfig::default()
            }
            .retention(),
            Ok(None)
        );
    }

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
            let mut c = ServerConfig::from_toml(text).unwrap_or_else(|e| panic!("{name}: {e}"));
            // No secret is in these files: they come from files made with `sluice keygen`.
            assert!(
                c.admin_token.is_none() && c.admin_token_file.is_some(),
                "{name}"
            );
            assert_eq!(c.tokens, TokensConfig::default(), "{name}");
            let dir = tempfile::tempdir().unwrap();
            let file = dir.path().join("tokens.toml");
            std::fs::write(&file, keygen_output()).unwrap();
            c.tokens_file = Some(file);
            c.read_tokens_file().unwrap();
            c.validate().unwrap_or_else(|e| panic!("{name}: {e}"));
            c.refuse_published_secrets().unwrap();
            assert_eq!(c.peers.len(), 3, "{name}");
        }
    }

    /// What `sluice keygen` prints.
    fn keygen_output() -> String {
        format!(
            "[tokens]\nticket_keys = [{{ id = \"k1\", secret = \"{}\" }}]\njwt_seed = \"{}\"\ncluster_secret = \"{}\"\ndraw_secret = \"{}\"\n",
            random_secret(),
            random_secret(),
            random_secret(),
            random_secret()
        )
    }

    /// Every secret the annotated sample publishes is refused, one field at a time; fresh ones
    /// are not.
    #[test]
    fn the_samples_secrets_are_refused_and_fresh_ones_are_not() {
        let sample = ServerConfig::from_toml(SAMPLE).unwrap();
        let mut fresh = sample.clone();
        fresh.admin_token = Some(random_token());
        fresh.tokens = toml::from_str::<TokensFile>(&keygen_output())
            .unwrap()
            .tokens;
        fresh.refuse_published_secrets().unwrap();
        type Change<'a> = Box<dyn Fn(&mut ServerConfig) + 'a>;
        let changes: [(&str, Change); 4] = [
            (
                "admin_token",
                Box::new(|c| c.admin_token = sample.admin_token.clone()),
            ),
            (
                "tokens.jwt_seed",
                Box::new(|c| c.tokens.jwt_seed = sample.tokens.jwt_seed.clone()),
            ),
            (
                "tokens.ticket_keys",
                Box::new(|c| c.tokens.ticket_keys = sample.tokens.ticket_keys.clone()),
            ),
            (
                "tokens.cluster_secret",
                Box::new(|c| c.tokens.cluster_secret = sample.tokens.cluster_secret.clone()),
            ),
        ];
        for (field, change) in changes {
            let mut c = fresh.clone();
            change(&mut c);
            let e = c.refuse_published_secrets().unwrap_err();
            assert!(e.starts_with(field) && e.contains("sluice keygen"), "{e}");
        }
        // The commented-out metrics token of the sample, and earlier samples' secrets.
        for published in [
            "another-long-random-string",
            "compose-operator-token-change-me",
            "azhzLWp3dC1zZWVkLWNoYW5nZS1tZS0zMi1ieXRlcyE=",
            "a-long-operator-token-for-this-cluster",
        ] {
            assert!(is_published_secret(published), "{published}");
        }
        // Every quoted value of 24 characters or more in the samples and the READMEs is one of
        // the listed secrets or is not a secret at all (an address, a path, a comment's text).
        for (name, text) in [
            ("deploy/sluice.example.toml", SAMPLE),
            ("README.md", include_str!("../../README.md")),
            ("deploy/README.md", include_str!("../../deploy/README.md")),
        ] {
            for quoted in text.split('"').skip(1).step_by(2) {
                let looks_secret = quoted.len() >= 24
                    && !quoted.contains([' ', '/', ':', '$', '{', '.'])
                    && quoted.chars().all(|c| c.is_ascii_graphic());
                if looks_secret {
                    assert!(
                        is_published_secret(quoted),
                        "{name}: {quoted} is not listed"
                    );
                }
            }
        }
    }

    #[test]
    fn a_node_reachable_from_other_machines_needs_a_cluster_secret_or_tls() {
        let mut c = ServerConfig::from_toml(SAMPLE).unwrap();
        c.validate().unwrap();
        c.tokens.cluster_secret = None;
        let e = c.validate().unwrap_err();
        assert!(
            e.contains("cluster_secret") && e.contains("0.0.0.0:7000"),
            "{e}"
        );
        // With mutual TLS, or on loopback, it may go without.
        let mut tls = c.clone();
        tls.tls = Some(TlsFiles {
            ca: "ca.pem".into(),
            cert: "n.pem".into(),
            key: "n-key.pem".into(),
            server_name: None,
        });
        tls.validate().unwrap();
        c.raft_addr = "127.0.0.1:7000".parse().unwrap();
        c.validate().unwrap();
        c.tokens.cluster_secret = Some(B64.encode([1u8; 16]));
        assert!(c.validate().unwrap_err().contains("at least 32 bytes"));
    }

    #[test]
    fn trusted_proxies_replace_trust_forwarded_for() {
        let old =
            ServerConfig::from_toml(&format!("trust_forwarded_for = true\n{SAMPLE}")).unwrap();
        assert!(old.validate().unwrap_err().contains("trusted_proxies"));
        let mut c = ServerConfig::from_toml(SAMPLE).unwrap();
        assert!(c
            .trusted_proxies()
            .unwrap()
            .trusts("10.0.0.10".parse().unwrap()));
        c.trusted_proxies = vec!["10.0.0.0/40".into()];
        assert!(c.validate().unwrap_err().contains("trusted_proxies"));
    }

    #[test]
    fn tokens_come_from_the_file_or_the_section_not_both() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("tokens.toml");
        std::fs::write(&file, keygen_output()).unwrap();
        let mut c = ServerConfig::from_toml(SAMPLE).unwrap();
        c.tokens_file = Some(file.clone());
        assert!(c.read_tokens_file().unwrap_err().contains("not both"));
        c.tokens = TokensConfig::default();
        c.read_tokens_file().unwrap();
        c.validate().unwrap();
        assert_eq!(c.tokens.ticket_keys.len(), 1);
        c.tokens = TokensConfig::default();
        c.tokens_file = Some(dir.path().join("missing.toml"));
        assert!(c.read_tokens_file().unwrap_err().contains("missing.toml"));
    }

    #[test]
    fn operators_are_read_with_their_roles_and_bad_lists_are_refused() {
        use sluice_ops::operators::{hex, token_hash, Role};
        let entry = |name: &str, role: &str, token: &str| {
            format!(
                "\n[[operators]]\nname = \"{name}\"\nrole = \"{role}\"\ntoken_sha256 = \"{}\"\n",
                hex(&token_hash(token))
            )
        };
        let text = format!(
            "{SAMPLE}{}{}",
            entry("alice", "operator", "alice-token-0123456789abcdef012345"),
            entry("bob", "viewer", "bob-token-0123456789abcdef01234567")
        );
        let c = ServerConfig::from_toml(&text).unwrap();
        c.validate().unwrap();
        let roles: Vec<(&str, Role)> = c
            .operators
            .iter()
            .map(|o| (o.name.as_str(), o.role))
            .collect();
        assert_eq!(roles, [("alice", Role::Operator), ("bob", Role::Viewer)]);
        // No such role; the token itself where its hash belongs; a field of another name.
        let e = ServerConfig::from_toml(&format!(
            "{SAMPLE}{}",
            entry("carol", "root", "carol-token-0123456789abcdef01234")
        ))
        .unwrap_err();
        assert!(e.contains("unknown variant") && e.contains("viewer"), "{e}");
        let e = ServerConfig::from_toml(&format!(
            "{SAMPLE}\n[[operators]]\nname = \"carol\"\nrole = \"admin\"\ntoken = \"x\"\n"
        ))
        .unwrap_err();
        assert!(e.contains("unknown field") && e.contains("token"), "{e}");
        // Two names, one token: refused, naming both.
        let twice = format!(
            "{SAMPLE}{}{}",
            entry("alice", "operator", "shared-token-0123456789abcdef0123"),
            entry("bob", "viewer", "shared-token-0123456789abcdef0123")
        );
        let e = ServerConfig::from_toml(&twice)
            .unwrap()
            .validate()
            .unwrap_err();
        assert!(
            e.contains("alice and bob have the same token_sha256"),
            "{e}"
        );
        let e = ServerConfig::from_toml(&format!(
            "{SAMPLE}{}{}",
            entry("alice", "operator", "alice-token-0123456789abcdef012345"),
            entry("alice", "viewer", "other-token-0123456789abcdef0123456")
        ))
        .unwrap()
        .validate()
        .unwrap_err();
        assert!(e.contains("alice is named twice"), "{e}");
        // A token published in an earlier sample, configured by its hash, is refused at start.
        let mut c = ServerConfig::from_toml(&format!(
            "{SAMPLE}{}",
            entry("dave", "admin", "a-long-operator-token-for-this-cluster")
        ))
        .unwrap();
        c.validate().unwrap();
        c.admin_token = Some(random_token());
        c.tokens = toml::from_str::<TokensFile>(&keygen_output())
            .unwrap()
            .tokens;
        let e = c.refuse_published_secrets().unwrap_err();
        assert!(
            e.starts_with("operators.dave.token_sha256")
                && e.contains("sluice keygen --operator dave"),
            "{e}"
        );
        c.operators[0].token_sha256 = hex(&token_hash(&random_token()));
        c.refuse_published_secrets().unwrap();
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
        c.limits.connections_max = Some(0);
        assert!(c.validate().unwrap_err().contains("connections_max"));
        let mut c = ServerConfig::from_toml(SAMPLE).unwrap();
        c.limits.grpc_connections_max = Some(2_000_000);
        assert!(c.validate().unwrap_err().contains("grpc_connections_max"));
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
        c.limits.event_streams_max = Some(0);
        assert!(c.validate().unwrap_err().contains("event_streams_max"));
        let mut c = ServerConfig::from_toml(SAMPLE).unwrap();
        assert_eq!(c.limits.requests_per_address_max, 64, "the sample sets it");
        c.limits.requests_per_address_max = 0;
        assert!(c
            .validate()
            .unwrap_err()
            .contains("requests_per_address_max"));
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
