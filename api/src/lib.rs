//! Sluice's servers: the only crate that knows HTTP, gRPC, JSON, cookies and signals.
//!
//! Map of the crate:
//! - [`core`]: [`core::Sluice`], the operations both APIs share (join, status, gate, operator
//!   actions), turning requests into state machine commands and reads.
//! - [`http`]: the axum router, middleware (operator auth, per-client rate limits, metrics),
//!   SSE, and the OpenAPI document; [`app`]: what its handlers, the pages and the dashboard
//!   share (state, extractors, the client's address, ticket cookies); [`edge`]: what every request passes through around the
//!   router (body limit, security headers, concurrency limit, a connection's idle time).
//! - [`grpc`]: `sluice.v1.Visitor`, `Admin`, `Cluster` (tonic), plus health and reflection.
//! - [`auth`] and [`operators`]: operators' credentials and roles, the backoff for wrong
//!   guesses, and attributing their writes; [`audit`]: the operator audit log.
//! - [`tokens`]: tickets (HMAC) and admission tokens (EdDSA JWT, JWKS).
//! - [`error`]: the one mapping of errors to HTTP statuses and gRPC codes.
//! - [`server`]: start a node with both servers; graceful shutdown.
//! - [`pages`] (landing, waiting page, [`i18n`]) and [`admin`] (the operator dashboard).
//! - [`origin`]: the leader's origin probes (the health follows them in the state machine).
//! - [`ledger`]: the admission ledger's pages, in words too; [`explain`]: why a visitor got in
//!   when it did, from the ledger.
//! - [`config`], [`model`], [`metrics`], [`renew`], [`ctl`]; [`text`]: HTML escaping and hex.

pub mod admin;
pub mod app;
pub mod audit;
pub mod auth;
pub mod bypass;
pub mod civil;
pub mod codes;
pub mod config;
pub mod core;
pub mod ctl;
pub mod dev;
pub mod edge;
pub mod error;
pub mod explain;
pub mod grpc;
pub mod history;
pub mod hook;
pub mod http;
pub mod i18n;
pub mod identity;
pub mod ledger;
pub mod metrics;
pub mod model;
pub mod operators;
pub mod origin;
pub mod pages;
pub mod pow;
pub mod renew;
pub mod server;
pub mod text;
pub mod tokens;
pub mod watch;
pub mod watches;
pub mod webhook;

/// Generated protobuf types and gRPC stubs of the public API.
#[allow(missing_docs, clippy::all, missing_debug_implementations)]
pub mod pb {
    tonic::include_proto!("sluice.v1");
    /// Encoded file descriptors for server reflection.
    pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("sluice_descriptor");
}
