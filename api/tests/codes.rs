//! Access codes, priority lanes and invite-only rooms against real `sluice serve` processes,
//! tried as an operator (ctl, API), a visitor (API, waiting page, two tabs) and an attacker
//! (guessed, spent, garbage and oversized codes) would.

mod common;

use common::*;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use std::process::Command;
use std::time::{Duration, Instant};

fn ctl(c: &Cluster, id: u64, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["ctl", "--url", &c.node(id).url(""), "--token", TOKEN])
        .args(args)
        .output()
        .unwrap()
}

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// A join on node `id` with a JSON body (ticket, code).
async fn join_with(c: &Cluster, id: u64, room: &str, body: Value) -> (StatusCode, Value) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = c
            .http
            .post(c.node(id).url(&format!("/v1/rooms/{room}/join")))
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = r.status();
        let v: Value = r.json().await.unwrap_or(Value::Null);
        if status != StatusCode::SERVICE_UNAVAILABLE || Instant::now() > deadline {
            return (status, v);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A dashboard form posted to node 1 with the session `cookie`; a done action's redirect to the
/// room's page is followed (post, redirect, get): the page's status and text.
async fn dashboard_post(
    c: &Cluster,
    http: &reqwest::Client,
    cookie: &str,
    path: &str,
    form: &[(&str, &str)],
) -> (StatusCode, String) {
    let r = http
        .post(c.node(1).url(path))
        .header("cookie", cookie)
        .form(form)
        .send()
        .await
        .unwrap();
    if r.status() != StatusCode::SEE_OTHER {
        return (r.status(), r.text().await.unwrap());
    }
    let to = r.headers()["location"].to_str().unwrap().to_string();
    let r = http
        .get(c.node(1).url(&to))
        .header("cookie", cookie)
        .send()
        .await
        .unwrap();
    (r.status(), r.text().await.unwrap())
}

async fn applied_index(c: &Cluster, id: u64) -> u64 {
    let (_, v) = c.admin(id, Method::GET, "/v1/cluster", None).await;
    v["applied_index"].as_u64().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codes_place_visitors_in_their_lane_once_each_and_guesses_cost_nothing() {
    let c = Cluster::start_with(
        3,
        "[limits]\nvisitor_requests_per_second = 100000\nvisitor_burst = 100000",
    )
    .await;
    // The public line opens in an hour; the presale lane now. One place.
    let mut config = room_config(1);
    config["opens_at"] = json!(now_secs() + 3_600);
    config["lanes"] = json!([{"name": "presale", "opens_at": now_secs() - 1}]);
    c.create_room("sale", config).await;
    let (_, room) = c
        .admin(2, Method::GET, "/v1/rooms/sale?consistent=true", None)
        .await;
    assert_eq!(room["config"]["lanes"][0]["name"], "presale", "{room}");

    // The operator makes three single-use codes for the presale with the CLI, as CSV.
    let out = ctl(
        &c,
        2,
        &[
            "codes",
            "create",
            "--room",
            "sale",
            "--count",
            "3",
            "--lane",
            "presale",
            "--label",
            "fan club",
            "--expires",
            "7d",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let csv = String::from_utf8(out.stdout).unwrap();
    let mut lines = csv.lines();
    assert_eq!(lines.next(), Some("code,lane,uses,expires_at"));
    let codes: Vec<String> = lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            assert_eq!(&f[1..3], ["presale", "1"], "{l}");
            // When the codes expire, as a date in UTC (RFC 3339), not unix seconds.
            assert_eq!(f[3].len(), 20, "{l}");
            assert!(f[3].ends_with('Z'), "{l}");
            assert!(
                *f[3] > *sluice_ops::civil::iso_utc(now_secs() + 6 * 86_400),
                "{l}"
            );
            f[0].to_string()
        })
        .collect();
    assert_eq!(codes.len(), 3);
    assert!(String::from_utf8_lossy(&out.stderr).contains("batch 0"));
    // A lane the room does not have is refused, with the field named.
    let bad = ctl(
        &c,
        1,
        &[
            "codes", "create", "--room", "sale", "--count", "1", "--lane", "vip",
        ],
    );
    assert_eq!(bad.status.code(), Some(4));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("invalid_field"));

    // The first holder is admitted at once (the presale is open, a place is free).
    let (s, a) = join_with(&c, 3, "sale", json!({"code": codes[0]})).await;
    assert_eq!(
        (s, a["state"].as_str()),
        (StatusCode::OK, Some("admitted")),
        "{a}"
    );
    // The second waits in the presale lane; typed in lower case, without dashes.
    let typed = codes[1].replace('-', "").to_lowercase();
    let (s, b) = join_with(&c, 2, "sale", json!({"code": typed})).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(
        (b["lane"].as_str(), b["position"].as_u64()),
        (Some("presale"), Some(1)),
        "{b}"
    );
    // Two tabs of the same visitor redeem it again at once: one place, one use.
    let ticket = b["ticket"].as_str().unwrap().to_string();
    let tab = json!({"ticket": ticket, "code": codes[1]});
    let (t1, t2) = tokio::join!(
        join_with(&c, 1, "sale", tab.clone()),
        join_with(&c, 3, "sale", tab)
    );
    for (s, v) in [t1, t2] {
        assert_eq!(s, StatusCode::OK, "{v}");
        assert_eq!(v["visitor_id"], b["visitor_id"]);
        assert_eq!(v["lane"], "presale");
    }
    // A public visitor waits behind the lane, and is told so.
    let p = c.join(1, "sale", None).await;
    assert_eq!(
        (p["lane"].as_str(), p["ahead"].as_u64()),
        (None, Some(1)),
        "{p}"
    );

    // Spent, garbage, oversized and guessed codes are refused, and none costs a log entry.
    // Counted from the public visitor's join on: node 1 forwarded it and answered once the
    // leader applied it, and may not have applied it itself yet.
    let before = applied_index(&c, 1)
        .await
        .max(p["applied_index"].as_u64().expect("a join's applied index"));
    let joined_before = c
        .admin(1, Method::GET, "/v1/rooms/sale?consistent=true", None)
        .await
        .1["totals"]["joined"]
        .clone();
    let (s, v) = join_with(&c, 1, "sale", json!({"code": codes[1]})).await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (StatusCode::GONE, Some("code_used_up")),
        "{v}"
    );
    for garbage in ["hello", "'; DROP TABLE codes; --", &"A".repeat(10_000)] {
        let (s, v) = join_with(&c, 1, "sale", json!({"code": garbage})).await;
        assert_eq!(
            (s, v["error"]["code"].as_str()),
            (StatusCode::FORBIDDEN, Some("code_invalid")),
            "{v}"
        );
    }
    for n in 0..50u32 {
        let guess = format!("{:016X}", 0xABCD_0000_0000u64 + u64::from(n))
            .replace(['I', 'L', 'O', 'U'], "7");
        let (s, v) = join_with(&c, 1 + u64::from(n % 3), "sale", json!({"code": guess})).await;
        assert_eq!(
            (s, v["error"]["code"].as_str()),
            (StatusCode::FORBIDDEN, Some("code_invalid")),
            "{v}"
        );
    }
    // Nothing was proposed: entries since, if any, are a new leader's blank ones (two cores
    // shared by several test clusters can cost a leader its term).
    let (_, log) = c
        .admin(
            1,
            Method::GET,
            &format!("/v1/cluster/log?from={}", before + 1),
            None,
        )
        .await;
    let proposed: Vec<&Value> = log["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| !e["proposal"].is_null())
        .collect();
    assert!(proposed.is_empty(), "refused codes wrote {proposed:?}");
    let (_, room) = c
        .admin(1, Method::GET, "/v1/rooms/sale?consistent=true", None)
        .await;
    assert_eq!(room["totals"]["joined"], joined_before);

    // A public waiter who is sent a code moves to the end of the presale lane.
    let moved = json!({"ticket": p["ticket"], "code": codes[2]});
    let (s, p2) = join_with(&c, 2, "sale", moved).await;
    assert_eq!(s, StatusCode::OK, "{p2}");
    assert_eq!(
        (p2["lane"].as_str(), p2["position"].as_u64()),
        (Some("presale"), Some(2)),
        "{p2}"
    );
    assert_eq!(p2["visitor_id"], p["visitor_id"]);

    // The operator sees counts and uses, never the codes.
    let (_, list) = c
        .admin(3, Method::GET, "/v1/rooms/sale/codes?consistent=true", None)
        .await;
    let batch = &list["batches"][0];
    assert_eq!(
        (
            batch["codes"].as_u64(),
            batch["used"].as_u64(),
            batch["used_up"].as_u64(),
            batch["label"].as_str()
        ),
        (Some(3), Some(3), Some(3), Some("fan club")),
        "{list}"
    );
    assert!(
        !list.to_string().contains(&codes[0]),
        "a listing shows no code"
    );
    let (_, room) = c
        .admin(1, Method::GET, "/v1/rooms/sale?consistent=true", None)
        .await;
    assert_eq!(
        room["lanes"],
        json!([{"name": "presale", "open": true, "waiting": 2, "joined": 3, "admitted": 1, "redeemed": 3}]),
        "{room}"
    );
    assert_eq!(
        (room["codes"].as_u64(), room["totals"]["joined"].as_u64()),
        (Some(3), Some(3))
    );

    // A reader that goes away (`ctl codes list | head -c 0`) is no failure, and no panic.
    let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["ctl", "--url", &c.node(1).url(""), "--token", TOKEN])
        .args(["codes", "list", "--room", "sale"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && !err.contains("panicked"), "{err}");

    // Ended, the batch's codes work no more; the places they gave stay.
    let end = ctl(&c, 1, &["codes", "end", "--room", "sale", "--batch", "0"]);
    assert!(
        end.status.success(),
        "{}",
        String::from_utf8_lossy(&end.stderr)
    );
    // (A node that has not applied the end yet still refuses it, as spent.)
    wait_for(
        "every node to know the batch ended",
        Duration::from_secs(10),
        || async {
            let mut invalid = true;
            for id in 1..=3 {
                let (s, v) = join_with(&c, id, "sale", json!({"code": codes[2]})).await;
                assert!(s == StatusCode::FORBIDDEN || s == StatusCode::GONE, "{v}");
                invalid &= s == StatusCode::FORBIDDEN;
            }
            invalid
        },
    )
    .await;
    let b_now = c.status(3, "sale", &ticket).await;
    assert_eq!(b_now["lane"], "presale");
    let (s, v) = c
        .admin(1, Method::DELETE, "/v1/rooms/sale/codes/0", None)
        .await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("code_batch_not_found"))
    );
    // Too many at once, none at all, uses out of range: refused with the field named.
    for (body, field) in [
        (json!({"count": 100_001}), "count"),
        (json!({}), "count"),
        (json!({"count": 1, "uses": 0}), "uses"),
        (json!({"count": 2, "identities": ["a"]}), "count"),
        (json!({"count": 1, "label": "x".repeat(65)}), "label"),
    ] {
        let (s, v) = c
            .admin(1, Method::POST, "/v1/rooms/sale/codes", Some(body))
            .await;
        assert_eq!(
            (s, v["error"]["field"].as_str()),
            (StatusCode::BAD_REQUEST, Some(field)),
            "{v}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invite_only_rooms_take_code_holders_from_the_page_and_the_api_in_four_languages() {
    let c = Cluster::start(1).await;
    let mut config = room_config(1);
    config["entry"] = json!({"invite_only": true});
    config["paused"] = json!(true);
    c.create_room("club", config).await;
    let (s, made) = c
        .admin(
            1,
            Method::POST,
            "/v1/rooms/club/codes",
            Some(json!({"count": 2, "uses": 2})),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{made}");
    let code = made["codes"][0].as_str().unwrap().to_string();

    // Without a code: refused, and no place taken.
    let (s, v) = c
        .visitor(1, Method::POST, "/v1/rooms/club/join", None)
        .await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (StatusCode::FORBIDDEN, Some("invite_only")),
        "{v}"
    );
    let (_, room) = c.admin(1, Method::GET, "/v1/rooms/club", None).await;
    assert_eq!(room["waiting"], 0);

    // The page asks for the code in each language and does not join by itself.
    let http = no_redirect();
    for (lang, words) in [
        ("en", "Access code"),
        ("de", "Zugangscode"),
        ("fr", "Code d’accès"),
        ("es", "Código de acceso"),
    ] {
        let page = http
            .get(c.node(1).url("/wait/club"))
            .header("accept-language", lang)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let words = words.replace("&#39;", "'");
        assert!(page.contains(&words), "{lang}: {page}");
        assert!(
            page.contains("data-manual=\"1\"") && page.contains(" required"),
            "{page}"
        );
    }
    // Posted without a code, the page says so, with the field to try again.
    let r = http
        .post(c.node(1).url("/wait/club"))
        .form(&[("altcha", "")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    let page = r.text().await.unwrap();
    assert!(
        page.contains("by invitation only") && page.contains("name=\"code\""),
        "{page}"
    );
    // The invitation's link fills the field in; the page then joins with it.
    let page = http
        .get(c.node(1).url(&format!("/wait/club?code={code}")))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        page.contains(&format!("value=\"{code}\"")) && page.contains("data-manual=\"\""),
        "{page}"
    );
    let r = http
        .post(c.node(1).url("/wait/club?next=/shop"))
        .form(&[("code", code.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let cookie = r.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_string();
    let page = http
        .get(c.node(1).url("/wait/club?next=/shop"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("You are in line"), "{page}");
    // No estimate, and the page says why: the line is paused; then, the site is down.
    assert!(page.contains("The line is paused for the moment"), "{page}");
    c.admin(
        1,
        Method::POST,
        "/v1/rooms/club/health",
        Some(json!({"health": "down"})),
    )
    .await;
    c.admin(1, Method::POST, "/v1/rooms/club/resume", None)
        .await;
    let page = http
        .get(c.node(1).url("/wait/club?next=/shop"))
        .header("cookie", &cookie)
        .header("accept-language", "fr")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("Le site n’accueille pas"), "{page}");
    c.admin(1, Method::POST, "/v1/rooms/club/pause", None).await;
    // A wrong code on the page: a clear message, the field again.
    let r = http
        .post(c.node(1).url("/wait/club"))
        .form(&[("code", "ZZZZ-ZZZZ-ZZZZ-ZZZZ")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    assert!(r.text().await.unwrap().contains("not valid here"));
    // The second use of the two-use code, through the API; a third is refused.
    let (s, v) = join_with(&c, 1, "club", json!({"code": code})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let (s, v) = join_with(&c, 1, "club", json!({"code": code})).await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (StatusCode::GONE, Some("code_used_up")),
        "{v}"
    );
    let (_, room) = c.admin(1, Method::GET, "/v1/rooms/club", None).await;
    assert_eq!(room["waiting"], 2);
}

/// A presale of 1,000 code holders and a public line of 10,000 joining together: every holder
/// is admitted before any public visitor, and neither capacity nor the admission rate is
/// exceeded at any moment looked at.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_presale_of_a_thousand_goes_before_a_public_line_of_ten_thousand() {
    const HOLDERS: usize = 1_000;
    const PUBLIC: usize = 10_000;
    const RATE_PER_MIN: u64 = 12_000;
    let c = Cluster::start_with(
        3,
        "[limits]\nvisitor_requests_per_second = 100000\nvisitor_burst = 100000",
    )
    .await;
    let mut config = room_config(HOLDERS as u64);
    config["admit_per_minute"] = json!(RATE_PER_MIN);
    config["paused"] = json!(true);
    config["lanes"] = json!([{"name": "presale"}]);
    c.create_room("drop", config).await;
    let (s, made) = c
        .admin(
            1,
            Method::POST,
            "/v1/rooms/drop/codes",
            Some(json!({"count": HOLDERS, "lane": "presale"})),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED);
    let codes: Vec<String> = made["codes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().to_string())
        .collect();

    // Everyone joins at once, holders spread among the public, on all three nodes.
    let urls: Vec<String> = (1..=3)
        .map(|id| c.node(id).url("/v1/rooms/drop/join"))
        .collect();
    let mut bodies: Vec<Value> = (0..PUBLIC).map(|_| json!({})).collect();
    for (i, code) in codes.iter().enumerate() {
        bodies.insert(i * (PUBLIC / HOLDERS) + i, json!({"code": code}));
    }
    let http = c.http.clone();
    let results = futures_join(http, urls, bodies, 48).await;
    let holders: Vec<String> = results
        .iter()
        .filter(|(h, _)| *h)
        .map(|(_, t)| t.clone())
        .collect();
    assert_eq!((holders.len(), results.len()), (HOLDERS, HOLDERS + PUBLIC));
    let (_, room) = c
        .admin(1, Method::GET, "/v1/rooms/drop?consistent=true", None)
        .await;
    assert_eq!(
        room["waiting"].as_u64(),
        Some((HOLDERS + PUBLIC) as u64),
        "{room}"
    );
    assert_eq!(room["lanes"][0]["waiting"].as_u64(), Some(HOLDERS as u64));

    // Open: watch the room until the presale has gone in.
    let resumed = Instant::now();
    let (s, _) = c
        .admin(1, Method::POST, "/v1/rooms/drop/resume", None)
        .await;
    assert!(s.is_success());
    let burst = RATE_PER_MIN.div_ceil(60);
    let last = std::cell::Cell::new(0);
    wait_for("the presale to go in", Duration::from_secs(60), || {
        let c = &c;
        let last = &last;
        async move {
            let (_, r) = c.admin(2, Method::GET, "/v1/rooms/drop", None).await;
            let admitted = r["totals"]["admitted"].as_u64().unwrap();
            let from_lane = r["lanes"][0]["admitted"].as_u64().unwrap();
            let active = r["active"].as_u64().unwrap();
            assert_eq!(
                admitted, from_lane,
                "a public visitor went in before the presale: {r}"
            );
            assert!(active <= HOLDERS as u64, "over capacity: {r}");
            // The rate, with a second of slack for when the resume was applied.
            let allowed =
                burst + RATE_PER_MIN * (resumed.elapsed().as_millis() as u64 + 1_000) / 60_000;
            assert!(
                admitted <= allowed,
                "{admitted} admitted, at most {allowed} allowed"
            );
            assert!(admitted >= last.get());
            last.set(admitted);
            from_lane == HOLDERS as u64
        }
    })
    .await;
    // The room is full of holders; the public line waits whole.
    let (_, r) = c
        .admin(3, Method::GET, "/v1/rooms/drop?consistent=true", None)
        .await;
    assert_eq!(
        (
            r["active"].as_u64(),
            r["waiting"].as_u64(),
            r["lanes"][0]["waiting"].as_u64()
        ),
        (Some(HOLDERS as u64), Some(PUBLIC as u64), Some(0)),
        "{r}"
    );
    for t in holders.iter().step_by(97) {
        assert_eq!(c.status(1, "drop", t).await["state"], "admitted");
    }
    // As holders leave, the public line moves.
    let (s, _) = c
        .admin(
            1,
            Method::POST,
            "/v1/rooms/drop/revoke",
            Some(json!({"all": true})),
        )
        .await;
    assert!(s.is_success());
    wait_for(
        "the public line to move",
        Duration::from_secs(30),
        || async {
            let (_, r) = c.admin(1, Method::GET, "/v1/rooms/drop", None).await;
            r["active"].as_u64() > Some(0)
                && r["lanes"][0]["admitted"].as_u64() == Some(HOLDERS as u64)
        },
    )
    .await;
}

/// Joins with each body, spread over `urls`, `width` at a time: (brought a code, ticket).
async fn futures_join(
    http: reqwest::Client,
    urls: Vec<String>,
    bodies: Vec<Value>,
    width: usize,
) -> Vec<(bool, String)> {
    use futures::stream::{self, StreamExt};
    stream::iter(bodies.into_iter().enumerate())
        .map(|(i, body)| {
            let http = http.clone();
            let url = urls[i % urls.len()].clone();
            async move {
                let holder = body.get("code").is_some();
                let mut body = body;
                for _ in 0..100 {
                    let r = http.post(&url).json(&body).send().await;
                    if let Ok(r) = r {
                        let status = r.status();
                        let v: Value = r.json().await.unwrap_or(Value::Null);
                        if status == StatusCode::OK {
                            return (holder, v["ticket"].as_str().unwrap().to_string());
                        }
                        assert!(
                            status.is_server_error() || status == StatusCode::TOO_MANY_REQUESTS,
                            "join {i}: {status} {v}"
                        );
                        // A join that may still be applied: the retry resumes its place.
                        if let Some(t) = v["error"]["ticket"].as_str() {
                            body["ticket"] = json!(t);
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                panic!("join {i} never succeeded");
            }
        })
        .buffer_unordered(width)
        .collect()
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lanes_and_codes_over_grpc() {
    use sluice_grpc::pb;
    let c = Cluster::start(1).await;
    let channel = tonic::transport::Channel::from_shared(format!("http://{}", c.node(1).grpc))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut admin = pb::admin_client::AdminClient::new(channel.clone());
    fn authorized<T>(m: T) -> tonic::Request<T> {
        let mut req = tonic::Request::new(m);
        req.metadata_mut()
            .insert("authorization", format!("Bearer {TOKEN}").parse().unwrap());
        req
    }
    let room = admin
        .put_room(authorized(pb::PutRoomRequest {
            room: "g".into(),
            config: Some(pb::RoomConfig {
                capacity: 1,
                paused: true,
                lanes: vec![pb::Lane {
                    name: "members".into(),
                    share: Some(0.25),
                    order: "lottery".into(),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            create_only: true,
        }))
        .await
        .unwrap()
        .into_inner()
        .room
        .unwrap();
    let lane = &room.config.unwrap().lanes[0];
    assert_eq!(
        (lane.name.as_str(), lane.share, lane.order.as_str()),
        ("members", Some(0.25), "lottery")
    );
    // Without the operator's token: refused.
    let refused = admin
        .create_codes(pb::CreateCodesRequest {
            room: "g".into(),
            count: 1,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::Unauthenticated);
    let made = admin
        .create_codes(authorized(pb::CreateCodesRequest {
            room: "g".into(),
            count: 2,
            lane: "members".into(),
            ..Default::default()
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(made.codes.len(), 2);
    let mut v = pb::visitor_client::VisitorClient::new(channel);
    let joined = v
        .join(pb::JoinRequest {
            room: "g".into(),
            code: made.codes[0].clone(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (joined.state.as_str(), joined.lane.as_deref()),
        ("waiting", Some("members"))
    );
    let spent = v
        .join(pb::JoinRequest {
            room: "g".into(),
            code: made.codes[0].clone(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(spent.code(), tonic::Code::FailedPrecondition);
    assert_eq!(
        spent.metadata().get("sluice-error-code").unwrap(),
        "code_used_up"
    );
    let list = admin
        .list_codes(authorized(pb::RoomRef {
            room: "g".into(),
            consistent: false,
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!((list.batches[0].codes, list.batches[0].used), (2, 1));
    let ended = admin
        .end_codes(authorized(pb::EndCodesRequest {
            room: "g".into(),
            batch: 0,
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(ended.count, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_sets_lanes_makes_codes_and_shows_their_use() {
    let c = Cluster::start(1).await;
    let mut config = room_config(1);
    config["paused"] = json!(true);
    c.create_room("d", config).await;
    let http = no_redirect();
    let cookie = c.dashboard_cookie(&http, 1).await;
    let get_page = || async {
        http.get(c.node(1).url("/admin/rooms/d"))
            .header("cookie", &cookie)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    };
    let page = get_page().await;
    let csrf = csrf_of(&page);
    // The configuration form takes lanes, one per line; the room keeps the rest.
    let mut form: Vec<(String, String)> = vec![
        ("csrf".into(), csrf.clone()),
        ("capacity".into(), "1".into()),
        ("admit_per_minute".into(), "600".into()),
        ("admit_burst".into(), "0".into()),
        ("session_ttl_secs".into(), "600".into()),
        ("waiter_ttl_secs".into(), "600".into()),
        ("max_waiting".into(), "1000".into()),
        ("paused".into(), "on".into()),
        ("slow_factor".into(), "0.5".into()),
        ("entry.client_prefix_v4".into(), "32".into()),
        ("entry.client_prefix_v6".into(), "64".into()),
        ("line.show_waiting".into(), "on".into()),
        ("line.show_positions".into(), "on".into()),
        ("bypass.staff_tokens".into(), "on".into()),
        (
            "lanes".into(),
            "presale opens=1767225600\nmembers share=1 lottery".into(),
        ),
    ];
    let r = http
        .post(c.node(1).url("/admin/rooms/d/config"))
        .header("cookie", &cookie)
        .form(&form)
        .send()
        .await
        .unwrap();
    let (s, html) = (r.status(), r.text().await.unwrap());
    assert_eq!(
        s,
        StatusCode::BAD_REQUEST,
        "shares for some lanes only: {html}"
    );
    assert!(html.contains("every lane a share, or none"), "{html}");
    form.last_mut().unwrap().1 = "presale opens=1767225600\nmembers lottery".into();
    let r = http
        .post(c.node(1).url("/admin/rooms/d/config"))
        .header("cookie", &cookie)
        .form(&form)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(r.headers()["location"], "/admin/rooms/d");
    let (_, room) = c.admin(1, Method::GET, "/v1/rooms/d", None).await;
    assert_eq!(
        room["config"]["lanes"],
        json!([{"name": "presale", "opens_at": 1767225600u64, "order": "fifo"}, {"name": "members", "order": "lottery"}]),
        "{room}"
    );
    // Codes for the members, made on the page, shown once (after the redirect).
    let (s, html) = dashboard_post(
        &c,
        &http,
        &cookie,
        "/admin/rooms/d/action",
        &[
            ("csrf", &csrf),
            ("action", "codes_create"),
            ("count", "3"),
            ("uses", "1"),
            ("lane", "members"),
            ("expires_hours", "24"),
            ("label", "newsletter"),
        ],
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    assert!(html.contains("3 codes made (batch 0)"), "{html}");
    // One a line to copy, and as invitation links that fill the code in.
    let list = html
        .split("<textarea id=\"made-list\" readonly rows=\"3\">")
        .nth(1)
        .unwrap()
        .split('<')
        .next()
        .unwrap();
    let made: Vec<&str> = list.lines().collect();
    assert_eq!(made.len(), 3, "{list}");
    let code = made[0].to_string();
    assert_eq!(code.len(), 19, "{code}");
    assert!(
        html.contains(&format!("/wait/d?code={code}\n")),
        "an invitation link: {html}"
    );
    assert!(
        html.contains("data-lane=\"members\" data-uses=\"1\""),
        "{html}"
    );
    // A validity past any sense (it overflowed before), none, or not a number: refused with
    // the field's name, and no batch is made.
    for hours in ["18446744073709551615", "0", "-1", "1e9", "87601"] {
        let (s, html) = dashboard_post(
            &c,
            &http,
            &cookie,
            "/admin/rooms/d/action",
            &[
                ("csrf", &csrf),
                ("action", "codes_create"),
                ("count", "1"),
                ("uses", "1"),
                ("expires_hours", hours),
                ("label", "too long"),
            ],
        )
        .await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{hours}: {html}");
        assert!(html.contains("expires_hours"), "{hours}: {html}");
    }
    let (s, v) = join_with(&c, 1, "d", json!({"code": code})).await;
    assert_eq!(
        (s, v["lane"].as_str()),
        (StatusCode::OK, Some("members")),
        "{v}"
    );
    // Reloaded, the page shows the lane's counts and the batch's use, never the codes, and
    // repeats nothing.
    let page = get_page().await;
    assert!(
        page.contains("<td>members</td><td>open</td><td>1</td><td>1</td><td>0</td><td>1</td>"),
        "{page}"
    );
    assert!(
        page.contains(
            "<td>newsletter</td><td>members</td><td>1</td><td>3</td><td>1</td><td>1</td>"
        ),
        "{page}"
    );
    assert!(
        !page.contains(&code) && !page.contains("codes made"),
        "shown once only"
    );
    let (_, list) = c.admin(1, Method::GET, "/v1/rooms/d/codes", None).await;
    assert_eq!(
        list["batches"].as_array().unwrap().len(),
        1,
        "one batch: {list}"
    );
    // Too many at once, from the page: refused with the reason.
    let (s, html) = dashboard_post(
        &c,
        &http,
        &cookie,
        "/admin/rooms/d/action",
        &[
            ("csrf", &csrf),
            ("action", "codes_create"),
            ("count", "5000"),
            ("uses", "1"),
        ],
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(html.contains("sluice ctl codes create"));
    // Ended from the page.
    let (_, html) = dashboard_post(
        &c,
        &http,
        &cookie,
        "/admin/rooms/d/action",
        &[("csrf", &csrf), ("action", "codes_end"), ("batch", "0")],
    )
    .await;
    assert!(html.contains("Batch 0 ended"), "{html}");
    let (_, list) = c.admin(1, Method::GET, "/v1/rooms/d/codes", None).await;
    assert_eq!(list["batches"], json!([]));

    // Destructive actions ask first: ending every session needs its box ticked...
    let (s, html) = dashboard_post(
        &c,
        &http,
        &cookie,
        "/admin/rooms/d/action",
        &[("csrf", &csrf), ("action", "revoke"), ("visitor_id", "")],
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(html.contains("End every session"));
    let (_, html) = dashboard_post(
        &c,
        &http,
        &cookie,
        "/admin/rooms/d/action",
        &[
            ("csrf", &csrf),
            ("action", "revoke"),
            ("visitor_id", ""),
            ("confirm_all", "yes"),
        ],
    )
    .await;
    assert!(html.contains("Revoked 0."), "{html}");
    // ...and deleting a room with people in it needs --yes, which says what it ends.
    let out = ctl(&c, 1, &["rooms", "delete", "d"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("1 waiting") && err.contains("--yes"), "{err}");
    let (s, _) = c.admin(1, Method::GET, "/v1/rooms/d", None).await;
    assert_eq!(s, StatusCode::OK, "still there");
    let out = ctl(&c, 1, &["-o", "json", "rooms", "delete", "d", "--yes"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let deleted: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (deleted["deleted"].as_str(), deleted["waiting"].as_u64()),
        (Some("d"), Some(1))
    );
    let (s, _) = c.admin(1, Method::GET, "/v1/rooms/d", None).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
}
