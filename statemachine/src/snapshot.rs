//! Snapshots and the state digest.
//!
//! A snapshot is the canonical encoding of the whole state: the magic `SLSM`, one version byte
//! ([`SNAPSHOT_VERSION`]), then the state. Version 2 writes the state's small parts (clock, pools,
//! each room's configuration, counters and ended visitors) with postcard and each room's waiters
//! and sessions, which can number millions, as packed records: the 16 bytes of the visitor, then
//! its numbers as LEB128 varints (postcard's integer encoding), with no per-field dispatch. A
//! node encodes its snapshot while its applies wait, so the encoding's speed is a pause. Version 1
//! (all postcard) is still read. Version 3 is version 2 followed by what later versions grew
//! (bans, ended operator sessions, entry policies, counted clients, used challenges, identities, networks per session,
//! origins, priority lanes, access codes), postcard. Canonical means
//! every collection is written in an order that depends on the state alone (rooms and pools by name, waiters in line order, sessions by
//! sequence number, ended visitors oldest first), never on hash-map layout or on the history of
//! how the state was reached. Derived indexes (expiry heaps, hash maps, holes in the line) are
//! not written; they are rebuilt on decode. The digest is BLAKE3 of this encoding, so two
//! replicas with equal digests hold equal states.

use crate::codes::{BatchState, CodeBook, CodeHash, CodeState};
use crate::command::DecodeError;
use crate::ledger::{Chain, RecordKey};
use crate::limits::*;
use crate::machine::{LogPosition, StateMachine};
use crate::origin::OriginWatch;
use crate::outcome::{EndReason, Totals};
use crate::policy::{ClientKey, EncodedPolicy, EntryPolicy, IdentityKey};
use crate::pool::Pool;
use crate::queue::{Slot, WaitQueue};
use crate::room::{Draws, Ended, LaneParts, Room, RoomParts, Turnover, WINDOWS};
use crate::sessions::Session;
use crate::sessions::Sessions;
use crate::types::{validate_name, RoomConfig, VisitorId};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

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

/// What version 3 adds after the rooms: state that later versions grew, in order.
#[derive(Serialize)]
struct ExtrasOut<'a> {
    /// Ended operator sessions, by id.
    credentials_ended: Vec<(&'a [u8; 16], u64)>,
    /// The bans of each room that has any, rooms by name, visitors in order.
    bans: Vec<(&'a str, Vec<(VisitorId, u64)>)>,
    /// The entry policy of each room whose policy is not the default, rooms by name.
    policies: Vec<(&'a str, EncodedPolicy)>,
    /// The client network of each counted visitor, for each room with any, visitors in order.
    clients: Vec<(&'a str, Vec<(VisitorId, ClientKey)>)>,
    /// The used, unexpired challenges of each room with any, rooms by name, in (expiry, id)
    /// order.
    challenges: Vec<(&'a str, Vec<UsedChallenge>)>,
    /// The identity of each visitor that has one, for each room with any, visitors in order.
    identities: Vec<(&'a str, Vec<(VisitorId, IdentityKey)>)>,
    /// The networks each session was used from, and the count of sessions ended as shared,
    /// for each room with any.
    networks: Vec<(&'a str, RoomNetworks)>,
    /// How long places are held (used sessions ended, their mean ms, unused sessions ended),
    /// for each room that has seen one end.
    turnover: Vec<(&'a str, (u64, u64, u64))>,
    /// The origin measurements and last change of health, for each room with any.
    origins: Vec<(&'a str, &'a OriginWatch)>,
    /// The priority lanes' lines (waiters in line order, credit, joined, admitted) and the
    /// room's own line's credit, for each room with lanes.
    lanes: Vec<(&'a str, RoomLanes)>,
    /// The access codes (batches by number, codes by hash, redemptions by visitor), for each
    /// room that has made any.
    codes: Vec<(&'a str, RoomCodes)>,
    /// The operator's notice (text, when set) of each room that shows one.
    notices: Vec<(&'a str, (&'a str, u64))>,
    /// The ledger's count and chain.
    ledger: Chain,
    /// The draw secret of each room that draws by `sluice-draw-v2`.
    draws: Vec<(&'a str, Draws)>,
    /// Each webhook's delivery position, by name.
    webhooks: Vec<(&'a str, RecordKey)>,
    /// The rooms whose closing time the ledger has noted, by name.
    closed: Vec<&'a str>,
    /// The held waiters at the head of each line (line, count), for each room with any.
    held: Vec<(&'a str, Vec<(u64, u64)>)>,
}

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

#[derive(Deserialize, Default)]
struct ExtrasIn {
    credentials_ended: Vec<([u8; 16], u64)>,
    bans: Vec<(String, Vec<(VisitorId, u64)>)>,
    policies: Vec<(String, EncodedPolicy)>,
    clients: Vec<(String, Vec<(VisitorId, ClientKey)>)>,
    challenges: Vec<(String, Vec<UsedChallenge>)>,
    identities: Vec<(String, Vec<(VisitorId, IdentityKey)>)>,
    networks: Vec<(String, RoomNetworks)>,
    turnover: Vec<(String, (u64, u64, u64))>,
    origins: Vec<(String, OriginWatch)>,
    lanes: Vec<(String, RoomLanes)>,
    codes: Vec<(String, RoomCodes)>,
    notices: Vec<(String, (String, u64))>,
    ledger: Chain,
    draws: Vec<(String, Draws)>,
    webhooks: Vec<(String, RecordKey)>,
    closed: Vec<String>,
    held: Vec<(String, Vec<(u64, u64)>)>,
}

/// A room as decoded, whichever the version; version 1 wrote it so, all postcard.
#[derive(Deserialize)]
struct RoomIn {
    fields: RoomFieldsIn,
    waiters: Vec<(VisitorId, u64, u64)>,
    sessions: Vec<(VisitorId, u64, u64, u64)>,
    ended: Vec<(VisitorId, u64, EndReason, u64)>,
}

/// Decodes a snapshot's state, whichever its version.
fn decode_state(bytes: &[u8]) -> Result<StateIn, DecodeError> {
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
            Ok(s)
        }
        v => Err(DecodeError::Version(v)),
    }
}

/// Records kept beside the rooms, by room name, each checked against its bound, none listed
/// twice; [`restore_room`] takes each room's, and what is left names no room.
struct RoomExtras {
    policies: BTreeMap<String, EntryPolicy>,
    clients: BTreeMap<String, Vec<(VisitorId, ClientKey)>>,
    challenges: BTreeMap<String, Vec<UsedChallenge>>,
    identities: BTreeMap<String, Vec<(VisitorId, IdentityKey)>>,
    networks: BTreeMap<String, RoomNetworks>,
    turnover: BTreeMap<String, Turnover>,
    origins: BTreeMap<String, OriginWatch>,
    lanes: BTreeMap<String, RoomLanes>,
    codes: BTreeMap<String, CodeBook>,
    notices: BTreeMap<String, (String, u64)>,
    draws: BTreeMap<String, Draws>,
    closed: BTreeMap<String, ()>,
    bans: BTreeMap<String, Vec<(VisitorId, u64)>>,
    held: BTreeMap<String, Vec<(u64, u64)>>,
}

impl RoomExtras {
    /// Takes the per-room records out of `e`.
    fn take_from(e: &mut ExtrasIn) -> Result<Self, DecodeError> {
        use std::mem::take;
        let per_room = WAITERS_PER_ROOM_MAX + SESSIONS_PER_ROOM_MAX;
        let too_large = |what: &str| DecodeError::TooLarge(what.into());
        for (len, what) in [
            (e.turnover.len(), "turnover of too many rooms"),
            (e.origins.len(), "origins of too many rooms"),
            (e.notices.len(), "notices"),
            (e.draws.len(), "draws"),
            (e.closed.len(), "closed rooms"),
            (e.bans.len(), "bans of too many rooms"),
            (e.held.len(), "held waiters of too many rooms"),
        ] {
            if len > ROOMS_MAX {
                return Err(too_large(what));
            }
        }
        Ok(RoomExtras {
            policies: by_room(take(&mut e.policies), "policy", |name, p| {
                let p = p.decode()?;
                p.validate().map_err(|e| bad(format!("room {name}: {e}")))?;
                Ok(p)
            })?,
            clients: by_room(take(&mut e.clients), "clients", |name, c| {
                bounded(c, |c| c.len() as u64 <= per_room, name, "clients")
            })?,
            challenges: by_room(take(&mut e.challenges), "challenges", |name, c| {
                let max = crate::policy::CHALLENGES_REMEMBERED_MAX;
                bounded(c, |c| c.len() <= max, name, "challenges")
            })?,
            identities: by_room(take(&mut e.identities), "identities", |name, i| {
                bounded(i, |i| i.len() as u64 <= per_room, name, "identities")
            })?,
            networks: by_room(take(&mut e.networks), "networks", |name, n| {
                bounded(
                    n,
                    |n| n.0.len() as u64 <= SESSIONS_PER_ROOM_MAX,
                    name,
                    "networks",
                )
            })?,
            turnover: by_room(
                take(&mut e.turnover),
                "turnover",
                |_, (ended, mean_ms, unused)| {
                    Ok(Turnover {
                        ended,
                        mean_ms,
                        unused,
                    })
                },
            )?,
            origins: by_room(take(&mut e.origins), "origin", |_, o| Ok(o))?,
            lanes: by_room(take(&mut e.lanes), "lanes", |name, l| {
                let fits = |l: &RoomLanes| {
                    l.0.len() <= crate::lanes::LANES_MAX
                        && l.0.iter().map(|x| x.0.len() as u64).sum::<u64>() <= WAITERS_PER_ROOM_MAX
                };
                bounded(l, fits, name, "lanes")
            })?,
            codes: by_room(
                take(&mut e.codes),
                "codes",
                |name, (next, batches, list, redeemed)| {
                    CodeBook::from_parts(next, batches, list, redeemed)
                        .map_err(|e| bad(format!("room {name}: {e}")))
                },
            )?,
            notices: by_room(take(&mut e.notices), "notice", |name, n| {
                crate::types::validate_notice(&Some(n.0.clone()))
                    .map_err(|e| bad(format!("room {name}: {e}")))?;
                Ok(n)
            })?,
            draws: by_room(take(&mut e.draws), "draws", |name, d| {
                if !d.v2 || d.epoch.is_none() {
                    return Err(bad(format!("room {name}: draws without a secret")));
                }
                Ok(d)
            })?,
            closed: by_room(
                take(&mut e.closed).into_iter().map(|n| (n, ())).collect(),
                "closing",
                |_, ()| Ok(()),
            )?,
            // Before the rooms' identities, which a banned visitor keeps.
            bans: by_room(take(&mut e.bans), "bans", |name, b| {
                bounded(b, |b| b.len() <= BANS_PER_ROOM_MAX, name, "bans")
            })?,
            held: by_room(take(&mut e.held), "held waiters", |name, h| {
                bounded(
                    h,
                    |h| h.len() <= crate::lanes::LANES_MAX + 1,
                    name,
                    "held waiters",
                )
            })?,
        })
    }

    /// A room named by records that no room took.
    fn left_over(&self) -> Option<&String> {
        self.policies
            .keys()
            .chain(self.clients.keys())
            .chain(self.challenges.keys())
            .chain(self.identities.keys())
            .chain(self.networks.keys())
            .chain(self.lanes.keys())
            .chain(self.codes.keys())
            .chain(self.notices.keys())
            .chain(self.draws.keys())
            .chain(self.closed.keys())
            .chain(self.bans.keys())
            .chain(self.held.keys())
            .next()
    }
}

/// `list`'s records by room, each made by `make` (which checks it); `what` names them when one
/// room is listed twice.
fn by_room<T, U>(
    list: Vec<(String, T)>,
    what: &str,
    mut make: impl FnMut(&str, T) -> Result<U, DecodeError>,
) -> Result<BTreeMap<String, U>, DecodeError> {
    let mut map = BTreeMap::new();
    for (name, x) in list {
        let made = make(&name, x)?;
        if map.insert(name.clone(), made).is_some() {
            return Err(bad(format!("room {name}: {what} listed twice")));
        }
    }
    Ok(map)
}

/// `x` if it `fits` its bound; too large (room `name`'s `what`) otherwise.
fn bounded<T>(
    x: T,
    fits: impl FnOnce(&T) -> bool,
    name: &str,
    what: &str,
) -> Result<T, DecodeError> {
    if fits(&x) {
        Ok(x)
    } else {
        Err(DecodeError::TooLarge(format!("room {name}: {what}")))
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

/// One room from its snapshot record and its records in `x`.
fn restore_room(r: RoomIn, x: &mut RoomExtras) -> Result<Room, DecodeError> {
    let f = r.fields;
    validate_name("room", &f.name).map_err(|e| bad(e.to_string()))?;
    f.config
        .validate()
        .map_err(|e| bad(format!("room {}: {e}", f.name)))?;
    if r.waiters.len() as u64 > WAITERS_PER_ROOM_MAX || r.ended.len() > ENDED_PER_ROOM_MAX {
        return Err(DecodeError::TooLarge(format!("room {}", f.name)));
    }
    let f_name = f.name.clone();
    let parts = RoomParts {
        name: f.name,
        config: f.config,
        created_at_ms: f.created_at_ms,
        opened: f.opened,
        opened_at_ms: f.opened_at_ms,
        next_seq: f.next_seq,
        waiters: slots(r.waiters),
        sessions: r
            .sessions
            .into_iter()
            .map(|(id, seq, admitted_at_ms, last_active_ms)| {
                (
                    id,
                    Session {
                        seq,
                        admitted_at_ms,
                        last_active_ms,
                    },
                )
            })
            .collect(),
        ended: r
            .ended
            .into_iter()
            .map(|(id, seq, reason, at_ms)| (id, Ended { seq, reason, at_ms }))
            .collect(),
        bucket_units: f.bucket_units,
        bucket_at_ms: f.bucket_at_ms,
        windows: f.windows,
        window_latest: f.window_latest,
        totals: f.totals,
        bans: x.bans.remove(&f_name).unwrap_or_default(),
        policy: x.policies.remove(&f_name).unwrap_or_default(),
        client_of: x.clients.remove(&f_name).unwrap_or_default(),
        challenges_used: x.challenges.remove(&f_name).unwrap_or_default(),
        identity_of: x.identities.remove(&f_name).unwrap_or_default(),
        networks_of: Vec::new(),
        sessions_shared: 0,
        turnover: x.turnover.remove(&f_name).unwrap_or_default(),
        origin: x.origins.remove(&f_name).unwrap_or_default(),
        lanes: Vec::new(),
        public_credit: 0,
        codes: x.codes.remove(&f_name).unwrap_or_default(),
        notice: x.notices.remove(&f_name),
        draws: x.draws.remove(&f_name).unwrap_or_default(),
        closed_noted: x.closed.remove(&f_name).is_some(),
        held_head: x.held.remove(&f_name).unwrap_or_default(),
    };
    let (room_lanes, public_credit) = x.lanes.remove(&f_name).unwrap_or_default();
    let parts = RoomParts {
        lanes: room_lanes
            .into_iter()
            .map(|(waiters, credit, joined, admitted)| LaneParts {
                waiters: slots(waiters),
                credit,
                joined,
                admitted,
            })
            .collect(),
        public_credit,
        ..parts
    };
    let (networks_of, sessions_shared) = x.networks.remove(&f_name).unwrap_or_default();
    let parts = RoomParts {
        networks_of,
        sessions_shared,
        ..parts
    };
    Room::from_parts(parts).map_err(bad)
}

/// The state as decoded, whichever the version; version 1 wrote it so, all postcard.
#[derive(Deserialize)]
struct StateIn {
    clock_ms: u64,
    last_applied: Option<(u64, u64)>,
    rooms: Vec<RoomIn>,
    pools: Vec<(String, Pool)>,
    #[serde(skip)]
    extras: ExtrasIn,
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
        let extras = ExtrasOut {
            credentials_ended: self
                .credentials_ended
                .iter()
                .map(|(k, v)| (k, *v))
                .collect(),
            bans: self
                .rooms
                .values()
                .filter(|r| !r.bans.is_empty())
                .map(|r| {
                    (
                        r.name.as_str(),
                        r.bans.iter().map(|(k, v)| (*k, *v)).collect(),
                    )
                })
                .collect(),
            policies: self
                .rooms
                .values()
                .filter(|r| r.policy != EntryPolicy::default())
                .map(|r| (r.name.as_str(), r.policy.encode()))
                .collect(),
            clients: self
                .rooms
                .values()
                .filter(|r| !r.client_of.is_empty())
                .map(|r| {
                    (
                        r.name.as_str(),
                        r.client_of.iter().map(|(k, v)| (*k, *v)).collect(),
                    )
                })
                .collect(),
            challenges: self
                .rooms
                .values()
                .filter(|r| !r.challenges_used.is_empty())
                .map(|r| (r.name.as_str(), r.challenges_used.iter().copied().collect()))
                .collect(),
            identities: self
                .rooms
                .values()
                .filter(|r| !r.identity_of.is_empty())
                .map(|r| {
                    (
                        r.name.as_str(),
                        r.identity_of.iter().map(|(k, v)| (*k, *v)).collect(),
                    )
                })
                .collect(),
            networks: self
                .rooms
                .values()
                .filter(|r| !r.networks_of.is_empty() || r.sessions_shared > 0)
                .map(|r| {
                    (
                        r.name.as_str(),
                        (
                            r.networks_of.iter().map(|(k, v)| (*k, v.clone())).collect(),
                            r.sessions_shared,
                        ),
                    )
                })
                .collect(),
            turnover: self
                .rooms
                .values()
                .filter(|r| r.turnover != Turnover::default())
                .map(|r| {
                    let t = r.turnover;
                    (r.name.as_str(), (t.ended, t.mean_ms, t.unused))
                })
                .collect(),
            origins: self
                .rooms
                .values()
                .filter(|r| !r.origin.is_empty())
                .map(|r| (r.name.as_str(), &r.origin))
                .collect(),
            lanes: self
                .rooms
                .values()
                .filter(|r| !r.lanes.is_empty())
                .map(|r| {
                    let lanes = r
                        .lanes
                        .iter()
                        .map(|l| {
                            (
                                l.queue
                                    .iter()
                                    .map(|(_, s)| (s.id, s.seq, s.last_seen_ms))
                                    .collect(),
                                l.credit,
                                l.joined,
                                l.admitted,
                            )
                        })
                        .collect();
                    (r.name.as_str(), (lanes, r.public_credit))
                })
                .collect(),
            codes: self
                .rooms
                .values()
                .filter(|r| !r.codes.is_empty())
                .map(|r| {
                    let c = &r.codes;
                    (
                        r.name.as_str(),
                        (
                            c.next_batch,
                            c.batches.iter().map(|(k, v)| (*k, v.clone())).collect(),
                            c.codes.iter().map(|(k, v)| (*k, *v)).collect(),
                            c.redeemed.iter().map(|(k, v)| (*k, *v)).collect(),
                        ),
                    )
                })
                .collect(),
            notices: self
                .rooms
                .values()
                .filter_map(|r| {
                    r.notice
                        .as_ref()
                        .map(|(text, at)| (r.name.as_str(), (text.as_str(), *at)))
                })
                .collect(),
            ledger: self.ledger,
            webhooks: self
                .webhook_cursors
                .iter()
                .map(|(k, v)| (k.as_str(), *v))
                .collect(),
            draws: self
                .rooms
                .values()
                .filter(|r| r.draws.v2)
                .map(|r| (r.name.as_str(), r.draws))
                .collect(),
            closed: self
                .rooms
                .values()
                .filter(|r| r.closed_noted)
                .map(|r| r.name.as_str())
                .collect(),
            held: self
                .rooms
                .values()
                .map(|r| (r.name.as_str(), r.held_heads()))
                .filter(|(_, h)| !h.is_empty())
                .collect(),
        };
        postcard::to_extend(&extras, out).expect("encoding into a Vec cannot fail")
    }

    /// Rebuilds a state from [`snapshot`](Self::snapshot) bytes, checking its consistency.
    pub fn restore(bytes: &[u8]) -> Result<Self, DecodeError> {
        let s = decode_state(bytes)?;
        if s.rooms.len() > ROOMS_MAX || s.pools.len() > POOLS_MAX {
            return Err(DecodeError::TooLarge("too many rooms or pools".into()));
        }
        let mut e = s.extras;
        let mut of_rooms = RoomExtras::take_from(&mut e)?;
        if e.webhooks.len() > WEBHOOKS_MAX {
            return Err(DecodeError::TooLarge("webhooks".into()));
        }
        if e.credentials_ended.len() > CREDENTIALS_ENDED_MAX {
            return Err(DecodeError::TooLarge("ended operator sessions".into()));
        }
        let mut sm = StateMachine {
            clock_ms: s.clock_ms,
            ledger: e.ledger,
            webhook_cursors: e.webhooks.into_iter().collect(),
            credentials_ended: e.credentials_ended.into_iter().collect(),
            last_applied: s
                .last_applied
                .map(|(term, index)| LogPosition { term, index }),
            ..Default::default()
        };
        for r in s.rooms {
            let name = r.fields.name.clone();
            let room = restore_room(r, &mut of_rooms)?;
            if sm.rooms.insert(name.clone(), room).is_some() {
                return Err(bad(format!("room {name} appears twice")));
            }
        }
        if let Some(name) = of_rooms.left_over() {
            return Err(bad(format!(
                "room {name}: policy, clients or challenges, but no such room"
            )));
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

/// The state after the version byte of a version 2 snapshot, or of a version 3 one (`extras`).
fn decode_v2(bytes: &[u8], extras: bool) -> Result<StateIn, DecodeError> {
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
    let extras = if extras {
        let (x, tail): (ExtrasIn, &[u8]) =
            postcard::take_from_bytes(rest).map_err(|e| bad(e.to_string()))?;
        rest = tail;
        x
    } else {
        ExtrasIn::default()
    };
    if !rest.is_empty() {
        return Err(bad(format!("{} trailing bytes", rest.len())));
    }
    Ok(StateIn {
        clock_ms: head.clock_ms,
        last_applied: head.last_applied,
        rooms,
        pools: head.pools,
        extras,
    })
}

/// A digest as lowercase hex.
pub fn digest_hex(d: &Digest) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}
