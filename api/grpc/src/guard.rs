//! The gRPC `Admin` and `Cluster` services behind the operator check.

use crate::status::ToGrpc;
use sluice_ops::auth::{credentials, OperatorAuth};
use sluice_ops::operators::acting;
use sluice_ops::operators::Role;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// `sluice.v1.Admin` calls that only read (each other call changes something).
pub const GRPC_ADMIN_READS: [&str; 9] = [
    "GetRoom",
    "ListRooms",
    "Queue",
    "GetPool",
    "ListCodes",
    "Ledger",
    "Explain",
    "Audit",
    "Overview",
];

/// The role a gRPC call needs, from its path (`/sluice.v1.Admin/Pause`): `Admin` reads need
/// `viewer` and its other calls `operator`; `Cluster/Status` needs `viewer` and the cluster's
/// other calls `admin`; anything else (no such service) `admin`.
pub fn grpc_role(path: &str) -> Role {
    let Some((service, method)) = path
        .strip_prefix("/sluice.v1.")
        .and_then(|p| p.split_once('/'))
    else {
        return Role::Admin;
    };
    match service {
        "Admin" if GRPC_ADMIN_READS.contains(&method) => Role::Viewer,
        "Admin" => Role::Operator,
        "Cluster" if method == "Status" => Role::Viewer,
        _ => Role::Admin,
    }
}

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

impl<S, B> tower::Service<http::Request<B>> for OperatorGuard<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<tonic::body::Body>>
        + Send
        + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = S::Error;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_grpc_call_needs_the_role_of_what_it_does() {
        use Role::*;
        for (path, role) in [
            ("/sluice.v1.Admin/ListRooms", Viewer),
            ("/sluice.v1.Admin/Audit", Viewer),
            ("/sluice.v1.Admin/Overview", Viewer),
            ("/sluice.v1.Admin/Ledger", Viewer),
            ("/sluice.v1.Admin/Explain", Viewer),
            ("/sluice.v1.Admin/Pause", Operator),
            ("/sluice.v1.Admin/Admit", Operator),
            ("/sluice.v1.Admin/Nonesuch", Operator),
            ("/sluice.v1.Cluster/Status", Viewer),
            ("/sluice.v1.Cluster/ChangeMembership", Admin),
            ("/sluice.v1.Cluster/AddLearner", Admin),
            ("/sluice.v1.Elsewhere/Status", Admin),
            ("/other.Admin/ListRooms", Admin),
            ("", Admin),
        ] {
            assert_eq!(grpc_role(path), role, "{path}");
        }
        // Every read the proto declares is one: a name in the list that is no RPC of the Admin
        // service would leave the real one needing `operator`.
        let proto = include_str!("../proto/sluice.proto");
        let rpcs: Vec<&str> = proto
            .split("service Admin {")
            .nth(1)
            .expect("the Admin service")
            .lines()
            .take_while(|l| l.trim() != "}")
            .filter_map(|l| l.trim().strip_prefix("rpc "))
            .filter_map(|l| l.split('(').next())
            .collect();
        assert!(rpcs.len() > GRPC_ADMIN_READS.len(), "{rpcs:?}");
        for read in GRPC_ADMIN_READS {
            assert!(rpcs.contains(&read), "{read} is no Admin RPC: {rpcs:?}");
        }
    }
}
