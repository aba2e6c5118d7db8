//! Sluice's HTTP edge: the API, the gate's checks, the visitor's pages, the operator dashboard
//! and the metrics exposition (axum), over the operations of `sluice-ops`. It does not name the
//! Raft crate: what it knows of consensus is what the operations offer.
//!
//! Map of the crate:
//! - [`http`]: the axum router, middleware (operator auth, per-client rate limits, metrics),
//!   SSE, and the OpenAPI document; [`app`]: what its handlers, the pages and the dashboard
//!   share (state, extractors, the client's address, ticket cookies); [`edge`]: what every
//!   request passes through around the router (body limit, security headers, concurrency limit,
//!   a connection's idle time); [`forwarded`]: what a proxy says of the request it asks the gate
//!   about; [`roles`]: which role each operator request needs.
//! - [`error`]: the one mapping of the operations' errors to HTTP answers.
//! - [`pages`] (landing, waiting page, [`i18n`]) and [`admin`] (the operator dashboard);
//!   [`metrics`]: the Prometheus exposition.

pub mod admin;
pub mod app;
pub mod edge;
pub mod error;
pub mod forwarded;
pub mod http;
pub mod i18n;
pub mod metrics;
pub mod pages;
pub mod roles;
mod views;
