//! The whole visitor flow over HTTP on one node and on a 3-node cluster: joins sent to followers,
//! status read from followers, the gate, session TTL and renewal, and a leader killed mid-flow.

mod common;

use common::*;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use std::time::Duration;

fn s(v: &Value, k: &str) -> String {
    v[k].as_str().unwrap_or_default().to_string()
}

async fn flow(c: &Cluster, entry: u64, reader: u64) {
    c.create_room("sale", room_config(1)).await;
    // The first visitor is admitted at once, with a ticket and an admission token.
    let a = c.join(entry, "sale", None).await;
    assert_eq!(s(&a, "state"), "admitted", "{a}");
    assert!(a["admission_token"]
        .as_str()
        .is_some_and(|t| t.split('.').count() == 3));
    assert_eq!(s(&a, "visitor_id").len(), 32);
    // The second waits at position 1.
    let b = c.join(entry, "sale", None).await;
    assert_eq!(
        (s(&b, "state").as_str(), b["position"].as_u64()),
        ("waiting", Some(1)),
        "{b}"
    );
    assert!(b.get("admission_token").is_none());
    // Joining again with the same ticket resumes the same place.
    let b2 = c.join(entry, "sale", Some(&s(&b, "ticket"))).await;
    assert_eq!(
        (s(&b2, "visitor_id"), b2["position"].as_u64()),
        (s(&b, "visitor_id"), Some(1))
    );
    // Status from another node: local (with the applied index) and linearizable.
    let st = c.status(reader, "sale", &s(&b, "ticket")).await;
    assert_eq!(s(&st, "state"), "waiting");
    assert!(st["applied_index"].as_u64().unwrap() > 0);
    let (code, st) = c
        .visitor(
            reader,
            Method::GET,
            "/v1/rooms/sale/status?consistent=true",
            Some(&s(&b, "ticket")),
        )
        .await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(st["position"].as_u64(), Some(1));
    // The gate admits A and refuses B, on any node, without Raft.
    assert_eq!(
        c.gate(reader, "sale", &s(&a, "ticket")).await,
        StatusCode::OK
    );
    assert_eq!(
        c.gate(reader, "sale", &s(&b, "ticket")).await,
        StatusCode::UNAUTHORIZED
    );
    // A leaves: B is admitted at once; A's ticket no longer passes the gate.
    let (code, left) = c
        .visitor(
            entry,
            Method::POST,
            "/v1/rooms/sale/leave",
            Some(&s(&a, "ticket")),
        )
        .await;
    assert_eq!(
        (code, s(&left, "state"), s(&left, "reason")),
        (StatusCode::OK, "rejected".into(), "left".into())
    );
    let st = c.status(reader, "sale", &s(&b2, "ticket")).await;
    assert_eq!(s(&st, "state"), "admitted", "{st}");
    wait_for("the gate sees A gone", Duration::from_secs(5), || async {
        c.gate(reader, "sale", &s(&a, "ticket")).await == StatusCode::UNAUTHORIZED
    })
    .await;
    // B's admitted ticket (from the status answer) passes the gate.
    assert_eq!(
        c.gate(reader, "sale", &s(&st, "ticket")).await,
        StatusCode::OK
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn visitor_flow_on_one_node() {
    let c = Cluster::start(1).await;
    flow(&c, 1, 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn visitor_flow_on_three_nodes_through_followers() {
    let c = Cluster::start(3).await;
    let leader = c.leader().await;
    let followers: Vec<u64> = (1..=3).filter(|&i| i != leader).collect();
    flow(&c, followers[0], followers[1]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_expire_without_activity_and_are_renewed_by_it() {
    let c = Cluster::start(1).await;
    c.create_room(
        "ttl",
        json!({"capacity": 10, "admit_per_minute": 600000, "session_ttl_secs": 2}),
    )
    .await;
    let idle = c.join(1, "ttl", None).await;
    let busy = c.join(1, "ttl", None).await;
    let busy_ticket = s(&busy, "ticket");
    let started = std::time::Instant::now();
    // The busy visitor keeps browsing (gate checks renew in batches); the idle one does nothing
    // (a status read is not activity).
    wait_for(
        "the idle session expires",
        Duration::from_secs(10),
        || async {
            assert_eq!(
                c.gate(1, "ttl", &busy_ticket).await,
                StatusCode::OK,
                "an active session must stay admitted"
            );
            c.status(1, "ttl", &s(&idle, "ticket")).await["state"] == "rejected"
        },
    )
    .await;
    assert_eq!(
        c.gate(1, "ttl", &s(&idle, "ticket")).await,
        StatusCode::UNAUTHORIZED
    );
    assert!(
        started.elapsed() >= Duration::from_millis(1_500),
        "expired too early"
    );
    // Keep browsing past several TTLs.
    while started.elapsed() < Duration::from_secs(5) {
        assert_eq!(c.gate(1, "ttl", &busy_ticket).await, StatusCode::OK);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let st = c.status(1, "ttl", &s(&idle, "ticket")).await;
    assert_eq!(
        (s(&st, "state"), s(&st, "reason")),
        ("rejected".into(), "expired".into())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_killed_mid_flow() {
    let mut c = Cluster::start(3).await;
    c.create_room("k", room_config(100)).await;
    let leader = c.leader().await;
    let follower = (1..=3).find(|&i| i != leader).unwrap();
    let mut tickets = Vec::new();
    for _ in 0..10 {
        tickets.push(s(&c.join(follower, "k", None).await, "ticket"));
    }
    c.kill(leader);
    // Joins keep working through the survivors once a new leader is elected.
    for _ in 0..10 {
        tickets.push(s(&c.join(follower, "k", None).await, "ticket"));
    }
    let new_leader = c.leader().await;
    assert_ne!(new_leader, leader);
    for t in &tickets {
        let st = c.status(follower, "k", t).await;
        assert_eq!(s(&st, "state"), "admitted", "{st}");
    }
    let (_, room) = c
        .admin(follower, Method::GET, "/v1/rooms/k?consistent=true", None)
        .await;
    assert_eq!(room["totals"]["joined"].as_u64(), Some(20));
}
