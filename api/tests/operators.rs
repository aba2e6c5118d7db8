//! Named operators against real `sluice serve` processes: each credential may do what its role
//! allows and nothing more, on HTTP, gRPC and the dashboard alike; every change an operator
//! makes is in the audit log under its name, with the log index and the outcome; and the
//! attacks on the credentials themselves (wrong tokens, forged sessions, one token for two
//! names) fail.

mod common;

use common::*;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use sluice_grpc::pb;
use sluice_ops::operators::{hex, token_hash};
use std::time::{Duration, Instant};

const ALICE: &str = "alice-operator-token-0123456789abcdef";
const BOB: &str = "bob-operator-token-0123456789abcdef0";
const VERA: &str = "vera-viewer-token-0123456789abcdef01";
const ADA: &str = "ada-admin-token-0123456789abcdef01234";

/// The `[[operators]]` of `(name, role, token)`.
fn operators(list: &[(&str, &str, &str)]) -> String {
    list.iter()
        .map(|(name, role, token)| {
            format!(
                "\n[[operators]]\nname = \"{name}\"\nrole = \"{role}\"\ntoken_sha256 = \"{}\"\n",
                hex(&token_hash(token))
            )
        })
        .collect()
}

/// The test team: alice and bob run rooms, vera watches, ada runs the cluster.
fn team() -> String {
    operators(&[
        ("alice", "operator", ALICE),
        ("bob", "operator", BOB),
        ("vera", "viewer", VERA),
        ("ada", "admin", ADA),
    ])
}

/// An HTTP request with `token`, retrying while the cluster has no leader.
async fn call(
    c: &Cluster,
    token: &str,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let mut req = c
            .http
            .request(method.clone(), c.node(1).url(path))
            .bearer_auth(token);
        if let Some(b) = &body {
            req = req.json(b);
        }
        let r = req.send().await.unwrap();
        let status = r.status();
        let v: Value = r.json().await.unwrap_or(Value::Null);
        if status != StatusCode::SERVICE_UNAVAILABLE || Instant::now() > deadline {
            return (status, v);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn authorized<T>(token: &str, m: T) -> tonic::Request<T> {
    let mut req = tonic::Request::new(m);
    req.metadata_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    req
}

async fn grpc_channel(c: &Cluster) -> tonic::transport::Channel {
    tonic::transport::Channel::from_shared(format!("http://{}", c.node(1).grpc))
        .unwrap()
        .connect()
        .await
        .unwrap()
}

/// Signs `token` in to node 1's dashboard: the session cookie (`name=value`).
async fn sign_in(c: &Cluster, token: &str) -> String {
    let r = no_redirect()
        .post(c.node(1).url("/admin/login"))
        .form(&[("token", token)])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let set = r.headers()["set-cookie"].to_str().unwrap();
    set.split(';').next().unwrap().to_string()
}

/// A dashboard page with `cookie`: its status and text.
async fn page(c: &Cluster, cookie: &str, path: &str) -> (StatusCode, String) {
    let r = no_redirect()
        .get(c.node(1).url(path))
        .header("cookie", cookie)
        .send()
        .await
        .unwrap();
    (r.status(), r.text().await.unwrap())
}

/// A dashboard form with `cookie` (not followed): status, `Location`, text.
async fn post_form(
    c: &Cluster,
    cookie: &str,
    path: &str,
    form: &[(&str, &str)],
) -> (StatusCode, String, String) {
    let r = no_redirect()
        .post(c.node(1).url(path))
        .header("cookie", cookie)
        .form(form)
        .send()
        .await
        .unwrap();
    let to = r
        .headers()
        .get("location")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    (r.status(), to, r.text().await.unwrap())
}

async fn paused(c: &Cluster, room: &str) -> bool {
    let (s, v) = call(
        c,
        TOKEN,
        Method::GET,
        &format!("/v1/rooms/{room}?consistent=true"),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    v["config"]["paused"].as_bool().unwrap()
}

fn forbidden(s: StatusCode, v: &Value, what: &str) {
    assert_eq!(s, StatusCode::FORBIDDEN, "{what}: {v}");
    assert_eq!(v["error"]["code"], "forbidden", "{what}: {v}");
}

/// The audit log as `token` reads it with `query`, once it holds at least `at_least` entries.
async fn audit(c: &Cluster, token: &str, query: &str, at_least: usize) -> Vec<Value> {
    let path = format!("/v1/audit?{query}");
    let mut last = Value::Null;
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        let (s, v) = call(c, token, Method::GET, &path, None).await;
        assert_eq!(s, StatusCode::OK, "{v}");
        let entries = v["entries"].as_array().unwrap().clone();
        if entries.len() >= at_least {
            return entries;
        }
        last = v;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the audit log {query:?} never held {at_least} entries: {last}");
}

/// A viewer reads everything an operator reads, and every change it tries is refused with 403
/// `forbidden` (PERMISSION_DENIED over gRPC) before it costs anything: over HTTP, gRPC and the
/// dashboard, whose pages show it no forms. Refusals for a small role are not wrong guesses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_viewer_reads_but_every_change_it_tries_is_forbidden() {
    let c = Cluster::start_with(1, &team()).await;
    c.create_room("sale", room_config(10)).await;
    for path in [
        "/v1/rooms",
        "/v1/rooms/sale",
        "/v1/rooms/sale/queue",
        "/v1/rooms/sale/codes",
        "/v1/pools",
        "/v1/cluster",
        "/v1/audit",
    ] {
        let (s, v) = call(&c, VERA, Method::GET, path, None).await;
        assert_eq!(s, StatusCode::OK, "{path}: {v}");
    }
    let r = c
        .http
        .get(c.node(1).url("/metrics"))
        .bearer_auth(VERA)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    // Backups, the raw log and the state's digest (costly: the whole state encoded twice) are
    // the cluster admin's.
    for path in [
        "/v1/cluster/backup",
        "/v1/cluster/log?from=1&limit=1",
        "/v1/cluster/digest",
    ] {
        let (s, v) = call(&c, VERA, Method::GET, path, None).await;
        forbidden(s, &v, path);
        let (s, v) = call(&c, ALICE, Method::GET, path, None).await;
        forbidden(s, &v, path);
    }
    let writes: [(Method, &str, Option<Value>); 12] = [
        (Method::POST, "/v1/rooms/sale/pause", None),
        (
            Method::POST,
            "/v1/rooms/sale/admit",
            Some(json!({"count": 1})),
        ),
        (
            Method::POST,
            "/v1/rooms/sale/revoke",
            Some(json!({"all": true})),
        ),
        (
            Method::POST,
            "/v1/rooms/sale/notice",
            Some(json!({"text": "hi"})),
        ),
        (Method::PUT, "/v1/rooms/sale", Some(room_config(1))),
        (Method::PUT, "/v1/rooms/other", Some(room_config(1))),
        (Method::DELETE, "/v1/rooms/sale", None),
        (
            Method::POST,
            "/v1/rooms/sale/codes",
            Some(json!({"count": 1})),
        ),
        (
            Method::POST,
            "/v1/rooms/sale/bypass/tokens",
            Some(json!({"ttl_secs": 60, "label": "x"})),
        ),
        (
            Method::PUT,
            "/v1/pools/chat",
            Some(json!({"room_capacity": 5, "rooms_max": 2})),
        ),
        (
            Method::POST,
            "/v1/cluster/membership",
            Some(json!({"action": "remove", "id": 1})),
        ),
        (
            Method::POST,
            "/v1/cluster/learners",
            Some(
                json!({"id": 9, "raft_addr": "127.0.0.1:1", "http_addr": "127.0.0.1:2", "grpc_addr": "127.0.0.1:3"}),
            ),
        ),
    ];
    for (method, path, body) in writes {
        let (s, v) = call(&c, VERA, method.clone(), path, body).await;
        forbidden(s, &v, &format!("{method} {path}"));
    }
    assert!(!paused(&c, "sale").await);
    let (s, _) = call(&c, TOKEN, Method::GET, "/v1/rooms/other", None).await;
    assert_eq!(s, StatusCode::NOT_FOUND, "nothing was made");

    // gRPC: reads pass, changes are PERMISSION_DENIED.
    let channel = grpc_channel(&c).await;
    let mut admin = pb::admin_client::AdminClient::new(channel.clone());
    let mut cluster = pb::cluster_client::ClusterClient::new(channel);
    let rooms = admin
        .list_rooms(authorized(VERA, pb::ListRoomsRequest::default()))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(rooms.rooms[0].name, "sale");
    cluster
        .status(authorized(VERA, pb::Empty {}))
        .await
        .unwrap();
    let e = admin
        .pause(authorized(
            VERA,
            pb::RoomRef {
                room: "sale".into(),
                consistent: false,
            },
        ))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e:?}");
    assert_eq!(e.metadata().get("sluice-error-code").unwrap(), "forbidden");
    let e = admin
        .admit(authorized(
            VERA,
            pb::AdmitRequest {
                room: "sale".into(),
                count: 1,
            },
        ))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e:?}");
    let e = cluster
        .change_membership(authorized(
            VERA,
            pb::MembershipRequest {
                action: "remove".into(),
                id: 1,
            },
        ))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e:?}");
    assert!(!paused(&c, "sale").await);

    // The dashboard: the pages without their forms, posts refused, who is signed in on top.
    let cookie = sign_in(&c, VERA).await;
    let (s, home) = page(&c, &cookie, "/admin").await;
    assert_eq!(s, StatusCode::OK);
    assert!(
        home.contains("Signed in as <strong>vera</strong> (viewer)"),
        "{home}"
    );
    assert!(home.contains("href=\"/admin/audit\""), "{home}");
    assert!(!home.contains("action=\"/admin/rooms\""), "{home}");
    let (s, room) = page(&c, &cookie, "/admin/rooms/sale").await;
    assert_eq!(s, StatusCode::OK);
    assert!(
        room.contains("Signed in as <strong>vera</strong>"),
        "{room}"
    );
    for form in ["/admin/rooms/sale/action", "/admin/rooms/sale/config"] {
        assert!(!room.contains(form), "a viewer is shown {form}: {room}");
    }
    let (s, pools) = page(&c, &cookie, "/admin/pools").await;
    assert_eq!(s, StatusCode::OK);
    assert!(
        !pools.contains("method=\"post\" action=\"/admin/pools\""),
        "{pools}"
    );
    let csrf = csrf_of(&home);
    for (path, form) in [
        (
            "/admin/rooms/sale/action",
            vec![("csrf", csrf.as_str()), ("action", "pause")],
        ),
        (
            "/admin/rooms",
            vec![("csrf", csrf.as_str()), ("name", "mine")],
        ),
        (
            "/admin/pools",
            vec![
                ("csrf", csrf.as_str()),
                ("action", "put"),
                ("name", "chat"),
                ("room_capacity", "5"),
                ("rooms_max", "2"),
            ],
        ),
        ("/admin/rooms/sale/preview", vec![("csrf", csrf.as_str())]),
        (
            "/admin/rooms/sale/action",
            vec![
                ("csrf", csrf.as_str()),
                ("action", "phase_add"),
                ("name", "Drop"),
                ("starts_at.unix", "4000000000"),
            ],
        ),
    ] {
        let (s, _, text) = post_form(&c, &cookie, path, &form).await;
        let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        forbidden(s, &v, path);
    }
    assert!(!paused(&c, "sale").await);
    let (s, _) = call(&c, TOKEN, Method::GET, "/v1/rooms/mine", None).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    // Dozens of refusals later the viewer is not backing off: its token is right.
    let (s, v) = call(&c, VERA, Method::GET, "/v1/rooms", None).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    // And it signs out like anyone (attributed to it).
    let (s, to, _) = post_form(&c, &cookie, "/admin/logout", &[("csrf", csrf.as_str())]).await;
    assert_eq!((s, to.as_str()), (StatusCode::SEE_OTHER, "/admin"));
    let signed_out = audit(&c, VERA, "operator=vera", 1).await;
    assert_eq!(signed_out[0]["command"], "end_credential", "{signed_out:?}");
    assert_eq!(signed_out[0]["outcome"], "ok");
}

/// Each node's metrics show a digest of the operator credentials it accepts, so that nodes
/// still accepting a removed or demoted operator (their configuration not changed yet) stand
/// out: nodes configured alike show the same one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_show_which_operator_credentials_they_accept() {
    let info = |m: String| {
        m.lines()
            .find(|l| l.starts_with("sluice_operators_config_info{"))
            .unwrap_or_else(|| panic!("no credentials digest: {m}"))
            .to_string()
    };
    let c = Cluster::start_with(2, &team()).await;
    let (one, two) = (info(c.metrics(1).await), info(c.metrics(2).await));
    assert_eq!(one, two);
    assert!(
        one.contains("credentials=\"5\"") && one.ends_with(" 1"),
        "{one}"
    );
    drop(c);
    let demoted = operators(&[
        ("alice", "viewer", ALICE),
        ("bob", "operator", BOB),
        ("vera", "viewer", VERA),
        ("ada", "admin", ADA),
    ]);
    let c = Cluster::start_with(1, &demoted).await;
    let other = info(c.metrics(1).await);
    assert!(other.contains("credentials=\"5\""), "{other}");
    assert_ne!(other, one, "alice's role changed");
}

/// A sign-in that another site's page sent (login CSRF: the attacker's own token, so that what
/// the victim does next is recorded as the attacker's) is refused before the token is looked
/// at; one from the dashboard's own page, a typed address or a client that is not a browser is
/// not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sign_in_sent_from_another_site_is_refused() {
    let c = Cluster::start_with(1, &team()).await;
    let sign_in = |site: Option<&'static str>| {
        let mut r = no_redirect()
            .post(c.node(1).url("/admin/login"))
            .form(&[("token", ALICE)]);
        if let Some(site) = site {
            r = r.header("sec-fetch-site", site);
        }
        async move {
            let r = r.send().await.unwrap();
            (r.status(), r.headers().get("set-cookie").is_some())
        }
    };
    for site in ["cross-site", "same-site"] {
        assert_eq!(
            sign_in(Some(site)).await,
            (StatusCode::FORBIDDEN, false),
            "{site}"
        );
    }
    for site in [Some("same-origin"), Some("none"), None] {
        assert_eq!(
            sign_in(site).await,
            (StatusCode::SEE_OTHER, true),
            "{site:?}"
        );
    }
}

/// The audit log says what an operator's change of a room's settings changed, from what to
/// what (the change's own entry says only that the room was updated): a doubled capacity and a
/// network let past the line are there under the operator's name, and a change that changes
/// nothing adds no note.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_log_says_what_a_change_of_settings_changed() {
    let c = Cluster::start_with(1, &team()).await;
    let room = |capacity: u64, bypass: Value| json!({"capacity": capacity, "admit_per_minute": 600, "bypass": bypass});
    let (s, v) = call(
        &c,
        ALICE,
        Method::PUT,
        "/v1/rooms/sale",
        Some(room(10, json!({}))),
    )
    .await;
    assert!(s.is_success(), "{v}");
    let widened = room(20, json!({"networks": ["203.0.113.0/24"]}));
    let (s, v) = call(
        &c,
        BOB,
        Method::PUT,
        "/v1/rooms/sale",
        Some(widened.clone()),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    // The same again changes nothing.
    let (s, v) = call(&c, BOB, Method::PUT, "/v1/rooms/sale", Some(widened)).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let notes = audit(&c, VERA, "room=sale&operator=bob", 2).await;
    let notes: Vec<&Value> = notes
        .iter()
        .filter(|e| e["command"] == "room_settings")
        .collect();
    assert_eq!(notes.len(), 1, "{notes:#?}");
    let what = notes[0]["detail"].as_str().unwrap();
    assert!(what.contains("config.capacity: 10 → 20"), "{what}");
    assert!(
        what.contains("\"addr\":\"203.0.113.0\",\"prefix\":24"),
        "{what}"
    );
    assert!(!what.contains("admit_per_minute"), "{what}");
}

/// The leader fetches a room's origin probe URL from inside the cluster's network and shows
/// how it answered: setting or changing that URL needs the admin role, so that an operator
/// cannot make the cluster reach and map its internal addresses. An operator may still change
/// the room's other settings, and keep or remove the probe an admin set.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_an_admin_points_the_origin_probe() {
    let c = Cluster::start_with(1, &team()).await;
    let with_probe = |url: &str, capacity: u64| {
        json!({
            "capacity": capacity,
            "origin": {"probe": {"url": url, "interval_secs": 60}, "min_samples": 1, "down_error_permille": 500}
        })
    };
    let metadata = with_probe("http://169.254.169.254/latest/meta-data/", 5);
    let (s, v) = call(
        &c,
        ALICE,
        Method::PUT,
        "/v1/rooms/p",
        Some(metadata.clone()),
    )
    .await;
    forbidden(s, &v, "an operator's probe URL");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("origin.probe.url"),
        "{v}"
    );
    // Nothing was written: the room does not exist.
    let (s, _) = call(&c, ALICE, Method::GET, "/v1/rooms/p", None).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let shop = with_probe("http://127.0.0.1:9/health", 5);
    let (s, v) = call(&c, ADA, Method::PUT, "/v1/rooms/p", Some(shop)).await;
    assert!(s.is_success(), "{v}");
    // The operator changes the capacity and keeps the admin's probe.
    let (s, v) = call(
        &c,
        ALICE,
        Method::PUT,
        "/v1/rooms/p",
        Some(with_probe("http://127.0.0.1:9/health", 7)),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    // But cannot point it elsewhere.
    let (s, v) = call(
        &c,
        ALICE,
        Method::PUT,
        "/v1/rooms/p",
        Some(with_probe("http://127.0.0.1:2379/", 7)),
    )
    .await;
    forbidden(s, &v, "an operator's changed probe URL");
    // Removing it is the operator's to do.
    let (s, v) = call(
        &c,
        ALICE,
        Method::PUT,
        "/v1/rooms/p",
        Some(json!({"capacity": 7})),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
}

/// An operator runs rooms but may not change the cluster's membership (403, and the membership
/// is unchanged); an admin may, over HTTP and gRPC.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_pauses_rooms_but_only_an_admin_changes_the_membership() {
    let c = Cluster::start_with(3, &team()).await;
    c.create_room("sale", room_config(10)).await;
    let (s, v) = call(&c, ALICE, Method::POST, "/v1/rooms/sale/pause", None).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert!(paused(&c, "sale").await);
    let remove = json!({"action": "remove", "id": 3});
    let (s, v) = call(
        &c,
        ALICE,
        Method::POST,
        "/v1/cluster/membership",
        Some(remove.clone()),
    )
    .await;
    forbidden(s, &v, "an operator's membership change");
    assert!(v["error"]["message"]
        .as_str()
        .unwrap()
        .contains("alice has the role operator"));
    let channel = grpc_channel(&c).await;
    let mut cluster = pb::cluster_client::ClusterClient::new(channel);
    let e = cluster
        .change_membership(authorized(
            ALICE,
            pb::MembershipRequest {
                action: "remove".into(),
                id: 3,
            },
        ))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e:?}");
    let voters = |token: &'static str| {
        let c = &c;
        async move {
            let (_, status) = call(c, token, Method::GET, "/v1/cluster", None).await;
            status["voters"].as_array().map_or(0, Vec::len)
        }
    };
    assert_eq!(voters(ALICE).await, 3);
    // The admin removes node 3, and reads a backup.
    let (s, v) = call(
        &c,
        ADA,
        Method::POST,
        "/v1/cluster/membership",
        Some(remove),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    wait_for(
        "node 1 sees two voters",
        Duration::from_secs(10),
        || async { voters(VERA).await == 2 },
    )
    .await;
    let r = c
        .http
        .get(c.node(1).url("/v1/cluster/backup"))
        .bearer_auth(ADA)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let status = cluster
        .status(authorized(ADA, pb::Empty {}))
        .await
        .unwrap()
        .into_inner();
    assert!(
        !status.nodes.iter().any(|n| n.id == 3 && n.voter),
        "{status:?}"
    );
    // The change is Raft's own entry, and in the audit log under the admin's name: what was
    // asked, written before the change (none is made unseen), and what was done, after it.
    wait_for(
        "the removal in the audit log",
        Duration::from_secs(10),
        || async {
            let (_, v) = call(&c, VERA, Method::GET, "/v1/audit", None).await;
            v["entries"].as_array().is_some_and(|es| {
                let at = |detail: &str| {
                    es.iter()
                        .find(|e| {
                            e["command"] == "cluster_change"
                                && e["detail"] == detail
                                && e["operator"] == "ada"
                        })
                        .and_then(|e| e["index"].as_u64())
                };
                matches!(
                    (at("removing node 3"), at("removed node 3")),
                    (Some(asked), Some(done)) if asked < done
                )
            })
        },
    )
    .await;
}

/// A wrong token is 401 and counts towards the client's backoff as before; past the free
/// guesses every credential from that client waits (429), the named ones included, on every
/// surface. A token is never the hash the configuration holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_tokens_are_refused_and_back_off_for_every_credential() {
    let c = Cluster::start_with(1, &team()).await;
    // Connected first: the backoff's first wait is a second.
    let mut admin = pb::admin_client::AdminClient::new(grpc_channel(&c).await);
    let hash = hex(&token_hash(ALICE));
    let (s, v) = call(&c, &hash, Method::GET, "/v1/rooms", None).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED, "the hash is no token: {v}");
    assert_eq!(v["error"]["code"], "unauthorized");
    let mut seen = vec![s];
    for _ in 0..6 {
        let (s, _) = call(
            &c,
            "a-wrong-guess-at-an-operator-token",
            Method::GET,
            "/v1/rooms",
            None,
        )
        .await;
        seen.push(s);
    }
    assert_eq!(&seen[..5], &[StatusCode::UNAUTHORIZED; 5], "{seen:?}");
    assert_eq!(seen[6], StatusCode::TOO_MANY_REQUESTS, "{seen:?}");
    for token in [ALICE, VERA, TOKEN] {
        let (s, v) = call(&c, token, Method::GET, "/v1/rooms", None).await;
        assert_eq!(s, StatusCode::TOO_MANY_REQUESTS, "{v}");
        assert_eq!(v["error"]["code"], "auth_throttled");
    }
    let e = admin
        .list_rooms(authorized(ALICE, pb::ListRoomsRequest::default()))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::ResourceExhausted, "{e:?}");
    wait_for("the backoff ends", Duration::from_secs(20), || async {
        c.http
            .get(c.node(1).url("/v1/rooms"))
            .bearer_auth(ALICE)
            .send()
            .await
            .is_ok_and(|r| r.status() == StatusCode::OK)
    })
    .await;
    // gRPC without a token, or with a wrong one: UNAUTHENTICATED.
    let e = admin
        .list_rooms(tonic::Request::new(pb::ListRoomsRequest::default()))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::Unauthenticated, "{e:?}");
}

/// A node refuses to start when one token's hash is configured for two names, or for a named
/// operator and the break-glass token, or an operator is named like the break-glass credential.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_token_for_two_names_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let ports = [(1, (free_port(), free_port(), free_port()))]
        .into_iter()
        .collect();
    let cases = [
        (
            operators(&[("alice", "operator", ALICE), ("mallory", "admin", ALICE)]),
            "alice and mallory have the same token_sha256",
        ),
        (
            operators(&[("mallory", "viewer", TOKEN)]),
            "operators.mallory.token_sha256 is the admin_token's hash",
        ),
        (
            operators(&[("admin", "viewer", ALICE)]),
            "the name admin is the admin_token's",
        ),
        (
            operators(&[("Alice", "viewer", ALICE)]),
            "operators: name \"Alice\"",
        ),
    ];
    for (extra, expect) in cases {
        let path = dir.path().join("node.toml");
        std::fs::write(&path, config(1, dir.path(), &ports, &extra)).unwrap();
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["serve", "--config", path.to_str().unwrap()])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("{expect}: the node started");
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        };
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!status.success(), "{expect}: started");
        assert!(err.contains(expect), "{expect}: {err}");
        assert!(out.stdout.is_empty(), "{expect}: it listened");
    }
}

/// After alice force-admits and bob revokes every session, the audit log names each with the
/// log index and the outcome, over HTTP, gRPC and `sluice ctl`; a command the cluster refused
/// is there with its rejection's code; the break-glass token still works and is recorded as
/// `admin`; visitors' joins and a pool's traffic are nobody's; the dashboard's actions and
/// sign-out are the signed-in operator's, and its "Audit log" page lists them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_log_names_who_did_what_when_and_with_what_outcome() {
    let c = Cluster::start_with(1, &team()).await;
    // The break-glass token makes the room.
    c.create_room("sale", json!({"capacity": 10, "admit_per_minute": 600000, "session_ttl_secs": 600, "waiter_ttl_secs": 600, "paused": true}))
        .await;
    for _ in 0..3 {
        c.join(1, "sale", None).await;
    }
    let (s, admitted) = call(
        &c,
        ALICE,
        Method::POST,
        "/v1/rooms/sale/admit",
        Some(json!({"count": 2})),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{admitted}");
    assert_eq!(admitted["count"], 2);
    let (s, revoked) = call(
        &c,
        BOB,
        Method::POST,
        "/v1/rooms/sale/revoke",
        Some(json!({"all": true})),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{revoked}");
    // Refused by the cluster: recorded with the rejection's code.
    let (s, v) = call(&c, ALICE, Method::POST, "/v1/rooms/ghost/pause", None).await;
    assert_eq!(s, StatusCode::NOT_FOUND, "{v}");
    // Refused at the edge (not a room's name): never reaches the log.
    let (s, _) = call(&c, ALICE, Method::POST, "/v1/rooms/NOT-A-NAME/pause", None).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    // A pool: made by alice; its traffic is nobody's.
    let (s, v) = call(
        &c,
        ALICE,
        Method::PUT,
        "/v1/pools/chat",
        Some(json!({"room_capacity": 5, "rooms_max": 2})),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let (s, v) = call(&c, ALICE, Method::POST, "/v1/pools/chat/assign", None).await;
    assert_eq!(s, StatusCode::OK, "{v}");

    audit(&c, VERA, "operator=alice", 3).await;
    let all = audit(&c, VERA, "", 5).await;
    // (Whether the room's entry policy is written apart depends on its configuration.)
    let made: Vec<(&str, &str, &str, &str)> = all
        .iter()
        .filter(|e| e["command"] != "set_entry_policy")
        .map(|e| {
            (
                e["operator"].as_str().unwrap(),
                e["room"].as_str().unwrap(),
                e["command"].as_str().unwrap(),
                e["outcome"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        made,
        [
            ("admin", "sale", "create_room", "ok"),
            ("admin", "sale", "room_settings", "ok"),
            ("alice", "sale", "force_admit", "ok"),
            ("bob", "sale", "revoke_all", "ok"),
            ("alice", "ghost", "pause", "room_not_found"),
            ("alice", "chat", "put_pool", "ok"),
        ],
        "{all:#?}"
    );
    let at = |command: &str| all.iter().position(|e| e["command"] == command).unwrap();
    let forced = &all[at("force_admit")];
    assert_eq!(forced["index"], admitted["applied_index"], "{forced}");
    assert_eq!(forced["detail"], "2 waiters");
    // A new room's note names what it set apart from the defaults.
    let made_with = all[at("room_settings")]["detail"].as_str().unwrap();
    assert!(
        made_with.contains("config.capacity: 100 → 10")
            && made_with.contains("config.paused: false → true"),
        "{made_with}"
    );
    assert_eq!(all[at("revoke_all")]["index"], revoked["applied_index"]);
    let time = forced["time"].as_str().unwrap();
    assert!(
        time.len() == 24 && time.ends_with('Z') && time.as_bytes()[10] == b'T',
        "RFC 3339: {time}"
    );
    assert!(forced["time_ms"].as_u64().unwrap() > 1_700_000_000_000);
    // Filters; pages that go on from `next`.
    let alices = audit(&c, VERA, "operator=alice", 3).await;
    assert!(
        alices.iter().all(|e| e["operator"] == "alice"),
        "{alices:?}"
    );
    assert_eq!(alices.len(), 3);
    let sale = audit(&c, VERA, "room=sale&operator=bob", 1).await;
    assert_eq!(sale.len(), 1);
    assert_eq!(sale[0]["command"], "revoke_all");
    let (_, first) = call(&c, VERA, Method::GET, "/v1/audit?limit=2", None).await;
    assert_eq!(first["entries"].as_array().unwrap().len(), 2);
    let next = first["next"].as_str().unwrap().to_string();
    let (_, second) = call(
        &c,
        VERA,
        Method::GET,
        &format!("/v1/audit?limit=2&after={next}"),
        None,
    )
    .await;
    assert_eq!(second["entries"][0], all[2], "{second}");
    let (_, since) = call(
        &c,
        VERA,
        Method::GET,
        &format!("/v1/audit?from={}", forced["time_ms"]),
        None,
    )
    .await;
    assert_eq!(since["entries"][0]["command"], "force_admit", "{since}");
    let (_, none) = call(&c, VERA, Method::GET, "/v1/audit?operator=nobody", None).await;
    assert_eq!(none["entries"], json!([]), "{none}");
    assert!(none["next"].is_null(), "{none}");
    // Bad questions: 400 with the field, before anything is read.
    for (query, code) in [
        ("limit=0", "invalid_field"),
        ("limit=1001", "invalid_field"),
        ("after=12", "invalid_field"),
        ("after=1.2.3.4", "invalid_field"),
        ("room=Not%20A%20Room", "invalid_field"),
        ("operator=ALICE", "invalid_field"),
        ("from=20&to=10", "invalid_field"),
        ("from=yesterday", "invalid_field"),
        ("to=2026-13-01T00:00:00Z", "invalid_field"),
        ("operater=alice", "invalid_query"),
    ] {
        let (s, v) = call(&c, VERA, Method::GET, &format!("/v1/audit?{query}"), None).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{query}: {v}");
        assert_eq!(v["error"]["code"], code, "{query}: {v}");
    }
    let r = c.http.get(c.node(1).url("/v1/audit")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);

    // gRPC: the same log.
    let mut admin = pb::admin_client::AdminClient::new(grpc_channel(&c).await);
    let bobs = admin
        .audit(authorized(
            VERA,
            pb::AuditRequest {
                operator: "bob".into(),
                ..Default::default()
            },
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(bobs.entries.len(), 1, "{bobs:?}");
    let e = &bobs.entries[0];
    assert_eq!(
        (
            e.operator.as_str(),
            e.room.as_str(),
            e.command.as_str(),
            e.outcome.as_str()
        ),
        ("bob", "sale", "revoke_all", "ok")
    );
    assert_eq!(Some(e.index), revoked["applied_index"].as_u64());
    let e = admin
        .audit(authorized(
            VERA,
            pb::AuditRequest {
                limit: 5_000,
                ..Default::default()
            },
        ))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e:?}");

    // `sluice ctl audit`, as a person reads it and as a script does.
    let ctl = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["ctl", "--url", &c.node(1).url("")])
            .args(args)
            .env("SLUICE_ADMIN_TOKEN", VERA)
            .env_remove("SLUICE_OUTPUT")
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let table = ctl(&["audit", "--room", "sale"]);
    let rows: Vec<Vec<&str>> = table
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows[0],
        ["TIME", "INDEX", "OPERATOR", "ROOM", "COMMAND", "DETAIL", "OUTCOME"],
        "{table}"
    );
    let alice_row = rows
        .iter()
        .find(|r| r.contains(&"force_admit"))
        .unwrap_or_else(|| panic!("{table}"));
    assert_eq!(alice_row[1], forced["index"].to_string(), "{table}");
    assert_eq!(alice_row[2], "alice");
    assert_eq!(alice_row.last(), Some(&"ok"));
    let bob_row = rows.iter().find(|r| r.contains(&"revoke_all")).unwrap();
    assert_eq!(bob_row[2], "bob", "{table}");
    let refused = ctl(&["audit", "--operator", "alice", "--from", "1h"]);
    assert!(
        refused
            .lines()
            .any(|l| l.contains("ghost") && l.contains("pause") && l.ends_with("room_not_found")),
        "{refused}"
    );
    let json: Value =
        serde_json::from_str(&ctl(&["-o", "json", "audit", "--operator", "bob"])).unwrap();
    assert_eq!(json["entries"][0]["command"], "revoke_all", "{json}");

    // The dashboard: alice's action and sign-out are hers; the page lists them.
    let cookie = sign_in(&c, ALICE).await;
    let (_, home) = page(&c, &cookie, "/admin").await;
    assert!(
        home.contains("Signed in as <strong>alice</strong> (operator)"),
        "{home}"
    );
    let csrf = csrf_of(&home);
    let (s, _, _) = post_form(
        &c,
        &cookie,
        "/admin/rooms/sale/action",
        &[("csrf", csrf.as_str()), ("action", "resume")],
    )
    .await;
    assert_eq!(s, StatusCode::SEE_OTHER);
    let resumed = audit(&c, VERA, "operator=alice", 4).await;
    assert_eq!(resumed[3]["command"], "resume", "{resumed:?}");
    let (s, listed) = page(&c, &cookie, "/admin/audit?operator=alice&since=hour").await;
    assert_eq!(s, StatusCode::OK);
    for seen in ["force_admit", "room_not_found", "resume", "ghost"] {
        assert!(listed.contains(seen), "{seen}: {listed}");
    }
    assert!(
        !listed.contains("revoke_all"),
        "bob's is filtered out: {listed}"
    );
    let (s, _) = page(&c, &cookie, "/admin/audit?since=forever").await;
    assert_eq!(s, StatusCode::OK);
    let (s, to, _) = post_form(&c, &cookie, "/admin/logout", &[("csrf", csrf.as_str())]).await;
    assert_eq!((s, to.as_str()), (StatusCode::SEE_OTHER, "/admin"));
    let out = audit(&c, VERA, "operator=alice", 5).await;
    assert_eq!(out[4]["command"], "end_credential", "{out:?}");
    assert_eq!(out[4]["room"], "");
    // Nobody's: the joins and the pool's assignment.
    let everything = audit(&c, VERA, "", all.len() + 2).await;
    assert!(
        !everything
            .iter()
            .any(|e| e["command"] == "join" || e["command"] == "pool_assign"),
        "{everything:#?}"
    );
}

/// A dashboard session names its operator and role in a signed cookie: a cookie of the
/// earlier format, or one whose role is raised, signs in no one; a viewer's cookie cannot be
/// made an admin's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_cookie_cannot_be_raised_to_another_role_or_name() {
    let c = Cluster::start_with(1, &team()).await;
    c.create_room("sale", room_config(10)).await;
    let cookie = sign_in(&c, VERA).await;
    let (name, value) = cookie.split_once('=').unwrap();
    assert_eq!(name, "sluice_admin");
    let parts: Vec<&str> = value.split('.').collect();
    assert_eq!(parts.len(), 6, "{value}");
    assert_eq!((parts[3], parts[4]), ("vera", "viewer"));
    let (_, home) = page(&c, &cookie, "/admin").await;
    let csrf = csrf_of(&home);
    let forged = [
        // The earlier format: id.issued.active.mac.
        format!(
            "sluice_admin={}.{}.{}.{}",
            parts[0], parts[1], parts[2], parts[5]
        ),
        format!("sluice_admin={}", value.replace(".viewer.", ".admin.")),
        format!(
            "sluice_admin={}",
            value.replace(".vera.viewer.", ".alice.operator.")
        ),
        format!(
            "sluice_admin={}",
            value.replace(".vera.viewer.", ".admin.admin.")
        ),
    ];
    for cookie in forged {
        let (s, text) = page(&c, &cookie, "/admin").await;
        assert_eq!(s, StatusCode::OK);
        assert!(
            text.contains("Operator token"),
            "signed in with {cookie}: {text}"
        );
        let (s, to, _) = post_form(
            &c,
            &cookie,
            "/admin/rooms/sale/action",
            &[("csrf", csrf.as_str()), ("action", "pause")],
        )
        .await;
        assert_eq!(
            (s, to.as_str()),
            (StatusCode::SEE_OTHER, "/admin"),
            "{cookie}"
        );
    }
    assert!(!paused(&c, "sale").await);
}

/// `sluice keygen --operator` prints the configuration lines with the hash of a fresh token,
/// and the token once, apart; a node started with those lines knows the operator by it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keygen_makes_an_operators_token_and_its_configuration() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["keygen", "--operator", "carol", "--role", "viewer"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let lines = String::from_utf8(out.stdout).unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    let token = err.lines().last().unwrap().trim().to_string();
    assert!(token.len() >= 32, "{err}");
    assert!(
        !lines.contains(&token),
        "the token stays out of the configuration"
    );
    assert!(
        lines.contains(&format!("token_sha256 = \"{}\"", hex(&token_hash(&token)))),
        "{lines}"
    );
    let c = Cluster::start_with(1, &lines).await;
    let (s, v) = call(&c, &token, Method::GET, "/v1/rooms", None).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let (s, v) = call(&c, &token, Method::POST, "/v1/rooms/x/pause", None).await;
    forbidden(s, &v, "carol is a viewer");
    for bad in [
        vec!["keygen", "--operator", "admin", "--role", "viewer"],
        vec!["keygen", "--operator", "Carol", "--role", "viewer"],
        vec!["keygen", "--operator", "carol", "--role", "root"],
        vec!["keygen", "--operator", "carol"],
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(&bad)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{bad:?}");
        assert!(out.stdout.is_empty(), "{bad:?}: {out:?}");
    }
}

/// A staff bypass token lets its holder past the gate for up to a week without a place: its
/// issue is in the audit log under the operator's name, with the token's id, label and end,
/// before the token exists; an issue the cluster refuses gives no token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issuing_a_staff_token_is_in_the_audit_log_under_its_operator() {
    let c = Cluster::start_with(1, &team()).await;
    let mut config = room_config(10);
    config["bypass"] = json!({"staff_tokens": true});
    c.create_room("sale", config).await;
    let (s, issued) = call(
        &c,
        ALICE,
        Method::POST,
        "/v1/rooms/sale/bypass/tokens",
        Some(json!({"ttl_secs": 3600, "label": "support desk"})),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{issued}");
    let id = issued["id"].as_str().unwrap();
    let entries = audit(&c, VERA, "operator=alice", 1).await;
    let note = entries
        .iter()
        .find(|e| e["command"] == "issue_staff_token")
        .unwrap_or_else(|| panic!("{entries:?}"));
    assert_eq!(note["room"], "sale", "{note}");
    assert_eq!(note["outcome"], "ok", "{note}");
    let detail = note["detail"].as_str().unwrap();
    assert!(
        detail.starts_with(id) && detail.contains("(support desk)"),
        "{note}"
    );
    // A viewer may not issue one; nothing is recorded for it.
    let (s, v) = call(
        &c,
        VERA,
        Method::POST,
        "/v1/rooms/sale/bypass/tokens",
        Some(json!({"ttl_secs": 60})),
    )
    .await;
    forbidden(s, &v, "viewer issuing a staff token");
    let issues = audit(&c, VERA, "", 1)
        .await
        .into_iter()
        .filter(|e| e["command"] == "issue_staff_token")
        .count();
    assert_eq!(issues, 1);
    // Its revocation is there too, under whoever revoked it, naming the room and the token.
    let (s, v) = call(
        &c,
        BOB,
        Method::POST,
        "/v1/rooms/sale/bypass/revoke",
        Some(json!({ "id": id })),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let by_bob = audit(&c, VERA, "operator=bob", 1).await;
    assert_eq!(by_bob[0]["command"], "revoke_staff_token", "{by_bob:?}");
    assert_eq!(by_bob[0]["detail"], id, "{by_bob:?}");
    assert_eq!(by_bob[0]["room"], "sale", "{by_bob:?}");
}

/// Behind a trusted proxy, gRPC knows its clients by the address the proxy names in
/// `x-forwarded-for`, as HTTP does: one client's wrong tokens put that client in backoff, not
/// the proxy, whose other clients' calls go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_behind_a_trusted_proxy_backs_off_the_client_not_the_proxy() {
    let c = Cluster::start_with(1, &format!("trusted_proxies = [\"127.0.0.1\"]\n{}", team())).await;
    let mut admin = pb::admin_client::AdminClient::new(grpc_channel(&c).await);
    let from = |client: &str, token: &str| {
        let mut req = authorized(token, pb::ListRoomsRequest::default());
        req.metadata_mut()
            .insert("x-forwarded-for", client.parse().unwrap());
        req
    };
    let mut codes = Vec::new();
    for _ in 0..7 {
        let e = admin
            .list_rooms(from("198.51.100.7", "a-wrong-guess-at-an-operator-token"))
            .await
            .unwrap_err();
        codes.push(e.code());
    }
    assert_eq!(codes[6], tonic::Code::ResourceExhausted, "{codes:?}");
    // The guesser is held off, even with a right token…
    let e = admin
        .list_rooms(from("198.51.100.7", ALICE))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::ResourceExhausted, "{e:?}");
    // …while another client behind the same proxy is served.
    admin
        .list_rooms(from("198.51.100.8", ALICE))
        .await
        .expect("another client of the proxy is not held off");
}

/// `GET /v1/overview`: every room together, the rooms' own figures added up; the same on the
/// dashboard's first page and in `/metrics`; a viewer reads it, nobody without a credential.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_overview_adds_every_room_up() {
    let c = Cluster::start_with(1, &team()).await;
    c.create_room("one", room_config(1)).await;
    c.create_room("two", room_config(5)).await;
    for _ in 0..3 {
        c.join(1, "one", None).await;
    }
    c.join(1, "two", None).await;
    let (s, rooms) = c
        .admin(1, Method::GET, "/v1/rooms?consistent=true", None)
        .await;
    assert_eq!(s, StatusCode::OK, "{rooms}");
    let rooms = rooms["rooms"].as_array().unwrap().clone();
    let (s, o) = call(&c, VERA, Method::GET, "/v1/overview", None).await;
    assert_eq!(s, StatusCode::OK, "{o}");
    let sum = |get: &dyn Fn(&Value) -> &Value| -> u64 {
        rooms.iter().map(|r| get(r).as_u64().unwrap()).sum()
    };
    assert_eq!(
        (o["rooms"].as_u64(), o["open"].as_u64()),
        (Some(2), Some(2))
    );
    // One admitted in each, two waiting for the first room's one place.
    assert_eq!(
        (o["waiting"].as_u64(), o["active"].as_u64()),
        (Some(2), Some(2))
    );
    assert_eq!(o["waiting"].as_u64(), Some(sum(&|r| &r["waiting"])));
    assert_eq!(o["active"].as_u64(), Some(sum(&|r| &r["active"])));
    for f in [
        "joined",
        "admitted",
        "left",
        "abandoned",
        "expired",
        "revoked",
    ] {
        assert_eq!(
            o["totals"][f].as_u64(),
            Some(sum(&|r| &r["totals"][f])),
            "{f}: {o}"
        );
    }
    assert_eq!(o["totals"]["joined"], 4);

    let anonymous = reqwest::get(c.node(1).url("/v1/overview")).await.unwrap();
    assert_eq!(anonymous.status(), StatusCode::UNAUTHORIZED);
    // gRPC says the same, to a viewer, and nothing to a caller without a token.
    let mut admin = pb::admin_client::AdminClient::new(grpc_channel(&c).await);
    let g = admin
        .overview(authorized(VERA, pb::Empty {}))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (g.rooms, g.waiting, g.active, g.totals.unwrap().joined),
        (2, 2, 2, 4)
    );
    let refused = admin.overview(pb::Empty {}).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::Unauthenticated);

    let metrics = c.metrics(1).await;
    for line in [
        "sluice_rooms 2",
        "sluice_all_rooms_waiting 2",
        "sluice_all_rooms_active 2",
        "sluice_all_rooms_joined 4",
        "sluice_all_rooms_admitted 2",
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line}: {metrics}");
    }

    let cookie = sign_in(&c, VERA).await;
    // The dashboard's live figures carry the same, for the line under the list.
    let live: Value = reqwest::Client::new()
        .get(c.node(1).url("/admin/stats.json"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        (&live["all"]["waiting"], &live["all"]["active"]),
        (&json!(2), &json!(2)),
        "{live}"
    );
    let (s, home) = page(&c, &cookie, "/admin").await;
    assert_eq!(s, StatusCode::OK);
    assert!(home.contains("All 2 rooms, 2 open"), "{home}");
    assert!(home.contains("id=\"all-waiting\">2<"), "{home}");
    assert!(
        home.contains("In all rooms: 4 places handed out, 2 admitted"),
        "{home}"
    );
}

/// The sale's timeline on the dashboard: an operator adds phases and removes one still to come;
/// a phase that has started is frozen (no remove button, and the API refuses to change it),
/// and the refusal changes nothing else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_keeps_the_sale_s_timeline_and_a_started_phase_is_frozen() {
    let c = Cluster::start(1).await;
    c.create_room("sale", room_config(2)).await;
    let cookie = sign_in(&c, TOKEN).await;
    let (_, html) = page(&c, &cookie, "/admin/rooms/sale").await;
    assert!(html.contains("No phases"), "{html}");
    let csrf = csrf_of(&html);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let soon = (now + 2).to_string();
    let later = (now + 7_200).to_string();
    for (name, at, capacity) in [
        ("Second drop", later.as_str(), "9"),
        ("Public", soon.as_str(), "5"),
    ] {
        let (s, to, text) = post_form(
            &c,
            &cookie,
            "/admin/rooms/sale/action",
            &[
                ("csrf", csrf.as_str()),
                ("action", "phase_add"),
                ("name", name),
                ("starts_at.unix", at),
                ("capacity", capacity),
                ("notice", "The public sale is open."),
                ("announce", "on"),
            ],
        )
        .await;
        assert_eq!(
            (s, to.as_str()),
            (StatusCode::SEE_OTHER, "/admin/rooms/sale"),
            "{text}"
        );
    }
    // In order of their starts, whatever order they were added in.
    let (_, room) = call(
        &c,
        TOKEN,
        Method::GET,
        "/v1/rooms/sale?consistent=true",
        None,
    )
    .await;
    let phases = room["config"]["phases"].as_array().unwrap().clone();
    let names: Vec<&str> = phases.iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["Public", "Second drop"], "{room}");
    assert_eq!(phases[0]["capacity"], 5);
    // The public phase starts: the room takes its capacity and notice.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let (_, r) = call(
            &c,
            TOKEN,
            Method::GET,
            "/v1/rooms/sale?consistent=true",
            None,
        )
        .await;
        if r["config"]["capacity"] == 5 {
            assert_eq!(r["notice"]["text"], "The public sale is open.", "{r}");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the phase never started: {r}"
        );
        // The leader is woken for the start: no entry needs to be sent.
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let (_, html) = page(&c, &cookie, "/admin/rooms/sale").await;
    assert!(
        html.contains("in effect") && html.contains("Remove Second drop"),
        "{html}"
    );
    assert!(
        !html.contains("Remove Public"),
        "a started phase is frozen: {html}"
    );
    // Changing the started phase is refused, and nothing else of the body is taken.
    let mut body = room["config"].clone();
    body["capacity"] = json!(7);
    body["phases"][0]["capacity"] = json!(6);
    let (s, v) = call(&c, TOKEN, Method::PUT, "/v1/rooms/sale", Some(body)).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    assert_eq!(v["error"]["field"], "phases", "{v}");
    let (_, r) = call(
        &c,
        TOKEN,
        Method::GET,
        "/v1/rooms/sale?consistent=true",
        None,
    )
    .await;
    assert_eq!(
        r["config"]["capacity"], 5,
        "the refused body changed nothing: {r}"
    );
    // A phase in the past cannot be added either.
    let (s, _, text) = post_form(
        &c,
        &cookie,
        "/admin/rooms/sale/action",
        &[
            ("csrf", csrf.as_str()),
            ("action", "phase_add"),
            ("name", "Late"),
            ("starts_at.unix", "1000"),
        ],
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{text}");
    assert!(text.contains("frozen"), "{text}");
    // The one still to come is removed.
    let (s, _, _) = post_form(
        &c,
        &cookie,
        "/admin/rooms/sale/action",
        &[
            ("csrf", csrf.as_str()),
            ("action", "phase_remove"),
            ("index", "1"),
        ],
    )
    .await;
    assert_eq!(s, StatusCode::SEE_OTHER);
    let (_, r) = call(
        &c,
        TOKEN,
        Method::GET,
        "/v1/rooms/sale?consistent=true",
        None,
    )
    .await;
    assert_eq!(r["config"]["phases"].as_array().unwrap().len(), 1, "{r}");
    // The start is in the ledger, in words too.
    let (_, ledger) = call(
        &c,
        TOKEN,
        Method::GET,
        "/v1/rooms/sale/ledger?limit=100",
        None,
    )
    .await;
    assert!(ledger.to_string().contains("phase_started"), "{ledger}");
}
