//! Deployment: the systemd unit verifies; a cluster restarted node by node under load loses no
//! acknowledged write and clients see only retriable errors; a backup restores into a new cluster
//! with the same state; TLS between nodes and to clients, made with deploy/tls/make-certs.sh.

mod common;

use common::*;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Runs `tool args… file` on `text` written to a file of its own; whether it passed, and what
/// it printed.
fn checked(tool: &str, args: &[&str], name: &str, text: &str) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(name);
    std::fs::write(&file, text).unwrap();
    let out = Command::new(program(tool))
        .args(args)
        .arg(&file)
        .output()
        .unwrap_or_else(|e| panic!("{tool}: {e}"));
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), said)
}

/// The Kubernetes manifests validate offline against the Kubernetes API's schemas
/// (`kubernetes-validate --strict`: unknown fields refused too), and the compose file against the
/// compose specification's schema (`check-jsonschema`); each tool refuses a broken copy, so the
/// check is not a formality.
#[test]
fn the_kubernetes_manifests_and_the_compose_file_pass_their_schemas() {
    if !prerequisites(
        "deploy::the_kubernetes_manifests_and_the_compose_file_pass_their_schemas",
        &[
            Need::Program("kubernetes-validate"),
            Need::Program("check-jsonschema"),
        ],
    ) {
        return;
    }
    let k8s = std::fs::read_to_string(repo().join("deploy/k8s/sluice.yaml")).unwrap();
    let validate = |text: &str| checked("kubernetes-validate", &["--strict"], "k8s.yaml", text);
    let (ok, said) = validate(&k8s);
    assert!(ok, "{said}");
    for kind in ["statefulset", "service", "configmap", "networkpolicy"] {
        assert!(
            said.contains(&format!("resource {kind}/")),
            "{kind}: {said}"
        );
    }
    assert!(k8s.contains("replicas: 3"));
    let (ok, said) = validate(&k8s.replace("replicas: 3", "replicas: three"));
    assert!(!ok, "a broken manifest passed: {said}");
    let (ok, said) = validate(&k8s.replace("  replicas: 3", "  replicas: 3\n  replicaz: 3"));
    assert!(!ok, "an unknown field passed: {said}");

    let compose = std::fs::read_to_string(repo().join("deploy/compose/compose.yaml")).unwrap();
    let validate = |text: &str| {
        checked(
            "check-jsonschema",
            &["--builtin-schema", "vendor.compose-spec"],
            "compose.yaml",
            text,
        )
    };
    let (ok, said) = validate(&compose);
    assert!(ok, "{said}");
    let (ok, said) = validate(&compose.replacen("image:", "imagez:", 1));
    assert!(!ok, "a broken compose file passed: {said}");
}

/// `log_format = "json"`: every line a node writes, from its start to its stop, warnings
/// included, is one JSON object with its time, level, target and fields (a log collector needs
/// no pattern for any of them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_are_one_json_object_on_every_line() {
    let dir = tempfile::tempdir().unwrap();
    let ports = BTreeMap::from([(1, (free_port(), free_port(), free_port()))]);
    let path = dir.path().join("n1.toml");
    // A bound the open files cannot hold: the node says so in a warning.
    let extra = "log_format = \"json\"\n[limits]\nconnections_max = 1000000\n";
    std::fs::write(&path, config(1, dir.path(), &ports, extra)).unwrap();
    let log = dir.path().join("n1.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["serve", "--config"])
        .arg(&path)
        .env("RUST_LOG", "info")
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let url = format!("http://127.0.0.1:{}", ports[&1].0);
    let http = reqwest::Client::new();
    let ready = sluice_testkit::node::wait_ready(
        &http,
        BTreeMap::from([(1, url.clone())]),
        Duration::from_secs(30),
    )
    .await;
    if let Err(e) = ready {
        let _ = child.kill();
        panic!("{e}: {}", std::fs::read_to_string(&log).unwrap_or_default());
    }
    // Some answers, refused ones among them.
    let r = http.get(format!("{url}/v1/rooms")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let r = http.get(format!("{url}/healthz")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    // Stopped as a service manager stops it; it must be gone within a deadline.
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the node did not stop within 30 s of SIGTERM");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(status.success(), "{status}");
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    assert!(lines.len() > 5, "{text}");
    for l in &lines {
        assert!(
            l["timestamp"].is_string() && l["level"].is_string() && l["target"].is_string(),
            "{l}"
        );
        assert!(l["fields"]["message"].is_string(), "{l}");
    }
    let said = |level: &str, words: &str| {
        lines.iter().find(|l| {
            l["level"] == level && l["fields"]["message"].as_str().unwrap().contains(words)
        })
    };
    // Structured fields stay fields: the start-up budget line's figures are numbers.
    let budget = said("WARN", "what this node holds at once").expect("the budget warning");
    assert!(budget["fields"]["http_connections"].is_u64(), "{budget}");
    assert!(said("INFO", "stopped").is_some(), "{text}");
}

/// The compose proxy configuration is the tested one (`nginx/sluice.conf`, which the browser
/// test runs) but for its upstream addresses, server name and header comment; and nginx accepts
/// it.
#[test]
fn the_compose_nginx_configuration_is_the_tested_one() {
    let tested = std::fs::read_to_string(repo().join("deploy/nginx/sluice.conf")).unwrap();
    let compose = std::fs::read_to_string(repo().join("deploy/compose/nginx.conf")).unwrap();
    let body = |text: &str| -> String {
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| {
                l.replace("10.0.0.1:8080", "sluice-1:8080")
                    .replace("10.0.0.2:8080", "sluice-2:8080")
                    .replace("10.0.0.3:8080", "sluice-3:8080")
                    .replace("127.0.0.1:3000", "app:80")
                    .replace("server_name shop.example.com;", "server_name _;")
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(body(&tested), body(&compose));
    // nginx's own check of the shipped configuration, inside a minimal main configuration.
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("nginx.conf");
    std::fs::write(
        &conf,
        format!(
            "pid {d}/nginx.pid;\nerror_log {d}/error.log;\nevents {{}}\nhttp {{\naccess_log off;\n{tested}\n}}\n",
            d = dir.path().display()
        ),
    )
    .unwrap();
    if !prerequisites(
        "deploy::the_compose_nginx_configuration_is_the_tested_one",
        &[Need::Program("nginx")],
    ) {
        return;
    }
    let out = Command::new(program("nginx"))
        .args(["-t", "-c"])
        .arg(&conf)
        .args(["-p"])
        .arg(dir.path())
        .output()
        .expect("nginx");
    assert!(
        out.status.success(),
        "nginx -t: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_systemd_unit_verifies() {
    if !prerequisites(
        "deploy::the_systemd_unit_verifies",
        &[Need::Program("systemd-analyze")],
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // The unit as shipped, with ExecStart pointed at the binary built here.
    let unit = std::fs::read_to_string(repo().join("deploy/systemd/sluice@.service")).unwrap();
    assert!(unit.contains("ExecStart=/usr/local/bin/sluice serve"));
    std::fs::write(
        dir.path().join("sluice@.service"),
        unit.replace("/usr/local/bin/sluice", env!("CARGO_BIN_EXE_sluice")),
    )
    .unwrap();
    let out = Command::new(program("systemd-analyze"))
        .arg("verify")
        .arg(dir.path().join("sluice@node1.service"))
        .output()
        .expect("systemd-analyze");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stderr.trim().is_empty(),
        "systemd-analyze verify: {stderr}"
    );
    for key in [
        "User=sluice",
        "ProtectSystem=strict",
        "NoNewPrivileges=yes",
        "StateDirectory=sluice/%i",
    ] {
        assert!(unit.contains(key), "{key}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolling_restart_under_load_loses_nothing_and_errors_are_retriable() {
    // One client address drives the load and the final reads: lift the per-client visitor limit.
    let mut c = Cluster::start_with(
        3,
        "[limits]\nvisitor_requests_per_second = 100000\nvisitor_burst = 100000\n",
    )
    .await;
    c.create_room("roll", room_config(1_000_000)).await;
    let nodes: Vec<String> = c.nodes.values().map(|n| n.http.clone()).collect();
    let acked: Arc<Mutex<Vec<String>>> = Arc::default();
    let errors: Arc<Mutex<BTreeMap<String, u64>>> = Arc::default();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut clients = Vec::new();
    for w in 0..4usize {
        let (nodes, acked, errors, stop, http) = (
            nodes.clone(),
            acked.clone(),
            errors.clone(),
            stop.clone(),
            c.http.clone(),
        );
        clients.push(tokio::spawn(async move {
            let mut i = w;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                i += 1;
                let url = format!("http://{}/v1/rooms/roll/join", nodes[i % nodes.len()]);
                match http
                    .post(&url)
                    .timeout(Duration::from_secs(10))
                    .send()
                    .await
                {
                    Ok(r) if r.status() == StatusCode::OK => {
                        let v: Value = r.json().await.unwrap();
                        acked
                            .lock()
                            .unwrap()
                            .push(v["ticket"].as_str().unwrap().to_string());
                    }
                    Ok(r) => {
                        let status = r.status();
                        let v: Value = r.json().await.unwrap_or(Value::Null);
                        *errors
                            .lock()
                            .unwrap()
                            .entry(format!(
                                "{status} {}",
                                v["error"]["code"].as_str().unwrap_or("?")
                            ))
                            .or_default() += 1;
                    }
                    Err(_) => {
                        *errors
                            .lock()
                            .unwrap()
                            .entry("connection".into())
                            .or_default() += 1
                    }
                }
            }
        }));
    }
    // Restart every node in turn: SIGTERM, wait for a clean exit, start, wait until all are ready.
    for id in 1..=3u64 {
        let before = acked.lock().unwrap().len();
        wait_for("writes before the restart", Duration::from_secs(20), || {
            let n = acked.lock().unwrap().len();
            async move { n >= before + 20 }
        })
        .await;
        let mut child = c.nodes.get_mut(&id).unwrap().child.take().unwrap();
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        )
        .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            assert!(Instant::now() < deadline, "node {id} did not stop");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert!(status.success(), "node {id} exited with {status:?}");
        c.spawn(id);
        c.wait_ready().await;
    }
    let before = acked.lock().unwrap().len();
    wait_for(
        "writes after the last restart",
        Duration::from_secs(20),
        || {
            let n = acked.lock().unwrap().len();
            async move { n >= before + 20 }
        },
    )
    .await;
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    for t in clients {
        t.await.unwrap();
    }
    // Only retriable errors: unavailable while a node stops or a leader is elected.
    let errors = errors.lock().unwrap().clone();
    for (kind, n) in &errors {
        let retriable = kind == "connection"
            || kind.starts_with("503 ")
            || kind.starts_with("504 ")
            || kind.starts_with("429 ");
        assert!(retriable, "{n} × non-retriable error {kind}");
    }
    // Every acknowledged join survived.
    let acked = acked.lock().unwrap().clone();
    assert!(acked.len() > 80, "too few writes: {}", acked.len());
    for t in &acked {
        assert_eq!(consistent_status(&c, "roll", t).await["state"], "admitted");
    }
}

/// A visitor's linearizable status read through node 1; it must answer 200.
async fn consistent_status(c: &Cluster, room: &str, ticket: &str) -> Value {
    let path = format!("/v1/rooms/{room}/status?consistent=true");
    let (s, v) = c.visitor(1, Method::GET, &path, Some(ticket)).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    v
}

fn run_sluice(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "sluice {}: {}{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

async fn digests(c: &Cluster) -> Vec<Value> {
    let mut v = Vec::new();
    for id in c.nodes.keys() {
        v.push(
            c.admin(*id, Method::GET, "/v1/cluster/digest", None)
                .await
                .1,
        );
    }
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backup_restores_into_a_new_cluster_with_the_same_state() {
    let a = Cluster::start(3).await;
    a.create_room("keep", room_config(2)).await;
    let mut tickets = Vec::new();
    for _ in 0..5 {
        tickets.push(
            a.join(2, "keep", None).await["ticket"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    a.admin(
        1,
        Method::PUT,
        "/v1/pools/chat",
        Some(json!({"room_capacity": 3})),
    )
    .await;
    a.admin(1, Method::POST, "/v1/pools/chat/assign", None)
        .await;
    // Let every node apply everything, then back up from one of them.
    let deadline = Instant::now() + Duration::from_secs(10);
    let agreed = loop {
        let d = digests(&a).await;
        if d.windows(2).all(|w| w[0] == w[1]) {
            break d[0].clone();
        }
        assert!(
            Instant::now() < deadline,
            "the source cluster did not converge: {d:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let backup = a.dir.path().join("backup.sluice");
    let out = run_sluice(&[
        "ctl",
        "--url",
        &a.node(3).url(""),
        "--token",
        TOKEN,
        "--output",
        "json",
        "backup",
        "--out",
        backup.to_str().unwrap(),
    ]);
    assert!(out.contains("\"applied_index\""), "{out}");

    // A new cluster on other ports and directories, seeded with the backup (nobody bootstraps).
    let dir = tempfile::tempdir().unwrap();
    let ports: BTreeMap<u64, (u16, u16, u16)> = (1..=3)
        .map(|id| (id, (free_port(), free_port(), free_port())))
        .collect();
    let mut b = Cluster {
        dir,
        nodes: BTreeMap::new(),
        http: a.http.clone(),
    };
    let b_dir = b.dir.path().to_path_buf();
    let new_config = |id: u64| {
        let path = b_dir.join(format!("n{id}.toml"));
        std::fs::write(
            &path,
            config(id, &b_dir, &ports, "").replace("bootstrap = true", "bootstrap = false"),
        )
        .unwrap();
        path
    };
    // A node that is not among the new cluster's peers is refused (it could never start).
    let stray = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["restore", "--backup", backup.to_str().unwrap(), "--config"])
        .arg(new_config(1))
        .args(["--node-id", "9"])
        .output()
        .unwrap();
    assert!(!stray.status.success());
    assert!(
        String::from_utf8_lossy(&stray.stderr).contains("not among"),
        "{stray:?}"
    );
    for id in 1..=3u64 {
        let path = new_config(id);
        // Node 3 is restored as compose and Kubernetes run it: node 1's configuration, with
        // the node id and data directory given on the command line.
        let (restore_config, node_id, data_dir) = if id == 3 {
            (new_config(1), "3", b_dir.join("n3"))
        } else {
            (path.clone(), "", PathBuf::new())
        };
        let mut args = vec![
            "restore".to_string(),
            "--backup".into(),
            backup.to_str().unwrap().into(),
            "--config".into(),
            restore_config.to_str().unwrap().into(),
        ];
        if id == 3 {
            args.extend([
                "--node-id".into(),
                node_id.into(),
                "--data-dir".into(),
                data_dir.to_str().unwrap().into(),
            ]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = run_sluice(&args);
        assert!(
            out.contains(agreed["content_digest"].as_str().unwrap()),
            "{out}"
        );
        b.add_node(id, ports[&id], "127.0.0.1", path);
    }
    b.wait_ready().await;
    // Restoring into a directory that already holds a node is refused.
    let again = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args([
            "restore",
            "--backup",
            backup.to_str().unwrap(),
            "--config",
            b.node(1).config.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(!again.status.success());
    // Same state: the content digest matches on every node; visitors and pools are there.
    let d = digests(&b).await;
    for v in &d {
        assert_eq!(v["content_digest"], agreed["content_digest"], "{v}");
    }
    for t in &tickets {
        consistent_status(&b, "keep", t).await;
    }
    let (_, pool) = b
        .admin(2, Method::GET, "/v1/pools/chat?consistent=true", None)
        .await;
    assert_eq!(pool["total"], 1);
    // And the new cluster takes writes.
    assert_eq!(b.join(3, "keep", None).await["state"], "waiting");
}

/// An HTTPS client that trusts the test CA `ca` (PEM).
fn https_client(ca: &[u8]) -> reqwest::Client {
    reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(ca).unwrap())
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

fn make_certs(dir: &Path, specs: &[&str]) {
    let out = Command::new("bash")
        .arg(repo().join("deploy/tls/make-certs.sh"))
        .arg(dir)
        .args(specs)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_between_nodes_and_to_clients() {
    if !prerequisites(
        "deploy::tls_between_nodes_and_to_clients",
        &[Need::Program("openssl")],
    ) {
        return;
    }
    let tls = tempfile::tempdir().unwrap();
    make_certs(
        tls.path(),
        &[
            "node1:127.0.0.1,localhost",
            "node2:127.0.0.1,localhost",
            "node3:127.0.0.1,localhost",
        ],
    );
    let section = |n: u64, d: &Path| {
        format!(
            "[tls]\nca = \"{d}/ca.pem\"\ncert = \"{d}/node{n}.pem\"\nkey = \"{d}/node{n}-key.pem\"\n\n[http_tls]\ncert = \"{d}/node{n}.pem\"\nkey = \"{d}/node{n}-key.pem\"\n",
            d = d.display()
        )
    };
    // Three nodes, each with its own certificate from the CA.
    let dir = tempfile::tempdir().unwrap();
    let ports: BTreeMap<u64, (u16, u16, u16)> = (1..=4)
        .map(|id| (id, (free_port(), free_port(), free_port())))
        .collect();
    let three: BTreeMap<u64, (u16, u16, u16)> = ports
        .iter()
        .filter(|(id, _)| **id <= 3)
        .map(|(k, v)| (*k, *v))
        .collect();
    let ca = std::fs::read(tls.path().join("ca.pem")).unwrap();
    let https = https_client(&ca);
    let mut c = Cluster {
        dir,
        nodes: BTreeMap::new(),
        http: https.clone(),
    };
    for id in 1..=3u64 {
        let path = c.dir.path().join(format!("n{id}.toml"));
        let text = config(id, c.dir.path(), &three, "");
        std::fs::write(&path, format!("{text}\n{}", section(id, tls.path()))).unwrap();
        c.add_node(id, ports[&id], "localhost", path);
    }
    // Clients connect over HTTPS (the harness talks https:// to every node).
    let url = |n: &Node, p: &str| format!("https://{}{p}", n.http);
    let deadline = Instant::now() + Duration::from_secs(30);
    for n in c.nodes.values() {
        while !https
            .get(url(n, "/readyz"))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            assert!(
                Instant::now() < deadline,
                "node {} not ready over TLS",
                n.id
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let r = https
        .put(url(c.node(1), "/v1/rooms/secure"))
        .bearer_auth(TOKEN)
        .json(&room_config(10))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    let r = https
        .post(url(c.node(2), "/v1/rooms/secure/join"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    // Plain HTTP to a TLS node fails.
    let plain = reqwest::Client::new()
        .get(format!("http://{}/readyz", c.node(1).http))
        .timeout(Duration::from_secs(5))
        .send()
        .await;
    assert!(plain.map(|r| !r.status().is_success()).unwrap_or(true));
    // A node whose certificate comes from another CA cannot join.
    let rogue_tls = tempfile::tempdir().unwrap();
    make_certs(rogue_tls.path(), &["node4:127.0.0.1,localhost"]);
    let path = c.dir.path().join("n4.toml");
    let text = config(4, c.dir.path(), &ports, "").replace("bootstrap = true", "bootstrap = false");
    std::fs::write(&path, format!("{text}\n{}", section(4, rogue_tls.path()))).unwrap();
    c.add_node(4, ports[&4], "localhost", path);
    let (h, g, r) = ports[&4];
    let learner = json!({"id": 4, "raft_addr": format!("127.0.0.1:{r}"), "http_addr": format!("localhost:{h}"), "grpc_addr": format!("localhost:{g}")});
    let r = https
        .post(url(c.node(1), "/v1/cluster/learners"))
        .bearer_auth(TOKEN)
        .json(&learner)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    for _ in 0..10 {
        https
            .post(url(c.node(1), "/v1/rooms/secure/join"))
            .send()
            .await
            .unwrap();
    }
    // Wait until the honest nodes have all applied the writes, then look at the rogue one.
    wait_for(
        "the honest nodes apply every write",
        Duration::from_secs(20),
        || {
            let (https, nodes) = (
                https.clone(),
                [
                    url(c.node(1), "/v1/cluster"),
                    url(c.node(2), "/v1/cluster"),
                    url(c.node(3), "/v1/cluster"),
                ],
            );
            async move {
                let mut seen = Vec::new();
                for u in nodes {
                    let Ok(r) = https.get(u).bearer_auth(TOKEN).send().await else {
                        return false;
                    };
                    let Ok(v) = r.json::<Value>().await else {
                        return false;
                    };
                    seen.push((
                        v["applied_index"].as_u64().unwrap_or(0),
                        v["last_log_index"].as_u64().unwrap_or(1),
                    ));
                }
                seen.iter().all(|(a, l)| a == l) && seen.windows(2).all(|w| w[0] == w[1])
            }
        },
    )
    .await;
    let leader_view: Value = https
        .get(url(c.node(1), "/v1/cluster"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let leader = leader_view["leader"].as_u64().unwrap();
    let status: Value = https
        .get(url(c.node(leader), "/v1/cluster"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        status["replication"]["4"]["matched_index"]
            .as_u64()
            .unwrap_or(0),
        0,
        "the rogue node received the log: {status}"
    );
    let rogue = reqwest::Client::builder()
        .add_root_certificate(
            reqwest::Certificate::from_pem(
                &std::fs::read(rogue_tls.path().join("ca.pem")).unwrap(),
            )
            .unwrap(),
        )
        .build()
        .unwrap();
    let r: Value = rogue
        .get(url(c.node(4), "/v1/cluster"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(r["applied_index"], 0, "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_clients_that_stall_are_cut_off() {
    if !prerequisites(
        "deploy::tls_clients_that_stall_are_cut_off",
        &[Need::Program("openssl")],
    ) {
        return;
    }
    use rustls_pki_types::pem::PemObject;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio_rustls::rustls;
    let tls = tempfile::tempdir().unwrap();
    make_certs(tls.path(), &["node1:127.0.0.1,localhost"]);
    let ports: BTreeMap<u64, (u16, u16, u16)> =
        BTreeMap::from([(1, (free_port(), free_port(), free_port()))]);
    let ca = std::fs::read(tls.path().join("ca.pem")).unwrap();
    let https = https_client(&ca);
    let mut c = Cluster {
        dir: tempfile::tempdir().unwrap(),
        nodes: BTreeMap::new(),
        http: https.clone(),
    };
    let path = c.dir.path().join("n1.toml");
    let text = config(
        1,
        c.dir.path(),
        &ports,
        "[limits]\nheader_read_timeout_ms = 400\n",
    );
    let d = tls.path().display();
    std::fs::write(
        &path,
        format!("{text}\n[http_tls]\ncert = \"{d}/node1.pem\"\nkey = \"{d}/node1-key.pem\"\n"),
    )
    .unwrap();
    c.add_node(1, ports[&1], "localhost", path);
    let addr = format!("127.0.0.1:{}", ports[&1].0);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !https
        .get(format!("https://localhost:{}/readyz", ports[&1].0))
        .send()
        .await
        .is_ok_and(|r| r.status().is_success())
    {
        assert!(Instant::now() < deadline, "not ready over TLS");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let closed = |mut s: Box<dyn tokio::io::AsyncRead + Unpin + Send>, what: &'static str| async move {
        let mut rest = Vec::new();
        let r = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut rest)).await;
        assert!(r.is_ok(), "the server keeps a {what} connection open");
        rest
    };
    // No handshake at all.
    let sock = tokio::net::TcpStream::connect(&addr).await.unwrap();
    closed(Box::new(sock), "silent TCP").await;
    // A handshake (HTTP/1.1 agreed), then nothing; then one that sends a request in time.
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pki_types::CertificateDer::pem_slice_iter(&ca) {
        roots.add(cert.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    let cfg = Arc::new(cfg);
    let connector = tokio_rustls::TlsConnector::from(cfg.clone());
    let name = rustls_pki_types::ServerName::try_from("localhost").unwrap();
    let sock = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let quiet = connector.connect(name.clone(), sock).await.unwrap();
    closed(Box::new(quiet), "silent TLS").await;
    // HTTP/2 agreed in the handshake, then half a preface: cut off the same way.
    let mut h2_cfg = (*cfg).clone();
    h2_cfg.alpn_protocols = vec![b"h2".to_vec()];
    let h2_connector = tokio_rustls::TlsConnector::from(Arc::new(h2_cfg));
    let sock = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let mut half = h2_connector.connect(name.clone(), sock).await.unwrap();
    assert_eq!(half.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    half.write_all(b"PRI * HTTP/2.0\r\n").await.unwrap();
    half.flush().await.unwrap();
    closed(Box::new(half), "half-preface TLS").await;
    let sock = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let mut prompt = connector.connect(name, sock).await.unwrap();
    prompt
        .write_all(b"GET /healthz HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let answer = closed(Box::new(prompt), "closing").await;
    assert!(answer.starts_with(b"HTTP/1.1 200"), "{answer:?}");
    // gRPC over TLS gets through the same first-bytes check (the handshake's start is read
    // before tonic sees the connection, then handed back to it).
    let ch = tonic::transport::Endpoint::from_shared(format!("https://localhost:{}", ports[&1].1))
        .unwrap()
        .tls_config(
            tonic::transport::ClientTlsConfig::new()
                .ca_certificate(tonic::transport::Certificate::from_pem(&ca))
                .domain_name("localhost"),
        )
        .unwrap()
        .connect()
        .await
        .unwrap();
    let reply = sluice_grpc::pb::visitor_client::VisitorClient::new(ch)
        .join(sluice_grpc::pb::JoinRequest {
            room: "none-such".into(),
            ticket: String::new(),
            client_address: String::new(),
            altcha: String::new(),
            identity: String::new(),
            challenge_token: String::new(),
            code: String::new(),
        })
        .await;
    assert_eq!(reply.unwrap_err().code(), tonic::Code::NotFound);
    let sock = tokio::net::TcpStream::connect(format!("127.0.0.1:{}", ports[&1].1))
        .await
        .unwrap();
    closed(Box::new(sock), "silent gRPC").await;
}

/// A node whose storage fails stops its Raft core; the process then ends with an error (so that
/// systemd restarts it) instead of answering ready from a state that no longer moves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_whose_storage_fails_exits_and_comes_back_on_restart() {
    let mut c = Cluster::start_with(
        3,
        "[limits]\nvisitor_requests_per_second = 100000\nvisitor_burst = 100000\n",
    )
    .await;
    c.create_room("r", room_config(100_000)).await;
    let leader = c.leader().await;
    let f = *c.nodes.keys().find(|&&id| id != leader).unwrap();
    std::fs::remove_dir_all(c.dir.path().join(format!("n{f}/snapshots"))).unwrap();
    // Past the follower's snapshot period (500 entries and up to a quarter more): it cannot
    // store the snapshot.
    for _ in 0..700 {
        c.join(leader, "r", None).await;
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        let child = c.nodes.get_mut(&f).unwrap().child.as_mut().unwrap();
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "node {f} kept running");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(!status.success(), "{status}");
    // Restarted, it catches up.
    c.nodes.get_mut(&f).unwrap().child = None;
    c.spawn(f);
    c.wait_ready().await;
    c.join(leader, "r", None).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let d = digests(&c).await;
        if d.windows(2).all(|w| w[0] == w[1]) {
            break;
        }
        assert!(Instant::now() < deadline, "no convergence: {d:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// What the Traefik and Envoy samples send to Sluice past the gate, read from the samples
/// themselves (neither proxy runs here, so their routes are evaluated as the proxies match them:
/// Traefik's `PathRegexp` anywhere in the path, Envoy's routes in order, `safe_regex` matching
/// the whole path), printed as `sample path verdict` lines.
const ROUTES: &str = r#"
import re, sys, yaml
paths = sys.argv[3:]
t = yaml.safe_load(open(sys.argv[1]))
rule = t["http"]["routers"]["wait"]["rule"]
assert t["http"]["routers"]["wait"]["service"] == "sluice"
others = [r for n, r in t["http"]["routers"].items() if n != "wait"]
assert all(r["service"] != "sluice" for r in others), others
matchers = re.findall(r"(\w+)\(`([^`]*)`\)", rule)
assert {m for m, _ in matchers} <= {"Host", "PathRegexp"}, matchers
regexes = [v for m, v in matchers if m == "PathRegexp"]
for p in paths:
    print("traefik", p, "sluice" if any(re.search(r, p) for r in regexes) else "app")
e = yaml.safe_load(open(sys.argv[2]))
hcm = e["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
assert hcm["use_remote_address"] is True and hcm["path_with_escaped_slashes_action"] == "REJECT_REQUEST"
authz = [f for f in hcm["http_filters"] if f["name"] == "envoy.filters.http.ext_authz"][0]
allowed = [x["exact"] for x in authz["typed_config"]["http_service"]["authorization_request"]["allowed_headers"]["patterns"]]
assert "x-forwarded-for" in allowed, allowed
routes = hcm["route_config"]["virtual_hosts"][0]["routes"]
for p in paths:
    for r in routes:
        m = r["match"]
        if ("prefix" in m and p.startswith(m["prefix"])) or ("path" in m and p == m["path"]) \
                or ("safe_regex" in m and re.fullmatch(m["safe_regex"]["regex"], p)):
            off = r.get("typed_per_filter_config", {}).get("envoy.filters.http.ext_authz", {}).get("disabled", False)
            to = r["route"]["cluster"]
            print("envoy", p, "sluice" if to == "sluice" and off else to if off else to + "+gate")
            break
"#;

/// The Traefik and Envoy samples publish the visitor endpoints and nothing else of Sluice's:
/// every visitor path goes to Sluice without the gate, and every operator path (the room API,
/// codes, bypass tokens, ledger, explain, the dashboard, metrics, the cluster) goes to the
/// application behind the gate, never to Sluice. Envoy passes the client's address to the gate.
#[test]
fn the_traefik_and_envoy_samples_publish_only_the_visitor_endpoints() {
    if !prerequisites(
        "deploy::the_traefik_and_envoy_samples_publish_only_the_visitor_endpoints",
        &[Need::Program("python3"), Need::PythonModule("yaml")],
    ) {
        return;
    }
    let visitor = [
        "/wait/shop",
        "/wait/shop/bypass",
        "/assets/wait.js",
        "/assets/pow.js",
        "/v1/rooms/shop/join",
        "/v1/rooms/shop/challenge",
        "/v1/rooms/shop/status",
        "/v1/rooms/shop/heartbeat",
        "/v1/rooms/shop/leave",
        "/v1/rooms/shop/events",
    ];
    let operator = [
        "/v1/rooms",
        "/v1/rooms/",
        "/v1/rooms/shop",
        "/v1/rooms/shop/codes",
        "/v1/rooms/shop/bypass/issue",
        "/v1/rooms/shop/ledger",
        "/v1/rooms/shop/explain",
        "/v1/rooms/shop/pause",
        "/v1/rooms/shop/draw",
        "/v1/rooms/shop/queue",
        "/v1/rooms/shop/join/x",
        "/v1/rooms/shop/bypass/..%2Fjoin",
        "/v1/cluster",
        "/v1/cluster/digest",
        "/admin",
        "/admin/rooms/shop",
        "/metrics",
        "/assets/admin.js",
        "/wait/shop/other",
    ];
    let out = Command::new(program("python3"))
        .args(["-c", ROUTES])
        .arg(repo().join("deploy/nginx/traefik.yml"))
        .arg(repo().join("deploy/nginx/envoy.yaml"))
        .args(visitor.iter().chain(operator.iter()))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for sample in ["traefik", "envoy"] {
        for p in visitor {
            assert!(
                text.contains(&format!("{sample} {p} sluice\n")),
                "{sample} {p}: {text}"
            );
        }
        for p in operator {
            let line = text
                .lines()
                .find(|l| l.starts_with(&format!("{sample} {p} ")))
                .unwrap_or_else(|| panic!("{sample} {p}: {text}"));
            assert!(
                line.ends_with(" app") || line.ends_with(" app+gate"),
                "{line}"
            );
        }
    }
}
