//! Snapshots and the state digest.
//!
//! A snapshot is the canonical encoding of the whole state: the magic `SLSM`, one version byte
//! ([`SNAPSHOT_VERSION`]), then the state. Version 2 writes the state's small parts (clock, pools,
//! each room's configuration, counters and ended visitors) with postcard and each room's waiters
//! and sessions, which can number millions, as packed records: the 16 bytes of the visitor, then
//! its numbers as LEB128 varints (postcard's integer encoding), with no per-field dispatch. A
//! node encodes its snapshot while its applies wait, so the encoding's speed is a pause. Version 1
//! (all postcard) is still read. Version 3 is version 2 followed by the sections of what later
//! versions grew (ended operator sessions, bans, entry policies, counted clients, used
//! challenges, identities, networks per session, origins, priority lanes, access codes, …),
//! each written, read and checked by its own section in `sections.rs`. Canonical means
//! every collection is written in an order that depends on the state alone (rooms and pools by name, waiters in line order, sessions by
//! sequence number, ended visitors oldest first), never on hash-map layout or on the history of
//! how the state was reached. Derived indexes (expiry heaps, hash maps, holes in the line) are
//! not written; they are rebuilt on decode. The digest is BLAKE3 of this encoding, so two
//! replicas with equal digests hold equal states.

use crate::codes::{BatchState, CodeHash, CodeState};
use crate::command::DecodeError;
use crate::limits::*;
use crate::machine::{LogPosition, StateMachine};
use crate::outcome::{EndReason, Totals};
use crate::policy::ClientKey;
use crate::pool::Pool;
use crate::queue::{Slot, WaitQueue};
use crate::room::{Ended, Room, RoomExtras, RoomParts, WINDOWS};
use crate::sessions::Session;
use crate::sessions::Sessions;
use crate::types::{validate_name, RoomConfig, VisitorId};
use sections::Reading;
use serde::{Deserialize, Serialize};

mod sections;

/// Magic bytes that open every snapshot.
pub const SNAPSHOT_MAGIC: &[u8; 4] = b"SLSM";
/// The current snapshot encoding version.
pub const SNAPSHOT_VERSION: u8 = 3;
/// The version before bans and ended operator sessions; still read.
const SNAPSHOT_V2: u8 = 2;
/// The first version, all postcard; still read.
const SNAPSHOT_V1: u8 = 1;

/// The digest of a state: BLAKE3 of its canonical snapshot encoding.
pub type Digest = [u8; 32];

/// Appends `v` as an LEB128 varint, as postcard writes integers.
fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// The bytes a packed waiter takes with a sequence number below 2^28 and a time before the year
/// 6000 (varints of 4 and 7 bytes); the encoder reserves this much per waiter.
const WAITER_BYTES: usize = 16 + 4 + 7;
/// The same for a packed session (one more time).
const SESSION_BYTES: usize = WAITER_BYTES + 7;

/// The waiters in line order: count, then (visitor, seq, last seen) records.
fn put_waiters(out: &mut Vec<u8>, q: &WaitQueue) {
    put_varint(out, q.len());
    for (_, w) in q.iter() {
        out.extend_from_slice(&w.id.0);
        put_varint(out, w.seq);
        put_varint(out, w.last_seen_ms);
    }
}

/// The sessions in sequence-number order, as the room keeps them: count, then (visitor, seq,
/// admitted at, last active) records.
fn put_sessions(out: &mut Vec<u8>, sessions: &Sessions) {
    put_varint(out, sessions.len() as u64);
    for (id, v) in sessions.iter() {
        out.extend_from_slice(&id.0);
        put_varint(out, v.seq);
        put_varint(out, v.admitted_at_ms);
        put_varint(out, v.last_active_ms);
    }
}

/// Reads the packed records [`put_waiters`] and [`put_sessions`] write.
struct Packed<'a> {
    rest: &'a [u8],
}

impl<'a> Packed<'a> {
    fn varint(&mut self) -> Result<u64, DecodeError> {
        let mut v = 0u64;
        for (i, &b) in self.rest.iter().enumerate().take(10) {
            if i == 9 && b > 1 {
                break;
            }
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                self.rest = &self.rest[i + 1..];
                return Ok(v);
            }
        }
        Err(bad("bad or truncated varint"))
    }

    fn visitor(&mut self) -> Result<VisitorId, DecodeError> {
        let (id, rest) = self
            .rest
            .split_first_chunk::<16>()
            .ok_or_else(|| bad("truncated visitor"))?;
        self.rest = rest;
        Ok(VisitorId(*id))
    }

    /// A record count, bounded by `max`; also returns how many records to reserve room for,
    /// which the remaining bytes bound (every record takes at least 17), so a forged count
    /// cannot make the decoder allocate.
    fn count(&mut self, max: u64, what: &str) -> Result<(u64, usize), DecodeError> {
        let n = self.varint()?;
        if n > max {
            return Err(DecodeError::TooLarge(format!("{n} {what}")));
        }
        Ok((n, (n as usize).min(self.rest.len() / 17)))
    }

    fn waiters(&mut self) -> Result<Vec<(VisitorId, u64, u64)>, DecodeError> {
        let (n, cap) = self.count(WAITERS_PER_ROOM_MAX, "waiters")?;
        let mut v = Vec::with_capacity(cap);
        for _ in 0..n {
            v.push((self.visitor()?, self.varint()?, self.varint()?));
        }
        Ok(v)
    }

    fn sessions(&mut self) -> Result<Vec<(VisitorId, u64, u64, u64)>, DecodeError> {
        let (n, cap) = self.count(SESSIONS_PER_ROOM_MAX, "sessions")?;
        let mut v = Vec::with_capacity(cap);
        for _ in 0..n {
            v.push((
                self.visitor()?,
                self.varint()?,
                self.varint()?,
                self.varint()?,
            ));
        }
        Ok(v)
    }
}

/// A room's small parts; its waiters and sessions follow packed.
#[derive(Serialize)]
struct RoomHeadOut<'a> {
    name: &'a str,
    config: &'a RoomConfig,
    created_at_ms: u64,
    opened: bool,
    opened_at_ms: u64,
    next_seq: u64,
    bucket_units: u64,
    bucket_at_ms: u64,
    windows: [u64; WINDOWS],
    window_latest: u64,
    totals: Totals,
    ended: Vec<(VisitorId, u64, EndReason, u64)>,
}

/// A room's scalar parts as both versions write them (postcard writes a nested struct as its
/// fields in order, so nesting changes no byte).
#[derive(Deserialize)]
struct RoomFieldsIn {
    name: String,
    config: RoomConfig,
    created_at_ms: u64,
    opened: bool,
    opened_at_ms: u64,
    next_seq: u64,
    bucket_units: u64,
    bucket_at_ms: u64,
    windows: [u64; WINDOWS],
    window_latest: u64,
    totals: Totals,
}

#[derive(Deserialize)]
struct RoomHeadIn {
    fields: RoomFieldsIn,
    ended: Vec<(VisitorId, u64, EndReason, u64)>,
}

/// The state's opening; `rooms` rooms follow.
#[derive(Serialize)]
struct HeadOut<'a> {
    clock_ms: u64,
    last_applied: Option<(u64, u64)>,
    pools: Vec<(&'a str, &'a Pool)>,
    rooms: u64,
}

#[derive(Deserialize)]
struct HeadIn {
    clock_ms: u64,
    last_applied: Option<(u64, u64)>,
    pools: Vec<(String, Pool)>,
    rooms: u64,
}

fn room_head(r: &Room) -> RoomHeadOut<'_> {
    RoomHeadOut {
        name: &r.name,
        config: &r.config,
        created_at_ms: r.created_at_ms,
        opened: r.opened,
        opened_at_ms: r.opened_at_ms,
        next_seq: r.next_seq,
        bucket_units: r.bucket_units,
        bucket_at_ms: r.bucket_at_ms,
        windows: r.windows,
        window_latest: r.window_latest,
        totals: r.totals,
        ended: r
            .ended
            .iter()
            .map(|(id, e)| (*id, e.seq, e.reason, e.at_ms))
            .collect(),
    }
}

/// A used challenge: (expiry, id).
type UsedChallenge = (u64, [u8; 16]);

/// A lane's waiters (visitor, seq, last seen), credit, places taken and admissions.
type LaneRecord = (Vec<(VisitorId, u64, u64)>, i64, u64, u64);
/// A room's lanes, and its own line's credit.
type RoomLanes = (Vec<LaneRecord>, i64);
/// A room's code book: the next batch number, the batches, the codes, the redemptions.
type RoomCodes = (
    u32,
    Vec<(u32, BatchState)>,
    Vec<(CodeHash, CodeState)>,
    Vec<(VisitorId, CodeHash)>,
);

/// A room's networks per session, and its count of sessions ended as shared.
type RoomNetworks = (Vec<(VisitorId, Vec<(ClientKey, u64)>)>, u64);

/// A room as decoded, whichever the version; version 1 wrote it so, all postcard.
#[derive(Deserialize)]
struct RoomIn {
    fields: RoomFieldsIn,
    waiters: Vec<(VisitorId, u64, u64)>,
    sessions: Vec<(VisitorId, u64, u64, u64)>,
    ended: Vec<(VisitorId, u64, EndReason, u64)>,
}

/// Decodes a snapshot's state, whichever its version: the state's head and rooms, and what its
/// sections held (nothing before version 3).
fn decode_state(bytes: &[u8]) -> Result<(StateIn, Reading), DecodeError> {
    if bytes.len() < 5 {
        return Err(DecodeError::Empty);
    }
    if &bytes[..4] != SNAPSHOT_MAGIC {
        return Err(bad("not a snapshot (bad magic)"));
    }
    match bytes[4] {
        SNAPSHOT_VERSION => decode_v2(&bytes[5..], true),
        SNAPSHOT_V2 => decode_v2(&bytes[5..], false),
        SNAPSHOT_V1 => {
            let (s, tail): (StateIn, &[u8]) =
                postcard::take_from_bytes(&bytes[5..]).map_err(|e| bad(e.to_string()))?;
            if !tail.is_empty() {
                return Err(bad(format!("{} trailing bytes", tail.len())));
            }
            Ok((s, Reading::default()))
        }
        v => Err(DecodeError::Version(v)),
    }
}

/// Waiters (visitor, seq, last seen) as the line's slots.
fn slots(waiters: Vec<(VisitorId, u64, u64)>) -> Vec<Slot> {
    waiters
        .into_iter()
        .map(|(id, seq, last_seen_ms)| Slot {
            id,
            seq,
            last_seen_ms,
        })
        .collect()
}

/// One room from its snapshot record and what its sections held.
fn restore_room(r: RoomIn, extras: RoomExtras) -> Result<Room, DecodeError> {
    let f = r.fields;
    validate_name("room", &f.name).map_err(|e| bad(e.to_string()))?;
    f.config
        .validate()
        .map_err(|e| bad(format!("room {}: {e}", f.name)))?;
    if r.waiters.len() as u64 > WAITERS_PER_ROOM_MAX || r.ended.len() > ENDED_PER_ROOM_MAX {
        return Err(DecodeError::TooLarge(format!("room {}", f.name)));
    }
    let sessions = r
        .sessions
        .into_iter()
        .map(|(id, seq, admitted_at_ms, last_active_ms)| {
            let s = Session {
                seq,
                admitted_at_ms,
                last_active_ms,
            };
            (id, s)
        });
    let ended = r
        .ended
        .into_iter()
        .map(|(id, seq, reason, at_ms)| (id, Ended { seq, reason, at_ms }));
    Room::from_parts(RoomParts {
        name: f.name,
        config: f.config,
        created_at_ms: f.created_at_ms,
        opened: f.opened,
        opened_at_ms: f.opened_at_ms,
        next_seq: f.next_seq,
        waiters: slots(r.waiters),
        sessions: sessions.collect(),
        ended: ended.collect(),
        bucket_units: f.bucket_units,
        bucket_at_ms: f.bucket_at_ms,
        windows: f.windows,
        window_latest: f.window_latest,
        totals: f.totals,
        extras,
    })
    .map_err(bad)
}

/// The state as decoded, whichever the version; version 1 wrote it so, all postcard.
#[derive(Deserialize)]
struct StateIn {
    clock_ms: u64,
    last_applied: Option<(u64, u64)>,
    rooms: Vec<RoomIn>,
    pools: Vec<(String, Pool)>,
}

fn bad(msg: impl Into<String>) -> DecodeError {
    DecodeError::Malformed(msg.into())
}

impl StateMachine {
    /// The canonical snapshot encoding of the whole state.
    pub fn snapshot(&self) -> Vec<u8> {
        self.snapshot_into(Vec::new())
    }

    /// [`snapshot`](Self::snapshot), appended to `out` (which may already hold a header), so
    /// that a snapshot file is encoded in one buffer without copying.
    pub fn snapshot_into(&self, out: Vec<u8>) -> Vec<u8> {
        self.encode(self.last_applied.map(|p| (p.term, p.index)), out)
    }

    fn encode(&self, last_applied: Option<(u64, u64)>, mut out: Vec<u8>) -> Vec<u8> {
        // One reservation for the packed records, so the buffer is not regrown (and copied)
        // while a large state is written.
        out.reserve(
            256 + self
                .rooms
                .values()
                .map(|r| {
                    256 + r.queue.len() as usize * WAITER_BYTES + r.sessions.len() * SESSION_BYTES
                })
                .sum::<usize>(),
        );
        out.extend_from_slice(SNAPSHOT_MAGIC);
        out.push(SNAPSHOT_VERSION);
        let head = HeadOut {
            clock_ms: self.clock_ms,
            last_applied,
            pools: self.pools.iter().map(|(n, p)| (n.as_str(), p)).collect(),
            rooms: self.rooms.len() as u64,
        };
        out = postcard::to_extend(&head, out).expect("encoding into a Vec cannot fail");
        for r in self.rooms.values() {
            out = postcard::to_extend(&room_head(r), out).expect("encoding into a Vec cannot fail");
            put_waiters(&mut out, &r.queue);
            put_sessions(&mut out, &r.sessions);
        }
        sections::write_all(self, out)
    }

    /// Rebuilds a state from [`snapshot`](Self::snapshot) bytes, checking its consistency.
    pub fn restore(bytes: &[u8]) -> Result<Self, DecodeError> {
        let (s, reading) = decode_state(bytes)?;
        if s.rooms.len() > ROOMS_MAX || s.pools.len() > POOLS_MAX {
            return Err(DecodeError::TooLarge("too many rooms or pools".into()));
        }
        let Reading {
            mut sm,
            rooms: mut extras,
        } = reading;
        sm.clock_ms = s.clock_ms;
        sm.last_applied = s
            .last_applied
            .map(|(term, index)| LogPosition { term, index });
        for r in s.rooms {
            let name = r.fields.name.clone();
            let room = restore_room(r, extras.remove(&name).unwrap_or_default())?;
            if sm.rooms.insert(name.clone(), room).is_some() {
                return Err(bad(format!("room {name} appears twice")));
            }
        }
        if let Some(name) = extras.keys().next() {
            return Err(bad(format!("room {name}: sections name no such room")));
        }
        for (name, p) in s.pools {
            validate_name("pool", &name).map_err(|e| bad(e.to_string()))?;
            crate::pool::validate(p.room_capacity, p.rooms_max).map_err(|e| bad(e.to_string()))?;
            if p.counts.len() as u64 > POOL_ROOMS_MAX {
                return Err(DecodeError::TooLarge(format!("pool {name}")));
            }
            if sm.pools.insert(name.clone(), p).is_some() {
                return Err(bad(format!("pool {name} appears twice")));
            }
        }
        Ok(sm)
    }

    /// BLAKE3 of the canonical snapshot encoding.
    pub fn digest(&self) -> Digest {
        *blake3::hash(&self.snapshot()).as_bytes()
    }

    /// The digest of the rooms, pools and clock alone, without the log position: equal for a
    /// cluster restored from a backup and the cluster the backup was taken from, although the
    /// restored cluster's log goes on from there with entries of its own.
    pub fn content_digest(&self) -> Digest {
        *blake3::hash(&self.encode(None, Vec::new())).as_bytes()
    }
}

/// The state after the version byte of a version 2 snapshot, or of a version 3 one (with
/// `sections`).
fn decode_v2(bytes: &[u8], sections: bool) -> Result<(StateIn, Reading), DecodeError> {
    let (head, mut rest): (HeadIn, &[u8]) =
        postcard::take_from_bytes(bytes).map_err(|e| bad(e.to_string()))?;
    if head.rooms > ROOMS_MAX as u64 {
        return Err(DecodeError::TooLarge("too many rooms".into()));
    }
    let mut rooms = Vec::with_capacity(head.rooms as usize);
    for _ in 0..head.rooms {
        let (r, tail): (RoomHeadIn, &[u8]) =
            postcard::take_from_bytes(rest).map_err(|e| bad(e.to_string()))?;
        let mut packed = Packed { rest: tail };
        let waiters = packed.waiters()?;
        let sessions = packed.sessions()?;
        rest = packed.rest;
        rooms.push(RoomIn {
            fields: r.fields,
            waiters,
            sessions,
            ended: r.ended,
        });
    }
    let mut reading = Reading::default();
    if sections {
        rest = sections::read_all(rest, &mut reading)?;
    }
    if !rest.is_empty() {
        return Err(bad(format!("{} trailing bytes", rest.len())));
    }
    let state = StateIn {
        clock_ms: head.clock_ms,
        last_applied: head.last_applied,
        rooms,
        pools: head.pools,
    };
    Ok((state, reading))
}

/// A digest as lowercase hex.
pub fn digest_hex(d: &Digest) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}
