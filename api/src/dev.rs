//! `sluice dev`'s configuration: one node on this machine, its secrets made once and kept in
//! its data directory, so that tickets and the operator token survive restarts.

use crate::config::{
    random_secret, random_token, Limits, Peer, RaftTuning, ServerConfig, TicketKey, TokensConfig,
};
use anyhow::Context;
use std::net::SocketAddr;

/// The node's configuration: loopback addresses as given, node 1 bootstrapping a cluster of
/// itself, secrets from `DATA_DIR/dev-secrets.toml` (made on the first start, owner-only), the
/// operator token `token` or the kept one, written to `DATA_DIR/admin-token` for `sluice ctl`.
pub fn config(
    data_dir: &std::path::Path,
    http: SocketAddr,
    grpc: SocketAddr,
    raft: SocketAddr,
    token: Option<String>,
) -> anyhow::Result<ServerConfig> {
    std::fs::create_dir_all(data_dir)
        .with_context(|| format!("creating {}", data_dir.display()))?;
    // Secrets are generated once and kept, so tickets and the token survive restarts.
    let secrets_path = data_dir.join("dev-secrets.toml");
    let secrets: toml::Table = match std::fs::read_to_string(&secrets_path) {
        Ok(t) => toml::from_str(&t)?,
        Err(_) => {
            let mut t = toml::Table::new();
            t.insert("admin_token".into(), random_token().into());
            t.insert("ticket_secret".into(), random_secret().into());
            t.insert("jwt_seed".into(), random_secret().into());
            t.insert("cluster_secret".into(), random_secret().into());
            // Readable by its owner only: it holds the operator token and the signing keys.
            use std::io::Write;
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&secrets_path)
                .with_context(|| format!("creating {}", secrets_path.display()))?
                .write_all(toml::to_string(&t)?.as_bytes())?;
            t
        }
    };
    let get = |k: &str| {
        secrets
            .get(k)
            .and_then(|v| v.as_str())
            .map(str::to_string)
            .context("dev-secrets.toml is incomplete")
    };
    let admin_token = match token {
        Some(t) => t,
        None => get("admin_token")?,
    };
    // For `sluice ctl --token-file`, readable by its owner only.
    {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let path = data_dir.join("admin-token");
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&path)
            .and_then(|mut f| writeln!(f, "{admin_token}"))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(ServerConfig {
        node_id: 1,
        data_dir: data_dir.join("node"),
        http_addr: http,
        grpc_addr: grpc,
        raft_addr: raft,
        advertise_http: None,
        advertise_grpc: None,
        advertise_raft: None,
        bootstrap: true,
        peers: vec![Peer {
            id: 1,
            raft: raft.to_string(),
            http: http.to_string(),
            grpc: grpc.to_string(),
        }],
        admin_token: Some(admin_token),
        admin_token_file: None,
        operators: Vec::new(),
        metrics_token: None,
        backend_tokens: Vec::new(),
        identity: None,
        challenge_providers: Vec::new(),
        tokens: TokensConfig {
            ticket_keys: vec![TicketKey {
                id: "dev".into(),
                secret: get("ticket_secret")?,
            }],
            jwt_seed: get("jwt_seed")?,
            jwt_key_id: "dev".into(),
            // Older dev directories have none: their node is on loopback anyway.
            cluster_secret: secrets
                .get("cluster_secret")
                .and_then(|v| v.as_str())
                .map(str::to_string),
            // The draw key derives from the cluster secret.
            ..TokensConfig::default()
        },
        tokens_file: None,
        tls: None,
        http_tls: None,
        log_format: "text".into(),
        trusted_proxies: Vec::new(),
        trust_forwarded_for: None,
        secure_cookies: false,
        // One person's node: fewer connections than a production node, which any open-file
        // limit holds (no warning about it on a first start).
        limits: Limits {
            connections_max: Some(1_000),
            grpc_connections_max: Some(1_000),
            ..Limits::default()
        },
        raft: RaftTuning::default(),
        ledger: Default::default(),
        archive: None,
        webhooks: Vec::new(),
    })
}
