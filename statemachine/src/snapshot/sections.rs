//! The sections of a version-3 snapshot after the rooms: the state the features grew, each
//! section writing its part, reading it back and checking it, so that a feature that keeps
//! state adds a section here and touches nothing else of the format.
//!
//! Postcard writes a struct as its fields in order, with no framing, so a sequence of
//! sections is byte for byte the struct of their parts that version 3 was first written as: the
//! order of [`SECTIONS`] is the format, and new sections go at its end with a new version.
//!
//! A room section writes, for each room that has any of it and in the order of their names,
//! `(name, part)`; a reader keeps each room's part in the room's [`RoomExtras`], which
//! `Room::from_parts` checks against the room's lines and sessions. A section that names a
//! room twice, or a room the snapshot lacks, is refused.

use super::{bad, RoomCodes, RoomLanes, RoomNetworks, UsedChallenge};
use crate::codes::CodeBook;
use crate::command::DecodeError;
use crate::ledger::{Chain, RecordKey};
use crate::limits::*;
use crate::machine::StateMachine;
use crate::origin::OriginWatch;
use crate::policy::{ClientKey, EncodedPolicy, EntryPolicy, IdentityKey};
use crate::room::{Draws, LaneParts, Room, RoomExtras, Turnover};
use crate::types::VisitorId;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// A snapshot being read: the state's own sections go into `sm`, the rooms' into `rooms`
/// (by room name) until the rooms take them.
#[derive(Default)]
pub(super) struct Reading {
    pub sm: StateMachine,
    pub rooms: BTreeMap<String, RoomExtras>,
}

/// One section: how it is written and read.
pub(super) struct Section {
    write: fn(&StateMachine, Vec<u8>) -> Vec<u8>,
    read: for<'b> fn(&'b [u8], &mut Reading) -> Result<&'b [u8], DecodeError>,
}

/// The sections, in the format's order.
const SECTIONS: [Section; 17] = [
    state::<CredentialsEnded>(),
    room::<Bans>(),
    room::<Policies>(),
    room::<Clients>(),
    room::<Challenges>(),
    room::<Identities>(),
    room::<Networks>(),
    room::<Turnovers>(),
    room::<Origins>(),
    room::<Lanes>(),
    room::<Codes>(),
    room::<Notices>(),
    state::<Ledger>(),
    room::<DrawSecrets>(),
    state::<Webhooks>(),
    room::<Closed>(),
    room::<Held>(),
];

/// Appends every section of `sm`.
pub(super) fn write_all(sm: &StateMachine, mut out: Vec<u8>) -> Vec<u8> {
    for s in &SECTIONS {
        out = (s.write)(sm, out);
    }
    out
}

/// Reads every section from `bytes`; returns what follows them.
pub(super) fn read_all<'b>(
    mut bytes: &'b [u8],
    into: &mut Reading,
) -> Result<&'b [u8], DecodeError> {
    for s in &SECTIONS {
        bytes = (s.read)(bytes, into)?;
    }
    Ok(bytes)
}

fn take<T: DeserializeOwned>(bytes: &[u8]) -> Result<(T, &[u8]), DecodeError> {
    postcard::take_from_bytes(bytes).map_err(|e| bad(e.to_string()))
}

fn put<T: Serialize + ?Sized>(value: &T, out: Vec<u8>) -> Vec<u8> {
    postcard::to_extend(value, out).expect("encoding into a Vec cannot fail")
}

/// `Err` (too large: `what`) unless `fits`.
fn bound(fits: bool, what: impl FnOnce() -> String) -> Result<(), DecodeError> {
    if fits {
        Ok(())
    } else {
        Err(DecodeError::TooLarge(what()))
    }
}

// ---- the state's own sections ------------------------------------------------------------------

/// A section of the state's own.
trait StateSection {
    /// Appends the section's part of `sm`.
    fn write(sm: &StateMachine, out: Vec<u8>) -> Vec<u8>;
    /// Reads the section, checks it and keeps it in `sm`; returns the bytes after it.
    fn read<'b>(bytes: &'b [u8], sm: &mut StateMachine) -> Result<&'b [u8], DecodeError>;
}

const fn state<S: StateSection>() -> Section {
    Section {
        write: S::write,
        read: read_state::<S>,
    }
}

fn read_state<'b, S: StateSection>(
    bytes: &'b [u8],
    into: &mut Reading,
) -> Result<&'b [u8], DecodeError> {
    S::read(bytes, &mut into.sm)
}

/// Ended operator sessions, by id.
struct CredentialsEnded;

impl StateSection for CredentialsEnded {
    fn write(sm: &StateMachine, out: Vec<u8>) -> Vec<u8> {
        let ended: Vec<(&[u8; 16], u64)> =
            sm.credentials_ended.iter().map(|(k, v)| (k, *v)).collect();
        put(&ended, out)
    }

    fn read<'b>(bytes: &'b [u8], sm: &mut StateMachine) -> Result<&'b [u8], DecodeError> {
        let (ended, rest): (Vec<([u8; 16], u64)>, _) = take(bytes)?;
        bound(ended.len() <= CREDENTIALS_ENDED_MAX, || {
            "ended operator sessions".into()
        })?;
        sm.credentials_ended = ended.into_iter().collect();
        Ok(rest)
    }
}

/// The ledger's count and chain.
struct Ledger;

impl StateSection for Ledger {
    fn write(sm: &StateMachine, out: Vec<u8>) -> Vec<u8> {
        put(&sm.ledger, out)
    }

    fn read<'b>(bytes: &'b [u8], sm: &mut StateMachine) -> Result<&'b [u8], DecodeError> {
        let (chain, rest): (Chain, _) = take(bytes)?;
        sm.ledger = chain;
        Ok(rest)
    }
}

/// Each webhook's delivery position, by name.
struct Webhooks;

impl StateSection for Webhooks {
    fn write(sm: &StateMachine, out: Vec<u8>) -> Vec<u8> {
        let cursors: Vec<(&str, RecordKey)> = sm
            .webhook_cursors
            .iter()
            .map(|(k, v)| (k.as_str(), *v))
            .collect();
        put(&cursors, out)
    }

    fn read<'b>(bytes: &'b [u8], sm: &mut StateMachine) -> Result<&'b [u8], DecodeError> {
        let (cursors, rest): (Vec<(String, RecordKey)>, _) = take(bytes)?;
        bound(cursors.len() <= WEBHOOKS_MAX, || "webhooks".into())?;
        sm.webhook_cursors = cursors.into_iter().collect();
        Ok(rest)
    }
}

// ---- the rooms' sections -----------------------------------------------------------------------

/// A section of the rooms' state: for each room that has any of it, the room's part.
trait RoomSection {
    /// Names the section in errors.
    const WHAT: &'static str;
    /// The part as written.
    type Out<'a>: Serialize;
    /// The part as read.
    type In: DeserializeOwned;
    /// `room`'s part, if it has one to write.
    fn part(room: &Room) -> Option<Self::Out<'_>>;
    /// Checks a part read for room `name` and keeps it in the room's extras.
    fn keep(name: &str, part: Self::In, into: &mut RoomExtras) -> Result<(), DecodeError>;
}

const fn room<S: RoomSection>() -> Section {
    Section {
        write: write_rooms::<S>,
        read: read_rooms::<S>,
    }
}

fn write_rooms<S: RoomSection>(sm: &StateMachine, out: Vec<u8>) -> Vec<u8> {
    let parts: Vec<(&str, S::Out<'_>)> = sm
        .rooms
        .values()
        .filter_map(|r| Some((r.name.as_str(), S::part(r)?)))
        .collect();
    put(&parts, out)
}

fn read_rooms<'b, S: RoomSection>(
    bytes: &'b [u8],
    into: &mut Reading,
) -> Result<&'b [u8], DecodeError> {
    let (parts, rest): (Vec<(String, S::In)>, _) = take(bytes)?;
    bound(parts.len() <= ROOMS_MAX, || {
        format!("{} of too many rooms", S::WHAT)
    })?;
    let mut seen = BTreeSet::new();
    for (name, part) in parts {
        if !seen.insert(name.clone()) {
            return Err(bad(format!("room {name}: {} listed twice", S::WHAT)));
        }
        S::keep(&name, part, into.rooms.entry(name.clone()).or_default())?;
    }
    Ok(rest)
}

/// `Err` (too large: room `name`'s `what`) unless `fits`.
fn room_bound(fits: bool, name: &str, what: &str) -> Result<(), DecodeError> {
    bound(fits, || format!("room {name}: {what}"))
}

/// The places a room may count: its waiters and its sessions.
const PLACES_PER_ROOM_MAX: u64 = WAITERS_PER_ROOM_MAX + SESSIONS_PER_ROOM_MAX;

/// The bans of each room that has any, visitors in order.
struct Bans;

impl RoomSection for Bans {
    const WHAT: &'static str = "bans";
    type Out<'a> = Vec<(VisitorId, u64)>;
    type In = Vec<(VisitorId, u64)>;

    fn part(room: &Room) -> Option<Self::Out<'_>> {
        let bans = room.bans.iter().map(|(k, v)| (*k, *v));
        (!room.bans.is_empty()).then(|| bans.collect())
    }

    fn keep(name: &str, bans: Self::In, into: &mut RoomExtras) -> Result<(), DecodeError> {
        room_bound(bans.len() <= BANS_PER_ROOM_MAX, name, Self::WHAT)?;
        into.bans = bans;
        Ok(())
    }
}

/// The entry policy of each room whose policy is not the default.
struct Policies;

impl RoomSection for Policies {
    const WHAT: &'static str = "policy";
    type Out<'a> = EncodedPolicy;
    type In = EncodedPolicy;

    /// The bytes the policy was set with (a policy never set is the default, not written).
    fn part(room: &Room) -> Option<Self::Out<'_>> {
        (*room.policy != EntryPolicy::default()).then(|| {
            room.policy_encoded
                .clone()
                .unwrap_or_else(|| room.policy.encode())
        })
    }

    fn keep(name: &str, p: Self::In, into: &mut RoomExtras) -> Result<(), DecodeError> {
        let policy = p.decode()?;
        policy
            .validate()
            .map_err(|e| bad(format!("room {name}: {e}")))?;
        into.policy = policy;
        into.policy_encoded = Some(p);
        Ok(())
    }
}

/// The client network of each counted visitor, for each room with any, visitors in order.
struct Clients;

impl RoomSection for Clients {
    const WHAT: &'static str = "clients";
    type Out<'a> = Vec<(VisitorId, ClientKey)>;
    type In = Vec<(VisitorId, ClientKey)>;

    fn part(room: &Room) -> Option<Self::Out<'_>> {
        let clients = room.client_of.iter().map(|(k, v)| (*k, *v));
        (!room.client_of.is_empty()).then(|| clients.collect())
    }

    fn keep(name: &str, clients: Self::In, into: &mut RoomExtras) -> Result<(), DecodeError> {
        room_bound(
            clients.len() as u64 <= PLACES_PER_ROOM_MAX,
            name,
            Self::WHAT,
        )?;
        into.client_of = clients;
        Ok(())
    }
}

/// The used, unexpired challenges of each room with any, in (expiry, id) order.
struct Challenges;

impl RoomSection for Challenges {
    const WHAT: &'static str = "challenges";
    type Out<'a> = Vec<UsedChallenge>;
    type In = Vec<UsedChallenge>;

    fn part(room: &Room) -> Option<Self::Out<'_>> {
        let used = room.challenges_used.iter().copied();
        (!room.challenges_used.is_empty()).then(|| used.collect())
    }

    fn keep(name: &str, used: Self::In, into: &mut RoomExtras) -> Result<(), DecodeError> {
        let max = crate::policy::CHALLENGES_REMEMBERED_MAX;
        room_bound(used.len() <= max, name, Self::WHAT)?;
        into.challenges_used = used;
        Ok(())
    }
}

/// The identity of each visitor that has one, for each room with any, visitors in order.
struct Identities;

impl RoomSection for Identities {
    const WHAT: &'static str = "identities";
    type Out<'a> = Vec<(VisitorId, IdentityKey)>;
    type In = Vec<(VisitorId, IdentityKey)>;

    fn part(room: &Room) -> Option<Self::Out<'_>> {
        let identities = room.identity_of.iter().map(|(k, v)| (*k, *v));
        (!room.identity_of.is_empty()).then(|| identities.collect())
    }

    fn keep(name: &str, identities: Self::In, into: &mut RoomExtras) -> Result<(), DecodeError> {
        room_bound(
            identities.len() as u64 <= PLACES_PER_ROOM_MAX,
            name,
            Self::WHAT,
        )?;
        into.identity_of = identities;
        Ok(())
    }
}

/// The networks each session was used from, and the count of sessions ended as shared, for
/// each room with any.
struct Networks;

impl RoomSection for Networks {
    const WHAT: &'static str = "networks";
    type Out<'a> = RoomNetworks;
    type In = RoomNetworks;

    fn part(room: &Room) -> Option<Self::Out<'_>> {
        let any = !room.networks_of.is_empty() || room.sessions_shared > 0;
        let networks = room.networks_of.iter().map(|(k, v)| (*k, v.clone()));
        any.then(|| (networks.collect(), room.sessions_shared))
    }

    fn keep(name: &str, n: Self::In, into: &mut RoomExtras) -> Result<(), DecodeError> {
        room_bound(n.0.len() as u64 <= SESSIONS_PER_ROOM_MAX, name, Self::WHAT)?;
        (into.networks_of, into.sessions_shared) = n;
        Ok(())
    }
}

/// How long places are held (used sessions ended, their mean ms, unused sessions ended), for
/// each room that has seen one end.
struct Turnovers;

impl RoomSection for Turnovers {
    const WHAT: &'static str = "turnover";
    type Out<'a> = (u64, u64, u64);
    type In = (u64, u64, u64);

    fn part(room: &Room) -> Option<Self::Out<'_>> {
        let t = room.turnover;
        (t != Turnover::default()).then_some((t.ended, t.mean_ms, t.unused))
    }

    fn keep(
        _: &str,
        (ended, mean_ms, unused): Self::In,
        into: &mut RoomExtras,
    ) -> Result<(), DecodeError> {
        into.turnover = Turnover {
            ended,
            mean_ms,
            unused,
        };
        Ok(())
    }
}

/// The origin measurements and last change of health, for each room with any (its own
/// `from_parts` check bounds the slots).
struct Origins;

impl RoomSection for Origins {
    const WHAT: &'static str = "origin";
    type Out<'a> = &'a OriginWatch;
    type In = OriginWatch;

    fn part(room: &Room) -> Option<Self::Out<'_>> {
        (!room.origin.is_empty()).then_some(&room.origin)
    }

    fn keep(_: &str, origin: Self::In, into: &mut RoomExtras) -> Result<(), DecodeError> {
        into.origin = origin;
        Ok(())
    }
}

/// The priority lanes' lines (waiters in line order, credit, joined, admitted) and the room's
/// own line's credit, for each room with lanes.
struct Lanes;

impl RoomSection for Lanes {
    const WHAT: &'static str = "lanes";
    type Out<'a> = RoomLanes;
    type In = RoomLanes;

    fn part(room: &Room) -> Option<Self::Out<'_>> {
        let lane = |l: &crate::room::LaneLine| {
            let waiters = l.queue.iter().map(|(_, s)| (s.id, s.seq, s.last_seen_ms));
            (waiters.collect(), l.credit, l.joined, l.admitted)
        };
        let lanes = room.lanes.iter().map(lane);
        (!room.lanes.is_empty()).then(|| (lanes.collect(), room.public_credit))
    }

    fn keep(
        name: &str,
        (lanes, credit): Self::In,
        into: &mut RoomExtras,
    ) -> Result<(), DecodeError> {
        let waiters: u64 = lanes.iter().map(|l| l.0.len() as u64).sum();
        let fits = lanes.len() <= crate::lanes::LANES_MAX && waiters <= WAITERS_PER_ROOM_MAX;
        room_bound(fits, name, Self::WHAT)?;
        into.lanes = lanes
            .into_iter()
            .map(|(waiters, credit, joined, admitted)| LaneParts {
                waiters: super::slots(waiters),
                credit,
                joined,
                admitted,
            })
            .collect();
        into.public_credit = credit;
        Ok(())
    }
}

/// The access codes (batches by number, codes by hash, redemptions by visitor), for each room
/// that has made any.
struct Codes;

impl RoomSection for Codes {
    const WHAT: &'static str = "codes";
    type Out<'a> = RoomCodes;
    type In = RoomCodes;

    fn part(room: &Room) -> Option<Self::Out<'_>> {
        let c = &room.codes;
        (!c.is_empty()).then(|| {
            (
                c.next_batch,
                c.batches.iter().map(|(k, v)| (*k, v.clone())).collect(),
                c.codes.iter().map(|(k, v)| (*k, *v)).collect(),
                c.redeemed.iter().map(|(k, v)| (*k, *v)).collect(),
            )
        })
    }

    fn keep(
        name: &str,
        (next, batches, codes, redeemed): Self::In,
        into: &mut RoomExtras,
    ) -> Result<(), DecodeError> {
        into.codes = CodeBook::from_parts(next, batches, codes, redeemed)
            .map_err(|e| bad(format!("room {name}: {e}")))?;
        Ok(())
    }
}

/// The operator's notice (text, when set) of each room that shows one.
struct Notices;

impl RoomSection for Notices {
    const WHAT: &'static str = "notice";
    type Out<'a> = (&'a str, u64);
    type In = (String, u64);

    fn part(room: &Room) -> Option<Self::Out<'_>> {
        room.notice.as_ref().map(|(text, at)| (text.as_str(), *at))
    }

    fn keep(name: &str, notice: Self::In, into: &mut RoomExtras) -> Result<(), DecodeError> {
        crate::types::validate_notice(&Some(notice.0.clone()))
            .map_err(|e| bad(format!("room {name}: {e}")))?;
        into.notice = Some(notice);
        Ok(())
    }
}

/// The draw secret of each room that draws by `sluice-draw-v2`.
struct DrawSecrets;

impl RoomSection for DrawSecrets {
    const WHAT: &'static str = "draws";
    type Out<'a> = Draws;
    type In = Draws;

    fn part(room: &Room) -> Option<Self::Out<'_>> {
        room.draws.v2.then_some(room.draws)
    }

    fn keep(name: &str, draws: Self::In, into: &mut RoomExtras) -> Result<(), DecodeError> {
        if !draws.v2 || draws.epoch.is_none() {
            return Err(bad(format!("room {name}: draws without a secret")));
        }
        into.draws = draws;
        Ok(())
    }
}

/// The rooms whose closing time the ledger has noted (a name alone: postcard writes `()` as
/// nothing).
struct Closed;

impl RoomSection for Closed {
    const WHAT: &'static str = "closing";
    type Out<'a> = ();
    type In = ();

    fn part(room: &Room) -> Option<Self::Out<'_>> {
        room.closed_noted.then_some(())
    }

    fn keep(_: &str, (): Self::In, into: &mut RoomExtras) -> Result<(), DecodeError> {
        into.closed_noted = true;
        Ok(())
    }
}

/// The held waiters at the head of each line (line, count), for each room with any.
struct Held;

impl RoomSection for Held {
    const WHAT: &'static str = "held waiters";
    type Out<'a> = Vec<(u64, u64)>;
    type In = Vec<(u64, u64)>;

    fn part(room: &Room) -> Option<Self::Out<'_>> {
        Some(room.held_heads()).filter(|h| !h.is_empty())
    }

    fn keep(name: &str, held: Self::In, into: &mut RoomExtras) -> Result<(), DecodeError> {
        room_bound(held.len() <= crate::lanes::LANES_MAX + 1, name, Self::WHAT)?;
        into.held_head = held;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A version-3 snapshot of no rooms whose notices section is `notices`.
    fn with_notices(notices: &[(&str, (&str, u64))]) -> Vec<u8> {
        let empty = StateMachine::default();
        let head = super::super::HeadOut {
            clock_ms: 0,
            last_applied: None,
            pools: Vec::new(),
            rooms: 0,
        };
        let mut out = put(&head, b"SLSM\x03".to_vec());
        for (i, s) in SECTIONS.iter().enumerate() {
            out = if i == 11 {
                put(notices, out)
            } else {
                (s.write)(&empty, out)
            };
        }
        out
    }

    #[test]
    fn sections_name_each_room_once_and_only_rooms_there_are() {
        assert!(StateMachine::restore(&with_notices(&[])).is_ok());
        let ghost = StateMachine::restore(&with_notices(&[("ghost", ("hi", 1))])).unwrap_err();
        assert!(ghost.to_string().contains("ghost"), "{ghost}");
        let twice = [("a", ("hi", 1)), ("a", ("ho", 2))];
        let twice = StateMachine::restore(&with_notices(&twice)).unwrap_err();
        assert!(twice.to_string().contains("listed twice"), "{twice}");
    }

    #[test]
    fn the_sections_keep_the_formats_order() {
        // Each section writes an empty state as an empty list (or the ledger's zero chain):
        // seventeen sections, the ledger twelfth.
        let empty = StateMachine::default();
        let lens: Vec<usize> = SECTIONS
            .iter()
            .map(|s| (s.write)(&empty, Vec::new()).len())
            .collect();
        assert_eq!(lens.len(), 17);
        assert_eq!(lens.iter().filter(|&&n| n == 1).count(), 16, "{lens:?}");
        assert!(lens[12] > 1, "{lens:?}");
    }
}
