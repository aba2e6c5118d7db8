//! Starting a node with its HTTP and gRPC servers, and stopping it gracefully.

use crate::config::ServerConfig;
use anyhow::Context;
use sluice_gate::listener::{gated_incoming, ConnectionGate, ConnectionLimits, Prefixed, Slot};
use sluice_grpc::guard::OperatorGuard;
use sluice_grpc::pb;
use sluice_grpc::services::Grpc;
use sluice_ops::core::Sluice;
use sluice_ops::tokens::TicketKeys;
use sluice_raft::{NodeAddr, NodeConfig, RaftNode, TlsMaterial};
use sluice_web::app::App;
use sluice_web::edge::{Edge, InFlight, PerAddress};
use sluice_web::http::router;
use sluice_web::metrics::Metrics;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// A running node.
#[derive(Debug)]
pub struct Running {
    /// Bound HTTP address.
    pub http_addr: SocketAddr,
    /// Bound gRPC address.
    pub grpc_addr: SocketAddr,
    /// The Raft node.
    pub node: RaftNode,
    /// The shared operations.
    pub sluice: Arc<Sluice>,
    cancel: CancellationToken,
    servers: Vec<JoinHandle<()>>,
}

pub use crate::config::ADMIN_TOKEN_CHARS_MIN;

fn read(path: &std::path::Path) -> anyhow::Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("reading {}", path.display()))
}

/// Starts a node from its configuration: Raft, then the HTTP and gRPC servers. With
/// `cfg.bootstrap`, initializes the cluster from `cfg.peers` if it has never been initialized.
pub async fn start(cfg: &ServerConfig, demo_room: Option<String>) -> anyhow::Result<Running> {
    cfg.validate().map_err(anyhow::Error::msg)?;
    // Checked before the node starts (and perhaps bootstraps a cluster), not after.
    cfg.refuse_published_secrets().map_err(anyhow::Error::msg)?;
    let auth = operator_auth(cfg)?;
    let http_listener = bind(cfg.http_addr).await?;
    let grpc_listener = bind(cfg.grpc_addr).await?;
    let http_addr = http_listener.local_addr()?;
    let grpc_addr = grpc_listener.local_addr()?;

    let nc = node_config(cfg, http_addr, grpc_addr)?;
    let node = RaftNode::start(nc)
        .await
        .map_err(|e| anyhow::anyhow!("starting the node: {e}"))?;
    bootstrap_if_asked(cfg, &node).await?;

    let (machine, memory_from) = crate::budget::machine();
    let budget = crate::budget::Budget::new(&cfg.limits, machine);
    budget.log(machine, memory_from);
    let cancel = CancellationToken::new();
    let sluice = sluice(cfg, &node, budget.event_streams, &cancel)?;
    sluice_ops::origin::start(sluice.clone(), cancel.clone());
    sluice_ops::watch::follow_applies(sluice.clone(), cancel.clone());
    let app = Arc::new(app(cfg, sluice.clone(), auth.clone(), demo_room)?);

    let (limits, connection_limits) = listener_limits(cfg, budget.http_connections)?;
    let grpc_connection_limits = ConnectionLimits {
        connections_max: budget.grpc_connections,
        ..connection_limits.clone()
    };
    let servers = vec![
        spawn_http(
            cfg,
            http_listener,
            &app,
            limits,
            &connection_limits,
            &cancel,
        )?,
        spawn_grpc(
            cfg,
            grpc_listener,
            &app,
            auth,
            limits,
            grpc_connection_limits,
            &cancel,
        )
        .await?,
    ];
    spawn_upkeep(&app, &cancel);
    sluice_ops::webhook::spawn(
        node.clone(),
        &cfg.webhooks,
        app.metrics.webhooks.clone(),
        cancel.clone(),
    )
    .map_err(anyhow::Error::msg)?;

    tracing::info!(%http_addr, %grpc_addr, raft_addr = %node.raft_addr(), id = cfg.node_id, "node started");
    Ok(Running {
        http_addr,
        grpc_addr,
        node,
        sluice,
        cancel,
        servers,
    })
}

/// What both edges share: the operations, the request counters, the operators' keys, the
/// per-client rate, the proxies trusted, the cookies' settings.
fn app(
    cfg: &ServerConfig,
    sluice: Arc<Sluice>,
    auth: Arc<sluice_ops::auth::OperatorAuth>,
    demo_room: Option<String>,
) -> anyhow::Result<App> {
    let mut app = App::new(
        sluice,
        Arc::new(Metrics::default()),
        auth,
        cfg.limits.visitor_requests_per_second,
        cfg.limits.visitor_burst,
    );
    app.trusted_proxies = cfg.trusted_proxies().map_err(anyhow::Error::msg)?;
    // Over HTTPS cookies are Secure, whether or not the configuration says so.
    app.secure_cookies = cfg.secure_cookies || cfg.http_tls.is_some();
    app.body_bytes_max = cfg.limits.body_bytes_max;
    app.demo_room = demo_room;
    Ok(app)
}

async fn bind(addr: SocketAddr) -> anyhow::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding {addr}"))
}

/// The operators' credentials: the admin token (refused if it is a published sample or too
/// short), the metrics token, named operators and backend tokens.
fn operator_auth(cfg: &ServerConfig) -> anyhow::Result<Arc<sluice_ops::auth::OperatorAuth>> {
    let admin_token = cfg.admin_token().map_err(anyhow::Error::msg)?;
    if crate::config::is_published_secret(&admin_token) {
        anyhow::bail!(
            "the admin token is a sample value published with Sluice: make your own with \
             `sluice keygen --token`"
        );
    }
    if admin_token.chars().count() < ADMIN_TOKEN_CHARS_MIN {
        anyhow::bail!(
            "the admin token must be at least {ADMIN_TOKEN_CHARS_MIN} characters \
             (`sluice keygen` prints a fresh one)"
        );
    }
    Ok(Arc::new(
        sluice_ops::auth::OperatorAuth::new(admin_token, cfg.metrics_token.clone())
            .with_operators(&cfg.operators)
            .map_err(anyhow::Error::msg)?
            .with_backend_tokens(cfg.backend_tokens.clone()),
    ))
}

/// The node's operations, with the token keys and the visitor-facing services they use.
fn sluice(
    cfg: &ServerConfig,
    node: &RaftNode,
    event_streams_max: usize,
    cancel: &CancellationToken,
) -> anyhow::Result<Arc<Sluice>> {
    let ticket_keys = cfg.ticket_keys().map_err(anyhow::Error::msg)?;
    let pow = sluice_ops::pow::PowKeys::new(ticket_keys.iter().map(|(_, s)| s.as_slice()));
    let identity = match &cfg.identity {
        Some(i) => Some(i.keys().map_err(anyhow::Error::msg)?),
        None => None,
    };
    let services = sluice_ops::core::Services {
        tickets: TicketKeys::new(ticket_keys).map_err(anyhow::Error::msg)?,
        pow,
        identity,
        providers: sluice_ops::hook::Providers::new(&cfg.challenge_providers),
        jwt: cfg.jwt_keys().map_err(anyhow::Error::msg)?,
        catch_up_timeout: Duration::from_secs(2),
        watches: sluice_ops::watches::Watches::new(
            event_streams_max,
            cfg.limits.event_streams_per_address_max,
            cancel.clone(),
        ),
    };
    Ok(Arc::new(Sluice::new(
        node.clone(),
        services,
        cancel.clone(),
    )))
}

/// The public listeners' limits: per HTTP connection, and on connections (`connections_max` in
/// all, per client address except trusted proxies', and the deadline for the first bytes).
fn listener_limits(
    cfg: &ServerConfig,
    connections_max: usize,
) -> anyhow::Result<(HttpLimits, ConnectionLimits)> {
    let limits = HttpLimits {
        header_read_timeout: Duration::from_millis(cfg.limits.header_read_timeout_ms),
        header_bytes_max: cfg.limits.header_bytes_max,
        streams_per_connection_max: cfg.limits.streams_per_connection_max,
    };
    let proxies = cfg.trusted_proxies().map_err(anyhow::Error::msg)?;
    let exempt: sluice_gate::listener::Exempt = Arc::new(move |ip| proxies.trusts(ip));
    let connections = ConnectionLimits {
        connections_max,
        per_address_max: cfg.limits.connections_per_address_max,
        first_bytes_timeout: limits.header_read_timeout,
        exempt: Some(exempt),
        reserve: None,
    };
    Ok((limits, connections))
}

/// Serves the HTTP router (over TLS if configured) on `listener`.
fn spawn_http(
    cfg: &ServerConfig,
    listener: tokio::net::TcpListener,
    app: &Arc<App>,
    limits: HttpLimits,
    connection_limits: &ConnectionLimits,
    cancel: &CancellationToken,
) -> anyhow::Result<JoinHandle<()>> {
    let edge = Edge::new(
        router(app.clone()),
        app.clone(),
        app.body_bytes_max,
        cfg.limits.concurrent_requests_max,
        PerAddress::new(
            cfg.limits.requests_per_address_max,
            connection_limits.exempt.clone(),
        ),
    );
    let tls = match &cfg.http_tls {
        None => None,
        Some(t) => Some(tokio_rustls::TlsAcceptor::from(rustls_config(
            &read(&t.cert)?,
            &read(&t.key)?,
        )?)),
    };
    Ok(tokio::spawn(serve_http(
        listener,
        edge,
        tls,
        limits,
        ConnectionGate::new(connection_limits.clone()),
        cancel.clone(),
    )))
}

/// The health and reflection services, serving; requests bounded to `max` bytes as HTTP
/// bodies are (tonic's default is 4 MiB), on the services anyone may call too.
async fn grpc_health_and_reflection(
    max: usize,
) -> anyhow::Result<(
    tonic_health::pb::health_server::HealthServer<impl tonic_health::pb::health_server::Health>,
    tonic_reflection::server::v1::ServerReflectionServer<
        impl tonic_reflection::server::v1::ServerReflection,
    >,
)> {
    let (health_reporter, health_service) = tonic_health::server::health_reporter();
    health_reporter
        .set_serving::<pb::visitor_server::VisitorServer<Grpc>>()
        .await;
    health_reporter
        .set_serving::<pb::admin_server::AdminServer<Grpc>>()
        .await;
    health_reporter
        .set_serving::<pb::cluster_server::ClusterServer<Grpc>>()
        .await;
    let health_service = health_service.max_decoding_message_size(max);
    let reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()?
        .max_decoding_message_size(max);
    Ok((health_service, reflection))
}

/// The public gRPC server's settings: streams, timeouts, pings and header bounds as the HTTP
/// listener's, and its TLS.
fn grpc_server_builder(
    cfg: &ServerConfig,
    limits: &HttpLimits,
) -> anyhow::Result<tonic::transport::Server> {
    let mut builder = tonic::transport::Server::builder()
        .tcp_nodelay(true)
        .concurrency_limit_per_connection(cfg.limits.streams_per_connection_max as usize)
        .max_concurrent_streams(Some(cfg.limits.streams_per_connection_max))
        .timeout(Duration::from_secs(30))
        // Pings find the peers that are gone; `gated_incoming` bounds the connections.
        .http2_keepalive_interval(Some(Duration::from_secs(30)))
        .http2_keepalive_timeout(Some(Duration::from_secs(20)))
        .http2_max_header_list_size(u32::try_from(cfg.limits.header_bytes_max).unwrap_or(u32::MAX));
    if let Some(t) = &cfg.http_tls {
        let identity = tonic::transport::Identity::from_pem(read(&t.cert)?, read(&t.key)?);
        builder = builder.tls_config(
            tonic::transport::ServerTlsConfig::new()
                .identity(identity)
                .timeout(limits.header_read_timeout.min(TLS_HANDSHAKE_MAX)),
        )?;
    }
    if let Some(t) = &cfg.http_tls {
        let identity = tonic::transport::Identity::from_pem(read(&t.cert)?, read(&t.key)?);
        builder = builder.tls_config(
            tonic::transport::ServerTlsConfig::new()
                .identity(identity)
                .timeout(limits.header_read_timeout.min(TLS_HANDSHAKE_MAX)),
        )?;
    }
    Ok(builder)
}

/// Serves the public gRPC services (visitor, admin, cluster, health, reflection) on
/// `listener`: operators' calls need their roles, and a connection must make its first call
/// within the header timeout, as an HTTP one must send its headers ([`CallActivity`] tells the
/// listener it has).
async fn spawn_grpc(
    cfg: &ServerConfig,
    listener: tokio::net::TcpListener,
    app: &Arc<App>,
    auth: Arc<sluice_ops::auth::OperatorAuth>,
    limits: HttpLimits,
    connection_limits: ConnectionLimits,
    cancel: &CancellationToken,
) -> anyhow::Result<JoinHandle<()>> {
    let grpc = Grpc {
        sluice: app.sluice.clone(),
        metrics: app.metrics.clone(),
        backends_need_tokens: !cfg.backend_tokens.is_empty(),
        proxies: app.trusted_proxies.clone(),
    };
    let max = cfg.limits.body_bytes_max;
    let (health_service, reflection) = grpc_health_and_reflection(max).await?;
    let builder = grpc_server_builder(cfg, &limits)?;
    use tonic::service::interceptor::InterceptedService;
    let router = builder
        .layer(tower::layer::layer_fn(CallActivity))
        .add_service(health_service)
        .add_service(reflection)
        .add_service(InterceptedService::new(
            pb::visitor_server::VisitorServer::new(grpc.clone()).max_decoding_message_size(max),
            sluice_grpc::services::visitor_interceptor(
                auth.clone(),
                app.limiter.clone(),
                app.trusted_proxies.clone(),
            ),
        ))
        // Operators' calls: the role each needs, and who is acting (`operators`).
        .add_service(OperatorGuard::new(
            pb::admin_server::AdminServer::new(grpc.clone()).max_decoding_message_size(max),
            auth.clone(),
            app.trusted_proxies.clone(),
        ))
        .add_service(OperatorGuard::new(
            pb::cluster_server::ClusterServer::new(grpc).max_decoding_message_size(max),
            auth,
            app.trusted_proxies.clone(),
        ));
    // A connection whose calls make no progress for the header timeout is closed, as an HTTP
    // one is ([`CallActivity`]).
    let incoming = gated_incoming(
        listener,
        ConnectionGate::new(connection_limits),
        Some(limits.header_read_timeout),
        Some(limits.header_read_timeout),
        cancel.clone(),
    );
    let c = cancel.clone();
    Ok(tokio::spawn(async move {
        if let Err(e) = router
            .serve_with_incoming_shutdown(incoming, c.cancelled_owned())
            .await
        {
            tracing::error!(error = %e, "gRPC server stopped");
        }
    }))
}

/// What the public gRPC listener learns of each call on a connection: that one was made (the
/// connection is no longer held to the deadline for its first one), and while it is in flight,
/// whether it makes progress: its answer's body is asked for its next part (a streamed answer
/// is asked each time its stream wakes; one whose client never opens its flow-control window,
/// or stops reading, is not). The listener closes a connection that makes none for the header
/// timeout ([`sluice_gate::listener::Activity`]).
#[derive(Clone)]
struct CallActivity<S>(S);

impl<S, B, R> tower::Service<axum::http::Request<B>> for CallActivity<S>
where
    S: tower::Service<axum::http::Request<B>, Response = axum::http::Response<R>>,
    S::Future: Send + 'static,
{
    type Response = axum::http::Response<sluice_web::edge::Guarded<R>>;
    type Error = S::Error;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Self::Response, S::Error>> + Send>,
    >;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), S::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, req: axum::http::Request<B>) -> Self::Future {
        let call = sluice_gate::listener::ConnInfo::in_extensions(req.extensions()).map(|conn| {
            conn.mark_authenticated();
            conn.activity.begin()
        });
        let answer = self.0.call(req);
        Box::pin(async move {
            let answer = answer.await?;
            Ok(answer.map(|inner| sluice_web::edge::Guarded { inner, guard: call }))
        })
    }
}

/// A rustls server configuration from PEM files (HTTP/2 and HTTP/1.1 by ALPN).
fn rustls_config(
    cert: &[u8],
    key: &[u8],
) -> anyhow::Result<Arc<tokio_rustls::rustls::ServerConfig>> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let certs = CertificateDer::pem_slice_iter(cert)
        .collect::<Result<Vec<_>, _>>()
        .context("reading the certificate chain")?;
    let key = PrivateKeyDer::from_pem_slice(key).context("reading the private key")?;
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let mut cfg = tokio_rustls::rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

/// Longest a client may take over its TLS handshake (less if `header_read_timeout` is).
const TLS_HANDSHAKE_MAX: Duration = Duration::from_secs(10);

/// The Raft node's configuration from the server's: addresses, timings, TLS and the cluster
/// secrets.
fn node_config(
    cfg: &ServerConfig,
    http_addr: SocketAddr,
    grpc_addr: SocketAddr,
) -> anyhow::Result<NodeConfig> {
    let mut nc = NodeConfig::new(cfg.node_id, &cfg.data_dir, cfg.raft_addr);
    nc.advertise = NodeAddr {
        raft: cfg.advertise_raft.clone().unwrap_or_default(),
        http: cfg
            .advertise_http
            .clone()
            .unwrap_or_else(|| http_addr.to_string()),
        grpc: cfg
            .advertise_grpc
            .clone()
            .unwrap_or_else(|| grpc_addr.to_string()),
    };
    nc.heartbeat_ms = cfg.raft.heartbeat_ms;
    nc.election_timeout_ms = (
        cfg.raft.election_timeout_min_ms,
        cfg.raft.election_timeout_max_ms,
    );
    nc.snapshot_every = cfg.raft.snapshot_every;
    nc.logs_kept_after_snapshot = cfg.raft.logs_kept_after_snapshot;
    nc.proposals_in_flight = cfg.raft.proposals_in_flight;
    nc.pre_vote = cfg.raft.pre_vote;
    nc.request_timeout = Duration::from_millis(cfg.limits.request_timeout_ms);
    if let Some(t) = &cfg.tls {
        nc.tls = Some(TlsMaterial {
            ca_pem: read(&t.ca)?,
            cert_pem: read(&t.cert)?,
            key_pem: read(&t.key)?,
            server_name: t.server_name.clone(),
        });
    }
    nc.ledger = cfg.ledger.retention().map_err(anyhow::Error::msg)?;
    nc.archive = cfg
        .archive
        .as_ref()
        .map(|a| a.node_config())
        .transpose()
        .map_err(anyhow::Error::msg)?;
    nc.draw_key = cfg.draw_key().map_err(anyhow::Error::msg)?.ok_or_else(|| {
        anyhow::anyhow!(
            "no tokens.draw_secret or tokens.cluster_secret: lottery draws and shuffles would \
             derive from a key anyone can know, so anyone could predict them; set \
             tokens.draw_secret (the same on every node; `sluice keygen` makes one)"
        )
    })?;
    draw_key_unchanged(&cfg.data_dir, &nc.draw_key)?;
    cluster_secrets(cfg, &mut nc)?;
    Ok(nc)
}

/// The node's cluster secret and the ones it still accepts, from the server's configuration:
/// with a warning when node-to-node calls go unauthenticated.
fn cluster_secrets(cfg: &ServerConfig, nc: &mut NodeConfig) -> anyhow::Result<()> {
    let secret = |s: &[u8]| {
        sluice_raft::ClusterSecret::new(s)
            .map_err(|e| anyhow::anyhow!("tokens.cluster_secret: {e}"))
    };
    for s in cfg
        .cluster_secrets_also_accepted()
        .map_err(anyhow::Error::msg)?
    {
        nc.cluster_secrets_also_accepted.push(secret(&s)?);
    }
    if let Some(s) = cfg.cluster_secret().map_err(anyhow::Error::msg)? {
        nc.cluster_secret = Some(secret(&s)?);
    } else if nc.tls.is_none() {
        tracing::warn!(
            raft_addr = %cfg.raft_addr,
            "node-to-node calls are not authenticated (no tokens.cluster_secret, no [tls]): \
             any user of this machine who reaches raft_addr controls the cluster, and can write \
             commands in any operator's name; set tokens.cluster_secret (`sluice keygen`)"
        );
    }
    Ok(())
}

/// Makes the cluster of the configured peers, on the node told to bootstrap, unless it has
/// been made already.
async fn bootstrap_if_asked(cfg: &ServerConfig, node: &RaftNode) -> anyhow::Result<()> {
    if cfg.bootstrap
        && !node
            .is_initialized()
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))?
    {
        let members: BTreeMap<u64, NodeAddr> = cfg
            .peers
            .iter()
            .map(|p| {
                let addr = if p.id == cfg.node_id {
                    node.addr()
                } else {
                    NodeAddr {
                        raft: p.raft.clone(),
                        http: p.http.clone(),
                        grpc: p.grpc.clone(),
                    }
                };
                (p.id, addr)
            })
            .collect();
        node.initialize(members)
            .await
            .map_err(|e| anyhow::anyhow!("bootstrapping the cluster: {e}"))?;
        tracing::info!(peers = cfg.peers.len(), "cluster bootstrapped");
    }
    Ok(())
}

/// The node's upkeep: the dashboard's history samples, and forgetting idle clients.
fn spawn_upkeep(app: &Arc<App>, cancel: &CancellationToken) {
    // The dashboard's charts: each room's figures, sampled from this node's applied state.
    let (a, c) = (app.clone(), cancel.clone());
    tokio::spawn(async move {
        let every = Duration::from_secs(sluice_ops::history::SAMPLE_EVERY_SECS);
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = c.cancelled() => break,
                _ = tick.tick() => {
                    let rooms = a.sluice.room_views(sluice_ops::history::ROOMS_TRACKED_MAX);
                    let now = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.as_secs());
                    a.history.record(&rooms, now);
                }
            }
        }
    });

    // Forget idle clients so the limiter's memory stays bounded.
    let (a, c) = (app.clone(), cancel.clone());
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = c.cancelled() => break,
                _ = tokio::time::sleep(Duration::from_secs(60)) => {
                    a.limiter.retain_recent();
                    a.limiter.shrink_to_fit();
                }
            }
        }
    });
}

/// The limits of the HTTP listener's connections (requests have theirs in the router).
#[derive(Clone, Copy)]
struct HttpLimits {
    header_read_timeout: Duration,
    header_bytes_max: usize,
    streams_per_connection_max: u32,
}

/// Serves the router, over TLS if `tls` is given, until cancelled; then lets the connections
/// in flight finish (each gets up to 10 s) before returning. Connections are accepted within
/// `gate`'s bounds (in all, and per client address).
/// A client gets `header_read_timeout` (at most [`TLS_HANDSHAKE_MAX`]) for its TLS handshake,
/// `header_read_timeout` for its first bytes (the whole preface on HTTP/2), and
/// `header_read_timeout` for each request's headers on HTTP/1 (idle keep-alive time included);
/// a connection that makes no progress for `header_read_timeout` (no request in flight, or
/// answers whose bodies could not be sent) is closed, on HTTP/2 too.
async fn serve_http(
    listener: tokio::net::TcpListener,
    edge: Edge,
    tls: Option<tokio_rustls::TlsAcceptor>,
    limits: HttpLimits,
    gate: ConnectionGate,
    cancel: CancellationToken,
) {
    use hyper_util::rt::TokioIo;
    let builders = Arc::new(HttpBuilders::new(&limits));
    let connections = tokio_util::task::TaskTracker::new();
    while let Some((stream, peer, slot)) = gate.accept(&listener, &cancel).await {
        let (tls, edge, cancel, builders) =
            (tls.clone(), edge.clone(), cancel.clone(), builders.clone());
        let header_timeout = limits.header_read_timeout;
        connections.spawn(async move {
            let _slot: Slot = slot;
            let in_flight = InFlight::default();
            let svc = edge.connection(peer, in_flight.clone());
            let idle = (in_flight, header_timeout);
            match tls {
                // A connection that has sent nothing yet has nothing in flight: shutdown closes
                // it at once rather than waiting for its first bytes.
                None => {
                    let opened = cancel.run_until_cancelled(opened(stream, header_timeout));
                    let Some(Some(io)) = opened.await else {
                        return;
                    };
                    let http1 = io.http1;
                    builders
                        .serve(http1, TokioIo::new(io), svc, &cancel, idle)
                        .await
                }
                // Boxed: TLS's state is on the heap of the connections that use it, not in
                // every connection's task.
                Some(acceptor) => {
                    Box::pin(async move {
                        let handshake = tokio::time::timeout(
                            header_timeout.min(TLS_HANDSHAKE_MAX),
                            acceptor.accept(stream),
                        );
                        let Some(Ok(Ok(tls))) = cancel.run_until_cancelled(handshake).await else {
                            return;
                        };
                        // The protocol is the one agreed in the handshake.
                        let http1 = tls.get_ref().1.alpn_protocol() != Some(b"h2");
                        let opened = cancel.run_until_cancelled(opened(tls, header_timeout));
                        let Some(Some(io)) = opened.await else {
                            return;
                        };
                        builders
                            .serve(http1, TokioIo::new(io), svc, &cancel, idle)
                            .await
                    })
                    .await
                }
            }
        });
    }
    connections.close();
    connections.wait().await;
}

/// The HTTP/1 and HTTP/2 connection settings of the public port. The protocol is told apart
/// once, by [`opened`] (or the TLS handshake), and the connection is served by that protocol's
/// own hyper connection: hyper's automatic choice would read the first bytes again and hand
/// HTTP/1 a head cut after them, which doubles every connection's read buffer to 16 KiB, and
/// its connection future holds both protocols' state.
struct HttpBuilders {
    h1: hyper::server::conn::http1::Builder,
    h2: hyper::server::conn::http2::Builder<hyper_util::rt::TokioExecutor>,
}

impl HttpBuilders {
    fn new(limits: &HttpLimits) -> Self {
        use hyper_util::rt::{TokioExecutor, TokioTimer};
        let mut h1 = hyper::server::conn::http1::Builder::new();
        h1.timer(TokioTimer::new())
            .header_read_timeout(limits.header_read_timeout)
            // hyper's default lets each connection's read buffer grow to ~400 KiB for one head.
            .max_buf_size(limits.header_bytes_max);
        // HTTP/2 connections have no header timeout in hyper; pings find the peers that are gone.
        let mut h2 = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
        h2.timer(TokioTimer::new())
            .max_header_list_size(u32::try_from(limits.header_bytes_max).unwrap_or(u32::MAX))
            .max_concurrent_streams(limits.streams_per_connection_max)
            .keep_alive_interval(Some(Duration::from_secs(30)))
            .keep_alive_timeout(Duration::from_secs(20));
        HttpBuilders { h1, h2 }
    }

    /// Serves one connection as [`serve_connection`] says, by HTTP/1 (with upgrades) or by
    /// HTTP/2 (its larger state boxed, so that the many HTTP/1 connections' tasks stay small).
    async fn serve<I, S>(
        &self,
        http1: bool,
        io: I,
        svc: S,
        cancel: &CancellationToken,
        idle: (InFlight, Duration),
    ) where
        I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
        S: hyper::service::Service<
                hyper::Request<hyper::body::Incoming>,
                Response = axum::response::Response,
            > + Clone
            + Send
            + 'static,
        S::Future: Send + 'static,
        S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        if http1 {
            let conn = self.h1.serve_connection(io, svc).with_upgrades();
            serve_connection(conn, |c| c.graceful_shutdown(), cancel, idle).await
        } else {
            let conn = self.h2.serve_connection(io, svc);
            Box::pin(serve_connection(
                conn,
                |c| c.graceful_shutdown(),
                cancel,
                idle,
            ))
            .await
        }
    }
}

/// A connection whose first bytes came within `within`: until they can no longer be the start
/// of an HTTP/2 preface, or hold all of one. hyper's header timeout only starts once it has told
/// HTTP/1 from HTTP/2 by these bytes, and its HTTP/2 server waits for the preface forever, so a
/// client that sends nothing, or part of a preface, is cut off here. `None` if the client closed
/// or was too slow; otherwise the stream with those bytes put back in front.
async fn opened<S: tokio::io::AsyncRead + Unpin>(
    mut s: S,
    within: Duration,
) -> Option<JsonErrors<Prefixed<S>>> {
    use tokio::io::AsyncReadExt;
    const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    let mut got = Vec::with_capacity(1024);
    let read = async {
        while got.len() < PREFACE.len() && PREFACE.starts_with(&got) {
            if s.read_buf(&mut got).await.ok()? == 0 {
                return None;
            }
        }
        Some(())
    };
    tokio::time::timeout(within, read).await.ok()??;
    let http1 = !got.starts_with(PREFACE);
    Some(JsonErrors {
        inner: Prefixed::new(got, s, None),
        http1,
        pending: Vec::new(),
        sent: 0,
    })
}

/// An HTTP/1 connection on which hyper's own error answers (400 for a request it cannot parse,
/// 414, 431 for a head over the limit) get a JSON body like every other error, instead of an
/// empty one. hyper writes such an answer as a head with `content-length: 0`, which no answer of
/// Sluice's has with a 4xx status; that head is rewritten on its way out. (The connection closes
/// after it, as hyper intends.) HTTP/2 connections pass through untouched.
struct JsonErrors<S> {
    inner: S,
    http1: bool,
    /// A rewritten answer being written, and how much of it is out.
    pending: Vec<u8>,
    sent: usize,
}

impl<S> JsonErrors<S> {
    /// The JSON answer for one of hyper's own empty error heads, if `buf` is one.
    fn rewrite(buf: &[u8]) -> Option<Vec<u8>> {
        let (code, text) = match buf.get(..12)? {
            b"HTTP/1.1 400" => ("bad_request", "the request could not be parsed"),
            b"HTTP/1.1 414" => ("uri_too_long", "the request's URI is too long"),
            b"HTTP/1.1 431" => (
                "headers_too_large",
                "the request's line and headers are longer than this node accepts",
            ),
            _ => return None,
        };
        let end = buf.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
        if end != buf.len() {
            return None;
        }
        let head = std::str::from_utf8(&buf[..end]).ok()?;
        if !head
            .to_ascii_lowercase()
            .contains("\r\ncontent-length: 0\r\n")
        {
            return None;
        }
        axum::http::StatusCode::from_bytes(&buf[9..12]).ok()?;
        // Only the body is made here (the status line is hyper's): the kind is not read.
        let body = sluice_web::error::ApiError::new(sluice_web::error::Kind::Invalid, code, text)
            .body()
            .to_string();
        let mut out = Vec::with_capacity(end + body.len() + 64);
        for line in head.trim_end_matches("\r\n").split("\r\n") {
            if line.eq_ignore_ascii_case("content-length: 0") {
                out.extend_from_slice(
                    format!(
                        "content-type: application/json\r\ncontent-length: {}\r\n",
                        body.len()
                    )
                    .as_bytes(),
                );
            } else {
                out.extend_from_slice(line.as_bytes());
                out.extend_from_slice(b"\r\n");
            }
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(body.as_bytes());
        Some(out)
    }
}

impl<S: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for JsonErrors<S> {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<S: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for JsonErrors<S> {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        use std::task::Poll;
        let this = self.get_mut();
        if this.http1 && this.pending.is_empty() {
            if let Some(out) = Self::rewrite(buf) {
                this.pending = out;
                this.sent = 0;
            }
        }
        if this.pending.is_empty() {
            return std::pin::Pin::new(&mut this.inner).poll_write(cx, buf);
        }
        // The rewritten answer stands for all of `buf`: it is reported written once it is out.
        while this.sent < this.pending.len() {
            match std::pin::Pin::new(&mut this.inner).poll_write(cx, &this.pending[this.sent..]) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Ok(0)),
                Poll::Ready(Ok(n)) => this.sent += n,
                other => return other,
            }
        }
        this.pending.clear();
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_write_vectored(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        std::pin::Pin::new(&mut this.inner).poll_write_vectored(cx, bufs)
    }

    /// HTTP/1 answers come in one buffer (so that an error head can be seen whole); HTTP/2
    /// writes as the stream underneath prefers.
    fn is_write_vectored(&self) -> bool {
        !self.http1 && self.inner.is_write_vectored()
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// Serves one connection until it ends, `cancel` fires, or it has made no progress for `idle.1`
/// ([`InFlight::idle_for`]); then finishes its requests in flight (up to 10 s) and closes it,
/// or, when answers in flight made no progress, closes it at once.
async fn serve_connection<C: std::future::Future>(
    conn: C,
    graceful_shutdown: impl FnOnce(std::pin::Pin<&mut C>),
    cancel: &CancellationToken,
    idle: (InFlight, Duration),
) {
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => return,
        _ = cancel.cancelled() => {}
        _ = idle.0.idle_for(idle.1) => {
            // Answers that made no progress for as long (a client that stopped reading) would
            // not finish within a graceful shutdown either: closed at once.
            if idle.0.any_open() {
                return;
            }
        }
    }
    graceful_shutdown(conn.as_mut());
    let _ = tokio::time::timeout(Duration::from_secs(10), conn).await;
}

impl Running {
    /// Stops accepting, lets in-flight requests finish, stops Raft and syncs storage.
    pub async fn shutdown(self) {
        self.cancel.cancel();
        for s in self.servers {
            let _ = tokio::time::timeout(Duration::from_secs(10), s).await;
        }
        self.node.shutdown().await;
        tracing::info!("stopped");
    }

    /// Waits until the node is ready (recovered, leader known).
    pub async fn wait_ready(&self, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if self.sluice.ready().is_ok() {
                return true;
            }
            if tokio::time::Instant::now() > deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// The file in a node's data directory that names its draw key (a one-way fingerprint).
const DRAW_KEY_FILE: &str = "draw-key-fingerprint";

/// Refuses a draw key other than the one this data directory's state was applied with: the
/// state machine derives rooms' draw secrets from it while applying, so a node that replays its
/// log with another key commits to other secrets than its peers and its state diverges. (A
/// changed `tokens.cluster_secret` without `tokens.draw_secret` is the usual way to get here.)
/// A data directory without the file takes the key it is given.
fn draw_key_unchanged(
    data_dir: &std::path::Path,
    key: &sluice_statemachine::draw::DrawKey,
) -> anyhow::Result<()> {
    let fingerprint = sluice_ops::text::hex(
        &blake3::derive_key("sluice 2026-12 draw key fingerprint v1", &key.0)[..16],
    );
    let path = data_dir.join(DRAW_KEY_FILE);
    // A file that is not a whole fingerprint (a crash tore it before it was synced) names no
    // key: it is written again.
    let whole = |t: &str| t.trim().len() == 32 && t.trim().bytes().all(|b| b.is_ascii_hexdigit());
    match std::fs::read_to_string(&path) {
        Ok(known) if known.trim() == fingerprint => Ok(()),
        Ok(known) if whole(&known) => anyhow::bail!(
            "the draw key differs from the one {} was applied with (tokens.cluster_secret \
             changed while tokens.draw_secret is not set?): this node would derive other draw \
             secrets than its peers and its state would diverge. Set tokens.draw_secret to the \
             secret the draw key came from before (the old cluster_secret), on every node",
            data_dir.display()
        ),
        Ok(_) => write_durably(data_dir, &path, &fingerprint),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            write_durably(data_dir, &path, &fingerprint)
        }
        Err(e) => Err(anyhow::anyhow!("{}: {e}", path.display())),
    }
}

/// Writes `text` to `path` in `dir` so that a crash leaves the old file or the new one whole:
/// a temporary file, synced, renamed over it, and the directory synced.
fn write_durably(dir: &std::path::Path, path: &std::path::Path, text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    std::fs::create_dir_all(dir)?;
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(format!("{text}\n").as_bytes())?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, path)?;
    std::fs::File::open(dir)?.sync_all()?;
    Ok(())
}

#[cfg(test)]
mod draw_key_tests {
    use sluice_statemachine::draw::DrawKey;

    /// A data directory remembers its draw key: the same key starts, another is refused with
    /// what to do, and the file holds no key.
    #[test]
    fn a_data_directory_keeps_its_draw_key() {
        let dir = tempfile::tempdir().unwrap();
        let a = DrawKey::from_secret(b"the first cluster secret, 32 b!!");
        let b = DrawKey::from_secret(b"the other cluster secret, 32 b!!");
        super::draw_key_unchanged(dir.path(), &a).unwrap();
        super::draw_key_unchanged(dir.path(), &a).unwrap();
        let e = super::draw_key_unchanged(dir.path(), &b)
            .unwrap_err()
            .to_string();
        assert!(e.contains("tokens.draw_secret"), "{e}");
        let path = dir.path().join(super::DRAW_KEY_FILE);
        let file = std::fs::read_to_string(&path).unwrap();
        assert!(!file.contains(&sluice_ops::text::hex(&a.0)), "{file}");
        // A file torn by a crash (part of a fingerprint, or nothing) names no key: the node
        // starts and writes it again.
        for torn in [&file[..7], ""] {
            std::fs::write(&path, torn).unwrap();
            super::draw_key_unchanged(dir.path(), &a).unwrap();
            assert_eq!(std::fs::read_to_string(&path).unwrap(), file);
        }
    }
}
