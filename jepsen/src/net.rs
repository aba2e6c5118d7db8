//! The test network: every node in its own network namespace, joined by veth pairs to a bridge
//! that lives in a namespace of its own; the harness (the clients) reaches the bridge from the
//! root namespace. Faults are nftables rules inside the node namespaces. Everything created is
//! removed on drop, also after a failure.

use anyhow::{bail, Context, Result};
use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

/// Runs a command, failing with its output.
pub fn sh(program: &str, args: &[&str]) -> Result<String> {
    let out = Command::new(program)
        .args(args)
        .output()
        .with_context(|| format!("running {program}"))?;
    if !out.status.success() {
        bail!(
            "{program} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn nft(ns: &str, script: &str) -> Result<()> {
    use std::io::Write;
    let mut child = Command::new("ip")
        .args(["netns", "exec", ns, "nft", "-f", "-"])
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()?;
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(script.as_bytes())?;
    let out = child.wait_with_output()?;
    if !out.status.success() {
        bail!(
            "nft in {ns}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Removes namespaces and host links left by earlier runs that were killed.
pub fn cleanup_stale(prefix: &str) {
    if let Ok(list) = sh("ip", &["netns", "list"]) {
        for line in list.lines() {
            let name = line.split_whitespace().next().unwrap_or_default();
            if name.starts_with(prefix) {
                let _ = sh("ip", &["netns", "delete", name]);
            }
        }
    }
    if let Ok(links) = sh("ip", &["-o", "link", "show"]) {
        for l in links.lines() {
            if let Some(name) = l
                .split(": ")
                .nth(1)
                .map(|n| n.split('@').next().unwrap_or(n))
            {
                if name.starts_with(prefix) {
                    let _ = sh("ip", &["link", "delete", name]);
                }
            }
        }
    }
}

/// The namespaces, links and firewall state of one test.
#[derive(Debug)]
pub struct Net {
    prefix: String,
    /// First three octets of the /24 the nodes live in, e.g. `10.77.3`.
    pub subnet: String,
    nodes: BTreeSet<u64>,
    blocked: BTreeSet<(u64, u64)>,
    loss_percent: u8,
}

impl Net {
    /// Creates the bridge namespace and the harness's link to it.
    pub fn create(prefix: &str, subnet: &str) -> Result<Self> {
        cleanup_stale(prefix);
        let net = Net {
            prefix: prefix.into(),
            subnet: subnet.into(),
            nodes: BTreeSet::new(),
            blocked: BTreeSet::new(),
            loss_percent: 0,
        };
        let b = net.bridge_ns();
        sh("ip", &["netns", "add", &b])?;
        sh("ip", &["-n", &b, "link", "add", "br0", "type", "bridge"])?;
        sh("ip", &["-n", &b, "link", "set", "br0", "up"])?;
        let host = format!("{prefix}h");
        sh(
            "ip",
            &[
                "link", "add", &host, "type", "veth", "peer", "name", "hb", "netns", &b,
            ],
        )?;
        sh(
            "ip",
            &["addr", "add", &format!("{subnet}.1/24"), "dev", &host],
        )?;
        sh("ip", &["link", "set", &host, "up"])?;
        sh("ip", &["-n", &b, "link", "set", "hb", "master", "br0"])?;
        sh("ip", &["-n", &b, "link", "set", "hb", "up"])?;
        Ok(net)
    }

    fn bridge_ns(&self) -> String {
        format!("{}b", self.prefix)
    }

    /// The namespace of node `id`.
    pub fn ns(&self, id: u64) -> String {
        format!("{}n{id}", self.prefix)
    }

    /// The address of node `id`.
    pub fn ip(&self, id: u64) -> String {
        format!("{}.{}", self.subnet, 10 + id)
    }

    /// Creates node `id`'s namespace, link and (empty) firewall.
    pub fn add_node(&mut self, id: u64) -> Result<()> {
        assert!(id < 240, "node ids must fit the /24");
        let (ns, b) = (self.ns(id), self.bridge_ns());
        sh("ip", &["netns", "add", &ns])?;
        sh("ip", &["-n", &ns, "link", "set", "lo", "up"])?;
        let peer = format!("v{id}");
        sh(
            "ip",
            &[
                "-n", &ns, "link", "add", "eth0", "type", "veth", "peer", "name", &peer, "netns",
                &b,
            ],
        )?;
        sh(
            "ip",
            &[
                "-n",
                &ns,
                "addr",
                "add",
                &format!("{}/24", self.ip(id)),
                "dev",
                "eth0",
            ],
        )?;
        sh("ip", &["-n", &ns, "link", "set", "eth0", "up"])?;
        sh("ip", &["-n", &b, "link", "set", &peer, "master", "br0"])?;
        sh("ip", &["-n", &b, "link", "set", &peer, "up"])?;
        self.nodes.insert(id);
        self.apply(id)
    }

    /// Rewrites node `id`'s firewall from the current faults.
    fn apply(&self, id: u64) -> Result<()> {
        let mut rules = String::new();
        for &(a, b) in &self.blocked {
            let other = if a == id {
                b
            } else if b == id {
                a
            } else {
                continue;
            };
            // `ct original` catches connections redirected to the link proxy, whose packets
            // carry the proxy's address once translated.
            let ip = self.ip(other);
            rules.push_str(&format!(
                "add rule inet sj input ip saddr {ip} drop\n\
                 add rule inet sj input ct original ip daddr {ip} drop\n\
                 add rule inet sj output ip daddr {ip} drop\n\
                 add rule inet sj output ct original ip daddr {ip} drop\n"
            ));
        }
        if self.loss_percent > 0 {
            for &other in self.nodes.iter().filter(|&&o| o != id) {
                let (ip, pct) = (self.ip(other), self.loss_percent);
                rules.push_str(&format!(
                    "add rule inet sj input ip saddr {ip} numgen random mod 100 < {pct} drop\n\
                     add rule inet sj input ct original ip daddr {ip} numgen random mod 100 < {pct} drop\n"
                ));
            }
        }
        let script = format!(
            "table inet sj {{}}\ndelete table inet sj\ntable inet sj {{\n chain input {{ type filter hook input priority 0; policy accept; }}\n chain output {{ type filter hook output priority 0; policy accept; }}\n}}\n{rules}"
        );
        nft(&self.ns(id), &script)
    }

    fn apply_all(&self) -> Result<()> {
        for &id in &self.nodes {
            self.apply(id)?;
        }
        Ok(())
    }

    /// Cuts every pair of nodes that are not in the same group (nodes in no group keep their links).
    pub fn partition(&mut self, groups: &[Vec<u64>]) -> Result<()> {
        let group_of: BTreeMap<u64, usize> = groups
            .iter()
            .enumerate()
            .flat_map(|(g, ids)| ids.iter().map(move |&i| (i, g)))
            .collect();
        self.blocked.clear();
        for &a in &self.nodes {
            for &b in &self.nodes {
                if a < b {
                    if let (Some(ga), Some(gb)) = (group_of.get(&a), group_of.get(&b)) {
                        if ga != gb {
                            self.blocked.insert((a, b));
                        }
                    }
                }
            }
        }
        self.apply_all()
    }

    /// Cuts exactly these pairs.
    pub fn block_pairs(&mut self, pairs: &[(u64, u64)]) -> Result<()> {
        self.blocked = pairs.iter().map(|&(a, b)| (a.min(b), a.max(b))).collect();
        self.apply_all()
    }

    /// Drops this percentage of packets between nodes.
    pub fn loss(&mut self, percent: u8) -> Result<()> {
        self.loss_percent = percent.min(100);
        self.apply_all()
    }

    /// Removes every fault.
    pub fn heal(&mut self) -> Result<()> {
        self.blocked.clear();
        self.loss_percent = 0;
        self.apply_all()
    }

    /// Sends node `from`'s connections to `to_port` on node `to` to `via` instead (the link
    /// proxy), with a `dnat` in `from`'s namespace. Faults still cut them (`ct original`).
    pub fn redirect(
        &self,
        from: u64,
        to: u64,
        to_port: u16,
        via: std::net::SocketAddr,
    ) -> Result<()> {
        let script = format!(
            "table ip sjp {{\n chain out {{ type nat hook output priority -100; policy accept; }}\n}}\n\
             add rule ip sjp out ip daddr {} tcp dport {to_port} dnat to {via}\n",
            self.ip(to)
        );
        nft(&self.ns(from), &script)
    }

    /// The harness's address on the test network (where the link proxy listens).
    pub fn host_ip(&self) -> String {
        format!("{}.1", self.subnet)
    }

    /// Node ids with a namespace.
    pub fn node_ids(&self) -> Vec<u64> {
        self.nodes.iter().copied().collect()
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        cleanup_stale(&self.prefix);
    }
}
