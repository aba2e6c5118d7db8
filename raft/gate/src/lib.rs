//! The gate every listener of a node stands behind, the node-to-node port's and the public HTTP
//! and gRPC ports' alike: `listener` bounds the connections (in all, per address and per wider
//! network, with deadlines for a connection's first bytes), `client` says who the client is
//! (the peer, or behind trusted proxies what `X-Forwarded-For` names), and `rate` how often
//! one client may ask.
//!
//! A crate of its own so that the consensus crate and the edges share it without either
//! depending on the other.

pub mod client;
pub mod listener;
pub mod rate;
