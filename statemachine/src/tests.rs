//! Rule-by-rule tests of the state machine through its public API.

use crate::draw::{Draw, DrawPosition};
use crate::limits::*;
use crate::*;

const T0: u64 = 1_700_000_000_000;

fn vid(n: u128) -> VisitorId {
    VisitorId::from_u128(n)
}

/// Drives a machine one command per entry, with a controllable leader clock.
struct H {
    sm: StateMachine,
    term: u64,
    index: u64,
    now: u64,
}

impl H {
    /// A replica restored from this one's snapshot, at the same log position and time.
    fn restored(&self) -> H {
        H {
            sm: {
                let mut sm = StateMachine::restore(&self.sm.snapshot()).unwrap();
                sm.set_draw_key(self.sm.draw_key());
                sm
            },
            term: self.term,
            index: self.index,
            now: self.now,
        }
    }

    fn new() -> Self {
        H {
            sm: StateMachine::new(),
            term: 1,
            index: 0,
            now: T0,
        }
    }

    fn run(&mut self, cmd: Command) -> Outcome {
        self.index += 1;
        let mut out = self.sm.apply(
            self.term,
            self.index,
            &Proposal {
                time_ms: self.now,
                commands: vec![cmd],
            },
        );
        assert_eq!(out.len(), 1);
        out.pop().unwrap()
    }

    fn at(&mut self, ms_after_t0: u64) -> &mut Self {
        self.now = T0 + ms_after_t0;
        self
    }

    fn create(&mut self, room: &str, config: RoomConfig) -> RoomView {
        match self.run(Command::CreateRoom {
            room: room.into(),
            config,
        }) {
            Outcome::Room(v) => v,
            o => panic!("create failed: {o:?}"),
        }
    }

    fn join(&mut self, room: &str, v: u128) -> Outcome {
        self.run(Command::Join {
            room: room.into(),
            visitor: vid(v),
        })
    }

    fn tick(&mut self) -> Outcome {
        self.run(Command::Tick)
    }

    /// Joins visitors `first..=last` at the current time, as many per entry as a proposal holds.
    fn join_many(&mut self, room: &str, first: u128, last: u128) {
        for from in (first..=last).step_by(COMMANDS_PER_PROPOSAL_MAX) {
            let to = (from + COMMANDS_PER_PROPOSAL_MAX as u128 - 1).min(last);
            self.index += 1;
            let commands = (from..=to)
                .map(|v| Command::Join {
                    room: room.into(),
                    visitor: vid(v),
                })
                .collect();
            self.sm.apply(
                self.term,
                self.index,
                &Proposal {
                    time_ms: self.now,
                    commands,
                },
            );
        }
    }

    fn state(&self, room: &str, v: u128) -> VisitorState {
        self.sm.visitor(room, vid(v)).expect("visitor known").state
    }

    fn is_admitted(&self, room: &str, v: u128) -> bool {
        matches!(self.state(room, v), VisitorState::Admitted { .. })
    }

    fn position(&self, room: &str, v: u128) -> Option<u64> {
        match self.state(room, v) {
            VisitorState::Waiting { position, .. } => position,
            s => panic!("not waiting: {s:?}"),
        }
    }

    fn room(&self, room: &str) -> RoomView {
        self.sm.room(room).expect("room exists")
    }

    fn queue(&self, room: &str) -> Vec<u128> {
        self.sm
            .queue(room, 0, QUEUE_PAGE_MAX)
            .unwrap()
            .iter()
            .map(|e| e.visitor.as_u128())
            .collect()
    }
}

fn cfg(capacity: u64, admit_per_minute: u64) -> RoomConfig {
    RoomConfig {
        capacity,
        admit_per_minute,
        session_ttl_secs: 600,
        waiter_ttl_secs: 600,
        ..RoomConfig::default()
    }
}

fn rejected(o: &Outcome) -> &Rejection {
    match o {
        Outcome::Rejected(r) => r,
        o => panic!("expected a rejection, got {o:?}"),
    }
}

#[path = "lane_tests.rs"]
mod lane_tests;
#[path = "ledger_tests.rs"]
mod ledger_tests;
#[path = "notice_tests.rs"]
mod notice_tests;

// ---- rooms -------------------------------------------------------------------------------------

#[test]
fn room_create_update_delete_list() {
    let mut h = H::new();
    h.create("b", cfg(5, 60));
    h.create("a", cfg(5, 60));
    assert_eq!(
        rejected(&h.run(Command::CreateRoom {
            room: "a".into(),
            config: cfg(1, 1)
        })),
        &Rejection::RoomExists
    );
    let names: Vec<String> = h.sm.rooms().into_iter().map(|r| r.name).collect();
    assert_eq!(names, ["a", "b"]);
    let page = |after, limit| {
        let (rooms, more) = h.sm.rooms_after(after, limit);
        (rooms.into_iter().map(|r| r.name).collect::<Vec<_>>(), more)
    };
    assert_eq!(page(None, 1), (vec!["a".to_string()], true));
    assert_eq!(page(Some("a"), 1), (vec!["b".to_string()], false));
    assert_eq!(page(Some("a0"), 5), (vec!["b".to_string()], false));
    assert_eq!(page(Some("b"), 5), (vec![], false));
    let o = h.run(Command::UpdateRoom {
        room: "a".into(),
        config: cfg(9, 60),
    });
    assert!(matches!(o, Outcome::Room(ref v) if v.config.capacity == 9));
    assert_eq!(
        rejected(&h.run(Command::UpdateRoom {
            room: "zz".into(),
            config: cfg(9, 60)
        })),
        &Rejection::RoomNotFound
    );
    let o = h.run(Command::PutRoom {
        room: "c".into(),
        config: cfg(3, 60),
    });
    assert!(matches!(o, Outcome::Room(ref v) if v.name == "c"));
    h.join("a", 1);
    assert_eq!(
        h.run(Command::DeleteRoom { room: "a".into() }),
        Outcome::RoomDeleted {
            waiting: 0,
            active: 1
        }
    );
    assert!(h.sm.room("a").is_none());
    assert_eq!(
        rejected(&h.run(Command::DeleteRoom { room: "a".into() })),
        &Rejection::RoomNotFound
    );
    assert_eq!(rejected(&h.join("a", 1)), &Rejection::RoomNotFound);
}

#[test]
fn bad_input_names_the_field_and_changes_nothing() {
    let mut h = H::new();
    h.create("r", cfg(1, 60));
    h.join("r", 1);
    h.join("r", 2);
    let before = (h.sm.rooms(), h.queue("r"), h.sm.pools());
    let cases = vec![
        (
            Command::CreateRoom {
                room: "Bad Name".into(),
                config: cfg(1, 1),
            },
            "room",
        ),
        (
            Command::CreateRoom {
                room: "ok".into(),
                config: cfg(0, 1),
            },
            "capacity",
        ),
        (
            Command::UpdateRoom {
                room: "r".into(),
                config: cfg(CAPACITY_MAX + 1, 1),
            },
            "capacity",
        ),
        (
            Command::Join {
                room: "-x".into(),
                visitor: vid(3),
            },
            "room",
        ),
        (
            Command::Touch {
                room: "r".into(),
                visitors: vec![vid(1); TOUCH_BATCH_MAX + 1],
            },
            "visitors",
        ),
        (
            Command::ForceAdmit {
                room: "r".into(),
                count: 0,
            },
            "count",
        ),
        (
            Command::ForceAdmit {
                room: "r".into(),
                count: FORCE_ADMIT_MAX + 1,
            },
            "count",
        ),
        (
            Command::SetHealth {
                room: "r".into(),
                health: Health::Slow,
                slow_factor_permille: Some(0),
            },
            "slow_factor_permille",
        ),
        (
            Command::PutPool {
                pool: "p".into(),
                room_capacity: 0,
                rooms_max: 1,
            },
            "room_capacity",
        ),
        (
            Command::PutPool {
                pool: "p".into(),
                room_capacity: 1,
                rooms_max: POOL_ROOMS_MAX + 1,
            },
            "rooms_max",
        ),
        (
            Command::PoolAssign {
                pool: "UPPER".into(),
            },
            "pool",
        ),
    ];
    for (cmd, field) in cases {
        let o = h.run(cmd.clone());
        assert_eq!(rejected(&o).field(), Some(field), "{cmd:?}");
    }
    assert_eq!(
        rejected(&h.run(Command::Heartbeat {
            room: "r".into(),
            visitor: vid(99)
        })),
        &Rejection::UnknownVisitor
    );
    assert_eq!(
        rejected(&h.run(Command::Leave {
            room: "r".into(),
            visitor: vid(99)
        })),
        &Rejection::UnknownVisitor
    );
    assert_eq!(before, (h.sm.rooms(), h.queue("r"), h.sm.pools()));
}

#[test]
fn rooms_limit_is_a_rejection() {
    let mut h = H::new();
    let entries: Vec<Command> = (0..ROOMS_MAX)
        .map(|i| Command::CreateRoom {
            room: format!("r{i}"),
            config: cfg(1, 1),
        })
        .collect();
    for chunk in entries.chunks(COMMANDS_PER_PROPOSAL_MAX) {
        h.index += 1;
        let out = h.sm.apply(
            1,
            h.index,
            &Proposal {
                time_ms: h.now,
                commands: chunk.to_vec(),
            },
        );
        assert!(out.iter().all(|o| matches!(o, Outcome::Room(_))));
    }
    let o = h.run(Command::CreateRoom {
        room: "one-more".into(),
        config: cfg(1, 1),
    });
    assert_eq!(rejected(&o).code(), "limit_reached");
    // Replacing an existing room is still allowed at the limit.
    assert!(matches!(
        h.run(Command::PutRoom {
            room: "r0".into(),
            config: cfg(2, 1)
        }),
        Outcome::Room(_)
    ));
}

// ---- joining, capacity, leaving ------------------------------------------------------------

#[test]
fn capacity_one_queues_and_leave_promotes_at_once() {
    let mut h = H::new();
    h.create("r", cfg(1, 6000));
    let a = h.join("r", 1);
    assert!(matches!(
        a,
        Outcome::Visitor(VisitorView {
            seq: 1,
            state: VisitorState::Admitted { .. },
            ..
        })
    ));
    h.join("r", 2);
    h.join("r", 3);
    assert_eq!(h.position("r", 2), Some(1));
    assert_eq!(h.position("r", 3), Some(2));
    assert_eq!(h.room("r").active, 1);
    h.at(10);
    let o = h.run(Command::Leave {
        room: "r".into(),
        visitor: vid(1),
    });
    assert!(matches!(
        o,
        Outcome::Visitor(VisitorView {
            state: VisitorState::Ended {
                reason: EndReason::Left,
                ..
            },
            ..
        })
    ));
    assert!(
        h.is_admitted("r", 2),
        "the next waiter is admitted by the leave itself"
    );
    assert_eq!(h.position("r", 3), Some(1));
    assert_eq!(h.room("r").active, 1);
}

#[test]
fn joining_twice_resumes_the_same_place() {
    let mut h = H::new();
    h.create("r", cfg(1, 60));
    h.join("r", 1);
    h.join("r", 2);
    h.join("r", 3);
    let again = h.join("r", 2);
    assert!(matches!(
        again,
        Outcome::Visitor(VisitorView {
            seq: 2,
            state: VisitorState::Waiting {
                position: Some(1),
                ..
            },
            ..
        })
    ));
    let again = h.join("r", 1);
    assert!(matches!(
        again,
        Outcome::Visitor(VisitorView {
            seq: 1,
            state: VisitorState::Admitted { .. },
            ..
        })
    ));
    assert_eq!(h.room("r").totals.joined, 3);
    assert_eq!(h.queue("r"), [2, 3]);
}

#[test]
fn rejoining_after_leaving_takes_a_new_place_at_the_back() {
    let mut h = H::new();
    h.create("r", cfg(1, 60));
    h.join("r", 1);
    h.join("r", 2);
    h.join("r", 3);
    h.run(Command::Leave {
        room: "r".into(),
        visitor: vid(2),
    });
    let o = h.join("r", 2);
    assert!(matches!(o, Outcome::Visitor(VisitorView { seq: 4, .. })));
    assert_eq!(h.queue("r"), [3, 2]);
}

#[test]
fn max_waiting_refuses_with_queue_full() {
    let mut h = H::new();
    h.create(
        "r",
        RoomConfig {
            max_waiting: 2,
            ..cfg(1, 60)
        },
    );
    h.join("r", 1);
    h.join("r", 2);
    h.join("r", 3);
    assert_eq!(rejected(&h.join("r", 4)), &Rejection::QueueFull);
    assert_eq!(h.room("r").waiting, 2);
    // A waiter already in line can still resume.
    assert!(matches!(h.join("r", 3), Outcome::Visitor(_)));
}

// ---- the token bucket --------------------------------------------------------------------------

#[test]
fn empty_bucket_holds_waiters_until_refilled() {
    let mut h = H::new();
    // One admission per second, burst 1.
    h.create("r", cfg(100, 60));
    h.join("r", 1);
    assert!(h.is_admitted("r", 1));
    h.join("r", 2);
    assert_eq!(h.position("r", 2), Some(1));
    assert_eq!(h.sm.next_due_ms(), Some(T0 + 1000));
    h.at(999).tick();
    assert_eq!(h.position("r", 2), Some(1), "999 ms give 0.999 tokens");
    h.at(1000).tick();
    assert!(h.is_admitted("r", 2));
}

#[test]
fn bucket_burst_caps_accumulation() {
    let mut h = H::new();
    h.create(
        "r",
        RoomConfig {
            admit_burst: 3,
            ..cfg(100, 60)
        },
    );
    // A long idle time fills the bucket only up to the burst.
    h.at(3_600_000);
    for v in 1..=10 {
        h.join("r", v);
    }
    assert_eq!(h.room("r").active, 3);
    assert_eq!(h.room("r").bucket_tokens, 0);
}

#[test]
fn health_scales_the_rate() {
    let mut h = H::new();
    h.create(
        "r",
        RoomConfig {
            admit_burst: 1,
            ..cfg(100, 60)
        },
    );
    h.join("r", 1); // uses the one token
    h.run(Command::SetHealth {
        room: "r".into(),
        health: Health::Slow,
        slow_factor_permille: Some(500),
    });
    h.join("r", 2);
    h.at(1000).tick();
    assert!(
        !h.is_admitted("r", 2),
        "at half rate a token takes two seconds"
    );
    h.at(2000).tick();
    assert!(h.is_admitted("r", 2));
    h.run(Command::SetHealth {
        room: "r".into(),
        health: Health::Down,
        slow_factor_permille: None,
    });
    h.join("r", 3);
    h.at(100_000).tick();
    assert!(!h.is_admitted("r", 3), "down admits nobody");
    assert_eq!(
        h.state("r", 3),
        VisitorState::Waiting {
            position: Some(1),
            waiting: Some(1),
            eta_secs: None,
            eta_max_secs: None,
            last_seen_ms: T0 + 2000,
            provisional: false,
            held: false,
            next_check_secs: 5,
            lane: None,
            ahead: None,
            notice: None,
        }
    );
    h.run(Command::SetHealth {
        room: "r".into(),
        health: Health::Ok,
        slow_factor_permille: None,
    });
    h.at(101_000).tick();
    assert!(h.is_admitted("r", 3));
}

// ---- pause, modes, force admit, revoke ----------------------------------------------------------

#[test]
fn pause_during_tick_admits_nobody_and_resume_does() {
    let mut h = H::new();
    h.create("r", cfg(10, 6000));
    h.run(Command::Pause { room: "r".into() });
    h.join("r", 1);
    h.join("r", 2);
    h.at(5000).tick();
    assert_eq!(h.room("r").active, 0);
    assert!(
        matches!(
            h.state("r", 1),
            VisitorState::Waiting { eta_secs: None, .. }
        ),
        "paused is silent: no ETA"
    );
    h.run(Command::Resume { room: "r".into() });
    assert!(h.is_admitted("r", 1) && h.is_admitted("r", 2));
}

#[test]
fn mode_switch_with_waiters() {
    let mut h = H::new();
    h.create("r", cfg(2, 60_000));
    for v in 1..=6 {
        h.join("r", v);
    }
    assert_eq!(h.queue("r"), [3, 4, 5, 6]);
    // Lottery: positions are not meaningful; a freed slot goes to a seeded draw.
    h.run(Command::SetMode {
        room: "r".into(),
        mode: Mode::Lottery,
    });
    assert!(matches!(
        h.state("r", 3),
        VisitorState::Waiting {
            position: None,
            waiting: Some(4),
            ..
        }
    ));
    h.run(Command::Leave {
        room: "r".into(),
        visitor: vid(1),
    });
    assert_eq!(h.room("r").active, 2);
    assert_eq!(h.room("r").waiting, 3);
    // Passthrough admits everyone, beyond capacity, and still counts them.
    h.run(Command::SetMode {
        room: "r".into(),
        mode: Mode::Passthrough,
    });
    assert_eq!(h.room("r").waiting, 0);
    assert_eq!(h.room("r").active, 5);
    assert!(matches!(
        h.join("r", 7),
        Outcome::Visitor(VisitorView {
            state: VisitorState::Admitted { .. },
            ..
        })
    ));
    // Reject: newcomers are refused, sessions go on; back to fifo, the line is served in order.
    h.run(Command::SetMode {
        room: "r".into(),
        mode: Mode::Reject,
    });
    assert_eq!(rejected(&h.join("r", 8)), &Rejection::RoomRejecting);
    assert!(h.is_admitted("r", 7));
    h.run(Command::SetMode {
        room: "r".into(),
        mode: Mode::Fifo,
    });
    h.join("r", 9);
    assert_eq!(
        h.position("r", 9),
        Some(1),
        "active 6 > capacity 2: nobody is admitted"
    );
}

#[test]
fn reject_mode_keeps_existing_waiters_in_line() {
    let mut h = H::new();
    h.create("r", cfg(1, 60_000));
    h.join("r", 1);
    h.join("r", 2);
    h.run(Command::SetMode {
        room: "r".into(),
        mode: Mode::Reject,
    });
    assert!(
        matches!(h.join("r", 2), Outcome::Visitor(_)),
        "resuming is not joining"
    );
    h.run(Command::Leave {
        room: "r".into(),
        visitor: vid(1),
    });
    assert!(h.is_admitted("r", 2));
}

#[test]
fn force_admit_ignores_bucket_and_pause_but_not_capacity() {
    let mut h = H::new();
    h.create(
        "r",
        RoomConfig {
            admit_burst: 1,
            ..cfg(3, 1)
        },
    );
    h.run(Command::Pause { room: "r".into() });
    for v in 1..=5 {
        h.join("r", v);
    }
    assert_eq!(
        h.run(Command::ForceAdmit {
            room: "r".into(),
            count: 2
        }),
        Outcome::Count(2)
    );
    assert!(h.is_admitted("r", 1) && h.is_admitted("r", 2));
    assert_eq!(
        h.run(Command::ForceAdmit {
            room: "r".into(),
            count: 10
        }),
        Outcome::Count(1)
    );
    assert_eq!(h.room("r").active, 3);
    assert_eq!(h.queue("r"), [4, 5]);
}

#[test]
fn revoke_one_and_revoke_all() {
    let mut h = H::new();
    h.create("r", cfg(3, 60_000));
    for v in 1..=5 {
        h.join("r", v);
    }
    h.run(Command::Pause { room: "r".into() });
    let o = h.run(Command::Revoke {
        room: "r".into(),
        visitor: vid(2),
    });
    assert!(matches!(
        o,
        Outcome::Visitor(VisitorView {
            state: VisitorState::Ended {
                reason: EndReason::Revoked,
                ..
            },
            ..
        })
    ));
    assert_eq!(h.room("r").active, 2);
    assert_eq!(
        h.run(Command::RevokeAll { room: "r".into() }),
        Outcome::Count(2)
    );
    assert_eq!(h.room("r").active, 0);
    assert_eq!(h.room("r").totals.revoked, 3);
    assert!(matches!(
        h.state("r", 3),
        VisitorState::Ended {
            reason: EndReason::Revoked,
            ..
        }
    ));
    // A revoked visitor who joins again queues behind the others.
    h.join("r", 1);
    assert_eq!(h.queue("r"), [4, 5, 1]);
    h.run(Command::Resume { room: "r".into() });
    assert_eq!(h.room("r").active, 3);
}

// ---- TTLs ----------------------------------------------------------------------------------------

#[test]
fn session_ttl_boundary_and_renewal() {
    let mut h = H::new();
    h.create(
        "r",
        RoomConfig {
            session_ttl_secs: 10,
            ..cfg(5, 60_000)
        },
    );
    h.join("r", 1);
    h.join("r", 2);
    h.at(9_999).tick();
    assert!(h.is_admitted("r", 1));
    assert_eq!(h.sm.next_due_ms(), Some(T0 + 10_000));
    h.at(5_000).run(Command::Heartbeat {
        room: "r".into(),
        visitor: vid(2),
    });
    h.at(10_000).tick();
    assert!(
        matches!(h.state("r", 1), VisitorState::Ended { reason: EndReason::Expired, at_ms } if at_ms == T0 + 10_000)
    );
    assert!(
        h.is_admitted("r", 2),
        "renewed at +9.999 s (the clock never goes back)"
    );
    assert!(h.sm.session_active("r", vid(2), T0 + 19_998));
    assert!(!h.sm.session_active("r", vid(2), T0 + 19_999));
    h.at(19_999).tick();
    assert!(matches!(
        h.state("r", 2),
        VisitorState::Ended {
            reason: EndReason::Expired,
            ..
        }
    ));
    assert_eq!(h.room("r").totals.expired, 2);
    assert_eq!(h.sm.next_due_ms(), None, "an idle room needs no ticks");
}

#[test]
fn waiter_ttl_boundary_and_touch_batch() {
    let mut h = H::new();
    h.create(
        "r",
        RoomConfig {
            waiter_ttl_secs: 30,
            ..cfg(1, 60)
        },
    );
    for v in 1..=4 {
        h.join("r", v);
    }
    h.at(20_000);
    let o = h.run(Command::Touch {
        room: "r".into(),
        visitors: vec![vid(1), vid(3), vid(77)],
    });
    assert_eq!(
        o,
        Outcome::Touched {
            renewed: 1,
            checked_in: 1,
            missed: 1
        }
    );
    h.at(29_999).tick();
    assert_eq!(h.queue("r"), [2, 3, 4]);
    h.at(30_000).tick();
    assert_eq!(h.queue("r"), [3]);
    assert!(matches!(
        h.state("r", 2),
        VisitorState::Ended {
            reason: EndReason::Abandoned,
            ..
        }
    ));
    assert_eq!(h.position("r", 3), Some(1));
    h.at(50_000).tick();
    assert_eq!(h.queue("r"), Vec::<u128>::new());
    assert_eq!(h.room("r").totals.abandoned, 3);
}

#[test]
fn clock_never_goes_backwards() {
    let mut h = H::new();
    h.create(
        "r",
        RoomConfig {
            session_ttl_secs: 10,
            ..cfg(5, 60_000)
        },
    );
    h.at(5_000).join("r", 1);
    h.at(1_000).tick();
    assert_eq!(h.sm.clock_ms(), T0 + 5_000);
    match h.state("r", 1) {
        VisitorState::Admitted { admitted_at_ms, .. } => assert_eq!(admitted_at_ms, T0 + 5_000),
        s => panic!("{s:?}"),
    }
}

// ---- schedule --------------------------------------------------------------------------------

#[test]
fn pre_queue_before_opening_then_admission() {
    let mut h = H::new();
    h.create(
        "r",
        RoomConfig {
            opens_at_ms: Some(T0 + 60_000),
            closes_at_ms: Some(T0 + 120_000),
            ..cfg(2, 60_000)
        },
    );
    assert!(!h.room("r").open);
    h.join("r", 1);
    h.join("r", 2);
    h.join("r", 3);
    assert!(
        matches!(
            h.state("r", 1),
            VisitorState::Waiting {
                position: Some(1),
                eta_secs: Some(60),
                ..
            }
        ),
        "a minute until opening, then the bucket's tokens admit at once"
    );
    assert_eq!(h.sm.next_due_ms(), Some(T0 + 60_000));
    h.at(59_999).tick();
    assert_eq!(h.room("r").active, 0);
    h.at(60_000).tick();
    assert!(h.room("r").open);
    assert!(h.is_admitted("r", 1) && h.is_admitted("r", 2));
    assert_eq!(h.position("r", 3), Some(1));
    h.at(120_000);
    assert_eq!(rejected(&h.join("r", 4)), &Rejection::RoomClosed);
    assert!(h.room("r").closed);
    h.run(Command::Leave {
        room: "r".into(),
        visitor: vid(1),
    });
    assert!(
        h.is_admitted("r", 3),
        "those in line when the room closed are still served"
    );
}

#[test]
fn shuffle_at_open_is_a_seeded_draw_from_the_log_position() {
    let mut h = H::new();
    let open = T0 + 10_000;
    h.create(
        "drop",
        RoomConfig {
            opens_at_ms: Some(open),
            shuffle_at_open: true,
            ..cfg(1, 1)
        },
    );
    for v in 1..=20 {
        h.join("drop", v);
    }
    assert_eq!(h.queue("drop"), (1..=20).collect::<Vec<_>>());
    let start = h.sm.rooms["drop"]
        .draws
        .epoch
        .expect("a committed secret")
        .start;
    h.at(10_000).tick();
    // The tick is entry (term 1, index h.index), command 0: the shuffle draws from that position
    // and the room's secret, which began at the room's creation.
    let mut expected: Vec<u128> = (1..=20).collect();
    let secret = h.sm.draw_key().secret("drop", start);
    Draw::new_v2(
        &secret,
        DrawPosition {
            term: 1,
            index: h.index,
            sub: 0,
        },
        "drop",
    )
    .shuffle(&mut expected);
    let admitted = expected.remove(0);
    assert!(h.is_admitted("drop", admitted));
    assert_eq!(h.queue("drop"), expected);
    assert_ne!(
        h.queue("drop"),
        (1..=20).filter(|&v| v != admitted).collect::<Vec<_>>()
    );
    // Shuffled once: later ticks keep the order.
    h.at(500_000).tick();
    assert_eq!(h.queue("drop")[1..], expected[1..]);
}

#[test]
fn a_shuffled_line_survives_a_config_without_shuffle_in_a_snapshot() {
    let mut h = H::new();
    let shuffled = RoomConfig {
        opens_at_ms: Some(T0 + 10_000),
        shuffle_at_open: true,
        ..cfg(1, 1)
    };
    h.create("drop", shuffled.clone());
    for v in 1..=20 {
        h.join("drop", v);
    }
    h.at(10_000).tick();
    let line = h.queue("drop");
    // The operator clears the schedule after the opening; validation then wants no shuffle.
    h.run(Command::UpdateRoom {
        room: "drop".into(),
        config: RoomConfig {
            opens_at_ms: None,
            shuffle_at_open: false,
            ..shuffled
        },
    });
    assert_eq!(h.queue("drop"), line, "the line keeps its drawn order");
    let restored = StateMachine::restore(&h.sm.snapshot()).expect("the snapshot restores");
    assert_eq!(restored.digest(), h.sm.digest());
}

#[test]
fn lottery_admission_is_golden() {
    // Fixed log positions → a fixed admission order. Pins the lottery end to end.
    let mut h = H::new();
    h.create(
        "lot",
        RoomConfig {
            mode: Mode::Lottery,
            admit_burst: 1,
            ..cfg(100, 60)
        },
    );
    // A room made before draw secrets: it keeps drawing by sluice-draw-v1.
    h.sm.rooms.get_mut("lot").unwrap().draws = Default::default();
    h.join("lot", 100); // takes the first token
    for v in 1..=10 {
        h.join("lot", v);
    }
    let mut order = Vec::new();
    for s in 1..=10 {
        h.at(s * 1000).tick();
        let admitted: Vec<u128> = (1..=10)
            .filter(|&v| h.is_admitted("lot", v) && !order.contains(&v))
            .collect();
        assert_eq!(admitted.len(), 1);
        order.push(admitted[0]);
    }
    assert_eq!(order, GOLDEN_LOTTERY_ORDER);
}

const GOLDEN_LOTTERY_ORDER: [u128; 10] = [1, 3, 8, 5, 7, 6, 10, 2, 4, 9];

// ---- ETA ---------------------------------------------------------------------------------------------

#[test]
fn eta_from_position_and_rate() {
    let mut h = H::new();
    h.create(
        "r",
        RoomConfig {
            admit_burst: 1,
            ..cfg(1000, 2)
        },
    );
    h.join("r", 1);
    for v in 2..=5 {
        h.join("r", v);
    }
    // 2 admissions per minute, the bucket empty: position 4 → 120 s, at worst a quarter more.
    assert!(matches!(
        h.state("r", 5),
        VisitorState::Waiting {
            position: Some(4),
            eta_secs: Some(120),
            eta_max_secs: Some(150),
            ..
        }
    ));
    h.run(Command::SetMode {
        room: "r".into(),
        mode: Mode::Lottery,
    });
    // Lottery: an even chance after 2 of the 4 are drawn (60 s), nine in ten after all 4.
    assert!(matches!(
        h.state("r", 2),
        VisitorState::Waiting {
            position: None,
            eta_secs: Some(60),
            eta_max_secs: Some(150),
            ..
        }
    ));
}

/// Capacity 1 and 600-s sessions, 60 admissions a minute: the old estimate, from the rate
/// alone, told position 6 "1 s". A full room's estimate comes from how long its sessions last
/// (a place frees every mean length ÷ capacity), and before any session has ended there is no
/// honest figure to give.
#[test]
fn a_full_rooms_estimate_comes_from_how_long_its_sessions_last() {
    let mut h = H::new();
    h.create(
        "r",
        RoomConfig {
            session_ttl_secs: 3600,
            waiter_ttl_secs: 3600,
            ..cfg(1, 60)
        },
    );
    h.join("r", 1);
    h.join("r", 2);
    assert!(
        matches!(
            h.state("r", 2),
            VisitorState::Waiting {
                eta_secs: None,
                eta_max_secs: None,
                ..
            }
        ),
        "no session has ended yet"
    );
    h.at(600_000).run(Command::Leave {
        room: "r".into(),
        visitor: vid(1),
    });
    assert!(h.is_admitted("r", 2));
    for v in 3..=8 {
        h.join("r", v);
    }
    for (v, eta) in [(3, 600), (4, 1200), (8, 3600)] {
        match h.state("r", v) {
            VisitorState::Waiting {
                eta_secs: Some(s),
                eta_max_secs: Some(m),
                ..
            } => assert_eq!((s, m), (eta, eta + eta / 4), "visitor {v}"),
            s => panic!("{s:?}"),
        }
    }
    assert_eq!(h.room("r").eta_rate_per_minute, 0, "0.1 a minute");
    // The length is state: a restored replica tells the same.
    let back = h.restored();
    assert_eq!(back.sm.digest(), h.sm.digest());
    assert_eq!(back.state("r", 8), h.state("r", 8));
    // Operators ending sessions do not teach it: a revoke-all does not make sessions short.
    h.at(601_000).run(Command::RevokeAll { room: "r".into() });
    assert!(h.is_admitted("r", 3));
    assert!(matches!(
        h.state("r", 4),
        VisitorState::Waiting {
            eta_secs: Some(600),
            ..
        }
    ));
}

/// The estimate a waiter of `room` is told now, in seconds.
fn eta(h: &H, room: &str, v: u128) -> u64 {
    match h.state(room, v) {
        VisitorState::Waiting {
            eta_secs: Some(s), ..
        } => s,
        s => panic!("visitor {v}: {s:?}"),
    }
}

/// A room whose short visits taught it that sessions last 10 s, then full of two places never
/// used: the line is told when those places' deadlines come, not "a few seconds" until then.
fn a_room_stuck_on_unused_places(first_use_ttl_secs: Option<u64>) -> H {
    let mut h = H::new();
    h.create(
        "r",
        RoomConfig {
            session_ttl_secs: 600,
            waiter_ttl_secs: 3600,
            ..cfg(2, 600)
        },
    );
    if first_use_ttl_secs.is_some() {
        h.run(Command::SetEntryPolicy {
            room: "r".into(),
            policy: EntryPolicy {
                first_use_ttl_secs,
                ..EntryPolicy::default()
            }
            .encode(),
        });
    }
    h.join("r", 1);
    h.join("r", 2);
    h.at(1_000).run(Command::Touch {
        room: "r".into(),
        visitors: vec![vid(1), vid(2)],
    });
    for v in [1, 2] {
        h.at(10_000).run(Command::Leave {
            room: "r".into(),
            visitor: vid(v),
        });
    }
    for v in 3..=6 {
        h.join("r", v);
    }
    assert!(h.is_admitted("r", 3) && h.is_admitted("r", 4));
    h
}

#[test]
fn a_room_full_of_unused_places_is_told_their_deadlines() {
    let mut h = a_room_stuck_on_unused_places(None);
    // Just admitted, the two are taken to be on their way.
    assert_eq!(eta(&h, "r", 5), 10);
    // Past the grace, the line is told when the places expire (admitted at 10 s, 600-s TTL),
    // and that time comes nearer as it does: the estimate never sticks at a few seconds.
    let mut before = u64::MAX;
    for at in (30..600).step_by(30) {
        h.at(at * 1000).tick();
        let (first, second) = (eta(&h, "r", 5), eta(&h, "r", 6));
        assert_eq!(first, 610 - at, "at {at} s");
        assert_eq!(second, 610 - at, "at {at} s: both places free then");
        assert!(first < before);
        before = first;
    }
    h.at(610_000).tick();
    assert!(h.is_admitted("r", 5) && h.is_admitted("r", 6));
    // A restored replica tells the same.
    let back = h.restored();
    assert_eq!(back.sm.digest(), h.sm.digest());
}

#[test]
fn a_first_use_ttl_brings_the_deadline_of_unused_places_nearer() {
    let mut h = a_room_stuck_on_unused_places(Some(120));
    h.at(40_000).tick();
    assert_eq!(eta(&h, "r", 5), 90, "admitted at 10 s, unused until 130 s");
    let back = h.restored();
    assert_eq!(eta(&back, "r", 5), 90);
    h.at(130_000).tick();
    assert!(h.is_admitted("r", 5));
}

/// A session in use that has lasted far longer than the room's others is evidence that it lasts
/// longer still: the estimate behind it grows with its age instead of staying "about to end".
#[test]
fn a_place_held_longer_than_usual_pushes_the_estimate_out_as_it_ages() {
    let mut h = H::new();
    h.create(
        "r",
        RoomConfig {
            session_ttl_secs: 3600,
            waiter_ttl_secs: 86_400,
            ..cfg(1, 600)
        },
    );
    h.join("r", 1);
    h.at(1_000).run(Command::Touch {
        room: "r".into(),
        visitors: vec![vid(1)],
    });
    h.at(10_000).run(Command::Leave {
        room: "r".into(),
        visitor: vid(1),
    });
    h.join("r", 2);
    h.join("r", 3);
    assert!(h.is_admitted("r", 2));
    let mut before = 0;
    for at in [20, 60, 120, 240, 480, 960] {
        h.at(at * 1000).run(Command::Touch {
            room: "r".into(),
            visitors: vec![vid(2), vid(3)],
        });
        let age = at - 10;
        let e = eta(&h, "r", 3);
        assert!(
            e >= age / 2 && e > before,
            "at {at} s: {e} s after {before} s"
        );
        before = e;
    }
}

/// Before a shuffled opening, a position would be a promise the shuffle breaks: none is shown.
#[test]
fn positions_before_a_shuffled_opening_are_not_shown() {
    let mut h = H::new();
    h.create(
        "r",
        RoomConfig {
            opens_at_ms: Some(T0 + 60_000),
            shuffle_at_open: true,
            ..cfg(10, 60)
        },
    );
    h.join("r", 1);
    assert!(matches!(
        h.state("r", 1),
        VisitorState::Waiting {
            position: None,
            eta_secs: Some(60),
            ..
        }
    ));
    h.at(60_000).tick();
    assert!(h.is_admitted("r", 1));
}

/// Before a shuffled opening every waiter has the same chance, whenever they joined: the first
/// and the thousandth are told the same estimate (the line's, as a lottery's), not one by order
/// of joining.
#[test]
fn estimates_before_a_shuffled_opening_do_not_depend_on_the_order_of_joining() {
    let mut h = H::new();
    h.create(
        "r",
        RoomConfig {
            opens_at_ms: Some(T0 + 60 * 60_000),
            shuffle_at_open: true,
            admit_burst: 1,
            ..cfg(100_000, 600)
        },
    );
    h.join_many("r", 1, 1000);
    let eta = |h: &H, v| match h.state("r", v) {
        VisitorState::Waiting {
            position: None,
            provisional: true,
            eta_secs,
            eta_max_secs,
            ..
        } => (eta_secs, eta_max_secs),
        s => panic!("{s:?}"),
    };
    assert_eq!(eta(&h, 1), eta(&h, 1000));
    let (even, likely) = eta(&h, 1);
    assert!(
        even.unwrap() > 3_600 && likely.unwrap() > even.unwrap(),
        "{even:?} {likely:?}"
    );
}

/// The line is shuffled once, at the first opening: an opening put off after the room opened
/// keeps the order of those who joined first come, first served, shows them their positions,
/// and lines up those who join meanwhile after them.
#[test]
fn an_opening_put_off_after_the_room_opened_does_not_shuffle_again() {
    let mut h = H::new();
    let mut config = RoomConfig {
        opens_at_ms: Some(T0 + 10_000),
        shuffle_at_open: true,
        admit_burst: 1,
        ..cfg(1, 1)
    };
    h.create("r", config.clone());
    h.at(10_000).tick();
    for v in 1..=20 {
        h.join("r", v);
    }
    let before = h.queue("r");
    assert_eq!(before, (2..=20).collect::<Vec<u128>>());
    h.sm.keep_ledger(true);
    config.opens_at_ms = Some(T0 + 60_000);
    h.at(20_000).run(Command::UpdateRoom {
        room: "r".into(),
        config,
    });
    h.join("r", 21);
    assert!(matches!(
        h.state("r", 2),
        VisitorState::Waiting {
            position: Some(1),
            provisional: false,
            ..
        }
    ));
    h.at(60_000).tick();
    assert_eq!(h.queue("r"), (2..=21).collect::<Vec<u128>>());
    assert!(!h
        .sm
        .take_ledger()
        .iter()
        .any(|r| matches!(r.event, crate::ledger::Event::Shuffled { .. })));
}

// ---- pools -----------------------------------------------------------------------------------

#[test]
fn pools_assign_first_fit_release_report() {
    let mut h = H::new();
    h.run(Command::PutPool {
        pool: "chat".into(),
        room_capacity: 2,
        rooms_max: 2,
    });
    let mut rooms = Vec::new();
    for _ in 0..4 {
        match h.run(Command::PoolAssign {
            pool: "chat".into(),
        }) {
            Outcome::Assigned { room, .. } => rooms.push(room),
            o => panic!("{o:?}"),
        }
    }
    assert_eq!(rooms, ["chat-0", "chat-0", "chat-1", "chat-1"]);
    assert_eq!(
        rejected(&h.run(Command::PoolAssign {
            pool: "chat".into()
        })),
        &Rejection::PoolFull
    );
    h.run(Command::PoolRelease {
        pool: "chat".into(),
        room_index: 0,
    });
    assert!(matches!(
        h.run(Command::PoolAssign {
            pool: "chat".into()
        }),
        Outcome::Assigned {
            room_index: 0,
            count: 2,
            total: 4,
            ..
        }
    ));
    // Real counts reconcile the optimistic ones.
    h.run(Command::PoolReport {
        pool: "chat".into(),
        room_index: 1,
        count: 0,
    });
    assert_eq!(h.sm.pool("chat").unwrap().counts, [2, 0]);
    assert_eq!(h.sm.pool("chat").unwrap().total, 2);
    assert_eq!(
        rejected(&h.run(Command::PoolRelease {
            pool: "chat".into(),
            room_index: 5
        }))
        .field(),
        Some("room_index")
    );
    assert_eq!(
        rejected(&h.run(Command::PoolAssign {
            pool: "nope".into()
        })),
        &Rejection::PoolNotFound
    );
    // Growing rooms_max opens a third room when both are full.
    h.run(Command::PoolReport {
        pool: "chat".into(),
        room_index: 1,
        count: 2,
    });
    h.run(Command::PutPool {
        pool: "chat".into(),
        room_capacity: 2,
        rooms_max: 3,
    });
    assert!(matches!(
        h.run(Command::PoolAssign {
            pool: "chat".into()
        }),
        Outcome::Assigned { room_index: 2, .. }
    ));
    assert_eq!(
        h.run(Command::DeletePool {
            pool: "chat".into()
        }),
        Outcome::PoolDeleted
    );
    assert!(h.sm.pools().is_empty());
}

// ---- ticks, determinism, snapshots ---------------------------------------------------------

#[test]
fn next_due_covers_tokens_expiry_and_opening() {
    let mut h = H::new();
    assert_eq!(h.sm.next_due_ms(), None);
    h.create(
        "r",
        RoomConfig {
            session_ttl_secs: 100,
            waiter_ttl_secs: 50,
            ..cfg(1, 60)
        },
    );
    assert_eq!(h.sm.next_due_ms(), None);
    h.join("r", 1);
    assert_eq!(h.sm.next_due_ms(), Some(T0 + 100_000));
    h.join("r", 2);
    assert_eq!(
        h.sm.next_due_ms(),
        Some(T0 + 50_000),
        "the waiter's TTL comes first; capacity blocks tokens"
    );
}

#[test]
fn identical_logs_give_identical_digests_and_snapshots_restore_exactly() {
    let mut a = H::new();
    a.create(
        "r",
        RoomConfig {
            mode: Mode::Lottery,
            waiter_ttl_secs: 20,
            session_ttl_secs: 5,
            ..cfg(3, 120)
        },
    );
    for v in 1..=50 {
        a.at(v as u64 * 300).join("r", v);
    }
    let snap = a.sm.snapshot();
    let mut b = H {
        sm: StateMachine::restore(&snap).unwrap(),
        ..H::new()
    };
    b.index = a.index;
    assert_eq!(a.sm.digest(), b.sm.digest());
    assert_eq!(b.sm.snapshot(), snap);
    // Appended after a header, the encoding is the same bytes.
    let mut framed = b"header".to_vec();
    framed.extend_from_slice(&snap);
    assert_eq!(a.sm.snapshot_into(b"header".to_vec()), framed);
    for s in 1..40 {
        for h in [&mut a, &mut b] {
            h.at(15_000 + s * 700).tick();
            h.run(Command::Heartbeat {
                room: "r".into(),
                visitor: vid(s as u128),
            });
        }
        assert_eq!(a.sm.digest(), b.sm.digest(), "step {s}");
    }
    assert!(a.room("r").totals.admitted > 3);
    assert!(a.room("r").totals.abandoned > 0);
}

/// Replicas whose expiry heaps differ (one kept running, holding a visitor's pre-renewal time;
/// one restored from a snapshot, holding true times) must expire the same visitors when more
/// are due than one apply may expire.
#[test]
fn a_capped_mass_expiry_is_the_same_on_a_restored_replica() {
    for mode in [Mode::Passthrough, Mode::Fifo] {
        let mut a = H::new();
        a.create(
            "r",
            RoomConfig {
                mode,
                paused: mode == Mode::Fifo,
                session_ttl_secs: 10,
                waiter_ttl_secs: 10,
                ..cfg(1, 1)
            },
        );
        let n = EXPIRIES_PER_APPLY_MAX as u128 + 1;
        a.join_many("r", 1, n);
        let r = a.room("r");
        assert_eq!(r.active + r.waiting, n as u64, "{mode:?}");
        // Visitor 1 renews (or checks in): its heap entry keeps its first time on `a`.
        a.at(5_000).run(Command::Heartbeat {
            room: "r".into(),
            visitor: vid(1),
        });
        let mut b = H {
            sm: StateMachine::restore(&a.sm.snapshot()).unwrap(),
            ..H::new()
        };
        b.index = a.index;
        for h in [&mut a, &mut b] {
            h.at(100_000).tick();
        }
        assert_eq!(a.sm.digest(), b.sm.digest(), "{mode:?}");
        // The one left is the one seen last.
        let r = a.room("r");
        assert_eq!(r.active + r.waiting, 1, "{mode:?}");
        assert!(a
            .sm
            .visitor("r", vid(1))
            .is_ok_and(|v| !matches!(v.state, VisitorState::Ended { .. })));
    }
}

/// Short visits under a long session TTL: each leave leaves a heap entry behind, which must not
/// pile up for the whole TTL.
#[test]
fn sessions_that_end_early_do_not_pile_up_in_the_expiry_heap() {
    let mut h = H::new();
    h.create(
        "r",
        RoomConfig {
            admit_burst: 10,
            session_ttl_secs: TTL_SECS_MAX,
            ..cfg(10, 600_000)
        },
    );
    // One visitor stays: its entry, the oldest, keeps the ended ones behind it in the heap.
    h.join("r", 100_000);
    for v in 1..=20_000u128 {
        h.at(v as u64).join("r", v);
        assert!(h.is_admitted("r", v));
        h.run(Command::Leave {
            room: "r".into(),
            visitor: vid(v),
        });
    }
    let room = &h.sm.rooms["r"];
    assert!(room.session_due.len() <= 1026, "{}", room.session_due.len());
    // Sessions still time out as before.
    h.join("r", 30_000);
    h.at(TTL_SECS_MAX * 1000 + 30_000).tick();
    assert!(matches!(h.state("r", 30_000), VisitorState::Ended { .. }));
}

/// A room whose origin is down admits nobody: it asks for no tick while it stays down, though
/// its bucket holds tokens and it has waiters and room.
#[test]
fn a_room_whose_origin_is_down_asks_for_no_ticks() {
    let mut h = H::new();
    h.create("r", cfg(10, 60));
    h.run(Command::SetHealth {
        room: "r".into(),
        health: Health::Down,
        slow_factor_permille: None,
    });
    h.join("r", 1);
    h.tick();
    assert!(!h.is_admitted("r", 1));
    assert!(h.room("r").bucket_tokens > 0);
    assert_eq!(
        h.sm.next_due_ms(),
        Some(h.now + 600_000),
        "only the waiter's expiry"
    );
}

/// A state with every part a snapshot writes: two rooms (one a lottery), waiters, sessions,
/// ended visitors and a pool. `tests/fixtures/snapshot-v1.bin` is this state as version 1 wrote it.
fn every_part() -> H {
    let mut h = H::new();
    h.create(
        "a",
        RoomConfig {
            waiter_ttl_secs: 20,
            session_ttl_secs: 60,
            ..cfg(3, 120)
        },
    );
    h.create(
        "b",
        RoomConfig {
            mode: Mode::Lottery,
            ..cfg(2, 60)
        },
    );
    for v in 1..=12u64 {
        h.at(v * 250).join("a", v as u128);
        h.join("b", 100 + v as u128);
    }
    h.at(4_000).run(Command::Leave {
        room: "a".into(),
        visitor: vid(1),
    });
    h.run(Command::Leave {
        room: "a".into(),
        visitor: vid(9),
    });
    h.run(Command::PutPool {
        pool: "p".into(),
        room_capacity: 5,
        rooms_max: 3,
    });
    h.run(Command::PoolAssign { pool: "p".into() });
    h.at(9_000).tick();
    h
}

/// [`every_part`], as a snapshot written before rooms learned how long sessions last holds it.
fn every_part_without_turnover() -> H {
    let mut h = every_part();
    assert!(h
        .sm
        .rooms
        .values()
        .any(|r| r.turnover != crate::room::Turnover::default()));
    for r in h.sm.rooms.values_mut() {
        r.turnover = crate::room::Turnover::default();
        r.draws = Default::default();
    }
    h.sm.ledger = Default::default();
    h
}

#[test]
fn version_1_snapshots_still_restore_to_the_same_state() {
    let h = every_part_without_turnover();
    let room = h.room("a");
    assert!(
        room.waiting > 0 && room.active > 0 && room.totals.left == 2,
        "{room:?}"
    );
    let v1 = include_bytes!("../tests/fixtures/snapshot-v1.bin");
    assert_eq!(v1[4], 1);
    let restored = StateMachine::restore(v1).unwrap();
    assert_eq!(restored.digest(), h.sm.digest());
    // Written again, it is the current version, which restores to the same state too.
    let v2 = restored.snapshot();
    assert_eq!(v2[4], crate::snapshot::SNAPSHOT_VERSION);
    assert_eq!(v2, h.sm.snapshot());
    assert_eq!(StateMachine::restore(&v2).unwrap().digest(), h.sm.digest());
}

/// `tests/fixtures/snapshot-v3.bin` is a state that thirteen of the seventeen sections write
/// (bans, policies, clients, challenges, identities, networks, lanes, codes, notices, the
/// ledger, draws, …), as version 3 wrote it when the sections were still one struct. It must
/// restore, check, and be written again byte for byte: the sections are the format.
#[test]
fn version_3_snapshots_are_read_and_written_byte_for_byte() {
    let v3 = include_bytes!("../tests/fixtures/snapshot-v3.bin");
    assert_eq!(v3[4], 3);
    let restored = StateMachine::restore(v3).unwrap();
    restored.check().unwrap();
    assert_eq!(restored.snapshot(), v3.to_vec());
    assert_eq!(
        crate::snapshot::digest_hex(&restored.digest()),
        "bd70e14f81fd05dd93a5106dc1b2145155ec65c8266f21c74c6ab6570db79866"
    );
    // A truncated one is refused.
    assert!(StateMachine::restore(&v3[..v3.len() - 1]).is_err());
}

/// A policy encoded before fields were appended to it is kept and written as its command
/// carried it: a replica running this version and one running the version that wrote it make
/// the same snapshot and digest.
#[test]
fn a_policy_is_written_back_as_it_was_given() {
    let mut h = H::new();
    h.create("r", cfg(3, 60));
    let policy = crate::EntryPolicy {
        first_use_ttl_secs: Some(60),
        ..crate::EntryPolicy::default()
    };
    let current = policy.encode();
    // As the version before `phases` encoded it: one byte fewer.
    let older = crate::policy::EncodedPolicy(current.0[..current.0.len() - 1].to_vec());
    assert_eq!(older.decode().unwrap(), policy);
    let o = h.run(Command::SetEntryPolicy {
        room: "r".into(),
        policy: older.clone(),
    });
    assert!(!matches!(o, Outcome::Rejected(_)), "{o:?}");
    let snap = h.sm.snapshot();
    // A policy's bytes go into the snapshot after their length (one byte, here).
    let find = |bytes: &[u8], p: &crate::policy::EncodedPolicy| {
        let part = [&[p.0.len() as u8][..], &p.0].concat();
        bytes.windows(part.len()).any(|w| w == part)
    };
    assert!(find(&snap, &older), "the bytes as given");
    assert!(!find(&snap, &current), "not encoded again");
    let restored = StateMachine::restore(&snap).unwrap();
    restored.check().unwrap();
    assert_eq!(restored.snapshot(), snap);
    assert_eq!(restored.digest(), h.sm.digest());
    // Set again in the current encoding, the room writes that.
    h.run(Command::SetEntryPolicy {
        room: "r".into(),
        policy: current.clone(),
    });
    let snap2 = h.sm.snapshot();
    assert_ne!(snap2, snap);
    assert!(find(&snap2, &current) && !find(&snap2, &older));
}

#[test]
fn packed_records_keep_extreme_numbers() {
    let mut h = H::new();
    h.create("r", cfg(1, 60));
    // Visitors at both ends of the id range, at the latest instant a schedule accepts.
    h.at(INSTANT_MS_MAX - T0).join("r", u128::MAX);
    h.join("r", 0);
    let snap = h.sm.snapshot();
    let back = StateMachine::restore(&snap).unwrap();
    assert_eq!(back.snapshot(), snap);
    assert!(back.visitor("r", vid(u128::MAX)).is_ok());
    assert!(back.visitor("r", vid(0)).is_ok());
}

#[test]
fn a_log_time_near_the_end_of_time_is_read_as_the_latest_instant() {
    let mut h = H::new();
    h.create("r", cfg(1, 60));
    h.join("r", 1);
    h.join("r", 2);
    // Every deadline adds a TTL of up to 30 days to the log time: at u64::MAX it would overflow.
    h.at(u64::MAX - T0).join("r", 3);
    h.tick();
    h.sm.check().unwrap();
    assert_eq!(h.sm.clock_ms(), INSTANT_MS_MAX);
    // Time never goes back, and the room goes on.
    h.at(0).join("r", 4);
    assert_eq!(h.sm.clock_ms(), INSTANT_MS_MAX);
    assert!(h.sm.visitor("r", vid(4)).is_ok());
}

#[test]
fn restore_rejects_garbage() {
    let mut h = H::new();
    h.create("r", cfg(1, 60));
    h.join("r", 1);
    h.join("r", 2);
    let good = h.sm.snapshot();
    assert!(StateMachine::restore(&good).is_ok());
    assert!(StateMachine::restore(b"").is_err());
    assert!(StateMachine::restore(b"XXXX\x01").is_err());
    assert!(matches!(
        StateMachine::restore(b"SLSM\x09abc"),
        Err(DecodeError::Version(9))
    ));
    for n in 0..good.len() {
        assert!(StateMachine::restore(&good[..n]).is_err(), "prefix {n}");
    }
    // Flip every byte in turn: never a panic; either an error or a consistent state.
    for i in 5..good.len() {
        let mut bad = good.clone();
        bad[i] ^= 0x5a;
        if let Ok(sm) = StateMachine::restore(&bad) {
            let _ = sm.digest();
        }
    }
}

#[test]
fn entries_out_of_order_crash_rather_than_diverge() {
    let r = std::panic::catch_unwind(|| {
        let mut sm = StateMachine::new();
        sm.apply_empty(1, 5);
        sm.apply_empty(1, 5);
    });
    assert!(r.is_err());
}

#[test]
fn content_digest_ignores_the_log_position_but_not_the_state() {
    let mut h = H::new();
    h.create("r", cfg(1, 60));
    h.join("r", 1);
    let (full, content) = (h.sm.digest(), h.sm.content_digest());
    h.index += 1;
    h.term = 2;
    h.sm.apply_empty(h.term, h.index);
    assert_ne!(
        h.sm.digest(),
        full,
        "the full digest covers the log position"
    );
    assert_eq!(
        h.sm.content_digest(),
        content,
        "an empty entry changes no content"
    );
    h.join("r", 2);
    assert_ne!(h.sm.content_digest(), content);
}

/// A passthrough room ignores its capacity but not the bound on sessions per room, which is also
/// the most a snapshot holds: past it visitors wait, and the room's snapshot still restores.
#[test]
fn passthrough_admits_up_to_the_sessions_bound_and_its_snapshot_restores() {
    let mut a = H::new();
    a.create(
        "r",
        RoomConfig {
            mode: Mode::Passthrough,
            session_ttl_secs: 60,
            ..cfg(1, 1)
        },
    );
    let n = SESSIONS_PER_ROOM_MAX as u128 + 2;
    a.join_many("r", 1, n);
    let r = a.room("r");
    assert_eq!((r.active, r.waiting), (SESSIONS_PER_ROOM_MAX, 2));
    assert_eq!(a.position("r", n), Some(2));
    // Nothing is due until the first session could expire: no tick is asked for meanwhile.
    assert_eq!(a.sm.next_due_ms(), Some(T0 + 60_000));
    let b = StateMachine::restore(&a.sm.snapshot()).expect("a room at the bound restores");
    assert_eq!(b.digest(), a.sm.digest());
    // A session ends: the first in line takes its place.
    a.at(1_000).run(Command::Leave {
        room: "r".into(),
        visitor: vid(1),
    });
    assert!(a.is_admitted("r", n - 1));
    assert_eq!(a.position("r", n), Some(1));
}

fn ban(h: &mut H, v: u128, until_ms: Option<u64>) -> Outcome {
    h.run(Command::Ban {
        room: "r".into(),
        visitor: vid(v),
        until_ms,
    })
}

/// Revoking ends a place; banning ends it and refuses the visitor a new one, until the ban
/// ends or is lifted. Nobody else is affected.
#[test]
fn a_banned_visitor_loses_its_place_and_cannot_take_another() {
    let mut h = H::new();
    h.create("r", cfg(1, 60));
    h.join("r", 1);
    h.join("r", 2);
    h.join("r", 3);
    assert!(h.is_admitted("r", 1));
    // Banning the admitted visitor frees its slot for the next in line (a second later, when
    // the bucket has a token again).
    h.at(1_000);
    assert_eq!(ban(&mut h, 1, None), Outcome::Count(1));
    assert!(matches!(
        h.state("r", 1),
        VisitorState::Ended {
            reason: EndReason::Banned,
            ..
        }
    ));
    assert!(h.is_admitted("r", 2));
    assert_eq!(
        rejected(&h.join("r", 1)),
        &Rejection::Banned { until_ms: None }
    );
    // A waiter banned for a minute: gone from the line, back after the minute.
    assert_eq!(ban(&mut h, 3, Some(T0 + 60_000)), Outcome::Count(1));
    assert_eq!(h.room("r").waiting, 0);
    assert_eq!(
        rejected(&h.at(59_999).join("r", 3)),
        &Rejection::Banned {
            until_ms: Some(T0 + 60_000)
        }
    );
    assert!(matches!(h.at(60_000).join("r", 3), Outcome::Visitor(_)));
    assert_eq!(h.position("r", 3), Some(1));
    // A visitor not (yet) in the room can be banned ahead; lifting a ban lets it in.
    assert_eq!(ban(&mut h, 9, None), Outcome::Count(0));
    assert_eq!(h.sm.banned_until("r", vid(9)), Some(u64::MAX));
    assert_eq!(
        h.run(Command::Unban {
            room: "r".into(),
            visitor: vid(9),
        }),
        Outcome::Count(1)
    );
    assert!(matches!(h.join("r", 9), Outcome::Visitor(_)));
    // Bans are state: they survive a snapshot.
    let back = StateMachine::restore(&h.sm.snapshot()).unwrap();
    assert_eq!(back.digest(), h.sm.digest());
    assert_eq!(back.banned_until("r", vid(1)), Some(u64::MAX));
}

#[test]
fn bans_are_bounded_and_expired_ones_make_room() {
    let mut h = H::new();
    h.create("r", cfg(1, 60));
    for v in 0..BANS_PER_ROOM_MAX as u128 {
        let until = if v == 0 { Some(T0 + 1_000) } else { None };
        assert_eq!(ban(&mut h, v, until), Outcome::Count(0));
    }
    let full = ban(&mut h, u128::MAX, None);
    assert_eq!(rejected(&full).code(), "limit_reached");
    // Once the first ban has ended, it makes room for another.
    h.at(1_000);
    assert_eq!(ban(&mut h, u128::MAX, None), Outcome::Count(0));
    assert_eq!(h.sm.banned_until("r", vid(0)), None);
    // Renewing a ban already held never needs room.
    assert_eq!(ban(&mut h, 5, Some(T0 + 10_000)), Outcome::Count(0));
}

/// Signing out ends a dashboard session on every replica until it would have ended anyway;
/// the record is then dropped when room is needed.
#[test]
fn ended_operator_sessions_are_remembered_until_they_would_have_ended() {
    let mut h = H::new();
    let end = |h: &mut H, id: u8, until_ms: u64| {
        h.run(Command::EndCredential {
            credential: [id; 16],
            until_ms,
        })
    };
    assert_eq!(end(&mut h, 1, T0 + 1_000), Outcome::Count(1));
    assert!(h.sm.credential_ended(&[1; 16]));
    assert!(!h.sm.credential_ended(&[2; 16]));
    // One already over is not recorded.
    assert_eq!(end(&mut h, 2, T0), Outcome::Count(0));
    let back = StateMachine::restore(&h.sm.snapshot()).unwrap();
    assert!(back.credential_ended(&[1; 16]));
    h.at(1_000).tick();
    assert!(!h.sm.credential_ended(&[1; 16]), "it would have ended");
    // Bounded: past the limit, only records of sessions that are over make room.
    let mut h = H::new();
    for i in 0..CREDENTIALS_ENDED_MAX as u32 {
        let mut id = [0u8; 16];
        id[..4].copy_from_slice(&i.to_be_bytes());
        let until = if i == 0 { T0 + 10 } else { T0 + 3_600_000 };
        assert_eq!(
            h.run(Command::EndCredential {
                credential: id,
                until_ms: until
            }),
            Outcome::Count(1)
        );
    }
    assert_eq!(
        rejected(&end(&mut h, 0xee, T0 + 3_600_000)).code(),
        "limit_reached"
    );
    h.at(10);
    assert_eq!(end(&mut h, 0xee, T0 + 3_600_000), Outcome::Count(1));
}

/// One operator (a viewer, signing in and out in a loop) ends at most its own share of
/// dashboard sessions: past it its sign-outs are refused, and everyone else's still end their
/// sessions; its own are taken again once its ended sessions would have expired anyway.
#[test]
fn one_operator_cannot_fill_the_ended_sessions() {
    let mut h = H::new();
    let end = |h: &mut H, id: [u8; 16], until: u64| {
        h.run(Command::EndCredential {
            credential: id,
            until_ms: until,
        })
    };
    let id = |name: &str, i: u32| {
        let mut r = [0u8; 16];
        r[12..].copy_from_slice(&i.to_be_bytes());
        crate::session_id(name, r)
    };
    assert_eq!(
        crate::session_owner(&id("viewer", 1)),
        crate::session_owner(&id("viewer", 2))
    );
    assert_ne!(
        crate::session_owner(&id("viewer", 1)),
        crate::session_owner(&id("alice", 1))
    );
    for i in 0..SESSIONS_ENDED_PER_OPERATOR_MAX as u32 {
        assert_eq!(
            end(&mut h, id("viewer", i), T0 + 3_600_000),
            Outcome::Count(1)
        );
    }
    let refused = end(&mut h, id("viewer", 9_999), T0 + 3_600_000);
    assert_eq!(rejected(&refused).code(), "limit_reached");
    assert!(!h.sm.credential_ended(&id("viewer", 9_999)));
    // Another operator's sign-out ends its session.
    assert_eq!(
        end(&mut h, id("alice", 1), T0 + 3_600_000),
        Outcome::Count(1)
    );
    assert!(h.sm.credential_ended(&id("alice", 1)));
    // Once the viewer's ended sessions would have ended anyway, its sign-outs count again.
    h.at(3_600_001);
    assert_eq!(
        end(&mut h, id("viewer", 9_999), T0 + 7_200_000),
        Outcome::Count(1)
    );
}

/// Sign-outs, which any operator (a viewer too) can make as often as it signs in, take at most
/// their share of the ended credentials: past it a sign-out is refused, and a staff token can
/// still be revoked.
#[test]
fn sign_outs_never_take_the_places_revocations_need() {
    let mut h = H::new();
    let end = |h: &mut H, id: [u8; 16]| {
        h.run(Command::EndCredential {
            credential: id,
            until_ms: T0 + 3_600_000,
        })
    };
    let session = |i: u32| {
        let mut id = [0u8; 16];
        id[..4].copy_from_slice(&i.to_be_bytes());
        id[0] |= 0x80;
        id
    };
    for i in 0..SESSIONS_ENDED_MAX as u32 {
        assert_eq!(end(&mut h, session(i)), Outcome::Count(1));
    }
    assert_eq!(
        rejected(&end(&mut h, session(u32::MAX >> 1))).code(),
        "limit_reached"
    );
    // A session already ended is ended again without a new place.
    assert_eq!(end(&mut h, session(7)), Outcome::Count(1));
    // A staff token's id (first bit clear) is revoked.
    let mut staff = [0x11u8; 16];
    staff[0] &= 0x7f;
    assert!(!crate::is_session_credential(&staff));
    assert_eq!(end(&mut h, staff), Outcome::Count(1));
    assert!(h.sm.credential_ended(&staff));
}

/// Revocations of staff tokens, which any operator can send with any id, take at most their
/// share of the ended credentials: past it a revocation is refused and a sign-out still ends
/// its session. A dashboard session's id is no staff token's, a room that does not exist has no
/// tokens, and a revocation is never remembered longer than a token can last.
#[test]
fn revocations_never_take_the_places_sign_outs_need() {
    let mut h = H::new();
    h.create("r", cfg(1, 60));
    let revoke = |h: &mut H, room: &str, id: [u8; 16]| {
        h.run(Command::RevokeStaffToken {
            room: room.into(),
            id,
            until_ms: T0 + 3_600_000,
        })
    };
    let staff = |i: u32| {
        let mut id = [0u8; 16];
        id[..4].copy_from_slice(&i.to_be_bytes());
        id[0] &= 0x7f;
        id
    };
    let mut session = [0x22u8; 16];
    session[0] |= 0x80;
    let refused = revoke(&mut h, "r", session);
    assert_eq!(rejected(&refused).code(), "invalid_field", "{refused:?}");
    assert!(!h.sm.credential_ended(&session));
    assert_eq!(
        rejected(&revoke(&mut h, "nowhere", staff(1))).code(),
        "room_not_found"
    );
    for i in 0..STAFF_TOKENS_ENDED_MAX as u32 {
        assert_eq!(revoke(&mut h, "r", staff(i)), Outcome::Count(1));
    }
    assert_eq!(
        rejected(&revoke(&mut h, "r", staff(u32::MAX >> 1))).code(),
        "limit_reached"
    );
    // A token already revoked is revoked again without a new place.
    assert_eq!(revoke(&mut h, "r", staff(7)), Outcome::Count(1));
    // A sign-out still ends its session.
    assert_eq!(
        h.run(Command::EndCredential {
            credential: session,
            until_ms: T0 + 3_600_000,
        }),
        Outcome::Count(1)
    );
    assert!(h.sm.credential_ended(&session));
    // Once revocations would have ended, they make room again; one asked to be remembered for
    // a year is kept only as long as a token can last.
    let mut h = H::new();
    h.create("r", cfg(1, 60));
    assert_eq!(
        h.run(Command::RevokeStaffToken {
            room: "r".into(),
            id: staff(1),
            until_ms: T0 + 365 * 86_400_000,
        }),
        Outcome::Count(1)
    );
    h.at(STAFF_TOKEN_TTL_MS_MAX + 3_600_000).tick();
    assert!(
        !h.sm.credential_ended(&staff(1)),
        "kept past a token's life"
    );
    assert_eq!(
        Command::RevokeStaffToken {
            room: "r".into(),
            id: staff(1),
            until_ms: 0
        }
        .describe(),
        ("revoke_staff_token", format!("00000001{}", "00".repeat(12)))
    );
}

/// The largest commands the edge lets through fit a proposal's byte budget with room to spare,
/// so that the write path never proposes one alone past it, and a command's size is what it
/// adds to an encoded proposal.
#[test]
fn the_largest_commands_fit_a_proposal() {
    use crate::codes::{CodeHash, NewCode, CODES_PER_COMMAND_MAX};
    let room = "r".repeat(NAME_LEN_MAX);
    let touch = Command::TouchFrom {
        room: room.clone(),
        visits: vec![(VisitorId([0xff; 16]), ClientKey([0xff; 16])); TOUCH_BATCH_MAX],
    };
    let code = NewCode {
        hash: CodeHash([0xff; 16]),
        identity: Some(IdentityKey([0xff; 16])),
    };
    let add = Command::AsOperator {
        operator: "o".repeat(NAME_LEN_MAX),
        command: Box::new(Command::AddCodes {
            room,
            batch: u32::MAX,
            codes: vec![code; CODES_PER_COMMAND_MAX],
        }),
    };
    for c in [touch, add] {
        let n = c.encoded_len();
        assert!(n <= PROPOSAL_BYTES_MAX / 2, "{} bytes", n);
        let alone = Proposal {
            time_ms: u64::MAX,
            commands: vec![c.clone()],
        };
        let two = Proposal {
            time_ms: u64::MAX,
            commands: vec![c.clone(), c],
        };
        assert!(alone.encode().len() > n && alone.encode().len() <= n + 16);
        assert_eq!(two.encode().len() - alone.encode().len(), n);
    }
}

/// A version 2 snapshot (before bans, ended operator sessions and entry policies) restores to the same state,
/// which the current version writes with empty extras.
#[test]
fn version_2_snapshots_still_restore() {
    let h = every_part_without_turnover();
    let v3 = h.sm.snapshot();
    assert_eq!(v3[4], crate::snapshot::SNAPSHOT_VERSION);
    // With no bans, ended sessions, entry policies, client networks, used challenges,
    // identities, networks per session, session turnover, origin measurements, lanes, codes
    // or notices, ledger records, draw secrets, webhooks, noted closings or held waiters, the
    // extras are twelve empty lists, a zero count, 32 zero bytes of chain and four empty lists:
    // 49 zero bytes.
    assert_eq!(&v3[v3.len() - 49..], &[0; 49]);
    let mut v2 = v3[..v3.len() - 49].to_vec();
    v2[4] = 2;
    let back = StateMachine::restore(&v2).unwrap();
    assert_eq!(back.snapshot(), v3);
}

fn policy(h: &mut H, p: EntryPolicy) -> Outcome {
    h.run(Command::SetEntryPolicy {
        room: "r".into(),
        policy: p.encode(),
    })
}

fn join_from(h: &mut H, v: u128, client: u8) -> Outcome {
    h.run(Command::JoinWith {
        room: "r".into(),
        visitor: vid(v),
        evidence: JoinEvidence {
            client: Some(ClientKey([client; 16])),
            challenge: None,
            identity: None,
            external_passed: false,
            ..JoinEvidence::default()
        }
        .encode(),
    })
}

fn join_as(h: &mut H, v: u128, who: u8) -> Outcome {
    h.run(Command::JoinWith {
        room: "r".into(),
        visitor: vid(v),
        evidence: JoinEvidence {
            identity: Some(crate::policy::IdentityKey([who; 16])),
            ..JoinEvidence::default()
        }
        .encode(),
    })
}

fn join_solved(h: &mut H, v: u128, id: u8, expires_ms: u64, work: u32) -> Outcome {
    h.run(Command::JoinWith {
        room: "r".into(),
        visitor: vid(v),
        evidence: JoinEvidence {
            client: None,
            challenge: Some(crate::ChallengeUse {
                id: [id; 16],
                expires_ms,
                work,
                cost: 10,
            }),
            identity: None,
            external_passed: false,
            ..JoinEvidence::default()
        }
        .encode(),
    })
}

/// A room with a proof-of-work rule gives a place only for a solved challenge that is hard
/// enough for the line at the join's log time, unexpired, and not used before; it remembers a
/// used challenge until it expires, on every replica alike (in snapshots too). A visitor who
/// holds a place resumes it without a new challenge.
#[test]
fn a_place_costs_one_fresh_challenge() {
    let mut h = H::new();
    h.create("r", cfg(1, 60));
    let rule = crate::PowRule {
        work: 100,
        cost: 10,
        double_every_waiting: Some(2),
        work_max: 1_000,
    };
    policy(
        &mut h,
        EntryPolicy {
            proof_of_work: Some(rule.clone()),
            ..EntryPolicy::default()
        },
    );
    let soon = T0 + 60_000;
    assert_eq!(
        rejected(&h.join("r", 1)),
        &Rejection::ChallengeRequired { work: 100 }
    );
    assert!(matches!(
        join_solved(&mut h, 1, 1, soon, 100),
        Outcome::Visitor(_)
    ));
    assert!(h.is_admitted("r", 1));
    // Resuming the place needs no challenge.
    assert!(matches!(h.join("r", 1), Outcome::Visitor(_)));
    // The same challenge does not mint a second place.
    assert_eq!(
        rejected(&join_solved(&mut h, 2, 1, soon, 100)).code(),
        "challenge_invalid"
    );
    // Expired by log time, or expiring further ahead than any challenge may: refused.
    assert_eq!(
        rejected(&join_solved(&mut h, 2, 2, T0, 100)).code(),
        "challenge_invalid"
    );
    assert_eq!(
        rejected(&join_solved(&mut h, 2, 2, T0 + 3_600_000, 100)).code(),
        "challenge_invalid"
    );
    // The work doubles with every two waiters; a challenge of half the work still counts (the
    // line may have grown while it was solved), a quarter does not.
    assert!(matches!(
        join_solved(&mut h, 2, 2, soon, 100),
        Outcome::Visitor(_)
    ));
    assert!(matches!(
        join_solved(&mut h, 3, 3, soon, 100),
        Outcome::Visitor(_)
    ));
    assert_eq!(
        rejected(&h.join("r", 4)),
        &Rejection::ChallengeRequired { work: 200 }
    );
    assert!(matches!(
        join_solved(&mut h, 4, 4, soon, 100),
        Outcome::Visitor(_)
    ));
    assert!(matches!(
        join_solved(&mut h, 5, 5, soon, 200),
        Outcome::Visitor(_)
    ));
    assert_eq!(
        rejected(&h.join("r", 6)),
        &Rejection::ChallengeRequired { work: 400 }
    );
    assert_eq!(
        rejected(&join_solved(&mut h, 6, 6, soon, 100)).code(),
        "challenge_invalid"
    );
    // A restored replica remembers the used challenges and refuses alike.
    let mut back = h.restored();
    assert_eq!(back.sm.digest(), h.sm.digest());
    assert_eq!(
        rejected(&join_solved(&mut back, 7, 5, soon, 400)).code(),
        "challenge_invalid"
    );
    // Once expired, used challenges are forgotten (a join after that finds none).
    h.at(61_000);
    for v in 1..=5 {
        h.run(Command::Leave {
            room: "r".into(),
            visitor: vid(v),
        });
    }
    assert!(matches!(
        join_solved(&mut h, 8, 8, T0 + 120_000, 100),
        Outcome::Visitor(_)
    ));
    assert_eq!(
        h.sm.rooms["r"].challenges_used.len(),
        1,
        "only the newest is remembered"
    );
}

/// One client network holds at most its share of live places, waiting or admitted; a place
/// that ends frees its share; a visitor resuming its place is not counted twice; a join
/// without a client is not counted.
#[test]
fn a_client_network_holds_at_most_its_share_of_places() {
    let mut h = H::new();
    h.create("r", cfg(1, 60));
    assert!(matches!(
        policy(
            &mut h,
            EntryPolicy {
                places_per_client_max: Some(2),
                ..EntryPolicy::default()
            }
        ),
        Outcome::Room(_)
    ));
    assert!(matches!(join_from(&mut h, 1, 7), Outcome::Visitor(_)));
    assert!(h.is_admitted("r", 1));
    assert!(matches!(join_from(&mut h, 2, 7), Outcome::Visitor(_)));
    assert_eq!(
        rejected(&join_from(&mut h, 3, 7)),
        &Rejection::PlaceLimit { max: 2 }
    );
    // Resuming is not a new place.
    assert!(matches!(join_from(&mut h, 2, 7), Outcome::Visitor(_)));
    // Another network, and a join that names none, are not held to network 7's share.
    assert!(matches!(join_from(&mut h, 4, 8), Outcome::Visitor(_)));
    assert!(matches!(h.join("r", 5), Outcome::Visitor(_)));
    // The admitted one leaves: network 7 may take a place again.
    h.run(Command::Leave {
        room: "r".into(),
        visitor: vid(1),
    });
    assert!(matches!(join_from(&mut h, 3, 7), Outcome::Visitor(_)));
    assert_eq!(
        rejected(&join_from(&mut h, 6, 7)),
        &Rejection::PlaceLimit { max: 2 }
    );
    // The counts are state: a restored replica refuses alike.
    let mut back = h.restored();
    assert_eq!(back.sm.digest(), h.sm.digest());
    assert_eq!(
        rejected(&join_from(&mut back, 6, 7)),
        &Rejection::PlaceLimit { max: 2 }
    );
    // Garbage evidence is refused, as is a policy out of range.
    let garbage = h.run(Command::JoinWith {
        room: "r".into(),
        visitor: vid(9),
        evidence: crate::policy::EncodedEvidence(vec![1, 7]),
    });
    assert_eq!(rejected(&garbage).code(), "invalid_field");
    let bad = policy(
        &mut h,
        EntryPolicy {
            places_per_client_max: Some(0),
            ..EntryPolicy::default()
        },
    );
    assert_eq!(rejected(&bad).code(), "invalid_field");
}

/// An admitted visitor who never uses the admission loses it after the first-use TTL, not the
/// whole session TTL; one who uses it keeps it.
#[test]
fn an_admission_not_used_in_time_is_lost() {
    let mut h = H::new();
    h.create("r", cfg(2, 600));
    policy(
        &mut h,
        EntryPolicy {
            first_use_ttl_secs: Some(60),
            ..EntryPolicy::default()
        },
    );
    h.join("r", 1);
    h.join("r", 2);
    h.join("r", 3);
    assert!(h.is_admitted("r", 1) && h.is_admitted("r", 2));
    // Visitor 2 uses its admission (a gate check's renewal); visitor 1 does not.
    h.at(10_000).run(Command::Touch {
        room: "r".into(),
        visitors: vec![vid(2)],
    });
    assert_eq!(h.sm.next_due_ms(), Some(T0 + 60_000));
    let back = StateMachine::restore(&h.sm.snapshot()).unwrap();
    assert_eq!(back.next_due_ms(), Some(T0 + 60_000), "rebuilt on restore");
    h.at(59_999).tick();
    assert!(h.is_admitted("r", 1));
    h.at(60_000).tick();
    assert!(matches!(
        h.state("r", 1),
        VisitorState::Ended {
            reason: EndReason::Unused,
            ..
        }
    ));
    assert!(h.is_admitted("r", 2), "used in time");
    assert!(
        h.is_admitted("r", 3),
        "the freed place goes to the next in line"
    );
}

/// Room `r`, capacity 1, that asks every new place for an identity.
fn identity_room() -> H {
    let mut h = H::new();
    h.create("r", cfg(1, 60));
    policy(
        &mut h,
        EntryPolicy {
            identity: Some(crate::policy::IdentityRule { salt: [1; 16] }),
            ..EntryPolicy::default()
        },
    );
    h
}

/// One identity, one place: a room that asks identities gives a place only to a join that brings
/// one; a second join with the same identity (another device: another visitor id) resumes the
/// first place rather than take another; once that place ends, the identity may join again. The
/// mapping is state: a restored replica resumes alike.
#[test]
fn one_identity_holds_one_place() {
    let mut h = identity_room();
    assert_eq!(rejected(&h.join("r", 1)), &Rejection::IdentityRequired);
    assert!(matches!(join_as(&mut h, 1, 7), Outcome::Visitor(v) if v.visitor == vid(1)));
    assert!(matches!(join_as(&mut h, 2, 8), Outcome::Visitor(v) if v.visitor == vid(2)));
    // Identity 7 from another device: visitor 1's place, not a new one.
    assert!(matches!(join_as(&mut h, 3, 7), Outcome::Visitor(v) if v.visitor == vid(1)));
    assert_eq!(h.room("r").totals.joined, 2);
    let mut back = h.restored();
    assert_eq!(back.sm.digest(), h.sm.digest());
    assert!(matches!(join_as(&mut back, 4, 8), Outcome::Visitor(v) if v.visitor == vid(2)));
    // The place ends: the identity may take a new one.
    h.run(Command::Leave {
        room: "r".into(),
        visitor: vid(1),
    });
    assert!(matches!(join_as(&mut h, 5, 7), Outcome::Visitor(v) if v.visitor == vid(5)));
    assert_eq!(h.room("r").totals.joined, 3);
    // Turning the rule off forgets the identities.
    policy(&mut h, EntryPolicy::default());
    assert!(matches!(h.join("r", 6), Outcome::Visitor(_)));
}

/// A ban sticks to the identity: the banned visitor who clears its cookie and joins again with
/// the same identity (a new visitor id) meets the ban, on a restored replica too; when the ban
/// is lifted, or ends, the identity joins as anyone.
#[test]
fn a_ban_sticks_to_the_identity_not_only_to_the_visitor_id() {
    let mut h = identity_room();
    assert!(matches!(join_as(&mut h, 1, 7), Outcome::Visitor(_)));
    assert!(matches!(join_as(&mut h, 2, 8), Outcome::Visitor(_)));
    assert!(matches!(
        ban(&mut h, 2, Some(T0 + 60_000)),
        Outcome::Count(1)
    ));
    let banned = |o: &Outcome| matches!(o, Outcome::Rejected(Rejection::Banned { .. }));
    assert!(
        banned(&join_as(&mut h, 3, 8)),
        "a new visitor id, the same identity"
    );
    let mut back = h.restored();
    assert_eq!(back.sm.digest(), h.sm.digest());
    assert!(banned(&join_as(&mut back, 4, 8)));
    // The ban ends: the identity takes a place under its new visitor id.
    back.at(60_000);
    assert!(matches!(join_as(&mut back, 5, 8), Outcome::Visitor(v) if v.visitor == vid(5)));
    // Lifted: the same.
    h.run(Command::Unban {
        room: "r".into(),
        visitor: vid(2),
    });
    assert!(matches!(join_as(&mut h, 6, 8), Outcome::Visitor(v) if v.visitor == vid(6)));
    assert_eq!(h.restored().sm.digest(), h.sm.digest());
}

/// A shared ticket: a session used from one client network more than the room allows ends as
/// `shared` (counted), on every replica alike; a session used from its own networks again, or a
/// room that does not count networks, is unaffected.
#[test]
fn a_session_used_from_too_many_networks_ends_as_shared() {
    let mut h = H::new();
    h.create("r", cfg(2, 600));
    policy(
        &mut h,
        EntryPolicy {
            networks_per_session_max: Some(2),
            ..EntryPolicy::default()
        },
    );
    h.join("r", 1);
    h.join("r", 2);
    assert!(h.is_admitted("r", 1) && h.is_admitted("r", 2));
    let net = |n: u8| ClientKey([n; 16]);
    let visits = |v: Vec<(u128, u8)>| Command::TouchFrom {
        room: "r".into(),
        visits: v.into_iter().map(|(id, n)| (vid(id), net(n))).collect(),
    };
    h.at(1_000)
        .run(visits(vec![(1, 1), (1, 2), (2, 5), (1, 1), (2, 5)]));
    assert!(h.is_admitted("r", 1) && h.is_admitted("r", 2));
    let back = StateMachine::restore(&h.sm.snapshot()).unwrap();
    assert_eq!(back.digest(), h.sm.digest());
    h.at(2_000).run(visits(vec![(1, 3)]));
    assert!(matches!(
        h.state("r", 1),
        VisitorState::Ended {
            reason: EndReason::Shared,
            ..
        }
    ));
    assert!(h.is_admitted("r", 2));
    assert_eq!(h.room("r").sessions_shared, 1);
    let back = StateMachine::restore(&h.sm.snapshot()).unwrap();
    assert_eq!(back.room("r").unwrap().sessions_shared, 1);
    // Without the rule, networks are not counted.
    policy(&mut h, EntryPolicy::default());
    h.at(3_000)
        .run(visits(vec![(2, 6), (2, 7), (2, 8), (2, 9)]));
    assert!(h.is_admitted("r", 2));
}

/// One client network holds at most its share of admitted sessions: its next waiter is passed
/// over, keeping its place, and is admitted first once one of its network's sessions ends; a
/// line held back entirely asks for no ticks; a restored replica decides alike.
#[test]
fn a_client_network_holds_at_most_its_share_of_sessions() {
    let mut h = H::new();
    h.create("r", cfg(3, 6_000));
    policy(
        &mut h,
        EntryPolicy {
            sessions_per_client_max: Some(1),
            ..EntryPolicy::default()
        },
    );
    // Network 7 brings three people, then network 8 one.
    for v in 1..=3 {
        join_from(&mut h, v, 7);
    }
    join_from(&mut h, 4, 8);
    assert!(h.is_admitted("r", 1));
    assert!(h.is_admitted("r", 4), "network 8 was not held back by 7");
    assert_eq!(h.position("r", 2), Some(1));
    assert_eq!(h.position("r", 3), Some(2));
    // Told so, with no estimate (not "first, in seconds"); network 8's next waiter is not held.
    assert!(matches!(
        h.state("r", 2),
        VisitorState::Waiting {
            held: true,
            eta_secs: None,
            ..
        }
    ));
    assert_eq!(
        h.room("r").active,
        2,
        "a free place stays free while 7 is at its share"
    );
    assert_eq!(
        h.sm.next_due_ms().filter(|&t| t <= h.now),
        None,
        "a line held back asks for no ticks"
    );
    // A join without a client is not held.
    h.join("r", 5);
    assert!(h.is_admitted("r", 5));
    // Network 7's session ends: its next waiter goes in, before the one behind it.
    h.at(1_000).run(Command::Leave {
        room: "r".into(),
        visitor: vid(4),
    });
    assert!(!h.is_admitted("r", 2), "network 7 still holds its share");
    let mut back = h.restored();
    h.at(2_000).run(Command::Leave {
        room: "r".into(),
        visitor: vid(1),
    });
    assert!(h.is_admitted("r", 2));
    assert_eq!(h.position("r", 3), Some(1));
    back.at(2_000).run(Command::Leave {
        room: "r".into(),
        visitor: vid(1),
    });
    assert_eq!(back.sm.digest(), h.sm.digest());
    // Lifting the rule lets the held waiter in.
    policy(&mut h, EntryPolicy::default());
    assert!(h.is_admitted("r", 3));
}

/// With a window, a network not seen on a session for that long stops counting against its
/// share of networks: a phone that moved from Wi-Fi to mobile an hour ago is not a shared ticket.
#[test]
fn networks_not_seen_within_the_window_stop_counting() {
    let mut h = H::new();
    h.create("r", cfg(1, 600));
    policy(
        &mut h,
        EntryPolicy {
            networks_per_session_max: Some(1),
            networks_window_secs: Some(60),
            ..EntryPolicy::default()
        },
    );
    h.join("r", 1);
    let visit = |n: u8| Command::TouchFrom {
        room: "r".into(),
        visits: vec![(vid(1), ClientKey([n; 16]))],
    };
    h.at(1_000).run(visit(1));
    h.at(50_000).run(visit(1));
    // Network 1 was seen 59.9 s ago: a second network is one too many.
    let mut early = h.restored();
    early.at(109_900).run(visit(2));
    assert!(matches!(
        early.state("r", 1),
        VisitorState::Ended {
            reason: EndReason::Shared,
            ..
        }
    ));
    // 60 s after it was last seen, it no longer counts.
    h.at(110_000).run(visit(2));
    assert!(h.is_admitted("r", 1));
    assert_eq!(h.restored().sm.digest(), h.sm.digest());
    h.at(111_000).run(visit(1));
    assert!(matches!(
        h.state("r", 1),
        VisitorState::Ended {
            reason: EndReason::Shared,
            ..
        }
    ));
}

/// A room with an external challenge gives a place only to a join the edge says passed it; a
/// place held resumes without.
#[test]
fn an_external_challenge_gates_new_places() {
    let mut h = H::new();
    h.create("r", cfg(1, 60));
    policy(
        &mut h,
        EntryPolicy {
            external_challenge: Some(crate::policy::ExternalRule {
                provider: "turnstile".into(),
                fail_open: false,
            }),
            ..EntryPolicy::default()
        },
    );
    assert_eq!(
        rejected(&h.join("r", 1)),
        &Rejection::ChallengeRequired { work: 0 }
    );
    let passed = |h: &mut H, v: u128| {
        h.run(Command::JoinWith {
            room: "r".into(),
            visitor: vid(v),
            evidence: JoinEvidence {
                external_passed: true,
                ..JoinEvidence::default()
            }
            .encode(),
        })
    };
    assert!(matches!(passed(&mut h, 1), Outcome::Visitor(_)));
    assert!(matches!(h.join("r", 1), Outcome::Visitor(_)), "resumes");
    let bad = policy(
        &mut h,
        EntryPolicy {
            external_challenge: Some(crate::policy::ExternalRule {
                provider: "no spaces".into(),
                fail_open: false,
            }),
            ..EntryPolicy::default()
        },
    );
    assert_eq!(rejected(&bad).code(), "invalid_field");
}

fn report(h: &mut H, errors: bool) -> Outcome {
    h.run(Command::ReportOrigin {
        room: "r".into(),
        source: crate::HealthSource::Probe,
        samples: crate::OriginSamples {
            count: 10,
            errors: if errors { 10 } else { 0 },
            over_slow: 0,
            over_down: 0,
            latency_ms_sum: 500,
        },
    })
}

#[test]
fn the_origins_measurements_set_its_health_and_pause_the_room_while_it_is_down() {
    let mut h = H::new();
    h.create("r", cfg(10, 60));
    assert!(
        matches!(rejected(&report(&mut h, true)), Rejection::InvalidField { field, .. } if field == "origin"),
        "a room without an origin rule takes no reports"
    );
    let rule = crate::OriginRule {
        down_error_permille: Some(500),
        min_samples: 10,
        window_secs: 10,
        worsen_after_secs: 0,
        recover_after_secs: 5,
        auto_pause: true,
        ..crate::OriginRule::default()
    };
    policy(
        &mut h,
        EntryPolicy {
            origin: Some(rule),
            ..EntryPolicy::default()
        },
    );
    h.at(1_000).join("r", 1);
    assert!(h.is_admitted("r", 1));
    h.join("r", 2);
    report(&mut h, false);
    assert_eq!(h.room("r").config.health, Health::Ok);
    // The origin fails: down at once (no hold to worsen), the room paused, and nobody admitted
    // although tokens refill.
    h.at(2_000);
    report(&mut h, true);
    let room = h.room("r");
    assert_eq!(room.config.health, Health::Down);
    assert!(room.config.paused && room.paused_by_origin);
    let change = room.health_change.expect("a recorded change");
    assert_eq!(change.source, crate::HealthSource::Probe);
    assert_eq!((change.window.count, change.window.errors), (20, 10));
    assert_eq!(change.paused, Some(true));
    h.at(30_000).tick();
    assert!(!h.is_admitted("r", 2));
    // A replica restored from a snapshot holds the same measurements and decides alike.
    let mut replica = h.restored();
    // Good answers: the errors leave the window after 10 s, then the good verdict must hold
    // 5 s before the health recovers and the room resumes.
    for h in [&mut h, &mut replica] {
        h.at(31_000);
        report(h, false);
        assert_eq!(
            h.room("r").config.health,
            Health::Down,
            "not held long enough"
        );
        h.at(36_000);
        report(h, false);
        let room = h.room("r");
        assert_eq!(room.config.health, Health::Ok);
        assert!(!room.config.paused && !room.paused_by_origin);
        assert_eq!(room.health_change.expect("a change").paused, Some(false));
        assert!(h.is_admitted("r", 2), "admissions resume");
    }
    assert_eq!(h.sm.digest(), replica.sm.digest());
}

#[test]
fn an_operators_pause_is_not_undone_by_the_origin_recovering() {
    let mut h = H::new();
    h.create("r", cfg(10, 60));
    policy(
        &mut h,
        EntryPolicy {
            origin: Some(crate::OriginRule {
                down_error_permille: Some(500),
                min_samples: 10,
                window_secs: 10,
                recover_after_secs: 0,
                auto_pause: true,
                ..crate::OriginRule::default()
            }),
            ..EntryPolicy::default()
        },
    );
    h.at(1_000);
    report(&mut h, true);
    assert!(h.room("r").paused_by_origin);
    h.run(Command::Pause { room: "r".into() });
    h.at(20_000);
    report(&mut h, false);
    let room = h.room("r");
    assert_eq!(room.config.health, Health::Ok);
    assert!(room.config.paused, "paused by hand, it stays paused");
}

#[test]
fn the_line_shows_what_the_room_allows() {
    let mut h = H::new();
    h.create("r", cfg(100, 60));
    h.join_many("r", 1, 4);
    let line = crate::LineRule {
        show_waiting: false,
        show_positions: false,
        status_reads_per_sec: Some(1),
    };
    policy(
        &mut h,
        EntryPolicy {
            line,
            ..EntryPolicy::default()
        },
    );
    match h.state("r", 3) {
        VisitorState::Waiting {
            position,
            waiting,
            eta_secs,
            next_check_secs,
            ..
        } => {
            assert_eq!((position, waiting), (None, None));
            assert!(eta_secs.is_some(), "the waiting time is still told");
            assert_eq!(next_check_secs, crate::origin::NEXT_CHECK_SECS_MIN);
        }
        s => panic!("not waiting: {s:?}"),
    }
    let next_check = |h: &H| match h.state("r", 3) {
        VisitorState::Waiting {
            next_check_secs, ..
        } => next_check_secs,
        s => panic!("not waiting: {s:?}"),
    };
    h.join_many("r", 5, 200);
    assert_eq!(next_check(&h), 199, "199 waiters at one read per second");
    h.join_many("r", 201, 1_000);
    assert_eq!(
        next_check(&h),
        300,
        "never past half the waiter TTL: the place is kept"
    );
}

// ---- a sale in phases ---------------------------------------------------------------------------

fn phase(at_ms_after_t0: u64, name: &str) -> crate::phases::Phase {
    crate::phases::Phase {
        starts_at_ms: T0 + at_ms_after_t0,
        name: name.into(),
        capacity: None,
        admit_per_minute: None,
        mode: None,
        notice: None,
        page_template: None,
        announce: true,
    }
}

#[test]
fn a_sale_in_phases_changes_capacity_rate_and_notice_exactly_at_each_start() {
    let mut h = H::new();
    // Two admissions at once, one a minute after.
    h.create(
        "r",
        RoomConfig {
            admit_burst: 2,
            ..cfg(2, 1)
        },
    );
    let timeline = vec![
        crate::phases::Phase {
            capacity: Some(5),
            admit_per_minute: Some(60),
            notice: Some("The public sale is open.".into()),
            ..phase(10_000, "Public")
        },
        crate::phases::Phase {
            capacity: Some(8),
            notice: Some(String::new()),
            ..phase(20_000, "Second drop")
        },
    ];
    let o = policy(
        &mut h,
        EntryPolicy {
            phases: timeline.clone(),
            ..EntryPolicy::default()
        },
    );
    assert!(!matches!(o, Outcome::Rejected(_)), "{o:?}");
    h.sm.keep_ledger(true);
    h.join_many("r", 1, 10);
    assert_eq!(h.room("r").active, 2, "capacity 2 before the first phase");
    // The leader is woken for the start.
    assert_eq!(h.sm.next_due_ms(), Some(T0 + 10_000));
    h.at(9_999).tick();
    assert_eq!(h.room("r").active, 2);
    assert!(h.room("r").notice.is_none());
    // At the start: capacity 5, a token a second from here; the bucket earned at the old rate
    // up to the start (10 s of one a minute: nothing whole), none at the new rate before it.
    h.at(10_000).tick();
    let v = h.room("r");
    assert_eq!((v.config.capacity, v.config.admit_per_minute), (5, 60));
    assert_eq!(
        v.notice.as_ref().map(|n| n.text.as_str()),
        Some("The public sale is open.")
    );
    assert_eq!(v.active, 2, "no token yet at the new rate");
    h.at(11_000).tick();
    assert_eq!(h.room("r").active, 3, "one a second from the start");
    let before_restore = h.restored();
    h.at(15_000).tick();
    assert_eq!(h.room("r").active, 5, "capacity 5");
    // A replica restored in between goes on alike.
    let mut again = before_restore;
    again.at(15_000).tick();
    assert_eq!(again.sm.digest(), h.sm.digest());
    // Frozen once started: changing the public phase is refused, the second drop may change.
    let mut changed = timeline.clone();
    changed[0].capacity = Some(6);
    let o = policy(
        &mut h,
        EntryPolicy {
            phases: changed,
            ..EntryPolicy::default()
        },
    );
    assert_eq!(rejected(&o).field(), Some("phases"), "{o:?}");
    let mut later = timeline.clone();
    later[1].capacity = Some(9);
    let o = policy(
        &mut h,
        EntryPolicy {
            phases: later,
            ..EntryPolicy::default()
        },
    );
    assert!(!matches!(o, Outcome::Rejected(_)), "{o:?}");
    // The second drop, reached by an entry long after its start: applied as of its start.
    h.at(40_000).tick();
    let v = h.room("r");
    assert_eq!(v.config.capacity, 9);
    assert!(v.notice.is_none(), "the second drop takes the notice down");
    assert_eq!(v.active, 7, "the bucket holds its burst of 2 at most");
    let kinds: Vec<(&str, String)> =
        h.sm.take_ledger()
            .iter()
            .filter_map(|r| match &r.event {
                crate::ledger::Event::PhaseStarted { name, .. } => Some(("phase", name.clone())),
                crate::ledger::Event::Notice { text } => {
                    Some(("notice", text.clone().unwrap_or_default()))
                }
                _ => None,
            })
            .collect();
    assert_eq!(
        kinds,
        vec![
            ("notice", "The public sale is open.".to_string()),
            ("phase", "Public".to_string()),
            ("notice", String::new()),
            ("phase", "Second drop".to_string()),
        ]
    );
    assert_eq!(h.sm.next_due_ms().filter(|&t| t <= T0 + 40_000), None);
}
