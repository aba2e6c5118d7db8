//! The system under test: real `sluice serve` processes, one per network namespace, each with its
//! own RocksDB directory and (for clock faults) its own libfaketime offset file. For the
//! `kill-lose-unsynced` fault each node's data directory is a mount of `sluice-lazyfs`, the
//! filesystem that forgets unsynced writes ([`crate::lazyfs`]).

use crate::lazyfs::CrashReport;
use crate::net::Net;
use crate::proxy::Proxy;
use anyhow::{bail, Context, Result};
use base64::Engine;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::Value;
use sluice_testkit::node::{self, Addrs};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The operator token the harness configures.
pub const TOKEN: &str = "jepsen-operator-token-0123456789";
/// The ticket secret the harness configures (and mints tickets with).
pub const TICKET_SECRET: &[u8] = b"jepsen-ticket-secret-of-32-bytes!!";
/// libfaketime (Debian's `faketime`), preloaded into the nodes for clock faults when present.
pub const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";

/// How the nodes authenticate each other's calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeAuth {
    /// A cluster secret every node shares (`tokens.cluster_secret`).
    #[default]
    Secret,
    /// Mutual TLS: every node's certificate signed by the run's own CA (`[tls]`).
    MutualTls,
}

impl NodeAuth {
    /// `secret` or `tls`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "secret" => Some(Self::Secret),
            "tls" => Some(Self::MutualTls),
            _ => None,
        }
    }

    /// The name `parse` reads.
    pub fn name(self) -> &'static str {
        match self {
            Self::Secret => "secret",
            Self::MutualTls => "tls",
        }
    }
}

/// What every node's configuration says of node-to-node authentication: a secret made for the
/// run, or a CA made for the run that signs each node's certificate (for its address).
#[derive(Debug)]
struct AuthMaterial {
    secret: String,
    ca: Option<rcgen::CertifiedIssuer<'static, rcgen::KeyPair>>,
}

impl AuthMaterial {
    fn new(auth: NodeAuth) -> Result<Self> {
        let mut secret = [0u8; 32];
        getrandom::fill(&mut secret).map_err(|e| anyhow::anyhow!("OS randomness: {e}"))?;
        let ca = match auth {
            NodeAuth::Secret => None,
            NodeAuth::MutualTls => {
                let mut params = rcgen::CertificateParams::new(Vec::<String>::new())?;
                params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
                params
                    .distinguished_name
                    .push(rcgen::DnType::CommonName, "sluice-jepsen ca");
                Some(rcgen::CertifiedIssuer::self_signed(
                    params,
                    rcgen::KeyPair::generate()?,
                )?)
            }
        };
        Ok(Self {
            secret: base64::engine::general_purpose::STANDARD.encode(secret),
            ca,
        })
    }

    /// The configuration lines for node `id` at `ip`: the secret in `[tokens]`, or a `[tls]`
    /// section whose files are written to `dir`.
    fn config(&self, dir: &std::path::Path, id: u64, ip: &str) -> Result<(String, String)> {
        let Some(ca) = &self.ca else {
            return Ok((
                format!("cluster_secret = \"{}\"\n", self.secret),
                String::new(),
            ));
        };
        let key = rcgen::KeyPair::generate()?;
        let cert = rcgen::CertificateParams::new(vec![ip.to_string()])?.signed_by(&key, ca)?;
        let (ca_file, cert_file, key_file) = (
            dir.join("ca.pem"),
            dir.join(format!("n{id}.pem")),
            dir.join(format!("n{id}-key.pem")),
        );
        std::fs::write(&ca_file, ca.pem())?;
        std::fs::write(&cert_file, cert.pem())?;
        std::fs::write(&key_file, key.serialize_pem())?;
        Ok((
            String::new(),
            format!(
                "\n[tls]\nca = \"{}\"\ncert = \"{}\"\nkey = \"{}\"\n",
                ca_file.display(),
                cert_file.display(),
                key_file.display()
            ),
        ))
    }
}

/// The longest a node's disk may take to mount, to answer a command, or to unmount.
const DISK_REPLY_TIMEOUT: Duration = Duration::from_secs(30);

/// What the harness creates in a node's data directory before its first start, so that it
/// exists on the disk from the outset. `sluice serve` creates these directories itself but
/// never syncs the data directory after creating them: on a filesystem that keeps only what was
/// synced (POSIX's rule, which `sluice-lazyfs` enforces), a crash before anything else synced
/// the data directory would take both away, with everything in them.
const DATA_DIR_LAYOUT: [&str; 2] = ["db", "snapshots"];

/// A node's data directory mounted on `sluice-lazyfs` (store `nN.disk/`, log `nN-disk.log`),
/// driven over the process's stdin and stdout. Unmounted when dropped.
#[derive(Debug)]
struct Disk {
    child: Child,
    stdin: Option<ChildStdin>,
    /// Lines of the process's stdout, read by a thread of their own.
    lines: mpsc::Receiver<String>,
    mount: PathBuf,
}

impl Disk {
    /// Mounts the store `store` at `mount`, the process's stderr going to `log`.
    fn mount(bin: &Path, store: &Path, mount: &Path, log: std::fs::File) -> Result<Self> {
        std::fs::create_dir_all(mount)?;
        let mut child = Command::new(bin)
            .arg("--store")
            .arg(store)
            .arg("--mount")
            .arg(mount)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        let stdout = child.stdout.take().context("stdout")?;
        let (tx, lines) = mpsc::channel();
        std::thread::Builder::new()
            .name("sluice-lazyfs-out".into())
            .spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            })?;
        let mut disk = Disk {
            stdin: child.stdin.take(),
            child,
            lines,
            mount: mount.to_path_buf(),
        };
        let first = disk.reply()?;
        if first != "mounted" {
            bail!("{}: sluice-lazyfs said {first:?}", mount.display());
        }
        Ok(disk)
    }

    fn reply(&mut self) -> Result<String> {
        self.lines.recv_timeout(DISK_REPLY_TIMEOUT).map_err(|e| {
            anyhow::anyhow!(
                "sluice-lazyfs at {} did not answer ({e}); see its -disk.log",
                self.mount.display()
            )
        })
    }

    /// Sends one command, returns its answer (an `{"error"}` answer is an error).
    fn command(&mut self, cmd: &str) -> Result<Value> {
        let stdin = self.stdin.as_mut().context("the disk is unmounted")?;
        writeln!(stdin, "{cmd}")?;
        stdin.flush()?;
        let line = self.reply()?;
        let v: Value = serde_json::from_str(&line)
            .with_context(|| format!("sluice-lazyfs answered {line:?}"))?;
        if let Some(e) = v.get("error") {
            bail!("sluice-lazyfs at {}: {e}", self.mount.display());
        }
        Ok(v)
    }

    /// Closes the process's stdin, which unmounts and ends it; kills it (and detaches the
    /// mount) if it has not ended within [`DISK_REPLY_TIMEOUT`].
    fn unmount(&mut self) {
        if self.stdin.take().is_none() {
            return;
        }
        // Its stdout closes when it exits: wait for that.
        let deadline = Instant::now() + DISK_REPLY_TIMEOUT;
        loop {
            match self
                .lines
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            {
                Ok(_) => continue,
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let _ = self.child.wait();
                    return;
                }
                Err(mpsc::RecvTimeoutError::Timeout) => break,
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = Command::new("umount").arg("-l").arg(&self.mount).status();
    }
}

impl Drop for Disk {
    fn drop(&mut self) {
        self.unmount();
    }
}

/// Detaches `sluice-lazyfs` mounts whose process is gone (a killed run's): their mount points
/// answer `ENOTCONN`. Live ones, another run's, are left alone.
fn cleanup_stale_disks() {
    const ENOTCONN: i32 = 107;
    let Ok(mounts) = std::fs::read_to_string("/proc/self/mounts") else {
        return;
    };
    for line in mounts.lines() {
        let mut fields = line.split(' ');
        if fields.next() != Some("sluice-lazyfs") {
            continue;
        }
        let Some(at) = fields.next() else { continue };
        // Spaces, tabs, newlines and backslashes are written as octal escapes.
        let at = at
            .replace("\\040", " ")
            .replace("\\011", "\t")
            .replace("\\012", "\n")
            .replace("\\134", "\\");
        if std::fs::metadata(&at).is_err_and(|e| e.raw_os_error() == Some(ENOTCONN)) {
            let _ = Command::new("umount").arg("-l").arg(&at).status();
        }
    }
}

/// One node's process.
#[derive(Debug)]
pub struct Proc {
    child: Option<Child>,
    paused: bool,
    clock_file: PathBuf,
    config: PathBuf,
    disk: Option<Disk>,
}

impl Db {
    /// The key the nodes derive rooms' draw secrets from (every node has the run's
    /// `draw_secret`): the lottery audit replays draws with it.
    pub fn draw_key(&self) -> sluice_statemachine::draw::DrawKey {
        let secret = base64::engine::general_purpose::STANDARD
            .decode(&self.auth.secret)
            .expect("the run's secret is base64");
        sluice_statemachine::draw::DrawKey::from_secret(&secret)
    }
}

/// The cluster.
#[derive(Debug)]
pub struct Db {
    /// The network.
    pub net: Net,
    dir: PathBuf,
    sluice: PathBuf,
    procs: BTreeMap<u64, Proc>,
    /// Node ids that are members (started, not removed).
    pub members: Vec<u64>,
    next_id: u64,
    /// HTTP client for operator calls.
    pub http: reqwest::Client,
    faketime: bool,
    /// `[raft] snapshot_every` and `logs_kept_after_snapshot` of every node.
    snapshots: (u64, u64),
    /// Node-to-node authentication.
    auth: AuthMaterial,
    /// `sluice-lazyfs`, when the data directories are mounted on it.
    lazyfs: Option<PathBuf>,
    /// `[raft] pre_vote` of every node.
    pre_vote: bool,
    /// The link proxy every node-to-node connection goes through, when the run has link faults.
    pub proxy: Option<Proxy>,
}

/// How the nodes of a test are set up.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Every node's `[raft] snapshot_every` and `logs_kept_after_snapshot`.
    pub snapshots: (u64, u64),
    /// How the nodes authenticate each other.
    pub auth: NodeAuth,
    /// Every data directory a mount of `sluice-lazyfs` (needs root and /dev/fuse).
    pub lazyfs: bool,
    /// Every node's `[raft] pre_vote`.
    pub pre_vote: bool,
    /// Node-to-node connections through the link proxy ([`crate::proxy`]), whose jitter and
    /// losses are drawn from this seed.
    pub link_proxy: Option<u64>,
}

/// The port every node's node-to-node service listens on (each node has its own address).
pub const RAFT_PORT: u16 = 7000;
/// The port every node's HTTP API listens on.
const HTTP_PORT: u16 = 8080;
/// The port every node's gRPC API listens on.
const GRPC_PORT: u16 = 50051;

/// Finds the `sluice` binary next to this executable (`target/<profile>/`).
pub fn find_sluice() -> Result<PathBuf> {
    find_binary("sluice", "SLUICE_BIN")
}

/// Finds the `sluice-lazyfs` binary next to this executable (`target/<profile>/`).
pub fn find_lazyfs() -> Result<PathBuf> {
    find_binary("sluice-lazyfs", "SLUICE_LAZYFS_BIN")
}

/// `$env` if set, else the binary `name` in a directory above this executable.
fn find_binary(name: &str, env: &str) -> Result<PathBuf> {
    if let Ok(p) = std::env::var(env) {
        return Ok(p.into());
    }
    let exe = std::env::current_exe()?;
    for dir in exe.ancestors().skip(1).take(3) {
        let c = dir.join(name);
        if c.is_file() {
            return Ok(c);
        }
    }
    bail!(
        "cannot find the {name} binary near {}; set {env}",
        exe.display()
    )
}

impl Db {
    /// Creates `n` nodes (ids 1..=n), node 1 bootstrapping the cluster, and waits until ready.
    pub async fn start(net: Net, dir: PathBuf, n: u64, opts: Options) -> Result<Self> {
        std::fs::create_dir_all(&dir)?;
        let faketime = std::path::Path::new(LIBFAKETIME).exists();
        let lazyfs = if opts.lazyfs {
            cleanup_stale_disks();
            Some(find_lazyfs()?)
        } else {
            None
        };
        let mut db = Db {
            net,
            dir,
            sluice: find_sluice()?,
            procs: BTreeMap::new(),
            members: Vec::new(),
            next_id: n + 1,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(5))
                .build()?,
            faketime,
            snapshots: opts.snapshots,
            auth: AuthMaterial::new(opts.auth)?,
            lazyfs,
            pre_vote: opts.pre_vote,
            proxy: None,
        };
        let peers: Vec<u64> = (1..=n).collect();
        for id in 1..=n {
            db.net.add_node(id)?;
        }
        if let Some(seed) = opts.link_proxy {
            db.proxy = Some(Proxy::new(&db.net.host_ip(), seed));
            for id in 1..=n {
                db.proxy_links(id, &peers).await?;
            }
        }
        for id in 1..=n {
            db.write_config(id, &peers, id == 1)?;
            db.spawn(id)?;
            db.members.push(id);
        }
        db.wait_ready(Duration::from_secs(60)).await?;
        Ok(db)
    }

    /// Sends node `id`'s connections to the Raft ports of `others`, and theirs to its, through
    /// the link proxy (if the run has one).
    async fn proxy_links(&mut self, id: u64, others: &[u64]) -> Result<()> {
        let Some(proxy) = self.proxy.as_mut() else {
            return Ok(());
        };
        for &o in others.iter().filter(|&&o| o != id) {
            for (from, to) in [(id, o), (o, id)] {
                let target = format!("{}:{RAFT_PORT}", self.net.ip(to)).parse()?;
                let via = proxy.add_pair(from, to, target).await?;
                self.net.redirect(from, to, RAFT_PORT, via)?;
            }
        }
        Ok(())
    }

    /// `http://ip:8080` of node `id`.
    pub fn url(&self, id: u64) -> String {
        self.addrs(id).url()
    }

    /// Where node `id` listens, in its namespace.
    fn addrs(&self, id: u64) -> Addrs {
        Addrs::on(self.net.ip(id), HTTP_PORT, GRPC_PORT, RAFT_PORT)
    }

    fn write_config(&mut self, id: u64, peers: &[u64], bootstrap: bool) -> Result<()> {
        let ip = self.net.ip(id);
        let peers: BTreeMap<u64, Addrs> = peers.iter().map(|&p| (p, self.addrs(p))).collect();
        let secret = base64::engine::general_purpose::STANDARD.encode(TICKET_SECRET);
        let (cluster_secret, tls) = self.auth.config(&self.dir, id, &ip.to_string())?;
        let text = format!(
            "{head}\n{peers}\
[tokens]\nticket_keys = [{{ id = \"{kid}\", secret = \"{secret}\" }}]\njwt_seed = \"amVwc2VuLWp3dC1zZWVkLW9mLTMyLWJ5dGVzLW9rISE=\"\n{cluster_secret}draw_secret = \"{draw_secret}\"\n\n\
[limits]\nvisitor_requests_per_second = 100000\nvisitor_burst = 100000\nrequest_timeout_ms = 5000\nrequests_per_address_max = 1000000\n\n\
[raft]\nheartbeat_ms = 100\nelection_timeout_min_ms = 600\nelection_timeout_max_ms = 1200\n\
{pre_vote}snapshot_every = {every}\nlogs_kept_after_snapshot = {kept}\n{tls}",
            head = node::node_toml(
                id,
                &self.dir.join(format!("n{id}")),
                &self.addrs(id),
                bootstrap,
                TOKEN
            ),
            peers = node::peers_toml(&peers),
            every = self.snapshots.0,
            kept = self.snapshots.1,
            kid = crate::ticket::KEY_ID,
            draw_secret = self.auth.secret,
            // Written only when off: on is the nodes' default, and a `sluice` from before the
            // setting (`SLUICE_BIN`) refuses a configuration that names it.
            pre_vote = if self.pre_vote { "" } else { "pre_vote = false\n" },
        );
        let config = self.dir.join(format!("n{id}.toml"));
        std::fs::write(&config, text)?;
        let clock_file = self.dir.join(format!("n{id}.clock"));
        std::fs::write(&clock_file, "+0s\n")?;
        let disk = match &self.lazyfs {
            Some(bin) => {
                let store = self.dir.join(format!("n{id}.disk"));
                for sub in DATA_DIR_LAYOUT {
                    std::fs::create_dir_all(store.join(crate::lazyfs::TREE).join(sub))?;
                }
                let log = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(self.dir.join(format!("n{id}-disk.log")))?;
                Some(Disk::mount(
                    bin,
                    &store,
                    &self.dir.join(format!("n{id}")),
                    log,
                )?)
            }
            None => None,
        };
        self.procs.insert(
            id,
            Proc {
                child: None,
                paused: false,
                clock_file,
                config,
                disk,
            },
        );
        Ok(())
    }

    fn spawn(&mut self, id: u64) -> Result<()> {
        let ns = self.net.ns(id);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join(format!("n{id}.log")))?;
        let p = self.procs.get_mut(&id).context("unknown node")?;
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &ns])
            .arg(&self.sluice)
            .args(["serve", "--config"])
            .arg(&p.config);
        if self.faketime {
            cmd.env("LD_PRELOAD", LIBFAKETIME)
                .env("FAKETIME_TIMESTAMP_FILE", &p.clock_file)
                .env("FAKETIME_NO_CACHE", "1")
                .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
        }
        cmd.env("RUST_LOG", node::NODE_LOG).stderr(log);
        let child = node::spawn_listening(cmd, &format!("node {id}"))
            .map_err(|e| anyhow::anyhow!("{e} (see n{id}.log)"))?;
        p.child = Some(child);
        p.paused = false;
        Ok(())
    }

    /// Is node `id`'s process running (not killed, not paused)?
    pub fn is_up(&self, id: u64) -> bool {
        self.procs
            .get(&id)
            .is_some_and(|p| p.child.is_some() && !p.paused)
    }

    /// Waits until every running member answers `/readyz`.
    pub async fn wait_ready(&self, timeout: Duration) -> Result<()> {
        node::wait_ready(&self.http, self.running_urls(), timeout)
            .await
            .map_err(anyhow::Error::msg)
    }

    /// The running members' URLs by id.
    fn running_urls(&self) -> BTreeMap<u64, String> {
        self.members
            .iter()
            .filter(|&&id| self.is_up(id))
            .map(|&id| (id, self.url(id)))
            .collect()
    }

    /// SIGKILL.
    pub fn kill(&mut self, id: u64) {
        if let Some(p) = self.procs.get_mut(&id) {
            if let Some(mut c) = p.child.take() {
                let _ = kill(Pid::from_raw(c.id() as i32), Signal::SIGCONT);
                let _ = c.kill();
                let _ = c.wait();
            }
            p.paused = false;
        }
    }

    /// Starts a killed member again on its data.
    pub fn restart(&mut self, id: u64) -> Result<()> {
        if self.procs.get(&id).is_some_and(|p| p.child.is_none()) && self.members.contains(&id) {
            self.spawn(id)?;
        }
        Ok(())
    }

    /// SIGSTOP / SIGCONT.
    pub fn pause(&mut self, id: u64, paused: bool) {
        if let Some(p) = self.procs.get_mut(&id) {
            if let Some(c) = &p.child {
                let _ = kill(
                    Pid::from_raw(c.id() as i32),
                    if paused {
                        Signal::SIGSTOP
                    } else {
                        Signal::SIGCONT
                    },
                );
                p.paused = paused;
            }
        }
    }

    /// Sets node `id`'s wall-clock offset (ms) through libfaketime.
    pub fn set_clock(&self, id: u64, offset_ms: i64) -> Result<()> {
        if let Some(p) = self.procs.get(&id) {
            let secs = offset_ms as f64 / 1000.0;
            std::fs::write(
                &p.clock_file,
                format!("{}{:.3}s\n", if secs >= 0.0 { "+" } else { "" }, secs),
            )?;
        }
        Ok(())
    }

    /// Whether clock faults can be injected (libfaketime present).
    pub fn has_faketime(&self) -> bool {
        self.faketime
    }

    /// Whether the data directories are on `sluice-lazyfs` (unsynced writes can be lost).
    pub fn has_lazyfs(&self) -> bool {
        self.lazyfs.is_some()
    }

    /// A power failure on node `id`'s disk: everything it had not synced is dropped (with
    /// `tear`, a prefix of the last unsynced write survives, its length drawn from `tear`). The
    /// node must be down ([`Db::kill`] first).
    pub fn lose_unsynced(&mut self, id: u64, tear: Option<u64>) -> Result<CrashReport> {
        let p = self.procs.get_mut(&id).context("unknown node")?;
        if p.child.is_some() {
            bail!("node {id} is running: kill it before its disk loses what it had not synced");
        }
        let disk = p
            .disk
            .as_mut()
            .with_context(|| format!("node {id}'s data directory is not on sluice-lazyfs"))?;
        let answer = disk.command(&match tear {
            Some(seed) => format!("crash-tear {seed}"),
            None => "crash".to_string(),
        })?;
        Ok(serde_json::from_value(answer)?)
    }

    /// An operator request to node `id`.
    pub async fn admin(
        &self,
        id: u64,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<(u16, Value)> {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.url(id)))
            .bearer_auth(TOKEN);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let r = req.send().await?;
        let status = r.status().as_u16();
        Ok((status, r.json().await.unwrap_or(Value::Null)))
    }

    /// An operator request to any running member, retrying until `timeout`.
    pub async fn admin_any(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
        timeout: Duration,
    ) -> Result<Value> {
        let deadline = Instant::now() + timeout;
        loop {
            for &id in &self.members {
                if !self.is_up(id) {
                    continue;
                }
                if let Ok((s, v)) = self.admin(id, method.clone(), path, body.clone()).await {
                    if (200..300).contains(&s) {
                        return Ok(v);
                    }
                    if s < 500 && s != 429 {
                        bail!("{method} {path}: {s} {v}");
                    }
                }
            }
            if Instant::now() > deadline {
                bail!("{method} {path}: no node answered in {timeout:?}");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The leader as reported by a running member (which may be one that is down: the harness
    /// acts on what the cluster believes).
    pub async fn leader(&self) -> Option<u64> {
        node::leader(&self.http, &self.running_urls(), TOKEN, |_| true).await
    }

    /// Removes a voter for good (membership change through the cluster), then stops it.
    pub async fn remove_member(&mut self, id: u64) -> Result<()> {
        self.admin_any(
            reqwest::Method::POST,
            "/v1/cluster/membership",
            Some(serde_json::json!({"action": "remove", "id": id})),
            Duration::from_secs(20),
        )
        .await?;
        self.members.retain(|&m| m != id);
        self.kill(id);
        Ok(())
    }

    /// Starts a node with a fresh id, adds it as a learner, then promotes it.
    pub async fn add_member(&mut self) -> Result<u64> {
        let id = self.next_id;
        self.next_id += 1;
        self.net.add_node(id)?;
        let peers = self.members.clone();
        self.proxy_links(id, &peers).await?;
        self.write_config(id, &peers, false)?;
        self.spawn(id)?;
        let a = self.addrs(id);
        let learner = serde_json::json!({"id": id, "raft_addr": a.raft, "http_addr": a.http, "grpc_addr": a.grpc});
        self.admin_any(
            reqwest::Method::POST,
            "/v1/cluster/learners",
            Some(learner),
            Duration::from_secs(20),
        )
        .await?;
        self.members.push(id);
        self.admin_any(
            reqwest::Method::POST,
            "/v1/cluster/membership",
            Some(serde_json::json!({"action": "promote", "id": id})),
            Duration::from_secs(30),
        )
        .await?;
        Ok(id)
    }

    /// Heals everything: network, clocks, paused and killed members.
    pub async fn heal_all(&mut self) -> Result<()> {
        self.net.heal()?;
        let ids: Vec<u64> = self.procs.keys().copied().collect();
        for id in ids {
            self.set_clock(id, 0)?;
            if self.members.contains(&id) {
                self.pause(id, false);
                self.restart(id)?;
            }
        }
        Ok(())
    }

    /// Stops every process, then unmounts the disks.
    pub fn stop_all(&mut self) {
        let ids: Vec<u64> = self.procs.keys().copied().collect();
        for &id in &ids {
            self.kill(id);
        }
        for id in ids {
            if let Some(mut disk) = self.procs.get_mut(&id).and_then(|p| p.disk.take()) {
                disk.unmount();
            }
        }
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        self.stop_all();
    }
}
