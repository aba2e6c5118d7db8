//! Which role each operator request needs: one rule per surface, from what the request is
//! (an HTTP method and the route axum matched, a gRPC call's path).

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

/// `sluice.v1.Admin` calls that only read (each other call changes something).
pub const GRPC_ADMIN_READS: [&str; 8] = [
    "GetRoom",
    "ListRooms",
    "Queue",
    "GetPool",
    "ListCodes",
    "Ledger",
    "Explain",
    "Audit",
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

    #[test]
    fn every_grpc_call_needs_the_role_of_what_it_does() {
        use Role::*;
        for (path, role) in [
            ("/sluice.v1.Admin/ListRooms", Viewer),
            ("/sluice.v1.Admin/Audit", Viewer),
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
