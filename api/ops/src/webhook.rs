//! Webhooks: configured URLs told of rooms' and the cluster's events — a room opened or closed,
//! paused or resumed, its origin's health changed, its capacity reached, its line drained, the
//! cluster's membership changed.
//!
//! Events come from the admission ledger, so every node would see the same ones; only the
//! leader delivers them. Each webhook's delivery position is replicated state
//! (`Command::SetWebhookCursor`), so that a new leader goes on from where the last one was
//! told it had delivered: delivery is at least once, and each event carries an id (its ledger
//! position, `index.command.record`, or `m` and the membership entry's index) for the receiver
//! to drop repeats. A delivery is a `POST` of one JSON event, signed
//! (`X-Sluice-Signature: sha256=` HMAC-SHA256 of `timestamp.body` with the webhook's secret,
//! `X-Sluice-Timestamp` in seconds), answered by any 2xx; otherwise it is retried with
//! exponential backoff (1 s doubling to 1 min) for as long as this node leads, and an event
//! older than a day is given up (counted, logged).

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use sluice_raft::RaftNode;
use sluice_statemachine::ledger::{Event, Record, RecordKey};
use sluice_statemachine::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Webhooks a node may be configured with.
pub const WEBHOOKS_MAX: usize = 16;
/// Longest webhook URL.
pub const URL_LEN_MAX: usize = 2_048;
/// Rooms one webhook may name.
pub const ROOMS_PER_WEBHOOK_MAX: usize = 100;
/// How long one delivery may take.
const DELIVERY_TIMEOUT: Duration = Duration::from_secs(5);
/// The first retry's wait, doubled up to [`BACKOFF_MAX`].
const BACKOFF_FIRST: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(60);
/// An event older than this (log time) is given up.
const GIVE_UP_AFTER_MS: u64 = 86_400_000;
/// How often the leader looks for new events.
const POLL: Duration = Duration::from_millis(500);
/// Ledger records read per page.
const PAGE: usize = 500;
/// At most this many pages are read one after another in one look (a backlog of 20,000
/// records a look, 40,000 a second).
const PAGES_PER_LOOK: usize = 40;
/// A webhook seen for the first time is told of events this recent (log time), not of older
/// history.
const FIRST_BACKLOG_MS: u64 = 600_000;
/// The delivery position is written at most this often when only events no webhook wants
/// went by.
const IDLE_CURSOR_EVERY: Duration = Duration::from_secs(10);

/// Every event kind, as the wire names it.
pub const EVENTS: [&str; 8] = [
    "room.opened",
    "room.closed",
    "room.paused",
    "room.resumed",
    "room.health",
    "room.capacity_reached",
    "room.drained",
    "cluster.membership",
];

/// `[[webhooks]]`: one receiver.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookConfig {
    /// Its name (as room names go): the cluster keeps its delivery position under it.
    pub name: String,
    /// Where events are posted (`http` or `https`).
    pub url: String,
    /// The HMAC key the deliveries are signed with, base64, 32 bytes or more.
    pub secret: String,
    /// Only these rooms' events (none: every room's).
    #[serde(default)]
    pub rooms: Vec<String>,
    /// Only these events (none: every one of [`EVENTS`]).
    #[serde(default)]
    pub events: Vec<String>,
}

impl WebhookConfig {
    /// Checks the setting; the decoded secret.
    pub fn check(&self) -> Result<Vec<u8>, String> {
        let field = |f: &str| format!("webhooks.{}: {f}", self.name);
        sluice_statemachine::types::validate_name("webhook", &self.name)
            .map_err(|e| format!("webhooks: {e}"))?;
        if self.url.len() > URL_LEN_MAX
            || !(self.url.starts_with("http://") || self.url.starts_with("https://"))
            || reqwest::Url::parse(&self.url).is_err()
        {
            return Err(field(&format!(
                "url must be an http or https URL of at most {URL_LEN_MAX} bytes"
            )));
        }
        use base64::Engine;
        let secret = base64::engine::general_purpose::STANDARD
            .decode(&self.secret)
            .map_err(|_| field("secret is not base64"))?;
        if secret.len() < 32 {
            return Err(field("secret must decode to at least 32 bytes"));
        }
        if self.rooms.len() > ROOMS_PER_WEBHOOK_MAX {
            return Err(field(&format!("at most {ROOMS_PER_WEBHOOK_MAX} rooms")));
        }
        for r in &self.rooms {
            sluice_statemachine::types::validate_name("room", r)
                .map_err(|e| field(&e.to_string()))?;
        }
        if let Some(e) = self.events.iter().find(|e| !EVENTS.contains(&e.as_str())) {
            return Err(field(&format!(
                "unknown event {e:?}; events are {}",
                EVENTS.join(", ")
            )));
        }
        Ok(secret)
    }

    fn wants(&self, kind: &str, room: &str) -> bool {
        (self.events.is_empty() || self.events.iter().any(|e| e == kind))
            && (self.rooms.is_empty() || room.is_empty() || self.rooms.iter().any(|r| r == room))
    }
}

/// Checks a node's webhooks: each one, and no name twice.
pub fn check_all(hooks: &[WebhookConfig]) -> Result<(), String> {
    if hooks.len() > WEBHOOKS_MAX {
        return Err(format!("at most {WEBHOOKS_MAX} webhooks"));
    }
    let mut names = std::collections::BTreeSet::new();
    for h in hooks {
        h.check()?;
        if !names.insert(&h.name) {
            return Err(format!("webhooks: the name {:?} is used twice", h.name));
        }
    }
    Ok(())
}

/// One event as posted.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Delivery {
    /// Unique and stable: the receiver drops an id it has seen.
    pub id: String,
    /// One of [`EVENTS`].
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The room (empty for cluster events).
    pub room: String,
    /// The log index that made it.
    pub index: u64,
    /// Log time, RFC 3339.
    pub time: String,
    /// Log time, ms since the epoch.
    pub time_ms: u64,
    /// What else the event says (the new health, the operator who paused, the members).
    pub data: serde_json::Value,
    /// Where the webhook's position goes once it is delivered.
    #[serde(skip)]
    cursor: RecordKey,
}

/// The event a ledger record makes, if any.
pub fn event_of(r: &Record) -> Option<Delivery> {
    let (kind, data) = match &r.event {
        Event::Opened => ("room.opened", serde_json::json!({})),
        Event::Closed => ("room.closed", serde_json::json!({})),
        Event::Paused { by_origin } => (
            "room.paused",
            serde_json::json!({ "by_origin": by_origin, "by": r.by }),
        ),
        Event::Resumed => ("room.resumed", serde_json::json!({ "by": r.by })),
        Event::Health { health } => (
            "room.health",
            serde_json::json!({ "health": health.as_str(), "by": r.by }),
        ),
        Event::CapacityReached => ("room.capacity_reached", serde_json::json!({})),
        Event::Drained => ("room.drained", serde_json::json!({})),
        _ => return None,
    };
    Some(Delivery {
        id: format!("{}.{}.{}", r.index, r.sub, r.n),
        kind,
        room: r.room.clone(),
        index: r.index,
        time: crate::ledger::rfc3339(r.time_ms),
        time_ms: r.time_ms,
        data,
        cursor: r.key(),
    })
}

/// The signature header's value for `body` sent at `timestamp` (seconds).
pub fn signature(secret: &[u8], timestamp: u64, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes any key length");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    let sig = mac.finalize().into_bytes();
    let hex: String = sig.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256={hex}")
}

/// Counters for `/metrics`.
#[derive(Debug, Default)]
pub struct WebhookMetrics {
    /// Events delivered.
    pub delivered: AtomicU64,
    /// Attempts that failed (each retry counts).
    pub failed_attempts: AtomicU64,
    /// Events given up (older than a day).
    pub given_up: AtomicU64,
    /// Stretches of the log after a webhook's position that this leader holds no records of
    /// (it caught up by a snapshot), passed over.
    pub gaps: AtomicU64,
}

/// The entries after position `at` whose records a node whose records are whole from
/// `complete_from` on never held, first and last (`None`: it holds all after `at`).
fn unreadable(at: RecordKey, complete_from: u64) -> Option<(u64, u64)> {
    // The records of `at.index` itself after `at` are needed too, unless `at` closes its entry.
    let first = if at.sub == u32::MAX && at.n == u32::MAX {
        at.index + 1
    } else {
        at.index.max(1)
    };
    (first < complete_from).then(|| (first, complete_from - 1))
}

/// Starts one delivery task per webhook; they end with `cancel`.
pub fn spawn(
    node: RaftNode,
    hooks: &[WebhookConfig],
    metrics: Arc<WebhookMetrics>,
    cancel: CancellationToken,
) -> Result<(), String> {
    check_all(hooks)?;
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(DELIVERY_TIMEOUT)
        .build()
        .map_err(|e| format!("webhooks: {e}"))?;
    for h in hooks {
        let secret = h.check()?;
        let task = Deliverer {
            node: node.clone(),
            hook: h.clone(),
            secret,
            http: http.clone(),
            metrics: metrics.clone(),
        };
        let cancel = cancel.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = cancel.cancelled() => {}
                _ = task.run() => {}
            }
        });
    }
    Ok(())
}

const NO_LEDGER: &str = "this node keeps no ledger: webhooks need one ([ledger] enabled)";

struct Deliverer {
    node: RaftNode,
    hook: WebhookConfig,
    secret: Vec<u8>,
    http: reqwest::Client,
    metrics: Arc<WebhookMetrics>,
}

impl Deliverer {
    async fn run(self) {
        let mut last_write = tokio::time::Instant::now();
        // How far this leader has read records past the replicated position without finding
        // an event for the hook: pages of other records are read once, not again on every
        // look until the position is next saved.
        let mut scanned: Option<RecordKey> = None;
        loop {
            tokio::time::sleep(POLL).await;
            if !self.node.is_leader() {
                scanned = None;
                continue;
            }
            // Whole pages one after another while a backlog lasts, within a bound per look.
            for _ in 0..PAGES_PER_LOOK {
                match self.pass(&mut last_write, &mut scanned).await {
                    Ok(true) => {}
                    Ok(false) => break,
                    Err(e) => {
                        tracing::debug!(webhook = %self.hook.name, error = %e, "webhook pass");
                        break;
                    }
                }
            }
        }
    }

    /// Where delivery stands: the replicated position, or, for a webhook never delivered, the
    /// events of the last ten minutes (not the whole history).
    async fn cursor(&self) -> Result<RecordKey, String> {
        let (at, now) = self
            .node
            .read(|st| (st.sm.webhook_cursor(&self.hook.name), st.sm.clock_ms()))
            .map_err(|e| e.to_string())?
            .0;
        match at {
            Some(at) => Ok(at),
            None => {
                let start = self
                    .node
                    .ledger_position_before(now.saturating_sub(FIRST_BACKLOG_MS))
                    .await
                    .map_err(|e| e.to_string())?
                    .ok_or(NO_LEDGER)?;
                // Not before this node's records begin: the backlog is what it holds.
                let (complete_from, _) = self.coverage().await?;
                let start = start.max(RecordKey {
                    index: complete_from - 1,
                    sub: u32::MAX,
                    n: u32::MAX,
                });
                self.save(start).await?;
                Ok(start)
            }
        }
    }

    async fn save(&self, through: RecordKey) -> Result<(), String> {
        self.node
            .write(Command::SetWebhookCursor {
                hook: self.hook.name.clone(),
                through,
            })
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    /// One page: deliver what came since the position, in order, and move the position on.
    /// True when the page was full (more may follow at once).
    async fn pass(
        &self,
        last_write: &mut tokio::time::Instant,
        scanned: &mut Option<RecordKey>,
    ) -> Result<bool, String> {
        let saved = self.cursor().await?;
        let at = scanned.filter(|s| *s > saved).unwrap_or(saved);
        let (complete_from, through) = self.coverage().await?;
        if let Some((first, last)) = unreadable(at, complete_from) {
            // A leader that caught up by a snapshot never held the records of those entries:
            // their events, if any, cannot be delivered from here. Said, counted, passed.
            self.metrics.gaps.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(
                webhook = %self.hook.name,
                first, last,
                "webhook events of entries this leader holds no records of (it caught up by a snapshot) are not delivered"
            );
            *scanned = Some(RecordKey {
                index: last,
                sub: u32::MAX,
                n: u32::MAX,
            });
            return Ok(true);
        }
        let records = self
            .node
            .ledger_after(Some(at), PAGE)
            .await
            .map_err(|e| e.to_string())?
            .ok_or(NO_LEDGER)?;
        let full = records.len() == PAGE;
        let mut events: Vec<Delivery> = records
            .iter()
            .filter_map(event_of)
            .filter(|d| self.hook.wants(d.kind, &d.room))
            .collect();
        let page_end = records.last().map(|r| r.key());
        let (membership, now_ms) = self.membership_since(at, page_end, through)?;
        if let Some(d) = membership {
            let pos = events
                .iter()
                .position(|e| e.cursor > d.cursor)
                .unwrap_or(events.len());
            events.insert(pos, d);
        }
        for d in events {
            // Deliveries go forward: the position saved never goes back.
            assert!(d.cursor > at, "a webhook event at or before its position");
            if now_ms.saturating_sub(d.time_ms) > GIVE_UP_AFTER_MS {
                self.metrics.given_up.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(webhook = %self.hook.name, id = %d.id, "webhook event older than a day given up");
            } else if !self.deliver(&d).await {
                return Ok(false); // no longer leading: the next leader goes on
            }
            self.save(d.cursor).await?;
            *scanned = Some(d.cursor);
            *last_write = tokio::time::Instant::now();
        }
        if let Some(end) = page_end {
            if end > at {
                *scanned = Some(end);
                if last_write.elapsed() >= IDLE_CURSOR_EVERY {
                    self.save(end).await?;
                    *last_write = tokio::time::Instant::now();
                }
            }
        }
        Ok(full)
    }

    /// The membership's event, when it changed after the position `at` and within the page
    /// that ends at `page_end` (`through`: the last entry whose records are written), and the
    /// cluster's time.
    fn membership_since(
        &self,
        at: RecordKey,
        page_end: Option<RecordKey>,
        through: u64,
    ) -> Result<(Option<Delivery>, u64), String> {
        let (member_index, voters, learners, now_ms) = self
            .node
            .read(|st| {
                let m = st.membership.membership();
                (
                    st.membership.log_id().as_ref().map_or(0, |l| l.index),
                    m.voter_ids().collect::<Vec<_>>(),
                    m.learner_ids().collect::<Vec<_>>(),
                    st.sm.clock_ms(),
                )
            })
            .map_err(|e| e.to_string())?
            .0;
        let due = member_index > at.index
            && page_end.is_none_or(|e| member_index <= e.index)
            && self.hook.wants("cluster.membership", "")
            // Records are written behind the applies: the position moves past the membership
            // entry only once every record before it is written and read.
            && (page_end.is_some_and(|e| member_index < e.index) || through >= member_index);
        if !due {
            return Ok((None, now_ms));
        }
        let cursor = RecordKey {
            index: member_index,
            sub: u32::MAX,
            n: u32::MAX,
        };
        let d = Delivery {
            id: format!("m{member_index}"),
            kind: "cluster.membership",
            room: String::new(),
            index: member_index,
            time: crate::ledger::rfc3339(now_ms),
            time_ms: now_ms,
            data: serde_json::json!({ "voters": voters, "learners": learners }),
            cursor,
        };
        Ok((Some(d), now_ms))
    }

    /// Where this node's records are whole: the first and the last log index.
    async fn coverage(&self) -> Result<(u64, u64), String> {
        self.node
            .ledger_coverage()
            .await
            .map_err(|e| e.to_string())?
            .ok_or_else(|| NO_LEDGER.to_string())
    }

    /// Posts one event until a 2xx answers or the event is a day old (log time); false if this
    /// node stopped leading meanwhile.
    async fn deliver(&self, d: &Delivery) -> bool {
        let body = serde_json::to_vec(d).expect("an event encodes");
        let mut wait = BACKOFF_FIRST;
        loop {
            let ts = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |t| t.as_secs());
            let sent = self
                .http
                .post(&self.hook.url)
                .header("content-type", "application/json")
                .header("x-sluice-event", d.kind)
                .header("x-sluice-event-id", &d.id)
                .header("x-sluice-timestamp", ts.to_string())
                .header("x-sluice-signature", signature(&self.secret, ts, &body))
                .body(body.clone())
                .send()
                .await;
            match sent {
                Ok(r) if r.status().is_success() => {
                    self.metrics.delivered.fetch_add(1, Ordering::Relaxed);
                    return true;
                }
                Ok(r) => {
                    tracing::warn!(webhook = %self.hook.name, id = %d.id, status = %r.status(), "webhook refused; retrying")
                }
                Err(e) => {
                    // Without the URL, which may carry a secret (a user and password, or a
                    // token in its path).
                    let e = e.without_url();
                    tracing::warn!(webhook = %self.hook.name, id = %d.id, error = %e, "webhook unreachable; retrying")
                }
            }
            self.metrics.failed_attempts.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(BACKOFF_MAX);
            if !self.node.is_leader() {
                return false;
            }
            // An event retried for a day is given up, as one found that old is, so that the
            // events after it are not held back for ever.
            let now_ms = self.node.read(|st| st.sm.clock_ms()).map_or(0, |r| r.0);
            if now_ms.saturating_sub(d.time_ms) > GIVE_UP_AFTER_MS {
                self.metrics.given_up.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(webhook = %self.hook.name, id = %d.id, "webhook event retried for a day given up");
                return true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hook() -> WebhookConfig {
        use base64::Engine;
        WebhookConfig {
            name: "ops".into(),
            url: "https://ops.example/hooks".into(),
            secret: base64::engine::general_purpose::STANDARD.encode([7u8; 32]),
            rooms: vec![],
            events: vec![],
        }
    }

    #[test]
    fn settings_are_checked() {
        assert!(hook().check().is_ok());
        for bad in [
            WebhookConfig {
                url: "ftp://x".into(),
                ..hook()
            },
            WebhookConfig {
                url: format!("https://x/{}", "a".repeat(URL_LEN_MAX)),
                ..hook()
            },
            WebhookConfig {
                secret: "c2hvcnQ=".into(),
                ..hook()
            },
            WebhookConfig {
                events: vec!["room.exploded".into()],
                ..hook()
            },
            WebhookConfig {
                name: "".into(),
                ..hook()
            },
        ] {
            assert!(bad.check().is_err(), "{bad:?}");
        }
        assert!(check_all(&[hook(), hook()]).unwrap_err().contains("twice"));
    }

    #[test]
    fn a_leader_passes_over_only_the_entries_it_holds_no_records_of() {
        let key = |index, sub, n| RecordKey { index, sub, n };
        let end = u32::MAX;
        // Whole from the beginning: nothing unreadable, wherever the position is.
        assert_eq!(unreadable(key(0, end, end), 1), None);
        assert_eq!(unreadable(key(0, 0, 0), 1), None);
        // Whole from 100 on: a position that closed entry 99 misses nothing ...
        assert_eq!(unreadable(key(99, end, end), 100), None);
        assert_eq!(unreadable(key(150, 2, 0), 100), None);
        // ... one inside entry 99 misses the rest of 99, one further back more.
        assert_eq!(unreadable(key(99, 3, 1), 100), Some((99, 99)));
        assert_eq!(unreadable(key(40, end, end), 100), Some((41, 99)));
        assert_eq!(unreadable(key(0, end, end), 100), Some((1, 99)));
    }

    #[test]
    fn the_signature_is_hmac_sha256_of_timestamp_and_body() {
        // RFC 4231-style check against an independent computation.
        let s = signature(b"key", 1_700_000_000, b"{}");
        let mut mac = Hmac::<Sha256>::new_from_slice(b"key").unwrap();
        mac.update(b"1700000000.{}");
        let want: String = mac
            .finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(s, format!("sha256={want}"));
        assert_ne!(s, signature(b"key", 1_700_000_001, b"{}"));
    }

    #[test]
    fn events_come_from_room_records_and_are_filtered() {
        let r = Record {
            index: 7,
            sub: 1,
            n: 2,
            time_ms: 1_000,
            room: "sale".into(),
            by: Some("alice".into()),
            event: Event::Paused { by_origin: false },
        };
        let d = event_of(&r).unwrap();
        assert_eq!((d.id.as_str(), d.kind), ("7.1.2", "room.paused"));
        assert_eq!(d.data["by"], "alice");
        let joined = Record {
            event: Event::Drained,
            ..r.clone()
        };
        assert_eq!(event_of(&joined).unwrap().kind, "room.drained");
        let only = WebhookConfig {
            rooms: vec!["other".into()],
            events: vec!["room.paused".into()],
            ..hook()
        };
        assert!(!only.wants("room.paused", "sale"));
        assert!(only.wants("room.paused", "other"));
        assert!(!only.wants("room.drained", "other"));
    }
}
