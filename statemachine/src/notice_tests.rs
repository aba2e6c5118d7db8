//! The operator's notice to the line, and the grace period of waiters who stepped away.

use super::*;

fn leave(h: &mut H, v: u128) {
    let o = h.run(Command::Leave {
        room: "r".into(),
        visitor: vid(v),
    });
    assert!(matches!(o, Outcome::Visitor(_)), "{o:?}");
}

fn touch(h: &mut H, v: u128) {
    h.run(Command::Touch {
        room: "r".into(),
        visitors: vec![vid(v)],
    });
}

/// Capacity 1, waiters lose their TTL after 30 s, and keep their place `grace` s longer.
fn room_with_grace(h: &mut H, grace: Option<u64>) {
    h.create(
        "r",
        RoomConfig {
            waiter_ttl_secs: 30,
            session_ttl_secs: 3_600,
            ..cfg(1, 6_000)
        },
    );
    let o = h.run(Command::SetEntryPolicy {
        room: "r".into(),
        policy: EntryPolicy {
            grace_secs: grace,
            ..EntryPolicy::default()
        }
        .encode(),
    });
    assert!(matches!(o, Outcome::Room(_)), "{o:?}");
}

#[test]
fn a_waiter_away_within_the_grace_period_is_passed_over_and_resumes_its_place() {
    let mut h = H::new();
    room_with_grace(&mut h, Some(60));
    for v in 1..=4 {
        h.join("r", v);
    }
    assert!(h.is_admitted("r", 1));
    assert_eq!(h.queue("r"), [2, 3, 4]);
    h.at(20_000);
    touch(&mut h, 3);
    touch(&mut h, 4);
    // 2 has not checked in for 30 s: away, but still in line and still first.
    h.at(31_000).tick();
    assert_eq!(h.queue("r"), [2, 3, 4]);
    assert_eq!(h.position("r", 2), Some(1));
    // A place frees: 2 is passed over, 3 goes in.
    leave(&mut h, 1);
    assert!(h.is_admitted("r", 3), "{:?}", h.state("r", 3));
    assert_eq!(h.position("r", 2), Some(1));
    // 2 comes back (a join resumes the place held) and is next.
    h.at(40_000);
    h.join("r", 2);
    assert_eq!(h.position("r", 2), Some(1));
    leave(&mut h, 3);
    assert!(h.is_admitted("r", 2), "{:?}", h.state("r", 2));
    assert_eq!(h.queue("r"), [4]);
    // 4 stays away past the TTL and the grace: its place is lost at 20 + 30 + 60 s.
    h.at(109_999).tick();
    assert_eq!(h.queue("r"), [4]);
    h.at(110_000).tick();
    assert_eq!(h.queue("r"), Vec::<u128>::new());
    assert!(matches!(
        h.state("r", 4),
        VisitorState::Ended {
            reason: EndReason::Abandoned,
            ..
        }
    ));
    // A replica restored from a snapshot agrees.
    let r = h.restored();
    assert_eq!(r.sm.digest(), h.sm.digest());
}

#[test]
fn without_a_grace_period_an_away_waiter_loses_its_place_at_the_ttl() {
    let mut h = H::new();
    room_with_grace(&mut h, None);
    for v in 1..=3 {
        h.join("r", v);
    }
    h.at(20_000);
    touch(&mut h, 3);
    h.at(30_000).tick();
    assert_eq!(h.queue("r"), [3]);
}

#[test]
fn only_away_waiters_leave_the_room_idle_until_one_returns_or_the_grace_ends() {
    let mut h = H::new();
    room_with_grace(&mut h, Some(60));
    for v in 1..=2 {
        h.join("r", v);
    }
    h.at(31_000);
    leave(&mut h, 1);
    assert_eq!(
        h.queue("r"),
        [2],
        "the only waiter is away: nobody admitted"
    );
    assert_eq!(h.room("r").active, 0);
    // The next tick the room asks for is the end of the grace, not a busy loop.
    assert_eq!(h.sm.next_due_ms(), Some(T0 + 90_000));
    h.at(35_000);
    touch(&mut h, 2);
    h.tick();
    assert!(h.is_admitted("r", 2), "{:?}", h.state("r", 2));
}

#[test]
fn grace_periods_are_bounded() {
    let mut h = H::new();
    room_with_grace(&mut h, None);
    for bad in [0, crate::policy::GRACE_SECS_MAX + 1] {
        let o = h.run(Command::SetEntryPolicy {
            room: "r".into(),
            policy: EntryPolicy {
                grace_secs: Some(bad),
                ..EntryPolicy::default()
            }
            .encode(),
        });
        assert_eq!(rejected(&o).code(), "invalid_field", "{bad}");
    }
}

#[test]
fn a_notice_reaches_every_waiter_survives_a_snapshot_and_can_be_taken_down() {
    let mut h = H::new();
    h.create("r", cfg(1, 60));
    h.join("r", 1);
    h.join("r", 2);
    h.at(5_000);
    let o = h.run(Command::SetNotice {
        room: "r".into(),
        text: Some("Doors open at 9.\nThank you for waiting.".into()),
    });
    let Outcome::Room(view) = o else {
        panic!("{o:?}")
    };
    assert_eq!(
        view.notice,
        Some(Notice {
            text: "Doors open at 9.\nThank you for waiting.".into(),
            set_at_ms: T0 + 5_000
        })
    );
    let VisitorState::Waiting { notice, .. } = h.state("r", 2) else {
        panic!("2 waits")
    };
    assert_eq!(
        notice.as_deref(),
        Some("Doors open at 9.\nThank you for waiting.")
    );
    let r = h.restored();
    assert_eq!(r.room("r").notice, h.room("r").notice);
    assert_eq!(r.sm.digest(), h.sm.digest());
    h.run(Command::SetNotice {
        room: "r".into(),
        text: None,
    });
    assert_eq!(h.room("r").notice, None);
    let VisitorState::Waiting { notice, .. } = h.state("r", 2) else {
        panic!("2 waits")
    };
    assert_eq!(notice, None);
}

#[test]
fn bad_notices_are_refused_and_change_nothing() {
    let mut h = H::new();
    h.create("r", cfg(1, 60));
    h.run(Command::SetNotice {
        room: "r".into(),
        text: Some("kept".into()),
    });
    for bad in [
        " \n ".to_string(),
        "x".repeat(NOTICE_LEN_MAX + 1),
        "bell\u{7}".to_string(),
    ] {
        let o = h.run(Command::SetNotice {
            room: "r".into(),
            text: Some(bad),
        });
        assert_eq!(rejected(&o).code(), "invalid_field");
        assert_eq!(h.room("r").notice.unwrap().text, "kept");
    }
    let o = h.run(Command::SetNotice {
        room: "nope".into(),
        text: None,
    });
    assert_eq!(rejected(&o).code(), "room_not_found");
}

#[test]
fn the_room_tells_the_estimate_its_newest_waiter_is_shown() {
    let mut h = H::new();
    // Room for all, admitted at 6 a minute: the line moves by the rate.
    h.create("r", cfg(100, 6));
    assert_eq!(h.room("r").newest_eta_secs, None, "nobody waits");
    for v in 1..=4 {
        h.join("r", v);
    }
    let VisitorState::Waiting { eta_secs, .. } = h.state("r", 4) else {
        panic!("4 waits")
    };
    assert!(eta_secs.is_some());
    assert_eq!(h.room("r").newest_eta_secs, eta_secs);
    h.run(Command::Pause { room: "r".into() });
    assert_eq!(
        h.room("r").newest_eta_secs,
        None,
        "paused: no honest estimate"
    );
}

#[test]
fn a_closed_rooms_onward_link_must_be_a_plain_url() {
    let mut h = H::new();
    h.create("r", cfg(1, 60));
    for (url, ok) in [
        ("https://shop.example/sold-out", true),
        ("/sold-out", true),
        ("//evil.example", false),
        ("javascript:alert(1)", false),
        ("/a b", false),
        ("/\"><script>", false),
    ] {
        let o = h.run(Command::SetEntryPolicy {
            room: "r".into(),
            policy: EntryPolicy {
                after_url: Some(url.into()),
                ..EntryPolicy::default()
            }
            .encode(),
        });
        assert_eq!(matches!(o, Outcome::Room(_)), ok, "{url}: {o:?}");
    }
}

/// A lottery passes over waiters held back by drawing again, not by taking the next waiter in
/// line: the waiter right behind five away ones wins one draw in five (as each of the five
/// present does), not six in ten. Deterministic: fixed seeds, 300 rooms.
#[test]
fn a_lottery_gives_waiters_behind_held_ones_no_better_chance() {
    let mut behind = 0;
    for trial in 0..300 {
        let mut h = H::new();
        h.sm.set_draw_key(crate::draw::DrawKey([3; 32]));
        let name = format!("r{trial}");
        h.create(
            &name,
            RoomConfig {
                mode: Mode::Lottery,
                waiter_ttl_secs: 30,
                session_ttl_secs: 3_600,
                ..cfg(1, 6_000)
            },
        );
        h.run(Command::SetEntryPolicy {
            room: name.clone(),
            policy: EntryPolicy {
                grace_secs: Some(600),
                ..EntryPolicy::default()
            }
            .encode(),
        });
        h.join(&name, 100);
        for v in 1..=10 {
            h.join(&name, v);
        }
        h.at(20_000).run(Command::Touch {
            room: name.clone(),
            visitors: (6..=10).map(vid).collect(),
        });
        h.at(31_000).run(Command::Leave {
            room: name.clone(),
            visitor: vid(100),
        });
        let won: Vec<u128> = (1..=10).filter(|&v| h.is_admitted(&name, v)).collect();
        assert_eq!(won.len(), 1, "{won:?}");
        assert!(won[0] >= 6, "an away waiter was admitted: {won:?}");
        behind += u32::from(won[0] == 6);
    }
    // One in five is 60 of 300; the walk to the next waiter gave 180.
    assert!((35..=90).contains(&behind), "{behind} of 300");
}

/// More away waiters at the head of the line than one command may look at (a bot's places left
/// to wait out their grace): admission looks on from where the last command stopped, asks for
/// the ticks to do so, and reaches the first waiter present, instead of stopping the line for
/// the whole grace period. The away waiters keep their places; one that comes back is next.
#[test]
fn a_block_of_away_waiters_longer_than_one_look_does_not_stop_the_line() {
    let mut h = H::new();
    room_with_grace(&mut h, Some(3_600));
    h.join("r", 1);
    assert!(h.is_admitted("r", 1));
    let block = HELD_SKIPS_PER_APPLY_MAX as u128 * 2 + 100;
    h.join_many("r", 10, 10 + block - 1);
    let (present, late) = (1_000_000, 1_000_001);
    h.join("r", present);
    h.join("r", late);
    h.at(20_000);
    touch(&mut h, present);
    touch(&mut h, late);
    h.at(31_000);
    leave(&mut h, 1);
    let mut ticks = 0;
    while !h.is_admitted("r", present) {
        assert!(
            h.sm.next_due_ms().is_some_and(|t| t <= T0 + 31_000),
            "a tick is asked for while admission looks on"
        );
        h.tick();
        ticks += 1;
        assert!(ticks <= 3, "admission does not move on");
    }
    assert_eq!(
        h.position("r", 10),
        Some(1),
        "the away waiters keep their places"
    );
    let restored = h.restored();
    assert_eq!(restored.sm.digest(), h.sm.digest());
    // One of the block comes back: it goes in before the later waiter.
    touch(&mut h, 500);
    leave(&mut h, present);
    assert!(h.is_admitted("r", 500), "{:?}", h.state("r", 500));
    assert!(!h.is_admitted("r", late));
}
