//! Every bound on what can grow, in one place.
//!
//! Hitting a limit is an ordinary replicated rejection (or, for the per-apply work bounds, a
//! continuation on the next tick), never a panic. The raft and API layers import these so that
//! requests are refused at the edge with the same numbers the state machine enforces.

/// Most rooms in one cluster.
pub const ROOMS_MAX: usize = 10_000;
/// Most pools in one cluster.
pub const POOLS_MAX: usize = 1_000;
/// Longest room or pool name (names match `[a-z0-9][a-z0-9-]{0,63}`).
pub const NAME_LEN_MAX: usize = 64;

/// Largest `capacity` a room may have.
pub const CAPACITY_MAX: u64 = 10_000_000;
/// Largest `max_waiting` a room may have: the hard bound on waiters per room.
pub const WAITERS_PER_ROOM_MAX: u64 = 10_000_000;
/// Most admitted sessions one room holds, whatever its capacity: a passthrough room, which
/// ignores capacity, admits no more than this (later visitors wait in line), and a snapshot never
/// holds more. Smaller in this crate's own tests, so that they can reach it.
#[cfg(not(test))]
pub const SESSIONS_PER_ROOM_MAX: u64 = 10_000_000;
/// Most admitted sessions one room holds (reduced for this crate's tests).
#[cfg(test)]
pub const SESSIONS_PER_ROOM_MAX: u64 = 120_000;
/// Largest `admit_per_minute` (one million admissions per second).
pub const ADMIT_PER_MINUTE_MAX: u64 = 60_000_000;
/// Largest token-bucket burst.
pub const ADMIT_BURST_MAX: u64 = 1_000_000;
/// Longest `session_ttl_secs` and `waiter_ttl_secs` (30 days).
pub const TTL_SECS_MAX: u64 = 30 * 86_400;
/// Latest accepted schedule instant (`opens_at`, `closes_at`), ms since the Unix epoch (year 2400).
pub const INSTANT_MS_MAX: u64 = 13_569_465_600_000;

/// Most visitors in one batched `touch`.
pub const TOUCH_BATCH_MAX: usize = 10_000;
/// Most commands in one proposal (one log entry).
pub const COMMANDS_PER_PROPOSAL_MAX: usize = 4_096;
/// Most bytes of encoded commands the write path gathers into one proposal. A command larger
/// than that on its own (none the edge accepts is: the largest, a full `TouchFrom` or
/// `AddCodes`, is a third of it) is refused before it reaches the batcher, whether written on
/// the leader or forwarded to it. With the entries per replication message bounded too, every
/// message between nodes stays under their size limit however large the commands are.
pub const PROPOSAL_BYTES_MAX: usize = 1 << 20;
/// Most waiters one `force_admit` may admit.
pub const FORCE_ADMIT_MAX: u64 = 100_000;
/// Most admissions one command performs in one room; the rest follow on the next tick.
pub const ADMITS_PER_APPLY_MAX: u64 = 100_000;
/// Most waiters one command passes over in one room because they are held back (away within
/// the grace period, or their client network holds its share of sessions); past it, admission
/// looks on from there at the next command (a tick is asked for at once).
pub const HELD_SKIPS_PER_APPLY_MAX: u64 = 4_096;
/// Most times one lottery admission draws again because the draw fell on a waiter held back
/// (away, or its network at its session limit); past it, the first after the last drawn that
/// is not held goes in. Each draw again also counts against [`HELD_SKIPS_PER_APPLY_MAX`].
pub const LOTTERY_REDRAWS_MAX: u64 = 32;
/// Most seconds of admitted sessions one waiting-time estimate looks through, in the order their
/// places free, to find which frees when; past it, the places left are taken to free evenly
/// after the last it saw. A status read walks this (the read of a waiter deep behind a full room
/// whose places were taken over many seconds is the dearest).
pub const ESTIMATE_SECONDS_SCANNED_MAX: usize = 256;
/// How long after its admission a session not yet used is taken to be on its way (its visitor
/// being sent to the site); past it, the estimates take it to be held until its deadline.
pub const UNUSED_GRACE_MS: u64 = 15_000;
/// How many used places the estimates presume a room had before any it saw: the share of places
/// left unused is learned as (unused) / (seen + this).
pub const PLACES_PRESUMED_USED: u64 = 10;
/// Most expiries one command performs in one room; the rest follow on the next tick.
pub const EXPIRIES_PER_APPLY_MAX: usize = 100_000;
/// How many ended visitors (left, expired, revoked) a room remembers for status queries.
pub const ENDED_PER_ROOM_MAX: usize = 65_536;
/// Most visitors banned from one room at once; past it a ban is refused (`limit_reached`)
/// until a ban ends or is lifted.
pub const BANS_PER_ROOM_MAX: usize = 100_000;
/// Most ended credentials (operators' dashboard sessions, staff bypass tokens) remembered at
/// once, each until the time it would have ended anyway; past it a sign-out or a revocation is
/// refused server-side (a sign-out's cookie is still cleared).
pub const CREDENTIALS_ENDED_MAX: usize = 10_000;
/// Most of those that are dashboard sessions: sign-outs (which any operator, a viewer too, can
/// make as often as it signs in) never take the places revocations of staff tokens need.
pub const SESSIONS_ENDED_MAX: usize = 5_000;
/// Most of those that are staff tokens revoked with [`crate::Command::RevokeStaffToken`]: the
/// rest of the ended credentials, so that revocations (which any operator can make, by any id)
/// never take the places sign-outs need either.
pub const STAFF_TOKENS_ENDED_MAX: usize = CREDENTIALS_ENDED_MAX - SESSIONS_ENDED_MAX;
const _: () = assert!(STAFF_TOKENS_ENDED_MAX > 0 && SESSIONS_ENDED_MAX > 0);
/// Most ended dashboard sessions of one operator (sessions whose ids carry the same owner tag,
/// [`session_owner`](crate::session_owner)): one operator's sign-outs, however many,
/// never take the places of everyone else's. Times the most operators a configuration may list
/// (100), it stays within [`SESSIONS_ENDED_MAX`].
pub const SESSIONS_ENDED_PER_OPERATOR_MAX: usize = 40;
const _: () = assert!(SESSIONS_ENDED_PER_OPERATOR_MAX * 100 <= SESSIONS_ENDED_MAX);
/// Longest a staff bypass token lasts (a week): a revocation is remembered at most this long.
pub const STAFF_TOKEN_TTL_MS_MAX: u64 = 7 * 86_400_000;
/// Most entries one queue listing returns.
pub const QUEUE_PAGE_MAX: usize = 10_000;
/// Most rooms one room listing returns (a room with the longest branding is ~4 KB of JSON).
pub const ROOMS_PAGE_MAX: usize = 1_000;

/// Most rooms (shards) in one pool.
pub const POOL_ROOMS_MAX: u64 = 10_000;
/// Largest per-room capacity of a pool, and largest reported count.
pub const POOL_ROOM_CAPACITY_MAX: u64 = 10_000_000;

/// Longest branding title.
pub const BRANDING_TITLE_LEN_MAX: usize = 120;
/// Longest branding message.
pub const BRANDING_MESSAGE_LEN_MAX: usize = 1_000;
/// Longest branding logo URL.
pub const BRANDING_URL_LEN_MAX: usize = 2_048;
/// Longest operator's notice to a room's waiters, in bytes.
pub const NOTICE_LEN_MAX: usize = 500;
/// Longest note of a room's changed settings in the audit log
/// ([`Command::NoteRoomChange`](crate::Command::NoteRoomChange)).
pub const CHANGE_NOTE_LEN_MAX: usize = 2_000;
/// Webhooks whose delivery state the cluster keeps.
pub const WEBHOOKS_MAX: usize = 64;

// The bounds must agree with each other.
const _: () = assert!(FORCE_ADMIT_MAX <= ADMITS_PER_APPLY_MAX);
const _: () = assert!(ADMIT_BURST_MAX <= ADMITS_PER_APPLY_MAX * 10);
const _: () = assert!(CAPACITY_MAX <= WAITERS_PER_ROOM_MAX);
#[cfg(not(test))]
const _: () = assert!(CAPACITY_MAX <= SESSIONS_PER_ROOM_MAX);
const _: () = assert!(TOUCH_BATCH_MAX <= ENDED_PER_ROOM_MAX);
const _: () = assert!(QUEUE_PAGE_MAX <= ENDED_PER_ROOM_MAX);
const _: () = assert!(NAME_LEN_MAX + 8 < 255);

/// Debug builds check the whole state machine ([`StateMachine::check`](crate::StateMachine::check))
/// after every entry while it holds at most this many places, and every `places / this` entries
/// when it holds more: a check costs about this many places' worth per entry on average.
pub const DEBUG_CHECK_PLACES_PER_APPLY: usize = 64;
