//! Property tests of priority lanes and access codes: random joins (in the room's own line, or
//! with a code for one of two lanes, or a code redeemed while waiting, or the same code again
//! from a second tab), leaves and time, checked after every entry against the rules: capacity
//! never exceeded, first come first served within each lane, no visitor of a later line admitted
//! while an earlier line had a waiter from before, no code used more than it allows, and a
//! replica restored from a snapshot in the same state.

use proptest::prelude::*;
use sluice_statemachine::*;
use std::collections::BTreeMap;

const T0: u64 = 1_800_000_000_000;
const CAPACITY: u64 = 3;
/// Codes 1..=8 for lane `a` (two uses each), 11..=18 for lane `b` (one use each).
const LANES: [&str; 2] = ["a", "b"];

#[derive(Clone, Debug)]
enum Op {
    /// Visitor joins the room's own line.
    Join(u8),
    /// Visitor joins (or, waiting, redeems) with code `c`.
    Code(u8, u8),
    /// Visitor leaves.
    Leave(u8),
    /// Time passes (ms).
    Wait(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0u8..24).prop_map(Op::Join),
        3 => (0u8..24, prop_oneof![1u8..=8, 11u8..=18]).prop_map(|(v, c)| Op::Code(v, c)),
        1 => (0u8..24).prop_map(Op::Leave),
        3 => (0u64..3_000).prop_map(Op::Wait),
    ]
}

fn code(c: u8) -> CodeHash {
    CodeHash([c; 16])
}

fn vid(v: u8) -> VisitorId {
    VisitorId::from_u128(u128::from(v) + 1)
}

/// Where each visitor stands: its line (0, 1: the lanes; 2: the room's own) and state.
fn snapshot_states(sm: &StateMachine) -> BTreeMap<u8, (Option<usize>, bool)> {
    (0u8..24)
        .filter_map(|v| {
            let view = sm.visitor("r", vid(v)).ok()?;
            match view.state {
                VisitorState::Waiting { lane, .. } => {
                    let l = match lane.as_deref() {
                        Some("a") => 0,
                        Some("b") => 1,
                        _ => 2,
                    };
                    Some((v, (Some(l), false)))
                }
                VisitorState::Admitted { .. } => Some((v, (None, true))),
                VisitorState::Ended { .. } => None,
            }
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn lanes_keep_their_order_and_priority_and_codes_their_uses(ops in proptest::collection::vec(op(), 1..120)) {
        let mut sm = StateMachine::new();
        let (mut index, mut now) = (0u64, T0);
        let mut run = |sm: &mut StateMachine, now: u64, cmd: Command| {
            index += 1;
            sm.apply(1, index, &Proposal { time_ms: now, commands: vec![cmd] }).pop().unwrap()
        };
        run(&mut sm, now, Command::CreateRoom {
            room: "r".into(),
            config: RoomConfig {
                capacity: CAPACITY,
                admit_per_minute: 60,
                session_ttl_secs: 4,
                waiter_ttl_secs: 3_600,
                ..RoomConfig::default()
            },
        });
        let policy = EntryPolicy {
            lanes: LANES.iter().map(|n| Lane { name: (*n).into(), opens_at_ms: None, share_permille: None, lottery: false }).collect(),
            ..EntryPolicy::default()
        };
        run(&mut sm, now, Command::SetEntryPolicy { room: "r".into(), policy: policy.encode() });
        for (lane, first, uses) in [("a", 1u8, 2u32), ("b", 11, 1)] {
            let o = run(&mut sm, now, Command::CreateCodes {
                room: "r".into(),
                batch: CodeBatch { label: String::new(), lane: Some(lane.into()), uses, expires_ms: None },
                codes: (first..first + 8).map(|c| NewCode { hash: code(c), identity: None }).collect(),
            });
            prop_assert!(matches!(o, Outcome::Codes(_)), "{o:?}");
        }
        // When each visitor entered its current line (step), for FIFO within the line.
        let mut entered: BTreeMap<u8, (usize, u64)> = BTreeMap::new();
        let mut before = snapshot_states(&sm);
        for (step, op) in ops.iter().enumerate() {
            let step = step as u64 + 1;
            match op {
                Op::Join(v) => { run(&mut sm, now, Command::Join { room: "r".into(), visitor: vid(*v) }); }
                Op::Code(v, c) => {
                    let evidence = JoinEvidence { code: Some(code(*c)), ..JoinEvidence::default() };
                    run(&mut sm, now, Command::JoinWith { room: "r".into(), visitor: vid(*v), evidence: evidence.encode() });
                }
                Op::Leave(v) => { run(&mut sm, now, Command::Leave { room: "r".into(), visitor: vid(*v) }); }
                Op::Wait(ms) => { now += ms; run(&mut sm, now, Command::Tick); }
            }
            let after = snapshot_states(&sm);
            let room = sm.room("r").unwrap();
            prop_assert!(room.active <= CAPACITY, "capacity: {room:?}");
            for (&v, &(line, _)) in &after {
                if let Some(l) = line {
                    if before.get(&v).and_then(|b| b.0) != Some(l) {
                        entered.insert(v, (l, step));
                    }
                }
            }
            let admitted_now: Vec<u8> = after
                .iter()
                .filter(|(v, (_, adm))| *adm && !before.get(v).is_some_and(|b| b.1))
                .map(|(v, _)| *v)
                .collect();
            // A visitor admitted by the join that placed it never waited: its line is the op's.
            let joined_line = match op {
                Op::Join(v) => Some((*v, 2)),
                Op::Code(v, c) => Some((*v, if *c <= 8 { 0 } else { 1 })),
                _ => None,
            };
            for &x in &admitted_now {
                let (lx, ex) = match (entered.get(&x), joined_line) {
                    (Some(&e), _) => e,
                    (None, Some((v, l))) if v == x => (l, step),
                    _ => panic!("step {step}: {x} admitted without having joined"),
                };
                // Nobody who entered the same line earlier, or an earlier line before this
                // step, still waits.
                for (&y, &(ly, _)) in &after {
                    let Some(ly) = ly else { continue };
                    let (_, ey) = entered[&y];
                    let was_waiting = before.get(&y).is_some_and(|b| b.0 == Some(ly));
                    prop_assert!(
                        !(ly == lx && ey < ex && was_waiting),
                        "step {step}: {x} admitted before {y}, who entered line {ly} first"
                    );
                    prop_assert!(
                        !(ly < lx && was_waiting),
                        "step {step}: {x} of line {lx} admitted while {y} of line {ly} waited"
                    );
                }
            }
            for b in sm.code_batches("r").unwrap() {
                prop_assert!(b.used <= b.codes * u64::from(b.batch.uses), "{b:?}");
            }
            for x in admitted_now {
                entered.remove(&x);
            }
            before = after;
        }
        let restored = StateMachine::restore(&sm.snapshot()).unwrap();
        prop_assert_eq!(restored.digest(), sm.digest());
        prop_assert_eq!(snapshot_states(&restored), snapshot_states(&sm));
    }
}
