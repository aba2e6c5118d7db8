//! Property tests: random command sequences checked against a small reference model and the
//! brief's invariants 1 (capacity), 2 (rate), 3 (FIFO), 5 (sequence numbers) and 6 (replay).

use proptest::prelude::*;
use sluice_statemachine::*;
use std::collections::BTreeMap;

const T0: u64 = 1_800_000_000_000;
const VISITORS: u128 = 12;
const UNIT: u64 = 60_000 * 1_000;

// ---- the reference model: FIFO rooms with plain vectors and linear scans -------------------

#[derive(Clone, Debug)]
struct MRoom {
    cfg: RoomConfig,
    waiting: Vec<(u128, u64, u64)>,  // id, seq, last_seen
    sessions: Vec<(u128, u64, u64)>, // id, seq, last_active
    ended: BTreeMap<u128, (u64, EndReason)>,
    bucket: u64,
    bucket_at: u64,
    next_seq: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum MState {
    Waiting { seq: u64, position: u64 },
    Admitted { seq: u64 },
    Ended { seq: u64, reason: EndReason },
    Unknown,
}

impl MRoom {
    fn new(cfg: RoomConfig, now: u64) -> Self {
        let bucket = cfg.burst() * UNIT;
        MRoom {
            cfg,
            waiting: vec![],
            sessions: vec![],
            ended: BTreeMap::new(),
            bucket,
            bucket_at: now,
            next_seq: 1,
        }
    }

    fn advance(&mut self, now: u64) {
        let sttl = self.cfg.session_ttl_secs * 1000;
        let wttl = self.cfg.waiter_ttl_secs * 1000;
        let mut gone = vec![];
        self.sessions.retain(|&(id, seq, t)| {
            let keep = t + sttl > now;
            if !keep {
                gone.push((seq, id, EndReason::Expired));
            }
            keep
        });
        self.waiting.retain(|&(id, seq, t)| {
            let keep = t + wttl > now;
            if !keep {
                gone.push((seq, id, EndReason::Abandoned));
            }
            keep
        });
        gone.sort_by_key(|g| (g.0, g.1));
        for (seq, id, reason) in gone {
            self.ended.insert(id, (seq, reason));
        }
        let cap = self.cfg.burst() * UNIT;
        let add =
            (now.saturating_sub(self.bucket_at)) as u128 * self.cfg.admit_per_minute as u128 * 1000;
        self.bucket = (self.bucket as u128 + add).min(cap as u128) as u64;
        self.bucket_at = self.bucket_at.max(now);
    }

    fn admit_front(&mut self, now: u64) {
        let (id, seq, _) = self.waiting.remove(0);
        self.sessions.push((id, seq, now));
    }

    fn pump(&mut self, now: u64) {
        if self.cfg.paused {
            return;
        }
        while !self.waiting.is_empty()
            && (self.sessions.len() as u64) < self.cfg.capacity
            && self.bucket >= UNIT
        {
            self.admit_front(now);
            self.bucket -= UNIT;
        }
    }

    fn touch(&mut self, id: u128, now: u64) -> bool {
        if let Some(s) = self.sessions.iter_mut().find(|s| s.0 == id) {
            s.2 = now;
            true
        } else if let Some(w) = self.waiting.iter_mut().find(|w| w.0 == id) {
            w.2 = now;
            true
        } else {
            false
        }
    }

    fn join(&mut self, id: u128, now: u64) -> bool {
        if !self.touch(id, now) {
            self.pump(now);
            if self.waiting.len() as u64 >= self.cfg.max_waiting {
                return false;
            }
            self.waiting.push((id, self.next_seq, now));
            self.next_seq += 1;
        }
        self.pump(now);
        true
    }

    fn end(&mut self, id: u128, reason: EndReason) -> bool {
        if let Some(i) = self.sessions.iter().position(|s| s.0 == id) {
            let (_, seq, _) = self.sessions.remove(i);
            self.ended.insert(id, (seq, reason));
            true
        } else if let Some(i) = self.waiting.iter().position(|w| w.0 == id) {
            let (_, seq, _) = self.waiting.remove(i);
            self.ended.insert(id, (seq, reason));
            true
        } else {
            self.ended.contains_key(&id)
        }
    }

    fn state(&self, id: u128) -> MState {
        if let Some(s) = self.sessions.iter().find(|s| s.0 == id) {
            MState::Admitted { seq: s.1 }
        } else if let Some(i) = self.waiting.iter().position(|w| w.0 == id) {
            MState::Waiting {
                seq: self.waiting[i].1,
                position: i as u64 + 1,
            }
        } else if let Some(&(seq, reason)) = self.ended.get(&id) {
            MState::Ended { seq, reason }
        } else {
            MState::Unknown
        }
    }
}

fn real_state(sm: &StateMachine, room: &str, id: u128) -> MState {
    match sm.visitor(room, VisitorId::from_u128(id)) {
        Ok(VisitorView {
            seq,
            state: VisitorState::Waiting { position, .. },
            ..
        }) => MState::Waiting {
            seq,
            position: position.expect("fifo rooms report positions"),
        },
        Ok(VisitorView {
            seq,
            state: VisitorState::Admitted { .. },
            ..
        }) => MState::Admitted { seq },
        Ok(VisitorView {
            seq,
            state: VisitorState::Ended { reason, .. },
            ..
        }) => MState::Ended { seq, reason },
        Err(Rejection::UnknownVisitor) => MState::Unknown,
        Err(e) => panic!("{e}"),
    }
}

// ---- generated workloads -------------------------------------------------------------------------

#[derive(Clone, Debug)]
enum Op {
    Join(usize, u128),
    Leave(usize, u128),
    Heartbeat(usize, u128),
    Touch(usize, Vec<u128>),
    Revoke(usize, u128),
    RevokeAll(usize),
    Pause(usize),
    Resume(usize),
    ForceAdmit(usize, u64),
    Tick,
}

fn op() -> impl Strategy<Value = Op> {
    let room = 0..2usize;
    let v = 1..=VISITORS;
    prop_oneof![
        8 => (room.clone(), v.clone()).prop_map(|(r, v)| Op::Join(r, v)),
        2 => (room.clone(), v.clone()).prop_map(|(r, v)| Op::Leave(r, v)),
        2 => (room.clone(), v.clone()).prop_map(|(r, v)| Op::Heartbeat(r, v)),
        2 => (room.clone(), proptest::collection::vec(v.clone(), 0..5)).prop_map(|(r, vs)| Op::Touch(r, vs)),
        1 => (room.clone(), v).prop_map(|(r, v)| Op::Revoke(r, v)),
        1 => room.clone().prop_map(Op::RevokeAll),
        1 => room.clone().prop_map(Op::Pause),
        2 => room.clone().prop_map(Op::Resume),
        1 => (room, 1..4u64).prop_map(|(r, n)| Op::ForceAdmit(r, n)),
        4 => Just(Op::Tick),
    ]
}

fn room_cfg() -> impl Strategy<Value = RoomConfig> {
    (1..4u64, 1..400u64, 0..3u64, 1..20u64, 1..20u64, 1..8u64).prop_map(
        |(capacity, apm, burst, sttl, wttl, maxw)| RoomConfig {
            capacity,
            admit_per_minute: apm,
            admit_burst: burst,
            session_ttl_secs: sttl,
            waiter_ttl_secs: wttl,
            max_waiting: maxw,
            ..RoomConfig::default()
        },
    )
}

const ROOMS: [&str; 2] = ["alpha", "beta"];

fn command(op: &Op) -> Command {
    let room = |r: &usize| ROOMS[*r].to_string();
    let id = |v: &u128| VisitorId::from_u128(*v);
    match op {
        Op::Join(r, v) => Command::Join {
            room: room(r),
            visitor: id(v),
        },
        Op::Leave(r, v) => Command::Leave {
            room: room(r),
            visitor: id(v),
        },
        Op::Heartbeat(r, v) => Command::Heartbeat {
            room: room(r),
            visitor: id(v),
        },
        Op::Touch(r, vs) => Command::Touch {
            room: room(r),
            visitors: vs.iter().map(id).collect(),
        },
        Op::Revoke(r, v) => Command::Revoke {
            room: room(r),
            visitor: id(v),
        },
        Op::RevokeAll(r) => Command::RevokeAll { room: room(r) },
        Op::Pause(r) => Command::Pause { room: room(r) },
        Op::Resume(r) => Command::Resume { room: room(r) },
        Op::ForceAdmit(r, n) => Command::ForceAdmit {
            room: room(r),
            count: *n,
        },
        Op::Tick => Command::Tick,
    }
}

/// Applies an op to the model; returns whether the real machine should accept it.
/// A visitor's state as the ledger tells it: the last record about it, positions aside.
#[derive(Clone, Debug, PartialEq, Eq)]
enum LState {
    Waiting { seq: u64 },
    Admitted { seq: u64 },
    Ended { seq: u64, reason: EndReason },
    Unknown,
}

fn reduce(m: MState) -> LState {
    match m {
        MState::Waiting { seq, .. } => LState::Waiting { seq },
        MState::Admitted { seq } => LState::Admitted { seq },
        MState::Ended { seq, reason } => LState::Ended { seq, reason },
        MState::Unknown => LState::Unknown,
    }
}

/// Folds ledger records into what they say of each visitor of each room; checks each
/// admission's rule against whether the entry held a force-admit for its room.
fn fold_ledger(
    view: &mut [BTreeMap<u128, LState>; 2],
    records: &[ledger::Record],
    forced_in: [bool; 2],
) -> Result<(), TestCaseError> {
    use ledger::{Event, Rule};
    for rec in records {
        let Some(r) = ROOMS.iter().position(|n| *n == rec.room) else {
            continue;
        };
        match &rec.event {
            Event::Joined { visitor, seq, .. } => {
                view[r].insert(visitor.as_u128(), LState::Waiting { seq: *seq });
            }
            Event::Admitted {
                visitor, seq, rule, ..
            } => {
                prop_assert!(
                    *rule == Rule::Head || (*rule == Rule::Forced && forced_in[r]),
                    "admitted by {:?} in a FIFO room",
                    rule
                );
                view[r].insert(visitor.as_u128(), LState::Admitted { seq: *seq });
            }
            Event::Ended {
                visitor,
                seq,
                reason,
                ..
            } => {
                view[r].insert(
                    visitor.as_u128(),
                    LState::Ended {
                        seq: *seq,
                        reason: *reason,
                    },
                );
            }
            Event::RevokedAll { .. } => {
                for st in view[r].values_mut() {
                    if let LState::Admitted { seq } = *st {
                        *st = LState::Ended {
                            seq,
                            reason: EndReason::Revoked,
                        };
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

fn model_apply(m: &mut [MRoom; 2], op: &Op, now: u64) -> (bool, u64) {
    if let Op::Tick = op {
        for r in m.iter_mut() {
            r.advance(now);
            r.pump(now);
        }
        return (true, 0);
    }
    let r = match op {
        Op::Join(r, _)
        | Op::Leave(r, _)
        | Op::Heartbeat(r, _)
        | Op::Touch(r, _)
        | Op::Revoke(r, _) => *r,
        Op::RevokeAll(r) | Op::Pause(r) | Op::Resume(r) | Op::ForceAdmit(r, _) => *r,
        Op::Tick => unreachable!(),
    };
    let room = &mut m[r];
    room.advance(now);
    let mut forced = 0;
    let ok = match op {
        Op::Join(_, v) => room.join(*v, now),
        Op::Leave(_, v) => room.end(*v, EndReason::Left),
        Op::Revoke(_, v) => room.end(*v, EndReason::Revoked),
        Op::Heartbeat(_, v) => room.touch(*v, now) || room.ended.contains_key(v),
        Op::Touch(_, vs) => {
            for v in vs {
                room.touch(*v, now);
            }
            true
        }
        Op::RevokeAll(_) => {
            let mut all: Vec<_> = room.sessions.drain(..).collect();
            all.sort_by_key(|s| s.1);
            for (id, seq, _) in all {
                room.ended.insert(id, (seq, EndReason::Revoked));
            }
            true
        }
        Op::Pause(_) => {
            room.cfg.paused = true;
            true
        }
        Op::Resume(_) => {
            room.cfg.paused = false;
            true
        }
        Op::ForceAdmit(_, n) => {
            while forced < *n
                && !room.waiting.is_empty()
                && (room.sessions.len() as u64) < room.cfg.capacity
            {
                room.admit_front(now);
                forced += 1;
            }
            true
        }
        Op::Tick => unreachable!(),
    };
    room.pump(now);
    (ok, forced)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn fifo_rooms_match_the_model_and_keep_the_invariants(
        cfgs in (room_cfg(), room_cfg()),
        ops in proptest::collection::vec((op(), 0..4_000u64, 1..3usize), 1..150),
        snap_at in 0..150usize,
    ) {
        let mut sm = StateMachine::new();
        sm.keep_ledger(true);
        let mut ledger_view: [BTreeMap<u128, LState>; 2] = Default::default();
        let mut records = Vec::new();
        let cfgs = [cfgs.0, cfgs.1];
        let mut model = [MRoom::new(cfgs[0].clone(), T0), MRoom::new(cfgs[1].clone(), T0)];
        let create: Vec<Command> = ROOMS.iter().zip(&cfgs)
            .map(|(n, c)| Command::CreateRoom { room: n.to_string(), config: c.clone() }).collect();
        let mut log = vec![Proposal { time_ms: T0, commands: create }];
        sm.apply(1, 1, &log[0]);

        let mut now = T0;
        // Per room: (time, metered admissions at that time) for the rate invariant.
        let mut admissions: [Vec<(u64, u64)>; 2] = [vec![], vec![]];
        let mut last_seq = [0u64; 2];
        let mut restored: Option<(StateMachine, usize)> = None;
        let mut i = 0;
        while i < ops.len() {
            let (_, dt, batch) = &ops[i];
            now += dt;
            let batch_ops: Vec<Op> = ops[i..(i + batch).min(ops.len())].iter().map(|o| o.0.clone()).collect();
            i += batch_ops.len();
            let before: Vec<Vec<MState>> = (0..2).map(|r| (1..=VISITORS).map(|v| real_state(&sm, ROOMS[r], v)).collect()).collect();
            let admitted_before: Vec<u64> = (0..2).map(|r| sm.room(ROOMS[r]).unwrap().totals.admitted).collect();
            let proposal = Proposal { time_ms: now, commands: batch_ops.iter().map(command).collect() };
            let index = log.len() as u64 + 1;
            let outcomes = sm.apply(1, index, &proposal);
            log.push(proposal);
            let mut forced = [0u64; 2];
            for (op, out) in batch_ops.iter().zip(&outcomes) {
                let (ok, f) = model_apply(&mut model, op, now);
                if let Op::ForceAdmit(r, _) = op { forced[*r] += f; }
                prop_assert_eq!(ok, !matches!(out, Outcome::Rejected(_)), "op {:?} gave {:?}", op, out);
            }
            // The ledger tells every decision the model made, each admission by its rule.
            let forced_in = [0, 1].map(|r| batch_ops.iter().any(|o| matches!(o, Op::ForceAdmit(x, _) if *x == r)));
            let made = sm.take_ledger();
            fold_ledger(&mut ledger_view, &made, forced_in)?;
            records.extend(made);
            for r in 0..2 {
                for v in 1..=VISITORS {
                    let told = ledger_view[r].get(&v).cloned().unwrap_or(LState::Unknown);
                    prop_assert_eq!(told, reduce(model[r].state(v)), "ledger of room {} visitor {}", r, v);
                }
            }
            for r in 0..2 {
                let room = sm.room(ROOMS[r]).unwrap();
                // The model agrees on every visitor.
                for v in 1..=VISITORS {
                    prop_assert_eq!(real_state(&sm, ROOMS[r], v), model[r].state(v), "room {} visitor {}", r, v);
                }
                // 1. Capacity.
                prop_assert!(room.active <= room.config.capacity);
                // 2. Rate: metered admissions in any window [t1, t2] ≤ burst + rate × (t2 − t1).
                let metered = room.totals.admitted - admitted_before[r] - forced[r];
                if metered > 0 { admissions[r].push((now, metered)); }
                let burst = room.config.burst();
                let apm = room.config.admit_per_minute;
                let hist = &admissions[r];
                for a in 0..hist.len() {
                    let mut sum = 0;
                    for b in &hist[a..] {
                        sum += b.1;
                        prop_assert!(sum <= burst + (b.0 - hist[a].0) * apm / 60_000,
                            "rate exceeded in room {}: {:?}", r, hist);
                    }
                }
                // 3. FIFO: whoever was admitted by this entry had no earlier waiter left behind.
                let after: Vec<MState> = (1..=VISITORS).map(|v| real_state(&sm, ROOMS[r], v)).collect();
                for (k, st) in after.iter().enumerate() {
                    if let (MState::Waiting { seq: s_new, .. }, MState::Admitted { .. }) = (&before[r][k], st) {
                        for other in &after {
                            if let MState::Waiting { seq, .. } = other {
                                prop_assert!(seq > s_new, "fifo inversion in room {}", r);
                            }
                        }
                    }
                }
                // 5. Sequence numbers: unique and increasing; each visitor holds one place.
                prop_assert!(room.next_seq >= last_seq[r]);
                last_seq[r] = room.next_seq;
                let mut seqs: Vec<u64> = after.iter().filter_map(|s| match s {
                    MState::Waiting { seq, .. } | MState::Admitted { seq } => Some(*seq),
                    _ => None,
                }).collect();
                let n = seqs.len();
                seqs.sort();
                seqs.dedup();
                prop_assert_eq!(seqs.len(), n);
            }
            if restored.is_none() && log.len() > snap_at {
                restored = Some((StateMachine::restore(&sm.snapshot()).unwrap(), log.len()));
            }
        }
        // 6. Replay: the same log gives the same digest and ledger; so does a snapshot plus
        // the rest, from the snapshot on.
        let mut replay = StateMachine::new();
        replay.keep_ledger(true);
        for (k, p) in log.iter().enumerate() {
            replay.apply(1, k as u64 + 1, p);
        }
        prop_assert_eq!(replay.digest(), sm.digest());
        prop_assert_eq!(&replay.take_ledger(), &records);
        prop_assert_eq!(ledger::Chain::default().after(&records), sm.ledger_chain());
        if let Some((mut r, from)) = restored {
            r.keep_ledger(true);
            for (k, p) in log.iter().enumerate().skip(from) {
                r.apply(1, k as u64 + 1, p);
            }
            prop_assert_eq!(r.digest(), sm.digest());
            let tail: Vec<_> = records.iter().filter(|x| x.index > from as u64).cloned().collect();
            prop_assert_eq!(r.take_ledger(), tail);
        }
    }

    #[test]
    fn lottery_and_mode_switches_keep_capacity_sequences_and_replay(
        ops in proptest::collection::vec((0..6u8, 1..=40u128, 0..3_000u64), 1..200),
        snap_at in 0..200usize,
    ) {
        let cfg = RoomConfig { mode: Mode::Lottery, capacity: 3, admit_per_minute: 240, session_ttl_secs: 5, waiter_ttl_secs: 20, ..RoomConfig::default() };
        let mut log = vec![Proposal { time_ms: T0, commands: vec![Command::CreateRoom { room: "lot".into(), config: cfg }] }];
        let mut now = T0;
        for (kind, v, dt) in &ops {
            now += dt;
            let visitor = VisitorId::from_u128(*v);
            let room = "lot".to_string();
            let c = match kind {
                0 | 1 => Command::Join { room, visitor },
                2 => Command::Leave { room, visitor },
                3 => Command::Tick,
                4 => Command::SetMode { room, mode: [Mode::Fifo, Mode::Lottery, Mode::Lottery][(*v % 3) as usize] },
                _ => Command::Heartbeat { room, visitor },
            };
            log.push(Proposal { time_ms: now, commands: vec![c] });
        }
        let mut sm = StateMachine::new();
        let mut snap = None;
        let mut seen_seq: BTreeMap<u128, u64> = BTreeMap::new();
        let mut max_seq = 0;
        for (k, p) in log.iter().enumerate() {
            let out = sm.apply(2, k as u64 + 1, p);
            let room = sm.room("lot").unwrap();
            prop_assert!(room.active <= room.config.capacity);
            if let [Outcome::Visitor(view)] = out.as_slice() {
                if let Command::Join { .. } = p.commands[0] {
                    // A new place gets a fresh, larger sequence number; a resumed place keeps its own.
                    match seen_seq.get(&view.visitor.as_u128()) {
                        Some(&s) if s == view.seq => {}
                        _ => { prop_assert!(view.seq > max_seq); max_seq = view.seq; }
                    }
                    seen_seq.insert(view.visitor.as_u128(), view.seq);
                }
            }
            if k == snap_at { snap = Some((sm.snapshot(), k)); }
        }
        let mut again = StateMachine::new();
        for (k, p) in log.iter().enumerate() { again.apply(2, k as u64 + 1, p); }
        prop_assert_eq!(again.digest(), sm.digest());
        if let Some((bytes, k)) = snap {
            let mut r = StateMachine::restore(&bytes).unwrap();
            for (j, p) in log.iter().enumerate().skip(k + 1) { r.apply(2, j as u64 + 1, p); }
            prop_assert_eq!(r.digest(), sm.digest());
        }
    }
}
