//! What the clients do: append to and read lists, as the fault suite's `queue-append` workload
//! does, in plain rooms and in rooms with an entry policy; and, beside them, what operators and
//! visitors do to such rooms (bans with and without an end, access codes, priority lanes, policy
//! changes, notices, places that end).
//!
//! Every room the checkers judge is an append-only list. A plain room is paused: its line is
//! the list. A policy room (`ident`, `invite`) admits, so its list is every place it holds,
//! waiting or admitted, in sequence-number order: a join that makes a place appends, and nothing
//! ends a place there (long TTLs, no first-use TTL, no leaves; bans only of visitors who never
//! held one). A join the room refuses (banned, no identity, no code, a network at its limit, a
//! used or ended code) is a definite failure, as is a join whose identity resumes another
//! visitor's place: the visitor it names holds none. On top of that, a join whose answer follows
//! from acknowledged operations (a ban, a full network, an ended batch, a code used up, an
//! identity that holds a place, a code's lane) must get that answer (`Facts::broken`).
//!
//! The `churn` room is outside the checked history (its operations are recorded as `churn`):
//! places there end in every way (leaves, bans of holders, expiry, unused admissions, shared
//! sessions), its policy changes identity rules, caps and lanes, and codes come and go. What is
//! checked of it is what is checked of every room: every replica ends with the same digest, and
//! its state passes `StateMachine::check`.

use crate::{ask, now_ns, value_of, visitor, Call, Shared, EPOCH_MS, OP_TIMEOUT, RUNNING};
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};
use serde_json::{json, Value};
use sluice_jepsen::history::{History, Kind};
use sluice_raft::ClusterError;
use sluice_statemachine::{
    ClientKey, CodeBatch, CodeHash, Command, EntryPolicy, IdentityKey, IdentityRule, JoinEvidence,
    Lane, NewCode, Outcome, Rejection, RoomConfig, StateMachine, VisitorId, VisitorState,
};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Keys (lists) the clients append to and read: `0..PLAIN` plain rooms, then the policy rooms.
pub(crate) const KEYS: u64 = 5;
/// Plain rooms: paused, their line the list.
pub(crate) const PLAIN: u64 = 3;
/// The room that asks an identity, counts networks and has lanes and codes.
pub(crate) const IDENT: u64 = 3;
/// The invite-only room: a place needs a code (or an identity that names a lane).
pub(crate) const INVITE: u64 = 4;
/// The room outside the checked history.
pub(crate) const CHURN: &str = "churn";

/// The identity room's salt (kept while the rule stays).
const SALT: [u8; 16] = *b"sluice-sim-salt!";
/// Client networks the policy rooms' joins come from.
const NETWORKS: u64 = 8;
/// Places one network holds in the identity room, and in the invite-only room.
const IDENT_PLACES_PER_NETWORK: u64 = 4;
const INVITE_PLACES_PER_NETWORK: u64 = 5;
/// Identities the churn room's visitors share (so that identities resume places and meet bans).
const CHURN_IDENTITIES: u8 = 8;

/// A room's name.
pub(crate) fn room(key: u64) -> String {
    match key {
        IDENT => "ident".into(),
        INVITE => "invite".into(),
        k => format!("q{k}"),
    }
}

fn lane(name: &str, share_permille: Option<u32>, lottery: bool) -> Lane {
    Lane {
        name: name.into(),
        opens_at_ms: None,
        share_permille,
        lottery,
    }
}

/// The identity room's policy: one of six (lanes in either order, or with shares and a third
/// lane; one or two sessions per network). The identity rule and the places per network stay,
/// and so do the lanes `presale` and `members`, which codes and identities name.
pub(crate) fn ident_policy(variant: u64) -> EntryPolicy {
    EntryPolicy {
        identity: Some(IdentityRule { salt: SALT }),
        places_per_client_max: Some(IDENT_PLACES_PER_NETWORK),
        sessions_per_client_max: Some(1 + variant % 2),
        lanes: match variant % 3 {
            0 => vec![lane("presale", None, false), lane("members", None, true)],
            1 => vec![lane("members", None, true), lane("presale", None, false)],
            _ => vec![
                lane("presale", Some(500), false),
                lane("members", Some(300), true),
                lane("staff", Some(100), false),
            ],
        },
        ..EntryPolicy::default()
    }
}

/// The invite-only room's policy: one of three (shares or strict priority, lottery or not).
pub(crate) fn invite_policy(variant: u64) -> EntryPolicy {
    EntryPolicy {
        invite_only: true,
        places_per_client_max: Some(INVITE_PLACES_PER_NETWORK),
        sessions_per_client_max: Some(2),
        lanes: match variant % 3 {
            0 => vec![
                lane("vip", Some(600), false),
                lane("guests", Some(300), true),
            ],
            1 => vec![
                lane("vip", Some(700), true),
                lane("guests", Some(200), false),
            ],
            _ => vec![lane("vip", None, false), lane("guests", None, true)],
        },
        ..EntryPolicy::default()
    }
}

/// The churn room's policy: one of four, which switch the identity rule, the network caps, the
/// lanes and invitation on and off.
pub(crate) fn churn_policy(variant: u64) -> EntryPolicy {
    match variant % 4 {
        0 => EntryPolicy {
            identity: Some(IdentityRule { salt: SALT }),
            places_per_client_max: Some(3),
            sessions_per_client_max: Some(1),
            networks_per_session_max: Some(2),
            networks_window_secs: Some(5),
            first_use_ttl_secs: Some(3),
            grace_secs: Some(2),
            lanes: vec![lane("fast", None, false)],
            ..EntryPolicy::default()
        },
        1 => EntryPolicy {
            lanes: vec![lane("fast", None, false), lane("slow", None, true)],
            ..EntryPolicy::default()
        },
        2 => EntryPolicy {
            identity: Some(IdentityRule { salt: SALT }),
            places_per_client_max: Some(2),
            lanes: vec![
                lane("slow", Some(500), true),
                lane("fast", Some(300), false),
            ],
            ..EntryPolicy::default()
        },
        _ => EntryPolicy {
            invite_only: true,
            sessions_per_client_max: Some(2),
            lanes: vec![lane("fast", None, false)],
            ..EntryPolicy::default()
        },
    }
}

/// What the driver writes before the clients start: the rooms and their policies.
pub(crate) fn setup() -> Vec<Command> {
    // Places last a month: nothing ends a place in a checked room.
    let lists = RoomConfig {
        capacity: 1,
        paused: true,
        waiter_ttl_secs: 2_592_000,
        session_ttl_secs: 2_592_000,
        max_waiting: 1_000_000,
        ..RoomConfig::default()
    };
    let admitting = RoomConfig {
        capacity: 1_000,
        admit_per_minute: 300,
        paused: false,
        ..lists.clone()
    };
    let churn = RoomConfig {
        capacity: 6,
        admit_per_minute: 600,
        session_ttl_secs: 3,
        waiter_ttl_secs: 4,
        max_waiting: 10_000,
        ..RoomConfig::default()
    };
    let mut cmds: Vec<Command> = (0..PLAIN)
        .map(|k| Command::CreateRoom {
            room: room(k),
            config: lists.clone(),
        })
        .collect();
    for (name, config, policy) in [
        (room(IDENT), admitting.clone(), ident_policy(0)),
        (room(INVITE), admitting, invite_policy(0)),
        (CHURN.to_string(), churn, churn_policy(0)),
    ] {
        cmds.push(Command::CreateRoom {
            room: name.clone(),
            config,
        });
        cmds.push(Command::SetEntryPolicy {
            room: name,
            policy: policy.encode(),
        });
    }
    cmds
}

/// A policy room's list: every place it holds, waiting (in any lane) or admitted, in sequence
/// order. `tried` is every visitor whose join was sent to the room (an admitted visitor is
/// found by asking for it). `Err`: the room's counts disagree with what was found.
pub(crate) fn places(
    sm: &StateMachine,
    name: &str,
    tried: &[VisitorId],
) -> Result<Vec<u64>, String> {
    let view = sm.room(name).ok_or_else(|| format!("no room {name}"))?;
    let waiting = sm
        .queue(name, 0, sluice_statemachine::limits::QUEUE_PAGE_MAX)
        .map_err(|e| e.to_string())?;
    let mut by_seq: Vec<(u64, u64)> = waiting
        .iter()
        .map(|e| (e.seq, value_of(&e.visitor)))
        .collect();
    let waiters: std::collections::BTreeSet<VisitorId> =
        waiting.iter().map(|e| e.visitor).collect();
    let mut admitted = 0;
    for v in tried.iter().filter(|v| !waiters.contains(v)) {
        if let Ok(w) = sm.visitor(name, *v) {
            if matches!(w.state, VisitorState::Admitted { .. }) {
                by_seq.push((w.seq, value_of(v)));
                admitted += 1;
            }
        }
    }
    if waiting.len() as u64 != view.waiting || admitted != view.active {
        return Err(format!(
            "room {name} counts {} waiting and {} admitted; its line lists {} and {admitted} \
             of the visitors sent to it are admitted",
            view.waiting,
            view.active,
            waiting.len()
        ));
    }
    if view.active > view.config.capacity {
        return Err(format!(
            "room {name} has {} sessions, capacity {}",
            view.active, view.config.capacity
        ));
    }
    by_seq.sort_unstable();
    Ok(by_seq.into_iter().map(|(_, v)| v).collect())
}

/// An acknowledged batch of codes in a policy room.
#[derive(Clone, Debug)]
struct Batch {
    key: u64,
    id: u32,
    lane: Option<String>,
    uses: u32,
    codes: Vec<NewCode>,
    /// Its end was acknowledged.
    ended: bool,
}

/// What the clients learned from acknowledged operations, and what broke the rules.
#[derive(Default)]
pub(crate) struct Facts {
    /// The identity room's identities whose join made a place, and the visitor holding each.
    holders: BTreeMap<IdentityKey, u64>,
    /// Places made per policy room and network.
    places: BTreeMap<(u64, u64), u64>,
    /// Code batches of the policy rooms.
    batches: Vec<Batch>,
    /// Places made with each code.
    redeemed: BTreeMap<CodeHash, u32>,
    /// The churn room: visitors sent to it, visitors banned, batches of codes.
    churn_visitors: Vec<u64>,
    churn_banned: Vec<u64>,
    churn_batches: Vec<(u32, Vec<CodeHash>)>,
    /// Joins whose answer followed from what was acknowledged, and was judged.
    pub(crate) judged: u64,
    /// Answers that broke a rule of the state machine, or reads that found a room's counts
    /// wrong.
    pub(crate) broken: Vec<String>,
}

/// What a join must get, given what was acknowledged before it began.
#[derive(Clone, Debug, Default)]
struct Expect {
    /// Exactly this rejection.
    rejected: Option<Rejection>,
    /// No place for the visitor (any rejection, or another visitor's place resumed), and why.
    no_place: Option<&'static str>,
    /// This visitor's place resumed (the join's identity holds it).
    resumes: Option<u64>,
    /// If it makes a place that waits, it waits in this lane (`Some(None)`: the room's line).
    lane: Option<Option<String>>,
    /// Not refused for a ban (it was lifted).
    not_banned: bool,
}

impl Expect {
    /// Whether anything is expected.
    fn any(&self) -> bool {
        self.rejected.is_some()
            || self.no_place.is_some()
            || self.resumes.is_some()
            || self.lane.is_some()
            || self.not_banned
    }

    /// What is wrong with `o` as the answer to a join of `v`, if anything.
    fn judge(&self, v: u64, o: &Outcome) -> Option<String> {
        let placed = matches!(o, Outcome::Visitor(w) if w.visitor == visitor(v));
        if let Some(r) = &self.rejected {
            if *o != Outcome::Rejected(r.clone()) {
                return Some(format!("expected {r:?}"));
            }
        }
        if let Some(why) = self.no_place {
            if placed {
                return Some(format!("a place despite {why}"));
            }
        }
        if let Some(h) = self.resumes {
            if !matches!(o, Outcome::Visitor(w) if w.visitor == visitor(h)) {
                return Some(format!(
                    "expected the place of {h}, whose identity it brought"
                ));
            }
        }
        if let (Some(lane), Outcome::Visitor(w)) = (&self.lane, o) {
            if let VisitorState::Waiting { lane: got, .. } = &w.state {
                if placed && got != lane {
                    return Some(format!("expected to wait in lane {lane:?}"));
                }
            }
        }
        if self.not_banned && matches!(o, Outcome::Rejected(Rejection::Banned { .. })) {
            return Some("refused for a ban that was lifted".into());
        }
        None
    }
}

/// How a write ended. `mine`: a join of this visitor, which succeeds only with a place of its
/// own.
fn kind_of(
    r: &Option<Result<Outcome, ClusterError>>,
    mine: Option<VisitorId>,
) -> (Kind, Option<String>) {
    match r {
        Some(Ok(Outcome::Rejected(e))) => (Kind::Fail, Some(format!("{e:?}"))),
        Some(Ok(Outcome::Visitor(w))) if mine.is_some_and(|v| v != w.visitor) => (
            Kind::Fail,
            Some(format!("resumed the place of {}", value_of(&w.visitor))),
        ),
        Some(Ok(o)) if mine.is_some() && !matches!(o, Outcome::Visitor(_)) => {
            (Kind::Fail, Some(format!("{o:?}")))
        }
        Some(Ok(_)) => (Kind::Ok, None),
        Some(Err(e @ (ClusterError::NoLeader | ClusterError::NotReady | ClusterError::Busy))) => {
            (Kind::Fail, Some(e.to_string()))
        }
        Some(Err(e)) => (Kind::Info, Some(e.to_string())),
        None => (Kind::Info, Some("no answer".into())),
    }
}

fn network(n: u64) -> ClientKey {
    let mut b = [0x6e; 16];
    b[15] = n as u8;
    ClientKey(b)
}

/// One client process.
pub(crate) struct Worker {
    shared: Arc<Shared>,
    history: History,
    rng: ChaCha8Rng,
    process: u64,
    next: Arc<AtomicU64>,
    /// Acknowledged bans of visitors that never held a place, not yet followed by their join:
    /// (key, visitor, end).
    bans: Vec<(u64, u64, Option<u64>)>,
    /// Joins, bans, codes and notices so far (for the codes the first operation makes).
    ops: u64,
    i: usize,
}

/// A process whose operation's outcome is unknown is replaced by this one plus this.
const PROCESSES: u64 = 1_000;

impl Worker {
    pub(crate) fn new(
        shared: Arc<Shared>,
        history: History,
        i: usize,
        seed: u64,
        next: Arc<AtomicU64>,
    ) -> Self {
        Self {
            shared,
            history,
            rng: ChaCha8Rng::seed_from_u64(seed ^ (0x5eed_0000 + i as u64)),
            process: i as u64,
            next,
            bans: Vec::new(),
            ops: 0,
            i,
        }
    }

    /// Runs until the load's time is over.
    pub(crate) async fn run(mut self) {
        while self.shared.phase.load(Ordering::SeqCst) == RUNNING {
            self.step().await;
            self.ops += 1;
            // Think time: 1–20 ms.
            tokio::time::sleep(Duration::from_millis(1 + self.below(20))).await;
        }
    }

    async fn step(&mut self) {
        if self.ops == 0 {
            // Codes from the start, in both policy rooms.
            return self.create_codes(IDENT + self.i as u64 % 2).await;
        }
        match self.below(100) {
            0..30 => {
                let key = self.below(KEYS);
                let v = self.fresh();
                if key < PLAIN {
                    self.join(key, v, None, Expect::default()).await
                } else {
                    let (evidence, expect) = self.evidence(key);
                    self.join(key, v, Some(evidence), expect).await
                }
            }
            30..62 => {
                let key = self.below(KEYS);
                self.read(key).await
            }
            62..70 => self.ban_step().await,
            70..74 => {
                let key = IDENT + self.below(2);
                if self.below(3) == 0 {
                    self.end_codes(key).await
                } else {
                    self.create_codes(key).await
                }
            }
            74..76 => {
                let name =
                    [room(IDENT), room(INVITE), CHURN.to_string()][self.below(3) as usize].clone();
                let text = (self.below(3) != 0).then(|| format!("notice {}", self.below(1_000)));
                let value = json!({"notice": [name, text]});
                self.write(
                    "admin",
                    value,
                    Command::SetNotice { room: name, text },
                    None,
                )
                .await;
            }
            76..78 => {
                let key = IDENT + self.below(2);
                let variant = self.below(6);
                let policy = if key == IDENT {
                    ident_policy(variant)
                } else {
                    invite_policy(variant)
                };
                let value = json!({"policy": [room(key), variant]});
                let cmd = Command::SetEntryPolicy {
                    room: room(key),
                    policy: policy.encode(),
                };
                self.write("admin", value, cmd, None).await;
            }
            _ => self.churn().await,
        }
    }

    fn below(&mut self, n: u64) -> u64 {
        self.rng.next_u64() % n
    }

    fn bytes(&mut self) -> [u8; 16] {
        let mut b = [0; 16];
        self.rng.fill_bytes(&mut b);
        b
    }

    fn fresh(&self) -> u64 {
        self.next.fetch_add(1, Ordering::SeqCst)
    }

    fn facts(&self) -> std::sync::MutexGuard<'_, Facts> {
        self.shared.facts.lock().unwrap()
    }

    /// A log time `lo` to `lo + span` ms from now (as the nodes' unstepped clocks read it).
    fn ahead_ms(&mut self, lo: u64, span: u64) -> u64 {
        let elapsed = turmoil::sim_elapsed().unwrap_or_default().as_millis() as u64;
        EPOCH_MS + elapsed + lo + self.below(span)
    }

    fn node(&mut self) -> u64 {
        let m = self.shared.members.lock().unwrap().clone();
        m[self.below(m.len() as u64) as usize]
    }

    /// Writes `cmd` through a random node as operation `f` of the history (`value` says what
    /// it is) and records how it ended.
    async fn write(
        &mut self,
        f: &str,
        value: Value,
        cmd: Command,
        mine: Option<VisitorId>,
    ) -> Option<Result<Outcome, ClusterError>> {
        let node = self.node();
        let p = self.process;
        self.history
            .record_at(now_ns(), Kind::Invoke, p, f, value.clone(), node, None);
        let r = ask(&self.shared, node, |tx| Call::Write(cmd, tx), OP_TIMEOUT).await;
        let (kind, error) = kind_of(&r, mine);
        self.history
            .record_at(now_ns(), kind, p, f, value, node, error);
        if kind == Kind::Info {
            self.process += PROCESSES;
        }
        r
    }

    async fn read(&mut self, key: u64) {
        let node = self.node();
        let micro = json!([["r", key, null]]);
        let p = self.process;
        self.history
            .record_at(now_ns(), Kind::Invoke, p, "txn", micro, node, None);
        let r = ask(&self.shared, node, |tx| Call::Read(key, tx), OP_TIMEOUT).await;
        let (kind, value, error) = match r {
            Some(Ok(list)) => (Kind::Ok, json!([["r", key, list]]), None),
            Some(Err(e)) => (Kind::Fail, json!([["r", key, null]]), Some(e.to_string())),
            None => (
                Kind::Fail,
                json!([["r", key, null]]),
                Some("no answer".into()),
            ),
        };
        self.history
            .record_at(now_ns(), kind, p, "txn", value, node, error);
    }

    /// Appends `v` to list `key`: a join, with `evidence` in a policy room.
    async fn join(&mut self, key: u64, v: u64, evidence: Option<JoinEvidence>, expect: Expect) {
        let id = visitor(v);
        if let Some(tried) = self.shared.tried.get(&key) {
            tried.lock().unwrap().push(id);
        }
        let cmd = match &evidence {
            None => Command::Join {
                room: room(key),
                visitor: id,
            },
            Some(e) => Command::JoinWith {
                room: room(key),
                visitor: id,
                evidence: e.encode(),
            },
        };
        let r = self
            .write("txn", json!([["append", key, v]]), cmd, Some(id))
            .await;
        let (Some(Ok(o)), Some(e)) = (&r, &evidence) else {
            return;
        };
        let mut facts = self.facts();
        facts.judged += u64::from(expect.any());
        if let Some(wrong) = expect.judge(v, o) {
            let at = turmoil::sim_elapsed().unwrap_or_default().as_millis();
            facts.broken.push(format!(
                "{at} ms: join of {v} to {} with {e:?}: {wrong}; got {o:?}",
                room(key)
            ));
        }
        if matches!(o, Outcome::Visitor(w) if w.visitor == id) {
            if let (IDENT, Some(k)) = (key, e.identity) {
                facts.holders.insert(k, v);
            }
            if let Some(c) = e.client {
                *facts.places.entry((key, u64::from(c.0[15]))).or_default() += 1;
            }
            if let Some(code) = e.code {
                *facts.redeemed.entry(code).or_default() += 1;
            }
        }
    }

    /// What a join to policy room `key` brings, and what it must get.
    fn evidence(&mut self, key: u64) -> (JoinEvidence, Expect) {
        let mut e = JoinEvidence {
            client: (self.below(10) < 7).then(|| network(self.below(NETWORKS))),
            ..JoinEvidence::default()
        };
        let mut x = Expect::default();
        let fresh = IdentityKey(self.bytes());
        let r = self.below(100);
        let batch = {
            let facts = self.facts();
            let mine: Vec<Batch> = facts
                .batches
                .iter()
                .filter(|b| b.key == key)
                .cloned()
                .collect();
            drop(facts);
            (!mine.is_empty()).then(|| mine[self.below(mine.len() as u64) as usize].clone())
        };
        if key == IDENT {
            let n = self.facts().holders.len() as u64;
            let i = self.below(n.max(1)) as usize;
            let holder = self.facts().holders.iter().nth(i).map(|(k, v)| (*k, *v));
            match (r, holder, batch) {
                (0..10, _, _) => x.rejected = Some(Rejection::IdentityRequired),
                (10..18, Some((k, _)), _) => e.identity = Some(k),
                (18..28, _, _) => {
                    e.identity = Some(fresh);
                    e.lane = Some("members".into());
                    x.lane = Some(Some("members".into()));
                }
                (28..33, _, _) => {
                    // A lane that only some of the policies have.
                    e.identity = Some(fresh);
                    e.lane = Some("staff".into());
                }
                (33..55, _, Some(b)) => {
                    let c = b.codes[self.below(b.codes.len() as u64) as usize];
                    e.code = Some(c.hash);
                    e.identity = match c.identity {
                        Some(k) if self.below(4) != 0 => Some(k),
                        Some(_) => {
                            x.no_place = Some("a code bound to another identity");
                            Some(fresh)
                        }
                        None => Some(fresh),
                    };
                    self.code_expectations(&b, &c.hash, &mut x);
                }
                (55..58, _, _) => {
                    e.identity = Some(fresh);
                    e.code = Some(CodeHash(self.bytes()));
                    x.no_place = Some("an unknown code");
                }
                _ => e.identity = Some(fresh),
            }
            let held = e
                .identity
                .and_then(|k| self.facts().holders.get(&k).copied());
            if let Some(h) = held {
                // The identity holds a place: the join resumes it, whatever else it brings.
                x = Expect {
                    resumes: Some(h),
                    ..Expect::default()
                };
            }
        } else {
            match (r, batch) {
                (0..15, _) => x.rejected = Some(Rejection::InviteOnly),
                (15..25, _) => {
                    e.identity = Some(fresh);
                    e.lane = Some("guests".into());
                    x.lane = Some(Some("guests".into()));
                }
                (25..33, _) => {
                    e.code = Some(CodeHash(self.bytes()));
                    x.no_place = Some("an unknown code");
                }
                (_, Some(b)) => {
                    let c = b.codes[self.below(b.codes.len() as u64) as usize];
                    e.code = Some(c.hash);
                    self.code_expectations(&b, &c.hash, &mut x);
                }
                (_, None) => x.rejected = Some(Rejection::InviteOnly),
            }
        }
        let max = if key == IDENT {
            IDENT_PLACES_PER_NETWORK
        } else {
            INVITE_PLACES_PER_NETWORK
        };
        if let Some(c) = e.client {
            let held = self
                .facts()
                .places
                .get(&(key, u64::from(c.0[15])))
                .copied()
                .unwrap_or(0);
            if held >= max && x.resumes.is_none() {
                x.no_place.get_or_insert("a network at its limit");
            }
        }
        (e, x)
    }

    /// What a join that brings `code`, of batch `b` as it stands, must get.
    fn code_expectations(&self, b: &Batch, code: &CodeHash, x: &mut Expect) {
        if b.ended {
            x.no_place.get_or_insert("an ended batch");
        }
        if self.facts().redeemed.get(code).copied().unwrap_or(0) >= b.uses {
            x.no_place.get_or_insert("a code used up");
        }
        x.lane = Some(b.lane.clone());
    }

    async fn create_codes(&mut self, key: u64) {
        let lanes: &[Option<&str>] = if key == IDENT {
            &[Some("presale"), Some("presale"), None]
        } else {
            &[Some("vip"), Some("guests"), None]
        };
        let lane = lanes[self.below(lanes.len() as u64) as usize].map(String::from);
        let uses = 1 + self.below(3) as u32;
        let expires_ms = (self.below(5) == 0).then(|| self.ahead_ms(500, 4_000));
        let n = 1 + self.below(4);
        let codes: Vec<NewCode> = (0..n)
            .map(|_| NewCode {
                hash: CodeHash(self.bytes()),
                identity: (key == IDENT && self.below(10) < 3).then(|| IdentityKey(self.bytes())),
            })
            .collect();
        let batch = CodeBatch {
            label: format!("sim {}", self.ops),
            lane: lane.clone(),
            uses,
            expires_ms,
        };
        let value = json!({"codes": [room(key), lane, uses, expires_ms, n]});
        let cmd = Command::CreateCodes {
            room: room(key),
            batch,
            codes: codes.clone(),
        };
        if let Some(Ok(Outcome::Codes(view))) = self.write("admin", value, cmd, None).await {
            self.facts().batches.push(Batch {
                key,
                id: view.id,
                lane,
                uses,
                codes,
                ended: false,
            });
        }
    }

    async fn end_codes(&mut self, key: u64) {
        let open: Vec<u32> = self
            .facts()
            .batches
            .iter()
            .filter(|b| b.key == key && !b.ended)
            .map(|b| b.id)
            .collect();
        if open.is_empty() {
            return;
        }
        let id = open[self.below(open.len() as u64) as usize];
        let value = json!({"end_codes": [room(key), id]});
        let cmd = Command::EndCodes {
            room: room(key),
            batch: id,
        };
        if let Some(Ok(Outcome::Count(_))) = self.write("admin", value, cmd, None).await {
            if let Some(b) = self
                .facts()
                .batches
                .iter_mut()
                .find(|b| b.key == key && b.id == id)
            {
                b.ended = true;
            }
        }
    }

    /// Bans a visitor that never held a place in a policy room (until a time, or for good), or
    /// follows up an acknowledged ban: its join, which a ban for good refuses, or its lifting
    /// and then its join, which no ban refuses. A visitor is banned once and joins once: a ban
    /// whose outcome is unknown may still be applied later, so its visitor never joins.
    async fn ban_step(&mut self) {
        if !self.bans.is_empty() && self.below(2) == 0 {
            let i = self.below(self.bans.len() as u64) as usize;
            let (key, v, until) = self.bans.swap_remove(i);
            let mut x = Expect::default();
            if self.below(2) == 0 {
                let cmd = Command::Unban {
                    room: room(key),
                    visitor: visitor(v),
                };
                let value = json!({"unban": [room(key), v]});
                let r = self.write("admin", value, cmd, None).await;
                x.not_banned = matches!(r, Some(Ok(Outcome::Count(_))));
            } else if until.is_none() {
                x.rejected = Some(Rejection::Banned { until_ms: None });
            }
            // No network (no place limit), and in the identity room an identity of its own.
            let e = JoinEvidence {
                identity: (key == IDENT).then(|| IdentityKey(self.bytes())),
                ..JoinEvidence::default()
            };
            return self.join(key, v, Some(e), x).await;
        }
        let key = IDENT + self.below(2);
        let v = self.fresh();
        let until_ms = (self.below(2) == 0).then(|| self.ahead_ms(300, 4_000));
        let cmd = Command::Ban {
            room: room(key),
            visitor: visitor(v),
            until_ms,
        };
        let value = json!({"ban": [room(key), v, until_ms]});
        if let Some(Ok(Outcome::Count(0))) = self.write("admin", value, cmd, None).await {
            self.bans.push((key, v, until_ms));
        }
    }

    /// One operation on the churn room, recorded outside the checked history.
    async fn churn(&mut self) {
        let name = CHURN.to_string();
        let (known, banned, batches) = {
            let f = self.facts();
            (
                f.churn_visitors.clone(),
                f.churn_banned.clone(),
                f.churn_batches.clone(),
            )
        };
        let pick = |w: &mut Self, from: &[u64]| -> Option<u64> {
            (!from.is_empty()).then(|| from[w.below(from.len() as u64) as usize])
        };
        let (value, cmd) = match self.below(12) {
            0..4 => {
                let v = match pick(self, &known) {
                    Some(v) if self.below(5) < 2 => v,
                    _ => {
                        let v = self.fresh();
                        self.facts().churn_visitors.push(v);
                        v
                    }
                };
                let code = if batches.is_empty() || self.below(5) != 0 {
                    None
                } else {
                    let (_, codes) = &batches[self.below(batches.len() as u64) as usize];
                    Some(codes[self.below(codes.len() as u64) as usize])
                };
                let e = JoinEvidence {
                    client: (self.below(5) != 0).then(|| network(self.below(4))),
                    identity: (self.below(10) < 7).then(|| {
                        let mut b = [0xee; 16];
                        b[15] = (self.below(u64::from(CHURN_IDENTITIES))) as u8;
                        IdentityKey(b)
                    }),
                    code,
                    lane: (self.below(10) == 0).then(|| "fast".to_string()),
                    ..JoinEvidence::default()
                };
                let value = json!({"join": [v, format!("{e:?}")]});
                let cmd = Command::JoinWith {
                    room: name,
                    visitor: visitor(v),
                    evidence: e.encode(),
                };
                (value, cmd)
            }
            4 => {
                let Some(v) = pick(self, &known) else { return };
                let cmd = Command::Leave {
                    room: name,
                    visitor: visitor(v),
                };
                (json!({"leave": v}), cmd)
            }
            5 => {
                let Some(v) = pick(self, &known) else { return };
                let until_ms = (self.below(3) != 0).then(|| self.ahead_ms(300, 3_000));
                self.facts().churn_banned.push(v);
                let cmd = Command::Ban {
                    room: name,
                    visitor: visitor(v),
                    until_ms,
                };
                (json!({"ban": [v, until_ms]}), cmd)
            }
            6 => {
                let Some(v) = pick(self, &banned) else { return };
                let cmd = Command::Unban {
                    room: name,
                    visitor: visitor(v),
                };
                (json!({"unban": v}), cmd)
            }
            7 => {
                let n = 1 + self.below(5);
                let mut visits: Vec<(VisitorId, ClientKey)> = Vec::new();
                for _ in 0..n {
                    if let Some(v) = pick(self, &known) {
                        visits.push((visitor(v), network(self.below(4))));
                    }
                }
                if visits.is_empty() {
                    return;
                }
                let value = json!({"touch": visits.len()});
                (value, Command::TouchFrom { room: name, visits })
            }
            8 => {
                let Some(v) = pick(self, &known) else { return };
                let cmd = Command::Heartbeat {
                    room: name,
                    visitor: visitor(v),
                };
                (json!({"heartbeat": v}), cmd)
            }
            9 => {
                let variant = self.below(4);
                let cmd = Command::SetEntryPolicy {
                    room: name,
                    policy: churn_policy(variant).encode(),
                };
                (json!({"policy": variant}), cmd)
            }
            10 => {
                let codes: Vec<NewCode> = (0..1 + self.below(3))
                    .map(|_| NewCode {
                        hash: CodeHash(self.bytes()),
                        identity: None,
                    })
                    .collect();
                let batch = CodeBatch {
                    label: "churn".into(),
                    lane: (self.below(2) == 0).then(|| "fast".to_string()),
                    uses: 1 + self.below(2) as u32,
                    expires_ms: (self.below(2) == 0).then(|| self.ahead_ms(300, 3_000)),
                };
                let value = json!({"codes": codes.len()});
                let hashes = codes.iter().map(|c| c.hash).collect();
                let cmd = Command::CreateCodes {
                    room: name,
                    batch,
                    codes,
                };
                if let Some(Ok(Outcome::Codes(view))) = self.write("churn", value, cmd, None).await
                {
                    self.facts().churn_batches.push((view.id, hashes));
                }
                return;
            }
            _ => {
                let Some(&(id, _)) = batches.get(self.below(batches.len().max(1) as u64) as usize)
                else {
                    return;
                };
                let cmd = Command::EndCodes {
                    room: name,
                    batch: id,
                };
                if let Some(Ok(Outcome::Count(_))) = self
                    .write("churn", json!({"end_codes": id}), cmd, None)
                    .await
                {
                    self.facts().churn_batches.retain(|b| b.0 != id);
                }
                return;
            }
        };
        self.write("churn", value, cmd, None).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_policy_the_workload_sets_is_valid() {
        for v in 0..6 {
            ident_policy(v).validate().unwrap();
            invite_policy(v).validate().unwrap();
            churn_policy(v).validate().unwrap();
        }
        for cmd in setup() {
            if let Command::CreateRoom { config, .. } = cmd {
                config.validate().unwrap();
            }
        }
    }
}
