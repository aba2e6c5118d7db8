//! Automatic origin health against real `sluice serve` processes: a local origin whose latency
//! and errors the test sets, probed by the leader. The room goes `slow`, then `down` (and pauses),
//! then back to `ok` after the leader is killed (the new leader probes on), and the admissions
//! are checked against the replicated log, replayed entry by entry.

mod common;

use axum::extract::State;
use axum::http::StatusCode as HttpStatus;
use axum::routing::get;
use base64::Engine;
use common::*;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use sluice_statemachine::{Health, HealthSource, Proposal, StateMachine};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The origin's behaviour, as the test sets it.
#[derive(Default)]
struct Origin {
    delay_ms: AtomicU64,
    failing: AtomicBool,
}

async fn origin_health(State(o): State<Arc<Origin>>) -> HttpStatus {
    tokio::time::sleep(Duration::from_millis(o.delay_ms.load(Ordering::Relaxed))).await;
    if o.failing.load(Ordering::Relaxed) {
        HttpStatus::INTERNAL_SERVER_ERROR
    } else {
        HttpStatus::OK
    }
}

/// Starts the origin on a free loopback port: its health URL.
async fn start_origin(o: Arc<Origin>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = axum::Router::new()
        .route("/health", get(origin_health))
        .with_state(o);
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}/health")
}

/// A cluster whose nodes keep their whole log (no snapshot within the test), so that it can be
/// replayed from its first entry.
async fn start_keeping_the_log(n: u64) -> Cluster {
    let dir = tempfile::tempdir().unwrap();
    let ports: std::collections::BTreeMap<u64, (u16, u16, u16)> = (1..=n)
        .map(|id| (id, (free_port(), free_port(), free_port())))
        .collect();
    let mut c = Cluster {
        dir,
        nodes: Default::default(),
        http: reqwest::Client::builder()
            .timeout(Duration::from_secs(20))
            .build()
            .unwrap(),
    };
    for id in 1..=n {
        let path = c.dir.path().join(format!("n{id}.toml"));
        let text = config(id, c.dir.path(), &ports, "")
            .replace("snapshot_every = 500", "snapshot_every = 1000000");
        assert!(text.contains("snapshot_every = 1000000"));
        std::fs::write(&path, text).unwrap();
        c.add_node(id, ports[&id], "127.0.0.1", path);
    }
    c.wait_ready().await;
    c
}

/// The room as any live node sees it.
async fn room(c: &Cluster, live: &[u64]) -> Value {
    for &id in live {
        let (s, v) = c.admin(id, Method::GET, "/v1/rooms/shop", None).await;
        if s == StatusCode::OK {
            return v;
        }
    }
    panic!("no live node answers");
}

async fn wait_health(c: &Cluster, live: &[u64], health: &str, paused: bool) -> Value {
    let mut last = Value::Null;
    for _ in 0..600 {
        last = room(c, live).await;
        if last["config"]["health"] == health && last["config"]["paused"] == paused {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("room never became {health} (paused {paused}): {last}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_room_follows_its_origin_slow_down_and_back_and_a_new_leader_probes_on() {
    let origin = Arc::new(Origin::default());
    let url = start_origin(origin.clone()).await;
    let mut c = start_keeping_the_log(3).await;
    let rate = 600; // ten a second
    let mut config = room_config(100_000);
    config["admit_per_minute"] = json!(rate);
    config["admit_burst"] = json!(5);
    config["slow_factor"] = json!(0.25);
    config["waiter_ttl_secs"] = json!(600);
    config["origin"] = json!({
        "probe": {"url": url, "interval_secs": 1, "timeout_ms": 1000},
        "window_secs": 5, "min_samples": 2, "latency_percentile": 50,
        "slow_latency_ms": 200, "down_error_permille": 500,
        "worsen_after_secs": 1, "recover_after_secs": 2, "auto_pause": true,
    });
    c.create_room("shop", config).await;
    let v = room(&c, &[1]).await;
    assert_eq!(v["config"]["origin"]["probe"]["url"], url, "{v}");

    // Visitors keep coming, faster than the room admits, so that the line never runs dry.
    let http = c.http.clone();
    let urls: Vec<String> = (1..=3)
        .map(|id| c.node(id).url("/v1/rooms/shop/join"))
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let joiner = {
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut n = 0usize;
            while !stop.load(Ordering::Relaxed) {
                for u in urls.iter().cycle().skip(n % 3).take(3) {
                    if http
                        .post(u)
                        .send()
                        .await
                        .is_ok_and(|r| r.status().is_success())
                    {
                        break;
                    }
                }
                n += 1;
                tokio::time::sleep(Duration::from_millis(40)).await;
            }
        })
    };

    let all = [1, 2, 3];
    wait_for("probes measured", Duration::from_secs(20), || async {
        room(&c, &all).await["origin_window"]["samples"]
            .as_u64()
            .is_some_and(|n| n >= 2)
    })
    .await;
    assert_eq!(room(&c, &all).await["config"]["health"], "ok");

    // Slow answers: slow, from the probe, with its figures.
    origin.delay_ms.store(400, Ordering::Relaxed);
    let v = wait_health(&c, &all, "slow", false).await;
    assert_eq!(v["health_change"]["source"], "probe", "{v}");
    assert!(
        v["health_change"]["over_slow"].as_u64().unwrap() >= 1,
        "{v}"
    );
    assert!(
        v["health_change"]["reason"]
            .as_str()
            .unwrap()
            .contains("slow by the probe"),
        "{v}"
    );
    tokio::time::sleep(Duration::from_secs(3)).await; // admissions at the slow rate, to check

    // Errors: down, and the room pauses.
    origin.delay_ms.store(0, Ordering::Relaxed);
    origin.failing.store(true, Ordering::Relaxed);
    let v = wait_health(&c, &all, "down", true).await;
    assert_eq!(v["paused_by_origin"], true, "{v}");
    assert_eq!(v["health_change"]["paused"], true, "{v}");

    // The leader dies while the origin is down; the origin recovers; the new leader's probes
    // bring the room back.
    let old = c.leader().await;
    c.kill(old);
    let live: Vec<u64> = all.into_iter().filter(|&id| id != old).collect();
    origin.failing.store(false, Ordering::Relaxed);
    let v = wait_health(&c, &live, "ok", false).await;
    assert_eq!(v["paused_by_origin"], false, "{v}");
    assert_eq!(v["health_change"]["paused"], false, "{v}");
    assert_eq!(v["health_change"]["source"], "probe", "{v}");
    let admitted_then = v["totals"]["admitted"].as_u64().unwrap();
    wait_for("admissions resume", Duration::from_secs(20), || async {
        room(&c, &live).await["totals"]["admitted"]
            .as_u64()
            .unwrap()
            > admitted_then + 5
    })
    .await;
    stop.store(true, Ordering::Relaxed);
    joiner.await.unwrap();

    // The log, replayed: every health change came from a probe report, in the order slow,
    // down, ok; and between changes the admissions kept to the rate the health allowed.
    let (_, log) = c
        .admin(
            live[0],
            Method::GET,
            "/v1/cluster/log?from=1&limit=10000",
            None,
        )
        .await;
    let mut sm = StateMachine::new();
    let mut changes = Vec::new();
    // (log time, admitted) at the start of the current health, and the health.
    let mut since: Option<(u64, u64, Health)> = None;
    let mut checked = [0u64; 3];
    for e in log["entries"].as_array().unwrap() {
        let (term, index) = (e["term"].as_u64().unwrap(), e["index"].as_u64().unwrap());
        match e["proposal"].as_str() {
            None => sm.apply_empty(term, index),
            Some(p) => {
                let bytes = base64::engine::general_purpose::STANDARD.decode(p).unwrap();
                let proposal = Proposal::decode(&bytes).unwrap();
                sm.apply(term, index, &proposal);
            }
        }
        let Some(r) = sm.room("shop") else { continue };
        let (now, admitted, health) = (sm.clock_ms(), r.totals.admitted, r.config.health);
        match since {
            Some((_, _, h)) if h == health => {}
            _ => {
                if since.is_some() {
                    let change = r.health_change.clone().expect("a recorded change");
                    assert_eq!(change.source, HealthSource::Probe, "at index {index}");
                    changes.push(health);
                }
                since = Some((now, admitted, health));
            }
        }
        let (t0, a0, h) = since.unwrap();
        let factor = match h {
            Health::Ok => 1.0,
            Health::Slow => 0.25,
            Health::Down => 0.0,
        };
        let allowed = 5 + (rate as f64 * factor * (now - t0) as f64 / 60_000.0).ceil() as u64;
        assert!(
            admitted - a0 <= allowed,
            "{h:?} since {t0}: {} admitted in {} ms, at most {allowed}",
            admitted - a0,
            now - t0
        );
        if h == Health::Down {
            assert_eq!(admitted, a0, "nobody is admitted while the origin is down");
        }
        checked[factor_index(h)] += 1;
    }
    assert_eq!(changes, [Health::Slow, Health::Down, Health::Ok]);
    assert!(
        checked.iter().all(|&n| n > 0),
        "entries checked per health: {checked:?}"
    );
}

fn factor_index(h: Health) -> usize {
    match h {
        Health::Ok => 0,
        Health::Slow => 1,
        Health::Down => 2,
    }
}

/// Proxies' reports, tried as an attacker would: without a token, with a wrong one, oversized,
/// malformed, to a room that watches no origin. None changes anything; a backend's reports of
/// failing answers turn the room `down`, with `reports` as the reason's source.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn origin_reports_need_a_token_and_a_rule_and_stay_within_bounds() {
    let backend = "backend-token-for-origin-reports-0123456789";
    let c = Cluster::start_with(1, &format!("backend_tokens = [\"{backend}\"]")).await;
    c.create_room("plain", room_config(10)).await;
    let mut config = room_config(10);
    config["origin"] = json!({"window_secs": 60, "min_samples": 10, "down_error_permille": 500});
    c.create_room("shop", config).await;
    let post = |room: &str, token: Option<&str>, body: Value| {
        let mut r = c
            .http
            .post(c.node(1).url(&format!("/v1/rooms/{room}/origin/reports")))
            .json(&body);
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        async move {
            let r = r.send().await.unwrap();
            (r.status(), r.json::<Value>().await.unwrap_or(Value::Null))
        }
    };
    let failing = |n: usize| json!({"samples": vec![json!({"status": 503, "latency_ms": 20}); n]});
    let code = |v: &Value| v["error"]["code"].as_str().unwrap_or_default().to_string();

    let (s, _) = post("shop", None, failing(20)).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    let (s, _) = post("shop", Some("wrong"), failing(20)).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    let (s, v) = post("shop", Some(backend), failing(1_001)).await;
    assert_eq!(
        (s, code(&v).as_str()),
        (StatusCode::BAD_REQUEST, "invalid_field"),
        "{v}"
    );
    let (s, v) = post("shop", Some(backend), failing(0)).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    let (s, v) = post("shop", Some(backend), json!({"samples": [{"status": "x"}]})).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    let (s, v) = post("plain", Some(backend), failing(20)).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no origin"),
        "{v}"
    );
    let (s, _) = post("nothing", Some(backend), failing(20)).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let (_, v) = c.admin(1, Method::GET, "/v1/rooms/shop", None).await;
    assert_eq!(
        v["config"]["health"], "ok",
        "nothing refused changed anything: {v}"
    );
    assert!(v["origin_window"]["samples"] == 0, "{v}");

    // A backend's reports: ten answers, nine fine, then ten more failing.
    let (s, v) = post(
        "shop",
        Some(backend),
        json!({"samples": vec![json!({"status": 200, "latency_ms": 20}); 10]}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["config"]["health"], "ok");
    let (s, v) = post("shop", Some(backend), failing(10)).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["config"]["health"], "down", "{v}");
    assert_eq!(v["health_change"]["source"], "reports", "{v}");
    assert_eq!(v["health_change"]["samples"], 20, "{v}");
    assert_eq!(v["health_change"]["errors"], 10, "{v}");
    let metrics = c.metrics(1).await;
    assert!(
        metrics.contains("sluice_room_origin_health{room=\"shop\"} 2"),
        "the metric says down"
    );
}
