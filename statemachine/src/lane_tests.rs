//! Priority lanes, access codes and invite-only rooms.

use super::*;
use crate::codes::{CodeBatch, CodeHash, NewCode};
use crate::lanes::Lane;

const HOUR: u64 = 3_600_000;

fn code(n: u8) -> CodeHash {
    CodeHash([n; 16])
}

fn lane(name: &str, opens_at_ms: Option<u64>) -> Lane {
    Lane {
        name: name.into(),
        opens_at_ms,
        share_permille: None,
        lottery: false,
    }
}

/// A room that admits nobody.
fn held() -> RoomConfig {
    RoomConfig {
        paused: true,
        ..cfg(100, 60)
    }
}

fn set_policy(h: &mut H, p: EntryPolicy) -> Outcome {
    h.run(Command::SetEntryPolicy {
        room: "r".into(),
        policy: p.encode(),
    })
}

fn with_lanes(h: &mut H, lanes: Vec<Lane>) {
    let o = set_policy(
        h,
        EntryPolicy {
            lanes,
            ..EntryPolicy::default()
        },
    );
    assert!(matches!(o, Outcome::Room(_)), "{o:?}");
}

/// A batch of codes `first..=last` for `lane`, each with `uses`.
fn codes(h: &mut H, lane: Option<&str>, first: u8, last: u8, uses: u32, expires_ms: Option<u64>) {
    let o = h.run(Command::CreateCodes {
        room: "r".into(),
        batch: CodeBatch {
            label: "test".into(),
            lane: lane.map(str::to_string),
            uses,
            expires_ms,
        },
        codes: (first..=last)
            .map(|n| NewCode {
                hash: code(n),
                identity: None,
            })
            .collect(),
    });
    assert!(matches!(o, Outcome::Codes(_)), "{o:?}");
}

fn join_with(h: &mut H, v: u128, evidence: JoinEvidence) -> Outcome {
    h.run(Command::JoinWith {
        room: "r".into(),
        visitor: vid(v),
        evidence: evidence.encode(),
    })
}

fn redeem(h: &mut H, v: u128, c: u8) -> Outcome {
    join_with(
        h,
        v,
        JoinEvidence {
            code: Some(code(c)),
            ..JoinEvidence::default()
        },
    )
}

fn lane_of(h: &H, v: u128) -> Option<String> {
    match h.state("r", v) {
        VisitorState::Waiting { lane, .. } => lane,
        s => panic!("not waiting: {s:?}"),
    }
}

/// Admits one at a time and returns the order.
fn admission_order(h: &mut H, n: usize) -> Vec<u128> {
    let mut order = Vec::new();
    let admitted = |h: &H| -> Vec<u128> {
        (1..=200u128)
            .filter(|&v| h.sm.visitor("r", vid(v)).is_ok() && h.is_admitted("r", v))
            .collect()
    };
    let mut before = admitted(h);
    for _ in 0..n {
        h.run(Command::ForceAdmit {
            room: "r".into(),
            count: 1,
        });
        let now = admitted(h);
        let new: Vec<u128> = now
            .iter()
            .filter(|v| !before.contains(v))
            .copied()
            .collect();
        assert_eq!(new.len(), 1, "one admission at a time");
        order.push(new[0]);
        before = now;
    }
    order
}

#[test]
fn a_presale_lane_opens_an_hour_before_the_public_line_and_goes_first() {
    let mut h = H::new();
    h.create(
        "r",
        RoomConfig {
            opens_at_ms: Some(T0 + HOUR),
            waiter_ttl_secs: 7_200,
            session_ttl_secs: 7_200,
            ..cfg(100, 600)
        },
    );
    with_lanes(&mut h, vec![lane("presale", Some(T0 + 60_000))]);
    codes(&mut h, Some("presale"), 1, 3, 1, None);
    // The public line fills first.
    for v in 1..=5 {
        h.join("r", v);
    }
    for (v, c) in [(11, 1), (12, 2), (13, 3)] {
        assert!(matches!(redeem(&mut h, v, c), Outcome::Visitor(_)));
        assert_eq!(lane_of(&h, v).as_deref(), Some("presale"));
    }
    assert_eq!(
        h.position("r", 12),
        Some(2),
        "positions count within the lane"
    );
    match h.state("r", 1) {
        VisitorState::Waiting {
            position, ahead, ..
        } => {
            assert_eq!(position, Some(1));
            assert_eq!(ahead, Some(3), "the presale waiters go first");
        }
        s => panic!("{s:?}"),
    }
    // Nobody before the presale opens.
    h.at(59_999).tick();
    assert_eq!(h.room("r").active, 0);
    assert_eq!(
        h.sm.next_due_ms(),
        Some(T0 + 60_000),
        "a tick is due at the lane's opening"
    );
    h.at(60_000).tick();
    for v in 11..=13 {
        assert!(h.is_admitted("r", v), "presale holder {v}");
    }
    for v in 1..=5 {
        assert!(
            !h.is_admitted("r", v),
            "public {v} before the public opening"
        );
    }
    let view = h.room("r");
    assert_eq!(view.lanes.len(), 1);
    assert_eq!(
        (
            view.lanes[0].open,
            view.lanes[0].admitted,
            view.lanes[0].redeemed
        ),
        (true, 3, 3)
    );
    assert!(!view.open);
    h.at(HOUR).tick();
    for v in 1..=5 {
        assert!(h.is_admitted("r", v), "public {v} after the opening");
    }
}

#[test]
fn lanes_go_in_priority_order_first_come_first_served_within_each() {
    let mut h = H::new();
    h.create("r", cfg(1_000, 6_000));
    h.run(Command::Pause { room: "r".into() });
    with_lanes(&mut h, vec![lane("presale", None), lane("members", None)]);
    codes(&mut h, Some("members"), 1, 3, 1, None);
    codes(&mut h, Some("presale"), 11, 12, 1, None);
    h.join("r", 1);
    redeem(&mut h, 21, 1);
    h.join("r", 2);
    redeem(&mut h, 31, 11);
    redeem(&mut h, 22, 2);
    redeem(&mut h, 32, 12);
    redeem(&mut h, 23, 3);
    assert_eq!(
        admission_order(&mut h, 7),
        vec![31, 32, 21, 22, 23, 1, 2],
        "presale, then members, then the public line"
    );
}

#[test]
fn shares_split_admissions_between_lanes_with_waiters() {
    let mut h = H::new();
    h.create("r", cfg(1_000, 6_000));
    h.run(Command::Pause { room: "r".into() });
    with_lanes(
        &mut h,
        vec![Lane {
            share_permille: Some(750),
            ..lane("members", None)
        }],
    );
    codes(&mut h, Some("members"), 1, 9, 1, None);
    for v in 1..=9u8 {
        h.join("r", 100 + u128::from(v));
        redeem(&mut h, u128::from(v), v);
    }
    let order = admission_order(&mut h, 14);
    assert_eq!(
        order[..12].iter().filter(|&&v| v < 100).count(),
        9,
        "three of four turns go to the members: {order:?}"
    );
    assert_eq!(
        order[..4].iter().filter(|&&v| v > 100).count(),
        1,
        "{order:?}"
    );
    // Members run out: the public line takes every turn.
    assert!(order[12..].iter().all(|&v| v > 100), "{order:?}");
    // The estimates count the shares: before the room opens, in an hour, the members' ninth
    // waits for 12 admissions (three of four are theirs), the public line's ninth for all 18;
    // at one a second, with one token in the bucket.
    let mut h = H::new();
    h.create(
        "r",
        RoomConfig {
            opens_at_ms: Some(T0 + HOUR),
            ..cfg(1_000, 60)
        },
    );
    with_lanes(
        &mut h,
        vec![Lane {
            share_permille: Some(750),
            ..lane("members", None)
        }],
    );
    codes(&mut h, Some("members"), 1, 9, 1, None);
    for v in 1..=9u8 {
        h.join("r", 100 + u128::from(v));
        redeem(&mut h, u128::from(v), v);
    }
    let eta = |h: &H, v| match h.state("r", v) {
        VisitorState::Waiting { eta_secs, .. } => eta_secs.unwrap(),
        s => panic!("{s:?}"),
    };
    assert_eq!(eta(&h, 9), 3_600 + 11);
    assert_eq!(eta(&h, 109), 3_600 + 17);
    // And so does "ahead of you" (the other lines' waiters let in before one's turn): the
    // public line's first waits for three members (one turn in four is its), not all nine; its
    // ninth for all nine.
    let ahead = |h: &H, v| match h.state("r", v) {
        VisitorState::Waiting {
            position, ahead, ..
        } => (position, ahead),
        s => panic!("{s:?}"),
    };
    assert_eq!(ahead(&h, 101), (Some(1), Some(3)));
    assert_eq!(ahead(&h, 109), (Some(9), Some(9)));
    assert_eq!(ahead(&h, 1), (Some(1), Some(1)));
}

#[test]
fn codes_are_single_or_multi_use_idempotent_per_visitor_and_refused_clearly() {
    let mut h = H::new();
    h.create("r", held());
    with_lanes(&mut h, vec![lane("presale", None)]);
    codes(&mut h, Some("presale"), 1, 1, 1, None);
    codes(&mut h, Some("presale"), 2, 2, 3, None);
    codes(&mut h, Some("presale"), 3, 3, 1, Some(T0 + 1_000));
    // One visitor, two tabs: the same code twice takes one use and keeps one place.
    let first = redeem(&mut h, 1, 1);
    let again = redeem(&mut h, 1, 1);
    assert_eq!(first, again);
    assert_eq!(h.room("r").waiting, 1);
    assert_eq!(rejected(&redeem(&mut h, 2, 1)).code(), "code_used_up");
    // A three-use code: three visitors, then no more.
    for v in 3..=5 {
        assert!(matches!(redeem(&mut h, v, 2), Outcome::Visitor(_)));
    }
    assert_eq!(rejected(&redeem(&mut h, 6, 2)).code(), "code_used_up");
    assert_eq!(rejected(&redeem(&mut h, 7, 99)).code(), "code_invalid");
    h.at(1_000);
    assert_eq!(rejected(&redeem(&mut h, 8, 3)).code(), "code_expired");
    let batches = h.sm.code_batches("r").unwrap();
    assert_eq!(
        batches
            .iter()
            .map(|b| (b.codes, b.used, b.used_up))
            .collect::<Vec<_>>(),
        vec![(1, 1, 1), (1, 3, 1), (1, 0, 0)]
    );
    // A refused redemption changed nothing.
    assert_eq!(h.sm.visitor("r", vid(6)), Err(Rejection::UnknownVisitor));
    // The place ends, and so does the redemption: the spent code gives no second place.
    h.run(Command::Leave {
        room: "r".into(),
        visitor: vid(1),
    });
    assert_eq!(rejected(&redeem(&mut h, 1, 1)).code(), "code_used_up");
    assert!(h.sm.code_usable("r", &code(1), Some(vid(1))).is_err());
    assert!(
        h.sm.code_usable("r", &code(2), Some(vid(3))).is_ok(),
        "its own"
    );
    // An ended batch stops working; the places it gave stay.
    let ended = h.run(Command::EndCodes {
        room: "r".into(),
        batch: 1,
    });
    assert_eq!(ended, Outcome::Count(1));
    assert_eq!(rejected(&redeem(&mut h, 9, 2)).code(), "code_invalid");
    assert_eq!(lane_of(&h, 3).as_deref(), Some("presale"));
    let r = h.restored();
    assert_eq!(r.sm.digest(), h.sm.digest());
}

#[test]
fn a_code_bound_to_an_identity_works_for_that_identity_alone() {
    let mut h = H::new();
    h.create("r", held());
    let alice = IdentityKey([1; 16]);
    h.run(Command::CreateCodes {
        room: "r".into(),
        batch: CodeBatch {
            label: "named".into(),
            lane: None,
            uses: 1,
            expires_ms: None,
        },
        codes: vec![NewCode {
            hash: code(1),
            identity: Some(alice),
        }],
    });
    let as_who = |who: Option<IdentityKey>| JoinEvidence {
        code: Some(code(1)),
        identity: who,
        ..JoinEvidence::default()
    };
    assert_eq!(
        rejected(&join_with(&mut h, 1, as_who(None))).code(),
        "code_invalid"
    );
    assert_eq!(
        rejected(&join_with(&mut h, 1, as_who(Some(IdentityKey([2; 16]))))).code(),
        "code_invalid"
    );
    assert!(matches!(
        join_with(&mut h, 1, as_who(Some(alice))),
        Outcome::Visitor(_)
    ));
}

#[test]
fn invite_only_rooms_give_places_only_to_code_holders() {
    let mut h = H::new();
    h.create("r", held());
    let o = set_policy(
        &mut h,
        EntryPolicy {
            invite_only: true,
            lanes: vec![lane("members", None)],
            ..EntryPolicy::default()
        },
    );
    assert!(matches!(o, Outcome::Room(_)));
    codes(&mut h, None, 1, 1, 1, None);
    assert_eq!(rejected(&h.join("r", 1)).code(), "invite_only");
    assert!(h.sm.visitor("r", vid(1)).is_err(), "no place was taken");
    assert!(matches!(redeem(&mut h, 1, 1), Outcome::Visitor(_)));
    assert_eq!(
        lane_of(&h, 1),
        None,
        "a code without a lane: the room's own line"
    );
    // An identity whose assertion names a lane is invited too; a claim without a verified
    // identity, or of a lane the room does not have, is not.
    let claim = |identity: Option<u8>, lane: &str| JoinEvidence {
        identity: identity.map(|i| IdentityKey([i; 16])),
        lane: Some(lane.into()),
        ..JoinEvidence::default()
    };
    assert_eq!(
        rejected(&join_with(&mut h, 2, claim(None, "members"))).code(),
        "invite_only"
    );
    assert_eq!(
        rejected(&join_with(&mut h, 2, claim(Some(2), "nope"))).code(),
        "invite_only"
    );
    assert!(matches!(
        join_with(&mut h, 2, claim(Some(2), "members")),
        Outcome::Visitor(_)
    ));
    assert_eq!(lane_of(&h, 2).as_deref(), Some("members"));
}

#[test]
fn a_waiter_who_redeems_a_code_moves_to_the_end_of_its_lane() {
    let mut h = H::new();
    h.create("r", held());
    with_lanes(&mut h, vec![lane("presale", None)]);
    codes(&mut h, Some("presale"), 1, 2, 1, None);
    for v in 1..=3 {
        h.join("r", v);
    }
    redeem(&mut h, 9, 1);
    assert_eq!(h.position("r", 3), Some(3));
    assert!(matches!(redeem(&mut h, 3, 2), Outcome::Visitor(_)));
    assert_eq!(lane_of(&h, 3).as_deref(), Some("presale"));
    assert_eq!(
        h.position("r", 3),
        Some(2),
        "after the earlier presale holder"
    );
    assert_eq!(h.room("r").waiting, 4);
    assert_eq!(h.room("r").totals.joined, 4, "a move is not a new place");
    // A second code takes no use: one code per place.
    codes(&mut h, Some("presale"), 5, 5, 1, None);
    redeem(&mut h, 3, 5);
    assert_eq!(h.sm.code_batches("r").unwrap()[1].used, 0);
    let r = h.restored();
    assert_eq!(r.sm.digest(), h.sm.digest());
    assert_eq!(r.position("r", 3), Some(2));
}

#[test]
fn lanes_change_by_name_and_a_lane_with_waiters_cannot_go() {
    let mut h = H::new();
    h.create("r", cfg(100, 6_000));
    h.run(Command::Pause { room: "r".into() });
    with_lanes(&mut h, vec![lane("a", None), lane("b", None)]);
    codes(&mut h, Some("a"), 1, 2, 1, None);
    codes(&mut h, Some("b"), 11, 12, 1, None);
    redeem(&mut h, 1, 1);
    redeem(&mut h, 11, 11);
    redeem(&mut h, 2, 2);
    redeem(&mut h, 12, 12);
    h.join("r", 50);
    let o = set_policy(
        &mut h,
        EntryPolicy {
            lanes: vec![lane("b", None)],
            ..EntryPolicy::default()
        },
    );
    assert_eq!(rejected(&o).code(), "invalid_field");
    assert_eq!(h.room("r").lanes.len(), 2, "nothing changed");
    // Reordered: b first now, each lane keeps its waiters in order.
    with_lanes(
        &mut h,
        vec![lane("b", None), lane("c", None), lane("a", None)],
    );
    assert_eq!(lane_of(&h, 11).as_deref(), Some("b"));
    assert_eq!(h.position("r", 2), Some(2));
    let restored = h.restored();
    assert_eq!(restored.sm.digest(), h.sm.digest());
    assert_eq!(admission_order(&mut h, 5), vec![11, 12, 1, 2, 50]);
    let mut restored = restored;
    assert_eq!(admission_order(&mut restored, 5), vec![11, 12, 1, 2, 50]);
    // Expiry reaches waiters in every lane.
    let mut h = H::new();
    h.create(
        "r",
        RoomConfig {
            waiter_ttl_secs: 10,
            ..held()
        },
    );
    with_lanes(&mut h, vec![lane("a", None)]);
    codes(&mut h, Some("a"), 1, 1, 1, None);
    redeem(&mut h, 1, 1);
    h.at(10_000).tick();
    assert!(matches!(
        h.state("r", 1),
        VisitorState::Ended {
            reason: EndReason::Abandoned,
            ..
        }
    ));
    assert!(h.sm.code_batches("r").unwrap()[0].used == 1);
}

#[test]
fn code_batches_are_bounded_and_checked() {
    let mut h = H::new();
    h.create("r", held());
    let batch = CodeBatch {
        label: "x".into(),
        lane: None,
        uses: 1,
        expires_ms: None,
    };
    let too_many = h.run(Command::CreateCodes {
        room: "r".into(),
        batch: batch.clone(),
        codes: (0..=crate::codes::CODES_PER_COMMAND_MAX as u32)
            .map(|i| {
                let mut c = [0; 16];
                c[..4].copy_from_slice(&i.to_be_bytes());
                NewCode {
                    hash: CodeHash(c),
                    identity: None,
                }
            })
            .collect(),
    });
    assert_eq!(rejected(&too_many).code(), "invalid_field");
    for bad in [
        CodeBatch {
            uses: 0,
            ..batch.clone()
        },
        CodeBatch {
            label: "\n".into(),
            ..batch.clone()
        },
        CodeBatch {
            lane: Some("Not a name".into()),
            ..batch.clone()
        },
    ] {
        let o = h.run(Command::CreateCodes {
            room: "r".into(),
            batch: bad,
            codes: vec![],
        });
        assert_eq!(rejected(&o).code(), "invalid_field");
    }
    codes(&mut h, None, 1, 1, 1, None);
    // The same code twice is refused.
    let o = h.run(Command::AddCodes {
        room: "r".into(),
        batch: 0,
        codes: vec![NewCode {
            hash: code(1),
            identity: None,
        }],
    });
    assert_eq!(rejected(&o).code(), "invalid_field");
    let o = h.run(Command::AddCodes {
        room: "r".into(),
        batch: 7,
        codes: vec![],
    });
    assert_eq!(rejected(&o).code(), "code_batch_not_found");
    for _ in 1..crate::codes::CODE_BATCHES_PER_ROOM_MAX {
        h.run(Command::CreateCodes {
            room: "r".into(),
            batch: batch.clone(),
            codes: vec![],
        });
    }
    let o = h.run(Command::CreateCodes {
        room: "r".into(),
        batch,
        codes: vec![],
    });
    assert_eq!(rejected(&o).code(), "limit_reached");
}
