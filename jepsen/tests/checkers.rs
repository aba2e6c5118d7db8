//! Every checker is fed known-bad histories and must report them (and accept good ones).

mod common;

use common::{prerequisites, use_adya, Need};
use serde_json::{json, Value};
use sluice_jepsen::checker::{self, Limit, Limits, LogEntry};
use sluice_jepsen::history::{History, Kind};
use sluice_statemachine::{Command, Proposal, RoomConfig, StateMachine, VisitorId};
use std::collections::BTreeMap;

fn op(h: &History, p: u64, f: &str, invoke: Value, done: Kind, value: Value) {
    h.record(Kind::Invoke, p, f, invoke, 1, None);
    h.record(done, p, f, value, 1, None);
}

#[test]
fn list_append_catches_a_stale_read() {
    if !prerequisites(
        "checkers::list_append_catches_a_stale_read",
        &[Need::Program("adya")],
    ) {
        return;
    }
    use_adya();
    let dir = tempfile::tempdir().unwrap();
    let good = History::new();
    op(
        &good,
        0,
        "txn",
        json!([["append", 1, 1]]),
        Kind::Ok,
        json!([["append", 1, 1]]),
    );
    op(
        &good,
        1,
        "txn",
        json!([["r", 1, null]]),
        Kind::Ok,
        json!([["r", 1, [1]]]),
    );
    op(
        &good,
        0,
        "txn",
        json!([["append", 1, 2]]),
        Kind::Ok,
        json!([["append", 1, 2]]),
    );
    op(
        &good,
        1,
        "txn",
        json!([["r", 1, null]]),
        Kind::Ok,
        json!([["r", 1, [1, 2]]]),
    );
    let v = checker::list_append(&good.events(), dir.path());
    assert!(v.valid, "{v:?}");
    // A read that started after an append was acknowledged, yet misses it.
    let stale = History::new();
    op(
        &stale,
        0,
        "txn",
        json!([["append", 1, 1]]),
        Kind::Ok,
        json!([["append", 1, 1]]),
    );
    op(
        &stale,
        0,
        "txn",
        json!([["append", 1, 2]]),
        Kind::Ok,
        json!([["append", 1, 2]]),
    );
    op(
        &stale,
        1,
        "txn",
        json!([["r", 1, null]]),
        Kind::Ok,
        json!([["r", 1, [1, 2]]]),
    );
    op(
        &stale,
        2,
        "txn",
        json!([["r", 1, null]]),
        Kind::Ok,
        json!([["r", 1, [1]]]),
    );
    let v = checker::list_append(&stale.events(), dir.path());
    assert!(!v.valid, "a stale read must be reported: {v:?}");
}

#[test]
fn lost_appends_and_lost_joins_are_reported() {
    let h = History::new();
    op(
        &h,
        0,
        "txn",
        json!([["append", 0, 5]]),
        Kind::Ok,
        json!([["append", 0, 5]]),
    );
    op(
        &h,
        0,
        "txn",
        json!([["append", 0, 6]]),
        Kind::Ok,
        json!([["append", 0, 6]]),
    );
    let finals = BTreeMap::from([(0u64, vec![5u64, 6])]);
    assert!(checker::appends_kept(&h.events(), &finals).valid);
    let finals = BTreeMap::from([(0u64, vec![5u64])]);
    let v = checker::appends_kept(&h.events(), &finals);
    assert!(!v.valid && v.ops.iter().any(|o| o.contains('6')), "{v:?}");

    let h = History::new();
    op(
        &h,
        0,
        "join",
        json!(1),
        Kind::Ok,
        json!({"v": 1, "state": "waiting", "index": 3}),
    );
    op(
        &h,
        1,
        "join",
        json!(2),
        Kind::Ok,
        json!({"v": 2, "state": "admitted", "index": 4}),
    );
    op(&h, 2, "join", json!(3), Kind::Info, json!(3));
    const TTL: u64 = 600_000;
    let finals =
        |one: &str, two: &str| BTreeMap::from([(1, one.to_string()), (2, two.to_string())]);
    // Visitor 2 never sent a leave: it cannot have left.
    let no_leave = checker::no_lost_joins(&h.events(), &finals("admitted", "rejected:left"), TTL);
    assert!(!no_leave.valid, "{no_leave:?}");
    // A leave that failed did not happen either.
    op(&h, 3, "leave", json!(2), Kind::Fail, json!(2));
    let failed = checker::no_lost_joins(&h.events(), &finals("admitted", "rejected:left"), TTL);
    assert!(!failed.valid, "{failed:?}");
    // One that was sent, acknowledged or not, may have.
    h.record(Kind::Invoke, 4, "leave", json!(2), 1, None);
    assert!(
        checker::no_lost_joins(&h.events(), &finals("admitted", "rejected:left"), TTL).valid,
        "an indeterminate join may be absent, a visitor whose leave was sent may have left"
    );
    assert!(checker::no_lost_joins(&h.events(), &finals("waiting", "rejected:expired"), TTL).valid);
    let lost = finals("admitted", "unknown");
    assert!(!checker::no_lost_joins(&h.events(), &lost, TTL).valid);
    // A waiter abandoned although its TTL cannot have run out since it joined.
    let abandoned = finals("rejected:abandoned", "admitted");
    let v = checker::no_lost_joins(&h.events(), &abandoned, TTL);
    assert!(
        !v.valid && v.ops.iter().any(|o| o.contains("abandoned")),
        "{v:?}"
    );
    // A history long enough (the last event an hour on) allows it.
    let mut events = h.events();
    let last = events.last_mut().unwrap();
    last.time += 3_600 * 1_000_000_000;
    assert!(checker::no_lost_joins(&events, &abandoned, TTL).valid);
}

#[test]
fn capacity_overshoot_and_rate_excess_are_reported() {
    let h = History::new();
    op(
        &h,
        0,
        "room",
        Value::Null,
        Kind::Ok,
        json!({"active": 3, "admitted": 3, "index": 10}),
    );
    assert!(checker::capacity(&h.events(), &Limits::constant(3, 120, 2)).valid);
    op(
        &h,
        0,
        "room",
        Value::Null,
        Kind::Ok,
        json!({"active": 4, "admitted": 4, "index": 11}),
    );
    assert!(!checker::capacity(&h.events(), &Limits::constant(3, 120, 2)).valid);

    // Two reads microseconds apart, 40 admissions between them, at 120/min with burst 2.
    let h = History::new();
    op(
        &h,
        0,
        "room",
        Value::Null,
        Kind::Ok,
        json!({"active": 0, "admitted": 0}),
    );
    op(
        &h,
        0,
        "room",
        Value::Null,
        Kind::Ok,
        json!({"active": 0, "admitted": 2}),
    );
    assert!(checker::rate(&h.events(), &Limits::constant(3, 120, 2)).valid);
    op(
        &h,
        0,
        "room",
        Value::Null,
        Kind::Ok,
        json!({"active": 0, "admitted": 40}),
    );
    let v = checker::rate(&h.events(), &Limits::constant(3, 120, 2));
    assert!(!v.valid && v.ops.len() == 2, "{v:?}");
}

/// A room read at `at_s` seconds into the history (the read takes 10 ms).
fn read_at(h: &History, at_s: f64, active: u64, admitted: u64) {
    let t = (at_s * 1e9) as u64;
    h.record_at(t, Kind::Invoke, 0, "room", Value::Null, 1, None);
    h.record_at(
        t + 10_000_000,
        Kind::Ok,
        0,
        "room",
        json!({"active": active, "admitted": admitted}),
        1,
        None,
    );
}

#[test]
fn each_read_is_held_to_the_phase_in_effect() {
    // A presale (capacity 2, 60/min) until 10 s, the public sale (capacity 4, 240/min) until
    // 20 s, a last drop (capacity 6, 30/min) after; starts may be off by 1 s, sessions carry 3 s.
    let limits = Limits {
        phases: vec![
            Limit {
                from_ns: 0,
                capacity: 2,
                per_minute: 60,
            },
            Limit {
                from_ns: 10_000_000_000,
                capacity: 4,
                per_minute: 240,
            },
            Limit {
                from_ns: 20_000_000_000,
                capacity: 6,
                per_minute: 30,
            },
        ],
        burst: 2,
        slack_ns: 1_000_000_000,
        carry_ns: 3_000_000_000,
    };
    let check = |reads: &[(f64, u64, u64)]| {
        let h = History::new();
        for &(at, active, admitted) in reads {
            read_at(&h, at, active, admitted);
        }
        let e = h.events();
        (
            checker::capacity(&e, &limits).valid,
            checker::rate(&e, &limits).valid,
        )
    };
    // Capacity: 4 active is the public sale's, allowed from just before its start on.
    assert_eq!(check(&[(5.0, 2, 0), (12.0, 4, 0)]), (true, true));
    assert!(check(&[(9.5, 4, 0)]).0, "within the slack of the start");
    assert!(!check(&[(5.0, 3, 0)]).0, "3 active in the presale");
    assert!(!check(&[(8.0, 4, 0)]).0, "the public sale's 4, 2 s early");
    assert!(check(&[(25.0, 6, 0)]).0);
    assert!(!check(&[(15.0, 5, 0)]).0, "the last drop's 5, 5 s early");
    // Rate: the presale's 60/min over 0–9 s allows the burst and 9 more (+1 for rounding).
    assert!(check(&[(0.0, 0, 0), (9.0, 0, 12)]).1);
    assert!(!check(&[(0.0, 0, 0), (9.0, 0, 13)]).1, "13 at 60/min");
    // 0–20 s: 9 s at 60, 2 s at 240 (around the start), 8 s at 240, 1 s at 240 (the last
    // drop's start, the larger of the two): 9 + 44 = 53, + burst 2 + 1.
    assert!(check(&[(0.0, 0, 0), (19.99, 0, 56)]).1);
    assert!(!check(&[(0.0, 0, 0), (19.99, 0, 57)]).1);
    // In the last drop the rate falls to 30/min: 10 s allows 5 + burst + 1.
    assert!(check(&[(22.0, 0, 100), (32.0, 0, 108)]).1);
    assert!(
        !check(&[(22.0, 0, 100), (32.0, 0, 109)]).1,
        "the public sale's rate after it ended"
    );
}

#[test]
fn fifo_inversions_are_reported() {
    // a's join is acknowledged before b's begins.
    let base = || {
        let h = History::new();
        op(
            &h,
            0,
            "join",
            json!(1),
            Kind::Ok,
            json!({"v": 1, "state": "waiting", "index": 1}),
        );
        op(
            &h,
            1,
            "join",
            json!(2),
            Kind::Ok,
            json!({"v": 2, "state": "waiting", "index": 2}),
        );
        h
    };
    let h = base();
    op(&h, 9, "line", Value::Null, Kind::Ok, json!([1, 2]));
    op(&h, 9, "line", Value::Null, Kind::Ok, json!([2]));
    assert!(
        checker::fifo(&h.events()).valid,
        "{:?}",
        checker::fifo(&h.events())
    );
    // b stands ahead of a.
    let h = base();
    op(&h, 9, "line", Value::Null, Kind::Ok, json!([2, 1]));
    assert!(!checker::fifo(&h.events()).valid);
    // b was admitted (left the line) while a still waits.
    let h = base();
    op(&h, 9, "line", Value::Null, Kind::Ok, json!([1]));
    let v = checker::fifo(&h.events());
    assert!(!v.valid, "{v:?}");
}

#[test]
fn lane_inversions_and_public_visitors_going_first_are_reported() {
    // 1 and 3 hold presale codes; 2 and 4 wait in the room's own line. Each join is
    // acknowledged before the next begins.
    let base = || {
        let h = History::new();
        for v in 1..=4u64 {
            if v % 2 == 1 {
                let lane = json!({"v": v, "lane": "presale"});
                op(&h, 100 + v, "lane", lane.clone(), Kind::Ok, lane);
            }
            op(
                &h,
                v,
                "join",
                json!(v),
                Kind::Ok,
                json!({"v": v, "state": "waiting", "index": v}),
            );
        }
        h
    };
    // The listing: lanes first, each in order; then the presale goes in before the public.
    let h = base();
    op(&h, 9, "line", Value::Null, Kind::Ok, json!([1, 3, 2, 4]));
    op(&h, 9, "line", Value::Null, Kind::Ok, json!([3, 2, 4]));
    op(&h, 9, "line", Value::Null, Kind::Ok, json!([2, 4]));
    op(&h, 9, "line", Value::Null, Kind::Ok, json!([4]));
    let v = checker::lanes(&h.events());
    assert!(v.valid, "{v:?}");
    // Plain FIFO would call the presale's priority an inversion; the lanes checker does not.
    assert!(!checker::fifo(&h.events()).valid);
    // Out of order within the presale lane.
    let h = base();
    op(&h, 9, "line", Value::Null, Kind::Ok, json!([3, 1, 2, 4]));
    let v = checker::lanes(&h.events());
    assert!(!v.valid && v.detail.contains("presale"), "{v:?}");
    // A public visitor admitted while a presale visitor acknowledged before it still waits.
    let h = base();
    op(&h, 9, "line", Value::Null, Kind::Ok, json!([3]));
    let v = checker::lanes(&h.events());
    assert!(
        !v.valid && v.detail.contains("4 of the room's own line"),
        "{v:?}"
    );
}

#[test]
fn diverged_digests_are_reported() {
    let same = BTreeMap::from([(1, (10, "ab".to_string())), (2, (10, "ab".to_string()))]);
    assert!(checker::convergence(&same, 2).valid);
    let diverged = BTreeMap::from([(1, (10, "ab".to_string())), (2, (10, "cd".to_string()))]);
    assert!(!checker::convergence(&diverged, 2).valid);
    let behind = BTreeMap::from([(1, (10, "ab".to_string())), (2, (9, "ab".to_string()))]);
    assert!(!checker::convergence(&behind, 2).valid);
    // Two agree, the third member reported nothing.
    let v = checker::convergence(&same, 3);
    assert!(!v.valid && v.detail.contains("2 of 3"), "{v:?}");
    assert!(!checker::convergence(&BTreeMap::new(), 3).valid);
}

/// The proposals as a log of term 1 starting at index 1.
fn log_of(proposals: &[Proposal]) -> Vec<LogEntry> {
    proposals
        .iter()
        .enumerate()
        .map(|(i, p)| LogEntry {
            index: i as u64 + 1,
            term: 1,
            proposal: Some(p.encode()),
        })
        .collect()
}

#[test]
fn lottery_replay_catches_a_draw_that_does_not_match_the_log() {
    // A real log: a lottery room, four joins, admissions by draw.
    let room = "lot";
    let cfg = RoomConfig {
        mode: sluice_statemachine::Mode::Lottery,
        capacity: 2,
        admit_per_minute: 60_000,
        ..RoomConfig::default()
    };
    let v = |n: u64| VisitorId::from_u128(sluice_jepsen::ticket::VISITOR_BASE + n as u128);
    let mut proposals = vec![Proposal {
        time_ms: 1_000,
        commands: vec![Command::CreateRoom {
            room: room.into(),
            config: cfg,
        }],
    }];
    for n in 1..=4 {
        proposals.push(Proposal {
            time_ms: 1_000 + n,
            commands: vec![Command::Join {
                room: room.into(),
                visitor: v(n),
            }],
        });
    }
    let log = log_of(&proposals);
    let mut sm = StateMachine::new();
    for e in &log {
        sm.apply(
            1,
            e.index,
            &Proposal::decode(e.proposal.as_ref().unwrap()).unwrap(),
        );
    }
    // Who the draws really admitted, and who waits, at the last index.
    let state = |n: u64| match sm.visitor(room, v(n)).unwrap().state {
        sluice_statemachine::VisitorState::Admitted { .. } => "admitted",
        _ => "waiting",
    };
    let digest = (5u64, sluice_statemachine::digest_hex(&sm.digest()));
    let truth = History::new();
    for n in 1..=4 {
        op(
            &truth,
            n,
            "status",
            json!(n),
            Kind::Ok,
            json!({"v": n, "state": state(n), "index": 5}),
        );
    }
    let ok = checker::lottery_replay(&truth.events(), room, &log, Some(&digest));
    assert!(ok.valid, "{ok:?}");
    // The cluster's digest is checked at its own index, though the log goes on past it.
    let mut longer = log.clone();
    longer.push(LogEntry {
        index: 6,
        term: 1,
        proposal: None,
    });
    let ok = checker::lottery_replay(&truth.events(), room, &longer, Some(&digest));
    assert!(ok.valid && ok.detail.contains("digest matched"), "{ok:?}");
    let wrong_early = (5u64, "00".repeat(32));
    assert!(!checker::lottery_replay(&truth.events(), room, &longer, Some(&wrong_early)).valid);
    // Nothing to replay, a hole in the log, an observation or a digest past the log's end: not
    // valid.
    assert!(!checker::lottery_replay(&truth.events(), room, &[], None).valid);
    let holed: Vec<LogEntry> = log.iter().filter(|e| e.index != 3).cloned().collect();
    assert!(!checker::lottery_replay(&truth.events(), room, &holed, None).valid);
    let short = &log[..4];
    let v = checker::lottery_replay(&truth.events(), room, short, None);
    assert!(!v.valid && v.detail.contains("past the log"), "{v:?}");
    let beyond = (9u64, digest.1.clone());
    assert!(!checker::lottery_replay(&truth.events(), room, &log, Some(&beyond)).valid);
    // Claim the opposite for a waiter: the replay must disagree.
    let waiter = (1..=4).find(|&n| state(n) == "waiting").unwrap();
    let lie = History::new();
    op(
        &lie,
        0,
        "status",
        json!(waiter),
        Kind::Ok,
        json!({"v": waiter, "state": "admitted", "index": 5}),
    );
    assert!(!checker::lottery_replay(&lie.events(), room, &log, Some(&digest)).valid);
    // A cluster digest that differs from the replay's is reported too.
    let wrong = (5u64, "00".repeat(32));
    assert!(!checker::lottery_replay(&truth.events(), room, &log, Some(&wrong)).valid);
}

#[test]
fn lottery_replay_judges_a_join_by_its_own_answer_not_by_the_end_of_its_entry() {
    // One entry holds a join into a paused room and then the room's resumption: the join answers
    // "waiting", and by the end of the entry the visitor is admitted.
    let room = "lot";
    let v = VisitorId::from_u128(sluice_jepsen::ticket::VISITOR_BASE + 1);
    let proposals = [
        Proposal {
            time_ms: 1_000,
            commands: vec![Command::CreateRoom {
                room: room.into(),
                config: RoomConfig {
                    paused: true,
                    ..RoomConfig::default()
                },
            }],
        },
        Proposal {
            time_ms: 1_001,
            commands: vec![
                Command::Join {
                    room: room.into(),
                    visitor: v,
                },
                Command::Resume { room: room.into() },
            ],
        },
    ];
    let log = log_of(&proposals);
    let observed = |f: &str, state: &str| {
        let h = History::new();
        op(
            &h,
            0,
            f,
            json!(1),
            Kind::Ok,
            json!({"v": 1, "state": state, "index": 2}),
        );
        checker::lottery_replay(&h.events(), room, &log, None).valid
    };
    assert!(observed("join", "waiting"), "the join's own answer");
    assert!(!observed("join", "admitted"), "not what the join answered");
    assert!(
        observed("status", "admitted"),
        "a read sees the whole entry"
    );
    assert!(!observed("status", "waiting"));
}

#[test]
fn a_run_that_injected_nothing_or_did_nothing_is_not_valid() {
    let h = History::new();
    op(
        &h,
        0,
        "join",
        json!(1),
        Kind::Ok,
        json!({"v": 1, "state": "waiting"}),
    );
    let injected = vec![
        "kill node 2".to_string(),
        "fault failed: timeout".to_string(),
    ];
    let v = checker::exercised(&injected, true, &h.events());
    assert!(v.valid && v.ops.len() == 1, "{v:?}");
    let none = vec![
        "clock skipped: libfaketime not installed".to_string(),
        "fault failed: timeout".to_string(),
    ];
    assert!(!checker::exercised(&none, true, &h.events()).valid);
    assert!(!checker::exercised(&[], true, &h.events()).valid);
    assert!(checker::exercised(&[], false, &h.events()).valid);
    let idle = History::new();
    op(&idle, 0, "join", json!(1), Kind::Info, json!(1));
    assert!(!checker::exercised(&injected, true, &idle.events()).valid);
}

/// The skip check itself (in `common`): what is missing is named with how to install it, what is
/// installed is not, and the full tier fails instead of skipping.
#[test]
fn a_missing_prerequisite_is_named_and_the_full_tier_does_not_skip_it() {
    let what = common::missing(
        "checkers::example",
        &[Need::Program("sh"), Need::Program("sluice-no-such-program")],
    )
    .expect("something is missing");
    assert_eq!(
        what,
        "checkers::example: needs sluice-no-such-program (apt-get install sluice-no-such-program)"
    );
    assert_eq!(
        common::missing("checkers::example", &[Need::Program("sh")]),
        None
    );
    let full = std::panic::catch_unwind(|| {
        common::check_prerequisites(
            "checkers::example",
            &[Need::Program("sluice-no-such-program")],
            true,
        )
    });
    let message = full.expect_err("the full tier panics");
    let message = message.downcast_ref::<String>().expect("a message");
    assert!(
        message.contains("sluice-no-such-program") && message.contains("SLUICE_TEST_FULL=1"),
        "{message}"
    );
    assert!(common::check_prerequisites(
        "checkers::example",
        &[Need::Program("sh")],
        true
    ));
}

#[test]
fn a_node_that_did_not_recover_from_lost_unsynced_writes_is_reported() {
    use sluice_jepsen::runner::recovery;
    let crashes = vec![
        "kill-lose-unsynced one [1]: node 1 lost 4096 unsynced bytes in 1 files".to_string(),
        "kill-lose-unsynced all [1, 2, 3]: node 1 lost 10 unsynced bytes in 1 files".to_string(),
    ];
    let fine = recovery(&crashes, None, &[]);
    assert!(fine.valid, "{fine:?}");
    // A node that did not start again after a crash.
    let mut failed = crashes.clone();
    failed.push(
        "kill-lose-unsynced leader [2]: node 2 did not restart: node 2 did not start".to_string(),
    );
    let v = recovery(&failed, None, &[]);
    assert!(!v.valid && v.ops.iter().any(|o| o.contains("did not restart")));
    // A node not ready after healing.
    let v = recovery(
        &crashes,
        Some("after healing: node 2 not ready in 60s"),
        &[],
    );
    assert!(!v.valid && v.ops[0].contains("not ready"));
    // A panic in a node log, even if the node came back.
    let panic = "n1.log: thread 'tokio-rt-worker' panicked at update.rs:104:13: follower log \
                 reversion is not allowed"
        .to_string();
    let v = recovery(&crashes, None, std::slice::from_ref(&panic));
    assert!(!v.valid && v.ops == [panic], "{v:?}");
}

/// An operation between `invoke` and `complete` (ns).
fn timed(h: &History, p: u64, span: (u64, u64), done: Kind, value: Value) {
    h.record_at(span.0, Kind::Invoke, p, "txn", value.clone(), 1, None);
    h.record_at(span.1, done, p, "txn", value, 1, None);
}

#[test]
fn queue_linearizability_accepts_concurrent_orders_and_reports_each_violation() {
    let append = |v: u64| json!([["append", 1, v]]);
    let read = |l: &[u64]| json!([["r", 1, l]]);
    // Appends 1 and 2 overlap, so either order is fine; 3 began after both were acknowledged.
    let base = || {
        let h = History::new();
        timed(&h, 0, (0, 10), Kind::Ok, append(1));
        timed(&h, 1, (5, 12), Kind::Ok, append(2));
        timed(&h, 2, (20, 30), Kind::Ok, read(&[2, 1]));
        h
    };
    let good = base();
    timed(&good, 0, (40, 50), Kind::Ok, append(3));
    timed(&good, 1, (45, 47), Kind::Ok, read(&[2, 1]));
    timed(&good, 2, (60, 70), Kind::Ok, read(&[2, 1, 3]));
    timed(&good, 3, (60, 200), Kind::Info, append(4));
    timed(&good, 4, (61, 62), Kind::Fail, append(5));
    let v = checker::queue_linearizable(&good.events());
    assert!(v.valid, "{v:?}");

    type AddOps<'a> = Box<dyn Fn(&History) + 'a>;
    let cases: Vec<(&str, AddOps)> = vec![
        (
            "stale read misses 3",
            Box::new(|h| {
                timed(h, 0, (40, 50), Kind::Ok, append(3));
                timed(h, 1, (60, 70), Kind::Ok, read(&[2, 1]));
            }),
        ),
        (
            "not a prefix",
            Box::new(|h| {
                timed(h, 1, (40, 50), Kind::Ok, read(&[1, 2])); // the other order
            }),
        ),
        (
            "whose append failed",
            Box::new(|h| {
                timed(h, 0, (40, 50), Kind::Fail, append(3));
                timed(h, 1, (60, 70), Kind::Ok, read(&[2, 1, 3]));
            }),
        ),
        (
            "never appended",
            Box::new(|h| {
                timed(h, 1, (60, 70), Kind::Ok, read(&[2, 1, 9]));
            }),
        ),
        (
            "before its append began",
            Box::new(|h| {
                timed(h, 1, (40, 50), Kind::Ok, read(&[2, 1, 3]));
                timed(h, 0, (60, 70), Kind::Ok, append(3));
            }),
        ),
        (
            "went back",
            Box::new(|h| {
                timed(h, 0, (40, 50), Kind::Info, append(3));
                timed(h, 1, (60, 70), Kind::Ok, read(&[2, 1, 3]));
                timed(h, 2, (80, 90), Kind::Ok, read(&[2, 1]));
            }),
        ),
        (
            "out of real-time order",
            Box::new(|h| {
                timed(h, 0, (40, 50), Kind::Ok, append(3));
                timed(h, 1, (60, 70), Kind::Ok, append(4));
                timed(h, 2, (80, 90), Kind::Ok, read(&[2, 1, 4, 3]));
            }),
        ),
        (
            "read twice",
            Box::new(|h| {
                timed(h, 1, (40, 50), Kind::Ok, read(&[2, 1, 1]));
            }),
        ),
    ];
    for (what, add) in cases {
        let h = base();
        add(&h);
        let v = checker::queue_linearizable(&h.events());
        assert!(!v.valid, "{what}: not reported");
        assert!(
            v.ops.iter().any(|o| o.contains(what)),
            "{what}: reported as {:?}",
            v.ops
        );
    }
}
