//! Starting a node with its HTTP and gRPC servers, and stopping it gracefully.

use crate::config::ServerConfig;
use crate::core::Sluice;
use crate::grpc::{operator_interceptor, Grpc};
use crate::http::{router, App};
use crate::metrics::Metrics;
use crate::pb;
use crate::renew::Renewer;
use crate::tokens::{JwtKeys, TicketKeys};
use anyhow::Context;
use sluice_raft::{nodelay, NodeAddr, NodeConfig, RaftNode, TlsMaterial};
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

fn read(path: &std::path::Path) -> anyhow::Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("reading {}", path.display()))
}

/// Starts a node from its configuration: Raft, then the HTTP and gRPC servers. With
/// `cfg.bootstrap`, initializes the cluster from `cfg.peers` if it has never been initialized.
pub async fn start(cfg: &ServerConfig, demo_room: Option<String>) -> anyhow::Result<Running> {
    cfg.validate().map_err(anyhow::Error::msg)?;
    let http_listener = tokio::net::TcpListener::bind(cfg.http_addr)
        .await
        .with_context(|| format!("binding {}", cfg.http_addr))?;
    let grpc_listener = tokio::net::TcpListener::bind(cfg.grpc_addr)
        .await
        .with_context(|| format!("binding {}", cfg.grpc_addr))?;
    let http_addr = http_listener.local_addr()?;
    let grpc_addr = grpc_listener.local_addr()?;

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
    nc.proposals_in_flight = cfg.raft.proposals_in_flight;
    nc.request_timeout = Duration::from_millis(cfg.limits.request_timeout_ms);
    if let Some(t) = &cfg.tls {
        nc.tls = Some(TlsMaterial {
            ca_pem: read(&t.ca)?,
            cert_pem: read(&t.cert)?,
            key_pem: read(&t.key)?,
            server_name: t.server_name.clone(),
        });
    }
    let node = RaftNode::start(nc)
        .await
        .map_err(|e| anyhow::anyhow!("starting the node: {e}"))?;
    if cfg.bootstrap
        && !node
            .raft()
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

    let cancel = CancellationToken::new();
    let tickets = TicketKeys::new(cfg.ticket_keys().map_err(anyhow::Error::msg)?)
        .map_err(anyhow::Error::msg)?;
    let jwt = JwtKeys::from_seed(
        &cfg.tokens.jwt_key_id,
        &cfg.tokens.issuer,
        &cfg.jwt_seed().map_err(anyhow::Error::msg)?,
    )
    .map_err(anyhow::Error::msg)?;
    let sluice = Arc::new(Sluice {
        node: node.clone(),
        tickets,
        jwt,
        renew: Renewer::start(node.clone(), cancel.clone()),
        catch_up_timeout: Duration::from_secs(2),
    });
    let metrics = Arc::new(Metrics::default());
    let admin_token = cfg.admin_token().map_err(anyhow::Error::msg)?;
    if admin_token.len() < 16 {
        anyhow::bail!("the admin token must be at least 16 characters");
    }
    let mut app = App::new(
        sluice.clone(),
        metrics.clone(),
        admin_token.clone(),
        cfg.limits.visitor_requests_per_second,
        cfg.limits.visitor_burst,
    );
    app.trust_forwarded_for = cfg.trust_forwarded_for;
    app.secure_cookies = cfg.secure_cookies;
    app.body_bytes_max = cfg.limits.body_bytes_max;
    app.shutdown = cancel.clone();
    app.demo_room = demo_room;
    let app = Arc::new(app);

    let mut servers = Vec::new();
    let concurrency = cfg.limits.concurrent_requests_max.max(1);
    let http =
        router(app.clone()).layer(tower::limit::GlobalConcurrencyLimitLayer::new(concurrency));
    let c = cancel.clone();
    match &cfg.http_tls {
        None => servers.push(tokio::spawn(async move {
            use axum::serve::ListenerExt;
            let svc = http.into_make_service_with_connect_info::<SocketAddr>();
            let listener = http_listener.tap_io(|tcp| {
                let _ = tcp.set_nodelay(true);
            });
            if let Err(e) = axum::serve(listener, svc)
                .with_graceful_shutdown(c.cancelled_owned())
                .await
            {
                tracing::error!(error = %e, "HTTP server stopped");
            }
        })),
        Some(t) => {
            let tls = rustls_config(&read(&t.cert)?, &read(&t.key)?)?;
            servers.push(tokio::spawn(serve_https(http_listener, http, tls, c)));
        }
    }

    let grpc = Grpc {
        sluice: sluice.clone(),
        metrics,
    };
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
    let reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()?;
    let token: Arc<str> = admin_token.into();
    let mut builder = tonic::transport::Server::builder()
        .tcp_nodelay(true)
        .concurrency_limit_per_connection(1024)
        .timeout(Duration::from_secs(30));
    if let Some(t) = &cfg.http_tls {
        let identity = tonic::transport::Identity::from_pem(read(&t.cert)?, read(&t.key)?);
        builder =
            builder.tls_config(tonic::transport::ServerTlsConfig::new().identity(identity))?;
    }
    let router = builder
        .add_service(health_service)
        .add_service(reflection)
        .add_service(pb::visitor_server::VisitorServer::new(grpc.clone()))
        .add_service(pb::admin_server::AdminServer::with_interceptor(
            grpc.clone(),
            operator_interceptor(token.clone()),
        ))
        .add_service(pb::cluster_server::ClusterServer::with_interceptor(
            grpc,
            operator_interceptor(token),
        ));
    let c = cancel.clone();
    servers.push(tokio::spawn(async move {
        let incoming = nodelay(tokio_stream::wrappers::TcpListenerStream::new(
            grpc_listener,
        ));
        if let Err(e) = router
            .serve_with_incoming_shutdown(incoming, c.cancelled_owned())
            .await
        {
            tracing::error!(error = %e, "gRPC server stopped");
        }
    }));

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

/// Serves the router over TLS until cancelled; connections in flight finish gracefully.
async fn serve_https(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    tls: Arc<tokio_rustls::rustls::ServerConfig>,
    cancel: CancellationToken,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    loop {
        let (stream, peer) = tokio::select! {
            _ = cancel.cancelled() => break,
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    tracing::warn!(error = %e, "accept");
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let (acceptor, router, cancel) = (acceptor.clone(), router.clone(), cancel.clone());
        tokio::spawn(async move {
            let Ok(Ok(tls)) =
                tokio::time::timeout(Duration::from_secs(10), acceptor.accept(stream)).await
            else {
                return;
            };
            let svc = hyper_util::service::TowerToHyperService::new(
                router.layer(axum::Extension(axum::extract::ConnectInfo(peer))),
            );
            let builder =
                hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new());
            let conn =
                builder.serve_connection_with_upgrades(hyper_util::rt::TokioIo::new(tls), svc);
            tokio::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => {}
                _ = cancel.cancelled() => {
                    conn.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(Duration::from_secs(10), conn).await;
                }
            }
        });
    }
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
