//! The openraft type configuration and the payloads carried in log entries.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sluice_statemachine::{Outcome, Proposal};
use std::fmt;

/// A log entry's application payload: a leader-stamped batch of commands. It is serialized as
/// the state machine's own versioned [`Proposal`] encoding, so the log format is the state
/// machine's, and decoding applies its bounds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request(pub Proposal);

impl fmt::Display for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "proposal(time_ms={}, commands={})",
            self.0.time_ms,
            self.0.commands.len()
        )
    }
}

impl Serialize for Request {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(&self.0.encode())
    }
}

impl<'de> Deserialize<'de> for Request {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Request;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an encoded proposal")
            }
            fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<Request, E> {
                Proposal::decode(v).map(Request).map_err(E::custom)
            }
            fn visit_byte_buf<E: serde::de::Error>(self, v: Vec<u8>) -> Result<Request, E> {
                self.visit_bytes(&v)
            }
        }
        d.deserialize_bytes(V)
    }
}

/// The outcomes of one entry's commands, in order; empty for blank and membership entries.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Response(pub Vec<Outcome>);

/// Where a node can be reached.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeAddr {
    /// Node-to-node (Raft) gRPC address, `host:port`.
    pub raft: String,
    /// Public HTTP address, `host:port` (may be empty).
    pub http: String,
    /// Public gRPC address, `host:port` (may be empty).
    pub grpc: String,
}

openraft::declare_raft_types!(
    /// Sluice's openraft types.
    pub TypeConfig:
        D = Request,
        R = Response,
        NodeId = u64,
        Node = NodeAddr,
        AsyncRuntime = crate::runtime::RaftRuntime,
);

/// A log id.
pub type LogId = openraft::alias::LogIdOf<TypeConfig>;
/// A log entry.
pub type Entry = openraft::alias::EntryOf<TypeConfig>;
/// A vote.
pub type Vote = openraft::alias::VoteOf<TypeConfig>;
/// Membership with its log id.
pub type StoredMembership = openraft::alias::StoredMembershipOf<TypeConfig>;
/// Snapshot metadata.
pub type SnapshotMeta = openraft::alias::SnapshotMetaOf<TypeConfig>;
