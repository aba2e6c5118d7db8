//! The admission ledger, commit–reveal draws and operator attribution.

use super::*;
use crate::draw::{commitment, DrawKey};
use crate::ledger::{Chain, Event, Record, Rule};

fn kept() -> H {
    let mut h = H::new();
    h.sm.set_draw_key(DrawKey([7; 32]));
    h.sm.keep_ledger(true);
    h
}

fn events(records: &[Record]) -> Vec<&Event> {
    records.iter().map(|r| &r.event).collect()
}

fn as_operator(name: &str, command: Command) -> Command {
    Command::AsOperator {
        operator: name.into(),
        command: Box::new(command),
    }
}

#[test]
fn joins_admissions_and_ends_are_recorded_with_their_log_position() {
    let mut h = kept();
    h.create("r", cfg(1, 60));
    h.sm.take_ledger();
    h.at(1_000).join("r", 1);
    h.at(1_000).join("r", 2);
    let r = h.sm.take_ledger();
    let joined_1 = Event::Joined {
        visitor: vid(1),
        seq: 1,
        lane: None,
        position: 1,
    };
    let admitted_1 = Event::Admitted {
        visitor: vid(1),
        seq: 1,
        lane: None,
        rule: Rule::Head,
    };
    let joined_2 = Event::Joined {
        visitor: vid(2),
        seq: 2,
        lane: None,
        position: 1,
    };
    assert_eq!(
        events(&r),
        [&joined_1, &admitted_1, &Event::CapacityReached, &joined_2]
    );
    assert_eq!((r[0].index, r[0].sub, r[0].n), (2, 0, 0));
    assert_eq!((r[1].n, r[3].index, r[3].n), (1, 3, 0));
    assert!(r.iter().all(|x| x.room == "r" && x.by.is_none()));
    assert_eq!(r[0].time_ms, T0 + 1_000);
    // Visitor 1 leaves; 2 takes the place at once (the bucket holds a token): the room never
    // stopped being full, and its line is empty.
    h.at(2_000).run(Command::Leave {
        room: "r".into(),
        visitor: vid(1),
    });
    let r = h.sm.take_ledger();
    assert_eq!(
        events(&r),
        [
            &Event::Ended {
                visitor: vid(1),
                seq: 1,
                reason: EndReason::Left,
                admitted: true,
            },
            &Event::Admitted {
                visitor: vid(2),
                seq: 2,
                lane: None,
                rule: Rule::Head,
            },
            &Event::Drained,
        ]
    );
}

#[test]
fn the_chain_covers_every_record_and_is_in_the_digest() {
    let mut h = kept();
    h.create("r", cfg(2, 60));
    for v in 1..=5 {
        h.join("r", v);
    }
    let all = h.sm.take_ledger();
    assert_eq!(h.sm.ledger_chain(), Chain::default().after(&all));
    assert_eq!(h.sm.ledger_chain().count, all.len() as u64);
    // A machine that made one record less (the same state otherwise) has another digest.
    let mut other = h.restored();
    other.sm.ledger = Chain::default().after(&all[..all.len() - 1]);
    assert_ne!(other.sm.digest(), h.sm.digest());
    // Restored, the chain carries on as if never interrupted.
    let mut restored = h.restored();
    restored.sm.keep_ledger(true);
    h.join("r", 9);
    restored.join("r", 9);
    assert_eq!(restored.sm.take_ledger(), h.sm.take_ledger());
    assert_eq!(restored.sm.digest(), h.sm.digest());
}

#[test]
fn operator_commands_name_the_operator_and_go_to_the_audit_log() {
    let mut h = kept();
    h.create("r", cfg(1, 60));
    h.join("r", 1);
    h.join("r", 2);
    h.sm.take_ledger();
    let o = h.run(as_operator(
        "alice",
        Command::Revoke {
            room: "r".into(),
            visitor: vid(1),
        },
    ));
    assert!(matches!(o, Outcome::Visitor(_)), "{o:?}");
    let r = h.sm.take_ledger();
    assert!(r.iter().all(|x| x.by.as_deref() == Some("alice")), "{r:?}");
    assert_eq!(
        r[0].event,
        Event::Ended {
            visitor: vid(1),
            seq: 1,
            reason: EndReason::Revoked,
            admitted: true,
        }
    );
    // Bucket empty: nobody else goes in until the operator forces it.
    assert_eq!(
        r.last().unwrap().event,
        Event::Command {
            name: "revoke".into(),
            detail: vid(1).to_string(),
            outcome: "ok".into(),
        }
    );
    h.run(as_operator(
        "bob",
        Command::ForceAdmit {
            room: "r".into(),
            count: 1,
        },
    ));
    let r = h.sm.take_ledger();
    assert_eq!(
        r[0].event,
        Event::Admitted {
            visitor: vid(2),
            seq: 2,
            lane: None,
            rule: Rule::Forced,
        }
    );
    assert_eq!(r[0].by.as_deref(), Some("bob"));
    // A refused command is in the audit log too, with its rejection.
    let o = h.run(as_operator(
        "bob",
        Command::Pause {
            room: "nope".into(),
        },
    ));
    assert_eq!(rejected(&o).code(), "room_not_found");
    let r = h.sm.take_ledger();
    assert_eq!(r.len(), 1);
    assert_eq!(
        (r[0].room.as_str(), &r[0].event),
        (
            "nope",
            &Event::Command {
                name: "pause".into(),
                detail: String::new(),
                outcome: "room_not_found".into(),
            }
        )
    );
    // Names are checked, and operators' commands do not nest.
    let o = h.run(as_operator("", Command::Tick));
    assert_eq!(rejected(&o).code(), "invalid_field");
    let o = h.run(as_operator("a", as_operator("b", Command::Tick)));
    assert_eq!(rejected(&o).code(), "invalid_field");
    assert!(h.sm.take_ledger().is_empty());
}

#[test]
fn pauses_health_and_notices_are_recorded() {
    let mut h = kept();
    h.create("r", cfg(5, 60));
    h.sm.take_ledger();
    h.run(Command::Pause { room: "r".into() });
    h.run(Command::Resume { room: "r".into() });
    h.run(Command::SetHealth {
        room: "r".into(),
        health: Health::Down,
        slow_factor_permille: None,
    });
    h.run(Command::SetNotice {
        room: "r".into(),
        text: Some("Back soon".into()),
    });
    let r = h.sm.take_ledger();
    assert_eq!(
        events(&r),
        [
            &Event::Paused { by_origin: false },
            &Event::Resumed,
            &Event::Health {
                health: Health::Down
            },
            &Event::Notice {
                text: Some("Back soon".into())
            },
        ]
    );
}

/// A lottery room with one admission a second and ten waiters.
fn lottery(h: &mut H) {
    h.create(
        "lot",
        RoomConfig {
            mode: Mode::Lottery,
            admit_burst: 1,
            ..cfg(100, 60)
        },
    );
    h.join("lot", 100); // takes the first token
    for v in 1..=10 {
        h.join("lot", v);
    }
}

#[test]
fn a_room_commits_to_its_draw_secret_before_anyone_joins() {
    let mut h = kept();
    let view = h.create(
        "lot",
        RoomConfig {
            mode: Mode::Lottery,
            ..cfg(100, 60)
        },
    );
    let draw = view.draw.expect("a committed secret");
    let r = h.sm.take_ledger();
    assert_eq!(
        r[0].event,
        Event::DrawCommitted {
            commitment: draw.commitment
        }
    );
    assert_eq!(draw.since_index, r[0].index);
    // The secret is in no snapshot: it derives from the nodes' key.
    let secret =
        h.sm.draw_key()
            .secret("lot", h.sm.rooms["lot"].draws.epoch.unwrap().start);
    assert_eq!(commitment(&secret), draw.commitment);
    let snap = h.sm.snapshot();
    assert!(!snap.windows(32).any(|w| w == secret));
    // Another key commits to another secret (a replica with the wrong key diverges at once).
    let mut other = H::new();
    other.sm.set_draw_key(DrawKey([8; 32]));
    let v = other.create(
        "lot",
        RoomConfig {
            mode: Mode::Lottery,
            ..cfg(100, 60)
        },
    );
    assert_ne!(v.draw.unwrap().commitment, draw.commitment);
}

#[test]
fn every_lottery_admission_is_verifiable_once_the_secret_is_revealed() {
    let mut h = kept();
    lottery(&mut h);
    for s in 1..=10 {
        h.at(s * 1000).tick();
    }
    let mut draws: Vec<Record> = h.sm.take_ledger();
    let committed = draws
        .iter()
        .find_map(|r| match r.event {
            Event::DrawCommitted { commitment } => Some(commitment),
            _ => None,
        })
        .unwrap();
    assert!(
        !draws
            .iter()
            .any(|r| matches!(r.event, Event::DrawRevealed { .. })),
        "revealed while the lottery goes on"
    );
    // The operator turns the lottery into a FIFO line: the secret is revealed, a new one begins.
    h.run(as_operator(
        "alice",
        Command::SetMode {
            room: "lot".into(),
            mode: Mode::Fifo,
        },
    ));
    let after = h.sm.take_ledger();
    let secret = after
        .iter()
        .find_map(|r| match r.event {
            Event::DrawRevealed {
                commitment: c,
                secret,
            } if c == committed => Some(secret),
            _ => None,
        })
        .expect("the used secret is revealed");
    assert_eq!(commitment(&secret), committed);
    let next = after
        .iter()
        .find_map(|r| match r.event {
            Event::DrawCommitted { commitment } => Some(commitment),
            _ => None,
        })
        .expect("a new secret is committed");
    assert_eq!(h.room("lot").draw.unwrap().commitment, next);
    // With the revealed secret anyone re-derives each draw: seed, then the rank drawn.
    draws.retain(|r| matches!(r.event, Event::Admitted { .. }));
    let mut lottery_draws = 0;
    for r in &draws {
        let Event::Admitted {
            rule:
                Rule::Lottery {
                    seed,
                    candidates,
                    rank,
                },
            ..
        } = r.event
        else {
            continue;
        };
        let pos = DrawPosition {
            term: 1,
            index: r.index,
            sub: r.sub as u64,
        };
        let mut d = Draw::new_v2(&secret, pos, "lot");
        assert_eq!(d.seed(), seed);
        assert_eq!(d.below(candidates), rank);
        lottery_draws += 1;
    }
    assert_eq!(lottery_draws, 11, "ten waiters and the first, drawn alone");
}

#[test]
fn a_closed_lottery_with_an_empty_line_reveals_its_secret() {
    let mut h = kept();
    h.create(
        "lot",
        RoomConfig {
            mode: Mode::Lottery,
            closes_at_ms: Some(T0 + 5_000),
            ..cfg(100, 6_000)
        },
    );
    h.join("lot", 1);
    h.join("lot", 2);
    h.at(6_000).tick();
    let r = h.sm.take_ledger();
    assert!(
        r.iter()
            .any(|x| matches!(x.event, Event::DrawRevealed { .. })),
        "{r:?}"
    );
    // A FIFO room's secret, never used, is never revealed.
    let mut h = kept();
    h.create("fifo", cfg(1, 60));
    h.join("fifo", 1);
    h.run(Command::DeleteRoom {
        room: "fifo".into(),
    });
    let r = h.sm.take_ledger();
    assert!(!r
        .iter()
        .any(|x| matches!(x.event, Event::DrawRevealed { .. })));
    assert!(matches!(
        r.last().unwrap().event,
        Event::Deleted {
            waiting: 0,
            active: 1
        }
    ));
}

/// A room made before draw secrets, turned into a lottery that draws at once: the command that
/// commits the room's first secret draws by `sluice-draw-v1` (the room's draw when it began), so
/// the new secret is not used by it, not revealed by it, and not begun again at the same position
/// (which would make the secret in force the one just published).
#[test]
fn a_room_reconfigured_to_commit_reveal_never_draws_from_a_revealed_secret() {
    let mut h = kept();
    h.create(
        "r",
        RoomConfig {
            admit_burst: 1,
            ..cfg(100, 60)
        },
    );
    h.sm.rooms.get_mut("r").unwrap().draws = Default::default();
    h.join("r", 100); // takes the first token
    for v in 1..=10 {
        h.join("r", v);
    }
    h.sm.take_ledger();
    h.at(5_000).run(Command::UpdateRoom {
        room: "r".into(),
        config: RoomConfig {
            mode: Mode::Lottery,
            admit_burst: 1,
            ..cfg(100, 60)
        },
    });
    let r = h.sm.take_ledger();
    let drawn: Vec<&Record> = r
        .iter()
        .filter(|x| {
            matches!(
                x.event,
                Event::Admitted {
                    rule: Rule::Lottery { .. },
                    ..
                }
            )
        })
        .collect();
    assert!(!drawn.is_empty(), "the update draws: {r:?}");
    for x in &drawn {
        let Event::Admitted {
            rule: Rule::Lottery { seed, .. },
            ..
        } = x.event
        else {
            unreachable!()
        };
        let pos = DrawPosition {
            term: 1,
            index: x.index,
            sub: x.sub as u64,
        };
        assert_eq!(seed, Draw::new(pos, "r").seed(), "drawn by sluice-draw-v1");
    }
    let now = h.room("r").draw.expect("a committed secret").commitment;
    let revealed: Vec<[u8; 32]> = r
        .iter()
        .filter_map(|x| match x.event {
            Event::DrawRevealed { secret, .. } => Some(secret),
            _ => None,
        })
        .collect();
    assert!(
        revealed.iter().all(|s| commitment(s) != now),
        "the secret in force was published: {r:?}"
    );
    assert_eq!(
        r.iter()
            .filter(|x| matches!(x.event, Event::DrawCommitted { .. }))
            .count(),
        1,
        "one commitment: {r:?}"
    );
    // The next draws use the committed secret, revealed only when the lottery ends.
    h.at(10_000).tick();
    let r = h.sm.take_ledger();
    assert!(r.iter().any(|x| matches!(
        x.event,
        Event::Admitted {
            rule: Rule::Lottery { .. },
            ..
        }
    )));
    assert!(!r
        .iter()
        .any(|x| matches!(x.event, Event::DrawRevealed { .. })));
    assert_eq!(h.room("r").draw.unwrap().commitment, now);
}

/// A waiter away within its grace period is passed over: the one admitted instead is recorded
/// as passed to (how many were passed), not as "first in line".
#[test]
fn an_admission_past_a_waiter_held_back_says_so() {
    let mut h = kept();
    h.create(
        "r",
        RoomConfig {
            waiter_ttl_secs: 30,
            session_ttl_secs: 3_600,
            ..cfg(1, 6_000)
        },
    );
    h.run(Command::SetEntryPolicy {
        room: "r".into(),
        policy: crate::policy::EntryPolicy {
            grace_secs: Some(60),
            ..Default::default()
        }
        .encode(),
    });
    for v in 1..=4 {
        h.join("r", v);
    }
    h.at(20_000);
    for v in [3, 4] {
        h.run(Command::Touch {
            room: "r".into(),
            visitors: vec![vid(v)],
        });
    }
    h.at(31_000).tick();
    h.sm.take_ledger();
    h.run(Command::Leave {
        room: "r".into(),
        visitor: vid(1),
    });
    let r = h.sm.take_ledger();
    let rule = r
        .iter()
        .find_map(|x| match &x.event {
            Event::Admitted { visitor, rule, .. } if *visitor == vid(3) => Some(rule.clone()),
            _ => None,
        })
        .expect("3 admitted");
    assert_eq!(
        rule,
        Rule::PassedOver {
            chosen: Box::new(Rule::Head),
            passed: 1
        }
    );
    assert_eq!(
        (rule.as_str(), rule.passed(), rule.draw()),
        ("head", 1, None)
    );
    // Back in time, 2 is first again and goes in by the plain rule.
    h.at(40_000).join("r", 2);
    h.run(Command::Leave {
        room: "r".into(),
        visitor: vid(3),
    });
    let r = h.sm.take_ledger();
    assert!(r.iter().any(|x| matches!(
        &x.event,
        Event::Admitted { visitor, rule: Rule::Head, .. } if *visitor == vid(2)
    )));
}

#[test]
fn v2_lottery_admission_is_golden() {
    // Fixed key and log positions → a fixed admission order. Pins sluice-draw-v2 end to end.
    let mut h = kept();
    lottery(&mut h);
    let mut order = Vec::new();
    for s in 1..=10 {
        h.at(s * 1000).tick();
        let admitted: Vec<u128> = (1..=10)
            .filter(|&v| h.is_admitted("lot", v) && !order.contains(&v))
            .collect();
        assert_eq!(admitted.len(), 1);
        order.push(admitted[0]);
    }
    assert_eq!(order, GOLDEN_V2_ORDER);
    assert_eq!(
        digest_hex(&h.room("lot").draw.unwrap().commitment)[..16],
        *GOLDEN_V2_COMMITMENT
    );
}

const GOLDEN_V2_ORDER: [u128; 10] = [5, 2, 6, 9, 7, 10, 1, 8, 3, 4];
const GOLDEN_V2_COMMITMENT: &str = "2293385648fcac08";

#[test]
fn a_closing_time_is_recorded_when_it_comes_and_asks_for_a_tick() {
    let mut h = kept();
    h.create(
        "r",
        RoomConfig {
            closes_at_ms: Some(T0 + 60_000),
            ..cfg(5, 60)
        },
    );
    h.join("r", 1);
    assert_eq!(h.sm.next_due_ms(), Some(T0 + 60_000));
    h.sm.take_ledger();
    h.at(30_000).tick();
    assert!(h.sm.take_ledger().is_empty());
    h.at(60_000).tick();
    assert_eq!(events(&h.sm.take_ledger()), [&Event::Closed]);
    h.at(90_000).tick();
    assert!(h.sm.take_ledger().is_empty(), "noted once");
    // A closing time moved later is noted again when it comes; survives a snapshot.
    let later = RoomConfig {
        closes_at_ms: Some(T0 + 120_000),
        ..cfg(5, 60)
    };
    h.run(Command::UpdateRoom {
        room: "r".into(),
        config: later.clone(),
    });
    h.sm.take_ledger();
    h = h.restored();
    h.sm.keep_ledger(true);
    h.at(120_000).tick();
    assert_eq!(events(&h.sm.take_ledger()), [&Event::Closed]);
    h = h.restored();
    h.sm.keep_ledger(true);
    h.at(130_000).tick();
    assert!(
        h.sm.take_ledger().is_empty(),
        "noted once, across a snapshot"
    );
}

/// The entry that moves the log clock past a closing time may not touch the room (a join in
/// another room): the closing is noted by the next command that does, the tick it asked for.
/// And two commands on the room in the entry that crosses it note it once.
#[test]
fn a_closing_time_is_noted_once_whichever_entry_crosses_it() {
    let mut h = kept();
    let closing = RoomConfig {
        closes_at_ms: Some(T0 + 60_000),
        ..cfg(5, 60)
    };
    h.create("r", closing.clone());
    h.create("other", cfg(5, 60));
    h.sm.take_ledger();
    h.at(61_000).join("other", 1);
    assert!(!h.sm.take_ledger().iter().any(|x| x.event == Event::Closed));
    h.at(61_500).tick();
    let r = h.sm.take_ledger();
    assert_eq!(
        r.iter()
            .filter(|x| x.event == Event::Closed && x.room == "r")
            .count(),
        1,
        "{r:?}"
    );

    let mut h = kept();
    h.create("r", closing);
    h.join("r", 1);
    h.sm.take_ledger();
    let leave = |v: u128| Command::Leave {
        room: "r".into(),
        visitor: vid(v),
    };
    h.index += 1;
    h.sm.apply(
        1,
        h.index,
        &Proposal {
            time_ms: T0 + 61_000,
            commands: vec![leave(1), leave(2)],
        },
    );
    let r = h.sm.take_ledger();
    assert_eq!(
        r.iter().filter(|x| x.event == Event::Closed).count(),
        1,
        "{r:?}"
    );
}

#[test]
fn webhook_cursors_only_move_forward_and_a_full_table_drops_the_furthest_behind() {
    let mut h = kept();
    let key = |index| crate::ledger::RecordKey {
        index,
        sub: 0,
        n: 0,
    };
    let set = |h: &mut H, hook: &str, index| {
        h.run(Command::SetWebhookCursor {
            hook: hook.into(),
            through: key(index),
        })
    };
    set(&mut h, "ops", 10);
    set(&mut h, "ops", 5);
    assert_eq!(h.sm.webhook_cursor("ops"), Some(key(10)));
    assert_eq!(h.restored().sm.webhook_cursor("ops"), Some(key(10)));
    for i in 1..crate::limits::WEBHOOKS_MAX {
        set(&mut h, &format!("h{i}"), 20 + i as u64);
    }
    set(&mut h, "h1", 100);
    // A full table: a new name takes the place of the position furthest behind ("ops", at 10,
    // the name of a webhook that stopped being delivered), never of one that moved on.
    set(&mut h, "one-more", 1);
    assert_eq!(h.sm.webhook_cursor("one-more"), Some(key(1)));
    assert_eq!(h.sm.webhook_cursor("ops"), None);
    assert_eq!(h.sm.webhook_cursor("h1"), Some(key(100)));
    assert_eq!(h.restored().sm.webhook_cursor("one-more"), Some(key(1)));
    set(&mut h, "another", 1);
    assert_eq!(
        h.sm.webhook_cursor("one-more"),
        None,
        "then the next furthest behind"
    );
    assert_eq!(h.sm.webhook_cursor("another"), Some(key(1)));
    assert_eq!(rejected(&set(&mut h, "", 1)).code(), "invalid_field");
}

#[test]
fn a_cluster_change_is_noted_in_the_audit_log_and_changes_nothing() {
    let mut h = kept();
    let before = h.sm.digest();
    let o = h.run(as_operator(
        "ada",
        Command::NoteClusterChange {
            what: "removed node 3".into(),
        },
    ));
    assert_eq!(o, Outcome::Count(0));
    let r = h.sm.take_ledger();
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].by.as_deref(), Some("ada"));
    assert_eq!(
        r[0].event,
        Event::Command {
            name: "cluster_change".into(),
            detail: "removed node 3".into(),
            outcome: "ok".into(),
        }
    );
    // The log position and the ledger's chain moved; nothing else did.
    assert_ne!(before, h.sm.digest());
    assert!(h.sm.rooms.is_empty() && h.sm.pools.is_empty());
    let long = "x".repeat(crate::limits::NOTICE_LEN_MAX + 1);
    for what in [long, "two\nlines".to_string()] {
        let o = h.run(Command::NoteClusterChange { what });
        assert_eq!(rejected(&o).code(), "invalid_field");
    }
}

#[test]
fn whose_status_changed_at_once_is_kept_for_the_watches() {
    let mut h = kept();
    h.sm.keep_woken(true);
    h.create("r", cfg(1, 60));
    h.sm.take_woken();
    // A join that waits wakes nobody; one admitted at once, or leaving, wakes the visitor.
    h.at(1_000).join("r", 1);
    h.at(1_000).join("r", 2);
    let visitor = |n| Woken::Visitor {
        room: "r".into(),
        visitor: vid(n),
    };
    assert_eq!(h.sm.take_woken(), [visitor(1)]);
    h.at(2_000).run(Command::Leave {
        room: "r".into(),
        visitor: vid(1),
    });
    assert_eq!(h.sm.take_woken(), [visitor(1), visitor(2)]);
    assert!(h.sm.take_woken().is_empty(), "taken once");
    // A notice concerns the whole line.
    h.at(2_500).run(Command::SetNotice {
        room: "r".into(),
        text: Some("soon".into()),
    });
    assert_eq!(h.sm.take_woken(), [Woken::Room("r".into())]);
    // Off: nothing is kept.
    h.sm.keep_woken(false);
    h.at(3_000).join("r", 3);
    h.at(3_000).run(Command::Leave {
        room: "r".into(),
        visitor: vid(2),
    });
    assert!(h.sm.take_woken().is_empty());
}
