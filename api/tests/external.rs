//! Clients written by others: a Python gRPC client generated from the .proto, PyJWT verifying
//! an admission token with the served JWKS, `promtool check metrics` on `/metrics` and `promtool
//! test rules` on the shipped alerting rules. Plus the
//! Rust gRPC client, health and reflection, per-client rate limits and graceful shutdown.

mod common;

use common::*;
use reqwest::{Method, StatusCode};
use serde_json::Value;
use sluice_grpc::pb;
use std::process::Command;
use std::time::Duration;

/// Asserts that a finished tool succeeded, showing what it printed if not; returns its stdout.
fn succeeded(tool: &str, out: std::process::Output) -> Vec<u8> {
    assert!(
        out.status.success(),
        "{tool}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn python(args: &[&str]) -> Value {
    let out = Command::new(program("python3"))
        .args(args)
        .output()
        .expect("python3");
    serde_json::from_slice(&succeeded("python3", out)).unwrap()
}

/// The served OpenAPI document is valid OpenAPI 3.1 by a validator written by others (its
/// coverage of the router's routes is checked next to the router, in `sluice-web`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openapi_document_passes_openapi_spec_validator() {
    if !prerequisites(
        "external::the_openapi_document_passes_openapi_spec_validator",
        &[
            Need::Program("python3"),
            Need::PythonModule("openapi_spec_validator"),
        ],
    ) {
        return;
    }
    let c = Cluster::start(1).await;
    let doc = reqwest::get(c.node(1).url("/openapi.json"))
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("openapi.json");
    let validate = |text: &[u8]| {
        std::fs::write(&file, text).unwrap();
        Command::new(program("python3"))
            .args(["-m", "openapi_spec_validator"])
            .arg(&file)
            .output()
            .expect("python3")
    };
    succeeded("openapi-spec-validator", validate(&doc));
    // And it fails a broken document (the validator is not a formality): a path parameter
    // nobody declares.
    let mut broken: Value = serde_json::from_slice(&doc).unwrap();
    broken["paths"]["/nowhere/{x}"] =
        serde_json::json!({"get": {"responses": {"200": {"description": "x"}}}});
    let out = validate(&serde_json::to_vec(&broken).unwrap());
    assert!(!out.status.success(), "a broken document passed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_grpc_client_pyjwt_and_promtool() {
    if !prerequisites(
        "external::python_grpc_client_pyjwt_and_promtool",
        &[
            Need::Program("python3"),
            Need::PythonModule("grpc_tools"),
            Need::PythonModule("grpc"),
            Need::PythonModule("jwt"),
            Need::PythonModule("cryptography"),
            Need::Program("promtool"),
        ],
    ) {
        return;
    }
    let c = Cluster::start(1).await;
    c.create_room("py", room_config(5)).await;
    let proto = concat!(env!("CARGO_MANIFEST_DIR"), "/grpc/proto");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/py/grpc_client.py");
    let v = python(&[script, proto, &c.node(1).grpc, "py"]);
    assert_eq!(v["join_state"], "admitted");
    assert_eq!(v["state"], "admitted");
    assert_eq!(v["same_visitor"], true);
    let token = v["admission_token"].as_str().expect("a token").to_string();

    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/py/verify_jwt.py");
    let claims = python(&[
        script,
        &c.node(1).url("/.well-known/jwks.json"),
        &token,
        "py",
    ]);
    assert_eq!(claims["room"], "py");
    assert_eq!(claims["sub"], v["visitor_id"]);

    let metrics = c.metrics(1).await;
    assert!(
        metrics.contains("sluice_room_active{room=\"py\"} 1"),
        "{metrics}"
    );
    assert!(metrics.contains("sluice_raft_commit_latency_seconds_bucket"));
    // Every node has synced its WAL for the entries written so far.
    let syncs: u64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("sluice_raft_wal_fsync_seconds_count "))
        .expect("the WAL sync histogram")
        .parse()
        .unwrap();
    assert!(syncs > 0, "{metrics}");
    assert!(metrics.contains("sluice_http_requests_total{method=\"PUT\",route=\"/v1/rooms/{room}\",status=\"201\"} 1"), "{metrics}");
    assert!(
        metrics.contains("sluice_grpc_requests_total{method=\"Visitor/Join\",code=\"OK\"} 1"),
        "{metrics}"
    );
    let mut child = Command::new(program("promtool"))
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("promtool");
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(metrics.as_bytes())
        .unwrap();
    succeeded("promtool", child.wait_with_output().unwrap());
}

/// The alerting rules shipped in `deploy/prometheus` pass their own unit tests, and every metric
/// they name is one a node exports (a renamed metric would silently disable an alert).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shipped_alert_rules_fire_as_tested_on_metrics_a_node_exports() {
    if !prerequisites(
        "external::shipped_alert_rules_fire_as_tested_on_metrics_a_node_exports",
        &[Need::Program("promtool")],
    ) {
        return;
    }
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/prometheus");
    let out = Command::new(program("promtool"))
        .args(["test", "rules", "sluice-alerts.test.yml"])
        .current_dir(dir)
        .output()
        .expect("promtool");
    succeeded("promtool", out);
    let rules = std::fs::read_to_string(format!("{dir}/sluice-alerts.yml")).unwrap();
    let mut named: Vec<&str> = rules
        .split(|ch: char| !(ch.is_ascii_alphanumeric() || ch == '_'))
        .filter(|w| w.starts_with("sluice_"))
        .collect();
    named.sort_unstable();
    named.dedup();
    assert!(named.len() >= 6, "{named:?}");
    let c = Cluster::start(1).await;
    let metrics = c.metrics(1).await;
    for name in named {
        assert!(
            metrics.contains(&format!("# TYPE {name} ")),
            "{name} is not exported:\n{metrics}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_flow_health_and_reflection() {
    let c = Cluster::start(1).await;
    let addr = format!("http://{}", c.node(1).grpc);
    let channel = tonic::transport::Channel::from_shared(addr)
        .unwrap()
        .connect()
        .await
        .unwrap();
    // Admin without a token is refused; with it, creates a room.
    let mut admin = pb::admin_client::AdminClient::new(channel.clone());
    let put = pb::PutRoomRequest {
        room: "g".into(),
        config: Some(pb::RoomConfig {
            capacity: 1,
            admit_per_minute: 600_000,
            session_ttl_secs: 600,
            waiter_ttl_secs: 600,
            max_waiting: 100,
            ..Default::default()
        }),
        create_only: true,
    };
    assert_eq!(
        admin.put_room(put.clone()).await.unwrap_err().code(),
        tonic::Code::Unauthenticated
    );
    let authorized = |put: pb::PutRoomRequest| {
        let mut req = tonic::Request::new(put);
        req.metadata_mut()
            .insert("authorization", format!("Bearer {TOKEN}").parse().unwrap());
        req
    };
    assert!(
        admin
            .put_room(authorized(put.clone()))
            .await
            .unwrap()
            .into_inner()
            .created
    );
    // Create only: a second create of the same room is refused.
    assert_eq!(
        admin.put_room(authorized(put)).await.unwrap_err().code(),
        tonic::Code::AlreadyExists
    );
    // Unset fields take the defaults, as missing ones do over HTTP.
    let made = admin
        .put_room(authorized(pb::PutRoomRequest {
            room: "defaults".into(),
            config: Some(pb::RoomConfig {
                capacity: 7,
                ..Default::default()
            }),
            create_only: false,
        }))
        .await
        .unwrap()
        .into_inner();
    let cfg = made.room.unwrap().config.unwrap();
    assert_eq!(
        (
            cfg.capacity,
            cfg.admit_per_minute,
            cfg.waiter_ttl_secs,
            cfg.mode.as_str()
        ),
        (7, 600, 120, "fifo")
    );
    // The visitor flow over gRPC.
    let mut v = pb::visitor_client::VisitorClient::new(channel.clone());
    let a = v
        .join(pb::JoinRequest {
            room: "g".into(),
            ticket: String::new(),
            client_address: String::new(),
            altcha: String::new(),
            identity: String::new(),
            challenge_token: String::new(),
            code: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(a.state, "admitted");
    let b = v
        .join(pb::JoinRequest {
            room: "g".into(),
            ticket: String::new(),
            client_address: String::new(),
            altcha: String::new(),
            identity: String::new(),
            challenge_token: String::new(),
            code: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!((b.state.as_str(), b.position), ("waiting", Some(1)));
    // A request is bounded as an HTTP body is (64 KiB here), not by tonic's 4 MiB.
    let huge = v
        .join(pb::JoinRequest {
            room: "g".into(),
            ticket: "t".repeat(100 * 1024),
            client_address: String::new(),
            altcha: String::new(),
            identity: String::new(),
            challenge_token: String::new(),
            code: String::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(huge.code(), tonic::Code::OutOfRange, "{huge:?}");
    let gate = v
        .check(pb::GateRequest {
            room: "g".into(),
            ticket: a.ticket.clone(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(gate.admitted);
    let gate = v
        .check(pb::GateRequest {
            room: "g".into(),
            ticket: b.ticket.clone(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(!gate.admitted);
    // B watches its status: its place now, then, once A leaves, its admission, and the end.
    let mut watch = v
        .watch(pb::VisitorRequest {
            room: "g".into(),
            ticket: b.ticket.clone(),
            consistent: false,
        })
        .await
        .unwrap()
        .into_inner();
    let now = watch.message().await.unwrap().unwrap();
    assert_eq!((now.state.as_str(), now.position), ("waiting", Some(1)));
    v.leave(pb::VisitorRequest {
        room: "g".into(),
        ticket: a.ticket.clone(),
        consistent: false,
    })
    .await
    .unwrap();
    let pushed = tokio::time::timeout(Duration::from_secs(10), watch.message())
        .await
        .expect("pushed in time")
        .unwrap()
        .unwrap();
    assert_eq!(pushed.state, "admitted");
    assert!(pushed.admission_token.is_some());
    assert!(
        watch.message().await.unwrap().is_none(),
        "ends once admitted"
    );
    let st = v
        .status(pb::VisitorRequest {
            room: "g".into(),
            ticket: b.ticket.clone(),
            consistent: true,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(st.state, "admitted");
    // Errors carry fitting codes.
    let e = v
        .status(pb::VisitorRequest {
            room: "g".into(),
            ticket: "forged".into(),
            consistent: false,
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::Unauthenticated);
    let e = v
        .join(pb::JoinRequest {
            room: "NO".into(),
            ticket: String::new(),
            client_address: String::new(),
            altcha: String::new(),
            identity: String::new(),
            challenge_token: String::new(),
            code: String::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    // Standard health checking and reflection.
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel.clone());
    let h = health
        .check(tonic_health::pb::HealthCheckRequest {
            service: "sluice.v1.Visitor".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        h.status,
        tonic_health::pb::health_check_response::ServingStatus::Serving as i32
    );
    // Anyone may call them, so their messages are bounded as every other service's are (the
    // node's `body_bytes_max`, 64 KiB), not by tonic's 4 MiB.
    let e = health
        .check(tonic_health::pb::HealthCheckRequest {
            service: "x".repeat(100 * 1024),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::OutOfRange, "{e}");
    let mut refl =
        tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient::new(channel);
    let huge = tonic_reflection::pb::v1::ServerReflectionRequest {
        host: "x".repeat(100 * 1024),
        message_request: Some(
            tonic_reflection::pb::v1::server_reflection_request::MessageRequest::ListServices(
                String::new(),
            ),
        ),
    };
    // Reflection's stream ends without an answer when a request cannot be read.
    let answered = match refl
        .server_reflection_info(tokio_stream::iter(vec![huge]))
        .await
    {
        Err(e) => Err(e),
        Ok(s) => s.into_inner().message().await,
    };
    assert!(
        !matches!(answered, Ok(Some(_))),
        "a 100 KiB reflection request was read: {answered:?}"
    );
    let req = tonic_reflection::pb::v1::ServerReflectionRequest {
        host: String::new(),
        message_request: Some(
            tonic_reflection::pb::v1::server_reflection_request::MessageRequest::ListServices(
                String::new(),
            ),
        ),
    };
    let mut stream = refl
        .server_reflection_info(tokio_stream::iter(vec![req]))
        .await
        .unwrap()
        .into_inner();
    let resp = stream.message().await.unwrap().unwrap();
    let listed = format!("{resp:?}");
    for s in [
        "sluice.v1.Visitor",
        "sluice.v1.Admin",
        "sluice.v1.Cluster",
        "grpc.health.v1.Health",
    ] {
        assert!(listed.contains(s), "{s} missing from {listed}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn visitor_endpoints_are_rate_limited_per_client() {
    // The test's requests come from 127.0.0.1, as from a proxy on the same machine.
    let c = Cluster::start_with(
        1,
        "trusted_proxies = [\"127.0.0.1\"]\n[limits]\nvisitor_requests_per_second = 2\nvisitor_burst = 5",
    )
    .await;
    c.create_room("rl", room_config(5)).await;
    // Behind a trusted proxy that appends the client's address to X-Forwarded-For, the client
    // is the last address: one that puts another in front each time is still limited.
    let mut limited = None;
    for i in 0..20 {
        let r = c
            .http
            .get(c.node(1).url("/v1/rooms/rl/status"))
            .header("x-forwarded-for", format!("192.0.2.{i}, 198.51.100.7"))
            .send()
            .await
            .unwrap();
        if r.status() == StatusCode::TOO_MANY_REQUESTS {
            limited = Some(r);
            break;
        }
    }
    let r = limited.expect("a 429 within 20 requests at burst 5");
    assert!(r.headers().get("retry-after").is_some());
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "rate_limited");
    // Another client behind the same proxy is not.
    let r = c
        .http
        .get(c.node(1).url("/v1/rooms/rl/status"))
        .header("x-forwarded-for", "192.0.2.1, 198.51.100.8")
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.status(),
        StatusCode::UNAUTHORIZED,
        "no ticket, not limited"
    );
    // Dashboard logins are: guessing the token is slowed per address.
    let mut refused = Vec::new();
    for _ in 0..20 {
        let r = c
            .http
            .post(c.node(1).url("/admin/login"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body("token=a-wrong-guess-of-some-length")
            .send()
            .await
            .unwrap();
        refused.push(r.status());
        if r.status() == StatusCode::TOO_MANY_REQUESTS {
            break;
        }
    }
    assert_eq!(
        refused.last(),
        Some(&StatusCode::TOO_MANY_REQUESTS),
        "{refused:?}"
    );
    // The dashboard is never framed by another site.
    let r = c.http.get(c.node(1).url("/admin")).send().await.unwrap();
    assert_eq!(r.headers()["x-frame-options"], "DENY");
    assert!(r.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .contains("frame-ancestors 'none'"));
    // The gate and operator endpoints are not visitor-limited (and an authorization scheme's
    // name is case-insensitive).
    let r = c
        .http
        .get(c.node(1).url("/v1/rooms"))
        .header("authorization", format!("bearer {TOKEN}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rooms_are_listed_a_page_at_a_time() {
    let c = Cluster::start(1).await;
    for r in ["e", "c", "a", "d", "b"] {
        c.create_room(r, room_config(5)).await;
    }
    let names = |v: &Value| -> Vec<String> {
        v["rooms"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap().to_string())
            .collect()
    };
    // Over HTTP: pages of two, each naming where the next starts, the last naming none.
    let mut seen = Vec::new();
    let mut path = "/v1/rooms?limit=2".to_string();
    loop {
        let (status, v) = c.admin(1, Method::GET, &path, None).await;
        assert_eq!(status, StatusCode::OK, "{v}");
        assert!(names(&v).len() <= 2, "{v}");
        seen.extend(names(&v));
        match v["next_after"].as_str() {
            Some(next) => {
                assert_eq!(Some(next), seen.last().map(String::as_str));
                path = format!("/v1/rooms?limit=2&after={next}");
            }
            None => break,
        }
    }
    assert_eq!(seen, ["a", "b", "c", "d", "e"]);
    let (_, v) = c.admin(1, Method::GET, "/v1/rooms", None).await;
    assert_eq!(names(&v).len(), 5);
    assert!(v.get("next_after").is_none(), "{v}");
    for bad in ["limit=0", "limit=1001", "after=Not%20a%20name"] {
        let (status, v) = c
            .admin(1, Method::GET, &format!("/v1/rooms?{bad}"), None)
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");
        assert_eq!(v["error"]["code"], "invalid_field", "{bad}: {v}");
    }
    // Over gRPC the same; a limit of 0 is the default page.
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", c.node(1).grpc))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut admin = pb::admin_client::AdminClient::new(channel);
    let list = |after: &str, limit: u64| {
        let mut req = tonic::Request::new(pb::ListRoomsRequest {
            consistent: true,
            after: after.into(),
            limit,
        });
        req.metadata_mut()
            .insert("authorization", format!("Bearer {TOKEN}").parse().unwrap());
        req
    };
    let page = admin.list_rooms(list("b", 2)).await.unwrap().into_inner();
    let got: Vec<&str> = page.rooms.iter().map(|r| r.name.as_str()).collect();
    assert_eq!((got, page.next_after.as_str()), (vec!["c", "d"], "d"));
    let page = admin.list_rooms(list("", 0)).await.unwrap().into_inner();
    assert_eq!((page.rooms.len(), page.next_after.as_str()), (5, ""));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_concurrent_puts_of_a_new_room_one_creates_it() {
    let c = Cluster::start(3).await;
    for round in 0..3 {
        let room = format!("new{round}");
        let puts = (1..=3u64).cycle().take(8).map(|node| {
            let (c, room) = (&c, room.clone());
            async move {
                c.admin(
                    node,
                    Method::PUT,
                    &format!("/v1/rooms/{room}"),
                    Some(room_config(5)),
                )
                .await
                .0
            }
        });
        let statuses = futures::future::join_all(puts).await;
        let created = statuses
            .iter()
            .filter(|s| **s == StatusCode::CREATED)
            .count();
        assert_eq!(created, 1, "{statuses:?}");
        assert!(
            statuses
                .iter()
                .all(|s| *s == StatusCode::CREATED || *s == StatusCode::OK),
            "{statuses:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctl_rooms_put_changes_only_what_it_is_given_and_create_never_resets_a_room() {
    let c = Cluster::start(1).await;
    let cfg = serde_json::json!({"capacity": 3, "paused": true, "mode": "lottery",
        "branding": {"title": "Spring drop", "accent_color": "#aa0000"}});
    c.create_room("r", cfg).await;
    let ctl = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args([
                "ctl",
                "--url",
                &c.node(1).url(""),
                "--token",
                TOKEN,
                "rooms",
                "put",
                "r",
            ])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    };
    let config = || async {
        let (_, v) = c
            .admin(1, Method::GET, "/v1/rooms/r?consistent=true", None)
            .await;
        v["config"].clone()
    };
    ctl(&[
        "--capacity",
        "20",
        "--json",
        r#"{"branding": {"title": "Summer drop"}}"#,
    ]);
    let now = config().await;
    assert_eq!(
        (
            now["capacity"].as_u64(),
            now["paused"].as_bool(),
            now["mode"].as_str(),
            now["branding"]["title"].as_str(),
            now["branding"]["accent_color"].as_str()
        ),
        (
            Some(20),
            Some(true),
            Some("lottery"),
            Some("Summer drop"),
            Some("#aa0000")
        ),
        "{now}"
    );
    // --replace starts from the defaults.
    ctl(&["--replace", "--capacity", "5"]);
    let now = config().await;
    assert_eq!(
        (
            now["capacity"].as_u64(),
            now["paused"].as_bool(),
            now["mode"].as_str()
        ),
        (Some(5), Some(false), Some("fifo")),
        "{now}"
    );
    // Exit statuses tell scripts what happened: refused as asked, or worth retrying.
    let status = |url: &str, args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["ctl", "--url", url, "--token", TOKEN])
            .args(args)
            .output()
            .unwrap()
            .status
            .code()
    };
    let url = c.node(1).url("");
    assert_eq!(status(&url, &["rooms", "get", "r"]), Some(0));
    assert_eq!(status(&url, &["rooms", "get", "none-such"]), Some(4));
    let nobody = format!("http://127.0.0.1:{}", free_port());
    assert_eq!(status(&nobody, &["rooms", "get", "r"]), Some(3));
    // The verbs the help speaks of work as said, and a mistyped field is named with the
    // closest there is, not a column of the body the CLI built.
    assert_eq!(status(&url, &["rooms", "show", "r"]), Some(0));
    assert_eq!(status(&url, &["rooms", "ls"]), Some(0));
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["ctl", "--url", &url, "--token", TOKEN])
        .args(["rooms", "change", "r", "--json", r#"{"capacty": 9}"#])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{said}");
    assert!(
        said.contains("unknown field `capacty`: did you mean `capacity`?")
            && !said.contains("column"),
        "{said}"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["ctl", "--url", &url, "rooms", "lsit"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("'list'"),
        "the closest verb is suggested: {said}"
    );

    // Creating never resets a room that exists: `rooms create` and `If-None-Match: *` are
    // refused with room_exists, and the room keeps its configuration.
    let before = config().await;
    assert_eq!(
        status(&url, &["rooms", "create", "r", "--capacity", "100"]),
        Some(4)
    );
    let r = c
        .http
        .put(c.node(1).url("/v1/rooms/r"))
        .bearer_auth(TOKEN)
        .header("if-none-match", "*")
        .json(&serde_json::json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CONFLICT);
    let v: serde_json::Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "room_exists", "{v}");
    assert_eq!(config().await, before);
    assert_eq!(
        status(&url, &["rooms", "create", "fresh", "--capacity", "7"]),
        Some(0)
    );
    let (_, fresh) = c.admin(1, Method::GET, "/v1/rooms/fresh", None).await;
    assert_eq!(fresh["config"]["capacity"], 7, "{fresh}");

    // Staff tokens from the command line: issued, then revoked by the token itself (the
    // operator's `--token` stays the operator's).
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["ctl", "--url", &url, "--token", TOKEN, "-o", "json"])
        .args(["bypass", "issue"])
        .args(["--room", "fresh", "--ttl", "8h", "--label", "desk"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let issued: Value = serde_json::from_slice(&out.stdout).unwrap();
    let staff = issued["token"].as_str().unwrap();
    let gate = || async {
        c.http
            .get(c.node(1).url("/gate/fresh/check"))
            .header("x-sluice-bypass", staff)
            .send()
            .await
            .unwrap()
            .status()
    };
    assert_eq!(gate().await, StatusCode::OK);
    assert_eq!(
        status(
            &url,
            &[
                "bypass",
                "revoke",
                "--room",
                "fresh",
                "--bypass-token",
                staff
            ]
        ),
        Some(0)
    );
    assert_eq!(gate().await, StatusCode::UNAUTHORIZED);
    assert_eq!(
        status(&url, &["bypass", "issue", "--room", "fresh", "--ttl", "8w"]),
        Some(2)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scraper_token_reads_metrics_and_nothing_else() {
    let scraper = "scraper-token-0123456789";
    let c = Cluster::start_with(1, &format!("metrics_token = \"{scraper}\"\n")).await;
    let get = |path: &str, token: Option<&str>| {
        let mut r = c.http.get(c.node(1).url(path));
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        async move { r.send().await.unwrap().status() }
    };
    assert_eq!(get("/metrics", Some(scraper)).await, StatusCode::OK);
    assert_eq!(get("/metrics", Some(TOKEN)).await, StatusCode::OK);
    assert_eq!(get("/metrics", None).await, StatusCode::UNAUTHORIZED);
    assert_eq!(
        get("/v1/rooms", Some(scraper)).await,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        get("/v1/cluster", Some(scraper)).await,
        StatusCode::UNAUTHORIZED
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_finishes_in_flight_work_and_exits_cleanly() {
    let mut c = Cluster::start(1).await;
    c.create_room("s", room_config(5)).await;
    let v = c.join(1, "s", None).await;
    // Clients that connected (to each port) and sent nothing have nothing in flight: they must
    // not hold up the shutdown until the in-flight grace (10 s) runs out.
    let mut silent = Vec::new();
    for addr in [&c.nodes[&1].http, &c.nodes[&1].grpc, &c.nodes[&1].raft] {
        silent.push(tokio::net::TcpStream::connect(addr).await.unwrap());
    }
    let mut child = c.nodes.get_mut(&1).unwrap().child.take().unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "did not exit within 5 s of SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(status.success(), "{status:?}");
    drop(silent);
    // Restarted on the same data, the visitor is still there.
    c.spawn(1);
    c.wait_ready().await;
    let st = c.status(1, "s", v["ticket"].as_str().unwrap()).await;
    assert_eq!(st["state"], "admitted");
}
