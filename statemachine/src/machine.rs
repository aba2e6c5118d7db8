//! The whole replicated state: rooms, pools, the log clock and the last applied position.

use crate::command::{Command, Proposal};
use crate::draw::{DrawKey, DrawPosition, Step};
use crate::ledger::{Chain, Event, Record};
use crate::limits::*;
use crate::origin::{HealthChange, HealthSource, OriginRule, OriginSamples};
use crate::outcome::{EndReason, Outcome, PoolView, Rejection, RoomView, VisitorView};
use crate::policy::JoinEvidence;
use crate::pool::{self, Pool};
use crate::room::Room;
use crate::types::{validate_name, VisitorId};
use std::collections::BTreeMap;

/// A position in the Raft log.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct LogPosition {
    /// Term.
    pub term: u64,
    /// Index.
    pub index: u64,
}

/// One waiter in a queue listing.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct QueueEntry {
    /// 1-based place in admission order within its lane.
    pub position: u64,
    /// The priority lane (`None`: the room's own line).
    pub lane: Option<String>,
    /// The visitor.
    pub visitor: VisitorId,
    /// Its sequence number.
    pub seq: u64,
    /// Last check-in, log time ms.
    pub last_seen_ms: u64,
}

/// The deterministic room engine. Apply the same entries in the same order on any replica and
/// the state (and its [`digest`](StateMachine::digest)) is the same.
/// Whose status changed in a way a waiting page must show at once (its wait ended, or the
/// room's notice changed): what wakes the watches of the visitors concerned, instead of each
/// watch reading its visitor's place over and over. The line moving (places, estimates) is not
/// here: a watch reads that at its own pace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Woken {
    /// One visitor of a room: admitted, or its place or session ended.
    Visitor {
        /// The room.
        room: String,
        /// The visitor.
        visitor: VisitorId,
    },
    /// Everyone in a room (its notice changed, or it was deleted).
    Room(String),
    /// Everyone (the state was replaced wholesale, by a snapshot).
    All,
}

impl Woken {
    /// Whom `event` in `room` concerns at once, if anyone.
    fn of(room: &str, event: &Event) -> Option<Self> {
        match event {
            Event::Admitted { visitor, .. } | Event::Ended { visitor, .. } => {
                Some(Woken::Visitor {
                    room: room.to_string(),
                    visitor: *visitor,
                })
            }
            Event::Notice { .. } | Event::Deleted { .. } | Event::PhaseStarted { .. } => {
                Some(Woken::Room(room.to_string()))
            }
            _ => None,
        }
    }
}

/// What a join to a room must bring, read from applied state at the edge.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JoinTerms {
    /// The room's entry policy, shared with the room (taking it copies nothing).
    pub policy: std::sync::Arc<crate::EntryPolicy>,
    /// How many wait in line now (which the proof-of-work rule may count).
    pub waiting: u64,
    /// When the room was made (log time, ms): what tells a room from an older one of its name.
    pub created_at_ms: u64,
}

#[derive(Debug, Default)]
pub struct StateMachine {
    pub(crate) rooms: BTreeMap<String, Room>,
    pub(crate) pools: BTreeMap<String, Pool>,
    /// The log clock: the largest leader time seen, ms since the epoch.
    pub(crate) clock_ms: u64,
    pub(crate) last_applied: Option<LogPosition>,
    /// Operator sessions ended by sign-out, each until it would have ended anyway (log time).
    pub(crate) credentials_ended: BTreeMap<[u8; 16], u64>,
    /// The ledger's count and chain.
    pub(crate) ledger: Chain,
    /// Each webhook's delivery position.
    pub(crate) webhook_cursors: BTreeMap<String, crate::ledger::RecordKey>,
    /// Not state: the key draw secrets derive from (node configuration).
    pub(crate) draw_key: DrawKey,
    /// Not state: the ledger records made since they were last taken, when kept.
    pub(crate) ledger_out: Option<Vec<Record>>,
    /// Not state: whose status changed in a way a waiting page shows at once, since last
    /// taken, when kept.
    pub(crate) woken_out: Option<Vec<Woken>>,
    /// Not state: the operator whose command is being applied.
    pub(crate) operator: Option<String>,
    /// Not state: records made by the command being applied so far.
    pub(crate) records_of_command: u32,
    /// Not state: where a record is encoded for the chain (kept to save an allocation each).
    pub(crate) record_buf: Vec<u8>,
    /// Not state: entries applied since the last whole check (debug builds).
    #[cfg(debug_assertions)]
    pub(crate) unchecked: usize,
}

/// Refuses a note's `text` longer than `max` bytes or of more than one line.
fn one_line(field: &'static str, text: &str, max: usize) -> Result<(), Rejection> {
    if text.len() > max || text.chars().any(char::is_control) {
        return Err(Rejection::invalid(
            field,
            format!("at most {max} bytes of one line of text"),
        ));
    }
    Ok(())
}

/// Checks how many waiters a force-admit asks for (what the edge checks too, before anything
/// is written).
pub fn check_force_admit(count: u64) -> Result<(), Rejection> {
    if count == 0 || count > FORCE_ADMIT_MAX {
        return Err(Rejection::invalid(
            "count",
            format!("must be between 1 and {FORCE_ADMIT_MAX}"),
        ));
    }
    Ok(())
}

/// Whether an ended credential is a dashboard session's: their random ids have the first bit
/// set, staff tokens' never ([`SESSIONS_ENDED_MAX`]).
pub fn is_session_credential(id: &[u8; 16]) -> bool {
    id[0] & 0x80 != 0
}

/// The owner tag of a dashboard session's id: bytes 1 to 4, which the node that signs the
/// operator in sets from the operator's name ([`session_id`]), so that the state machine can
/// bound each operator's ended sessions ([`SESSIONS_ENDED_PER_OPERATOR_MAX`]).
pub fn session_owner(id: &[u8; 16]) -> [u8; 4] {
    [id[1], id[2], id[3], id[4]]
}

/// A dashboard session's id for operator `name`: the session bit, the owner tag, and `random`'s
/// last 11 bytes.
pub fn session_id(name: &str, random: [u8; 16]) -> [u8; 16] {
    let tag = blake3::derive_key("sluice 2026-12 session owner v1", name.as_bytes());
    let mut id = random;
    id[0] |= 0x80;
    id[1..5].copy_from_slice(&tag[..4]);
    id
}

impl StateMachine {
    /// An empty machine.
    pub fn new() -> Self {
        Self::default()
    }

    /// The log clock (ms since the epoch): never goes backwards.
    pub fn clock_ms(&self) -> u64 {
        self.clock_ms
    }

    /// The last entry applied.
    pub fn last_applied(&self) -> Option<LogPosition> {
        self.last_applied
    }

    /// Sets the key room draw secrets derive from. Every replica must hold the same one; it is
    /// configuration, not state, and is set again on a machine restored from a snapshot.
    pub fn set_draw_key(&mut self, key: DrawKey) {
        self.draw_key = key;
    }

    /// The draw key (to carry over to a machine restored from a snapshot).
    pub fn draw_key(&self) -> DrawKey {
        self.draw_key
    }

    /// Keeps the ledger records applies make, for [`take_ledger`](Self::take_ledger) (off by
    /// default: the chain is kept either way).
    pub fn keep_ledger(&mut self, keep: bool) {
        self.ledger_out = keep.then(Vec::new);
    }

    /// The ledger records made since the last call, in order.
    pub fn take_ledger(&mut self) -> Vec<Record> {
        self.ledger_out
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// Keeps, for [`take_woken`](Self::take_woken), whose status applies change in a way a
    /// waiting page shows at once (off by default).
    pub fn keep_woken(&mut self, keep: bool) {
        self.woken_out = keep.then(Vec::new);
    }

    /// Whose status changed at once since the last call, in order.
    pub fn take_woken(&mut self) -> Vec<Woken> {
        self.woken_out
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// The ledger's count and chain.
    pub fn ledger_chain(&self) -> Chain {
        self.ledger
    }

    /// Where a webhook's delivery stands.
    pub fn webhook_cursor(&self, hook: &str) -> Option<crate::ledger::RecordKey> {
        self.webhook_cursors.get(hook).copied()
    }

    /// Adds a command's events to the ledger.
    fn record(&mut self, pos: DrawPosition, room: &str, events: Vec<Event>) {
        for event in events {
            if let Some(out) = self.woken_out.as_mut() {
                if let Some(w) = Woken::of(room, &event) {
                    out.push(w);
                }
            }
            let r = Record {
                index: pos.index,
                sub: pos.sub as u32,
                n: self.records_of_command,
                time_ms: self.clock_ms,
                room: room.to_string(),
                by: self.operator.clone(),
                event,
            };
            self.records_of_command += 1;
            let mut buf = std::mem::take(&mut self.record_buf);
            buf.clear();
            let buf = postcard::to_extend(&r, buf).expect("encoding into a Vec cannot fail");
            self.ledger.fold(&buf);
            self.record_buf = buf;
            if let Some(out) = self.ledger_out.as_mut() {
                out.push(r);
            }
        }
    }

    fn step(&mut self, term: u64, index: u64, time_ms: u64) {
        if let Some(last) = self.last_applied {
            assert!(
                index > last.index && term >= last.term,
                "entries applied out of order: {term}/{index} after {}/{}",
                last.term,
                last.index
            );
        }
        self.last_applied = Some(LogPosition { term, index });
        // A log time past the latest instant anything accepts (the year 2400) is read as that
        // instant: every deadline is then a sum that cannot overflow, whatever an entry says.
        self.clock_ms = self.clock_ms.max(time_ms.min(INSTANT_MS_MAX));
    }

    /// Records an entry with no commands (a Raft blank or membership entry).
    pub fn apply_empty(&mut self, term: u64, index: u64) {
        let clock = self.clock_ms;
        self.step(term, index, clock);
    }

    /// Applies one log entry and returns one outcome per command.
    pub fn apply(&mut self, term: u64, index: u64, proposal: &Proposal) -> Vec<Outcome> {
        assert!(
            proposal.commands.len() <= COMMANDS_PER_PROPOSAL_MAX,
            "oversized proposal"
        );
        self.step(term, index, proposal.time_ms);
        let outcomes = proposal
            .commands
            .iter()
            .enumerate()
            .map(|(sub, cmd)| {
                self.apply_command(
                    DrawPosition {
                        term,
                        index,
                        sub: sub as u64,
                    },
                    cmd,
                )
            })
            .collect::<Vec<_>>();
        #[cfg(debug_assertions)]
        self.check_small();
        outcomes
    }

    /// Checks the whole machine ([`check`](Self::check)) in debug builds (tests, the
    /// simulation): after every entry while its rooms hold at most
    /// [`DEBUG_CHECK_PLACES_PER_APPLY`] places, ended places and expiry entries, and as often as
    /// costs that much per entry on average when they hold more, so that a test that builds a
    /// large room does not pay for a whole check on every entry.
    #[cfg(debug_assertions)]
    fn check_small(&mut self) {
        let size: usize = self.rooms.values().map(Room::check_size).sum();
        self.unchecked += 1;
        if self.unchecked * DEBUG_CHECK_PLACES_PER_APPLY >= size {
            self.unchecked = 0;
            if let Err(e) = self.check() {
                panic!("a broken state after {:?}: {e}", self.last_applied);
            }
        }
    }

    /// Checks every index the machine derives from its state against a rebuild from its
    /// source, as a replica restored from a snapshot would rebuild it: `Err` names the first
    /// that disagrees. O(size of the state).
    pub fn check(&self) -> Result<(), String> {
        for (name, room) in &self.rooms {
            if name != &room.name {
                return Err(format!("room {} kept under {name}", room.name));
            }
            room.check()?;
        }
        if self.credentials_ended.len() > CREDENTIALS_ENDED_MAX {
            return Err("too many ended credentials".into());
        }
        Ok(())
    }

    fn apply_command(&mut self, pos: DrawPosition, cmd: &Command) -> Outcome {
        self.records_of_command = 0;
        match self.try_apply(pos, cmd) {
            Ok(o) => o,
            Err(r) => Outcome::Rejected(r),
        }
    }

    fn room_mut<'a>(&'a mut self, name: &str) -> Result<&'a mut Room, Rejection> {
        validate_name("room", name)?;
        self.rooms.get_mut(name).ok_or(Rejection::RoomNotFound)
    }

    fn pool_mut<'a>(&'a mut self, name: &str) -> Result<&'a mut Pool, Rejection> {
        validate_name("pool", name)?;
        self.pools.get_mut(name).ok_or(Rejection::PoolNotFound)
    }

    /// Applies one command: the room commands through [`Self::room_op`], the others each by
    /// their own step.
    fn try_apply(&mut self, pos: DrawPosition, cmd: &Command) -> Result<Outcome, Rejection> {
        use Command::*;
        match cmd {
            CreateRoom { .. } | PutRoom { .. } | UpdateRoom { .. } | DeleteRoom { .. } => {
                self.room_lifecycle(pos, cmd)
            }
            Join { .. }
            | JoinWith { .. }
            | SetEntryPolicy { .. }
            | Heartbeat { .. }
            | Leave { .. }
            | Revoke { .. }
            | Touch { .. }
            | TouchFrom { .. }
            | RevokeAll { .. }
            | ForceAdmit { .. }
            | Pause { .. }
            | Resume { .. }
            | SetMode { .. }
            | SetHealth { .. }
            | ReportOrigin { .. }
            | Ban { .. }
            | Unban { .. }
            | CreateCodes { .. }
            | AddCodes { .. }
            | SetNotice { .. }
            | EndCodes { .. } => self.room_command(pos, cmd),
            PutPool { .. }
            | DeletePool { .. }
            | PoolAssign { .. }
            | PoolRelease { .. }
            | PoolReport { .. } => self.pool_command(cmd),
            EndCredential { .. }
            | NoteClusterChange { .. }
            | SetWebhookCursor { .. }
            | NoteStaffToken { .. }
            | RevokeStaffToken { .. }
            | NoteRoomChange { .. } => self.cluster_command(cmd),
            AsOperator { operator, command } => self.as_operator(pos, operator, command),
            Tick => Ok(self.tick(pos)),
        }
    }

    /// A command that addresses one existing room: the room's time advances, the command acts,
    /// then what it changed settles (admissions pumped, draws revealed, events recorded).
    fn room_op(
        &mut self,
        pos: DrawPosition,
        name: &str,
        act: &mut dyn FnMut(&mut Room, &mut Step) -> Outcome,
    ) -> Result<Outcome, Rejection> {
        let (now, key) = (self.clock_ms, self.draw_key);
        let room = self.room_mut(name)?;
        let before = room.signals();
        let mut step = Step::new(pos, name, room.draw_start().map(|s| (key, s)));
        room.advance(now, &mut step);
        let out = act(room, &mut step);
        room.settle(Some(before), &key, now, &mut step);
        if let Err(e) = room.check_cheap() {
            panic!("a broken room after {pos:?}: {e}");
        }
        self.record(pos, name, step.events);
        Ok(out)
    }

    /// Creates, replaces, reconfigures or deletes a room.
    fn room_lifecycle(&mut self, pos: DrawPosition, cmd: &Command) -> Result<Outcome, Rejection> {
        use Command::*;
        let (now, key) = (self.clock_ms, self.draw_key);
        match cmd {
            CreateRoom { room, config }
            | PutRoom { room, config }
            | UpdateRoom { room, config } => {
                validate_name("room", room)?;
                config.validate()?;
                let exists = self.rooms.contains_key(room.as_str());
                match (cmd, exists) {
                    (CreateRoom { .. }, true) => return Err(Rejection::RoomExists),
                    (UpdateRoom { .. }, false) => return Err(Rejection::RoomNotFound),
                    (_, false) if self.rooms.len() >= ROOMS_MAX => {
                        return Err(Rejection::LimitReached {
                            what: "rooms".into(),
                            max: ROOMS_MAX as u64,
                        })
                    }
                    _ => {}
                }
                let r = self
                    .rooms
                    .entry(room.clone())
                    .or_insert_with(|| Room::new(room.clone(), config.clone(), now));
                let before = exists.then(|| r.signals());
                let mut step = Step::new(pos, room, r.draw_start().map(|s| (key, s)));
                if !r.draws.v2 {
                    // New rooms, and older ones when reconfigured, commit to a draw secret.
                    r.begin_draws(&key, &mut step);
                }
                r.advance(now, &mut step);
                r.reconfigure(config.clone(), now, &mut step);
                r.settle(before, &key, now, &mut step);
                let view = r.room_view(now);
                self.record(pos, room, step.events);
                Ok(Outcome::Room(view))
            }
            DeleteRoom { room } => {
                self.room_mut(room)?;
                let mut r = self.rooms.remove(room.as_str()).expect("checked above");
                let (waiting, active) = (r.waiting_len(), r.sessions.len() as u64);
                let mut step = Step::new(pos, room, None);
                r.reveal_draws(&key, &mut step);
                step.note(Event::Deleted { waiting, active });
                self.record(pos, room, step.events);
                Ok(Outcome::RoomDeleted { waiting, active })
            }
            _ => unreachable!("try_apply dispatches only room creation and deletion here"),
        }
    }

    /// The commands that act on one room's visitors, line, codes and settings (validated here,
    /// applied through [`Self::room_op`]).
    fn room_command(&mut self, pos: DrawPosition, cmd: &Command) -> Result<Outcome, Rejection> {
        use Command::*;
        let now = self.clock_ms;
        match cmd {
            Join { room, visitor } => self.room_op(pos, room, &mut |r, d| {
                r.join(*visitor, &JoinEvidence::default(), now, d)
            }),
            JoinWith {
                room,
                visitor,
                evidence,
            } => {
                let evidence = evidence
                    .decode()
                    .map_err(|e| Rejection::invalid("evidence", e.to_string()))?;
                self.room_op(pos, room, &mut |r, d| r.join(*visitor, &evidence, now, d))
            }
            SetEntryPolicy { room, policy } => {
                let encoded = policy;
                let policy = encoded
                    .decode()
                    .map_err(|e| Rejection::invalid("entry", e.to_string()))?;
                policy.validate()?;
                self.room_op(pos, room, &mut |r, d| {
                    r.set_policy(policy.clone(), encoded, now, d)
                })
            }
            Heartbeat { room, visitor } => {
                self.room_op(pos, room, &mut |r, d| r.heartbeat(*visitor, now, d))
            }
            Leave { room, visitor } => self.room_op(pos, room, &mut |r, d| {
                r.end(*visitor, EndReason::Left, now, d)
            }),
            Revoke { room, visitor } => self.room_op(pos, room, &mut |r, d| {
                r.end(*visitor, EndReason::Revoked, now, d)
            }),
            Touch { room, visitors } => {
                if visitors.len() > TOUCH_BATCH_MAX {
                    return Err(Rejection::invalid(
                        "visitors",
                        format!("{} visitors, at most {TOUCH_BATCH_MAX}", visitors.len()),
                    ));
                }
                self.room_op(pos, room, &mut |r, d| r.touch(visitors, now, d))
            }
            TouchFrom { room, visits } => {
                if visits.len() > TOUCH_BATCH_MAX {
                    return Err(Rejection::invalid(
                        "visits",
                        format!("{} visits, at most {TOUCH_BATCH_MAX}", visits.len()),
                    ));
                }
                self.room_op(pos, room, &mut |r, d| r.touch_from(visits, now, d))
            }
            RevokeAll { room } => self.room_op(pos, room, &mut |r, d| r.revoke_all(now, d)),
            ForceAdmit { room, count } => {
                check_force_admit(*count)?;
                self.room_op(pos, room, &mut |r, d| r.force_admit(*count, now, d))
            }
            Pause { room } | Resume { room } => {
                let paused = matches!(cmd, Pause { .. });
                self.room_op(pos, room, &mut |r, d| {
                    r.config.paused = paused;
                    r.origin.paused_by_origin = false;
                    r.pump(now, d);
                    Outcome::Room(r.room_view(now))
                })
            }
            SetMode { room, mode } => self.room_op(pos, room, &mut |r, d| {
                r.config.mode = *mode;
                r.pump(now, d);
                Outcome::Room(r.room_view(now))
            }),
            SetHealth {
                room,
                health,
                slow_factor_permille,
            } => {
                if let Some(f) = slow_factor_permille {
                    if !(1..=999).contains(f) {
                        return Err(Rejection::invalid(
                            "slow_factor_permille",
                            "must be between 1 and 999".into(),
                        ));
                    }
                }
                self.room_op(pos, room, &mut |r, d| {
                    r.set_health(*health, *slow_factor_permille);
                    r.origin.last_change = Some(HealthChange {
                        health: *health,
                        source: HealthSource::Operator,
                        at_ms: now,
                        window: OriginSamples::default(),
                        window_secs: 0,
                        paused: None,
                    });
                    r.pump(now, d);
                    Outcome::Room(r.room_view(now))
                })
            }
            ReportOrigin {
                room,
                source,
                samples,
            } => {
                samples.validate()?;
                let r = self.room_mut(room)?;
                if r.policy.origin.is_none() {
                    return Err(Rejection::invalid(
                        "origin",
                        "this room watches no origin: set its origin rule first".into(),
                    ));
                }
                self.room_op(pos, room, &mut |r, d| {
                    r.report_origin(*source, samples, now, d)
                })
            }
            Ban {
                room,
                visitor,
                until_ms,
            } => self.room_op(pos, room, &mut |r, d| r.ban(*visitor, *until_ms, now, d)),
            Unban { room, visitor } => {
                self.room_op(pos, room, &mut |r, d| r.unban(*visitor, now, d))
            }
            CreateCodes { room, batch, codes } => self.room_op(pos, room, &mut |r, d| {
                let o = match r.codes.create(batch.clone(), codes, now) {
                    Ok(v) => Outcome::Codes(v),
                    Err(e) => Outcome::Rejected(e),
                };
                r.pump(now, d);
                o
            }),
            AddCodes { room, batch, codes } => self.room_op(pos, room, &mut |r, d| {
                let o = match r.codes.add(*batch, codes) {
                    Ok(v) => Outcome::Codes(v),
                    Err(e) => Outcome::Rejected(e),
                };
                r.pump(now, d);
                o
            }),
            SetNotice { room, text } => self.room_op(pos, room, &mut |r, d| {
                let o = r.set_notice(text, now);
                if !matches!(o, Outcome::Rejected(_)) {
                    d.note(Event::Notice { text: text.clone() });
                }
                o
            }),
            EndCodes { room, batch } => self.room_op(pos, room, &mut |r, d| {
                let o = match r.codes.end(*batch) {
                    Ok(n) => Outcome::Count(n),
                    Err(e) => Outcome::Rejected(e),
                };
                r.pump(now, d);
                o
            }),
            _ => unreachable!("try_apply dispatches only room commands here"),
        }
    }

    /// The shared-capacity pools' commands.
    fn pool_command(&mut self, cmd: &Command) -> Result<Outcome, Rejection> {
        use Command::*;
        match cmd {
            PutPool {
                pool,
                room_capacity,
                rooms_max,
            } => {
                validate_name("pool", pool)?;
                pool::validate(*room_capacity, *rooms_max)?;
                if !self.pools.contains_key(pool.as_str()) && self.pools.len() >= POOLS_MAX {
                    return Err(Rejection::LimitReached {
                        what: "pools".into(),
                        max: POOLS_MAX as u64,
                    });
                }
                let p = self.pools.entry(pool.clone()).or_insert_with(|| Pool {
                    room_capacity: *room_capacity,
                    rooms_max: *rooms_max,
                    counts: Vec::new(),
                });
                p.room_capacity = *room_capacity;
                p.rooms_max = *rooms_max;
                Ok(Outcome::Pool(p.view(pool)))
            }
            DeletePool { pool } => {
                self.pool_mut(pool)?;
                self.pools.remove(pool.as_str());
                Ok(Outcome::PoolDeleted)
            }
            PoolAssign { pool } => Ok(self.pool_mut(pool)?.assign(pool)),
            PoolRelease { pool, room_index } => Ok(self.pool_mut(pool)?.release(pool, *room_index)),
            PoolReport {
                pool,
                room_index,
                count,
            } => Ok(self.pool_mut(pool)?.report(pool, *room_index, *count)),
            _ => unreachable!("try_apply dispatches only pool commands here"),
        }
    }

    /// Commands about the cluster rather than a room: ended credentials, notes of membership
    /// changes, webhook delivery cursors.
    fn cluster_command(&mut self, cmd: &Command) -> Result<Outcome, Rejection> {
        use Command::*;
        let now = self.clock_ms;
        match cmd {
            EndCredential {
                credential,
                until_ms,
            } => {
                let ended = &mut self.credentials_ended;
                if *until_ms <= now {
                    return Ok(Outcome::Count(0));
                }
                if !ended.contains_key(credential) {
                    let session = is_session_credential(credential);
                    let owner = session_owner(credential);
                    let owned = |ended: &BTreeMap<[u8; 16], u64>| {
                        session
                            && ended
                                .keys()
                                .filter(|c| is_session_credential(c) && session_owner(c) == owner)
                                .count()
                                >= SESSIONS_ENDED_PER_OPERATOR_MAX
                    };
                    let full = |ended: &BTreeMap<[u8; 16], u64>| {
                        ended.len() >= CREDENTIALS_ENDED_MAX
                            || session
                                && ended.keys().filter(|c| is_session_credential(c)).count()
                                    >= SESSIONS_ENDED_MAX
                            || owned(ended)
                    };
                    if full(ended) {
                        ended.retain(|_, &mut until| until > now);
                        if full(ended) {
                            let (what, max) = if owned(ended) {
                                (
                                    "ended dashboard sessions of this operator",
                                    SESSIONS_ENDED_PER_OPERATOR_MAX,
                                )
                            } else if session {
                                ("ended dashboard sessions", SESSIONS_ENDED_MAX)
                            } else {
                                (
                                    "ended credentials (sessions, bypass tokens)",
                                    CREDENTIALS_ENDED_MAX,
                                )
                            };
                            return Err(Rejection::LimitReached {
                                what: what.into(),
                                max: max as u64,
                            });
                        }
                    }
                }
                ended.insert(*credential, *until_ms);
                Ok(Outcome::Count(1))
            }
            RevokeStaffToken { room, id, until_ms } => {
                if is_session_credential(id) {
                    return Err(Rejection::invalid(
                        "id",
                        "a dashboard session's id, not a staff token's".into(),
                    ));
                }
                self.rooms
                    .get(room.as_str())
                    .ok_or(Rejection::RoomNotFound)?;
                // Never remembered longer than a token can last (with an hour for the nodes'
                // clocks being ahead of the log's).
                let until_ms = (*until_ms).min(now + STAFF_TOKEN_TTL_MS_MAX + 3_600_000);
                if until_ms <= now {
                    return Ok(Outcome::Count(0));
                }
                let ended = &mut self.credentials_ended;
                if !ended.contains_key(id) {
                    let full = |ended: &BTreeMap<[u8; 16], u64>| {
                        ended.len() >= CREDENTIALS_ENDED_MAX
                            || ended.keys().filter(|c| !is_session_credential(c)).count()
                                >= STAFF_TOKENS_ENDED_MAX
                    };
                    if full(ended) {
                        ended.retain(|_, &mut until| until > now);
                        if full(ended) {
                            return Err(Rejection::LimitReached {
                                what: "revoked staff tokens".into(),
                                max: STAFF_TOKENS_ENDED_MAX as u64,
                            });
                        }
                    }
                }
                let kept = ended.entry(*id).or_insert(until_ms);
                *kept = (*kept).max(until_ms);
                Ok(Outcome::Count(1))
            }
            NoteClusterChange { what } => {
                one_line("what", what, NOTICE_LEN_MAX)?;
                Ok(Outcome::Count(0))
            }
            NoteStaffToken { room, label, .. } => {
                one_line("label", label, NOTICE_LEN_MAX)?;
                self.rooms
                    .get(room.as_str())
                    .ok_or(Rejection::RoomNotFound)?;
                Ok(Outcome::Count(0))
            }
            NoteRoomChange { room, what } => {
                one_line("what", what, CHANGE_NOTE_LEN_MAX)?;
                self.rooms
                    .get(room.as_str())
                    .ok_or(Rejection::RoomNotFound)?;
                Ok(Outcome::Count(0))
            }
            SetWebhookCursor { hook, through } => {
                validate_name("hook", hook)?;
                let n = self.webhook_cursors.len();
                match self.webhook_cursors.get_mut(hook.as_str()) {
                    Some(at) => *at = (*at).max(*through),
                    None => {
                        if n >= WEBHOOKS_MAX {
                            // A full table makes room by the position furthest behind: a
                            // webhook no longer configured stops moving while those delivered
                            // go on, so names of removed hooks do not fill it for good.
                            let stalest = self
                                .webhook_cursors
                                .iter()
                                .min_by_key(|(name, at)| (**at, name.as_str()))
                                .map(|(name, _)| name.clone())
                                .expect("a full table");
                            self.webhook_cursors.remove(&stalest);
                        }
                        self.webhook_cursors.insert(hook.clone(), *through);
                    }
                }
                Ok(Outcome::Count(1))
            }
            _ => unreachable!("try_apply dispatches only cluster commands here"),
        }
    }

    /// An operator's command: applied as itself, with the operator named in the ledger and the
    /// audit log whatever its outcome.
    fn as_operator(
        &mut self,
        pos: DrawPosition,
        operator: &str,
        command: &Command,
    ) -> Result<Outcome, Rejection> {
        validate_name("operator", operator)?;
        if matches!(command, Command::AsOperator { .. }) {
            return Err(Rejection::invalid(
                "command",
                "an operator's command cannot hold another".into(),
            ));
        }
        self.operator = Some(operator.to_string());
        let out = match self.try_apply(pos, command) {
            Ok(o) => o,
            Err(r) => Outcome::Rejected(r),
        };
        let (name, detail) = command.describe();
        let outcome = match &out {
            Outcome::Rejected(r) => r.code().to_string(),
            _ => "ok".to_string(),
        };
        let event = Event::Command {
            name: name.to_string(),
            detail,
            outcome,
        };
        self.record(pos, command.target().unwrap_or(""), vec![event]);
        self.operator = None;
        Ok(out)
    }

    /// Advances every room to the log clock: expiries, admissions due, draws settled.
    fn tick(&mut self, pos: DrawPosition) -> Outcome {
        let (now, key) = (self.clock_ms, self.draw_key);
        let (mut admitted, mut expired) = (0, 0);
        let mut events = Vec::new();
        for (name, room) in self.rooms.iter_mut() {
            let before = room.signals();
            let mut step = Step::new(pos, name, room.draw_start().map(|s| (key, s)));
            expired += room.advance(now, &mut step);
            admitted += room.pump(now, &mut step);
            room.settle(Some(before), &key, now, &mut step);
            if !step.events.is_empty() {
                events.push((name.clone(), step.events));
            }
        }
        for (name, e) in events {
            self.record(pos, &name, e);
        }
        Outcome::Ticked { admitted, expired }
    }

    // ---- queries: read-only, answered from applied state ------------------------------------

    /// A room's view at the log clock.
    pub fn room(&self, name: &str) -> Option<RoomView> {
        self.rooms.get(name).map(|r| r.room_view(self.clock_ms))
    }

    /// All rooms, by name.
    pub fn rooms(&self) -> Vec<RoomView> {
        self.rooms
            .values()
            .map(|r| r.room_view(self.clock_ms))
            .collect()
    }

    /// Up to `limit` rooms named after `after` (from the first if `None`), by name, and whether
    /// more follow.
    pub fn rooms_after(&self, after: Option<&str>, limit: usize) -> (Vec<RoomView>, bool) {
        use std::ops::Bound::{Excluded, Unbounded};
        let mut rest = self
            .rooms
            .range::<str, _>((after.map_or(Unbounded, Excluded), Unbounded));
        let page = rest
            .by_ref()
            .take(limit)
            .map(|(_, r)| r.room_view(self.clock_ms))
            .collect();
        (page, rest.next().is_some())
    }

    /// Room names, by name.
    pub fn room_names(&self) -> impl Iterator<Item = &str> {
        self.rooms.keys().map(String::as_str)
    }

    /// A visitor's status.
    pub fn visitor(&self, room: &str, visitor: VisitorId) -> Result<VisitorView, Rejection> {
        let r = self.rooms.get(room).ok_or(Rejection::RoomNotFound)?;
        r.view(visitor, self.clock_ms)
            .ok_or(Rejection::UnknownVisitor)
    }

    /// Waiters lane by lane (priority lanes in order, then the room's own line), each lane in
    /// its admission order, from 0-based index `offset` of that listing, at most `limit`
    /// (≤ [`QUEUE_PAGE_MAX`]).
    pub fn queue(
        &self,
        room: &str,
        offset: u64,
        limit: usize,
    ) -> Result<Vec<QueueEntry>, Rejection> {
        let r = self.rooms.get(room).ok_or(Rejection::RoomNotFound)?;
        let mut out = Vec::new();
        let mut skip = offset;
        let limit = limit.min(QUEUE_PAGE_MAX);
        for (lane, q) in r.lines() {
            if out.len() >= limit {
                break;
            }
            if skip >= q.len() {
                skip -= q.len();
                continue;
            }
            let from = skip;
            skip = 0;
            out.extend(
                q.iter_from(from)
                    .take(limit - out.len())
                    .enumerate()
                    .map(|(i, (_, s))| QueueEntry {
                        position: from + i as u64 + 1,
                        lane: lane.map(str::to_string),
                        visitor: s.id,
                        seq: s.seq,
                        last_seen_ms: s.last_seen_ms,
                    }),
            );
        }
        Ok(out)
    }

    /// A room's code batches, by number: counts and uses, never the codes.
    pub fn code_batches(&self, room: &str) -> Result<Vec<crate::CodeBatchView>, Rejection> {
        let r = self.rooms.get(room).ok_or(Rejection::RoomNotFound)?;
        Ok(r.codes.views())
    }

    /// Whether `visitor` could redeem a code in a room now (it redeemed it already, or the code
    /// has a use left): the edge asks before it writes a join that brings one, so that guesses
    /// and spent codes cost no log entry. The identity a code may be bound to is checked when
    /// the join is applied.
    pub fn code_usable(
        &self,
        room: &str,
        code: &crate::CodeHash,
        visitor: Option<VisitorId>,
    ) -> Result<(), Rejection> {
        let r = self.rooms.get(room).ok_or(Rejection::RoomNotFound)?;
        if visitor.is_some_and(|v| r.codes.redeemed.get(&v) == Some(code)) {
            return Ok(());
        }
        r.codes.usable(code, self.clock_ms)
    }

    /// A pool's view.
    pub fn pool(&self, name: &str) -> Option<PoolView> {
        self.pools.get(name).map(|p| p.view(name))
    }

    /// All pools, by name.
    pub fn pools(&self) -> Vec<PoolView> {
        self.pools.iter().map(|(n, p)| p.view(n)).collect()
    }

    /// The earliest log time at which a `Tick` would change something, if any. A value at or
    /// before the clock means "now".
    pub fn next_due_ms(&self) -> Option<u64> {
        self.rooms
            .values()
            .filter_map(|r| r.next_due(self.clock_ms))
            .min()
    }

    /// Is the visitor's session active at wall time `now_ms` (not ended, not past its TTL)?
    /// For the gate: answered from applied state with the caller's clock, no log entry needed.
    pub fn session_active(&self, room: &str, visitor: VisitorId, now_ms: u64) -> bool {
        self.rooms.get(room).is_some_and(|r| {
            r.sessions
                .key(&visitor)
                .is_some_and(|(_, last)| last + r.config.session_ttl_secs * 1000 > now_ms)
        })
    }

    /// Whether a credential (an operator session, a bypass token) was ended (and would not
    /// have ended yet).
    pub fn credential_ended(&self, credential: &[u8; 16]) -> bool {
        self.credentials_ended
            .get(credential)
            .is_some_and(|&until| until > self.clock_ms)
    }

    /// The rooms whose origin rule has a probe, by name, with the rule.
    pub fn origin_probes(&self) -> Vec<(String, OriginRule)> {
        self.rooms
            .values()
            .filter_map(|r| {
                r.policy
                    .origin
                    .as_ref()
                    .map(|o| (r.name.clone(), o.clone()))
            })
            .filter(|(_, o)| o.probe.is_some())
            .collect()
    }

    /// A room's entry policy.
    pub fn entry_policy(&self, room: &str) -> Option<crate::EntryPolicy> {
        self.policy(room).cloned()
    }

    /// A room's entry policy, borrowed (for reads that must not copy it, such as the gate's).
    pub fn policy(&self, room: &str) -> Option<&crate::EntryPolicy> {
        self.rooms.get(room).map(|r| &*r.policy)
    }

    /// When `room` was created (log time, ms): a room deleted and made again under the same
    /// name has another.
    pub fn room_created_at(&self, room: &str) -> Option<u64> {
        self.rooms.get(room).map(|r| r.created_at_ms)
    }

    /// What a join to `room` must bring.
    pub fn join_terms(&self, room: &str) -> Option<JoinTerms> {
        self.rooms.get(room).map(|r| JoinTerms {
            policy: r.policy.clone(),
            waiting: r.waiting_len(),
            created_at_ms: r.created_at_ms,
        })
    }

    /// What a proof-of-work challenge for `room` must ask: the room's rule (`None`: it asks
    /// none), how many wait in line, and when the room was made. Reads no more than that.
    pub fn challenge_terms(&self, room: &str) -> Option<(Option<crate::PowRule>, u64, u64)> {
        self.rooms.get(room).map(|r| {
            (
                r.policy.proof_of_work.clone(),
                r.waiting_len(),
                r.created_at_ms,
            )
        })
    }

    /// Whether the challenge `id` has minted a place in `room` (and has not expired since the
    /// room last forgot expired ones): a solution that would be refused as used costs no
    /// derivation at the edge.
    pub fn challenge_used(&self, room: &str, id: &[u8; 16]) -> bool {
        self.rooms.get(room).is_some_and(|r| r.challenge_used(id))
    }

    /// When a visitor's ban in a room ends (log time ms; `u64::MAX`: never), if one is in force.
    pub fn banned_until(&self, room: &str, visitor: VisitorId) -> Option<u64> {
        let now = self.clock_ms;
        self.rooms
            .get(room)?
            .bans
            .get(&visitor)
            .copied()
            .filter(|&until| until > now)
    }

    /// Approximate heap bytes used by the waiting lines of all rooms.
    pub fn waiter_heap_bytes(&self) -> usize {
        self.rooms.values().map(Room::waiter_heap_bytes).sum()
    }
}
