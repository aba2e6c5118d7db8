//! Admission handed to another site, for an application with no proxy in front: the waiting page
//! sends an admitted visitor to an origin the room lists, with a single-use token in the URL,
//! and the shipped examples (`deploy/handoff`, Python with PyJWT and Node with jose) take each
//! token once and send everyone else to the waiting room. Real node, real applications.

mod common;

use base64::Engine;
use common::*;
use reqwest::StatusCode;
use serde_json::{json, Value};
use std::time::Duration;

/// `name=value` of the cookie `name` a response sets.
fn set_cookie(r: &reqwest::Response, name: &str) -> String {
    r.headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no {name} cookie: {:?}", r.headers()))
        .split(';')
        .next()
        .unwrap()
        .to_string()
}

fn location(r: &reqwest::Response) -> String {
    r.headers()["location"].to_str().unwrap().to_string()
}

/// The claims of a JWT, unchecked (the examples check them).
fn claims(token: &str) -> Value {
    let payload = token.split('.').nth(1).unwrap();
    let json = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .unwrap();
    serde_json::from_slice(&json).unwrap()
}

fn encoded(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

fn handoff_room(origin: &str) -> Value {
    let mut c = room_config(10);
    c["line"] = json!({"handoff_origins": [origin]});
    c
}

/// Joins `room`'s waiting page for `next` (the form's POST) as a new visitor: the answer.
async fn join_page(c: &Cluster, room: &str, next: &str) -> reqwest::Response {
    no_redirect()
        .post(
            c.node(1)
                .url(&format!("/wait/{room}?next={}", encoded(next))),
        )
        .header("content-type", "application/x-www-form-urlencoded")
        .send()
        .await
        .unwrap()
}

async fn each_handed_visitor_is_taken_once(kind: HandoffApp, test: &str) {
    if !prerequisites(test, &kind.needs()) {
        return;
    }
    let c = Cluster::start(1).await;
    let port = free_port();
    // Another host than the node's (127.0.0.1): another site, with cookies of its own.
    let origin = format!("http://localhost:{port}");
    c.create_room("shop", handoff_room(&origin)).await;
    c.create_room("other", handoff_room(&origin)).await;
    c.create_room("plain", room_config(10)).await;
    let _app = kind.start(port, &c.node(1).url(""), "shop", &origin);
    let http = no_redirect();
    wait_for("the application", Duration::from_secs(20), || {
        let (http, u) = (http.clone(), format!("http://127.0.0.1:{port}/"));
        async move { http.get(&u).send().await.is_ok() }
    })
    .await;
    let page = format!("{origin}/buy?item=7&size=m");

    // Without a session, the application sends the visitor to the waiting room, with the page
    // asked for.
    let r = http.get(&page).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let waiting = location(&r);
    assert_eq!(
        waiting,
        c.node(1)
            .url(&format!("/wait/shop?next={}", encoded(&page)))
    );

    // The waiting room admits (there is room) and hands the visitor on with a token.
    let r = http
        .post(&waiting)
        .header("content-type", "application/x-www-form-urlencoded")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(r.headers()["referrer-policy"], "no-referrer");
    let ticket = set_cookie(&r, "sluice_ticket_shop");
    let handed = location(&r);
    let token = handed
        .strip_prefix(&format!("{page}&sluice_token="))
        .unwrap_or_else(|| panic!("handed to {handed}"))
        .to_string();
    let cl = claims(&token);
    assert_eq!(cl["origin"], origin.as_str());
    assert_eq!(
        (cl["room"].as_str(), cl["aud"].as_str()),
        (Some("shop"), Some("sluice:shop"))
    );
    let (iat, exp) = (cl["iat"].as_u64().unwrap(), cl["exp"].as_u64().unwrap());
    assert!(exp > iat && exp - iat <= 60, "{cl}");
    assert!(cl["session_exp"].as_u64().unwrap() >= iat + 590, "{cl}");

    // The application takes it: its own session, and the token gone from the address.
    let r = http.get(&handed).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&r), page);
    let session = set_cookie(&r, "app_session");
    let r = http
        .get(&page)
        .header("cookie", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let body = r.text().await.unwrap();
    assert!(body.contains(cl["sub"].as_str().unwrap()), "{body}");

    // Used once: the same link again (a shared or replayed URL) goes to the waiting room.
    let back = |r: &reqwest::Response| {
        r.status() == StatusCode::SEE_OTHER
            && location(r).starts_with(&c.node(1).url("/wait/shop?next="))
    };
    let r = http.get(&handed).send().await.unwrap();
    assert!(back(&r), "a replayed token: {}", r.status());

    // The visitor's own way back through the waiting page gets a new token, taken once too.
    let r = http
        .get(&waiting)
        .header("cookie", &ticket)
        .send()
        .await
        .unwrap();
    let again = location(&r);
    let token2 = again.split("sluice_token=").nth(1).expect("a token");
    assert_ne!(claims(token2)["jti"], cl["jti"]);
    assert_eq!(claims(token2)["sub"], cl["sub"]);
    let r = http.get(&again).send().await.unwrap();
    assert_eq!(location(&r), page, "a new token is taken");

    // Refused, each sending the visitor to the waiting room: a token with a changed signature,
    // an admission to another room that lists the same site, a status read's token (which
    // names no site), two tokens, a forged session cookie, none at all.
    let forged = format!("{}A", &token2[..token2.len() - 1]);
    let r = join_page(&c, "other", &page).await;
    let other = location(&r);
    let other_token = other
        .split("sluice_token=")
        .nth(1)
        .expect("handed on")
        .to_string();
    let status_token = {
        let v = c.join(1, "shop", None).await;
        v["admission_token"].as_str().expect("admitted").to_string()
    };
    for (what, url, cookie) in [
        ("forged", format!("{page}&sluice_token={forged}"), None),
        (
            "another room",
            format!("{page}&sluice_token={other_token}"),
            None,
        ),
        (
            "no site",
            format!("{page}&sluice_token={status_token}"),
            None,
        ),
        (
            "two tokens",
            format!("{page}&sluice_token={other_token}&sluice_token={token2}"),
            None,
        ),
        ("garbage", format!("{page}&sluice_token=x.y.z"), None),
        (
            "huge",
            format!("{page}&sluice_token={}", "A".repeat(8_000)),
            None,
        ),
        ("forged session", page.clone(), Some(format!("{session}x"))),
        ("nothing", page.clone(), None),
    ] {
        let mut req = http.get(&url);
        if let Some(c) = cookie {
            req = req.header("cookie", c);
        }
        let r = req.send().await.unwrap();
        assert!(back(&r), "{what}: {} {:?}", r.status(), r.headers());
    }

    // Tokens naming keys nobody published are refused without making the application fetch
    // the waiting room's keys for each (at most once more, whatever the flood).
    let jwks_fetches = |m: &str| {
        m.lines()
            .filter(|l| l.starts_with("sluice_http_requests_total{") && l.contains("jwks.json"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum::<u64>()
    };
    let before = jwks_fetches(&c.metrics(1).await);
    let b64 = |v: &Value| {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(serde_json::to_vec(v).unwrap())
    };
    for i in 0..20 {
        let header = json!({"alg": "EdDSA", "kid": format!("made-up-{i}"), "typ": "JWT"});
        let made_up = format!("{}.{}.{}", b64(&header), b64(&cl), "A".repeat(86));
        let r = http
            .get(format!("{page}&sluice_token={made_up}"))
            .send()
            .await
            .unwrap();
        assert!(back(&r), "a made-up key {i}");
    }
    let after = jwks_fetches(&c.metrics(1).await);
    assert!(after <= before + 1, "{before} then {after} key fetches");

    // The waiting room hands nobody to a site the room does not list, and puts no token in a
    // link that would leave it: such a `next` is this site's front page.
    for next in [
        "https://evil.example/",
        &format!("http://localhost:{}/", port + 1),
        &format!("http://evil@localhost:{port}/"),
        &format!("{page}&sluice_token=planted"),
    ] {
        let r = http
            .get(c.node(1).url(&format!("/wait/shop?next={}", encoded(next))))
            .header("cookie", &ticket)
            .send()
            .await
            .unwrap();
        assert_eq!(location(&r), "/", "{next}");
    }
    // Nor does a room that lists no site.
    let r = join_page(&c, "plain", &page).await;
    assert_eq!(location(&r), "/");
    // A site struck from the list gets nobody more.
    c.create_room("shop", room_config(10)).await;
    let r = http
        .get(&waiting)
        .header("cookie", &ticket)
        .send()
        .await
        .unwrap();
    assert_eq!(location(&r), "/");

    // A list the room cannot hold is refused whole, naming the field.
    for bad in [
        json!(["https://shop.example.com/checkout"]),
        json!(["http://shop.example.com"]),
        json!(["https://a.example", "https://a.example"]),
        json!((0..9)
            .map(|i| format!("https://s{i}.example"))
            .collect::<Vec<_>>()),
    ] {
        let mut cfg = room_config(10);
        cfg["line"] = json!({ "handoff_origins": bad });
        let (s, v) = c
            .admin(1, reqwest::Method::PUT, "/v1/rooms/bad", Some(cfg))
            .await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{bad}: {v}");
        assert_eq!(v["error"]["field"], "line.handoff_origins", "{v}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_example_takes_each_handed_visitor_once() {
    each_handed_visitor_is_taken_once(
        HandoffApp::Python,
        "handoff::the_python_example_takes_each_handed_visitor_once",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_node_example_takes_each_handed_visitor_once() {
    each_handed_visitor_is_taken_once(
        HandoffApp::Node,
        "handoff::the_node_example_takes_each_handed_visitor_once",
    )
    .await;
}
