//! Property tests of the entry policy: random joins (from a few client networks, with a few
//! identities and challenges), leaves and time steps, checked after every command against what
//! the rules promise: a network holds at most its share of live places, an identity at most one,
//! a challenge mints at most one place while it is valid, a network holds at most its share of
//! sessions without leaving a place free that another could use, waiters away within a grace
//! period (and those of a network at its share) are passed over without leaving a place free
//! that a waiter present could use, and a replica restored from a snapshot is the same state.

use proptest::prelude::*;
use sluice_statemachine::*;
use std::collections::BTreeMap;

const T0: u64 = 1_800_000_000_000;
const SHARE: u64 = 2;
const CHALLENGE_TTL_MS: u64 = 20_000;

#[derive(Clone, Debug)]
enum Op {
    /// visitor, network, identity, challenge (its id and the time step it was issued in)
    Join(u8, u8, Option<u8>, Option<u8>),
    Leave(u8),
    Step(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u8..16, 0u8..3, proptest::option::of(0u8..5), proptest::option::of(0u8..8))
            .prop_map(|(v, n, i, c)| Op::Join(v, n, i, c)),
        2 => (0u8..16).prop_map(Op::Leave),
        1 => (1u64..15_000).prop_map(Op::Step),
    ]
}

fn vid(v: u8) -> VisitorId {
    VisitorId::from_u128(1_000 + v as u128)
}

fn live(sm: &StateMachine, v: u8) -> bool {
    matches!(
        sm.visitor("r", vid(v)).map(|view| view.state),
        Ok(VisitorState::Waiting { .. } | VisitorState::Admitted { .. })
    )
}

/// A replica with room `r` under `policy`, driven one command per entry.
fn replica(policy: &EntryPolicy) -> Replica {
    replica_of(
        RoomConfig {
            capacity: 2,
            admit_per_minute: 60,
            ..RoomConfig::default()
        },
        policy,
    )
}

/// A replica with room `r` of `config` under `policy`.
fn replica_of(config: RoomConfig, policy: &EntryPolicy) -> Replica {
    let mut r = Replica {
        sm: StateMachine::new(),
        index: 0,
        now: T0,
    };
    for cmd in [
        Command::CreateRoom {
            room: "r".into(),
            config,
        },
        Command::SetEntryPolicy {
            room: "r".into(),
            policy: policy.encode(),
        },
    ] {
        let out = r.apply(cmd);
        assert!(matches!(out, Outcome::Room(_)), "{out:?}");
    }
    r
}

/// A state machine fed one command per entry, at a time the ops move on.
struct Replica {
    sm: StateMachine,
    index: u64,
    now: u64,
}

impl Replica {
    fn apply(&mut self, cmd: Command) -> Outcome {
        self.index += 1;
        let proposal = Proposal {
            time_ms: self.now,
            commands: vec![cmd],
        };
        self.sm.apply(1, self.index, &proposal).pop().unwrap()
    }

    fn join(&mut self, v: u8, evidence: JoinEvidence) -> Outcome {
        self.apply(Command::JoinWith {
            room: "r".into(),
            visitor: vid(v),
            evidence: evidence.encode(),
        })
    }

    /// Plays a leave or a time step (a join is the test's own to play).
    fn leave_or_step(&mut self, op: &Op) {
        match *op {
            Op::Leave(v) => {
                self.apply(Command::Leave {
                    room: "r".into(),
                    visitor: vid(v),
                });
            }
            Op::Step(dt) => {
                self.now += dt;
                self.apply(Command::Tick);
            }
            Op::Join(..) => unreachable!("joins are played by the test"),
        }
    }

    fn joined(&self) -> u64 {
        self.sm.room("r").unwrap().totals.joined
    }

    /// A replica restored from this one's snapshot is the same state.
    fn restores_alike(&self) -> bool {
        StateMachine::restore(&self.sm.snapshot()).unwrap().digest() == self.sm.digest()
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn the_entry_rules_hold_in_every_reachable_state(ops in proptest::collection::vec(op(), 1..120)) {
        let mut r = replica(&EntryPolicy {
            places_per_client_max: Some(SHARE),
            proof_of_work: Some(PowRule { work: 10, cost: 1, double_every_waiting: None, work_max: 10 }),
            ..EntryPolicy::default()
        });
        // What the test knows of each place it saw minted: network, identity.
        let mut place: BTreeMap<u8, (u8, Option<u8>)> = BTreeMap::new();
        // Challenges that minted a place, and until when they were valid.
        let mut minted: BTreeMap<u8, u64> = BTreeMap::new();
        // Each challenge id's expiry: issued at the first time step it is used in.
        let mut expiry: BTreeMap<u8, u64> = BTreeMap::new();
        for op in ops {
            match op {
                Op::Join(v, n, who, ch) => {
                    let was_live = live(&r.sm, v);
                    let joined_before = r.joined();
                    let now = r.now;
                    let challenge = ch.map(|c| ChallengeUse {
                        id: [c; 16],
                        expires_ms: *expiry.entry(c).or_insert(now + CHALLENGE_TTL_MS),
                        work: 10,
                        cost: 1,
                    });
                    let evidence = JoinEvidence {
                        client: Some(ClientKey([n; 16])),
                        challenge,
                        identity: who.map(|i| IdentityKey([i; 16])),
                        external_passed: false,
                        ..JoinEvidence::default()
                    };
                    r.join(v, evidence);
                    if r.joined() > joined_before {
                        prop_assert!(!was_live);
                        let c = ch.expect("a place was minted without a challenge");
                        if let Some(&until) = minted.get(&c) {
                            prop_assert!(until <= now, "challenge {c} minted a second place while valid");
                        }
                        minted.insert(c, expiry[&c]);
                        place.insert(v, (n, who));
                    }
                }
                op => r.leave_or_step(&op),
            }
            let mut per_net: BTreeMap<u8, u64> = BTreeMap::new();
            for (&v, &(n, _)) in place.iter().filter(|(&v, _)| live(&r.sm, v)) {
                let _ = v;
                *per_net.entry(n).or_default() += 1;
            }
            for (n, count) in per_net {
                prop_assert!(count <= SHARE, "network {n} holds {count} places");
            }
        }
        prop_assert!(r.restores_alike());
    }

    #[test]
    fn one_identity_never_holds_two_places(ops in proptest::collection::vec(op(), 1..120)) {
        let mut r = replica(&EntryPolicy {
            identity: Some(IdentityRule { salt: [9; 16] }),
            ..EntryPolicy::default()
        });
        let mut identity_of: BTreeMap<u8, u8> = BTreeMap::new();
        for op in ops {
            match op {
                Op::Join(v, _, who, _) => {
                    let joined_before = r.joined();
                    let evidence = JoinEvidence {
                        identity: who.map(|i| IdentityKey([i; 16])),
                        ..JoinEvidence::default()
                    };
                    let out = r.join(v, evidence);
                    if r.joined() > joined_before {
                        identity_of.insert(v, who.expect("a place was minted without an identity"));
                    } else if let (Some(i), Outcome::Visitor(view)) = (who, &out) {
                        // A join with a held identity answers with the holder's place.
                        if let Some((&holder, _)) = identity_of.iter().find(|(&h, &hi)| hi == i && live(&r.sm, h)) {
                            prop_assert_eq!(view.visitor, vid(holder));
                        }
                    }
                }
                op => r.leave_or_step(&op),
            }
            let mut holders: BTreeMap<u8, u64> = BTreeMap::new();
            for (&v, &i) in &identity_of {
                if live(&r.sm, v) {
                    *holders.entry(i).or_default() += 1;
                }
            }
            for (i, n) in holders {
                prop_assert!(n <= 1, "identity {i} holds {n} places");
            }
        }
        prop_assert!(r.restores_alike());
    }

    /// Under `sessions_per_client_max`, no network ever holds more admitted sessions than its
    /// share, and the room never leaves a place free while a waiter whose network is under its
    /// share waits (tokens are plentiful here, so only the cap can hold anyone back).
    #[test]
    fn a_network_never_holds_more_than_its_share_of_sessions(ops in proptest::collection::vec(op(), 1..150)) {
        const CAPACITY: u64 = 4;
        const SESSIONS: u64 = 1;
        let mut r = replica_of(
            RoomConfig {
                capacity: CAPACITY,
                admit_per_minute: 6_000_000,
                admit_burst: 100_000,
                ..RoomConfig::default()
            },
            &EntryPolicy {
                sessions_per_client_max: Some(SESSIONS),
                ..EntryPolicy::default()
            },
        );
        let mut network_of: BTreeMap<u8, u8> = BTreeMap::new();
        for op in ops {
            match op {
                Op::Join(v, n, _, _) => {
                    let joined_before = r.joined();
                    r.join(v, JoinEvidence { client: Some(ClientKey([n; 16])), ..JoinEvidence::default() });
                    if r.joined() > joined_before {
                        network_of.insert(v, n);
                    }
                }
                op => r.leave_or_step(&op),
            }
            let state = |v: u8| r.sm.visitor("r", vid(v)).map(|view| view.state);
            let mut sessions: BTreeMap<u8, u64> = BTreeMap::new();
            let mut waiting_nets: Vec<u8> = Vec::new();
            for (&v, &n) in &network_of {
                match state(v) {
                    Ok(VisitorState::Admitted { .. }) => *sessions.entry(n).or_default() += 1,
                    Ok(VisitorState::Waiting { .. }) => waiting_nets.push(n),
                    _ => {}
                }
            }
            for (n, count) in &sessions {
                prop_assert!(*count <= SESSIONS, "network {n} holds {count} sessions");
            }
            let active = r.sm.room("r").unwrap().active;
            if active < CAPACITY {
                for n in waiting_nets {
                    prop_assert!(
                        sessions.get(&n).copied().unwrap_or(0) >= SESSIONS,
                        "a place is free while a waiter of network {n}, under its share, waits"
                    );
                }
            }
        }
        prop_assert!(r.restores_alike());
    }

    #[test]
    fn waiters_held_back_never_keep_a_free_place_from_one_present(
        ops in proptest::collection::vec(grace_op(), 1..150)
    ) {
        const CAPACITY: u64 = 3;
        const TTL_MS: u64 = 30_000;
        let mut r = replica_of(
            RoomConfig {
                capacity: CAPACITY,
                admit_per_minute: 6_000_000,
                admit_burst: 100_000,
                waiter_ttl_secs: TTL_MS / 1000,
                session_ttl_secs: 3_600,
                ..RoomConfig::default()
            },
            &EntryPolicy {
                grace_secs: Some(60),
                sessions_per_client_max: Some(1),
                ..EntryPolicy::default()
            },
        );
        let mut network_of: BTreeMap<u8, u8> = BTreeMap::new();
        for op in ops {
            match op {
                GraceOp::Join(v, n) => {
                    let joined_before = r.joined();
                    r.join(v, JoinEvidence { client: Some(ClientKey([n; 16])), ..JoinEvidence::default() });
                    if r.joined() > joined_before {
                        network_of.insert(v, n);
                    }
                }
                GraceOp::Touch(v) => {
                    r.apply(Command::Touch { room: "r".into(), visitors: vec![vid(v)] });
                }
                GraceOp::Other(op) => r.leave_or_step(&op),
            }
            let state = |v: u8| r.sm.visitor("r", vid(v)).map(|view| view.state);
            let mut sessions: BTreeMap<u8, u64> = BTreeMap::new();
            for (&v, &n) in &network_of {
                if let Ok(VisitorState::Admitted { .. }) = state(v) {
                    *sessions.entry(n).or_default() += 1;
                }
            }
            if r.sm.room("r").unwrap().active < CAPACITY {
                for (&v, &n) in &network_of {
                    if let Ok(VisitorState::Waiting { last_seen_ms, .. }) = state(v) {
                        let away = last_seen_ms + TTL_MS <= r.now;
                        let network_full = sessions.get(&n).copied().unwrap_or(0) >= 1;
                        prop_assert!(
                            away || network_full,
                            "a place is free while waiter {v}, present and under its share, waits"
                        );
                    }
                }
            }
        }
        prop_assert!(r.restores_alike());
    }
}

#[derive(Clone, Debug)]
enum GraceOp {
    /// visitor, network
    Join(u8, u8),
    Touch(u8),
    Other(Op),
}

fn grace_op() -> impl Strategy<Value = GraceOp> {
    prop_oneof![
        5 => (0u8..16, 0u8..4).prop_map(|(v, n)| GraceOp::Join(v, n)),
        3 => (0u8..16).prop_map(GraceOp::Touch),
        2 => (0u8..16).prop_map(|v| GraceOp::Other(Op::Leave(v))),
        3 => (1u64..40_000).prop_map(|dt| GraceOp::Other(Op::Step(dt))),
    ]
}
