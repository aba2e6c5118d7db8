//! `sluice dev`: one command gives a newcomer a node with a small demo room, a landing page that
//! links it, and an operator token.

mod common;

use common::*;
use reqwest::StatusCode;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

/// Kills the child when the test ends, passing or failing.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dev_mode_serves_a_demo_room() {
    let dir = tempfile::tempdir().unwrap();
    let (h, g, r) = (free_port(), free_port(), free_port());
    let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args([
            "dev",
            "--data-dir",
            dir.path().join("data").to_str().unwrap(),
        ])
        .args([
            "--http-addr",
            &format!("127.0.0.1:{h}"),
            "--grpc-addr",
            &format!("127.0.0.1:{g}"),
            "--raft-addr",
            &format!("127.0.0.1:{r}"),
        ])
        .env_remove("SLUICE_ADMIN_TOKEN")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let _guard = Guard(child);
    let mut printed = String::new();
    let token = loop {
        let mut line = String::new();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "dev exited early: {printed}"
        );
        printed.push_str(&line);
        if let Some(t) = line.trim().strip_prefix("Operator token: ") {
            break t.split(' ').next().unwrap().to_string();
        }
    };
    // The generated secrets are readable by their owner only.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(dir.path().join("data/dev-secrets.toml"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    // The token is also in a file of its own, for `sluice ctl --token-file`, and as private.
    let file = dir.path().join("data/admin-token");
    assert_eq!(std::fs::read_to_string(&file).unwrap().trim(), token);
    let mode = std::fs::metadata(&file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    assert!(token.len() >= 32, "{token}");
    assert!(
        printed.contains(&format!("http://127.0.0.1:{h}/wait/demo?next=/demo")),
        "{printed}"
    );
    assert!(
        printed.contains("/admin") && printed.contains("/openapi.json"),
        "{printed}"
    );
    let http = no_redirect();
    let base = format!("http://127.0.0.1:{h}");
    let landing = http.get(&base).send().await.unwrap().text().await.unwrap();
    assert!(
        landing.contains("/wait/demo")
            && landing.contains("/admin")
            && landing.contains("/openapi.json")
    );
    // Looking at the page takes no place: it asks the visitor to join.
    let r = http.get(format!("{base}/wait/demo")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert!(r.headers().get("set-cookie").is_none());
    assert!(r.text().await.unwrap().contains("Join the line"));
    // Three visitors join (the page's form): two are admitted (capacity 2) and sent on; the
    // third is sent to the page, which shows its place.
    let mut joined = Vec::new();
    for _ in 0..3 {
        let r = http.post(format!("{base}/wait/demo")).send().await.unwrap();
        let cookie = r.headers()["set-cookie"].to_str().unwrap().to_string();
        assert!(cookie.starts_with("sluice_ticket_demo="), "{cookie}");
        let location = r.headers()["location"].to_str().unwrap().to_string();
        joined.push((r.status(), location, cookie));
    }
    assert_eq!(
        (joined[0].0, joined[0].1.as_str()),
        (StatusCode::SEE_OTHER, "/")
    );
    assert_eq!(
        (joined[1].0, joined[1].1.as_str()),
        (StatusCode::SEE_OTHER, "/")
    );
    assert_eq!(
        (joined[2].0, joined[2].1.as_str()),
        (StatusCode::SEE_OTHER, "/wait/demo?joined=1&next=/")
    );
    let r = http
        .get(format!("{base}{}", joined[2].1))
        .header("cookie", joined[2].2.split(';').next().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert!(r.text().await.unwrap().contains("You are in line"));
    // The landing page's link brings an admitted visitor to the demo's stand-in shop, which
    // says so; anyone else is shown the way to the line.
    assert!(landing.contains("/wait/demo?next=/demo"), "{landing}");
    let page = |cookie: Option<String>| {
        let mut req = http.get(format!("{base}/demo"));
        if let Some(c) = cookie {
            req = req.header("cookie", c);
        }
        async move { req.send().await.unwrap().text().await.unwrap() }
    };
    let admitted = joined[0].2.split(';').next().unwrap().to_string();
    assert!(page(Some(admitted)).await.contains("You are in"));
    let waiting = joined[2].2.split(';').next().unwrap().to_string();
    assert!(page(Some(waiting)).await.contains("Not admitted yet"));
    assert!(page(None).await.contains("/wait/demo?next=/demo"));
    // A `next` that would close a script stays percent-encoded, in an attribute: the page has no
    // inline script at all (its Content-Security-Policy forbids them), only its script file.
    let r = http
        .get(format!(
            "{base}/wait/demo?next=/%3C/script%3E%3Cscript%3Ealert(document.domain)%3C/script%3E"
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let body = r.text().await.unwrap();
    assert!(body.contains("Join the line"));
    assert!(!body.contains("<script>alert"), "{body}");
    assert_eq!(body.matches("<script").count(), 1, "{body}");
    assert!(body.contains("<script src=\"/assets/wait.js\" defer></script>"));
    // The printed token works for the operator API.
    let r = http
        .get(format!("{base}/v1/rooms/demo"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let v: serde_json::Value = r.json().await.unwrap();
    assert_eq!(
        (
            v["config"]["capacity"].as_u64(),
            v["active"].as_u64(),
            v["waiting"].as_u64()
        ),
        (Some(2), Some(2), Some(1)),
        "two admitted, the third in line (looking at the page took no place)"
    );
    // A second `sluice dev` on the same data directory says what is wrong, in words.
    let (h2, g2, r2) = (free_port(), free_port(), free_port());
    let second = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args([
            "dev",
            "--data-dir",
            dir.path().join("data").to_str().unwrap(),
        ])
        .args([
            "--http-addr",
            &format!("127.0.0.1:{h2}"),
            "--grpc-addr",
            &format!("127.0.0.1:{g2}"),
            "--raft-addr",
            &format!("127.0.0.1:{r2}"),
        ])
        .env_remove("SLUICE_ADMIN_TOKEN")
        .env("RUST_LOG", "error")
        .env("RUST_BACKTRACE", "0")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(!second.status.success());
    assert!(
        err.contains("another process (another Sluice node?) is using the data directory"),
        "{err}"
    );
}
