//! The gRPC `Admin` and `Cluster` services behind the operator check.

use crate::error::ToGrpc;
use crate::roles::grpc_role;
use sluice_ops::auth::{credentials, OperatorAuth};
use sluice_ops::operators::acting;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// The gRPC `Admin` and `Cluster` services behind the operator check: the call's bearer token
/// must name an operator whose role is at least what [`grpc_role`] asks of the call's path; the
/// call then runs with that operator [`acting`]. Refused calls get the error's status
/// (`UNAUTHENTICATED`, `PERMISSION_DENIED`, `RESOURCE_EXHAUSTED` while the client backs off)
/// before the message is read.
#[derive(Clone, Debug)]
pub struct OperatorGuard<S> {
    inner: S,
    auth: Arc<OperatorAuth>,
    proxies: sluice_gate::client::TrustedProxies,
}

impl<S> OperatorGuard<S> {
    /// `inner`, checked against `auth`; a client behind one of `proxies` is known by the
    /// address its `x-forwarded-for` names (for the backoff after wrong tokens), as over HTTP.
    pub fn new(
        inner: S,
        auth: Arc<OperatorAuth>,
        proxies: sluice_gate::client::TrustedProxies,
    ) -> Self {
        Self {
            inner,
            auth,
            proxies,
        }
    }
}

impl<S: tonic::server::NamedService> tonic::server::NamedService for OperatorGuard<S> {
    const NAME: &'static str = S::NAME;
}

type BoxFuture<T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send + 'static>>;

impl<S, B> tower::Service<axum::http::Request<B>> for OperatorGuard<S>
where
    S: tower::Service<axum::http::Request<B>, Response = axum::http::Response<tonic::body::Body>>
        + Send
        + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = axum::http::Response<tonic::body::Body>;
    type Error = S::Error;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: axum::http::Request<B>) -> Self::Future {
        let needed = grpc_role(req.uri().path());
        let peer = sluice_gate::listener::ConnInfo::in_extensions(req.extensions())
            .and_then(|c| c.remote_addr())
            .map_or(std::net::IpAddr::from([0, 0, 0, 0]), |a| a.ip());
        let client = self.proxies.client(
            peer,
            req.headers()
                .get_all("x-forwarded-for")
                .iter()
                .map(|v| v.as_bytes()),
        );
        let presented = req
            .headers()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| credentials(v, "Bearer"));
        let checked = self
            .auth
            .authenticate(client, presented)
            .and_then(|op| op.may(needed).map(|()| op));
        match checked {
            Ok(op) => Box::pin(acting(op, self.inner.call(req))),
            Err(e) => {
                let refused = e.to_grpc().into_http();
                Box::pin(async move { Ok(refused) })
            }
        }
    }
}
