//! The `sluice` binary: `dev`, `serve`, `ctl`, `keygen`.

use anyhow::Context;
use clap::{Parser, Subcommand};
use sluice_api::config::{random_secret, random_token, ServerConfig};
use sluice_api::server;
use sluice_ctl::CtlArgs;
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
    #[command(
        after_help = "Example:\n  sluice dev --data-dir /tmp/sluice-demo --http-addr 127.0.0.1:9090"
    )]
    Dev {
        /// Where data lives (created if missing).
        #[arg(long, default_value = "sluice-data")]
        data_dir: PathBuf,
        /// Where browsers, proxies and `sluice ctl` reach the node (HTTP), ip:port.
        #[arg(long, default_value = "127.0.0.1:8080")]
        http_addr: SocketAddr,
        /// Where backends reach the node (gRPC), ip:port.
        #[arg(long, default_value = "127.0.0.1:50051")]
        grpc_addr: SocketAddr,
        /// The node-to-node (Raft) address, ip:port.
        #[arg(long, default_value = "127.0.0.1:7000")]
        raft_addr: SocketAddr,
        /// Operator token, at least 32 characters (default: generated once and kept in the data
        /// directory). Prefer the environment variable: others can read a command line in `ps`.
        #[arg(long, env = "SLUICE_ADMIN_TOKEN", hide_env_values = true)]
        admin_token: Option<String>,
        /// Log as JSON, one object a line (default: text).
        #[arg(long)]
        json_logs: bool,
    },
    /// One node of a cluster, configured by a TOML file.
    ///
    /// The file is described in deploy/sluice.example.toml; every flag overrides the file's
    /// setting of the same name.
    #[command(after_help = SERVE_HELP)]
    Serve(ServeArgs),
    /// Seeds a fresh node's data directory from a backup (`sluice ctl backup`).
    ///
    /// The node becomes a member of a new cluster made of the configuration's peers. Run it for
    /// every node of the new cluster, then start them all with `bootstrap = false`.
    #[command(
        after_help = "Example:\n  sluice restore --backup sluice-2026-11-30.backup --config /etc/sluice/node1.toml --data-dir /var/lib/sluice/node1"
    )]
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
    /// Operator commands against any node (rooms, codes, pools, cluster, backup).
    Ctl(CtlArgs),
    /// Replays a node's log archive through the state machine and checks it: every entry
    /// applied again, every ledger record made again and compared with the archived one, every
    /// revealed draw secret checked against its commitment and every draw against its secret,
    /// every checkpoint's state digest and ledger chain compared. Exits 1 on any mismatch.
    #[command(
        after_help = "Examples:\n  sluice replay --archive /var/lib/sluice/archive --config /etc/sluice/node1.toml\n  sluice replay --archive ./archive --room sale --to 1200000"
    )]
    Replay {
        /// The archive directory (the node's `[archive] dir`, or a copy of it).
        #[arg(long)]
        archive: PathBuf,
        /// A node's configuration, for the draw key (`tokens.draw_secret`, else the cluster
        /// secret). Without it, rooms that draw replay with other secrets (their records and
        /// digests then differ), but every draw is still checked against its revealed secret.
        #[arg(long, env = "SLUICE_CONFIG")]
        config: Option<PathBuf>,
        /// Count this room's records (every room is replayed all the same).
        #[arg(long)]
        room: Option<String>,
        /// Stop after this log index.
        #[arg(long)]
        to: Option<u64>,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Prints a fresh `[tokens]` section for a cluster's configuration, or an operator token.
    ///
    /// The section (ticket key, admission token seed, cluster secret) is the same on every
    /// node. Keep it secret, e.g. in a file only the node reads (`tokens_file`). With
    /// --operator, a named operator's token and the lines that configure it.
    #[command(
        after_help = "Examples:\n  sluice keygen > tokens.toml\n  sluice keygen --token > admin-token\n  sluice keygen --operator alice --role operator >> sluice.toml"
    )]
    Keygen {
        /// Print a fresh operator token instead (for `admin_token` or `admin_token_file`).
        #[arg(long, conflicts_with = "operator")]
        token: bool,
        /// Make a named operator's token instead: the `[[operators]]` lines with its hash go to
        /// standard output (for every node's configuration), the token itself to standard error,
        /// shown this once (for the operator).
        #[arg(long, value_name = "NAME", requires = "role")]
        operator: Option<String>,
        /// The named operator's role: viewer (reads), operator (also runs rooms and pools) or
        /// admin (also the cluster).
        #[arg(long, requires = "operator", value_parser = ["viewer", "operator", "admin"])]
        role: Option<String>,
    },
}

/// `sluice serve`'s flags: each overrides the configuration file's setting of the same name.
#[derive(Debug, clap::Args)]
struct ServeArgs {
    /// The node's configuration file (TOML).
    #[arg(long, env = "SLUICE_CONFIG")]
    config: PathBuf,
    /// This node's id: a number, unique in the cluster and never reused (overrides
    /// node_id).
    #[arg(long, env = "SLUICE_NODE_ID")]
    node_id: Option<u64>,
    /// Where the node keeps its log, snapshots and state (overrides data_dir).
    #[arg(long, env = "SLUICE_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// The HTTP listener, ip:port (overrides http_addr).
    #[arg(long, env = "SLUICE_HTTP_ADDR")]
    http_addr: Option<SocketAddr>,
    /// The gRPC listener, ip:port (overrides grpc_addr).
    #[arg(long, env = "SLUICE_GRPC_ADDR")]
    grpc_addr: Option<SocketAddr>,
    /// The node-to-node (Raft) listener, ip:port (overrides raft_addr).
    #[arg(long, env = "SLUICE_RAFT_ADDR")]
    raft_addr: Option<SocketAddr>,
    /// Operator token, at least 32 characters (overrides the configuration's). Prefer the
    /// environment variable or the configuration's admin_token_file: others can read a
    /// command line in `ps`.
    #[arg(long, env = "SLUICE_ADMIN_TOKEN", hide_env_values = true)]
    admin_token: Option<String>,
    /// true on exactly one node of a new cluster: it creates the cluster on its first
    /// start (later starts ignore it); false on the others (overrides bootstrap).
    #[arg(long, env = "SLUICE_BOOTSTRAP")]
    bootstrap: Option<bool>,
    /// Log format: text or json (overrides log_format; default text). Verbosity: RUST_LOG.
    #[arg(long, env = "SLUICE_LOG_FORMAT")]
    log_format: Option<String>,
    /// HTTP address others use to reach this node, host:port (default: http_addr).
    #[arg(long, env = "SLUICE_ADVERTISE_HTTP")]
    advertise_http: Option<String>,
    /// gRPC address others use, host:port (default: grpc_addr).
    #[arg(long, env = "SLUICE_ADVERTISE_GRPC")]
    advertise_grpc: Option<String>,
    /// Node-to-node address others use, host:port (default: raft_addr).
    #[arg(long, env = "SLUICE_ADVERTISE_RAFT")]
    advertise_raft: Option<String>,
}

const SERVE_HELP: &str = "\
Log verbosity: RUST_LOG (e.g. RUST_LOG=info,sluice_raft=debug) replaces the default filter:
info, without openraft's warning for every failed attempt to reach a peer.

Example:
  sluice serve --config /etc/sluice/node1.toml --data-dir /var/lib/sluice/node1";

/// Log filter without `RUST_LOG`. openraft warns on every failed attempt to reach a peer, some
/// 20 to 40 times a second while one is down: the replication task (`openraft::replication`),
/// the leader's progress update (`update progress error`, from
/// `openraft::engine::handler::replication_handler`) and the heartbeat
/// (`openraft::core::heartbeat`). The node reports unreachable peers itself instead
/// (`sluice_raft::network::Reachability`), so those openraft targets log errors only; openraft's
/// other warnings stay.
const DEFAULT_LOG_FILTER: &str = "info,openraft=warn,openraft::replication=error,\
openraft::engine::handler::replication_handler=error,openraft::core::heartbeat=error";

/// The log filter: `RUST_LOG` when it is set (and readable), the default otherwise.
fn log_filter(rust_log: Option<&str>) -> tracing_subscriber::EnvFilter {
    rust_log
        .filter(|v| !v.trim().is_empty())
        .and_then(|v| tracing_subscriber::EnvFilter::try_new(v).ok())
        .unwrap_or_else(|| tracing_subscriber::EnvFilter::new(DEFAULT_LOG_FILTER))
}

/// openraft's note that it dropped a message sent under a vote that has since changed (`A
/// message will be ignored because …`): what Raft does with a stale message, nothing for an
/// operator to act on, and written at every clean start (the first election moves the vote while
/// the first write's notice is on its way). Dropped when `quiet` (the default filter); `RUST_LOG`
/// shows it.
struct StaleMessages {
    quiet: bool,
}

impl StaleMessages {
    fn keeps(&self, event: &tracing::Event<'_>) -> bool {
        struct Message(bool);
        impl tracing::field::Visit for Message {
            fn record_debug(&mut self, f: &tracing::field::Field, v: &dyn std::fmt::Debug) {
                if f.name() == "message" {
                    self.0 = format!("{v:?}").starts_with("A message will be ignored because");
                }
            }
        }
        if !self.quiet || event.metadata().target() != "openraft::core::raft_core" {
            return true;
        }
        let mut m = Message(false);
        event.record(&mut m);
        !m.0
    }
}

impl<S> tracing_subscriber::layer::Filter<S> for StaleMessages {
    fn enabled(
        &self,
        _: &tracing::Metadata<'_>,
        _: &tracing_subscriber::layer::Context<'_, S>,
    ) -> bool {
        true
    }

    fn event_enabled(
        &self,
        event: &tracing::Event<'_>,
        _: &tracing_subscriber::layer::Context<'_, S>,
    ) -> bool {
        self.keeps(event)
    }
}

fn init_logs(json: bool) {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::Layer;
    let rust_log = std::env::var("RUST_LOG").ok();
    let quiet = rust_log.as_deref().is_none_or(|v| v.trim().is_empty());
    let filter = log_filter(rust_log.as_deref());
    // Colours only for a person at a terminal, never into a file or a journal.
    use std::io::IsTerminal;
    let layer = tracing_subscriber::fmt::layer()
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    let layer = if json {
        layer.json().boxed()
    } else {
        layer.boxed()
    };
    tracing_subscriber::registry()
        .with(
            layer
                .with_filter(filter)
                .with_filter(StaleMessages { quiet }),
        )
        .init();
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

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    match Cli::parse().cmd {
        Cmd::Dev {
            data_dir,
            http_addr,
            grpc_addr,
            raft_addr,
            admin_token,
            json_logs,
        } => {
            init_logs(json_logs);
            let cfg =
                sluice_api::dev::config(&data_dir, http_addr, grpc_addr, raft_addr, admin_token)?;
            dev(&cfg, &data_dir).await
        }
        Cmd::Restore {
            backup,
            config,
            node_id,
            data_dir,
        } => restore(&backup, &config, node_id, data_dir),
        Cmd::Serve(args) => serve(args).await,
        Cmd::Ctl(args) => {
            let code = sluice_ctl::main(args).await;
            if code != 0 {
                std::process::exit(code);
            }
            Ok(())
        }
        Cmd::Replay {
            archive,
            config,
            room,
            to,
            json,
        } => {
            let code = replay(&archive, config.as_deref(), room, to, json)?;
            if code != 0 {
                std::process::exit(code);
            }
            Ok(())
        }
        Cmd::Keygen { token: true, .. } => {
            println!("{}", random_token());
            Ok(())
        }
        Cmd::Keygen {
            operator: Some(name),
            role: Some(role),
            ..
        } => keygen_operator(&name, &role),
        Cmd::Keygen { .. } => {
            keygen();
            Ok(())
        }
    }
}

/// `sluice dev`: one node with the demo room, and how to reach it.
async fn dev(cfg: &ServerConfig, data_dir: &std::path::Path) -> anyhow::Result<()> {
    let running = server::start(cfg, Some("demo".into())).await?;
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
    serve_until_stopped(running).await
}

/// `sluice replay`: the archive replayed and checked; the exit code (1 on any mismatch).
fn replay(
    archive: &std::path::Path,
    config: Option<&std::path::Path>,
    room: Option<String>,
    to: Option<u64>,
    json: bool,
) -> anyhow::Result<i32> {
    use sluice_raft::{replay, ReplayOptions};
    let key = match config {
        Some(path) => load_config(path, None, None)?
            .draw_key()
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?
            .unwrap_or_default(),
        None => {
            eprintln!(
                "No --config: rooms that draw are replayed without the nodes' draw key; their \
                 draws are checked against the revealed secrets only."
            );
            Default::default()
        }
    };
    let opts = ReplayOptions { key, to, room };
    let started = std::time::Instant::now();
    let (report, _) =
        replay(archive, &opts).with_context(|| format!("replaying {}", archive.display()))?;
    let secs = started.elapsed().as_secs_f64();
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", replay_summary(&report, secs, opts.room.as_deref()));
    }
    Ok(if report.ok() { 0 } else { 1 })
}

/// The replay's report in sentences.
fn replay_summary(r: &sluice_raft::ReplayReport, secs: f64, room: Option<&str>) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let rate = if secs > 0.0 {
        r.entries as f64 / secs
    } else {
        0.0
    };
    let start = if r.from == 0 {
        "the log's beginning".to_string()
    } else {
        format!("the base snapshot at index {}", r.from)
    };
    let _ = writeln!(
        out,
        "Replayed {} entries from {start} through index {}, from {} segments ({:.0} entries/s).",
        r.entries, r.through, r.segments, rate
    );
    let _ = writeln!(
        out,
        "  Ledger records made again and compared with the archive: {}{}",
        r.records,
        room.map(|n| format!(" ({} of room {n})", r.room_records))
            .unwrap_or_default()
    );
    let _ = writeln!(
        out,
        "  Checkpoints matched (state digest and ledger chain): {}",
        r.checkpoints
    );
    let _ = writeln!(
        out,
        "  Draw secrets revealed and checked against their commitments: {}; draws checked \
         against them: {}; draws whose secret is not revealed yet: {}",
        r.reveals, r.draws_verified, r.draws_unrevealed
    );
    if !r.restarts.is_empty() {
        let _ = writeln!(
            out,
            "  Went on from the base snapshot at index {} past entries this node's log never held \
             (it installed the snapshot instead of the entries).",
            r.restarts
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if r.ok() {
        let _ = writeln!(
            out,
            "Verdict: the archive matches its log: every record, draw and checkpoint."
        );
    } else {
        for m in r.mismatches.iter().take(20) {
            let _ = writeln!(out, "  MISMATCH {m}");
        }
        if r.mismatches.len() > 20 {
            let _ = writeln!(out, "  … and {} more", r.mismatches.len() - 20);
        }
        let _ = writeln!(
            out,
            "Verdict: MISMATCH: {} problem(s); the archive does not match its log.",
            r.mismatches.len()
        );
    }
    out
}

/// `sluice restore`: a fresh node's data directory seeded from a backup.
fn restore(
    backup: &std::path::Path,
    config: &std::path::Path,
    node_id: Option<u64>,
    data_dir: Option<PathBuf>,
) -> anyhow::Result<()> {
    let cfg = load_config(config, node_id, data_dir)?;
    // The node must be able to start on what is written, as a member of the new cluster.
    cfg.validate()
        .map_err(|e| anyhow::anyhow!("{}: {e}", config.display()))?;
    if !cfg.peers.iter().any(|p| p.id == cfg.node_id) {
        anyhow::bail!(
            "node {} is not among the configuration's [[peers]], the new cluster's members",
            cfg.node_id
        );
    }
    let bytes = std::fs::read(backup).with_context(|| format!("reading {}", backup.display()))?;
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
    let b = sluice_raft::seed_from_backup(&dir, &bytes, cfg.node_id, members)
        .with_context(|| format!("seeding {}", dir.display()))?;
    println!(
        "restored {} rooms at log index {} into {}; content digest {}",
        b.sm.rooms().len(),
        b.last_log_id.map_or(0, |l| l.index),
        dir.display(),
        sluice_statemachine::digest_hex(&b.sm.content_digest())
    );
    Ok(())
}

/// `sluice serve`: one node of a cluster, its configuration file with the flags over it.
async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let ServeArgs {
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
    } = args;
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
    serve_until_stopped(running).await
}

/// `sluice keygen`: a fresh `[tokens]` section.
fn keygen() {
    println!("# Secrets of one cluster: the same on every node, and known to nobody else.");
    println!("[tokens]");
    println!(
        "ticket_keys = [{{ id = \"k1\", secret = \"{}\" }}]",
        random_secret()
    );
    println!("jwt_seed = \"{}\"", random_secret());
    println!("jwt_key_id = \"j1\"");
    println!("cluster_secret = \"{}\"", random_secret());
    println!("# Rooms' lottery draws derive from this: never change it while a room draws.");
    println!("draw_secret = \"{}\"", random_secret());
}

/// `sluice keygen --operator NAME --role ROLE`: a fresh token for a named operator, shown
/// once on standard error, and the configuration lines with its hash on standard output.
fn keygen_operator(name: &str, role: &str) -> anyhow::Result<()> {
    use sluice_ops::operators::{hex, token_hash, OperatorConfig, Role};
    let role =
        Role::parse(role).ok_or_else(|| anyhow::anyhow!("--role: viewer, operator or admin"))?;
    let token = random_token();
    let entry = OperatorConfig {
        name: name.to_string(),
        role,
        token_sha256: hex(&token_hash(&token)),
    };
    sluice_ops::operators::validate(std::slice::from_ref(&entry)).map_err(anyhow::Error::msg)?;
    println!("# The operator {name} ({role}): the same lines on every node, then restart them.");
    println!("[[operators]]");
    println!("name = \"{name}\"");
    println!("role = \"{role}\"");
    println!("token_sha256 = \"{}\"", entry.token_sha256);
    eprintln!("{name}'s token, shown this once (give it to {name}; the nodes keep only its hash):");
    eprintln!("{token}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// What a subscriber with `filter` writes for openraft's per-attempt warnings, one of its
    /// other warnings, an openraft error, and a line of Sluice's own.
    fn logged(filter: tracing_subscriber::EnvFilter) -> String {
        let buf = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let out = buf.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_ansi(false)
            .with_writer(move || Sink(out.clone()))
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            tracing::warn!(target: "openraft::engine::handler::replication_handler", "update progress error");
            tracing::warn!(target: "openraft::replication", "ReplicationCore recv RPCError");
            tracing::warn!(target: "openraft::core::heartbeat::worker", "failed to send a heartbeat");
            tracing::warn!(target: "openraft::core::raft_core", "while requesting vote");
            tracing::error!(target: "openraft::engine::handler::replication_handler", "a real error");
            tracing::info!(target: "sluice_api::server", "node started");
        });
        let text = String::from_utf8(buf.lock().unwrap().clone()).unwrap();
        text
    }

    struct Sink(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Sink {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// A clean start writes no openraft warning: its note of a dropped stale message is quiet
    /// under the default filter, and shown when `RUST_LOG` asks.
    #[test]
    fn stale_message_notes_are_quiet_by_default() {
        use tracing_subscriber::layer::SubscriberExt;
        use tracing_subscriber::Layer;
        for quiet in [true, false] {
            let buf = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
            let out = buf.clone();
            let layer = tracing_subscriber::fmt::layer()
                .with_ansi(false)
                .with_writer(move || Sink(out.clone()))
                .with_filter(log_filter(None))
                .with_filter(StaleMessages { quiet });
            let subscriber = tracing_subscriber::registry().with(layer);
            tracing::subscriber::with_default(subscriber, || {
                tracing::warn!(target: "openraft::core::raft_core", "A message will be ignored because Leader vote changed: msg sent by vote: <T0-N1:Q>");
                tracing::warn!(target: "openraft::core::raft_core", "while requesting vote");
            });
            let text = String::from_utf8(buf.lock().unwrap().clone()).unwrap();
            assert!(text.contains("while requesting vote"), "{text}");
            assert_eq!(text.contains("will be ignored"), !quiet, "{text}");
        }
    }

    #[test]
    fn the_default_filter_silences_openraft_retries_and_rust_log_overrides_it() {
        for unset in [None, Some(""), Some("  ")] {
            let text = logged(log_filter(unset));
            for quiet in [
                "update progress error",
                "RPCError",
                "failed to send a heartbeat",
            ] {
                assert!(!text.contains(quiet), "{quiet} with {unset:?}:\n{text}");
            }
            for kept in ["while requesting vote", "a real error", "node started"] {
                assert!(text.contains(kept), "{kept} with {unset:?}:\n{text}");
            }
        }
        let text = logged(log_filter(Some("warn")));
        assert!(text.contains("update progress error"), "{text}");
        assert!(!text.contains("node started"), "{text}");
    }

    /// Every flag and positional argument of every command says what it takes, and every
    /// command shows an example.
    #[test]
    fn every_argument_has_help_and_every_command_an_example() {
        fn check(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            let path = format!("{path} {}", cmd.get_name());
            let after = cmd
                .get_after_help()
                .map(|h| h.to_string())
                .unwrap_or_default();
            if !after.contains("Example") {
                missing.push(format!("{path}: no example"));
            }
            for a in cmd.get_arguments() {
                let id = a.get_id().as_str();
                if id == "help" || id == "version" {
                    continue;
                }
                if a.get_help().is_none_or(|h| h.to_string().trim().is_empty()) {
                    missing.push(format!("{path} {id}: no help"));
                }
            }
            for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
                check(sub, &path, missing);
            }
        }
        let mut missing = Vec::new();
        let cli = Cli::command();
        for sub in cli.get_subcommands().filter(|s| s.get_name() != "help") {
            check(sub, "sluice", &mut missing);
        }
        assert!(missing.is_empty(), "{missing:#?}");
        let serve = Cli::command()
            .find_subcommand_mut("serve")
            .unwrap()
            .render_long_help()
            .to_string();
        for flag in [
            "--config",
            "--node-id",
            "--bootstrap",
            "--log-format",
            "RUST_LOG",
        ] {
            assert!(serve.contains(flag), "{flag}:\n{serve}");
        }
    }
}
