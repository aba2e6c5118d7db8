//! The admission ledger's read surfaces against real `sluice serve` processes: its pages over
//! HTTP and gRPC, `sluice ctl ledger export` and `explain`, the explanation of a visitor's place,
//! the dashboard's recent decisions and "Explain a visitor", the draw commitment rooms that draw
//! publish (JSON and the waiting page), and what bad input and a node without a ledger get.

mod common;

use common::*;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use std::process::Command;
use std::time::Duration;

fn ctl(c: &Cluster, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["ctl", "--url", &c.node(1).url(""), "--token", TOKEN])
        .args(args)
        .output()
        .unwrap()
}

async fn get(c: &Cluster, path: &str) -> (StatusCode, Value) {
    c.admin(1, Method::GET, path, None).await
}

/// Every record of `path` (a ledger URL with its filters), a page of `limit` at a time.
async fn all_pages(c: &Cluster, path: &str, limit: usize) -> Vec<Value> {
    let sep = if path.contains('?') { '&' } else { '?' };
    let mut out = Vec::new();
    let mut after: Option<String> = None;
    for _ in 0..1_000 {
        let url = match &after {
            Some(a) => format!("{path}{sep}limit={limit}&after={a}"),
            None => format!("{path}{sep}limit={limit}"),
        };
        let (s, v) = get(c, &url).await;
        assert_eq!(s, StatusCode::OK, "{url}: {v}");
        let records = v["records"].as_array().unwrap();
        assert!(records.len() <= limit, "{v}");
        out.extend(records.iter().cloned());
        match v["next"].as_str() {
            Some(n) => after = Some(n.to_string()),
            None => return out,
        }
    }
    panic!("{path}: no last page");
}

fn of_kind<'a>(records: &'a [Value], kind: &str) -> Vec<&'a Value> {
    records.iter().filter(|r| r["kind"] == kind).collect()
}

/// The sale: a paused room of capacity 3 that five visitors join; the operator force-admits
/// one, then resumes (two more go in from the head of the line); the second visitor leaves and
/// the fourth takes the place. The visitors' ids, in order of joining.
async fn sale(c: &Cluster) -> Vec<(String, String)> {
    c.create_room(
        "sale",
        json!({"capacity": 3, "admit_per_minute": 600000, "session_ttl_secs": 600,
               "waiter_ttl_secs": 600, "paused": true}),
    )
    .await;
    let mut visitors = Vec::new();
    for _ in 0..5 {
        let v = c.join(1, "sale", None).await;
        assert_eq!(v["state"], "waiting", "{v}");
        visitors.push((
            v["visitor_id"].as_str().unwrap().to_string(),
            v["ticket"].as_str().unwrap().to_string(),
        ));
    }
    let (s, v) = c
        .admin(
            1,
            Method::POST,
            "/v1/rooms/sale/admit",
            Some(json!({"count": 1})),
        )
        .await;
    assert_eq!((s, &v["count"]), (StatusCode::OK, &json!(1)), "{v}");
    let (s, v) = c
        .admin(1, Method::POST, "/v1/rooms/sale/resume", None)
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let (s, v) = c
        .visitor(
            1,
            Method::POST,
            "/v1/rooms/sale/leave",
            Some(&visitors[1].1),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let fourth = c.status(1, "sale", &visitors[3].1).await;
    assert_eq!(fourth["state"], "admitted", "{fourth}");
    visitors
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ledger_pages_through_a_sale_and_filters_by_visitor_and_time() {
    let c = Cluster::start(1).await;
    let visitors = sale(&c).await;
    let whole = all_pages(&c, "/v1/rooms/sale/ledger", 1_000).await;
    // Two at a time, the same records in the same order.
    assert_eq!(all_pages(&c, "/v1/rooms/sale/ledger", 2).await, whole);
    let keys: Vec<(u64, u64, u64)> = whole
        .iter()
        .map(|r| {
            (
                r["index"].as_u64().unwrap(),
                r["sub"].as_u64().unwrap(),
                r["n"].as_u64().unwrap(),
            )
        })
        .collect();
    assert!(keys.windows(2).all(|w| w[0] < w[1]), "log order: {keys:?}");
    assert!(whole.iter().all(|r| r["room"] == "sale"));
    // What happened, as records.
    let joined = of_kind(&whole, "joined");
    assert_eq!(joined.len(), 5, "{whole:?}");
    for (i, j) in joined.iter().enumerate() {
        assert_eq!(j["visitor_id"], visitors[i].0.as_str());
        assert_eq!(j["position"], i as u64 + 1, "{j}");
        assert!(j.get("lane").is_none(), "the room's own line: {j}");
    }
    let admitted = of_kind(&whole, "admitted");
    let rules: Vec<(&str, &str)> = admitted
        .iter()
        .map(|r| {
            (
                r["visitor_id"].as_str().unwrap(),
                r["rule"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        rules,
        [
            (visitors[0].0.as_str(), "forced"),
            (visitors[1].0.as_str(), "head"),
            (visitors[2].0.as_str(), "head"),
            (visitors[3].0.as_str(), "head"),
        ]
    );
    // The force-admit and the resume are the operator's (the break-glass token acts as admin);
    // the admission the leave made room for is the room's own.
    assert_eq!(admitted[0]["by"], "admin", "{}", admitted[0]);
    assert_eq!(admitted[1]["by"], "admin", "{}", admitted[1]);
    assert_eq!(admitted[3]["by"], Value::Null, "{}", admitted[3]);
    let ended = of_kind(&whole, "ended");
    assert_eq!(ended.len(), 1);
    assert_eq!(
        (
            &ended[0]["visitor_id"],
            &ended[0]["reason"],
            &ended[0]["admitted"]
        ),
        (&json!(visitors[1].0), &json!("left"), &json!(true))
    );
    assert_eq!(of_kind(&whole, "resumed").len(), 1);
    let committed = of_kind(&whole, "draw_committed");
    assert_eq!(
        committed.len(),
        1,
        "a room commits to a draw secret when made"
    );
    assert_eq!(committed[0]["commitment"].as_str().unwrap().len(), 64);
    // Times: RFC 3339 and ms, the same instant.
    for r in &whole {
        let t = r["time"].as_str().unwrap();
        assert!(t.ends_with('Z') && t.len() == 24, "{t}");
    }
    // One visitor's records: its join and its admission, nothing else.
    let fourth = all_pages(
        &c,
        &format!("/v1/rooms/sale/ledger?visitor={}", visitors[3].0),
        1,
    )
    .await;
    assert_eq!(
        fourth
            .iter()
            .map(|r| r["kind"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["joined", "admitted"]
    );
    assert_eq!(fourth[0], *joined[3]);
    // By time: the force-admit's instant, as ms and as RFC 3339, holds the records of that
    // instant only.
    let at = admitted[0]["time_ms"].as_u64().unwrap();
    let expected: Vec<Value> = whole
        .iter()
        .filter(|r| r["time_ms"].as_u64() == Some(at))
        .cloned()
        .collect();
    let by_ms = all_pages(&c, &format!("/v1/rooms/sale/ledger?from={at}&to={at}"), 3).await;
    assert_eq!(by_ms, expected);
    let t = admitted[0]["time"].as_str().unwrap();
    let by_text = all_pages(&c, &format!("/v1/rooms/sale/ledger?from={t}&to={t}"), 3).await;
    assert_eq!(by_text, expected);
    let later = all_pages(&c, &format!("/v1/rooms/sale/ledger?from={}", at + 1), 100).await;
    assert!(later.iter().all(|r| r["time_ms"].as_u64().unwrap() > at));
    // The page says how far this node's records go.
    let (_, page) = get(&c, "/v1/rooms/sale/ledger?limit=1").await;
    assert_eq!(page["complete_from"], 1);
    assert!(page["through"].as_u64().unwrap() >= keys.last().unwrap().0);
    assert!(page["next"].is_string());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_ledger_requests_are_refused_with_their_field() {
    let c = Cluster::start(1).await;
    c.create_room("sale", room_config(5)).await;
    c.join(1, "sale", None).await;
    // No token, a wrong one.
    let r = c
        .http
        .get(c.node(1).url("/v1/rooms/sale/ledger"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "unauthorized", "{v}");
    let r = c
        .http
        .get(c.node(1).url(&format!(
            "/v1/rooms/sale/visitors/{}/explain",
            "0".repeat(32)
        )))
        .bearer_auth("not-the-token-at-all-0123456789")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    for (query, field) in [
        ("after=AAAA", "after"),
        ("after=not-a-cursor-of-this-api!", "after"),
        ("visitor=nope", "visitor"),
        ("visitor=0123456789abcdef0123456789abcdeg", "visitor"),
        ("limit=0", "limit"),
        ("limit=1001", "limit"),
        ("from=2000&to=1000", "from"),
        ("from=yesterday", "from"),
        ("to=2026-13-01T00:00:00Z", "to"),
    ] {
        let (s, v) = get(&c, &format!("/v1/rooms/sale/ledger?{query}")).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{query}: {v}");
        assert_eq!(v["error"]["code"], "invalid_field", "{query}: {v}");
        assert_eq!(v["error"]["field"], field, "{query}: {v}");
    }
    for query in ["limit=-1", "colour=blue", "limit=many"] {
        let (s, v) = get(&c, &format!("/v1/rooms/sale/ledger?{query}")).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{query}: {v}");
        assert_eq!(v["error"]["code"], "invalid_query", "{query}: {v}");
    }
    let (s, v) = get(&c, "/v1/rooms/Bad%20Name/ledger").await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    let (s, v) = get(&c, "/v1/rooms/sale/visitors/nope/explain").await;
    assert_eq!(
        (s, &v["error"]["field"]),
        (StatusCode::BAD_REQUEST, &json!("visitor")),
        "{v}"
    );
    // A room that never existed has an empty ledger, not an error; a deleted room's records
    // stay readable.
    let (s, v) = get(&c, "/v1/rooms/never/ledger").await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["records"], json!([]));
    let gone = c.join(1, "sale", None).await;
    let (s, _) = c.admin(1, Method::DELETE, "/v1/rooms/sale", None).await;
    assert_eq!(s, StatusCode::OK);
    let records = all_pages(&c, "/v1/rooms/sale/ledger", 100).await;
    assert_eq!(of_kind(&records, "deleted").len(), 1, "{records:?}");
    let (s, x) = get(
        &c,
        &format!(
            "/v1/rooms/sale/visitors/{}/explain",
            gone["visitor_id"].as_str().unwrap()
        ),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{x}");
    let deleted_at = of_kind(&records, "deleted")[0]["index"].as_u64().unwrap();
    let text = sentences(&x);
    assert!(
        text.contains(&format!("The room was deleted at index {deleted_at}")),
        "{text}"
    );
}

fn sentences(x: &Value) -> String {
    x["sentences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["text"].as_str().unwrap())
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_visitor_is_explained_by_the_api_and_ctl_and_the_export_is_the_pages() {
    let c = Cluster::start(1).await;
    let visitors = sale(&c).await;
    let whole = all_pages(&c, "/v1/rooms/sale/ledger", 1_000).await;
    let joined = of_kind(&whole, "joined");
    let admitted = of_kind(&whole, "admitted");
    let (j4, forced, resumed, a4) = (
        joined[3]["index"].as_u64().unwrap(),
        admitted[0]["index"].as_u64().unwrap(),
        admitted[1]["index"].as_u64().unwrap(),
        admitted[3]["index"].as_u64().unwrap(),
    );
    let explain = |v: &str| format!("/v1/rooms/sale/visitors/{v}/explain");
    let (s, x) = get(&c, &explain(&visitors[3].0)).await;
    assert_eq!(s, StatusCode::OK, "{x}");
    let text = sentences(&x);
    assert_eq!(x["state"], "admitted");
    assert!(
        text.contains(&format!(
            "You joined at index {j4} ({}) as number 4 in the room's own line.",
            joined[3]["time"].as_str().unwrap()
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "3 visitors were admitted after you joined and before you were: 1 forced by operator admin (index {forced}), 2 from the head of the room's own line (index {resumed})."
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "You were admitted at index {a4} ({}), first in the room's own line when the room's rate and capacity allowed.",
            admitted[3]["time"].as_str().unwrap()
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "admissions resumed at index {resumed} by operator admin"
        )),
        "{text}"
    );
    assert_eq!(x["joined"]["index"], j4);
    assert_eq!(x["joined"]["position"], 4);
    assert_eq!(x["admitted"]["rule"], "head");
    assert_eq!(x["admitted_between"]["total"], 3);
    assert_eq!(x["admitted_between"]["cut"], false);
    // Sentences cite their indexes.
    let cited: Vec<u64> = x["sentences"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| {
            s["indexes"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i.as_u64().unwrap())
        })
        .collect();
    for i in [j4, forced, resumed, a4] {
        assert!(cited.contains(&i), "{i} in {cited:?}");
    }
    // The first was forced in; the second left; the fifth waits at the head of the line.
    let (_, first) = get(&c, &explain(&visitors[0].0)).await;
    assert!(
        sentences(&first).contains(&format!(
            "You were admitted at index {forced} ({}) by operator admin's force-admit",
            admitted[0]["time"].as_str().unwrap()
        )),
        "{first}"
    );
    let (_, second) = get(&c, &explain(&visitors[1].0)).await;
    let left = of_kind(&whole, "ended")[0]["index"].as_u64().unwrap();
    assert!(
        sentences(&second).contains(&format!("You left at index {left}")),
        "{second}"
    );
    assert_eq!(second["ended"]["reason"], "left");
    let (_, fifth) = get(&c, &explain(&visitors[4].0)).await;
    let fifth_text = sentences(&fifth);
    assert_eq!(fifth["state"], "waiting");
    assert!(
        fifth_text.contains("You are still waiting: number 1 in the room's own line."),
        "{fifth_text}"
    );
    assert!(
        fifth_text.contains(&format!(
            "Since you joined, 4 visitors were admitted: 1 forced by operator admin (index {forced}), 3 from the head of the room's own line (indexes {resumed}–{a4})."
        )),
        "{fifth_text}"
    );

    // `ctl explain`: the same sentences for a person, the same JSON for a script.
    let out = ctl(&c, &["explain", "--room", "sale", &visitors[3].0]);
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        stdout.starts_with(&format!(
            "Visitor {} in room sale (admitted):\n",
            visitors[3].0
        )),
        "{stdout}"
    );
    for s in x["sentences"].as_array().unwrap() {
        assert!(
            stdout.contains(&format!("  {}\n", s["text"].as_str().unwrap())),
            "{stdout}"
        );
    }
    let out = ctl(
        &c,
        &["-o", "json", "explain", "--room", "sale", &visitors[3].0],
    );
    let as_json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(as_json["sentences"], x["sentences"]);
    let bad = ctl(&c, &["explain", "--room", "sale", "nope"]);
    assert_eq!(bad.status.code(), Some(4), "{bad:?}");
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("invalid_field"),
        "{bad:?}"
    );

    // `ctl ledger export`: one line per record, the records of the pages.
    let out = ctl(&c, &["ledger", "export", "--room", "sale"]);
    assert!(out.status.success(), "{out:?}");
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let now = all_pages(&c, "/v1/rooms/sale/ledger", 1_000).await;
    assert!(lines.len() >= whole.len());
    assert_eq!(lines[..], now[..lines.len()], "the export is the pages");
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains(&format!("{} records of room sale", lines.len())),
        "{:?}",
        out.stderr
    );
    let out = ctl(
        &c,
        &[
            "ledger",
            "export",
            "--room",
            "sale",
            "--visitor",
            &visitors[3].0,
        ],
    );
    let lines: Vec<&str> = std::str::from_utf8(&out.stdout).unwrap().lines().collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    // The API's own field order, so that a line reads as the API wrote it.
    assert!(lines[0].starts_with("{\"index\":"), "{}", lines[0]);
    let bad = ctl(
        &c,
        &["ledger", "export", "--room", "sale", "--visitor", "nope"],
    );
    assert_eq!(bad.status.code(), Some(4), "{bad:?}");
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains("exporting the ledger of room sale: 0 records written")
            && err.contains("invalid_field"),
        "{err}"
    );
    let down = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["ctl", "--url", "http://127.0.0.1:9", "--token", TOKEN])
        .args(["ledger", "export", "--room", "sale"])
        .output()
        .unwrap();
    assert_eq!(down.status.code(), Some(3), "{down:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_reads_the_same_ledger_and_explanations() {
    use sluice_grpc::pb;
    let c = Cluster::start(1).await;
    let visitors = sale(&c).await;
    let channel = tonic::transport::Channel::from_shared(format!("http://{}", c.node(1).grpc))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut admin = pb::admin_client::AdminClient::new(channel.clone());
    fn authorized<T>(m: T) -> tonic::Request<T> {
        let mut req = tonic::Request::new(m);
        req.metadata_mut()
            .insert("authorization", format!("Bearer {TOKEN}").parse().unwrap());
        req
    }
    let whole = all_pages(&c, "/v1/rooms/sale/ledger", 1_000).await;
    let mut records = Vec::new();
    let mut after = String::new();
    loop {
        let page = admin
            .ledger(authorized(pb::LedgerRequest {
                room: "sale".into(),
                after: after.clone(),
                limit: 3,
                ..Default::default()
            }))
            .await
            .unwrap()
            .into_inner();
        records.extend(page.records);
        if page.next.is_empty() {
            break;
        }
        after = page.next;
    }
    assert_eq!(records.len(), whole.len());
    for (g, h) in records.iter().zip(&whole) {
        // Each field as HTTP has it (absent there: unset here).
        let as_http = json!({
            "index": g.index, "sub": g.sub, "n": g.n, "time": g.time, "time_ms": g.time_ms,
            "room": g.room, "by": g.by, "kind": g.kind, "visitor_id": g.visitor_id, "seq": g.seq,
            "lane": g.lane, "position": g.position, "rule": g.rule, "seed": g.seed,
            "candidates": g.candidates, "rank": g.rank, "reason": g.reason,
            "admitted": g.admitted, "sessions": g.sessions, "waiting": g.waiting,
            "active": g.active, "waiters": g.waiters, "by_origin": g.by_origin,
            "health": g.health, "text": g.text, "commitment": g.commitment, "secret": g.secret,
            "name": g.name, "detail": g.detail, "outcome": g.outcome,
        });
        let mut as_http = as_http.as_object().unwrap().clone();
        as_http.retain(|k, v| !v.is_null() || k == "by");
        assert_eq!(Value::Object(as_http), *h);
    }
    // Filtered by visitor; bad input is INVALID_ARGUMENT with the API's code.
    let mine = admin
        .ledger(authorized(pb::LedgerRequest {
            room: "sale".into(),
            visitor_id: visitors[3].0.clone(),
            ..Default::default()
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(mine.records.len(), 2);
    for bad in [
        pb::LedgerRequest {
            room: "sale".into(),
            after: "nope".into(),
            ..Default::default()
        },
        pb::LedgerRequest {
            room: "sale".into(),
            limit: 5_000,
            ..Default::default()
        },
        pb::LedgerRequest {
            room: "sale".into(),
            from: "2".into(),
            to: "1".into(),
            ..Default::default()
        },
    ] {
        let e = admin.ledger(authorized(bad)).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e:?}");
        assert_eq!(
            e.metadata().get("sluice-error-code").unwrap(),
            "invalid_field"
        );
    }
    let refused = admin
        .ledger(pb::LedgerRequest {
            room: "sale".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::Unauthenticated);
    // The explanation: the same sentences and facts.
    let g = admin
        .explain(authorized(pb::ExplainRequest {
            room: "sale".into(),
            visitor_id: visitors[3].0.clone(),
        }))
        .await
        .unwrap()
        .into_inner();
    let (_, h) = get(
        &c,
        &format!("/v1/rooms/sale/visitors/{}/explain", visitors[3].0),
    )
    .await;
    let texts: Vec<&str> = g.sentences.iter().map(|s| s.text.as_str()).collect();
    assert_eq!(texts.join("\n"), sentences(&h));
    assert_eq!(g.joined_index, h["joined"]["index"].as_u64());
    assert_eq!(g.position, Some(4));
    assert_eq!(g.rule.as_deref(), Some("head"));
    assert_eq!(g.admitted_between, 3);
    assert_eq!(g.groups.len(), 2, "{:?}", g.groups);
    // The room's draw commitment, for anyone, over the Visitor service too.
    let mut visitor = pb::visitor_client::VisitorClient::new(channel);
    let d = visitor
        .draw(pb::DrawRequest {
            room: "sale".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(
        !d.draws && d.draw.is_none(),
        "a FIFO room draws nothing: {d:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lottery_admission_is_explained_with_its_commitment_until_revealed() {
    let c = Cluster::start(1).await;
    c.create_room(
        "lot",
        json!({"capacity": 10, "admit_per_minute": 600000, "session_ttl_secs": 600,
               "waiter_ttl_secs": 600, "mode": "lottery", "paused": true}),
    )
    .await;
    let mut tickets = Vec::new();
    for _ in 0..4 {
        tickets.push(c.join(1, "lot", None).await);
    }
    // The commitment is public before anyone is drawn, and in the operator's view.
    let r = c
        .http
        .get(c.node(1).url("/v1/rooms/lot/draw"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let public: Value = r.json().await.unwrap();
    assert_eq!(public["draws"], true, "{public}");
    let commitment = public["draw"]["commitment"].as_str().unwrap().to_string();
    assert_eq!(commitment.len(), 64);
    assert_eq!(public["draw"]["algorithm"], "sluice-draw-v2");
    let (_, room) = get(&c, "/v1/rooms/lot").await;
    assert_eq!(room["draw"], public["draw"]);
    // The waiting page shows its start, and what it means, in the visitor's language.
    let ticket = tickets[0]["ticket"].as_str().unwrap();
    for (lang, words) in [
        ("en", "This draw is committed in advance to"),
        ("de", "Diese Auslosung ist im Voraus festgelegt:"),
    ] {
        let html = c
            .http
            .get(c.node(1).url(&format!("/wait/lot?lang={lang}")))
            .header("accept", "text/html")
            .header("cookie", format!("sluice_ticket_lot={ticket}"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(
            html.contains(&format!("{words} <code>{}</code>", &commitment[..16])),
            "{lang}: {html}"
        );
        assert!(html.contains(&commitment), "the whole commitment: {html}");
        assert!(html.contains("<details id=\"draw\""), "{html}");
    }
    let (s, _) = c.admin(1, Method::POST, "/v1/rooms/lot/resume", None).await;
    assert_eq!(s, StatusCode::OK);
    let v = tickets[2]["visitor_id"].as_str().unwrap();
    let path = format!("/v1/rooms/lot/visitors/{v}/explain");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let x = loop {
        let (_, x) = get(&c, &path).await;
        if x["state"] == "admitted" {
            break x;
        }
        assert!(std::time::Instant::now() < deadline, "never drawn: {x}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    };
    let text = sentences(&x);
    assert!(text.contains("drawn by lot among"), "{text}");
    assert!(
        text.contains(&format!(
            "bound to the commitment {commitment} (sluice-draw-v2)"
        )) && text.contains("has not been revealed yet"),
        "{text}"
    );
    assert_eq!(x["admitted"]["rule"], "lottery");
    assert_eq!(x["admitted"]["commitment"], commitment.as_str());
    // The room stops drawing: the secret is revealed, and the explanation says where.
    let (s, _) = c
        .admin(
            1,
            Method::POST,
            "/v1/rooms/lot/mode",
            Some(json!({"mode": "fifo"})),
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    let records = all_pages(&c, "/v1/rooms/lot/ledger", 1_000).await;
    let revealed = of_kind(&records, "draw_revealed");
    assert_eq!(revealed.len(), 1, "{records:?}");
    assert_eq!(revealed[0]["commitment"], commitment.as_str());
    let secret = hex32(revealed[0]["secret"].as_str().unwrap());
    assert_eq!(
        sluice_statemachine::draw::commitment(&secret)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>(),
        commitment,
        "the secret answers the commitment"
    );
    let (_, x) = get(&c, &path).await;
    let at = revealed[0]["index"].as_u64().unwrap();
    assert!(
        sentences(&x).contains(&format!("the secret was revealed at index {at}")),
        "{x}"
    );
    assert_eq!(x["admitted"]["revealed_index"], at);
    let (_, public) = get(&c, "/v1/rooms/lot/draw").await;
    assert_eq!(public["draws"], false, "a FIFO room: {public}");
}

fn hex32(s: &str) -> [u8; 32] {
    let mut out = [0u8; 32];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap();
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_shows_recent_decisions_and_explains_a_visitor() {
    let c = Cluster::start(1).await;
    let visitors = sale(&c).await;
    let whole = all_pages(&c, "/v1/rooms/sale/ledger", 1_000).await;
    let http = no_redirect();
    let cookie = c.dashboard_cookie(&http, 1).await;
    let page = |path: String| {
        let (http, cookie, url) = (http.clone(), cookie.clone(), c.node(1).url(&path));
        async move {
            let r = http.get(url).header("cookie", cookie).send().await.unwrap();
            (r.status(), r.text().await.unwrap())
        }
    };
    let (s, html) = page("/admin/rooms/sale".into()).await;
    assert_eq!(s, StatusCode::OK);
    assert!(
        html.contains("<h2 id=\"decisions-h\">Recent decisions</h2>"),
        "{html}"
    );
    let table = html.split("id=\"decisions\"").nth(1).unwrap();
    // Newest first: the last record's index comes before the first's.
    let newest = whole.last().unwrap()["index"].as_u64().unwrap();
    let forced = of_kind(&whole, "admitted")[0]["index"].as_u64().unwrap();
    let pos = |i: u64| table.find(&format!("<tr><td>{i}</td>")).unwrap();
    assert!(pos(newest) < pos(forced), "{table}");
    assert!(table.contains("admitted: forced by an operator"), "{table}");
    assert!(table.contains("<td>admin</td>"), "the operator: {table}");
    assert!(
        table.contains(&format!(
            "/admin/rooms/sale/explain?visitor={}",
            visitors[3].0
        )),
        "a visitor links to its explanation: {table}"
    );
    assert!(
        html.contains("<form method=\"get\" action=\"/admin/rooms/sale/explain\""),
        "{html}"
    );
    // The explain box answers on a page of its own.
    let (s, html) = page(format!(
        "/admin/rooms/sale/explain?visitor={}",
        visitors[3].0
    ))
    .await;
    assert_eq!(s, StatusCode::OK, "{html}");
    let j4 = of_kind(&whole, "joined")[3]["index"].as_u64().unwrap();
    assert!(
        html.contains(&format!("You joined at index {j4}")) && html.contains("as number 4"),
        "{html}"
    );
    assert!(html.contains("id=\"explanation\""), "{html}");
    assert!(!html.contains("<script>"), "no inline script: {html}");
    let (s, html) = page("/admin/rooms/sale/explain?visitor=%3Cb%3E".into()).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(
        html.contains("must be 32 hex digits") && !html.contains("<b>"),
        "{html}"
    );
    // Signed out: back to the sign-in.
    let r = http
        .get(c.node(1).url("/admin/rooms/sale/explain?visitor=00"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_without_a_ledger_says_so() {
    let c = Cluster::start_with(1, "[ledger]\nenabled = false\n").await;
    c.create_room("sale", room_config(5)).await;
    let v = c.join(1, "sale", None).await;
    for path in [
        "/v1/rooms/sale/ledger".to_string(),
        format!(
            "/v1/rooms/sale/visitors/{}/explain",
            v["visitor_id"].as_str().unwrap()
        ),
    ] {
        let (s, e) = get(&c, &path).await;
        assert_eq!(s, StatusCode::NOT_FOUND, "{path}: {e}");
        assert_eq!(e["error"]["code"], "ledger_off", "{e}");
    }
    let out = ctl(&c, &["ledger", "export", "--room", "sale"]);
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("ledger_off"),
        "{out:?}"
    );
}

/// The report after the sale, as the API (JSON and CSV), `sluice ctl report` and the dashboard
/// give it: the sale's places, admissions and the one waiter who gave up, every minute of the
/// range, and bad ranges refused with their field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_report_counts_the_sale_by_the_api_ctl_and_the_dashboard() {
    let c = Cluster::start(1).await;
    let visitors = sale(&c).await;
    // The fifth, still waiting, gives up.
    let (s, v) = c
        .visitor(
            1,
            Method::POST,
            "/v1/rooms/sale/leave",
            Some(&visitors[4].1),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");

    let (s, v) = get(&c, "/v1/rooms/sale/report").await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let t = &v["totals"];
    assert_eq!(
        (
            &t["arrivals"],
            &t["admissions"],
            &t["abandonments"],
            &t["waits_measured"]
        ),
        (&json!(5), &json!(4), &json!(1), &json!(4)),
        "{t}"
    );
    assert!(t["wait_p99_secs"].as_u64().unwrap() < 60, "{t}");
    // A day of minutes by default, each one there, adding up to the totals.
    let minutes = v["minutes"].as_array().unwrap();
    assert_eq!(minutes.len(), 24 * 60 + 1);
    let sum = |k: &str| minutes.iter().map(|m| m[k].as_u64().unwrap()).sum::<u64>();
    assert_eq!(
        (sum("arrivals"), sum("admissions"), sum("abandonments")),
        (5, 4, 1)
    );

    // The CSV: a header and every minute.
    let r = c
        .http
        .get(c.node(1).url("/v1/rooms/sale/report?format=csv&from=2h"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST, "a time must be a time");
    let r = c
        .http
        .get(c.node(1).url("/v1/rooms/sale/report?format=csv"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.headers()["content-type"], "text/csv; charset=utf-8");
    let csv = r.text().await.unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines[0], sluice_ops::report::CSV_HEADER);
    assert_eq!(lines.len(), minutes.len() + 1);
    let csv_arrivals: u64 = lines[1..]
        .iter()
        .map(|l| l.split(',').nth(1).unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(csv_arrivals, 5);

    // `sluice ctl report`: a table of the busy minutes and the totals, CSV, JSON.
    let out = ctl(&c, &["report", "sale", "--from", "1h"]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let total = text.lines().find(|l| l.starts_with("total")).unwrap();
    let cells: Vec<&str> = total.split_whitespace().collect();
    assert_eq!(&cells[1..4], ["5", "4", "1"], "{text}");
    let out = ctl(&c, &["report", "sale", "--csv"]);
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8(out.stdout)
        .unwrap()
        .starts_with(sluice_ops::report::CSV_HEADER));
    let out = ctl(&c, &["-o", "json", "report", "sale"]);
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["totals"]["arrivals"], 5);
    let out = ctl(
        &c,
        &[
            "report",
            "sale",
            "--from",
            "2026-12-01",
            "--to",
            "2026-12-20",
        ],
    );
    assert_eq!(out.status.code(), Some(4), "refused as asked: {out:?}");

    // The dashboard's page, and its downloads with the session.
    let http = no_redirect();
    let cookie = c.dashboard_cookie(&http, 1).await;
    let page = |path: &str| {
        let (http, cookie, url) = (http.clone(), cookie.clone(), c.node(1).url(path));
        async move { http.get(url).header("cookie", cookie).send().await.unwrap() }
    };
    let r = page("/admin/rooms/sale/report").await;
    assert_eq!(r.status(), StatusCode::OK);
    let html = r.text().await.unwrap();
    assert!(html.contains("<dd id=\"rt-arrivals\">5</dd>"), "{html}");
    assert!(html.contains("<dd id=\"rt-abandonments\">1</dd>"), "{html}");
    assert!(html.contains("format=csv"), "{html}");
    let r = page("/admin/rooms/sale/report?format=csv").await;
    assert_eq!(r.headers()["content-type"], "text/csv; charset=utf-8");
    assert!(r.headers()["content-disposition"]
        .to_str()
        .unwrap()
        .contains("sale-report.csv"));
    let r = page("/admin/rooms/sale/report?from=nonsense").await;
    let html = r.text().await.unwrap();
    assert!(html.contains("class=\"err\""), "{html}");
    let r = no_redirect()
        .get(c.node(1).url("/admin/rooms/sale/report?format=csv"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER, "no session, no report");

    // Refused with the field at fault; nobody without a credential.
    for (q, field) in [
        ("from=yesterday", "from"),
        ("from=2026-12-24T19:00:00Z&to=2026-12-24T18:00:00Z", "from"),
        ("from=2026-12-01T00:00:00Z&to=2026-12-09T00:00:00Z", "to"),
        ("format=xml", "format"),
        ("since=1h", ""),
    ] {
        let (s, v) = get(&c, &format!("/v1/rooms/sale/report?{q}")).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{q}: {v}");
        if !field.is_empty() {
            assert_eq!(v["error"]["field"], field, "{q}: {v}");
        }
    }
    let r = c
        .http
        .get(c.node(1).url("/v1/rooms/sale/report"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    // A room never made has an empty report.
    let (s, v) = get(&c, "/v1/rooms/never/report").await;
    assert_eq!((s, &v["totals"]["arrivals"]), (StatusCode::OK, &json!(0)));
}
