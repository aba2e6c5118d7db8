//! One room: its line, its sessions, its token bucket and its rules.
//!
//! Every command on a room runs in three steps at the entry's log time `now`:
//! 1. `advance`: expire sessions and waiters that are due, refill the bucket, open the room when
//!    `opens_at` has passed (shuffling the pre-queue if asked);
//! 2. the command itself;
//! 3. `pump`: admit waiters while capacity, bucket, schedule, pause and health allow.
//!
//! The ordering of every effect comes from ordered data (the line, sequence numbers), never from
//! the iteration order of a hash map, and is the same after a snapshot restore.

use crate::chunked::DueQueue;
use crate::codes::{CodeBook, CodeHash};
use crate::draw::{commitment, DrawKey, DrawPosition, Step};
use crate::idmap::IdMap;
use crate::lanes::{self, LANE_SHIFT};
use crate::ledger::{Event, Rule};
use crate::limits::*;
use crate::origin::{HealthChange, HealthSource, OriginSamples, OriginWatch, ORIGIN_SLOTS};
use crate::outcome::{
    DrawView, EndReason, LaneView, Notice, Outcome, Rejection, RoomView, Totals, VisitorState,
    VisitorView,
};
use crate::policy::{
    ChallengeUse, ClientKey, EncodedPolicy, EntryPolicy, IdentityKey, JoinEvidence,
    CHALLENGES_REMEMBERED_MAX, CHALLENGE_TTL_MS_MAX,
};
use crate::queue::{Slot, WaitQueue};
use crate::sessions::{Session, Sessions};
use crate::types::{Health, Mode, RoomConfig, VisitorId};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

#[path = "room_check.rs"]
mod check;

/// Bucket units per token: ms per minute × permille, so refill is exact integer arithmetic.
pub(crate) const UNITS_PER_TOKEN: u64 = 60_000 * 1_000;
/// Width of one admission-count window.
pub(crate) const WINDOW_MS: u64 = 10_000;
/// Windows kept: one minute.
pub(crate) const WINDOWS: usize = 6;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Ended {
    pub seq: u64,
    pub reason: EndReason,
    pub at_ms: u64,
}

/// One priority lane's line and counters ([`crate::lanes`]); lane `l` of the room's policy.
#[derive(Debug, Default)]
pub(crate) struct LaneLine {
    pub queue: WaitQueue,
    /// Its credit in the round robin of shares.
    pub credit: i64,
    /// Places taken in it.
    pub joined: u64,
    /// Admissions from it.
    pub admitted: u64,
}

/// The lines to try for an admission, best first (at most every lane and the room's own line).
#[derive(Default)]
struct LineOrder {
    lines: [usize; lanes::LANES_MAX + 1],
    len: usize,
}

impl LineOrder {
    fn push(&mut self, l: usize) {
        self.lines[self.len] = l;
        self.len += 1;
    }

    fn first(&self) -> Option<usize> {
        (self.len > 0).then(|| self.lines[0])
    }

    fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.lines[..self.len].iter().copied()
    }
}

/// The first queue index of lane `l`.
fn lane_base(l: usize) -> u64 {
    (l as u64 + 1) << LANE_SHIFT
}

/// A visit ended by expiry: (seq, visitor, reason, its session, if it had one).
type Gone = (u64, VisitorId, EndReason, Option<Session>);

/// A lane's parts, as a snapshot holds them.
#[derive(Debug)]
pub(crate) struct LaneParts {
    pub waiters: Vec<Slot>,
    pub credit: i64,
    pub joined: u64,
    pub admitted: u64,
}

#[derive(Debug)]
pub(crate) struct Room {
    pub name: String,
    pub config: RoomConfig,
    pub created_at_ms: u64,
    pub opened: bool,
    pub opened_at_ms: u64,
    pub next_seq: u64,
    pub queue: WaitQueue,
    /// Waiter → qidx.
    pub waiting: IdMap<u64>,
    /// (last_seen_ms when pushed, qidx); an entry whose slot is gone is stale and skipped.
    waiter_due: DueQueue<(u64, u64)>,
    pub sessions: Sessions,
    /// (last_active_ms when pushed, seq, visitor); stale unless the visitor's session has this seq.
    pub session_due: DueQueue<(u64, u64, VisitorId)>,
    /// Recently ended visitors, oldest first, and an index of the latest end per visitor.
    pub ended: VecDeque<(VisitorId, Ended)>,
    ended_index: IdMap<Ended>,
    pub bucket_units: u64,
    pub bucket_at_ms: u64,
    pub windows: [u64; WINDOWS],
    pub window_latest: u64,
    pub totals: Totals,
    /// Banned visitors and when each ban ends (log time; `u64::MAX`: never). At most
    /// [`BANS_PER_ROOM_MAX`]; a ban past its end is dropped when room is needed.
    pub bans: BTreeMap<VisitorId, u64>,
    /// The entry policy (shared: the edge takes it for every join without copying it).
    pub policy: std::sync::Arc<EntryPolicy>,
    /// The policy's encoding as the command (or snapshot) that set it carried it: snapshots
    /// write these bytes again, so that a policy encoded before fields were appended to
    /// [`EntryPolicy`] is written as it was, and every replica writes the same bytes whatever
    /// version it runs (`None`: the default policy, never set).
    pub policy_encoded: Option<EncodedPolicy>,
    /// The client network of each live visitor that came with one while the policy counted
    /// clients (at most one entry per waiter or session).
    pub client_of: BTreeMap<VisitorId, ClientKey>,
    /// Live places per client network (derived from `client_of`).
    places_of: BTreeMap<ClientKey, u64>,
    /// Admitted sessions per client network (derived from `client_of` and `sessions`).
    sessions_of: BTreeMap<ClientKey, u64>,
    /// Whether the last admission stopped because every waiter of the lines it tried was held
    /// (away, or by `sessions_per_client_max`): then only a change of state, not time, can
    /// admit more. One that stopped because it ran out of looks asks for the next tick.
    /// Not state: derived by every admission, and only used to schedule ticks.
    held_back: bool,
    /// (deadline, seq, visitor) of admissions not yet used, under a first-use TTL; stale
    /// unless the visitor's session has this seq and is still unused.
    unused_due: DueQueue<(u64, u64, VisitorId)>,
    /// Challenges that minted a place and have not expired, by (expiry, id): a second join with
    /// one is refused. At most [`CHALLENGES_REMEMBERED_MAX`]; expired ones are forgotten at the
    /// next join.
    pub challenges_used: BTreeSet<(u64, [u8; 16])>,
    /// The ids of `challenges_used`, for the reuse check.
    challenge_ids: BTreeSet<[u8; 16]>,
    /// The identity of each live visitor that came with one while the room asked identities.
    pub identity_of: BTreeMap<VisitorId, IdentityKey>,
    /// The live visitor of each identity (the inverse of `identity_of`).
    visitor_of: BTreeMap<IdentityKey, VisitorId>,
    /// The distinct client networks each session was used from and when each was last seen,
    /// while the policy counts them (at most `networks_per_session_max` each).
    pub networks_of: BTreeMap<VisitorId, Vec<(ClientKey, u64)>>,
    /// Sessions ended as shared.
    pub sessions_shared: u64,
    /// How long sessions last: see [`Turnover`].
    pub turnover: Turnover,
    /// The origin's measurements and the last change of health ([`crate::origin`]).
    pub origin: OriginWatch,
    /// Admitted sessions by the second they were admitted in (derived from `sessions`): which
    /// places free first, for the estimates.
    admitted_in: BTreeMap<u64, u64>,
    /// The sum of those seconds (derived): the sessions' mean age.
    admitted_secs_sum: u128,
    /// The sessions not used since their admission, by the second they were admitted in
    /// (derived from `sessions`): each ends at its deadline unless its visitor comes.
    unused_in: BTreeMap<u64, u64>,
    /// How many those are (derived).
    unused_count: u64,
    /// The sessions used since their admission, by the second they were admitted in (derived
    /// from `sessions`; with `unused_in`, `admitted_in`).
    used_in: BTreeMap<u64, u64>,
    /// The priority lanes' lines, in the policy's order; `queue` is the room's own line.
    pub lanes: Vec<LaneLine>,
    /// The room's own line's credit in the round robin of shares.
    pub public_credit: i64,
    /// Access codes ([`crate::codes`]).
    pub codes: CodeBook,
    /// The operator's notice to the line, and when it was set (log time, ms).
    pub notice: Option<(String, u64)>,
    /// How the room draws (`sluice-draw-v2`: its current secret).
    pub draws: Draws,
    /// Whether the ledger has noted that the room's closing time came (once per closing time,
    /// whichever command first sees the log clock past it).
    pub closed_noted: bool,
    /// For each line (by index; none listed: 0), how many waiters at its head were held back
    /// (away, or their network at its session limit) when admission last looked: admission
    /// looks on after them, so a block of held waiters longer than one command may look at is
    /// crossed over several commands instead of stopping the line. Cleared by whatever may let
    /// one of them go (a check-in of an away waiter, a session ending while the room counts
    /// sessions per network, a change of policy or configuration, a shuffle); a waiter leaving
    /// from among them shortens it.
    pub held_head: BTreeMap<usize, u64>,
}

/// How long a room's places are held, learned from the sessions that ended by themselves (left,
/// expired, unused; not those an operator ended): of those that were used, how many ended and a
/// moving average of their lengths (each new one weighs 1/8); how many ended never used (held
/// until their deadline, which the room knows). The estimates of a full room come from it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Turnover {
    /// Used sessions that ended by themselves (saturating).
    pub ended: u64,
    /// Their moving average length, ms (0 before the first).
    pub mean_ms: u64,
    /// Sessions that ended never used (saturating).
    pub unused: u64,
}

impl Turnover {
    fn record(&mut self, length_ms: u64) {
        self.mean_ms = if self.ended == 0 {
            length_ms
        } else {
            ((u128::from(self.mean_ms) * 7 + u128::from(length_ms)) / 8) as u64
        };
        self.ended = self.ended.saturating_add(1);
    }
}

/// What a waiter is told: seconds until admission, at best and at worst.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Estimate {
    pub secs: u64,
    pub max_secs: u64,
}

/// Sorts due expiries (true time, seq, …) and splits them at `keep`: those to end now, and those
/// left for a later apply.
fn first_by_time<T: Ord>(mut due: Vec<T>, keep: usize) -> (Vec<T>, Vec<T>) {
    due.sort_unstable();
    let later = due.split_off(keep.min(due.len()));
    (due, later)
}

/// Takes one from a key's count, forgetting the key at zero.
fn count_down<K: Ord>(counts: &mut BTreeMap<K, u64>, k: &K) {
    let n = counts.get_mut(k).expect("a counted key");
    *n -= 1;
    if *n == 0 {
        counts.remove(k);
    }
}

/// A room's draw secret: committed to (its hash published) when it begins, revealed in the
/// ledger once it has seeded a draw and either no draw may use it any more or the room's draw
/// settings change (a new one begins then).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Epoch {
    /// The position of the command it began at; with the nodes' draw key, it gives the secret.
    pub start: DrawPosition,
    /// BLAKE3 of the secret.
    pub commitment: [u8; 32],
    /// Whether a draw has used it.
    pub used: bool,
}

/// How a room draws.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Draws {
    /// `sluice-draw-v2` (commit–reveal); rooms made before it draw by `sluice-draw-v1` until
    /// they are reconfigured.
    pub v2: bool,
    /// The current secret (always one for a v2 room).
    pub epoch: Option<Epoch>,
}

/// What the ledger reports when it changes: compared before and after each command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Signals {
    paused: bool,
    health: Health,
    waiting: bool,
    full: bool,
    /// Lines drawn by lot (a bit per line) and whether the opening shuffles.
    draw_settings: (u64, bool),
}

/// Restored parts of a room, as a snapshot holds them: its head and lines, then what its
/// snapshot sections held ([`RoomExtras`]).
#[derive(Debug)]
pub(crate) struct RoomParts {
    pub name: String,
    pub config: RoomConfig,
    pub created_at_ms: u64,
    pub opened: bool,
    pub opened_at_ms: u64,
    pub next_seq: u64,
    pub waiters: Vec<Slot>,
    pub sessions: Vec<(VisitorId, Session)>,
    pub ended: Vec<(VisitorId, Ended)>,
    pub bucket_units: u64,
    pub bucket_at_ms: u64,
    pub windows: [u64; WINDOWS],
    pub window_latest: u64,
    pub totals: Totals,
    pub extras: RoomExtras,
}

/// What a room keeps beyond its head, its own line, its sessions and its ended visitors: each
/// field is one snapshot section's part (`snapshot/sections.rs`), the default when the room
/// has none.
#[derive(Debug, Default)]
pub(crate) struct RoomExtras {
    pub bans: Vec<(VisitorId, u64)>,
    pub policy: EntryPolicy,
    pub policy_encoded: Option<EncodedPolicy>,
    pub client_of: Vec<(VisitorId, ClientKey)>,
    pub challenges_used: Vec<(u64, [u8; 16])>,
    pub identity_of: Vec<(VisitorId, IdentityKey)>,
    pub networks_of: Vec<(VisitorId, Vec<(ClientKey, u64)>)>,
    pub sessions_shared: u64,
    pub turnover: Turnover,
    pub origin: OriginWatch,
    pub lanes: Vec<LaneParts>,
    pub public_credit: i64,
    pub codes: CodeBook,
    pub notice: Option<(String, u64)>,
    /// How the room draws (`sluice-draw-v2`: its current secret).
    pub draws: Draws,
    /// Whether the ledger has noted that the room's closing time came (once per closing time,
    /// whichever command first sees the log clock past it).
    pub closed_noted: bool,
    /// The held waiters at the head of each line (line, count), counts above 0.
    pub held_head: Vec<(u64, u64)>,
}

impl Room {
    pub fn new(name: String, config: RoomConfig, now: u64) -> Self {
        let bucket_units = config.burst() * UNITS_PER_TOKEN;
        Room {
            name,
            config,
            created_at_ms: now,
            opened: false,
            opened_at_ms: 0,
            next_seq: 1,
            queue: WaitQueue::default(),
            waiting: IdMap::default(),
            waiter_due: DueQueue::default(),
            sessions: Sessions::default(),
            session_due: DueQueue::default(),
            ended: VecDeque::new(),
            ended_index: IdMap::default(),
            bucket_units,
            bucket_at_ms: now,
            windows: [0; WINDOWS],
            window_latest: now / WINDOW_MS,
            totals: Totals::default(),
            bans: BTreeMap::new(),
            policy: Default::default(),
            policy_encoded: None,
            client_of: BTreeMap::new(),
            places_of: BTreeMap::new(),
            sessions_of: BTreeMap::new(),
            held_back: false,
            admitted_in: BTreeMap::new(),
            unused_in: BTreeMap::new(),
            unused_count: 0,
            used_in: BTreeMap::new(),
            admitted_secs_sum: 0,
            unused_due: DueQueue::default(),
            challenges_used: BTreeSet::new(),
            challenge_ids: BTreeSet::new(),
            identity_of: BTreeMap::new(),
            visitor_of: BTreeMap::new(),
            networks_of: BTreeMap::new(),
            sessions_shared: 0,
            turnover: Turnover::default(),
            origin: OriginWatch::default(),
            lanes: Vec::new(),
            public_credit: 0,
            codes: CodeBook::default(),
            notice: None,
            draws: Draws::default(),
            closed_noted: false,
            held_head: BTreeMap::new(),
        }
    }

    /// Rebuilds a room from snapshot parts, checking that they are consistent.
    /// A room from a snapshot's parts, each step checking its part against those before it
    /// (a visitor holds one place, a redemption or a client belongs to a place, …), the
    /// derived indexes rebuilt.
    pub fn from_parts(p: RoomParts) -> Result<Self, String> {
        let mut room = Room::new(p.name, p.config, p.created_at_ms);
        room.opened = p.opened;
        room.opened_at_ms = p.opened_at_ms;
        room.next_seq = p.next_seq;
        room.bucket_units = p.bucket_units;
        room.bucket_at_ms = p.bucket_at_ms;
        room.windows = p.windows;
        room.window_latest = p.window_latest;
        room.totals = p.totals;
        let x = p.extras;
        room.notice = x.notice;
        room.draws = x.draws;
        room.closed_noted = x.closed_noted;
        room.sessions_shared = x.sessions_shared;
        room.turnover = x.turnover;
        room.restore_line(p.waiters)?;
        room.restore_sessions(p.sessions)?;
        room.restore_ended(p.ended)?;
        if x.bans.len() > BANS_PER_ROOM_MAX {
            return Err(format!("room {}: too many bans", room.name));
        }
        room.bans = x.bans.into_iter().collect();
        room.policy = std::sync::Arc::new(x.policy);
        room.policy_encoded = x.policy_encoded;
        room.restore_lanes(x.lanes, x.public_credit)?;
        room.restore_codes(x.codes)?;
        room.restore_clients(x.client_of)?;
        room.rebuild_unused_due();
        room.restore_challenges(x.challenges_used)?;
        room.restore_identities(x.identity_of)?;
        room.restore_networks(x.networks_of)?;
        if x.origin.slots.len() as u64 > ORIGIN_SLOTS + 1 {
            return Err("origin: too many slots".into());
        }
        room.origin = x.origin;
        room.restore_held(x.held_head)?;
        Ok(room)
    }

    /// A waiter's place in a restored line: its seq was given out, and the visitor waits once.
    fn restore_waiter(&mut self, s: Slot, qidx: u64) -> Result<(), String> {
        if s.seq == 0 || s.seq >= self.next_seq {
            return Err(format!(
                "room {}: waiter seq {} out of range",
                self.name, s.seq
            ));
        }
        if self.waiting.insert(s.id, qidx).is_some() || self.sessions.get(&s.id).is_some() {
            return Err(format!("room {}: visitor {} waits twice", self.name, s.id));
        }
        Ok(())
    }

    /// The room's own line, in its order (which is not the seq order once an opening shuffled
    /// it, and a later config may say nothing of a shuffle: no order is checked).
    fn restore_line(&mut self, waiters: Vec<Slot>) -> Result<(), String> {
        self.queue = WaitQueue::default();
        self.waiting.reserve(waiters.len());
        let mut due = Vec::with_capacity(waiters.len());
        for s in waiters {
            let qidx = self.queue.push(s);
            self.restore_waiter(s, qidx)?;
            due.push((s.last_seen_ms, qidx));
        }
        self.waiter_due = DueQueue::from_vec(due);
        Ok(())
    }

    /// The sessions, and the admissions and use counted from them.
    fn restore_sessions(&mut self, sessions: Vec<(VisitorId, Session)>) -> Result<(), String> {
        let mut due = Vec::with_capacity(sessions.len());
        for (id, s) in sessions {
            if s.seq == 0 || s.seq >= self.next_seq || self.waiting.contains_key(&id) {
                return Err(format!("room {}: bad session for {id}", self.name));
            }
            if let Err(e) = self.sessions.insert(id, s) {
                return Err(format!("room {}: bad session for {id}: {e}", self.name));
            }
            due.push((s.last_active_ms, s.seq, id));
        }
        self.session_due = DueQueue::from_vec(due);
        for (_, s) in self.sessions.iter() {
            let second = s.admitted_at_ms / 1000;
            *self.admitted_in.entry(second).or_insert(0) += 1;
            self.admitted_secs_sum += u128::from(second);
            if s.last_active_ms == s.admitted_at_ms {
                *self.unused_in.entry(second).or_insert(0) += 1;
                self.unused_count += 1;
            } else {
                *self.used_in.entry(second).or_insert(0) += 1;
            }
        }
        Ok(())
    }

    fn restore_ended(&mut self, ended: Vec<(VisitorId, Ended)>) -> Result<(), String> {
        if ended.len() > ENDED_PER_ROOM_MAX {
            return Err(format!("room {}: too many ended records", self.name));
        }
        for (id, e) in ended {
            self.ended_index.insert(id, e);
            self.ended.push_back((id, e));
        }
        Ok(())
    }

    /// The priority lanes' lines, one per lane of the (restored) policy.
    fn restore_lanes(&mut self, lanes: Vec<LaneParts>, public_credit: i64) -> Result<(), String> {
        if lanes.len() != self.policy.lanes.len() {
            return Err(format!(
                "room {}: {} lanes, but its policy has {}",
                self.name,
                lanes.len(),
                self.policy.lanes.len()
            ));
        }
        for (l, lane) in lanes.into_iter().enumerate() {
            let mut line = LaneLine {
                queue: WaitQueue::starting_at(lane_base(l)),
                credit: lane.credit,
                joined: lane.joined,
                admitted: lane.admitted,
            };
            for s in lane.waiters {
                let qidx = line.queue.push(s);
                self.restore_waiter(s, qidx)?;
                self.waiter_due.push((s.last_seen_ms, qidx));
            }
            self.lanes.push(line);
        }
        self.public_credit = public_credit;
        Ok(())
    }

    /// The code book: every redemption is a place's.
    fn restore_codes(&mut self, codes: CodeBook) -> Result<(), String> {
        if let Some(v) = codes.redeemed.keys().find(|v| !self.holds_place(**v)) {
            return Err(format!(
                "room {}: a redemption by {v}, who holds no place",
                self.name
            ));
        }
        self.codes = codes;
        Ok(())
    }

    /// The networks of counted visitors, each a place's, and the places and sessions counted
    /// per network.
    fn restore_clients(&mut self, client_of: Vec<(VisitorId, ClientKey)>) -> Result<(), String> {
        for (id, client) in client_of {
            if !self.holds_place(id) {
                return Err(format!(
                    "room {}: a client for {id}, who holds no place",
                    self.name
                ));
            }
            if self.client_of.insert(id, client).is_some() {
                return Err(format!("room {}: two clients for {id}", self.name));
            }
            *self.places_of.entry(client).or_insert(0) += 1;
            if self.sessions.get(&id).is_some() {
                *self.sessions_of.entry(client).or_insert(0) += 1;
            }
        }
        Ok(())
    }

    fn restore_challenges(&mut self, used: Vec<(u64, [u8; 16])>) -> Result<(), String> {
        if used.len() > CHALLENGES_REMEMBERED_MAX {
            return Err(format!("room {}: too many used challenges", self.name));
        }
        for (expires, id) in used {
            if !self.challenge_ids.insert(id) {
                return Err(format!("room {}: a challenge used twice", self.name));
            }
            self.challenges_used.insert((expires, id));
        }
        Ok(())
    }

    /// The identities, each a place's or a banned visitor's (who keeps it, so that the
    /// identity stays banned), none twice.
    fn restore_identities(
        &mut self,
        identity_of: Vec<(VisitorId, IdentityKey)>,
    ) -> Result<(), String> {
        for (id, who) in identity_of {
            if !self.holds_place(id) && !self.bans.contains_key(&id) {
                return Err(format!(
                    "room {}: an identity for {id}, who holds no place",
                    self.name
                ));
            }
            if self.identity_of.insert(id, who).is_some()
                || self.visitor_of.insert(who, id).is_some()
            {
                return Err(format!("room {}: an identity listed twice", self.name));
            }
        }
        Ok(())
    }

    /// The networks each session was used from: a session's, distinct, within the bound.
    fn restore_networks(
        &mut self,
        networks_of: Vec<(VisitorId, Vec<(ClientKey, u64)>)>,
    ) -> Result<(), String> {
        for (id, nets) in networks_of {
            if self.sessions.get(&id).is_none() {
                return Err(format!(
                    "room {}: networks of {id}, who holds no session",
                    self.name
                ));
            }
            let distinct: BTreeSet<ClientKey> = nets.iter().map(|&(n, _)| n).collect();
            if nets.is_empty()
                || nets.len() as u64 > crate::policy::NETWORKS_PER_SESSION_MAX
                || distinct.len() != nets.len()
                || self.networks_of.insert(id, nets).is_some()
            {
                return Err(format!("room {}: the networks of {id}", self.name));
            }
        }
        Ok(())
    }

    /// The held waiters at each line's head: an existing line, at most its length.
    fn restore_held(&mut self, held: Vec<(u64, u64)>) -> Result<(), String> {
        for (l, n) in held {
            let fits = usize::try_from(l)
                .ok()
                .filter(|&l| l <= self.public() && n > 0 && n <= self.line(l).len());
            match fits {
                Some(l) if self.held_head.insert(l, n).is_none() => {}
                _ => return Err(format!("room {}: held waiters of line {l}", self.name)),
            }
        }
        Ok(())
    }

    // ---- lines: the priority lanes and the room's own --------------------------------------------

    /// The line of the room's own (public) line: after every lane.
    fn public(&self) -> usize {
        self.lanes.len()
    }

    /// Line `l`'s queue (`l == public()`: the room's own).
    fn line(&self, l: usize) -> &WaitQueue {
        match self.lanes.get(l) {
            Some(lane) => &lane.queue,
            None => &self.queue,
        }
    }

    fn line_mut(&mut self, l: usize) -> &mut WaitQueue {
        match self.lanes.get_mut(l) {
            Some(lane) => &mut lane.queue,
            None => &mut self.queue,
        }
    }

    /// The line a queue index is in (`None`: a lane that is no longer there).
    fn line_of(&self, qidx: u64) -> Option<usize> {
        match (qidx >> LANE_SHIFT) as usize {
            0 => Some(self.public()),
            l if l <= self.lanes.len() => Some(l - 1),
            _ => None,
        }
    }

    fn slot(&self, qidx: u64) -> Option<&Slot> {
        self.line_of(qidx).and_then(|l| self.line(l).get(qidx))
    }

    fn slot_mut(&mut self, qidx: u64) -> Option<&mut Slot> {
        let l = self.line_of(qidx)?;
        self.line_mut(l).get_mut(qidx)
    }

    fn take_slot(&mut self, qidx: u64) -> Option<Slot> {
        let l = self.line_of(qidx)?;
        self.unline(l, qidx)
    }

    /// Takes the waiter at `qidx` out of line `l`, keeping the count of held waiters at its
    /// head.
    fn unline(&mut self, l: usize, qidx: u64) -> Option<Slot> {
        let held = self.held_head_of(l);
        if held > 0 && self.line(l).get(qidx).is_some() && self.line(l).rank(qidx) < held {
            self.set_held_head(l, held - 1);
        }
        self.line_mut(l).remove(qidx)
    }

    /// The held waiters at the head of each line, as a snapshot writes them: (line, count),
    /// counts above 0 and within the line.
    pub(crate) fn held_heads(&self) -> Vec<(u64, u64)> {
        self.held_head
            .iter()
            .map(|(&l, &n)| (l as u64, n.min(self.line(l).len())))
            .filter(|&(_, n)| n > 0)
            .collect()
    }

    /// How many waiters at the head of line `l` admission knows to be held.
    fn held_head_of(&self, l: usize) -> u64 {
        self.held_head.get(&l).copied().unwrap_or(0)
    }

    fn set_held_head(&mut self, l: usize, n: u64) {
        if n == 0 {
            self.held_head.remove(&l);
        } else {
            self.held_head.insert(l, n);
        }
    }

    /// Waiters in every line.
    pub fn waiting_len(&self) -> u64 {
        self.queue.len() + self.lanes.iter().map(|l| l.queue.len()).sum::<u64>()
    }

    /// Every line with its lane's name (`None`: the room's own), in priority order.
    pub fn lines(&self) -> impl Iterator<Item = (Option<&str>, &WaitQueue)> + '_ {
        self.policy
            .lanes
            .iter()
            .zip(&self.lanes)
            .map(|(rule, line)| (Some(rule.name.as_str()), &line.queue))
            .chain(std::iter::once((None, &self.queue)))
    }

    /// The line a lane's name gives (an unknown name, or none: the room's own).
    /// The name of line `l`'s lane (`None`: the room's own line).
    fn lane_name(&self, l: usize) -> Option<String> {
        self.policy.lanes.get(l).map(|lane| lane.name.clone())
    }

    fn line_named(&self, name: Option<&str>) -> usize {
        name.and_then(|n| self.policy.lanes.iter().position(|l| l.name == n))
            .unwrap_or(self.public())
    }

    /// Ms until line `l` opens at `now` (0: open, or opening with a room that has no time).
    fn line_opens_in_ms(&self, l: usize, now: u64) -> u64 {
        let room = match (self.opened, self.config.opens_at_ms) {
            (false, Some(t)) => t.saturating_sub(now),
            _ => 0,
        };
        match self.policy.lanes.get(l).and_then(|lane| lane.opens_at_ms) {
            Some(t) => t.saturating_sub(now),
            None => room,
        }
    }

    /// Whether line `l` admits at `now`: a lane from its own opening time, else with the room.
    fn line_open(&self, l: usize, now: u64) -> bool {
        match self.policy.lanes.get(l).and_then(|lane| lane.opens_at_ms) {
            Some(t) => t <= now,
            None => self.opened,
        }
    }

    fn line_lottery(&self, l: usize) -> bool {
        match self.policy.lanes.get(l) {
            Some(lane) => lane.lottery,
            None => self.config.mode == Mode::Lottery,
        }
    }

    /// Puts a waiter at the end of line `l`, indexed.
    fn push_waiter(&mut self, l: usize, slot: Slot) {
        let qidx = self.line_mut(l).push(slot);
        self.waiting.insert(slot.id, qidx);
        self.waiter_due.push((slot.last_seen_ms, qidx));
        if let Some(lane) = self.lanes.get_mut(l) {
            lane.joined += 1;
        }
    }

    /// The lines to try for the next admission, best first: the round robin's choice when the
    /// lanes have shares, then the others by priority; only lines open at `now` (every line
    /// when `forced`) that have waiters. In arrays, not vectors: it runs once per admission.
    fn lines_to_try(&mut self, now: u64, forced: bool) -> LineOrder {
        let lines = self.public() + 1;
        let mut candidate = [false; lanes::LANES_MAX + 1];
        for (l, c) in candidate.iter_mut().enumerate().take(lines) {
            *c = self.line(l).len() > 0 && (forced || self.line_open(l, now));
        }
        let candidate = &candidate[..lines];
        let mut order = LineOrder::default();
        if self.lanes.is_empty() {
            if candidate[0] {
                order.push(0);
            }
            return order;
        }
        if let Some(w) = lanes::weights(&self.policy.lanes) {
            let mut credit: Vec<i64> = self
                .lanes
                .iter()
                .map(|l| l.credit)
                .chain([self.public_credit])
                .collect();
            if let Some(l) = lanes::round_robin(&mut credit, &w, candidate) {
                order.push(l);
            }
            for (line, c) in self.lanes.iter_mut().zip(&credit) {
                line.credit = *c;
            }
            self.public_credit = credit[credit.len() - 1];
        }
        for (l, &c) in candidate.iter().enumerate() {
            if c && order.first() != Some(l) {
                order.push(l);
            }
        }
        order
    }

    /// Re-points the room's indexes at every waiter of line `l` (after its queue was rebuilt)
    /// and rebuilds the expiry heap.
    fn reindex_line(&mut self, l: usize) {
        let queue = match self.lanes.get(l) {
            Some(lane) => &lane.queue,
            None => &self.queue,
        };
        for (qidx, s) in queue.iter() {
            *self.waiting.get_mut(&s.id).expect("waiter without index") = qidx;
        }
        let mut due = Vec::with_capacity(self.waiting_len() as usize);
        for l in 0..=self.public() {
            due.extend(self.line(l).iter().map(|(q, s)| (s.last_seen_ms, q)));
        }
        self.waiter_due = DueQueue::from_vec(due);
    }

    /// Takes the lanes of a new policy: lanes are kept by name (a lane that moves is renumbered),
    /// new ones start empty. Refused, with nothing changed, if a lane with waiters would go.
    fn check_lanes(&self, policy: &EntryPolicy) -> Result<(), Rejection> {
        for (rule, line) in self.policy.lanes.iter().zip(&self.lanes) {
            if line.queue.len() > 0 && !policy.lanes.iter().any(|l| l.name == rule.name) {
                return Err(Rejection::invalid(
                    "entry.lanes",
                    format!(
                        "lane '{}' has {} waiters: keep it until they are admitted",
                        rule.name,
                        line.queue.len()
                    ),
                ));
            }
        }
        Ok(())
    }

    fn take_lanes(&mut self, new: &[lanes::Lane]) {
        let same = new.len() == self.policy.lanes.len()
            && new
                .iter()
                .zip(&self.policy.lanes)
                .all(|(a, b)| a.name == b.name);
        if same {
            return;
        }
        let mut old: BTreeMap<String, LaneLine> = self
            .policy
            .lanes
            .iter()
            .map(|r| r.name.clone())
            .zip(std::mem::take(&mut self.lanes))
            .collect();
        for (l, rule) in new.iter().enumerate() {
            let kept = old.remove(&rule.name).unwrap_or_default();
            let mut queue = WaitQueue::starting_at(lane_base(l));
            for slot in kept.queue.live_slots() {
                queue.push(slot);
            }
            self.lanes.push(LaneLine { queue, ..kept });
        }
        debug_assert!(old.values().all(|l| l.queue.len() == 0));
        for l in 0..self.lanes.len() {
            self.reindex_line(l);
        }
        self.public_credit = 0;
    }

    // ---- time-driven housekeeping -------------------------------------------------------------

    /// Expiry, phases, refill and opening at `now`. Returns how many visitors expired.
    pub fn advance(&mut self, now: u64, draw: &mut Step) -> u64 {
        let expired = self.expire(now, draw);
        self.start_phases(now, draw);
        self.refill(now);
        if !self.opened && self.config.opens_at_ms.is_none_or(|t| t <= now) {
            self.open(now, draw);
        }
        expired
    }

    /// Ends the sessions and waiters whose TTL has run out, at most [`EXPIRIES_PER_APPLY_MAX`].
    ///
    /// A renewal or check-in does not re-key the visitor's heap entry: the heaps may hold an
    /// older time for a visitor than it has, and a replica restored from a snapshot holds the
    /// true times. Pop order differs between such replicas, so every due entry is examined and
    /// the cut, when there are more than the limit, is made by true time and seq, which every
    /// replica agrees on.
    fn expire(&mut self, now: u64, draw: &mut Step) -> u64 {
        let mut gone = self.expired_sessions(now);
        self.unused_sessions(now, &mut gone);
        self.abandoned_waiters(now, &mut gone);
        gone.sort_unstable_by_key(|&(seq, _, _, _)| seq);
        for &(seq, id, reason, session) in &gone {
            self.record_end(id, seq, reason, session, now);
            draw.note(Event::Ended {
                visitor: id,
                seq,
                reason,
                admitted: session.is_some(),
            });
        }
        self.maybe_compact();
        gone.len() as u64
    }

    /// Sessions past their time to live (at most [`EXPIRIES_PER_APPLY_MAX`], the oldest),
    /// ended: (seq, visitor, reason, its session).
    fn expired_sessions(&mut self, now: u64) -> Vec<Gone> {
        let ttl = self.config.session_ttl_secs * 1000;
        let mut due: Vec<(u64, u64, VisitorId)> = Vec::new();
        while let Some(&(t, seq, id)) = self.session_due.peek() {
            if t + ttl > now {
                break;
            }
            self.session_due.pop();
            let Some((s_seq, last_active_ms)) = self.sessions.key(&id) else {
                continue;
            };
            if s_seq != seq {
                continue; // an entry of an earlier session of the same visitor
            }
            if last_active_ms + ttl <= now {
                due.push((last_active_ms, seq, id));
            } else {
                self.session_due.push((last_active_ms, seq, id));
            }
        }
        let (due, later) = first_by_time(due, EXPIRIES_PER_APPLY_MAX);
        for e in later {
            self.session_due.push(e);
        }
        let mut gone: Vec<Gone> = Vec::with_capacity(due.len());
        for (_, seq, id) in due {
            if let Some(s) = self.sessions.remove(&id) {
                gone.push((seq, id, EndReason::Expired, Some(s)));
            }
        }
        gone
    }

    /// Admissions not used in time, ended, up to the bound of ends per apply. Deadlines never
    /// move (a use only makes an entry stale), so the heap pops in true order and every
    /// replica cuts alike.
    fn unused_sessions(&mut self, now: u64, gone: &mut Vec<Gone>) {
        while gone.len() < EXPIRIES_PER_APPLY_MAX {
            let Some(&(deadline, seq, id)) = self.unused_due.peek() else {
                break;
            };
            if deadline > now {
                break;
            }
            self.unused_due.pop();
            let unused = self
                .sessions
                .get(&id)
                .is_some_and(|s| s.seq == seq && s.last_active_ms == s.admitted_at_ms);
            if unused {
                if let Some(s) = self.sessions.remove(&id) {
                    gone.push((seq, id, EndReason::Unused, Some(s)));
                }
            }
        }
    }

    /// Waiters not seen for longer than the room keeps them, removed from their lines, up to
    /// the bound of ends per apply.
    fn abandoned_waiters(&mut self, now: u64, gone: &mut Vec<Gone>) {
        let ttl = self.waiter_keep_ms();
        let mut due: Vec<(u64, u64, u64)> = Vec::new();
        while let Some(&(t, qidx)) = self.waiter_due.peek() {
            if t + ttl > now {
                break;
            }
            self.waiter_due.pop();
            let Some(slot) = self.slot(qidx).copied() else {
                continue;
            };
            if slot.last_seen_ms + ttl <= now {
                due.push((slot.last_seen_ms, slot.seq, qidx));
            } else {
                self.waiter_due.push((slot.last_seen_ms, qidx));
            }
        }
        let (due, later) = first_by_time(due, EXPIRIES_PER_APPLY_MAX.saturating_sub(gone.len()));
        for (t, _, qidx) in later {
            self.waiter_due.push((t, qidx));
        }
        for (_, seq, qidx) in due {
            if let Some(slot) = self.take_slot(qidx) {
                self.waiting.remove(&slot.id);
                gone.push((seq, slot.id, EndReason::Abandoned, None));
            }
        }
    }

    fn refill(&mut self, now: u64) {
        let cap = self.config.burst() * UNITS_PER_TOKEN;
        let elapsed = now.saturating_sub(self.bucket_at_ms) as u128;
        let add =
            elapsed * self.config.admit_per_minute as u128 * self.config.rate_permille() as u128;
        self.bucket_units = (self.bucket_units as u128 + add).min(cap as u128) as u64;
        self.bucket_at_ms = self.bucket_at_ms.max(now);
    }

    /// Starts the phases of the room's timeline whose starts came since the last refill, up to
    /// `now`, each exactly at its start: the bucket is filled up to the start at the rate before
    /// it ([`crate::phases`]).
    fn start_phases(&mut self, now: u64, draw: &mut Step) {
        let since = self.bucket_at_ms;
        let first = crate::phases::started(&self.policy.phases, since).len();
        let last = crate::phases::started(&self.policy.phases, now).len();
        for i in first..last {
            let p = self.policy.phases[i].clone();
            self.refill(p.starts_at_ms);
            if let Some(c) = p.capacity {
                self.config.capacity = c;
            }
            if let Some(r) = p.admit_per_minute {
                self.config.admit_per_minute = r;
                self.bucket_units = self.bucket_units.min(self.config.burst() * UNITS_PER_TOKEN);
            }
            if let Some(m) = p.mode {
                self.config.mode = m;
            }
            self.held_head.clear();
            if let Some(text) = p.notice {
                let text = (!text.is_empty()).then_some(text);
                self.notice = text.clone().map(|t| (t, p.starts_at_ms));
                draw.note(Event::Notice { text });
            }
            draw.note(Event::PhaseStarted {
                index: i as u64,
                name: p.name,
            });
        }
    }

    /// Whether the line will be shuffled when the room opens: only at its first opening. A room
    /// whose opening is put off after it opened keeps the order of those already in line (who
    /// joined first come, first served), and those who join meanwhile line up after them.
    fn shuffles_at_open(&self) -> bool {
        self.config.shuffle_at_open && !self.opened && self.opened_at_ms == 0
    }

    fn open(&mut self, now: u64, draw: &mut Step) {
        let shuffle = self.shuffles_at_open();
        self.opened = true;
        self.opened_at_ms = now;
        draw.note(Event::Opened);
        if shuffle && self.queue.len() > 1 {
            self.held_head.clear();
            let mut order = self.queue.live_slots();
            let d = draw.get();
            d.shuffle(&mut order);
            let seed = d.seed();
            draw.note(Event::Shuffled {
                seed,
                waiters: order.len() as u64,
            });
            self.renumber(self.public(), order);
        }
    }

    /// Replaces line `l` by `order` and rebuilds the indexes that hold qidx.
    fn renumber(&mut self, l: usize, order: Vec<Slot>) {
        let first = self.line_mut(l).rebuild(order);
        self.reindex_line(l);
        debug_assert!(self.line(l).front().is_none_or(|(q, _)| q == first));
    }

    fn maybe_compact(&mut self) {
        for l in 0..=self.public() {
            if self.line(l).wants_compaction() {
                let order = self.line(l).live_slots();
                self.renumber(l, order);
            }
        }
    }

    /// Rebuilds the session expiry heap from the live sessions once it holds more than twice
    /// as many entries: a session that ends early (a leave, a revocation) leaves its entry until
    /// it comes due, which with long TTLs and many short visits would grow without bound.
    fn maybe_compact_session_due(&mut self) {
        if self.session_due.len() > 2 * self.sessions.len() + 1024 {
            let due = self
                .sessions
                .iter()
                .map(|(id, s)| (s.last_active_ms, s.seq, *id))
                .collect();
            self.session_due = DueQueue::from_vec(due);
        }
    }

    // ---- admission ----------------------------------------------------------------------------

    /// Admits waiters while the rules allow. Returns how many.
    pub fn pump(&mut self, now: u64, draw: &mut Step) -> u64 {
        let n = if self.config.paused {
            0
        } else {
            self.admit_some(now, draw, ADMITS_PER_APPLY_MAX, false)
        };
        self.drop_stale_due();
        n
    }

    /// Pops expiry entries of visitors who are gone, so `next_due` does not ask for useless ticks.
    fn drop_stale_due(&mut self) {
        while let Some(&(_, qidx)) = self.waiter_due.peek() {
            if self.slot(qidx).is_some() {
                break;
            }
            self.waiter_due.pop();
        }
        while let Some(&(_, seq, id)) = self.session_due.peek() {
            if self.sessions.key(&id).is_some_and(|(s, _)| s == seq) {
                break;
            }
            self.session_due.pop();
        }
        while let Some(&(_, seq, id)) = self.unused_due.peek() {
            let live = self
                .sessions
                .get(&id)
                .is_some_and(|s| s.seq == seq && s.last_active_ms == s.admitted_at_ms);
            if live {
                break;
            }
            self.unused_due.pop();
        }
    }

    /// Rebuilds the first-use heap from the sessions (after a restore, or a new policy): every
    /// session not used since its admission, due its first-use TTL after it.
    fn rebuild_unused_due(&mut self) {
        self.unused_due = match self.policy.first_use_ttl_secs {
            None => DueQueue::default(),
            Some(ttl) => DueQueue::from_vec(
                self.sessions
                    .iter()
                    .filter(|(_, s)| s.last_active_ms == s.admitted_at_ms)
                    .map(|(id, s)| (s.admitted_at_ms + ttl * 1000, s.seq, *id))
                    .collect(),
            ),
        };
    }

    /// Replaces the entry policy (already validated). Sessions admitted and still unused come
    /// under a new first-use TTL at once; visitors who joined without a counted client stay
    /// uncounted.
    pub fn set_policy(
        &mut self,
        policy: EntryPolicy,
        encoded: &EncodedPolicy,
        now: u64,
        draw: &mut Step,
    ) -> Outcome {
        if let Err(r) = self
            .check_lanes(&policy)
            .and_then(|()| crate::phases::check_frozen(&self.policy.phases, &policy.phases, now))
        {
            self.pump(now, draw);
            return Outcome::Rejected(r);
        }
        self.take_lanes(&policy.lanes);
        if policy.origin != self.policy.origin {
            // The samples were counted against the old thresholds.
            self.origin.reset();
        }
        self.policy = std::sync::Arc::new(policy);
        self.policy_encoded = Some(encoded.clone());
        self.held_head.clear();
        if !self.policy.counts_clients() {
            self.client_of.clear();
            self.places_of.clear();
            self.sessions_of.clear();
        }
        if self.policy.identity.is_none() {
            self.identity_of.clear();
            self.visitor_of.clear();
        }
        if self.policy.networks_per_session_max.is_none() {
            self.networks_of.clear();
        }
        self.rebuild_unused_due();
        self.pump(now, draw);
        Outcome::Room(self.room_view(now))
    }

    fn admit_some(&mut self, now: u64, draw: &mut Step, max: u64, forced: bool) -> u64 {
        let pass = self.config.mode == Mode::Passthrough;
        let mut n = 0;
        let mut skips_left = HELD_SKIPS_PER_APPLY_MAX;
        self.held_back = false;
        while n < max && self.waiting_len() > 0 {
            if self.sessions.len() as u64 >= self.sessions_max() {
                break;
            }
            let metered = !pass && !forced;
            if metered && (self.config.rate_permille() == 0 || self.bucket_units < UNITS_PER_TOKEN)
            {
                break;
            }
            let lines = self.lines_to_try(now, forced);
            if lines.is_empty() {
                break; // no open line has waiters
            }
            let Some((l, qidx, rule)) = self.choose(&lines, now, draw, &mut skips_left) else {
                // Every waiter held: only a change of state lets one go. Out of looks: the
                // next command looks on from where this one stopped.
                self.held_back = skips_left > 0;
                break;
            };
            let (visitor, seq) = self.admit(l, qidx, now);
            draw.note(Event::Admitted {
                visitor,
                seq,
                lane: self.lane_name(l),
                rule: if forced {
                    Rule::Forced
                } else if pass {
                    Rule::Passthrough
                } else {
                    rule
                },
            });
            if metered {
                self.bucket_units -= UNITS_PER_TOKEN;
            }
            n += 1;
        }
        if n > 0 {
            self.maybe_compact();
        }
        assert!(
            n == 0 || pass || self.sessions.len() as u64 <= self.config.capacity,
            "admission overshot capacity"
        );
        n
    }

    /// The waiter to admit next from `lines`, tried in their order: its line, its place in the
    /// line and the rule that chose it (passed over, when waiters held back were passed to
    /// reach it). A lottery line draws a rank; a draw that falls on a waiter held back is
    /// drawn again (a bounded number of times; then, as in a FIFO line, the first after it
    /// that is not held goes in), so that every waiter not held back has the same chance.
    /// `None` when every look found a waiter held.
    fn choose(
        &mut self,
        lines: &LineOrder,
        now: u64,
        draw: &mut Step,
        skips_left: &mut u64,
    ) -> Option<(usize, u64, Rule)> {
        for l in lines.iter() {
            let mut redrawn = 0;
            let (k, rule) = if self.line_lottery(l) {
                let candidates = self.line(l).len();
                let d = draw.get();
                let mut rank = d.below(candidates);
                while redrawn < LOTTERY_REDRAWS_MAX && *skips_left > 0 && self.held_at(l, rank, now)
                {
                    *skips_left -= 1;
                    redrawn += 1;
                    rank = d.below(candidates);
                }
                let seed = d.seed();
                let rule = Rule::Lottery {
                    seed,
                    candidates,
                    rank,
                };
                (rank, rule)
            } else {
                (0, Rule::Head)
            };
            if let Some((qidx, walked)) = self.pick(l, k, now, skips_left) {
                let passed = redrawn + walked;
                let rule = if passed > 0 {
                    Rule::PassedOver {
                        chosen: Box::new(rule),
                        passed,
                    }
                } else {
                    rule
                };
                return Some((l, qidx, rule));
            }
            if *skips_left == 0 {
                break;
            }
        }
        None
    }

    /// The waiter to admit and how many were passed over to reach it: the one at rank `k`, or,
    /// while `sessions_per_client_max` or the grace period holds waiters back, the first after
    /// it (wrapping round) that is not away and whose network may take one more session.
    /// `None` when every waiter looked at is held or `skips_left` runs out.
    fn pick(&mut self, l: usize, k: u64, now: u64, skips_left: &mut u64) -> Option<(u64, u64)> {
        let queue = self.line(l);
        if self.policy.sessions_per_client_max.is_none() && self.policy.grace_secs.is_none() {
            let qidx = match k {
                0 => queue.front().expect("non-empty line").0,
                k => queue.select(k),
            };
            return Some((qidx, 0));
        }
        // From the head, admission looks on after the waiters it knows to be held.
        let start = if k == 0 {
            self.held_head_of(l).min(queue.len())
        } else {
            k
        };
        let round = queue.iter_from(start).chain(queue.iter().take(k as usize));
        let (mut found, mut held) = (None, 0u64);
        for (qidx, slot) in round {
            if !self.held(slot, now) {
                found = Some((qidx, held));
                break;
            }
            held += 1;
            if *skips_left == 0 {
                break;
            }
            *skips_left -= 1;
        }
        if k == 0 {
            self.set_held_head(l, start + held);
            found.map(|(qidx, passed)| (qidx, start + passed))
        } else {
            found
        }
    }

    /// Whether the waiter at rank `k` of line `l` is held back (see [`Self::held`]).
    fn held_at(&self, l: usize, k: u64, now: u64) -> bool {
        if self.policy.sessions_per_client_max.is_none() && self.policy.grace_secs.is_none() {
            return false;
        }
        let queue = self.line(l);
        queue
            .get(queue.select(k))
            .is_some_and(|slot| self.held(slot, now))
    }

    /// Whether admissions pass the waiter over for now: away within the grace period, or its
    /// network holding `sessions_per_client_max` sessions.
    fn held(&self, slot: &Slot, now: u64) -> bool {
        self.away(slot.last_seen_ms, now) || self.network_full(slot.id)
    }

    /// Whether the visitor's client network holds as many sessions as one network may.
    fn network_full(&self, id: VisitorId) -> bool {
        self.policy.sessions_per_client_max.is_some_and(|max| {
            self.client_of
                .get(&id)
                .is_some_and(|c| self.sessions_of.get(c).is_some_and(|&n| n >= max))
        })
    }

    /// How long a waiter that does not check in keeps its place: the waiter TTL and the
    /// policy's grace period.
    fn waiter_keep_ms(&self) -> u64 {
        (self.config.waiter_ttl_secs + self.policy.grace_secs.unwrap_or(0)) * 1000
    }

    /// Whether a waiter last seen at `last_seen_ms` is away: past the waiter TTL but within
    /// the grace period, so passed over by admissions until it returns.
    fn away(&self, last_seen_ms: u64, now: u64) -> bool {
        self.policy.grace_secs.is_some() && last_seen_ms + self.config.waiter_ttl_secs * 1000 <= now
    }

    // ---- what the ledger reports, and the draw secret -------------------------------------------

    /// The room's state as far as the ledger reports its changes.
    pub fn signals(&self) -> Signals {
        let mut lottery = 0u64;
        for l in 0..=self.public() {
            if self.line_lottery(l) {
                lottery |= 1 << l;
            }
        }
        Signals {
            paused: self.config.paused,
            health: self.config.health,
            waiting: self.waiting_len() > 0,
            full: self.sessions.len() as u64 >= self.sessions_max(),
            draw_settings: (lottery, self.config.shuffle_at_open),
        }
    }

    /// Notes what changed since `before`, and keeps the draw secret: reveals one that has seeded
    /// a draw once no draw may use it any more or the draw settings changed, and begins the next.
    /// A closing time the log clock has passed is noted once.
    pub fn settle(&mut self, before: Option<Signals>, key: &DrawKey, now: u64, step: &mut Step) {
        let after = self.signals();
        if !self.closed_noted && self.config.closes_at_ms.is_some_and(|t| t <= now) {
            // Noted by the first command on the room that sees the clock past the closing
            // time: the entry that moved the clock there may not have touched the room, and
            // two commands of one entry may.
            self.closed_noted = true;
            step.note(Event::Closed);
        }
        if let Some(before) = before {
            if after.health != before.health {
                step.note(Event::Health {
                    health: after.health,
                });
            }
            if after.paused != before.paused {
                step.note(if after.paused {
                    Event::Paused {
                        by_origin: self.origin.paused_by_origin,
                    }
                } else {
                    Event::Resumed
                });
            }
            if after.full && !before.full {
                step.note(Event::CapacityReached);
            }
            if before.waiting && !after.waiting {
                step.note(Event::Drained);
            }
        }
        if !self.draws.v2 {
            return;
        }
        let Some(epoch) = self.draws.epoch.as_mut() else {
            self.begin_draws(key, step);
            return;
        };
        epoch.used |= step.drew_from(epoch.start);
        let changed = before.is_some_and(|b| b.draw_settings != after.draw_settings);
        if epoch.used && (changed || !self.may_draw(now)) {
            self.reveal_draws(key, step);
            self.begin_draws(key, step);
        }
    }

    /// Whether a draw may still come: a line drawn by lot, or a shuffle at an opening to come,
    /// and not a closed room whose line is empty.
    fn may_draw(&self, now: u64) -> bool {
        let drawn = (0..=self.public()).any(|l| self.line_lottery(l)) || self.shuffles_at_open();
        let over = self.config.closes_at_ms.is_some_and(|t| t <= now) && self.waiting_len() == 0;
        drawn && !over
    }

    /// Begins a draw secret at the step's position (the room draws by `sluice-draw-v2` from
    /// then on) and publishes its commitment.
    pub fn begin_draws(&mut self, key: &DrawKey, step: &mut Step) {
        let start = step.pos();
        let secret = key.secret(&self.name, start);
        let c = commitment(&secret);
        self.draws = Draws {
            v2: true,
            epoch: Some(Epoch {
                start,
                commitment: c,
                used: false,
            }),
        };
        step.note(Event::DrawCommitted { commitment: c });
    }

    /// Reveals the current draw secret if a draw has used it.
    pub fn reveal_draws(&mut self, key: &DrawKey, step: &mut Step) {
        if let Some(e) = self.draws.epoch.take() {
            if e.used || step.drew_from(e.start) {
                step.note(Event::DrawRevealed {
                    commitment: e.commitment,
                    secret: key.secret(&self.name, e.start),
                });
            }
        }
    }

    /// Where the current draw secret began, for the step's generator (`None`: `sluice-draw-v1`).
    pub fn draw_start(&self) -> Option<DrawPosition> {
        self.draws.epoch.map(|e| e.start)
    }

    /// Sets or takes down the notice to the line.
    pub fn set_notice(&mut self, text: &Option<String>, now: u64) -> Outcome {
        if let Err(e) = crate::types::validate_notice(text) {
            return Outcome::Rejected(e);
        }
        self.notice = text.clone().map(|t| (t, now));
        Outcome::Room(self.room_view(now))
    }

    /// Sessions this room may hold: its capacity, or the hard bound in passthrough mode.
    fn sessions_max(&self) -> u64 {
        if self.config.mode == Mode::Passthrough {
            SESSIONS_PER_ROOM_MAX
        } else {
            self.config.capacity
        }
    }

    /// Admits the waiter at `qidx` of line `l`; returns it and its sequence number.
    fn admit(&mut self, l: usize, qidx: u64, now: u64) -> (VisitorId, u64) {
        let slot = self.unline(l, qidx).expect("admitting a hole");
        if let Some(lane) = self.lanes.get_mut(l) {
            lane.admitted += 1;
        }
        self.waiting.remove(&slot.id).expect("waiter without index");
        let s = Session {
            seq: slot.seq,
            admitted_at_ms: now,
            last_active_ms: now,
        };
        self.sessions
            .insert(slot.id, s)
            .expect("a waiter has no session");
        self.session_due.push((now, slot.seq, slot.id));
        if let Some(&c) = self.client_of.get(&slot.id) {
            *self.sessions_of.entry(c).or_insert(0) += 1;
        }
        *self.admitted_in.entry(now / 1000).or_insert(0) += 1;
        self.admitted_secs_sum += u128::from(now / 1000);
        *self.unused_in.entry(now / 1000).or_insert(0) += 1;
        self.unused_count += 1;
        if let Some(ttl) = self.policy.first_use_ttl_secs {
            self.unused_due.push((now + ttl * 1000, slot.seq, slot.id));
        }
        self.totals.admitted += 1;
        self.roll_windows(now);
        self.windows[((now / WINDOW_MS) % WINDOWS as u64) as usize] += 1;
        (slot.id, slot.seq)
    }

    fn roll_windows(&mut self, now: u64) {
        let w = now / WINDOW_MS;
        if w > self.window_latest {
            let gap = (w - self.window_latest).min(WINDOWS as u64);
            for k in 1..=gap {
                self.windows[((self.window_latest + k) % WINDOWS as u64) as usize] = 0;
            }
            self.window_latest = w;
        }
    }

    /// Admissions in the minute up to `now` (six 10-second windows).
    pub fn admitted_last_minute(&self, now: u64) -> u64 {
        let w = now / WINDOW_MS;
        let lo = w.saturating_sub(WINDOWS as u64 - 1);
        let first = self.window_latest.saturating_sub(WINDOWS as u64 - 1);
        (first.max(lo)..=self.window_latest)
            .map(|n| self.windows[(n % WINDOWS as u64) as usize])
            .sum()
    }

    /// Admissions per minute × 1000 the estimates assume now: the setpoint (after health), or,
    /// when the room is full, the turnover of its sessions if that is slower.
    fn eta_rate_milli(&self) -> u64 {
        let setpoint = self.config.admit_per_minute * self.config.rate_permille();
        let full = self.sessions.len() as u64 >= self.config.capacity;
        let place = self.place_ms(0).filter(|&ms| ms > 0);
        match place {
            Some(ms) if full && self.config.mode != Mode::Passthrough => {
                let turnover = u128::from(self.config.capacity) * 60_000_000 / ms;
                setpoint.min(u64::try_from(turnover).unwrap_or(u64::MAX))
            }
            _ => setpoint,
        }
    }

    /// How long (ms) a place taken at `now` is held on average: a used one as long as used ones
    /// last ([`used_mean_ms`](Self::used_mean_ms)), an unused one until its deadline, in the
    /// share of the room's admissions so far that went unused (those ended, and those now held
    /// past [`UNUSED_GRACE_MS`]). `None` while that needs the length of used sessions and none
    /// has ended.
    fn place_ms(&self, now: u64) -> Option<u128> {
        let unused_life = self.unused_life_ms();
        // Sessions admitted within the grace: not yet known to be unused.
        let stale = now.saturating_sub(UNUSED_GRACE_MS) / 1000;
        let fresh: u64 = self.admitted_in.range(stale + 1..).map(|(_, n)| n).sum();
        let fresh_unused: u64 = self.unused_in.range(stale + 1..).map(|(_, n)| n).sum();
        let held = self.unused_count - fresh_unused;
        let unused = u128::from(self.turnover.unused + held);
        let known = u128::from(self.turnover.ended + self.turnover.unused)
            + (self.sessions.len() as u128 - u128::from(fresh));
        match self.used_mean_ms(now) {
            // A room is presumed to have had [`PLACES_PRESUMED_USED`] more that were used: two
            // places of ten left unused say less than two of ten thousand.
            Some(m) => {
                let of = known + u128::from(PLACES_PRESUMED_USED);
                Some((m * (of - unused) + unused_life * unused) / of)
            }
            None => (known > 0 && unused == known).then_some(unused_life),
        }
    }

    /// How long (ms) a place is held that is never used: until its first-use TTL, or its session
    /// TTL.
    fn unused_life_ms(&self) -> u128 {
        let ttl = u128::from(self.config.session_ttl_secs) * 1000;
        self.policy
            .first_use_ttl_secs
            .map_or(ttl, |f| ttl.min(u128::from(f) * 1000))
    }

    /// How long (ms) a used session lasts on average, once one has ended by itself. Before a
    /// room's first generation of sessions has ended, those that have are the short ones: a
    /// session lasts at least twice the mean age of those still going (as it would in a full
    /// room of sessions of one length, admitted evenly); `now` 0: not that correction.
    fn used_mean_ms(&self, now: u64) -> Option<u128> {
        let active = self.sessions.len() as u128;
        (self.turnover.ended > 0).then(|| {
            let mean = u128::from(self.turnover.mean_ms);
            if now > 0 && self.turnover.ended < self.config.capacity && active > 0 {
                let age = (u128::from(now) / 1000).saturating_sub(self.admitted_secs_sum / active);
                mean.max(2 * age * 1000)
            } else {
                mean
            }
        })
    }

    /// Ms from `now` until the `ends`-th session from now ends, each place taken again, as it
    /// frees, by a session of the room's usual length; `None` when that needs a length the room
    /// has not learned.
    ///
    /// When each session ends, as far as the state machine can tell:
    /// - one never used, [`UNUSED_GRACE_MS`] after its admission: at its deadline (its first-use
    ///   TTL, or its session TTL), unless its visitor comes;
    /// - one in use, of age `a`, in a room whose used sessions last `m` on average: after
    ///   `m - a` while that is longer than `a / 2`; past that, `a / 2` from now. A session that
    ///   has lasted longer than most is evidence that it lasts longer still, so its expected end
    ///   moves away as it ages: it is never forever "about to end".
    ///
    /// Sessions are taken by the second they were admitted in, oldest first and around the age
    /// where the two rules meet, at most [`ESTIMATE_SECONDS_SCANNED_MAX`] seconds of them; past
    /// that, the places left are taken to free evenly (a place's length ÷ capacity apart).
    fn session_ends_in(&self, ends: u64, now: u64) -> Option<u128> {
        let t = u128::from(now);
        let unused_life = self.unused_life_ms();
        let used_mean = self.used_mean_ms(now);
        let length = self.place_ms(now)?;
        let ms = |v: u128| u64::try_from(v).unwrap_or(u64::MAX);
        let places = self.config.capacity.max(1);
        let (k, generation) = ((ends - 1) % places + 1, (ends - 1) / places);
        let first_end = if k > self.sessions.len() as u64 {
            // A session not yet admitted: it begins now.
            Some(t + length)
        } else {
            let spacing = ms(length / u128::from(places));
            self.kth_session_end(k, now, ms(unused_life), used_mean.map(ms), spacing)
                .map(u128::from)
        };
        match first_end {
            Some(end) => Some(end - t + u128::from(generation) * length),
            None => used_mean.map(|_| u128::from(ends) * length / u128::from(places)),
        }
    }

    /// When (ms) the `k`-th of the room's sessions to end does, by the rules of
    /// [`session_ends_in`](Self::session_ends_in); `None` when it needs the length of used
    /// sessions and none has ended yet. Past the [`ESTIMATE_SECONDS_SCANNED_MAX`] seconds it may
    /// look through, the ends left come `spacing` apart after the last it saw.
    ///
    /// Four runs of (end, count), each in the order of its ends, merged: unused sessions past
    /// their grace (older first); unused ones within it, taken as used ones that began then
    /// (older first); used ones young enough to end `m` after they began (older first); and
    /// older used ones (younger first: the older, the later). Each step is one move along one
    /// run (a status read walks this; no lookups on the way).
    fn kth_session_end(
        &self,
        k: u64,
        t: u64,
        unused_life: u64,
        used_mean: Option<u64>,
        spacing: u64,
    ) -> Option<u64> {
        // Before any used session has ended, every unused one is taken to be held.
        let stale = match used_mean {
            Some(_) => t.saturating_sub(UNUSED_GRACE_MS) / 1000,
            None => u64::MAX,
        };
        let m = used_mean.unwrap_or(0);
        // A used session of age `a` ends `m - a` from now while that is longer than `a / 2`,
        // i.e. while `a < 2m/3`; after, `a / 2` from now.
        let cut = t.saturating_sub(2 * m / 3) / 1000;
        let young = |(&second, &n): (&u64, &u64)| ((second * 1000 + m).max(t), n);
        let old = |(&second, &n): (&u64, &u64)| (t + (t - (second * 1000).min(t)) / 2, n);
        let mut idle = self
            .unused_in
            .range(..=stale)
            .map(|(&second, &n)| ((second * 1000 + unused_life).max(t), n));
        let mut fresh = self.unused_in.range(stale.saturating_add(1)..).map(young);
        let mut newer = self.used_in.range(cut + 1..).map(young);
        let mut older = self.used_in.range(..=cut).rev().map(old);
        // A run that has ended shows an end past any (times are ms, far below it).
        const DONE: (u64, u64) = (u64::MAX, 0);
        let mut heads = [
            idle.next().unwrap_or(DONE),
            fresh.next().unwrap_or(DONE),
            newer.next().unwrap_or(DONE),
            older.next().unwrap_or(DONE),
        ];
        let (mut seen, mut last) = (0, t);
        for _ in 0..ESTIMATE_SECONDS_SCANNED_MAX {
            let mut i = 0;
            for j in 1..heads.len() {
                if heads[j].0 < heads[i].0 {
                    i = j;
                }
            }
            let (end, n) = heads[i];
            if end == u64::MAX || (i > 0 && used_mean.is_none()) {
                return None;
            }
            heads[i] = match i {
                0 => idle.next(),
                1 => fresh.next(),
                2 => newer.next(),
                _ => older.next(),
            }
            .unwrap_or(DONE);
            seen += n;
            if seen >= k {
                return Some(end);
            }
            last = end;
        }
        // Past the seconds it may look through, the places left free `spacing` apart.
        Some(last.saturating_add((k - seen).saturating_mul(spacing)))
    }

    /// How long until `n` more admissions (the waiter's own included) have happened, from both
    /// constraints: the admission rate (the tokens in the bucket go first), and, past the free
    /// places, the ends of sessions ([`session_ends_in`](Self::session_ends_in)).
    /// The estimate is the slower of the two, the worst case their sum (both in turn) and never
    /// under a quarter more than the estimate. `None` when there is no honest figure: paused,
    /// origin down, or a full room that has never seen a session end.
    fn estimate(&self, n: u64, l: usize, now: u64) -> Option<Estimate> {
        if self.config.paused {
            return None;
        }
        let until_open_ms = self.line_opens_in_ms(l, now);
        let line_open = self.line_open(l, now);
        let secs = |ms: u128| (u128::from(until_open_ms) + ms).div_ceil(1000) as u64;
        if self.config.mode == Mode::Passthrough {
            // At the bound on sessions, a place frees only when a session ends.
            return ((self.sessions.len() as u64) < SESSIONS_PER_ROOM_MAX).then(|| Estimate {
                secs: secs(0),
                max_secs: secs(0),
            });
        }
        let rate = u128::from(self.config.admit_per_minute * self.config.rate_permille());
        if rate == 0 {
            return None;
        }
        let tokens = if line_open {
            self.bucket_units / UNITS_PER_TOKEN
        } else {
            self.config.burst()
        };
        let by_rate = u128::from(n.saturating_sub(tokens)) * 60_000_000 / rate;
        // Sessions that must end first: past the free places (and any over a lowered capacity).
        let ends = (n + self.sessions.len() as u64).saturating_sub(self.config.capacity);
        let by_turnover = match ends {
            0 => 0,
            ends => self.session_ends_in(ends, now)?,
        };
        let likely = by_rate.max(by_turnover);
        let worst = (by_rate + by_turnover).max(likely + likely / 4);
        Some(Estimate {
            secs: secs(likely),
            max_secs: secs(worst),
        })
    }

    /// How many admissions there are until the `k`-th waiter of line `l` is admitted: with
    /// strict priority, every waiter of the lanes before it first; with shares, the line's
    /// share of the admissions among the lines with waiters (no more than every other waiter
    /// first, as with a share of nothing).
    fn admissions_until(&self, l: usize, k: u64) -> u64 {
        let others = self.waiting_len() - self.line(l).len();
        match lanes::weights(&self.policy.lanes) {
            None => (0..l).map(|i| self.line(i).len()).sum::<u64>() + k,
            Some(w) if w[l] > 0 => {
                let total: u64 = (0..=self.public())
                    .filter(|&i| i == l || self.line(i).len() > 0)
                    .map(|i| w[i])
                    .sum();
                let by_share = (u128::from(k) * u128::from(total)).div_ceil(u128::from(w[l]));
                (by_share.min(u128::from(others + k))) as u64
            }
            Some(_) => others + k,
        }
    }

    /// Takes an ended session out of the admission counts, and into how long places are held.
    fn count_session_end(&mut self, s: Session, reason: EndReason, now: u64) {
        let second = s.admitted_at_ms / 1000;
        count_down(&mut self.admitted_in, &second);
        self.admitted_secs_sum -= u128::from(second);
        let unused = s.last_active_ms == s.admitted_at_ms;
        if unused {
            count_down(&mut self.unused_in, &second);
            self.unused_count -= 1;
        } else {
            count_down(&mut self.used_in, &second);
        }
        match reason {
            // Never used, it was held until its deadline, which the estimates knew: it says
            // nothing of how long a used place is kept.
            EndReason::Expired | EndReason::Unused if unused => {
                self.turnover.unused = self.turnover.unused.saturating_add(1)
            }
            EndReason::Left | EndReason::Expired | EndReason::Unused => {
                self.turnover.record(now.saturating_sub(s.admitted_at_ms))
            }
            _ => {}
        }
    }

    /// Records that a visitor's place ended: its session, if it had one.
    fn record_end(
        &mut self,
        id: VisitorId,
        seq: u64,
        reason: EndReason,
        session: Option<Session>,
        now: u64,
    ) {
        if let Some(s) = session {
            self.count_session_end(s, reason, now);
        }
        if let Some(k) = self.identity_of.remove(&id) {
            self.visitor_of.remove(&k);
        }
        self.codes.forget(&id);
        self.networks_of.remove(&id);
        if let Some(c) = self.client_of.remove(&id) {
            count_down(&mut self.places_of, &c);
            if session.is_some() {
                count_down(&mut self.sessions_of, &c);
                if self.policy.sessions_per_client_max.is_some() {
                    // Its network may take a session again: its waiters are no longer held.
                    self.held_head.clear();
                }
            }
        }
        match reason {
            EndReason::Left => self.totals.left += 1,
            EndReason::Abandoned => self.totals.abandoned += 1,
            EndReason::Expired | EndReason::Unused => self.totals.expired += 1,
            EndReason::Revoked | EndReason::Removed | EndReason::Banned => self.totals.revoked += 1,
            EndReason::Shared => {
                self.totals.revoked += 1;
                self.sessions_shared += 1;
            }
        }
        let e = Ended {
            seq,
            reason,
            at_ms: now,
        };
        self.ended.push_back((id, e));
        self.ended_index.insert(id, e);
        if self.ended.len() > ENDED_PER_ROOM_MAX {
            let (old_id, old) = self.ended.pop_front().expect("non-empty");
            if self
                .ended_index
                .get(&old_id)
                .is_some_and(|e| e.seq == old.seq)
            {
                self.ended_index.remove(&old_id);
            }
        }
    }

    // ---- commands -----------------------------------------------------------------------------

    pub fn join(
        &mut self,
        id: VisitorId,
        evidence: &JoinEvidence,
        now: u64,
        draw: &mut Step,
    ) -> Outcome {
        // One identity, one place: an identity that holds a place resumes it, from any device;
        // one whose visitor is banned is banned, whatever visitor id it comes with.
        if let Some(&held) = evidence.identity.and_then(|k| self.visitor_of.get(&k)) {
            if held != id {
                if self.holds_place(held) || self.banned(held, now) {
                    return self.join(held, &JoinEvidence::default(), now, draw);
                }
                // Its ban is over: the identity comes in as any other.
                self.forget_identity(held);
            }
        }
        if let Some(&until) = self.bans.get(&id).filter(|&&until| until > now) {
            self.pump(now, draw);
            return Outcome::Rejected(Rejection::Banned {
                until_ms: (until != u64::MAX).then_some(until),
            });
        }
        if self.renew(&id, now) {
            // An admitted visitor who joins again renews the session.
        } else if let Some(&qidx) = self.waiting.get(&id) {
            if let Err(r) = self.redeem_waiting(id, qidx, evidence, now, draw) {
                self.pump(now, draw);
                return Outcome::Rejected(r);
            }
            let qidx = *self.waiting.get(&id).expect("indexed waiter");
            self.check_in(qidx, now);
        } else if let Err(r) = self.new_place(id, evidence, now, draw) {
            return Outcome::Rejected(r);
        }
        self.pump(now, draw);
        Outcome::Visitor(self.view(id, now).expect("joined visitor has a view"))
    }

    /// A new place for `id` at the end of its line, if the room gives one.
    fn new_place(
        &mut self,
        id: VisitorId,
        evidence: &JoinEvidence,
        now: u64,
        draw: &mut Step,
    ) -> Result<(), Rejection> {
        let (line, code) = self.entry_terms(id, evidence, now, draw)?;
        let counted = evidence.client.filter(|_| self.policy.counts_clients());
        if let (Some(c), Some(max)) = (counted, self.policy.places_per_client_max) {
            if self.places_of.get(&c).copied().unwrap_or(0) >= max {
                return Err(Rejection::PlaceLimit { max });
            }
        }
        if self.policy.external_challenge.is_some() && !evidence.external_passed {
            return Err(Rejection::ChallengeRequired { work: 0 });
        }
        self.spend_challenge(evidence.challenge, now)?;
        if let Some(c) = counted {
            self.client_of.insert(id, c);
            *self.places_of.entry(c).or_insert(0) += 1;
        }
        if let Some(k) = evidence.identity.filter(|_| self.policy.identity.is_some()) {
            // An identity the visitor kept from a place it was banned from (whose ban has
            // ended) goes: a visitor holds one identity, and a replica restored from a
            // snapshot knows only that one.
            self.forget_identity(id);
            self.identity_of.insert(id, k);
            self.visitor_of.insert(k, id);
        }
        if let Some(code) = code {
            self.codes.take(code, id);
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        let slot = Slot {
            id,
            seq,
            last_seen_ms: now,
        };
        self.push_waiter(line, slot);
        self.totals.joined += 1;
        draw.note(Event::Joined {
            visitor: id,
            seq,
            lane: self.lane_name(line),
            position: self.line(line).len(),
        });
        Ok(())
    }

    /// Whether the room takes a newcomer now (open to joins, its line not full, the identity
    /// it asks given), and where: the line and the code the place takes. Lets the line move
    /// first, so that a full line is judged after admissions due.
    fn entry_terms(
        &mut self,
        id: VisitorId,
        evidence: &JoinEvidence,
        now: u64,
        draw: &mut Step,
    ) -> Result<(usize, Option<CodeHash>), Rejection> {
        if self.config.closes_at_ms.is_some_and(|t| t <= now) {
            return Err(Rejection::RoomClosed);
        }
        if self.config.mode == Mode::Reject {
            return Err(Rejection::RoomRejecting);
        }
        self.pump(now, draw);
        if self.waiting_len() >= self.config.max_waiting {
            return Err(Rejection::QueueFull);
        }
        if self.policy.identity.is_some() && evidence.identity.is_none() {
            return Err(Rejection::IdentityRequired);
        }
        self.placement(id, evidence, now)
    }

    /// The line a new place goes to, and the code whose use it takes: the lane of the code the
    /// join brings, else the lane its verified identity names, else the room's own line, which
    /// an invite-only room keeps shut.
    fn placement(
        &self,
        id: VisitorId,
        evidence: &JoinEvidence,
        now: u64,
    ) -> Result<(usize, Option<CodeHash>), Rejection> {
        if let Some(code) = evidence.code {
            let r = self.codes.check(&code, id, evidence.identity, now)?;
            return Ok((self.line_named(r.lane.as_deref()), r.fresh.then_some(code)));
        }
        let claimed = evidence
            .lane
            .as_deref()
            .filter(|_| evidence.identity.is_some())
            .map(|name| self.line_named(Some(name)))
            .filter(|&l| l != self.public());
        match claimed {
            Some(l) => Ok((l, None)),
            None if self.policy.invite_only => Err(Rejection::InviteOnly),
            None => Ok((self.public(), None)),
        }
    }

    /// A waiter who brings a code: a fresh one takes a use and moves the waiter to the end of
    /// the code's lane, if that lane goes before the waiter's; a code the waiter redeemed
    /// already, or one that would not move it forward, changes nothing and takes no use. A
    /// visitor redeems one code per place.
    fn redeem_waiting(
        &mut self,
        id: VisitorId,
        qidx: u64,
        evidence: &JoinEvidence,
        now: u64,
        draw: &mut Step,
    ) -> Result<(), Rejection> {
        let Some(code) = evidence.code else {
            return Ok(());
        };
        if self.codes.redeemed.contains_key(&id) {
            return Ok(());
        }
        let r = self.codes.check(&code, id, evidence.identity, now)?;
        let to = self.line_named(r.lane.as_deref());
        let from = self.line_of(qidx).expect("indexed waiter");
        if to >= from {
            return Ok(());
        }
        self.codes.take(code, id);
        let slot = self.take_slot(qidx).expect("indexed waiter");
        self.push_waiter(to, slot);
        draw.note(Event::Moved {
            visitor: id,
            seq: slot.seq,
            lane: self.lane_name(to),
            position: self.line(to).len(),
        });
        self.maybe_compact();
        Ok(())
    }

    /// Whether the challenge `id` is remembered as used.
    pub fn challenge_used(&self, id: &[u8; 16]) -> bool {
        self.challenge_ids.contains(id)
    }

    /// Checks the challenge a join that mints a place brings against the proof-of-work rule, and
    /// remembers it as used until it expires. Without a rule, a challenge is neither needed nor
    /// remembered.
    fn spend_challenge(
        &mut self,
        challenge: Option<ChallengeUse>,
        now: u64,
    ) -> Result<(), Rejection> {
        let Some(rule) = &self.policy.proof_of_work else {
            return Ok(());
        };
        let required = rule.work_at(self.waiting_len());
        let Some(c) = challenge else {
            return Err(Rejection::ChallengeRequired { work: required });
        };
        // Forget what has expired: an expired challenge is refused below anyway.
        while let Some(&(expires, id)) = self.challenges_used.first() {
            if expires > now {
                break;
            }
            self.challenges_used.pop_first();
            self.challenge_ids.remove(&id);
        }
        let invalid = |reason: &str| {
            Err(Rejection::ChallengeInvalid {
                reason: reason.to_string(),
            })
        };
        if c.expires_ms <= now {
            return invalid("the challenge has expired");
        }
        if c.expires_ms > now.saturating_add(CHALLENGE_TTL_MS_MAX) {
            return invalid("the challenge expires too far ahead");
        }
        // One doubling of slack: the line may have grown while the visitor was solving.
        if u64::from(c.work) * 2 < u64::from(required) || c.cost < rule.cost {
            return invalid("the challenge is easier than the room asks");
        }
        if self.challenge_ids.contains(&c.id) {
            return invalid("the challenge was used already");
        }
        if self.challenges_used.len() >= CHALLENGES_REMEMBERED_MAX {
            return Err(Rejection::LimitReached {
                what: "challenges remembered in this room".into(),
                max: CHALLENGES_REMEMBERED_MAX as u64,
            });
        }
        self.challenge_ids.insert(c.id);
        self.challenges_used.insert((c.expires_ms, c.id));
        Ok(())
    }

    /// Checks the waiter at `qidx` in: one that was away is no longer held back.
    fn check_in(&mut self, qidx: u64, now: u64) {
        let slot = self.slot(qidx).expect("indexed waiter");
        if self.away(slot.last_seen_ms, now) {
            self.held_head.clear();
        }
        self.slot_mut(qidx).expect("indexed waiter").last_seen_ms = now;
    }

    /// Renews the visitor's session, if it has one: its first use takes it out of the unused.
    fn renew(&mut self, id: &VisitorId, now: u64) -> bool {
        let Some(before) = self.sessions.touch(id, now) else {
            return false;
        };
        if before.last_active_ms == before.admitted_at_ms && now != before.admitted_at_ms {
            let second = before.admitted_at_ms / 1000;
            count_down(&mut self.unused_in, &second);
            self.unused_count -= 1;
            *self.used_in.entry(second).or_insert(0) += 1;
        }
        true
    }

    /// Records activity: renews a session or checks a waiter in. Returns false for unknown visitors.
    fn touch_one(&mut self, id: VisitorId, now: u64) -> Option<bool> {
        if self.renew(&id, now) {
            Some(true)
        } else if let Some(&qidx) = self.waiting.get(&id) {
            self.check_in(qidx, now);
            Some(false)
        } else {
            None
        }
    }

    pub fn heartbeat(&mut self, id: VisitorId, now: u64, draw: &mut Step) -> Outcome {
        self.touch_one(id, now);
        self.pump(now, draw);
        match self.view(id, now) {
            Some(v) => Outcome::Visitor(v),
            None => Outcome::Rejected(Rejection::UnknownVisitor),
        }
    }

    pub fn touch(&mut self, ids: &[VisitorId], now: u64, draw: &mut Step) -> Outcome {
        self.touch_visits(ids.iter().map(|&id| (id, None)), now, draw)
    }

    /// [`touch`](Self::touch), with the network each visit came from: a session used from one
    /// network more than the policy allows ends as shared.
    pub fn touch_from(
        &mut self,
        visits: &[(VisitorId, ClientKey)],
        now: u64,
        draw: &mut Step,
    ) -> Outcome {
        self.touch_visits(visits.iter().map(|&(id, net)| (id, Some(net))), now, draw)
    }

    /// Records each visit (and, while the policy counts them, the network it came from), then
    /// lets the line move.
    fn touch_visits(
        &mut self,
        visits: impl Iterator<Item = (VisitorId, Option<ClientKey>)>,
        now: u64,
        draw: &mut Step,
    ) -> Outcome {
        let (mut renewed, mut checked_in, mut missed) = (0, 0, 0);
        let max = self.policy.networks_per_session_max;
        let window_ms = self.policy.networks_window_secs.map(|s| s * 1000);
        for (id, net) in visits {
            if let (Some(max), Some(net), true) = (max, net, self.sessions.get(&id).is_some()) {
                let nets = self.networks_of.entry(id).or_default();
                if let Some(w) = window_ms {
                    nets.retain(|&(_, seen)| seen + w > now);
                }
                if let Some(seen) = nets.iter_mut().find(|(n, _)| *n == net) {
                    seen.1 = now;
                } else if nets.len() as u64 >= max {
                    self.end(id, EndReason::Shared, now, draw);
                    missed += 1;
                    continue;
                } else {
                    nets.push((net, now));
                }
            }
            match self.touch_one(id, now) {
                Some(true) => renewed += 1,
                Some(false) => checked_in += 1,
                None => missed += 1,
            }
        }
        self.pump(now, draw);
        Outcome::Touched {
            renewed,
            checked_in,
            missed,
        }
    }

    /// Ends a visitor's place or session with `reason`. Ended visitors get their view back;
    /// unknown ones a rejection.
    pub fn end(&mut self, id: VisitorId, reason: EndReason, now: u64, draw: &mut Step) -> Outcome {
        if let Some(s) = self.sessions.remove(&id) {
            self.record_end(id, s.seq, reason, Some(s), now);
            draw.note(Event::Ended {
                visitor: id,
                seq: s.seq,
                reason,
                admitted: true,
            });
            self.maybe_compact_session_due();
        } else if let Some(qidx) = self.waiting.remove(&id) {
            let slot = self.take_slot(qidx).expect("indexed waiter");
            self.record_end(id, slot.seq, reason, None, now);
            draw.note(Event::Ended {
                visitor: id,
                seq: slot.seq,
                reason,
                admitted: false,
            });
            self.maybe_compact();
        } else if !self.ended_index.contains_key(&id) {
            self.pump(now, draw);
            return Outcome::Rejected(Rejection::UnknownVisitor);
        }
        self.pump(now, draw);
        Outcome::Visitor(self.view(id, now).expect("ended visitor has a view"))
    }

    /// Bans a visitor until `until_ms` (`None`: while the room exists), ending its place or
    /// session. Returns how many it ended (0 or 1).
    pub fn ban(
        &mut self,
        id: VisitorId,
        until_ms: Option<u64>,
        now: u64,
        draw: &mut Step,
    ) -> Outcome {
        let until = until_ms.unwrap_or(u64::MAX);
        if !self.bans.contains_key(&id) && self.bans.len() >= BANS_PER_ROOM_MAX {
            let over: Vec<VisitorId> = self
                .bans
                .iter()
                .filter(|&(_, &u)| u <= now)
                .map(|(&v, _)| v)
                .collect();
            for v in over {
                self.bans.remove(&v);
                if !self.holds_place(v) {
                    self.forget_identity(v);
                }
            }
            if self.bans.len() >= BANS_PER_ROOM_MAX {
                self.pump(now, draw);
                return Outcome::Rejected(Rejection::LimitReached {
                    what: "bans in this room".into(),
                    max: BANS_PER_ROOM_MAX as u64,
                });
            }
        }
        self.bans.insert(id, until);
        let holds = self.holds_place(id);
        if holds {
            let identity = self.identity_of.get(&id).copied();
            self.end(id, EndReason::Banned, now, draw);
            // The identity stays with the banned visitor: joining again with it under a new
            // visitor id (a cleared cookie) meets the ban.
            if let Some(k) = identity {
                self.identity_of.insert(id, k);
                self.visitor_of.insert(k, id);
            }
        } else {
            self.pump(now, draw);
        }
        Outcome::Count(u64::from(holds))
    }

    /// Lifts a ban; 1 if there was one in force, else 0.
    pub fn unban(&mut self, id: VisitorId, now: u64, draw: &mut Step) -> Outcome {
        let lifted = self.bans.remove(&id).is_some_and(|until| until > now);
        if !self.holds_place(id) {
            self.forget_identity(id);
        }
        self.pump(now, draw);
        Outcome::Count(u64::from(lifted))
    }

    /// Whether the visitor waits or is admitted.
    fn holds_place(&self, id: VisitorId) -> bool {
        self.sessions.get(&id).is_some() || self.waiting.contains_key(&id)
    }

    /// Whether a ban of the visitor is in force.
    fn banned(&self, id: VisitorId, now: u64) -> bool {
        self.bans.get(&id).is_some_and(|&until| until > now)
    }

    /// Drops the visitor's identity (it holds no place).
    fn forget_identity(&mut self, id: VisitorId) {
        if let Some(k) = self.identity_of.remove(&id) {
            self.visitor_of.remove(&k);
        }
    }

    pub fn revoke_all(&mut self, now: u64, draw: &mut Step) -> Outcome {
        let all = self.sessions.take_all();
        for &(id, s) in &all {
            self.record_end(id, s.seq, EndReason::Revoked, Some(s), now);
        }
        self.session_due.clear();
        draw.note(Event::RevokedAll {
            sessions: all.len() as u64,
        });
        self.pump(now, draw);
        Outcome::Count(all.len() as u64)
    }

    pub fn force_admit(&mut self, count: u64, now: u64, draw: &mut Step) -> Outcome {
        let n = self.admit_some(now, draw, count, true);
        self.pump(now, draw);
        Outcome::Count(n)
    }

    /// Replaces the config (already validated). The bucket keeps its tokens up to the new burst.
    pub fn reconfigure(&mut self, config: RoomConfig, now: u64, draw: &mut Step) {
        if config.paused != self.config.paused {
            self.origin.paused_by_origin = false;
        }
        if config.closes_at_ms != self.config.closes_at_ms {
            self.closed_noted = false;
        }
        self.held_head.clear();
        self.config = config;
        self.bucket_units = self.bucket_units.min(self.config.burst() * UNITS_PER_TOKEN);
        if self.config.opens_at_ms.is_some_and(|t| t > now) {
            self.opened = false;
        } else if !self.opened {
            self.open(now, draw);
        }
        self.pump(now, draw);
    }

    /// Records measurements of the origin, and changes the health (and, by the rule, pauses or
    /// resumes the room) when the verdict has held long enough.
    pub fn report_origin(
        &mut self,
        source: HealthSource,
        samples: &OriginSamples,
        now: u64,
        draw: &mut Step,
    ) -> Outcome {
        let Some(rule) = self.policy.origin.clone() else {
            return Outcome::Room(self.room_view(now));
        };
        if let Some(health) = self.origin.record(&rule, samples, self.config.health, now) {
            self.set_health(health, None);
            let mut paused = None;
            if rule.auto_pause && health == Health::Down && !self.config.paused {
                self.config.paused = true;
                self.origin.paused_by_origin = true;
                paused = Some(true);
            } else if health != Health::Down && self.origin.paused_by_origin {
                self.config.paused = false;
                self.origin.paused_by_origin = false;
                paused = Some(false);
            }
            self.origin.last_change = Some(HealthChange {
                health,
                source,
                at_ms: now,
                window: self.origin.window(&rule, now),
                window_secs: rule.window_secs,
                paused,
            });
            self.pump(now, draw);
        }
        Outcome::Room(self.room_view(now))
    }

    pub fn set_health(&mut self, health: Health, slow_factor_permille: Option<u64>) {
        self.config.health = health;
        if let Some(f) = slow_factor_permille {
            self.config.slow_factor_permille = f;
        }
    }

    // ---- queries ------------------------------------------------------------------------------

    pub fn view(&self, id: VisitorId, now: u64) -> Option<VisitorView> {
        if let Some(s) = self.sessions.get(&id) {
            return Some(VisitorView {
                visitor: id,
                seq: s.seq,
                state: VisitorState::Admitted {
                    admitted_at_ms: s.admitted_at_ms,
                    last_active_ms: s.last_active_ms,
                    expires_at_ms: s.last_active_ms + self.config.session_ttl_secs * 1000,
                },
            });
        }
        if let Some(&qidx) = self.waiting.get(&id) {
            return Some(self.waiter_view(id, qidx, now));
        }
        self.ended_index.get(&id).map(|e| VisitorView {
            visitor: id,
            seq: e.seq,
            state: VisitorState::Ended {
                reason: e.reason,
                at_ms: e.at_ms,
            },
        })
    }

    /// What a waiter at `qidx` is told: its place (where the room shows it), its line, who is
    /// ahead in the lines before it, and how long it may wait.
    fn waiter_view(&self, id: VisitorId, qidx: u64, now: u64) -> VisitorView {
        let l = self.line_of(qidx).expect("indexed waiter");
        let queue = self.line(l);
        let slot = queue.get(qidx).expect("indexed waiter");
        let rank = queue.rank(qidx);
        let waiting = self.waiting_len();
        let lottery = self.line_lottery(l);
        // Held by its network's sessions: no estimate is honest until one of them ends.
        let held = self.network_full(id);
        // Positions before a shuffled opening are not kept: they are not shown, and the
        // estimate is the line's, as a lottery's, whatever the order of joining.
        let shuffled = l == self.public() && self.shuffles_at_open();
        // Admissions until this waiter's turn, in line order (lines not drawn by lot).
        let until = (!lottery).then(|| self.admissions_until(l, rank + 1));
        let estimate = if held {
            None
        } else {
            self.waiter_estimate(l, until, lottery || shuffled, now)
        };
        let line = &self.policy.line;
        // Waiters of the other lines admitted before this one's turn: with strict priority
        // every waiter of the lanes before it, with shares as many as the shares let in
        // meanwhile (what the estimate counts too).
        let ahead: u64 = match until {
            Some(until) => until - (rank + 1),
            None => (0..l).map(|i| self.line(i).len()).sum(),
        };
        VisitorView {
            visitor: id,
            seq: slot.seq,
            state: VisitorState::Waiting {
                position: (!lottery && !shuffled && line.show_positions).then_some(rank + 1),
                lane: self.lane_name(l),
                ahead: (line.show_waiting && !self.lanes.is_empty()).then_some(ahead),
                provisional: shuffled,
                held,
                waiting: line.show_waiting.then_some(waiting),
                next_check_secs: line.next_check_secs(waiting, self.config.waiter_ttl_secs),
                eta_secs: estimate.map(|e| e.secs),
                eta_max_secs: estimate.map(|e| e.max_secs),
                last_seen_ms: slot.last_seen_ms,
                notice: self.notice.as_ref().map(|(text, _)| text.clone()),
            },
        }
    }

    /// The wait of a waiter of line `l` with `until` admissions before its turn. In a line
    /// drawn by lot (or before a shuffled opening), each draw picks one waiter of the line: an
    /// even chance after half the line has been drawn, nine in ten after nine tenths (late
    /// joiners only lengthen it).
    fn waiter_estimate(
        &self,
        l: usize,
        until: Option<u64>,
        drawn: bool,
        now: u64,
    ) -> Option<Estimate> {
        if !drawn {
            return self.estimate(until.expect("a line not drawn by lot"), l, now);
        }
        let in_line = self.line(l).len();
        self.estimate(self.admissions_until(l, in_line.div_ceil(2)), l, now)
            .zip(self.estimate(self.admissions_until(l, (in_line * 9).div_ceil(10)), l, now))
            .map(|(even, likely)| Estimate {
                secs: even.secs,
                max_secs: likely.max_secs,
            })
    }

    pub fn room_view(&self, now: u64) -> RoomView {
        // What the newest waiter of the room's own line is told (FIFO only: a lottery's
        // estimate is a chance, not a place).
        let public = self.public();
        let newest = self.line(public).len();
        let newest_eta_secs = (newest > 0 && !self.line_lottery(public))
            .then(|| self.estimate(self.admissions_until(public, newest), public, now))
            .flatten()
            .map(|e| e.secs);
        RoomView {
            newest_eta_secs,
            text_color: self.policy.text_color.clone(),
            challenges_remembered: self.challenges_used.len() as u64,
            name: self.name.clone(),
            config: self.config.clone(),
            created_at_ms: self.created_at_ms,
            open: self.opened,
            closed: self.config.closes_at_ms.is_some_and(|t| t <= now),
            waiting: self.waiting_len(),
            active: self.sessions.len() as u64,
            totals: self.totals,
            admitted_last_minute: self.admitted_last_minute(now),
            eta_rate_per_minute: self.eta_rate_milli() / 1000,
            bucket_tokens: self.bucket_units / UNITS_PER_TOKEN,
            next_seq: self.next_seq,
            sessions_shared: self.sessions_shared,
            health_change: self.origin.last_change.clone(),
            paused_by_origin: self.origin.paused_by_origin,
            origin_window: self
                .policy
                .origin
                .as_ref()
                .map(|rule| self.origin.window(rule, now)),
            lanes: self
                .policy
                .lanes
                .iter()
                .zip(&self.lanes)
                .enumerate()
                .map(|(l, (rule, line))| LaneView {
                    name: rule.name.clone(),
                    open: self.line_open(l, now),
                    opens_at_ms: rule.opens_at_ms,
                    waiting: line.queue.len(),
                    joined: line.joined,
                    admitted: line.admitted,
                    redeemed: self
                        .codes
                        .batches
                        .values()
                        .filter(|b| b.batch.lane.as_deref() == Some(rule.name.as_str()))
                        .map(|b| b.used)
                        .sum(),
                })
                .collect(),
            codes: self.codes.codes.len() as u64,
            notice: self.notice.as_ref().map(|(text, set_at_ms)| Notice {
                text: text.clone(),
                set_at_ms: *set_at_ms,
            }),
            draw: self.draws.epoch.map(|e| DrawView {
                commitment: e.commitment,
                since_index: e.start.index,
            }),
        }
    }

    /// The earliest log time at which something in this room changes without a client command.
    pub fn next_due(&self, now: u64) -> Option<u64> {
        let mut due: Option<u64> = None;
        let mut consider = |t: u64| due = Some(due.map_or(t, |d| d.min(t)));
        if !self.opened {
            consider(self.config.opens_at_ms.unwrap_or(now));
        }
        // The closing is a ledger record (and a webhook): a tick when it comes.
        if let Some(t) = self.config.closes_at_ms.filter(|&t| t > now) {
            consider(t);
        }
        // So is a phase's start, which may change who is admitted at once.
        let started = crate::phases::started(&self.policy.phases, self.bucket_at_ms).len();
        if let Some(p) = self.policy.phases.get(started) {
            consider(p.starts_at_ms.max(now));
        }
        for (rule, line) in self.policy.lanes.iter().zip(&self.lanes) {
            match rule.opens_at_ms {
                Some(t) if t > now && line.queue.len() > 0 => consider(t),
                _ => {}
            }
        }
        if let Some((t, _, _)) = self.session_due.peek() {
            consider(t + self.config.session_ttl_secs * 1000);
        }
        if let Some((t, _)) = self.waiter_due.peek() {
            consider(t + self.waiter_keep_ms());
        }
        if let Some(&(deadline, _, _)) = self.unused_due.peek() {
            consider(deadline);
        }
        if !self.config.paused
            && !self.held_back
            && (0..=self.public()).any(|l| self.line(l).len() > 0 && self.line_open(l, now))
            && (self.sessions.len() as u64) < self.sessions_max()
        {
            if self.config.mode == Mode::Passthrough {
                consider(now);
            } else {
                let per_ms = self.config.admit_per_minute * self.config.rate_permille();
                // As `admit_some`: a room whose origin is down admits nobody, tokens or not.
                if self.config.rate_permille() > 0 && self.bucket_units >= UNITS_PER_TOKEN {
                    consider(now);
                } else if per_ms > 0 {
                    let need = UNITS_PER_TOKEN - self.bucket_units;
                    consider(self.bucket_at_ms + need.div_ceil(per_ms));
                }
            }
        }
        due
    }

    /// Approximate heap bytes held by the waiting line and its indexes.
    pub fn waiter_heap_bytes(&self) -> usize {
        let map = self.waiting.heap_bytes();
        let heap = self.waiter_due.heap_bytes();
        map + heap
            + (0..=self.public())
                .map(|l| self.line(l).heap_bytes())
                .sum::<usize>()
    }
}
