//! What applying a command returns. Rejections are replicated outcomes, not errors: every replica
//! rejects the same command in the same way, and the state is untouched by a rejected command.

use crate::origin::{HealthChange, OriginSamples};
pub use crate::rejection::Rejection;
use crate::types::{RoomConfig, VisitorId};
use serde::{Deserialize, Serialize};

/// Why a visitor's place or session ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum EndReason {
    /// The visitor left.
    Left,
    /// A waiter did not check in within `waiter_ttl_secs`.
    Abandoned,
    /// A session saw no activity within `session_ttl_secs`.
    Expired,
    /// An operator revoked it.
    Revoked,
    /// The room was deleted or the visitor removed by an operator action on the room.
    Removed,
    /// An operator banned the visitor from the room.
    Banned,
    /// An admission not used within the room's first-use TTL.
    Unused,
    /// A session used from more client networks than the room's policy allows: a shared ticket.
    Shared,
}

impl EndReason {
    /// The lowercase name used on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            EndReason::Left => "left",
            EndReason::Abandoned => "abandoned",
            EndReason::Expired => "expired",
            EndReason::Revoked => "revoked",
            EndReason::Removed => "removed",
            EndReason::Banned => "banned",
            EndReason::Unused => "unused",
            EndReason::Shared => "shared",
        }
    }
}

/// Where a visitor stands.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum VisitorState {
    /// In line.
    Waiting {
        /// 1-based place in admission order within the visitor's lane (FIFO-ordered lanes
        /// only; `None` in a lottery, before a shuffled opening, or where the room hides
        /// positions).
        position: Option<u64>,
        /// The priority lane the visitor waits in (`None`: the room's own line).
        lane: Option<String>,
        /// Waiters of the other lines let in before the visitor's turn: with strict priority
        /// every waiter of the lanes before its own, with shares as many as the shares let in
        /// meanwhile (`None` where the room hides counts, or has no lanes).
        ahead: Option<u64>,
        /// The room opens with a shuffle: places are drawn then, and none is kept from before.
        provisional: bool,
        /// Passed over for now: the visitor's client network holds as many sessions as the
        /// room lets one network hold (`sessions_per_client_max`). It keeps its place and goes
        /// in when one of them ends; no estimate is given meanwhile.
        held: bool,
        /// Waiters in the room (`None` where the room hides it).
        waiting: Option<u64>,
        /// Seconds to wait before polling again, so that the room's polling stays within its
        /// budget of status reads.
        next_check_secs: u64,
        /// Estimated seconds until admission (in a lottery: until an even chance); `None` when
        /// there is no honest estimate (paused, origin down, a full room that has never seen a
        /// session end).
        eta_secs: Option<u64>,
        /// The longer end of the estimate (in a lottery: until nine chances in ten).
        eta_max_secs: Option<u64>,
        /// Last check-in (log time, ms).
        last_seen_ms: u64,
        /// The operator's notice to the line, if one is shown.
        notice: Option<String>,
    },
    /// Admitted: an active session.
    Admitted {
        /// When the session began (log time, ms).
        admitted_at_ms: u64,
        /// Last recorded activity (log time, ms).
        last_active_ms: u64,
        /// The session ends at this instant unless renewed.
        expires_at_ms: u64,
    },
    /// No longer in the room.
    Ended {
        /// Why.
        reason: EndReason,
        /// When (log time, ms).
        at_ms: u64,
    },
}

/// One visitor's status in one room.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VisitorView {
    /// The visitor.
    pub visitor: VisitorId,
    /// Sequence number of the visitor's place (unique and increasing per room).
    pub seq: u64,
    /// Where the visitor stands.
    pub state: VisitorState,
}

/// Counters that only grow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Totals {
    /// Places handed out (new joins).
    pub joined: u64,
    /// Admissions.
    pub admitted: u64,
    /// Visitors who left (waiting or admitted).
    pub left: u64,
    /// Waiters who lost their place by not checking in.
    pub abandoned: u64,
    /// Sessions that ended by TTL.
    pub expired: u64,
    /// Visitors removed by an operator.
    pub revoked: u64,
}

/// A room's commitment to its current draw secret: published before the secret seeds any draw,
/// so that nobody can choose the secret afterwards; the ledger reveals it once it has been used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrawView {
    /// BLAKE3 (derive-key "sluice draw commitment v2") of the secret.
    pub commitment: [u8; 32],
    /// The log index the secret began at.
    pub since_index: u64,
}

/// A room as seen from outside.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoomView {
    /// Name.
    pub name: String,
    /// Current configuration.
    pub config: RoomConfig,
    /// Log time of creation (ms).
    pub created_at_ms: u64,
    /// Has the room opened (its `opens_at` has passed)?
    pub open: bool,
    /// Is `closes_at` passed (at the last applied log time)?
    pub closed: bool,
    /// Waiters.
    pub waiting: u64,
    /// Active sessions.
    pub active: u64,
    /// Growing counters.
    pub totals: Totals,
    /// Admissions in the last minute (six 10-second windows).
    pub admitted_last_minute: u64,
    /// Admissions per minute used for ETAs: the setpoint blended with observed admissions,
    /// never faster than the setpoint.
    pub eta_rate_per_minute: u64,
    /// Whole tokens in the admission bucket.
    pub bucket_tokens: u64,
    /// The next sequence number to be issued.
    pub next_seq: u64,
    /// Sessions ended as `shared` (used from more client networks than the policy allows).
    pub sessions_shared: u64,
    /// The last change of origin health, and why (`None`: never changed).
    pub health_change: Option<HealthChange>,
    /// Paused because the origin is down (the origin rule's automatic pause).
    pub paused_by_origin: bool,
    /// The origin measurements in the rule's window (`None`: the room watches no origin).
    pub origin_window: Option<OriginSamples>,
    /// The priority lanes, in order (the room's own line is the rest of the counts).
    pub lanes: Vec<LaneView>,
    /// Access codes the room holds.
    pub codes: u64,
    /// The operator's notice to the line, if one is shown.
    pub notice: Option<Notice>,
    /// The room's committed draw secret (`None`: a room that draws by `sluice-draw-v1`).
    pub draw: Option<DrawView>,
    /// The estimate (shorter end, seconds) the newest waiter of the room's own line is shown
    /// (`None`: nobody waits there, a lottery, or no honest estimate).
    pub newest_eta_secs: Option<u64>,
    /// The waiting page's text colour (`None`: the page's own, near-black).
    pub text_color: Option<String>,
    /// Used proof-of-work challenges the room remembers until they expire (at most
    /// [`CHALLENGES_REMEMBERED_MAX`](crate::policy::CHALLENGES_REMEMBERED_MAX); at it, joins that
    /// mint a place are refused until some expire).
    #[serde(default)]
    pub challenges_remembered: u64,
}

/// An operator's message to everyone in a room's line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Notice {
    /// Plain text, at most [`NOTICE_LEN_MAX`](crate::limits::NOTICE_LEN_MAX) bytes.
    pub text: String,
    /// When it was set (log time, ms).
    pub set_at_ms: u64,
}

/// One priority lane as seen from outside.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaneView {
    /// Its name.
    pub name: String,
    /// Whether it admits now (its opening time has passed, or the room is open).
    pub open: bool,
    /// When it opens (ms since the epoch; `None`: with the room).
    pub opens_at_ms: Option<u64>,
    /// Waiters in it.
    pub waiting: u64,
    /// Places taken in it (joins, and waiters moved in by a code).
    pub joined: u64,
    /// Admissions from it.
    pub admitted: u64,
    /// Code uses taken that placed visitors in it.
    pub redeemed: u64,
}

/// A pool as seen from outside.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolView {
    /// Name.
    pub name: String,
    /// Capacity of each of its rooms.
    pub room_capacity: u64,
    /// Most rooms.
    pub rooms_max: u64,
    /// Count per room, by index; room `i` is named `{pool}-{i}`.
    pub counts: Vec<u64>,
    /// Sum of the counts.
    pub total: u64,
}

/// The result of one command.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outcome {
    /// The command was refused; nothing changed.
    Rejected(Rejection),
    /// A room after create, update, pause, resume, mode or health.
    Room(RoomView),
    /// A room was deleted; it had this many waiters and sessions.
    RoomDeleted {
        /// Waiters dropped.
        waiting: u64,
        /// Sessions dropped.
        active: u64,
    },
    /// A visitor after join, heartbeat, leave or revoke.
    Visitor(VisitorView),
    /// A batched touch.
    Touched {
        /// Sessions renewed.
        renewed: u64,
        /// Waiters checked in.
        checked_in: u64,
        /// Visitors not found (ended or unknown).
        missed: u64,
    },
    /// Force-admit or revoke-all: how many visitors it affected.
    Count(u64),
    /// A pool after create or update, release or report.
    Pool(PoolView),
    /// `assign`: the pool room given out.
    Assigned {
        /// Index of the room in the pool.
        room_index: u64,
        /// `{pool}-{index}`.
        room: String,
        /// The room's count after the increment.
        count: u64,
        /// The pool's total after the increment.
        total: u64,
    },
    /// A pool was deleted.
    PoolDeleted,
    /// A code batch after create, add or listing.
    Codes(crate::codes::CodeBatchView),
    /// A tick ran.
    Ticked {
        /// Admissions it made.
        admitted: u64,
        /// Waiters and sessions it expired.
        expired: u64,
    },
}
