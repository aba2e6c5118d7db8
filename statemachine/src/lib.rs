//! Sluice's deterministic room state machine.
//!
//! Log entries go in, room state comes out. Every replica applies the same entries in the same
//! order and reaches the same state, byte for byte: the crate reads no clock (time arrives with
//! each entry), no OS randomness (draws are seeded from the log position), does no I/O, and never
//! lets the iteration order of a hash map decide anything.
//!
//! Map of the crate:
//! - [`command`]: [`Command`] and [`Proposal`], the log entry format, versioned.
//! - [`machine`]: [`StateMachine`]: `apply`, read-only queries, `next_due_ms` for the tick proposer.
//! - `room`: the rules of one room: join, leave, touch, expiry, token bucket, admission, schedule.
//! - `queue`: the waiting line with exact positions (ranks) in O(n / 256).
//! - `sessions`: admitted sessions, indexed by visitor and kept in sequence-number order.
//! - [`draw`]: seeded lottery draws and shuffles (`sluice-draw-v1`).
//! - [`policy`]: a room's entry policy (places per client network, first-use TTL) and what a
//!   join brings, each encoded on its own so that it can grow.
//! - [`origin`]: what the line shows, and the origin's health from measurements, with
//!   hysteresis.
//! - [`lanes`]: priority lanes before a room's own line; [`codes`]: access codes (hashed)
//!   that place visitors in them, or let them into an invite-only room.
//! - `pool`: capacity-bounded room sets, handed out first-fit.
//! - [`snapshot`]: canonical encoding, restore, and the state digest.
//! - [`outcome`]: what each command returns; rejections are outcomes, not errors (`rejection`:
//!   why a command was refused, named by every module that validates).
//! - [`types`]: ids, names and room configuration with validation, and the decoding error.
//! - [`limits`]: every bound, in one place.

pub mod bypass;
mod chunked;
pub mod codes;
pub mod command;
pub mod draw;
mod idmap;
pub mod lanes;
pub mod ledger;
pub mod limits;
pub mod machine;
pub mod origin;
pub mod outcome;
pub mod phases;
pub mod policy;
mod pool;
mod queue;
mod rejection;
mod room;
mod sessions;
pub mod snapshot;
pub mod types;

pub use bypass::{BypassKind, BypassRule, Network, PathRule};
pub use codes::{CodeBatch, CodeBatchView, CodeHash, NewCode};
pub use command::{Command, DecodeError, Proposal};
pub use lanes::Lane;
pub use machine::{
    check_force_admit, is_session_credential, session_id, session_owner, JoinTerms, LogPosition,
    QueueEntry, StateMachine, Woken,
};
pub use origin::{
    HealthChange, HealthSource, LineRule, OriginRule, OriginSamples, ProbeMethod, ProbeRule,
};
pub use outcome::{
    EndReason, LaneView, Notice, Outcome, PoolView, Rejection, RoomView, Totals, VisitorState,
    VisitorView,
};
pub use policy::{
    ChallengeUse, ClientKey, EntryPolicy, IdentityKey, IdentityRule, JoinEvidence, PowRule,
};
pub use pool::{check_report as check_pool_report, validate as validate_pool};
pub use snapshot::{digest_hex, Digest};
pub use types::{Branding, Health, Mode, RoomConfig, VisitorId};

#[cfg(test)]
mod tests;
