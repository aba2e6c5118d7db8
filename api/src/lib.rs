//! Sluice's edges and the `sluice` binary: the HTTP API with its pages and dashboard, the gRPC
//! API, and the CLI client, over the operations of `sluice-ops` (which alone owns the Raft node).
//!
//! Map of the crate:
//! - [`http`]: the axum router, middleware (operator auth, per-client rate limits, metrics),
//!   SSE, and the OpenAPI document; [`app`]: what its handlers, the pages and the dashboard
//!   share (state, extractors, the client's address, ticket cookies); [`edge`]: what every
//!   request passes through around the router (body limit, security headers, concurrency limit,
//!   a connection's idle time); [`forwarded`]: what a proxy says of the request it asks the gate
//!   about; [`roles`]: which role each operator request needs.
//! - [`grpc`]: `sluice.v1.Visitor`, `Admin`, `Cluster` (tonic), plus health and reflection;
//!   [`guard`]: the operator check in front of its `Admin` and `Cluster` services.
//! - [`error`]: the one mapping of the operations' errors to HTTP statuses and gRPC codes.
//! - [`pages`] (landing, waiting page, [`i18n`]) and [`admin`] (the operator dashboard);
//!   [`metrics`]: the Prometheus exposition.
//! - [`server`]: start a node with both servers; graceful shutdown; [`config`], [`dev`].
//! - [`ctl`]: `sluice ctl`.

pub mod admin;
pub mod app;
pub mod config;
pub mod ctl;
pub mod dev;
pub mod edge;
pub mod error;
pub mod forwarded;
pub mod grpc;
pub mod guard;
pub mod http;
pub mod i18n;
pub mod metrics;
pub mod pages;
pub mod roles;
pub mod server;

/// Generated protobuf types and gRPC stubs of the public API.
#[allow(missing_docs, clippy::all, missing_debug_implementations)]
pub mod pb {
    tonic::include_proto!("sluice.v1");
    /// Encoded file descriptors for server reflection.
    pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("sluice_descriptor");
}
