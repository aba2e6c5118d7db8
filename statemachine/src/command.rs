//! Commands and their encoding. The encoding is the log format: it is forever.
//!
//! A log entry's payload is a [`Proposal`]: the time the leader stamped and a batch of commands.
//! Encoded, it is one version byte ([`PROPOSAL_VERSION`]) followed by the postcard encoding of the
//! proposal. New commands are only ever appended to [`Command`]; variants are never reordered,
//! removed or changed (a changed command is a new variant).

use crate::codes::{CodeBatch, NewCode};
use crate::limits::*;
use crate::origin::{HealthSource, OriginSamples};
use crate::policy::{ClientKey, EncodedEvidence, EncodedPolicy};
pub use crate::types::DecodeError;
use crate::types::{Health, Mode, RoomConfig, VisitorId};
use serde::{Deserialize, Serialize};

/// The current proposal encoding version.
pub const PROPOSAL_VERSION: u8 = 1;

/// A change of replicated state. Every field that comes from outside is validated when applied.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Command {
    /// Create a room; rejected if it exists.
    CreateRoom {
        /// Room name.
        room: String,
        /// Its configuration.
        config: RoomConfig,
    },
    /// Replace a room's configuration; rejected if it does not exist.
    UpdateRoom {
        /// Room name.
        room: String,
        /// The new configuration.
        config: RoomConfig,
    },
    /// Create or replace a room.
    PutRoom {
        /// Room name.
        room: String,
        /// The configuration.
        config: RoomConfig,
    },
    /// Delete a room with everyone in it.
    DeleteRoom {
        /// Room name.
        room: String,
    },
    /// Join a room, or resume the place already held.
    Join {
        /// Room name.
        room: String,
        /// The visitor.
        visitor: VisitorId,
    },
    /// Record a visitor's activity: renew a session or check a waiter in.
    Heartbeat {
        /// Room name.
        room: String,
        /// The visitor.
        visitor: VisitorId,
    },
    /// Leave the room (waiting or admitted).
    Leave {
        /// Room name.
        room: String,
        /// The visitor.
        visitor: VisitorId,
    },
    /// Record activity of many visitors at once (session renewals, waiter check-ins).
    Touch {
        /// Room name.
        room: String,
        /// At most [`TOUCH_BATCH_MAX`] visitors.
        visitors: Vec<VisitorId>,
    },
    /// Silently stop admitting.
    Pause {
        /// Room name.
        room: String,
    },
    /// Admit again after a pause.
    Resume {
        /// Room name.
        room: String,
    },
    /// Switch the admission mode live.
    SetMode {
        /// Room name.
        room: String,
        /// The new mode.
        mode: Mode,
    },
    /// Set the origin health throttle.
    SetHealth {
        /// Room name.
        room: String,
        /// The health.
        health: Health,
        /// A new slow factor, in thousandths (1..=999), or keep the current one.
        slow_factor_permille: Option<u64>,
    },
    /// Admit up to `count` waiters now, ignoring the bucket, pause and schedule (not capacity).
    ForceAdmit {
        /// Room name.
        room: String,
        /// At most [`FORCE_ADMIT_MAX`].
        count: u64,
    },
    /// End one visitor's session or place.
    Revoke {
        /// Room name.
        room: String,
        /// The visitor.
        visitor: VisitorId,
    },
    /// End every session of a room.
    RevokeAll {
        /// Room name.
        room: String,
    },
    /// Create or reconfigure a pool.
    PutPool {
        /// Pool name.
        pool: String,
        /// Capacity of each room.
        room_capacity: u64,
        /// Most rooms.
        rooms_max: u64,
    },
    /// Delete a pool.
    DeletePool {
        /// Pool name.
        pool: String,
    },
    /// Take a place in the first room under capacity.
    PoolAssign {
        /// Pool name.
        pool: String,
    },
    /// Give a place back.
    PoolRelease {
        /// Pool name.
        pool: String,
        /// Room index.
        room_index: u64,
    },
    /// Reconcile a room's count with reality.
    PoolReport {
        /// Pool name.
        pool: String,
        /// Room index.
        room_index: u64,
        /// The real count.
        count: u64,
    },
    /// Run time-driven work: expiry, refill, schedules, admissions.
    Tick,
    /// End a visitor's place or session, and refuse it a place again until `until_ms` (log
    /// time), or while the room exists (`None`).
    Ban {
        /// Room name.
        room: String,
        /// The visitor.
        visitor: VisitorId,
        /// When the ban ends, ms since the epoch; `None`: never.
        until_ms: Option<u64>,
    },
    /// Lift a ban.
    Unban {
        /// Room name.
        room: String,
        /// The visitor.
        visitor: VisitorId,
    },
    /// End a signed credential everywhere: an operator's dashboard session (sign-out) or a
    /// staff bypass token (revocation); every node refuses it from then on. Remembered until
    /// `until_ms`, when the credential would have ended anyway.
    EndCredential {
        /// The credential's random id.
        credential: [u8; 16],
        /// When it would have ended, ms since the epoch.
        until_ms: u64,
    },
    /// Set a room's entry policy ([`crate::policy`]).
    SetEntryPolicy {
        /// Room name.
        room: String,
        /// The policy, in its own versioned encoding.
        policy: EncodedPolicy,
    },
    /// Join (or resume) as [`Command::Join`], with what the edge knows of the visitor: the
    /// client network it came from, which the room's entry policy may count.
    JoinWith {
        /// Room name.
        room: String,
        /// The visitor.
        visitor: VisitorId,
        /// What the join brings, in its own versioned encoding.
        evidence: EncodedEvidence,
    },
    /// Record activity of many visitors at once, as [`Command::Touch`], with the client network
    /// each was seen from (a visitor may appear once per network), for rooms whose entry policy
    /// counts the networks a session is used from.
    TouchFrom {
        /// Room name.
        room: String,
        /// At most [`TOUCH_BATCH_MAX`] (visitor, network) pairs.
        visits: Vec<(VisitorId, ClientKey)>,
    },
    /// Measurements of a room's origin, from the leader's probe or from proxies; the room's
    /// origin rule turns them into its health ([`crate::origin`]).
    ReportOrigin {
        /// Room name.
        room: String,
        /// Who measured.
        source: HealthSource,
        /// The counts.
        samples: OriginSamples,
    },
    /// Start a batch of access codes ([`crate::codes`]): the outcome names the batch.
    CreateCodes {
        /// Room name.
        room: String,
        /// What the batch's codes give.
        batch: CodeBatch,
        /// At most [`CODES_PER_COMMAND_MAX`](crate::codes::CODES_PER_COMMAND_MAX) hashed codes.
        codes: Vec<NewCode>,
    },
    /// Add hashed codes to a batch.
    AddCodes {
        /// Room name.
        room: String,
        /// The batch's number.
        batch: u32,
        /// At most [`CODES_PER_COMMAND_MAX`](crate::codes::CODES_PER_COMMAND_MAX) hashed codes.
        codes: Vec<NewCode>,
    },
    /// End a batch: its codes stop working; the places they gave stay.
    EndCodes {
        /// Room name.
        room: String,
        /// The batch's number.
        batch: u32,
    },
    /// Show a message to everyone in the room's line (replacing the one shown), or take it
    /// down (`None`).
    SetNotice {
        /// Room name.
        room: String,
        /// At most [`NOTICE_LEN_MAX`] bytes of plain text.
        text: Option<String>,
    },
    /// An operator's command, applied as `command` and recorded with the operator's name in
    /// the ledger, whose operator audit log lists who did what. Never nested.
    AsOperator {
        /// The operator's name (as [`validate_name`](crate::types::validate_name) allows).
        operator: String,
        /// The command.
        command: Box<Command>,
    },
    /// A webhook's events are delivered through this ledger position: the leader's delivery
    /// state, replicated so that a new leader goes on from there (at least once). Only ever
    /// moves forward.
    SetWebhookCursor {
        /// The webhook's name.
        hook: String,
        /// The ledger position (log index, command, record) delivered through.
        through: crate::ledger::RecordKey,
    },
    /// Changes nothing: puts a change Raft makes by its own entries (a membership change) in
    /// the operator audit log, wrapped in [`Command::AsOperator`] with who asked for it.
    NoteClusterChange {
        /// What changed, in words (at most [`NOTICE_LEN_MAX`]
        /// bytes).
        what: String,
    },
    /// Changes nothing: puts a staff bypass token's issue in the operator audit log, wrapped
    /// in [`Command::AsOperator`] with who issued it. The token is signed by the node that
    /// asked for this entry only once it is applied, so no token exists without its record.
    NoteStaffToken {
        /// The room the token lets its holder into.
        room: String,
        /// The token's id (by which it can be revoked).
        id: [u8; 16],
        /// When it stops working, ms since the epoch.
        expires_at_ms: u64,
        /// Whom it was issued to, in words (at most [`NOTICE_LEN_MAX`] bytes of one line).
        label: String,
    },
    /// Changes nothing: puts what an operator's change of a room's settings changed (each
    /// setting, from what to what) in the operator audit log, wrapped in
    /// [`Command::AsOperator`] with who made it. Written after the change itself.
    NoteRoomChange {
        /// The room.
        room: String,
        /// The settings changed, in words (at most [`CHANGE_NOTE_LEN_MAX`] bytes of one line).
        what: String,
    },
    /// Revoke a staff bypass token of `room` everywhere: every node refuses it from then on.
    /// Remembered until `until_ms` (at most [`STAFF_TOKEN_TTL_MS_MAX`] ahead, when the token
    /// would have ended anyway). What revocations wrote as [`Command::EndCredential`] before:
    /// this names the room and the token in the audit log, refuses a dashboard session's id,
    /// and takes at most [`STAFF_TOKENS_ENDED_MAX`] places among the ended credentials, so that
    /// revocations never take the places sign-outs need.
    RevokeStaffToken {
        /// The room the token lets its holder into (it must exist).
        room: String,
        /// The token's id.
        id: [u8; 16],
        /// When it would have ended, ms since the epoch.
        until_ms: u64,
    },
}

impl Command {
    /// How many bytes the command takes in an encoded proposal.
    pub fn encoded_len(&self) -> usize {
        postcard::experimental::serialized_size(self).expect("sizing cannot fail")
    }

    /// The room or pool a command addresses, if any.
    pub fn target(&self) -> Option<&str> {
        use Command::*;
        match self {
            CreateRoom { room, .. }
            | UpdateRoom { room, .. }
            | PutRoom { room, .. }
            | DeleteRoom { room }
            | Join { room, .. }
            | Heartbeat { room, .. }
            | Leave { room, .. }
            | Touch { room, .. }
            | Pause { room }
            | Resume { room }
            | SetMode { room, .. }
            | SetHealth { room, .. }
            | ForceAdmit { room, .. }
            | Revoke { room, .. }
            | RevokeAll { room }
            | Ban { room, .. }
            | Unban { room, .. }
            | SetEntryPolicy { room, .. }
            | JoinWith { room, .. }
            | TouchFrom { room, .. }
            | ReportOrigin { room, .. }
            | CreateCodes { room, .. }
            | AddCodes { room, .. }
            | EndCodes { room, .. }
            | SetNotice { room, .. }
            | NoteStaffToken { room, .. }
            | RevokeStaffToken { room, .. }
            | NoteRoomChange { room, .. } => Some(room),
            PutPool { pool, .. }
            | DeletePool { pool }
            | PoolAssign { pool }
            | PoolRelease { pool, .. }
            | PoolReport { pool, .. } => Some(pool),
            Tick | EndCredential { .. } | SetWebhookCursor { .. } | NoteClusterChange { .. } => {
                None
            }
            AsOperator { command, .. } => command.target(),
        }
    }

    /// The command's name in the operator audit log, and what it addressed besides its room or
    /// pool, in words.
    pub fn describe(&self) -> (&'static str, String) {
        use Command::*;
        let none = String::new;
        match self {
            CreateRoom { .. } => ("create_room", none()),
            UpdateRoom { .. } => ("update_room", none()),
            PutRoom { .. } => ("put_room", none()),
            DeleteRoom { .. } => ("delete_room", none()),
            Join { visitor, .. } | JoinWith { visitor, .. } => ("join", visitor.to_string()),
            Heartbeat { visitor, .. } => ("heartbeat", visitor.to_string()),
            Leave { visitor, .. } => ("leave", visitor.to_string()),
            Touch { visitors, .. } => ("touch", format!("{} visitors", visitors.len())),
            TouchFrom { visits, .. } => ("touch", format!("{} visits", visits.len())),
            Pause { .. } => ("pause", none()),
            Resume { .. } => ("resume", none()),
            SetMode { mode, .. } => ("set_mode", mode.as_str().to_string()),
            SetHealth { health, .. } => ("set_health", health.as_str().to_string()),
            ForceAdmit { count, .. } => ("force_admit", format!("{count} waiters")),
            Revoke { visitor, .. } => ("revoke", visitor.to_string()),
            RevokeAll { .. } => ("revoke_all", none()),
            PutPool {
                room_capacity,
                rooms_max,
                ..
            } => ("put_pool", format!("{rooms_max} rooms of {room_capacity}")),
            DeletePool { .. } => ("delete_pool", none()),
            PoolAssign { .. } => ("pool_assign", none()),
            PoolRelease { room_index, .. } => ("pool_release", format!("room {room_index}")),
            PoolReport {
                room_index, count, ..
            } => ("pool_report", format!("room {room_index}: {count}")),
            Tick => ("tick", none()),
            Ban {
                visitor, until_ms, ..
            } => (
                "ban",
                match until_ms {
                    Some(t) => format!("{visitor} until {t}"),
                    None => visitor.to_string(),
                },
            ),
            Unban { visitor, .. } => ("unban", visitor.to_string()),
            EndCredential { .. } => ("end_credential", none()),
            SetEntryPolicy { .. } => ("set_entry_policy", none()),
            ReportOrigin { source, .. } => ("report_origin", source.as_str().to_string()),
            CreateCodes { codes, .. } => ("create_codes", format!("{} codes", codes.len())),
            AddCodes { batch, codes, .. } => (
                "add_codes",
                format!("{} codes to batch {batch}", codes.len()),
            ),
            EndCodes { batch, .. } => ("end_codes", format!("batch {batch}")),
            SetNotice { text, .. } => (
                "set_notice",
                if text.is_some() {
                    "shown"
                } else {
                    "taken down"
                }
                .to_string(),
            ),
            AsOperator { command, .. } => command.describe(),
            SetWebhookCursor { hook, .. } => ("set_webhook_cursor", hook.clone()),
            NoteClusterChange { what } => ("cluster_change", what.clone()),
            NoteRoomChange { what, .. } => ("room_settings", what.clone()),
            RevokeStaffToken { id, .. } => ("revoke_staff_token", hex16(id)),
            NoteStaffToken {
                id,
                expires_at_ms,
                label,
                ..
            } => (
                "issue_staff_token",
                format!("{} ({label}) until {expires_at_ms}", hex16(id)),
            ),
        }
    }
}

/// A credential's id as the audit log shows it: 32 lowercase hex digits.
fn hex16(id: &[u8; 16]) -> String {
    String::from_utf8(crate::types::hex16(id).to_vec()).expect("hex digits are ASCII")
}

/// One log entry's worth of commands, stamped by the leader.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Proposal {
    /// The cluster's time when the leader proposed (the median of the voters' wall clocks as the
    /// leader saw them), ms since the epoch. The state machine keeps its
    /// clock monotonic: `clock = max(clock, time_ms)`.
    pub time_ms: u64,
    /// At most [`COMMANDS_PER_PROPOSAL_MAX`] commands, applied in order.
    pub commands: Vec<Command>,
}

impl Proposal {
    /// Encodes with the version byte.
    pub fn encode(&self) -> Vec<u8> {
        let out = vec![PROPOSAL_VERSION];
        postcard::to_extend(self, out).expect("encoding into a Vec cannot fail")
    }

    /// Decodes and checks the command count.
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let (&version, rest) = bytes.split_first().ok_or(DecodeError::Empty)?;
        if version != PROPOSAL_VERSION {
            return Err(DecodeError::Version(version));
        }
        let (p, tail): (Proposal, &[u8]) =
            postcard::take_from_bytes(rest).map_err(|e| DecodeError::Malformed(e.to_string()))?;
        if !tail.is_empty() {
            return Err(DecodeError::Malformed(format!(
                "{} trailing bytes",
                tail.len()
            )));
        }
        if p.commands.len() > COMMANDS_PER_PROPOSAL_MAX {
            return Err(DecodeError::TooLarge(format!(
                "{} commands, at most {COMMANDS_PER_PROPOSAL_MAX}",
                p.commands.len()
            )));
        }
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proposal_round_trip_and_golden_bytes() {
        let p = Proposal {
            time_ms: 1_000,
            commands: vec![
                Command::Join {
                    room: "a".into(),
                    visitor: VisitorId::from_u128(1),
                },
                Command::Tick,
            ],
        };
        let bytes = p.encode();
        // Version 1, time 1000 (varint e8 07), two commands, Join = variant 4, "a", 16 id bytes,
        // Tick = variant 20. If this changes, old logs no longer decode.
        let mut expected = vec![1, 0xe8, 0x07, 2, 4, 1, b'a'];
        expected.extend_from_slice(&[0; 15]);
        expected.extend_from_slice(&[1, 20]);
        assert_eq!(bytes, expected);
        assert_eq!(Proposal::decode(&bytes).unwrap(), p);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert_eq!(Proposal::decode(&[]), Err(DecodeError::Empty));
        assert_eq!(Proposal::decode(&[9, 0, 0]), Err(DecodeError::Version(9)));
        assert!(matches!(
            Proposal::decode(&[1, 0xff]),
            Err(DecodeError::Malformed(_))
        ));
        assert!(matches!(
            Proposal::decode(&[1, 0, 1, 200]),
            Err(DecodeError::Malformed(_))
        ));
        let mut ok = Proposal {
            time_ms: 5,
            commands: vec![Command::Tick],
        }
        .encode();
        ok.push(0);
        assert!(matches!(
            Proposal::decode(&ok),
            Err(DecodeError::Malformed(_))
        ));
        let big = Proposal {
            time_ms: 0,
            commands: vec![Command::Tick; COMMANDS_PER_PROPOSAL_MAX + 1],
        };
        assert!(matches!(
            Proposal::decode(&big.encode()),
            Err(DecodeError::TooLarge(_))
        ));
        // A length prefix far larger than the input must not allocate or panic.
        assert!(Proposal::decode(&[1, 0, 0xff, 0xff, 0xff, 0xff, 0x0f]).is_err());
        // Every truncation of a valid proposal is rejected.
        let full = Proposal {
            time_ms: 77,
            commands: vec![Command::Touch {
                room: "r".into(),
                visitors: vec![VisitorId::from_u128(5); 3],
            }],
        }
        .encode();
        for n in 0..full.len() {
            assert!(
                Proposal::decode(&full[..n]).is_err(),
                "prefix of {n} bytes decoded"
            );
        }
    }
}
