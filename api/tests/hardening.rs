//! Sluice tried as an attacker would, against real `sluice serve` processes: spoofed addresses,
//! guessed tokens, tickets in links, bodies of the wrong shape, malformed messages, streams and
//! connections held open, published secrets. Each test names the attack and fails if it works.

mod common;

use base64::Engine;
use common::*;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use std::time::Duration;

/// A paused room: visitors join and wait.
fn held() -> Value {
    json!({"capacity": 1, "paused": true, "admit_per_minute": 600000, "session_ttl_secs": 600, "waiter_ttl_secs": 600})
}

fn b64url(s: &str) -> Value {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(s)
        .unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

/// A client that reaches a node directly cannot choose the address it is counted under: without
/// trusted proxies, `X-Forwarded-For` is ignored and one client is one client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spoofed_forwarded_for_does_not_escape_the_rate_limit() {
    let c = Cluster::start_with(
        1,
        "[limits]\nvisitor_requests_per_second = 2\nvisitor_burst = 5",
    )
    .await;
    c.create_room("rl", room_config(5)).await;
    let mut statuses = Vec::new();
    for i in 0..20 {
        let r = c
            .http
            .get(c.node(1).url("/v1/rooms/rl/status"))
            .header("x-forwarded-for", format!("203.0.113.{i}"))
            .send()
            .await
            .unwrap();
        statuses.push(r.status());
    }
    assert!(
        statuses.contains(&StatusCode::TOO_MANY_REQUESTS),
        "{statuses:?}"
    );
}

/// Guessing the operator token is slowed on every operator surface: after a few wrong guesses
/// the client gets 429 without its token being looked at, the right one included; guesses are
/// counted in the metrics.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guessing_the_operator_token_backs_off() {
    let c = Cluster::start(1).await;
    let url = c.node(1).url("/v1/rooms");
    let get = |token: &'static str| {
        let (http, url) = (c.http.clone(), url.clone());
        async move {
            http.get(&url)
                .bearer_auth(token)
                .send()
                .await
                .unwrap()
                .status()
        }
    };
    let mut seen = Vec::new();
    for _ in 0..8 {
        seen.push(get("a-wrong-guess-of-the-operator-token").await);
    }
    assert_eq!(&seen[..5], &[StatusCode::UNAUTHORIZED; 5], "{seen:?}");
    assert_eq!(seen[7], StatusCode::TOO_MANY_REQUESTS, "{seen:?}");
    let r = c.http.get(&url).bearer_auth(TOKEN).send().await.unwrap();
    assert_eq!(
        r.status(),
        StatusCode::TOO_MANY_REQUESTS,
        "not even looked at"
    );
    assert!(r.headers().get("retry-after").is_some());
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "auth_throttled");
    // The dashboard's sign-in and gRPC count towards the same backoff.
    let r = c
        .http
        .post(c.node(1).url("/admin/login"))
        .form(&[("token", TOKEN)])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    let mut admin =
        sluice_grpc::pb::admin_client::AdminClient::connect(format!("http://{}", c.node(1).grpc))
            .await
            .unwrap();
    let mut req = tonic::Request::new(sluice_grpc::pb::ListRoomsRequest::default());
    req.metadata_mut()
        .insert("authorization", format!("Bearer {TOKEN}").parse().unwrap());
    let e = admin.list_rooms(req).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::ResourceExhausted);
    // Once the backoff is over, the right token works again.
    wait_for("the backoff ends", Duration::from_secs(20), || async {
        c.http
            .get(&url)
            .bearer_auth(TOKEN)
            .send()
            .await
            .is_ok_and(|r| r.status() == StatusCode::OK)
    })
    .await;
    let m = c.metrics(1).await;
    let failures: u64 = m
        .lines()
        .find_map(|l| l.strip_prefix("sluice_operator_auth_failures_total "))
        .unwrap()
        .parse()
        .unwrap();
    assert!(failures >= 6, "{failures}");
    assert!(m.contains("sluice_operator_auth_throttled_total "), "{m}");
}

/// Serde fills a struct from a JSON array field by field: `[]` would reset a room's whole
/// configuration and `[1, 2]` set its capacity to 1. Bodies are objects only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_json_array_is_not_a_body() {
    let c = Cluster::start(1).await;
    c.create_room("r", json!({"capacity": 7, "paused": true}))
        .await;
    for body in ["[]", "[1,2]", " [1]", "\"x\"", "3"] {
        let r = c
            .http
            .put(c.node(1).url("/v1/rooms/r"))
            .bearer_auth(TOKEN)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{body}");
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["error"]["code"], "invalid_body", "{body}");
    }
    let r = c
        .http
        .post(c.node(1).url("/v1/rooms/r/join"))
        .body("[\"t1.x.y.z\"]")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let (_, room) = c.admin(1, Method::GET, "/v1/rooms/r", None).await;
    assert_eq!(room["config"]["capacity"], 7);
    assert_eq!(room["config"]["paused"], true);
}

/// A link with `?ticket=` must not put someone else's ticket into a browser; and each room has
/// its own cookie, so a visit to another room's page costs no place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tickets_in_links_never_become_cookies_and_each_room_keeps_its_own() {
    let c = Cluster::start(1).await;
    c.create_room("a", held()).await;
    c.create_room("b", held()).await;
    let victim = c.join(1, "a", None).await;
    let ticket = victim["ticket"].as_str().unwrap();
    let r = c
        .http
        .get(
            c.node(1)
                .url(&format!("/v1/rooms/a/status?ticket={ticket}")),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert!(r.headers().get("set-cookie").is_none(), "{:?}", r.headers());
    // One browser (one cookie jar, kept here by hand) in two rooms: both places are kept.
    let mut jar: std::collections::BTreeMap<String, String> = Default::default();
    let mut joins = Vec::new();
    for room in ["a", "b", "a", "b"] {
        let cookies: Vec<String> = jar.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let r = c
            .http
            .post(c.node(1).url(&format!("/v1/rooms/{room}/join")))
            .header("cookie", cookies.join("; "))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        let cookie = r.headers()["set-cookie"].to_str().unwrap().to_string();
        assert!(
            cookie.starts_with(&format!("sluice_ticket_{room}=")),
            "{cookie}"
        );
        let (k, v) = cookie.split(';').next().unwrap().split_once('=').unwrap();
        jar.insert(k.to_string(), v.to_string());
        joins.push(r.json::<Value>().await.unwrap());
    }
    assert_eq!(
        joins[2]["visitor_id"], joins[0]["visitor_id"],
        "the same place"
    );
    assert_eq!(joins[2]["position"], joins[0]["position"]);
    assert_eq!(joins[3]["visitor_id"], joins[1]["visitor_id"]);
}

/// Every answer says how a browser may use it: never framed, never sniffed, no referrer to
/// other sites. Pages and scripts (a worker's script runs under the policy it is served with)
/// may run this origin's files only; anything else (JSON, the gate's empty answers, errors) may
/// run and load nothing. The waiting page carries no inline script.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_answer_carries_the_security_headers() {
    let c = Cluster::start(1).await;
    c.create_room("r", held()).await;
    c.create_room(
        "o",
        json!({"capacity": 10, "admit_per_minute": 600000, "session_ttl_secs": 600}),
    )
    .await;
    let v = c.join(1, "o", None).await;
    assert_eq!(v["state"], "admitted", "{v}");
    let ticket = format!("Ticket {}", v["ticket"].as_str().unwrap());
    for (path, page_or_script) in [
        ("/wait/r", true),
        ("/admin", true),
        ("/assets/wait.js", true),
        ("/assets/pow.js", true),
        ("/v1/rooms/r/status", false),
        ("/healthz", false),
        ("/nowhere", false),
        ("/gate/r/check", false),
        ("/gate/o/check", false),
        ("/assets/admin.css", false),
    ] {
        let mut req = c.http.get(c.node(1).url(path));
        if path == "/gate/o/check" {
            req = req.header("authorization", &ticket);
        }
        let r = req.send().await.unwrap();
        match path {
            "/nowhere" => assert_eq!(r.status(), StatusCode::NOT_FOUND),
            "/gate/r/check" | "/v1/rooms/r/status" => {
                assert_eq!(r.status(), StatusCode::UNAUTHORIZED, "{path}")
            }
            _ => assert_eq!(r.status(), StatusCode::OK, "{path}"),
        }
        let h = r.headers();
        assert_eq!(h["x-content-type-options"], "nosniff", "{path}");
        assert_eq!(h["x-frame-options"], "DENY", "{path}");
        assert_eq!(h["referrer-policy"], "same-origin", "{path}");
        let csp = h["content-security-policy"].to_str().unwrap();
        assert!(
            csp.starts_with("default-src 'none'") && csp.contains("frame-ancestors 'none'"),
            "{path}: {csp}"
        );
        assert_eq!(
            csp.contains("script-src 'self'"),
            page_or_script,
            "{path}: {csp}"
        );
        if !page_or_script {
            assert_eq!(csp, "default-src 'none'; frame-ancestors 'none'", "{path}");
        }
        if path == "/wait/r" {
            let body = r.text().await.unwrap();
            assert_eq!(body.matches("<script").count(), 1, "{body}");
            assert!(body.contains("<script src=\"/assets/wait.js\""), "{body}");
        }
    }
    let js = c
        .http
        .get(c.node(1).url("/assets/wait.js"))
        .send()
        .await
        .unwrap();
    assert_eq!(js.status(), StatusCode::OK);
    assert!(js.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/javascript"));
}

/// Bidirectional controls in branding text can make the page show something other than what
/// was written (U+202E reverses what follows): refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bidi_controls_in_branding_are_refused() {
    let c = Cluster::start(1).await;
    for (field, text) in [
        ("title", "Sale \u{202E}321 ecirp"),
        ("message", "ok \u{2066}hidden\u{2069}"),
        ("logo_url", "https://example.com/\u{200F}x.png"),
    ] {
        let (s, v) = c
            .admin(
                1,
                Method::PUT,
                "/v1/rooms/b",
                Some(json!({"capacity": 1, "branding": {field: text}})),
            )
            .await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{field}: {v}");
        assert_eq!(v["error"]["field"], format!("branding.{field}"));
    }
    let (s, _) = c
        .admin(
            1,
            Method::PUT,
            "/v1/rooms/b",
            Some(json!({"capacity": 1, "branding": {"title": "שלום Sale"}})),
        )
        .await;
    assert!(s.is_success(), "right-to-left text itself is fine");
}

/// Bytes that are not the message a gRPC method takes are the client's error: INVALID_ARGUMENT
/// with a code, not INTERNAL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_grpc_messages_are_invalid_arguments() {
    let c = Cluster::start(1).await;
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", c.node(1).grpc))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.unwrap();
    let e = grpc
        .unary(
            tonic::Request::new(vec![0xffu8, 0xff, 0xff, 0xff, 0x0f, 0x01]),
            "/sluice.v1.Visitor/Join".parse().unwrap(),
            RawCodec,
        )
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e:?}");
    assert_eq!(
        e.metadata().get("sluice-error-code").unwrap(),
        "malformed_message"
    );
}

/// Sends and receives raw bytes, whatever the method expects.
#[derive(Debug, Clone, Default)]
struct RawCodec;

impl tonic::codec::Codec for RawCodec {
    type Encode = Vec<u8>;
    type Decode = Vec<u8>;
    type Encoder = RawCodec;
    type Decoder = RawCodec;
    fn encoder(&mut self) -> Self {
        RawCodec
    }
    fn decoder(&mut self) -> Self {
        RawCodec
    }
}

impl tonic::codec::Encoder for RawCodec {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn encode(
        &mut self,
        item: Vec<u8>,
        dst: &mut tonic::codec::EncodeBuf<'_>,
    ) -> Result<(), tonic::Status> {
        use bytes::BufMut;
        dst.put_slice(&item);
        Ok(())
    }
}

impl tonic::codec::Decoder for RawCodec {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn decode(
        &mut self,
        src: &mut tonic::codec::DecodeBuf<'_>,
    ) -> Result<Option<Vec<u8>>, tonic::Status> {
        use bytes::Buf;
        Ok(Some(src.copy_to_bytes(src.remaining()).to_vec()))
    }
}

/// An admission token is short-lived: at most a minute. A status read hands out the token
/// signed before for the same admission while at least half its life is left; with
/// `admission_token_reuse = false` every read signs one with its own `jti`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admission_tokens_live_a_minute_and_are_reused_unless_each_must_be_its_own() {
    let claims = |v: &Value| {
        b64url(
            v["admission_token"]
                .as_str()
                .unwrap()
                .split('.')
                .nth(1)
                .unwrap(),
        )
    };
    for reuse in [true, false] {
        let c = Cluster::start_with_tokens(
            1,
            "",
            &format!("{}admission_token_reuse = {reuse}\n", tokens()),
        )
        .await;
        c.create_room(
            "t",
            json!({"capacity": 5, "admit_per_minute": 600000, "session_ttl_secs": 3600, "waiter_ttl_secs": 600}),
        )
        .await;
        let v = c.join(1, "t", None).await;
        let ticket = v["ticket"].as_str().unwrap();
        let first = claims(&v);
        let exp = first["exp"].as_u64().unwrap();
        let iat = first["iat"].as_u64().unwrap();
        assert!(exp - iat <= 60, "{first}");
        assert!(
            v["expires_at"].as_u64().unwrap() >= iat + 3_500,
            "the session lasts an hour"
        );
        let again = c.status(1, "t", ticket).await;
        assert_eq!(first["jti"].as_str().unwrap().len(), 32);
        if reuse {
            // Read within a second or two of the join: the same token, more than half its
            // life left.
            assert_eq!(again["admission_token"], v["admission_token"]);
        } else {
            assert_ne!(first["jti"], claims(&again)["jti"]);
        }
    }
}

/// A rotation of the ticket keys: a browser whose ticket was signed with the previous key (still
/// listed, no longer signing), which only browses the origin, gets a fresh ticket from the gate
/// for the proxy to set as its cookie; a current ticket gets none. And the JWKS publishes the
/// next admission-token key ahead of its rotation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gate_renews_a_ticket_signed_with_the_previous_key() {
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    let previous = b"the-previous-ticket-key-of-32-bytes";
    let c = Cluster::start_with_tokens(
        1,
        "",
        &format!(
            "{}jwt_published_keys = [{{ id = \"j-next\", seed = \"{}\" }}]\n",
            tokens().replace(
                "ticket_keys = [{ id = \"k1\", secret = \"",
                &format!(
                    "ticket_keys = [{{ id = \"k0\", secret = \"{}\" }}, {{ id = \"k1\", secret = \"",
                    b64(b"the-current-ticket-key-of-32-bytes!")
                )
            ),
            b64(&[7u8; 32])
        ),
    )
    .await;
    c.create_room("g", room_config(5)).await;
    let v = c.join(1, "g", None).await;
    assert_eq!(v["state"], "admitted");
    let current = v["ticket"].as_str().unwrap().to_string();
    assert!(current.starts_with("t1.k0."), "{current}");
    let gate = |ticket: String| {
        let (http, url) = (c.http.clone(), c.node(1).url("/gate/g/check"));
        async move {
            http.get(&url)
                .header("cookie", format!("sluice_ticket_g={ticket}"))
                .send()
                .await
                .unwrap()
        }
    };
    let r = gate(current.clone()).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert!(r.headers().get("x-sluice-set-cookie").is_none());
    // The same admission in a ticket signed with the previous key, k1, as it was issued before
    // the rotation.
    let keys = sluice_ops::tokens::TicketKeys::new(vec![(
        "k0".into(),
        b"the-current-ticket-key-of-32-bytes!".to_vec(),
    )])
    .unwrap();
    let claims = keys.verify(&current).unwrap();
    let before = sluice_ops::tokens::TicketKeys::new(vec![(
        "k1".into(),
        base64::engine::general_purpose::STANDARD
            .decode(TICKET_KEY)
            .unwrap(),
    )])
    .unwrap()
    .issue(&claims);
    let _ = previous;
    let r = gate(before).await;
    assert_eq!(r.status(), StatusCode::OK);
    let fresh = r.headers()["x-sluice-set-cookie"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(fresh.starts_with("sluice_ticket_g=t1.k0."), "{fresh}");
    assert!(fresh.contains("HttpOnly"));
    let ticket = fresh
        .trim_start_matches("sluice_ticket_g=")
        .split(';')
        .next()
        .unwrap();
    assert_eq!(keys.verify(ticket).unwrap().visitor, claims.visitor);
    assert_eq!(gate(ticket.to_string()).await.status(), StatusCode::OK);
    // The JWKS: the signing key first, then the next one.
    let jwks: Value = c
        .http
        .get(c.node(1).url("/.well-known/jwks.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let kids: Vec<&str> = jwks["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["kid"].as_str().unwrap())
        .collect();
    assert_eq!(kids, ["j1", "j-next"]);
}

/// One status stream per visitor (a new one ends the one before), and only so many from one
/// address.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_streams_are_one_per_visitor_and_bounded_per_address() {
    let c = Cluster::start_with(1, "[limits]\nevent_streams_per_address_max = 2").await;
    c.create_room("s", held()).await;
    let open = |ticket: String| {
        let (http, url) = (c.http.clone(), c.node(1).url("/v1/rooms/s/events"));
        async move {
            http.get(&url)
                .header("authorization", format!("Ticket {ticket}"))
                .send()
                .await
                .unwrap()
        }
    };
    let a = c.join(1, "s", None).await["ticket"]
        .as_str()
        .unwrap()
        .to_string();
    let first = open(a.clone()).await;
    assert_eq!(first.status(), StatusCode::OK);
    let second = open(a.clone()).await;
    assert_eq!(second.status(), StatusCode::OK);
    // The first ends once the second has opened.
    let mut first = first.bytes_stream();
    let ended = tokio::time::timeout(Duration::from_secs(10), async {
        use futures::StreamExt;
        while let Some(chunk) = first.next().await {
            if chunk.is_err() {
                break;
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "the replaced stream ended");
    // Two visitors' streams from one address: the third is refused.
    let b = c.join(1, "s", None).await["ticket"]
        .as_str()
        .unwrap()
        .to_string();
    let d = c.join(1, "s", None).await["ticket"]
        .as_str()
        .unwrap()
        .to_string();
    let _b = open(b).await;
    let third = open(d).await;
    assert_eq!(third.status(), StatusCode::SERVICE_UNAVAILABLE);
    let v: Value = third.json().await.unwrap();
    assert_eq!(v["error"]["code"], "too_many_streams");
    drop(second);
}

/// An HTTP/2 connection to `addr` (each stream's flow-control window `stream_window` when
/// given), driven by a task of its own, which ends when the connection is closed.
async fn h2_connection(
    addr: &str,
    stream_window: Option<u32>,
) -> (
    hyper::client::conn::http2::SendRequest<http_body_util::Empty<bytes::Bytes>>,
    tokio::task::JoinHandle<hyper::Result<()>>,
) {
    let sock = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut builder =
        hyper::client::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new());
    if let Some(window) = stream_window {
        builder.initial_stream_window_size(window);
    }
    let (send, conn) = builder
        .handshake(hyper_util::rt::TokioIo::new(sock))
        .await
        .unwrap();
    (send, tokio::spawn(conn))
}

/// Waits, 10 s at most, for the node to close the connection `conn` drives.
async fn closed_by_node(conn: tokio::task::JoinHandle<hyper::Result<()>>, what: &str) {
    tokio::time::timeout(Duration::from_secs(10), conn)
        .await
        .unwrap_or_else(|_| panic!("{what} is not closed"))
        .unwrap()
        .ok();
}

/// An HTTP/2 client that never opens its flow-control window holds its answers unsent, and with
/// them its connection: many such streams per connection, many connections per address, held
/// forever while the client answers pings. The node closes a connection whose answers make no
/// progress for the header timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http2_client_that_never_reads_its_answers_is_closed() {
    let c = Cluster::start_with(1, "[limits]\nheader_read_timeout_ms = 500\n").await;
    let addr = c.node(1).http.clone();
    let (mut send, conn) = h2_connection(&addr, Some(0)).await;
    let mut answers = Vec::new();
    for _ in 0..8 {
        let req = hyper::Request::get(format!("http://{addr}/openapi.json"))
            .body(http_body_util::Empty::<bytes::Bytes>::new())
            .unwrap();
        let answer = send.send_request(req).await.unwrap();
        assert_eq!(answer.status(), 200);
        answers.push(answer);
    }
    closed_by_node(conn, "the connection whose answers make no progress").await;
    drop(answers);
}

/// An open event stream that has no news for longer than the header timeout is not an idle
/// connection: it waits on the node for news, not on its client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quiet_event_stream_outlives_the_header_timeout() {
    use futures::StreamExt;
    let c = Cluster::start_with(1, "[limits]\nheader_read_timeout_ms = 300\n").await;
    c.create_room("quiet", held()).await;
    let waiter = c.join(1, "quiet", None).await;
    let ticket = waiter["ticket"].as_str().unwrap().to_string();
    let resp = c
        .http
        .get(c.node(1).url("/v1/rooms/quiet/events"))
        .header("authorization", format!("Ticket {ticket}"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let mut body = resp.bytes_stream();
    let first = body.next().await.expect("the first status").unwrap();
    assert!(String::from_utf8_lossy(&first).contains("status"));
    // Nothing more comes for six header timeouts, and the stream stays open.
    let quiet = tokio::time::timeout(Duration::from_millis(1_800), body.next()).await;
    assert!(quiet.is_err(), "the stream ended or sent: {quiet:?}");
}

/// A public gRPC connection that made a call and then idles is closed after the header timeout,
/// as an HTTP one is (before, one call let it hold its slot for as long as it answered pings).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_grpc_connection_is_closed() {
    let c = Cluster::start_with(1, "[limits]\nheader_read_timeout_ms = 500\n").await;
    let addr = c.node(1).grpc.clone();
    let (mut send, conn) = h2_connection(&addr, None).await;
    // One call (of no service: answered all the same, and counted as the first call).
    let req = hyper::Request::post(format!("http://{addr}/grpc.health.v1.Health/Nothing"))
        .header("content-type", "application/grpc")
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .unwrap();
    let answer = send.send_request(req).await.unwrap();
    assert_eq!(answer.status(), 200);
    drop(answer);
    closed_by_node(conn, "the idle gRPC connection").await;
}

/// Idle HTTP/2 connections are closed (before, they held their slot forever), and one address
/// holds only so many connections.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_http2_connections_close_and_one_address_holds_only_its_share() {
    let c = Cluster::start_with(
        1,
        "[limits]\nheader_read_timeout_ms = 500\nconnections_per_address_max = 4",
    )
    .await;
    let addr = c.node(1).http.clone();
    // An HTTP/2 connection that made one request and then idles is closed.
    let (mut send, conn) = h2_connection(&addr, None).await;
    let req = hyper::Request::get(format!("http://{addr}/healthz"))
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .unwrap();
    assert_eq!(send.send_request(req).await.unwrap().status(), 200);
    closed_by_node(conn, "the idle connection").await;
    // Four connections from this address are held; a fifth is closed at once.
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut held = Vec::new();
    for _ in 0..4 {
        let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
        s.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .unwrap();
        let mut buf = [0u8; 12];
        s.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"HTTP/1.1 200");
        held.push(s);
    }
    let mut fifth = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let _ = fifth
        .write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
        .await;
    let mut buf = [0u8; 12];
    let got = tokio::time::timeout(Duration::from_secs(5), fifth.read(&mut buf))
        .await
        .expect("closed at once");
    assert!(matches!(got, Ok(0) | Err(_)), "{got:?}");
    // One closes: a new one is served again.
    drop(held.pop());
    wait_for("a slot frees", Duration::from_secs(5), || {
        let addr = addr.clone();
        async move {
            let Ok(mut s) = tokio::net::TcpStream::connect(&addr).await else {
                return false;
            };
            let _ = s
                .write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
                .await;
            let mut buf = [0u8; 12];
            s.read_exact(&mut buf).await.is_ok() && &buf == b"HTTP/1.1 200"
        }
    })
    .await;
}

/// Revoking ends a place; banning also refuses the visitor a new one, until lifted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_banned_visitor_cannot_take_a_new_place() {
    let c = Cluster::start(1).await;
    c.create_room("bn", held()).await;
    let v = c.join(1, "bn", None).await;
    let (ticket, id) = (
        v["ticket"].as_str().unwrap(),
        v["visitor_id"].as_str().unwrap(),
    );
    let (s, r) = c
        .admin(
            1,
            Method::POST,
            "/v1/rooms/bn/ban",
            Some(json!({"visitor_id": id})),
        )
        .await;
    assert_eq!((s, r["count"].as_u64()), (StatusCode::OK, Some(1)), "{r}");
    let (s, r) = c
        .visitor(1, Method::POST, "/v1/rooms/bn/join", Some(ticket))
        .await;
    assert_eq!(s, StatusCode::FORBIDDEN, "{r}");
    assert_eq!(r["error"]["code"], "banned");
    // The CLI lifts it.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args([
            "ctl",
            "--url",
            &c.node(1).url(""),
            "ban",
            "bn",
            id,
            "--lift",
        ])
        .env("SLUICE_ADMIN_TOKEN", TOKEN)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = c.join(1, "bn", Some(ticket)).await;
    assert_eq!(v["state"], "waiting");
    let (s, r) = c
        .admin(
            1,
            Method::POST,
            "/v1/rooms/bn/ban",
            Some(json!({"visitor_id": id, "duration_secs": 400 * 86_400})),
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{r}");
}

/// `sluice serve` refuses the secrets its own samples publish, a node-to-node address others can
/// reach without a cluster secret or TLS, and an operator token under 32 characters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_refuses_published_secrets_and_an_open_raft_port() {
    let dir = tempfile::tempdir().unwrap();
    let sample = include_str!("../../deploy/sluice.example.toml");
    let fresh_tokens =
        |secret: bool| {
            let b = |n: u8| base64::engine::general_purpose::STANDARD.encode([n; 32]);
            format!(
            "[tokens]\nticket_keys = [{{ id = \"k1\", secret = \"{}\" }}]\njwt_seed = \"{}\"\n{}",
            b(1),
            b(2),
            if secret { format!("cluster_secret = \"{}\"\n", b(3)) } else { String::new() }
        )
        };
    let head = sample.split("\n[[peers]]").next().unwrap();
    let peers = "\n[[peers]]\nid = 1\nraft = \"127.0.0.1:1\"\n";
    let cases = [
        (
            "the sample as it is",
            sample.to_string(),
            "sample value published",
        ),
        (
            "the sample's operator token",
            format!("{head}{peers}{}", fresh_tokens(true)),
            "admin_token is a sample value",
        ),
        (
            "no cluster secret on 0.0.0.0",
            format!(
                "{}{peers}{}",
                head.replace(
                    "SAMPLE-operator-token-replace-with-sluice-keygen",
                    "x".repeat(40).as_str()
                ),
                fresh_tokens(false)
            ),
            "cluster_secret",
        ),
        (
            "a short operator token",
            format!(
                "{}{peers}{}",
                head.replace(
                    "SAMPLE-operator-token-replace-with-sluice-keygen",
                    "short-token-of-20-ch"
                )
                .replace("0.0.0.0:7000", "127.0.0.1:0"),
                fresh_tokens(true)
            ),
            "at least 32 characters",
        ),
        (
            "no draw key (loopback, no cluster secret, no draw secret)",
            format!(
                "{}{peers}{}",
                head.replace(
                    "SAMPLE-operator-token-replace-with-sluice-keygen",
                    "x".repeat(40).as_str()
                )
                .replace("0.0.0.0:7000", "127.0.0.1:0"),
                fresh_tokens(false)
            ),
            "tokens.draw_secret",
        ),
    ];
    for (what, text, expect) in cases {
        let path = dir.path().join("node.toml");
        std::fs::write(&path, text).unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["serve", "--config", path.to_str().unwrap()])
            .args(["--data-dir", dir.path().join("data").to_str().unwrap()])
            .args(["--http-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{what}: started");
        assert!(err.contains(expect), "{what}: {err}");
    }
}

/// Sends `bytes` on a new connection and reads the whole answer.
async fn raw_answer(addr: &str, bytes: &[u8]) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut sock = tokio::net::TcpStream::connect(addr).await.unwrap();
    // The server may answer and close before it has read all of an oversized head.
    let _ = sock.write_all(bytes).await;
    let mut got = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), sock.read_to_end(&mut got)).await;
    String::from_utf8_lossy(&got).to_string()
}

/// hyper answers what it cannot parse itself (400, 431) with an empty body; Sluice's answers are
/// JSON with a code, and so are these.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_the_server_cannot_parse_get_json_errors() {
    let c = Cluster::start(1).await;
    let addr = c.node(1).http.clone();
    for (bytes, status, code) in [
        (
            format!(
                "GET /healthz HTTP/1.1\r\nhost: x\r\ncookie: c={}\r\n\r\n",
                "x".repeat(40 * 1024)
            ),
            "HTTP/1.1 431",
            "headers_too_large",
        ),
        (
            "GET /healthz HTTP/1.1\r\nho st: x\r\n\r\n".to_string(),
            "HTTP/1.1 400",
            "bad_request",
        ),
    ] {
        let answer = raw_answer(&addr, bytes.as_bytes()).await;
        assert!(answer.starts_with(status), "{answer}");
        let (head, body) = answer.split_once("\r\n\r\n").unwrap();
        assert!(
            head.to_ascii_lowercase()
                .contains("content-type: application/json"),
            "{head}"
        );
        let v: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body:?}"));
        assert_eq!(v["error"]["code"], code, "{answer}");
    }
    // Ordinary answers are untouched, keep-alive and all.
    let answer = raw_answer(
        &addr,
        b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\nGET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(answer.matches("HTTP/1.1 200").count(), 2, "{answer}");
}

/// The first line a node started under an open-file limit of 1,024 (hard 2,048) writes that
/// contains `needle`, with `extra` in its configuration and `log` as its filter; every line it
/// wrote if none does (the node is stopped after 60 s at the latest).
fn started_line(extra: &str, log: &str, needle: &str) -> Result<String, String> {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let ports = std::collections::BTreeMap::from([(1, (free_port(), free_port(), free_port()))]);
    let path = dir.path().join("n1.toml");
    std::fs::write(&path, config(1, dir.path(), &ports, extra)).unwrap();
    let mut child = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -Sn 1024 && ulimit -Hn 2048 && exec {} serve --config {}",
            env!("CARGO_BIN_EXE_sluice"),
            path.display()
        ))
        .env("RUST_LOG", log)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The node runs until stopped: a line that never comes must not hold the test for ever.
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        if stopped.recv_timeout(Duration::from_secs(60)).is_err() {
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
        }
    });
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut said = String::new();
    let found = loop {
        let mut line = String::new();
        if stderr.read_line(&mut line).unwrap_or(0) == 0 {
            break Err(said);
        }
        if line.contains(needle) {
            break Ok(line);
        }
        said.push_str(&line);
    };
    let _ = stop.send(());
    let _ = watchdog.join();
    let _ = child.kill();
    let _ = child.wait();
    found
}

/// A node whose open-file limit cannot hold the connections its configuration asks for lowers
/// them to fit and says so, instead of failing to accept (or to open its own files) under load.
#[test]
fn a_low_open_file_limit_lowers_the_configured_connections() {
    let line = started_line(
        "[limits]\nconnections_max = 20000\n",
        "warn",
        "open-file limit",
    )
    .unwrap_or_else(|said| panic!("nothing said: {said}"));
    // The soft limit was raised to the hard one (2,048); a quarter is kept for the node's own
    // files; the 1,536 left are shared by 20,000 HTTP and 96 gRPC connections in proportion.
    assert!(line.contains("http_connections=1528"), "{line}");
    assert!(line.contains("grpc_connections=7"), "{line}");
    assert!(line.contains("LimitNOFILE"), "{line}");
}

/// With nothing configured, what a node holds at once follows from its open-file limit (or its
/// memory), and it says so at start, without a warning.
#[test]
fn without_configured_limits_a_node_takes_what_its_open_files_allow() {
    let line = started_line("", "info", "holds at once")
        .unwrap_or_else(|said| panic!("nothing said: {said}"));
    assert!(line.contains("INFO"), "{line}");
    // 2,048 files less a quarter: a sixteenth (96) to gRPC, the rest to HTTP, nine tenths of
    // those for event streams.
    assert!(line.contains("open_files_limit=2048"), "{line}");
    assert!(line.contains("http_connections=1440"), "{line}");
    assert!(line.contains("grpc_connections=96"), "{line}");
    assert!(line.contains("event_streams=1296"), "{line}");
}

/// Signing out of the dashboard ends the session on every node, not only in that browser: the
/// cookie, replayed on another node, is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signing_out_ends_the_dashboard_session_on_every_node() {
    let c = Cluster::start(3).await;
    let http = no_redirect();
    let r = http
        .post(c.node(1).url("/admin/login"))
        .form(&[("token", TOKEN)])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let set = r.headers()["set-cookie"].to_str().unwrap().to_string();
    assert!(
        set.contains("HttpOnly") && set.contains("SameSite=Strict"),
        "{set}"
    );
    let cookie = set.split(';').next().unwrap().to_string();
    let dashboard = |node: u64| {
        let (http, url, cookie) = (http.clone(), c.node(node).url("/admin"), cookie.clone());
        async move {
            http.get(&url)
                .header("cookie", cookie)
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap()
        }
    };
    let page = dashboard(2).await;
    assert!(page.contains("Sign out"), "signed in on every node: {page}");
    let csrf = csrf_of(&page);
    // A sign-out without the form's CSRF token is refused, in JSON.
    let r = http
        .post(c.node(1).url("/admin/logout"))
        .header("cookie", &cookie)
        .form(&[("csrf", "forged")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "csrf_invalid");
    let r = http
        .post(c.node(1).url("/admin/logout"))
        .header("cookie", &cookie)
        .form(&[("csrf", csrf.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    // The old cookie, replayed on the other nodes, signs in no one.
    for node in [1, 2, 3] {
        wait_for(
            "the sign-out reaches the node",
            Duration::from_secs(10),
            || async { !dashboard(node).await.contains("Sign out") },
        )
        .await;
    }
}

/// Link previews, prefetchers, crawlers and uptime checks fetch pages: a `GET` or `HEAD` of the
/// waiting page takes no place. Joining is a `POST` (the page's form or script), answered with
/// a redirect to the page (so that a reload posts nothing again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn looking_at_the_waiting_page_takes_no_place() {
    let c = Cluster::start(1).await;
    c.create_room("r", held()).await;
    let http = no_redirect();
    for _ in 0..10 {
        for method in [Method::GET, Method::HEAD] {
            let r = http
                .request(method.clone(), c.node(1).url("/wait/r"))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), StatusCode::OK, "{method}");
            assert!(r.headers().get("set-cookie").is_none(), "{method}");
        }
    }
    let waiting = || async {
        c.admin(1, Method::GET, "/v1/rooms/r?consistent=true", None)
            .await
            .1["waiting"]
            .as_u64()
    };
    assert_eq!(waiting().await, Some(0));
    let r = http
        .post(c.node(1).url("/wait/r?next=/cart?item=1"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(
        r.headers()["location"],
        "/wait/r?joined=1&next=/cart?item=1"
    );
    let cookie = r.headers()["set-cookie"].to_str().unwrap();
    let cookie = cookie.split(';').next().unwrap().to_string();
    assert_eq!(waiting().await, Some(1));
    // The same browser posting again keeps its one place.
    let r = http
        .post(c.node(1).url("/wait/r"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(waiting().await, Some(1));
    let page = http
        .get(c.node(1).url("/wait/r"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("You are in line"), "{page}");
}

/// The gRPC `Visitor` service had no limit at all (60,000 places in 17 s): without backend
/// tokens it is held to the per-address visitor limit; with them, a call needs one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_joins_need_a_backend_token_or_keep_to_the_visitor_limit() {
    use sluice_grpc::pb;
    let join = |c: &Cluster, token: Option<&str>, calls: usize| {
        let addr = format!("http://{}", c.node(1).grpc);
        let token = token.map(str::to_string);
        async move {
            let mut v = pb::visitor_client::VisitorClient::connect(addr)
                .await
                .unwrap();
            let mut codes = Vec::new();
            for _ in 0..calls {
                let mut req = tonic::Request::new(pb::JoinRequest {
                    room: "g".into(),
                    ..Default::default()
                });
                if let Some(t) = &token {
                    req.metadata_mut()
                        .insert("authorization", format!("Bearer {t}").parse().unwrap());
                }
                let r = v.join(req).await;
                codes.push(r.err().map_or(tonic::Code::Ok, |e| e.code()));
            }
            codes
        }
    };
    let c = Cluster::start_with(
        1,
        "[limits]\nvisitor_requests_per_second = 2\nvisitor_burst = 5",
    )
    .await;
    c.create_room("g", held()).await;
    let codes = join(&c, None, 30).await;
    assert!(
        codes[..5].iter().all(|c| *c == tonic::Code::Ok),
        "{codes:?}"
    );
    assert!(codes.contains(&tonic::Code::ResourceExhausted), "{codes:?}");
    drop(c);
    let backend = "a-backend-token-for-this-test-cluster-0001";
    let c = Cluster::start_with(
        1,
        &format!(
            "backend_tokens = [\"{backend}\"]\n[limits]\nvisitor_requests_per_second = 2\nvisitor_burst = 5"
        ),
    )
    .await;
    c.create_room("g", held()).await;
    // (One wrong call only: wrong tokens count towards the client's backoff.)
    let codes = join(&c, None, 1).await;
    assert_eq!(codes[0], tonic::Code::Unauthenticated, "{codes:?}");
    let codes = join(&c, Some(backend), 30).await;
    assert!(codes.iter().all(|c| *c == tonic::Code::Ok), "{codes:?}");
    // A backend names its visitor's address, or none; one that does not parse is refused
    // rather than taken as none (which would leave per-network bounds uncounted).
    let mut v = pb::visitor_client::VisitorClient::connect(format!("http://{}", c.node(1).grpc))
        .await
        .unwrap();
    for (address, code) in [
        ("not-an-address", tonic::Code::InvalidArgument),
        ("203.0.113.9", tonic::Code::Ok),
    ] {
        let mut req = tonic::Request::new(pb::JoinRequest {
            room: "g".into(),
            client_address: address.into(),
            ..Default::default()
        });
        req.metadata_mut().insert(
            "authorization",
            format!("Bearer {backend}").parse().unwrap(),
        );
        let got = v
            .join(req)
            .await
            .err()
            .map_or(tonic::Code::Ok, |e| e.code());
        assert_eq!(got, code, "{address}");
    }
}

/// `sluice ctl` as the operator, run the way they run it.
fn ctl_at(url: &str, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["ctl", "--url", url])
        .args(args)
        .env("SLUICE_ADMIN_TOKEN", TOKEN)
        .env_remove("SLUICE_OUTPUT")
        .output()
        .unwrap()
}

/// An operator's mistake with the node's address is said before anything is sent, and a node
/// that does not answer is named with the way to point elsewhere: one or two lines, no dumps.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctl_says_what_is_wrong_with_the_address_it_was_given() {
    let short = |out: &std::process::Output| {
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(
            (1..=2).contains(&err.lines().count())
                && !err.contains("panicked")
                && !err.contains(" { "),
            "{err}"
        );
        assert!(out.stdout.is_empty(), "{out:?}");
        err
    };
    let out = ctl_at("127.0.0.1:8080", &["rooms", "list"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(short(&out).contains("http://127.0.0.1:8080"));
    let out = ctl_at("http://127.0.0.1:8080/v1", &["rooms", "list"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(short(&out).contains("base URL only, as http://127.0.0.1:8080"));
    // Nothing listens there: worth retrying, and the operator learns how to point elsewhere.
    let nobody = format!("http://127.0.0.1:{}", free_port());
    let out = ctl_at(&nobody, &["rooms", "list"]);
    assert_eq!(out.status.code(), Some(3));
    let err = short(&out);
    assert!(
        err.contains(&format!("no answer from {nobody}: connection refused"))
            && err.contains("SLUICE_URL"),
        "{err}"
    );

    let c = Cluster::start(1).await;
    // HTTPS to a node that serves plain HTTP.
    let tls = c.node(1).url("").replacen("http://", "https://", 1);
    let out = ctl_at(&tls, &["rooms", "list"]);
    assert!(short(&out).contains(&format!("use {}", c.node(1).url(""))));
    // Bad JSON in an argument: the flag and the place, and nothing is changed.
    let url = c.node(1).url("");
    let out = ctl_at(
        &url,
        &["rooms", "create", "r", "--json", r#"{"capacity": x}"#],
    );
    assert_eq!(out.status.code(), Some(1));
    let err = short(&out);
    assert!(
        err.contains("--json is not valid JSON") && err.contains("line 1 column 14"),
        "{err}"
    );
    let (s, _) = c.admin(1, Method::GET, "/v1/rooms/r", None).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    // A refusal reads as the node's message, with its code for scripts.
    let out = ctl_at(&url, &["rooms", "get", "none-such"]);
    assert_eq!(out.status.code(), Some(4));
    assert!(short(&out).contains("(room_not_found, 404 Not Found)"));
}

/// People get a table for a list, one line for an action and `key: value` lines for a room;
/// scripts get the node's JSON when they ask for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctl_prints_tables_and_sentences_for_people_and_json_for_scripts() {
    let c = Cluster::start(1).await;
    let url = c.node(1).url("");
    let ok = |out: std::process::Output| {
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let made = ok(ctl_at(
        &url,
        &[
            "rooms",
            "create",
            "concert",
            "--capacity",
            "100",
            "--admit-per-minute",
            "600",
        ],
    ));
    assert_eq!(
        made,
        "room concert created (capacity 100, 600 admits/min)\n"
    );
    let list = ok(ctl_at(&url, &["rooms", "list"]));
    let mut lines = list.lines();
    let head: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(
        head,
        [
            "NAME",
            "STATE",
            "MODE",
            "WAITING",
            "ACTIVE",
            "CAPACITY",
            "ADMITS/MIN"
        ],
        "{list}"
    );
    let row: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(
        row,
        ["concert", "admitting", "fifo", "0", "0", "100", "600"],
        "{list}"
    );
    assert_eq!(
        ok(ctl_at(&url, &["pause", "concert"])),
        "room concert paused\n"
    );
    let shown = ok(ctl_at(&url, &["rooms", "get", "concert"]));
    assert!(
        shown
            .lines()
            .any(|l| l.split_whitespace().eq(["state:", "paused"])),
        "{shown}"
    );
    // A notice to the line, and taken down.
    assert_eq!(
        ok(ctl_at(&url, &["notice", "concert", "Doors open at 18:00"])),
        "room concert shows its line: Doors open at 18:00\n"
    );
    let (_, room) = c
        .admin(1, Method::GET, "/v1/rooms/concert?consistent=true", None)
        .await;
    assert_eq!(room["notice"]["text"], "Doors open at 18:00", "{room}");
    assert_eq!(
        ok(ctl_at(&url, &["notice", "concert", "--clear"])),
        "room concert shows no notice\n"
    );
    // Scripts: the node's answer, by flag or by environment.
    for json in [
        ctl_at(&url, &["-o", "json", "rooms", "list"]),
        std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["ctl", "--url", &url, "rooms", "list"])
            .env("SLUICE_ADMIN_TOKEN", TOKEN)
            .env("SLUICE_OUTPUT", "json")
            .output()
            .unwrap(),
    ] {
        let v: Value = serde_json::from_str(&ok(json)).unwrap();
        assert_eq!(v["rooms"][0]["name"], "concert", "{v}");
        assert_eq!(v["rooms"][0]["config"]["paused"], true, "{v}");
    }
    // A reader that goes away early is no failure (`sluice ctl rooms list | head -1`).
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["ctl", "--url", &url, "rooms", "list"])
        .env("SLUICE_ADMIN_TOKEN", TOKEN)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
}

/// A ticket that claims a write this cluster has not made (a cluster restored from an older
/// backup under the same ticket keys) is answered with a JSON error by both kinds of status
/// read, not read before its write (which the reply's assertion would refuse, dropping the
/// connection).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ticket_from_ahead_of_the_cluster_gets_an_error_not_a_dropped_connection() {
    let c = Cluster::start(1).await;
    c.create_room("s", held()).await;
    let joined = c.join(1, "s", None).await;
    let keys = sluice_ops::tokens::TicketKeys::new(vec![(
        "k1".into(),
        base64::engine::general_purpose::STANDARD
            .decode(TICKET_KEY)
            .unwrap(),
    )])
    .unwrap();
    let mut claims = keys.verify(joined["ticket"].as_str().unwrap()).unwrap();
    claims.min_index += 1_000_000;
    let ahead = keys.issue(&claims);
    for query in ["", "?consistent=true"] {
        let r = c
            .http
            .get(c.node(1).url(&format!("/v1/rooms/s/status{query}")))
            .header("authorization", format!("Ticket {ahead}"))
            .send()
            .await
            .expect("an answer, not a dropped connection");
        assert_eq!(r.status(), StatusCode::GATEWAY_TIMEOUT, "{query}");
        let body: Value = r.json().await.unwrap();
        assert!(body["error"]["code"].is_string(), "{query}: {body}");
    }
}

/// One address that sends request heads and never their bodies holds at most
/// `requests_per_address_max` of the node's places: its further requests are refused at once
/// (429, JSON), and a client at another address is answered at once instead of waiting out the
/// body timeout behind it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_address_cannot_hold_the_nodes_request_places() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let c = Cluster::start_with(
        1,
        "[limits]\nconcurrent_requests_max = 8\nrequests_per_address_max = 4\n",
    )
    .await;
    let addr = c.node(1).http.clone();
    let mut held = Vec::new();
    for _ in 0..12 {
        let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
        s.write_all(b"POST /v1/rooms/x/join HTTP/1.1\r\nhost: x\r\ncontent-length: 1000\r\n\r\n")
            .await
            .unwrap();
        held.push(s);
    }
    let mut refused = 0;
    for s in &mut held {
        let mut buf = vec![0u8; 4096];
        if let Ok(Ok(n)) = tokio::time::timeout(Duration::from_secs(2), s.read(&mut buf)).await {
            let answer = String::from_utf8_lossy(&buf[..n]).to_string();
            assert!(answer.starts_with("HTTP/1.1 429"), "{answer}");
            assert!(answer.contains("\"too_many_in_flight\""), "{answer}");
            refused += 1;
        }
    }
    assert_eq!(refused, 8, "all but the address's four are refused at once");
    // Another address (127.0.0.2 reaches the node on loopback) is served meanwhile.
    let other = reqwest::Client::builder()
        .local_address("127.0.0.2".parse::<std::net::IpAddr>().unwrap())
        .timeout(Duration::from_secs(3))
        .build()
        .unwrap();
    let r = other
        .get(c.node(1).url("/healthz"))
        .send()
        .await
        .expect("answered while one address holds its places");
    assert_eq!(r.status(), StatusCode::OK);
    drop(held);
}

/// Clients that send request heads and never their bodies, each within its address's bound, do
/// not hold the node's places while their bodies are awaited: with every place of the node so
/// held, a gate check and a health check from another address are answered at once, not after
/// the body timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_bodies_do_not_hold_the_nodes_request_places() {
    use tokio::io::AsyncWriteExt;
    let c = Cluster::start_with(
        1,
        "[limits]\nconcurrent_requests_max = 4\nrequests_per_address_max = 4\n",
    )
    .await;
    c.create_room("slow", held()).await;
    let addr = c.node(1).http.clone();
    let mut held_heads = Vec::new();
    for _ in 0..5 {
        let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
        s.write_all(
            b"POST /v1/rooms/slow/join HTTP/1.1\r\nhost: x\r\ncontent-length: 1000\r\n\r\n",
        )
        .await
        .unwrap();
        held_heads.push(s);
    }
    // One of the five is refused at once: the other four are being handled.
    let reads = held_heads.iter_mut().map(|s| {
        Box::pin(async move {
            let mut buf = vec![0u8; 4096];
            let n = tokio::io::AsyncReadExt::read(s, &mut buf).await.unwrap();
            String::from_utf8_lossy(&buf[..n]).to_string()
        })
    });
    let (answer, _, _) = futures::future::select_all(reads).await;
    assert!(answer.starts_with("HTTP/1.1 429"), "{answer}");
    let other = reqwest::Client::builder()
        .local_address("127.0.0.2".parse::<std::net::IpAddr>().unwrap())
        .timeout(Duration::from_secs(3))
        .build()
        .unwrap();
    for path in ["/healthz", "/gate/slow/check"] {
        let r = other
            .get(c.node(1).url(path))
            .send()
            .await
            .unwrap_or_else(|e| panic!("{path} answered while bodies are awaited: {e}"));
        let expected = if path == "/healthz" {
            StatusCode::OK
        } else {
            StatusCode::UNAUTHORIZED
        };
        assert_eq!(r.status(), expected, "{path}");
    }
    drop(held_heads);
}

/// Each state digest encodes the whole state while applies wait, so a node computes at most one
/// a second, whoever asks and however often (a viewer may): callers in between wait for the
/// next one, which is computed after they asked, so no answer is stale.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_digests_are_computed_at_most_once_a_second_and_never_stale() {
    let c = Cluster::start(1).await;
    c.create_room("d", held()).await;
    let started = std::time::Instant::now();
    let mut last = 0;
    for _ in 0..3 {
        let joined = c.join(1, "d", None).await;
        let index = joined["applied_index"].as_u64().unwrap();
        let (s, v) = c.admin(1, Method::GET, "/v1/cluster/digest", None).await;
        assert_eq!(s, StatusCode::OK, "{v}");
        let applied = v["applied_index"].as_u64().unwrap();
        assert!(applied >= index, "a digest from before the join: {v}");
        assert!(applied > last);
        last = applied;
    }
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "three digests in {:?}",
        started.elapsed()
    );
    // Many at once share one computation.
    let many = futures::future::join_all(
        (0..8).map(|_| c.admin(1, Method::GET, "/v1/cluster/digest", None)),
    )
    .await;
    let digests: std::collections::BTreeSet<String> =
        many.iter().map(|(_, v)| v["digest"].to_string()).collect();
    assert_eq!(digests.len(), 1, "{many:?}");
}

/// Joins naming a room that does not exist are refused without a log entry (each was written,
/// synced and replicated, then refused in apply); a room made a moment ago through another
/// node is still found.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn joins_to_rooms_that_do_not_exist_write_nothing() {
    let c = Cluster::start(3).await;
    let (_, cluster) = c.admin(1, Method::GET, "/v1/cluster", None).await;
    let from = cluster["applied_index"].as_u64().unwrap() + 1;
    for node in [1, 2, 3] {
        for _ in 0..5 {
            let (s, v) = c
                .visitor(node, Method::POST, "/v1/rooms/nowhere/join", None)
                .await;
            assert_eq!(s, StatusCode::NOT_FOUND, "{v}");
            assert_eq!(v["error"]["code"], "room_not_found", "{v}");
        }
    }
    // Made through one node, joined at once through each of the others.
    c.create_room("fresh", held()).await;
    for node in [2, 3] {
        let (s, v) = c
            .visitor(node, Method::POST, "/v1/rooms/fresh/join", None)
            .await;
        assert_eq!(s, StatusCode::OK, "{v}");
    }
    let joined: Vec<String> = logged_commands(&c, from)
        .await
        .into_iter()
        .filter_map(|cmd| match cmd {
            sluice_statemachine::Command::Join { room, .. } => Some(room),
            _ => None,
        })
        .collect();
    assert_eq!(joined, ["fresh", "fresh"]);
}

/// The commands of the log entries node 1 holds from index `from` on.
async fn logged_commands(c: &Cluster, from: u64) -> Vec<sluice_statemachine::Command> {
    let (_, log) = c
        .admin(
            1,
            Method::GET,
            &format!("/v1/cluster/log?from={from}"),
            None,
        )
        .await;
    let mut commands = Vec::new();
    for e in log["entries"].as_array().unwrap() {
        if let Some(p) = e["proposal"].as_str() {
            let bytes = base64::engine::general_purpose::STANDARD.decode(p).unwrap();
            commands.extend(
                sluice_statemachine::Proposal::decode(&bytes)
                    .unwrap()
                    .commands,
            );
        }
    }
    commands
}

/// Heartbeats with tickets of visits that ended (or of refused joins, which also carry one)
/// record nothing: only visitors who hold a place go into the batch of renewals, so such
/// tickets, however many, never become log entries nor crowd real renewals out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeats_of_ended_visits_record_nothing() {
    let c = Cluster::start(1).await;
    c.create_room("hb", held()).await;
    let gone = c.join(1, "hb", None).await;
    let gone_ticket = gone["ticket"].as_str().unwrap().to_string();
    let (s, _) = c
        .visitor(1, Method::POST, "/v1/rooms/hb/leave", Some(&gone_ticket))
        .await;
    assert_eq!(s, StatusCode::OK);
    let live = c.join(1, "hb", None).await;
    let live_ticket = live["ticket"].as_str().unwrap().to_string();
    let (_, cluster) = c.admin(1, Method::GET, "/v1/cluster", None).await;
    let from = cluster["applied_index"].as_u64().unwrap() + 1;
    for _ in 0..20 {
        let (s, v) = c
            .visitor(
                1,
                Method::POST,
                "/v1/rooms/hb/heartbeat",
                Some(&gone_ticket),
            )
            .await;
        assert_eq!(
            (s, v["state"].as_str()),
            (StatusCode::OK, Some("rejected")),
            "{v}"
        );
    }
    let (s, _) = c
        .visitor(
            1,
            Method::POST,
            "/v1/rooms/hb/heartbeat",
            Some(&live_ticket),
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    let id = |v: &Value| {
        sluice_statemachine::VisitorId::parse_hex(v["visitor_id"].as_str().unwrap()).unwrap()
    };
    let (gone_id, live_id) = (id(&gone), id(&live));
    // The touches proposed since, once the live visitor's has been.
    let touched = || async {
        let mut touched = Vec::new();
        for cmd in logged_commands(&c, from).await {
            if let sluice_statemachine::Command::Touch { visitors, .. } = cmd {
                touched.extend(visitors);
            }
        }
        touched
    };
    wait_for(
        "the live visitor's touch is proposed",
        Duration::from_secs(10),
        || async { touched().await.contains(&live_id) },
    )
    .await;
    let seen = touched().await;
    assert!(
        !seen.contains(&gone_id),
        "an ended visit was touched: {seen:?}"
    );
}
