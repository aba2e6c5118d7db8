//! The `sluice` binary: `dev`, `serve`, `ctl`, `keygen`.

use anyhow::Context;
use clap::{Parser, Subcommand};
use sluice_api::config::{
    random_secret, random_token, Limits, Peer, RaftTuning, ServerConfig, TicketKey, TokensConfig,
};
use sluice_api::ctl::{self, CtlArgs};
use sluice_api::server;
use sluice_statemachine::{Command, RoomConfig};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

// mimalloc returns freed memory to the system promptly and keeps fragmentation across the runtime's
// threads low: with glibc's allocator a node holding a million waiters sat up to 50 MiB higher.
// It is built without transparent huge pages (`no_thp`): with them, a page fault in a fresh region
// could wait milliseconds for the kernel to assemble a 2 MiB page, and the state machine's growing
// tables took such faults on every node at the same log entry.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Debug, Parser)]
#[command(
    name = "sluice",
    version,
    about = "A self-hosted virtual waiting room and admission coordinator"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// One local node with a demo room: the quickest way to try Sluice.
    Dev {
        /// Where data lives (created if missing).
        #[arg(long, default_value = "sluice-data")]
        data_dir: PathBuf,
        #[arg(long, default_value = "127.0.0.1:8080")]
        http_addr: SocketAddr,
        #[arg(long, default_value = "127.0.0.1:50051")]
        grpc_addr: SocketAddr,
        #[arg(long, default_value = "127.0.0.1:7000")]
        raft_addr: SocketAddr,
        /// Operator token, at least 32 characters (default: generated once and kept in the data
        /// directory). Prefer the environment variable: others can read a command line in `ps`.
        #[arg(long, env = "SLUICE_ADMIN_TOKEN", hide_env_values = true)]
        admin_token: Option<String>,
        /// Log as JSON.
        #[arg(long)]
        json_logs: bool,
    },
    /// One node of a cluster, configured by a TOML file (see deploy/sluice.example.toml).
    Serve {
        #[arg(long, env = "SLUICE_CONFIG")]
        config: PathBuf,
        #[arg(long, env = "SLUICE_NODE_ID")]
        node_id: Option<u64>,
        #[arg(long, env = "SLUICE_DATA_DIR")]
        data_dir: Option<PathBuf>,
        #[arg(long, env = "SLUICE_HTTP_ADDR")]
        http_addr: Option<SocketAddr>,
        #[arg(long, env = "SLUICE_GRPC_ADDR")]
        grpc_addr: Option<SocketAddr>,
        #[arg(long, env = "SLUICE_RAFT_ADDR")]
        raft_addr: Option<SocketAddr>,
        /// Operator token (over the configuration's). Prefer the environment variable or the
        /// configuration's admin_token_file: others can read a command line in `ps`.
        #[arg(long, env = "SLUICE_ADMIN_TOKEN", hide_env_values = true)]
        admin_token: Option<String>,
        #[arg(long, env = "SLUICE_BOOTSTRAP")]
        bootstrap: Option<bool>,
        #[arg(long, env = "SLUICE_LOG_FORMAT")]
        log_format: Option<String>,
        /// HTTP address others use to reach this node.
        #[arg(long, env = "SLUICE_ADVERTISE_HTTP")]
        advertise_http: Option<String>,
        /// gRPC address others use.
        #[arg(long, env = "SLUICE_ADVERTISE_GRPC")]
        advertise_grpc: Option<String>,
        /// Node-to-node address others use.
        #[arg(long, env = "SLUICE_ADVERTISE_RAFT")]
        advertise_raft: Option<String>,
    },
    /// Seeds a fresh node's data directory from a backup (`sluice ctl backup`), as a member of a
    /// new cluster made of the configuration's peers. Run it for every node of the new cluster,
    /// then start them all with `bootstrap = false`.
    Restore {
        /// The backup file.
        #[arg(long)]
        backup: PathBuf,
        /// The new node's configuration (its data_dir must not hold a node yet).
        #[arg(long, env = "SLUICE_CONFIG")]
        config: PathBuf,
        /// Overrides the configuration's node_id, as for `serve`.
        #[arg(long, env = "SLUICE_NODE_ID")]
        node_id: Option<u64>,
        /// Overrides the configuration's data_dir, as for `serve` (give the same one the node
        /// will be started with, e.g. the systemd unit's).
        #[arg(long, env = "SLUICE_DATA_DIR")]
        data_dir: Option<PathBuf>,
    },
    /// Operator commands against any node. Exit status: 0 done, 3 worth retrying (no answer,
    /// 429, 502-504), 4 refused as asked (other 4xx), 5 failed on the server, 1 anything else.
    Ctl(CtlArgs),
    /// Prints a fresh [tokens] section for a cluster's configuration (ticket key, admission
    /// token seed, cluster secret): the same on every node. Keep it secret, e.g. in a file
    /// only the node reads (`tokens_file`).
    Keygen {
        /// Print a fresh operator token instead (for `admin_token` or `admin_token_file`).
        #[arg(long)]
        token: bool,
    },
}

/// Log filter without `RUST_LOG`. openraft warns on every failed attempt to reach a peer, some
/// 40 times a second while one is down; the node reports unreachable peers itself instead
/// (`sluice_raft::network::Reachability`), so those two openraft targets log errors only.
const DEFAULT_LOG_FILTER: &str =
    "info,openraft=warn,openraft::replication=error,openraft::core::heartbeat=error";

fn init_logs(json: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| DEFAULT_LOG_FILTER.into());
    let b = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if json {
        b.json().init();
    } else {
        b.init();
    }
}

/// Reads a node's configuration file, with the node id and data directory given on the command
/// line (or in the environment) put over it.
fn load_config(
    path: &std::path::Path,
    node_id: Option<u64>,
    data_dir: Option<PathBuf>,
) -> anyhow::Result<ServerConfig> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut cfg =
        ServerConfig::from_toml(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    if let Some(v) = node_id {
        cfg.node_id = v;
    }
    if let Some(v) = data_dir {
        cfg.data_dir = v;
    }
    cfg.read_tokens_file()
        .map_err(|e| anyhow::anyhow!("{}: tokens_file: {e}", path.display()))?;
    Ok(cfg)
}

/// Serves until SIGTERM or Ctrl-C, then shuts down; or, when the node's Raft core has stopped
/// by itself (it can no longer apply anything), shuts down and fails, so that a supervisor such
/// as systemd restarts the node.
async fn serve_until_stopped(running: server::Running) -> anyhow::Result<()> {
    let node = running.node.clone();
    tokio::select! {
        _ = wait_for_signal() => {
            running.shutdown().await;
            Ok(())
        }
        reason = node.failed() => {
            running.shutdown().await;
            Err(anyhow::anyhow!("the node's Raft core stopped: {reason}"))
        }
    }
}

async fn wait_for_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

fn dev_config(
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
            issuer: "sluice".into(),
            admission_token_ttl_secs: sluice_api::tokens::ADMISSION_TOKEN_TTL_SECS,
            jwt_published_keys: Vec::new(),
            // Older dev directories have none: their node is on loopback anyway.
            cluster_secret: secrets
                .get("cluster_secret")
                .and_then(|v| v.as_str())
                .map(str::to_string),
            cluster_secrets_also_accepted: Vec::new(),
        },
        tokens_file: None,
        tls: None,
        http_tls: None,
        log_format: "text".into(),
        trusted_proxies: Vec::new(),
        trust_forwarded_for: None,
        secure_cookies: false,
        limits: Limits::default(),
        raft: RaftTuning::default(),
    })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Dev {
            data_dir,
            http_addr,
            grpc_addr,
            raft_addr,
            admin_token,
            json_logs,
        } => {
            init_logs(json_logs);
            let cfg = dev_config(&data_dir, http_addr, grpc_addr, raft_addr, admin_token)?;
            let running = server::start(&cfg, Some("demo".into())).await?;
            if !running.wait_ready(Duration::from_secs(30)).await {
                anyhow::bail!("the node did not become ready");
            }
            if running
                .node
                .read(|st| st.sm.room("demo").is_none())
                .map(|(m, _)| m)
                .unwrap_or(true)
            {
                let config = RoomConfig {
                    capacity: 2,
                    admit_per_minute: 600,
                    session_ttl_secs: 60,
                    waiter_ttl_secs: 60,
                    ..RoomConfig::default()
                };
                running
                    .node
                    .write(Command::PutRoom {
                        room: "demo".into(),
                        config,
                    })
                    .await
                    .map_err(|e| anyhow::anyhow!("{e}"))?;
            }
            let h = running.http_addr;
            println!(
                "Sluice is running (one node, data in {}).",
                data_dir.display()
            );
            println!();
            println!(
                "  Waiting room:   http://{h}/wait/demo?next=/demo   (capacity 2: open it in a few different browsers or browser profiles)"
            );
            println!("  Dashboard:      http://{h}/admin");
            println!("  API document:   http://{h}/openapi.json");
            println!("  gRPC:           {}", running.grpc_addr);
            let token_file = data_dir.join("admin-token");
            println!(
                "  Operator token: {} (also in {})",
                cfg.admin_token.as_deref().unwrap_or_default(),
                token_file.display()
            );
            println!();
            println!(
                "  Try: sluice ctl --url http://{h} --token-file {} rooms list",
                token_file.display()
            );
            serve_until_stopped(running).await?;
        }
        Cmd::Restore {
            backup,
            config,
            node_id,
            data_dir,
        } => {
            let cfg = load_config(&config, node_id, data_dir)?;
            // The node must be able to start on what is written, as a member of the new cluster.
            cfg.validate()
                .map_err(|e| anyhow::anyhow!("{}: {e}", config.display()))?;
            if !cfg.peers.iter().any(|p| p.id == cfg.node_id) {
                anyhow::bail!(
                    "node {} is not among the configuration's [[peers]], the new cluster's members",
                    cfg.node_id
                );
            }
            let bytes =
                std::fs::read(&backup).with_context(|| format!("reading {}", backup.display()))?;
            let members = cfg
                .peers
                .iter()
                .map(|p| {
                    (
                        p.id,
                        sluice_raft::NodeAddr {
                            raft: p.raft.clone(),
                            http: p.http.clone(),
                            grpc: p.grpc.clone(),
                        },
                    )
                })
                .collect();
            let dir = cfg.data_dir;
            let b = sluice_raft::sm_store::seed_from_backup(&dir, &bytes, cfg.node_id, members)
                .with_context(|| format!("seeding {}", dir.display()))?;
            println!(
                "restored {} rooms at log index {} into {}; content digest {}",
                b.sm.rooms().len(),
                b.last_log_id.map_or(0, |l| l.index),
                dir.display(),
                sluice_statemachine::digest_hex(&b.sm.content_digest())
            );
        }
        Cmd::Serve {
            config,
            node_id,
            data_dir,
            http_addr,
            grpc_addr,
            raft_addr,
            admin_token,
            bootstrap,
            log_format,
            advertise_http,
            advertise_grpc,
            advertise_raft,
        } => {
            let mut cfg = load_config(&config, node_id, data_dir)?;
            if let Some(v) = http_addr {
                cfg.http_addr = v;
            }
            if let Some(v) = grpc_addr {
                cfg.grpc_addr = v;
            }
            if let Some(v) = raft_addr {
                cfg.raft_addr = v;
            }
            if let Some(v) = admin_token {
                cfg.admin_token = Some(v);
            }
            if let Some(v) = bootstrap {
                cfg.bootstrap = v;
            }
            if let Some(v) = log_format {
                cfg.log_format = v;
            }
            cfg.advertise_http = advertise_http.or(cfg.advertise_http);
            cfg.advertise_grpc = advertise_grpc.or(cfg.advertise_grpc);
            cfg.advertise_raft = advertise_raft.or(cfg.advertise_raft);
            cfg.validate()
                .map_err(|e| anyhow::anyhow!("{}: {e}", config.display()))?;
            init_logs(cfg.log_format == "json");
            let running = server::start(&cfg, None).await?;
            println!(
                "listening http={} grpc={} raft={}",
                running.http_addr,
                running.grpc_addr,
                running.node.raft_addr()
            );
            serve_until_stopped(running).await?;
        }
        Cmd::Ctl(args) => {
            if let Err(e) = ctl::run(args).await {
                eprintln!("Error: {e:#}");
                std::process::exit(ctl::exit_code(&e));
            }
        }
        Cmd::Keygen { token: true } => {
            println!("{}", random_token());
        }
        Cmd::Keygen { token: false } => {
            println!("# Secrets of one cluster: the same on every node, and known to nobody else.");
            println!("[tokens]");
            println!(
                "ticket_keys = [{{ id = \"k1\", secret = \"{}\" }}]",
                random_secret()
            );
            println!("jwt_seed = \"{}\"", random_secret());
            println!("jwt_key_id = \"j1\"");
            println!("cluster_secret = \"{}\"", random_secret());
        }
    }
    Ok(())
}
