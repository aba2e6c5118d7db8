//! Which role each operator request needs, from its method and the route axum matched (the
//! rule of the gRPC calls is `sluice-grpc`'s `guard.rs`).

use axum::http::Method;
use sluice_ops::operators::Role;

/// HTTP routes that read but need the `admin` role: the whole state, the raw log, and the
/// state's digest (which encodes the whole state twice while applies wait).
const HTTP_ADMIN_READS: [&str; 3] = [
    "/v1/cluster/backup",
    "/v1/cluster/log",
    "/v1/cluster/digest",
];

/// The role an operator request needs, from its method and route (the route's template, as
/// axum matched it, so that no spelling of a path can reach a handler under another's rule):
/// reads need `viewer`, except backups, the log and the digest (`admin`); changes of the cluster need
/// `admin`; every other change `operator`.
pub fn http_role(method: &Method, route: &str) -> Role {
    let cluster = route == "/v1/cluster" || route.starts_with("/v1/cluster/");
    if method == Method::GET || method == Method::HEAD {
        if HTTP_ADMIN_READS.contains(&route) {
            Role::Admin
        } else {
            Role::Viewer
        }
    } else if cluster {
        Role::Admin
    } else {
        Role::Operator
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_http_route_needs_the_role_of_what_it_does() {
        use Role::*;
        let cases = [
            (Method::GET, "/v1/rooms", Viewer),
            (Method::HEAD, "/v1/rooms/{room}", Viewer),
            (Method::GET, "/v1/rooms/{room}/queue", Viewer),
            (Method::GET, "/v1/rooms/{room}/codes", Viewer),
            (Method::GET, "/v1/pools/{pool}", Viewer),
            (Method::GET, "/v1/audit", Viewer),
            (Method::GET, "/v1/cluster", Viewer),
            (Method::GET, "/v1/cluster/digest", Admin),
            (Method::GET, "/v1/cluster/backup", Admin),
            (Method::HEAD, "/v1/cluster/backup", Admin),
            (Method::GET, "/v1/cluster/log", Admin),
            (Method::PUT, "/v1/rooms/{room}", Operator),
            (Method::DELETE, "/v1/rooms/{room}", Operator),
            (Method::POST, "/v1/rooms/{room}/{action}", Operator),
            (Method::POST, "/v1/rooms/{room}/bypass/{op}", Operator),
            (Method::POST, "/v1/rooms/{room}/codes", Operator),
            (Method::DELETE, "/v1/rooms/{room}/codes/{batch}", Operator),
            (Method::PUT, "/v1/pools/{pool}", Operator),
            (Method::POST, "/v1/pools/{pool}/{action}", Operator),
            (Method::POST, "/v1/cluster/learners", Admin),
            (Method::POST, "/v1/cluster/membership", Admin),
            (Method::PATCH, "/v1/cluster", Admin),
        ];
        for (method, route, role) in cases {
            assert_eq!(http_role(&method, route), role, "{method} {route}");
        }
    }
}
