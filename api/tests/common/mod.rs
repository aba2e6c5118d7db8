//! Real `sluice serve` processes on loopback ports with their own RocksDB directories.
#![allow(dead_code)]

use reqwest::StatusCode;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub use sluice_testkit::node::{self, Addrs};
pub use sluice_testkit::{free_port, wait_for};

pub const TOKEN: &str = "test-operator-token-0123456789abcdef";
/// The test clusters' secret (base64): every node-to-node call carries its credential.
pub const CLUSTER_SECRET: &str = "dGhlLXRlc3QtY2x1c3RlcnMtc2VjcmV0LW9mLTMyLWJ5dGVz";
/// The test clusters' ticket key (base64), to mint tickets as another node would.
pub const TICKET_KEY: &str = "dGVzdC10aWNrZXQta2V5LTMyLWJ5dGVzLWxvbmctZW5vdWdo";

#[derive(Debug)]
pub struct Node {
    pub id: u64,
    pub http: String,
    pub grpc: String,
    pub raft: String,
    pub config: PathBuf,
    pub child: Option<Child>,
}

impl Node {
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.http)
    }

    pub fn pid(&self) -> i32 {
        self.child.as_ref().expect("running").id() as i32
    }
}

#[derive(Debug)]
pub struct Cluster {
    pub dir: tempfile::TempDir,
    pub nodes: BTreeMap<u64, Node>,
    pub http: reqwest::Client,
}

/// The `[tokens]` section of the test clusters.
pub fn tokens() -> String {
    format!(
        "ticket_keys = [{{ id = \"k1\", secret = \"{TICKET_KEY}\" }}]\n\
         jwt_seed = \"dGVzdC1qd3Qtc2VlZC0zMi1ieXRlcy1leGFjdGx5ISE=\"\n\
         cluster_secret = \"{CLUSTER_SECRET}\"\n"
    )
}

pub fn config(
    id: u64,
    dir: &std::path::Path,
    ports: &BTreeMap<u64, (u16, u16, u16)>,
    extra: &str,
) -> String {
    config_with_tokens(id, dir, ports, extra, &tokens())
}

/// Loopback addresses for `ports` (http, grpc, raft) by node id.
pub fn addrs(ports: &BTreeMap<u64, (u16, u16, u16)>) -> BTreeMap<u64, Addrs> {
    ports
        .iter()
        .map(|(&id, &(h, g, r))| (id, Addrs::on("127.0.0.1", h, g, r)))
        .collect()
}

/// [`config`] with `tokens` as the body of its `[tokens]` section.
pub fn config_with_tokens(
    id: u64,
    dir: &std::path::Path,
    ports: &BTreeMap<u64, (u16, u16, u16)>,
    extra: &str,
    tokens: &str,
) -> String {
    let nodes = addrs(ports);
    format!(
        r#"{head}{extra}

{peers}
[tokens]
{tokens}

[raft]
heartbeat_ms = 50
election_timeout_min_ms = 300
election_timeout_max_ms = 600
snapshot_every = 500
"#,
        head = node::node_toml(id, &dir.join(format!("n{id}")), &nodes[&id], id == 1, TOKEN),
        peers = node::peers_toml(&nodes),
    )
}

impl Cluster {
    /// Starts `n` nodes; node 1 bootstraps the cluster.
    pub async fn start(n: u64) -> Self {
        Self::start_with(n, "").await
    }

    pub async fn start_with(n: u64, extra: &str) -> Self {
        Self::start_with_tokens(n, extra, &tokens()).await
    }

    /// Starts `n` nodes with `extra` configuration and `tokens` as their `[tokens]` section.
    pub async fn start_with_tokens(n: u64, extra: &str, tokens: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ports: BTreeMap<u64, (u16, u16, u16)> = (1..=n)
            .map(|id| (id, (free_port(), free_port(), free_port())))
            .collect();
        let mut c = Cluster {
            dir,
            nodes: BTreeMap::new(),
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(20))
                .build()
                .unwrap(),
        };
        for id in 1..=n {
            let path = c.dir.path().join(format!("n{id}.toml"));
            std::fs::write(
                &path,
                config_with_tokens(id, c.dir.path(), &ports, extra, tokens),
            )
            .unwrap();
            c.add_node(id, ports[&id], "127.0.0.1", path);
        }
        c.wait_ready().await;
        c
    }

    /// Starts node `id` from the configuration at `config` on `ports` (http, grpc, raft). `host`
    /// names the node in HTTP URLs (a certificate may need `localhost`).
    pub fn add_node(&mut self, id: u64, ports: (u16, u16, u16), host: &str, config: PathBuf) {
        let (h, g, r) = ports;
        self.nodes.insert(
            id,
            Node {
                id,
                http: format!("{host}:{h}"),
                grpc: format!("127.0.0.1:{g}"),
                raft: format!("127.0.0.1:{r}"),
                config,
                child: None,
            },
        );
        self.spawn(id);
    }

    pub fn spawn(&mut self, id: u64) {
        let node = self.nodes.get_mut(&id).unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice"));
        cmd.args(["serve", "--config", node.config.to_str().unwrap()])
            .env("RUST_LOG", "warn")
            .stderr(Stdio::inherit());
        node.child = Some(node::spawn_listening(cmd, &format!("node {id}")).unwrap());
    }

    pub async fn wait_ready(&self) {
        node::wait_ready(&self.http, self.running(), Duration::from_secs(30))
            .await
            .unwrap();
    }

    /// The running nodes' URLs (`http://host:port`) by id.
    fn running(&self) -> BTreeMap<u64, String> {
        self.nodes
            .values()
            .filter(|n| n.child.is_some())
            .map(|n| (n.id, n.url("")))
            .collect()
    }

    pub fn kill(&mut self, id: u64) {
        let node = self.nodes.get_mut(&id).unwrap();
        if let Some(mut c) = node.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// The leader, once a running node names one that runs (within 20 s).
    pub async fn leader(&self) -> u64 {
        let found = std::cell::Cell::new(None);
        wait_for("a leader", Duration::from_secs(20), || async {
            let running = self.running();
            let leader = node::leader(&self.http, &running, TOKEN, |l| running.contains_key(&l));
            found.set(leader.await);
            found.get().is_some()
        })
        .await;
        found.get().expect("a leader")
    }

    pub fn node(&self, id: u64) -> &Node {
        &self.nodes[&id]
    }

    /// The index of node `id`'s last log entry: a refusal that wrote nothing leaves it as it was.
    pub async fn last_log_index(&self, id: u64) -> u64 {
        let (_, v) = self
            .admin(id, reqwest::Method::GET, "/v1/cluster", None)
            .await;
        v["last_log_index"].as_u64().expect("last_log_index")
    }

    /// Node `id`'s Prometheus text.
    pub async fn metrics(&self, id: u64) -> String {
        self.http
            .get(self.node(id).url("/metrics"))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    /// Sends an operator request, retrying while the cluster has no leader.
    pub async fn admin(
        &self,
        id: u64,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let mut req = self
                .http
                .request(method.clone(), self.node(id).url(path))
                .bearer_auth(TOKEN);
            if let Some(b) = &body {
                req = req.json(b);
            }
            let r = req.send().await;
            if let Ok(r) = r {
                let status = r.status();
                let v: Value = r.json().await.unwrap_or(Value::Null);
                if status != StatusCode::SERVICE_UNAVAILABLE || Instant::now() > deadline {
                    return (status, v);
                }
            } else if Instant::now() > deadline {
                panic!("node {id} unreachable");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub async fn create_room(&self, room: &str, config: Value) {
        let (s, v) = self
            .admin(
                1,
                reqwest::Method::PUT,
                &format!("/v1/rooms/{room}"),
                Some(config),
            )
            .await;
        assert!(s.is_success(), "{s} {v}");
    }

    /// A visitor request (POST with optional ticket), retrying 503s.
    pub async fn visitor(
        &self,
        id: u64,
        method: reqwest::Method,
        path: &str,
        ticket: Option<&str>,
    ) -> (StatusCode, Value) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let mut req = self.http.request(method.clone(), self.node(id).url(path));
            if let Some(t) = ticket {
                req = req.header("authorization", format!("Ticket {t}"));
            }
            if method == reqwest::Method::POST {
                req = req.header("content-type", "application/json").body("{}");
            }
            match req.send().await {
                Ok(r) => {
                    let status = r.status();
                    let v: Value = r.json().await.unwrap_or(Value::Null);
                    if status != StatusCode::SERVICE_UNAVAILABLE || Instant::now() > deadline {
                        return (status, v);
                    }
                }
                Err(_) if Instant::now() < deadline => {}
                Err(e) => panic!("node {id}: {e}"),
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub async fn join(&self, id: u64, room: &str, ticket: Option<&str>) -> Value {
        let (s, v) = self
            .visitor(
                id,
                reqwest::Method::POST,
                &format!("/v1/rooms/{room}/join"),
                ticket,
            )
            .await;
        assert_eq!(s, StatusCode::OK, "{v}");
        v
    }

    pub async fn status(&self, id: u64, room: &str, ticket: &str) -> Value {
        let (s, v) = self
            .visitor(
                id,
                reqwest::Method::GET,
                &format!("/v1/rooms/{room}/status"),
                Some(ticket),
            )
            .await;
        assert_eq!(s, StatusCode::OK, "{v}");
        v
    }

    pub async fn gate(&self, id: u64, room: &str, ticket: &str) -> StatusCode {
        self.http
            .get(self.node(id).url(&format!("/gate/{room}/check")))
            .header("cookie", format!("sluice_ticket={ticket}"))
            .send()
            .await
            .unwrap()
            .status()
    }
}

/// A client that does not follow redirects (to see a 303 and its cookie).
pub fn no_redirect() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// The dashboard form's CSRF token in `page`.
pub fn csrf_of(page: &str) -> String {
    page.split("name=\"csrf\" value=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap()
        .to_string()
}

impl Cluster {
    /// Signs in to node `id`'s dashboard: the session cookie (`name=value`).
    pub async fn dashboard_cookie(&self, http: &reqwest::Client, id: u64) -> String {
        let r = http
            .post(self.node(id).url("/admin/login"))
            .form(&[("token", TOKEN)])
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::SEE_OTHER);
        let set = r.headers()["set-cookie"].to_str().unwrap();
        set.split(';').next().unwrap().to_string()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for n in self.nodes.values_mut() {
            if let Some(mut c) = n.child.take() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}

pub fn room_config(capacity: u64) -> Value {
    json!({"capacity": capacity, "admit_per_minute": 600000, "session_ttl_secs": 600, "waiter_ttl_secs": 600})
}

/// What a test needs beyond the workspace's own binaries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Root (network namespaces, nftables).
    Root,
    /// A program, found on `PATH` or in an `sbin` directory.
    Program(&'static str),
    /// A module `python3` can import.
    PythonModule(&'static str),
    /// axe-core, the accessibility checker the browser tests inject ([`axe_script`]).
    Axe,
    /// `jose` from npm, which the Node handoff example imports ([`jose_modules`]).
    Jose,
}

/// The pinned `jose` version, as `deploy/handoff/node/package.json` names it.
pub fn jose_version() -> String {
    let pkg: serde_json::Value =
        serde_json::from_str(include_str!("../../../deploy/handoff/node/package.json")).unwrap();
    pkg["dependencies"]["jose"].as_str().unwrap().to_string()
}

/// A `node_modules` directory holding `jose` at [`jose_version`]: `$SLUICE_JOSE`, else where
/// `.ci/run` installs it.
pub fn jose_modules() -> Option<PathBuf> {
    let dir = std::env::var_os("SLUICE_JOSE")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .map(|h| PathBuf::from(h).join(".cache/sluice-tools/jose/node_modules"))
        })?;
    let pkg = std::fs::read_to_string(dir.join("jose/package.json")).ok()?;
    let pkg: serde_json::Value = serde_json::from_str(&pkg).ok()?;
    (pkg["version"] == jose_version().as_str()).then_some(dir)
}

/// axe-core's browser bundle: `$SLUICE_AXE`, else where `.ci/run` installs it.
pub fn axe_script() -> Option<PathBuf> {
    let path = std::env::var_os("SLUICE_AXE")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| {
                PathBuf::from(h).join(".cache/sluice-tools/axe/node_modules/axe-core/axe.min.js")
            })
        })?;
    path.is_file().then_some(path)
}

/// Directories searched after `PATH`: Debian installs nginx and haproxy in `/usr/sbin`, which a
/// normal user's `PATH` does not hold.
const SBIN: [&str; 3] = ["/usr/local/sbin", "/usr/sbin", "/sbin"];

/// Where the program `name` is installed (looked up, not run), if it is.
pub fn find_program(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(SBIN.iter().map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// The program `name` to run: its installed path, or the bare name when it is not installed.
pub fn program(name: &str) -> PathBuf {
    find_program(name).unwrap_or_else(|| PathBuf::from(name))
}

/// Whether this process runs as root (its effective user id is 0).
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().nth(1))
        == Some("0")
}

fn python_has(module: &str) -> bool {
    find_program("python3").is_some_and(|python| {
        Command::new(python)
            .args([
                "-c",
                "import importlib.util, sys; sys.exit(importlib.util.find_spec(sys.argv[1]) is None)",
                module,
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

/// How to install what `need` names: the installer's command and the package.
fn install_hint(need: Need) -> Option<(&'static str, &'static str)> {
    match need {
        Need::Root => None,
        // The schema checkers come from PyPI.
        Need::Program(name @ ("kubernetes-validate" | "check-jsonschema")) => {
            Some(("python3 -m pip install", name))
        }
        Need::Program(name) => Some((
            "apt-get install",
            match name {
                "chromedriver" => "chromium-driver",
                "nginx" => "nginx-light",
                "promtool" => "prometheus",
                "etcd" => "etcd-server",
                "systemd-analyze" => "systemd",
                "ip" => "iproute2",
                "nft" => "nftables",
                other => other,
            },
        )),
        Need::Axe => Some(("npm install --prefix ~/.cache/sluice-tools/axe", "axe-core")),
        Need::Jose => Some(("npm install --prefix ~/.cache/sluice-tools/jose", "jose")),
        Need::PythonModule(module) => Some((
            "python3 -m pip install",
            match module {
                "grpc_tools" => "grpcio-tools",
                "grpc" => "grpcio",
                "jwt" => "PyJWT",
                "openapi_spec_validator" => "openapi-spec-validator",
                other => other,
            },
        )),
    }
}

/// What of `needs` is missing for the test `test`, said in one line with how to install it.
pub fn missing(test: &str, needs: &[Need]) -> Option<String> {
    let absent: Vec<Need> = needs
        .iter()
        .copied()
        .filter(|&need| match need {
            Need::Root => !is_root(),
            Need::Program(name) => find_program(name).is_none(),
            Need::PythonModule(module) => !python_has(module),
            Need::Axe => axe_script().is_none(),
            Need::Jose => jose_modules().is_none(),
        })
        .collect();
    if absent.is_empty() {
        return None;
    }
    let names: Vec<String> = absent
        .iter()
        .map(|need| match need {
            Need::Root => "root".to_string(),
            Need::Program(name) => name.to_string(),
            Need::PythonModule(module) => format!("the Python module {module}"),
            Need::Axe => "axe-core (or SLUICE_AXE naming axe.min.js)".to_string(),
            Need::Jose => format!(
                "jose {} from npm (or SLUICE_JOSE naming its node_modules)",
                jose_version()
            ),
        })
        .collect();
    // One command per installer: `apt-get install a b`.
    let mut hints: Vec<(&str, Vec<&str>)> = Vec::new();
    for (command, package) in absent.iter().filter_map(|&need| install_hint(need)) {
        match hints.iter_mut().find(|(c, _)| *c == command) {
            Some((_, packages)) => packages.push(package),
            None => hints.push((command, vec![package])),
        }
    }
    let hints = if hints.is_empty() {
        String::new()
    } else {
        let commands: Vec<String> = hints
            .iter()
            .map(|(command, packages)| format!("{command} {}", packages.join(" ")))
            .collect();
        format!(" ({})", commands.join("; "))
    };
    Some(format!("{test}: needs {}{hints}", names.join(", ")))
}

/// Whether the test `test` can run: everything in `needs` is present. If something is missing,
/// one line on stderr names it and how to install it, and the test is to return at once
/// (`if !prerequisites(..) { return; }`); with `SLUICE_TEST_FULL=1` (the full tier, `.ci/run`)
/// a missing prerequisite fails the test instead, so nothing is skipped silently.
pub fn prerequisites(test: &str, needs: &[Need]) -> bool {
    let full = std::env::var_os("SLUICE_TEST_FULL").is_some_and(|v| v == "1");
    check_prerequisites(test, needs, full)
}

/// [`prerequisites`], told whether this is the full tier.
pub fn check_prerequisites(test: &str, needs: &[Need], full: bool) -> bool {
    let Some(what) = missing(test, needs) else {
        return true;
    };
    if full {
        panic!("{what}; SLUICE_TEST_FULL=1 skips nothing");
    }
    // Straight to stderr, past the test harness's capture: a skip is seen.
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED {what}; run .ci/run for the full tier"
    );
    false
}

/// The shipped examples of an application that checks handed-off visitors itself
/// (`deploy/handoff`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandoffApp {
    /// `python/sluice_handoff.py` (PyJWT).
    Python,
    /// `node/sluice-handoff.mjs` (jose).
    Node,
}

impl HandoffApp {
    /// What the example needs.
    pub fn needs(self) -> Vec<Need> {
        match self {
            HandoffApp::Python => vec![
                Need::Program("python3"),
                Need::PythonModule("jwt"),
                Need::PythonModule("cryptography"),
            ],
            HandoffApp::Node => vec![Need::Program("node"), Need::Jose],
        }
    }

    /// Runs the example's protected page on `port` of this machine, as a customer would run
    /// the copied file: for `room` of the waiting room at `sluice` (its base URL), answering
    /// as `origin`. Ready once `port` answers; ended when the returned process is dropped.
    pub fn start(self, port: u16, sluice: &str, room: &str, origin: &str) -> RunningApp {
        let dir = tempfile::tempdir().unwrap();
        let shipped = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/handoff");
        let mut cmd = match self {
            HandoffApp::Python => {
                let mut c = Command::new(program("python3"));
                c.arg(format!("{shipped}/python/sluice_handoff.py"));
                c
            }
            HandoffApp::Node => {
                // The file as copied into an application with jose installed beside it.
                let file = dir.path().join("sluice-handoff.mjs");
                std::fs::copy(format!("{shipped}/node/sluice-handoff.mjs"), &file).unwrap();
                std::os::unix::fs::symlink(
                    jose_modules().expect("jose"),
                    dir.path().join("node_modules"),
                )
                .unwrap();
                let mut c = Command::new(program("node"));
                c.arg(file);
                c
            }
        };
        let child = cmd
            .arg(port.to_string())
            .env("SLUICE_URL", sluice)
            .env("SLUICE_ROOM", room)
            .env("APP_ORIGIN", origin)
            .env("APP_SECRET", "the-shop-s-own-session-secret-of-32-bytes")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        RunningApp { child, _dir: dir }
    }
}

/// A running example application (killed when dropped).
pub struct RunningApp {
    child: Child,
    _dir: tempfile::TempDir,
}

impl Drop for RunningApp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
