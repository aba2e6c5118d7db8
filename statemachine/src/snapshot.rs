//! Snapshots and the state digest.
//!
//! A snapshot is the canonical encoding of the whole state: the magic `SLSM`, one version byte
//! ([`SNAPSHOT_VERSION`]), then postcard. Canonical means every collection is written in an order
//! that depends on the state alone (rooms and pools by name, waiters in line order, sessions by
//! sequence number, ended visitors oldest first), never on hash-map layout or on the history of
//! how the state was reached. Derived indexes (expiry heaps, hash maps, holes in the line) are
//! not written; they are rebuilt on decode. The digest is BLAKE3 of this encoding, so two
//! replicas with equal digests hold equal states.

use crate::command::DecodeError;
use crate::limits::*;
use crate::machine::{LogPosition, StateMachine};
use crate::outcome::{EndReason, Totals};
use crate::pool::Pool;
use crate::queue::{Slot, WaitQueue};
use crate::room::{Ended, Room, RoomParts, Session, WINDOWS};
use crate::sessions::Sessions;
use crate::types::{validate_name, RoomConfig, VisitorId};
use serde::ser::{SerializeSeq, Serializer};
use serde::{Deserialize, Serialize};

/// Magic bytes that open every snapshot.
pub const SNAPSHOT_MAGIC: &[u8; 4] = b"SLSM";
/// The current snapshot encoding version.
pub const SNAPSHOT_VERSION: u8 = 1;

/// The digest of a state: BLAKE3 of its canonical snapshot encoding.
pub type Digest = [u8; 32];

struct Waiters<'a>(&'a WaitQueue);

impl Serialize for Waiters<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.len() as usize))?;
        for (_, w) in self.0.iter() {
            seq.serialize_element(&(w.id, w.seq, w.last_seen_ms))?;
        }
        seq.end()
    }
}

/// Sessions in sequence-number order, as the room keeps them.
struct SessionsOut<'a>(&'a Sessions);

impl Serialize for SessionsOut<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for (id, v) in self.0.iter() {
            seq.serialize_element(&(id, v.seq, v.admitted_at_ms, v.last_active_ms))?;
        }
        seq.end()
    }
}

#[derive(Serialize)]
struct RoomOut<'a> {
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
    waiters: Waiters<'a>,
    sessions: SessionsOut<'a>,
    ended: Vec<(VisitorId, u64, EndReason, u64)>,
}

#[derive(Deserialize)]
struct RoomIn {
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
    waiters: Vec<(VisitorId, u64, u64)>,
    sessions: Vec<(VisitorId, u64, u64, u64)>,
    ended: Vec<(VisitorId, u64, EndReason, u64)>,
}

#[derive(Serialize)]
struct StateOut<'a> {
    clock_ms: u64,
    last_applied: Option<(u64, u64)>,
    rooms: Vec<RoomOut<'a>>,
    pools: Vec<(&'a str, &'a Pool)>,
}

#[derive(Deserialize)]
struct StateIn {
    clock_ms: u64,
    last_applied: Option<(u64, u64)>,
    rooms: Vec<RoomIn>,
    pools: Vec<(String, Pool)>,
}

fn room_out(r: &Room) -> RoomOut<'_> {
    RoomOut {
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
        waiters: Waiters(&r.queue),
        sessions: SessionsOut(&r.sessions),
        ended: r
            .ended
            .iter()
            .map(|(id, e)| (*id, e.seq, e.reason, e.at_ms))
            .collect(),
    }
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
    pub fn snapshot_into(&self, mut out: Vec<u8>) -> Vec<u8> {
        let state = StateOut {
            clock_ms: self.clock_ms,
            last_applied: self.last_applied.map(|p| (p.term, p.index)),
            rooms: self.rooms.values().map(room_out).collect(),
            pools: self.pools.iter().map(|(n, p)| (n.as_str(), p)).collect(),
        };
        out.reserve(
            64 + self
                .rooms
                .values()
                .map(|r| r.queue.len() as usize * 28)
                .sum::<usize>(),
        );
        out.extend_from_slice(SNAPSHOT_MAGIC);
        out.push(SNAPSHOT_VERSION);
        postcard::to_extend(&state, out).expect("encoding into a Vec cannot fail")
    }

    /// Rebuilds a state from [`snapshot`](Self::snapshot) bytes, checking its consistency.
    pub fn restore(bytes: &[u8]) -> Result<Self, DecodeError> {
        if bytes.len() < 5 {
            return Err(DecodeError::Empty);
        }
        if &bytes[..4] != SNAPSHOT_MAGIC {
            return Err(bad("not a snapshot (bad magic)"));
        }
        if bytes[4] != SNAPSHOT_VERSION {
            return Err(DecodeError::Version(bytes[4]));
        }
        let (s, tail): (StateIn, &[u8]) =
            postcard::take_from_bytes(&bytes[5..]).map_err(|e| bad(e.to_string()))?;
        if !tail.is_empty() {
            return Err(bad(format!("{} trailing bytes", tail.len())));
        }
        if s.rooms.len() > ROOMS_MAX || s.pools.len() > POOLS_MAX {
            return Err(DecodeError::TooLarge("too many rooms or pools".into()));
        }
        let mut sm = StateMachine {
            clock_ms: s.clock_ms,
            last_applied: s
                .last_applied
                .map(|(term, index)| LogPosition { term, index }),
            ..Default::default()
        };
        for r in s.rooms {
            validate_name("room", &r.name).map_err(|e| bad(e.to_string()))?;
            r.config
                .validate()
                .map_err(|e| bad(format!("room {}: {e}", r.name)))?;
            if r.waiters.len() as u64 > WAITERS_PER_ROOM_MAX || r.ended.len() > ENDED_PER_ROOM_MAX {
                return Err(DecodeError::TooLarge(format!("room {}", r.name)));
            }
            let name = r.name.clone();
            let parts = RoomParts {
                name: r.name,
                config: r.config,
                created_at_ms: r.created_at_ms,
                opened: r.opened,
                opened_at_ms: r.opened_at_ms,
                next_seq: r.next_seq,
                waiters: r
                    .waiters
                    .into_iter()
                    .map(|(id, seq, last_seen_ms)| Slot {
                        id,
                        seq,
                        last_seen_ms,
                    })
                    .collect(),
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
                bucket_units: r.bucket_units,
                bucket_at_ms: r.bucket_at_ms,
                windows: r.windows,
                window_latest: r.window_latest,
                totals: r.totals,
            };
            let room = Room::from_parts(parts).map_err(bad)?;
            if sm.rooms.insert(name.clone(), room).is_some() {
                return Err(bad(format!("room {name} appears twice")));
            }
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
        let state = StateOut {
            clock_ms: self.clock_ms,
            last_applied: None,
            rooms: self.rooms.values().map(room_out).collect(),
            pools: self.pools.iter().map(|(n, p)| (n.as_str(), p)).collect(),
        };
        let mut out = SNAPSHOT_MAGIC.to_vec();
        out.push(SNAPSHOT_VERSION);
        *blake3::hash(&postcard::to_extend(&state, out).expect("encoding into a Vec cannot fail"))
            .as_bytes()
    }
}

/// A digest as lowercase hex.
pub fn digest_hex(d: &Digest) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}
