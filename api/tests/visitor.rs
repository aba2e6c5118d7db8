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
    assert!(
        b.get("eta_secs").is_none() && b.get("eta_max_secs").is_none(),
        "a full room none of whose sessions has ended has no honest estimate: {b}"
    );
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
    // Leaving again, on any node, is answered the same and writes nothing: a ticket of an
    // ended visit buys no log entries.
    let leader = c.leader().await;
    let before = c.last_log_index(leader).await;
    for node in [entry, reader] {
        let (code, again) = c
            .visitor(
                node,
                Method::POST,
                "/v1/rooms/sale/leave",
                Some(&s(&left, "ticket")),
            )
            .await;
        assert_eq!(
            (code, s(&again, "state"), s(&again, "reason")),
            (StatusCode::OK, "rejected".into(), "left".into()),
            "{again}"
        );
    }
    assert_eq!(c.last_log_index(leader).await, before);
    // Another visitor's write: a linearizable read on any node sees it at once.
    let (_, st) = c
        .visitor(
            reader,
            Method::GET,
            "/v1/rooms/sale/status?consistent=true",
            Some(&s(&b2, "ticket")),
        )
        .await;
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
    // A session has ended: a newcomer in the full room is told a waiting time, as a range.
    let later = c.join(entry, "sale", None).await;
    assert_eq!(s(&later, "state"), "waiting", "{later}");
    let (eta, eta_max) = (later["eta_secs"].as_u64(), later["eta_max_secs"].as_u64());
    assert!(eta.is_some() && eta_max >= eta, "{later}");
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_stream_pushes_position_then_admission() {
    let c = Cluster::start(1).await;
    c.create_room("ev", room_config(1)).await;
    let a = c.join(1, "ev", None).await;
    let b = c.join(1, "ev", None).await;
    let resp = events(&c, "ev", &b).await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert!(resp.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    let mut body = resp.bytes_stream();
    let mut text = String::new();
    let first = next_event(&mut body, &mut text).await;
    assert_eq!(
        (s(&first, "state").as_str(), first["position"].as_u64()),
        ("waiting", Some(1))
    );
    // A leaves; the stream pushes B's admission without B asking.
    c.visitor(
        1,
        Method::POST,
        "/v1/rooms/ev/leave",
        Some(&s(&a, "ticket")),
    )
    .await;
    let second = next_event(&mut body, &mut text).await;
    assert_eq!(s(&second, "state"), "admitted", "{second}");
    assert!(second["admission_token"].as_str().is_some());
}

/// A status that does not change is still news: the stream says it is alive every 15 s with
/// an event the page sees (its "Last updated" moves, and it can tell a lost connection).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_stream_says_it_is_alive_while_nothing_changes() {
    use futures::StreamExt;
    let c = Cluster::start(1).await;
    let cfg = json!({"capacity": 1, "paused": true, "waiter_ttl_secs": 600,
        "admit_per_minute": 60, "session_ttl_secs": 600});
    c.create_room("alive", cfg).await;
    let a = c.join(1, "alive", None).await;
    let resp = events(&c, "alive", &a).await;
    let mut body = resp.bytes_stream();
    let mut text = String::new();
    let first = next_event(&mut body, &mut text).await;
    assert_eq!(s(&first, "state"), "waiting");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !text.contains("event: alive") {
        let chunk = tokio::time::timeout_at(deadline, body.next())
            .await
            .expect("an alive event within 30 s");
        text.push_str(std::str::from_utf8(&chunk.unwrap().unwrap()).unwrap());
    }
    assert!(
        !text.contains("event: status"),
        "nothing changed, yet: {text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_event_stream_keeps_a_waiter_in_line() {
    let c = Cluster::start(1).await;
    let cfg = json!({"capacity": 1, "paused": true, "waiter_ttl_secs": 3,
        "admit_per_minute": 600000, "session_ttl_secs": 600});
    c.create_room("ttl", cfg).await;
    // A only listens to its event stream; B, who joined later, neither listens nor sends
    // heartbeats.
    let a = c.join(1, "ttl", None).await;
    let resp = events(&c, "ttl", &a).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let b = c.join(1, "ttl", None).await;
    let in_line = || async {
        let (_, q) = c
            .admin(1, Method::GET, "/v1/rooms/ttl/queue?consistent=true", None)
            .await;
        q["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| s(e, "visitor_id"))
            .collect::<Vec<_>>()
    };
    wait_for("B abandoned", Duration::from_secs(30), || async {
        !in_line().await.contains(&s(&b, "visitor_id"))
    })
    .await;
    // A's last join is older than B's, yet A keeps its place.
    assert_eq!(in_line().await, [s(&a, "visitor_id")]);
    // B's browser comes back: the page says the place was lost, and takes no new one by itself.
    let page = c
        .http
        .get(c.node(1).url("/wait/ttl"))
        .header("cookie", format!("sluice_ticket_ttl={}", s(&b, "ticket")))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        page.contains("You were away too long") && page.contains("data-manual=\"1\""),
        "{page}"
    );
    assert_eq!(
        in_line().await,
        [s(&a, "visitor_id")],
        "no place taken by looking"
    );
    let st = c.status(1, "ttl", &s(&a, "ticket")).await;
    assert_eq!(
        (s(&st, "state").as_str(), st["position"].as_u64()),
        ("waiting", Some(1)),
        "{st}"
    );
    drop(resp);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_join_that_may_still_apply_hands_out_its_ticket() {
    let mut c = Cluster::start_with(3, "[limits]\nrequest_timeout_ms = 1000\n").await;
    let cfg = json!({"capacity": 1, "paused": true, "admit_per_minute": 600000,
        "session_ttl_secs": 600, "waiter_ttl_secs": 600});
    c.create_room("lost", cfg).await;
    let leader = c.leader().await;
    let others: Vec<u64> = (1..=3).filter(|&i| i != leader).collect();
    for &i in &others {
        c.kill(i);
    }
    // Without a quorum the leader cannot commit: the join fails, yet its entry may still be
    // applied once the quorum is back.
    let r = c
        .http
        .post(c.node(leader).url("/v1/rooms/lost/join"))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_server_error(), "{}", r.status());
    let cookie = r.headers()["set-cookie"].to_str().unwrap().to_string();
    let v: Value = r.json().await.unwrap();
    let ticket = v["error"]["ticket"]
        .as_str()
        .unwrap_or_else(|| panic!("no ticket with {v}"))
        .to_string();
    assert!(
        cookie.starts_with(&format!("sluice_ticket_lost={ticket};")),
        "{cookie}"
    );
    // The leader stays leader in its own eyes, but no longer says it is ready, and its metrics
    // show how long its followers have been silent.
    let ready = c.node(leader).url("/readyz");
    wait_for("the leader not ready", Duration::from_secs(20), || async {
        let r = c.http.get(&ready).send().await.unwrap();
        r.status() == StatusCode::SERVICE_UNAVAILABLE
            && r.json::<Value>().await.unwrap()["error"]["code"] == "no_quorum"
    })
    .await;
    let metrics = c.metrics(leader).await;
    for &i in &others {
        let line = format!("sluice_raft_follower_ack_age_seconds{{follower=\"{i}\"}} ");
        let age: f64 = metrics
            .lines()
            .find_map(|l| l.strip_prefix(&line))
            .unwrap_or_else(|| panic!("no {line} in {metrics}"))
            .parse()
            .unwrap();
        assert!(age > 0.5, "{line}{age}");
    }
    assert!(
        metrics.contains("sluice_raft_quorum_ack_age_seconds "),
        "{metrics}"
    );
    for &i in &others {
        c.spawn(i);
    }
    c.wait_ready().await;
    // The retry with that ticket resumes the same place: one visitor in line, whether the first
    // attempt was applied or not. Until the cluster has settled after the restarts a join may
    // still time out or find no leader (5xx); a client retries it with the same ticket.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let again = loop {
        let (s, v) = c
            .visitor(
                others[0],
                Method::POST,
                "/v1/rooms/lost/join",
                Some(&ticket),
            )
            .await;
        if s == StatusCode::OK {
            break v;
        }
        assert!(
            s.is_server_error() && std::time::Instant::now() < deadline,
            "{s} {v}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let (_, q) = c
        .admin(
            others[0],
            Method::GET,
            "/v1/rooms/lost/queue?consistent=true",
            None,
        )
        .await;
    assert_eq!(q["waiting"], 1, "{q}");
    assert_eq!(q["entries"][0]["visitor_id"], again["visitor_id"], "{q}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_streams_past_the_limit_are_refused_until_one_ends() {
    let c = Cluster::start_with(1, "[limits]\nevent_streams_max = 1\n").await;
    assert!(
        c.metrics(1)
            .await
            .lines()
            .any(|l| l == "sluice_event_streams_max 1"),
        "the configured bound is the one shown"
    );
    c.create_room("es", room_config(1)).await;
    c.join(1, "es", None).await;
    let v = c.join(1, "es", None).await;
    let open = || {
        c.http
            .get(c.node(1).url("/v1/rooms/es/events"))
            .header("cookie", format!("sluice_ticket={}", s(&v, "ticket")))
            .send()
    };
    let first = open().await.unwrap();
    assert_eq!(first.status(), StatusCode::OK);
    let refused = open().await.unwrap();
    assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(refused.headers().get("retry-after").is_some());
    let e: Value = refused.json().await.unwrap();
    assert_eq!(e["error"]["code"], "too_many_streams", "{e}");
    // Once the first stream's client goes away its slot is free again.
    drop(first);
    wait_for("a stream slot", Duration::from_secs(20), || async {
        open().await.unwrap().status() == StatusCode::OK
    })
    .await;
}

/// A visitor's event stream on node 1, its ticket in the cookie.
async fn events(c: &Cluster, room: &str, visitor: &Value) -> reqwest::Response {
    c.http
        .get(c.node(1).url(&format!("/v1/rooms/{room}/events")))
        .header("cookie", format!("sluice_ticket={}", s(visitor, "ticket")))
        .send()
        .await
        .unwrap()
}

async fn next_event<S>(body: &mut S, text: &mut String) -> Value
where
    S: futures::Stream<Item = reqwest::Result<axum::body::Bytes>> + Unpin,
{
    use futures::StreamExt;
    loop {
        if let Some(i) = text.find("\n\n") {
            let ev: String = text.drain(..i + 2).collect();
            if ev.lines().any(|l| l == "event: alive") {
                continue;
            }
            if let Some(data) = ev.lines().find_map(|l| l.strip_prefix("data: ")) {
                return serde_json::from_str::<Value>(data).unwrap();
            }
            continue;
        }
        let chunk = tokio::time::timeout(Duration::from_secs(10), body.next())
            .await
            .expect("an event in time");
        text.push_str(std::str::from_utf8(&chunk.unwrap().unwrap()).unwrap());
    }
}

/// The operator's notice reaches every waiter live (event streams on any node), shows on the
/// waiting page escaped, and bad or unauthenticated notices change nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notice_reaches_waiters_live_on_every_node_and_bad_ones_are_refused() {
    let c = Cluster::start(3).await;
    let mut config = room_config(1);
    config["entry"] = json!({"grace_secs": 300});
    c.create_room("nt", config).await;
    let (_, room) = c
        .admin(2, Method::GET, "/v1/rooms/nt?consistent=true", None)
        .await;
    assert_eq!(room["config"]["entry"]["grace_secs"], 300, "{room}");
    c.join(1, "nt", None).await;
    let b = c.join(2, "nt", None).await;
    let resp = c
        .http
        .get(c.node(3).url("/v1/rooms/nt/events"))
        .header("cookie", format!("sluice_ticket={}", s(&b, "ticket")))
        .send()
        .await
        .unwrap();
    let mut body = resp.bytes_stream();
    let mut text = String::new();
    let first = next_event(&mut body, &mut text).await;
    assert_eq!(first["notice"], Value::Null, "{first}");
    let hostile = "Back at 18:00 <script>alert(1)</script>\nThanks for waiting";
    let (st, v) = c
        .admin(
            1,
            Method::POST,
            "/v1/rooms/nt/notice",
            Some(json!({"text": hostile})),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["notice"]["text"], hostile);
    let second = next_event(&mut body, &mut text).await;
    assert_eq!(second["notice"], hostile, "{second}");
    assert_eq!(second["position"], 1, "the place is unchanged");
    // The page shows it escaped, line break kept as text.
    let page = c
        .http
        .get(c.node(2).url("/wait/nt"))
        .header("cookie", format!("sluice_ticket={}", s(&b, "ticket")))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("id=\"notice\""), "{page}");
    assert!(page.contains("Back at 18:00 &lt;script&gt;"), "{page}");
    assert!(!page.contains("<script>alert"), "{page}");
    // Refused: without the token, too long, control characters, an unknown room.
    let anon = c
        .http
        .post(c.node(1).url("/v1/rooms/nt/notice"))
        .json(&json!({"text": "hijack"}))
        .send()
        .await
        .unwrap();
    assert_eq!(anon.status(), StatusCode::UNAUTHORIZED);
    for (bad, code) in [
        (json!({"text": "x".repeat(501)}), "invalid_field"),
        (json!({"text": "bell\u{7}"}), "invalid_field"),
        (json!({"text": 5}), "invalid_body"),
        (json!({"text": "hi", "extra": 1}), "unknown_field"),
    ] {
        let (st, v) = c
            .admin(1, Method::POST, "/v1/rooms/nt/notice", Some(bad.clone()))
            .await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{bad}: {v}");
        assert_eq!(v["error"]["code"], code, "{bad}: {v}");
    }
    let (st, _) = c
        .admin(
            1,
            Method::POST,
            "/v1/rooms/nope/notice",
            Some(json!({"text": "x"})),
        )
        .await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    let (_, room) = c
        .admin(1, Method::GET, "/v1/rooms/nt?consistent=true", None)
        .await;
    assert_eq!(room["notice"]["text"], hostile, "nothing changed");
    // Blank takes it down, live.
    let (st, v) = c
        .admin(
            1,
            Method::POST,
            "/v1/rooms/nt/notice",
            Some(json!({"text": "  "})),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["notice"], Value::Null);
    let third = next_event(&mut body, &mut text).await;
    assert_eq!(third["notice"], Value::Null, "{third}");
    // A grace period out of range names its field.
    let mut config = room_config(1);
    config["entry"] = json!({"grace_secs": 0});
    let (st, v) = c.admin(1, Method::PUT, "/v1/rooms/nt", Some(config)).await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{v}");
    assert_eq!(v["error"]["field"], "entry.grace_secs", "{v}");
}

/// The counts of `sluice_http_requests_total` for `route`, by method and status.
fn request_counts(metrics: &str, route: &str) -> std::collections::BTreeMap<(String, u16), u64> {
    let mut counts = std::collections::BTreeMap::new();
    for line in metrics.lines() {
        let Some(labels) = line.strip_prefix("sluice_http_requests_total{") else {
            continue;
        };
        let (labels, n) = labels.split_once("} ").unwrap();
        let label = |k: &str| {
            let v = labels.split(&format!("{k}=\"")).nth(1).unwrap();
            v[..v.find('"').unwrap()].to_string()
        };
        if label("route") == route {
            let key = (label("method"), label("status").parse().unwrap());
            counts.insert(key, n.parse().unwrap());
        }
    }
    counts
}

/// A request of the comparison below: method, path (`{}` for the room), room, headers.
type Ask<'a> = (Method, &'a str, &'a str, Vec<(&'a str, String)>);

/// Gate checks and status reads are answered before the router; the router still answers the
/// same paths when the room's name is percent-escaped. Both answer alike, header for header
/// (ticket in every place it can come from, none, forged, for another room, an unknown room, a
/// bad query), and both are counted under the route's template.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gate_checks_and_status_reads_answer_as_the_router_does() {
    let c = Cluster::start(1).await;
    c.create_room("gate", room_config(100)).await;
    c.create_room(
        "line",
        json!({"paused": true, "waiter_ttl_secs": 600, "session_ttl_secs": 600}),
    )
    .await;
    let admitted = s(&c.join(1, "gate", None).await, "ticket");
    let waiting = s(&c.join(1, "line", None).await, "ticket");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while c.status(1, "gate", &admitted).await["state"] != "admitted" {
        assert!(std::time::Instant::now() < deadline, "never admitted");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let auth = |t: &str| ("authorization", format!("Ticket {t}"));
    let cookie = |room: &str, t: &str| ("cookie", format!("sluice_ticket_{room}={t}"));
    let forged = "t1.b.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA.AAAAAAAAAAAAAAAA";
    let gate = "/gate/{}/check";
    let status = "/v1/rooms/{}/status";
    let in_query = format!("/v1/rooms/{{}}/status?ticket={waiting}");
    let cases: Vec<Ask> = vec![
        (Method::GET, gate, "gate", vec![cookie("gate", &admitted)]),
        (
            Method::POST,
            gate,
            "gate",
            vec![
                cookie("gate", &admitted),
                ("x-original-uri", "/shop/cart?x=1".into()),
            ],
        ),
        (Method::GET, gate, "gate", vec![auth(&admitted)]),
        (Method::GET, gate, "gate", vec![]),
        (Method::GET, gate, "gate", vec![cookie("gate", forged)]),
        (Method::GET, gate, "gate", vec![cookie("gate", &waiting)]),
        (Method::GET, gate, "line", vec![cookie("line", &waiting)]),
        (
            Method::GET,
            gate,
            "nosuch",
            vec![cookie("nosuch", &admitted)],
        ),
        (Method::GET, status, "line", vec![auth(&waiting)]),
        (Method::GET, status, "line", vec![cookie("line", &waiting)]),
        (Method::GET, status, "gate", vec![auth(&admitted)]),
        (Method::GET, status, "gate", vec![cookie("gate", &admitted)]),
        (Method::GET, status, "gate", vec![auth(&waiting)]),
        (Method::GET, status, "line", vec![auth(forged)]),
        (Method::GET, status, "line", vec![]),
        (Method::GET, status, "nosuch", vec![auth(&waiting)]),
        (
            Method::GET,
            "/v1/rooms/{}/status?consistent=maybe",
            "line",
            vec![auth(&waiting)],
        ),
        (
            Method::GET,
            "/v1/rooms/{}/status?consistent=true",
            "line",
            vec![auth(&waiting)],
        ),
        (Method::GET, &in_query, "line", vec![]),
    ];
    let routes = ["/gate/{room}/check", "/v1/rooms/{room}/status"];
    let before = c.metrics(1).await;
    let mut sent: std::collections::BTreeMap<(&str, String, u16), u64> = Default::default();
    for (method, path, room, headers) in &cases {
        let escaped = format!("%{:02x}{}", room.as_bytes()[0], &room[1..]);
        let answer = |room: String| {
            let mut req = c
                .http
                .request(method.clone(), c.node(1).url(&path.replace("{}", &room)));
            for (k, v) in headers {
                req = req.header(*k, v);
            }
            async move {
                let r = req.send().await.unwrap();
                let status = r.status();
                let mut headers: Vec<(String, String)> = r
                    .headers()
                    .iter()
                    .filter(|(k, _)| *k != "date")
                    .map(|(k, v)| (k.to_string(), v.to_str().unwrap().to_string()))
                    .collect();
                headers.sort();
                (status, headers, r.text().await.unwrap())
            }
        };
        // An entry applied between the two (a tick) changes the index an answer names, and a
        // second passing between them the time in the ticket it hands back: ask again until
        // both were answered alike (a real difference stays through every try).
        let mut tries = 0;
        let (hot, routed) = loop {
            let hot = answer(room.to_string()).await;
            let routed = answer(escaped.clone()).await;
            tries += 1;
            if hot == routed || tries == 10 {
                break (hot, routed);
            }
        };
        let route = if path.starts_with("/gate/") {
            routes[0]
        } else {
            routes[1]
        };
        *sent
            .entry((route, method.to_string(), hot.0.as_u16()))
            .or_default() += 2 * tries;
        assert_eq!(hot, routed, "{method} {path} in {room} with {headers:?}");
    }
    let statuses: std::collections::BTreeSet<u16> = sent.keys().map(|k| k.2).collect();
    assert!(
        [200, 400, 401, 403].iter().all(|s| statuses.contains(s)),
        "the cases cover admitted, bad and refused asks: {statuses:?}"
    );
    let after = c.metrics(1).await;
    for route in routes {
        let (b, a) = (
            request_counts(&before, route),
            request_counts(&after, route),
        );
        let counted: std::collections::BTreeMap<(String, u16), u64> = a
            .iter()
            .map(|(k, n)| (k.clone(), n - b.get(k).copied().unwrap_or(0)))
            .filter(|(_, n)| *n > 0)
            .collect();
        let expected: std::collections::BTreeMap<(String, u16), u64> = sent
            .iter()
            .filter(|(k, _)| k.0 == route)
            .map(|((_, m, s), n)| ((m.clone(), *s), *n))
            .collect();
        assert_eq!(counted, expected, "{route}");
    }
}
