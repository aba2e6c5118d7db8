//! Bypass rules at the gate, tried as an attacker and as an operator would, against real
//! `sluice serve` processes: paths (payment callbacks, static assets), client networks and
//! staff tokens pass without an admission and never take a place; paths dressed up to look like
//! a bypassed one, forged, foreign, expired and revoked tokens do not pass.

mod common;

use common::*;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use std::time::Duration;

/// A gate check of `room` on node `id` with the given headers: the status and the
/// `X-Sluice-Bypass` answer header.
async fn gate_with(
    c: &Cluster,
    id: u64,
    method: Method,
    path_and_query: &str,
    headers: &[(&str, &str)],
) -> (StatusCode, Option<String>) {
    let mut req = c.http.request(method, c.node(id).url(path_and_query));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let r = req.send().await.unwrap();
    let kind = r
        .headers()
        .get("x-sluice-bypass")
        .map(|v| v.to_str().unwrap().to_string());
    (r.status(), kind)
}

/// Asks the gate of room `b` on node 1 about a request to `target` with `method`, as nginx
/// tells it.
async fn proxied(c: &Cluster, target: &str, method: &str) -> (StatusCode, Option<String>) {
    gate_with(
        c,
        1,
        Method::GET,
        "/gate/b/check",
        &[("x-original-uri", target), ("x-original-method", method)],
    )
    .await
}

fn bypass_room() -> Value {
    let mut config = room_config(1);
    config["bypass"] = json!({
        "paths": [{"prefix": "/pay/callback", "methods": ["POST"]}, {"prefix": "/static/"}],
        "networks": ["198.51.100.0/24", "2001:db8::/32"]
    });
    config
}

/// A sample of `name{room=…,rule=…}` in the metrics text.
fn sample(metrics: &str, series: &str) -> Option<f64> {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bypass_paths_and_networks_pass_the_gate_without_taking_a_place() {
    let c = Cluster::start_with(1, "trusted_proxies = [\"127.0.0.1\"]").await;
    c.create_room("b", bypass_room()).await;
    let (_, room) = c.admin(1, Method::GET, "/v1/rooms/b", None).await;
    assert_eq!(
        room["config"]["bypass"],
        json!({"paths": [{"prefix": "/pay/callback", "methods": ["POST"]}, {"prefix": "/static/", "methods": []}],
               "networks": ["198.51.100.0/24", "2001:db8::/32"], "staff_tokens": true}),
        "{room}"
    );

    // The payment provider's callback, and the static assets, pass without a ticket.
    let path = Some("path".to_string());
    assert_eq!(
        proxied(&c, "/pay/callback", "POST").await,
        (StatusCode::OK, path.clone())
    );
    assert_eq!(
        proxied(&c, "/pay/callback/42?sig=x", "POST").await,
        (StatusCode::OK, path.clone())
    );
    assert_eq!(
        proxied(&c, "/static/app.css", "GET").await,
        (StatusCode::OK, path.clone())
    );
    // Envoy: the original path as the gate's query, the method as the gate request's own.
    assert_eq!(
        gate_with(&c, 1, Method::POST, "/gate/b/check?/pay/callback", &[]).await,
        (StatusCode::OK, path.clone())
    );
    // Traefik's headers.
    assert_eq!(
        gate_with(
            &c,
            1,
            Method::GET,
            "/gate/b/check",
            &[
                ("x-forwarded-uri", "/static/x.js"),
                ("x-forwarded-method", "GET")
            ]
        )
        .await,
        (StatusCode::OK, path.clone())
    );

    // Everything else needs an admission: another method, a longer name, and every way of
    // dressing a protected path up as a bypassed one.
    for (target, method) in [
        ("/pay/callback", "GET"),
        ("/pay/callbacks", "POST"),
        ("/static", "GET"),
        ("/checkout", "POST"),
        ("/pay/callback/../../checkout", "POST"),
        ("/static/../checkout", "GET"),
        ("/static/%2e%2e/checkout", "GET"),
        ("/pay/callback%2F..%2F..%2Fcheckout", "POST"),
        ("/pay/callback;x/../../checkout", "POST"),
        ("/static//../checkout", "GET"),
        ("//static/app.css", "GET"),
        ("/static/x#/../../checkout", "GET"),
    ] {
        let (status, kind) = proxied(&c, target, method).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{method} {target}");
        assert_eq!(kind, None, "{method} {target}");
    }
    // nginx passes a raw request line's bytes on in X-Original-URI, and the client's own
    // X-Forwarded-Uri untouched: the unreadable first is no target, the second is not read.
    let r = c
        .http
        .get(c.node(1).url("/gate/b/check"))
        .header(
            "x-original-uri",
            reqwest::header::HeaderValue::from_bytes(b"/checkout?\xff").unwrap(),
        )
        .header("x-forwarded-uri", "/static/app.css")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert!(r.headers().get("x-sluice-bypass").is_none());
    // Without the proxy's word on the path, nothing is a bypassed path.
    assert_eq!(
        gate_with(&c, 1, Method::GET, "/gate/b/check", &[]).await.0,
        StatusCode::UNAUTHORIZED
    );

    // The monitoring network passes; its neighbour does not.
    let c = &c;
    let from = |ip: &'static str| async move {
        gate_with(
            c,
            1,
            Method::GET,
            "/gate/b/check",
            &[("x-forwarded-for", ip)],
        )
        .await
    };
    assert_eq!(
        from("198.51.100.9").await,
        (StatusCode::OK, Some("network".into()))
    );
    assert_eq!(
        from("2001:db8:1::5").await,
        (StatusCode::OK, Some("network".into()))
    );
    assert_eq!(from("198.51.101.9").await.0, StatusCode::UNAUTHORIZED);

    // The gRPC gate answers alike.
    let mut grpc = sluice_grpc::pb::visitor_client::VisitorClient::connect(format!(
        "http://{}",
        c.node(1).grpc
    ))
    .await
    .unwrap();
    let check = |target: &str, method: &str| sluice_grpc::pb::GateRequest {
        room: "b".into(),
        target: target.into(),
        method: method.into(),
        ..Default::default()
    };
    let r = grpc
        .check(check("/pay/callback", "POST"))
        .await
        .unwrap()
        .into_inner();
    assert!(
        r.admitted && r.bypassed == "path" && r.visitor_id.is_empty(),
        "{r:?}"
    );
    let r = grpc
        .check(check("/pay/../checkout", "POST"))
        .await
        .unwrap()
        .into_inner();
    assert!(!r.admitted && r.bypassed.is_empty(), "{r:?}");

    // Nobody took a place or a session, and every pass was counted.
    let (_, room) = c.admin(1, Method::GET, "/v1/rooms/b", None).await;
    assert_eq!(room["waiting"], 0, "{room}");
    assert_eq!(room["active"], 0, "{room}");
    assert_eq!(room["totals"]["joined"], 0, "{room}");
    let m = c.metrics(1).await;
    assert_eq!(
        sample(&m, "sluice_gate_bypassed_total{room=\"b\",rule=\"path\"}"),
        Some(6.0),
        "{m}"
    );
    assert_eq!(
        sample(
            &m,
            "sluice_gate_bypassed_total{room=\"b\",rule=\"network\"}"
        ),
        Some(2.0)
    );

    // Rules that would let in more than meant, or that are not what they seem, are refused
    // with the field named, and the room keeps its rules.
    for (bypass, field) in [
        (json!({"paths": [{"prefix": "/"}]}), "bypass.paths"),
        (json!({"paths": [{"prefix": "/a/../b"}]}), "bypass.paths"),
        (
            json!({"paths": [{"prefix": "/pay", "methods": ["post"]}]}),
            "bypass.paths",
        ),
        (
            json!({"paths": vec![json!({"prefix": "/a"}); 17]}),
            "bypass.paths",
        ),
        (json!({"networks": ["10.0.0.1/8"]}), "bypass.networks"),
        (json!({"networks": ["0.0.0.0/0"]}), "bypass.networks"),
        (json!({"networks": ["not a network"]}), "bypass.networks"),
        (
            json!({"networks": vec!["10.0.0.0/8"; 33]}),
            "bypass.networks",
        ),
        (json!({"paths": [{"prefix": "/a", "extra": 1}]}), ""),
    ] {
        let mut config = bypass_room();
        config["bypass"] = bypass.clone();
        let (s, v) = c.admin(1, Method::PUT, "/v1/rooms/b", Some(config)).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{bypass} {v}");
        if !field.is_empty() {
            assert_eq!(v["error"]["field"], field, "{bypass} {v}");
        }
    }
    let (_, after) = c.admin(1, Method::GET, "/v1/rooms/b", None).await;
    assert_eq!(after["config"]["bypass"], room["config"]["bypass"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn staff_tokens_pass_on_every_node_until_revoked_and_forgeries_never() {
    let c = Cluster::start(3).await;
    c.create_room("s", room_config(1)).await;
    c.create_room("other", room_config(1)).await;

    // Issuing needs the operator, sane lifetimes and labels.
    let r = c
        .http
        .post(c.node(1).url("/v1/rooms/s/bypass/tokens"))
        .json(&json!({"ttl_secs": 3600}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    for (body, field) in [
        (json!({"ttl_secs": 0}), "ttl_secs"),
        (json!({"ttl_secs": 7 * 86_400 + 1}), "ttl_secs"),
        (json!({"ttl_secs": 60, "label": "a\nb"}), "label"),
        (json!({"ttl_secs": 60, "label": "x".repeat(65)}), "label"),
    ] {
        let (s, v) = c
            .admin(
                1,
                Method::POST,
                "/v1/rooms/s/bypass/tokens",
                Some(body.clone()),
            )
            .await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{body} {v}");
        assert_eq!(v["error"]["field"], field, "{v}");
    }
    let (s, v) = c
        .admin(
            1,
            Method::POST,
            "/v1/rooms/nope/bypass/tokens",
            Some(json!({"ttl_secs": 60})),
        )
        .await;
    assert_eq!(s, StatusCode::NOT_FOUND, "{v}");

    let (s, issued) = c
        .admin(
            1,
            Method::POST,
            "/v1/rooms/s/bypass/tokens",
            Some(json!({"ttl_secs": 3600, "label": "support desk"})),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{issued}");
    let token = issued["token"].as_str().unwrap().to_string();
    let id = issued["id"].as_str().unwrap().to_string();

    // Any node lets it through, as a header or as the browser's cookie; never into another
    // room, and never after tampering.
    let staff = |room: &'static str, t: String, node: u64| {
        let c = &c;
        async move {
            gate_with(
                c,
                node,
                Method::GET,
                &format!("/gate/{room}/check"),
                &[("x-sluice-bypass", t.as_str())],
            )
            .await
        }
    };
    for node in 1..=3 {
        assert_eq!(
            staff("s", token.clone(), node).await,
            (StatusCode::OK, Some("token".into())),
            "node {node}"
        );
    }
    let cookie = format!("sluice_bypass_s={token}");
    assert_eq!(
        gate_with(
            &c,
            2,
            Method::GET,
            "/gate/s/check",
            &[("cookie", cookie.as_str())]
        )
        .await,
        (StatusCode::OK, Some("token".into()))
    );
    assert_eq!(
        staff("other", token.clone(), 1).await.0,
        StatusCode::UNAUTHORIZED
    );
    let mut parts: Vec<String> = token.split('.').map(str::to_string).collect();
    // Another label byte: the payload's fourth-last character changed.
    let mut payload: Vec<char> = parts[2].chars().collect();
    let at = payload.len() - 4;
    payload[at] = if payload[at] == 'x' { 'y' } else { 'x' };
    parts[2] = payload.into_iter().collect();
    assert_eq!(
        staff("s", parts.join("."), 1).await.0,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        staff("s", "b1.k.x.y".into(), 1).await.0,
        StatusCode::UNAUTHORIZED
    );
    // A visitor's ticket is not a staff token.
    let visitor = c.join(1, "other", None).await;
    let ticket = visitor["ticket"].as_str().unwrap().to_string();
    assert_eq!(staff("other", ticket, 1).await.0, StatusCode::UNAUTHORIZED);

    // The staff page gives the browser the cookie; a bad token gets the form again.
    let no_redirect = no_redirect();
    let page = no_redirect
        .get(c.node(1).url("/wait/s/bypass"))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    assert!(page.text().await.unwrap().contains("name=\"token\""));
    // In the visitor's language.
    for (lang, words) in [
        ("de", "Eingang für Mitarbeitende"),
        ("fr", "Entrée du personnel"),
        ("es", "Entrada del personal"),
    ] {
        let page = no_redirect
            .get(c.node(1).url("/wait/s/bypass"))
            .header("accept-language", lang)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(
            page.contains(words) && page.contains(&format!("lang=\"{lang}\"")),
            "{page}"
        );
    }
    let r = no_redirect
        .post(c.node(1).url("/wait/s/bypass"))
        .form(&[("token", token.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let set = r.headers()["set-cookie"].to_str().unwrap().to_string();
    assert!(
        set.starts_with(&format!("sluice_bypass_s={token};")),
        "{set}"
    );
    assert!(
        set.contains("HttpOnly") && set.contains("Max-Age=3"),
        "{set}"
    );
    let r = no_redirect
        .post(c.node(1).url("/wait/other/bypass"))
        .form(&[("token", token.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert!(r.headers().get("set-cookie").is_none());
    assert!(r.text().await.unwrap().contains("another room"));

    // Staff take no place.
    let (_, room) = c.admin(1, Method::GET, "/v1/rooms/s", None).await;
    assert_eq!(room["totals"]["joined"], 0, "{room}");

    // Revoked on node 3, it stops on every node.
    let (s, v) = c
        .admin(
            3,
            Method::POST,
            "/v1/rooms/s/bypass/revoke",
            Some(json!({"id": id})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    for node in 1..=3 {
        wait_for(
            "the revocation reaches every node",
            Duration::from_secs(10),
            || {
                let t = token.clone();
                let staff = &staff;
                async move { staff("s", t, node).await.0 == StatusCode::UNAUTHORIZED }
            },
        )
        .await;
    }
    let r = no_redirect
        .post(c.node(2).url("/wait/s/bypass"))
        .form(&[("token", token.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert!(r.text().await.unwrap().contains("revoked"));
    for body in [
        json!({}),
        json!({"id": "zz"}),
        json!({"id": id, "token": token}),
    ] {
        let (s, v) = c
            .admin(
                1,
                Method::POST,
                "/v1/rooms/s/bypass/revoke",
                Some(body.clone()),
            )
            .await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{body} {v}");
    }
    // A dashboard session's id (first bit set) is no staff token's: refused before it is
    // written, so that revocations cannot end (or take the places of) sign-outs. A room that
    // does not exist has no tokens to revoke.
    let before = c.last_log_index(1).await;
    let session_id = format!("80{}", "11".repeat(15));
    let (s, v) = c
        .admin(
            1,
            Method::POST,
            "/v1/rooms/s/bypass/revoke",
            Some(json!({ "id": session_id })),
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    assert_eq!(v["error"]["field"], "id", "{v}");
    let (s, v) = c
        .admin(
            1,
            Method::POST,
            "/v1/rooms/nowhere/bypass/revoke",
            Some(json!({ "id": "11".repeat(16) })),
        )
        .await;
    assert_eq!(s, StatusCode::NOT_FOUND, "{v}");
    assert_eq!(
        c.last_log_index(1).await,
        before,
        "nothing written for either"
    );
    // The audit log names the room and the token each revocation ended.
    let revoked = |v: &Value| -> Vec<Value> {
        v["entries"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|e| e["command"] == "revoke_staff_token")
            .cloned()
            .collect()
    };
    wait_for(
        "the revocation in node 1's audit log",
        Duration::from_secs(10),
        || async {
            !revoked(&c.admin(1, Method::GET, "/v1/audit?room=s", None).await.1).is_empty()
        },
    )
    .await;
    let (_, v) = c.admin(1, Method::GET, "/v1/audit?room=s", None).await;
    let revoked = revoked(&v);
    assert_eq!(revoked.len(), 1, "{v}");
    assert_eq!(revoked[0]["detail"], id.as_str(), "{v}");
    assert_eq!(revoked[0]["room"], "s", "{v}");
    assert_eq!(revoked[0]["outcome"], "ok", "{v}");

    // A short-lived token ends by itself.
    let (_, short) = c
        .admin(
            1,
            Method::POST,
            "/v1/rooms/s/bypass/tokens",
            Some(json!({"ttl_secs": 2})),
        )
        .await;
    let short = short["token"].as_str().unwrap().to_string();
    assert_eq!(staff("s", short.clone(), 2).await.0, StatusCode::OK);
    wait_for("the short token expires", Duration::from_secs(10), || {
        let t = short.clone();
        let staff = &staff;
        async move { staff("s", t, 2).await.0 == StatusCode::UNAUTHORIZED }
    })
    .await;

    // A room that turns staff tokens off refuses the ones it issued, and issues no more.
    let (_, fresh) = c
        .admin(
            1,
            Method::POST,
            "/v1/rooms/s/bypass/tokens",
            Some(json!({"ttl_secs": 600})),
        )
        .await;
    let fresh = fresh["token"].as_str().unwrap().to_string();
    let mut config = room_config(1);
    config["bypass"] = json!({"staff_tokens": false});
    let (s, v) = c.admin(1, Method::PUT, "/v1/rooms/s", Some(config)).await;
    assert!(s.is_success(), "{v}");
    wait_for(
        "staff tokens are off on node 3",
        Duration::from_secs(10),
        || {
            let t = fresh.clone();
            let staff = &staff;
            async move { staff("s", t, 3).await.0 == StatusCode::UNAUTHORIZED }
        },
    )
    .await;
    let (s, v) = c
        .admin(
            1,
            Method::POST,
            "/v1/rooms/s/bypass/tokens",
            Some(json!({"ttl_secs": 60})),
        )
        .await;
    assert_eq!(s, StatusCode::CONFLICT, "{v}");
    assert_eq!(v["error"]["code"], "staff_tokens_off");

    // A room deleted and made again under the same name is another room: a token of the old
    // one (leaked, never revoked by id) does not let into the new one.
    let (_, old) = c
        .admin(
            1,
            Method::POST,
            "/v1/rooms/other/bypass/tokens",
            Some(json!({"ttl_secs": 600})),
        )
        .await;
    let old = old["token"].as_str().unwrap().to_string();
    assert_eq!(staff("other", old.clone(), 1).await.0, StatusCode::OK);
    let (s, v) = c.admin(1, Method::DELETE, "/v1/rooms/other", None).await;
    assert!(s.is_success(), "{v}");
    c.create_room("other", room_config(1)).await;
    for node in 1..=3 {
        wait_for(
            "the new room refuses the old room's token",
            Duration::from_secs(10),
            || {
                let t = old.clone();
                let staff = &staff;
                async move { staff("other", t, node).await.0 == StatusCode::UNAUTHORIZED }
            },
        )
        .await;
    }
    let r = no_redirect
        .post(c.node(1).url("/wait/other/bypass"))
        .form(&[("token", old.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert!(r.text().await.unwrap().contains("earlier room"));
}

/// The operator's dashboard: a staff token issued there works at the gate until revoked there,
/// and "Create" with the name of a room that exists refuses, leaving the room as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_issues_and_revokes_staff_tokens_and_never_resets_a_room() {
    let c = Cluster::start(1).await;
    c.create_room("d", json!({"capacity": 2, "paused": true}))
        .await;
    let http = no_redirect();
    let cookie = c.dashboard_cookie(&http, 1).await;
    let page = http
        .get(c.node(1).url("/admin/rooms/d"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let csrf = csrf_of(&page);
    let post = |path: &'static str, form: Vec<(&'static str, String)>| {
        let (http, url, cookie, csrf) = (
            http.clone(),
            c.node(1).url(path),
            cookie.clone(),
            csrf.clone(),
        );
        async move {
            let mut form = form;
            form.push(("csrf", csrf));
            let r = http
                .post(url.clone())
                .header("cookie", &cookie)
                .form(&form)
                .send()
                .await
                .unwrap();
            // A done action sends the browser to the room's page (post, redirect, get).
            if r.status() == StatusCode::SEE_OTHER {
                let to = r.headers()["location"].to_str().unwrap().to_string();
                let base = url.split("/admin").next().unwrap().to_string();
                let r = http
                    .get(format!("{base}{to}"))
                    .header("cookie", &cookie)
                    .send()
                    .await
                    .unwrap();
                return (r.status(), r.text().await.unwrap());
            }
            (r.status(), r.text().await.unwrap())
        }
    };

    let (s, html) = post("/admin/rooms", vec![("name", "d".into())]).await;
    assert_eq!(s, StatusCode::CONFLICT, "{html}");
    assert!(html.contains("already exists"), "{html}");
    let (_, room) = c.admin(1, Method::GET, "/v1/rooms/d", None).await;
    assert_eq!(
        (
            room["config"]["capacity"].as_u64(),
            room["config"]["paused"].as_bool()
        ),
        (Some(2), Some(true)),
        "{room}"
    );

    let (s, html) = post(
        "/admin/rooms/d/action",
        vec![
            ("action", "bypass_issue".into()),
            ("ttl_hours", "8".into()),
            ("label", "door".into()),
        ],
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{html}");
    let token = html
        .split("/bypass: ")
        .nth(1)
        .and_then(|rest| rest.split('<').next())
        .unwrap()
        .to_string();
    let id = html.split("(id ").nth(1).unwrap()[..32].to_string();
    let c = &c;
    let gate = || {
        let t = token.clone();
        async move {
            gate_with(
                c,
                1,
                Method::GET,
                "/gate/d/check",
                &[("x-sluice-bypass", t.as_str())],
            )
            .await
            .0
        }
    };
    assert_eq!(gate().await, StatusCode::OK);
    let (s, html) = post(
        "/admin/rooms/d/action",
        vec![("action", "bypass_revoke".into()), ("id", id)],
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{html}");
    assert_eq!(gate().await, StatusCode::UNAUTHORIZED);

    // The bypass rules are part of the configuration form.
    assert!(html.contains("name=\"bypass.paths\""), "{html}");
}
