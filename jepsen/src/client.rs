//! HTTP calls as a client makes them, classified the way a history needs: `Ok`, `Fail` (certainly
//! did not happen) or `Info` (may have happened).

use crate::db::TOKEN;
use serde_json::Value;
use std::time::Duration;

/// The result of one call.
#[derive(Debug, Clone, PartialEq)]
pub enum Res {
    /// A 2xx answer.
    Ok(Value),
    /// Certainly not applied (the error says so).
    Fail(String),
    /// Unknown: timeout, broken connection, or an error that does not rule the write out.
    Info(String),
}

/// Error codes after which a write certainly did not happen.
const DEFINITE: [&str; 15] = [
    "code_invalid",
    "code_used_up",
    "code_expired",
    "invite_only",
    "no_leader",
    "not_ready",
    "overloaded",
    "rate_limited",
    "invalid_field",
    "invalid_ticket",
    "room_not_found",
    "queue_full",
    "unknown_visitor",
    "malformed_json",
    "unauthorized",
];

/// Sends a request and classifies the answer. `write` says whether the call changes state (a
/// failed read is always `Fail`).
pub async fn call(
    http: &reqwest::Client,
    method: reqwest::Method,
    url: &str,
    ticket: Option<&str>,
    operator: bool,
    write: bool,
    timeout: Duration,
) -> Res {
    let mut req = http.request(method, url).timeout(timeout);
    if let Some(t) = ticket {
        req = req.header("authorization", format!("Ticket {t}"));
    }
    if operator {
        req = req.bearer_auth(TOKEN);
    }
    classify(req, write).await
}

/// A write with a JSON body (a join that brings an access code), with the visitor's ticket.
pub async fn call_json(
    http: &reqwest::Client,
    url: &str,
    ticket: &str,
    body: &Value,
    timeout: Duration,
) -> Res {
    let req = http
        .post(url)
        .timeout(timeout)
        .header("authorization", format!("Ticket {ticket}"))
        .json(body);
    classify(req, true).await
}

async fn classify(req: reqwest::RequestBuilder, write: bool) -> Res {
    match req.send().await {
        Err(e) => {
            // A refused connection never reached the server.
            if e.is_connect() || !write {
                Res::Fail(format!("connect: {e}"))
            } else {
                Res::Info(format!("transport: {e}"))
            }
        }
        Ok(r) => {
            let status = r.status();
            let body: Value = r.json().await.unwrap_or(Value::Null);
            if status.is_success() {
                return Res::Ok(body);
            }
            let code = body["error"]["code"]
                .as_str()
                .unwrap_or("unknown")
                .to_string();
            if !write || DEFINITE.contains(&code.as_str()) {
                Res::Fail(code)
            } else {
                Res::Info(code)
            }
        }
    }
}
