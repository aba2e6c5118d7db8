//! Fair entry, tried as a bot army would, against real `sluice serve` processes: places taken
//! from one network, joins without (or with forged, reused, expired) proofs of work. Each test
//! names the attack and fails if it works.

mod common;

use common::*;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use sluice_ops::pow;

/// A paused room: visitors join and wait.
fn held() -> Value {
    json!({"capacity": 1, "paused": true, "admit_per_minute": 600000, "session_ttl_secs": 600, "waiter_ttl_secs": 600})
}

/// A JSON join to `room` on node 1: the status and the answer.
async fn join_json(c: &Cluster, room: &str, body: Value) -> (StatusCode, Value) {
    let url = c.node(1).url(&format!("/v1/rooms/{room}/join"));
    let r = c.http.post(&url).json(&body).send().await.unwrap();
    (r.status(), r.json::<Value>().await.unwrap())
}

/// A join to `room` on node 1 from the client address `from` (through the trusted proxy).
async fn join_from(c: &Cluster, room: &str, from: &str) -> (StatusCode, Value) {
    let r = c
        .http
        .post(c.node(1).url(&format!("/v1/rooms/{room}/join")))
        .header("x-forwarded-for", from)
        .send()
        .await
        .unwrap();
    (r.status(), r.json::<Value>().await.unwrap())
}

/// A gRPC Visitor client of node 1.
async fn visitor_client(
    c: &Cluster,
) -> sluice_grpc::pb::visitor_client::VisitorClient<tonic::transport::Channel> {
    sluice_grpc::pb::visitor_client::VisitorClient::connect(format!("http://{}", c.node(1).grpc))
        .await
        .unwrap()
}

/// How many wait in room `pw`.
async fn waiting(c: &Cluster) -> u64 {
    let (_, r) = c.admin(1, Method::GET, "/v1/rooms/pw", None).await;
    r["waiting"].as_u64().unwrap()
}

/// One address took 239 places in 10 s. With `places_per_client_max`, one client network holds
/// at most its share of the room's places, through the API and the page alike; a place that
/// ends frees its share; other networks are not affected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_network_holds_at_most_its_share_of_places() {
    let c = Cluster::start_with(1, "trusted_proxies = [\"127.0.0.1\"]").await;
    let mut config = held();
    config["entry"] = json!({"places_per_client_max": 3});
    c.create_room("p", config).await;
    let (_, room) = c.admin(1, Method::GET, "/v1/rooms/p", None).await;
    assert_eq!(
        room["config"]["entry"]["places_per_client_max"], 3,
        "{room}"
    );
    let join = |from: &'static str| join_from(&c, "p", from);
    let mut tickets = Vec::new();
    for _ in 0..3 {
        let (s, v) = join("203.0.113.7").await;
        assert_eq!(s, StatusCode::OK, "{v}");
        tickets.push(v["ticket"].as_str().unwrap().to_string());
    }
    let (s, v) = join("203.0.113.7").await;
    assert_eq!(s, StatusCode::TOO_MANY_REQUESTS, "{v}");
    assert_eq!(v["error"]["code"], "place_limit");
    // The page says so too.
    let r = c
        .http
        .post(c.node(1).url("/wait/p"))
        .header("x-forwarded-for", "203.0.113.7")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(r.text().await.unwrap().contains("as many places"));
    // Another network is not affected; a place that ends frees its network's share.
    assert_eq!(join("198.51.100.1").await.0, StatusCode::OK);
    let (s, _) = c
        .visitor(1, Method::POST, "/v1/rooms/p/leave", Some(&tickets[0]))
        .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(join("203.0.113.7").await.0, StatusCode::OK);
    // An out-of-range policy is refused with its field.
    let mut bad = held();
    bad["entry"] = json!({"places_per_client_max": 0});
    let (s, v) = c.admin(1, Method::PUT, "/v1/rooms/p", Some(bad)).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    assert_eq!(v["error"]["field"], "entry.places_per_client_max");
}

/// One client held all 100 sessions of a room. With `sessions_per_client_max`, a network at its
/// share of sessions waits, keeping its place, while others go in past it; when one of its
/// sessions ends its next waiter goes in. A share out of range, or a networks window without a
/// networks count, is refused with its field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_network_holds_at_most_its_share_of_sessions() {
    let c = Cluster::start_with(1, "trusted_proxies = [\"127.0.0.1\"]").await;
    let config = json!({"capacity": 3, "admit_per_minute": 600000, "session_ttl_secs": 600,
        "waiter_ttl_secs": 600, "entry": {"sessions_per_client_max": 1}});
    c.create_room("ps", config.clone()).await;
    let join = |from: &'static str| {
        let c = &c;
        async move {
            let (s, v) = join_from(c, "ps", from).await;
            assert_eq!(s, StatusCode::OK, "{v}");
            v
        }
    };
    let office = [join("203.0.113.7").await, join("203.0.113.7").await];
    assert_eq!(office[0]["state"], "admitted", "{}", office[0]);
    assert_eq!(office[1]["state"], "waiting", "{}", office[1]);
    assert_eq!(office[1]["position"], 1);
    // Told it is held, with no estimate, and why on its page.
    assert_eq!(office[1]["held"], true, "{}", office[1]);
    assert!(office[1]["eta_secs"].is_null(), "{}", office[1]);
    let page = c
        .http
        .get(c.node(1).url("/wait/ps"))
        .header(
            "cookie",
            format!("sluice_ticket_ps={}", office[1]["ticket"].as_str().unwrap()),
        )
        .header("x-forwarded-for", "203.0.113.7")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("already holds as many admissions"), "{page}");
    let other = join("198.51.100.1").await;
    assert_eq!(
        other["state"], "admitted",
        "another network goes in past the held one"
    );
    let (s, _) = c
        .visitor(
            1,
            Method::POST,
            "/v1/rooms/ps/leave",
            office[0]["ticket"].as_str(),
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    let (_, v) = c
        .visitor(
            1,
            Method::GET,
            "/v1/rooms/ps/status",
            office[1]["ticket"].as_str(),
        )
        .await;
    assert_eq!(v["state"], "admitted", "{v}");
    for (entry, field) in [
        (
            json!({"sessions_per_client_max": 0}),
            "entry.sessions_per_client_max",
        ),
        (
            json!({"networks_window_secs": 60}),
            "entry.networks_window_secs",
        ),
    ] {
        let mut bad = config.clone();
        bad["entry"] = entry;
        let (s, v) = c.admin(1, Method::PUT, "/v1/rooms/ps", Some(bad)).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
        assert_eq!(v["error"]["field"], field);
    }
}

/// A free place was the bots' first prize. With a proof-of-work rule, a join that takes a place
/// must bring a solved challenge: none is refused before anything is written, a solved one
/// joins once, and a reused, forged, wrong, foreign or oversized one is refused with its code,
/// on every path (JSON API, the page's form, gRPC). A visitor who holds a place resumes it
/// without solving again; the page without JavaScript says why it cannot join.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_place_costs_a_solved_challenge_once() {
    let c = Cluster::start(1).await;
    let mut config = held();
    config["entry"] = json!({"proof_of_work": {"work": 20, "cost": 5}});
    c.create_room("pw", config).await;
    c.create_room("free", held()).await;
    let (_, room) = c.admin(1, Method::GET, "/v1/rooms/pw", None).await;
    assert_eq!(
        room["config"]["entry"]["proof_of_work"]["work"], 20,
        "{room}"
    );
    let join = |body: Value| join_json(&c, "pw", body);
    let challenge = || {
        let (http, url) = (c.http.clone(), c.node(1).url("/v1/rooms/pw/challenge"));
        async move {
            let r = http.get(&url).send().await.unwrap();
            assert_eq!(r.status(), StatusCode::OK);
            assert_eq!(r.headers()["cache-control"], "no-store");
            r.json::<pow::Challenge>().await.unwrap()
        }
    };
    // No solution: refused, and nothing was written.
    let (s, v) = join(json!({})).await;
    assert_eq!(s, StatusCode::PRECONDITION_REQUIRED, "{v}");
    assert_eq!(v["error"]["code"], "challenge_required");
    assert_eq!(waiting(&c).await, 0);
    // Solved: one place.
    let ch = challenge().await;
    assert_eq!(ch.parameters.algorithm, "PBKDF2/SHA-256");
    // Work 20 (10 tries on average): one hex digit of prefix (16 tries) at 3 iterations.
    assert_eq!(
        (ch.parameters.data.work, ch.parameters.data.asked_cost),
        (20, 5)
    );
    assert_eq!((ch.parameters.key_prefix.len(), ch.parameters.cost), (1, 3));
    let (counter, key) = pow::solve(&ch).expect("solvable");
    let good = pow::payload(&ch, counter, &key);
    let (s, v) = join(json!({"altcha": good})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let ticket = v["ticket"].as_str().unwrap().to_string();
    assert_eq!(waiting(&c).await, 1);
    // The room remembers the used challenge, and says how many it remembers.
    let metrics = c.metrics(1).await;
    assert!(
        metrics.contains("sluice_room_challenges_remembered{room=\"pw\"} 1\n"),
        "{metrics}"
    );
    // Reused: refused by the state machine (the signature is still good).
    let (s, v) = join(json!({"altcha": good})).await;
    assert_eq!(s, StatusCode::FORBIDDEN, "{v}");
    assert_eq!(v["error"]["code"], "challenge_invalid");
    assert_eq!(waiting(&c).await, 1);
    // Resuming with the ticket needs no solution.
    let (s, v) = join(json!({"ticket": ticket})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    // Forged (an easier challenge, re-signed by nobody), wrong key, oversized, garbage.
    let ch = challenge().await;
    let (counter, key) = pow::solve(&ch).unwrap();
    let mut easier = ch.clone();
    easier.parameters.data.work = 1;
    let mut wrong = key;
    wrong[0] ^= 1;
    for bad in [
        pow::payload(&easier, counter, &key),
        pow::payload(&ch, counter, &wrong),
        "A".repeat(pow::PAYLOAD_CHARS_MAX + 1),
        "not base64".into(),
    ] {
        let (s, v) = join(json!({"altcha": bad})).await;
        assert_eq!(s, StatusCode::FORBIDDEN, "{v}");
        assert_eq!(v["error"]["code"], "challenge_invalid");
    }
    // A solution for another room is no solution here.
    let mut cfg_other = held();
    cfg_other["entry"] = json!({"proof_of_work": {"work": 20, "cost": 5}});
    c.create_room("pw2", cfg_other).await;
    let r = c
        .http
        .get(c.node(1).url("/v1/rooms/pw2/challenge"))
        .send()
        .await
        .unwrap();
    let other: pow::Challenge = r.json().await.unwrap();
    let (oc, ok) = pow::solve(&other).unwrap();
    let (s, v) = join(json!({"altcha": pow::payload(&other, oc, &ok)})).await;
    assert_eq!(s, StatusCode::FORBIDDEN, "{v}");
    assert_eq!(waiting(&c).await, 1);
    // A room without the rule issues no challenge.
    let r = c
        .http
        .get(c.node(1).url("/v1/rooms/free/challenge"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    assert_eq!(
        r.json::<Value>().await.unwrap()["error"]["code"],
        "challenge_not_required"
    );
    // The page: its join form explains itself without JavaScript; posting it without a
    // solution says why; with one (as the page's script submits it) it joins.
    let page = c
        .http
        .get(c.node(1).url("/wait/pw"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        page.contains("data-pow=\"1\"") && page.contains("<noscript>"),
        "{page}"
    );
    let r = c
        .http
        .post(c.node(1).url("/wait/pw"))
        .form(&[("altcha", "")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::PRECONDITION_REQUIRED);
    let text = r.text().await.unwrap();
    assert!(text.contains("needs JavaScript"), "{text}");
    assert!(text.contains("href=\"/wait/pw?next="), "a way back: {text}");
    let form = [("altcha", pow::payload(&ch, counter, &key))];
    let r = c
        .http
        .post(c.node(1).url("/wait/pw"))
        .form(&form)
        .send()
        .await
        .unwrap();
    // (Posted, redirected to the line: the client follows the redirect.)
    assert_eq!(r.status(), StatusCode::OK);
    assert!(r.url().path().starts_with("/wait/pw"), "{}", r.url());
    assert_eq!(waiting(&c).await, 2);
    // gRPC: the same rule, the same codes.
    let mut g = visitor_client(&c).await;
    let e = g
        .join(sluice_grpc::pb::JoinRequest {
            room: "pw".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::FailedPrecondition, "{e:?}");
    let json = g
        .challenge(sluice_grpc::pb::ChallengeRequest { room: "pw".into() })
        .await
        .unwrap()
        .into_inner()
        .json;
    let ch: pow::Challenge = serde_json::from_str(&json).unwrap();
    let (counter, key) = pow::solve(&ch).unwrap();
    let ok = g
        .join(sluice_grpc::pb::JoinRequest {
            room: "pw".into(),
            altcha: pow::payload(&ch, counter, &key),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(ok.state, "waiting");
    assert_eq!(waiting(&c).await, 3);
    // A room deleted and made again under the same name takes none of the old room's
    // challenges, solved or not.
    let r = c
        .http
        .get(c.node(1).url("/v1/rooms/pw2/challenge"))
        .send()
        .await;
    let old: pow::Challenge = r.unwrap().json().await.unwrap();
    let (oc, ok) = pow::solve(&old).unwrap();
    let (s, _) = c.admin(1, Method::DELETE, "/v1/rooms/pw2", None).await;
    assert!(s.is_success(), "{s}");
    let mut again = held();
    again["entry"] = json!({"proof_of_work": {"work": 20, "cost": 5}});
    c.create_room("pw2", again).await;
    let (s, v) = join_json(&c, "pw2", json!({"altcha": pow::payload(&old, oc, &ok)})).await;
    assert_eq!(s, StatusCode::FORBIDDEN, "{v}");
    assert_eq!(v["error"]["code"], "challenge_invalid");
    // Out of range is refused with its field.
    let mut bad = held();
    bad["entry"] = json!({"proof_of_work": {"work": 0}});
    let (s, v) = c.admin(1, Method::PUT, "/v1/rooms/pw", Some(bad)).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    assert_eq!(v["error"]["field"], "entry.proof_of_work.work");
}

const SHOP_SECRET: &[u8] = b"the shop's identity secret, 32 bytes or more";

/// An assertion for `sub`, signed with `secret`, expiring at `exp`.
fn assertion(secret: &[u8], sub: &str, exp: u64) -> String {
    jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &json!({"sub": sub, "iss": "shop", "exp": exp}),
        &jsonwebtoken::EncodingKey::from_secret(secret),
    )
    .unwrap()
}

/// One person, one place: a room that asks identities refuses a new place without the shop's
/// assertion (or with a forged or expired one), and a second join with the same identity, from
/// another device (no ticket, no cookie), resumes the first place instead of taking another; on
/// the page (the shop links to it with the assertion) and over gRPC alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_identity_holds_one_place() {
    use base64::Engine;
    let secret = base64::engine::general_purpose::STANDARD.encode(SHOP_SECRET);
    let c = Cluster::start_with(
        1,
        &format!("[identity]\nhmac_secret = \"{secret}\"\nissuer = \"shop\"\n"),
    )
    .await;
    let mut config = held();
    config["entry"] = json!({"identity_required": true});
    c.create_room("pw", config).await;
    let (_, room) = c.admin(1, Method::GET, "/v1/rooms/pw", None).await;
    assert_eq!(room["config"]["entry"]["identity_required"], true, "{room}");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let exp = now + 600;
    let join = |body: Value| join_json(&c, "pw", body);
    let (s, v) = join(json!({})).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED, "{v}");
    assert_eq!(v["error"]["code"], "identity_required");
    for bad in [
        assertion(b"another secret, also 32 bytes long", "alice", exp),
        assertion(SHOP_SECRET, "alice", 1),
        // Valid for decades: longer than identity.max_age_secs.
        assertion(SHOP_SECRET, "alice", 4_000_000_000),
        "not a jwt".into(),
    ] {
        let (s, v) = join(json!({ "identity": bad })).await;
        assert_eq!(s, StatusCode::UNAUTHORIZED, "{v}");
        assert_eq!(v["error"]["code"], "identity_invalid");
    }
    assert_eq!(waiting(&c).await, 0);
    let alice = assertion(SHOP_SECRET, "alice", exp);
    let (s, first) = join(json!({ "identity": alice })).await;
    assert_eq!(s, StatusCode::OK, "{first}");
    // Another device: the same place.
    let (s, again) = join(json!({ "identity": alice })).await;
    assert_eq!(s, StatusCode::OK, "{again}");
    assert_eq!(again["visitor_id"], first["visitor_id"]);
    assert_eq!(waiting(&c).await, 1);
    let (s, _) = join(json!({"identity": assertion(SHOP_SECRET, "bob", exp)})).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(waiting(&c).await, 2);
    // The shop's link carries the assertion into the page's join form; posting it resumes.
    let page = c
        .http
        .get(c.node(1).url(&format!("/wait/pw?identity={alice}&next=/")))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        page.contains(&format!("name=\"identity\" value=\"{alice}\"")),
        "{page}"
    );
    let r = c
        .http
        .post(c.node(1).url("/wait/pw"))
        .form(&[("identity", alice.as_str()), ("altcha", "")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(waiting(&c).await, 2);
    let r = c.http.post(c.node(1).url("/wait/pw")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert!(r.text().await.unwrap().contains("signed-in customers"));
    // gRPC: the same place for the same identity.
    let mut g = visitor_client(&c).await;
    let st = g
        .join(sluice_grpc::pb::JoinRequest {
            room: "pw".into(),
            identity: alice.clone(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(st.visitor_id, first["visitor_id"].as_str().unwrap());
    assert_eq!(waiting(&c).await, 2);
}

/// One admitted ticket passed the gate from 200 addresses. With `networks_per_session_max`, a
/// session used through the gate from one client network more than the room allows ends as
/// `shared`: the gate then refuses the ticket everywhere, and the room and `/metrics` count it.
/// Gate checks from the session's own networks keep it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ticket_shared_across_networks_stops_passing_the_gate() {
    let c = Cluster::start_with(1, "trusted_proxies = [\"127.0.0.1\"]").await;
    let config = json!({"capacity": 5, "admit_per_minute": 600000, "session_ttl_secs": 600,
        "waiter_ttl_secs": 600, "entry": {"networks_per_session_max": 2}});
    c.create_room("pw", config).await;
    let r = c
        .http
        .post(c.node(1).url("/v1/rooms/pw/join"))
        .send()
        .await
        .unwrap();
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["state"], "admitted", "{v}");
    let ticket = v["ticket"].as_str().unwrap().to_string();
    let gate = |from: &'static str| {
        let (http, url, t) = (
            c.http.clone(),
            c.node(1).url("/gate/pw/check"),
            ticket.clone(),
        );
        async move {
            http.get(&url)
                .header("authorization", format!("Ticket {t}"))
                .header("x-forwarded-for", from)
                .send()
                .await
                .unwrap()
                .status()
        }
    };
    // Two networks (a phone moving from Wi-Fi to mobile data), each more than once: fine.
    for from in ["203.0.113.1", "198.51.100.2", "203.0.113.1", "198.51.100.2"] {
        assert_eq!(gate(from).await, StatusCode::OK);
    }
    // A third network: the gate answers from local state at once; the visits, applied, end
    // the session (whichever order the three networks are counted in; that two alone keep it
    // is the state machine's test).
    assert_eq!(
        gate("192.0.2.77").await,
        StatusCode::OK,
        "checked from local state"
    );
    wait_for(
        "the shared ticket is refused",
        std::time::Duration::from_secs(10),
        || async { gate("203.0.113.1").await == StatusCode::UNAUTHORIZED },
    )
    .await;
    let (_, room) = c.admin(1, Method::GET, "/v1/rooms/pw", None).await;
    assert_eq!(room["sessions_shared"], 1, "{room}");
    let metrics = c.metrics(1).await;
    assert!(
        metrics.contains("sluice_room_sessions_shared_total{room=\"pw\"} 1"),
        "{metrics}"
    );
}

/// The same ticket shared without the gate: an origin that checks admission tokens itself gets
/// them from status reads (and keeps the session with heartbeats, or the event stream), so
/// those count the networks they come from too. Three networks reading the admitted status end
/// the session as `shared`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ticket_shared_through_status_reads_and_heartbeats_is_counted() {
    let c = Cluster::start_with(1, "trusted_proxies = [\"127.0.0.1\"]").await;
    let config = json!({"capacity": 5, "admit_per_minute": 600000, "session_ttl_secs": 600,
        "waiter_ttl_secs": 600, "entry": {"networks_per_session_max": 2}});
    c.create_room("pw", config).await;
    let v: Value = c
        .http
        .post(c.node(1).url("/v1/rooms/pw/join"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["state"], "admitted", "{v}");
    let ticket = v["ticket"].as_str().unwrap().to_string();
    let read = |from: &'static str, heartbeat: bool| {
        let url = if heartbeat {
            c.node(1).url("/v1/rooms/pw/heartbeat")
        } else {
            c.node(1).url("/v1/rooms/pw/status")
        };
        let req = if heartbeat {
            c.http.post(url)
        } else {
            c.http.get(url)
        };
        let t = ticket.clone();
        async move {
            let r = req
                .header("authorization", format!("Ticket {t}"))
                .header("x-forwarded-for", from)
                .send()
                .await
                .unwrap();
            let v: Value = r.json().await.unwrap();
            v["state"].as_str().unwrap().to_string()
        }
    };
    for (from, heartbeat) in [("203.0.113.1", false), ("198.51.100.2", true)] {
        assert_eq!(read(from, heartbeat).await, "admitted");
    }
    assert_eq!(
        read("192.0.2.77", false).await,
        "admitted",
        "from local state"
    );
    wait_for(
        "the shared session ends",
        std::time::Duration::from_secs(10),
        || async { read("203.0.113.1", false).await == "rejected" },
    )
    .await;
    let (_, room) = c.admin(1, Method::GET, "/v1/rooms/pw", None).await;
    assert_eq!(room["sessions_shared"], 1, "{room}");
}

/// A local stand-in for a `siteverify` endpoint (Turnstile's protocol): `success` is true for
/// the token `good` sent with the secret `s3cret`.
const VERIFIER: &str = r#"
import http.server, json, sys, time, urllib.parse
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        n = int(self.headers.get("content-length", 0))
        f = urllib.parse.parse_qs(self.rfile.read(n).decode())
        if self.path.startswith("/throttled"):
            self.send_response(429)
            self.send_header("content-length", "0")
            self.end_headers()
            return
        if self.path.startswith("/slow"):
            time.sleep(1.5)
        ok = f.get("secret") == ["s3cret"] and f.get("response") == ["good"]
        body = json.dumps({"success": ok}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"#;

/// An external challenge (Turnstile-, hCaptcha-, reCAPTCHA-style): a new place needs a token
/// the provider accepts, asked of a local verifier; a refused token is `challenge_invalid`;
/// when the provider cannot be reached, a room that fails closed answers 503
/// `challenge_unavailable` and one that fails open lets the join through. A room cannot name a
/// provider the nodes do not know.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_external_challenge_is_verified_with_its_provider() {
    if !prerequisites(
        "entry::an_external_challenge_is_verified_with_its_provider",
        &[Need::Program("python3")],
    ) {
        return;
    }
    let port = free_port();
    let mut verifier = std::process::Command::new(program("python3"))
        .args(["-c", VERIFIER, &port.to_string()])
        .spawn()
        .unwrap();
    let closed = free_port();
    let c = Cluster::start_with(
        1,
        &format!(
            "[[challenge_providers]]\nname = \"local\"\nverify_url = \"http://127.0.0.1:{port}/siteverify\"\nsecret = \"s3cret\"\ntimeout_ms = 2000\n\n\
             [[challenge_providers]]\nname = \"down\"\nverify_url = \"http://127.0.0.1:{closed}/siteverify?key=PROVIDERKEY7\"\nsecret = \"x\"\ntimeout_ms = 300\n\n\
             [[challenge_providers]]\nname = \"throttled\"\nverify_url = \"http://127.0.0.1:{port}/throttled\"\nsecret = \"s3cret\"\n\n\
             [[challenge_providers]]\nname = \"lenient\"\nverify_url = \"http://127.0.0.1:{port}/throttled\"\nsecret = \"s3cret\"\nerrors_fail_open = true\n\n\
             [[challenge_providers]]\nname = \"slow\"\nverify_url = \"http://127.0.0.1:{port}/slow\"\nsecret = \"s3cret\"\nconcurrent_max = 2\n"
        ),
    )
    .await;
    wait_for(
        "the verifier",
        std::time::Duration::from_secs(10),
        || async { std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() },
    )
    .await;
    let room = |provider: &str, fail_open: bool| {
        let mut r = held();
        r["entry"] = json!({"external_challenge": {"provider": provider, "fail_open": fail_open}});
        r
    };
    c.create_room("pw", room("local", false)).await;
    c.create_room("closed", room("down", false)).await;
    c.create_room("open", room("down", true)).await;
    let join = |room: &'static str, body: Value| join_json(&c, room, body);
    let (s, v) = join("pw", json!({})).await;
    assert_eq!(s, StatusCode::PRECONDITION_REQUIRED, "{v}");
    assert_eq!(v["error"]["code"], "challenge_required");
    let (s, v) = join("pw", json!({"challenge_token": "bad"})).await;
    assert_eq!(s, StatusCode::FORBIDDEN, "{v}");
    assert_eq!(v["error"]["code"], "challenge_invalid");
    assert_eq!(waiting(&c).await, 0);
    let (s, v) = join("pw", json!({"challenge_token": "good"})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(waiting(&c).await, 1);
    // A page hosting the provider's widget posts the widget's own field.
    let r = c
        .http
        .post(c.node(1).url("/wait/pw"))
        .form(&[("cf-turnstile-response", "good")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(waiting(&c).await, 2);
    // The provider is down: fail closed, fail open.
    let (s, v) = join("closed", json!({"challenge_token": "good"})).await;
    assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE, "{v}");
    assert_eq!(v["error"]["code"], "challenge_unavailable");
    // Nothing of the provider (its URL, which may carry a key) reaches the visitor.
    let text = v.to_string();
    assert!(
        !text.contains("PROVIDERKEY7") && !text.contains("127.0.0.1"),
        "{text}"
    );
    let (s, v) = join("open", json!({"challenge_token": "anything"})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    // A provider that throttles (429, as after a flood of junk tokens) refuses, even in a room
    // that fails open, unless its configuration says that errors count as unreachable.
    c.create_room("throttled", room("throttled", true)).await;
    c.create_room("lenient", room("lenient", true)).await;
    let (s, v) = join("throttled", json!({"challenge_token": "good"})).await;
    assert_eq!(s, StatusCode::FORBIDDEN, "{v}");
    assert_eq!(v["error"]["code"], "challenge_invalid");
    let (s, v) = join("lenient", json!({"challenge_token": "good"})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    // At most `concurrent_max` verifications in flight with a provider: the rest are answered
    // busy at once, not let through (the room fails open) and not queued.
    c.create_room("slow", room("slow", true)).await;
    let joins = (0..6).map(|_| join("slow", json!({"challenge_token": "good"})));
    let answers = futures::future::join_all(joins).await;
    let ok = answers.iter().filter(|(s, _)| *s == StatusCode::OK).count();
    let busy = answers
        .iter()
        .filter(|(s, v)| *s == StatusCode::SERVICE_UNAVAILABLE && v["error"]["code"] == "busy")
        .count();
    assert_eq!((ok, busy), (2, 4), "{answers:?}");
    // A provider no node knows is refused with its field.
    let (s, v) = c
        .admin(1, Method::PUT, "/v1/rooms/pw", Some(room("nobody", false)))
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    assert_eq!(v["error"]["field"], "entry.external_challenge.provider");
    verifier.kill().unwrap();
    verifier.wait().unwrap();
}

/// Issuing a challenge derives nothing: at the largest cost a rule may ask, a burst of requests
/// for challenges is answered at once, every one of them (no `busy`), while the node answers
/// everything else. Checking solutions at that cost takes at most `pow::DERIVATIONS_MAX` blocking
/// threads: more wait their turn (and join), and health answers do not wait for them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn challenges_at_the_largest_cost_cannot_take_the_node() {
    let c = Cluster::start_with(
        1,
        "[limits]\nvisitor_requests_per_second = 100000\nvisitor_burst = 100000",
    )
    .await;
    let mut config = held();
    let cost = sluice_statemachine::policy::POW_COST_MAX;
    config["entry"] = json!({"proof_of_work": {"work": 2, "cost": cost}});
    c.create_room("pw", config).await;
    let asks = (0..200).map(|_| {
        let (http, url) = (c.http.clone(), c.node(1).url("/v1/rooms/pw/challenge"));
        async move {
            let r = http.get(&url).send().await.unwrap();
            assert_eq!(r.status(), StatusCode::OK);
            r.json::<pow::Challenge>().await.unwrap()
        }
    });
    let challenges = futures::future::join_all(asks).await;
    assert_eq!(challenges.len(), 200);
    // Work 2: no prefix, one try, at the largest cost (each key about a few ms to derive).
    let solved: Vec<String> = challenges[..pow::DERIVATIONS_MAX * 3]
        .iter()
        .map(|ch| {
            assert_eq!(ch.parameters.cost, cost);
            let (counter, key) = pow::solve(ch).unwrap();
            pow::payload(ch, counter, &key)
        })
        .collect();
    let joins = solved.into_iter().map(|altcha| {
        let c = &c;
        async move { join_json(c, "pw", json!({"altcha": altcha})).await }
    });
    let all = futures::future::join_all(joins);
    tokio::pin!(all);
    // Health answers do not wait for the derivations.
    let health = async {
        for _ in 0..5 {
            let t = std::time::Instant::now();
            let r = c.http.get(c.node(1).url("/healthz")).send().await.unwrap();
            assert_eq!(r.status(), StatusCode::OK);
            assert!(
                t.elapsed() < std::time::Duration::from_millis(200),
                "{:?}",
                t.elapsed()
            );
        }
    };
    let (answers, ()) = tokio::join!(all, health);
    for (s, v) in &answers {
        assert_eq!(*s, StatusCode::OK, "{v}");
    }
    assert_eq!(waiting(&c).await, pow::DERIVATIONS_MAX as u64 * 3);
}
