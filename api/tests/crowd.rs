//! A short run of the crowd generator (`sluice_testkit::crowd`, the `sluice-crowd` binary's
//! visitors) against real nodes: waiting pages that hold their event streams from many loopback
//! addresses learn of their admission, pass the gate and leave; pages that poll do too; and a
//! crowd stops at its deadline whatever its visitors are doing. The figures at scale are
//! BENCHMARKS.md's ("The crowd"); this checks that the generator and the streams work.

mod common;

use common::*;
use serde_json::json;
use sluice_testkit::crowd::{self, Listen, Plan};
use std::time::Duration;

fn plan(c: &Cluster, room: &str, visitors: usize, listen: Listen, duration: Duration) -> Plan {
    Plan {
        nodes: c.nodes.values().map(|n| n.url("")).collect(),
        room: room.into(),
        visitors,
        first: 0,
        arrive_over: Duration::from_secs(2),
        then_per_minute: 0,
        duration,
        listen,
        session: (Duration::ZERO, Duration::from_millis(500)),
        sources: (2, 20),
        seed: 7,
        fresh_connections: false,
        pow: false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crowd_on_event_streams_and_polls_is_admitted_in_turn_and_leaves() {
    let c = Cluster::start(1).await;
    // Five admissions a second after a burst of five: most of the crowd waits first.
    let room = json!({"capacity": 1_000_000, "admit_per_minute": 300, "admit_burst": 5,
                      "session_ttl_secs": 600, "waiter_ttl_secs": 600});
    c.create_room("streams", room.clone()).await;
    c.create_room("polls", room).await;
    let streams = crowd::run(plan(
        &c,
        "streams",
        120,
        Listen::Events,
        Duration::from_secs(90),
    ));
    let polls = crowd::run(plan(&c, "polls", 60, Listen::Poll, Duration::from_secs(90)));
    let (streams, polls) = tokio::join!(streams, polls);
    let ((streams, no_polls), (polls, poll_counts)) = (streams.unwrap(), polls.unwrap());
    assert_eq!(no_polls.total(), 0, "streams do not poll");
    // Every status a poller was told was a poll answered and counted, within the crowd's time.
    let told: u64 = polls.iter().map(|r| r.statuses).sum();
    assert_eq!(poll_counts.total(), told);
    assert_eq!(poll_counts.per_second.iter().sum::<u64>(), told);
    assert!(poll_counts.quantile_ms(0.99) <= poll_counts.quantile_ms(1.0));
    for (what, recs, n) in [("streams", streams, 120), ("polls", polls, 60)] {
        let s = crowd::summarize(&recs);
        assert_eq!((s.visitors, s.joined), (n, n), "{what}: {s:?}");
        assert_eq!((s.errors, s.refused), (0, 0), "{what}: {s:?}");
        assert_eq!((s.reconnects, s.polled_instead), (0, 0), "{what}: {s:?}");
        // Everyone was admitted, learned it from the stream (or a poll), passed the gate and
        // left; the line only moved forward.
        assert_eq!((s.admitted, s.gate_ok, s.left), (n, n, n), "{what}: {s:?}");
        assert!(s.waiting_at_join > n / 2, "{what}: {s:?}");
        assert_eq!(s.position_back, 0, "{what}: {s:?}");
        for r in recs
            .iter()
            .filter(|r| r.joined.as_deref() == Some("waiting"))
        {
            assert!(r.statuses >= 1, "{what}: a waiter told nothing: {r:?}");
            assert!(r.admitted_at_ms.unwrap() >= r.join_at_ms, "{r:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crowd_stops_at_its_deadline_whatever_its_visitors_are_doing() {
    let c = Cluster::start(1).await;
    // A paused room admits no one: every visitor would wait for ever.
    let mut room = room_config(1_000);
    room["paused"] = json!(true);
    c.create_room("still", room).await;
    let mut p = plan(&c, "still", 30, Listen::Events, Duration::from_secs(4));
    p.arrive_over = Duration::from_secs(1);
    let started = tokio::time::Instant::now();
    let (recs, _) = crowd::run(p).await.unwrap();
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(15),
        "the crowd outlived its deadline: {took:?}"
    );
    let s = crowd::summarize(&recs);
    assert_eq!(
        (s.joined, s.admitted, s.left, s.errors),
        (30, 0, 0, 0),
        "{s:?}"
    );
    assert!(recs.iter().all(|r| r.statuses >= 1), "{recs:?}");
}

#[test]
fn a_plan_beyond_loopback_or_past_its_bounds_does_not_run() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let p = Plan {
        nodes: vec!["http://127.0.0.1:9".into()],
        room: "r".into(),
        visitors: crowd::VISITORS_PER_PROCESS_MAX + 1,
        first: 0,
        arrive_over: Duration::ZERO,
        then_per_minute: 0,
        duration: Duration::from_secs(1),
        listen: Listen::Events,
        session: (Duration::ZERO, Duration::ZERO),
        sources: (2, 10),
        seed: 1,
        fresh_connections: false,
        pow: false,
    };
    assert!(rt.block_on(crowd::run(p.clone())).is_err());
    // Pollers hold no connection each: more of them fit in a process, but not without bound.
    let pollers = Plan {
        listen: Listen::Poll,
        visitors: crowd::POLLERS_PER_PROCESS_MAX + 1,
        ..p.clone()
    };
    assert!(rt.block_on(crowd::run(pollers)).is_err());
    let off = Plan {
        visitors: 1,
        sources: (250, 10),
        ..p
    };
    assert!(rt.block_on(crowd::run(off)).is_err());
}

/// The opening minute's crowd: visitors that only join, each on a connection of its own, each
/// with its solution to the room's proof-of-work challenge (fetched and solved before the
/// crowd starts): every one joins, and a crowd without solutions is refused every place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_opening_crowd_solves_its_challenges_and_joins_on_fresh_connections() {
    let c = Cluster::start(1).await;
    let mut room = room_config(1_000_000);
    room["entry"] = json!({"proof_of_work": {"work": 4, "cost": 5}});
    c.create_room("opening", room).await;
    let mut p = plan(&c, "opening", 150, Listen::Join, Duration::from_secs(30));
    p.fresh_connections = true;
    p.pow = true;
    let (recs, polls) = crowd::run(p.clone()).await.unwrap();
    let s = crowd::summarize(&recs);
    assert_eq!(
        (s.visitors, s.joined, s.errors, s.refused),
        (150, 150, 0, 0),
        "{s:?}"
    );
    assert_eq!(polls.total(), 0);
    // Nobody waits on anything after joining: the record ends at the join.
    assert!(
        recs.iter().all(|r| r.statuses == 0 && r.gate_ok.is_none()),
        "{recs:?}"
    );
    // Without solutions, no place is given.
    p.pow = false;
    p.visitors = 20;
    let (recs, _) = crowd::run(p).await.unwrap();
    let s = crowd::summarize(&recs);
    assert_eq!(s.joined, 0, "{s:?}");
    assert_eq!(s.errors + s.refused, 20, "{s:?}");
}

/// Past the node's stream limit a page is refused its stream (503) and polls instead, as the
/// waiting page does; it still learns of its admission, and nobody is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_refused_a_stream_poll_instead_and_are_admitted_all_the_same() {
    let c = Cluster::start_with(1, "[limits]\nevent_streams_max = 10\n").await;
    let room = json!({"capacity": 1_000_000, "admit_per_minute": 120, "admit_burst": 2,
                      "session_ttl_secs": 600, "waiter_ttl_secs": 600});
    c.create_room("full", room).await;
    let (recs, polls) = crowd::run(plan(
        &c,
        "full",
        40,
        Listen::Events,
        Duration::from_secs(90),
    ))
    .await
    .unwrap();
    let s = crowd::summarize(&recs);
    assert_eq!(
        (s.joined, s.admitted, s.gate_ok, s.errors),
        (40, 40, 40, 0),
        "{s:?}"
    );
    // Refused streams only, each then polled.
    assert!(s.polled_instead >= 10, "{s:?}");
    assert_eq!(s.refused, s.polled_instead, "{s:?}");
    // A page that polls learns of its admission from a poll: one at least each.
    assert!(polls.total() >= s.polled_instead, "{polls:?}");
}
