//! Sluice's operations: everything the edges (HTTP and its pages and dashboard, gRPC, the CLI
//! through them) ask of a node, offered by [`core::Sluice`], which owns the Raft node privately.
//! The only crate above `sluice-raft`: the edges do not name it, so they cannot reach around
//! the operations to consensus. Errors are [`error::ApiError`]s whose [`error::Kind`] each edge
//! maps to its own protocol's status.
//!
//! Map of the crate:
//! - [`core`]: [`core::Sluice`], which owns the node and offers the operations, by family:
//!   [`visitors`] (join, status, gate, leave), [`rooms`], [`access`] (codes and bypass tokens),
//!   [`pools`], [`cluster`] (membership, the node's status, digests, log pages, backups),
//!   [`reads`] (local reads for pages and metrics); [`model`]: the requests and replies both
//!   APIs share.
//! - [`auth`] and [`operators`]: operators' credentials and roles, the backoff for wrong
//!   guesses, and attributing their writes; [`audit`]: the operator audit log.
//! - [`tokens`]: tickets (HMAC) and admission tokens (EdDSA JWT, JWKS); [`bypass`]: staff
//!   bypass tokens; [`codes`]: access codes; [`pow`]: proof-of-work challenges; [`identity`]:
//!   the shop's identity assertions; [`hook`]: external challenge providers.
//! - [`ledger`]: the admission ledger's pages, in words too; [`explain`]: why a visitor got in
//!   when it did, from the ledger.
//! - [`watch`] and [`watches`]: a visitor's status as a stream of changes, and who holds them;
//!   [`renew`]: session renewals in batches; [`history`]: per-room samples for the charts.
//! - The leader's duties: [`origin`] (probes of rooms' origins) and [`webhook`] (deliveries).
//! - [`page`]: a room's own page template, checked and rendered in a sandbox.
//! - [`error`]; [`civil`]: the UTC calendar; [`text`]: HTML escaping and hex.

pub mod access;
pub mod audit;
pub mod auth;
pub mod bypass;
pub mod civil;
pub mod cluster;
pub mod codes;
pub mod core;
pub mod error;
pub mod explain;
pub mod history;
pub mod hook;
pub mod identity;
pub mod ledger;
pub mod model;
pub mod operators;
pub mod origin;
pub mod page;
pub mod pools;
pub mod pow;
pub mod reads;
pub mod renew;
pub mod report;
pub mod rooms;
pub mod served;
pub mod text;
pub mod tokens;
pub mod visitors;
pub mod watch;
pub mod watches;
pub mod webhook;
