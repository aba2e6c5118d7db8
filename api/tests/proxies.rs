//! The shipped Caddy and HAProxy samples, run as they are (only their addresses replaced) by
//! the real Debian packages in front of a Sluice node and an application, and tried as a
//! visitor and an attacker would: sent to the waiting page without a ticket, let through with an
//! admission, a payment callback let through by the room's bypass rule (and a look-alike not),
//! a bypass header the client forged ignored, the operator surfaces out of reach.

mod common;

use common::*;
use reqwest::{Method, StatusCode};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// A process killed when dropped.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The application: answers every request with its method and path, one per connection.
async fn application() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut buf = vec![0u8; 16_384];
                let mut got = 0;
                while !buf[..got].windows(4).any(|w| w == b"\r\n\r\n") && got < buf.len() {
                    match s.read(&mut buf[got..]).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => got += n,
                    }
                }
                let head = String::from_utf8_lossy(&buf[..got]).to_string();
                let line = head.lines().next().unwrap_or_default();
                let body = format!("application: {line}");
                let reply = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = s.write_all(reply.as_bytes()).await;
            });
        }
    });
    port
}

async fn sluice() -> Cluster {
    let c = Cluster::start_with(
        1,
        "trusted_proxies = [\"127.0.0.1\"]\n[limits]\nvisitor_requests_per_second = 100000\nvisitor_burst = 100000",
    )
    .await;
    let mut config = room_config(10);
    config["bypass"] = json!({"paths": [{"prefix": "/pay/callback", "methods": ["POST"]}]});
    c.create_room("shop", config).await;
    c
}

/// What a visitor, an attacker and a payment provider see through the proxy at `base`.
async fn try_as_people_would(c: &Cluster, base: &str) {
    let http = no_redirect();
    let get = |path: &str| http.get(format!("{base}{path}"));
    // Wait for the proxy to answer.
    wait_for("the proxy", Duration::from_secs(20), || async {
        get("/wait/shop")
            .send()
            .await
            .is_ok_and(|r| r.status() == StatusCode::OK)
    })
    .await;

    // Without a ticket: to the waiting page, back to the page asked for.
    let r = get("/tickets?day=2").send().await.unwrap();
    assert_eq!(r.status(), StatusCode::FOUND);
    assert_eq!(r.headers()["location"], "/wait/shop?next=/tickets?day=2");
    let page = get("/wait/shop?next=/tickets")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("/assets/wait.js"), "{page}");
    assert_eq!(
        get("/assets/wait.js").send().await.unwrap().status(),
        StatusCode::OK
    );

    // Joined through the proxy's visitor API: admitted, and the application answers.
    let joined: serde_json::Value = http
        .post(format!("{base}/v1/rooms/shop/join"))
        .json(&json!({}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(joined["state"], "admitted", "{joined}");
    let ticket = joined["ticket"].as_str().unwrap();
    let r = get("/tickets")
        .header("cookie", format!("other=1; sluice_ticket_shop={ticket}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(
        r.text().await.unwrap(),
        "application: GET /tickets HTTP/1.1"
    );

    // The payment provider's callback passes without a ticket; the same path with another
    // method, a look-alike path, and a client claiming the callback's path in a header do not.
    let r = http
        .post(format!("{base}/pay/callback"))
        .body("paid")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(
        r.text().await.unwrap(),
        "application: POST /pay/callback HTTP/1.1"
    );
    for (method, path) in [
        (Method::GET, "/pay/callback"),
        (Method::POST, "/pay/callbacks"),
        (Method::POST, "/pay/%63allback"),
    ] {
        let r = http
            .request(method.clone(), format!("{base}{path}"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::FOUND, "{method} {path}");
    }
    for (k, v) in [
        ("x-original-uri", "/pay/callback"),
        ("x-original-method", "POST"),
        ("x-forwarded-uri", "/pay/callback"),
        ("x-forwarded-method", "POST"),
    ] {
        let r = http
            .post(format!("{base}/secret"))
            .header(k, v)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::FOUND, "a forged {k} passed");
    }
    let (_, room) = c.admin(1, Method::GET, "/v1/rooms/shop", None).await;
    assert_eq!(
        (room["active"].as_u64(), room["waiting"].as_u64()),
        (Some(1), Some(0)),
        "only the visitor took a place: {room}"
    );
    let metrics = c.metrics(1).await;
    assert!(
        metrics.contains("sluice_gate_bypassed_total{room=\"shop\",rule=\"path\"} 1"),
        "{metrics}"
    );

    // Sluice's operator surfaces are not reachable through the proxy.
    for path in [
        "/v1/rooms/shop",
        "/v1/rooms/shop/queue",
        "/v1/cluster",
        "/admin",
        "/metrics",
        "/gate/shop/check",
    ] {
        let r = get(path).bearer_auth(TOKEN).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::NOT_FOUND, "{path}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_caddy_sample_keeps_the_line() {
    if !prerequisites(
        "proxies::the_caddy_sample_keeps_the_line",
        &[Need::Program("caddy")],
    ) {
        return;
    }
    let c = sluice().await;
    let app = application().await;
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let sample = std::fs::read_to_string(repo().join("deploy/caddy/Caddyfile")).unwrap();
    let config = sample
        .replace("shop.example.com {", &format!("http://127.0.0.1:{port} {{"))
        .replace("10.0.0.1:8080 10.0.0.2:8080 10.0.0.3:8080", &c.node(1).http)
        .replace("127.0.0.1:3000", &format!("127.0.0.1:{app}"));
    assert!(
        !config.contains("10.0.0.") && !config.contains(":3000"),
        "{config}"
    );
    let file = dir.path().join("Caddyfile");
    std::fs::write(&file, config).unwrap();
    let _caddy = Proc(
        Command::new(program("caddy"))
            .args(["run", "--adapter", "caddyfile", "--config"])
            .arg(&file)
            .env("HOME", dir.path())
            .env("XDG_DATA_HOME", dir.path())
            .env("XDG_CONFIG_HOME", dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("caddy (Debian package caddy)"),
    );
    try_as_people_would(&c, &format!("http://127.0.0.1:{port}")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_haproxy_sample_keeps_the_line() {
    if !prerequisites(
        "proxies::the_haproxy_sample_keeps_the_line",
        &[Need::Program("haproxy")],
    ) {
        return;
    }
    let c = sluice().await;
    let app = application().await;
    let (port, gate) = (free_port(), free_port());
    let dir = tempfile::tempdir().unwrap();
    let sample = std::fs::read_to_string(repo().join("deploy/haproxy/haproxy.cfg")).unwrap();
    let lua = repo().join("deploy/haproxy/sluice-gate.lua");
    let config = sample
        .replace("/etc/haproxy/sluice-gate.lua", lua.to_str().unwrap())
        .replace("bind :80", &format!("bind 127.0.0.1:{port}"))
        .replace("127.0.0.1:8081", &format!("127.0.0.1:{gate}"))
        .replace("10.0.0.1:8080", &c.node(1).http)
        .replace("    server s2 10.0.0.2:8080 check\n", "")
        .replace("    server s3 10.0.0.3:8080 check\n", "")
        .replace("127.0.0.1:3000", &format!("127.0.0.1:{app}"));
    assert!(
        !config.contains("10.0.0.") && !config.contains(":3000"),
        "{config}"
    );
    let file = dir.path().join("haproxy.cfg");
    std::fs::write(&file, config).unwrap();
    let _haproxy = Proc(
        Command::new(program("haproxy"))
            .args(["-db", "-f"])
            .arg(&file)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("haproxy (Debian package haproxy)"),
    );
    try_as_people_would(&c, &format!("http://127.0.0.1:{port}")).await;
}
