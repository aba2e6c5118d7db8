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
use sluice_raft::{NodeAddr, NodeConfig, RaftNode, TlsMaterial};
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
    // Checked before the node starts (and perhaps bootstraps a cluster), not after.
    let admin_token = cfg.admin_token().map_err(anyhow::Error::msg)?;
    if admin_token.len() < 16 {
        anyhow::bail!("the admin token must be at least 16 characters");
    }
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
    nc.logs_kept_after_snapshot = cfg.raft.logs_kept_after_snapshot;
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
        watches: crate::watch::Watches::new(cfg.limits.event_streams_max, cancel.clone()),
    });
    let metrics = Arc::new(Metrics::default());
    let mut app = App::new(
        sluice.clone(),
        metrics.clone(),
        admin_token.clone(),
        cfg.limits.visitor_requests_per_second,
        cfg.limits.visitor_burst,
    );
    app.trust_forwarded_for = cfg.trust_forwarded_for;
    app.metrics_token = cfg.metrics_token.clone();
    app.secure_cookies = cfg.secure_cookies;
    app.body_bytes_max = cfg.limits.body_bytes_max;
    app.demo_room = demo_room;
    let app = Arc::new(app);

    let mut servers = Vec::new();
    let concurrency = cfg.limits.concurrent_requests_max.max(1);
    let http =
        router(app.clone()).layer(tower::limit::GlobalConcurrencyLimitLayer::new(concurrency));
    let tls = match &cfg.http_tls {
        None => None,
        Some(t) => Some(tokio_rustls::TlsAcceptor::from(rustls_config(
            &read(&t.cert)?,
            &read(&t.key)?,
        )?)),
    };
    let listener_limits = HttpLimits {
        connections_max: cfg.limits.connections_max.max(1),
        header_read_timeout: Duration::from_millis(cfg.limits.header_read_timeout_ms),
        header_bytes_max: cfg.limits.header_bytes_max,
    };
    servers.push(tokio::spawn(serve_http(
        http_listener,
        http,
        tls,
        listener_limits,
        cancel.clone(),
    )));

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
        .timeout(Duration::from_secs(30))
        // Pings find the peers that are gone; `gated_incoming` bounds the connections.
        .http2_keepalive_interval(Some(Duration::from_secs(30)))
        .http2_keepalive_timeout(Some(Duration::from_secs(20)))
        .http2_max_header_list_size(u32::try_from(cfg.limits.header_bytes_max).unwrap_or(u32::MAX));
    if let Some(t) = &cfg.http_tls {
        let identity = tonic::transport::Identity::from_pem(read(&t.cert)?, read(&t.key)?);
        builder =
            builder.tls_config(tonic::transport::ServerTlsConfig::new().identity(identity))?;
    }
    // Requests are bounded as HTTP bodies are (tonic's default is 4 MiB).
    let max = cfg.limits.body_bytes_max;
    use tonic::service::interceptor::InterceptedService;
    let router = builder
        .add_service(health_service)
        .add_service(reflection)
        .add_service(
            pb::visitor_server::VisitorServer::new(grpc.clone()).max_decoding_message_size(max),
        )
        .add_service(InterceptedService::new(
            pb::admin_server::AdminServer::new(grpc.clone()).max_decoding_message_size(max),
            operator_interceptor(token.clone()),
        ))
        .add_service(InterceptedService::new(
            pb::cluster_server::ClusterServer::new(grpc).max_decoding_message_size(max),
            operator_interceptor(token),
        ));
    let c = cancel.clone();
    let incoming = gated_incoming(grpc_listener, listener_limits, cancel.clone());
    servers.push(tokio::spawn(async move {
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

/// Longest a client may take over its TLS handshake (less if `header_read_timeout` is).
const TLS_HANDSHAKE_MAX: Duration = Duration::from_secs(10);

/// The limits of the HTTP and public gRPC listeners themselves (requests have theirs in the
/// router), each applied to each listener.
#[derive(Clone, Copy)]
struct HttpLimits {
    connections_max: usize,
    header_read_timeout: Duration,
    header_bytes_max: usize,
}

/// Serves the router, over TLS if `tls` is given, until cancelled; then lets the connections
/// in flight finish (each gets up to 10 s) before returning. At most `connections_max`
/// connections are open at once: past that the listener is not accepted from until one closes.
/// A client gets `header_read_timeout` (at most [`TLS_HANDSHAKE_MAX`]) for its TLS handshake,
/// `header_read_timeout` for its first bytes (the whole preface on HTTP/2), and
/// `header_read_timeout` for each request's headers on HTTP/1 (idle keep-alive time included).
async fn serve_http(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    tls: Option<tokio_rustls::TlsAcceptor>,
    limits: HttpLimits,
    cancel: CancellationToken,
) {
    use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
    let open = Arc::new(tokio::sync::Semaphore::new(limits.connections_max));
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        // hyper's default lets each connection's read buffer grow to ~400 KiB for one head.
        .max_buf_size(limits.header_bytes_max);
    // HTTP/2 connections have no header timeout in hyper; pings find the peers that are gone.
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_header_list_size(u32::try_from(limits.header_bytes_max).unwrap_or(u32::MAX))
        .keep_alive_interval(Some(Duration::from_secs(30)))
        .keep_alive_timeout(Duration::from_secs(20));
    let builder = Arc::new(builder);
    let connections = tokio_util::task::TaskTracker::new();
    loop {
        let permit = tokio::select! {
            _ = cancel.cancelled() => break,
            p = open.clone().acquire_owned() => p.expect("semaphore never closed"),
        };
        let (stream, peer) = tokio::select! {
            _ = cancel.cancelled() => break,
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    // Out of file descriptors, say: back off instead of spinning on it.
                    tracing::warn!(error = %e, "accept");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let (tls, router, cancel, builder) =
            (tls.clone(), router.clone(), cancel.clone(), builder.clone());
        let header_timeout = limits.header_read_timeout;
        connections.spawn(async move {
            let _permit = permit;
            let svc = hyper_util::service::TowerToHyperService::new(
                router.layer(axum::Extension(axum::extract::ConnectInfo(peer))),
            );
            match tls {
                None => {
                    let Some(io) = opened(stream, header_timeout).await else {
                        return;
                    };
                    serve_connection(&builder, TokioIo::new(io), svc, &cancel).await
                }
                Some(acceptor) => {
                    let Ok(Ok(tls)) = tokio::time::timeout(
                        header_timeout.min(TLS_HANDSHAKE_MAX),
                        acceptor.accept(stream),
                    )
                    .await
                    else {
                        return;
                    };
                    // The protocol is the one agreed in the handshake: nothing to tell apart.
                    let builder = if tls.get_ref().1.alpn_protocol() == Some(b"h2") {
                        builder.as_ref().clone().http2_only()
                    } else {
                        builder.as_ref().clone().http1_only()
                    };
                    let Some(io) = opened(tls, header_timeout).await else {
                        return;
                    };
                    serve_connection(&builder, TokioIo::new(io), svc, &cancel).await
                }
            }
        });
    }
    connections.close();
    connections.wait().await;
}

/// A connection whose first bytes came within `within`: until they can no longer be the start
/// of an HTTP/2 preface, or hold all of one. hyper's header timeout only starts once it has told
/// HTTP/1 from HTTP/2 by these bytes, and its HTTP/2 server waits for the preface forever, so a
/// client that sends nothing, or part of a preface, is cut off here. `None` if the client closed
/// or was too slow; otherwise the stream with those bytes put back in front.
async fn opened<S: tokio::io::AsyncRead + Unpin>(
    mut s: S,
    within: Duration,
) -> Option<Prefixed<S>> {
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
    Some(Prefixed {
        prefix: got,
        at: 0,
        inner: s,
        _slot: None,
    })
}

/// The public gRPC listener's connections, for tonic: at most `connections_max` open at once
/// (past it the listener is not accepted from until one closes), and each handed to tonic only
/// once its first 24 bytes (an HTTP/2 preface, or the start of a TLS handshake) have come within
/// `header_read_timeout`; hyper's HTTP/2 server would wait for them forever.
fn gated_incoming(
    listener: tokio::net::TcpListener,
    limits: HttpLimits,
    cancel: CancellationToken,
) -> tokio_stream::wrappers::ReceiverStream<std::io::Result<Prefixed<tokio::net::TcpStream>>> {
    use tokio::io::AsyncReadExt;
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    tokio::spawn(async move {
        let open = Arc::new(tokio::sync::Semaphore::new(limits.connections_max));
        loop {
            let slot = tokio::select! {
                _ = cancel.cancelled() => break,
                p = open.clone().acquire_owned() => p.expect("semaphore never closed"),
            };
            let mut stream = tokio::select! {
                _ = cancel.cancelled() => break,
                r = listener.accept() => match r {
                    Ok((s, _)) => s,
                    Err(e) => {
                        tracing::warn!(error = %e, "accept");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
            };
            let _ = stream.set_nodelay(true);
            let (tx, timeout) = (tx.clone(), limits.header_read_timeout);
            tokio::spawn(async move {
                let mut first = vec![0u8; 24];
                let read = tokio::time::timeout(timeout, stream.read_exact(&mut first)).await;
                if matches!(read, Ok(Ok(_))) {
                    let io = Prefixed {
                        prefix: first,
                        at: 0,
                        inner: stream,
                        _slot: Some(slot),
                    };
                    let _ = tx.send(Ok(io)).await;
                }
            });
        }
    });
    tokio_stream::wrappers::ReceiverStream::new(rx)
}

impl tonic::transport::server::Connected for Prefixed<tokio::net::TcpStream> {
    type ConnectInfo = tonic::transport::server::TcpConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.inner.connect_info()
    }
}

/// A stream with the bytes already read from it put back in front, holding its listener's
/// connection slot, if it has one, until it is dropped.
struct Prefixed<S> {
    prefix: Vec<u8>,
    at: usize,
    inner: S,
    _slot: Option<tokio::sync::OwnedSemaphorePermit>,
}

impl<S: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for Prefixed<S> {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let this = self.get_mut();
        if this.at < this.prefix.len() {
            let n = (this.prefix.len() - this.at).min(buf.remaining());
            buf.put_slice(&this.prefix[this.at..this.at + n]);
            this.at += n;
            return std::task::Poll::Ready(Ok(()));
        }
        std::pin::Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl<S: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for Prefixed<S> {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
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

/// Serves one connection until it ends or `cancel` fires; then finishes its requests in flight
/// (up to 10 s) and closes it.
async fn serve_connection<I, S>(
    builder: &hyper_util::server::conn::auto::Builder<hyper_util::rt::TokioExecutor>,
    io: I,
    svc: S,
    cancel: &CancellationToken,
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
    let conn = builder.serve_connection_with_upgrades(io, svc);
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => {}
        _ = cancel.cancelled() => {
            conn.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(Duration::from_secs(10), conn).await;
        }
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
