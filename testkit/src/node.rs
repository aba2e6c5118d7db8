//! `sluice serve` processes as the harnesses run them (the API's tests on loopback, the load
//! generator's cluster, the fault suite's nodes in network namespaces): each node's
//! configuration head and `[[peers]]`, starting a node and knowing it listens, readiness, and
//! which node leads.

use std::collections::BTreeMap;
use std::fmt::Display;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use tokio::time::Instant;

/// The log filter for nodes under the harnesses: warnings, the state machine store's notes
/// (snapshots built and installed), what the node holds at once (its start-up line), and none
/// of openraft's per-heartbeat replication noise about peers that are down, which a fault run
/// would otherwise fill its logs with.
pub const NODE_LOG: &str =
    "warn,sluice_raft::sm_store=info,sluice_api::budget=info,openraft::replication=error,\
openraft::engine::handler::replication_handler=error,openraft::core::heartbeat=error";

/// Where one node listens: `host:port` for HTTP, gRPC and Raft.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Addrs {
    pub http: String,
    pub grpc: String,
    pub raft: String,
}

impl Addrs {
    /// Three free loopback ports (see [`crate::free_port`]).
    pub fn loopback() -> Self {
        Addrs::on(
            "127.0.0.1",
            crate::free_port(),
            crate::free_port(),
            crate::free_port(),
        )
    }

    /// The given ports on `host`.
    pub fn on(host: impl Display, http: u16, grpc: u16, raft: u16) -> Self {
        Addrs {
            http: format!("{host}:{http}"),
            grpc: format!("{host}:{grpc}"),
            raft: format!("{host}:{raft}"),
        }
    }

    /// `http://` and the HTTP address.
    pub fn url(&self) -> String {
        format!("http://{}", self.http)
    }
}

/// The `[[peers]]` sections that name every node of `nodes`, by id.
pub fn peers_toml(nodes: &BTreeMap<u64, Addrs>) -> String {
    nodes
        .iter()
        .map(|(id, a)| {
            format!(
                "[[peers]]\nid = {id}\nraft = \"{}\"\nhttp = \"{}\"\ngrpc = \"{}\"\n\n",
                a.raft, a.http, a.grpc
            )
        })
        .collect()
}

/// The top-level keys of node `id`'s configuration: its id, data directory, addresses, whether
/// it bootstraps the cluster, the operator token. Other top-level keys may
/// follow; then [`peers_toml`] and the sections (`[tokens]`, `[raft]`, …), since a key after a
/// table belongs to that table.
pub fn node_toml(
    id: u64,
    data_dir: &Path,
    a: &Addrs,
    bootstrap: bool,
    admin_token: &str,
) -> String {
    format!(
        "node_id = {id}\ndata_dir = \"{data}\"\nhttp_addr = \"{http}\"\ngrpc_addr = \"{grpc}\"\n\
         raft_addr = \"{raft}\"\nbootstrap = {bootstrap}\nadmin_token = \"{admin_token}\"\n",
        data = data_dir.display(),
        http = a.http,
        grpc = a.grpc,
        raft = a.raft,
    )
}

/// Spawns `cmd` (a `sluice serve`, or a command that execs one) with its standard output piped
/// here, and waits for the line it prints once it listens. `Err` names `what` and the line it
/// printed instead (the process is killed then).
pub fn spawn_listening(mut cmd: Command, what: &str) -> Result<Child, String> {
    let mut child = cmd
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("starting {what}: {e}"))?;
    let mut line = String::new();
    let read = BufReader::new(child.stdout.take().expect("piped stdout")).read_line(&mut line);
    if read.is_err() || !line.starts_with("listening") {
        let _ = child.kill();
        let _ = child.wait();
        return Err(format!("{what} did not start: printed {line:?}"));
    }
    Ok(child)
}

/// Waits until every node at `urls` (`http://host:port`) answers `GET /readyz` with 200 (it
/// has recovered and knows a leader), polling every 50 ms, all within `timeout`.
pub async fn wait_ready(
    http: &reqwest::Client,
    urls: impl IntoIterator<Item = (u64, String)>,
    timeout: Duration,
) -> Result<(), String> {
    let deadline = Instant::now() + timeout;
    for (id, url) in urls {
        let url = format!("{url}/readyz");
        while !http
            .get(&url)
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            if Instant::now() > deadline {
                return Err(format!("node {id} not ready within {timeout:?}"));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    Ok(())
}

/// The leader that the first of the nodes at `urls` to name one that `accept`s reports in
/// `GET /v1/cluster` (asked with the operator `token`); `None` if none does now.
pub async fn leader(
    http: &reqwest::Client,
    urls: &BTreeMap<u64, String>,
    token: &str,
    accept: impl Fn(u64) -> bool,
) -> Option<u64> {
    for url in urls.values() {
        let Ok(r) = http
            .get(format!("{url}/v1/cluster"))
            .bearer_auth(token)
            .send()
            .await
        else {
            continue;
        };
        let Ok(v) = r.json::<serde_json::Value>().await else {
            continue;
        };
        if let Some(l) = v["leader"].as_u64().filter(|l| accept(*l)) {
            return Some(l);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_configuration_names_the_node_and_every_peer() {
        let nodes: BTreeMap<u64, Addrs> = [
            (1, Addrs::on("10.0.0.1", 8080, 50051, 7000)),
            (2, Addrs::on("10.0.0.2", 8080, 50051, 7000)),
        ]
        .into();
        let text =
            node_toml(2, Path::new("/data/n2"), &nodes[&2], false, "tok") + &peers_toml(&nodes);
        assert!(text.starts_with(
            "node_id = 2\ndata_dir = \"/data/n2\"\nhttp_addr = \"10.0.0.2:8080\"\n\
             grpc_addr = \"10.0.0.2:50051\"\nraft_addr = \"10.0.0.2:7000\"\n\
             bootstrap = false\nadmin_token = \"tok\"\n"
        ));
        assert_eq!(text.matches("[[peers]]").count(), 2);
        assert!(text.contains("[[peers]]\nid = 1\nraft = \"10.0.0.1:7000\"\n"));
        assert_eq!(nodes[&1].url(), "http://10.0.0.1:8080");
    }

    #[test]
    fn a_process_that_does_not_print_listening_did_not_start() {
        let mut ok = Command::new("sh");
        ok.args(["-c", "echo listening 127.0.0.1:1; sleep 30"]);
        let mut child = spawn_listening(ok, "a listener").unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        let mut bad = Command::new("sh");
        bad.args(["-c", "echo 'error: no config'"]);
        let e = spawn_listening(bad, "a broken node").unwrap_err();
        assert!(
            e.contains("a broken node") && e.contains("no config"),
            "{e}"
        );
    }
}
