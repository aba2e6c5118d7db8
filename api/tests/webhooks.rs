//! Webhooks on a cluster of real nodes: events reach a receiver signed, in order, at least once,
//! across a receiver that is down for a while and a leader that dies.

mod common;

use axum::body::Bytes;
use axum::http::HeaderMap;
use base64::Engine;
use common::*;
use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::Sha256;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const SECRET: [u8; 32] = [42; 32];

/// What the receiver was sent: (event id, type, room, signature valid).
type Seen = Arc<Mutex<Vec<(String, String, String, bool)>>>;

fn valid(headers: &HeaderMap, body: &[u8]) -> bool {
    let ts = headers
        .get("x-sluice-timestamp")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let sig = headers
        .get("x-sluice-signature")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let mut mac = Hmac::<Sha256>::new_from_slice(&SECRET).unwrap();
    mac.update(format!("{ts}.").as_bytes());
    mac.update(body);
    let want: String = mac
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    sig == format!("sha256={want}")
}

/// A receiver on `port` that records what it is sent.
async fn receiver(port: u16, seen: Seen) -> tokio::task::JoinHandle<()> {
    let app = axum::Router::new().route(
        "/hooks",
        axum::routing::post(move |headers: HeaderMap, body: Bytes| {
            let seen = seen.clone();
            async move {
                let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                let ok = valid(&headers, &body);
                seen.lock().unwrap().push((
                    v["id"].as_str().unwrap_or_default().to_string(),
                    v["type"].as_str().unwrap_or_default().to_string(),
                    v["room"].as_str().unwrap_or_default().to_string(),
                    ok && headers
                        .get("x-sluice-event-id")
                        .and_then(|h| h.to_str().ok())
                        == v["id"].as_str(),
                ));
                "ok"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .unwrap();
    tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    })
}

fn types(seen: &Seen) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for (id, t, _, _) in seen.lock().unwrap().iter() {
        // At least once: a repeat carries the id already seen.
        if !out.iter().any(|(i, _)| i == id) {
            out.push((id.clone(), t.clone()));
        }
    }
    out
}

async fn wait_types(seen: &Seen, want: &[&str]) {
    let what = format!("the receiver to be told {want:?}");
    wait_for(&what, Duration::from_secs(60), || async {
        let got: Vec<String> = types(seen).into_iter().map(|(_, t)| t).collect();
        want.iter().all(|w| got.iter().any(|g| g == w))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_reach_a_receiver_that_was_down_and_survive_a_new_leader() {
    let port = free_port();
    let secret = base64::engine::general_purpose::STANDARD.encode(SECRET);
    let extra = format!(
        "[[webhooks]]\nname = \"ops\"\nurl = \"http://127.0.0.1:{port}/hooks\"\nsecret = \"{secret}\"\nrooms = [\"sale\"]\n"
    );
    let mut c = Cluster::start_with(3, &extra).await;
    // The receiver is down: events wait, retried.
    c.create_room("sale", room_config(2)).await;
    c.create_room("other", room_config(2)).await;
    let leader = c.leader().await;
    for (path, body) in [
        ("/v1/rooms/sale/pause", json!({})),
        ("/v1/rooms/other/pause", json!({})),
    ] {
        let (s, v) = c
            .admin(leader, reqwest::Method::POST, path, Some(body))
            .await;
        assert!(s.is_success(), "{s} {v}");
    }
    let m = c.metrics(leader).await;
    wait_for(
        "a failed delivery attempt",
        Duration::from_secs(20),
        || async {
            c.metrics(leader).await.lines().any(|l| {
                l.starts_with("sluice_webhook_failed_attempts_total ") && !l.ends_with(" 0")
            })
        },
    )
    .await;
    assert!(m.contains("sluice_webhook_deliveries_total 0"), "{m}");
    // It comes up: what waited is delivered, signed, in order; only the room asked for.
    let seen: Seen = Arc::default();
    let _r = receiver(port, seen.clone()).await;
    wait_types(&seen, &["room.opened", "room.paused"]).await;
    assert!(seen
        .lock()
        .unwrap()
        .iter()
        .all(|(_, _, room, ok)| *ok && room == "sale"));
    let order: Vec<String> = types(&seen).into_iter().map(|(_, t)| t).collect();
    assert_eq!(order, ["room.opened", "room.paused"]);
    // The leader dies: the next one goes on from the replicated position.
    c.kill(leader);
    let next = c.leader().await;
    assert_ne!(next, leader);
    let (s, v) = c
        .admin(
            next,
            reqwest::Method::POST,
            "/v1/rooms/sale/resume",
            Some(json!({})),
        )
        .await;
    assert!(s.is_success(), "{s} {v}");
    wait_types(&seen, &["room.resumed"]).await;
    let got = types(&seen);
    assert_eq!(
        got.iter().map(|(_, t)| t.as_str()).collect::<Vec<_>>(),
        ["room.opened", "room.paused", "room.resumed"],
        "nothing lost, nothing of another room"
    );
    // Event ids are ledger positions, increasing.
    let idx: Vec<u64> = got
        .iter()
        .map(|(id, _)| id.split('.').next().unwrap().parse().unwrap())
        .collect();
    assert!(idx.windows(2).all(|w| w[0] < w[1]), "{got:?}");
}

/// Records no webhook wants (a busy room's joins) are read once, page after page, not again on
/// every look until the position is next saved: an event behind thousands of them arrives in
/// seconds, where it took ten seconds a page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_behind_many_records_of_other_rooms_arrives_promptly() {
    let port = free_port();
    let secret = base64::engine::general_purpose::STANDARD.encode(SECRET);
    let extra = format!(
        "[[webhooks]]\nname = \"ops\"\nurl = \"http://127.0.0.1:{port}/hooks\"\nsecret = \"{secret}\"\nrooms = [\"sale\"]\n\
         [limits]\nvisitor_requests_per_second = 100000\nvisitor_burst = 100000\n"
    );
    let seen: Seen = Arc::default();
    let _r = receiver(port, seen.clone()).await;
    let c = Cluster::start_with(1, &extra).await;
    c.create_room("sale", room_config(2)).await;
    wait_types(&seen, &["room.opened"]).await;
    // 2,500 joins admitted at once in another room: 5,000 records, ten pages.
    c.create_room("busy", room_config(1_000_000)).await;
    for _ in 0..50 {
        futures::future::join_all((0..50).map(|_| c.join(1, "busy", None))).await;
    }
    let (s, v) = c
        .admin(
            1,
            reqwest::Method::POST,
            "/v1/rooms/sale/pause",
            Some(json!({})),
        )
        .await;
    assert!(s.is_success(), "{s} {v}");
    wait_for("room.paused delivered", Duration::from_secs(8), || async {
        types(&seen).iter().any(|(_, t)| t == "room.paused")
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_webhook_setting_stops_the_node_with_a_message() {
    let dir = tempfile::tempdir().unwrap();
    let ports = [(1u64, (free_port(), free_port(), free_port()))]
        .into_iter()
        .collect();
    let extra = "[[webhooks]]\nname = \"ops\"\nurl = \"ftp://x\"\nsecret = \"c2hvcnQ=\"\n";
    let path = dir.path().join("n1.toml");
    std::fs::write(&path, config(1, dir.path(), &ports, extra)).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["serve", "--config", path.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("webhooks.ops: url"), "{err}");
}
