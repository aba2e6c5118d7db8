//! Instruction counts of the edge's hot paths, from request bytes to response bytes, under
//! Valgrind's callgrind (gungraun): counts, not seconds, so that they do not move with the
//! machine's load. `benchmarks/instructions.py` runs this and the state machine's
//! (`statemachine/benches/instructions.rs`) and compares each count with
//! `benchmarks/instructions.json`.
//!
//! Each bench starts a one-node cluster (`sluice dev`'s configuration, RocksDB in a temporary
//! directory, visitor rate limits lifted) on a current-thread runtime, outside the count. The
//! counted part writes one request on a kept-alive loopback connection and reads the answer,
//! driving that runtime on the bench's own thread: the connection's parsing, the edge, the
//! handler, for a join the batcher, openraft, the apply (and the ledger's records) and the
//! answer with its signed tokens all run there. Only the log's writer thread (its fsync) and
//! RocksDB's own threads run elsewhere, and are not counted.

use gungraun::{
    library_benchmark, library_benchmark_group, main, Callgrind, EntryPoint, LibraryBenchmarkConfig,
};
use sluice_api::server::Running;
use std::hint::black_box;
use std::net::{SocketAddr, TcpListener};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const TOKEN: &str = "bench-operator-token-0123456789abcdef";

/// A running node, a kept-alive connection to it, and the request the bench sends.
struct Node {
    rt: tokio::runtime::Runtime,
    running: Option<Running>,
    conn: TcpStream,
    request: Vec<u8>,
    _dir: tempfile::TempDir,
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Some(r) = self.running.take() {
            self.rt.block_on(r.shutdown());
        }
    }
}

fn free_addr() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
}

/// Sends `request` on `conn` and reads one answer (its head and a `Content-Length` body),
/// driving `rt` meanwhile: the node's tasks run on this thread, and while it waits for its log
/// writer's fsync the thread sleeps in the runtime's poll, counting nothing.
fn exchange(rt: &tokio::runtime::Runtime, conn: &mut TcpStream, request: &[u8]) -> Vec<u8> {
    rt.block_on(async {
        conn.write_all(request).await.expect("request written");
        let mut answer = Vec::with_capacity(4096);
        loop {
            if let Some(len) = complete(&answer) {
                assert_eq!(answer.len(), len, "one answer at a time");
                return answer;
            }
            let n = conn.read_buf(&mut answer).await.expect("the answer read");
            assert!(n > 0, "the node closed the connection");
        }
    })
}

/// The length of the whole answer in `bytes`, once its head has arrived.
fn complete(bytes: &[u8]) -> Option<usize> {
    let head = bytes.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let text = std::str::from_utf8(&bytes[..head]).ok()?;
    let body = text
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse::<usize>().ok())?
        })
        .unwrap_or(0);
    (bytes.len() >= head + body).then_some(head + body)
}

fn status_of(answer: &[u8]) -> u16 {
    std::str::from_utf8(&answer[9..12])
        .unwrap()
        .parse()
        .unwrap()
}

fn body_of(answer: &[u8]) -> serde_json::Value {
    let head = answer.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    serde_json::from_slice(&answer[head..]).expect("a JSON body")
}

fn request(method: &str, path: &str, headers: &str, body: &str) -> Vec<u8> {
    format!(
        "{method} {path} HTTP/1.1\r\nhost: bench\r\n{headers}content-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// A node with the rooms `open` (everybody admitted at once) and `paused` (everybody waits),
/// the ledger kept or not, and one visitor of each; `request` picks the counted request from
/// the admitted visitor's and the waiter's tickets.
fn node(ledger: bool, request_of: fn(&str, &str) -> Vec<u8>) -> Node {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = sluice_api::dev::config(
        dir.path(),
        free_addr(),
        free_addr(),
        free_addr(),
        Some(TOKEN.into()),
    )
    .unwrap();
    cfg.limits.visitor_requests_per_second = 1_000_000;
    cfg.limits.visitor_burst = 1_000_000;
    cfg.ledger.enabled = ledger;
    // One node leads alone: its timers are all that runs between requests.
    cfg.raft.heartbeat_ms = 1_000;
    cfg.raft.election_timeout_min_ms = 3_000;
    cfg.raft.election_timeout_max_ms = 6_000;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let running = rt.block_on(async {
        let r = sluice_api::server::start(&cfg, None).await.unwrap();
        assert!(r.wait_ready(Duration::from_secs(120)).await, "node ready");
        r
    });
    let mut conn = rt.block_on(TcpStream::connect(running.http_addr)).unwrap();
    conn.set_nodelay(true).unwrap();
    let auth = format!("authorization: Bearer {TOKEN}\r\ncontent-type: application/json\r\n");
    for (room, paused) in [("open", false), ("paused", true)] {
        let config = format!(
            r#"{{"capacity":1000000,"admit_per_minute":60000000,"admit_burst":1000000,"session_ttl_secs":3600,"waiter_ttl_secs":3600,"max_waiting":1000000,"paused":{paused}}}"#
        );
        let a = exchange(
            &rt,
            &mut conn,
            &request("PUT", &format!("/v1/rooms/{room}"), &auth, &config),
        );
        assert!(
            matches!(status_of(&a), 200 | 201),
            "{}",
            String::from_utf8_lossy(&a)
        );
    }
    let json = "content-type: application/json\r\n";
    let mut ticket = |room: &str| {
        let a = exchange(
            &rt,
            &mut conn,
            &request("POST", &format!("/v1/rooms/{room}/join"), json, "{}"),
        );
        assert_eq!(status_of(&a), 200, "{}", String::from_utf8_lossy(&a));
        body_of(&a)["ticket"].as_str().unwrap().to_string()
    };
    let (admitted, waiting) = (ticket("open"), ticket("paused"));
    let request = request_of(&admitted, &waiting);
    // Once outside the count: what is made on first use (a cached admission token) is made.
    let first = exchange(&rt, &mut conn, &request);
    assert!(
        matches!(status_of(&first), 200),
        "{}",
        String::from_utf8_lossy(&first)
    );
    Node {
        rt,
        running: Some(running),
        conn,
        request,
        _dir: dir,
    }
}

fn gate(admitted: &str, _: &str) -> Vec<u8> {
    request(
        "GET",
        "/gate/open/check",
        &format!("authorization: Ticket {admitted}\r\nx-forwarded-uri: /cart\r\n"),
        "",
    )
}

fn status_admitted(admitted: &str, _: &str) -> Vec<u8> {
    request(
        "GET",
        "/v1/rooms/open/status",
        &format!("authorization: Ticket {admitted}\r\n"),
        "",
    )
}

fn status_waiting(_: &str, waiting: &str) -> Vec<u8> {
    request(
        "GET",
        "/v1/rooms/paused/status",
        &format!("authorization: Ticket {waiting}\r\n"),
        "",
    )
}

/// A new visitor's join to the room that admits at once: a session and its admission token.
fn join(_: &str, _: &str) -> Vec<u8> {
    request(
        "POST",
        "/v1/rooms/open/join",
        "content-type: application/json\r\n",
        "{}",
    )
}

/// A new visitor's join to the paused room: a waiter.
fn join_waiting(_: &str, _: &str) -> Vec<u8> {
    request(
        "POST",
        "/v1/rooms/paused/join",
        "content-type: application/json\r\n",
        "{}",
    )
}

fn ledger_on(request_of: fn(&str, &str) -> Vec<u8>) -> Node {
    node(true, request_of)
}

fn ledger_off(request_of: fn(&str, &str) -> Vec<u8>) -> Node {
    node(false, request_of)
}

/// The counted part: one request written and its answer read.
#[inline(never)]
fn counted(n: &mut Node) -> Vec<u8> {
    exchange(&n.rt, &mut n.conn, black_box(&n.request))
}

#[library_benchmark(
    config = LibraryBenchmarkConfig::default()
        .tool(Callgrind::default().entry_point(EntryPoint::Custom("*::counted".into())))
)]
#[bench::gate_check(setup = ledger_on, args = (gate))]
#[bench::status_admitted(setup = ledger_on, args = (status_admitted))]
#[bench::status_waiting(setup = ledger_on, args = (status_waiting))]
#[bench::join_admitted(setup = ledger_on, args = (join))]
#[bench::join_admitted_no_ledger(setup = ledger_off, args = (join))]
#[bench::join_waiting(setup = ledger_on, args = (join_waiting))]
fn http(mut n: Node) -> Node {
    // Not counted: whatever the node's timers have due since the setup runs first, so that
    // the count starts from a runtime with nothing to do.
    n.rt.block_on(async {
        for _ in 0..64 {
            tokio::task::yield_now().await;
        }
    });
    let answer = counted(&mut n);
    assert_eq!(status_of(&answer), 200);
    n
}

/// The join's checks at the edge alone, from the request's parts to the command it would
/// propose (`Sluice::join_command`): what it reads of the applied state before it writes.
#[inline(never)]
fn counted_checks(n: &Node) -> sluice_statemachine::Command {
    let sluice = &n.running.as_ref().expect("running").sluice;
    let visitor = sluice_statemachine::VisitorId::from_u128(0x5eed);
    let client = Some(std::net::IpAddr::from([192, 0, 2, 7]));
    let proof = sluice_ops::visitors::JoinProof::new(None, None);
    n.rt.block_on(sluice.join_command(black_box("open"), visitor, true, client, &proof))
        .expect("a join command")
}

#[library_benchmark(
    config = LibraryBenchmarkConfig::default()
        .tool(Callgrind::default().entry_point(EntryPoint::Custom("*::counted_checks".into())))
)]
#[bench::plain_room(setup = ledger_on, args = (join))]
fn join_checks(n: Node) -> Node {
    black_box(counted_checks(&n));
    n
}

library_benchmark_group!(name = edge; benchmarks = http, join_checks);
main!(library_benchmark_groups = edge);
