//! Why a command was refused: a replicated outcome, the same on every replica, with a stable
//! machine-readable code. Every module that validates input names it; it names nothing else of
//! the crate.

use serde::{Deserialize, Serialize};

/// Why a command was refused. `code()` is the stable machine-readable name used by the API.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum Rejection {
    /// A field is malformed or out of range.
    #[error("invalid {field}: {reason}")]
    InvalidField {
        /// The field's name, dotted for nested fields (`branding.title`).
        field: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A room with this name already exists.
    #[error("room already exists")]
    RoomExists,
    /// No room has this name.
    #[error("no such room")]
    RoomNotFound,
    /// A pool with this name already exists.
    #[error("pool already exists")]
    PoolExists,
    /// No pool has this name.
    #[error("no such pool")]
    PoolNotFound,
    /// The visitor holds no place in the room and has not recently ended.
    #[error("unknown visitor")]
    UnknownVisitor,
    /// The room holds `max_waiting` waiters already.
    #[error("the queue is full")]
    QueueFull,
    /// The room's `closes_at` has passed; it takes no new visitors.
    #[error("the room is closed")]
    RoomClosed,
    /// The room is in `reject` mode; it takes no new visitors.
    #[error("the room is not taking new visitors")]
    RoomRejecting,
    /// Every room of the pool is at capacity and the pool has its most rooms.
    #[error("every room of the pool is full")]
    PoolFull,
    /// A cluster-wide count limit (rooms, pools) is reached.
    #[error("limit reached: at most {max} {what}")]
    LimitReached {
        /// What is counted.
        what: String,
        /// The limit.
        max: u64,
    },
    /// An operator banned this visitor from the room.
    #[error("the visitor is banned from this room")]
    Banned {
        /// When the ban ends (log time, ms); `None`: while the room exists.
        until_ms: Option<u64>,
    },
    /// The visitor's client network holds as many places as the room's policy allows.
    #[error("this network holds {max} places in this room already")]
    PlaceLimit {
        /// The policy's `places_per_client_max`.
        max: u64,
    },
    /// The room asks a proof-of-work of a join that takes a place, and this one brought none.
    #[error("this room asks for a solved challenge (work {work}) before it gives a place")]
    ChallengeRequired {
        /// The work the room asks now.
        work: u32,
    },
    /// The room gives places only to visitors with an identity, and this join brought none.
    #[error("this room gives places only to visitors who bring an identity")]
    IdentityRequired,
    /// The join's challenge cannot be used: expired, too easy, or used already.
    #[error("the challenge cannot be used: {reason}")]
    ChallengeInvalid {
        /// Why.
        reason: String,
    },
    /// The room gives places only to visitors who bring an access code.
    #[error("this room is by invitation only: a place needs an access code")]
    InviteOnly,
    /// No such access code in this room (or it is bound to another identity).
    #[error("this access code is not valid here")]
    CodeInvalid,
    /// The access code has been used as many times as it allows.
    #[error("this access code has been used already")]
    CodeUsedUp,
    /// The access code's batch has expired.
    #[error("this access code has expired")]
    CodeExpired,
    /// No code batch with this number in the room.
    #[error("no such code batch")]
    CodeBatchNotFound,
}

impl Rejection {
    pub(crate) fn invalid(field: &str, reason: String) -> Self {
        Rejection::InvalidField {
            field: field.to_string(),
            reason,
        }
    }

    /// The stable machine-readable code of this rejection.
    pub fn code(&self) -> &'static str {
        match self {
            Rejection::InvalidField { .. } => "invalid_field",
            Rejection::RoomExists => "room_exists",
            Rejection::RoomNotFound => "room_not_found",
            Rejection::PoolExists => "pool_exists",
            Rejection::PoolNotFound => "pool_not_found",
            Rejection::UnknownVisitor => "unknown_visitor",
            Rejection::QueueFull => "queue_full",
            Rejection::RoomClosed => "room_closed",
            Rejection::RoomRejecting => "room_rejecting",
            Rejection::PoolFull => "pool_full",
            Rejection::LimitReached { .. } => "limit_reached",
            Rejection::Banned { .. } => "banned",
            Rejection::PlaceLimit { .. } => "place_limit",
            Rejection::ChallengeRequired { .. } => "challenge_required",
            Rejection::IdentityRequired => "identity_required",
            Rejection::ChallengeInvalid { .. } => "challenge_invalid",
            Rejection::InviteOnly => "invite_only",
            Rejection::CodeInvalid => "code_invalid",
            Rejection::CodeUsedUp => "code_used_up",
            Rejection::CodeExpired => "code_expired",
            Rejection::CodeBatchNotFound => "code_batch_not_found",
        }
    }

    /// The offending field, for `InvalidField`.
    pub fn field(&self) -> Option<&str> {
        match self {
            Rejection::InvalidField { field, .. } => Some(field),
            _ => None,
        }
    }
}
