//! Sluice's gRPC API: `sluice.v1.Visitor`, `Admin` and `Cluster` (tonic), with the standard
//! health service and server reflection, over the operations of `sluice-ops` (the same calls
//! the HTTP API makes, so the two cannot drift).
//!
//! - [`services`]: the three services; handlers only translate messages.
//! - [`guard`]: the operator check in front of `Admin` and `Cluster`, and the role each call
//!   needs.
//! - [`status`]: the one mapping of the operations' errors to gRPC statuses.
//! - [`pb`]: the generated messages and stubs.

pub mod guard;
pub mod services;
pub mod status;

/// Generated protobuf types and gRPC stubs of the public API.
#[allow(missing_docs, clippy::all, missing_debug_implementations)]
pub mod pb {
    tonic::include_proto!("sluice.v1");
    /// Encoded file descriptors for server reflection.
    pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("sluice_descriptor");
}
