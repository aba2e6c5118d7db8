//! Bad input gets the right status and error code, and loses nothing already accepted; tickets
//! and tokens that are forged, tampered with, expired or for another room are refused.

mod common;

use base64::Engine;
use common::*;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use std::time::Duration;

async fn room_state(c: &Cluster) -> Value {
    let (_, mut v) = c
        .admin(1, Method::GET, "/v1/rooms/r?consistent=true", None)
        .await;
    v.as_object_mut().unwrap().remove("applied_index");
    v
}

/// Operator values out of range (a force-admit of nobody or of too many, a pool's settings, a
/// count reported for a pool's room) are refused at the edge, with the state machine's own
/// rule, before anything is written: the log does not grow.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_range_operator_values_are_refused_before_they_are_written() {
    let c = Cluster::start(1).await;
    c.create_room("r", room_config(1)).await;
    let (s, v) = c
        .admin(
            1,
            Method::PUT,
            "/v1/pools/p",
            Some(json!({"room_capacity": 5, "rooms_max": 2})),
        )
        .await;
    assert!(s.is_success(), "{v}");
    let before = c.last_log_index(1).await;
    for (method, path, body, field) in [
        (
            Method::POST,
            "/v1/rooms/r/admit",
            json!({"count": 0}),
            "count",
        ),
        (
            Method::POST,
            "/v1/rooms/r/admit",
            json!({"count": 100_001}),
            "count",
        ),
        (
            Method::PUT,
            "/v1/pools/p",
            json!({"room_capacity": 0, "rooms_max": 2}),
            "room_capacity",
        ),
        (
            Method::PUT,
            "/v1/pools/q",
            json!({"room_capacity": 5, "rooms_max": 10_001}),
            "rooms_max",
        ),
        (
            Method::POST,
            "/v1/pools/p/report",
            json!({"room_index": 0, "count": 10_000_001}),
            "count",
        ),
    ] {
        let (s, v) = c.admin(1, method, path, Some(body.clone())).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{path} {body}: {v}");
        assert_eq!(v["error"]["code"], "invalid_field", "{path} {body}: {v}");
        assert_eq!(v["error"]["field"], field, "{path} {body}: {v}");
    }
    assert_eq!(
        c.last_log_index(1).await,
        before,
        "a refused value was written"
    );
    // In range, the same calls are written.
    let (s, v) = c
        .admin(
            1,
            Method::POST,
            "/v1/rooms/r/admit",
            Some(json!({"count": 1})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert!(c.last_log_index(1).await > before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_of_bad_inputs() {
    let c = Cluster::start(1).await;
    c.create_room("r", room_config(1)).await;
    let a = c.join(1, "r", None).await;
    let ticket = a["ticket"].as_str().unwrap().to_string();
    c.join(1, "r", None).await;
    let before = room_state(&c).await;
    let url = |p: &str| c.node(1).url(p);
    let big = "x".repeat(200 * 1024);
    let long_addr = format!(
        r#"{{"id": 9, "raft_addr": "127.0.0.1:1", "http_addr": "{}:1"}}"#,
        "h".repeat(300)
    );
    // (method, path, body, auth, expected status, expected code)
    type Case<'a> = (Method, &'a str, Option<&'a str>, bool, StatusCode, &'a str);
    let cases: Vec<Case> = vec![
        (
            Method::PUT,
            "/v1/rooms/r",
            Some("{not json"),
            true,
            StatusCode::BAD_REQUEST,
            "malformed_json",
        ),
        (
            Method::PUT,
            "/v1/rooms/r",
            Some(r#"{"capacity": 5, "colour": "red"}"#),
            true,
            StatusCode::BAD_REQUEST,
            "unknown_field",
        ),
        (
            Method::PUT,
            "/v1/rooms/r",
            Some(r#"{"capacity": "many"}"#),
            true,
            StatusCode::BAD_REQUEST,
            "invalid_body",
        ),
        // Branding that would make the waiting page unreadable: dark text on a dark
        // background, a yellow accent on white.
        (
            Method::PUT,
            "/v1/rooms/r",
            Some(r##"{"capacity": 5, "branding": {"background_color": "#102030"}}"##),
            true,
            StatusCode::BAD_REQUEST,
            "invalid_field",
        ),
        (
            Method::PUT,
            "/v1/rooms/r",
            Some(r##"{"capacity": 5, "branding": {"accent_color": "#ffff00"}}"##),
            true,
            StatusCode::BAD_REQUEST,
            "invalid_field",
        ),
        (
            Method::PUT,
            "/v1/rooms/r",
            Some(r#"{"capacity": 0}"#),
            true,
            StatusCode::BAD_REQUEST,
            "invalid_field",
        ),
        (
            Method::PUT,
            "/v1/rooms/r",
            Some(r#"{"mode": "random"}"#),
            true,
            StatusCode::BAD_REQUEST,
            "invalid_field",
        ),
        (
            Method::PUT,
            "/v1/rooms/r",
            Some(r#"{"slow_factor": 2}"#),
            true,
            StatusCode::BAD_REQUEST,
            "invalid_field",
        ),
        (
            Method::PUT,
            "/v1/rooms/r",
            Some(&big),
            true,
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
        ),
        (
            Method::PUT,
            "/v1/rooms/Bad_Name",
            Some("{}"),
            true,
            StatusCode::BAD_REQUEST,
            "invalid_field",
        ),
        (
            Method::PUT,
            "/v1/rooms/r",
            Some("{}"),
            false,
            StatusCode::UNAUTHORIZED,
            "unauthorized",
        ),
        (
            Method::DELETE,
            "/v1/rooms/r",
            None,
            false,
            StatusCode::UNAUTHORIZED,
            "unauthorized",
        ),
        (
            Method::POST,
            "/v1/rooms/r/pause",
            None,
            false,
            StatusCode::UNAUTHORIZED,
            "unauthorized",
        ),
        (
            Method::POST,
            "/v1/rooms/r/admit",
            Some(r#"{"count": 0}"#),
            true,
            StatusCode::BAD_REQUEST,
            "invalid_field",
        ),
        (
            Method::POST,
            "/v1/rooms/r/admit",
            Some(r#"{"count": -1}"#),
            true,
            StatusCode::BAD_REQUEST,
            "invalid_body",
        ),
        (
            Method::POST,
            "/v1/rooms/r/mode",
            Some(r#"{}"#),
            true,
            StatusCode::BAD_REQUEST,
            "invalid_body",
        ),
        (
            Method::POST,
            "/v1/rooms/r/revoke",
            Some(r#"{"visitor_id": "zz"}"#),
            true,
            StatusCode::BAD_REQUEST,
            "invalid_field",
        ),
        (
            Method::POST,
            "/v1/rooms/r/frobnicate",
            None,
            true,
            StatusCode::NOT_FOUND,
            "not_found",
        ),
        (
            Method::GET,
            "/v1/rooms/r/queue?limit=999999",
            None,
            true,
            StatusCode::BAD_REQUEST,
            "invalid_field",
        ),
        (
            Method::GET,
            "/v1/rooms/r/queue?limit=abc",
            None,
            true,
            StatusCode::BAD_REQUEST,
            "invalid_query",
        ),
        (
            Method::GET,
            "/v1/rooms/r/status?consistent=yes",
            None,
            false,
            StatusCode::BAD_REQUEST,
            "invalid_query",
        ),
        (
            Method::GET,
            "/v1/rooms/%FF/status",
            None,
            false,
            StatusCode::BAD_REQUEST,
            "invalid_path",
        ),
        (
            Method::GET,
            "/gate/%FF/check",
            None,
            false,
            StatusCode::UNAUTHORIZED,
            "invalid_field",
        ),
        (
            Method::GET,
            "/v1/rooms/nope",
            None,
            true,
            StatusCode::NOT_FOUND,
            "room_not_found",
        ),
        (
            Method::POST,
            "/v1/rooms/nope/join",
            None,
            false,
            StatusCode::NOT_FOUND,
            "room_not_found",
        ),
        (
            Method::POST,
            "/v1/rooms/r/join",
            Some(r#"{"ticket": "garbage"}"#),
            false,
            StatusCode::UNAUTHORIZED,
            "invalid_ticket",
        ),
        (
            Method::POST,
            "/v1/rooms/r/join",
            Some(r#"{"ticket": 5}"#),
            false,
            StatusCode::BAD_REQUEST,
            "invalid_body",
        ),
        (
            Method::POST,
            "/v1/rooms/r/join",
            Some(r#"{"tikcet": "x"}"#),
            false,
            StatusCode::BAD_REQUEST,
            "unknown_field",
        ),
        (
            Method::GET,
            "/v1/rooms/r/status",
            None,
            false,
            StatusCode::UNAUTHORIZED,
            "missing_ticket",
        ),
        (
            Method::POST,
            "/v1/rooms/r/leave",
            None,
            false,
            StatusCode::UNAUTHORIZED,
            "missing_ticket",
        ),
        (
            Method::POST,
            "/v1/pools/p/assign",
            None,
            true,
            StatusCode::NOT_FOUND,
            "pool_not_found",
        ),
        (
            Method::PUT,
            "/v1/pools/p",
            Some(r#"{"room_capacity": 0}"#),
            true,
            StatusCode::BAD_REQUEST,
            "invalid_field",
        ),
        (
            Method::POST,
            "/v1/cluster/learners",
            Some(long_addr.as_str()),
            true,
            StatusCode::BAD_REQUEST,
            "invalid_field",
        ),
        // A learner without its client addresses, or one nothing answers for.
        (
            Method::POST,
            "/v1/cluster/learners",
            Some(r#"{"id": 9, "raft_addr": "127.0.0.1:1", "http_addr": "127.0.0.1:2"}"#),
            true,
            StatusCode::BAD_REQUEST,
            "invalid_field",
        ),
        (
            Method::POST,
            "/v1/cluster/learners",
            Some(
                r#"{"id": 9, "raft_addr": "127.0.0.1:1", "http_addr": "127.0.0.1:2", "grpc_addr": "127.0.0.1:3"}"#,
            ),
            true,
            StatusCode::BAD_REQUEST,
            "invalid_field",
        ),
        (
            Method::POST,
            "/v1/cluster/learners",
            Some(r#"{"id": 9, "raft_addr": "no port", "http_addr": "a:1", "grpc_addr": "a:2"}"#),
            true,
            StatusCode::BAD_REQUEST,
            "invalid_field",
        ),
        (
            Method::POST,
            "/v1/cluster/membership",
            Some(r#"{"action": "explode", "id": 1}"#),
            true,
            StatusCode::BAD_REQUEST,
            "invalid_field",
        ),
        (
            Method::GET,
            "/no/such/thing",
            None,
            false,
            StatusCode::NOT_FOUND,
            "not_found",
        ),
        (
            Method::GET,
            "/metrics",
            None,
            false,
            StatusCode::UNAUTHORIZED,
            "unauthorized",
        ),
    ];
    for (method, path, body, auth, status, code) in cases {
        let mut req = c.http.request(method.clone(), url(path));
        if auth {
            req = req.bearer_auth(TOKEN);
        }
        if let Some(b) = body {
            req = req
                .header("content-type", "application/json")
                .body(b.to_string());
        }
        let r = req.send().await.unwrap();
        let got = r.status();
        // Bodies are read whole before they are refused, so the connection stays usable.
        assert!(r.headers().get("connection").is_none(), "{method} {path}");
        let v: Value = r.json().await.unwrap_or(Value::Null);
        assert_eq!(got, status, "{method} {path}: {v}");
        assert_eq!(v["error"]["code"], code, "{method} {path}: {v}");
        assert!(
            v["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "{v}"
        );
    }
    // A browser asking for a path that is nothing gets a page, not JSON.
    let r = c
        .http
        .get(url("/demo&lang=de"))
        .header("accept", "text/html,application/xhtml+xml")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    assert!(r.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/html"));
    let html = r.text().await.unwrap();
    assert!(html.contains("<h1>Not found</h1>"), "{html}");
    // The gate names the waiting page only for a room name.
    for (path, wait) in [
        ("/gate/r/check", Some("/wait/r")),
        ("/gate/..%2F..%2Fevil/check", None),
        ("/gate/%FF/check", None),
    ] {
        let r = c.http.get(url(path)).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED, "{path}");
        let got = r
            .headers()
            .get("x-sluice-wait")
            .map(|h| h.to_str().unwrap());
        assert_eq!(got, wait, "{path}");
    }
    // The dashboard's forms refuse bodies the same way.
    for (ctype, body, status, code) in [
        (
            "application/x-www-form-urlencoded",
            big.as_str(),
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
        ),
        (
            "text/plain",
            "x",
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
        ),
    ] {
        let r = c
            .http
            .post(url("/admin/login"))
            .header("content-type", ctype)
            .body(format!("token={body}"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), status, "{ctype}");
        assert!(r.headers().get("connection").is_none(), "{ctype}");
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["error"]["code"], code, "{ctype}: {v}");
    }
    // A wrong operator token is refused like a missing one.
    let r = c
        .http
        .get(url("/v1/rooms"))
        .bearer_auth("wrong-token-of-some-length")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    // The field is named for invalid values.
    let (_, v) = c
        .admin(1, Method::PUT, "/v1/rooms/r", Some(json!({"capacity": 0})))
        .await;
    assert_eq!(v["error"]["field"], "capacity");
    // Nothing already accepted was lost or changed.
    assert_eq!(room_state(&c).await, before);
    assert_eq!(c.status(1, "r", &ticket).await["state"], "admitted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_tampered_and_other_room_tickets_and_tokens() {
    let c = Cluster::start(1).await;
    c.create_room("one", room_config(10)).await;
    c.create_room("two", room_config(10)).await;
    let v = c.join(1, "one", None).await;
    let ticket = v["ticket"].as_str().unwrap().to_string();
    assert_eq!(c.gate(1, "one", &ticket).await, StatusCode::OK);
    // Another room: refused by the gate and by explicit use.
    assert_eq!(c.gate(1, "two", &ticket).await, StatusCode::UNAUTHORIZED);
    let (s, e) = c
        .visitor(1, Method::GET, "/v1/rooms/two/status", Some(&ticket))
        .await;
    assert_eq!(
        (s, e["error"]["code"].as_str()),
        (StatusCode::FORBIDDEN, Some("ticket_wrong_room"))
    );
    // Tampered: change one character of the payload.
    let parts: Vec<&str> = ticket.split('.').collect();
    let mut payload = parts[2].to_string().into_bytes();
    let i = payload.len() / 2;
    payload[i] = if payload[i] == b'A' { b'B' } else { b'A' };
    let tampered = format!(
        "t1.{}.{}.{}",
        parts[1],
        String::from_utf8(payload).unwrap(),
        parts[3]
    );
    assert_eq!(c.gate(1, "one", &tampered).await, StatusCode::UNAUTHORIZED);
    let (s, e) = c
        .visitor(1, Method::GET, "/v1/rooms/one/status", Some(&tampered))
        .await;
    assert_eq!(
        (s, e["error"]["code"].as_str()),
        (StatusCode::UNAUTHORIZED, Some("invalid_ticket"))
    );
    // Forged: a well-formed ticket under an unknown key, and garbage.
    assert_eq!(
        c.gate(1, "one", &format!("t1.k9.{}.{}", parts[2], parts[3]))
            .await,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(c.gate(1, "one", "garbage").await, StatusCode::UNAUTHORIZED);
    // A browser whose cookie no longer verifies (damaged, or signed with a retired key) gets a
    // new ticket from a join or the waiting page instead of being locked out; an explicit bad
    // ticket is still refused (above).
    for path in ["/v1/rooms/one/join", "/wait/one"] {
        let method = Method::POST;
        let r = c
            .http
            .request(method, c.node(1).url(path))
            .header("cookie", "sluice_ticket=garbage")
            .header("accept", "application/json")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{path}");
        let cookie = r.headers()["set-cookie"].to_str().unwrap().to_string();
        let fresh: Value = r.json().await.unwrap();
        assert!(
            cookie.starts_with(&format!(
                "sluice_ticket_one={}",
                fresh["ticket"].as_str().unwrap()
            )),
            "{path}: {cookie}"
        );
        assert_ne!(fresh["visitor_id"], v["visitor_id"], "{path}");
    }
    assert_eq!(
        c.gate(1, "one", &"A".repeat(5000)).await,
        StatusCode::UNAUTHORIZED
    );
    // The admission token verifies with the published JWKS and is bound to its room.
    let token = v["admission_token"].as_str().unwrap();
    let jwks: Value = c
        .http
        .get(c.node(1).url("/.well-known/jwks.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let x = jwks["keys"][0]["x"].as_str().unwrap();
    let key = jsonwebtoken::DecodingKey::from_ed_components(x).unwrap();
    let mut val = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::EdDSA);
    val.set_audience(&["sluice:one"]);
    let claims = jsonwebtoken::decode::<Value>(token, &key, &val)
        .unwrap()
        .claims;
    assert_eq!(claims["room"], "one");
    assert_eq!(claims["sub"], v["visitor_id"]);
    assert!(claims["exp"].as_u64().unwrap() > claims["iat"].as_u64().unwrap());
    val.set_audience(&["sluice:two"]);
    assert!(
        jsonwebtoken::decode::<Value>(token, &key, &val).is_err(),
        "bound to its room"
    );
    // A token whose signature was altered does not verify.
    let mut bad = token.to_string();
    let last = bad.pop().unwrap();
    bad.push(if last == 'A' { 'B' } else { 'A' });
    val.set_audience(&["sluice:one"]);
    assert!(jsonwebtoken::decode::<Value>(&bad, &key, &val).is_err());
    // An expired token: one signed with the same key but exp in the past is refused.
    let seed = base64::engine::general_purpose::STANDARD
        .decode("dGVzdC1qd3Qtc2VlZC0zMi1ieXRlcy1leGFjdGx5ISE=")
        .unwrap();
    let keys = sluice_ops::tokens::JwtKeys::from_seed("j1", "sluice", &seed).unwrap();
    let old = keys.issue(
        "one",
        sluice_statemachine::VisitorId::from_u128(1),
        1,
        1_000,
        2_000,
    );
    assert!(
        jsonwebtoken::decode::<Value>(&old, &key, &val).is_err(),
        "expired"
    );
}

/// Sends `head` (and `body`) on `sock` and reads one answer: its status line, headers, body.
async fn exchange(sock: &mut tokio::net::TcpStream, head: &str, body: &[u8]) -> (String, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    sock.write_all(head.as_bytes()).await.unwrap();
    sock.write_all(body).await.unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let end = loop {
        if let Some(i) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = sock.read(&mut buf).await.unwrap();
        assert!(
            n > 0,
            "closed before the answer: {:?}",
            String::from_utf8_lossy(&got)
        );
        got.extend_from_slice(&buf[..n]);
    };
    let headers = String::from_utf8(got[..end].to_vec())
        .unwrap()
        .to_lowercase();
    let len: usize = headers
        .lines()
        .find_map(|l| l.strip_prefix("content-length: "))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    while got.len() < end + len {
        let n = sock.read(&mut buf).await.unwrap();
        assert!(n > 0, "closed inside the answer");
        got.extend_from_slice(&buf[..n]);
    }
    (
        headers,
        String::from_utf8(got[end..end + len].to_vec()).unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_body_leaves_the_connection_usable() {
    use tokio::io::AsyncReadExt;
    let c = Cluster::start(1).await;
    let addr = c.node(1).url("").trim_start_matches("http://").to_string();
    let mut sock = tokio::net::TcpStream::connect(&addr).await.unwrap();
    // Over the limit by far less than the drain allowance: read, refused, connection kept.
    let big = vec![b'x'; 300 * 1024];
    let head = format!(
        "PUT /v1/rooms/r HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {TOKEN}\r\n\
         content-type: application/json\r\ncontent-length: {}\r\n\r\n",
        big.len()
    );
    let (h, b) = exchange(&mut sock, &head, &big).await;
    assert!(h.starts_with("http/1.1 413"), "{h}");
    assert!(!h.contains("connection: close"), "{h}");
    assert!(b.contains("body_too_large"), "{b}");
    // Refused before the body is read (no such room name): the body is still consumed.
    let head = format!(
        "PUT /v1/rooms/Bad_Name HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {TOKEN}\r\n\
         content-type: application/json\r\ncontent-length: 2\r\n\r\n"
    );
    let (h, b) = exchange(&mut sock, &head, b"{}").await;
    assert!(h.starts_with("http/1.1 400"), "{h}");
    assert!(b.contains("invalid_field"), "{b}");
    // The same connection still answers.
    let (h, _) = exchange(&mut sock, "GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n", b"").await;
    assert!(h.starts_with("http/1.1 200"), "{h}");
    // A declared length past the allowance is answered without reading it, and the connection
    // closes after the answer.
    let head = "PUT /v1/rooms/r HTTP/1.1\r\nhost: x\r\ncontent-length: 50000000\r\n\r\n";
    let (h, b) = exchange(&mut sock, head, b"").await;
    assert!(h.starts_with("http/1.1 413"), "{h}");
    assert!(h.contains("connection: close"), "{h}");
    assert!(b.contains("body_too_large"), "{b}");
    let mut rest = Vec::new();
    sock.read_to_end(&mut rest).await.unwrap();
    assert!(rest.is_empty());
    // Refused before routing, they are still counted.
    let metrics = c.metrics(1).await;
    assert!(
        metrics.contains(
            "sluice_http_requests_total{method=\"PUT\",route=\"unmatched\",status=\"413\"} 2"
        ),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_cannot_add_metric_series_at_will() {
    let c = Cluster::start(1).await;
    for i in 0..5 {
        let m = Method::from_bytes(format!("M{i}").as_bytes()).unwrap();
        let r = c.http.request(m, c.node(1).url("/healthz")).send().await;
        assert_eq!(r.unwrap().status(), StatusCode::METHOD_NOT_ALLOWED);
    }
    let r = c.http.get(c.node(1).url("/no/such/path")).send().await;
    assert_eq!(r.unwrap().status(), StatusCode::NOT_FOUND);
    let metrics = c.metrics(1).await;
    assert!(
        metrics.contains(
            "sluice_http_requests_total{method=\"other\",route=\"/healthz\",status=\"405\"} 5"
        ),
        "{metrics}"
    );
    assert!(!metrics.contains("method=\"M1\""), "{metrics}");
    assert!(
        metrics.contains(
            "sluice_http_requests_total{method=\"GET\",route=\"unmatched\",status=\"404\"} 1"
        ),
        "{metrics}"
    );
}

/// Reads until the server closes `sock`, within `within`; what it sent meanwhile.
async fn closed_by_server(
    what: &str,
    sock: &mut tokio::net::TcpStream,
    within: Duration,
) -> Vec<u8> {
    use tokio::io::AsyncReadExt;
    let mut got = Vec::new();
    if tokio::time::timeout(within, sock.read_to_end(&mut got))
        .await
        .is_err()
    {
        panic!("the server keeps the {what} connection open");
    }
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_slow_to_send_its_headers_is_cut_off() {
    use tokio::io::AsyncWriteExt;
    let c = Cluster::start_with(1, "[limits]\nheader_read_timeout_ms = 300\n").await;
    let addr = c.node(1).url("").trim_start_matches("http://").to_string();
    // Half a request, then nothing (slowloris): the node closes the connection.
    let mut slow = tokio::net::TcpStream::connect(&addr).await.unwrap();
    slow.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n")
        .await
        .unwrap();
    let started = std::time::Instant::now();
    closed_by_server("slow", &mut slow, Duration::from_secs(10)).await;
    assert!(started.elapsed() >= Duration::from_millis(250));
    // A connection that never sends a byte is closed the same way.
    let mut silent = tokio::net::TcpStream::connect(&addr).await.unwrap();
    closed_by_server("silent", &mut silent, Duration::from_secs(10)).await;
    // A prompt client is answered, and its idle keep-alive connection is closed in time too.
    let mut prompt = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let (h, _) = exchange(&mut prompt, "GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n", b"").await;
    assert!(h.starts_with("http/1.1 200"), "{h}");
    closed_by_server("idle", &mut prompt, Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http2_client_must_send_its_whole_preface_in_time() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let c = Cluster::start_with(1, "[limits]\nheader_read_timeout_ms = 300\n").await;
    let addr = c.node(1).url("").trim_start_matches("http://").to_string();
    // Part of an HTTP/2 preface (or a first byte that could start one), then nothing: until the
    // rest comes the server cannot tell HTTP/1 from HTTP/2, and the node closes the connection.
    for part in [&b"PRI * HTTP/2.0\r\n"[..], b"P"] {
        let mut slow = tokio::net::TcpStream::connect(&addr).await.unwrap();
        slow.write_all(part).await.unwrap();
        let got = closed_by_server("half-preface", &mut slow, Duration::from_secs(10)).await;
        assert!(got.is_empty(), "{got:?}");
    }
    // A whole preface sent a byte at a time is served over HTTP/2 (h2c with prior knowledge):
    // the node answers with its SETTINGS frame (type 4).
    let mut h2 = tokio::net::TcpStream::connect(&addr).await.unwrap();
    h2.set_nodelay(true).unwrap();
    for b in b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" {
        h2.write_all(&[*b]).await.unwrap();
    }
    h2.write_all(&[0, 0, 0, 4, 0, 0, 0, 0, 0]).await.unwrap();
    let mut frame = [0u8; 9];
    tokio::time::timeout(Duration::from_secs(10), h2.read_exact(&mut frame))
        .await
        .expect("an answer")
        .unwrap();
    assert_eq!(frame[3], 4, "{frame:?}");
    // So is an HTTP/1 request whose first byte could have begun a preface.
    let mut post = tokio::net::TcpStream::connect(&addr).await.unwrap();
    post.write_all(b"P").await.unwrap();
    let (h, _) = exchange(
        &mut post,
        "OST /v1/rooms/nope/join HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\n\r\n",
        b"",
    )
    .await;
    assert!(h.starts_with("http/1.1 404"), "{h}");
}

/// An HTTP/2 connection (prior knowledge, no TLS) to `addr`, driven in the background.
async fn http2_client<B>(addr: &str) -> hyper::client::conn::http2::SendRequest<B>
where
    B: hyper::body::Body + Unpin + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let sock = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (send, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(sock),
    )
    .await
    .unwrap();
    tokio::spawn(conn);
    send
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http2_body_over_the_limit_without_a_length_is_refused_in_json() {
    use http_body_util::BodyExt;
    let c = Cluster::start(1).await;
    c.create_room("r", room_config(5)).await;
    let addr = c.node(1).url("").trim_start_matches("http://").to_string();
    let mut send = http2_client(&addr).await;
    // HTTP/2 needs no Content-Length: a streamed body of unknown length, past the 64 KiB limit.
    let body = |kib: usize| {
        let mut chunks = vec![b"{".to_vec()];
        chunks.extend((0..kib).map(|_| vec![b' '; 1024]));
        chunks.push(b"}".to_vec());
        http_body_util::StreamBody::new(futures::stream::iter(chunks.into_iter().map(|c| {
            Ok::<_, std::convert::Infallible>(hyper::body::Frame::data(axum::body::Bytes::from(c)))
        })))
    };
    for (kib, status, code) in [
        (70, StatusCode::PAYLOAD_TOO_LARGE, Some("body_too_large")),
        (1, StatusCode::OK, None),
    ] {
        let req = hyper::Request::post(format!("http://{addr}/v1/rooms/r/join"))
            .header("content-type", "application/json")
            .body(body(kib))
            .unwrap();
        assert!(req.headers().get("content-length").is_none());
        let resp = send.send_request(req).await.unwrap();
        assert_eq!(resp.status().as_u16(), status.as_u16(), "{kib} KiB");
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        let v: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(v["error"]["code"].as_str(), code, "{kib} KiB: {v}");
    }
}

/// The gRPC listener has its own bound (`grpc_connections_max`), apart from the HTTP one's: a
/// connection past it is not served until one closes, while HTTP is served as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_connections_have_a_bound_of_their_own() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let c = Cluster::start_with(1, "[limits]\ngrpc_connections_max = 1\n").await;
    let addr = c.node(1).grpc.clone();
    // The HTTP/2 preface and an empty SETTINGS frame; a served connection answers with its
    // own SETTINGS.
    let open = || async {
        let mut sock = tokio::net::TcpStream::connect(&addr).await.unwrap();
        sock.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
            .await
            .unwrap();
        sock
    };
    let answered = |mut sock: tokio::net::TcpStream, within: Duration| async move {
        let mut buf = [0u8; 64];
        let n = tokio::time::timeout(within, sock.read(&mut buf)).await;
        (matches!(n, Ok(Ok(n)) if n > 0), sock)
    };
    let (served, first) = answered(open().await, Duration::from_secs(10)).await;
    assert!(served, "the first gRPC connection is served");
    let (served, second) = answered(open().await, Duration::from_millis(500)).await;
    assert!(!served, "a second gRPC connection waits");
    // HTTP is not held by the gRPC bound.
    let ok = c.http.get(c.node(1).url("/healthz")).send().await.unwrap();
    assert!(ok.status().is_success());
    drop(first);
    let (served, _) = answered(second, Duration::from_secs(10)).await;
    assert!(served, "served once the first closed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_the_limit_wait_until_one_closes() {
    let c = Cluster::start_with(1, "[limits]\nconnections_max = 3\n").await;
    let addr = c.node(1).url("").trim_start_matches("http://").to_string();
    let healthz = "GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n";
    // Open keep-alive connections, each answered, until one is not: the limit is reached (the
    // test harness's own pooled connection may hold one of the three).
    let mut open = Vec::new();
    let waiting = loop {
        let mut sock = tokio::net::TcpStream::connect(&addr).await.unwrap();
        match tokio::time::timeout(
            Duration::from_millis(500),
            exchange(&mut sock, healthz, b""),
        )
        .await
        {
            Ok((h, _)) => {
                assert!(h.starts_with("http/1.1 200"), "{h}");
                open.push(sock);
                assert!(open.len() <= 3, "more connections served than the limit");
            }
            Err(_) => break sock,
        }
    };
    assert!(open.len() >= 2, "{} served", open.len());
    // The one waiting is served as soon as another closes; its request was kept.
    drop(open.pop());
    let mut waiting = waiting;
    let answer = tokio::time::timeout(Duration::from_secs(10), async {
        use tokio::io::AsyncReadExt;
        let mut got = Vec::new();
        let mut buf = [0u8; 1024];
        while !got.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = waiting.read(&mut buf).await.unwrap();
            assert!(n > 0, "closed without an answer");
            got.extend_from_slice(&buf[..n]);
        }
        String::from_utf8_lossy(&got).to_lowercase()
    })
    .await
    .expect("served once a connection closed");
    assert!(answer.starts_with("http/1.1 200"), "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grpc_client_that_sends_nothing_is_cut_off() {
    use tokio::io::AsyncWriteExt;
    let c = Cluster::start_with(1, "[limits]\nheader_read_timeout_ms = 300\n").await;
    let grpc = c.node(1).grpc.clone();
    let mut silent = tokio::net::TcpStream::connect(&grpc).await.unwrap();
    let got = closed_by_server("silent gRPC", &mut silent, Duration::from_secs(10)).await;
    assert!(got.is_empty(), "{got:?}");
    // Half a preface, then nothing: the same.
    let mut slow = tokio::net::TcpStream::connect(&grpc).await.unwrap();
    slow.write_all(b"PRI * HTTP/2.0\r\n").await.unwrap();
    closed_by_server("slow gRPC", &mut slow, Duration::from_secs(10)).await;
}

/// Sends one HTTP/1 request whose cookie header is `kib` KiB and returns the answer's status
/// line.
async fn status_with_cookie(addr: &str, kib: usize) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut sock = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "GET /healthz HTTP/1.1\r\nhost: x\r\ncookie: c={}\r\nconnection: close\r\n\r\n",
        "x".repeat(kib * 1024)
    );
    // The server may answer and close before it has read all of an oversized head.
    let _ = sock.write_all(head.as_bytes()).await;
    let mut got = Vec::new();
    let _ = sock.read_to_end(&mut got).await;
    String::from_utf8_lossy(&got)
        .lines()
        .next()
        .unwrap_or("")
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_heads_are_bounded_by_header_bytes_max() {
    // The default, 32 KiB: hyper's own would let each connection buffer ~400 KiB of head.
    let c = Cluster::start(1).await;
    let addr = c.node(1).url("").trim_start_matches("http://").to_string();
    assert!(status_with_cookie(&addr, 20)
        .await
        .starts_with("HTTP/1.1 200"));
    let refused = status_with_cookie(&addr, 40).await;
    assert!(refused.starts_with("HTTP/1.1 431"), "{refused}");
    drop(c);
    // Raised to 64 KiB: the same head passes, over HTTP/1 and HTTP/2 (whose default is 16 KiB).
    let c = Cluster::start_with(1, "[limits]\nheader_bytes_max = 65536\n").await;
    let addr = c.node(1).url("").trim_start_matches("http://").to_string();
    assert!(status_with_cookie(&addr, 40)
        .await
        .starts_with("HTTP/1.1 200"));
    let mut send = http2_client(&addr).await;
    let get = |kib: usize| {
        hyper::Request::get(format!("http://{addr}/healthz"))
            .header("cookie", format!("c={}", "x".repeat(kib * 1024)))
            .body(http_body_util::Empty::<axum::body::Bytes>::new())
            .unwrap()
    };
    let resp = send.send_request(get(40)).await.unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    // Past it, HTTP/2 refuses the stream (or answers 431); nothing is served.
    let refused = send.send_request(get(70)).await;
    assert!(
        refused
            .as_ref()
            .map_or(true, |r| r.status().as_u16() == 431),
        "{refused:?}"
    );
}
